//! Byte-for-byte tests against real `ovs-ofctl` (Open vSwitch 3.1): a fake switch built on
//! this crate records what `ovs-ofctl` sends; every message must decode, re-encode to the
//! same bytes, and (for flow mods) decode to the flow `flow::text` parses from the same
//! text. Replies the fake switch encodes must make `ovs-ofctl` print what was put in.
//! Skips (counted; a failure under `FLOWSWITCH_NO_SKIP=1`) when `ovs-ofctl` is missing.

mod support;

use flow::ofp::{Action, FlowSpec};
use flow::text::{Dialect, parse_flow_with};
use openflow::{Body, Command, FlowMod, Msg, version};
use support::{FakeSwitch, Rx, have_ofctl, ofctl};

/// The protocols tested and the `flow::text` dialect whose canonical form they match.
const PROTOCOLS: [(&str, u8, Dialect); 3] = [
    ("OpenFlow10", version::OF10, Dialect::OpenFlow10),
    ("OpenFlow13", version::OF13, Dialect::OpenFlow13),
    ("OpenFlow15", version::OF15, Dialect::OpenFlow13),
];

/// Every version `ovs-ofctl` speaks.
const ALL_VERSIONS: [&str; 6] = [
    "OpenFlow10",
    "OpenFlow11",
    "OpenFlow12",
    "OpenFlow13",
    "OpenFlow14",
    "OpenFlow15",
];

/// `OXM_OF_PACKET_TYPE` = Ethernet.
const PACKET_TYPE_ETH: [u8; 8] = [0x80, 0x00, 0x58, 0x04, 0, 0, 0, 0];

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every received message re-encodes to its own bytes.
fn check_reencode(rx: &[Rx], failures: &mut Vec<String>) {
    for r in rx {
        match &r.msg {
            Ok(m) => match m.encode() {
                Ok(b) if b == r.bytes => {}
                // OVS writes an explicit Ethernet packet_type in matches whose other fields
                // lacked prerequisites; the model has no packet_type, so it is dropped.
                Ok(b)
                    if contains(&r.bytes, &PACKET_TYPE_ETH)
                        && Msg::decode(&b).as_ref() == Ok(m) => {}
                Ok(b) => failures.push(format!(
                    "re-encode differs:\n  got  {}\n  sent {}\n  {m:?}",
                    hex::encode(&b),
                    hex::encode(&r.bytes)
                )),
                Err(e) => failures.push(format!("re-encode failed: {e}: {m:?}")),
            },
            Err(e) => failures.push(format!("decode failed: {e}: {}", hex::encode(&r.bytes))),
        }
    }
}

fn flow_mods(rx: &[Rx]) -> Vec<(FlowMod, bool)> {
    rx.iter()
        .filter_map(|r| match &r.msg {
            Ok(Msg {
                body: Body::FlowMod(fm),
                version,
                ..
            }) => Some((fm.clone(), *version == version::OF10)),
            Ok(Msg {
                body: Body::NxFlowMod(fm),
                ..
            }) => Some((fm.clone(), false)),
            _ => None,
        })
        .collect()
}

/// What an OpenFlow 1.0 switch makes of a standard-match flow mod (OVS
/// `ofputil_decode_flow_mod`): prerequisites normalised, exact matches at priority 65535.
fn of10_semantics(fm: &mut FlowMod) {
    if openflow::ofmatch10::wildcards(&fm.spec.match_) == 0 {
        fm.spec.priority = u16::MAX;
    }
    fm.spec.match_.normalize();
}

/// The flow corpus: every hand-written flow `flow::text` accepts in `dialect`, plus
/// generated ones, de-duplicated.
fn corpus(dialect: Dialect) -> Vec<String> {
    let mut v: Vec<String> = testutil::flow_corpus::hand_written()
        .into_iter()
        .map(str::to_string)
        .chain(testutil::flow_corpus::generated(7, 150))
        .filter(|t| parse_flow_with(t, dialect).is_ok())
        .collect();
    let mut seen = std::collections::HashSet::new();
    v.retain(|t| seen.insert(t.clone()));
    v
}

/// Every `load` and `set_field` as loads of contiguous runs of at most 64 bits (OVS
/// `next_load_segment`), so OpenFlow 1.5's set_fields compare with 1.3's loads.
fn as_loads(acts: &[Action]) -> Vec<Action> {
    let mut out = Vec::new();
    for a in acts {
        match a {
            Action::Load { value, dst } => {
                segments(dst.field, value << dst.ofs, dst.mask(), &mut out)
            }
            Action::SetField { field, value, mask } => segments(*field, *value, *mask, &mut out),
            Action::Ct(ct) => {
                let mut ct = ct.clone();
                ct.exec = as_loads(&ct.exec);
                out.push(Action::Ct(ct));
            }
            _ => out.push(a.clone()),
        }
    }
    out
}

