//! Packet bytes → [`FlowKey`]: Open vSwitch's `miniflow_extract`, written word by word.
//!
//! [`extract`] fills every word of a key from an Ethernet frame and its [`PacketMeta`] and
//! returns the [`WordMap`] of the key's non-zero words (exactly those: hashing the key under
//! that map is then a function of the key alone). [`extract_batch`] and [`extract_hash_batch`]
//! do the same for a burst (up to [`MAX_BATCH`] packets is the intended size; any length
//! works), the latter also hashing each key with [`crate::hash`] under one CPU detection.
//!
//! # Behaviour (what OVS 3.1 `lib/flow.c` does, and so do we)
//!
//! - **Metadata**: `in_port`, `recirc_id`, `dp_hash`, `pkt_mark` always. The conntrack words
//!   (`ct_state`, `ct_zone`, `ct_mark`, `ct_label`) only when `ct_state != 0`; otherwise they
//!   stay zero whatever the metadata holds. `metadata` and the registers are zero.
//! - **Ethernet**: a frame shorter than 14 bytes yields metadata only (even `dl_type` is 0).
//!   Up to [`MAX_VLAN_HEADERS`] tags with TPID 0x8100 or 0x88a8 are taken, each only if 6
//!   bytes (tag + next type) remain; the tag is stored as `tpid:16, tci:16` with the CFI bit
//!   (0x1000) forced on as "present". [`PacketMeta::vlan_limit`] is OVS's
//!   `other_config:vlan-limit` (OVS's default is 1; ours in `PacketMeta` is 0, both tags): at
//!   limit 1 a second tag's TPID is the `dl_type` and nothing after it is parsed, as OVS
//!   does. A type below 0x600 is an 802.3
//!   length: with an LLC/SNAP header `aa aa 03 00 00 00` whose type is ≥ 0x600 that type is
//!   `dl_type` (and the 8 bytes are skipped); anything else gives `dl_type = 0x05ff`.
//! - **IPv4** (also when the version nibble is not 4: OVS does not check it): needs 20 bytes,
//!   `ihl*4 ≥ 20`, `ihl*4 ≤ remaining`, `ihl*4 ≤ total length ≤ remaining`; otherwise no L3
//!   field is set. Bytes past the total length (Ethernet padding) are ignored. `nw_frag`:
//!   `FRAG_ANY` if MF or offset ≠ 0, plus `FRAG_LATER` if offset ≠ 0. Options are skipped.
//! - **IPv6**: needs 40 bytes and `40 + payload length ≤ remaining`. Addresses are set first;
//!   then hop-by-hop (0), routing (43), destination options (60) (length `(len+1)*8`), AH
//!   (51, length `(len+2)*4`) and fragment (44, 8 bytes) headers are skipped, each needing 8
//!   bytes and its full length inside the payload; if one does not fit, the addresses stay
//!   but the `ipv6_label`/`nw_*` word is left zero. A fragment header with offset/flags ≠ 0
//!   sets `FRAG_ANY`; with offset ≠ 0 also `FRAG_LATER`, and `nw_proto` becomes 44 (the
//!   fragment header) with no L4. `nw_tos` = traffic class, `nw_ttl` = hop limit, `ipv6_label`
//!   = low 20 bits of the first word.
//! - **ARP/RARP** (0x0806/0x8035): only if 28 bytes remain and hrd=1, pro=0x0800, hln=6,
//!   pln=4; then spa/tpa → `nw_src`/`nw_dst`, sha/tha → `arp_sha`/`arp_tha`, and the opcode
//!   → `nw_proto` only if it is ≤ 255.
//! - **L4** (not for later fragments), the payload bounded by the IP length:
//!   TCP needs 20 bytes, data offset ≥ 5 and `offset*4 ≤ remaining` → ports and `tcp_flags` =
//!   low 12 bits of the offset/flags half-word (NS included); UDP 8 bytes, SCTP 12 → ports;
//!   ICMP and IGMP 8 bytes → type in `tp_src`, code in `tp_dst`; ICMPv6 8 bytes → type/code,
//!   and for neighbour solicitation/advertisement (type 135/136, code 0): `nd_target` if 16
//!   more bytes remain, then options while ≥ 8 bytes remain: a zero length or one past the end
//!   stops (keeping what was found); an 8-byte source (1) / target (2) link-layer option sets
//!   `arp_sha` / `arp_tha` if still zero, a second one makes the packet invalid: `nd_target`,
//!   `arp_sha`, `arp_tha` all go back to zero. As in OVS, the type of the first link-layer
//!   option found (1 or 2, OVS's `nd_options_type`) is stored in the `tcp_flags` bits of an
//!   ND packet, and is kept even when the options turn out invalid.
//! - **Conntrack original tuple** (only with `ct_state != 0`, as current OVS master): an IPv4
//!   packet takes `ct_nw_proto` from a [`CtOrigTuple::V4`] (0 otherwise) and, if it is
//!   non-zero, `ct_nw_src/dst`; an IPv6 packet takes `ct_nw_proto` from a
//!   [`CtOrigTuple::V6`] (our key has no room for the IPv6 original addresses).
//!   `ct_tp_src/dst` are set only when that protocol was non-zero and the packet's own L4
//!   header was parsed as TCP, UDP, SCTP, ICMP or non-ND ICMPv6 (never for IGMP), or, for a
//!   later fragment, when `ct_nw_proto` is one of those (ICMPv6 unless the fragment's first
//!   two bytes look like ND).
//!
//! Truncation anywhere keeps what was parsed before the short header, exactly as OVS: the
//! outer layers' words are set, the short layer's are zero.
//!
//! # Invariants
//!
//! - Never panics, whatever the bytes (tested on random and truncated packets).
//! - Every word of the key is written (no stale data from a reused key); spare and pad bits
//!   are zero; the returned map has bit `i` set iff word `i` is non-zero.

