//! Packet → connection key, with OVS's validity rules (`conn_key_extract` in OVS 3.1
//! `lib/conntrack.c`).
//!
//! Why a parse of its own: the tracker receives raw frames (after the actions before `ct`
//! may have edited them), and it must decide validity exactly as OVS does: a packet that
//! cannot be keyed is `+inv+trk`, counted by [`InvalidReason`].
//!
//! How: Ethernet with up to two 802.1Q/802.1ad tags (`wire::L2Repr`), then IPv4 or IPv6
//! through `wire`'s checked views. Lengths come from the IP header (bytes past the IP total
//! length are L2 padding and are ignored, as OVS's `l2_pad_size`). Rules, in OVS's order:
//!
//! - IPv4: header at least 20 bytes, IHL ≥ 5 and within the packet, total length within the
//!   frame; a fragment (MF or non-zero offset) is invalid; the header checksum is verified
//!   (the dummy datapath has no checksum offload, so OVS verifies it).
//! - IPv6: extension headers walked as OVS does (hop-by-hop, routing, destination options,
//!   AH, fragment, in any order); a fragment header with a non-zero offset or MF is a
//!   fragment (an atomic fragment, offset 0 without MF, is not).
//! - TCP: ≥ 20 bytes, data offset in [20, L4 length], checksum verified, ports non-zero.
//! - UDP: ≥ 8 bytes, length field in [8, L4 length], checksum verified over the L4 bytes unless
//!   it is 0 over IPv4, ports non-zero.
//! - ICMP: checksum verified over the L4 bytes, ≥ 8 bytes; echo/timestamp/info request and
//!   reply (code 0) are keyed by id and type; destination unreachable, time exceeded,
//!   parameter problem, source quench and redirect carry an inner packet whose source must be
//!   the outer destination and whose key, reversed, is looked up (`related`); inner L4 needs
//!   only 8 bytes and is not checksummed. Anything else is invalid.
//! - ICMPv6: checksum verified, ≥ 8 bytes; echo request/reply (code 0) keyed by id; unreachable,
//!   packet too big, time exceeded and parameter problem carry an inner packet (inner TCP
//!   needs 20 bytes); anything else (neighbour discovery included) is invalid.
//! - Any other IP protocol is keyed by addresses and protocol alone.
//!
//! Fragments: OVS 3.1 enables its userspace fragment reassembly (`ipf`) by default, for v4
//! and v6, so OVS holds fragments and tracks the reassembled packet. So does flowswitch: the
//! datapath adapter runs [`crate::ipf`] before the tracker, so the tracker sees the
//! reassembled packet. A fragment that still reaches the tracker (one `ipf` refused, or a
//! caller without reassembly) is `+inv+trk`, counted as [`InvalidReason::Fragment`] — what
//! OVS answers for the fragments its `ipf` passes on.
//!
//! Fast path: [`parse_fast`] is a straight-line parser for the common shape (untagged
//! Ethernet, IPv4 without options, TCP or UDP) with every check above for that shape and a
//! one-accumulator checksum ([`sum32`]/[`fold`]); anything else, or anything it refuses,
//! goes to [`parse`], which decides and says why. Both are twin-tested on real and mutated
//! frames.
//!
//! Invariant: never panics on any bytes; every slice access is bounds-checked.

use crate::key::ConnKey;
use wire::checksum;
use wire::ipv4::Ipv4Packet;
use wire::ipv6::Ipv6Packet;
use wire::vlan::L2Repr;

