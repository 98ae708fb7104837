//! Statistics ("multipart" from 1.3): request and reply bodies for DESC, FLOW, AGGREGATE,
//! TABLE, PORT, PORT_DESC and TABLE_FEATURES, and Nicira's NXST_FLOW / NXST_AGGREGATE.
//!
//! The message layer ([`crate::msg`]) strips the common part (`type`, `flags`, 1.1+ padding,
//! and for Nicira stats the vendor id and subtype); what is here are the bodies.
//! Versions: every body is implemented for OpenFlow 1.0 and 1.3 (what `ovs-ofctl` uses by
//! default and with `-O OpenFlow13`); 1.4 and 1.5 port stats/port descriptions use their
//! property layouts; flow stats are 1.0, 1.2–1.4, 1.5 (`ofp_flow_desc` with OXS counters)
//! and NXM. Bodies of other versions stay raw ([`MpReply::Raw`]) — decoded but not
//! interpreted.

use crate::action::{EncodeCtx, decode_actions, encode_actions};
use crate::codec::{Rd, Wr, c_string, put_c_string};
use crate::error::{Result, invalid};
use crate::flow_mod::check_len;
use crate::header::version;
use crate::instruction::{decode_instructions, encode_instructions};
use crate::nxm;
use crate::ofmatch10;
use crate::port::PortDesc;
use flow::ofp::{Action, Match, OfPort};

/// Stats / multipart types.
#[allow(missing_docs)]
pub mod mp_type {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
    pub const VENDOR: u16 = 0xffff;
}

/// Nicira stats subtypes.
#[allow(missing_docs)]
pub mod nxst {
    pub const FLOW: u32 = 0;
    pub const AGGREGATE: u32 = 1;
}

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

/// A stats request body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MpRequest {
    /// Switch description.
    Desc,
    /// Individual flows.
    Flow(FlowStatsRequest),
    /// Flow totals.
    Aggregate(FlowStatsRequest),
    /// Tables.
    Table,
    /// Port counters of one port (1.1+ numbering; `0xffffffff` = all).
    Port(u32),
    /// Port descriptions (1.3+, and OVS's extension in 1.0–1.2; 1.5 carries a port number).
    PortDesc(u32),
    /// Table features (a request body sets features; kept raw).
    TableFeatures(Vec<u8>),
    /// `NXST_FLOW`.
    NxFlow(FlowStatsRequest),
    /// `NXST_AGGREGATE`.
    NxAggregate(FlowStatsRequest),
    /// Anything else: the type and the body after the common part.
    Raw {
        /// Stats type.
        mp_type: u16,
        /// Body.
        body: Vec<u8>,
    },
}

/// Switch description strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Desc {
    /// Manufacturer.
    pub mfr_desc: String,
    /// Hardware.
    pub hw_desc: String,
    /// Software.
    pub sw_desc: String,
    /// Serial number.
    pub serial_num: String,
    /// Datapath.
    pub dp_desc: String,
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

/// One table's statistics.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TableStats {
    /// Table.
    pub table_id: u8,
    /// Name (1.0–1.2).
    pub name: String,
    /// Supported wildcards (1.0–1.2; 1.1/1.2 also write it as the `match` bitmap).
    pub wildcards: u32,
    /// Capacity (1.0–1.2).
    pub max_entries: u32,
    /// Flows in the table.
    pub active_count: u32,
    /// Lookups.
    pub lookup_count: u64,
    /// Hits.
    pub matched_count: u64,
}

/// One port's counters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)]
pub struct PortStats {
    /// Port, 1.1+ numbering.
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    /// Age, seconds (1.3+).
    pub duration_sec: u32,
    /// Age, nanoseconds (1.3+).
    pub duration_nsec: u32,
}

/// One table's features (1.3+), properties kept raw.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TableFeatures {
    /// Table.
    pub table_id: u8,
    /// 1.3/1.4: padding; 1.5: `command` then `features`.
    pub command_features: [u8; 5],
    /// Name.
    pub name: String,
    /// Metadata bits the table can match.
    pub metadata_match: u64,
    /// Metadata bits the table can write.
    pub metadata_write: u64,
    /// `config` (1.3/1.4) or `capabilities` (1.5).
    pub config: u32,
    /// Capacity.
    pub max_entries: u32,
    /// Property TLVs, raw.
    pub properties: Vec<u8>,
}

