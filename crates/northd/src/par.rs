//! A small ordered parallel map over a slice (scoped threads, contiguous chunks), for the
//! model and SB passes that run before and after the item build.

/// `items.iter().map(f).collect()`, computed by up to `threads` threads; order kept.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let hs: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order() {
        let v: Vec<u32> = (0..1000).collect();
        for t in [1, 2, 3, 7, 2000] {
            assert_eq!(
                super::par_map(&v, t, |x| x * 2),
                v.iter().map(|x| x * 2).collect::<Vec<_>>()
            );
        }
        assert!(super::par_map(&Vec::<u32>::new(), 4, |x| *x).is_empty());
    }
}
