//! OpenFlow vocabulary: ports, the field registry, matches, actions and flow mods.
//!
//! These are plain data types. The text syntax (`ovs-ofctl add-flow` / `dump-flows`) that reads
//! and prints them lives in [`crate::text`]; the field registry ([`fields`]) maps every OpenFlow
//! field name onto the storage fields of [`crate::FlowKey`].

pub mod action;
pub mod fields;
pub mod group;
pub mod lb;
pub mod matching;
pub mod port;

pub use action::{
    Action, ControllerCookie, Ct, CtZone, Nat, NatKind, NatRange, PacketInReason, Subfield,
};
pub use fields::{MF_TABLE, Mf, MfDef, MfFormat, Prereq, Protocols};
pub use matching::Match;
pub use port::OfPort;

/// OVS's default flow priority.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// An OpenFlow flow mod as `ovs-ofctl add-flow` builds it (OVS `struct ofputil_flow_mod`,
/// restricted to `ADD`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowSpec {
    /// `table=` (`None` = not given, which OVS sends as table 0).
    pub table: Option<u8>,
    /// `priority=` (default 32768).
    pub priority: u16,
    /// `cookie=`.
    pub cookie: u64,
    /// Cookie mask (only for modify/delete; always 0 for `add`).
    pub cookie_mask: u64,
    /// `idle_timeout=` (0 = none).
    pub idle_timeout: u16,
    /// `hard_timeout=` (0 = none).
    pub hard_timeout: u16,
    /// `importance=`.
    pub importance: u16,
    /// `out_port=` (delete/modify filters only).
    pub out_port: Option<OfPort>,
    /// `send_flow_rem`.
    pub send_flow_rem: bool,
    /// `check_overlap`.
    pub check_overlap: bool,
    /// The match.
    pub match_: Match,
    /// The actions (empty = drop).
    pub actions: Vec<Action>,
}

/// Alias used by the rest of the project: a flow mod is a flow spec.
pub type FlowMod = FlowSpec;

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            table: None,
            priority: DEFAULT_PRIORITY,
            cookie: 0,
            cookie_mask: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            importance: 0,
            out_port: None,
            send_flow_rem: false,
            check_overlap: false,
            match_: Match::catchall(),
            actions: Vec::new(),
        }
    }
}
