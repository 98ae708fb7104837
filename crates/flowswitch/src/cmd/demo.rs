//! `demo`: the main job on an embedded default.
//!
//! Builds a default bridge — port 1 a traffic generator (seeded mix of UDP/TCP/ICMP,
//! IPv4/IPv6, some VLAN-tagged), ports 2 and 3 null sinks — loads a default OpenFlow table
//! written in `ovs-ofctl` syntax, replays the built-in packet set through it on one polling
//! thread, and prints what happened in the vocabulary of `ovs-appctl dpif-netdev/pmd-stats-show`.
//!
//! The forwarding path here is the foundations' one: rx burst → batch extract + hash →
//! a 1-way exact-match cache → on a miss the OpenFlow table (the linear reference classifier)
//! → actions → per-port output batches. The tiered datapath (EMC/SMC/megaflow classifier) and
//! the full pipeline (resubmit, NORMAL, conntrack) replace the cache and the table in later
//! work; the statistics keep their names, and every packet is counted exactly once among the
//! hit/miss counters.

use anyhow::Context;
use classifier::LinearClassifier;
use flow::extract::{PacketMeta, extract_hash_batch};
use flow::ofp::action::Action;
use flow::ofp::port::OfPort;
use flow::{FlowKey, WordMap};
use netdev::batch::{BATCH_MAX, Batch};
use netdev::generator::{FrameSize, GeneratorConfig, GeneratorPort, Order, ProtocolMix};
use netdev::null::NullPort;
use netdev::packet::PacketPool;
use netdev::port::Port;
use std::fmt;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Packets to replay.
    #[arg(long, default_value_t = 5_000_000)]
    pub packets: u64,
    /// Distinct flows in the built-in packet set.
    #[arg(long, default_value_t = 1000)]
    pub flows: u32,
    /// Also print the OpenFlow table and the per-port counters.
    #[arg(long)]
    pub verbose: bool,
}

/// The default OpenFlow table of the demo bridge, in `ovs-ofctl add-flow` syntax.
pub const DEFAULT_FLOWS: &[&str] = &[
    "priority=300,icmp,actions=drop",
    "priority=300,icmp6,actions=drop",
    "priority=200,in_port=1,ip,actions=output:2",
    "priority=200,in_port=1,ipv6,actions=output:3",
    "priority=0,actions=drop",
];

/// Number of ports of the demo bridge (port numbers 1..=N_PORTS).
const N_PORTS: usize = 3;

/// Exact-match cache slots (a power of two).
const CACHE_SLOTS: usize = 8192;

/// What a cached or freshly looked-up decision does with a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// Send to these bridge ports (1-based), in order.
    Output(Vec<usize>),
    /// Drop.
    Drop,
}

/// Counters in the vocabulary of `dpif-netdev/pmd-stats-show`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PmdStats {
    /// Packets received from ports.
    pub packets_received: u64,
    /// Hits in the exact-match cache.
    pub emc_hits: u64,
    /// Hits in the signature-match cache (not in this path yet: always 0).
    pub smc_hits: u64,
    /// Hits in the megaflow classifier (not in this path yet: always 0).
    pub megaflow_hits: u64,
    /// Subtable lookups made for megaflow hits.
    pub subtable_lookups: u64,
    /// Misses that the OpenFlow table answered.
    pub upcall_ok: u64,
    /// Misses the slow path could not answer (none in this path yet: always 0).
    pub upcall_failed: u64,
    /// Packets lost before classification (e.g. no buffer).
    pub lost: u64,
    /// Packets sent, and the number of output batches they went in.
    pub tx_packets: u64,
    /// Output batches.
    pub tx_batches: u64,
    /// Cycles spent polling with nothing received.
    pub idle_cycles: u64,
    /// Cycles spent processing packets.
    pub processing_cycles: u64,
}

