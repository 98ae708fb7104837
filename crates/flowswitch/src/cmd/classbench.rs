//! `classbench` subcommand: classify a ClassBench trace with the OpenFlow-table classifier
//! ([`classifier::OfTable`]) and check every answer against a reference scan.
//!
//! The rule file becomes one OpenFlow table: line order = priority (first line highest), port
//! ranges expanded to value/mask rules. Only the 5-tuple is matched: **the ClassBench flags
//! field is ignored** (see [`classifier::classbench`]). The reference is
//! [`classifier::classbench::RangeScan`]: the original rules in line order with direct
//! prefix/range checks (a linear scan; the expanded-rule `LinearClassifier` would take hours at
//! 100k rules, and the range scan is as obviously right), run in a separate, untimed pass.
//!
//! Output: with `--print-matches`, one line per header with the 0-based line number of the
//! matched rule (-1 for none); then exactly one summary line
//! `headers=N mismatches=M Mpps=X subtables=S rules=R expanded=E build_ms=B bytes=Y
//! wc_Mpps=W wc_mismatches=V wc_bits=C`. `Mpps` times [`OfTable::lookup`];
//! `wc_Mpps` times [`OfTable::lookup_wc`] (the call OpenFlow translation makes: the answer
//! plus a megaflow mask) the same way, best of as many passes, and `wc_mismatches` counts
//! headers where its answer differs from the reference; `wc_bits` is the mean number of mask
//! bits it set. `bytes` is [`OfTable::memory_bytes`]: the heap the table holds (within 0.1 %
//! of what a heap profiler finds live, see the classifier's `cb_lookup` example).
//! Extra measurements (per-pass timings, the classifier's settings in words, inserts/s,
//! bytes/rule) go to stderr. An empty rule file or trace is an error, not a figure.
//!
//! ClassBench files are not part of the repository: `data/classbench/` holds a small sample
//! in their format; real sets live in the project's shared data folder. A missing file's
//! error says so ([`missing_data_hint`]).

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use classifier::OfTable;
use classifier::classbench::{self, RangeScan};
use classifier::oftable::Config;

/// Upper bound of `--passes`.
pub const MAX_PASSES: u32 = 1000;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// ClassBench rule file (gzip or plain), e.g. data/classbench/sample_rules.
    #[arg(long)]
    rules: PathBuf,
    /// ClassBench trace file (gzip or plain), e.g. data/classbench/sample_trace.
    #[arg(long)]
    trace: PathBuf,
    /// Print, per header, the 0-based line number of the matched rule (-1 for none).
    #[arg(long)]
    print_matches: bool,
    /// Timed classification passes over the trace; the best one is reported (1 to 1000).
    #[arg(long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PASSES)))]
    passes: u32,
    /// Most rules a bucket may hold before a rule goes to another subtable (1 to 65536;
    /// default 64).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    collision_limit: Option<u32>,
    /// Address prefixes are relaxed to a multiple of this many bits (1 = exact, to 128;
    /// default 16).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=128))]
    wide_step: Option<u32>,
    /// Port prefixes are relaxed to a multiple of this many bits (1 to 32; above 16 an
    /// exact port leaves the subtable mask; default 17).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32))]
    narrow_step: Option<u32>,
    /// Disable the staged-lookup hash sets (they only serve `lookup_wc`).
    #[arg(long)]
    no_staged: bool,
    /// Place rules in the compatible subtable with the lowest max priority (priority bands)
    /// instead of the most specific one.
    #[arg(long)]
    band: bool,
}

/// For a ClassBench file that does not exist: where such files come from.
pub fn missing_data_hint(path: &Path) -> Option<String> {
    if path.exists() {
        return None;
    }
    Some(format!(
        "{} does not exist. ClassBench files are not part of the repository: \
         data/classbench/ has a small sample (sample_rules, sample_trace); the real sets \
         (acl1/fw1/ipc1, 1k-100k rules) are in the project's shared data folder, \
         ../shared/classbench/ beside a checkout that has it",
        path.display()
    ))
}

/// Reads a ClassBench rule file: an error names the file (and, when it is missing, where
/// such files come from); an empty file is an error.
pub fn read_rules(path: &Path) -> anyhow::Result<Vec<classbench::CbRule>> {
    if let Some(hint) = missing_data_hint(path) {
        anyhow::bail!("rules: {hint}");
    }
    let rules = classbench::read_rules(path)
        .with_context(|| format!("reading rules {}", path.display()))?;
    anyhow::ensure!(!rules.is_empty(), "rules {}: no rules", path.display());
    Ok(rules)
}