fn segments(field: flow::ofp::Mf, value: u128, mask: u128, out: &mut Vec<Action>) {
    let n_bits = field.def().n_bits;
    let mut ofs = 0;
    while ofs < n_bits {
        if (mask >> ofs) & 1 == 0 {
            ofs += 1;
            continue;
        }
        let mut end = ofs + 1;
        while end < n_bits && end < ofs + 64 && (mask >> end) & 1 == 1 {
            end += 1;
        }
        let n = end - ofs;
        let m = if n >= 128 {
            u128::MAX
        } else {
            (1u128 << n) - 1
        };
        out.push(Action::Load {
            value: (value >> ofs) & m,
            dst: flow::ofp::Subfield {
                field,
                ofs,
                n_bits: n,
            },
        });
        ofs = end;
    }
}

fn compare_spec(got: &FlowSpec, want: &FlowSpec) -> Option<String> {
    if got == want {
        return None;
    }
    Some(format!(
        "decoded: {}\n    want: {}\n    got  {got:?}\n    want {want:?}",
        flow::text::format_flow_add(got),
        flow::text::format_flow_add(want)
    ))
}

#[test]
fn add_flow_corpus_round_trips_byte_for_byte() {
    if !have_ofctl() {
        return;
    }
    let mut failures = Vec::new();
    let mut counts = Vec::new();
    for (proto, ver, dialect) in PROTOCOLS {
        let sw = FakeSwitch::start("add", support::Config::default());
        let target = sw.target();
        let mut n_ok = 0;
        let mut n_skipped_by_ovs = 0;
        for text in corpus(dialect) {
            let (ok, _, err) = ofctl(&["-O", proto, "add-flow", &target, &text]);
            let rx = sw.take();
            if !ok {
                // ovs-ofctl itself refused the flow (e.g. a field the protocol cannot
                // carry): nothing to compare.
                n_skipped_by_ovs += 1;
                if n_skipped_by_ovs == 1 {
                    eprintln!("[{proto}] ovs-ofctl refused {text}: {err}");
                }
                if rx.iter().any(|r| r.msg.is_err()) {
                    failures.push(format!("[{proto}] {text}: decode error; ofctl: {err}"));
                }
                continue;
            }
            let mut f = Vec::new();
            check_reencode(&rx, &mut f);
            for m in rx.iter().filter_map(|r| r.msg.as_ref().ok()) {
                if m.version != ver && !matches!(m.body, Body::Hello(_)) {
                    f.push(format!("version {} != {ver}", m.version));
                }
            }
            let fms = flow_mods(&rx);
            if fms.len() != 1 {
                f.push(format!("{} flow mods", fms.len()));
            } else {
                let (mut fm, std10) = fms[0].clone();
                if std10 {
                    of10_semantics(&mut fm);
                }
                let want = parse_flow_with(&text, dialect).expect("corpus parses");
                if fm.command != Command::Add {
                    f.push(format!("command {:?}", fm.command));
                }
                if ver == version::OF15 {
                    // 1.5 writes every load as a (masked) set_field: compare with the 1.3 form
                    // once both are written as loads.
                    let mut got = fm.spec.clone();
                    let mut w = want.clone();
                    got.actions = as_loads(&got.actions);
                    w.actions = as_loads(&w.actions);
                    if let Some(d) = compare_spec(&got, &w) {
                        f.push(d);
                    }
                } else if let Some(d) = compare_spec(&fm.spec, &want) {
                    f.push(d);
                }
            }
            if f.is_empty() {
                n_ok += 1;
            } else {
                failures.push(format!("[{proto}] {text}:\n  {}", f.join("\n  ")));
            }
        }
        failures.extend(sw.errors().into_iter().filter(|e| !e.starts_with("decode")));
        counts.push(format!(
            "{proto}: {n_ok} flows identical, {n_skipped_by_ovs} refused by ovs-ofctl"
        ));
    }
    eprintln!("{}", counts.join("\n"));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The match a filter text has after `ovs-ofctl` encodes it in the wire form used and the
/// switch decodes it (what `flow::text::canon` models).
fn round_trip_match(m: &flow::ofp::Match, std10: bool, oxm: bool) -> flow::ofp::Match {
    if std10 {
        flow::text::canon::of10_round_trip(m).0
    } else {
        flow::text::canon::nx_round_trip(m, oxm).expect("round trip")
    }
}

#[test]
fn del_flows_and_mod_flows_decode_to_their_filters() {
    if !have_ofctl() {
        return;
    }
    let filters = [
        "",
        "table=1",
        "ip,nw_dst=10.0.0.0/8",
        "cookie=0x20/0xf0",
        "out_port=2",
        "tcp,tp_dst=80",
        "in_port=1,dl_vlan=5",
        "reg0=5",
        "ct_state=+trk-new",
        "table=3,cookie=0x1/-1,ip",
        "ipv6,ipv6_src=2001:db8::/32",
        "arp,arp_tpa=10.0.0.1,out_port=LOCAL",
    ];
    let mods = [
        "ip,actions=output:3",
        "table=2,cookie=5,udp,actions=drop",
        "priority=7,tcp,actions=mod_nw_dst:1.1.1.1,NORMAL",
        "cookie=0x10/0xff,reg1=7,actions=load:3->NXM_NX_REG2[0..7],resubmit(,4)",
        "ip,in_port=2,actions=ct(commit,zone=5,exec(load:1->NXM_NX_CT_MARK[])),output:1",
    ];
    let mut failures = Vec::new();
    let mut n = 0;
    for (proto, ver, dialect) in PROTOCOLS {
        let sw = FakeSwitch::start("del", support::Config::default());
        let target = sw.target();
        let mut cases: Vec<(&str, bool, &str)> = Vec::new();
        for f in filters {
            cases.push(("del-flows", false, f));
            cases.push(("del-flows", true, f));
        }
        cases.push(("del-flows", true, "priority=7,udp"));
        for f in mods {
            cases.push(("mod-flows", false, f));
            cases.push(("mod-flows", true, f));
        }
        for (cmd, strict, text) in cases {
            let mut args = vec!["-O", proto, cmd, &target];
            if strict {
                args.insert(2, "--strict");
            }
            if !text.is_empty() {
                args.push(text);
            }
            let (ok, _, err) = ofctl(&args);
            let rx = sw.take();
            let what = format!(
                "[{proto}] {cmd}{} '{text}'",
                if strict { " --strict" } else { "" }
            );
            if !ok {
                failures.push(format!("{what}: ovs-ofctl failed: {err}"));
                continue;
            }
            let mut f = Vec::new();
            check_reencode(&rx, &mut f);
            let fms = flow_mods(&rx);
            if fms.len() != 1 {
                f.push(format!("{} flow mods", fms.len()));
            } else {
                let (fm, std10) = &fms[0];
                let oxm = ver >= version::OF12;
                let want = flow::text::parse_flow_filter(text).expect("filter parses");
                let want_cmd = match (cmd, strict) {
                    ("del-flows", false) => Command::Delete,
                    ("del-flows", true) => Command::DeleteStrict,
                    ("mod-flows", false) => Command::Modify,
                    _ => Command::ModifyStrict,
                };
                if fm.command != want_cmd {
                    f.push(format!("command {:?} != {want_cmd:?}", fm.command));
                }
                let wm = round_trip_match(&want.match_, *std10, oxm);
                if fm.spec.match_ != wm {
                    f.push(format!("match {:?} != {wm:?}", fm.spec.match_));
                }
                if fm.spec.out_port != want.out_port {
                    f.push(format!(
                        "out_port {:?} != {:?}",
                        fm.spec.out_port, want.out_port
                    ));
                }
                // OpenFlow 1.1+ cannot give a modify a new cookie: `cookie=V` is sent as 0.
                let want_cookie = if oxm && want.cookie_mask == 0 {
                    (0, 0)
                } else {
                    (want.cookie, want.cookie_mask)
                };
                if (fm.spec.cookie, fm.spec.cookie_mask) != want_cookie {
                    f.push(format!(
                        "cookie {:x}/{:x} != {:x}/{:x}",
                        fm.spec.cookie, fm.spec.cookie_mask, want.cookie, want.cookie_mask
                    ));
                }
                if want.table.is_some() && fm.spec.table != want.table {
                    f.push(format!("table {:?} != {:?}", fm.spec.table, want.table));
                }
                if strict && fm.spec.priority != want.priority {
                    f.push(format!(
                        "priority {} != {}",
                        fm.spec.priority, want.priority
                    ));
                }
                if cmd == "mod-flows" {
                    let mut canon = want.clone();
                    canon.match_ = wm;
                    let proto_bits = if *std10 {
                        flow::ofp::Protocols::OF10_STD
                    } else if oxm {
                        flow::ofp::Protocols::OF13_OXM
                    } else {
                        flow::ofp::Protocols::OF10_NXM
                    };
                    flow::text::canon::canonicalize(&mut canon, proto_bits, dialect)
                        .expect("canonicalize");
                    if ver != version::OF15 && fm.spec.actions != canon.actions {
                        f.push(format!(
                            "actions {} != {}",
                            flow::text::format_actions(&fm.spec.actions),
                            flow::text::format_actions(&canon.actions)
                        ));
                    }
                }
            }
            if f.is_empty() {
                n += 1;
            } else {
                failures.push(format!("{what}:\n  {}", f.join("\n  ")));
            }
        }
    }
    eprintln!("{n} del-flows/mod-flows messages identical");
    assert_no_failures(&failures);
}

fn sample_ports() -> Vec<openflow::port::PortDesc> {
    (1..=3u32)
        .map(|i| openflow::port::PortDesc {
            port_no: i,
            hw_addr: 0x0200_0000_0000 | u64::from(i),
            name: format!("p{i}"),
            config: 0,
            state: 4,
            curr: 0x840,
            advertised: 0,
            supported: 0,
            peer: 0,
            curr_speed: 10_000_000,
            max_speed: 0,
        })
        .chain(std::iter::once(openflow::port::PortDesc {
            port_no: flow::ofp::OfPort::LOCAL.to_ofp11(),
            hw_addr: 0x0200_0000_00fe,
            name: "br0".into(),
            config: 1,
            state: 1,
            ..Default::default()
        }))
        .collect()
}

fn sample_port_stats() -> Vec<openflow::stats::PortStats> {
    (1..=3u32)
        .map(|i| openflow::stats::PortStats {
            port_no: i,
            rx_packets: 1000 * u64::from(i) + 1,
            tx_packets: 2000 * u64::from(i) + 2,
            rx_bytes: 64_000 * u64::from(i) + 3,
            tx_bytes: 128_000 * u64::from(i) + 4,
            rx_dropped: 5,
            tx_dropped: 6,
            rx_errors: 7,
            tx_errors: 8,
            rx_frame_err: 9,
            rx_over_err: 10,
            rx_crc_err: 11,
            collisions: 12,
            duration_sec: 30 + i,
            duration_nsec: 500_000_000,
        })
        .collect()
}

/// Flow stats for the first `n` corpus flows of `dialect`, with distinct counters.
fn sample_flows(dialect: Dialect, n: usize) -> Vec<(FlowSpec, openflow::stats::FlowStats)> {
    corpus(dialect)
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, t)| {
            let spec = parse_flow_with(t, dialect).expect("corpus parses");
            let fs = openflow::stats::FlowStats {
                table_id: spec.table.unwrap_or(0),
                duration_sec: i as u32,
                duration_nsec: 0,
                priority: spec.priority,
                idle_timeout: spec.idle_timeout,
                hard_timeout: spec.hard_timeout,
                flags: 0,
                importance: 0,
                idle_age: 0,
                hard_age: 0,
                cookie: spec.cookie,
                packet_count: 3 * i as u64 + 1,
                byte_count: 100 * i as u64 + 7,
                match_: spec.match_,
                actions: spec.actions.clone(),
            };
            (spec, fs)
        })
        .collect()
}

