//! Fuzz and property driver: sequences of (packet, time step, zone, action, control op)
//! run through two trackers — one by [`Conntrack::execute`], one by
//! [`Conntrack::execute_cached`] with a tiny (8-slot) cache — that must agree after every step
//! (invariant 6), and neither may panic (invariant 5).
//!
//! [`fuzz_sequence`] decodes arbitrary bytes into such a sequence (a `cargo fuzz` target is
//! one line around it); [`run_sequence`] returns the first disagreement instead of panicking,
//! for property tests. Packets are mostly *structured* — a few TCP/UDP/ICMP flows between
//! fixed hosts over IPv4 and IPv6, both directions, sequence numbers near what the flow has
//! sent so far (so segments land in, near and out of the window), every flag combination,
//! retransmits, RSTs, FINs, ICMP errors quoting a flow — so the sequence reaches deep
//! states; raw byte packets are mixed in. Both trackers are built with the same hash seed so
//! their tables sweep identically (limits depend on when expired entries are swept).

use crate::build;
use crate::{Config, Conntrack, CtAction, FastCache, NatAction, NatKind};
use flow::extract::PacketMeta;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

struct Flow {
    v6: bool,
    proto: u8,
    sport: u16,
    dport: u16,
    /// Next sequence number per direction (TCP).
    next: [u32; 2],
}

fn hosts(v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        )
    }
}

struct Reader<'a> {
    d: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn u8(&mut self) -> Option<u8> {
        let b = *self.d.get(self.i)?;
        self.i += 1;
        Some(b)
    }
}

/// The two trackers and the sequence's state.
struct Twin {
    a: Conntrack,
    b: Conntrack,
    cache: FastCache,
    now: u64,
    zone: u16,
    flows: Vec<Flow>,
    /// Highest global limit set so far (nconns may never exceed it).
    max_limit: u32,
}

/// TCP flags drawn from: mostly valid combinations, some invalid ones.
const FLAGS: [u16; 16] = [
    0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14, 0x10, 0x18, 0x10, 0x12, 0x19, 0x01, 0x00, 0x03, 0x29,
];

impl Twin {
    fn new() -> Twin {
        let cfg = Config {
            max_conns: 12,
            ..Config::default()
        };
        Twin {
            a: Conntrack::with_seed(cfg, 42),
            b: Conntrack::with_seed(cfg, 42),
            cache: FastCache::fixed(8),
            now: 1_000,
            zone: 0,
            max_limit: 12,
            flows: vec![
                Flow {
                    v6: false,
                    proto: 6,
                    sport: 40000,
                    dport: 80,
                    next: [1000, 900_000],
                },
                Flow {
                    v6: false,
                    proto: 17,
                    sport: 5353,
                    dport: 53,
                    next: [0, 0],
                },
                Flow {
                    v6: false,
                    proto: 1,
                    sport: 77,
                    dport: 77,
                    next: [0, 0],
                },
                Flow {
                    v6: true,
                    proto: 6,
                    sport: 40001,
                    dport: 443,
                    next: [0xffff_ff00, 5],
                },
                Flow {
                    v6: true,
                    proto: 17,
                    sport: 1000,
                    dport: 2000,
                    next: [0, 0],
                },
                Flow {
                    v6: true,
                    proto: 58,
                    sport: 9,
                    dport: 9,
                    next: [0, 0],
                },
                Flow {
                    v6: false,
                    proto: 6,
                    sport: 40002,
                    dport: 22,
                    next: [7, 7],
                },
            ],
        }
    }

