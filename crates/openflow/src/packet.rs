//! Messages that carry a packet or a flow's end: packet-in (OpenFlow 1.0, 1.1, 1.2, 1.3+,
//! `NXT_PACKET_IN`, `NXT_PACKET_IN2`), packet-out (1.0, 1.1–1.4, 1.5) and flow-removed
//! (1.0, 1.1, 1.2–1.5, `NXT_FLOW_REMOVED`).
//!
//! Packet metadata (the input port, registers, tunnel, …) is a [`Match`] in every form: 1.0
//! has only `in_port`, which lands in the match's `in_port`; the others carry an OXM or NXM
//! match. Bodies only: the message layer ([`crate::msg`]) adds the headers.

use crate::action::{EncodeCtx, decode_actions, encode_actions};
use crate::codec::{Rd, Wr};
use crate::error::{Error, Result, invalid};
use crate::header::version;
use crate::nxm;
use crate::ofmatch10;
use flow::field::FieldId;
use flow::ofp::{Action, Match, OfPort};

/// A packet sent to the controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketIn {
    /// Buffer id (`0xffffffff` = not buffered).
    pub buffer_id: u32,
    /// Length of the whole frame (≥ `data.len()` when truncated).
    pub total_len: u32,
    /// `OFPR_*` reason.
    pub reason: u8,
    /// Table of the flow that sent it (not in 1.0).
    pub table_id: u8,
    /// Cookie of the flow that sent it (1.3+, Nicira).
    pub cookie: u64,
    /// Packet metadata (`in_port`, registers, …).
    pub match_: Match,
    /// The frame (maybe truncated).
    pub data: Vec<u8>,
    /// A `controller(userdata=…)`'s userdata: only `NXT_PACKET_IN2` carries it.
    pub userdata: Vec<u8>,
    /// A `controller(pause)`'s continuation (`NXT_PACKET_IN2` and `NXT_RESUME` only).
    pub continuation: Option<Continuation>,
}

/// The private part of a paused packet-in (`NXPINT_CONTINUATION`), which the controller
/// sends back unchanged in `NXT_RESUME`: what the switch needs to run the rest of the
/// pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Continuation {
    /// The bridge that paused it (a resume elsewhere is refused).
    pub bridge: [u8; 16],
    /// The packet had been through conntrack.
    pub conntracked: bool,
    /// The rest of the pipeline, with `unroll_xlate` markers for the table and cookie the
    /// actions after each run under (on the wire, `NXCPT_TABLE_ID`/`NXCPT_COOKIE` between
    /// `NXCPT_ACTIONS` runs).
    pub actions: Vec<Action>,
    /// The datapath port the packet came in on.
    pub odp_port: Option<u32>,
}

/// `NXCPT_*` continuation property types.
mod nxcpt {
    pub const BRIDGE: u16 = 0x8000;
    pub const STACK: u16 = 0x8001;
    pub const MIRRORS: u16 = 0x8002;
    pub const CONNTRACKED: u16 = 0x8003;
    pub const TABLE_ID: u16 = 0x8004;
    pub const COOKIE: u16 = 0x8005;
    pub const ACTIONS: u16 = 0x8006;
    pub const ACTION_SET: u16 = 0x8007;
    pub const ODP_PORT: u16 = 0x8008;
}

/// Writes a property of type `typ` whose body `f` writes after `pad` zero bytes, padded to
/// 8 bytes (OVS `ofpprop`; nested and 64-bit properties have 4 bytes of padding first).
fn put_prop(w: &mut Wr, typ: u16, pad: usize, f: &dyn Fn(&mut Wr) -> Result<()>) -> Result<()> {
    let start = w.len();
    w.u16(typ);
    w.u16(0);
    w.zeros(pad);
    f(w)?;
    w.patch_len(start + 2, start, "property")?;
    w.pad8_from(start);
    Ok(())
}

