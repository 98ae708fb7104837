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

mod common;
use common::{ToPort2, env_u64, udp_frame};

use std::sync::Arc;

use datapath::pmd::{ActionTable, Pmd, PmdConfig};
use datapath::{Dpcls, DpclsConfig};
use netdev::{NullPort, ReplayPort};

#[test]
fn replay_to_null_counts() {
    let packets = env_u64("REPLAY_NULL_PACKETS", 20_000);
    let flows = env_u64("REPLAY_NULL_FLOWS", 1).clamp(1, 1000) as u16;
    let frames: Vec<Vec<u8>> = (0..flows).map(|i| udp_frame(1000 + i)).collect();
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
