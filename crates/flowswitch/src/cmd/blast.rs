//! `blast`: a fast UDP sender on a real interface.
//!
//! `flowswitch blast --port afpacket:IF|afxdp:IF --dst-mac MAC [--src-ip A] [--dst-ip B]
//! [--flows N] [--size BYTES] [--seconds S] [--rate PPS]` builds N UDP flows with the
//! synthetic generator ([`netdev::GeneratorPort`]: flow *i* from `src-ip + i`, all to
//! `dst-ip`, source MAC the interface's own plus *i*) and sends them round-robin through an
//! [`netdev::AfPacketPort`] (`sendmmsg` bursts of 32) or an [`netdev::AfXdpPort`] (the AF_XDP
//! tx ring) for S seconds, as fast as the port takes them or paced to `--rate` packets per
//! second. At the end it prints what was sent and what the port dropped (a full socket
//! buffer or tx ring), per second, on one line a script can read.
//!
//! It is the sender of `scripts/ports-side-by-side.sh`, run inside a namespace:
//! `ip netns exec ns1 taskset -c 0 flowswitch blast --port afpacket:v1 --dst-mac …`.
//! The port is opened without promiscuous mode; frames arriving on the interface meanwhile
//! are left unread.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use netdev::{
    AfPacketOptions, AfPacketPort, AfXdpOptions, AfXdpPort, Batch, FrameSize, GeneratorConfig,
    GeneratorPort, MAX_FRAME, PacketPool, Port, ProtocolMix,
};

/// The smallest frame the generator builds for IPv4 UDP (Ethernet + IPv4 + UDP headers).
const MIN_SIZE: usize = 42;

/// A `--port` value: how to reach which interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSpec {
    /// `afpacket:IF`.
    AfPacket(String),
    /// `afxdp:IF`.
    AfXdp(String),
}

impl PortSpec {
    /// The interface's name.
    pub fn ifname(&self) -> &str {
        match self {
            PortSpec::AfPacket(n) | PortSpec::AfXdp(n) => n,
        }
    }
}

impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortSpec::AfPacket(n) => write!(f, "afpacket:{n}"),
            PortSpec::AfXdp(n) => write!(f, "afxdp:{n}"),
        }
    }
}

fn parse_port(s: &str) -> Result<PortSpec, String> {
    let (kind, name) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: KIND:INTERFACE, e.g. afpacket:veth1 or afxdp:veth1"))?;
    netdev::netif::check_name(name).map_err(|e| format!("{s:?}: {e}"))?;
    match kind {
        "afpacket" => Ok(PortSpec::AfPacket(name.to_owned())),
        "afxdp" => Ok(PortSpec::AfXdp(name.to_owned())),
        other => Err(format!("port kind {other:?}: use afpacket:IF or afxdp:IF")),
    }
}

/// Parses `aa:bb:cc:dd:ee:ff` (or `-`-separated) into six bytes.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("{s:?}: a MAC address is six hex bytes, e.g. 02:00:00:00:00:02");
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (d, p) in m.iter_mut().zip(&parts) {
        if p.is_empty() || p.len() > 2 {
            return Err(bad());
        }
        *d = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

fn parse_size(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?}: a frame size in bytes"))?;
    if !(MIN_SIZE..=MAX_FRAME).contains(&n) {
        return Err(format!(
            "{n}: frame size (without FCS) must be {MIN_SIZE} to {MAX_FRAME} bytes"
        ));
    }
    Ok(n)
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?}: a number of seconds, e.g. 10 or 0.5"))?;
    if !v.is_finite() || v <= 0.0 || v > 86_400.0 {
        return Err(format!(
            "{s}: seconds must be more than 0 and at most 86400"
        ));
    }
    Ok(v)
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The interface to send on: `afpacket:IF` (TPACKET socket, `sendmmsg`) or `afxdp:IF`
    /// (AF_XDP tx ring, copy mode).
    #[arg(long, value_name = "KIND:IF", value_parser = parse_port)]
    pub port: PortSpec,
    /// Number of UDP flows (source addresses `src-ip + i`, source MACs the interface's + i).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub flows: u32,
    /// Frame size in bytes without the FCS (60 is a minimum-size Ethernet frame).
    #[arg(long, default_value = "60", value_parser = parse_size)]
    pub size: usize,
    /// How long to send.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Packets per second to offer (default: as fast as the port takes them).
    #[arg(long, value_name = "PPS", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub rate: Option<u64>,
    /// Destination MAC of every frame (the far end's).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub dst_mac: [u8; 6],
    /// Source MAC of flow 0 (default: the interface's).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub src_mac: Option<[u8; 6]>,
    /// IPv4 source of flow 0.
    #[arg(long, default_value = "10.0.0.1")]
    pub src_ip: Ipv4Addr,
    /// IPv4 destination of every flow.
    #[arg(long, default_value = "10.0.0.2")]
    pub dst_ip: Ipv4Addr,
}

