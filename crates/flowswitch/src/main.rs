//! `flowswitch`: the command-line front end of the switch.
//!
//! Each subcommand lives in its own module under `cmd/`; `main` only parses arguments and
//! reports errors. Every error reaches the user as one clear line and a non-zero exit status,
//! never a panic.

use clap::{Parser, Subcommand};

mod cmd;
mod ct_adapter;
mod dp_actions;
mod revalidate;
mod upcall;

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
}

fn main() -> std::process::ExitCode {
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
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flowswitch: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
