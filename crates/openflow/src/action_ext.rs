//! Wire forms of the actions added for issue #17 (beyond groups and conjunction), as OVS 3.1
//! encodes them:
//!
//! | action | OpenFlow 1.0 (and NXM) | OpenFlow 1.1+ |
//! |---|---|---|
//! | `write_metadata:V/M` | `NXAST_WRITE_METADATA` (subtype 22) | `OFPIT_WRITE_METADATA` instruction |
//! | `mod_nw_ttl:N` | `NXAST_REG_LOAD` into `NXM_NX_IP_TTL` (decodes as `load`) | `OFPAT11_SET_NW_TTL` (23) |
//! | `exit` | `NXAST_EXIT` (subtype 17) | the same |
//! | `clone(A)` | `NXAST_CLONE` (subtype 42), 6 bytes of padding, then `A` | the same |
//!
//! After decoding, a list is checked for OVS's instruction order (`ofpacts_verify`: an
//! apply-action after `write_metadata` is `OFPBAC_UNSUPPORTED_ORDER`).

use crate::action::{EncodeCtx, end_action, nx_start};
use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid, unsupported};
use crate::header::version;
use flow::ofp::{Action, Mf, Subfield};

/// `NXAST_EXIT`.
pub const NXAST_EXIT: u16 = 17;
/// `NXAST_WRITE_METADATA`.
pub const NXAST_WRITE_METADATA: u16 = 22;
/// `OFPAT11_SET_NW_TTL`.
pub const OFPAT11_SET_NW_TTL: u16 = 23;
/// `NXAST_CLONE`.
pub const NXAST_CLONE: u16 = 42;

/// Decodes the body of `NXAST_CLONE` (after the subtype): 6 bytes of padding, then the
/// nested actions, which may hold no instruction.
/// Nesting is bounded ([`MAX_NESTING`], as the text parser bounds it) so that no message
/// can make decoding recurse deeply.
pub(crate) fn decode_nx_clone(a: &mut Rd<'_>, ver: u8) -> Result<Action> {
    a.skip(6)?;
    let depth = NESTING.with(|d| {
        let v = d.get();
        d.set(v + 1);
        v
    });
    let inner = if depth >= MAX_NESTING {
        Err(invalid("actions nested too deeply"))
    } else {
        crate::action::decode_actions(a.rest(), ver)
    };
    NESTING.with(|d| d.set(depth));
    let inner = inner?;
    verify_order(&inner, true)?;
    Ok(Action::Clone(inner))
}

/// Deepest `clone` nesting decoded.
pub const MAX_NESTING: u32 = 100;

