//! Live differential test against the installed `ovs-ofctl parse-flow` (both the default
//! OpenFlow 1.0 protocol and `-O OpenFlow13`): testutil's corpus (hand-written + generated with
//! fresh seeds) plus this file's extra cases. Prints `SKIP: …` when OVS is not installed.
//!
//! Equality rule: OVS accepts → we accept and print the same text after `ADD `; OVS rejects
//! (including its own decode errors) → we reject.

use flow::text::{Dialect, parse_flow_with};

/// Cases aimed at the corners of the syntax (values, masks, views, ports, action forms).
const EXTRA: &[&str] = &[
    "in_port=LOCAL,actions=drop",
    "in_port=65535,actions=drop",
    "in_port=0xfffe,actions=drop",
    "in_port=70000,actions=drop",
    "in_port=controller,actions=drop",
    "in_port=4294967294,actions=drop",
    "dl_src=01:02:03:04:05:06/ff:ff:ff:00:00:00,actions=drop",
    "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
    "dl_src=1:2:3:4:5:6,actions=drop",
    "dl_src=01:02:03:04:05,actions=drop",
    "dl_type=0x800/0xff00,actions=drop",
    "eth_type=2048,actions=drop",
    "ip,nw_src=10.1.2.3/255.255.0.255,actions=drop",
    "ip,nw_src=10.1.2.3/16,actions=drop",
    "ip,nw_src=10.1.2.3/0,actions=drop",
    "ip,nw_src=10.1.2.3/33,actions=drop",
    "ip,nw_src=10.1.2,actions=drop",
    "ip,nw_src=10.0.0.256,actions=drop",
    "ip,nw_src=*,actions=drop",
    "ip,nw_dst=192.168.0.0/255.255.255.0,actions=drop",
    "ip,nw_tos=5,actions=drop",
    "ip,nw_tos=256,actions=drop",
    "ip,ip_dscp=64,actions=drop",
    "ip,nw_ecn=4,actions=drop",
    "ip,nw_frag=LATER,actions=drop",
    "ip,nw_frag=yes,actions=drop",
    "ip,nw_frag=maybe,actions=drop",
    "vlan_tci=0x0005,actions=drop",
    "vlan_tci=0x1005/0x1fff,actions=drop",
    "vlan_tci=0x0005/0x0fff,actions=drop",
    "vlan_tci=0x1000/0x1000,actions=drop",
    "dl_vlan=4096,actions=drop",
    "dl_vlan=0xffff,actions=drop",
    "dl_vlan_pcp=8,actions=drop",
    "vlan_vid=5,actions=drop",
    "vlan_vid=0x1005,actions=drop",
    "vlan_vid=0x1000/0x1000,actions=drop",
    "vlan_pcp=3,actions=drop",
    "dl_vlan=5,dl_vlan_pcp=3,actions=drop",
    "ipv6,ipv6_src=2001:db8::/32,actions=drop",
    "ipv6,ipv6_src=2001:db8::1/ffff:ffff::ff,actions=drop",
    "ipv6,ipv6_dst=::ffff:1.2.3.4,actions=drop",
    "ipv6,ipv6_dst=::1.2.3.4,actions=drop",
    "ipv6,ipv6_src=fe80::1/129,actions=drop",
    "ipv6,ipv6_label=0x12345,actions=drop",
    "ipv6,ipv6_label=0x5/0xfffff,actions=drop",
    "ipv6,ipv6_label=0x5/0xf,actions=drop",
    "icmp6,icmp_type=135,nd_target=fe80::1,nd_sll=00:11:22:33:44:55,actions=drop",
    "icmp6,icmp_type=136,icmp_code=0,nd_target=fe80::1,nd_tll=00:11:22:33:44:55,actions=drop",
    "icmp6,icmp_type=136,nd_sll=00:11:22:33:44:55,actions=drop",
    "icmp6,icmpv6_type=128,icmpv6_code=0,actions=drop",
    "icmp,icmp_type=8,icmp_code=0,actions=drop",
    "arp,arp_op=2,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/8,arp_sha=00:11:22:33:44:55,arp_tha=ff:ff:ff:ff:ff:ff,actions=drop",
    "rarp,arp_op=3,actions=drop",
    "arp,arp_op=256,actions=drop",
    "tcp,tcp_flags=+syn-ack,actions=drop",
    "tcp,tcp_flags=syn|ack,actions=drop",
    "tcp,tcp_flags=0x12/0x12,actions=drop",
    "tcp,tcp_flags=+syn+syn,actions=drop",
    "tcp6,tcp_src=80,tcp_dst=8080/0xfff0,actions=drop",
    "udp,udp_src=53,actions=drop",
    "sctp,sctp_src=1,sctp_dst=2,actions=drop",
    "udp6,tp_dst=0x100/0xff00,actions=drop",
    "ct_state=+trk+est-new,actions=drop",
    "ct_state=trk|est,actions=drop",
    "ct_state=0,actions=drop",
    "ct_state=0x21/0x21,actions=drop",
    "ct_state=+bogus,actions=drop",
    "ct_zone=5,ct_mark=0x10/0xf0,ct_label=0x1/0xff,actions=drop",
    "ct_label=0,actions=drop",
    "ct_state=+trk+est,ip,ct_nw_src=10.0.0.1,actions=drop",
    "ct_state=+trk,ct_nw_src=10.0.0.1,actions=drop",
    "pkt_mark=0x5/0xff,dp_hash=0x1,metadata=0x0,actions=drop",
    "reg0=0,reg15=0xffffffff,actions=drop",
    "reg3=5/0,actions=drop",
    "reg16=5,actions=drop",
    "xreg3=0x1/0x1,actions=drop",
    "reg0[0..3]=5,actions=drop",
    "NXM_NX_REG1[4]=1,actions=drop",
    "reg0[0..3]=17,actions=drop",
    "tp_src=80,actions=drop",
    "nw_proto=6,actions=drop",
    "ip,nw_proto=6,tp_src=80,actions=drop",
    "ip,nw_proto=47,tp_src=80,actions=drop",
    "ipv6,nw_proto=17,actions=drop",
    "in_port=1,dl_src=00:00:00:00:00:01,dl_dst=00:00:00:00:00:02,dl_vlan=1,dl_vlan_pcp=1,tcp,nw_src=1.1.1.1,nw_dst=2.2.2.2,nw_tos=4,tp_src=1,tp_dst=2,actions=drop",
    "priority=0 actions=drop",
    "priority=65536,actions=drop",
    "priority=0x10,actions=drop",
    "priority=010,actions=drop",
    "table=255,actions=drop",
    "table=256,actions=drop",
    "table=-1,actions=drop",
    "cookie=0x1/0x1,actions=drop",
    "cookie=18446744073709551615,actions=drop",
    "idle_timeout=65536,actions=drop",
    "send_flow_rem,check_overlap,actions=drop",
    "n_packets=5,duration=1s,actions=drop",
    "nw_src,actions=drop",
    "tcp_srcx=1,actions=drop",
    "priority=5",
    "actions",
    "actions=",
    "action=drop",
    "  ip   nw_src=1.2.3.4  actions=drop  ",
    "actions=output:1,output:65279,output:65280,output:0xff",
    "actions=output(port=1,max_len=100)",
    "actions=output(port=1,max_len=10)",
    "actions=output(max_len=100,port=LOCAL)",
    "actions=output:NXM_NX_REG0[0..15]",
    "actions=output:reg0[]",
    "actions=output:foo",
    "actions=1,2,3,NORMAL,flood,all,in_port,local,TABLE,controller",
    "actions=CONTROLLER:100,controller(max_len=5,reason=invalid_ttl,id=3)",
    "actions=controller(reason=bogus)",
    "actions=Output:1,OUTPUT:2",
    "actions=drop,1",
    "actions=ANY",
    "actions=resubmit:3,resubmit(,4),resubmit(2,4),resubmit(LOCAL)",
    "actions=resubmit(,)",
    "actions=resubmit(,4,ct)",
    "ct_state=+trk+est,ip,actions=resubmit(,4,ct)",
    "table=3,actions=goto_table:2",
    "table=3,actions=goto_table:4",
    "actions=goto_table:1,output:2",
    "actions=set_field:00:11:22:33:44:55->eth_src,set_field:1->reg0",
    "actions=set_field:0xff/0xf->reg1,set_field:1/1->metadata",
    "ip,actions=set_field:3->ip_dscp,set_field:3->ip_ecn,set_field:3->nw_ttl",
    "ip,actions=set_field:3->nw_tos",
    "ip,actions=set_field:12->nw_tos",
    "ip,actions=set_field:1.2.3.4->ip_src,set_field:5.6.7.8->nw_dst",
    "ipv6,actions=set_field:::1->ipv6_src,set_field:2001:db8::5->ipv6_dst",
    "ipv6,actions=set_field:0x12345->ipv6_label",
    "actions=set_field:0x1003->vlan_tci,set_field:3->vlan_tci",
    "dl_vlan=5,actions=set_field:3->vlan_vid,set_field:3->vlan_pcp",
    "actions=set_field:3->vlan_vid",
    "dl_vlan=5,actions=set_field:4096->vlan_vid",
    "actions=set_field:3->in_port,set_field:LOCAL->in_port",
    "arp,actions=set_field:3->arp_op,set_field:1.1.1.1->arp_spa,set_field:00:00:00:00:00:01->arp_sha",
    "icmp,actions=set_field:3->icmp_type,set_field:1->icmp_code",
    "tcp,actions=set_field:3->tcp_src,set_field:4->tcp_dst",
    "udp,actions=set_field:3->udp_src,set_field:4->udp_dst",
    "sctp,actions=set_field:3->sctp_src",
    "tcp,actions=set_field:3->udp_src",
    "actions=set_field:1->nosuchfield",
    "actions=set_field:1->recirc_id",
    "actions=set_field:1",
    "actions=set_field:1->",
    "actions=load:5->NXM_NX_REG0[0..3],load:0x1->NXM_OF_VLAN_TCI[]",
    "actions=load:1->OXM_OF_METADATA[],load:1->metadata[0..3],load:1->pkt_mark[]",
    "ip,actions=load:1->ip_dscp[],load:1->nw_tos[],load:0xffffffff->NXM_OF_IP_SRC[]",
    "ipv6,actions=load:1->NXM_NX_IPV6_SRC[]",
    "ipv6,actions=load:1->NXM_NX_IPV6_SRC[60..70]",
    "actions=load:16->NXM_NX_REG0[0..3]",
    "actions=load:1->NXM_NX_REG0[5..3]",
    "actions=load:1->NXM_NX_REG0[40]",
    "actions=load:1->NXM_OF_IN_PORT[],load:1->in_port_oxm[]",
    "actions=load:1->NXM_OF_ETH_SRC_W[]",
    "tcp,actions=load:1->NXM_OF_TCP_SRC[]",
    "actions=load:1->NXM_OF_TCP_SRC[]",
    "actions=move:reg0[]->reg1[],move:NXM_NX_REG0[0..7]->NXM_NX_REG1[8..15]",
    "actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
    "actions=move:NXM_OF_ETH_SRC[]->NXM_NX_REG0[]",
    "actions=move:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]",
    "actions=move:NXM_NX_REG0[]->NXM_NX_CT_STATE[]",
    "actions=mod_dl_src:00:11:22:33:44:55,mod_dl_dst:66:77:88:99:aa:bb",
    "ip,actions=mod_nw_src:1.2.3.4,mod_nw_dst:5.6.7.8,mod_nw_tos:4,dec_ttl",
    "actions=mod_nw_src:1.2.3.4",
    "ip,actions=mod_nw_tos:5",
    "tcp,actions=mod_tp_src:80,mod_tp_dst:90",
    "udp6,actions=mod_tp_src:80",
    "sctp,actions=mod_tp_dst:80",
    "actions=mod_tp_src:80",
    "actions=mod_vlan_vid:5,mod_vlan_pcp:3",
    "actions=mod_vlan_vid:4096",
    "actions=mod_vlan_pcp:8",
    "dl_vlan=5,actions=set_vlan_vid:6,set_vlan_pcp:1",
    "actions=set_vlan_vid:6",
    "dl_vlan=5,actions=strip_vlan",
    "dl_vlan=5,actions=pop_vlan",
    "actions=strip_vlan",
    "actions=push_vlan:0x8100",
    "actions=push_vlan:0x88a8,push_vlan:0x8100",
    "actions=push_vlan:0x0800",
    "actions=dec_ttl",
    "ip,actions=dec_ttl(1,2,3)",
    "ip,actions=dec_ttl()",
    "actions=note:aa,note:aa.bb.cc.dd.ee.ff.11,note:",
    "actions=note:a",
    "actions=note:zz",
    "actions=note:0102030405060708090a0b0c",
    "actions=ct_clear",
    "ip,actions=ct(commit,zone=5,table=3)",
    "ip,actions=ct(commit,force,zone=NXM_NX_REG0[0..15],exec(set_field:1->ct_mark,load:0x5->NXM_NX_CT_LABEL[0..3]))",
    "ip,actions=ct(zone=NXM_NX_REG0[0..7])",
    "ip,actions=ct(nat)",
    "ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.5:1000-2000,persistent,random))",
    "ip,actions=ct(commit,nat(src=10.0.0.5-10.0.0.1))",
    "ip,actions=ct(commit,nat(dst=10.0.0.1:80))",
    "ip,actions=ct(commit,nat(src=10.0.0.1,hash,random))",
    "ip,actions=ct(commit,nat(src=10.0.0.1,dst=10.0.0.2))",
    "ip,actions=ct(commit,nat(persistent))",
    "ipv6,actions=ct(commit,nat(dst=fe80::1-fe80::5:80))",
    "ipv6,actions=ct(commit,nat(dst=[fe80::1]:80))",
    "ipv6,actions=ct(commit,nat(dst=[fe80::1]-[fe80::2]:80-90))",
    "ip,actions=ct(commit,nat(dst=fe80::1))",
    "ip,actions=ct(commit,exec(set_field:0x1/0xff->ct_label))",
    "ip,actions=ct(commit,exec(set_field:1/1->ct_mark))",
    "ip,actions=ct(exec(set_field:5->ct_mark))",
    "ip,actions=ct(commit,exec(output:1))",
    "ip,actions=ct(commit,exec(move:NXM_NX_REG0[]->NXM_NX_CT_MARK[]))",
    "actions=ct(commit)",
    "ip,actions=ct(zone=0)",
    "ip,actions=ct(force)",
    "tcp,actions=ct(alg=ftp,commit)",
    "udp,actions=ct(alg=tftp,commit)",
    "udp,actions=ct(alg=ftp,commit)",
    "ip,actions=ct(alg=sip,commit)",
    "ip,actions=ct(table=255)",
    "ip,actions=ct(bogus)",
    "ip,actions=ct_clear,ct(table=0),NORMAL",
    "ct_state=+inv+trk,ip,actions=ct(commit)",
    "actions=set_field:1->ct_mark",
    "actions=apply_actions(1)",
    "actions=frobnicate",
    "tcp,nw_src=1.2.3.4,tp_dst=80 actions=mod_nw_dst:10.0.0.1,mod_tp_dst:8080,output:2",
    "priority=100,ip,reg0=0x1,actions=resubmit(,1),ct(commit,table=2,zone=1,nat(src=1.1.1.1))",
    "ip6,icmp6,actions=drop",
    "ip4,udp,udp_dst=4789,actions=drop",
    "mpls,actions=drop",
    "eth,actions=drop",
    "recirc_id=5,actions=drop",
    "dp_hash=5/0xf,actions=drop",
];

