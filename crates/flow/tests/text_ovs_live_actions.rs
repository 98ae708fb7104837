//! Parse/print of the issue-#17 actions (not groups or conjunction) against the installed
//! `ovs-ofctl parse-flow`, in both the default OpenFlow 1.0 and `-O OpenFlow13` dialects:
//! every syntax form and the error cases. Prints `SKIP:` when OVS is not installed.
//!
//! Equality rule: OVS accepts → we accept and print the same text after `ADD `; OVS rejects
//! → we reject, and where OVS's refusal is a syntax error of the action text (not a decode
//! error or a protocol choice) our message is OVS's word for word.

use flow::text::{Dialect, parse_flow_with};

/// One flow per syntax form and error case.
const CASES: &[&str] = &[
    // write_metadata
    "actions=write_metadata:0x1234",
    "actions=write_metadata:0x1234/0xff00",
    "actions=write_metadata:0",
    "actions=write_metadata:0x1/0",
    "actions=write_metadata:18446744073709551615",
    "actions=write_metadata:0xffffffffffffffff/0xffffffffffffffff",
    "metadata=0x5,actions=write_metadata:0x1",
    "actions=output:1,write_metadata:0x1",
    "actions=exit,write_metadata:1",
    "actions=write_metadata:0x1,goto_table:2",
    "table=1,actions=write_metadata:0x1/0x3,goto_table:2",
    "table=3,actions=write_metadata:0x1,goto_table:2",
    "actions=write_metadata:0x1,output:1",
    "actions=write_metadata:0x1,write_metadata:0x2",
    "actions=goto_table:1,write_metadata:1",
    "actions=goto_table:1,output:1",
    "actions=goto_table:1,goto_table:2",
    "actions=write_metadata:zz",
    "actions=write_metadata:0x1/0x1/3",
    "actions=write_metadata:0xffffffffffffffff1",
    "actions=write_metadata",
    "actions=write_metadata:",
    "actions=write_metadata:/5",
    "actions=ct(commit,exec(write_metadata:1))",
    // mod_nw_ttl / set_nw_ttl
    "ip,actions=mod_nw_ttl:5",
    "ipv6,actions=mod_nw_ttl:7",
    "tcp,actions=mod_nw_ttl:0,output:1",
    "ip,actions=set_nw_ttl:9",
    "ip,actions=mod_nw_ttl:255",
    "actions=mod_nw_ttl:5",
    "arp,actions=mod_nw_ttl:0",
    "ip,actions=mod_nw_ttl:256",
    "ip,actions=mod_nw_ttl:x",
    "ip,actions=mod_nw_ttl",
    "ip,actions=mod_nw_ttl:-1",
    "ip,actions=mod_nw_ttl:0x10",
    // exit
    "actions=exit",
    "actions=output:1,exit,output:2",
    "actions=exit:5",
    "actions=resubmit(,1),exit",
    "actions=exit,goto_table:1",
    "actions=ct(commit,exec(exit))",
    // clone
    "actions=clone(output:1)",
    "actions=clone()",
    "actions=clone(drop)",
    "ip,actions=clone(mod_nw_src:1.2.3.4,output:1),output:2",
    "actions=clone(clone(output:1),output:2)",
    "actions=clone(mod_vlan_vid:5,output:1),output:2",
    "dl_vlan=3,actions=clone(mod_vlan_vid:5,output:1),mod_vlan_pcp:2,output:2",
    "ip,actions=clone(mod_nw_ttl:3,output:1)",
    "ip,actions=clone(ct(commit),output:1),exit",
    "actions=clone(exit),output:2",
    "actions=clone(output:1",
    "actions=clone(write_metadata:1)",
    "actions=clone(goto_table:1)",
    "actions=clone(ct(commit),output:1)",
    "actions=clone(set_field:1->ct_mark)",
    "actions=clone(bogus)",
    "actions=clone(output:1,drop)",
    "actions=ct(commit,exec(clone(output:1)))",
    "actions=clone(mod_nw_ttl:1)",
    // write_actions / clear_actions
    "actions=write_actions(output:1)",
    "actions=write_actions(group:1)",
    "actions=write_actions(output:1,group:2)",
    "actions=write_actions(output:1,set_field:1->reg0)",
    "actions=write_actions(output:1,output:2)",
    "actions=write_actions()",
    "actions=write_actions(drop)",
    "actions=write_actions(resubmit(,2))",
    "ip,actions=write_actions(ct(commit),ct_clear)",
    "ip,actions=clear_actions,write_actions(mod_nw_ttl:4,output:2,dec_ttl,set_queue:3,pop_vlan,push_vlan:0x8100,strip_vlan),goto_table:2",
    "ip,actions=clear_actions,write_actions(mod_nw_ttl:4,output:2,dec_ttl,set_queue:3,strip_vlan),goto_table:2",
    "actions=write_actions(mod_vlan_vid:3,mod_dl_src:00:00:00:00:00:01,output:1)",
    "ip,actions=write_actions(mod_nw_src:1.1.1.1,mod_nw_tos:4,mod_tp_dst:3)",
    "actions=write_actions(move:NXM_NX_REG0[]->NXM_NX_REG1[],load:2->NXM_NX_REG0[],CONTROLLER)",
    "actions=write_actions(exit)",
    "actions=write_actions(mod_nw_tos:8)",
    "actions=write_actions(set_field:1.1.1.1->ip_src)",
    "actions=write_actions(mod_nw_ttl:3)",
    "ip,actions=write_actions(mod_tp_dst:3)",
    "actions=write_actions(dec_ttl)",
    "actions=write_actions(clone(output:1))",
    "actions=write_actions(note:01)",
    "actions=write_actions(pop_queue)",
    "actions=write_actions(enqueue:1:2)",
    "actions=write_actions(output(port=1,max_len=100))",
    "actions=write_actions(output:NXM_NX_REG0[])",
    "actions=write_actions(write_metadata:1)",
    "actions=write_actions(goto_table:1)",
    "actions=write_actions(clear_actions)",
    "actions=write_actions(write_actions(output:1))",
    "actions=write_actions(output:1",
    "actions=write_actions(bogus)",
    "actions=write_actions(set_field:1->ct_mark)",
    "actions=write_actions(output:1),goto_table:2",
    "actions=write_actions(output:1),write_metadata:1",
    "actions=write_metadata:1,write_actions(output:1)",
    "actions=write_actions(output:1),write_actions(output:2)",
    "actions=write_actions(output:1),clear_actions",
    "actions=write_actions(output:99999)",
    "actions=write_actions(output:1),output:2",
    "actions=clear_actions",
    "actions=clear_actions:5",
    "actions=output:1,clear_actions",
    "actions=clear_actions,output:1",
    "actions=clear_actions,clear_actions",
    "actions=clear_actions,goto_table:1",
    "actions=clone(clear_actions)",
    "actions=clone(write_actions(output:1))",
    "actions=ct(commit,exec(write_actions(output:1)))",
    "table=1,actions=clear_actions,write_actions(output:1),write_metadata:0x1,goto_table:2",
    // set_queue / enqueue / pop_queue
    "actions=set_queue:5,enqueue:1:2,pop_queue",
    "actions=enqueue(1,2)",
    "actions=enqueue:1q2",
    "actions=enqueue:LOCAL:3",
    "actions=enqueue:IN_PORT:3",
    "actions=enqueue:NORMAL:3",
    "actions=enqueue:65280:3",
    "actions=enqueue:1",
    "actions=enqueue:",
    "actions=enqueue:1:",
    "actions=enqueue:x:1",
    "actions=enqueue:1:x",
    "actions=enqueue:1:4294967296",
    "actions=set_queue:0",
    "actions=set_queue:4294967295",
    "actions=set_queue:4294967296",
    "actions=set_queue:0x10",
    "actions=set_queue:x",
    "actions=set_queue",
    "actions=set_queue:-1",
    "actions=pop_queue",
    "actions=pop_queue:3",
    "actions=write_actions(set_queue:1,set_queue:2,output:1)",
    "actions=clone(set_queue:3,output:1,pop_queue)",
    // multipath
    "actions=multipath(eth_src,50,modulo_n,1,0,NXM_NX_REG0[])",
    "actions=multipath(symmetric_l4,1024,hrw,12,0,NXM_NX_REG0[0..15])",
    "actions=multipath(symmetric_l3l4+udp,1024,iter_hash,5000,5000,NXM_NX_REG0[0..12])",
    "actions=multipath(symmetric_l3l4,65535,hash_threshold,2,0,reg1[3..4])",
    "actions=multipath(NW_SRC,70000,Modulo_N,65536,-1,reg2)",
    "actions=multipath(nw_dst,-3,hrw,65,x,reg3[0..6])",
    "actions=multipath(symmetric_l3,0,iter_hash,3,9,NXM_OF_ETH_DST[])",
    "actions=multipath(eth_src 7 hrw 2 0 reg0[5],output:1)",
    "actions=multipath(eth_src,50,modulo_n,0,0,NXM_NX_REG0[])",
    "actions=multipath(eth_src,50,modulo_n,65537,0,NXM_NX_REG0[])",
    "actions=multipath(eth_src,50,modulo_n,5,0,NXM_NX_REG0[0..1])",
    "actions=multipath(eth_src,50,modulo_n,4,0,NXM_NX_REG0[0..1])",
    "actions=multipath(eth_src,50,modulo_n,x,0,NXM_NX_REG0[])",
    "actions=multipath(foo,50,modulo_n,1,0,reg0[])",
    "actions=multipath(eth_src,50,bar,1,0,reg0[])",
    "actions=multipath(eth_src,50,modulo_n,1,0)",
    "actions=multipath(eth_src,50,modulo_n,1,0,reg0[40])",
    "actions=multipath(eth_src,50,modulo_n,1,0,nosuch[])",
    "actions=multipath(eth_src,50,modulo_n,1,0,in_port_oxm)",
    "actions=multipath(eth_src,50,modulo_n,1,0,NXM_OF_IP_SRC[])",
    "ip,actions=multipath(eth_src,50,modulo_n,1,0,NXM_OF_IP_SRC[0..3])",
    "actions=multipath(eth_src,50,modulo_n,1,0,NXM_NX_REG4[0..3]),write_actions(multipath(eth_src,50,modulo_n,1,0,reg0[]))",
    "actions=multipath(eth_src,50,modulo_n,1,0,dp_hash)",
    "actions=clone(multipath(nw_src,1,hrw,2,0,reg0[]),output:1)",
    // bundle / bundle_load
    "actions=bundle(eth_src,0,hrw,ofport,slaves:4,8)",
    "actions=bundle(symmetric_l4,60,active_backup,ofport,members:1,2)",
    "actions=bundle_load(eth_src,0,hrw,ofport,NXM_NX_REG0[],slaves:4,8)",
    "actions=bundle_load(symmetric_l3l4+udp,70000,ACTIVE_BACKUP,OFPORT,reg1[0..15],MEMBERS:3)",
    "actions=bundle_load(eth_src,0,hrw,ofport,NXM_NX_REG0[0..3],slaves:4,8)",
    "ip,actions=bundle_load(nw_dst,0,hrw,ofport,NXM_OF_IP_SRC[0..15],members:1)",
    "actions=bundle_load(eth_src,0,hrw,ofport,NXM_OF_IP_SRC[0..15],members:1)",
    "actions=bundle_load(eth_src,0,hrw,ofport,nosuch,members:1)",
    "actions=bundle(eth_src,0,hrw,ofport,members:)",
    "actions=bundle(eth_src,0,hrw,ofport,members:[1 2])",
    "actions=bundle(eth_src 5 hrw ofport members 1 2),output:3",
    "actions=bundle(eth_src,0,hrw,ofport,members:CONTROLLER)",
    "actions=bundle(eth_src,0,hrw,ofport,members:LOCAL,IN_PORT,NONE)",
    "actions=bundle(eth_src,0,hrw,ofport,members:65280)",
    "actions=bundle(eth_src,0,hrw,ofport,members:NORMAL,FLOOD,ALL,TABLE)",
    "actions=bundle(eth_src,0,hrw,ofport,members:65535)",
    "actions=bundle(eth_src,0,hrw,ofport,members:0xfff0)",
    "actions=bundle(eth_src,0,hrw,ofport,members:1:2)",
    "actions=bundle(eth_src,0,hrw,ofport,members:x)",
    "actions=bundle(eth_src,0,hrw,ofport,members:1,99999)",
    "actions=bundle(eth_src,0,hrw,ofport,foo:1)",
    "actions=bundle(eth_src,0,hrw,ofport)",
    "actions=bundle(eth_src,0,hrw,foo,members:1)",
    "actions=bundle(eth_src,0,xx,ofport,members:1)",
    "actions=bundle(foo,0,hrw,ofport,members:1)",
    "actions=bundle()",
    "actions=write_actions(bundle(eth_src,0,hrw,ofport,members:1))",
    "actions=clone(bundle_load(eth_src,0,hrw,ofport,reg2,members:1,2))",
    // sample
    "actions=sample(probability=12345,collector_set_id=23456,obs_domain_id=34567,obs_point_id=45678)",
    "actions=sample(probability=12345,collector_set_id=23456,obs_domain_id=34567,obs_point_id=45678,sampling_port=56789,ingress)",
    "actions=sample(probability=1)",
    "actions=sample(probability=0)",
    "actions=sample(probability=x)",
    "actions=sample(probability=65536)",
    "actions=sample(probability=65535,collector_set_id=x)",
    "actions=sample(probability=5,foo=1)",
    "actions=sample(collector_set_id=1)",
    "actions=sample(probability=5,sampling_port=x)",
    "actions=sample(probability=5,sampling_port=LOCAL,egress)",
    "actions=sample(probability=5,sampling_port=NONE)",
    "actions=sample(probability=5,sampling_port=1)",
    "actions=sample(probability=5,collector_set_id=4294967296)",
    "actions=sample(probability=5,ingress,egress)",
    "actions=sample(probability=5,collector_set_id)",
    "actions=sample()",
    "actions=sample",
    "actions=sample(probability=0x10,obs_point_id=-1)",
    "actions=sample(obs_domain_id=2,probability=3),output:1",
    "actions=write_actions(sample(probability=1))",
    "actions=clone(sample(probability=1),output:2)",
    // check_pkt_larger
    "actions=check_pkt_larger(1500)->NXM_NX_REG0[0]",
    "actions=check_pkt_larger(1500)->reg0[3]",
    "actions=check_pkt_larger(x)->reg0[0]",
    "actions=check_pkt_larger(70000)->reg0[0]",
    "actions=check_pkt_larger(1500)->reg0[0..1]",
    "actions=check_pkt_larger(1500)->reg0",
    "actions=check_pkt_larger(1500)",
    "actions=check_pkt_larger(1500)->",
    "actions=check_pkt_larger(1500)->nosuch[0]",
    "actions=check_pkt_larger(1500)->NXM_OF_IP_SRC[0]",
    "actions=check_pkt_larger(1500)->in_port[0]",
    "actions=check_pkt_larger(0)->reg0[31],output:1",
    "actions=write_actions(check_pkt_larger(1)->reg0[0])",
    "actions=check_pkt_larger:100->reg0[0]",
    "actions=check_pkt_larger(0x10)->reg0[0]",
    "actions=clone(check_pkt_larger(10)->reg0[0])",
    "actions=check_pkt_larger(65535)->metadata[63],resubmit(,1)",
];

