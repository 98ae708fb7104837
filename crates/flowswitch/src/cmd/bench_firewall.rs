//! `bench firewall`: seed 002's stateful firewall against plain forwarding, on one pinned
//! PMD, interleaved in one run — flowswitch's side of `../shared/ovs-bench/firewall`.
//!
//! ```text
//!  ReplayPort "p1" (forward frames, forever) ─┐                 ┌→ p2 (tx: freed)
//!                                             ├→ one Pmd pinned ┤
//!  ReplayPort "p2" (reverse frames, forever) ─┘  to --core      └→ p1 (tx: freed)
//! ```
//!
//! The traffic is that of `gen_pcap_bidir.py` (UDP) and `gen_pcap_tcp.py` (TCP), built in
//! memory frame for frame ([`udp_frame`], [`tcp_frames`]): N connections
//! `10.0.0.1:sport → 10.0.0.2:dport`, 60-byte frames, one packet per tuple per direction.
//! The firewall is `flows-firewall.txt` ([`FIREWALL_FLOWS`]), plain forwarding
//! `flows-plain.txt` ([`PLAIN_FLOWS`]).
//!
//! One run:
//! 1. **Setup** on a fresh connection table: a setup PMD (its own classifier, the same
//!    table) replays each connection's opening packets once — UDP: the forward packet
//!    (`+new`, committed); TCP: the SYN (committed) and the SYN|ACK (`+est+rpl`) — and the
//!    time it takes gives `setup_per_s` (connections per second, upcalls for the first
//!    packets included). The table must then hold exactly N connections.
//! 2. **Steady state**, `--reps` times: the firewall (the same table, now established: the
//!    TCP frames are the handshake's third segment, retransmitted, and duplicate ACKs, so
//!    every packet passes the full window check) and plain forwarding, alternated rep by
//!    rep, each on a PMD thread pinned to `--core`: warm up, clear the counters, run
//!    `--seconds`, read. Mpps counts the packets received from both ports (OVS's
//!    `packets received`; a firewall packet takes two datapath passes).
//! 3. Checks: every measured packet was forwarded (tx = rx within one burst per port at the
//!    window's edges), the counters partition the passes, no connection was added or lost.
//!
//! The last line: `proto=P conns=N fw_Mpps=X plain_Mpps=Y ratio=Z setup_per_s=W
//! bytes_per_conn=B` (medians over the reps; `bytes_per_conn` is the resident-memory growth
//! of the setup divided by N when N ≥ 100k, the tracker's own estimate below that).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use conntrack::{Config, Conntrack};
use datapath::{Pmd, PmdConfig, PmdStats, PmdThread, PmdThreadConfig};
use netdev::Port;
pub use netdev::conn_frames::{tcp_frames, udp_frame};
use netdev::replay::{FrameSet, ReplayPort};
use ofproto::{Backend, Bridge};

use super::bench::{PyRandom, pmd_over_bridge};
use upcall::ct_adapter::CtAdapter;
use upcall::revalidate::RevalidatorPool;

/// Seed 002's firewall (`../shared/ovs-bench/firewall/flows-firewall.txt`, ports 1 and 2).
pub const FIREWALL_FLOWS: &str = "\
table=0, priority=1 actions=drop
table=0, priority=10,arp actions=NORMAL
table=0, priority=100,ct_state=-trk,ip actions=ct(table=1)
table=1, ct_state=+new+trk,ip,in_port=1 actions=ct(commit),output:2
table=1, ct_state=+new+trk,ip,in_port=2 actions=drop
table=1, ct_state=+est+trk,ip,in_port=1 actions=output:2
table=1, ct_state=+est+trk,ip,in_port=2 actions=output:1
";

/// Its plain twin (`flows-plain.txt`).
pub const PLAIN_FLOWS: &str = "\
in_port=1 actions=output:2
in_port=2 actions=output:1
";

/// Most connections a run may set up (the tracker's default limit).
pub const MAX_CONNS: u32 = 3_000_000;

/// Transport of the benchmark's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Proto {
    /// UDP, checksum 0 (as `gen_pcap_bidir.py`).
    Udp,
    /// TCP with a real handshake (as `gen_pcap_tcp.py`).
    Tcp,
}

/// Arguments of `bench firewall`.
#[derive(Debug, clap::Args)]
pub struct FirewallArgs {
    /// Transport.
    #[arg(long, value_enum, default_value_t = Proto::Udp)]
    pub proto: Proto,
    /// Connections (1..=3000000).
    #[arg(long, default_value_t = 1000)]
    pub conns: u32,
    /// Measured seconds per repetition (0.1..=600).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Warm-up seconds before each measurement (0..=60).
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Repetitions of each of firewall and plain, alternated (1..=100).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Core the PMD thread is pinned to.
    #[arg(long, default_value_t = 1)]
    pub core: usize,
    /// Run without recirculation hints (each second pass extracted and looked up again), to
    /// measure what they bring.
    #[arg(long)]
    pub no_recirc_hints: bool,
    /// Run without prefetching the conntrack fast cache for a batch (it only prefetches
    /// once the cache has grown), to measure what that brings.
    #[arg(long)]
    pub no_ct_prefetch: bool,
}

