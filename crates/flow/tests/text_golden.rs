//! Differential test of the flow-text parser/printer against recorded `ovs-ofctl parse-flow`
//! answers (testutil's golden files, recorded from OVS 3.1), for both the default OpenFlow 1.0
//! protocol and `-O OpenFlow13`.

use flow::text::{Dialect, parse_flow_with};

fn run(of13: bool) -> (usize, usize, Vec<String>) {
    let golden = testutil::golden::parse_flow_golden(of13).expect("golden file");
    let dialect = if of13 {
        Dialect::OpenFlow13
    } else {
        Dialect::OpenFlow10
    };
    let mut pass = 0;
    let mut fails = Vec::new();
    for g in &golden {
        let ours = parse_flow_with(&g.input, dialect);
        let ok = match (&g.result, &ours) {
            (Ok(want), Ok(got)) => *want == got.to_string(),
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if ok {
            pass += 1;
        } else {
            fails.push(format!(
                "input: {}\n  ovs:  {:?}\n  ours: {:?}",
                g.input,
                g.result,
                ours.map(|s| s.to_string()).map_err(|e| e.to_string())
            ));
        }
    }
    (pass, golden.len(), fails)
}

#[test]
fn golden_of10() {
    let (pass, total, fails) = run(false);
    eprintln!("OpenFlow10 golden: {pass}/{total} equal to ovs-ofctl");
    for f in fails.iter().take(400) {
        eprintln!("{f}");
    }
    assert!(fails.is_empty(), "{} mismatches", fails.len());
}

#[test]
fn golden_of13() {
    let (pass, total, fails) = run(true);
    eprintln!("OpenFlow13 golden: {pass}/{total} equal to ovs-ofctl -O OpenFlow13");
    for f in fails.iter().take(400) {
        eprintln!("{f}");
    }
    assert!(fails.is_empty(), "{} mismatches", fails.len());
}
