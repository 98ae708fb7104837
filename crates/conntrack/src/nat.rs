//! NAT: choosing a translated tuple whose reply key is free, and rewriting packets.
//!
//! Why: `ct(commit,nat(src=…))` / `nat(dst=…)` translate a new connection; the translated
//! reply key is stored with the connection so that replies find it and are translated back.
//! The choice must never hand out a reply key already in use (it would merge two
//! connections).
//!
//! How (OVS 3.1 `nat_get_unique_tuple`): the address is picked in the range by a hash of the
//! connection and the range (or, without a range, the packet's own address); the source port
//! starts at the packet's own port within its class ([1,511], [600,1023] or [1024,65535]) for
//! SNAT without a port range and for DNAT, or at `min + hash % range` for an explicit range.
//! DNAT with a port range tries destination ports first, then falls back to source ports of
//! the class. Each search probes at most 128 ports from the start, wrapping in the range, then
//! — if the range is larger — up to four more rounds of 64, 32, 16, 8 probes from random
//! starts. When that finds nothing we go on where OVS gives up: an exhaustive scan of every
//! address × port of the ranges from the first choice on, capped at [`EXHAUSTIVE_PROBES`]
//! probes, so that a small range is never refused while a slot is free. Only real exhaustion
//! (or the cap) is counted, and the packet is then `+new` without a connection. ICMP and other
//! protocols only get an address (OVS 3.1 does not rewrite the ICMP echo id). `persistent`,
//! `hash` and `random` are accepted and, as in OVS's userspace datapath, have no effect.
//!
//! Where we cannot match OVS's first choice: OVS seeds its hash (and its random restarts) with
//! a per-process random basis, so within an address range or an explicit port range its
//! choice is not reproducible; ours is a fixed hash of the same inputs (documented, and
//! deterministic for tests). Without ranges — the common `nat(src=IP)` — the first choice is
//! the packet's own port and agrees with OVS.
//!
//! Plain `nat` committing a *new* connection: OVS 3.1 runs the allocator with no action bits,
//! which stores a reply key with source address 0 (and destination port 0 for TCP/UDP)
//! without rewriting the packet; we do the same so that the connection table agrees.
//!
//! Rewrites update checksums incrementally (RFC 1624, `wire::checksum`), as OVS's
//! `packet_set_*` helpers do: IPv4 header checksum, TCP/UDP (UDP only when non-zero, a
//! result of 0 becomes 0xffff) and, over IPv6, ICMPv6. For an ICMP error carrying a packet of
//! a NATed connection the inner header is translated back and the ICMP checksum recomputed.

use crate::key::{ConnKey, mix64};
use crate::parse::Parsed;
use std::net::IpAddr;
use wire::checksum;

pub(crate) const NAT_SRC: u8 = 0x01;
pub(crate) const NAT_SRC_PORT: u8 = 0x02;
pub(crate) const NAT_DST: u8 = 0x04;
pub(crate) const NAT_DST_PORT: u8 = 0x08;

/// The allocator's view of a `nat(...)` action (OVS `nat_action_info_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct NatInfo {
    pub action: u8,
    pub min_addr: [u8; 16],
    pub max_addr: [u8; 16],
    pub min_port: u16,
    pub max_port: u16,
}

impl NatInfo {
    /// As OVS's datapath builds it from the action: a missing maximum equals the minimum;
    /// a port range sets the SRC_PORT/DST_PORT bit of the kind.
    pub fn from_action(a: &crate::NatAction) -> NatInfo {
        let mut n = NatInfo::default();
        match a.kind {
            Some(flow::ofp::action::NatKind::Src) => n.action |= NAT_SRC,
            Some(flow::ofp::action::NatKind::Dst) => n.action |= NAT_DST,
            None => return n,
        }
        if let Some((lo, hi)) = a.addrs {
            n.min_addr = crate::key::ip_bytes(lo);
            n.max_addr = crate::key::ip_bytes(hi);
            if ip_gt(hi, lo) {
                n.max_addr = crate::key::ip_bytes(hi);
            } else {
                n.max_addr = n.min_addr;
            }
        }
        if let Some((lo, hi)) = a.ports
            && lo != 0
        {
            n.min_port = lo;
            n.max_port = if hi > lo { hi } else { lo };
            n.action |= if n.action & NAT_SRC != 0 {
                NAT_SRC_PORT
            } else {
                NAT_DST_PORT
            };
        }
        n
    }
}