fn live(of13: bool) {
    testutil::skip_without_ovs!();
    let texts: Vec<String> = CASES.iter().map(|s| s.to_string()).collect();
    let answers = testutil::ovs::parse_flows(&texts, of13);
    let dialect = if of13 {
        Dialect::OpenFlow13
    } else {
        Dialect::OpenFlow10
    };
    let (mut accepted, mut refused) = (0, 0);
    let mut fails = Vec::new();
    for (t, a) in texts.iter().zip(answers) {
        let Ok(a) = a else {
            fails.push(format!("{t}: ovs-ofctl could not run"));
            continue;
        };
        let ours = parse_flow_with(t, dialect);
        let ok = match (&a.result, &ours) {
            (Ok(want), Ok(got)) => {
                accepted += 1;
                *want == got.to_string()
            }
            (Err(want), Err(got)) => {
                refused += 1;
                let syntax = !want.contains("decode error")
                    && !want.contains("no usable protocol")
                    && !want.contains("actions are invalid");
                !syntax || want.lines().last() == Some(got.message.as_str())
            }
            _ => false,
        };
        if !ok {
            fails.push(format!(
                "input: {t}\n  ovs:  {:?}\n  ours: {:?}",
                a.result,
                ours.map(|s| s.to_string()).map_err(|e| e.to_string())
            ));
        }
    }
    eprintln!(
        "{}: {} flow strings, {accepted} accepted and {refused} refused alike; {} differ",
        if of13 { "OpenFlow13" } else { "OpenFlow10" },
        texts.len(),
        fails.len()
    );
    for f in &fails {
        eprintln!("{f}");
    }
    assert!(fails.is_empty(), "{} mismatches", fails.len());
    assert!(accepted >= 10 && refused >= 10, "{accepted} {refused}");
}

