//! Exact-match cache (EMC): packet key → flow, per PMD thread, no locks.
//!
//! As OVS's `emc_cache`: [`EMC_ENTRIES`] = 8192 entries; a key's two candidate slots are the
//! low 13 bits of its hash and the next 13 bits (2-way); insertion is probabilistic — a
//! packet that missed the EMC and hit further down is inserted with probability
//! `1 / emc_insert_inv_prob` (default 100, i.e. 1 %; 1 = always, 0 = never), OVS's
//! `other_config:emc-insert-inv-prob` — so that a flood of short flows does not thrash it.
//!
//! # Entry layout (why it scales better than OVS's)
//!
//! An entry keeps the key as a miniflow: the 32-bit word map and only the non-zero words,
//! packed, up to [`EMC_MAX_WORDS`] = 14. The entry is two cache lines (128 bytes, OVS's is
//! ~600), and the header (hash, map, flow) plus the first 6 words — all of a TCP/UDP over
//! IPv4 key — share the first line, so a hit or a miss touches one line per way. Keys with
//! more non-zero words (long IPv6/ND keys with conntrack state) are not cached here; they
//! still hit the SMC or the megaflow classifier.
//!
//! # Lookup
//!
//! Compare the hash, then the map, then the packed words against the packet's words in map
//! order (miniflow compare). The packet's map must be exactly its non-zero words (what
//! `extract` returns), so two keys with equal maps and words are equal keys.
//!
//! # Invariants
//!
//! - A hit returns the flow last inserted for exactly this key, and only if it is not dead;
//!   a dead flow is a miss and its entry is cleared on the spot ([`Emc::lookup`]) or by
//!   the slow sweep ([`Emc::sweep`]).
//! - Since the flow was inserted for this key after a lookup that returned it, the flow
//!   matches the key (ARCHITECTURE.md invariant 2); a test checks it on random sequences.

use std::sync::Arc;

use flow::{FLOW_WORDS, FlowKey, WordMap};

use crate::megaflow::DpFlow;
use crate::recirc_hint::RecircHints;

/// `$e` with the const `$N` set to the key width `$n` (0..=[`EMC_MAX_WORDS`]; wider counts
/// as the maximum): one monomorphised copy of `$e` per width, the compare unrolled in each.
macro_rules! by_width {
    ($n:expr, $N:ident => $e:expr) => {
        match $n {
            0 => { const $N: usize = 0; $e }
            1 => { const $N: usize = 1; $e }
            2 => { const $N: usize = 2; $e }
            3 => { const $N: usize = 3; $e }
            4 => { const $N: usize = 4; $e }
            5 => { const $N: usize = 5; $e }
            6 => { const $N: usize = 6; $e }
            7 => { const $N: usize = 7; $e }
            8 => { const $N: usize = 8; $e }
            9 => { const $N: usize = 9; $e }
            10 => { const $N: usize = 10; $e }
            11 => { const $N: usize = 11; $e }
            12 => { const $N: usize = 12; $e }
            13 => { const $N: usize = 13; $e }
            _ => { const $N: usize = EMC_MAX_WORDS; $e }
        }
    };
}

/// Number of entries.
pub const EMC_ENTRIES: usize = 1 << EMC_SHIFT;
const EMC_SHIFT: u32 = 13;
const EMC_MASK: u32 = (EMC_ENTRIES - 1) as u32;
/// Most non-zero key words an entry holds.
pub const EMC_MAX_WORDS: usize = 14;
/// OVS's default `emc-insert-inv-prob`.
pub const DEFAULT_EMC_INSERT_INV_PROB: u32 = 100;

/// One entry: header and packed words, two cache lines.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct EmcEntry {
    hash: u32,
    map: u32,
    flow: Option<Arc<DpFlow>>,
    words: [u64; EMC_MAX_WORDS],
}

impl EmcEntry {
    const EMPTY: EmcEntry = EmcEntry {
        hash: 0,
        map: 0,
        flow: None,
        words: [0; EMC_MAX_WORDS],
    };

    #[inline(always)]
    fn key_eq(&self, key: &FlowKey, map: u32, hash: u32) -> bool {
        if self.hash != hash || self.map != map {
            return false;
        }
        let mut diff = 0u64;
        for (j, i) in WordMap(u64::from(map)).iter().enumerate() {
            diff |= self.words.get(j).copied().unwrap_or(!0) ^ key.w[i];
        }
        diff == 0
    }

