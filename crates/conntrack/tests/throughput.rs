//! Throughput of established UDP and TCP flows through `execute_cached` (and `execute` for
//! comparison), at 1 to 100k connections, round-robin over the connections.
//! `cargo test --release -p conntrack --test throughput -- --ignored --nocapture`

use conntrack::{Config, Conntrack, CtAction, FastCache, build};
use flow::extract::PacketMeta;
use flow::field::ct_state as cs;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

fn ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))
}

/// Frames of `n` established connections: (orig, reply) per connection.
fn setup(ct: &Conntrack, n: u32, tcp: bool) -> Vec<Vec<u8>> {
    let frames = build::established(ct, n, tcp);
    assert_eq!(ct.nconns(), n);
    frames
}

fn measure(n: u32, tcp: bool, cached: bool, slots: usize) -> f64 {
    let ct = Conntrack::new(Config::default());
    let mut frames = setup(&ct, n, tcp);
    let mut cache = FastCache::new(slots);
    let act = CtAction::default();
    let total = 2_000_000usize.max(frames.len() * 4);
    let len = frames.len();
    // Warm up once over every frame.
    for f in frames.iter_mut() {
        let mut md = PacketMeta::port(1);
        ct.execute_cached(&mut cache, f, &mut md, &act, 2);
    }
    let t = Instant::now();
    let mut est = 0usize;
    for i in 0..total {
        let f = &mut frames[i % len];
        let mut md = PacketMeta::port(1);
        if cached {
            ct.execute_cached(&mut cache, f, &mut md, &act, 3);
        } else {
            ct.execute(f, &mut md, &act, 3);
        }
        est += usize::from(md.ct_state & cs::ESTABLISHED != 0);
    }
    let ns = t.elapsed().as_nanos() as f64 / total as f64;
    assert_eq!(est, total, "every packet established");
    ns
}

#[test]
#[ignore = "throughput measurement; run in release"]
fn established_throughput() {
    println!(
        "bytes_per_conn (estimate) = {}",
        Conntrack::bytes_per_conn()
    );
    println!(
        "{:>8} {:>5} {:>16} {:>17} {:>10}",
        "conns", "proto", "cached(8K) ns/p", "cached(256K) ns/p", "full ns/p"
    );
    for n in [1u32, 100, 1_000, 10_000, 100_000] {
        for tcp in [false, true] {
            let c = measure(n, tcp, true, 8192);
            let c2 = measure(n, tcp, true, 262_144);
            let f = measure(n, tcp, false, 1);
            let p = if tcp { "tcp" } else { "udp" };
            println!("{n:>8} {p:>5} {c:>16.1} {c2:>17.1} {f:>10.1}");
        }
    }
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// Measured memory of 1M connections against `bytes_per_conn`.
#[test]
#[ignore = "allocates ~0.5 GB; run in release"]
fn one_million_connections_fit() {
    let ct = Conntrack::new(Config::default());
    let act = CtAction {
        commit: true,
        ..CtAction::default()
    };
    let before = rss_bytes();
    let n = 1_000_000u32;
    for i in 0..n {
        let mut f = build::udp(
            ip(1 + (i >> 14)),
            ip(0x10_0000 + (i & 0x3fff)),
            1024 + (i % 60000) as u16,
            53,
            b"x",
        );
        let mut md = PacketMeta::port(1);
        ct.execute(&mut f, &mut md, &act, 1);
    }
    assert_eq!(ct.nconns(), n);
    let per = (rss_bytes() - before) / n as usize;
    println!(
        "measured {per} bytes/conn (RSS growth), estimate {}",
        Conntrack::bytes_per_conn()
    );
    assert!(per < 1024);
}

/// A fixed workload for profilers: `CT_PROFILE_N` packets of one established UDP flow.
#[test]
#[ignore = "profiling workload"]
fn profile_one_udp_flow() {
    let n: usize = std::env::var("CT_PROFILE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let ct = Conntrack::new(Config::default());
    let mut frames = setup(&ct, 1, false);
    let mut cache = FastCache::new(64);
    let act = CtAction::default();
    let t = Instant::now();
    for i in 0..n {
        let mut md = PacketMeta::port(1);
        ct.execute_cached(&mut cache, &mut frames[i & 1], &mut md, &act, 3);
    }
    println!("{:.1} ns/packet", t.elapsed().as_nanos() as f64 / n as f64);
}
