//! Packet buffers and the per-thread pool they come from.
//!
//! # Design
//!
//! A [`Packet`] owns one fixed-size heap buffer of [`BUF_SIZE`] bytes (like a DPDK mbuf with a
//! single segment). The frame bytes live in `buf[off .. off + len]`. A fresh packet starts its
//! data at [`HEADROOM`], so headers can be prepended in place (`push_vlan` is a 4-byte
//! [`Packet::push_front`] plus a 12-byte move of the MAC addresses, never a copy of the frame).
//! The largest frame a packet can hold after a reset is [`MAX_FRAME`] bytes
//! (`BUF_SIZE - HEADROOM`); larger frames are refused with [`PacketError::TooLarge`] and ports
//! count them as drops. Jumbo frames are not supported by this layout.
//!
//! A [`PacketPool`] is a free list of packets, preallocated once with a fixed capacity. It is
//! owned by one PMD thread (it is `Send`, not shared); `alloc` and `free` are a `Vec::pop` and a
//! `Vec::push` into reserved capacity, so the steady state allocates nothing. When the free list
//! is empty `alloc` returns `None` and counts it: the caller records a drop (DPDK's
//! `rx_nombuf`).
//!
//! Whole bursts move without touching their packets (DPDK's mempool cache does bulk get/put
//! for the same reason): the pool also keeps free packets as full vectors of [`BATCH_MAX`]
//! (`full`) and some empty ones (`spare`). [`PacketPool::alloc_into`] of a whole burst into an
//! empty batch swaps a full vector for the batch's empty one, and
//! [`PacketPool::free_batch`] of a full batch swaps it for a spare: one exchange of vector
//! headers per burst instead of a move per packet. Every other case uses the loose free list
//! (breaking a full vector into it when the loose list runs short). Swaps exchange vectors one
//! for one, so the number of vectors the pool holds never changes and its lists never grow.
//!
//! # Invariants
//!
//! * `off + len <= BUF_SIZE` at all times; every method that would break it refuses instead.
//! * A packet taken from [`PacketPool::alloc`] is reset: `off == HEADROOM`, `len == 0`,
//!   `in_port == 0`. Its bytes are stale (not zeroed): callers write
//!   before they read, as with a NIC buffer.
//! * The pool's free list never grows past its capacity, so `free` never reallocates. A packet
//!   freed into a full pool (it came from another pool or from [`Packet::new`]) is deallocated
//!   and counted in [`PoolStats::overflow_frees`]. Packets should go back to the pool of the
//!   thread that allocated them.
//! * `outstanding` counts packets allocated from this pool and not yet freed into it; after a
//!   run in which every packet comes back, `available() == capacity()` (no leak).

use crate::batch::BATCH_MAX;
use thiserror::Error;

/// Size of each packet buffer in bytes.
pub const BUF_SIZE: usize = 2048;
/// Bytes kept free in front of the frame of a reset packet, for prepending headers.
pub const HEADROOM: usize = 128;
/// Largest frame a reset packet can hold.
pub const MAX_FRAME: usize = BUF_SIZE - HEADROOM;

/// Errors from packet buffer operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PacketError {
    /// The requested frame does not fit into the buffer.
    #[error("frame of {len} bytes does not fit the packet buffer (at most {max} bytes)")]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Largest length that would have fit.
        max: usize,
    },
}

/// One packet: a fixed-size buffer, the frame inside it and per-packet metadata.
///
/// 16 bytes, one vector move: packets travel by value between the pool, batches and ports
/// on every packet's path (no port supplies an RSS hash yet, so there is no field for one).
pub struct Packet {
    buf: Box<[u8; BUF_SIZE]>,
    off: u16,
    len: u16,
    /// Datapath port number the packet was received on (stamped by the datapath; ports leave 0).
    pub in_port: u32,
}

impl AsRef<[u8]> for Packet {
    /// The frame bytes ([`Packet::data`]): a batch's packets go to batch extraction as they are.
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.data()
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet")
            .field("off", &self.off)
            .field("len", &self.len)
            .field("in_port", &self.in_port)
            .finish_non_exhaustive()
    }
}

impl Default for Packet {
    fn default() -> Self {
        Self::new()
    }
}

