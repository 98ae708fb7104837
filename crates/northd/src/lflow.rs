//! Logical flows: what northd produces. A flow is (datapaths, stage, priority, match,
//! actions); the same flow on several datapaths is one flow with a datapath group, as in
//! the SB (`Logical_DP_Group`), so a load balancer applied to 800 switches costs one flow,
//! not 800.

use crate::stage::Stage;
use std::sync::Arc;

/// Index of a datapath in [`crate::build::Ctx::datapaths`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DpId(pub u32);

/// The datapaths a flow is on: one, or a group (sorted, no duplicates, at least two).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dps {
    /// One datapath.
    One(DpId),
    /// A datapath group.
    Group(Arc<[DpId]>),
}

impl Dps {
    /// The datapaths, in order.
    pub fn as_slice(&self) -> &[DpId] {
        match self {
            Dps::One(d) => std::slice::from_ref(d),
            Dps::Group(g) => g,
        }
    }

    /// Makes a `Dps` from sorted, deduplicated datapaths (`None` when empty).
    pub fn from_sorted(v: Vec<DpId>) -> Option<Dps> {
        match v.len() {
            0 => None,
            1 => Some(Dps::One(v[0])),
            _ => Some(Dps::Group(v.into())),
        }
    }
}

/// One logical flow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lflow {
    /// Stage (gives pipeline and table).
    pub stage: Stage,
    /// Priority (0–65535).
    pub priority: u16,
    /// Match expression text, as ovn-northd writes it.
    pub match_: String,
    /// Actions text, as ovn-northd writes it.
    pub actions: String,
    /// Datapaths.
    pub dps: Dps,
}

impl Lflow {
    /// Everything but the datapaths: what makes two flows the same flow.
    pub fn key(&self) -> (Stage, u16, &str, &str) {
        (self.stage, self.priority, &self.match_, &self.actions)
    }
}

/// Where a builder puts flows: one datapath's, or a datapath group's (a load balancer's
/// flows on every datapath of a class that applies it).
#[derive(Debug)]
pub struct Sink<'a> {
    dps: Dps,
    out: &'a mut Vec<Lflow>,
}

impl<'a> Sink<'a> {
    /// A sink adding flows for `dp` to `out`.
    pub fn new(dp: DpId, out: &'a mut Vec<Lflow>) -> Self {
        Sink {
            dps: Dps::One(dp),
            out,
        }
    }

    /// A sink adding flows for every datapath of `dps` to `out`.
    pub fn group(dps: Dps, out: &'a mut Vec<Lflow>) -> Self {
        Sink { dps, out }
    }

    /// The (first) datapath flows go to.
    pub fn dp(&self) -> DpId {
        self.dps.as_slice()[0]
    }

    /// Adds one flow.
    pub fn add(
        &mut self,
        stage: Stage,
        priority: u16,
        match_: impl Into<String>,
        actions: impl Into<String>,
    ) {
        self.out.push(Lflow {
            stage,
            priority,
            match_: match_.into(),
            actions: actions.into(),
            dps: self.dps.clone(),
        });
    }
}

/// Flows being merged: (stage, priority, match, actions) → datapaths (unsorted, may repeat).
///
/// Each entry keeps its key's hash, computed once when the flow is built: the same hash
/// picks the flow's shard in a parallel build ([`flow_hash`], [`shard_of_hash`]), finds its
/// slot here, and moves it when the table grows or when one thread's table is merged into
/// another's — the flow text (often 100–300 bytes) is hashed once, not three or four times.
/// FxHash: the keys are our own flow text, not attacker-chosen, and SipHash cost a fifth of
/// a recompute.
#[derive(Debug, Default)]
pub struct MergeMap(hashbrown::HashTable<MergeEntry>);

/// One key of a [`MergeMap`] with its hash and datapaths.
#[derive(Debug)]
pub struct MergeEntry {
    hash: u64,
    key: FlowKey,
    dps: Vec<DpId>,
}

impl MergeMap {
    /// An empty map with room for `n` keys.
    pub fn with_capacity(n: usize) -> Self {
        MergeMap(hashbrown::HashTable::with_capacity(n))
    }

