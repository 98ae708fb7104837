//! Conjunctive flow tables (`conjunction(id,k/n)` + `conj_id=id`) and packets for them, in the
//! shapes ovn-controller installs for ACLs: an address set on the source, one on the
//! destination and a port set, each a clause of one conjunction per ACL; several ACLs (ids) at
//! one priority, ACLs at overlapping priorities, address sets shared between ACLs (one rule
//! carrying several `conjunction` actions), hard rules that beat or lose to a conjunction, and
//! `conj_id` rules that match more than the id. Written as `ovs-ofctl add-flow` lines so the
//! same table goes to OVS and to flowswitch.
//!
//! Hard rules always match `in_port` and soft rules never do, so no soft rule has exactly the
//! match of a hard rule (the one corner where flowswitch's re-lookup deliberately differs from
//! OVS's, see `ofproto::conj`).

use std::collections::BTreeMap;

use crate::TestRng;
use crate::packets::{tcp4, udp4};

/// A packet for a conjunctive table: IPv4 TCP or UDP on a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConjPacket {
    /// OpenFlow input port (1..=4).
    pub in_port: u32,
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// 6 (TCP) or 17 (UDP).
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

impl ConjPacket {
    /// The frame.
    pub fn bytes(&self) -> Vec<u8> {
        if self.proto == 6 {
            tcp4(self.src, self.dst, self.sport, self.dport, 0x02, 0)
        } else {
            udp4(self.src, self.dst, self.sport, self.dport, 8)
        }
    }

    /// The packet in `ofproto/trace` flow syntax.
    pub fn flow_text(&self) -> String {
        let ip = |a: [u8; 4]| format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
        format!(
            "in_port={},{},nw_src={},nw_dst={},tp_src={},tp_dst={}",
            self.in_port,
            if self.proto == 6 { "tcp" } else { "udp" },
            ip(self.src),
            ip(self.dst),
            self.sport,
            self.dport
        )
    }
}

/// A table and packets to send through it.
#[derive(Debug, Clone)]
pub struct ConjCase {
    /// Name (hand-written cases) or seed.
    pub name: String,
    /// `add-flow` lines, table 0 and 1.
    pub flows: Vec<String>,
    /// Packets.
    pub packets: Vec<ConjPacket>,
}

