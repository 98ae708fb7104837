//! Invariant 6 (ARCHITECTURE.md): the established fast path equals the full path. Random
//! sequences of packets (TCP/UDP/ICMP flows over IPv4 and IPv6, both directions interleaved,
//! in-, near- and out-of-window segments, every flag combination, RST, FIN, retransmits,
//! ICMP errors, NAT, marks and labels), zone changes, time steps across every timeout,
//! sweeps, flushes, global and zone limits, liberal mode, and raw garbage run through one
//! tracker by `execute` and through another by `execute_cached` (8-slot cache, so eviction
//! and stale references happen); ct_state/mark/label/orig, the rewritten frame, the dump,
//! the counters and the limits must agree after every step. Also invariant 5: no panic.

use conntrack::fuzzing::run_sequence;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn fast_path_equals_full_path(data in proptest::collection::vec(any::<u8>(), 0..1500)) {
        if let Err(e) = run_sequence(&data) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let ct = conntrack::Conntrack::new(conntrack::Config::default());
        let mut f = data.clone();
        let mut md = flow::extract::PacketMeta::port(1);
        let act = conntrack::CtAction { commit: true, nat: Some(conntrack::NatAction::default()), ..Default::default() };
        ct.execute(&mut f, &mut md, &act, 1);
        prop_assert!(md.ct_state & flow::field::ct_state::TRACKED != 0);
    }
}

/// Long deterministic sequences (a cheap xorshift stream), so every run covers deep states.
#[test]
fn long_pseudorandom_sequences_agree() {
    let mut s = std::env::var("CT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
    let rounds: usize = std::env::var("CT_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    for round in 0..rounds {
        let data: Vec<u8> = (0..6000)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect();
        if let Err(e) = run_sequence(&data) {
            panic!("round {round}: {e}");
        }
    }
}

/// The driver reaches the states it is meant to exercise (so the agreement above is not
/// vacuous): established and related packets, window failures, commits, refusals, NAT
/// exhaustion, expiry, and cache hits as well as misses.
#[test]
fn sequences_reach_deep_states() {
    let mut s = 0x0123_4567_89ab_cdefu64;
    let mut tot = conntrack::CtStats::default();
    let (mut hits, mut misses) = (0, 0);
    for _ in 0..40 {
        let data: Vec<u8> = (0..6000)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect();
        let (st, (h, m)) = conntrack::fuzzing::run_sequence_stats(&data).expect("agree");
        tot.established += st.established;
        tot.new += st.new;
        tot.related += st.related;
        tot.committed += st.committed;
        tot.refused_global_limit += st.refused_global_limit;
        tot.refused_zone_limit += st.refused_zone_limit;
        tot.nat_exhausted += st.nat_exhausted;
        tot.expired += st.expired;
        tot.replaced += st.replaced;
        if tot.invalid_by_reason.is_empty() {
            tot.invalid_by_reason = st.invalid_by_reason.clone();
        } else {
            for (a, b) in tot.invalid_by_reason.iter_mut().zip(&st.invalid_by_reason) {
                a.1 += b.1;
            }
        }
        hits += h;
        misses += m;
    }
    println!("{tot:?} hits {hits} misses {misses}");
    assert!(tot.established > 0 && tot.new > 0 && tot.related > 0 && tot.committed > 0);
    assert!(tot.refused_global_limit > 0 && tot.refused_zone_limit > 0);
    assert!(tot.expired > 0 && tot.replaced > 0);
    let inv = |r: conntrack::InvalidReason| {
        tot.invalid_by_reason
            .iter()
            .find(|x| x.0 == r)
            .map_or(0, |x| x.1)
    };
    assert!(inv(conntrack::InvalidReason::TcpWindow) > 0);
    assert!(inv(conntrack::InvalidReason::TcpFlags) > 0);
    assert!(hits > 0 && misses > 0);
}
