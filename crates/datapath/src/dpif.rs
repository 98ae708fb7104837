//! The datapath's flow table over all its PMDs (OVS `dpif-netdev`'s flow API): classifiers
//! are per PMD, as in OVS, so the same megaflow (same ufid) may be installed in several of
//! them, each with its own counters written by its own PMD. This view puts, gets, deletes,
//! flushes and dumps across them:
//!
//! - a put or delete naming a PMD goes to that PMD's classifier; naming none, to all (OVS
//!   `PMD_ID_NULL`);
//! - a get or a dump reports each ufid once, its stats the per-PMD counters summed on read
//!   (packets and bytes added, `used` the latest, TCP flags or-ed): the counters stay
//!   per PMD and per flow, nothing is allocated per CPU per flow;
//! - a dump walks each classifier's published snapshot without a lock ([`Dpcls::dump`]) and
//!   merges by ufid (a sort of the collected lines when there is more than one PMD).
//!
//! Errors are [`FlowError`]s (a PMD id that is not here: [`FlowError::NoSuchPmd`]).

use std::sync::Arc;

use flow::{FlowKey, FlowMask};

use crate::action_table::ActionSet;
use crate::dpcls::{Dpcls, FlowError, FlowPut, PutOutcome, TerseFlow};
use crate::megaflow::{ActionsId, DpFlow, FlowStatsSnapshot, Ufid};

/// One flow as the datapath reports it: its megaflow, actions and stats summed over PMDs.
#[derive(Debug, Clone)]
pub struct DpFlowInfo {
    /// The flow's id.
    pub ufid: Ufid,
    /// The masked key.
    pub key: FlowKey,
    /// The mask.
    pub mask: FlowMask,
    /// Its actions id (of the first PMD that has it).
    pub actions: ActionsId,
    /// Its action set, if it was installed with one.
    pub action_set: Option<Arc<ActionSet>>,
    /// Counters summed over PMDs.
    pub stats: FlowStatsSnapshot,
    /// PMDs that have the flow.
    pub pmds: u32,
}

impl DpFlowInfo {
    fn of(f: &DpFlow) -> DpFlowInfo {
        DpFlowInfo {
            ufid: f.ufid,
            key: f.key,
            mask: f.mask,
            actions: f.actions(),
            action_set: f.action_set(),
            stats: f.stats.snapshot(),
            pmds: 1,
        }
    }
}

/// `a` and `b` merged: counts added, the latest `used`, flags or-ed.
pub fn sum_stats(a: FlowStatsSnapshot, b: FlowStatsSnapshot) -> FlowStatsSnapshot {
    FlowStatsSnapshot {
        packets: a.packets.wrapping_add(b.packets),
        bytes: a.bytes.wrapping_add(b.bytes),
        used: a.used.max(b.used),
        tcp_flags: a.tcp_flags | b.tcp_flags,
    }
}

/// The flow tables of a datapath's PMDs, by core id.
#[derive(Debug, Clone, Default)]
pub struct DpifFlows {
    pmds: Vec<(u32, Arc<Dpcls>)>,
}

impl DpifFlows {
    /// A view over `pmds` (core id, that PMD's classifier).
    pub fn new(pmds: Vec<(u32, Arc<Dpcls>)>) -> DpifFlows {
        DpifFlows { pmds }
    }

    /// The PMDs, in order.
    pub fn pmds(&self) -> &[(u32, Arc<Dpcls>)] {
        &self.pmds
    }

    fn targets(&self, pmd: Option<u32>) -> Result<Vec<&Arc<Dpcls>>, FlowError> {
        match pmd {
            None => Ok(self.pmds.iter().map(|(_, c)| c).collect()),
            Some(core) => self
                .pmds
                .iter()
                .find(|(c, _)| *c == core)
                .map(|(_, c)| vec![c])
                .ok_or(FlowError::NoSuchPmd(core)),
        }
    }

    /// Puts to the named PMD, or to every PMD. With several PMDs every one is tried; the
    /// first error (if any) is returned after all were tried, so one PMD's refusal (e.g. a
    /// create where that PMD has the flow) does not keep the others from the put.
    pub fn put(&self, pmd: Option<u32>, put: &FlowPut) -> Result<Vec<PutOutcome>, FlowError> {
        crate::dpcls::api::check_mask(&put.mask)?;
        let mut done = Vec::new();
        let mut err = None;
        for c in self.targets(pmd)? {
            match c.put(put) {
                Ok(o) => done.push(o),
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// The flow `ufid`, its stats summed over the PMDs that have it.
    pub fn get(&self, ufid: Ufid) -> Result<DpFlowInfo, FlowError> {
        let mut out: Option<DpFlowInfo> = None;
        for (_, c) in &self.pmds {
            if let Some(f) = c.get(ufid) {
                match &mut out {
                    None => out = Some(DpFlowInfo::of(&f)),
                    Some(o) => {
                        o.stats = sum_stats(o.stats, f.stats.snapshot());
                        o.pmds += 1;
                    }
                }
            }
        }
        out.ok_or(FlowError::NotFound(ufid))
    }

    /// Deletes `ufid` from the named PMD or from all; returns its last stats summed over the
    /// PMDs it was deleted from ([`FlowError::NotFound`] if none had it).
    pub fn del(&self, pmd: Option<u32>, ufid: Ufid) -> Result<FlowStatsSnapshot, FlowError> {
        let mut sum = None;
        for c in self.targets(pmd)? {
            if let Ok(f) = c.del(ufid) {
                let s = f.stats.snapshot();
                sum = Some(sum.map_or(s, |a| sum_stats(a, s)));
            }
        }
        sum.ok_or(FlowError::NotFound(ufid))
    }

    /// Deletes every flow of the named PMD or of all; returns how many (per PMD, added).
    pub fn flush(&self, pmd: Option<u32>) -> Result<usize, FlowError> {
        Ok(self.targets(pmd)?.iter().map(|c| c.flush()).sum())
    }

    /// Every flow once, stats summed over PMDs, ordered by ufid when there are several PMDs.
    pub fn dump(&self) -> Vec<DpFlowInfo> {
        let mut all: Vec<DpFlowInfo> = Vec::new();
        for (_, c) in &self.pmds {
            all.extend(c.dump().map(|f| DpFlowInfo::of(&f)));
        }
        if self.pmds.len() <= 1 {
            return all;
        }
        all.sort_unstable_by_key(|f| f.ufid);
        let mut out: Vec<DpFlowInfo> = Vec::with_capacity(all.len());
        for f in all {
            match out.last_mut() {
                Some(o) if o.ufid == f.ufid => {
                    o.stats = sum_stats(o.stats, f.stats);
                    o.pmds += 1;
                }
                _ => out.push(f),
            }
        }
        out
    }

    /// The terse dump (ufid + stats) of every flow once, stats summed over PMDs, ordered by
    /// ufid when there are several PMDs.
    pub fn dump_terse(&self) -> Vec<TerseFlow> {
        if let [(_, c)] = &self.pmds[..] {
            return c.dump_terse();
        }
        let mut all: Vec<TerseFlow> = Vec::new();
        for (_, c) in &self.pmds {
            let mut d = c.dump();
            while d.next_terse(usize::MAX, &mut all) > 0 {}
        }
        all.sort_unstable_by_key(|f| f.ufid);
        let mut out: Vec<TerseFlow> = Vec::with_capacity(all.len());
        for f in all {
            match out.last_mut() {
                Some(o) if o.ufid == f.ufid => o.stats = sum_stats(o.stats, f.stats),
                _ => out.push(f),
            }
        }
        out
    }
}
