//! CRC32C (Castagnoli) hashing of flow keys, with an SSE4.2 engine and a portable twin.
//!
//! # What is hashed
//!
//! [`hash_key`] feeds a CRC32C register, started at `basis`, with each word of the key named by
//! the map, each as 8 little-endian bytes (exactly what one `crc32q` instruction consumes), in
//! *hash order* — the packet words 16..32 ascending, then the metadata words 0..16 ascending,
//! the order in which `extract` produces them so that it hashes as it writes — and last with
//! the 64-bit map itself. [`hash_masked`] does the same with
//! every word ANDed with the mask's word first, so `hash_masked(k, m, map, b) ==
//! hash_key(&k.masked(m), map, b)`. [`hash_words`] chains plain words without a map. The CRC
//! register then goes through a multiply/xor-shift finaliser ([`finish`]) so that the low bits
//! (cache indices) depend on the whole register non-linearly.
//!
//! The map is hashed as given, bits above [`FLOW_WORDS`] cleared; two keys with equal words
//! hash equal only if their maps are equal too, so callers use one convention (extract's map
//! is exactly the non-zero words; a megaflow's map is its mask's map).
//!
//! # Engines
//!
//! [`Crc32c`] is one CRC step on 8, 4 or 1 bytes. [`Portable`] implements it with
//! slicing-by-8 tables built at compile time; [`Sse42`] (x86_64 only) with `crc32` instructions
//! and can only be obtained from [`Sse42::detect`], which checks the CPU at run time (std caches
//! the answer in an atomic), so holding one proves the instructions exist. Both give identical
//! values (tested on random inputs). Generic work is written once as a [`CrcTask`];
//! [`run_best`] detects the CPU once and runs the task monomorphised for the best engine inside
//! a `#[target_feature(enable = "sse4.2")]` function, so the `crc32` instructions inline into
//! the task's loops (one detection per batch, not per word).
//!
//! The conventional CRC32C of a byte string (initial value and final XOR `0xffff_ffff`,
//! `crc32c(b"123456789") == 0xe306_9283`) is [`crc32c`]; the key hashes use the raw register.

use crate::key::{FLOW_WORDS, FlowKey, FlowMask, WordMap};

/// One CRC32C step (reflected polynomial 0x82f6_3b78, no inversion), as the SSE4.2 `crc32`
/// instructions define it.
pub trait Crc32c: Copy {
    /// Feeds the 8 little-endian bytes of `v`.
    fn u64(self, crc: u32, v: u64) -> u32;
    /// Feeds the 4 little-endian bytes of `v`.
    fn u32(self, crc: u32, v: u32) -> u32;
    /// Feeds one byte.
    fn u8(self, crc: u32, v: u8) -> u32;

    /// [`Crc32c::u64`] on a register kept in a `u64` (only its low 32 bits are read; the
    /// result's high half is zero), saving the zero-extensions of a `u32` register in loops.
    #[inline(always)]
    fn step(self, crc: u64, v: u64) -> u64 {
        u64::from(self.u64(crc as u32, v))
    }

    /// Feeds a byte string: 8 bytes at a time, then the tail.
    #[inline(always)]
    fn bytes(self, mut crc: u32, data: &[u8]) -> u32 {
        let mut chunks = data.chunks_exact(8);
        for c in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            crc = self.u64(crc, u64::from_le_bytes(a));
        }
        for &b in chunks.remainder() {
            crc = self.u8(crc, b);
        }
        crc
    }
}

/// Reflected CRC32C polynomial.
const POLY: u32 = 0x82f6_3b78;

/// Slicing-by-8 tables: `TABLES[0]` is the byte table, `TABLES[k][b]` the CRC of byte `b`
/// followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = make_tables();

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

/// The table-driven engine (slicing-by-8); works on every CPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct Portable;

impl Crc32c for Portable {
    #[inline(always)]
    fn u64(self, crc: u32, v: u64) -> u32 {
        let x = v ^ u64::from(crc);
        let b = x.to_le_bytes();
        TABLES[7][usize::from(b[0])]
            ^ TABLES[6][usize::from(b[1])]
            ^ TABLES[5][usize::from(b[2])]
            ^ TABLES[4][usize::from(b[3])]
            ^ TABLES[3][usize::from(b[4])]
            ^ TABLES[2][usize::from(b[5])]
            ^ TABLES[1][usize::from(b[6])]
            ^ TABLES[0][usize::from(b[7])]
    }

