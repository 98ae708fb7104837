//! Differential test against a live OVS 3.1 (`testutil::ovs::OvsSandbox`, dummy datapath) for
//! the actions of issue #17 that are not about groups or conjunction: `write_metadata`,
//! `mod_nw_ttl`, `exit` (and those that follow in `cases()`), on hand-written pipelines with
//! packets of several kinds (IPv4 TCP/UDP/ICMP, IPv6, ARP, VLAN-tagged, short and long).
//!
//! For every packet: our datapath actions must equal OVS's (`common::same_actions`: compared
//! by effect, recirculation ids renumbered) and our megaflow must never have more 1-bits than
//! OVS's (the project's "never wider" rule, as in `pipelines_golden.rs`). Every flow is also
//! checked to be accepted by both. Prints `SKIP:` (via `testutil::skip`) when OVS is missing.

mod common;

use common::{megaflow_bits, same_actions};
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use ofproto::{Backend, Bridge, FlowMod, FlowModCommand, XlateIn, xlate};
use testutil::ovs::{OvsSandbox, ovs_missing_reason};
use testutil::packets::{Ipv4Spec, Ipv6Spec, TcpSpec, arp, ethernet, icmp4, ipv4, ipv6, tcp, udp};

const A: [u8; 6] = [0x00, 0x16, 0x3e, 0, 0, 0x0a];
const B: [u8; 6] = [0x00, 0x16, 0x3e, 0, 0, 0x0b];

fn eth_udp(s: [u8; 4], d: [u8; 4], payload: usize) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 17);
    let l4 = udp(ip.pseudo(), 1000, 53, &vec![0; payload]);
    ethernet(B, A, &[], 0x0800, &ipv4(&ip, &l4))
}

fn eth_tcp(s: [u8; 4], d: [u8; 4]) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 6);
    let l4 = tcp(ip.pseudo(), &TcpSpec::new(40000, 80, 0x02), &[]);
    ethernet(B, A, &[], 0x0800, &ipv4(&ip, &l4))
}

fn eth_icmp(s: [u8; 4], d: [u8; 4]) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 1);
    ethernet(B, A, &[], 0x0800, &ipv4(&ip, &icmp4(8, 0, &[0; 8])))
}

fn eth_udp6() -> Vec<u8> {
    let mut s = [0u8; 16];
    s[0] = 0x20;
    s[1] = 0x01;
    s[15] = 1;
    let mut d = s;
    d[15] = 2;
    let spec = Ipv6Spec::new(s, d);
    let l4 = udp(spec.pseudo(17), 1000, 53, &[0; 8]);
    ethernet(B, A, &[], 0x86dd, &ipv6(&spec, &[], 17, &l4))
}

fn eth_udp_vlan(vid: u16) -> Vec<u8> {
    let ip = Ipv4Spec::new([10, 0, 1, 2], [10, 0, 1, 3], 17);
    let l4 = udp(ip.pseudo(), 1000, 53, &[0; 8]);
    ethernet(B, A, &[(0x8100, vid)], 0x0800, &ipv4(&ip, &l4))
}

fn eth_arp() -> Vec<u8> {
    arp(1, A, [10, 0, 0, 9], [0; 6], [10, 0, 0, 1])
}

struct Case {
    name: &'static str,
    flows: Vec<&'static str>,
    packets: Vec<(u32, Vec<u8>)>,
}

/// The `ovs-ofctl -O` protocol (and our dialect) a flow is added with.
fn protocol(flow: &str) -> &'static str {
    let of13 = [
        "goto_table",
        "push_vlan",
        "write_actions",
        "clear_actions",
        "enqueue(",
    ];
    if of13.iter().any(|k| flow.contains(k)) {
        "OpenFlow13"
    } else {
        "OpenFlow10"
    }
}

fn packets_all() -> Vec<(u32, Vec<u8>)> {
    vec![
        (1, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 8)),
        (1, eth_tcp([10, 0, 0, 1], [10, 9, 0, 2])),
        (1, eth_icmp([10, 0, 0, 1], [10, 0, 0, 3])),
        (1, eth_udp6()),
        (1, eth_arp()),
        (1, eth_udp_vlan(7)),
        (2, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 8)),
        (2, eth_tcp([10, 0, 0, 1], [10, 9, 0, 2])),
        (3, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 8)),
        (3, eth_arp()),
        (1, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 1200)),
        (2, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 1200)),
    ]
}

