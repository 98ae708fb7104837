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

/// Turns built flows into the result: one flow per (stage, priority, match, actions), on
/// the union of the datapaths it was built for; sorted by that key.
pub fn merge_same(mut v: Vec<Lflow>) -> Vec<Lflow> {
    // Stable sort: per-thread runs arrive already sorted and it merges runs cheaply.
    v.sort_by(|a, b| a.key().cmp(&b.key()));
    let mut out: Vec<Lflow> = Vec::with_capacity(v.len());
    let mut pending: Vec<DpId> = Vec::new();
    for f in v {
        match out.last_mut() {
            Some(last) if last.key() == f.key() => {
                if pending.is_empty() {
                    pending.extend_from_slice(last.dps.as_slice());
                }
                pending.extend_from_slice(f.dps.as_slice());
            }
            _ => {
                flush(&mut out, &mut pending);
                out.push(f);
            }
        }
    }
    flush(&mut out, &mut pending);
    out
}

fn flush(out: &mut [Lflow], pending: &mut Vec<DpId>) {
    if pending.is_empty() {
        return;
    }
    pending.sort_unstable();
    pending.dedup();
    if let (Some(last), Some(d)) = (out.last_mut(), Dps::from_sorted(std::mem::take(pending))) {
        last.dps = d;
    }
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
}
