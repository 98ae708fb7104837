//! [`Match`]: an OpenFlow match, a [`FlowKey`] value under a [`FlowMask`].
//!
//! Setting an OpenFlow field ([`Match::set_field_masked`]) follows OVS `mf_set()` exactly,
//! including its view semantics: `dl_vlan=5` sets the TCI's VID *and* CFI bits, `ip_dscp=N`
//! writes `N << 2` into `nw_tos`, `arp_op` lands in `nw_proto`, `icmp_type` in `tp_src`, exact
//! `tcp_flags`/`ipv6_label` matches use an all-ones 16/32-bit mask, and so on. Values are in
//! field units (a view's bit 0 is bit 0 of the value).
//!
//! Invariant: every value bit outside the mask is zero (`key == key.masked(&mask)`); all setters
//! keep it.

use crate::field::{FRAG_ANY, FRAG_LATER, FieldId, VLAN_CFI};
use crate::key::{FlowKey, FlowMask};
use crate::ofp::fields::{Mf, Prereq};

/// `dl_type` of IPv4.
pub const ETH_TYPE_IP: u16 = 0x0800;
/// `dl_type` of IPv6.
pub const ETH_TYPE_IPV6: u16 = 0x86dd;
/// `dl_type` of ARP.
pub const ETH_TYPE_ARP: u16 = 0x0806;
/// `dl_type` of RARP.
pub const ETH_TYPE_RARP: u16 = 0x8035;
/// IP protocol numbers.
#[allow(missing_docs)]
pub mod ipproto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
    pub const SCTP: u8 = 132;
}

const VLAN_VID_MASK: u16 = 0x0fff;
const VLAN_PCP_MASK: u16 = 0xe000;

/// An OpenFlow match: the packets whose key equals `key` on every bit of `mask`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    /// Values (zero outside `mask`).
    pub key: FlowKey,
    /// Significant bits.
    pub mask: FlowMask,
}

impl core::fmt::Debug for Match {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Match({})", crate::text::format_match(self))
    }
}

impl Match {
    /// The match that matches every packet.
    pub fn catchall() -> Match {
        Match::default()
    }

    /// Value of a storage field.
    pub fn value(&self, f: FieldId) -> u128 {
        f.get(&self.key)
    }

    /// Mask of a storage field.
    pub fn mask_of(&self, f: FieldId) -> u128 {
        f.get_mask(&self.mask)
    }

    /// Sets a storage field to `value` under `mask` (value bits outside mask are dropped).
    pub fn set_storage(&mut self, f: FieldId, value: u128, mask: u128) {
        f.set(&mut self.key, value & mask);
        f.set_mask(&mut self.mask, mask);
    }

    /// Wildcards a storage field.
    pub fn clear_storage(&mut self, f: FieldId) {
        self.set_storage(f, 0, 0);
    }

    /// `dl_type` value (0 when wildcarded).
    pub fn dl_type(&self) -> u16 {
        self.value(FieldId::DlType) as u16
    }

    /// `nw_proto` value (0 when wildcarded).
    pub fn nw_proto(&self) -> u8 {
        self.value(FieldId::NwProto) as u8
    }

    /// Whether `dl_type` is IPv4 or IPv6.
    pub fn is_ip_any(&self) -> bool {
        matches!(self.dl_type(), ETH_TYPE_IP | ETH_TYPE_IPV6)
    }

