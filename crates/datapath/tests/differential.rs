//! Every tier against the linear twin on random masks, keys and insert/remove/rank sequences,
//! with lookups at every batch size 0..=33, every hash level and both lookup implementations.

use std::collections::HashMap;
use std::sync::Arc;

use datapath::dpcls::Impl;
use datapath::{DpFlow, Dpcls, DpclsConfig, Emc, Inserted, LinearMegaflows, Smc, Ufid};
use flow::hash::{Level, hash_key};
use flow::{FLOW_WORDS, FlowKey, FlowMask};
use proptest::prelude::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Words a random mask may cover (besides in_port).
const WORDS: [usize; 14] = [1, 2, 3, 11, 16, 17, 18, 19, 20, 21, 24, 27, 28, 29];

fn random_mask(r: &mut Rng, in_port: bool) -> FlowMask {
    let mut m = FlowMask::CATCHALL;
    if in_port {
        m.w[0] = 0xffff_ffff << 32;
    }
    // Mostly few words (specialised shapes), sometimes many (generic shape).
    let n = if r.below(5) == 0 {
        8 + r.below(6)
    } else {
        1 + r.below(5)
    };
    for _ in 0..n {
        let i = WORDS[r.below(WORDS.len() as u64) as usize];
        m.w[i] = match r.below(3) {
            0 => u64::MAX,
            1 => 0xffff_ffff,
            _ => r.next() | 1,
        };
    }
    m
}

/// A word from a small domain, so that random keys hit flows often.
fn small_word(r: &mut Rng) -> u64 {
    match r.below(4) {
        0 => 0,
        1 => 0x0a00_0001,
        2 => u64::MAX,
        _ => 0x1234_5678_9abc_def0,
    }
}

fn random_key(r: &mut Rng, port: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    for i in WORDS {
        k.w[i] = small_word(r);
    }
    k.w[0] = u64::from(port) << 32;
    k
}

/// A packet that matches `f` (bits outside the mask random), received on `port`.
fn packet_for(r: &mut Rng, f: &DpFlow, port: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    for i in 0..FLOW_WORDS {
        let noise = if r.below(2) == 0 { 0 } else { r.next() };
        k.w[i] = f.key.w[i] | (noise & !f.mask.w[i]);
    }
    k.w[0] = (k.w[0] & 0xffff_ffff) | u64::from(port) << 32;
    k
}

