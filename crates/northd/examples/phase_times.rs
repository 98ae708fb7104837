//! `cargo run --release -p northd --example phase_times -- NODES [THREADS]`: times each phase of one
//! full recompute of the benchmark topology (model, lookups, flows, SB bindings).

use northd::{build::Ctx, engine, nb::Nb, sb, topology};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let threads: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let (_, schema) =
        topology::read_schema(topology::DEFAULT_NB_SCHEMA).unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    let db = topology::generate(&schema, &topology::Params::with_nodes(n))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("generate {:?}", t.elapsed());
    for _ in 0..2 {
        let t = Instant::now();
        let (nb, _) = Nb::from_db_threads(&db, threads);
        let t1 = t.elapsed();
        let ctx = Ctx::new(nb);
        let t2 = t.elapsed();
        let flows = engine::build(&ctx, threads, engine::Strategy::PerThread);
        let t3 = t.elapsed();
        let w = sb::want_threads(&ctx, threads);
        let t4 = t.elapsed();
        eprintln!(
            "model {t1:?} ctx {:?} flows {:?} ({}) sb {:?}",
            t2 - t1,
            t3 - t2,
            flows.len(),
            t4 - t3
        );
        drop(w);
    }
}
