//! Whole messages: [`Msg`] (version, xid, [`Body`]) decoded from and encoded to bytes.
//!
//! [`Msg::decode`] takes exactly one message (as [`crate::Framer`] hands it out) and never
//! fails on an unknown message type or an unknown vendor message: those become
//! [`Body::Raw`] / [`Body::Experimenter`] so a connection can answer with an OpenFlow error
//! and carry on. Known messages that are malformed, or use what the model cannot hold,
//! are an [`crate::Error`].
//!
//! Message numbers differ between OpenFlow 1.0 and 1.1+ above `FLOW_MOD`; [`Body`] is
//! version-neutral and [`Msg::encode`] writes the number of `Msg::version`. Nicira messages
//! (`OFPT_VENDOR`/`OFPT_EXPERIMENTER` with vendor `0x00002320`) are the `Nx*` variants.
//!
//! Invariant: `Msg::decode(&m.encode()?)? == m` for every `m` that `decode` produced
//! (property-tested on recorded and mutated messages).

use crate::codec::{Rd, Wr};
use crate::error::{Error, Result, invalid, unsupported};
use crate::flow_mod::FlowMod;
use crate::header::{HEADER_LEN, Header, msg_type as mt, version};
use crate::packet::{FlowRemoved, PacketIn, PacketOut};
use crate::port::PortDesc;
use crate::stats::{MpReply, MpRequest, mp_type};

pub use crate::bundle::{
    BundleAdd, BundleControl, OFPT_BUNDLE_ADD_MESSAGE, OFPT_BUNDLE_CONTROL, ONF_VENDOR_ID,
    ONFT_BUNDLE_ADD_MESSAGE, ONFT_BUNDLE_CONTROL,
};
use crate::bundle::{decode_bundle_add, decode_bundle_control};
pub use crate::hello::{HelloElem, hello, hello_versions, negotiate};
use crate::hello::{decode_hello, encode_hello};
pub use crate::nicira::{NX_VENDOR_ID, nx_flow_format, nxt};
use crate::nicira::{decode_vendor, nx_header};
pub use crate::ofp_error::{self, error_reply};

/// Switch features.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Features {
    /// Datapath id.
    pub datapath_id: u64,
    /// Packets the switch can buffer.
    pub n_buffers: u32,
    /// Tables.
    pub n_tables: u8,
    /// Auxiliary connection id (1.3+).
    pub auxiliary_id: u8,
    /// `OFPC_*` bits.
    pub capabilities: u32,
    /// 1.0: supported actions bitmap; 1.1+: reserved.
    pub actions: u32,
    /// Ports (1.0–1.2; later versions use the PORT_DESC multipart).
    pub ports: Vec<PortDesc>,
}

/// `OFPT_GET_CONFIG_REPLY` / `OFPT_SET_CONFIG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*` bits.
    pub flags: u16,
    /// Bytes of a table-miss packet sent to the controller.
    pub miss_send_len: u16,
}

/// Role request/reply (1.2+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Role {
    /// `OFPCR_ROLE_*`.
    pub role: u32,
    /// Generation id.
    pub generation_id: u64,
}

/// Asynchronous message configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AsyncConfig {
    /// 1.3 and `NXT_SET_ASYNC_CONFIG`: packet-in, port-status, flow-removed masks, each
    /// (master/equal, slave).
    Masks([u32; 6]),
    /// 1.4+: properties `(type, mask)`.
    Props(Vec<(u16, u32)>),
}

/// A port status change.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortStatus {
    /// `OFPPR_ADD`, `DELETE`, `MODIFY`.
    pub reason: u8,
    /// The port.
    pub desc: PortDesc,
}

/// An error message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorMsg {
    /// `OFPET_*`.
    pub typ: u16,
    /// Code within the type.
    pub code: u16,
    /// Usually the start of the offending message.
    pub data: Vec<u8>,
}

