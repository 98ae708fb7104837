//! The `ovs-ofctl` flow syntax: parse and print matches, actions and flow mods.
//!
//! - [`parse_flow`] reads what users type into `ovs-ofctl add-flow` and returns the flow mod as
//!   `ovs-ofctl` would send it with its default OpenFlow 1.0 protocol (canonicalised: see
//!   [`canon`]); `format!("{spec}")` then prints exactly what `ovs-ofctl parse-flow` prints
//!   after `ADD `. [`parse_flow_with`] with [`Dialect::OpenFlow13`] mirrors
//!   `ovs-ofctl -O OpenFlow13`.
//! - [`parse_match`] / [`parse_actions`] parse the two halves without the protocol round trip.
//! - [`format_flow_line`] prints a packet's flow key as `ofproto/trace`'s `Flow:` line.
//!
//! Contract: no text makes any function here panic; errors are [`ParseError`] values naming
//! the 1-based character column and the token at fault.

pub(crate) mod actions_ext;
pub mod canon;
pub mod conj;
pub mod flow_line;
pub mod format;
pub mod group;
pub(crate) mod lb;
pub mod lex;
pub mod parse;
pub mod value;

pub use actions_ext::{ActionSetClass, action_set_class, allowed_in_action_set};
pub use flow_line::format_flow_line;
pub use format::{format_actions, format_flow_add, format_match_priority};

use crate::ofp::{Action, FlowSpec, Match, Protocols};

/// Which `ovs-ofctl` protocol setting to mimic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// `ovs-ofctl` default: OpenFlow 1.0 (standard match, or NXM when needed).
    #[default]
    OpenFlow10,
    /// `ovs-ofctl -O OpenFlow13` (OXM).
    OpenFlow13,
}

/// A flow-text error: where, what, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based character column of the offending token.
    pub column: usize,
    /// The offending token.
    pub token: String,
    /// What is wrong (OVS's wording where it has one).
    pub message: String,
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "column {}: '{}': {}",
            self.column, self.token, self.message
        )
    }
}

impl std::error::Error for ParseError {}

/// Parses an `add-flow` line as `ovs-ofctl` (OpenFlow 1.0 default) does.
pub fn parse_flow(text: &str) -> Result<FlowSpec, ParseError> {
    parse_flow_with(text, Dialect::OpenFlow10)
}

/// Parses an `add-flow` line as `ovs-ofctl` with the given protocol setting does.
pub fn parse_flow_with(text: &str, dialect: Dialect) -> Result<FlowSpec, ParseError> {
    parse::parse_flow_impl(text, dialect)
}

/// Parses a match (`field=value` pairs, protocol shorthands) with OVS `mf_set` semantics, without
/// normalisation or protocol round trip. Flow-mod keywords (`priority`, `table`, …) are errors.
pub fn parse_match(text: &str) -> Result<Match, ParseError> {
    let cx = parse::Ctx { text };
    let pm = parse::parse_match_part(&cx, text, false)?;
    if pm.spec.table.is_some() || pm.spec.cookie != 0 {
        return Err(cx.err(0, text, "flow-mod keyword in a match"));
    }
    if pm.usable == Protocols::NONE {
        return Err(cx.err(0, text, "no usable protocol"));
    }
    Ok(pm.spec.match_)
}

/// Parses an action list (the text after `actions=`) without checking it against a match.
pub fn parse_actions(text: &str) -> Result<Vec<Action>, ParseError> {
    let cx = parse::Ctx { text };
    let mut acx = parse::ActCtx {
        cx: &cx,
        usable: Protocols::ANY,
        depth: 0,
    };
    acx.parse_list(text, false)
}

