//! Invariant 1 (megaflow soundness) as a property test.
//!
//! Random pipelines (`testutil::pipelines::random_pipeline`: 1–8 tables, matches over every
//! field kind with arbitrary and prefix masks, resubmit/goto chains including loops,
//! set_field/load/move/mod_*, VLAN push/pop, dec_ttl, NORMAL with VLAN port modes, FLOOD, ALL,
//! ct) × random packets: for each packet p, xlate(p) gives mask m and actions A; every packet q
//! that equals p on m (here: p with every header bit outside m re-drawn at random, within
//! what a real packet can carry) must get exactly A from xlate(q). Run with both classifiers.

mod common;

use common::check_sound;
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use ofproto::{Backend, Bridge, FlowMod, FlowModCommand, VlanMode};
use proptest::prelude::*;
use testutil::pipelines::{PipelineMix, flow_protocol, random_packets_for, random_pipeline};
use testutil::rng::TestRng;

fn build(seed: u64, backend: Backend) -> (Bridge, Vec<FlowKey>) {
    let mut rng = TestRng::new(seed);
    let mix = PipelineMix {
        normal_permille: 400,
        loop_permille: 100,
        ..PipelineMix::default()
    };
    let p = random_pipeline(&mut rng, &mix);
    let packets = random_packets_for(&p, &mut rng, 6);
    let mut br = Bridge::ovs_sandbox(mix.n_ports as u16, backend);
    for c in &p.ports {
        let trunks = (!c.trunks.is_empty()).then(|| c.trunks.clone());
        br.set_port_vlan(
            flow::ofp::OfPort(c.port as u16),
            VlanMode::from_ovs(c.tag, trunks, c.vlan_mode.map(|m| m.as_str())),
        );
    }
    for f in &p.flows {
        let d = if flow_protocol(f) == "OpenFlow13" {
            flow::text::Dialect::OpenFlow13
        } else {
            flow::text::Dialect::OpenFlow10
        };
        if let Ok(spec) = flow::text::parse_flow_with(f, d) {
            let _ = br.flow_mod(
                &FlowMod {
                    command: FlowModCommand::Add,
                    spec,
                    reset_counts: false,
                },
                0,
            );
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
    (br, keys)
}

fn check(seed: u64, backend: Backend) -> Result<(), TestCaseError> {
    let (br, keys) = build(seed, backend);
    prop_assert!(
        !keys.is_empty() && br.n_rules() > 0,
        "empty pipeline for seed {seed:#x}"
    );
    check_sound(&br, &keys, seed)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn megaflow_is_sound_tuple_space(seed in any::<u64>()) {
        check(seed, Backend::TupleSpace)?;
    }

    #[test]
    fn megaflow_is_sound_linear(seed in any::<u64>()) {
        check(seed, Backend::Linear)?;
    }
}
