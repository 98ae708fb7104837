//! OpenFlow actions ([`Action`]), subfields ([`Subfield`]) and the `ct`/`nat` arguments.
//!
//! The variants follow OVS's `struct ofpact` kinds, one per distinct printed form, so that a
//! parsed-and-canonicalised action list prints back exactly as `ovs-ofctl` prints it. Outputs to
//! reserved ports (`NORMAL`, `FLOOD`, `ALL`, `IN_PORT`, `LOCAL`, `CONTROLLER`, `TABLE`) are
//! [`Action::Output`] to the named [`OfPort`], as in OVS; an empty list means drop.
//!
//! Invariants kept by the parser: a [`Subfield`] lies inside its field
//! (`ofs + n_bits <= field width`, `n_bits >= 1`); a [`Action::Load`] value fits in `n_bits`;
//! [`Action::SetField`] values are in field units with `value & !mask == 0`.

use crate::ofp::fields::Mf;
use crate::ofp::port::OfPort;

/// A bit range of an OpenFlow field: `NXM_NX_REG0[0..15]`, `reg0[]`, `NXM_OF_ETH_SRC[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subfield {
    /// The field.
    pub field: Mf,
    /// First bit.
    pub ofs: u32,
    /// Number of bits (≥ 1).
    pub n_bits: u32,
}

impl Subfield {
    /// The whole field.
    pub fn whole(field: Mf) -> Subfield {
        Subfield {
            field,
            ofs: 0,
            n_bits: field.def().n_bits,
        }
    }

    /// Whether it covers the whole field.
    pub fn is_whole(&self) -> bool {
        self.ofs == 0 && self.n_bits == self.field.def().n_bits
    }

    /// Mask of the covered bits, in field units.
    pub fn mask(&self) -> u128 {
        let m = if self.n_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << self.n_bits) - 1
        };
        m << self.ofs
    }
}

/// Why a packet goes to the controller (`controller(reason=…)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum PacketInReason {
    NoMatch,
    Action,
    InvalidTtl,
    ActionSet,
    Group,
    PacketOut,
}

impl PacketInReason {
    /// OVS's name.
    pub fn name(self) -> &'static str {
        match self {
            PacketInReason::NoMatch => "no_match",
            PacketInReason::Action => "action",
            PacketInReason::InvalidTtl => "invalid_ttl",
            PacketInReason::ActionSet => "action_set",
            PacketInReason::Group => "group",
            PacketInReason::PacketOut => "packet_out",
        }
    }

    /// The OpenFlow code (`OFPR_*`, OpenFlow 1.4's numbering).
    pub fn code(self) -> u8 {
        match self {
            PacketInReason::NoMatch => 0,
            PacketInReason::Action => 1,
            PacketInReason::InvalidTtl => 2,
            PacketInReason::ActionSet => 3,
            PacketInReason::Group => 4,
            PacketInReason::PacketOut => 5,
        }
    }

    /// The reason of OpenFlow code `c`, if it is one.
    pub fn from_code(c: u8) -> Option<PacketInReason> {
        Some(match c {
            0 => PacketInReason::NoMatch,
            1 => PacketInReason::Action,
            2 => PacketInReason::InvalidTtl,
            3 => PacketInReason::ActionSet,
            4 => PacketInReason::Group,
            5 => PacketInReason::PacketOut,
            _ => return None,
        })
    }

    /// Parses OVS's name.
    pub fn from_name(s: &str) -> Option<PacketInReason> {
        [
            PacketInReason::NoMatch,
            PacketInReason::Action,
            PacketInReason::InvalidTtl,
            PacketInReason::ActionSet,
            PacketInReason::Group,
            PacketInReason::PacketOut,
        ]
        .into_iter()
        .find(|r| r.name() == s)
    }
}

