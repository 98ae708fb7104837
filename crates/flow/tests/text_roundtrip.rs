//! Round trip: for every corpus flow our parser accepts, printing it in `add-flow` syntax and
//! parsing that again gives the same flow mod, and the `parse-flow` display is stable too.

use flow::text::{Dialect, format_flow_add, parse_flow_with};

fn corpus() -> Vec<String> {
    let mut v: Vec<String> = testutil::flow_corpus::hand_written()
        .into_iter()
        .map(String::from)
        .collect();
    v.extend(testutil::flow_corpus::generated(1, 300));
    v.extend(testutil::flow_corpus::generated(99, 400));
    v
}

fn round_trip(dialect: Dialect) {
    let mut n = 0;
    for t in corpus() {
        let Ok(x) = parse_flow_with(&t, dialect) else {
            continue;
        };
        n += 1;
        let text = format_flow_add(&x);
        let y = parse_flow_with(&text, dialect)
            .unwrap_or_else(|e| panic!("{t}\n printed {text}\n reparse failed: {e}"));
        assert_eq!(x, y, "{t}\n printed {text}");
        assert_eq!(x.to_string(), y.to_string(), "{t}");
    }
    eprintln!("{dialect:?}: {n} flows round-tripped");
    assert!(n >= 300, "too few accepted flows: {n}");
}

#[test]
fn round_trip_of10() {
    round_trip(Dialect::OpenFlow10);
}

#[test]
fn round_trip_of13() {
    round_trip(Dialect::OpenFlow13);
}
