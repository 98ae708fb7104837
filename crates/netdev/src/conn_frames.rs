//! Frames of the benchmark generators' connections (`../shared/ovs-bench`'s
//! `gen_pcap_bidir.py` and `gen_pcap_tcp.py`), built byte for byte the same way so that our
//! benchmarks and OVS's replay the same packets: connection `i` of a run is UDP or TCP between
//! 10.0.0.1 and 10.0.0.2 with ports derived from `i` (distinct for every `i` below 60 million).
//!
//! Used by `flowswitch bench firewall`, `receive` and the conntrack adapter's tests.

/// RFC 1071 checksum over `parts` concatenated (each part of even length but the last).
fn csum(parts: &[&[u8]]) -> u16 {
    let mut s: u32 = 0;
    for p in parts {
        for c in p.chunks(2) {
            s += u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]));
        }
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

const M1: [u8; 6] = [2, 0, 0, 0, 0, 1];
const M2: [u8; 6] = [2, 0, 0, 0, 0, 2];
const IP1: [u8; 4] = [10, 0, 0, 1];
const IP2: [u8; 4] = [10, 0, 0, 2];

/// Ports of connection `i` (the generators' rule: distinct for every i below 60M).
fn ports(i: u32) -> (u16, u16) {
    (
        (1024 + i % 60000) as u16,
        (5000 + (i / 60000) % 1000) as u16,
    )
}

/// A 60-byte Ethernet/IPv4 frame around `l4` (padded), IPv4 checksum set.
fn ipv4_frame(fwd: bool, proto: u8, ipid: u16, df: bool, l4: &[u8]) -> [u8; 60] {
    let (smac, dmac, sip, dip) = if fwd {
        (M1, M2, IP1, IP2)
    } else {
        (M2, M1, IP2, IP1)
    };
    let mut f = [0u8; 60];
    f[0..6].copy_from_slice(&dmac);
    f[6..12].copy_from_slice(&smac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = 20 + l4.len();
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&ipid.to_be_bytes());
    if df {
        ip[6] = 0x40;
    }
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&sip);
    ip[16..20].copy_from_slice(&dip);
    let c = csum(&[ip]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f[34..34 + l4.len()].copy_from_slice(l4);
    f
}

/// `gen_pcap_bidir.py`'s frame of connection `i`, forward or reverse (UDP checksum 0).
pub fn udp_frame(i: u32, fwd: bool) -> [u8; 60] {
    let (sport, dport) = ports(i);
    let (s, d) = if fwd { (sport, dport) } else { (dport, sport) };
    let mut udp = [0u8; 26];
    udp[0..2].copy_from_slice(&s.to_be_bytes());
    udp[2..4].copy_from_slice(&d.to_be_bytes());
    udp[4..6].copy_from_slice(&26u16.to_be_bytes());
    ipv4_frame(fwd, 17, i as u16, false, &udp)
}

/// `gen_pcap_tcp.py`'s four frames of connection `i`: SYN, SYN|ACK, the forward data
/// segment and the reverse ACK (valid checksums, window 65535, no options).
pub fn tcp_frames(i: u32) -> [[u8; 60]; 4] {
    const SYN: u8 = 0x02;
    const PSH: u8 = 0x08;
    const ACK: u8 = 0x10;
    let (sport, dport) = ports(i);
    let isnc = 0x1000_0000u32.wrapping_add(7919u32.wrapping_mul(i));
    let isns = 0x6000_0000u32.wrapping_add(104_729u32.wrapping_mul(i));
    let data = [0x11u8; 6];
    let seg = |fwd: bool, seq: u32, ack: u32, flags: u8, payload: &[u8]| {
        let (s, d, sip, dip) = if fwd {
            (sport, dport, IP1, IP2)
        } else {
            (dport, sport, IP2, IP1)
        };
        let mut t = vec![0u8; 20 + payload.len()];
        t[0..2].copy_from_slice(&s.to_be_bytes());
        t[2..4].copy_from_slice(&d.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&ack.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&65535u16.to_be_bytes());
        t[20..].copy_from_slice(payload);
        let len = (t.len() as u16).to_be_bytes();
        let c = csum(&[&sip, &dip, &[0, 6], &len, &t]);
        t[16..18].copy_from_slice(&c.to_be_bytes());
        ipv4_frame(fwd, 6, i as u16, true, &t)
    };
    [
        seg(true, isnc, 0, SYN, &[]),
        seg(false, isns, isnc.wrapping_add(1), SYN | ACK, &[]),
        seg(
            true,
            isnc.wrapping_add(1),
            isns.wrapping_add(1),
            PSH | ACK,
            &data,
        ),
        seg(false, isns.wrapping_add(1), isnc.wrapping_add(7), ACK, &[]),
    ]
}
