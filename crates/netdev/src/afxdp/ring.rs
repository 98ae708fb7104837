//! The four single-producer/single-consumer rings an AF_XDP socket shares with the kernel.
//!
//! Each ring is a power-of-two array of descriptors with a producer and a consumer index
//! (free-running `u32`s, masked on access) and a flags word, all in one `mmap` of the socket.
//! User space produces into the fill ring (frames the kernel may receive into) and the tx ring
//! (frames to send), and consumes from the rx ring (received frames) and the completion ring
//! (sent frames, free again). The protocol is the kernel's (`Documentation/networking/af_xdp.rst`):
//! descriptors are written before the producer index is stored with release ordering, and
//! read after the producer index is loaded with acquire ordering; the consumer index is stored
//! with release ordering after the descriptors are read.
//!
//! [`Ring`] caches the other side's index and reloads it only when the cached value says the
//! ring is full (producer side) or empty (consumer side), as libxdp does.

use super::sys::Mapping;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

/// One ring mapping: `T` is `u64` (a UMEM address: fill, completion) or `libc::xdp_desc`
/// (rx, tx).
#[derive(Debug)]
pub(crate) struct Ring<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    mask: u32,
    size: u32,
    /// Our side's index (producer for fill/tx, consumer for rx/completion), ahead of the
    /// shared one by what is reserved/peeked and not yet submitted/released.
    local: u32,
    /// The other side's index as last loaded (plus `size` on the producer side: the limit).
    cached: u32,
    /// Keeps the memory above mapped; last, so it is unmapped after nothing points into it.
    map: Mapping,
}

// SAFETY: the pointers point into `map`, which the ring owns; the ring is moved between
// threads only together with its port and is never shared, so one thread at a time uses it.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of socket `fd` at page offset `pgoff` with `size` entries laid out as
    /// `off` says, and checks that every offset lies inside the mapping. `user_produces`:
    /// user space produces into this ring (fill, tx), else it consumes from it (rx, completion).
    pub(crate) fn map(
        fd: std::os::fd::RawFd,
        pgoff: u64,
        size: u32,
        off: &libc::xdp_ring_offset,
        user_produces: bool,
    ) -> io::Result<Ring<T>> {
        debug_assert!(size.is_power_of_two());
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mapping::ring(fd, pgoff, len)?;
        let word_ok = |o: u64| o as usize + 4 <= off.desc as usize && o.is_multiple_of(4);
        let layout_ok = word_ok(off.producer)
            && word_ok(off.consumer)
            && word_ok(off.flags)
            && (off.desc as usize).is_multiple_of(std::mem::align_of::<T>());
        if !layout_ok {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected AF_XDP ring layout {off:?}"),
            ));
        }
        let base = map.ptr();
        // SAFETY: every offset was checked above to lie inside the `len`-byte mapping (the
        // index words before the descriptors, the descriptors filling the rest) and to be
        // aligned for its type; `add` stays within the mapping.
        let (producer, consumer, flags, descs) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut T,
            )
        };
        let mut r = Ring {
            producer,
            consumer,
            flags,
            descs,
            mask: size - 1,
            size,
            local: 0,
            cached: 0,
            map,
        };
        // A fresh ring is empty; start from whatever the kernel says anyway.
        if user_produces {
            r.local = r.load_producer();
            r.cached = r.load_consumer().wrapping_add(size);
        } else {
            r.local = r.load_consumer();
            r.cached = r.load_producer();
        }
        Ok(r)
    }

    fn load_producer(&self) -> u32 {
        // SAFETY: `producer` points to an aligned u32 inside the live mapping (checked in
        // `map`); the kernel writes it concurrently, hence the atomic access.
        unsafe { &*self.producer }.load(Ordering::Acquire)
    }

    fn load_consumer(&self) -> u32 {
        // SAFETY: as in `load_producer`, for the consumer index.
        unsafe { &*self.consumer }.load(Ordering::Acquire)
    }

    /// Whether the kernel asks to be woken up (`XDP_RING_NEED_WAKEUP`) for this ring.
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as in `load_producer`, for the flags word.
        let f = unsafe { &*self.flags }.load(Ordering::Relaxed);
        f & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Pointer to the slot of free-running index `i`.
    fn slot(&self, i: u32) -> *mut T {
        // SAFETY: `i & mask < size` and the mapping holds `size` descriptors from `descs`.
        unsafe { self.descs.add((i & self.mask) as usize) }
    }

    // ---- producer side (fill, tx) ----

    /// How many entries can be produced now, up to `want`.
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let mut free = self.cached.wrapping_sub(self.local);
        if free < want {
            self.cached = self.load_consumer().wrapping_add(self.size);
            free = self.cached.wrapping_sub(self.local);
        }
        free.min(want)
    }

    /// Writes the next entry after those already written; the caller checked [`Ring::free`].
    pub(crate) fn push(&mut self, v: T) {
        let p = self.slot(self.local);
        // SAFETY: the slot is in the mapping (`slot`) and, since `free` said so, owned by user
        // space until the producer index passes it; the kernel does not read it meanwhile.
        unsafe { p.write_volatile(v) };
        self.local = self.local.wrapping_add(1);
    }

    /// Makes the entries pushed so far visible to the kernel.
    pub(crate) fn submit(&mut self) {
        // SAFETY: as in `load_producer`; the release store orders the descriptor writes
        // before the index the kernel reads.
        unsafe { &*self.producer }.store(self.local, Ordering::Release);
    }

    /// Entries produced and not yet consumed by the kernel (tx: frames still to send).
    pub(crate) fn pending(&self) -> u32 {
        self.local.wrapping_sub(self.load_consumer())
    }

    // ---- consumer side (rx, completion) ----

    /// How many entries can be consumed now, up to `want`.
    pub(crate) fn available(&mut self, want: u32) -> u32 {
        let mut n = self.cached.wrapping_sub(self.local);
        if n == 0 {
            self.cached = self.load_producer();
            n = self.cached.wrapping_sub(self.local);
        }
        n.min(want)
    }

    /// Reads the next entry; the caller checked [`Ring::available`].
    pub(crate) fn pop(&mut self) -> T {
        let p = self.slot(self.local);
        // SAFETY: the slot is in the mapping and, `available` having loaded the producer index
        // with acquire ordering past it, written by the kernel and not touched until released.
        let v = unsafe { p.read_volatile() };
        self.local = self.local.wrapping_add(1);
        v
    }

    /// Gives the entries popped so far back to the kernel.
    pub(crate) fn release(&mut self) {
        // SAFETY: as in `load_producer`; the release store orders the descriptor reads before
        // the kernel may overwrite the slots.
        unsafe { &*self.consumer }.store(self.local, Ordering::Release);
    }

    /// Number of entries.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Bytes mapped.
    #[allow(dead_code)]
    pub(crate) fn mapped_len(&self) -> usize {
        self.map.len()
    }
}
