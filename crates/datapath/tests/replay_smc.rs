//! The benchmark's `l3` and `sub10` packet paths, run synchronously for callgrind: an
//! in-memory replay port → one PMD (EMC and SMC switchable) → a null port.
//!
//! A sibling of `replay_null.rs` with megaflows shaped like the ones the real upcall (xlate
//! over `flowswitch bench`'s `rules_text`) installs:
//!
//! - `l3` (`priority=10,udp,in_port=1,nw_dst=10.0.0.2`): one megaflow, exact on in_port,
//!   dl_type, nw_dst, nw_proto and nw_frag; every packet of a burst hits it.
//! - `sub10` (10 rules `udp,in_port=1,tp_dst=5000+i` plus one extra field each): ten
//!   megaflows with ten masks (in_port, dl_type, nw_proto, nw_frag, tp_dst + the extra field
//!   of rule i), traffic shuffled over 10 destination ports, so consecutive packets hit
//!   different megaflows.
//!
//! Traffic is `gen_pcap.py`'s (`--dports 10` for sub10), shuffled by a fixed seed. Knobs
//! (environment): `REPLAY_SMC_RULES` (`l3` | `sub10`), `REPLAY_SMC_FLOWS`,
//! `REPLAY_SMC_PACKETS`, `REPLAY_SMC_EMC` / `REPLAY_SMC_SMC` (`on` | `off`). Instructions
//! per packet = the difference of two runs with different packet counts:
//!
//! ```text
//! REPLAY_SMC_RULES=sub10 REPLAY_SMC_PACKETS=300000 valgrind --tool=callgrind \
//!     target/release/deps/replay_smc-HASH --exact replay_smc_env --test-threads=1
//! ```
//!
//! Checked on every run: every packet is received, classified once, sent to the null port,
//! one megaflow per rule that the traffic reaches is installed, and (with the SMC on, EMC
//! off, after the warm-up) packets hit the SMC.

mod common;
use common::env_u64;

use std::sync::Arc;

use datapath::pmd::{ActionTable, Pmd, PmdConfig, Upcall, UpcallError};
use datapath::{ActionsId, DpAction, Dpcls, DpclsConfig};
use flow::{FieldId, FlowKey, FlowMask};
use netdev::{NullPort, ReplayPort};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    L3,
    Sub10,
}

/// The megaflow mask and output of the bench rule sets, as xlate would answer.
struct BenchUpcall(Rules);

fn exact(m: &mut FlowMask, f: FieldId) {
    f.unwildcard(m);
}

impl Upcall for BenchUpcall {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        let id = actions
            .intern(&[DpAction::Output(2)])
            .ok_or(UpcallError::ActionsFull)?;
        let mut m = FlowMask::CATCHALL;
        for f in [
            FieldId::InPort,
            FieldId::DlType,
            FieldId::NwProto,
            FieldId::NwFrag,
        ] {
            exact(&mut m, f);
        }
        match self.0 {
            Rules::L3 => exact(&mut m, FieldId::NwDst),
            Rules::Sub10 => {
                exact(&mut m, FieldId::TpDst);
                let i = (FieldId::TpDst.get(key) as u32).wrapping_sub(5000);
                match i {
                    1 => FieldId::NwSrc.set_mask(&mut m, 0xff00_0000),
                    2 => FieldId::NwSrc.set_mask(&mut m, 0xffff_0000),
                    3 => FieldId::NwSrc.set_mask(&mut m, 0xffff_ff00),
                    4 => exact(&mut m, FieldId::NwSrc),
                    5 => exact(&mut m, FieldId::NwTos),
                    6 => exact(&mut m, FieldId::NwTtl),
                    7 => exact(&mut m, FieldId::DlSrc),
                    8 => exact(&mut m, FieldId::DlDst),
                    9 => exact(&mut m, FieldId::NwDst),
                    _ => {}
                }
            }
        }
        Ok((m, id))
    }
}

