//! Unit tests of translation against OVS 3.1 answers recorded by hand.

use super::*;
use crate::bridge::FlowModCommand;
use crate::table::Backend;

fn br(flows: &[&str]) -> Bridge {
    let mut b = Bridge::ovs_sandbox(4, Backend::Linear);
    for f in flows {
        b.flow_mod_text(FlowModCommand::Add, f, 0).unwrap();
    }
    b
}

fn key(s: &str) -> FlowKey {
    flow::text::parse_match(s).unwrap().key
}

fn run(b: &mut Bridge, flow: &str) -> (String, String) {
    let k = key(flow);
    let o = xlate(b, &XlateIn::new(k));
    (
        crate::trace::format_megaflow(&k, &o),
        crate::odp::format_odp_actions(&o.actions),
    )
}

#[test]
fn l3_rewrite_matches_ovs() {
    let mut b = br(&[
        "table=0,priority=10,in_port=1,udp,nw_dst=10.0.0.0/8,actions=mod_dl_src:00:00:00:00:00:01,dec_ttl,resubmit(,1)",
        "table=1,priority=5,udp,actions=mod_nw_src:10.1.1.1,output:2,mod_nw_dst:1.2.3.4,output:3",
    ]);
    let (_m, a) = run(
        &mut b,
        "in_port=1,udp,nw_src=1.1.1.1,nw_dst=10.1.2.3,nw_ttl=64,udp_src=1,udp_dst=2",
    );
    assert_eq!(
        a,
        "set(eth(src=00:00:00:00:00:01)),set(ipv4(src=10.1.1.1,ttl=63)),2,set(ipv4(dst=1.2.3.4)),3"
    );
}

#[test]
fn loop_is_a_counted_drop() {
    let b = br(&["actions=resubmit(,0)"]);
    let k = key("in_port=1,ip");
    let o = xlate(&b, &XlateIn::new(k));
    assert_eq!(o.error, Some(XlateError::RecursionTooDeep));
    assert!(o.actions.is_empty());
    // Branching chains hit the resubmit cap instead of running forever.
    let b = br(&[
        "table=0,actions=resubmit(,1),resubmit(,1)",
        "table=1,actions=resubmit(,2),resubmit(,2)",
        "table=2,actions=resubmit(,3),resubmit(,3)",
        "table=3,actions=resubmit(,0),resubmit(,0)",
    ]);
    let o = xlate(&b, &XlateIn::new(k));
    assert!(o.error.is_some());
}

#[test]
fn trace_tree_prints_like_ovs() {
    let b = br(&[
        "actions=resubmit(,1),output:3",
        "table=1,actions=resubmit(2,2),mod_dl_dst:00:00:00:00:00:01",
        "table=2,in_port=2,udp,actions=output:4",
    ]);
    let k = key(
        "in_port=1,udp,dl_src=00:00:00:00:00:0a,dl_dst=00:00:00:00:00:0b,nw_src=1.1.1.1,nw_dst=10.1.2.3,nw_ttl=64,udp_src=1,udp_dst=2",
    );
    let mut i = XlateIn::new(k);
    i.trace = true;
    let o = xlate(&b, &i);
    let t = crate::trace::format_trace(&k, &o);
    let want = "
bridge(\"br0\")
-------------
 0. priority 32768
    resubmit(,1)
     1. priority 32768
            resubmit(2,2)
             2. udp,in_port=2, priority 32768
                    output:4
            mod_dl_dst:00:00:00:00:00:01
    output:3
";
    assert!(t.contains(want), "{t}");
    assert!(
        t.ends_with("Datapath actions: 4,set(eth(dst=00:00:00:00:00:01)),3\n"),
        "{t}"
    );
}

/// A packet-out's action list runs instead of a table-0 lookup: outputs (`in_port`
/// skipped unless `IN_PORT`), set_field, resubmit and `output:TABLE` into the tables,
/// FLOOD; a recirculated key does not thaw a frozen state instead.
#[test]
fn packet_out_actions_run_instead_of_a_lookup() {
    let b = br(&[
        "table=0,priority=10,actions=output:4",
        "table=1,udp,actions=output:3",
    ]);
    let k = key("in_port=1,udp,nw_src=1.1.1.1,nw_dst=10.1.2.3,nw_ttl=64,udp_src=1,udp_dst=2");
    let run_po = |k: FlowKey, acts: &str| {
        let a = flow::text::parse_actions(acts).unwrap();
        let o = xlate_actions(&b, &XlateIn::new(k), &a);
        assert!(o.error.is_none(), "{acts}: {:?}", o.error);
        // A table-0 rule only through `output:TABLE`.
        let t0 = o.rules.iter().any(|(t, _)| *t == 0);
        assert_eq!(t0, acts == "output:TABLE", "{acts}: {:?}", o.rules);
        crate::odp::format_odp_actions(&o.actions)
    };
    assert_eq!(run_po(k, "output:2"), "2");
    assert_eq!(run_po(k, "output:1"), "drop");
    assert_eq!(run_po(k, "output:in_port"), "1");
    assert_eq!(
        run_po(k, "mod_nw_src:10.1.1.1,output:2"),
        "set(ipv4(src=10.1.1.1)),2"
    );
    assert_eq!(run_po(k, "resubmit(,1)"), "3");
    assert_eq!(run_po(k, "output:TABLE"), "4");
    assert_eq!(run_po(k, "FLOOD"), "2,3,4,100"); // 100: LOCAL
    assert_eq!(run_po(k, ""), "drop");
    // The same key through the tables: table 0's rule.
    let o = xlate(&b, &XlateIn::new(k));
    assert_eq!(crate::odp::format_odp_actions(&o.actions), "4");
    // `table` is ignored: a packet-out starts nowhere but in its actions.
    let mut i = XlateIn::new(k);
    i.table = 1;
    let a = flow::text::parse_actions("output:2").unwrap();
    assert_eq!(
        crate::odp::format_odp_actions(&xlate_actions(&b, &i, &a).actions),
        "2"
    );
}