#[test]
fn dump_flows_prints_what_the_fake_switch_answers() {
    if !have_ofctl() {
        return;
    }
    let mut failures = Vec::new();
    let mut n_lines = 0;
    for (proto, _ver, dialect) in PROTOCOLS {
        let flows = sample_flows(dialect, 120);
        let cfg = support::Config {
            flows: flows.iter().map(|(_, f)| f.clone()).collect(),
            ..Default::default()
        };
        let sw = FakeSwitch::start("dump", cfg);
        let (ok, out, err) = ofctl(&["-O", proto, "dump-flows", &sw.target()]);
        assert!(ok, "[{proto}] dump-flows: {err}");
        assert!(!out.contains("decode error"), "{out}");
        let lines: Vec<&str> = out.lines().filter(|l| l.contains("n_packets=")).collect();
        if lines.len() != flows.len() {
            failures.push(format!(
                "[{proto}] {} lines for {} flows:\n{out}",
                lines.len(),
                flows.len()
            ));
            continue;
        }
        for ((spec, fs), line) in flows.iter().zip(&lines) {
            let m = flow::text::format_match_priority(&spec.match_, spec.priority);
            let acts = format!("actions={}", flow::text::format_actions(&spec.actions));
            let want = [
                format!("n_packets={}", fs.packet_count),
                format!("n_bytes={}", fs.byte_count),
                format!("table={}", fs.table_id),
                format!("cookie=0x{:x}", fs.cookie),
                format!(" {m}"),
            ];
            let bad = want.iter().any(|w| !line.contains(w.as_str())) || !line.ends_with(&acts);
            if bad {
                failures.push(format!(
                    "[{proto}] line: {line}\n  want: {} {acts}",
                    want.join(" ")
                ));
            } else {
                n_lines += 1;
            }
        }
        let mut f = Vec::new();
        let rx = sw.take();
        check_reencode(&rx, &mut f);
        failures.extend(f);
        let (ok, out, err) = ofctl(&["-O", proto, "dump-aggregate", &sw.target()]);
        assert!(ok, "[{proto}] dump-aggregate: {err}");
        let pk: u64 = flows.iter().map(|(_, f)| f.packet_count).sum();
        let by: u64 = flows.iter().map(|(_, f)| f.byte_count).sum();
        let want = format!(
            "packet_count={pk} byte_count={by} flow_count={}",
            flows.len()
        );
        if !out.contains(&want) {
            failures.push(format!("[{proto}] dump-aggregate: {out} lacks {want}"));
        }
        let mut f = Vec::new();
        check_reencode(&sw.take(), &mut f);
        failures.extend(f);
    }
    eprintln!("{n_lines} dump-flows lines as expected");
    assert_no_failures(&failures);
}

