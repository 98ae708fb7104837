//! Differential test of OpenFlow groups against a live OVS 3.1 (`testutil::ovs::OvsSandbox`,
//! dummy datapath): pipelines with every group type — OVN-style load-balancer select groups
//! (`selection_method=dp_hash`, buckets `ct(commit,table=…,zone=…,nat(dst=…))`), default
//! select groups (`hash(sym_l4(0))`), `selection_method=hash` with fields, `all` groups for
//! flooding with per-bucket rewrites, fast-failover groups with dead watch ports and watched
//! groups, chained groups, a select group inside an `all` bucket, a bucket naming a missing
//! group, controller output from a bucket — several packets each.
//!
//! For every packet: the first pass's datapath actions equal OVS's `ofproto/trace` (recirc ids
//! normalised) and our megaflow is never wider (fewer 1-bits) than OVS's. For a `dp_hash`
//! freeze the *second* pass is compared too, for several `dp_hash` values: OVS's
//! recirculation context is kept alive by a datapath flow (the packet is sent through
//! `netdev-dummy/receive`), its id read from `dpctl/dump-flows`, and the pass traced with
//! `recirc_id=…,dp_hash=…`; ours resumes the frozen state on a bridge that pools its ids.
//! Prints `SKIP:` and passes when OVS is not installed.

mod common;

use std::time::Duration;

use common::{megaflow_bits, same_actions};
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::ofp::group::GroupCommand;
use ofproto::{Backend, Bridge, XlateIn, xlate};
use testutil::ovs::{OvsSandbox, ovs_missing_reason};
use testutil::packets::{Ipv4Spec, TcpSpec, ethernet, ipv4, tcp, udp};

const A: [u8; 6] = [0x00, 0x16, 0x3e, 0, 0, 0x0a];
const B: [u8; 6] = [0x00, 0x16, 0x3e, 0, 0, 0x0b];

fn eth_tcp(s: [u8; 4], d: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 6);
    let l4 = tcp(ip.pseudo(), &TcpSpec::new(sport, dport, 0x02), &[]);
    ethernet(B, A, &[], 0x0800, &ipv4(&ip, &l4))
}

fn eth_udp(s: [u8; 4], d: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 17);
    ethernet(
        B,
        A,
        &[],
        0x0800,
        &ipv4(&ip, &udp(ip.pseudo(), sport, dport, &[0; 8])),
    )
}

struct Case {
    name: &'static str,
    groups: Vec<&'static str>,
    flows: Vec<&'static str>,
    packets: Vec<(u32, Vec<u8>)>,
}

