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
    let mut table: OfTable<u32> = OfTable::new();
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
}