/// The traffic of one run: opening packets per direction, steady packets per direction.
#[derive(Debug, Clone)]
pub struct Traffic {
    /// Forward opening packets (port 1).
    pub open_fwd: FrameSet,
    /// Reverse opening packets (port 2; empty for UDP).
    pub open_rev: FrameSet,
    /// Forward steady-state packets.
    pub fwd: FrameSet,
    /// Reverse steady-state packets.
    pub rev: FrameSet,
}

/// The generators' traffic for `n` connections, in their shuffled order (seed 1).
pub fn traffic(proto: Proto, n: u32) -> Traffic {
    let mut idx: Vec<u32> = (0..n).collect();
    PyRandom::seed(1).shuffle(&mut idx);
    let mut t = Traffic {
        open_fwd: FrameSet::new(),
        open_rev: FrameSet::new(),
        fwd: FrameSet::new(),
        rev: FrameSet::new(),
    };
    for &i in &idx {
        match proto {
            Proto::Udp => {
                let f = udp_frame(i, true);
                t.open_fwd.push(&f);
                t.fwd.push(&f);
                t.rev.push(&udp_frame(i, false));
            }
            Proto::Tcp => {
                let [syn, synack, data, ack] = tcp_frames(i);
                t.open_fwd.push(&syn);
                t.open_rev.push(&synack);
                t.fwd.push(&data);
                t.rev.push(&ack);
            }
        }
    }
    t
}

fn bridge(flows: &str) -> anyhow::Result<Bridge> {
    let mut b = Bridge::ovs_sandbox(2, Backend::TupleSpace);
    b.add_flows_text(flows, 0)
        .map_err(|e| anyhow::anyhow!("bench flows: {e}"))?;
    Ok(b)
}

fn pmd(
    flows: &str,
    ct: &Arc<Conntrack>,
    p1: ReplayPort,
    p2: ReplayPort,
    core: usize,
    recirc_hints: bool,
    ct_prefetch: bool,
) -> anyhow::Result<(Pmd, RevalidatorPool)> {
    let cfg = PmdConfig {
        core_id: u32::try_from(core).unwrap_or(u32::MAX),
        recirc_hints,
        ..PmdConfig::default()
    };
    let ports: Vec<(u32, Box<dyn Port>, bool)> =
        vec![(1, Box::new(p1), true), (2, Box::new(p2), true)];
    let (mut pmd, _, revalidators) = pmd_over_bridge(bridge(flows)?, cfg, ports, 0)?;
    // The traffic has no IP fragments: each PMD may have its own (empty) reassembler.
    let ipf = Arc::new(conntrack::ipf::Ipf::new(
        conntrack::ipf::IpfConfig::default(),
    ));
    let mut adapter = CtAdapter::new(
        ct.clone(),
        ipf,
        Arc::new(std::sync::atomic::AtomicU64::new(0)),
    );
    adapter.set_prefetch(ct_prefetch);
    pmd.set_conntrack(Box::new(adapter));
    Ok((pmd, revalidators))
}

/// Resident set size of this process, bytes (0 if unknown).
fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Setup: the opening packets once each; returns connections per second.
fn setup(ct: &Arc<Conntrack>, t: &Traffic, n: u32, core: usize) -> anyhow::Result<f64> {
    let n_fwd = t.open_fwd.len() as u64;
    let n_rev = t.open_rev.len() as u64;
    let p1 = ReplayPort::from_frame_set("p1", t.open_fwd.clone()).with_limit(n_fwd);
    let p2 = ReplayPort::from_frame_set("p2", t.open_rev.clone()).with_limit(n_rev);
    let (mut pmd, _revalidators) = pmd(FIREWALL_FLOWS, ct, p1, p2, core, true, true)?;
    let start = Instant::now();
    let report = pmd.run_for(n_fwd + n_rev);
    let elapsed = start.elapsed();
    ensure!(
        report.packets == n_fwd + n_rev,
        "setup: {} of {} opening packets received",
        report.packets,
        n_fwd + n_rev
    );
    ensure!(
        ct.nconns() == n,
        "setup: {} connections tracked, expected {n}",
        ct.nconns()
    );
    let s = elapsed.as_secs_f64();
    Ok(if s > 0.0 { f64::from(n) / s } else { 0.0 })
}

