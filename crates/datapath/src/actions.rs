//! Datapath actions and the packet edits they make.
//!
//! [`DpAction`] is what a megaflow's action list holds (interned in the PMD's
//! [`crate::pmd::ActionTable`]); [`apply_edit`] edits one packet in place. The PMD executes
//! lists per flow batch (see [`crate::pmd`]); `Output` and `Drop` are its own.
//!
//! # Set actions
//!
//! Set actions are OVS's *masked* sets (`set(ipv4(src=…,ttl=…))`): per sub-field a
//! [`Masked`] value and mask, and the packet's bits become `(old & !mask) | (value & mask)`.
//! A zero mask leaves a sub-field alone and is not printed. One variant per header, all
//! `Copy` and at most 48 bytes (tested), with values as big-endian byte arrays so nothing
//! needs more than 4-byte alignment. An IPv6 set carries one address: a set of both
//! addresses is two actions, the second marked `joined` so that [`format_dp_actions`] prints
//! them as OVS's one `set(ipv6(src=…,dst=…))`.
//!
//! # Where the headers are
//!
//! [`apply_edit`] finds the headers itself, with exactly the rules of
//! [`flow::extract`] (so an edit applies iff the megaflow key saw the header): up to two
//! 802.1Q/802.1ad tags, an LLC/SNAP header, IPv4 only with a sane IHL and total length
//! (bytes past the total length are padding, outside the L4 segment), IPv6 only with the
//! payload length inside the frame; IPv6 extension headers (hop-by-hop, routing,
//! destination options, AH, fragment, read through the `wire` views) are skipped in any
//! order, as extraction does; a chain that does not fit leaves the L4 header unknown. A
//! non-first fragment (IPv4 offset ≠ 0, or an IPv6 fragment header with offset ≠ 0) has no
//! L4 header: an L4 set is a no-op and an address change touches no L4 checksum.
//! An L4 set also requires the packet's protocol to be the action's (OVS trusts the megaflow
//! match instead) and the header validity extraction checks (TCP: 20 bytes and a data
//! offset ≥ 5 inside the segment; UDP 8, SCTP 12, ICMP/ICMPv6 8 bytes).
//!
//! # Checksums (OVS `lib/packets.c`, `odp-execute.c` semantics)
//!
//! All Internet checksums are updated incrementally (RFC 1624), so a checksum that was wrong
//! stays wrong by the same amount, as in OVS:
//! - IPv4 header checksum on any IPv4 field change;
//! - TCP and UDP checksums on an IPv4/IPv6 address change (pseudo header) and a port change,
//!   when the checksum field is inside the segment (TCP ≥ 20 bytes, UDP ≥ 8); ICMPv6 (≥ 4
//!   bytes) on an IPv6 address change; ICMPv4 has no pseudo header;
//! - a UDP checksum of 0 means "none" and stays 0 (over IPv6 too, as OVS); an updated UDP
//!   checksum that comes out 0 is written 0xffff;
//! - an IPv6 destination change behind a routing header with segments left ≠ 0 does not
//!   touch the L4 checksum (the pseudo header holds the final destination; OVS
//!   `packet_rh_present`). Unlike OVS, a source change there still updates it (OVS then
//!   skips both, a quirk of its walk), and a non-first fragment's payload is never touched
//!   (OVS updates "its L4 checksum" at the fragment's data offset);
//! - ICMP/ICMPv6 type and code: the ICMP checksum;
//! - SCTP ports: the CRC32c over the SCTP packet is recomputed before and after, and the
//!   stored value becomes `old ^ crc_before ^ crc_after` (OVS `packet_set_sctp_port`: a
//!   correct CRC stays correct, a wrong one stays wrong).
//!
//! `skb_mark` (the packet mark) is packet metadata, and [`Packet`] has no field for it yet:
//! [`DpAction::SetSkbMark`] is carried and printed but executing it is a no-op returning
//! false.
//!
//! # Invariants
//!
//! - Never panics, whatever the bytes; an edit that does not apply (no such header, frame
//!   too short, wrong protocol, non-first fragment) returns false and leaves every byte as
//!   it was. The only edits that change the length are the VLAN push/pop.
//! - `Display` prints OVS's `Datapath actions:` text, exactly what
//!   `ofproto::format_odp_actions` prints for the action the conversion came from (tested
//!   in `upcall::dp_actions`).

use std::fmt::{self, Write as _};

use flow::text::value::{fmt_eth, fmt_ipv4, fmt_ipv6};

use crate::ct::CtParams;
use netdev::Packet;
use wire::checksum::{crc32c, update_bytes};
use wire::ipv6ext::{Ipv6ExtHeader, Ipv6FragmentHeader};

