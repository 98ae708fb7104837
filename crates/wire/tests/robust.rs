//! Robustness: random and half-valid bytes through every `new_checked` and `parse` never
//! panic, every parsed repr round-trips (checked inside `common::decode_all`), and setters
//! with random values never make a later getter panic.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wire::constants::{ethertype, ip_proto};
use wire::*;

const PROTOS: [u8; 9] = [
    ip_proto::TCP,
    ip_proto::UDP,
    ip_proto::ICMP,
    ip_proto::ICMPV6,
    ip_proto::SCTP,
    ip_proto::HOPOPT,
    ip_proto::IPV6_ROUTE,
    ip_proto::IPV6_FRAG,
    ip_proto::IPV6_OPTS,
];

fn pseudos() -> [PseudoHeader; 2] {
    [
        PseudoHeader::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
        },
        PseudoHeader::V6 {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::UNSPECIFIED,
        },
    ]
}

/// Makes the start of `l4` a plausible header for `proto`.
fn patch_l4(proto: u8, l4: &mut [u8]) {
    let n = l4.len();
    match proto {
        ip_proto::TCP if n >= 20 => l4[12] = 0x50 | (l4[12] & 0x0f),
        ip_proto::UDP if n >= 8 => l4[4..6].copy_from_slice(&(n as u16).to_be_bytes()),
        ip_proto::ICMPV6 if n >= 8 => l4[0] = [128, 129, 135, 136][usize::from(l4[0] & 3)],
        _ => {}
    }
}