impl Continuation {
    fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        let cx = crate::action::EncodeCtx {
            version: ver,
            nw_proto: 0,
        };
        put_prop(w, nxcpt::BRIDGE, 0, &|w| {
            w.bytes(&self.bridge);
            Ok(())
        })?;
        if self.conntracked {
            put_prop(w, nxcpt::CONNTRACKED, 0, &|_| Ok(()))?;
        }
        let (mut table, mut cookie) = (0u8, 0u64);
        for run in self
            .actions
            .split_inclusive(|a| matches!(a, Action::UnrollXlate { .. }))
        {
            let (acts, next) = match run.split_last() {
                Some((Action::UnrollXlate { table, cookie }, rest)) => {
                    (rest, Some((*table, *cookie)))
                }
                _ => (run, None),
            };
            if !acts.is_empty() {
                put_prop(w, nxcpt::ACTIONS, 4, &|w| {
                    crate::action::encode_actions(w, acts, cx)
                })?;
            }
            if let Some((t, c)) = next {
                if t != table {
                    put_prop(w, nxcpt::TABLE_ID, 0, &|w| {
                        w.u8(t);
                        Ok(())
                    })?;
                    table = t;
                }
                if c != cookie {
                    put_prop(w, nxcpt::COOKIE, 4, &|w| {
                        w.u64(c);
                        Ok(())
                    })?;
                    cookie = c;
                }
            }
        }
        if let Some(p) = self.odp_port {
            put_prop(w, nxcpt::ODP_PORT, 0, &|w| {
                w.u32(p);
                Ok(())
            })?;
        }
        Ok(())
    }

    fn decode(body: &[u8], ver: u8) -> Result<Continuation> {
        let mut r = Rd::new(body, "NXPINT_CONTINUATION");
        let mut c = Continuation::default();
        let (mut table, mut cookie) = (0u8, 0u64);
        let (mut last_table, mut last_cookie) = (0u8, 0u64);
        while !r.is_empty() {
            let (typ, mut v) = r.prop("continuation property")?;
            match typ {
                nxcpt::BRIDGE => {
                    let b = v.bytes(16)?;
                    c.bridge.copy_from_slice(b);
                }
                nxcpt::CONNTRACKED => c.conntracked = true,
                nxcpt::TABLE_ID => table = v.u8()?,
                nxcpt::COOKIE => {
                    v.skip(4)?;
                    cookie = v.u64()?;
                }
                nxcpt::ACTIONS => {
                    v.skip(4)?;
                    if (table, cookie) != (last_table, last_cookie) {
                        c.actions.push(Action::UnrollXlate { table, cookie });
                        (last_table, last_cookie) = (table, cookie);
                    }
                    c.actions
                        .extend(crate::action::decode_actions(v.rest(), ver)?);
                }
                nxcpt::ODP_PORT => c.odp_port = Some(v.u32()?),
                nxcpt::MIRRORS => {
                    if v.u32()? != 0 {
                        return Err(crate::error::unsupported("continuation with mirrors"));
                    }
                }
                nxcpt::STACK | nxcpt::ACTION_SET => {
                    return Err(crate::error::unsupported(format!(
                        "continuation property {typ:#x}"
                    )));
                }
                t => {
                    return Err(crate::error::unsupported(format!(
                        "continuation property {t:#x}"
                    )));
                }
            }
        }
        Ok(c)
    }
}

fn in_port_of(m: &Match) -> u16 {
    m.value(FieldId::InPort) as u16
}

fn match_in_port(p: u16) -> Match {
    let mut m = Match::catchall();
    m.set_storage(FieldId::InPort, u128::from(p), 0xffff_ffff);
    m
}

