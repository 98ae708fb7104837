//! NXM and OXM matches: a [`Match`] as a sequence of field TLVs, both ways.
//!
//! Decoding ([`decode_tlvs`]) applies each TLV with the registry's `mf_set` semantics
//! ([`Match::set_field_masked`]) after checking, as OVS does, that the field is known, its
//! length is right, a mask is only given for a maskable field, the value is valid for the
//! field, the field was not already given, and its prerequisites are met by the TLVs before
//! it. Encoding ([`encode_match`]) writes the fields in the fixed order OVS's `nx_put_raw`
//! uses, which is what makes a re-encoded match byte-identical to what `ovs-ofctl` sent:
//! metadata (`dp_hash`, `recirc_id`, `in_port`), Ethernet, VLAN, L3/L4 by `dl_type` and
//! `nw_proto`, ARP, registers, `pkt_mark`, conntrack, `metadata`, then the cookie filter.
//!
//! `decode_oxm_match` / `encode_oxm_match` (crate-internal) add OpenFlow 1.2+'s `ofp_match`
//! envelope (`type = OFPMT_OXM`, length, TLVs, zero padding to 8), or 1.1's standard match.
//!
//! An explicit Ethernet `packet_type` TLV is accepted and dropped (the model knows no other
//! packet type), so such a match re-encodes without it.
//!
//! Invariant: for every match `m` that decodes, `decode(encode(m)) == m` (property-tested).

use crate::codec::{Rd, Wr, be_uint};
use crate::error::{Error, Result, invalid, unsupported};
use crate::fields::{self, HeaderDef, Target};
use crate::header::version;
use flow::field::FieldId;
use flow::ofp::matching::{ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_RARP, ipproto};
use flow::ofp::{Match, Mf};

/// Which header set an encoder uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Nicira NXM (OpenFlow 1.0 with Nicira extensions, and Nicira messages in any version).
    Nxm,
    /// OXM of the given wire version (OpenFlow 1.2+).
    Oxm(u8),
}

/// A cookie filter carried in an NXM match (`NXM_NX_COOKIE_W`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CookieFilter {
    /// Cookie value.
    pub cookie: u64,
    /// Cookie mask.
    pub mask: u64,
}

fn ones(n_bytes: usize) -> u128 {
    if n_bytes >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * n_bytes)) - 1
    }
}

/// Decodes the TLVs filling all of `b`.
pub fn decode_tlvs(b: &[u8]) -> Result<(Match, Option<CookieFilter>)> {
    let mut r = Rd::new(b, "match TLV");
    let mut m = Match::catchall();
    let mut seen = [false; 128];
    let mut seen_xreg = [false; 8];
    let mut cookie = None;
    while !r.is_empty() {
        let rh = fields::read_header(&mut r)?;
        let d = fields::resolve(&rh)?;
        let n = usize::from(d.len);
        let value = be_uint(r.bytes(n)?);
        let mask = if rh.has_mask {
            be_uint(r.bytes(n)?)
        } else {
            ones(n)
        };
        match d.target {
            Target::Cookie => {
                if cookie.is_some() {
                    return Err(invalid("duplicate field NXM_NX_COOKIE"));
                }
                cookie = Some(CookieFilter {
                    cookie: (value & mask) as u64,
                    mask: mask as u64,
                });
            }
            Target::PacketType => {
                // The model only knows Ethernet packets; OVS writes an explicit Ethernet
                // packet type in some matches. Anything else is not representable.
                if value != 0 || mask != ones(n) {
                    return Err(unsupported(format!(
                        "packet_type 0x{value:08x}/0x{mask:08x} (only Ethernet)"
                    )));
                }
            }
            Target::XReg(i) => {
                let i = usize::from(i);
                if seen_xreg[i] || seen[Mf::Reg0 as usize + 2 * i] {
                    return Err(invalid(format!("duplicate field {}", d.name)));
                }
                seen_xreg[i] = true;
                let (hi, lo) = (Mf::Reg0 as usize + 2 * i, Mf::Reg0 as usize + 2 * i + 1);
                seen[hi] = true;
                seen[lo] = true;
                let regs = (Mf::reg(2 * i), Mf::reg(2 * i + 1));
                let (Some(rh_), Some(rl)) = regs else {
                    return Err(unsupported(d.name));
                };
                m.set_field_masked(rh_, value >> 32, mask >> 32);
                m.set_field_masked(rl, value & 0xffff_ffff, mask & 0xffff_ffff);
            }
            Target::Mf(mf) => {
                apply(&mut m, d, mf, value, mask, rh.has_mask, &mut seen)?;
            }
        }
    }
    Ok((m, cookie))
}

