//! Cycle counter for the PMD's busy/idle accounting (OVS counts `cycles_counter_update()`).
//!
//! On x86_64 this reads the time-stamp counter (`rdtsc`), which ticks at a constant rate on
//! every CPU this project targets; elsewhere it falls back to nanoseconds since first use.
//! [`hz`] calibrates the counter's rate once against the monotonic clock so that cycle counts
//! can be turned into time and back.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The current cycle count.
#[inline]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions and touches no memory; every x86_64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        epoch().elapsed().as_nanos() as u64
    }
}

/// Counter ticks per second, measured once (about 20 ms the first time).
pub fn hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let t0 = Instant::now();
        let c0 = now();
        let _ = epoch();
        std::thread::sleep(Duration::from_millis(20));
        let c1 = now();
        let ns = t0.elapsed().as_nanos().max(1);
        ((u128::from(c1.wrapping_sub(c0)) * 1_000_000_000) / ns) as u64
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn counter_advances_and_rate_is_plausible() {
        let a = super::now();
        let hz = super::hz();
        let b = super::now();
        assert!(b > a);
        // Between 100 MHz and 10 GHz (the fallback counts nanoseconds: 1 GHz).
        assert!((100_000_000..10_000_000_000).contains(&hz), "hz = {hz}");
    }
}