/// What a message says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Body {
    /// `OFPT_HELLO`.
    Hello(Vec<HelloElem>),
    /// `OFPT_ERROR`.
    Error(ErrorMsg),
    /// `OFPT_ECHO_REQUEST`.
    EchoRequest(Vec<u8>),
    /// `OFPT_ECHO_REPLY`.
    EchoReply(Vec<u8>),
    /// `OFPT_FEATURES_REQUEST`.
    FeaturesRequest,
    /// `OFPT_FEATURES_REPLY`.
    FeaturesReply(Features),
    /// `OFPT_GET_CONFIG_REQUEST`.
    GetConfigRequest,
    /// `OFPT_GET_CONFIG_REPLY`.
    GetConfigReply(SwitchConfig),
    /// `OFPT_SET_CONFIG`.
    SetConfig(SwitchConfig),
    /// `OFPT_PACKET_IN`.
    PacketIn(PacketIn),
    /// `OFPT_FLOW_REMOVED`.
    FlowRemoved(FlowRemoved),
    /// `OFPT_PORT_STATUS`.
    PortStatus(PortStatus),
    /// `OFPT_PACKET_OUT`.
    PacketOut(PacketOut),
    /// `OFPT_FLOW_MOD`.
    FlowMod(FlowMod),
    /// Stats / multipart request.
    StatsRequest {
        /// Flags (`OFPSF_REQ_MORE` = 1).
        flags: u16,
        /// Body.
        body: MpRequest,
    },
    /// Stats / multipart reply.
    StatsReply {
        /// Flags (`OFPSF_REPLY_MORE` = 1).
        flags: u16,
        /// Body.
        body: MpReply,
    },
    /// `OFPT_BARRIER_REQUEST`.
    BarrierRequest,
    /// `OFPT_BARRIER_REPLY`.
    BarrierReply,
    /// `OFPT_ROLE_REQUEST` (1.2+).
    RoleRequest(Role),
    /// `OFPT_ROLE_REPLY` (1.2+).
    RoleReply(Role),
    /// `OFPT_GET_ASYNC_REQUEST` (1.3+).
    GetAsyncRequest,
    /// `OFPT_GET_ASYNC_REPLY` (1.3+).
    GetAsyncReply(AsyncConfig),
    /// `OFPT_SET_ASYNC` (1.3+).
    SetAsync(AsyncConfig),
    /// `OFPT_BUNDLE_CONTROL` (1.4+; ONF's experimenter message in 1.3).
    BundleControl(BundleControl),
    /// `OFPT_BUNDLE_ADD_MESSAGE` (1.4+; ONF's experimenter message in 1.3).
    BundleAdd(BundleAdd),
    /// `NXT_FLOW_MOD`.
    NxFlowMod(FlowMod),
    /// `NXT_SET_FLOW_FORMAT`.
    NxSetFlowFormat(u32),
    /// `NXT_FLOW_MOD_TABLE_ID`.
    NxFlowModTableId(bool),
    /// `NXT_SET_PACKET_IN_FORMAT`.
    NxSetPacketInFormat(u32),
    /// `NXT_PACKET_IN`.
    NxPacketIn(PacketIn),
    /// `NXT_PACKET_IN2`.
    NxPacketIn2(PacketIn),
    /// `NXT_RESUME`: a paused packet-in sent back (the `NXT_PACKET_IN2` format).
    NxResume(PacketIn),
    /// `NXT_FLOW_REMOVED`.
    NxFlowRemoved(FlowRemoved),
    /// `NXT_ROLE_REQUEST` (role: 0 other, 1 master, 2 slave).
    NxRoleRequest(u32),
    /// `NXT_ROLE_REPLY`.
    NxRoleReply(u32),
    /// `NXT_SET_CONTROLLER_ID`.
    NxSetControllerId(u16),
    /// `NXT_SET_ASYNC_CONFIG`.
    NxSetAsyncConfig([u32; 6]),
    /// A vendor/experimenter message this codec does not interpret.
    Experimenter {
        /// Vendor / experimenter id.
        experimenter: u32,
        /// Subtype.
        exp_type: u32,
        /// What follows the subtype.
        body: Vec<u8>,
    },
    /// A message type this codec does not interpret.
    Raw {
        /// Message type.
        msg_type: u8,
        /// Body (after the header).
        body: Vec<u8>,
    },
}

/// A message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Msg {
    /// Wire version.
    pub version: u8,
    /// Transaction id.
    pub xid: u32,
    /// Content.
    pub body: Body,
}