#[test]
fn show_ports_tables_and_packet_out_round_trip() {
    if !have_ofctl() {
        return;
    }
    let mut failures = Vec::new();
    for proto in ALL_VERSIONS {
        let cfg = support::Config {
            ports: sample_ports(),
            port_stats: sample_port_stats(),
            dpid: 0x2a,
            ..Default::default()
        };
        let sw = FakeSwitch::start("show", cfg);
        let t = sw.target();
        let run = |args: &[&str]| {
            let mut a = vec!["-O", proto];
            a.extend_from_slice(args);
            let (ok, out, err) = ofctl(&a);
            assert!(ok, "[{proto}] {args:?}: {err}");
            assert!(!out.contains("decode error"), "[{proto}] {args:?}: {out}");
            out
        };
        let show = run(&["show", &t]);
        for want in [
            "dpid:000000000000002a",
            "n_tables:254",
            " 1(p1): addr:02:00:00:00:00:01",
            " 3(p3): addr:02:00:00:00:00:03",
            " LOCAL(br0): addr:02:00:00:00:00:fe",
        ] {
            if !show.contains(want) {
                failures.push(format!("[{proto}] show lacks {want:?}:\n{show}"));
            }
        }
        let desc = run(&["dump-ports-desc", &t]);
        if !desc.contains(" 2(p2): addr:02:00:00:00:00:02") {
            failures.push(format!("[{proto}] dump-ports-desc:\n{desc}"));
        }
        let ports = run(&["dump-ports", &t]);
        for want in [
            "port  1: rx pkts=1001, bytes=64003, drop=5, errs=7, frame=9, over=10, crc=11",
            "tx pkts=6002, bytes=384004, drop=6, errs=8, coll=12",
        ] {
            if !ports.contains(want) {
                failures.push(format!("[{proto}] dump-ports lacks {want:?}:\n{ports}"));
            }
        }
        let tables = run(&["dump-tables", &t]);
        if !tables.contains("active=7, lookup=1000, matched=500") {
            failures.push(format!("[{proto}] dump-tables:\n{tables}"));
        }
        let desc = run(&["dump-desc", &t]);
        if !desc.contains("Manufacturer: flowswitch") || !desc.contains("DP Description: br0") {
            failures.push(format!("[{proto}] dump-desc:\n{desc}"));
        }
        let frame =
            "ffffffffffff02000000000108060001080006040001020000000001c0a80001000000000000c0a80002";
        run(&[
            "packet-out",
            &t,
            &format!(
                "in_port=1,packet={frame},actions=output:2,mod_dl_src:02:00:00:00:00:09,NORMAL"
            ),
        ]);
        let mut f = Vec::new();
        let rx = sw.take();
        check_reencode(&rx, &mut f);
        let pos: Vec<_> = rx
            .iter()
            .filter_map(|r| match &r.msg {
                Ok(Msg {
                    body: Body::PacketOut(p),
                    ..
                }) => Some(p.clone()),
                _ => None,
            })
            .collect();
        match pos.as_slice() {
            [p] => {
                let acts = flow::text::format_actions(&p.actions);
                if hex::encode(&p.data) != frame
                    || p.in_port != 1
                    || !acts.starts_with("output:2,")
                    || !acts.ends_with("NORMAL")
                {
                    f.push(format!("packet-out decoded as {p:?} ({acts})"));
                }
            }
            _ => f.push(format!("{} packet-outs", pos.len())),
        }
        failures.extend(f.into_iter().map(|e| format!("[{proto}] {e}")));
        failures.extend(sw.errors());
    }
    assert_no_failures(&failures);
}