fn ip_gt(a: IpAddr, b: IpAddr) -> bool {
    crate::key::ip_bytes(a) > crate::key::ip_bytes(b)
}

/// `nat_action_reverse`.
pub(crate) fn reverse_action(a: u8) -> u8 {
    if a & NAT_SRC != 0 {
        (a & !NAT_SRC) | NAT_DST
    } else if a & NAT_DST != 0 {
        (a & !NAT_DST) | NAT_SRC
    } else {
        a
    }
}

fn range_hash(k: &ConnKey, n: &NatInfo) -> u32 {
    let mut h: u64 = 0x5bd1_e995;
    let mut add = |w: u64| h = mix64(h ^ w);
    for b in [&n.min_addr, &n.max_addr, &k.src, &k.dst] {
        add(u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])));
        add(u64::from_le_bytes(b[8..].try_into().unwrap_or([0; 8])));
    }
    add(u64::from(n.max_port) << 16 | u64::from(n.min_port));
    add(u64::from(k.sport) | u64::from(k.dport) << 16 | u64::from(k.stype) << 32);
    add(u64::from(k.dtype)
        | u64::from(k.proto) << 8
        | u64::from(k.zone) << 16
        | u64::from(k.v6) << 32);
    h as u32
}

fn v6_delta(min: u128, max: u128) -> u32 {
    let (min_hi, min_lo) = ((min >> 64) as u64, min as u64);
    let (max_hi, max_lo) = ((max >> 64) as u64, max as u64);
    let diff: u64 = if min_hi == max_hi && min_lo <= max_lo {
        max_lo - min_lo
    } else if min_hi.wrapping_add(1) == max_hi && min_lo > max_lo {
        u64::MAX - (min_lo - max_lo - 1)
    } else {
        0xffff_fffe
    };
    diff.min(0xffff_fffe) as u32
}

fn addr_in_range(min: &[u8; 16], max: &[u8; 16], hash: u32, v6: bool) -> [u8; 16] {
    let mut out = [0u8; 16];
    if v6 {
        let lo = u128::from_be_bytes(*min);
        let range = v6_delta(lo, u128::from_be_bytes(*max)) + 1;
        let offt = hash % range;
        out = lo.wrapping_add(u128::from(offt)).to_be_bytes();
    } else {
        let lo = u32::from_be_bytes([min[0], min[1], min[2], min[3]]);
        let hi = u32::from_be_bytes([max[0], max[1], max[2], max[3]]);
        let range = hi.wrapping_sub(lo).wrapping_add(1);
        let offt = if range == 0 { hash } else { hash % range };
        out[..4].copy_from_slice(&lo.wrapping_add(offt).to_be_bytes());
    }
    out
}

#[derive(Clone, Copy)]
enum PortField {
    /// `rev_key.sport`: the destination port the original packet is sent to.
    RevSrc,
    /// `rev_key.dport`: the source port the original packet is sent from.
    RevDst,
}

fn set_port(k: &mut ConnKey, f: PortField, p: u16) {
    match f {
        PortField::RevSrc => k.sport = p,
        PortField::RevDst => k.dport = p,
    }
}

fn xorshift(s: &mut u64) -> u32 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    (*s >> 16) as u32
}

