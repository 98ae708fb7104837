//! The southbound side: what northd wants the SB to hold (datapath and port bindings with
//! tunnel keys, multicast groups, port groups, address sets, logical flows with datapath
//! groups), and the transactions that move a running SB from what it holds to that —
//! only the differences.
//!
//! Identity: a datapath binding is the NB row it comes from (`external_ids:logical-switch`
//! or `logical-router`); a port binding is its `logical_port`; a multicast group is
//! (datapath, name); port groups and address sets are their names; a logical flow is
//! (datapaths, pipeline, table, priority, match, actions). Tunnel keys already in the SB
//! are kept; new ones take the lowest free value.
//!
//! Writes come in batches: first one transaction for bindings, groups and sets (flows
//! refer to datapaths by UUID), then logical flows and their datapath groups in
//! transactions of at most [`FLOW_BATCH`] flows.

use crate::build::{Ctx, DpKind};
use crate::lflow::{DpId, Lflow};
use crate::nb::Smap;
use crate::stage::Stage;
use ovsdb::{Database, Row, RowEvent, StreamEvent, Uuid};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Logical flows inserted per transaction.
pub const FLOW_BATCH: usize = 20_000;

/// Multicast group keys (OVN's fixed assignments).
const MC_FLOOD: (&str, i64) = ("_MC_flood", 32768);
const MC_UNKNOWN: (&str, i64) = ("_MC_unknown", 32769);
const MC_MROUTER_FLOOD: (&str, i64) = ("_MC_mrouter_flood", 32770);
const MC_FLOOD_L2: (&str, i64) = ("_MC_flood_l2", 32772);

/// A port binding as northd wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SbPort {
    /// `logical_port`.
    pub name: String,
    /// Datapath index (into [`Ctx::datapaths`]).
    pub dp: usize,
    /// `type`.
    pub kind: String,
    /// `options`.
    pub options: Smap,
    /// `mac`.
    pub mac: Vec<String>,
    /// `port_security`.
    pub port_security: Vec<String>,
    /// `external_ids`.
    pub external_ids: Smap,
}

/// The SB contents northd derives from the NB (tunnel keys are assigned when syncing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SbWant {
    /// Per datapath: `external_ids`.
    pub dp_external_ids: Vec<Smap>,
    /// Port bindings.
    pub ports: Vec<SbPort>,
    /// Multicast groups: (datapath, name, key, port names).
    pub mcast: Vec<Mcast>,
    /// Port groups: SB name (`<dp key>_<name>` is made at sync) → (datapath, ports).
    pub port_groups: Vec<(usize, String, Vec<String>)>,
    /// Address sets: name → addresses.
    pub address_sets: BTreeMap<String, Vec<String>>,
    /// Per router datapath with load-balancer VIPs inside its networks: those VIPs, IPv4
    /// and IPv6 (`_rtr_lb_<dp key>_ip4` / `_ip6`, named at sync when the key is known).
    pub rtr_lb_sets: Vec<(usize, Vec<String>, Vec<String>)>,
}

/// Derives the SB bindings, groups and sets from the NB.
pub fn want(ctx: &Ctx) -> SbWant {
    want_threads(ctx, 1)
}

/// [`want`] with the per-datapath, per-port and per-group parts made by `threads` threads.
pub fn want_threads(ctx: &Ctx, threads: usize) -> SbWant {
    let nb = &*ctx.nb;
    let dp_external_ids = crate::par::par_map(&ctx.datapaths, threads, |d| {
        let mut e = Smap::new();
        e.insert("name".into(), d.name.clone());
        match d.kind {
            DpKind::Switch(_) => {
                e.insert("logical-switch".into(), d.uuid.to_string());
            }
            DpKind::Router(i) => {
                e.insert("logical-router".into(), d.uuid.to_string());
                for k in ["always_learn_from_arp_request", "snat-ct-zone"] {
                    if let Some(v) = nb.routers[i].options.get(k) {
                        e.insert(k.into(), v.clone());
                    }
                }
            }
        }
        e
    });
    let mut w = SbWant {
        dp_external_ids,
        ..SbWant::default()
    };
    let idx: Vec<usize> = (0..nb.switches.len()).collect();
    let parts: Vec<(Vec<SbPort>, Vec<Mcast>)> =
        crate::par::par_map(&idx, threads, |&i| switch_want(ctx, i));
    for (p, m) in parts {
        w.ports.extend(p);
        w.mcast.extend(m);
    }
    let routers: Vec<usize> = (0..nb.routers.len()).collect();
    let router_ports = crate::par::par_map(&routers, threads, |&i| {
        let r = &nb.routers[i];
        let dp = ctx.router_dp(i).0 as usize;
        let mut ports = Vec::with_capacity(r.ports.len());
        for (j, p) in r.ports.iter().enumerate() {
            let mut options = Smap::new();
            let mut kind = "patch".to_owned();
            if let Some((si, sj)) = ctx.lrp_switch_peer[i][j] {
                options.insert("peer".into(), nb.switches[si].ports[sj].name.clone());
            }
            if let Some(ch) = r.options.get("chassis") {
                options.insert("l3gateway-chassis".into(), ch.clone());
                kind = "l3gateway".into();
            }
            let mut mac = p.mac.clone();
            for n in &p.networks {
                mac.push(' ');
                mac.push_str(n);
            }
            ports.push(SbPort {
                name: p.name.clone(),
                dp,
                kind,
                options,
                mac: vec![mac],
                port_security: Vec::new(),
                external_ids: Smap::new(),
            });
        }
        ports
    });
    w.ports.extend(router_ports.into_iter().flatten());
    // Port groups: one SB group per datapath the group has ports on; and the
    // `<pg>_ip4`/`<pg>_ip6` address sets of the group's port addresses.
    // (The names are made on the threads too; only the moves into `w` are serial.)
    let pgs = crate::par::par_map(&nb.port_groups, threads, |pg| {
        let (per_dp, v4, v6) = pg_want(ctx, pg);
        let per_dp: Vec<_> = per_dp
            .into_iter()
            .map(|(dp, ports)| (dp, pg.name.clone(), ports))
            .collect();
        let sets = [
            (format!("{}_ip4", pg.name), v4),
            (format!("{}_ip6", pg.name), v6),
        ];
        (per_dp, sets)
    });
    for (per_dp, sets) in pgs {
        w.port_groups.extend(per_dp);
        w.address_sets.extend(sets);
    }
    for a in &nb.address_sets {
        w.address_sets.insert(a.name.clone(), a.addresses.clone());
    }
    w.rtr_lb_sets = crate::par::par_map(&routers, threads, |&i| rtr_lb_set(ctx, i))
        .into_iter()
        .flatten()
        .collect();
    w
}

