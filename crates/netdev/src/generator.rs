//! Synthetic traffic: a port that generates frames for N flows.
//!
//! At creation, [`GeneratorPort::new`] draws N flow specifications from a seeded PRNG
//! (SplitMix64, so the output depends only on the [`GeneratorConfig`], on every platform) and
//! builds one complete template frame per flow, with valid IPv4 header and L4 checksums
//! (UDP, TCP, ICMPv4 echo request, ICMPv6 echo request). On rx it copies templates into pool
//! buffers exactly as [`ReplayPort`](crate::ReplayPort) does: one memcpy per packet, nothing
//! allocated, in round-robin or seeded random order.
//!
//! Flows are distinct by construction: flow *i* has source address `base + i` (IPv4 or IPv6
//! base by family, wrapping), so N flows have N distinct 5-tuples. Destinations are
//! `dst_base + (i % dst_hosts)`. Protocol, address family, VLAN tag, ports and frame size of
//! each flow are drawn from the configured mix.
//!
//! Frame sizes count the bytes of the frame without the FCS (a "64-byte" frame on the wire is
//! 60 bytes here). A flow whose headers are longer than its drawn size gets a frame exactly
//! as long as its headers. Sizes above [`MAX_FRAME`] are refused at creation.
//!
//! TCP frames carry PSH|ACK (mid-connection data); ICMP frames are echo requests whose
//! identifier is the low 16 bits of the flow index. Transmitted packets are discarded and
//! counted as sent.

use crate::batch::Batch;
use crate::packet::{MAX_FRAME, PacketPool};
use crate::pcap::sink_tx;
use crate::port::{Port, PortError, PortStats, RxCopy, rx_copy};
use crate::replay::FrameSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::checksum;

/// Deterministic PRNG (SplitMix64). Not for cryptography.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough value in `0..n` (`n > 0`; multiply-shift, no modulo bias to speak of).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `percent`/100.
    fn percent(&mut self, percent: u8) -> bool {
        self.below(100) < u64::from(percent)
    }
}

/// Relative weights of the L4 protocols, and shares of IPv6 and VLAN-tagged flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolMix {
    /// Weight of UDP flows.
    pub udp: u32,
    /// Weight of TCP flows.
    pub tcp: u32,
    /// Weight of ICMP (echo request) flows; ICMPv6 for IPv6 flows.
    pub icmp: u32,
    /// Percentage (0..=100) of flows that are IPv6.
    pub ipv6_percent: u8,
    /// Percentage (0..=100) of flows carrying one 802.1Q tag.
    pub vlan_percent: u8,
}

impl ProtocolMix {
    /// IPv4 UDP only, untagged (the classic forwarding benchmark).
    pub const fn udp_only() -> Self {
        ProtocolMix {
            udp: 1,
            tcp: 0,
            icmp: 0,
            ipv6_percent: 0,
            vlan_percent: 0,
        }
    }

    /// A bit of everything: 60 % UDP, 30 % TCP, 10 % ICMP; 25 % IPv6; 20 % VLAN-tagged.
    pub const fn mixed() -> Self {
        ProtocolMix {
            udp: 60,
            tcp: 30,
            icmp: 10,
            ipv6_percent: 25,
            vlan_percent: 20,
        }
    }
}

impl Default for ProtocolMix {
    fn default() -> Self {
        Self::udp_only()
    }
}

/// Frame size of each flow (bytes without FCS; see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameSize {
    /// Every frame this long.
    Fixed(usize),
    /// Each flow draws a size uniformly from `min..=max`.
    Range {
        /// Smallest size.
        min: usize,
        /// Largest size.
        max: usize,
    },
    /// Simple IMIX: each flow draws 60, 590 or 1514 bytes with weights 7:4:1.
    Imix,
}

/// Order in which rx emits the flows' frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Flow 0, 1, …, N-1, 0, 1, …
    #[default]
    RoundRobin,
    /// Each packet from a flow drawn uniformly with the seeded PRNG.
    Random,
}

