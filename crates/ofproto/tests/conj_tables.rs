//! Conjunctive matches without OVS: random conjunctive tables (`testutil::conj`) through both
//! table backends against `ofproto::conj::reference_lookup` (a scan of every rule), random
//! adds/deletes/modifies in between; the megaflow soundness property (invariant 1) on the same
//! pipelines; the flow-mod-time refusals.

use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::field::FieldId;
use ofproto::conj::{RefRule, reference_lookup};
use ofproto::{Backend, Bridge, FlowModCommand, XlateIn, xlate_ro};
use proptest::prelude::*;
use testutil::conj::{ConjCase, ovn_acl_cases, random_conj_case, random_packet};
use testutil::rng::TestRng;

fn bridge(c: &ConjCase, backend: Backend) -> Bridge {
    let mut br = Bridge::ovs_sandbox(4, backend);
    br.add_flows_text(&c.flows.join("\n"), 0)
        .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    br
}

fn key_of(p: &testutil::conj::ConjPacket) -> FlowKey {
    let mut k = FlowKey::ZERO;
    extract(&p.bytes(), &PacketMeta::port(p.in_port), &mut k);
    k
}

/// Table 0's lookup in `br` against the reference scan of the same rules.
fn check_table0(br: &Bridge, key: &FlowKey, what: &str) -> Result<(), TestCaseError> {
    let t = br.table(0).expect("table 0");
    let rules: Vec<_> = t.iter().collect();
    let refs: Vec<RefRule<'_>> = rules
        .iter()
        .map(|(h, r)| {
            (
                h.0,
                r.priority,
                &r.match_.key,
                &r.match_.mask,
                r.actions.as_slice(),
            )
        })
        .collect();
    let want = reference_lookup(&refs, key);
    let mut wc = flow::FlowMask::CATCHALL;
    let got = t.lookup_wc(key, &mut wc).map(|(h, _)| h.0);
    let show = |h: Option<u64>| {
        h.and_then(|h| rules.iter().find(|(x, _)| x.0 == h))
            .map(|(_, r)| {
                format!(
                    "priority={},{} actions={}",
                    r.priority,
                    flow::text::format_match_priority(&r.match_, 0x8000),
                    flow::text::format_actions(&r.actions)
                )
            })
            .unwrap_or_else(|| "(none)".into())
    };
    prop_assert_eq!(
        got,
        want,
        "{}: table says {} but the reference says {} for {:?}",
        what,
        show(got),
        show(want),
        key
    );
    prop_assert_eq!(FieldId::ConjId.get_mask(&wc), 0, "conj_id left in the mask");
    Ok(())
}

fn run_case(seed: u64, backend: Backend) -> Result<(), TestCaseError> {
    let c = random_conj_case(seed, 1 + (seed % 6) as usize, 24);
    let mut br = bridge(&c, backend);
    let mut rng = TestRng::new(seed ^ 0xc0);
    for p in &c.packets {
        check_table0(&br, &key_of(p), &format!("seed {seed:#x}"))?;
    }
    // Change the table: delete some rules, modify some soft rules into hard ones and back.
    for (i, f) in c.flows.iter().enumerate() {
        if !f.starts_with("table=0") || !rng.chance(1, 4) {
            continue;
        }
        let (m, _) = f.split_once(",actions=").expect("actions");
        if i % 2 == 0 {
            br.flow_mod_text(FlowModCommand::DeleteStrict, m, 1)
                .map_err(|e| TestCaseError::fail(format!("{m}: {e}")))?;
        } else {
            let acts = if rng.chance(1, 2) {
                "output:3".to_string()
            } else {
                format!("conjunction({},1/2)", 1 + rng.below(4))
            };
            br.flow_mod_text(
                FlowModCommand::ModifyStrict,
                &format!("{m},actions={acts}"),
                1,
            )
            .map_err(|e| TestCaseError::fail(format!("{m}: {e}")))?;
        }
        let p = random_packet(&mut rng);
        check_table0(&br, &key_of(&p), &format!("seed {seed:#x} after a change"))?;
        for p in &c.packets {
            check_table0(&br, &key_of(p), &format!("seed {seed:#x} after a change"))?;
        }
    }
    Ok(())
}

