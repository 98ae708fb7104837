//! Stress: PMD-like threads share one tracker (each with its own FastCache); the two
//! directions of a connection arrive on different threads; a sweeper and a flusher run at
//! the same time. Afterwards the table is consistent: every live connection is indexed
//! twice, counts match, and once everything expired a full sweep empties it.

use conntrack::{Config, Conntrack, CtAction, FastCache, build};
use flow::extract::PacketMeta;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))
}

#[test]
fn tracker_is_send_and_sync() {
    fn ok<T: Send + Sync>() {}
    ok::<Conntrack>();
    ok::<FastCache>();
}

#[test]
fn threads_share_connections_with_sweeper_and_flusher() {
    let ct = Arc::new(Conntrack::new(Config {
        max_conns: 5_000,
        ..Config::default()
    }));
    ct.set_zone_limit(1, Some(300));
    let now = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for t in 0..4u32 {
        let (ct, now) = (Arc::clone(&ct), Arc::clone(&now));
        hs.push(std::thread::spawn(move || {
            let mut cache = FastCache::new(256);
            let mut s = 0x1234_5678u64 ^ u64::from(t);
            for _ in 0..40_000 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let flow = (s % 2000) as u32;
                let zone = (s >> 20) as u16 % 2;
                let (c, sv) = (ip(1 + flow), ip(100_000));
                let sport = 1024 + flow as u16;
                // Even threads send the original direction, odd ones the reply.
                let mut f = match (t % 2, (s >> 8) % 3) {
                    (0, 0) => build::tcp(c, sv, sport, 80, 1, 0, 0x02, 1000, &[], b""),
                    (0, 1) => build::tcp(c, sv, sport, 80, 2, 7, 0x10, 1000, &[], b""),
                    (0, _) => build::udp(c, sv, sport, 53, b"q"),
                    (_, 0) => build::tcp(sv, c, 80, sport, 6, 2, 0x12, 1000, &[], b""),
                    (_, 1) => build::udp(sv, c, 53, sport, b"r"),
                    _ => build::echo(c, sv, 8, sport, 1),
                };
                let act = CtAction {
                    zone,
                    commit: (s >> 30).is_multiple_of(2),
                    mark: Some((t, 0xf)),
                    ..CtAction::default()
                };
                let mut md = PacketMeta::port(t);
                let n = now.load(Ordering::Relaxed);
                ct.execute_cached(&mut cache, &mut f, &mut md, &act, n);
                assert!(md.ct_state & flow::field::ct_state::TRACKED != 0);
            }
        }));
    }
    {
        let (ct, now, stop) = (Arc::clone(&ct), Arc::clone(&now), Arc::clone(&stop));
        hs.push(std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = now.fetch_add(50, Ordering::Relaxed);
                ct.sweep(n, 64);
                i += 1;
                if i.is_multiple_of(500) {
                    ct.flush(Some(1), None);
                }
                std::thread::yield_now();
            }
        }));
    }
    let sweeper = hs.pop();
    for h in hs {
        h.join().expect("worker");
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = sweeper {
        h.join().expect("sweeper");
    }
    let n = ct.nconns();
    assert!(n <= 5_000);
    assert_eq!(ct.index_slots(), 2 * n as usize);
    let zl = ct.zone_limits();
    assert!(zl[0].2 <= 300);
    // Everything expires within a day; sweep it all.
    let later = now.load(Ordering::Relaxed) + 2 * 86_400_000;
    while ct.nconns() > 0 {
        ct.sweep(later, 1000);
    }
    assert_eq!(ct.index_slots(), 0);
    assert_eq!(ct.zone_limits()[0].2, 0);
}
