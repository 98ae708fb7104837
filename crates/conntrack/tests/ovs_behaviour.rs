//! Packet-by-packet scenarios whose expected answers were derived by reading OVS 3.1's
//! `lib/conntrack.c`, `conntrack-tcp.c`, `conntrack-other.c`, `conntrack-icmp.c`,
//! `conntrack-tp.c` and `ct-dpif.c` (the comments say which rule each check exercises).

use conntrack::build;
use conntrack::{
    Config, Conntrack, CtAction, FastCache, FlushTuple, InvalidReason, NatAction, NatKind,
};
use flow::extract::{CtOrigTuple, PacketMeta};
use flow::field::ct_state as cs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TRK: u32 = cs::TRACKED;
const NEW: u32 = cs::NEW;
const EST: u32 = cs::ESTABLISHED;
const REL: u32 = cs::RELATED;
const RPL: u32 = cs::REPLY_DIR;
const INV: u32 = cs::INVALID;
const SNAT: u32 = cs::SRC_NAT;
const DNAT: u32 = cs::DST_NAT;

const SYN: u16 = 0x02;
const ACK: u16 = 0x10;
const FIN: u16 = 0x01;
const RST: u16 = 0x04;
const PSH: u16 = 0x08;

fn a(x: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, x))
}
fn a6(x: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, x))
}

/// Runs every packet through a full-path tracker and a cached one and checks they agree.
struct H {
    ct: Conntrack,
    twin: Conntrack,
    cache: FastCache,
    now: u64,
}

impl H {
    fn new() -> H {
        Self::with(Config::default())
    }
    fn with(cfg: Config) -> H {
        H {
            ct: Conntrack::with_seed(cfg, 1),
            twin: Conntrack::with_seed(cfg, 1),
            cache: FastCache::new(64),
            now: 1_000_000,
        }
    }
    fn run_md(&mut self, frame: &mut Vec<u8>, act: CtAction, md: PacketMeta) -> PacketMeta {
        let mut f2 = frame.clone();
        let mut m1 = md;
        let mut m2 = md;
        self.ct.execute(frame, &mut m1, &act, self.now);
        self.twin
            .execute_cached(&mut self.cache, &mut f2, &mut m2, &act, self.now);
        assert_eq!(m1, m2, "fast path disagrees");
        assert_eq!(*frame, f2, "fast path rewrote differently");
        assert_eq!(self.ct.dump(None), self.twin.dump(None));
        m1
    }
    fn run(&mut self, frame: &mut Vec<u8>, act: CtAction) -> PacketMeta {
        self.run_md(frame, act, PacketMeta::port(1))
    }
    fn st(&mut self, mut frame: Vec<u8>, act: CtAction) -> u32 {
        self.run(&mut frame, act).ct_state
    }
    fn dump(&self) -> Vec<String> {
        self.ct.dump(None).iter().map(|d| d.to_string()).collect()
    }
    fn adv(&mut self, ms: u64) {
        self.now += ms;
    }
}

fn commit(zone: u16) -> CtAction {
    CtAction {
        zone,
        commit: true,
        ..CtAction::default()
    }
}
fn look(zone: u16) -> CtAction {
    CtAction {
        zone,
        ..CtAction::default()
    }
}

// ---------------------------------------------------------------- UDP ("other") tracker

#[test]
fn udp_new_uncommitted_leaves_no_state_and_reports_its_tuple() {
    let mut h = H::new();
    let mut f = build::udp(a(1), a(2), 5353, 53, b"q");
    let md = h.run(&mut f, look(0));
    assert_eq!(md.ct_state, NEW | TRK);
    assert_eq!(h.ct.nconns(), 0);
    // write_ct_md without a connection reports the packet's own key.
    assert_eq!(
        md.ct_orig,
        CtOrigTuple::V4 {
            src: 0x0a00_0001,
            dst: 0x0a00_0002,
            proto: 17,
            tp_src: 5353,
            tp_dst: 53
        }
    );
    assert_eq!((md.ct_mark, md.ct_label, md.ct_zone), (0, 0, 0));
}

#[test]
fn udp_first_multiple_bidir() {
    let mut h = H::new();
    let orig = build::udp(a(1), a(2), 5353, 53, b"q");
    let reply = build::udp(a(2), a(1), 53, 5353, b"r");
    assert_eq!(h.st(orig.clone(), commit(0)), NEW | TRK);
    assert_eq!(h.ct.nconns(), 1);
    assert_eq!(
        h.dump(),
        [
            "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=5353,dport=53),reply=(src=10.0.0.2,dst=10.0.0.1,sport=53,dport=5353)"
        ]
    );
    // OTHERS_FIRST -> MULTIPLE: still +new.
    assert_eq!(h.st(orig.clone(), look(0)), NEW | TRK);
    // Any reply -> BIDIR: +est+rpl.
    assert_eq!(h.st(reply.clone(), look(0)), EST | RPL | TRK);
    // Then the original direction is +est too.
    assert_eq!(h.st(orig.clone(), look(0)), EST | TRK);
    // commit on an existing connection changes nothing.
    assert_eq!(h.st(orig, commit(0)), EST | TRK);
    assert_eq!(h.ct.nconns(), 1);
}

#[test]
fn udp_timeouts_follow_ovs_policy() {
    let mut h = H::new();
    let orig = build::udp(a(1), a(2), 1000, 2000, b"q");
    let reply = build::udp(a(2), a(1), 2000, 1000, b"r");
    h.st(orig.clone(), commit(0)); // udp_first: 60 s
    h.adv(59_999);
    assert_eq!(h.st(orig.clone(), look(0)), NEW | TRK); // MULTIPLE: udp_single 60 s
    h.adv(59_999);
    assert_eq!(h.st(reply.clone(), look(0)), EST | RPL | TRK); // BIDIR: udp_multiple 30 s
    h.adv(29_999);
    assert_eq!(h.st(orig.clone(), look(0)), EST | TRK);
    h.adv(30_000);
    // Expired: absent, although not swept yet.
    assert_eq!(h.st(orig.clone(), look(0)), NEW | TRK);
    assert_eq!(h.ct.nconns(), 1);
    assert!(h.dump().is_empty());
    assert_eq!(h.ct.sweep(h.now, 100), 1);
    assert_eq!(h.ct.nconns(), 0);
}

