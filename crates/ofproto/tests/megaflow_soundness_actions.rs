//! Invariant 1 (megaflow soundness) on random pipelines that use the issue-#17 actions that
//! are not about groups or conjunction (`testutil::pipelines_ext::random_pipeline_ext`:
//! `write_metadata`, `mod_nw_ttl`, `exit`, … on top of `testutil::pipelines`' random
//! pipelines): for each packet p, xlate(p) gives mask m and actions A; every packet q equal
//! to p under m (header bits outside m re-drawn) must get exactly A. Both classifiers.
//! (`perturb` is the one of `megaflow_soundness.rs`, in `common`.)

mod common;

use common::check_sound;
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use ofproto::{Backend, Bridge, FlowMod, FlowModCommand, VlanMode};
use proptest::prelude::*;
use testutil::pipelines::{PipelineMix, flow_protocol, random_packets_for};
use testutil::pipelines_ext::{ExtMix, random_pipeline_ext};
use testutil::rng::TestRng;

/// The bridge, the packets' keys and how many of the pipeline's flows were accepted.
fn build(seed: u64, backend: Backend) -> (Bridge, Vec<FlowKey>, usize, usize) {
    let mut rng = TestRng::new(seed);
    let mix = PipelineMix {
        normal_permille: 300,
        loop_permille: 100,
        ..PipelineMix::default()
    };
    let p = random_pipeline_ext(&mut rng, &mix, &ExtMix::default());
    let packets = random_packets_for(&p, &mut rng, 8);
    let mut br = Bridge::ovs_sandbox(mix.n_ports as u16, backend);
    for c in &p.ports {
        let trunks = (!c.trunks.is_empty()).then(|| c.trunks.clone());
        br.set_port_vlan(
            flow::ofp::OfPort(c.port as u16),
            VlanMode::from_ovs(c.tag, trunks, c.vlan_mode.map(|m| m.as_str())),
        );
    }
    let (mut ext_ok, mut ext_total) = (0, 0);
    for f in &p.flows {
        let d = if flow_protocol(f) == "OpenFlow13" {
            flow::text::Dialect::OpenFlow13
        } else {
            flow::text::Dialect::OpenFlow10
        };
        // The added rules are the ones at priorities 301..=399 (see `pipelines_ext`).
        let prio = f
            .split(',')
            .find_map(|kv| kv.strip_prefix("priority="))
            .and_then(|v| v.parse::<u32>().ok());
        let ext = prio.is_some_and(|p| (301..=399).contains(&p));
        ext_total += usize::from(ext);
        if let Ok(spec) = flow::text::parse_flow_with(f, d) {
            let added = br.flow_mod(
                &FlowMod {
                    command: FlowModCommand::Add,
                    spec,
                    reset_counts: false,
                },
                0,
            );
            ext_ok += usize::from(ext && added.is_ok());
        }
    }
    let keys = packets
        .iter()
        .map(|pk| {
            let mut k = FlowKey::ZERO;
            extract(&pk.bytes, &PacketMeta::port(pk.in_port), &mut k);
            k
        })
        .collect();
    (br, keys, ext_ok, ext_total)
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