/// Parses the flow text of `ovs-ofctl mod-flows` / `del-flows` (and their `--strict` forms): the
/// match with the flow-mod keywords, plus what only those commands accept: `cookie=V/MASK` (a
/// filter; without a mask the value is the new cookie for modify), `out_port=P`, and optional
/// `actions=` (required by modify, absent for delete). No normalisation or protocol round trip.
/// An empty text is the catch-all filter.
pub fn parse_flow_filter(text: &str) -> Result<FlowSpec, ParseError> {
    let cx = parse::Ctx { text };
    let (mpart, apart) = match parse::split_actions(text) {
        Some((m, a)) => (m, Some(a)),
        None => (text, None),
    };
    // Take out `cookie=V/M` and `out_port=P`, blanking them (white space separates pairs, so
    // the remaining columns stay right for error messages).
    let base = parse::offset_in(text, mpart);
    let mut blanked = mpart.as_bytes().to_vec();
    let mut cookie = None;
    let mut out_port = None;
    for kv in lex::KvIter::new(mpart) {
        let at_value = |msg: String| cx.err(base + kv.value_at, kv.value, msg);
        let take = match kv.key {
            "cookie" => {
                let (v, m) = match kv.value.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (kv.value, None),
                };
                let bad = || at_value(format!("invalid numeric format {}", kv.value));
                let v = value::str_to_u64(v).ok_or_else(bad)?;
                let m = match m {
                    Some(m) => Some(value::str_to_u64(m).ok_or_else(bad)?),
                    None => None,
                };
                cookie = Some((v, m));
                true
            }
            "out_port" => {
                let p = crate::ofp::OfPort::parse(kv.value)
                    .ok_or_else(|| at_value(format!("{}: output port is invalid", kv.value)))?;
                out_port = Some(p);
                true
            }
            _ => false,
        };
        if take {
            let end = (kv.value_at + kv.value.len()).max(kv.key_at + kv.key.len());
            for b in blanked.iter_mut().take(end).skip(kv.key_at) {
                *b = b' ';
            }
        }
    }
    let stripped = String::from_utf8(blanked).map_err(|_| cx.err(0, text, "invalid UTF-8"))?;
    let scx = parse::Ctx { text: &stripped };
    let pm = parse::parse_match_part(&scx, &stripped, true).map_err(|mut e| {
        e.column += base;
        e
    })?;
    let mut spec = pm.spec;
    match cookie {
        Some((v, Some(m))) => {
            spec.cookie = v & m;
            spec.cookie_mask = m;
        }
        Some((v, None)) => spec.cookie = v,
        None => {}
    }
    spec.out_port = out_port;
    if let Some(a) = apart {
        let mut acx = parse::ActCtx {
            cx: &cx,
            usable: Protocols::ANY,
            depth: 0,
        };
        spec.actions = acx.parse_list(a, false)?;
    }
    Ok(spec)
}

/// A match as `ovs-ofctl` prints it (no priority).
pub fn format_match(m: &Match) -> String {
    format::format_match_priority(m, crate::ofp::DEFAULT_PRIORITY)
}

#[cfg(test)]
mod filter_tests {
    use super::*;
    use crate::ofp::OfPort;

    #[test]
    fn del_and_mod_flows_syntax() {
        let s =
            parse_flow_filter("table=1,cookie=0x20/0xf0,out_port=2,ip,nw_dst=10.0.0.0/8").unwrap();
        assert_eq!(s.table, Some(1));
        assert_eq!((s.cookie, s.cookie_mask), (0x20, 0xf0));
        assert_eq!(s.out_port, Some(OfPort(2)));
        assert!(s.actions.is_empty());
        assert_eq!(format_match(&s.match_), "ip,nw_dst=10.0.0.0/8");
        let m = parse_flow_filter("priority=7,cookie=5,udp,actions=output:3").unwrap();
        assert_eq!((m.priority, m.cookie, m.cookie_mask), (7, 5, 0));
        assert_eq!(format_actions(&m.actions), "output:3");
        assert_eq!(parse_flow_filter("").unwrap().match_, Match::catchall());
        let e = parse_flow_filter("ip,out_port=bogus").unwrap_err();
        assert_eq!(e.column, 4 + "out_port=".len());
        assert!(parse_flow_filter("ip,nw_dst=1.2.3.4/33").is_err());
        assert!(parse_flow_filter("cookie=0x1/zz").is_err());
    }
}
