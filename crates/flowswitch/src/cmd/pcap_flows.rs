//! `pcap-flows`: one line per packet of a pcap file, its extracted flow key printed as
//! `ovs-appctl ofproto/trace` prints its `Flow:` line.
//!
//! Frames too short for an Ethernet header get OVS's own wording
//! (`error: Packet data too short for Ethernet`) instead of a flow, so the output lines up
//! packet for packet with the input.

use anyhow::Context;
use flow::extract::{PacketMeta, extract};
use flow::text::format_flow_line;
use std::io::Write;
use std::path::PathBuf;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Input pcap file (Ethernet link type).
    pub file: PathBuf,
    /// The input port the packets are taken to arrive on.
    #[arg(long, default_value_t = 1)]
    pub in_port: u32,
}

/// Length of an Ethernet header without tags: shorter frames carry no flow.
const ETH_HEADER_LEN: usize = 14;

/// The line `pcap-flows` prints for one frame.
pub fn flow_line(frame: &[u8], in_port: u32) -> String {
    if frame.len() < ETH_HEADER_LEN {
        return "error: Packet data too short for Ethernet".to_string();
    }
    let mut key = flow::FlowKey::ZERO;
    extract(frame, &PacketMeta::port(in_port), &mut key);
    format_flow_line(&key)
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let frames = netdev::pcap::read_pcap(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for frame in &frames {
        writeln!(out, "{}", flow_line(frame, args.in_port))?;
    }
    out.flush()?;
    Ok(())
}
