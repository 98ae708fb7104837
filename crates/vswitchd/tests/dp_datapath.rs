//! The daemon's datapath (`vswitchd::dp`) over bridges built by `Bridges::reconcile` from
//! made-up configurations: frames injected with `netdev-dummy/receive` come out in the
//! right `tx_pcap` files, OpenFlow rule counters move after a revalidator pass, ports come
//! and go while the thread runs without losing the other ports' frames, bad input is a
//! clear error, and shutdown leaves no thread running.

mod dp_common;
use dp_common::*;

use std::path::Path;
use std::time::Duration;

use ofproto::FlowModCommand;
use vswitchd::bridges::{Bridges, DummyMode};
use vswitchd::config::{Config, DpKnobs};
use vswitchd::dp::Datapaths;

const WAIT: Duration = Duration::from_secs(20);

/// br0 with its own port, p1 (rxq_pcap), p2 and p3 (tx_pcap), p4 (nothing).
fn three_ports(dir: &Path) -> Config {
    let f = |n: &str| dir.join(n).display().to_string();
    config(vec![bridge(
        1,
        "br0",
        "netdev",
        vec![
            port(iface(10, "br0", "internal", None, &[])),
            port(iface(
                11,
                "p1",
                "dummy",
                Some(1),
                &[("rxq_pcap", f("p1-rx.pcap"))],
            )),
            port(iface(
                12,
                "p2",
                "dummy",
                Some(2),
                &[("tx_pcap", f("p2-tx.pcap"))],
            )),
            port(iface(
                13,
                "p3",
                "dummy",
                Some(3),
                &[("tx_pcap", f("p3-tx.pcap"))],
            )),
        ],
    )])
}

