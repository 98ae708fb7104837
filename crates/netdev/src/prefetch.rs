//! Cache prefetch for the PMD's batch lookups (DPDK's `rte_prefetch0`, OVS's
//! `OVS_PREFETCH`): once a burst's hashes are known, the cache entries its packets will read
//! (EMC entries, SMC buckets) are requested all at once, so that their misses overlap instead
//! of being paid one after another in the per-packet loop.
//!
//! A prefetch is a hint: it never faults, changes no memory and no result, only timing.

/// Asks the CPU to bring the cache line holding `*r` into all cache levels.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `prefetcht0` is an SSE instruction (baseline on x86_64) that only hints the
        // cache; it does not access memory architecturally and never faults, and `r` is a
        // valid reference anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = r;
    }
}
