//! Bucket liveness as a search of the watch graph.
//!
//! OVS decides whether a bucket is live by recursion (`bucket_is_alive` →
//! `group_is_alive` → `group_first_live_bucket` → `bucket_is_alive` …), cut at
//! `MAX_LIVENESS_RECURSION` (128) links. The recursion re-walks every path: groups whose
//! buckets watch each other (two dead buckets watching their own group are enough) make it
//! take 2^128 steps — real OVS spins in its handler thread on such a configuration, which a
//! controller can install. The question it answers is simpler than the walk: a group asked
//! at depth `d` has a live bucket exactly when some group `k` watch links away (`d + k <
//! limit`) has a bucket that is live on its own (no watch, or a watched port that is up) and
//! is usable (not a weight-0 bucket of a `select` group, which OVS refuses before it looks
//! at its watches). A breadth-first search answers that in time linear in the groups it
//! reaches; [`super::Ctx`] runs OVS's walk first (it reports each dead bucket in a trace)
//! under a step budget and asks this search when the budget runs out.

use std::collections::HashSet;

/// What liveness needs to know of one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BucketLife {
    /// Usable and live without its watched group: no watch at all, or a watched port that
    /// is up. False for a weight-0 bucket of a `select` group.
    pub(super) live_alone: bool,
    /// The group it watches, when it watches one and is usable.
    pub(super) watch_group: Option<u32>,
}

/// Whether group `start`, asked at liveness depth `depth`, has a live bucket when chains
/// are cut at `limit` links: OVS's `group_is_alive(start, depth)` without its exponential
/// walk. `buckets(id)` gives a group's buckets, `None` when there is no such group (a
/// missing group is not alive).
pub(super) fn group_reaches_live<F, I>(start: u32, depth: u32, limit: u32, mut buckets: F) -> bool
where
    F: FnMut(u32) -> Option<I>,
    I: IntoIterator<Item = BucketLife>,
{
    let mut seen = HashSet::from([start]);
    let mut level = vec![start];
    let mut d = depth;
    // Every group of `level` is first reached `d - depth` links from `start`: its buckets
    // are asked at depth `d`, and OVS answers "not live" from `limit` on.
    while d < limit && !level.is_empty() {
        let mut next = Vec::new();
        for id in level {
            let Some(bs) = buckets(id) else { continue };
            for b in bs {
                if b.live_alone {
                    return true;
                }
                if let Some(w) = b.watch_group
                    && seen.insert(w)
                {
                    next.push(w);
                }
            }
        }
        level = next;
        d += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// OVS's recursion, literally (exponential: small limits only).
    fn alive_recursive(groups: &[Vec<BucketLife>], id: u32, depth: u32, limit: u32) -> bool {
        let Some(bs) = groups.get(id as usize) else {
            return false;
        };
        bs.iter().any(|b| {
            depth < limit
                && (b.live_alone
                    || b.watch_group
                        .is_some_and(|w| alive_recursive(groups, w, depth + 1, limit)))
        })
    }

    fn graph() -> impl Strategy<Value = Vec<Vec<BucketLife>>> {
        // Up to 6 groups, ids up to 7 (6 and 7 may be missing), mostly dead buckets.
        prop::collection::vec(
            prop::collection::vec(
                (
                    prop::bool::weighted(0.1),
                    prop::option::weighted(0.8, 0u32..8),
                )
                    .prop_map(|(live_alone, watch_group)| BucketLife {
                        live_alone,
                        watch_group,
                    }),
                0..4,
            ),
            1..7,
        )
    }

    proptest! {
        #[test]
        fn search_equals_ovs_recursion(g in graph(), start in 0u32..8, depth in 0u32..6, limit in 0u32..9) {
            let want = alive_recursive(&g, start, depth, limit);
            let got = group_reaches_live(start, depth, limit, |id| {
                g.get(id as usize).map(|bs| bs.iter().copied())
            });
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn self_watching_dead_buckets_end_at_once() {
        // Two dead buckets watching their own group: 2^128 steps for the recursion.
        let dead = BucketLife {
            live_alone: false,
            watch_group: Some(0),
        };
        let g = [vec![dead, dead]];
        assert!(!group_reaches_live(0, 0, 128, |id| g
            .get(id as usize)
            .map(|bs| bs.iter().copied())));
    }
}
