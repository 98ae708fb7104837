//! A datapath flow (megaflow): masked key, mask, actions handle, liveness and stats.
//!
//! A [`DpFlow`] is immutable once built except for three things: its `dead` flag (set once by
//! the writer that removes it, never cleared), its actions (an action set it owns and that
//! set's id, replaced together by a modify — [`crate::dpcls::Dpcls::put`] — set first, id
//! second, so a reader sees the old or the new actions, each whole) and its [`FlowStats`]
//! (written by the PMD thread that owns the flow, read by anyone). Its [`Ufid`] is, for
//! flows the PMD installs, a 128-bit hash of its masked key and mask ([`Ufid::of`]). Every cache tier holds flows as `Arc<DpFlow>` and
//! treats a dead flow as a miss, so removing a flow only needs the flag to be set before the
//! flow's slots are cleared: a reader that still reaches the flow through a stale snapshot or
//! cache entry sees the flag and does not use it.
//!
//! # Invariants
//!
//! - `key == key.masked(&mask)` (the key is stored masked) and `map == mask.map()`.
//! - `hash == hash_masked(&key, &mask, map, 0)`: the hash the subtable of `mask` files it under.
//! - `dead` goes false → true once.
//! - `words` lists the words of `map` in order, padded with `FLOW_WORDS - 1`, when `map`
//!   has at most [`MATCH_WORDS`] words (`narrow`); comparing a padding word is always true
//!   (a word outside the map has mask and key 0) or repeats a listed word.
//!
//! # Stats protocol
//!
//! OVS keeps per-flow stats under a per-flow mutex; here one PMD thread owns a flow (the
//! classifier is per PMD, as in OVS), so [`FlowStats::record`] is a relaxed load + store of
//! each counter (no `lock` prefix, no read-modify-write), on a 64-byte line of its own so
//! that the owner's writes do not invalidate the line holding the key the lookup compares.
//! Readers (revalidators, `dump-flows`) read relaxed and may see a batch half-applied; the
//! counters are monotone, which is all they need. A second writer would lose updates, never
//! corrupt memory: that is why it is a rule, not a safety condition.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering, Ordering::Relaxed};

use arc_swap::ArcSwapOption;
use flow::hash::hash_masked;

use crate::action_table::ActionSet;
use flow::{FLOW_WORDS, FlowKey, FlowMask, WordMap};

/// Mask words [`DpFlow::matches`] compares with a fixed, branch-free sequence (more words:
/// a loop over the map). Six covers in_port, L2, L3 addresses, L3 proto/tos/ttl and ports.
pub const MATCH_WORDS: usize = 6;

/// A unique flow id (OVS's ufid: 128 bits). The PMD derives it from the megaflow
/// ([`Ufid::of`]); the control path may name its own ([`crate::dpcls::FlowPut::ufid`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ufid(pub u128);

impl Ufid {
    /// The ufid of the megaflow `key` under `mask`: a 128-bit hash of the masked key and the
    /// mask (as OVS derives a ufid from the flow key and mask), so the same megaflow always
    /// gets the same ufid and a duplicate install is recognised by it. Two different
    /// megaflows with the same ufid are possible (2⁻¹²⁸ per pair with a good hash): the
    /// classifier compares key and mask on every ufid match and counts a collision
    /// ([`crate::dpcls::Dpcls::ufid_collisions`]) instead of aliasing.
    ///
    /// The hash: two 64-bit lanes with different seeds over the mask's word map and, for
    /// each word of it, the word's position, mask and masked key, each mixed in with a
    /// multiply-rotate step, the lanes finished with murmur3's `fmix64`. Deterministic across
    /// runs and machines; a few dozen instructions for a typical megaflow.
    pub fn of(key: &FlowKey, mask: &FlowMask) -> Ufid {
        const P1: u64 = 0x9e37_79b9_7f4a_7c15;
        const P2: u64 = 0xc2b2_ae3d_27d4_eb4f;
        // Only the mask's non-zero words carry anything (the masked key is 0 elsewhere); the
        // word map itself is hashed first, so which words they are counts too.
        let map = mask.map();
        let mut a: u64 = 0x243f_6a88_85a3_08d3 ^ map.0;
        let mut b: u64 = 0x1319_8a2e_0370_7344 ^ map.0.wrapping_mul(P1);
        for i in map.iter() {
            let (m, k) = (
                mask.w[i % FLOW_WORDS],
                key.w[i % FLOW_WORDS] & mask.w[i % FLOW_WORDS],
            );
            let x = k ^ (i as u64).wrapping_mul(P2);
            a = (a ^ x.wrapping_mul(P1)).rotate_left(31).wrapping_mul(P2) ^ m;
            b = (b ^ m.wrapping_mul(P2)).rotate_left(29).wrapping_mul(P1) ^ x;
        }
        let (a, b) = (fmix64(a ^ b.rotate_left(17)), fmix64(b ^ a.rotate_left(41)));
        Ufid(u128::from(a) << 64 | u128::from(b))
    }
}