/// Configuration of a [`GeneratorPort`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// Number of flows (≥ 1).
    pub flows: u32,
    /// Protocol mix.
    pub mix: ProtocolMix,
    /// Frame sizes.
    pub frame_size: FrameSize,
    /// PRNG seed; the same config gives the same frames and order.
    pub seed: u64,
    /// Rx order.
    pub order: Order,
    /// Source MAC of flow 0; flow *i* adds *i* to its low 24 bits.
    pub src_mac: [u8; 6],
    /// Destination MAC of every frame.
    pub dst_mac: [u8; 6],
    /// IPv4 source of flow 0 (flow *i*: `+ i`).
    pub ipv4_src: Ipv4Addr,
    /// IPv4 destination base.
    pub ipv4_dst: Ipv4Addr,
    /// IPv6 source of flow 0 (flow *i*: `+ i`).
    pub ipv6_src: Ipv6Addr,
    /// IPv6 destination base.
    pub ipv6_dst: Ipv6Addr,
    /// Number of distinct destination addresses (≥ 1): flow *i* goes to `dst + i % dst_hosts`.
    pub dst_hosts: u32,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            flows: 1,
            mix: ProtocolMix::default(),
            frame_size: FrameSize::Fixed(60),
            seed: 0,
            order: Order::RoundRobin,
            src_mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
            dst_mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0xFE],
            ipv4_src: Ipv4Addr::new(10, 0, 0, 0),
            ipv4_dst: Ipv4Addr::new(10, 128, 0, 0),
            ipv6_src: Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 0),
            ipv6_dst: Ipv6Addr::new(0xfd00, 0, 0, 2, 0, 0, 0, 0),
            dst_hosts: 256,
        }
    }
}

impl GeneratorConfig {
    /// Checks the configuration, naming the first problem.
    pub fn validate(&self) -> Result<(), PortError> {
        let bad = |m: String| Err(PortError::Config(m));
        if self.flows == 0 {
            return bad("generator needs at least 1 flow".into());
        }
        if self.dst_hosts == 0 {
            return bad("generator needs at least 1 destination host".into());
        }
        let m = &self.mix;
        if u64::from(m.udp) + u64::from(m.tcp) + u64::from(m.icmp) == 0 {
            return bad("protocol mix has no weight (udp, tcp and icmp are all 0)".into());
        }
        if m.ipv6_percent > 100 || m.vlan_percent > 100 {
            return bad(format!(
                "percentages must be 0..=100 (ipv6 {}, vlan {})",
                m.ipv6_percent, m.vlan_percent
            ));
        }
        match self.frame_size {
            FrameSize::Fixed(n) if n > MAX_FRAME => {
                bad(format!("frame size {n} exceeds the maximum {MAX_FRAME}"))
            }
            FrameSize::Range { min, max } if min > max => {
                bad(format!("frame size range {min}..={max} is empty"))
            }
            FrameSize::Range { max, .. } if max > MAX_FRAME => {
                bad(format!("frame size {max} exceeds the maximum {MAX_FRAME}"))
            }
            _ => Ok(()),
        }
    }
}

/// Layer-4 part of a generated flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Spec {
    /// UDP ports.
    Udp {
        /// Source port.
        src: u16,
        /// Destination port.
        dst: u16,
    },
    /// TCP ports.
    Tcp {
        /// Source port.
        src: u16,
        /// Destination port.
        dst: u16,
    },
    /// ICMP (v4 or v6, by the flow's family) echo request.
    IcmpEcho {
        /// Echo identifier.
        id: u16,
    },
}

/// The specification of one generated flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowSpec {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// 802.1Q VLAN id, if tagged (PCP 0).
    pub vlan: Option<u16>,
    /// Source address (family decides IPv4 or IPv6).
    pub src: IpAddr,
    /// Destination address (same family as `src`).
    pub dst: IpAddr,
    /// Layer 4.
    pub l4: L4Spec,
    /// Requested frame length (the frame is longer if its headers need it).
    pub frame_len: usize,
}