/// Reads a ClassBench trace as [`read_rules`] reads rules.
pub fn read_trace(path: &Path) -> anyhow::Result<Vec<classbench::CbHeader>> {
    if let Some(hint) = missing_data_hint(path) {
        anyhow::bail!("trace: {hint}");
    }
    let trace = classbench::read_trace(path)
        .with_context(|| format!("reading trace {}", path.display()))?;
    anyhow::ensure!(!trace.is_empty(), "trace {}: no headers", path.display());
    Ok(trace)
}

/// The classifier settings in words, for the report.
fn describe(cfg: &Config) -> String {
    format!(
        "classifier: collision limit {} rules per bucket, address prefixes relaxed to \
         multiples of {} bits, port prefixes to multiples of {} bits{}, staged lookup sets {}, \
         rules placed {}; ClassBench flags field ignored (5-tuple only)",
        cfg.collision_limit,
        cfg.wide_prefix_step,
        cfg.narrow_prefix_step,
        if cfg.relax_exact_narrow {
            " (exact ports too)"
        } else {
            ""
        },
        if cfg.staged { "on" } else { "off" },
        if cfg.band_priorities {
            "in priority bands"
        } else {
            "in the most specific compatible subtable"
        },
    )
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_PASSES).contains(&args.passes),
        "--passes {}: must be 1 to {MAX_PASSES}",
        args.passes
    );
    let rules = read_rules(&args.rules)?;
    let trace = read_trace(&args.trace)?;
    anyhow::ensure!(
        rules.len() < u32::MAX as usize,
        "too many rules ({})",
        rules.len()
    );
    let line_of_rule: Vec<u32> = (0..rules.len() as u32).collect();

    let mut cfg = Config::default();
    if let Some(c) = args.collision_limit {
        cfg.collision_limit = c;
    }
    if let Some(s) = args.wide_step {
        cfg.wide_prefix_step = s;
    }
    if let Some(s) = args.narrow_step {
        cfg.narrow_prefix_step = s;
    }
    cfg.staged = !args.no_staged;
    cfg.band_priorities = args.band;

    // Expansion is part of loading, not of the timed build.
    let expanded: Vec<_> = rules
        .iter()
        .zip(&line_of_rule)
        .map(|(r, &line)| (line, r.expand()))
        .collect();
    let n_expanded: usize = expanded.iter().map(|(_, e)| e.len()).sum();
    let n = rules.len() as u32;

    let t0 = Instant::now();
    let mut table: OfTable<u32> = OfTable::with_config(cfg);
    for (line, exp) in &expanded {
        // First line highest priority.
        let priority = n - line;
        for (k, m) in exp {
            table.insert(priority, k, m, *line);
        }
    }
    let build = t0.elapsed();
    drop(expanded);

    let keys: Vec<_> = trace.iter().map(|h| h.key()).collect();

    // Timed passes.
    let best = best_pass(args.passes, keys.len(), "", || {
        let mut sum = 0u64;
        for k in &keys {
            if let Some(r) = table.lookup(black_box(k)) {
                sum = sum.wrapping_add(u64::from(r.value));
            }
        }
        sum
    });
    let mut answers: Vec<i64> = vec![-1; keys.len()];
    for (a, k) in answers.iter_mut().zip(&keys) {
        *a = table.lookup(k).map_or(-1, |r| i64::from(r.value));
    }

    // `lookup_wc`, timed the same way.
    let best_wc = best_pass(args.passes, keys.len(), "lookup_wc ", || {
        let mut sum = 0u64;
        for k in &keys {
            let mut wc = flow::FlowMask::CATCHALL;
            if let Some(r) = table.lookup_wc(black_box(k), &mut wc) {
                sum = sum.wrapping_add(u64::from(r.value));
            }
            sum = sum.wrapping_add(wc.w[0]);
        }
        sum
    });
    let mut wc_answers: Vec<i64> = vec![-1; keys.len()];
    let mut wc_bits = 0u64;
    for (a, k) in wc_answers.iter_mut().zip(&keys) {
        let mut wc = flow::FlowMask::CATCHALL;
        *a = table
            .lookup_wc(k, &mut wc)
            .map_or(-1, |r| i64::from(r.value));
        wc_bits += u64::from(wc.count_ones());
    }

    let (mut pr, mut hi, mut co) = (0usize, 0usize, 0usize);
    for k in &keys {
        let (a, b, c) = table.probe_counts(k);
        pr += a;
        hi += b;
        co += c;
    }
    let nk = keys.len().max(1) as f64;
    note!(
        "per lookup: {:.1} subtables probed, {:.1} bucket hits, {:.1} entries compared",
        pr as f64 / nk,
        hi as f64 / nk,
        co as f64 / nk
    );

    // Untimed reference pass (deduplicated headers, two threads).
    let scan = RangeScan::new(&rules);
    let reference = reference_answers(&scan, &trace);
    let mismatches = answers
        .iter()
        .zip(&reference)
        .filter(|(a, b)| a != b)
        .count();
    let wc_mismatches = wc_answers
        .iter()
        .zip(&reference)
        .filter(|(a, b)| a != b)
        .count();

    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    if args.print_matches {
        for a in &answers {
            writeln!(out, "{a}")?;
        }
    }
    let rate = |dt: f64| {
        if dt > 0.0 {
            keys.len() as f64 / dt / 1e6
        } else {
            0.0
        }
    };
    let mpps = rate(best);
    let bytes = table.memory_bytes();
    let stats = table.stats();
    note!("{}", describe(&cfg));
    note!(
        "inserts/s={:.0} bytes/rule={:.1} bytes/expanded={:.1} mask_classes={} max_list={}",
        n_expanded as f64 / build.as_secs_f64().max(1e-9),
        bytes as f64 / rules.len() as f64,
        bytes as f64 / n_expanded.max(1) as f64,
        stats.mask_classes,
        stats.max_list,
    );
    writeln!(
        out,
        "headers={} mismatches={} Mpps={:.3} subtables={} rules={} expanded={} build_ms={:.1} \
         bytes={} wc_Mpps={:.3} wc_mismatches={} wc_bits={:.1}",
        keys.len(),
        mismatches,
        mpps,
        table.n_subtables(),
        rules.len(),
        n_expanded,
        build.as_secs_f64() * 1e3,
        bytes,
        rate(best_wc),
        wc_mismatches,
        wc_bits as f64 / keys.len().max(1) as f64,
    )?;
    out.flush()?;
    drop(out);
    if mismatches > 0 || wc_mismatches > 0 {
        anyhow::bail!(
            "{mismatches} headers (lookup_wc: {wc_mismatches}) classified differently from \
             the linear scan"
        );
    }
    Ok(())
}

