//! The PMD's per-port upcall rate limit (time injected through the PMD's manual clock, no
//! sleeping) and action sets reclaimed under churn through the real PMD path: more distinct
//! action sets over time than the table holds at once, and never a failed upcall.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use datapath::pmd::{ActionTable, Pmd, PmdConfig, Upcall, UpcallError};
use datapath::{ActionsId, DpAction, Dpcls, DpclsConfig, PmdStats};
use flow::{FlowKey, FlowMask};
use netdev::{MemHandle, MemPort};
use testutil::rng::TestRng;

/// One megaflow per UDP source port (the L4 word exact); actions: push a VLAN tag whose VID
/// is the source port (so every flow has its own action set), then output to port 3.
struct PerSport;

impl Upcall for PerSport {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        let mut m = FlowMask::CATCHALL;
        m.w[flow::key::w::TP] = u64::MAX;
        let sport = sport_of(key);
        let id = actions
            .intern(&[
                DpAction::PushVlan {
                    tpid: 0x8100,
                    tci: sport & 0x0fff,
                },
                DpAction::Output(3),
            ])
            .ok_or(UpcallError::ActionsFull)?;
        Ok((m, id))
    }
}

/// The UDP source port (tp_src: bits 48..64 of the L4 word).
fn sport_of(key: &FlowKey) -> u16 {
    (key.w[flow::key::w::TP] >> 48) as u16
}

/// A PMD with ports 1 and 2 polled and 3 output-only, on `table`, with a manual clock.
fn pmd(cfg: PmdConfig, table: Arc<ActionTable>) -> (Pmd, [MemHandle; 3], Arc<AtomicU64>) {
    let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
    let mut pmd = Pmd::new(cfg, dpcls, table, Box::new(PerSport));
    let ports: [MemPort; 3] = std::array::from_fn(|i| MemPort::new(format!("p{}", i + 1)));
    let h = ports.each_ref().map(MemPort::handle);
    for (i, p) in ports.into_iter().enumerate() {
        pmd.add_port(i as u32 + 1, Box::new(p), i < 2)
            .expect("distinct");
    }
    let clock = Arc::new(AtomicU64::new(1_000));
    pmd.set_manual_clock(Some(clock.clone()));
    (pmd, h, clock)
}

fn partitioned(s: &PmdStats) {
    assert_eq!(s.classified(), s.packets_received + s.recirculations, "{s}");
    assert_eq!(s.lost, s.lost_reasons.total());
}

#[test]
fn upcall_rate_limit_per_port() {
    let cfg = PmdConfig {
        upcall_rate: 1000, // one per ms
        upcall_burst: 8,
        ..PmdConfig::default()
    };
    let (mut pmd, h, clock) = pmd(cfg, Arc::new(ActionTable::default()));
    // A flood of 32 new flows on port 1: the burst (8) gets through, 24 are dropped.
    for s in 0..32u16 {
        h[0].inject(common::udp_frame(1000 + s));
    }
    // Port 2 has its own bucket: its 4 new flows all get upcalls.
    for s in 0..4u16 {
        h[1].inject(common::udp_frame(5000 + s));
    }
    pmd.poll_once();
    let st = pmd.stats().clone();
    assert_eq!(st.upcall_ok, 12, "{st}");
    assert_eq!(st.lost_reasons.upcall_limited, 24);
    assert_eq!(h[2].take_tx().len(), 12);
    partitioned(&st);
    // Known flows on port 1 still forward with the bucket empty; new ones are dropped.
    for s in 0..8u16 {
        h[0].inject(common::udp_frame(1000 + s));
    }
    for s in 100..110u16 {
        h[0].inject(common::udp_frame(1000 + s));
    }
    pmd.poll_once();
    let st = pmd.stats().clone();
    assert_eq!(st.upcall_ok, 12);
    assert_eq!(st.lost_reasons.upcall_limited, 34);
    assert_eq!(h[2].take_tx().len(), 8);
    partitioned(&st);
    // 5 ms later: 5 tokens.
    clock.fetch_add(5, Ordering::Relaxed);
    for s in 200..210u16 {
        h[0].inject(common::udp_frame(1000 + s));
    }
    pmd.poll_once();
    assert_eq!(pmd.stats().upcall_ok, 17);
    assert_eq!(pmd.stats().lost_reasons.upcall_limited, 39);
    // A clock going backwards refills nothing; a long pause refills to the burst only.
    clock.fetch_sub(3, Ordering::Relaxed);
    h[0].inject(common::udp_frame(1300));
    pmd.poll_once();
    assert_eq!(pmd.stats().upcall_ok, 17);
    clock.fetch_add(1_000_000, Ordering::Relaxed);
    for s in 300..330u16 {
        h[0].inject(common::udp_frame(1000 + s));
    }
    pmd.poll_once();
    assert_eq!(pmd.stats().upcall_ok, 25);
    // 0 = unlimited.
    pmd.set_upcall_limit(0, 0);
    for s in 400..432u16 {
        h[0].inject(common::udp_frame(1000 + s));
    }
    pmd.poll_once();
    assert_eq!(pmd.stats().upcall_ok, 57);
    let st = pmd.stats().clone();
    partitioned(&st);
    assert!(
        st.to_string().contains("\n  upcalls rate-limited: 62"),
        "{st}"
    );
}

