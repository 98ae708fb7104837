//! Golden frames: hand-written byte arrays (checksums computed by an independent byte-wise
//! script) parsed to the expected reprs, and the expected reprs emitted back to the same
//! bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::constants::{ethertype, ip_proto};
use wire::ipv6ext::Ipv6ExtIter;
use wire::*;

// ETH_IPV4_UDP: 47 bytes
const ETH_IPV4_UDP: [u8; 47] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x21, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xa5, 0x44, 0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8,
    0x01, 0x02, 0x04, 0xd2, 0x00, 0x35, 0x00, 0x0d, 0x33, 0xa7, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

// QINQ_IPV4OPT_TCP_SYN: 86 bytes
const QINQ_IPV4OPT_TCP_SYN: [u8; 86] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x88, 0xa8, 0x60, 0x64,
    0x81, 0x00, 0x10, 0xc8, 0x08, 0x00, 0x46, 0xb9, 0x00, 0x40, 0xab, 0xcd, 0x40, 0x00, 0x3f, 0x06,
    0xe6, 0x2a, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x94, 0x04, 0x00, 0x00, 0x9c, 0x40,
    0x00, 0x50, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x00, 0xa0, 0xc2, 0xff, 0xff, 0xf5, 0x09,
    0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
];

// ARP_REQUEST: 42 bytes
const ARP_REQUEST: [u8; 42] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x06, 0x00, 0x01,
    0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xc0, 0xa8, 0x01, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x02,
];

// IPV4_FRAGMENT: 50 bytes
const IPV4_FRAGMENT: [u8; 50] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x24, 0x00, 0x07, 0x20, 0xb9, 0x40, 0x11, 0x01, 0xe6, 0xac, 0x10, 0x00, 0x01, 0xac, 0x10,
    0x00, 0x02, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d,
    0x0e, 0x0f,
];

// ICMPV4_ECHO: 50 bytes
const ICMPV4_ECHO: [u8; 50] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x24, 0x00, 0x01, 0x00, 0x00, 0x40, 0x01, 0x64, 0xd4, 0x0a, 0x01, 0x01, 0x01, 0x0a, 0x01,
    0x01, 0x02, 0x08, 0x00, 0x24, 0x21, 0x42, 0x42, 0x00, 0x07, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66,
    0x67, 0x68,
];

// IPV6_NS: 86 bytes
const IPV6_NS: [u8; 86] = [
    0x33, 0x33, 0xff, 0x00, 0x00, 0x02, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64, 0x77,
    0x88, 0xff, 0xfe, 0x99, 0xaa, 0xbb, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0xff, 0x00, 0x00, 0x02, 0x87, 0x00, 0x1c, 0xc8, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01,
    0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x01,
    0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
];

// IPV6_NA: 86 bytes
const IPV6_NA: [u8; 86] = [
    0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0x00, 0x25, 0xda, 0x60, 0x00, 0x00, 0x00, 0x20, 0x01,
    0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x01,
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55,
];

// IPV6_EXT_UDP: 89 bytes
const IPV6_EXT_UDP: [u8; 89] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x86, 0xdd, 0x62, 0xe1,
    0x23, 0x45, 0x00, 0x23, 0x00, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x3c, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00,
    0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x01, 0xca, 0xfe, 0xba, 0xbe, 0x13, 0x88,
    0x17, 0x70, 0x00, 0x0b, 0x86, 0xf1, 0x78, 0x79, 0x7a,
];

// IPV6_SCTP_INIT: 86 bytes
const IPV6_SCTP_INIT: [u8; 86] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x84, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0f, 0x1c, 0x0f, 0x1c, 0x00, 0x00, 0x00, 0x00, 0x74, 0x1c,
    0x10, 0x5d, 0x01, 0x00, 0x00, 0x14, 0x11, 0x22, 0x33, 0x44, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0a,
    0x00, 0x0a, 0x00, 0x00, 0x00, 0x01,
];

// IPV6_TCP_DATA: 92 bytes
const IPV6_TCP_DATA: [u8; 92] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x26, 0x06, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x30, 0x39, 0x00, 0x50, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00,
    0x07, 0xd0, 0x51, 0xd8, 0x04, 0x00, 0x33, 0xa5, 0x00, 0x00, 0x47, 0x45, 0x54, 0x20, 0x2f, 0x20,
    0x48, 0x54, 0x54, 0x50, 0x2f, 0x31, 0x2e, 0x30, 0x0d, 0x0a, 0x0d, 0x0a,
];

