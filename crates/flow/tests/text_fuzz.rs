//! No-panic properties of the flow-text parser: arbitrary strings, strings over the language's
//! alphabet, and mutations of valid flows give `Ok` or `Err`, never a panic; errors point
//! inside the text.

use flow::text::{
    Dialect, format_flow_add, parse_actions, parse_flow, parse_flow_with, parse_match,
};
use proptest::prelude::*;

fn check(s: &str) {
    for d in [Dialect::OpenFlow10, Dialect::OpenFlow13] {
        match parse_flow_with(s, d) {
            Ok(spec) => {
                let _ = spec.to_string();
                let _ = format_flow_add(&spec);
            }
            Err(e) => {
                assert!(
                    e.column >= 1 && e.column <= s.chars().count() + 1,
                    "{e} for {s:?}"
                );
                let _ = e.to_string();
            }
        }
    }
    let _ = parse_match(s);
    let _ = parse_actions(s);
}

fn seeds() -> Vec<String> {
    let mut v: Vec<String> = testutil::flow_corpus::hand_written()
        .into_iter()
        .map(String::from)
        .collect();
    v.extend(testutil::flow_corpus::generated(3, 100));
    v
}

const ALPHABET: &[&str] = &[
    "ip",
    "tcp",
    "ipv6",
    "arp",
    "icmp6",
    ",",
    " ",
    "=",
    ":",
    "/",
    "(",
    ")",
    "[",
    "]",
    "..",
    "->",
    "actions=",
    "ct(",
    "nat(",
    "exec(",
    "commit",
    "src=",
    "dst=",
    "0x",
    "ff",
    "1",
    "0",
    "65535",
    "4294967296",
    "-",
    "+",
    "reg0",
    "NXM_NX_REG0",
    "nw_src",
    "ipv6_src",
    "dl_vlan",
    "vlan_tci",
    "tcp_flags",
    "ct_state",
    "trk",
    "load:",
    "move:",
    "set_field:",
    "output",
    "resubmit",
    "note:",
    "::",
    "1.2.3.4",
    "é",
    "\u{0}",
    "*",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings(s in ".{0,80}") {
        check(&s);
    }

    #[test]
    fn alphabet_strings(parts in prop::collection::vec(0..ALPHABET.len(), 0..40)) {
        let s: String = parts.into_iter().map(|i| ALPHABET[i]).collect();
        check(&s);
    }

    #[test]
    fn mutated_valid_flows(idx in any::<prop::sample::Index>(),
                           edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, 0..ALPHABET.len()), 1..6)) {
        let seeds = seeds();
        let mut s: Vec<char> = seeds[idx.index(seeds.len())].chars().collect();
        for (pos, op, tok) in edits {
            let p = if s.is_empty() { 0 } else { pos.index(s.len() + 1) };
            match op {
                0 if p < s.len() => { s.remove(p); }
                1 => { for (k, c) in ALPHABET[tok].chars().enumerate() { s.insert((p + k).min(s.len()), c); } }
                2 if p < s.len() => { s.truncate(p); }
                _ => { if p < s.len() { s[p] = ALPHABET[tok].chars().next().unwrap_or('x'); } }
            }
        }
        let s: String = s.into_iter().collect();
        check(&s);
    }
}

#[test]
fn error_names_token_and_column() {
    let e = parse_flow("ip,tp_srcx=1,actions=drop").unwrap_err();
    assert_eq!(e.column, 4);
    assert_eq!(e.token, "tp_srcx");
    assert_eq!(
        e.to_string(),
        "column 4: 'tp_srcx': unknown keyword tp_srcx"
    );
    let e = parse_flow("ip,nw_src=1.2.3,actions=drop").unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (11, "1.2.3"));
    let e = parse_flow("actions=output:1,bogus").unwrap_err();
    assert_eq!((e.column, e.token.as_str()), (18, "bogus"));
}
