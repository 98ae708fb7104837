//! OpenFlow asynchronous messages — packet-in (the `controller` action, a table miss,
//! `pause` and `NXT_RESUME`), port status and flow removed — through the daemon against
//! real OVS: the same bridge, ports, flows and packets on real `ovs-vswitchd` (dummy
//! datapath) and on `flowswitch vswitchd`, each with its own private `ovsdb-server` and run
//! directory, started as OVS's test suite starts `ovs-vswitchd`; several `ovs-ofctl monitor`
//! connections (one per packet-in encoding: OpenFlow 1.0 `OFPT_PACKET_IN`, `NXT_PACKET_IN`,
//! `NXT_PACKET_IN2`, OpenFlow 1.3/1.4/1.5 `OFPT_PACKET_IN`, `NXT_PACKET_IN2` over 1.3 and
//! 1.5; a small miss-len; and one without a miss-len, which OVS sends nothing) print what
//! they get, and every monitor's output must be the same on both switches, line for line,
//! xids masked. Two monitors (`NXT_PACKET_IN2` over 1.0, `OFPT_PACKET_IN` over 1.3) print
//! with `-mmm`, which adds the frame and the whole message in hex: those two encodings are
//! compared byte for byte (property order, OXM or NXM fields, padding). The frame sent on
//! after `controller` (`output:1`) must be the same too.
//!
//! What OVS 3.1 does here (and so what is expected): every packet-in is unbuffered and
//! carries the whole frame (neither `controller(max_len=N)` nor the monitor's miss-len
//! truncates without buffers); a table miss (the bridge is `fail-mode=secure`, no rule
//! matches) is sent as `no_match` to OpenFlow 1.0 connections only (OpenFlow 1.3+ drop a
//! table miss by default), with cookie 0 and table 0; the connection that set no miss-len
//! (`miss_send_len` 0 on a service connection) gets nothing at all.

use std::time::{Duration, Instant};

use testutil::packets::{self as pk, ethertype, tcp_flags};

mod common;

use common::side::{Side, our_vswitchd};

/// A monitor connection: its name, `ovs-ofctl` options before `monitor`, arguments after
/// `br0`, and whether it asked for async messages (a nonzero miss-len).
struct Monitor {
    name: &'static str,
    pre: &'static [&'static str],
    post: &'static [&'static str],
    gets_async: bool,
}

const MONITORS: &[Monitor] = &[
    // OpenFlow 1.0; ovs-ofctl asks for NXT_PACKET_IN2. `-mmm`: also the frame's and the
    // whole message's bytes in hex.
    Monitor {
        name: "of10-default",
        pre: &["-mmm"],
        post: &["65534"],
        gets_async: true,
    },
    Monitor {
        name: "of10-standard",
        pre: &[],
        post: &["65534", "-P", "standard"],
        gets_async: true,
    },
    Monitor {
        name: "of10-nxt_packet_in",
        pre: &[],
        post: &["65534", "-P", "nxt_packet_in"],
        gets_async: true,
    },
    // A miss-len shorter than the frames: OVS (no buffers) still sends whole frames.
    Monitor {
        name: "of10-miss-len-20",
        pre: &[],
        post: &["20"],
        gets_async: true,
    },
    // `-mmm`: as above.
    Monitor {
        name: "of13-standard",
        pre: &["-mmm", "-O", "OpenFlow13"],
        post: &["65534", "-P", "standard"],
        gets_async: true,
    },
    Monitor {
        name: "of13-default",
        pre: &["-O", "OpenFlow13"],
        post: &["65534"],
        gets_async: true,
    },
    Monitor {
        name: "of14-standard",
        pre: &["-O", "OpenFlow14"],
        post: &["65534", "-P", "standard"],
        gets_async: true,
    },
    Monitor {
        name: "of15-default",
        pre: &["-O", "OpenFlow15"],
        post: &["65534"],
        gets_async: true,
    },
    Monitor {
        name: "of15-standard",
        pre: &["-O", "OpenFlow15"],
        post: &["65534", "-P", "standard"],
        gets_async: true,
    },
    // No miss-len: a service connection's miss_send_len stays 0 and OVS sends it no
    // async messages.
    Monitor {
        name: "no-miss-len",
        pre: &[],
        post: &[],
        gets_async: false,
    },
];