use crate::field::{FRAG_ANY, FRAG_LATER, VLAN_CFI};
use crate::hash::{Crc32c, CrcTask, close, run_best};
use crate::key::{FLOW_WORDS, FlowKey, WordMap, w};

/// Intended burst size for the batch functions.
pub const MAX_BATCH: usize = 32;

/// VLAN tags parsed (OVS `FLOW_MAX_VLAN_HEADERS`).
pub const MAX_VLAN_HEADERS: usize = 2;

/// Ethernet types that extraction looks at.
pub mod eth_type {
    #![allow(missing_docs)]
    pub const IP: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const RARP: u16 = 0x8035;
    pub const IPV6: u16 = 0x86dd;
    pub const VLAN_8021Q: u16 = 0x8100;
    pub const VLAN_8021AD: u16 = 0x88a8;
    /// Smallest value that is a type rather than an 802.3 length.
    pub const MIN: u16 = 0x0600;
    /// `dl_type` of an 802.3 frame without an Ethernet SNAP header (OVS `FLOW_DL_TYPE_NONE`).
    pub const NONE: u16 = 0x05ff;
}

/// IP protocol numbers that extraction looks at.
pub mod ip_proto {
    #![allow(missing_docs)]
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const IGMP: u8 = 2;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const DSTOPTS: u8 = 60;
    pub const SCTP: u8 = 132;
}

/// The original-direction tuple of a tracked connection (OVS `ct_orig_tuple`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CtOrigTuple {
    /// None known.
    #[default]
    None,
    /// An IPv4 connection.
    V4 {
        /// Source address.
        src: u32,
        /// Destination address.
        dst: u32,
        /// IP protocol.
        proto: u8,
        /// Source port (ICMP: type).
        tp_src: u16,
        /// Destination port (ICMP: code).
        tp_dst: u16,
    },
    /// An IPv6 connection (addresses are not part of our key).
    V6 {
        /// IP protocol.
        proto: u8,
        /// Source port.
        tp_src: u16,
        /// Destination port.
        tp_dst: u16,
    },
}

