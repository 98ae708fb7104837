//! The conntrack oracle on real OVS alone: every script runs, hand-checked facts hold, and the
//! deterministic answers equal the recorded `data/ct_oracle_answers.txt`.
//!
//! Regenerate the answers: `cargo test -p testutil --test ct_oracle -- --ignored regen_ct_oracle_answers`.
//! Print one script's answers: `cargo run -p testutil --example ct_oracle -- udp_basic`.

use std::collections::BTreeMap;

use testutil::ct_oracle::{
    Answers, Check, Script, answers_path, compare, ct_sandbox, format_answers,
    format_receive_output, nat_range_violations, parse_receive_output, ports, scripts,
};

fn run_all() -> Vec<(Script, Answers)> {
    let sb = ct_sandbox().expect("start OVS sandbox");
    scripts()
        .into_iter()
        .map(|s| {
            let a = sb
                .run_ct_script(&s)
                .unwrap_or_else(|e| panic!("script {} on OVS: {e}", s.name));
            (s, a)
        })
        .collect()
}

fn ports_of(all: &[(Script, Answers)], script: &str, tag: &str) -> Vec<u32> {
    let (s, a) = all
        .iter()
        .find(|(s, _)| s.name == script)
        .unwrap_or_else(|| panic!("no script {script}"));
    let line = s
        .line_of(tag)
        .unwrap_or_else(|| panic!("no tag {tag} in {script}"));
    a.frames
        .iter()
        .find(|f| f.line == line)
        .unwrap_or_else(|| panic!("no answer for {script} line {line}"))
        .ports
        .clone()
}

fn dump_of<'a>(all: &'a [(Script, Answers)], script: &str) -> &'a [String] {
    &all.iter().find(|(s, _)| s.name == script).unwrap().1.dump
}

/// Splits the answers file into script name → its text block.
fn recorded_blocks(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut cur: Option<(String, String)> = None;
    for l in text.lines() {
        if let Some(name) = l.strip_prefix("## ") {
            if let Some((n, b)) = cur.take() {
                m.insert(n, b);
            }
            cur = Some((name.trim().to_string(), String::new()));
        }
        if let Some((_, b)) = cur.as_mut() {
            b.push_str(l);
            b.push('\n');
        }
    }
    if let Some((n, b)) = cur {
        m.insert(n, b);
    }
    m
}