/// `nat_get_unique_l4`: probes ports from `curr`; true when a free reply key was found.
fn unique_l4(
    rev: &mut ConnKey,
    f: PortField,
    curr: u16,
    min: u16,
    max: u16,
    rng: &mut u64,
    in_use: &mut dyn FnMut(&ConnKey) -> bool,
) -> bool {
    let range = u32::from(max) - u32::from(min) + 1;
    let mut attempts = range.min(128);
    let orig = curr;
    let mut curr = curr;
    let in_r = |c: u16| c >= min && c <= max;
    loop {
        let n = if in_r(curr) { range } else { range + 1 };
        for _ in 0..n.min(attempts) {
            set_port(rev, f, curr);
            if !in_use(rev) {
                return true;
            }
            curr = if !in_r(curr) || curr == max {
                min
            } else {
                curr + 1
            };
        }
        if attempts < range && attempts >= 16 {
            attempts /= 2;
            curr = (u32::from(min) + xorshift(rng) % range) as u16;
            continue;
        }
        set_port(rev, f, orig);
        return false;
    }
}

/// OVS's `nat_get_unique_tuple`: the reply key of the translated connection, or `None` on
/// exhaustion. `in_use(k)` is true when a live connection has `k` as either of its keys.
pub(crate) fn unique_tuple(
    key: &ConnKey,
    n: &NatInfo,
    in_use: &mut dyn FnMut(&ConnKey) -> bool,
) -> Option<ConnKey> {
    let hash = range_hash(key, n);
    let mut rng = u64::from(hash) | 0x1_0000_0000;
    let addr = if n.min_addr == [0u8; 16] {
        if n.action & NAT_SRC != 0 {
            key.src
        } else if n.action & NAT_DST != 0 {
            key.dst
        } else {
            [0u8; 16]
        }
    } else {
        addr_in_range(&n.min_addr, &n.max_addr, hash, key.v6)
    };
    let (curr_s, min_s, max_s) =
        if (n.action & (NAT_SRC | NAT_SRC_PORT)) == NAT_SRC || n.action & NAT_DST != 0 {
            let c = key.sport;
            if c < 512 {
                (c, 1, 511)
            } else if c < 1024 {
                (c, 600, 1023)
            } else {
                (c, 1024, 65535)
            }
        } else {
            let r = u32::from(n.max_port) - u32::from(n.min_port) + 1;
            (
                (u32::from(n.min_port) + hash % r) as u16,
                n.min_port,
                n.max_port,
            )
        };
    let (curr_d, min_d, max_d) = if n.action & NAT_DST_PORT != 0 {
        let r = u32::from(n.max_port) - u32::from(n.min_port) + 1;
        (
            (u32::from(n.min_port) + hash % r) as u16,
            n.min_port,
            n.max_port,
        )
    } else {
        (key.dport, key.dport, key.dport)
    };
    let pat = key.is_pat();
    let mut rev = key.reversed();
    if pat {
        rev.sport = curr_d;
        rev.dport = curr_s;
    }
    if n.action & NAT_SRC != 0 {
        rev.dst = addr;
    } else {
        rev.src = addr;
    }
    if !pat {
        if !in_use(&rev) {
            return Some(rev);
        }
    } else {
        let mut found = false;
        if n.action & NAT_DST_PORT != 0 {
            found = unique_l4(
                &mut rev,
                PortField::RevSrc,
                curr_d,
                min_d,
                max_d,
                &mut rng,
                in_use,
            );
        }
        if !found {
            found = unique_l4(
                &mut rev,
                PortField::RevDst,
                curr_s,
                min_s,
                max_s,
                &mut rng,
                in_use,
            );
        }
        if found {
            return Some(rev);
        }
    }
    let ports = Ports {
        dst_range: n.action & NAT_DST_PORT != 0,
        curr_d,
        min_d,
        max_d,
        curr_s,
        min_s,
        max_s,
    };
    exhaustive(key, n, addr, &ports, in_use)
}

