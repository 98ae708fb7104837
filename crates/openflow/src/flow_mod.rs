//! Flow mods in their three wire forms: OpenFlow 1.0 `OFPT_FLOW_MOD` (fixed `ofp_match`),
//! Nicira `NXT_FLOW_MOD` (NXM match) and OpenFlow 1.1+ `OFPT_FLOW_MOD` (OXM match and
//! instructions), all as one [`FlowMod`] around the model's [`FlowSpec`].
//!
//! Mapping of wire fields onto the spec:
//! - table: 1.1+ has a `table_id` byte; 1.0 and NXM carry it in the high byte of the 16-bit
//!   command once the connection enabled `NXT_FLOW_MOD_TABLE_ID` (otherwise that byte is 0
//!   and the table is meaningless: the switch decides). Byte `0xff` (all tables) and byte 0
//!   of an add are `None`, other bytes `Some`; encoding writes `None` as 0 for add and `0xff`
//!   for modify/delete.
//! - `out_port`: `OFPP_NONE`/`OFPP_ANY` is `None`.
//! - cookie: 1.1+ has `cookie` and `cookie_mask`; NXM carries a cookie filter as
//!   `NXM_NX_COOKIE_W` in the match, then the spec's cookie/cookie_mask are the filter and
//!   the header cookie is kept in [`FlowMod::new_cookie`]; 1.0 has no mask.
//! - flags: `send_flow_rem` and `check_overlap` live in the spec, any other bit in
//!   [`FlowMod::flags`].

use crate::action::{EncodeCtx, decode_actions, encode_actions};
use crate::codec::{Rd, Wr};
use crate::error::{Error, Result, invalid};
use crate::header::version;
use crate::instruction::{decode_instructions, encode_instructions};
use crate::nxm::{self, CookieFilter};
use crate::ofmatch10;
use flow::ofp::{FlowSpec, OfPort};

/// `OFPFF_SEND_FLOW_REM`.
pub const FF_SEND_FLOW_REM: u16 = 1;
/// `OFPFF_CHECK_OVERLAP`.
pub const FF_CHECK_OVERLAP: u16 = 2;
/// No buffer (`OFP_NO_BUFFER`).
pub const NO_BUFFER: u32 = u32::MAX;
/// `OFPG_ANY`.
pub const GROUP_ANY: u32 = u32::MAX;

/// The flow-mod command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// `OFPFC_ADD`.
    Add,
    /// `OFPFC_MODIFY`.
    Modify,
    /// `OFPFC_MODIFY_STRICT`.
    ModifyStrict,
    /// `OFPFC_DELETE`.
    Delete,
    /// `OFPFC_DELETE_STRICT`.
    DeleteStrict,
}

impl Command {
    /// Wire number.
    pub fn to_wire(self) -> u8 {
        self as u8
    }

    /// From the wire number.
    pub fn from_wire(c: u8) -> Result<Command> {
        Ok(match c {
            0 => Command::Add,
            1 => Command::Modify,
            2 => Command::ModifyStrict,
            3 => Command::Delete,
            4 => Command::DeleteStrict,
            _ => return Err(invalid(format!("flow mod command {c}"))),
        })
    }
}

/// A flow mod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowMod {
    /// Command.
    pub command: Command,
    /// Match, actions, priority, cookie, timeouts, table, flags.
    pub spec: FlowSpec,
    /// Buffered packet to apply it to (`NO_BUFFER` = none).
    pub buffer_id: u32,
    /// `out_group` filter (1.1+; `GROUP_ANY` = none).
    pub out_group: u32,
    /// Flag bits other than `send_flow_rem`/`check_overlap`.
    pub flags: u16,
    /// NXM only: header cookie when the spec's cookie is a filter (`cookie_mask != 0`).
    pub new_cookie: u64,
}

impl FlowMod {
    /// An add of `spec` with no buffer.
    pub fn add(spec: FlowSpec) -> FlowMod {
        FlowMod {
            command: Command::Add,
            spec,
            buffer_id: NO_BUFFER,
            out_group: GROUP_ANY,
            flags: 0,
            new_cookie: 0,
        }
    }

    fn table_from_wire(&self, t: u8) -> Option<u8> {
        if t == 0xff || (t == 0 && self.command == Command::Add) {
            None
        } else {
            Some(t)
        }
    }

    fn table_to_wire(&self) -> u8 {
        match self.spec.table {
            Some(t) => t,
            None if self.command == Command::Add => 0,
            None => 0xff,
        }
    }

