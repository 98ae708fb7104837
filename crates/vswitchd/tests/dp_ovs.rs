//! The same `netdev-dummy/receive` sequence on a real `ovs-vswitchd` 3.1 (dummy datapath,
//! `tx_pcap` on its ports) and on flowswitch's datapath: each port's tx pcap holds the same
//! frames in the same order. Skipped (and counted) without Open vSwitch.

mod dp_common;
use dp_common::*;

use std::path::Path;
use std::time::Duration;

use ofproto::FlowModCommand;
use vswitchd::bridges::{Bridges, DummyMode};
use vswitchd::dp::Datapaths;

const WAIT: Duration = Duration::from_secs(20);

const FLOWS: &[&str] = &[
    "priority=10,udp,in_port=1,actions=output:2,output:3",
    "priority=5,in_port=1,actions=output:3",
    "priority=5,in_port=2,actions=mod_vlan_vid:10,output:3",
    "priority=5,in_port=3,actions=mod_dl_src:00:00:00:00:aa:bb,output:1,output:2",
];

/// `(port, frames...)` in the order sent: UDP and non-UDP frames, several per command.
fn sequence() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let mut arp = frame(77);
    arp[12] = 0x08;
    arp[13] = 0x06;
    let mut other = frame(78);
    other[12] = 0x88;
    other[13] = 0xb5;
    vec![
        ("p1", vec![frame(1), frame(2)]),
        ("p1", vec![arp.clone()]),
        ("p2", vec![frame(3), other.clone()]),
        ("p3", vec![frame(4)]),
        ("p1", vec![other, frame(5), frame(6)]),
        ("p3", vec![arp]),
    ]
}

fn args<'a>(port: &'a str, hex: &'a [String]) -> Vec<&'a str> {
    let mut a = vec![port];
    a.extend(hex.iter().map(String::as_str));
    a
}

fn expected_counts() -> [usize; 3] {
    // p1 gets p3's 2 frames; p2 gets p1's 4 UDP and p3's 2; p3 gets p1's 6 and p2's 2.
    [2, 6, 8]
}

#[test]
fn tx_pcaps_match_real_ovs() {
    testutil::skip_without_ovs!();
    let ovs = testutil::ovs::OvsSandbox::start(3).expect("start OVS sandbox");
    let odir = ovs.dir().to_path_buf();
    for i in 1..=3 {
        ovs.vsctl(&[
            "set".to_string(),
            "interface".to_string(),
            format!("p{i}"),
            format!(
                "options:tx_pcap={}",
                odir.join(format!("p{i}.pcap")).display()
            ),
        ])
        .expect("tx_pcap");
    }
    for f in FLOWS {
        ovs.add_flow(f).expect("flow");
    }

    let dir = tempdir("ovs");
    let opt = |i: u32| {
        vec![(
            "tx_pcap",
            dir.join(format!("p{i}.pcap")).display().to_string(),
        )]
    };
    let cfg = config(vec![bridge(
        1,
        "br0",
        "dummy",
        (1..=3u16)
            .map(|i| {
                port(iface(
                    10 + u128::from(i),
                    &format!("p{i}"),
                    "dummy",
                    Some(i),
                    &opt(u32::from(i)),
                ))
            })
            .collect(),
    )]);
    let mut bs = Bridges::new(DummyMode::Override);
    bs.reconcile(&cfg);
    let mut dps = Datapaths::new(&cfg.knobs);
    assert!(dps.sync(&bs, &cfg.knobs).is_empty());
    for f in FLOWS {
        bs.map["br0"]
            .shared
            .flow_mod_text(FlowModCommand::Add, f)
            .expect("flow");
    }

    for (port, frames) in sequence() {
        let hex: Vec<String> = frames
            .iter()
            .map(|f| testutil::packets::to_hex(f))
            .collect();
        let mut a = vec!["netdev-dummy/receive".to_string()];
        a.extend(args(port, &hex).iter().map(|s| (*s).to_string()));
        assert_eq!(ovs.appctl(&a).expect("ovs receive").trim(), "");
        assert_eq!(
            dps.netdev_dummy_receive(&args(port, &hex)),
            Ok(String::new())
        );
        // One command at a time on both, so each port's order is defined.
        wait_same_totals(&odir, &dir);
    }
    for (i, n) in (1..=3).zip(expected_counts()) {
        let theirs = wait_pcap(&odir.join(format!("p{i}.pcap")), n, WAIT);
        let ours = wait_pcap(&dir.join(format!("p{i}.pcap")), n, WAIT);
        assert_eq!(theirs.len(), n, "OVS p{i}");
        assert_eq!(ours, theirs, "p{i}: flowswitch's frames differ from OVS's");
    }
    // Errors agree in kind: an unknown port and bad hex are refused by both.
    assert!(ovs.appctl(&["netdev-dummy/receive", "p9", "00"]).is_err());
    assert!(dps.netdev_dummy_receive(&["p9", "00"]).is_err());
    assert!(ovs.appctl(&["netdev-dummy/receive", "p1", "abc"]).is_err());
    assert!(dps.netdev_dummy_receive(&["p1", "abc"]).is_err());
    assert!(dps.shutdown().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lets both switches finish a command: waits (bounded) until both have written as many
/// frames in all.
fn wait_same_totals(odir: &Path, dir: &Path) {
    let total = |d: &Path| {
        (1..=3)
            .map(|i| read_pcap(&d.join(format!("p{i}.pcap"))).len())
            .sum::<usize>()
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let ours = total(dir);
        let theirs = total(odir);
        if ours == theirs && ours > 0 || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
