//! Translation of `group:N` (OVS `xlate_group_action` and its helpers in
//! `ofproto-dpif-xlate.c`).
//!
//! - A bucket's actions are an OpenFlow *action set* (`ofpacts_execute_action_set`): the last
//!   `pop_vlan`/`strip_vlan`, `push_vlan` and `dec_ttl` in that order, then every set/move in
//!   order, then the one final action of highest class (`ct` < `ct_clear` < `resubmit` <
//!   `output` < `group`, the later one of a class); without a final action the bucket does
//!   nothing, and actions not allowed in an action set (`controller(...)`, `note`, …) are
//!   ignored. The bucket runs one level deeper on a copy of the flow: afterwards the flow is
//!   restored (each `all` bucket sees the packet as the group got it), while what the bucket
//!   committed to the datapath packet stays committed, as in OVS.
//! - `all` and `indirect` run every bucket; `fast_failover` the first live bucket (no watch,
//!   or a watched port that exists, or a watched group with a live bucket, at most 128 links
//!   deep — OVS's recursive walk under a step budget, then [`super::liveness`]'s search,
//!   since groups watching each other make the walk exponential); `select` one bucket by its group's selection method ([`crate::group`]):
//!   * `dp_hash` — with no `dp_hash` yet, the translation *freezes*: the group action and
//!     every action after it (in this list and in the lists that resubmitted here) become the
//!     frozen state, and the datapath gets `hash(l4(basis))`/`hash(sym_l4(basis))` and
//!     `recirc(id)`; the recirculated pass resumes with those actions, takes
//!     `dp_hash & mask` (un-wildcarding those bits) into the Webster bucket map and walks it to
//!     the first live bucket;
//!   * `hash` — the group's `fields` (masked, prerequisites checked) hashed with OVS's
//!     `hash_bytes` from `hash_uint64(selection_method_param)`, the hashed bits un-wildcarded,
//!     the live bucket of best `(hash_int(bucket_id, basis) & 0xffff) * weight` (the later
//!     one on ties);
//!   * default — the same scoring over OVS's `flow_hash_symmetric_l4`, with its fields
//!     un-wildcarded.
//! - A missing group stops the current action list (`output to nonexistent group N`).
//! - Output to `CONTROLLER` inside a bucket uses packet-in reason `group`.
//!
//! Not modelled: the `unroll_xlate` markers OVS puts in frozen actions to restore the table id
//! and cookie of outer rules (only a `resubmit` without a table or a controller action after a
//! resubmit that led to a `dp_hash` group would notice), MPLS recirculation, port link state
//! (a port is live when it exists), and `watch_port=CONTROLLER` (never live: no controller
//! connection is modelled).

use flow::field::{FieldId, VLAN_CFI};
use flow::ofp::group::{Bucket, GroupType, OFPG_ANY};
use flow::ofp::matching::{ETH_TYPE_IP, ETH_TYPE_IPV6, ipproto};
use flow::ofp::{Action, Mf, OfPort};

use super::Ctx;
use crate::group::{Group, Selection, hash_bytes, hash_int, hash_uint64, jhash_bytes};
use crate::odp::OdpAction;
use crate::trace::NodeKind;

/// OVS `MAX_LIVENESS_RECURSION`.
const MAX_LIVENESS_RECURSION: u32 = 128;

/// Steps (`bucket_is_alive` calls) one liveness question may take in OVS's recursive walk
/// before [`super::liveness::group_reaches_live`] answers it instead: the walk reports every
/// dead bucket in a trace, as OVS does, but is exponential on groups that watch each other.
const LIVENESS_STEPS: u32 = 4096;