const UDP_DPORTS: [u16; 6] = [53, 80, 123, 443, 4789, 8080];
const TCP_DPORTS: [u16; 5] = [22, 80, 443, 3306, 8080];

fn draw_flow(cfg: &GeneratorConfig, i: u32, rng: &mut SplitMix64) -> FlowSpec {
    let m = &cfg.mix;
    let total = u64::from(m.udp) + u64::from(m.tcp) + u64::from(m.icmp);
    let pick = rng.below(total);
    let v6 = rng.percent(m.ipv6_percent);
    let vlan = rng
        .percent(m.vlan_percent)
        .then(|| 1 + rng.below(4094) as u16);
    let sport = 1024 + rng.below(64_512) as u16;
    let l4 = if pick < u64::from(m.udp) {
        L4Spec::Udp {
            src: sport,
            dst: UDP_DPORTS[rng.below(UDP_DPORTS.len() as u64) as usize],
        }
    } else if pick < u64::from(m.udp) + u64::from(m.tcp) {
        L4Spec::Tcp {
            src: sport,
            dst: TCP_DPORTS[rng.below(TCP_DPORTS.len() as u64) as usize],
        }
    } else {
        L4Spec::IcmpEcho { id: i as u16 }
    };
    let frame_len = match cfg.frame_size {
        FrameSize::Fixed(n) => n,
        FrameSize::Range { min, max } => min + rng.below((max - min) as u64 + 1) as usize,
        FrameSize::Imix => match rng.below(12) {
            0..=6 => 60,
            7..=10 => 590,
            _ => 1514,
        },
    };
    let host = i % cfg.dst_hosts;
    let (src, dst) = if v6 {
        let s = u128::from(cfg.ipv6_src).wrapping_add(u128::from(i));
        let d = u128::from(cfg.ipv6_dst).wrapping_add(u128::from(host));
        (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d)))
    } else {
        let s = u32::from(cfg.ipv4_src).wrapping_add(i);
        let d = u32::from(cfg.ipv4_dst).wrapping_add(host);
        (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(d)))
    };
    let mut src_mac = cfg.src_mac;
    let low = u32::from_be_bytes([0, src_mac[3], src_mac[4], src_mac[5]]).wrapping_add(i);
    src_mac[3..6].copy_from_slice(&low.to_be_bytes()[1..4]);
    FlowSpec {
        src_mac,
        dst_mac: cfg.dst_mac,
        vlan,
        src,
        dst,
        l4,
        frame_len,
    }
}