fn apply(
    m: &mut Match,
    d: &HeaderDef,
    mf: Mf,
    value: u128,
    mask: u128,
    has_mask: bool,
    seen: &mut [bool; 128],
) -> Result<()> {
    let def = mf.def();
    // Fields sharing one piece of storage conflict with each other.
    let conflicts: &[Mf] = match mf {
        Mf::InPort => &[Mf::InPortOxm],
        Mf::InPortOxm => &[Mf::InPort],
        Mf::VlanTci => &[Mf::VlanVid, Mf::VlanPcp],
        Mf::VlanVid | Mf::VlanPcp => &[Mf::VlanTci],
        Mf::IpDscp => &[Mf::IpDscpShifted],
        Mf::IpDscpShifted => &[Mf::IpDscp],
        _ => &[],
    };
    if seen[mf as usize] || conflicts.iter().any(|c| seen[*c as usize]) {
        return Err(invalid(format!("duplicate field {}", d.name)));
    }
    if has_mask && !def.maskable {
        return Err(invalid(format!("mask on non-maskable field {}", d.name)));
    }
    let bad_value = match mf {
        Mf::IpDscp => value & 0x03 != 0,
        Mf::IpDscpShifted => value > 0x3f,
        Mf::IpEcn => value > 3,
        Mf::VlanVid => value > 0x1fff,
        Mf::VlanPcp => value > 7,
        Mf::Ipv6Label => value > 0xfffff,
        Mf::IpFrag => value > 3,
        Mf::TcpFlags => value > 0xfff,
        Mf::ArpOp => value > 0xff,
        _ => false,
    };
    if bad_value {
        return Err(invalid(format!("value 0x{value:x} for {}", d.name)));
    }
    if !m.prereqs_ok(mf) {
        return Err(invalid(format!("prerequisites of {} not met", d.name)));
    }
    seen[mf as usize] = true;
    m.set_field_masked(mf, value & mask, mask);
    Ok(())
}

/// Writes `m` (and an optional cookie filter) as TLVs in OVS's order.
/// A packet-in's metadata as `NXT_PACKET_IN2` carries it (OVS `oxm_put_raw`): `in_port` as
/// the 32-bit `OXM_OF_IN_PORT`, every other field by its Nicira (or OXM-only) header.
pub(crate) fn encode_packet_in_metadata(w: &mut Wr, m: &Match) {
    let mut rest = *m;
    if m.mask_of(FieldId::InPort) != 0 {
        let d = fields::oxm_header(Mf::InPortOxm, version::OF12)
            .unwrap_or_else(|| unreachable!("OXM_OF_IN_PORT has a header"));
        fields::write_header(w, d, false);
        let p = flow::ofp::OfPort(m.value(FieldId::InPort) as u16).to_ofp11();
        w.uint(u128::from(p), usize::from(d.len));
        rest.clear_storage(FieldId::InPort);
    }
    encode_tlvs(w, &rest, Dialect::Nxm, None);
}

