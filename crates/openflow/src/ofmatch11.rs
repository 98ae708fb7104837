//! OpenFlow 1.1's 88-byte standard match (`ofp11_match`, `type = OFPMT_STANDARD`), both ways.
//!
//! Layout: `type:16, length:16 (= 88), in_port:32, wildcards:32, dl_src:48, dl_src_mask:48,
//! dl_dst:48, dl_dst_mask:48, dl_vlan:16, dl_vlan_pcp:8, pad:8, dl_type:16, nw_tos:8,
//! nw_proto:8, nw_src:32, nw_src_mask:32, nw_dst:32, nw_dst_mask:32, tp_src:16, tp_dst:16,
//! mpls_label:32, mpls_tc:8, pad:24, metadata:64, metadata_mask:64`. Unlike every later
//! match, a mask bit of 1 means *wildcarded*. `dl_vlan = 0xffff` matches untagged packets,
//! `0xfffe` any tagged packet. MPLS is not in the model: an MPLS match decodes to
//! [`crate::Error::Unsupported`].
//!
//! Decoding follows OVS: addresses and `nw_proto` only count for IPv4/ARP/RARP, transport ports only for IPv4
//! TCP/UDP/SCTP/ICMP, as the 1.1 specification's prerequisites say.

use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid, unsupported};
use flow::field::{FieldId, VLAN_CFI};
use flow::ofp::matching::{ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_RARP, ipproto};
use flow::ofp::{Match, OfPort};

/// Size of the structure.
pub const OFP11_MATCH_LEN: usize = 88;

/// Wildcard bits.
#[allow(missing_docs)]
pub mod wc {
    pub const IN_PORT: u32 = 1 << 0;
    pub const DL_VLAN: u32 = 1 << 1;
    pub const DL_VLAN_PCP: u32 = 1 << 2;
    pub const DL_TYPE: u32 = 1 << 3;
    pub const NW_TOS: u32 = 1 << 4;
    pub const NW_PROTO: u32 = 1 << 5;
    pub const TP_SRC: u32 = 1 << 6;
    pub const TP_DST: u32 = 1 << 7;
    pub const MPLS_LABEL: u32 = 1 << 8;
    pub const MPLS_TC: u32 = 1 << 9;
}

const VID_NONE: u16 = 0xffff;
const VID_ANY: u16 = 0xfffe;
const MAC_ALL: u64 = 0xffff_ffff_ffff;

/// Reads an 88-byte standard match.
pub(crate) fn decode(r: &mut Rd<'_>) -> Result<Match> {
    let mut r = r.sub(OFP11_MATCH_LEN, "ofp11_match")?;
    let typ = r.u16()?;
    let len = r.u16()?;
    if typ != 0 || usize::from(len) != OFP11_MATCH_LEN {
        return Err(invalid(format!("ofp11_match type {typ} length {len}")));
    }
    let in_port = r.u32()?;
    let w = r.u32()?;
    let dl_src = r.mac()?;
    let dl_src_m = !r.mac()? & MAC_ALL;
    let dl_dst = r.mac()?;
    let dl_dst_m = !r.mac()? & MAC_ALL;
    let dl_vlan = r.u16()?;
    let dl_vlan_pcp = r.u8()?;
    r.skip(1)?;
    let dl_type = r.u16()?;
    let nw_tos = r.u8()?;
    let nw_proto = r.u8()?;
    let nw_src = r.u32()?;
    let nw_src_m = !r.u32()?;
    let nw_dst = r.u32()?;
    let nw_dst_m = !r.u32()?;
    let tp_src = r.u16()?;
    let tp_dst = r.u16()?;
    r.skip(8)?;
    let metadata = r.u64()?;
    let metadata_m = !r.u64()?;
    if w & (wc::MPLS_LABEL | wc::MPLS_TC) != wc::MPLS_LABEL | wc::MPLS_TC {
        return Err(unsupported("MPLS match"));
    }
    let mut m = Match::catchall();
    if w & wc::IN_PORT == 0 {
        let p =
            OfPort::from_ofp11(in_port).ok_or_else(|| invalid(format!("in_port 0x{in_port:x}")))?;
        m.set_storage(FieldId::InPort, u128::from(p.0), 0xffff_ffff);
    }
    m.set_storage(FieldId::DlSrc, u128::from(dl_src), u128::from(dl_src_m));
    m.set_storage(FieldId::DlDst, u128::from(dl_dst), u128::from(dl_dst_m));
    if w & wc::DL_VLAN == 0 {
        if dl_vlan == VID_NONE {
            m.set_storage(FieldId::Vlan0Tci, 0, 0xffff);
        } else {
            let (mut tci, mut mask) = if dl_vlan == VID_ANY {
                (VLAN_CFI, VLAN_CFI)
            } else if dl_vlan < 4096 {
                (VLAN_CFI | dl_vlan, VLAN_CFI | 0x0fff)
            } else {
                return Err(invalid(format!("dl_vlan {dl_vlan}")));
            };
            if w & wc::DL_VLAN_PCP == 0 {
                if dl_vlan_pcp > 7 {
                    return Err(invalid(format!("dl_vlan_pcp {dl_vlan_pcp}")));
                }
                tci |= u16::from(dl_vlan_pcp) << 13;
                mask |= 0xe000;
            }
            m.set_storage(FieldId::Vlan0Tci, u128::from(tci), u128::from(mask));
        }
    }
    if w & wc::DL_TYPE == 0 {
        m.set_storage(FieldId::DlType, u128::from(dl_type), 0xffff);
    }
    let ipv4 = w & wc::DL_TYPE == 0 && dl_type == ETH_TYPE_IP;
    let arp = w & wc::DL_TYPE == 0 && (dl_type == ETH_TYPE_ARP || dl_type == ETH_TYPE_RARP);
    if ipv4 || arp {
        m.set_storage(FieldId::NwSrc, u128::from(nw_src), u128::from(nw_src_m));
        m.set_storage(FieldId::NwDst, u128::from(nw_dst), u128::from(nw_dst_m));
    }
    if w & wc::NW_TOS == 0 {
        if nw_tos & 0x03 != 0 {
            return Err(invalid(format!("nw_tos 0x{nw_tos:x}")));
        }
        m.set_storage(FieldId::NwTos, u128::from(nw_tos), 0xfc);
    }
    if (ipv4 || arp) && w & wc::NW_PROTO == 0 {
        m.set_storage(FieldId::NwProto, u128::from(nw_proto), 0xff);
    }
    let l4 = ipv4
        && w & wc::NW_PROTO == 0
        && matches!(
            nw_proto,
            ipproto::TCP | ipproto::UDP | ipproto::SCTP | ipproto::ICMP
        );
    if l4 && w & wc::TP_SRC == 0 {
        m.set_storage(FieldId::TpSrc, u128::from(tp_src), 0xffff);
    }
    if l4 && w & wc::TP_DST == 0 {
        m.set_storage(FieldId::TpDst, u128::from(tp_dst), 0xffff);
    }
    m.set_storage(
        FieldId::Metadata,
        u128::from(metadata),
        u128::from(metadata_m),
    );
    Ok(m)
}