#[test]
fn monitor_prints_the_async_messages_we_send() {
    if !have_ofctl() {
        return;
    }
    use openflow::msg::PortStatus;
    use openflow::packet::{FlowRemoved, PacketIn};
    let mut failures = Vec::new();
    for proto in ALL_VERSIONS {
        let mut meta = flow::ofp::Match::catchall();
        meta.set_storage(flow::field::FieldId::InPort, 2, 0xffff_ffff);
        meta.set_storage(flow::field::FieldId::Reg3, 0x99, 0xffff_ffff);
        let frame = hex::decode(
            "ffffffffffff02000000000108060001080006040001020000000001c0a80001000000000000c0a80002",
        )
        .expect("hex");
        let mut after = vec![
            Body::NxPacketIn2(PacketIn {
                buffer_id: u32::MAX,
                total_len: frame.len() as u32,
                reason: 1,
                table_id: 7,
                cookie: 0x1234,
                match_: meta,
                data: frame.clone(),
                userdata: vec![1, 2, 3, 4],
                continuation: None,
            }),
            Body::PortStatus(PortStatus {
                reason: 2,
                desc: sample_ports()[1].clone(),
            }),
        ];
        {
            after.push(Body::FlowRemoved(FlowRemoved {
                match_: flow::text::parse_match("udp,tp_dst=53").expect("match"),
                cookie: 0x77,
                priority: 9,
                reason: 1,
                table_id: 0,
                duration_sec: 3,
                duration_nsec: 0,
                idle_timeout: 0,
                hard_timeout: 30,
                packet_count: 4,
                byte_count: 256,
            }));
        }
        let cfg = support::Config {
            after_barrier: after,
            ..Default::default()
        };
        let sw = FakeSwitch::start("monitor", cfg);
        let out =
            support::ofctl_until_timeout(2, sw.dir(), &["-O", proto, "monitor", &sw.target()]);
        let mut wants = vec![
            "NXT_PACKET_IN2",
            "cookie=0x1234",
            "total_len=42",
            "reg3=0x99,in_port=2",
            "table_id=7",
            "arp,vlan_tci=0x0000,dl_src=02:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,arp_spa=192.168.0.1,arp_tpa=192.168.0.2",
            "MOD: 2(p2): addr:02:00:00:00:00:02",
        ];
        {
            wants.extend(["udp,tp_dst=53", "reason=hard", "cookie:0x77"]);
        }
        for w in wants {
            if !out.contains(w) {
                failures.push(format!("[{proto}] monitor output lacks {w:?}:\n{out}"));
            }
        }
        let rx = sw.take();
        let mut f = Vec::new();
        check_reencode(&rx, &mut f);
        if !rx.iter().any(|r| {
            matches!(
                r.msg,
                Ok(Msg {
                    body: Body::NxSetPacketInFormat(2),
                    ..
                })
            )
        }) {
            f.push("no NXT_SET_PACKET_IN_FORMAT(nxt_packet_in2)".into());
        }
        failures.extend(f.into_iter().map(|e| format!("[{proto}] {e}")));
    }
    assert_no_failures(&failures);
}