/// What liveness needs of bucket `b` of `g` (OVS `bucket_is_alive` without the recursion).
fn bucket_life(br: &crate::Bridge, g: &Group, b: &Bucket) -> super::liveness::BucketLife {
    let usable = !(g.desc.group_type == GroupType::Select && b.weight == 0);
    super::liveness::BucketLife {
        live_alone: usable
            && (!b.has_liveness()
                || (b.watch_port != OfPort::ANY
                    && b.watch_port != OfPort::CONTROLLER
                    && br.port_is_alive(b.watch_port))),
        watch_group: (usable && b.watch_group != OFPG_ANY).then_some(b.watch_group),
    }
}

/// A freeze in progress for a select group's `dp_hash` (OVS `ctx->freezing` with
/// `recirc_update_dp_hash`): the hash to ask for and the actions collected so far.
#[derive(Debug, Clone)]
pub(super) struct HashFreeze {
    pub(super) symmetric: bool,
    pub(super) basis: u32,
    pub(super) actions: Vec<Action>,
}

impl<'a> Ctx<'a> {
    /// OVS `xlate_group_action`. True when the group does not exist (the caller stops its
    /// action list, as OVS does).
    pub(super) fn group_action(&mut self, id: u32) -> bool {
        if !self.check_resources() {
            return false;
        }
        let br: &'a crate::Bridge = self.br;
        let Some(g) = br.group(id) else {
            self.report(NodeKind::Warn, || {
                format!("output to nonexistent group {id}")
            });
            return true;
        };
        match g.desc.group_type {
            GroupType::All | GroupType::Indirect => {
                for b in &g.desc.buckets {
                    self.group_bucket(b);
                }
                self.groups.push((id, None));
            }
            GroupType::Select | GroupType::FastFailover => {
                let b = if g.desc.group_type == GroupType::Select {
                    self.pick_select(g)
                } else {
                    self.first_live(g)
                };
                match b {
                    Some(b) => {
                        self.report(NodeKind::Detail, || format!("using bucket {}", b.bucket_id));
                        self.group_bucket(b);
                        self.groups.push((id, Some(b.bucket_id)));
                    }
                    None => self.report(NodeKind::Detail, || "no live bucket".into()),
                }
            }
        }
        false
    }

    /// OVS `xlate_group_bucket`.
    fn group_bucket(&mut self, b: &Bucket) {
        // OVS counts no bucket runs; a chain of `all` groups with two buckets each runs
        // 2^n buckets without a resubmit or an action, so runs are bounded as resubmits are.
        self.bucket_runs += 1;
        if self.bucket_runs > super::MAX_RESUBMITS {
            self.report(NodeKind::Error, || {
                format!("over {} group bucket runs", super::MAX_RESUBMITS)
            });
            self.error = Some(super::XlateError::TooManyResubmits);
            return;
        }
        let entered = self
            .tr
            .as_mut()
            .map(|t| t.enter(NodeKind::Bucket, format!("bucket {}", b.bucket_id)));
        let list = super::actions_ext::action_set_list(&b.actions);
        let old_flow = self.flow;
        let old_in_group = std::mem::replace(&mut self.in_group, true);
        self.depth += 1;
        self.do_actions(&list);
        self.depth -= 1;
        if self.hash_freeze.is_some() {
            self.finish_hash_freeze();
        }
        self.flow = old_flow;
        self.in_group = old_in_group;
        if let (Some(t), Some(prev)) = (&mut self.tr, entered) {
            t.leave(prev);
        }
    }