    /// Number of distinct keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no flow was added.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds one built flow whose [`flow_hash`] is `hash`; returns true when its key is new.
    pub fn merge_hashed(&mut self, hash: u64, f: Lflow) -> bool {
        let eq = |e: &MergeEntry| {
            e.hash == hash
                && e.key.0 == f.stage
                && e.key.1 == f.priority
                && e.key.2 == f.match_
                && e.key.3 == f.actions
        };
        match self.0.entry(hash, eq, |e| e.hash) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                e.get_mut().dps.extend_from_slice(f.dps.as_slice());
                false
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(MergeEntry {
                    hash,
                    dps: f.dps.as_slice().to_vec(),
                    key: (f.stage, f.priority, f.match_, f.actions),
                });
                true
            }
        }
    }

    /// Moves every entry of `b` into `self`, uniting the datapaths of equal keys (no key is
    /// hashed again).
    pub fn absorb(&mut self, b: MergeMap) {
        if self.0.is_empty() {
            *self = b;
            return;
        }
        self.0.reserve(b.0.len(), |e| e.hash);
        for e in b.0 {
            match self
                .0
                .entry(e.hash, |x| x.hash == e.hash && x.key == e.key, |x| x.hash)
            {
                hashbrown::hash_table::Entry::Occupied(mut o) => o.get_mut().dps.extend(e.dps),
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert(e);
                }
            }
        }
    }
}

impl IntoIterator for MergeMap {
    type Item = (FlowKey, Vec<DpId>);
    type IntoIter = std::iter::Map<
        hashbrown::hash_table::IntoIter<MergeEntry>,
        fn(MergeEntry) -> (FlowKey, Vec<DpId>),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().map(|e| (e.key, e.dps))
    }
}

/// The hash of a flow's key (everything but its datapaths): what [`MergeMap`] and the
/// parallel build's sharding use. Fixed across threads and runs (no per-process seed).
pub fn flow_hash(stage: Stage, priority: u16, match_: &str, actions: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one((stage, priority, match_, actions))
}

/// Which of `n` shards a flow with [`flow_hash`] `hash` goes to: the same on every thread.
/// Uses the hash's middle bits, which the hash table's slot index (low bits) and control
/// byte (top 7 bits) do not, so a shard's table still spreads its keys over all slots.
pub fn shard_of_hash(hash: u64, n: usize) -> usize {
    (((hash >> 24) & 0xff_ffff) as usize) % n.max(1)
}

/// Adds built flows to a merge map: equal flows (same stage, priority, match, actions) share
/// one entry and their datapaths are collected.
pub fn merge_into(map: &mut MergeMap, v: Vec<Lflow>) {
    for f in v {
        merge_one(map, f);
    }
}

/// Adds one built flow to a merge map.
pub fn merge_one(map: &mut MergeMap, f: Lflow) {
    let h = flow_hash(f.stage, f.priority, &f.match_, &f.actions);
    map.merge_hashed(h, f);
}

/// A flow's key: everything but its datapaths.
pub type FlowKey = (Stage, u16, String, String);

/// A flow that several items put on the same datapath: (flow, datapath, how many items).
/// An incremental engine needs the count to know when the last item producing it is gone.
pub type Dup = (FlowKey, DpId, u32);

/// The merged flows of a table, one per key on the union of its datapaths (sorted); in any
/// order.
pub fn finish_unordered(map: MergeMap) -> Vec<Lflow> {
    finish_unordered_dups(map, None)
}

/// Datapath groups already made, so that flows on the same datapaths share one list (a
/// group of 800 switches is 3.2 KB; thousands of flows are on one of a few groups).
#[derive(Debug, Default)]
pub struct Groups(rustc_hash::FxHashSet<Arc<[DpId]>>);

impl Groups {
    /// [`Dps::from_sorted`], sharing the list with an equal group made before.
    pub fn dps(&mut self, v: Vec<DpId>) -> Option<Dps> {
        if v.len() < 2 {
            return Dps::from_sorted(v);
        }
        if let Some(g) = self.0.get(v.as_slice()) {
            return Some(Dps::Group(g.clone()));
        }
        let g: Arc<[DpId]> = v.into();
        self.0.insert(g.clone());
        Some(Dps::Group(g))
    }
}

