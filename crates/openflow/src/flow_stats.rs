//! Flow statistics: the flow/aggregate stats request filter ([`FlowStatsRequest`]), one
//! flow's statistics ([`FlowStats`]) and flow totals ([`AggregateStats`]) in every wire form —
//! OpenFlow 1.0 (`ofp_match`), 1.1–1.4 (standard/OXM match + instructions), 1.5
//! (`ofp_flow_desc` with OXS counters) and Nicira's `NXST_FLOW`/`NXST_AGGREGATE`
//! (NXM match). [`crate::stats`] wraps them into multipart bodies.

use crate::action::{EncodeCtx, decode_actions, encode_actions};
use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid};
use crate::flow_mod::check_len;
use crate::header::version;
use crate::instruction::{decode_instructions, encode_instructions};
use crate::nxm;
use crate::ofmatch10;
use flow::ofp::{Action, Match, OfPort};

/// Flow and aggregate stats request filter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStatsRequest {
    /// Table (`0xff` = all).
    pub table_id: u8,
    /// `out_port` filter, 1.1+ numbering (`0xffffffff` = any).
    pub out_port: u32,
    /// `out_group` filter (1.1+).
    pub out_group: u32,
    /// Cookie filter value (1.1+ and NXM).
    pub cookie: u64,
    /// Cookie filter mask.
    pub cookie_mask: u64,
    /// Match filter.
    pub match_: Match,
}

impl Default for FlowStatsRequest {
    fn default() -> Self {
        FlowStatsRequest {
            table_id: 0xff,
            out_port: u32::MAX,
            out_group: u32::MAX,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::catchall(),
        }
    }
}

/// One flow's statistics.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStats {
    /// Table.
    pub table_id: u8,
    /// Age, seconds.
    pub duration_sec: u32,
    /// Age, nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Priority.
    pub priority: u16,
    /// Idle timeout.
    pub idle_timeout: u16,
    /// Hard timeout.
    pub hard_timeout: u16,
    /// `OFPFF_*` flags (1.3+).
    pub flags: u16,
    /// Eviction importance (1.4+).
    pub importance: u16,
    /// NXM and 1.5 (`OXS_OF_IDLE_TIME`): seconds since last use, plus one (0 = unknown).
    pub idle_age: u16,
    /// NXM only: seconds since last modification, plus one (0 = unknown).
    pub hard_age: u16,
    /// Cookie.
    pub cookie: u64,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Match.
    pub match_: Match,
    /// Actions (with a trailing `goto_table` for 1.1+ instructions).
    pub actions: Vec<Action>,
}

/// Flow totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AggregateStats {
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Flows.
    pub flow_count: u32,
}

pub(crate) fn port_in(ver: u8, r: &mut Rd<'_>) -> Result<u32> {
    if ver == version::OF10 {
        Ok(OfPort(r.u16()?).to_ofp11())
    } else {
        r.u32()
    }
}

pub(crate) fn port_out(ver: u8, w: &mut Wr, p: u32) -> Result<()> {
    if ver == version::OF10 {
        let p = OfPort::from_ofp11(p)
            .ok_or_else(|| invalid(format!("port 0x{p:x} in OpenFlow 1.0")))?;
        w.u16(p.0);
    } else {
        w.u32(p);
    }
    Ok(())
}