fn cases() -> Vec<Case> {
    let tcps = |d: [u8; 4], dport: u16| -> Vec<(u32, Vec<u8>)> {
        [
            ([10, 0, 0, 1], 40000),
            ([10, 0, 0, 2], 40001),
            ([10, 9, 8, 7], 5555),
        ]
        .into_iter()
        .map(|(s, sp)| (1, eth_tcp(s, d, sp, dport)))
        .collect()
    };
    vec![
        Case {
            name: "ovn_lb_dp_hash",
            groups: vec![
                "group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=ct(commit,table=2,zone=7,nat(dst=10.0.0.10:80)),bucket=bucket_id:1,weight:100,actions=ct(commit,table=2,zone=7,nat(dst=10.0.0.11:80)),bucket=bucket_id:2,weight:100,actions=ct(commit,table=2,zone=7,nat(dst=10.0.0.12:8080))",
            ],
            flows: vec![
                "table=0,priority=10,tcp,nw_dst=172.16.0.1,tp_dst=80,actions=group:1",
                "table=0,priority=0,actions=drop",
                "table=2,priority=0,actions=output:2",
            ],
            packets: tcps([172, 16, 0, 1], 80),
        },
        Case {
            name: "default_select_weights",
            groups: vec![
                "group_id=2,type=select,bucket=output:2,bucket=output:3,bucket=weight:5,output:4",
                // Weights 1 and 100 need 128 hash values (dp_hash); 1 and 1000 need 1024,
                // more than 256: the default falls back to hashing in translation.
                "group_id=3,type=select,bucket=weight:1,output:2,bucket=weight:100,output:3,bucket=weight:0,output:4",
                "group_id=18,type=select,bucket=weight:1,output:2,bucket=weight:1000,output:3,bucket=weight:7,output:4",
            ],
            flows: vec![
                "priority=10,tcp,actions=group:2",
                "priority=10,udp,actions=group:3",
                "priority=10,icmp,actions=group:3",
                "priority=20,tcp,tp_dst=22,actions=group:18",
                "priority=20,udp,tp_dst=54,actions=group:18",
            ],
            packets: {
                let mut p = tcps([10, 0, 0, 9], 443);
                p.push((1, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53)));
                p.push((2, eth_udp([10, 0, 0, 3], [10, 0, 0, 2], 1000, 53)));
                for (s, sp) in [
                    ([10, 0, 0, 1], 999),
                    ([10, 0, 0, 7], 1000),
                    ([10, 0, 0, 2], 7),
                ] {
                    p.push((1, eth_tcp(s, [10, 0, 0, 2], sp, 22)));
                    p.push((1, eth_udp(s, [10, 0, 0, 2], sp, 54)));
                }
                p
            },
        },
        Case {
            name: "hash_fields",
            groups: vec![
                "group_id=4,type=select,selection_method=hash,fields(ip_src,tcp_dst),bucket=output:2,bucket=output:3,bucket=weight:3,output:4",
                "group_id=5,type=select,selection_method=hash,selection_method_param=7,fields(ip_dst=255.255.0.0,udp_src),bucket=output:2,bucket=output:3",
            ],
            flows: vec![
                "priority=10,tcp,actions=group:4",
                "priority=10,udp,actions=group:5",
                "priority=5,ip,actions=group:4",
            ],
            packets: {
                let mut p = tcps([10, 1, 0, 1], 80);
                p.extend(tcps([10, 1, 0, 1], 8080));
                for s in [[1, 2, 3, 4], [5, 6, 7, 8]] {
                    p.push((1, eth_udp(s, [10, 7, 1, 1], 4000, 53)));
                    p.push((1, eth_udp(s, [10, 8, 1, 1], 4001, 53)));
                }
                p
            },
        },
        Case {
            name: "all_flood_and_rewrite",
            groups: vec![
                "group_id=6,type=all,bucket=output:1,bucket=output:2,bucket=mod_dl_src:00:00:00:00:00:09,output:3,bucket=output:2,output:4",
                "group_id=7,type=all,bucket=controller,bucket=pop_vlan,dec_ttl,push_vlan:0x8100,output:4,bucket=note:01",
            ],
            flows: vec![
                "priority=10,tcp,actions=group:6,output:4",
                "priority=10,udp,actions=mod_dl_dst:00:00:00:00:00:07,group:6,group:7",
            ],
            packets: vec![
                (1, eth_tcp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)),
                (2, eth_tcp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)),
                (3, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)),
            ],
        },
        Case {
            name: "fast_failover",
            groups: vec![
                "group_id=8,type=fast_failover,bucket=watch_port:9,output:4,bucket=watch_port:3,output:3,bucket=watch_port:2,output:2",
                "group_id=9,type=fast_failover,bucket=watch_port:10,output:4",
                "group_id=10,type=fast_failover,bucket=watch_group:9,group:9,bucket=watch_group:8,output:2",
                "group_id=11,type=fast_failover,bucket=watch_port:11,output:4,bucket=watch_group:99,output:3",
            ],
            flows: vec![
                "priority=10,tcp,actions=group:8",
                "priority=10,udp,actions=group:10",
                "priority=10,icmp,actions=group:11,output:1",
            ],
            packets: vec![
                (1, eth_tcp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)),
                (1, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)),
            ],
        },
        Case {
            name: "chained_groups",
            groups: vec![
                "group_id=12,type=indirect,bucket=group:13",
                "group_id=13,type=all,bucket=output:2,bucket=group:14",
                "group_id=14,type=select,selection_method=hash,fields(udp_dst),bucket=output:3,bucket=output:4",
                "group_id=15,type=all,bucket=output:2,bucket=group:1,bucket=output:3",
                "group_id=1,type=select,selection_method=dp_hash,bucket=weight:50,output:4,bucket=weight:150,output:3",
                "group_id=16,type=all,bucket=group:99,bucket=output:4",
                "group_id=17,type=all,bucket=group:17",
            ],
            flows: vec![
                "table=0,priority=10,udp,actions=group:12",
                "table=0,priority=10,tcp,tp_dst=80,actions=group:15,output:4",
                "table=0,priority=10,tcp,tp_dst=81,actions=resubmit(,1),mod_dl_src:00:00:00:00:00:05,output:2",
                "table=1,priority=10,tcp,actions=mod_nw_tos:8,group:1,output:3",
                "table=0,priority=10,tcp,tp_dst=82,actions=group:16,output:3",
                "table=0,priority=10,tcp,tp_dst=83,actions=group:17",
            ],
            packets: {
                let mut p = vec![
                    (1, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 53)),
                    (1, eth_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 54)),
                ];
                for d in [80, 81, 82, 83] {
                    p.push((1, eth_tcp([10, 0, 0, 1], [10, 0, 0, 2], 1234, d)));
                }
                p
            },
        },
    ]
}

fn our_bridge(c: &Case) -> Bridge {
    let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
    for g in &c.groups {
        br.group_mod_text(GroupCommand::Add, g, 0)
            .unwrap_or_else(|e| panic!("{}: {g}: {e}", c.name));
    }
    br.add_flows_text(&c.flows.join("\n"), 0)
        .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    br
}

