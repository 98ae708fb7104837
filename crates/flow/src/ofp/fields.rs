//! The OpenFlow field registry: every match/action field name OVS's flow syntax accepts, mapped
//! onto the storage fields of [`crate::field`].
//!
//! An OpenFlow field ([`Mf`], OVS `enum mf_field_id`) is a *view* of one storage field: its bit
//! 0 lies at bit `shift` of the storage field ([`MfDef::storage`]) and it is `n_bits` wide.
//! Most views are the whole storage field; the exceptions are `dl_vlan`/`vlan_vid` (low 12 bits
//! of the first VLAN tag's TCI), `dl_vlan_pcp`/`vlan_pcp` (TCI bits 13..15), `ip_dscp`
//! (`nw_tos` shifted right by 2), `nw_ecn` (low 2 bits of `nw_tos`), and the fields that borrow another field's storage
//! as OVS does (`arp_op` = `nw_proto`, `arp_spa` = `nw_src`, `icmp_type` = `tp_src`, `nd_sll` =
//! `arp_sha`, …). Some views are wider than their storage (`in_port` is 16 bits in a 32-bit slot,
//! `arp_op` is 16 bits over the 8-bit `nw_proto`); the extra bits are simply never set.
//!
//! Each entry also records what the text layer needs: the value syntax ([`MfFormat`]),
//! maskability, prerequisites ([`Prereq`]), writability, the NXM/OXM names used in
//! `load`/`move`/`set_field`, and in which OpenFlow dialects a match on it can be expressed
//! ([`Protocols`]). The table mirrors OVS 3.1 `meta-flow.h`.
//!
//! Invariant: `MF_TABLE[i].id as usize == i` (tested).

use crate::field::FieldId;

/// A set of OpenFlow wire protocols (OVS `enum ofputil_protocol`), one bit each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protocols(pub u16);

#[allow(missing_docs)]
impl Protocols {
    pub const NONE: Protocols = Protocols(0);
    pub const OF10_STD: Protocols = Protocols(1 << 0);
    pub const OF10_STD_TID: Protocols = Protocols(1 << 1);
    pub const OF10_NXM: Protocols = Protocols(1 << 2);
    pub const OF10_NXM_TID: Protocols = Protocols(1 << 3);
    pub const OF11_STD: Protocols = Protocols(1 << 4);
    pub const OF12_OXM: Protocols = Protocols(1 << 5);
    pub const OF13_OXM: Protocols = Protocols(1 << 6);
    pub const OF14_OXM: Protocols = Protocols(1 << 7);
    pub const OF15_OXM: Protocols = Protocols(1 << 8);
    pub const ANY: Protocols = Protocols((1 << 9) - 1);
    pub const OF10_STD_ANY: Protocols = Protocols(0b11);
    pub const OF10_NXM_ANY: Protocols = Protocols(0b1100);
    pub const OF10_ANY: Protocols = Protocols(0b1111);
    pub const ANY_OXM: Protocols = Protocols(0b1_1110_0000);
    pub const NXM_OF11_UP: Protocols = Protocols(0b1100 | 0b1_0000 | 0b1_1110_0000);
    pub const NXM_OXM_ANY: Protocols = Protocols(0b1100 | 0b1_1110_0000);
    pub const OF11_UP: Protocols = Protocols(0b1_0000 | 0b1_1110_0000);
    pub const OF12_UP: Protocols = Protocols(0b1_1110_0000);
    pub const OF13_UP: Protocols = Protocols(0b1_1100_0000);
    pub const TID: Protocols = Protocols(0b10 | 0b1000 | 0b1_0000 | 0b1_1110_0000);

    /// Intersection.
    pub fn and(self, o: Protocols) -> Protocols {
        Protocols(self.0 & o.0)
    }
    /// Whether any protocol is in both sets.
    pub fn intersects(self, o: Protocols) -> bool {
        self.0 & o.0 != 0
    }
    /// The lowest-numbered protocol of the set, as `ovs-ofctl` picks it.
    pub fn lowest(self) -> Option<Protocols> {
        if self.0 == 0 {
            None
        } else {
            Some(Protocols(self.0 & self.0.wrapping_neg()))
        }
    }
}

