//! `flowswitch`: the command-line front end of the switch.
//!
//! Each subcommand lives in its own module under `cmd/`; `main` only parses arguments and
//! reports errors. Every error reaches the user as one clear line and a non-zero exit status,
//! never a panic. Output follows Unix habits: when the reader of standard output goes away
//! (`flowswitch pcap-flows X | head -1`), the command stops quietly with status 0; a closed or
//! broken standard error never turns an error report into a crash.

use clap::{Parser, Subcommand};
use std::io::Write as _;

/// `eprintln!` that ignores a failing standard error (a closed pipe, a full disk): a note the
/// user cannot see is no reason to crash.
macro_rules! note {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

mod alloc;
mod cmd;

/// A userspace virtual switch built on the Open vSwitch design.
#[derive(Debug, Parser)]
#[command(name = "flowswitch", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse an OpenFlow flow in ovs-ofctl syntax and print it canonically (like `ovs-ofctl parse-flow`).
    ParseFlow(cmd::parse_flow::Args),
    /// Print, for each packet of a pcap file, its extracted flow as `ofproto/trace` prints `Flow:`.
    PcapFlows(cmd::pcap_flows::Args),
    /// Write the synthetic traffic generator's frames to a pcap file.
    GenPcap(cmd::gen_pcap::Args),
    /// Trace a packet through an OpenFlow pipeline, like `ovs-appctl ofproto/trace`.
    Trace(cmd::trace::Args),
    /// Classify a ClassBench trace with the OpenFlow classifier, checked against a linear scan.
    Classbench(cmd::classbench::Args),
    /// Replay the built-in packet set through the default bridge and print forwarding stats.
    Demo(cmd::demo::Args),
    /// Benchmarks: `bench datapath` replays a pcap through one pinned PMD (OVS-DPDK's setup).
    Bench(cmd::bench::Args),
    /// Send scripted frames through the whole datapath (conntrack included), one by one,
    /// like OVS's `netdev-dummy/receive`; print where each went.
    Receive(cmd::receive::Args),
    /// Compile an OVN northbound database file into logical flows (`ovn-sbctl lflow-list` format).
    Northd(cmd::northd::Args),
    /// Write an ovn-kubernetes-like OVN northbound database file (the OVN benchmark's topology).
    GenNb(cmd::gen_nb::Args),
    /// Write a ClassBench rule file as an `ovs-ofctl add-flows` file (ranges expanded to
    /// value/mask flows), for loading the same flows into flowswitch and OVS.
    GenFlows(cmd::gen_flows::Args),
    /// Run as a drop-in `ovs-vswitchd`: configured from OVS's database, driven by `ovs-vsctl`,
    /// `ovs-ofctl` and `ovs-appctl`.
    Vswitchd(cmd::vswitchd::Args),
    /// Forward between real Linux interfaces in the foreground (AF_PACKET, tap) until
    /// SIGINT/SIGTERM: a learning switch, or the flows of `--flows FILE`.
    Switch(cmd::switch::Args),
    /// Send UDP frames on a real interface (AF_PACKET or AF_XDP) as fast as it takes them,
    /// or at a rate, and print the packets per second sent.
    Blast(cmd::blast::Args),
}

/// Whether `e` comes from writing to a pipe whose reader has gone (EPIPE).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line, `: `-separated; a cause whose text the line already
/// ends with (an error that prints its source and also returns it as `source()`) is not
/// repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn main() -> std::process::ExitCode {
    alloc::tune();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::ParseFlow(a) => cmd::parse_flow::run(a),
        Command::PcapFlows(a) => cmd::pcap_flows::run(a),
        Command::GenPcap(a) => cmd::gen_pcap::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Classbench(a) => cmd::classbench::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Receive(a) => cmd::receive::run(a),
        Command::Northd(a) => cmd::northd::run(a),
        Command::GenNb(a) => cmd::gen_nb::run(a),
        Command::GenFlows(a) => cmd::gen_flows::run(a),
        Command::Vswitchd(a) => cmd::vswitchd::run(a),
        Command::Switch(a) => cmd::switch::run(a),
        Command::Blast(a) => cmd::blast::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader of our output went away (`| head`): stop quietly, as Unix tools do.
        Err(e) if is_broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "flowswitch: {}", error_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_does_not_repeat_a_cause_the_message_already_holds() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let port = netdev::PortError::Io {
            path: "x.pcap".into(),
            source: io,
        };
        let e = anyhow::Error::new(port);
        let line = error_line(&e);
        assert_eq!(line.matches("not found").count(), 1, "{line}");
        assert!(line.starts_with("x.pcap: "), "{line}");
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_line(&e), "outer: inner");
    }

    #[test]
    fn broken_pipe_is_recognised_through_context() {
        let e = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
