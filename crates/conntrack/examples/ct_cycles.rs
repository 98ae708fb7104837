//! Established-path driver for instruction counts:
//! `valgrind --tool=callgrind --toggle-collect='*execute_cached*' target/debug/examples/ct_cycles udp 1000 200000`
//! (instructions per packet = collected Ir / packets).

use conntrack::{Config, Conntrack, CtAction, FastCache, build};
use flow::extract::PacketMeta;
use std::net::{IpAddr, Ipv4Addr};

fn ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tcp = args.get(1).is_some_and(|a| a == "tcp");
    let n: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let pkts: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let ct = Conntrack::new(Config::default());
    let commit = CtAction {
        commit: true,
        ..CtAction::default()
    };
    let mut frames = Vec::new();
    let run = |f: &mut Vec<u8>| {
        let mut md = PacketMeta::port(1);
        ct.execute(f, &mut md, &commit, 1);
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
    let slots: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(4096);
    let mut cache = FastCache::new(slots);
    let act = CtAction::default();
    let len = frames.len();
    // Warm the cache.
    for f in frames.iter_mut() {
        let mut md = PacketMeta::port(1);
        ct.execute_cached(&mut cache, f, &mut md, &act, 2);
    }
    let t = std::time::Instant::now();
    let mut est = 0usize;
    for i in 0..pkts {
        let mut md = PacketMeta::port(1);
        ct.execute_cached(&mut cache, &mut frames[i % len], &mut md, &act, 2);
        est += usize::from(md.ct_state & flow::field::ct_state::ESTABLISHED != 0);
    }
    let ns = t.elapsed().as_nanos() as f64 / pkts as f64;
    println!(
        "{} conns={n} pkts={pkts} est={est} {ns:.1} ns/pkt hits/misses={:?} slots={}",
        if tcp { "tcp" } else { "udp" },
        cache.hit_stats(),
        cache.capacity()
    );
}