fn run(seed: u64, steps: usize) {
    let mut r = Rng(seed);
    let per_port = r.below(4) != 0;
    let cfg = DpclsConfig {
        per_port,
        ranking: r.below(4) != 0,
        rank_interval_ms: 1,
        // Small arenas force compactions.
        arena_capacity: 4 + r.below(40) as usize,
        prefilter: r.below(4) != 0,
    };
    let cls = Dpcls::new(cfg);
    let mut reader = cls.reader();
    let mut twin = LinearMegaflows::new();
    let mut emc = Emc::new(1);
    let mut smc = Smc::new();
    let mut index: HashMap<Ufid, u32> = HashMap::new();
    let n_masks = 1 + r.below(6) as usize;
    // Half the runs give every mask a shared part, so the signature prefilter has a
    // common projection to filter on.
    let shared = if r.below(2) == 0 {
        let mut m = FlowMask::CATCHALL;
        m.w[29] = 0xffff_0000_0000_ffff & r.next();
        m.w[19] = r.next() & 0x0000_ffff_ffff_0000;
        m
    } else {
        FlowMask::CATCHALL
    };
    let masks: Vec<FlowMask> = (0..n_masks)
        .map(|_| {
            let with_port = per_port || r.below(2) == 0;
            let mut m = random_mask(&mut r, with_port);
            for (a, b) in m.w.iter_mut().zip(shared.w.iter()) {
                *a |= *b;
            }
            m
        })
        .collect();
    let ports = [1u32, 2, 7];
    let mut next_ufid = 1u128;
    let mut now = 0u64;
    for _ in 0..steps {
        match r.below(10) {
            0..=3 => {
                let port = ports[r.below(3) as usize];
                let m = masks[r.below(masks.len() as u64) as usize];
                let k = random_key(&mut r, port);
                let f = DpFlow::new(Ufid(next_ufid), &k, &m, next_ufid as u64);
                next_ufid += 1;
                if per_port && f.in_port().is_none() {
                    assert!(cls.insert(f).is_err());
                    continue;
                }
                if twin.overlaps(&f) {
                    continue;
                }
                match cls.insert(f).expect("insert") {
                    Inserted::New(f, idx) => {
                        index.insert(f.ufid, idx);
                        twin.insert(f);
                    }
                    Inserted::Existing(..) => panic!("non-overlapping flow reported existing"),
                }
            }
            4 => {
                if !twin.is_empty() {
                    let f = twin.flows()[r.below(twin.len() as u64) as usize].clone();
                    let a = cls.remove(f.ufid).expect("installed");
                    assert!(Arc::ptr_eq(&a, &f) && a.is_dead());
                    twin.remove(f.ufid);
                    assert!(cls.remove(f.ufid).is_none());
                }
            }
            5 => {
                now += 1;
                let _ = cls.rank(now);
                let snap = reader.snapshot().clone();
                // Structure only here; the order by descending hits is checked by the
                // unit test `rank_orders_by_descending_hits_and_lookups_drop`.
                for p in &snap.ports {
                    assert!(!p.subtables.is_empty());
                    assert!(p.subtables.iter().all(|s| !s.is_empty()));
                }
            }
            _ => {
                let port = ports[r.below(3) as usize];
                let n = r.below(34) as usize;
                let keys: Vec<FlowKey> = (0..n)
                    .map(|_| {
                        if !twin.is_empty() && r.below(4) != 0 {
                            let f = &twin.flows()[r.below(twin.len() as u64) as usize];
                            packet_for(&mut r, f, port)
                        } else {
                            random_key(&mut r, port)
                        }
                    })
                    .collect();
                let snap = reader.snapshot().clone();
                let mut out = vec![None; n];
                let stats = snap.lookup_batch(port, &keys, &mut out);
                let mut hits = 0;
                for (k, o) in keys.iter().zip(&out) {
                    let want = twin
                        .lookup(k)
                        .filter(|f| !per_port || f.in_port() == Some(port));
                    match (o, want) {
                        (None, None) => {}
                        (Some(a), Some(b)) => {
                            assert!(Arc::ptr_eq(a, b), "wrong flow for {k:?}");
                            hits += 1;
                        }
                        (a, b) => panic!("dpcls {a:?} twin {b:?} for {k:?}"),
                    }
                }
                assert_eq!(stats.hits, hits);
                assert!(stats.lookups >= stats.hits);
                // Every implementation and hash level gives the same answers.
                for imp in [Impl::Auto, Impl::Generic] {
                    for level in Level::ALL {
                        let mut out2 = vec![None; n];
                        snap.lookup_batch_with(port, &keys, &mut out2, imp, Some(level));
                        for (a, b) in out.iter().zip(&out2) {
                            assert_eq!(a.map(Arc::as_ptr), b.map(Arc::as_ptr), "{imp:?} {level:?}");
                        }
                    }
                }
                // EMC and SMC: a hit is the twin's answer; fill them from dpcls hits.
                for (k, o) in keys.iter().zip(&out) {
                    let map = k.map();
                    let h = hash_key(k, map, 0);
                    let want = twin
                        .lookup(k)
                        .filter(|f| !per_port || f.in_port() == Some(port));
                    if let Some(f) = emc.lookup(k, map, h) {
                        assert!(Arc::ptr_eq(f, want.expect("EMC hit, twin miss")));
                    }
                    if let Some(f) = smc.lookup(&snap.arena, k, h) {
                        assert!(f.matches(k) && !f.is_dead());
                        assert!(Arc::ptr_eq(f, want.expect("SMC hit, twin miss")));
                    }
                    if let Some(f) = o {
                        emc.maybe_insert(k, map, h, f);
                        if let Some(&i) = index.get(&f.ufid) {
                            // Possibly stale after a compaction: the SMC must cope.
                            smc.insert(h, i);
                        }
                        if map.len() <= datapath::emc::EMC_MAX_WORDS {
                            let e = emc.peek(k, map, h).expect("just inserted");
                            assert!(Arc::ptr_eq(e, f));
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cls.len(), twin.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn tiers_agree_with_twin(seed in any::<u64>()) {
        run(seed, 400);
    }
}

#[test]
fn long_sequences() {
    for seed in 0..4 {
        run(seed, 4000);
    }
}