/// Why a packet was found invalid (`+inv+trk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum InvalidReason {
    /// Ethernet header or VLAN tags truncated, or more than two tags.
    L2,
    /// Not IPv4 or IPv6.
    NotIp,
    /// IP header truncated or malformed (version, IHL, lengths, extension headers).
    L3Header,
    /// IPv4 header checksum wrong.
    L3Checksum,
    /// An IP fragment that reached the tracker unreassembled (see the module doc).
    Fragment,
    /// L4 header truncated or malformed.
    L4Header,
    /// TCP/UDP/ICMP/ICMPv6 checksum wrong.
    L4Checksum,
    /// TCP or UDP port 0.
    PortZero,
    /// An ICMP/ICMPv6 type the tracker does not handle, or a non-zero code on echo.
    IcmpType,
    /// An ICMP error whose inner packet cannot be keyed or does not match the outer header.
    IcmpInner,
    /// An ICMP error whose inner packet belongs to no known connection.
    RelatedNoConn,
    /// TCP flag combination rejected (`tcp_invalid_flags`).
    TcpFlags,
    /// TCP segment outside the tracked window.
    TcpWindow,
    /// A first packet that may not create a connection (SYN+ACK, ICMP reply, …).
    NotValidNew,
}

impl InvalidReason {
    /// Number of reasons.
    pub const COUNT: usize = 14;
    /// All reasons, in counter order.
    pub const ALL: [InvalidReason; Self::COUNT] = [
        InvalidReason::L2,
        InvalidReason::NotIp,
        InvalidReason::L3Header,
        InvalidReason::L3Checksum,
        InvalidReason::Fragment,
        InvalidReason::L4Header,
        InvalidReason::L4Checksum,
        InvalidReason::PortZero,
        InvalidReason::IcmpType,
        InvalidReason::IcmpInner,
        InvalidReason::RelatedNoConn,
        InvalidReason::TcpFlags,
        InvalidReason::TcpWindow,
        InvalidReason::NotValidNew,
    ];

    /// Short name for counters.
    pub fn name(self) -> &'static str {
        match self {
            InvalidReason::L2 => "l2",
            InvalidReason::NotIp => "not_ip",
            InvalidReason::L3Header => "l3_header",
            InvalidReason::L3Checksum => "l3_checksum",
            InvalidReason::Fragment => "fragment",
            InvalidReason::L4Header => "l4_header",
            InvalidReason::L4Checksum => "l4_checksum",
            InvalidReason::PortZero => "port_zero",
            InvalidReason::IcmpType => "icmp_type",
            InvalidReason::IcmpInner => "icmp_inner",
            InvalidReason::RelatedNoConn => "related_no_conn",
            InvalidReason::TcpFlags => "tcp_flags",
            InvalidReason::TcpWindow => "tcp_window",
            InvalidReason::NotValidNew => "not_valid_new",
        }
    }
}

/// The TCP fields the window tracker reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpInfo {
    pub flags: u16,
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    /// TCP header length (data offset × 4).
    pub hdr_len: usize,
    /// Payload bytes (L4 length per the IP header minus the TCP header).
    pub payload_len: u32,
}

/// A keyed packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// The lookup key (for an ICMP error: the inner packet's key, reversed).
    pub key: ConnKey,
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the L4 header.
    pub l4: usize,
    /// L4 length according to the IP header.
    pub l4_len: usize,
    /// An ICMP error about another connection.
    pub related: bool,
    /// For `related`: offset of the inner IP header and inner L4 header.
    pub inner_l3: usize,
    pub inner_l4: usize,
    /// TCP fields (outer TCP only).
    pub tcp: Option<TcpInfo>,
    /// Outer ICMP/ICMPv6 type (for the "may this create a connection" rule).
    pub icmp_type: u8,
}

const ICMP4_ECHO_LIKE: [(u8, u8); 6] = [(8, 0), (0, 8), (13, 14), (14, 13), (15, 16), (16, 15)];

fn icmp4_reverse(t: u8) -> Option<u8> {
    ICMP4_ECHO_LIKE
        .iter()
        .find(|(a, _)| *a == t)
        .map(|&(_, b)| b)
}

fn icmp6_reverse(t: u8) -> Option<u8> {
    match t {
        128 => Some(129),
        129 => Some(128),
        _ => None,
    }
}

fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

fn be32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(off)?,
        *b.get(off + 1)?,
        *b.get(off + 2)?,
        *b.get(off + 3)?,
    ]))
}

fn addr4(b: &[u8], off: usize) -> Option<[u8; 16]> {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(b.get(off..off + 4)?);
    Some(a)
}