impl Packet {
    /// Allocates a new empty packet outside any pool (setup and tests; the hot path uses
    /// [`PacketPool::alloc`]).
    pub fn new() -> Self {
        // `vec!` of zeros goes through the zeroing allocator and never puts 2 KiB on the stack.
        let buf: Box<[u8; BUF_SIZE]> = match vec![0u8; BUF_SIZE].into_boxed_slice().try_into() {
            Ok(b) => b,
            Err(_) => unreachable!("vec has exactly BUF_SIZE bytes"),
        };
        Packet {
            buf,
            off: HEADROOM as u16,
            len: 0,
            in_port: 0,
        }
    }

    /// Allocates a new packet holding a copy of `frame`.
    pub fn from_slice(frame: &[u8]) -> Result<Self, PacketError> {
        let mut p = Self::new();
        p.set_data(frame)?;
        Ok(p)
    }

    /// Resets the packet to empty with full headroom and cleared metadata.
    #[inline]
    pub fn reset(&mut self) {
        self.off = HEADROOM as u16;
        self.len = 0;
        self.in_port = 0;
    }

    /// The frame bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let off = self.off as usize;
        &self.buf[off..off + self.len as usize]
    }

    /// The frame bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let off = self.off as usize;
        &mut self.buf[off..off + self.len as usize]
    }

    /// Frame length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True if the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Free bytes in front of the frame.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.off as usize
    }

    /// Free bytes behind the frame.
    #[inline]
    pub fn tailroom(&self) -> usize {
        BUF_SIZE - self.off as usize - self.len as usize
    }

    /// Grows the frame by `n` bytes at the front and returns them (their content is stale;
    /// the caller writes them). `None`, with the packet unchanged, if the headroom is short.
    #[inline]
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.off as usize {
            return None;
        }
        self.off -= n as u16;
        self.len += n as u16;
        let off = self.off as usize;
        Some(&mut self.buf[off..off + n])
    }

    /// Removes `n` bytes from the front of the frame and returns them. `None`, with the packet
    /// unchanged, if the frame is shorter than `n`.
    #[inline]
    pub fn pull_front(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.len as usize {
            return None;
        }
        let old = self.off as usize;
        self.off += n as u16;
        self.len -= n as u16;
        Some(&self.buf[old..old + n])
    }

    /// Grows the frame by `n` bytes at the back and returns them (stale content). `None`, with
    /// the packet unchanged, if the tailroom is short.
    #[inline]
    pub fn push_back(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.tailroom() {
            return None;
        }
        let end = self.off as usize + self.len as usize;
        self.len += n as u16;
        Some(&mut self.buf[end..end + n])
    }

    /// Shortens the frame to `len` bytes; no effect if it is already that short.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len as usize {
            self.len = len as u16;
        }
    }

    /// Sets the frame length to `new_len`, zero-filling any added bytes at the back.
    pub fn resize(&mut self, new_len: usize) -> Result<(), PacketError> {
        let max = BUF_SIZE - self.off as usize;
        if new_len > max {
            return Err(PacketError::TooLarge { len: new_len, max });
        }
        let off = self.off as usize;
        let old = self.len as usize;
        if new_len > old {
            self.buf[off + old..off + new_len].fill(0);
        }
        self.len = new_len as u16;
        Ok(())
    }

    /// Replaces the frame with a copy of `frame`, starting at the default headroom.
    /// On error the packet is unchanged.
    #[inline]
    pub fn set_data(&mut self, frame: &[u8]) -> Result<(), PacketError> {
        if frame.len() > MAX_FRAME {
            return Err(PacketError::TooLarge {
                len: frame.len(),
                max: MAX_FRAME,
            });
        }
        self.buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
        self.off = HEADROOM as u16;
        self.len = frame.len() as u16;
        Ok(())
    }

    /// [`Packet::set_data`] of `chunk[..len]` that copies all `N` bytes of `chunk`: a copy of
    /// fixed size, which the compiler inlines as a few vector moves where a copy of a slice
    /// of unknown length calls `memcpy`. The bytes past `len` land in the tailroom, whose
    /// content is stale anyway. `TooLarge` (packet unchanged) if `len > N` or the chunk does
    /// not fit behind the headroom.
    #[inline]
    pub fn set_data_chunk<const N: usize>(
        &mut self,
        chunk: &[u8; N],
        len: usize,
    ) -> Result<(), PacketError> {
        let max = N.min(MAX_FRAME);
        let dst = self.buf[HEADROOM..].first_chunk_mut::<N>();
        match dst {
            Some(dst) if len <= max => {
                *dst = *chunk;
                self.off = HEADROOM as u16;
                self.len = len as u16;
                Ok(())
            }
            _ => Err(PacketError::TooLarge { len, max }),
        }
    }
}

