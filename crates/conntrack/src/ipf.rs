//! IP fragment reassembly in front of the tracker, with the behaviour of Open vSwitch 3.1's
//! userspace `ipf` (`lib/ipf.c`), sans-I/O.
//!
//! # What OVS does, and so what this does
//!
//! OVS 3.1 enables reassembly for IPv4 and IPv6 by default. Before `ct` runs on a fragment,
//! `ipf` takes it: every fragment but the one that completes its datagram is **held**
//! (nothing continues down the pipeline). The completing fragment makes the tracker run on
//! the **reassembled** packet; then **all the original fragments, bytes unchanged, in offset
//! order** continue through the pipeline carrying the reassembled packet's conntrack result.
//! The reassembled packet itself is never output. Everything is keyed per datagram by
//! zone + source + destination + IP id (+ protocol for IPv4; IPv6 uses the 32-bit id of the
//! fragment header).
//!
//! Per fragment ([`Ipf::process`], OVS's `ipf_extract_frags_from_batch` → `ipf_handle_frag`):
//! - Not a fragment (no MF and offset 0; an IPv6 "atomic" fragment header with offset 0 and
//!   M=0; not IPv4/IPv6; too short to tell), or reassembly disabled for its family →
//!   [`IpfVerdict::NotFragment`]: the tracker handles it as usual (it marks any fragment
//!   `+inv`).
//! - Malformed fragment (IPv4: total length beyond the frame, IHL < 5, total length below the
//!   header, bad header checksum; IPv6: payload length beyond the frame) →
//!   [`IpfVerdict::Invalid`]: passed on, `+inv`.
//! - A non-last fragment whose IP packet (header included: IPv4 total length, IPv6
//!   40 + payload length) is below the minimum (1200 / 1280) → counted `too small`,
//!   [`IpfVerdict::TooSmall`]: passed on, `+inv`. A small *last* fragment is accepted.
//! - The global count of held fragments is at its maximum (1000), the datagram already holds
//!   its maximum number of fragments (IPv4: ⌈(65535 − 60) / (min v4 size − 60)⌉ = 58; IPv6:
//!   65535), or the datagram already failed to reassemble (too big) →
//!   [`IpfVerdict::Refused`]: passed on, `+inv`. OVS does not count these; we count them in
//!   [`IpfFamilyStats::refused`] (not part of the OVS status text).
//! - A fragment whose first **or** last data byte falls inside a fragment already held for
//!   the datagram (duplicates included) → counted `overlapped`, [`IpfVerdict::Invalid`]:
//!   passed on, `+inv`. This is OVS's exact test (`ipf_is_frag_duped`): a fragment that
//!   strictly *encloses* a held one is **accepted**, and that datagram then never completes
//!   (its held fragments are contiguous no more) and expires — faithfully reproduced.
//! - Otherwise the fragment is held (counted `accepted`). Once a first fragment (offset 0,
//!   MF) and a last one (offset ≠ 0, no MF) have been seen, the held fragments are sorted by
//!   offset; if each starts right after the previous one ends the datagram is reassembled →
//!   [`IpfVerdict::Complete`] (counted `completed`, per fragment). If the reassembled packet
//!   would exceed 65535 bytes (IPv4 total length; IPv6 payload length), the datagram is
//!   marked failed: its fragments stay held until they expire, and later fragments of it are
//!   refused ([`IpfFamilyStats::reassembly_failed`] counts such datagrams, ours too). The
//!   fragment that caused the failure is [`IpfVerdict::Held`], as in OVS.
//!
//! The reassembled frame is a frame the tracker parses: the first fragment's Ethernet
//! header, tags and IP header, then every fragment's data in order (L2 padding dropped).
//! IPv4: MF cleared (DF kept), offset 0, total length and header checksum fixed. IPv6: the
//! fragment header is removed, the next-header field that pointed at it (the fixed header's
//! or the preceding extension header's) takes the fragment header's next header, and the
//! payload length is fixed.
//!
//! Expiry: a datagram context expires 15 s after its first fragment (OVS's
//! `IPF_FRAG_LIST_TIMEOUT`). OVS then sends its held fragments on, **marked `+inv`**
//! (counted `expired`) the next time a batch goes through `ct` — at most one datagram per
//! call ([`Ipf::take_expired`]); a context still held 10 s after expiry (OVS's
//! `IPF_FRAG_LIST_PURGE_TIME_ADJ`, its clean thread) is dropped, counted `purged`
//! ([`Ipf::expire`]).
//!
//! # How the integrator uses it
//!
//! At a `ct(zone=Z, ...)` action, before [`crate::Conntrack::execute`], for each packet:
//! 1. `match ipf.process(frame, Z, now_ms)`:
//!    - `NotFragment`, `TooSmall`, `Invalid`, `Refused` → run the tracker on the packet as
//!      usual (for the last three the tracker sees a fragment and answers `+inv+trk`; OVS
//!      sets `ct_state=inv` on them directly, and its conntrack then gives the same).
//!    - `Held` → the packet stops here: nothing is output for it (the datapath keeps the
//!      copy inside `Ipf`; the caller's buffer may be dropped).
//!    - `Complete { reassembled, fragments }` → run the tracker (with this action's
//!      commit/zone/mark/label/NAT arguments) on `reassembled`; then **every frame of
//!      `fragments`** (originals, offset order, the current one included) continues through
//!      the rest of the pipeline, in that order, with the reassembled packet's `ct_state`,
//!      `ct_zone`, `ct_mark`, `ct_label` and `ct_orig` tuple. `reassembled` is then
//!      discarded. If the tracker rewrote `reassembled` (NAT), call
//!      [`apply_to_fragments`] first: like OVS's `ipf_post_execute_reass_pkts` it copies the
//!      reassembled packet's addresses into every fragment and its L4 bytes over the first
//!      fragment's data.
//! 2. After each batch through `ct` (OVS's `ipf_postprocess_conntrack`), call
//!    [`Ipf::take_expired`] with budget 1 and send the returned frames on with
//!    `ct_state=+inv+trk` (zone Z), as OVS does.
//! 3. From a periodic housekeeping slot, call [`Ipf::expire`] with a bounded budget until it
//!    returns less than the budget.
//!
//! # Differences from OVS (deliberate)
//!
//! OVS's key also holds the `recirc_id`; the caller has none to give (fragments of one
//! datagram normally share it). OVS's reassembled IPv6 packet keeps a zeroed fragment
//! header and relies on packet offsets; ours removes it so the bytes parse on their own (the
//! tracker sees the same L3/L4 data). OVS measures an IPv6 first fragment's data from after
//! any extension headers *following* the fragment header (so such a datagram never
//! completes there); we take all bytes after the fragment header (RFC 8200). OVS keeps
//! fragment offsets in 16-bit variables that wrap for data past 65535; we compute in 64
//! bits (such a datagram fails as too big). Expired fragments come out in offset order (OVS:
//! arrival order unless it had sorted them).
//!
//! # Concurrency and memory
//!
//! [`Ipf`] is `Send + Sync`: all state lives behind one `Mutex` (OVS has one `ipf_lock`
//! too). Fragments are rare, so contention does not matter; the lock is never held across
//! anything but this module's own bookkeeping. A poisoned lock is recovered (nothing in
//! here panics). Memory: at most [`IpfConfig::max_frags`] frames are held in all (a copy of
//! each, as given), plus one reassembled packet (≤ 65535 bytes of IP) per completion.
//!
//! Invariant: never panics on any bytes; every slice access is checked.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use wire::checksum;
use wire::vlan::L2Repr;

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const IPV4_PACKET_MAX_HDR_SIZE: u32 = 60;
const IPV4_PACKET_MAX_SIZE: u64 = 65535;
const IPV6_PACKET_MAX_DATA: u64 = 65535;

/// Reassembly configuration; [`Default`] is OVS 3.1's (`ipf_init` in `lib/ipf.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpfConfig {
    /// Reassemble IPv4 (OVS default: on).
    pub v4_enabled: bool,
    /// Reassemble IPv6 (OVS default: on).
    pub v6_enabled: bool,
    /// Smallest non-last IPv4 fragment, IP header included (OVS
    /// `IPF_V4_FRAG_SIZE_MIN_DEF` = 1200; OVS refuses settings below 400).
    pub min_v4_frag_size: u32,
    /// Smallest non-last IPv6 fragment, 40-byte header included (OVS
    /// `IPF_V6_FRAG_SIZE_MIN_DEF` = 1280; lower bound 400).
    pub min_v6_frag_size: u32,
    /// Most fragments held in all, both families (OVS `IPF_MAX_FRAGS_DEFAULT` = 1000;
    /// settable up to 5000).
    pub max_frags: u32,
    /// Most fragments per IPv4 datagram (OVS `max_v4_frag_list_size`,
    /// [`IpfConfig::v4_frags_per_datagram`] of the minimum size: 58 by default).
    pub max_v4_frags_per_datagram: u32,
    /// Most fragments per IPv6 datagram (OVS `IPF_IPV6_MAX_FRAG_LIST_SIZE` = 65535).
    pub max_v6_frags_per_datagram: u32,
    /// Lifetime of a datagram's context from its first fragment, ms (OVS
    /// `IPF_FRAG_LIST_TIMEOUT` = 15000).
    pub timeout_ms: u64,
    /// Time after expiry at which a context still held is purged, ms (OVS
    /// `IPF_FRAG_LIST_PURGE_TIME_ADJ` = 10000).
    pub purge_delay_ms: u64,
}