pub(crate) fn encode_tlvs(w: &mut Wr, m: &Match, dialect: Dialect, cookie: Option<CookieFilter>) {
    let oxm = matches!(dialect, Dialect::Oxm(_));
    let ver = match dialect {
        Dialect::Oxm(v) => v,
        Dialect::Nxm => 0,
    };
    let hdr = |mf: Mf| -> &'static HeaderDef {
        let d = if oxm {
            fields::oxm_header(mf, ver)
        } else {
            fields::nxm_header(mf)
        };
        d.unwrap_or_else(|| unreachable!("{mf:?} has a header"))
    };
    // Value and mask of a storage field.
    let vm = |f: FieldId| (m.value(f), m.mask_of(f));
    let put = |w: &mut Wr, mf: Mf, v: u128, msk: u128| {
        if msk == 0 {
            return;
        }
        let d = hdr(mf);
        let n = usize::from(d.len);
        let full = ones(n);
        let msk = msk & full;
        if msk == 0 {
            return;
        }
        if msk == full {
            fields::write_header(w, d, false);
            w.uint(v & full, n);
        } else {
            fields::write_header(w, d, true);
            w.uint(v & msk, n);
            w.uint(msk, n);
        }
    };
    let exact = |w: &mut Wr, mf: Mf, v: u128| put(w, mf, v, u128::MAX);

    let (v, k) = vm(FieldId::DpHash);
    put(w, Mf::DpHash, v, k);
    let (v, k) = vm(FieldId::RecircId);
    if k != 0 {
        exact(w, Mf::RecircId, v);
    }
    let (v, k) = vm(FieldId::ConjId);
    if k != 0 {
        exact(w, Mf::ConjId, v);
    }
    let (v, k) = vm(FieldId::InPort);
    if k != 0 {
        if oxm {
            exact(
                w,
                Mf::InPortOxm,
                u128::from(flow::ofp::OfPort(v as u16).to_ofp11()),
            );
        } else {
            exact(w, Mf::InPort, v);
        }
    }
    let (v, k) = vm(FieldId::DlSrc);
    put(w, Mf::EthSrc, v, k);
    let (v, k) = vm(FieldId::DlDst);
    put(w, Mf::EthDst, v, k);
    let (v, k) = vm(FieldId::DlType);
    put(w, Mf::EthType, v, k);
    let (tci, tci_m) = vm(FieldId::Vlan0Tci);
    // OVS `nx_put_raw`: OXM has no TCI field, so a match goes out as VLAN_VID (VID and
    // CFI bits, masked unless both are whole) plus an exact VLAN_PCP when a VID is matched
    // and any PCP bit is: lossy for TCI matches OXM cannot say (OVS is too).
    if oxm {
        let vid = tci & 0x1fff;
        let vid_m = tci_m & 0x1fff;
        // VID and CFI are the whole field: exact.
        put(
            w,
            Mf::VlanVid,
            vid,
            if vid_m == 0x1fff { 0xffff } else { vid_m },
        );
        if vid != 0 && tci_m & 0xe000 != 0 {
            exact(w, Mf::VlanPcp, (tci >> 13) & 7);
        }
    } else {
        put(w, Mf::VlanTci, tci, tci_m);
    }
    let dl = m.dl_type();
    if dl == ETH_TYPE_IP || dl == ETH_TYPE_IPV6 {
        encode_ip(w, m, oxm, &put);
    } else if dl == ETH_TYPE_ARP || dl == ETH_TYPE_RARP {
        let (v, k) = vm(FieldId::NwProto);
        if k != 0 {
            exact(w, Mf::ArpOp, v);
        }
        let (v, k) = vm(FieldId::NwSrc);
        put(w, Mf::ArpSpa, v, k);
        let (v, k) = vm(FieldId::NwDst);
        put(w, Mf::ArpTpa, v, k);
        let (v, k) = vm(FieldId::ArpSha);
        put(w, Mf::ArpSha, v, k);
        let (v, k) = vm(FieldId::ArpTha);
        put(w, Mf::ArpTha, v, k);
    }
    if ver >= version::OF15 {
        for i in 0..8u8 {
            let (hv, hm) = Mf::reg(2 * usize::from(i)).map_or((0, 0), |r| m.get_field(r));
            let (lv, lm) = Mf::reg(2 * usize::from(i) + 1).map_or((0, 0), |r| m.get_field(r));
            let (v, k) = (hv << 32 | lv, hm << 32 | lm);
            if k == 0 {
                continue;
            }
            let d = fields::HEADERS
                .iter()
                .find(|d| d.target == Target::XReg(i))
                .unwrap_or_else(|| unreachable!("xreg headers exist"));
            let full = ones(8);
            fields::write_header(w, d, k != full);
            w.uint(v & k, 8);
            if k != full {
                w.uint(k, 8);
            }
        }
    } else {
        for r in (0..16).filter_map(Mf::reg) {
            let (v, k) = m.get_field(r);
            put(w, r, v, k);
        }
    }
    for (mf, f) in [
        (Mf::PktMark, FieldId::PktMark),
        (Mf::CtState, FieldId::CtState),
        (Mf::CtZone, FieldId::CtZone),
        (Mf::CtMark, FieldId::CtMark),
        (Mf::CtLabel, FieldId::CtLabel),
        (Mf::CtNwSrc, FieldId::CtNwSrc),
        (Mf::CtNwDst, FieldId::CtNwDst),
    ] {
        let (v, k) = vm(f);
        put(w, mf, v, k);
    }
    let (v, k) = vm(FieldId::CtNwProto);
    if k != 0 {
        exact(w, Mf::CtNwProto, v);
    }
    let (v, k) = vm(FieldId::CtTpSrc);
    put(w, Mf::CtTpSrc, v, k);
    let (v, k) = vm(FieldId::CtTpDst);
    put(w, Mf::CtTpDst, v, k);
    let (v, k) = vm(FieldId::Metadata);
    put(w, Mf::Metadata, v, k);
    if let Some(c) = cookie.filter(|c| c.mask != 0) {
        let d = fields::lookup(fields::NXM_NX, 30, 0)
            .unwrap_or_else(|| unreachable!("cookie header exists"));
        let full = c.mask == u64::MAX;
        fields::write_header(w, d, !full);
        w.u64(c.cookie & c.mask);
        if !full {
            w.u64(c.mask);
        }
    }
}

