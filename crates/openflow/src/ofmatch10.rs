//! OpenFlow 1.0's fixed 40-byte `ofp_match`, both ways.
//!
//! Layout: `wildcards:32, in_port:16, dl_src:48, dl_dst:48, dl_vlan:16, dl_vlan_pcp:8, pad:8,
//! dl_type:16, nw_tos:8, nw_proto:8, pad:16, nw_src:32, nw_dst:32, tp_src:16, tp_dst:16`.
//! The wildcard word has one bit per field, except `nw_src`/`nw_dst`, which carry the number
//! of wildcarded low bits (6 bits each, ≥ 32 = all).
//!
//! Decoding follows the OpenFlow 1.0 meaning as OVS reads it: `dl_vlan = 0xffff` matches
//! untagged packets (TCI 0, exact), a VLAN id or PCP sets the CFI bit, `nw_tos` is the DSCP
//! (low two bits ignored), wildcarded fields are zero. No prerequisite normalisation happens
//! here ([`Match::normalize`] does that; a switch applies it to OpenFlow 1.0 flow mods).
//! Encoding writes what the 1.0 match can express: exact fields, CIDR prefixes for
//! addresses, the VLAN as id/PCP. [`fits`] says whether a match survives unchanged.

use crate::codec::{Rd, Wr};
use crate::error::Result;
use flow::field::{FieldId, VLAN_CFI};
use flow::ofp::Match;

/// Size of the structure.
pub const OFP10_MATCH_LEN: usize = 40;

/// Wildcard bits.
#[allow(missing_docs)]
pub mod wc {
    pub const IN_PORT: u32 = 1 << 0;
    pub const DL_VLAN: u32 = 1 << 1;
    pub const DL_SRC: u32 = 1 << 2;
    pub const DL_DST: u32 = 1 << 3;
    pub const DL_TYPE: u32 = 1 << 4;
    pub const NW_PROTO: u32 = 1 << 5;
    pub const TP_SRC: u32 = 1 << 6;
    pub const TP_DST: u32 = 1 << 7;
    pub const NW_SRC_SHIFT: u32 = 8;
    pub const NW_DST_SHIFT: u32 = 14;
    pub const DL_VLAN_PCP: u32 = 1 << 20;
    pub const NW_TOS: u32 = 1 << 21;
}

/// `dl_vlan` value meaning "no VLAN tag".
pub const OFP10_VLAN_NONE: u16 = 0xffff;

fn prefix(wild_bits: u32) -> u128 {
    if wild_bits >= 32 {
        0
    } else {
        u128::from(u32::MAX << wild_bits)
    }
}

/// Reads a 40-byte `ofp_match`.
pub(crate) fn decode(r: &mut Rd<'_>) -> Result<Match> {
    let mut r = r.sub(OFP10_MATCH_LEN, "ofp10_match")?;
    let w = r.u32()?;
    let in_port = r.u16()?;
    let dl_src = r.mac()?;
    let dl_dst = r.mac()?;
    let dl_vlan = r.u16()?;
    let dl_vlan_pcp = r.u8()?;
    r.skip(1)?;
    let dl_type = r.u16()?;
    let nw_tos = r.u8()?;
    let nw_proto = r.u8()?;
    r.skip(2)?;
    let nw_src = r.u32()?;
    let nw_dst = r.u32()?;
    let tp_src = r.u16()?;
    let tp_dst = r.u16()?;

    let mut m = Match::catchall();
    if w & wc::IN_PORT == 0 {
        m.set_storage(FieldId::InPort, u128::from(in_port), 0xffff_ffff);
    }
    if w & wc::DL_SRC == 0 {
        m.set_storage(FieldId::DlSrc, u128::from(dl_src), FieldId::DlSrc.max());
    }
    if w & wc::DL_DST == 0 {
        m.set_storage(FieldId::DlDst, u128::from(dl_dst), FieldId::DlDst.max());
    }
    if w & wc::DL_TYPE == 0 {
        m.set_storage(FieldId::DlType, u128::from(dl_type), 0xffff);
    }
    if w & wc::NW_PROTO == 0 {
        m.set_storage(FieldId::NwProto, u128::from(nw_proto), 0xff);
    }
    if w & wc::TP_SRC == 0 {
        m.set_storage(FieldId::TpSrc, u128::from(tp_src), 0xffff);
    }
    if w & wc::TP_DST == 0 {
        m.set_storage(FieldId::TpDst, u128::from(tp_dst), 0xffff);
    }
    let src_m = prefix((w >> wc::NW_SRC_SHIFT) & 0x3f);
    m.set_storage(FieldId::NwSrc, u128::from(nw_src), src_m);
    let dst_m = prefix((w >> wc::NW_DST_SHIFT) & 0x3f);
    m.set_storage(FieldId::NwDst, u128::from(nw_dst), dst_m);
    if w & wc::NW_TOS == 0 {
        m.set_storage(FieldId::NwTos, u128::from(nw_tos & 0xfc), 0xfc);
    }
    let vlan_wild = w & wc::DL_VLAN != 0;
    let pcp_wild = w & wc::DL_VLAN_PCP != 0;
    if !vlan_wild && dl_vlan == OFP10_VLAN_NONE {
        m.set_storage(FieldId::Vlan0Tci, 0, 0xffff);
    } else {
        let mut mask = 0u16;
        if !pcp_wild {
            mask |= 0xe000 | VLAN_CFI;
        }
        if !vlan_wild {
            mask |= 0x0fff | VLAN_CFI;
        }
        let tci = (dl_vlan & 0x0fff) | ((u16::from(dl_vlan_pcp) << 13) & 0xe000) | VLAN_CFI;
        m.set_storage(FieldId::Vlan0Tci, u128::from(tci), u128::from(mask));
    }
    Ok(m)
}

