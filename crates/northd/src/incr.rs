//! Incremental recompute: after an NB change, re-run only the items the change touches and
//! turn their old and new flows into a list of flows whose datapaths changed.
//!
//! # How
//!
//! Items are pure functions of the context ([`crate::build::build_item`]). The engine
//! keeps the previous round's [`Ctx`] and the merged flows with, for each (flow, datapath),
//! how many items produced it ([`FlowState`]). Given the new context and the NB rows that
//! changed, [`dirty_items`] names the items whose output may differ — in the old context and
//! in the new one (a port added to a switch shifts the indices of the switch's later ports,
//! so "the same item" is not a stable notion; the old items' flows are subtracted and the
//! new items' flows added instead). [`FlowState::apply`] does the counting and reports each
//! flow whose set of datapaths changed ([`FlowChange`]); the SB sync writes just those.
//!
//! # Which changes are incremental
//!
//! Changes to VIF switch ports (`type` empty), switches (same name, same router ports and
//! load balancers), ACLs, port groups, address sets (same name) and load balancers (same
//! VIP addresses on routers, no health checks). Anything else — a datapath added, removed or
//! renamed, router-side tables, load-balancer groups, NB options, DHCP, QoS, … — asks for a
//! full recompute ([`dirty_items`] returns `None`), which is always correct.
//!
//! # Invariant
//!
//! After every round, [`FlowState`] equals what a full build of the new context gives
//! (`tests/incremental.rs` checks it after random change sequences).

use crate::build::{self, Ctx, DpKind, Item};
use crate::lflow::{DpId, Dps, Dup, FlowKey, Lflow, flow_hash};
use crate::stage::Stage;
use ovsdb::Uuid;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// The merged flows with per-datapath reference counts.
///
/// Each flow is held once, in a vector (the full round's SB plan borrows it as it is: no
/// copy), found by its key through a table of positions.
#[derive(Debug, Default, Clone)]
pub struct FlowState {
    /// The flows, one per key, in no order.
    flows: Vec<Lflow>,
    /// Positions in `flows`, hashed by key ([`flow_hash`]).
    index: hashbrown::HashTable<u32>,
    /// (flow, datapath) → how many items beyond the first produce it (absent = one).
    extra: FxHashMap<(FlowKey, DpId), u32>,
}

/// One flow whose datapaths changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowChange {
    /// The flow.
    pub key: FlowKey,
    /// Its datapaths before (`None`: it did not exist).
    pub before: Option<Dps>,
    /// Its datapaths after (`None`: it is gone).
    pub after: Option<Dps>,
}