/// Random bytes made plausible: an Ethernet header with a known ethertype (possibly
/// tagged), and an L3 header whose version and length fields often agree with the buffer.
fn plausible_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(any::<u8>(), 0..160),
        0usize..6,
        0usize..PROTOS.len(),
        0u8..16,
        any::<bool>(),
        0usize..4,
    )
        .prop_map(|(mut body, et, proto, ihl, fix_len, tags)| {
            let ets = [
                ethertype::IPV4,
                ethertype::IPV6,
                ethertype::ARP,
                ethertype::VLAN,
                ethertype::QINQ,
                0x1234,
            ];
            let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
            for _ in 0..tags {
                f.extend_from_slice(&ethertype::VLAN.to_be_bytes());
                f.extend_from_slice(&[0x20, 0x05]);
            }
            f.extend_from_slice(&ets[et].to_be_bytes());
            let n = body.len();
            match ets[et] {
                ethertype::IPV4 if n >= 28 => {
                    let hl = 20 + 4 * usize::from(ihl % 3);
                    body[0] = 0x40 | (hl / 4) as u8;
                    body[9] = PROTOS[proto];
                    body[6] &= 0xe0; // fragment offset 0
                    body[7] = 0;
                    body[20..hl].fill(1); // NOP options
                    if fix_len {
                        body[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                        patch_l4(PROTOS[proto], &mut body[hl..]);
                    }
                }
                ethertype::IPV6 if n >= 40 => {
                    body[0] = 0x60 | (body[0] & 0x0f);
                    body[6] = PROTOS[proto];
                    if fix_len {
                        body[4..6].copy_from_slice(&((n - 40) as u16).to_be_bytes());
                    }
                    // Small extension headers so walks go several headers deep.
                    let mut nh = PROTOS[proto];
                    let mut i = 40;
                    let mut k = proto;
                    while ipv6ext::is_extension(nh) && i + 8 <= n {
                        k += 1;
                        body[i] = PROTOS[k % PROTOS.len()];
                        body[i + 1] &= 1;
                        let len = if nh == ip_proto::IPV6_FRAG {
                            if fix_len {
                                body[i + 2] = 0;
                                body[i + 3] &= 1;
                            }
                            8
                        } else {
                            8 * (usize::from(body[i + 1]) + 1)
                        };
                        nh = body[i];
                        i += len;
                    }
                    if fix_len && i <= n {
                        patch_l4(nh, &mut body[i..]);
                    }
                }
                ethertype::ARP if n >= 8 => {
                    body[0..6].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
                }
                _ => {}
            }
            f.extend_from_slice(&body);
            f
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 3000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        common::decode_all(&data);
        for et in [ethertype::IPV4, ethertype::IPV6, ethertype::ARP] {
            common::decode_l3(et, &data);
        }
        for p in PROTOS {
            for ph in &pseudos() {
                common::decode_l4(p, &data, ph);
            }
            let _ = ipv6ext::walk(p, &data);
        }
        let _ = VlanHeader::new_checked(&data[..]).map(|v| VlanRepr::parse(&v));
        let _ = Ipv6FragmentHeader::new_checked(&data[..]).map(|v| Ipv6FragmentRepr::parse(&v));
        let _ = nd::NdOptionsIter::new(&data).count();
        let _ = TcpOptionsIter::new(&data).count();
        let _ = ipv4::validate_options(&data);
        let _ = checksum::sum(&data);
        let _ = core::str::from_utf8(&data).map(|s| s.parse::<EthernetAddress>());
    }

    #[test]
    fn plausible_frames_never_panic(frame in plausible_frame()) {
        common::decode_all(&frame);
    }

    #[test]
    fn random_text_mac_never_panics(s in "\\PC{0,24}", t in "[0-9a-fA-F:-]{0,20}") {
        let _ = s.parse::<EthernetAddress>();
        if let Ok(a) = t.parse::<EthernetAddress>() {
            prop_assert_eq!(a.to_string().parse::<EthernetAddress>(), Ok(a));
        }
    }

    #[test]
    fn mac_display_parse_round_trip(b in any::<[u8; 6]>()) {
        let a = EthernetAddress(b);
        prop_assert_eq!(a.to_string().parse::<EthernetAddress>(), Ok(a));
    }

    #[test]
    fn setters_never_break_getters(
        mut data in proptest::collection::vec(any::<u8>(), 60..120),
        hl in 0usize..80,
        total in any::<u16>(),
        msg_type in any::<u8>(),
        lens in any::<(u8, u8)>(),
    ) {
        data[0] = 0x45;
        let n = data.len() as u16;
        data[2..4].copy_from_slice(&n.to_be_bytes());
        {
            let mut ip = Ipv4Packet::new_checked(&mut data[..]).unwrap();
            let _ = ip.set_header_len(hl);
            ip.set_total_len(total);
            let _ = (ip.payload().len(), ip.options().len(), ip.header().len(), ip.verify_checksum());
            ip.fill_checksum();
            let _ = (ip.payload_mut().len(), ip.options_mut().len(), ip.set_frag_offset(total));
        }
        {
            data[4..6].copy_from_slice(&total.to_be_bytes());
            let mut ip6 = Ipv6Packet::new_checked(&mut data[..]).ok();
            if let Some(ip6) = ip6.as_mut() {
                ip6.set_payload_len(total);
                let _ = (ip6.payload().len(), ip6.payload_mut().len(), ip6.extensions());
            }
        }
        {
            data[12] = 0x50;
            let mut t = TcpPacket::new_checked(&mut data[..]).unwrap();
            let _ = t.set_header_len(hl);
            let _ = (t.options_iter().count(), t.payload().len(), t.options_mut().len());
            t.fill_checksum(&pseudos()[0]);
            let _ = TcpRepr::parse(&t);
        }
        {
            data[4..6].copy_from_slice(&8u16.to_be_bytes());
            let mut u = UdpPacket::new_checked(&mut data[..]).unwrap();
            u.set_len(total);
            u.fill_checksum(&pseudos()[1]);
            let _ = (u.payload().len(), u.payload_mut().len(), u.verify_checksum(&pseudos()[1]));
        }
        {
            let mut short = [0u8; 8];
            let mut i = Icmpv6Packet::new_checked(&mut short[..]).unwrap();
            i.set_msg_type(msg_type);
            let _ = (i.target_addr(), i.nd_options_iter().count(), i.set_target_addr(Ipv6Addr::LOCALHOST));
            let _ = Icmpv6Repr::parse(&i);
        }
        {
            data[4] = 0;
            data[5] = 0;
            let mut a = ArpPacket::new_checked(&mut data[..]).unwrap();
            let _ = a.set_address_lens(lens.0, lens.1);
            let _ = (a.sender_hardware_addr(), a.target_protocol_addr(), a.payload(), ArpRepr::parse(&a));
            let _ = a.set_target_protocol_addr(&[1, 2, 3, 4]);
        }
        {
            data[1] = lens.0;
            let mut e = Ipv6ExtHeader::new_checked(&mut data[..]).ok();
            if let Some(e) = e.as_mut() {
                let _ = (e.data().len(), e.data_mut().len(), e.payload().len());
            }
        }
    }
}

#[test]
fn empty_inputs_are_errors() {
    let e: &[u8] = &[];
    assert!(EthernetFrame::new_checked(e).is_err());
    assert!(VlanHeader::new_checked(e).is_err());
    assert!(ArpPacket::new_checked(e).is_err());
    assert!(Ipv4Packet::new_checked(e).is_err());
    assert!(Ipv6Packet::new_checked(e).is_err());
    assert!(Ipv6ExtHeader::new_checked(e).is_err());
    assert!(Ipv6FragmentHeader::new_checked(e).is_err());
    assert!(Icmpv4Packet::new_checked(e).is_err());
    assert!(Icmpv6Packet::new_checked(e).is_err());
    assert!(TcpPacket::new_checked(e).is_err());
    assert!(UdpPacket::new_checked(e).is_err());
    assert!(SctpPacket::new_checked(e).is_err());
    assert_eq!(common::decode_all(e), common::Decoded::default());
}

/// The plausible-frame generator must actually reach the transport layers, or the
/// never-panic property above would only be testing the shallow checks.
#[test]
fn plausible_frames_reach_transport() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strat = plausible_frame();
    let mut reached = std::collections::BTreeMap::<(u16, u8), usize>::new();
    for _ in 0..4000 {
        let frame = strat.new_tree(&mut runner).unwrap().current();
        let d = common::decode_all(&frame);
        if d.l4_parsed {
            *reached
                .entry((d.l3.unwrap_or(0), d.l4.unwrap_or(0)))
                .or_default() += 1;
        }
    }
    eprintln!("{reached:?}");
    for (et, p) in [
        (ethertype::IPV4, ip_proto::TCP),
        (ethertype::IPV4, ip_proto::UDP),
        (ethertype::IPV4, ip_proto::ICMP),
        (ethertype::IPV6, ip_proto::TCP),
        (ethertype::IPV6, ip_proto::UDP),
        (ethertype::IPV6, ip_proto::SCTP),
        (ethertype::IPV6, ip_proto::ICMPV6),
    ] {
        assert!(
            reached.get(&(et, p)).copied().unwrap_or(0) >= 5,
            "{et:#x}/{p}: {reached:?}"
        );
    }
}