impl PacketIn {
    /// Decodes a standard `OFPT_PACKET_IN` body of version `ver`.
    pub fn decode(body: &[u8], ver: u8) -> Result<PacketIn> {
        let mut r = Rd::new(body, "OFPT_PACKET_IN");
        let buffer_id = r.u32()?;
        if ver == version::OF11 {
            let in_port = r.u32()?;
            let port = OfPort::from_ofp11(in_port)
                .ok_or_else(|| invalid(format!("in_port 0x{in_port:x}")))?;
            r.skip(4)?;
            let total_len = u32::from(r.u16()?);
            let reason = r.u8()?;
            let table_id = r.u8()?;
            return Ok(PacketIn {
                buffer_id,
                total_len,
                reason,
                table_id,
                cookie: 0,
                match_: match_in_port(port.0),
                data: r.rest().to_vec(),
                userdata: Vec::new(),
                continuation: None,
            });
        }
        let total_len = u32::from(r.u16()?);
        if ver == version::OF10 {
            let in_port = r.u16()?;
            let reason = r.u8()?;
            r.skip(1)?;
            return Ok(PacketIn {
                buffer_id,
                total_len,
                reason,
                table_id: 0,
                cookie: 0,
                match_: match_in_port(in_port),
                data: r.rest().to_vec(),
                userdata: Vec::new(),
                continuation: None,
            });
        }
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let cookie = if ver >= version::OF13 { r.u64()? } else { 0 };
        let match_ = nxm::decode_oxm_match(&mut r, ver)?;
        r.skip(2)?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            match_,
            data: r.rest().to_vec(),
            userdata: Vec::new(),
            continuation: None,
        })
    }

    fn total16(&self) -> Result<u16> {
        u16::try_from(self.total_len).map_err(|_| Error::BadLength {
            what: "packet-in total_len",
            len: self.total_len as usize,
        })
    }

    /// Encodes a standard `OFPT_PACKET_IN` body of version `ver`.
    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        w.u32(self.buffer_id);
        if ver == version::OF11 {
            let p = OfPort(in_port_of(&self.match_)).to_ofp11();
            w.u32(p);
            w.u32(p);
            w.u16(self.total16()?);
            w.u8(self.reason);
            w.u8(self.table_id);
            w.bytes(&self.data);
            return Ok(());
        }
        w.u16(self.total16()?);
        if ver == version::OF10 {
            w.u16(in_port_of(&self.match_));
            w.u8(self.reason);
            w.u8(0);
        } else {
            w.u8(self.reason);
            w.u8(self.table_id);
            if ver >= version::OF13 {
                w.u64(self.cookie);
            }
            nxm::encode_oxm_match(w, &self.match_, ver);
            w.zeros(2);
        }
        w.bytes(&self.data);
        Ok(())
    }

    /// Decodes an `NXT_PACKET_IN` body (after the Nicira header).
    pub fn decode_nx(body: &[u8]) -> Result<PacketIn> {
        let mut r = Rd::new(body, "NXT_PACKET_IN");
        let buffer_id = r.u32()?;
        let total_len = u32::from(r.u16()?);
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let match_len = usize::from(r.u16()?);
        r.skip(6)?;
        let (match_, c) = nxm::decode_nxm_padded(&mut r, match_len)?;
        if c.is_some() {
            return Err(invalid("NXM_NX_COOKIE in a packet-in"));
        }
        r.skip(2)?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            match_,
            data: r.rest().to_vec(),
            userdata: Vec::new(),
            continuation: None,
        })
    }

    /// Encodes an `NXT_PACKET_IN` body.
    pub(crate) fn encode_nx(&self, w: &mut Wr) -> Result<()> {
        w.u32(self.buffer_id);
        w.u16(self.total16()?);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u64(self.cookie);
        let at = w.len();
        w.u16(0);
        w.zeros(6);
        let len = nxm::encode_nxm_padded(w, &self.match_, None);
        w.patch_u16(at, len as u16);
        w.zeros(2);
        w.bytes(&self.data);
        Ok(())
    }

    /// Decodes an `NXT_PACKET_IN2` (or `NXT_RESUME`) body of version `ver` (properties;
    /// unknown ones are an error).
    pub fn decode_nx2(body: &[u8], ver: u8) -> Result<PacketIn> {
        let mut r = Rd::new(body, "NXT_PACKET_IN2");
        let mut p = PacketIn {
            buffer_id: u32::MAX,
            total_len: 0,
            reason: 0,
            table_id: 0,
            cookie: 0,
            match_: Match::catchall(),
            data: Vec::new(),
            userdata: Vec::new(),
            continuation: None,
        };
        let mut full_len = None;
        while !r.is_empty() {
            let (typ, mut v) = r.prop("NXT_PACKET_IN2 property")?;
            match typ {
                0 => p.data = v.rest().to_vec(),
                1 => full_len = Some(v.u32()?),
                2 => p.buffer_id = v.u32()?,
                3 => p.table_id = v.u8()?,
                4 => {
                    v.skip(4)?;
                    p.cookie = v.u64()?;
                }
                5 => p.reason = v.u8()?,
                6 => {
                    let (m, c) = nxm::decode_tlvs(v.rest())?;
                    if c.is_some() {
                        return Err(invalid("NXM_NX_COOKIE in a packet-in"));
                    }
                    p.match_ = m;
                }
                7 => p.userdata = v.rest().to_vec(),
                8 => {
                    v.skip(4)?;
                    p.continuation = Some(Continuation::decode(v.rest(), ver)?);
                }
                t => {
                    return Err(crate::error::unsupported(format!(
                        "NXT_PACKET_IN2 property {t}"
                    )));
                }
            }
        }
        p.total_len = full_len.unwrap_or(p.data.len() as u32);
        Ok(p)
    }

    /// Encodes an `NXT_PACKET_IN2` (or `NXT_RESUME`) body of version `ver`.
    pub(crate) fn encode_nx2(&self, w: &mut Wr, ver: u8) -> Result<()> {
        let prop = |w: &mut Wr, typ: u16, f: &dyn Fn(&mut Wr)| -> Result<()> {
            let start = w.len();
            w.u16(typ);
            w.u16(0);
            f(w);
            w.patch_len(start + 2, start, "NXT_PACKET_IN2 property")?;
            w.pad8_from(start);
            Ok(())
        };
        prop(w, 0, &|w| w.bytes(&self.data))?;
        if self.total_len as usize != self.data.len() {
            prop(w, 1, &|w| w.u32(self.total_len))?;
        }
        if self.buffer_id != u32::MAX {
            prop(w, 2, &|w| w.u32(self.buffer_id))?;
        }
        prop(w, 3, &|w| w.u8(self.table_id))?;
        prop(w, 4, &|w| {
            w.zeros(4);
            w.u64(self.cookie)
        })?;
        prop(w, 5, &|w| w.u8(self.reason))?;
        prop(w, 6, &|w| nxm::encode_packet_in_metadata(w, &self.match_))?;
        // OVS's order: the continuation, then the userdata.
        if let Some(c) = &self.continuation {
            put_prop(w, 8, 4, &|w| c.encode(w, ver))?;
        }
        if !self.userdata.is_empty() {
            prop(w, 7, &|w| w.bytes(&self.userdata))?;
        }
        Ok(())
    }
}

