//! `add-flows` files: comments as `ovs-ofctl add-flows` reads them (a `#` anywhere starts a
//! comment to the end of its line; blank lines skipped). Checked on our bridge, and against a
//! live OVS 3.1 (`add-flows` then `dump-flows`) when it is installed; prints `SKIP:` and
//! checks ours only otherwise.

use ofproto::{Backend, Bridge};
use testutil::ovs::{OvsSandbox, ovs_missing_reason};

const FLOWS: [&str; 7] = [
    "# a whole-line comment",
    "priority=10,in_port=1,actions=output:2   # a trailing comment",
    "priority=20,ip,nw_dst=10.0.0.1,actions=drop#no space before it",
    "   ",
    "priority=30,udp,tp_dst=53,actions=output:1,# after a trailing comma",
    "\t# indented comment",
    "priority=40,arp,actions=drop",
];

#[test]
fn trailing_comments_are_comments() {
    let mut br = Bridge::ovs_sandbox(2, Backend::TupleSpace);
    let n = br
        .add_flows_text(&FLOWS.join("\n"), 0)
        .expect("flows with comments");
    assert_eq!(n, 4);
    assert_eq!(br.n_rules(), 4);
    // A bad flow before a comment is still an error naming its line.
    let mut br = Bridge::ovs_sandbox(2, Backend::TupleSpace);
    let e = br
        .add_flows_text("actions=drop\nfoo=bar,actions=drop # comment\n", 0)
        .unwrap_err();
    assert!(e.starts_with("line 2:"), "{e}");
    assert_eq!(br.n_rules(), 0);

    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&format!("OVS comparison: {why}"));
        return;
    }
    let sb = OvsSandbox::start(2).expect("OVS sandbox");
    let lines: Vec<String> = FLOWS.iter().map(|l| l.to_string()).collect();
    sb.add_flows(&lines)
        .expect("ovs-ofctl add-flows accepts the same file");
    assert_eq!(sb.dump_flows().expect("dump-flows").len(), n);
}
