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

use flow::FieldId;
use flow::ofp::matching::ETH_TYPE_ARP;
use flow::ofp::{Action, Mf};

use super::Ctx;
use crate::odp::OdpAction;

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
        let last = self.list_last;
        let reversible = !inner
            .iter()
            .any(|a| matches!(a, Action::Ct(_) | Action::OutputTrunc { .. }));
        if reversible || last {
            self.do_actions(inner);
        } else {
            self.commit();
            let old_base = self.base;
            let start = self.odp.len();
            self.list_last = true;
            self.do_actions(inner);
            self.list_last = last;
            let body: Vec<OdpAction> = self.odp.drain(start..).collect();
            if !body.is_empty() {
                self.odp.push(OdpAction::Clone(body));
            }
            self.base = old_base;
        }
        self.flow = old_flow;
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
