//! `FlowKey` and `FlowMask`: every header field OVS matches on, laid out in 64-bit words.
//!
//! # Why words
//!
//! The classifier and the caches compare and hash keys under masks millions of times per
//! second. Holding the key as a fixed array of `u64` words (OVS `struct flow` seen through
//! `miniflow`) turns "compare under mask" and "hash under mask" into short loops over words,
//! and lets a sparse map (one bit per word that is non-zero, see [`WordMap`]) skip the words a
//! packet or a mask never touches.
//!
//! # Layout
//!
//! Fields never straddle a word, except the 128-bit ones, which take two whole words (high
//! half first). Words are grouped by lookup stage (metadata, L2, L3, L4; see [`Stage`]) so that
//! a staged classifier can stop after a stage and un-wildcard only the words of the stages it
//! consulted. Within a word, fields sit at fixed bit offsets given by the field table
//! ([`crate::field::FIELDS`]); values are host integers (a MAC is the 48-bit big-endian number,
//! an IPv4 address the `u32` of its dotted form), so printing and parsing need no byte swaps.
//!
//! Layout (word: contents, high bits first):
//!
//! | word | contents |
//! |---|---|
//! | 0 | in_port:32, recirc_id:32 |
//! | 1 | dp_hash:32, pkt_mark:32 |
//! | 2 | metadata:64 |
//! | 3–10 | reg0..reg15, two per word (even register in the high half) |
//! | 11 | ct_state:32, ct_zone:16, ct_nw_proto:8, pad:8 |
//! | 12 | ct_mark:32, ct_tp_src:16, ct_tp_dst:16 |
//! | 13–14 | ct_label:128 |
//! | 15 | ct_nw_src:32, ct_nw_dst:32 |
//! | 16 | dl_dst:48, dl_type:16 |
//! | 17 | dl_src:48, pad:16 |
//! | 18 | vlan0 tpid:16, vlan0 tci:16, vlan1 tpid:16, vlan1 tci:16 |
//! | 19 | nw_src:32, nw_dst:32 (ARP: spa, tpa) |
//! | 20–21 | ipv6_src:128 |
//! | 22–23 | ipv6_dst:128 |
//! | 24 | ipv6_label:32, nw_frag:8, nw_tos:8, nw_ttl:8, nw_proto:8 (ARP: opcode) |
//! | 25 | arp_sha / nd_sll:48, pad:16 |
//! | 26 | arp_tha / nd_tll:48, pad:16 |
//! | 27–28 | nd_target:128 |
//! | 29 | tp_src:16, tp_dst:16, tcp_flags:16, pad:16 (ICMP: type in tp_src, code in tp_dst) |
//! | 30 | conj_id:32 (OpenFlow-only metadata, never in a packet or a megaflow), spare:32 |
//! | 31 | spare (always zero) |
//!
//! As in OVS, ARP reuses the IPv4 address words and `nw_proto` (opcode, low 8 bits), and ICMP
//! reuses the transport ports. A VLAN `tci` holds the CFI bit (0x1000) as "tag present", as
//! OVS's `vlan_tci` does.
//!
//! # Invariants
//!
//! - `conj_id` is zero in every key produced by `extract`; an OpenFlow table sets it only in
//!   its conjunctive re-lookup and clears it from the megaflow mask (OVS never shows it).
//! - Spare and pad bits are zero in every key produced by `extract` and every mask built from
//!   the field table; `FlowKey::masked` keeps that.
//! - `WordMap` bit `i` is set iff word `i` may be non-zero; a map with extra bits is still
//!   correct (it only costs time), a map missing the bit of a non-zero word is a bug.

/// Number of 64-bit words in a key or mask.
pub const FLOW_WORDS: usize = 32;

/// First word of each lookup stage; stage `s` covers `STAGE_START[s]..STAGE_START[s + 1]`.
pub const STAGE_START: [usize; 5] = [0, 16, 19, 29, 31];

