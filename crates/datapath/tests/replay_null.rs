//! The benchmark's packet path, run synchronously: an in-memory replay port (frames copied
//! into pooled buffers) → one PMD with the EMC on → a null port that frees the buffers.
//!
//! This is `flowswitch bench datapath --rules simple --flows F --packets N` without the PMD
//! thread: `Pmd::run_for` stops when the replay port reaches its limit, so the run does a
//! fixed amount of work and is fit for `valgrind --tool=callgrind` (instructions per packet
//! = the difference of two runs with different `N`, divided by the difference of `N`):
//!
//! ```text
//! REPLAY_NULL_PACKETS=300000 REPLAY_NULL_FLOWS=1 valgrind --tool=callgrind \
//!     target/release/deps/replay_null-HASH --exact replay_to_null_counts --test-threads=1
//! ```
//!
//! Checked on every run: every packet is received, classified once (EMC, megaflow or upcall),
//! sent to the null port, and every buffer is back in the pool.

use std::sync::Arc;

use datapath::pmd::{ActionTable, Pmd, PmdConfig, Upcall, UpcallError};
use datapath::{ActionsId, DpAction, Dpcls, DpclsConfig};
use flow::{FlowKey, FlowMask};
use netdev::{NullPort, ReplayPort};

/// Everything to port 2; the mask is widened to in_port by the PMD.
struct ToPort2;

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

/// A 60-byte Ethernet/IPv4/UDP frame of flow `sport`.
fn frame(sport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[
        0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0x13, 0x88, 0, 26, 0, 0]);
    f.resize(60, 0);
    f
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn replay_to_null_counts() {
    let packets = env_u64("REPLAY_NULL_PACKETS", 20_000);
    let flows = env_u64("REPLAY_NULL_FLOWS", 1).clamp(1, 1000) as u16;
    let frames: Vec<Vec<u8>> = (0..flows).map(|i| frame(1000 + i)).collect();
    let mut pmd = Pmd::new(
        PmdConfig::default(),
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Arc::new(ActionTable::new(64)),
        Box::new(ToPort2),
    );
    let input = ReplayPort::new("in", &frames).with_limit(packets);
    pmd.add_port(1, Box::new(input), true).expect("port 1");
    pmd.add_port(2, Box::new(NullPort::new("out")), false)
        .expect("port 2");
    let report = pmd.run_for(u64::MAX);
    let s = &report.stats;
    assert_eq!(report.packets, packets);
    assert_eq!(s.packets_received, packets);
    assert_eq!(s.classified(), packets, "{s:?}");
    // The upcall's mask is exact on in_port only: one megaflow serves every flow.
    assert_eq!(s.upcall_ok, 1, "{s:?}");
    assert_eq!(s.flows_installed, 1, "{s:?}");
    assert_eq!(s.tx_packets, packets);
    assert_eq!(s.lost, 0);
    let out = pmd.port(2).expect("port 2").stats();
    assert_eq!(out.tx_packets, packets);
    assert_eq!(out.tx_bytes, packets * 60);
    assert_eq!(pmd.pool().outstanding(), 0, "buffers not returned");
    if packets >= 20_000 {
        // After the 1 % probabilistic inserts every flow is in the EMC.
        assert!(s.emc_hits > packets / 2, "{s:?}");
    }
}
