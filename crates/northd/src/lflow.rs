//! Logical flows: what northd produces, one per (datapath, stage, priority, match, actions).

use crate::stage::Stage;

/// Index of a datapath in [`crate::build::Ctx::datapaths`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DpId(pub u32);

/// One logical flow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lflow {
    /// Datapath.
    pub dp: DpId,
    /// Stage (gives pipeline and table).
    pub stage: Stage,
    /// Priority (0–65535).
    pub priority: u16,
    /// Match expression text, as ovn-northd writes it.
    pub match_: String,
    /// Actions text, as ovn-northd writes it.
    pub actions: String,
}

/// Where a builder puts the flows of one datapath.
#[derive(Debug)]
pub struct Sink<'a> {
    dp: DpId,
    out: &'a mut Vec<Lflow>,
}

impl<'a> Sink<'a> {
    /// A sink adding flows for `dp` to `out`.
    pub fn new(dp: DpId, out: &'a mut Vec<Lflow>) -> Self {
        Sink { dp, out }
    }

    /// The datapath flows go to.
    pub fn dp(&self) -> DpId {
        self.dp
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
            dp: self.dp,
            stage,
            priority,
            match_: match_.into(),
            actions: actions.into(),
        });
    }
}
