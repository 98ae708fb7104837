//! The trivially correct twin of the cache tiers: a `Vec` of megaflows scanned linearly.
//!
//! With non-overlapping live megaflows a packet matches at most one, so "the first live flow
//! whose masked key equals the packet's" is the answer every tier must agree with (or, for the
//! EMC and SMC, which may miss, never contradict).

use std::sync::Arc;

use flow::FlowKey;

use crate::megaflow::{DpFlow, Ufid};

/// Megaflows in insertion order.
#[derive(Debug, Default, Clone)]
pub struct LinearMegaflows {
    flows: Vec<Arc<DpFlow>>,
}

impl LinearMegaflows {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Adds a flow.
    pub fn insert(&mut self, f: Arc<DpFlow>) {
        self.flows.push(f);
    }

    /// Removes the flow `ufid`.
    pub fn remove(&mut self, ufid: Ufid) -> Option<Arc<DpFlow>> {
        let i = self.flows.iter().position(|f| f.ufid == ufid)?;
        Some(self.flows.remove(i))
    }

    /// Whether `f` overlaps a flow already here.
    pub fn overlaps(&self, f: &DpFlow) -> bool {
        self.flows.iter().any(|g| g.overlaps(f))
    }

    /// The first live flow matching `key` (with in_port `in_port` when `per_port`).
    pub fn lookup(&self, key: &FlowKey) -> Option<&Arc<DpFlow>> {
        self.flows.iter().find(|f| {
            !f.is_dead() && (0..flow::FLOW_WORDS).all(|i| key.w[i] & f.mask.w[i] == f.key.w[i])
        })
    }

    /// The flows.
    pub fn flows(&self) -> &[Arc<DpFlow>] {
        &self.flows
    }
}
