//! Shared test helper: decode a frame through every layer this crate knows, exercising every
//! getter and iterator, and round-trip each repr (parse → emit → parse must be equal).
//! Used on random bytes (must never panic) and on oracle-built frames (must succeed).

#![allow(dead_code)]

use wire::constants::{ethertype, ip_proto};
use wire::ipv6ext::{Ipv6ExtIter, Ipv6ExtRepr};
use wire::*;

/// What [`decode_all`] reached.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub l3: Option<u16>,
    pub l4: Option<u8>,
    pub l4_parsed: bool,
}

fn rt_l2(frame: &[u8]) -> Result<(L2Repr, usize)> {
    let (repr, off) = L2Repr::parse_bytes(frame)?;
    let mut buf = vec![0u8; off];
    repr.emit_into(&mut buf[..]).expect("L2 emit");
    assert_eq!(L2Repr::parse_bytes(&buf).expect("L2 reparse"), (repr, off));
    Ok((repr, off))
}

fn touch_ipv4<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) {
    let _ = (
        p.version(),
        p.header_len(),
        p.dscp(),
        p.ecn(),
        p.total_len(),
        p.ident(),
        p.reserved_flag(),
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
        p.ttl(),
        p.protocol(),
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
        p.options(),
        p.payload(),
        p.verify_checksum(),
    );
}

/// Decodes L3 (by ethertype) and below. Panics only on a round-trip mismatch.
pub fn decode_l3(ethertype_: u16, l3: &[u8]) -> Decoded {
    let mut d = Decoded {
        l3: Some(ethertype_),
        ..Decoded::default()
    };
    match ethertype_ {
        ethertype::IPV4 => {
            let Ok(ip) = Ipv4Packet::new_checked(l3) else {
                return d;
            };
            touch_ipv4(&ip);
            let Ok(repr) = Ipv4Repr::parse(&ip) else {
                return d;
            };
            let mut buf = vec![0u8; repr.total_len()];
            let v = repr.emit_into(&mut buf[..]).expect("ipv4 emit");
            assert!(v.verify_checksum());
            let v2 = Ipv4Packet::new_checked(&buf[..]).expect("ipv4 reparse view");
            assert_eq!(Ipv4Repr::parse(&v2).expect("ipv4 reparse"), repr);
            d.l4 = Some(repr.protocol);
            if ip.frag_offset() == 0 {
                let pseudo = PseudoHeader::V4 {
                    src: repr.src_addr,
                    dst: repr.dst_addr,
                };
                d.l4_parsed = decode_l4(repr.protocol, ip.payload(), &pseudo);
            }
        }
        ethertype::IPV6 => {
            let Ok(ip) = Ipv6Packet::new_checked(l3) else {
                return d;
            };
            let _ = (
                ip.version(),
                ip.traffic_class(),
                ip.flow_label(),
                ip.payload_len(),
            );
            let repr = Ipv6Repr::parse(&ip).expect("ipv6 repr parse is infallible on a view");
            let mut buf = vec![0u8; 40 + repr.payload_len];
            repr.emit_into(&mut buf[..]).expect("ipv6 emit");
            let v2 = Ipv6Packet::new_checked(&buf[..]).expect("ipv6 reparse view");
            assert_eq!(Ipv6Repr::parse(&v2).expect("ipv6 reparse"), repr);
            // Walk with the iterator; re-emit each header and compare bytes.
            for ext in Ipv6ExtIter::new(ip.next_header(), ip.payload()) {
                let Ok(ext) = ext else { break };
                let mut out = vec![0u8; ext.bytes.len()];
                if let Some(f) = ext.fragment {
                    f.emit_into(&mut out[..]).expect("frag emit");
                    // The two reserved fields are not kept.
                    let mut want = ext.bytes.to_vec();
                    want[1] = 0;
                    want[3] &= 0xf9;
                    assert_eq!(out, want);
                } else {
                    let h = Ipv6ExtHeader::new_checked(ext.bytes).expect("ext view");
                    let _ = (h.routing_type(), h.segments_left(), h.payload());
                    let r = Ipv6ExtRepr::parse(&h).expect("ext repr");
                    r.emit_into(&mut out[..]).expect("ext emit");
                    assert_eq!(out, ext.bytes);
                }
            }
            let Ok(sum) = ip.extensions() else {
                return d;
            };
            d.l4 = Some(sum.final_next_header);
            if !sum.is_later_fragment() {
                let pseudo = PseudoHeader::V6 {
                    src: repr.src_addr,
                    dst: repr.dst_addr,
                };
                let l4 = ip.payload().get(sum.payload_offset..).unwrap_or(&[]);
                d.l4_parsed = decode_l4(sum.final_next_header, l4, &pseudo);
            }
        }
        ethertype::ARP => {
            let Ok(p) = ArpPacket::new_checked(l3) else {
                return d;
            };
            let _ = (
                p.hardware_type(),
                p.protocol_type(),
                p.operation(),
                p.sender_hardware_addr(),
                p.sender_protocol_addr(),
                p.target_hardware_addr(),
                p.target_protocol_addr(),
                p.payload(),
            );
            if let Ok(r) = ArpRepr::parse(&p) {
                let mut buf = [0u8; 28];
                let v = r.emit_into(&mut buf[..]).expect("arp emit");
                assert_eq!(ArpRepr::parse(&v).expect("arp reparse"), r);
                d.l4_parsed = true;
            }
        }
        _ => {}
    }
    d
}

