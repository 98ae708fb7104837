//! Comparing our logical flows with ovn-northd's, stage by stage.

use crate::output::TextFlow;
use crate::stage::Stage;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The difference in one stage.
#[derive(Debug, Clone, Default)]
pub struct StageDiff {
    /// Flows both have.
    pub same: usize,
    /// Flows only we produce.
    pub only_ours: Vec<TextFlow>,
    /// Flows only ovn-northd produces.
    pub only_theirs: Vec<TextFlow>,
}

/// Compares two flow sets (duplicates count once, as in the SB).
pub fn diff(ours: &[TextFlow], theirs: &[TextFlow]) -> BTreeMap<Stage, StageDiff> {
    let a: BTreeSet<&TextFlow> = ours.iter().collect();
    let b: BTreeSet<&TextFlow> = theirs.iter().collect();
    let mut out: BTreeMap<Stage, StageDiff> = BTreeMap::new();
    for f in &a {
        let d = out.entry(f.stage).or_default();
        if b.contains(f) {
            d.same += 1;
        } else {
            d.only_ours.push((*f).clone());
        }
    }
    for f in &b {
        if !a.contains(f) {
            out.entry(f.stage)
                .or_default()
                .only_theirs
                .push((*f).clone());
        }
    }
    out
}

/// True when no stage differs.
pub fn is_equal(d: &BTreeMap<Stage, StageDiff>) -> bool {
    d.values()
        .all(|s| s.only_ours.is_empty() && s.only_theirs.is_empty())
}

/// A report: one line per stage (same / only ours / only theirs), then up to `examples`
/// differing flows per stage.
pub fn report(d: &BTreeMap<Stage, StageDiff>, examples: usize) -> String {
    let mut s = String::new();
    let (mut same, mut ours, mut theirs) = (0, 0, 0);
    for (st, x) in d {
        same += x.same;
        ours += x.only_ours.len();
        theirs += x.only_theirs.len();
        let mark = if x.only_ours.is_empty() && x.only_theirs.is_empty() {
            "ok "
        } else {
            "DIFF"
        };
        let _ = writeln!(
            s,
            "{mark} {:<24} same {:>7}  only ours {:>6}  only ovn-northd {:>6}",
            st.name(),
            x.same,
            x.only_ours.len(),
            x.only_theirs.len()
        );
    }
    let _ = writeln!(
        s,
        "total: same {same}, only ours {ours}, only ovn-northd {theirs}"
    );
    if examples > 0 {
        for (st, x) in d {
            for f in x.only_ours.iter().take(examples) {
                let _ = writeln!(
                    s,
                    "+ {} {} {} match=({}) action=({})",
                    f.dp,
                    st.name(),
                    f.priority,
                    f.match_,
                    f.actions
                );
            }
            for f in x.only_theirs.iter().take(examples) {
                let _ = writeln!(
                    s,
                    "- {} {} {} match=({}) action=({})",
                    f.dp,
                    st.name(),
                    f.priority,
                    f.match_,
                    f.actions
                );
            }
        }
    }
    s
}
