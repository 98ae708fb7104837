//! Differential test against a live OVS 3.1 (`testutil::ovs::OvsSandbox`, dummy datapath) on
//! hand-written pipelines: L2 learning with NORMAL and VLAN port modes, L3 rewrite with
//! `mod_dl_*`/`dec_ttl`, multi-table resubmit chains over registers, `ct(commit)` →
//! recirculation, drops and a resubmit loop. `Datapath actions` must agree (compared by effect:
//! recirculation ids renumbered, flood order ignored); megaflow 1-bit counts are reported.
//! Prints `SKIP:` and passes when OVS is not installed.

mod common;

use common::{megaflow_bits, same_actions};
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use ofproto::{Backend, Bridge, VlanMode, XlateIn, xlate};
use testutil::ovs::{OvsSandbox, ovs_missing_reason};
use testutil::packets::{Ipv4Spec, TcpSpec, arp, ethernet, icmp4, ipv4, tcp, udp};
use testutil::pipelines::{PortCfg, VlanMode as TVlan, flow_protocol};

const A: [u8; 6] = [0x00, 0x16, 0x3e, 0, 0, 0x0a];
const B: [u8; 6] = [0x00, 0x16, 0x3e, 0, 0, 0x0b];
const C: [u8; 6] = [0x00, 0x16, 0x3e, 0, 0, 0x0c];
const BCAST: [u8; 6] = [0xff; 6];

fn udp_ip(s: [u8; 4], d: [u8; 4]) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 17);
    ipv4(&ip, &udp(ip.pseudo(), 1000, 53, &[0; 8]))
}

fn eth_udp(dst: [u8; 6], src: [u8; 6], s: [u8; 4], d: [u8; 4]) -> Vec<u8> {
    ethernet(dst, src, &[], 0x0800, &udp_ip(s, d))
}

fn eth_udp_vlan(dst: [u8; 6], src: [u8; 6], vid: u16, pcp: u16) -> Vec<u8> {
    let ip = udp_ip([10, 0, 1, 2], [10, 0, 1, 3]);
    ethernet(dst, src, &[(0x8100, vid | pcp << 13)], 0x0800, &ip)
}

fn eth_tcp(dst: [u8; 6], src: [u8; 6], s: [u8; 4], d: [u8; 4]) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 6);
    let l4 = tcp(ip.pseudo(), &TcpSpec::new(40000, 80, 0x02), &[]);
    ethernet(dst, src, &[], 0x0800, &ipv4(&ip, &l4))
}

fn eth_icmp(dst: [u8; 6], src: [u8; 6], s: [u8; 4], d: [u8; 4]) -> Vec<u8> {
    let ip = Ipv4Spec::new(s, d, 1);
    ethernet(dst, src, &[], 0x0800, &ipv4(&ip, &icmp4(8, 0, &[0; 8])))
}

struct Case {
    name: &'static str,
    ports: Vec<PortCfg>,
    flows: Vec<&'static str>,
    packets: Vec<(u32, Vec<u8>)>,
}

