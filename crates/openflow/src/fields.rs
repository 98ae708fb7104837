//! The numeric NXM/OXM header of every field the `flow` registry ([`flow::ofp::Mf`]) knows.
//!
//! A TLV header is 32 bits: `class:16 | field:7 | has_mask:1 | length:8`. Class `0x0000`
//! (`NXM_OF_*`) and `0x0001` (`NXM_NX_*`) are Nicira's, `0x8000` is OpenFlow basic
//! (`OXM_OF_*`), `0x8001` holds OpenFlow 1.5's 64-bit packet registers, and `0xffff` is an
//! experimenter class whose header is followed by a 32-bit experimenter id counted in the
//! length. The table ([`HEADERS`]) maps `(class, field, experimenter)` to the field it carries
//! and its value width in bytes; [`nxm_header`] and [`oxm_header`] pick the header a field is
//! written with in NXM (OpenFlow 1.0 + Nicira) and OXM (OpenFlow 1.2+) matches and actions,
//! the way OVS does: the OpenFlow basic header where the version has one, else the Nicira
//! one.
//!
//! Invariant: every `Mf` with an NXM or OXM name in the registry has exactly the headers
//! named there (tested against [`flow::ofp::MfDef::nxm`] / [`flow::ofp::MfDef::oxm`]).

use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid};
use crate::header::version;
use flow::ofp::Mf;

/// `NXM_OF_*` class.
pub const NXM_OF: u16 = 0x0000;
/// `NXM_NX_*` class.
pub const NXM_NX: u16 = 0x0001;
/// `OXM_OF_*` (OpenFlow basic) class.
pub const OXM_OF: u16 = 0x8000;
/// OpenFlow 1.5 packet registers class (`OXM_OF_PKT_REG0..7`).
pub const OXM_PKT_REGS: u16 = 0x8001;
/// Experimenter class.
pub const OXM_EXPERIMENTER: u16 = 0xffff;
/// ONF's experimenter id (`ONFOXM_ET_*`).
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;

/// What a TLV carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A registry field.
    Mf(Mf),
    /// OpenFlow 1.5 64-bit register `n` (`reg[2n]` high, `reg[2n+1]` low).
    XReg(u8),
    /// `NXM_NX_COOKIE` (flow-mod cookie filter inside an NXM match).
    Cookie,
    /// `OXM_OF_PACKET_TYPE`: only Ethernet (0) exists in the model.
    PacketType,
}

/// A TLV header without its has-mask bit and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderDef {
    /// Class.
    pub class: u16,
    /// Field number (7 bits).
    pub field: u8,
    /// Experimenter id (class `0xffff` only, else 0).
    pub experimenter: u32,
    /// Value width in bytes.
    pub len: u8,
    /// The field.
    pub target: Target,
    /// Name, for errors.
    pub name: &'static str,
}

const fn h(class: u16, field: u8, len: u8, mf: Mf, name: &'static str) -> HeaderDef {
    HeaderDef {
        class,
        field,
        experimenter: 0,
        len,
        target: Target::Mf(mf),
        name,
    }
}

