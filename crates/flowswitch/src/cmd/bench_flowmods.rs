//! `bench flowmods`: flow-mod rate and latency on a published bridge, with a reader
//! translating all along.
//!
//! Loads a ClassBench rule file's expanded value/mask rules as OpenFlow `add` flow mods into
//! table 0 of a [`SharedBridge`] (the datapath's bridge: every flow mod is applied to both
//! copies of `classifier::double_buffer` and published), one flow mod per write (or `--batch N`
//! per write, [`SharedBridge::flow_mods`]), then removes them again with `delete-strict`. Meanwhile one reader thread translates the trace's headers
//! through whatever copy is published (`xlate_ro` on [`SharedBridge::read`]) and records the
//! longest single translation: with lock-free reads it stays at lookup scale while the writer
//! works. The same adds are also timed on a plain [`Bridge`] (one copy, no publication) in the
//! same run, for the ratio the publication costs.
//!
//! Priorities: line `i` of `n` gets `65535 - i * 65534 / n` (OpenFlow priorities are 16-bit;
//! ClassBench's line order maps onto them monotonically, ties allowed).

use anyhow::ensure;
use classifier::classbench;
use flow::FlowKey;
use flow::ofp::{Action, FlowSpec, Match, OfPort};
use ofproto::{Backend, Bridge, FlowMod, FlowModCommand, XlateIn, xlate_ro};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use upcall::handler::SharedBridge;

/// Arguments of `bench flowmods`.
#[derive(Debug, clap::Args)]
pub struct FlowModArgs {
    /// ClassBench rule file (gzip or plain), e.g. data/classbench/sample_rules.
    #[arg(long)]
    pub rules: PathBuf,
    /// Its trace (headers the reader translates); without it the reader uses the rules' keys.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Flow mods per write on the published bridge, 1 to 1,000,000 (1 = each its own
    /// publication; larger batches are what `add-flows` files and bundles do). Latencies are
    /// then per batch.
    #[arg(long, default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=MAX_BATCH as u64))]
    pub batch: usize,
}

/// Upper bound of `--batch`.
pub const MAX_BATCH: usize = 1_000_000;

fn specs(rules: &[classbench::CbRule]) -> Vec<FlowSpec> {
    let n = rules.len().max(1) as u64;
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let priority = (65535 - (i as u64) * 65534 / n) as u16;
        for (key, mask) in r.expand() {
            out.push(FlowSpec {
                table: Some(0),
                priority,
                match_: Match { key, mask },
                actions: vec![Action::Output {
                    port: OfPort(2),
                    max_len: 0,
                }],
                ..FlowSpec::default()
            });
        }
    }
    out
}

fn flow_mod(command: FlowModCommand, spec: &FlowSpec) -> FlowMod {
    FlowMod {
        command,
        spec: spec.clone(),
        reset_counts: false,
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Reader thread: translates `keys` round-robin until `stop`; returns (lookups, max ns).
fn spawn_reader(
    shared: Arc<SharedBridge>,
    keys: Vec<FlowKey>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let (mut n, mut max_ns) = (0u64, 0u64);
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let Some(k) = keys.get(i) else {
                i = 0;
                continue;
            };
            i += 1;
            let t = Instant::now();
            let out = xlate_ro(&shared.read(), &XlateIn::new(*k));
            std::hint::black_box(&out);
            max_ns = max_ns.max(t.elapsed().as_nanos() as u64);
            n += 1;
        }
        (n, max_ns)
    })
}

struct Phase {
    ops: usize,
    errors: usize,
    lat_ns: Vec<u64>,
    wall: Duration,
}

impl Phase {
    /// `name=N name_errors=E name_per_s=R` and latency percentiles per call (per batch when
    /// batched).
    fn line(&mut self, name: &str) -> String {
        self.lat_ns.sort_unstable();
        format!(
            "{name}={} {name}_errors={} {name}_per_s={:.0} {name}_us_p50={:.2} {name}_us_p99={:.2} {name}_us_max={:.1}",
            self.ops,
            self.errors,
            self.ops as f64 / self.wall.as_secs_f64().max(1e-9),
            percentile(&self.lat_ns, 0.5) as f64 / 1e3,
            percentile(&self.lat_ns, 0.99) as f64 / 1e3,
            self.lat_ns.last().copied().unwrap_or(0) as f64 / 1e3,
        )
    }
}