fn ip(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// Collects rules keyed by (table, priority, match) so that rules with the same match and
/// priority merge their `conjunction` actions, as ovn-controller merges them.
#[derive(Default)]
struct Flows {
    soft: BTreeMap<(u8, u16, String), Vec<String>>,
    hard: BTreeMap<(u8, u16, String), String>,
}

impl Flows {
    fn soft(&mut self, table: u8, prio: u16, m: String, id: u32, k: u8, n: u8) {
        let acts = self.soft.entry((table, prio, m)).or_default();
        let a = format!("conjunction({id},{k}/{n})");
        if !acts.contains(&a) {
            acts.push(a);
        }
    }
    fn hard(&mut self, table: u8, prio: u16, m: String, actions: String) {
        self.hard.entry((table, prio, m)).or_insert(actions);
    }
    fn lines(self) -> Vec<String> {
        let mut out = Vec::new();
        for ((t, p, m), a) in self.soft {
            out.push(format!(
                "table={t},priority={p},{m},actions={}",
                a.join(",")
            ));
        }
        for ((t, p, m), a) in self.hard {
            let m = if m.is_empty() {
                String::new()
            } else {
                format!("{m},")
            };
            out.push(format!("table={t},priority={p},{m}actions={a}"));
        }
        out
    }
}

const SRC_POOL: [[u8; 4]; 6] = [
    [10, 0, 0, 0],
    [10, 0, 1, 0],
    [10, 1, 0, 0],
    [10, 1, 2, 0],
    [192, 168, 0, 0],
    [192, 168, 7, 0],
];
const DST_POOL: [[u8; 4]; 5] = [
    [20, 0, 0, 0],
    [20, 0, 5, 0],
    [20, 1, 0, 0],
    [172, 16, 0, 0],
    [172, 16, 9, 0],
];
const PORT_POOL: [u16; 6] = [22, 80, 443, 8080, 53, 5000];

fn prefix(rng: &mut TestRng, pool: &[[u8; 4]]) -> ([u8; 4], u8) {
    let a = pool[rng.index(pool.len())];
    let len = [8u8, 16, 24, 32][rng.index(4)];
    let mut a = a;
    if len == 32 {
        a[3] = 1 + rng.below(3) as u8;
    }
    let m = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    ((u32::from_be_bytes(a) & m).to_be_bytes(), len)
}

fn action(rng: &mut TestRng) -> String {
    match rng.below(5) {
        0 => "drop".into(),
        1 => format!("output:{}", 1 + rng.below(4)),
        2 => format!(
            "mod_nw_tos:{},output:{}",
            4 * rng.below(8),
            1 + rng.below(4)
        ),
        3 => "resubmit(,1)".into(),
        _ => format!("load:{}->NXM_NX_REG0[],resubmit(,1)", 1 + rng.below(3)),
    }
}

/// A random conjunctive table: `n_acls` ACLs, each a conjunction of 2 or 3 clauses (source
/// addresses, destination addresses, destination ports; each clause 1–3 values) at one of
/// three priorities, ids sometimes shared between two ACLs' `conj_id` rules at different
/// priorities; hard rules on `in_port` at priorities among them; table 1 forwards on `reg0`.
pub fn random_conj_case(seed: u64, n_acls: usize, n_packets: usize) -> ConjCase {
    let mut rng = TestRng::new(seed);
    let mut f = Flows::default();
    let prios = [100u16, 200, 300];
    let mut srcs: Vec<([u8; 4], u8)> = Vec::new();
    let mut dsts: Vec<([u8; 4], u8)> = Vec::new();
    for acl in 0..n_acls {
        let id = 1 + acl as u32;
        let p = prios[rng.index(3)];
        let proto = if rng.chance(1, 2) { "tcp" } else { "udp" };
        let three = rng.chance(2, 3);
        let n = if three { 3 } else { 2 };
        for _ in 0..1 + rng.below(3) {
            let s = if !srcs.is_empty() && rng.chance(1, 3) {
                srcs[rng.index(srcs.len())]
            } else {
                prefix(&mut rng, &SRC_POOL)
            };
            srcs.push(s);
            f.soft(
                0,
                p,
                format!("{proto},nw_src={}/{}", ip(s.0), s.1),
                id,
                1,
                n,
            );
        }
        for _ in 0..1 + rng.below(3) {
            let d = if !dsts.is_empty() && rng.chance(1, 3) {
                dsts[rng.index(dsts.len())]
            } else {
                prefix(&mut rng, &DST_POOL)
            };
            dsts.push(d);
            f.soft(
                0,
                p,
                format!("{proto},nw_dst={}/{}", ip(d.0), d.1),
                id,
                2,
                n,
            );
        }
        if three {
            for _ in 0..1 + rng.below(3) {
                let port = PORT_POOL[rng.index(PORT_POOL.len())];
                let m = if rng.chance(1, 4) {
                    format!("{proto},tp_dst=0x{:x}/0xfff0", port & 0xfff0)
                } else {
                    format!("{proto},tp_dst={port}")
                };
                f.soft(0, p, m, id, 3, n);
            }
        }
        // The conj_id rule, sometimes with a lower or higher priority than the clauses and
        // sometimes matching more than the id; sometimes missing (a dangling conjunction).
        if !rng.chance(1, 10) {
            let cp = if rng.chance(1, 4) {
                prios[rng.index(3)]
            } else {
                p
            };
            let extra = if rng.chance(1, 3) { ",ip" } else { "" };
            f.hard(0, cp, format!("conj_id={id}{extra}"), action(&mut rng));
        }
    }
    for _ in 0..rng.below(4) {
        let s = prefix(&mut rng, &SRC_POOL);
        let p = [50u16, 150, 250, 350][rng.index(4)];
        f.hard(
            0,
            p,
            format!("in_port={},ip,nw_src={}/{}", 1 + rng.below(4), ip(s.0), s.1),
            action(&mut rng),
        );
    }
    if rng.chance(1, 2) {
        f.hard(0, 1, String::new(), "output:4".into());
    }
    for r in 1..=3u32 {
        f.hard(1, 10, format!("reg0={r}"), format!("output:{r}"));
    }
    f.hard(1, 0, String::new(), "drop".into());
    let packets = (0..n_packets).map(|_| random_packet(&mut rng)).collect();
    ConjCase {
        name: format!("seed {seed}"),
        flows: f.lines(),
        packets,
    }
}

/// A packet whose addresses and ports come from the generator's pools (host bits random).
pub fn random_packet(rng: &mut TestRng) -> ConjPacket {
    let mut src = SRC_POOL[rng.index(SRC_POOL.len())];
    src[3] = rng.below(4) as u8;
    if rng.chance(1, 4) {
        src[2] = rng.below(3) as u8;
    }
    let mut dst = DST_POOL[rng.index(DST_POOL.len())];
    dst[3] = rng.below(4) as u8;
    if rng.chance(1, 4) {
        dst[2] = rng.below(6) as u8;
    }
    let dport = if rng.chance(4, 5) {
        PORT_POOL[rng.index(PORT_POOL.len())] + u16::from(rng.chance(1, 5)) * rng.below(16) as u16
    } else {
        rng.range(1, 65535) as u16
    };
    ConjPacket {
        in_port: 1 + rng.below(4) as u32,
        src,
        dst,
        proto: if rng.chance(1, 2) { 6 } else { 17 },
        sport: rng.range(1024, 65535) as u16,
        dport,
    }
}

/// The hand-written shapes ovn-controller installs for ACLs, with packets that reach each
/// branch.
pub fn ovn_acl_cases() -> Vec<ConjCase> {
    let pk = |in_port, src: [u8; 4], dst: [u8; 4], proto, dport| ConjPacket {
        in_port,
        src,
        dst,
        proto,
        sport: 40000,
        dport,
    };
    let a = [10, 0, 0, 1];
    let b = [10, 0, 0, 2];
    let c = [10, 0, 0, 3];
    let x = [20, 0, 0, 1];
    let y = [20, 0, 0, 2];
    let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        ConjCase {
            name: "address set x port set (one ACL)".into(),
            flows: lines(&[
                "priority=2000,ip,nw_src=10.0.0.1,actions=conjunction(7,1/2)",
                "priority=2000,ip,nw_src=10.0.0.2,actions=conjunction(7,1/2)",
                "priority=2000,tcp,tp_dst=80,actions=conjunction(7,2/2)",
                "priority=2000,tcp,tp_dst=443,actions=conjunction(7,2/2)",
                "priority=2000,conj_id=7,tcp,actions=output:2",
                "priority=0,actions=output:4",
            ]),
            packets: vec![
                pk(1, a, x, 6, 80),
                pk(1, b, x, 6, 443),
                pk(1, c, x, 6, 80),
                pk(1, a, x, 6, 22),
                pk(1, a, x, 17, 80),
            ],
        },
        ConjCase {
            name: "several ids at one priority, shared address set".into(),
            flows: lines(&[
                "priority=1000,ip,nw_src=10.0.0.1,actions=conjunction(1,1/2),conjunction(2,1/3)",
                "priority=1000,ip,nw_src=10.0.0.2,actions=conjunction(1,1/2)",
                "priority=1000,ip,nw_dst=20.0.0.1,actions=conjunction(1,2/2),conjunction(2,2/3)",
                "priority=1000,tcp,tp_dst=22,actions=conjunction(2,3/3)",
                "priority=1000,conj_id=1,ip,actions=output:1",
                "priority=1000,conj_id=2,ip,actions=output:2",
                "priority=0,actions=drop",
            ]),
            packets: vec![
                pk(3, a, x, 6, 22),
                pk(3, a, x, 6, 23),
                pk(3, b, x, 6, 22),
                pk(3, b, y, 6, 22),
                pk(3, c, x, 6, 22),
            ],
        },
        ConjCase {
            name: "overlapping priorities: a higher conjunction fails, a lower one holds".into(),
            flows: lines(&[
                "priority=300,ip,nw_src=10.0.0.0/24,actions=conjunction(3,1/2)",
                "priority=300,udp,tp_dst=53,actions=conjunction(3,2/2)",
                "priority=200,ip,nw_dst=20.0.0.0/24,actions=conjunction(4,1/2)",
                "priority=200,ip,nw_src=10.0.0.0/30,actions=conjunction(4,2/2)",
                "priority=300,conj_id=3,actions=output:3",
                "priority=200,conj_id=4,actions=output:2",
                "priority=100,ip,actions=output:1",
            ]),
            packets: vec![
                pk(4, a, x, 17, 53),
                pk(4, a, x, 17, 54),
                pk(4, [10, 0, 0, 9], x, 17, 54),
                pk(4, [10, 0, 1, 9], x, 17, 53),
            ],
        },
        ConjCase {
            name: "a hard match beats a conjunction, and loses to one".into(),
            flows: lines(&[
                "priority=500,in_port=1,ip,nw_src=10.0.0.1,actions=drop",
                "priority=400,ip,nw_src=10.0.0.0/24,actions=conjunction(9,1/2)",
                "priority=400,tcp,tp_dst=80,actions=conjunction(9,2/2)",
                "priority=400,conj_id=9,actions=output:2",
                "priority=300,in_port=2,ip,actions=output:3",
                "priority=0,actions=output:4",
            ]),
            packets: vec![
                pk(1, a, x, 6, 80),
                pk(2, a, x, 6, 80),
                pk(2, a, x, 6, 81),
                pk(3, b, x, 6, 80),
            ],
        },
        ConjCase {
            name: "conj_id rule with a lower priority than the hard match, and a dangling id"
                .into(),
            flows: lines(&[
                "priority=400,ip,nw_src=10.0.0.1,actions=conjunction(5,1/2)",
                "priority=400,ip,nw_dst=20.0.0.1,actions=conjunction(5,2/2)",
                "priority=400,ip,nw_src=10.0.0.2,actions=conjunction(6,1/2)",
                "priority=400,ip,nw_dst=20.0.0.2,actions=conjunction(6,2/2)",
                "priority=100,conj_id=5,actions=output:2",
                "priority=200,in_port=1,ip,actions=output:3",
                "priority=50,actions=output:1",
            ]),
            packets: vec![
                pk(1, a, x, 6, 80),
                pk(2, a, x, 6, 80),
                pk(2, b, y, 6, 80),
                pk(1, b, y, 6, 80),
            ],
        },
        ConjCase {
            name: "ACL into a second table through reg0".into(),
            flows: lines(&[
                "table=0,priority=100,ip,nw_src=10.0.0.0/31,actions=conjunction(11,1/3)",
                "table=0,priority=100,ip,nw_dst=20.0.0.0/30,actions=conjunction(11,2/3)",
                "table=0,priority=100,tcp,tp_dst=0x50/0xfff0,actions=conjunction(11,3/3)",
                "table=0,priority=100,conj_id=11,tcp,actions=load:2->NXM_NX_REG0[],resubmit(,1)",
                "table=0,priority=0,actions=load:1->NXM_NX_REG0[],resubmit(,1)",
                "table=1,priority=10,reg0=1,actions=output:1",
                "table=1,priority=10,reg0=2,actions=output:2",
            ]),
            packets: vec![
                pk(3, a, x, 6, 80),
                pk(3, a, x, 6, 95),
                pk(3, a, x, 6, 96),
                pk(3, c, x, 6, 80),
                pk(3, a, [20, 0, 0, 7], 6, 80),
            ],
        },
    ]
}
