//! OpenFlow 1.1+ instructions, folded into the model's single action list.
//!
//! The `flow` model keeps `goto_table` as the last [`Action`] of a flow's list (as
//! `ovs-ofctl` prints it) rather than as a separate instruction set. So decoding takes the
//! `APPLY_ACTIONS` instruction's actions and appends [`Action::GotoTable`] for a
//! `GOTO_TABLE` instruction; encoding writes the actions as one `APPLY_ACTIONS` (omitted
//! when empty), then `CLEAR_ACTIONS` ([`Action::ClearActions`]), `WRITE_ACTIONS`
//! ([`Action::WriteActions`]), `WRITE_METADATA` (a trailing [`Action::WriteMetadata`] before
//! the `goto_table`), then `GOTO_TABLE` — the order OVS writes them (and the order the model
//! keeps them in, OVS `ovs_instruction_type`). `METER` has no place in the model yet: it
//! decodes to [`crate::Error::Unsupported`].

use crate::action::{EncodeCtx, decode_actions, encode_actions};
use crate::codec::{Rd, Wr};
use crate::error::{Error, Result, invalid, unsupported};
use flow::ofp::Action;

/// Instruction types.
#[allow(missing_docs)]
pub mod ofpit {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
}

/// Decodes the instructions filling all of `b` into one action list.
pub fn decode_instructions(b: &[u8], ver: u8) -> Result<Vec<Action>> {
    let mut r = Rd::new(b, "instructions");
    let mut apply: Option<Vec<Action>> = None;
    let mut goto = None;
    let mut metadata: Option<Action> = None;
    let mut clear: Option<Action> = None;
    let mut write: Option<Action> = None;
    while !r.is_empty() {
        let typ = r.peek_u16(0)?;
        let len = usize::from(r.peek_u16(2)?);
        if len < 8 || !len.is_multiple_of(8) {
            return Err(Error::BadLength {
                what: "instruction",
                len,
            });
        }
        let mut i = r.sub(len, "instruction")?;
        i.skip(4)?;
        match typ {
            ofpit::GOTO_TABLE => {
                if goto.is_some() {
                    return Err(invalid("duplicate goto_table instruction"));
                }
                goto = Some(i.u8()?);
            }
            ofpit::APPLY_ACTIONS => {
                if apply.is_some() {
                    return Err(invalid("duplicate apply_actions instruction"));
                }
                i.skip(4)?;
                apply = Some(decode_actions(i.rest(), ver)?);
            }
            ofpit::WRITE_METADATA => {
                if metadata.is_some() {
                    return Err(invalid("duplicate write_metadata instruction"));
                }
                metadata = Some(crate::action_ext::decode_write_metadata_inst(&mut i)?);
            }
            ofpit::WRITE_ACTIONS => {
                if write.is_some() {
                    return Err(invalid("duplicate write_actions instruction"));
                }
                i.skip(4)?;
                write = Some(crate::action_ext::decode_write_actions(i.rest(), ver)?);
            }
            ofpit::CLEAR_ACTIONS => {
                if clear.is_some() {
                    return Err(invalid("duplicate clear_actions instruction"));
                }
                clear = Some(Action::ClearActions);
            }
            ofpit::METER => return Err(unsupported("instruction meter")),
            t => return Err(unsupported(format!("instruction type {t}"))),
        }
    }
    let mut out = apply.unwrap_or_default();
    if out.iter().any(|a| matches!(a, Action::GotoTable(_))) {
        return Err(invalid("goto_table inside apply_actions"));
    }
    if out.iter().any(|a| crate::action_ext::rank(a) != 1) {
        return Err(invalid("instruction inside apply_actions"));
    }
    out.extend(clear);
    // An empty action set adds nothing (OVS prints no `write_actions()`).
    out.extend(write.filter(|w| !matches!(w, Action::WriteActions(v) if v.is_empty())));
    out.extend(metadata);
    if let Some(t) = goto {
        out.push(Action::GotoTable(t));
    }
    Ok(out)
}

/// Encodes an action list (with an optional trailing [`Action::GotoTable`]) as instructions.
pub(crate) fn encode_instructions(w: &mut Wr, acts: &[Action], cx: EncodeCtx) -> Result<()> {
    let (body, goto) = match acts.split_last() {
        Some((Action::GotoTable(t), rest)) => (rest, Some(*t)),
        _ => (acts, None),
    };
    let (body, metadata) = match body.split_last() {
        Some((Action::WriteMetadata { value, mask }, rest)) => (rest, Some((*value, *mask))),
        _ => (body, None),
    };
    let (body, write) = match body.split_last() {
        Some((Action::WriteActions(inner), rest)) => (rest, Some(inner)),
        _ => (body, None),
    };
    let (body, clear) = match body.split_last() {
        Some((Action::ClearActions, rest)) => (rest, true),
        _ => (body, false),
    };
    if body.iter().any(|a| crate::action_ext::rank(a) != 1) {
        return Err(unsupported("instructions out of order"));
    }
    if !body.is_empty() {
        let start = w.len();
        w.u16(ofpit::APPLY_ACTIONS);
        w.u16(0);
        w.zeros(4);
        encode_actions(w, body, cx)?;
        w.patch_len(start + 2, start, "apply_actions instruction")?;
    }
    if clear {
        w.u16(ofpit::CLEAR_ACTIONS);
        w.u16(8);
        w.zeros(4);
    }
    if let Some(inner) = write {
        let start = w.len();
        w.u16(ofpit::WRITE_ACTIONS);
        w.u16(0);
        w.zeros(4);
        encode_actions(w, inner, cx)?;
        w.patch_len(start + 2, start, "write_actions instruction")?;
    }
    if let Some((value, mask)) = metadata {
        crate::action_ext::encode_write_metadata_inst(w, value, mask);
    }
    if let Some(t) = goto {
        w.u16(ofpit::GOTO_TABLE);
        w.u16(8);
        w.u8(t);
        w.zeros(3);
    }
    Ok(())
}