impl IpfConfig {
    /// OVS's per-datagram IPv4 fragment limit for a minimum fragment size:
    /// ⌈(65535 − 60) / (min − 60)⌉ (`ipf_set_min_frag`).
    pub fn v4_frags_per_datagram(min_v4_frag_size: u32) -> u32 {
        let unit = min_v4_frag_size
            .saturating_sub(IPV4_PACKET_MAX_HDR_SIZE)
            .max(1);
        (65535 - IPV4_PACKET_MAX_HDR_SIZE).div_ceil(unit)
    }
}

impl Default for IpfConfig {
    fn default() -> Self {
        IpfConfig {
            v4_enabled: true,
            v6_enabled: true,
            min_v4_frag_size: 1200,
            min_v6_frag_size: 1280,
            max_frags: 1000,
            max_v4_frags_per_datagram: IpfConfig::v4_frags_per_datagram(1200),
            max_v6_frags_per_datagram: 65535,
            timeout_ms: 15_000,
            purge_delay_ms: 10_000,
        }
    }
}

/// What to do with a frame given to [`Ipf::process`] (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpfVerdict {
    /// Not a fragment (or reassembly off for its family): run the tracker as usual.
    NotFragment,
    /// Kept inside `Ipf`; nothing continues for this packet now.
    Held,
    /// A non-last fragment below the minimum size (counted `too small`): pass it on; the
    /// tracker marks it `+inv`.
    TooSmall,
    /// Malformed, or overlapping a held fragment (counted `overlapped`): pass it on; the
    /// tracker marks it `+inv`.
    Invalid,
    /// Not held because a limit was reached (all fragments held, this datagram's fragment
    /// limit, or the datagram already failed as too big): pass it on; the tracker marks it
    /// `+inv`. Not counted by OVS.
    Refused,
    /// This fragment completed its datagram.
    Complete {
        /// The reassembled frame: run the tracker on it, then drop it.
        reassembled: Vec<u8>,
        /// The original frames, unchanged, in offset order, including the current one:
        /// each continues with the reassembled packet's conntrack result.
        fragments: Vec<Vec<u8>>,
    },
}

/// Counters for one address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IpfFamilyStats {
    /// Fragments held (`frags accepted`).
    pub accepted: u64,
    /// Fragments handed back by a completion (`frags completed`).
    pub completed: u64,
    /// Fragments handed back by [`Ipf::take_expired`] (`frags expired`).
    pub expired: u64,
    /// Non-last fragments below the minimum size (`frags too small`).
    pub too_small: u64,
    /// Fragments overlapping a held one (`frags overlapped`).
    pub overlapped: u64,
    /// Fragments dropped from stuck contexts (`frags purged`).
    pub purged: u64,
    /// Ours: fragments not held because of a limit ([`IpfVerdict::Refused`]).
    pub refused: u64,
    /// Ours: malformed fragments ([`IpfVerdict::Invalid`] other than overlaps).
    pub malformed: u64,
    /// Ours: datagrams that failed to reassemble (more than 65535 bytes).
    pub reassembly_failed: u64,
}

/// Counters and configuration, as `dpctl/ipf-get-status` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpfStats {
    /// Fragments held now (`num frag`).
    pub nfrag: u32,
    /// Datagram contexts now.
    pub contexts: u32,
    /// IPv4 counters.
    pub v4: IpfFamilyStats,
    /// IPv6 counters.
    pub v6: IpfFamilyStats,
}

/// The reassembly context key (OVS `ipf_list_key`, without `recirc_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ListKey {
    v6: bool,
    src: [u8; 16],
    dst: [u8; 16],
    id: u32,
    zone: u16,
    /// IPv4 protocol; 0 for IPv6 (OVS does not key v6 on it).
    proto: u8,
}

/// What a fragment looks like, parsed.
#[derive(Debug, Clone, Copy)]
struct FragInfo {
    key: ListKey,
    /// First data byte's offset in the datagram.
    start: i64,
    /// Last data byte's offset (inclusive, as OVS: `start + len − 1`).
    end: i64,
    first: bool,
    last: bool,
    /// Offset of the IP header in the frame.
    l3: usize,
    /// Offset of the fragment data in the frame.
    data: usize,
    /// End of the IP packet in the frame (L2 padding after it).
    ip_end: usize,
    /// IPv6: offset of the fragment header in the frame.
    frag_hdr: usize,
    /// IPv6: offset of the next-header byte that names the fragment header.
    prev_nh: usize,
}

enum Parsed {
    NotFragment,
    Malformed(bool),
    Frag(FragInfo),
}

/// Parses `frame` as far as reassembly needs. Never panics.
fn parse(frame: &[u8], zone: u16) -> Parsed {
    let Ok((l2, l3)) = L2Repr::parse_bytes(frame) else {
        return Parsed::NotFragment;
    };
    let Some(ip) = frame.get(l3..) else {
        return Parsed::NotFragment;
    };
    match l2.ethertype {
        ETH_IPV4 => parse_v4(ip, l3, zone),
        ETH_IPV6 => parse_v6(ip, l3, zone),
        _ => Parsed::NotFragment,
    }
}

fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

fn be32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn parse_v4(ip: &[u8], l3: usize, zone: u16) -> Parsed {
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Parsed::NotFragment;
    }
    let frag_off = be16(ip, 6).unwrap_or(0);
    if frag_off & 0x3fff == 0 {
        return Parsed::NotFragment;
    }
    let tot = usize::from(be16(ip, 2).unwrap_or(0));
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if tot > ip.len() || ihl < 20 || tot < ihl {
        return Parsed::Malformed(false);
    }
    if !checksum::verify(&ip[..ihl]) {
        return Parsed::Malformed(false);
    }
    // A zero-length fragment is taken as OVS takes it: `end = start − 1`.
    let len = (tot - ihl) as i64;
    let start = i64::from(frag_off & 0x1fff) * 8;
    let mf = frag_off & 0x2000 != 0;
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src[..4].copy_from_slice(&ip[12..16]);
    dst[..4].copy_from_slice(&ip[16..20]);
    Parsed::Frag(FragInfo {
        key: ListKey {
            v6: false,
            src,
            dst,
            id: u32::from(be16(ip, 4).unwrap_or(0)),
            zone,
            proto: ip[9],
        },
        start,
        end: start + len - 1,
        first: start == 0 && mf,
        last: start != 0 && !mf,
        l3,
        data: l3 + ihl,
        ip_end: l3 + tot,
        frag_hdr: 0,
        prev_nh: 0,
    })
}

fn parse_v6(ip: &[u8], l3: usize, zone: u16) -> Parsed {
    if ip.len() < 40 || ip[0] >> 4 != 6 {
        return Parsed::NotFragment;
    }
    let plen = usize::from(be16(ip, 4).unwrap_or(0));
    // Walk what is there (padding beyond the payload length excluded), as OVS's
    // `parse_ipv6_ext_hdrs`: hop-by-hop, routing, destination options, AH, fragment.
    let walk_end = ip.len().min(40 + plen);
    let mut nh = ip[6];
    let mut nh_field = 6usize;
    let mut pos = 40usize;
    // Every header is at least 8 bytes, so this ends after ≤ len / 8 steps.
    let frag_pos = loop {
        if walk_end < pos + 8 {
            return Parsed::NotFragment;
        }
        let hlen = match nh {
            0 | 43 | 60 => (usize::from(ip[pos + 1]) + 1) * 8,
            51 => (usize::from(ip[pos + 1]) + 2) * 4,
            44 => break pos,
            _ => return Parsed::NotFragment,
        };
        nh_field = pos;
        nh = ip[pos];
        pos += hlen;
    };
    let offlg = be16(ip, frag_pos + 2).unwrap_or(0);
    if offlg & 0xfff9 == 0 {
        return Parsed::NotFragment;
    }
    if 40 + plen > ip.len() {
        return Parsed::Malformed(true);
    }
    // `data ≤ ip_end`: the walk stayed within 40 + plen.
    let data = frag_pos + 8;
    let ip_end = 40 + plen;
    let start = i64::from(offlg & 0xfff8);
    let more = offlg & 1 != 0;
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&ip[8..24]);
    dst.copy_from_slice(&ip[24..40]);
    Parsed::Frag(FragInfo {
        key: ListKey {
            v6: true,
            src,
            dst,
            id: be32(ip, frag_pos + 4).unwrap_or(0),
            zone,
            proto: 0,
        },
        start,
        end: start + (ip_end - data) as i64 - 1,
        first: start == 0 && more,
        last: start != 0 && !more,
        l3,
        data: l3 + data,
        ip_end: l3 + ip_end,
        frag_hdr: l3 + frag_pos,
        prev_nh: l3 + nh_field,
    })
}

