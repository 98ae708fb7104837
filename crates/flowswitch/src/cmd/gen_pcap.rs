//! `gen-pcap`: write the synthetic generator's frames (one per flow) to a pcap file.
//!
//! The same generator feeds `demo` and the benchmarks, so a pcap written here replays the
//! exact traffic those use, in flowswitch or in any other tool.

use netdev::MAX_FRAME;
use netdev::generator::{FrameSize, GeneratorConfig, GeneratorPort, ProtocolMix};
use std::io::Write;
use std::path::PathBuf;

/// Upper bound of `--flows`.
pub const MAX_FLOWS: u32 = 1_000_000;
/// Smallest `--size`: a minimum Ethernet frame (64 bytes on the wire) without its FCS.
pub const MIN_SIZE: usize = 60;
/// Upper bound of `--flows` × `--size`: the frames are built in memory before writing.
pub const MAX_TOTAL_BYTES: u64 = 1 << 30;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output pcap file.
    pub out: PathBuf,
    /// Number of distinct flows, one frame each (1 to 1,000,000; flows × size at most 1 GiB).
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_FLOWS)))]
    pub flows: u32,
    /// Frame size in bytes without FCS, 60 (a 64-byte frame on the wire) to 1920. A frame
    /// whose headers need more (IPv6, VLAN, TCP) is as long as its headers, and the command
    /// says how many were.
    #[arg(long, default_value_t = 60,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(MIN_SIZE as u64..=MAX_FRAME as u64))]
    pub size: usize,
    /// Weights of UDP, TCP and ICMP flows, as `udp:tcp:icmp`.
    #[arg(long, default_value = "1:0:0", value_parser = parse_weights)]
    pub mix: (u32, u32, u32),
    /// Percentage of IPv6 flows (0 to 100).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub ipv6_percent: u8,
    /// Percentage of 802.1Q-tagged flows (0 to 100).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
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

/// Refuses sizes out of their documented bounds, before anything is allocated (clap checks
/// each option alone; this also holds for other callers and checks the product).
pub fn check(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_FLOWS).contains(&args.flows),
        "--flows {}: must be 1 to {MAX_FLOWS}",
        args.flows
    );
    anyhow::ensure!(
        (MIN_SIZE..=MAX_FRAME).contains(&args.size),
        "--size {}: must be {MIN_SIZE} to {MAX_FRAME} bytes",
        args.size
    );
    let total = u64::from(args.flows) * args.size as u64;
    anyhow::ensure!(
        total <= MAX_TOTAL_BYTES,
        "--flows {} × --size {} = {total} bytes of frames: at most {MAX_TOTAL_BYTES} (1 GiB)",
        args.flows,
        args.size
    );
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    check(&args)?;
    let generator = GeneratorPort::new("gen", config(&args))?;
    // The error names the file.
    netdev::pcap::write_pcap(&args.out, generator.frames())?;
    let longer: Vec<usize> = generator
        .frames()
        .map(<[u8]>::len)
        .filter(|&l| l > args.size)
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "wrote {} frames to {}",
        generator.frames().len(),
        args.out.display()
    )?;
    if let Some(max) = longer.iter().max() {
        writeln!(
            out,
            "note: {} of them are longer than --size {} (up to {max} bytes): their headers \
             need it",
            longer.len(),
            args.size
        )?;
    }
    out.flush()?;
    Ok(())
}
