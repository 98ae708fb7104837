//! The issue-#17 load-balancing actions end to end (session 13): the same bridge, flows and
//! packets in real `ovs-vswitchd` (dummy datapath) and in `flowswitch vswitchd`; every port
//! must send the same frames. `check_pkt_larger` is executed per packet by the datapath
//! (`check_pkt_len`), so packets of one flow but two sizes take two branches through one
//! megaflow; `multipath`, `bundle` and `bundle_load` pick links by OVS's hashes.

mod common;

use std::time::{Duration, Instant};

use common::{Env, pcap_frames};
use testutil::packets::{tcp4, to_hex, udp4};

const FLOWS: &[&str] = &[
    "table=0,in_port=1,udp,actions=check_pkt_larger(200)->NXM_NX_REG0[0],resubmit(,1)",
    "table=0,in_port=1,tcp,actions=multipath(symmetric_l4,7,hrw,3,0,NXM_NX_REG1[0..1]),resubmit(,2)",
    "table=0,in_port=4,udp,actions=bundle(symmetric_l3l4+udp,3,hrw,ofport,members:2,3,9)",
    "table=0,in_port=4,tcp,actions=bundle_load(eth_src,1,active_backup,ofport,NXM_NX_REG2[],members:8,3,2),check_pkt_larger(100)->NXM_NX_REG0[1],resubmit(,3)",
    "table=1,reg0=0x1/0x1,actions=mod_dl_src:00:00:5e:00:00:01,output:2",
    "table=1,reg0=0/0x1,actions=output:3,mod_vlan_vid:9,output:2",
    "table=2,reg1=0,actions=output:2",
    "table=2,reg1=1,actions=output:3",
    "table=2,reg1=2,actions=mod_dl_dst:00:00:5e:00:00:02,output:2",
    "table=3,reg2=3,reg0=0x2/0x2,actions=output:2",
    "table=3,reg2=3,reg0=0/0x2,actions=output:3",
];

/// Frames: UDP of two sizes around 200 bytes, TCP around 100 bytes, several addresses.
fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    for i in 0..6u8 {
        let (s, d) = ([10, 0, 0, 1 + i], [10, 0, 1, 9 - i]);
        v.push(("p1", udp4(s, d, 1000 + u16::from(i), 53, 20)));
        v.push(("p1", udp4(s, d, 1000 + u16::from(i), 53, 400)));
        v.push(("p1", tcp4(s, d, 4000 + u16::from(i), 80, 0x02, 0)));
        v.push(("p4", udp4(s, d, 7 * u16::from(i), 99, 30)));
        v.push(("p4", tcp4(s, d, 4000, 80, 0x10, 10)));
        v.push(("p4", tcp4(s, d, 4000, 80, 0x10, 200)));
    }
    v
}

/// Runs the bridge in one daemon; the frames each of p1..p4 sent, once `want` (when given)
/// is reached or 10 s have passed.
fn run(ours: bool, want: Option<&[Vec<Vec<u8>>]>) -> Vec<Vec<Vec<u8>>> {
    let env = Env::new(if ours { "lb-ours" } else { "lb-ovs" }, true);
    let db = format!("unix:{}", env.dir.join("db.sock").display());
    if ours {
        env.start_daemon(&[&db]);
    } else {
        env.ok(&[
            "ovs-vswitchd",
            &db,
            "--pidfile",
            "--detach",
            "--log-file",
            "--enable-dummy=override",
            "--disable-system",
        ]);
    }
    let tx = |i: usize| env.dir.join(format!("p{i}-tx.pcap"));
    let mut add: Vec<String> = ["ovs-vsctl", "add-br", "br0", "--", "set", "bridge", "br0"]
        .map(String::from)
        .to_vec();
    add.push("fail-mode=secure".into());
    for i in 1..=4 {
        add.extend([
            "--".to_string(),
            "add-port".into(),
            "br0".into(),
            format!("p{i}"),
            "--".into(),
            "set".into(),
            "interface".into(),
            format!("p{i}"),
            "type=dummy".into(),
            format!("ofport_request={i}"),
            format!("options:tx_pcap={}", tx(i).display()),
        ]);
    }
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    env.ok(&add);
    let file = env.dir.join("flows.txt");
    std::fs::write(&file, FLOWS.join("\n") + "\n").unwrap();
    env.ok(&["ovs-ofctl", "add-flows", "br0", file.to_str().unwrap()]);
    for (port, f) in frames() {
        env.ok(&[
            "ovs-appctl",
            "netdev-dummy/receive",
            port,
            &to_hex(f.as_slice()),
        ]);
    }
    let t0 = Instant::now();
    let got = loop {
        let got: Vec<Vec<Vec<u8>>> = (1..=4).map(|i| pcap_frames(&tx(i))).collect();
        let done = match want {
            Some(w) => got.iter().map(Vec::len).eq(w.iter().map(Vec::len)),
            None => t0.elapsed() > Duration::from_secs(2),
        };
        if done || t0.elapsed() > Duration::from_secs(10) {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = env.run(&["ovs-appctl", "exit"]);
    got
}

#[test]
fn lb_actions_forward_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let ovs = run(false, None);
    let total: usize = ovs.iter().map(Vec::len).sum();
    assert!(total >= 40, "OVS sent only {total} frames: {ovs:?}");
    let ours = run(true, Some(&ovs));
    for (i, (o, v)) in ours.iter().zip(&ovs).enumerate() {
        let hex = |fs: &[Vec<u8>]| fs.iter().map(|f| to_hex(f)).collect::<Vec<_>>();
        assert_eq!(hex(o), hex(v), "port p{}: ours vs OVS", i + 1);
    }
}