/// One steady-state measurement: Mpps of packets received from both ports.
fn measure(
    flows: &str,
    ct: &Arc<Conntrack>,
    t: &Traffic,
    args: &FirewallArgs,
) -> anyhow::Result<f64> {
    let p1 = ReplayPort::from_frame_set("p1", t.fwd.clone());
    let p2 = ReplayPort::from_frame_set("p2", t.rev.clone());
    let (pmd, _revalidators) = pmd(
        flows,
        ct,
        p1,
        p2,
        args.core,
        !args.no_recirc_hints,
        !args.no_ct_prefetch,
    )?;
    let thread = PmdThread::spawn(pmd, PmdThreadConfig::on_core(args.core))?;
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    let wait = Duration::from_secs(10);
    let cleared = thread
        .clear_stats_wait(wait)
        .context("the PMD thread did not honour the stats clear")?;
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    let snap = thread
        .wait_for(wait, |s| {
            s.clear_generation == cleared.clear_generation && s.at > cleared.at
        })
        .context("the PMD thread published nothing")?;
    let elapsed = snap.elapsed();
    let stats: PmdStats = snap.stats.clone();
    thread.stop();
    let _pmd = thread.join()?;
    ensure!(
        stats.classified() == stats.packets_received + stats.recirculations,
        "counters do not partition the passes: {} classified of {} + {} recirculated",
        stats.classified(),
        stats.packets_received,
        stats.recirculations
    );
    // Every packet forwarded: the window may cut one burst per port at each edge.
    let slack = 4 * 32;
    ensure!(
        stats.tx_packets + slack >= stats.packets_received
            && stats.packets_received + slack >= stats.tx_packets,
        "not every packet was forwarded: rx {} tx {} (upcalls {}, action drops {})",
        stats.packets_received,
        stats.tx_packets,
        stats.upcall_ok + stats.upcall_failed,
        stats.action_drops
    );
    let s = elapsed.as_secs_f64();
    ensure!(s > 0.0, "no time measured");
    Ok(stats.packets_received as f64 / s / 1e6)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs `bench firewall`.
pub fn run(args: FirewallArgs) -> anyhow::Result<()> {
    if args.conns == 0 || args.conns > MAX_CONNS {
        bail!("--conns must be 1..={MAX_CONNS}, not {}", args.conns);
    }
    if !(0.1..=600.0).contains(&args.seconds) {
        bail!("--seconds must be 0.1..=600, not {}", args.seconds);
    }
    if !(0.0..=60.0).contains(&args.warmup) {
        bail!("--warmup must be 0..=60, not {}", args.warmup);
    }
    if args.reps == 0 || args.reps > 100 {
        bail!("--reps must be 1..=100, not {}", args.reps);
    }
    let n = args.conns;
    let t = traffic(args.proto, n);
    let ct = Arc::new(Conntrack::new(Config {
        max_conns: MAX_CONNS,
        ..Config::default()
    }));
    let rss0 = rss_bytes();
    let setup_per_s = setup(&ct, &t, n, args.core)?;
    let rss1 = rss_bytes();
    let bytes_per_conn = if n >= 100_000 && rss1 > rss0 {
        (rss1 - rss0) / u64::from(n)
    } else {
        Conntrack::bytes_per_conn() as u64
    };
    let proto = match args.proto {
        Proto::Udp => "udp",
        Proto::Tcp => "tcp",
    };
    let (mut fw, mut plain) = (Vec::new(), Vec::new());
    for rep in 0..args.reps {
        let f = measure(FIREWALL_FLOWS, &ct, &t, &args)?;
        let p = measure(PLAIN_FLOWS, &ct, &t, &args)?;
        println!(
            "rep{rep} proto={proto} conns={n} fw_Mpps={f:.3} plain_Mpps={p:.3} ratio={:.3}",
            f / p
        );
        fw.push(f);
        plain.push(p);
    }
    ensure!(
        ct.nconns() == n,
        "connections changed during the run: {} tracked, {n} set up",
        ct.nconns()
    );
    let (f, p) = (median(&mut fw), median(&mut plain));
    println!(
        "proto={proto} conns={n} fw_Mpps={f:.3} plain_Mpps={p:.3} ratio={:.3} setup_per_s={setup_per_s:.0} bytes_per_conn={bytes_per_conn}",
        f / p
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generators' frames, checked against bytes `gen_pcap_bidir.py` / `gen_pcap_tcp.py`
    /// write for connection 0 (their checksums recomputed independently by etherparse).
    #[test]
    fn frames_are_well_formed_and_established_by_setup() {
        for i in [0u32, 1, 59_999, 60_000, 123_456] {
            for f in [udp_frame(i, true), udp_frame(i, false)]
                .into_iter()
                .chain(tcp_frames(i))
            {
                let p = etherparse::SlicedPacket::from_ethernet(&f).expect("parses");
                let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
                    panic!("not ipv4")
                };
                let h = ip.header().to_header();
                assert_eq!(h.header_checksum, h.calc_header_checksum());
                if let Some(etherparse::TransportSlice::Tcp(tcp)) = p.transport {
                    let c = tcp
                        .to_header()
                        .calc_checksum_ipv4(&h, tcp.payload())
                        .expect("checksum");
                    assert_eq!(tcp.checksum(), c);
                }
            }
        }
        // A small run of the setup: every connection is tracked, the TCP ones established
        // once the steady forward segment passes.
        for proto in [Proto::Udp, Proto::Tcp] {
            let t = traffic(proto, 50);
            let ct = Arc::new(Conntrack::new(Config::default()));
            setup(&ct, &t, 50, 0).expect("setup");
            assert_eq!(ct.nconns(), 50);
            let p1 = ReplayPort::from_frame_set("p1", t.fwd.clone()).with_limit(100);
            let p2 = ReplayPort::from_frame_set("p2", t.rev.clone()).with_limit(100);
            let (mut pmd, _revalidators) =
                pmd(FIREWALL_FLOWS, &ct, p1, p2, 0, true, true).expect("pmd");
            let r = pmd.run_for(200);
            assert_eq!(r.packets, 200);
            let st = pmd.stats();
            assert_eq!(
                st.tx_packets, 200,
                "{proto:?}: every steady packet forwarded"
            );
            assert_eq!(ct.nconns(), 50);
            if proto == Proto::Tcp {
                assert!(
                    ct.dump(None)
                        .iter()
                        .all(|c| c.to_string().contains("state=ESTABLISHED")),
                    "{:?}",
                    ct.dump(None).first().map(|c| c.to_string())
                );
            }
        }
    }
}

/// The benchmark's packet path run synchronously (no PMD thread), for instruction counts:
/// `valgrind --tool=callgrind` on two runs with different `FW_REPLAY_PACKETS`; instructions
/// per packet = the difference of the totals over the difference of the packet counts.
///
/// ```text
/// FW_REPLAY_PACKETS=200000 FW_REPLAY_CONNS=1 FW_REPLAY_PROTO=udp FW_REPLAY_PLAIN=0 \
///   valgrind --tool=callgrind target/release/deps/flowswitch-HASH \
///   --exact cmd::bench_firewall::replay::firewall_replay_counts --test-threads=1
/// ```
#[cfg(test)]
mod replay {
    use super::*;

    fn env_u64(name: &str, default: u64) -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// `FW_REPLAY_PROTO`: `tcp`, else UDP.
    fn env_proto() -> Proto {
        match std::env::var("FW_REPLAY_PROTO").as_deref() {
            Ok("tcp") => Proto::Tcp,
            _ => Proto::Udp,
        }
    }

    #[test]
    fn firewall_replay_counts() {
        let packets = env_u64("FW_REPLAY_PACKETS", 2_000);
        let conns = env_u64("FW_REPLAY_CONNS", 10).clamp(1, 1_000_000) as u32;
        let plain = env_u64("FW_REPLAY_PLAIN", 0) != 0;
        let t = traffic(env_proto(), conns);
        let ct = Arc::new(Conntrack::new(Config::default()));
        setup(&ct, &t, conns, 0).expect("setup");
        let half = packets / 2;
        let p1 = ReplayPort::from_frame_set("p1", t.fwd.clone()).with_limit(half);
        let p2 = ReplayPort::from_frame_set("p2", t.rev.clone()).with_limit(half);
        let flows = if plain { PLAIN_FLOWS } else { FIREWALL_FLOWS };
        let hints = std::env::var("FW_REPLAY_HINTS").map_or(true, |v| v != "0");
        let (mut pmd, _revalidators) = pmd(flows, &ct, p1, p2, 0, hints, true).expect("pmd");
        let r = pmd.run_for(u64::MAX);
        assert_eq!(r.packets, 2 * half);
        let st = pmd.stats();
        assert_eq!(st.tx_packets, 2 * half, "{st:?}");
        assert_eq!(st.classified(), st.packets_received + st.recirculations);
        if !plain {
            assert_eq!(st.recirculations, 2 * half);
        }
        assert_eq!(ct.nconns(), conns);
        assert_eq!(pmd.pool().outstanding(), 0);
    }

    /// The setup measurement (`setup`: each connection's opening packets once, on a fresh
    /// tracker) run synchronously, for instruction counts per new connection the same way:
    /// `FW_SETUP_CONNS=N FW_REPLAY_PROTO=udp|tcp`, two runs with different N.
    #[test]
    fn firewall_setup_counts() {
        let conns = env_u64("FW_SETUP_CONNS", 100).clamp(1, 1_000_000) as u32;
        let t = traffic(env_proto(), conns);
        let ct = Arc::new(Conntrack::new(Config::default()));
        setup(&ct, &t, conns, 0).expect("setup");
        assert_eq!(ct.nconns(), conns);
    }
}
