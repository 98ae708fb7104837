//! The upcall handler: a datapath miss translated through the OpenFlow tables.
//!
//! [`OfprotoUpcall`] implements [`datapath::Upcall`] over an [`ofproto::Bridge`]: it runs
//! `ofproto::xlate` on the missed key and converts the datapath actions xlate emits
//! ([`OdpAction`], OVS's `Datapath actions:` vocabulary) into what the PMD executes
//! ([`DpAction`]). Used by `demo` and `bench`.

use crate::dp_actions::to_dp_actions;
use datapath::{ActionTable, DpAction, Upcall, UpcallError};
use flow::{FlowKey, FlowMask};
use ofproto::{Bridge, XlateIn, xlate};

/// The upcall: translate through the OpenFlow tables, keep what the datapath executes.
#[derive(Debug)]
pub struct OfprotoUpcall {
    bridge: Bridge,
    started: std::time::Instant,
}

impl OfprotoUpcall {
    /// An upcall handler over `bridge`.
    pub fn new(bridge: Bridge) -> Self {
        OfprotoUpcall {
            bridge,
            started: std::time::Instant::now(),
        }
    }
}

impl Upcall for OfprotoUpcall {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, datapath::ActionsId), UpcallError> {
        let input = XlateIn {
            key: *key,
            now_ms: self.started.elapsed().as_millis() as u64,
            side_effects: true,
            trace: false,
            table: 0,
        };
        let out = xlate(&mut self.bridge, &input);
        if let Some(e) = &out.error {
            return Err(UpcallError::Failed(format!("{e:?}")));
        }
        let mut dp = to_dp_actions(&out.actions).map_err(UpcallError::Failed)?;
        if dp.is_empty() {
            dp.push(DpAction::Drop);
        }
        let id = actions.intern(&dp).ok_or(UpcallError::ActionsFull)?;
        Ok((out.mask, id))
    }
}