    #[inline(always)]
    fn u32(self, crc: u32, v: u32) -> u32 {
        let b = (v ^ crc).to_le_bytes();
        TABLES[3][usize::from(b[0])]
            ^ TABLES[2][usize::from(b[1])]
            ^ TABLES[1][usize::from(b[2])]
            ^ TABLES[0][usize::from(b[3])]
    }

    #[inline(always)]
    fn u8(self, crc: u32, v: u8) -> u32 {
        (crc >> 8) ^ TABLES[0][usize::from((crc as u8) ^ v)]
    }
}

#[cfg(target_arch = "x86_64")]
pub use sse42::Sse42;

#[cfg(target_arch = "x86_64")]
mod sse42 {
    //! The SSE4.2 engine. The only `unsafe` of the crate lives here: executing `crc32`
    //! instructions, which is sound once the CPU is known to have them. An [`Sse42`] value is
    //! that knowledge: it can only be built by [`Sse42::detect`].
    #![allow(unsafe_code)]

    use super::{Crc32c, CrcTask};
    use core::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u32, _mm_crc32_u64};

    /// Proof that the CPU has SSE4.2; the `crc32` instruction engine.
    #[derive(Debug, Clone, Copy)]
    pub struct Sse42(());

    impl Sse42 {
        /// `Some` if this CPU has SSE4.2 (checked at run time; std caches the answer).
        #[inline]
        pub fn detect() -> Option<Sse42> {
            if std::arch::is_x86_feature_detected!("sse4.2") {
                Some(Sse42(()))
            } else {
                None
            }
        }
    }

    impl Crc32c for Sse42 {
        #[inline(always)]
        fn u64(self, crc: u32, v: u64) -> u32 {
            // SAFETY: an `Sse42` exists only after `detect` saw SSE4.2 on this CPU.
            unsafe { _mm_crc32_u64(u64::from(crc), v) as u32 }
        }

        #[inline(always)]
        fn u32(self, crc: u32, v: u32) -> u32 {
            // SAFETY: an `Sse42` exists only after `detect` saw SSE4.2 on this CPU.
            unsafe { _mm_crc32_u32(crc, v) }
        }

        #[inline(always)]
        fn step(self, crc: u64, v: u64) -> u64 {
            // SAFETY: an `Sse42` exists only after `detect` saw SSE4.2 on this CPU. The
            // instruction reads the low 32 bits of `crc` and zeroes the result's high half.
            unsafe { _mm_crc32_u64(crc, v) }
        }

        #[inline(always)]
        fn u8(self, crc: u32, v: u8) -> u32 {
            // SAFETY: an `Sse42` exists only after `detect` saw SSE4.2 on this CPU.
            unsafe { _mm_crc32_u8(crc, v) }
        }
    }

    /// Runs `task` with the SSE4.2 engine, compiled with SSE4.2 enabled so that the `crc32`
    /// instructions inline into the task's loops.
    #[target_feature(enable = "sse4.2")]
    fn run<T: CrcTask>(task: T, engine: Sse42) -> T::Output {
        task.run(engine)
    }

    /// Same, also compiled with AVX2 (wider stores and compares in the task's code).
    #[target_feature(enable = "sse4.2,avx2")]
    fn run_avx2<T: CrcTask>(task: T, engine: Sse42) -> T::Output {
        task.run(engine)
    }

    /// Whether the CPU has AVX2 (std caches the answer).
    #[inline]
    pub(super) fn has_avx2() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
    }

    /// Runs `task` with the SSE4.2 engine (`engine` proves the CPU has it), in code compiled
    /// for AVX2 too if `avx2` is asked for and the CPU has it.
    #[inline]
    pub(super) fn run_with<T: CrcTask>(task: T, engine: Sse42, avx2: bool) -> T::Output {
        if avx2 && has_avx2() {
            // SAFETY: `run_avx2` requires SSE4.2, which `engine` proves this CPU has, and
            // AVX2, which was just detected.
            unsafe { run_avx2(task, engine) }
        } else {
            // SAFETY: `run` only requires SSE4.2, which `engine` proves this CPU has.
            unsafe { run(task, engine) }
        }
    }
}

/// Work generic over the CRC engine, run by [`run_best`] with the best one this CPU has.
pub trait CrcTask {
    /// What the task returns.
    type Output;
    /// Does the work with `engine`. Mark implementations `#[inline(always)]`.
    fn run<C: Crc32c>(self, engine: C) -> Self::Output;
}

