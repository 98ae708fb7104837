//! Generator frames checked against `etherparse` as an independent oracle: they parse, their
//! checksums are right, their 5-tuples are distinct, and they match the flow specs.

use etherparse::{LinkExtHeader, NetHeaders, PacketHeaders, TransportHeader};
use netdev::{
    Batch, FlowSpec, FrameSize, GeneratorConfig, GeneratorPort, L4Spec, NullPort, Order,
    PacketPool, Port, ProtocolMix, ReplayPort, read_pcap, write_pcap,
};
use std::collections::HashSet;
use std::net::IpAddr;

type FiveTuple = (IpAddr, IpAddr, u8, u16, u16);

/// Parses `frame` with etherparse, checks every checksum, and returns its 5-tuple
/// (ICMP: id as source port, 0 as destination port) and VLAN id.
fn check_frame(frame: &[u8]) -> (FiveTuple, Option<u16>) {
    let h = PacketHeaders::from_ethernet_slice(frame).expect("etherparse parses the frame");
    let vlan = h.link_exts.first().map(|e| match e {
        LinkExtHeader::Vlan(v) => v.vlan_id.value(),
        other => panic!("unexpected link ext {other:?}"),
    });
    assert!(h.link_exts.len() <= 1);
    let payload = h.payload.slice();
    let transport = h.transport.as_ref().expect("transport header");
    match h.net.as_ref().expect("IP header") {
        NetHeaders::Ipv4(ip, _) => {
            assert_eq!(
                ip.header_checksum,
                ip.calc_header_checksum(),
                "IPv4 header checksum"
            );
            assert_eq!(ip.time_to_live, 64);
            let ip_total = usize::from(ip.total_len);
            let l2 = 14 + if vlan.is_some() { 4 } else { 0 };
            assert_eq!(
                l2 + ip_total,
                frame.len(),
                "IPv4 total length covers the frame"
            );
            let (src, dst) = (IpAddr::from(ip.source), IpAddr::from(ip.destination));
            match transport {
                TransportHeader::Udp(u) => {
                    assert_eq!(
                        u.checksum,
                        u.calc_checksum_ipv4(ip, payload).unwrap(),
                        "UDP"
                    );
                    assert_ne!(u.checksum, 0);
                    ((src, dst, 17, u.source_port, u.destination_port), vlan)
                }
                TransportHeader::Tcp(t) => {
                    assert_eq!(
                        t.checksum,
                        t.calc_checksum_ipv4(ip, payload).unwrap(),
                        "TCP"
                    );
                    assert!(t.ack && t.psh && !t.syn);
                    ((src, dst, 6, t.source_port, t.destination_port), vlan)
                }
                TransportHeader::Icmpv4(i) => {
                    assert_eq!(i.checksum, i.icmp_type.calc_checksum(payload), "ICMPv4");
                    let etherparse::Icmpv4Type::EchoRequest(e) = i.icmp_type else {
                        panic!("not an echo request: {:?}", i.icmp_type)
                    };
                    ((src, dst, 1, e.id, 0), vlan)
                }
                other => panic!("unexpected transport {other:?}"),
            }
        }
        NetHeaders::Ipv6(ip, _) => {
            let l2 = 14 + if vlan.is_some() { 4 } else { 0 };
            assert_eq!(l2 + 40 + usize::from(ip.payload_length), frame.len());
            assert_eq!(ip.hop_limit, 64);
            let (src, dst) = (IpAddr::from(ip.source), IpAddr::from(ip.destination));
            match transport {
                TransportHeader::Udp(u) => {
                    assert_eq!(
                        u.checksum,
                        u.calc_checksum_ipv6(ip, payload).unwrap(),
                        "UDP6"
                    );
                    ((src, dst, 17, u.source_port, u.destination_port), vlan)
                }
                TransportHeader::Tcp(t) => {
                    assert_eq!(
                        t.checksum,
                        t.calc_checksum_ipv6(ip, payload).unwrap(),
                        "TCP6"
                    );
                    ((src, dst, 6, t.source_port, t.destination_port), vlan)
                }
                TransportHeader::Icmpv6(i) => {
                    let want = i
                        .icmp_type
                        .calc_checksum(ip.source, ip.destination, payload)
                        .unwrap();
                    assert_eq!(i.checksum, want, "ICMPv6");
                    let etherparse::Icmpv6Type::EchoRequest(e) = i.icmp_type else {
                        panic!("not an echo request: {:?}", i.icmp_type)
                    };
                    ((src, dst, 58, e.id, 0), vlan)
                }
                other => panic!("unexpected transport {other:?}"),
            }
        }
        other => panic!("unexpected net header {other:?}"),
    }
}

fn spec_tuple(s: &FlowSpec) -> FiveTuple {
    match s.l4 {
        L4Spec::Udp { src, dst } => (s.src, s.dst, 17, src, dst),
        L4Spec::Tcp { src, dst } => (s.src, s.dst, 6, src, dst),
        L4Spec::IcmpEcho { id } => (s.src, s.dst, if s.src.is_ipv4() { 1 } else { 58 }, id, 0),
    }
}