/// [`finish_unordered`], also appending to `dups` (when given) every (flow, datapath) that
/// more than one item contributed, with its count.
pub fn finish_unordered_dups(map: MergeMap, dups: Option<&mut Vec<Dup>>) -> Vec<Lflow> {
    finish_shared(map, dups, &mut Groups::default())
}

/// [`finish_unordered_dups`], sharing datapath groups through `groups`.
pub fn finish_shared(
    map: MergeMap,
    mut dups: Option<&mut Vec<Dup>>,
    groups: &mut Groups,
) -> Vec<Lflow> {
    map.into_iter()
        .filter_map(|(key, mut dps)| {
            dps.sort_unstable();
            let n = dps.len();
            if let Some(d) = dups.as_deref_mut()
                && n > 1
            {
                // Runs of one datapath in the sorted list are items that made the same flow.
                let mut at = 0;
                while at < n {
                    let run = dps[at..].iter().take_while(|&&x| x == dps[at]).count();
                    if run > 1 {
                        d.push((key.clone(), dps[at], run as u32));
                    }
                    at += run;
                }
            }
            dps.dedup();
            let (stage, priority, match_, actions) = key;
            Some(Lflow {
                stage,
                priority,
                match_,
                actions,
                dps: groups.dps(dps)?,
            })
        })
        .collect()
}

/// The result of a merge map: one flow per key on the union of its datapaths, sorted by
/// key.
pub fn finish(map: MergeMap) -> Vec<Lflow> {
    let mut out = finish_unordered(map);
    out.sort_unstable_by(|a, b| a.key().cmp(&b.key()));
    out
}

/// Turns built flows into the result: one flow per (stage, priority, match, actions), on
/// the union of the datapaths it was built for; sorted by that key.
pub fn merge_same(v: Vec<Lflow>) -> Vec<Lflow> {
    let mut map = MergeMap::with_capacity(v.len() / 4);
    merge_into(&mut map, v);
    finish(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(dps: &[u32], p: u16, m: &str) -> Lflow {
        let v: Vec<DpId> = dps.iter().map(|&d| DpId(d)).collect();
        Lflow {
            stage: Stage::LsInAcl,
            priority: p,
            match_: m.into(),
            actions: "next;".into(),
            dps: Dps::from_sorted(v).unwrap(),
        }
    }

    #[test]
    fn merge_unions_datapaths_of_the_same_flow() {
        let got = merge_same(vec![
            f(&[3], 1, "a"),
            f(&[1, 2], 1, "a"),
            f(&[2], 1, "a"),
            f(&[0], 2, "b"),
        ]);
        assert_eq!(got, vec![f(&[1, 2, 3], 1, "a"), f(&[0], 2, "b")]);
    }

    proptest::proptest! {
        /// `merge_same` against the obvious model: a sorted map from key to datapath set.
        #[test]
        fn merge_equals_model(v in proptest::collection::vec((0u32..6, 0u16..3, 0u8..3, proptest::collection::vec(0u32..5, 1..4)), 0..60)) {
            let flows: Vec<Lflow> = v.iter().map(|(st, p, m, d)| {
                let mut d: Vec<DpId> = d.iter().map(|&x| DpId(x)).collect();
                d.sort_unstable();
                d.dedup();
                Lflow { stage: Stage::ALL[*st as usize], priority: *p, match_: format!("m{m}"), actions: "next;".into(), dps: Dps::from_sorted(d).unwrap() }
            }).collect();
            let mut model: std::collections::BTreeMap<(Stage, u16, String, String), std::collections::BTreeSet<DpId>> = Default::default();
            for f in &flows {
                model.entry((f.stage, f.priority, f.match_.clone(), f.actions.clone())).or_default().extend(f.dps.as_slice());
            }
            let want: Vec<Lflow> = model.into_iter().map(|((stage, priority, match_, actions), d)| Lflow {
                stage, priority, match_, actions, dps: Dps::from_sorted(d.into_iter().collect()).unwrap()
            }).collect();
            proptest::prop_assert_eq!(merge_same(flows), want);
        }
    }
}