fn addr6(b: &[u8], off: usize) -> Option<[u8; 16]> {
    let mut a = [0u8; 16];
    a.copy_from_slice(b.get(off..off + 16)?);
    Some(a)
}

/// Pseudo-header sum for a transport checksum.
fn pseudo_sum(v6: bool, src: &[u8; 16], dst: &[u8; 16], proto: u8, len: usize) -> u16 {
    if v6 {
        checksum::pseudo_header_v6(
            std::net::Ipv6Addr::from(*src),
            std::net::Ipv6Addr::from(*dst),
            proto,
            u32::try_from(len).unwrap_or(u32::MAX),
        )
    } else {
        checksum::pseudo_header_v4(
            std::net::Ipv4Addr::new(src[0], src[1], src[2], src[3]),
            std::net::Ipv4Addr::new(dst[0], dst[1], dst[2], dst[3]),
            proto,
            len as u16,
        )
    }
}

fn l4_csum_ok(v6: bool, src: &[u8; 16], dst: &[u8; 16], proto: u8, seg: &[u8]) -> bool {
    checksum::combine(&[
        pseudo_sum(v6, src, dst, proto, seg.len()),
        checksum::sum(seg),
    ]) == 0xffff
}

/// Where the upper layer starts after IPv6 extension headers, OVS's
/// `parse_ipv6_ext_hdrs__` rules: hop-by-hop, routing, destination options ((len+1)·8
/// bytes), AH ((len+2)·4) and fragment headers (8) are skipped in any order; each needs 8
/// bytes. A fragment header with a zero offset-and-flags field (an atomic fragment) is no
/// fragment. Returns (protocol, offset, is a fragment).
fn ipv6_upper(mut proto: u8, data: &[u8]) -> Option<(u8, usize, bool)> {
    let mut off = 0usize;
    let mut frag = false;
    loop {
        if !matches!(proto, 0 | 43 | 60 | 51 | 44) {
            return Some((proto, off, frag));
        }
        let h = data.get(off..off + 8)?;
        let len = match proto {
            51 => (usize::from(h[1]) + 2) * 4,
            44 => 8,
            _ => (usize::from(h[1]) + 1) * 8,
        };
        data.get(off..off + len)?;
        let offlg = u16::from_be_bytes([h[2], h[3]]);
        let is_frag = proto == 44;
        proto = h[0];
        off += len;
        if is_frag && offlg != 0 {
            frag = true;
            if offlg & 0xfff8 != 0 {
                return Some((44, off, true));
            }
        }
    }
}

