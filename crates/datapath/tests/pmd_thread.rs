//! PMD threads: two threads polling at once, stats read while they run, clear, stop, join.
//!
//! Each PMD owns its ports (a `MemPort` fed by the test, or an infinite `ReplayPort`) and
//! outputs to a `MemPort`/`NullPort`; the upcall sends every packet to port 2. Checked: the
//! counters in every published snapshot partition the packets, snapshots are ordered, the
//! test sees progress before stopping, a clear is honoured, the output ports received exactly
//! the packets that were classified, and `join` returns a `Pmd` whose counters equal the last
//! snapshot.

mod common;
use common::{ToPort2, udp_frame};

use std::sync::Arc;
use std::time::Duration;

use datapath::pmd::{ActionTable, Pmd, PmdConfig};
use datapath::{Dpcls, DpclsConfig, Pinning, PmdSnapshot, PmdThread, PmdThreadConfig};
use netdev::{MemHandle, MemPort, NullPort, ReplayPort};

const WAIT: Duration = Duration::from_secs(20);

fn new_pmd(core: u32, emc: bool) -> Pmd {
    let cfg = PmdConfig {
        emc,
        smc: !emc,
        core_id: core,
        ..PmdConfig::default()
    };
    Pmd::new(
        cfg,
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Arc::new(ActionTable::new(64)),
        Box::new(ToPort2),
    )
}

fn partitions(s: &PmdSnapshot) {
    assert_eq!(
        s.stats.classified(),
        s.stats.packets_received,
        "snapshot {} does not partition: {:?}",
        s.seq,
        s.stats
    );
}

fn mem_pmd(core: u32, emc: bool) -> (Pmd, MemHandle, MemHandle) {
    let mut pmd = new_pmd(core, emc);
    let rx = MemPort::new("in");
    let tx = MemPort::new("out");
    let (hin, hout) = (rx.handle(), tx.handle());
    pmd.add_port(1, Box::new(rx), true).expect("port 1");
    pmd.add_port(2, Box::new(tx), false).expect("port 2");
    (pmd, hin, hout)
}

fn inject(h: &MemHandle, n: u16, base: u16) {
    for i in 0..n {
        h.inject(udp_frame(base + i % 300));
    }
}

#[test]
fn two_threads_stats_clear_stop_join() {
    let (pmd_a, in_a, out_a) = mem_pmd(0, true);
    let (pmd_b, in_b, out_b) = mem_pmd(1, false);
    let a = PmdThread::spawn(pmd_a, PmdThreadConfig::on_core(0)).expect("spawn a");
    let b = PmdThread::spawn(pmd_b, PmdThreadConfig::on_core(1)).expect("spawn b");
    for t in [&a, &b] {
        // A 2-core box pins both; elsewhere the handle must say why not.
        match t.pinning() {
            Pinning::Pinned(_) | Pinning::Unpinned { .. } => {}
            Pinning::NotRequested => panic!("a core was requested"),
        }
    }

    // First chunk: visible mid-run, before any stop.
    inject(&in_a, 1000, 1000);
    inject(&in_b, 1500, 2000);
    let sa = a
        .wait_for(WAIT, |s| s.stats.packets_received == 1000)
        .expect("a sees 1000");
    let sb = b
        .wait_for(WAIT, |s| s.stats.packets_received == 1500)
        .expect("b sees 1500");
    for s in [&sa, &sb] {
        assert!(!s.last, "read while running");
        partitions(s);
        assert!(s.stats.upcall_ok >= 1);
    }
    assert_eq!(
        sa.stats.emc_hits + sa.stats.megaflow_hits + sa.stats.upcall_ok,
        1000
    );
    assert_eq!(sb.stats.emc_hits, 0, "b runs with the EMC off");

    // Clear on a only; b keeps counting.
    let cleared = a.clear_stats_wait(WAIT).expect("clear honoured");
    assert_eq!(cleared.stats.packets_received, 0);
    assert!(cleared.clear_generation >= 1);
    inject(&in_a, 700, 1000);
    inject(&in_b, 500, 2000);
    let sa2 = a
        .wait_for(WAIT, |s| s.stats.packets_received == 700)
        .expect("a sees 700 after the clear");
    let sb2 = b
        .wait_for(WAIT, |s| s.stats.packets_received == 2000)
        .expect("b sees 2000");
    partitions(&sa2);
    partitions(&sb2);
    assert!(sa2.seq > sa.seq && sa2.since >= sa.since);
    // The flows were installed before the clear: no new upcall for a.
    assert_eq!(sa2.stats.upcall_ok, 0);

    let pa = a.join().expect("join a");
    let pb = b.join().expect("join b");
    assert_eq!(pa.stats().packets_received, 700);
    assert_eq!(pb.stats().packets_received, 2000);
    assert_eq!(pa.stats().classified(), 700);
    assert_eq!(pb.stats().classified(), 2000);
    assert_eq!(out_a.take_tx().len(), 1700);
    assert_eq!(out_b.take_tx().len(), 2000);
    assert_eq!(pa.pool().outstanding(), 0);
    assert_eq!(pb.pool().outstanding(), 0);
}