/// A held fragment.
#[derive(Debug)]
struct Frag {
    info: FragInfo,
    frame: Vec<u8>,
}

impl Frag {
    fn data(&self) -> &[u8] {
        self.frame
            .get(self.info.data..self.info.ip_end)
            .unwrap_or(&[])
    }
}

/// One datagram's context (OVS `ipf_list`).
#[derive(Debug)]
struct List {
    /// Held fragments, sorted by `start`.
    frags: Vec<Frag>,
    first_seen: bool,
    last_seen: bool,
    /// Reassembly failed (too big): held until expiry, later fragments refused.
    failed: bool,
    /// Expiry index key: (expiration ms, sequence).
    exp: (u64, u64),
}

#[derive(Debug, Default)]
struct Inner {
    lists: HashMap<ListKey, List>,
    /// Contexts by expiration.
    expiry: BTreeMap<(u64, u64), ListKey>,
    /// Fragments held.
    nfrag: u32,
    seq: u64,
    v4: IpfFamilyStats,
    v6: IpfFamilyStats,
}

impl Inner {
    fn fam(&mut self, v6: bool) -> &mut IpfFamilyStats {
        if v6 { &mut self.v6 } else { &mut self.v4 }
    }

    /// Removes the context `key` (if any) and returns its fragments.
    fn remove(&mut self, key: &ListKey) -> Vec<Frag> {
        match self.lists.remove(key) {
            Some(list) => {
                self.expiry.remove(&list.exp);
                let n = u32::try_from(list.frags.len()).unwrap_or(u32::MAX);
                self.nfrag = self.nfrag.saturating_sub(n);
                list.frags
            }
            None => Vec::new(),
        }
    }
}

/// The fragment reassembler: one per datapath, shared by every PMD (`Send + Sync`; state
/// behind one `Mutex`, see the module doc).
#[derive(Debug)]
pub struct Ipf {
    cfg: IpfConfig,
    inner: Mutex<Inner>,
    /// The earliest expiration of a held context (`u64::MAX`: none), published whenever the
    /// lock is released: [`Ipf::take_expired`] and [`Ipf::expire`] read it first, so that a
    /// datapath with nothing due never takes the lock.
    next_exp: AtomicU64,
}

/// The locked state; on unlock it publishes the earliest expiration ([`Ipf::next_exp`]).
struct Guard<'a> {
    g: MutexGuard<'a, Inner>,
    next_exp: &'a AtomicU64,
}

impl std::ops::Deref for Guard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.g
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.g
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let next = self
            .g
            .expiry
            .first_key_value()
            .map_or(u64::MAX, |(&(exp, _), _)| exp);
        self.next_exp.store(next, Ordering::Relaxed);
    }
}

/// OVS's overlap test (`ipf_is_frag_duped`): the new fragment's first or last byte lies
/// inside a held fragment.
fn is_duped(frags: &[Frag], start: i64, end: i64) -> bool {
    frags.iter().any(|f| {
        (start >= f.info.start && start <= f.info.end) || (end >= f.info.start && end <= f.info.end)
    })
}

/// Each held fragment starts right after the previous one ends (`ipf_list_complete`).
fn contiguous(frags: &[Frag]) -> bool {
    frags
        .windows(2)
        .all(|w| w[0].info.end + 1 == w[1].info.start)
}

/// Builds the reassembled frame from a sorted, contiguous list; `None` if too big.
fn reassemble(frags: &[Frag]) -> Option<Vec<u8>> {
    let first = frags.first()?;
    let fi = &first.info;
    let rest: u64 = frags[1..].iter().map(|f| f.data().len() as u64).sum();
    let head = first.frame.get(..fi.ip_end)?;
    if !fi.key.v6 {
        let tot = (fi.ip_end - fi.l3) as u64;
        if tot + rest > IPV4_PACKET_MAX_SIZE {
            return None;
        }
        let mut out = Vec::with_capacity(head.len() + rest as usize);
        out.extend_from_slice(head);
        for f in &frags[1..] {
            out.extend_from_slice(f.data());
        }
        let new_tot = u16::try_from(tot + rest).ok()?;
        let ihl = usize::from(out.get(fi.l3)? & 0x0f) * 4;
        let ip = out.get_mut(fi.l3..)?;
        ip.get_mut(2..4)?.copy_from_slice(&new_tot.to_be_bytes());
        // Clear MF; keep DF and the reserved bit; the offset is already 0.
        *ip.get_mut(6)? &= !0x20;
        ip.get_mut(10..12)?.copy_from_slice(&[0, 0]);
        let csum = checksum::checksum(ip.get(..ihl)?);
        ip.get_mut(10..12)?.copy_from_slice(&csum.to_be_bytes());
        Some(out)
    } else {
        let plen = (fi.ip_end - fi.l3 - 40) as u64;
        let pl = plen.checked_sub(8)?;
        if pl + rest > IPV6_PACKET_MAX_DATA {
            return None;
        }
        let next = *first.frame.get(fi.frag_hdr)?;
        let mut out = Vec::with_capacity(head.len() - 8 + rest as usize);
        out.extend_from_slice(head.get(..fi.frag_hdr)?);
        out.extend_from_slice(head.get(fi.frag_hdr + 8..)?);
        for f in &frags[1..] {
            out.extend_from_slice(f.data());
        }
        let new_plen = u16::try_from(pl + rest).ok()?;
        *out.get_mut(fi.prev_nh)? = next;
        out.get_mut(fi.l3 + 4..fi.l3 + 6)?
            .copy_from_slice(&new_plen.to_be_bytes());
        Some(out)
    }
}