/// The code paths [`run_best`] chooses from, slowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// [`Portable`] engine, baseline code.
    Portable = 1,
    /// [`Sse42`] engine, code compiled for SSE4.2.
    Sse42 = 2,
    /// [`Sse42`] engine, code compiled for SSE4.2 and AVX2.
    Sse42Avx2 = 3,
}

impl Level {
    /// Every level, slowest first.
    pub const ALL: [Level; 3] = [Level::Portable, Level::Sse42, Level::Sse42Avx2];
}

/// The best level of this CPU, detected on first use and cached.
#[inline]
pub fn best_level() -> Level {
    use std::sync::atomic::{AtomicU8, Ordering};
    static BEST: AtomicU8 = AtomicU8::new(0);
    match BEST.load(Ordering::Relaxed) {
        1 => Level::Portable,
        2 => Level::Sse42,
        3 => Level::Sse42Avx2,
        _ => {
            let l = detect_level();
            BEST.store(l as u8, Ordering::Relaxed);
            l
        }
    }
}

#[cold]
fn detect_level() -> Level {
    #[cfg(target_arch = "x86_64")]
    if Sse42::detect().is_some() {
        return if sse42::has_avx2() {
            Level::Sse42Avx2
        } else {
            Level::Sse42
        };
    }
    Level::Portable
}

/// Runs `task` at `level`, or returns `None` if this CPU cannot (for tests and benchmarks
/// that compare the levels).
pub fn run_at<T: CrcTask>(task: T, level: Level) -> Option<T::Output> {
    match level {
        Level::Portable => Some(task.run(Portable)),
        #[cfg(target_arch = "x86_64")]
        Level::Sse42 => Sse42::detect().map(|e| sse42::run_with(task, e, false)),
        #[cfg(target_arch = "x86_64")]
        Level::Sse42Avx2 => match Sse42::detect() {
            Some(e) if sse42::has_avx2() => Some(sse42::run_with(task, e, true)),
            _ => None,
        },
        #[cfg(not(target_arch = "x86_64"))]
        _ => None,
    }
}

/// Runs `task` at the best level of this CPU ([`best_level`]). The check is one relaxed load
/// and a branch, so put a whole batch in one task anyway.
#[inline]
pub fn run_best<T: CrcTask>(task: T) -> T::Output {
    #[cfg(target_arch = "x86_64")]
    {
        let level = best_level();
        if level >= Level::Sse42
            && let Some(e) = Sse42::detect()
        {
            return sse42::run_with(task, e, level == Level::Sse42Avx2);
        }
    }
    task.run(Portable)
}

/// Whether [`run_best`] uses the SSE4.2 engine on this CPU.
pub fn has_sse42() -> bool {
    best_level() >= Level::Sse42
}

/// A cheap bijective finaliser: a multiply spreads each bit upwards, the shift brings the high
/// half back down, so the low bits (cache indices) depend on the whole CRC non-linearly.
#[inline(always)]
pub fn finish(h: u32) -> u32 {
    let h = h.wrapping_mul(0x9e37_79b1);
    h ^ (h >> 16)
}

/// `map` with the bits of words past the end of a key cleared.
#[inline(always)]
fn clip(map: WordMap) -> WordMap {
    WordMap(map.0 & WordMap::ALL.0)
}

/// First word hashed: the packet words (16..) go first, then the metadata words (0..16), the
/// order in which `extract` produces them, so that it can hash while it writes.
pub const FIRST_HASHED_WORD: u32 = 16;

/// Calls `f` with each word index of `map` in hash order: 16..32, then 0..16.
#[inline(always)]
fn for_each_in_hash_order(map: u64, mut f: impl FnMut(usize)) {
    let mut r = (map as u32).rotate_right(FIRST_HASHED_WORD);
    while r != 0 {
        let j = r.trailing_zeros().wrapping_add(FIRST_HASHED_WORD) % FLOW_WORDS as u32;
        f(j as usize);
        r &= r - 1;
    }
}

/// The last step of a key hash: feeds the map, then [`finish`].
#[inline(always)]
pub fn close<C: Crc32c>(c: C, h: u64, map: u64) -> u32 {
    finish(c.step(h, map) as u32)
}

/// [`hash_key`] with a given engine.
#[inline(always)]
pub fn hash_key_with<C: Crc32c>(c: C, key: &FlowKey, map: WordMap, basis: u32) -> u32 {
    let map = clip(map).0;
    let mut h = u64::from(basis);
    for_each_in_hash_order(map, |i| h = c.step(h, key.w[i % FLOW_WORDS]));
    close(c, h, map)
}

