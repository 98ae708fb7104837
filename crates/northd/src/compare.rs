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

/// A flow without its datapaths: (stage, priority, match, actions).
pub type FlowText = (Stage, u16, String, String);

/// The logical flows an SB holds, one entry per flow with the names of the datapaths it is
/// on (its own datapath or its datapath group's; rows of the same flow united), read from a
/// replica of the SB — not expanded per datapath as `lflow-list` prints them, so an 800-node
/// dense SB (223k rows, millions of (flow, datapath) pairs) fits in memory. Tunnel keys in
/// matches (`$_rtr_lb_<key>_…`: each northd assigns its own) are replaced by their
/// datapaths' names. A row whose stage or datapath cannot be read is an error.
pub fn sb_flows(sb: &ovsdb::Database) -> Result<BTreeMap<FlowText, BTreeSet<String>>, String> {
    let dp_name = |u: ovsdb::Uuid| -> Result<String, String> {
        sb.row("Datapath_Binding", u)
            .and_then(|r| r.map_get("external_ids", "name"))
            .map(str::to_owned)
            .ok_or_else(|| format!("datapath {u} has no name"))
    };
    let by_key = datapath_names_by_key(sb);
    let mut out: BTreeMap<FlowText, BTreeSet<String>> = BTreeMap::new();
    for (u, r) in &sb.table("Logical_Flow").rows {
        let name = r.map_get("external_ids", "stage-name").unwrap_or("");
        let stage =
            Stage::from_name(name).ok_or_else(|| format!("flow {u}: unknown stage {name:?}"))?;
        let priority = r
            .int("priority")
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| format!("flow {u}: bad priority"))?;
        let key = (
            stage,
            priority,
            tunnel_keys_to_names(r.str("match"), &by_key),
            r.str("actions").to_owned(),
        );
        let dps = out.entry(key).or_default();
        for d in r.uuids("logical_datapath") {
            dps.insert(dp_name(d)?);
        }
        for g in r.uuids("logical_dp_group") {
            let group = sb
                .row("Logical_DP_Group", g)
                .ok_or_else(|| format!("flow {u}: no datapath group {g}"))?;
            for d in group.uuids("datapaths") {
                dps.insert(dp_name(d)?);
            }
        }
    }
    Ok(out)
}

/// The SB's datapath names by tunnel key (for [`tunnel_keys_to_names`]).
pub fn datapath_names_by_key(sb: &ovsdb::Database) -> std::collections::HashMap<i64, String> {
    sb.table("Datapath_Binding")
        .rows
        .values()
        .filter_map(|r| {
            Some((
                r.int("tunnel_key")?,
                r.map_get("external_ids", "name")?.to_owned(),
            ))
        })
        .collect()
}

/// `$_rtr_lb_<key>_` in `m` rewritten to `$_rtr_lb_<datapath name>_` (keys `names` lacks
/// are left as they are).
pub fn tunnel_keys_to_names(m: &str, names: &std::collections::HashMap<i64, String>) -> String {
    let mut out = String::with_capacity(m.len());
    let mut rest = m;
    while let Some(i) = rest.find("$_rtr_lb_") {
        out.push_str(&rest[..i + 9]);
        rest = &rest[i + 9..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits]
            .parse::<i64>()
            .ok()
            .and_then(|k| names.get(&k))
        {
            Some(n) => out.push_str(n),
            None => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// [`diff`] of two grouped flow sets ([`sb_flows`]): a (flow, datapath) pair only one side
/// has is listed as a [`TextFlow`]; pairs both have are counted.
pub fn diff_grouped(
    ours: &BTreeMap<FlowText, BTreeSet<String>>,
    theirs: &BTreeMap<FlowText, BTreeSet<String>>,
) -> BTreeMap<Stage, StageDiff> {
    let empty = BTreeSet::new();
    let text = |k: &FlowText, dp: &str| TextFlow {
        dp: dp.to_owned(),
        stage: k.0,
        priority: k.1,
        match_: k.2.clone(),
        actions: k.3.clone(),
    };
    let mut out: BTreeMap<Stage, StageDiff> = BTreeMap::new();
    let keys: BTreeSet<&FlowText> = ours.keys().chain(theirs.keys()).collect();
    for k in keys {
        let a = ours.get(k).unwrap_or(&empty);
        let b = theirs.get(k).unwrap_or(&empty);
        let d = out.entry(k.0).or_default();
        d.same += a.intersection(b).count();
        d.only_ours.extend(a.difference(b).map(|dp| text(k, dp)));
        d.only_theirs.extend(b.difference(a).map(|dp| text(k, dp)));
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
