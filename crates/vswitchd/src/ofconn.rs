//! One OpenFlow connection, sans-I/O: bytes in ([`OfConn::feed`]), bytes out.
//!
//! [`OfConn`] holds what OVS keeps per connection (`ofconn.c`): the negotiated version (HELLO
//! with version bitmaps, OpenFlow 1.0–1.5), the Nicira flow format (`NXT_SET_FLOW_FORMAT`),
//! `NXT_FLOW_MOD_TABLE_ID`, the packet-in format, the controller role and generation id, the
//! asynchronous-message configuration, `miss_send_len`, the controller id and the open
//! bundles. It answers from, and applies flow mods to, a bridge seen through the small
//! [`OfBridge`] trait; [`StaticBridge`] is a plain implementation of it.
//!
//! Flow mods that arrive back to back are applied as one batch — one bridge write (what
//! `SharedBridge::flow_mods` does, with OVS's cookie rules) — with their order and their
//! per-message error replies kept. [`OfConn::feed`] applies what it was given before
//! returning; [`OfConn::feed_deferred`] keeps trailing flow mods pending so that a server
//! can gather them across reads and [`OfConn::flush`] when the peer pauses. Anything that
//! is not a flow mod (a barrier, a stats request, …) first applies the batch, so every reply
//! still comes after the effects of the messages before it.
//!
//! What the `ofproto` bridge does not model and OVS shows is kept here: the per-rule
//! flow-mod flags ([`FlowFlags`]), OpenFlow 1.1+ modify semantics (no add, cookies kept), an
//! add with the "no cookie" cookie, the refusal of hidden fields (`recirc_id`, `dp_hash`) and
//! of tables past the last one shown, and the `set_field` encodings OVS uses in 1.0–1.4
//! flow stats (`mod_dl_src`, `load`).
//!
//! Errors: a message that frames but does not decode, or is refused, gets an `OFPT_ERROR`
//! of the right type and code with the request's xid and its first 64 bytes, and the
//! connection carries on. A framing error (a length below 8 or above the limit) makes the
//! stream unreadable: the connection answers with an error and closes
//! ([`OfConn::closed`]). No input panics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use flow::ofp::OfPort;
use ofproto::bridge::FlowModResult;
use ofproto::table::loose_match;
use ofproto::{FlowModCommand, FlowModError};
use openflow::flow_mod::{Command, FlowMod as WireFlowMod};
use openflow::header::{Header, version};
use openflow::msg::{
    AsyncConfig, BundleControl, ErrorMsg, Features, Role, SwitchConfig, hello, negotiate,
};
use openflow::packet::{Continuation, PacketOut};
use openflow::port::PortDesc;
use openflow::stats::{
    AggregateStats, FlowStats, FlowStatsRequest, MpReply, MpRequest, PortStats, TableFeatures,
    TableStats,
};
use openflow::{Body, Error as CodecError, Framer, Msg};
use upcall::handler::SharedBridge;

/// The versions this switch speaks: OpenFlow 1.0 to 1.5.
pub const VERSIONS: [u8; 6] = [1, 2, 3, 4, 5, 6];

/// Most bundles one connection may hold open at once.
pub const MAX_BUNDLES: usize = 64;

/// Most messages one bundle may hold.
pub const MAX_BUNDLE_MSGS: usize = 1 << 20;

/// Most request bytes quoted in an error reply (so that it fits in one message).
const MAX_ERROR_DATA: usize = u16::MAX as usize - 16;

/// Replies above this many bytes are split into several multipart messages.
const MP_CHUNK: usize = 60_000;

/// An OpenFlow error, by its OVS `ofperr` name; [`OfpErr::wire`] gives its (type, code) in a
/// version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum OfpErr {
    HelloIncompatible,
    BadVersion,
    BadType,
    BadStat,
    BadVendor,
    BadSubtype,
    Eperm,
    BadLen,
    BufferUnknown,
    BadTableIdRequest,
    IsSlave,
    BadPort,
    BadActionType,
    BadActionArgument,
    BadOutPort,
    /// `OFPBAC_BAD_OUT_GROUP` (`group:N` names no group).
    BadOutGroup,
    /// `OFPGMFC_*` with its code (`crate::ofgroup`).
    GroupMod(u16),
    /// `OFPBPC_BAD_VALUE` (a group property OVS refuses).
    BadPropValue,
    BadInstruction,
    BadInstTableId,
    BadMatchLen,
    BadMatchField,
    BadMatchPrereq,
    FlowModUnknown,
    FlowModBadTableId,
    FlowModOverlap,
    FlowModBadCommand,
    RoleStale,
    RoleBadRole,
    /// `OFPBFC_*` with its code (0 unknown, 2 bad id, 3 exists, 4 closed, 6 bad type,
    /// 7 bad flags, 12 too many, 13 message failed, 15 in progress).
    Bundle(u16),
    /// `NXBAC_BAD_CONJUNCTION`, a Nicira vendor error: `NX1.0-1.1(2,526)` (inside an
    /// `NXET_VENDOR` error) and `NX1.2+(15)` (an experimenter error), as OVS encodes it.
    NxBadConjunction,
    /// A packet-out whose translation failed (a resubmit loop, too many actions): OVS
    /// answers `OFPFMFC_UNKNOWN` (1.1+ `(5, 0)`), which OpenFlow 1.0 cannot carry, so 1.0
    /// gets `NXBRC_UNENCODABLE_ERROR`, Nicira's (1, 521) inside an `NXET_VENDOR` error, as
    /// OVS sends it.
    XlateFailed,
    /// `OFPBAC_MATCH_INCONSISTENT` (1.1+ `(2, 10)`; OpenFlow 1.0: Nicira's (1, 522) inside
    /// an `NXET_VENDOR` error, as OVS sends it).
    MatchInconsistent,
}

/// OVS's `NXET_VENDOR` error type (OpenFlow 1.0 and 1.1): the vendor error follows in the
/// data as `nx_vendor_error` (vendor, type, code), then the request.
const NXET_VENDOR: u16 = 0xb0c2;

impl OfpErr {
    /// (type, code, experimenter id for an experimenter error) in wire version `ver`.
    pub fn wire(self, ver: u8) -> (u16, u16, Option<u32>) {
        let v10 = ver == version::OF10;
        let v11 = ver <= version::OF11;
        let fm = if v10 { 3 } else { 5 };
        let (t, c) = match self {
            OfpErr::HelloIncompatible => (0, 0),
            OfpErr::BadVersion => (1, 0),
            OfpErr::BadType => (1, 1),
            OfpErr::BadStat => (1, 2),
            OfpErr::BadVendor => (1, 3),
            OfpErr::BadSubtype => (1, 4),
            OfpErr::Eperm => (1, 5),
            OfpErr::BadLen => (1, 6),
            OfpErr::BufferUnknown => (1, 8),
            OfpErr::BadTableIdRequest => (1, if v10 { 5 } else { 9 }),
            OfpErr::IsSlave => (1, if v11 { 5 } else { 10 }),
            // OpenFlow 1.0 and 1.1 have no code for it: OVS sends Nicira's (1, 514) inside an
            // `NXET_VENDOR` error (see [`OfpErr::reply`]).
            OfpErr::BadPort if v11 => (NXET_VENDOR, 0),
            OfpErr::BadPort => (1, 11),
            OfpErr::XlateFailed if v10 => (NXET_VENDOR, 0),
            OfpErr::XlateFailed => (5, 0),
            OfpErr::MatchInconsistent if v10 => (NXET_VENDOR, 0),
            OfpErr::MatchInconsistent => (2, 10),
            OfpErr::BadActionType => (2, 0),
            OfpErr::BadOutPort => (2, 4),
            // OpenFlow 1.1+'s code; OVS sends OpenFlow 1.0 the same numbers inside a Nicira
            // vendor error, which this encoder does not build: 1.0 gets the bare (2, 9).
            OfpErr::BadOutGroup => (2, 9),
            OfpErr::BadActionArgument => (2, 5),
            OfpErr::BadInstruction => (3, 0),
            OfpErr::BadInstTableId => (3, 2),
            OfpErr::BadMatchLen if v10 => (1, 6),
            OfpErr::BadMatchLen => (4, 1),
            OfpErr::BadMatchField => (4, 6),
            OfpErr::BadMatchPrereq => (4, 9),
            OfpErr::FlowModUnknown => (fm, if v10 { 2 } else { 0 }),
            // OpenFlow 1.0 has no code for a bad table: OVS's own (NXFMFC_BAD_TABLE_ID).
            OfpErr::FlowModBadTableId if v10 => (3, 0x101),
            OfpErr::FlowModBadTableId => (5, 2),
            OfpErr::FlowModOverlap => (fm, if v10 { 1 } else { 3 }),
            OfpErr::FlowModBadCommand => (fm, if v10 { 4 } else { 6 }),
            OfpErr::RoleStale => (11, 0),
            OfpErr::RoleBadRole => (11, 2),
            OfpErr::Bundle(code) if ver == version::OF13 => {
                return (0xffff, 2300 + code, Some(openflow::msg::ONF_VENDOR_ID));
            }
            OfpErr::Bundle(code) => (17, code),
            OfpErr::GroupMod(code) => (6, code),
            OfpErr::BadPropValue => (14, 2),
            OfpErr::NxBadConjunction if ver >= version::OF12 => {
                return (0xffff, 15, Some(openflow::msg::NX_VENDOR_ID));
            }
            // NXVC_VENDOR_ERROR; [`OfpErr::reply`] puts the vendor error in the data.
            OfpErr::NxBadConjunction => (NXET_VENDOR, 0),
        };
        (t, c, None)
    }

    /// The error a codec failure maps to.
    pub fn of_codec(e: &CodecError) -> OfpErr {
        match e {
            // A message that ends inside something: OVS's OFPBRC_BAD_LEN; a bad length field
            // inside a match: OFPBMC_BAD_LEN.
            CodecError::Truncated { .. } => OfpErr::BadLen,
            CodecError::BadLength { what, .. } => {
                let w = what.to_ascii_lowercase();
                if w.contains("match") || w.contains("oxm") || w.contains("nxm") {
                    OfpErr::BadMatchLen
                } else {
                    OfpErr::BadLen
                }
            }
            CodecError::Unsupported(s) | CodecError::Invalid(s) => {
                let unsup = matches!(e, CodecError::Unsupported(_));
                if s.contains("trailing bytes") || s.contains("length") {
                    OfpErr::BadLen
                } else if s.starts_with("OpenFlow wire version") {
                    OfpErr::BadVersion
                } else if s.starts_with("NXBAC_BAD_CONJUNCTION") {
                    OfpErr::NxBadConjunction
                } else if s.contains("action") {
                    if unsup {
                        OfpErr::BadActionType
                    } else {
                        OfpErr::BadActionArgument
                    }
                } else if s.contains("instruction") {
                    OfpErr::BadInstruction
                } else if s.contains("prereq") {
                    OfpErr::BadMatchPrereq
                } else if s.contains("field") || s.contains("match") || s.contains("NXM") {
                    OfpErr::BadMatchField
                } else if s.contains("flow mod command") {
                    OfpErr::FlowModBadCommand
                } else {
                    OfpErr::Eperm
                }
            }
        }
    }

    /// The error a refused flow mod maps to.
    pub fn of_flow_mod(e: &FlowModError) -> OfpErr {
        match e {
            FlowModError::BadTable(_) => OfpErr::FlowModBadTableId,
            FlowModError::BadGoto { .. } => OfpErr::BadInstTableId,
            FlowModError::BadOutPort(_) => OfpErr::BadOutPort,
            FlowModError::Overlap => OfpErr::FlowModOverlap,
            FlowModError::Parse(_) => OfpErr::FlowModUnknown,
            FlowModError::BadConjunction(_) => OfpErr::NxBadConjunction,
            FlowModError::BadOutGroup(_) => OfpErr::BadOutGroup,
        }
    }

