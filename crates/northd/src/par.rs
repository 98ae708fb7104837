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
    par_map_with(items, threads, || (), f).1
}

/// [`par_map`] beside one other task: `first` runs on one of the threads, which then joins
/// the map, so the threads share the map's chunks whatever `first` costs. Returns `first`'s
/// result and the map's.
pub fn par_map_with<T: Sync, R: Send, A: Send>(
    items: &[T],
    threads: usize,
    first: impl FnOnce() -> A + Send,
    f: impl Fn(&T) -> R + Sync,
) -> (A, Vec<R>) {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return (first(), items.iter().map(f).collect());
    }
    let chunk = (items.len() / (threads * 16)).max(1);
    let n_chunks = items.len().div_ceil(chunk);
    let cursor = AtomicUsize::new(0);
    let work = || {
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
    };
    let (a, parts) = std::thread::scope(|s| {
        let h0 = s.spawn(|| {
            let a = first();
            (a, work())
        });
        let hs: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        fn join<X>(h: std::thread::ScopedJoinHandle<'_, X>) -> X {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        }
        let (a, p0) = join(h0);
        let mut parts = vec![p0];
        parts.extend(hs.into_iter().map(join));
        (a, parts)
    });
    let mut all: Vec<(usize, Vec<R>)> = parts.into_iter().flatten().collect();
    all.sort_unstable_by_key(|(c, _)| *c);
    (a, all.into_iter().flat_map(|(_, v)| v).collect())
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
        for t in [1, 2, 3] {
            let (a, v) = super::par_map_with(&(0..500u32).collect::<Vec<_>>(), t, || 7, |x| x + 1);
            assert_eq!((a, v), (7, (1..501).collect::<Vec<_>>()), "threads {t}");
        }
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
