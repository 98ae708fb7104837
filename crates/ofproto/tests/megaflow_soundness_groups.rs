//! Invariant 1 (megaflow soundness) on random pipelines with groups
//! (`testutil::groups::random_group_pipeline`: every group type, select groups with the
//! default, `dp_hash` and `hash` methods and random weights, fast-failover liveness through
//! ports and groups, chains and loops of groups, buckets with rewrites and resubmits).
//!
//! For each packet p: xlate(p) gives mask m and actions A; every q equal to p under m (p with
//! every header bit outside m re-drawn) must get exactly A. When the first pass froze for a
//! select group's `dp_hash`, the second pass is checked the same way on a bridge that pools
//! recirculation ids, for random `dp_hash` values, with the `dp_hash` bits outside the
//! second pass's mask re-drawn too.

use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::field::FieldId;
use flow::ofp::group::GroupCommand;
use ofproto::{Backend, Bridge, XlateIn, xlate_ro};
use proptest::prelude::*;
use testutil::groups::{random_group_packets, random_group_pipeline};
use testutil::rng::TestRng;

fn build(seed: u64, backend: Backend) -> (Bridge, Vec<FlowKey>, usize) {
    let mut rng = TestRng::new(seed);
    let p = random_group_pipeline(&mut rng, 6);
    let mut br = Bridge::ovs_sandbox(4, backend);
    let mut n_groups = 0;
    for g in &p.groups {
        if br.group_mod_text(GroupCommand::Add, g, 0).is_ok() {
            n_groups += 1;
        }
    }
    for f in &p.flows {
        let _ = br.flow_mod_text(ofproto::FlowModCommand::Add, f, 0);
    }
    let keys = random_group_packets(&mut rng, 8)
        .iter()
        .map(|(port, bytes)| {
            let mut k = FlowKey::ZERO;
            extract(bytes, &PacketMeta::port(*port), &mut k);
            k
        })
        .collect();
    (br, keys, n_groups)
}

/// `p` with the header bits (and `dp_hash` bits) outside `mask` re-drawn.
fn perturb(p: &FlowKey, mask: &flow::FlowMask, rng: &mut TestRng) -> FlowKey {
    let mut q = *p;
    let proto = FieldId::NwProto.get(p) as u8;
    let mut fields = vec![
        (FieldId::DlSrc, 0xffff_ffff_ffffu128),
        (FieldId::DlDst, 0xffff_ffff_ffff),
        (FieldId::NwSrc, 0xffff_ffff),
        (FieldId::NwDst, 0xffff_ffff),
        (FieldId::NwTos, 0xff),
        (FieldId::NwTtl, 0xff),
    ];
    match proto {
        6 | 17 => {
            fields.push((FieldId::TpSrc, 0xffff));
            fields.push((FieldId::TpDst, 0xffff));
        }
        1 => {
            fields.push((FieldId::TpSrc, 0xff));
            fields.push((FieldId::TpDst, 0xff));
        }
        _ => {}
    }
    if FieldId::DpHash.get(p) != 0 {
        // A computed dp_hash is never 0.
        fields.push((FieldId::DpHash, 0xffff_ffff));
    }
    for (f, domain) in fields {
        let r = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) & domain;
        let m = f.get_mask(mask);
        f.set(&mut q, (f.get(p) & m) | (r & !m & domain));
    }
    if FieldId::DpHash.get(p) != 0 && FieldId::DpHash.get(&q) == 0 {
        FieldId::DpHash.set(&mut q, FieldId::DpHash.get(p));
    }
    q
}

fn check_one(
    br: &Bridge,
    p: &FlowKey,
    rng: &mut TestRng,
    seed: u64,
    what: &str,
) -> Result<ofproto::XlateOut, TestCaseError> {
    let out = xlate_ro(br, &XlateIn::new(*p));
    for _ in 0..8 {
        let q = perturb(p, &out.mask, rng);
        prop_assert!(p.eq_masked(&q, &out.mask));
        let oq = xlate_ro(br, &XlateIn::new(q));
        prop_assert_eq!(
            ofproto::format_odp_actions(&oq.actions),
            ofproto::format_odp_actions(&out.actions),
            "seed {:#x} {}: q equal to p under the megaflow got other actions\n p={:?}\n q={:?}\n megaflow={}",
            seed,
            what,
            p,
            q,
            ofproto::trace::format_megaflow(p, &out)
        );
        prop_assert_eq!(oq.error, out.error);
    }
    Ok(out)
}

fn check(seed: u64, backend: Backend) -> Result<(), TestCaseError> {
    let (br, keys, n_groups) = build(seed, backend);
    prop_assert!(
        n_groups > 0 && br.n_rules() > 1,
        "seed {seed:#x}: empty pipeline"
    );
    br.pool_recirc_ids();
    let mut rng = TestRng::new(seed ^ 0x5eed);
    for (i, p) in keys.iter().enumerate() {
        let out = check_one(&br, p, &mut rng, seed, &format!("packet {i}"))?;
        for f in out.frozen.iter().filter(|f| !f.actions.is_empty()) {
            for _ in 0..3 {
                let mut k = f.resume;
                FieldId::DpHash.set(&mut k, u128::from(rng.next_u32().max(1)));
                check_one(&br, &k, &mut rng, seed, &format!("packet {i} dp_hash pass"))?;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn megaflow_is_sound_with_groups_tuple_space(seed in any::<u64>()) {
        check(seed, Backend::TupleSpace)?;
    }
}

proptest! {
    // The linear classifier makes group loops (up to 4096 lookups a packet) slow: fewer
    // cases, the same property.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn megaflow_is_sound_with_groups_linear(seed in any::<u64>()) {
        check(seed, Backend::Linear)?;
    }
}