fn packets_clone() -> Vec<(u32, Vec<u8>)> {
    let mut v = Vec::new();
    for port in 1..=4 {
        v.push((port, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 8)));
        v.push((port, eth_tcp([10, 0, 0, 1], [10, 9, 0, 2])));
        v.push((port, eth_arp()));
        v.push((port, eth_udp_vlan(9)));
    }
    v.push((1, eth_udp6()));
    v.push((2, eth_icmp([10, 0, 0, 1], [10, 0, 0, 3])));
    v
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "clone: inline when reversible or last, datapath clone() around ct",
            flows: vec![
                "table=0,priority=10,in_port=1,ip,actions=clone(mod_nw_src:1.2.3.4,mod_nw_ttl:3,output:2),output:3",
                "table=0,priority=10,in_port=1,ipv6,actions=clone(mod_nw_ttl:3,output:2),clone(drop),output:3",
                "table=0,priority=10,in_port=2,ip,actions=clone(ct(commit),output:3),output:4",
                "table=0,priority=10,in_port=3,actions=clone(mod_dl_src:00:00:5e:00:01:01,resubmit(,1)),output:1",
                "table=0,priority=10,in_port=4,ip,actions=output:1,clone(mod_dl_dst:00:00:5e:00:01:02,ct(commit,zone=7),output:2)",
                "table=0,priority=5,in_port=1,actions=clone(clone(mod_vlan_vid:5,output:2),output:3),output:4",
                "table=0,priority=5,in_port=2,actions=clone(exit),output:3",
                "table=0,priority=5,in_port=4,actions=clone(strip_vlan,output:2),output:3",
                "table=1,priority=10,ip,actions=ct(commit,zone=3),output:2",
                "table=1,priority=0,actions=output:2",
            ],
            packets: packets_clone(),
        },
        Case {
            name: "write_metadata + goto_table, metadata matches, mod_nw_ttl",
            flows: vec![
                "table=0,priority=10,in_port=1,ip,actions=write_metadata:0x5/0xff,goto_table:1",
                "table=0,priority=10,in_port=2,actions=write_metadata:0x1234,goto_table:1",
                "table=0,priority=5,ipv6,actions=mod_nw_ttl:3,output:4",
                "table=0,priority=4,actions=output:4",
                "table=1,priority=10,metadata=0x5/0xff,udp,actions=mod_nw_ttl:9,output:2",
                "table=1,priority=10,metadata=0x1234,tcp,actions=mod_nw_ttl:200,output:3",
                "table=1,priority=5,metadata=0x5/0xff,actions=output:3",
                "table=1,priority=0,actions=output:4",
            ],
            packets: packets_all(),
        },
        Case {
            name: "exit: stops this list and every list that resubmitted into it",
            flows: vec![
                "table=0,priority=10,in_port=1,actions=output:2,exit,output:3",
                "table=0,priority=10,in_port=2,actions=resubmit(,2),output:4",
                "table=0,priority=10,in_port=3,actions=output:4,write_metadata:0x7,goto_table:3",
                "table=2,priority=10,ip,actions=mod_nw_ttl:7,output:1,exit,output:3",
                "table=2,priority=0,actions=output:3",
                "table=3,priority=0,actions=resubmit(,4),output:2",
                "table=4,priority=10,metadata=0x7,arp,actions=exit",
                "table=4,priority=0,actions=output:1",
            ],
            packets: packets_all(),
        },
        Case {
            name: "write_actions/clear_actions: the action set, run when the pipeline ends",
            flows: vec![
                "table=0,priority=10,in_port=1,ip,actions=write_actions(output:2,set_queue:3,mod_nw_ttl:9,pop_vlan,dec_ttl,output:3,set_field:1->reg0,mod_dl_src:00:00:5e:00:00:07),goto_table:1",
                "table=0,priority=10,in_port=2,actions=output:4,write_actions(push_vlan:0x8100,set_field:4097->vlan_vid,resubmit(,3),ct_clear),goto_table:2",
                "table=0,priority=10,in_port=3,ip,actions=write_actions(output:1,set_queue:2),goto_table:1",
                "table=0,priority=5,in_port=1,actions=write_actions(set_field:2->reg0,resubmit(,3)),goto_table:4",
                "table=0,priority=5,in_port=3,actions=clear_actions,write_actions(mod_dl_dst:00:00:5e:00:00:09),goto_table:1",
                "table=1,priority=10,udp,actions=output:4,write_actions(set_field:2->reg0,move:NXM_NX_REG0[]->NXM_NX_REG1[],set_queue:5,dec_ttl),goto_table:2",
                "table=1,priority=10,tcp,actions=clear_actions,write_actions(CONTROLLER:64)",
                "table=1,priority=5,actions=write_actions(output:4,mod_dl_dst:00:00:5e:00:00:0b),goto_table:2",
                "table=1,priority=0,actions=exit",
                "table=2,priority=10,reg1=2,actions=write_actions(strip_vlan,output:2)",
                "table=2,priority=5,ip,actions=write_actions(mod_nw_src:10.1.1.1,ct(commit))",
                "table=2,priority=8,arp,actions=exit",
                "table=2,priority=0,actions=drop",
                "table=3,priority=10,reg0=2,actions=output:1",
                "table=3,priority=0,actions=mod_vlan_pcp:3,output:2",
                "table=4,priority=0,actions=write_actions(output:4),goto_table:5",
            ],
            packets: {
                let mut v = packets_all();
                v.push((2, eth_arp()));
                v
            },
        },
        Case {
            name: "set_queue, pop_queue, enqueue (OpenFlow 1.0 and 1.3 forms)",
            flows: vec![
                "table=0,priority=10,in_port=1,ip,actions=set_queue:3,output:2,enqueue:3:7,output:2,pop_queue,output:4,enqueue:1:5,enqueue:IN_PORT:6,set_queue:0,output:2",
                "table=0,priority=10,in_port=1,actions=set_queue:5,enqueue:3:7,output:4,pop_queue,set_queue:9,enqueue(2,9),resubmit(,1)",
                "table=0,priority=10,in_port=2,actions=set_queue:1,clone(set_queue:4,output:3),output:1,goto_table:1",
                "table=0,priority=10,in_port=3,actions=enqueue:LOCAL:4,set_queue:2,mod_vlan_vid:9,output:1",
                "table=0,priority=5,actions=set_queue:8,pop_queue,output:4",
                "table=1,priority=10,ip,actions=set_queue:11,ct(commit),output:4",
                "table=1,priority=0,actions=pop_queue,output:3",
            ],
            packets: packets_all(),
        },
    ]
}

