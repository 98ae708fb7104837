//! In-memory replay: a port that loops over a fixed set of frames forever.
//!
//! This is DPDK's pcap PMD with `infinite_rx=1`: the frames are loaded into memory once
//! ([`FrameSet`], one contiguous arena), and every rx copies the next frames into packet
//! buffers taken from the pool — the memcpy stands in for the NIC's DMA, so the datapath pays
//! what it would pay with a real NIC driver, and nothing is allocated per packet.
//!
//! Order is the load order, wrapping to the first frame after the last; each wrap is counted
//! in `rx_wraps`. [`ReplayPort::with_limit`] stops after `n` frames have been taken from the
//! set in total (delivered *or* dropped, so `rx_packets + rx_dropped == n` at the end), after
//! which the port reports EOF. Frames larger than [`MAX_FRAME`](crate::MAX_FRAME) are kept in
//! the set and dropped (counted in `rx_too_large`) each time their turn comes, as a NIC drops
//! oversize frames. When the pool is exhausted the frame whose turn it is is dropped
//! (`rx_nobuf`) and the burst ends.
//!
//! Transmitted packets are discarded and counted as sent.
//!
//! A frame of at most [`SMALL_FRAME`] bytes (minimum-size Ethernet and the like) is copied
//! as one fixed-size chunk ([`Packet::set_data_chunk`](crate::Packet::set_data_chunk)), a few
//! vector moves instead of a `memcpy` call; the [`FrameSet`] keeps [`SMALL_FRAME`] zero bytes
//! after its last frame so that every small frame's chunk is inside the arena. What a packet
//! holds is the same either way: exactly the frame's bytes.

use crate::batch::Batch;
use crate::packet::{MAX_FRAME, PacketPool};
use crate::pcap::{read_pcap, sink_tx};
use crate::port::{Port, PortError, PortStats, RxCopy, rx_copy};
use std::path::Path;

/// Frames up to this many bytes are copied into packets as one fixed-size chunk.
pub const SMALL_FRAME: usize = 64;

/// An immutable list of frames stored back to back in one buffer.
///
/// Invariant: unless the set is empty, `bytes` ends with [`SMALL_FRAME`] zero bytes after the
/// last frame, so `bytes[start..start + SMALL_FRAME]` exists for every frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameSet {
    bytes: Vec<u8>,
    /// `(start, len)` of each frame in `bytes`.
    spans: Vec<(usize, usize)>,
    /// Length of the longest frame.
    max_len: usize,
    /// Every frame as a [`SMALL_FRAME`]-byte chunk and its length, while all are that small
    /// (emptied at the first larger one): the replay loop copies from here without a bounds
    /// check per frame.
    small: Vec<([u8; SMALL_FRAME], u16)>,
}

impl FrameSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a copy of `frame`.
    pub fn push(&mut self, frame: &[u8]) {
        let start = self.total_bytes();
        self.bytes.truncate(start);
        self.spans.push((start, frame.len()));
        self.bytes.extend_from_slice(frame);
        self.bytes.resize(start + frame.len() + SMALL_FRAME, 0);
        self.max_len = self.max_len.max(frame.len());
        match self.small(start, frame.len()) {
            Some(chunk) if self.small.len() + 1 == self.spans.len() => {
                let chunk = *chunk;
                self.small.push((chunk, frame.len() as u16));
            }
            _ => self.small = Vec::new(),
        }
    }

    /// Length of the longest frame (0 for an empty set).
    #[inline]
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Number of frames.
    #[inline]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True if there is no frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Frame `i`, if it exists.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let &(start, len) = self.spans.get(i)?;
        self.bytes.get(start..start + len)
    }

    /// The frames in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.spans
            .iter()
            .map(|&(start, len)| &self.bytes[start..start + len])
    }

    /// Total bytes of all frames.
    pub fn total_bytes(&self) -> usize {
        self.spans.last().map_or(0, |&(start, len)| start + len)
    }

    /// The [`SMALL_FRAME`]-byte chunk starting with the frame at `start`, if its `len` fits.
    #[inline(always)]
    fn small(&self, start: usize, len: usize) -> Option<&[u8; SMALL_FRAME]> {
        if len > SMALL_FRAME {
            return None;
        }
        self.bytes.get(start..)?.first_chunk::<SMALL_FRAME>()
    }
}