impl FlowStatsRequest {
    pub(crate) fn decode(r: &mut Rd<'_>, ver: u8) -> Result<FlowStatsRequest> {
        let mut q = FlowStatsRequest::default();
        if ver == version::OF10 {
            q.match_ = ofmatch10::decode(r)?;
            q.table_id = r.u8()?;
            r.skip(1)?;
            q.out_port = port_in(ver, r)?;
        } else {
            q.table_id = r.u8()?;
            r.skip(3)?;
            q.out_port = r.u32()?;
            q.out_group = r.u32()?;
            r.skip(4)?;
            q.cookie = r.u64()?;
            q.cookie_mask = r.u64()?;
            q.match_ = nxm::decode_oxm_match(r, ver)?;
        }
        Ok(q)
    }

    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        if ver == version::OF10 {
            ofmatch10::encode(w, &self.match_);
            w.u8(self.table_id);
            w.u8(0);
            port_out(ver, w, self.out_port)?;
        } else {
            w.u8(self.table_id);
            w.zeros(3);
            w.u32(self.out_port);
            w.u32(self.out_group);
            w.zeros(4);
            w.u64(self.cookie);
            w.u64(self.cookie_mask);
            nxm::encode_oxm_match(w, &self.match_, ver);
        }
        Ok(())
    }

    pub(crate) fn decode_nx(r: &mut Rd<'_>) -> Result<FlowStatsRequest> {
        let mut q = FlowStatsRequest {
            out_port: OfPort(r.u16()?).to_ofp11(),
            ..FlowStatsRequest::default()
        };
        let match_len = usize::from(r.u16()?);
        q.table_id = r.u8()?;
        r.skip(3)?;
        let (m, cookie) = nxm::decode_nxm_padded(r, match_len)?;
        q.match_ = m;
        if let Some(c) = cookie.filter(|c| c.mask != 0) {
            q.cookie = c.cookie;
            q.cookie_mask = c.mask;
        }
        Ok(q)
    }

    pub(crate) fn encode_nx(&self, w: &mut Wr) -> Result<()> {
        port_out(version::OF10, w, self.out_port)?;
        let at = w.len();
        w.u16(0);
        w.u8(self.table_id);
        w.zeros(3);
        let cookie = (self.cookie_mask != 0).then_some(nxm::CookieFilter {
            cookie: self.cookie,
            mask: self.cookie_mask,
        });
        let len = nxm::encode_nxm_padded(w, &self.match_, cookie);
        w.patch_u16(at, len as u16);
        Ok(())
    }
}

impl AggregateStats {
    pub(crate) fn decode(r: &mut Rd<'_>) -> Result<Self> {
        let a = AggregateStats {
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            flow_count: r.u32()?,
        };
        r.skip(4)?;
        Ok(a)
    }
    pub(crate) fn encode(&self, w: &mut Wr) {
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        w.u32(self.flow_count);
        w.zeros(4);
    }
}

impl FlowStats {
    fn blank() -> FlowStats {
        FlowStats {
            table_id: 0,
            duration_sec: 0,
            duration_nsec: 0,
            priority: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            idle_age: 0,
            hard_age: 0,
            cookie: 0,
            packet_count: 0,
            byte_count: 0,
            match_: Match::catchall(),
            actions: Vec::new(),
        }
    }

    pub(crate) fn decode(r: &mut Rd<'_>, ver: u8) -> Result<FlowStats> {
        let len = usize::from(r.peek_u16(0)?);
        let min = if ver == version::OF10 { 88 } else { 56 };
        check_len("flow stats entry", len, min, r.remaining())?;
        let mut e = r.sub(len, "flow stats entry")?;
        e.skip(2)?;
        let mut f = FlowStats::blank();
        f.table_id = e.u8()?;
        e.skip(1)?;
        if ver == version::OF10 {
            f.match_ = ofmatch10::decode(&mut e)?;
        }
        f.duration_sec = e.u32()?;
        f.duration_nsec = e.u32()?;
        f.priority = e.u16()?;
        f.idle_timeout = e.u16()?;
        f.hard_timeout = e.u16()?;
        if ver == version::OF10 {
            e.skip(6)?;
        } else {
            let flags = e.u16()?;
            if ver >= version::OF13 {
                f.flags = flags;
            }
            let importance = e.u16()?;
            if ver >= version::OF14 {
                f.importance = importance;
            }
            e.skip(2)?;
        }
        f.cookie = e.u64()?;
        f.packet_count = e.u64()?;
        f.byte_count = e.u64()?;
        if ver == version::OF10 {
            f.actions = decode_actions(e.rest(), ver)?;
        } else {
            f.match_ = nxm::decode_oxm_match(&mut e, ver)?;
            f.actions = decode_instructions(e.rest(), ver)?;
        }
        Ok(f)
    }

