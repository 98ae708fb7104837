//! `flowswitch trace` through conntrack recirculations, against `ovs-appctl ofproto/trace`
//! on real OVS: the first pass, the `recirc(…) - resume conntrack …` banner, each resumed
//! pass (default `trk|new` and `--ct-next`), megaflows and datapath actions.
//!
//! Recirculation ids are numbered by each switch's own allocator (OVS's keep growing across
//! traces of one instance), so both outputs have them renumbered in order of appearance
//! before the comparison.

use std::collections::HashMap;
use std::process::Command;

use testutil::ovs::OvsSandbox;

/// Replaces every `recirc(0xN)` / `recirc_id=0xN` id by its order of first appearance.
fn renumber(text: &str) -> String {
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest
        .find("recirc(0x")
        .map(|p| (p, "recirc(0x".len()))
        .into_iter()
        .chain(rest.find("recirc_id=0x").map(|p| (p, "recirc_id=0x".len())))
        .min()
    {
        let (at, len) = pos;
        out.push_str(&rest[..at + len]);
        rest = &rest[at + len..];
        let end = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        let n = ids.len() + 1;
        let id = *ids.entry(rest[..end].to_string()).or_insert(n);
        out.push_str(&format!("{id:x}"));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

const PIPELINES: &[&str] = &[
    // Seed 002's firewall.
    "table=0, priority=1 actions=drop
table=0, priority=10,arp actions=NORMAL
table=0, priority=100,ct_state=-trk,ip actions=ct(table=1)
table=1, ct_state=+new+trk,ip,in_port=1 actions=ct(commit),output:2
table=1, ct_state=+new+trk,ip,in_port=2 actions=drop
table=1, ct_state=+est+trk,ip,in_port=1 actions=output:2
table=1, ct_state=+est+trk,ip,in_port=2 actions=output:1",
    // Zones and two conntrack passes.
    "table=0, priority=100,ip,ct_state=-trk actions=ct(zone=5,table=1)
table=1, priority=10,ct_state=+new+trk,ip actions=ct(commit,zone=5),ct(zone=7,table=2)
table=1, priority=5,ct_state=+est+trk,ip actions=ct(zone=5),output:3
table=2, priority=10,ct_zone=7,ct_state=+trk actions=output:2
table=2, priority=1 actions=drop",
    // Marks and NAT: OVS's trace prints a ct's nested actions in its internal form
    // (`exec(set_field:…,nat(…))`), which the tree here does not; the banners, flows,
    // megaflows and datapath actions are compared (see `comparable`).
    "table=0, priority=100,ip,ct_state=-trk actions=ct(zone=5,table=1)
table=1, priority=10,ct_state=+new+trk,ip actions=ct(commit,zone=5,exec(set_field:0x2a->ct_mark),nat(src=10.9.9.9)),ct(zone=7,table=2)
table=1, priority=5,ct_state=+est+trk,ip actions=ct(zone=5,nat),output:3
table=2, priority=10,ct_zone=7,ct_state=+trk actions=output:2
table=2, priority=1 actions=drop",
];

const FLOWS: &[&str] = &[
    "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,udp_src=1,udp_dst=2",
    "in_port=2,tcp,nw_src=10.0.0.2,nw_dst=10.0.0.1,tcp_src=80,tcp_dst=1000",
];

#[test]
fn trace_through_conntrack_matches_ovs() {
    testutil::skip_without_ovs!();
    let sb = OvsSandbox::start(3).expect("sandbox");
    let mut compared = 0;
    for (pi, pipeline) in PIPELINES.iter().enumerate() {
        sb.del_flows().expect("del-flows");
        let lines: Vec<String> = pipeline.lines().map(str::to_string).collect();
        sb.add_flows(&lines).expect("add-flows");
        let path = sb.dir().join(format!("p{pi}.txt"));
        std::fs::write(&path, pipeline).expect("write flows");
        for flow in FLOWS {
            for ct_next in [&[][..], &["trk,est"][..], &["trk,est,rpl", "trk,new"][..]] {
                let mut args: Vec<String> =
                    vec!["ofproto/trace".into(), "br0".into(), flow.to_string()];
                let mut ours = Command::new(env!("CARGO_BIN_EXE_flowswitch"));
                ours.args(["trace", "--bridge-ports", "3", "--flows"])
                    .arg(&path)
                    .arg(flow);
                for c in ct_next {
                    args.push("--ct-next".into());
                    args.push(c.to_string());
                    ours.args(["--ct-next", c]);
                }
                let ovs = sb.appctl(&args).expect("ofproto/trace");
                let out = ours.output().expect("run flowswitch");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let ours = String::from_utf8(out.stdout).expect("utf-8");
                let (ours, ovs) = if pi == 2 {
                    (comparable(&ours), comparable(&ovs))
                } else {
                    (ours, ovs)
                };
                assert_eq!(
                    renumber(ours.trim_end()),
                    renumber(ovs.trim_end()),
                    "pipeline {pi}, flow {flow}, --ct-next {ct_next:?}"
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, PIPELINES.len() * FLOWS.len() * 3);
}

/// The lines of a trace outside the per-table tree.
fn comparable(trace: &str) -> String {
    trace
        .lines()
        .filter(|l| {
            [
                "Flow:",
                "Final flow:",
                "Megaflow:",
                "Datapath actions:",
                "recirc(",
                "====",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn renumber_orders_ids_by_first_appearance() {
    assert_eq!(
        renumber("ct,recirc(0x7)\nrecirc_id=0x7,x recirc(0x3) recirc_id=0x3"),
        "ct,recirc(0x1)\nrecirc_id=0x1,x recirc(0x2) recirc_id=0x2"
    );
}