impl FlowState {
    /// The state of a full build ([`crate::engine::build_with_dups`]), which it keeps.
    /// The flows' keys are hashed on `threads` threads; the index is filled on this one.
    pub fn from_build(flows: Vec<Lflow>, dups: Vec<Dup>, threads: usize) -> FlowState {
        let hashes = crate::par::par_map(&flows, threads, |f| {
            flow_hash(f.stage, f.priority, &f.match_, &f.actions)
        });
        let mut index = hashbrown::HashTable::with_capacity(flows.len());
        for (i, &h) in hashes.iter().enumerate() {
            index.insert_unique(h, i as u32, |&j| hashes[j as usize]);
        }
        let mut s = FlowState {
            flows,
            index,
            extra: FxHashMap::default(),
        };
        for (k, d, n) in dups {
            s.extra.insert((k, d), n - 1);
        }
        s
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// True when there are no flows.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Every flow, in no particular order.
    pub fn flows(&self) -> &[Lflow] {
        &self.flows
    }

    /// The position of the flow `key` in `flows`.
    fn find(&self, stage: Stage, priority: u16, m: &str, a: &str) -> Option<usize> {
        let flows = &self.flows;
        self.index
            .find(flow_hash(stage, priority, m, a), |&i| {
                let f = &flows[i as usize];
                f.stage == stage && f.priority == priority && f.match_ == m && f.actions == a
            })
            .map(|&i| i as usize)
    }

    /// The flow `key`'s datapaths.
    pub fn get(&self, key: &FlowKey) -> Option<&Dps> {
        self.find(key.0, key.1, &key.2, &key.3)
            .map(|i| &self.flows[i].dps)
    }

    /// Sets the flow `key`'s datapaths (`None`: removes it).
    fn set(&mut self, key: &FlowKey, dps: Option<Dps>) {
        let (stage, priority, m, a) = key;
        let at = self.find(*stage, *priority, m, a);
        match (at, dps) {
            (Some(i), Some(d)) => self.flows[i].dps = d,
            (None, Some(d)) => {
                let h = flow_hash(*stage, *priority, m, a);
                let flows = &self.flows;
                self.index.insert_unique(h, flows.len() as u32, |&j| {
                    let g = &flows[j as usize];
                    flow_hash(g.stage, g.priority, &g.match_, &g.actions)
                });
                if self.flows.len() == self.flows.capacity() {
                    // Grow by an eighth, not double: the vector of a full build is exactly
                    // full, and one added flow would otherwise hold 133k empty slots.
                    self.flows.reserve_exact(self.flows.len() / 8 + 16);
                }
                self.flows.push(Lflow {
                    stage: *stage,
                    priority: *priority,
                    match_: m.clone(),
                    actions: a.clone(),
                    dps: d,
                });
            }
            (Some(i), None) => {
                let h = flow_hash(*stage, *priority, m, a);
                if let Ok(e) = self.index.find_entry(h, |&j| j as usize == i) {
                    e.remove();
                }
                self.flows.swap_remove(i);
                // The last flow moved to `i`: point its entry there.
                if let Some(g) = self.flows.get(i) {
                    let last = self.flows.len() as u32;
                    let h = flow_hash(g.stage, g.priority, &g.match_, &g.actions);
                    if let Some(j) = self.index.find_mut(h, |&j| j == last) {
                        *j = i as u32;
                    }
                }
            }
            (None, None) => {}
        }
    }

    /// Every flow, sorted by key (for comparisons and printing).
    pub fn to_sorted_vec(&self) -> Vec<Lflow> {
        let mut v = self.flows.clone();
        v.sort_unstable_by(|a, b| a.key().cmp(&b.key()));
        v
    }

    /// Every (flow, datapath) with more than one producer, with the count (sorted).
    pub fn dups_sorted(&self) -> Vec<Dup> {
        let mut v: Vec<Dup> = self
            .extra
            .iter()
            .map(|((k, d), n)| (k.clone(), *d, n + 1))
            .collect();
        v.sort();
        v
    }

    /// Removes the contributions `old` and adds `new` (each flow counts once per datapath
    /// it names); returns the flows whose datapaths changed. An `old` contribution that is
    /// not in the state is an error (the state is then unchanged only up to that flow: the
    /// caller must rebuild it with a full recompute).
    pub fn apply(&mut self, old: Vec<Lflow>, new: Vec<Lflow>) -> Result<Vec<FlowChange>, String> {
        let mut net: FxHashMap<FlowKey, FxHashMap<DpId, i64>> = FxHashMap::default();
        for (flows, sign) in [(old, -1i64), (new, 1)] {
            for f in flows {
                let e = net
                    .entry((f.stage, f.priority, f.match_, f.actions))
                    .or_default();
                for &d in f.dps.as_slice() {
                    *e.entry(d).or_default() += sign;
                }
            }
        }
        let mut changes = Vec::new();
        for (key, deltas) in net {
            let before = self.get(&key).cloned();
            let have: &[DpId] = before.as_ref().map_or(&[], |d| d.as_slice());
            // Datapaths gained and lost; a count that moves between two non-zero values
            // leaves the flow's datapaths alone (most flows of a re-run item: the
            // datapath lists of flows shared by hundreds of datapaths are not copied).
            let (mut gained, mut lost) = (Vec::new(), Vec::new());
            for (d, delta) in deltas {
                if delta == 0 {
                    continue;
                }
                let xk = (key.clone(), d);
                let present = have.binary_search(&d).is_ok();
                let cur = if present {
                    1 + i64::from(self.extra.get(&xk).copied().unwrap_or(0))
                } else {
                    0
                };
                let n = cur + delta;
                if n < 0 {
                    return Err(format!(
                        "flow {:?} priority {} {:?} on datapath {}: removed more often than added",
                        key.0, key.1, key.2, d.0
                    ));
                }
                if n == 0 {
                    lost.push(d);
                } else if cur == 0 {
                    gained.push(d);
                }
                if n > 1 {
                    self.extra.insert(xk, (n - 1) as u32);
                } else {
                    self.extra.remove(&xk);
                }
            }
            if gained.is_empty() && lost.is_empty() {
                continue;
            }
            lost.sort_unstable();
            let mut dps: Vec<DpId> = have
                .iter()
                .copied()
                .filter(|d| lost.binary_search(d).is_err())
                .chain(gained)
                .collect();
            dps.sort_unstable();
            let after = Dps::from_sorted(dps);
            self.set(&key, after.clone());
            if before != after {
                changes.push(FlowChange { key, before, after });
            }
        }
        Ok(changes)
    }
}

/// The items whose flows may differ between `old` and `new` after the NB rows `changes`
/// (`(table, uuid)`) changed: (items to subtract, built with `old`; items to add, built
/// with `new`). `Err(why)` when the change needs a full recompute.
pub fn dirty_items(
    old: &Ctx,
    new: &Ctx,
    changes: &[(String, Uuid)],
) -> Result<(Vec<Item>, Vec<Item>), String> {
    // The shape the items are indexed by must not move.
    // (Shared parts — a patched context shares what it did not recompute — compare by
    // pointer first.)
    let same_dps = Arc::ptr_eq(&old.datapaths, &new.datapaths)
        || old.datapaths.len() == new.datapaths.len()
            && old
                .datapaths
                .iter()
                .zip(new.datapaths.iter())
                .all(|(a, b)| a.uuid == b.uuid && a.name == b.name && a.kind == b.kind);
    let shape = [
        (!same_dps, "datapaths added, removed or renamed"),
        (old.tunnel_keys != new.tunnel_keys, "datapath tunnel keys"),
        (
            old.lrp_tunnel_keys != new.lrp_tunnel_keys,
            "router port tunnel keys",
        ),
        (
            old.nb.global_options != new.nb.global_options,
            "NB_Global options",
        ),
        (old.all_nat_ips != new.all_nat_ips, "NAT addresses"),
        (
            old.svc_mon_src_ips != new.svc_mon_src_ips,
            "service monitors",
        ),
        (
            !same_classes(&old.switch_lb_classes, &new.switch_lb_classes),
            "switch load-balancer classes",
        ),
        (
            !same_classes(&old.router_lb_classes, &new.router_lb_classes),
            "router load-balancer classes",
        ),
        (
            !same_lists(&old.switch_lbs, &new.switch_lbs),
            "switch load balancers",
        ),
        (old.router_lbs != new.router_lbs, "router load balancers"),
    ];
    if let Some((_, why)) = shape.iter().find(|(changed, _)| *changed) {
        return Err((*why).to_owned());
    }
    let n_sw = new.nb.switches.len();
    let mut dirty_sw: FxHashSet<usize> = FxHashSet::default();
    let mut dirty_rt: FxHashSet<usize> = FxHashSet::default();
    let mut acls: FxHashSet<Uuid> = FxHashSet::default();
    let mut lbs: FxHashSet<Uuid> = FxHashSet::default();
    let sw_index = |c: &Ctx, u: Uuid| c.datapaths[..n_sw].iter().position(|d| d.uuid == u);
    for (t, u) in changes {
        match t.as_str() {
            "Logical_Switch_Port" => {
                for c in [old, new] {
                    if let Some(&(i, j)) = c.lsp_by_uuid.get(u) {
                        // Other port types reach into routers and other switches.
                        if !c.lsp(i, j).kind.is_empty() {
                            return Err(format!("a port of type {:?}", c.lsp(i, j).kind));
                        }
                        dirty_sw.insert(i);
                    }
                }
            }
            "Logical_Switch" => {
                // Same datapaths (checked above), so the switch is in both.
                dirty_sw.insert(sw_index(new, *u).ok_or("switch not found")?);
            }
            "ACL" => {
                acls.insert(*u);
            }
            "Load_Balancer" => {
                for c in [old, new] {
                    if let Some(lb) = c.nb.lbs.get(u)
                        && lb.row.uuids("health_check").next().is_some()
                    {
                        return Err("a health-checked load balancer".into());
                    }
                }
                lbs.insert(*u);
            }
            // Port groups show in the switches' applied ACLs (compared below) and in the SB
            // port groups and address sets (not flows).
            "Port_Group" => {}
            "Address_Set" => {
                // Flows name address sets by name (`$name`, in ACL and policy text we copy)
                // and NAT rules refer to them by UUID: a name change is a full recompute.
                let name = |c: &Ctx| {
                    c.nb.address_sets
                        .iter()
                        .find(|a| a.uuid == *u)
                        .map(|a| a.name.clone())
                };
                if name(old) != name(new) || name(new).is_none() {
                    return Err("address set added, removed or renamed".into());
                }
            }
            "NB_Global" => {}
            t => return Err(format!("a change to {t}")),
        }
    }
    if attachments(old, &dirty_sw) != attachments(new, &dirty_sw) {
        return Err("switch-router attachments".into());
    }
    for i in 0..n_sw {
        if old.switch_facts[i] != new.switch_facts[i] {
            dirty_sw.insert(i);
        }
    }
    for r in 0..new.nb.routers.len() {
        if old.router_lb_ips[r] != new.router_lb_ips[r] {
            dirty_rt.insert(r);
        }
    }
    let mut olds = Vec::new();
    let mut news = Vec::new();
    for &i in &dirty_sw {
        for (c, v) in [(old, &mut olds), (new, &mut news)] {
            v.push(Item::SwitchDp(i));
            v.extend((0..c.switch(i).ports.len()).map(|j| Item::SwitchPort(i, j)));
            v.extend(c.switch_acls[i].iter().map(|&a| Item::SwitchAcl(i, a)));
            // Router ports attached to the switch list its ports' addresses.
            for (rt, ports) in c.lrp_switch_peer.iter().enumerate() {
                for (p, peer) in ports.iter().enumerate() {
                    if peer.is_some_and(|(s, _)| s == i) && !dirty_rt.contains(&rt) {
                        v.push(Item::RouterPort(rt, p));
                    }
                }
            }
        }
    }
    for &r in &dirty_rt {
        for (c, v) in [(old, &mut olds), (new, &mut news)] {
            let rr = c.router(r);
            v.push(Item::RouterDp(r));
            v.extend((0..rr.ports.len()).map(|j| Item::RouterPort(r, j)));
            v.extend((0..rr.static_routes.len()).map(|j| Item::RouterRoute(r, j)));
            v.extend((0..rr.policies.len()).map(|j| Item::RouterPolicy(r, j)));
            v.extend((0..rr.nat.len()).map(|j| Item::RouterNat(r, j)));
            for (ci, class) in c.router_lb_classes.iter().enumerate() {
                if class.dps.as_slice().contains(&c.router_dp(r)) {
                    v.extend(class.lbs.iter().map(|&l| Item::RouterLb(ci, l)));
                }
            }
        }
    }
    // ACLs on switches not already rebuilt: the ACLs that changed, and those a port-group
    // change added to or removed from a switch.
    for i in 0..n_sw {
        if dirty_sw.contains(&i) {
            continue;
        }
        let (o, n) = (&old.switch_acls[i], &new.switch_acls[i]);
        if acls.is_empty() && Arc::ptr_eq(o, n) {
            continue;
        }
        let changed = |a: &Uuid| {
            acls.contains(a) || o.binary_search(a).is_err() != n.binary_search(a).is_err()
        };
        olds.extend(
            o.iter()
                .filter(|a| changed(a))
                .map(|&a| Item::SwitchAcl(i, a)),
        );
        news.extend(
            n.iter()
                .filter(|a| changed(a))
                .map(|&a| Item::SwitchAcl(i, a)),
        );
    }
    // Load balancers that changed, on every class that applies them.
    for (c, v) in [(old, &mut olds), (new, &mut news)] {
        for (ci, class) in c.switch_lb_classes.iter().enumerate() {
            v.extend(
                class
                    .lbs
                    .iter()
                    .filter(|l| lbs.contains(l))
                    .map(|&l| Item::SwitchLb(ci, l)),
            );
        }
        for (ci, class) in c.router_lb_classes.iter().enumerate() {
            let all_dirty =
                class
                    .dps
                    .as_slice()
                    .iter()
                    .all(|d| match c.datapaths[d.0 as usize].kind {
                        DpKind::Router(r) => dirty_rt.contains(&r),
                        DpKind::Switch(_) => false,
                    });
            if all_dirty {
                continue; // already listed with its routers
            }
            v.extend(
                class
                    .lbs
                    .iter()
                    .filter(|l| lbs.contains(l))
                    .map(|&l| Item::RouterLb(ci, l)),
            );
        }
    }
    // A class of routers lists its LB items once per dirty member: each item once.
    for v in [&mut olds, &mut news] {
        v.sort_unstable();
        v.dedup();
    }
    Ok((olds, news))
}

/// Which switch port attaches each router port attached to one of `switches`: (router,
/// router port, switch, switch port UUID). Switch port *indices* move when a port is added
/// before them; UUIDs do not. (A context patched for a change of some switches moves only
/// their attachments.)
fn attachments(c: &Ctx, switches: &FxHashSet<usize>) -> Vec<(usize, usize, usize, Uuid)> {
    let mut v = Vec::new();
    for (rt, ports) in c.lrp_switch_peer.iter().enumerate() {
        for (p, peer) in ports.iter().enumerate() {
            if let Some((si, sj)) = *peer
                && switches.contains(&si)
            {
                v.push((rt, p, si, c.lsp(si, sj).uuid));
            }
        }
    }
    v
}

/// Per-datapath lists compared by pointer first (`Arc<[T]>`'s `==` compares elements even
/// when both sides share the list: a node switch's 1,600 load balancers, 1,600 times).
fn same_lists<T: PartialEq>(a: &[Arc<[T]>], b: &[Arc<[T]>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y) || x == y)
}

