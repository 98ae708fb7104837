//! Text syntax of the actions added for issue #17 (beyond groups and conjunction):
//! `write_metadata:V[/M]`, `mod_nw_ttl:N` (`set_nw_ttl:N`), `exit`, `clone(...)`,
//! `write_actions(...)`, `clear_actions`, `set_queue:Q`, `enqueue:P:Q`, `pop_queue` — parse, print, the
//! OpenFlow round trip (`canon`), the flow-mod check against the match (`check`) and OVS's
//! instruction-order verification (`ofpacts_verify`), shared by every action list.
//!
//! Instruction order (OVS `enum ovs_instruction_type`): apply-actions (every plain action) <
//! `clear_actions` < `write_actions` < `write_metadata` < `goto_table`; each instruction at
//! most once; a nested list (inside `ct(exec())`, `clone()`, `write_actions()`) allows only
//! apply-actions. The errors carry OVS's words and the column of the offending action.

use std::fmt::Write as _;

use crate::ofp::action::{Action, Subfield};
use crate::ofp::fields::{Mf, Protocols};
use crate::ofp::matching::Match;
use crate::ofp::port::OfPort;
use crate::text::parse::{ActCtx, Ctx};
use crate::text::value::{str_to_u8, strtoull0};
use crate::text::{Dialect, ParseError};

/// OVS `ovs_instruction_type` rank of an action (meter 0, apply 1, clear 2, write 3,
/// write_metadata 4, goto 5) and its name.
fn instruction(a: &Action) -> (u8, &'static str) {
    match a {
        Action::ClearActions => (2, "clear_actions"),
        Action::WriteActions(_) => (3, "write_actions"),
        Action::WriteMetadata { .. } => (4, "write_metadata"),
        Action::GotoTable(_) => (5, "goto_table"),
        _ => (1, "apply_actions"),
    }
}

/// OVS `ofpacts_verify` over a parsed list: `at[i]` is the offset and text of `acts[i]`'s
/// key (the token an error names).
pub(crate) fn verify_instructions(
    cx: &Ctx<'_>,
    acts: &[Action],
    at: &[(usize, &str)],
    allow_instructions: bool,
) -> Result<(), ParseError> {
    let mut inst = 0u8;
    let mut inst_name = "meter";
    for (i, a) in acts.iter().enumerate() {
        let (next, next_name) = instruction(a);
        let (pos, key) = at.get(i).copied().unwrap_or((0, next_name));
        let bad_order = if inst == 1 { next < inst } else { next <= inst };
        if i > 0 && bad_order {
            let msg = if next == inst {
                format!(
                    "duplicate {inst_name} instruction not allowed, for OpenFlow 1.1+ compatibility"
                )
            } else {
                format!(
                    "invalid instruction ordering: {next_name} must appear before {inst_name}, for OpenFlow 1.1+ compatibility"
                )
            };
            return Err(cx.err(pos, key, msg));
        }
        if !allow_instructions && next != 1 {
            return Err(cx.err(
                pos,
                key,
                format!("{next_name} instruction not allowed here"),
            ));
        }
        inst = next;
        inst_name = next_name;
    }
    Ok(())
}

/// Whether `key` (lower case) names an action of this module.
pub(crate) fn handles(key: &str) -> bool {
    matches!(
        key,
        "write_metadata"
            | "mod_nw_ttl"
            | "set_nw_ttl"
            | "exit"
            | "clear_actions"
            | "set_queue"
            | "enqueue"
            | "pop_queue"
    )
}

/// OVS `str_to_u64` / `str_to_be64` wording.
fn u64_arg(s: &str) -> Result<u64, String> {
    if s.is_empty() {
        return Err("missing required numeric argument".into());
    }
    match strtoull0(s) {
        Ok((v, "")) => Ok(v),
        _ => Err(format!("invalid numeric format {s}")),
    }
}

/// OVS `str_to_u32`: `strtoul` (64-bit, then truncated to 32 bits as C's assignment does).
fn u32_arg(s: &str) -> Result<u32, String> {
    u64_arg(s).map(|v| v as u32)
}