    /// Reads an OpenFlow field as `(value, mask)` in field units.
    pub fn get_field(&self, mf: Mf) -> (u128, u128) {
        let d = mf.def();
        let width = if d.n_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << d.n_bits) - 1
        };
        let v = (self.value(d.storage) >> d.shift) & width;
        let m = (self.mask_of(d.storage) >> d.shift) & width;
        (v, m)
    }

    /// Matches `mf` exactly on `value` (OVS `mf_set_value`).
    pub fn set_field(&mut self, mf: Mf, value: u128) {
        self.set_field_masked(mf, value, mf.byte_max());
    }

    /// Matches `mf` on `value` under `mask` (OVS `mf_set`): an all-ones mask (of the field's
    /// byte width) is an exact match, an all-zero mask wildcards the field. Non-maskable fields
    /// given another mask are left alone (the parser rejects that case first).
    pub fn set_field_masked(&mut self, mf: Mf, value: u128, mask: u128) {
        let mask = mask & mf.byte_max();
        let value = value & mf.byte_max();
        if mask == 0 {
            self.set_field_wild(mf);
            return;
        }
        let exact = mask == mf.byte_max();
        let tci = self.value(FieldId::Vlan0Tci) as u16;
        let tci_m = self.mask_of(FieldId::Vlan0Tci) as u16;
        let tos = self.value(FieldId::NwTos) as u8;
        let tos_m = self.mask_of(FieldId::NwTos) as u8;
        match mf {
            Mf::InPort | Mf::InPortOxm => {
                let port = if mf == Mf::InPortOxm {
                    crate::ofp::OfPort::from_ofp11(value as u32).map_or(0, |p| p.0)
                } else {
                    value as u16
                };
                self.set_storage(FieldId::InPort, u128::from(port), 0xffff_ffff);
            }
            Mf::CtState => self.set_storage(FieldId::CtState, value & 0xff, mask & 0xff),
            Mf::VlanTci => self.set_storage(FieldId::Vlan0Tci, value, mask),
            Mf::DlVlan => {
                let v = value as u16;
                if v == 0xffff {
                    self.set_storage(FieldId::Vlan0Tci, 0, 0xffff);
                } else {
                    let t = (tci & !VLAN_VID_MASK) | (v & VLAN_VID_MASK) | VLAN_CFI;
                    let m = tci_m | VLAN_VID_MASK | VLAN_CFI;
                    self.set_storage(FieldId::Vlan0Tci, u128::from(t), u128::from(m));
                }
            }
            Mf::VlanVid => {
                let m = (mask as u16) & (VLAN_VID_MASK | VLAN_CFI);
                let t = (tci & !(VLAN_VID_MASK | VLAN_CFI)) | (value as u16 & m);
                let nm = m | (tci_m & VLAN_PCP_MASK);
                self.set_storage(FieldId::Vlan0Tci, u128::from(t), u128::from(nm));
            }
            Mf::DlVlanPcp | Mf::VlanPcp => {
                let t =
                    (tci & !VLAN_PCP_MASK) | (((value as u16) << 13) & VLAN_PCP_MASK) | VLAN_CFI;
                let m = tci_m | VLAN_CFI | VLAN_PCP_MASK;
                self.set_storage(FieldId::Vlan0Tci, u128::from(t), u128::from(m));
            }
            Mf::IpDscp | Mf::IpDscpShifted => {
                let v = if mf == Mf::IpDscpShifted {
                    (value as u8) << 2
                } else {
                    value as u8
                };
                let t = (tos & !0xfc) | (v & 0xfc);
                self.set_storage(FieldId::NwTos, u128::from(t), u128::from(tos_m | 0xfc));
            }
            Mf::IpEcn => {
                let t = (tos & !0x03) | (value as u8 & 0x03);
                self.set_storage(FieldId::NwTos, u128::from(t), u128::from(tos_m | 0x03));
            }
            Mf::IpFrag => {
                if exact {
                    let m = self.mask_of(FieldId::NwFrag) | 0x03;
                    self.set_storage(FieldId::NwFrag, value, m);
                } else {
                    self.set_storage(FieldId::NwFrag, value & mask, mask & 0x03);
                }
            }
            Mf::ArpOp => self.set_storage(FieldId::NwProto, value & 0xff, 0xff),
            Mf::Icmpv4Type | Mf::Icmpv6Type => self.set_storage(FieldId::TpSrc, value, 0xffff),
            Mf::Icmpv4Code | Mf::Icmpv6Code => self.set_storage(FieldId::TpDst, value, 0xffff),
            Mf::Ipv6Label => {
                if exact || mask & 0xfffff == 0xfffff {
                    self.set_storage(FieldId::Ipv6Label, value, 0xffff_ffff);
                } else {
                    self.set_storage(FieldId::Ipv6Label, value, mask);
                }
            }
            Mf::TcpFlags => self.set_storage(FieldId::TcpFlags, value, mask),
            _ => {
                let d = mf.def();
                self.set_storage(d.storage, value << d.shift, mask << d.shift);
            }
        }
    }

    /// Wildcards `mf` (OVS `mf_set_wild`).
    pub fn set_field_wild(&mut self, mf: Mf) {
        let tci = self.value(FieldId::Vlan0Tci) as u16;
        let tci_m = self.mask_of(FieldId::Vlan0Tci) as u16;
        let tos = self.value(FieldId::NwTos);
        let tos_m = self.mask_of(FieldId::NwTos);
        match mf {
            Mf::DlVlan | Mf::VlanVid => {
                if tci_m & VLAN_PCP_MASK != 0 {
                    self.set_storage(
                        FieldId::Vlan0Tci,
                        u128::from(tci & !VLAN_VID_MASK),
                        u128::from(tci_m & !VLAN_VID_MASK),
                    );
                } else {
                    self.clear_storage(FieldId::Vlan0Tci);
                }
            }
            Mf::DlVlanPcp | Mf::VlanPcp => {
                if tci_m & VLAN_VID_MASK != 0 {
                    self.set_storage(
                        FieldId::Vlan0Tci,
                        u128::from(tci & !VLAN_PCP_MASK),
                        u128::from(tci_m & !VLAN_PCP_MASK),
                    );
                } else {
                    self.clear_storage(FieldId::Vlan0Tci);
                }
            }
            Mf::IpDscp | Mf::IpDscpShifted => {
                self.set_storage(FieldId::NwTos, tos & !0xfc, tos_m & !0xfc)
            }
            Mf::IpEcn => self.set_storage(FieldId::NwTos, tos & !0x03, tos_m & !0x03),
            _ => self.clear_storage(mf.def().storage),
        }
    }

    /// Whether the match's values satisfy `mf`'s prerequisites (OVS `mf_are_prereqs_ok`; like
    /// OVS, only values are consulted).
    pub fn prereqs_ok(&self, mf: Mf) -> bool {
        let dl = self.dl_type();
        let proto = self.nw_proto();
        let later = self.value(FieldId::NwFrag) as u8 & FRAG_LATER != 0;
        let tp_src = self.value(FieldId::TpSrc) as u16;
        let tp_dst = self.value(FieldId::TpDst) as u16;
        let icmpv6 = dl == ETH_TYPE_IPV6 && proto == ipproto::ICMPV6;
        let nd = icmpv6 && (tp_src == 135 || tp_src == 136) && tp_dst == 0;
        match mf.def().prereq {
            Prereq::None | Prereq::Ethernet => true,
            Prereq::Arp => dl == ETH_TYPE_ARP || dl == ETH_TYPE_RARP,
            Prereq::Ipv4 => dl == ETH_TYPE_IP,
            Prereq::Ipv6 => dl == ETH_TYPE_IPV6,
            Prereq::IpAny => self.is_ip_any(),
            Prereq::VlanVid => self.value(FieldId::Vlan0Tci) as u16 & VLAN_CFI != 0,
            Prereq::Tcp => self.is_ip_any() && proto == ipproto::TCP && !later,
            Prereq::Udp => self.is_ip_any() && proto == ipproto::UDP && !later,
            Prereq::Sctp => self.is_ip_any() && proto == ipproto::SCTP && !later,
            Prereq::Icmpv4 => dl == ETH_TYPE_IP && proto == ipproto::ICMP,
            Prereq::Icmpv6 => icmpv6,
            Prereq::Nd => nd,
            Prereq::NdSolicit => nd && tp_src == 135,
            Prereq::NdAdvert => nd && tp_src == 136,
            Prereq::Ct => self.ct_valid(),
        }
    }

    /// OVS `is_ct_valid` on a match: `ct_state` names a state implying a conntrack entry, or
    /// matches `+trk` together with an explicit `-inv`.
    pub fn ct_valid(&self) -> bool {
        use crate::field::ct_state::*;
        let st = self.value(FieldId::CtState) as u32;
        let m = self.mask_of(FieldId::CtState) as u32;
        st & (NEW | ESTABLISHED | RELATED | REPLY_DIR | SRC_NAT | DST_NAT) != 0
            || (st & TRACKED != 0 && m & INVALID != 0 && st & INVALID == 0)
    }

    /// OVS `ofputil_normalize_match`: wildcards every field whose prerequisites the match does
    /// not establish (what an OpenFlow 1.0 switch does with, e.g., `tp_src=80` without `tcp`).
    /// Returns whether anything changed.
    pub fn normalize(&mut self) -> bool {
        let before = *self;
        let dl = self.dl_type();
        let proto = self.nw_proto();
        let (mut nw_addr, mut tp, mut nw_proto, mut ipvx) = (false, false, false, false);
        let (mut sha, mut tha, mut ipv6, mut nd) = (false, false, false, false);
        if dl == ETH_TYPE_IP {
            nw_proto = true;
            ipvx = true;
            nw_addr = true;
            tp = matches!(
                proto,
                ipproto::TCP | ipproto::UDP | ipproto::SCTP | ipproto::ICMP
            );
        } else if dl == ETH_TYPE_IPV6 {
            nw_proto = true;
            ipvx = true;
            ipv6 = true;
            if matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP) {
                tp = true;
            } else if proto == ipproto::ICMPV6 {
                tp = true;
                let t = self.value(FieldId::TpSrc);
                if t == 135 {
                    nd = true;
                    sha = true;
                } else if t == 136 {
                    nd = true;
                    tha = true;
                }
            }
        } else if dl == ETH_TYPE_ARP || dl == ETH_TYPE_RARP {
            nw_proto = true;
            nw_addr = true;
            sha = true;
            tha = true;
        }
        if !nw_addr {
            self.clear_storage(FieldId::NwSrc);
            self.clear_storage(FieldId::NwDst);
        }
        if !tp {
            self.clear_storage(FieldId::TpSrc);
            self.clear_storage(FieldId::TpDst);
        }
        if !nw_proto {
            self.clear_storage(FieldId::NwProto);
        }
        if !ipvx {
            self.clear_storage(FieldId::NwTos);
            self.clear_storage(FieldId::NwTtl);
        }
        if !sha {
            self.clear_storage(FieldId::ArpSha);
        }
        if !tha {
            self.clear_storage(FieldId::ArpTha);
        }
        if !ipv6 {
            self.clear_storage(FieldId::Ipv6Src);
            self.clear_storage(FieldId::Ipv6Dst);
            self.clear_storage(FieldId::Ipv6Label);
        }
        if !nd {
            self.clear_storage(FieldId::NdTarget);
        }
        *self != before
    }

    /// Whether the first VLAN tag's TCI value has the CFI ("tag present") bit.
    pub fn has_vlan(&self) -> bool {
        self.value(FieldId::Vlan0Tci) as u16 & VLAN_CFI != 0
    }

    /// Whether the match looks at `nw_frag`'s "any fragment" bit with value 1.
    pub fn is_fragment(&self) -> bool {
        self.value(FieldId::NwFrag) as u8 & FRAG_ANY != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_follow_ovs() {
        let mut m = Match::catchall();
        m.set_field(Mf::DlVlan, 5);
        assert_eq!(m.value(FieldId::Vlan0Tci), 0x1005);
        assert_eq!(m.mask_of(FieldId::Vlan0Tci), 0x1fff);
        m.set_field(Mf::DlVlanPcp, 3);
        assert_eq!(m.value(FieldId::Vlan0Tci), 0x7005);
        assert_eq!(m.mask_of(FieldId::Vlan0Tci), 0xffff);
        m.set_field(Mf::IpDscpShifted, 63);
        assert_eq!(m.value(FieldId::NwTos), 0xfc);
        m.set_field(Mf::IpEcn, 3);
        assert_eq!(m.value(FieldId::NwTos), 0xff);
        m.set_field_wild(Mf::IpDscp);
        assert_eq!((m.value(FieldId::NwTos), m.mask_of(FieldId::NwTos)), (3, 3));
        assert_eq!(m.key, m.key.masked(&m.mask));
    }

    #[test]
    fn normalize_drops_orphans() {
        let mut m = Match::catchall();
        m.set_field(Mf::TcpSrc, 80);
        assert!(m.normalize());
        assert_eq!(m, Match::catchall());
        m.set_field(Mf::EthType, u128::from(ETH_TYPE_IP));
        m.set_field(Mf::IpProto, 6);
        m.set_field(Mf::TcpSrc, 80);
        assert!(!m.normalize());
    }
}