    /// [`EmcEntry::key_eq`] for a map of `N` words whose indices are `idx` (in
    /// map order): a compare of `N` words unrolled at compile time, no loop.
    #[inline(always)]
    fn key_eq_listed<const N: usize>(
        &self,
        key: &FlowKey,
        map: u32,
        hash: u32,
        idx: &[usize; N],
    ) -> bool {
        if self.hash != hash || self.map != map {
            return false;
        }
        let mut diff = 0u64;
        // An index loop over a constant range: fully unrolled, both arrays fixed-size.
        #[allow(clippy::needless_range_loop)]
        for j in 0..N.min(EMC_MAX_WORDS) {
            diff |= self.words[j] ^ key.w[idx[j] % FLOW_WORDS];
        }
        diff == 0
    }

    fn alive(&self) -> bool {
        self.flow.as_ref().is_some_and(|f| !f.is_dead())
    }
}

/// Counters of one EMC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmcStats {
    /// Inserts done (the probability check passed).
    pub inserts: u64,
    /// Inserts skipped because the key has too many non-zero words.
    pub too_wide: u64,
    /// Entries cleared because their flow was dead.
    pub dead_evicted: u64,
}

/// A burst's keys as [`Emc::lookup_batch`] takes them (packets `0..n`).
struct Burst<'a> {
    keys: &'a [FlowKey; 32],
    maps: &'a [WordMap; 32],
    hashes: &'a [u32; 32],
    n: usize,
}

/// The exact-match cache of one PMD thread.
#[derive(Debug)]
pub struct Emc {
    entries: Box<[EmcEntry; EMC_ENTRIES]>,
    /// The map whose word indices `listed` holds (0: none yet).
    listed_map: u32,
    listed: [u8; EMC_MAX_WORDS],
    listed_n: usize,
    insert_min: u32,
    rng: u32,
    sweep_pos: usize,
    /// Entries holding a flow (live or dead).
    occupied: usize,
    stats: EmcStats,
    /// One recirculation hint per entry, dropped whenever the entry changes.
    hints: RecircHints,
}

impl Default for Emc {
    fn default() -> Self {
        Emc::new(DEFAULT_EMC_INSERT_INV_PROB)
    }
}

/// A packet key as a map fit for the EMC: `None` if the key has a word outside the first 32
/// or more than [`EMC_MAX_WORDS`] non-zero words.
#[inline(always)]
fn emc_map(map: WordMap) -> Option<u32> {
    let m = u32::try_from(map.0).ok()?;
    (m.count_ones() as usize <= EMC_MAX_WORDS).then_some(m)
}

/// [`EMC_ENTRIES`] empty entries on the heap, as a fixed-size array (slot indices are masked
/// to its size, so indexing needs no bounds check).
fn entries_box() -> Box<[EmcEntry; EMC_ENTRIES]> {
    match vec![EmcEntry::EMPTY; EMC_ENTRIES]
        .into_boxed_slice()
        .try_into()
    {
        Ok(b) => b,
        Err(_) => unreachable!("the vec has exactly EMC_ENTRIES entries"),
    }
}

impl Emc {
    /// An empty EMC inserting with probability `1 / insert_inv_prob` (0 = never).
    pub fn new(insert_inv_prob: u32) -> Emc {
        let mut e = Emc {
            entries: entries_box(),
            listed_map: 0,
            listed: [0; EMC_MAX_WORDS],
            listed_n: 0,
            insert_min: 0,
            rng: 0x9e37_79b9,
            sweep_pos: 0,
            occupied: 0,
            stats: EmcStats::default(),
            hints: RecircHints::new(EMC_ENTRIES),
        };
        e.set_insert_inv_prob(insert_inv_prob);
        e
    }

    /// Changes the insertion probability to `1 / inv_prob` (0 = never insert).
    pub fn set_insert_inv_prob(&mut self, inv_prob: u32) {
        self.insert_min = u32::MAX.checked_div(inv_prob).unwrap_or(0);
    }

    /// Counters.
    pub fn stats(&self) -> EmcStats {
        self.stats
    }

    #[inline(always)]
    fn slots(hash: u32) -> [usize; 2] {
        [
            (hash & EMC_MASK) as usize,
            ((hash >> EMC_SHIFT) & EMC_MASK) as usize,
        ]
    }