/// A packet sent by the controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketOut {
    /// Buffer id (`0xffffffff` = the frame is in `data`).
    pub buffer_id: u32,
    /// Input port, 1.1+ numbering (1.5: taken from `match_` on decode, ignored on encode).
    pub in_port: u32,
    /// 1.5 only: pipeline fields (`in_port`, registers, …).
    pub match_: Match,
    /// Actions.
    pub actions: Vec<Action>,
    /// The frame.
    pub data: Vec<u8>,
}

impl PacketOut {
    /// Decodes an `OFPT_PACKET_OUT` body of version `ver`.
    pub fn decode(body: &[u8], ver: u8) -> Result<PacketOut> {
        let mut r = Rd::new(body, "OFPT_PACKET_OUT");
        let buffer_id = r.u32()?;
        let (in_port, match_, actions_len) = if ver == version::OF10 {
            let p = OfPort(r.u16()?).to_ofp11();
            (p, Match::catchall(), r.u16()?)
        } else if ver < version::OF15 {
            let p = r.u32()?;
            let n = r.u16()?;
            r.skip(6)?;
            (p, Match::catchall(), n)
        } else {
            let n = r.u16()?;
            r.skip(2)?;
            let m = nxm::decode_oxm_match(&mut r, ver)?;
            let p = if m.mask_of(FieldId::InPort) != 0 {
                OfPort(m.value(FieldId::InPort) as u16).to_ofp11()
            } else {
                OfPort::ANY.to_ofp11()
            };
            (p, m, n)
        };
        let acts = r.bytes(usize::from(actions_len))?;
        Ok(PacketOut {
            buffer_id,
            in_port,
            match_,
            actions: decode_actions(acts, ver)?,
            data: r.rest().to_vec(),
        })
    }

    /// Encodes an `OFPT_PACKET_OUT` body of version `ver`.
    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        w.u32(self.buffer_id);
        let at;
        if ver == version::OF10 {
            let p = OfPort::from_ofp11(self.in_port)
                .ok_or_else(|| invalid(format!("in_port 0x{:x}", self.in_port)))?;
            w.u16(p.0);
            at = w.len();
            w.u16(0);
        } else if ver < version::OF15 {
            w.u32(self.in_port);
            at = w.len();
            w.u16(0);
            w.zeros(6);
        } else {
            at = w.len();
            w.u16(0);
            w.zeros(2);
            nxm::encode_oxm_match(w, &self.match_, ver);
        }
        let start = w.len();
        encode_actions(
            w,
            &self.actions,
            EncodeCtx {
                version: ver,
                nw_proto: 0,
            },
        )?;
        w.patch_len(at, start, "packet-out actions")?;
        w.bytes(&self.data);
        Ok(())
    }
}

/// A flow's removal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub struct FlowRemoved {
    pub match_: Match,
    pub cookie: u64,
    pub priority: u16,
    /// `OFPRR_*` reason.
    pub reason: u8,
    /// Table (not in 1.0).
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    /// Not in 1.0 or NXM.
    pub hard_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
}