    fn set_flags(&mut self, f: u16) {
        self.spec.send_flow_rem = f & FF_SEND_FLOW_REM != 0;
        self.spec.check_overlap = f & FF_CHECK_OVERLAP != 0;
        self.flags = f & !(FF_SEND_FLOW_REM | FF_CHECK_OVERLAP);
    }

    fn wire_flags(&self) -> u16 {
        let mut f = self.flags & !(FF_SEND_FLOW_REM | FF_CHECK_OVERLAP);
        if self.spec.send_flow_rem {
            f |= FF_SEND_FLOW_REM;
        }
        if self.spec.check_overlap {
            f |= FF_CHECK_OVERLAP;
        }
        f
    }

    fn blank(command: Command) -> FlowMod {
        FlowMod {
            command,
            spec: FlowSpec::default(),
            buffer_id: NO_BUFFER,
            out_group: GROUP_ANY,
            flags: 0,
            new_cookie: 0,
        }
    }

    /// Decodes an OpenFlow 1.0 `OFPT_FLOW_MOD` body (after the header).
    pub fn decode_of10(body: &[u8]) -> Result<FlowMod> {
        let mut r = Rd::new(body, "OFPT_FLOW_MOD");
        let m = ofmatch10::decode(&mut r)?;
        let cookie = r.u64()?;
        let cmd = r.u16()?;
        let mut fm = FlowMod::blank(Command::from_wire(cmd as u8)?);
        fm.spec.match_ = m;
        fm.spec.cookie = cookie;
        fm.spec.table = fm.table_from_wire((cmd >> 8) as u8);
        fm.spec.idle_timeout = r.u16()?;
        fm.spec.hard_timeout = r.u16()?;
        fm.spec.priority = r.u16()?;
        fm.buffer_id = r.u32()?;
        let out_port = r.u16()?;
        fm.spec.out_port = (out_port != OfPort::ANY.0).then_some(OfPort(out_port));
        let f = r.u16()?;
        fm.set_flags(f);
        fm.spec.actions = decode_actions(r.rest(), version::OF10)?;
        Ok(fm)
    }

    fn cmd16(&self) -> u16 {
        u16::from(self.table_to_wire()) << 8 | u16::from(self.command.to_wire())
    }

    fn ctx(&self, version: u8) -> EncodeCtx {
        EncodeCtx {
            version,
            nw_proto: self.spec.match_.nw_proto(),
        }
    }

    /// Encodes as an OpenFlow 1.0 `OFPT_FLOW_MOD` body.
    pub(crate) fn encode_of10(&self, w: &mut Wr) -> Result<()> {
        ofmatch10::encode(w, &self.spec.match_);
        w.u64(self.spec.cookie);
        w.u16(self.cmd16());
        w.u16(self.spec.idle_timeout);
        w.u16(self.spec.hard_timeout);
        w.u16(self.spec.priority);
        w.u32(self.buffer_id);
        w.u16(self.spec.out_port.unwrap_or(OfPort::ANY).0);
        w.u16(self.wire_flags());
        encode_actions(w, &self.spec.actions, self.ctx(version::OF10))
    }

    /// Decodes an `NXT_FLOW_MOD` body (after the 16-byte Nicira header) of a message of
    /// wire version `ver` (the actions are 1.0 actions in 1.0, instructions in 1.1+, as OVS
    /// reads them).
    pub fn decode_nx(body: &[u8], ver: u8) -> Result<FlowMod> {
        let mut r = Rd::new(body, "NXT_FLOW_MOD");
        let cookie = r.u64()?;
        let cmd = r.u16()?;
        let mut fm = FlowMod::blank(Command::from_wire(cmd as u8)?);
        fm.spec.table = fm.table_from_wire((cmd >> 8) as u8);
        fm.spec.idle_timeout = r.u16()?;
        fm.spec.hard_timeout = r.u16()?;
        fm.spec.priority = r.u16()?;
        fm.buffer_id = r.u32()?;
        let out_port = r.u16()?;
        fm.spec.out_port = (out_port != OfPort::ANY.0).then_some(OfPort(out_port));
        let f = r.u16()?;
        fm.set_flags(f);
        let match_len = usize::from(r.u16()?);
        r.skip(6)?;
        let (m, filter) = nxm::decode_nxm_padded(&mut r, match_len)?;
        fm.spec.match_ = m;
        match filter.filter(|c| c.mask != 0) {
            Some(c) => {
                fm.spec.cookie = c.cookie;
                fm.spec.cookie_mask = c.mask;
                fm.new_cookie = cookie;
            }
            None => fm.spec.cookie = cookie,
        }
        fm.spec.actions = decode_nx_actions(r.rest(), ver)?;
        Ok(fm)
    }

