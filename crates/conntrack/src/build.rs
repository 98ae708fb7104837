//! Frame builders for tests, benches and the fuzz driver (Ethernet + IPv4/IPv6 + L4 with
//! correct checksums). Written independently of the parser they feed.

use std::net::IpAddr;

fn sum16(data: &[u8]) -> u32 {
    let mut s = 0u32;
    let mut it = data.chunks(2);
    for c in &mut it {
        let w = if c.len() == 2 {
            u32::from(c[0]) << 8 | u32::from(c[1])
        } else {
            u32::from(c[0]) << 8
        };
        s += w;
    }
    s
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn addr_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

/// The L4 checksum of `seg` (checksum field zero) over the pseudo header.
pub fn l4_checksum(src: IpAddr, dst: IpAddr, proto: u8, seg: &[u8]) -> u16 {
    let mut s = sum16(&addr_bytes(src)) + sum16(&addr_bytes(dst));
    s += u32::from(proto);
    let len = seg.len() as u32;
    s += (len >> 16) + (len & 0xffff);
    s += sum16(seg);
    !fold(s)
}

/// An IP packet (no L2) carrying `l4` as protocol `proto`.
pub fn ip(src: IpAddr, dst: IpAddr, proto: u8, l4: &[u8]) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let tot = (20 + l4.len()) as u16;
            let mut h = vec![
                0x45,
                0,
                (tot >> 8) as u8,
                tot as u8,
                0,
                1,
                0,
                0,
                64,
                proto,
                0,
                0,
            ];
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let c = !fold(sum16(&h));
            h[10] = (c >> 8) as u8;
            h[11] = c as u8;
            h.extend_from_slice(l4);
            h
        }
        _ => {
            let plen = l4.len() as u16;
            let mut h = vec![0x60, 0, 0, 0, (plen >> 8) as u8, plen as u8, proto, 64];
            h.extend_from_slice(&addr_bytes(src));
            h.extend_from_slice(&addr_bytes(dst));
            h.extend_from_slice(l4);
            h
        }
    }
}

/// An Ethernet frame around an IP packet.
pub fn eth(ip_pkt: &[u8]) -> Vec<u8> {
    let v6 = ip_pkt.first().is_some_and(|b| b >> 4 == 6);
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    f.extend_from_slice(ip_pkt);
    f
}

/// A UDP segment with checksum.
pub fn udp_seg(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = Vec::with_capacity(len as usize);
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let mut c = l4_checksum(src, dst, 17, &u);
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

/// A UDP frame.
pub fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    eth(&ip(src, dst, 17, &udp_seg(src, dst, sport, dport, payload)))
}

/// A TCP segment with checksum; `opts` padded to a multiple of 4.
#[allow(clippy::too_many_arguments)]
pub fn tcp_seg(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    win: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut o = opts.to_vec();
    while !o.len().is_multiple_of(4) {
        o.push(0);
    }
    let hl = 20 + o.len();
    let mut t = Vec::with_capacity(hl + payload.len());
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    let off_flags = ((hl as u16 / 4) << 12) | (flags & 0x1ff);
    t.extend_from_slice(&off_flags.to_be_bytes());
    t.extend_from_slice(&win.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 0]);
    t.extend_from_slice(&o);
    t.extend_from_slice(payload);
    let c = l4_checksum(src, dst, 6, &t);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

/// A TCP frame.
#[allow(clippy::too_many_arguments)]
pub fn tcp(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    win: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    eth(&ip(
        src,
        dst,
        6,
        &tcp_seg(src, dst, sport, dport, seq, ack, flags, win, opts, payload),
    ))
}

/// An ICMP (v4) or ICMPv6 (v6 addresses) message: type, code, 4 bytes of rest-of-header,
/// body.
pub fn icmp(src: IpAddr, dst: IpAddr, ty: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(&rest);
    m.extend_from_slice(body);
    let v6 = src.is_ipv6();
    let c = if v6 {
        l4_checksum(src, dst, 58, &m)
    } else {
        !fold(sum16(&m))
    };
    m[2..4].copy_from_slice(&c.to_be_bytes());
    eth(&ip(src, dst, if v6 { 58 } else { 1 }, &m))
}

/// An echo request/reply (`ty` as the family's number) with `id`, `seq`.
pub fn echo(src: IpAddr, dst: IpAddr, ty: u8, id: u16, seq: u16) -> Vec<u8> {
    let mut rest = [0u8; 4];
    rest[..2].copy_from_slice(&id.to_be_bytes());
    rest[2..].copy_from_slice(&seq.to_be_bytes());
    icmp(src, dst, ty, 0, rest, b"pingpong")
}

/// Pushes an 802.1Q tag with `vid` onto `frame`.
pub fn vlan(frame: &[u8], vid: u16) -> Vec<u8> {
    let cut = frame.len().min(12);
    let mut f = frame[..cut].to_vec();
    f.extend_from_slice(&[0x81, 0x00, (vid >> 8) as u8 & 0x0f, vid as u8]);
    f.extend_from_slice(&frame[cut..]);
    f
}

/// The IP packet of a frame built here (strips the 14-byte Ethernet header).
pub fn strip_eth(frame: &[u8]) -> &[u8] {
    frame.get(14..).unwrap_or(&[])
}

/// Commits `n` connections in `ct` (zone 0, time 1 ms) and returns the frames of their
/// established steady state, (original, reply) per connection: UDP — one datagram each way;
/// TCP — the handshake is run, then a bare ACK each way. Client `10.0.0.0/8` addresses and
/// ports vary with `i`, the server side too, so the tuples are distinct for any `n` below 2^30.
/// The workload of the crate's throughput test, benchmark and instruction-count example.
pub fn established(ct: &crate::Conntrack, n: u32, tcp: bool) -> Vec<Vec<u8>> {
    let ip = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
    let act = crate::CtAction {
        commit: true,
        ..crate::CtAction::default()
    };
    let run = |f: &mut Vec<u8>| {
        let mut md = flow::extract::PacketMeta::port(1);
        ct.execute(f, &mut md, &act, 1);
    };
    let mut frames = Vec::with_capacity(2 * n as usize);
    for i in 0..n {
        let (c, s) = (ip(1 + (i >> 14)), ip(0x10_0000 + (i & 0x3fff)));
        let sp = 1024 + (i % 60000) as u16;
        if tcp {
            run(&mut tcp_frame(c, s, sp, 80, 100, 0, 0x02));
            run(&mut tcp_frame(s, c, 80, sp, 900, 101, 0x12));
            let mut o = tcp_frame(c, s, sp, 80, 101, 901, 0x10);
            run(&mut o);
            frames.push(o);
            frames.push(tcp_frame(s, c, 80, sp, 901, 101, 0x10));
        } else {
            let mut o = udp(c, s, sp, 53, b"0123456789");
            run(&mut o);
            let mut r = udp(s, c, 53, sp, b"0123456789");
            run(&mut r);
            frames.push(o);
            frames.push(r);
        }
    }
    frames
}

/// A TCP frame without options or payload, window 65535.
fn tcp_frame(
    src: IpAddr,
    dst: IpAddr,
    sp: u16,
    dp: u16,
    seq: u32,
    ack: u32,
    flags: u16,
) -> Vec<u8> {
    tcp(src, dst, sp, dp, seq, ack, flags, 65535, &[], b"")
}
