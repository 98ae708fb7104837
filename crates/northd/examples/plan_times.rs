//! `cargo run --release -p northd --example plan_times -- NB.db SB.db`: times planning the SB
//! sync of NB.db's flows against SB.db (a file a northd has written), the step a daemon
//! recompute ends with.

use northd::{build::Ctx, engine, nb::Nb, sb};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let nbdb = ovsdb::file::read(&a[1]).unwrap_or_else(|e| panic!("{e}"));
    let sbdb = ovsdb::file::read(&a[2]).unwrap_or_else(|e| panic!("{e}"));
    let (nb, _) = Nb::from_db(&nbdb);
    let mut ctx = Ctx::new(nb);
    ctx.load_tunnel_keys(&sbdb);
    let flows = engine::build(&ctx, 1, engine::Strategy::PerThread);
    let want = sb::want(&ctx);
    for _ in 0..5 {
        let t = Instant::now();
        let p = sb::plan(&ctx, &want, None, &sbdb, None);
        let t1 = t.elapsed();
        let t = Instant::now();
        let mut cache = sb::FlowCache::default();
        let _ = sb::plan(&ctx, &want, Some(&flows), &sbdb, Some(&mut cache));
        eprintln!("cold (cache built) {:?}", t.elapsed());
        let t = Instant::now();
        let q = sb::plan(&ctx, &want, Some(&flows), &sbdb, Some(&mut cache));
        eprintln!(
            "bindings {t1:?} ({} txns), with flows {:?} ({} txns, +{} -{})",
            p.n_txns(),
            t.elapsed(),
            q.n_txns(),
            q.flows_added,
            q.flows_deleted
        );
    }
}
