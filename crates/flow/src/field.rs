//! The storage-field table: where each field of a [`FlowKey`] lives.
//!
//! A [`FieldId`] names one storage field (a contiguous run of bits in one word, or two whole
//! words for 128-bit fields). [`FIELDS`] gives its word, bit offset and width; [`FieldId::get`]
//! and [`FieldId::set`] read and write it as a `u128`, on keys and masks alike.
//!
//! OpenFlow names that are *views* of a storage field (`dl_vlan` = low 12 bits of the first
//! tag's `tci`, `nw_ecn` = low 2 bits of `nw_tos`, `icmp_type` = `tp_src`, `arp_op` =
//! `nw_proto`, …) are mapped onto these by the flow-syntax layer, not here.
//!
//! Invariant: no two fields overlap (tested), and every field lies inside one lookup stage.

use crate::key::{FlowKey, FlowMask, Stage, w};

/// One storage field of a [`FlowKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum FieldId {
    InPort,
    RecircId,
    DpHash,
    PktMark,
    Metadata,
    Reg0,
    Reg1,
    Reg2,
    Reg3,
    Reg4,
    Reg5,
    Reg6,
    Reg7,
    Reg8,
    Reg9,
    Reg10,
    Reg11,
    Reg12,
    Reg13,
    Reg14,
    Reg15,
    CtState,
    CtZone,
    CtNwProto,
    CtMark,
    CtTpSrc,
    CtTpDst,
    CtLabel,
    CtNwSrc,
    CtNwDst,
    DlDst,
    DlType,
    DlSrc,
    Vlan0Tpid,
    Vlan0Tci,
    Vlan1Tpid,
    Vlan1Tci,
    NwSrc,
    NwDst,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    NwFrag,
    NwTos,
    NwTtl,
    NwProto,
    ArpSha,
    ArpTha,
    NdTarget,
    TpSrc,
    TpDst,
    TcpFlags,
    // conjunctive matches (issue #17): OpenFlow-only metadata.
    ConjId,
}

/// Where a storage field lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDef {
    /// The field.
    pub id: FieldId,
    /// A short lower-case name for debugging (the OVS name where one exists).
    pub name: &'static str,
    /// First word.
    pub word: usize,
    /// Bit offset of the field's least significant bit inside `word` (0 for 128-bit fields).
    pub shift: u32,
    /// Width in bits (1..=64, or 128 for two whole words).
    pub bits: u32,
}

const fn f(id: FieldId, name: &'static str, word: usize, shift: u32, bits: u32) -> FieldDef {
    FieldDef {
        id,
        name,
        word,
        shift,
        bits,
    }
}