impl PmdStats {
    /// Every received packet is counted exactly once among these.
    pub fn classified(&self) -> u64 {
        self.emc_hits
            + self.smc_hits
            + self.megaflow_hits
            + self.upcall_ok
            + self.upcall_failed
            + self.lost
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl fmt::Display for PmdStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.idle_cycles + self.processing_cycles;
        writeln!(f, "pmd thread numa_id 0 core_id 0:")?;
        writeln!(f, "  packets received: {}", self.packets_received)?;
        writeln!(f, "  packet recirculations: 0")?;
        writeln!(
            f,
            "  avg. datapath passes per packet: {:.2}",
            if self.packets_received > 0 { 1.0 } else { 0.0 }
        )?;
        writeln!(f, "  emc hits: {}", self.emc_hits)?;
        writeln!(f, "  smc hits: {}", self.smc_hits)?;
        writeln!(f, "  megaflow hits: {}", self.megaflow_hits)?;
        writeln!(
            f,
            "  avg. subtable lookups per megaflow hit: {:.2}",
            ratio(self.subtable_lookups, self.megaflow_hits)
        )?;
        writeln!(f, "  miss with success upcall: {}", self.upcall_ok)?;
        writeln!(f, "  miss with failed upcall: {}", self.upcall_failed)?;
        writeln!(f, "  lost: {}", self.lost)?;
        writeln!(
            f,
            "  avg. packets per output batch: {:.2}",
            ratio(self.tx_packets, self.tx_batches)
        )?;
        writeln!(
            f,
            "  idle cycles: {} ({:.2}%)",
            self.idle_cycles,
            100.0 * ratio(self.idle_cycles, total)
        )?;
        writeln!(
            f,
            "  processing cycles: {} ({:.2}%)",
            self.processing_cycles,
            100.0 * ratio(self.processing_cycles, total)
        )?;
        writeln!(
            f,
            "  avg cycles per packet: {:.2} ({}/{})",
            ratio(total, self.packets_received),
            total,
            self.packets_received
        )?;
        write!(
            f,
            "  avg processing cycles per packet: {:.2} ({}/{})",
            ratio(self.processing_cycles, self.packets_received),
            self.processing_cycles,
            self.packets_received
        )
    }
}

/// The demo bridge: one OpenFlow table, an exact-match cache in front of it.
#[derive(Debug)]
pub struct DemoBridge {
    table: LinearClassifier<Decision>,
    cache: Vec<Option<(FlowKey, u32)>>,
    decisions: Vec<Decision>,
}

impl DemoBridge {
    /// Builds the bridge from flows in `ovs-ofctl` syntax (table 0 only).
    pub fn new(flows: &[&str]) -> anyhow::Result<Self> {
        let mut table = LinearClassifier::new();
        for text in flows {
            let spec =
                flow::text::parse_flow(text).map_err(|e| anyhow::anyhow!("flow '{text}': {e}"))?;
            if spec.table.unwrap_or(0) != 0 {
                anyhow::bail!("flow '{text}': the demo bridge has only table 0");
            }
            let decision = decide(&spec.actions).with_context(|| format!("flow '{text}'"))?;
            table.insert(
                u32::from(spec.priority),
                &spec.match_.key,
                &spec.match_.mask,
                decision,
            );
        }
        Ok(DemoBridge {
            table,
            cache: vec![None; CACHE_SLOTS],
            decisions: Vec::new(),
        })
    }

    /// The decision for a packet: from the cache, else from the table (then cached).
    fn classify(&mut self, key: &FlowKey, hash: u32, stats: &mut PmdStats) -> u32 {
        let slot = hash as usize & (CACHE_SLOTS - 1);
        if let Some((k, d)) = &self.cache[slot]
            && k == key
        {
            stats.emc_hits += 1;
            return *d;
        }
        let decision = match self.table.lookup(key) {
            Some(rule) => rule.value.clone(),
            None => Decision::Drop, // table miss = drop
        };
        stats.upcall_ok += 1;
        let id = match self.decisions.iter().position(|d| *d == decision) {
            Some(i) => i as u32,
            None => {
                self.decisions.push(decision);
                (self.decisions.len() - 1) as u32
            }
        };
        self.cache[slot] = Some((*key, id));
        id
    }
}

