//! ClassBench measurement of [`classifier::OfTable`] without the flowswitch CLI (same method as
//! `flowswitch classbench`): `cargo run --release -p classifier --example classbench -- RULES
//! TRACE [CFG...]`. Each `CFG` is a comma list of `key=value` overrides of `Config::default()`
//! (`limit`, `wide`, `narrow`, `staged`, `band`, `tries`); with none, the default configuration runs.
//! Every configuration is built and timed in each of `ROUNDS` (env, default 3) interleaved
//! rounds; the line per configuration reports the median Mpps (each round: best of 3 passes),
//! mismatches against the range scan, subtables, probes per lookup, inserts/s and bytes.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use classifier::OfTable;
use classifier::classbench::{self, RangeScan};
use classifier::oftable::Config;

fn parse_cfg(s: &str) -> Config {
    let mut c = Config::default();
    for kv in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, "1"));
        let n: u32 = v.parse().unwrap_or(1);
        match k {
            "limit" => c.collision_limit = n,
            "wide" => c.wide_prefix_step = n,
            "narrow" => c.narrow_prefix_step = n,
            "staged" => c.staged = n != 0,
            "tries" => c.prefix_tries = n != 0,
            "band" => c.band_priorities = n != 0,
            "exact" => c.relax_exact_narrow = n != 0,
            "split" => c.split_limit = n,
            "default" => {}
            _ => eprintln!("unknown config key {k}"),
        }
    }
    c
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: classbench RULES TRACE [CFG...]");
        std::process::exit(2);
    }
    let rules = classbench::read_rules(Path::new(&args[1])).expect("rules");
    let trace = classbench::read_trace(Path::new(&args[2])).expect("trace");
    let mut cfgs: Vec<(String, Config)> = args[3..]
        .iter()
        .map(|s| (s.clone(), parse_cfg(s)))
        .collect();
    if cfgs.is_empty() {
        cfgs.push(("default".into(), Config::default()));
    }
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let expanded: Vec<_> = rules.iter().map(|r| r.expand()).collect();
    let n_expanded: usize = expanded.iter().map(Vec::len).sum();
    let keys: Vec<_> = trace.iter().map(|h| h.key()).collect();
    let scan = RangeScan::new(&rules);
    let mut memo = std::collections::HashMap::new();
    let check = std::env::var("NOCHECK").is_err();
    let reference: Vec<i64> = trace
        .iter()
        .filter(|_| check)
        .map(|h| {
            *memo
                .entry(*h)
                .or_insert_with(|| scan.first_match(h).map_or(-1, |i| i as i64))
        })
        .collect();
    let n = rules.len() as u32;
    let mut mpps: Vec<Vec<f64>> = vec![Vec::new(); cfgs.len()];
    let mut builds: Vec<Vec<f64>> = vec![Vec::new(); cfgs.len()];
    let mut info: Vec<String> = vec![String::new(); cfgs.len()];
    for _ in 0..rounds {
        for (ci, (_, cfg)) in cfgs.iter().enumerate() {
            let t0 = Instant::now();
            let mut table: OfTable<u32> = OfTable::with_config(*cfg);
            for (line, exp) in expanded.iter().enumerate() {
                for (k, m) in exp {
                    table.insert(n - line as u32, k, m, line as u32);
                }
            }
            builds[ci].push(t0.elapsed().as_secs_f64());
            if std::env::var("SUMMARY").is_ok() && mpps[ci].is_empty() {
                use flow::FieldId as F;
                for (m, nr, mp) in table.subtable_summary() {
                    let l = |f: F| f.get_mask(&m).count_ones();
                    println!(
                        "  src/{} dst/{} sp/{} dp/{} proto/{} rules={nr} maxprio={mp}",
                        l(F::NwSrc),
                        l(F::NwDst),
                        l(F::TpSrc),
                        l(F::TpDst),
                        l(F::NwProto)
                    );
                }
            }
            let mut best = f64::INFINITY;
            for _ in 0..3 {
                let t = Instant::now();
                let mut sum = 0u64;
                for k in &keys {
                    if let Some(r) = table.lookup(black_box(k)) {
                        sum = sum.wrapping_add(u64::from(r.value));
                    }
                }
                black_box(sum);
                best = best.min(t.elapsed().as_secs_f64());
            }
            mpps[ci].push(keys.len() as f64 / best / 1e6);
            if info[ci].is_empty() {
                let mut mism = 0;
                let (mut pr, mut hi, mut co) = (0, 0, 0);
                for (i, k) in keys.iter().enumerate() {
                    let want = reference.get(i).copied().unwrap_or(-2);
                    let got = table.lookup(k).map_or(-1, |r| i64::from(r.value));
                    let mut wc = flow::FlowMask::CATCHALL;
                    let got_wc = table
                        .lookup_wc(k, &mut wc)
                        .map_or(-1, |r| i64::from(r.value));
                    if check {
                        mism += usize::from(got != want || got_wc != want);
                    }
                    let (a, b, c) = table.probe_counts(k);
                    pr += a;
                    hi += b;
                    co += c;
                }
                let nk = keys.len() as f64;
                let t = Instant::now();
                let mut bits = 0u64;
                for k in &keys {
                    let mut wc = flow::FlowMask::CATCHALL;
                    black_box(table.lookup_wc(black_box(k), &mut wc));
                    bits += u64::from(wc.count_ones());
                }
                let wc_mpps = nk / t.elapsed().as_secs_f64() / 1e6;
                let bytes = table.memory_bytes();
                info[ci] = format!(
                    "wc_Mpps={wc_mpps:.3} wc_bits={:.1} mismatches={mism} subtables={} probed={:.1} hits={:.2} compared={:.2} bytes={bytes} B/rule={:.0} B/exp={:.0} max_list={}",
                    bits as f64 / nk,
                    table.n_subtables(),
                    pr as f64 / nk,
                    hi as f64 / nk,
                    co as f64 / nk,
                    bytes as f64 / rules.len() as f64,
                    bytes as f64 / n_expanded as f64,
                    table.stats().max_list,
                );
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (ci, (name, _)) in cfgs.iter().enumerate() {
        let runs: Vec<String> = mpps[ci].iter().map(|x| format!("{x:.3}")).collect();
        let m = median(&mut mpps[ci]);
        let b = median(&mut builds[ci]);
        println!(
            "{} [{name}] rules={} expanded={n_expanded} headers={} Mpps={m:.3} ({}) build_ms={:.1} inserts/s={:.2}M {}",
            Path::new(&args[1])
                .file_name()
                .map_or("?".into(), |s| s.to_string_lossy()),
            rules.len(),
            keys.len(),
            runs.join(","),
            b * 1e3,
            n_expanded as f64 / b / 1e6,
            info[ci]
        );
    }
}

/// Prints the subtables of a table built from `RULES` with the default configuration
/// (`SUMMARY=1`).
#[allow(dead_code)]
fn summary() {}