/// Router `i`'s `_rtr_lb_<key>_ip4` / `_ip6` sets: the VIPs of its load balancers inside
/// its networks, as (datapath, v4, v6); `None` when no VIP of it can reach them.
fn rtr_lb_set(ctx: &Ctx, i: usize) -> Option<(usize, Vec<String>, Vec<String>)> {
    let nb = &*ctx.nb;
    let (r4, r6) = ctx.lr_index[i].lb_reach;
    if !r4 && !r6 {
        return None;
    }
    let nets = &ctx.lrp_networks[i];
    let inside = |ip: &std::net::IpAddr| {
        nets.iter().flatten().any(|la| match ip {
            std::net::IpAddr::V4(a) => la.ipv4.iter().any(|n| {
                n.network()
                    == crate::addr::Ipv4Net {
                        addr: *a,
                        plen: n.plen,
                    }
                    .network()
            }),
            std::net::IpAddr::V6(a) => la.ipv6.iter().any(|n| {
                n.network()
                    == crate::addr::Ipv6Net {
                        addr: *a,
                        plen: n.plen,
                    }
                    .network()
            }),
        })
    };
    let (mut v4, mut v6) = (BTreeSet::new(), BTreeSet::new());
    for u in ctx.router_lbs[i].iter() {
        let Some(lb) = nb.lbs.get(u) else { continue };
        for (k, _) in &lb.vips {
            match crate::build::lb_vip_ip(k) {
                Some(ip @ std::net::IpAddr::V4(a)) if inside(&ip) => {
                    v4.insert(a.to_string());
                }
                Some(ip @ std::net::IpAddr::V6(a)) if inside(&ip) => {
                    v6.insert(a.to_string());
                }
                _ => {}
            }
        }
    }
    Some((
        ctx.router_dp(i).0 as usize,
        v4.into_iter().collect(),
        v6.into_iter().collect(),
    ))
}

/// A multicast group as northd wants it: (datapath, name, key, port names).
pub type Mcast = (usize, &'static str, i64, Vec<String>);

/// Switch `i`'s port bindings and multicast groups.
fn switch_want(ctx: &Ctx, i: usize) -> (Vec<SbPort>, Vec<Mcast>) {
    let nb = &*ctx.nb;
    let sw = &nb.switches[i];
    let mut ports = Vec::with_capacity(sw.ports.len());
    let mut mcast = Vec::new();
    let dp = ctx.switch_dp(i).0 as usize;
    let (mut flood, mut unknown, mut mrouter, mut l2) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (j, p) in sw.ports.iter().enumerate() {
        let mut options = p.options.clone();
        let mut kind = p.kind.clone();
        if let Some((ri, rj)) = ctx.lsp_router_peer[i][j] {
            let r = &nb.routers[ri];
            options.clear();
            options.insert("peer".into(), r.ports[rj].name.clone());
            kind = "patch".into();
            if let Some(ch) = r.options.get("chassis") {
                options.insert("l3gateway-chassis".into(), ch.clone());
                kind = "l3gateway".into();
            }
            if r.options.get("mcast_relay").map(String::as_str) == Some("true") {
                mrouter.push(p.name.clone());
            }
        } else {
            l2.push(p.name.clone());
        }
        if p.is_enabled() {
            flood.push(p.name.clone());
        }
        if p.addresses.iter().any(|a| a == "unknown") {
            unknown.push(p.name.clone());
        }
        ports.push(SbPort {
            name: p.name.clone(),
            dp,
            kind,
            options,
            mac: p.addresses.clone(),
            port_security: p.port_security.clone(),
            external_ids: p.external_ids.clone(),
        });
    }
    for (g, ports) in [
        (MC_FLOOD, flood),
        (MC_UNKNOWN, unknown),
        (MC_MROUTER_FLOOD, mrouter),
        (MC_FLOOD_L2, l2),
    ] {
        if !ports.is_empty() {
            mcast.push((dp, g.0, g.1, ports));
        }
    }
    (ports, mcast)
}

/// A port group's SB port groups (one per datapath it has ports on: (datapath, ports)) and
/// its `<pg>_ip4` / `<pg>_ip6` address sets.
type PgWant = (Vec<(usize, Vec<String>)>, Vec<String>, Vec<String>);

/// [`PgWant`] of port group `pg`.
fn pg_want(ctx: &Ctx, pg: &crate::nb::PortGroup) -> PgWant {
    let nb = &*ctx.nb;
    let mut per_dp: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let (mut v4, mut v6) = (BTreeSet::new(), BTreeSet::new());
    for u in &pg.ports {
        let Some(&(i, j)) = ctx.lsp_by_uuid.get(u) else {
            continue;
        };
        let p = &nb.switches[i].ports[j];
        per_dp
            .entry(ctx.switch_dp(i).0 as usize)
            .or_default()
            .push(p.name.clone());
        for a in &p.addresses {
            if let Some(la) = crate::addr::parse_lsp_addresses(a) {
                v4.extend(la.ipv4.iter().map(|n| n.addr.to_string()));
                v6.extend(la.ipv6.iter().map(|n| n.addr.to_string()));
            }
        }
    }
    (
        per_dp.into_iter().collect(),
        v4.into_iter().collect(),
        v6.into_iter().collect(),
    )
}

fn smap_json(m: &Smap) -> Value {
    json!([
        "map",
        m.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()
    ])
}

fn set_json(v: &[String]) -> Value {
    json!(["set", v])
}

fn uuid_json(u: Uuid) -> Value {
    json!(["uuid", u.to_string()])
}

fn where_uuid(u: Uuid) -> Value {
    json!([["_uuid", "==", uuid_json(u)]])
}

/// Lowest free keys from `start`, skipping `used`.
fn next_free(used: &mut HashSet<i64>, start: i64) -> i64 {
    let mut k = start;
    while used.contains(&k) {
        k += 1;
    }
    used.insert(k);
    k
}

/// The transactions that bring an SB replica to `want` plus `flows`
/// ([`SyncPlan::into_txns`]; each is one transaction's operations). The first holds
/// bindings, groups and sets, new datapath groups with their flows, and deletions; later
/// ones insert logical flows in batches of [`FLOW_BATCH`], their JSON built only when the
/// batch is taken (a first sync's operations, built all at once, were most of the daemon's
/// peak memory). Datapaths new to the SB make a second round necessary for their flows:
/// `flows_ready` is false then, and the caller syncs again after the first transaction has
/// been applied to the replica.
pub struct SyncPlan<'a> {
    /// Operations per transaction, built.
    txns: Vec<Vec<Value>>,
    /// Flows still to insert, with the datapath or existing group each goes on.
    pending: Vec<(&'a Lflow, Target)>,
    /// False when flows for new datapaths still wait for their UUIDs.
    pub flows_ready: bool,
    /// Flows inserted, flows deleted (counts).
    pub flows_added: usize,
    /// Flows deleted.
    pub flows_deleted: usize,
}

/// Where a pending flow goes: one datapath's row or an existing datapath group.
#[derive(Debug, Clone, Copy)]
enum Target {
    Dp(Uuid),
    Group(Uuid),
}

impl<'a> SyncPlan<'a> {
    /// True when nothing is to be written.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.txns.iter().all(Vec::is_empty)
    }

    /// The number of transactions.
    pub fn n_txns(&self) -> usize {
        self.txns.len() + self.pending.len().div_ceil(FLOW_BATCH)
    }

    /// The transactions, in order; each batch of flow inserts is built as it is taken.
    pub fn into_txns(self) -> impl Iterator<Item = Vec<Value>> + 'a {
        let mut pending = self.pending;
        let mut batches = Vec::new();
        while !pending.is_empty() {
            let tail = pending.split_off(pending.len().min(FLOW_BATCH));
            batches.push(std::mem::replace(&mut pending, tail));
        }
        self.txns.into_iter().chain(batches.into_iter().map(|b| {
            b.into_iter()
                .map(|(f, t)| {
                    let target = match t {
                        Target::Dp(u) => ("logical_datapath", u),
                        Target::Group(g) => ("logical_dp_group", g),
                    };
                    let mut row = flow_row(f);
                    row[target.0] = uuid_json(target.1);
                    json!({"op": "insert", "table": "Logical_Flow", "row": row})
                })
                .collect()
        }))
    }
}