    /// An error reply to `request` with `request`'s xid, in `ver`. The data is the whole
    /// request (up to what fits in one message), as OVS sends it; OpenFlow asks for at least
    /// its first 64 bytes.
    pub fn reply(self, request: &[u8], ver: u8) -> Msg {
        let xid = Header::parse(request).map_or(0, |h| h.xid);
        let (typ, code, exp) = self.wire(ver);
        let mut data = Vec::with_capacity(76);
        if let Some(e) = exp {
            data.extend_from_slice(&e.to_be_bytes());
        }
        if typ == NXET_VENDOR {
            // `nx_vendor_error`: vendor, type, code (NXBAC_BAD_CONJUNCTION, and
            // OFPBRC_BAD_PORT as OVS encodes it before OpenFlow 1.2).
            let (t, c): (u16, u16) = match self {
                OfpErr::BadPort => (1, 514),
                OfpErr::XlateFailed => (1, 521),
                OfpErr::MatchInconsistent => (1, 522),
                _ => (2, 526),
            };
            data.extend_from_slice(&openflow::msg::NX_VENDOR_ID.to_be_bytes());
            data.extend_from_slice(&t.to_be_bytes());
            data.extend_from_slice(&c.to_be_bytes());
        }
        data.extend_from_slice(&request[..request.len().min(MAX_ERROR_DATA)]);
        Msg::new(ver, xid, Body::Error(ErrorMsg { typ, code, data }))
    }
}

/// The flow-mod flags OVS keeps with each rule and shows in flow stats (`send_flow_rem`,
/// `check_overlap`, `reset_counts`, `no_packet_counts`, `no_byte_counts`; OpenFlow 1.3 bit
/// numbers), which the
/// `ofproto` rule does not hold: kept beside the tables, keyed by a 64-bit hash of (table,
/// priority, match), only for rules whose flags are not 0. Shared by all connections of a
/// bridge (it lives in the [`OfBridge`]).
#[derive(Debug, Default)]
pub struct FlowFlags {
    map: std::sync::Mutex<std::collections::HashMap<u64, u16>>,
}

/// Flag bits kept per rule and shown in flow stats, as OVS 3.1 does: `send_flow_rem`,
/// `check_overlap`, `reset_counts`, `no_packet_counts`, `no_byte_counts`.
const FF_STATE: u16 = 1 | 2 | 4 | 8 | 16;

/// Not a wire flag: carried with a flow mod whose command must leave cookies alone and never
/// add (an OpenFlow 1.1+ modify: OVS decodes its new cookie as "none").
const KEEP_COOKIE: u16 = 0x8000;

impl FlowFlags {
    fn key(table: u8, priority: u16, m: &flow::ofp::Match) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (table, priority, m).hash(&mut h);
        h.finish()
    }

    /// Whether no rule has flags.
    pub fn is_empty(&self) -> bool {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Whether the rule (table, priority, match) asked for a flow-removed message
    /// (`send_flow_rem`).
    pub fn sends_flow_removed(&self, table: u8, priority: u16, m: &flow::ofp::Match) -> bool {
        self.get(table, priority, m) & 1 != 0
    }

    /// The flags of the rule (table, priority, match); 0 if none were recorded.
    pub fn get(&self, table: u8, priority: u16, m: &flow::ofp::Match) -> u16 {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.is_empty() {
            return 0;
        }
        map.get(&Self::key(table, priority, m))
            .copied()
            .unwrap_or(0)
    }

    fn set_all(&self, updates: impl Iterator<Item = (u64, u16)>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        for (k, f) in updates {
            if f == 0 {
                map.remove(&k);
            } else {
                map.insert(k, f);
            }
        }
    }

    /// Forgets the flags of rules that no longer exist once the map is much larger than the
    /// tables.
    fn prune(&self, b: &ofproto::Bridge, n_tables: u8) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() <= 1024 || map.len() <= 2 * b.n_rules() {
            return;
        }
        let mut live = std::collections::HashSet::new();
        for t in 0..n_tables {
            if let Some(table) = b.table(t) {
                for (_, r) in table.iter() {
                    live.insert(Self::key(t, r.priority, &r.match_));
                }
            }
        }
        map.retain(|k, _| live.contains(k));
    }
}

/// What a connection needs from a bridge. Implementations must be cheap to call: every
/// request of every connection goes through them.
pub trait OfBridge: Send + Sync {
    /// The bridge's name (`br0`).
    fn name(&self) -> &str;
    /// The datapath id.
    fn datapath_id(&self) -> u64;
    /// The flow tables.
    fn shared(&self) -> &Arc<SharedBridge>;
    /// Every port, the LOCAL port (named as the bridge) included, in port-number order;
    /// port numbers in OpenFlow 1.1+ numbering (LOCAL = `0xfffffffe`).
    fn ports(&self) -> Vec<PortDesc>;
    /// Counters of every port (same numbering).
    fn port_stats(&self) -> Vec<PortStats>;
    /// The per-rule flow-mod flags of this bridge.
    fn flow_flags(&self) -> &FlowFlags;
    /// Sends a packet-out that came in OpenFlow version `ver`; `Err` is the OpenFlow error
    /// to answer with.
    fn packet_out(&self, po: &PacketOut, ver: u8) -> Result<(), OfpErr>;
    /// Runs a paused packet-in's continuation (`NXT_RESUME`) on the packet it carries.
    fn resume(&self, pin: &openflow::packet::PacketIn) -> Result<(), OfpErr> {
        let _ = pin;
        Err(OfpErr::Eperm)
    }
    /// The bridge's identity in continuations (a resume on another bridge is refused).
    fn uuid(&self) -> [u8; 16] {
        [0; 16]
    }
    /// Number of flow tables shown to controllers (OVS: 254, tables 0–253).
    fn n_tables(&self) -> u8 {
        254
    }
    /// Bridge-wide fragment handling (`OFPC_FRAG_*`: 0 normal, 1 drop, 2 reassemble,
    /// 3 nx-match).
    fn frag_mode(&self) -> u16 {
        0
    }
    /// Sets the fragment handling; false if the mode is not supported (then it is kept).
    fn set_frag_mode(&self, _mode: u16) -> bool {
        false
    }
}

/// A port's counters as other threads read them: the owner (a datapath thread) stores its
/// running totals after each burst (one relaxed store per counter per burst, nothing per
/// packet); port stats, metrics and the database's `statistics` load them.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Packets received.
    pub rx_packets: AtomicU64,
    /// Bytes received.
    pub rx_bytes: AtomicU64,
    /// Frames dropped on receive.
    pub rx_dropped: AtomicU64,
    /// Packets sent.
    pub tx_packets: AtomicU64,
    /// Bytes sent.
    pub tx_bytes: AtomicU64,
    /// Packets not sent.
    pub tx_dropped: AtomicU64,
}

/// A bridge as its OpenFlow connections see it: a port list (replaced with
/// [`StaticBridge::set_ports`]), a datapath id ([`StaticBridge::set_datapath_id`]), per-port
/// counters when a datapath publishes them ([`StaticBridge::set_counters`]; zero
/// otherwise), packet-out through the datapath's execute queue once one is given
/// ([`StaticBridge::set_execute_queue`]; `OFPBRC_EPERM` before). The daemon's bridges and
/// the tests use it.
#[derive(Debug)]
pub struct StaticBridge {
    name: String,
    datapath_id: AtomicU64,
    shared: Arc<SharedBridge>,
    ports: RwLock<Vec<PortDesc>>,
    frags: AtomicU16,
    created: Instant,
    flags: FlowFlags,
    counters: RwLock<BTreeMap<String, Arc<PortCounters>>>,
    /// Where packet-outs are executed: the bridge's datapath thread's queue.
    exec: RwLock<Option<Arc<datapath::ExecuteQueue>>>,
    /// Identity in continuations: random per bridge and run.
    uuid: [u8; 16],
}

/// Longest a packet-out waits for its datapath thread to have sent it (the next message of
/// the connection, a barrier, then finds it out, as OVS executes a packet-out at once).
const PACKET_OUT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// An Ethernet header's length: a packet-out's frame shorter than this is not sent.
const ETH_HEADER_LEN: usize = 14;

/// `OFPPC_PORT_DOWN`.
pub const OFPPC_PORT_DOWN: u32 = 1;
/// `OFPPS_LINK_DOWN`.
pub const OFPPS_LINK_DOWN: u32 = 1;
/// `OFPPS_LIVE` (1.1+).
pub const OFPPS_LIVE: u32 = 4;

impl StaticBridge {
    /// Runs a translated packet-out (or resume) on the datapath thread and waits for it.
    fn execute(&self, frame: &[u8], plan: upcall::handler::PacketOutPlan) -> Result<(), OfpErr> {
        let q = self
            .exec
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(OfpErr::Eperm)?;
        if frame.len() < ETH_HEADER_LEN {
            // Translated (its side effects done) but not sent, and no error: what OVS does
            // (its datapath refuses to execute a runt; the refusal is only logged).
            return Ok(());
        }
        let ticket = q
            .push(datapath::Execute {
                frame: frame.to_vec(),
                in_port: plan.dp_in_port,
                actions: plan.actions,
                keep: Some(Box::new(plan.recirc_refs)),
            })
            .map_err(|e| match e {
                datapath::ExecError::Full => OfpErr::Eperm,
                datapath::ExecError::TooLong(_) => OfpErr::BadLen,
            })?;
        q.wait(ticket, PACKET_OUT_WAIT);
        Ok(())
    }

    /// A bridge over `shared` whose ports are those of the `ofproto` bridge inside it, all up
    /// (as OVS's dummy ports), MAC addresses made from the datapath id and the port number.
    pub fn new(name: &str, datapath_id: u64, shared: Arc<SharedBridge>) -> StaticBridge {
        let ports = shared
            .read()
            .ports()
            .map(|p| PortDesc {
                port_no: p.ofport.to_ofp11(),
                hw_addr: 0x0200_0000_0000 | (datapath_id & 0xff_ffff) << 16 | u64::from(p.ofport.0),
                name: p.name.clone(),
                config: 0,
                state: OFPPS_LIVE,
                ..PortDesc::default()
            })
            .collect();
        StaticBridge {
            name: name.to_string(),
            datapath_id: AtomicU64::new(datapath_id),
            shared,
            ports: RwLock::new(ports),
            frags: AtomicU16::new(0),
            created: Instant::now(),
            flags: FlowFlags::default(),
            counters: RwLock::new(BTreeMap::new()),
            exec: RwLock::new(None),
            uuid: random_uuid(name),
        }
    }

    /// Sets (or clears) the queue packet-outs are executed through (the bridge's datapath's,
    /// [`crate::dp::Datapath::execute_queue`]).
    pub fn set_execute_queue(&self, q: Option<Arc<datapath::ExecuteQueue>>) {
        *self.exec.write().unwrap_or_else(|e| e.into_inner()) = q;
    }

    /// Replaces the port list.
    pub fn set_ports(&self, ports: Vec<PortDesc>) {
        *self.ports.write().unwrap_or_else(|e| e.into_inner()) = ports;
    }

    /// Sets the datapath id.
    pub fn set_datapath_id(&self, id: u64) {
        self.datapath_id.store(id, Ordering::Relaxed);
    }

    /// Takes a datapath's per-port counters, by port name.
    pub fn set_counters(&self, counters: BTreeMap<String, Arc<PortCounters>>) {
        *self.counters.write().unwrap_or_else(|e| e.into_inner()) = counters;
    }
}