impl FlowRemoved {
    /// Decodes a standard `OFPT_FLOW_REMOVED` body (1.5: OXS counters).
    pub fn decode(body: &[u8], ver: u8) -> Result<FlowRemoved> {
        let mut r = Rd::new(body, "OFPT_FLOW_REMOVED");
        if ver == version::OF10 {
            let match_ = ofmatch10::decode(&mut r)?;
            let cookie = r.u64()?;
            let priority = r.u16()?;
            let reason = r.u8()?;
            r.skip(1)?;
            let duration_sec = r.u32()?;
            let duration_nsec = r.u32()?;
            let idle_timeout = r.u16()?;
            r.skip(2)?;
            return Ok(FlowRemoved {
                match_,
                cookie,
                priority,
                reason,
                table_id: 0,
                duration_sec,
                duration_nsec,
                idle_timeout,
                hard_timeout: 0,
                packet_count: r.u64()?,
                byte_count: r.u64()?,
            });
        }
        if ver >= version::OF15 {
            let mut f = FlowRemoved {
                table_id: r.u8()?,
                reason: r.u8()?,
                priority: r.u16()?,
                idle_timeout: r.u16()?,
                hard_timeout: r.u16()?,
                cookie: r.u64()?,
                match_: Match::catchall(),
                duration_sec: 0,
                duration_nsec: 0,
                packet_count: 0,
                byte_count: 0,
            };
            f.match_ = nxm::decode_oxm_match(&mut r, ver)?;
            let o = crate::flow_stats::Oxs::decode(&mut r)?;
            (f.duration_sec, f.duration_nsec) = o.duration.unwrap_or((0, 0));
            f.packet_count = o.packets.unwrap_or(0);
            f.byte_count = o.bytes.unwrap_or(0);
            return Ok(f);
        }
        let mut f = FlowRemoved {
            cookie: r.u64()?,
            priority: r.u16()?,
            reason: r.u8()?,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            // 1.1 has padding where 1.2 put the hard timeout.
            hard_timeout: if ver == version::OF11 {
                r.skip(2)?;
                0
            } else {
                r.u16()?
            },
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            match_: Match::catchall(),
        };
        f.match_ = nxm::decode_oxm_match(&mut r, ver)?;
        Ok(f)
    }

    /// Encodes a standard `OFPT_FLOW_REMOVED` body.
    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        if ver == version::OF10 {
            ofmatch10::encode(w, &self.match_);
            w.u64(self.cookie);
            w.u16(self.priority);
            w.u8(self.reason);
            w.u8(0);
            w.u32(self.duration_sec);
            w.u32(self.duration_nsec);
            w.u16(self.idle_timeout);
            w.zeros(2);
            w.u64(self.packet_count);
            w.u64(self.byte_count);
            return Ok(());
        }
        if ver >= version::OF15 {
            w.u8(self.table_id);
            w.u8(self.reason);
            w.u16(self.priority);
            w.u16(self.idle_timeout);
            w.u16(self.hard_timeout);
            w.u64(self.cookie);
            nxm::encode_oxm_match(w, &self.match_, ver);
            return crate::flow_stats::Oxs {
                duration: Some((self.duration_sec, self.duration_nsec)),
                packets: Some(self.packet_count),
                bytes: Some(self.byte_count),
                ..Default::default()
            }
            .encode(w);
        }
        w.u64(self.cookie);
        w.u16(self.priority);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.idle_timeout);
        w.u16(if ver == version::OF11 {
            0
        } else {
            self.hard_timeout
        });
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        nxm::encode_oxm_match(w, &self.match_, ver);
        Ok(())
    }

    /// Decodes an `NXT_FLOW_REMOVED` body.
    pub fn decode_nx(body: &[u8]) -> Result<FlowRemoved> {
        let mut r = Rd::new(body, "NXT_FLOW_REMOVED");
        let cookie = r.u64()?;
        let priority = r.u16()?;
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let duration_sec = r.u32()?;
        let duration_nsec = r.u32()?;
        let idle_timeout = r.u16()?;
        let match_len = usize::from(r.u16()?);
        let packet_count = r.u64()?;
        let byte_count = r.u64()?;
        let (match_, c) = nxm::decode_nxm_padded(&mut r, match_len)?;
        if c.is_some() {
            return Err(invalid("NXM_NX_COOKIE in a flow-removed"));
        }
        Ok(FlowRemoved {
            match_,
            cookie,
            priority,
            reason,
            table_id,
            duration_sec,
            duration_nsec,
            idle_timeout,
            hard_timeout: 0,
            packet_count,
            byte_count,
        })
    }

    /// Encodes an `NXT_FLOW_REMOVED` body.
    pub(crate) fn encode_nx(&self, w: &mut Wr) -> Result<()> {
        w.u64(self.cookie);
        w.u16(self.priority);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.idle_timeout);
        let at = w.len();
        w.u16(0);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        let len = nxm::encode_nxm_padded(w, &self.match_, None);
        w.patch_u16(at, len as u16);
        Ok(())
    }
}