/// Random floods and known traffic on both ports with random clock steps, against a twin
/// token bucket per port: the same number of upcalls let through, the partition holds.
#[test]
fn upcall_rate_limit_matches_twin() {
    for seed in 0..8u64 {
        let mut r = TestRng::new(0x11ae + seed);
        let (rate, burst) = (1 + r.below(5000) as u32, 1 + r.below(40) as u32);
        let cfg = PmdConfig {
            upcall_rate: rate,
            upcall_burst: burst,
            ..PmdConfig::default()
        };
        let (mut pmd, h, clock) = pmd(cfg, Arc::new(ActionTable::default()));
        // Twin: tokens in thousandths, last time, per port; the set of installed sports.
        let mut tw = [(u64::from(burst) * 1000, 0u64); 2];
        let mut installed = [
            std::collections::HashSet::new(),
            std::collections::HashSet::new(),
        ];
        let mut next = 0u16;
        let (mut ok, mut limited) = (0u64, 0u64);
        for _ in 0..200 {
            clock.fetch_add(r.below(4), Ordering::Relaxed);
            let now = clock.load(Ordering::Relaxed);
            for (port, (b, installed)) in tw.iter_mut().zip(installed.iter_mut()).enumerate() {
                let n = r.below(33);
                let mut burst_new = Vec::new();
                for _ in 0..n {
                    let s = if installed.is_empty() || r.chance(1, 2) {
                        next = next.wrapping_add(1) % 4000;
                        next + 1
                    } else {
                        *installed.iter().nth(r.index(installed.len())).unwrap()
                    };
                    h[port].inject(common::udp_frame(s));
                    burst_new.push(s);
                }
                // The twin's verdicts for this port's burst, in rx order.
                let mut seen_now = std::collections::HashSet::new();
                for s in burst_new {
                    if installed.contains(&s) || seen_now.contains(&s) {
                        continue;
                    }
                    let elapsed = now.saturating_sub(b.1);
                    b.1 = b.1.max(now);
                    b.0 = (b.0 + elapsed * u64::from(rate)).min(u64::from(burst) * 1000);
                    if b.0 >= 1000 {
                        b.0 -= 1000;
                        ok += 1;
                        seen_now.insert(s);
                    } else {
                        limited += 1;
                    }
                }
                installed.extend(seen_now);
            }
            pmd.poll_once();
            let st = pmd.stats();
            assert_eq!(
                (st.upcall_ok, st.lost_reasons.upcall_limited),
                (ok, limited),
                "seed {seed}"
            );
            partitioned(st);
            h[2].take_tx();
        }
    }
}

/// Rounds of new flows, each with its own action set, then a flush: 40 rounds × 12 sets
/// through a table that holds 16 at once. Every upcall succeeds and every packet leaves
/// with its own VLAN tag: the sets of flushed flows are reclaimed (once the PMD's caches
/// have swept the dead flows) and their slots reused.
#[test]
fn action_sets_churn_through_the_pmd() {
    let table = Arc::new(ActionTable::new(16));
    let cfg = PmdConfig {
        emc_insert_inv_prob: 1,
        ..PmdConfig::default()
    };
    let (mut pmd, h, _clock) = pmd(cfg, table.clone());
    let mut ids = std::collections::HashSet::new();
    for round in 0..40u16 {
        for j in 0..12u16 {
            h[0].inject(common::udp_frame(2000 + round * 12 + j));
        }
        pmd.poll_once();
        let st = pmd.stats();
        assert_eq!(st.upcall_failed, 0, "round {round}: {st}");
        assert_eq!(st.install_failed, 0);
        let tx = h[2].take_tx();
        assert_eq!(tx.len(), 12);
        for f in &tx {
            // 802.1Q tag after the MACs.
            assert_eq!(&f[12..14], &[0x81, 0x00]);
        }
        for f in pmd.dpcls().flows() {
            ids.insert(f.actions());
        }
        pmd.dpcls().flush();
        // Idle rounds: the slow sweep lets go of the dead flows in the EMC and batches.
        for _ in 0..9000 {
            pmd.poll_once();
        }
        assert_eq!(table.len(), 0, "round {round}: {:?}", table.memory());
    }
    assert_eq!(ids.len(), 480, "every set had its own id");
    let m = table.memory();
    assert!(m.slots <= 16 && m.reclaimed >= 480 - 16, "{m:?}");
}
