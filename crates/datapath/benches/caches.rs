//! Cache tiers, ns per packet: EMC hit (1 / 1k / 10k / 100k flows), SMC hit, dpcls hit with
//! 1 subtable and with 10 subtables hit uniformly (seed 001), and seed 000's scenario (two
//! in_ports whose traffic hits disjoint subtables, plus "ping" subtables): one shared
//! unranked classifier vs per-port ranked classifiers. Each iteration looks up a batch of 32
//! packets; divan's item throughput is per packet.
//!
//! Run: `cargo bench -p datapath --bench caches`. `main` first prints the lookup statistics
//! (hit rates, avg subtable lookups per hit) and the memory figures.

use std::sync::Arc;

use datapath::dpcls::{Impl, Snapshot};
use datapath::{DpFlow, Dpcls, DpclsConfig, Emc, Smc, Ufid};
use divan::{Bencher, black_box, counter::ItemsCount};
use flow::hash::hash_key;
use flow::{FlowKey, FlowMask, WordMap};

const BATCH: usize = 32;

/// A UDP/IPv4 key of flow `i` on `port` (6 non-zero words, as `extract` gives).
fn pkt(port: u32, i: u64) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.w[0] = u64::from(port) << 32;
    k.w[16] = 0x0000_0000_0002_0800; // dl_dst 00:..:02, dl_type IPv4
    k.w[17] = 0x0000_0000_0001_0000; // dl_src
    k.w[19] = (0x0a00_0000 | (i & 0xff_ffff)) << 32 | (0x0b00_0000 | (i >> 12));
    k.w[24] = 64 << 8 | 17; // ttl 64, udp
    k.w[29] = (1000 + (i & 0x3ff)) << 48 | (2000 + (i >> 10 & 0x3ff)) << 32;
    k
}

/// Mask `m` of a family of distinct megaflow masks: in_port, dl_type, nw_src exact, nw_proto
/// and a pattern of `m + 1` in tp_dst (flows with distinct nw_src never overlap).
fn mf_mask(m: u32) -> FlowMask {
    let mut f = FlowMask::CATCHALL;
    f.w[0] = 0xffff_ffff << 32;
    f.w[16] = 0xffff;
    f.w[19] = 0xffff_ffff << 32;
    f.w[24] = 0xff;
    f.w[29] = u64::from(m + 1) << 32;
    f
}

struct Keys {
    keys: Vec<FlowKey>,
    maps: Vec<WordMap>,
    hashes: Vec<u32>,
}

fn keys(port: u32, n: u64) -> Keys {
    // Visit the flows in a scrambled order (a multiplicative permutation).
    let keys: Vec<FlowKey> = (0..n)
        .map(|i| {
            pkt(
                port,
                (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7) % n.max(1),
            )
        })
        .collect();
    let maps: Vec<WordMap> = keys.iter().map(FlowKey::map).collect();
    let hashes = keys
        .iter()
        .zip(&maps)
        .map(|(k, m)| hash_key(k, *m, 0))
        .collect();
    Keys { keys, maps, hashes }
}

fn flow_for(ufid: u128, k: &FlowKey, m: &FlowMask) -> Arc<DpFlow> {
    Arc::new(DpFlow::new(Ufid(ufid), k, m, 0))
}

fn main() {
    report();
    divan::main();
}

/// Statistics and memory, printed once.
fn report() {
    for n in [1u64, 1000, 10_000, 100_000] {
        let (mut emc, k) = emc_setup(n);
        let hits = (0..k.keys.len())
            .filter(|&i| emc.lookup(&k.keys[i], k.maps[i], k.hashes[i]).is_some())
            .count();
        println!("emc {n} flows: hit rate {:.3}", hits as f64 / n as f64);
    }
    for (name, cls, port_of) in seed000_setups() {
        let snap = cls.snapshot();
        let mut st = datapath::LookupStats::default();
        for (port, k) in port_of.iter() {
            for c in k.chunks(BATCH) {
                let mut out = [None; BATCH];
                st.add(snap.lookup_batch(*port, c, &mut out[..c.len()]));
            }
        }
        println!(
            "seed000 {name}: {} subtables, avg subtable lookups per hit {:.2}",
            snap.ports.iter().map(|p| p.subtables.len()).sum::<usize>(),
            st.lookups_per_hit()
        );
    }
    let (cls, k) = dpcls_setup(10, 10_000, false);
    let snap = cls.snapshot();
    let mut st = datapath::LookupStats::default();
    for c in k.keys.chunks(BATCH) {
        let mut out = [None; BATCH];
        st.add(snap.lookup_batch(1, c, &mut out[..c.len()]));
    }
    println!(
        "dpcls 10 subtables uniform: avg subtable lookups per hit {:.2}",
        st.lookups_per_hit()
    );
    let mem = cls.memory();
    println!(
        "memory: per megaflow {:.0} B (DpFlow+Arc {} B, {} flows in {} subtables); EMC entry {} B \
         ({} KiB total); SMC entry {} B (4 MiB total)",
        mem.per_flow(),
        mem.flow_bytes,
        mem.flows,
        snap.ports.iter().map(|p| p.subtables.len()).sum::<usize>(),
        Emc::ENTRY_BYTES,
        Emc::ENTRY_BYTES * datapath::emc::EMC_ENTRIES / 1024,
        Smc::ENTRY_BYTES,
    );
}