fn corpus() -> Vec<String> {
    let mut v: Vec<String> = testutil::flow_corpus::hand_written()
        .into_iter()
        .map(String::from)
        .collect();
    v.extend(EXTRA.iter().map(|s| s.to_string()));
    v.extend(testutil::flow_corpus::generated(7, 250));
    v.extend(testutil::flow_corpus::generated(0xfeed, 250));
    v
}

fn live(of13: bool) {
    testutil::skip_without_ovs!();
    let texts: Vec<String> = corpus()
        .into_iter()
        .filter(|t| !t.starts_with('-'))
        .collect();
    let answers = testutil::ovs::parse_flows(&texts, of13);
    let dialect = if of13 {
        Dialect::OpenFlow13
    } else {
        Dialect::OpenFlow10
    };
    let mut pass = 0;
    let mut fails = Vec::new();
    for (t, a) in texts.iter().zip(answers) {
        let Ok(a) = a else {
            fails.push(format!("{t}: ovs-ofctl could not run"));
            continue;
        };
        let ours = parse_flow_with(t, dialect);
        let ok = match (&a.result, &ours) {
            (Ok(want), Ok(got)) => *want == got.to_string(),
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if ok {
            pass += 1;
        } else {
            fails.push(format!(
                "input: {t}\n  ovs:  {:?}\n  ours: {:?}",
                a.result,
                ours.map(|s| s.to_string()).map_err(|e| e.to_string())
            ));
        }
    }
    eprintln!(
        "{}: {pass}/{} flow strings equal to ovs-ofctl{}",
        if of13 { "OpenFlow13" } else { "OpenFlow10" },
        texts.len(),
        if of13 { " -O OpenFlow13" } else { "" }
    );
    for f in &fails {
        eprintln!("{f}");
    }
    assert!(fails.is_empty(), "{} mismatches", fails.len());
}

#[test]
fn live_of10() {
    live(false);
}

#[test]
fn live_of13() {
    live(true);
}
