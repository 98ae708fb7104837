//! Set actions (`datapath::actions`) against their twins.
//!
//! - **Key twin**: for random packets (`testutil::packets`) and random sequences of masked set
//!   actions, `flow::extract` of the edited bytes equals the old key with the masked fields
//!   replaced on the key (never on the bytes). Whether an edit applied is checked both ways:
//!   where the key shows the header (non-zero words) the edit must apply, where the key rules
//!   it out (other `dl_type`, other protocol, later fragment) it must not, and an edit that
//!   did not apply leaves every byte as it was.
//! - **Checksum twin**: every checksum that verified before the edit (IPv4 header, TCP, UDP,
//!   ICMP, ICMPv6 with pseudo headers, SCTP CRC32c) verifies after it, recomputed from
//!   scratch with `etherparse` locating the headers and `testutil`'s own checksum code; a UDP
//!   checksum of 0 stays 0.
//! - Truncated and garbage frames never panic and are left unchanged when an edit does not
//!   apply; hand-built cases pin OVS's corner behaviour (UDP 0 / 0xffff, fragments, routing
//!   headers, a wrong SCTP CRC staying wrong).

use datapath::DpAction;
use datapath::actions::{
    Ipv6Addr, L4Proto, Masked, SetArp, SetEth, SetIcmp, SetIpv4, SetIpv6, SetL4, apply_edit,
};
use etherparse::{NetSlice, SlicedPacket};
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::field::{FRAG_LATER, FieldId};
use netdev::Packet;
use proptest::prelude::*;
use testutil::TestRng;
use testutil::packets::{self as pk, Ipv4Spec, Ipv6Ext, Ipv6Spec, Pseudo, internet_checksum};

fn key(frame: &[u8]) -> FlowKey {
    let mut k = FlowKey::default();
    extract(frame, &PacketMeta::port(1), &mut k);
    k
}

fn g(k: &FlowKey, f: FieldId) -> u128 {
    f.get(k)
}

// ---------------------------------------------------------------------------------------------
// Random actions.

fn rand_masked<const N: usize>(rng: &mut TestRng) -> Masked<N> {
    let kind = rng.below(5);
    let mut bytes = || -> [u8; N] { core::array::from_fn(|_| rng.next_u8()) };
    match kind {
        0 => Masked::NONE,
        1 | 2 => Masked::exact(bytes()),
        _ => {
            let v = bytes();
            Masked::new(v, bytes())
        }
    }
}

fn rand_l4proto(rng: &mut TestRng) -> L4Proto {
    match rng.below(3) {
        0 => L4Proto::Tcp,
        1 => L4Proto::Udp,
        _ => L4Proto::Sctp,
    }
}

