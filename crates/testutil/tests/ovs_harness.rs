//! Tests of the OVS sandbox harness itself (skipped when OVS is not installed).

use testutil::ovs::{OvsSandbox, parse_flow, parse_flow_full, parse_flows};
use testutil::packets::{self, tcp_flags};
use testutil::skip_without_ovs;

#[test]
fn sandbox_start_flows_trace_and_cleanup() {
    skip_without_ovs!();
    let sb = OvsSandbox::start(3).expect("sandbox starts");
    let dir = sb.dir().to_path_buf();
    assert!(dir.join("br0.mgmt").exists());
    // fail-mode=secure: the table starts empty.
    assert_eq!(sb.dump_flows().unwrap(), Vec::<String>::new());

    let pkt = packets::udp4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 5678, 10);
    let t = sb.trace(1, &pkt).expect("trace");
    assert!(t.flow.starts_with("udp,in_port=1,"), "{}", t.flow);
    for want in [
        "nw_src=10.0.0.1",
        "nw_dst=10.0.0.2",
        "tp_src=1234",
        "tp_dst=5678",
        "dl_src=00:11:22:33:44:55",
        "dl_dst=66:77:88:99:aa:bb",
        "nw_ttl=64",
        "nw_frag=no",
    ] {
        assert!(t.flow.contains(want), "{want} missing from {}", t.flow);
    }
    assert_eq!(t.datapath_actions, "drop");

    sb.add_flow("priority=10,udp,tp_dst=5678,actions=output:2")
        .unwrap();
    sb.add_flows(&[
        "priority=5,actions=drop".to_string(),
        "table=1,actions=output:3".to_string(),
    ])
    .unwrap();
    let flows = sb.dump_flows().unwrap();
    assert_eq!(flows.len(), 3, "{flows:?}");
    let t = sb.trace(1, &pkt).unwrap();
    assert_eq!(t.datapath_actions, "2");
    assert!(t.megaflow.contains("tp_dst=5678"), "{}", t.megaflow);
    let t = sb
        .trace_flow("in_port=1,tcp,nw_dst=1.2.3.4,tp_dst=80")
        .unwrap();
    assert!(t.flow.starts_with("tcp,in_port=1"), "{}", t.flow);
    assert_eq!(t.datapath_actions, "drop");

    let t = sb
        .trace(
            2,
            &packets::tcp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 80, tcp_flags::SYN, 0),
        )
        .unwrap();
    assert!(t.flow.contains("tcp_flags=syn"), "{}", t.flow);

    sb.del_flows().unwrap();
    assert!(sb.dump_flows().unwrap().is_empty());
    assert!(sb.trace(1, &[]).is_err());
    assert!(sb.trace(1, &[0u8; 4]).is_err(), "OVS refuses < 14 bytes");
    assert!(sb.appctl(&["version"]).unwrap().contains("3."));
    assert!(sb.add_flow("actions=bogus").is_err());

    drop(sb);
    assert!(!dir.exists(), "sandbox dir removed on drop");
}

#[test]
fn two_sandboxes_coexist() {
    skip_without_ovs!();
    let a = OvsSandbox::start(1).unwrap();
    let b = OvsSandbox::start(2).unwrap();
    a.add_flow("actions=output:1").unwrap();
    assert_eq!(a.dump_flows().unwrap().len(), 1);
    assert!(b.dump_flows().unwrap().is_empty());
}

#[test]
fn parse_flow_oracle() {
    skip_without_ovs!();
    assert_eq!(
        parse_flow("tcp,tp_src=80,actions=output:1", false).as_deref(),
        Ok("tcp,tp_src=80 actions=output:1")
    );
    assert_eq!(
        parse_flow(
            "ip,nw_src=10.0.0.0/8,actions=set_field:1.2.3.4->ip_dst",
            false
        )
        .as_deref(),
        Ok("ip,nw_src=10.0.0.0/8 actions=mod_nw_dst:1.2.3.4")
    );
    assert_eq!(
        parse_flow("actions=goto_table:1", true).as_deref(),
        Ok("actions=goto_table:1")
    );
    assert_eq!(
        parse_flow("foo=1,actions=drop", false),
        Err("unknown keyword foo".to_string())
    );
    let full = parse_flow_full("tp_src=80,actions=drop", false).unwrap();
    assert_eq!(full.result.as_deref(), Ok("actions=drop"));
    assert!(
        full.log.iter().any(|l| l.contains("normalization")),
        "{full:?}"
    );
    let many = parse_flows(
        &[
            "actions=drop".to_string(),
            "actions=foo".to_string(),
            "ip,actions=NORMAL".to_string(),
        ],
        false,
    );
    let got: Vec<bool> = many
        .iter()
        .map(|r| r.as_ref().unwrap().result.is_ok())
        .collect();
    assert_eq!(got, [true, false, true]);
}

