//! `execute_cached` / `execute` on established UDP and TCP flows, round-robin over
//! 1 … 100k connections. `cargo bench -p conntrack --bench established`

use conntrack::{Config, Conntrack, CtAction, FastCache, build};
use divan::Bencher;
use flow::extract::PacketMeta;
use std::net::{IpAddr, Ipv4Addr};

fn main() {
    divan::main();
}

fn ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))
}

fn setup(n: u32, tcp: bool) -> (Conntrack, Vec<Vec<u8>>) {
    let ct = Conntrack::new(Config::default());
    let act = CtAction {
        commit: true,
        ..CtAction::default()
    };
    let mut frames = Vec::new();
    let run = |f: &mut Vec<u8>| {
        let mut md = PacketMeta::port(1);
        ct.execute(f, &mut md, &act, 1);
    };
    for i in 0..n {
        let (c, s) = (ip(1 + (i >> 14)), ip(0x10_0000 + (i & 0x3fff)));
        let sp = 1024 + (i % 60000) as u16;
        if tcp {
            run(&mut build::tcp(c, s, sp, 80, 100, 0, 0x02, 65535, &[], b""));
            run(&mut build::tcp(
                s,
                c,
                80,
                sp,
                900,
                101,
                0x12,
                65535,
                &[],
                b"",
            ));
            let mut o = build::tcp(c, s, sp, 80, 101, 901, 0x10, 65535, &[], b"");
            run(&mut o);
            frames.push(o);
            frames.push(build::tcp(s, c, 80, sp, 901, 101, 0x10, 65535, &[], b""));
        } else {
            let mut o = build::udp(c, s, sp, 53, b"0123456789");
            run(&mut o);
            let mut r = build::udp(s, c, 53, sp, b"0123456789");
            run(&mut r);
            frames.push(o);
            frames.push(r);
        }
    }
    (ct, frames)
}

const CONNS: &[u32] = &[1, 100, 10_000, 100_000];

fn bench(b: Bencher<'_, '_>, n: u32, tcp: bool, cached: bool) {
    let (ct, mut frames) = setup(n, tcp);
    let mut cache = FastCache::new(262_144);
    let act = CtAction::default();
    let mut i = 0usize;
    b.bench_local(|| {
        let len = frames.len();
        let f = &mut frames[i % len];
        i = i.wrapping_add(1);
        let mut md = PacketMeta::port(1);
        if cached {
            ct.execute_cached(&mut cache, f, &mut md, &act, 2);
        } else {
            ct.execute(f, &mut md, &act, 2);
        }
        md.ct_state
    });
}

#[divan::bench(args = CONNS)]
fn udp_cached(b: Bencher<'_, '_>, n: u32) {
    bench(b, n, false, true);
}

#[divan::bench(args = CONNS)]
fn tcp_cached(b: Bencher<'_, '_>, n: u32) {
    bench(b, n, true, true);
}

#[divan::bench(args = CONNS)]
fn udp_full(b: Bencher<'_, '_>, n: u32) {
    bench(b, n, false, false);
}

#[divan::bench(args = CONNS)]
fn tcp_full(b: Bencher<'_, '_>, n: u32) {
    bench(b, n, true, false);
}