fn same_classes(a: &Arc<Vec<build::LbClass>>, b: &Arc<Vec<build::LbClass>>) -> bool {
    Arc::ptr_eq(a, b)
        || a.len() == b.len()
            && a.iter()
                .zip(b.iter())
                .all(|(x, y)| x.rep == y.rep && x.dps == y.dps && x.lbs == y.lbs)
}

/// Builds `items` with `ctx`, unmerged.
pub fn build_items(ctx: &Ctx, items: &[Item]) -> Vec<Lflow> {
    let mut out = Vec::new();
    for &it in items {
        build::build_item(ctx, it, &mut out);
    }
    out
}

/// The engine's memory between rounds: the last context and its flows.
#[derive(Debug, Default)]
pub struct Engine {
    ctx: Option<Ctx>,
    state: FlowState,
    /// The context an incremental round replaced, dropped by [`Engine::tidy`] once the
    /// round's result is written (freeing it is not on the change's path).
    retired: Option<Ctx>,
}

impl Engine {
    /// The current flows.
    pub fn state(&self) -> &FlowState {
        &self.state
    }

    /// The context of the last round.
    pub fn ctx(&self) -> Option<&Ctx> {
        self.ctx.as_ref()
    }

    /// The context for the NB replica `db` after the rows `changes` changed: patched from the
    /// last round's ([`crate::nb::Nb::patched`], [`Ctx::patched`]) when the changes allow,
    /// else read whole with `threads` threads. Returns the context, the diagnostics found,
    /// and the patch when it was patched (then it carries the last round's tunnel keys,
    /// which a patch cannot move).
    pub fn next_ctx(
        &self,
        db: &ovsdb::Database,
        changes: &[(String, Uuid)],
        threads: usize,
    ) -> (Ctx, Vec<crate::nb::Diag>, Option<crate::nb::Patch>) {
        if let Some(old) = &self.ctx
            && !changes.is_empty()
            && let Ok((nb, diags, patch)) = old
                .nb
                .patched(db, changes, |u| old.lsp_by_uuid.get(&u).map(|&(i, _)| i))
        {
            let ctx = old.patched(nb, &patch);
            let mut all = diags;
            all.extend(ctx.diags.iter().cloned());
            return (ctx, all, Some(patch));
        }
        let (nb, mut diags) = crate::nb::Nb::from_db_threads(db, threads);
        let ctx = Ctx::new_threads(nb, threads);
        diags.extend(ctx.diags.iter().cloned());
        (ctx, diags, None)
    }