/// A logical flow's row, without its datapath or group.
fn flow_row(f: &Lflow) -> Value {
    json!({
        "pipeline": f.stage.pipeline().name(),
        "table_id": f.stage.table(),
        "priority": f.priority,
        "match": f.match_,
        "actions": f.actions,
        "external_ids": ["map", [["stage-name", f.stage.name()]]],
    })
}

impl std::fmt::Debug for SyncPlan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncPlan")
            .field("txns", &self.n_txns())
            .field("flows_ready", &self.flows_ready)
            .field("flows_added", &self.flows_added)
            .field("flows_deleted", &self.flows_deleted)
            .finish()
    }
}

/// Plans the SB transactions (see [`SyncPlan`]); with `flows` `None`, only the bindings,
/// groups and sets (logical flows are left as they are). One thread: [`plan_threads`].
pub fn plan<'a>(
    ctx: &Ctx,
    want: &SbWant,
    flows: Option<&'a [Lflow]>,
    sb: &Database,
    cache: Option<&mut FlowCache>,
) -> SyncPlan<'a> {
    plan_threads(ctx, want, flows, sb, cache, 1)
}

/// [`plan`] on `threads` threads: with two or more, the bindings (ports, multicast groups,
/// port groups, address sets) are compared on one thread, which then joins the others in
/// comparing the logical flows, in chunks. The plan is the same for every thread count.
pub fn plan_threads<'a>(
    ctx: &Ctx,
    want: &SbWant,
    flows: Option<&'a [Lflow]>,
    sb: &Database,
    cache: Option<&mut FlowCache>,
    threads: usize,
) -> SyncPlan<'a> {
    let mut base = Vec::new();
    let dps = plan_datapaths(ctx, want, sb, &mut base);
    let flows_ready = dps.uuid.iter().all(Option::is_some);
    // The flows are compared in datapath-index space: our flows are unique per key with
    // sorted datapaths already; each SB datapath group is mapped and sorted once.
    let mut own_cache;
    let flow_input = match (flows_ready, flows) {
        (true, Some(flows)) => {
            let dpu: Vec<Uuid> = dps.uuid.iter().map(|u| u.unwrap_or_default()).collect();
            let cache = match cache {
                Some(c) => c,
                None => {
                    own_cache = FlowCache::from_db(sb);
                    &mut own_cache
                }
            };
            if cache.dp_uuid != dpu {
                cache.remap(sb, &dpu);
            }
            Some((flows, &*cache, dpu))
        }
        _ => None,
    };
    // The bindings on one thread, which then helps with the flows; the flows in chunks.
    let group_by_set = flow_input
        .as_ref()
        .map(|(_, cache, _)| cache.group_by_set())
        .unwrap_or_default();
    let chunks: Vec<&'a [Lflow]> = flow_input
        .as_ref()
        .map(|(flows, _, _)| flows.chunks(FLOW_CHUNK).collect())
        .unwrap_or_default();
    let (bind_ops, parts) = crate::par::par_map_with(
        &chunks,
        threads,
        || plan_bindings(want, sb, &dps),
        |chunk| match &flow_input {
            Some((_, cache, dpu)) => flow_chunk(chunk, cache, dpu, &group_by_set),
            None => FlowChunk::default(),
        },
    );
    let flow_plan = flow_input
        .as_ref()
        .map(|(flows, cache, _)| finish_flows(flows, parts, cache, &dps.refs));
    base.extend(bind_ops);
    let mut pending = Vec::new();
    let (mut flows_added, mut flows_deleted) = (0, 0);
    if let Some(fp) = flow_plan {
        flows_added = fp.added;
        flows_deleted = fp.deleted;
        base.extend(fp.first);
        pending = fp.pending;
    }
    let mut txns = vec![base];
    txns.retain(|t| !t.is_empty());
    SyncPlan {
        txns,
        pending,
        flows_ready,
        flows_added,
        flows_deleted,
    }
}

/// How a plan refers to our datapaths: per datapath index, the JSON to name it by (its SB
/// UUID, or the named UUID of its insert), its SB UUID when it has one, and its key.
struct DpRefs {
    refs: Vec<Value>,
    uuid: Vec<Option<Uuid>>,
    key: Vec<i64>,
}

