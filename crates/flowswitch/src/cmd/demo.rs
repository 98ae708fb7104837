//! `demo`: the main job on an embedded default.
//!
//! Builds a default bridge `br0` — port 1 a traffic generator (seeded mix of UDP/TCP/ICMP,
//! IPv4/IPv6, some VLAN-tagged), ports 2 and 3 null sinks — loads a default OpenFlow table
//! written in `ovs-ofctl` syntax, replays the built-in packet set through one PMD, and prints
//! what happened in the vocabulary of `ovs-appctl dpif-netdev/pmd-stats-show`.
//!
//! The path is the switch's own: rx burst → batch extract + hash → EMC → SMC → megaflow
//! classifier (dpcls) → on a miss an upcall that translates the packet through the OpenFlow
//! tables (`ofproto::xlate`) into datapath actions and a megaflow mask, installed for the
//! packets that follow → actions per flow batch → port tx bursts. Every packet is counted
//! exactly once among the hit/miss/lost counters; the demo checks that before it exits.

use anyhow::Context;
use datapath::{ActionTable, Dpcls, DpclsConfig, Pmd, PmdConfig};
use netdev::generator::{FrameSize, GeneratorConfig, GeneratorPort, Order, ProtocolMix};
use netdev::null::NullPort;
use ofproto::{Backend, Bridge};
use std::io::Write;
use std::sync::Arc;
use upcall::handler::SharedBridge;
use upcall::revalidate::{RevalidatorConfig, RevalidatorPool};

/// Upper bound of `--packets`.
pub const MAX_PACKETS: u64 = 1_000_000_000;
/// Upper bound of `--flows` (about 200 bytes of templates and flow data per flow).
pub const MAX_FLOWS: u32 = 1_000_000;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Packets to replay, exactly (1 to 1,000,000,000).
    #[arg(long, default_value_t = 5_000_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_PACKETS))]
    pub packets: u64,
    /// Distinct flows in the built-in packet set (1 to 1,000,000).
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_FLOWS)))]
    pub flows: u32,
    /// Turn the signature-match cache on (OVS default: off).
    #[arg(long)]
    pub smc: bool,
    /// Turn the exact-match cache off (OVS default: on).
    #[arg(long)]
    pub no_emc: bool,
    /// Also print the OpenFlow table, the installed megaflows and `upcall/show`.
    #[arg(long)]
    pub verbose: bool,
    /// Revalidator threads (OVS `other_config:n-revalidator-threads`; 1 to 64).
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub n_revalidator_threads: u32,
}

/// The default OpenFlow table of the demo bridge, in `ovs-ofctl add-flow` syntax.
pub const DEFAULT_FLOWS: &str = "\
priority=300,icmp,actions=drop
priority=300,icmp6,actions=drop
priority=200,in_port=1,ip,actions=output:2
priority=200,in_port=1,ipv6,actions=output:3
priority=0,actions=drop
";

/// Number of ordinary ports of the demo bridge (`p1..pN`, datapath ports 1..=N).
const N_PORTS: u16 = 3;