const D: EthernetAddress = EthernetAddress([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
const S: EthernetAddress = EthernetAddress([0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);

fn l2(dst: EthernetAddress, src: EthernetAddress, ethertype: u16) -> L2Repr {
    L2Repr {
        dst_addr: dst,
        src_addr: src,
        outer_vlan: None,
        inner_vlan: None,
        ethertype,
    }
}

fn v4(a: [u8; 4]) -> Ipv4Addr {
    Ipv4Addr::from(a)
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn ipv4_repr(src: [u8; 4], dst: [u8; 4], protocol: u8, payload_len: usize) -> Ipv4Repr {
    Ipv4Repr {
        src_addr: v4(src),
        dst_addr: v4(dst),
        protocol,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        options: OptionBytes::EMPTY,
        payload_len,
    }
}

fn ipv6_repr(src: &str, dst: &str, next_header: u8, payload_len: usize) -> Ipv6Repr {
    Ipv6Repr {
        src_addr: v6(src),
        dst_addr: v6(dst),
        next_header,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
        payload_len,
    }
}

/// Parses the L2 header, checks it, returns the L3 bytes.
fn check_l2(frame: &[u8], want: L2Repr) -> &[u8] {
    let (got, off) = L2Repr::parse_bytes(frame).unwrap();
    assert_eq!(got, want);
    let mut out = vec![0u8; off];
    want.emit_into(&mut out[..]).unwrap();
    assert_eq!(out, frame[..off]);
    &frame[off..]
}

#[test]
fn eth_ipv4_udp() {
    let l3 = check_l2(&ETH_IPV4_UDP, l2(D, S, ethertype::IPV4));
    let ip = Ipv4Packet::new_checked(l3).unwrap();
    assert!(ip.verify_checksum());
    let want_ip = Ipv4Repr {
        ident: 0x1234,
        dont_frag: true,
        ..ipv4_repr([192, 168, 1, 1], [192, 168, 1, 2], ip_proto::UDP, 13)
    };
    assert_eq!(Ipv4Repr::parse(&ip).unwrap(), want_ip);
    let pseudo = PseudoHeader::V4 {
        src: want_ip.src_addr,
        dst: want_ip.dst_addr,
    };
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert!(udp.verify_checksum(&pseudo));
    let want_udp = UdpRepr {
        src_port: 1234,
        dst_port: 53,
        payload: b"hello",
    };
    assert_eq!(UdpRepr::parse(&udp).unwrap(), want_udp);

    let mut out = vec![0u8; ETH_IPV4_UDP.len()];
    l2(D, S, ethertype::IPV4).emit_into(&mut out[..]).unwrap();
    want_ip.emit_into(&mut out[14..]).unwrap();
    want_udp.emit_into(&mut out[34..], &pseudo).unwrap();
    assert_eq!(out, ETH_IPV4_UDP);
}

#[test]
fn qinq_ipv4_options_tcp_syn() {
    let want_l2 = L2Repr {
        outer_vlan: Some(VlanTag {
            tpid: ethertype::QINQ,
            pcp: 3,
            dei: false,
            vid: 100,
        }),
        inner_vlan: Some(VlanTag {
            tpid: ethertype::VLAN,
            pcp: 0,
            dei: true,
            vid: 200,
        }),
        ..l2(D, S, ethertype::IPV4)
    };
    let l3 = check_l2(&QINQ_IPV4OPT_TCP_SYN, want_l2);
    // The single-tag view too.
    let tag = VlanHeader::new_checked(&QINQ_IPV4OPT_TCP_SYN[14..]).unwrap();
    assert_eq!(
        VlanRepr::parse(&tag).unwrap(),
        VlanRepr {
            pcp: 3,
            dei: false,
            vid: 100,
            ethertype: ethertype::VLAN
        }
    );

    let ip = Ipv4Packet::new_checked(l3).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.header_len(), 24);
    let want_ip = Ipv4Repr {
        ttl: 63,
        dscp: 46,
        ecn: 1,
        ident: 0xabcd,
        dont_frag: true,
        options: OptionBytes::from_slice(&[0x94, 4, 0, 0]).unwrap(),
        ..ipv4_repr([10, 0, 0, 1], [10, 0, 0, 2], ip_proto::TCP, 40)
    };
    assert_eq!(Ipv4Repr::parse(&ip).unwrap(), want_ip);
    let pseudo = PseudoHeader::V4 {
        src: want_ip.src_addr,
        dst: want_ip.dst_addr,
    };
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert!(tcp.verify_checksum(&pseudo));
    let opts: Vec<TcpOption<'_>> = tcp.options_iter().map(|o| o.unwrap()).collect();
    assert_eq!(
        opts,
        [
            TcpOption::MaxSegmentSize(1460),
            TcpOption::SackPermitted,
            TcpOption::Timestamps {
                tsval: 0x0102_0304,
                tsecr: 0
            },
            TcpOption::NoOperation,
            TcpOption::WindowScale(7),
        ]
    );
    // Build the same option bytes with TcpOption::emit.
    let mut ob = [0u8; 20];
    let mut n = 0;
    for o in &opts {
        n += o.emit(&mut ob[n..]).unwrap();
    }
    assert_eq!(n, 20);
    let want_tcp = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq_number: 0xdead_beef,
        ack_number: 0,
        flags: TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR,
        window_len: 65535,
        urgent_at: 0,
        options: OptionBytes::from_slice(&ob).unwrap(),
        payload: &[],
    };
    assert_eq!(TcpRepr::parse(&tcp).unwrap(), want_tcp);
    assert_eq!(format!("{:?}", want_tcp.flags), "SYN|ECE|CWR");

    let mut out = vec![0u8; QINQ_IPV4OPT_TCP_SYN.len()];
    want_l2.emit_into(&mut out[..]).unwrap();
    want_ip.emit_into(&mut out[22..]).unwrap();
    want_tcp.emit_into(&mut out[46..], &pseudo).unwrap();
    assert_eq!(out, QINQ_IPV4OPT_TCP_SYN);
}

#[test]
fn arp_request() {
    let l3 = check_l2(
        &ARP_REQUEST,
        l2(EthernetAddress::BROADCAST, S, ethertype::ARP),
    );
    let p = ArpPacket::new_checked(l3).unwrap();
    let want = ArpRepr {
        operation: constants::arp::OP_REQUEST,
        sender_hardware_addr: S,
        sender_protocol_addr: v4([192, 168, 1, 1]),
        target_hardware_addr: EthernetAddress::ZERO,
        target_protocol_addr: v4([192, 168, 1, 2]),
    };
    assert_eq!(ArpRepr::parse(&p).unwrap(), want);
    let mut out = [0u8; 28];
    want.emit_into(&mut out[..]).unwrap();
    assert_eq!(out, l3);
}

#[test]
fn ipv4_fragment() {
    let l3 = check_l2(&IPV4_FRAGMENT, l2(D, S, ethertype::IPV4));
    let ip = Ipv4Packet::new_checked(l3).unwrap();
    assert!(ip.verify_checksum());
    assert!(ip.is_fragment());
    let want = Ipv4Repr {
        ident: 7,
        more_frags: true,
        frag_offset: 1480,
        ..ipv4_repr([172, 16, 0, 1], [172, 16, 0, 2], ip_proto::UDP, 16)
    };
    assert_eq!(Ipv4Repr::parse(&ip).unwrap(), want);
    assert_eq!(ip.payload(), (0u8..16).collect::<Vec<_>>());
    let mut out = l3.to_vec();
    out[..20].fill(0);
    want.emit_into(&mut out[..]).unwrap();
    assert_eq!(out, l3);
}

#[test]
fn icmpv4_echo() {
    let l3 = check_l2(&ICMPV4_ECHO, l2(D, S, ethertype::IPV4));
    let ip = Ipv4Packet::new_checked(l3).unwrap();
    let want_ip = Ipv4Repr {
        ident: 1,
        ..ipv4_repr([10, 1, 1, 1], [10, 1, 1, 2], ip_proto::ICMP, 16)
    };
    assert_eq!(Ipv4Repr::parse(&ip).unwrap(), want_ip);
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum());
    let want = Icmpv4Repr::EchoRequest {
        ident: 0x4242,
        seq_no: 7,
        data: b"abcdefgh",
    };
    assert_eq!(Icmpv4Repr::parse(&icmp).unwrap(), want);
    let mut out = [0u8; 16];
    want.emit_into(&mut out[..]).unwrap();
    assert_eq!(out, ip.payload());
}

#[test]
fn ipv6_neighbor_solicit() {
    let l3 = check_l2(
        &IPV6_NS,
        l2("33:33:ff:00:00:02".parse().unwrap(), S, ethertype::IPV6),
    );
    let ip = Ipv6Packet::new_checked(l3).unwrap();
    let want_ip = ipv6_repr(
        "fe80::6477:88ff:fe99:aabb",
        "ff02::1:ff00:2",
        ip_proto::ICMPV6,
        32,
    );
    assert_eq!(Ipv6Repr::parse(&ip).unwrap(), want_ip);
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(want_ip.src_addr, want_ip.dst_addr));
    let want = Icmpv6Repr::NeighborSolicit {
        target_addr: v6("2001:db8::2"),
        source_lladdr: Some(S),
    };
    assert_eq!(Icmpv6Repr::parse(&icmp).unwrap(), want);
    let mut out = vec![0u8; IPV6_NS.len()];
    l2("33:33:ff:00:00:02".parse().unwrap(), S, ethertype::IPV6)
        .emit_into(&mut out[..])
        .unwrap();
    want_ip.emit_into(&mut out[14..]).unwrap();
    want.emit_into(&mut out[54..], want_ip.src_addr, want_ip.dst_addr)
        .unwrap();
    assert_eq!(out, IPV6_NS);
}