/// Builds the frame of `flow` (setup time only; allocates). `src` and `dst` have the same
/// family (as [`draw_flow`] makes them).
pub(crate) fn build_frame(flow: &FlowSpec, index: u32) -> Vec<u8> {
    let (proto, l4_hdr_len) = match (flow.l4, flow.src) {
        (L4Spec::Udp { .. }, _) => (17u8, 8usize),
        (L4Spec::Tcp { .. }, _) => (6, 20),
        (L4Spec::IcmpEcho { .. }, IpAddr::V4(_)) => (1, 8),
        (L4Spec::IcmpEcho { .. }, IpAddr::V6(_)) => (58, 8),
    };
    let l2_len = 14 + if flow.vlan.is_some() { 4 } else { 0 };
    let l3_len = if flow.src.is_ipv4() { 20 } else { 40 };
    let hdrs = l2_len + l3_len + l4_hdr_len;
    let total = flow.frame_len.max(hdrs);
    let l4_len = total - l2_len - l3_len; // L4 header + payload

    let mut f = Vec::with_capacity(total);
    f.extend_from_slice(&flow.dst_mac);
    f.extend_from_slice(&flow.src_mac);
    if let Some(vid) = flow.vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&(vid & 0x0FFF).to_be_bytes());
    }
    // Pseudo-header sum for the L4 checksum.
    let pseudo = match (flow.src, flow.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00]);
            let ip_start = f.len();
            f.push(0x45);
            f.push(0);
            f.extend_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            f.extend_from_slice(&(index as u16).to_be_bytes()); // identification
            f.extend_from_slice(&[0x40, 0x00]); // DF, offset 0
            f.push(64);
            f.push(proto);
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
            let ck = checksum::ipv4_header_checksum(&f[ip_start..]);
            f[ip_start + 10..ip_start + 12].copy_from_slice(&ck.to_be_bytes());
            if proto == 1 {
                0 // ICMPv4 has no pseudo-header
            } else {
                checksum::pseudo_header_v4(s, d, proto, l4_len as u16)
            }
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xDD]);
            let label = index & 0x000F_FFFF;
            f.extend_from_slice(&(0x6000_0000u32 | label).to_be_bytes());
            f.extend_from_slice(&(l4_len as u16).to_be_bytes());
            f.push(proto);
            f.push(64);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
            checksum::pseudo_header_v6(s, d, proto, l4_len as u32)
        }
        // FlowSpec from draw_flow never mixes families; treat a hand-made mix as IPv4-less L2.
        _ => 0,
    };
    let l4_start = f.len();
    let ck_off = match flow.l4 {
        L4Spec::Udp { src, dst } => {
            f.extend_from_slice(&src.to_be_bytes());
            f.extend_from_slice(&dst.to_be_bytes());
            f.extend_from_slice(&(l4_len as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
            6
        }
        L4Spec::Tcp { src, dst } => {
            f.extend_from_slice(&src.to_be_bytes());
            f.extend_from_slice(&dst.to_be_bytes());
            f.extend_from_slice(&index.wrapping_mul(2_654_435_761).to_be_bytes()); // seq
            f.extend_from_slice(&1u32.to_be_bytes()); // ack
            f.push(5 << 4); // data offset 5 words
            f.push(0x18); // PSH|ACK
            f.extend_from_slice(&0xFFFFu16.to_be_bytes()); // window
            f.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
            16
        }
        L4Spec::IcmpEcho { id } => {
            f.push(if proto == 1 { 8 } else { 128 });
            f.push(0);
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&id.to_be_bytes());
            f.extend_from_slice(&0u16.to_be_bytes()); // sequence
            2
        }
    };
    let payload = total - f.len();
    f.extend((0..payload).map(|j| (j as u8) ^ (index as u8)));
    let mut ck = !checksum::combine(&[pseudo, checksum::sum(&f[l4_start..])]);
    if proto == 17 && ck == 0 {
        ck = 0xFFFF; // UDP: 0 means "no checksum"
    }
    f[l4_start + ck_off..l4_start + ck_off + 2].copy_from_slice(&ck.to_be_bytes());
    f
}

/// A port producing synthetic traffic. See the module doc.
#[derive(Debug)]
pub struct GeneratorPort {
    name: String,
    config: GeneratorConfig,
    flows: Vec<FlowSpec>,
    frames: FrameSet,
    rng: SplitMix64,
    next: usize,
    taken: u64,
    limit: Option<u64>,
    stats: PortStats,
}

impl GeneratorPort {
    /// Validates `config` and builds the flow templates.
    pub fn new(name: impl Into<String>, config: GeneratorConfig) -> Result<Self, PortError> {
        config.validate()?;
        let mut rng = SplitMix64(config.seed);
        let flows: Vec<FlowSpec> = (0..config.flows)
            .map(|i| draw_flow(&config, i, &mut rng))
            .collect();
        let frames: FrameSet = flows
            .iter()
            .zip(0u32..)
            .map(|(f, i)| build_frame(f, i))
            .collect();
        // A separate stream for the rx order, so the templates do not depend on it.
        let order_rng = SplitMix64(config.seed ^ 0x6F72_6465_725F_7267);
        Ok(GeneratorPort {
            name: name.into(),
            config,
            flows,
            frames,
            rng: order_rng,
            next: 0,
            taken: 0,
            limit: None,
            stats: PortStats::default(),
        })
    }

