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

pub mod canon;
pub mod flow_line;
pub mod format;
pub mod lex;
pub mod parse;
pub mod value;

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

/// A match as `ovs-ofctl` prints it (no priority).
pub fn format_match(m: &Match) -> String {
    format::format_match_priority(m, crate::ofp::DEFAULT_PRIORITY)
}
