//! `execute_cached` / `execute` on established UDP and TCP flows, round-robin over
//! 1 … 100k connections. `cargo bench -p conntrack --bench established`

use conntrack::{Config, Conntrack, CtAction, FastCache, build};
use divan::Bencher;
use flow::extract::PacketMeta;

fn main() {
    divan::main();
}

fn setup(n: u32, tcp: bool) -> (Conntrack, Vec<Vec<u8>>) {
    let ct = Conntrack::new(Config::default());
    let frames = build::established(&ct, n, tcp);
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