#[test]
fn vlan_and_qinq_tagged_packets_are_tracked() {
    let mut h = H::new();
    let f = build::vlan(&build::udp(a(1), a(2), 1, 2, b"x"), 10);
    assert_eq!(h.st(f.clone(), commit(0)), NEW | TRK);
    let qinq = build::vlan(&f, 20);
    assert_eq!(h.st(qinq, look(0)), NEW | TRK);
    let r = build::vlan(&build::vlan(&build::udp(a(2), a(1), 2, 1, b"x"), 1), 2);
    assert_eq!(h.st(r, look(0)), EST | RPL | TRK);
    // Three tags: not parsed.
    let three = build::vlan(
        &build::vlan(&build::vlan(&build::udp(a(1), a(2), 1, 2, b""), 1), 2),
        3,
    );
    assert_eq!(h.st(three, look(0)), INV | TRK);
}

// ---------------------------------------------------------------- ICMP

#[test]
fn icmp_echo_request_reply() {
    let mut h = H::new();
    let req = build::echo(a(1), a(2), 8, 77, 1);
    let rep = build::echo(a(2), a(1), 0, 77, 1);
    // A reply cannot open a connection (icmp4_valid_new): +inv, with its own tuple.
    let mut r0 = rep.clone();
    let md = h.run(&mut r0, commit(0));
    assert_eq!(md.ct_state, INV | TRK);
    assert_eq!(
        md.ct_orig,
        CtOrigTuple::V4 {
            src: 0x0a00_0002,
            dst: 0x0a00_0001,
            proto: 1,
            tp_src: 0,
            tp_dst: 0
        }
    );
    assert_eq!(h.ct.nconns(), 0);
    let mut q = req.clone();
    let md = h.run(&mut q, commit(0));
    assert_eq!(md.ct_state, NEW | TRK);
    assert_eq!(
        md.ct_orig,
        CtOrigTuple::V4 {
            src: 0x0a00_0001,
            dst: 0x0a00_0002,
            proto: 1,
            tp_src: 8,
            tp_dst: 0
        }
    );
    assert_eq!(
        h.dump(),
        [
            "icmp,orig=(src=10.0.0.1,dst=10.0.0.2,id=77,type=8,code=0),reply=(src=10.0.0.2,dst=10.0.0.1,id=77,type=0,code=0)"
        ]
    );
    assert_eq!(h.st(req.clone(), look(0)), NEW | TRK);
    assert_eq!(h.st(rep.clone(), look(0)), EST | RPL | TRK);
    assert_eq!(h.st(req, look(0)), EST | TRK);
    // Another id is another connection.
    assert_eq!(h.st(build::echo(a(2), a(1), 0, 78, 1), look(0)), INV | TRK);
    // ICMP reply timeout 30 s.
    h.adv(30_000);
    // dump() uses the latest time the tracker was told; dump_at takes one.
    assert_eq!(h.dump().len(), 1);
    assert!(h.ct.dump_at(None, h.now).is_empty());
}

#[test]
fn icmp_error_about_known_connection_is_related() {
    let mut h = H::new();
    let mut orig = build::udp(a(1), a(2), 4000, 53, b"q");
    h.run(
        &mut orig,
        CtAction {
            mark: Some((9, u32::MAX)),
            ..commit(0)
        },
    );
    // The server's host answers port unreachable, quoting the client's packet.
    let inner = build::strip_eth(&orig).to_vec();
    let err = build::icmp(a(2), a(1), 3, 3, [0; 4], &inner);
    let mut e = err.clone();
    let md = h.run(&mut e, look(0));
    assert_eq!(md.ct_state, REL | RPL | TRK);
    assert_eq!(md.ct_mark, 9);
    // A router in the other direction: quoting a reply packet, sent to the server.
    let rep = build::udp(a(2), a(1), 53, 4000, b"r");
    let err2 = build::icmp(a(1), a(2), 11, 0, [0; 4], build::strip_eth(&rep));
    assert_eq!(h.st(err2, look(0)), REL | TRK);
    // Related packets do not advance the connection: still one-directional (+new).
    assert_eq!(h.st(orig, look(0)), NEW | TRK);
    // An error about an unknown connection is invalid.
    let other = build::udp(a(1), a(2), 4001, 53, b"q");
    let err3 = build::icmp(a(2), a(1), 3, 3, [0; 4], build::strip_eth(&other));
    assert_eq!(h.st(err3, commit(0)), INV | TRK);
    // Inner source must be the outer destination.
    let err4 = build::icmp(a(2), a(3), 3, 3, [0; 4], &inner);
    assert_eq!(h.st(err4, look(0)), INV | TRK);
    let s = h.ct.stats();
    assert!(
        s.invalid_by_reason
            .contains(&(InvalidReason::RelatedNoConn, 1))
    );
    assert!(s.invalid_by_reason.contains(&(InvalidReason::IcmpInner, 1)));
}

#[test]
fn icmpv6_echo_and_nd() {
    let mut h = H::new();
    let req = build::echo(a6(1), a6(2), 128, 5, 1);
    let rep = build::echo(a6(2), a6(1), 129, 5, 1);
    let mut q = req.clone();
    let md = h.run(&mut q, commit(0));
    assert_eq!(md.ct_state, NEW | TRK);
    assert_eq!(
        md.ct_orig,
        CtOrigTuple::V6 {
            proto: 58,
            tp_src: 128,
            tp_dst: 0
        }
    );
    assert_eq!(h.st(rep, look(0)), EST | RPL | TRK);
    assert_eq!(
        h.dump(),
        [
            "icmpv6,orig=(src=fd00::1,dst=fd00::2,id=5,type=128,code=0),reply=(src=fd00::2,dst=fd00::1,id=5,type=129,code=0)"
        ]
    );
    // Neighbour solicitation: not tracked by OVS's extract_l4_icmp6.
    let ns = build::icmp(a6(1), a6(2), 135, 0, [0; 4], &[0; 16]);
    assert_eq!(h.st(ns, commit(0)), INV | TRK);
}

// ---------------------------------------------------------------- TCP

struct Tcp {
    c: IpAddr,
    s: IpAddr,
    cp: u16,
    sp: u16,
    cseq: u32,
    sseq: u32,
}

impl Tcp {
    fn c2s(&self, flags: u16, payload: &[u8]) -> Vec<u8> {
        build::tcp(
            self.c,
            self.s,
            self.cp,
            self.sp,
            self.cseq,
            self.sseq,
            flags,
            65535,
            &[],
            payload,
        )
    }
    fn s2c(&self, flags: u16, payload: &[u8]) -> Vec<u8> {
        build::tcp(
            self.s,
            self.c,
            self.sp,
            self.cp,
            self.sseq,
            self.cseq,
            flags,
            65535,
            &[],
            payload,
        )
    }
}

