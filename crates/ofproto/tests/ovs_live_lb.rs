//! Differential test against a live OVS 3.1 (`testutil::ovs::OvsSandbox`, dummy datapath) for
//! the load-balancing actions of issue #17 (session 13): `multipath` with every hash-field
//! set and algorithm, `bundle`/`bundle_load` with both algorithms, live and dead members
//! (ports that do not exist) and reserved ports; `sample` (no IPFIX: nothing);
//! `check_pkt_larger` (a datapath `check_pkt_len` with both branches, the action set and
//! `exit` in them). The chosen link or member is written into
//! header bits (`eth_dst`, `ip_src`), output to, or put in a register that a second table
//! turns into an output, so the datapath actions show it: equal actions mean an equal hash
//! and an equal choice.
//!
//! For every packet (random addresses and ports, IPv4 TCP/UDP/SCTP/ICMP, IPv6, ARP, a
//! non-IP ethertype, VLAN-tagged; in on every port): our datapath actions must equal OVS's
//! (`common::same_actions`) and our megaflow must never have more 1-bits than OVS's, except
//! where OVS's megaflow misses a bit its hash reads (`symmetric_l3l4` on non-IP packets,
//! see `ofproto::xlate::lb`): there ours may have more 1-bits, at most those. Prints `SKIP:` (via `testutil::skip`) when OVS is missing.

mod common;

use common::{megaflow_bits, same_actions};
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use ofproto::{Backend, Bridge, XlateIn, xlate};
use testutil::ovs::{OvsSandbox, ovs_missing_reason};
use testutil::packets::{arp, ethernet, icmp4_echo, sctp4, tcp4, tcp6, udp4, udp6};
use testutil::rng::TestRng;

struct Case {
    name: String,
    flows: Vec<String>,
}

/// Packets with random MACs, addresses and ports (a fixed seed).
fn packets() -> Vec<Vec<u8>> {
    let mut rng = TestRng::new(0x6d75_6c74_6970_6174);
    let mut v = Vec::new();
    let ip4 = |r: &mut TestRng| {
        let x = r.next_u32().to_be_bytes();
        [10, x[1], x[2], x[3]]
    };
    let ip6 = |r: &mut TestRng| {
        let mut a = [0u8; 16];
        a[0] = 0x20;
        a[1] = 0x01;
        a[8..].copy_from_slice(&r.next_u64().to_be_bytes());
        a
    };
    for _ in 0..5 {
        let (s, d) = (ip4(&mut rng), ip4(&mut rng));
        v.push(tcp4(s, d, rng.next_u16(), rng.next_u16(), 0x02, 0));
    }
    for _ in 0..3 {
        let (s, d) = (ip4(&mut rng), ip4(&mut rng));
        v.push(udp4(s, d, rng.next_u16(), rng.next_u16(), 8));
    }
    let (s, d) = (ip4(&mut rng), ip4(&mut rng));
    v.push(sctp4(s, d, rng.next_u16(), rng.next_u16(), 8));
    let (s, d) = (ip4(&mut rng), ip4(&mut rng));
    v.push(icmp4_echo(s, d, 7, 1, true));
    for _ in 0..2 {
        let (s, d) = (ip6(&mut rng), ip6(&mut rng));
        v.push(tcp6(s, d, rng.next_u16(), rng.next_u16(), 0x10, 0));
        let (s, d) = (ip6(&mut rng), ip6(&mut rng));
        v.push(udp6(s, d, rng.next_u16(), rng.next_u16(), 8));
    }
    v.push(arp(
        1,
        [0, 0x16, 0x3e, 0, 0, 9],
        [10, 0, 0, 9],
        [0; 6],
        [10, 0, 0, 1],
    ));
    v.push(ethernet(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        &[],
        0x88b5,
        &[0; 46],
    ));
    let (s, d) = (ip4(&mut rng), ip4(&mut rng));
    let inner = udp4(s, d, 1000, 2000, 8);
    v.push(ethernet(
        [0; 6],
        [0; 6],
        &[(0x8100, 0x2007)],
        0x0800,
        &inner[14..],
    ));
    // Random MACs (unicast) everywhere but the ARP and raw frames' own.
    for p in v.iter_mut() {
        let m = rng.bytes(12);
        p[..12].copy_from_slice(&m);
        p[0] &= 0xfe;
        p[6] &= 0xfe;
    }
    v
}

