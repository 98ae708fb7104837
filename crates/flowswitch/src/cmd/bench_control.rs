//! `bench control`: how fast one PMD learns megaflows through real upcalls, and what the
//! control path costs around it (issue #13) — flowswitch's side of
//! `scripts/bench-control.sh`, which measures OVS-DPDK on the same frames and rules.
//!
//! ```text
//!  ReplayPort "in0" (N distinct frames, each once) → one Pmd pinned to --core
//!    (EMC → dpcls → miss → OfprotoUpcall: xlate through the bridge, ukey, install) → NullPort "out0"
//!  one revalidator thread beside it (adopts ukeys, pushes stats; flow limit pinned at N,
//!  the per-port upcall rate limit off: every frame is a new flow)
//! ```
//!
//! # The frames and the rules
//!
//! Frame `i` is the `l3` benchmark frame of `gen_pcap.py` (60-byte UDP 10.0.0.1 → 10.0.0.2,
//! [`super::bench::gen_frame`]) with its own source MAC `02:00:` + a 32-bit bijective mix of
//! `i` ([`frame`]). The rules ([`rules_text`]) are `flows.sh l3`'s plus a deny list of
//! [`DENY_MACS`] source MACs at a higher priority (`in_port=1,dl_src=M,actions=drop`; drawn
//! from the same mix at indices ≥ 2^31, so no frame is denied). A frame misses the deny
//! list's subtable on `dl_src`, which un-wildcards the whole field (OVS: a miss in a
//! subtable's final stage folds the subtable's mask, and MAC addresses have no prefix trie;
//! ours: a subtable of more than 16 rules is probed by hash, and its rules agree on no bit
//! the frames lack, so the prefilter cannot prove the miss with fewer bits), then hits the
//! `l3` rule. So every frame is its own megaflow
//! (`recirc_id=0,eth,udp,in_port=1,dl_src=…,nw_dst=10.0.0.2,nw_frag=no`, actions `2`) in
//! both switches: N frames, N upcalls, N installs. `--write-pcap` / `--write-flows` write
//! them for OVS.
//!
//! # One run
//!
//! 1. **Learn**: a fresh classifier; the PMD (on its own thread pinned to `--core`, default
//!    EMC, no SMC) polls until the N frames are in, the wall time of each tenth of them
//!    recorded at the burst that completes it. `learn_per_s` = N / total time;
//!    `first_tenth_us` / `last_tenth_us` the first and last tenth. Checked: upcall_ok =
//!    flows_installed = megaflows = tx = N.
//! 2. **Terse dump** of the full table, `--dumps` times, median ([`terse_dump`]: ufid and
//!    stats of every flow, what a revalidator reads).
//! 3. **Delete** every flow by ufid (`Dpcls::remove`), timed: `delete_per_s`.
//! 4. **Install during a dump loop**, `--reps` pairs alternated: a fresh learn run without,
//!    then one with another thread (pinned to `--dump-core`) dumping the same classifier in a
//!    loop from the first packet to the last; `install_during_dump_ratio` = median rate with /
//!    median rate without (the first learn run is the first "without").
//!
//! `bytes_per_flow`: the process's resident-set growth over the first learn run / N when
//! N ≥ 100,000 (everything: flows, arena, subtables, the classifier's ufid map, allocator
//! slack); below that, where page granularity and allocator reuse dominate, the structures'
//! own estimate (`Dpcls::memory().per_flow()` + the classifier's ufid map + the action
//! lists / N). The detail line before the last prints both.
//!
//! The last line: `flows=N learn_per_s=X first_tenth_us=A last_tenth_us=B terse_dump_ms=D
//! install_during_dump_ratio=R bytes_per_flow=F`.
//!
//! The datapath has no flow limit yet: N flows are N flows (up to [`MAX_FLOWS`]).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use datapath::{ActionTable, Dpcls, DpclsConfig, Pmd, PmdConfig, PmdStats, TerseFlow};
use netdev::Port;
use netdev::null::NullPort;
use netdev::replay::{FrameSet, ReplayPort};
use ofproto::{Backend, Bridge};

use upcall::handler::SharedBridge;
use upcall::revalidate::{RevalidatorConfig, RevalidatorPool};
use upcall::udpif::{DEFAULT_FLOW_LIMIT, Udpif};

use super::bench::gen_frame;