impl<F: AsRef<[u8]>> FromIterator<F> for FrameSet {
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> Self {
        let mut s = FrameSet::new();
        for f in iter {
            s.push(f.as_ref());
        }
        s
    }
}

/// A port that replays a [`FrameSet`] in a loop. See the module doc.
#[derive(Debug)]
pub struct ReplayPort {
    name: String,
    frames: FrameSet,
    next: usize,
    taken: u64,
    limit: Option<u64>,
    stats: PortStats,
}

impl ReplayPort {
    /// A replay port over copies of `frames`.
    pub fn new<F: AsRef<[u8]>>(
        name: impl Into<String>,
        frames: impl IntoIterator<Item = F>,
    ) -> Self {
        Self::from_frame_set(name, frames.into_iter().collect())
    }

    /// A replay port over a frame set.
    pub fn from_frame_set(name: impl Into<String>, frames: FrameSet) -> Self {
        ReplayPort {
            name: name.into(),
            frames,
            next: 0,
            taken: 0,
            limit: None,
            stats: PortStats::default(),
        }
    }

    /// A replay port over the frames of a pcap file (read fully at creation).
    pub fn from_pcap(name: impl Into<String>, path: impl AsRef<Path>) -> Result<Self, PortError> {
        Ok(Self::new(name, read_pcap(path)?))
    }

    /// Stops after `n` frames in total (then EOF).
    pub fn with_limit(mut self, n: u64) -> Self {
        self.limit = Some(n);
        self
    }

    /// The frames being replayed.
    pub fn frames(&self) -> &FrameSet {
        &self.frames
    }

    /// Frames taken from the set so far (delivered or dropped).
    pub fn taken(&self) -> u64 {
        self.taken
    }
}

impl Port for ReplayPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        if self.frames.max_len() <= MAX_FRAME {
            self.rx_burst_bulk(pool, batch)
        } else {
            self.rx_burst_each(pool, batch)
        }
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        sink_tx(batch, pool, &mut self.stats)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn rx_eof(&self) -> bool {
        self.frames.is_empty() || self.limit.is_some_and(|l| self.taken >= l)
    }
}

impl ReplayPort {
    /// How many frames the next burst may take: the batch's room, within the limit.
    #[inline]
    fn burst_want(&self, batch: &Batch) -> u64 {
        let want = batch.room() as u64;
        match self.limit {
            Some(limit) => want.min(limit.saturating_sub(self.taken)),
            None => want,
        }
    }