/// Counters of a [`PacketPool`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Number of packets the pool was created with.
    pub capacity: usize,
    /// Packets currently on the free list.
    pub available: usize,
    /// Packets allocated from this pool and not yet freed into it.
    pub outstanding: usize,
    /// Successful allocations, ever.
    pub allocs: u64,
    /// Frees, ever (including overflow frees).
    pub frees: u64,
    /// Allocations refused because the free list was empty.
    pub alloc_failures: u64,
    /// Packets freed while the free list was full; they were deallocated.
    pub overflow_frees: u64,
}

/// A per-thread free list of preallocated packets. See the module doc.
#[derive(Debug)]
pub struct PacketPool {
    /// Loose free packets (room for the whole capacity reserved).
    free: Vec<Packet>,
    /// Free packets as whole bursts: vectors of exactly [`BATCH_MAX`] packets.
    full: Vec<Vec<Packet>>,
    /// Empty vectors of capacity ≥ [`BATCH_MAX`], exchanged for full batches.
    spare: Vec<Vec<Packet>>,
    capacity: usize,
    outstanding: usize,
    allocs: u64,
    frees: u64,
    alloc_failures: u64,
    overflow_frees: u64,
}

impl PacketPool {
    /// Creates a pool holding `capacity` preallocated packets (`capacity * BUF_SIZE` bytes).
    pub fn new(capacity: usize) -> Self {
        let mut free = Vec::with_capacity(capacity);
        free.extend((0..capacity).map(|_| Packet::new()));
        // Vectors are only ever exchanged one for one: `full` and `spare` together always hold
        // `vecs` of them, so reserving that many in each means neither ever reallocates.
        let chunks = capacity / BATCH_MAX;
        let vecs = chunks + POOL_SPARES;
        let mut full = Vec::with_capacity(vecs);
        for _ in 0..chunks {
            let mut v = Vec::with_capacity(BATCH_MAX);
            v.extend(free.drain(free.len() - BATCH_MAX..));
            full.push(v);
        }
        let mut spare = Vec::with_capacity(vecs);
        spare.extend((0..POOL_SPARES).map(|_| Vec::with_capacity(BATCH_MAX)));
        PacketPool {
            free,
            full,
            spare,
            capacity,
            outstanding: 0,
            allocs: 0,
            frees: 0,
            alloc_failures: 0,
            overflow_frees: 0,
        }
    }

    /// Takes a reset packet from the free list; `None` (counted) if the pool is exhausted.
    #[inline]
    pub fn alloc(&mut self) -> Option<Packet> {
        if self.free.is_empty() {
            self.break_full();
        }
        match self.free.pop() {
            Some(mut p) => {
                p.reset();
                self.allocs += 1;
                self.outstanding += 1;
                Some(p)
            }
            None => {
                self.alloc_failures += 1;
                None
            }
        }
    }