/// Upper bound of `--flows`: about 1.1 KB per learned megaflow plus 0.2 KB per frame, so
/// 4M flows stay near 5 GB.
pub const MAX_FLOWS: u32 = 4_000_000;
/// Source MACs on the deny list (more than the classifier's 16-rule "small subtable").
pub const DENY_MACS: u32 = 64;
/// Upper bound of `--reps`.
pub const MAX_REPS: u32 = 20;
/// Upper bound of `--dumps`.
pub const MAX_DUMPS: u32 = 100;

/// Arguments of `bench control`.
#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    /// Distinct frames, each its own megaflow, each sent once (1 to 4,000,000).
    #[arg(long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_FLOWS)))]
    pub flows: u32,
    /// Core the PMD thread is pinned to.
    #[arg(long, default_value_t = 1)]
    pub core: usize,
    /// Core the dump-loop thread is pinned to.
    #[arg(long, default_value_t = 0)]
    pub dump_core: usize,
    /// Pairs of learn runs without / with a dump loop, alternated (1 to 20).
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_REPS)))]
    pub reps: u32,
    /// Terse dumps of the full table timed (median reported) (1 to 100).
    #[arg(long, default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_DUMPS)))]
    pub dumps: u32,
    /// Write the N frames to this pcap file (for OVS) and exit unless --run is given.
    #[arg(long)]
    pub write_pcap: Option<PathBuf>,
    /// Write the OpenFlow rules (ovs-ofctl add-flows syntax) to this file and exit unless
    /// --run is given.
    #[arg(long)]
    pub write_flows: Option<PathBuf>,
    /// With --write-pcap/--write-flows: run the benchmark as well.
    #[arg(long)]
    pub run: bool,
    /// Only the first learn run (for profilers: `perf record`, callgrind); prints its
    /// `learn:` line and not the last line.
    #[arg(long)]
    pub learn_only: bool,
}

/// A bijection of `u32` (xorshift-multiply; each step is invertible).
pub fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The source MAC of frame (or deny entry) `i`: `02:00:` + `mix32(i)`, big-endian.
pub fn mac(i: u32) -> [u8; 6] {
    let m = mix32(i).to_be_bytes();
    [0x02, 0x00, m[0], m[1], m[2], m[3]]
}

/// Frame `i` (see the module doc): `gen_pcap.py`'s l3 frame `i` with source MAC [`mac`]`(i)`.
pub fn frame(i: u32) -> [u8; 60] {
    let mut f = gen_frame(i, 0, false);
    f[6..12].copy_from_slice(&mac(i));
    f
}

/// The `n` frames, in index order.
pub fn frames(n: u32) -> FrameSet {
    (0..n).map(frame).collect()
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The rules: the deny list, then `flows.sh l3 1 2`'s (see the module doc).
pub fn rules_text() -> String {
    let mut t = String::new();
    for j in 0..DENY_MACS {
        t.push_str(&format!(
            "priority=20,in_port=1,dl_src={},actions=drop\n",
            mac_text(mac(0x8000_0000 | j))
        ));
    }
    t.push_str(&super::bench::rules_text(super::bench::Rules::L3));
    t
}

fn bridge() -> anyhow::Result<Bridge> {
    let mut b = Bridge::ovs_sandbox(2, Backend::TupleSpace);
    b.add_flows_text(&rules_text(), 0)
        .map_err(|e| anyhow::anyhow!("bench control rules: {e}"))?;
    Ok(b)
}

/// A terse dump of every flow of `dpcls` (ufid and stats, what a revalidator reads): the
/// datapath's lock-free walk of the published arena ([`Dpcls::dump_terse`]), which never
/// blocks an install.
pub fn terse_dump(dpcls: &Dpcls) -> Vec<TerseFlow> {
    dpcls.dump_terse()
}

/// Resident set size of this process, bytes (0 if unknown).
fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    s.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        * 4096
}

/// Megaflow idle time during a run (the OVS side sets `other_config:max-idle` the same).
const BENCH_MAX_IDLE_MS: u64 = 600_000;

/// One learn run's results.
#[derive(Debug)]
struct Learn {
    /// Wall time of each tenth of the frames.
    tenths: [Duration; 10],
    total: Duration,
    stats: PmdStats,
    dpcls: Arc<Dpcls>,
    actions: Arc<ActionTable>,
    rss_growth: u64,
    pinning: String,
    /// Dumps the dump loop completed during the run (with a dump loop).
    dumps: u64,
}

impl Learn {
    fn per_s(&self, n: u32) -> f64 {
        per_sec(u64::from(n), self.total)
    }
}

