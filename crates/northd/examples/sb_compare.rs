//! `cargo run --release -p northd --example sb_compare -- OURS_SB THEIRS_SB`: compares the
//! logical flows of two running SB `ovsdb-server`s (e.g. ours and ovn-northd's for the same
//! NB) grouped by flow, as `tests/oracle.rs` does at scale ([`northd::compare::sb_flows`]):
//! prints the per-stage report and exits 1 when they differ.

fn replica(target: &str) -> ovsdb::Database {
    let mut c = ovsdb::Client::connect(target).unwrap_or_else(|e| panic!("{target}: {e}"));
    c.monitor_cond("OVN_Southbound", &ovsdb::MonitorSpec::all())
        .unwrap_or_else(|e| panic!("{target}: {e}"));
    c.take_replica().expect("a replica")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ours, theirs] = args.as_slice() else {
        eprintln!("usage: sb_compare OURS_SB THEIRS_SB   (ovsdb targets, e.g. unix:sb.sock)");
        std::process::exit(2);
    };
    let a = northd::compare::sb_flows(&replica(ours)).unwrap_or_else(|e| panic!("{ours}: {e}"));
    let b = northd::compare::sb_flows(&replica(theirs)).unwrap_or_else(|e| panic!("{theirs}: {e}"));
    let d = northd::compare::diff_grouped(&a, &b);
    print!("{}", northd::compare::report(&d, 5));
    println!(
        "flows: ours {} theirs {}; (flow, datapath) pairs: ours {} theirs {}",
        a.len(),
        b.len(),
        a.values().map(|s| s.len()).sum::<usize>(),
        b.values().map(|s| s.len()).sum::<usize>()
    );
    if !northd::compare::is_equal(&d) {
        std::process::exit(1);
    }
}