/// What the datapath knows about a packet besides its bytes (OVS `struct pkt_metadata`).
///
/// `repr(C)` with each key word's low half first, so that a key word is one 64-bit load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PacketMeta {
    /// Recirculation id (0 on first pass).
    pub recirc_id: u32,
    /// Input port.
    pub in_port: u32,
    /// Packet mark.
    pub pkt_mark: u32,
    /// Datapath hash computed by a `hash` action.
    pub dp_hash: u32,
    /// Conntrack state bits; 0 = not tracked (then the other `ct_*` are ignored).
    pub ct_state: u32,
    /// Conntrack zone.
    pub ct_zone: u16,
    /// Conntrack mark.
    pub ct_mark: u32,
    /// Conntrack label.
    pub ct_label: u128,
    /// Conntrack original-direction tuple.
    pub ct_orig: CtOrigTuple,
    /// VLAN headers parsed (OVS `other_config:vlan-limit`): 1 = the outer tag only; 0 (and
    /// anything ≥ 2) = as many as the key holds ([`MAX_VLAN_HEADERS`]).
    pub vlan_limit: u8,
}

impl PacketMeta {
    /// Metadata of a packet just received on `in_port`.
    pub const fn port(in_port: u32) -> PacketMeta {
        PacketMeta {
            recirc_id: 0,
            in_port,
            pkt_mark: 0,
            dp_hash: 0,
            ct_state: 0,
            ct_zone: 0,
            ct_mark: 0,
            ct_label: 0,
            ct_orig: CtOrigTuple::None,
            vlan_limit: 0,
        }
    }

    /// The same with VLAN limit `limit` (OVS `vlan-limit`: 0 or ≥ 2 = every tag the key holds).
    pub const fn with_vlan_limit(mut self, limit: u8) -> PacketMeta {
        self.vlan_limit = limit;
        self
    }
}

/// Big-endian loads at a fixed offset. Callers check the length first, so the `None` arms
/// are unreachable and, on fixed-size arrays, compiled away; they exist so that a wrong
/// offset is a zero, never a panic.
#[inline(always)]
fn be16(b: &[u8], o: usize) -> u16 {
    match b.get(o..).and_then(<[u8]>::first_chunk::<2>) {
        Some(a) => u16::from_be_bytes(*a),
        None => 0,
    }
}

#[inline(always)]
fn be32(b: &[u8], o: usize) -> u32 {
    match b.get(o..).and_then(<[u8]>::first_chunk::<4>) {
        Some(a) => u32::from_be_bytes(*a),
        None => 0,
    }
}

#[inline(always)]
fn be64(b: &[u8], o: usize) -> u64 {
    match b.get(o..).and_then(<[u8]>::first_chunk::<8>) {
        Some(a) => u64::from_be_bytes(*a),
        None => 0,
    }
}

/// A MAC address followed by 2 other bytes, as a key word (`mac:48, pad:16`).
#[inline(always)]
fn mac_word(b: &[u8], o: usize) -> u64 {
    be64(b, o) & !0xffff
}

#[inline(always)]
fn is_vlan(t: u16) -> bool {
    t == eth_type::VLAN_8021Q || t == eth_type::VLAN_8021AD
}

/// `b[from..]`, or empty.
#[inline(always)]
fn tail(b: &[u8], from: usize) -> &[u8] {
    b.get(from..).unwrap_or_default()
}

/// Extracts `packet` with `meta` into `key` (every word written) and returns the map of the
/// key's non-zero words. Never panics.
#[inline]
pub fn extract(packet: &[u8], meta: &PacketMeta, key: &mut FlowKey) -> WordMap {
    WordMap(fill(packet, meta, &mut key.w, NoHash).0)
}

/// [`extract`] for each packet: `keys[i]`, `maps[i]` from `packets[i]`, `metas[i]`, for every
/// `i` all four slices share; returns how many.
pub fn extract_batch<P: AsRef<[u8]>>(
    packets: &[P],
    metas: &[PacketMeta],
    keys: &mut [FlowKey],
    maps: &mut [WordMap],
) -> usize {
    let mut n = 0;
    for (((p, md), k), m) in packets
        .iter()
        .zip(metas)
        .zip(keys.iter_mut())
        .zip(maps.iter_mut())
    {
        *m = WordMap(fill(p.as_ref(), md, &mut k.w, NoHash).0);
        n += 1;
    }
    n
}

