//! Pieces the datapath's integration tests share: an upcall that sends everything to port 2,
//! a PMD on three in-memory ports, a minimal UDP frame, and environment knobs for the bounded
//! benchmark harnesses.
#![allow(dead_code)] // each test binary uses its own subset

use std::sync::Arc;

use datapath::pmd::{ActionTable, Pmd, PmdConfig, Upcall, UpcallError};
use datapath::{ActionsId, DpAction, Dpcls};
use flow::{FlowKey, FlowMask};
use netdev::{MemHandle, MemPort};

/// A PMD over `dpcls` asking `upcall` on misses, with in-memory ports 1 (polled), 2 and 3;
/// returns it with the ports' handles, in port order.
pub fn pmd_on_three_ports(
    cfg: PmdConfig,
    dpcls: Arc<Dpcls>,
    upcall: Box<dyn Upcall>,
) -> (Pmd, [MemHandle; 3]) {
    let mut pmd = Pmd::new(cfg, dpcls, Arc::new(ActionTable::default()), upcall);
    let ports: [MemPort; 3] = std::array::from_fn(|i| MemPort::new(format!("p{}", i + 1)));
    let h = ports.each_ref().map(MemPort::handle);
    for (i, p) in ports.into_iter().enumerate() {
        pmd.add_port(i as u32 + 1, Box::new(p), i == 0)
            .expect("distinct port numbers");
    }
    (pmd, h)
}

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