#[test]
fn ovs_ct_oracle_answers() {
    testutil::skip_without_ovs!();
    let all = run_all();
    use ports::*;
    // UDP: new until the first reply, then est (+rpl for the reply direction).
    assert_eq!(ports_of(&all, "udp_basic", "first"), vec![NEW]);
    assert_eq!(ports_of(&all, "udp_basic", "second_orig"), vec![NEW]);
    assert_eq!(ports_of(&all, "udp_basic", "reply"), vec![EST_RPL]);
    assert_eq!(ports_of(&all, "udp_basic", "after_reply"), vec![EST]);
    assert_eq!(ports_of(&all, "udp_basic", "badsum"), vec![INV]);
    // TCP handshake: the SYN+ACK is already +est+rpl; the third packet +est.
    for s in ["tcp_handshake_data_close", "tcp_handshake_commit_new_only"] {
        assert_eq!(ports_of(&all, s, "syn"), vec![NEW]);
        assert_eq!(ports_of(&all, s, "synack"), vec![EST_RPL]);
        assert_eq!(ports_of(&all, s, "ack"), vec![EST]);
        assert!(dump_of(&all, s)[0].ends_with("protoinfo=(state=TIME_WAIT)"));
    }
    assert_eq!(ports_of(&all, "tcp_window_rst", "oow"), vec![INV]);
    assert_eq!(ports_of(&all, "tcp_window_rst", "retransmit"), vec![EST]);
    assert_eq!(ports_of(&all, "tcp_bad_packets", "synfin"), vec![INV]);
    assert_eq!(ports_of(&all, "tcp_bad_packets", "badsum"), vec![INV]);
    // ICMP errors quoting a committed connection are related.
    assert_eq!(ports_of(&all, "icmp_related", "udp_unreach"), vec![REL_RPL]);
    assert_eq!(
        ports_of(&all, "icmp_related", "udp_unreach_orig"),
        vec![REL]
    );
    assert_eq!(ports_of(&all, "icmp_related", "unrelated"), vec![INV]);
    assert_eq!(ports_of(&all, "icmp_echo", "rep"), vec![EST_RPL]);
    // Zones separate the same tuple.
    assert_eq!(ports_of(&all, "zones", "z5_first"), vec![NEW]);
    assert_eq!(ports_of(&all, "zones", "z5_reply"), vec![EST_RPL]);
    assert!(
        dump_of(&all, "zones")
            .iter()
            .any(|l| l.ends_with(",zone=5"))
    );
    // Marks set by exec(...) of a recirculating commit are visible in the next table.
    assert_eq!(ports_of(&all, "mark_label", "first"), vec![NEW, MARK1]);
    // Seed 002's firewall.
    assert_eq!(ports_of(&all, "firewall", "udp_first"), vec![2]);
    assert_eq!(ports_of(&all, "firewall", "udp_reply"), vec![1]);
    assert_eq!(
        ports_of(&all, "firewall", "udp_unsolicited"),
        Vec::<u32>::new()
    );
    // SNAT rewrites the source.
    let (s, a) = all
        .iter()
        .find(|(s, _)| s.name == "nat_snat_single")
        .unwrap();
    let l = s.line_of("udp").unwrap();
    let f = a.frames.iter().find(|f| f.line == l).unwrap();
    assert_eq!(f.ports, vec![NEW, SNAT]);
    assert_eq!(&f.out[0].1[14 + 12..14 + 16], &[10, 0, 0, 100]);

    // The comparison machinery agrees OVS with itself (through the `receive` text format), and
    // OVS's range NAT stays in its range.
    for (s, a) in &all {
        match s.check {
            Check::NatRange { ips, ports: pr } => {
                let v = nat_range_violations(a, ips, pr);
                assert!(v.is_empty(), "{}: {v:?}", s.name);
            }
            _ => {
                let back = parse_receive_output(&format_receive_output(a)).unwrap();
                let d = compare(s, a, &back);
                assert!(d.is_empty(), "{}: {d:?}", s.name);
            }
        }
    }

    // Everything deterministic equals the recorded answers.
    let recorded = std::fs::read_to_string(answers_path()).expect("read recorded answers");
    let blocks = recorded_blocks(&recorded);
    let mut diffs = Vec::new();
    for (s, a) in &all {
        if matches!(s.check, Check::NatRange { .. }) {
            continue;
        }
        let now = format_answers(s, a);
        match blocks.get(&s.name) {
            Some(b) if b.trim_end() == now.trim_end() => {}
            Some(b) => diffs.push(format!("{}: recorded\n{b}\nnow\n{now}", s.name)),
            None => diffs.push(format!("{}: not recorded", s.name)),
        }
    }
    assert!(
        diffs.is_empty(),
        "OVS's answers changed:\n{}",
        diffs.join("\n")
    );
}

#[test]
#[ignore = "regenerates data/ct_oracle_answers.txt from real OVS"]
fn regen_ct_oracle_answers() {
    testutil::skip_without_ovs!();
    let all = run_all();
    let mut out = String::new();
    out.push_str(&format!(
        "# Conntrack oracle: answers of {} (userspace conntrack, dummy datapath) for every\n",
        testutil::ovs::tool_version("ovs-vswitchd")
    ));
    out.push_str("# script of testutil::ct_oracle::scripts(). Per script: its pipeline (`# flow:`), then per\n");
    out.push_str("# frame `<line> in=<in_port> <summary> -> <output ports>` (decoder port names in parentheses;\n");
    out.push_str("# output packets as hex for NAT scripts), then `dump:` = `dpctl/dump-conntrack`, sorted.\n");
    out.push_str("# nat_range_exhaustion is NOT deterministic on OVS (hash with a random basis): one sample.\n");
    out.push_str("# Regenerate: cargo test -p testutil --test ct_oracle -- --ignored regen_ct_oracle_answers\n\n");
    for (s, a) in &all {
        out.push_str(&format_answers(s, a));
        out.push('\n');
    }
    std::fs::write(answers_path(), out).expect("write answers");
    eprintln!("wrote {}", answers_path().display());
}