fn handshake(h: &mut H, t: &mut Tcp) {
    assert_eq!(h.st(t.c2s(SYN, b""), commit(0)), NEW | TRK);
    t.cseq += 1;
    assert_eq!(h.st(t.s2c(SYN | ACK, b""), look(0)), EST | RPL | TRK);
    t.sseq += 1;
    assert_eq!(h.st(t.c2s(ACK, b""), look(0)), EST | TRK);
}

fn tcp_flow(c: IpAddr, s: IpAddr) -> Tcp {
    Tcp {
        c,
        s,
        cp: 33000,
        sp: 80,
        cseq: 1000,
        sseq: 50_000,
    }
}

fn state(h: &H) -> String {
    let d = h.dump();
    assert_eq!(d.len(), 1, "{d:?}");
    d[0].split("protoinfo=").nth(1).unwrap_or("").to_string()
}

#[test]
fn tcp_full_lifecycle_states_and_timeouts() {
    let mut h = H::new();
    let mut t = tcp_flow(a(1), a(2));
    assert_eq!(h.st(t.c2s(SYN, b""), commit(0)), NEW | TRK);
    assert_eq!(state(&h), "(state=SYN_SENT)");
    // Retransmitted SYN: src <= SYN_SENT -> +new (CT_UPDATE_VALID_NEW).
    assert_eq!(h.st(t.c2s(SYN, b""), look(0)), NEW | TRK);
    t.cseq += 1;
    assert_eq!(h.st(t.s2c(SYN | ACK, b""), look(0)), EST | RPL | TRK);
    // orig ESTABLISHED, reply SYN_SENT.
    assert_eq!(state(&h), "(state=ESTABLISHED)");
    assert_eq!(h.ct.dump(None)[0].tcp, Some((4, 2)));
    t.sseq += 1;
    assert_eq!(h.st(t.c2s(ACK, b""), look(0)), EST | TRK);
    assert_eq!(h.ct.dump(None)[0].tcp, Some((4, 4)));
    assert_eq!(h.ct.dump(None)[0].timeout, 24 * 3600);
    assert_eq!(h.st(t.c2s(ACK | PSH, b"hello"), look(0)), EST | TRK);
    t.cseq += 5;
    assert_eq!(h.st(t.s2c(ACK | PSH, b"world!"), look(0)), EST | RPL | TRK);
    t.sseq += 6;
    // Client closes.
    assert_eq!(h.st(t.c2s(FIN | ACK, b""), look(0)), EST | TRK);
    t.cseq += 1;
    assert_eq!(h.ct.dump(None)[0].tcp, Some((7, 4)));
    assert_eq!(h.ct.dump(None)[0].timeout, 15 * 60); // tcp_fin_wait (CT_TM_TCP_CLOSING)
    assert_eq!(h.st(t.s2c(ACK, b""), look(0)), EST | RPL | TRK);
    assert_eq!(h.ct.dump(None)[0].tcp, Some((9, 4)));
    assert_eq!(h.st(t.s2c(FIN | ACK, b""), look(0)), EST | RPL | TRK);
    t.sseq += 1;
    assert_eq!(h.ct.dump(None)[0].timeout, 45); // tcp_time_wait (CT_TM_TCP_FIN_WAIT)
    assert_eq!(h.st(t.c2s(ACK, b""), look(0)), EST | TRK);
    assert_eq!(h.ct.dump(None)[0].tcp, Some((9, 9)));
    assert_eq!(h.ct.dump(None)[0].timeout, 30); // tcp_close
    // FIN_WAIT_2 prints as TIME_WAIT (coalesce_tcp_state).
    assert_eq!(state(&h), "(state=TIME_WAIT)");
    // A new SYN on the closed connection: CT_UPDATE_NEW -> the old one goes, a new one
    // is committed.
    t.cseq += 100_000;
    assert_eq!(h.st(t.c2s(SYN, b""), commit(0)), NEW | TRK);
    assert_eq!(state(&h), "(state=SYN_SENT)");
    assert_eq!(h.ct.nconns(), 1);
}

#[test]
fn tcp_syn_on_closed_connection_without_commit_drops_it() {
    let mut h = H::new();
    let mut t = tcp_flow(a(1), a(2));
    handshake(&mut h, &mut t);
    assert_eq!(h.st(t.c2s(RST, b""), look(0)), EST | TRK);
    assert_eq!(state(&h), "(state=TIME_WAIT)");
    assert_eq!(h.st(t.c2s(SYN, b""), look(0)), NEW | TRK);
    assert!(h.dump().is_empty());
}

#[test]
fn tcp_syn_ack_or_bad_flags_cannot_open() {
    let mut h = H::new();
    let t = tcp_flow(a(1), a(2));
    let mut f = t.c2s(SYN | ACK, b"");
    let md = h.run(&mut f, commit(0));
    assert_eq!(md.ct_state, INV | TRK);
    assert!(matches!(
        md.ct_orig,
        CtOrigTuple::V4 {
            tp_src: 33000,
            tp_dst: 80,
            ..
        }
    ));
    assert_eq!(h.st(t.c2s(SYN | FIN, b""), commit(0)), INV | TRK);
    assert_eq!(h.st(t.c2s(0, b""), commit(0)), INV | TRK);
    assert_eq!(h.st(t.c2s(FIN, b""), commit(0)), INV | TRK);
    assert_eq!(h.ct.nconns(), 0);
    // A bare ACK may open (picked up mid-stream, liberal window scaling).
    assert_eq!(h.st(t.c2s(ACK, b"x"), commit(0)), NEW | TRK);
    let s = h.ct.stats();
    assert!(
        s.invalid_by_reason
            .contains(&(InvalidReason::NotValidNew, 1))
    );
    assert!(s.invalid_by_reason.contains(&(InvalidReason::TcpFlags, 3)));
}

#[test]
fn tcp_out_of_window_is_invalid_but_keeps_connection_metadata() {
    let mut h = H::new();
    let mut t = tcp_flow(a(1), a(2));
    let mut syn = t.c2s(SYN, b"");
    h.run(
        &mut syn,
        CtAction {
            mark: Some((0x42, 0xff)),
            label: Some((7, 0xf)),
            ..commit(0)
        },
    );
    t.cseq += 1;
    h.st(t.s2c(SYN | ACK, b""), look(0));
    t.sseq += 1;
    h.st(t.c2s(ACK, b""), look(0));
    let far = Tcp {
        cseq: t.cseq.wrapping_add(0x8000_0000),
        ..tcp_flow(a(1), a(2))
    };
    let far = Tcp {
        sseq: t.sseq,
        ..far
    };
    let mut f = far.c2s(ACK, b"data");
    let md = h.run(&mut f, look(0));
    assert_eq!(md.ct_state, INV | TRK);
    assert_eq!((md.ct_mark, md.ct_label), (0x42, 7));
    assert!(matches!(md.ct_orig, CtOrigTuple::V4 { tp_src: 33000, .. }));
    // In-window traffic still fine.
    assert_eq!(h.st(t.c2s(ACK, b"ok"), look(0)), EST | TRK);
    assert!(
        h.ct.stats()
            .invalid_by_reason
            .contains(&(InvalidReason::TcpWindow, 1))
    );
}