/// Every header this codec decodes.
pub static HEADERS: &[HeaderDef] = &{
    use Mf::*;
    [
        h(NXM_OF, 0, 2, InPort, "NXM_OF_IN_PORT"),
        h(NXM_OF, 1, 6, EthDst, "NXM_OF_ETH_DST"),
        h(NXM_OF, 2, 6, EthSrc, "NXM_OF_ETH_SRC"),
        h(NXM_OF, 3, 2, EthType, "NXM_OF_ETH_TYPE"),
        h(NXM_OF, 4, 2, VlanTci, "NXM_OF_VLAN_TCI"),
        h(NXM_OF, 5, 1, IpDscp, "NXM_OF_IP_TOS"),
        h(NXM_OF, 6, 1, IpProto, "NXM_OF_IP_PROTO"),
        h(NXM_OF, 7, 4, Ipv4Src, "NXM_OF_IP_SRC"),
        h(NXM_OF, 8, 4, Ipv4Dst, "NXM_OF_IP_DST"),
        h(NXM_OF, 9, 2, TcpSrc, "NXM_OF_TCP_SRC"),
        h(NXM_OF, 10, 2, TcpDst, "NXM_OF_TCP_DST"),
        h(NXM_OF, 11, 2, UdpSrc, "NXM_OF_UDP_SRC"),
        h(NXM_OF, 12, 2, UdpDst, "NXM_OF_UDP_DST"),
        h(NXM_OF, 13, 1, Icmpv4Type, "NXM_OF_ICMP_TYPE"),
        h(NXM_OF, 14, 1, Icmpv4Code, "NXM_OF_ICMP_CODE"),
        h(NXM_OF, 15, 2, ArpOp, "NXM_OF_ARP_OP"),
        h(NXM_OF, 16, 4, ArpSpa, "NXM_OF_ARP_SPA"),
        h(NXM_OF, 17, 4, ArpTpa, "NXM_OF_ARP_TPA"),
        h(NXM_NX, 0, 4, Reg0, "NXM_NX_REG0"),
        h(NXM_NX, 1, 4, Reg1, "NXM_NX_REG1"),
        h(NXM_NX, 2, 4, Reg2, "NXM_NX_REG2"),
        h(NXM_NX, 3, 4, Reg3, "NXM_NX_REG3"),
        h(NXM_NX, 4, 4, Reg4, "NXM_NX_REG4"),
        h(NXM_NX, 5, 4, Reg5, "NXM_NX_REG5"),
        h(NXM_NX, 6, 4, Reg6, "NXM_NX_REG6"),
        h(NXM_NX, 7, 4, Reg7, "NXM_NX_REG7"),
        h(NXM_NX, 8, 4, Reg8, "NXM_NX_REG8"),
        h(NXM_NX, 9, 4, Reg9, "NXM_NX_REG9"),
        h(NXM_NX, 10, 4, Reg10, "NXM_NX_REG10"),
        h(NXM_NX, 11, 4, Reg11, "NXM_NX_REG11"),
        h(NXM_NX, 12, 4, Reg12, "NXM_NX_REG12"),
        h(NXM_NX, 13, 4, Reg13, "NXM_NX_REG13"),
        h(NXM_NX, 14, 4, Reg14, "NXM_NX_REG14"),
        h(NXM_NX, 15, 4, Reg15, "NXM_NX_REG15"),
        h(NXM_NX, 17, 6, ArpSha, "NXM_NX_ARP_SHA"),
        h(NXM_NX, 18, 6, ArpTha, "NXM_NX_ARP_THA"),
        h(NXM_NX, 19, 16, Ipv6Src, "NXM_NX_IPV6_SRC"),
        h(NXM_NX, 20, 16, Ipv6Dst, "NXM_NX_IPV6_DST"),
        h(NXM_NX, 21, 1, Icmpv6Type, "NXM_NX_ICMPV6_TYPE"),
        h(NXM_NX, 22, 1, Icmpv6Code, "NXM_NX_ICMPV6_CODE"),
        h(NXM_NX, 23, 16, NdTarget, "NXM_NX_ND_TARGET"),
        h(NXM_NX, 24, 6, NdSll, "NXM_NX_ND_SLL"),
        h(NXM_NX, 25, 6, NdTll, "NXM_NX_ND_TLL"),
        h(NXM_NX, 26, 1, IpFrag, "NXM_NX_IP_FRAG"),
        h(NXM_NX, 27, 4, Ipv6Label, "NXM_NX_IPV6_LABEL"),
        h(NXM_NX, 28, 1, IpEcn, "NXM_NX_IP_ECN"),
        h(NXM_NX, 29, 1, IpTtl, "NXM_NX_IP_TTL"),
        HeaderDef {
            class: NXM_NX,
            field: 30,
            experimenter: 0,
            len: 8,
            target: Target::Cookie,
            name: "NXM_NX_COOKIE",
        },
        h(NXM_NX, 33, 4, PktMark, "NXM_NX_PKT_MARK"),
        h(NXM_NX, 34, 2, TcpFlags, "NXM_NX_TCP_FLAGS"),
        h(NXM_NX, 35, 4, DpHash, "NXM_NX_DP_HASH"),
        h(NXM_NX, 36, 4, RecircId, "NXM_NX_RECIRC_ID"),
        h(NXM_NX, 37, 4, ConjId, "NXM_NX_CONJ_ID"),
        h(NXM_NX, 105, 4, CtState, "NXM_NX_CT_STATE"),
        h(NXM_NX, 106, 2, CtZone, "NXM_NX_CT_ZONE"),
        h(NXM_NX, 107, 4, CtMark, "NXM_NX_CT_MARK"),
        h(NXM_NX, 108, 16, CtLabel, "NXM_NX_CT_LABEL"),
        h(NXM_NX, 119, 1, CtNwProto, "NXM_NX_CT_NW_PROTO"),
        h(NXM_NX, 120, 4, CtNwSrc, "NXM_NX_CT_NW_SRC"),
        h(NXM_NX, 121, 4, CtNwDst, "NXM_NX_CT_NW_DST"),
        h(NXM_NX, 124, 2, CtTpSrc, "NXM_NX_CT_TP_SRC"),
        h(NXM_NX, 125, 2, CtTpDst, "NXM_NX_CT_TP_DST"),
        h(OXM_OF, 0, 4, InPortOxm, "OXM_OF_IN_PORT"),
        h(OXM_OF, 2, 8, Metadata, "OXM_OF_METADATA"),
        h(OXM_OF, 3, 6, EthDst, "OXM_OF_ETH_DST"),
        h(OXM_OF, 4, 6, EthSrc, "OXM_OF_ETH_SRC"),
        h(OXM_OF, 5, 2, EthType, "OXM_OF_ETH_TYPE"),
        h(OXM_OF, 6, 2, VlanVid, "OXM_OF_VLAN_VID"),
        h(OXM_OF, 7, 1, VlanPcp, "OXM_OF_VLAN_PCP"),
        h(OXM_OF, 8, 1, IpDscpShifted, "OXM_OF_IP_DSCP"),
        h(OXM_OF, 9, 1, IpEcn, "OXM_OF_IP_ECN"),
        h(OXM_OF, 10, 1, IpProto, "OXM_OF_IP_PROTO"),
        h(OXM_OF, 11, 4, Ipv4Src, "OXM_OF_IPV4_SRC"),
        h(OXM_OF, 12, 4, Ipv4Dst, "OXM_OF_IPV4_DST"),
        h(OXM_OF, 13, 2, TcpSrc, "OXM_OF_TCP_SRC"),
        h(OXM_OF, 14, 2, TcpDst, "OXM_OF_TCP_DST"),
        h(OXM_OF, 15, 2, UdpSrc, "OXM_OF_UDP_SRC"),
        h(OXM_OF, 16, 2, UdpDst, "OXM_OF_UDP_DST"),
        h(OXM_OF, 17, 2, SctpSrc, "OXM_OF_SCTP_SRC"),
        h(OXM_OF, 18, 2, SctpDst, "OXM_OF_SCTP_DST"),
        h(OXM_OF, 19, 1, Icmpv4Type, "OXM_OF_ICMPV4_TYPE"),
        h(OXM_OF, 20, 1, Icmpv4Code, "OXM_OF_ICMPV4_CODE"),
        h(OXM_OF, 21, 2, ArpOp, "OXM_OF_ARP_OP"),
        h(OXM_OF, 22, 4, ArpSpa, "OXM_OF_ARP_SPA"),
        h(OXM_OF, 23, 4, ArpTpa, "OXM_OF_ARP_TPA"),
        h(OXM_OF, 24, 6, ArpSha, "OXM_OF_ARP_SHA"),
        h(OXM_OF, 25, 6, ArpTha, "OXM_OF_ARP_THA"),
        h(OXM_OF, 26, 16, Ipv6Src, "OXM_OF_IPV6_SRC"),
        h(OXM_OF, 27, 16, Ipv6Dst, "OXM_OF_IPV6_DST"),
        h(OXM_OF, 28, 4, Ipv6Label, "OXM_OF_IPV6_FLABEL"),
        h(OXM_OF, 29, 1, Icmpv6Type, "OXM_OF_ICMPV6_TYPE"),
        h(OXM_OF, 30, 1, Icmpv6Code, "OXM_OF_ICMPV6_CODE"),
        h(OXM_OF, 31, 16, NdTarget, "OXM_OF_IPV6_ND_TARGET"),
        h(OXM_OF, 32, 6, NdSll, "OXM_OF_IPV6_ND_SLL"),
        h(OXM_OF, 33, 6, NdTll, "OXM_OF_IPV6_ND_TLL"),
        h(OXM_OF, 42, 2, TcpFlags, "OXM_OF_TCP_FLAGS"),
        HeaderDef {
            class: OXM_EXPERIMENTER,
            field: 42,
            experimenter: ONF_EXPERIMENTER,
            len: 2,
            target: Target::Mf(TcpFlags),
            name: "ONFOXM_ET_TCP_FLAGS",
        },
        HeaderDef {
            class: OXM_OF,
            field: 44,
            experimenter: 0,
            len: 4,
            target: Target::PacketType,
            name: "OXM_OF_PACKET_TYPE",
        },
        xreg(0, "OXM_OF_PKT_REG0"),
        xreg(1, "OXM_OF_PKT_REG1"),
        xreg(2, "OXM_OF_PKT_REG2"),
        xreg(3, "OXM_OF_PKT_REG3"),
        xreg(4, "OXM_OF_PKT_REG4"),
        xreg(5, "OXM_OF_PKT_REG5"),
        xreg(6, "OXM_OF_PKT_REG6"),
        xreg(7, "OXM_OF_PKT_REG7"),
    ]
};