/// Decodes a transport segment; returns whether its repr parsed. Checksums are computed but
/// need not verify.
pub fn decode_l4(proto: u8, l4: &[u8], pseudo: &PseudoHeader) -> bool {
    match proto {
        ip_proto::TCP => {
            let Ok(p) = TcpPacket::new_checked(l4) else {
                return false;
            };
            let _ = (
                p.src_port(),
                p.dst_port(),
                p.seq_number(),
                p.ack_number(),
                p.flags(),
                p.reserved_bits(),
                p.window_len(),
                p.checksum(),
                p.urgent_at(),
                p.verify_checksum(pseudo),
            );
            for o in p.options_iter().map_while(Result::ok) {
                let mut b = [0u8; 40];
                let n = o.emit(&mut b).expect("tcp option emit");
                assert_eq!(n, o.buffer_len());
            }
            let Ok(r) = TcpRepr::parse(&p) else {
                return false;
            };
            let mut buf = vec![0u8; r.buffer_len()];
            let v = r.emit_into(&mut buf[..], pseudo).expect("tcp emit");
            assert!(v.verify_checksum(pseudo));
            let r2 = TcpRepr::parse(&v).expect("tcp reparse");
            assert_eq!(r2, r);
            true
        }
        ip_proto::UDP => {
            let Ok(p) = UdpPacket::new_checked(l4) else {
                return false;
            };
            let _ = (p.len(), p.checksum(), p.verify_checksum(pseudo));
            let r = UdpRepr::parse(&p).expect("udp repr parse is infallible on a view");
            let mut buf = vec![0u8; r.buffer_len()];
            let v = r.emit_into(&mut buf[..], pseudo).expect("udp emit");
            assert!(v.verify_checksum(pseudo));
            assert_eq!(UdpRepr::parse(&v).expect("udp reparse"), r);
            true
        }
        ip_proto::ICMP => {
            let Ok(p) = Icmpv4Packet::new_checked(l4) else {
                return false;
            };
            let _ = (p.checksum(), p.verify_checksum());
            let r = Icmpv4Repr::parse(&p).expect("icmpv4 parse is infallible on a view");
            let mut buf = vec![0u8; r.buffer_len()];
            let v = r.emit_into(&mut buf[..]).expect("icmpv4 emit");
            assert!(v.verify_checksum());
            assert_eq!(Icmpv4Repr::parse(&v).expect("icmpv4 reparse"), r);
            true
        }
        ip_proto::ICMPV6 => {
            let PseudoHeader::V6 { src, dst } = *pseudo else {
                return false;
            };
            let Ok(p) = Icmpv6Packet::new_checked(l4) else {
                return false;
            };
            let _ = (
                p.checksum(),
                p.target_addr(),
                p.router_flag(),
                p.nd_options_iter().count(),
                p.verify_checksum(src, dst),
            );
            let Ok(r) = Icmpv6Repr::parse(&p) else {
                return false;
            };
            let mut buf = vec![0u8; r.buffer_len()];
            let v = r.emit_into(&mut buf[..], src, dst).expect("icmpv6 emit");
            assert!(v.verify_checksum(src, dst));
            let v2 = Icmpv6Packet::new_checked(&buf[..]).expect("icmpv6 reparse view");
            assert_eq!(Icmpv6Repr::parse(&v2).expect("icmpv6 reparse"), r);
            true
        }
        ip_proto::SCTP => {
            let Ok(p) = SctpPacket::new_checked(l4) else {
                return false;
            };
            let _ = (p.checksum(), p.verify_checksum());
            let r = SctpRepr::parse(&p).expect("sctp parse is infallible on a view");
            let mut buf = vec![0u8; r.buffer_len()];
            let v = r.emit_into(&mut buf[..]).expect("sctp emit");
            assert!(v.verify_checksum());
            assert_eq!(SctpRepr::parse(&v).expect("sctp reparse"), r);
            true
        }
        _ => false,
    }
}

/// Decodes a whole Ethernet frame.
pub fn decode_all(frame: &[u8]) -> Decoded {
    let Ok((l2, off)) = rt_l2(frame) else {
        return Decoded::default();
    };
    if let Ok(f) = EthernetFrame::new_checked(frame) {
        let r = EthernetRepr::parse(&f).expect("eth parse");
        let mut b = [0u8; 14];
        let v = r.emit_into(&mut b[..]).expect("eth emit");
        assert_eq!(EthernetRepr::parse(&v).expect("eth reparse"), r);
    }
    decode_l3(l2.ethertype, &frame[off..])
}