fn encode_ip(w: &mut Wr, m: &Match, oxm: bool, put: &dyn Fn(&mut Wr, Mf, u128, u128)) {
    let vm = |f: FieldId| (m.value(f), m.mask_of(f));
    let exact = |w: &mut Wr, mf: Mf, v: u128| put(w, mf, v, u128::MAX);
    let dl = m.dl_type();
    if dl == ETH_TYPE_IP {
        let (v, k) = vm(FieldId::NwSrc);
        put(w, Mf::Ipv4Src, v, k);
        let (v, k) = vm(FieldId::NwDst);
        put(w, Mf::Ipv4Dst, v, k);
    } else {
        let (v, k) = vm(FieldId::Ipv6Src);
        put(w, Mf::Ipv6Src, v, k);
        let (v, k) = vm(FieldId::Ipv6Dst);
        put(w, Mf::Ipv6Dst, v, k);
    }
    let (v, k) = vm(FieldId::NwFrag);
    let k = k & 3;
    put(w, Mf::IpFrag, v, if k == 3 { 0xff } else { k });
    let (tos, tos_m) = vm(FieldId::NwTos);
    if tos_m & 0xfc != 0 {
        if oxm {
            exact(w, Mf::IpDscpShifted, (tos & 0xfc) >> 2);
        } else {
            exact(w, Mf::IpDscp, tos & 0xfc);
        }
    }
    if tos_m & 0x03 != 0 {
        exact(w, Mf::IpEcn, tos & 0x03);
    }
    let (v, k) = vm(FieldId::NwTtl);
    if k != 0 {
        exact(w, Mf::IpTtl, v);
    }
    let (v, k) = vm(FieldId::Ipv6Label);
    put(w, Mf::Ipv6Label, v, k);
    let (proto, proto_m) = vm(FieldId::NwProto);
    if proto_m == 0 {
        return;
    }
    exact(w, Mf::IpProto, proto);
    let (sv, sk) = vm(FieldId::TpSrc);
    let (dv, dk) = vm(FieldId::TpDst);
    match proto as u8 {
        ipproto::TCP => {
            put(w, Mf::TcpSrc, sv, sk);
            put(w, Mf::TcpDst, dv, dk);
            let (v, k) = vm(FieldId::TcpFlags);
            put(w, Mf::TcpFlags, v, k);
        }
        ipproto::UDP => {
            put(w, Mf::UdpSrc, sv, sk);
            put(w, Mf::UdpDst, dv, dk);
        }
        ipproto::SCTP => {
            put(w, Mf::SctpSrc, sv, sk);
            put(w, Mf::SctpDst, dv, dk);
        }
        ipproto::ICMP if dl == ETH_TYPE_IP => {
            if sk != 0 {
                exact(w, Mf::Icmpv4Type, sv);
            }
            if dk != 0 {
                exact(w, Mf::Icmpv4Code, dv);
            }
        }
        ipproto::ICMPV6 if dl == ETH_TYPE_IPV6 => {
            if sk != 0 {
                exact(w, Mf::Icmpv6Type, sv);
            }
            if dk != 0 {
                exact(w, Mf::Icmpv6Code, dv);
            }
            if (sv == 135 || sv == 136) && dv == 0 {
                let (v, k) = vm(FieldId::NdTarget);
                put(w, Mf::NdTarget, v, k);
                if sv == 135 {
                    let (v, k) = vm(FieldId::ArpSha);
                    put(w, Mf::NdSll, v, k);
                } else {
                    let (v, k) = vm(FieldId::ArpTha);
                    put(w, Mf::NdTll, v, k);
                }
            }
        }
        _ => {}
    }
}

/// `OFPMT_OXM`.
pub const OFPMT_OXM: u16 = 1;
/// `OFPMT_STANDARD` (OpenFlow 1.1).
pub const OFPMT_STANDARD: u16 = 0;