    /// Prefetches the first cache line (header and first words) of both candidate entries
    /// of `hash`, ahead of [`Emc::lookup`].
    #[inline(always)]
    pub fn prefetch(&self, hash: u32) {
        let [a, b] = Self::slots(hash);
        for s in [a, b] {
            if let Some(e) = self.entries.get(s) {
                netdev::prefetch::prefetch(e);
            }
        }
    }

    /// The live flow cached for `key` (`map` = its non-zero words, `hash` = `hash_key(key,
    /// map, 0)`). A dead flow's entry is cleared and reported as a miss.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, map: WordMap, hash: u32) -> Option<&Arc<DpFlow>> {
        self.lookup_slot(key, map, hash)
    }

    /// [`Emc::lookup`] of packets `0..n` of a burst (`n` at most 32), in order and with the
    /// same evictions: `hit(i, entry, flow)` for each packet `i` that hits (`entry`: the
    /// slot, for [`Emc::hints`]), and bit `i` of the
    /// returned mask set. One tight loop for the burst, as OVS's `emc_processing`, instead of
    /// a lookup interleaved with the rest of classification.
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey; 32],
        maps: &[WordMap; 32],
        hashes: &[u32; 32],
        n: usize,
        mut hit: impl FnMut(usize, usize, &Arc<DpFlow>),
    ) -> u32 {
        let n = n.min(32);
        let mut hits = 0u32;
        let mut i = 0;
        while i < n {
            if !self.list(maps[i]) {
                i += 1; // too wide for an entry: a miss
                continue;
            }
            // The width dispatch once per run of packets sharing a map, not per packet.
            let b = Burst {
                keys,
                maps,
                hashes,
                n,
            };
            i = by_width!(self.listed_n, N => self.run::<N>(&b, i, &mut hits, &mut hit));
        }
        hits
    }

    /// [`Emc::lookup_batch`] from packet `i` on while the packets' map is the listed one (of
    /// `N` words; packet `i`'s is); returns where it stopped.
    #[inline(always)]
    fn run<const N: usize>(
        &mut self,
        b: &Burst<'_>,
        mut i: usize,
        hits: &mut u32,
        hit: &mut impl FnMut(usize, usize, &Arc<DpFlow>),
    ) -> usize {
        let m = self.listed_map;
        let n = b.n.min(32);
        // The word indices once for the run (registers, not a reload per word and packet).
        let idx = self.listed_idx::<N>();
        while i < n && b.maps[i].0 == u64::from(m) {
            if let Some(s) = self.find::<N>(&b.keys[i], m, b.hashes[i], &idx) {
                let s = s % EMC_ENTRIES;
                match &self.entries[s].flow {
                    Some(f) if !f.is_dead() => {
                        *hits |= 1 << i;
                        hit(i, s, f);
                    }
                    _ => self.evict(s),
                }
            }
            i += 1;
        }
        i
    }

    /// Makes `map` the listed map (its word indices in `self.listed`); false if the map is
    /// not cacheable (a word past 32, or too many words).
    #[inline(always)]
    fn list(&mut self, map: WordMap) -> bool {
        // `emc_map`, with the width check done only when the map changes: `listed_map` is
        // always a map that passed it (the initial 0 has no word).
        let Ok(m) = u32::try_from(map.0) else {
            return false;
        };
        if m != self.listed_map {
            if emc_map(map).is_none() {
                return false;
            }
            // Packets of a burst mostly share one map: list its word indices once.
            self.listed_map = m;
            self.listed_n = 0;
            for i in WordMap(u64::from(m)).iter() {
                if let Some(x) = self.listed.get_mut(self.listed_n) {
                    *x = i as u8;
                    self.listed_n += 1;
                }
            }
        }
        true
    }

    /// The flow of entry `s` if it is live; a dead flow's entry is cleared (counted).
    #[inline(always)]
    fn live(&mut self, s: usize) -> Option<&Arc<DpFlow>> {
        let s = s % EMC_ENTRIES;
        let alive = self.entries[s].flow.as_ref().is_some_and(|f| !f.is_dead());
        if alive {
            return self.entries[s].flow.as_ref();
        }
        self.evict(s);
        None
    }

    /// Clears entry `s`, whose flow is dead (or missing), counting it.
    #[cold]
    fn evict(&mut self, s: usize) {
        let e = &mut self.entries[s % EMC_ENTRIES];
        if e.flow.is_some() {
            self.occupied -= 1;
        }
        *e = EmcEntry::EMPTY;
        self.stats.dead_evicted += 1;
        self.hints.entry_changed(s % EMC_ENTRIES);
    }

    /// [`Emc::lookup`] itself.
    #[inline(always)]
    fn lookup_slot(&mut self, key: &FlowKey, map: WordMap, hash: u32) -> Option<&Arc<DpFlow>> {
        if !self.list(map) {
            return None;
        }
        let m = self.listed_map;
        // One monomorphised probe per map width: the compare is unrolled for that width.
        let found = by_width!(self.listed_n, N => self.find::<N>(key, m, hash, &self.listed_idx()));
        self.live(found?)
    }

    /// The first `N` listed word indices.
    #[inline(always)]
    fn listed_idx<const N: usize>(&self) -> [usize; N] {
        std::array::from_fn(|j| usize::from(self.listed[j % EMC_MAX_WORDS]))
    }

    /// The slot among `key`'s two candidates that holds exactly `key` (map `m` of `N` words,
    /// at indices `idx`).
    #[inline(always)]
    fn find<const N: usize>(
        &self,
        key: &FlowKey,
        m: u32,
        hash: u32,
        idx: &[usize; N],
    ) -> Option<usize> {
        let [a, b] = Self::slots(hash);
        let hit = |s: usize| self.entries[s].key_eq_listed::<N>(key, m, hash, idx);
        if hit(a) {
            Some(a)
        } else if hit(b) {
            Some(b)
        } else {
            None
        }
    }

    /// [`Emc::lookup`] without eviction (a dead flow is still a miss).
    #[inline]
    pub fn peek(&self, key: &FlowKey, map: WordMap, hash: u32) -> Option<&Arc<DpFlow>> {
        let m = emc_map(map)?;
        Self::slots(hash)
            .into_iter()
            .filter_map(|s| self.entries.get(s))
            .find(|e| e.key_eq(key, m, hash))
            .and_then(|e| e.flow.as_ref())
            .filter(|f| !f.is_dead())
    }

    /// Inserts with the configured probability (OVS `emc_probabilistic_insert`); returns
    /// whether it inserted.
    #[inline]
    pub fn maybe_insert(
        &mut self,
        key: &FlowKey,
        map: WordMap,
        hash: u32,
        flow: &Arc<DpFlow>,
    ) -> bool {
        if self.insert_min == 0 {
            return false;
        }
        // xorshift32: a few cycles, per-PMD state, no shared line.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        if x > self.insert_min {
            return false;
        }
        self.insert(key, map, hash, flow)
    }

    /// Inserts `key` → `flow` (OVS `emc_insert`): if one candidate holds the key, its flow is
    /// replaced; otherwise the victim is a candidate without a live flow, else the one with
    /// the lower hash. Returns false if the key is too wide for an entry.
    pub fn insert(&mut self, key: &FlowKey, map: WordMap, hash: u32, flow: &Arc<DpFlow>) -> bool {
        let Some(m) = emc_map(map) else {
            self.stats.too_wide += 1;
            return false;
        };
        let [a, b] = Self::slots(hash);
        let mut victim = None::<usize>;
        for s in [a, b] {
            let Some(e) = self.entries.get(s) else {
                continue;
            };
            if e.key_eq(key, m, hash) {
                victim = Some(s);
                break;
            }
            victim = match victim.and_then(|v| self.entries.get(v).map(|ve| (v, ve))) {
                None => Some(s),
                Some((v, ve)) => {
                    if (ve.alive() && !e.alive()) || e.hash < ve.hash {
                        Some(s)
                    } else {
                        Some(v)
                    }
                }
            };
        }
        let Some(v) = victim else {
            return false;
        };
        self.hints.entry_changed(v);
        let Some(e) = self.entries.get_mut(v) else {
            return false;
        };
        if e.flow.is_none() {
            self.occupied += 1;
        }
        e.hash = hash;
        e.map = m;
        e.flow = Some(flow.clone());
        e.words = [0; EMC_MAX_WORDS];
        for (w, i) in e.words.iter_mut().zip(WordMap(u64::from(m)).iter()) {
            *w = key.w[i];
        }
        self.stats.inserts += 1;
        true
    }

    /// Clears dead entries among the next `n` (OVS `emc_cache_slow_sweep` does one per PMD
    /// loop iteration), and hints naming a dead flow; returns how many entries it cleared.
    pub fn sweep(&mut self, n: usize) -> usize {
        let mut cleared = 0;
        for _ in 0..n.min(EMC_ENTRIES) {
            let pos = self.sweep_pos;
            self.sweep_pos = (pos + 1) & (EMC_ENTRIES - 1);
            if let Some(e) = self.entries.get_mut(pos)
                && e.flow.as_ref().is_some_and(|f| f.is_dead())
            {
                *e = EmcEntry::EMPTY;
                self.hints.entry_changed(pos);
                cleared += 1;
            } else {
                // A live entry's hint may name a dead second-pass megaflow: let it go too.
                self.hints.drop_dead(pos);
            }
        }
        self.occupied -= cleared;
        self.stats.dead_evicted += cleared as u64;
        cleared
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        self.entries.fill(EmcEntry::EMPTY);
        self.occupied = 0;
        self.hints.all_changed();
    }

    /// The recirculation hints of the entries (see [`crate::recirc_hint`]).
    #[inline]
    pub fn hints(&self) -> &RecircHints {
        &self.hints
    }

    /// The hints, to record what a second pass found ([`RecircHints::learn`]).
    #[inline]
    pub fn hints_mut(&mut self) -> &mut RecircHints {
        &mut self.hints
    }

    /// Number of entries holding a flow, live or dead (kept as a count; O(1)).
    #[inline]
    pub fn occupied(&self) -> usize {
        self.occupied
    }

    /// Number of entries holding a live flow.
    pub fn live_entries(&self) -> usize {
        self.entries.iter().filter(|e| e.alive()).count()
    }

    /// Bytes per entry.
    pub const ENTRY_BYTES: usize = std::mem::size_of::<EmcEntry>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::megaflow::Ufid;
    use flow::FlowMask;
    use flow::hash::hash_key;

    fn key(i: u64) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.w[0] = 1 << 32;
        k.w[19] = i | 1 << 40;
        k.w[29] = i.rotate_left(17) | 1;
        k
    }

    #[test]
    fn entry_is_two_lines() {
        assert_eq!(Emc::ENTRY_BYTES, 128);
    }

    #[test]
    fn insert_lookup_dead_sweep() {
        let mut emc = Emc::new(1);
        let f = Arc::new(DpFlow::new(Ufid(1), &key(1), &FlowMask::CATCHALL, 0));
        let k = key(5);
        let h = hash_key(&k, k.map(), 0);
        assert!(emc.lookup(&k, k.map(), h).is_none());
        assert!(emc.maybe_insert(&k, k.map(), h, &f));
        assert!(Arc::ptr_eq(emc.lookup(&k, k.map(), h).unwrap(), &f));
        // Same hash, different key: miss.
        let k2 = key(6);
        assert!(emc.lookup(&k2, k2.map(), h).is_none());
        f.mark_dead();
        assert!(emc.peek(&k, k.map(), h).is_none());
        assert!(emc.lookup(&k, k.map(), h).is_none());
        assert_eq!(emc.stats().dead_evicted, 1);
        assert!(emc.maybe_insert(&k, k.map(), h, &f));
        assert_eq!(emc.sweep(EMC_ENTRIES), 1);
        assert_eq!(emc.live_entries(), 0);
    }

    #[test]
    fn lookups_alternating_maps_hit_and_match_exactly() {
        // The lookup lists a map's word indices once and reuses them while the map repeats:
        // keys of different maps, interleaved, must each hit their own flow, and a key that
        // differs in one word of its map must miss (compared against a direct comparison).
        let mut emc = Emc::new(1);
        let mut keys = Vec::new();
        for i in 0..6u64 {
            let mut k = key(i + 10);
            if i % 2 == 1 {
                k.w[17] = 0x0200_0000_0001_0000 | i; // one more word in the map
                k.w[24] = 0x40_11 | i << 8;
            }
            keys.push(k);
        }
        let flows: Vec<Arc<DpFlow>> = (0..6u128)
            .map(|i| {
                Arc::new(DpFlow::new(
                    Ufid(i),
                    &keys[i as usize],
                    &FlowMask::CATCHALL,
                    0,
                ))
            })
            .collect();
        for (k, f) in keys.iter().zip(&flows) {
            assert!(emc.insert(k, k.map(), hash_key(k, k.map(), 0), f));
        }
        for round in 0..3 {
            for (j, (k, f)) in keys.iter().zip(&flows).enumerate() {
                let h = hash_key(k, k.map(), 0);
                let got = emc.lookup(k, k.map(), h).expect("hit");
                assert!(Arc::ptr_eq(got, f), "round {round} key {j}");
                // The same hash and map with one word changed is a different key.
                let mut other = *k;
                other.w[19] ^= 1 << 3;
                assert!(emc.lookup(&other, other.map(), h).is_none(), "key {j}");
            }
        }
    }

    #[test]
    fn lookups_of_every_width_match_the_plain_compare() {
        // Twin: `lookup` (width check only on a map change, compare unrolled per width) against
        // `peek` (the plain map-walking compare), on keys of every width 1..=16 (15 and 16
        // are too wide), interleaved with one-word variants, so that the listed map changes
        // between widths and between a too-wide key and a cacheable one.
        let mut emc = Emc::new(1);
        let mut keys = Vec::new();
        for width in 1..=16usize {
            let mut k = FlowKey::ZERO;
            for j in 0..width {
                k.w[(j * 7 + 3) % FLOW_WORDS] = (width as u64) << 20 | j as u64 | 1;
            }
            keys.push(k);
        }
        let flows: Vec<Arc<DpFlow>> = (0..keys.len())
            .map(|i| {
                Arc::new(DpFlow::new(
                    Ufid(i as u128),
                    &keys[i],
                    &FlowMask::CATCHALL,
                    0,
                ))
            })
            .collect();
        for (k, f) in keys.iter().zip(&flows) {
            let cacheable = k.map().0.count_ones() as usize <= EMC_MAX_WORDS;
            assert_eq!(
                emc.insert(k, k.map(), hash_key(k, k.map(), 0), f),
                cacheable
            );
        }
        for round in 0..2 {
            for (j, k) in keys.iter().enumerate() {
                for variant in 0..=k.map().0.count_ones() as usize {
                    let mut q = *k;
                    if variant > 0 {
                        // Flip one bit of the variant-th word of the map (stays non-zero).
                        let i = WordMap(u64::from(k.map().0 as u32)).iter().nth(variant - 1);
                        q.w[i.unwrap()] ^= 1 << 40;
                    }
                    let h = hash_key(k, k.map(), 0); // the original's hash: same slots
                    let want = emc.peek(&q, q.map(), h).map(Arc::as_ptr);
                    let got = emc.lookup(&q, q.map(), h).map(Arc::as_ptr);
                    assert_eq!(got, want, "round {round} width {} variant {variant}", j + 1);
                    assert_eq!(got.is_some(), variant == 0 && j < EMC_MAX_WORDS);
                }
            }
        }
    }

    proptest::proptest! {
        /// Twin of the occupancy count: after every step of a random sequence of inserts (on
        /// few slots, so that they replace and collide), lookups, flow deaths (lookup evicts),
        /// sweeps and clears, `occupied()` equals a count over all entries.
        #[test]
        fn occupied_counts_entries_with_a_flow(
            ops in proptest::collection::vec((0u8..5, 0u64..40, 0usize..6), 1..200),
        ) {
            let mut emc = Emc::new(1);
            let flows: Vec<Arc<DpFlow>> = (0..6u128)
                .map(|i| Arc::new(DpFlow::new(Ufid(i), &key(1), &FlowMask::CATCHALL, 0)))
                .collect();
            for (op, k, f) in ops {
                let k = key(k);
                // Few distinct hashes: slots are shared by many keys.
                let h = (hash_key(&k, k.map(), 0) & 0x7) | 0x10000;
                match op {
                    0 | 1 => {
                        emc.insert(&k, k.map(), h, &flows[f]);
                    }
                    2 => {
                        emc.lookup(&k, k.map(), h);
                    }
                    3 => flows[f].mark_dead(),
                    _ if f == 0 => emc.clear(),
                    _ => {
                        emc.sweep(f * 3);
                    }
                }
                let want = emc.entries.iter().filter(|e| e.flow.is_some()).count();
                proptest::prop_assert_eq!(emc.occupied(), want);
            }
        }
    }

    proptest::proptest! {
        /// Twins: `lookup_batch` against `lookup` packet by packet, on two EMCs given the same
        /// history: bursts of keys of three widths (one too wide for an entry) in random
        /// order, so the listed map changes inside a burst; flows dying between bursts. Same
        /// hits (same flows), same evictions, counters and occupancy.
        #[test]
        fn lookup_batch_equals_lookup_each(
            bursts in proptest::collection::vec(
                (proptest::collection::vec((0u64..24, 0u8..3), 0..=32), 0usize..8),
                1..12),
        ) {
            let wide = |i: u64, kind: u8| {
                let mut k = key(i);
                if kind >= 1 {
                    k.w[17] = 0x0200_0000_0001_0000 | i;
                }
                if kind == 2 {
                    for j in 1..15 {
                        k.w[j] = j as u64 | i << 8;
                    }
                }
                k
            };
            let flows: Vec<Arc<DpFlow>> = (0..8u128)
                .map(|i| Arc::new(DpFlow::new(Ufid(i), &key(1), &FlowMask::CATCHALL, 0)))
                .collect();
            let (mut a, mut b) = (Emc::new(1), Emc::new(1));
            for (n, kind) in [(0u64, 0u8), (1, 1), (2, 0), (3, 1), (5, 0), (7, 1), (9, 2)] {
                let k = wide(n, kind);
                let h = hash_key(&k, k.map(), 0);
                let f = &flows[n as usize % 8];
                proptest::prop_assert_eq!(a.insert(&k, k.map(), h, f), b.insert(&k, k.map(), h, f));
            }
            for (burst, kill) in bursts {
                let mut keys = [FlowKey::ZERO; 32];
                let mut maps = [WordMap::EMPTY; 32];
                let mut hashes = [0u32; 32];
                for (j, &(i, kind)) in burst.iter().enumerate() {
                    keys[j] = wide(i, kind);
                    maps[j] = keys[j].map();
                    hashes[j] = hash_key(&keys[j], maps[j], 0);
                }
                let mut got = vec![None; burst.len()];
                let mut calls = 0;
                let hits = a.lookup_batch(&keys, &maps, &hashes, burst.len(), |j, _, f| {
                    got[j] = Some(Arc::as_ptr(f));
                    calls += 1;
                });
                proptest::prop_assert_eq!(calls, hits.count_ones());
                for j in 0..burst.len() {
                    let want = b.lookup(&keys[j], maps[j], hashes[j]).map(Arc::as_ptr);
                    proptest::prop_assert_eq!(got[j], want, "packet {}", j);
                    proptest::prop_assert_eq!(hits >> j & 1 == 1, want.is_some());
                }
                proptest::prop_assert_eq!(u64::from(hits) >> burst.len(), 0);
                proptest::prop_assert_eq!(a.stats(), b.stats());
                proptest::prop_assert_eq!(a.occupied(), b.occupied());
                flows[kill].mark_dead();
            }
        }
    }

    #[test]
    fn insert_probability() {
        let f = Arc::new(DpFlow::new(Ufid(1), &key(1), &FlowMask::CATCHALL, 0));
        let mut off = Emc::new(0);
        let mut pct = Emc::new(100);
        let mut n = 0;
        for i in 0..100_000u64 {
            let k = key(i);
            let h = hash_key(&k, k.map(), 0);
            assert!(!off.maybe_insert(&k, k.map(), h, &f));
            n += usize::from(pct.maybe_insert(&k, k.map(), h, &f));
        }
        assert!((700..1300).contains(&n), "{n} inserts of 100000 at 1%");
    }

    #[test]
    fn too_wide_keys_are_not_cached() {
        let mut emc = Emc::new(1);
        let mut k = FlowKey::ZERO;
        for i in 0..20 {
            k.w[i] = 1;
        }
        let f = Arc::new(DpFlow::new(Ufid(1), &k, &FlowMask::CATCHALL, 0));
        let h = hash_key(&k, k.map(), 0);
        assert!(!emc.insert(&k, k.map(), h, &f));
        assert!(emc.lookup(&k, k.map(), h).is_none());
        assert_eq!(emc.stats().too_wide, 1);
    }
}
