//! Packet vectors and expectations taken from OVS 3.1's own test suite
//! (`tests/ofproto-dpif.at`, which runs the dummy datapath with the userspace conntrack):
//! "conntrack - tcp port reuse", "tcp pick up", "disable tcp sequence checking",
//! "ICMP related", "force commit", "expiration". The pipelines there are reduced to the
//! `ct` calls they make and the `ct_state` matches that count packets.

use conntrack::{Config, Conntrack, CtAction, FastCache};
use flow::extract::{CtOrigTuple, PacketMeta};
use flow::field::ct_state as cs;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}

struct T {
    ct: Conntrack,
    twin: Conntrack,
    cache: FastCache,
    now: u64,
}

impl T {
    fn new() -> T {
        T {
            ct: Conntrack::with_seed(Config::default(), 3),
            twin: Conntrack::with_seed(Config::default(), 3),
            cache: FastCache::new(16),
            now: 1,
        }
    }
    fn ct(&mut self, pkt: &str, act: CtAction) -> PacketMeta {
        let mut f = hex(pkt);
        let mut f2 = f.clone();
        let (mut a, mut b) = (PacketMeta::port(1), PacketMeta::port(1));
        self.ct.execute(&mut f, &mut a, &act, self.now);
        self.twin
            .execute_cached(&mut self.cache, &mut f2, &mut b, &act, self.now);
        assert_eq!(a, b);
        a
    }
    fn set_liberal(&self, on: bool) {
        self.ct.set_tcp_liberal(on);
        self.twin.set_tcp_liberal(on);
    }
    fn flush(&self) {
        self.ct.flush(None, None);
        self.twin.flush(None, None);
    }
}

const COMMIT: CtAction = CtAction {
    zone: 0,
    commit: true,
    force: false,
    mark: None,
    label: None,
    nat: None,
};
const LOOK: CtAction = CtAction {
    zone: 0,
    commit: false,
    force: false,
    mark: None,
    label: None,
    nat: None,
};

const REUSE_1: [(u8, &str); 9] = [
    (
        1,
        "50540000000a50540000000908004500002ca4e5400040067fe20a0101010a0101020001000259b5d93f0000000060027210dd190000020405b4",
    ),
    (
        2,
        "50540000000950540000000a08004500002c00004000400624c80a0101020a010101000200017c35468459b5d940601272101a4f0000020405b4",
    ),
    (
        1,
        "50540000000a505400000009080045000028a4e6400040067fe50a0101010a0101020001000259b5d9407c35468550107210320c0000",
    ),
    (
        2,
        "50540000000950540000000a0800450000303b5f40004006e9640a0101020a010101000200017c35468559b5d9405018721074c200007061796c6f61640a",
    ),
    (
        1,
        "50540000000a505400000009080045000028a4e7400040067fe40a0101010a0101020001000259b5d9407c35468d5010721032040000",
    ),
    (
        2,
        "50540000000950540000000a0800450000283b6040004006e96b0a0101020a010101000200017c35468d59b5d9405011721032030000",
    ),
    (
        1,
        "50540000000a505400000009080045000028a4e8400040067fe30a0101010a0101020001000259b5d9407c35468e5010721032030000",
    ),
    (
        1,
        "50540000000a505400000009080045000028a4e9400040067fe20a0101010a0101020001000259b5d9407c35468e5011721032020000",
    ),
    (
        2,
        "50540000000950540000000a0800450000283b6140004006e96a0a0101020a010101000200017c35468e59b5d9415010721032020000",
    ),
];

const REUSE_2: [(u8, &str); 9] = [
    (
        1,
        "50540000000a50540000000908004500002cc0a74000400664200a0101010a010102000100025b7dbf1f0000000060027210f5710000020405b4",
    ),
    (
        2,
        "50540000000950540000000a08004500002c00004000400624c80a0101020a010101000200017c36468f5b7dbf2060127210329b0000020405b4",
    ),
    (
        1,
        "50540000000a505400000009080045000028c0a84000400664230a0101010a010102000100025b7dbf207c364690501072104a580000",
    ),
    (
        2,
        "50540000000950540000000a080045000030392840004006eb9b0a0101020a010101000200017c3646905b7dbf20501872108d0e00007061796c6f61640a",
    ),
    (
        1,
        "50540000000a505400000009080045000028c0a94000400664220a0101010a010102000100025b7dbf207c364698501072104a500000",
    ),
    (
        2,
        "50540000000950540000000a080045000028392940004006eba20a0101020a010101000200017c3646985b7dbf20501172104a4f0000",
    ),
    (
        1,
        "50540000000a505400000009080045000028c0aa4000400664210a0101010a010102000100025b7dbf207c364699501072104a4f0000",
    ),
    (
        1,
        "50540000000a505400000009080045000028c0ab4000400664200a0101010a010102000100025b7dbf207c364699501172104a4e0000",
    ),
    (
        2,
        "50540000000950540000000a080045000028392a40004006eba10a0101020a010101000200017c3646995b7dbf21501072104a4e0000",
    ),
];