/// [`extract_batch`] plus `hashes[i] = hash_key(&keys[i], maps[i], basis)`, with one CPU
/// detection for the batch; returns how many packets were done (the shortest slice).
pub fn extract_hash_batch<P: AsRef<[u8]>>(
    packets: &[P],
    metas: &[PacketMeta],
    keys: &mut [FlowKey],
    maps: &mut [WordMap],
    hashes: &mut [u32],
    basis: u32,
) -> usize {
    run_best(ExtractHash {
        packets,
        metas,
        keys,
        maps,
        hashes,
        basis,
    })
}

struct ExtractHash<'a, P> {
    packets: &'a [P],
    metas: &'a [PacketMeta],
    keys: &'a mut [FlowKey],
    maps: &'a mut [WordMap],
    hashes: &'a mut [u32],
    basis: u32,
}

impl<P: AsRef<[u8]>> CrcTask for ExtractHash<'_, P> {
    type Output = usize;
    #[inline(always)]
    fn run<C: Crc32c>(self, c: C) -> usize {
        // A first pass is all untracked packets, a recirculated pass after `ct` all tracked
        // ones: each gets a loop with its extraction inlined here, where the engine's CRC
        // instructions inline too (an out-of-line `fill_tracked` is compiled without the
        // engine's target features and calls every CRC step). A mixed batch takes `fill`.
        let n = self.packets.len().min(self.metas.len());
        let tracked = self.metas[..n].iter().filter(|md| md.ct_state != 0).count();
        if tracked == 0 {
            self.fill_all::<C, UNTRACKED>(c)
        } else if tracked == n {
            self.fill_all::<C, TRACKED>(c)
        } else {
            self.fill_all::<C, MIXED>(c)
        }
    }
}

/// `ExtractHash::fill_all` modes: every packet untracked, every packet tracked, either.
const UNTRACKED: u8 = 0;
const TRACKED: u8 = 1;
const MIXED: u8 = 2;

impl<P: AsRef<[u8]>> ExtractHash<'_, P> {
    /// Extracts and hashes every packet, all untracked, all tracked or either (`MODE`; a
    /// const so that each loop's extraction is inlined, not called through a closure).
    #[inline(always)]
    fn fill_all<C: Crc32c, const MODE: u8>(self, c: C) -> usize {
        let mut n = 0;
        let outs = self
            .keys
            .iter_mut()
            .zip(self.maps.iter_mut())
            .zip(self.hashes.iter_mut());
        for ((p, md), ((k, m), h)) in self.packets.iter().zip(self.metas).zip(outs) {
            // The words are hashed as they are written, in `hash_key`'s order.
            let acc = CrcAcc {
                c,
                h: u64::from(self.basis),
            };
            let (map, acc) = match MODE {
                UNTRACKED => fill_inner(p.as_ref(), md, &mut k.w, acc, false),
                TRACKED => fill_inner(p.as_ref(), md, &mut k.w, acc, true),
                _ => fill(p.as_ref(), md, &mut k.w, acc),
            };
            *m = WordMap(map);
            *h = close(c, acc.h, map);
            n += 1;
        }
        n
    }
}

/// Conntrack words gathered on the way, written at the end when `ct_state != 0`.
#[derive(Clone, Copy, Default)]
struct Ct {
    nw_proto: u8,
    nw: u64,
    tp: u32,
    /// Ports of the original tuple, pushed only when an L4 header is parsed.
    orig_tp: u32,
}

/// What happens to each non-zero word besides being stored: nothing, or a CRC step.
trait Acc {
    fn add(&mut self, v: u64);
}

/// No hashing.
struct NoHash;

impl Acc for NoHash {
    #[inline(always)]
    fn add(&mut self, _: u64) {}
}

/// Hashing as [`crate::hash::hash_key`] does, fed in its word order.
struct CrcAcc<C> {
    c: C,
    h: u64,
}

impl<C: Crc32c> Acc for CrcAcc<C> {
    #[inline(always)]
    fn add(&mut self, v: u64) {
        self.h = self.c.step(self.h, v);
    }
}

/// Writes words into the key, tracking the map and feeding the accumulator. Words must be
/// put in the hash's word order (packet words 16..=29 ascending, then 0..=15 ascending) and
/// each at most once; the key is zeroed first, so words never put stay zero.
struct Emit<'a, A> {
    k: &'a mut [u64; FLOW_WORDS],
    map: u64,
    acc: A,
}