/// The last packet sent hits `in_port=1,actions=controller` with this UDP destination port;
/// once every monitor that gets async messages printed it, all earlier packet-ins are in
/// (each connection's messages go out in order).
const SENTINEL_PORT: u16 = 9999;

/// Replaces what may differ between two correct switches: the xid (OVS sends every async
/// message with xid 0; a controller cannot rely on it), in the message's summary line and in
/// its raw hex dump (`-mmm`; bytes 4..8 of the dump's first line, which carries an ASCII
/// column, unlike the dump of the frame).
fn mask(text: &str) -> String {
    text.lines()
        .map(|l| {
            let mut l = l.to_owned();
            if let Some(i) = l.find("(xid=")
                && let Some(e) = l[i..].find(')')
            {
                l.replace_range(i + 5..i + e, "*");
            }
            // `00000000  01 04 00 78 00 00 00 00-00 00 23 20 … |...x......# ....|`
            if l.starts_with("00000000  ")
                && let Some(bar) = l.find('|')
                && l.len() >= bar + 9
                && l.len() >= 34
            {
                l.replace_range(bar + 5..bar + 9, "****");
                l.replace_range(22..33, "** ** ** **");
            }
            l
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until every async-receiving monitor of `side` printed the sentinel (then a moment
/// more, so anything sent after it shows too), or `deadline` passed; returns whether all
/// did.
fn wait_for_sentinel(side: &Side, deadline: Instant) -> bool {
    let tag = format!("tp_dst={SENTINEL_PORT}");
    loop {
        let all = MONITORS.iter().filter(|m| m.gets_async).all(|m| {
            std::fs::read_to_string(side.monitor_file(m.name)).is_ok_and(|t| t.contains(&tag))
        });
        if all {
            std::thread::sleep(Duration::from_millis(100));
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A monitor's output cut into messages (each starts at a line with its xid), or a list of
/// frames (one a line) cut into frames.
fn messages(text: &str) -> Vec<Vec<&str>> {
    let mut v: Vec<Vec<&str>> = Vec::new();
    for l in text.lines() {
        match v.last_mut() {
            Some(m) if !l.contains("(xid=") && !l.starts_with("frame ") => m.push(l),
            _ => v.push(vec![l]),
        }
    }
    v
}

/// The longest common subsequence of `a` and `b` under `same`, as aligned pairs: both
/// indices where the two match, one where only that side has an item.
fn align<T>(
    a: &[T],
    b: &[T],
    same: impl Fn(&T, &T) -> bool,
) -> Vec<(Option<usize>, Option<usize>)> {
    let (n, m) = (a.len(), b.len());
    let mut len = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[i][j] = if same(&a[i], &b[j]) {
                len[i + 1][j + 1] + 1
            } else {
                len[i + 1][j].max(len[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && same(&a[i], &b[j]) {
            out.push((Some(i), Some(j)));
            (i, j) = (i + 1, j + 1);
        } else if j == m || (i < n && len[i + 1][j] >= len[i][j + 1]) {
            out.push((Some(i), None));
            i += 1;
        } else {
            out.push((None, Some(j)));
            j += 1;
        }
    }
    out
}

/// What identifies a message's packet: its first line after the header that is neither
/// indented (`userdata=…`) nor a hex dump (the decoded frame), else its header.
fn packet_key<'a>(m: &[&'a str]) -> &'a str {
    m.iter()
        .skip(1)
        .find(|l| !l.starts_with(' ') && !l.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or(&m[0])
}

/// Two outputs side by side: messages paired by the packet they carry (so a message more or
/// less does not put every later one out of step); a pair that is equal shows as its
/// header, a pair that differs as its lines, equal ones once (`=`) and the others marked
/// `ovs` or `ours`; a message only one side sent shows whole, marked with its side.
fn side_by_side(a: &str, b: &str) -> String {
    let (a, b) = (messages(a), messages(b));
    let mut out = String::new();
    for (i, j) in align(&a, &b, |x, y| packet_key(x) == packet_key(y)) {
        match (i.map(|i| &a[i]), j.map(|j| &b[j])) {
            (Some(x), Some(y)) if x == y => out += &format!("   = {}\n", x[0]),
            (Some(x), Some(y)) => {
                out += "   ~ differs:\n";
                for (p, q) in align(x, y, |p, q| p == q) {
                    out += &match (p.map(|p| x[p]), q.map(|q| y[q])) {
                        (Some(l), Some(_)) => format!("      =    | {l}\n"),
                        (Some(l), None) => format!("    ! ovs  | {l}\n"),
                        (None, Some(l)) => format!("    ! ours | {l}\n"),
                        (None, None) => unreachable!(),
                    };
                }
            }
            (Some(x), None) => {
                out += "   ! only from OVS:\n";
                out += &x
                    .iter()
                    .map(|l| format!("    ! ovs  | {l}\n"))
                    .collect::<String>();
            }
            (None, Some(y)) => {
                out += "   ! only from flowswitch:\n";
                out += &y
                    .iter()
                    .map(|l| format!("    ! ours | {l}\n"))
                    .collect::<String>();
            }
            (None, None) => unreachable!(),
        }
    }
    if out.is_empty() {
        out = "   (nothing)\n".to_owned();
    }
    out
}

/// Packet-in through the daemon against real OVS: same monitors, same packet-ins (see the
/// file's doc).
#[test]
fn packet_in_through_the_daemon_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let (mut ovs, mut fs) = Side::both("pi", "ovs", "flowswitch", &our_vswitchd());
    // (ovs-ofctl options, flow).
    let flows: [(&[&str], &str); 7] = [
        (&[], "priority=10,in_port=1,actions=controller"),
        (
            &[],
            "priority=20,in_port=1,tcp,actions=mod_dl_src:00:00:00:00:aa:bb,controller",
        ),
        (
            &[],
            "priority=20,in_port=1,arp,actions=controller(userdata=01.02.03.04)",
        ),
        (&[], "priority=10,in_port=2,actions=controller(max_len=20)"),
        (
            &["-O", "OpenFlow13"],
            "cookie=0x1234,priority=20,in_port=2,ipv6,actions=controller",
        ),
        (
            &[],
            "table=0,in_port=3,udp,actions=load:0x5->NXM_NX_REG0[],set_field:0xabc->metadata,resubmit(,2)",
        ),
        (
            &[],
            "table=2,actions=controller(reason=no_match,max_len=128),output:1",
        ),
    ];
    // What goes wrong on our side, reported at the end with the monitors' differences.
    let mut report = String::new();
    for side in [&mut ovs, &mut fs] {
        side.add_dummy_ports(1..=3, true);
        for (opts, f) in flows {
            let mut args = vec!["ovs-ofctl"];
            args.extend_from_slice(opts);
            args.extend_from_slice(&["add-flow", "br0", f]);
            if side.name == "ovs" {
                side.must(&args);
            } else {
                let o = side.run(&args);
                if !o.status.success() {
                    report += &format!(
                        "=== {args:?} refused:\n{}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                }
            }
        }
        for m in MONITORS {
            side.start_monitor(m.name, m.pre, m.post);
        }
    }
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (a6, b6) = (
        [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    );
    let mac = [0, 0, 0, 0, 0, 9];
    let arp = pk::arp(1, mac, a, [0; 6], b);
    let packets: Vec<(&str, Vec<u8>)> = vec![
        // `controller`.
        ("p1", pk::udp4(a, b, 1, 2, 8)),
        // `controller(max_len=20)`.
        ("p2", pk::udp4(a, b, 3, 4, 8)),
        // Registers, metadata, table 2, reason no_match, `max_len=128` (the frame is
        // longer), then `output:1`.
        ("p3", pk::udp4(a, b, 5, 6, 180)),
        // `mod_dl_src` then `controller`: the modified frame goes up.
        ("p1", pk::tcp4(a, b, 7, 8, tcp_flags::SYN, 0)),
        // `controller(userdata=…)`.
        ("p1", arp.clone()),
        // The rule with a cookie.
        ("p2", pk::udp6(a6, b6, 9, 10, 4)),
        // No rule: table misses (ARP, IPv6).
        ("p3", arp),
        ("p3", pk::tcp6(a6, b6, 11, 12, tcp_flags::ACK, 2)),
        // A VLAN-tagged frame to `controller`.
        (
            "p1",
            pk::vlan(&pk::udp4(a, b, 13, 14, 8), ethertype::VLAN, 5, 3),
        ),
        // The sentinel (last).
        ("p1", pk::udp4(a, b, 15, SENTINEL_PORT, 8)),
    ];
    for side in [&ovs, &fs] {
        for (port, frame) in &packets {
            let hex = pk::to_hex(frame);
            side.must(&["ovs-appctl", "netdev-dummy/receive", port, &hex]);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let ovs_done = wait_for_sentinel(&ovs, deadline);
    let fs_done = wait_for_sentinel(&fs, deadline);
    ovs.stop_monitors();
    fs.stop_monitors();
    let read = |side: &Side, m: &Monitor| {
        mask(&std::fs::read_to_string(side.monitor_file(m.name)).unwrap_or_default())
    };
    // What the harness takes for granted about OVS.
    assert!(
        ovs_done,
        "OVS: not every monitor printed the sentinel:\n{}",
        MONITORS
            .iter()
            .map(|m| format!("--- {}:\n{}", m.name, read(&ovs, m)))
            .collect::<String>()
    );
    for m in MONITORS {
        let t = read(&ovs, m);
        assert_eq!(t.is_empty(), !m.gets_async, "OVS, monitor {}:\n{t}", m.name);
        eprintln!("--- OVS, monitor {}:\n{t}", m.name);
    }
    for m in MONITORS {
        let (x, y) = (read(&ovs, m), read(&fs, m));
        if x != y {
            report += &format!(
                "=== monitor {} (ovs-ofctl {} monitor br0 {}):\n{}",
                m.name,
                m.pre.join(" "),
                m.post.join(" "),
                side_by_side(&x, &y)
            );
        }
    }
    // The frames sent on (`output:1` after `controller`), on every port.
    for i in 1..=3 {
        let name = format!("p{i}.pcap");
        let hex = |side: &Side| {
            common::pcap_frames(&side.dir.join(&name))
                .iter()
                .enumerate()
                .map(|(k, f)| format!("frame {k}: {}", pk::to_hex(f)))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let (x, y) = (hex(&ovs), hex(&fs));
        if i == 1 {
            assert_eq!(x.lines().count(), 1, "OVS, p1's tx pcap:\n{x}");
        }
        if x != y {
            report += &format!("=== {name} (sent frames):\n{}", side_by_side(&x, &y));
        }
    }
    assert!(
        report.is_empty(),
        "packet-ins differ from OVS's (flowswitch {}):\n{report}\n--- flowswitch log tail:\n{}",
        if fs_done {
            "printed the sentinel everywhere"
        } else {
            "did not print the sentinel everywhere within 5 s"
        },
        fs.log()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(!fs.log().contains("panicked"), "{}", fs.log());
}

/// `controller(pause)` and `NXT_RESUME` against real OVS: a paused packet-in (from inside a
/// `resubmit`, with userdata, and at the top level) carries a continuation — the rest of the
/// pipeline with `unroll_xlate` markers, printed by `ovs-ofctl` as `continuation.actions=…`,
/// which must equal OVS's — and `ovs-ofctl monitor … resume` sends each back at once, after
/// which the frames the rest of the pipeline outputs must equal OVS's on every port. Only
/// the xid and the bridge's identity (`continuation.bridge`, random per switch) are masked.
#[test]
fn pause_and_resume_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let (mut ovs, mut fs) = Side::both("pr", "ovs", "flowswitch", &our_vswitchd());
    let flows = [
        "in_port=1,actions=load:0x5->NXM_NX_REG0[],resubmit(,2),output:3",
        "table=2,cookie=0x42,actions=controller(pause,userdata=aa.bb),load:0x7->NXM_NX_REG1[],output:2,resubmit(,3)",
        "table=3,reg1=0x7,actions=mod_dl_dst:00:00:00:00:00:33,output:3",
        "in_port=2,actions=controller(pause),mod_dl_src:00:00:00:00:aa:bb,output:3",
    ];
    for side in [&mut ovs, &mut fs] {
        side.add_dummy_ports(1..=3, true);
        for f in flows {
            side.must(&["ovs-ofctl", "add-flow", "br0", f]);
        }
        // `resume`: ovs-ofctl sends every continuation back as NXT_RESUME (OVS's tests use
        // it; it is not in `--help`).
        side.start_monitor("resume", &[], &["65534", "resume"]);
        for (port, n) in [("p1", 1u8), ("p2", 2)] {
            let frame = pk::udp4([10, 0, 0, n], [10, 0, 0, 9], 5, 6, 8);
            side.must(&[
                "ovs-appctl",
                "netdev-dummy/receive",
                port,
                &pk::to_hex(&frame),
            ]);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for side in [&ovs, &fs] {
        while std::fs::read_to_string(side.monitor_file("resume"))
            .map_or(0, |t| t.matches("send: NXT_RESUME").count())
            < 2
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // The resumed packets reach their ports while the monitor goes on: wait for the last
    // port's three frames (or the deadline; the comparison below then shows what is missing).
    for side in [&ovs, &fs] {
        while common::pcap_frames(&side.dir.join("p3.pcap")).len() < 3 && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    ovs.stop_monitors();
    fs.stop_monitors();
    let shown = |side: &Side| {
        let t = std::fs::read_to_string(side.monitor_file("resume")).unwrap_or_default();
        let t = mask(&t);
        t.lines()
            .filter(|l| !l.contains("fatal_signal"))
            .map(|l| {
                if l.starts_with(" continuation.bridge=") {
                    " continuation.bridge=*".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (x, y) = (shown(&ovs), shown(&fs));
    assert_eq!(
        x.matches("send: NXT_RESUME").count(),
        2,
        "OVS resumed two packets:\n{x}"
    );
    assert!(x.contains("continuation.actions="), "{x}");
    assert_eq!(x, y, "monitor output:\n{}", side_by_side(&x, &y));
    for i in 1..=3 {
        let name = format!("p{i}.pcap");
        let hex = |side: &Side| {
            common::pcap_frames(&side.dir.join(&name))
                .iter()
                .map(|f| pk::to_hex(f))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let (x, y) = (hex(&ovs), hex(&fs));
        // What the resumed pipelines send: p1's packet once to p2 and twice to p3 (from
        // table 3, then from table 0 after the resubmit), p2's once to p3.
        let want = [0, 1, 3][i - 1];
        assert_eq!(x.lines().count(), want, "OVS, {name}:\n{x}");
        assert_eq!(x, y, "{name}:\n{}", side_by_side(&x, &y));
    }
    assert!(!fs.log().contains("panicked"), "{}", fs.log());
}

/// Port status messages against real OVS: ports added and removed with `ovs-vsctl` while
/// `ovs-ofctl monitor` connections of several versions listen. OVS adds a port down and then
/// brings it up (`ADD`, then a `MOD` to `LIVE` that OpenFlow 1.0 cannot show and so does not
/// get); a removed port goes with its last description; a monitor without a miss-len gets
/// nothing. Only the xid and the ports' MAC addresses (OVS makes up its dummy ports') are
/// masked.
#[test]
fn port_status_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let (mut ovs, mut fs) = Side::both("ps", "ovs", "flowswitch", &our_vswitchd());
    let monitors: [(&str, &[&str], &[&str]); 4] = [
        ("of10", &[], &["65534"]),
        ("of13", &["-O", "OpenFlow13"], &["65534"]),
        ("of15", &["-O", "OpenFlow15"], &["65534"]),
        ("none", &[], &[]),
    ];
    for side in [&mut ovs, &mut fs] {
        side.add_dummy_ports(1..=2, true);
        for (name, pre, post) in monitors {
            side.start_monitor(name, pre, post);
        }
        side.must(&[
            "ovs-vsctl",
            "add-port",
            "br0",
            "p4",
            "--",
            "set",
            "interface",
            "p4",
            "type=dummy",
            "ofport_request=4",
        ]);
        side.must(&["ovs-vsctl", "del-port", "br0", "p2"]);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for side in [&ovs, &fs] {
        while !monitors[..3].iter().all(|(name, _, _)| {
            std::fs::read_to_string(side.monitor_file(name)).is_ok_and(|t| t.contains("DEL: 2(p2)"))
        }) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    ovs.stop_monitors();
    fs.stop_monitors();
    let shown = |side: &Side, name: &str| {
        let t = std::fs::read_to_string(side.monitor_file(name)).unwrap_or_default();
        mask(&t)
            .lines()
            .filter(|l| !l.contains("fatal_signal"))
            .map(|l| match l.find("addr:") {
                Some(i) => format!("{}addr:*", &l[..i]),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (name, _, _) in monitors {
        let (x, y) = (shown(&ovs, name), shown(&fs, name));
        if name == "none" {
            assert!(x.is_empty(), "OVS, no miss-len:\n{x}");
        } else {
            assert!(
                x.contains("ADD: 4(p4)") && x.contains("DEL: 2(p2)"),
                "OVS, {name}:\n{x}"
            );
        }
        assert_eq!(x, y, "monitor {name}:\n{}", side_by_side(&x, &y));
    }
    assert!(!fs.log().contains("panicked"), "{}", fs.log());
}

/// Flow-removed messages against real OVS: rules with `send_flow_rem` and an idle or hard
/// timeout expire, and others are deleted by `del-flows`, while monitors of OpenFlow 1.0,
/// 1.3 and 1.5 listen (a rule without the flag goes silently). Only the xid and the durations (when each switch's expiry ran)
/// are masked; cookies, tables, timeouts and counters must be equal.
#[test]
fn flow_removed_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let (mut ovs, mut fs) = Side::both("fr", "ovs", "flowswitch", &our_vswitchd());
    let monitors: [(&str, &[&str]); 3] = [
        ("of10", &[]),
        ("of13", &["-O", "OpenFlow13"]),
        ("of15", &["-O", "OpenFlow15"]),
    ];
    let flows = [
        "idle_timeout=1,send_flow_rem,cookie=0x5,priority=7,in_port=1,udp,actions=output:2",
        "hard_timeout=1,send_flow_rem,table=3,priority=9,ip,nw_dst=10.0.0.1,actions=drop",
        "hard_timeout=1,priority=11,in_port=2,actions=drop",
    ];
    for side in [&mut ovs, &mut fs] {
        side.add_dummy_ports(1..=2, true);
        for (name, pre) in monitors {
            side.start_monitor(name, pre, &["65534"]);
        }
    }
    // Both switches get their flows (and the packet that uses the first) at the same time,
    // so their expiries come at about the same moment.
    for side in [&ovs, &fs] {
        for f in flows {
            side.must(&["ovs-ofctl", "add-flow", "br0", f]);
        }
        let frame = pk::udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 8);
        side.must(&[
            "ovs-appctl",
            "netdev-dummy/receive",
            "p1",
            &pk::to_hex(&frame),
        ]);
    }
    let deadline = Instant::now() + Duration::from_secs(8);
    let wait_for = |side: &Side, n: usize| {
        while !monitors.iter().all(|(name, _)| {
            std::fs::read_to_string(side.monitor_file(name))
                .is_ok_and(|t| t.matches("OFPT_FLOW_REMOVED").count() >= n)
        }) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for side in [&ovs, &fs] {
        wait_for(side, 2);
    }
    // Deletions by flow mod: reason `delete`, for the rules with `send_flow_rem` only.
    for side in [&ovs, &fs] {
        for f in [
            "send_flow_rem,cookie=0x6,priority=5,in_port=1,tcp,actions=output:2",
            "send_flow_rem,table=4,priority=8,arp,actions=drop",
            "priority=12,in_port=2,ip,actions=drop",
        ] {
            side.must(&["ovs-ofctl", "add-flow", "br0", f]);
        }
        side.must(&["ovs-ofctl", "del-flows", "br0", "in_port=1"]);
        side.must(&["ovs-ofctl", "del-flows", "br0"]);
    }
    for side in [&ovs, &fs] {
        wait_for(side, 4);
    }
    std::thread::sleep(Duration::from_millis(300));
    ovs.stop_monitors();
    fs.stop_monitors();
    let shown = |side: &Side, name: &str| {
        let t = std::fs::read_to_string(side.monitor_file(name)).unwrap_or_default();
        let mut lines: Vec<String> = mask(&t)
            .lines()
            .filter(|l| !l.contains("fatal_signal"))
            .map(|l| match (l.find(" duration"), l.find(" idle")) {
                (Some(a), Some(b)) if a < b => format!("{} duration*{}", &l[..a], &l[b..]),
                _ => l.to_string(),
            })
            .collect();
        // Each switch reports its expiries in its own order within one pass.
        lines.sort();
        lines.join("\n")
    };
    for (name, _) in monitors {
        let (x, y) = (shown(&ovs, name), shown(&fs, name));
        assert_eq!(
            x.matches("OFPT_FLOW_REMOVED").count(),
            4,
            "OVS, {name}:\n{x}"
        );
        assert_eq!(x, y, "monitor {name}:\n{}", side_by_side(&x, &y));
    }
    assert!(!fs.log().contains("panicked"), "{}", fs.log());
}