fn stats_types(ver: u8) -> (u8, u8, u8, u8) {
    if ver == version::OF10 {
        (
            mt::of10::STATS_REQUEST,
            mt::of10::STATS_REPLY,
            mt::of10::BARRIER_REQUEST,
            mt::of10::BARRIER_REPLY,
        )
    } else {
        (
            mt::of11::MULTIPART_REQUEST,
            mt::of11::MULTIPART_REPLY,
            mt::of11::BARRIER_REQUEST,
            mt::of11::BARRIER_REPLY,
        )
    }
}

pub(crate) fn masks6(r: &mut Rd<'_>) -> Result<[u32; 6]> {
    let mut m = [0u32; 6];
    for x in &mut m {
        *x = r.u32()?;
    }
    Ok(m)
}

pub(crate) fn done(r: &Rd<'_>, what: &str) -> Result<()> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(invalid(format!(
            "{} trailing bytes in {what}",
            r.remaining()
        )))
    }
}

/// Decoded common part of a stats message: type, flags, Nicira subtype, body.
fn stats_common<'a>(r: &mut Rd<'a>, ver: u8) -> Result<(u16, u16, Option<u32>, &'a [u8])> {
    let t = r.u16()?;
    let flags = r.u16()?;
    if ver != version::OF10 {
        r.skip(4)?;
    }
    let mut sub = None;
    if t == mp_type::VENDOR && r.remaining() >= 8 && r.peek_u16(0)? == 0 && r.peek_u16(2)? == 0x2320
    {
        let mut p = r.clone();
        p.skip(4)?;
        let s = p.u32()?;
        if s == crate::stats::nxst::FLOW || s == crate::stats::nxst::AGGREGATE {
            if ver == version::OF10 {
                p.skip(4)?;
            }
            sub = Some(s);
            *r = p;
        }
    }
    Ok((t, flags, sub, r.rest()))
}

impl Msg {
    /// A message.
    pub fn new(version: u8, xid: u32, body: Body) -> Msg {
        Msg { version, xid, body }
    }