#[test]
fn ipv6_neighbor_advert() {
    let l3 = check_l2(&IPV6_NA, l2(S, D, ethertype::IPV6));
    let ip = Ipv6Packet::new_checked(l3).unwrap();
    let want_ip = ipv6_repr("2001:db8::2", "2001:db8::1", ip_proto::ICMPV6, 32);
    assert_eq!(Ipv6Repr::parse(&ip).unwrap(), want_ip);
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(want_ip.src_addr, want_ip.dst_addr));
    let want = Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: true,
        override_: true,
        target_addr: v6("2001:db8::2"),
        target_lladdr: Some(D),
    };
    assert_eq!(Icmpv6Repr::parse(&icmp).unwrap(), want);
    let opts: Vec<_> = icmp.nd_options_iter().collect();
    assert_eq!(opts, [Ok(NdOption::TargetLinkLayerAddr(D))]);
    let mut out = [0u8; 32];
    want.emit_into(&mut out[..], want_ip.src_addr, want_ip.dst_addr)
        .unwrap();
    assert_eq!(out, ip.payload());
}

#[test]
fn ipv6_extension_headers() {
    let l3 = check_l2(&IPV6_EXT_UDP, l2(D, S, ethertype::IPV6));
    let ip = Ipv6Packet::new_checked(l3).unwrap();
    let want_ip = Ipv6Repr {
        hop_limit: 64,
        traffic_class: 0x2e,
        flow_label: 0x12345,
        ..ipv6_repr("2001:db8::1", "2001:db8::2", ip_proto::HOPOPT, 35)
    };
    assert_eq!(Ipv6Repr::parse(&ip).unwrap(), want_ip);
    let sum = ip.extensions().unwrap();
    let frag = Ipv6FragmentRepr {
        next_header: ip_proto::UDP,
        frag_offset: 0,
        more_frags: true,
        ident: 0xcafe_babe,
    };
    assert_eq!(
        sum,
        Ipv6ExtSummary {
            final_next_header: ip_proto::UDP,
            payload_offset: 24,
            fragment: Some(frag),
            ext_count: 3,
        }
    );
    let kinds: Vec<(u8, usize)> = Ipv6ExtIter::new(ip.next_header(), ip.payload())
        .map(|e| e.map(|e| (e.kind, e.offset)).unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            (ip_proto::HOPOPT, 0),
            (ip_proto::IPV6_OPTS, 8),
            (ip_proto::IPV6_FRAG, 16)
        ]
    );
    // Each header re-emitted from its repr.
    let payload = ip.payload();
    let hbh = Ipv6ExtHeader::new_checked(payload).unwrap();
    let hbh_repr = Ipv6ExtRepr::parse(&hbh).unwrap();
    assert_eq!(hbh_repr.next_header, ip_proto::IPV6_OPTS);
    assert_eq!(hbh_repr.data, [1, 4, 0, 0, 0, 0]);
    let fh = Ipv6FragmentHeader::new_checked(&payload[16..]).unwrap();
    assert_eq!(Ipv6FragmentRepr::parse(&fh).unwrap(), frag);
    let mut out = [0u8; 24];
    hbh_repr.emit_into(&mut out[..8]).unwrap();
    let dst = Ipv6ExtHeader::new_checked(&payload[8..]).unwrap();
    Ipv6ExtRepr::parse(&dst)
        .unwrap()
        .emit_into(&mut out[8..16])
        .unwrap();
    frag.emit_into(&mut out[16..]).unwrap();
    assert_eq!(out, payload[..24]);

    let udp = UdpPacket::new_checked(&payload[24..]).unwrap();
    let pseudo = PseudoHeader::V6 {
        src: want_ip.src_addr,
        dst: want_ip.dst_addr,
    };
    assert!(udp.verify_checksum(&pseudo));
    assert_eq!(
        UdpRepr::parse(&udp).unwrap(),
        UdpRepr {
            src_port: 5000,
            dst_port: 6000,
            payload: b"xyz"
        }
    );
}