fn emc_setup(n: u64) -> (Emc, Keys) {
    let k = keys(1, n);
    let mut emc = Emc::new(1);
    let m = mf_mask(16);
    for i in 0..k.keys.len() {
        let f = flow_for(i as u128, &k.keys[i], &m);
        emc.insert(&k.keys[i], k.maps[i], k.hashes[i], &f);
    }
    (emc, k)
}

/// EMC lookups of `n` distinct flows cycled (beyond 8192 flows most lookups miss: that is
/// the scaling being measured).
#[divan::bench(args = [1, 1000, 10_000, 100_000])]
fn emc_lookup(b: Bencher<'_, '_>, n: u64) {
    let (mut emc, k) = emc_setup(n);
    let mut pos = 0usize;
    b.counter(ItemsCount::new(BATCH)).bench_local(|| {
        let mut hits = 0u32;
        for _ in 0..BATCH {
            let i = pos;
            pos = if pos + 1 == k.keys.len() { 0 } else { pos + 1 };
            hits += u32::from(emc.lookup(&k.keys[i], k.maps[i], k.hashes[i]).is_some());
        }
        black_box(hits)
    });
}

/// SMC hits (verified) over 10k flows.
#[divan::bench]
fn smc_hit(b: Bencher<'_, '_>) {
    let (cls, k) = dpcls_setup(1, 10_000, false);
    let snap = cls.snapshot();
    let mut smc = Smc::new();
    for i in 0..k.keys.len() {
        let mut out = [None];
        snap.lookup_batch(1, std::slice::from_ref(&k.keys[i]), &mut out);
        let Some(f) = out[0] else { continue };
        // Index: find it in the arena (benchmark setup only).
        let idx = (0..snap.arena.used() as u32)
            .find(|&j| snap.arena.get(j).is_some_and(|g| Arc::ptr_eq(g, f)));
        if let Some(idx) = idx {
            smc.insert(k.hashes[i], idx);
        }
    }
    let mut pos = 0usize;
    b.counter(ItemsCount::new(BATCH)).bench_local(|| {
        let mut hits = 0u32;
        for _ in 0..BATCH {
            let i = pos;
            pos = if pos + 1 == k.keys.len() { 0 } else { pos + 1 };
            hits += u32::from(smc.lookup(&snap.arena, &k.keys[i], k.hashes[i]).is_some());
        }
        black_box(hits)
    });
}

/// A classifier for port 1 with `subtables` masks, `flows` packet flows spread uniformly over
/// the masks (flow i's megaflow lives in subtable i % subtables).
fn dpcls_setup(subtables: u32, flows: u64, rank: bool) -> (Dpcls, Keys) {
    let cls = Dpcls::new(DpclsConfig::default());
    let k = keys(1, flows);
    let mut u = 0u128;
    for (i, key) in k.keys.iter().enumerate() {
        let m = mf_mask(i as u32 % subtables);
        u += 1;
        let f = DpFlow::new(Ufid(u), key, &m, 0);
        // Flows of different masks may overlap (prefixes); keep the first (they are all
        // megaflows of the same "route" then): skip if the key already hits.
        let snap = cls.snapshot();
        let mut out = [None];
        snap.lookup_batch(1, std::slice::from_ref(key), &mut out);
        if out[0].is_none() {
            let _ = cls.insert(f);
        }
    }
    if rank {
        cls.rank_now();
    }
    (cls, k)
}

fn bench_batches(b: Bencher<'_, '_>, snap: &Snapshot, port: u32, k: &[FlowKey], imp: Impl) {
    let mut pos = 0usize;
    let chunks: Vec<&[FlowKey]> = k.chunks_exact(BATCH).collect();
    b.counter(ItemsCount::new(BATCH)).bench_local(|| {
        let c = chunks[pos];
        pos = if pos + 1 == chunks.len() { 0 } else { pos + 1 };
        let mut out = [None; BATCH];
        let s = snap.lookup_batch_with(port, c, &mut out, imp, None);
        black_box(s)
    });
}