    /// Moves up to `n` packets (at most the batch's room) from the free list to the end of
    /// `batch`, reset, and returns them (the batch's new tail) for the caller to fill (which
    /// free packets, in which order, is the pool's choice: they are interchangeable). Counted as that many allocations,
    /// plus one failure if the free list ran out before `n` (as a loop of `alloc` calls that
    /// stops at its first `None` counts).
    #[inline]
    pub fn alloc_into<'b>(&mut self, n: usize, batch: &'b mut crate::Batch) -> &'b mut [Packet] {
        let n = n.min(batch.room());
        if n == BATCH_MAX
            && let Some(v) = self.full.pop()
        {
            // A whole burst into an empty batch: exchange vectors.
            match batch.exchange(v) {
                Ok(old) => {
                    self.spare.push(old);
                    self.allocs += BATCH_MAX as u64;
                    self.outstanding += BATCH_MAX;
                    let pkts = batch.as_mut_slice();
                    for p in pkts.iter_mut() {
                        p.reset();
                    }
                    return pkts;
                }
                Err(v) => self.full.push(v),
            }
        }
        while self.free.len() < n && self.break_full() {}
        let k = n.min(self.free.len());
        if k < n {
            self.alloc_failures += 1;
        }
        self.allocs += k as u64;
        self.outstanding += k;
        let from = self.free.len() - k;
        // `Drain` is exact-size: the batch reserves once and moves the packets as a block.
        let tail = batch.extend_within_room(self.free.drain(from..).rev());
        for p in tail.iter_mut() {
            p.reset();
        }
        tail
    }

    /// Moves one full vector's packets to the loose list; false if there is none.
    fn break_full(&mut self) -> bool {
        match self.full.pop() {
            Some(mut v) => {
                self.free.append(&mut v);
                self.spare.push(v);
                true
            }
            None => false,
        }
    }

    /// Returns a packet to the free list (deallocating it if the list is already full).
    #[inline]
    pub fn free(&mut self, p: Packet) {
        self.frees += 1;
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.available() < self.capacity {
            self.free.push(p);
        } else {
            self.overflow_frees += 1;
            drop(p);
        }
    }

    /// Returns every packet of `batch` to the free list at once (the batch is left empty);
    /// equivalent to [`PacketPool::free`] of each, in order, with one capacity check.
    pub fn free_batch(&mut self, batch: &mut crate::Batch) {
        let n = batch.len();
        self.frees += n as u64;
        self.outstanding = self.outstanding.saturating_sub(n);
        let room = self.capacity.saturating_sub(self.available());
        if n == BATCH_MAX
            && n <= room
            && let Some(v) = self.spare.pop()
        {
            // A full batch: exchange vectors.
            match batch.exchange(v) {
                Ok(full) => {
                    self.full.push(full);
                    return;
                }
                Err(v) => self.spare.push(v),
            }
        }
        if n <= room {
            // One block move of the batch's packets (no per-packet option checks).
            batch.move_all_into(&mut self.free);
        } else {
            for p in batch.drain() {
                if self.available() < self.capacity {
                    self.free.push(p);
                } else {
                    self.overflow_frees += 1;
                }
            }
        }
    }

    /// Number of packets the pool was created with.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Packets currently free (loose or in full vectors).
    #[inline]
    pub fn available(&self) -> usize {
        self.free.len() + self.full.len() * BATCH_MAX
    }

    /// Packets allocated from this pool and not yet freed into it.
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// A snapshot of the pool's counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            capacity: self.capacity,
            available: self.available(),
            outstanding: self.outstanding,
            allocs: self.allocs,
            frees: self.frees,
            alloc_failures: self.alloc_failures,
            overflow_frees: self.overflow_frees,
        }
    }
}

const _: () = assert!(std::mem::size_of::<Packet>() == 16);