/// Number of wildcarded low bits for an address mask (leading ones count, as OVS does).
fn wild_bits(mask: u128) -> u32 {
    32 - (mask as u32).leading_ones()
}

/// Writes `m` as a 40-byte `ofp_match` (fields 1.0 cannot carry are dropped).
pub(crate) fn encode(w: &mut Wr, m: &Match) {
    let k = |f: FieldId| m.mask_of(f);
    let v = |f: FieldId| m.value(f);
    let mut wcard = 0u32;
    for (f, bit) in [
        (FieldId::InPort, wc::IN_PORT),
        (FieldId::DlType, wc::DL_TYPE),
        (FieldId::NwProto, wc::NW_PROTO),
        (FieldId::TpSrc, wc::TP_SRC),
        (FieldId::TpDst, wc::TP_DST),
        (FieldId::DlSrc, wc::DL_SRC),
        (FieldId::DlDst, wc::DL_DST),
    ] {
        if k(f) == 0 {
            wcard |= bit;
        }
    }
    let src_m = k(FieldId::NwSrc);
    let dst_m = k(FieldId::NwDst);
    wcard |= wild_bits(src_m) << wc::NW_SRC_SHIFT;
    wcard |= wild_bits(dst_m) << wc::NW_DST_SHIFT;
    if k(FieldId::NwTos) & 0xfc == 0 {
        wcard |= wc::NW_TOS;
    }
    let tci = v(FieldId::Vlan0Tci) as u16;
    let tci_m = k(FieldId::Vlan0Tci) as u16;
    let (mut dl_vlan, mut dl_vlan_pcp) = (0u16, 0u8);
    if tci_m == 0 {
        wcard |= wc::DL_VLAN | wc::DL_VLAN_PCP;
    } else if tci_m & VLAN_CFI != 0 && tci & VLAN_CFI == 0 {
        dl_vlan = OFP10_VLAN_NONE;
    } else {
        if tci_m & 0x0fff == 0 {
            wcard |= wc::DL_VLAN;
        } else {
            dl_vlan = tci & 0x0fff;
        }
        if tci_m & 0xe000 == 0 {
            wcard |= wc::DL_VLAN_PCP;
        } else {
            dl_vlan_pcp = (tci >> 13) as u8;
        }
    }
    let pre = |mask: u128| prefix(wild_bits(mask));
    w.u32(wcard);
    w.u16(v(FieldId::InPort) as u16);
    w.mac(v(FieldId::DlSrc) as u64);
    w.mac(v(FieldId::DlDst) as u64);
    w.u16(dl_vlan);
    w.u8(dl_vlan_pcp);
    w.u8(0);
    w.u16(v(FieldId::DlType) as u16);
    w.u8(v(FieldId::NwTos) as u8 & 0xfc);
    w.u8(v(FieldId::NwProto) as u8);
    w.u16(0);
    w.u32((v(FieldId::NwSrc) & pre(src_m)) as u32);
    w.u32((v(FieldId::NwDst) & pre(dst_m)) as u32);
    w.u16(v(FieldId::TpSrc) as u16);
    w.u16(v(FieldId::TpDst) as u16);
}

/// Whether `m` round-trips through the 1.0 match unchanged.
pub fn fits(m: &Match) -> bool {
    let mut w = Wr::new();
    encode(&mut w, m);
    decode(&mut Rd::new(&w.buf, "ofp10_match")).is_ok_and(|d| d == *m)
}

/// The wildcard word the encoder writes for `m` (0 = an exact match, which OpenFlow 1.0
/// gives the highest priority).
pub fn wildcards(m: &Match) -> u32 {
    let mut w = Wr::new();
    encode(&mut w, m);
    u32::from_be_bytes([w.buf[0], w.buf[1], w.buf[2], w.buf[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catchall_and_fields() {
        // What ovs-ofctl sends for a catch-all: every bit wildcarded, 32-bit address wildcards.
        assert_eq!(wildcards(&Match::catchall()), 0x0038_20ff);
        for text in [
            "ip,nw_src=10.0.0.0/8,nw_tos=8",
            "tcp,in_port=3,dl_vlan=5,dl_vlan_pcp=2,tp_dst=80",
            "vlan_tci=0,arp",
            "dl_src=00:11:22:33:44:55,dl_dst=ff:ff:ff:ff:ff:ff",
        ] {
            let m = flow::text::parse_match(text).unwrap();
            assert!(fits(&m), "{text}");
        }
        let m = flow::text::parse_match("reg0=1").unwrap();
        assert!(!fits(&m));
    }
}