fn timed<F: FnMut(&FlowSpec) -> bool>(specs: &[FlowSpec], mut f: F) -> Phase {
    timed_batches(specs, 1, |b| b.iter().filter(|s| !f(s)).count())
}

/// Times `f` on consecutive batches of `batch` specs; `f` returns how many failed.
fn timed_batches<F: FnMut(&[FlowSpec]) -> usize>(
    specs: &[FlowSpec],
    batch: usize,
    mut f: F,
) -> Phase {
    let mut lat_ns = Vec::with_capacity(specs.len() / batch.max(1) + 1);
    let mut errors = 0;
    let t0 = Instant::now();
    for b in specs.chunks(batch.max(1)) {
        let t = Instant::now();
        errors += f(b);
        lat_ns.push(t.elapsed().as_nanos() as u64);
    }
    Phase {
        ops: specs.len(),
        errors,
        lat_ns,
        wall: t0.elapsed(),
    }
}

/// Runs the benchmark and prints one line.
pub fn run(args: FlowModArgs) -> anyhow::Result<()> {
    ensure!(
        (1..=MAX_BATCH).contains(&args.batch),
        "--batch {}: must be 1 to {MAX_BATCH}",
        args.batch
    );
    let rules = super::classbench::read_rules(&args.rules)?;
    let specs = specs(&rules);
    let keys: Vec<FlowKey> = match &args.trace {
        Some(t) => super::classbench::read_trace(t)?
            .iter()
            .map(classbench::CbHeader::key)
            .collect(),
        None => specs.iter().map(|s| s.match_.key).collect(),
    };

    // Baseline: one plain bridge, no publication.
    let mut plain = Bridge::ovs_sandbox(2, Backend::TupleSpace);
    let mut base = timed(&specs, |s| {
        plain.flow_mod(&flow_mod(FlowModCommand::Add, s), 0).is_ok()
    });
    let plain_rules = plain.n_rules();
    let mut base_dels = timed(&specs, |s| {
        plain
            .flow_mod(&flow_mod(FlowModCommand::DeleteStrict, s), 0)
            .is_ok()
    });
    drop(plain);

    let shared = SharedBridge::with_manual_clock(Bridge::ovs_sandbox(2, Backend::TupleSpace), 0);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = spawn_reader(shared.clone(), keys, stop.clone());
    let batched = |command: FlowModCommand| {
        let shared = &shared;
        move |b: &[FlowSpec]| {
            let fms: Vec<FlowMod> = b.iter().map(|s| flow_mod(command, s)).collect();
            if fms.len() == 1 {
                usize::from(shared.flow_mod(&fms[0]).is_err())
            } else {
                shared.flow_mods(&fms).iter().filter(|r| r.is_err()).count()
            }
        }
    };
    let mut adds = timed_batches(&specs, args.batch, batched(FlowModCommand::Add));
    let loaded = shared.read().n_rules();
    let mut dels = timed_batches(&specs, args.batch, batched(FlowModCommand::DeleteStrict));
    stop.store(true, Ordering::Relaxed);
    let (lookups, max_ns) = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader thread panicked"))?;
    let left = shared.read().n_rules();
    shared
        .check_replicas()
        .map_err(|e| anyhow::anyhow!("bridge copies differ: {e}"))?;
    ensure!(
        loaded == plain_rules,
        "published bridge holds {loaded} rules, plain bridge {plain_rules}"
    );
    ensure!(left == 0, "{left} rules left after deleting all");
    let wall = adds.wall + dels.wall;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "flowmods rules={} expanded={} batch={} installed={loaded} {} {} plain_{} plain_{} reader_lookups_per_s={:.0} reader_max_us={:.1}",
        rules.len(),
        specs.len(),
        args.batch,
        adds.line("adds"),
        dels.line("deletes"),
        base.line("adds"),
        base_dels.line("deletes"),
        lookups as f64 / wall.as_secs_f64().max(1e-9),
        max_ns as f64 / 1e3,
    )?;
    out.flush()?;
    Ok(())
}
