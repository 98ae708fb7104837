//! Flow tables through real `ovs-ofctl`: `add-flow`, `add-flows FILE`, `mod-flows`
//! (`--strict`), `del-flows` (`--strict`, cookie masks, `out_port`), `dump-flows` (filters,
//! `--no-stats`), `dump-aggregate`, against our OpenFlow server and a real `ovs-vswitchd`
//! with the same commands, outputs compared after each step.

mod ofctl_support;
use ofctl_support::{Pair, flow_file};

/// Every hand-written corpus flow added one by one (OpenFlow 1.5, so every field and action
/// can be sent): same verdict, same error text, then the same tables in 1.0, 1.3 and 1.5.
#[test]
fn corpus_add_flow_one_by_one() {
    let Some(p) = Pair::start() else { return };
    // Left out: flows `ovs-ofctl` itself rewrites ("normalization changed ofp_match": a field
    // without its prerequisite), after which OVS holds a rule that prints as the catch-all
    // but is a different one (hidden mask bits): an OVS corner, not a connection matter. And
    // idle timeouts, which OVS expires while the test runs and our bare server (no
    // revalidator thread here) does not.
    let corpus: Vec<&str> = testutil::flow_corpus::hand_written()
        .into_iter()
        .filter(|f| !f.contains("idle_timeout") && !normalized(f))
        .collect();
    assert!(corpus.len() > 200, "corpus too small: {}", corpus.len());
    let mut differ = Vec::new();
    for f in &corpus {
        let (a, b) = p.both(&["-O", "OpenFlow15", "add-flow", "br0", f]);
        if a.masked() != b.masked() {
            differ.push(format!(
                "{f}\n  ours: {}\n  ovs:  {}",
                a.masked(),
                b.masked()
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} flows differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    for v in ["OpenFlow10", "OpenFlow13", "OpenFlow15"] {
        p.same_flows(&["-O", v], "the hand-written corpus");
    }
    p.same(&["-O", "OpenFlow13", "dump-aggregate", "br0"]);
    p.same(&["dump-aggregate", "br0"]);
}

/// `add-flows FILE` of generated flows, then modifications and deletions of every kind.
#[test]
fn add_flows_mod_del_filters() {
    let Some(p) = Pair::start() else { return };
    let flows = testutil::flow_corpus::generated(7, 400);
    let file = flow_file(&p.ours.dir, "gen.txt", &flows);
    let file = file.to_str().expect("utf-8");
    let step = |args: &[&str]| {
        p.same(args);
        p.same_flows(&["-O", "OpenFlow13"], &format!("{args:?}"));
    };
    step(&["-O", "OpenFlow10,OpenFlow15", "add-flows", "br0", file]);
    p.same_flows(&[], "add-flows (dumped with OpenFlow 1.0)");
    for args in [
        &[
            "add-flow",
            "br0",
            "cookie=0x10,priority=7,in_port=1,actions=output:2",
        ][..],
        &[
            "add-flow",
            "br0",
            "cookie=0x11,priority=7,in_port=2,actions=output:1",
        ],
        &[
            "add-flow",
            "br0",
            "cookie=0x21,priority=8,ip,actions=output:3",
        ],
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "br0",
            "table=3,cookie=0x30,priority=9,actions=output:3",
        ],
        &["mod-flows", "br0", "in_port=1,actions=output:3"],
        &[
            "mod-flows",
            "--strict",
            "br0",
            "priority=7,in_port=2,actions=drop",
        ],
        &[
            "-O",
            "OpenFlow13",
            "mod-flows",
            "br0",
            "cookie=0x20/0xf0,actions=output:1",
        ],
        &["dump-aggregate", "br0"],
        &["-O", "OpenFlow13", "dump-aggregate", "br0", "table=3"],
        &["del-flows", "br0", "out_port=3"],
        &["-O", "OpenFlow13", "del-flows", "br0", "cookie=0x10/0xff"],
        &["del-flows", "--strict", "br0", "priority=7,in_port=2"],
        &["-O", "OpenFlow13", "del-flows", "br0", "table=3"],
        &["del-flows", "br0", "tcp"],
        &[
            "-O",
            "OpenFlow15",
            "del-flows",
            "--strict",
            "br0",
            "priority=32768,udp",
        ],
        &["-O", "OpenFlow13", "del-flows", "br0", "cookie=0x0/0x1"],
    ] {
        step(args);
    }
    for filter in [
        &["-O", "OpenFlow13", "dump-flows", "br0", "table=0"][..],
        &["dump-flows", "br0", "ip"],
        &["-O", "OpenFlow13", "dump-flows", "br0", "cookie=0x2/0x2"],
        &["dump-flows", "br0", "out_port=1"],
        &["-O", "OpenFlow14", "dump-flows", "--no-stats", "br0"],
        &["-O", "OpenFlow13", "dump-aggregate", "br0", "ip"],
    ] {
        p.same(filter);
    }
    step(&["del-flows", "br0"]);
}

/// Whether `ovs-ofctl parse-flow` rewrites `flow`'s match.
fn normalized(flow: &str) -> bool {
    let o = std::process::Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow15", "parse-flow", flow])
        .output()
        .expect("run ovs-ofctl parse-flow");
    String::from_utf8_lossy(&o.stderr).contains("normalization changed")
}
