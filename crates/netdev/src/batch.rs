//! Packet batches: the unit of work on the hot path.
//!
//! A [`Batch`] holds at most [`BATCH_MAX`] packets. Its storage is a `Vec` with room for
//! [`BATCH_MAX`], reserved at creation, that never grows: [`Batch::push`] refuses (and hands
//! the packet back) when the batch is full, and draining keeps the capacity. The pool may
//! exchange the vector for one of its own of the same kind (a whole burst handed out or taken
//! back at once), never for a smaller one. Reusing one batch per port per PMD iteration
//! therefore allocates nothing.
//!
//! Invariant: `len() <= BATCH_MAX` at all times.

use crate::packet::{Packet, PacketPool};

/// Largest number of packets in a batch (one rx/tx burst), as in OVS `NETDEV_MAX_BURST`.
pub const BATCH_MAX: usize = 32;

/// Up to [`BATCH_MAX`] packets.
#[derive(Debug)]
pub struct Batch {
    pkts: Vec<Packet>,
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl Batch {
    /// An empty batch with room for [`BATCH_MAX`] packets (one allocation, here only).
    pub fn new() -> Self {
        Batch {
            pkts: Vec::with_capacity(BATCH_MAX),
        }
    }

    /// Number of packets in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// True if the batch holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// True if the batch holds [`BATCH_MAX`] packets.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.pkts.len() >= BATCH_MAX
    }

    /// Free slots left.
    #[inline]
    pub fn room(&self) -> usize {
        BATCH_MAX - self.pkts.len()
    }

    /// Appends a packet; gives it back if the batch is full.
    #[inline]
    pub fn push(&mut self, p: Packet) -> Result<(), Packet> {
        if self.is_full() {
            return Err(p);
        }
        self.pkts.push(p);
        Ok(())
    }

    /// Appends the packets of `it` and returns them (the batch's new tail). The caller gives
    /// at most [`Batch::room`]; any beyond it are dropped, never stored past [`BATCH_MAX`].
    #[inline]
    pub fn extend_within_room(
        &mut self,
        it: impl ExactSizeIterator<Item = Packet>,
    ) -> &mut [Packet] {
        let (old, room) = (self.pkts.len(), self.room());
        self.pkts.extend(it.take(room));
        self.pkts.get_mut(old..).unwrap_or_default()
    }

    /// Exchanges the batch's packet vector for `v` and returns the old one, if `v` can serve
    /// as a batch (at most [`BATCH_MAX`] packets, room for [`BATCH_MAX`]) and the exchange
    /// keeps what the pool expects: either the batch is empty and `v` full (a burst handed
    /// out), or the batch is full and `v` empty (a burst taken back). Otherwise `Err(v)`.
    pub(crate) fn exchange(&mut self, v: Vec<Packet>) -> Result<Vec<Packet>, Vec<Packet>> {
        let fits = v.len() <= BATCH_MAX && v.capacity() >= BATCH_MAX;
        let pairs = (self.pkts.is_empty() && v.len() == BATCH_MAX)
            || (self.pkts.len() == BATCH_MAX && v.is_empty());
        if fits && pairs {
            Ok(std::mem::replace(&mut self.pkts, v))
        } else {
            Err(v)
        }
    }

    /// Moves every packet to the end of `dst` in one block, leaving the batch empty.
    #[inline]
    pub fn move_all_into(&mut self, dst: &mut Vec<Packet>) {
        dst.append(&mut self.pkts);
    }

    /// Removes and returns the last packet.
    #[inline]
    pub fn pop(&mut self) -> Option<Packet> {
        self.pkts.pop()
    }

    /// The packets, in order.
    #[inline]
    pub fn as_slice(&self) -> &[Packet] {
        &self.pkts
    }

    /// The packets, in order, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Packet] {
        &mut self.pkts
    }

    /// Iterates over the packets.
    #[inline]
    pub fn iter(&self) -> std::slice::Iter<'_, Packet> {
        self.pkts.iter()
    }

    /// Iterates over the packets, writable.
    #[inline]
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Packet> {
        self.pkts.iter_mut()
    }

    /// Removes all packets, in order, keeping the capacity.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, Packet> {
        self.pkts.drain(..)
    }

    /// Keeps the packets for which `keep` returns true and frees the others into `pool`,
    /// preserving order.
    pub fn retain_or_free(&mut self, pool: &mut PacketPool, mut keep: impl FnMut(&Packet) -> bool) {
        let mut i = 0;
        while i < self.pkts.len() {
            if keep(&self.pkts[i]) {
                i += 1;
            } else {
                pool.free(self.pkts.remove(i));
            }
        }
    }

    /// Frees every packet into `pool`.
    #[inline]
    pub fn free_all(&mut self, pool: &mut PacketPool) {
        for p in self.pkts.drain(..) {
            pool.free(p);
        }
    }
}

impl<'a> IntoIterator for &'a Batch {
    type Item = &'a Packet;
    type IntoIter = std::slice::Iter<'a, Packet>;
    fn into_iter(self) -> Self::IntoIter {
        self.pkts.iter()
    }
}

impl<'a> IntoIterator for &'a mut Batch {
    type Item = &'a mut Packet;
    type IntoIter = std::slice::IterMut<'a, Packet>;
    fn into_iter(self) -> Self::IntoIter {
        self.pkts.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_exceeds_max() {
        let mut pool = PacketPool::new(40);
        let mut b = Batch::new();
        for i in 0..40 {
            let p = pool.alloc().unwrap();
            match b.push(p) {
                Ok(()) => assert!(i < BATCH_MAX),
                Err(p) => {
                    assert!(i >= BATCH_MAX);
                    pool.free(p);
                }
            }
            assert!(b.len() <= BATCH_MAX);
        }
        assert!(b.is_full());
        assert_eq!(b.room(), 0);
        let cap = b.pkts.capacity();
        b.free_all(&mut pool);
        assert!(b.is_empty());
        assert_eq!(b.pkts.capacity(), cap, "draining keeps the capacity");
        assert_eq!(pool.available(), 40);
    }

    #[test]
    fn retain_or_free_keeps_order() {
        let mut pool = PacketPool::new(10);
        let mut b = Batch::new();
        for i in 0..10u8 {
            let mut p = pool.alloc().unwrap();
            p.set_data(&[i]).unwrap();
            b.push(p).unwrap();
        }
        b.retain_or_free(&mut pool, |p| p.data()[0] % 3 == 0);
        let got: Vec<u8> = b.iter().map(|p| p.data()[0]).collect();
        assert_eq!(got, vec![0, 3, 6, 9]);
        assert_eq!(pool.available(), 6);
        let drained: Vec<u8> = b.drain().map(|p| p.data()[0]).collect();
        assert_eq!(drained, vec![0, 3, 6, 9]);
    }
}