// Everything the hot path calls out of line takes and returns plain values: an `Emit` or a
// `Ct` whose address escaped would live in memory, and every word would cost a load/store.

impl<A: Acc> Emit<'_, A> {
    #[inline(always)]
    fn put(&mut self, i: usize, v: u64) {
        self.k[i] = v;
        if v != 0 {
            self.map |= 1 << i;
            self.acc.add(v);
        }
    }

    /// `put` of a word known to be non-zero.
    #[inline(always)]
    fn put_nonzero(&mut self, i: usize, v: u64) {
        self.k[i] = v;
        self.map |= 1 << i;
        self.acc.add(v);
    }
}

/// The whole extraction; returns the map bits and the accumulator.
#[inline(always)]
fn fill<A: Acc>(p: &[u8], md: &PacketMeta, k: &mut [u64; FLOW_WORDS], acc: A) -> (u64, A) {
    if md.ct_state != 0 {
        fill_tracked(p, md, k, acc)
    } else {
        fill_inner(p, md, k, acc, false)
    }
}

/// [`fill`] of a tracked packet, out of line: the common path carries no conntrack code.
#[inline(never)]
fn fill_tracked<A: Acc>(p: &[u8], md: &PacketMeta, k: &mut [u64; FLOW_WORDS], acc: A) -> (u64, A) {
    fill_inner(p, md, k, acc, true)
}

#[inline(always)]
fn fill_inner<A: Acc>(
    p: &[u8],
    md: &PacketMeta,
    k: &mut [u64; FLOW_WORDS],
    acc: A,
    tracked: bool,
) -> (u64, A) {
    *k = [0; FLOW_WORDS];
    let mut e = Emit { k, map: 0, acc };
    let mut ct = Ct::default();
    packet(p, md, tracked, &mut ct, &mut e);
    e.put(
        w::IN_PORT_RECIRC,
        (u64::from(md.in_port) << 32) | u64::from(md.recirc_id),
    );
    e.put(
        w::DP_HASH_PKT_MARK,
        (u64::from(md.dp_hash) << 32) | u64::from(md.pkt_mark),
    );
    if tracked {
        let [a, b, c, d, f] = ct_words(md, &ct);
        e.put(w::CT_STATE_ZONE, a);
        e.put(w::CT_MARK_TP, b);
        e.put(w::CT_LABEL, c);
        e.put(w::CT_LABEL + 1, d);
        e.put(w::CT_NW, f);
    }
    (e.map, e.acc)
}

/// Words 11..=15 of a tracked packet.
#[cold]
fn ct_words(md: &PacketMeta, ct: &Ct) -> [u64; 5] {
    [
        (u64::from(md.ct_state) << 32)
            | (u64::from(md.ct_zone) << 16)
            | (u64::from(ct.nw_proto) << 8),
        (u64::from(md.ct_mark) << 32) | u64::from(ct.tp),
        (md.ct_label >> 64) as u64,
        md.ct_label as u64,
        ct.nw,
    ]
}

/// The packet part of [`fill`]: words 16..=29.
#[inline(always)]
fn packet<A: Acc>(p: &[u8], md: &PacketMeta, tracked: bool, ct: &mut Ct, e: &mut Emit<'_, A>) {
    let Some((eth, mut l3)) = p.split_first_chunk::<14>() else {
        return;
    };
    let src_type = be64(eth, 6);
    let mut typ = src_type as u16;
    let mut vlans = 0u64;
    // A tag needs its 4 bytes and the 2 of the next type: the TPID is in `eth`, so the tag's
    // TCI and next type must be in what follows.
    if is_vlan(typ)
        && let Some((tag, rest)) = l3.split_first_chunk::<4>()
    {
        vlans = u64::from((u32::from(typ) << 16) | u32::from(be16(tag, 0) | VLAN_CFI)) << 32;
        typ = be16(tag, 2);
        l3 = rest;
        if is_vlan(typ)
            && md.vlan_limit != 1
            && let Some((tag, rest)) = l3.split_first_chunk::<4>()
        {
            vlans |= u64::from((u32::from(typ) << 16) | u32::from(be16(tag, 0) | VLAN_CFI));
            typ = be16(tag, 2);
            l3 = rest;
        }
    }
    let dl_type = if typ >= eth_type::MIN {
        typ
    } else {
        llc_snap(&mut l3)
    };
    // dl_type is never 0 here, nor is a tag word.
    e.put_nonzero(w::DL_DST_TYPE, mac_word(eth, 0) | u64::from(dl_type));
    e.put(w::DL_SRC, src_type & !0xffff);
    if vlans != 0 {
        e.put_nonzero(w::VLANS, vlans);
    }
    if dl_type == eth_type::IP {
        ipv4(l3, md, tracked, ct, e);
    } else if dl_type == eth_type::IPV6 {
        ipv6(l3, md, tracked, ct, e);
    } else if dl_type == eth_type::ARP || dl_type == eth_type::RARP {
        arp(l3, e);
    }
}