fn per_sec(n: u64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 { n as f64 / s } else { 0.0 }
}

fn pin(core: usize) -> String {
    let ok = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == core))
        .is_some_and(core_affinity::set_for_current);
    if ok {
        format!("pinned to core {core}")
    } else {
        format!("UNPINNED (core {core} requested)")
    }
}

/// Learns `frames` on a fresh classifier (see the module doc, step 1); with `dump_core`, a
/// thread pinned there dumps the classifier in a loop for the whole run.
fn learn(frames: &FrameSet, core: usize, dump_core: Option<usize>) -> anyhow::Result<Learn> {
    let n = frames.len() as u64;
    let cfg = PmdConfig {
        core_id: u32::try_from(core).unwrap_or(u32::MAX),
        // The per-port upcall rate limit (a guard against floods of new flows) is off: this
        // benchmark measures how fast upcalls can learn, every frame being a new flow.
        upcall_rate: 0,
        ..PmdConfig::default()
    };
    let input = ReplayPort::from_frame_set("in0", frames.clone()).with_limit(n);
    let ports: Vec<(u32, Box<dyn Port>, bool)> = vec![
        (1, Box::new(input), true),
        (2, Box::new(NullPort::new("out0")), false),
    ];
    // As `bench::pmd_over_bridge` builds it, keeping the action table for its size: the
    // control path runs beside the PMD (one revalidator thread recording and adopting ukeys,
    // pushing stats, applying the flow limit), with the flow limit raised to fit the run and
    // max-idle raised as the OVS side's is (each frame is sent once: its flow is idle at
    // once).
    let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
    let actions = Arc::new(ActionTable::new(1 << 16));
    let udpif = Arc::new(Udpif::default());
    udpif
        .limit
        .pin((n as usize).max(DEFAULT_FLOW_LIMIT))
        .map_err(|e| anyhow::anyhow!("flow limit: {e}"))?;
    let revalidators = RevalidatorPool::spawn_with(
        udpif,
        SharedBridge::new(bridge()?),
        dpcls.clone(),
        actions.clone(),
        RevalidatorConfig {
            max_idle_ms: BENCH_MAX_IDLE_MS,
            ..RevalidatorConfig::default()
        },
        1,
        Duration::from_millis(500),
    )
    .context("starting the revalidator thread")?;
    let mut pmd = Pmd::new(
        cfg,
        dpcls.clone(),
        actions.clone(),
        Box::new(revalidators.upcall()),
    );
    for (no, port, poll) in ports {
        pmd.add_port(no, port, poll)
            .with_context(|| format!("adding port {no}"))?;
    }
    let stop = AtomicBool::new(false);
    let dumps = AtomicU64::new(0);
    let rss0 = rss_bytes();
    let (tenths, total, pinning, pmd) = std::thread::scope(|s| {
        let dumper = dump_core.map(|c| {
            let (dpcls, stop, dumps) = (&dpcls, &stop, &dumps);
            s.spawn(move || {
                pin(c);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::black_box(terse_dump(dpcls));
                    dumps.fetch_add(1, Ordering::Relaxed);
                }
            })
        });
        let run = s.spawn(move || {
            let pinning = pin(core);
            let (tenths, total) = learn_loop(&mut pmd, n);
            (tenths, total, pinning, pmd)
        });
        let r = run.join();
        stop.store(true, Ordering::Relaxed);
        if let Some(d) = dumper {
            let _ = d.join();
        }
        r
    })
    .map_err(|_| anyhow::anyhow!("the PMD thread panicked"))?;
    let rss_growth = rss_bytes().saturating_sub(rss0);
    let stats = pmd.stats().clone();
    ensure!(
        pmd.pool().outstanding() == 0,
        "{} packet buffers were not returned to the pool",
        pmd.pool().outstanding()
    );
    drop(pmd);
    // The dump and delete measurements that follow run without it.
    revalidators.stop();
    Ok(Learn {
        tenths,
        total,
        stats,
        dpcls,
        actions,
        rss_growth,
        pinning,
        dumps: dumps.load(Ordering::Relaxed),
    })
}