    /// Decodes exactly one message (`b` is the whole message, header included).
    pub fn decode(b: &[u8]) -> Result<Msg> {
        let h = Header::parse(b)?;
        if usize::from(h.length) != b.len() {
            return Err(Error::BadLength {
                what: "OpenFlow message (length field vs bytes)",
                len: usize::from(h.length),
            });
        }
        let ver = h.version;
        if !(version::OF10..=version::OF15).contains(&ver) {
            return Err(unsupported(format!("OpenFlow wire version {ver}")));
        }
        let body = &b[HEADER_LEN..];
        let mut r = Rd::new(body, "message body");
        let (sreq, srep, breq, brep) = stats_types(ver);
        let v11 = ver >= version::OF11;
        let v = match h.msg_type {
            mt::HELLO => Body::Hello(decode_hello(body)?),
            mt::ERROR => Body::Error(ErrorMsg {
                typ: r.u16()?,
                code: r.u16()?,
                data: r.rest().to_vec(),
            }),
            mt::ECHO_REQUEST => Body::EchoRequest(body.to_vec()),
            mt::ECHO_REPLY => Body::EchoReply(body.to_vec()),
            mt::EXPERIMENTER => decode_vendor(&mut r, ver)?,
            mt::FEATURES_REQUEST => {
                done(&r, "features request")?;
                Body::FeaturesRequest
            }
            mt::FEATURES_REPLY => {
                let mut f = Features {
                    datapath_id: r.u64()?,
                    n_buffers: r.u32()?,
                    n_tables: r.u8()?,
                    ..Features::default()
                };
                let aux = r.u8()?;
                if ver >= version::OF13 {
                    f.auxiliary_id = aux;
                }
                r.skip(2)?;
                f.capabilities = r.u32()?;
                f.actions = r.u32()?;
                if ver < version::OF13 {
                    while !r.is_empty() {
                        f.ports.push(PortDesc::decode(&mut r, ver)?);
                    }
                }
                done(&r, "features reply")?;
                Body::FeaturesReply(f)
            }
            mt::GET_CONFIG_REQUEST => {
                done(&r, "get config request")?;
                Body::GetConfigRequest
            }
            mt::GET_CONFIG_REPLY | mt::SET_CONFIG => {
                let c = SwitchConfig {
                    flags: r.u16()?,
                    miss_send_len: r.u16()?,
                };
                done(&r, "switch config")?;
                if h.msg_type == mt::SET_CONFIG {
                    Body::SetConfig(c)
                } else {
                    Body::GetConfigReply(c)
                }
            }
            mt::PACKET_IN => Body::PacketIn(PacketIn::decode(body, ver)?),
            mt::FLOW_REMOVED => Body::FlowRemoved(FlowRemoved::decode(body, ver)?),
            mt::PORT_STATUS => {
                let reason = r.u8()?;
                r.skip(7)?;
                let desc = PortDesc::decode(&mut r, ver)?;
                done(&r, "port status")?;
                Body::PortStatus(PortStatus { reason, desc })
            }
            mt::PACKET_OUT => Body::PacketOut(PacketOut::decode(body, ver)?),
            mt::FLOW_MOD => Body::FlowMod(if ver == version::OF10 {
                FlowMod::decode_of10(body)?
            } else {
                FlowMod::decode_of11(body, ver)?
            }),
            t if t == sreq || t == srep => {
                let (st, flags, sub, rest) = stats_common(&mut r, ver)?;
                if t == sreq {
                    Body::StatsRequest {
                        flags,
                        body: MpRequest::decode(st, sub, rest, ver)?,
                    }
                } else {
                    Body::StatsReply {
                        flags,
                        body: MpReply::decode(st, sub, rest, ver)?,
                    }
                }
            }
            t if t == breq => {
                done(&r, "barrier request")?;
                Body::BarrierRequest
            }
            t if t == brep => {
                done(&r, "barrier reply")?;
                Body::BarrierReply
            }
            mt::of11::ROLE_REQUEST | mt::of11::ROLE_REPLY if ver >= version::OF12 => {
                let role = Role {
                    role: r.u32()?,
                    generation_id: {
                        r.skip(4)?;
                        r.u64()?
                    },
                };
                done(&r, "role message")?;
                if h.msg_type == mt::of11::ROLE_REQUEST {
                    Body::RoleRequest(role)
                } else {
                    Body::RoleReply(role)
                }
            }
            mt::of11::GET_ASYNC_REQUEST if ver >= version::OF13 => {
                done(&r, "get async request")?;
                Body::GetAsyncRequest
            }
            mt::of11::GET_ASYNC_REPLY | mt::of11::SET_ASYNC if ver >= version::OF13 => {
                let c = decode_async(&mut r, ver)?;
                if h.msg_type == mt::of11::SET_ASYNC {
                    Body::SetAsync(c)
                } else {
                    Body::GetAsyncReply(c)
                }
            }
            OFPT_BUNDLE_CONTROL if ver >= version::OF14 => {
                Body::BundleControl(decode_bundle_control(&mut r)?)
            }
            OFPT_BUNDLE_ADD_MESSAGE if ver >= version::OF14 => {
                Body::BundleAdd(decode_bundle_add(&mut r, ver)?)
            }
            t => {
                let _ = v11;
                Body::Raw {
                    msg_type: t,
                    body: body.to_vec(),
                }
            }
        };
        Ok(Msg {
            version: ver,
            xid: h.xid,
            body: v,
        })
    }

    /// The message type number this body has in `self.version`.
    pub fn msg_type(&self) -> u8 {
        let (sreq, srep, breq, brep) = stats_types(self.version);
        match &self.body {
            Body::Hello(_) => mt::HELLO,
            Body::Error(_) => mt::ERROR,
            Body::EchoRequest(_) => mt::ECHO_REQUEST,
            Body::EchoReply(_) => mt::ECHO_REPLY,
            Body::FeaturesRequest => mt::FEATURES_REQUEST,
            Body::FeaturesReply(_) => mt::FEATURES_REPLY,
            Body::GetConfigRequest => mt::GET_CONFIG_REQUEST,
            Body::GetConfigReply(_) => mt::GET_CONFIG_REPLY,
            Body::SetConfig(_) => mt::SET_CONFIG,
            Body::PacketIn(_) => mt::PACKET_IN,
            Body::FlowRemoved(_) => mt::FLOW_REMOVED,
            Body::PortStatus(_) => mt::PORT_STATUS,
            Body::PacketOut(_) => mt::PACKET_OUT,
            Body::FlowMod(_) => mt::FLOW_MOD,
            Body::StatsRequest { .. } => sreq,
            Body::StatsReply { .. } => srep,
            Body::BarrierRequest => breq,
            Body::BarrierReply => brep,
            Body::RoleRequest(_) => mt::of11::ROLE_REQUEST,
            Body::RoleReply(_) => mt::of11::ROLE_REPLY,
            Body::GetAsyncRequest => mt::of11::GET_ASYNC_REQUEST,
            Body::GetAsyncReply(_) => mt::of11::GET_ASYNC_REPLY,
            Body::SetAsync(_) => mt::of11::SET_ASYNC,
            Body::BundleControl(_) if self.version >= version::OF14 => OFPT_BUNDLE_CONTROL,
            Body::BundleAdd(_) if self.version >= version::OF14 => OFPT_BUNDLE_ADD_MESSAGE,
            Body::BundleControl(_)
            | Body::BundleAdd(_)
            | Body::NxFlowMod(_)
            | Body::NxSetFlowFormat(_)
            | Body::NxFlowModTableId(_)
            | Body::NxSetPacketInFormat(_)
            | Body::NxPacketIn(_)
            | Body::NxPacketIn2(_)
            | Body::NxResume(_)
            | Body::NxFlowRemoved(_)
            | Body::NxRoleRequest(_)
            | Body::NxRoleReply(_)
            | Body::NxSetControllerId(_)
            | Body::NxSetAsyncConfig(_)
            | Body::Experimenter { .. } => mt::EXPERIMENTER,
            Body::Raw { msg_type, .. } => *msg_type,
        }
    }