#[test]
fn vlan_limit_controls_second_tag() {
    skip_without_ovs!();
    let sb = OvsSandbox::start(1).unwrap();
    let pkt = packets::qinq(
        &packets::udp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0),
        100,
        200,
    );
    let t = sb.trace(1, &pkt).unwrap();
    // OVS default vlan-limit=1: the inner tag is the ethertype.
    assert!(t.flow.contains("dl_vlan=100"), "{}", t.flow);
    assert!(t.flow.contains("dl_type=0x8100"), "{}", t.flow);
    sb.set_vlan_limit(2).unwrap();
    let t = sb.trace(1, &pkt).unwrap();
    assert!(t.flow.starts_with("udp,"), "{}", t.flow);
    assert!(t.flow.contains("dl_vlan=100"), "{}", t.flow);
    assert!(t.flow.contains("dl_vlan1=200,dl_vlan_pcp1=0"), "{}", t.flow);
}

/// The named builders produce what their names say, according to OVS.
#[test]
fn named_builders_agree_with_ovs() {
    skip_without_ovs!();
    let sb = OvsSandbox::start(1).unwrap();
    let a6 = |last: u8| {
        let mut a = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        a[15] = last;
        a
    };
    let mac = [0x02, 0, 0, 0, 0, 9];
    let cases: Vec<(Vec<u8>, &[&str])> = vec![
        (
            packets::udp6(a6(1), a6(2), 53, 5353, 3),
            &[
                "udp6,",
                "ipv6_src=2001:db8::1",
                "ipv6_dst=2001:db8::2",
                "tp_src=53,tp_dst=5353",
            ],
        ),
        (
            packets::tcp6(a6(1), a6(2), 1, 2, tcp_flags::SYN | tcp_flags::ACK, 0),
            &["tcp6,", "tcp_flags=syn|ack"],
        ),
        (
            packets::sctp4([1, 2, 3, 4], [5, 6, 7, 8], 9, 10, 5),
            &["sctp,", "tp_src=9,tp_dst=10"],
        ),
        (
            packets::icmp4_echo([1, 2, 3, 4], [5, 6, 7, 8], 1, 1, true),
            &["icmp,", "icmp_type=8,icmp_code=0"],
        ),
        (
            packets::icmp6_echo(a6(1), a6(2), 1, 1, false),
            &["icmp6,", "icmp_type=129,icmp_code=0"],
        ),
        (
            packets::nd_ns(mac, a6(1), a6(2), Some(mac)),
            &[
                "icmp_type=135",
                "nd_target=2001:db8::2",
                "nd_sll=02:00:00:00:00:09",
                "nw_ttl=255",
            ],
        ),
        (
            packets::nd_na(mac, a6(2), a6(1), a6(2), Some(mac), 0x60),
            &[
                "icmp_type=136",
                "nd_target=2001:db8::2",
                "nd_tll=02:00:00:00:00:09",
            ],
        ),
        (
            packets::arp(1, mac, [10, 0, 0, 1], [0; 6], [10, 0, 0, 2]),
            &[
                "arp,",
                "arp_spa=10.0.0.1,arp_tpa=10.0.0.2,arp_op=1,arp_sha=02:00:00:00:00:09",
            ],
        ),
        (
            packets::vlan(
                &packets::udp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0),
                0x8100,
                42,
                5,
            ),
            &["udp,", "dl_vlan=42,dl_vlan_pcp=5"],
        ),
    ];
    for (pkt, wants) in cases {
        let t = sb.trace(1, &pkt).unwrap();
        for w in wants {
            assert!(t.flow.contains(w), "{w} missing from {}", t.flow);
        }
    }
    let spec = packets::Ipv4Spec::new([1, 2, 3, 4], [5, 6, 7, 8], 17);
    let l4 = packets::udp(spec.pseudo(), 7, 8, &[0; 40]);
    let frags = packets::ipv4_fragments(&spec, &l4, 16);
    let flows: Vec<String> = frags.iter().map(|f| sb.trace(1, f).unwrap().flow).collect();
    assert!(
        flows[0].contains("nw_frag=first,tp_src=7,tp_dst=8"),
        "{}",
        flows[0]
    );
    assert!(flows[1].ends_with("nw_frag=later"), "{}", flows[1]);
}