#[test]
fn bundles_carry_flow_mods_byte_for_byte() {
    if !have_ofctl() {
        return;
    }
    let mut failures = Vec::new();
    let texts = corpus(Dialect::OpenFlow13);
    let path = support::temp_file("bundle", &texts[..60].join("\n"));
    let file = path.to_string_lossy().into_owned();
    for proto in ["OpenFlow13", "OpenFlow14", "OpenFlow15"] {
        let sw = FakeSwitch::start("bundle", support::Config::default());
        let (ok, _, err) = ofctl(&["-O", proto, "--bundle", "add-flows", &sw.target(), &file]);
        let rx = sw.take();
        if !ok {
            failures.push(format!("[{proto}] --bundle add-flows: {err}"));
            continue;
        }
        let mut f = Vec::new();
        check_reencode(&rx, &mut f);
        let mut adds = 0;
        let mut ctrl = Vec::new();
        for r in rx.iter().filter_map(|r| r.msg.as_ref().ok()) {
            match &r.body {
                Body::BundleAdd(a) => {
                    if matches!(a.msg.body, Body::FlowMod(_)) {
                        adds += 1;
                    }
                }
                Body::BundleControl(c) => ctrl.push(c.ctrl_type),
                _ => {}
            }
        }
        if adds != 60 || ctrl != [0, 4] {
            f.push(format!("{adds} bundled flow mods, controls {ctrl:?}"));
        }
        failures.extend(f.into_iter().map(|e| format!("[{proto}] {e}")));
    }
    let _ = std::fs::remove_file(&path);
    assert_no_failures(&failures);
}

