//! One subtable: every megaflow of one mask (of one in_port), in a concurrent open-addressing
//! hash table, and its batch lookup — a generic version and versions specialised by the number
//! of mask words (const generics, 1..=8), picked once when the subtable is created.
//!
//! # Table
//!
//! A power-of-two array of `AtomicU64` slots, each `hash << 32 | tag` where `tag` is 0 (empty,
//! ends a probe), `u32::MAX` (tombstone, skipped) or `flow index + 1` (index into the
//! snapshot's [`FlowArena`]). `hash` is the flow's masked hash (`DpFlow::hash`), computed over
//! the subtable's mask words only. Linear probing, load (live + tombstones) ≤ 1/2.
//!
//! Readers load slots with `Acquire`; the single writer (holding the classifier's writer lock)
//! stores with `Release` after publishing the flow in the arena, so a reader that sees a tag
//! sees the flow. The writer never turns a used slot back to empty (removal writes a
//! tombstone), so a probe never stops early on a key that was present throughout the probe.
//! A reader may see a slot change under it (a tombstone reused, a flow removed): it then
//! finds another flow, or a dead one, and the candidate check (alive + masked words equal)
//! rejects what does not match. Growing or cleaning the table builds a new subtable that the
//! writer publishes in a new snapshot; the old one is never written again.
//!
//! # Batch lookup
//!
//! For the keys still unmatched (a bitmap of ≤ 32): hash them all under the mask, then load
//! each key's first slot (independent loads: the CPU overlaps their misses, as a prefetch
//! pass would), then probe and compare. The caller clears found keys from the bitmap and
//! stops when it is empty.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use flow::hash::{Crc32c, FIRST_HASHED_WORD, close};
use flow::{FLOW_WORDS, FlowKey, FlowMask, WordMap};

use crate::flow_table::{FlowArena, FlowIndex};
use crate::megaflow::DpFlow;

const EMPTY: u32 = 0;
const TOMB: u32 = u32::MAX;
/// Largest mask (in words) with a specialised lookup.
pub const MAX_SPECIALISED: usize = 8;

#[inline(always)]
fn pack(hash: u32, tag: u32) -> u64 {
    u64::from(hash) << 32 | u64::from(tag)
}

/// Which lookup a subtable uses (chosen at creation from the mask's word count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `lookup::<N>` with N = the number of mask words (1..=8).
    Words(u8),
    /// The loop over a run-time number of words.
    Generic,
}

/// Which implementation a lookup must use: the subtable's own pick, or the generic one
/// (tests compare the two on the same inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Impl {
    /// The shape picked at creation.
    #[default]
    Auto,
    /// Always the generic loop.
    Generic,
}

/// Bits in a subtable's signature filter (see [`crate::dpcls`], "Signature prefilter").
pub const SIG_BITS: u32 = 512;

/// The signature filter: one cache line of bits, set by the writer, read by lookups.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Sig([AtomicU64; (SIG_BITS / 64) as usize]);

/// A counter on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Padded(pub AtomicU64);

/// All megaflows of one mask.
#[derive(Debug)]
pub struct Subtable {
    /// The mask.
    pub mask: FlowMask,
    /// `mask.map()`.
    pub map: WordMap,
    n: usize,
    /// Word indices of the mask, in hash order (16..32, then 0..16).
    idx: [u8; FLOW_WORDS],
    /// The mask's words, same order.
    mw: [u64; FLOW_WORDS],
    shape: Shape,
    slots: Box<[AtomicU64]>,
    live: AtomicUsize,
    used: AtomicUsize,
    /// Hits, incremented by the reading PMD once per batch.
    pub(crate) hits: Padded,
    /// Value of `hits` at the last ranking (written by the ranker only).
    pub(crate) ranked_hits: AtomicU64,
    /// Signature filter: bit `sig(k)` is set for the projection of every flow added (bits
    /// are only ever set; a stale bit costs a probe, never an answer).
    sig: Sig,
}

impl Subtable {
    /// An empty subtable for `mask` with room for `capacity` flows before it must grow.
    pub fn new(mask: &FlowMask, capacity: usize) -> Subtable {
        let map = mask.map();
        let mut idx = [0u8; FLOW_WORDS];
        let mut mw = [0u64; FLOW_WORDS];
        let mut n = 0;
        let order = (FIRST_HASHED_WORD as usize..FLOW_WORDS).chain(0..FIRST_HASHED_WORD as usize);
        for i in order.filter(|&i| map.contains(i)) {
            if let (Some(x), Some(m)) = (idx.get_mut(n), mw.get_mut(n)) {
                *x = i as u8;
                *m = mask.w[i];
                n += 1;
            }
        }
        let shape = if (1..=MAX_SPECIALISED).contains(&n) {
            Shape::Words(n as u8)
        } else {
            Shape::Generic
        };
        let cap = (capacity.max(4) * 2).next_power_of_two();
        Subtable {
            mask: *mask,
            map,
            n,
            idx,
            mw,
            shape,
            slots: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            live: AtomicUsize::new(0),
            used: AtomicUsize::new(0),
            hits: Padded::default(),
            ranked_hits: AtomicU64::new(0),
            sig: Sig::default(),
        }
    }