/// Per hash-field set: in_port 1..4 use the four algorithms, writing the link into header
/// bits or a register resubmitted on.
fn cases() -> Vec<Case> {
    let fields = [
        "eth_src",
        "symmetric_l4",
        "symmetric_l3l4",
        "symmetric_l3l4+udp",
        "nw_src",
        "nw_dst",
        "symmetric_l3",
    ];
    let mut out = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let b = 7 * i + 1;
        let flows = vec![
            format!(
                "table=0,in_port=1,actions=multipath({f},{b},modulo_n,7,0,NXM_OF_ETH_DST[0..15]),output:2"
            ),
            format!(
                "table=0,in_port=2,actions=multipath({f},{b},hash_threshold,5,0,NXM_NX_REG0[0..2]),resubmit(,1)"
            ),
            format!(
                "table=0,priority=10,in_port=3,ip,actions=multipath({f},{b},hrw,12,0,NXM_OF_IP_SRC[8..11]),output:1"
            ),
            format!(
                "table=0,in_port=3,actions=multipath({f},{b},hrw,65,0,NXM_OF_ETH_SRC[16..31]),output:1"
            ),
            format!(
                "table=0,in_port=4,actions=multipath({f},{b},iter_hash,5000,5000,NXM_OF_ETH_DST[0..15]),multipath({f},{},iter_hash,3,2,NXM_NX_REG1[0..1]),resubmit(,2)",
                b + 1
            ),
            "table=1,reg0=0,actions=output:1".into(),
            "table=1,reg0=1,actions=output:3".into(),
            "table=1,reg0=2,actions=output:4".into(),
            "table=1,reg0=3,actions=mod_vlan_vid:3,output:1".into(),
            "table=1,reg0=4,actions=mod_vlan_vid:4,output:1".into(),
            "table=2,reg1=0,actions=output:1".into(),
            "table=2,reg1=1,actions=output:2".into(),
            "table=2,reg1=2,actions=output:3".into(),
        ];
        out.push(Case {
            name: format!("multipath {f}"),
            flows,
        });
    }
    for (i, f) in fields.iter().enumerate() {
        let b = 11 * i + 3;
        let flows = vec![
            format!("table=0,in_port=1,actions=bundle({f},{b},hrw,ofport,members:2,3,4,9)"),
            format!(
                "table=0,in_port=2,actions=bundle({f},{b},active_backup,ofport,slaves:7,3,1),bundle({f},{b},hrw,ofport,members:4)"
            ),
            format!(
                "table=0,in_port=3,actions=bundle_load({f},{b},hrw,ofport,NXM_OF_ETH_DST[0..15],members:1,2,4,LOCAL,NONE,12),output:1"
            ),
            format!(
                "table=0,in_port=4,actions=bundle_load({f},{b},hrw,ofport,NXM_NX_REG0[],members:1,2,3,5),resubmit(,1),bundle({f},{b},hrw,ofport,members:8,9),bundle({f},{b},active_backup,ofport,members:IN_PORT,1)"
            ),
            "table=1,reg0=1,actions=output:1".into(),
            "table=1,reg0=2,actions=output:2".into(),
            "table=1,reg0=3,actions=output:3".into(),
            "table=1,reg0=5,actions=mod_vlan_vid:5,output:1".into(),
        ];
        out.push(Case {
            name: format!("bundle {f}"),
            flows,
        });
    }
    // sample without an IPFIX exporter: nothing, not even a commit of pending changes.
    out.push(Case {
        name: "sample".into(),
        flows: vec![
            "table=0,in_port=1,actions=mod_dl_src:00:00:5e:00:00:01,sample(probability=65535,collector_set_id=1,obs_domain_id=2,obs_point_id=3),output:2".into(),
            "table=0,in_port=2,actions=sample(probability=1,sampling_port=3,ingress),mod_vlan_vid:9,sample(probability=7,sampling_port=9,egress),output:3".into(),
            "table=0,in_port=3,actions=sample(probability=100)".into(),
            "table=0,in_port=4,actions=clone(sample(probability=5),output:1),write_metadata:1,goto_table:1".into(),
            "table=1,actions=sample(probability=9,sampling_port=LOCAL),output:2".into(),
        ],
    });
    // check_pkt_larger: the rest of the list (and the action set) in both branches.
    out.push(Case {
        name: "check_pkt_larger".into(),
        flows: vec![
            "table=0,in_port=1,actions=mod_dl_src:00:00:5e:00:00:01,check_pkt_larger(100)->NXM_NX_REG0[0],resubmit(,1),output:4".into(),
            "table=0,in_port=2,ip,actions=check_pkt_larger(64)->NXM_NX_REG1[5],mod_nw_ttl:9,clone(check_pkt_larger(70)->NXM_NX_REG1[6],ct(commit),output:1),output:3".into(),
            "table=0,in_port=2,priority=10,actions=check_pkt_larger(64)->NXM_NX_REG1[5],mod_vlan_vid:7,output:3".into(),
            "table=0,in_port=3,actions=check_pkt_larger(1500)->NXM_NX_REG2[0],write_actions(output:4),goto_table:2".into(),
            "table=0,in_port=4,actions=resubmit(,3),output:1".into(),
            "table=1,reg0=1,actions=mod_dl_dst:00:00:5e:00:00:02,output:2".into(),
            "table=1,reg0=0,actions=output:3".into(),
            "table=2,reg2=0x1/0x1,actions=write_actions(output:1)".into(),
            "table=2,priority=10,reg2=0,actions=mod_dl_dst:00:00:5e:00:00:03".into(),
            "table=3,actions=check_pkt_larger(200)->NXM_NX_REG3[0],resubmit(,4),output:2".into(),
            "table=4,reg3=1,actions=exit".into(),
            "table=4,reg3=0,actions=output:3".into(),
            "table=0,in_port=1,priority=10,udp,actions=check_pkt_larger(100)->NXM_NX_REG5[1],mod_nw_ttl:7,ct(table=6),output:3".into(),
            "table=6,actions=output:2".into(),
            "table=0,in_port=3,priority=10,tcp,actions=write_actions(output:4),goto_table:5".into(),
            "table=5,actions=check_pkt_larger(90)->NXM_NX_REG4[0],output:2,write_actions(mod_dl_dst:00:00:5e:00:00:04,output:1)".into(),
        ],
    });
    out
}

