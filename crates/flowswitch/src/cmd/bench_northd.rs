//! `bench northd`: full recompute of the OVN benchmark's topology (NB → logical flows and
//! SB bindings), in process, for several node counts, thread counts and parallel strategies,
//! interleaved rep by rep; medians.
//!
//! What is timed is what one full recompute costs northd: the typed NB model from the
//! replica, the lookups, every item's flows (sorted, deduplicated) and the SB bindings.
//! The NB comes from `northd::topology` (the twin of the shared OVN benchmark's generator);
//! ovn-northd's own figures for the same topology are taken with real OVSDB servers by
//! `scripts/northd-side-by-side.sh`.

use super::gen_nb::TopoArgs;
use northd::build::Ctx;
use northd::engine::{self, Strategy};
use northd::nb::Nb;
use northd::topology;
use std::io::Write;
use std::time::{Duration, Instant};

/// Arguments of `bench northd`.
#[derive(Debug, clap::Args)]
pub struct NorthdArgs {
    /// Node counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100")]
    pub nodes: Vec<usize>,
    #[command(flatten)]
    pub topo: TopoArgs,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Strategies, comma-separated: per-thread, bucket-locks.
    #[arg(long, value_delimiter = ',', default_value = "per-thread,bucket-locks")]
    pub strategy: Vec<Strategy>,
    /// Repetitions of each configuration (interleaved); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn vm_hwm_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Runs the benchmark.
pub fn run(a: NorthdArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=1000).contains(&a.reps),
        "--reps {}: expected 1 to 1000",
        a.reps
    );
    anyhow::ensure!(
        a.threads.iter().all(|&t| (1..=256).contains(&t)),
        "--threads: expected 1 to 256 each"
    );
    let (_, schema) = topology::read_schema(&a.topo.schema).map_err(anyhow::Error::msg)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "nodes  flows     strategy      threads  median ms  (min..max)  vs 1 thread  [model ctx flows want ms]"
    )?;
    for &n in &a.nodes {
        let p = a.topo.params(n)?;
        let db = topology::generate(&schema, &p).map_err(anyhow::Error::msg)?;
        let mut configs: Vec<(Strategy, usize)> = Vec::new();
        for &s in &a.strategy {
            for &t in &a.threads {
                configs.push((s, t));
            }
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
        // Per configuration, per phase (model, lookups, flows, bindings): each rep's time.
        let mut phases: Vec<[Vec<Duration>; 4]> = vec![Default::default(); configs.len()];
        let mut nflows = 0;
        for _ in 0..a.reps {
            for (i, &(s, t)) in configs.iter().enumerate() {
                let t0 = Instant::now();
                let (nb, _diags) = Nb::from_db_threads(&db, t);
                let t1 = Instant::now();
                let ctx = Ctx::new_threads(nb, t);
                let t2 = Instant::now();
                let flows = engine::build(&ctx, t, s);
                let t3 = Instant::now();
                let want = northd::sb::want_threads(&ctx, t);
                let t4 = Instant::now();
                times[i].push(t4 - t0);
                for (k, d) in [t1 - t0, t2 - t1, t3 - t2, t4 - t3].into_iter().enumerate() {
                    phases[i][k].push(d);
                }
                nflows = flows.len();
                drop(want);
            }
        }
        let base: Vec<Duration> = configs
            .iter()
            .enumerate()
            .map(|(i, _)| {
                let mut v = times[i].clone();
                median(&mut v)
            })
            .collect();
        for (i, &(s, t)) in configs.iter().enumerate() {
            let mut v = times[i].clone();
            let med = median(&mut v);
            let one = configs
                .iter()
                .position(|&(s2, t2)| s2 == s && t2 == 1)
                .map(|j| base[j]);
            let ratio = one
                .map(|o| format!("{:.2}x", o.as_secs_f64() / med.as_secs_f64().max(1e-9)))
                .unwrap_or_default();
            let ph: Vec<String> = phases[i]
                .iter_mut()
                .map(|p| format!("{:.1}", median(p).as_secs_f64() * 1e3))
                .collect();
            writeln!(
                out,
                "{n:<6} {nflows:<9} {:<13} {t:<8} {:>9.1}  ({:.1}..{:.1})  {ratio:<11}  [{}]",
                format!("{s:?}").split_whitespace().next().unwrap_or(""),
                med.as_secs_f64() * 1e3,
                v.first().copied().unwrap_or_default().as_secs_f64() * 1e3,
                v.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
                ph.join(" "),
            )?;
        }
    }
    if let Some(kb) = vm_hwm_kb() {
        writeln!(
            out,
            "peak RSS of this process (NB replica + model + flows): {:.0} MB",
            kb as f64 / 1024.0
        )?;
    }
    Ok(())
}
