//! Translation (OVS `ofproto-dpif-xlate.c`): a packet's [`FlowKey`] walked through a bridge's
//! OpenFlow tables, producing datapath actions and the **megaflow mask**.
//!
//! # How the mask is built
//!
//! The mask starts with the bits OVS always matches (`recirc_id`, `in_port`, `dl_type`,
//! `nw_frag` for IP) plus the VLAN TPIDs, which stand in for OVS's datapath-key ethertype (our
//! key keeps the inner ethertype in `dl_type`, so without the TPID a tagged packet would equal an
//! untagged one under the mask). Then every step that *reads* the key adds what it read:
//! each table lookup adds the classifier's `lookup_wc` bits, `move`/`output:reg`/`ct(zone=reg)`
//! add their source bits, prerequisite checks add `dl_type`/`nw_proto`, `dec_ttl` adds
//! `nw_ttl`, `NORMAL` adds `dl_src`, `dl_dst` and the VLAN VID, and committing a set action
//! adds every sub-field it rewrites (as OVS's `commit_odp_actions` does, so that a packet whose
//! field already has the new value cannot share the megaflow). Writes (`set_field`, `mod_*`)
//! add the bits they write, as OVS's `mf_mask_field_masked` does. Metadata, registers and the
//! TCIs of tags the packet does not have are exact from the start, so that a lookup proves a
//! miss there at no cost: equal packets hold equal values there. At the end
//! (`xlate_wc_finish`) metadata and registers are dropped from the mask (they are not packet
//! fields: they are always zero when a packet enters), ICMP type/code masks are cut to 8 bits
//! (`nw_proto` made exact if a lookup read their high bytes), a VLAN TCI mask gets its CFI
//! bit, later fragments lose their port masks, and the VLAN TCI masks of tags the packet does
//! not have are cleared (the TPID keeps them apart).
//!
//! # Commit-before-output
//!
//! Field writes change only the in-flight key (`flow`); `base` is what the datapath packet
//! currently looks like. Before every output, `ct`, or `userspace` action the difference is
//! *committed* (OVS `commit_odp_actions`): `set(eth(…))`, `set(ipv4(…))`/`set(ipv6(…))`/
//! `set(arp(…))`, `set(tcp|udp|sctp(…))`, `set(icmp(…))`, then VLAN pops/pushes, each naming only
//! the sub-fields that differ.
//!
//! # Limits
//!
//! OVS's: resubmit depth 64 (a resubmit deepens only when it goes to the same or an earlier
//! table), 4096 resubmits in total, 64 kB of datapath actions. Hitting one stops translation;
//! the packet is dropped (`Datapath actions: drop`) and the error is reported and counted.
//! Two more, where OVS would run away: at most 4096 group buckets run (chained `all` groups
//! double the work at each link), and the actions nested in `check_pkt_len` branches count
//! toward the action limit, checked at each `check_pkt_larger` (n in a row make 2^n
//! leaves) — `tests/xlate_bounds.rs`.

use std::fmt::Write as _;

use flow::field::{FRAG_ANY, FRAG_LATER, FieldId, VLAN_CFI};
use flow::ofp::matching::{ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_RARP, ipproto};
use flow::ofp::{
    Action, ControllerCookie, Ct, CtZone, Mf, OfPort, PacketInReason, Prereq, Subfield,
};
use flow::{FlowKey, FlowMask};

use crate::bridge::{Bridge, Port, VlanMode};
use crate::odp::OdpAction;
use crate::recirc::RecircRef;
use crate::table::RuleHandle;
use crate::trace::{NodeKind, Tracer};

/// OVS `MAX_DEPTH`.
pub const MAX_DEPTH: u32 = 64;
/// OVS `MAX_RESUBMITS`.
pub const MAX_RESUBMITS: u32 = MAX_DEPTH * MAX_DEPTH;
/// Cap on datapath actions (OVS caps their encoding at 64 kB; ~4 bytes+ each).
pub const MAX_ODP_ACTIONS: usize = 8192;

const VLAN_VID_MASK: u16 = 0x0fff;
const VLAN_PCP_MASK: u16 = 0xe000;

/// Why translation failed (OVS `enum xlate_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XlateError {
    /// Resubmit depth over [`MAX_DEPTH`].
    RecursionTooDeep,
    /// More than [`MAX_RESUBMITS`] resubmits.
    TooManyResubmits,
    /// Too many datapath actions.
    TooManyActions,
    /// A freeze found no recirculation id to give its state (the pooled ids are exhausted:
    /// [`crate::recirc::RecircError`]).
    NoRecircId,
}

impl XlateError {
    /// OVS's `xlate_strerror` text.
    pub fn as_str(self) -> &'static str {
        match self {
            XlateError::RecursionTooDeep => "Recursion too deep",
            XlateError::TooManyResubmits => "Too many resubmits",
            XlateError::TooManyActions => "Too many datapath actions",
            XlateError::NoRecircId => "No recirculation id available",
        }
    }
}

/// Translation input.
#[derive(Debug, Clone, Copy)]
pub struct XlateIn {
    /// The packet's key (as `extract` made it, with `in_port` set).
    pub key: FlowKey,
    /// Clock for MAC learning/aging (ms).
    pub now_ms: u64,
    /// Whether to learn MACs (a real packet) or not (a flow-only trace).
    pub side_effects: bool,
    /// Whether to record the trace tree.
    pub trace: bool,
    /// Table to start in (0; a recirculation resumes in its frozen table).
    pub table: u8,
}

impl XlateIn {
    /// Input for `key` at time 0, no side effects, no trace.
    pub fn new(key: FlowKey) -> XlateIn {
        XlateIn {
            key,
            now_ms: 0,
            side_effects: false,
            trace: false,
            table: 0,
        }
    }
}

/// A recirculation the translation froze (`ct(table=N)`, controller continuation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frozen {
    /// The recirculation id.
    pub id: u32,
    /// Table to resume in.
    pub table: u8,
    /// The metadata part of the key at the freeze point (what identifies the frozen state).
    pub key: FlowKey,
    /// The key the resumed packet starts from: the packet as the datapath has it at the
    /// `recirc` (committed headers) with the frozen metadata, `recirc_id` set, conntrack fields
    /// zero (see [`resume_key`]).
    pub resume: FlowKey,
    /// Conntrack zone of the `ct` that froze it.
    pub zone: Option<u16>,
    /// Actions the resumed pass runs instead of a lookup in `table` (a select group's
    /// `dp_hash` freeze: the group action and what followed it); empty otherwise.
    pub actions: Vec<Action>,
    /// The userdata of a `controller(userdata=…)` freeze (for its packet-in); empty
    /// otherwise.
    pub userdata: Vec<u8>,
    /// A packet-in's state (`controller`, a table miss, `pause`): nothing recirculates
    /// into it, so a trace does not resume it.
    pub packet_in: bool,
}

/// The key a recirculated packet is translated with: `f.resume` with `ct_state` and the zone
/// the conntrack action used (what `ofproto/trace` does with its default `trk|new`).
pub fn resume_key(f: &Frozen, ct_state: u32) -> FlowKey {
    let mut k = f.resume;
    if let Some(z) = f.zone {
        FieldId::CtState.set(&mut k, u128::from(ct_state));
        FieldId::CtZone.set(&mut k, u128::from(z));
    }
    k
}

/// Translation output.
#[derive(Debug, Clone)]
pub struct XlateOut {
    /// Datapath actions (empty = drop).
    pub actions: Vec<OdpAction>,
    /// The megaflow mask.
    pub mask: FlowMask,
    /// The in-flight key at the end (`Final flow`).
    pub final_key: FlowKey,
    /// Rules hit, in order, for stats.
    pub rules: Vec<(u8, RuleHandle)>,
    /// Failure, if any (then `actions` is empty).
    pub error: Option<XlateError>,
    /// The trace tree (when asked for).
    pub trace: Option<Tracer>,
    /// (MAC, VLAN) entries `NORMAL` looked up, for revalidation after learning changes.
    pub mac_deps: Vec<(u64, u16)>,
    /// MAC-table generation the decision was made at.
    pub mac_generation: u64,
    /// Bridge table version the decision was made at.
    pub table_version: u64,
    /// Recirculations frozen by this translation.
    pub frozen: Vec<Frozen>,
    /// On a pooled bridge, one reference to each distinct recirculation id in `frozen`
    /// (taken when the state was frozen): whoever keeps the decision keeps these (the
    /// upcall moves them into the megaflow's ukey); dropping them releases the ids (see
    /// [`crate::recirc`]). Empty on an unpooled bridge.
    pub recirc_refs: Vec<RecircRef>,
    /// MACs learned (applied to the bridge when side effects are on).
    pub learned: Vec<(u64, u16, OfPort)>,
    /// Groups gone through, for their statistics ([`Bridge::credit_groups`]): the group id
    /// and the bucket id chosen (`select`, `fast_failover`), `None` for every bucket (`all`,
    /// `indirect`), as OVS's `xlate_group_stats`.
    pub groups: Vec<(u32, Option<u32>)>,
}

