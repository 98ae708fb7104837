//! Extract + hash cost per packet, for 64-byte UDP and TCP IPv4 frames and a VLAN-tagged
//! IPv6/UDP frame (70 bytes, the shortest such frame), one at a time and in bursts of 32.
//!
//! Run: `cargo bench -p flow --bench extract`. ns/packet for a burst = burst time / 32 (divan
//! also prints it as item throughput).

use divan::{Bencher, black_box, counter::ItemsCount};
use flow::extract::{MAX_BATCH, PacketMeta, extract, extract_hash_batch};
use flow::hash::hash_key;
use flow::{FlowKey, WordMap};

fn main() {
    // The frames must parse down to the ports, or we would time a short path.
    for s in SHAPES {
        let p = frame(s, 3);
        let mut k = FlowKey::ZERO;
        let m = extract(&p, &PacketMeta::port(1), &mut k);
        assert!(m.contains(29), "{s:?}: transport ports not parsed");
        assert!(
            matches!(s, Shape::VlanUdp6) || p.len() == 64,
            "{s:?}: not 64 bytes"
        );
    }
    // `EXTRACT_PROFILE=udp4|tcp4|vlan6 <bench binary>`: run batches of one shape in a plain
    // loop (for callgrind / perf), no divan.
    if let Ok(which) = std::env::var("EXTRACT_PROFILE") {
        let shape = match which.as_str() {
            "tcp4" => Shape::Tcp4,
            "vlan6" => Shape::VlanUdp6,
            _ => Shape::Udp4,
        };
        profile(shape);
        return;
    }
    divan::main();
}

fn profile(shape: Shape) {
    let frames: Vec<Vec<u8>> = (0..MAX_BATCH as u16).map(|i| frame(shape, i)).collect();
    let pkts: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let metas = [PacketMeta::port(1); MAX_BATCH];
    let mut keys = [FlowKey::ZERO; MAX_BATCH];
    let mut maps = [WordMap::EMPTY; MAX_BATCH];
    let mut hashes = [0u32; MAX_BATCH];
    let rounds: u32 = std::env::var("EXTRACT_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100_000);
    // The machine may be shared: report the best group of 16 bursts as well as the mean.
    let mut best = f64::MAX;
    let t0 = std::time::Instant::now();
    for _ in 0..rounds / 16 {
        let t = std::time::Instant::now();
        for _ in 0..16 {
            extract_hash_batch(
                black_box(&pkts),
                black_box(&metas),
                &mut keys,
                &mut maps,
                &mut hashes,
                0,
            );
            black_box(&hashes);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / (16 * MAX_BATCH) as f64);
    }
    let mean = t0.elapsed().as_nanos() as f64 / (f64::from(rounds / 16) * (16 * MAX_BATCH) as f64);
    println!("{shape:?}: best {best:.2} ns/packet, mean {mean:.2} (bursts of {MAX_BATCH})");
}

/// Frame shapes.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Udp4,
    Tcp4,
    VlanUdp6,
}

const SHAPES: [Shape; 3] = [Shape::Udp4, Shape::Tcp4, Shape::VlanUdp6];

/// A frame of `shape`, with flow number `i` in its addresses and ports.
fn frame(shape: Shape, i: u16) -> Vec<u8> {
    let mut p = vec![
        0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    ];
    let port = i.wrapping_mul(7919).wrapping_add(1024).to_be_bytes();
    match shape {
        Shape::Udp4 | Shape::Tcp4 => {
            let tcp = matches!(shape, Shape::Tcp4);
            let l4len: u16 = if tcp { 20 } else { 8 };
            p.extend_from_slice(&[0x08, 0x00, 0x45, 0x00]);
            p.extend_from_slice(&(20 + l4len).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0x40, 0, 64, if tcp { 6 } else { 17 }, 0, 0]);
            p.extend_from_slice(&[10, 0, (i >> 8) as u8, i as u8, 192, 168, 1, 1]);
            p.extend_from_slice(&port);
            p.extend_from_slice(&[0, 80]);
            if tcp {
                p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
            } else {
                p.extend_from_slice(&[0, 8, 0, 0]);
            }
            p.resize(64, 0);
        }
        Shape::VlanUdp6 => {
            p.extend_from_slice(&[0x81, 0x00, 0x00, 0x64, 0x86, 0xdd]);
            p.extend_from_slice(&[0x60, 0x00, 0x00, 0x00, 0x00, 0x08, 17, 64]);
            p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            p.extend_from_slice(&i.to_be_bytes());
            p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            p.extend_from_slice(&port);
            p.extend_from_slice(&[0, 80, 0, 8, 0, 0]);
        }
    }
    p
}

#[divan::bench(args = SHAPES)]
fn single(bencher: Bencher<'_, '_>, shape: Shape) {
    let p = frame(shape, 1);
    let md = PacketMeta::port(1);
    let mut key = FlowKey::ZERO;
    bencher.bench_local(|| {
        let map = extract(black_box(&p), black_box(&md), &mut key);
        black_box(hash_key(&key, map, 0))
    });
}

#[divan::bench(args = SHAPES)]
fn batch32(bencher: Bencher<'_, '_>, shape: Shape) {
    let frames: Vec<Vec<u8>> = (0..MAX_BATCH as u16).map(|i| frame(shape, i)).collect();
    let pkts: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let metas = [PacketMeta::port(1); MAX_BATCH];
    let mut keys = [FlowKey::ZERO; MAX_BATCH];
    let mut maps = [WordMap::EMPTY; MAX_BATCH];
    let mut hashes = [0u32; MAX_BATCH];
    bencher.counter(ItemsCount::new(MAX_BATCH)).bench_local(|| {
        let n = extract_hash_batch(
            black_box(&pkts),
            black_box(&metas),
            &mut keys,
            &mut maps,
            &mut hashes,
            0,
        );
        black_box(&hashes);
        n
    });
}