/// 802.3 frame: the type of an Ethernet SNAP header at the start of `*l3` (then skipped), or
/// 0x05ff.
#[cold]
fn llc_snap(l3: &mut &[u8]) -> u16 {
    match l3.split_first_chunk::<8>() {
        Some((llc, rest)) if llc[..6] == [0xaa, 0xaa, 0x03, 0, 0, 0] => {
            *l3 = rest;
            let t = be16(llc, 6);
            if t >= eth_type::MIN {
                t
            } else {
                eth_type::NONE
            }
        }
        _ => eth_type::NONE,
    }
}

/// ARP for Ethernet/IPv4.
#[inline(always)]
fn arp<A: Acc>(l3: &[u8], e: &mut Emit<'_, A>) {
    let Some(a) = l3.first_chunk::<28>() else {
        return;
    };
    if be16(a, 0) != 1 || be16(a, 2) != eth_type::IP || a[4] != 6 || a[5] != 4 {
        return;
    }
    e.put(
        w::NW_ADDRS,
        (u64::from(be32(a, 14)) << 32) | u64::from(be32(a, 24)),
    );
    let op = be16(a, 6);
    e.put(w::IP_MISC, if op <= 0xff { u64::from(op) } else { 0 });
    e.put(w::ARP_SHA, mac_word(a, 8));
    e.put(w::ARP_THA, mac_word(a, 18));
}

/// `nw_frag` bits of an IPv4 flags/offset half-word that is a fragment.
#[cold]
fn ipv4_frag(fo: u16) -> u8 {
    FRAG_ANY | if fo & 0x1fff != 0 { FRAG_LATER } else { 0 }
}

/// IPv4 and its L4.
#[inline(always)]
fn ipv4<A: Acc>(l3: &[u8], md: &PacketMeta, tracked: bool, ct: &mut Ct, e: &mut Emit<'_, A>) {
    let Some(h) = l3.first_chunk::<20>() else {
        return;
    };
    let size = l3.len();
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let tot = usize::from(be16(h, 2));
    // `ihl <= tot <= size` covers OVS's `ihl <= size`; one branch for all four checks.
    let ok = (ihl >= 20) & (ihl <= tot) & (tot <= size) & (size.wrapping_sub(tot) <= 0xffff);
    if !ok {
        return;
    }
    e.put(w::NW_ADDRS, be64(h, 12));
    if tracked {
        *ct = ct_orig_v4(md);
    }
    let fo = be16(h, 6);
    let frag = if fo & 0x3fff == 0 { 0 } else { ipv4_frag(fo) };
    let l4 = l3.get(ihl..tot).unwrap_or_default();
    // frag:8, tos:8, then ttl:8, proto:8 straight from bytes 8..10.
    let misc = (u64::from(frag) << 24) | (u64::from(h[1]) << 16) | u64::from(be16(h, 8));
    ip_l4(l4, misc, h[9], tracked, ct, e);
}

#[cold]
fn ct_orig_v4(md: &PacketMeta) -> Ct {
    let mut ct = Ct::default();
    if let CtOrigTuple::V4 {
        src,
        dst,
        proto,
        tp_src,
        tp_dst,
    } = md.ct_orig
    {
        ct.nw_proto = proto;
        if proto != 0 {
            ct.nw = (u64::from(src) << 32) | u64::from(dst);
            ct.orig_tp = (u32::from(tp_src) << 16) | u32::from(tp_dst);
        }
    }
    ct
}