/// How a field's value is written in flow text (OVS `enum mf_string`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MfFormat {
    /// Integer printed in decimal.
    Decimal,
    /// Integer printed in hexadecimal.
    Hex,
    /// `xx:xx:xx:xx:xx:xx`.
    Ethernet,
    /// Dotted quad.
    Ipv4,
    /// RFC 5952 text.
    Ipv6,
    /// OpenFlow 1.0 port number or name.
    OfpPort,
    /// OpenFlow 1.1+ 32-bit port number or name.
    OfpPortOxm,
    /// `ct_state` flags (`+trk+est`, `new|trk`).
    CtState,
    /// `no`, `yes`, `first`, `later`, `not_later`.
    Frag,
    /// TCP flags (`+syn-ack`, `syn|ack`).
    TcpFlags,
}

/// What a packet must be for a field to exist (OVS `enum mf_prereqs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Prereq {
    None,
    Ethernet,
    Arp,
    Ipv4,
    Ipv6,
    IpAny,
    VlanVid,
    Tcp,
    Udp,
    Sctp,
    Icmpv4,
    Icmpv6,
    Nd,
    NdSolicit,
    NdAdvert,
    Ct,
}

/// How a match on the field can be expressed in one OpenFlow version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expr {
    /// Not at all.
    No,
    /// Exact match only.
    Exact,
    /// Exact or CIDR prefix.
    Cidr,
    /// Any bitwise mask.
    Bitwise,
}

macro_rules! mf_enum {
    ($($v:ident),* $(,)?) => {
        /// An OpenFlow field (OVS `enum mf_field_id`), restricted to what [`crate::FlowKey`]
        /// stores.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(missing_docs)]
        pub enum Mf { $($v),* }
    };
}

mf_enum!(
    DpHash,
    RecircId,
    Metadata,
    InPort,
    InPortOxm,
    PktMark,
    CtState,
    CtZone,
    CtMark,
    CtLabel,
    CtNwProto,
    CtNwSrc,
    CtNwDst,
    CtTpSrc,
    CtTpDst,
    Reg0,
    Reg1,
    Reg2,
    Reg3,
    Reg4,
    Reg5,
    Reg6,
    Reg7,
    Reg8,
    Reg9,
    Reg10,
    Reg11,
    Reg12,
    Reg13,
    Reg14,
    Reg15,
    EthSrc,
    EthDst,
    EthType,
    VlanTci,
    DlVlan,
    VlanVid,
    DlVlanPcp,
    VlanPcp,
    Ipv4Src,
    Ipv4Dst,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Label,
    IpProto,
    IpDscp,
    IpDscpShifted,
    IpEcn,
    IpTtl,
    IpFrag,
    ArpOp,
    ArpSpa,
    ArpTpa,
    ArpSha,
    ArpTha,
    TcpSrc,
    TcpDst,
    TcpFlags,
    UdpSrc,
    UdpDst,
    SctpSrc,
    SctpDst,
    Icmpv4Type,
    Icmpv4Code,
    Icmpv6Type,
    Icmpv6Code,
    NdTarget,
    NdSll,
    NdTll,
    // conjunctive matches (issue #17).
    ConjId,
);

/// One OpenFlow field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MfDef {
    /// The field.
    pub id: Mf,
    /// Canonical OVS name (what `set_field` prints).
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// NXM name (printed by `load`/`move`), if any.
    pub nxm: Option<&'static str>,
    /// OXM name, if any.
    pub oxm: Option<&'static str>,
    /// Width in bits.
    pub n_bits: u32,
    /// Width in bytes of the value as OVS parses it.
    pub n_bytes: u32,
    /// Storage field.
    pub storage: FieldId,
    /// Bit of the storage field holding the view's bit 0.
    pub shift: u32,
    /// Value syntax.
    pub format: MfFormat,
    /// Whether arbitrary masks are allowed.
    pub maskable: bool,
    /// Prerequisites.
    pub prereq: Prereq,
    /// Whether `set_field`/`load`/`move` may write it.
    pub writable: bool,
    /// OpenFlow 1.0 standard match support.
    pub of10: Expr,
    /// OpenFlow 1.1 standard match support.
    pub of11: Expr,
    /// Whether an NXM or OXM header exists.
    pub nx: bool,
}