/// OVS `parse_ENQUEUE`: `strtok_r(arg, ":q,")` for the port, the rest for the queue.
fn parse_enqueue(arg: &str) -> Result<Action, String> {
    let delim = |c: char| matches!(c, ':' | 'q' | ',');
    let syntax = || "\"enqueue\" syntax is \"enqueue:PORT:QUEUE\" or \"enqueue(PORT,QUEUE)\"";
    let arg = arg.trim_start_matches(delim);
    let (port, queue) = match arg.find(delim) {
        Some(i) => (&arg[..i], &arg[i + 1..]),
        None => (arg, ""),
    };
    if port.is_empty() || queue.is_empty() {
        return Err(syntax().into());
    }
    let port = OfPort::parse(port).ok_or_else(|| format!("{port}: enqueue to unknown port"))?;
    let queue = u32_arg(queue)?;
    Ok(Action::Enqueue { port, queue })
}

impl ActCtx<'_, '_> {
    /// Parses one action of this module (`key` lower case). Errors name the value.
    pub(crate) fn parse_ext(&mut self, key: &str, value: &str) -> Result<Action, String> {
        match key {
            "write_metadata" => {
                self.usable = self.usable.and(Protocols::NXM_OF11_UP);
                let (v, m) = match value.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (value, None),
                };
                let mask = match m {
                    Some(m) => u64_arg(m)?,
                    None => u64::MAX,
                };
                let value = u64_arg(v)?;
                Ok(Action::WriteMetadata { value, mask })
            }
            "mod_nw_ttl" | "set_nw_ttl" => {
                let t = str_to_u8(value).ok_or_else(|| format!("invalid TTL \"{value}\""))?;
                Ok(Action::ModNwTtl(t))
            }
            "exit" => Ok(Action::Exit),
            // OVS `parse_CLEAR_ACTIONS` ignores its argument.
            "clear_actions" => Ok(Action::ClearActions),
            "set_queue" => Ok(Action::SetQueue(u32_arg(value)?)),
            "pop_queue" => Ok(Action::PopQueue),
            "enqueue" => parse_enqueue(value),
            _ => Err(format!("unknown action {key}")),
        }
    }
}

/// Prints an action of this module (`None` for the others).
pub(crate) fn format_ext(out: &mut String, a: &Action) -> bool {
    match a {
        Action::WriteMetadata { value, mask } => {
            out.push_str("write_metadata:");
            put_c_hex(out, *value);
            if *mask != u64::MAX {
                out.push('/');
                put_c_hex(out, *mask);
            }
        }
        Action::ModNwTtl(t) => {
            let _ = write!(out, "mod_nw_ttl:{t}");
        }
        Action::Exit => out.push_str("exit"),
        Action::Clone(inner) => {
            out.push_str("clone(");
            out.push_str(&crate::text::format::format_actions(inner));
            out.push(')');
        }
        Action::WriteActions(inner) => {
            out.push_str("write_actions(");
            out.push_str(&crate::text::format::format_actions(inner));
            out.push(')');
        }
        Action::ClearActions => out.push_str("clear_actions"),
        Action::SetQueue(q) => {
            let _ = write!(out, "set_queue:{q}");
        }
        Action::Enqueue { port, queue } => {
            out.push_str("enqueue:");
            crate::text::format::format_port(out, *port);
            let _ = write!(out, ":{queue}");
        }
        Action::PopQueue => out.push_str("pop_queue"),
        _ => return false,
    }
    true
}

/// C's `%#x`.
fn put_c_hex(out: &mut String, v: u64) {
    if v == 0 {
        out.push('0');
    } else {
        let _ = write!(out, "{v:#x}");
    }
}