/// The "tcp port reuse" / "disable tcp sequence checking" pipeline: port 1 commits, port 2
/// only looks; counts [new from 1, not-new from 1, est+rpl from 2, inv].
fn classify(t: &mut T, pkts: &[(u8, &str)], counts: &mut [u32; 4]) {
    for (port, p) in pkts {
        let md = t.ct(p, if *port == 1 { COMMIT } else { LOOK });
        let s = md.ct_state;
        let trk = s & cs::TRACKED != 0;
        let (new, inv, rpl, est) = (
            s & cs::NEW != 0,
            s & cs::INVALID != 0,
            s & cs::REPLY_DIR != 0,
            s & cs::ESTABLISHED != 0,
        );
        if *port == 1 && trk && new && !inv && !rpl {
            counts[0] += 1;
        } else if *port == 1 && trk && !new && !inv && !rpl {
            counts[1] += 1;
        } else if *port == 2 && trk && est && rpl && !new && !inv {
            counts[2] += 1;
        } else if trk && inv {
            counts[3] += 1;
        }
    }
}

#[test]
fn ovs_tcp_port_reuse() {
    let mut t = T::new();
    let mut c = [0; 4];
    classify(&mut t, &REUSE_1, &mut c);
    assert_eq!(c[0], 1, "{c:?}");
    classify(&mut t, &REUSE_2, &mut c);
    assert_eq!(c[0], 2, "{c:?}");
    assert_eq!(c, [2, 8, 8, 0]);
}

#[test]
fn ovs_disable_tcp_sequence_checking() {
    let mut run = REUSE_1;
    // The fourth packet is the data segment with seq 0 and ack 0.
    run[3] = (
        2,
        "50540000000950540000000a0800450000303b5f40004006e9640a0101020a010101000200010000000000000000501872106a7300007061796c6f61640a",
    );
    let mut t = T::new();
    let mut c = [0; 4];
    classify(&mut t, &run, &mut c);
    assert_eq!(c, [1, 4, 3, 1]);
    t.flush();
    t.set_liberal(true);
    classify(&mut t, &run, &mut c);
    assert_eq!(c, [2, 8, 7, 1]);
    t.set_liberal(false);
    t.flush();
    classify(&mut t, &run, &mut c);
    assert_eq!(c, [3, 12, 10, 2]);
}

#[test]
fn ovs_tcp_pick_up_with_window_scaling() {
    let mut t = T::new();
    let p1 = |t: &mut T, p: &str| t.ct(p, COMMIT).ct_state;
    let p2 = |t: &mut T, p: &str| t.ct(p, LOOK).ct_state;
    let mut states = vec![
        p1(
            &mut t,
            "50540000000950540000000a080045000028fc264000400628a50a0101020a01010100020001396bb35a8cadbdb45010000a629b0000",
        ),
        p1(
            &mut t,
            "50540000000950540000000a080045000029fc274000400628a30a0101020a01010100020001396bb35a8cadbdb45018000a589200000a",
        ),
        p2(
            &mut t,
            "50540000000a505400000009080045000028f2c84000400632030a0101010a010102000100028cadbdb4396bb35b5010000a629a0000",
        ),
    ];
    let dump: Vec<String> = t.ct.dump(None).iter().map(|d| d.to_string()).collect();
    assert_eq!(
        dump,
        [
            "tcp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=2,dport=1),reply=(src=10.1.1.1,dst=10.1.1.2,sport=1,dport=2),protoinfo=(state=ESTABLISHED)"
        ]
    );
    let big1 = format!(
        "50540000000950540000000a08004500022afc284000400626a10a0101020a01010100020001396bb35b8cadbdb45018000a941f0000{}0a",
        "66".repeat(513)
    );
    let big2 = format!(
        "50540000000a5054000000090800450001fdf2ca40004006302c0a0101010a010102000100028cadbdb4396bb55d5018000aa60c0000{}0a",
        "65".repeat(468)
    );
    states.push(p1(&mut t, &big1));
    states.push(p2(&mut t, "50540000000a505400000009080045000028f2c94000400632020a0101010a010102000100028cadbdb4396bb55d5010000a60980000"));
    states.push(p2(&mut t, &big2));
    states.push(p1(&mut t, "50540000000950540000000a080045000028fc294000400628a20a0101020a01010100020001396bb55d8cadbf895010000a5ec30000"));
    states.push(p1(&mut t, "50540000000950540000000a080045000028fc2a4000400628a10a0101020a01010100020001396bb55d8cadbf895011000a5ec20000"));
    states.push(p2(&mut t, "50540000000a505400000009080045000028f2cb4000400632000a0101010a010102000100028cadbf89396bb55e5010000a5ec20000"));
    states.push(p2(&mut t, "50540000000a505400000009080045000028f2cc4000400631ff0a0101010a010102000100028cadbf89396bb55e5011000a5ec10000"));
    states.push(p1(&mut t, "50540000000950540000000a080045000028258e40004006ff3d0a0101020a01010100020001396bb55e8cadbf8a5010000a5ec10000"));
    // OVS: no packet reaches the +trk+inv flow.
    for (i, s) in states.iter().enumerate() {
        assert_eq!(s & cs::INVALID, 0, "packet {i}: {s:#x}");
        assert_ne!(s & cs::TRACKED, 0);
    }
}