#[test]
fn tcp_rst_needs_exact_sequence() {
    let mut h = H::new();
    let mut t = tcp_flow(a(1), a(2));
    handshake(&mut h, &mut t);
    let off = Tcp {
        cseq: t.cseq + 1000,
        ..tcp_flow(a(1), a(2))
    };
    let off = Tcp {
        sseq: t.sseq,
        ..off
    };
    assert_eq!(h.st(off.c2s(RST, b""), look(0)), INV | TRK);
    // The client's seqlo is still its ISN (1000): a zero-length ACK does not advance it
    // (pf's "seq == end" rule), so seqlo + 2 is refused and seqlo + 1 accepted.
    let p2 = Tcp {
        cseq: t.cseq + 1,
        sseq: t.sseq,
        ..tcp_flow(a(1), a(2))
    };
    assert_eq!(h.st(p2.c2s(RST | ACK, b""), look(0)), INV | TRK);
    let p1 = Tcp {
        cseq: t.cseq,
        sseq: t.sseq,
        ..tcp_flow(a(1), a(2))
    };
    assert_eq!(h.st(p1.c2s(RST | ACK, b""), look(0)), EST | TRK);
    assert_eq!(state(&h), "(state=TIME_WAIT)");
    assert_eq!(h.ct.dump(None)[0].timeout, 30);
}

#[test]
fn tcp_liberal_accepts_out_of_window() {
    let mut h = H::with(Config {
        tcp_liberal: true,
        ..Config::default()
    });
    let mut t = tcp_flow(a(1), a(2));
    handshake(&mut h, &mut t);
    let far = Tcp {
        cseq: t.cseq.wrapping_add(0x8000_0000),
        sseq: t.sseq,
        ..tcp_flow(a(1), a(2))
    };
    assert_eq!(h.st(far.c2s(ACK, b"data"), look(0)), EST | TRK);
    // Flags are still checked.
    assert_eq!(h.st(far.c2s(SYN | RST, b""), look(0)), INV | TRK);
}

#[test]
fn tcp_window_scaling_is_negotiated() {
    let mut h = H::new();
    let (c, s) = (a(1), a(2));
    let ws = [1u8, 3, 3, 7];
    assert_eq!(
        h.st(
            build::tcp(c, s, 1, 2, 100, 0, SYN, 65535, &ws, b""),
            commit(0)
        ),
        NEW | TRK
    );
    assert_eq!(
        h.st(
            build::tcp(s, c, 2, 1, 500, 101, SYN | ACK, 65535, &ws, b""),
            look(0)
        ),
        EST | RPL | TRK
    );
    assert_eq!(
        h.st(
            build::tcp(c, s, 1, 2, 101, 501, ACK, 1000, &[], b""),
            look(0)
        ),
        EST | TRK
    );
    // With scale 7 the server may send far beyond 64 KiB of unscaled window:
    // 1000 << 7 = 128000 bytes from 501.
    assert_eq!(
        h.st(
            build::tcp(s, c, 2, 1, 501 + 100_000, 101, ACK, 1000, &[], b"x"),
            look(0)
        ),
        EST | RPL | TRK
    );
    // ... but not beyond it.
    assert_eq!(
        h.st(
            build::tcp(s, c, 2, 1, 501 + 300_000, 101, ACK, 1000, &[], b"x"),
            look(0)
        ),
        INV | TRK
    );
}

#[test]
fn tcp_over_ipv6() {
    let mut h = H::new();
    let mut t = tcp_flow(a6(1), a6(2));
    handshake(&mut h, &mut t);
    assert_eq!(
        h.dump(),
        [
            "tcp,orig=(src=fd00::1,dst=fd00::2,sport=33000,dport=80),reply=(src=fd00::2,dst=fd00::1,sport=80,dport=33000),protoinfo=(state=ESTABLISHED)"
        ]
    );
    let mut f = t.c2s(ACK, b"x");
    let md = h.run(&mut f, look(0));
    assert_eq!(
        md.ct_orig,
        CtOrigTuple::V6 {
            proto: 6,
            tp_src: 33000,
            tp_dst: 80
        }
    );
}

// ---------------------------------------------------------------- marks, zones, force

#[test]
fn mark_and_label_with_masks_stored_once_seen_both_ways() {
    let mut h = H::new();
    let orig = build::udp(a(1), a(2), 1, 2, b"");
    let reply = build::udp(a(2), a(1), 2, 1, b"");
    let mut f = orig.clone();
    let md = h.run(
        &mut f,
        CtAction {
            mark: Some((0xab, 0xff)),
            label: Some((1 << 100, 1 << 100)),
            ..commit(3)
        },
    );
    assert_eq!((md.ct_mark, md.ct_label, md.ct_zone), (0xab, 1 << 100, 3));
    let mut f = orig.clone();
    let md = h.run(
        &mut f,
        CtAction {
            mark: Some((0x1200, 0xff00)),
            ..commit(3)
        },
    );
    assert_eq!(md.ct_mark, 0x12ab);
    let mut r = reply.clone();
    let md = h.run(&mut r, look(3));
    assert_eq!((md.ct_mark, md.ct_label), (0x12ab, 1 << 100));
    assert_eq!(
        h.dump(),
        [
            "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2),reply=(src=10.0.0.2,dst=10.0.0.1,sport=2,dport=1),zone=3,mark=4779,labels=0x10000000000000000000000000"
        ]
    );
    // Another zone knows nothing of it.
    assert_eq!(h.st(reply, look(4)), NEW | TRK);
}

#[test]
fn ct_state_is_reset_when_entering_another_zone_but_kept_within_one() {
    let mut h = H::new();
    let orig = build::udp(a(1), a(2), 1, 2, b"");
    h.st(orig.clone(), commit(1));
    h.st(build::udp(a(2), a(1), 2, 1, b""), look(1));
    let mut f = orig.clone();
    let md = h.run(&mut f, look(1));
    assert_eq!(md.ct_state, EST | TRK);
    // Recirculated into zone 2: reset, then +new.
    let md2 = h.run_md(&mut f, look(2), md);
    assert_eq!(md2.ct_state, NEW | TRK);
    // Again in zone 2 with the carried state: OVS only ORs bits in.
    let md3 = h.run_md(&mut f, look(2), md2);
    assert_eq!(md3.ct_state, NEW | TRK);
}