impl OfBridge for StaticBridge {
    fn name(&self) -> &str {
        &self.name
    }
    fn datapath_id(&self) -> u64 {
        self.datapath_id.load(Ordering::Relaxed)
    }
    fn shared(&self) -> &Arc<SharedBridge> {
        &self.shared
    }
    fn ports(&self) -> Vec<PortDesc> {
        let mut v = self.ports.read().unwrap_or_else(|e| e.into_inner()).clone();
        v.sort_by_key(|p| p.port_no);
        v
    }
    /// Packet, byte and drop counters from the published [`PortCounters`] (zero, and
    /// drops unknown, for a port without); the error, frame, overrun, CRC and collision
    /// counters unknown (all ones), as OVS's dummy and internal ports report them. LOCAL
    /// first, as `ovs-vswitchd` lists it.
    fn port_stats(&self) -> Vec<PortStats> {
        let age = self.created.elapsed();
        let mut ports = self.ports();
        ports.sort_by_key(|p| p.port_no != OfPort::LOCAL.to_ofp11());
        let counters = self.counters.read().unwrap_or_else(|e| e.into_inner());
        ports
            .iter()
            .map(|p| {
                let c = counters.get(&p.name);
                let get = |f: fn(&PortCounters) -> &AtomicU64, none: u64| {
                    c.map_or(none, |c| f(c).load(Ordering::Relaxed))
                };
                PortStats {
                    port_no: p.port_no,
                    rx_packets: get(|c| &c.rx_packets, 0),
                    rx_bytes: get(|c| &c.rx_bytes, 0),
                    tx_packets: get(|c| &c.tx_packets, 0),
                    tx_bytes: get(|c| &c.tx_bytes, 0),
                    rx_dropped: get(|c| &c.rx_dropped, u64::MAX),
                    tx_dropped: get(|c| &c.tx_dropped, u64::MAX),
                    rx_errors: u64::MAX,
                    tx_errors: u64::MAX,
                    rx_frame_err: u64::MAX,
                    rx_over_err: u64::MAX,
                    rx_crc_err: u64::MAX,
                    collisions: u64::MAX,
                    duration_sec: u32::try_from(age.as_secs()).unwrap_or(u32::MAX),
                    duration_nsec: age.subsec_nanos(),
                }
            })
            .collect()
    }
    fn flow_flags(&self) -> &FlowFlags {
        &self.flags
    }
    /// OVS's packet-out (see docs/design/vswitchd.md, "Packet-out"): the in_port checked
    /// (a port number, `LOCAL`, `CONTROLLER` or `NONE`), no buffers (`OFPBRC_BUFFER_UNKNOWN`),
    /// the frame translated through its actions ([`SharedBridge::packet_out`]) and executed
    /// on the datapath thread, waited for.
    fn uuid(&self) -> [u8; 16] {
        self.uuid
    }
    fn resume(&self, pin: &openflow::packet::PacketIn) -> Result<(), OfpErr> {
        let Some(c) = &pin.continuation else {
            return Err(OfpErr::BadType);
        };
        if c.bridge != self.uuid {
            // Paused on another bridge, or by an earlier run of this one.
            return Err(OfpErr::Eperm);
        }
        if pin.data.len() > netdev::MAX_FRAME {
            return Err(OfpErr::BadLen);
        }
        let plan = self
            .shared
            .resume(&pin.data, &pin.match_, &c.actions)
            .map_err(|e| match e {
                upcall::handler::PacketOutError::Xlate(_) => OfpErr::XlateFailed,
                upcall::handler::PacketOutError::Refused(_) => OfpErr::Eperm,
            })?;
        self.execute(&pin.data, plan)
    }
    fn packet_out(&self, po: &PacketOut, ver: u8) -> Result<(), OfpErr> {
        // A 1.1+ number with no 16-bit equivalent: OVS's port conversion error.
        let in_port = OfPort::from_ofp11(po.in_port).ok_or(OfpErr::BadOutPort)?;
        if in_port.0 >= OfPort::MAX.0
            && ![OfPort::LOCAL, OfPort::CONTROLLER, OfPort::ANY].contains(&in_port)
        {
            return Err(OfpErr::BadPort);
        }
        if po.buffer_id != u32::MAX {
            return Err(OfpErr::BufferUnknown);
        }
        check_packet_out_actions(po, in_port, ver)?;
        // A frame no packet buffer holds cannot go out.
        if po.data.len() > netdev::MAX_FRAME {
            return Err(OfpErr::BadLen);
        }
        if self
            .exec
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
        {
            return Err(OfpErr::Eperm);
        }
        let plan = self
            .shared
            .packet_out(&po.data, in_port, &po.actions)
            .map_err(|e| match e {
                upcall::handler::PacketOutError::Xlate(_) => OfpErr::XlateFailed,
                upcall::handler::PacketOutError::Refused(_) => OfpErr::Eperm,
            })?;
        self.execute(&po.data, plan)
    }
    fn frag_mode(&self) -> u16 {
        self.frags.load(Ordering::Relaxed)
    }
    fn set_frag_mode(&self, mode: u16) -> bool {
        // Normal, drop and nx-match are what OVS's datapaths do; reassembly is not.
        if matches!(mode, 0 | 1 | 3) {
            self.frags.store(mode, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// 16 bytes that differ from bridge to bridge and run to run (std's per-process random hash
/// keys, seeded from the OS; not a cryptographic identity, only a check that a continuation
/// comes back to the bridge that paused it).
fn random_uuid(name: &str) -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for (i, half) in out.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(name.as_bytes());
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// OVS's check of a packet-out's actions against the packet's flow (as for a flow mod's
/// against its match): a field set, `ct` or other action whose prerequisites the packet
/// lacks is refused, as are actions usable only in OpenFlow 1.0 sent in a later version.
fn check_packet_out_actions(po: &PacketOut, in_port: OfPort, ver: u8) -> Result<(), OfpErr> {
    use flow::ofp::fields::Protocols;
    let mut key = flow::FlowKey::ZERO;
    flow::extract::extract(
        &po.data,
        &flow::extract::PacketMeta::port(u32::from(in_port.0)),
        &mut key,
    );
    flow::field::FieldId::InPort.set(&mut key, u128::from(in_port.0));
    let usable =
        flow::text::parse::check_actions_for_flow(&po.actions, &key).map_err(|e| match e {
            "OFPBAC_MATCH_INCONSISTENT" => OfpErr::MatchInconsistent,
            "OFPBAC_BAD_OUT_PORT" => OfpErr::BadOutPort,
            "OFPBIC_BAD_TABLE_ID" => OfpErr::BadInstTableId,
            _ => OfpErr::BadActionArgument,
        })?;
    let proto = match ver {
        version::OF10 => Protocols::OF10_ANY,
        version::OF11 => Protocols::OF11_STD,
        version::OF12 => Protocols::OF12_OXM,
        version::OF13 => Protocols::OF13_OXM,
        version::OF14 => Protocols::OF14_OXM,
        _ => Protocols::OF15_OXM,
    };
    if usable.intersects(proto) {
        Ok(())
    } else {
        Err(OfpErr::MatchInconsistent)
    }
}

/// `OFPCR_ROLE_*` (1.2+ numbering).
mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// One open bundle.
#[derive(Debug)]
struct Bundle {
    flags: u16,
    /// (raw request for error replies, flow mod).
    msgs: Vec<(Vec<u8>, ofproto::FlowMod, u16)>,
    closed: bool,
}

/// A flow mod waiting in the current batch.
#[derive(Debug)]
struct Pending {
    /// The request (for an error reply).
    head: Vec<u8>,
    /// The request's version.
    ver: u8,
    /// The flow mod, or the error already decided for it.
    fm: Result<(ofproto::FlowMod, u16), OfpErr>,
}

/// One OpenFlow connection (see the module doc).
pub struct OfConn {
    bridge: Arc<dyn OfBridge>,
    framer: Framer,
    version: Option<u8>,
    closed: Option<String>,
    flow_format: u32,
    table_id_ext: bool,
    packet_in_format: u32,
    role: u32,
    generation_id: Option<u64>,
    async_config: Option<AsyncConfig>,
    miss_send_len: u16,
    controller_id: u16,
    /// A service connection (the management socket): no asynchronous messages until the
    /// peer sets a nonzero `miss_send_len` (OVS `OFCONN_SERVICE`). Connections to the
    /// bridge's `Controller` targets are primary (`OFCONN_PRIMARY`).
    service: bool,
    /// Counted in the bridge's "packet-in on miss" wanters
    /// (`SharedBridge::want_packet_in_on_miss`): controller id 0 and OpenFlow 1.0–1.2 or
    /// not negotiated yet.
    miss_want: bool,
    bundles: BTreeMap<u32, Bundle>,
    pending: Vec<Pending>,
    out: Vec<u8>,
}

impl std::fmt::Debug for OfConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfConn")
            .field("bridge", &self.bridge.name())
            .field("version", &self.version)
            .field("closed", &self.closed)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl Drop for OfConn {
    fn drop(&mut self) {
        if self.miss_want {
            self.bridge.shared().want_packet_in_on_miss(false);
        }
    }
}

/// Why a message is answered with an error: the error, in the message's version.
type Refusal = OfpErr;

impl OfConn {
    /// A new connection to `bridge` (a management connection: `miss_send_len` 0, role
    /// equal). Send [`OfConn::hello`] first.
    pub fn new(bridge: Arc<dyn OfBridge>) -> OfConn {
        let mut c = OfConn {
            bridge,
            framer: Framer::new(),
            version: None,
            closed: None,
            flow_format: openflow::msg::nx_flow_format::OPENFLOW10,
            table_id_ext: false,
            packet_in_format: 0,
            role: role::EQUAL,
            generation_id: None,
            async_config: None,
            miss_send_len: 0,
            controller_id: 0,
            service: true,
            miss_want: false,
            bundles: BTreeMap::new(),
            pending: Vec::new(),
            out: Vec::new(),
        };
        c.sync_miss_want();
        c
    }

    /// The peer is gone (or the server stops): the connection takes nothing more and stops
    /// counting among the bridge's packet-in-on-miss connections at once, not when the last
    /// reference to it goes.
    pub fn end(&mut self) {
        if self.closed.is_none() {
            self.closed = Some("connection ended".into());
        }
        self.sync_miss_want();
    }

    /// Tells the bridge whether this connection (still) wants packet-ins on table misses.
    fn sync_miss_want(&mut self) {
        let want = self.closed.is_none()
            && self.controller_id == 0
            && self.version.is_none_or(|v| v <= version::OF12);
        if want != self.miss_want {
            self.miss_want = want;
            self.bridge.shared().want_packet_in_on_miss(want);
        }
    }

    /// Makes this a primary (controller) connection, as OVS makes connections to a bridge's
    /// `Controller` targets: asynchronous messages on by default, `miss_send_len` 128.
    pub fn set_primary(&mut self) {
        self.service = false;
        self.miss_send_len = OFP_DEFAULT_MISS_SEND_LEN;
    }

    /// Whether this connection receives asynchronous messages of reason `reason` (OpenFlow
    /// 1.4 numbering) from controller `controller_id` (OVS `ofconn_receives_async_msg`).
    fn wants_packet_in(&self, reason: u8, controller_id: u16, ver: u8) -> bool {
        if controller_id != self.controller_id || (self.service && self.miss_send_len == 0) {
            return false;
        }
        let secondary = self.role == role::SLAVE;
        let bit = 1u32 << wire_reason(reason, ver);
        match &self.async_config {
            // OVS's default: every reason but invalid_ttl for a primary or equal
            // connection, and table misses only up to OpenFlow 1.2; none for a secondary one.
            None => !secondary && reason != 2 && (reason != IMPLICIT_MISS || ver <= version::OF12),
            Some(AsyncConfig::Masks(m)) => m[usize::from(secondary)] & bit != 0,
            Some(AsyncConfig::Props(p)) => {
                // OFPACPT_PACKET_IN_SLAVE 0, _MASTER 1.
                let typ = if secondary { 0 } else { 1 };
                p.iter().any(|&(t, m)| t == typ && m & bit != 0)
            }
        }
    }

    /// The packet-in message for `p` in this connection's version and packet-in format, or
    /// `None` when the connection does not take it (not negotiated yet, another controller
    /// id, its asynchronous configuration, a service connection with `miss_send_len` 0).
    pub fn packet_in(&self, p: &upcall::packet_in::PacketIn) -> Option<Vec<u8>> {
        let ver = self.version?;
        if self.closed.is_some() || !self.wants_packet_in(p.reason, p.controller_id, ver) {
            return None;
        }
        let pin = openflow::packet::PacketIn {
            buffer_id: u32::MAX,
            total_len: u32::try_from(p.frame.len()).ok()?,
            reason: wire_reason(p.reason, ver),
            table_id: p.table_id,
            cookie: p.cookie,
            match_: p.metadata,
            data: p.frame.clone(),
            userdata: p.userdata.clone(),
            continuation: p.continuation.as_ref().map(|actions| Continuation {
                bridge: self.bridge.uuid(),
                conntracked: p.metadata.value(flow::field::FieldId::CtState) != 0,
                actions: actions.clone(),
                odp_port: Some(p.odp_port),
            }),
        };
        let body = match self.packet_in_format {
            1 => Body::NxPacketIn(pin),
            2 => Body::NxPacketIn2(pin),
            _ => Body::PacketIn(pin),
        };
        match Msg::new(ver, 0, body).encode() {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!(bridge = self.bridge.name(), "cannot encode packet-in: {e}");
                None
            }
        }
    }

    /// The `OFPT_PORT_STATUS` for `c` in this connection's version, or `None` when the
    /// connection does not take it (not negotiated, its asynchronous configuration, a
    /// service connection with `miss_send_len` 0) or its version cannot show the change
    /// (a `MODIFY` whose before and after encode alike), as OVS's `connmgr_send_port_status`.
    pub fn port_status(&self, c: &PortChange) -> Option<Vec<u8>> {
        let ver = self.version?;
        if self.closed.is_some() || (self.service && self.miss_send_len == 0) {
            return None;
        }
        let secondary = self.role == role::SLAVE;
        let bit = 1u32 << c.reason;
        let wanted = match &self.async_config {
            // OVS's default: every port change, whatever the role.
            None => true,
            Some(AsyncConfig::Masks(m)) => m[2 + usize::from(secondary)] & bit != 0,
            Some(AsyncConfig::Props(p)) => {
                // OFPACPT_PORT_STATUS_SLAVE 2, _MASTER 3.
                let typ = if secondary { 2 } else { 3 };
                p.iter().any(|&(t, m)| t == typ && m & bit != 0)
            }
        };
        if !wanted {
            return None;
        }
        let encode = |desc: &PortDesc| {
            Msg::new(
                ver,
                0,
                Body::PortStatus(openflow::msg::PortStatus {
                    reason: c.reason,
                    desc: desc.clone(),
                }),
            )
            .encode()
            .ok()
        };
        let msg = encode(&c.desc)?;
        if c.reason == port_reason::MODIFY
            && let Some(old) = &c.old
            && encode(old).as_ref() == Some(&msg)
        {
            return None;
        }
        Some(msg)
    }

    /// The flow-removed message for `f` in this connection's version and flow format
    /// (`NXT_FLOW_REMOVED` after `NXT_SET_FLOW_FORMAT` NXM in OpenFlow 1.0), or `None` when
    /// the connection does not take it: not negotiated, its asynchronous configuration (OVS's
    /// default: every reason for a primary or equal connection, none for a secondary one), a
    /// service connection with `miss_send_len` 0. The caller checks the rule's
    /// `send_flow_rem`.
    pub fn flow_removed(&self, f: &upcall::packet_in::FlowRemoved) -> Option<Vec<u8>> {
        let ver = self.version?;
        if self.closed.is_some() || (self.service && self.miss_send_len == 0) {
            return None;
        }
        let secondary = self.role == role::SLAVE;
        let bit = 1u32 << f.reason;
        let wanted = match &self.async_config {
            None => !secondary,
            Some(AsyncConfig::Masks(m)) => m[4 + usize::from(secondary)] & bit != 0,
            Some(AsyncConfig::Props(p)) => {
                // OFPACPT_FLOW_REMOVED_SLAVE 4, _MASTER 5.
                let typ = if secondary { 4 } else { 5 };
                p.iter().any(|&(t, m)| t == typ && m & bit != 0)
            }
        };
        if !wanted {
            return None;
        }
        let fr = openflow::packet::FlowRemoved {
            match_: f.match_,
            cookie: f.cookie,
            priority: f.priority,
            reason: f.reason,
            table_id: f.table,
            duration_sec: u32::try_from(f.duration_ms / 1000).unwrap_or(u32::MAX),
            duration_nsec: (f.duration_ms % 1000) as u32 * 1_000_000,
            idle_timeout: f.idle_timeout,
            hard_timeout: f.hard_timeout,
            packet_count: f.packets,
            byte_count: f.bytes,
        };
        let body = if ver == version::OF10 && self.flow_format == openflow::msg::nx_flow_format::NXM
        {
            Body::NxFlowRemoved(fr)
        } else {
            Body::FlowRemoved(fr)
        };
        Msg::new(ver, 0, body).encode().ok()
    }

    /// The HELLO to send when the connection opens (versions 1.0–1.5 in a bitmap).
    pub fn hello(&self) -> Vec<u8> {
        hello(&VERSIONS, 0).encode().unwrap_or_default()
    }

    /// The negotiated version, once the peer's HELLO arrived.
    pub fn version(&self) -> Option<u8> {
        self.version
    }

    /// Why the connection is closed (then the caller sends what [`OfConn::feed`] returned
    /// last and closes the socket).
    pub fn closed(&self) -> Option<&str> {
        self.closed.as_deref()
    }

    /// Takes bytes from the peer; returns the bytes to send back. Every flow mod in `input`
    /// is applied before this returns.
    pub fn feed(&mut self, input: &[u8]) -> Vec<u8> {
        let mut out = self.feed_deferred(input);
        out.extend(self.flush());
        out
    }

    /// Flow mods received and not applied yet (see [`OfConn::feed_deferred`]).
    pub fn pending_flow_mods(&self) -> usize {
        self.pending.len()
    }

    /// Applies the pending flow mods (one batch); returns their error replies.
    pub fn flush(&mut self) -> Vec<u8> {
        self.apply_pending();
        std::mem::take(&mut self.out)
    }

    /// Like [`OfConn::feed`], but flow mods at the end of `input` stay pending, to be
    /// batched with what comes next: the caller calls [`OfConn::flush`] when the peer pauses
    /// (or the batch is big enough). Anything that is not a flow mod still applies the
    /// pending ones before it is answered, so replies never overtake their effects.
    pub fn feed_deferred(&mut self, input: &[u8]) -> Vec<u8> {
        if self.closed.is_some() {
            return Vec::new();
        }
        self.framer.feed(input);
        loop {
            match self.framer.next_message() {
                Ok(Some(m)) => self.message(&m),
                Ok(None) => break,
                Err(e) => {
                    // The stream is unreadable from here (no message boundary to resume at):
                    // close, as OVS does.
                    self.apply_pending();
                    self.closed = Some(format!("framing error: {e}"));
                    break;
                }
            }
            if self.closed.is_some() {
                break;
            }
        }
        if self.closed.is_some() {
            self.apply_pending();
        }
        self.sync_miss_want();
        std::mem::take(&mut self.out)
    }

    fn send(&mut self, m: Msg) {
        match m.encode() {
            Ok(b) => self.out.extend_from_slice(&b),
            Err(e) => tracing::warn!(bridge = self.bridge.name(), "cannot encode reply: {e}"),
        }
    }

    fn error(&mut self, e: OfpErr, raw: &[u8], ver: u8) {
        self.apply_pending();
        self.send(e.reply(raw, ver));
    }

    /// One whole message.
    fn message(&mut self, raw: &[u8]) {
        let Ok(h) = Header::parse(raw) else {
            return;
        };
        let Some(ver) = self.version else {
            self.first_message(raw, h);
            return;
        };
        if h.version != ver
            && h.msg_type == openflow::header::msg_type::ECHO_REQUEST
            && (version::OF10..=version::OF15).contains(&h.version)
        {
            // OVS answers an echo in whatever version it came.
            let mut reply = raw.to_vec();
            reply[1] = openflow::header::msg_type::ECHO_REPLY;
            self.apply_pending();
            self.out.extend_from_slice(&reply);
            return;
        }
        if h.version != ver && h.msg_type != openflow::header::msg_type::HELLO {
            // Refused in the request's own version when it is one of ours, as OVS does.
            let v = if (version::OF10..=version::OF15).contains(&h.version) {
                h.version
            } else {
                ver
            };
            self.error(OfpErr::BadVersion, raw, v);
            return;
        }
        let msg = match Msg::decode(raw) {
            Ok(m) => m,
            Err(e) => {
                self.error(OfpErr::of_codec(&e), raw, ver);
                return;
            }
        };
        if let Body::FlowMod(fm) | Body::NxFlowMod(fm) = msg.body {
            let nx = raw.get(1) == Some(&openflow::header::msg_type::EXPERIMENTER);
            let fm = self.check_flow_mod(fm, raw, nx);
            self.pending.push(Pending {
                head: raw.to_vec(),
                ver,
                fm,
            });
            return;
        }
        self.apply_pending();
        if let Err(e) = self.request(msg, raw) {
            self.send(e.reply(raw, ver));
        }
    }

    fn first_message(&mut self, raw: &[u8], h: Header) {
        let ver_fallback = h.version.clamp(version::OF10, version::OF15);
        let m = match Msg::decode(raw) {
            Ok(m) if matches!(m.body, Body::Hello(_)) => m,
            Ok(_) | Err(_) if h.msg_type == openflow::header::msg_type::HELLO => {
                // A version above ours: read its elements as ours (the layout is the same);
                // if even that fails, only the header version counts.
                let mut copy = raw.to_vec();
                copy[0] = version::OF15;
                let elems = match Msg::decode(&copy) {
                    Ok(Msg {
                        body: Body::Hello(e),
                        ..
                    }) => e,
                    _ => Vec::new(),
                };
                Msg::new(h.version, h.xid, Body::Hello(elems))
            }
            _ => {
                self.send(OfpErr::BadType.reply(raw, ver_fallback));
                self.closed = Some("first message is not a HELLO".into());
                return;
            }
        };
        match negotiate(&VERSIONS, &m) {
            Some(v) => self.version = Some(v),
            None => {
                let mut e = OfpErr::HelloIncompatible.reply(raw, ver_fallback);
                if let Body::Error(em) = &mut e.body {
                    em.data = format!(
                        "We support versions 0x01 to 0x06 inclusive but you support {}.",
                        openflow::msg::hello_versions(&m)
                            .iter()
                            .map(|v| format!("0x{v:02x}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                    .into_bytes();
                }
                self.send(e);
                self.closed = Some("no common OpenFlow version".into());
            }
        }
    }

    /// Checks a decoded flow mod against the connection's state and converts it.
    fn check_flow_mod(
        &self,
        fm: WireFlowMod,
        raw: &[u8],
        nx: bool,
    ) -> Result<(ofproto::FlowMod, u16), Refusal> {
        if self.role == role::SLAVE {
            return Err(OfpErr::IsSlave);
        }
        let ver = self.version.unwrap_or(version::OF10);
        let mut spec = fm.spec;
        // Where the table byte is: 1.1+ table_id and NXM's command high byte sit at offset
        // 24; OpenFlow 1.0's command high byte at 56.
        let table_at = if ver == version::OF10 && !nx { 56 } else { 24 };
        let wire_table = raw.get(table_at).copied().unwrap_or(0);
        let has_table = ver >= version::OF11 && !nx || self.table_id_ext;
        if !has_table {
            // Without NXT_FLOW_MOD_TABLE_ID an OpenFlow 1.0/NXM flow mod names no table:
            // an add goes to table 0, the others look at every table.
            spec.table = None;
        } else if fm.command == Command::Add && wire_table == 0xff {
            if ver >= version::OF11 && !nx {
                return Err(OfpErr::FlowModBadTableId);
            }
            // NXM/1.0 with the table-id extension: 0xff is "no table", which OVS adds to
            // table 0 (ovs-ofctl sends it for the flows of a file that name none).
            spec.table = None;
        }
        if let Some(t) = spec.table
            && t >= self.bridge.n_tables()
            && t != 0xff
        {
            // Tables past the last one shown (OVS's hidden table 254) exist but are not
            // the controller's.
            return Err(OfpErr::Eperm);
        }
        // OVS refuses non-default hidden fields in adds and modifies of every version
        // (deletes and dumps may name them).
        let adds_or_modifies = matches!(
            fm.command,
            Command::Add | Command::Modify | Command::ModifyStrict
        );
        if adds_or_modifies && !default_hidden_fields(&spec.match_) {
            return Err(OfpErr::Eperm);
        }
        if fm.buffer_id != openflow::flow_mod::NO_BUFFER {
            return Err(OfpErr::BufferUnknown);
        }
        let command = match fm.command {
            Command::Add => FlowModCommand::Add,
            Command::Modify => FlowModCommand::Modify,
            Command::ModifyStrict => FlowModCommand::ModifyStrict,
            Command::Delete => FlowModCommand::Delete,
            Command::DeleteStrict => FlowModCommand::DeleteStrict,
        };
        if command == FlowModCommand::Add {
            // An add has no cookie filter (OpenFlow 1.1+: a mask on an add is ignored).
            spec.cookie_mask = 0;
        }
        let keep_cookie = matches!(
            command,
            FlowModCommand::Modify | FlowModCommand::ModifyStrict
        ) && ver >= version::OF11
            && !nx;
        // Wire flags in 1.3 numbering: send_flow_rem and check_overlap are in the spec.
        let mut flags =
            fm.flags | u16::from(spec.send_flow_rem) | u16::from(spec.check_overlap) << 1;
        if ver <= version::OF11 {
            // OVS: "In OF1.0 and OF1.1, add always resets counters, and other commands
            // never do" (the 1.1+ bit 2 is something else there).
            flags &= !4;
            if command == FlowModCommand::Add {
                flags |= 4;
            }
        }
        Ok((
            ofproto::FlowMod {
                command,
                spec,
                reset_counts: flags & 4 != 0,
            },
            flags & FF_STATE | if keep_cookie { KEEP_COOKIE } else { 0 },
        ))
    }

    /// Applies the pending flow mods as one batch and answers the refused ones in order.
    fn apply_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        // The flow mods move into the write (shared with the replay on the other copy of
        // the bridge, no copy of each); the requests stay for the error replies.
        let mut fms = Vec::with_capacity(pending.len());
        let mut reqs = Vec::with_capacity(pending.len());
        for p in pending {
            match p.fm {
                Ok(fm) => {
                    fms.push(fm);
                    reqs.push((p.head, p.ver, None));
                }
                Err(e) => reqs.push((p.head, p.ver, Some(e))),
            }
        }
        let fms = Arc::new(fms);
        let shared = self.bridge.shared();
        let now = shared.now_ms();
        // Deleted rules are kept for flow-removed messages only when some rule asked for
        // one (`send_flow_rem`) and someone listens: a bulk delete copies nothing otherwise.
        let keep_deleted = shared.packet_ins().wanted() && !self.bridge.flow_flags().is_empty();
        let (results, deleted) = if fms.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            // One write for the whole batch (what `SharedBridge::flow_mods` does, with
            // OVS's cookie rule of `apply_one`).
            let op = fms.clone();
            let r = shared.write(move |b| {
                let mut deleted = Vec::new();
                let results = op
                    .iter()
                    .map(|(fm, f)| {
                        if keep_deleted
                            && matches!(
                                fm.command,
                                FlowModCommand::Delete | FlowModCommand::DeleteStrict
                            )
                        {
                            let strict = fm.command == FlowModCommand::DeleteStrict;
                            for (t, h) in b.select(&fm.spec, strict) {
                                if let Some(r) = b.table(t).and_then(|x| x.get(h)) {
                                    deleted.push((t, r.clone()));
                                }
                            }
                        }
                        apply_one(b, fm, f & KEEP_COOKIE != 0, now)
                    })
                    .collect::<Vec<_>>();
                (results, deleted)
            });
            shared.notify();
            r
        };
        self.report_deleted(deleted, now);
        let mut results = results.iter().zip(fms.iter());
        let mut applied = Vec::new();
        for (head, ver, refused) in reqs {
            let err = match refused {
                Some(e) => Some(e),
                None => match results.next() {
                    Some((Err(e), _)) => Some(OfpErr::of_flow_mod(e)),
                    Some((Ok(r), (fm, flags))) => {
                        applied.push((fm, *flags, *r));
                        None
                    }
                    None => None,
                },
            };
            if let Some(e) = err {
                self.send(e.reply(&head, ver));
            }
        }
        self.record_flags(&applied);
    }

    /// Queues flow-removed messages (reason `delete`) for the deleted rules that asked for
    /// one, before their flags are forgotten.
    fn report_deleted(&self, deleted: Vec<(u8, ofproto::table::OfRule)>, now: u64) {
        let flags = self.bridge.flow_flags();
        let msgs = self.bridge.shared().packet_ins();
        for (t, r) in deleted {
            if !flags.sends_flow_removed(t, r.priority, &r.match_) {
                continue;
            }
            msgs.push_msg(upcall::packet_in::AsyncMsg::FlowRemoved(
                upcall::packet_in::FlowRemoved {
                    table: t,
                    match_: r.match_,
                    priority: r.priority,
                    cookie: r.cookie,
                    reason: 2,
                    duration_ms: now.saturating_sub(r.created_ms),
                    idle_timeout: r.idle_timeout,
                    hard_timeout: r.hard_timeout,
                    packets: r.n_packets,
                    bytes: r.n_bytes,
                },
            ));
        }
    }

    /// Answers one decoded message other than a flow mod.
    fn request(&mut self, msg: Msg, raw: &[u8]) -> Result<(), Refusal> {
        let ver = msg.version;
        let xid = msg.xid;
        let reply = |body: Body| Msg::new(ver, xid, body);
        match msg.body {
            Body::Hello(_) => Ok(()),
            Body::EchoRequest(d) => {
                self.send(reply(Body::EchoReply(d)));
                Ok(())
            }
            Body::EchoReply(_) | Body::Error(_) | Body::BarrierReply => Ok(()),
            Body::FeaturesRequest => {
                let f = Features {
                    datapath_id: self.bridge.datapath_id(),
                    n_buffers: 0,
                    n_tables: self.bridge.n_tables(),
                    auxiliary_id: 0,
                    // FLOW_STATS TABLE_STATS PORT_STATS QUEUE_STATS, GROUP_STATS (1.1+),
                    // ARP_MATCH_IP (1.0, 1.1), BUNDLES (1.4+), as OVS.
                    capabilities: match ver {
                        version::OF10 => 0x1 | 0x2 | 0x4 | 0x40 | 0x80,
                        version::OF11 => 0x1 | 0x2 | 0x4 | 0x8 | 0x40 | 0x80,
                        version::OF12 | version::OF13 => 0x1 | 0x2 | 0x4 | 0x8 | 0x40,
                        // BUNDLES.
                        _ => 0x1 | 0x2 | 0x4 | 0x8 | 0x40 | 0x200,
                    },
                    actions: if ver == version::OF10 { 0xfff } else { 0 },
                    ports: if ver < version::OF13 {
                        self.bridge.ports()
                    } else {
                        Vec::new()
                    },
                };
                self.send(reply(Body::FeaturesReply(f)));
                Ok(())
            }
            Body::GetConfigRequest => {
                let c = SwitchConfig {
                    flags: self.bridge.frag_mode(),
                    miss_send_len: self.miss_send_len,
                };
                self.send(reply(Body::GetConfigReply(c)));
                Ok(())
            }
            Body::SetConfig(c) => {
                self.bridge.set_frag_mode(c.flags & 3);
                self.miss_send_len = c.miss_send_len;
                Ok(())
            }
            Body::PacketOut(po) => {
                if self.role == role::SLAVE {
                    return Err(OfpErr::IsSlave);
                }
                self.bridge.packet_out(&po, ver)
            }
            Body::NxResume(pin) => {
                if self.role == role::SLAVE {
                    return Err(OfpErr::IsSlave);
                }
                self.bridge.resume(&pin)
            }
            Body::StatsRequest { body, .. } => self.stats(ver, xid, body),
            Body::BarrierRequest => {
                self.send(reply(Body::BarrierReply));
                Ok(())
            }
            Body::RoleRequest(r) => {
                let new = match r.role {
                    role::NOCHANGE => self.role,
                    role::EQUAL | role::MASTER | role::SLAVE => r.role,
                    _ => return Err(OfpErr::RoleBadRole),
                };
                if matches!(r.role, role::MASTER | role::SLAVE) {
                    if let Some(g) = self.generation_id
                        && (r.generation_id.wrapping_sub(g) as i64) < 0
                    {
                        return Err(OfpErr::RoleStale);
                    }
                    self.generation_id = Some(r.generation_id);
                }
                self.role = new;
                let g = self.generation_id.unwrap_or(u64::MAX);
                self.send(reply(Body::RoleReply(Role {
                    role: self.role,
                    generation_id: g,
                })));
                Ok(())
            }
            Body::NxRoleRequest(r) => {
                self.role = match r {
                    0 => role::EQUAL,
                    1 => role::MASTER,
                    2 => role::SLAVE,
                    _ => return Err(OfpErr::RoleBadRole),
                };
                self.send(reply(Body::NxRoleReply(r)));
                Ok(())
            }
            Body::GetAsyncRequest => {
                let c = self
                    .async_config
                    .clone()
                    .unwrap_or_else(|| default_async(ver));
                let c = match (c, ver) {
                    (AsyncConfig::Masks(m), v) if v >= version::OF14 => masks_to_props(m),
                    (c @ AsyncConfig::Masks(_), _) => c,
                    (AsyncConfig::Props(p), version::OF13) => props_to_masks(&p),
                    (c, _) => c,
                };
                self.send(reply(Body::GetAsyncReply(c)));
                Ok(())
            }
            Body::SetAsync(c) => {
                self.async_config = Some(c);
                Ok(())
            }
            Body::NxSetAsyncConfig(m) => {
                self.async_config = Some(AsyncConfig::Masks(m));
                Ok(())
            }
            Body::NxSetFlowFormat(f) => {
                if f != openflow::msg::nx_flow_format::OPENFLOW10
                    && f != openflow::msg::nx_flow_format::NXM
                {
                    return Err(OfpErr::Eperm);
                }
                self.flow_format = f;
                Ok(())
            }
            Body::NxFlowModTableId(on) => {
                self.table_id_ext = on;
                Ok(())
            }
            Body::NxSetPacketInFormat(f) => {
                // 0 standard, 1 NXT_PACKET_IN, 2 NXT_PACKET_IN2.
                if f > 2 {
                    return Err(OfpErr::Eperm);
                }
                self.packet_in_format = f;
                Ok(())
            }
            Body::NxSetControllerId(id) => {
                self.controller_id = id;
                Ok(())
            }
            Body::BundleControl(c) => self.bundle_control(ver, xid, c),
            Body::BundleAdd(a) => {
                let Some(b) = self.bundles.get(&a.bundle_id) else {
                    return Err(OfpErr::Bundle(2));
                };
                if b.closed {
                    return Err(OfpErr::Bundle(4));
                }
                if a.flags != b.flags {
                    return Err(OfpErr::Bundle(7));
                }
                if b.msgs.len() >= MAX_BUNDLE_MSGS {
                    return Err(OfpErr::Bundle(12));
                }
                // The bundled message as it came: after the bundle id, padding and flags
                // (and, in 1.3, the ONF experimenter id and type).
                let at = if ver == version::OF13 { 24 } else { 16 };
                let inner = raw
                    .get(at..)
                    .and_then(|r| {
                        let len = usize::from(Header::parse(r).ok()?.length);
                        r.get(..len)
                    })
                    .map_or_else(|| a.msg.encode().unwrap_or_default(), <[u8]>::to_vec);
                let fm = match a.msg.body {
                    Body::FlowMod(fm) | Body::NxFlowMod(fm) => {
                        let nx = inner.get(1) == Some(&openflow::header::msg_type::EXPERIMENTER);
                        self.check_flow_mod(fm, &inner, nx)
                    }
                    // OVS bundles flow mods, group mods, port mods and packet-outs; this
                    // switch only flow mods.
                    _ => Err(OfpErr::Bundle(10)),
                };
                match fm {
                    Ok((fm, flags)) => {
                        let head = inner.clone();
                        if let Some(b) = self.bundles.get_mut(&a.bundle_id) {
                            b.msgs.push((head, fm, flags));
                        }
                        Ok(())
                    }
                    Err(e) => {
                        self.send(e.reply(&inner, ver));
                        Ok(())
                    }
                }
            }
            Body::FeaturesReply(_)
            | Body::GetConfigReply(_)
            | Body::PacketIn(_)
            | Body::FlowRemoved(_)
            | Body::PortStatus(_)
            | Body::StatsReply { .. }
            | Body::RoleReply(_)
            | Body::GetAsyncReply(_)
            | Body::NxPacketIn(_)
            | Body::NxPacketIn2(_)
            | Body::NxFlowRemoved(_)
            | Body::NxRoleReply(_) => Err(OfpErr::BadType),
            Body::FlowMod(_) | Body::NxFlowMod(_) => Ok(()),
            Body::Experimenter { experimenter, .. } => {
                if experimenter == openflow::msg::NX_VENDOR_ID {
                    Err(OfpErr::BadSubtype)
                } else {
                    Err(OfpErr::BadVendor)
                }
            }
            Body::Raw {
                msg_type: openflow::group::OFPT_GROUP_MOD,
                body,
            } if ver >= version::OF11 => {
                crate::ofgroup::group_mod(self.bridge.shared(), &body, ver)?;
                Ok(())
            }
            Body::Raw { .. } => Err(OfpErr::BadType),
        }
    }

    fn bundle_control(&mut self, ver: u8, xid: u32, c: BundleControl) -> Result<(), Refusal> {
        let answer = |this: &mut OfConn, ctrl_type: u16| {
            this.send(Msg::new(
                ver,
                xid,
                Body::BundleControl(BundleControl {
                    bundle_id: c.bundle_id,
                    ctrl_type,
                    flags: c.flags,
                    props: Vec::new(),
                }),
            ));
        };
        match c.ctrl_type {
            0 => {
                if self.bundles.contains_key(&c.bundle_id) {
                    return Err(OfpErr::Bundle(3));
                }
                if self.bundles.len() >= MAX_BUNDLES {
                    return Err(OfpErr::Bundle(5));
                }
                if c.flags & !3 != 0 {
                    return Err(OfpErr::Bundle(7));
                }
                self.bundles.insert(
                    c.bundle_id,
                    Bundle {
                        flags: c.flags,
                        msgs: Vec::new(),
                        closed: false,
                    },
                );
                answer(self, 1);
                Ok(())
            }
            2 => {
                let Some(b) = self.bundles.get_mut(&c.bundle_id) else {
                    return Err(OfpErr::Bundle(2));
                };
                if b.closed {
                    return Err(OfpErr::Bundle(4));
                }
                b.closed = true;
                answer(self, 3);
                Ok(())
            }
            4 => {
                let Some(b) = self.bundles.remove(&c.bundle_id) else {
                    return Err(OfpErr::Bundle(2));
                };
                if b.flags != c.flags {
                    return Err(OfpErr::Bundle(7));
                }
                let (heads, fms): (Vec<Vec<u8>>, Vec<(ofproto::FlowMod, u16)>) = b
                    .msgs
                    .into_iter()
                    .map(|(head, fm, flags)| (head, (fm, flags)))
                    .unzip();
                let fms = Arc::new(fms);
                match commit_atomic(self.bridge.shared(), &fms) {
                    Ok(results) => {
                        let applied: Vec<_> = fms
                            .iter()
                            .zip(results)
                            .map(|((fm, flags), r)| (fm, *flags, r))
                            .collect();
                        self.record_flags(&applied);
                        answer(self, 5);
                        Ok(())
                    }
                    Err((i, e)) => {
                        if let Some(head) = heads.get(i) {
                            self.send(OfpErr::of_flow_mod(&e).reply(head, ver));
                        }
                        Err(OfpErr::Bundle(13))
                    }
                }
            }
            6 => {
                if self.bundles.remove(&c.bundle_id).is_none() {
                    return Err(OfpErr::Bundle(2));
                }
                answer(self, 7);
                Ok(())
            }
            _ => Err(OfpErr::Bundle(6)),
        }
    }

    fn stats(&mut self, ver: u8, xid: u32, req: MpRequest) -> Result<(), Refusal> {
        let req_kind = if matches!(req, MpRequest::NxAggregate(_)) {
            ReqKind::Nx
        } else {
            ReqKind::Std
        };
        let one = |this: &mut OfConn, body: MpReply| {
            this.send(Msg::new(ver, xid, Body::StatsReply { flags: 0, body }));
        };
        match req {
            MpRequest::Desc => {
                one(
                    self,
                    MpReply::Desc(openflow::stats::Desc {
                        mfr_desc: "Open vSwitch".into(),
                        hw_desc: "Open vSwitch".into(),
                        sw_desc: "3.1.0 (flowswitch)".into(),
                        serial_num: "None".into(),
                        dp_desc: self.bridge.name().to_string(),
                    }),
                );
                Ok(())
            }
            MpRequest::Flow(r) => {
                let flows = self.flow_stats(&r)?;
                self.multipart(ver, xid, flows, MpReply::Flow);
                Ok(())
            }
            MpRequest::NxFlow(r) => {
                let flows = self.flow_stats(&r)?;
                self.multipart(ver, xid, flows, MpReply::NxFlow);
                Ok(())
            }
            MpRequest::Aggregate(r) | MpRequest::NxAggregate(r) => {
                let nx = matches!(req_kind, ReqKind::Nx);
                let flows = self.flow_stats(&r)?;
                let a = AggregateStats {
                    packet_count: flows.iter().map(|f| f.packet_count).sum(),
                    byte_count: flows.iter().map(|f| f.byte_count).sum(),
                    flow_count: u32::try_from(flows.len()).unwrap_or(u32::MAX),
                };
                one(
                    self,
                    if nx {
                        MpReply::NxAggregate(a)
                    } else {
                        MpReply::Aggregate(a)
                    },
                );
                Ok(())
            }
            MpRequest::Table => {
                let b = self.bridge.shared().read();
                let tables: Vec<TableStats> = (0..self.bridge.n_tables())
                    .map(|t| TableStats {
                        table_id: t,
                        name: String::new(),
                        wildcards: 0x003f_ffff,
                        max_entries: 1_000_000,
                        active_count: b
                            .table(t)
                            .map_or(0, |x| u32::try_from(x.len()).unwrap_or(u32::MAX)),
                        lookup_count: 0,
                        matched_count: 0,
                    })
                    .collect();
                drop(b);
                self.multipart(ver, xid, tables, MpReply::Table);
                Ok(())
            }
            MpRequest::Port(p) => {
                let mut v = self.bridge.port_stats();
                if p != u32::MAX {
                    v.retain(|s| s.port_no == p);
                    if v.is_empty() {
                        return Err(OfpErr::BadPort);
                    }
                }
                self.multipart(ver, xid, v, MpReply::Port);
                Ok(())
            }
            MpRequest::PortDesc(p) => {
                let mut v = self.bridge.ports();
                if p != u32::MAX {
                    v.retain(|d| d.port_no == p);
                }
                self.multipart(ver, xid, v, MpReply::PortDesc);
                Ok(())
            }
            MpRequest::TableFeatures(body) => {
                if !body.is_empty() {
                    // Setting table features: OVS refuses it too (OFPTFFC_EPERM).
                    return Err(OfpErr::Eperm);
                }
                let tables: Vec<TableFeatures> = (0..self.bridge.n_tables())
                    .map(|t| TableFeatures {
                        table_id: t,
                        command_features: [0; 5],
                        name: format!("table{t}"),
                        metadata_match: u64::MAX,
                        metadata_write: u64::MAX,
                        config: 0,
                        max_entries: 1_000_000,
                        properties: table_feature_props(),
                    })
                    .collect();
                self.multipart(ver, xid, tables, MpReply::TableFeatures);
                Ok(())
            }
            MpRequest::Raw { mp_type, body } => {
                let body = crate::ofgroup::multipart(self.bridge.shared(), mp_type, &body, ver)?;
                one(self, MpReply::Raw { mp_type, body });
                Ok(())
            }
        }
    }
}

/// Whether an aggregate request was Nicira's.
enum ReqKind {
    Std,
    Nx,
}

impl OfConn {
    /// Records the flags of the rules the applied flow mods added or modified (see
    /// [`FlowFlags`]), looking at the tables as they are after the batch.
    fn record_flags(&self, applied: &[(&ofproto::FlowMod, u16, FlowModResult)]) {
        let ff = self.bridge.flow_flags();
        let n = self.bridge.n_tables();
        let b = self.bridge.shared().read();
        let mut updates = Vec::new();
        for (fm, flags, r) in applied {
            let spec = &fm.spec;
            match fm.command {
                FlowModCommand::Add => updates.push((
                    FlowFlags::key(spec.table.unwrap_or(0), spec.priority, &spec.match_),
                    *flags,
                )),
                // A modify keeps the flags of the rules it changes (OVS); one that added a
                // rule gives it its own.
                FlowModCommand::Modify | FlowModCommand::ModifyStrict if r.added > 0 => updates
                    .push((
                        FlowFlags::key(spec.table.unwrap_or(0), spec.priority, &spec.match_),
                        *flags,
                    )),
                FlowModCommand::Modify | FlowModCommand::ModifyStrict => {}
                FlowModCommand::Delete | FlowModCommand::DeleteStrict => {}
            }
        }
        ff.set_all(updates.into_iter().map(|(k, f)| (k, f & FF_STATE)));
        ff.prune(&b, n);
    }

    /// The flows a flow/aggregate request selects, as flow stats.
    fn flow_stats(&self, r: &FlowStatsRequest) -> Result<Vec<FlowStats>, Refusal> {
        let n = self.bridge.n_tables();
        let tables: Vec<u8> = if r.table_id == 0xff {
            (0..n).collect()
        } else if r.table_id < n || ofproto::bridge::N_TABLES > usize::from(r.table_id) {
            // The hidden tables past the last shown one can be dumped (OVS's table 254
            // holds its internal rules; ours is empty).
            vec![r.table_id]
        } else {
            return Err(OfpErr::BadTableIdRequest);
        };
        let out_port = if r.out_port == u32::MAX {
            None
        } else {
            OfPort::from_ofp11(r.out_port).filter(|p| *p != OfPort::ANY)
        };
        let shared = self.bridge.shared();
        let ff = self.bridge.flow_flags();
        let ver = self.version.unwrap_or(version::OF10);
        let now = shared.now_ms();
        let b = shared.read();
        let mut out = Vec::new();
        for t in tables {
            let Some(table) = b.table(t) else { continue };
            for (_, rule) in table.sorted() {
                if (rule.cookie ^ r.cookie) & r.cookie_mask != 0
                    || out_port.is_some_and(|p| !rule.outputs_to(p))
                    || !loose_match(&rule.match_, &r.match_)
                {
                    continue;
                }
                let age = rule.duration_ms(now);
                let secs = |ms: u64| u16::try_from(ms / 1000 + 1).unwrap_or(u16::MAX);
                out.push(FlowStats {
                    table_id: t,
                    duration_sec: u32::try_from(age / 1000).unwrap_or(u32::MAX),
                    duration_nsec: u32::try_from(age % 1000 * 1_000_000).unwrap_or(0),
                    priority: rule.priority,
                    idle_timeout: rule.idle_timeout,
                    hard_timeout: rule.hard_timeout,
                    flags: ff.get(t, rule.priority, &rule.match_),
                    importance: rule.importance,
                    idle_age: secs(now.saturating_sub(rule.used_ms)),
                    hard_age: secs(now.saturating_sub(rule.modified_ms)),
                    cookie: rule.cookie,
                    packet_count: rule.n_packets,
                    byte_count: rule.n_bytes,
                    match_: rule.match_,
                    actions: vlan_pushes(
                        &if ver < version::OF15 {
                            legacy_actions(&rule.actions, ver)
                        } else {
                            rule.actions.clone()
                        },
                        &rule.match_,
                        ver,
                    ),
                });
            }
        }
        Ok(out)
    }

    /// Sends `items` as one or more multipart replies (`OFPSF_REPLY_MORE` on all but the
    /// last), each under 64 kB. An item that cannot be encoded in `ver` is left out.
    fn multipart<T: Clone>(
        &mut self,
        ver: u8,
        xid: u32,
        items: Vec<T>,
        wrap: impl Fn(Vec<T>) -> MpReply,
    ) {
        let encode = |v: Vec<T>, more: bool| {
            Msg::new(
                ver,
                xid,
                Body::StatsReply {
                    flags: u16::from(more),
                    body: wrap(v),
                },
            )
            .encode()
        };
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut rest: &[T] = &items;
        // Items per message: tried, shrunk in proportion when the message is too big, and
        // the next message starts from a bit more than what fitted last.
        let mut step = 1024usize;
        while !rest.is_empty() {
            let n = step.min(rest.len()).max(1);
            match encode(rest[..n].to_vec(), true) {
                Ok(b) if b.len() <= MP_CHUNK || n == 1 => {
                    chunks.push(b);
                    rest = &rest[n..];
                    step = n + n / 4 + 1;
                }
                Ok(b) => step = (n * MP_CHUNK / b.len() * 9 / 10).clamp(1, n - 1),
                Err(e) if n == 1 => {
                    tracing::warn!(bridge = self.bridge.name(), "stats entry left out: {e}");
                    rest = &rest[1..];
                }
                Err(_) => step = (n / 2).max(1),
            }
        }
        match chunks.pop() {
            None => {
                if let Ok(b) = encode(Vec::new(), false) {
                    self.out.extend_from_slice(&b);
                }
            }
            Some(mut last) => {
                for c in chunks {
                    self.out.extend_from_slice(&c);
                }
                // Clear OFPSF_REPLY_MORE on the last one: flags are the u16 after the type.
                last[10..12].copy_from_slice(&0u16.to_be_bytes());
                self.out.extend_from_slice(&last);
            }
        }
    }
}

/// Applies one flow mod, with two OVS rules the `ofproto` bridge does not know: an add with
/// cookie `0xffffffffffffffff` ("no cookie") that replaces a rule keeps that rule's cookie;
/// a modify with `keep_cookie` (OpenFlow 1.1+) changes only the actions of the rules it
/// selects, never their cookies, and adds nothing when it selects none.
fn apply_one(
    b: &mut ofproto::Bridge,
    fm: &ofproto::FlowMod,
    keep_cookie: bool,
    now: u64,
) -> Result<FlowModResult, FlowModError> {
    if fm.command == FlowModCommand::Add && fm.spec.cookie == u64::MAX {
        let old = b.table(fm.spec.table.unwrap_or(0)).and_then(|t| {
            t.find_strict(&fm.spec.match_, fm.spec.priority)
                .and_then(|h| t.get(h))
                .map(|r| r.cookie)
        });
        if let Some(c) = old {
            let mut fm = fm.clone();
            fm.spec.cookie = c;
            return b.flow_mod(&fm, now);
        }
    }
    if keep_cookie {
        static_check(fm)?;
        // The cookies of the rules it selects: one modify per cookie, filtered on exactly
        // that cookie (a bridge modify with a cookie mask neither adds nor sets cookies).
        let spec = &fm.spec;
        let strict = fm.command == FlowModCommand::ModifyStrict;
        let mut cookies = std::collections::BTreeSet::new();
        let tables: Vec<u8> = match spec.table {
            Some(t) => vec![t],
            None => (0..ofproto::bridge::N_TABLES as u8).collect(),
        };
        for t in tables {
            let Some(table) = b.table(t) else { continue };
            if strict {
                if let Some(r) = table
                    .find_strict(&spec.match_, spec.priority)
                    .and_then(|h| table.get(h))
                    && selects(spec, r)
                {
                    cookies.insert(r.cookie);
                }
                continue;
            }
            for (_, r) in table.iter() {
                if loose_match(&r.match_, &spec.match_) && selects(spec, r) {
                    cookies.insert(r.cookie);
                }
            }
        }
        let mut total = FlowModResult::default();
        for c in cookies {
            let mut one = fm.clone();
            one.spec.cookie = c;
            one.spec.cookie_mask = u64::MAX;
            let r = b.flow_mod(&one, now)?;
            total.modified += r.modified;
        }
        return Ok(total);
    }
    b.flow_mod(fm, now)
}

/// The checks `ofproto::Bridge::flow_mod` makes that do not depend on the tables (all of
/// them but `check_overlap`'s): the add's table, and on every table it may touch, `goto_table`
/// forward only, no output to port 0/`ANY`/`UNSET`, resubmit to an existing table.
fn static_check(fm: &ofproto::FlowMod) -> Result<(), FlowModError> {
    use flow::ofp::Action as A;
    let n = ofproto::bridge::N_TABLES;
    let spec = &fm.spec;
    let tables: Vec<u8> = match fm.command {
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => return Ok(()),
        FlowModCommand::Add => {
            let t = spec.table.unwrap_or(0);
            if usize::from(t) >= n {
                return Err(FlowModError::BadTable(t));
            }
            vec![t]
        }
        FlowModCommand::Modify | FlowModCommand::ModifyStrict => match spec.table {
            Some(t) if usize::from(t) < n => vec![t],
            Some(_) => vec![],
            None => (0..n as u8).collect(),
        },
    };
    for t in tables {
        for a in &spec.actions {
            match a {
                A::GotoTable(to) if *to <= t || usize::from(*to) >= n => {
                    return Err(FlowModError::BadGoto { from: t, to: *to });
                }
                A::Output { port, .. } | A::OutputTrunc { port, .. }
                    if port.0 == 0 || *port == OfPort::ANY || *port == OfPort::UNSET =>
                {
                    return Err(FlowModError::BadOutPort(*port));
                }
                A::Resubmit { table: Some(x), .. } if usize::from(*x) >= n => {
                    return Err(FlowModError::BadTable(*x));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The cookie and `out_port` filters of a modify/delete.
fn selects(spec: &flow::ofp::FlowSpec, r: &ofproto::table::OfRule) -> bool {
    (r.cookie ^ spec.cookie) & spec.cookie_mask == 0
        && spec
            .out_port
            .is_none_or(|p| p == OfPort::ANY || r.outputs_to(p))
}

/// Applies `msgs` all or nothing: on a scratch copy first; only if every one succeeds, on
/// the bridge (one write). `Err((index, error))` names the first that failed.
fn commit_atomic(
    shared: &SharedBridge,
    fms: &Arc<Vec<(ofproto::FlowMod, u16)>>,
) -> Result<Vec<FlowModResult>, (usize, FlowModError)> {
    // Shared with the write (and its replay on the other copy), not copied.
    let fms = fms.clone();
    let now = shared.now_ms();
    if !fms.iter().any(|(fm, _)| fm.spec.check_overlap) {
        // Without check_overlap a flow mod's success does not depend on the tables: check
        // them all first, then apply them in one write with no scratch copy.
        for (i, (fm, _)) in fms.iter().enumerate() {
            static_check(fm).map_err(|e| (i, e))?;
        }
        let r = shared.write(move |b| {
            fms.iter()
                .map(|(fm, flags)| {
                    apply_one(b, fm, *flags & KEEP_COOKIE != 0, now).unwrap_or_default()
                })
                .collect()
        });
        shared.notify();
        return Ok(r);
    }
    let r = shared.write(move |b| {
        let mut scratch = b.replica();
        for (i, (fm, flags)) in fms.iter().enumerate() {
            if let Err(e) = apply_one(&mut scratch, fm, *flags & KEEP_COOKIE != 0, now) {
                return Err((i, e));
            }
        }
        Ok(fms
            .iter()
            .map(|(fm, flags)| apply_one(b, fm, *flags & KEEP_COOKIE != 0, now).unwrap_or_default())
            .collect())
    });
    shared.notify();
    r
}

/// OpenFlow 1.0's `mod_vlan_vid`/`mod_vlan_pcp` push a tag when the packet has none; 1.1+
/// has no such action, so OVS encodes them there as `push_vlan:0x8100` then the set, unless
/// the flow is known to have a tag at that point (`flow_has_vlan`, from the match's CFI bit
/// and the actions before: a push sets it, a pop clears it).
fn vlan_pushes(
    acts: &[flow::ofp::Action],
    m: &flow::ofp::Match,
    ver: u8,
) -> Vec<flow::ofp::Action> {
    use flow::ofp::Action as A;
    if ver == version::OF10 {
        return acts.to_vec();
    }
    let cfi = 0x1000u128;
    let mut has_vlan =
        flow::FieldId::Vlan0Tci.get(&m.key) & m.mask_of(flow::FieldId::Vlan0Tci) & cfi != 0;
    let mut out = Vec::with_capacity(acts.len());
    for a in acts {
        match a {
            A::ModVlanVid {
                push_if_needed: true,
                ..
            }
            | A::ModVlanPcp {
                push_if_needed: true,
                ..
            } => {
                if !has_vlan {
                    out.push(A::PushVlan(0x8100));
                }
                has_vlan = true;
            }
            A::PushVlan(_) => has_vlan = true,
            A::StripVlan | A::PopVlan => has_vlan = false,
            _ => {}
        }
        out.push(a.clone());
    }
    out
}

/// `set_field` actions as OVS encodes them where the version has no (masked) set-field
/// action (`encode_SET_FIELD`): in OpenFlow 1.0 and 1.1 a whole-field set becomes the 1.0
/// action where there is one (`mod_dl_src`, `mod_nw_dst`, `mod_tp_src`, `mod_nw_tos`); any
/// other whole-field set there, and a masked set in 1.0–1.4, becomes `NXAST_REG_LOAD`
/// (`load`), one per contiguous run of mask bits (runs longer than 64 bits split), when the
/// field has a Nicira header. The rest is left as it is (`NXAST_REG_LOAD2`).
fn legacy_actions(acts: &[flow::ofp::Action], ver: u8) -> Vec<flow::ofp::Action> {
    use flow::ofp::Action as A;
    use flow::ofp::action::Subfield;
    use flow::ofp::fields::Mf;
    let mut out = Vec::with_capacity(acts.len());
    for a in acts {
        if let A::Ct(ct) = a {
            let mut ct = ct.clone();
            ct.exec = legacy_actions(&ct.exec, ver);
            out.push(A::Ct(ct));
            continue;
        }
        let A::SetField { field, value, mask } = a else {
            out.push(a.clone());
            continue;
        };
        let (f, v, full) = (*field, *value, *mask == field.byte_max());
        if full && ver >= version::OF12 {
            out.push(a.clone());
            continue;
        }
        if full && ver < version::OF12 {
            // OVS `set_field_to_legacy_openflow`: the VLAN fields become the 1.0 VLAN
            // actions (a TCI without the CFI bit strips the tag).
            let vlan: Option<Vec<A>> = match f {
                Mf::VlanVid => Some(vec![A::ModVlanVid {
                    vid: (v as u16) & 0xfff,
                    push_if_needed: true,
                }]),
                Mf::VlanPcp | Mf::DlVlanPcp => Some(vec![A::ModVlanPcp {
                    pcp: (v as u8) & 7,
                    push_if_needed: true,
                }]),
                Mf::VlanTci if v & 0x1000 != 0 => Some(vec![
                    A::ModVlanVid {
                        vid: (v as u16) & 0xfff,
                        push_if_needed: true,
                    },
                    A::ModVlanPcp {
                        pcp: ((v >> 13) as u8) & 7,
                        push_if_needed: true,
                    },
                ]),
                Mf::VlanTci => Some(vec![A::StripVlan]),
                _ => None,
            };
            if let Some(l) = vlan {
                out.extend(l);
                continue;
            }
        }
        if full {
            let legacy = match f {
                Mf::EthSrc => Some(A::ModDlSrc(v as u64)),
                Mf::EthDst => Some(A::ModDlDst(v as u64)),
                Mf::Ipv4Src => Some(A::ModNwSrc(v as u32)),
                Mf::Ipv4Dst => Some(A::ModNwDst(v as u32)),
                Mf::IpDscpShifted => Some(A::ModNwTos((v as u8) << 2)),
                Mf::TcpSrc | Mf::UdpSrc | Mf::SctpSrc => Some(A::ModTpSrc(v as u16)),
                Mf::TcpDst | Mf::UdpDst | Mf::SctpDst => Some(A::ModTpDst(v as u16)),
                _ => None,
            };
            if let Some(l) = legacy {
                out.push(l);
                continue;
            }
        }
        let nx_ok = openflow::fields::nxm_header(f)
            .is_some_and(|d| d.class != openflow::fields::OXM_EXPERIMENTER);
        if !nx_ok {
            out.push(a.clone());
            continue;
        }
        // One load per contiguous run of mask bits, lowest first.
        let m = *mask & f.max();
        let mut bit = 0u32;
        while bit < 128 {
            if m >> bit & 1 == 0 {
                bit += 1;
                continue;
            }
            let start = bit;
            // OVS's NXAST_REG_LOAD carries at most 64 bits: a longer run is split.
            while bit < 128 && m >> bit & 1 == 1 && bit - start < 64 {
                bit += 1;
            }
            let n_bits = bit - start;
            let run = if n_bits >= 128 {
                u128::MAX
            } else {
                (1u128 << n_bits) - 1
            };
            out.push(A::Load {
                value: v >> start & run,
                dst: Subfield {
                    field: f,
                    ofs: start,
                    n_bits,
                },
            });
        }
    }
    out
}

/// OVS `match_has_default_hidden_fields`: an added flow may match the datapath-internal
/// `recirc_id` only as 0 (exactly) and `dp_hash` not at all.
fn default_hidden_fields(m: &flow::ofp::Match) -> bool {
    let rid_mask = m.mask_of(flow::FieldId::RecircId);
    let rid = flow::FieldId::RecircId.get(&m.key);
    rid == 0 && (rid_mask == 0 || rid_mask == 0xffff_ffff) && m.mask_of(flow::FieldId::DpHash) == 0
}

/// Table-features properties OVS's parser requires (instructions, next tables, write and
/// apply actions, match, wildcards, write and apply set-field), each empty: enough for
/// `ovs-ofctl` to read table names; the lists themselves are not advertised yet.
fn table_feature_props() -> Vec<u8> {
    let mut v = Vec::new();
    for t in [0u16, 2, 4, 6, 8, 10, 12, 14] {
        v.extend_from_slice(&t.to_be_bytes());
        v.extend_from_slice(&4u16.to_be_bytes());
        v.extend_from_slice(&[0; 4]);
    }
    v
}

/// OVS's default asynchronous configuration (`ofputil_async_cfg_default`) as 1.3 masks:
/// packet-in (no match, action, and from 1.4 on the others), port status (all), flow removed
/// (all) for a primary or equal controller; port status only for a secondary one.
/// `OFPPR_*`: why a port status is sent.
pub mod port_reason {
    /// The port was added.
    pub const ADD: u8 = 0;
    /// The port was removed.
    pub const DELETE: u8 = 1;
    /// Some attribute of the port changed.
    pub const MODIFY: u8 = 2;
}

/// A port change to report to controllers (`OFPT_PORT_STATUS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortChange {
    /// [`port_reason`].
    pub reason: u8,
    /// Before a `MODIFY` (a change a connection's version cannot show is not sent to it).
    pub old: Option<PortDesc>,
    /// The port (as it was, for a `DELETE`).
    pub desc: PortDesc,
}

/// `miss_send_len` of a primary connection until the controller sets one (OpenFlow's
/// `OFP_DEFAULT_MISS_SEND_LEN`).
pub const OFP_DEFAULT_MISS_SEND_LEN: u16 = 128;

/// OVS's internal packet-in reason of a table miss (`no_match` on the wire).
const IMPLICIT_MISS: u8 = 7;

/// A packet-in reason (OpenFlow 1.4 numbering) as version `ver` says it: a table miss is
/// `no_match`, and before 1.4 `action_set`, `group` and `packet_out` are `action`.
fn wire_reason(reason: u8, ver: u8) -> u8 {
    match reason {
        IMPLICIT_MISS => 0,
        3..=5 if ver < version::OF14 => 1,
        r => r,
    }
}

fn default_async(ver: u8) -> AsyncConfig {
    let pin = if ver >= version::OF14 { 0x3f } else { 0x7 };
    let fr = if ver >= version::OF14 { 0x3f } else { 0xf };
    AsyncConfig::Masks([pin, 0, 0x7, 0x7, fr, 0])
}

/// 1.3 masks as 1.4+ properties (types 0–5: packet-in, port status, flow removed; primary
/// then secondary, as `OFPACPT_*`).
fn masks_to_props(m: [u32; 6]) -> AsyncConfig {
    // OFPACPT_PACKET_IN_SLAVE 0, _MASTER 1, PORT_STATUS_SLAVE 2, _MASTER 3,
    // FLOW_REMOVED_SLAVE 4, _MASTER 5.
    AsyncConfig::Props(vec![
        (0, m[1]),
        (1, m[0]),
        (2, m[3]),
        (3, m[2]),
        (4, m[5]),
        (5, m[4]),
    ])
}

fn props_to_masks(p: &[(u16, u32)]) -> AsyncConfig {
    let mut m = [0u32; 6];
    for (t, v) in p {
        let i = match t {
            0 => 1,
            1 => 0,
            2 => 3,
            3 => 2,
            4 => 5,
            5 => 4,
            _ => continue,
        };
        m[i] = *v;
    }
    AsyncConfig::Masks(m)
}

#[cfg(test)]
mod packet_out_tests {
    use super::*;
    use datapath::{ActionTable, Dpcls, DpclsConfig, Pmd, PmdConfig, PmdThread, PmdThreadConfig};
    use netdev::{MemHandle, MemPort};
    use ofproto::table::Backend;

    fn out(sb: &StaticBridge, p: &PacketOut) -> Result<(), OfpErr> {
        sb.packet_out(p, version::OF13)
    }

    fn frame() -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0x88, 0xb5]);
        f.resize(60, 0);
        f
    }

    fn po(in_port: u32, actions: &str, data: Vec<u8>) -> PacketOut {
        PacketOut {
            buffer_id: u32::MAX,
            in_port,
            match_: flow::ofp::Match::catchall(),
            actions: flow::text::parse_actions(actions).expect("actions"),
            data,
        }
    }

    /// A bridge of 3 ports (+ LOCAL) whose datapath thread runs on memory ports 1..=3.
    fn running() -> (StaticBridge, PmdThread, [MemHandle; 3]) {
        let mut br = ofproto::Bridge::ovs_sandbox(3, Backend::Linear);
        br.add_flows_text("table=1,actions=output:3\ntable=5,actions=resubmit(,5)", 0)
            .expect("flows");
        let shared = SharedBridge::with_manual_clock(br, 0);
        let sb = StaticBridge::new("br0", 1, shared.clone());
        let mut pmd = Pmd::new(
            PmdConfig::default(),
            Arc::new(Dpcls::new(DpclsConfig::default())),
            Arc::new(ActionTable::new(64)),
            Box::new(upcall::handler::OfprotoUpcall::with_shared(shared)),
        );
        let ports: [MemPort; 3] = std::array::from_fn(|i| MemPort::new(format!("p{}", i + 1)));
        let h = ports.each_ref().map(MemPort::handle);
        for (i, p) in ports.into_iter().enumerate() {
            pmd.add_port(i as u32 + 1, Box::new(p), true).expect("port");
        }
        sb.set_execute_queue(Some(pmd.execute_queue().clone()));
        let cfg = PmdThreadConfig {
            idle_park: Some(std::time::Duration::from_secs(30)),
            ..PmdThreadConfig::default()
        };
        let t = PmdThread::spawn(pmd, cfg).expect("spawn");
        (sb, t, h)
    }

    #[test]
    fn packet_out_is_sent_before_it_returns() {
        let (sb, t, h) = running();
        assert_eq!(out(&sb, &po(1, "output:2", frame())), Ok(()));
        assert_eq!(h[1].take_tx(), vec![frame()]);
        assert_eq!(out(&sb, &po(2, "resubmit(,1)", frame())), Ok(()));
        assert_eq!(h[2].take_tx(), vec![frame()]);
        // To the in_port: dropped; IN_PORT: sent there.
        assert_eq!(out(&sb, &po(1, "output:1", frame())), Ok(()));
        assert_eq!(h[0].tx_len(), 0);
        assert_eq!(out(&sb, &po(1, "in_port", frame())), Ok(()));
        assert_eq!(h[0].take_tx(), vec![frame()]);
        // A runt is accepted but not sent (as OVS does).
        assert_eq!(out(&sb, &po(1, "output:2", vec![1; 13])), Ok(()));
        assert_eq!(out(&sb, &po(1, "output:2", vec![1; 14])), Ok(()));
        assert_eq!(h[1].take_tx(), vec![vec![1; 14]]);
        // LOCAL (1.1+ numbering) as in_port.
        assert_eq!(out(&sb, &po(0xffff_fffe, "output:3", frame())), Ok(()));
        assert_eq!(h[2].take_tx(), vec![frame()]);
        t.join().expect("join");
    }

    #[test]
    fn bad_packet_outs_get_ovs_errors() {
        // Before 1.2, OVS's bad port and translation errors are Nicira vendor errors.
        let nx = |e: OfpErr, ver: u8| {
            let req = [ver, 13, 0, 8, 0, 0, 0, 9];
            match OfpErr::reply(e, &req, ver).body {
                Body::Error(m) => (m.typ, m.code, m.data[..8].to_vec()),
                _ => unreachable!("an error"),
            }
        };
        let nx_data = |t: u16, c: u16| {
            let mut d = openflow::msg::NX_VENDOR_ID.to_be_bytes().to_vec();
            d.extend_from_slice(&t.to_be_bytes());
            d.extend_from_slice(&c.to_be_bytes());
            d
        };
        assert_eq!(nx(OfpErr::BadPort, 1), (NXET_VENDOR, 0, nx_data(1, 514)));
        assert_eq!(
            nx(OfpErr::XlateFailed, 1),
            (NXET_VENDOR, 0, nx_data(1, 521))
        );
        assert_eq!(
            nx(OfpErr::MatchInconsistent, 1),
            (NXET_VENDOR, 0, nx_data(1, 522))
        );
        assert_eq!(OfpErr::MatchInconsistent.wire(2), (2, 10, None));
        assert_eq!(nx(OfpErr::BadPort, 4).0, 1);
        assert_eq!(OfpErr::BadPort.wire(4), (1, 11, None));
        assert_eq!(OfpErr::XlateFailed.wire(2), (5, 0, None));
        let (sb, t, h) = running();
        let mut p = po(1, "output:2", frame());
        p.buffer_id = 5;
        assert_eq!(out(&sb, &p), Err(OfpErr::BufferUnknown));
        assert_eq!(
            out(&sb, &po(0xffff_ff00, "output:2", frame())),
            Err(OfpErr::BadPort)
        );
        assert_eq!(
            out(&sb, &po(0x1_0000, "output:2", frame())),
            Err(OfpErr::BadOutPort)
        );
        assert_eq!(
            out(&sb, &po(1, "output:2", vec![0; netdev::MAX_FRAME + 1])),
            Err(OfpErr::BadLen)
        );
        assert_eq!(
            out(&sb, &po(1, "output:2,resubmit(,5)", frame())),
            Err(OfpErr::XlateFailed)
        );
        // `ct` needs IP; a non-IP frame (and a 1.0-only action in 1.3) is inconsistent.
        assert_eq!(
            out(&sb, &po(1, "ct(table=1)", frame())),
            Err(OfpErr::MatchInconsistent)
        );
        assert_eq!(h[1].tx_len(), 0, "nothing sent");
        // Without a datapath: refused.
        sb.set_execute_queue(None);
        assert_eq!(out(&sb, &po(1, "output:2", frame())), Err(OfpErr::Eperm));
        t.join().expect("join");
    }
}