#[allow(clippy::too_many_arguments)]
const fn d(
    id: Mf,
    name: &'static str,
    aliases: &'static [&'static str],
    nxm: Option<&'static str>,
    oxm: Option<&'static str>,
    n_bits: u32,
    n_bytes: u32,
    storage: FieldId,
    shift: u32,
    format: MfFormat,
    maskable: bool,
    prereq: Prereq,
    writable: bool,
    of10: Expr,
    of11: Expr,
) -> MfDef {
    MfDef {
        id,
        name,
        aliases,
        nxm,
        oxm,
        n_bits,
        n_bytes,
        storage,
        shift,
        format,
        maskable,
        prereq,
        writable,
        of10,
        of11,
        nx: nxm.is_some() || oxm.is_some(),
    }
}

macro_rules! reg {
    ($id:ident, $name:literal, $nxm:literal, $st:ident) => {
        d(
            Mf::$id,
            $name,
            &[],
            Some($nxm),
            None,
            32,
            4,
            FieldId::$st,
            0,
            MfFormat::Hex,
            true,
            Prereq::None,
            true,
            Expr::No,
            Expr::No,
        )
    };
}

/// Every OpenFlow field, in [`Mf`] order.
pub static MF_TABLE: [MfDef; 70] = {
    use Expr::*;
    use FieldId as F;
    use MfFormat::*;
    use Prereq as P;
    [
        d(
            Mf::DpHash,
            "dp_hash",
            &[],
            Some("NXM_NX_DP_HASH"),
            None,
            32,
            4,
            F::DpHash,
            0,
            Hex,
            true,
            P::None,
            false,
            No,
            No,
        ),
        d(
            Mf::RecircId,
            "recirc_id",
            &[],
            Some("NXM_NX_RECIRC_ID"),
            None,
            32,
            4,
            F::RecircId,
            0,
            Decimal,
            false,
            P::None,
            false,
            No,
            No,
        ),
        d(
            Mf::Metadata,
            "metadata",
            &[],
            None,
            Some("OXM_OF_METADATA"),
            64,
            8,
            F::Metadata,
            0,
            Hex,
            true,
            P::None,
            true,
            No,
            Bitwise,
        ),
        d(
            Mf::InPort,
            "in_port",
            &[],
            Some("NXM_OF_IN_PORT"),
            None,
            16,
            2,
            F::InPort,
            0,
            OfpPort,
            false,
            P::None,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::InPortOxm,
            "in_port_oxm",
            &[],
            None,
            Some("OXM_OF_IN_PORT"),
            32,
            4,
            F::InPort,
            0,
            OfpPortOxm,
            false,
            P::None,
            true,
            No,
            Exact,
        ),
        d(
            Mf::PktMark,
            "pkt_mark",
            &[],
            Some("NXM_NX_PKT_MARK"),
            None,
            32,
            4,
            F::PktMark,
            0,
            Hex,
            true,
            P::None,
            true,
            No,
            No,
        ),
        d(
            Mf::CtState,
            "ct_state",
            &[],
            Some("NXM_NX_CT_STATE"),
            None,
            32,
            4,
            F::CtState,
            0,
            CtState,
            true,
            P::None,
            false,
            No,
            No,
        ),
        d(
            Mf::CtZone,
            "ct_zone",
            &[],
            Some("NXM_NX_CT_ZONE"),
            None,
            16,
            2,
            F::CtZone,
            0,
            Hex,
            false,
            P::None,
            false,
            No,
            No,
        ),
        d(
            Mf::CtMark,
            "ct_mark",
            &[],
            Some("NXM_NX_CT_MARK"),
            None,
            32,
            4,
            F::CtMark,
            0,
            Hex,
            true,
            P::None,
            true,
            No,
            No,
        ),
        d(
            Mf::CtLabel,
            "ct_label",
            &[],
            Some("NXM_NX_CT_LABEL"),
            None,
            128,
            16,
            F::CtLabel,
            0,
            Hex,
            true,
            P::None,
            true,
            No,
            No,
        ),
        d(
            Mf::CtNwProto,
            "ct_nw_proto",
            &[],
            Some("NXM_NX_CT_NW_PROTO"),
            None,
            8,
            1,
            F::CtNwProto,
            0,
            Decimal,
            false,
            P::Ct,
            false,
            No,
            No,
        ),
        d(
            Mf::CtNwSrc,
            "ct_nw_src",
            &[],
            Some("NXM_NX_CT_NW_SRC"),
            None,
            32,
            4,
            F::CtNwSrc,
            0,
            Ipv4,
            true,
            P::Ct,
            false,
            No,
            No,
        ),
        d(
            Mf::CtNwDst,
            "ct_nw_dst",
            &[],
            Some("NXM_NX_CT_NW_DST"),
            None,
            32,
            4,
            F::CtNwDst,
            0,
            Ipv4,
            true,
            P::Ct,
            false,
            No,
            No,
        ),
        d(
            Mf::CtTpSrc,
            "ct_tp_src",
            &[],
            Some("NXM_NX_CT_TP_SRC"),
            None,
            16,
            2,
            F::CtTpSrc,
            0,
            Decimal,
            true,
            P::Ct,
            false,
            No,
            No,
        ),
        d(
            Mf::CtTpDst,
            "ct_tp_dst",
            &[],
            Some("NXM_NX_CT_TP_DST"),
            None,
            16,
            2,
            F::CtTpDst,
            0,
            Decimal,
            true,
            P::Ct,
            false,
            No,
            No,
        ),
        reg!(Reg0, "reg0", "NXM_NX_REG0", Reg0),
        reg!(Reg1, "reg1", "NXM_NX_REG1", Reg1),
        reg!(Reg2, "reg2", "NXM_NX_REG2", Reg2),
        reg!(Reg3, "reg3", "NXM_NX_REG3", Reg3),
        reg!(Reg4, "reg4", "NXM_NX_REG4", Reg4),
        reg!(Reg5, "reg5", "NXM_NX_REG5", Reg5),
        reg!(Reg6, "reg6", "NXM_NX_REG6", Reg6),
        reg!(Reg7, "reg7", "NXM_NX_REG7", Reg7),
        reg!(Reg8, "reg8", "NXM_NX_REG8", Reg8),
        reg!(Reg9, "reg9", "NXM_NX_REG9", Reg9),
        reg!(Reg10, "reg10", "NXM_NX_REG10", Reg10),
        reg!(Reg11, "reg11", "NXM_NX_REG11", Reg11),
        reg!(Reg12, "reg12", "NXM_NX_REG12", Reg12),
        reg!(Reg13, "reg13", "NXM_NX_REG13", Reg13),
        reg!(Reg14, "reg14", "NXM_NX_REG14", Reg14),
        reg!(Reg15, "reg15", "NXM_NX_REG15", Reg15),
        d(
            Mf::EthSrc,
            "eth_src",
            &["dl_src"],
            Some("NXM_OF_ETH_SRC"),
            Some("OXM_OF_ETH_SRC"),
            48,
            6,
            F::DlSrc,
            0,
            Ethernet,
            true,
            P::Ethernet,
            true,
            Exact,
            Bitwise,
        ),
        d(
            Mf::EthDst,
            "eth_dst",
            &["dl_dst"],
            Some("NXM_OF_ETH_DST"),
            Some("OXM_OF_ETH_DST"),
            48,
            6,
            F::DlDst,
            0,
            Ethernet,
            true,
            P::Ethernet,
            true,
            Exact,
            Bitwise,
        ),
        d(
            Mf::EthType,
            "eth_type",
            &["dl_type"],
            Some("NXM_OF_ETH_TYPE"),
            Some("OXM_OF_ETH_TYPE"),
            16,
            2,
            F::DlType,
            0,
            Hex,
            false,
            P::Ethernet,
            false,
            Exact,
            Exact,
        ),
        d(
            Mf::VlanTci,
            "vlan_tci",
            &[],
            Some("NXM_OF_VLAN_TCI"),
            None,
            16,
            2,
            F::Vlan0Tci,
            0,
            Hex,
            true,
            P::Ethernet,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::DlVlan,
            "dl_vlan",
            &[],
            None,
            None,
            12,
            2,
            F::Vlan0Tci,
            0,
            Decimal,
            false,
            P::Ethernet,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::VlanVid,
            "vlan_vid",
            &[],
            None,
            Some("OXM_OF_VLAN_VID"),
            12,
            2,
            F::Vlan0Tci,
            0,
            Decimal,
            true,
            P::Ethernet,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::DlVlanPcp,
            "dl_vlan_pcp",
            &[],
            None,
            None,
            3,
            1,
            F::Vlan0Tci,
            13,
            Decimal,
            false,
            P::Ethernet,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::VlanPcp,
            "vlan_pcp",
            &[],
            None,
            Some("OXM_OF_VLAN_PCP"),
            3,
            1,
            F::Vlan0Tci,
            13,
            Decimal,
            false,
            P::VlanVid,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::Ipv4Src,
            "ip_src",
            &["nw_src"],
            Some("NXM_OF_IP_SRC"),
            Some("OXM_OF_IPV4_SRC"),
            32,
            4,
            F::NwSrc,
            0,
            Ipv4,
            true,
            P::Ipv4,
            true,
            Cidr,
            Bitwise,
        ),
        d(
            Mf::Ipv4Dst,
            "ip_dst",
            &["nw_dst"],
            Some("NXM_OF_IP_DST"),
            Some("OXM_OF_IPV4_DST"),
            32,
            4,
            F::NwDst,
            0,
            Ipv4,
            true,
            P::Ipv4,
            true,
            Cidr,
            Bitwise,
        ),
        d(
            Mf::Ipv6Src,
            "ipv6_src",
            &[],
            Some("NXM_NX_IPV6_SRC"),
            Some("OXM_OF_IPV6_SRC"),
            128,
            16,
            F::Ipv6Src,
            0,
            Ipv6,
            true,
            P::Ipv6,
            true,
            No,
            No,
        ),
        d(
            Mf::Ipv6Dst,
            "ipv6_dst",
            &[],
            Some("NXM_NX_IPV6_DST"),
            Some("OXM_OF_IPV6_DST"),
            128,
            16,
            F::Ipv6Dst,
            0,
            Ipv6,
            true,
            P::Ipv6,
            true,
            No,
            No,
        ),
        d(
            Mf::Ipv6Label,
            "ipv6_label",
            &[],
            Some("NXM_NX_IPV6_LABEL"),
            Some("OXM_OF_IPV6_FLABEL"),
            20,
            4,
            F::Ipv6Label,
            0,
            Hex,
            true,
            P::Ipv6,
            true,
            No,
            No,
        ),
        d(
            Mf::IpProto,
            "nw_proto",
            &["ip_proto"],
            Some("NXM_OF_IP_PROTO"),
            Some("OXM_OF_IP_PROTO"),
            8,
            1,
            F::NwProto,
            0,
            Decimal,
            false,
            P::IpAny,
            false,
            Exact,
            Exact,
        ),
        d(
            Mf::IpDscp,
            "nw_tos",
            &[],
            Some("NXM_OF_IP_TOS"),
            None,
            8,
            1,
            F::NwTos,
            0,
            Decimal,
            false,
            P::IpAny,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::IpDscpShifted,
            "ip_dscp",
            &[],
            None,
            Some("OXM_OF_IP_DSCP"),
            6,
            1,
            F::NwTos,
            2,
            Decimal,
            false,
            P::IpAny,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::IpEcn,
            "nw_ecn",
            &["ip_ecn"],
            Some("NXM_NX_IP_ECN"),
            Some("OXM_OF_IP_ECN"),
            2,
            1,
            F::NwTos,
            0,
            Decimal,
            false,
            P::IpAny,
            true,
            No,
            Exact,
        ),
        d(
            Mf::IpTtl,
            "nw_ttl",
            &[],
            Some("NXM_NX_IP_TTL"),
            None,
            8,
            1,
            F::NwTtl,
            0,
            Decimal,
            false,
            P::IpAny,
            true,
            No,
            No,
        ),
        d(
            Mf::IpFrag,
            "ip_frag",
            &["nw_frag"],
            Some("NXM_NX_IP_FRAG"),
            None,
            2,
            1,
            F::NwFrag,
            0,
            Frag,
            true,
            P::IpAny,
            false,
            No,
            No,
        ),
        d(
            Mf::ArpOp,
            "arp_op",
            &[],
            Some("NXM_OF_ARP_OP"),
            Some("OXM_OF_ARP_OP"),
            16,
            2,
            F::NwProto,
            0,
            Decimal,
            false,
            P::Arp,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::ArpSpa,
            "arp_spa",
            &[],
            Some("NXM_OF_ARP_SPA"),
            Some("OXM_OF_ARP_SPA"),
            32,
            4,
            F::NwSrc,
            0,
            Ipv4,
            true,
            P::Arp,
            true,
            Cidr,
            Bitwise,
        ),
        d(
            Mf::ArpTpa,
            "arp_tpa",
            &[],
            Some("NXM_OF_ARP_TPA"),
            Some("OXM_OF_ARP_TPA"),
            32,
            4,
            F::NwDst,
            0,
            Ipv4,
            true,
            P::Arp,
            true,
            Cidr,
            Bitwise,
        ),
        d(
            Mf::ArpSha,
            "arp_sha",
            &[],
            Some("NXM_NX_ARP_SHA"),
            Some("OXM_OF_ARP_SHA"),
            48,
            6,
            F::ArpSha,
            0,
            Ethernet,
            true,
            P::Arp,
            true,
            No,
            No,
        ),
        d(
            Mf::ArpTha,
            "arp_tha",
            &[],
            Some("NXM_NX_ARP_THA"),
            Some("OXM_OF_ARP_THA"),
            48,
            6,
            F::ArpTha,
            0,
            Ethernet,
            true,
            P::Arp,
            true,
            No,
            No,
        ),
        d(
            Mf::TcpSrc,
            "tcp_src",
            &["tp_src"],
            Some("NXM_OF_TCP_SRC"),
            Some("OXM_OF_TCP_SRC"),
            16,
            2,
            F::TpSrc,
            0,
            Decimal,
            true,
            P::Tcp,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::TcpDst,
            "tcp_dst",
            &["tp_dst"],
            Some("NXM_OF_TCP_DST"),
            Some("OXM_OF_TCP_DST"),
            16,
            2,
            F::TpDst,
            0,
            Decimal,
            true,
            P::Tcp,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::TcpFlags,
            "tcp_flags",
            &[],
            Some("NXM_NX_TCP_FLAGS"),
            Some("ONFOXM_ET_TCP_FLAGS"),
            12,
            2,
            F::TcpFlags,
            0,
            TcpFlags,
            true,
            P::Tcp,
            false,
            No,
            No,
        ),
        d(
            Mf::UdpSrc,
            "udp_src",
            &[],
            Some("NXM_OF_UDP_SRC"),
            Some("OXM_OF_UDP_SRC"),
            16,
            2,
            F::TpSrc,
            0,
            Decimal,
            true,
            P::Udp,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::UdpDst,
            "udp_dst",
            &[],
            Some("NXM_OF_UDP_DST"),
            Some("OXM_OF_UDP_DST"),
            16,
            2,
            F::TpDst,
            0,
            Decimal,
            true,
            P::Udp,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::SctpSrc,
            "sctp_src",
            &[],
            None,
            Some("OXM_OF_SCTP_SRC"),
            16,
            2,
            F::TpSrc,
            0,
            Decimal,
            true,
            P::Sctp,
            true,
            No,
            Exact,
        ),
        d(
            Mf::SctpDst,
            "sctp_dst",
            &[],
            None,
            Some("OXM_OF_SCTP_DST"),
            16,
            2,
            F::TpDst,
            0,
            Decimal,
            true,
            P::Sctp,
            true,
            No,
            Exact,
        ),
        d(
            Mf::Icmpv4Type,
            "icmp_type",
            &[],
            Some("NXM_OF_ICMP_TYPE"),
            Some("OXM_OF_ICMPV4_TYPE"),
            8,
            1,
            F::TpSrc,
            0,
            Decimal,
            false,
            P::Icmpv4,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::Icmpv4Code,
            "icmp_code",
            &[],
            Some("NXM_OF_ICMP_CODE"),
            Some("OXM_OF_ICMPV4_CODE"),
            8,
            1,
            F::TpDst,
            0,
            Decimal,
            false,
            P::Icmpv4,
            true,
            Exact,
            Exact,
        ),
        d(
            Mf::Icmpv6Type,
            "icmpv6_type",
            &[],
            Some("NXM_NX_ICMPV6_TYPE"),
            Some("OXM_OF_ICMPV6_TYPE"),
            8,
            1,
            F::TpSrc,
            0,
            Decimal,
            false,
            P::Icmpv6,
            true,
            No,
            No,
        ),
        d(
            Mf::Icmpv6Code,
            "icmpv6_code",
            &[],
            Some("NXM_NX_ICMPV6_CODE"),
            Some("OXM_OF_ICMPV6_CODE"),
            8,
            1,
            F::TpDst,
            0,
            Decimal,
            false,
            P::Icmpv6,
            true,
            No,
            No,
        ),
        d(
            Mf::NdTarget,
            "nd_target",
            &[],
            Some("NXM_NX_ND_TARGET"),
            Some("OXM_OF_IPV6_ND_TARGET"),
            128,
            16,
            F::NdTarget,
            0,
            Ipv6,
            true,
            P::Nd,
            true,
            No,
            No,
        ),
        d(
            Mf::NdSll,
            "nd_sll",
            &[],
            Some("NXM_NX_ND_SLL"),
            Some("OXM_OF_IPV6_ND_SLL"),
            48,
            6,
            F::ArpSha,
            0,
            Ethernet,
            true,
            P::NdSolicit,
            true,
            No,
            No,
        ),
        d(
            Mf::NdTll,
            "nd_tll",
            &[],
            Some("NXM_NX_ND_TLL"),
            Some("OXM_OF_IPV6_ND_TLL"),
            48,
            6,
            F::ArpTha,
            0,
            Ethernet,
            true,
            P::NdAdvert,
            true,
            No,
            No,
        ),
        // conjunctive matches (issue #17): OVS `MFF_CONJ_ID`, read-only, exact only.
        d(
            Mf::ConjId,
            "conj_id",
            &[],
            Some("NXM_NX_CONJ_ID"),
            None,
            32,
            4,
            F::ConjId,
            0,
            Decimal,
            false,
            P::None,
            false,
            No,
            No,
        ),
    ]
};