    fn ctx(&self, version: u8) -> EncodeCtx {
        EncodeCtx {
            version,
            nw_proto: self.match_.nw_proto(),
        }
    }

    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        let start = w.len();
        w.u16(0);
        w.u8(self.table_id);
        w.u8(0);
        if ver == version::OF10 {
            ofmatch10::encode(w, &self.match_);
        }
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.priority);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        if ver == version::OF10 {
            w.zeros(6);
        } else {
            w.u16(if ver >= version::OF13 { self.flags } else { 0 });
            w.u16(if ver >= version::OF14 {
                self.importance
            } else {
                0
            });
            w.zeros(2);
        }
        w.u64(self.cookie);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        if ver == version::OF10 {
            encode_actions(w, &self.actions, self.ctx(ver))?;
        } else {
            nxm::encode_oxm_match(w, &self.match_, ver);
            encode_instructions(w, &self.actions, self.ctx(ver))?;
        }
        w.patch_len(start, start, "flow stats entry")
    }

    /// OpenFlow 1.5 `ofp_flow_desc` (counters as OXS stats).
    pub(crate) fn decode15(r: &mut Rd<'_>) -> Result<FlowStats> {
        let len = usize::from(r.peek_u16(0)?);
        check_len("flow desc entry", len, 40, r.remaining())?;
        let mut e = r.sub(len, "flow desc entry")?;
        e.skip(4)?;
        let mut f = FlowStats::blank();
        f.table_id = e.u8()?;
        e.skip(1)?;
        f.priority = e.u16()?;
        f.idle_timeout = e.u16()?;
        f.hard_timeout = e.u16()?;
        f.flags = e.u16()?;
        f.importance = e.u16()?;
        f.cookie = e.u64()?;
        f.match_ = nxm::decode_oxm_match(&mut e, version::OF15)?;
        let oxs = Oxs::decode(&mut e)?;
        (f.duration_sec, f.duration_nsec) = oxs.duration.unwrap_or((0, 0));
        f.idle_age = oxs
            .idle
            .map_or(0, |(s, _)| s.saturating_add(1).min(0xffff) as u16);
        f.packet_count = oxs.packets.unwrap_or(0);
        f.byte_count = oxs.bytes.unwrap_or(0);
        f.actions = decode_instructions(e.rest(), version::OF15)?;
        Ok(f)
    }

    pub(crate) fn encode15(&self, w: &mut Wr) -> Result<()> {
        let start = w.len();
        w.u16(0);
        w.zeros(2);
        w.u8(self.table_id);
        w.u8(0);
        w.u16(self.priority);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.flags);
        w.u16(self.importance);
        w.u64(self.cookie);
        nxm::encode_oxm_match(w, &self.match_, version::OF15);
        Oxs {
            duration: Some((self.duration_sec, self.duration_nsec)),
            idle: (self.idle_age != 0).then(|| (u32::from(self.idle_age) - 1, 0)),
            flow_count: None,
            packets: Some(self.packet_count),
            bytes: Some(self.byte_count),
        }
        .encode(w)?;
        encode_instructions(w, &self.actions, self.ctx(version::OF15))?;
        w.patch_len(start, start, "flow desc entry")
    }

    pub(crate) fn decode_nx(r: &mut Rd<'_>, ver: u8) -> Result<FlowStats> {
        let len = usize::from(r.peek_u16(0)?);
        check_len("nx_flow_stats", len, 48, r.remaining())?;
        let mut e = r.sub(len, "nx_flow_stats")?;
        e.skip(2)?;
        let mut f = FlowStats::blank();
        f.table_id = e.u8()?;
        e.skip(1)?;
        f.duration_sec = e.u32()?;
        f.duration_nsec = e.u32()?;
        f.priority = e.u16()?;
        f.idle_timeout = e.u16()?;
        f.hard_timeout = e.u16()?;
        let match_len = usize::from(e.u16()?);
        f.idle_age = e.u16()?;
        f.hard_age = e.u16()?;
        f.cookie = e.u64()?;
        f.packet_count = e.u64()?;
        f.byte_count = e.u64()?;
        let (m, cookie) = nxm::decode_nxm_padded(&mut e, match_len)?;
        if cookie.is_some() {
            return Err(invalid("NXM_NX_COOKIE in flow stats"));
        }
        f.match_ = m;
        f.actions = crate::flow_mod::decode_nx_actions(e.rest(), ver)?;
        Ok(f)
    }

    pub(crate) fn encode_nx(&self, w: &mut Wr, ver: u8) -> Result<()> {
        let start = w.len();
        w.u16(0);
        w.u8(self.table_id);
        w.u8(0);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.priority);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        let at = w.len();
        w.u16(0);
        w.u16(self.idle_age);
        w.u16(self.hard_age);
        w.u64(self.cookie);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        let len = nxm::encode_nxm_padded(w, &self.match_, None);
        w.patch_u16(at, len as u16);
        crate::flow_mod::encode_nx_actions(w, &self.actions, self.ctx(ver))?;
        w.patch_len(start, start, "nx_flow_stats")
    }
}

