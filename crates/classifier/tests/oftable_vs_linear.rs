//! `OfTable` against the linear twin: random insert/remove sequences with random masks over
//! every kind of field (exact, prefix, arbitrary bits, 128-bit), random priorities with ties,
//! and after every step a batch of 0–33 random lookups checking the answer, the megaflow
//! wildcards' soundness and the structural invariants.

use classifier::oftable::{Config, OfTable};
use classifier::{LinearClassifier, RuleId};
use flow::{FieldId, FlowKey, FlowMask};
use proptest::prelude::*;

const FIELDS: [FieldId; 16] = [
    FieldId::InPort,
    FieldId::Metadata,
    FieldId::Reg0,
    FieldId::Reg3,
    FieldId::CtState,
    FieldId::DlDst,
    FieldId::DlType,
    FieldId::Vlan0Tci,
    FieldId::NwSrc,
    FieldId::NwDst,
    FieldId::Ipv6Src,
    FieldId::NwProto,
    FieldId::NwTos,
    FieldId::TpSrc,
    FieldId::TpDst,
    FieldId::TcpFlags,
];

/// A few values per field, so that rules and packets collide often.
fn seed(f: FieldId, s: u8) -> u128 {
    let v = match s % 5 {
        0 => 0,
        1 => u128::MAX,
        2 => 0x5555_5555_5555_5555_5555_5555_5555_5555,
        3 => 0xa5c3_0f00_ff11_2233_4455_6677_8899_aabb,
        _ => 0x8000_0000_0000_0000_0000_0000_0000_0001,
    };
    v & f.max()
}

#[derive(Debug, Clone)]
enum MaskKind {
    Exact,
    Prefix(u32),
    Bits(u128),
}

#[derive(Debug, Clone)]
struct FieldMatch {
    field: usize,
    kind: MaskKind,
    seed: u8,
    flip: u32,
}

#[derive(Debug, Clone)]
enum Op {
    Insert {
        priority: u32,
        fields: Vec<FieldMatch>,
    },
    Remove(usize),
}

fn field_match() -> impl Strategy<Value = FieldMatch> {
    (
        0..FIELDS.len(),
        prop_oneof![
            Just(MaskKind::Exact),
            (1u32..128).prop_map(MaskKind::Prefix),
            any::<u128>().prop_map(MaskKind::Bits),
        ],
        any::<u8>(),
        0u32..160,
    )
        .prop_map(|(field, kind, seed, flip)| FieldMatch {
            field,
            kind,
            seed,
            flip,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u32..5, prop::collection::vec(field_match(), 0..5))
            .prop_map(|(priority, fields)| Op::Insert { priority, fields }),
        1 => any::<usize>().prop_map(Op::Remove),
    ]
}

/// Indices in [`FIELDS`] of the 5-tuple fields (plus `dl_type`): rules on these use at most
/// four key words, so every subtable takes `lookup`'s fixed-width scan (`scan_fixed`).
const FIVE_TUPLE: [usize; 6] = [6, 8, 9, 11, 13, 14];

/// Like [`op`], over the 5-tuple fields only, with many priority ties.
fn five_tuple_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u32..3, prop::collection::vec(field_match(), 0..5)).prop_map(|(priority, fields)| {
            let fields = fields
                .into_iter()
                .map(|mut f| {
                    f.field = FIVE_TUPLE[f.field % FIVE_TUPLE.len()];
                    f
                })
                .collect();
            Op::Insert { priority, fields }
        }),
        1 => any::<usize>().prop_map(Op::Remove),
    ]
}

fn build(fields: &[FieldMatch]) -> (FlowKey, FlowMask) {
    let mut k = FlowKey::ZERO;
    let mut m = FlowMask::CATCHALL;
    for fm in fields {
        let f = FIELDS[fm.field];
        let bits = f.bits();
        let mask = match fm.kind {
            MaskKind::Exact => f.max(),
            MaskKind::Prefix(l) => {
                let l = l % (bits + 1);
                if l == 0 {
                    0
                } else {
                    (f.max() >> (bits - l)) << (bits - l)
                }
            }
            MaskKind::Bits(b) => b & f.max(),
        };
        let mut v = seed(f, fm.seed);
        if fm.flip < bits {
            v ^= 1 << fm.flip;
        }
        f.set(&mut k, v);
        let old = f.get_mask(&m);
        f.set_mask(&mut m, old | mask);
    }
    (k, m)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn u128(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }
}

/// A packet near the rules: every field one of its seeds, sometimes with a bit flipped.
fn packet(rng: &mut Rng) -> FlowKey {
    let mut k = FlowKey::ZERO;
    for f in FIELDS {
        if rng.next().is_multiple_of(4) {
            continue; // leave zero
        }
        let mut v = seed(f, (rng.next() % 5) as u8);
        if rng.next().is_multiple_of(3) {
            v ^= 1 << (rng.next() % u64::from(f.bits()));
        }
        f.set(&mut k, v);
    }
    // Often an IPv6 packet, so that `lookup_wc` consults the IPv6 prefix tries (it does so
    // only for packets that can carry the field).
    if rng.next().is_multiple_of(3) {
        FieldId::DlType.set(&mut k, 0x86dd);
    }
    // Occasionally a bit outside every field, which no rule may look at.
    if rng.next().is_multiple_of(8) {
        k.w[31] = rng.next();
    }
    k
}