/// Keys `frame` in `zone`.
pub(crate) fn parse(frame: &[u8], zone: u16) -> Result<Parsed, InvalidReason> {
    let (l2, l3) = L2Repr::parse_bytes(frame).map_err(|_| InvalidReason::L2)?;
    let ip = frame.get(l3..).ok_or(InvalidReason::L2)?;
    let mut key = ConnKey {
        zone,
        ..ConnKey::default()
    };
    let (l4, l4_len) = match l2.ethertype {
        0x0800 => {
            let p = Ipv4Packet::new_checked(ip).map_err(|_| InvalidReason::L3Header)?;
            if p.is_fragment() {
                return Err(InvalidReason::Fragment);
            }
            let hl = p.header_len();
            if !checksum::verify(ip.get(..hl).ok_or(InvalidReason::L3Header)?) {
                return Err(InvalidReason::L3Checksum);
            }
            key.src = addr4(ip, 12).ok_or(InvalidReason::L3Header)?;
            key.dst = addr4(ip, 16).ok_or(InvalidReason::L3Header)?;
            key.proto = p.protocol();
            (l3 + hl, usize::from(p.total_len()) - hl)
        }
        0x86dd => {
            let p = Ipv6Packet::new_checked(ip).map_err(|_| InvalidReason::L3Header)?;
            let plen = usize::from(p.payload_len());
            let payload = ip.get(40..40 + plen).ok_or(InvalidReason::L3Header)?;
            let (proto, off, frag) =
                ipv6_upper(p.next_header(), payload).ok_or(InvalidReason::L3Header)?;
            if frag {
                return Err(InvalidReason::Fragment);
            }
            key.v6 = true;
            key.src = addr6(ip, 8).ok_or(InvalidReason::L3Header)?;
            key.dst = addr6(ip, 24).ok_or(InvalidReason::L3Header)?;
            key.proto = proto;
            (l3 + 40 + off, plen.saturating_sub(off))
        }
        _ => return Err(InvalidReason::NotIp),
    };
    let seg = frame.get(l4..l4 + l4_len).ok_or(InvalidReason::L3Header)?;
    let mut out = Parsed {
        key,
        l3,
        l4,
        l4_len,
        related: false,
        inner_l3: 0,
        inner_l4: 0,
        tcp: None,
        icmp_type: 0,
    };
    match (key.proto, key.v6) {
        (6, _) => {
            if seg.len() < 20 {
                return Err(InvalidReason::L4Header);
            }
            let hl = usize::from(seg[12] >> 4) * 4;
            if hl < 20 || hl > seg.len() {
                return Err(InvalidReason::L4Header);
            }
            if !l4_csum_ok(key.v6, &key.src, &key.dst, 6, seg) {
                return Err(InvalidReason::L4Checksum);
            }
            out.key.sport = be16(seg, 0).unwrap_or(0);
            out.key.dport = be16(seg, 2).unwrap_or(0);
            if out.key.sport == 0 || out.key.dport == 0 {
                return Err(InvalidReason::PortZero);
            }
            out.tcp = Some(TcpInfo {
                flags: be16(seg, 12).unwrap_or(0) & 0x0fff,
                seq: be32(seg, 4).unwrap_or(0),
                ack: be32(seg, 8).unwrap_or(0),
                win: be16(seg, 14).unwrap_or(0),
                hdr_len: hl,
                payload_len: (seg.len() - hl) as u32,
            });
        }
        (17, _) => {
            if seg.len() < 8 {
                return Err(InvalidReason::L4Header);
            }
            let ulen = usize::from(be16(seg, 4).unwrap_or(0));
            if ulen < 8 || ulen > seg.len() {
                return Err(InvalidReason::L4Header);
            }
            let csum = be16(seg, 6).unwrap_or(0);
            if (csum != 0 || key.v6) && !l4_csum_ok(key.v6, &key.src, &key.dst, 17, seg) {
                return Err(InvalidReason::L4Checksum);
            }
            out.key.sport = be16(seg, 0).unwrap_or(0);
            out.key.dport = be16(seg, 2).unwrap_or(0);
            if out.key.sport == 0 || out.key.dport == 0 {
                return Err(InvalidReason::PortZero);
            }
        }
        (1, false) => {
            if !checksum::verify(seg) {
                return Err(InvalidReason::L4Checksum);
            }
            if !key_icmp_echo(seg, icmp4_reverse, &mut out)? {
                if matches!(seg[0], 3 | 4 | 5 | 11 | 12) {
                    inner_v4(frame, &mut out)?;
                } else {
                    return Err(InvalidReason::IcmpType);
                }
            }
        }
        (58, true) => {
            if !l4_csum_ok(true, &key.src, &key.dst, 58, seg) {
                return Err(InvalidReason::L4Checksum);
            }
            if !key_icmp_echo(seg, icmp6_reverse, &mut out)? {
                if matches!(seg[0], 1..=4) {
                    inner_v6(frame, &mut out)?;
                } else {
                    return Err(InvalidReason::IcmpType);
                }
            }
        }
        _ => {}
    }
    Ok(out)
}