/// The datapath bindings' part of a plan: deletes, updates and inserts into `ops`.
fn plan_datapaths(ctx: &Ctx, want: &SbWant, sb: &Database, ops: &mut Vec<Value>) -> DpRefs {
    // Datapaths, keyed by NB UUID.
    let mut sb_dp: HashMap<Uuid, (Uuid, i64)> = HashMap::default();
    let mut used_dp_keys = HashSet::default();
    for (&u, r) in &sb.table("Datapath_Binding").rows {
        let key = r.int("tunnel_key").unwrap_or(0);
        match crate::sb_index::bound_nb_datapath(r) {
            Some(n) if !sb_dp.contains_key(&n) => {
                sb_dp.insert(n, (u, key));
                used_dp_keys.insert(key);
            }
            _ => ops
                .push(json!({"op": "delete", "table": "Datapath_Binding", "where": where_uuid(u)})),
        }
    }
    let wanted_nb: HashSet<Uuid> = ctx.datapaths.iter().map(|d| d.uuid).collect();
    for (n, (u, _)) in &sb_dp {
        if !wanted_nb.contains(n) {
            ops.push(json!({"op": "delete", "table": "Datapath_Binding", "where": where_uuid(*u)}));
        }
    }
    let n = ctx.datapaths.len();
    let mut dps = DpRefs {
        refs: Vec::with_capacity(n),
        uuid: Vec::with_capacity(n),
        key: Vec::with_capacity(n),
    };
    for (i, d) in ctx.datapaths.iter().enumerate() {
        let row = json!({"external_ids": smap_json(&want.dp_external_ids[i])});
        match sb_dp.get(&d.uuid) {
            Some(&(u, key)) => {
                if !sb
                    .row("Datapath_Binding", u)
                    .is_some_and(|r| smap_eq(r, "external_ids", &want.dp_external_ids[i]))
                {
                    ops.push(json!({"op": "update", "table": "Datapath_Binding", "where": where_uuid(u), "row": row}));
                }
                dps.refs.push(uuid_json(u));
                dps.uuid.push(Some(u));
                dps.key.push(key);
            }
            None => {
                let key = next_free(&mut used_dp_keys, 1);
                let name = format!("dp{i}");
                let mut row = row;
                row["tunnel_key"] = json!(key);
                ops.push(json!({"op": "insert", "table": "Datapath_Binding", "uuid-name": name, "row": row}));
                dps.refs.push(json!(["named-uuid", name]));
                dps.uuid.push(None);
                dps.key.push(key);
            }
        }
    }
    dps
}

/// The bindings' part of a plan after the datapaths: port bindings, multicast groups, port
/// groups and address sets.
fn plan_bindings(want: &SbWant, sb: &Database, dps: &DpRefs) -> Vec<Value> {
    let mut ops = Vec::new();
    // Port bindings, keyed by logical_port.
    let mut sb_pb: HashMap<&str, (Uuid, &Row)> = HashMap::default();
    for (&u, r) in &sb.table("Port_Binding").rows {
        if sb_pb.insert(r.str("logical_port"), (u, r)).is_some() {
            ops.push(json!({"op": "delete", "table": "Port_Binding", "where": where_uuid(u)}));
        }
    }
    let mut used_port_keys: HashMap<usize, HashSet<i64>> = HashMap::default();
    for p in &want.ports {
        if let Some((_, r)) = sb_pb.get(p.name.as_str())
            && r.get("datapath").keys.first().and_then(|a| a.as_uuid()) == dps.uuid[p.dp]
        {
            used_port_keys
                .entry(p.dp)
                .or_default()
                .insert(r.int("tunnel_key").unwrap_or(0));
        }
    }
    let wanted_ports: HashSet<&str> = want.ports.iter().map(|p| p.name.as_str()).collect();
    for (name, (u, _)) in &sb_pb {
        if !wanted_ports.contains(name) {
            ops.push(json!({"op": "delete", "table": "Port_Binding", "where": where_uuid(*u)}));
        }
    }
    let mut port_ref: HashMap<&str, PortRef> = HashMap::default();
    for (n, p) in want.ports.iter().enumerate() {
        let on_dp = sb_pb.get(p.name.as_str()).filter(|(_, r)| {
            r.get("datapath").keys.first().and_then(|a| a.as_uuid()) == dps.uuid[p.dp]
        });
        let elsewhere = sb_pb.get(p.name.as_str()).map(|&(u, _)| u);
        let used = used_port_keys.entry(p.dp).or_default();
        let r = sync_port(
            &mut ops,
            n,
            p,
            on_dp.copied(),
            elsewhere,
            &dps.refs[p.dp],
            used,
        );
        port_ref.insert(&p.name, r);
    }
    // Multicast groups: rewritten when their ports differ.
    let mut sb_mc: HashMap<(Uuid, &str), (Uuid, &Row)> = HashMap::default();
    for (&u, r) in &sb.table("Multicast_Group").rows {
        if let Some(d) = r.get("datapath").keys.first().and_then(|a| a.as_uuid()) {
            sb_mc.insert((d, r.str("name")), (u, r));
        }
    }
    let mut wanted_mc = HashSet::default();
    for m in &want.mcast {
        let existing = dps.uuid[m.0].and_then(|d| sb_mc.get(&(d, m.1))).copied();
        if let Some((u, _)) = existing {
            wanted_mc.insert(u);
        }
        sync_mcast(&mut ops, m, existing, &dps.refs[m.0], &port_ref);
    }
    for (u, _) in sb_mc.values() {
        if !wanted_mc.contains(u) {
            ops.push(json!({"op": "delete", "table": "Multicast_Group", "where": where_uuid(*u)}));
        }
    }
    // Port groups and address sets, by name.
    let pgs: BTreeMap<String, &[String]> = want
        .port_groups
        .iter()
        .map(|(dp, name, ports)| (format!("{}_{}", dps.key[*dp], name), ports.as_slice()))
        .collect();
    let all = |t: &str| sb.table(t).rows.iter().map(|(u, r)| (*u, &**r));
    sync_named(
        &mut ops,
        all("Port_Group"),
        "Port_Group",
        "ports",
        &pgs,
        |_| true,
    );
    sync_named(
        &mut ops,
        all("Address_Set"),
        "Address_Set",
        "addresses",
        &want.address_sets,
        |_| true,
    );
    ops
}

/// The logical flows' part of a plan.
struct FlowPlan<'a> {
    /// For the first transaction: new datapath groups, the flows on them, deletions.
    first: Vec<Value>,
    /// Flows to insert on a datapath or an existing group, in later transactions.
    pending: Vec<(&'a Lflow, Target)>,
    added: usize,
    deleted: usize,
}

/// What a chunk of flows needs, in flow order ([`flow_chunk`]).
#[derive(Default)]
struct FlowChunk<'a> {
    /// Flows the SB holds.
    claimed: usize,
    /// Second and later rows holding one of those flows.
    dups: Vec<Uuid>,
    /// Flows to insert on one datapath or an existing group.
    pending: Vec<(&'a Lflow, Target)>,
    /// Flows whose datapaths no SB group has yet.
    ungrouped: Vec<&'a Lflow>,
}

/// Flows compared per chunk: small enough to share out evenly, large enough that a chunk's
/// vectors cost little.
const FLOW_CHUNK: usize = 1024;

/// Compares a chunk of flows with the SB rows `cache` holds.
fn flow_chunk<'a>(
    chunk: &'a [Lflow],
    cache: &FlowCache,
    dpu: &[Uuid],
    group_by_set: &HashMap<&[DpId], Uuid>,
) -> FlowChunk<'a> {
    let mut c = FlowChunk::default();
    for f in chunk {
        let dps = f.dps.as_slice();
        let mut us = cache.rows_of(f);
        if us.next().is_some() {
            // Keep one; duplicates go.
            c.claimed += 1;
            for u in us {
                c.claimed += 1;
                c.dups.push(u);
            }
        } else if dps.len() == 1 {
            c.pending.push((f, Target::Dp(dpu[dps[0].0 as usize])));
        } else if let Some(&g) = group_by_set.get(dps) {
            c.pending.push((f, Target::Group(g)));
        } else {
            c.ungrouped.push(f);
        }
    }
    c
}