    /// `rx_burst` when every frame fits a packet: the buffers come off the pool in one block
    /// ([`PacketPool::alloc_into`]) and each is filled in place, with no per-frame pool or
    /// batch bookkeeping (the hot path of `bench datapath`). Same packets, counters and
    /// position as [`ReplayPort::rx_burst_each`] (tested as twins).
    fn rx_burst_bulk(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let count = self.frames.len();
        if count == 0 {
            return 0;
        }
        let want = self.burst_want(batch) as usize;
        let (mut next, mut stats) = (self.next, self.stats);
        let frames = &self.frames;
        let got = pool.alloc_into(want, batch);
        let mut bytes = 0u64;
        if frames.small.len() == count {
            // All frames small: copy run by run up to the next wrap, zipping the packets with
            // the frames (no per-frame wrap or bounds check).
            let mut pkts = got.iter_mut();
            let mut left = pkts.len();
            while left > 0 {
                next = wrap(next, count, &mut stats);
                let run = left.min(count - next);
                let src = frames.small.get(next..next + run).unwrap_or_default();
                // The frames first: `zip` stops at the end of the run without taking a packet.
                for ((chunk, len), p) in src.iter().zip(pkts.by_ref()) {
                    // `len <= SMALL_FRAME <= MAX_FRAME`: the copy cannot fail.
                    let _ = p.set_data_chunk(chunk, usize::from(*len));
                    bytes += u64::from(*len);
                }
                next += run;
                left -= run;
            }
        } else {
            for p in got.iter_mut() {
                next = wrap(next, count, &mut stats);
                let (start, len) = frames.spans.get(next).copied().unwrap_or_default();
                next += 1;
                // Every frame fits (`max_len <= MAX_FRAME`), so both copies succeed; a packet
                // left empty otherwise would be dropped as a runt by the datapath, not lost.
                let _ = match frames.small(start, len) {
                    Some(chunk) => p.set_data_chunk(chunk, len),
                    None => p.set_data(frames.bytes.get(start..start + len).unwrap_or_default()),
                };
                bytes += p.len() as u64;
            }
        }
        let got = got.len();
        stats.rx_packets += got as u64;
        stats.rx_bytes += bytes;
        let mut taken = self.taken + got as u64;
        if got < want {
            // The pool ran dry: like `rx_copy`, the frame whose buffer was missing is dropped.
            next = wrap(next, count, &mut stats);
            next += 1;
            taken += 1;
            stats.rx_nobuf += 1;
            stats.rx_dropped += 1;
        }
        self.next = next;
        self.taken = taken;
        self.stats = stats;
        got
    }

    /// `rx_burst` frame by frame (any frame set: oversize frames are counted drops).
    fn rx_burst_each(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let count = self.frames.len();
        if count == 0 {
            return 0;
        }
        let want = self.burst_want(batch);
        // The position and counters live in locals for the burst (registers, not stores to
        // `self` per frame) and are written back once.
        let (mut next, mut taken, mut stats) = (self.next, self.taken, self.stats);
        let mut n = 0;
        for _ in 0..want {
            next = wrap(next, count, &mut stats);
            // `next < count == spans.len()`: always found.
            let Some(&(start, len)) = self.frames.spans.get(next) else {
                break;
            };
            next += 1;
            taken += 1;
            let got = match self.frames.small(start, len) {
                Some(chunk) => rx_copy_small(chunk, len, pool, batch, &mut stats),
                None => match self.frames.bytes.get(start..start + len) {
                    Some(frame) => rx_copy(frame, pool, batch, &mut stats),
                    None => break, // spans lie inside `bytes`: unreachable
                },
            };
            match got {
                RxCopy::Delivered => n += 1,
                RxCopy::TooLarge => {}
                RxCopy::NoBuf => break,
            }
        }
        self.next = next;
        self.taken = taken;
        self.stats = stats;
        n
    }
}

/// The position `next` in a list of `count` frames, back at 0 past the end (a wrap, counted).
#[inline(always)]
fn wrap(next: usize, count: usize, stats: &mut PortStats) -> usize {
    if next >= count {
        stats.rx_wraps += 1;
        0
    } else {
        next
    }
}