/// Lookup stages, in the order a staged classifier consults them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// Port, recirculation, registers, connection-tracking state.
    Metadata = 0,
    /// Ethernet addresses, type, VLAN tags.
    L2 = 1,
    /// IPv4/IPv6/ARP/ND fields.
    L3 = 2,
    /// Transport ports, TCP flags, ICMP type/code; and `conj_id` (word 30), which no packet
    /// carries: only the conjunctive re-lookup sets it (see `ofproto::table`).
    L4 = 3,
}

impl Stage {
    /// All stages in lookup order.
    pub const ALL: [Stage; 4] = [Stage::Metadata, Stage::L2, Stage::L3, Stage::L4];

    /// The words of this stage.
    pub fn words(self) -> core::ops::Range<usize> {
        STAGE_START[self as usize]..STAGE_START[self as usize + 1]
    }

    /// Map of the words of this stage.
    pub fn map(self) -> WordMap {
        WordMap::range(self.words())
    }
}

/// Word indices of the storage fields (see the module table).
pub mod w {
    #![allow(missing_docs)]
    pub const IN_PORT_RECIRC: usize = 0;
    pub const DP_HASH_PKT_MARK: usize = 1;
    pub const METADATA: usize = 2;
    pub const REGS: usize = 3;
    pub const CT_STATE_ZONE: usize = 11;
    pub const CT_MARK_TP: usize = 12;
    pub const CT_LABEL: usize = 13;
    pub const CT_NW: usize = 15;
    pub const DL_DST_TYPE: usize = 16;
    pub const DL_SRC: usize = 17;
    pub const VLANS: usize = 18;
    pub const NW_ADDRS: usize = 19;
    pub const IPV6_SRC: usize = 20;
    pub const IPV6_DST: usize = 22;
    pub const IP_MISC: usize = 24;
    pub const ARP_SHA: usize = 25;
    pub const ARP_THA: usize = 26;
    pub const ND_TARGET: usize = 27;
    pub const TP: usize = 29;
    pub const CONJ_ID: usize = 30;
}

/// A set of word indices (bit `i` = word `i`), OVS's miniflow map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WordMap(pub u64);

impl WordMap {
    /// No words.
    pub const EMPTY: WordMap = WordMap(0);
    /// Every word of a key.
    pub const ALL: WordMap = WordMap(if FLOW_WORDS == 64 {
        u64::MAX
    } else {
        (1u64 << FLOW_WORDS) - 1
    });

    /// The words in `r`.
    pub fn range(r: core::ops::Range<usize>) -> WordMap {
        let mut m = 0u64;
        for i in r {
            m |= 1 << i;
        }
        WordMap(m)
    }

    /// Whether word `i` is in the set.
    #[inline]
    pub fn contains(self, i: usize) -> bool {
        self.0 >> i & 1 == 1
    }

    /// Adds word `i`.
    #[inline]
    pub fn insert(&mut self, i: usize) {
        self.0 |= 1 << i;
    }

    /// Number of words in the set.
    #[inline]
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Iterates the word indices in increasing order.
    #[inline]
    pub fn iter(self) -> WordMapIter {
        WordMapIter(self.0)
    }
}

/// Iterator over the indices of a [`WordMap`].
#[derive(Debug, Clone)]
pub struct WordMapIter(u64);

impl Iterator for WordMapIter {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(i)
    }
}

/// A packet's header fields and metadata, as OVS `struct flow`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct FlowKey {
    /// The words; see the module docs for the layout.
    pub w: [u64; FLOW_WORDS],
}

/// Which bits of a [`FlowKey`] a match or megaflow looks at (1 = significant).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct FlowMask {
    /// The words; same layout as [`FlowKey`].
    pub w: [u64; FLOW_WORDS],
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey { w: [0; FLOW_WORDS] }
    }
}

impl Default for FlowMask {
    fn default() -> Self {
        FlowMask { w: [0; FLOW_WORDS] }
    }
}

impl FlowKey {
    /// The all-zero key.
    pub const ZERO: FlowKey = FlowKey { w: [0; FLOW_WORDS] };

    /// The map of non-zero words.
    pub fn map(&self) -> WordMap {
        nonzero_map(&self.w)
    }