const fn xreg(n: u8, name: &'static str) -> HeaderDef {
    HeaderDef {
        class: OXM_PKT_REGS,
        field: n,
        experimenter: 0,
        len: 8,
        target: Target::XReg(n),
        name,
    }
}

/// Looks a header up.
pub fn lookup(class: u16, field: u8, experimenter: u32) -> Option<&'static HeaderDef> {
    HEADERS
        .iter()
        .find(|d| d.class == class && d.field == field && d.experimenter == experimenter)
}

fn find(mf: Mf, pred: impl Fn(&HeaderDef) -> bool) -> Option<&'static HeaderDef> {
    HEADERS
        .iter()
        .find(|d| d.target == Target::Mf(mf) && pred(d))
}

/// The header a field is written with in an NXM match or a Nicira action (`load`, `move`,
/// `output_reg`): its Nicira header, else its OpenFlow basic one.
pub fn nxm_header(mf: Mf) -> Option<&'static HeaderDef> {
    static BY_MF: std::sync::OnceLock<Vec<Option<&'static HeaderDef>>> = std::sync::OnceLock::new();
    BY_MF
        .get_or_init(|| {
            Mf::all()
                .map(|mf| {
                    find(mf, |d| d.class == NXM_OF || d.class == NXM_NX)
                        .or_else(|| find(mf, |d| d.class == OXM_OF))
                })
                .collect()
        })
        .get(mf as usize)
        .copied()
        .flatten()
}

