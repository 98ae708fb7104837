//! `gen-flows`: a ClassBench rule file as an `ovs-ofctl add-flows` file (one flow a line),
//! for benchmarks that load the same flows into `flowswitch vswitchd` and `ovs-vswitchd`.
//!
//! Each rule becomes the value/mask flows of `classifier::classbench` expansion (port ranges
//! → prefix covers, as `bench flowmods` loads them), in table 0 with priority
//! `65535 - i * 65534 / n` for line `i` of `n`. OVS refuses an L4 port match without TCP or
//! UDP as the protocol, so a rule that has one with any other (or no) protocol is left out;
//! a flow equal to an earlier one (same priority and match) is written once. `--max-flows`
//! stops after that many flows.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use classifier::classbench::CbRule;
use flow::ofp::{Action, FlowSpec, Match, OfPort};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// ClassBench rule file (gzip or plain), e.g. ../shared/classbench/acl1_100k.gz.
    #[arg(long)]
    pub rules: PathBuf,
    /// Write at most this many flows (default: all).
    #[arg(long)]
    pub max_flows: Option<usize>,
    /// Output port of every flow.
    #[arg(long, default_value_t = 1)]
    pub port: u16,
    /// Output file (default: standard output).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// The `add-flows` lines of `rules` (see the module doc), at most `max` of them.
pub fn flow_lines(rules: &[CbRule], port: u16, max: usize) -> Vec<String> {
    let n = rules.len().max(1) as u64;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let ports = r.sport != (0, u16::MAX) || r.dport != (0, u16::MAX);
        if ports && !(r.proto_mask == 0xff && matches!(r.proto, 6 | 17)) {
            continue;
        }
        let priority = (65535 - (i as u64) * 65534 / n) as u16;
        for (key, mask) in r.expand() {
            if out.len() >= max {
                return out;
            }
            let spec = FlowSpec {
                priority,
                match_: Match { key, mask },
                actions: vec![Action::Output {
                    port: OfPort(port),
                    max_len: 0,
                }],
                ..FlowSpec::default()
            };
            let line = flow::text::format_flow_add(&spec);
            let (head, _) = line.rsplit_once("actions=").unwrap_or((&line, ""));
            if seen.insert(head.to_string()) {
                out.push(line);
            }
        }
    }
    out
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let rules = super::classbench::read_rules(&args.rules)?;
    let lines = flow_lines(&rules, args.port, args.max_flows.unwrap_or(usize::MAX));
    let mut w: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", p.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = std::io::BufWriter::new(&mut w);
    for l in &lines {
        writeln!(w, "{l}")?;
    }
    w.flush()?;
    if args.output.is_some() {
        eprintln!("{} flows from {} rules", lines.len(), rules.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(sport: (u16, u16), dport: (u16, u16), proto: u8, proto_mask: u8) -> CbRule {
        CbRule {
            src: 0x0a00_0000,
            src_len: 8,
            dst: 0xc0a8_0101,
            dst_len: 32,
            sport,
            dport,
            proto,
            proto_mask,
        }
    }

    #[test]
    fn ranges_expand_and_unexpressible_rules_are_left_out() {
        let rules = [
            // 1..=2 is two exact ports (1 and 2 are not one aligned block).
            rule((0, u16::MAX), (1, 2), 6, 0xff),
            // Ports without TCP/UDP: OVS refuses it.
            rule((0, u16::MAX), (80, 80), 0, 0),
            // No ports, any protocol: fine.
            rule((0, u16::MAX), (0, u16::MAX), 0, 0),
            // The first rule again (same match, lower priority): kept, other priority.
            rule((0, u16::MAX), (1, 2), 6, 0xff),
        ];
        let lines = flow_lines(&rules, 2, usize::MAX);
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines[0].starts_with("priority=65535,tcp,"), "{}", lines[0]);
        assert!(lines[0].contains("tp_dst=1"), "{}", lines[0]);
        assert!(lines[1].contains("tp_dst=2,"), "{}", lines[1]);
        assert!(lines[0].ends_with("actions=output:2"), "{}", lines[0]);
        assert!(!lines[2].contains("tp_"), "{}", lines[2]);
        for l in &lines {
            flow::text::parse_flow(l).unwrap_or_else(|e| panic!("{l}: {e}"));
        }
        assert_eq!(flow_lines(&rules, 2, 3).len(), 3);
    }

    #[test]
    fn duplicates_are_written_once() {
        // Past 65534 lines, neighbouring lines share a priority: copies of one rule then
        // make equal flows.
        let r = rule((0, u16::MAX), (0, u16::MAX), 17, 0xff);
        let lines = flow_lines(&vec![r; 70_000], 1, usize::MAX);
        assert!(
            lines.len() < 70_000 && lines.len() > 60_000,
            "{}",
            lines.len()
        );
        let distinct: HashSet<&String> = lines.iter().collect();
        assert_eq!(distinct.len(), lines.len());
    }
}