#[cold]
fn ct_orig_v6(md: &PacketMeta) -> Ct {
    let mut ct = Ct::default();
    if let CtOrigTuple::V6 {
        proto,
        tp_src,
        tp_dst,
    } = md.ct_orig
    {
        ct.nw_proto = proto;
        if proto != 0 {
            ct.orig_tp = (u32::from(tp_src) << 16) | u32::from(tp_dst);
        }
    }
    ct
}

/// IPv6 extension headers from `l4`, the first one of type `proto`: the transport part,
/// its protocol and `nw_frag`, or `None` if a header does not fit (OVS then drops every
/// IPv6 field but the addresses). Values in and out: nothing of the caller's escapes.
#[inline(never)]
fn ipv6_ext(mut l4: &[u8], mut proto: u8) -> Option<(&[u8], u8, u8)> {
    let mut frag = 0;
    // Each step consumes at least 8 bytes or stops, so the loop ends.
    loop {
        match proto {
            ip_proto::HOPOPTS | ip_proto::ROUTING | ip_proto::DSTOPTS | ip_proto::AH => {
                let x = l4.first_chunk::<8>()?;
                let len = if proto == ip_proto::AH {
                    (usize::from(x[1]) + 2) * 4
                } else {
                    (usize::from(x[1]) + 1) * 8
                };
                proto = x[0];
                l4 = l4.get(len..)?;
            }
            ip_proto::FRAGMENT => {
                let (x, rest) = l4.split_first_chunk::<8>()?;
                proto = x[0];
                l4 = rest;
                let offlg = be16(x, 2);
                if offlg != 0 {
                    frag = FRAG_ANY;
                    if offlg & 0xfff8 != 0 {
                        return Some((l4, ip_proto::FRAGMENT, FRAG_ANY | FRAG_LATER));
                    }
                }
            }
            _ => return Some((l4, proto, frag)),
        }
    }
}

#[inline(always)]
fn is_ipv6_ext(proto: u8) -> bool {
    matches!(
        proto,
        ip_proto::HOPOPTS
            | ip_proto::ROUTING
            | ip_proto::DSTOPTS
            | ip_proto::AH
            | ip_proto::FRAGMENT
    )
}

/// IPv6 and its L4.
#[inline(always)]
fn ipv6<A: Acc>(l3: &[u8], md: &PacketMeta, tracked: bool, ct: &mut Ct, e: &mut Emit<'_, A>) {
    let Some(h) = l3.first_chunk::<40>() else {
        return;
    };
    let size = l3.len();
    let plen = usize::from(be16(h, 4));
    if plen + 40 > size || size - (plen + 40) > 0xffff {
        return;
    }
    e.put(w::IPV6_SRC, be64(h, 8));
    e.put(w::IPV6_SRC + 1, be64(h, 16));
    e.put(w::IPV6_DST, be64(h, 24));
    e.put(w::IPV6_DST + 1, be64(h, 32));
    if tracked {
        *ct = ct_orig_v6(md);
    }
    let tc_flow = be32(h, 0);
    let payload = l3.get(40..40 + plen).unwrap_or_default();
    let (l4, proto, frag) = if is_ipv6_ext(h[6]) {
        match ipv6_ext(payload, h[6]) {
            Some(x) => x,
            None => return,
        }
    } else {
        (payload, h[6], 0)
    };
    // label:32 (low 20 bits of the first word), frag:8, tos:8 (traffic class), ttl, proto.
    let misc = (u64::from(tc_flow & 0x000f_ffff) << 32)
        | (u64::from(frag) << 24)
        | (u64::from((tc_flow >> 20) as u8) << 16)
        | (u64::from(h[7]) << 8)
        | u64::from(proto);
    ip_l4(l4, misc, proto, tracked, ct, e);
}

