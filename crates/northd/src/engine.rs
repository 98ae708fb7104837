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
//!   building) and merges equal flows in it; the sorted runs are then merged. Nothing is
//!   locked except the atomic item cursor.
//!
//! Both produce exactly [`build::build_serial`]'s result (one flow per key on the union of
//! its datapaths, sorted) — a test checks it.

use crate::build::{self, Ctx, Item};
use crate::lflow::{Dup, Groups, Lflow, MergeMap, finish_shared, flow_hash, shard_of_hash};
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

/// Builds every flow with `threads` threads (at least 1) and `strategy`: one flow per
/// (stage, priority, match, actions) on the union of its datapaths. The order is not
/// defined (printing sorts; the SB sync hashes).
pub fn build(ctx: &Ctx, threads: usize, strategy: Strategy) -> Vec<Lflow> {
    build_inner(ctx, threads, strategy, None)
}

/// [`build`], also returning every (flow, datapath) that more than one item produced, with
/// its count (what [`crate::incr`] needs to keep reference counts).
pub fn build_with_dups(ctx: &Ctx, threads: usize, strategy: Strategy) -> (Vec<Lflow>, Vec<Dup>) {
    let mut dups = Vec::new();
    let flows = build_inner(ctx, threads, strategy, Some(&mut dups));
    (flows, dups)
}

fn build_inner(
    ctx: &Ctx,
    threads: usize,
    strategy: Strategy,
    dups: Option<&mut Vec<Dup>>,
) -> Vec<Lflow> {
    let threads = threads.max(1);
    let items = build::items(ctx);
    match strategy {
        Strategy::Serial => per_thread(ctx, &items, 1, dups),
        Strategy::PerThread => per_thread(ctx, &items, threads, dups),
        Strategy::BucketLocks { buckets } => {
            bucket_locks(ctx, &items, threads, buckets.max(1), dups)
        }
    }
}

fn per_thread(
    ctx: &Ctx,
    items: &[Item],
    threads: usize,
    dups: Option<&mut Vec<Dup>>,
) -> Vec<Lflow> {
    let want_dups = dups.is_some();
    // Each thread's table is split into shards by key; afterwards each thread merges a
    // disjoint set of shards across all threads, so the merge runs in parallel too.
    let shards = threads * 4;
    let cursor = AtomicUsize::new(0);
    let tables: Vec<Vec<MergeMap>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine: Vec<MergeMap> =
                        (0..shards).map(|_| MergeMap::default()).collect();
                    build_claimed(ctx, items, &cursor, |flows| {
                        for f in flows.drain(..) {
                            let h = flow_hash(f.stage, f.priority, &f.match_, &f.actions);
                            mine[shard_of_hash(h, shards)].merge_hashed(h, f);
                        }
                    });
                    mine
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    // Transpose: shard -> the threads' maps for it.
    let mut by_shard: Vec<Vec<MergeMap>> =
        (0..shards).map(|_| Vec::with_capacity(threads)).collect();
    for t in tables {
        for (i, m) in t.into_iter().enumerate() {
            by_shard[i].push(m);
        }
    }
    let work = std::sync::Mutex::new(by_shard.into_iter().collect::<Vec<_>>());
    let parts: Vec<(Vec<Lflow>, Vec<Dup>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    let mut my_dups = Vec::new();
                    let mut groups = Groups::default();
                    loop {
                        let next = work.lock().unwrap_or_else(|p| p.into_inner()).pop();
                        let Some(maps) = next else { break };
                        let mut maps = maps.into_iter();
                        let mut all = maps.next().unwrap_or_default();
                        for m in maps {
                            all.absorb(m);
                        }
                        out.extend(finish_shared(
                            all,
                            want_dups.then_some(&mut my_dups),
                            &mut groups,
                        ));
                    }
                    (out, my_dups)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    let mut all_dups = Vec::new();
    for (p, d) in parts {
        out.extend(p);
        all_dups.extend(d);
    }
    if let Some(dups) = dups {
        dups.extend(all_dups);
    }
    out
}

/// Builds chunks of items claimed from `cursor` until none are left, handing each chunk's
/// flows to `take` (which drains them).
fn build_claimed(
    ctx: &Ctx,
    items: &[Item],
    cursor: &AtomicUsize,
    mut take: impl FnMut(&mut Vec<Lflow>),
) {
    let mut scratch = Vec::new();
    loop {
        let at = cursor.fetch_add(CHUNK, Ordering::Relaxed);
        if at >= items.len() {
            break;
        }
        for &it in &items[at..(at + CHUNK).min(items.len())] {
            build::build_item(ctx, it, &mut scratch);
        }
        take(&mut scratch);
    }
}

fn bucket_locks(
    ctx: &Ctx,
    items: &[Item],
    threads: usize,
    buckets: usize,
    mut dups: Option<&mut Vec<Dup>>,
) -> Vec<Lflow> {
    let table: Vec<Mutex<MergeMap>> = (0..buckets)
        .map(|_| Mutex::new(MergeMap::default()))
        .collect();
    let cursor = AtomicUsize::new(0);
    let counted: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    // Thread-local count, summed once at the end (seed 003).
                    let mut n_new = 0usize;
                    build_claimed(ctx, items, &cursor, |flows| {
                        for f in flows.drain(..) {
                            let h = flow_hash(f.stage, f.priority, &f.match_, &f.actions);
                            let b = shard_of_hash(h, buckets);
                            let mut map = table[b].lock().unwrap_or_else(|p| p.into_inner());
                            n_new += usize::from(map.merge_hashed(h, f));
                        }
                    });
                    n_new
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .sum()
    });
    let mut out = Vec::with_capacity(counted);
    let mut groups = Groups::default();
    for b in table {
        out.extend(finish_shared(
            b.into_inner().unwrap_or_else(|p| p.into_inner()),
            dups.as_deref_mut(),
            &mut groups,
        ));
    }
    out
}