#[test]
fn issue17_actions_parse_like_ovs_of10() {
    live(false);
}

#[test]
fn issue17_actions_parse_like_ovs_of13() {
    live(true);
}

/// Errors name the offending token and its 1-based column (no OVS needed).
#[test]
fn errors_name_token_and_column() {
    let e = parse_flow_with("ip,actions=mod_nw_ttl:300", Dialect::OpenFlow13).unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (23, "300"));
    let e = parse_flow_with(
        "actions=output:1,write_metadata:1,exit",
        Dialect::OpenFlow13,
    )
    .unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (35, "exit"));
    let e = parse_flow_with("actions=write_metadata:1/q", Dialect::OpenFlow10).unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (24, "1/q"));
    let e = parse_flow_with("actions=output:1,enqueue:x:1", Dialect::OpenFlow10).unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (26, "x:1"));
    assert_eq!(e.message, "x: enqueue to unknown port");
    let e =
        parse_flow_with("actions=write_actions(output:1,exit2)", Dialect::OpenFlow13).unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (32, "exit2"));
    let e = parse_flow_with(
        "actions=write_actions(output:1),clear_actions",
        Dialect::OpenFlow13,
    )
    .unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (33, "clear_actions"));
    let e = parse_flow_with("actions=set_queue:1x", Dialect::OpenFlow13).unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (19, "1x"));
}