#[test]
fn ovs_icmp_related() {
    let mut t = T::new();
    // An ICMP error about an unknown connection: +inv (dropped by the -inv-new flow).
    let s = t.ct("f64c473528c9c6f54ecb72db080045c0003d2e8700004001f351ac100004ac1000030303553f0000000045000021317040004011b138ac100003ac10000411112222000da5a06369616f0a", LOOK).ct_state;
    assert_ne!(s & cs::INVALID, 0);
    let md = t.ct("c6f94ecb72dbe64c473528c9080045000021317040004011b138ac100001ac100002a28e15b3000d20966369616f0a", COMMIT);
    assert_eq!(md.ct_state, cs::NEW | cs::TRACKED);
    let orig = CtOrigTuple::V4 {
        src: 0xac10_0001,
        dst: 0xac10_0002,
        proto: 17,
        tp_src: 41614,
        tp_dst: 5555,
    };
    assert_eq!(md.ct_orig, orig);
    let md = t.ct("e64c473528c9c6f94ecb72db080045c0003d2e8700004001f355ac100002ac1000010303553f0000000045000021317040004011b138ac100001ac100002a28e15b3000d20966369616f0a", LOOK);
    assert_eq!(md.ct_state, cs::RELATED | cs::REPLY_DIR | cs::TRACKED);
    assert_eq!(md.ct_orig, orig);
}

fn udp(src: u8, dst: u8, sp: u16, dp: u16) -> String {
    let f = conntrack::build::udp(
        std::net::IpAddr::from([10, 1, 1, src]),
        std::net::IpAddr::from([10, 1, 1, dst]),
        sp,
        dp,
        b"",
    );
    f.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn ovs_force_commit() {
    let mut t = T::new();
    // p2: ct(table=1); table 1: +est -> ct(force,commit).
    let p2 = |t: &mut T, pkt: &str| {
        let md = t.ct(pkt, LOOK);
        if md.ct_state & cs::ESTABLISHED != 0 {
            let force = CtAction {
                force: true,
                ..COMMIT
            };
            let mut f = hex(pkt);
            let mut f2 = f.clone();
            let (mut a, mut b) = (md, md);
            t.ct.execute(&mut f, &mut a, &force, t.now);
            t.twin
                .execute_cached(&mut t.cache, &mut f2, &mut b, &force, t.now);
            assert_eq!(a, b);
            return true;
        }
        false
    };
    assert!(!p2(&mut t, &udp(2, 1, 2, 1)));
    t.ct(&udp(1, 2, 1, 2), COMMIT);
    assert!(p2(&mut t, &udp(2, 1, 2, 1)));
    t.ct(&udp(1, 2, 3, 4), COMMIT);
    assert!(p2(&mut t, &udp(2, 1, 4, 3)));
    let dump: Vec<String> = t.ct.dump(None).iter().map(|d| d.to_string()).collect();
    assert_eq!(
        dump,
        [
            "udp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=2,dport=1),reply=(src=10.1.1.1,dst=10.1.1.2,sport=1,dport=2)",
            "udp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=4,dport=3),reply=(src=10.1.1.1,dst=10.1.1.2,sport=3,dport=4)"
        ]
    );
}

#[test]
fn ovs_expiration() {
    let mut t = T::new();
    t.ct(&udp(1, 2, 1, 2), COMMIT);
    let md = t.ct(&udp(2, 1, 2, 1), LOOK);
    assert_eq!(md.ct_state, cs::ESTABLISHED | cs::REPLY_DIR | cs::TRACKED);
    assert_eq!(
        md.ct_orig,
        CtOrigTuple::V4 {
            src: 0x0a01_0101,
            dst: 0x0a01_0102,
            proto: 17,
            tp_src: 1,
            tp_dst: 2
        }
    );
    // time/warp 100000: expired, the reply is +new and not sent to the controller.
    t.now += 100_000;
    assert_eq!(t.ct(&udp(2, 1, 2, 1), LOOK).ct_state, cs::NEW | cs::TRACKED);
}
