//! The `Flow:` line of `ovs-appctl ofproto/trace` (OVS `flow_format`): a packet's flow key in
//! match syntax.
//!
//! OVS builds a match whose mask is `flow_wildcards_init_for_packet` (every header field the
//! packet has: Ethernet, the first VLAN tag and, when that tag is non-zero, the next one; the
//! L3 fields of IPv4/IPv6/ARP; `nw_frag`, `nw_tos`, `nw_ttl`, `nw_proto`; ports, ICMP
//! type/code and TCP flags unless the packet is a later fragment; ND target and link-layer
//! addresses for neighbour discovery), drops the metadata fields that are zero (`in_port`,
//! `recirc_id`, `dp_hash`, `pkt_mark`, `ct_*`, registers, `metadata`) and prints it with
//! `match_format`. So `vlan_tci=0x0000` and `nw_frag=no` always appear for an untagged IP packet.

use crate::field::{FRAG_LATER, FieldId};
use crate::key::FlowKey;
use crate::ofp::matching::{
    ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_RARP, Match, ipproto,
};
use crate::ofp::{DEFAULT_PRIORITY, Mf};
use crate::text::format::format_match_priority;

/// The match OVS's `flow_format` prints for `key` (see the module docs).
pub fn flow_line_match(key: &FlowKey) -> Match {
    let mut m = Match {
        key: *key,
        mask: crate::key::FlowMask::CATCHALL,
    };
    let full = |m: &mut Match, f: FieldId| {
        let v = m.value(f);
        m.set_storage(f, v, f.max());
    };
    let nonzero = |m: &mut Match, f: FieldId| {
        if m.value(f) != 0 {
            let v = m.value(f);
            m.set_storage(f, v, f.max());
        }
    };
    for f in [
        FieldId::InPort,
        FieldId::PktMark,
        FieldId::CtState,
        FieldId::CtZone,
        FieldId::CtMark,
        FieldId::CtLabel,
        FieldId::RecircId,
        FieldId::DpHash,
        FieldId::Metadata,
    ] {
        nonzero(&mut m, f);
    }
    for r in (0..16).filter_map(Mf::reg) {
        nonzero(&mut m, r.def().storage);
    }
    for f in [
        FieldId::DlDst,
        FieldId::DlSrc,
        FieldId::DlType,
        FieldId::Vlan0Tci,
    ] {
        full(&mut m, f);
    }
    if m.value(FieldId::Vlan0Tci) != 0 {
        full(&mut m, FieldId::Vlan1Tci);
    }
    let dl = m.value(FieldId::DlType) as u16;
    let proto = m.value(FieldId::NwProto) as u8;
    let ct_valid = m.ct_valid() && m.value(FieldId::CtNwProto) != 0;
    match dl {
        ETH_TYPE_IP => {
            full(&mut m, FieldId::NwSrc);
            full(&mut m, FieldId::NwDst);
            if ct_valid {
                full(&mut m, FieldId::CtNwSrc);
                full(&mut m, FieldId::CtNwDst);
            }
        }
        ETH_TYPE_IPV6 => {
            full(&mut m, FieldId::Ipv6Src);
            full(&mut m, FieldId::Ipv6Dst);
            full(&mut m, FieldId::Ipv6Label);
            let t = m.value(FieldId::TpSrc);
            if proto == ipproto::ICMPV6 && m.value(FieldId::TpDst) == 0 && (t == 135 || t == 136) {
                full(&mut m, FieldId::ArpSha);
                full(&mut m, FieldId::ArpTha);
                full(&mut m, FieldId::NdTarget);
            }
        }
        ETH_TYPE_ARP | ETH_TYPE_RARP => {
            for f in [
                FieldId::NwSrc,
                FieldId::NwDst,
                FieldId::NwProto,
                FieldId::ArpSha,
                FieldId::ArpTha,
            ] {
                full(&mut m, f);
            }
            return m.masked_clean();
        }
        _ => return m.masked_clean(),
    }
    let frag = m.value(FieldId::NwFrag);
    m.set_storage(FieldId::NwFrag, frag, 3);
    for f in [FieldId::NwTos, FieldId::NwTtl, FieldId::NwProto] {
        full(&mut m, f);
    }
    if ct_valid {
        for f in [FieldId::CtNwProto, FieldId::CtTpSrc, FieldId::CtTpDst] {
            full(&mut m, f);
        }
    }
    let later = frag as u8 & FRAG_LATER != 0;
    if !later
        && matches!(
            proto,
            ipproto::ICMP | ipproto::ICMPV6 | ipproto::TCP | ipproto::UDP | ipproto::SCTP | 2
        )
    {
        full(&mut m, FieldId::TpSrc);
        full(&mut m, FieldId::TpDst);
        if proto == ipproto::TCP {
            full(&mut m, FieldId::TcpFlags);
        }
    }
    m.masked_clean()
}

impl Match {
    /// This match with every value bit outside the mask cleared.
    fn masked_clean(mut self) -> Match {
        self.key = self.key.masked(&self.mask);
        self
    }
}

/// Formats `key` as OVS `flow_format` does (the text after `Flow: ` in `ofproto/trace`).
pub fn format_flow_line(key: &FlowKey) -> String {
    format_match_priority(&flow_line_match(key), DEFAULT_PRIORITY)
}