fn our_bridge(c: &Case) -> Bridge {
    let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
    for f in &c.flows {
        let d = if protocol(f) == "OpenFlow13" {
            flow::text::Dialect::OpenFlow13
        } else {
            flow::text::Dialect::OpenFlow10
        };
        common::add_flow(&mut br, f, d);
    }
    br
}

fn load_ovs(sb: &OvsSandbox, flows: &[&str]) {
    sb.del_flows().expect("del-flows");
    for proto in ["OpenFlow10", "OpenFlow13"] {
        let part: Vec<&str> = flows
            .iter()
            .copied()
            .filter(|f| protocol(f) == proto)
            .collect();
        if part.is_empty() {
            continue;
        }
        let path = sb.dir().join(format!("actions-{proto}.txt"));
        std::fs::write(&path, part.join("\n") + "\n").expect("write flows");
        sb.ofctl(&[
            "-O".as_ref(),
            proto.as_ref(),
            "add-flows".as_ref(),
            "br0".as_ref(),
            path.as_os_str(),
        ])
        .unwrap_or_else(|e| panic!("ovs refused {part:?}: {e}"));
    }
    sb.fdb_flush().expect("fdb/flush");
}

#[test]
fn issue17_actions_match_live_ovs() {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return;
    }
    let sb = OvsSandbox::start(4).expect("start OVS sandbox");
    let (mut total, mut equal, mut fewer) = (0, 0, 0);
    let mut diffs = Vec::new();
    let mut wider = Vec::new();
    for c in cases() {
        load_ovs(&sb, &c.flows);
        let br = our_bridge(&c);
        for (in_port, pkt) in &c.packets {
            let t = sb.trace_full(*in_port, pkt).expect("ovs trace");
            let mut key = FlowKey::ZERO;
            extract(pkt, &PacketMeta::port(*in_port), &mut key);
            let out = xlate(
                &br,
                &XlateIn {
                    side_effects: true,
                    ..XlateIn::new(key)
                },
            );
            let ours = ofproto::format_odp_actions(&out.actions);
            let s0 = &t.stages[0];
            if std::env::var_os("SHOW_ACTIONS").is_some() {
                eprintln!(
                    "in_port {in_port} {}\n  ours {ours}\n  ovs  {}",
                    s0.flow, s0.datapath_actions
                );
            }
            total += 1;
            if same_actions(&ours, &s0.datapath_actions, &key) {
                equal += 1;
            } else {
                diffs.push(format!(
                    "{}: in_port {in_port} flow {}\n  ours {ours}\n  ovs  {}",
                    c.name, s0.flow, s0.datapath_actions
                ));
            }
            let ours_mf = ofproto::trace::format_megaflow(&key, &out);
            match (megaflow_bits(&ours_mf), megaflow_bits(&s0.megaflow)) {
                (Some(o), Some(v)) if o > v => wider.push(format!(
                    "{}: in_port {in_port} flow {}: {o} bits > OVS's {v}\n  ours {ours_mf}\n  ovs  {}",
                    c.name, s0.flow, s0.megaflow
                )),
                (Some(o), Some(v)) => {
                    if o < v {
                        fewer += 1;
                        eprintln!("fewer 1-bits than OVS ({o} < {v}):\n  ours {ours_mf}\n  ovs  {}", s0.megaflow);
                    }
                }
                _ => wider.push(format!(
                    "{}: unparsed megaflow\n  ours {ours_mf}\n  ovs  {}",
                    c.name, s0.megaflow
                )),
            }
        }
    }
    eprintln!(
        "live OVS (issue #17 actions): {equal}/{total} datapath actions equal; {} megaflows with more 1-bits than OVS, {fewer} with fewer",
        wider.len()
    );
    assert!(total >= 20, "too few packets traced: {total}");
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    assert!(wider.is_empty(), "{}", wider.join("\n"));
}

