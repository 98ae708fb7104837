//! Without Open vSwitch: the messages `ovs-ofctl` 3.1 sent in the oracle tests, recorded in
//! `tests/data/ovs_ofctl_messages.txt`, must decode and re-encode byte for byte; and the
//! decoders, fed random bytes and mutations of those messages, never panic, and whatever
//! decodes is a fixed point of decode → encode → decode.

use openflow::{Framer, Msg, version};
use proptest::prelude::*;
use std::sync::OnceLock;

fn recorded() -> &'static [Vec<u8>] {
    static R: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    R.get_or_init(|| {
        include_str!("data/ovs_ofctl_messages.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| hex::decode(l).expect("hex"))
            .collect()
    })
}

/// `OXM_OF_PACKET_TYPE` = Ethernet, which the model drops (see `nxm`).
const PACKET_TYPE_ETH: [u8; 8] = [0x80, 0x00, 0x58, 0x04, 0, 0, 0, 0];

#[test]
fn every_recorded_message_reencodes_byte_for_byte() {
    let msgs = recorded();
    assert!(msgs.len() > 1000, "{} recorded messages", msgs.len());
    let mut bad = Vec::new();
    let mut flow_mods = 0;
    for b in msgs {
        let m = match Msg::decode(b) {
            Ok(m) => m,
            Err(e) => {
                bad.push(format!("{}: {e}", hex::encode(b)));
                continue;
            }
        };
        if matches!(
            m.body,
            openflow::Body::FlowMod(_) | openflow::Body::NxFlowMod(_)
        ) {
            flow_mods += 1;
        }
        let again = m.encode().expect("encode");
        let pt = b.windows(8).any(|w| w == PACKET_TYPE_ETH);
        if again != *b && !(pt && Msg::decode(&again).as_ref() == Ok(&m)) {
            bad.push(format!(
                "{}\n  re-encoded {}",
                hex::encode(b),
                hex::encode(&again)
            ));
        }
    }
    assert!(flow_mods > 900, "{flow_mods} flow mods");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Decode → encode → decode is a fixed point for anything that decodes.
fn fixed_point(b: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(m) = Msg::decode(b) {
        let e = m
            .encode()
            .map_err(|e| TestCaseError::fail(format!("{m:?} does not encode: {e}")))?;
        let back = Msg::decode(&e).map_err(|err| {
            TestCaseError::fail(format!(
                "{m:?} encodes to {} which fails: {err}",
                hex::encode(&e)
            ))
        })?;
        prop_assert_eq!(&back, &m, "bytes {}", hex::encode(b));
        prop_assert_eq!(back.encode().ok(), Some(e));
    }
    Ok(())
}

/// Sub-decoders on raw bytes: no panic, and fixed points.
fn sub_decoders(b: &[u8]) -> Result<(), TestCaseError> {
    if let Ok((m, _)) = openflow::nxm::decode_tlvs(b) {
        for d in [
            openflow::nxm::Dialect::Nxm,
            openflow::nxm::Dialect::Oxm(version::OF13),
            openflow::nxm::Dialect::Oxm(version::OF15),
        ] {
            let e = openflow::nxm::encode_match(&m, d);
            let back = openflow::nxm::decode_tlvs(&e).map(|x| x.0);
            prop_assert_eq!(back.as_ref(), Ok(&m), "{:?} {}", d, hex::encode(b));
        }
    }
    for ver in [version::OF10, version::OF13, version::OF15] {
        if let Ok(acts) = openflow::action::decode_actions(b, ver) {
            let cx = openflow::action::EncodeCtx {
                version: ver,
                nw_proto: 0,
            };
            let e = openflow::action::encode_action_list(&acts, cx)
                .map_err(|e| TestCaseError::fail(format!("{acts:?}: {e}")))?;
            let back = openflow::action::decode_actions(&e, ver);
            prop_assert_eq!(back.as_ref(), Ok(&acts), "v{} {}", ver, hex::encode(b));
        }
        let _ = openflow::instruction::decode_instructions(b, ver);
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::Set(i, v)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        1 => (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

/// Applies mutations, then fixes the header length so most mutants still frame.
fn mutate(orig: &[u8], muts: &[Mutation], fix_len: bool) -> Vec<u8> {
    let mut b = orig.to_vec();
    for m in muts {
        if b.is_empty() {
            break;
        }
        let n = b.len();
        match m {
            Mutation::Flip(i, bit) => b[i % n] ^= 1 << bit,
            Mutation::Set(i, v) => b[i % n] = *v,
            Mutation::Truncate(i) => b.truncate(i % n),
            Mutation::Insert(i, v) => {
                let at = i % (n + 1);
                b.splice(at..at, v.iter().copied());
            }
            Mutation::Remove(i, k) => {
                let at = i % n;
                b.drain(at..(at + k).min(n));
            }
        }
    }
    if fix_len && b.len() >= 4 && b.len() <= usize::from(u16::MAX) {
        let l = (b.len() as u16).to_be_bytes();
        b[2] = l[0];
        b[3] = l[1];
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 50000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_recorded_messages_never_panic_and_round_trip(
        pick in any::<usize>(),
        muts in proptest::collection::vec(mutation(), 1..4),
        fix_len in any::<bool>(),
    ) {
        let msgs = recorded();
        let orig = &msgs[pick % msgs.len()];
        let b = mutate(orig, &muts, fix_len);
        fixed_point(&b)?;
        // The same bytes through the framer, split in two.
        let mut f = Framer::new();
        let cut = pick % (b.len() + 1);
        f.feed(&b[..cut]);
        let _ = f.next_message();
        f.feed(&b[cut..]);
        while let Ok(Some(m)) = f.next_message() {
            fixed_point(&m)?;
        }
        if b.len() > 8 {
            sub_decoders(&b[8..])?;
        }
    }

    #[test]
    fn random_bytes_never_panic(
        ver in 0u8..8,
        typ in any::<u8>(),
        body in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut b = vec![ver, typ, 0, 0, 0, 0, 0, 1];
        b.extend_from_slice(&body);
        let l = (b.len() as u16).to_be_bytes();
        b[2] = l[0];
        b[3] = l[1];
        fixed_point(&b)?;
        sub_decoders(&body)?;
        let mut f = Framer::new();
        f.feed(&body);
        while let Ok(Some(m)) = f.next_message() {
            fixed_point(&m)?;
        }
    }
}