/// The flows' part of a plan from the chunks' results ([`flow_chunk`], in flow order):
/// new datapath groups named in flow order, and the rows no flow claimed deleted.
fn finish_flows<'a>(
    flows: &'a [Lflow],
    parts: Vec<FlowChunk<'a>>,
    cache: &FlowCache,
    dp_ref: &[Value],
) -> FlowPlan<'a> {
    // Our flows are unique per key: each claims one SB row of its key; every row left
    // unclaimed goes.
    let mut deletes: Vec<Uuid> = cache.unusable.iter().copied().collect();
    let mut claimed = 0usize;
    let mut pending = Vec::new();
    let mut named = Vec::new();
    let mut new_groups: HashMap<&[DpId], String> = HashMap::default();
    let mut group_ops = Vec::new();
    for c in parts {
        claimed += c.claimed;
        deletes.extend(c.dups);
        pending.extend(c.pending);
        for f in c.ungrouped {
            let dps = f.dps.as_slice();
            let n = new_groups.len();
            let name = new_groups.entry(dps).or_insert_with(|| {
                let name = format!("g{n}");
                group_ops.push(json!({"op": "insert", "table": "Logical_DP_Group", "uuid-name": name,
                    "row": {"datapaths": ["set", dps.iter().map(|d| dp_ref[d.0 as usize].clone()).collect::<Vec<_>>()]}}));
                name
            });
            // A flow on a new group goes in the group's transaction (the first).
            let mut row = flow_row(f);
            row["logical_dp_group"] = json!(["named-uuid", name.clone()]);
            named.push(json!({"op": "insert", "table": "Logical_Flow", "row": row}));
        }
    }
    if claimed < cache.rows.len() {
        // Rows holding none of our flows: every cached row not claimed above.
        let ours: HashSet<Uuid> = flows.iter().flat_map(|f| cache.rows_of(f)).collect();
        deletes.extend(
            cache
                .rows
                .keys()
                .map(|&i| Uuid::from(i))
                .filter(|u| !ours.contains(u)),
        );
    }
    let added = named.len() + pending.len();
    let deleted = deletes.len();
    let mut first: Vec<Value> = group_ops;
    first.extend(named);
    first.extend(
        deletes
            .into_iter()
            .map(|u| json!({"op": "delete", "table": "Logical_Flow", "where": where_uuid(u)})),
    );
    FlowPlan {
        first,
        pending,
        added,
        deleted,
    }
}

/// A port's binding: its SB row, or the named UUID of its insert in this transaction.
enum PortRef {
    Row(Uuid),
    Named(String),
}

impl PortRef {
    fn json(&self) -> Value {
        match self {
            PortRef::Row(u) => uuid_json(*u),
            PortRef::Named(n) => json!(["named-uuid", n]),
        }
    }
}

/// Brings port `p`'s binding in line: `on_dp` is its SB row on the wanted datapath,
/// `elsewhere` a row of the same name on another one (replaced). `n` names the insert;
/// `used` holds the datapath's port keys in use. Returns how to refer to the binding.
fn sync_port(
    ops: &mut Vec<Value>,
    n: usize,
    p: &SbPort,
    on_dp: Option<(Uuid, &Row)>,
    elsewhere: Option<Uuid>,
    dp_ref: &Value,
    used: &mut HashSet<i64>,
) -> PortRef {
    // Built only for rows that are written: most ports are unchanged.
    let row = || {
        json!({
            "datapath": dp_ref,
            "type": p.kind,
            "options": smap_json(&p.options),
            "mac": set_json(&p.mac),
            "port_security": set_json(&p.port_security),
            "external_ids": smap_json(&p.external_ids),
        })
    };
    if let Some((u, r)) = on_dp {
        let same = r.str("type") == p.kind
            && smap_eq(r, "options", &p.options)
            && strs_eq(r, "mac", &p.mac)
            && strs_eq(r, "port_security", &p.port_security)
            && smap_eq(r, "external_ids", &p.external_ids);
        if !same {
            ops.push(json!({"op": "update", "table": "Port_Binding", "where": where_uuid(u), "row": row()}));
        }
        return PortRef::Row(u);
    }
    if let Some(u) = elsewhere {
        // Moved to another datapath: replace the binding.
        ops.push(json!({"op": "delete", "table": "Port_Binding", "where": where_uuid(u)}));
    }
    let key = next_free(used, 1);
    let name = format!("pb{n}");
    let mut row = row();
    row["logical_port"] = json!(p.name);
    row["tunnel_key"] = json!(key);
    ops.push(json!({"op": "insert", "table": "Port_Binding", "uuid-name": name, "row": row}));
    PortRef::Named(name)
}

/// Brings multicast group `m` in line with its SB row `existing` (inserted when `None`),
/// rewritten when its ports or key differ.
fn sync_mcast(
    ops: &mut Vec<Value>,
    m: &Mcast,
    existing: Option<(Uuid, &Row)>,
    dp_ref: &Value,
    port_ref: &HashMap<&str, PortRef>,
) {
    let (_, name, key, ports) = m;
    let refs: Vec<&PortRef> = ports
        .iter()
        .filter_map(|p| port_ref.get(p.as_str()))
        .collect();
    let row = || {
        let refs: Vec<Value> = refs.iter().map(|r| r.json()).collect();
        json!({"datapath": dp_ref, "name": name, "tunnel_key": key, "ports": ["set", refs]})
    };
    match existing {
        Some((u, r)) => {
            let have: BTreeSet<Uuid> = r.uuids("ports").collect();
            let all_known = refs.iter().all(|r| matches!(r, PortRef::Row(_)));
            let want_set: BTreeSet<Uuid> = refs
                .iter()
                .filter_map(|r| match r {
                    PortRef::Row(u) => Some(*u),
                    PortRef::Named(_) => None,
                })
                .collect();
            if !all_known || have != want_set || r.int("tunnel_key") != Some(*key) {
                ops.push(json!({"op": "update", "table": "Multicast_Group", "where": where_uuid(u), "row": row()}));
            }
        }
        None => ops.push(json!({"op": "insert", "table": "Multicast_Group", "row": row()})),
    }
}