/// The demo bridge with the default flows.
pub fn default_bridge() -> anyhow::Result<Bridge> {
    let mut bridge = Bridge::ovs_sandbox(N_PORTS, Backend::TupleSpace);
    bridge
        .add_flows_text(DEFAULT_FLOWS, 0)
        .map_err(|e| anyhow::anyhow!("default flows: {e}"))?;
    Ok(bridge)
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    // clap enforces these; checked again before allocating, for other callers.
    anyhow::ensure!(
        (1..=MAX_PACKETS).contains(&args.packets),
        "--packets must be 1 to {MAX_PACKETS}"
    );
    anyhow::ensure!(
        (1..=MAX_FLOWS).contains(&args.flows),
        "--flows must be 1 to {MAX_FLOWS}"
    );
    let bridge = default_bridge()?;
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
    // The limit makes the last burst short: exactly `--packets` packets, not a whole burst.
    let generator = GeneratorPort::new("p1", gen_cfg)?.with_limit(args.packets);
    let cfg = PmdConfig {
        emc: !args.no_emc,
        smc: args.smc,
        ..PmdConfig::default()
    };
    let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
    let actions = Arc::new(ActionTable::new(1 << 16));
    // The control path runs beside the PMD, as in a switch: revalidator threads push stats
    // to the OpenFlow rules, expire idle megaflows and enforce the flow limit.
    let revalidators = RevalidatorPool::spawn(
        SharedBridge::new(bridge),
        dpcls.clone(),
        actions.clone(),
        RevalidatorConfig::default(),
        args.n_revalidator_threads as usize,
        std::time::Duration::from_millis(500),
    )
    .context("starting the revalidator threads")?;
    let mut pmd = Pmd::new(
        cfg,
        dpcls.clone(),
        actions.clone(),
        Box::new(revalidators.upcall()),
    );
    pmd.add_port(1, Box::new(generator), true)
        .context("adding p1")?;
    for no in 2..=u32::from(N_PORTS) {
        pmd.add_port(no, Box::new(NullPort::new(format!("p{no}"))), false)
            .with_context(|| format!("adding p{no}"))?;
    }

    let report = pmd.run_for(args.packets);
    let stats = &report.stats;
    let mut out = std::io::stdout().lock();
    if args.verbose {
        writeln!(out, "OpenFlow table 0:")?;
        for f in DEFAULT_FLOWS.lines() {
            writeln!(out, "  {f}")?;
        }
        writeln!(out, "megaflows installed: {}", dpcls.len())?;
        writeln!(out, "$ ovs-appctl dpctl/dump-flows")?;
        let flows = dpcls.flows();
        let now_ms = netdev::tsc::now() / (netdev::tsc::hz() / 1000).max(1);
        write!(
            out,
            "{}",
            datapath::dpctl::dump_flows(
                [(
                    datapath::dpctl::FlowOwner::Pmd(stats.core_id),
                    flows.iter().map(|f| &**f).collect()
                )],
                now_ms,
                &|f| datapath::dpctl::flow_actions_text(&actions, f),
                &datapath::dpctl::KeyFormat::default(),
            )
        )?;
        revalidators.wait();
        writeln!(out, "$ ovs-appctl upcall/show")?;
        write!(out, "{}", revalidators.udpif().show("netdev@ovs-netdev"))?;
        writeln!(out, "$ ovs-appctl dpif-netdev/pmd-perf-show")?;
        let mut perf = datapath::PmdPerf::from_pmd_stats(stats);
        perf.duration_s = report.elapsed.as_secs_f64();
        perf.time = "demo".into();
        write!(out, "{perf}")?;
        writeln!(out, "$ ovs-appctl dpif-netdev/pmd-stats-show")?;
    }
    writeln!(out, "{stats}")?;
    writeln!(
        out,
        "demo: {} packets in {:.3} s = {:.2} Mpps on one thread ({} flows, tsc {:.2} GHz)",
        report.packets,
        report.elapsed.as_secs_f64(),
        report.mpps(),
        args.flows,
        netdev::tsc::hz() as f64 / 1e9
    )?;
    out.flush()?;
    revalidators.stop();
    anyhow::ensure!(
        report.packets == args.packets,
        "sent {} packets, not the {} asked for",
        report.packets,
        args.packets
    );
    anyhow::ensure!(
        stats.classified() == stats.packets_received + stats.recirculations,
        "counters do not partition the packets: {} classified of {}",
        stats.classified(),
        stats.packets_received
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datapath::{DpAction, Upcall};
    use flow::FlowKey;
    use flow::extract::{PacketMeta, extract};
    use upcall::handler::OfprotoUpcall;

    #[test]
    fn default_flows_load() {
        let b = default_bridge().expect("default flows");
        assert_eq!(b.n_rules(), DEFAULT_FLOWS.lines().count());
    }

    #[test]
    fn upcall_maps_ip_to_port_2_and_icmp_to_drop() {
        let actions = ActionTable::new(16);
        let mut up = OfprotoUpcall::new(default_bridge().expect("bridge"));
        let udp = testutil::packets::udp4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53, 10);
        let mut key = FlowKey::ZERO;
        extract(&udp, &PacketMeta::port(1), &mut key);
        let (mask, id) = up.upcall(&key, &actions).expect("upcall");
        assert_eq!(actions.get(id).as_deref(), Some(&[DpAction::Output(2)][..]));
        assert!(key.eq_masked(&key, &mask));
        let icmp = testutil::packets::icmp4_echo([10, 0, 0, 1], [10, 0, 0, 2], 7, 1, true);
        extract(&icmp, &PacketMeta::port(1), &mut key);
        let (_, id) = up.upcall(&key, &actions).expect("upcall");
        assert_eq!(actions.get(id).as_deref(), Some(&[DpAction::Drop][..]));
    }
}