/// Frame `i` of `gen_pcap.py OUT n --dports K` (60 bytes; checksum left zero).
fn gen_frame(i: u32, dports: u32) -> Vec<u8> {
    let (sport, dport) = match (i.checked_div(dports), i.checked_rem(dports)) {
        (Some(q), Some(r)) => (1024 + q % 60000, 5000 + r),
        _ => (1024 + i % 60000, 5000 + (i / 60000) % 1000),
    };
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[18..20].copy_from_slice(&(i as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&(sport as u16).to_be_bytes());
    f[36..38].copy_from_slice(&(dport as u16).to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// `flows` frames in a fixed pseudo-random order (Fisher–Yates over xorshift).
fn frames(rules: Rules, flows: u32) -> Vec<Vec<u8>> {
    let dports = if rules == Rules::Sub10 { 10 } else { 0 };
    let mut idx: Vec<u32> = (0..flows).collect();
    let mut x = 0x9e37_79b9u32;
    for j in (1..idx.len()).rev() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        idx.swap(j, x as usize % (j + 1));
    }
    idx.iter().map(|&i| gen_frame(i, dports)).collect()
}

struct Case {
    rules: Rules,
    flows: u32,
    packets: u64,
    emc: bool,
    smc: bool,
}

fn run(c: &Case) {
    let frames = frames(c.rules, c.flows);
    let cfg = PmdConfig {
        emc: c.emc,
        smc: c.smc,
        ..PmdConfig::default()
    };
    let mut pmd = Pmd::new(
        cfg,
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Arc::new(ActionTable::new(64)),
        Box::new(BenchUpcall(c.rules)),
    );
    let input = ReplayPort::new("in", &frames).with_limit(c.packets);
    pmd.add_port(1, Box::new(input), true).expect("port 1");
    pmd.add_port(2, Box::new(NullPort::new("out")), false)
        .expect("port 2");
    let report = pmd.run_for(u64::MAX);
    let s = &report.stats;
    assert_eq!(report.packets, c.packets);
    assert_eq!(s.packets_received, c.packets);
    assert_eq!(s.classified(), c.packets, "{s:?}");
    let megaflows = match c.rules {
        Rules::L3 => 1,
        Rules::Sub10 => c.flows.min(10),
    };
    assert_eq!(s.flows_installed, u64::from(megaflows), "{s:?}");
    assert_eq!(s.upcall_ok, u64::from(megaflows), "{s:?}");
    assert_eq!(s.tx_packets, c.packets);
    assert_eq!(s.lost, 0);
    let out = pmd.port(2).expect("port 2").stats();
    assert_eq!(out.tx_packets, c.packets);
    assert_eq!(pmd.pool().outstanding(), 0, "buffers not returned");
    if c.smc && !c.emc && c.packets >= 4 * u64::from(c.flows) {
        // Every flow reached the SMC during the first pass over the traffic.
        assert!(s.smc_hits >= c.packets - 2 * u64::from(c.flows), "{s:?}");
    }
    if c.emc && !c.smc && c.flows <= 100 && c.packets >= 20_000 {
        assert!(s.emc_hits > c.packets / 2, "{s:?}");
    }
}

fn env_str(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// The case the environment names (defaults: sub10, 1000 flows, SMC on, EMC off).
#[test]
fn replay_smc_env() {
    let rules = match env_str("REPLAY_SMC_RULES", "sub10").as_str() {
        "l3" => Rules::L3,
        _ => Rules::Sub10,
    };
    run(&Case {
        rules,
        flows: env_u64("REPLAY_SMC_FLOWS", 1000).clamp(1, 60_000) as u32,
        packets: env_u64("REPLAY_SMC_PACKETS", 20_000),
        emc: env_str("REPLAY_SMC_EMC", "off") == "on",
        smc: env_str("REPLAY_SMC_SMC", "on") == "on",
    });
}

/// Every combination runs and forwards everything, small.
#[test]
fn replay_smc_matrix() {
    for rules in [Rules::L3, Rules::Sub10] {
        for (emc, smc) in [(true, false), (false, true), (false, false), (true, true)] {
            run(&Case {
                rules,
                flows: 200,
                packets: 4000,
                emc,
                smc,
            });
        }
    }
}