/// OVS `ofpacts_check` for the actions of this module: narrows `usable` as OVS does.
pub(crate) fn check_ext(
    a: &Action,
    m: &Match,
    table: Option<u8>,
    usable: &mut Protocols,
) -> Result<(), &'static str> {
    match a {
        // OVS `check_CLONE`: the nested list against the same match.
        Action::Clone(inner) => crate::text::parse::check_actions(inner, m, table, usable),
        // OVS `check_WRITE_ACTIONS`: the nested list against a copy of the match and of the
        // usable protocols ("we can't check consistency of an action set").
        Action::WriteActions(inner) => {
            let mut tmp = *usable;
            crate::text::parse::check_actions(inner, m, table, &mut tmp)
        }
        // OVS `check_ENQUEUE`.
        Action::Enqueue { port, .. } => {
            if port.0 >= OfPort::MAX.0 && *port != OfPort::IN_PORT && *port != OfPort::LOCAL {
                return Err("OFPBAC_BAD_OUT_PORT");
            }
            Ok(())
        }
        Action::ModNwTtl(_) => {
            // OVS `check_set_ip`: not an IP match → only OpenFlow 1.0 (where it is a load
            // whose decoding then fails: see `canon_ext`).
            if !m.is_ip_any() {
                *usable = usable.and(Protocols::OF10_ANY);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The OpenFlow encode/decode round trip of the actions of this module, appended to `out`;
/// `rest` are the actions after `a` (for the OpenFlow 1.0 order check). `Err` is OVS's
/// decode error.
pub(crate) fn canon_ext(
    a: &Action,
    rest: &[Action],
    m: &Match,
    dialect: Dialect,
    out: &mut Vec<Action>,
) -> Result<(), String> {
    let of13 = dialect == Dialect::OpenFlow13;
    match a {
        Action::ModNwTtl(t) if !of13 => {
            // OpenFlow 1.0 has no set-TTL action: OVS sends a load into NXM_NX_IP_TTL, whose
            // decoding checks the field's prerequisites against the match.
            if !m.is_ip_any() {
                return Err("decode error: OFPBAC_MATCH_INCONSISTENT".into());
            }
            out.push(Action::Load {
                value: u128::from(*t),
                dst: Subfield::whole(Mf::IpTtl),
            });
        }
        Action::WriteMetadata { .. } if !of13 && !rest.is_empty() => {
            // In NXM the instruction is the action NXAST_WRITE_METADATA; what follows it
            // (`goto_table` as `resubmit(,T)`) decodes as an apply-action after an
            // instruction.
            return Err("decode error: OFPBAC_UNSUPPORTED_ORDER".into());
        }
        // OpenFlow 1.0 has no instructions: OVS sends nothing for them.
        Action::WriteActions(_) | Action::ClearActions if !of13 => {}
        Action::Enqueue { port, queue } if of13 => {
            // OpenFlow 1.1+ has no enqueue: OVS sends set_queue, output, pop_queue.
            out.extend([
                Action::SetQueue(*queue),
                Action::output(*port),
                Action::PopQueue,
            ]);
        }
        _ => out.push(a.clone()),
    }
    Ok(())
}

/// The OpenFlow 1.1+ round trip of `write_actions(inner)` (`inner` already canonical):
/// an empty set is not sent; an action OVS does not allow in an action set
/// (`ofpact_is_allowed_in_actions_set`) fails to decode.
pub(crate) fn canon_write_actions(
    inner: Vec<Action>,
    m: &Match,
    out: &mut Vec<Action>,
) -> Result<(), String> {
    if inner.is_empty() {
        return Ok(());
    }
    // A `set_field` (what `mod_nw_tos` and the like become in OpenFlow 1.2+) is decoded
    // against the flow's match: its prerequisites must hold there.
    let bad_prereq = inner
        .iter()
        .any(|a| matches!(a, Action::SetField { field, .. } if !m.prereqs_ok(*field)));
    if bad_prereq {
        return Err("decode error: OFPBAC_MATCH_INCONSISTENT".into());
    }
    if !inner.iter().all(allowed_in_action_set) {
        return Err("decode error: OFPBAC_BAD_TYPE".into());
    }
    out.push(Action::WriteActions(inner));
    Ok(())
}

/// OVS 3.1 `action_set_classify`: the slot an action takes in the action set. Slots 0–2
/// keep the last action written (in slot order); `SetOrMove` keeps all, in write order; of
/// the final actions only the last of the highest class runs (`ct` < `ct_clear` <
/// `resubmit` < `output` < `group`), and without one the set runs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum ActionSetClass {
    Slot(u8),
    Final(u8),
    SetOrMove,
    Invalid,
}

/// The class of `a` in an action set (see [`ActionSetClass`]).
pub fn action_set_class(a: &Action) -> ActionSetClass {
    match a {
        Action::StripVlan | Action::PopVlan => ActionSetClass::Slot(0),
        Action::PushVlan(_) => ActionSetClass::Slot(1),
        Action::DecTtl(_) => ActionSetClass::Slot(2),
        Action::SetField { .. }
        | Action::Load { .. }
        | Action::Move { .. }
        | Action::ModDlSrc(_)
        | Action::ModDlDst(_)
        | Action::ModNwSrc(_)
        | Action::ModNwDst(_)
        | Action::ModNwTos(_)
        | Action::ModNwTtl(_)
        | Action::ModTpSrc(_)
        | Action::ModTpDst(_)
        | Action::ModVlanVid { .. }
        | Action::ModVlanPcp { .. }
        | Action::SetQueue(_) => ActionSetClass::SetOrMove,
        Action::Ct(_) => ActionSetClass::Final(0),
        Action::CtClear => ActionSetClass::Final(1),
        Action::Resubmit { .. } => ActionSetClass::Final(2),
        Action::Output { .. } => ActionSetClass::Final(3),
        Action::Group(_) => ActionSetClass::Final(4),
        _ => ActionSetClass::Invalid,
    }
}

/// OVS 3.1 `ofpact_is_allowed_in_actions_set`, over the actions of this model: every action
/// [`action_set_class`] gives a place in the set.
pub fn allowed_in_action_set(a: &Action) -> bool {
    action_set_class(a) != ActionSetClass::Invalid
}

#[cfg(test)]
mod tests {
    use crate::text::{Dialect, parse_flow_with};

    fn p(s: &str, d: Dialect) -> Result<String, String> {
        parse_flow_with(s, d)
            .map(|f| f.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn write_metadata_mod_nw_ttl_exit() {
        let d10 = Dialect::OpenFlow10;
        let d13 = Dialect::OpenFlow13;
        assert_eq!(
            p("actions=write_metadata:0x1234/0xff00", d13).unwrap(),
            "actions=write_metadata:0x1234/0xff00"
        );
        assert_eq!(
            p("actions=write_metadata:0", d10).unwrap(),
            "actions=write_metadata:0"
        );
        assert_eq!(
            p("ip,actions=mod_nw_ttl:5", d10).unwrap(),
            "ip actions=load:0x5->NXM_NX_IP_TTL[]"
        );
        assert_eq!(
            p("ip,actions=set_nw_ttl:5", d13).unwrap(),
            "ip actions=mod_nw_ttl:5"
        );
        assert!(p("actions=mod_nw_ttl:5", d10).is_err());
        assert!(p("actions=mod_nw_ttl:5", d13).is_err());
        assert_eq!(
            p("actions=output:1,exit,output:2", d10).unwrap(),
            "actions=output:1,exit,output:2"
        );
        let e = p("actions=write_metadata:0x1,output:1", d13).unwrap_err();
        assert!(
            e.starts_with("column 28: 'output': invalid instruction ordering"),
            "{e}"
        );
        let e = p("actions=write_metadata:1,write_metadata:2", d13).unwrap_err();
        assert!(e.contains("duplicate write_metadata instruction"), "{e}");
        let e = p("actions=write_metadata:zz", d13).unwrap_err();
        assert_eq!(e, "column 24: 'zz': invalid numeric format zz");
        let e = p("ip,actions=mod_nw_ttl:256", d13).unwrap_err();
        assert_eq!(e, "column 23: '256': invalid TTL \"256\"");
        assert!(p("actions=write_metadata:0x1,goto_table:2", d10).is_err());
        assert_eq!(
            p("actions=write_metadata:0x1,goto_table:2", d13).unwrap(),
            "actions=write_metadata:0x1,goto_table:2"
        );
    }
}
