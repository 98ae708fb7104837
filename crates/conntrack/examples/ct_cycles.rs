//! Established-path driver for instruction counts:
//! `valgrind --tool=callgrind --toggle-collect='*execute_cached*' target/debug/examples/ct_cycles udp 1000 200000`
//! (instructions per packet = collected Ir / packets).

use conntrack::{Config, Conntrack, CtAction, FastCache, build};
use flow::extract::PacketMeta;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tcp = args.get(1).is_some_and(|a| a == "tcp");
    let n: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let pkts: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let ct = Conntrack::new(Config::default());
    let mut frames = build::established(&ct, n, tcp);
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
