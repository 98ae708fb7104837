//! `flowswitch vswitchd` as a process, driven by the stock OVS tools (issue 15): started
//! as OVS's daemon is (`--pidfile --detach --log-file`), found by `ovs-vsctl --wait` and
//! `ovs-appctl` with no extra options, owner-only sockets, a malformed control request
//! answered with an error, a clean exit on `ovs-appctl exit` and on `SIGTERM`, and the
//! embedded default (no database given).

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Env, pcap_frames};

#[test]
fn stock_tools_find_and_stop_the_daemon() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let env = Env::new("life", true);
    let db = format!("unix:{}", env.dir.join("db.sock").display());
    env.start_daemon(&[&db, "--enable-dummy=override"]);
    let pid = env.pid().expect("pidfile written before --detach returns");
    // ovs-vsctl --wait returns once the daemon applied the change.
    env.ok(&["ovs-vsctl", "add-br", "br0", "--", "add-port", "br0", "p1"]);
    assert_eq!(
        env.ok(&["ovs-vsctl", "get", "interface", "p1", "ofport"])
            .trim(),
        "1"
    );
    // ovs-appctl finds it through the pidfile.
    let v = env.ok(&["ovs-appctl", "version"]);
    assert!(
        v.contains("flowswitch") && v.trim().ends_with("3.1.0"),
        "{v}"
    );
    // Owner-only control socket.
    let ctl = env.dir.join(format!("ovs-vswitchd.{pid}.ctl"));
    let mode = std::fs::metadata(&ctl).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "control socket mode {mode:o}");
    // A malformed request: an unknown command is an error (exit 2), a garbage line drops
    // only that connection; the daemon still answers.
    let bad = env.run(&["ovs-appctl", "no/such-command"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a valid command"));
    {
        let mut s = std::os::unix::net::UnixStream::connect(&ctl).unwrap();
        s.write_all(b"{\"method\": 42, \"params\": \"x\"}\n\x00\xff garbage")
            .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    }
    env.ok(&["ovs-appctl", "vlog/set", "bridge:file:dbg"]);
    assert!(env.ok(&["ovs-appctl", "vlog/list"]).contains("bridge"));
    // ovs-appctl exit: the process goes and leaves nothing behind.
    env.ok(&["ovs-appctl", "-t", "ovs-vswitchd", "exit"]);
    env.wait_gone(pid);
    assert_eq!(env.leftovers(), Vec::<String>::new(), "log:\n{}", env.log());

    // SIGTERM does the same.
    env.start_daemon(&[&db, "--enable-dummy=override"]);
    let pid = env.pid().unwrap();
    // The configuration made before is still there: the new daemon applies it.
    env.ok(&["ovs-vsctl", "add-port", "br0", "p2"]);
    assert_eq!(
        env.ok(&["ovs-vsctl", "get", "interface", "p2", "ofport"])
            .trim(),
        "2"
    );
    assert!(
        Command::new("kill")
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success()
    );
    env.wait_gone(pid);
    assert_eq!(env.leftovers(), Vec::<String>::new(), "log:\n{}", env.log());
    // A second daemon on the same run directory is refused while one runs.
    env.ok(&["flowswitch", "vswitchd", &db, "--pidfile", "--detach"]);
    let again = env.run(&["flowswitch", "vswitchd", &db, "--pidfile", "--detach"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already running"));
    env.ok(&["ovs-appctl", "exit"]);
}

#[test]
fn embedded_default_serves_ovs_schema_privately() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let env = Env::new("embedded", false);
    env.start_daemon(&[]);
    let pid = env.pid().unwrap();
    let ports = env.ok(&["ovs-vsctl", "list-ports", "br0"]);
    assert_eq!(ports.split_whitespace().collect::<Vec<_>>(), ["p1", "p2"]);
    env.ok(&[
        "ovs-vsctl",
        "add-port",
        "br0",
        "p3",
        "--",
        "set",
        "interface",
        "p3",
        "type=dummy",
    ]);
    assert_eq!(
        env.ok(&["ovs-vsctl", "get", "interface", "p3", "ofport"])
            .trim(),
        "3"
    );
    env.ok(&["ovs-appctl", "exit"]);
    env.wait_gone(pid);
    let left: Vec<String> = std::fs::read_dir(&env.dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".log"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bad_invocations_are_clear_errors() {
    let env = Env::new("bad", false);
    for (args, want) in [
        (
            vec!["flowswitch", "vswitchd", "--enable-dummy=sometimes"],
            "override",
        ),
        (
            vec!["flowswitch", "vswitchd", "--config", "/nonexistent.toml"],
            "nonexistent",
        ),
        (
            vec![
                "flowswitch",
                "vswitchd",
                "--metrics",
                "0.0.0.0:0",
                "--config",
                "/dev/null",
            ],
            "loopback",
        ),
    ] {
        let o = env.run(&args);
        assert!(!o.status.success(), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
}

#[test]
fn packets_flow_through_ports_configured_with_ovs_tools() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let env = Env::new("packets", true);
    let db = format!("unix:{}", env.dir.join("db.sock").display());
    env.start_daemon(&[&db]);
    let tx = |p: &str| env.dir.join(format!("{p}-tx.pcap"));
    let mut add = vec![
        "ovs-vsctl",
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "fail-mode=secure",
    ];
    let opts: Vec<String> = (1..=3)
        .map(|i| format!("options:tx_pcap={}", tx(&format!("p{i}")).display()))
        .collect();
    let names = ["p1", "p2", "p3"];
    let reqs = ["ofport_request=1", "ofport_request=2", "ofport_request=3"];
    for i in 0..3 {
        add.extend([
            "--",
            "add-port",
            "br0",
            names[i],
            "--",
            "set",
            "interface",
            names[i],
            "type=dummy",
            reqs[i],
            &opts[i],
        ]);
    }
    env.ok(&add);
    env.ok(&[
        "ovs-ofctl",
        "add-flow",
        "br0",
        "priority=10,in_port=1,udp,actions=output:2",
    ]);
    env.ok(&[
        "ovs-ofctl",
        "add-flow",
        "br0",
        "priority=10,in_port=1,tcp,actions=output:3",
    ]);
    env.ok(&["ovs-ofctl", "add-flow", "br0", "priority=0,actions=drop"]);
    let udp =
        "ffffffffffff00000000000108004500001c0000000040110000c0a80001c0a80002000100020008ffff";
    let tcp = "ffffffffffff0000000000010800450000280000000040060000c0a80001c0a800020001000200000000000000005002ffff00000000";
    for _ in 0..3 {
        env.ok(&["ovs-appctl", "netdev-dummy/receive", "p1", udp]);
    }
    env.ok(&["ovs-appctl", "netdev-dummy/receive", "p1", tcp]);
    env.ok(&["ovs-appctl", "netdev-dummy/receive", "p2", udp]);
    // The revalidator pushes datapath stats up to the rules within a pass.
    env.ok(&["ovs-appctl", "revalidator/wait"]);
    let t0 = Instant::now();
    loop {
        let flows = env.ok(&["ovs-ofctl", "dump-flows", "br0"]);
        let n = |m: &str| {
            flows
                .lines()
                .find(|l| l.contains(m))
                .and_then(|l| l.split("n_packets=").nth(1))
                .and_then(|r| r.split(',').next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if n("udp") == Some(3) && n("tcp") == Some(1) && n("priority=0") == Some(1) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "counters never reached 3/1/1:\n{flows}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let unhex = |h: &str| hex_bytes(h);
    assert_eq!(pcap_frames(&tx("p2")), vec![unhex(udp); 3]);
    assert_eq!(pcap_frames(&tx("p3")), vec![unhex(tcp)]);
    assert!(pcap_frames(&tx("p1")).is_empty());
    let stats = env.ok(&["ovs-appctl", "dpif-netdev/pmd-stats-show"]);
    assert!(stats.contains("packets received: 5"), "{stats}");
    // Port counters reach OpenFlow port stats.
    let ports = env.ok(&["ovs-ofctl", "dump-ports", "br0"]);
    // `port  N: rx …` then its `tx …` line.
    let line = |p: &str, dir: &str| -> String {
        let lines: Vec<&str> = ports.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("port  {p}:")))
            .unwrap_or_else(|| panic!("no port {p} in:\n{ports}"));
        let l = if dir == "rx" {
            lines[at]
        } else {
            lines.get(at + 1).copied().unwrap_or("")
        };
        l.to_owned()
    };
    assert!(line("1", "rx").contains("rx pkts=4,"), "{ports}");
    assert!(line("2", "rx").contains("rx pkts=1,"), "{ports}");
    assert!(line("2", "tx").contains("tx pkts=3,"), "{ports}");
    assert!(line("3", "tx").contains("tx pkts=1,"), "{ports}");
    // ... and Interface:statistics, refreshed every 5 s as OVS's.
    let t0 = Instant::now();
    loop {
        let st = env.ok(&["ovs-vsctl", "get", "interface", "p1", "statistics"]);
        if st.contains("rx_packets=4") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(12),
            "statistics never showed rx_packets=4: {st}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // `coverage/show` counts the megaflows installed (udp and tcp from p1, udp from p2),
    // the ports added, the configurations applied and the control requests, once a 5 s
    // sample has run.
    let t0 = Instant::now();
    let total = |text: &str, name: &str| -> Option<u64> {
        let l = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))?;
        l.rsplit("total: ").next()?.parse().ok()
    };
    let cov = loop {
        let cov = env.ok(&["ovs-appctl", "coverage/show"]);
        if total(&cov, "dpif_flow_put") == Some(3) {
            break cov;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(12),
            "coverage never showed 3 megaflows:\n{cov}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(total(&cov, "dpif_port_add") >= Some(3), "{cov}");
    assert!(total(&cov, "bridge_reconfigure") >= Some(1), "{cov}");
    assert!(total(&cov, "unixctl_received") >= Some(5), "{cov}");
    assert_eq!(
        env.ok(&["ovs-appctl", "coverage/read-counter", "dpif_flow_put"])
            .trim(),
        "3"
    );
    env.ok(&["ovs-appctl", "exit"]);
}

fn hex_bytes(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

/// Real ports from `Interface` rows (issue 16): `system` → AF_PACKET, `afxdp` → AF_XDP,
/// `internal` → a tap the daemon creates and removes; interfaces that cannot be opened get
/// `ofport` −1 and OVS's `error`.
#[test]
fn real_ports_from_interface_rows() {
    if let Some(why) = testutil::ovs::ovs_missing_reason()
        .or_else(testutil::netns::netns_missing_reason)
        .or_else(|| testutil::netns::tool_missing_reason("ping"))
        .or_else(|| testutil::netns::tool_missing_reason("ethtool"))
        .or_else(netdev::afxdp_missing_reason)
    {
        testutil::skip(&why);
        return;
    }
    use testutil::netns::{Netns, Veth};
    let hosts: Vec<(Netns, Veth)> = (1..=2)
        .map(|i| {
            let ns = Netns::new(&format!("r{i}")).unwrap();
            let v = Veth::new(&ns, &[&format!("10.81.0.{i}/24")], None).unwrap();
            ns.exec(&["ethtool", "-K", &v.inside, "tx", "off"]).unwrap();
            (ns, v)
        })
        .collect();
    let big_ns = Netns::new("rb").unwrap();
    let big = Veth::new(&big_ns, &[], Some(4000)).unwrap();
    let env = Env::new("real", true);
    let db = format!("unix:{}", env.dir.join("db.sock").display());
    env.start_daemon(&[&db]);
    let (o1, o2) = (&hosts[0].1.outside, &hosts[1].1.outside);
    let tap = testutil::netns::unique_name("t");
    env.ok(&[
        "ovs-vsctl",
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
        "--",
        "add-port",
        "br0",
        o1,
        "--",
        "add-port",
        "br0",
        o2,
        "--",
        "set",
        "interface",
        o2,
        "type=afxdp",
        "--",
        "add-port",
        "br0",
        &big.outside,
        "--",
        "add-port",
        "br0",
        "fsnosuchif7",
        "--",
        "add-port",
        "br0",
        &tap,
        "--",
        "set",
        "interface",
        &tap,
        "type=internal",
    ]);
    let get = |i: &str, col: &str| env.ok(&["ovs-vsctl", "get", "interface", i, col]);
    assert_eq!(get(o1, "ofport").trim(), "1");
    assert_eq!(get(o2, "ofport").trim(), "2");
    hosts[0]
        .0
        .exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.81.0.2"])
        .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", env.log()));
    // State columns as OVS keeps them, refreshed with the statistics.
    let wait_for = |i: &str, col: &str, want: &str| {
        let t0 = Instant::now();
        while get(i, col).trim() != want && t0.elapsed() < Duration::from_secs(12) {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(get(i, col).trim(), want, "{i} {col}");
    };
    wait_for(o1, "link_state", "up");
    wait_for(o1, "admin_state", "up");
    wait_for(o1, "mtu", "1500");
    let ifindex = std::fs::read_to_string(format!("/sys/class/net/{o1}/ifindex")).unwrap();
    wait_for(o1, "ifindex", ifindex.trim());
    let mac = std::fs::read_to_string(format!("/sys/class/net/{o1}/address")).unwrap();
    wait_for(o1, "mac_in_use", &format!("\"{}\"", mac.trim()));
    testutil::netns::ip(&["link", "set", o1, "down"]).unwrap();
    wait_for(o1, "admin_state", "down");
    wait_for(o1, "link_state", "down");
    testutil::netns::ip(&["link", "set", o1, "up"]).unwrap();
    // Cannot be opened: OVS's error text and ofport -1 (the datapath's refusal is written
    // back after the port was numbered, so wait for it).
    let t0 = Instant::now();
    while get(&big.outside, "ofport").trim() != "-1" && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(&big.outside, "ofport").trim(), "-1", "{}", env.log());
    assert!(
        get(&big.outside, "error").contains("MTU 4000"),
        "{}",
        get(&big.outside, "error")
    );
    assert_eq!(get("fsnosuchif7", "ofport").trim(), "-1");
    assert!(get("fsnosuchif7", "error").contains("No such device"));
    // The internal port is a tap on the host while it exists.
    assert!(
        testutil::netns::ip(&["link", "show", &tap]).is_ok(),
        "{}",
        env.log()
    );
    let show = env.ok(&["ovs-appctl", "dpctl/show"]);
    assert!(show.contains(&format!("{o2} (afxdp)")), "{show}");
    assert!(show.contains(&format!("{tap} (tap)")), "{show}");
    env.ok(&["ovs-vsctl", "del-port", "br0", &tap]);
    assert!(
        testutil::netns::ip(&["link", "show", &tap]).is_err(),
        "tap removed with its port"
    );
    let pid = env.pid().unwrap();
    env.ok(&["ovs-appctl", "exit"]);
    env.wait_gone(pid);
    let link = testutil::netns::ip(&["link", "show", o2]).unwrap();
    assert!(!link.contains("xdp"), "{link}");
}

/// `other_config:vlan-limit` as OVS: unset, the daemon parses one VLAN tag (a double-tagged
/// packet's inner TPID is its `dl_type`, nothing after it parsed); set to 2 (`ovs-vsctl`
/// waits until it is applied) both tags and the IP header behind them.
#[test]
fn vlan_limit_follows_other_config() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let env = Env::new("vlan", true);
    let db = format!("unix:{}", env.dir.join("db.sock").display());
    env.start_daemon(&[&db, "--enable-dummy=override"]);
    env.ok(&["ovs-vsctl", "add-br", "br0", "--", "add-port", "br0", "p1"]);
    let qinq =
        "000000000002000000000001810000148100001e08004500001400000000401100000a0000010a000002";
    let flow = |env: &Env| {
        let t = env.ok(&["ovs-appctl", "ofproto/trace", "br0", "in_port=1", qinq]);
        t.lines()
            .find_map(|l| l.strip_prefix("Flow: "))
            .unwrap_or_else(|| panic!("no Flow: line in\n{t}"))
            .to_owned()
    };
    let one = flow(&env);
    assert!(
        one.starts_with("in_port=1,dl_vlan=20,") && one.ends_with(",dl_type=0x8100"),
        "{one}"
    );
    env.ok(&[
        "ovs-vsctl",
        "set",
        "Open_vSwitch",
        ".",
        "other_config:vlan-limit=2",
    ]);
    let two = flow(&env);
    assert!(
        two.starts_with("udp,in_port=1,dl_vlan=20,") && two.contains(",dl_vlan1=30,"),
        "{two}"
    );
}