/// `BuildHasher` for every map keyed by [`Ufid`] (the classifier's index, the control path's
/// ukey store and revalidator maps): a ufid already is a 128-bit hash, so one
/// multiply-xor round over its halves, keyed by a per-map random seed, spreads it (SipHash,
/// the default, cost ≈ 170 instructions per hash on the install path). The seed keeps
/// ufids a controller names (`dpctl/add-flow ufid:…`) from being chosen to collide.
#[derive(Debug, Clone, Copy)]
pub struct UfidBuild {
    seed: u64,
}

impl Default for UfidBuild {
    fn default() -> Self {
        use std::hash::BuildHasher;
        UfidBuild {
            seed: std::hash::RandomState::new().hash_one(0x75f1_d5ee_u64) | 1,
        }
    }
}

impl std::hash::BuildHasher for UfidBuild {
    type Hasher = UfidHasher;
    fn build_hasher(&self) -> UfidHasher {
        UfidHasher(self.seed)
    }
}

/// The hasher of [`UfidBuild`].
#[derive(Debug, Clone, Copy)]
pub struct UfidHasher(u64);

impl std::hash::Hasher for UfidHasher {
    fn finish(&self) -> u64 {
        fmix64(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only for keys that hash more than a `u128`: folded 8 bytes at a time.
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(31);
    }

    fn write_u128(&mut self, n: u128) {
        self.write_u64(n as u64);
        self.write_u64((n >> 64) as u64);
    }
}

/// murmur3's 64-bit finaliser.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// Id of a megaflow's action set in the datapath's [`crate::action_table::ActionTable`]
/// (generation-tagged: never handed out twice; see that module).
pub type ActionsId = u64;

/// Per-flow counters, on a cache line of their own (see the module doc for the protocol).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct FlowStats {
    packets: AtomicU64,
    bytes: AtomicU64,
    used: AtomicU64,
    tcp_flags: AtomicU16,
}

/// A point-in-time copy of [`FlowStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowStatsSnapshot {
    /// Packets that hit the flow.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Time of the last hit, in the caller's unit (ms), 0 = never.
    pub used: u64,
    /// OR of the TCP flags seen.
    pub tcp_flags: u16,
}

impl FlowStats {
    /// Adds a batch of `packets` packets of `bytes` bytes seen at `now`. Only the owning PMD
    /// thread calls this (single writer: plain load + store, no atomic read-modify-write).
    #[inline]
    pub fn record(&self, packets: u64, bytes: u64, now: u64, tcp_flags: u16) {
        self.packets
            .store(self.packets.load(Relaxed).wrapping_add(packets), Relaxed);
        self.bytes
            .store(self.bytes.load(Relaxed).wrapping_add(bytes), Relaxed);
        if now > self.used.load(Relaxed) {
            self.used.store(now, Relaxed);
        }
        let f = self.tcp_flags.load(Relaxed);
        if f | tcp_flags != f {
            self.tcp_flags.store(f | tcp_flags, Relaxed);
        }
    }

    /// Reads the counters (each relaxed; see the module doc).
    pub fn snapshot(&self) -> FlowStatsSnapshot {
        FlowStatsSnapshot {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            used: self.used.load(Relaxed),
            tcp_flags: self.tcp_flags.load(Relaxed),
        }
    }
}

/// A datapath flow: what a megaflow classifier hit, an SMC hit or an EMC hit returns.
#[derive(Debug)]
#[repr(C)]
pub struct DpFlow {
    /// The key, already masked.
    pub key: FlowKey,
    /// Significant bits.
    pub mask: FlowMask,
    /// `mask.map()`.
    pub map: WordMap,
    /// `hash_masked(&key, &mask, map, 0)`.
    pub hash: u32,
    /// The flow's id.
    pub ufid: Ufid,
    /// The words of `map` in order, padded with `FLOW_WORDS - 1` (valid if `narrow`).
    words: [u8; MATCH_WORDS],
    /// `map` has at most [`MATCH_WORDS`] words.
    narrow: bool,
    /// Id of the current action set (replaced atomically by a modify).
    actions: AtomicU64,
    dead: AtomicBool,
    /// Index of the flow in the newest arena that holds it (`u32::MAX` = none yet), set by
    /// [`crate::flow_table::FlowArena::push`]; the SMC caches it (a stale value is harmless:
    /// SMC hits are verified).
    arena_index: AtomicU32,
    /// The action set the flow owns (`None` for a flow built from a bare id, in tests and
    /// tools): the PMD's fallback when its view of the action table misses the id.
    set: ArcSwapOption<ActionSet>,
    /// Counters, written by the owning PMD thread.
    pub stats: FlowStats,
}