    /// What the SB bindings, groups and sets of a round patched with `patch` depend on:
    /// the rebuilt switches, the port groups that changed or hold a port of those switches
    /// (before or after), and the address sets that changed (names before and after).
    /// Call before [`Engine::incremental`] (it compares with the last round's context).
    pub fn binding_scope(&self, new: &Ctx, patch: &crate::nb::Patch) -> crate::sb::BindingScope {
        let mut scope = crate::sb::BindingScope {
            switches: patch.switches.clone(),
            ..Default::default()
        };
        let ctxs: Vec<&Ctx> = self.ctx.iter().chain([new]).collect();
        // The rebuilt switches' ports that were added, removed or changed: only port groups
        // holding one of those can differ.
        let rows = |c: &Ctx| -> FxHashMap<Uuid, *const ovsdb::Row> {
            patch
                .switches
                .iter()
                .flat_map(|&i| {
                    c.switch(i)
                        .ports
                        .iter()
                        .map(|p| (p.uuid, std::sync::Arc::as_ptr(&p.row)))
                })
                .collect()
        };
        let before = self.ctx.as_ref().map(rows).unwrap_or_default();
        let after = rows(new);
        let ports: FxHashSet<Uuid> = before
            .iter()
            .filter(|(u, r)| after.get(u) != Some(r))
            .chain(after.iter().filter(|(u, r)| before.get(u) != Some(r)))
            .map(|(u, _)| *u)
            .collect();
        for c in &ctxs {
            // A group holding one of those ports has a port on a rebuilt switch, so it is
            // in that switch's `switch_pgs` (in the context that holds the port).
            for &i in &patch.switches {
                for g in c.switch_pgs[i].iter() {
                    if g.ports.iter().any(|p| ports.contains(p)) {
                        scope.port_groups.insert(g.name.clone());
                    }
                }
            }
            if !patch.port_groups.is_empty() {
                for g in &c.nb.port_groups {
                    if patch.port_groups.contains(&g.uuid) {
                        scope.port_groups.insert(g.name.clone());
                    }
                }
            }
            if !patch.address_sets.is_empty() {
                for a in &c.nb.address_sets {
                    if patch.address_sets.contains(&a.uuid) {
                        scope.address_sets.insert(a.name.clone());
                    }
                }
            }
        }
        scope
    }

