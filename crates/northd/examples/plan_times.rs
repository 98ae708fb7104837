//! `cargo run --release -p northd --example plan_times -- NB.db SB.db [THREADS]`: times
//! planning the SB sync of NB.db's flows against SB.db (a file a northd has written), the
//! step a daemon's full recompute ends with: the bindings alone, then bindings and flows
//! with the flow cache already made (as the daemon keeps it between rounds).

use northd::{build::Ctx, engine, nb::Nb, sb};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (Some(nb_path), Some(sb_path)) = (a.get(1), a.get(2)) else {
        eprintln!("usage: plan_times NB.db SB.db [THREADS]");
        std::process::exit(2);
    };
    let threads: usize = a.get(3).and_then(|t| t.parse().ok()).unwrap_or(1);
    let nbdb = ovsdb::file::read(nb_path).unwrap_or_else(|e| panic!("{e}"));
    let sbdb = ovsdb::file::read(sb_path).unwrap_or_else(|e| panic!("{e}"));
    let (nb, _) = Nb::from_db(&nbdb);
    let mut ctx = Ctx::new(nb);
    ctx.load_tunnel_keys(&sbdb);
    let flows = engine::build(&ctx, threads, engine::Strategy::PerThread);
    let want = sb::want_threads(&ctx, threads);
    let mut cache = sb::FlowCache::from_db(&sbdb);
    for _ in 0..7 {
        let t = Instant::now();
        let p = sb::plan_threads(&ctx, &want, None, &sbdb, None, threads);
        let t1 = t.elapsed();
        let t = Instant::now();
        let q = sb::plan_threads(&ctx, &want, Some(&flows), &sbdb, Some(&mut cache), threads);
        eprintln!(
            "threads {threads}: bindings {:.1} ms ({} txns), with flows {:.1} ms ({} txns, +{} -{})",
            t1.as_secs_f64() * 1e3,
            p.n_txns(),
            t.elapsed().as_secs_f64() * 1e3,
            q.n_txns(),
            q.flows_added,
            q.flows_deleted
        );
    }
}