/// Every storage field, in [`FieldId`] order.
pub const FIELDS: [FieldDef; 53] = {
    use FieldId::*;
    [
        f(InPort, "in_port", w::IN_PORT_RECIRC, 32, 32),
        f(RecircId, "recirc_id", w::IN_PORT_RECIRC, 0, 32),
        f(DpHash, "dp_hash", w::DP_HASH_PKT_MARK, 32, 32),
        f(PktMark, "pkt_mark", w::DP_HASH_PKT_MARK, 0, 32),
        f(Metadata, "metadata", w::METADATA, 0, 64),
        f(Reg0, "reg0", w::REGS, 32, 32),
        f(Reg1, "reg1", w::REGS, 0, 32),
        f(Reg2, "reg2", w::REGS + 1, 32, 32),
        f(Reg3, "reg3", w::REGS + 1, 0, 32),
        f(Reg4, "reg4", w::REGS + 2, 32, 32),
        f(Reg5, "reg5", w::REGS + 2, 0, 32),
        f(Reg6, "reg6", w::REGS + 3, 32, 32),
        f(Reg7, "reg7", w::REGS + 3, 0, 32),
        f(Reg8, "reg8", w::REGS + 4, 32, 32),
        f(Reg9, "reg9", w::REGS + 4, 0, 32),
        f(Reg10, "reg10", w::REGS + 5, 32, 32),
        f(Reg11, "reg11", w::REGS + 5, 0, 32),
        f(Reg12, "reg12", w::REGS + 6, 32, 32),
        f(Reg13, "reg13", w::REGS + 6, 0, 32),
        f(Reg14, "reg14", w::REGS + 7, 32, 32),
        f(Reg15, "reg15", w::REGS + 7, 0, 32),
        f(CtState, "ct_state", w::CT_STATE_ZONE, 32, 32),
        f(CtZone, "ct_zone", w::CT_STATE_ZONE, 16, 16),
        f(CtNwProto, "ct_nw_proto", w::CT_STATE_ZONE, 8, 8),
        f(CtMark, "ct_mark", w::CT_MARK_TP, 32, 32),
        f(CtTpSrc, "ct_tp_src", w::CT_MARK_TP, 16, 16),
        f(CtTpDst, "ct_tp_dst", w::CT_MARK_TP, 0, 16),
        f(CtLabel, "ct_label", w::CT_LABEL, 0, 128),
        f(CtNwSrc, "ct_nw_src", w::CT_NW, 32, 32),
        f(CtNwDst, "ct_nw_dst", w::CT_NW, 0, 32),
        f(DlDst, "dl_dst", w::DL_DST_TYPE, 16, 48),
        f(DlType, "dl_type", w::DL_DST_TYPE, 0, 16),
        f(DlSrc, "dl_src", w::DL_SRC, 16, 48),
        f(Vlan0Tpid, "vlan0_tpid", w::VLANS, 48, 16),
        f(Vlan0Tci, "vlan_tci", w::VLANS, 32, 16),
        f(Vlan1Tpid, "vlan1_tpid", w::VLANS, 16, 16),
        f(Vlan1Tci, "vlan1_tci", w::VLANS, 0, 16),
        f(NwSrc, "nw_src", w::NW_ADDRS, 32, 32),
        f(NwDst, "nw_dst", w::NW_ADDRS, 0, 32),
        f(Ipv6Src, "ipv6_src", w::IPV6_SRC, 0, 128),
        f(Ipv6Dst, "ipv6_dst", w::IPV6_DST, 0, 128),
        f(Ipv6Label, "ipv6_label", w::IP_MISC, 32, 32),
        f(NwFrag, "nw_frag", w::IP_MISC, 24, 8),
        f(NwTos, "nw_tos", w::IP_MISC, 16, 8),
        f(NwTtl, "nw_ttl", w::IP_MISC, 8, 8),
        f(NwProto, "nw_proto", w::IP_MISC, 0, 8),
        f(ArpSha, "arp_sha", w::ARP_SHA, 16, 48),
        f(ArpTha, "arp_tha", w::ARP_THA, 16, 48),
        f(NdTarget, "nd_target", w::ND_TARGET, 0, 128),
        f(TpSrc, "tp_src", w::TP, 48, 16),
        f(TpDst, "tp_dst", w::TP, 32, 16),
        f(TcpFlags, "tcp_flags", w::TP, 16, 16),
        f(ConjId, "conj_id", w::CONJ_ID, 32, 32),
    ]
};

/// `nw_frag` bit: the packet is a fragment.
pub const FRAG_ANY: u8 = 1;
/// `nw_frag` bit: the fragment is not the first (offset ≠ 0).
pub const FRAG_LATER: u8 = 2;

/// VLAN `tci` bit meaning "a tag is present" (OVS `VLAN_CFI`).
pub const VLAN_CFI: u16 = 0x1000;

/// `ct_state` bits, as OVS defines them.
pub mod ct_state {
    #![allow(missing_docs)]
    pub const NEW: u32 = 0x01;
    pub const ESTABLISHED: u32 = 0x02;
    pub const RELATED: u32 = 0x04;
    pub const REPLY_DIR: u32 = 0x08;
    pub const INVALID: u32 = 0x10;
    pub const TRACKED: u32 = 0x20;
    pub const SRC_NAT: u32 = 0x40;
    pub const DST_NAT: u32 = 0x80;
}

impl FieldId {
    /// Every field, in table order.
    pub fn all() -> impl Iterator<Item = FieldId> {
        FIELDS.iter().map(|d| d.id)
    }