/// Reads the `ofp_match` of an OpenFlow 1.1+ message of wire version `ver`: 1.1's standard
/// match ([`crate::ofmatch11`]), or from 1.2 an OXM match (type, length, TLVs, padding to 8).
pub(crate) fn decode_oxm_match(r: &mut Rd<'_>, ver: u8) -> Result<Match> {
    if ver < version::OF12 {
        return crate::ofmatch11::decode(r);
    }
    let typ = r.peek_u16(0)?;
    let len = usize::from(r.peek_u16(2)?);
    if typ == OFPMT_STANDARD {
        return Err(unsupported("OpenFlow 1.1 standard match (OFPMT_STANDARD)"));
    }
    if typ != OFPMT_OXM {
        return Err(invalid(format!("match type {typ}")));
    }
    if len < 4 {
        return Err(Error::BadLength {
            what: "ofp_match",
            len,
        });
    }
    let mut body = r.sub(len.next_multiple_of(8), "ofp_match")?;
    body.skip(4)?;
    let tlvs = body.bytes(len - 4)?;
    let (m, cookie) = decode_tlvs(tlvs)?;
    if cookie.is_some() {
        return Err(invalid("NXM_NX_COOKIE in an OXM match"));
    }
    Ok(m)
}

/// Writes the `ofp_match` of an OpenFlow 1.1+ message of wire version `ver` (standard in
/// 1.1, OXM from 1.2).
pub(crate) fn encode_oxm_match(w: &mut Wr, m: &Match, ver: u8) {
    if ver < version::OF12 {
        return crate::ofmatch11::encode(w, m);
    }
    let start = w.len();
    w.u16(OFPMT_OXM);
    w.u16(0);
    encode_tlvs(w, m, Dialect::Oxm(ver), None);
    let len = w.len() - start;
    w.patch_u16(start + 2, len as u16);
    w.pad8_from(start);
}

/// Reads `len` bytes of NXM TLVs followed by padding to 8 (Nicira messages).
pub(crate) fn decode_nxm_padded(
    r: &mut Rd<'_>,
    len: usize,
) -> Result<(Match, Option<CookieFilter>)> {
    let mut body = r.sub(len.next_multiple_of(8), "NXM match")?;
    decode_tlvs(body.bytes(len)?)
}

/// Writes NXM TLVs padded to 8; returns the unpadded length.
pub(crate) fn encode_nxm_padded(w: &mut Wr, m: &Match, cookie: Option<CookieFilter>) -> usize {
    let start = w.len();
    encode_tlvs(w, m, Dialect::Nxm, cookie);
    let len = w.len() - start;
    w.pad8_from(start);
    len
}

/// `m` as NXM/OXM TLVs (no envelope, no padding).
pub fn encode_match(m: &Match, dialect: Dialect) -> Vec<u8> {
    let mut w = Wr::new();
    encode_tlvs(&mut w, m, dialect, None);
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(h: u32, v: &[u8]) -> Vec<u8> {
        let mut b = h.to_be_bytes().to_vec();
        b.extend_from_slice(v);
        b
    }

    #[test]
    fn ovs_rules_for_tlvs() {
        let eth_type_ip = tlv(0x0000_0602, &[0x08, 0x00]);
        let proto_tcp = tlv(0x0000_0c01, &[6]);
        let tcp_dst = tlv(0x0000_1402, &[0, 80]);
        let ok: Vec<u8> = [eth_type_ip.clone(), proto_tcp.clone(), tcp_dst.clone()].concat();
        let (m, c) = decode_tlvs(&ok).unwrap();
        assert!(c.is_none());
        assert_eq!(flow::text::format_match(&m), "tcp,tp_dst=80");
        assert_eq!(encode_match(&m, Dialect::Nxm), ok);
        // Prerequisites are checked in order.
        let e = decode_tlvs(&[tcp_dst.clone(), eth_type_ip.clone(), proto_tcp].concat());
        assert!(matches!(e, Err(Error::Invalid(ref s)) if s.contains("prerequisites")));
        // Duplicates, masks on non-maskable fields, bad lengths, unknown fields.
        let dup = [eth_type_ip.clone(), eth_type_ip.clone()].concat();
        assert!(matches!(decode_tlvs(&dup), Err(Error::Invalid(ref s)) if s.contains("duplicate")));
        let masked_type = tlv(0x0000_0704, &[8, 0, 0xff, 0xff]);
        assert!(matches!(decode_tlvs(&masked_type), Err(Error::Invalid(_))));
        assert!(matches!(
            decode_tlvs(&tlv(0x0000_0603, &[8, 0, 0])),
            Err(Error::BadLength { .. })
        ));
        assert!(matches!(
            decode_tlvs(&tlv(0x0001_fe04, &[0, 0, 0, 0])),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            decode_tlvs(&eth_type_ip[..5]),
            Err(Error::Truncated { .. })
        ));
    }
}