/// Puts the `ipv6_label`/`nw_*` word `misc`, then the transport layer.
#[inline(always)]
fn ip_l4<A: Acc>(l4: &[u8], misc: u64, proto: u8, tracked: bool, ct: &mut Ct, e: &mut Emit<'_, A>) {
    e.put(w::IP_MISC, misc);
    if misc & (u64::from(FRAG_LATER) << 24) != 0 {
        if tracked && later_fragment_ct(l4, ct.nw_proto) {
            ct.tp = ct.orig_tp;
        }
        return;
    }
    let tp = match proto {
        ip_proto::TCP => {
            let Some(t) = l4.first_chunk::<20>() else {
                return;
            };
            let ctl = be16(t, 12);
            let hl = usize::from(ctl >> 12) * 4;
            if hl < 20 || l4.len() < hl {
                return;
            }
            ct.tp = ct.orig_tp;
            (u64::from(be32(t, 0)) << 32) | (u64::from(ctl & 0x0fff) << 16)
        }
        ip_proto::UDP => {
            let Some(t) = l4.first_chunk::<8>() else {
                return;
            };
            ct.tp = ct.orig_tp;
            u64::from(be32(t, 0)) << 32
        }
        ip_proto::SCTP => {
            let Some(t) = l4.first_chunk::<12>() else {
                return;
            };
            ct.tp = ct.orig_tp;
            u64::from(be32(t, 0)) << 32
        }
        ip_proto::ICMP | ip_proto::IGMP => {
            let Some(t) = l4.first_chunk::<8>() else {
                return;
            };
            if proto == ip_proto::ICMP {
                ct.tp = ct.orig_tp;
            }
            (u64::from(t[0]) << 48) | (u64::from(t[1]) << 32)
        }
        ip_proto::ICMPV6 => {
            let Some((t, rest)) = l4.split_first_chunk::<8>() else {
                return;
            };
            let tc = (u64::from(t[0]) << 48) | (u64::from(t[1]) << 32);
            if icmp6_is_nd(t) {
                let nd = nd(rest);
                e.put(w::ARP_SHA, nd.sll);
                e.put(w::ARP_THA, nd.tll);
                e.put(w::ND_TARGET, nd.target.0);
                e.put(w::ND_TARGET + 1, nd.target.1);
                tc | (u64::from(nd.opt_type) << 16)
            } else {
                ct.tp = ct.orig_tp;
                tc
            }
        }
        _ => return,
    };
    e.put(w::TP, tp);
}

/// Whether a later fragment takes `ct_tp_src/dst` (OVS's rule on `ct_nw_proto`).
#[cold]
fn later_fragment_ct(l4: &[u8], ctp: u8) -> bool {
    matches!(
        ctp,
        ip_proto::TCP | ip_proto::UDP | ip_proto::SCTP | ip_proto::ICMP
    ) || (ctp == ip_proto::ICMPV6 && !icmp6_is_nd(l4))
}

/// Whether an ICMPv6 header (first two bytes) is a neighbour solicitation or advertisement.
#[inline(always)]
fn icmp6_is_nd(t: &[u8]) -> bool {
    matches!(t, [135 | 136, 0, ..])
}

/// Neighbour-discovery fields, as key words.
#[derive(Default)]
struct Nd {
    target: (u64, u64),
    sll: u64,
    tll: u64,
    opt_type: u8,
}

/// Parses an NS/NA body (after the 8-byte ICMPv6 header): target, then options.
#[inline(never)]
fn nd(body: &[u8]) -> Nd {
    let mut nd = Nd::default();
    let Some((target, mut opts)) = body.split_first_chunk::<16>() else {
        return nd;
    };
    nd.target = (be64(target, 0), be64(target, 8));
    while let Some(o) = opts.first_chunk::<8>() {
        let len = usize::from(o[1]) * 8;
        if len == 0 || len > opts.len() {
            break;
        }
        if len == 8 && (o[0] == 1 || o[0] == 2) {
            let slot = if o[0] == 1 { &mut nd.sll } else { &mut nd.tll };
            if *slot != 0 {
                // A repeated link-layer option: the whole ND part is invalid. The option
                // type found first stays, as in OVS.
                nd.target = (0, 0);
                nd.sll = 0;
                nd.tll = 0;
                return nd;
            }
            *slot = be64(o, 0) << 16;
            if nd.opt_type == 0 {
                nd.opt_type = o[0];
            }
        }
        opts = tail(opts, len);
    }
    nd
}

#[cfg(test)]
mod tests;