/// Writes `m` as an 88-byte standard match (fields 1.1 cannot carry are dropped).
pub(crate) fn encode(w: &mut Wr, m: &Match) {
    let k = |f: FieldId| m.mask_of(f);
    let v = |f: FieldId| m.value(f);
    let mut wcard = wc::MPLS_LABEL | wc::MPLS_TC;
    w.u16(0);
    w.u16(OFP11_MATCH_LEN as u16);
    if k(FieldId::InPort) == 0 {
        wcard |= wc::IN_PORT;
        w.u32(0);
    } else {
        w.u32(OfPort(v(FieldId::InPort) as u16).to_ofp11());
    }
    let at = w.len();
    w.u32(0);
    w.mac(v(FieldId::DlSrc) as u64);
    w.mac(!(k(FieldId::DlSrc) as u64) & MAC_ALL);
    w.mac(v(FieldId::DlDst) as u64);
    w.mac(!(k(FieldId::DlDst) as u64) & MAC_ALL);
    let tci = v(FieldId::Vlan0Tci) as u16;
    let tci_m = k(FieldId::Vlan0Tci) as u16;
    let (mut dl_vlan, mut pcp) = (0u16, 0u8);
    if tci_m == 0 {
        wcard |= wc::DL_VLAN | wc::DL_VLAN_PCP;
    } else if tci_m & VLAN_CFI != 0 && tci & VLAN_CFI == 0 {
        dl_vlan = VID_NONE;
        wcard |= wc::DL_VLAN_PCP;
    } else {
        dl_vlan = if tci_m & 0x0fff == 0 {
            VID_ANY
        } else {
            tci & 0x0fff
        };
        if tci_m & 0xe000 == 0 {
            wcard |= wc::DL_VLAN_PCP;
        } else {
            pcp = (tci >> 13) as u8;
        }
    }
    w.u16(dl_vlan);
    w.u8(pcp);
    w.u8(0);
    if k(FieldId::DlType) == 0 {
        wcard |= wc::DL_TYPE;
    }
    w.u16(v(FieldId::DlType) as u16);
    if k(FieldId::NwTos) & 0xfc == 0 {
        wcard |= wc::NW_TOS;
        w.u8(0);
    } else {
        w.u8(v(FieldId::NwTos) as u8 & 0xfc);
    }
    if k(FieldId::NwProto) == 0 {
        wcard |= wc::NW_PROTO;
    }
    w.u8(v(FieldId::NwProto) as u8);
    w.u32(v(FieldId::NwSrc) as u32);
    w.u32(!(k(FieldId::NwSrc) as u32));
    w.u32(v(FieldId::NwDst) as u32);
    w.u32(!(k(FieldId::NwDst) as u32));
    if k(FieldId::TpSrc) == 0 {
        wcard |= wc::TP_SRC;
    }
    if k(FieldId::TpDst) == 0 {
        wcard |= wc::TP_DST;
    }
    w.u16(v(FieldId::TpSrc) as u16);
    w.u16(v(FieldId::TpDst) as u16);
    w.zeros(8);
    w.u64(v(FieldId::Metadata) as u64);
    w.u64(!(k(FieldId::Metadata) as u64));
    w.buf[at..at + 4].copy_from_slice(&wcard.to_be_bytes());
}