/// A random set action, mostly one that fits the packet of key `k`.
fn rand_action(rng: &mut TestRng, k: &FlowKey) -> DpAction {
    let dl = g(k, FieldId::DlType) as u16;
    let proto = g(k, FieldId::NwProto) as u8;
    let fitting = match (dl, proto) {
        (0x0800 | 0x86dd, 6) => Some(3),
        (0x0800 | 0x86dd, 17) => Some(4),
        (0x0800 | 0x86dd, 132) => Some(5),
        (0x0800, 1) | (0x86dd, 58) => Some(6),
        (0x0806 | 0x8035, _) => Some(7),
        (0x0800, _) => Some(1),
        (0x86dd, _) => Some(2),
        _ => None,
    };
    let kind = match fitting {
        Some(f) if rng.chance(1, 2) => f,
        Some(f) if (3..=6).contains(&f) && rng.chance(1, 2) => {
            if dl == 0x0800 {
                1
            } else {
                2
            }
        }
        _ => rng.below(8),
    };
    match kind {
        0 => DpAction::SetEth(SetEth {
            src: rand_masked(rng),
            dst: rand_masked(rng),
        }),
        1 => DpAction::SetIpv4(SetIpv4 {
            src: rand_masked(rng),
            dst: rand_masked(rng),
            tos: rand_masked(rng),
            ttl: rand_masked(rng),
        }),
        2 => DpAction::SetIpv6(SetIpv6 {
            addr: match rng.below(3) {
                0 => Ipv6Addr::None,
                1 => Ipv6Addr::Src,
                _ => Ipv6Addr::Dst,
            },
            addr_val: rand_masked(rng),
            label: rand_masked(rng),
            tclass: rand_masked(rng),
            hlimit: rand_masked(rng),
            joined: rng.chance(1, 4),
        }),
        3..=5 => DpAction::SetL4(SetL4 {
            proto: match kind {
                3 => L4Proto::Tcp,
                4 => L4Proto::Udp,
                5 => L4Proto::Sctp,
                _ => rand_l4proto(rng),
            },
            src: rand_masked(rng),
            dst: rand_masked(rng),
        }),
        6 => DpAction::SetIcmp(SetIcmp {
            v6: if rng.chance(1, 5) {
                dl != 0x86dd
            } else {
                dl == 0x86dd
            },
            ty: rand_masked(rng),
            code: rand_masked(rng),
        }),
        _ => DpAction::SetArp(SetArp {
            sip: rand_masked(rng),
            tip: rand_masked(rng),
            op: rand_masked(rng),
            sha: rand_masked(rng),
            tha: rand_masked(rng),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// The key twin.

fn set_m<const N: usize>(k: &mut FlowKey, f: FieldId, m: &Masked<N>) {
    let v = m.apply_u128(f.get(k));
    f.set(k, v);
}

/// What the key says about whether `a` applies: `Some(true)` it must, `Some(false)` it must
/// not, `None` the key cannot tell (all words of the header zero).
fn applies(k: &FlowKey, a: &DpAction) -> Option<bool> {
    let dl = g(k, FieldId::DlType) as u16;
    let any = |fs: &[FieldId]| fs.iter().any(|f| g(k, *f) != 0);
    let ip4 = [
        FieldId::NwSrc,
        FieldId::NwDst,
        FieldId::NwTos,
        FieldId::NwTtl,
        FieldId::NwProto,
        FieldId::NwFrag,
    ];
    let tp = [FieldId::TpSrc, FieldId::TpDst, FieldId::TcpFlags];
    let later = g(k, FieldId::NwFrag) as u8 & FRAG_LATER != 0;
    let proto = g(k, FieldId::NwProto) as u8;
    let l4 = |ok_dl: bool, p: u8| {
        if !ok_dl || proto != p || later {
            Some(false)
        } else if any(&tp) {
            Some(true)
        } else {
            None
        }
    };
    match a {
        DpAction::SetEth(_) => Some(dl != 0),
        DpAction::SetIpv4(_) => {
            if dl != 0x0800 {
                Some(false)
            } else if any(&ip4) {
                Some(true)
            } else {
                None
            }
        }
        DpAction::SetIpv6(_) => {
            if dl != 0x86dd {
                Some(false)
            } else if any(&[FieldId::Ipv6Src, FieldId::Ipv6Dst, FieldId::NwProto]) {
                Some(true)
            } else {
                None
            }
        }
        DpAction::SetL4(s) => l4(dl == 0x0800 || dl == 0x86dd, s.proto.number()),
        DpAction::SetIcmp(s) => {
            if s.v6 {
                l4(dl == 0x86dd, 58)
            } else {
                l4(dl == 0x0800, 1)
            }
        }
        DpAction::SetArp(_) => {
            if dl != 0x0806 && dl != 0x8035 {
                Some(false)
            } else if any(&[
                FieldId::NwSrc,
                FieldId::NwDst,
                FieldId::NwProto,
                FieldId::ArpSha,
                FieldId::ArpTha,
            ]) {
                Some(true)
            } else {
                None
            }
        }
        _ => Some(false),
    }
}

fn is_nd(t: u128, c: u128) -> bool {
    (t == 135 || t == 136) && c == 0
}

/// `k` after `a` applied, edited on the key; and fields the key alone cannot predict (left
/// out of the comparison).
fn twin(k: &FlowKey, a: &DpAction) -> (FlowKey, Vec<FieldId>) {
    let mut n = *k;
    let mut skip = Vec::new();
    match a {
        DpAction::SetEth(s) => {
            set_m(&mut n, FieldId::DlSrc, &s.src);
            set_m(&mut n, FieldId::DlDst, &s.dst);
        }
        DpAction::SetIpv4(s) => {
            set_m(&mut n, FieldId::NwSrc, &s.src);
            set_m(&mut n, FieldId::NwDst, &s.dst);
            set_m(&mut n, FieldId::NwTos, &s.tos);
            set_m(&mut n, FieldId::NwTtl, &s.ttl);
        }
        DpAction::SetIpv6(s) => {
            match s.addr {
                Ipv6Addr::None => {}
                Ipv6Addr::Src => set_m(&mut n, FieldId::Ipv6Src, &s.addr_val),
                Ipv6Addr::Dst => set_m(&mut n, FieldId::Ipv6Dst, &s.addr_val),
            }
            // The label/tclass/hlimit word exists only if the extension chain parsed (the
            // final protocol is then never 0).
            if g(k, FieldId::NwProto) != 0 {
                let lm = s.label.mask_u128() & 0xfffff;
                let old = g(k, FieldId::Ipv6Label);
                FieldId::Ipv6Label.set(&mut n, (old & !lm) | (s.label.value_u128() & lm));
                set_m(&mut n, FieldId::NwTos, &s.tclass);
                set_m(&mut n, FieldId::NwTtl, &s.hlimit);
            }
        }
        DpAction::SetL4(s) => {
            set_m(&mut n, FieldId::TpSrc, &s.src);
            set_m(&mut n, FieldId::TpDst, &s.dst);
        }
        DpAction::SetIcmp(s) => {
            set_m(&mut n, FieldId::TpSrc, &s.ty);
            set_m(&mut n, FieldId::TpDst, &s.code);
            let was = is_nd(g(k, FieldId::TpSrc), g(k, FieldId::TpDst));
            let now = is_nd(g(&n, FieldId::TpSrc), g(&n, FieldId::TpDst));
            if s.v6 && was && !now {
                for f in [
                    FieldId::ArpSha,
                    FieldId::ArpTha,
                    FieldId::NdTarget,
                    FieldId::TcpFlags,
                ] {
                    f.set(&mut n, 0);
                }
            } else if s.v6 && !was && now {
                // Neighbour discovery appears: its fields come from the body.
                skip.extend([
                    FieldId::ArpSha,
                    FieldId::ArpTha,
                    FieldId::NdTarget,
                    FieldId::TcpFlags,
                ]);
            }
        }
        DpAction::SetArp(s) => {
            set_m(&mut n, FieldId::NwSrc, &s.sip);
            set_m(&mut n, FieldId::NwDst, &s.tip);
            set_m(&mut n, FieldId::ArpSha, &s.sha);
            set_m(&mut n, FieldId::ArpTha, &s.tha);
            // The key holds the opcode only when it is ≤ 255 (0 otherwise).
            let old = g(k, FieldId::NwProto);
            if s.op.mask_u128() == 0xffff || old != 0 {
                let op = s.op.apply_u128(old);
                FieldId::NwProto.set(&mut n, if op <= 0xff { op } else { 0 });
            } else if s.op.is_set() {
                skip.push(FieldId::NwProto);
            }
        }
        _ => {}
    }
    (n, skip)
}

// ---------------------------------------------------------------------------------------------
// The checksum twin: headers located by etherparse, sums by testutil.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ck {
    Ipv4Header(bool),
    Tcp(bool),
    Udp(bool),
    /// UDP checksum field 0 ("none").
    UdpNone,
    Icmp(bool),
    Icmp6(bool),
    Sctp(bool),
}

impl Ck {
    fn ok(self) -> bool {
        match self {
            Ck::Ipv4Header(b)
            | Ck::Tcp(b)
            | Ck::Udp(b)
            | Ck::Icmp(b)
            | Ck::Icmp6(b)
            | Ck::Sctp(b) => b,
            Ck::UdpNone => true,
        }
    }
}

fn pseudo_bytes(p: Pseudo, len: usize) -> Vec<u8> {
    let mut v = Vec::new();
    match p {
        Pseudo::V4(s, d, proto) => {
            v.extend_from_slice(&s);
            v.extend_from_slice(&d);
            v.extend_from_slice(&[0, proto]);
            v.extend_from_slice(&(len as u16).to_be_bytes());
        }
        Pseudo::V6(s, d, proto) => {
            v.extend_from_slice(&s);
            v.extend_from_slice(&d);
            v.extend_from_slice(&(len as u32).to_be_bytes());
            v.extend_from_slice(&[0, 0, 0, proto]);
        }
    }
    v
}

/// The checksums of `frame`, each verified from scratch. Over IPv6 behind a routing header
/// with segments left, the pseudo header's destination is `final_dst` (the final
/// destination, which the datapath never changes) when given.
fn checksums(frame: &[u8], final_dst: Option<[u8; 16]>) -> Vec<Ck> {
    let mut out = Vec::new();
    let Ok(s) = SlicedPacket::from_ethernet(frame) else {
        return out;
    };
    let (payload, proto, pseudo) = match &s.net {
        Some(NetSlice::Ipv4(v4)) => {
            let h = v4.header();
            out.push(Ck::Ipv4Header(internet_checksum(&[h.slice()]) == 0));
            let p = v4.payload();
            if p.fragmented {
                return out;
            }
            let pr = p.ip_number.0;
            (p.payload, pr, Pseudo::V4(h.source(), h.destination(), pr))
        }
        Some(NetSlice::Ipv6(v6)) => {
            let h = v6.header();
            let p = v6.payload();
            if p.fragmented {
                return out;
            }
            let routed = v6.extensions().clone().into_iter().any(|e| {
                matches!(e, etherparse::Ipv6ExtensionSlice::Routing(r) if r.slice().get(3).is_some_and(|&sl| sl != 0))
            });
            let dst = match final_dst {
                Some(d) if routed => d,
                _ => h.destination(),
            };
            let pr = p.ip_number.0;
            (p.payload, pr, Pseudo::V6(h.source(), dst, pr))
        }
        _ => return out,
    };
    let v4 = matches!(pseudo, Pseudo::V4(..));
    let with_pseudo = || internet_checksum(&[&pseudo_bytes(pseudo, payload.len()), payload]) == 0;
    match proto {
        6 if payload.len() >= 20 => out.push(Ck::Tcp(with_pseudo())),
        17 if payload.len() >= 8 => {
            if payload[6..8] == [0, 0] {
                out.push(Ck::UdpNone);
            } else {
                out.push(Ck::Udp(with_pseudo()));
            }
        }
        1 if v4 && payload.len() >= 8 => out.push(Ck::Icmp(internet_checksum(&[payload]) == 0)),
        58 if !v4 && payload.len() >= 8 => out.push(Ck::Icmp6(with_pseudo())),
        132 if payload.len() >= 12 => {
            let mut z = payload.to_vec();
            z[8..12].fill(0);
            out.push(Ck::Sctp(pk::crc32c(&z).to_le_bytes() == payload[8..12]));
        }
        _ => {}
    }
    out
}

fn ipv6_dst(frame: &[u8]) -> Option<[u8; 16]> {
    match SlicedPacket::from_ethernet(frame).ok()?.net? {
        NetSlice::Ipv6(v6) => Some(v6.header().destination()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The random differential test.

#[derive(Debug, Default)]
struct Tally {
    applied: [u32; 8],
    must: u32,
    must_not: u32,
    checksums: [u32; 7],
}

fn kind_index(a: &DpAction) -> usize {
    match a {
        DpAction::SetEth(_) => 0,
        DpAction::SetIpv4(_) => 1,
        DpAction::SetIpv6(_) => 2,
        DpAction::SetL4(s) => match s.proto {
            L4Proto::Tcp => 3,
            L4Proto::Udp => 4,
            L4Proto::Sctp => 5,
        },
        DpAction::SetIcmp(_) => 6,
        _ => 7,
    }
}

fn ck_index(c: Ck) -> usize {
    match c {
        Ck::Ipv4Header(_) => 0,
        Ck::Tcp(_) => 1,
        Ck::Udp(_) => 2,
        Ck::UdpNone => 3,
        Ck::Icmp(_) => 4,
        Ck::Icmp6(_) => 5,
        Ck::Sctp(_) => 6,
    }
}

fn check_one(frame: &[u8], acts: &[DpAction], t: &mut Tally) {
    let mut p = Packet::from_slice(frame).unwrap();
    let mut k = key(frame);
    let mut expect_skip = Vec::new();
    let final_dst = ipv6_dst(frame);
    for a in acts {
        let before = p.data().to_vec();
        let must = applies(&k, a);
        let ok = apply_edit(&mut p, a);
        if let Some(m) = must {
            assert_eq!(ok, m, "applied? {a} on {}", pk::to_hex(&before));
            if m {
                t.must += 1;
            } else {
                t.must_not += 1;
            }
        }
        if ok {
            t.applied[kind_index(a)] += 1;
            let (n, skip) = twin(&k, a);
            k = n;
            expect_skip.extend(skip);
        } else {
            assert_eq!(
                p.data(),
                &before[..],
                "{a} did not apply but changed the packet"
            );
        }
        if !expect_skip.is_empty() {
            // Fields the twin cannot predict: take them from the packet from now on.
            let real = key(p.data());
            for f in &expect_skip {
                f.set(&mut k, f.get(&real));
            }
            expect_skip.clear();
        }
        let got = key(p.data());
        assert_eq!(
            got,
            k,
            "after {a}\nbefore {}\nafter  {}",
            pk::to_hex(&before),
            pk::to_hex(p.data())
        );
    }
    let cb = checksums(frame, None);
    let ca = checksums(p.data(), final_dst);
    if cb.len() == ca.len() {
        for (b, a) in cb.iter().zip(&ca) {
            if b.ok() {
                assert!(
                    a.ok() && (*b == Ck::UdpNone) == (*a == Ck::UdpNone),
                    "checksum {b:?} -> {a:?} after {acts:?}\nbefore {}\nafter  {}",
                    pk::to_hex(frame),
                    pk::to_hex(p.data())
                );
                t.checksums[ck_index(*a)] += 1;
            }
        }
    }
}

#[test]
fn random_sets_match_key_twin_and_checksums() {
    let mut rng = TestRng::new(0x5e7f_1e1d);
    let mut t = Tally::default();
    for _ in 0..30_000 {
        let frame = pk::random_packet(&mut rng);
        let k = key(&frame);
        let n = rng.range(1, 3) as usize;
        let acts: Vec<DpAction> = (0..n).map(|_| rand_action(&mut rng, &k)).collect();
        check_one(&frame, &acts, &mut t);
    }
    // Not vacuous: every kind applied, checksums of every kind checked.
    assert!(t.applied.iter().all(|&n| n > 100), "{t:?}");
    // (Random packets always carry a UDP checksum: `UdpNone` is a hand-built case below.)
    let with_sum = [0, 1, 2, 4, 5, 6];
    assert!(with_sum.iter().all(|&i| t.checksums[i] > 50), "{t:?}");
    assert!(t.must > 10_000 && t.must_not > 1000, "{t:?}");
}

// ---------------------------------------------------------------------------------------------
// Bad frames.

fn every_kind(rng: &mut TestRng, k: &FlowKey) -> Vec<DpAction> {
    let mut v: Vec<DpAction> = (0..8).map(|_| rand_action(rng, k)).collect();
    v.push(DpAction::SetL4(SetL4 {
        proto: rand_l4proto(rng),
        src: Masked::exact([1, 2]),
        dst: Masked::exact([3, 4]),
    }));
    v
}

#[test]
fn truncated_frames_never_panic() {
    let mut rng = TestRng::new(77);
    for _ in 0..600 {
        let frame = pk::random_packet(&mut rng);
        let k = key(&frame);
        let acts = every_kind(&mut rng, &k);
        for cut in 0..=frame.len() {
            let f = &frame[..cut];
            for a in &acts {
                let mut p = Packet::from_slice(f).unwrap();
                if !apply_edit(&mut p, a) {
                    assert_eq!(p.data(), f);
                }
                assert_eq!(p.len(), cut);
            }
        }
    }
}

proptest! {
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), ty in prop::sample::select(vec![0x0800u16, 0x86dd, 0x0806, 0x8100, 0x0010]), seed in any::<u64>()) {
        let mut f = bytes;
        if f.len() >= 14 {
            f[12..14].copy_from_slice(&ty.to_be_bytes());
        }
        let mut rng = TestRng::new(seed);
        let k = key(&f);
        for a in every_kind(&mut rng, &k) {
            let mut p = Packet::from_slice(&f).unwrap();
            let ok = apply_edit(&mut p, &a);
            if !ok {
                prop_assert_eq!(p.data(), &f[..]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Corner cases, by hand.

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

fn ipv4_set(src: [u8; 4]) -> DpAction {
    DpAction::SetIpv4(SetIpv4 {
        src: Masked::exact(src),
        ..SetIpv4::default()
    })
}

fn port_set(proto: L4Proto, dst: u16) -> DpAction {
    DpAction::SetL4(SetL4 {
        proto,
        src: Masked::NONE,
        dst: Masked::exact(dst.to_be_bytes()),
    })
}

fn edited(frame: &[u8], a: &DpAction) -> (bool, Vec<u8>) {
    let mut p = Packet::from_slice(frame).unwrap();
    let ok = apply_edit(&mut p, a);
    (ok, p.data().to_vec())
}

fn all_ok(frame: &[u8]) -> bool {
    let c = checksums(frame, None);
    !c.is_empty() && c.iter().all(|c| c.ok())
}

#[test]
fn udp_zero_checksum_stays_zero() {
    let mut f = pk::udp4(A, B, 1000, 2000, 10);
    let l4 = 14 + 20;
    f[l4 + 6..l4 + 8].fill(0);
    for a in [ipv4_set([192, 0, 2, 1]), port_set(L4Proto::Udp, 53)] {
        let (ok, g) = edited(&f, &a);
        assert!(ok);
        assert_eq!(&g[l4 + 6..l4 + 8], &[0, 0], "{a}");
        assert_ne!(g, f);
    }
}

#[test]
fn udp_checksum_never_becomes_zero() {
    let f = pk::udp4(A, B, 1000, 2000, 10);
    let l4 = 14 + 20;
    let c = u16::from_be_bytes([f[l4 + 6], f[l4 + 7]]);
    // The destination port that makes the updated checksum come out as 0 (RFC 1624):
    // ~(~c + ~old + new) = 0  ⇔  new = ~fold(~c + ~old).
    let mut s = u32::from(!c) + u32::from(!2000u16);
    s = (s & 0xffff) + (s >> 16);
    let bad = !(s as u16);
    let (ok, g) = edited(&f, &port_set(L4Proto::Udp, bad));
    assert!(ok);
    assert_eq!(&g[l4 + 6..l4 + 8], &[0xff, 0xff]);
    assert!(all_ok(&g));
}

#[test]
fn later_fragment_has_no_l4() {
    let spec = Ipv4Spec::new(A, B, 6);
    let seg = pk::tcp(spec.pseudo(), &pk::TcpSpec::new(1, 2, 0x10), &[7; 64]);
    let frags = pk::ipv4_fragments(&spec, &seg, 32);
    assert!(frags.len() >= 2);
    let later = &frags[1];
    let (ok, g) = edited(later, &port_set(L4Proto::Tcp, 9));
    assert!(!ok);
    assert_eq!(&g, later);
    // An address change fixes the IP header only: the payload is data, not a TCP header.
    let (ok, g) = edited(later, &ipv4_set([1, 1, 1, 1]));
    assert!(ok);
    let ihl = 14 + usize::from(later[14] & 15) * 4;
    assert_eq!(&g[ihl..], &later[ihl..]);
    assert!(checksums(&g, None).iter().all(|c| c.ok()));
    // The first fragment's TCP checksum is updated (it covers the whole datagram).
    let (ok, g) = edited(&frags[0], &port_set(L4Proto::Tcp, 9));
    assert!(ok);
    assert_ne!(g, frags[0]);
}

fn icmp6_with_routing(segments_left: u8) -> Vec<u8> {
    let spec = Ipv6Spec::new([0x20; 16], [0x30; 16]);
    let body = pk::icmp6(spec.pseudo(58), 128, 0, &[0, 1, 0, 1, 9, 9]);
    let rh = Ipv6Ext::Routing {
        rtype: 4,
        segments_left,
        data: [[0u8; 4].as_slice(), &[0x30; 16]].concat(),
    };
    pk::ethernet(
        pk::DST_MAC,
        pk::SRC_MAC,
        &[],
        0x86dd,
        &pk::ipv6(&spec, &[rh], 58, &body),
    )
}

#[test]
fn routing_header_keeps_final_destination() {
    let dst = DpAction::SetIpv6(SetIpv6 {
        addr: Ipv6Addr::Dst,
        addr_val: Masked::exact([0x44; 16]),
        ..SetIpv6::default()
    });
    let src = DpAction::SetIpv6(SetIpv6 {
        addr: Ipv6Addr::Src,
        addr_val: Masked::exact([0x55; 16]),
        ..SetIpv6::default()
    });
    let csum_at = 14 + 40 + 24 + 2;
    // Segments left: the destination is not the one in the pseudo header.
    let f = icmp6_with_routing(1);
    assert!(all_ok(&f));
    let (ok, g) = edited(&f, &dst);
    assert!(ok);
    assert_eq!(g[csum_at..csum_at + 2], f[csum_at..csum_at + 2]);
    let (ok, g) = edited(&f, &src);
    assert!(ok);
    assert_ne!(g[csum_at..csum_at + 2], f[csum_at..csum_at + 2]);
    assert!(checksums(&g, ipv6_dst(&f)).iter().all(|c| c.ok()));
    // No segments left: the IPv6 destination is the final one.
    let f = icmp6_with_routing(0);
    let (ok, g) = edited(&f, &dst);
    assert!(ok);
    assert!(all_ok(&g));
}

#[test]
fn sctp_crc_is_recomputed_and_errors_kept() {
    let f = pk::sctp4(A, B, 5, 6, 40);
    assert!(all_ok(&f));
    let (ok, g) = edited(&f, &port_set(L4Proto::Sctp, 7777));
    assert!(ok);
    assert!(all_ok(&g));
    // A wrong CRC stays wrong by the same amount.
    let at = 14 + 20 + 8;
    let mut bad = f.clone();
    bad[at] ^= 0x5a;
    let (_, g2) = edited(&bad, &port_set(L4Proto::Sctp, 7777));
    assert_eq!(g2[at] ^ g[at], 0x5a);
    assert_eq!(g2[at + 1..at + 4], g[at + 1..at + 4]);
}

#[test]
fn icmp4_checksum_has_no_pseudo_header_icmp6_has() {
    let f = pk::icmp4_echo(A, B, 1, 1, true);
    let icmp = 14 + 20;
    let (ok, g) = edited(&f, &ipv4_set([9, 9, 9, 9]));
    assert!(ok);
    assert_eq!(g[icmp..], f[icmp..]);
    assert!(all_ok(&g));
    let f = pk::icmp6_echo([1; 16], [2; 16], 1, 1, true);
    let (ok, g) = edited(
        &f,
        &DpAction::SetIpv6(SetIpv6 {
            addr: Ipv6Addr::Src,
            addr_val: Masked::from_u128(0xffff, 0xffff_ffff),
            ..SetIpv6::default()
        }),
    );
    assert!(ok);
    assert_ne!(g[14 + 40 + 2..14 + 40 + 4], f[14 + 40 + 2..14 + 40 + 4]);
    assert!(all_ok(&g));
    // And a type/code change keeps it right.
    let (ok, g) = edited(
        &f,
        &DpAction::SetIcmp(SetIcmp {
            v6: true,
            ty: Masked::exact([129]),
            code: Masked::exact([3]),
        }),
    );
    assert!(ok);
    assert_eq!(&g[54..56], &[129, 3]);
    assert!(all_ok(&g));
}

#[test]
fn vlan_tagged_ipv4_edits_through_two_tags() {
    let f = pk::qinq(&pk::tcp4(A, B, 1, 2, 0x18, 20), 100, 200);
    let a = DpAction::SetIpv4(SetIpv4 {
        dst: Masked::from_u128(0x0000_00ff, 0x0000_00ff),
        ttl: Masked::exact([7]),
        tos: Masked::from_u128(0xb8, 0xfc),
        ..SetIpv4::default()
    });
    let (ok, e) = edited(&f, &a);
    assert!(ok);
    let k = key(&e);
    assert_eq!(
        g(&k, FieldId::NwDst),
        u128::from(u32::from_be_bytes([10, 0, 0, 255]))
    );
    assert_eq!(g(&k, FieldId::NwTtl), 7);
    assert_eq!(g(&k, FieldId::NwTos), 0xb8);
    assert!(all_ok(&e));
}

#[test]
fn ipv6_authentication_header_is_skipped() {
    // IPv6 | AH (12 bytes, next header UDP) | UDP: extraction sees the UDP ports, so must the
    // edits (the random corpus has no AH).
    let spec = Ipv6Spec::new([1; 16], [2; 16]);
    let udp = pk::udp(spec.pseudo(17), 1000, 2000, &[5; 12]);
    let mut ah = vec![17, 1, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1];
    ah.extend_from_slice(&udp);
    let mut ip = pk::ipv6(&spec, &[], 17, &ah);
    ip[6] = 51;
    let f = pk::ethernet(pk::DST_MAC, pk::SRC_MAC, &[], 0x86dd, &ip);
    assert_eq!(g(&key(&f), FieldId::TpDst), 2000);
    let mut t = Tally::default();
    let src = DpAction::SetIpv6(SetIpv6 {
        addr: Ipv6Addr::Src,
        addr_val: Masked::exact([7; 16]),
        ..SetIpv6::default()
    });
    check_one(&f, &[port_set(L4Proto::Udp, 53), src], &mut t);
    assert_eq!(t.must, 2);
    let (_, e) = edited(&f, &src);
    let at = 14 + 40 + 12 + 6;
    assert_ne!(
        e[at..at + 2],
        f[at..at + 2],
        "the UDP checksum follows the address"
    );
}
