//! `upcall/show` against real OVS: the same lines in the same layout (the numbers differ: a
//! fresh OVS has no flows), before flowswitch's own line of upcall outcomes.

use upcall::udpif::Udpif;

/// The line's shape: digits replaced by `N`, the datapath name and revalidator ids dropped.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

#[test]
fn upcall_show_has_ovs_layout() {
    testutil::skip_without_ovs!();
    let ovs = testutil::ovs::OvsSandbox::start(2).expect("start OVS sandbox");
    let theirs = ovs.appctl(&["upcall/show"]).expect("upcall/show");
    let ours = Udpif::default().show("dummy@ovs-dummy");
    let t: Vec<String> = theirs.lines().map(shape).collect();
    let o: Vec<String> = ours.lines().map(shape).collect();
    // OVS prints one `  K: (keys N)` line per revalidator thread; ours prints one per
    // revalidator that has reported (none yet), then its own counters line.
    let t_head: Vec<&String> = t.iter().filter(|l| !l.contains("(keys")).collect();
    let o_head: Vec<&String> = o
        .iter()
        .filter(|l| !l.contains("(keys") && !l.trim_start().starts_with("upcalls:"))
        .collect();
    assert_eq!(o_head, t_head, "ours:\n{ours}\nOVS:\n{theirs}");
    assert!(t.iter().any(|l| l == "  N: (keys N)"), "OVS:\n{theirs}");
}
