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
//!   into it (OVS `ctx->exit`).

use flow::FieldId;
use flow::ofp::matching::ETH_TYPE_ARP;
use flow::ofp::{Action, Mf};

use super::Ctx;

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
            _ => {}
        }
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
