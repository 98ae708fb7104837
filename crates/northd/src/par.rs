//! A small ordered parallel map over a slice (scoped threads), for the model and SB passes
//! that run before and after the item build.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `items.iter().map(f).collect()`, computed by up to `threads` threads; order kept.
///
/// The threads claim small chunks (about 16 per thread) from a shared cursor rather than
/// one contiguous half each: the rows of a table are uneven (a join switch has a port per
/// node, a node switch a dozen), and with halves the thread that drew the heavy rows set the
/// time of the whole pass.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let chunk = (items.len() / (threads * 16)).max(1);
    let n_chunks = items.len().div_ceil(chunk);
    let cursor = AtomicUsize::new(0);
    let parts: Vec<Vec<(usize, Vec<R>)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let c = cursor.fetch_add(1, Ordering::Relaxed);
                        if c >= n_chunks {
                            break;
                        }
                        let lo = c * chunk;
                        let hi = (lo + chunk).min(items.len());
                        mine.push((c, items[lo..hi].iter().map(&f).collect::<Vec<R>>()));
                    }
                    mine
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut all: Vec<(usize, Vec<R>)> = parts.into_iter().flatten().collect();
    all.sort_unstable_by_key(|(c, _)| *c);
    all.into_iter().flat_map(|(_, v)| v).collect()
}

/// Drops `items` in contiguous parts on up to `threads` threads, and `rest` on this one
/// meanwhile: freeing a round's flows one by one is tens of milliseconds on one thread.
pub fn par_drop<T: Send, U>(mut items: Vec<T>, threads: usize, rest: U) {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        drop(items);
        drop(rest);
        return;
    }
    let per = items.len().div_ceil(threads);
    let mut parts = Vec::with_capacity(threads - 1);
    while items.len() > per {
        parts.push(items.split_off(items.len() - per));
    }
    std::thread::scope(|s| {
        for p in parts {
            s.spawn(move || drop(p));
        }
        drop(items);
        drop(rest);
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order() {
        let v: Vec<u32> = (0..1000).collect();
        for t in [1, 2, 3, 7, 33, 2000] {
            assert_eq!(
                super::par_map(&v, t, |x| x * 2),
                v.iter().map(|x| x * 2).collect::<Vec<_>>()
            );
        }
        assert!(super::par_map(&Vec::<u32>::new(), 4, |x| *x).is_empty());
        // Every element dropped once, whatever the split.
        for (n, t) in [(0, 3), (1, 2), (7, 3), (100, 2), (101, 4)] {
            let counter = std::sync::Arc::new(());
            let v: Vec<_> = (0..n).map(|_| counter.clone()).collect();
            super::par_drop(v, t, counter.clone());
            assert_eq!(
                std::sync::Arc::strong_count(&counter),
                1,
                "n {n} threads {t}"
            );
        }
        // Every length around the chunk boundaries, against the sequential map.
        for n in 0..140u32 {
            let v: Vec<u32> = (0..n).collect();
            for t in 1..6 {
                assert_eq!(
                    super::par_map(&v, t, |x| x + 1),
                    v.iter().map(|x| x + 1).collect::<Vec<_>>(),
                    "n {n} threads {t}"
                );
            }
        }
    }
}
