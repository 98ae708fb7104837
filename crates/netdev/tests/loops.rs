//! Port loops as a datapath runs them: no buffer leaks, bursts of every size, counters that
//! partition what was offered.

use netdev::{
    BATCH_MAX, Batch, FrameSize, GeneratorConfig, GeneratorPort, MAX_FRAME, MemPort, NullPort,
    PacketPool, Port, ProtocolMix, ReplayPort,
};

#[test]
fn replay_to_null_loops_do_not_leak() {
    let frames: Vec<Vec<u8>> = (0..33).map(|i| vec![i as u8; 60 + i]).collect();
    let mut replay = ReplayPort::new("r", &frames);
    let mut null = NullPort::new("n");
    let mut pool = PacketPool::new(BATCH_MAX);
    let mut b = Batch::new();
    for _ in 0..10_000 {
        assert_eq!(replay.rx_burst(&mut pool, &mut b), BATCH_MAX);
        assert_eq!(pool.available(), 0);
        null.tx_burst(&mut b, &mut pool);
        assert_eq!(pool.available(), BATCH_MAX);
    }
    let s = pool.stats();
    assert_eq!(s.outstanding, 0);
    assert_eq!(s.allocs, 320_000);
    assert_eq!(s.frees, 320_000);
    assert_eq!(s.alloc_failures, 0);
    assert_eq!(replay.stats().rx_packets, null.stats().tx_packets);
    assert_eq!(replay.stats().rx_bytes, null.stats().tx_bytes);
}

#[test]
fn bursts_of_every_size() {
    // Pre-occupy k slots so rx gets a burst of 32 - k, for every k in 0..=32, from each kind.
    let cfg = GeneratorConfig {
        flows: 5,
        mix: ProtocolMix::mixed(),
        frame_size: FrameSize::Fixed(64),
        ..GeneratorConfig::default()
    };
    let mut ports: Vec<Box<dyn Port>> = vec![
        Box::new(ReplayPort::new("r", [vec![1u8; 60], vec![2u8; 70]])),
        Box::new(GeneratorPort::new("g", cfg).unwrap()),
    ];
    let mem = MemPort::new("m");
    let h = mem.handle();
    for i in 0..2000u32 {
        h.inject(vec![i as u8; 60]);
    }
    ports.push(Box::new(mem));
    let mut pool = PacketPool::new(2 * BATCH_MAX);
    let mut null = NullPort::new("n");
    for port in &mut ports {
        for k in 0..=BATCH_MAX {
            let mut b = Batch::new();
            for _ in 0..k {
                b.push(pool.alloc().unwrap()).unwrap();
            }
            let got = port.rx_burst(&mut pool, &mut b);
            assert_eq!(got, BATCH_MAX - k, "{} k={k}", port.name());
            assert_eq!(b.len(), BATCH_MAX);
            match b.push(pool.alloc().unwrap()) {
                Ok(()) => panic!("a full batch must refuse"),
                Err(p) => pool.free(p),
            }
            assert_eq!(null.tx_burst(&mut b, &mut pool), BATCH_MAX);
            assert!(b.is_empty());
        }
        assert_eq!(pool.available(), 2 * BATCH_MAX);
        assert_eq!(pool.outstanding(), 0);
        assert!(port.stats().is_consistent());
    }
}

#[test]
fn oversize_and_nobuf_partition_offered_frames() {
    let frames = vec![vec![0u8; 60], vec![0u8; MAX_FRAME + 1], vec![0u8; 1514]];
    let mut replay = ReplayPort::new("r", &frames).with_limit(3000);
    let mut pool = PacketPool::new(40); // less than two bursts: forces nobuf drops
    let mut held = Vec::new();
    let mut null = NullPort::new("n");
    let mut b = Batch::new();
    let mut i = 0;
    let mut held_total = 0u64;
    while !replay.rx_eof() {
        replay.rx_burst(&mut pool, &mut b);
        // hold on to some packets every other iteration so the pool runs dry
        if i % 2 == 0 {
            held.extend(b.drain());
        } else {
            null.tx_burst(&mut b, &mut pool);
            for p in held.drain(..) {
                held_total += 1;
                pool.free(p);
            }
        }
        i += 1;
    }
    null.tx_burst(&mut b, &mut pool);
    for p in held.drain(..) {
        held_total += 1;
        pool.free(p);
    }
    let s = replay.stats();
    assert!(s.is_consistent());
    assert_eq!(s.rx_packets + s.rx_dropped, 3000);
    // the oversize check comes before the buffer allocation: every 2nd frame of 3 counts
    assert_eq!(s.rx_too_large, 1000);
    assert!(s.rx_nobuf > 0);
    assert_eq!(null.stats().tx_packets + held_total, s.rx_packets);
    assert_eq!(pool.available(), 40);
}