impl DpFlow {
    /// A live flow matching `key` under `mask` (the key is masked here).
    pub fn new(ufid: Ufid, key: &FlowKey, mask: &FlowMask, actions: ActionsId) -> DpFlow {
        Self::build(ufid, key, mask, actions, None)
    }

    /// [`DpFlow::new`] with the action set it owns. (Built in place: replacing the empty
    /// `ArcSwapOption` afterwards would drop one, and dropping an `ArcSwap` walks every
    /// thread's debt list — 1 % of a learn run's time.)
    fn build(
        ufid: Ufid,
        key: &FlowKey,
        mask: &FlowMask,
        actions: ActionsId,
        set: Option<Arc<ActionSet>>,
    ) -> DpFlow {
        let key = key.masked(mask);
        let map = mask.map();
        let mut words = [(FLOW_WORDS - 1) as u8; MATCH_WORDS];
        for (w, i) in words.iter_mut().zip(map.iter()) {
            *w = i as u8;
        }
        DpFlow {
            words,
            narrow: map.iter().count() <= MATCH_WORDS,
            hash: hash_masked(&key, mask, map, 0),
            key,
            mask: *mask,
            map,
            ufid,
            actions: AtomicU64::new(actions),
            dead: AtomicBool::new(false),
            arena_index: AtomicU32::new(u32::MAX),
            set: ArcSwapOption::new(set),
            stats: FlowStats::default(),
        }
    }

    /// A live flow owning the action set `set` (what the PMD and
    /// [`crate::dpcls::Dpcls::put`] install).
    pub fn with_actions(ufid: Ufid, key: &FlowKey, mask: &FlowMask, set: Arc<ActionSet>) -> DpFlow {
        let id = set.id();
        Self::build(ufid, key, mask, id, Some(set))
    }

    /// The id of the flow's current actions (one load; a modify may replace it at any time:
    /// a reader sees the old or the new id).
    #[inline(always)]
    pub fn actions(&self) -> ActionsId {
        self.actions.load(Ordering::Acquire)
    }

    /// The action set the flow owns now, if it was built with one.
    pub fn action_set(&self) -> Option<Arc<ActionSet>> {
        self.set.load_full()
    }

    /// Replaces the flow's actions (a modify): the set first, then the id, so a reader that
    /// sees the new id and falls back to the set finds it. Returns the old set (the caller
    /// drops it; readers that still execute it hold their own reference or view).
    pub(crate) fn replace_actions(&self, set: Arc<ActionSet>) -> Option<Arc<ActionSet>> {
        let id = set.id();
        let old = self.set.swap(Some(set));
        self.actions.store(id, Ordering::Release);
        old
    }

    /// Whether this flow has the same megaflow (masked key and mask) as `key` under `mask`.
    pub fn same_megaflow(&self, key: &FlowKey, mask: &FlowMask) -> bool {
        self.mask == *mask && self.key == key.masked(mask)
    }

    /// The in_port this flow matches (word 0, high half), or `None` if the mask does not
    /// cover the whole in_port field.
    pub fn in_port(&self) -> Option<u32> {
        if self.mask.w[0] >> 32 == 0xffff_ffff {
            Some((self.key.w[0] >> 32) as u32)
        } else {
            None
        }
    }