/// One datapath action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Send to the datapath port with this number (a copy if more actions follow).
    Output(u32),
    /// Drop the packet (the remaining actions are not executed).
    Drop,
    /// Push an 802.1Q/802.1ad tag: `tpid` (0x8100 or 0x88a8) and the wire TCI (pcp:3, dei:1,
    /// vid:12; not the flow key's TCI with the "present" bit).
    PushVlan {
        /// Tag protocol id.
        tpid: u16,
        /// Tag control information as sent on the wire.
        tci: u16,
    },
    /// Pop the outermost VLAN tag (no effect on an untagged frame).
    PopVlan,
    /// `set(eth(src=…,dst=…))`.
    SetEth(SetEth),
    /// `set(ipv4(src=…,dst=…,tos=…,ttl=…))`.
    SetIpv4(SetIpv4),
    /// `set(ipv6(src=…|dst=…,label=…,tclass=…,hlimit=…))` (one address per action).
    SetIpv6(SetIpv6),
    /// `set(tcp|udp|sctp(src=…,dst=…))`.
    SetL4(SetL4),
    /// `set(icmp|icmpv6(type=…,code=…))`.
    SetIcmp(SetIcmp),
    /// `set(arp(sip=…,tip=…,op=…,sha=…,tha=…))`.
    SetArp(SetArp),
    /// `set(skb_mark(…))`: packet metadata; not executed yet (see the module doc).
    SetSkbMark(Masked<4>),
    /// `ct(...)`: run the packet through the PMD's connection tracker ([`crate::ct`]); sets
    /// its conntrack metadata for the next pass.
    Ct(CtParams),
    /// `ct_clear`: forget the packet's conntrack metadata.
    CtClear,
    /// `recirc(id)`: another datapath pass with `recirc_id = id` (a copy if more actions
    /// follow), at most [`crate::ct::MAX_RECIRC_DEPTH`] passes in all.
    Recirc(u32),
    /// `userspace(pid=0,controller(...))`: a copy of the packet as it is now goes to the
    /// slow path ([`crate::Upcall::action_upcall`]), which makes a packet-in of it; the
    /// packet itself goes on with the next action.
    Userspace(flow::ofp::ControllerCookie),
    /// `clone(...)`: the next `len` actions of the list are the clone's body, run on a copy
    /// of the packet (and of its metadata); the list goes on after them with the packet as
    /// it was. Flat, so that an action list stays a slice of `Copy` values; a body may hold
    /// another `Clone` (its `len` counted inside the outer one's).
    Clone {
        /// Actions in the body (all nesting levels).
        len: u16,
    },
    // ---- groups (issue #17) ----
    /// `hash(l4(basis))` / `hash(sym_l4(basis))`: sets the packet's `dp_hash` (for the next
    /// pass) from its 5-tuple ([`packet_dp_hash`]); the PMD executes it.
    Hash {
        /// Symmetric (both directions of a connection hash alike).
        symmetric: bool,
        /// Hash basis.
        basis: u32,
    },
    /// `set(skb_priority(…))` (`set_queue`, `enqueue`): the packet's queue priority. Carried
    /// and printed; executing it changes nothing — the userspace datapath has no queues
    /// (OVS's netdev datapath only carries it in the packet metadata, which no OpenFlow
    /// match can read).
    SetSkbPriority(u32),
    /// `check_pkt_len(size=N,gt(...),le(...))`: the next `gt` actions are run for a packet
    /// longer than `size` bytes ([`crate::check_len::check_len_size`]), the `le` after them
    /// for the others, each on a copy of the packet and its metadata (the packet itself when
    /// nothing follows); the list goes on after both with the packet as it was. Flat, as
    /// [`DpAction::Clone`]; nesting counted inside.
    CheckPktLen {
        /// Length compared with.
        size: u16,
        /// Actions of the greater branch (all nesting levels).
        gt: u16,
        /// Actions of the less-or-equal branch (all nesting levels).
        le: u16,
    },
}

/// A masked sub-field of `N` bytes, big-endian: bits of `mask` take `value`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Masked<const N: usize> {
    /// Value (ANDed with `mask` by the constructors).
    pub value: [u8; N],
    /// Mask; all zero = sub-field untouched.
    pub mask: [u8; N],
}

impl<const N: usize> Default for Masked<N> {
    fn default() -> Self {
        Masked::NONE
    }
}

impl<const N: usize> Masked<N> {
    /// Untouched.
    pub const NONE: Self = Masked {
        value: [0; N],
        mask: [0; N],
    };

    /// `value` under `mask` (`value` is ANDed with `mask`).
    pub fn new(value: [u8; N], mask: [u8; N]) -> Self {
        let mut v = value;
        for (b, m) in v.iter_mut().zip(mask) {
            *b &= m;
        }
        Masked { value: v, mask }
    }

    /// All bits set to `value`.
    pub fn exact(value: [u8; N]) -> Self {
        Masked {
            value,
            mask: [0xff; N],
        }
    }

    /// From the low `N` bytes of two integers (big-endian), e.g. `Masked::<4>::from_u128(ip,
    /// 0xffff_ffff)`; higher bytes are ignored.
    pub fn from_u128(value: u128, mask: u128) -> Self {
        let tail = |x: u128| -> [u8; N] {
            let b = x.to_be_bytes();
            core::array::from_fn(|i| b.get(16 + i - N.min(16)).copied().unwrap_or(0))
        };
        Masked::new(tail(value), tail(mask))
    }

    /// The value as an integer (`N` ≤ 16).
    pub fn value_u128(&self) -> u128 {
        be(&self.value)
    }

    /// The mask as an integer (`N` ≤ 16).
    pub fn mask_u128(&self) -> u128 {
        be(&self.mask)
    }

    /// Whether any bit is set by this sub-field.
    pub fn is_set(&self) -> bool {
        self.mask.iter().any(|&m| m != 0)
    }

    /// `old` with this sub-field applied.
    pub fn apply(&self, old: [u8; N]) -> [u8; N] {
        core::array::from_fn(|i| (old[i] & !self.mask[i]) | (self.value[i] & self.mask[i]))
    }

    /// [`Masked::apply`] on an integer holding the field in its low `N` bytes.
    pub fn apply_u128(&self, old: u128) -> u128 {
        let (v, m) = (self.value_u128(), self.mask_u128());
        (old & !m) | (v & m)
    }
}

fn be(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |acc, &x| (acc << 8) | u128::from(x))
}

/// Masked set of the Ethernet addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SetEth {
    /// Source MAC.
    pub src: Masked<6>,
    /// Destination MAC.
    pub dst: Masked<6>,
}