thread_local! {
    static NESTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Decodes the body of `NXAST_WRITE_METADATA` (after the subtype).
pub(crate) fn decode_nx_write_metadata(a: &mut Rd<'_>) -> Result<Action> {
    let zeros = a.bytes(6)?;
    if zeros.iter().any(|b| *b != 0) {
        return Err(invalid("NXAST_WRITE_METADATA: NXBRC_MUST_BE_ZERO"));
    }
    let value = a.u64()?;
    let mask = a.u64()?;
    Ok(Action::WriteMetadata { value, mask })
}

/// Decodes `OFPAT11_SET_NW_TTL` (after type and length).
pub(crate) fn decode_of11_set_nw_ttl(a: &mut Rd<'_>) -> Result<Action> {
    Ok(Action::ModNwTtl(a.u8()?))
}

/// Encodes an action of this module; `None` for the others.
pub(crate) fn encode_ext(w: &mut Wr, a: &Action, cx: EncodeCtx) -> Option<Result<()>> {
    let v10 = cx.version == version::OF10;
    Some(match a {
        Action::WriteMetadata { value, mask } => {
            if v10 {
                let s = nx_start(w, NXAST_WRITE_METADATA);
                w.zeros(6);
                w.u64(*value);
                w.u64(*mask);
                end_action(w, s)
            } else {
                Err(unsupported("write_metadata inside an action list"))
            }
        }
        Action::ModNwTtl(t) => {
            if v10 {
                let load = Action::Load {
                    value: u128::from(*t),
                    dst: Subfield::whole(Mf::IpTtl),
                };
                crate::action::encode_actions(w, std::slice::from_ref(&load), cx)
            } else {
                let s = w.len();
                w.u16(OFPAT11_SET_NW_TTL);
                w.u16(0);
                w.u8(*t);
                end_action(w, s)
            }
        }
        Action::Exit => {
            let s = nx_start(w, NXAST_EXIT);
            end_action(w, s)
        }
        Action::Clone(inner) => {
            let s = nx_start(w, NXAST_CLONE);
            w.zeros(6);
            crate::action::encode_actions(w, inner, cx).and_then(|()| end_action(w, s))
        }
        _ => return None,
    })
}

/// Writes the `OFPIT_WRITE_METADATA` instruction.
pub(crate) fn encode_write_metadata_inst(w: &mut Wr, value: u64, mask: u64) {
    w.u16(crate::instruction::ofpit::WRITE_METADATA);
    w.u16(24);
    w.zeros(4);
    w.u64(value);
    w.u64(mask);
}

/// Decodes the body of an `OFPIT_WRITE_METADATA` instruction (after type and length).
pub(crate) fn decode_write_metadata_inst(i: &mut Rd<'_>) -> Result<Action> {
    i.skip(4)?;
    let value = i.u64()?;
    let mask = i.u64()?;
    Ok(Action::WriteMetadata { value, mask })
}

/// OVS `ovs_instruction_type` rank: apply-actions 1, `write_metadata` 4, `goto_table` 5.
fn rank(a: &Action) -> u8 {
    match a {
        Action::WriteMetadata { .. } => 4,
        Action::GotoTable(_) => 5,
        _ => 1,
    }
}

/// OVS `ofpacts_verify` on a decoded list: instructions in order, each at most once, none in
/// a nested list (`nested`).
pub(crate) fn verify_order(acts: &[Action], nested: bool) -> Result<()> {
    let mut inst = 0u8;
    for (i, a) in acts.iter().enumerate() {
        let next = rank(a);
        let bad = if inst == 1 { next < inst } else { next <= inst };
        if i > 0 && bad {
            return Err(invalid("instruction order (OFPBAC_UNSUPPORTED_ORDER)"));
        }
        if nested && next != 1 {
            return Err(invalid(
                "instruction in a nested action list (OFPBIC_UNSUP_INST)",
            ));
        }
        inst = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{decode_actions, encode_action_list};

    fn cx(version: u8) -> EncodeCtx {
        EncodeCtx {
            version,
            nw_proto: 0,
        }
    }

    #[test]
    fn round_trips() {
        let acts = vec![
            Action::Exit,
            Action::Clone(vec![Action::Exit, Action::Clone(vec![])]),
            Action::WriteMetadata {
                value: 0x1234,
                mask: 0xff00,
            },
        ];
        let b = encode_action_list(&acts, cx(version::OF10)).unwrap();
        assert_eq!(b.len(), 16 + (16 + 16 + 16) + 32);
        assert_eq!(decode_actions(&b, version::OF10).unwrap(), acts);
        let b = encode_action_list(&[Action::ModNwTtl(9)], cx(version::OF13)).unwrap();
        assert_eq!(b, [0, 23, 0, 8, 9, 0, 0, 0]);
        assert_eq!(
            decode_actions(&b, version::OF13).unwrap(),
            vec![Action::ModNwTtl(9)]
        );
        let b = encode_action_list(&[Action::ModNwTtl(9)], cx(version::OF10)).unwrap();
        assert_eq!(
            decode_actions(&b, version::OF10).unwrap(),
            vec![Action::Load {
                value: 9,
                dst: Subfield::whole(Mf::IpTtl)
            }]
        );
        // An apply-action after write_metadata is refused, as OVS refuses it.
        let bad = [
            Action::WriteMetadata {
                value: 1,
                mask: u64::MAX,
            },
            Action::Exit,
        ];
        let b = encode_action_list(&bad, cx(version::OF10)).unwrap();
        assert!(decode_actions(&b, version::OF10).is_err());
    }
}