/// The header a field is written with in an OXM match or `set_field` of wire version
/// `ver`: the OpenFlow basic header where `ver` has it (`tcp_flags` only from 1.5; ONF's
/// experimenter header in 1.3 and 1.4), else the Nicira one.
pub fn oxm_header(mf: Mf, ver: u8) -> Option<&'static HeaderDef> {
    if mf == Mf::TcpFlags {
        return if ver >= version::OF15 {
            find(mf, |d| d.class == OXM_OF)
        } else if ver >= version::OF13 {
            find(mf, |d| d.class == OXM_EXPERIMENTER)
        } else {
            nxm_header(mf)
        };
    }
    static BY_MF: std::sync::OnceLock<Vec<Option<&'static HeaderDef>>> = std::sync::OnceLock::new();
    BY_MF
        .get_or_init(|| {
            Mf::all()
                .map(|mf| find(mf, |d| d.class == OXM_OF).or_else(|| nxm_header(mf)))
                .collect()
        })
        .get(mf as usize)
        .copied()
        .flatten()
}

/// A TLV header as read from the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHeader {
    /// Class.
    pub class: u16,
    /// Field.
    pub field: u8,
    /// Has-mask bit.
    pub has_mask: bool,
    /// Payload length (experimenter id excluded).
    pub payload: usize,
    /// Experimenter id (class `0xffff`), else 0.
    pub experimenter: u32,
}