/// Brings the rows of `table` named `in_scope` in line with `want` (name → `col`'s
/// strings): updates, inserts, and deletes of rows in scope that `want` lacks. `rows` are
/// the table's rows to look at (all, or at least all in scope); rows out of scope are left
/// alone.
fn sync_named<'a, V: AsRef<[String]>>(
    ops: &mut Vec<Value>,
    rows: impl Iterator<Item = (Uuid, &'a Row)>,
    table: &str,
    col: &str,
    want: &BTreeMap<String, V>,
    in_scope: impl Fn(&str) -> bool,
) {
    let mut seen: HashSet<&str> = HashSet::default();
    for (u, r) in rows {
        let name = r.str("name");
        if !in_scope(name) {
            continue;
        }
        match want.get(name) {
            Some(v) if seen.insert(name) => {
                if !strs_eq(r, col, v.as_ref()) {
                    ops.push(json!({"op": "update", "table": table, "where": where_uuid(u), "row": {col: set_json(v.as_ref())}}));
                }
            }
            _ => ops.push(json!({"op": "delete", "table": table, "where": where_uuid(u)})),
        }
    }
    for (name, v) in want {
        if !seen.contains(name.as_str()) {
            ops.push(
                json!({"op": "insert", "table": table, "row": {"name": name, col: set_json(v.as_ref())}}),
            );
        }
    }
}

/// True when set column `col` of `r` holds exactly the strings of `v` (in any order, with
/// any repeats). A datum's keys are sorted and unique, so a sorted `v` (the usual case) is
/// compared as it is.
fn strs_eq(r: &Row, col: &str, v: &[String]) -> bool {
    if v.is_sorted_by(|a, b| a < b) {
        r.strs(col).eq(v.iter().map(String::as_str))
    } else {
        let mut w: Vec<&str> = v.iter().map(String::as_str).collect();
        w.sort_unstable();
        w.dedup();
        r.strs(col).eq(w)
    }
}