/// The generator configuration `a` asks for, with `src_mac` as flow 0's source MAC.
pub fn generator_config(a: &Args, src_mac: [u8; 6]) -> GeneratorConfig {
    GeneratorConfig {
        flows: a.flows,
        mix: ProtocolMix::udp_only(),
        frame_size: FrameSize::Fixed(a.size),
        src_mac,
        dst_mac: a.dst_mac,
        ipv4_src: a.src_ip,
        ipv4_dst: a.dst_ip,
        dst_hosts: 1,
        ..GeneratorConfig::default()
    }
}

fn open(spec: &PortSpec) -> anyhow::Result<Box<dyn Port>> {
    Ok(match spec {
        PortSpec::AfPacket(n) => {
            let opts = AfPacketOptions {
                promisc: false,
                // A sender: a small receive ring is enough.
                blocks: 2,
                ..AfPacketOptions::default()
            };
            Box::new(AfPacketPort::open(n, &opts).with_context(|| format!("opening {spec}"))?)
        }
        PortSpec::AfXdp(n) => {
            let opts = AfXdpOptions {
                promiscuous: false,
                ..AfXdpOptions::default()
            };
            Box::new(AfXdpPort::open(n, &opts).with_context(|| format!("opening {spec}"))?)
        }
    })
}

/// What a run sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Seconds actually spent sending.
    pub seconds: f64,
    /// Packets the port sent.
    pub sent: u64,
    /// Packets the port dropped (socket buffer or tx ring full).
    pub dropped: u64,
    /// Bytes sent.
    pub bytes: u64,
}