impl RawHeader {
    /// Bytes the header takes on the wire.
    pub fn wire_len(&self) -> usize {
        if self.class == OXM_EXPERIMENTER { 8 } else { 4 }
    }
}

/// Reads a TLV header (4 bytes, 8 for the experimenter class).
pub(crate) fn read_header(r: &mut Rd<'_>) -> Result<RawHeader> {
    let x = r.u32()?;
    let class = (x >> 16) as u16;
    let mut payload = (x & 0xff) as usize;
    let mut experimenter = 0;
    if class == OXM_EXPERIMENTER {
        experimenter = r.u32()?;
        payload = payload
            .checked_sub(4)
            .ok_or_else(|| invalid("experimenter OXM header with length below 4"))?;
    }
    Ok(RawHeader {
        class,
        field: ((x >> 9) & 0x7f) as u8,
        has_mask: x & 0x100 != 0,
        payload,
        experimenter,
    })
}

/// Writes `d`'s header with the has-mask bit and the matching length.
pub(crate) fn write_header(w: &mut Wr, d: &HeaderDef, has_mask: bool) {
    let mut len = u32::from(d.len) * if has_mask { 2 } else { 1 };
    if d.class == OXM_EXPERIMENTER {
        len += 4;
    }
    w.u32(
        u32::from(d.class) << 16
            | u32::from(d.field) << 9
            | u32::from(has_mask) << 8
            | (len & 0xff),
    );
    if d.class == OXM_EXPERIMENTER {
        w.u32(d.experimenter);
    }
}

/// Resolves a raw header to a table entry, checking the length.
pub fn resolve(h: &RawHeader) -> Result<&'static HeaderDef> {
    let d = lookup(h.class, h.field, h.experimenter).ok_or_else(|| {
        crate::error::unsupported(format!(
            "match field class 0x{:04x} field {} experimenter 0x{:x}",
            h.class, h.field, h.experimenter
        ))
    })?;
    let want = usize::from(d.len) * if h.has_mask { 2 } else { 1 };
    if h.payload != want {
        return Err(crate::error::Error::BadLength {
            what: d.name,
            len: h.payload,
        });
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_agree_with_the_registry_names() {
        for mf in Mf::all() {
            let def = mf.def();
            for name in [def.nxm, def.oxm].into_iter().flatten() {
                let d = HEADERS
                    .iter()
                    .find(|d| d.name == name)
                    .unwrap_or_else(|| panic!("no header for {name}"));
                assert_eq!(d.target, Target::Mf(mf), "{name}");
                assert_eq!(u32::from(d.len), def.n_bytes, "{name}");
            }
        }
        for d in HEADERS {
            if let Target::Mf(mf) = d.target {
                let def = mf.def();
                assert!(
                    def.nxm == Some(d.name)
                        || def.oxm == Some(d.name)
                        || matches!(d.name, "OXM_OF_TCP_FLAGS" | "ONFOXM_ET_TCP_FLAGS"),
                    "{} not named in the registry for {}",
                    d.name,
                    def.name
                );
            }
            assert_eq!(lookup(d.class, d.field, d.experimenter), Some(d));
        }
    }
}
