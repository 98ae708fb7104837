//! Wire forms of the actions added for issue #17 (beyond groups and conjunction), as OVS 3.1
//! encodes them:
//!
//! | action | OpenFlow 1.0 (and NXM) | OpenFlow 1.1+ |
//! |---|---|---|
//! | `write_metadata:V/M` | `NXAST_WRITE_METADATA` (subtype 22) | `OFPIT_WRITE_METADATA` instruction |
//! | `mod_nw_ttl:N` | `NXAST_REG_LOAD` into `NXM_NX_IP_TTL` (decodes as `load`) | `OFPAT11_SET_NW_TTL` (23) |
//! | `exit` | `NXAST_EXIT` (subtype 17) | the same |
//! | `clone(A)` | `NXAST_CLONE` (subtype 42), 6 bytes of padding, then `A` | the same |
//! | `write_actions(A)` | nothing (OVS sends nothing) | `OFPIT_WRITE_ACTIONS` instruction |
//! | `clear_actions` | nothing | `OFPIT_CLEAR_ACTIONS` instruction |
//! | `set_queue:Q` | `NXAST_SET_QUEUE` (subtype 4) | `OFPAT11_SET_QUEUE` (21) |
//! | `pop_queue` | `NXAST_POP_QUEUE` (subtype 5) | the same |
//! | `enqueue:P:Q` | `OFPAT10_ENQUEUE` (11) | `set_queue:Q`, `output:P`, `pop_queue` |
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
/// `NXAST_SET_QUEUE`.
pub const NXAST_SET_QUEUE: u16 = 4;
/// `NXAST_POP_QUEUE`.
pub const NXAST_POP_QUEUE: u16 = 5;
/// `OFPAT11_SET_QUEUE`.
pub const OFPAT11_SET_QUEUE: u16 = 21;
/// `OFPAT10_ENQUEUE`.
pub const OFPAT10_ENQUEUE: u16 = 11;

/// Decodes `OFPAT10_ENQUEUE` (after type and length): port, 6 bytes of padding, queue.
pub(crate) fn decode_of10_enqueue(a: &mut Rd<'_>) -> Result<Action> {
    let port = flow::ofp::OfPort(a.u16()?);
    a.skip(6)?;
    let queue = a.u32()?;
    // OVS `decode_OFPAT_RAW10_ENQUEUE`.
    if port.0 >= flow::ofp::OfPort::MAX.0
        && port != flow::ofp::OfPort::IN_PORT
        && port != flow::ofp::OfPort::LOCAL
    {
        return Err(invalid("enqueue to a bad port (OFPBAC_BAD_OUT_PORT)"));
    }
    Ok(Action::Enqueue { port, queue })
}

/// Decodes the actions of an `OFPIT_WRITE_ACTIONS` instruction: only what OVS allows in an
/// action set (`ofpacts_decode_for_action_set`: else `OFPBAC_BAD_TYPE`).
pub(crate) fn decode_write_actions(b: &[u8], ver: u8) -> Result<Action> {
    let inner = crate::action::decode_actions(b, ver)?;
    if !inner.iter().all(flow::text::allowed_in_action_set) {
        return Err(invalid("disallowed action in action set (OFPBAC_BAD_TYPE)"));
    }
    Ok(Action::WriteActions(inner))
}

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
        // Instructions: written by `instruction::encode_instructions` in OpenFlow 1.1+;
        // OpenFlow 1.0 has nothing for them (OVS sends nothing).
        Action::WriteActions(_) | Action::ClearActions => {
            if v10 {
                Ok(())
            } else {
                Err(unsupported("instruction inside an action list"))
            }
        }
        Action::SetQueue(q) => {
            if v10 {
                let s = nx_start(w, NXAST_SET_QUEUE);
                w.zeros(2);
                w.u32(*q);
                end_action(w, s)
            } else {
                let s = w.len();
                w.u16(OFPAT11_SET_QUEUE);
                w.u16(0);
                w.u32(*q);
                end_action(w, s)
            }
        }
        Action::PopQueue => {
            let s = nx_start(w, NXAST_POP_QUEUE);
            end_action(w, s)
        }
        Action::Enqueue { port, queue } => {
            if v10 {
                let s = w.len();
                w.u16(OFPAT10_ENQUEUE);
                w.u16(0);
                w.u16(port.0);
                w.zeros(6);
                w.u32(*queue);
                end_action(w, s)
            } else {
                let acts = [
                    Action::SetQueue(*queue),
                    Action::output(*port),
                    Action::PopQueue,
                ];
                crate::action::encode_actions(w, &acts, cx)
            }
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

/// OVS `ovs_instruction_type` rank: apply-actions 1, `clear_actions` 2, `write_actions` 3,
/// `write_metadata` 4, `goto_table` 5.
pub(crate) fn rank(a: &Action) -> u8 {
    match a {
        Action::ClearActions => 2,
        Action::WriteActions(_) => 3,
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
    use crate::codec::Wr;

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

    #[test]
    fn queues_and_action_set_round_trip() {
        use flow::ofp::OfPort;
        let acts = vec![
            Action::SetQueue(7),
            Action::Enqueue {
                port: OfPort(3),
                queue: 9,
            },
            Action::PopQueue,
        ];
        let b = encode_action_list(&acts, cx(version::OF10)).unwrap();
        assert_eq!(b.len(), 16 + 16 + 16);
        assert_eq!(decode_actions(&b, version::OF10).unwrap(), acts);
        // OpenFlow 1.3: enqueue is sent as set_queue, output, pop_queue.
        let b = encode_action_list(&acts, cx(version::OF13)).unwrap();
        assert_eq!(
            decode_actions(&b, version::OF13).unwrap(),
            vec![
                Action::SetQueue(7),
                Action::SetQueue(9),
                Action::output(OfPort(3)),
                Action::PopQueue,
                Action::PopQueue,
            ]
        );
        // Instructions, in OVS's order.
        let list = vec![
            Action::output(OfPort(1)),
            Action::ClearActions,
            Action::WriteActions(vec![Action::SetQueue(2), Action::output(OfPort(4))]),
            Action::WriteMetadata {
                value: 1,
                mask: u64::MAX,
            },
            Action::GotoTable(3),
        ];
        let mut w = Wr::new();
        crate::instruction::encode_instructions(&mut w, &list, cx(version::OF13)).unwrap();
        let b = w.buf;
        assert_eq!(
            crate::instruction::decode_instructions(&b, version::OF13).unwrap(),
            list
        );
        // What an action set may not hold is refused (OVS `OFPBAC_BAD_TYPE`).
        let mut w = Wr::new();
        let bad = [Action::WriteActions(vec![Action::PopQueue])];
        crate::instruction::encode_instructions(&mut w, &bad, cx(version::OF13)).unwrap();
        assert!(crate::instruction::decode_instructions(&w.buf, version::OF13).is_err());
        // OpenFlow 1.0 has no instructions: nothing is sent for them.
        let b = encode_action_list(&list[1..3], cx(version::OF10)).unwrap();
        assert!(b.is_empty());
    }
}
