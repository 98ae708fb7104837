//! The hot path allocates nothing in steady state: a counting global allocator watches rx/tx
//! loops of every non-test port kind after a warm-up.

use netdev::{
    Batch, FrameSize, GeneratorConfig, GeneratorPort, NullPort, Order, PacketPool, PcapReaderPort,
    PcapWriterPort, Port, ProtocolMix, ReplayPort, write_pcap_to,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator; only counts allocations of
// the current thread in a const-initialised thread-local (which never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Runs `iters` rx→tx bursts from `rx` to `tx` and returns the allocations counted.
fn pump(
    rx: &mut dyn Port,
    tx: &mut dyn Port,
    pool: &mut PacketPool,
    b: &mut Batch,
    iters: usize,
) -> u64 {
    // warm-up
    for _ in 0..4 {
        rx.rx_burst(pool, b);
        tx.tx_burst(b, pool);
    }
    let before = allocs();
    for _ in 0..iters {
        rx.rx_burst(pool, b);
        // touch the packets like a datapath would: push and pop a VLAN tag
        for p in b.iter_mut() {
            if let Some(h) = p.push_front(4) {
                h.fill(0);
            }
            p.pull_front(4);
        }
        tx.tx_burst(b, pool);
    }
    allocs() - before
}

#[test]
fn steady_state_is_allocation_free() {
    // the counter works: an allocation is seen
    let before = allocs();
    std::hint::black_box(vec![1u8; 10]);
    assert!(allocs() > before);

    let mut pool = PacketPool::new(256);
    let mut b = Batch::new();
    let mut null = NullPort::new("null");

    let frames: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; 60 + i * 100]).collect();
    let mut replay = ReplayPort::new("replay", &frames);
    assert_eq!(
        pump(&mut replay, &mut null, &mut pool, &mut b, 1000),
        0,
        "replay -> null"
    );

    for order in [Order::RoundRobin, Order::Random] {
        let cfg = GeneratorConfig {
            flows: 1000,
            mix: ProtocolMix::mixed(),
            frame_size: FrameSize::Imix,
            order,
            ..GeneratorConfig::default()
        };
        let mut g = GeneratorPort::new("gen", cfg).unwrap();
        assert_eq!(
            pump(&mut g, &mut null, &mut pool, &mut b, 1000),
            0,
            "generator {order:?}"
        );
    }

    // pcap reader -> pcap writer (into a sink): records parsed in place and written in place
    let many: Vec<Vec<u8>> = (0..5000)
        .map(|i| vec![(i % 251) as u8; 60 + i % 1400])
        .collect();
    let file = write_pcap_to(Vec::new(), &many).unwrap();
    let mut rd = PcapReaderPort::from_reader("rd", Cursor::new(file), "mem").unwrap();
    let mut wr = PcapWriterPort::from_writer("wr", std::io::sink()).unwrap();
    assert_eq!(
        pump(&mut rd, &mut wr, &mut pool, &mut b, 100),
        0,
        "pcap -> pcap"
    );
    assert_eq!(wr.stats().tx_packets, 104 * 32);

    assert_eq!(pool.available(), 256);
    assert_eq!(pool.outstanding(), 0);
}