fn mixed(flows: u32, seed: u64, size: FrameSize) -> GeneratorConfig {
    GeneratorConfig {
        flows,
        mix: ProtocolMix::mixed(),
        frame_size: size,
        seed,
        ..GeneratorConfig::default()
    }
}

#[test]
fn frames_parse_with_valid_checksums_and_match_specs() {
    for (seed, size) in [
        (1, FrameSize::Fixed(60)),
        (2, FrameSize::Range { min: 0, max: 1514 }),
        (3, FrameSize::Imix),
        (4, FrameSize::Range { min: 61, max: 63 }), // odd lengths exercise checksum padding
    ] {
        let g = GeneratorPort::new("g", mixed(500, seed, size)).unwrap();
        assert_eq!(g.frames().len(), 500);
        let mut protos = HashSet::new();
        let (mut v6, mut tagged) = (0, 0);
        for (f, spec) in g.frames().zip(g.flows()) {
            let (t, vlan) = check_frame(f);
            assert_eq!(t, spec_tuple(spec));
            assert_eq!(vlan, spec.vlan);
            assert_eq!(&f[0..6], &spec.dst_mac);
            assert_eq!(&f[6..12], &spec.src_mac);
            protos.insert(t.2);
            v6 += usize::from(spec.src.is_ipv6());
            tagged += usize::from(vlan.is_some());
        }
        // the mix shows up: all protocols, roughly 25 % IPv6 and 20 % VLAN of 500
        assert_eq!(protos.len(), 4, "{protos:?}");
        assert!((75..=175).contains(&v6), "ipv6 {v6}");
        assert!((50..=150).contains(&tagged), "vlan {tagged}");
    }
}

#[test]
fn distinct_five_tuples_equal_flow_count() {
    for flows in [1u32, 2, 7, 100, 1000, 5000] {
        let g =
            GeneratorPort::new("g", mixed(flows, u64::from(flows), FrameSize::Fixed(60))).unwrap();
        let tuples: HashSet<FiveTuple> = g.frames().map(|f| check_frame(f).0).collect();
        assert_eq!(tuples.len(), flows as usize);
    }
}

#[test]
fn deterministic_per_seed() {
    let a = GeneratorPort::new("a", mixed(300, 42, FrameSize::Imix)).unwrap();
    let b = GeneratorPort::new("b", mixed(300, 42, FrameSize::Imix)).unwrap();
    let c = GeneratorPort::new("c", mixed(300, 43, FrameSize::Imix)).unwrap();
    assert!(a.frames().eq(b.frames()));
    assert!(!a.frames().eq(c.frames()));

    // the random rx order is deterministic too
    let cfg = GeneratorConfig {
        order: Order::Random,
        ..mixed(50, 9, FrameSize::Fixed(100))
    };
    let run = |cfg: &GeneratorConfig| {
        let mut g = GeneratorPort::new("g", cfg.clone())
            .unwrap()
            .with_limit(500);
        let mut pool = PacketPool::new(64);
        let mut b = Batch::new();
        let mut out = Vec::new();
        while !g.rx_eof() {
            g.rx_burst(&mut pool, &mut b);
            for p in b.drain() {
                out.push(p.data().to_vec());
                pool.free(p);
            }
        }
        out
    };
    let r1 = run(&cfg);
    assert_eq!(r1.len(), 500);
    assert_eq!(r1, run(&cfg));
    let distinct: HashSet<&Vec<u8>> = r1.iter().collect();
    assert!(distinct.len() > 40, "random order visits most of 50 flows");
    assert_ne!(r1, run(&GeneratorConfig { seed: 10, ..cfg }));
}

#[test]
fn round_robin_rx_cycles_templates() {
    let mut g = GeneratorPort::new("g", mixed(7, 5, FrameSize::Fixed(80)))
        .unwrap()
        .with_limit(100);
    let templates: Vec<Vec<u8>> = g.frames().map(<[u8]>::to_vec).collect();
    let mut pool = PacketPool::new(32);
    let mut b = Batch::new();
    let mut null = NullPort::new("null");
    let mut seen = 0usize;
    while !g.rx_eof() {
        g.rx_burst(&mut pool, &mut b);
        assert!(b.len() <= netdev::BATCH_MAX);
        for p in b.iter() {
            assert_eq!(p.data(), &templates[seen % 7][..]);
            seen += 1;
        }
        null.tx_burst(&mut b, &mut pool);
    }
    assert_eq!(seen, 100);
    assert_eq!(g.stats().rx_wraps, 14); // (100 - 1) / 7
    assert_eq!(pool.available(), 32);
}

#[test]
fn dump_to_pcap_and_replay() {
    let g = GeneratorPort::new("g", mixed(64, 77, FrameSize::Imix)).unwrap();
    let dir = std::env::temp_dir().join(format!("netdev-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gen.pcap");
    write_pcap(&path, g.frames()).unwrap();
    let back = read_pcap(&path).unwrap();
    assert!(back.iter().map(Vec::as_slice).eq(g.frames()));
    let replay = ReplayPort::from_pcap("r", &path).unwrap();
    assert_eq!(replay.frames(), g.frame_set());
    std::fs::remove_dir_all(&dir).unwrap();
}