/// Most reply keys [`exhaustive`] probes: one whole port class (64,512 ports) of one address
/// plus slack. Each probe is an index lookup under the commit lock (~0.1 µs), so a refused
/// commit costs at most a few milliseconds. Beyond the cap a commit is refused (and counted
/// as exhausted) even if a free tuple might remain further on.
pub(crate) const EXHAUSTIVE_PROBES: u32 = 1 << 16;

/// The port ranges of one search (see [`unique_tuple`]).
struct Ports {
    dst_range: bool,
    curr_d: u16,
    min_d: u16,
    max_d: u16,
    curr_s: u16,
    min_s: u16,
    max_s: u16,
}

/// The `i`-th value of `[min, max]` counting from `curr` (wrapping).
fn nth_port(curr: u16, min: u16, max: u16, i: u32) -> u16 {
    let span = u32::from(max) - u32::from(min) + 1;
    let c = u32::from(curr.clamp(min, max)) - u32::from(min);
    (u32::from(min) + (c + i) % span) as u16
}

/// The fallback when OVS's search order (the first address, at most 248 port probes) finds
/// nothing: every address of the range from the first choice on (wrapping), and for each —
/// with DNAT port ranges — every destination port, then every source port of the class, each
/// from its first choice on, until a free reply key turns up or [`EXHAUSTIVE_PROBES`] keys
/// were probed. OVS 3.1 does not scan exhaustively (it gives up after its bounded probes);
/// we do so that a small range is never refused while a slot is free (found by the
/// differential test `nat_range_exhaustion`: 6 slots, 8 connections, only 4 committed).
fn exhaustive(
    key: &ConnKey,
    n: &NatInfo,
    first_addr: [u8; 16],
    p: &Ports,
    in_use: &mut dyn FnMut(&ConnKey) -> bool,
) -> Option<ConnKey> {
    let pat = key.is_pat();
    let mut budget = EXHAUSTIVE_PROBES;
    let mut probe = |k: &ConnKey| {
        if budget == 0 {
            return None;
        }
        budget -= 1;
        Some(!in_use(k))
    };
    // Addresses: (range minimum, offset of the first choice, how many).
    let (lo, off0, count): (u128, u64, u64) = if n.min_addr == [0u8; 16] {
        (0, 0, 1)
    } else if key.v6 {
        let lo = u128::from_be_bytes(n.min_addr);
        let cnt = u64::from(v6_delta(lo, u128::from_be_bytes(n.max_addr))) + 1;
        let off = u128::from_be_bytes(first_addr).wrapping_sub(lo) as u64;
        (lo, off, cnt)
    } else {
        let a4 = |a: &[u8; 16]| u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
        let lo = a4(&n.min_addr);
        let cnt = u64::from(a4(&n.max_addr).wrapping_sub(lo)) + 1;
        let off = u64::from(a4(&first_addr).wrapping_sub(lo));
        (u128::from(lo), off, cnt)
    };
    let mut rev = key.reversed();
    for i in 0..count {
        let addr = if n.min_addr == [0u8; 16] {
            first_addr
        } else {
            let o = u128::from((off0 + i) % count);
            if key.v6 {
                lo.wrapping_add(o).to_be_bytes()
            } else {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&((lo + o) as u32).to_be_bytes());
                b
            }
        };
        if n.action & NAT_SRC != 0 {
            rev.dst = addr;
        } else {
            rev.src = addr;
        }
        if !pat {
            if probe(&rev)? {
                return Some(rev);
            }
            continue;
        }
        if p.dst_range {
            rev.dport = p.curr_s;
            let span = u32::from(p.max_d) - u32::from(p.min_d) + 1;
            for j in 0..span {
                rev.sport = nth_port(p.curr_d, p.min_d, p.max_d, j);
                if probe(&rev)? {
                    return Some(rev);
                }
            }
        }
        rev.sport = p.curr_d;
        let span = u32::from(p.max_s) - u32::from(p.min_s) + 1;
        for j in 0..span {
            rev.dport = nth_port(p.curr_s, p.min_s, p.max_s, j);
            if probe(&rev)? {
                return Some(rev);
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// Packet rewriting.

fn get16(f: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]))
}