/// Empty vectors a pool starts with, to exchange for full batches.
const POOL_SPARES: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_batch_equals_one_free_each() {
        // Twin check, with and without overflow: a batch of foreign packets into a pool with
        // little room, and a batch that fits.
        for (cap, taken, foreign) in [(8usize, 5usize, 0usize), (4, 4, 3), (2, 1, 5)] {
            let mut a = PacketPool::new(cap);
            let mut b = PacketPool::new(cap);
            let mut ba = crate::Batch::new();
            let mut pb = Vec::new();
            for _ in 0..taken {
                ba.push(a.alloc().unwrap()).unwrap();
                pb.push(b.alloc().unwrap());
            }
            for _ in 0..foreign {
                ba.push(Packet::new()).unwrap();
                pb.push(Packet::new());
            }
            a.free_batch(&mut ba);
            for p in pb {
                b.free(p);
            }
            assert!(ba.is_empty());
            assert_eq!(
                a.stats(),
                b.stats(),
                "cap {cap} taken {taken} foreign {foreign}"
            );
        }
    }
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn new_packet_is_empty_with_headroom() {
        let p = Packet::new();
        assert_eq!(p.len(), 0);
        assert!(p.is_empty());
        assert_eq!(p.headroom(), HEADROOM);
        assert_eq!(p.tailroom(), MAX_FRAME);
        assert_eq!(p.data(), &[] as &[u8]);
    }

    #[test]
    fn set_data_limits() {
        let mut p = Packet::new();
        assert!(p.set_data(&[7u8; MAX_FRAME]).is_ok());
        assert_eq!(p.len(), MAX_FRAME);
        assert_eq!(p.tailroom(), 0);
        let err = p.set_data(&[1u8; MAX_FRAME + 1]).unwrap_err();
        assert_eq!(
            err,
            PacketError::TooLarge {
                len: MAX_FRAME + 1,
                max: MAX_FRAME
            }
        );
        // unchanged on error
        assert_eq!(p.len(), MAX_FRAME);
        assert!(p.data().iter().all(|&b| b == 7));
    }

    #[test]
    fn set_data_chunk_equals_set_data() {
        // Twin: for every length of a 64-byte chunk, the chunk copy leaves the packet exactly
        // as `set_data` of the prefix does (from a packet moved off its default headroom);
        // past the chunk it refuses and leaves the packet unchanged.
        let chunk: [u8; 64] = std::array::from_fn(|i| (i * 7 + 3) as u8);
        for len in 0..=64 {
            let mut a = Packet::new();
            let mut b = Packet::new();
            for p in [&mut a, &mut b] {
                p.set_data(&[9u8; 100]).unwrap();
                p.pull_front(5).unwrap();
            }
            a.set_data(&chunk[..len]).unwrap();
            b.set_data_chunk(&chunk, len).unwrap();
            assert_eq!(a.data(), b.data(), "len {len}");
            assert_eq!(
                (a.headroom(), a.len()),
                (b.headroom(), b.len()),
                "len {len}"
            );
        }
        let mut p = Packet::new();
        p.set_data(&[1, 2, 3]).unwrap();
        assert_eq!(
            p.set_data_chunk(&chunk, 65),
            Err(PacketError::TooLarge { len: 65, max: 64 })
        );
        assert_eq!(p.data(), &[1, 2, 3]);
        // A chunk larger than the room behind the headroom is refused, not a panic.
        let big = [0u8; BUF_SIZE];
        assert!(p.set_data_chunk(&big, 10).is_err());
        assert_eq!(p.data(), &[1, 2, 3]);
    }

    #[test]
    fn push_vlan_in_place() {
        // Ethernet dst, src, type 0x0800 then payload.
        let frame: Vec<u8> = (0u8..60).collect();
        let mut p = Packet::from_slice(&frame).unwrap();
        let hdr = p.push_front(4).unwrap();
        hdr.fill(0xEE);
        // move MACs to the front, write the tag after them
        let d = p.data_mut();
        d.copy_within(4..16, 0);
        d[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        assert_eq!(p.len(), 64);
        assert_eq!(&p.data()[..12], &frame[..12]);
        assert_eq!(&p.data()[12..16], &[0x81, 0x00, 0x00, 0x05]);
        assert_eq!(&p.data()[16..], &frame[12..]);
        assert_eq!(p.headroom(), HEADROOM - 4);
    }

    #[test]
    fn push_front_refuses_past_headroom() {
        let mut p = Packet::from_slice(&[1, 2, 3]).unwrap();
        assert!(p.push_front(HEADROOM + 1).is_none());
        assert_eq!(p.data(), &[1, 2, 3]);
        assert!(p.push_front(HEADROOM).is_some());
        assert_eq!(p.headroom(), 0);
        assert!(p.push_front(1).is_none());
    }

    #[test]
    fn pull_front_and_truncate() {
        let mut p = Packet::from_slice(&[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(p.pull_front(2), Some(&[1u8, 2][..]));
        assert_eq!(p.data(), &[3, 4, 5]);
        assert!(p.pull_front(4).is_none());
        p.truncate(10);
        assert_eq!(p.len(), 3);
        p.truncate(1);
        assert_eq!(p.data(), &[3]);
    }

    #[test]
    fn resize_zero_fills() {
        let mut p = Packet::from_slice(&[9; 10]).unwrap();
        p.truncate(2);
        p.resize(5).unwrap();
        assert_eq!(p.data(), &[9, 9, 0, 0, 0]);
        assert!(p.resize(BUF_SIZE).is_err());
        assert_eq!(p.len(), 5);
    }

    #[test]
    fn pool_accounting() {
        let mut pool = PacketPool::new(4);
        assert_eq!(pool.available(), 4);
        let mut held: Vec<Packet> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        assert_eq!(pool.outstanding(), 4);
        assert!(pool.alloc().is_none());
        assert_eq!(pool.stats().alloc_failures, 1);
        // dirty a packet, free it, allocate again: it comes back reset
        held[0].set_data(&[1, 2, 3]).unwrap();
        held[0].in_port = 9;
        held[0].push_front(10).unwrap();
        pool.free(held.remove(0));
        let p = pool.alloc().unwrap();
        assert_eq!((p.len(), p.headroom(), p.in_port), (0, HEADROOM, 0));
        held.push(p);
        for p in held {
            pool.free(p);
        }
        let s = pool.stats();
        assert_eq!(s.available, 4);
        assert_eq!(s.outstanding, 0);
        assert_eq!(s.allocs, 5);
        assert_eq!(s.frees, 5);
        // a foreign packet into a full pool is dropped and counted, the list does not grow
        pool.free(Packet::new());
        assert_eq!(pool.available(), 4);
        assert_eq!(pool.stats().overflow_frees, 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushFront(usize),
        PullFront(usize),
        PushBack(usize, u8),
        Truncate(usize),
        Resize(usize),
        Set(Vec<u8>),
        Write(usize, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..200).prop_map(Op::PushFront),
            (0usize..200).prop_map(Op::PullFront),
            (0usize..400, any::<u8>()).prop_map(|(n, b)| Op::PushBack(n, b)),
            (0usize..2100).prop_map(Op::Truncate),
            (0usize..2100).prop_map(Op::Resize),
            proptest::collection::vec(any::<u8>(), 0..2000).prop_map(Op::Set),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Op::Write(i, b)),
        ]
    }

    /// The pool's vectors: full ones hold exactly a burst, spare ones nothing, and their
    /// number never changes.
    fn check_vecs(p: &PacketPool, vecs: usize) -> Result<(), TestCaseError> {
        prop_assert!(
            p.full
                .iter()
                .all(|v| v.len() == BATCH_MAX && v.capacity() >= BATCH_MAX)
        );
        prop_assert!(
            p.spare
                .iter()
                .all(|v| v.is_empty() && v.capacity() >= BATCH_MAX)
        );
        prop_assert_eq!(p.full.len() + p.spare.len(), vecs);
        prop_assert!(p.free.len() <= p.capacity);
        Ok(())
    }

    proptest! {
        /// Twin of the pool with its whole-burst vectors: a plain counter model (a free count,
        /// `alloc` takes one if any, `free` keeps one if below capacity), through random
        /// single allocs and frees, burst allocs into batches of any fill, and frees of batches
        /// of any size (full ones included, foreign packets included, so that frees overflow).
        /// Same counters and availability after every step; every reset packet handed out is
        /// empty; the vectors keep their shape.
        #[test]
        fn pool_matches_counter_model(
            cap in 0usize..140,
            ops in proptest::collection::vec((0u8..5, 0usize..=BATCH_MAX), 1..80),
        ) {
            let mut pool = PacketPool::new(cap);
            let vecs = pool.full.len() + pool.spare.len();
            let (mut free, mut allocs, mut frees, mut fails, mut over) = (cap, 0u64, 0u64, 0u64, 0u64);
            let mut held: Vec<Packet> = Vec::new();
            for (op, k) in ops {
                match op {
                    0 => {
                        for _ in 0..k {
                            let got = pool.alloc();
                            prop_assert_eq!(got.is_some(), free > 0);
                            if free == 0 { fails += 1; } else { free -= 1; allocs += 1; }
                            match got {
                                Some(p) => {
                                    prop_assert_eq!((p.len(), p.headroom(), p.in_port), (0, HEADROOM, 0));
                                    held.push(p);
                                }
                                None => break,
                            }
                        }
                    }
                    1 => {
                        for _ in 0..k.min(held.len()) {
                            pool.free(held.pop().unwrap());
                            frees += 1;
                            if free < cap { free += 1; } else { over += 1; }
                        }
                    }
                    2 => {
                        // a burst into a batch that already holds `pre` foreign packets
                        let pre = k % (BATCH_MAX + 1) / 3;
                        let mut b = crate::Batch::new();
                        for _ in 0..pre { b.push(Packet::new()).unwrap(); }
                        let want = BATCH_MAX;
                        let got = {
                            let t = pool.alloc_into(want, &mut b);
                            for p in t.iter() {
                                prop_assert_eq!((p.len(), p.headroom(), p.in_port), (0, HEADROOM, 0));
                            }
                            t.len()
                        };
                        let n = want.min(BATCH_MAX - pre);
                        let kk = n.min(free);
                        if kk < n { fails += 1; }
                        free -= kk; allocs += kk as u64;
                        prop_assert_eq!(got, kk);
                        prop_assert_eq!(b.len(), pre + kk);
                        for p in b.drain().skip(pre) { held.push(p); }
                    }
                    3 => {
                        // a batch of `k` held packets (full bursts included)
                        let mut b = crate::Batch::new();
                        for _ in 0..k.min(held.len()) { b.push(held.pop().unwrap()).unwrap(); }
                        let n = b.len();
                        pool.free_batch(&mut b);
                        prop_assert!(b.is_empty());
                        frees += n as u64;
                        for _ in 0..n { if free < cap { free += 1; } else { over += 1; } }
                    }
                    _ => {
                        // foreign packets freed as a batch: may overflow the pool
                        let mut b = crate::Batch::new();
                        for _ in 0..k { b.push(Packet::new()).unwrap(); }
                        pool.free_batch(&mut b);
                        frees += k as u64;
                        for _ in 0..k { if free < cap { free += 1; } else { over += 1; } }
                    }
                }
                let st = pool.stats();
                prop_assert_eq!(
                    (st.available, st.allocs, st.frees, st.alloc_failures, st.overflow_frees),
                    (free, allocs, frees, fails, over)
                );
                check_vecs(&pool, vecs)?;
            }
        }

        /// The packet behaves like a `VecDeque<u8>` with a bounded front and back.
        #[test]
        fn packet_matches_vecdeque_model(ops in proptest::collection::vec(op(), 0..40)) {
            let mut p = Packet::new();
            let mut m: VecDeque<u8> = VecDeque::new();
            let mut head = HEADROOM; // model of headroom
            for op in ops {
                match op {
                    Op::PushFront(n) => {
                        let r = p.push_front(n).map(|s| { s.fill(0xAB); });
                        if n <= head {
                            prop_assert!(r.is_some());
                            head -= n;
                            for _ in 0..n { m.push_front(0xAB); }
                        } else {
                            prop_assert!(r.is_none());
                        }
                    }
                    Op::PullFront(n) => {
                        let got = p.pull_front(n).map(<[u8]>::to_vec);
                        if n <= m.len() {
                            let want: Vec<u8> = m.drain(..n).collect();
                            prop_assert_eq!(got, Some(want));
                            head += n;
                        } else {
                            prop_assert!(got.is_none());
                        }
                    }
                    Op::PushBack(n, b) => {
                        let r = p.push_back(n).map(|s| s.fill(b));
                        if head + m.len() + n <= BUF_SIZE {
                            prop_assert!(r.is_some());
                            m.extend(std::iter::repeat_n(b, n));
                        } else {
                            prop_assert!(r.is_none());
                        }
                    }
                    Op::Truncate(n) => { p.truncate(n); m.truncate(n); }
                    Op::Resize(n) => {
                        let r = p.resize(n);
                        if head + n <= BUF_SIZE {
                            prop_assert!(r.is_ok());
                            m.resize(n, 0);
                        } else {
                            prop_assert!(r.is_err());
                        }
                    }
                    Op::Set(v) => {
                        let r = p.set_data(&v);
                        if v.len() <= MAX_FRAME {
                            prop_assert!(r.is_ok());
                            m = v.into_iter().collect();
                            head = HEADROOM;
                        } else {
                            prop_assert!(r.is_err());
                        }
                    }
                    Op::Write(i, b) => {
                        if !m.is_empty() {
                            let i = i % m.len();
                            p.data_mut()[i] = b;
                            m[i] = b;
                        }
                    }
                }
                let want: Vec<u8> = m.iter().copied().collect();
                prop_assert_eq!(p.data(), &want[..]);
                prop_assert_eq!(p.headroom(), head);
                prop_assert_eq!(p.headroom() + p.len() + p.tailroom(), BUF_SIZE);
            }
        }

        /// Pool counters match a trivial model under random alloc/free sequences.
        #[test]
        fn pool_matches_model(cap in 0usize..8, ops in proptest::collection::vec(any::<bool>(), 0..64)) {
            let mut pool = PacketPool::new(cap);
            let mut held = Vec::new();
            let (mut fails, mut allocs, mut frees) = (0u64, 0u64, 0u64);
            for alloc in ops {
                if alloc {
                    match pool.alloc() {
                        Some(p) => { allocs += 1; held.push(p); }
                        None => { fails += 1; prop_assert_eq!(held.len(), cap); }
                    }
                } else if let Some(p) = held.pop() {
                    frees += 1;
                    pool.free(p);
                }
                let s = pool.stats();
                prop_assert_eq!(s.outstanding, held.len());
                prop_assert_eq!(s.available, cap - held.len());
                prop_assert_eq!((s.allocs, s.frees, s.alloc_failures, s.overflow_frees), (allocs, frees, fails, 0));
            }
        }
    }
}
