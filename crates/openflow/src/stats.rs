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

use crate::codec::{Rd, Wr, c_string, put_c_string};
use crate::error::{Result, invalid};
use crate::flow_mod::check_len;
pub use crate::flow_stats::{AggregateStats, FlowStats, FlowStatsRequest};
use crate::flow_stats::{Oxs, port_in, port_out};
use crate::header::version;
use crate::port::PortDesc;

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
