//! Translation of the actions added for issue #17 (beyond groups and conjunction), as OVS
//! 3.1's `do_xlate_actions` translates them:
//!
//! - `write_metadata:V/M`: `metadata = (metadata & !M) | (V & M)`. Metadata is exact while
//!   translating and dropped from the megaflow at the end (see the module doc of `xlate`), so
//!   it costs no mask bits.
//! - `mod_nw_ttl:N`: on an IP packet only; un-wildcards `nw_proto` and `nw_ttl` (OVS
//!   `WC_MASK_FIELD(nw_proto)`, `nw_ttl = 0xff`) and sets the TTL, which the next commit
//!   writes as `set(ipv4(ttl=N))` / `set(ipv6(hlimit=N))`.
//! - `exit`: stops translation: the rest of this list and of every list that resubmitted
//!   into it (OVS `ctx->exit`; as in OVS 3.1, an `exit` inside `clone(...)` stops the
//!   actions after the clone too).
//! - `clone(A)`: see `clone_actions`.
//! - `write_actions(A)` / `clear_actions`: the OpenFlow action set (OVS `ctx->action_set`),
//!   appended to in write order and emptied; executed once the whole pipeline is done
//!   (`execute_action_set`, OVS 3.1 `xlate_action_set` and `ofpacts_execute_action_set`).
//! - `set_queue:Q` / `pop_queue` / `enqueue:P:Q`: the packet's `skb_priority` (on OVS's
//!   netdev/dummy datapath queue Q is priority Q, `dpif_netdev_queue_to_priority`), committed
//!   as `set(skb_priority(Q))` before the next output (after the VLAN changes). Our flow key
//!   has no `skb_priority`: packets enter with 0, so the bit OVS un-wildcards there is one
//!   our megaflow does without. `enqueue` outputs with priority Q, then restores it (OVS
//!   `xlate_enqueue_action`: `IN_PORT` is the input port, the input port itself is skipped
//!   silently).

use flow::FieldId;
use flow::ofp::matching::ETH_TYPE_ARP;
use flow::ofp::{Action, Mf, OfPort};
use flow::text::{ActionSetClass, action_set_class};

use super::Ctx;
use crate::odp::OdpAction;
use crate::trace::NodeKind;

impl Ctx<'_> {
    /// Translates one action of this module.
    pub(super) fn do_action_ext(&mut self, a: &Action) {
        match a {
            Action::WriteMetadata { value, mask } => {
                let m = self.get(FieldId::Metadata) as u64;
                let v = (m & !mask) | (value & mask);
                self.set(FieldId::Metadata, u128::from(v));
            }
            Action::ModNwTtl(ttl) if self.is_ip_any() => {
                self.unwc(FieldId::NwProto);
                self.unwc(FieldId::NwTtl);
                self.set(FieldId::NwTtl, u128::from(*ttl));
            }
            Action::Exit => self.exit = true,
            Action::Clone(inner) => self.clone_actions(inner),
            Action::WriteActions(inner) => {
                self.action_set.extend(inner.iter().cloned());
                self.report_action_set("is");
            }
            Action::ClearActions => {
                self.report_action_set("was");
                self.action_set.clear();
            }
            Action::SetQueue(q) => self.skb_priority = *q,
            // Packets enter with priority 0 (OVS `orig_skb_priority`).
            Action::PopQueue if self.skb_priority != 0 => {
                self.skb_priority = 0;
                self.report(NodeKind::Detail, || "queue = 0".into());
            }
            Action::Enqueue { port, queue } => {
                let in_port = self.in_port();
                let p = if *port == OfPort::IN_PORT {
                    in_port
                } else if *port == in_port {
                    return;
                } else {
                    *port
                };
                let saved = self.skb_priority;
                self.skb_priority = *queue;
                self.compose_output(p);
                self.skb_priority = saved;
            }
            _ => {}
        }
    }

    /// OVS 3.1 `clone_xlate_actions`. The flow is restored afterwards in every case. When the
    /// clone's own actions are all reversible (no `ct`, no truncating output: OVS
    /// `reversible_actions` looks at the clone's list only, not into resubmits) or it is the
    /// translation's last action, its actions are translated inline, and the next commit
    /// undoes what they changed in the packet. Otherwise pending changes are committed, the
    /// actions are translated into a datapath `clone(...)` (left out when empty) and the
    /// datapath packet after it is the one before it.
    fn clone_actions(&mut self, inner: &[Action]) {
        let old_flow = self.flow;
        let old_prio = self.skb_priority;
        let last = self.list_last;
        let reversible = !inner
            .iter()
            .any(|a| matches!(a, Action::Ct(_) | Action::OutputTrunc { .. }));
        if reversible || last {
            self.do_actions(inner);
        } else {
            self.commit();
            let old_base = self.base;
            let old_base_prio = self.base_skb_priority;
            let start = self.odp.len();
            self.list_last = true;
            self.do_actions(inner);
            self.list_last = last;
            let body: Vec<OdpAction> = self.odp.drain(start..).collect();
            if !body.is_empty() {
                self.odp.push(OdpAction::Clone(body));
            }
            self.base = old_base;
            self.base_skb_priority = old_base_prio;
        }
        self.flow = old_flow;
        self.skb_priority = old_prio;
    }

    /// OVS `mf_set_mask_l3_prereqs`, run by `set_field`/`load` before they write: a write to
    /// an IP header field (addresses, label, DSCP, ECN, TTL) of an IP packet makes `nw_proto`
    /// exact, as does a write to an ARP field of an ARP packet (the datapath's set action
    /// carries the whole header).
    pub(super) fn set_mask_l3_prereqs(&mut self, mf: Mf) {
        let ip_field = matches!(
            mf,
            Mf::Ipv4Src
                | Mf::Ipv4Dst
                | Mf::Ipv6Src
                | Mf::Ipv6Dst
                | Mf::Ipv6Label
                | Mf::IpDscp
                | Mf::IpEcn
                | Mf::IpTtl
        );
        let arp_field = matches!(
            mf,
            Mf::ArpOp | Mf::ArpSha | Mf::ArpTha | Mf::ArpSpa | Mf::ArpTpa
        );
        if (self.is_ip_any() && ip_field) || (self.dl_type() == ETH_TYPE_ARP && arp_field) {
            self.unwc(FieldId::NwProto);
        }
    }
}