/// The straight-line parser for the common shape: untagged Ethernet, IPv4 without options,
/// not a fragment, TCP or UDP. It makes every check [`parse`] makes for that shape (total
/// length within the frame, header checksum, L4 lengths, L4 checksum — UDP checksum 0 is
/// not verified over IPv4 — non-zero ports) and returns the same [`Parsed`]; `None` for any
/// other shape and for any packet that fails a check, so that [`parse`] decides (and says
/// why). `parse_fast(f, z) == Some(p)` implies `parse(f, z) == Ok(p)` (twin test below).
#[inline(always)]
pub(crate) fn parse_fast(frame: &[u8], zone: u16) -> Option<Parsed> {
    let h: &[u8; 34] = frame.get(..34)?.try_into().ok()?;
    // Ethertype IPv4, version 4 with IHL 5.
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
    // MF or a fragment offset: a fragment.
    if total < 20 || u16::from_be_bytes([h[20], h[21]]) & 0x3fff != 0 {
        return None;
    }
    let proto = h[23];
    if proto != 6 && proto != 17 {
        return None;
    }
    let seg = frame.get(34..14 + total)?;
    if fold(sum32(&h[14..34], 0)) != 0xffff {
        return None;
    }
    let mut key = v4_key(h, zone);
    // Pseudo header (addresses, protocol, L4 length) and segment in one accumulator.
    let sum_ok = || {
        let pseudo = sum32(&h[26..34], u64::from(proto) + seg.len() as u64);
        fold(sum32(seg, pseudo)) == 0xffff
    };
    let mut tcp = None;
    if proto == 6 {
        let t: &[u8; 20] = seg.get(..20)?.try_into().ok()?;
        let hl = usize::from(t[12] >> 4) * 4;
        if hl < 20 || hl > seg.len() || !sum_ok() {
            return None;
        }
        tcp = Some(TcpInfo {
            flags: u16::from_be_bytes([t[12], t[13]]) & 0x0fff,
            seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            ack: u32::from_be_bytes([t[8], t[9], t[10], t[11]]),
            win: u16::from_be_bytes([t[14], t[15]]),
            hdr_len: hl,
            payload_len: (seg.len() - hl) as u32,
        });
    } else {
        let u: &[u8; 8] = seg.get(..8)?.try_into().ok()?;
        let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
        if ulen < 8 || ulen > seg.len() || (u[6] | u[7] != 0 && !sum_ok()) {
            return None;
        }
    }
    key.sport = u16::from_be_bytes([seg[0], seg[1]]);
    key.dport = u16::from_be_bytes([seg[2], seg[3]]);
    if key.sport == 0 || key.dport == 0 {
        return None;
    }
    Some(Parsed {
        key,
        l3: 14,
        l4: 34,
        l4_len: total - 20,
        related: false,
        inner_l3: 0,
        inner_l4: 0,
        tcp,
        icmp_type: 0,
    })
}

/// The key of an untagged IPv4 frame whose first 34 bytes are `h` (Ethernet and an IPv4
/// header without options): zone, protocol and addresses, ports left 0. Shared by
/// [`parse_fast`] and the fast cache's prefetch hint, so both key a frame alike.
#[inline(always)]
pub(crate) fn v4_key(h: &[u8; 34], zone: u16) -> ConnKey {
    // Each address is written as one 16-byte value (not 4 bytes into a zeroed array), so
    // the 8-byte loads of the key hash that follow forward from a single store instead of
    // stalling on two partial ones (seen with `perf annotate` on the firewall bench).
    let a4 = |b: [u8; 4]| u128::from(u32::from_le_bytes(b)).to_le_bytes();
    ConnKey {
        zone,
        proto: h[23],
        src: a4([h[26], h[27], h[28], h[29]]),
        dst: a4([h[30], h[31], h[32], h[33]]),
        ..ConnKey::default()
    }
}

