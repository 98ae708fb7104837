//! The PMD's execute queue (`datapath::exec_queue`): packets handed over from another thread
//! run through their actions at the next poll round (outputs, edits, recirculation through
//! the classifier), the queue is bounded and counted, and a PMD thread stopped and spawned
//! again keeps its queue and is woken by pushes.

mod common;
use common::{ToPort2, pmd_on_three_ports, udp_frame};

use std::sync::Arc;
use std::time::Duration;

use datapath::exec_queue::EXECUTE_QUEUE_MAX;
use datapath::pmd::PmdConfig;
use datapath::{DpAction, Dpcls, DpclsConfig, ExecError, Execute, PmdThread, PmdThreadConfig};

fn ex(frame: Vec<u8>, in_port: u32, actions: Vec<DpAction>) -> Execute {
    Execute {
        frame,
        in_port,
        actions,
        keep: None,
    }
}

#[test]
fn drained_at_the_next_round_outputs_and_counts() {
    let (mut pmd, h) = pmd_on_three_ports(
        PmdConfig::default(),
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Box::new(ToPort2),
    );
    let q = pmd.execute_queue().clone();
    let f = udp_frame(7);
    let t = q
        .push(ex(
            f.clone(),
            1,
            vec![DpAction::Output(2), DpAction::Output(3)],
        ))
        .expect("queued");
    // Nothing happens before a poll.
    assert_eq!(h[1].tx_len(), 0);
    assert!(!q.wait(t, Duration::from_millis(1)));
    assert_eq!(q.len(), 1);
    pmd.poll_once();
    assert!(q.is_empty());
    assert!(q.wait(t, Duration::from_millis(1)));
    assert_eq!(h[1].take_tx(), vec![f.clone()]);
    assert_eq!(h[2].take_tx(), vec![f.clone()]);
    // A packet-out is not a received packet: the counters still partition.
    let s = pmd.stats();
    assert_eq!(s.packets_received, 0);
    assert_eq!(s.classified(), s.packets_received);
    assert_eq!(q.stats().executed, 1);

    // An edit, then output; a drop sends nothing.
    q.push(ex(
        f.clone(),
        1,
        vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 5,
            },
            DpAction::Output(3),
        ],
    ))
    .expect("queued");
    q.push(ex(f.clone(), 1, vec![DpAction::Drop]))
        .expect("queued");
    pmd.poll_once();
    let out = h[2].take_tx();
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][12..16], &[0x81, 0x00, 0, 5]);
    assert_eq!(out[0].len(), f.len() + 4);
    assert_eq!(h[1].tx_len(), 0);
    assert_eq!(q.stats().executed, 3);
    // Every buffer is back.
    assert_eq!(pmd.pool().available(), pmd.pool().capacity());
}

#[test]
fn recirculation_goes_through_the_classifier() {
    let (mut pmd, h) = pmd_on_three_ports(
        PmdConfig::default(),
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Box::new(ToPort2),
    );
    let q = pmd.execute_queue().clone();
    q.push(ex(udp_frame(9), 1, vec![DpAction::Recirc(5)]))
        .expect("queued");
    pmd.poll_once();
    // The second pass missed, was upcalled (everything to port 2) and output.
    assert_eq!(h[1].take_tx(), vec![udp_frame(9)]);
    let s = pmd.stats();
    assert_eq!(s.recirculations, 1);
    assert_eq!(s.upcall_ok, 1);
    assert_eq!(s.classified(), s.packets_received + s.recirculations);
}

#[test]
fn bounded_full_is_refused_then_drained() {
    let (mut pmd, h) = pmd_on_three_ports(
        PmdConfig::default(),
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Box::new(ToPort2),
    );
    let q = pmd.execute_queue().clone();
    assert_eq!(q.capacity(), EXECUTE_QUEUE_MAX);
    for i in 0..EXECUTE_QUEUE_MAX {
        q.push(ex(udp_frame(i as u16), 1, vec![DpAction::Output(3)]))
            .expect("room");
    }
    assert_eq!(
        q.push(ex(udp_frame(0), 1, vec![DpAction::Output(3)])),
        Err(ExecError::Full)
    );
    assert_eq!(q.stats().rejected, 1);
    pmd.poll_once();
    let out = h[2].take_tx();
    assert_eq!(out.len(), EXECUTE_QUEUE_MAX);
    // In queue order.
    for (i, f) in out.iter().enumerate() {
        assert_eq!(*f, udp_frame(i as u16));
    }
    assert_eq!(q.stats().executed, EXECUTE_QUEUE_MAX as u64);
    assert_eq!(pmd.pool().available(), pmd.pool().capacity());
}

#[test]
fn thread_is_woken_and_queue_survives_a_restart() {
    let (pmd, h) = pmd_on_three_ports(
        PmdConfig::default(),
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Box::new(ToPort2),
    );
    let q = pmd.execute_queue().clone();
    // A thread that sleeps long when idle: only the push's wake makes it run soon.
    let cfg = PmdThreadConfig {
        idle_park: Some(Duration::from_secs(30)),
        check_every: 1,
        ..PmdThreadConfig::default()
    };
    let t = PmdThread::spawn(pmd, cfg.clone()).expect("spawn");
    std::thread::sleep(Duration::from_millis(50));
    let k = q
        .push(ex(udp_frame(1), 1, vec![DpAction::Output(2)]))
        .expect("queued");
    assert!(q.wait(k, Duration::from_secs(5)), "woken and executed");
    assert_eq!(h[1].take_tx(), vec![udp_frame(1)]);
    let pmd = t.join().expect("join");
    // Queued while no thread runs: executed by the next one.
    let k = q
        .push(ex(udp_frame(2), 1, vec![DpAction::Output(2)]))
        .expect("queued");
    let t = PmdThread::spawn(pmd, cfg).expect("respawn");
    assert!(q.wait(k, Duration::from_secs(5)));
    std::thread::sleep(Duration::from_millis(50));
    let k = q
        .push(ex(udp_frame(3), 1, vec![DpAction::Output(2)]))
        .expect("queued");
    assert!(q.wait(k, Duration::from_secs(5)), "the new thread is woken");
    assert_eq!(h[1].take_tx(), vec![udp_frame(2), udp_frame(3)]);
    t.join().expect("join");
}