    /// Sets signature bit `bit` (mod [`SIG_BITS`]). Writer only; done before the flow's
    /// slot is published.
    #[inline]
    pub(crate) fn sig_set(&self, bit: u32) {
        let b = bit % SIG_BITS;
        if let Some(w) = self.sig.0.get((b / 64) as usize) {
            w.fetch_or(1u64 << (b % 64), Ordering::Relaxed);
        }
    }

    /// Whether signature bit `bit` (mod [`SIG_BITS`]) is set.
    #[inline(always)]
    pub(crate) fn sig_has(&self, bit: u32) -> bool {
        let b = bit % SIG_BITS;
        self.sig
            .0
            .get((b / 64) as usize)
            .is_some_and(|w| w.load(Ordering::Relaxed) & (1u64 << (b % 64)) != 0)
    }

    /// The lookup this subtable uses.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Number of live flows.
    pub fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Whether it holds no flow.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Total hits counted so far.
    pub fn hits(&self) -> u64 {
        self.hits.0.load(Ordering::Relaxed)
    }

    /// Whether one more flow fits without passing load 1/2. Writer only.
    pub(crate) fn has_room(&self) -> bool {
        (self.used.load(Ordering::Relaxed) + 1) * 2 <= self.slots.len()
    }

    /// The live entries `(hash, index)`. Writer only (for rebuilds).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u32, FlowIndex)> + '_ {
        self.slots.iter().filter_map(|s| {
            let v = s.load(Ordering::Acquire);
            let tag = v as u32;
            (tag != EMPTY && tag != TOMB).then(|| ((v >> 32) as u32, tag - 1))
        })
    }

    /// Adds flow `idx` with masked hash `hash`. Writer only; the caller checked
    /// [`Subtable::has_room`] and published the flow in the arena first.
    pub(crate) fn insert(&self, hash: u32, idx: FlowIndex) -> bool {
        let mask = self.slots.len() - 1;
        let mut p = hash as usize & mask;
        for _ in 0..self.slots.len() {
            let Some(s) = self.slots.get(p) else {
                return false;
            };
            let tag = s.load(Ordering::Relaxed) as u32;
            if tag == EMPTY || tag == TOMB {
                if tag == EMPTY {
                    self.used.fetch_add(1, Ordering::Relaxed);
                }
                s.store(pack(hash, idx + 1), Ordering::Release);
                self.live.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            p = (p + 1) & mask;
        }
        false
    }

    /// Removes flow `idx` filed under `hash`; whether it was there. Writer only.
    pub(crate) fn remove(&self, hash: u32, idx: FlowIndex) -> bool {
        let mask = self.slots.len() - 1;
        let mut p = hash as usize & mask;
        let want = pack(hash, idx + 1);
        for _ in 0..self.slots.len() {
            let Some(s) = self.slots.get(p) else {
                return false;
            };
            let v = s.load(Ordering::Relaxed);
            if v as u32 == EMPTY {
                return false;
            }
            if v == want {
                s.store(pack(hash, TOMB), Ordering::Release);
                self.live.fetch_sub(1, Ordering::Relaxed);
                return true;
            }
            p = (p + 1) & mask;
        }
        false
    }

    /// The live flow of this subtable equal to `key` under the mask (single key, generic
    /// code; the writer's re-check before an install and the tests use it).
    pub fn find<'a>(&self, arena: &'a FlowArena, key: &FlowKey) -> Option<&'a Arc<DpFlow>> {
        let hash = flow::hash::hash_masked(key, &self.mask, self.map, 0);
        self.probe(arena, key, hash, self.n, self.slot_at(hash))
    }

    #[inline(always)]
    fn slot_at(&self, hash: u32) -> u64 {
        let mask = self.slots.len() - 1;
        self.slots
            .get(hash as usize & mask)
            .map_or(0, |s| s.load(Ordering::Acquire))
    }

    /// Probes for `key` (hash `hash`), `first` = the already loaded first slot, comparing the
    /// first `n` words of `idx`/`mw` (`n` constant in the specialised callers).
    #[inline(always)]
    fn probe<'a>(
        &self,
        arena: &'a FlowArena,
        key: &FlowKey,
        hash: u32,
        n: usize,
        first: u64,
    ) -> Option<&'a Arc<DpFlow>> {
        let mask = self.slots.len() - 1;
        let idx = self.idx.get(..n).unwrap_or_default();
        let mw = self.mw.get(..n).unwrap_or_default();
        let mut p = hash as usize & mask;
        let mut v = first;
        for _ in 0..self.slots.len() {
            let tag = v as u32;
            if tag == EMPTY {
                return None;
            }
            if tag != TOMB
                && (v >> 32) as u32 == hash
                && let Some(f) = arena.get(tag - 1)
                && !f.is_dead()
            {
                let mut diff = 0u64;
                for (&i, &m) in idx.iter().zip(mw) {
                    let i = usize::from(i) % FLOW_WORDS;
                    diff |= (key.w[i] & m) ^ f.key.w[i];
                }
                if diff == 0 {
                    return Some(f);
                }
            }
            p = (p + 1) & mask;
            v = self.slots.get(p).map_or(0, |s| s.load(Ordering::Acquire));
        }
        None
    }

    /// Hash of `key` under the mask, first `n` words (equals `hash_masked(key, mask, map, 0)`).
    #[inline(always)]
    fn hash_n<C: Crc32c>(&self, c: C, key: &FlowKey, n: usize) -> u32 {
        let idx = self.idx.get(..n).unwrap_or_default();
        let mw = self.mw.get(..n).unwrap_or_default();
        let mut h = 0u64;
        for (&i, &m) in idx.iter().zip(mw) {
            h = c.step(h, key.w[usize::from(i) % FLOW_WORDS] & m);
        }
        close(c, h, self.map.0)
    }

    /// Batch lookup of the keys in `remaining` (bit i = `keys[i]`); fills `out[i]` for the
    /// keys found and returns their bitmap.
    #[inline(always)]
    fn lookup_n<'a, C: Crc32c, const N: usize, const GENERIC: bool>(
        &self,
        c: C,
        arena: &'a FlowArena,
        keys: &[FlowKey],
        remaining: u32,
        out: &mut [Option<&'a Arc<DpFlow>>],
    ) -> u32 {
        let n = if GENERIC { self.n } else { N };
        let mut hashes = [0u32; 32];
        let mut first = [0u64; 32];
        let mut bits = remaining;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let (Some(k), Some(h)) = (keys.get(i), hashes.get_mut(i)) {
                *h = self.hash_n(c, k, n);
            }
        }
        let mut bits = remaining;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let (Some(h), Some(f)) = (hashes.get(i), first.get_mut(i)) {
                *f = self.slot_at(*h);
            }
        }
        let mut found = 0u32;
        let mut bits = remaining;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let (Some(k), Some(&h), Some(&f), Some(o)) =
                (keys.get(i), hashes.get(i), first.get(i), out.get_mut(i))
                && let Some(flow) = self.probe(arena, k, h, n, f)
            {
                *o = Some(flow);
                found |= 1 << i;
            }
        }
        found
    }

    /// Batch lookup with the implementation `imp` (see [`Subtable::lookup_n`]).
    #[inline(always)]
    pub(crate) fn lookup_batch<'a, C: Crc32c>(
        &self,
        c: C,
        imp: Impl,
        arena: &'a FlowArena,
        keys: &[FlowKey],
        remaining: u32,
        out: &mut [Option<&'a Arc<DpFlow>>],
    ) -> u32 {
        let shape = if imp == Impl::Generic {
            Shape::Generic
        } else {
            self.shape
        };
        match shape {
            Shape::Words(1) => self.lookup_n::<C, 1, false>(c, arena, keys, remaining, out),
            Shape::Words(2) => self.lookup_n::<C, 2, false>(c, arena, keys, remaining, out),
            Shape::Words(3) => self.lookup_n::<C, 3, false>(c, arena, keys, remaining, out),
            Shape::Words(4) => self.lookup_n::<C, 4, false>(c, arena, keys, remaining, out),
            Shape::Words(5) => self.lookup_n::<C, 5, false>(c, arena, keys, remaining, out),
            Shape::Words(6) => self.lookup_n::<C, 6, false>(c, arena, keys, remaining, out),
            Shape::Words(7) => self.lookup_n::<C, 7, false>(c, arena, keys, remaining, out),
            Shape::Words(8) => self.lookup_n::<C, 8, false>(c, arena, keys, remaining, out),
            _ => self.lookup_n::<C, 0, true>(c, arena, keys, remaining, out),
        }
    }

    /// Bytes of this subtable's own memory (header + slots).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Subtable>() + self.slots.len() * 8
    }
}