impl XlateOut {
    /// The megaflow as a match (key masked).
    pub fn megaflow(&self, key: &FlowKey) -> flow::ofp::Match {
        flow::ofp::Match {
            key: key.masked(&self.mask),
            mask: self.mask,
        }
    }
}

struct Ctx<'a> {
    br: &'a Bridge,
    flow: FlowKey,
    base: FlowKey,
    wc: FlowMask,
    odp: Vec<OdpAction>,
    /// Datapath actions moved into nested bodies (`check_pkt_len` branches): with
    /// `odp.len()`, every action emitted so far, for the [`MAX_ODP_ACTIONS`] bound.
    nested_odp: usize,
    /// Group buckets run so far (bounded by [`MAX_RESUBMITS`]: chained `all` groups double
    /// the work at each link without resubmitting).
    bucket_runs: u32,
    depth: u32,
    /// The next table lookup is the translation's first (not a resubmit).
    first_lookup: bool,
    resubmits: u32,
    table_id: u8,
    error: Option<XlateError>,
    rules: Vec<(u8, RuleHandle)>,
    tr: Option<Tracer>,
    now_ms: u64,
    side_effects: bool,
    learned: Vec<(u64, u16, OfPort)>,
    groups: Vec<(u32, Option<u32>)>,
    mac_deps: Vec<(u64, u16)>,
    frozen: Vec<Frozen>,
    recirc_refs: Vec<RecircRef>,
    /// Next fresh unpooled recirculation id, read from the bridge at the first freeze (so a
    /// translation that freezes nothing never takes the recirculation-id lock).
    next_recirc: Option<u32>,
    rule_cookie: u64,
    /// Per tag (outer first): the TCI bits and whether the TPID some action wrote, or that
    /// NORMAL left different from the datapath packet (see `commit_vlan`).
    vlan_written: [(u16, bool); 2],
    /// Issue #17 actions (`xlate::actions_ext`): `exit` was executed (OVS `ctx->exit`).
    exit: bool,
    /// The action being translated is the last of the whole translation (OVS
    /// `is_last_action`: last in its list, and its list last where it was called from).
    list_last: bool,
    /// Inside a group bucket (controller output then has reason `group`).
    in_group: bool,
    /// Translating a packet-out's actions (OVS `in_packet_out`): `output:CONTROLLER` says
    /// reason `packet_out`.
    in_packet_out: bool,
    /// A select group's `dp_hash` freeze being collected ([`group`]).
    hash_freeze: Option<group::HashFreeze>,
    /// The next freeze is a packet-in's ([`Frozen::packet_in`]).
    freezing_packet_in: bool,
    /// A `controller(pause)` being unrolled ([`pause`]).
    pause: Option<pause::PauseFreeze>,
    /// Steps of the current liveness question ([`group`]'s budgeted walk).
    live_steps: u32,
    /// Issue #17 actions (2): the OpenFlow action set (`write_actions`), in write order
    /// (OVS `ctx->action_set`), and whether it is being executed (`in_action_set`).
    action_set: Vec<Action>,
    in_action_set: bool,
    /// The packet's `skb_priority` (`set_queue`, `enqueue`) and the datapath packet's (the
    /// last committed); packets enter with 0 (`xlate::actions_ext`).
    skb_priority: u32,
    base_skb_priority: u32,
}

/// Translates `input` through `br`'s tables. With `side_effects`, learned MACs are applied to
/// the bridge's MAC table. Recirculation ids: on a pooled bridge each frozen state's id is
/// referenced (allocated if new) and the references returned in `XlateOut::recirc_refs`;
/// unpooled, the fresh-id counter moves past the ids used. Needs only `&Bridge`: what it
/// changes (MAC table, recirculation ids) is shared state with its own lock, so translations
/// run concurrently on a published bridge.
pub fn xlate(br: &Bridge, input: &XlateIn) -> XlateOut {
    xlate_with(br, input, None)
}

/// [`xlate`] of the OpenFlow action list `actions` instead of a table lookup (OVS's
/// translation of an OpenFlow packet-out: `xin.ofpacts`): no rule, table 0 for `resubmit`'s
/// default table and `output:TABLE`'s lookup, the side effects of [`xlate`] (learning,
/// recirculation ids) as an upcall's. `input.table` is ignored.
pub fn xlate_actions(br: &Bridge, input: &XlateIn, actions: &[Action]) -> XlateOut {
    let input = XlateIn { table: 0, ..*input };
    xlate_with(br, &input, Some(actions))
}

fn xlate_with(br: &Bridge, input: &XlateIn, given: Option<&[Action]>) -> XlateOut {
    let out = xlate_ro_with(br, input, given);
    if input.side_effects {
        for (mac, vlan, port) in &out.learned {
            br.mac.learn(*mac, *vlan, *port, input.now_ms);
        }
    }
    if !out.frozen.is_empty() {
        // Pooled ids were taken in `freeze` (the counter moved then, and must not move here:
        // it skips known ids instead); unpooled ones (trace) are numbered from `next`.
        let mut ids = br.recirc_ids();
        let unpooled = ids.pool.is_none();
        for f in out.frozen.iter().filter(|_| unpooled) {
            if f.id >= ids.next {
                ids.next = f.id.wrapping_add(1).max(1);
            }
        }
    }
    out
}

/// Translates without changing the bridge's tables or MAC table (learning is reported in
/// `learned`, not applied). On a bridge that pools recirculation ids, each frozen state's id
/// is referenced here (a state new to the pool is given its id, as OVS's translation
/// allocates it) and the references returned in `recirc_refs`.
pub fn xlate_ro(br: &Bridge, input: &XlateIn) -> XlateOut {
    xlate_ro_with(br, input, None)
}

fn xlate_ro_with(br: &Bridge, input: &XlateIn, given: Option<&[Action]>) -> XlateOut {
    let mut ctx = Ctx {
        br,
        flow: input.key,
        base: input.key,
        wc: FlowMask::CATCHALL,
        odp: Vec::with_capacity(4),
        nested_odp: 0,
        bucket_runs: 0,
        depth: 0,
        first_lookup: false,
        resubmits: 0,
        table_id: 0,
        error: None,
        rules: Vec::with_capacity(4),
        tr: input.trace.then(Tracer::default),
        now_ms: input.now_ms,
        side_effects: input.side_effects,
        learned: Vec::new(),
        groups: Vec::new(),
        mac_deps: Vec::new(),
        frozen: Vec::new(),
        recirc_refs: Vec::new(),
        next_recirc: None,
        // A packet-out's own actions have no rule: OVS reports the "no cookie" cookie.
        rule_cookie: if given.is_some() { u64::MAX } else { 0 },
        vlan_written: [(0, false); 2],
        exit: false,
        list_last: true,
        in_group: false,
        in_packet_out: given.is_some(),
        hash_freeze: None,
        pause: None,
        freezing_packet_in: false,
        live_steps: 0,
        action_set: Vec::new(),
        in_action_set: false,
        skb_priority: 0,
        base_skb_priority: 0,
    };
    ctx.wc_init();
    if let Some(t) = &mut ctx.tr {
        t.enter(NodeKind::Bridge, format!("bridge(\"{}\")", br.name));
    }
    let in_port = ctx.in_port();
    if input.table != 0 {
        ctx.report(NodeKind::Thaw, || {
            format!("Resuming from table {}", input.table)
        });
    }
    // The first lookup is not a resubmit: OVS starts at depth 0 with no resubmits counted
    // (`xlate_actions` looks the rule up itself; only `xlate_table_action` counts).
    ctx.first_lookup = true;
    // A recirculated pass whose frozen state holds actions (a select group's `dp_hash`
    // freeze) runs them; any other starts with a lookup.
    let rid = FieldId::RecircId.get(&input.key) as u32;
    let thaw = (rid != 0 && given.is_none())
        .then(|| br.recirc_ids().frozen_actions(rid))
        .flatten();
    // A packet-out's actions run as a thawed state's do: no rule, no lookup first.
    match given.or(thaw.as_deref()) {
        Some(actions) => {
            ctx.first_lookup = false;
            ctx.table_id = input.table;
            ctx.do_actions(actions);
        }
        None => ctx.table_action(in_port, input.table, true, false),
    }
    // A select group's freeze takes the rest of the pipeline; the action set is not frozen
    // with it (docs/design/openflow-actions.md, "Not yet").
    if ctx.pause.is_some() {
        ctx.finish_pause();
    } else if ctx.hash_freeze.is_some() {
        ctx.finish_hash_freeze();
    } else {
        ctx.execute_action_set();
    }
    ctx.wc_finish(&input.key);
    if ctx.error.is_some() {
        ctx.odp.clear();
    }
    XlateOut {
        actions: ctx.odp,
        mask: ctx.wc,
        final_key: ctx.flow,
        rules: ctx.rules,
        error: ctx.error,
        trace: ctx.tr,
        mac_deps: ctx.mac_deps,
        mac_generation: br.mac.generation(),
        table_version: br.version,
        frozen: ctx.frozen,
        recirc_refs: ctx.recirc_refs,
        learned: ctx.learned,
        groups: ctx.groups,
    }
}