#[test]
fn ipv6_sctp_init() {
    let l3 = check_l2(&IPV6_SCTP_INIT, l2(D, S, ethertype::IPV6));
    let ip = Ipv6Packet::new_checked(l3).unwrap();
    assert_eq!(
        Ipv6Repr::parse(&ip).unwrap(),
        ipv6_repr("2001:db8::1", "2001:db8::2", ip_proto::SCTP, 32)
    );
    let sctp = SctpPacket::new_checked(ip.payload()).unwrap();
    assert!(sctp.verify_checksum());
    let repr = SctpRepr::parse(&sctp).unwrap();
    assert_eq!(
        (repr.src_port, repr.dst_port, repr.verification_tag),
        (3868, 3868, 0)
    );
    assert_eq!(repr.payload, &ip.payload()[12..]);
    let mut out = [0u8; 32];
    repr.emit_into(&mut out[..]).unwrap();
    assert_eq!(out, ip.payload());
    // A flipped chunk byte breaks the CRC.
    out[20] ^= 1;
    assert!(!SctpPacket::new_checked(&out[..]).unwrap().verify_checksum());
}

#[test]
fn ipv6_tcp_data() {
    let l3 = check_l2(&IPV6_TCP_DATA, l2(D, S, ethertype::IPV6));
    let ip = Ipv6Packet::new_checked(l3).unwrap();
    let want_ip = Ipv6Repr {
        hop_limit: 64,
        ..ipv6_repr("2001:db8::1", "2001:db8::2", ip_proto::TCP, 38)
    };
    assert_eq!(Ipv6Repr::parse(&ip).unwrap(), want_ip);
    let pseudo = PseudoHeader::V6 {
        src: want_ip.src_addr,
        dst: want_ip.dst_addr,
    };
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert!(tcp.verify_checksum(&pseudo));
    let want = TcpRepr {
        src_port: 12345,
        dst_port: 80,
        seq_number: 1000,
        ack_number: 2000,
        flags: TcpFlags::NS | TcpFlags::CWR | TcpFlags::ECE | TcpFlags::ACK | TcpFlags::PSH,
        window_len: 1024,
        urgent_at: 0,
        options: OptionBytes::EMPTY,
        payload: b"GET / HTTP/1.0\r\n\r\n",
    };
    assert_eq!(TcpRepr::parse(&tcp).unwrap(), want);
    let mut out = vec![0u8; want.buffer_len()];
    want.emit_into(&mut out[..], &pseudo).unwrap();
    assert_eq!(out, ip.payload());
}