fn cases() -> Vec<Case> {
    let access = |port, tag| PortCfg {
        port,
        vlan_mode: Some(TVlan::Access),
        tag: Some(tag),
        trunks: vec![],
    };
    let trunk = |port, trunks: Vec<u16>| PortCfg {
        port,
        vlan_mode: Some(TVlan::Trunk),
        tag: None,
        trunks,
    };
    let default_ports = (1..=4).map(PortCfg::default_for).collect::<Vec<_>>();
    let ttl1 = {
        let mut spec = Ipv4Spec::new([10, 0, 0, 1], [10, 0, 0, 2], 17);
        spec.ttl = 1;
        ethernet(
            B,
            A,
            &[],
            0x0800,
            &ipv4(&spec, &udp(spec.pseudo(), 1, 2, &[0; 8])),
        )
    };
    vec![
        Case {
            name: "l2 learning, NORMAL, access and trunk ports",
            ports: vec![
                access(1, 10),
                trunk(2, vec![10, 20]),
                access(3, 20),
                PortCfg::default_for(4),
            ],
            flows: vec!["actions=NORMAL"],
            packets: vec![
                (1, eth_udp(BCAST, A, [10, 0, 0, 1], [10, 0, 0, 255])),
                (2, eth_udp_vlan(A, B, 10, 0)),
                (1, eth_udp(B, A, [10, 0, 0, 1], [10, 0, 0, 2])),
                (3, eth_udp(BCAST, C, [10, 0, 1, 3], [10, 0, 1, 255])),
                (2, eth_udp_vlan(C, B, 20, 3)),
                (2, eth_udp_vlan(C, B, 30, 0)),
                (1, eth_udp_vlan(B, A, 10, 0)),
                (4, arp(1, C, [10, 0, 0, 9], [0; 6], [10, 0, 0, 1])),
            ],
        },
        Case {
            name: "l3 rewrite: mod_dl_*, dec_ttl, mod_nw_*, mod_tp_dst",
            ports: default_ports.clone(),
            flows: vec![
                "table=0,priority=10,ip,nw_dst=10.0.0.0/8,actions=mod_dl_src:00:00:5e:00:01:01,mod_dl_dst:00:16:3e:00:00:0c,dec_ttl,output:2",
                "table=0,priority=20,tcp,nw_dst=10.9.0.0/16,actions=mod_nw_dst:192.168.9.9,mod_tp_dst:8080,output:3,mod_nw_tos:40,output:4",
                "table=0,priority=1,actions=drop",
            ],
            packets: vec![
                (1, eth_udp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
                (1, eth_tcp(B, A, [1, 1, 1, 1], [10, 9, 2, 3])),
                (1, eth_tcp(B, A, [1, 1, 1, 1], [11, 9, 2, 3])),
                (1, ttl1.clone()),
                (1, eth_icmp(B, A, [1, 1, 1, 1], [10, 3, 3, 3])),
            ],
        },
        Case {
            name: "multi-table resubmit chain over registers",
            ports: default_ports.clone(),
            flows: vec![
                "table=0,in_port=1,actions=load:0x5->NXM_NX_REG0[],resubmit(,1)",
                "table=0,in_port=2,actions=load:0x6->NXM_NX_REG0[],resubmit(,1),output:4",
                "table=1,reg0=5,udp,actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],resubmit(,2)",
                "table=1,reg0=6,actions=resubmit(3,2)",
                "table=2,udp,tp_dst=53,actions=output:3",
                "table=2,in_port=3,actions=output:1",
            ],
            packets: vec![
                (1, eth_udp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
                (2, eth_udp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
                (2, eth_tcp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
                (3, eth_tcp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
            ],
        },
        Case {
            name: "ct(commit) then recirculation",
            ports: default_ports.clone(),
            flows: vec![
                "table=0,ip,actions=ct(commit,zone=5,table=1)",
                "table=0,arp,actions=FLOOD",
                "table=1,ct_state=+trk+new,ip,actions=output:2",
                "table=1,ct_state=+trk+est,ip,actions=output:3",
            ],
            packets: vec![
                (1, eth_udp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
                (1, arp(1, A, [10, 0, 0, 9], [0; 6], [10, 0, 0, 1])),
            ],
        },
        Case {
            name: "drops and loops",
            ports: default_ports,
            flows: vec![
                "table=0,priority=5,udp,actions=drop",
                "table=0,priority=4,tcp,actions=resubmit(,0)",
                "table=0,priority=3,ip,actions=output:2,resubmit(,7)",
                "table=7,priority=1,arp,actions=ALL",
            ],
            packets: vec![
                (1, eth_udp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
                (1, eth_tcp(B, A, [1, 1, 1, 1], [10, 1, 2, 3])),
                (1, eth_icmp(B, A, [1, 1, 1, 1], [10, 3, 3, 3])),
                (1, arp(1, A, [10, 0, 0, 9], [0; 6], [10, 0, 0, 1])),
                (1, ethernet(B, A, &[], 0x88cc, &[0; 46])),
            ],
        },
    ]
}

fn our_bridge(c: &Case) -> Bridge {
    let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
    for p in &c.ports {
        let trunks = (!p.trunks.is_empty()).then(|| p.trunks.clone());
        br.set_port_vlan(
            flow::ofp::OfPort(p.port as u16),
            VlanMode::from_ovs(p.tag, trunks, p.vlan_mode.map(|m| m.as_str())),
        );
    }
    for f in &c.flows {
        let d = if flow_protocol(f) == "OpenFlow13" {
            flow::text::Dialect::OpenFlow13
        } else {
            flow::text::Dialect::OpenFlow10
        };
        common::add_flow(&mut br, f, d);
    }
    br
}

#[test]
fn hand_written_pipelines_match_live_ovs() {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return;
    }
    let sb = OvsSandbox::start(4).expect("start OVS sandbox");
    sb.set_vlan_limit(2).expect("vlan-limit");
    let (mut total, mut equal, mut more, mut fewer) = (0, 0, 0, 0);
    let mut diffs = Vec::new();
    for c in cases() {
        let flows: Vec<String> = c.flows.iter().map(|s| s.to_string()).collect();
        sb.load_pipeline(&flows, &c.ports, None)
            .expect("load pipeline");
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
            if let (Some(o), Some(v)) = (megaflow_bits(&ours_mf), megaflow_bits(&s0.megaflow)) {
                if o > v {
                    more += 1;
                    eprintln!(
                        "megaflow wider than OVS's ({o} > {v} bits):\n  ours {ours_mf}\n  ovs  {}",
                        s0.megaflow
                    );
                } else if o < v {
                    fewer += 1;
                }
            }
            // Follow the ct recirculations so MAC learning there happens as in OVS.
            for f in out.frozen.iter().filter(|f| f.zone.is_some()) {
                let k = ofproto::xlate::resume_key(f, 0x21);
                xlate(
                    &br,
                    &XlateIn {
                        side_effects: true,
                        table: f.table,
                        ..XlateIn::new(k)
                    },
                );
            }
        }
    }
    eprintln!(
        "live OVS: {equal}/{total} datapath actions equal; megaflow: {more} with more 1-bits than OVS, {fewer} with fewer"
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