fn our_bridge(c: &Case) -> Bridge {
    let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
    for f in &c.flows {
        common::add_flow(&mut br, f, flow::text::Dialect::OpenFlow13);
    }
    br
}

/// Whether our megaflow may be wider than OVS's for this case and packet (OVS's mask misses
/// what its hash reads; see the module doc).
fn ovs_mask_short(c: &Case, key: &FlowKey) -> bool {
    let dl = flow::field::FieldId::DlType.get(key) as u16;
    c.name.contains("symmetric_l3l4") && dl != 0x0800 && dl != 0x86dd
}

/// `set(eth(src=V/M,dst=V/M))` written as the whole addresses they leave in the packet
/// (for the cases where our megaflow holds the addresses exact and so our set is unmasked).
fn unmask_macs(actions: &str, key: &FlowKey) -> String {
    let mac = |s: &str| -> Option<u64> {
        let b: Vec<u64> = s
            .split(':')
            .map(|h| u64::from_str_radix(h, 16).ok())
            .collect::<Option<_>>()?;
        (b.len() == 6).then(|| b.iter().fold(0, |a, x| a << 8 | x))
    };
    let fmt = |v: u64| {
        let b = v.to_be_bytes();
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[2], b[3], b[4], b[5], b[6], b[7]
        )
    };
    let mut out = actions.to_string();
    for (name, f) in [
        ("src=", flow::FieldId::DlSrc),
        ("dst=", flow::FieldId::DlDst),
    ] {
        let Some(i) = out.find(name) else { continue };
        let start = i + name.len();
        let end = out[start..]
            .find([',', ')'])
            .map_or(out.len(), |e| start + e);
        let (v, m) = match out[start..end].split_once('/') {
            Some((v, m)) => (mac(v), mac(m)),
            None => (mac(&out[start..end]), Some(0xffff_ffff_ffff)),
        };
        if let (Some(v), Some(m)) = (v, m) {
            let orig = f.get(key) as u64;
            out.replace_range(start..end, &fmt((orig & !m) | (v & m)));
        }
    }
    out
}