/// A stats reply body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MpReply {
    /// Switch description.
    Desc(Desc),
    /// Flows.
    Flow(Vec<FlowStats>),
    /// Flow totals.
    Aggregate(AggregateStats),
    /// Tables.
    Table(Vec<TableStats>),
    /// Port counters.
    Port(Vec<PortStats>),
    /// Port descriptions.
    PortDesc(Vec<PortDesc>),
    /// Table features.
    TableFeatures(Vec<TableFeatures>),
    /// `NXST_FLOW`.
    NxFlow(Vec<FlowStats>),
    /// `NXST_AGGREGATE`.
    NxAggregate(AggregateStats),
    /// Anything else.
    Raw {
        /// Stats type.
        mp_type: u16,
        /// Body.
        body: Vec<u8>,
    },
}

fn port_in(ver: u8, r: &mut Rd<'_>) -> Result<u32> {
    if ver == version::OF10 {
        Ok(OfPort(r.u16()?).to_ofp11())
    } else {
        r.u32()
    }
}

fn port_out(ver: u8, w: &mut Wr, p: u32) -> Result<()> {
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
    fn decode(r: &mut Rd<'_>, ver: u8) -> Result<FlowStatsRequest> {
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

    fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
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

    fn decode_nx(r: &mut Rd<'_>) -> Result<FlowStatsRequest> {
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

    fn encode_nx(&self, w: &mut Wr) -> Result<()> {
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

impl MpRequest {
    /// The stats type on the wire (`0xffff` for Nicira's).
    pub fn mp_type(&self) -> u16 {
        match self {
            MpRequest::Desc => mp_type::DESC,
            MpRequest::Flow(_) => mp_type::FLOW,
            MpRequest::Aggregate(_) => mp_type::AGGREGATE,
            MpRequest::Table => mp_type::TABLE,
            MpRequest::Port(_) => mp_type::PORT,
            MpRequest::PortDesc(_) => mp_type::PORT_DESC,
            MpRequest::TableFeatures(_) => mp_type::TABLE_FEATURES,
            MpRequest::NxFlow(_) | MpRequest::NxAggregate(_) => mp_type::VENDOR,
            MpRequest::Raw { mp_type, .. } => *mp_type,
        }
    }

    /// Decodes the body of a request of type `t` (after the common part; for Nicira stats,
    /// `nx_subtype` is the subtype and `body` follows it and its padding).
    pub(crate) fn decode(t: u16, nx_subtype: Option<u32>, body: &[u8], ver: u8) -> Result<Self> {
        let mut r = Rd::new(body, "stats request");
        let q = match (t, nx_subtype) {
            (mp_type::DESC, _) => MpRequest::Desc,
            (mp_type::FLOW, _) => MpRequest::Flow(FlowStatsRequest::decode(&mut r, ver)?),
            (mp_type::AGGREGATE, _) => MpRequest::Aggregate(FlowStatsRequest::decode(&mut r, ver)?),
            (mp_type::TABLE, _) => MpRequest::Table,
            (mp_type::PORT, _) => {
                let p = port_in(ver, &mut r)?;
                r.skip(if ver == version::OF10 { 6 } else { 4 })?;
                MpRequest::Port(p)
            }
            (mp_type::PORT_DESC, _) => {
                if ver >= version::OF15 {
                    let p = r.u32()?;
                    r.skip(4)?;
                    MpRequest::PortDesc(p)
                } else {
                    MpRequest::PortDesc(u32::MAX)
                }
            }
            (mp_type::TABLE_FEATURES, _) if ver >= version::OF13 => {
                MpRequest::TableFeatures(r.rest().to_vec())
            }
            (mp_type::VENDOR, Some(nxst::FLOW)) => {
                MpRequest::NxFlow(FlowStatsRequest::decode_nx(&mut r)?)
            }
            (mp_type::VENDOR, Some(nxst::AGGREGATE)) => {
                MpRequest::NxAggregate(FlowStatsRequest::decode_nx(&mut r)?)
            }
            _ => {
                return Ok(MpRequest::Raw {
                    mp_type: t,
                    body: body.to_vec(),
                });
            }
        };
        if !r.is_empty() {
            return Err(invalid("trailing bytes in stats request"));
        }
        Ok(q)
    }

    pub(crate) fn nx_subtype(&self) -> Option<u32> {
        match self {
            MpRequest::NxFlow(_) => Some(nxst::FLOW),
            MpRequest::NxAggregate(_) => Some(nxst::AGGREGATE),
            _ => None,
        }
    }

    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        match self {
            MpRequest::Desc | MpRequest::Table => Ok(()),
            MpRequest::Flow(q) | MpRequest::Aggregate(q) => q.encode(w, ver),
            MpRequest::Port(p) => {
                port_out(ver, w, *p)?;
                w.zeros(if ver == version::OF10 { 6 } else { 4 });
                Ok(())
            }
            MpRequest::PortDesc(p) => {
                if ver >= version::OF15 {
                    w.u32(*p);
                    w.zeros(4);
                }
                Ok(())
            }
            MpRequest::TableFeatures(b) => {
                w.bytes(b);
                Ok(())
            }
            MpRequest::NxFlow(q) | MpRequest::NxAggregate(q) => q.encode_nx(w),
            MpRequest::Raw { body, .. } => {
                w.bytes(body);
                Ok(())
            }
        }
    }
}

impl AggregateStats {
    fn decode(r: &mut Rd<'_>) -> Result<Self> {
        let a = AggregateStats {
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            flow_count: r.u32()?,
        };
        r.skip(4)?;
        Ok(a)
    }
    fn encode(&self, w: &mut Wr) {
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

    fn decode(r: &mut Rd<'_>, ver: u8) -> Result<FlowStats> {
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

    fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
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
    fn decode15(r: &mut Rd<'_>) -> Result<FlowStats> {
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

    fn encode15(&self, w: &mut Wr) -> Result<()> {
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

    fn decode_nx(r: &mut Rd<'_>, ver: u8) -> Result<FlowStats> {
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

    fn encode_nx(&self, w: &mut Wr, ver: u8) -> Result<()> {
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

impl TableStats {
    fn decode(r: &mut Rd<'_>, ver: u8) -> Result<TableStats> {
        let mut t = TableStats {
            table_id: r.u8()?,
            ..TableStats::default()
        };
        if ver == version::OF10 {
            r.skip(3)?;
            t.name = c_string(r.bytes(32)?, "table name")?;
            t.wildcards = r.u32()?;
            t.max_entries = r.u32()?;
        } else if ver == version::OF11 {
            r.skip(7)?;
            t.name = c_string(r.bytes(32)?, "table name")?;
            t.wildcards = r.u32()?;
            r.skip(20)?;
            t.max_entries = r.u32()?;
        } else if ver == version::OF12 {
            r.skip(7)?;
            t.name = c_string(r.bytes(32)?, "table name")?;
            r.skip(8)?;
            t.wildcards = r.u64()? as u32;
            r.skip(48)?;
            t.max_entries = r.u32()?;
        } else {
            r.skip(3)?;
        }
        t.active_count = r.u32()?;
        t.lookup_count = r.u64()?;
        t.matched_count = r.u64()?;
        Ok(t)
    }
    fn encode(&self, w: &mut Wr, ver: u8) {
        w.u8(self.table_id);
        if ver == version::OF10 {
            w.zeros(3);
            put_c_string(w, &self.name, 32);
            w.u32(self.wildcards);
            w.u32(self.max_entries);
        } else if ver == version::OF11 {
            // match and wildcards bitmaps, then instructions, write/apply actions, config.
            w.zeros(7);
            put_c_string(w, &self.name, 32);
            w.u32(self.wildcards);
            w.u32(self.wildcards);
            w.zeros(16);
            w.u32(self.max_entries);
        } else if ver == version::OF12 {
            w.zeros(7);
            put_c_string(w, &self.name, 32);
            w.u64(u64::from(self.wildcards));
            w.u64(u64::from(self.wildcards));
            w.zeros(48);
            w.u32(self.max_entries);
        } else {
            w.zeros(3);
        }
        w.u32(self.active_count);
        w.u64(self.lookup_count);
        w.u64(self.matched_count);
    }
}

impl PortStats {
    fn counters(&mut self) -> [&mut u64; 12] {
        [
            &mut self.rx_packets,
            &mut self.tx_packets,
            &mut self.rx_bytes,
            &mut self.tx_bytes,
            &mut self.rx_dropped,
            &mut self.tx_dropped,
            &mut self.rx_errors,
            &mut self.tx_errors,
            &mut self.rx_frame_err,
            &mut self.rx_over_err,
            &mut self.rx_crc_err,
            &mut self.collisions,
        ]
    }

    fn decode(r: &mut Rd<'_>, ver: u8) -> Result<PortStats> {
        let mut p = PortStats::default();
        if ver >= version::OF14 {
            let len = usize::from(r.peek_u16(0)?);
            check_len("port stats entry", len, 80, r.remaining())?;
            let mut e = r.sub(len, "port stats entry")?;
            e.skip(4)?;
            p.port_no = e.u32()?;
            p.duration_sec = e.u32()?;
            p.duration_nsec = e.u32()?;
            for c in p.counters().into_iter().take(8) {
                *c = e.u64()?;
            }
            while !e.is_empty() {
                let typ = e.u16()?;
                let plen = usize::from(e.u16()?);
                if plen < 4 {
                    return Err(invalid("port stats property length"));
                }
                let mut pr = e.sub(plen.next_multiple_of(8) - 4, "port stats property")?;
                if typ == 0 {
                    pr.skip(4)?;
                    for c in p.counters().into_iter().skip(8) {
                        *c = pr.u64()?;
                    }
                }
            }
            return Ok(p);
        }
        p.port_no = port_in(ver, r)?;
        r.skip(if ver == version::OF10 { 6 } else { 4 })?;
        for c in p.counters() {
            *c = r.u64()?;
        }
        if ver >= version::OF13 {
            p.duration_sec = r.u32()?;
            p.duration_nsec = r.u32()?;
        }
        Ok(p)
    }

    fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        let mut c = self.clone();
        let vals: Vec<u64> = c.counters().into_iter().map(|v| *v).collect();
        if ver >= version::OF14 {
            w.u16(120);
            w.zeros(2);
            w.u32(self.port_no);
            w.u32(self.duration_sec);
            w.u32(self.duration_nsec);
            for v in &vals[..8] {
                w.u64(*v);
            }
            w.u16(0);
            w.u16(40);
            w.zeros(4);
            for v in &vals[8..] {
                w.u64(*v);
            }
            return Ok(());
        }
        port_out(ver, w, self.port_no)?;
        w.zeros(if ver == version::OF10 { 6 } else { 4 });
        for v in vals {
            w.u64(v);
        }
        if ver >= version::OF13 {
            w.u32(self.duration_sec);
            w.u32(self.duration_nsec);
        }
        Ok(())
    }
}

impl TableFeatures {
    fn decode(r: &mut Rd<'_>) -> Result<TableFeatures> {
        let len = usize::from(r.peek_u16(0)?);
        check_len("table features entry", len, 64, r.remaining())?;
        let mut e = r.sub(len, "table features entry")?;
        e.skip(2)?;
        Ok(TableFeatures {
            table_id: e.u8()?,
            command_features: e.array()?,
            name: c_string(e.bytes(32)?, "table name")?,
            metadata_match: e.u64()?,
            metadata_write: e.u64()?,
            config: e.u32()?,
            max_entries: e.u32()?,
            properties: e.rest().to_vec(),
        })
    }
    fn encode(&self, w: &mut Wr) -> Result<()> {
        let start = w.len();
        w.u16(0);
        w.u8(self.table_id);
        w.bytes(&self.command_features);
        put_c_string(w, &self.name, 32);
        w.u64(self.metadata_match);
        w.u64(self.metadata_write);
        w.u32(self.config);
        w.u32(self.max_entries);
        w.bytes(&self.properties);
        w.pad8_from(start);
        w.patch_len(start, start, "table features entry")
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
        r.skip(2)?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(crate::error::Error::BadLength {
                what: "ofp_stats",
                len,
            });
        }
        let mut b = r.sub(len - 4, "ofp_stats")?;
        r.skip((len.next_multiple_of(8) - len).min(r.remaining()))?;
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

fn desc_field(r: &mut Rd<'_>, n: usize) -> Result<String> {
    c_string(r.bytes(n)?, "description")
}

impl MpReply {
    /// The stats type on the wire.
    pub fn mp_type(&self) -> u16 {
        match self {
            MpReply::Desc(_) => mp_type::DESC,
            MpReply::Flow(_) => mp_type::FLOW,
            MpReply::Aggregate(_) => mp_type::AGGREGATE,
            MpReply::Table(_) => mp_type::TABLE,
            MpReply::Port(_) => mp_type::PORT,
            MpReply::PortDesc(_) => mp_type::PORT_DESC,
            MpReply::TableFeatures(_) => mp_type::TABLE_FEATURES,
            MpReply::NxFlow(_) | MpReply::NxAggregate(_) => mp_type::VENDOR,
            MpReply::Raw { mp_type, .. } => *mp_type,
        }
    }

    pub(crate) fn nx_subtype(&self) -> Option<u32> {
        match self {
            MpReply::NxFlow(_) => Some(nxst::FLOW),
            MpReply::NxAggregate(_) => Some(nxst::AGGREGATE),
            _ => None,
        }
    }

    pub(crate) fn decode(t: u16, nx_subtype: Option<u32>, body: &[u8], ver: u8) -> Result<Self> {
        let mut r = Rd::new(body, "stats reply");
        let flow_ok = ver <= version::OF14;
        let rep = match (t, nx_subtype) {
            (mp_type::DESC, _) => MpReply::Desc(Desc {
                mfr_desc: desc_field(&mut r, 256)?,
                hw_desc: desc_field(&mut r, 256)?,
                sw_desc: desc_field(&mut r, 256)?,
                serial_num: desc_field(&mut r, 32)?,
                dp_desc: desc_field(&mut r, 256)?,
            }),
            (mp_type::FLOW, _) if flow_ok => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(FlowStats::decode(&mut r, ver)?);
                }
                MpReply::Flow(v)
            }
            (mp_type::FLOW, _) if ver >= version::OF15 => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(FlowStats::decode15(&mut r)?);
                }
                MpReply::Flow(v)
            }
            (mp_type::AGGREGATE, _) if ver >= version::OF15 => {
                let o = Oxs::decode(&mut r)?;
                MpReply::Aggregate(AggregateStats {
                    packet_count: o.packets.unwrap_or(0),
                    byte_count: o.bytes.unwrap_or(0),
                    flow_count: o.flow_count.unwrap_or(0),
                })
            }
            (mp_type::AGGREGATE, _) => MpReply::Aggregate(AggregateStats::decode(&mut r)?),
            (mp_type::TABLE, _) => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(TableStats::decode(&mut r, ver)?);
                }
                MpReply::Table(v)
            }
            (mp_type::PORT, _) => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(PortStats::decode(&mut r, ver)?);
                }
                MpReply::Port(v)
            }
            (mp_type::PORT_DESC, _) => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(PortDesc::decode(&mut r, ver)?);
                }
                MpReply::PortDesc(v)
            }
            (mp_type::TABLE_FEATURES, _) if ver >= version::OF13 => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(TableFeatures::decode(&mut r)?);
                }
                MpReply::TableFeatures(v)
            }
            (mp_type::VENDOR, Some(nxst::FLOW)) => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(FlowStats::decode_nx(&mut r, ver)?);
                }
                MpReply::NxFlow(v)
            }
            (mp_type::VENDOR, Some(nxst::AGGREGATE)) => {
                MpReply::NxAggregate(AggregateStats::decode(&mut r)?)
            }
            _ => {
                return Ok(MpReply::Raw {
                    mp_type: t,
                    body: body.to_vec(),
                });
            }
        };
        if !r.is_empty() {
            return Err(invalid("trailing bytes in stats reply"));
        }
        Ok(rep)
    }

    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        match self {
            MpReply::Desc(d) => {
                put_c_string(w, &d.mfr_desc, 256);
                put_c_string(w, &d.hw_desc, 256);
                put_c_string(w, &d.sw_desc, 256);
                put_c_string(w, &d.serial_num, 32);
                put_c_string(w, &d.dp_desc, 256);
            }
            MpReply::Flow(v) => {
                for f in v {
                    if ver >= version::OF15 {
                        f.encode15(w)?;
                    } else {
                        f.encode(w, ver)?;
                    }
                }
            }
            MpReply::Aggregate(a) if ver >= version::OF15 => Oxs {
                packets: Some(a.packet_count),
                bytes: Some(a.byte_count),
                flow_count: Some(a.flow_count),
                ..Oxs::default()
            }
            .encode(w)?,
            MpReply::Aggregate(a) | MpReply::NxAggregate(a) => a.encode(w),
            MpReply::Table(v) => {
                for t in v {
                    t.encode(w, ver);
                }
            }
            MpReply::Port(v) => {
                for p in v {
                    p.encode(w, ver)?;
                }
            }
            MpReply::PortDesc(v) => {
                for p in v {
                    p.encode(w, ver)?;
                }
            }
            MpReply::TableFeatures(v) => {
                for t in v {
                    t.encode(w)?;
                }
            }
            MpReply::NxFlow(v) => {
                for f in v {
                    f.encode_nx(w, ver)?;
                }
            }
            MpReply::Raw { body, .. } => w.bytes(body),
        }
        Ok(())
    }
}