    /// Stops after `n` packets in total (then EOF).
    pub fn with_limit(mut self, n: u64) -> Self {
        self.limit = Some(n);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &GeneratorConfig {
        &self.config
    }

    /// The flow specifications, flow *i* at index *i*.
    pub fn flows(&self) -> &[FlowSpec] {
        &self.flows
    }

    /// The template frames, flow *i* at position *i*.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.frames.iter()
    }

    /// The template frames as a set (e.g. to build a [`ReplayPort`](crate::ReplayPort)).
    pub fn frame_set(&self) -> &FrameSet {
        &self.frames
    }
}

impl Port for GeneratorPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let count = self.frames.len();
        let mut want = batch.room() as u64;
        if let Some(limit) = self.limit {
            want = want.min(limit.saturating_sub(self.taken));
        }
        let mut n = 0;
        for _ in 0..want {
            let i = match self.config.order {
                Order::RoundRobin => {
                    if self.next >= count {
                        self.next = 0;
                        self.stats.rx_wraps += 1;
                    }
                    self.next += 1;
                    self.next - 1
                }
                Order::Random => self.rng.below(count as u64) as usize,
            };
            self.taken += 1;
            let Some(frame) = self.frames.get(i) else {
                break;
            };
            match rx_copy(frame, pool, batch, &mut self.stats) {
                RxCopy::Delivered => n += 1,
                RxCopy::TooLarge => {}
                RxCopy::NoBuf => break,
            }
        }
        n
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        sink_tx(batch, pool, &mut self.stats)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn rx_eof(&self) -> bool {
        self.limit.is_some_and(|l| self.taken >= l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prng_is_stable() {
        // SplitMix64 reference values for seed 0 (from the published algorithm).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut r = SplitMix64(7);
        for _ in 0..1000 {
            assert!(r.below(3) < 3);
        }
    }

    #[test]
    fn validate_rejects_bad_configs() {
        let ok = GeneratorConfig::default();
        assert!(ok.validate().is_ok());
        let cases = [
            GeneratorConfig {
                flows: 0,
                ..ok.clone()
            },
            GeneratorConfig {
                dst_hosts: 0,
                ..ok.clone()
            },
            GeneratorConfig {
                mix: ProtocolMix {
                    udp: 0,
                    ..ProtocolMix::udp_only()
                },
                ..ok.clone()
            },
            GeneratorConfig {
                mix: ProtocolMix {
                    ipv6_percent: 101,
                    ..ProtocolMix::udp_only()
                },
                ..ok.clone()
            },
            GeneratorConfig {
                frame_size: FrameSize::Fixed(MAX_FRAME + 1),
                ..ok.clone()
            },
            GeneratorConfig {
                frame_size: FrameSize::Range { min: 100, max: 99 },
                ..ok.clone()
            },
            GeneratorConfig {
                frame_size: FrameSize::Range { min: 60, max: 5000 },
                ..ok.clone()
            },
        ];
        for c in cases {
            let e = GeneratorPort::new("g", c.clone()).unwrap_err();
            assert!(matches!(e, PortError::Config(_)), "{c:?}: {e}");
        }
    }

    #[test]
    fn sizes_follow_config() {
        let cfg = GeneratorConfig {
            flows: 200,
            mix: ProtocolMix::mixed(),
            frame_size: FrameSize::Range { min: 60, max: 1514 },
            seed: 3,
            ..GeneratorConfig::default()
        };
        let g = GeneratorPort::new("g", cfg).unwrap();
        for (f, spec) in g.frames().zip(g.flows()) {
            assert!((60..=1514).contains(&spec.frame_len));
            // 78 = Ethernet + VLAN + IPv6 + TCP, the longest header stack generated
            assert!(
                f.len() == spec.frame_len || (spec.frame_len < f.len() && f.len() <= 78),
                "{} vs {}",
                f.len(),
                spec.frame_len
            );
        }
        let fixed = GeneratorPort::new(
            "g",
            GeneratorConfig {
                flows: 10,
                frame_size: FrameSize::Fixed(128),
                ..GeneratorConfig::default()
            },
        )
        .unwrap();
        assert!(fixed.frames().all(|f| f.len() == 128));
    }
}