/// True when map column `col` of `r` equals `m` (both are sorted by key).
fn smap_eq(r: &Row, col: &str, m: &Smap) -> bool {
    r.get(col)
        .str_pairs()
        .eq(m.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// The SB's logical flows as we read them — each row parsed once into the flow it holds —
/// kept between rounds, so a round costs one lookup per flow instead of re-reading every SB
/// row. The flows' text is not kept: a row keeps its stage, priority, the SB datapath or
/// group it is on, and a 128-bit fingerprint of its text — two 64-bit SipHashes under a
/// random key (`FlowCache::fingerprint`), so two different texts match with probability
/// about 2⁻¹²⁸ per pair, and nobody can make them match without the key.
///
/// The rows come from the SB session's stream of `Logical_Flow` events
/// ([`FlowCache::absorb`]; the daemon's replica does not keep that table, which is most of
/// the SB's size) or, for a replica that keeps it, from its change list
/// ([`FlowCache::apply`]) or whole ([`FlowCache::from_db`]). Row parts that depend on our
/// datapath numbering — which SB datapath is our index `i`, which indices a datapath group
/// holds — are resolved through a mapping rebuilt when the datapath bindings change
/// (cheap: datapaths and groups, not flows). Datapath groups share one datapath list.
#[derive(Debug, Default)]
pub struct FlowCache {
    /// SB row → the flow it holds (all but the text).
    rows: HashMap<Id, Held>,
    /// The rows of `rows`, by the first half of their fingerprint.
    by_key: hashbrown::HashTable<Id>,
    /// Rows that hold no usable flow (unknown stage, bad priority, no datapath, contents
    /// unknown after a diff): deleted at the next full sync.
    unusable: HashSet<Uuid>,
    /// The fingerprint's key (random).
    key: std::hash::RandomState,
    /// The mapping's SB datapath UUID per datapath index (empty: no mapping yet).
    dp_uuid: Vec<Uuid>,
    dp_of: HashMap<Uuid, DpId>,
    /// SB group → its datapaths under the mapping (`None` when it names a datapath that is
    /// not ours).
    groups: HashMap<Uuid, Option<Arc<[DpId]>>>,
}

/// What the cache keeps of a row's flow: the fingerprint of its text (the first half is
/// also the hash `by_key` files it under) and the parts cheap to compare.
#[derive(Debug, Clone)]
struct Held {
    print: (u64, u64),
    /// The SB datapath, or datapath group when `group`, the row's flow is on.
    on: Id,
    stage: Stage,
    priority: u16,
    group: bool,
}

/// A UUID in two words: [`Uuid`] is a 16-byte aligned `u128`, which would pad a held row
/// and its map entry from 56 to 64 bytes (a few MB over an SB's logical flows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Id([u64; 2]);

const _: () = assert!(std::mem::size_of::<(Id, Held)>() <= 56);

impl From<Uuid> for Id {
    fn from(u: Uuid) -> Id {
        Id([(u.0 >> 64) as u64, u.0 as u64])
    }
}

impl From<Id> for Uuid {
    fn from(i: Id) -> Uuid {
        Uuid((u128::from(i.0[0]) << 64) | u128::from(i.0[1]))
    }
}

impl FlowCache {
    /// A cache of the logical flows `sb` keeps (a replica whose `Logical_Flow` table is not
    /// streamed).
    pub fn from_db(sb: &Database) -> FlowCache {
        let lf = sb.table("Logical_Flow");
        let mut c = FlowCache {
            rows: HashMap::with_capacity_and_hasher(lf.rows.len(), Default::default()),
            by_key: hashbrown::HashTable::with_capacity(lf.rows.len()),
            ..FlowCache::default()
        };
        for (&u, r) in &lf.rows {
            c.add_row(u, r);
        }
        c
    }

    /// The fingerprint of a flow's stage, priority, match and actions.
    fn fingerprint(&self, stage: Stage, priority: u16, m: &str, a: &str) -> (u64, u64) {
        use std::hash::BuildHasher;
        // Two outputs of one keyed function on distinct inputs.
        let flow = (stage, priority, m, a);
        (
            self.key.hash_one((0u8, flow)),
            self.key.hash_one((1u8, flow)),
        )
    }

    /// The SB datapath groups by their datapaths (groups naming a foreign datapath left out).
    fn group_by_set(&self) -> HashMap<&[DpId], Uuid> {
        self.groups
            .iter()
            .filter_map(|(g, v)| Some((&**v.as_ref()?, *g)))
            .collect()
    }

    /// Forgets the datapath mapping: the next plan makes it again from the SB's datapath
    /// bindings and groups. The rows are kept (they follow the SB by themselves).
    pub fn invalidate(&mut self) {
        self.dp_uuid.clear();
    }

    /// Makes the mapping for `dp_uuid` (our datapath index → SB datapath) and the SB's
    /// datapath groups.
    fn remap(&mut self, sb: &Database, dp_uuid: &[Uuid]) {
        self.dp_uuid = dp_uuid.to_vec();
        self.dp_of = dp_uuid
            .iter()
            .enumerate()
            .map(|(i, u)| (*u, DpId(i as u32)))
            .collect();
        self.groups.clear();
        for (&g, r) in &sb.table("Logical_DP_Group").rows {
            self.add_group(g, r);
        }
    }

    fn add_group(&mut self, g: Uuid, r: &Row) {
        let v: Option<Vec<DpId>> = r
            .uuids("datapaths")
            .map(|u| self.dp_of.get(&u).copied())
            .collect();
        self.groups.insert(
            g,
            v.map(|mut v| {
                v.sort_unstable();
                v.dedup();
                v.into()
            }),
        );
    }

    fn add_row(&mut self, u: Uuid, r: &Row) {
        let stage = r
            .map_get("external_ids", "stage-name")
            .and_then(Stage::from_name)
            .filter(|s| {
                s.table() as i64 == r.int("table_id").unwrap_or(-1)
                    && s.pipeline().name() == r.str("pipeline")
            });
        let first_uuid = |col| r.get(col).keys.first().and_then(|a| a.as_uuid());
        let on = match (
            first_uuid("logical_datapath"),
            first_uuid("logical_dp_group"),
        ) {
            (Some(d), _) => Some((d, false)),
            (None, Some(g)) => Some((g, true)),
            (None, None) => None,
        };
        match (stage, u16::try_from(r.int("priority").unwrap_or(-1)), on) {
            (Some(stage), Ok(priority), Some((on, group))) => {
                let print = self.fingerprint(stage, priority, r.str("match"), r.str("actions"));
                let rows = &self.rows;
                let id = Id::from(u);
                self.by_key
                    .insert_unique(print.0, id, |v| rows.get(v).map_or(0, |h| h.print.0));
                self.rows.insert(
                    id,
                    Held {
                        print,
                        on: on.into(),
                        stage,
                        priority,
                        group,
                    },
                );
            }
            _ => {
                self.unusable.insert(u);
            }
        }
    }

    fn remove_row(&mut self, u: Uuid) {
        self.unusable.remove(&u);
        let id = Id::from(u);
        if let Some(h) = self.rows.remove(&id)
            && let Ok(e) = self.by_key.find_entry(h.print.0, |&v| v == id)
        {
            e.remove();
        }
    }

    /// The datapaths (our indices) a row's flow is on, under the current mapping (`None`
    /// for an SB datapath or group that is not ours).
    fn dps_of(&self, h: &Held) -> Option<&[DpId]> {
        let on = Uuid::from(h.on);
        if h.group {
            self.groups.get(&on)?.as_deref()
        } else {
            self.dp_of.get(&on).map(std::slice::from_ref)
        }
    }

    /// The SB rows that hold `f`, in no order.
    fn rows_of<'a>(&'a self, f: &'a Lflow) -> impl Iterator<Item = Uuid> + 'a {
        let print = self.fingerprint(f.stage, f.priority, &f.match_, &f.actions);
        self.by_key
            .iter_hash(print.0)
            .copied()
            .filter(move |u| {
                self.rows.get(u).is_some_and(|h| {
                    h.print == print
                        && h.stage == f.stage
                        && h.priority == f.priority
                        && self.dps_of(h) == Some(f.dps.as_slice())
                })
            })
            .map(Uuid::from)
    }

    /// Takes in a session's events of a streamed `Logical_Flow` table (events of other
    /// tables are ignored).
    pub fn absorb(&mut self, events: Vec<StreamEvent>) {
        for e in events {
            if &*e.table != "Logical_Flow" {
                continue;
            }
            match e.event {
                RowEvent::Reset => {
                    self.rows.clear();
                    self.by_key.clear();
                    self.unusable.clear();
                }
                RowEvent::Put(u, r) => {
                    self.remove_row(u);
                    self.add_row(u, &r);
                }
                RowEvent::Changed(u) => {
                    // Changed by someone else, contents unknown: replaced at the next sync.
                    self.remove_row(u);
                    self.unusable.insert(u);
                }
                RowEvent::Deleted(u) => self.remove_row(u),
            }
        }
    }

    /// Takes in the SB changes the session reported (`(table, uuid)` of rows inserted,
    /// modified or deleted): logical flows of a replica that keeps them, datapath groups,
    /// and datapath bindings (a change to one makes the next plan redo the mapping).
    pub fn apply(&mut self, sb: &Database, changes: &[(String, Uuid)]) {
        for (t, u) in changes {
            match t.as_str() {
                "Logical_Flow" => {
                    self.remove_row(*u);
                    if let Some(r) = sb.row("Logical_Flow", *u) {
                        self.add_row(*u, r);
                    }
                }
                "Logical_DP_Group" if !self.dp_uuid.is_empty() => {
                    match sb.row("Logical_DP_Group", *u) {
                        Some(r) => self.add_group(*u, r),
                        None => {
                            self.groups.remove(u);
                        }
                    }
                }
                "Datapath_Binding" => self.invalidate(),
                _ => {}
            }
        }
    }
}

/// The logical-flow operations for an incremental round: for each flow whose datapaths
/// changed, its old SB rows go and a row on its new datapaths comes (on an existing
/// datapath group with the same datapaths, else a new one). `None` when some datapath has
/// no SB binding yet (the caller then plans in full). Returns (operations, added, deleted).
pub fn plan_flow_changes(
    dp_uuid: &[Option<Uuid>],
    changes: &[crate::incr::FlowChange],
    sb: &Database,
    cache: &mut FlowCache,
) -> Option<(Vec<Value>, usize, usize)> {
    let dpu: Vec<Uuid> = dp_uuid.iter().copied().collect::<Option<_>>()?;
    if cache.dp_uuid != dpu {
        cache.remap(sb, &dpu);
    }
    let group_by_set = cache.group_by_set();
    let mut ops = Vec::new();
    let (mut added, mut deleted) = (0, 0);
    let mut new_groups: HashMap<&[DpId], String> = HashMap::default();
    for c in changes {
        let (stage, priority, m, a) = &c.key;
        if let Some(before) = &c.before {
            let f = Lflow {
                stage: *stage,
                priority: *priority,
                match_: m.clone(),
                actions: a.clone(),
                dps: before.clone(),
            };
            for u in cache.rows_of(&f) {
                ops.push(json!({"op": "delete", "table": "Logical_Flow", "where": where_uuid(u)}));
                deleted += 1;
            }
        }
        let Some(after) = &c.after else { continue };
        let dps = after.as_slice();
        let mut row = json!({
            "pipeline": stage.pipeline().name(),
            "table_id": stage.table(),
            "priority": priority,
            "match": m,
            "actions": a,
            "external_ids": ["map", [["stage-name", stage.name()]]],
        });
        if dps.len() == 1 {
            row["logical_datapath"] = uuid_json(dpu[dps[0].0 as usize]);
        } else if let Some(&g) = group_by_set.get(dps) {
            row["logical_dp_group"] = uuid_json(g);
        } else {
            let n = new_groups.len();
            let name = new_groups.entry(dps).or_insert_with(|| {
                let name = format!("g{n}");
                ops.insert(0, json!({"op": "insert", "table": "Logical_DP_Group", "uuid-name": name,
                    "row": {"datapaths": ["set", dps.iter().map(|d| uuid_json(dpu[d.0 as usize])).collect::<Vec<_>>()]}}));
                name
            });
            row["logical_dp_group"] = json!(["named-uuid", name.clone()]);
        }
        ops.push(json!({"op": "insert", "table": "Logical_Flow", "row": row}));
        added += 1;
    }
    Some((ops, added, deleted))
}

/// What an incremental round changed that SB bindings, groups and sets depend on.
#[derive(Debug, Clone, Default)]
pub struct BindingScope {
    /// Switches whose ports changed (their port bindings and multicast groups).
    pub switches: Vec<usize>,
    /// Port groups (names, before and after) whose SB port groups and `_ip4`/`_ip6` sets
    /// may have changed.
    pub port_groups: BTreeSet<String>,
    /// NB address sets (names) that changed.
    pub address_sets: BTreeSet<String>,
}

/// The operations that bring the SB bindings, multicast groups, port groups and address
/// sets of `scope` in line with `ctx`, leaving everything else alone (an incremental round
/// knows the rest is in line already). `dp_uuid` is each datapath's SB row
/// ([`crate::sb_index::SbIndex::sb_datapaths`]); all of the scope's must exist. The scope's SB rows are found
/// through `index`, which must be up to date with `sb`.
pub fn plan_bindings_delta(
    ctx: &Ctx,
    scope: &BindingScope,
    dp_uuid: &[Option<Uuid>],
    sb: &Database,
    index: &crate::sb_index::SbIndex,
) -> Vec<Value> {
    let mut ops = Vec::new();
    let dps: Vec<(usize, Uuid)> = scope
        .switches
        .iter()
        .filter_map(|&i| {
            let dp = ctx.switch_dp(i).0 as usize;
            dp_uuid[dp].map(|u| (dp, u))
        })
        .collect();
    // Port bindings of the scope's switches, by name; their datapaths' keys in use.
    let mut have_pb: HashMap<&str, (Uuid, &Row)> = HashMap::default();
    let mut used: HashMap<usize, HashSet<i64>> = HashMap::default();
    for &(dp, dpu) in &dps {
        for u in index.port_bindings(dpu) {
            let Some(r) = sb.row("Port_Binding", u) else {
                continue;
            };
            have_pb.insert(r.str("logical_port"), (u, r));
            used.entry(dp)
                .or_default()
                .insert(r.int("tunnel_key").unwrap_or(0));
        }
    }
    let mut port_ref: HashMap<&str, PortRef> = HashMap::default();
    let mut mcast = Vec::new();
    let wanted: Vec<(Vec<SbPort>, Vec<Mcast>)> = scope
        .switches
        .iter()
        .map(|&i| switch_want(ctx, i))
        .collect();
    let mut kept = HashSet::default();
    for (n, p) in wanted.iter().flat_map(|(ps, _)| ps).enumerate() {
        let Some(dpu) = dp_uuid[p.dp] else { continue };
        let on_dp = have_pb.get(p.name.as_str()).copied();
        kept.insert(p.name.as_str());
        let used = used.entry(p.dp).or_default();
        let r = sync_port(&mut ops, n, p, on_dp, None, &uuid_json(dpu), used);
        port_ref.insert(&p.name, r);
    }
    for (name, (u, _)) in &have_pb {
        if !kept.contains(name) {
            ops.push(json!({"op": "delete", "table": "Port_Binding", "where": where_uuid(*u)}));
        }
    }
    mcast.extend(wanted.iter().flat_map(|(_, m)| m));
    let mut have_mc: HashMap<(usize, &str), (Uuid, &Row)> = HashMap::default();
    for &(dp, dpu) in &dps {
        for u in index.mcast_groups(dpu) {
            if let Some(r) = sb.row("Multicast_Group", u) {
                have_mc.insert((dp, r.str("name")), (u, r));
            }
        }
    }
    for m in &mcast {
        let Some(dpu) = dp_uuid[m.0] else { continue };
        let existing = have_mc.remove(&(m.0, m.1));
        sync_mcast(&mut ops, m, existing, &uuid_json(dpu), &port_ref);
    }
    for (u, _) in have_mc.values() {
        ops.push(json!({"op": "delete", "table": "Multicast_Group", "where": where_uuid(*u)}));
    }
    // Port groups and their address sets, by name.
    let mut pgs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pg in ctx
        .nb
        .port_groups
        .iter()
        .filter(|g| scope.port_groups.contains(&g.name))
    {
        let (per_dp, v4, v6) = pg_want(ctx, pg);
        for (dp, ports) in per_dp {
            pgs.insert(format!("{}_{}", ctx.tunnel_keys[dp], pg.name), ports);
        }
        sets.insert(format!("{}_ip4", pg.name), v4);
        sets.insert(format!("{}_ip6", pg.name), v6);
    }
    for a in ctx
        .nb
        .address_sets
        .iter()
        .filter(|a| scope.address_sets.contains(&a.name))
    {
        sets.insert(a.name.clone(), a.addresses.clone());
    }
    let rows = |t: &'static str, us: Vec<Uuid>| {
        us.into_iter()
            .filter_map(move |u| sb.row(t, u).map(|r| (u, r)))
    };
    // SB port groups are `<datapath key>_<group>`.
    let pg_in_scope = |n: &str| {
        n.split_once('_').is_some_and(|(k, g)| {
            !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) && scope.port_groups.contains(g)
        })
    };
    let pg_rows: Vec<Uuid> = scope
        .port_groups
        .iter()
        .flat_map(|g| index.port_groups(g))
        .collect();
    sync_named(
        &mut ops,
        rows("Port_Group", pg_rows),
        "Port_Group",
        "ports",
        &pgs,
        pg_in_scope,
    );
    let set_in_scope = |n: &str| {
        scope.address_sets.contains(n)
            || [n.strip_suffix("_ip4"), n.strip_suffix("_ip6")]
                .into_iter()
                .flatten()
                .any(|g| scope.port_groups.contains(g))
    };
    let mut set_names: BTreeSet<String> = scope.address_sets.clone();
    for g in &scope.port_groups {
        set_names.insert(format!("{g}_ip4"));
        set_names.insert(format!("{g}_ip6"));
    }
    let set_rows: Vec<Uuid> = set_names
        .iter()
        .flat_map(|n| index.address_sets(n))
        .collect();
    sync_named(
        &mut ops,
        rows("Address_Set", set_rows),
        "Address_Set",
        "addresses",
        &sets,
        set_in_scope,
    );
    ops
}
