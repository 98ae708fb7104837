//! The parallel builds against the serial one, on the benchmark topology: the same flows,
//! whatever the strategy and thread count (the serial build is the trivially correct twin).
//! Needs the OVN NB schema (installed with `ovn-central`); skips without it.

use northd::build::{Ctx, build_serial};
use northd::engine::{Strategy, build};
use northd::lflow::Lflow;
use northd::nb::Nb;
use northd::topology::{self, Params};

fn sorted(mut v: Vec<Lflow>) -> Vec<Lflow> {
    v.sort_unstable_by(|a, b| a.key().cmp(&b.key()));
    v
}

#[test]
fn parallel_builds_equal_serial() {
    let Ok((_, schema)) = topology::read_schema(topology::DEFAULT_NB_SCHEMA) else {
        testutil::skip("no OVN NB schema (apt-get install ovn-central)");
        return;
    };
    for p in [
        Params::with_nodes(7),
        Params {
            nodes: 5,
            pods_per_node: 3,
            services: Some(40),
            nodeport_svcs: 2,
            ..Params::with_nodes(5)
        },
    ] {
        let db = topology::generate(&schema, &p).unwrap();
        let (nb, _) = Nb::from_db(&db);
        let ctx = Ctx::new(nb);
        let want = sorted(build_serial(&ctx));
        assert!(want.len() > 500);
        for strategy in [Strategy::PerThread, Strategy::BucketLocks { buckets: 7 }] {
            for threads in [1, 2, 3, 5] {
                let got = sorted(build(&ctx, threads, strategy));
                assert!(
                    got == want,
                    "{strategy:?} with {threads} threads differs from the serial build"
                );
            }
        }
    }
}

/// The model, the lookups and the wanted SB bindings read on several threads equal the
/// one-thread ones (what each thread builds is put back in the one-thread order).
#[test]
fn parallel_model_and_bindings_equal_one_thread() {
    let Ok((_, schema)) = topology::read_schema(topology::DEFAULT_NB_SCHEMA) else {
        testutil::skip("no OVN NB schema (apt-get install ovn-central)");
        return;
    };
    let p = Params {
        nodes: 6,
        pods_per_node: 4,
        services: Some(30),
        nodeport_svcs: 2,
        ..Params::with_nodes(6)
    };
    let db = topology::generate(&schema, &p).unwrap();
    let (nb1, d1) = Nb::from_db_threads(&db, 1);
    let ctx1 = Ctx::new_threads(nb1, 1);
    let flows1 = sorted(build_serial(&ctx1));
    let want1 = northd::sb::want_threads(&ctx1, 1);
    assert!(!want1.rtr_lb_sets.is_empty() && !want1.port_groups.is_empty());
    for t in [2, 3, 5] {
        let (nb, d) = Nb::from_db_threads(&db, t);
        assert_eq!(d.len(), d1.len(), "{t} threads: diagnostics");
        let ctx = Ctx::new_threads(nb, t);
        assert_eq!(
            ctx.switch_acls, ctx1.switch_acls,
            "{t} threads: applied ACLs"
        );
        assert!(
            sorted(build_serial(&ctx)) == flows1,
            "{t} threads: the model gives other flows"
        );
        assert!(
            northd::sb::want_threads(&ctx, t) == want1,
            "{t} threads: other SB bindings"
        );
    }
}