/// What a `controller` action leaves in its datapath `userspace` action (OVS's
/// `user_action_cookie` of type `USER_ACTION_COOKIE_CONTROLLER`): the slow path turns the
/// packet and this into a packet-in. The pipeline state at the action (table, registers,
/// metadata, in_port) is the frozen state `recirc_id` names. Aligned to 4 so that the
/// datapath's action type, which carries it, stays 4-aligned and 48 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, packed(4))]
pub struct ControllerCookie {
    /// Packet-in reason.
    pub reason: PacketInReason,
    /// A table miss (OVS's miss rule, `OFPR_IMPLICIT_MISS`) rather than an explicit
    /// `controller(reason=no_match)`: OpenFlow 1.3+ connections do not take these by default.
    pub implicit_miss: bool,
    /// Translated without side effects (a trace): nothing is sent.
    pub dont_send: bool,
    /// The packet-in carries a continuation (`pause`).
    pub continuation: bool,
    /// Frozen translation state at the action.
    pub recirc_id: u32,
    /// Cookie of the rule whose actions sent it.
    pub rule_cookie: u64,
    /// Controller connections with this id receive it.
    pub controller_id: u16,
    /// Most bytes of the frame to send (`u16::MAX`: all).
    pub max_len: u16,
}

impl ControllerCookie {
    /// The reason's code: OpenFlow 1.4's numbers, and OVS's internal 7
    /// (`OFPR_IMPLICIT_MISS`) for a table miss.
    pub fn reason_code(&self) -> u8 {
        if self.implicit_miss {
            return 7;
        }
        self.reason.code()
    }
}

impl std::fmt::Display for ControllerCookie {
    /// OVS's datapath-action text: `pid=0,controller(reason=1,…,max_len=65535)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rule_cookie = self.rule_cookie;
        let cookie = if rule_cookie == 0 {
            "0".to_string()
        } else {
            format!("{rule_cookie:#x}")
        };
        let (recirc_id, controller_id, max_len) =
            (self.recirc_id, self.controller_id, self.max_len);
        write!(
            f,
            "pid=0,controller(reason={},dont_send={},continuation={},recirc_id={},rule_cookie={cookie},controller_id={},max_len={})",
            self.reason_code(),
            u8::from(self.dont_send),
            u8::from(self.continuation),
            recirc_id,
            controller_id,
            max_len
        )
    }
}

/// Address range of a `nat(src=…|dst=…)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatRange {
    /// IPv4 `min[-max]`.
    V4 {
        /// First address.
        min: u32,
        /// Last address (0 = same as `min`).
        max: u32,
    },
    /// IPv6 `min[-max]` (bracketed when a port follows).
    V6 {
        /// First address.
        min: u128,
        /// Last address (0 = same as `min`).
        max: u128,
    },
}

/// Source or destination NAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// `src=`.
    Src,
    /// `dst=`.
    Dst,
}

/// `nat(...)` inside `ct(...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Nat {
    /// `src`/`dst`; `None` for plain `nat` (re-apply the connection's NAT).
    pub kind: Option<NatKind>,
    /// Address range.
    pub range: Option<NatRange>,
    /// Port range `min[-max]` (0 = none; `max` 0 = same as `min`).
    pub ports: (u16, u16),
    /// `persistent` flag.
    pub persistent: bool,
    /// `hash` flag.
    pub hash: bool,
    /// `random` flag.
    pub random: bool,
}

/// `zone=` of a `ct(...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtZone {
    /// A constant zone.
    Imm(u16),
    /// Read from a 16-bit subfield.
    Field(Subfield),
}

/// `ct(...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ct {
    /// `commit`.
    pub commit: bool,
    /// `force` (requires `commit`).
    pub force: bool,
    /// `zone=`.
    pub zone: CtZone,
    /// `table=` to recirculate to.
    pub table: Option<u8>,
    /// `nat(...)`.
    pub nat: Option<Nat>,
    /// `exec(...)`: actions applied to the connection (set/load of `ct_mark`, `ct_label`).
    pub exec: Vec<Action>,
    /// `alg=` helper port (21 = ftp, 69 = tftp).
    pub alg: Option<u16>,
}

impl Default for Ct {
    fn default() -> Self {
        Ct {
            commit: false,
            force: false,
            zone: CtZone::Imm(0),
            table: None,
            nat: None,
            exec: Vec::new(),
            alg: None,
        }
    }
}