/// Masked set of IPv4 header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SetIpv4 {
    /// Source address.
    pub src: Masked<4>,
    /// Destination address.
    pub dst: Masked<4>,
    /// TOS byte (DSCP: mask 0xfc, ECN: mask 0x03).
    pub tos: Masked<1>,
    /// Time to live.
    pub ttl: Masked<1>,
}

/// Which IPv6 address a [`SetIpv6`] sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ipv6Addr {
    /// None.
    #[default]
    None,
    /// The source.
    Src,
    /// The destination.
    Dst,
}

/// Masked set of IPv6 header fields: one address (see the module doc) and the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SetIpv6 {
    /// Which address `addr_val` sets.
    pub addr: Ipv6Addr,
    /// The address value and mask.
    pub addr_val: Masked<16>,
    /// Flow label (low 20 bits of the 4 bytes; other mask bits are ignored).
    pub label: Masked<4>,
    /// Traffic class.
    pub tclass: Masked<1>,
    /// Hop limit.
    pub hlimit: Masked<1>,
    /// This action continues the previous `SetIpv6` in OVS's text (one `set(ipv6(…))`);
    /// execution does not care.
    pub joined: bool,
}

/// Transport protocol of a [`SetL4`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Proto {
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// SCTP (132).
    Sctp,
}

impl L4Proto {
    /// IP protocol number.
    pub const fn number(self) -> u8 {
        match self {
            L4Proto::Tcp => 6,
            L4Proto::Udp => 17,
            L4Proto::Sctp => 132,
        }
    }

    /// OVS's header name.
    pub const fn name(self) -> &'static str {
        match self {
            L4Proto::Tcp => "tcp",
            L4Proto::Udp => "udp",
            L4Proto::Sctp => "sctp",
        }
    }
}

/// Masked set of transport ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SetL4 {
    /// Protocol the packet must have.
    pub proto: L4Proto,
    /// Source port.
    pub src: Masked<2>,
    /// Destination port.
    pub dst: Masked<2>,
}

/// Masked set of ICMP (or ICMPv6) type and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SetIcmp {
    /// ICMPv6 (over IPv6) rather than ICMP (over IPv4).
    pub v6: bool,
    /// Type.
    pub ty: Masked<1>,
    /// Code.
    pub code: Masked<1>,
}

/// Masked set of ARP fields (Ethernet/IPv4 ARP and RARP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SetArp {
    /// Sender protocol address.
    pub sip: Masked<4>,
    /// Target protocol address.
    pub tip: Masked<4>,
    /// Opcode.
    pub op: Masked<2>,
    /// Sender hardware address.
    pub sha: Masked<6>,
    /// Target hardware address.
    pub tha: Masked<6>,
}

// ---------------------------------------------------------------------------------------------
// VLAN.

/// Inserts a VLAN tag after the MAC addresses; false (packet unchanged) if the frame is
/// shorter than two MACs or the headroom is short.
pub fn push_vlan(p: &mut Packet, tpid: u16, tci: u16) -> bool {
    if p.len() < 12 || p.push_front(4).is_none() {
        return false;
    }
    let d = p.data_mut();
    d.copy_within(4..16, 0);
    if let Some(t) = d.get_mut(12..16) {
        t[..2].copy_from_slice(&tpid.to_be_bytes());
        t[2..].copy_from_slice(&tci.to_be_bytes());
    }
    true
}

/// Removes the outermost VLAN tag (TPID 0x8100 or 0x88a8); false if there is none.
pub fn pop_vlan(p: &mut Packet) -> bool {
    let d = p.data_mut();
    let tpid = match d.get(12..14) {
        Some(&[a, b]) => u16::from_be_bytes([a, b]),
        _ => return false,
    };
    if d.len() < 18 || (tpid != 0x8100 && tpid != 0x88a8) {
        return false;
    }
    d.copy_within(0..12, 4);
    p.pull_front(4).is_some()
}

/// Applies one packet-editing action (everything but `Output` and `Drop`, which the PMD
/// executes itself); false if the packet was left unchanged because the edit did not apply
/// (no tag to pop, no such header, wrong protocol, frame too short, no headroom, `skb_mark`).
pub fn apply_edit(p: &mut Packet, a: &DpAction) -> bool {
    match *a {
        DpAction::PushVlan { tpid, tci } => push_vlan(p, tpid, tci),
        DpAction::PopVlan => pop_vlan(p),
        // The PMD executes these itself (ports, per-packet metadata, its tracker).
        DpAction::Output(_)
        | DpAction::Drop
        | DpAction::SetSkbMark(_)
        | DpAction::SetSkbPriority(_)
        | DpAction::Ct(_)
        | DpAction::CtClear
        | DpAction::Recirc(_)
        | DpAction::Userspace(_)
        | DpAction::Hash { .. } => false,
        ref set => edit_frame(p.data_mut(), set),
    }
}