#[test]
fn force_commit_from_reply_side_replaces_the_connection() {
    let mut h = H::new();
    h.st(build::udp(a(1), a(2), 1, 2, b""), commit(0));
    let force = CtAction {
        force: true,
        ..commit(0)
    };
    assert_eq!(h.st(build::udp(a(2), a(1), 2, 1, b""), force), NEW | TRK);
    assert_eq!(
        h.dump(),
        [
            "udp,orig=(src=10.0.0.2,dst=10.0.0.1,sport=2,dport=1),reply=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2)"
        ]
    );
    assert_eq!(h.ct.nconns(), 1);
    // Force in the original direction keeps it.
    assert_eq!(h.st(build::udp(a(2), a(1), 2, 1, b""), force), NEW | TRK);
    assert_eq!(h.ct.nconns(), 1);
}

// ---------------------------------------------------------------- limits, sweep, flush

#[test]
fn global_and_zone_limits_refuse_commits_as_new() {
    let mut h = H::with(Config {
        max_conns: 2,
        ..Config::default()
    });
    for p in 1..=2 {
        assert_eq!(
            h.st(build::udp(a(1), a(2), p, 9, b""), commit(0)),
            NEW | TRK
        );
    }
    let mut f = build::udp(a(1), a(2), 3, 9, b"");
    let md = h.run(
        &mut f,
        CtAction {
            mark: Some((5, 5)),
            ..commit(0)
        },
    );
    assert_eq!((md.ct_state, md.ct_mark), (NEW | TRK, 0));
    assert_eq!(h.ct.nconns(), 2);
    assert_eq!(h.ct.stats().refused_global_limit, 1);
    h.ct.set_maxconns(100);
    h.twin.set_maxconns(100);
    h.ct.set_zone_limit(7, Some(1));
    h.twin.set_zone_limit(7, Some(1));
    assert_eq!(
        h.st(build::udp(a(1), a(2), 10, 9, b""), commit(7)),
        NEW | TRK
    );
    assert_eq!(
        h.st(build::udp(a(1), a(2), 11, 9, b""), commit(7)),
        NEW | TRK
    );
    assert_eq!(h.ct.zone_limits(), [(7, 1, 1)]);
    assert_eq!(h.ct.stats().refused_zone_limit, 1);
    assert_eq!(h.ct.nconns(), 3);
    // Flushing the zone frees its count.
    assert_eq!(h.ct.flush(Some(7), None), 1);
    assert_eq!(h.ct.zone_limits(), [(7, 1, 0)]);
}

#[test]
fn default_zone_limit_is_one_pool_for_zones_without_their_own() {
    let mut h = H::new();
    for ct in [&h.ct, &h.twin] {
        ct.set_default_zone_limit(Some(2));
        ct.set_zone_limit(5, Some(10));
    }
    assert_eq!(
        h.st(build::udp(a(1), a(2), 1, 9, b""), commit(1)),
        NEW | TRK
    );
    assert_eq!(
        h.st(build::udp(a(1), a(2), 2, 9, b""), commit(2)),
        NEW | TRK
    );
    assert_eq!(h.ct.default_zone_limit(), Some((2, 2)));
    // Zone 3 shares the default pool, which is full.
    assert_eq!(
        h.st(build::udp(a(1), a(2), 3, 9, b""), commit(3)),
        NEW | TRK
    );
    assert_eq!(h.ct.nconns(), 2);
    // Zone 5 has its own limit.
    assert_eq!(
        h.st(build::udp(a(1), a(2), 4, 9, b""), commit(5)),
        NEW | TRK
    );
    assert_eq!(h.ct.nconns(), 3);
    assert_eq!(h.ct.zone_limits(), [(5, 10, 1)]);
    // A limit set after connections exist does not count them (OVS zone_limit_seq).
    for ct in [&h.ct, &h.twin] {
        ct.set_zone_limit(1, Some(1));
    }
    assert_eq!(
        h.st(build::udp(a(1), a(2), 6, 9, b""), commit(1)),
        NEW | TRK
    );
    assert_eq!(h.ct.zone_limits(), [(1, 1, 1), (5, 10, 1)]);
    assert_eq!(h.ct.nconns(), 4);
    // Removing a zone's connections admitted under the default frees the default pool.
    h.ct.flush(Some(2), None);
    assert_eq!(h.ct.default_zone_limit(), Some((2, 1)));
}

#[test]
fn sweep_is_bounded_and_eventually_complete() {
    let mut h = H::new();
    for p in 1..=100u16 {
        h.st(build::udp(a(1), a(2), p, 9, b""), commit(0));
    }
    h.adv(61_000);
    let mut total = 0;
    for _ in 0..100 {
        let n = h.ct.sweep(h.now, 10);
        assert!(n <= 10);
        total += n;
        if total == 100 {
            break;
        }
    }
    assert_eq!(total, 100);
    assert_eq!(h.ct.nconns(), 0);
    assert_eq!(h.ct.index_slots(), 0);
    assert_eq!(h.ct.stats().expired, 100);
}

#[test]
fn flush_by_tuple_and_zone() {
    let mut h = H::new();
    h.st(build::udp(a(1), a(2), 1, 2, b""), commit(0));
    h.st(build::udp(a(1), a(2), 3, 4, b""), commit(0));
    h.st(build::udp(a(1), a(2), 5, 6, b""), commit(9));
    h.st(build::echo(a(1), a(2), 8, 1, 1), commit(0));
    let t = FlushTuple {
        src: a(1),
        dst: a(2),
        proto: 17,
        sport: 1,
        dport: 2,
        icmp_id: 0,
        icmp_type: 0,
        icmp_code: 0,
    };
    assert_eq!(h.ct.flush(None, Some(&t)), 1);
    assert_eq!(h.ct.flush(None, Some(&t)), 0);
    // Reply tuple of a connection without NAT also names it.
    let r = FlushTuple {
        src: a(2),
        dst: a(1),
        proto: 17,
        sport: 4,
        dport: 3,
        ..t
    };
    assert_eq!(h.ct.flush(Some(0), Some(&r)), 1);
    let i = FlushTuple {
        proto: 1,
        icmp_id: 1,
        icmp_type: 8,
        ..t
    };
    assert_eq!(h.ct.flush(None, Some(&i)), 1);
    assert_eq!(h.ct.flush(Some(0), None), 0);
    assert_eq!(h.ct.flush(None, None), 1);
    assert_eq!(h.ct.nconns(), 0);
}