/// The reference answer (line number or -1) for every header: each distinct header is scanned
/// once, the distinct headers split between two threads.
fn reference_answers(scan: &RangeScan, trace: &[classbench::CbHeader]) -> Vec<i64> {
    use std::collections::HashMap;
    let mut ids: HashMap<classbench::CbHeader, usize> = HashMap::new();
    let mut uniq = Vec::new();
    let idx: Vec<usize> = trace
        .iter()
        .map(|h| {
            *ids.entry(*h).or_insert_with(|| {
                uniq.push(*h);
                uniq.len() - 1
            })
        })
        .collect();
    let half = uniq.len() / 2;
    let (a, b) = uniq.split_at(half);
    let run = |part: &[classbench::CbHeader]| -> Vec<i64> {
        part.iter()
            .map(|h| scan.first_match(h).map_or(-1, |i| i as i64))
            .collect()
    };
    let (ra, rb) = std::thread::scope(|s| {
        let hb = s.spawn(|| run(b));
        let ra = run(a);
        (ra, hb.join())
    });
    let mut res = ra;
    match rb {
        Ok(rb) => res.extend(rb),
        // The worker cannot panic (pure scan); recompute inline if it somehow did.
        Err(_) => res.extend(run(b)),
    }
    idx.into_iter().map(|i| res[i]).collect()
}

/// Runs `lookups` (one pass over `n` keys, returning a checksum kept alive with `black_box`)
/// `passes` times, prints each pass as `{label}pass N: … ms, … Mpps`, and returns the best
/// pass's seconds (infinity for no pass).
fn best_pass(passes: u32, n: usize, label: &str, mut lookups: impl FnMut() -> u64) -> f64 {
    let mut best = f64::INFINITY;
    for pass in 0..passes {
        let t = Instant::now();
        black_box(lookups());
        let dt = t.elapsed().as_secs_f64();
        note!(
            "{label}pass {pass}: {:.3} ms, {:.3} Mpps",
            dt * 1e3,
            n as f64 / dt / 1e6
        );
        best = best.min(dt);
    }
    best
}
