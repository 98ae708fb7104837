//! `ovn-sbctl lflow-list` text: printing ours and reading ovn-northd's (for comparison).

use crate::build::Ctx;
use crate::lflow::{DpId, Lflow};
use crate::stage::{Pipeline, Stage};
use std::fmt::Write;

/// Prints flows as `ovn-sbctl lflow-list` does: datapaths by name (then id), ingress before
/// egress, tables ascending, priorities descending, then match and actions.
pub fn lflow_list(ctx: &Ctx, flows: &[Lflow]) -> String {
    let mut v: Vec<(DpId, &Lflow)> = flows
        .iter()
        .flat_map(|f| f.dps.as_slice().iter().map(move |&d| (d, f)))
        .collect();
    let sort_key = |(d, f): &(DpId, &Lflow)| {
        let dp = &ctx.datapaths[d.0 as usize];
        (
            dp.name.clone(),
            dp.uuid,
            f.stage.pipeline(),
            f.stage.table(),
            std::cmp::Reverse(f.priority),
        )
    };
    v.sort_by(|a, b| {
        sort_key(a)
            .cmp(&sort_key(b))
            .then_with(|| (&a.1.match_, &a.1.actions).cmp(&(&b.1.match_, &b.1.actions)))
    });
    let mut s = String::new();
    let mut cur: Option<(u32, Pipeline)> = None;
    for (dp, f) in v {
        let key = (dp.0, f.stage.pipeline());
        if cur != Some(key) {
            let d = &ctx.datapaths[dp.0 as usize];
            let _ = writeln!(
                s,
                "Datapath: \"{}\" ({})  Pipeline: {}",
                d.name,
                d.uuid,
                f.stage.pipeline().name()
            );
            cur = Some(key);
        }
        let _ = writeln!(
            s,
            "  table={:<2}({:<19}), priority={:<5}, match=({}), action=({})",
            f.stage.table(),
            f.stage.name(),
            f.priority,
            f.match_,
            f.actions
        );
    }
    s
}

/// One flow read back from `lflow-list` text, with its datapath by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TextFlow {
    /// Datapath name.
    pub dp: String,
    /// Stage.
    pub stage: Stage,
    /// Priority.
    pub priority: u16,
    /// Match.
    pub match_: String,
    /// Actions.
    pub actions: String,
}

/// Reads `lflow-list` output. Lines that do not parse are returned as errors (line number
/// and text) rather than dropped.
pub fn parse_lflow_list(text: &str) -> Result<Vec<TextFlow>, String> {
    let mut out = Vec::new();
    let mut dp = String::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("Datapath: \"") {
            dp = rest.split('"').next().unwrap_or("").to_owned();
            continue;
        }
        let l = line.trim_start();
        if l.is_empty() {
            continue;
        }
        let bad = || format!("line {}: cannot read {line:?}", i + 1);
        let after_table = l.strip_prefix("table=").ok_or_else(bad)?;
        let open = after_table.find('(').ok_or_else(bad)?;
        let close = after_table.find(')').ok_or_else(bad)?;
        let stage = Stage::from_name(after_table[open + 1..close].trim()).ok_or_else(bad)?;
        let rest = &after_table[close + 1..];
        let p = rest.find("priority=").ok_or_else(bad)? + "priority=".len();
        let pend = rest[p..].find(',').ok_or_else(bad)? + p;
        let priority: u16 = rest[p..pend].trim().parse().map_err(|_| bad())?;
        let m = rest.find(", match=(").ok_or_else(bad)? + ", match=(".len();
        let a = rest.rfind("), action=(").ok_or_else(bad)?;
        let match_ = rest[m..a].to_owned();
        let actions = rest[a + "), action=(".len()..]
            .strip_suffix(')')
            .ok_or_else(bad)?
            .to_owned();
        out.push(TextFlow {
            dp: dp.clone(),
            stage,
            priority,
            match_,
            actions,
        });
    }
    Ok(out)
}

/// Our flows as [`TextFlow`]s (datapaths by name).
pub fn to_text_flows(ctx: &Ctx, flows: &[Lflow]) -> Vec<TextFlow> {
    flows
        .iter()
        .flat_map(|f| {
            f.dps.as_slice().iter().map(move |d| TextFlow {
                dp: ctx.datapaths[d.0 as usize].name.clone(),
                stage: f.stage,
                priority: f.priority,
                match_: f.match_.clone(),
                actions: f.actions.clone(),
            })
        })
        .collect()
}
