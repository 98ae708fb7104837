//! The upcall handler: a datapath miss translated through the OpenFlow tables.
//!
//! [`OfprotoUpcall`] implements [`datapath::Upcall`] over an [`ofproto::Bridge`]: it runs
//! `ofproto::xlate` on the missed key and converts the datapath actions xlate emits
//! ([`OdpAction`], OVS's `Datapath actions:` vocabulary) into what the PMD executes
//! ([`DpAction`]). Used by `demo` and `bench`.

use datapath::{ActionTable, DpAction, Upcall, UpcallError};
use flow::{FlowKey, FlowMask};
use ofproto::{Bridge, OdpAction, XlateIn, format_odp_actions, xlate};

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
        let mut dp = Vec::with_capacity(out.actions.len());
        for a in &out.actions {
            dp.push(match a {
                OdpAction::Output(port) => DpAction::Output(*port),
                // The datapath's TCI is the one on the wire; OVS's carries CFI as "present".
                OdpAction::PushVlan { tpid, tci } => DpAction::PushVlan {
                    tpid: *tpid,
                    tci: tci & !flow::field::VLAN_CFI,
                },
                OdpAction::PopVlan => DpAction::PopVlan,
                other => {
                    return Err(UpcallError::Failed(format!(
                        "datapath action not executed yet: {}",
                        format_odp_actions(std::slice::from_ref(other))
                    )));
                }
            });
        }
        if dp.is_empty() {
            dp.push(DpAction::Drop);
        }
        let id = actions.intern(&dp).ok_or(UpcallError::ActionsFull)?;
        Ok((out.mask, id))
    }
}
