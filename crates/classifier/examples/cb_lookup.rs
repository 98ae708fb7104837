//! Lookup-only ClassBench loop for instruction and cache-miss counts (`valgrind
//! --tool=cachegrind` / `callgrind`): `cargo run --release -p classifier --example cb_lookup --
//! RULES TRACE [PASSES]`. Builds the table like `flowswitch classbench` (line order =
//! priority, ranges expanded), then runs `PASSES` (default 1) plain `lookup` passes over the
//! trace and prints the wall time per pass and a checksum of the answers (no reference scan:
//! correctness is `flowswitch classbench`'s and the tests' job).

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use classifier::OfTable;
use classifier::classbench;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: cb_lookup RULES TRACE [PASSES]");
        std::process::exit(2);
    }
    let rules = match classbench::read_rules(Path::new(&args[1])) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rules: {e}");
            std::process::exit(1);
        }
    };
    let trace = match classbench::read_trace(Path::new(&args[2])) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("trace: {e}");
            std::process::exit(1);
        }
    };
    let passes: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let n = rules.len() as u32;
    // Optional `CFG` (env): comma list of `key=value` overrides, as the `classbench` example.
    let mut cfg = classifier::oftable::Config::default();
    for kv in std::env::var("CFG").unwrap_or_default().split(',') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, "1"));
        let n: u32 = v.parse().unwrap_or(1);
        match k {
            "limit" => cfg.collision_limit = n,
            "wide" => cfg.wide_prefix_step = n,
            "narrow" => cfg.narrow_prefix_step = n,
            "staged" => cfg.staged = n != 0,
            "band" => cfg.band_priorities = n != 0,
            "exact" => cfg.relax_exact_narrow = n != 0,
            "split" => cfg.split_limit = n,
            _ => {}
        }
    }
    let mut table: OfTable<u32> = OfTable::with_config(cfg);
    let t0 = Instant::now();
    for (line, r) in rules.iter().enumerate() {
        for (k, m) in r.expand() {
            table.insert(n - line as u32, &k, &m, line as u32);
        }
    }
    let build = t0.elapsed().as_secs_f64();
    let keys: Vec<_> = trace.iter().map(|h| h.key()).collect();
    let mut sum = 0u64;
    for _ in 0..passes {
        let t = Instant::now();
        for k in &keys {
            if let Some(r) = table.lookup(black_box(k)) {
                sum = sum.wrapping_add(u64::from(r.value) + 1);
            }
        }
        let dt = t.elapsed().as_secs_f64();
        println!("pass: {:.3} Mpps", keys.len() as f64 / dt / 1e6);
    }
    println!(
        "checksum={sum} subtables={} build_ms={:.1} bytes={}",
        table.n_subtables(),
        build * 1e3,
        table.memory_bytes()
    );
    // With `LEAK_TABLE` set the table is never freed, so a heap profiler's end-of-run
    // figure (`valgrind --tool=dhat`, "At t-end") is what the table allocated.
    if std::env::var_os("LEAK_TABLE").is_some() {
        std::mem::forget(table);
    }
}