/// [`hash_masked`] with a given engine.
#[inline(always)]
pub fn hash_masked_with<C: Crc32c>(
    c: C,
    key: &FlowKey,
    mask: &FlowMask,
    map: WordMap,
    basis: u32,
) -> u32 {
    let map = clip(map).0;
    let mut h = u64::from(basis);
    for_each_in_hash_order(map, |i| {
        let i = i % FLOW_WORDS;
        h = c.step(h, key.w[i] & mask.w[i]);
    });
    close(c, h, map)
}

/// [`hash_words`] with a given engine.
#[inline(always)]
pub fn hash_words_with<C: Crc32c>(c: C, words: &[u64], basis: u32) -> u32 {
    let mut h = basis;
    for &x in words {
        h = c.u64(h, x);
    }
    finish(h)
}

/// Conventional CRC32C of `data` with a given engine.
#[inline(always)]
pub fn crc32c_with<C: Crc32c>(c: C, data: &[u8]) -> u32 {
    !c.bytes(!0, data)
}

struct HashKey<'a>(&'a FlowKey, WordMap, u32);
impl CrcTask for HashKey<'_> {
    type Output = u32;
    #[inline(always)]
    fn run<C: Crc32c>(self, c: C) -> u32 {
        hash_key_with(c, self.0, self.1, self.2)
    }
}

struct HashMasked<'a>(&'a FlowKey, &'a FlowMask, WordMap, u32);
impl CrcTask for HashMasked<'_> {
    type Output = u32;
    #[inline(always)]
    fn run<C: Crc32c>(self, c: C) -> u32 {
        hash_masked_with(c, self.0, self.1, self.2, self.3)
    }
}

struct HashWords<'a>(&'a [u64], u32);
impl CrcTask for HashWords<'_> {
    type Output = u32;
    #[inline(always)]
    fn run<C: Crc32c>(self, c: C) -> u32 {
        hash_words_with(c, self.0, self.1)
    }
}

struct Crc<'a>(&'a [u8]);
impl CrcTask for Crc<'_> {
    type Output = u32;
    #[inline(always)]
    fn run<C: Crc32c>(self, c: C) -> u32 {
        crc32c_with(c, self.0)
    }
}

struct HashKeys<'a> {
    keys: &'a [FlowKey],
    maps: &'a [WordMap],
    basis: u32,
    out: &'a mut [u32],
}
impl CrcTask for HashKeys<'_> {
    type Output = usize;
    #[inline(always)]
    fn run<C: Crc32c>(self, c: C) -> usize {
        let mut n = 0;
        for ((k, m), h) in self.keys.iter().zip(self.maps).zip(self.out.iter_mut()) {
            *h = hash_key_with(c, k, *m, self.basis);
            n += 1;
        }
        n
    }
}

/// Hash of the words of `key` named by `map` (and of `map` itself), from `basis`.
#[inline]
pub fn hash_key(key: &FlowKey, map: WordMap, basis: u32) -> u32 {
    run_best(HashKey(key, map, basis))
}

/// Hash of `key` under `mask`: equals `hash_key(&key.masked(mask), map, basis)`.
#[inline]
pub fn hash_masked(key: &FlowKey, mask: &FlowMask, map: WordMap, basis: u32) -> u32 {
    run_best(HashMasked(key, mask, map, basis))
}

/// Hash of a run of words, from `basis`.
#[inline]
pub fn hash_words(words: &[u64], basis: u32) -> u32 {
    run_best(HashWords(words, basis))
}

/// Hashes `keys[i]` under `maps[i]` into `out[i]` for every `i` the three slices share;
/// returns how many. Detects the CPU once for the whole batch.
pub fn hash_keys(keys: &[FlowKey], maps: &[WordMap], basis: u32, out: &mut [u32]) -> usize {
    run_best(HashKeys {
        keys,
        maps,
        basis,
        out,
    })
}