/// Invariant 1 on a conjunctive pipeline: every packet equal to p under p's megaflow gets p's
/// actions.
fn soundness(seed: u64, backend: Backend) -> Result<(), TestCaseError> {
    let c = random_conj_case(seed, 1 + (seed % 6) as usize, 12);
    let br = bridge(&c, backend);
    let mut rng = TestRng::new(seed ^ 0x5eed);
    for p in &c.packets {
        let k = key_of(p);
        let out = xlate_ro(&br, &XlateIn::new(k));
        prop_assert_eq!(FieldId::ConjId.get_mask(&out.mask), 0);
        for _ in 0..12 {
            // Redraw every L3/L4 bit outside the mask (addresses, ports, tos, ttl), keeping
            // the packet something extract could produce.
            let mut q = k;
            for (f, dom) in [
                (FieldId::NwSrc, 0xffff_ffffu128),
                (FieldId::NwDst, 0xffff_ffff),
                (FieldId::TpSrc, 0xffff),
                (FieldId::TpDst, 0xffff),
                (FieldId::NwTos, 0xff),
                (FieldId::NwTtl, 0xff),
                (FieldId::InPort, 3),
            ] {
                let m = f.get_mask(&out.mask);
                let mut r = u128::from(rng.next_u64()) & dom;
                if f == FieldId::InPort {
                    r += 1;
                }
                // Bias the redraw towards the pools so that rules actually match.
                if rng.chance(1, 2) && f != FieldId::InPort {
                    let alt = key_of(&random_packet(&mut rng));
                    r = f.get(&alt);
                }
                f.set(&mut q, (f.get(&k) & m) | (r & !m));
            }
            if FieldId::InPort.get_mask(&out.mask) != 0 {
                FieldId::InPort.set(&mut q, FieldId::InPort.get(&k));
            }
            prop_assert!(k.eq_masked(&q, &out.mask));
            let oq = xlate_ro(&br, &XlateIn::new(q));
            prop_assert_eq!(
                &oq.actions,
                &out.actions,
                "seed {:#x}: q equal to p under the megaflow got other actions\n p={:?}\n q={:?}\n megaflow={}",
                seed,
                k,
                q,
                ofproto::trace::format_megaflow(&k, &out)
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn conjunctive_lookup_equals_reference_tuple_space(seed in any::<u64>()) {
        run_case(seed, Backend::TupleSpace)?;
    }

    #[test]
    fn conjunctive_lookup_equals_reference_linear(seed in any::<u64>()) {
        run_case(seed, Backend::Linear)?;
    }

    #[test]
    fn conjunctive_megaflow_is_sound_tuple_space(seed in any::<u64>()) {
        soundness(seed, Backend::TupleSpace)?;
    }

    #[test]
    fn conjunctive_megaflow_is_sound_linear(seed in any::<u64>()) {
        soundness(seed, Backend::Linear)?;
    }
}

#[test]
fn ovn_shapes_equal_reference() {
    for c in ovn_acl_cases() {
        for backend in [Backend::TupleSpace, Backend::Linear] {
            let br = bridge(&c, backend);
            for p in &c.packets {
                check_table0(&br, &key_of(p), &c.name).unwrap();
            }
        }
    }
}

#[test]
fn flow_mod_refuses_conjunction_with_other_actions() {
    let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
    let e = br
        .flow_mod_text(
            FlowModCommand::Add,
            "ip,actions=conjunction(1,1/2),output:1",
            0,
        )
        .unwrap_err();
    assert!(
        e.to_string().contains(
            "\"conjunction\" actions may be used along with \"note\" but not any other kind of action (such as the \"output\" action used here)"
        ),
        "{e}"
    );
    assert_eq!(br.n_rules(), 0);
    br.flow_mod_text(
        FlowModCommand::Add,
        "ip,actions=conjunction(1,1/2),note:01",
        0,
    )
    .unwrap();
    // A modify that would mix them is refused and changes nothing.
    let e = br
        .flow_mod_text(
            FlowModCommand::Modify,
            "ip,actions=conjunction(1,1/2),resubmit(,1)",
            0,
        )
        .unwrap_err();
    assert!(e.to_string().contains("\"resubmit\" action"), "{e}");
    assert_eq!(br.table(0).unwrap().n_soft(), 1);
}