/// [`rx_copy`] of the frame `chunk[..len]` (`len <= SMALL_FRAME`), copied as a whole chunk;
/// the same outcomes and counters.
#[inline(always)]
fn rx_copy_small(
    chunk: &[u8; SMALL_FRAME],
    len: usize,
    pool: &mut PacketPool,
    batch: &mut Batch,
    stats: &mut PortStats,
) -> RxCopy {
    let Some(mut p) = pool.alloc() else {
        stats.rx_nobuf += 1;
        stats.rx_dropped += 1;
        return RxCopy::NoBuf;
    };
    if p.set_data_chunk(chunk, len).is_err() {
        // Unreachable: `len <= SMALL_FRAME <= MAX_FRAME`; count it rather than panic.
        pool.free(p);
        stats.rx_too_large += 1;
        stats.rx_dropped += 1;
        return RxCopy::TooLarge;
    }
    stats.count_rx(len);
    if let Err(p) = batch.push(p) {
        // The caller broke its promise of room; undo rather than overfill.
        stats.rx_packets -= 1;
        stats.rx_bytes -= len as u64;
        stats.rx_nobuf += 1;
        stats.rx_dropped += 1;
        pool.free(p);
        return RxCopy::NoBuf;
    }
    RxCopy::Delivered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::MAX_FRAME;
    use crate::{BATCH_MAX, NullPort};
    use proptest::prelude::*;

    fn frames(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                (0..60 + i * 13)
                    .map(|j| (i * 31 + j) as u8)
                    .collect::<Vec<u8>>()
            })
            .collect()
    }

    #[test]
    fn frame_set_basics() {
        let fs = frames(5);
        let set: FrameSet = fs.iter().collect();
        assert_eq!(set.len(), 5);
        assert_eq!(set.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), fs);
        assert_eq!(set.get(4), Some(&fs[4][..]));
        assert_eq!(set.get(5), None);
        assert_eq!(set.total_bytes(), fs.iter().map(Vec::len).sum::<usize>());
    }

    #[test]
    fn wraps_and_delivers_exact_bytes() {
        let fs = frames(5);
        let mut port = ReplayPort::new("r", &fs);
        let mut pool = PacketPool::new(64);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 32);
        for (i, p) in b.iter().enumerate() {
            assert_eq!(p.data(), &fs[i % 5][..], "packet {i}");
        }
        // 32 frames of 5: 6 full passes started after the first one, the 7th in progress
        assert_eq!(port.stats().rx_wraps, 6);
        assert!(!port.rx_eof());
        b.free_all(&mut pool);
        assert_eq!(pool.available(), 64);
    }

    #[test]
    fn limit_stops_exactly() {
        let fs = frames(3);
        let mut port = ReplayPort::new("r", &fs).with_limit(70);
        let mut pool = PacketPool::new(32);
        let mut b = Batch::new();
        let mut null = NullPort::new("n");
        let mut total = 0;
        while !port.rx_eof() {
            total += port.rx_burst(&mut pool, &mut b);
            null.tx_burst(&mut b, &mut pool);
        }
        assert_eq!(total, 70);
        assert_eq!(port.rx_burst(&mut pool, &mut b), 0);
        let s = port.stats();
        assert_eq!(s.rx_packets, 70);
        assert_eq!(s.rx_wraps, 23); // 70 frames = 23 full passes + 1, so 23 wraps
        assert_eq!(
            s.rx_bytes,
            (0..70).map(|i| fs[i % 3].len() as u64).sum::<u64>()
        );
        assert_eq!(null.stats().tx_packets, 70);
        assert_eq!(pool.available(), 32);
        assert_eq!(pool.outstanding(), 0);
    }

    #[test]
    fn empty_set_is_eof_and_never_spins() {
        let mut port = ReplayPort::new::<Vec<u8>>("e", vec![]);
        let mut pool = PacketPool::new(4);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 0);
        assert!(port.rx_eof());
    }

    #[test]
    fn oversize_frames_are_drops() {
        let fs = vec![vec![1u8; 64], vec![2u8; MAX_FRAME + 1], vec![3u8; 64]];
        let mut port = ReplayPort::new("r", &fs).with_limit(9);
        let mut pool = PacketPool::new(32);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 6);
        let s = port.stats();
        assert_eq!((s.rx_packets, s.rx_too_large, s.rx_dropped), (6, 3, 3));
        assert!(s.is_consistent());
        assert!(port.rx_eof());
        assert!(b.iter().all(|p| p.len() == 64));
        b.free_all(&mut pool);
    }

    #[test]
    fn pool_exhaustion_is_counted() {
        let fs = frames(4);
        let mut port = ReplayPort::new("r", &fs);
        let mut pool = PacketPool::new(10);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 10);
        let s = port.stats();
        assert_eq!((s.rx_packets, s.rx_nobuf, s.rx_dropped), (10, 1, 1));
        // the dropped frame was frame 10 % 4; the next burst resumes after it
        b.free_all(&mut pool);
        let mut b2 = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b2), 10);
        assert_eq!(b2.as_slice()[0].data(), &fs[11 % 4][..]);
        b2.free_all(&mut pool);
        assert_eq!(pool.available(), 10);
    }

    #[test]
    fn frame_set_padding_is_invisible() {
        // Small and large frames, including empty ones: the set's view is the frames alone.
        let fs: Vec<Vec<u8>> = [0usize, 1, 63, 64, 65, 200, 0, 60]
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![i as u8 + 1; n])
            .collect();
        let set: FrameSet = fs.iter().collect();
        assert_eq!(set.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), fs);
        assert_eq!(set.total_bytes(), fs.iter().map(Vec::len).sum::<usize>());
        let again: FrameSet = fs.iter().collect();
        assert_eq!(set, again);
        for (i, f) in fs.iter().enumerate() {
            let (start, len) = set.spans[i];
            assert_eq!(
                set.small(start, len).is_some(),
                f.len() <= SMALL_FRAME,
                "frame {i}"
            );
        }
    }

    proptest! {
        /// Frames of random lengths around the small-copy bound (0..=130 bytes, random
        /// content) are delivered byte for byte, with exact lengths and byte counters, into
        /// packets reused from the pool (stale bytes behind the frames must not leak in).
        #[test]
        fn small_and_large_frames_exact(
            fs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..=130), 1..10),
            bursts in 1usize..6,
        ) {
            let mut port = ReplayPort::new("r", &fs);
            let mut pool = PacketPool::new(BATCH_MAX);
            let mut got: Vec<Vec<u8>> = Vec::new();
            for _ in 0..bursts {
                let mut b = Batch::new();
                port.rx_burst(&mut pool, &mut b);
                got.extend(b.iter().map(|p| p.data().to_vec()));
                b.free_all(&mut pool);
            }
            let want: Vec<Vec<u8>> = fs.iter().cycle().take(bursts * BATCH_MAX).cloned().collect();
            prop_assert_eq!(&got, &want);
            let s = port.stats();
            prop_assert_eq!(s.rx_packets, want.len() as u64);
            prop_assert_eq!(s.rx_bytes, want.iter().map(|f| f.len() as u64).sum::<u64>());
            prop_assert_eq!(pool.available(), BATCH_MAX);
        }

        /// Any sequence of burst sizes 0..=32 delivers exactly `frames.cycle()`, and the
        /// batch never exceeds BATCH_MAX. Model: the infinite cycle of the frame list.
        #[test]
        fn replay_matches_cycle_model(
            n in 1usize..12,
            prefill in proptest::collection::vec(0usize..=BATCH_MAX, 1..30),
            limit in proptest::option::of(0u64..400),
        ) {
            let fs = frames(n);
            let mut port = ReplayPort::new("r", &fs);
            if let Some(l) = limit { port = port.with_limit(l); }
            let mut pool = PacketPool::new(2 * BATCH_MAX);
            let mut got: Vec<Vec<u8>> = Vec::new();
            for pre in prefill {
                let mut b = Batch::new();
                // occupy `pre` slots so the burst size is 32 - pre, anywhere in 0..=32
                for _ in 0..pre { b.push(pool.alloc().unwrap()).unwrap(); }
                let room = b.room();
                let k = port.rx_burst(&mut pool, &mut b);
                prop_assert!(k <= room);
                prop_assert!(b.len() <= BATCH_MAX);
                prop_assert_eq!(b.len(), pre + k);
                got.extend(b.iter().skip(pre).map(|p| p.data().to_vec()));
                b.free_all(&mut pool);
            }
            let want: Vec<Vec<u8>> = fs.iter().cycle().take(got.len()).cloned().collect();
            prop_assert_eq!(&got, &want);
            if let Some(l) = limit { prop_assert!(got.len() as u64 <= l); }
            let s = port.stats();
            prop_assert_eq!(s.rx_packets, got.len() as u64);
            prop_assert_eq!(s.rx_wraps, (got.len().saturating_sub(1) / n) as u64);
            prop_assert_eq!(pool.available(), 2 * BATCH_MAX);
        }

        /// Twins: the bulk burst (buffers taken in one block) and the frame-by-frame burst
        /// leave the same packets in the batch (same bytes, in order), the same port
        /// position, port counters and pool counters, through pool
        /// exhaustion (small pools, packets held across bursts), limits and partly full
        /// batches, with frames on both sides of the small-copy bound.
        #[test]
        fn bulk_burst_equals_frame_by_frame(
            fs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..=130), 1..8),
            pool_cap in 0usize..80,
            limit in proptest::option::of(0u64..300),
            steps in proptest::collection::vec((0usize..=BATCH_MAX, any::<bool>()), 1..25),
        ) {
            let mk = || {
                let p = ReplayPort::new("r", &fs);
                match limit { Some(l) => p.with_limit(l), None => p }
            };
            let (mut a, mut b) = (mk(), mk());
            let (mut pa, mut pb) = (PacketPool::new(pool_cap), PacketPool::new(pool_cap));
            let (mut held_a, mut held_b) = (Batch::new(), Batch::new());
            for (pre, keep) in steps {
                let (mut ba, mut bb) = (Batch::new(), Batch::new());
                for _ in 0..pre {
                    if let (Some(x), Some(y)) = (pa.alloc(), pb.alloc()) {
                        ba.push(x).unwrap();
                        bb.push(y).unwrap();
                    }
                }
                let ka = a.rx_burst_bulk(&mut pa, &mut ba);
                let kb = b.rx_burst_each(&mut pb, &mut bb);
                prop_assert_eq!(ka, kb);
                let bytes = |x: &Batch| x.iter().map(|p| p.data().to_vec()).collect::<Vec<_>>();
                prop_assert_eq!(bytes(&ba), bytes(&bb));
                prop_assert_eq!((a.next, a.taken, a.stats()), (b.next, b.taken, b.stats()));
                prop_assert_eq!(pa.stats(), pb.stats());
                // Hold some packets across bursts so that the pools run dry.
                if keep && held_a.room() >= ba.len() {
                    for (x, y) in ba.drain().zip(bb.drain()) {
                        held_a.push(x).unwrap();
                        held_b.push(y).unwrap();
                    }
                } else {
                    ba.free_all(&mut pa);
                    bb.free_all(&mut pb);
                }
            }
            held_a.free_all(&mut pa);
            held_b.free_all(&mut pb);
            prop_assert_eq!(pa.stats(), pb.stats());
        }
    }

    #[test]
    fn alloc_into_equals_alloc_loop() {
        // Twin of `alloc_into`: the `alloc` loop that stops at the first `None`, for pools
        // smaller and larger than the request and batches with little room.
        for (cap, n, pre) in [
            (0usize, 5usize, 0usize),
            (3, 5, 0),
            (40, 32, 0),
            (40, 32, 30),
            (8, 0, 0),
        ] {
            let (mut a, mut b) = (PacketPool::new(cap), PacketPool::new(cap));
            let (mut ba, mut bb) = (Batch::new(), Batch::new());
            for _ in 0..pre.min(cap) {
                ba.push(a.alloc().unwrap()).unwrap();
                bb.push(b.alloc().unwrap()).unwrap();
            }
            let mut seen = 0;
            let tail = a.alloc_into(n, &mut ba);
            for p in tail.iter_mut() {
                seen += 1;
                p.set_data(&[seen as u8; 20]).unwrap();
            }
            let ka = tail.len();
            let mut kb = 0;
            for _ in 0..n.min(bb.room()) {
                let Some(mut p) = b.alloc() else { break };
                kb += 1;
                p.set_data(&[kb as u8; 20]).unwrap();
                bb.push(p).unwrap();
            }
            assert_eq!(ka, kb, "cap {cap} n {n} pre {pre}");
            assert_eq!(seen, ka);
            assert_eq!(a.stats(), b.stats(), "cap {cap} n {n} pre {pre}");
            let bytes = |x: &Batch| x.iter().map(|p| p.data().to_vec()).collect::<Vec<_>>();
            assert_eq!(bytes(&ba), bytes(&bb));
        }
    }
}