/// dpcls batch lookup, all hits: 1 subtable vs 10 subtables hit uniformly (10k flows).
#[divan::bench(args = [1, 10])]
fn dpcls_hit(b: Bencher<'_, '_>, subtables: u32) {
    let (cls, k) = dpcls_setup(subtables, 10_000, true);
    let snap = cls.snapshot();
    bench_batches(b, &snap, 1, &k.keys, Impl::Auto);
}

/// Same, 1 subtable, generic lookup (no const-generic specialisation).
#[divan::bench]
fn dpcls_hit_generic_1(b: Bencher<'_, '_>) {
    let (cls, k) = dpcls_setup(1, 10_000, true);
    let snap = cls.snapshot();
    bench_batches(b, &snap, 1, &k.keys, Impl::Generic);
}

/// Seed 000: ports 1 and 2; each port's traffic (1024 flows) hits one "hot" mask of its own;
/// 6 more "ping"/control masks (3 per port) hold a flow each. Creation order: 3 ping, the 2
/// hot, 3 ping, so the shared unranked classifier finds the hot ones at positions 4 and 5 of
/// 8 (≈ N/2). Returns (name, classifier, per-port keys).
#[allow(clippy::type_complexity)]
fn seed000_setups() -> Vec<(&'static str, Dpcls, Vec<(u32, Vec<FlowKey>)>)> {
    let mut v = Vec::new();
    for (name, per_port, ranking) in [
        ("shared unranked", false, false),
        ("per-port ranked", true, true),
    ] {
        let cls = Dpcls::new(DpclsConfig {
            per_port,
            ranking,
            // Ranking alone, as seed 000 measures it (the prefilter would hide it).
            prefilter: false,
            ..DpclsConfig::default()
        });
        let mut u = 0u128;
        let ping = |u: u128, port: u32, m: u32| {
            let mut key = pkt(port, 0);
            key.w[19] = 0x0c00_0000_0000_0000 | u64::from(port) << 40;
            DpFlow::new(Ufid(u), &key, &mf_mask(m), 0)
        };
        // Creation order: 3 ping/control subtables, the two hot ones, 3 more ping ones.
        for (port, m) in [(1u32, 20), (2, 21), (1, 22)] {
            u += 1;
            let _ = cls.insert(ping(u, port, m));
        }
        let mut per = Vec::new();
        for (port, m) in [(1u32, 0), (2, 1)] {
            let k = keys(port, 1024);
            for key in &k.keys {
                u += 1;
                let snap = cls.snapshot();
                let mut out = [None];
                snap.lookup_batch(port, std::slice::from_ref(key), &mut out);
                if out[0].is_none() {
                    let _ = cls.insert(DpFlow::new(Ufid(u), key, &mf_mask(m), 0));
                }
            }
            per.push((port, k.keys));
        }
        for (port, m) in [(2u32, 23), (1, 24), (2, 25)] {
            u += 1;
            let _ = cls.insert(ping(u, port, m));
        }
        // One interval of traffic, then rank (a no-op for the unranked one).
        let snap = cls.snapshot();
        for (port, k) in &per {
            for c in k.chunks(BATCH) {
                let mut out = [None; BATCH];
                snap.lookup_batch(*port, c, &mut out[..c.len()]);
            }
        }
        cls.rank(u64::MAX);
        v.push((name, cls, per));
    }
    v
}

/// Seed 000: ns per packet, traffic alternating between the two ports by batch.
#[divan::bench(args = ["shared unranked", "per-port ranked"])]
fn seed000(b: Bencher<'_, '_>, which: &str) {
    let setups = seed000_setups();
    let Some((_, cls, per)) = setups.into_iter().find(|s| s.0 == which) else {
        return;
    };
    let snap = cls.snapshot();
    let batches: Vec<(u32, &[FlowKey])> = per[0]
        .1
        .chunks_exact(BATCH)
        .zip(per[1].1.chunks_exact(BATCH))
        .flat_map(|(a, c)| [(per[0].0, a), (per[1].0, c)])
        .collect();
    let mut pos = 0usize;
    b.counter(ItemsCount::new(BATCH)).bench_local(|| {
        let (port, c) = batches[pos];
        pos = if pos + 1 == batches.len() { 0 } else { pos + 1 };
        let mut out = [None; BATCH];
        black_box(snap.lookup_batch(port, c, &mut out))
    });
}