/// OpenFlow 1.5 statistics (`ofp_stats`: OXS TLVs of class `0x8002`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Oxs {
    pub(crate) duration: Option<(u32, u32)>,
    pub(crate) idle: Option<(u32, u32)>,
    pub(crate) flow_count: Option<u32>,
    pub(crate) packets: Option<u64>,
    pub(crate) bytes: Option<u64>,
}

const OXS_CLASS: u32 = 0x8002;

impl Oxs {
    pub(crate) fn decode(r: &mut Rd<'_>) -> Result<Oxs> {
        let (_, mut b) = r.prop("ofp_stats")?;
        let mut o = Oxs::default();
        while !b.is_empty() {
            let h = b.u32()?;
            let n = (h & 0xff) as usize;
            let mut v = b.sub(n, "OXS field")?;
            if h >> 16 != OXS_CLASS {
                continue;
            }
            match ((h >> 9) & 0x7f, n) {
                (0, 8) => o.duration = Some((v.u32()?, v.u32()?)),
                (1, 8) => o.idle = Some((v.u32()?, v.u32()?)),
                (3, 4) => o.flow_count = Some(v.u32()?),
                (4, 8) => o.packets = Some(v.u64()?),
                (5, 8) => o.bytes = Some(v.u64()?),
                _ => {}
            }
        }
        Ok(o)
    }

    pub(crate) fn encode(&self, w: &mut Wr) -> Result<()> {
        let start = w.len();
        w.u16(0);
        w.u16(0);
        let hdr = |w: &mut Wr, field: u32, n: u32| w.u32(OXS_CLASS << 16 | field << 9 | n);
        if let Some((s, ns)) = self.duration {
            hdr(w, 0, 8);
            w.u32(s);
            w.u32(ns);
        }
        if let Some((s, ns)) = self.idle {
            hdr(w, 1, 8);
            w.u32(s);
            w.u32(ns);
        }
        if let Some(c) = self.flow_count {
            hdr(w, 3, 4);
            w.u32(c);
        }
        if let Some(p) = self.packets {
            hdr(w, 4, 8);
            w.u64(p);
        }
        if let Some(b) = self.bytes {
            hdr(w, 5, 8);
            w.u64(b);
        }
        w.patch_len(start + 2, start, "ofp_stats")?;
        w.pad8_from(start);
        Ok(())
    }
}
