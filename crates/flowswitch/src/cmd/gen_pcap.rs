//! `gen-pcap`: write the synthetic generator's frames (one per flow) to a pcap file.
//!
//! The same generator feeds `demo` and the benchmarks, so a pcap written here replays the
//! exact traffic those use, in flowswitch or in any other tool.

use anyhow::Context;
use netdev::generator::{FrameSize, GeneratorConfig, GeneratorPort, ProtocolMix};
use std::path::PathBuf;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output pcap file.
    pub out: PathBuf,
    /// Number of distinct flows (one frame each).
    #[arg(long, default_value_t = 1000)]
    pub flows: u32,
    /// Frame size in bytes without FCS (60 = a 64-byte frame on the wire).
    #[arg(long, default_value_t = 60)]
    pub size: usize,
    /// Weights of UDP, TCP and ICMP flows, as `udp:tcp:icmp`.
    #[arg(long, default_value = "1:0:0", value_parser = parse_weights)]
    pub mix: (u32, u32, u32),
    /// Percentage of IPv6 flows.
    #[arg(long, default_value_t = 0)]
    pub ipv6_percent: u8,
    /// Percentage of 802.1Q-tagged flows.
    #[arg(long, default_value_t = 0)]
    pub vlan_percent: u8,
    /// PRNG seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn parse_weights(s: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [u, t, i] = parts.as_slice() else {
        return Err(format!("'{s}': expected udp:tcp:icmp, e.g. 2:1:0"));
    };
    let num = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|e| format!("'{x}' in '{s}': {e}"))
    };
    Ok((num(u)?, num(t)?, num(i)?))
}

/// Builds the generator configuration these arguments describe.
pub fn config(args: &Args) -> GeneratorConfig {
    GeneratorConfig {
        flows: args.flows,
        mix: ProtocolMix {
            udp: args.mix.0,
            tcp: args.mix.1,
            icmp: args.mix.2,
            ipv6_percent: args.ipv6_percent,
            vlan_percent: args.vlan_percent,
        },
        frame_size: FrameSize::Fixed(args.size),
        seed: args.seed,
        ..GeneratorConfig::default()
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let generator = GeneratorPort::new("gen", config(&args))?;
    netdev::pcap::write_pcap(&args.out, generator.frames())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "wrote {} frames to {}",
        generator.frames().len(),
        args.out.display()
    );
    Ok(())
}