fn n_packets(bs: &Bridges, bridge: &str) -> Vec<u64> {
    let b = bs.map[bridge].shared.read();
    let mut v: Vec<u64> = b
        .table(0)
        .map(|t| t.iter().map(|(_, r)| r.n_packets).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn frames_reach_tx_pcaps_and_rule_counters_move() {
    let dir = tempdir("basic");
    let mut bs = Bridges::new(DummyMode::Off);
    let cfg = three_ports(&dir);
    bs.reconcile(&cfg);
    let mut dps = Datapaths::new(&cfg.knobs);
    let problems = dps.sync(&bs, &cfg.knobs);
    assert!(problems.is_empty(), "{problems:?}");
    let shared = bs.map["br0"].shared.clone();
    shared
        .flow_mod_text(FlowModCommand::Add, "in_port=1,actions=output:2")
        .expect("flow");
    shared
        .flow_mod_text(FlowModCommand::Add, "in_port=2,actions=output:3,output:3")
        .expect("flow");

    let frames: Vec<Vec<u8>> = (0..40).map(frame).collect();
    for f in &frames[..30] {
        dps.receive("p1", f).expect("receive");
    }
    // Several frames in one verb, as OVS's netdev-dummy/receive takes them.
    let hex: Vec<String> = frames[30..]
        .iter()
        .map(|f| testutil::packets::to_hex(f))
        .collect();
    let mut args = vec!["p1"];
    args.extend(hex.iter().map(String::as_str));
    assert_eq!(dps.netdev_dummy_receive(&args), Ok(String::new()));
    dps.receive("p2", &frame(999)).expect("receive");

    // Readable while the daemon runs (flushed per burst).
    assert_eq!(wait_pcap(&dir.join("p2-tx.pcap"), 40, WAIT), frames);
    assert_eq!(
        wait_pcap(&dir.join("p3-tx.pcap"), 2, WAIT),
        vec![frame(999), frame(999)]
    );
    assert_eq!(
        read_pcap(&dir.join("p1-rx.pcap")),
        frames,
        "rxq_pcap: what was injected"
    );
    assert!(dps.drain(WAIT));

    // The rule counters move after a revalidator pass (stats pushed).
    dps.revalidator_wait();
    assert_eq!(n_packets(&bs, "br0"), vec![1, 40]);

    // The verbs' shapes.
    let show = dps.dpctl_show();
    assert!(show.starts_with("netdev@ovs-netdev:\n  lookups: hit:39 missed:2 lost:0\n  flows: 2\n  port 0: ovs-netdev (dummy-internal)\n"), "{show}");
    let b = &bs.map["br0"];
    for (n, kind) in [("br0", "dummy-internal"), ("p1", "dummy"), ("p3", "dummy")] {
        let line = format!("  port {}: {n} ({kind})\n", b.ifaces[n].dp_port);
        assert!(show.contains(&line), "{line:?} in {show}");
    }
    let stats = dps.pmd_stats_show();
    assert!(
        stats.starts_with("main thread:\n  packets received: 41\n  packet recirculations: 0\n"),
        "{stats}"
    );
    assert!(
        stats.contains("\n  miss with success upcall: 2\n"),
        "{stats}"
    );
    let flows = dps.dpctl_dump_flows(&[]).expect("dump");
    let lines: Vec<&str> = flows.lines().collect();
    assert_eq!(lines[0], "flow-dump from the main thread:");
    assert_eq!(lines.len(), 3, "{flows}");
    let p1 = b.ifaces["p1"].dp_port;
    let p2 = b.ifaces["p2"].dp_port;
    assert!(
        lines.iter().any(|l| l.contains(&format!("in_port({p1})"))
            && l.contains("packets:40")
            && l.ends_with(&format!("actions:{p2}"))),
        "{flows}"
    );
    let more = dps.dpctl_dump_flows(&["-m"]).expect("dump -m");
    assert!(
        more.contains("ufid:") && more.contains("in_port(p1)"),
        "{more}"
    );
    assert!(dps.dpctl_dump_flows(&["-x"]).is_err());
    // The same dump by datapath name (the `used:` ages move on between two dumps).
    let unaged = |d: &str| -> String {
        d.split(", ")
            .filter(|p| !p.starts_with("used:"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert_eq!(
        dps.dpctl_dump_flows(&["netdev@ovs-netdev"])
            .map(|d| unaged(&d)),
        Ok(unaged(&flows))
    );
    assert_eq!(
        dps.dpctl_dump_flows(&["dummy@ovs-dummy"]),
        Ok(String::new())
    );
    let up = dps.upcall_show();
    assert!(
        up.starts_with("netdev@ovs-netdev:\n  flows         : (current 2)"),
        "{up}"
    );
    assert_eq!(
        dps.pmd_rxq_show(),
        "Displaying last 60 seconds pmd usage %\n"
    );
    assert_eq!(
        dps.pmd_perf_show(),
        "",
        "no PMD thread, as OVS with non-PMD ports only"
    );

    // Clear, purge.
    assert_eq!(dps.pmd_stats_clear(), Ok(String::new()));
    assert!(dps.pmd_stats_show().contains("\n  packets received: 0\n"));
    assert_eq!(dps.revalidator_purge(), "");
    assert_eq!(dps.dpctl_dump_flows(&[]).expect("dump"), "");
    assert!(dps.dpctl_show().contains("\n  flows: 0\n"));

    // Shutdown: threads joined, files complete.
    assert!(dps.shutdown().is_empty());
    assert!(dps.get("br0").is_none() && dps.dpctl_show().is_empty());
    assert_eq!(read_pcap_strict(&dir.join("p2-tx.pcap")).len(), 40);
    assert_eq!(read_pcap_strict(&dir.join("p1-rx.pcap")).len(), 40);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ports_come_and_go_while_running_without_losing_frames() {
    let dir = tempdir("reload");
    let mut bs = Bridges::new(DummyMode::Off);
    let cfg = three_ports(&dir);
    bs.reconcile(&cfg);
    let mut dps = Datapaths::new(&cfg.knobs);
    assert!(dps.sync(&bs, &cfg.knobs).is_empty());
    let shared = bs.map["br0"].shared.clone();
    shared
        .flow_mod_text(FlowModCommand::Add, "in_port=1,actions=output:2")
        .expect("flow");

    // Each round queues frames on p1, then changes the ports at once: the thread is
    // stopped while it works through them (mid-burst), and must lose none.
    let n = 3000u16;
    let mut sent = 0u16;
    let mut cfgs = Vec::new();
    for round in 0..6u128 {
        let mut c = three_ports(&dir);
        let b = c.bridges.get_mut("br0").expect("br0");
        if round % 2 == 0 {
            let (k, v) = port(iface(100 + round, &format!("x{round}"), "dummy", None, &[]));
            b.ports.insert(k, v);
        } else {
            b.ports.remove("p3");
        }
        cfgs.push(c);
    }
    for c in &cfgs {
        for _ in 0..n / 6 {
            dps.receive("p1", &frame(sent)).expect("receive");
            sent += 1;
        }
        bs.reconcile(c);
        let problems = dps.sync(&bs, &c.knobs);
        assert!(problems.is_empty(), "{problems:?}");
        let dp = dps.get("br0").expect("br0");
        assert!(dp.running());
        let names: Vec<String> = dp.ports().into_iter().map(|(n, _)| n).collect();
        let want: Vec<String> = bs.map["br0"].ifaces.keys().cloned().collect();
        assert_eq!(names, want);
    }
    assert_eq!(dps.get("br0").expect("br0").reloads(), 6);
    let out = wait_pcap(&dir.join("p2-tx.pcap"), usize::from(sent), WAIT);
    let want: Vec<Vec<u8>> = (0..sent).map(frame).collect();
    assert_eq!(out.len(), want.len(), "no frame lost across reloads");
    assert_eq!(out, want, "in order");
    // A removed port is gone from the verbs and from receive.
    let x0 = "x0";
    assert!(dps.get("br0").expect("br0").has_port(x0) == bs.map["br0"].ifaces.contains_key(x0));
    assert!(dps.shutdown().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn options_change_reopens_the_port_and_appends_like_ovs() {
    let dir = tempdir("opts");
    let mut bs = Bridges::new(DummyMode::Off);
    let cfg = three_ports(&dir);
    bs.reconcile(&cfg);
    let mut dps = Datapaths::new(&cfg.knobs);
    assert!(dps.sync(&bs, &cfg.knobs).is_empty());
    bs.map["br0"]
        .shared
        .flow_mod_text(FlowModCommand::Add, "in_port=1,actions=output:2")
        .expect("flow");
    dps.receive("p1", &frame(1)).expect("receive");
    assert_eq!(wait_pcap(&dir.join("p2-tx.pcap"), 1, WAIT).len(), 1);
    // p2's tx_pcap moves to p1-rx.pcap's neighbour; the old file is closed whole.
    let mut c = three_ports(&dir);
    let p2 = &mut c
        .bridges
        .get_mut("br0")
        .expect("br0")
        .ports
        .get_mut("p2")
        .expect("p2")
        .interfaces[0];
    p2.options
        .insert("tx_pcap".into(), dir.join("new.pcap").display().to_string());
    bs.reconcile(&c);
    assert!(dps.sync(&bs, &c.knobs).is_empty());
    dps.receive("p1", &frame(2)).expect("receive");
    assert_eq!(wait_pcap(&dir.join("new.pcap"), 1, WAIT), vec![frame(2)]);
    assert_eq!(read_pcap(&dir.join("p2-tx.pcap")), vec![frame(1)]);
    // Back to the first file: appended to, as OVS opens it ("ab").
    let c = three_ports(&dir);
    bs.reconcile(&c);
    assert!(dps.sync(&bs, &c.knobs).is_empty());
    dps.receive("p1", &frame(3)).expect("receive");
    assert_eq!(
        wait_pcap(&dir.join("p2-tx.pcap"), 2, WAIT),
        vec![frame(1), frame(3)]
    );
    // A pcap that cannot be opened is a problem named, the port still works.
    let mut c = three_ports(&dir);
    let p3 = &mut c
        .bridges
        .get_mut("br0")
        .expect("br0")
        .ports
        .get_mut("p3")
        .expect("p3")
        .interfaces[0];
    p3.options
        .insert("tx_pcap".into(), "/nonexistent-dir/x.pcap".into());
    bs.reconcile(&c);
    let problems = dps.sync(&bs, &c.knobs);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].0.as_str(), problems[0].1.as_str()),
        ("br0", "p3")
    );
    assert!(
        problems[0].2.contains("/nonexistent-dir/x.pcap"),
        "{problems:?}"
    );
    assert!(dps.get("br0").expect("br0").has_port("p3"));
    assert!(dps.shutdown().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn flowswitch_rx_pcap_replays_a_file_as_input() {
    let dir = tempdir("replay");
    let input = dir.join("in.pcap");
    let frames: Vec<Vec<u8>> = (0..100).map(frame).collect();
    netdev::write_pcap(&input, &frames).expect("write");
    let f = |n: &str| dir.join(n).display().to_string();
    let cfg = config(vec![bridge(
        1,
        "br0",
        "dummy",
        vec![
            port(iface(
                11,
                "p1",
                "dummy",
                Some(1),
                &[("flowswitch-rx-pcap", f("in.pcap"))],
            )),
            port(iface(
                12,
                "p2",
                "system",
                Some(2),
                &[("pcap", f("p2.pcap"))],
            )),
        ],
    )]);
    // `system` opens only under --enable-dummy=override, as in OVS's test suite.
    let mut bs = Bridges::new(DummyMode::Override);
    bs.reconcile(&cfg);
    // The flow must be there before the port reads its file: add it, then open the ports
    // through a second configuration round.
    let mut dps = Datapaths::new(&cfg.knobs);
    let mut first = cfg.clone();
    first
        .bridges
        .get_mut("br0")
        .expect("br0")
        .ports
        .remove("p1");
    let mut bs1 = Bridges::new(DummyMode::Override);
    bs1.reconcile(&first);
    drop(bs1);
    bs.map["br0"]
        .shared
        .flow_mod_text(FlowModCommand::Add, "in_port=1,actions=output:2")
        .expect("flow");
    assert!(dps.sync(&bs, &cfg.knobs).is_empty());
    assert_eq!(wait_pcap(&dir.join("p2.pcap"), 100, WAIT), frames);
    assert!(dps.dpctl_show().starts_with("dummy@ovs-dummy:\n"));
    // pcap=FILE records rx too: p2 received nothing, so only the tx frames are there.
    dps.receive("p2", &frame(7)).expect("receive");
    assert_eq!(
        wait_pcap(&dir.join("p2.pcap"), 101, WAIT).last(),
        Some(&frame(7))
    );
    assert!(dps.shutdown().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempdir("bad");
    let mut bs = Bridges::new(DummyMode::Off);
    let cfg = three_ports(&dir);
    bs.reconcile(&cfg);
    let mut dps = Datapaths::new(&cfg.knobs);
    assert!(dps.sync(&bs, &cfg.knobs).is_empty());
    let good = testutil::packets::to_hex(&frame(1));
    let err = |args: &[&str]| dps.netdev_dummy_receive(args).unwrap_err();
    assert_eq!(err(&["p9", &good]), "no such dummy netdev");
    assert!(err(&["p1"]).contains("requires at least 2 arguments"));
    assert!(err(&[]).contains("requires at least 2 arguments"));
    assert_eq!(
        err(&["p1", "abc"]),
        "syntax error at abc (odd number of hex digits)"
    );
    assert!(err(&["p1", "zz"]).starts_with("syntax error at zz (not hex digits"));
    assert!(err(&["p1", "ab cd"]).starts_with("syntax error at ab cd"));
    assert!(err(&["p1", "ffff"]).contains("shorter than an Ethernet header"));
    let big = "ab".repeat(netdev::MAX_FRAME + 1);
    assert!(err(&["p1", &big]).contains("exceeds the"), "oversize");
    assert!(err(&["p1", "--qid", "1", &good]).contains("not supported"));
    // All or nothing: a bad frame after a good one queues neither.
    assert!(dps.netdev_dummy_receive(&["p1", &good, "abc"]).is_err());
    assert!(
        dps.receive("p1", &vec![0u8; netdev::MAX_FRAME + 1])
            .unwrap_err()
            .contains("exceeds")
    );
    assert_eq!(
        dps.receive("nope", &frame(1)).unwrap_err(),
        "no such dummy netdev"
    );
    assert!(dps.drain(WAIT));
    assert!(dps.pmd_stats_show().contains("\n  packets received: 0\n"));
    assert!(read_pcap(&dir.join("p1-rx.pcap")).is_empty());
    assert!(dps.shutdown().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pinned_threads_print_as_pmd_threads_and_bridges_come_and_go() {
    let dir = tempdir("pinned");
    let f = |n: &str| dir.join(n).display().to_string();
    let knobs = DpKnobs {
        pmd_cpu_mask: Some(0x1),
        ..DpKnobs::default()
    };
    let mut cfg = config(vec![
        bridge(
            1,
            "br0",
            "netdev",
            vec![port(iface(11, "p1", "dummy", Some(1), &[]))],
        ),
        bridge(
            2,
            "br1",
            "netdev",
            vec![port(iface(
                21,
                "q1",
                "dummy",
                Some(1),
                &[("tx_pcap", f("q1.pcap"))],
            ))],
        ),
    ]);
    cfg.knobs = knobs.clone();
    let mut bs = Bridges::new(DummyMode::Off);
    bs.reconcile(&cfg);
    let mut dps = Datapaths::new(&DpKnobs::default());
    assert!(dps.sync(&bs, &knobs).is_empty());
    // Both bridges on CPU 0 (the mask's only CPU).
    for b in ["br0", "br1"] {
        assert_eq!(dps.get(b).expect(b).core(), Some(0));
    }
    bs.map["br1"]
        .shared
        .flow_mod_text(FlowModCommand::Add, "actions=in_port")
        .expect("flow");
    // A port's frames stay on its bridge: q1 back out of q1 (`in_port`).
    dps.receive("q1", &frame(5)).expect("receive");
    assert_eq!(wait_pcap(&dir.join("q1.pcap"), 1, WAIT), vec![frame(5)]);
    let stats = dps.pmd_stats_show();
    assert_eq!(
        stats.matches("pmd thread numa_id 0 core_id 0:\n").count(),
        2,
        "{stats}"
    );
    let rxq = dps.pmd_rxq_show();
    assert!(
        rxq.contains("pmd thread numa_id 0 core_id 0:\n  isolated : false\n  port: q1                queue-id:  0 (enabled)   pmd usage: NOT AVAIL\n  overhead: NOT AVAIL\n"),
        "{rxq}"
    );
    let perf = dps.pmd_perf_show();
    assert!(
        perf.contains("\npmd thread numa_id 0 core_id 0:\n"),
        "{perf}"
    );
    assert!(
        perf.contains("  Rx packets:                    1  ("),
        "{perf}"
    );
    let flows = dps.dpctl_dump_flows(&[]).expect("dump");
    assert!(
        flows.starts_with("flow-dump from pmd on cpu core: 0\n"),
        "{flows}"
    );
    assert!(dps.upcall_show().contains("netdev@ovs-netdev/br1:"));
    // The mask goes: every datapath restarts unpinned.
    assert!(dps.sync(&bs, &DpKnobs::default()).is_empty());
    assert_eq!(dps.get("br0").expect("br0").core(), None);
    // br1 goes: its datapath stops.
    cfg.bridges.remove("br1");
    bs.reconcile(&cfg);
    assert!(dps.sync(&bs, &DpKnobs::default()).is_empty());
    assert!(dps.get("br1").is_none());
    assert_eq!(
        dps.receive("q1", &frame(1)).unwrap_err(),
        "no such dummy netdev"
    );
    assert!(dps.shutdown().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