impl Mf {
    /// The field's table entry.
    pub fn def(self) -> &'static MfDef {
        &MF_TABLE[self as usize]
    }

    /// Every field.
    pub fn all() -> impl Iterator<Item = Mf> {
        MF_TABLE.iter().map(|d| d.id)
    }

    /// Looks a field up by its OVS name or alias (`mf_from_name`), e.g. `dl_src`, `reg3`.
    pub fn from_name(name: &str) -> Option<Mf> {
        MF_TABLE
            .iter()
            .find(|d| d.name == name || d.aliases.contains(&name))
            .map(|d| d.id)
    }

    /// Looks a field up by NXM or OXM name (`NXM_OF_ETH_SRC`, `OXM_OF_METADATA`), accepting a
    /// trailing `_W` as OVS does.
    pub fn from_nxm_name(name: &str) -> Option<Mf> {
        let name = name.strip_suffix("_W").unwrap_or(name);
        MF_TABLE
            .iter()
            .find(|d| d.nxm == Some(name) || d.oxm == Some(name))
            .map(|d| d.id)
    }

    /// Register `n` (0..16).
    pub fn reg(n: usize) -> Option<Mf> {
        if n < 16 {
            Some(MF_TABLE[Mf::Reg0 as usize + n].id)
        } else {
            None
        }
    }

    /// The name `load`/`move` print for it (OVS `mf_format_subfield`): the NXM name, else the
    /// OXM name, else the plain name.
    pub fn subfield_name(self) -> &'static str {
        let d = self.def();
        d.nxm.or(d.oxm).unwrap_or(d.name)
    }

    /// All-ones value of the field's width.
    pub fn max(self) -> u128 {
        let b = self.def().n_bits;
        if b >= 128 {
            u128::MAX
        } else {
            (1u128 << b) - 1
        }
    }

    /// All-ones value of the field's byte width (what OVS calls an exact mask).
    pub fn byte_max(self) -> u128 {
        let b = self.def().n_bytes * 8;
        if b >= 128 {
            u128::MAX
        } else {
            (1u128 << b) - 1
        }
    }

    /// Which protocols can express a match on the field with `mask` (OVS
    /// `usable_protocols_exact/cidr/bitwise`). `mask` is in field units.
    pub fn usable(self, mask: u128) -> Protocols {
        let d = self.def();
        if mask == 0 {
            return Protocols::ANY;
        }
        if matches!(self, Mf::DlVlan | Mf::DlVlanPcp) {
            return if mask == self.byte_max() {
                Protocols::ANY
            } else {
                Protocols::NONE
            };
        }
        // (of10, of11, nx) membership, as OVS's extract-ofp-fields computes it.
        let mut set = (d.of10 != Expr::No, d.of11 != Expr::No, d.nx);
        if mask != self.byte_max() {
            if !d.maskable {
                return Protocols::NONE;
            }
            let cidr = d.of10 == Expr::Cidr && is_cidr(mask, d.n_bytes * 8);
            if !cidr {
                set.0 = false;
            }
            if d.of10 == Expr::Exact {
                set.0 = false;
            }
            if d.of11 == Expr::Exact {
                set.1 = false;
            }
        }
        match set {
            (true, _, _) => Protocols::ANY,
            (false, true, true) => Protocols::NXM_OF11_UP,
            (false, false, true) => Protocols::NXM_OXM_ANY,
            (false, true, false) => Protocols::OF11_STD,
            (false, false, false) => Protocols::NONE,
        }
    }
}

