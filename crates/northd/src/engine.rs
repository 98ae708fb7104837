//! Running the compiler: every item of the network on one or more threads, into one set of
//! logical flows.
//!
//! Seed 003's lesson: ovn-northd's first parallel build made every thread insert into one
//! hash table under a global lock and was 5× slower than serial; an array of hash-bucket
//! locks plus thread-local counters made it 30 % faster than serial. Both shapes are here so
//! they can be measured side by side:
//!
//! * [`Strategy::BucketLocks`]: seed 003's scheme — threads claim chunks of items and insert
//!   each flow into a shared table split into `buckets` mutex-guarded hash sets, chosen by
//!   the flow's hash; counts kept per thread and summed at the end.
//! * [`Strategy::PerThread`]: each thread fills its own vector (no sharing at all while
//!   building), sorts and dedups it; the sorted runs are then merged. Nothing is locked
//!   except the atomic item cursor.
//!
//! Both produce exactly [`build::build_serial`]'s result (sorted, duplicates once) — a test
//! checks it.

use crate::build::{self, Ctx, Item};
use crate::lflow::Lflow;
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How a parallel build shares its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// One thread, one vector.
    Serial,
    /// Seed 003's hash-bucket locks with thread-local counters.
    BucketLocks {
        /// Number of locked buckets.
        buckets: usize,
    },
    /// Per-thread vectors, sorted and merged.
    PerThread,
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "serial" => Ok(Strategy::Serial),
            "bucket-locks" => Ok(Strategy::BucketLocks { buckets: 1024 }),
            "per-thread" => Ok(Strategy::PerThread),
            _ => Err(format!(
                "{s:?}: expected serial, bucket-locks or per-thread"
            )),
        }
    }
}

/// Items claimed at a time by a thread: small enough to balance (the join switch and the
/// cluster router are single big items only in their `*Dp` part), big enough that the
/// shared cursor is not contended.
const CHUNK: usize = 32;

/// Builds every flow with `threads` threads (at least 1) and `strategy`; the result is
/// sorted with duplicates removed.
pub fn build(ctx: &Ctx<'_>, threads: usize, strategy: Strategy) -> Vec<Lflow> {
    let threads = threads.max(1);
    match strategy {
        Strategy::Serial => build::build_serial(ctx),
        _ if threads == 1 && strategy == Strategy::PerThread => build::build_serial(ctx),
        Strategy::PerThread => per_thread(ctx, &build::items(ctx), threads),
        Strategy::BucketLocks { buckets } => {
            bucket_locks(ctx, &build::items(ctx), threads, buckets.max(1))
        }
    }
}

fn per_thread(ctx: &Ctx<'_>, items: &[Item], threads: usize) -> Vec<Lflow> {
    let cursor = AtomicUsize::new(0);
    let runs: Vec<Vec<Lflow>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let at = cursor.fetch_add(CHUNK, Ordering::Relaxed);
                        if at >= items.len() {
                            break;
                        }
                        for &it in &items[at..(at + CHUNK).min(items.len())] {
                            build::build_item(ctx, it, &mut out);
                        }
                    }
                    out.sort_unstable();
                    out.dedup();
                    out
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    merge_sorted(runs)
}

/// Merges sorted, deduplicated runs into one sorted, deduplicated vector.
fn merge_sorted(mut runs: Vec<Vec<Lflow>>) -> Vec<Lflow> {
    while runs.len() > 1 {
        let mut next = Vec::with_capacity(runs.len().div_ceil(2));
        let mut it = runs.into_iter();
        while let Some(a) = it.next() {
            match it.next() {
                Some(b) => next.push(merge_two(a, b)),
                None => next.push(a),
            }
        }
        runs = next;
    }
    runs.pop().unwrap_or_default()
}

fn merge_two(a: Vec<Lflow>, b: Vec<Lflow>) -> Vec<Lflow> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => match x.cmp(y) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => {
                    b.next();
                    true
                }
            },
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let v = if take_a { a.next() } else { b.next() };
        out.extend(v);
    }
    out
}

fn bucket_locks(ctx: &Ctx<'_>, items: &[Item], threads: usize, buckets: usize) -> Vec<Lflow> {
    let table: Vec<Mutex<HashSet<Lflow>>> =
        (0..buckets).map(|_| Mutex::new(HashSet::new())).collect();
    let hasher = std::collections::hash_map::RandomState::new();
    let cursor = AtomicUsize::new(0);
    let counted: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    // Thread-local count, summed once at the end (seed 003).
                    let mut n_new = 0usize;
                    let mut scratch = Vec::new();
                    loop {
                        let at = cursor.fetch_add(CHUNK, Ordering::Relaxed);
                        if at >= items.len() {
                            break;
                        }
                        for &it in &items[at..(at + CHUNK).min(items.len())] {
                            build::build_item(ctx, it, &mut scratch);
                            for f in scratch.drain(..) {
                                let b = (hasher.hash_one(&f) as usize) % buckets;
                                let mut set = table[b].lock().unwrap_or_else(|p| p.into_inner());
                                n_new += usize::from(set.insert(f));
                            }
                        }
                    }
                    n_new
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .sum()
    });
    let mut out = Vec::with_capacity(counted);
    for b in table {
        out.extend(b.into_inner().unwrap_or_else(|p| p.into_inner()));
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lflow::DpId;
    use crate::stage::Stage;

    fn f(dp: u32, p: u16, m: &str) -> Lflow {
        Lflow {
            dp: DpId(dp),
            stage: Stage::LsInAcl,
            priority: p,
            match_: m.into(),
            actions: "next;".into(),
        }
    }

    #[test]
    fn merge_matches_sort_dedup() {
        let runs = vec![
            vec![f(0, 1, "a"), f(0, 2, "b"), f(1, 1, "a")],
            vec![f(0, 2, "b"), f(2, 0, "z")],
            vec![],
            vec![f(0, 0, "a"), f(1, 1, "a")],
        ];
        let mut want: Vec<Lflow> = runs.iter().flatten().cloned().collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(merge_sorted(runs), want);
    }
}