    /// The field's table entry.
    #[inline]
    pub fn def(self) -> &'static FieldDef {
        &FIELDS[self as usize]
    }

    /// Width in bits.
    #[inline]
    pub fn bits(self) -> u32 {
        self.def().bits
    }

    /// The all-ones value of this field's width.
    #[inline]
    pub fn max(self) -> u128 {
        let b = self.bits();
        if b == 128 {
            u128::MAX
        } else {
            (1u128 << b) - 1
        }
    }

    /// The lookup stage the field belongs to.
    pub fn stage(self) -> Stage {
        let word = self.def().word;
        Stage::ALL
            .into_iter()
            .find(|s| s.words().contains(&word))
            .unwrap_or(Stage::L4)
    }

    /// Register `n` (0..16), if any.
    pub fn reg(n: usize) -> Option<FieldId> {
        if n < 16 {
            Some(FIELDS[FieldId::Reg0 as usize + n].id)
        } else {
            None
        }
    }

    /// Reads the field from a word array.
    #[inline]
    pub fn get_words(self, words: &[u64]) -> u128 {
        let d = self.def();
        if d.bits == 128 {
            (u128::from(words[d.word]) << 64) | u128::from(words[d.word + 1])
        } else {
            u128::from((words[d.word] >> d.shift) & low_bits(d.bits))
        }
    }

    /// Writes the field into a word array (bits above the width are ignored).
    #[inline]
    pub fn set_words(self, words: &mut [u64], value: u128) {
        let d = self.def();
        if d.bits == 128 {
            words[d.word] = (value >> 64) as u64;
            words[d.word + 1] = value as u64;
        } else {
            let m = low_bits(d.bits) << d.shift;
            words[d.word] = (words[d.word] & !m) | (((value as u64) << d.shift) & m);
        }
    }

    /// Reads the field of a key.
    #[inline]
    pub fn get(self, key: &FlowKey) -> u128 {
        self.get_words(&key.w)
    }

    /// Writes the field of a key.
    #[inline]
    pub fn set(self, key: &mut FlowKey, value: u128) {
        self.set_words(&mut key.w, value)
    }

    /// Reads the field's mask.
    #[inline]
    pub fn get_mask(self, mask: &FlowMask) -> u128 {
        self.get_words(&mask.w)
    }

    /// Writes the field's mask.
    #[inline]
    pub fn set_mask(self, mask: &mut FlowMask, value: u128) {
        self.set_words(&mut mask.w, value)
    }

    /// Marks every bit of the field significant (un-wildcards it).
    #[inline]
    pub fn unwildcard(self, mask: &mut FlowMask) {
        self.set_words(&mut mask.w, u128::MAX)
    }

    /// The mask with exactly this field's bits set.
    pub fn full_mask(self) -> FlowMask {
        let mut m = FlowMask::CATCHALL;
        self.unwildcard(&mut m);
        m
    }
}

#[inline]
fn low_bits(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl core::fmt::Display for FieldId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.def().name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::FLOW_WORDS;

    #[test]
    fn table_is_in_enum_order() {
        for (i, d) in FIELDS.iter().enumerate() {
            assert_eq!(d.id as usize, i, "{} out of order", d.name);
        }
    }

    #[test]
    fn fields_do_not_overlap_and_fit() {
        let mut used = [0u64; FLOW_WORDS];
        for id in FieldId::all() {
            let m = id.full_mask();
            for (u, mw) in used.iter_mut().zip(m.w) {
                assert_eq!(*u & mw, 0, "{id} overlaps");
                *u |= mw;
            }
            assert_eq!(m.count_ones(), id.bits(), "{id} width");
            let stage = id.stage();
            for i in m.map().iter() {
                assert!(stage.words().contains(&i), "{id} crosses a stage");
            }
        }
    }

    #[test]
    fn set_get_round_trip_leaves_neighbours() {
        for id in FieldId::all() {
            let mut k = FlowKey::ZERO;
            for other in FieldId::all() {
                other.set(
                    &mut k,
                    0x5a5a_5a5a_5a5a_5a5a_5a5a_5a5a_5a5a_5a5a & other.max(),
                );
            }
            let before = k;
            let v = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128 & id.max();
            id.set(&mut k, v);
            assert_eq!(id.get(&k), v);
            for other in FieldId::all().filter(|o| *o != id) {
                assert_eq!(other.get(&k), other.get(&before), "{id} clobbered {other}");
            }
        }
    }
}