#[test]
fn forced_flow_formats_and_standard_flow_stats() {
    if !have_ofctl() {
        return;
    }
    let mut failures = Vec::new();
    let texts = corpus(Dialect::OpenFlow10);
    for (fmt, want_nx) in [("openflow10", false), ("nxm", true)] {
        let sw = FakeSwitch::start("fmt", support::Config::default());
        let mut n = 0;
        for text in texts.iter().take(150) {
            let (ok, _, _) = ofctl(&["-F", fmt, "add-flow", &sw.target(), text]);
            let rx = sw.take();
            if !ok {
                continue; // not expressible in the forced format
            }
            let mut f = Vec::new();
            check_reencode(&rx, &mut f);
            let fms: Vec<_> = rx
                .iter()
                .filter_map(|r| r.msg.as_ref().ok())
                .filter(|m| matches!(m.body, Body::FlowMod(_) | Body::NxFlowMod(_)))
                .collect();
            match fms.as_slice() {
                [m] if matches!(m.body, Body::NxFlowMod(_)) == want_nx => n += 1,
                _ => f.push(format!("{} flow mods of the wrong kind", fms.len())),
            }
            failures.extend(f.into_iter().map(|e| format!("[-F {fmt}] {text}: {e}")));
        }
        if n < 50 {
            failures.push(format!("[-F {fmt}] only {n} flows accepted"));
        }
    }
    // Standard OFPST_FLOW replies, printed by `-F openflow10 dump-flows`.
    let flows: Vec<_> = sample_flows(Dialect::OpenFlow10, 200)
        .into_iter()
        .filter(|(s, _)| openflow::ofmatch10::fits(&s.match_))
        .collect();
    let cfg = support::Config {
        flows: flows.iter().map(|(_, f)| f.clone()).collect(),
        ..Default::default()
    };
    let sw = FakeSwitch::start("fmt-dump", cfg);
    let (ok, out, err) = ofctl(&["-F", "openflow10", "dump-flows", &sw.target()]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("n_packets=")).collect();
    assert_eq!(lines.len(), flows.len(), "{out}");
    for ((spec, fs), line) in flows.iter().zip(&lines) {
        let acts = format!("actions={}", flow::text::format_actions(&spec.actions));
        let m = flow::text::format_match_priority(&spec.match_, spec.priority);
        if !line.ends_with(&acts)
            || !line.contains(&format!(" {m}"))
            || !line.contains(&format!("n_packets={}", fs.packet_count))
        {
            failures.push(format!("std dump-flows line {line}\n  want {m} {acts}"));
        }
    }
    let rx = sw.take();
    let mut f = Vec::new();
    check_reencode(&rx, &mut f);
    failures.extend(f);
    if !rx.iter().any(|r| {
        matches!(
            r.msg,
            Ok(Msg {
                body: Body::StatsRequest {
                    body: openflow::stats::MpRequest::Flow(_),
                    ..
                },
                ..
            })
        )
    }) {
        failures.push("no OFPST_FLOW request with -F openflow10".into());
    }
    eprintln!("{} standard flow stats lines", lines.len());
    assert_no_failures(&failures);
}