/// Polls until `n` packets are in; the wall time at which each tenth was complete.
fn learn_loop(pmd: &mut Pmd, n: u64) -> ([Duration; 10], Duration) {
    let bounds: [u64; 10] = std::array::from_fn(|k| n * (k as u64 + 1) / 10);
    let mut marks = [Duration::ZERO; 10];
    let mut k = 0;
    let t0 = Instant::now();
    while k < 10 {
        let got = pmd.poll_once();
        let rx = pmd.stats().packets_received;
        let now = t0.elapsed();
        while k < 10 && rx >= bounds[k] {
            marks[k] = now;
            k += 1;
        }
        if got == 0 {
            break;
        }
    }
    let total = marks[9];
    let mut tenths = [Duration::ZERO; 10];
    for k in 0..10 {
        tenths[k] = marks[k].saturating_sub(if k == 0 { Duration::ZERO } else { marks[k - 1] });
    }
    (tenths, total)
}

/// Every frame learned exactly once: N upcalls, N installs, N megaflows, N sent.
fn check_learned(l: &Learn, n: u32) -> anyhow::Result<()> {
    let s = &l.stats;
    let n64 = u64::from(n);
    ensure!(
        s.packets_received == n64
            && s.upcall_ok == n64
            && s.flows_installed == n64
            && l.dpcls.len() == n as usize
            && s.tx_packets == n64,
        "not one megaflow per frame: rx={} upcall_ok={} upcall_failed={} flows_installed={} \
         install_failed={} megaflow_hits={} emc_hits={} megaflows={} tx={} (expected {n} each)",
        s.packets_received,
        s.upcall_ok,
        s.upcall_failed,
        s.flows_installed,
        s.install_failed,
        s.megaflow_hits,
        s.emc_hits,
        l.dpcls.len(),
        s.tx_packets
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs `bench control`.
pub fn run(args: ControlArgs) -> anyhow::Result<()> {
    // clap enforces the bounds; checked again before allocating, for other callers.
    ensure!(
        (1..=MAX_FLOWS).contains(&args.flows),
        "--flows must be 1 to {MAX_FLOWS} (each flow costs about 1.3 KB here)"
    );
    ensure!(
        (1..=MAX_REPS).contains(&args.reps),
        "--reps must be 1 to {MAX_REPS}"
    );
    ensure!(
        (1..=MAX_DUMPS).contains(&args.dumps),
        "--dumps must be 1 to {MAX_DUMPS}"
    );
    let n = args.flows;
    let mut out = std::io::stdout().lock();
    let wrote = args.write_pcap.is_some() || args.write_flows.is_some();
    if let Some(p) = &args.write_flows {
        std::fs::write(p, rules_text()).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.write_pcap {
        netdev::write_pcap(p, (0..n).map(frame))?;
    }
    if wrote && !args.run {
        return Ok(());
    }
    let frames = frames(n);

    // 1. Learn.
    let first = learn(&frames, args.core, None)?;
    check_learned(&first, n)?;
    let tenths_us: Vec<String> = first
        .tenths
        .iter()
        .map(|t| format!("{:.0}", t.as_secs_f64() * 1e6))
        .collect();
    let s = &first.stats;
    writeln!(
        out,
        "learn: flows={n} rx={} upcall_ok={} flows_installed={} megaflows={} tx={} \
         time_ms={:.3} learn_per_s={:.0} upcall_cycles_per_flow={:.0} tenths_us={} PMD {}",
        s.packets_received,
        s.upcall_ok,
        s.flows_installed,
        first.dpcls.len(),
        s.tx_packets,
        first.total.as_secs_f64() * 1e3,
        first.per_s(n),
        s.upcall_cycles as f64 / f64::from(n),
        tenths_us.join(","),
        first.pinning
    )?;
    out.flush()?;
    if args.learn_only {
        return Ok(());
    }

    // Memory of the full table.
    let mem = first.dpcls.memory();
    // The classifier's ufid → location map: hashbrown keeps a control byte per bucket and at
    // most 7/8 load, entries of (Ufid, port, index, Arc): 16 + 4 + 4 + 8 bytes.
    let map_bytes = (16.0 + 16.0 + 1.0) * 8.0 / 7.0;
    let action_bytes = first.actions.len() as f64 * 64.0 / f64::from(n);
    let est = mem.per_flow() + map_bytes + action_bytes;
    let rss = first.rss_growth as f64 / f64::from(n);
    let (bytes_per_flow, source) = if n >= 100_000 {
        (rss, "rss")
    } else {
        (est, "estimate")
    };

    // 2. Terse dumps of the full table.
    let mut dump_ms = Vec::new();
    let mut ufids = Vec::new();
    let mut dumped_packets = 0;
    for _ in 0..args.dumps {
        let t0 = Instant::now();
        let d = terse_dump(&first.dpcls);
        dump_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        ensure!(
            d.len() == n as usize,
            "a dump gave {} of {n} flows",
            d.len()
        );
        ufids = d.iter().map(|f| f.ufid).collect();
        dumped_packets = d.iter().map(|f| f.stats.packets).sum::<u64>();
    }
    let terse_dump_ms = median(&mut dump_ms);

    // 3. Delete every flow by ufid.
    let t0 = Instant::now();
    let mut removed = 0u64;
    for u in &ufids {
        if first.dpcls.remove(*u).is_some() {
            removed += 1;
        }
    }
    let del = t0.elapsed();
    ensure!(
        removed == u64::from(n) && first.dpcls.is_empty(),
        "delete: removed {removed} of {n}, {} left",
        first.dpcls.len()
    );
    drop(ufids);
    let mut without = vec![first.per_s(n)];
    let first_tenth = first.tenths[0];
    let last_tenth = first.tenths[9];
    let learn_per_s = first.per_s(n);
    drop(first);

    // 4. Install rate with and without a dump loop, alternated.
    let mut with = Vec::new();
    let mut dumps_done = Vec::new();
    for rep in 0..args.reps {
        if rep > 0 {
            let l = learn(&frames, args.core, None)?;
            check_learned(&l, n)?;
            without.push(l.per_s(n));
        }
        let l = learn(&frames, args.core, Some(args.dump_core))?;
        check_learned(&l, n)?;
        with.push(l.per_s(n));
        dumps_done.push(l.dumps.to_string());
    }
    let fmt_rates = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let rate_without = median(&mut without.clone());
    let rate_with = median(&mut with.clone());
    let ratio = if rate_without > 0.0 {
        rate_with / rate_without
    } else {
        0.0
    };
    writeln!(
        out,
        "control: terse_dumps_ms={} dumped_packets={dumped_packets} delete_per_s={:.0} delete_ms={:.3} learn_per_s_without_dumps={} \
         learn_per_s_with_dumps={} dumps_during_runs={} bytes_per_flow_rss={rss:.0} \
         bytes_per_flow_estimate={est:.0} (dpcls {:.0} + ufid map {map_bytes:.0} + actions \
         {action_bytes:.1}) bytes_per_flow_from={source}",
        dump_ms
            .iter()
            .map(|m| format!("{m:.3}"))
            .collect::<Vec<_>>()
            .join(","),
        per_sec(u64::from(n), del),
        del.as_secs_f64() * 1e3,
        fmt_rates(&without),
        fmt_rates(&with),
        dumps_done.join(","),
        mem.per_flow(),
    )?;
    writeln!(
        out,
        "flows={n} learn_per_s={learn_per_s:.0} first_tenth_us={:.0} last_tenth_us={:.0} \
         terse_dump_ms={terse_dump_ms:.3} install_during_dump_ratio={ratio:.3} \
         bytes_per_flow={bytes_per_flow:.0}",
        first_tenth.as_secs_f64() * 1e6,
        last_tenth.as_secs_f64() * 1e6,
    )?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_a_bijection_on_a_sample_and_frames_differ_from_the_deny_list() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..200_000u32 {
            assert!(seen.insert(mix32(i)), "collision at {i}");
        }
        for j in 0..DENY_MACS {
            assert!(!seen.contains(&mix32(0x8000_0000 | j)));
        }
        let f = frame(7);
        assert_eq!(&f[6..12], &mac(7));
        assert_eq!(&f[..6], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(rules_text().lines().count() as u32, DENY_MACS + 3);
    }

    #[test]
    fn every_frame_is_its_own_megaflow() {
        let n = 3000;
        let l = learn(&frames(n), 1, None).expect("learn");
        check_learned(&l, n).expect("one megaflow per frame");
        let d = terse_dump(&l.dpcls);
        assert_eq!(d.len(), n as usize);
        // The megaflow: in_port, dl_src whole, dl_type, nw_proto, nw_dst, nw_frag.
        let f = l.dpcls.flows().pop().expect("a flow");
        use flow::field::FieldId;
        assert_eq!(FieldId::DlSrc.get_mask(&f.mask), (1 << 48) - 1);
        assert_eq!(FieldId::NwDst.get_mask(&f.mask), 0xffff_ffff);
        assert_eq!(FieldId::TpSrc.get_mask(&f.mask), 0);
    }
}