    /// Encodes the message (header included).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let ver = self.version;
        if !(version::OF10..=version::OF15).contains(&ver) {
            return Err(unsupported(format!("OpenFlow wire version {ver}")));
        }
        let mut w = Wr::new();
        w.bytes(
            &Header {
                version: ver,
                msg_type: self.msg_type(),
                length: 0,
                xid: self.xid,
            }
            .to_bytes(),
        );
        let need = |ok: bool, what: &str| -> Result<()> {
            if ok {
                Ok(())
            } else {
                Err(unsupported(format!("{what} in wire version {ver}")))
            }
        };
        match &self.body {
            Body::Hello(elems) => encode_hello(&mut w, elems)?,
            Body::Error(e) => {
                w.u16(e.typ);
                w.u16(e.code);
                w.bytes(&e.data);
            }
            Body::EchoRequest(d) | Body::EchoReply(d) => w.bytes(d),
            Body::FeaturesRequest
            | Body::GetConfigRequest
            | Body::BarrierRequest
            | Body::BarrierReply => {}
            Body::FeaturesReply(f) => {
                w.u64(f.datapath_id);
                w.u32(f.n_buffers);
                w.u8(f.n_tables);
                w.u8(if ver >= version::OF13 {
                    f.auxiliary_id
                } else {
                    0
                });
                w.zeros(2);
                w.u32(f.capabilities);
                w.u32(f.actions);
                if ver < version::OF13 {
                    for p in &f.ports {
                        p.encode(&mut w, ver)?;
                    }
                }
            }
            Body::GetConfigReply(c) | Body::SetConfig(c) => {
                w.u16(c.flags);
                w.u16(c.miss_send_len);
            }
            Body::PacketIn(p) => p.encode(&mut w, ver)?,
            Body::FlowRemoved(f) => f.encode(&mut w, ver)?,
            Body::PortStatus(s) => {
                w.u8(s.reason);
                w.zeros(7);
                s.desc.encode(&mut w, ver)?;
            }
            Body::PacketOut(p) => p.encode(&mut w, ver)?,
            Body::FlowMod(fm) => {
                if ver == version::OF10 {
                    fm.encode_of10(&mut w)?;
                } else {
                    fm.encode_of11(&mut w, ver)?;
                }
            }
            Body::StatsRequest { flags, body } => {
                stats_header(&mut w, ver, body.mp_type(), *flags, body.nx_subtype());
                body.encode(&mut w, ver)?;
            }
            Body::StatsReply { flags, body } => {
                stats_header(&mut w, ver, body.mp_type(), *flags, body.nx_subtype());
                body.encode(&mut w, ver)?;
            }
            Body::RoleRequest(r) | Body::RoleReply(r) => {
                need(ver >= version::OF12, "role request")?;
                w.u32(r.role);
                w.zeros(4);
                w.u64(r.generation_id);
            }
            Body::GetAsyncRequest => need(ver >= version::OF13, "get async")?,
            Body::GetAsyncReply(c) | Body::SetAsync(c) => {
                need(ver >= version::OF13, "async config")?;
                encode_async(&mut w, c, ver)?;
            }
            Body::BundleControl(c) => {
                need(ver >= version::OF13, "bundles")?;
                if ver == version::OF13 {
                    w.u32(ONF_VENDOR_ID);
                    w.u32(ONFT_BUNDLE_CONTROL);
                }
                w.u32(c.bundle_id);
                w.u16(c.ctrl_type);
                w.u16(c.flags);
                w.bytes(&c.props);
            }
            Body::BundleAdd(a) => {
                need(ver >= version::OF13, "bundles")?;
                if a.msg.version != ver {
                    return Err(invalid("bundled message of another version"));
                }
                if ver == version::OF13 {
                    w.u32(ONF_VENDOR_ID);
                    w.u32(ONFT_BUNDLE_ADD_MESSAGE);
                }
                w.u32(a.bundle_id);
                w.u16(0);
                w.u16(a.flags);
                w.bytes(&a.msg.encode()?);
                w.bytes(&a.props);
            }
            Body::NxFlowMod(fm) => {
                nx_header(&mut w, nxt::FLOW_MOD);
                fm.encode_nx(&mut w, ver)?;
            }
            Body::NxSetFlowFormat(f) => {
                nx_header(&mut w, nxt::SET_FLOW_FORMAT);
                w.u32(*f);
            }
            Body::NxFlowModTableId(on) => {
                nx_header(&mut w, nxt::FLOW_MOD_TABLE_ID);
                w.u8(u8::from(*on));
                w.zeros(7);
            }
            Body::NxSetPacketInFormat(f) => {
                nx_header(&mut w, nxt::SET_PACKET_IN_FORMAT);
                w.u32(*f);
            }
            Body::NxPacketIn(p) => {
                nx_header(&mut w, nxt::PACKET_IN);
                p.encode_nx(&mut w)?;
            }
            Body::NxPacketIn2(p) => {
                nx_header(&mut w, nxt::PACKET_IN2);
                p.encode_nx2(&mut w, self.version)?;
            }
            Body::NxResume(p) => {
                nx_header(&mut w, nxt::RESUME);
                p.encode_nx2(&mut w, self.version)?;
            }
            Body::NxFlowRemoved(f) => {
                nx_header(&mut w, nxt::FLOW_REMOVED);
                f.encode_nx(&mut w)?;
            }
            Body::NxRoleRequest(r) | Body::NxRoleReply(r) => {
                let sub = if matches!(self.body, Body::NxRoleRequest(_)) {
                    nxt::ROLE_REQUEST
                } else {
                    nxt::ROLE_REPLY
                };
                nx_header(&mut w, sub);
                w.u32(*r);
            }
            Body::NxSetControllerId(id) => {
                nx_header(&mut w, nxt::SET_CONTROLLER_ID);
                w.zeros(6);
                w.u16(*id);
            }
            Body::NxSetAsyncConfig(m) => {
                nx_header(&mut w, nxt::SET_ASYNC_CONFIG);
                for x in m {
                    w.u32(*x);
                }
            }
            Body::Experimenter {
                experimenter,
                exp_type,
                body,
            } => {
                w.u32(*experimenter);
                w.u32(*exp_type);
                w.bytes(body);
            }
            Body::Raw { body, .. } => w.bytes(body),
        }
        w.patch_len(2, 0, "OpenFlow message")?;
        Ok(w.buf)
    }
}