/// Sends from `gen` through `port` for `duration`, paced to `rate` if given.
pub fn blast(
    gen_port: &mut GeneratorPort,
    port: &mut dyn Port,
    duration: Duration,
    rate: Option<u64>,
) -> Report {
    let mut pool = PacketPool::new(1024);
    let mut batch = Batch::new();
    let before = port.stats();
    let start = Instant::now();
    let deadline = start + duration;
    let mut offered: u64 = 0;
    let mut bursts: u32 = 0;
    loop {
        bursts = bursts.wrapping_add(1);
        // Reading the clock every burst costs ~20 ns against ~1 µs per burst; fine.
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if let Some(r) = rate {
            let due = (now - start).as_secs_f64() * r as f64;
            if (offered as f64) >= due {
                // Ahead of schedule: wait for the next packet's time (spin below 50 µs).
                let wait = (offered as f64 + 1.0 - due) / r as f64;
                if wait > 50e-6 {
                    std::thread::sleep(Duration::from_secs_f64(wait.min(0.01)));
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
        }
        gen_port.rx_burst(&mut pool, &mut batch);
        if let Some(r) = rate {
            // Offer no more than is due (a burst of at most 32).
            let due = ((now - start).as_secs_f64() * r as f64) as u64 + 1;
            let keep = due.saturating_sub(offered).min(batch.len() as u64) as usize;
            while batch.len() > keep {
                if let Some(p) = batch.pop() {
                    pool.free(p);
                }
            }
        }
        offered += batch.len() as u64;
        port.tx_burst(&mut batch, &mut pool);
        if bursts.is_multiple_of(64) {
            // Let an AF_XDP port reap completions and kick a ring left pending.
            let _ = port.flush();
        }
    }
    let _ = port.flush();
    let seconds = start.elapsed().as_secs_f64();
    let after = port.stats();
    Report {
        seconds,
        sent: after.tx_packets - before.tx_packets,
        dropped: after.tx_dropped - before.tx_dropped,
        bytes: after.tx_bytes - before.tx_bytes,
    }
}

/// Runs the sender and prints its report.
pub fn run(a: Args) -> anyhow::Result<()> {
    let ifname = a.port.ifname().to_owned();
    let src_mac = match a.src_mac {
        Some(m) => m,
        None => netdev::netif::mac(&ifname).with_context(|| format!("--port {}", a.port))?,
    };
    let mut gen_port = GeneratorPort::new("blast", generator_config(&a, src_mac))
        .context("building the frames")?;
    let mut port = open(&a.port)?;
    let r = blast(
        &mut gen_port,
        port.as_mut(),
        Duration::from_secs_f64(a.seconds),
        a.rate,
    );
    let pps = r.sent as f64 / r.seconds;
    let drop_pps = r.dropped as f64 / r.seconds;
    let offered = r.sent + r.dropped;
    println!(
        "blast {}: {} flows, {}-byte frames, {:.2} s: sent {} packets = {:.0} pps ({:.1} Mbit/s), \
         tx drops {} = {:.0} pps ({:.1} % of offered){}",
        a.port,
        a.flows,
        a.size,
        r.seconds,
        r.sent,
        pps,
        r.bytes as f64 * 8.0 / r.seconds / 1e6,
        r.dropped,
        drop_pps,
        if offered == 0 {
            0.0
        } else {
            100.0 * r.dropped as f64 / offered as f64
        },
        match a.rate {
            Some(rate) => format!(", paced to {rate} pps"),
            None => String::new(),
        }
    );
    println!("sent_pps={pps:.0} tx_drop_pps={drop_pps:.0}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        a: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, String> {
        Cli::try_parse_from(std::iter::once("blast").chain(args.iter().copied()))
            .map(|c| c.a)
            .map_err(|e| e.to_string())
    }

    const MAC: &str = "02:00:00:00:00:02";

    #[test]
    fn defaults_and_full_form() {
        let a = parse(&["--port", "afpacket:v1", "--dst-mac", MAC]).unwrap();
        assert_eq!(a.port, PortSpec::AfPacket("v1".into()));
        assert_eq!((a.flows, a.size, a.seconds, a.rate), (1, 60, 10.0, None));
        assert_eq!(a.dst_mac, [2, 0, 0, 0, 0, 2]);
        assert_eq!(a.src_mac, None);
        assert_eq!(
            (a.src_ip, a.dst_ip),
            (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
        );
        let a = parse(&[
            "--port",
            "afxdp:veth9",
            "--dst-mac",
            "0A-0b-0C-0d-0E-0f",
            "--src-mac",
            "02:00:00:00:00:01",
            "--flows",
            "1000",
            "--size",
            "1514",
            "--seconds",
            "0.5",
            "--rate",
            "100000",
            "--src-ip",
            "192.168.1.1",
            "--dst-ip",
            "192.168.1.2",
        ])
        .unwrap();
        assert_eq!(a.port, PortSpec::AfXdp("veth9".into()));
        assert_eq!(a.port.to_string(), "afxdp:veth9");
        assert_eq!(a.dst_mac, [0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f]);
        assert_eq!(
            (a.flows, a.size, a.seconds, a.rate),
            (1000, 1514, 0.5, Some(100_000))
        );
        let g = generator_config(&a, a.src_mac.unwrap());
        g.validate().unwrap();
        assert_eq!(g.ipv4_src, Ipv4Addr::new(192, 168, 1, 1));
        assert_eq!(g.dst_hosts, 1);
    }

    #[test]
    fn bad_arguments_are_clear_errors() {
        let base = ["--port", "afpacket:v1", "--dst-mac", MAC];
        for (extra, want) in [
            (&["--size", "30"][..], "42 to"),
            (&["--size", "100000"][..], "frame size"),
            (&["--size", "big"][..], "frame size in bytes"),
            (&["--seconds", "0"][..], "more than 0"),
            (&["--seconds=-1"][..], "more than 0"),
            (&["--seconds", "nan"][..], "more than 0"),
            (&["--seconds", "x"][..], "number of seconds"),
            (&["--flows", "0"][..], "flows"),
            (&["--rate", "0"][..], "rate"),
            (&["--src-ip", "10.0.0"][..], "src-ip"),
            (&["--src-mac", "02:00:00:00:00"][..], "six hex bytes"),
            (&["--src-mac", "02:00:00:00:00:0g"][..], "six hex bytes"),
            (&["--src-mac", "02:00:00:00:00:123"][..], "six hex bytes"),
        ] {
            let mut v: Vec<&str> = base.to_vec();
            v.extend_from_slice(extra);
            let e = parse(&v).unwrap_err();
            assert!(e.contains(want), "{extra:?}: {e}");
        }
        for (args, want) in [
            (&["--dst-mac", MAC][..], "--port"),
            (&["--port", "afpacket:v1"][..], "--dst-mac"),
            (&["--port", "v1", "--dst-mac", MAC][..], "KIND:INTERFACE"),
            (&["--port", "tap:v1", "--dst-mac", MAC][..], "port kind"),
            (&["--port", "afpacket:", "--dst-mac", MAC][..], "1 to 15"),
            (
                &["--port", "afxdp:much-too-long-name", "--dst-mac", MAC][..],
                "1 to 15",
            ),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn a_missing_interface_is_a_clear_error() {
        let a = parse(&["--port", "afpacket:nosuch0if", "--dst-mac", MAC]).unwrap();
        let e = run(a).unwrap_err();
        let line = format!("{e:#}");
        assert!(line.contains("nosuch0if"), "{line}");
    }

    #[test]
    fn rate_pacing_through_a_sink() {
        // The pacing loop against a sink port: about rate × seconds packets are offered.
        let a = parse(&["--port", "afpacket:v1", "--dst-mac", MAC, "--flows", "4"]).unwrap();
        let mut g = GeneratorPort::new("g", generator_config(&a, [2, 0, 0, 0, 0, 1])).unwrap();
        let mut sink = netdev::NullPort::new("null");
        let r = blast(&mut g, &mut sink, Duration::from_millis(200), Some(50_000));
        assert_eq!(r.dropped, 0);
        assert!(
            (8_000..=11_000).contains(&r.sent),
            "sent {} in {:.3} s",
            r.sent,
            r.seconds
        );
        let mut g = GeneratorPort::new("g", generator_config(&a, [2, 0, 0, 0, 0, 1])).unwrap();
        let r = blast(&mut g, &mut sink, Duration::from_millis(50), None);
        assert!(r.sent > 10_000, "unpaced sent only {}", r.sent);
    }
}