/// Turns an action list into a decision; actions beyond plain output/drop are refused.
fn decide(actions: &[Action]) -> anyhow::Result<Decision> {
    let mut ports = Vec::new();
    for a in actions {
        match a {
            Action::Output { port, .. } if (1..=N_PORTS as u16).contains(&port.0) => {
                ports.push(usize::from(port.0))
            }
            Action::Output { port, .. } if *port == OfPort::IN_PORT => ports.push(1),
            other => anyhow::bail!(
                "the demo bridge supports output to ports 1..={N_PORTS} and drop, not {other:?}"
            ),
        }
    }
    Ok(if ports.is_empty() {
        Decision::Drop
    } else {
        Decision::Output(ports)
    })
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut bridge = DemoBridge::new(DEFAULT_FLOWS)?;
    let gen_cfg = GeneratorConfig {
        flows: args.flows,
        mix: ProtocolMix {
            udp: 6,
            tcp: 3,
            icmp: 1,
            ipv6_percent: 25,
            vlan_percent: 10,
        },
        frame_size: FrameSize::Fixed(60),
        seed: 0x5eed,
        order: Order::Random,
        ..GeneratorConfig::default()
    };
    let mut rx = GeneratorPort::new("p1", gen_cfg)?.with_limit(args.packets);
    let mut sinks = [NullPort::new("p2"), NullPort::new("p3")];
    let mut pool = PacketPool::new(4 * BATCH_MAX * (N_PORTS + 1));
    let mut batch = Batch::new();
    let mut out: Vec<Batch> = (0..N_PORTS).map(|_| Batch::new()).collect();
    let mut stats = PmdStats::default();

    let metas = [PacketMeta::port(1); BATCH_MAX];
    let mut keys = [FlowKey::ZERO; BATCH_MAX];
    let mut maps = [WordMap::EMPTY; BATCH_MAX];
    let mut hashes = [0u32; BATCH_MAX];
    let started = std::time::Instant::now();

    loop {
        let t0 = netdev::tsc::now();
        let n = rx.rx_burst(&mut pool, &mut batch);
        if n == 0 {
            stats.idle_cycles += netdev::tsc::now().wrapping_sub(t0);
            if rx.rx_eof() || rx.stats().rx_packets + rx.stats().rx_dropped >= args.packets {
                break;
            }
            continue;
        }
        stats.packets_received += n as u64;
        let pkts = batch.as_slice();
        let data: [&[u8]; BATCH_MAX] =
            core::array::from_fn(|i| pkts.get(i).map_or(&[][..], |p| p.data()));
        extract_hash_batch(
            &data[..n],
            &metas[..n],
            &mut keys[..n],
            &mut maps[..n],
            &mut hashes[..n],
            0,
        );
        let mut ids = [0u32; BATCH_MAX];
        for i in 0..n {
            ids[i] = bridge.classify(&keys[i], hashes[i], &mut stats);
        }
        for (i, pkt) in batch.drain().enumerate() {
            match bridge.decisions.get(ids[i] as usize) {
                Some(Decision::Output(ports)) if ports.len() == 1 => {
                    let q = &mut out[ports[0] - 1];
                    if let Err(p) = q.push(pkt) {
                        pool.free(p);
                    }
                }
                Some(Decision::Output(ports)) => {
                    // One copy per port; each output batch takes at most one rx batch, so a
                    // push cannot overflow, and a failed copy (no buffer) is a port tx drop.
                    for &port in ports {
                        if let Some(mut copy) = pool.alloc() {
                            match copy.set_data(pkt.data()) {
                                Ok(()) => {
                                    if let Err(p) = out[port - 1].push(copy) {
                                        pool.free(p);
                                    }
                                }
                                Err(_) => pool.free(copy),
                            }
                        }
                    }
                    pool.free(pkt);
                }
                _ => pool.free(pkt),
            }
        }
        for (port, q) in out.iter_mut().enumerate() {
            if q.is_empty() {
                continue;
            }
            stats.tx_packets += q.len() as u64;
            stats.tx_batches += 1;
            match port {
                0 => {
                    rx.tx_burst(q, &mut pool);
                }
                p => {
                    sinks[p - 1].tx_burst(q, &mut pool);
                }
            }
        }
        stats.processing_cycles += netdev::tsc::now().wrapping_sub(t0);
    }
    let secs = started.elapsed().as_secs_f64();

    let rx_stats = rx.stats();
    stats.lost = rx_stats.rx_dropped;
    stats.packets_received += rx_stats.rx_dropped;
    if args.verbose {
        println!("OpenFlow table 0:");
        for f in DEFAULT_FLOWS {
            println!("  {f}");
        }
        for p in &sinks {
            let s = p.stats();
            println!(
                "port {}: tx packets {} bytes {}",
                p.name(),
                s.tx_packets,
                s.tx_bytes
            );
        }
    }
    println!("{stats}");
    println!(
        "demo: {} packets in {:.3} s = {:.2} Mpps on one thread ({} flows, tsc {:.2} GHz)",
        stats.packets_received,
        secs,
        stats.packets_received as f64 / secs / 1e6,
        args.flows,
        netdev::tsc::hz() as f64 / 1e9
    );
    anyhow::ensure!(
        stats.classified() == stats.packets_received,
        "counters do not partition the packets: {} classified of {}",
        stats.classified(),
        stats.packets_received
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_flows_parse_and_decide() {
        let b = DemoBridge::new(DEFAULT_FLOWS).expect("default flows");
        assert_eq!(b.table.len(), DEFAULT_FLOWS.len());
    }

    #[test]
    fn unsupported_actions_are_refused() {
        assert!(DemoBridge::new(&["actions=resubmit(,1)"]).is_err());
        assert!(DemoBridge::new(&["table=1,actions=drop"]).is_err());
        assert!(DemoBridge::new(&["actions=output:9"]).is_err());
    }
}