#[test]
fn lb_actions_match_live_ovs() {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return;
    }
    let sb = OvsSandbox::start(4).expect("start OVS sandbox");
    let (mut total, mut equal, mut fewer, mut short) = (0, 0, 0, 0);
    let mut diffs = Vec::new();
    let mut wider = Vec::new();
    let pkts = packets();
    for c in cases() {
        sb.del_flows().expect("del-flows");
        sb.add_flows(&c.flows)
            .unwrap_or_else(|e| panic!("ovs refused {:?}: {e}", c.flows));
        let br = our_bridge(&c);
        for in_port in 1..=4u32 {
            for pkt in &pkts {
                let t = sb.trace_full(in_port, pkt).expect("ovs trace");
                let mut key = FlowKey::ZERO;
                extract(pkt, &PacketMeta::port(in_port), &mut key);
                let out = xlate(&br, &XlateIn::new(key));
                let ours = ofproto::format_odp_actions(&out.actions);
                let s0 = &t.stages[0];
                total += 1;
                let same = if ovs_mask_short(&c, &key) {
                    unmask_macs(&ours, &key) == unmask_macs(&s0.datapath_actions, &key)
                } else {
                    same_actions(&ours, &s0.datapath_actions, &key)
                };
                if same {
                    equal += 1;
                } else {
                    diffs.push(format!(
                        "{}: in_port {in_port} flow {}\n  ours {ours}\n  ovs  {}",
                        c.name, s0.flow, s0.datapath_actions
                    ));
                }
                let ours_mf = ofproto::trace::format_megaflow(&key, &out);
                match (megaflow_bits(&ours_mf), megaflow_bits(&s0.megaflow)) {
                    // At most the Ethernet addresses and two VLAN ids (with CFI) more.
                    (Some(o), Some(v)) if o > v && o - v <= 96 + 26 && ovs_mask_short(&c, &key) => {
                        short += 1
                    }
                    (Some(o), Some(v)) if o > v => wider.push(format!(
                        "{}: in_port {in_port} flow {}: {o} bits > OVS's {v}\n  ours {ours_mf}\n  ovs  {}",
                        c.name, s0.flow, s0.megaflow
                    )),
                    (Some(o), Some(v)) => fewer += usize::from(o < v),
                    _ => wider.push(format!(
                        "{}: unparsed megaflow\n  ours {ours_mf}\n  ovs  {}",
                        c.name, s0.megaflow
                    )),
                }
            }
        }
    }
    eprintln!(
        "live OVS (multipath, bundle, sample, check_pkt_larger): {equal}/{total} datapath actions equal; {} megaflows with more 1-bits than OVS, {fewer} with fewer, {short} wider where OVS's mask misses hashed bits",
        wider.len()
    );
    assert!(total >= 100, "too few packets traced: {total}");
    assert!(
        diffs.is_empty(),
        "{} differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    assert!(wider.is_empty(), "{}", wider.join("\n"));
}

/// The trace tree (`ofproto/trace` between the bridge line and `Final flow:`) of flows using
/// `multipath`, `bundle`, `bundle_load`, `sample` and `check_pkt_larger` equals OVS's.
#[test]
fn lb_trace_text_matches_live_ovs() {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return;
    }
    let sb = OvsSandbox::start(4).expect("start OVS sandbox");
    let c = Case {
        name: "trace".into(),
        flows: vec![
            "table=0,in_port=1,actions=multipath(symmetric_l4,5,hrw,4,0,NXM_NX_REG0[0..3]),bundle_load(eth_src,1,hrw,ofport,NXM_NX_REG1[0..15],members:2,3,7),resubmit(,1)".into(),
            "table=0,in_port=2,actions=sample(probability=3,collector_set_id=4),bundle(nw_src,2,active_backup,ofport,members:9,3,4)".into(),
            "table=0,in_port=3,actions=bundle_load(symmetric_l3,0,active_backup,ofport,NXM_NX_REG2[],members:8),bundle(symmetric_l3l4,0,hrw,ofport,members:NONE)".into(),
            "table=1,reg1=2,actions=output:4".into(),
            "table=1,reg1=3,actions=output:1".into(),
            "table=0,in_port=4,actions=check_pkt_larger(60)->NXM_NX_REG4[0],resubmit(,2),output:3".into(),
            "table=2,reg4=1,actions=mod_dl_dst:00:00:5e:00:00:05,output:2".into(),
            "table=2,reg4=0,actions=output:1".into(),
        ],
    };
    sb.del_flows().expect("del-flows");
    sb.add_flows(&c.flows).expect("add-flows");
    let br = our_bridge(&c);
    let pkts = packets();
    let mut diffs = Vec::new();
    let mut n = 0;
    for in_port in 1..=4u32 {
        for pkt in pkts.iter().take(6) {
            n += 1;
            diffs.extend(common::trace_tree_diff(&sb, &br, in_port, pkt));
        }
    }
    assert_eq!(n, 24);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