    /// Encodes as an `NXT_FLOW_MOD` body (after the Nicira header) of wire version `ver`.
    pub(crate) fn encode_nx(&self, w: &mut Wr, ver: u8) -> Result<()> {
        let filter = (self.spec.cookie_mask != 0).then_some(CookieFilter {
            cookie: self.spec.cookie,
            mask: self.spec.cookie_mask,
        });
        w.u64(if filter.is_some() {
            self.new_cookie
        } else {
            self.spec.cookie
        });
        w.u16(self.cmd16());
        w.u16(self.spec.idle_timeout);
        w.u16(self.spec.hard_timeout);
        w.u16(self.spec.priority);
        w.u32(self.buffer_id);
        w.u16(self.spec.out_port.unwrap_or(OfPort::ANY).0);
        w.u16(self.wire_flags());
        let at = w.len();
        w.u16(0);
        w.zeros(6);
        let len = nxm::encode_nxm_padded(w, &self.spec.match_, filter);
        w.patch_u16(at, len as u16);
        encode_nx_actions(w, &self.spec.actions, self.ctx(ver))
    }

    /// Decodes an OpenFlow 1.1+ `OFPT_FLOW_MOD` body of version `ver`.
    pub fn decode_of11(body: &[u8], ver: u8) -> Result<FlowMod> {
        let mut r = Rd::new(body, "OFPT_FLOW_MOD");
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let table = r.u8()?;
        let mut fm = FlowMod::blank(Command::from_wire(r.u8()?)?);
        fm.spec.cookie = cookie;
        fm.spec.cookie_mask = cookie_mask;
        fm.spec.table = fm.table_from_wire(table);
        fm.spec.idle_timeout = r.u16()?;
        fm.spec.hard_timeout = r.u16()?;
        fm.spec.priority = r.u16()?;
        fm.buffer_id = r.u32()?;
        let out_port = r.u32()?;
        fm.spec.out_port = if out_port == u32::MAX {
            None
        } else {
            Some(
                OfPort::from_ofp11(out_port)
                    .ok_or_else(|| invalid(format!("out_port 0x{out_port:x}")))?,
            )
        };
        fm.out_group = r.u32()?;
        let f = r.u16()?;
        fm.set_flags(f);
        let importance = r.u16()?;
        if ver >= version::OF14 {
            fm.spec.importance = importance;
        }
        fm.spec.match_ = nxm::decode_oxm_match(&mut r, ver)?;
        fm.spec.actions = decode_instructions(r.rest(), ver)?;
        Ok(fm)
    }

    /// Encodes as an OpenFlow 1.1+ `OFPT_FLOW_MOD` body of version `ver`.
    pub(crate) fn encode_of11(&self, w: &mut Wr, ver: u8) -> Result<()> {
        w.u64(self.spec.cookie);
        w.u64(self.spec.cookie_mask);
        w.u8(self.table_to_wire());
        w.u8(self.command.to_wire());
        w.u16(self.spec.idle_timeout);
        w.u16(self.spec.hard_timeout);
        w.u16(self.spec.priority);
        w.u32(self.buffer_id);
        w.u32(self.spec.out_port.map_or(u32::MAX, |p| p.to_ofp11()));
        w.u32(self.out_group);
        w.u16(self.wire_flags());
        w.u16(if ver >= version::OF14 {
            self.spec.importance
        } else {
            0
        });
        nxm::encode_oxm_match(w, &self.spec.match_, ver);
        encode_instructions(w, &self.spec.actions, self.ctx(ver))
    }
}

/// The action part of a Nicira message (`NXT_FLOW_MOD`, `NXST_FLOW`) of wire version `ver`:
/// 1.0 actions in 1.0, 1.1+ instructions above.
pub(crate) fn decode_nx_actions(b: &[u8], ver: u8) -> Result<Vec<flow::ofp::Action>> {
    if ver == version::OF10 {
        decode_actions(b, ver)
    } else {
        decode_instructions(b, ver)
    }
}

/// Writes the action part of a Nicira message of wire version `cx.version`.
pub(crate) fn encode_nx_actions(
    w: &mut Wr,
    acts: &[flow::ofp::Action],
    cx: EncodeCtx,
) -> Result<()> {
    if cx.version == version::OF10 {
        encode_actions(w, acts, cx)
    } else {
        encode_instructions(w, acts, cx)
    }
}

/// Checks that a decoded length field fits in what is left (used by stats entries).
pub(crate) fn check_len(what: &'static str, len: usize, min: usize, left: usize) -> Result<()> {
    if len < min || len > left || !len.is_multiple_of(8) {
        return Err(Error::BadLength { what, len });
    }
    Ok(())
}