impl Ipf {
    /// A reassembler with configuration `cfg`.
    pub fn new(cfg: IpfConfig) -> Ipf {
        Ipf {
            cfg,
            inner: Mutex::new(Inner::default()),
            next_exp: AtomicU64::new(u64::MAX),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &IpfConfig {
        &self.cfg
    }

    fn lock(&self) -> Guard<'_> {
        Guard {
            g: self.inner.lock().unwrap_or_else(|e| e.into_inner()),
            next_exp: &self.next_exp,
        }
    }

    /// True if some held context may have expired by `now_ms` (one atomic load, no lock:
    /// what [`Ipf::take_expired`] checks first). May lag the state by one unlock.
    pub fn expiry_due(&self, now_ms: u64) -> bool {
        now_ms > self.next_exp.load(Ordering::Relaxed)
    }

    /// Takes one frame at a `ct` action in `zone` (see the module doc for the verdicts).
    /// `frame` is a whole Ethernet frame, optionally with one or two VLAN tags.
    pub fn process(&self, frame: &[u8], zone: u16, now_ms: u64) -> IpfVerdict {
        let info = match parse(frame, zone) {
            Parsed::NotFragment => return IpfVerdict::NotFragment,
            Parsed::Malformed(v6) => {
                if !self.family_enabled(v6) {
                    return IpfVerdict::NotFragment;
                }
                self.lock().fam(v6).malformed += 1;
                return IpfVerdict::Invalid;
            }
            Parsed::Frag(info) => info,
        };
        let v6 = info.key.v6;
        if !self.family_enabled(v6) {
            return IpfVerdict::NotFragment;
        }
        let ip_len = (info.ip_end - info.l3) as u64;
        let min = if v6 {
            self.cfg.min_v6_frag_size
        } else {
            self.cfg.min_v4_frag_size
        };
        let mut g = self.lock();
        let inner = &mut *g;
        if !info.last && ip_len < u64::from(min) {
            inner.fam(v6).too_small += 1;
            return IpfVerdict::TooSmall;
        }
        if inner.nfrag >= self.cfg.max_frags {
            inner.fam(v6).refused += 1;
            return IpfVerdict::Refused;
        }
        let per_datagram = if v6 {
            self.cfg.max_v6_frags_per_datagram
        } else {
            self.cfg.max_v4_frags_per_datagram
        } as usize;
        let list = match inner.lists.get_mut(&info.key) {
            Some(list) => list,
            None => {
                if per_datagram == 0 {
                    inner.fam(v6).refused += 1;
                    return IpfVerdict::Refused;
                }
                inner.seq += 1;
                let exp = (now_ms.saturating_add(self.cfg.timeout_ms), inner.seq);
                inner.expiry.insert(exp, info.key);
                inner.lists.entry(info.key).or_insert(List {
                    frags: Vec::new(),
                    first_seen: false,
                    last_seen: false,
                    failed: false,
                    exp,
                })
            }
        };
        if list.failed || list.frags.len() >= per_datagram {
            inner.fam(v6).refused += 1;
            return IpfVerdict::Refused;
        }
        if is_duped(&list.frags, info.start, info.end) {
            inner.fam(v6).overlapped += 1;
            return IpfVerdict::Invalid;
        }
        let at = list.frags.partition_point(|f| f.info.start <= info.start);
        list.frags.insert(
            at,
            Frag {
                info,
                frame: frame.to_vec(),
            },
        );
        list.first_seen |= info.first;
        list.last_seen |= info.last;
        let ready = list.first_seen && list.last_seen && contiguous(&list.frags);
        let reassembled = if ready {
            match reassemble(&list.frags) {
                Some(r) => Some(r),
                None => {
                    list.failed = true;
                    None
                }
            }
        } else {
            None
        };
        let failed_now = ready && reassembled.is_none();
        inner.nfrag += 1;
        let fam = inner.fam(v6);
        fam.accepted += 1;
        if failed_now {
            fam.reassembly_failed += 1;
        }
        let Some(reassembled) = reassembled else {
            return IpfVerdict::Held;
        };
        let frags = inner.remove(&info.key);
        inner.fam(v6).completed += frags.len() as u64;
        IpfVerdict::Complete {
            reassembled,
            fragments: frags.into_iter().map(|f| f.frame).collect(),
        }
    }

    fn family_enabled(&self, v6: bool) -> bool {
        if v6 {
            self.cfg.v6_enabled
        } else {
            self.cfg.v4_enabled
        }
    }

    /// OVS's `ipf_send_expired_frags`: removes up to `budget` datagram contexts whose
    /// lifetime has passed (`now_ms` > expiration) and returns their held frames, to be
    /// sent on with `ct_state=+inv+trk` (counted `expired`). A context past expiration +
    /// [`IpfConfig::purge_delay_ms`] is purged instead (dropped, counted `purged`), as OVS
    /// does. OVS handles one context per batch (budget 1).
    pub fn take_expired(&self, now_ms: u64, budget: usize) -> Vec<Vec<u8>> {
        if budget == 0 || !self.expiry_due(now_ms) {
            return Vec::new();
        }
        let mut g = self.lock();
        let inner = &mut *g;
        let mut out = Vec::new();
        for _ in 0..budget {
            let Some((&(exp, _), &key)) = inner.expiry.first_key_value() else {
                break;
            };
            if now_ms <= exp {
                break;
            }
            let frags = inner.remove(&key);
            let n = frags.len() as u64;
            if now_ms >= exp.saturating_add(self.cfg.purge_delay_ms) {
                inner.fam(key.v6).purged += n;
            } else {
                inner.fam(key.v6).expired += n;
                out.extend(frags.into_iter().map(|f| f.frame));
            }
        }
        out
    }

    /// OVS's clean thread: purges (drops, counted `purged`) up to `budget` datagram contexts
    /// still held [`IpfConfig::purge_delay_ms`] after their expiration. Returns how many
    /// contexts were removed; call again while it returns `budget`.
    pub fn expire(&self, now_ms: u64, budget: usize) -> usize {
        let next = self.next_exp.load(Ordering::Relaxed);
        if budget == 0 || now_ms < next.saturating_add(self.cfg.purge_delay_ms) {
            return 0;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        let mut removed = 0;
        while removed < budget {
            let Some((&(exp, _), &key)) = inner.expiry.first_key_value() else {
                break;
            };
            if now_ms < exp.saturating_add(self.cfg.purge_delay_ms) {
                break;
            }
            let n = inner.remove(&key).len() as u64;
            inner.fam(key.v6).purged += n;
            removed += 1;
        }
        removed
    }

    /// Counters and current occupancy.
    pub fn stats(&self) -> IpfStats {
        let g = self.lock();
        IpfStats {
            nfrag: g.nfrag,
            contexts: u32::try_from(g.lists.len()).unwrap_or(u32::MAX),
            v4: g.v4,
            v6: g.v6,
        }
    }

    /// `ovs-appctl dpctl/ipf-get-status` text, one line per element (OVS 3.1
    /// `dpctl_ct_ipf_get_status`, eight-space indent).
    pub fn status_lines(&self) -> Vec<String> {
        let s = self.stats();
        let c = &self.cfg;
        let mut v = vec![
            "        Fragmentation Module Status".to_string(),
            "        ---------------------------".to_string(),
            format!("        v4 enabled: {}", u8::from(c.v4_enabled)),
            format!("        v6 enabled: {}", u8::from(c.v6_enabled)),
            format!("        max num frags (v4/v6): {}", c.max_frags),
            format!("        num frag: {}", s.nfrag),
        ];
        for (name, min, f) in [
            ("v4", c.min_v4_frag_size, &s.v4),
            ("v6", c.min_v6_frag_size, &s.v6),
        ] {
            v.push(format!("        min {name} frag size: {min}"));
            v.push(format!("        {name} frags accepted: {}", f.accepted));
            v.push(format!("        {name} frags completed: {}", f.completed));
            v.push(format!("        {name} frags expired: {}", f.expired));
            v.push(format!("        {name} frags too small: {}", f.too_small));
            v.push(format!("        {name} frags overlapped: {}", f.overlapped));
            v.push(format!("        {name} frags purged: {}", f.purged));
        }
        v
    }

    /// `dpctl/ipf-get-status -m` context lines (OVS `ipf_dump_create`; `recirc_id` is
    /// always 0 here), in expiration order.
    pub fn dump_lines(&self) -> Vec<String> {
        let g = self.lock();
        g.expiry
            .values()
            .filter_map(|k| g.lists.get(k).map(|l| (k, l)))
            .map(|(k, l)| {
                let (src, dst, dl_type) = if k.v6 {
                    (
                        Ipv6Addr::from(k.src).to_string(),
                        Ipv6Addr::from(k.dst).to_string(),
                        ETH_IPV6,
                    )
                } else {
                    (
                        Ipv4Addr::new(k.src[0], k.src[1], k.src[2], k.src[3]).to_string(),
                        Ipv4Addr::new(k.dst[0], k.dst[1], k.dst[2], k.dst[3]).to_string(),
                        ETH_IPV4,
                    )
                };
                let state = match (l.failed, l.first_seen, l.last_seen) {
                    (true, _, _) => "reassemble fail",
                    (false, true, true) => "first/last frag",
                    (false, true, false) => "first frag",
                    (false, false, true) => "last frag",
                    (false, false, false) => "other frag",
                };
                format!(
                    "(src={src},dst={dst},recirc_id=0,ip_id={},dl_type=0x{dl_type:x},zone={},nw_proto={},num_fragments={},state={state})",
                    k.id,
                    k.zone,
                    k.proto,
                    l.frags.len()
                )
            })
            .collect()
    }
}

/// OVS's `ipf_post_execute_reass_pkts`, for a tracker that rewrote the reassembled packet
/// (NAT): copies its IP source and destination into every fragment (IPv4: header checksum
/// updated) and its L4 bytes over the first fragment's data (as many as that fragment
/// carries). `fragments` are those of the same [`IpfVerdict::Complete`], in its order.
/// Frames that do not parse as expected are left alone.
pub fn apply_to_fragments(reassembled: &[u8], fragments: &mut [Vec<u8>]) {
    let Ok((_, rl3)) = L2Repr::parse_bytes(reassembled) else {
        return;
    };
    let Some(rip) = reassembled.get(rl3..) else {
        return;
    };
    let v6 = rip.first().is_some_and(|b| b >> 4 == 6);
    let addrs = if v6 { rip.get(8..40) } else { rip.get(12..20) };
    let Some(addrs) = addrs else {
        return;
    };
    let mut first_done = false;
    for frame in fragments.iter_mut() {
        let Parsed::Frag(info) = parse(frame, 0) else {
            continue;
        };
        if info.key.v6 != v6 {
            continue;
        }
        if info.first && !first_done {
            first_done = true;
            // The reassembled packet's L4 data starts where the first fragment's does,
            // relative to the IP header, less the removed IPv6 fragment header.
            let rdata = if v6 {
                rl3 + (info.data - info.l3) - 8
            } else {
                rl3 + (info.data - info.l3)
            };
            let n = info.ip_end - info.data;
            if let (Some(src), Some(dst)) = (
                reassembled.get(rdata..rdata + n),
                frame.get_mut(info.data..info.ip_end),
            ) {
                dst.copy_from_slice(src);
            }
        }
        let Some(ip) = frame.get_mut(info.l3..) else {
            continue;
        };
        if v6 {
            if let Some(a) = ip.get_mut(8..40) {
                a.copy_from_slice(addrs);
            }
        } else {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            if let Some(a) = ip.get_mut(12..20) {
                a.copy_from_slice(addrs);
            }
            if ip.len() >= ihl {
                ip[10] = 0;
                ip[11] = 0;
                let c = checksum::checksum(&ip[..ihl]);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC4: [u8; 4] = [10, 0, 0, 1];
    const DST4: [u8; 4] = [10, 0, 0, 2];
    const SRC6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const DST6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    /// Ethernet header (+ one 802.1Q tag when `vlan`).
    fn eth(vlan: bool, ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    fn udp(v6: bool, src: &[u8], dst: &[u8], payload: &[u8]) -> Vec<u8> {
        let len = 8 + payload.len();
        let mut u = Vec::with_capacity(len);
        u.extend_from_slice(&5000u16.to_be_bytes());
        u.extend_from_slice(&53u16.to_be_bytes());
        u.extend_from_slice(&(len as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(payload);
        let pseudo = if v6 {
            let s: [u8; 16] = src.try_into().unwrap();
            let d: [u8; 16] = dst.try_into().unwrap();
            checksum::pseudo_header_v6(Ipv6Addr::from(s), Ipv6Addr::from(d), 17, len as u32)
        } else {
            let s: [u8; 4] = src.try_into().unwrap();
            let d: [u8; 4] = dst.try_into().unwrap();
            checksum::pseudo_header_v4(Ipv4Addr::from(s), Ipv4Addr::from(d), 17, len as u16)
        };
        let mut c = !checksum::combine(&[pseudo, checksum::sum(&u)]);
        if c == 0 {
            c = 0xffff;
        }
        u[6..8].copy_from_slice(&c.to_be_bytes());
        u
    }

    fn payload(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// An unfragmented IPv4/UDP frame; returns (frame, l3 offset).
    fn v4_datagram(vlan: bool, id: u16, udp_payload: usize, seed: u8) -> (Vec<u8>, usize) {
        let mut f = eth(vlan, ETH_IPV4);
        let l3 = f.len();
        let u = udp(false, &SRC4, &DST4, &payload(udp_payload, seed));
        let tot = 20 + u.len();
        let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
        h[2..4].copy_from_slice(&(tot as u16).to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        h.extend_from_slice(&SRC4);
        h.extend_from_slice(&DST4);
        let c = checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
        f.extend_from_slice(&u);
        (f, l3)
    }

    /// Fragments an IPv4 frame at the data offsets `cuts` (ascending multiples of 8).
    fn frag_v4(orig: &[u8], l3: usize, cuts: &[usize]) -> Vec<Vec<u8>> {
        let ihl = usize::from(orig[l3] & 0x0f) * 4;
        let data = &orig[l3 + ihl..];
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(data.len());
        bounds
            .windows(2)
            .map(|w| {
                let mut f = orig[..l3 + ihl].to_vec();
                f.extend_from_slice(&data[w[0]..w[1]]);
                let ip = &mut f[l3..];
                ip[2..4].copy_from_slice(&((ihl + w[1] - w[0]) as u16).to_be_bytes());
                let mf = if w[1] < data.len() { 0x2000 } else { 0 };
                let fo = (ip[6] as u16 & 0x40) << 8 | mf | (w[0] / 8) as u16;
                ip[6..8].copy_from_slice(&fo.to_be_bytes());
                ip[10..12].copy_from_slice(&[0, 0]);
                let c = checksum::checksum(&ip[..ihl]);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                f
            })
            .collect()
    }

    /// An unfragmented IPv6/UDP frame with `ext` extension headers (8 bytes each: 0 =
    /// hop-by-hop, 60 = destination options) before the UDP header; returns (frame, l3,
    /// offset from l3 of the end of the unfragmentable part).
    fn v6_datagram(
        vlan: bool,
        ext: &[u8],
        udp_payload: usize,
        seed: u8,
    ) -> (Vec<u8>, usize, usize) {
        let mut f = eth(vlan, ETH_IPV6);
        let l3 = f.len();
        let u = udp(true, &SRC6, &DST6, &payload(udp_payload, seed));
        let plen = ext.len() * 8 + u.len();
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&(plen as u16).to_be_bytes());
        h.push(*ext.first().unwrap_or(&17));
        h.push(64);
        h.extend_from_slice(&SRC6);
        h.extend_from_slice(&DST6);
        for (i, _) in ext.iter().enumerate() {
            let next = *ext.get(i + 1).unwrap_or(&17);
            h.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
        }
        f.extend_from_slice(&h);
        f.extend_from_slice(&u);
        (f, l3, h.len())
    }

    /// Fragments an IPv6 frame: the fragment header goes after the unfragmentable part
    /// (`unfrag` bytes from l3), its next header is what the last unfragmentable header named.
    fn frag_v6(orig: &[u8], l3: usize, unfrag: usize, id: u32, cuts: &[usize]) -> Vec<Vec<u8>> {
        // Find the next-header byte naming the first fragmentable header.
        let mut nh_field = l3 + 6;
        let mut pos = l3 + 40;
        while pos < l3 + unfrag {
            nh_field = pos;
            pos += (usize::from(orig[pos + 1]) + 1) * 8;
        }
        let data = &orig[l3 + unfrag..];
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(data.len());
        bounds
            .windows(2)
            .map(|w| {
                let mut f = orig[..l3 + unfrag].to_vec();
                let next = f[nh_field];
                f[nh_field] = 44;
                let more = u16::from(w[1] < data.len());
                let offlg = (w[0] as u16) | more;
                f.extend_from_slice(&[next, 0]);
                f.extend_from_slice(&offlg.to_be_bytes());
                f.extend_from_slice(&id.to_be_bytes());
                f.extend_from_slice(&data[w[0]..w[1]]);
                let plen = (unfrag - 40 + 8 + w[1] - w[0]) as u16;
                f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
                f
            })
            .collect()
    }

    fn complete(v: IpfVerdict) -> (Vec<u8>, Vec<Vec<u8>>) {
        match v {
            IpfVerdict::Complete {
                reassembled,
                fragments,
            } => (reassembled, fragments),
            other => panic!("expected Complete, got {other:?}"),
        }
    }

    fn tracker_parses(frame: &[u8]) -> bool {
        crate::parse::parse(frame, 0).is_ok()
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Ipf>();
    }

    #[test]
    fn defaults_are_ovs() {
        let c = IpfConfig::default();
        assert!(c.v4_enabled && c.v6_enabled);
        assert_eq!((c.min_v4_frag_size, c.min_v6_frag_size), (1200, 1280));
        assert_eq!(c.max_frags, 1000);
        assert_eq!(c.max_v4_frags_per_datagram, 58);
        assert_eq!(c.max_v6_frags_per_datagram, 65535);
        assert_eq!((c.timeout_ms, c.purge_delay_ms), (15_000, 10_000));
        let ipf = Ipf::new(c);
        assert_eq!(
            ipf.status_lines().join("\n"),
            "        Fragmentation Module Status
        ---------------------------
        v4 enabled: 1
        v6 enabled: 1
        max num frags (v4/v6): 1000
        num frag: 0
        min v4 frag size: 1200
        v4 frags accepted: 0
        v4 frags completed: 0
        v4 frags expired: 0
        v4 frags too small: 0
        v4 frags overlapped: 0
        v4 frags purged: 0
        min v6 frag size: 1280
        v6 frags accepted: 0
        v6 frags completed: 0
        v6 frags expired: 0
        v6 frags too small: 0
        v6 frags overlapped: 0
        v6 frags purged: 0"
        );
    }

    #[test]
    fn not_fragments() {
        let ipf = Ipf::new(IpfConfig::default());
        let (f, _) = v4_datagram(false, 1, 100, 0);
        assert_eq!(ipf.process(&f, 0, 0), IpfVerdict::NotFragment);
        let (f, _, _) = v6_datagram(false, &[0], 100, 0);
        assert_eq!(ipf.process(&f, 0, 0), IpfVerdict::NotFragment);
        assert_eq!(ipf.process(&[], 0, 0), IpfVerdict::NotFragment);
        let mut arp = eth(false, 0x0806);
        arp.extend_from_slice(&[0; 28]);
        assert_eq!(ipf.process(&arp, 0, 0), IpfVerdict::NotFragment);
        // IPv6 atomic fragment (offset 0, M=0): left to the tracker.
        let (o, l3, u) = v6_datagram(false, &[], 100, 0);
        let fr = frag_v6(&o, l3, u, 7, &[]);
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::NotFragment);
        assert_eq!(ipf.stats().nfrag, 0);
    }

    #[test]
    fn v4_in_order_and_reverse_with_vlan() {
        for vlan in [false, true] {
            let ipf = Ipf::new(IpfConfig::default());
            let (o, l3) = v4_datagram(vlan, 0x1234, 3000, 1);
            let fr = frag_v4(&o, l3, &[1480, 2960]);
            assert_eq!(fr.len(), 3);
            assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::Held);
            assert_eq!(ipf.process(&fr[1], 0, 0), IpfVerdict::Held);
            assert_eq!(ipf.stats().nfrag, 2);
            let (r, frags) = complete(ipf.process(&fr[2], 0, 0));
            assert_eq!(r, o);
            assert!(tracker_parses(&r));
            assert_eq!(frags, fr);
            // Reverse order, as the second datagram of `ip_fragments_reassembled`.
            for f in fr[1..].iter().rev() {
                assert_eq!(ipf.process(f, 0, 1), IpfVerdict::Held);
            }
            let (r, frags) = complete(ipf.process(&fr[0], 0, 1));
            assert_eq!(r, o);
            assert_eq!(frags, fr);
            let s = ipf.stats();
            assert_eq!((s.nfrag, s.contexts), (0, 0));
            assert_eq!((s.v4.accepted, s.v4.completed), (6, 6));
        }
    }

    #[test]
    fn v6_with_extension_headers() {
        for ext in [&[][..], &[0], &[0, 60], &[60]] {
            let ipf = Ipf::new(IpfConfig::default());
            let (o, l3, u) = v6_datagram(true, ext, 4000, 2);
            let fr = frag_v6(&o, l3, u, 0xdead_beef, &[1448, 2896]);
            assert_eq!(ipf.process(&fr[2], 0, 0), IpfVerdict::Held);
            assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::Held);
            let (r, frags) = complete(ipf.process(&fr[1], 0, 0));
            assert_eq!(r, o, "ext {ext:?}");
            assert!(tracker_parses(&r));
            assert_eq!(frags, fr);
            assert_eq!(ipf.stats().v6.completed, 3);
        }
    }

    #[test]
    fn l2_padding_ignored_but_kept() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 9, 1500, 3);
        let mut fr = frag_v4(&o, l3, &[1480]);
        fr[1].extend_from_slice(&[0xee; 20]);
        assert_eq!(ipf.process(&fr[1], 0, 0), IpfVerdict::Held);
        let (r, frags) = complete(ipf.process(&fr[0], 0, 0));
        assert_eq!(r, o);
        assert_eq!(frags, fr);
    }

    #[test]
    fn too_small() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 2, 600, 0);
        let fr = frag_v4(&o, l3, &[48]);
        // Small first fragment: too small, passed on; small last fragment: held.
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::TooSmall);
        assert_eq!(ipf.process(&fr[1], 0, 0), IpfVerdict::Held);
        let (o, l3, u) = v6_datagram(false, &[], 600, 0);
        let fr = frag_v6(&o, l3, u, 3, &[48]);
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::TooSmall);
        assert_eq!(ipf.process(&fr[1], 0, 0), IpfVerdict::Held);
        let s = ipf.stats();
        assert_eq!((s.v4.too_small, s.v4.accepted), (1, 1));
        assert_eq!((s.v6.too_small, s.v6.accepted), (1, 1));
        assert_eq!(s.nfrag, 2);
        // The tracker itself says +inv for a fragment passed on.
        assert_eq!(
            crate::parse::parse(&fr[0], 0).err(),
            Some(crate::InvalidReason::Fragment)
        );
        // v4: 1196 bytes of IP is too small, 1204 is fine; v6: exactly 1280 is fine.
        let (o, l3) = v4_datagram(false, 4, 1184 + 100 - 8, 0);
        let fr = frag_v4(&o, l3, &[1176]);
        assert_eq!(fr[0].len() - l3, 1196);
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::TooSmall);
        let fr = frag_v4(&o, l3, &[1184]);
        assert_eq!(fr[0].len() - l3, 1204);
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::Held);
        complete(ipf.process(&fr[1], 0, 0));
        let (o, l3, u) = v6_datagram(false, &[], 1232 + 100 - 8, 0);
        let fr = frag_v6(&o, l3, u, 4, &[1232]);
        assert_eq!(fr[0].len() - l3, 1280);
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::Held);
        complete(ipf.process(&fr[1], 0, 0));
    }

    #[test]
    fn malformed() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 5, 3000, 0);
        let fr = frag_v4(&o, l3, &[1480]);
        let mut bad = fr[0].clone();
        bad[l3 + 10] ^= 1; // header checksum
        assert_eq!(ipf.process(&bad, 0, 0), IpfVerdict::Invalid);
        let truncated = &fr[0][..fr[0].len() - 1];
        assert_eq!(ipf.process(truncated, 0, 0), IpfVerdict::Invalid);
        let (o, l3, u) = v6_datagram(false, &[], 3000, 0);
        let fr = frag_v6(&o, l3, u, 1, &[1448]);
        assert_eq!(
            ipf.process(&fr[0][..fr[0].len() - 1], 0, 0),
            IpfVerdict::Invalid
        );
        let s = ipf.stats();
        assert_eq!((s.v4.malformed, s.v6.malformed, s.nfrag), (2, 1, 0));
    }

    #[test]
    fn duplicates_and_overlaps() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 6, 4000, 0);
        let fr = frag_v4(&o, l3, &[1480, 2960]);
        assert_eq!(ipf.process(&fr[1], 0, 0), IpfVerdict::Held);
        // Exact duplicate: overlapped, passed on.
        assert_eq!(ipf.process(&fr[1], 0, 0), IpfVerdict::Invalid);
        // Starts inside a held fragment.
        let ov = frag_v4(&o, l3, &[1472, 2960]);
        assert_eq!(ipf.process(&ov[1], 0, 0), IpfVerdict::Invalid);
        assert_eq!(ipf.stats().v4.overlapped, 2);
        // Completion still works with the originals.
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::Held);
        let (r, frags) = complete(ipf.process(&fr[2], 0, 0));
        assert_eq!((r, frags), (o.clone(), fr.clone()));

        // OVS's test misses a fragment that encloses a held one: it is accepted and the
        // datagram then never completes.
        let ipf = Ipf::new(IpfConfig::default());
        let inner = frag_v4(&o, l3, &[1480, 2960]);
        let outer = frag_v4(&o, l3, &[1472, 2968]);
        assert_eq!(ipf.process(&inner[1], 0, 0), IpfVerdict::Held);
        assert_eq!(ipf.process(&outer[1], 0, 0), IpfVerdict::Held);
        assert_eq!(ipf.process(&outer[0], 0, 0), IpfVerdict::Held);
        assert_eq!(ipf.process(&inner[2], 0, 0), IpfVerdict::Invalid);
        assert_eq!(ipf.process(&outer[2], 0, 0), IpfVerdict::Held);
        assert_eq!(ipf.stats().nfrag, 4);
        assert_eq!(
            ipf.dump_lines()[0].rsplit(',').next(),
            Some("state=first/last frag)")
        );
    }

    #[test]
    fn too_big() {
        // 65628 bytes of data (+ 20 of header) in 45 fragments, the last at offset 65120.
        let ipf = Ipf::new(IpfConfig::default());
        let (big, l3) = v4_datagram(false, 7, 65628 - 8, 0);
        let cuts: Vec<usize> = (1..=44).map(|i| i * 1480).collect();
        let fr = frag_v4(&big, l3, &cuts);
        assert_eq!(fr.len(), 45);
        for f in fr.iter().rev() {
            assert_eq!(ipf.process(f, 0, 0), IpfVerdict::Held);
        }
        let s = ipf.stats();
        assert_eq!(s.v4.reassembly_failed, 1);
        assert_eq!(s.nfrag as usize, fr.len());
        assert_eq!(
            ipf.dump_lines()[0].rsplit(',').next(),
            Some("state=reassemble fail)")
        );
        // Later fragments of the failed datagram are refused (passed on, +inv).
        assert_eq!(ipf.process(&fr[3], 0, 0), IpfVerdict::Refused);
        // They expire and go on (+inv), in offset order.
        let out = ipf.take_expired(15_001, 1);
        assert_eq!(out, fr);
        assert_eq!(ipf.stats().v4.expired, fr.len() as u64);
        assert_eq!(ipf.stats().nfrag, 0);
    }

    #[test]
    fn v6_too_big() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3, u) = v6_datagram(false, &[], 65535 - 8, 0);
        // plen of the original would be 65535 (no ext headers): fits exactly.
        let cuts: Vec<usize> = (1..=49).map(|i| i * 1328).collect();
        let fr = frag_v6(&o, l3, u, 9, &cuts);
        for f in &fr[1..] {
            assert_eq!(ipf.process(f, 0, 0), IpfVerdict::Held);
        }
        let (r, _) = complete(ipf.process(&fr[0], 0, 0));
        assert_eq!(r, o);
        // One more byte of data than fits: a last fragment going one 8-byte unit further.
        let mut longer = fr.last().unwrap().clone();
        longer.extend_from_slice(&[0; 8]);
        let plen = u16::from_be_bytes([longer[l3 + 4], longer[l3 + 5]]);
        // plen would exceed 65535 only across fragments: the datagram's payload does.
        longer[l3 + 4..l3 + 6].copy_from_slice(&(plen + 8).to_be_bytes());
        for f in &fr[1..fr.len() - 1] {
            assert_eq!(ipf.process(f, 0, 1), IpfVerdict::Held);
        }
        assert_eq!(ipf.process(&longer, 0, 1), IpfVerdict::Held);
        assert_eq!(ipf.process(&fr[0], 0, 1), IpfVerdict::Held);
        assert_eq!(ipf.stats().v6.reassembly_failed, 1);
    }

    #[test]
    fn too_many_fragments_per_datagram() {
        let cfg = IpfConfig {
            max_v4_frags_per_datagram: 3,
            ..IpfConfig::default()
        };
        let ipf = Ipf::new(cfg);
        let (o, l3) = v4_datagram(false, 8, 1184 * 4 + 10, 0);
        let fr = frag_v4(&o, l3, &[1184, 2368, 3552, 4736]);
        for f in &fr[..3] {
            assert_eq!(ipf.process(f, 0, 0), IpfVerdict::Held);
        }
        assert_eq!(ipf.process(&fr[3], 0, 0), IpfVerdict::Refused);
        assert_eq!(ipf.process(&fr[4], 0, 0), IpfVerdict::Refused);
        assert_eq!(ipf.stats().v4.refused, 2);
        // The default for v4 follows OVS's formula.
        assert_eq!(IpfConfig::v4_frags_per_datagram(1200), 58);
        assert_eq!(IpfConfig::v4_frags_per_datagram(400), 193);
    }

    #[test]
    fn global_cap() {
        let cfg = IpfConfig {
            max_frags: 5,
            ..IpfConfig::default()
        };
        let ipf = Ipf::new(cfg);
        let mut held = Vec::new();
        for id in 0..10u16 {
            let (o, l3) = v4_datagram(false, id, 3000, 0);
            held.push(frag_v4(&o, l3, &[1480]));
        }
        for (i, fr) in held.iter().enumerate() {
            let want = if i < 5 {
                IpfVerdict::Held
            } else {
                IpfVerdict::Refused
            };
            assert_eq!(ipf.process(&fr[0], 0, 0), want);
        }
        assert_eq!(ipf.stats().nfrag, 5);
        assert_eq!(ipf.stats().v4.refused, 5);
        // As in OVS the cap is checked first: even a completing fragment is refused.
        assert_eq!(ipf.process(&held[0][1], 0, 0), IpfVerdict::Refused);
        // Expiry frees room.
        assert_eq!(ipf.take_expired(15_001, 2).len(), 2);
        assert_eq!(ipf.stats().nfrag, 3);
        complete(ipf.process(&held[2][1], 0, 0));
        assert_eq!(ipf.stats().nfrag, 2);
        assert_eq!(ipf.process(&held[5][0], 0, 0), IpfVerdict::Held);
    }

    #[test]
    fn zones_and_keys_separate() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 11, 3000, 0);
        let fr = frag_v4(&o, l3, &[1480]);
        assert_eq!(ipf.process(&fr[0], 1, 0), IpfVerdict::Held);
        // Same datagram in zone 2: its own context.
        assert_eq!(ipf.process(&fr[1], 2, 0), IpfVerdict::Held);
        assert_eq!(ipf.stats().contexts, 2);
        let (r, frags) = complete(ipf.process(&fr[1], 1, 0));
        assert_eq!((r, frags), (o.clone(), fr.clone()));
        // Another IP id or protocol is another datagram.
        let (o2, _) = v4_datagram(false, 12, 3000, 0);
        let fr2 = frag_v4(&o2, l3, &[1480]);
        assert_eq!(ipf.process(&fr2[0], 2, 0), IpfVerdict::Held);
        let mut p = fr[0].clone();
        p[l3 + 9] = 6;
        p[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&p[l3..l3 + 20]);
        p[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(ipf.process(&p, 2, 0), IpfVerdict::Held);
        assert_eq!(ipf.stats().contexts, 3);
        let lines = ipf.dump_lines();
        assert_eq!(
            lines[0],
            "(src=10.0.0.1,dst=10.0.0.2,recirc_id=0,ip_id=11,dl_type=0x800,zone=2,nw_proto=17,num_fragments=1,state=last frag)"
        );
    }

    #[test]
    fn disabled_family() {
        let ipf = Ipf::new(IpfConfig {
            v4_enabled: false,
            ..IpfConfig::default()
        });
        let (o, l3) = v4_datagram(false, 13, 3000, 0);
        let fr = frag_v4(&o, l3, &[1480]);
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::NotFragment);
        let (o, l3, u) = v6_datagram(false, &[], 3000, 0);
        let fr = frag_v6(&o, l3, u, 1, &[1448]);
        assert_eq!(ipf.process(&fr[0], 0, 0), IpfVerdict::Held);
        assert!(ipf.status_lines()[2].ends_with("v4 enabled: 0"));
    }

    #[test]
    fn expiry_and_purge() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 14, 3000, 0);
        let fr = frag_v4(&o, l3, &[1480]);
        let (o2, _) = v4_datagram(false, 15, 3000, 0);
        let fr2 = frag_v4(&o2, l3, &[1480]);
        assert!(!ipf.expiry_due(u64::MAX - 1), "nothing held");
        assert_eq!(ipf.process(&fr[1], 0, 1000), IpfVerdict::Held);
        assert_eq!(ipf.process(&fr2[0], 0, 2000), IpfVerdict::Held);
        assert!(!ipf.expiry_due(16_000) && ipf.expiry_due(16_001));
        // Not yet (OVS: expired when now > expiration).
        assert!(ipf.take_expired(16_000, 10).is_empty());
        assert_eq!(ipf.expire(16_001, 10), 0);
        // One context per call with budget 1.
        assert_eq!(ipf.take_expired(17_001, 1), vec![fr[1].clone()]);
        assert_eq!(ipf.stats().v4.expired, 1);
        // Past expiration + 10 s: purged, not sent.
        assert!(ipf.take_expired(27_000, 1).is_empty());
        let s = ipf.stats();
        assert_eq!((s.v4.purged, s.nfrag, s.contexts), (1, 0, 0));
        assert!(!ipf.expiry_due(u64::MAX - 1), "nothing held any more");
        // expire(): the clean thread's purge, bounded.
        for id in 0..5u16 {
            let (o, l3) = v4_datagram(false, 100 + id, 3000, 0);
            assert_eq!(
                ipf.process(&frag_v4(&o, l3, &[1480])[0], 0, 0),
                IpfVerdict::Held
            );
        }
        assert_eq!(ipf.expire(24_999, 10), 0);
        assert_eq!(ipf.expire(25_000, 2), 2);
        assert_eq!(ipf.expire(25_000, 10), 3);
        assert_eq!(ipf.stats().v4.purged, 6);
        assert_eq!(ipf.stats().nfrag, 0);
        // A fragment after its context was dropped starts a new one.
        assert_eq!(ipf.process(&fr[0], 0, 30_000), IpfVerdict::Held);
    }

    #[test]
    fn zero_length_last_fragment_completes_as_in_ovs() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 18, 1480, 0);
        let set = |f: &mut Vec<u8>, fo: u16, tot: u16| {
            f[l3 + 2..l3 + 4].copy_from_slice(&tot.to_be_bytes());
            f[l3 + 6..l3 + 8].copy_from_slice(&fo.to_be_bytes());
            f[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
            let c = checksum::checksum(&f[l3..l3 + 20]);
            f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        };
        let mut first = o.clone();
        set(&mut first, 0x6000, 1508);
        let mut last = o[..l3 + 20].to_vec();
        set(&mut last, 0x4000 | 186, 20);
        assert_eq!(ipf.process(&last, 0, 0), IpfVerdict::Held);
        let (r, frags) = complete(ipf.process(&first, 0, 0));
        assert_eq!(r, o);
        assert_eq!(frags, vec![first, last]);
    }

    #[test]
    fn fragment_after_completion_starts_again() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 16, 3000, 0);
        let fr = frag_v4(&o, l3, &[1480]);
        ipf.process(&fr[0], 0, 0);
        complete(ipf.process(&fr[1], 0, 0));
        assert_eq!(ipf.process(&fr[1], 0, 0), IpfVerdict::Held);
    }

    #[test]
    fn apply_nat_to_fragments() {
        let ipf = Ipf::new(IpfConfig::default());
        let (o, l3) = v4_datagram(false, 17, 3000, 0);
        let fr = frag_v4(&o, l3, &[1480]);
        ipf.process(&fr[1], 0, 0);
        let (mut r, mut frags) = complete(ipf.process(&fr[0], 0, 0));
        // Pretend SNAT to 10.0.0.100:6000 (checksums are the tracker's business).
        r[l3 + 12..l3 + 16].copy_from_slice(&[10, 0, 0, 100]);
        r[l3 + 20..l3 + 22].copy_from_slice(&6000u16.to_be_bytes());
        apply_to_fragments(&r, &mut frags);
        for f in &frags {
            assert_eq!(&f[l3 + 12..l3 + 16], &[10, 0, 0, 100]);
            assert!(checksum::verify(&f[l3..l3 + 20]));
        }
        assert_eq!(&frags[0][l3 + 20..l3 + 22], &6000u16.to_be_bytes());
        assert_eq!(&frags[1][l3 + 20..], &fr[1][l3 + 20..]);
        // IPv6 with an extension header.
        let (o, l3, u) = v6_datagram(false, &[0], 3000, 0);
        let fr = frag_v6(&o, l3, u, 5, &[1448]);
        ipf.process(&fr[1], 0, 0);
        let (mut r, mut frags) = complete(ipf.process(&fr[0], 0, 0));
        r[l3 + 8] = 0xfe;
        r[l3 + 48..l3 + 50].copy_from_slice(&6000u16.to_be_bytes());
        apply_to_fragments(&r, &mut frags);
        assert!(frags.iter().all(|f| f[l3 + 8] == 0xfe));
        assert_eq!(&frags[0][l3 + 56..l3 + 58], &6000u16.to_be_bytes());
    }

    /// The trivially correct twin: collects the distinct fragments of one datagram
    /// (rejecting exact duplicates, the only overlaps a clean fragmentation produces) and
    /// completes when they cover the datagram: sorted, concatenated, must be the original.
    #[derive(Default)]
    struct Twin {
        seen: Vec<(usize, Vec<u8>)>,
    }

    impl Twin {
        /// (duplicate?, completed?)
        fn feed(&mut self, idx: usize, frag: &[u8], n: usize) -> (bool, bool) {
            if self.seen.iter().any(|(i, _)| *i == idx) {
                return (true, false);
            }
            self.seen.push((idx, frag.to_vec()));
            (false, self.seen.len() == n)
        }
        fn sorted(&self) -> Vec<Vec<u8>> {
            let mut s = self.seen.clone();
            s.sort_by_key(|(i, _)| *i);
            s.into_iter().map(|(_, f)| f).collect()
        }
    }

    /// Brute-force reassembly of sorted fragments by their own headers.
    fn brute_force(frags: &[Vec<u8>], v6: bool) -> Vec<u8> {
        let infos: Vec<FragInfo> = frags
            .iter()
            .map(|f| match parse(f, 0) {
                Parsed::Frag(i) => i,
                _ => panic!("not a fragment"),
            })
            .collect();
        let first = &infos[0];
        let mut out = frags[0][..first.ip_end].to_vec();
        let mut data_len = first.ip_end - first.data;
        for (f, i) in frags.iter().zip(&infos).skip(1) {
            out.extend_from_slice(&f[i.data..i.ip_end]);
            data_len += i.ip_end - i.data;
        }
        if v6 {
            let next = out[first.frag_hdr];
            out.drain(first.frag_hdr..first.frag_hdr + 8);
            out[first.prev_nh] = next;
            let plen = (first.data - 8 - first.l3 - 40 + data_len) as u16;
            out[first.l3 + 4..first.l3 + 6].copy_from_slice(&plen.to_be_bytes());
        } else {
            let ip = &mut out[first.l3..];
            let ihl = usize::from(ip[0] & 0xf) * 4;
            ip[2..4].copy_from_slice(&((ihl + data_len) as u16).to_be_bytes());
            ip[6] &= !0x20;
            ip[10..12].copy_from_slice(&[0, 0]);
            let c = checksum::checksum(&ip[..ihl]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        out
    }

    fn scenario() -> impl Strategy<Value = (bool, bool, usize, Vec<usize>, Vec<u8>, u8, u8)> {
        (
            any::<bool>(),
            any::<bool>(),
            2000usize..12_000,
            prop::collection::vec(0usize..80, 0..12),
            prop::collection::vec(any::<u8>(), 0..40),
            0u8..4,
            any::<u8>(),
        )
            .prop_map(|(v6, vlan, len, sizes, order, ext, seed)| {
                (v6, vlan, len, sizes, order, ext, seed)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn matches_twin((v6, vlan, len, sizes, order, ext, seed) in scenario()) {
            let ext: &[u8] = match ext { 0 => &[], 1 => &[0], 2 => &[0, 60], _ => &[60] };
            let (orig, frags) = if v6 {
                let (o, l3, u) = v6_datagram(vlan, ext, len, seed);
                let data_len = o.len() - l3 - u;
                // Non-last fragments: 40 + unfrag ext + 8 + data ≥ 1280.
                let min = (1280 - (u - 40) - 48).div_ceil(8) * 8;
                let cuts = cut_points(data_len, min, &sizes);
                let f = frag_v6(&o, l3, u, u32::from(seed) << 16 | 7, &cuts);
                (o, f)
            } else {
                let (o, l3) = v4_datagram(vlan, u16::from(seed), len, seed);
                let data_len = o.len() - l3 - 20;
                let cuts = cut_points(data_len, 1184, &sizes);
                let f = frag_v4(&o, l3, &cuts);
                (o, f)
            };
            prop_assert!(frags.len() >= 2);
            // Arrival order: a shuffle with duplicates, from `order`.
            let n = frags.len();
            let mut seq: Vec<usize> = (0..n).collect();
            for (i, b) in order.iter().enumerate() {
                let j = usize::from(*b) % n;
                if b & 0x80 != 0 {
                    seq.insert(i % (seq.len() + 1), j);
                } else {
                    let k = i % n;
                    seq.swap(k, j);
                }
            }
            let ipf = Ipf::new(IpfConfig::default());
            let mut twin = Twin::default();
            let mut done = false;
            for &i in &seq {
                let got = ipf.process(&frags[i], 3, 0);
                let (dup, completes) = twin.feed(i, &frags[i], n);
                if dup {
                    prop_assert_eq!(got, IpfVerdict::Invalid);
                } else if completes {
                    let (r, fr) = complete(got);
                    let sorted = twin.sorted();
                    prop_assert_eq!(&r, &brute_force(&sorted, v6));
                    prop_assert_eq!(&r, &orig);
                    prop_assert!(tracker_parses(&r));
                    prop_assert_eq!(fr, sorted);
                    done = true;
                    break;
                } else {
                    prop_assert_eq!(got, IpfVerdict::Held);
                }
            }
            if !done {
                // Feed whatever is missing, in order.
                for (i, frag) in frags.iter().enumerate() {
                    if twin.seen.iter().any(|(j, _)| *j == i) {
                        continue;
                    }
                    let got = ipf.process(frag, 3, 0);
                    let (_, completes) = twin.feed(i, frag, n);
                    if completes {
                        let (r, _) = complete(got);
                        prop_assert_eq!(&r, &orig);
                    } else {
                        prop_assert_eq!(got, IpfVerdict::Held);
                    }
                }
            }
            let s = ipf.stats();
            prop_assert_eq!((s.nfrag, s.contexts), (0, 0));
        }

        #[test]
        fn never_panics_on_random_bytes(frames in prop::collection::vec(
            prop::collection::vec(any::<u8>(), 0..200), 1..20), zone in 0u16..3) {
            let ipf = Ipf::new(IpfConfig::default());
            for (t, f) in frames.iter().enumerate() {
                let _ = ipf.process(f, zone, t as u64 * 1000);
                let mut copy = frames.clone();
                apply_to_fragments(f, &mut copy);
            }
            let _ = ipf.take_expired(100_000, 5);
            let _ = ipf.expire(100_000, 5);
            let _ = ipf.status_lines();
            let _ = ipf.dump_lines();
        }

        #[test]
        fn never_panics_on_mutated_fragments(
            v6 in any::<bool>(),
            muts in prop::collection::vec((any::<u16>(), any::<u8>()), 1..8),
            cut in 0usize..3000,
            lower_min in any::<bool>(),
        ) {
            let cfg = if lower_min {
                IpfConfig { min_v4_frag_size: 0, min_v6_frag_size: 0, ..IpfConfig::default() }
            } else {
                IpfConfig::default()
            };
            let ipf = Ipf::new(cfg);
            let frags = if v6 {
                let (o, l3, u) = v6_datagram(false, &[0], 3000, 1);
                frag_v6(&o, l3, u, 1, &[1448])
            } else {
                let (o, l3) = v4_datagram(false, 1, 3000, 1);
                frag_v4(&o, l3, &[1480])
            };
            for f in &frags {
                let mut m = f.clone();
                for (pos, val) in &muts {
                    let p = usize::from(*pos) % m.len().min(120);
                    m[p] = *val;
                }
                m.truncate(cut.max(1));
                if let IpfVerdict::Complete { reassembled, mut fragments } = ipf.process(&m, 0, 0) {
                    apply_to_fragments(&reassembled, &mut fragments);
                }
                let _ = ipf.process(f, 0, 0);
            }
        }
    }

    /// Cut points (data offsets) from random sizes: every non-last piece ≥ `min` bytes
    /// (rounded to 8), the rest of the data going to the last piece.
    fn cut_points(data_len: usize, min: usize, sizes: &[usize]) -> Vec<usize> {
        let mut cuts = Vec::new();
        let mut at = 0;
        for s in sizes.iter().chain(std::iter::repeat(&0)) {
            let piece = min + s * 8;
            if at + piece >= data_len {
                break;
            }
            at += piece;
            cuts.push(at);
        }
        cuts
    }
}
