//! Signature-match cache (SMC): packet hash → 16-bit signature → flow index, per PMD thread.
//!
//! As OVS's `smc_cache`: [`SMC_ENTRIES`] = 2^20 entries in 2^18 buckets of 4 ways. An entry is
//! 4 bytes — a 16-bit signature (the high half of the packet's hash) and a 16-bit index into
//! the flow table ([`FlowArena`]) — so the whole cache is 4 MiB and a bucket is 16 bytes (4 per
//! cache line), against 128 bytes per EMC entry: it holds far more flows than the EMC for
//! the same cache footprint, at the price of a verification.
//!
//! # Lookup
//!
//! Bucket = low 18 bits of the hash; for each way whose signature equals the hash's high 16
//! bits and whose index is set, fetch the flow from the arena and **verify** it: the flow must
//! be alive and the packet must match it under its mask. Signatures collide (16 bits), and an
//! index may be stale (the flow was removed, or the arena compacted and the index now names
//! another flow), so an unverified hit could forward by the wrong flow. With the check, a hit
//! is always a live megaflow that matches the packet, which is the megaflow the classifier
//! would return, since live megaflows do not overlap (ARCHITECTURE.md invariant 2).
//!
//! # Insert
//!
//! A way with the same signature is overwritten; else an empty way; else a pseudo-random
//! one. Flows whose index does not fit 16 bits (`>= 0xffff`) are not cached (as OVS).

use std::sync::Arc;

use flow::FlowKey;

use crate::flow_table::{FlowArena, FlowIndex};
use crate::megaflow::DpFlow;

/// Number of entries.
pub const SMC_ENTRIES: usize = 1 << 20;
/// Ways per bucket.
pub const SMC_WAYS: usize = 4;
/// Number of buckets.
pub const SMC_BUCKETS: usize = SMC_ENTRIES / SMC_WAYS;
const SMC_MASK: u32 = (SMC_BUCKETS - 1) as u32;
const NULL_INDEX: u16 = u16::MAX;

/// One bucket: 4 signatures, 4 flow indices (16 bytes).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
pub struct SmcBucket {
    sig: [u16; SMC_WAYS],
    idx: [u16; SMC_WAYS],
}

impl SmcBucket {
    const EMPTY: SmcBucket = SmcBucket {
        sig: [0; SMC_WAYS],
        idx: [NULL_INDEX; SMC_WAYS],
    };
}

/// The signature-match cache of one PMD thread.
#[derive(Debug)]
pub struct Smc {
    buckets: Box<[SmcBucket]>,
    rng: u32,
}

impl Default for Smc {
    fn default() -> Self {
        Smc::new()
    }
}

impl Smc {
    /// An empty SMC (4 MiB).
    pub fn new() -> Smc {
        Smc {
            buckets: vec![SmcBucket::EMPTY; SMC_BUCKETS].into_boxed_slice(),
            rng: 0x1234_5679,
        }
    }

    /// Bytes per entry (signature + index).
    pub const ENTRY_BYTES: usize = std::mem::size_of::<SmcBucket>() / SMC_WAYS;

    #[inline(always)]
    fn split(hash: u32) -> (usize, u16) {
        ((hash & SMC_MASK) as usize, (hash >> 16) as u16)
    }

    /// Prefetches the bucket of `hash`, ahead of [`Smc::lookup`].
    #[inline(always)]
    pub fn prefetch(&self, hash: u32) {
        if let Some(b) = self.buckets.get(Self::split(hash).0) {
            netdev::prefetch::prefetch(b);
        }
    }

    /// The live flow of `arena` that the entry for `hash` names and that matches `key`
    /// (`hash` = the packet's `hash_key(key, map, 0)`, the EMC hash).
    #[inline]
    pub fn lookup<'a>(
        &self,
        arena: &'a FlowArena,
        key: &FlowKey,
        hash: u32,
    ) -> Option<&'a Arc<DpFlow>> {
        let (b, sig) = Self::split(hash);
        let bucket = self.buckets.get(b)?;
        for w in 0..SMC_WAYS {
            if bucket.sig[w] == sig
                && bucket.idx[w] != NULL_INDEX
                && let Some(f) = arena.get(u32::from(bucket.idx[w]))
                && !f.is_dead()
                && f.matches(key)
            {
                return Some(f);
            }
        }
        None
    }

    /// Records `hash` → flow index `idx`; false if the index does not fit 16 bits.
    pub fn insert(&mut self, hash: u32, idx: FlowIndex) -> bool {
        let Ok(idx16) = u16::try_from(idx) else {
            return false;
        };
        if idx16 == NULL_INDEX {
            return false;
        }
        let (b, sig) = Self::split(hash);
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        let Some(bucket) = self.buckets.get_mut(b) else {
            return false;
        };
        let way = (0..SMC_WAYS)
            .find(|&w| bucket.sig[w] == sig && bucket.idx[w] != NULL_INDEX)
            .or_else(|| (0..SMC_WAYS).find(|&w| bucket.idx[w] == NULL_INDEX))
            .unwrap_or(x as usize % SMC_WAYS);
        if let (Some(s), Some(i)) = (bucket.sig.get_mut(way), bucket.idx.get_mut(way)) {
            *s = sig;
            *i = idx16;
        }
        true
    }

    /// Empties the cache (e.g. after the flow table's indices changed wholesale; not needed
    /// for correctness, since hits are verified).
    pub fn clear(&mut self) {
        self.buckets.fill(SmcBucket::EMPTY);
    }

    /// Number of occupied entries.
    pub fn occupied(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| b.idx.iter().filter(|&&i| i != NULL_INDEX).count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::megaflow::Ufid;
    use flow::FlowMask;

    #[test]
    fn sizes() {
        assert_eq!(Smc::ENTRY_BYTES, 4);
        assert_eq!(SMC_BUCKETS * std::mem::size_of::<SmcBucket>(), 4 << 20);
    }

    #[test]
    fn verified_hits_only() {
        let arena = FlowArena::new(4);
        let mut k = FlowKey::ZERO;
        k.w[19] = 0x0a00_0001;
        let mut m = FlowMask::CATCHALL;
        m.w[19] = 0xffff_ffff;
        let f = Arc::new(DpFlow::new(Ufid(1), &k, &m, 0));
        let i = arena.push(f.clone()).unwrap();
        let mut smc = Smc::new();
        let h = 0xabcd_0123;
        assert!(smc.lookup(&arena, &k, h).is_none());
        assert!(smc.insert(h, i));
        assert!(Arc::ptr_eq(smc.lookup(&arena, &k, h).unwrap(), &f));
        // Same signature, packet that does not match the flow: verified miss.
        let mut other = k;
        other.w[19] = 0x0a00_0002;
        assert!(smc.lookup(&arena, &other, h).is_none());
        f.mark_dead();
        assert!(smc.lookup(&arena, &k, h).is_none());
        assert!(!smc.insert(h, 0xffff));
        assert!(!smc.insert(h, 1 << 20));
        assert_eq!(smc.occupied(), 1);
    }
}