#[test]
fn syn_flood_fills_at_most_the_limit() {
    let mut h = H::with(Config {
        max_conns: 1000,
        ..Config::default()
    });
    for i in 0..5000u32 {
        let src = IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i));
        let f = build::tcp(
            src,
            a(2),
            1024 + (i % 60000) as u16,
            80,
            i,
            0,
            SYN,
            1024,
            &[],
            b"",
        );
        assert_eq!(h.st(f, commit(0)), NEW | TRK);
    }
    assert_eq!(h.ct.nconns(), 1000);
    assert_eq!(h.ct.index_slots(), 2000);
    let s = h.ct.stats();
    assert_eq!((s.committed, s.refused_global_limit), (1000, 4000));
    // SYN_SENT times out after 30 s and the slots come back.
    h.adv(30_000);
    while h.ct.sweep(h.now, 256) > 0 {}
    while h.ct.nconns() > 0 {
        h.ct.sweep(h.now, 256);
    }
    assert_eq!(h.ct.index_slots(), 0);
    assert!(
        Conntrack::bytes_per_conn() < 512,
        "{}",
        Conntrack::bytes_per_conn()
    );
}

// ---------------------------------------------------------------- malformed

#[test]
fn malformed_packets_are_invalid_with_reasons() {
    let mut h = H::new();
    let good = build::udp(a(1), a(2), 1, 2, b"abc");
    let mut bad_ipcsum = good.clone();
    bad_ipcsum[14 + 10] ^= 1;
    let mut bad_udpcsum = good.clone();
    bad_udpcsum[14 + 20 + 6] ^= 1;
    let mut zero_udpcsum = good.clone();
    zero_udpcsum[14 + 20 + 6] = 0;
    zero_udpcsum[14 + 20 + 7] = 0;
    let mut frag = good.clone();
    frag[14 + 6] = 0x20; // MF
    let c = !wire::checksum::sum(&{
        let mut hd = frag[14..34].to_vec();
        hd[10] = 0;
        hd[11] = 0;
        hd
    });
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    let arp = {
        let mut f = good.clone();
        f[12] = 0x08;
        f[13] = 0x06;
        f
    };
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x44;
    let truncated = good[..14 + 20 + 4].to_vec();
    let mut tcp = build::tcp(a(1), a(2), 1, 2, 0, 0, SYN, 1, &[], b"");
    tcp[14 + 20 + 17] ^= 0x40;
    let port0 = build::udp(a(1), a(2), 0, 2, b"");
    let cases = [
        (bad_ipcsum, InvalidReason::L3Checksum),
        (bad_udpcsum, InvalidReason::L4Checksum),
        (frag, InvalidReason::Fragment),
        (arp, InvalidReason::NotIp),
        (bad_ihl, InvalidReason::L3Header),
        (truncated, InvalidReason::L3Header),
        (tcp, InvalidReason::L4Checksum),
        (port0, InvalidReason::PortZero),
        (vec![0u8; 5], InvalidReason::L2),
    ];
    for (f, why) in cases {
        let before = h.ct.stats().invalid_by_reason;
        let mut f2 = f.clone();
        let md = h.run(&mut f2, commit(0));
        assert_eq!(md.ct_state, INV | TRK, "{why:?}");
        assert_eq!(md.ct_orig, CtOrigTuple::None);
        let after = h.ct.stats().invalid_by_reason;
        let i = InvalidReason::ALL
            .iter()
            .position(|r| *r == why)
            .unwrap_or(0);
        assert_eq!(after[i].1, before[i].1 + 1, "{why:?}");
    }
    // UDP checksum 0 over IPv4 means "none": fine.
    assert_eq!(h.st(zero_udpcsum, commit(0)), NEW | TRK);
    assert_eq!(h.ct.nconns(), 1);
}

#[test]
fn ipv6_fragment_header_is_invalid_and_other_protocols_are_tracked() {
    let mut h = H::new();
    // Fragment header (44) then UDP.
    let udp = build::udp_seg(a6(1), a6(2), 1, 2, b"x");
    let mut l4 = vec![17, 0, 0, 1, 0, 0, 0, 1]; // MF set
    l4.extend_from_slice(&udp);
    let f = build::eth(&build::ip(a6(1), a6(2), 44, &l4));
    assert_eq!(h.st(f, commit(0)), INV | TRK);
    // An atomic fragment (offset 0, no MF) is not a fragment for OVS: tracked, by its
    // UDP ports; so is UDP after a destination-options header.
    let mut l4 = vec![17, 0, 0, 0, 0, 0, 0, 1];
    l4.extend_from_slice(&udp);
    let atomic = build::eth(&build::ip(a6(1), a6(2), 44, &l4));
    assert_eq!(h.st(atomic, commit(0)), NEW | TRK);
    let mut l4 = vec![17, 0, 1, 4, 0, 0, 0, 0];
    l4.extend_from_slice(&udp);
    let opts = build::eth(&build::ip(a6(1), a6(2), 60, &l4));
    assert_eq!(h.st(opts, look(0)), NEW | TRK);
    h.st(build::udp(a6(2), a6(1), 2, 1, b"y"), look(0));
    assert_eq!(h.ct.nconns(), 1);
    // GRE (47): keyed by addresses only.
    let gre = build::eth(&build::ip(a(1), a(2), 47, &[0, 0, 0x08, 0]));
    assert_eq!(h.st(gre.clone(), commit(0)), NEW | TRK);
    assert_eq!(
        h.dump(),
        [
            "47,orig=(src=10.0.0.1,dst=10.0.0.2,sport=0,dport=0),reply=(src=10.0.0.2,dst=10.0.0.1,sport=0,dport=0)",
            "udp,orig=(src=fd00::1,dst=fd00::2,sport=1,dport=2),reply=(src=fd00::2,dst=fd00::1,sport=2,dport=1)"
        ]
    );
    let back = build::eth(&build::ip(a(2), a(1), 47, &[0, 0, 0x08, 0]));
    assert_eq!(h.st(back, look(0)), EST | RPL | TRK);
}

// ---------------------------------------------------------------- NAT

fn snat_to(ip: IpAddr, ports: Option<(u16, u16)>) -> Option<NatAction> {
    Some(NatAction {
        kind: Some(NatKind::Src),
        addrs: Some((ip, ip)),
        ports,
        ..NatAction::default()
    })
}