fn check(cfg: Config, ops: Vec<Op>, seed: u64) -> Result<(), TestCaseError> {
    let mut rng = Rng(seed);
    let mut fast: OfTable<u32> = OfTable::with_config(cfg);
    let mut slow: LinearClassifier<u32> = LinearClassifier::new();
    let mut live: Vec<(RuleId, RuleId, u32)> = Vec::new();
    let mut tag = 0u32;
    for op in ops {
        match op {
            Op::Insert { priority, fields } => {
                let (k, m) = build(&fields);
                tag += 1;
                let a = fast.insert(priority, &k, &m, tag);
                let b = slow.insert(priority, &k, &m, tag);
                live.push((a, b, tag));
                let r = fast.get(a).map(|r| (r.priority, r.value));
                prop_assert_eq!(r, Some((priority, tag)));
                let (rk, rm) = fast.rule_match(fast.get(a).unwrap());
                prop_assert_eq!(rm, m);
                prop_assert_eq!(rk, k.masked(&m));
            }
            Op::Remove(i) => {
                if live.is_empty() {
                    prop_assert_eq!(fast.remove(RuleId(i as u64)), None);
                    continue;
                }
                let (a, b, t) = live.swap_remove(i % live.len());
                prop_assert_eq!(fast.remove(a), Some(t));
                prop_assert_eq!(slow.remove(b), Some(t));
                prop_assert_eq!(fast.remove(a), None);
                prop_assert!(fast.get(a).is_none());
            }
        }
        prop_assert_eq!(fast.len(), slow.len());
        if let Err(e) = fast.check_invariants() {
            return Err(TestCaseError::fail(e));
        }
        let batch = rng.next() % 34;
        for _ in 0..batch {
            let p = packet(&mut rng);
            let want = slow.lookup(&p).map(|r| r.value);
            prop_assert_eq!(fast.lookup(&p).map(|r| r.value), want, "lookup {:?}", p);
            let mut wc = FlowMask::CATCHALL;
            prop_assert_eq!(fast.lookup_wc(&p, &mut wc).map(|r| r.value), want);
            // Soundness: a packet equal to p under wc gets the same answer.
            for _ in 0..4 {
                let mut q = p;
                for i in 0..q.w.len() {
                    let noise = if rng.next().is_multiple_of(2) {
                        rng.next()
                    } else {
                        rng.u128() as u64 & packet(&mut rng).w[i]
                    };
                    q.w[i] = (p.w[i] & wc.w[i]) | (noise & !wc.w[i]);
                }
                let got = slow.lookup(&q).map(|r| r.value);
                prop_assert_eq!(
                    got,
                    want,
                    "wildcards unsound: p={:?} q={:?} wc={:?}",
                    p,
                    q,
                    wc
                );
                prop_assert_eq!(fast.lookup(&q).map(|r| r.value), want);
            }
        }
    }
    Ok(())
}

fn config() -> impl Strategy<Value = Config> {
    (
        1u32..6,
        1u32..9,
        1u32..18,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(0u32), 1u32..5],
    )
        .prop_map(
            |(c, w, n, staged, band_priorities, prefix_tries, split_limit)| Config {
                collision_limit: c,
                wide_prefix_step: w,
                narrow_prefix_step: n,
                staged,
                band_priorities,
                relax_exact_narrow: staged ^ band_priorities,
                prefix_tries,
                split_limit,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn oftable_matches_linear(cfg in config(), ops in prop::collection::vec(op(), 0..80), seed: u64) {
        check(cfg, ops, seed)?;
    }

    #[test]
    fn oftable_matches_linear_default(ops in prop::collection::vec(op(), 0..200), seed: u64) {
        check(Config::default(), ops, seed)?;
    }

    #[test]
    fn oftable_matches_linear_five_tuple(
        cfg in config(),
        ops in prop::collection::vec(five_tuple_op(), 0..120),
        seed: u64,
    ) {
        check(cfg, ops, seed)?;
    }
}

#[test]
fn staged_miss_unwildcards_only_consulted_stages() {
    // One rule on dl_type (L2) and tp_dst (L4): a packet with another dl_type misses in the
    // L2 stage, so the megaflow must not look at tp_dst.
    let mut t: OfTable<u8> = OfTable::new();
    let mut k = FlowKey::ZERO;
    let mut m = FlowMask::CATCHALL;
    FieldId::DlType.set(&mut k, 0x0800);
    FieldId::DlType.unwildcard(&mut m);
    FieldId::TpDst.set(&mut k, 80);
    FieldId::TpDst.unwildcard(&mut m);
    t.insert(10, &k, &m, 1);
    let mut p = FlowKey::ZERO;
    FieldId::DlType.set(&mut p, 0x86dd);
    FieldId::TpDst.set(&mut p, 80);
    let mut wc = FlowMask::CATCHALL;
    assert!(t.lookup_wc(&p, &mut wc).is_none());
    assert_eq!(FieldId::DlType.get_mask(&wc), 0xffff);
    assert_eq!(FieldId::TpDst.get_mask(&wc), 0);
    // A hit looks at both.
    let mut wc = FlowMask::CATCHALL;
    assert_eq!(t.lookup_wc(&k, &mut wc).map(|r| r.value), Some(1));
    assert_eq!(FieldId::TpDst.get_mask(&wc), 0xffff);
}

#[test]
fn ties_go_to_the_earliest_inserted() {
    let mut t: OfTable<&str> = OfTable::new();
    let any = FlowMask::CATCHALL;
    let a = t.insert(5, &FlowKey::ZERO, &any, "first");
    let _b = t.insert(5, &FlowKey::ZERO, &any, "second");
    assert_eq!(t.lookup(&FlowKey::ZERO).map(|r| r.value), Some("first"));
    assert_eq!(t.remove(a), Some("first"));
    assert_eq!(t.lookup(&FlowKey::ZERO).map(|r| r.value), Some("second"));
    assert!(t.check_invariants().is_ok());
}
