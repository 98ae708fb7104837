//! Pieces the datapath's integration tests share: an upcall that sends everything to port 2,
//! a minimal UDP frame, and environment knobs for the bounded benchmark harnesses.
#![allow(dead_code)] // each test binary uses its own subset

use datapath::pmd::{ActionTable, Upcall, UpcallError};
use datapath::{ActionsId, DpAction};
use flow::{FlowKey, FlowMask};

/// Everything to port 2; the mask is widened to in_port by the PMD.
pub struct ToPort2;

impl Upcall for ToPort2 {
    fn upcall(
        &mut self,
        _key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        let id = actions
            .intern(&[DpAction::Output(2)])
            .ok_or(UpcallError::ActionsFull)?;
        Ok((FlowMask::CATCHALL, id))
    }
}

/// A 60-byte Ethernet/IPv4/UDP frame of flow `sport` (checksum not needed by the datapath).
pub fn udp_frame(sport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[
        0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0x13, 0x88, 0, 26, 0, 0]);
    f.resize(60, 0);
    f
}

/// The environment variable `name` as a number, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