/// The `dp_hash` a `hash(l4(basis))` (`symmetric` false) or `hash(sym_l4(basis))` action
/// gives the frame `d`: a hash of its 5-tuple (IPv4/IPv6 addresses, IP protocol, L4 ports;
/// Ethernet addresses and type for non-IP frames) and `basis`; the symmetric form orders
/// each source/destination pair first, so both directions of a connection hash alike. Never 0
/// (0 means "no hash yet", as in OVS). Like OVS's userspace datapath, the value is the
/// datapath's own (it need not equal OVS's numbers, only be stable per 5-tuple).
pub fn packet_dp_hash(d: &[u8], symmetric: bool, basis: u32) -> u32 {
    use flow::FieldId as F;
    let mut k = flow::FlowKey::ZERO;
    flow::extract::extract(d, &flow::extract::PacketMeta::port(0), &mut k);
    let dl = F::DlType.get(&k) as u16;
    let (mut a, mut b, proto, mut pa, mut pb) = match dl {
        0x0800 => (
            F::NwSrc.get(&k),
            F::NwDst.get(&k),
            F::NwProto.get(&k) as u32,
            F::TpSrc.get(&k) as u32,
            F::TpDst.get(&k) as u32,
        ),
        0x86dd => (
            F::Ipv6Src.get(&k),
            F::Ipv6Dst.get(&k),
            F::NwProto.get(&k) as u32,
            F::TpSrc.get(&k) as u32,
            F::TpDst.get(&k) as u32,
        ),
        _ => (F::DlSrc.get(&k), F::DlDst.get(&k), u32::from(dl), 0, 0),
    };
    if symmetric {
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        if pa > pb {
            std::mem::swap(&mut pa, &mut pb);
        }
    }
    let mix = |h: u32, v: u32| -> u32 {
        let v = v
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15)
            .wrapping_mul(0x1b87_3593);
        (h ^ v)
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64)
    };
    let mut h = basis;
    for w in [a, b] {
        for i in 0..4 {
            h = mix(h, (w >> (32 * i)) as u32);
        }
    }
    h = mix(h, proto);
    h = mix(h, (pa << 16) | pb);
    h ^= 40;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h.max(1)
}