    /// Forgets everything (the next round is a full recompute).
    pub fn reset(&mut self) {
        self.reset_threads(1);
    }

    /// [`Engine::reset`], the flows freed on `threads` threads (at 800 nodes a round's
    /// flows are ≈ 270,000 allocations: ≈ 30 ms to free on one thread).
    pub fn reset_threads(&mut self, threads: usize) {
        let flows = std::mem::take(&mut self.state).flows;
        let rest = (self.ctx.take(), self.retired.take());
        crate::par::par_drop(flows, threads, rest);
    }

    /// Frees what the last round left behind (the context it replaced).
    pub fn tidy(&mut self) {
        self.retired = None;
    }

    /// A full recompute of `ctx` with `threads` threads; returns the flows (merged, in no
    /// order), which the state keeps ([`Engine::state`]).
    pub fn full(
        &mut self,
        ctx: Ctx,
        threads: usize,
        strategy: crate::engine::Strategy,
    ) -> &[Lflow] {
        // The last round's flows are not needed to build the new ones: they go first, so
        // the two sets are never held at once.
        self.reset_threads(threads);
        let (flows, dups) = crate::engine::build_with_dups(&ctx, threads, strategy);
        self.state = FlowState::from_build(flows, dups, threads);
        self.ctx = Some(ctx);
        self.state.flows()
    }

    /// Moves to `ctx` after the NB rows `changes` changed, re-running only the items they
    /// touch; returns the flows whose datapaths changed and the number of items run. `Err((ctx, why))` hands the context back when a full recompute is needed
    /// (no previous round, a change this engine does not follow, or an inconsistency).
    #[allow(clippy::result_large_err)]
    pub fn incremental(
        &mut self,
        ctx: Ctx,
        changes: &[(String, Uuid)],
    ) -> Result<(Vec<FlowChange>, usize), (Ctx, String)> {
        let Some(old) = self.ctx.as_ref() else {
            return Err((ctx, "no previous round".into()));
        };
        let (olds, news) = match dirty_items(old, &ctx, changes) {
            Ok(v) => v,
            Err(why) => return Err((ctx, why)),
        };
        let n_items = olds.len() + news.len();
        let old_flows = build_items(old, &olds);
        let new_flows = build_items(&ctx, &news);
        match self.state.apply(old_flows, new_flows) {
            Ok(changes) => {
                self.retired = self.ctx.replace(ctx);
                Ok((changes, n_items))
            }
            Err(e) => {
                self.reset();
                Err((ctx, e))
            }
        }
    }
}