    /// Whether the flow was removed.
    #[inline]
    pub fn is_dead(&self) -> bool {
        self.dead.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The flow's index in the newest arena it was pushed into (for the SMC), if any.
    #[inline]
    pub fn arena_index(&self) -> Option<u32> {
        let i = self.arena_index.load(Relaxed);
        (i != u32::MAX).then_some(i)
    }

    /// The raw arena index (`u32::MAX` = none yet): a cheap per-classifier flow tag for
    /// hints that are checked before use.
    #[inline(always)]
    pub(crate) fn arena_index_raw(&self) -> u32 {
        self.arena_index.load(Relaxed)
    }

    pub(crate) fn set_arena_index(&self, i: u32) {
        self.arena_index.store(i, Relaxed);
    }

    /// Marks the flow removed (every tier then treats it as a miss).
    pub fn mark_dead(&self) {
        self.dead.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether packet key `pkt` matches this flow (compares only the mask's words).
    ///
    /// A flow of at most [`MATCH_WORDS`] words compares a fixed number of words with no
    /// data-dependent branch: the SMC verifies hits of many megaflows of different widths
    /// in random order, where a loop over the map mispredicts its exit.
    #[inline]
    pub fn matches(&self, pkt: &FlowKey) -> bool {
        if self.narrow {
            let mut d = 0u64;
            for &i in &self.words {
                let i = usize::from(i) % FLOW_WORDS;
                d |= (pkt.w[i] & self.mask.w[i]) ^ self.key.w[i];
            }
            return d == 0;
        }
        self.matches_by_map(pkt)
    }

    /// [`DpFlow::matches`] as a loop over the map (any width).
    #[inline(never)]
    pub fn matches_by_map(&self, pkt: &FlowKey) -> bool {
        self.map
            .iter()
            .all(|i| pkt.w[i] & self.mask.w[i] == self.key.w[i])
    }

    /// Whether this flow and `other` can both match some packet.
    pub fn overlaps(&self, other: &DpFlow) -> bool {
        (0..flow::FLOW_WORDS)
            .all(|i| (self.key.w[i] ^ other.key.w[i]) & self.mask.w[i] & other.mask.w[i] == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The ufid hasher is a function of the ufid (per map), and spreads ufids that differ in
    /// either half over the top bits hashbrown uses for its control bytes.
    #[test]
    fn ufid_hasher_spreads_both_halves() {
        use std::hash::BuildHasher;
        let b = UfidBuild::default();
        for shift in [0u32, 64] {
            let mut tops = std::collections::HashSet::new();
            for i in 0u128..1024 {
                let u = Ufid(i << shift);
                assert_eq!(b.hash_one(u), b.hash_one(Ufid(i << shift)));
                tops.insert(b.hash_one(u) >> 57);
            }
            assert!(tops.len() > 100, "shift {shift}: {} of 128", tops.len());
        }
    }

    /// Keys and masks over a few words (so packets often match), narrow and wide.
    fn words() -> impl Strategy<Value = [u64; FLOW_WORDS]> {
        proptest::collection::vec((0..FLOW_WORDS, 0u64..4, any::<bool>()), 0..10).prop_map(|v| {
            let mut w = [0u64; FLOW_WORDS];
            for (i, x, big) in v {
                w[i] = if big {
                    x.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                } else {
                    x
                };
            }
            w
        })
    }

    proptest! {
        /// `matches` (fixed words or map loop) against a full-width compare.
        #[test]
        fn matches_twin(k in words(), m in words(), p in words()) {
            let (mut key, mut mask, mut pkt) = (FlowKey::ZERO, FlowMask::CATCHALL, FlowKey::ZERO);
            key.w = k;
            mask.w = m;
            pkt.w = p;
            let f = DpFlow::new(Ufid(1), &key, &mask, 0);
            let want = (0..FLOW_WORDS).all(|i| pkt.w[i] & mask.w[i] == key.w[i] & mask.w[i]);
            prop_assert_eq!(f.matches(&pkt), want);
            prop_assert_eq!(f.matches_by_map(&pkt), want);
            // The flow's own key (and anything equal under the mask) matches.
            prop_assert!(f.matches(&key));
            let mut near = pkt;
            for i in 0..FLOW_WORDS {
                near.w[i] = (key.w[i] & mask.w[i]) | (pkt.w[i] & !mask.w[i]);
            }
            prop_assert!(f.matches(&near));
            // One flipped bit inside the mask is a miss.
            if let Some(i) = (0..FLOW_WORDS).find(|&i| mask.w[i] != 0) {
                near.w[i] ^= 1 << mask.w[i].trailing_zeros();
                prop_assert!(!f.matches(&near));
            }
            prop_assert_eq!(f.narrow, mask.map().iter().count() <= MATCH_WORDS);
        }
    }

    #[test]
    fn stats_accumulate() {
        let s = FlowStats::default();
        s.record(2, 128, 5, 0x02);
        s.record(1, 64, 3, 0x10);
        assert_eq!(
            s.snapshot(),
            FlowStatsSnapshot {
                packets: 3,
                bytes: 192,
                used: 5,
                tcp_flags: 0x12
            }
        );
        assert_eq!(std::mem::align_of::<FlowStats>(), 64);
    }

    #[test]
    fn matches_and_overlap() {
        let mut k = FlowKey::ZERO;
        let mut m = FlowMask::CATCHALL;
        k.w[0] = 7 << 32 | 0xdead;
        m.w[0] = 0xffff_ffff << 32;
        k.w[19] = 0x0a00_0001;
        m.w[19] = 0xffff_ffff;
        let f = DpFlow::new(Ufid(1), &k, &m, 0);
        assert_eq!(f.key.w[0], 7 << 32);
        assert_eq!(f.in_port(), Some(7));
        let mut p = k;
        p.w[29] = 99;
        assert!(f.matches(&p));
        p.w[19] = 0x0a00_0002;
        assert!(!f.matches(&p));
        let g = DpFlow::new(Ufid(2), &p, &m, 0);
        assert!(!f.overlaps(&g));
        let h = DpFlow::new(Ufid(3), &p, &FlowMask::CATCHALL, 0);
        assert!(f.overlaps(&h) && g.overlaps(&h));
        assert!(!f.is_dead());
        f.mark_dead();
        assert!(f.is_dead());
    }
}