/// Flow mods check `clone(...)`'s nested actions as the outer ones, and `out_port` filters see
/// outputs inside a clone (OVS flattens nested lists there). No OVS needed.
#[test]
fn nested_clone_is_checked_and_filtered() {
    use flow::ofp::{Action, OfPort};
    let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
    let mut spec = flow::text::parse_flow("actions=clone(output:2),output:3").expect("parse");
    spec.actions = vec![Action::Clone(vec![Action::output(OfPort(0))])];
    let fm = |spec: flow::ofp::FlowSpec| FlowMod {
        command: FlowModCommand::Add,
        spec,
        reset_counts: false,
    };
    assert!(br.flow_mod(&fm(spec.clone()), 0).is_err());
    spec.actions = vec![Action::Clone(vec![Action::output(OfPort(2))])];
    br.flow_mod(&fm(spec), 0).expect("valid clone");
    let rules = br.table(0).expect("table 0").sorted();
    assert_eq!(rules.len(), 1);
    assert!(rules[0].1.outputs_to(OfPort(2)));
    assert!(!rules[0].1.outputs_to(OfPort(3)));
}

/// The trace tree (`bridge("br0")` to the line before `Final flow:`) of pipelines that use the
/// action set and the queue actions equals `ofproto/trace`'s: the `-> action set is: …` and
/// `action set was: …` details, the `--. Executing action set:` node and `-> queue = 0`.
#[test]
fn action_set_trace_text_matches_live_ovs() {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return;
    }
    let sb = OvsSandbox::start(4).expect("start OVS sandbox");
    let flows = vec![
        "table=0,priority=10,in_port=1,ip,actions=write_actions(output:2,set_queue:3,mod_nw_ttl:9,pop_vlan,dec_ttl,output:3,set_field:1->reg0),goto_table:1",
        "table=0,priority=10,in_port=2,actions=write_actions(ct_clear,output:4),goto_table:1",
        "table=0,priority=10,in_port=3,actions=set_queue:4,output:1,pop_queue,pop_queue,enqueue:2:5,output:4",
        "table=1,priority=10,udp,actions=output:4,write_actions(set_field:2->reg0,move:NXM_NX_REG0[]->NXM_NX_REG1[],set_queue:5),goto_table:2",
        "table=1,priority=10,tcp,actions=clear_actions,goto_table:2",
        "table=1,priority=5,actions=clear_actions,write_actions(resubmit(,3)),goto_table:2",
        "table=2,priority=0,actions=write_actions(mod_dl_dst:00:00:5e:00:00:0b)",
        "table=3,priority=0,actions=output:2",
    ];
    load_ovs(&sb, &flows);
    let br = our_bridge(&Case {
        name: "trace",
        flows: flows.clone(),
        packets: Vec::new(),
    });
    let mut diffs = Vec::new();
    let mut n = 0;
    for (in_port, pkt) in [
        (1, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 8)),
        (1, eth_tcp([10, 0, 0, 1], [10, 9, 0, 2])),
        (1, eth_udp_vlan(7)),
        (2, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 8)),
        (2, eth_arp()),
        (3, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 8)),
    ] {
        n += 1;
        diffs.extend(common::trace_tree_diff(&sb, &br, in_port, &pkt));
    }
    assert_eq!(n, 6);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
