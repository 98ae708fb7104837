//! Lookups concurrent with installs, removals and rankings (bounded: ~2 s).
//!
//! Flow `i` matches `nw_src = i` (every mask covers all of nw_src), so flows never overlap and
//! key `i` can only ever match flow `i`. Flows `0..STABLE` stay installed throughout and
//! must always be found; the others come and go, and a hit on one must be that flow.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use datapath::{DpFlow, Dpcls, DpclsConfig, Ufid};
use flow::{FlowKey, FlowMask};

const STABLE: u64 = 64;
const CHURN: u64 = 2000;
const MASKS: u64 = 12;

fn mask(i: u64) -> FlowMask {
    let mut m = FlowMask::CATCHALL;
    m.w[0] = 0xffff_ffff << 32;
    m.w[19] = 0xffff_ffff << 32;
    m.w[29] = ((i % MASKS) + 1) << 40;
    if i.is_multiple_of(2) {
        m.w[16] = 0xffff;
    }
    m
}

fn key(i: u64) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.w[0] = 1 << 32;
    k.w[19] = i << 32;
    k
}

fn flow(i: u64) -> DpFlow {
    DpFlow::new(Ufid(u128::from(i)), &key(i), &mask(i), i)
}

#[test]
fn lookups_concurrent_with_writers_and_ranking() {
    let cls = Arc::new(Dpcls::new(DpclsConfig {
        arena_capacity: 256, // small: compactions happen under load
        ..DpclsConfig::default()
    }));
    for i in 0..STABLE {
        cls.insert(flow(i)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut handles = Vec::new();
    for t in 0..2u64 {
        let (cls, stop) = (cls.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            let mut reader = cls.reader();
            let mut n = 0u64;
            let mut x = t + 1;
            let mut batches = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let snap = reader.snapshot().clone();
                let mut keys = [FlowKey::ZERO; 32];
                let mut ids = [0u64; 32];
                for (k, id) in keys.iter_mut().zip(ids.iter_mut()) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *id = if x.is_multiple_of(2) {
                        x % STABLE
                    } else {
                        x % (STABLE + CHURN)
                    };
                    *k = key(*id);
                }
                let len = (batches % 33) as usize;
                let mut out = [None; 32];
                let len = len.min(32);
                snap.lookup_batch(1, &keys[..len], &mut out[..len]);
                for ((id, k), o) in ids.iter().zip(&keys).zip(&out).take(len) {
                    match o {
                        Some(f) => {
                            assert_eq!(f.ufid, Ufid(u128::from(*id)));
                            assert!(f.matches(k));
                        }
                        None => assert!(*id >= STABLE, "stable flow {id} missed"),
                    }
                    n += 1;
                }
                batches += 1;
            }
            n
        }));
    }
    {
        let (cls, stop) = (cls.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            let mut ranks = 0;
            let mut now = 0;
            while !stop.load(Ordering::Relaxed) {
                now += 1000;
                let _ = cls.rank(now);
                ranks += 1;
                thread::sleep(Duration::from_micros(200));
            }
            ranks
        }));
    }
    let mut installed = vec![false; CHURN as usize];
    let mut x = 0x1234_5678u64;
    let mut ops = 0;
    while Instant::now() < deadline {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % CHURN) as usize;
        let id = STABLE + j as u64;
        if installed[j] {
            assert!(cls.remove(Ufid(u128::from(id))).is_some());
        } else {
            cls.insert(flow(id)).unwrap();
        }
        installed[j] = !installed[j];
        ops += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(ops > 1000, "writer made {ops} ops");
    assert!(counts.iter().all(|&c| c > 1000), "{counts:?}");
    assert_eq!(
        cls.len(),
        STABLE as usize + installed.iter().filter(|&&b| b).count()
    );
}
