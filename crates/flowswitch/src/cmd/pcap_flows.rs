//! `pcap-flows`: one line per packet of a pcap file, its extracted flow key printed as
//! `ovs-appctl ofproto/trace` prints its `Flow:` line.
//!
//! Packets are read and printed one by one, so a file cut off part-way prints every good
//! packet before the error (as tcpdump does); the error names the record (counted from 1)
//! and the exit status is 1. A frame too short for an Ethernet header has no flow: it gets no
//! line on standard output, but a message on standard error with its record number and OVS's
//! own wording (`Packet data too short for Ethernet`); the exit status stays 0.

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

/// The flow line of one frame, or why it has none (OVS's wording).
pub fn flow_line(frame: &[u8], in_port: u32) -> Result<String, &'static str> {
    if frame.len() < ETH_HEADER_LEN {
        return Err("Packet data too short for Ethernet");
    }
    let mut key = flow::FlowKey::ZERO;
    extract(frame, &PacketMeta::port(in_port), &mut key);
    Ok(format_flow_line(&key))
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let file = args.file.display().to_string();
    let read = netdev::read_pcap_each(&args.file, |record, frame| -> anyhow::Result<()> {
        match flow_line(frame, args.in_port) {
            Ok(line) => writeln!(out, "{line}")?,
            Err(why) => {
                // Keep the two streams in order for a reader of both.
                out.flush()?;
                note!(
                    "flowswitch: {file}: record {record}: {why} ({} bytes), no flow",
                    frame.len()
                );
            }
        }
        Ok(())
    });
    // The good packets first, then the error (if any) that stopped the reading.
    out.flush()?;
    read?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runts_have_no_flow_line() {
        assert_eq!(
            flow_line(&[0; 13], 1),
            Err("Packet data too short for Ethernet")
        );
        let udp = testutil::packets::udp4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53, 10);
        let line = flow_line(&udp, 3).expect("flow");
        assert!(line.contains("in_port=3"), "{line}");
    }
}