fn put16(f: &mut [u8], off: usize, v: u16) {
    if let Some(s) = f.get_mut(off..off + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// Header offsets of one IP packet inside the frame (outer, or the inner one of an ICMP
/// error), bounded by `end`.
#[derive(Debug, Clone, Copy)]
struct Hdr {
    l3: usize,
    l4: usize,
    end: usize,
    v6: bool,
    proto: u8,
}

/// `packet_set_ipv4_addr` / `packet_set_ipv6_addr`: sets the source (`src`) or destination
/// address, fixing the IPv4 header checksum and the L4 checksum.
fn set_addr(f: &mut [u8], h: Hdr, src: bool, new: &[u8; 16]) {
    let l4_size = h.end.saturating_sub(h.l4);
    if h.v6 {
        let off = h.l3 + if src { 8 } else { 24 };
        let Some(old) = f.get(off..off + 16).map(|s| {
            let mut a = [0u8; 16];
            a.copy_from_slice(s);
            a
        }) else {
            return;
        };
        let csum_off = match h.proto {
            6 if l4_size >= 20 => Some(h.l4 + 16),
            17 if l4_size >= 8 => Some(h.l4 + 6),
            58 if l4_size >= 4 => Some(h.l4 + 2),
            _ => None,
        };
        if let Some(co) = csum_off
            && let Some(c) = get16(f, co)
            && (h.proto != 17 || c != 0)
        {
            let mut n = checksum::update128(c, old, *new);
            if h.proto == 17 && n == 0 {
                n = 0xffff;
            }
            put16(f, co, n);
        }
        if let Some(s) = f.get_mut(off..off + 16) {
            s.copy_from_slice(new);
        }
    } else {
        let off = h.l3 + if src { 12 } else { 16 };
        let Some(old) = f
            .get(off..off + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        else {
            return;
        };
        let newv = u32::from_be_bytes([new[0], new[1], new[2], new[3]]);
        let csum_off = match h.proto {
            6 if l4_size >= 20 => Some(h.l4 + 16),
            17 if l4_size >= 8 => Some(h.l4 + 6),
            _ => None,
        };
        if let Some(co) = csum_off
            && let Some(c) = get16(f, co)
            && (h.proto != 17 || c != 0)
        {
            let mut n = checksum::update32(c, old, newv);
            if h.proto == 17 && n == 0 {
                n = 0xffff;
            }
            put16(f, co, n);
        }
        if let Some(c) = get16(f, h.l3 + 10) {
            put16(f, h.l3 + 10, checksum::update32(c, old, newv));
        }
        if let Some(s) = f.get_mut(off..off + 4) {
            s.copy_from_slice(&new[..4]);
        }
    }
}

/// `pat_packet`: TCP/UDP ports to `sport`/`dport`, checksum fixed.
fn set_ports(f: &mut [u8], h: Hdr, sport: u16, dport: u16) {
    let csum_off = match h.proto {
        6 => h.l4 + 16,
        17 => h.l4 + 6,
        _ => return,
    };
    let csum = get16(f, csum_off);
    let udp_nocsum = h.proto == 17 && csum == Some(0);
    let mut c = csum;
    for (off, new) in [(h.l4, sport), (h.l4 + 2, dport)] {
        let Some(old) = get16(f, off) else { return };
        if old != new {
            if !udp_nocsum && let Some(cv) = c {
                c = Some(checksum::update16(cv, old, new));
            }
            put16(f, off, new);
        }
    }
    if !udp_nocsum && let Some(mut cv) = c {
        if h.proto == 17 && cv == 0 {
            cv = 0xffff;
        }
        // A truncated inner header may lack its checksum field: only write what exists
        // within the region.
        if csum_off + 2 <= h.end {
            put16(f, csum_off, cv);
        }
    }
}

/// `nat_packet`: translates `f` for a connection with keys `key`/`rev_key` and NAT bits
/// `nat`, in the `reply` direction or not. Returns the ct_state bit to add
/// (`SRC_NAT`/`DST_NAT`, or 0).
pub(crate) fn nat_packet(
    f: &mut [u8],
    p: &Parsed,
    key: &ConnKey,
    rev_key: &ConnKey,
    nat: u8,
    reply: bool,
) -> u32 {
    use flow::field::ct_state;
    let k = if reply { key } else { rev_key };
    let action = if reply { reverse_action(nat) } else { nat };
    let bit = if action & NAT_SRC != 0 {
        ct_state::SRC_NAT
    } else if action & NAT_DST != 0 {
        ct_state::DST_NAT
    } else {
        0
    };
    let outer_proto = if p.related {
        if p.key.v6 { 58 } else { 1 }
    } else {
        p.key.proto
    };
    let outer = Hdr {
        l3: p.l3,
        l4: p.l4,
        end: p.l4 + p.l4_len,
        v6: p.key.v6,
        proto: outer_proto,
    };
    if action & NAT_SRC != 0 {
        set_addr(f, outer, true, &k.dst);
    } else if action & NAT_DST != 0 {
        set_addr(f, outer, false, &k.src);
    }
    if action & (NAT_SRC | NAT_DST) != 0 {
        if p.related {
            nat_inner(f, p, outer, k, reverse_action(action));
        } else if k.is_pat() {
            set_ports(f, outer, k.dport, k.sport);
        }
    }
    bit
}

/// `nat_inner_packet`: the packet inside an ICMP error, then the ICMP checksum.
fn nat_inner(f: &mut [u8], p: &Parsed, outer: Hdr, k: &ConnKey, action: u8) {
    let rev = k.reversed();
    let inner = Hdr {
        l3: p.inner_l3,
        l4: p.inner_l4,
        end: outer.end,
        v6: p.key.v6,
        proto: p.key.proto,
    };
    if rev.is_pat() {
        set_ports(f, inner, rev.dport, rev.sport);
    }
    if action & NAT_SRC != 0 {
        set_addr(f, inner, true, &rev.dst);
    } else if action & NAT_DST != 0 {
        set_addr(f, inner, false, &rev.src);
    }
    // Full ICMP checksum over the (outer) ICMP message.
    put16(f, outer.l4 + 2, 0);
    let Some(seg) = f.get(outer.l4..outer.end) else {
        return;
    };
    let c = if outer.v6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        if let (Some(a), Some(b)) = (
            f.get(outer.l3 + 8..outer.l3 + 24),
            f.get(outer.l3 + 24..outer.l3 + 40),
        ) {
            s.copy_from_slice(a);
            d.copy_from_slice(b);
        }
        !checksum::combine(&[
            checksum::pseudo_header_v6(s.into(), d.into(), 58, seg.len() as u32),
            checksum::sum(seg),
        ])
    } else {
        checksum::checksum(seg)
    };
    put16(f, outer.l4 + 2, c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn key(sport: u16) -> ConnKey {
        let mut k = ConnKey {
            proto: 17,
            sport,
            dport: 53,
            ..ConnKey::default()
        };
        k.src[..4].copy_from_slice(&[10, 0, 0, 1]);
        k.dst[..4].copy_from_slice(&[10, 0, 0, 2]);
        k
    }

    fn snat(addr: [u8; 4], ports: Option<(u16, u16)>) -> NatInfo {
        let mut n = NatInfo {
            action: NAT_SRC,
            ..NatInfo::default()
        };
        n.min_addr[..4].copy_from_slice(&addr);
        n.max_addr = n.min_addr;
        if let Some((a, b)) = ports {
            n.min_port = a;
            n.max_port = b;
            n.action |= NAT_SRC_PORT;
        }
        n
    }

    /// The trivially correct twin of the allocator for ranges of at most 128 ports: a
    /// linear scan from the allocator's first choice, wrapping once.
    fn brute(k: &ConnKey, n: &NatInfo, used: &HashSet<ConnKey>) -> Option<ConnKey> {
        let first = unique_tuple(k, n, &mut |_| false)?;
        let (lo, hi) = if n.action & NAT_SRC_PORT != 0 {
            (n.min_port, n.max_port)
        } else {
            (1024, 65535)
        };
        let span = u32::from(hi) - u32::from(lo) + 1;
        for i in 0..span.min(128) {
            let p = lo + ((u32::from(first.dport - lo) + i) % span) as u16;
            let mut c = first;
            c.dport = p;
            if !used.contains(&c) {
                return Some(c);
            }
        }
        None
    }

    #[test]
    fn snat_without_ports_keeps_the_source_port_first() {
        let k = key(40000);
        let r = unique_tuple(&k, &snat([1, 1, 1, 1], None), &mut |_| false).expect("tuple");
        assert_eq!(r.dport, 40000);
        assert_eq!(&r.dst[..4], &[1, 1, 1, 1]);
        assert_eq!(r.sport, 53);
        let r2 = unique_tuple(&k, &snat([1, 1, 1, 1], None), &mut |c| *c == r).expect("tuple");
        assert_eq!(r2.dport, 40001);
    }

    #[test]
    fn allocator_agrees_with_brute_force_on_small_ranges() {
        let mut seed = 7u64;
        for round in 0..300 {
            let lo = 1000 + (xorshift(&mut seed) % 100) as u16;
            let hi = lo + (xorshift(&mut seed) % 40) as u16;
            let n = snat([2, 2, 2, 2], Some((lo, hi)));
            let k = key(30000 + round);
            let first = unique_tuple(&k, &n, &mut |_| false).expect("first");
            let mut used = HashSet::new();
            for p in lo..=hi {
                if !xorshift(&mut seed).is_multiple_of(3) {
                    let mut c = first;
                    c.dport = p;
                    used.insert(c);
                }
            }
            let got = unique_tuple(&k, &n, &mut |c| used.contains(c));
            assert_eq!(got, brute(&k, &n, &used), "round {round}");
            if let Some(g) = got {
                assert!(!used.contains(&g));
                assert!(g.dport >= lo && g.dport <= hi);
            }
        }
    }

    fn snat_range(a: [u8; 4], b: [u8; 4], ports: (u16, u16)) -> NatInfo {
        let mut n = snat(a, Some(ports));
        n.max_addr[..4].copy_from_slice(&b);
        n
    }

    /// The trivially correct twin with address ranges: OVS's order first (the allocator's
    /// first address, a linear scan of ≤ 128 ports from its first port), then every address
    /// from the first one on and every port from the first port on; `None` only when every
    /// tuple of the ranges is used.
    fn brute_all(k: &ConnKey, n: &NatInfo, used: &HashSet<ConnKey>) -> Option<ConnKey> {
        if let Some(c) = brute(k, n, used) {
            return Some(c);
        }
        let first = unique_tuple(k, n, &mut |_| false)?;
        let a4 = |a: &[u8]| u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
        let (lo, hi) = (a4(&n.min_addr), a4(&n.max_addr));
        let (plo, phi) = (n.min_port, n.max_port);
        let na = hi - lo + 1;
        let np = u32::from(phi - plo) + 1;
        for i in 0..na {
            let a = lo + (a4(&first.dst) - lo + i) % na;
            for j in 0..np {
                let mut c = first;
                c.dst[..4].copy_from_slice(&a.to_be_bytes());
                c.dport = plo + ((u32::from(first.dport - plo) + j) % np) as u16;
                if !used.contains(&c) {
                    return Some(c);
                }
            }
        }
        None
    }

    #[test]
    fn allocator_with_address_ranges_agrees_with_brute_force() {
        let mut seed = 11u64;
        for round in 0..500u16 {
            let na = 1 + (xorshift(&mut seed) % 4) as u8;
            let lo = 1000 + (xorshift(&mut seed) % 100) as u16;
            let hi = lo + (xorshift(&mut seed) % 6) as u16;
            let n = snat_range([9, 9, 9, 1], [9, 9, 9, na], (lo, hi));
            let k = key(20000 + round);
            let first = unique_tuple(&k, &n, &mut |_| false).expect("first");
            // Use up a random share (sometimes all) of the slots.
            let dense = xorshift(&mut seed) % 4;
            let mut used = HashSet::new();
            for a in 1..=na {
                for p in lo..=hi {
                    if dense == 0 || !xorshift(&mut seed).is_multiple_of(dense + 1) {
                        let mut c = first;
                        c.dst[3] = a;
                        c.dport = p;
                        used.insert(c);
                    }
                }
            }
            let got = unique_tuple(&k, &n, &mut |c| used.contains(c));
            assert_eq!(got, brute_all(&k, &n, &used), "round {round}");
            let free = (1..=na).any(|a| {
                (lo..=hi).any(|p| {
                    let mut c = first;
                    c.dst[3] = a;
                    c.dport = p;
                    !used.contains(&c)
                })
            });
            assert_eq!(got.is_some(), free, "round {round}");
            if let Some(g) = got {
                assert!(!used.contains(&g));
                assert!(g.dport >= lo && g.dport <= hi && (1..=na).contains(&g.dst[3]));
            }
        }
    }

    /// The differential test's `nat_range_exhaustion`: 8 connections into 2 addresses × 3
    /// ports get exactly 6 distinct tuples, then exhaustion.
    #[test]
    fn small_range_fills_every_slot() {
        let n = snat_range([10, 0, 0, 100], [10, 0, 0, 101], (1000, 1002));
        let mut used = HashSet::new();
        let mut got = 0;
        for i in 0..8 {
            let mut k = key(1000 + i);
            k.dport = 2000;
            if let Some(r) = unique_tuple(&k, &n, &mut |c| {
                used.contains(&(c.dst, c.dport)) // the reply key's translated endpoint
            }) {
                assert!(used.insert((r.dst, r.dport)));
                got += 1;
            }
        }
        assert_eq!(got, 6);
    }

    #[test]
    fn exhaustive_scan_is_capped() {
        // A /8 of addresses without ports (ICMP-like: no PAT), all used: the scan stops at
        // the cap.
        let mut n = snat([10, 0, 0, 0], None);
        n.max_addr[..4].copy_from_slice(&[10, 255, 255, 255]);
        let mut k = key(1);
        k.proto = 47;
        k.sport = 0;
        k.dport = 0;
        let mut probes = 0u32;
        assert_eq!(
            unique_tuple(&k, &n, &mut |_| {
                probes += 1;
                true
            }),
            None
        );
        assert_eq!(probes, 1 + EXHAUSTIVE_PROBES);
    }

    #[test]
    fn exhaustion_is_reported_and_never_hands_out_a_used_key() {
        let n = snat([3, 3, 3, 3], Some((5000, 5003)));
        let k = key(1234);
        assert_eq!(unique_tuple(&k, &n, &mut |_| true), None);
        let mut used = HashSet::new();
        for _ in 0..4 {
            let r = unique_tuple(&k, &n, &mut |c| used.contains(c)).expect("free");
            assert!(used.insert(r));
        }
        assert_eq!(unique_tuple(&k, &n, &mut |c| used.contains(c)), None);
    }

    #[test]
    fn v6_delta_limits() {
        assert_eq!(v6_delta(1, 5), 4);
        assert_eq!(v6_delta(0, u128::MAX), 0xffff_fffe);
        assert_eq!(
            v6_delta((1u128 << 64) | 10, (2u128 << 64) | 3),
            u64::MAX as u32 & 0xffff_fffe
        );
    }
}