/// One OpenFlow action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// `output:P` (and the bare reserved names `NORMAL`, `FLOOD`, …); `max_len` is only
    /// meaningful for `CONTROLLER` (printed `CONTROLLER:max_len`).
    Output {
        /// Port.
        port: OfPort,
        /// Bytes to send to the controller.
        max_len: u16,
    },
    /// `output(port=P,max_len=N)`: output truncated to `max_len` bytes.
    OutputTrunc {
        /// Port.
        port: OfPort,
        /// Truncation length (≥ 14).
        max_len: u32,
    },
    /// `output:NXM_NX_REG0[0..15]`: output to the port number held in a subfield.
    OutputReg {
        /// Source subfield.
        src: Subfield,
    },
    /// `controller(reason=…,max_len=…,id=…)`; the plain form is `Output` to `CONTROLLER`.
    Controller {
        /// Bytes to send.
        max_len: u16,
        /// Reason code.
        reason: PacketInReason,
        /// Controller id.
        id: u16,
        /// `userdata=…`: opaque bytes the packet-in carries (`NXT_PACKET_IN2` only); empty =
        /// none.
        userdata: Vec<u8>,
        /// `pause`: the translation stops here and the packet-in carries a continuation the
        /// controller sends back (`NXT_RESUME`) to run the rest.
        pause: bool,
    },
    /// Internal (OVS `unroll_xlate`, never parsed from text): in a paused translation's
    /// continuation, the table and rule cookie the actions after it ran under.
    UnrollXlate {
        /// Table.
        table: u8,
        /// Rule cookie.
        cookie: u64,
    },
    /// `resubmit:P`, `resubmit([port],[table][,ct])`.
    Resubmit {
        /// Input port to pretend (`None` = unchanged).
        port: Option<OfPort>,
        /// Table (`None` = current).
        table: Option<u8>,
        /// Look up with the conntrack original-direction tuple.
        ct: bool,
    },
    /// `goto_table:T` (OpenFlow 1.1+ instruction).
    GotoTable(u8),
    /// `set_field:value[/mask]->field`.
    SetField {
        /// Field.
        field: Mf,
        /// Value, field units.
        value: u128,
        /// Mask, field units (all ones of the byte width = whole field).
        mask: u128,
    },
    /// `load:value->dst`.
    Load {
        /// Value (fits in `dst.n_bits`).
        value: u128,
        /// Destination.
        dst: Subfield,
    },
    /// `move:src->dst` (equal widths).
    Move {
        /// Source.
        src: Subfield,
        /// Destination.
        dst: Subfield,
    },
    /// `mod_dl_src:MAC`.
    ModDlSrc(u64),
    /// `mod_dl_dst:MAC`.
    ModDlDst(u64),
    /// `mod_nw_src:IP`.
    ModNwSrc(u32),
    /// `mod_nw_dst:IP`.
    ModNwDst(u32),
    /// `mod_nw_tos:TOS` (DSCP bits of the TOS byte; low 2 bits zero).
    ModNwTos(u8),
    /// `mod_tp_src:PORT`.
    ModTpSrc(u16),
    /// `mod_tp_dst:PORT`.
    ModTpDst(u16),
    /// `mod_vlan_vid:VID` (`push_if_needed`) or `set_vlan_vid:VID`.
    ModVlanVid {
        /// VLAN id (12 bits).
        vid: u16,
        /// OpenFlow 1.0 semantics: push a tag if the packet has none.
        push_if_needed: bool,
    },
    /// `mod_vlan_pcp:PCP` (`push_if_needed`) or `set_vlan_pcp:PCP`.
    ModVlanPcp {
        /// Priority (3 bits).
        pcp: u8,
        /// OpenFlow 1.0 semantics: push a tag if the packet has none.
        push_if_needed: bool,
    },
    /// `strip_vlan` (OpenFlow 1.0 name).
    StripVlan,
    /// `pop_vlan` (OpenFlow 1.1+ name of the same action).
    PopVlan,
    /// `push_vlan:TPID`.
    PushVlan(u16),
    /// `dec_ttl` or `dec_ttl(id,…)`.
    DecTtl(Vec<u16>),
    /// `ct(...)`.
    Ct(Ct),
    /// `ct_clear`.
    CtClear,
    /// `note:hex.hex…` (bytes as OVS stores them, padding included once canonical).
    Note(Vec<u8>),
    // --- issue #17, "actions": instructions and actions beyond groups and conjunction
    // (parse/print in `text::actions_ext`, translation in `ofproto::xlate::actions_ext`).
    /// `write_metadata:value[/mask]`: the OpenFlow 1.1+ instruction (`NXAST_WRITE_METADATA`
    /// in OpenFlow 1.0). `metadata = (metadata & !mask) | (value & mask)`; `value` is kept as
    /// written (OVS prints it unmasked).
    WriteMetadata {
        /// Value.
        value: u64,
        /// Mask (all ones = whole field, printed without `/mask`).
        mask: u64,
    },
    /// `mod_nw_ttl:TTL` (also `set_nw_ttl`).
    ModNwTtl(u8),
    /// `exit`: stops the whole translation (every outer resubmit level too).
    Exit,
    /// `clone(ACTIONS)`: the actions run on a copy of the packet and flow state, which is
    /// restored afterwards (`NXAST_CLONE`); no instructions inside.
    Clone(Vec<Action>),
    // conjunctive matches (issue #17).
    /// `conjunction(id,k/n)`: the rule is clause `k` of the `n` clauses of conjunction `id`
    /// (OVS `ofpact_conjunction`). `clause` is 0-based as OVS stores it (`k - 1`); the parser
    /// and the wire decoder keep `2 <= n_clauses <= 64` and `clause < n_clauses`. A rule whose
    /// actions are conjunctions (and notes) is a *soft* match (`ofproto::table`).
    Conjunction {
        /// Conjunction id (`conj_id` of the rule it leads to).
        id: u32,
        /// Clause index, 0-based.
        clause: u8,
        /// Number of clauses.
        n_clauses: u8,
    },
    // ---- groups (issue #17) ----
    /// `group:N`: the packet through group `N` (see [`crate::ofp::group`]).
    Group(u32),
    // --- issue #17, "actions" (2): the action set and queues (text in
    // `text::actions_ext`, translation in `ofproto::xlate::actions_ext`).
    /// `write_actions(ACTIONS)`: the OpenFlow 1.1+ instruction adding `ACTIONS` to the
    /// action set, executed when the pipeline ends (dropped in OpenFlow 1.0).
    WriteActions(Vec<Action>),
    /// `clear_actions`: the OpenFlow 1.1+ instruction emptying the action set.
    ClearActions,
    /// `set_queue:QUEUE`.
    SetQueue(u32),
    /// `enqueue:PORT:QUEUE` (OpenFlow 1.0 `OFPAT_ENQUEUE`).
    Enqueue {
        /// Output port (a physical port, `IN_PORT` or `LOCAL`).
        port: OfPort,
        /// Queue id.
        queue: u32,
    },
    /// `pop_queue`.
    PopQueue,
    // --- issue #17, session 13: load balancing (`crate::ofp::lb`; text in `text::lb`,
    // translation in `ofproto::xlate::lb`).
    /// `multipath(fields,basis,algorithm,n_links,arg,dst)`.
    Multipath(crate::ofp::lb::Multipath),
    /// `bundle(...)` / `bundle_load(...)`.
    Bundle(crate::ofp::lb::Bundle),
    /// `sample(...)`.
    Sample(crate::ofp::lb::Sample),
    /// `check_pkt_larger(N)->dst`: writes 1 into the 1-bit `dst` when the packet is longer
    /// than `pkt_len` bytes, else 0 (`NXAST_CHECK_PKT_LARGER`; datapath `check_pkt_len`).
    CheckPktLarger {
        /// Length compared with.
        pkt_len: u16,
        /// 1-bit destination.
        dst: Subfield,
    },
}

impl Action {
    /// `output:port`.
    pub fn output(port: OfPort) -> Action {
        Action::Output { port, max_len: 0 }
    }
    /// `NORMAL`.
    pub fn normal() -> Action {
        Action::output(OfPort::NORMAL)
    }
    /// `FLOOD`.
    pub fn flood() -> Action {
        Action::output(OfPort::FLOOD)
    }
    /// `CONTROLLER:max_len`.
    pub fn controller(max_len: u16) -> Action {
        Action::Output {
            port: OfPort::CONTROLLER,
            max_len,
        }
    }
}