#[test]
fn ethernet_address_text() {
    let a: EthernetAddress = "00:1a:2B:3c:4d:5e".parse().unwrap();
    assert_eq!(a.0, [0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e]);
    assert_eq!(a.to_string(), "00:1a:2b:3c:4d:5e");
    assert_eq!(
        "0:1:2:3:4:5".parse::<EthernetAddress>().unwrap().0,
        [0, 1, 2, 3, 4, 5]
    );
    assert_eq!(
        "aa-bb-cc-dd-ee-ff".parse::<EthernetAddress>().unwrap().0,
        [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]
    );
    for bad in [
        "",
        "00:11:22:33:44",
        "00:11:22:33:44:55:66",
        "001:1:2:3:4:5",
        "g0:11:22:33:44:55",
        "00:11:22:33:44:",
        "+1:2:3:4:5:6",
        "00:11-22:33:44:55",
    ] {
        assert!(bad.parse::<EthernetAddress>().is_err(), "{bad}");
    }
    assert!(EthernetAddress::BROADCAST.is_broadcast());
    assert!(EthernetAddress::BROADCAST.is_multicast());
    assert!(S.is_unicast());
}

#[test]
fn truncated_and_malformed_are_errors() {
    assert_eq!(
        EthernetFrame::new_checked(&[0u8; 13][..]),
        Err(WireError::Truncated)
    );
    // Third VLAN tag.
    let mut f = [0u8; 30];
    f[12..14].copy_from_slice(&0x88a8u16.to_be_bytes());
    f[16..18].copy_from_slice(&0x8100u16.to_be_bytes());
    f[20..22].copy_from_slice(&0x8100u16.to_be_bytes());
    assert!(matches!(
        L2Repr::parse_bytes(&f),
        Err(WireError::Unsupported(_))
    ));
    // Tag cut short.
    assert_eq!(L2Repr::parse_bytes(&f[..16]), Err(WireError::Truncated));
    // IPv4: IHL 4, version 5, total length beyond buffer.
    let mut ip = [0u8; 20];
    ip[0] = 0x44;
    ip[3] = 20;
    assert!(matches!(
        Ipv4Packet::new_checked(&ip[..]),
        Err(WireError::Malformed(_))
    ));
    ip[0] = 0x55;
    assert!(matches!(
        Ipv4Packet::new_checked(&ip[..]),
        Err(WireError::Malformed(_))
    ));
    ip[0] = 0x45;
    ip[3] = 21;
    assert_eq!(Ipv4Packet::new_checked(&ip[..]), Err(WireError::Truncated));
    // IPv4 option overrunning the header.
    let mut ip = [0u8; 24];
    ip[0] = 0x46;
    ip[3] = 24;
    ip[20] = 0x94;
    ip[21] = 8;
    let p = Ipv4Packet::new_checked(&ip[..]).unwrap();
    assert!(matches!(Ipv4Repr::parse(&p), Err(WireError::Malformed(_))));
    // TCP option with a zero length.
    let mut t = [0u8; 24];
    t[12] = 6 << 4;
    t[20] = 2;
    t[21] = 0;
    let p = TcpPacket::new_checked(&t[..]).unwrap();
    assert!(matches!(TcpRepr::parse(&p), Err(WireError::Malformed(_))));
    // UDP length beyond buffer / below 8.
    let mut u = [0u8; 8];
    u[5] = 9;
    assert_eq!(UdpPacket::new_checked(&u[..]), Err(WireError::Truncated));
    u[5] = 7;
    assert!(matches!(
        UdpPacket::new_checked(&u[..]),
        Err(WireError::Malformed(_))
    ));
    // ND option of length zero.
    let mut ns = [0u8; 26];
    ns[0] = 135;
    ns[24] = 1;
    let p = Icmpv6Packet::new_checked(&ns[..]).unwrap();
    assert!(matches!(
        Icmpv6Repr::parse(&p),
        Err(WireError::Malformed(_))
    ));
    // Hop-by-hop after another extension header.
    let ext = [0u8, 0, 0, 0, 0, 0, 0, 0, 59, 0, 0, 0, 0, 0, 0, 0];
    let mut ext2 = ext;
    ext2[0] = 0;
    assert!(ipv6ext::walk(ip_proto::IPV6_OPTS, &ext2).is_err());
    assert_eq!(
        ipv6ext::walk(ip_proto::HOPOPT, &ext[..7]),
        Err(WireError::Truncated)
    );
    // Emit into a short buffer.
    let repr = ipv4_repr([1, 1, 1, 1], [2, 2, 2, 2], 6, 10);
    assert_eq!(
        repr.emit_into(&mut [0u8; 29][..]).map(|_| ()),
        Err(WireError::Truncated)
    );
    // Error text.
    assert_eq!(WireError::Malformed("x").to_string(), "malformed packet: x");
}

#[test]
fn setters_round_trip() {
    let mut frame = ETH_IPV4_UDP;
    let mut ip = Ipv4Packet::new_checked(&mut frame[14..]).unwrap();
    let old = ip.checksum();
    ip.set_ttl(1);
    ip.set_dst_addr(v4([8, 8, 8, 8]));
    ip.fill_checksum();
    assert!(ip.verify_checksum());
    // Incremental update gives the same checksum as the recompute.
    let inc = checksum::update16(old, 0x4011, 0x0111);
    let inc = checksum::update32(
        inc,
        u32::from_be_bytes([192, 168, 1, 2]),
        u32::from_be_bytes([8, 8, 8, 8]),
    );
    assert_eq!(inc, ip.checksum());
    // Setting a header length larger than the buffer is refused; a bad total length cannot
    // make payload() panic.
    assert_eq!(ip.set_header_len(60), Err(WireError::Truncated));
    ip.set_total_len(u16::MAX);
    assert_eq!(ip.payload().len(), 13);
    ip.set_total_len(3);
    assert!(ip.payload().is_empty());
}