#[test]
fn filtered_dump_requests_decode_to_their_filters() {
    if !have_ofctl() {
        return;
    }
    use openflow::stats::MpRequest;
    let filters = [
        "",
        "table=1,tcp,tp_dst=22",
        "cookie=0x5/-1,ip,nw_src=10.0.0.0/8",
        "out_port=2,in_port=1",
        "reg5=0x10/0xf0,arp",
        "table=4,cookie=0x100/0xf00,ipv6",
    ];
    let mut failures = Vec::new();
    let mut n = 0;
    for (proto, ver, _) in PROTOCOLS {
        let sw = FakeSwitch::start("filter", support::Config::default());
        for cmd in ["dump-flows", "dump-aggregate"] {
            for text in filters {
                let mut args = vec!["-O", proto, cmd];
                let t = sw.target();
                args.push(&t);
                if !text.is_empty() {
                    args.push(text);
                }
                let (ok, _, err) = ofctl(&args);
                let rx = sw.take();
                let what = format!("[{proto}] {cmd} '{text}'");
                if !ok {
                    failures.push(format!("{what}: {err}"));
                    continue;
                }
                let mut f = Vec::new();
                check_reencode(&rx, &mut f);
                let reqs: Vec<_> = rx
                    .iter()
                    .filter_map(|r| match &r.msg {
                        Ok(Msg {
                            body: Body::StatsRequest { body, .. },
                            ..
                        }) => match body {
                            MpRequest::Flow(q) | MpRequest::Aggregate(q) => {
                                Some((q.clone(), false))
                            }
                            MpRequest::NxFlow(q) | MpRequest::NxAggregate(q) => {
                                Some((q.clone(), true))
                            }
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                match reqs.as_slice() {
                    [(q, nx)] => {
                        let want = flow::text::parse_flow_filter(text).expect("filter");
                        let std10 = ver == version::OF10 && !nx;
                        let wm = round_trip_match(&want.match_, std10, ver >= version::OF12);
                        if q.match_ != wm {
                            f.push(format!("match {:?} != {wm:?}", q.match_));
                        }
                        if q.table_id != want.table.unwrap_or(0xff) {
                            f.push(format!("table {}", q.table_id));
                        }
                        if (q.cookie, q.cookie_mask) != (want.cookie, want.cookie_mask) {
                            f.push(format!("cookie {:x}/{:x}", q.cookie, q.cookie_mask));
                        }
                        let op = want.out_port.map_or(u32::MAX, |p| p.to_ofp11());
                        if q.out_port != op {
                            f.push(format!("out_port {:x}", q.out_port));
                        }
                    }
                    _ => f.push(format!("{} flow stats requests", reqs.len())),
                }
                if f.is_empty() {
                    n += 1;
                } else {
                    failures.push(format!("{what}:\n  {}", f.join("\n  ")));
                }
            }
        }
    }
    eprintln!("{n} filtered stats requests as expected");
    assert_no_failures(&failures);
}

/// What `ovs-ofctl -O PROTO parse-flow TEXT` prints after `ADD ` (OVS's own encode and decode
/// of the flow mod), or `None` when it refuses the flow.
fn ovs_parse_flow(proto: &str, text: &str) -> Option<String> {
    let (ok, out, _) = ofctl(&["-O", proto, "parse-flow", text]);
    if !ok {
        return None;
    }
    out.lines()
        .find_map(|l| l.split_once("): ADD ").map(|(_, r)| r.trim().to_string()))
}

#[test]
fn flow_mods_decode_as_ovs_decodes_them_in_every_version() {
    if !have_ofctl() {
        return;
    }
    let mut failures = Vec::new();
    for proto in [
        "OpenFlow10",
        "OpenFlow11",
        "OpenFlow12",
        "OpenFlow13",
        "OpenFlow14",
        "OpenFlow15",
    ] {
        versus_parse_flow(proto, &mut failures);
    }
    assert_no_failures(&failures);
}

/// `add-flow` in `proto` for corpus flows: the bytes re-encode identically, the decoded flow
/// prints as OVS's own `parse-flow` prints it, and the decoded flows served back as flow
/// stats make `dump-flows` print them again.
fn versus_parse_flow(proto: &str, failures: &mut Vec<String>) {
    let sw = FakeSwitch::start("pf", support::Config::default());
    let mut n = 0;
    let mut decoded = Vec::new();
    for text in corpus(Dialect::OpenFlow13).iter().take(200) {
        let Some(want) = ovs_parse_flow(proto, text) else {
            continue;
        };
        let (ok, _, err) = ofctl(&["-O", proto, "add-flow", &sw.target(), text]);
        let rx = sw.take();
        if !ok {
            failures.push(format!("{text}: add-flow failed: {err}"));
            continue;
        }
        let mut f = Vec::new();
        check_reencode(&rx, &mut f);
        let fms = flow_mods(&rx);
        match fms.as_slice() {
            [(fm, _)] => {
                // `Display` of a spec is parse-flow's text after `ADD `.
                let got = format!("{}", fm.spec);
                if got != want {
                    f.push(format!("decoded {got}\n    ovs     {want}"));
                }
                decoded.push(fm.spec.clone());
            }
            _ => f.push(format!("{} flow mods", fms.len())),
        }
        if f.is_empty() {
            n += 1;
        } else {
            failures.push(format!("[{proto}] {text}:\n  {}", f.join("\n  ")));
        }
    }
    eprintln!("[{proto}] {n} flow mods identical to OVS's decoding");
    if n < 100 {
        failures.push(format!("[{proto}] only {n} flows compared"));
    }
    // And back: the decoded flows as 1.1 flow stats, printed by dump-flows.
    let flows: Vec<openflow::stats::FlowStats> = decoded
        .iter()
        .enumerate()
        .map(|(i, s)| openflow::stats::FlowStats {
            table_id: s.table.unwrap_or(0),
            duration_sec: 1,
            duration_nsec: 0,
            priority: s.priority,
            idle_timeout: s.idle_timeout,
            hard_timeout: s.hard_timeout,
            flags: 0,
            importance: 0,
            idle_age: 0,
            hard_age: 0,
            cookie: s.cookie,
            packet_count: i as u64,
            byte_count: 0,
            match_: s.match_,
            actions: s.actions.clone(),
        })
        .collect();
    let cfg = support::Config {
        flows: flows.clone(),
        ..Default::default()
    };
    let sw = FakeSwitch::start("pf-dump", cfg);
    let (ok, out, err) = ofctl(&["-O", proto, "dump-flows", &sw.target()]);
    assert!(ok, "[{proto}] {err}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("n_packets=")).collect();
    assert_eq!(lines.len(), flows.len(), "{out}");
    for (spec, line) in decoded.iter().zip(&lines) {
        let m = flow::text::format_match_priority(&spec.match_, spec.priority);
        let acts = format!("actions={}", flow::text::format_actions(&spec.actions));
        if !line.ends_with(&acts) || !line.contains(&format!(" {m}")) {
            failures.push(format!(
                "[{proto}] dump-flows line {line}\n  want {m} {acts}"
            ));
        }
    }
    let mut f = Vec::new();
    check_reencode(&sw.take(), &mut f);
    failures.extend(f);
}