/// Adds `data`, as big-endian 16-bit words (an odd last byte padded with zero), to the
/// unfolded ones'-complement accumulator `acc`: eight bytes at a time as two 32-bit halves
/// into 64 bits (no carry handling needed below 2^32 words). Equals [`checksum::sum`] after
/// [`fold`] (twin test below).
#[inline]
pub(crate) fn sum32(data: &[u8], mut acc: u64) -> u64 {
    let (chunks, rest) = data.as_chunks::<8>();
    for c in chunks {
        let w = u64::from_be_bytes(*c);
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    let (words, tail) = rest.as_chunks::<2>();
    for w in words {
        acc += u64::from(u16::from_be_bytes(*w));
    }
    if let Some(&b) = tail.first() {
        acc += u64::from(b) << 8;
    }
    acc
}

/// Folds an accumulator of [`sum32`] to 16 bits (end-around carry), branch-free.
#[inline]
pub(crate) fn fold(acc: u64) -> u16 {
    let x = (acc & 0xffff_ffff) + (acc >> 32);
    let x = (x & 0xffff) + (x >> 16);
    let x = (x & 0xffff) + (x >> 16);
    let x = (x & 0xffff) + (x >> 16);
    x as u16
}

/// Keys the L4 header of an inner packet (no checksum, short length rules).
fn inner_l4(key: &mut ConnKey, l4: &[u8], tcp_min: usize) -> Result<(), InvalidReason> {
    match (key.proto, key.v6) {
        (6, _) | (17, _) => {
            let min = if key.proto == 6 { tcp_min } else { 8 };
            if l4.len() < min {
                return Err(InvalidReason::IcmpInner);
            }
            key.sport = be16(l4, 0).unwrap_or(0);
            key.dport = be16(l4, 2).unwrap_or(0);
            if key.sport == 0 || key.dport == 0 {
                return Err(InvalidReason::IcmpInner);
            }
        }
        (1, false) | (58, true) => {
            if l4.len() < 8 || l4[1] != 0 {
                return Err(InvalidReason::IcmpInner);
            }
            let rev = if key.v6 {
                icmp6_reverse(l4[0])
            } else {
                icmp4_reverse(l4[0])
            }
            .ok_or(InvalidReason::IcmpInner)?;
            let id = be16(l4, 4).unwrap_or(0);
            key.sport = id;
            key.dport = id;
            key.stype = l4[0];
            key.dtype = rev;
        }
        _ => {}
    }
    Ok(())
}

/// ICMP/ICMPv6 header checks shared by both families (after the checksum): at least 8 bytes;
/// notes the type; an echo-like type (`reverse` names its reply) must have code 0 and is keyed
/// by its id in both directions — `Ok(true)`. `Ok(false)`: another type, for the caller.
fn key_icmp_echo(
    seg: &[u8],
    reverse: fn(u8) -> Option<u8>,
    out: &mut Parsed,
) -> Result<bool, InvalidReason> {
    if seg.len() < 8 {
        return Err(InvalidReason::L4Header);
    }
    let (ty, code) = (seg[0], seg[1]);
    out.icmp_type = ty;
    let Some(rev) = reverse(ty) else {
        return Ok(false);
    };
    if code != 0 {
        return Err(InvalidReason::IcmpType);
    }
    let id = be16(seg, 4).unwrap_or(0);
    out.key.sport = id;
    out.key.dport = id;
    out.key.stype = ty;
    out.key.dtype = rev;
    Ok(true)
}

fn inner_v4(frame: &[u8], out: &mut Parsed) -> Result<(), InvalidReason> {
    let start = out.l4 + 8;
    let end = out.l4 + out.l4_len;
    let ip = frame.get(start..end).ok_or(InvalidReason::IcmpInner)?;
    if ip.len() < 20 {
        return Err(InvalidReason::IcmpInner);
    }
    let hl = usize::from(ip[0] & 0x0f) * 4;
    if hl < 20 || ip.len() < hl {
        return Err(InvalidReason::IcmpInner);
    }
    let frag = be16(ip, 6).unwrap_or(0);
    if frag & 0x3fff != 0 {
        return Err(InvalidReason::IcmpInner);
    }
    let mut k = ConnKey {
        zone: out.key.zone,
        src: addr4(ip, 12).ok_or(InvalidReason::IcmpInner)?,
        dst: addr4(ip, 16).ok_or(InvalidReason::IcmpInner)?,
        proto: ip[9],
        ..ConnKey::default()
    };
    if k.src != out.key.dst {
        return Err(InvalidReason::IcmpInner);
    }
    inner_l4(&mut k, &ip[hl..], 8)?;
    out.key = k.reversed();
    out.related = true;
    out.inner_l3 = start;
    out.inner_l4 = start + hl;
    Ok(())
}

fn inner_v6(frame: &[u8], out: &mut Parsed) -> Result<(), InvalidReason> {
    let start = out.l4 + 8;
    let end = out.l4 + out.l4_len;
    let ip = frame.get(start..end).ok_or(InvalidReason::IcmpInner)?;
    if ip.len() < 40 {
        return Err(InvalidReason::IcmpInner);
    }
    let (proto, off, frag) = ipv6_upper(ip[6], &ip[40..]).ok_or(InvalidReason::IcmpInner)?;
    if frag {
        return Err(InvalidReason::IcmpInner);
    }
    let mut k = ConnKey {
        zone: out.key.zone,
        v6: true,
        src: addr6(ip, 8).ok_or(InvalidReason::IcmpInner)?,
        dst: addr6(ip, 24).ok_or(InvalidReason::IcmpInner)?,
        proto,
        ..ConnKey::default()
    };
    if k.src != out.key.dst {
        return Err(InvalidReason::IcmpInner);
    }
    let l4off = 40 + off;
    inner_l4(&mut k, ip.get(l4off..).unwrap_or(&[]), 20)?;
    out.key = k.reversed();
    out.related = true;
    out.inner_l3 = start;
    out.inner_l4 = start + l4off;
    Ok(())
}

/// The window-scale option of a TCP header, OVS's `tcp_get_wscale`: 0 when absent, else
/// `min(shift, 14) | 0x80`.
pub(crate) fn tcp_wscale(opts: &[u8]) -> u8 {
    let mut i = 0usize;
    let mut len = opts.len() as isize;
    let mut ws = 0u8;
    while len >= 3 {
        let Some(&kind) = opts.get(i) else { break };
        match kind {
            0 => return ws,
            1 => {
                i += 1;
                len -= 1;
            }
            _ => {
                if kind == 3 {
                    ws = opts.get(i + 2).copied().unwrap_or(0).min(14) | 0x80;
                }
                let ol = usize::from(opts.get(i + 1).copied().unwrap_or(0)).max(2);
                len -= ol as isize;
                i += ol;
            }
        }
    }
    ws
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wscale_option_parsing_matches_ovs_rules() {
        assert_eq!(tcp_wscale(&[]), 0);
        assert_eq!(tcp_wscale(&[1, 3, 3, 7]), 0x87);
        assert_eq!(tcp_wscale(&[3, 3, 20]), 0x80 | 14);
        assert_eq!(tcp_wscale(&[2, 4, 5, 0xb4, 1, 3, 3, 2]), 0x82);
        assert_eq!(tcp_wscale(&[0, 3, 3, 2]), 0);
        // Too short for a window option after the NOP: not read.
        assert_eq!(tcp_wscale(&[1, 3, 3]), 0);
    }

    fn xs(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    fn fix_checksums(f: &mut [u8]) {
        // IPv4 header checksum, then the TCP/UDP checksum over what the IP header claims.
        if f.len() < 34 || f[12..14] != [8, 0] {
            return;
        }
        let ihl = usize::from(f[14] & 0x0f) * 4;
        if ihl < 20 || f.len() < 14 + ihl {
            return;
        }
        f[24] = 0;
        f[25] = 0;
        let c = checksum::checksum(&f[14..14 + ihl]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let l4 = 14 + ihl;
        let end = 14 + total;
        if end > f.len() || end < l4 {
            return;
        }
        let off = match f[23] {
            6 if end - l4 >= 20 => 16,
            17 if end - l4 >= 8 => 6,
            _ => return,
        };
        f[l4 + off] = 0;
        f[l4 + off + 1] = 0;
        let src = std::net::IpAddr::from([f[26], f[27], f[28], f[29]]);
        let dst = std::net::IpAddr::from([f[30], f[31], f[32], f[33]]);
        let c = crate::build::l4_checksum(src, dst, f[23], &f[l4..end]);
        f[l4 + off..l4 + off + 2].copy_from_slice(&c.to_be_bytes());
    }

    #[test]
    fn sum32_agrees_with_the_simple_sum() {
        let mut s = 99u64;
        for round in 0..20_000 {
            let n = (xs(&mut s) % 200) as usize;
            let fill = xs(&mut s) % 3;
            let v: Vec<u8> = (0..n)
                .map(|_| match fill {
                    0 => 0xff,
                    1 => 0,
                    _ => xs(&mut s) as u8,
                })
                .collect();
            let start = v.len().min((xs(&mut s) % 4) as usize);
            let d = &v[start..];
            let acc = xs(&mut s) % 0x1_0000_0000;
            let want = checksum::combine(&[fold(acc), checksum::sum(d)]);
            assert_eq!(fold(sum32(d, acc)), want, "round {round}");
            assert_eq!(fold(sum32(d, 0)), checksum::sum(d), "round {round}");
        }
        assert_eq!(fold(u64::MAX), 0xffff);
    }

    /// Twin test: on real frames and random mutations of them (checksums fixed up or not),
    /// whenever the straight-line parser answers, the general parser gives the same answer;
    /// and the common shapes do take the fast path.
    #[test]
    fn fast_parser_agrees_with_the_general_one() {
        use crate::build;
        use std::net::IpAddr;
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let (a6, b6): (IpAddr, IpAddr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let base = [
            build::udp(a, b, 1000, 53, b"0123456789"),
            build::udp(a, b, 1000, 53, b""),
            build::udp(a, b, 1000, 53, b"odd"),
            build::tcp(a, b, 4000, 80, 1, 2, 0x10, 1000, &[], b"payload"),
            build::tcp(
                a,
                b,
                4000,
                80,
                1,
                0,
                0x02,
                1000,
                &[1, 1, 3, 3, 7, 0, 0, 0],
                b"",
            ),
            build::tcp(a, b, 4000, 80, 1, 2, 0x18, 1000, &[], &[7; 1400]),
            build::vlan(&build::udp(a, b, 1000, 53, b"x"), 5),
            build::udp(a6, b6, 1000, 53, b"x"),
            build::tcp(a6, b6, 4000, 80, 1, 2, 0x10, 1000, &[], b""),
            build::echo(a, b, 8, 7, 1),
        ];
        for (i, f) in base.iter().enumerate() {
            let fast = parse_fast(f, 3);
            assert_eq!(fast.is_some(), i < 6, "frame {i}");
            if let Some(p) = fast {
                assert_eq!(Ok(p), parse(f, 3), "frame {i}");
            }
        }
        let mut s = 0x1234_5678_9abc_def1u64;
        let mut fast_hits = 0;
        for round in 0..40_000 {
            let mut f = base[(xs(&mut s) % base.len() as u64) as usize].clone();
            // Mutate a few bytes of the headers, sometimes the length, sometimes pad.
            for _ in 0..(xs(&mut s) % 3) {
                let n = f.len().min(80);
                let i = (xs(&mut s) % n as u64) as usize;
                f[i] = match xs(&mut s) % 4 {
                    0 => 0,
                    1 => 0xff,
                    _ => xs(&mut s) as u8,
                };
            }
            match xs(&mut s) % 6 {
                0 => f.truncate((xs(&mut s) % (f.len() as u64 + 1)) as usize),
                1 => f.extend_from_slice(&[0xaa; 7]),
                _ => {}
            }
            if !xs(&mut s).is_multiple_of(3) {
                fix_checksums(&mut f);
            }
            let zone = (round % 3) as u16;
            if let Some(p) = parse_fast(&f, zone) {
                fast_hits += 1;
                assert_eq!(Ok(p), parse(&f, zone), "round {round}: {f:02x?}");
            } else if let Ok(p) = parse(&f, zone) {
                // The general parser accepted it: then it is not the fast path's shape.
                let shape = f.len() >= 34
                    && f[12..14] == [8, 0]
                    && f[14] == 0x45
                    && matches!(p.key.proto, 6 | 17);
                assert!(!shape, "round {round}: fast path refused {f:02x?}");
            }
        }
        assert!(fast_hits > 5_000, "{fast_hits}");
    }

    #[test]
    fn garbage_never_panics() {
        for n in 0..200usize {
            let v: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
            let _ = parse(&v, 0);
        }
    }
}