/// The conventional CRC32C of `data` (`crc32c(b"123456789") == 0xe306_9283`).
pub fn crc32c(data: &[u8]) -> u32 {
    run_best(Crc(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn check_vectors() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c_with(Portable, b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
        // RFC 3720 B.4: 32 bytes of zeros, of 0xff, and ascending.
        assert_eq!(crc32c_with(Portable, &[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c_with(Portable, &[0xffu8; 32]), 0x62a8_ab43);
        let asc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c_with(Portable, &asc), 0x46dd_794e);
        #[cfg(target_arch = "x86_64")]
        if let Some(s) = Sse42::detect() {
            assert_eq!(crc32c_with(s, b"123456789"), 0xe306_9283);
            assert_eq!(crc32c_with(s, &[0u8; 32]), 0x8a91_36aa);
            assert_eq!(crc32c_with(s, &asc), 0x46dd_794e);
        }
    }

    #[test]
    fn word_step_equals_byte_steps() {
        let v = 0x0123_4567_89ab_cdefu64;
        let mut by_bytes = 0x1234_5678u32;
        for b in v.to_le_bytes() {
            by_bytes = Portable.u8(by_bytes, b);
        }
        assert_eq!(Portable.u64(0x1234_5678, v), by_bytes);
        let mut by_bytes = 0x1234_5678u32;
        for b in 0xdead_beefu32.to_le_bytes() {
            by_bytes = Portable.u8(by_bytes, b);
        }
        assert_eq!(Portable.u32(0x1234_5678, 0xdead_beef), by_bytes);
    }

    #[test]
    fn finish_spreads_low_bits() {
        // Keys differing in one bit anywhere must not collide in the low 12 bits too often.
        let mut k = FlowKey::ZERO;
        let mut seen = std::collections::HashSet::new();
        for i in 0..FLOW_WORDS {
            for b in 0..64 {
                k.w = [0; FLOW_WORDS];
                k.w[i] = 1 << b;
                seen.insert(hash_key(&k, k.map(), 0) & 0xfff);
            }
        }
        // 2048 keys into 4096 buckets: expect ~1600 distinct, far more than a poor hash gives.
        assert!(seen.len() > 1400, "{}", seen.len());
    }

    fn key_strategy() -> impl Strategy<Value = FlowKey> {
        prop::array::uniform32(prop_oneof![Just(0u64), any::<u64>()]).prop_map(|w| FlowKey { w })
    }

    proptest! {
        #[test]
        fn engines_agree(key in key_strategy(), maskw in prop::array::uniform32(any::<u64>()),
                         extra in any::<u64>(), basis in any::<u32>(),
                         bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let mask = FlowMask { w: maskw };
            let map = WordMap(key.map().0 | extra);
            let p = (
                hash_key_with(Portable, &key, map, basis),
                hash_masked_with(Portable, &key, &mask, map, basis),
                hash_words_with(Portable, &key.w, basis),
                crc32c_with(Portable, &bytes),
            );
            // The dispatching entry points agree with the portable engine whatever they pick.
            prop_assert_eq!(p, (hash_key(&key, map, basis), hash_masked(&key, &mask, map, basis),
                                hash_words(&key.w, basis), crc32c(&bytes)));
            #[cfg(target_arch = "x86_64")]
            if let Some(s) = Sse42::detect() {
                prop_assert_eq!(p, (
                    hash_key_with(s, &key, map, basis),
                    hash_masked_with(s, &key, &mask, map, basis),
                    hash_words_with(s, &key.w, basis),
                    crc32c_with(s, &bytes),
                ));
                let mut h = basis;
                for &x in &key.w {
                    h = s.u32(s.u32(h, x as u32), (x >> 32) as u32);
                }
                let mut g = basis;
                for &x in &key.w {
                    g = Portable.u32(Portable.u32(g, x as u32), (x >> 32) as u32);
                }
                prop_assert_eq!(h, g);
            }
        }

        #[test]
        fn masked_hash_is_hash_of_masked_key(key in key_strategy(),
                                             maskw in prop::array::uniform32(any::<u64>()),
                                             basis in any::<u32>()) {
            let mask = FlowMask { w: maskw };
            let map = mask.map();
            prop_assert_eq!(hash_masked(&key, &mask, map, basis),
                            hash_key(&key.masked(&mask), map, basis));
        }

        #[test]
        fn batch_equals_single(keys in prop::collection::vec(key_strategy(), 0..40),
                               basis in any::<u32>()) {
            let maps: Vec<WordMap> = keys.iter().map(|k| k.map()).collect();
            let mut out = vec![0u32; keys.len()];
            prop_assert_eq!(hash_keys(&keys, &maps, basis, &mut out), keys.len());
            for ((k, m), h) in keys.iter().zip(&maps).zip(&out) {
                prop_assert_eq!(*h, hash_key(k, *m, basis));
                prop_assert_eq!(*h, hash_key_with(Portable, k, *m, basis));
            }
            // Every code path gives the same values.
            for level in Level::ALL {
                let mut out2 = vec![0u32; keys.len()];
                let task = HashKeys { keys: &keys, maps: &maps, basis, out: &mut out2 };
                if run_at(task, level).is_some() {
                    prop_assert_eq!(&out2, &out, "{:?}", level);
                }
            }
        }
    }
}