fn plain_nat() -> Option<NatAction> {
    Some(NatAction::default())
}

/// The frame's IPv4 header and L4 checksums verify (checked by a fresh tracker, which
/// refuses bad checksums as `+inv`).
fn checksums_ok(frame: &[u8]) -> bool {
    let ct = Conntrack::new(Config::default());
    let mut f = frame.to_vec();
    let mut md = PacketMeta::port(1);
    ct.execute(&mut f, &mut md, &CtAction::default(), 0);
    ct.stats().invalid_by_reason.iter().all(|(r, n)| {
        *n == 0 || !matches!(r, InvalidReason::L3Checksum | InvalidReason::L4Checksum)
    })
}

fn ipv4_src_dst(frame: &[u8]) -> (IpAddr, IpAddr) {
    let g = |o: usize| {
        IpAddr::V4(Ipv4Addr::new(
            frame[o],
            frame[o + 1],
            frame[o + 2],
            frame[o + 3],
        ))
    };
    (g(14 + 12), g(14 + 16))
}

fn ports(frame: &[u8], l4: usize) -> (u16, u16) {
    (
        u16::from_be_bytes([frame[l4], frame[l4 + 1]]),
        u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]),
    )
}

#[test]
fn snat_rewrites_and_replies_are_translated_back() {
    let mut h = H::new();
    let pub_ip = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
    let mut f = build::udp(a(1), a(2), 5353, 53, b"q");
    let md = h.run(
        &mut f,
        CtAction {
            nat: snat_to(pub_ip, None),
            ..commit(0)
        },
    );
    assert_eq!(md.ct_state, NEW | SNAT | TRK);
    assert_eq!(ipv4_src_dst(&f), (pub_ip, a(2)));
    assert_eq!(ports(&f, 34), (5353, 53)); // own port first (nat_get_unique_tuple)
    assert!(checksums_ok(&f));
    assert_eq!(
        h.dump(),
        [
            "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=5353,dport=53),reply=(src=10.0.0.2,dst=192.168.0.1,sport=53,dport=5353)"
        ]
    );
    // The reply, addressed to the public address, is un-NATed: +dnat.
    let mut r = build::udp(a(2), pub_ip, 53, 5353, b"r");
    let md = h.run(
        &mut r,
        CtAction {
            nat: plain_nat(),
            ..look(0)
        },
    );
    assert_eq!(md.ct_state, EST | RPL | DNAT | TRK);
    assert_eq!(ipv4_src_dst(&r), (a(2), a(1)));
    assert!(checksums_ok(&r));
    // Without nat() the reply is tracked but not rewritten.
    let mut r2 = build::udp(a(2), pub_ip, 53, 5353, b"r");
    assert_eq!(h.run(&mut r2, look(0)).ct_state, EST | RPL | TRK);
    assert_eq!(ipv4_src_dst(&r2), (a(2), pub_ip));
    // The original direction with plain nat is translated again.
    let mut o = build::udp(a(1), a(2), 5353, 53, b"q");
    assert_eq!(
        h.run(
            &mut o,
            CtAction {
                nat: plain_nat(),
                ..look(0)
            }
        )
        .ct_state,
        EST | SNAT | TRK
    );
    assert_eq!(ipv4_src_dst(&o).0, pub_ip);
    // A second client with the same source port gets the next port.
    let mut f2 = build::udp(a(3), a(2), 5353, 53, b"q");
    let md = h.run(
        &mut f2,
        CtAction {
            nat: snat_to(pub_ip, None),
            ..commit(0)
        },
    );
    assert_eq!(md.ct_state, NEW | SNAT | TRK);
    assert_eq!(ports(&f2, 34), (5354, 53));
    assert!(checksums_ok(&f2));
}

#[test]
fn dnat_with_port_and_tcp_tracking_through_it() {
    let mut h = H::new();
    let vip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100));
    let dnat = Some(NatAction {
        kind: Some(NatKind::Dst),
        addrs: Some((a(2), a(2))),
        ports: Some((8080, 8080)),
        ..NatAction::default()
    });
    let mut syn = build::tcp(a(1), vip, 33000, 80, 1000, 0, SYN, 65535, &[], b"");
    let md = h.run(
        &mut syn,
        CtAction {
            nat: dnat,
            ..commit(0)
        },
    );
    assert_eq!(md.ct_state, NEW | DNAT | TRK);
    assert_eq!(ipv4_src_dst(&syn), (a(1), a(2)));
    assert_eq!(ports(&syn, 34), (33000, 8080));
    assert!(checksums_ok(&syn));
    let mut sa = build::tcp(
        a(2),
        a(1),
        8080,
        33000,
        5000,
        1001,
        SYN | ACK,
        65535,
        &[],
        b"",
    );
    let md = h.run(
        &mut sa,
        CtAction {
            nat: plain_nat(),
            ..look(0)
        },
    );
    assert_eq!(md.ct_state, EST | RPL | SNAT | TRK);
    assert_eq!(ipv4_src_dst(&sa), (vip, a(1)));
    assert_eq!(ports(&sa, 34), (80, 33000));
    assert!(checksums_ok(&sa));
    assert_eq!(
        h.dump(),
        [
            "tcp,orig=(src=10.0.0.1,dst=10.0.0.100,sport=33000,dport=80),reply=(src=10.0.0.2,dst=10.0.0.1,sport=8080,dport=33000),protoinfo=(state=ESTABLISHED)"
        ]
    );
}

#[test]
fn nat_exhaustion_refuses_the_commit() {
    let mut h = H::new();
    let pub_ip = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
    let nat = snat_to(pub_ip, Some((5000, 5000)));
    let mut f = build::udp(a(1), a(2), 7000, 53, b"q");
    assert_eq!(
        h.run(&mut f, CtAction { nat, ..commit(0) }).ct_state,
        NEW | SNAT | TRK
    );
    assert_eq!(ports(&f, 34).0, 5000);
    let orig = build::udp(a(3), a(2), 7000, 53, b"q");
    let mut f2 = orig.clone();
    assert_eq!(
        h.run(&mut f2, CtAction { nat, ..commit(0) }).ct_state,
        NEW | TRK
    );
    assert_eq!(f2, orig, "not rewritten");
    assert_eq!(h.ct.nconns(), 1);
    assert_eq!(h.ct.stats().nat_exhausted, 1);
}