fn stats_header(w: &mut Wr, ver: u8, t: u16, flags: u16, nx_sub: Option<u32>) {
    w.u16(t);
    w.u16(flags);
    if ver != version::OF10 {
        w.zeros(4);
    }
    if let Some(s) = nx_sub {
        w.u32(NX_VENDOR_ID);
        w.u32(s);
        if ver == version::OF10 {
            w.zeros(4);
        }
    }
}

fn decode_async(r: &mut Rd<'_>, ver: u8) -> Result<AsyncConfig> {
    if ver == version::OF13 {
        let m = masks6(r)?;
        done(r, "async config")?;
        return Ok(AsyncConfig::Masks(m));
    }
    let mut props = Vec::new();
    while !r.is_empty() {
        let typ = r.u16()?;
        let len = r.u16()?;
        if len != 8 {
            return Err(Error::BadLength {
                what: "async config property",
                len: usize::from(len),
            });
        }
        props.push((typ, r.u32()?));
    }
    Ok(AsyncConfig::Props(props))
}

fn encode_async(w: &mut Wr, c: &AsyncConfig, ver: u8) -> Result<()> {
    match c {
        AsyncConfig::Masks(m) if ver == version::OF13 => {
            for x in m {
                w.u32(*x);
            }
        }
        AsyncConfig::Props(p) if ver >= version::OF14 => {
            for (t, m) in p {
                w.u16(*t);
                w.u16(8);
                w.u32(*m);
            }
        }
        _ => return Err(invalid("async config form does not match the version")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
            .collect()
    }

    #[test]
    fn hello_bitmap_as_ovs_sends_it() {
        // ovs-ofctl -O OpenFlow13: version 4, bitmap element with bit 4.
        let b = hex("04000010000000010001000800000010");
        let m = Msg::decode(&b).unwrap();
        assert_eq!(hello_versions(&m), vec![4]);
        assert_eq!(hello(&[4], 1).encode().unwrap(), b);
        assert_eq!(hello(&[1], 1).encode().unwrap(), hex("0100000800000001"));
        assert_eq!(
            hello_versions(&Msg::decode(&hex("0300000800000001")).unwrap()),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn negotiation_and_error_replies() {
        let h13 = Msg::decode(&hex("04000010000000010001000800000010")).unwrap();
        assert_eq!(negotiate(&[1, 4, 6], &h13), Some(4));
        assert_eq!(negotiate(&[1], &h13), None);
        let h10 = Msg::decode(&hex("0100000800000001")).unwrap();
        assert_eq!(negotiate(&[1, 4], &h10), Some(1));
        let bad = hex("040e0009000000422a");
        let e = error_reply(
            &bad,
            ofp_error::BAD_REQUEST,
            ofp_error::BAD_REQUEST_BAD_LEN,
            1,
        );
        assert_eq!((e.version, e.xid), (4, 0x42));
        let b = e.encode().unwrap();
        assert_eq!(Msg::decode(&b).unwrap(), e);
        assert_eq!(error_reply(&[1, 2], 1, 6, 4).version, 4);
    }

    #[test]
    fn unknown_messages_are_raw_not_errors() {
        let m = Msg::decode(&hex("04630009000000072a")).unwrap();
        assert_eq!(
            m.body,
            Body::Raw {
                msg_type: 0x63,
                body: vec![0x2a]
            }
        );
        assert_eq!(m.encode().unwrap(), hex("04630009000000072a"));
        let v = Msg::decode(&hex("0104001400000002000012340000000501020304")).unwrap();
        assert!(matches!(
            v.body,
            Body::Experimenter {
                experimenter: 0x1234,
                exp_type: 5,
                ..
            }
        ));
        let s = Msg::decode(&hex("0412001000000002ff07000000000000")).unwrap();
        assert!(matches!(
            s.body,
            Body::StatsRequest {
                body: MpRequest::Raw {
                    mp_type: 0xff07,
                    ..
                },
                ..
            }
        ));
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(matches!(
            Msg::decode(&hex("0100")),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            Msg::decode(&hex("0100000700000001")),
            Err(Error::BadLength { len: 7, .. })
        ));
        // Length field says 9, 8 bytes given.
        assert!(matches!(
            Msg::decode(&hex("0100000900000001")),
            Err(Error::BadLength { .. })
        ));
        assert!(matches!(
            Msg::decode(&hex("0900000800000001")),
            Err(Error::Unsupported(_))
        ));
        // A flow mod cut inside its match.
        assert!(matches!(
            Msg::decode(&hex("010e0010000000010000000000000000")),
            Err(Error::Truncated {
                what: "ofp10_match",
                ..
            })
        ));
        // NXAST_LEARN in an OpenFlow 1.0 flow mod.
        let mut fm = hex(
            "010e005800000006003820ff00000000000000000000000000000000000000000000000000000000\
             000000000000000000000000000000000000000000008000ffffffffffff0000",
        );
        fm.extend(hex("ffff001000002320001000000000000000"));
        fm.truncate(88);
        fm[3] = 88;
        let e = Msg::decode(&fm).unwrap_err();
        assert_eq!(e, Error::Unsupported("action NXAST_LEARN".into()), "{e}");
    }
}