/// Applies a set action (one that does not change the length) to the frame `d` in place;
/// false, `d` unchanged, when it does not apply. Other actions: false.
pub fn edit_frame(d: &mut [u8], a: &DpAction) -> bool {
    match a {
        DpAction::SetEth(s) => set_eth(d, s),
        DpAction::SetIpv4(s) => set_ipv4(d, s),
        DpAction::SetIpv6(s) => set_ipv6(d, s),
        DpAction::SetL4(s) => set_l4(d, s),
        DpAction::SetIcmp(s) => set_icmp(d, s),
        DpAction::SetArp(s) => set_arp(d, s),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Locating headers (flow::extract's rules).

const ETH_IP: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;
const ETH_RARP: u16 = 0x8035;
const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

fn rd16(d: &[u8], o: usize) -> Option<u16> {
    d.get(o..o.checked_add(2)?)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
}

fn wr16(d: &mut [u8], o: usize, v: u16) {
    if let Some(b) = d.get_mut(o..o + 2) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

fn arr<const N: usize>(d: &[u8], o: usize) -> Option<[u8; N]> {
    d.get(o..)?.first_chunk::<N>().copied()
}

fn put<const N: usize>(d: &mut [u8], o: usize, v: [u8; N]) {
    if let Some(b) = d.get_mut(o..o + N) {
        b.copy_from_slice(&v);
    }
}

fn is_vlan(t: u16) -> bool {
    t == 0x8100 || t == 0x88a8
}

/// Offset of the L3 header and the `dl_type` extraction computes; `None` below 14 bytes.
fn l3_start(d: &[u8]) -> Option<(usize, u16)> {
    let mut typ = rd16(d, 12)?;
    if d.len() < 14 {
        return None;
    }
    let mut off = 14;
    for _ in 0..2 {
        if !is_vlan(typ) || d.len() < off + 4 {
            break;
        }
        typ = rd16(d, off + 2)?;
        off += 4;
    }
    if typ < 0x0600 {
        // 802.3: an Ethernet SNAP header carries the type.
        typ = match d.get(off..off + 8) {
            Some(llc) if llc[..6] == [0xaa, 0xaa, 0x03, 0, 0, 0] => {
                off += 8;
                let t = u16::from_be_bytes([llc[6], llc[7]]);
                if t >= 0x0600 { t } else { 0x05ff }
            }
            _ => 0x05ff,
        };
    }
    Some((off, typ))
}

/// A located IPv4 or IPv6 packet.
#[derive(Debug, Clone, Copy)]
struct Ip {
    /// L3 header offset.
    l3: usize,
    /// End of the IP packet (total / payload length; padding beyond).
    end: usize,
    /// The L4 header (offset, protocol); `None` for a non-first fragment or an IPv6
    /// extension chain that does not fit.
    l4: Option<(usize, u8)>,
    /// IPv6 only: a routing header with segments left ≠ 0 precedes the L4 header.
    routed: bool,
}

fn ipv4_at(d: &[u8], l3: usize) -> Option<Ip> {
    let h = arr::<20>(d, l3)?;
    let size = d.len() - l3;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let tot = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if ihl < 20 || ihl > tot || tot > size || size - tot > 0xffff {
        return None;
    }
    let fo = u16::from_be_bytes([h[6], h[7]]);
    let later = fo & 0x1fff != 0;
    Some(Ip {
        l3,
        end: l3 + tot,
        l4: (!later).then_some((l3 + ihl, h[9])),
        routed: false,
    })
}

fn ipv6_at(d: &[u8], l3: usize) -> Option<Ip> {
    let h = arr::<40>(d, l3)?;
    let size = d.len() - l3;
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    if plen + 40 > size || size - (plen + 40) > 0xffff {
        return None;
    }
    let end = l3 + 40 + plen;
    let (l4, routed) = ipv6_l4(d, l3 + 40, end, h[6]);
    Some(Ip {
        l3,
        end,
        l4,
        routed,
    })
}

/// Walks the IPv6 extension headers in `d[off..end]`, the first of type `proto`: the L4
/// header (`None` if a header does not fit or after a non-first fragment's header) and
/// whether a routing header with segments left ≠ 0 was met.
fn ipv6_l4(d: &[u8], mut off: usize, end: usize, mut proto: u8) -> (Option<(usize, u8)>, bool) {
    let mut routed = false;
    // Every step consumes ≥ 8 bytes or stops, so the walk ends.
    loop {
        let Some(rest) = d.get(off..end) else {
            return (None, routed);
        };
        match proto {
            0 | 43 | 60 => {
                let Ok(x) = Ipv6ExtHeader::new_checked(rest) else {
                    return (None, routed);
                };
                routed |= proto == 43 && x.segments_left() != 0;
                proto = x.next_header();
                off += x.header_len();
            }
            51 => {
                // AH: the same first two bytes, its length in 4-byte units minus 2.
                let Some(x) = rest.first_chunk::<8>() else {
                    return (None, routed);
                };
                let len = (usize::from(x[1]) + 2) * 4;
                if len > rest.len() {
                    return (None, routed);
                }
                proto = x[0];
                off += len;
            }
            44 => {
                let Ok(x) = Ipv6FragmentHeader::new_checked(rest) else {
                    return (None, routed);
                };
                proto = x.next_header();
                off += 8;
                if x.frag_offset() != 0 {
                    return (None, routed);
                }
            }
            _ => return (Some((off, proto)), routed),
        }
    }
}

/// The IP packet of frame `d` if its `dl_type` is `ty` (IPv4 or IPv6) and it is sane.
fn ip(d: &[u8], ty: u16) -> Option<Ip> {
    let (l3, dl) = l3_start(d)?;
    match dl {
        _ if dl != ty => None,
        ETH_IP => ipv4_at(d, l3),
        ETH_IPV6 => ipv6_at(d, l3),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The edits.

fn set_eth(d: &mut [u8], s: &SetEth) -> bool {
    let (Some(dst), Some(src)) = (arr::<6>(d, 0), arr::<6>(d, 6)) else {
        return false;
    };
    if d.len() < 14 {
        return false;
    }
    put(d, 0, s.dst.apply(dst));
    put(d, 6, s.src.apply(src));
    true
}

/// Updates the L4 checksum of `ip` for a pseudo-header address change `old` → `new`
/// (TCP, UDP and, with `icmp6`, ICMPv6).
fn l4_addr_fixup(d: &mut [u8], ip: &Ip, old: &[u8], new: &[u8], icmp6: bool) {
    let Some((l4, proto)) = ip.l4 else {
        return;
    };
    let len = ip.end.saturating_sub(l4);
    let at = match proto {
        PROTO_TCP if len >= 20 => l4 + 16,
        PROTO_UDP if len >= 8 => l4 + 6,
        PROTO_ICMPV6 if icmp6 && len >= 4 => l4 + 2,
        _ => return,
    };
    let Some(c) = rd16(d, at) else {
        return;
    };
    if proto == PROTO_UDP {
        if c != 0 {
            let n = update_bytes(c, old, new);
            wr16(d, at, if n == 0 { 0xffff } else { n });
        }
    } else {
        wr16(d, at, update_bytes(c, old, new));
    }
}

fn set_ipv4(d: &mut [u8], s: &SetIpv4) -> bool {
    let Some(ip) = ip(d, ETH_IP) else {
        return false;
    };
    let Some(old) = arr::<20>(d, ip.l3) else {
        return false;
    };
    let mut new = old;
    new[1] = s.tos.apply([old[1]])[0];
    new[8] = s.ttl.apply([old[8]])[0];
    let src = s.src.apply([old[12], old[13], old[14], old[15]]);
    let dst = s.dst.apply([old[16], old[17], old[18], old[19]]);
    new[12..16].copy_from_slice(&src);
    new[16..20].copy_from_slice(&dst);
    if new == old {
        return true;
    }
    let c = u16::from_be_bytes([old[10], old[11]]);
    let c = update_bytes(c, &old[..10], &new[..10]);
    let c = update_bytes(c, &old[12..], &new[12..]);
    new[10..12].copy_from_slice(&c.to_be_bytes());
    put(d, ip.l3, new);
    if old[12..] != new[12..] {
        l4_addr_fixup(d, &ip, &old[12..], &new[12..], false);
    }
    true
}

fn set_ipv6(d: &mut [u8], s: &SetIpv6) -> bool {
    let Some(ip) = ip(d, ETH_IPV6) else {
        return false;
    };
    let Some(w0) = arr::<4>(d, ip.l3) else {
        return false;
    };
    let w = u32::from_be_bytes(w0);
    let tc = s.tclass.apply([(w >> 20) as u8])[0];
    let lm = u32::from_be_bytes(s.label.mask) & 0x000f_ffff;
    let label = ((w & !lm) | (u32::from_be_bytes(s.label.value) & lm)) & 0x000f_ffff;
    let w = (w & 0xf000_0000) | (u32::from(tc) << 20) | label;
    put(d, ip.l3, w.to_be_bytes());
    if let Some(h) = d.get_mut(ip.l3 + 7) {
        *h = s.hlimit.apply([*h])[0];
    }
    let at = match s.addr {
        Ipv6Addr::None => return true,
        Ipv6Addr::Src => ip.l3 + 8,
        Ipv6Addr::Dst => ip.l3 + 24,
    };
    let Some(old) = arr::<16>(d, at) else {
        return true;
    };
    let new = s.addr_val.apply(old);
    if new != old {
        put(d, at, new);
        if !(s.addr == Ipv6Addr::Dst && ip.routed) {
            l4_addr_fixup(d, &ip, &old, &new, true);
        }
    }
    true
}

/// The L4 segment of an IPv4 (`v6` false) or IPv6 packet if its protocol is `proto` and it
/// is at least `min` bytes: (offset, end).
fn l4_of(d: &[u8], v6: bool, proto: u8, min: usize) -> Option<(usize, usize)> {
    let ip = ip(d, if v6 { ETH_IPV6 } else { ETH_IP })?;
    let (l4, p) = ip.l4?;
    (p == proto && ip.end >= l4 + min).then_some((l4, ip.end))
}

fn set_l4(d: &mut [u8], s: &SetL4) -> bool {
    let proto = s.proto.number();
    let min = match s.proto {
        L4Proto::Tcp => 20,
        L4Proto::Udp => 8,
        L4Proto::Sctp => 12,
    };
    let Some((l4, end)) = l4_of(d, false, proto, min).or_else(|| l4_of(d, true, proto, min)) else {
        return false;
    };
    let Some(seg) = d.get_mut(l4..end) else {
        return false;
    };
    let old = [seg[0], seg[1], seg[2], seg[3]];
    let sp = s.src.apply([old[0], old[1]]);
    let dp = s.dst.apply([old[2], old[3]]);
    let new = [sp[0], sp[1], dp[0], dp[1]];
    match s.proto {
        L4Proto::Tcp => {
            let hl = usize::from(seg[12] >> 4) * 4;
            if hl < 20 || hl > seg.len() {
                return false;
            }
            if new != old {
                let c = update_bytes(u16::from_be_bytes([seg[16], seg[17]]), &old, &new);
                seg[16..18].copy_from_slice(&c.to_be_bytes());
            }
        }
        L4Proto::Udp => {
            let c = u16::from_be_bytes([seg[6], seg[7]]);
            if c != 0 && new != old {
                let n = update_bytes(c, &old, &new);
                let n = if n == 0 { 0xffff } else { n };
                seg[6..8].copy_from_slice(&n.to_be_bytes());
            }
        }
        L4Proto::Sctp => {
            if new != old {
                let stored = [seg[8], seg[9], seg[10], seg[11]];
                seg[8..12].fill(0);
                let before = crc32c(seg).to_le_bytes();
                seg[..4].copy_from_slice(&new);
                let after = crc32c(seg).to_le_bytes();
                let c: [u8; 4] = core::array::from_fn(|i| stored[i] ^ before[i] ^ after[i]);
                seg[8..12].copy_from_slice(&c);
            }
        }
    }
    seg[..4].copy_from_slice(&new);
    true
}

fn set_icmp(d: &mut [u8], s: &SetIcmp) -> bool {
    let proto = if s.v6 { PROTO_ICMPV6 } else { PROTO_ICMP };
    let Some((l4, end)) = l4_of(d, s.v6, proto, 8) else {
        return false;
    };
    let Some(seg) = d.get_mut(l4..end) else {
        return false;
    };
    let old = [seg[0], seg[1]];
    let new = [s.ty.apply([old[0]])[0], s.code.apply([old[1]])[0]];
    if new != old {
        let c = update_bytes(u16::from_be_bytes([seg[2], seg[3]]), &old, &new);
        seg[..2].copy_from_slice(&new);
        seg[2..4].copy_from_slice(&c.to_be_bytes());
    }
    true
}

fn set_arp(d: &mut [u8], s: &SetArp) -> bool {
    let Some((l3, dl)) = l3_start(d) else {
        return false;
    };
    if dl != ETH_ARP && dl != ETH_RARP {
        return false;
    }
    let Some(a) = arr::<28>(d, l3) else {
        return false;
    };
    if a[..6] != [0, 1, 0x08, 0x00, 6, 4] {
        return false;
    }
    let mut n = a;
    let op = s.op.apply([a[6], a[7]]);
    n[6..8].copy_from_slice(&op);
    let sha = s.sha.apply(core::array::from_fn(|i| a[8 + i]));
    n[8..14].copy_from_slice(&sha);
    let sip = s.sip.apply(core::array::from_fn(|i| a[14 + i]));
    n[14..18].copy_from_slice(&sip);
    let tha = s.tha.apply(core::array::from_fn(|i| a[18 + i]));
    n[18..24].copy_from_slice(&tha);
    let tip = s.tip.apply(core::array::from_fn(|i| a[24 + i]));
    n[24..28].copy_from_slice(&tip);
    put(d, l3, n);
    true
}

// ---------------------------------------------------------------------------------------------
// Text.

/// How a sub-field prints (as `ofproto::odp::SetFmt`).
#[derive(Clone, Copy, PartialEq)]
enum Fmt {
    Eth,
    Ipv4,
    Ipv6,
    Dec,
    Hex,
}

fn put_val(out: &mut String, f: Fmt, v: u128) {
    match f {
        Fmt::Eth => fmt_eth(out, v as u64, None),
        Fmt::Ipv4 => fmt_ipv4(out, v as u32),
        Fmt::Ipv6 => fmt_ipv6(out, v),
        Fmt::Dec => {
            let _ = write!(out, "{v}");
        }
        Fmt::Hex => {
            let _ = write!(out, "{v:#x}");
        }
    }
}

/// `name=value[/mask],` for a set sub-field (nothing when the mask is zero).
fn put_field(out: &mut String, name: &str, f: Fmt, value: u128, mask: u128, full: u128) {
    let mask = mask & full;
    if mask == 0 {
        return;
    }
    if !name.is_empty() {
        out.push_str(name);
        out.push('=');
    }
    put_val(out, f, value & mask);
    if mask != full {
        out.push('/');
        put_val(out, if f == Fmt::Dec { Fmt::Hex } else { f }, mask);
    }
    out.push(',');
}

fn put_masked<const N: usize>(out: &mut String, name: &str, f: Fmt, m: &Masked<N>, full: u128) {
    put_field(out, name, f, m.value_u128(), m.mask_u128(), full);
}

const MAC: u128 = 0xffff_ffff_ffff;

/// The sub-fields of IPv6 sets `parts` (printed in OVS's order, as one header).
fn put_ipv6_fields(out: &mut String, parts: &[SetIpv6]) {
    for want in [Ipv6Addr::Src, Ipv6Addr::Dst] {
        for p in parts.iter().filter(|p| p.addr == want) {
            let name = if want == Ipv6Addr::Src { "src" } else { "dst" };
            put_masked(out, name, Fmt::Ipv6, &p.addr_val, u128::MAX);
        }
    }
    for p in parts {
        put_masked(out, "label", Fmt::Hex, &p.label, 0xfffff);
    }
    for p in parts {
        put_masked(out, "tclass", Fmt::Hex, &p.tclass, 0xff);
    }
    for p in parts {
        put_masked(out, "hlimit", Fmt::Dec, &p.hlimit, 0xff);
    }
}

fn close_set(out: &mut String) {
    if out.ends_with(',') {
        out.pop();
    }
    out.push_str("))");
}

fn write_action(out: &mut String, a: &DpAction) {
    match a {
        DpAction::Output(p) => {
            let _ = write!(out, "{p}");
        }
        DpAction::Drop => out.push_str("drop"),
        DpAction::PushVlan { tpid, tci } => {
            // OVS's action carries the CFI "present" bit, always set by translation; the
            // wire TCI here does not, so it is printed as present.
            out.push_str("push_vlan(");
            if *tpid != 0x8100 {
                let _ = write!(out, "tpid={tpid:#06x},");
            }
            let _ = write!(out, "vid={},pcp={})", tci & 0xfff, tci >> 13);
        }
        DpAction::PopVlan => out.push_str("pop_vlan"),
        DpAction::Ct(c) => {
            out.push_str("ct");
            if c.commit || c.force || c.zone != 0 || c.mark.is_some() || c.ext.is_some() {
                out.push('(');
                if c.commit {
                    out.push_str("commit,");
                }
                if c.force {
                    out.push_str("force_commit,");
                }
                if c.zone != 0 {
                    let _ = write!(out, "zone={},", c.zone);
                }
                if let Some((v, m)) = c.mark {
                    let _ = write!(out, "mark={v:#x}/{m:#x},");
                }
                let ext = c.ext();
                if let Some((v, m)) = ext.label {
                    let _ = write!(out, "label={v:#x}/{m:#x},");
                }
                if let Some(n) = &ext.nat {
                    out.push_str(&flow::text::format::format_odp_nat(n));
                }
                if out.ends_with(',') {
                    out.pop();
                }
                out.push(')');
            }
        }
        DpAction::CtClear => out.push_str("ct_clear"),
        DpAction::Hash { symmetric, basis } => {
            let alg = if *symmetric { "sym_l4" } else { "l4" };
            let _ = write!(out, "hash({alg}({basis}))");
        }
        DpAction::Recirc(id) => {
            let _ = write!(out, "recirc({id:#x})");
        }
        DpAction::Userspace(c) => {
            let _ = write!(out, "userspace({c})");
        }
        // Alone, a clone cannot show its body (the actions after it): `format_dp_actions`
        // prints the whole `clone(...)`.
        DpAction::Clone { len } => {
            let _ = write!(out, "clone(<{len} actions>)");
        }
        DpAction::CheckPktLen { size, gt, le } => {
            let _ = write!(
                out,
                "check_pkt_len(size={size},<{gt} actions>,<{le} actions>)"
            );
        }
        DpAction::SetEth(s) => {
            out.push_str("set(eth(");
            put_masked(out, "src", Fmt::Eth, &s.src, MAC);
            put_masked(out, "dst", Fmt::Eth, &s.dst, MAC);
            close_set(out);
        }
        DpAction::SetIpv4(s) => {
            out.push_str("set(ipv4(");
            put_masked(out, "src", Fmt::Ipv4, &s.src, 0xffff_ffff);
            put_masked(out, "dst", Fmt::Ipv4, &s.dst, 0xffff_ffff);
            put_masked(out, "tos", Fmt::Hex, &s.tos, 0xff);
            put_masked(out, "ttl", Fmt::Dec, &s.ttl, 0xff);
            close_set(out);
        }
        DpAction::SetIpv6(s) => {
            out.push_str("set(ipv6(");
            put_ipv6_fields(out, std::slice::from_ref(s));
            close_set(out);
        }
        DpAction::SetL4(s) => {
            let _ = write!(out, "set({}(", s.proto.name());
            put_masked(out, "src", Fmt::Dec, &s.src, 0xffff);
            put_masked(out, "dst", Fmt::Dec, &s.dst, 0xffff);
            close_set(out);
        }
        DpAction::SetIcmp(s) => {
            let _ = write!(out, "set({}(", if s.v6 { "icmpv6" } else { "icmp" });
            put_masked(out, "type", Fmt::Dec, &s.ty, 0xff);
            put_masked(out, "code", Fmt::Dec, &s.code, 0xff);
            close_set(out);
        }
        DpAction::SetArp(s) => {
            out.push_str("set(arp(");
            put_masked(out, "sip", Fmt::Ipv4, &s.sip, 0xffff_ffff);
            put_masked(out, "tip", Fmt::Ipv4, &s.tip, 0xffff_ffff);
            put_masked(out, "op", Fmt::Dec, &s.op, 0xffff);
            put_masked(out, "sha", Fmt::Eth, &s.sha, MAC);
            put_masked(out, "tha", Fmt::Eth, &s.tha, MAC);
            close_set(out);
        }
        DpAction::SetSkbMark(m) => {
            out.push_str("set(skb_mark(");
            put_masked(out, "", Fmt::Hex, m, 0xffff_ffff);
            close_set(out);
        }
        DpAction::SetSkbPriority(v) => {
            // C's `%#x`: `0` for zero, `0x…` otherwise.
            if *v == 0 {
                out.push_str("set(skb_priority(0))");
            } else {
                let _ = write!(out, "set(skb_priority({v:#x}))");
            }
        }
    }
}

impl fmt::Display for DpAction {
    /// One action in OVS's `Datapath actions:` syntax (`2`, `drop`, `pop_vlan`,
    /// `set(ipv4(src=1.2.3.4,ttl=63))`, masked sub-fields as `value/mask`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        write_action(&mut s, self);
        f.write_str(&s)
    }
}

/// A whole list in OVS's `Datapath actions:` syntax: the actions joined by `,` (`drop` for
/// an empty list), with a `joined` IPv6 set merged into the one before it, so the text is
/// exactly OVS's (`set(ipv6(src=…,dst=…))`). Use this rather than joining `Display`s.
pub fn format_dp_actions(actions: &[DpAction]) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let mut out = String::new();
    let mut i = 0;
    while i < actions.len() {
        if !out.is_empty() {
            out.push(',');
        }
        if let DpAction::SetIpv6(first) = actions[i] {
            let mut parts = vec![first];
            while let Some(DpAction::SetIpv6(p)) = actions.get(i + parts.len())
                && p.joined
            {
                parts.push(*p);
            }
            i += parts.len();
            out.push_str("set(ipv6(");
            put_ipv6_fields(&mut out, &parts);
            close_set(&mut out);
            continue;
        }
        if let DpAction::CheckPktLen { size, gt, le } = actions[i] {
            let g = (i + 1 + usize::from(gt)).min(actions.len());
            let end = (g + usize::from(le)).min(actions.len());
            let _ = write!(
                out,
                "check_pkt_len(size={size},gt({}),le({}))",
                format_dp_actions(&actions[i + 1..g]),
                format_dp_actions(&actions[g..end])
            );
            i = end;
            continue;
        }
        if let DpAction::Clone { len } = actions[i] {
            let end = (i + 1 + usize::from(len)).min(actions.len());
            out.push_str("clone(");
            // An empty body prints `clone(drop)`, as OVS's `format_odp_actions` does.
            out.push_str(&format_dp_actions(&actions[i + 1..end]));
            out.push(')');
            i = end;
            continue;
        }
        write_action(&mut out, &actions[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_push_pop_round_trip() {
        let frame: Vec<u8> = (0u8..40).collect();
        let mut p = Packet::from_slice(&frame).unwrap();
        assert!(push_vlan(&mut p, 0x8100, 0x2005));
        assert_eq!(p.len(), 44);
        assert_eq!(&p.data()[..12], &frame[..12]);
        assert_eq!(&p.data()[12..16], &[0x81, 0x00, 0x20, 0x05]);
        assert_eq!(&p.data()[16..], &frame[12..]);
        assert!(pop_vlan(&mut p));
        assert_eq!(p.data(), &frame[..]);
        // Untagged (type 0x0c0d here): nothing to pop.
        assert!(!pop_vlan(&mut p));
        assert_eq!(p.data(), &frame[..]);
        let mut short = Packet::from_slice(&[1, 2, 3]).unwrap();
        assert!(!push_vlan(&mut short, 0x8100, 1));
        assert!(!pop_vlan(&mut short));
        assert_eq!(short.data(), &[1, 2, 3]);
    }

    #[test]
    fn action_is_small() {
        assert_eq!(std::mem::size_of::<DpAction>(), 48);
        assert!(std::mem::align_of::<DpAction>() <= 4);
    }

    #[test]
    fn masked_semantics() {
        let m = Masked::<2>::from_u128(0x1234, 0xff00);
        assert_eq!(m.value, [0x12, 0x00]);
        assert_eq!(m.apply([0xab, 0xcd]), [0x12, 0xcd]);
        assert_eq!(m.apply_u128(0xabcd), 0x12cd);
        assert!(!Masked::<4>::NONE.is_set());
        assert_eq!(Masked::<4>::NONE.apply([1, 2, 3, 4]), [1, 2, 3, 4]);
        assert_eq!(
            Masked::<6>::from_u128(0x0102_0304_0506, MAC).value,
            [1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn prints_like_ovs() {
        let ip = DpAction::SetIpv4(SetIpv4 {
            src: Masked::exact([1, 2, 3, 4]),
            tos: Masked::from_u128(0x28, 0xfc),
            ttl: Masked::exact([63]),
            ..SetIpv4::default()
        });
        assert_eq!(
            ip.to_string(),
            "set(ipv4(src=1.2.3.4,tos=0x28/0xfc,ttl=63))"
        );
        let l4 = DpAction::SetL4(SetL4 {
            proto: L4Proto::Udp,
            src: Masked::NONE,
            dst: Masked::from_u128(0x1200, 0xff00),
        });
        assert_eq!(l4.to_string(), "set(udp(dst=4608/0xff00))");
        let v6 = [
            DpAction::SetIpv6(SetIpv6 {
                addr: Ipv6Addr::Src,
                addr_val: Masked::from_u128(1, u128::MAX),
                hlimit: Masked::exact([9]),
                ..SetIpv6::default()
            }),
            DpAction::SetIpv6(SetIpv6 {
                addr: Ipv6Addr::Dst,
                addr_val: Masked::from_u128(2, u128::MAX),
                joined: true,
                ..SetIpv6::default()
            }),
            DpAction::Output(3),
        ];
        assert_eq!(
            format_dp_actions(&v6),
            "set(ipv6(src=::1,dst=::2,hlimit=9)),3"
        );
        assert_eq!(
            format_dp_actions(&[
                DpAction::PushVlan {
                    tpid: 0x8100,
                    tci: 5
                },
                DpAction::PopVlan,
                DpAction::SetSkbMark(Masked::from_u128(5, 0xff)),
                DpAction::Drop
            ]),
            "push_vlan(vid=5,pcp=0),pop_vlan,set(skb_mark(0x5/0xff)),drop"
        );
        assert_eq!(format_dp_actions(&[]), "drop");
    }
}