    /// The first live bucket of `g` (OVS `group_first_live_bucket(group, 0)`).
    fn first_live<'g>(&mut self, g: &'g Group) -> Option<&'g Bucket> {
        self.live_steps = 0;
        let first = self.first_live_bucket(g, 0);
        if self.live_steps < LIVENESS_STEPS {
            return first;
        }
        self.report_liveness_cut();
        g.desc
            .buckets
            .iter()
            .find(|b| self.bucket_alive_by_search(g, b))
    }

    /// Whether bucket `b` of `g` is live (OVS `bucket_is_alive(group, bucket, 0)`).
    fn live(&mut self, g: &Group, b: &Bucket) -> bool {
        self.live_steps = 0;
        let alive = self.bucket_is_alive(g, b, 0);
        if self.live_steps < LIVENESS_STEPS {
            return alive;
        }
        self.report_liveness_cut();
        self.bucket_alive_by_search(g, b)
    }

    fn report_liveness_cut(&mut self) {
        self.report(NodeKind::Detail, || {
            format!(
                "liveness walk stopped after {LIVENESS_STEPS} steps (groups watching each other): answered by a search of the watch graph"
            )
        });
    }

    /// [`Self::bucket_is_alive`] at depth 0 without the walk.
    fn bucket_alive_by_search(&self, g: &Group, b: &Bucket) -> bool {
        let br: &crate::Bridge = self.br;
        let life = bucket_life(br, g, b);
        life.live_alone
            || life.watch_group.is_some_and(|w| {
                super::liveness::group_reaches_live(w, 1, MAX_LIVENESS_RECURSION, |id| {
                    br.group(id).map(|wg| {
                        wg.desc
                            .buckets
                            .iter()
                            .map(move |wb| bucket_life(br, wg, wb))
                    })
                })
            })
    }

    /// OVS `bucket_is_alive`, under the [`LIVENESS_STEPS`] budget (out of steps: false, and
    /// the caller asks the search).
    fn bucket_is_alive(&mut self, g: &Group, b: &Bucket, depth: u32) -> bool {
        if self.live_steps >= LIVENESS_STEPS {
            return false;
        }
        self.live_steps += 1;
        if depth >= MAX_LIVENESS_RECURSION {
            self.report(NodeKind::Error, || {
                format!("bucket chaining exceeded {MAX_LIVENESS_RECURSION} links")
            });
            return false;
        }
        // The same bucket test as the search's; only the watched group recurses.
        let life = bucket_life(self.br, g, b);
        life.live_alone
            || life
                .watch_group
                .is_some_and(|w| self.group_is_alive(w, depth + 1))
    }

    fn group_is_alive(&mut self, id: u32, depth: u32) -> bool {
        let br: &'a crate::Bridge = self.br;
        match br.group(id) {
            Some(g) => self.first_live_bucket(g, depth).is_some(),
            None => false,
        }
    }

    /// OVS `group_first_live_bucket`.
    fn first_live_bucket<'g>(&mut self, g: &'g Group, depth: u32) -> Option<&'g Bucket> {
        for b in &g.desc.buckets {
            if self.bucket_is_alive(g, b, depth) {
                return Some(b);
            }
            if self.tr.is_some() {
                let mut why = String::new();
                if b.watch_port != OfPort::ANY {
                    why = format!("port {}", b.watch_port);
                }
                if b.watch_group != OFPG_ANY {
                    if !why.is_empty() {
                        why.push_str(" and ");
                    }
                    // (OVS says "port" here too.)
                    why.push_str(&format!("port {}", b.watch_group));
                }
                self.report(NodeKind::Detail, || {
                    format!("bucket {}: not live due to {why}", b.bucket_id)
                });
            }
        }
        None
    }

    /// OVS `group_best_live_bucket`.
    fn best_live_bucket<'g>(&mut self, g: &'g Group, basis: u32) -> Option<&'g Bucket> {
        let mut best: Option<&Bucket> = None;
        let mut best_score = 0u32;
        for b in &g.desc.buckets {
            if self.live(g, b) {
                let score = (hash_int(b.bucket_id, basis) & 0xffff) * u32::from(b.weight);
                if score >= best_score {
                    best = Some(b);
                    best_score = score;
                }
                self.report(NodeKind::Detail, || {
                    format!("bucket {}: score {score}", b.bucket_id)
                });
            }
        }
        best
    }

    /// OVS `pick_select_group`.
    fn pick_select<'g>(&mut self, g: &'g Group) -> Option<&'g Bucket> {
        match g.selection {
            Selection::Default => {
                let basis = self.symmetric_l4_hash();
                self.best_live_bucket(g, basis)
            }
            Selection::Hash => {
                let mut basis = hash_uint64(g.desc.props.selection_method_param);
                for &(mf, mask) in &g.desc.props.fields {
                    if !self.prereqs_ok(mf) {
                        continue;
                    }
                    let d = mf.def();
                    let v = (self.get(d.storage) >> d.shift) & Mf::max(mf) & mask;
                    let n = d.n_bytes as usize;
                    let bytes = v.to_be_bytes();
                    basis = hash_bytes(&bytes[16 - n..], basis);
                    self.mask_field(mf, mask);
                }
                self.best_live_bucket(g, basis)
            }
            Selection::DpHash { symmetric, basis } => {
                let dp_hash = self.get(FieldId::DpHash) as u32;
                if dp_hash == 0 {
                    self.hash_freeze = Some(HashFreeze {
                        symmetric,
                        basis,
                        actions: Vec::new(),
                    });
                    return None;
                }
                self.unwc_bits(FieldId::DpHash, u128::from(g.hash_mask));
                for i in 0..=g.hash_mask {
                    let slot = (dp_hash.wrapping_add(i) & g.hash_mask) as usize;
                    let Some(&bi) = g.hash_map.get(slot) else {
                        break;
                    };
                    let b = &g.desc.buckets[bi];
                    if self.live(g, b) {
                        return Some(b);
                    }
                }
                None
            }
        }
    }

    /// OVS `flow_mask_hash_fields(NX_HASH_FIELDS_SYMMETRIC_L4)` + `flow_hash_symmetric_l4`
    /// with basis 0, as select groups use it.
    fn symmetric_l4_hash(&mut self) -> u32 {
        self.symmetric_l4_hash_with(0)
    }

    /// OVS `flow_mask_hash_fields(NX_HASH_FIELDS_SYMMETRIC_L4)` + `flow_hash_symmetric_l4`
    /// (also `multipath` and `bundle`'s `symmetric_l4`, `xlate::lb`).
    pub(super) fn symmetric_l4_hash_with(&mut self, basis: u32) -> u32 {
        let dl = self.dl_type();
        let proto = self.nw_proto();
        for f in [FieldId::DlSrc, FieldId::DlDst] {
            self.unwc(f);
        }
        match dl {
            ETH_TYPE_IP => {
                self.unwc(FieldId::NwSrc);
                self.unwc(FieldId::NwDst);
            }
            ETH_TYPE_IPV6 => {
                self.unwc(FieldId::Ipv6Src);
                self.unwc(FieldId::Ipv6Dst);
            }
            _ => {}
        }
        if self.is_ip_any() {
            self.unwc(FieldId::NwProto);
            if proto != ipproto::UDP {
                // `flow_unwildcard_tp_ports`: ICMP's type/code are 8 bits.
                let m = if matches!(proto, ipproto::ICMP | ipproto::ICMPV6) {
                    0xff
                } else {
                    0xffff
                };
                self.unwc_bits(FieldId::TpSrc, m);
                self.unwc_bits(FieldId::TpDst, m);
            }
        }
        for tci in [FieldId::Vlan0Tci, FieldId::Vlan1Tci] {
            self.unwc_bits(tci, u128::from(0x0fff | VLAN_CFI));
        }
        // struct { union { be32 ipv4; in6_addr ipv6 }; be16 eth_type, vlan_tci, tp_port;
        //          eth_addr; u8 ip_proto; } — 29 bytes, 32 with padding, zeroed.
        let mut f = [0u8; 32];
        let src = (self.get(FieldId::DlSrc) as u64).to_be_bytes();
        let dst = (self.get(FieldId::DlDst) as u64).to_be_bytes();
        for i in 0..6 {
            f[22 + i] = src[2 + i] ^ dst[2 + i];
        }
        let mut tci = 0u16;
        for (tp, t) in [
            (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
            (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
        ] {
            if self.get(tp) != 0 {
                tci ^= self.get(t) as u16 & 0x0fff;
            }
        }
        f[18..20].copy_from_slice(&tci.to_be_bytes());
        f[16..18].copy_from_slice(&dl.to_be_bytes());
        let ports = |s: &Self| {
            if proto == ipproto::TCP || proto == ipproto::SCTP {
                (s.get(FieldId::TpSrc) as u16) ^ (s.get(FieldId::TpDst) as u16)
            } else {
                0
            }
        };
        if dl == ETH_TYPE_IP {
            let a = (self.get(FieldId::NwSrc) as u32) ^ (self.get(FieldId::NwDst) as u32);
            f[0..4].copy_from_slice(&a.to_be_bytes());
            f[28] = proto;
            f[20..22].copy_from_slice(&ports(self).to_be_bytes());
        } else if dl == ETH_TYPE_IPV6 {
            let a = self.get(FieldId::Ipv6Src) ^ self.get(FieldId::Ipv6Dst);
            f[0..16].copy_from_slice(&a.to_be_bytes());
            f[28] = proto;
            f[20..22].copy_from_slice(&ports(self).to_be_bytes());
        }
        jhash_bytes(&f, basis)
    }

    /// Collects the continuation of a `dp_hash` freeze from the action list being run (the
    /// action at `i` and what follows it when the freeze began there, else what follows it).
    /// True when the list must stop.
    pub(super) fn unroll_hash_freeze(&mut self, actions: &[Action], i: usize) -> bool {
        let Some(f) = &mut self.hash_freeze else {
            return false;
        };
        let from = if f.actions.is_empty() { i } else { i + 1 };
        f.actions
            .extend_from_slice(actions.get(from..).unwrap_or(&[]));
        true
    }

    /// OVS `finish_freezing` for a `dp_hash` freeze: commit, give the frozen state (the
    /// collected actions, resumed from table 0's context) its recirculation id, emit
    /// `hash(...)` and `recirc(id)`.
    pub(super) fn finish_hash_freeze(&mut self) {
        let Some(f) = self.hash_freeze.take() else {
            return;
        };
        self.commit();
        let id = self.freeze_with(0, None, f.actions, &[]);
        if self.error.is_some() {
            return;
        }
        self.odp.push(OdpAction::Hash {
            symmetric: f.symmetric,
            basis: f.basis,
        });
        self.odp.push(OdpAction::Recirc(id));
    }
}

#[cfg(test)]
mod tests {
    use crate::xlate::actions_ext::action_set_list;
    use flow::text::parse_actions;

    #[test]
    fn action_sets_as_ovs_orders_them() {
        let l = |s: &str| flow::text::format_actions(&action_set_list(&parse_actions(s).unwrap()));
        // OVS 3.1 traced these buckets as: output:3 / set_field..,set_field..,output:4 /
        // CONTROLLER:65535 / pop_vlan,push_vlan:0x8100,dec_ttl,ct_clear.
        assert_eq!(l("output:2,output:3"), "output:3");
        assert_eq!(
            l("mod_dl_src:00:00:00:00:00:09,output:2,mod_dl_dst:00:00:00:00:00:08,output:4"),
            "mod_dl_src:00:00:00:00:00:09,mod_dl_dst:00:00:00:00:00:08,output:4"
        );
        assert_eq!(l("controller,note:01"), "CONTROLLER:65535");
        assert_eq!(
            l("pop_vlan,dec_ttl,push_vlan:0x8100,ct_clear"),
            "pop_vlan,push_vlan:0x8100,dec_ttl,ct_clear"
        );
        assert_eq!(l("mod_dl_src:00:00:00:00:00:09"), "drop");
        assert_eq!(l("output:1,group:4,ct(commit)"), "group:4");
    }
}
