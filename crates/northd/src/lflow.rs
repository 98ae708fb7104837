//! Logical flows: what northd produces. A flow is (datapaths, stage, priority, match,
//! actions); the same flow on several datapaths is one flow with a datapath group, as in
//! the SB (`Logical_DP_Group`), so a load balancer applied to 800 switches costs one flow,
//! not 800.

use crate::stage::Stage;
use std::collections::hash_map::Entry;
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
/// FxHash: the keys are our own flow text, not attacker-chosen, and SipHash cost a fifth of
/// a recompute.
pub type MergeMap = rustc_hash::FxHashMap<(Stage, u16, String, String), Vec<DpId>>;

/// Adds built flows to a merge map: equal flows (same stage, priority, match, actions) share
/// one entry and their datapaths are collected.
pub fn merge_into(map: &mut MergeMap, v: Vec<Lflow>) {
    for f in v {
        merge_one(map, f);
    }
}

/// Adds one built flow to a merge map.
pub fn merge_one(map: &mut MergeMap, f: Lflow) {
    let dps = f.dps;
    match map.entry((f.stage, f.priority, f.match_, f.actions)) {
        Entry::Occupied(mut e) => e.get_mut().extend_from_slice(dps.as_slice()),
        Entry::Vacant(e) => {
            e.insert(dps.as_slice().to_vec());
        }
    }
}

/// Merges `b` into `a`.
pub fn merge_maps(a: &mut MergeMap, b: MergeMap) {
    for (k, dps) in b {
        match a.entry(k) {
            Entry::Occupied(mut e) => e.get_mut().extend(dps),
            Entry::Vacant(e) => {
                e.insert(dps);
            }
        }
    }
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

/// Which of `n` shards a flow key goes to: the same on every thread.
pub fn shard_of(stage: Stage, priority: u16, match_: &str, actions: &str, n: usize) -> usize {
    // FNV-1a over the key: cheap, fixed (no per-process seed), good enough to spread keys.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in [stage as u8, (priority >> 8) as u8, priority as u8]
        .into_iter()
        .chain(match_.bytes())
        .chain(actions.bytes())
    {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % n as u64) as usize
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
    let mut map = MergeMap::with_capacity_and_hasher(v.len() / 4, Default::default());
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