fn is_vlan_tpid(t: u16) -> bool {
    t == 0x8100 || t == 0x88a8
}

impl Ctx<'_> {
    fn get(&self, f: FieldId) -> u128 {
        f.get(&self.flow)
    }
    fn set(&mut self, f: FieldId, v: u128) {
        f.set(&mut self.flow, v)
    }
    fn unwc(&mut self, f: FieldId) {
        f.unwildcard(&mut self.wc)
    }
    fn unwc_bits(&mut self, f: FieldId, bits: u128) {
        let m = f.get_mask(&self.wc) | bits;
        f.set_mask(&mut self.wc, m);
    }
    fn in_port(&self) -> OfPort {
        OfPort(self.get(FieldId::InPort) as u16)
    }
    fn dl_type(&self) -> u16 {
        self.get(FieldId::DlType) as u16
    }
    fn nw_proto(&self) -> u8 {
        self.get(FieldId::NwProto) as u8
    }
    fn is_ip_any(&self) -> bool {
        matches!(self.dl_type(), ETH_TYPE_IP | ETH_TYPE_IPV6)
    }
    fn report(&mut self, kind: NodeKind, text: impl FnOnce() -> String) {
        if let Some(t) = &mut self.tr {
            t.report(kind, text());
        }
    }

    fn wc_init(&mut self) {
        for f in [
            FieldId::RecircId,
            FieldId::InPort,
            FieldId::DlType,
            FieldId::Vlan0Tpid,
        ] {
            self.unwc(f);
        }
        if self.get(FieldId::Vlan0Tci) as u16 & VLAN_CFI != 0 {
            self.unwc(FieldId::Vlan1Tpid);
        }
        if self.is_ip_any() {
            self.unwc_bits(FieldId::NwFrag, u128::from(FRAG_ANY | FRAG_LATER));
        }
        // Registers and metadata are exact while translating: they are zero when a packet
        // enters and only written from constants or from bits that the write un-wildcards
        // (`move`), so equal packets hold equal values there at every lookup. Exact, a rule
        // that differs there is proven missed at no cost in packet bits (OVS's staged lookup
        // stops in the metadata stage likewise); `wc_finish` drops them.
        for f in (0..16).filter_map(FieldId::reg).chain([FieldId::Metadata]) {
            self.unwc(f);
        }
        // Likewise the TCI of a tag the packet does not have: zero, and the exact TPID keeps
        // tagged packets apart (`wc_finish` clears it).
        for (tpid, tci) in [
            (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
            (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
        ] {
            if !is_vlan_tpid(self.get(tpid) as u16) {
                self.unwc(tci);
            }
        }
    }

    fn wc_finish(&mut self, orig: &FlowKey) {
        FieldId::Metadata.set_mask(&mut self.wc, 0);
        for r in 0..16 {
            if let Some(f) = FieldId::reg(r) {
                f.set_mask(&mut self.wc, 0);
            }
        }
        let dl = FieldId::DlType.get(orig) as u16;
        let proto = FieldId::NwProto.get(orig) as u8;
        if (dl == ETH_TYPE_IP && proto == ipproto::ICMP)
            || (dl == ETH_TYPE_IPV6 && proto == ipproto::ICMPV6)
        {
            // The high bytes are zero for every ICMP packet, but a lookup may have read them
            // to tell this packet from a TCP/UDP rule: then only an exact `nw_proto` keeps
            // such packets out of the megaflow.
            let high =
                (FieldId::TpSrc.get_mask(&self.wc) | FieldId::TpDst.get_mask(&self.wc)) & 0xff00;
            if high != 0 {
                self.unwc(FieldId::NwProto);
            }
            for f in [FieldId::TpSrc, FieldId::TpDst] {
                let m = f.get_mask(&self.wc) & 0xff;
                f.set_mask(&mut self.wc, m);
            }
        }
        if FieldId::NwFrag.get(orig) as u8 & FRAG_LATER != 0 {
            FieldId::TpSrc.set_mask(&mut self.wc, 0);
            FieldId::TpDst.set_mask(&mut self.wc, 0);
        }
        for (tpid, tci) in [
            (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
            (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
        ] {
            if tci.get_mask(&self.wc) != 0 {
                self.unwc_bits(tci, u128::from(VLAN_CFI));
            }
            if !is_vlan_tpid(tpid.get(orig) as u16) {
                tci.set_mask(&mut self.wc, 0);
            }
        }
    }

    fn check_resources(&mut self) -> bool {
        let e = if self.depth >= MAX_DEPTH {
            self.report(NodeKind::Error, || {
                format!("over max translation depth {MAX_DEPTH}")
            });
            XlateError::RecursionTooDeep
        } else if self.resubmits >= MAX_RESUBMITS {
            self.report(NodeKind::Error, || {
                format!("over {MAX_RESUBMITS} resubmit actions")
            });
            XlateError::TooManyResubmits
        } else if self.odp.len() + self.nested_odp > MAX_ODP_ACTIONS {
            self.report(NodeKind::Error, || {
                "resubmits yielded over 64 kB of actions".into()
            });
            XlateError::TooManyActions
        } else {
            return true;
        };
        self.error = Some(e);
        false
    }

    /// OVS `xlate_table_action` + `rule_dpif_lookup_from_table`.
    fn table_action(&mut self, in_port: OfPort, table: u8, may_packet_in: bool, ct_orig: bool) {
        if !self.check_resources() {
            return;
        }
        let old_table = self.table_id;
        self.table_id = table;
        if ct_orig {
            if self.get(FieldId::CtNwProto) == 0 || !self.is_ip_any() {
                self.report(NodeKind::Error, || {
                    "resubmit(ct) with non-tracked or non-IP packet!".into()
                });
                self.table_id = old_table;
                return;
            }
            self.tuple_swap();
        }
        // Lookup with the given in_port and, for fragments, zero ports.
        let saved = self.flow;
        self.set(FieldId::InPort, u128::from(in_port.0));
        if self.get(FieldId::NwFrag) as u8 & FRAG_ANY != 0 {
            self.set(FieldId::TpSrc, 0);
            self.set(FieldId::TpDst, 0);
        }
        let found = self
            .br
            .table(table)
            .and_then(|t| t.lookup_wc(&self.flow, &mut self.wc))
            .map(|(h, r)| (h, r.clone()));
        for f in [FieldId::InPort, FieldId::TpSrc, FieldId::TpDst] {
            let v = f.get(&saved);
            self.set(f, v);
        }
        if ct_orig {
            self.tuple_swap();
        }
        let first = std::mem::take(&mut self.first_lookup);
        let deepens = table <= old_table && !first;
        self.resubmits += u32::from(!first);
        self.depth += u32::from(deepens);
        let old_cookie = self.rule_cookie;
        match found {
            Some((h, rule)) => {
                self.rules.push((table, h));
                self.rule_cookie = rule.cookie;
                let entered = self.tr.as_mut().map(|t| {
                    let mut s = format!("{table:2}. ");
                    let m = flow::text::format_match(&rule.match_);
                    s.push_str(&m);
                    if !s.ends_with(' ') {
                        s.push_str(", ");
                    }
                    let _ = write!(s, "priority {}", rule.priority);
                    if rule.cookie != 0 {
                        let _ = write!(s, ", cookie {:#x}", rule.cookie);
                    }
                    t.enter(NodeKind::Table, s)
                });
                self.do_actions(&rule.actions);
                if let (Some(t), Some(prev)) = (&mut self.tr, entered) {
                    t.leave(prev);
                }
            }
            None => {
                let entered = self
                    .tr
                    .as_mut()
                    .map(|t| t.enter(NodeKind::Table, format!("{table:2}. No match.")));
                if may_packet_in && self.br.packet_in_on_miss {
                    // OVS's miss rule: `controller(reason=no_match)`, cookie 0, as an
                    // implicit miss (what OpenFlow 1.3+ connections do not take by default).
                    self.rule_cookie = 0;
                    self.controller_cookie(u16::MAX, PacketInReason::NoMatch, 0, true, &[]);
                }
                self.do_actions(&[]);
                if let (Some(t), Some(prev)) = (&mut self.tr, entered) {
                    t.leave(prev);
                }
            }
        }
        self.rule_cookie = old_cookie;
        self.depth -= u32::from(deepens);
        self.table_id = old_table;
    }

    fn tuple_swap(&mut self) {
        let pairs = [
            (FieldId::NwProto, FieldId::CtNwProto),
            (FieldId::NwSrc, FieldId::CtNwSrc),
            (FieldId::NwDst, FieldId::CtNwDst),
            (FieldId::TpSrc, FieldId::CtTpSrc),
            (FieldId::TpDst, FieldId::CtTpDst),
        ];
        for (a, b) in pairs {
            let (va, vb) = (a.get(&self.flow), b.get(&self.flow));
            a.set(&mut self.flow, vb);
            b.set(&mut self.flow, va);
            let (ma, mb) = (a.get_mask(&self.wc), b.get_mask(&self.wc));
            a.set_mask(&mut self.wc, mb);
            b.set_mask(&mut self.wc, ma);
        }
    }

    /// OVS `do_xlate_actions`. Returns early (stopping this list) where OVS does.
    fn do_actions(&mut self, actions: &[Action]) {
        if actions.is_empty() {
            self.report(NodeKind::Action, || "drop".into());
            return;
        }
        let outer_last = self.list_last;
        for (i, a) in actions.iter().enumerate() {
            if self.error.is_some() || self.exit {
                break;
            }
            self.list_last = outer_last && i + 1 == actions.len();
            self.report(NodeKind::Action, || {
                flow::text::format_actions(std::slice::from_ref(a))
            });
            for (w, (tci, tpid)) in self.vlan_written.iter_mut().zip(vlan_writes(a)) {
                w.0 |= tci;
                w.1 |= tpid;
            }
            match a {
                Action::Output { port, max_len } => self.output_action(*port, *max_len),
                Action::OutputTrunc { port, .. } => self.output_action(*port, 0),
                Action::OutputReg { src } => {
                    let port = self.read_subfield(src);
                    self.unwc_subfield(src);
                    if port <= 0xffff {
                        self.report(NodeKind::Detail, || format!("output port is {port}"));
                        self.output_action(OfPort(port as u16), 0);
                    } else {
                        self.report(NodeKind::Warn, || {
                            format!("output port {port} is out of range")
                        });
                    }
                }
                Action::Controller {
                    max_len,
                    reason,
                    id,
                    userdata,
                    pause: false,
                } => self.controller_cookie(*max_len, *reason, *id, false, userdata),
                Action::Controller {
                    max_len,
                    reason,
                    id,
                    userdata,
                    pause: true,
                } => {
                    self.start_pause(*max_len, *reason, *id, userdata);
                    self.unroll_pause(actions, i);
                    break;
                }
                Action::UnrollXlate { table, cookie } => {
                    self.table_id = *table;
                    self.rule_cookie = *cookie;
                }
                Action::Resubmit { port, table, ct } => {
                    let mut p = port.unwrap_or(self.in_port());
                    if p == OfPort::IN_PORT {
                        p = self.in_port();
                    }
                    let t = table.unwrap_or(self.table_id);
                    self.table_action(p, t, false, *ct);
                }
                Action::GotoTable(t) => {
                    let p = self.in_port();
                    self.table_action(p, *t, true, false);
                }
                Action::SetField { field, value, mask } => {
                    if self.prereqs_ok(*field) {
                        self.set_mask_l3_prereqs(*field);
                        self.mask_field(*field, *mask);
                        self.set_field(*field, *value, *mask);
                    } else {
                        self.report(NodeKind::Warn, || {
                            format!(
                                "unmet prerequisites for {}, set_field ignored",
                                field.def().name
                            )
                        });
                    }
                }
                Action::Load { value, dst } => {
                    if self.prereqs_ok(dst.field) {
                        self.set_mask_l3_prereqs(dst.field);
                        self.mask_field(dst.field, dst.mask());
                        self.set_field(dst.field, value << dst.ofs, dst.mask());
                    } else {
                        self.report(NodeKind::Warn, || {
                            format!(
                                "unmet prerequisites for {}, set_field ignored",
                                dst.field.def().name
                            )
                        });
                    }
                }
                Action::Move { src, dst } => {
                    if self.prereqs_ok(src.field) && self.prereqs_ok(dst.field) {
                        let v = self.read_subfield(src);
                        self.unwc_subfield(src);
                        self.unwc_subfield(dst);
                        self.set_field(dst.field, v << dst.ofs, dst.mask());
                        self.report_subfield(dst);
                    }
                }
                Action::ModDlSrc(mac) => {
                    self.unwc(FieldId::DlSrc);
                    self.set(FieldId::DlSrc, u128::from(*mac));
                }
                Action::ModDlDst(mac) => {
                    self.unwc(FieldId::DlDst);
                    self.set(FieldId::DlDst, u128::from(*mac));
                }
                Action::ModNwSrc(ip) => {
                    if self.dl_type() == ETH_TYPE_IP {
                        self.unwc(FieldId::NwSrc);
                        self.set(FieldId::NwSrc, u128::from(*ip));
                    }
                }
                Action::ModNwDst(ip) => {
                    if self.dl_type() == ETH_TYPE_IP {
                        self.unwc(FieldId::NwDst);
                        self.set(FieldId::NwDst, u128::from(*ip));
                    }
                }
                Action::ModNwTos(tos) => {
                    if self.is_ip_any() {
                        self.unwc_bits(FieldId::NwTos, 0xfc);
                        let t = (self.get(FieldId::NwTos) & !0xfc) | u128::from(tos & 0xfc);
                        self.set(FieldId::NwTos, t);
                    }
                }
                Action::ModTpSrc(p) | Action::ModTpDst(p) => {
                    let f = if matches!(a, Action::ModTpSrc(_)) {
                        FieldId::TpSrc
                    } else {
                        FieldId::TpDst
                    };
                    if self.is_ip_any() && self.get(FieldId::NwFrag) as u8 & FRAG_LATER == 0 {
                        self.unwc(FieldId::NwProto);
                        self.unwc(f);
                        self.set(f, u128::from(*p));
                    }
                }
                Action::ModVlanVid {
                    vid,
                    push_if_needed,
                } => {
                    self.unwc_bits(FieldId::Vlan0Tci, u128::from(VLAN_VID_MASK | VLAN_CFI));
                    let tci = self.get(FieldId::Vlan0Tci) as u16;
                    if tci & VLAN_CFI != 0 || *push_if_needed {
                        if self.get(FieldId::Vlan0Tpid) == 0 {
                            self.set(FieldId::Vlan0Tpid, 0x8100);
                        }
                        let t = (tci & !VLAN_VID_MASK) | (vid & VLAN_VID_MASK) | VLAN_CFI;
                        self.set(FieldId::Vlan0Tci, u128::from(t));
                    }
                }
                Action::ModVlanPcp {
                    pcp,
                    push_if_needed,
                } => {
                    self.unwc_bits(FieldId::Vlan0Tci, u128::from(VLAN_PCP_MASK | VLAN_CFI));
                    let tci = self.get(FieldId::Vlan0Tci) as u16;
                    if tci & VLAN_CFI != 0 || *push_if_needed {
                        if self.get(FieldId::Vlan0Tpid) == 0 {
                            self.set(FieldId::Vlan0Tpid, 0x8100);
                        }
                        let t = (tci & !VLAN_PCP_MASK)
                            | ((u16::from(*pcp) << 13) & VLAN_PCP_MASK)
                            | VLAN_CFI;
                        self.set(FieldId::Vlan0Tci, u128::from(t));
                    }
                }
                Action::StripVlan | Action::PopVlan => self.pop_vlan(),
                Action::PushVlan(tpid) => {
                    let n = count_vlans(&self.flow);
                    if n >= 1 {
                        self.unwc(FieldId::Vlan0Tpid);
                        self.unwc(FieldId::Vlan0Tci);
                    }
                    if n >= 2 {
                        self.unwc(FieldId::Vlan1Tpid);
                        self.unwc(FieldId::Vlan1Tci);
                    }
                    let (t0, c0) = (self.get(FieldId::Vlan0Tpid), self.get(FieldId::Vlan0Tci));
                    self.set(FieldId::Vlan1Tpid, t0);
                    self.set(FieldId::Vlan1Tci, c0);
                    self.set(FieldId::Vlan0Tpid, u128::from(*tpid));
                    self.set(FieldId::Vlan0Tci, u128::from(VLAN_CFI));
                }
                Action::DecTtl(ids) => {
                    self.unwc(FieldId::NwTtl);
                    if self.dec_ttl(ids) {
                        break;
                    }
                }
                Action::Ct(ct) => self.conntrack(ct),
                Action::CtClear => {
                    self.clear_conntrack();
                    self.odp.push(OdpAction::CtClear);
                }
                Action::Note(_) => {}
                Action::WriteMetadata { .. }
                | Action::ModNwTtl(_)
                | Action::Exit
                | Action::Clone(_)
                | Action::WriteActions(_)
                | Action::ClearActions
                | Action::SetQueue(_)
                | Action::Enqueue { .. }
                | Action::PopQueue => {
                    self.do_action_ext(a);
                }
                Action::Multipath(mp) => self.multipath(mp),
                Action::Bundle(b) => self.bundle(b),
                // OVS 3.1 `xlate_sample_action` without an IPFIX exporter on the bridge (we
                // have none): nothing, not even a commit.
                Action::Sample(_) => {}
                // Translates the rest of this list twice, into the datapath action's branches.
                Action::CheckPktLarger { pkt_len, dst } => {
                    self.check_pkt_larger(*pkt_len, dst, &actions[i + 1..]);
                    break;
                }
                // conjunctive matches (issue #17): a soft rule is never a lookup's result; run
                // anyway (e.g. a packet-out), it does nothing, as in OVS.
                Action::Conjunction { .. } => {}
                Action::Group(g) => {
                    if self.group_action(*g) {
                        return;
                    }
                }
            }
            if self.hash_freeze.is_some() && self.unroll_hash_freeze(actions, i) {
                break;
            }
            if self.pause.is_some() && self.unroll_pause(actions, i) {
                break;
            }
        }
        self.list_last = outer_last;
    }

    fn dec_ttl(&mut self, ids: &[u16]) -> bool {
        if !self.is_ip_any() {
            return false;
        }
        let ttl = self.get(FieldId::NwTtl) as u8;
        if ttl > 1 {
            self.set(FieldId::NwTtl, u128::from(ttl - 1));
            return false;
        }
        let ids: Vec<u16> = if ids.is_empty() {
            vec![0]
        } else {
            ids.to_vec()
        };
        for id in ids {
            self.controller(u16::MAX, PacketInReason::InvalidTtl, id);
        }
        let v = if self.dl_type() == ETH_TYPE_IP { 4 } else { 6 };
        self.report(NodeKind::Warn, || format!("IPv{v} decrement TTL exception"));
        true
    }

    fn pop_vlan(&mut self) {
        let n = count_vlans(&self.flow);
        if n > 1 {
            self.unwc(FieldId::Vlan1Tpid);
            self.unwc(FieldId::Vlan1Tci);
            let (t1, c1) = (self.get(FieldId::Vlan1Tpid), self.get(FieldId::Vlan1Tci));
            self.set(FieldId::Vlan0Tpid, t1);
            self.set(FieldId::Vlan0Tci, c1);
        }
        if n > 0 {
            let (tp, tc) = if n == 1 {
                (FieldId::Vlan0Tpid, FieldId::Vlan0Tci)
            } else {
                (FieldId::Vlan1Tpid, FieldId::Vlan1Tci)
            };
            self.set(tp, 0);
            self.set(tc, 0);
        }
    }

    fn clear_conntrack(&mut self) {
        for f in CT_FIELDS {
            self.set(f, 0);
        }
    }

    /// OVS `xlate_report_subfield`: the destination's new value, as the field prints when
    /// whole, else as hex.
    fn report_subfield(&mut self, dst: &Subfield) {
        if self.tr.is_none() {
            return;
        }
        let now = self.read_subfield(dst);
        let mut text = String::new();
        flow::text::format::format_subfield(&mut text, dst);
        text.push_str(" is now ");
        if dst.is_whole() {
            flow::text::format::format_mf_value(&mut text, dst.field, now, dst.field.byte_max());
        } else if now == 0 {
            text.push('0');
        } else {
            text.push_str(&format!("{now:#x}"));
        }
        self.report(NodeKind::Detail, || text);
    }

    /// Reads a subfield's value (in subfield units).
    fn read_subfield(&self, sf: &Subfield) -> u128 {
        let d = sf.field.def();
        let v = (self.get(d.storage) >> d.shift) & sf.field.max();
        (v >> sf.ofs) & (sf.mask() >> sf.ofs)
    }

    fn unwc_subfield(&mut self, sf: &Subfield) {
        self.mask_field(sf.field, sf.mask());
    }

    /// OVS `mf_mask_field_masked`: un-wildcards `mask` (field units) of `mf`.
    fn mask_field(&mut self, mf: Mf, mask: u128) {
        let d = mf.def();
        let m = (mask & mf.max()) << d.shift;
        self.unwc_bits(d.storage, m);
    }

    /// OVS `mf_set_flow_value_masked` with the VLAN views' CFI behaviour.
    fn set_field(&mut self, mf: Mf, value: u128, mask: u128) {
        let d = mf.def();
        let mask = mask & mf.max();
        let cur = self.get(d.storage);
        let m = mask << d.shift;
        let v = (value << d.shift) & m;
        let mut nv = (cur & !m) | v;
        match mf {
            Mf::VlanVid | Mf::DlVlan | Mf::DlVlanPcp | Mf::VlanPcp => {
                nv |= u128::from(VLAN_CFI);
            }
            Mf::InPort | Mf::InPortOxm => nv &= 0xffff,
            _ => {}
        }
        self.set(d.storage, nv);
    }

    /// OVS `mf_are_prereqs_ok` with wildcard tracking.
    fn prereqs_ok(&mut self, mf: Mf) -> bool {
        let dl = self.dl_type();
        let ip = self.is_ip_any();
        let proto_is = |s: &mut Self, p: u8| {
            s.unwc(FieldId::NwProto);
            s.nw_proto() == p
        };
        match mf.def().prereq {
            Prereq::None | Prereq::Ethernet => true,
            Prereq::Arp => dl == ETH_TYPE_ARP || dl == ETH_TYPE_RARP,
            Prereq::Ipv4 => dl == ETH_TYPE_IP,
            Prereq::Ipv6 => dl == ETH_TYPE_IPV6,
            Prereq::IpAny => ip,
            Prereq::VlanVid => {
                self.unwc_bits(FieldId::Vlan0Tci, u128::from(VLAN_CFI));
                self.get(FieldId::Vlan0Tci) as u16 & VLAN_CFI != 0
            }
            Prereq::Tcp => ip && proto_is(self, ipproto::TCP),
            Prereq::Udp => ip && proto_is(self, ipproto::UDP),
            Prereq::Sctp => ip && proto_is(self, ipproto::SCTP),
            Prereq::Icmpv4 => dl == ETH_TYPE_IP && proto_is(self, ipproto::ICMP),
            Prereq::Icmpv6 => dl == ETH_TYPE_IPV6 && proto_is(self, ipproto::ICMPV6),
            Prereq::Nd | Prereq::NdSolicit | Prereq::NdAdvert => {
                if !(dl == ETH_TYPE_IPV6 && proto_is(self, ipproto::ICMPV6)) {
                    return false;
                }
                self.unwc_bits(FieldId::TpSrc, 0xff);
                self.unwc_bits(FieldId::TpDst, 0xff);
                let (t, c) = (self.get(FieldId::TpSrc), self.get(FieldId::TpDst));
                c == 0
                    && match mf.def().prereq {
                        Prereq::NdSolicit => t == 135,
                        Prereq::NdAdvert => t == 136,
                        _ => t == 135 || t == 136,
                    }
            }
            Prereq::Ct => {
                self.unwc(FieldId::CtState);
                let st = self.get(FieldId::CtState) as u32;
                st & flow::field::ct_state::TRACKED != 0 && st & flow::field::ct_state::INVALID == 0
            }
        }
    }

    fn output_action(&mut self, port: OfPort, max_len: u16) {
        match port {
            OfPort::IN_PORT => {
                let p = self.in_port();
                self.compose_output(p);
            }
            OfPort::TABLE => {
                let p = self.in_port();
                self.table_action(p, 0, true, false);
            }
            OfPort::NORMAL => self.normal(),
            OfPort::FLOOD => self.flood(false),
            OfPort::ALL => self.flood(true),
            OfPort::CONTROLLER => {
                let reason = if self.in_packet_out {
                    PacketInReason::PacketOut
                } else if self.in_group {
                    PacketInReason::Group
                } else if self.in_action_set {
                    PacketInReason::ActionSet
                } else {
                    PacketInReason::Action
                };
                self.controller(max_len, reason, 0)
            }
            OfPort::ANY => {}
            _ => {
                if port != self.in_port() {
                    self.compose_output(port);
                } else {
                    self.report(NodeKind::Warn, || "skipping output to input port".into());
                }
            }
        }
    }

    fn compose_output(&mut self, port: OfPort) {
        let Some(p) = self.br.port(port) else {
            self.report(NodeKind::Warn, || "Nonexistent output port".into());
            return;
        };
        let dp = p.dp_port;
        self.commit();
        self.odp.push(OdpAction::Output(dp));
    }

    fn flood(&mut self, all: bool) {
        let in_port = self.in_port();
        let ports: Vec<OfPort> = self
            .br
            .ports()
            .filter(|p| p.ofport != in_port && (all || !p.no_flood))
            .map(|p| p.ofport)
            .collect();
        for p in ports {
            self.compose_output(p);
        }
    }

    fn controller(&mut self, max_len: u16, reason: PacketInReason, id: u16) {
        self.controller_cookie(max_len, reason, id, false, &[]);
    }

    /// A packet-in from here: the pipeline state frozen, then `userspace(controller(...))`.
    /// In a packet-out, `output:CONTROLLER` says reason `packet_out` and the packet-in has
    /// no rule cookie unless a rule's actions sent it, as OVS's.
    fn controller_cookie(
        &mut self,
        max_len: u16,
        reason: PacketInReason,
        id: u16,
        miss: bool,
        userdata: &[u8],
    ) {
        self.commit();
        self.freezing_packet_in = true;
        let recirc_id = self.freeze_with(self.table_id, None, Vec::new(), userdata);
        self.odp.push(OdpAction::Userspace(ControllerCookie {
            reason,
            implicit_miss: miss,
            dont_send: !self.side_effects,
            continuation: false,
            recirc_id,
            rule_cookie: self.rule_cookie,
            controller_id: id,
            max_len,
        }));
    }

    /// Allocates (or reuses) the recirculation id of the current frozen state.
    fn freeze(&mut self, table: u8, zone: Option<u16>) -> u32 {
        self.freeze_with(table, zone, Vec::new(), &[])
    }

    /// [`Self::freeze`] of a state that resumes with `actions` (see [`Frozen::actions`]).
    fn freeze_with(
        &mut self,
        table: u8,
        zone: Option<u16>,
        actions: Vec<Action>,
        userdata: &[u8],
    ) -> u32 {
        let mut meta = self.flow;
        for w in flow::Stage::L2.words().start..flow::FLOW_WORDS {
            meta.w[w] = 0;
        }
        // The same frozen state reuses its id (OVS `recirc_alloc_id_ctx`), but every freeze is
        // recorded: each is a packet to resume (e.g. two `ct` in different zones).
        let id = match self.frozen.iter().find(|f| {
            f.table == table && f.key == meta && f.actions == actions && f.userdata == userdata
        }) {
            Some(f) => f.id,
            None => {
                let mut ids = self.br.recirc_ids();
                // A pooled state's id is referenced (or allocated) now, under the lock, so a
                // concurrent translation of the same state finds it.
                match ids.alloc_frozen(table, &meta, &actions, userdata) {
                    Some(Ok(id)) => {
                        drop(ids);
                        self.recirc_refs
                            .push(RecircRef::counted(self.br.recirc.clone(), id));
                        id
                    }
                    Some(Err(e)) => {
                        drop(ids);
                        self.report(NodeKind::Error, || e.to_string());
                        self.error = Some(XlateError::NoRecircId);
                        0
                    }
                    None => {
                        let id = *self.next_recirc.get_or_insert(ids.next);
                        self.next_recirc = Some(id.wrapping_add(1).max(1));
                        id
                    }
                }
            }
        };
        let mut resume = self.base;
        resume.w[..flow::Stage::L2.words().start]
            .copy_from_slice(&self.flow.w[..flow::Stage::L2.words().start]);
        for f in CT_FIELDS {
            f.set(&mut resume, 0);
        }
        FieldId::RecircId.set(&mut resume, u128::from(id));
        self.frozen.push(Frozen {
            id,
            table,
            key: meta,
            resume,
            zone,
            actions,
            userdata: userdata.to_vec(),
            packet_in: self.freezing_packet_in,
        });
        self.freezing_packet_in = false;
        id
    }

    fn conntrack(&mut self, ct: &Ct) {
        let zone = match ct.zone {
            CtZone::Imm(z) => z,
            CtZone::Field(sf) => {
                let z = self.read_subfield(&sf) as u16;
                self.unwc_subfield(&sf);
                z
            }
        };
        self.commit();
        let old_mark = FieldId::CtMark.get_mask(&self.wc);
        let old_label = FieldId::CtLabel.get_mask(&self.wc);
        FieldId::CtMark.set_mask(&mut self.wc, 0);
        FieldId::CtLabel.set_mask(&mut self.wc, 0);
        self.do_actions(&ct.exec);
        let mm = FieldId::CtMark.get_mask(&self.wc) as u32;
        let lm = FieldId::CtLabel.get_mask(&self.wc);
        let mark = (mm != 0).then(|| (self.get(FieldId::CtMark) as u32 & mm, mm));
        let label = (lm != 0).then(|| (self.get(FieldId::CtLabel) & lm, lm));
        let helper = match ct.alg {
            Some(21) => Some("ftp"),
            Some(69) => Some("tftp"),
            _ => None,
        };
        let nat = ct.nat;
        self.odp.push(OdpAction::Ct {
            commit: ct.commit && !ct.force,
            force: ct.force,
            zone,
            mark,
            label,
            helper,
            nat,
        });
        FieldId::CtMark.set_mask(&mut self.wc, old_mark);
        FieldId::CtLabel.set_mask(&mut self.wc, old_label);
        if let Some(t) = ct.table {
            let id = self.freeze(t, Some(zone));
            self.odp.push(OdpAction::Recirc(id));
            self.report(NodeKind::Detail, || {
                format!(
                    "A clone of the packet is forked to recirculate. The forked pipeline will be resumed at table {t}."
                )
            });
        }
        self.clear_conntrack();
        self.report(NodeKind::Detail, || {
            "Sets the packet to an untracked state, and clears all the conntrack fields.".into()
        });
    }

    // ---- NORMAL ----

    fn normal(&mut self) {
        self.unwc(FieldId::DlSrc);
        self.unwc(FieldId::DlDst);
        self.unwc_bits(FieldId::Vlan0Tci, u128::from(VLAN_VID_MASK | VLAN_CFI));
        let in_port = self.in_port();
        let Some(inb) = self.br.port(in_port).cloned() else {
            // OVS `xlate_normal`: the packet's port is not on the bridge.
            self.report(NodeKind::Error, || {
                format!("received packet on unknown port {}", in_port.0)
            });
            self.report(NodeKind::Warn, || "no input bundle, dropping".into());
            return;
        };
        let in_x = xvlan_extract(&self.flow);
        if !self.input_vid_is_valid(in_x[0].1, &inb) {
            self.report(NodeKind::Warn, || {
                "disallowed VLAN VID for this input port, dropping".into()
            });
            return;
        }
        let xv = xvlan_input_translate(&inb, &in_x);
        let vlan = xv[0].1;
        let dst = self.get(FieldId::DlDst) as u64;
        if is_reserved_mac(dst) {
            self.report(NodeKind::Detail, || {
                "packet has reserved destination MAC, dropping".into()
            });
            return;
        }
        let _grat = self.is_gratuitous_arp();
        let src = self.get(FieldId::DlSrc) as u64;
        if self.side_effects {
            // OVS `update_learning_table__`: a unicast source is learned, and the trace says
            // so when the table did not already have it on this port.
            if src & (1 << 40) == 0 {
                let known = self
                    .learned
                    .iter()
                    .rev()
                    .find(|(m, v, _)| *m == src && *v == vlan)
                    .map(|(_, _, p)| *p)
                    .or_else(|| self.br.mac.lookup(src, vlan, self.now_ms));
                if known != Some(in_port) {
                    let name = inb.name.clone();
                    self.report(NodeKind::Detail, || {
                        let b = src.to_be_bytes();
                        format!(
                            "learned that {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} is on port {name} in VLAN {vlan}",
                            b[2], b[3], b[4], b[5], b[6], b[7]
                        )
                    });
                }
            }
            self.learned.push((src, vlan, in_port));
        }
        self.mac_deps.push((dst, vlan));
        let learned_now = self
            .learned
            .iter()
            .rev()
            .find(|(m, v, _)| *m == dst && *v == vlan && m & (1 << 40) == 0)
            .map(|(_, _, p)| *p);
        let found = learned_now.or_else(|| self.br.mac.lookup(dst, vlan, self.now_ms));
        match found {
            Some(p) => match self.br.port(p).cloned() {
                Some(outb) if outb.ofport != in_port => {
                    self.report(NodeKind::Detail, || "forwarding to learned port".into());
                    self.output_normal(&outb, &xv);
                }
                Some(_) => self.report(NodeKind::Detail, || {
                    "learned port is input port, dropping".into()
                }),
                None => self.report(NodeKind::Warn, || {
                    "learned port is unknown, dropping".into()
                }),
            },
            None => {
                self.report(NodeKind::Detail, || {
                    "no learned MAC for destination, flooding".into()
                });
                let outs: Vec<Port> = self
                    .br
                    .ports()
                    .filter(|p| p.ofport != in_port && !p.no_flood && includes_vlan(p, &xv))
                    .cloned()
                    .collect();
                for p in outs {
                    self.output_normal(&p, &xv);
                }
            }
        }
    }

    fn input_vid_is_valid(&mut self, vid: u16, inb: &Port) -> bool {
        match &inb.vlan {
            VlanMode::Access(tag) => {
                if vid != 0 {
                    self.report(NodeKind::Error, || {
                        format!(
                            "dropping VLAN {vid} tagged packet received on port {} configured as VLAN {tag} access port",
                            inb.name
                        )
                    });
                    return false;
                }
                true
            }
            m @ (VlanMode::NativeTagged { .. } | VlanMode::NativeUntagged { .. }) if vid == 0 => {
                let _ = m;
                true
            }
            m => {
                if !m.trunks_vlan(vid) {
                    self.report(NodeKind::Error, || {
                        format!(
                            "dropping VLAN {vid} packet received on port {} not configured for trunking VLAN {vid}",
                            inb.name
                        )
                    });
                    return false;
                }
                true
            }
        }
    }

    fn is_gratuitous_arp(&mut self) -> bool {
        if self.dl_type() != ETH_TYPE_ARP {
            return false;
        }
        self.unwc(FieldId::DlDst);
        if self.get(FieldId::DlDst) as u64 != 0xffff_ffff_ffff {
            return false;
        }
        self.unwc(FieldId::NwProto);
        match self.nw_proto() {
            2 => true,
            1 => {
                self.unwc(FieldId::NwSrc);
                self.unwc(FieldId::NwDst);
                self.get(FieldId::NwSrc) == self.get(FieldId::NwDst)
            }
            _ => false,
        }
    }

    fn output_normal(&mut self, outb: &Port, xv: &XVlan) {
        let out = xvlan_output_translate(outb, xv);
        let saved: Vec<u128> = VLAN_FIELDS.iter().map(|f| self.get(*f)).collect();
        // xvlan_put
        for (i, (tpid_f, tci_f)) in [
            (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
            (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
        ]
        .into_iter()
        .enumerate()
        {
            let (tpid, vid, pcp) = out[i];
            let mut tci = vid | (pcp & VLAN_PCP_MASK);
            if tci != 0 {
                tci |= VLAN_CFI;
                self.set(tpid_f, u128::from(if tpid != 0 { tpid } else { 0x8100 }));
            }
            self.set(tci_f, u128::from(tci));
        }
        self.compose_output(outb.ofport);
        for (f, v) in VLAN_FIELDS.iter().zip(saved) {
            self.set(*f, v);
        }
        // The datapath packet now has NORMAL's tags, possibly shifted against the key's: a
        // later commit must treat every tag as written (see `commit_vlan`).
        if VLAN_FIELDS
            .iter()
            .any(|f| f.get(&self.base) != f.get(&self.flow))
        {
            self.vlan_written = [(u16::MAX, true); 2];
        }
    }

    // ---- commit ----

    /// OVS `commit_odp_actions` (masked set actions): for each header, the sub-fields that
    /// differ between the in-flight key and the datapath packet are set, each under the bits
    /// already un-wildcarded for it (OVS 3.1 `commit()`/`keycmp_mask`); the megaflow mask is not
    /// widened, except for ICMP (an unmasked set of type and code) and VLAN pops.
    fn commit(&mut self) {
        // No action changed the key since the last commit (most translations): no header
        // differs, so no set action and no header work — only VLAN (whose un-wildcarding
        // depends on what actions wrote, not on a difference) and skb_priority remain.
        if self.flow.w == self.base.w {
            self.commit_vlan();
            self.commit_skb_priority();
            return;
        }
        self.commit_headers();
        self.commit_vlan();
        self.commit_skb_priority();
        self.commit_header(
            "skb_mark",
            &[("", FieldId::PktMark, 0xffff_ffff, crate::odp::SetFmt::Hex)],
        );
    }

    /// The set actions of [`Ctx::commit`] for Ethernet, L3, transport ports and ICMP.
    fn commit_headers(&mut self) {
        use crate::odp::SetFmt::{Dec, Eth, Hex, Ipv4, Ipv6};
        const E: u128 = 0xffff_ffff_ffff;
        self.commit_header(
            "eth",
            &[
                ("src", FieldId::DlSrc, E, Eth),
                ("dst", FieldId::DlDst, E, Eth),
            ],
        );
        if self.nw_proto() != 0 {
            match FieldId::DlType.get(&self.base) as u16 {
                ETH_TYPE_IP => self.commit_header(
                    "ipv4",
                    &[
                        ("src", FieldId::NwSrc, 0xffff_ffff, Ipv4),
                        ("dst", FieldId::NwDst, 0xffff_ffff, Ipv4),
                        ("tos", FieldId::NwTos, 0xff, Hex),
                        ("ttl", FieldId::NwTtl, 0xff, Dec),
                    ],
                ),
                ETH_TYPE_IPV6 => self.commit_header(
                    "ipv6",
                    &[
                        ("src", FieldId::Ipv6Src, u128::MAX, Ipv6),
                        ("dst", FieldId::Ipv6Dst, u128::MAX, Ipv6),
                        ("label", FieldId::Ipv6Label, 0xfffff, Hex),
                        ("tclass", FieldId::NwTos, 0xff, Hex),
                        ("hlimit", FieldId::NwTtl, 0xff, Dec),
                    ],
                ),
                ETH_TYPE_ARP => self.commit_header(
                    "arp",
                    &[
                        ("sip", FieldId::NwSrc, 0xffff_ffff, Ipv4),
                        ("tip", FieldId::NwDst, 0xffff_ffff, Ipv4),
                        ("op", FieldId::NwProto, 0xffff, Dec),
                        ("sha", FieldId::ArpSha, E, Eth),
                        ("tha", FieldId::ArpTha, E, Eth),
                    ],
                ),
                _ => {}
            }
        }
        // Transport ports.
        let base_ip = matches!(
            FieldId::DlType.get(&self.base) as u16,
            ETH_TYPE_IP | ETH_TYPE_IPV6
        );
        if self.nw_proto() != 0 && base_ip {
            let name = match self.nw_proto() {
                ipproto::TCP => Some("tcp"),
                ipproto::UDP => Some("udp"),
                ipproto::SCTP => Some("sctp"),
                _ => None,
            };
            if let Some(proto) = name {
                self.commit_header(
                    proto,
                    &[
                        ("src", FieldId::TpSrc, 0xffff, Dec),
                        ("dst", FieldId::TpDst, 0xffff, Dec),
                    ],
                );
            }
        }
        // ICMP type/code (whole key, unmasked set).
        let dl = self.dl_type();
        let icmp4 = dl == ETH_TYPE_IP && self.nw_proto() == ipproto::ICMP;
        let icmp6 = dl == ETH_TYPE_IPV6 && self.nw_proto() == ipproto::ICMPV6;
        if icmp4 || icmp6 {
            let (t, bt) = (self.get(FieldId::TpSrc), FieldId::TpSrc.get(&self.base));
            let (c, bc) = (self.get(FieldId::TpDst), FieldId::TpDst.get(&self.base));
            if (t ^ bt) & 0xff != 0 || (c ^ bc) & 0xff != 0 {
                self.unwc_bits(FieldId::TpSrc, 0xff);
                self.unwc_bits(FieldId::TpDst, 0xff);
                self.odp.push(OdpAction::SetIcmp {
                    v6: icmp6,
                    ty: t as u8,
                    code: c as u8,
                });
                self.sync_base(&[FieldId::TpSrc, FieldId::TpDst]);
            }
        }
    }

    /// OVS `commit()` for one header: a masked set of the differing sub-fields under their
    /// current wildcard mask; the whole header of `base` then becomes the key's.
    fn commit_header(
        &mut self,
        header: &'static str,
        fields: &[(&'static str, FieldId, u128, crate::odp::SetFmt)],
    ) {
        let mut set = Vec::new();
        for &(name, f, full, fmt) in fields {
            let (v, b) = (f.get(&self.flow) & full, f.get(&self.base) & full);
            if v != b {
                let mut mask = f.get_mask(&self.wc) & full;
                let mut v = v;
                if f == FieldId::NwProto && header == "arp" {
                    // The flow holds the ARP opcode's low byte; OVS's `get_arp_key` widens
                    // an all-ones byte to all 16 bits, for the mask (a whole-field set) and,
                    // alike, for the value 255.
                    if mask == 0xff {
                        mask = 0xffff;
                    }
                    if v == 0xff {
                        v = 0xffff;
                    }
                }
                set.push(crate::odp::SetField {
                    name,
                    value: v & mask,
                    mask,
                    full,
                    fmt,
                });
            }
        }
        if set.is_empty() {
            return;
        }
        let ids: Vec<FieldId> = fields.iter().map(|f| f.1).collect();
        self.sync_base(&ids);
        self.odp.push(OdpAction::Set {
            header,
            fields: set,
        });
    }

    fn sync_base(&mut self, fields: &[FieldId]) {
        for f in fields {
            let v = f.get(&self.flow);
            f.set(&mut self.base, v);
        }
    }

    /// OVS `commit_vlan_action`.
    fn commit_vlan(&mut self) {
        let tags = |k: &FlowKey| -> Vec<(u16, u16)> {
            let mut v = Vec::new();
            for (tp, tc) in [
                (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
                (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
            ] {
                let c = tc.get(k) as u16;
                if c & VLAN_CFI == 0 {
                    break;
                }
                v.push((tp.get(k) as u16, c));
            }
            v
        };
        let b = tags(&self.base);
        let f = tags(&self.flow);
        // OVS compares whole tags here without un-wildcarding them, which is unsound when an
        // action rebuilt a tag from constants (`strip_vlan,push_vlan,set_field:V->vlan_vid`
        // equals the packet's tag only for one PCP): the comparison reads the packet's tag
        // bits wherever an action wrote that tag (push/pop write all of both). Bits no action
        // wrote hold the packet's own values on both sides, so they stay wildcarded
        // (`mod_vlan_vid` leaves the PCP out, as OVS does).
        for (i, (tp, tc)) in [
            (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
            (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
        ]
        .into_iter()
        .enumerate()
        {
            let (tci_bits, tpid_written) = self.vlan_written[i];
            if i < b.len() {
                if tpid_written {
                    self.unwc(tp);
                }
                self.unwc_bits(tc, u128::from(tci_bits));
            }
        }
        // Skip common inner tags.
        let (mut bn, mut fnn) = (b.len() as isize - 1, f.len() as isize - 1);
        while bn >= 0 && fnn >= 0 && b[bn as usize] == f[fnn as usize] {
            bn -= 1;
            fnn -= 1;
        }
        while bn >= 0 {
            self.odp.push(OdpAction::PopVlan);
            let (tp, tc) = if bn == 0 {
                (FieldId::Vlan0Tpid, FieldId::Vlan0Tci)
            } else {
                (FieldId::Vlan1Tpid, FieldId::Vlan1Tci)
            };
            self.unwc(tp);
            self.unwc(tc);
            bn -= 1;
        }
        while fnn >= 0 {
            let (tpid, tci) = f[fnn as usize];
            self.odp.push(OdpAction::PushVlan { tpid, tci });
            fnn -= 1;
        }
        self.sync_base(&VLAN_FIELDS);
    }
}

/// The VLAN tag bits an action may write, per tag (outer first): TCI bits (with the CFI bit,
/// which every TCI write sets) and whether the TPID. Push, pop and strip move whole tags: all.
fn vlan_writes(a: &Action) -> [(u16, bool); 2] {
    const ALL: [(u16, bool); 2] = [(u16::MAX, true); 2];
    const NONE: [(u16, bool); 2] = [(0, false); 2];
    let field = |mf: Mf, mask: u128| {
        let d = mf.def();
        let tci = ((mask & mf.max()) << d.shift) as u16 | VLAN_CFI;
        match d.storage {
            FieldId::Vlan0Tci => [(tci, false), (0, false)],
            FieldId::Vlan1Tci => [(0, false), (tci, false)],
            FieldId::Vlan0Tpid | FieldId::Vlan1Tpid => ALL,
            _ => NONE,
        }
    };
    match a {
        Action::ModVlanVid { push_if_needed, .. } => {
            [(VLAN_VID_MASK | VLAN_CFI, *push_if_needed), (0, false)]
        }
        Action::ModVlanPcp { push_if_needed, .. } => {
            [(VLAN_PCP_MASK | VLAN_CFI, *push_if_needed), (0, false)]
        }
        Action::StripVlan | Action::PopVlan | Action::PushVlan(_) => ALL,
        Action::SetField {
            field: mf, mask, ..
        } => field(*mf, *mask),
        Action::Load { dst, .. } | Action::Move { dst, .. } => field(dst.field, dst.mask()),
        _ => NONE,
    }
}

/// The conntrack fields of a key (what `ct_clear` zeroes and a freeze leaves out).
const CT_FIELDS: [FieldId; 9] = [
    FieldId::CtState,
    FieldId::CtZone,
    FieldId::CtNwProto,
    FieldId::CtMark,
    FieldId::CtTpSrc,
    FieldId::CtTpDst,
    FieldId::CtLabel,
    FieldId::CtNwSrc,
    FieldId::CtNwDst,
];

const VLAN_FIELDS: [FieldId; 4] = [
    FieldId::Vlan0Tpid,
    FieldId::Vlan0Tci,
    FieldId::Vlan1Tpid,
    FieldId::Vlan1Tci,
];

fn count_vlans(k: &FlowKey) -> usize {
    if FieldId::Vlan0Tci.get(k) as u16 & VLAN_CFI == 0 {
        0
    } else if FieldId::Vlan1Tci.get(k) as u16 & VLAN_CFI == 0 {
        1
    } else {
        2
    }
}

/// (tpid, vid, pcp bits) of up to two tags, OVS `struct xvlan`.
type XVlan = [(u16, u16, u16); 2];

fn xvlan_extract(k: &FlowKey) -> XVlan {
    let mut x = [(0, 0, 0); 2];
    for (i, (tp, tc)) in [
        (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
        (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
    ]
    .into_iter()
    .enumerate()
    {
        let tpid = tp.get(k) as u16;
        let tci = tc.get(k) as u16;
        if !is_vlan_tpid(tpid) || tci & VLAN_CFI == 0 {
            break;
        }
        x[i] = (tpid, tci & VLAN_VID_MASK, tci & VLAN_PCP_MASK);
    }
    x
}

fn xvlan_input_translate(inb: &Port, x: &XVlan) -> XVlan {
    match &inb.vlan {
        VlanMode::Access(tag) => [
            (if x[0].0 != 0 { x[0].0 } else { 0x8100 }, *tag, x[0].2),
            (0, 0, 0),
        ],
        VlanMode::Trunk(_) => *x,
        VlanMode::NativeTagged { tag, .. } | VlanMode::NativeUntagged { tag, .. } => {
            let mut o = *x;
            if x[0].1 == 0 {
                o[0] = (if x[0].0 != 0 { x[0].0 } else { 0x8100 }, *tag, x[0].2);
            }
            o
        }
    }
}

fn xvlan_output_translate(outb: &Port, x: &XVlan) -> XVlan {
    match &outb.vlan {
        VlanMode::Access(_) => [(0, 0, 0); 2],
        VlanMode::Trunk(_) | VlanMode::NativeTagged { .. } => *x,
        VlanMode::NativeUntagged { tag, .. } => {
            if x[0].1 == *tag {
                [x[1], (0, 0, 0)]
            } else {
                *x
            }
        }
    }
}

fn includes_vlan(p: &Port, x: &XVlan) -> bool {
    match &p.vlan {
        VlanMode::Access(tag) => x[0].1 == *tag && x[1].1 == 0,
        m => m.trunks_vlan(x[0].1),
    }
}

/// OVS `eth_addr_is_reserved`.
fn is_reserved_mac(m: u64) -> bool {
    (0x0180_c200_0000..=0x0180_c200_000f).contains(&m)
        || matches!(
            m,
            0x00e0_2b00_0000
                | 0x00e0_2b00_0004
                | 0x00e0_2b00_0006
                | 0x0100_0c00_0000
                | 0x0100_0ccc_cccc
                | 0x0100_0ccc_cccd
                | 0x0100_0ccd_cdcd
                | 0x0100_0ccc_ccc0
                | 0x0100_0ccc_ccc1
                | 0x0100_0ccc_ccc2
                | 0x0100_0ccc_ccc3
                | 0x0100_0ccc_ccc4
                | 0x0100_0ccc_ccc5
                | 0x0100_0ccc_ccc6
                | 0x0100_0ccc_ccc7
        )
}

/// Whether `q` is a packet the megaflow `(p, mask)` covers.
pub fn megaflow_covers(p: &FlowKey, mask: &FlowMask, q: &FlowKey) -> bool {
    p.eq_masked(q, mask)
}

mod actions_ext;
mod group;
mod lb;
mod liveness;
mod pause;
#[cfg(test)]
mod tests;