/// OVS 3.1 `ofpacts_execute_action_set`: the action list an action set runs as.
pub(crate) fn action_set_list(set: &[Action]) -> Vec<Action> {
    let mut slots: [Option<&Action>; 3] = [None; 3];
    let mut set_or_move = Vec::new();
    let mut fin: Option<(u8, &Action)> = None;
    for a in set {
        match action_set_class(a) {
            ActionSetClass::Slot(i) => slots[usize::from(i)] = Some(a),
            ActionSetClass::Final(c) => {
                if fin.is_none_or(|(fc, _)| c >= fc) {
                    fin = Some((c, a));
                }
            }
            ActionSetClass::SetOrMove => set_or_move.push(a.clone()),
            ActionSetClass::Invalid => {}
        }
    }
    let Some((_, last)) = fin else {
        return Vec::new();
    };
    let mut out: Vec<Action> = slots.iter().flatten().map(|a| (*a).clone()).collect();
    out.extend(set_or_move);
    out.push(last.clone());
    out
}

impl Ctx<'_> {
    /// OVS `xlate_report_action_set`.
    fn report_action_set(&mut self, verb: &str) {
        if self.tr.is_none() {
            return;
        }
        let list = action_set_list(&self.action_set);
        self.report(NodeKind::Detail, || {
            if list.is_empty() {
                format!("action set {verb} empty")
            } else {
                format!("action set {verb}: {}", flow::text::format_actions(&list))
            }
        });
    }

    /// OVS 3.1 `xlate_action_set`, run when the pipeline is done: the action set's list is
    /// translated (as its last actions) under a `--. Executing action set:` trace node.
    pub(super) fn execute_action_set(&mut self) {
        let list = action_set_list(&std::mem::take(&mut self.action_set));
        if list.is_empty() || self.error.is_some() {
            return;
        }
        self.in_action_set = true;
        let prev = self
            .tr
            .as_mut()
            .map(|t| t.enter_under_last(NodeKind::Table, "--. Executing action set:".into()));
        // After `exit` the list is entered and stops at once, as OVS's `ctx->exit` stays set.
        self.list_last = true;
        self.do_actions(&list);
        if let (Some(t), Some(p)) = (self.tr.as_mut(), prev) {
            t.leave(p);
        }
        self.in_action_set = false;
    }

    /// OVS `commit_set_priority_action`: `set(skb_priority(P))` when the packet's priority
    /// differs from the datapath packet's.
    pub(super) fn commit_skb_priority(&mut self) {
        if self.skb_priority != self.base_skb_priority {
            self.odp.push(OdpAction::Set {
                header: "skb_priority",
                fields: vec![crate::odp::SetField {
                    name: "",
                    value: u128::from(self.skb_priority),
                    mask: 0xffff_ffff,
                    full: 0xffff_ffff,
                    fmt: crate::odp::SetFmt::Hex,
                }],
            });
            self.base_skb_priority = self.skb_priority;
        }
    }
}
