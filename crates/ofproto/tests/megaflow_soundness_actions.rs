//! Invariant 1 (megaflow soundness) on random pipelines that use the issue-#17 actions that
//! are not about groups or conjunction (`testutil::pipelines_ext::random_pipeline_ext`:
//! `write_metadata`, `mod_nw_ttl`, `exit`, … on top of `testutil::pipelines`' random
//! pipelines): for each packet p, xlate(p) gives mask m and actions A; every packet q equal
//! to p under m (header bits outside m re-drawn) must get exactly A. Both classifiers.
//! (`perturb` is the one of `megaflow_soundness.rs`, in `common`.)

mod common;

use common::{bridge_for, check_sound};
use flow::FlowKey;
use ofproto::{Backend, Bridge};
use proptest::prelude::*;
use testutil::pipelines::PipelineMix;
use testutil::pipelines_ext::{ExtMix, random_pipeline_ext};
use testutil::rng::TestRng;

/// The bridge, the packets' keys and how many of the pipeline's added flows were accepted.
fn build(seed: u64, backend: Backend) -> (Bridge, Vec<FlowKey>, usize, usize) {
    let mut rng = TestRng::new(seed);
    let mix = PipelineMix {
        normal_permille: 300,
        loop_permille: 100,
        ..PipelineMix::default()
    };
    let p = random_pipeline_ext(&mut rng, &mix, &ExtMix::default());
    bridge_for(&p, &mix, &mut rng, backend)
}

fn check(seed: u64, backend: Backend) -> Result<(), TestCaseError> {
    let (br, keys, ext_ok, ext_total) = build(seed, backend);
    prop_assert!(!keys.is_empty() && br.n_rules() > 0);
    // The added rules are all valid OpenFlow: every one must be installed.
    prop_assert_eq!(
        ext_ok,
        ext_total,
        "seed {:#x}: an added rule was refused",
        seed
    );
    check_sound(&br, &keys, seed)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn megaflow_is_sound_with_issue17_actions_tuple_space(seed in any::<u64>()) {
        check(seed, Backend::TupleSpace)?;
    }

    #[test]
    fn megaflow_is_sound_with_issue17_actions_linear(seed in any::<u64>()) {
        check(seed, Backend::Linear)?;
    }
}