#[test]
fn icmp_error_for_snat_connection_is_translated_inside_and_out() {
    let mut h = H::new();
    let pub_ip = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
    let mut f = build::udp(a(1), a(2), 5353, 53, b"q");
    h.run(
        &mut f,
        CtAction {
            nat: snat_to(pub_ip, None),
            ..commit(0)
        },
    );
    // The server answers port unreachable to the public address, quoting what it got.
    let mut err = build::icmp(a(2), pub_ip, 3, 3, [0; 4], build::strip_eth(&f));
    let md = h.run(
        &mut err,
        CtAction {
            nat: plain_nat(),
            ..look(0)
        },
    );
    assert_eq!(md.ct_state, REL | RPL | DNAT | TRK);
    assert_eq!(ipv4_src_dst(&err), (a(2), a(1)));
    // Inner header: source back to the private address and port.
    let inner = 14 + 20 + 8;
    assert_eq!(&err[inner + 12..inner + 16], &[10, 0, 0, 1]);
    assert_eq!(ports(&err, inner + 20), (5353, 53));
    assert!(
        wire::checksum::verify(&err[inner..inner + 20]),
        "inner IP checksum"
    );
    assert!(checksums_ok(&err));
}

#[test]
fn ipv6_snat() {
    let mut h = H::new();
    let pub6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 1));
    let mut f = build::udp(a6(1), a6(2), 1000, 2000, b"q");
    assert_eq!(
        h.run(
            &mut f,
            CtAction {
                nat: snat_to(pub6, None),
                ..commit(0)
            }
        )
        .ct_state,
        NEW | SNAT | TRK
    );
    assert_eq!(
        &f[14 + 8..14 + 24],
        &Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 1).octets()
    );
    assert!(checksums_ok(&f));
    let mut r = build::udp(a6(2), pub6, 2000, 1000, b"r");
    assert_eq!(
        h.run(
            &mut r,
            CtAction {
                nat: plain_nat(),
                ..look(0)
            }
        )
        .ct_state,
        EST | RPL | DNAT | TRK
    );
    assert_eq!(
        &r[14 + 24..14 + 40],
        &Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).octets()
    );
    assert!(checksums_ok(&r));
}

#[test]
fn plain_nat_on_a_new_commit_stores_ovs_31s_reply_key() {
    // OVS 3.1 runs nat_get_unique_tuple with no action bits: reply key source 0.0.0.0,
    // destination port 0, packet untouched (see the nat module doc).
    let mut h = H::new();
    let orig = build::udp(a(1), a(2), 5353, 53, b"q");
    let mut f = orig.clone();
    assert_eq!(
        h.run(
            &mut f,
            CtAction {
                nat: plain_nat(),
                ..commit(0)
            }
        )
        .ct_state,
        NEW | TRK
    );
    assert_eq!(f, orig);
    assert_eq!(
        h.dump(),
        [
            "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=5353,dport=53),reply=(src=0.0.0.0,dst=10.0.0.1,sport=53,dport=0)"
        ]
    );
    assert_eq!(
        h.st(build::udp(a(2), a(1), 53, 5353, b"r"), look(0)),
        NEW | TRK
    );
}

#[test]
fn icmpv6_error_about_known_tcp_connection_is_related() {
    let mut h = H::new();
    let mut t = tcp_flow(a6(1), a6(2));
    handshake(&mut h, &mut t);
    // Packet too big from the server's side, quoting a client segment (inner TCP needs
    // 20 bytes over IPv6).
    let quoted = build::strip_eth(&t.c2s(ACK, b"big")).to_vec();
    let err = build::icmp(a6(2), a6(1), 2, 0, [0, 0, 5, 0], &quoted);
    assert_eq!(h.st(err, look(0)), REL | RPL | TRK);
    // Quoting only 8 bytes of TCP: not enough over IPv6.
    let short = build::icmp(a6(2), a6(1), 2, 0, [0, 0, 5, 0], &quoted[..48]);
    assert_eq!(h.st(short, look(0)), INV | TRK);
}

#[test]
fn reply_key_held_by_a_live_nat_connection_is_not_stolen() {
    let mut h = H::new();
    let pub_ip = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
    // X: 10.0.0.2:1 -> 10.0.0.1:2, SNATed to 192.168.0.1; its reply key is
    // 10.0.0.1:2 -> 192.168.0.1:1.
    let mut x = build::udp(a(2), a(1), 1, 2, b"");
    h.run(
        &mut x,
        CtAction {
            nat: snat_to(pub_ip, None),
            ..commit(0)
        },
    );
    // Y: 10.0.0.1:2 -> 10.0.0.2:1, not found (X's keys differ), committed; its reply key
    // is X's original key, which X keeps.
    assert_eq!(
        h.st(build::udp(a(1), a(2), 2, 1, b""), commit(0)),
        NEW | TRK
    );
    assert_eq!(h.ct.nconns(), 2);
    assert_eq!(h.ct.index_slots(), 3);
    // X's original direction still finds X.
    assert_eq!(h.st(build::udp(a(2), a(1), 1, 2, b""), look(0)), NEW | TRK);
    assert_eq!(h.ct.dump(None).len(), 2);
    // Y's original direction finds Y.
    assert_eq!(h.st(build::udp(a(1), a(2), 2, 1, b""), look(0)), NEW | TRK);
    h.adv(120_000);
    while h.ct.nconns() > 0 {
        h.ct.sweep(h.now, 10);
    }
    assert_eq!(h.ct.index_slots(), 0);
}

#[test]
fn a_packet_natted_in_this_zone_is_found_by_its_reversed_key() {
    let mut h = H::new();
    let pub_ip = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
    let mut f = build::udp(a(1), a(2), 5353, 53, b"q");
    let md = h.run(
        &mut f,
        CtAction {
            nat: snat_to(pub_ip, None),
            ..commit(4)
        },
    );
    assert_eq!(md.ct_state, NEW | SNAT | TRK);
    let natted = f.clone();
    // Recirculated through ct(zone=4,nat) again: OVS's initial_conn_lookup reverses the
    // key of an already translated packet; the translation is not applied twice.
    let md2 = h.run_md(
        &mut f,
        CtAction {
            nat: plain_nat(),
            ..look(4)
        },
        md,
    );
    assert_eq!(md2.ct_state, NEW | SNAT | TRK);
    assert_eq!(f, natted);
    assert!(matches!(
        md2.ct_orig,
        CtOrigTuple::V4 {
            src: 0x0a00_0001,
            tp_src: 5353,
            ..
        }
    ));
    // In another zone the ct_state is reset and the translated packet is a new one there.
    let md3 = h.run_md(&mut f, look(5), md2);
    assert_eq!(md3.ct_state, NEW | TRK);
}