    /// This key with every bit outside `mask` cleared.
    #[inline]
    pub fn masked(&self, mask: &FlowMask) -> FlowKey {
        let mut out = FlowKey::ZERO;
        for i in 0..FLOW_WORDS {
            out.w[i] = self.w[i] & mask.w[i];
        }
        out
    }

    /// Whether `self` and `other` agree on every bit of `mask`.
    #[inline]
    pub fn eq_masked(&self, other: &FlowKey, mask: &FlowMask) -> bool {
        let mut diff = 0u64;
        for i in 0..FLOW_WORDS {
            diff |= (self.w[i] ^ other.w[i]) & mask.w[i];
        }
        diff == 0
    }

    /// Whether `self` and `other` agree on every bit of `mask`, looking only at the words in
    /// `map` (which must cover every non-zero word of `mask`).
    #[inline]
    pub fn eq_masked_in(&self, other: &FlowKey, mask: &FlowMask, map: WordMap) -> bool {
        map.iter()
            .all(|i| (self.w[i] ^ other.w[i]) & mask.w[i] == 0)
    }
}

impl FlowMask {
    /// The mask that looks at nothing (matches every packet).
    pub const CATCHALL: FlowMask = FlowMask { w: [0; FLOW_WORDS] };

    /// The map of words with at least one significant bit.
    pub fn map(&self) -> WordMap {
        nonzero_map(&self.w)
    }

    /// Adds every bit of `other` (un-wildcarding).
    #[inline]
    pub fn union_with(&mut self, other: &FlowMask) {
        for i in 0..FLOW_WORDS {
            self.w[i] |= other.w[i];
        }
    }

    /// Whether every significant bit of `self` is significant in `other`.
    pub fn is_subset_of(&self, other: &FlowMask) -> bool {
        self.w.iter().zip(other.w.iter()).all(|(a, b)| a & !b == 0)
    }

    /// Number of significant bits.
    pub fn count_ones(&self) -> u32 {
        self.w.iter().map(|x| x.count_ones()).sum()
    }
}

/// The map of the non-zero words of `w`.
fn nonzero_map(w: &[u64; FLOW_WORDS]) -> WordMap {
    let mut m = 0u64;
    for (i, &x) in w.iter().enumerate() {
        m |= ((x != 0) as u64) << i;
    }
    WordMap(m)
}

/// Debug form: the type name and the non-zero words only.
fn fmt_words(
    f: &mut core::fmt::Formatter<'_>,
    name: &str,
    w: &[u64; FLOW_WORDS],
) -> core::fmt::Result {
    f.write_str(name)?;
    f.write_str("{")?;
    for i in nonzero_map(w).iter() {
        write!(f, " w{}={:#x}", i, w[i])?;
    }
    f.write_str(" }")
}

impl core::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        fmt_words(f, "FlowKey", &self.w)
    }
}

impl core::fmt::Debug for FlowMask {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        fmt_words(f, "FlowMask", &self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_tile_the_used_words() {
        let mut all = WordMap::EMPTY;
        for s in Stage::ALL {
            assert_eq!(all.0 & s.map().0, 0, "stages overlap");
            all.0 |= s.map().0;
        }
        assert_eq!(all, WordMap::range(0..w::CONJ_ID + 1));
    }

    #[test]
    fn map_iter_matches_contains() {
        let m = WordMap(0b1011_0000_0001);
        let v: Vec<usize> = m.iter().collect();
        assert_eq!(v, vec![0, 8, 9, 11]);
        assert_eq!(m.len(), 4);
        assert!(m.contains(8) && !m.contains(7));
    }

    #[test]
    fn masked_compare_agrees_with_masking() {
        let mut a = FlowKey::ZERO;
        let mut b = FlowKey::ZERO;
        let mut m = FlowMask::CATCHALL;
        a.w[19] = 0x0a00_0001_0a00_0002;
        b.w[19] = 0x0a00_00ff_0a00_0002;
        m.w[19] = 0xffff_ff00_ffff_ffff;
        assert!(a.eq_masked(&b, &m));
        assert_eq!(a.masked(&m), b.masked(&m));
        m.w[19] = u64::MAX;
        assert!(!a.eq_masked(&b, &m));
        assert!(!a.eq_masked_in(&b, &m, m.map()));
    }
}