    fn packet(&mut self, r: &mut Reader<'_>) -> Option<(Vec<u8>, CtAction, bool)> {
        let sel = r.u8()?;
        let fl = r.u8()?;
        let ctl = r.u8()?;
        let fi = usize::from(sel) % self.flows.len();
        let reply = sel & 0x80 != 0;
        let f = &mut self.flows[fi];
        let (mut s, mut d) = hosts(f.v6);
        let (mut sp, mut dp) = (f.sport, f.dport);
        if reply {
            std::mem::swap(&mut s, &mut d);
            std::mem::swap(&mut sp, &mut dp);
        }
        let dir = usize::from(reply);
        let frame = match f.proto {
            6 => {
                let flags = FLAGS[usize::from(fl & 0x0f)];
                let delta = match fl >> 4 {
                    0..=9 => 0i64,
                    10 => -1,
                    11 => 1,
                    12 => -70_000,
                    13 => 70_000,
                    14 => -3000,
                    _ => 2_000_000_000,
                };
                let seq = (i64::from(f.next[dir]) + delta) as u32;
                let ack = f.next[1 - dir];
                let plen = if ctl & 0x40 != 0 { 100 } else { 0 };
                let opts: &[u8] = if flags & 0x02 != 0 && ctl & 0x20 != 0 {
                    &[1, 3, 3, 7]
                } else {
                    &[]
                };
                let payload = vec![0xabu8; plen];
                let fr = build::tcp(s, d, sp, dp, seq, ack, flags, 65535, opts, &payload);
                if delta == 0 {
                    let mut adv = plen as u32;
                    if flags & 0x03 != 0 {
                        adv += 1;
                    }
                    f.next[dir] = f.next[dir].wrapping_add(adv);
                }
                fr
            }
            17 => build::udp(s, d, sp, dp, b"data"),
            _ => {
                if fl & 0x07 == 0 {
                    // An ICMP error quoting the TCP flow 0 (or 3 over v6), sent back to
                    // its source by the destination.
                    let (tcpf, other) = if f.v6 { (3, 4) } else { (0, 1) };
                    let q = &self.flows[if fl & 0x08 != 0 { tcpf } else { other }];
                    let (qs, qd) = hosts(q.v6);
                    let inner = if q.proto == 6 {
                        build::ip(
                            qs,
                            qd,
                            6,
                            &build::tcp_seg(qs, qd, q.sport, q.dport, 1, 0, 0x10, 10, &[], &[]),
                        )
                    } else {
                        build::ip(qs, qd, 17, &build::udp_seg(qs, qd, q.sport, q.dport, b"x"))
                    };
                    let ty = if q.v6 { 1 } else { 3 };
                    build::icmp(qd, qs, ty, 3, [0; 4], &inner)
                } else {
                    let ty = match (f.v6, reply) {
                        (false, false) => 8,
                        (false, true) => 0,
                        (true, false) => 128,
                        (true, true) => 129,
                    };
                    build::echo(s, d, ty, f.sport, u16::from(fl))
                }
            }
        };
        let nat = match ctl & 0x0c {
            0x04 => Some(NatAction {
                kind: Some(NatKind::Src),
                addrs: Some(if self.flows[fi].v6 {
                    let a = IpAddr::V6(Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 1));
                    (a, a)
                } else {
                    let a = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
                    (a, IpAddr::V4(Ipv4Addr::new(192, 168, 0, 2)))
                }),
                ports: (ctl & 0x10 != 0).then_some((1024, 1027)),
                ..NatAction::default()
            }),
            0x08 => Some(NatAction::default()),
            0x0c => Some(NatAction {
                kind: Some(NatKind::Dst),
                addrs: None,
                ports: (ctl & 0x10 != 0).then_some((8080, 8081)),
                ..NatAction::default()
            }),
            _ => None,
        };
        let act = CtAction {
            zone: self.zone,
            commit: ctl & 0x01 != 0,
            force: ctl & 0x83 == 0x83,
            mark: (ctl & 0x02 != 0).then_some((u32::from(fl), 0xff)),
            label: (ctl & 0x80 != 0 && ctl & 0x01 == 0)
                .then_some((u128::from(sel) << 64, u128::MAX)),
            nat,
        };
        Some((frame, act, ctl & 0x20 != 0 && f_is_udp(fi)))
    }

    fn run_packet(&mut self, mut frame: Vec<u8>, act: CtAction, twice: bool) -> Result<(), String> {
        let mut fb = frame.clone();
        let mut ma = PacketMeta::port(1);
        let mut mb = PacketMeta::port(1);
        let passes = if twice { 2 } else { 1 };
        for pass in 0..passes {
            let act = if pass == 1 {
                CtAction {
                    commit: false,
                    nat: Some(NatAction::default()),
                    ..act
                }
            } else {
                act
            };
            self.a.execute(&mut frame, &mut ma, &act, self.now);
            self.b
                .execute_cached(&mut self.cache, &mut fb, &mut mb, &act, self.now);
            if ma != mb {
                return Err(format!(
                    "metadata differ: full {ma:?} cached {mb:?} for {act:?}"
                ));
            }
            if frame != fb {
                return Err("frames differ after ct".to_string());
            }
        }
        Ok(())
    }

    fn step(&mut self, r: &mut Reader<'_>) -> Option<Result<(), String>> {
        let op = r.u8()?;
        match op % 32 {
            0..=19 => {
                let (frame, act, twice) = self.packet(r)?;
                return Some(self.run_packet(frame, act, twice));
            }
            20 | 21 => {
                let n = usize::from(r.u8()? % 96);
                let mut raw = Vec::with_capacity(n);
                for _ in 0..n {
                    raw.push(r.u8()?);
                }
                if op & 0x20 != 0 && raw.len() > 14 {
                    raw[12] = 0x08;
                    raw[13] = 0x00;
                }
                let act = CtAction {
                    zone: self.zone,
                    commit: true,
                    ..CtAction::default()
                };
                return Some(self.run_packet(raw, act, false));
            }
            22 | 23 => {
                const STEPS: [u64; 8] = [0, 1, 100, 1_000, 10_000, 31_000, 61_000, 90_000_000];
                self.now += STEPS[usize::from(r.u8()? % 8)];
            }
            24 => {
                let budget = usize::from(r.u8()? % 16);
                let x = self.a.sweep(self.now, budget);
                let y = self.b.sweep(self.now, budget);
                if x != y {
                    return Some(Err(format!("sweep removed {x} vs {y}")));
                }
            }
            25 => {
                let z = r.u8()?;
                if z & 0xe0 != 0 {
                    // Flushes are rare: most 25s are no-ops, so connections live long.
                    return Some(Ok(()));
                }
                let zone = (z & 1 == 0).then_some(u16::from(z >> 1 & 1));
                let x = self.a.flush(zone, None);
                let y = self.b.flush(zone, None);
                if x != y {
                    return Some(Err(format!("flush removed {x} vs {y}")));
                }
            }
            26 => {
                let n = u32::from(r.u8()? % 8) * 3;
                self.a.set_maxconns(n);
                self.b.set_maxconns(n);
                self.max_limit = self.max_limit.max(n);
            }
            27 => {
                let v = r.u8()?;
                let lim = (v & 0x80 == 0).then_some(u32::from(v % 8));
                let zone = u16::from(v >> 4 & 1);
                if v & 0x40 != 0 {
                    self.a.set_default_zone_limit(lim);
                    self.b.set_default_zone_limit(lim);
                } else {
                    self.a.set_zone_limit(zone, lim);
                    self.b.set_zone_limit(zone, lim);
                }
            }
            28 => {
                let v = r.u8()? & 1 == 1;
                self.a.set_tcp_liberal(v);
                self.b.set_tcp_liberal(v);
            }
            29 => self.zone = u16::from(r.u8()? % 3),
            _ => {
                let (frame, act, twice) = self.packet(r)?;
                return Some(self.run_packet(frame, act, twice));
            }
        }
        Some(Ok(()))
    }

    fn compare(&self) -> Result<(), String> {
        let (da, db) = (self.a.dump(None), self.b.dump(None));
        if da != db {
            return Err(format!("dumps differ:\n{da:?}\n{db:?}"));
        }
        if self.a.nconns() != self.b.nconns() {
            return Err("nconns differ".into());
        }
        if self.a.zone_limits() != self.b.zone_limits()
            || self.a.default_zone_limit() != self.b.default_zone_limit()
        {
            return Err("zone limits differ".into());
        }
        if self.a.stats() != self.b.stats() {
            return Err(format!(
                "stats differ {:?} {:?}",
                self.a.stats(),
                self.b.stats()
            ));
        }
        if self.a.nconns() > self.max_limit {
            return Err("more connections than the limit allowed".into());
        }
        Ok(())
    }
}

fn f_is_udp(fi: usize) -> bool {
    fi == 1 || fi == 4
}

/// Runs the sequence encoded by `data` through both trackers; the first disagreement.
pub fn run_sequence(data: &[u8]) -> Result<(), String> {
    run_sequence_stats(data).map(|_| ())
}

/// [`run_sequence`], returning the full-path tracker's counters and the fast path's
/// (hits, misses) — to check that sequences reach the states they are meant to.
pub fn run_sequence_stats(data: &[u8]) -> Result<(crate::CtStats, (u64, u64)), String> {
    let mut t = Twin::new();
    let mut r = Reader { d: data, i: 0 };
    let mut n = 0;
    while let Some(res) = t.step(&mut r) {
        res.map_err(|e| format!("step {n}: {e}"))?;
        t.compare().map_err(|e| format!("step {n}: {e}"))?;
        n += 1;
    }
    Ok((t.a.stats(), t.cache.hit_stats()))
}

/// The fuzz target: panics (with the disagreement) when the fast path and the full path
/// disagree; any other panic is a bug found too.
pub fn fuzz_sequence(data: &[u8]) {
    if let Err(e) = run_sequence(data) {
        panic!("fast path and full path disagree: {e}");
    }
}