fn load_ovs(sb: &OvsSandbox, c: &Case) {
    sb.ofctl(&["-O", "OpenFlow15", "del-groups", "br0"])
        .expect("del-groups");
    sb.del_flows().expect("del-flows");
    sb.dp_purge().expect("purge");
    for g in &c.groups {
        sb.ofctl(&["-O", "OpenFlow15", "add-group", "br0", g])
            .unwrap_or_else(|e| panic!("{}: OVS refused {g}: {e}", c.name));
    }
    let flows: Vec<String> = c.flows.iter().map(|f| f.to_string()).collect();
    sb.add_flows(&flows).expect("add-flows");
}

/// The id of OVS's `dp_hash` recirculation for `pkt`: sent through the datapath, read from
/// the first-pass flow's `recirc(…)` after `hash(…)`.
fn ovs_hash_recirc(sb: &OvsSandbox, in_port: u32, pkt: &[u8]) -> u32 {
    sb.dp_purge().expect("purge");
    sb.dp_receive(in_port, pkt).expect("receive");
    let line = sb
        .dp_wait_flow(
            |l| l.starts_with("recirc_id(0)") && l.contains("hash("),
            Duration::from_secs(5),
        )
        .expect("first-pass flow with hash()");
    let at = line.rfind("recirc(0x").expect("recirc in actions") + "recirc(0x".len();
    let hex: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    u32::from_str_radix(&hex, 16).expect("recirc id")
}

#[test]
fn group_pipelines_match_live_ovs() {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return;
    }
    let sb = OvsSandbox::start(4).expect("start OVS sandbox");
    let (mut total, mut second, mut equal_mf) = (0, 0, 0);
    let mut diffs = Vec::new();
    for c in cases() {
        load_ovs(&sb, &c);
        let br = our_bridge(&c);
        let pooled = our_bridge(&c);
        pooled.pool_recirc_ids();
        for (in_port, pkt) in &c.packets {
            let t = sb.trace_full(*in_port, pkt).expect("ovs trace");
            let s0 = &t.stages[0];
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
            total += 1;
            if !same_actions(&ours, &s0.datapath_actions, &key) {
                diffs.push(format!(
                    "{}: in_port {in_port} flow {}\n  ours {ours}\n  ovs  {}",
                    c.name, s0.flow, s0.datapath_actions
                ));
            }
            let ours_mf = ofproto::trace::format_megaflow(&key, &out);
            match (megaflow_bits(&ours_mf), megaflow_bits(&s0.megaflow)) {
                (Some(o), Some(v)) if o < v => diffs.push(format!(
                    "{}: megaflow wider than OVS's ({o} < {v} bits)\n  ours {ours_mf}\n  ovs  {}",
                    c.name, s0.megaflow
                )),
                (Some(o), Some(v)) => equal_mf += usize::from(o == v),
                _ => diffs.push(format!(
                    "{}: unparsable megaflow\n  ours {ours_mf}\n  ovs  {}",
                    c.name, s0.megaflow
                )),
            }
            // The second pass of a `dp_hash` freeze, for several hash values.
            let pout = xlate(&pooled, &XlateIn::new(key));
            let Some(frozen) = pout.frozen.iter().find(|f| !f.actions.is_empty()) else {
                continue;
            };
            let rid = ovs_hash_recirc(&sb, *in_port, pkt);
            for h in [
                1u32,
                2,
                7,
                0x10,
                0x2f,
                0xf36d_9fdc,
                0x50eb_3821,
                0xffff_ffff,
            ] {
                // (OVS's flow parser refuses `tp_src` on UDP after `recirc_id`; the UDP
                // names parse.)
                let fl = if s0.flow.starts_with("udp,") {
                    s0.flow
                        .replace("tp_src=", "udp_src=")
                        .replace("tp_dst=", "udp_dst=")
                } else {
                    s0.flow.clone()
                };
                let ovs = sb
                    .trace_flow(&format!("recirc_id={rid:#x},dp_hash={h:#x},{fl}"))
                    .expect("ovs second-pass trace");
                let mut k = frozen.resume;
                flow::FieldId::DpHash.set(&mut k, u128::from(h));
                let o2 = xlate(&pooled, &XlateIn::new(k));
                let ours2 = ofproto::format_odp_actions(&o2.actions);
                second += 1;
                if !same_actions(&ours2, &ovs.datapath_actions, &k) {
                    diffs.push(format!(
                        "{}: second pass dp_hash={h:#x} flow {}\n  ours {ours2}\n  ovs  {}",
                        c.name, s0.flow, ovs.datapath_actions
                    ));
                }
                let mf2 = ofproto::trace::format_megaflow(&k, &o2);
                if let (Some(o), Some(v)) = (megaflow_bits(&mf2), megaflow_bits(&ovs.megaflow))
                    && o < v
                {
                    diffs.push(format!(
                        "{}: second-pass megaflow wider than OVS's ({o} < {v} bits)\n  ours {mf2}\n  ovs  {}",
                        c.name, ovs.megaflow
                    ));
                }
            }
        }
    }
    eprintln!(
        "live OVS groups: {total} first passes, {second} dp_hash second passes compared; {equal_mf} megaflows exactly as wide as OVS's"
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    assert!(
        total >= 25 && second >= 40,
        "too few comparisons: {total}, {second}"
    );
}