/// Whether `mask` (of `width` bits) is a prefix mask: ones from the top, then zeros.
pub fn is_cidr(mask: u128, width: u32) -> bool {
    let full = if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let inv = !mask & full;
    inv & inv.wrapping_add(1) == 0
}

impl core::fmt::Display for Mf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.def().name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_in_enum_order() {
        for (i, d) in MF_TABLE.iter().enumerate() {
            assert_eq!(d.id as usize, i, "{}", d.name);
        }
    }

    #[test]
    fn views_fit_their_storage() {
        for d in MF_TABLE.iter() {
            let st = d.storage.bits();
            // Views wider than their storage are the documented OVS borrowings.
            if d.shift + d.n_bits > st {
                assert!(
                    matches!(d.id, Mf::ArpOp | Mf::InPortOxm),
                    "{} overflows {}",
                    d.name,
                    d.storage
                );
            }
        }
    }

    #[test]
    fn names_resolve() {
        assert_eq!(Mf::from_name("dl_src"), Some(Mf::EthSrc));
        assert_eq!(Mf::from_name("reg7"), Some(Mf::Reg7));
        assert_eq!(Mf::from_nxm_name("NXM_OF_ETH_SRC_W"), Some(Mf::EthSrc));
        assert_eq!(Mf::from_nxm_name("OXM_OF_METADATA"), Some(Mf::Metadata));
        assert_eq!(Mf::Metadata.subfield_name(), "OXM_OF_METADATA");
        assert!(is_cidr(0xffff_ff00, 32) && !is_cidr(0xff00_ff00, 32) && is_cidr(0, 32));
    }
}