#[test]
fn infinite_replay_snapshots_are_ordered_and_partition() {
    let frames: Vec<Vec<u8>> = (0..100).map(udp_frame).collect();
    let mut threads = Vec::new();
    for core in 0..2u32 {
        let mut pmd = new_pmd(core, core == 0);
        pmd.add_port(1, Box::new(ReplayPort::new("in", &frames)), true)
            .expect("port 1");
        pmd.add_port(2, Box::new(NullPort::new("out")), false)
            .expect("port 2");
        let t = PmdThread::spawn(pmd, PmdThreadConfig::on_core(core as usize)).expect("spawn");
        threads.push(t);
    }
    for t in &threads {
        let mut prev = t.snapshot();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(5));
            let s = t.snapshot();
            partitions(&s);
            assert!(s.seq >= prev.seq);
            assert!(s.stats.packets_received >= prev.stats.packets_received);
            prev = s;
        }
        let moving = t
            .wait_for(WAIT, |s| s.stats.packets_received > 10_000)
            .expect("progress while running");
        assert!(!moving.last);
        assert!(t.cpu_time().is_none_or(|c| c > Duration::ZERO));
    }
    for t in threads {
        let name = t.name().to_string();
        let snap_before = t.snapshot();
        let h = t;
        let last_seen = {
            h.stop();
            h.wait_for(WAIT, |s| s.last).expect("final snapshot")
        };
        let pmd = h.join().expect("join");
        assert!(name.starts_with("pmd"));
        assert_eq!(
            &last_seen.stats,
            pmd.stats(),
            "final snapshot = returned counters"
        );
        assert!(pmd.stats().packets_received >= snap_before.stats.packets_received);
        assert_eq!(pmd.stats().classified(), pmd.stats().packets_received);
        let out = pmd.port(2).expect("port 2").stats();
        assert_eq!(out.tx_packets, pmd.stats().tx_packets);
        assert_eq!(
            out.tx_packets,
            pmd.stats().packets_received - pmd.stats().lost - pmd.stats().upcall_failed
        );
    }
}

#[test]
fn dropping_the_handle_stops_the_thread() {
    let (pmd, _in, _out) = mem_pmd(0, true);
    let t = PmdThread::spawn(
        pmd,
        PmdThreadConfig {
            core: None,
            ..PmdThreadConfig::default()
        },
    )
    .expect("spawn");
    assert_eq!(t.pinning(), &Pinning::NotRequested);
    drop(t); // must return (joins the thread)
}

/// An idle-parking thread sleeps when nothing comes, is woken by `wake`, and loses no
/// frame; its counters are published before each pause, so a reader sees them all.
#[test]
fn idle_thread_parks_and_wakes() {
    let (pmd, hin, hout) = mem_pmd(0, true);
    let t = PmdThread::spawn(
        pmd,
        PmdThreadConfig {
            check_every: 4,
            idle_park: Some(Duration::from_secs(30)),
            ..PmdThreadConfig::default()
        },
    )
    .expect("spawn");
    let parked = t.wait_for(WAIT, |s| s.parks >= 1).expect("parks when idle");
    assert_eq!(parked.stats.packets_received, 0);
    // Parked for up to 30 s: only the wake makes it look again within the wait.
    inject(&hin, 50, 0);
    t.wake();
    let s = t
        .wait_for(WAIT, |s| {
            s.stats.packets_received == 50 && s.parks > parked.parks
        })
        .expect("woken, polled, parked again with the counters published");
    partitions(&s);
    assert_eq!(hout.take_tx().len(), 50);
    // Clear and stop wake it too (join returns at once, not after 30 s).
    assert!(t.clear_stats_wait(WAIT).is_some());
    let start = std::time::Instant::now();
    let pmd = t.join().expect("join");
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(pmd.pool().outstanding(), 0);
}

/// Ports detached from a stopped PMD and attached again: the remaining ports keep every
/// frame; output to the detached port counts as an output error.
#[test]
fn remove_port_between_runs() {
    let (mut pmd, hin, hout) = mem_pmd(0, true);
    let extra = MemPort::new("extra");
    let hextra = extra.handle();
    pmd.add_port(3, Box::new(extra), true).expect("port 3");
    assert_eq!(pmd.port_numbers(), vec![1, 2, 3]);
    inject(&hin, 10, 0);
    inject(&hextra, 5, 500);
    while pmd.poll_once() > 0 {}
    assert_eq!(hout.take_tx().len(), 15);
    // Detach the output port: frames still arrive, their output fails.
    let out = pmd.remove_port(2).expect("port 2 attached");
    assert_eq!(out.name(), "out");
    assert!(pmd.remove_port(2).is_none(), "already gone");
    assert_eq!(pmd.port_numbers(), vec![1, 3]);
    inject(&hin, 4, 0);
    while pmd.poll_once() > 0 {}
    assert_eq!(pmd.stats().packets_received, 19);
    assert_eq!(hout.tx_len(), 0);
    // Attach it again under the same number: output resumes.
    pmd.add_port(2, out, false).expect("re-add");
    inject(&hin, 3, 0);
    while pmd.poll_once() > 0 {}
    assert_eq!(hout.take_tx().len(), 3);
    assert_eq!(pmd.stats().classified(), pmd.stats().packets_received);
    assert_eq!(pmd.pool().outstanding(), 0);
}
