//! One AF_XDP socket bound to one queue of an interface, with its own UMEM and four rings.
//!
//! # Frame ownership
//!
//! The UMEM's frames are split once, at open, into two fixed sets that never mix:
//!
//! * **rx frames** (`min(ring_size, frame_count / 2)` of them) start on the fill ring. The
//!   kernel receives into them and hands them back on the rx ring; [`Xsk::rx`] copies each
//!   frame into a pool packet and at once puts the frame back on the fill ring. So the kernel
//!   always owns every rx frame except during one burst, and the fill ring (as large as the
//!   set) can always take them back.
//! * **tx frames** (the rest) start on a free stack. [`Xsk::tx`] pops one per packet, copies
//!   the packet in and puts it on the tx ring; the kernel returns it on the completion ring
//!   once sent, and [`Xsk::reap`] pushes it back on the free stack. When the tx ring or the
//!   free stack is empty the packet is dropped and counted: tx never waits.
//!
//! # Wakeups
//!
//! With need-wakeup on (`XDP_USE_NEED_WAKEUP`) the kernel sets a flag on the fill or tx ring
//! when it needs a system call to make progress, and the socket kicks (`recvfrom`/`sendto`,
//! never blocking) only then. Without it every burst that leaves tx work pending kicks.

use super::ring::Ring;
use super::sys;
use super::umem::Umem;
use crate::batch::Batch;
use crate::packet::PacketPool;
use crate::port::{PortStats, rx_copy};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Counters kept by user space for one socket, beyond [`PortStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct XskCounters {
    pub(crate) tx_ring_full: u64,
    pub(crate) tx_no_frame: u64,
    pub(crate) rx_invalid_descs: u64,
    pub(crate) tx_kicks: u64,
    pub(crate) rx_kicks: u64,
    pub(crate) kick_errors: u64,
}

/// Sizes of one socket's rings and UMEM (validated by the caller).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    pub(crate) ring_size: u32,
    pub(crate) frame_size: u32,
    pub(crate) frame_count: u32,
}

/// One AF_XDP socket. Fields drop in order: rings unmapped, socket closed, UMEM unmapped.
#[derive(Debug)]
pub(crate) struct Xsk {
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fd: OwnedFd,
    umem: Umem,
    /// Free tx frames (capacity reserved at open: never reallocates).
    free_tx: Vec<u64>,
    /// Rx frames the fill ring could not take back yet (never happens while the invariant of
    /// the module doc holds; kept so a frame is never lost).
    stash: Vec<u64>,
    need_wakeup: bool,
    pub(crate) counters: XskCounters,
}

fn ctx(step: &'static str) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{step}: {e}"))
}

impl Xsk {
    /// Creates the socket, its UMEM and rings, gives the rx frames to the fill ring and binds
    /// it to `queue` of `ifindex` in copy or zero-copy mode.
    pub(crate) fn open(
        ifindex: u32,
        queue: u32,
        sizes: Sizes,
        zero_copy: bool,
        need_wakeup: bool,
    ) -> io::Result<Xsk> {
        let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(ctx("AF_XDP socket"))?;
        let umem = Umem::new(sizes.frame_size, sizes.frame_count).map_err(ctx("UMEM mmap"))?;
        umem.register(&fd).map_err(ctx("UMEM registration"))?;
        let n = sizes.ring_size;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "fill ring size"),
            (libc::XDP_UMEM_COMPLETION_RING, "completion ring size"),
            (libc::XDP_RX_RING, "rx ring size"),
            (libc::XDP_TX_RING, "tx ring size"),
        ] {
            sys::setsockopt(&fd, libc::SOL_XDP, opt, &n).map_err(ctx(what))?;
        }
        let zero = libc::xdp_ring_offset {
            producer: 0,
            consumer: 0,
            desc: 0,
            flags: 0,
        };
        let off: libc::xdp_mmap_offsets = sys::getsockopt(
            &fd,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            libc::xdp_mmap_offsets {
                rx: zero,
                tx: zero,
                fr: zero,
                cr: zero,
            },
        )
        .map_err(ctx("ring offsets"))?;
        let raw = fd.as_raw_fd();
        let fill = Ring::map(raw, libc::XDP_UMEM_PGOFF_FILL_RING, n, &off.fr, true)
            .map_err(ctx("fill ring mmap"))?;
        let comp = Ring::map(raw, libc::XDP_UMEM_PGOFF_COMPLETION_RING, n, &off.cr, false)
            .map_err(ctx("completion ring mmap"))?;
        let rx = Ring::map(raw, libc::XDP_PGOFF_RX_RING as u64, n, &off.rx, false)
            .map_err(ctx("rx ring mmap"))?;
        let tx = Ring::map(raw, libc::XDP_PGOFF_TX_RING as u64, n, &off.tx, true)
            .map_err(ctx("tx ring mmap"))?;
        let rx_frames = n.min(sizes.frame_count / 2);
        let tx_frames = sizes.frame_count - rx_frames;
        let mut x = Xsk {
            fill,
            comp,
            rx,
            tx,
            fd,
            free_tx: Vec::with_capacity(tx_frames as usize),
            stash: Vec::with_capacity(rx_frames as usize),
            umem,
            need_wakeup,
            counters: XskCounters::default(),
        };
        let got = x.fill.free(rx_frames);
        for i in 0..got {
            let a = x.umem.frame_addr(i);
            x.fill.push(a);
        }
        x.fill.submit();
        for i in (rx_frames..x.umem.frame_count()).rev() {
            let a = x.umem.frame_addr(i);
            x.free_tx.push(a);
        }
        let mut flags = if zero_copy {
            libc::XDP_ZEROCOPY
        } else {
            libc::XDP_COPY
        };
        if need_wakeup {
            flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        sys::xdp_bind(&x.fd, ifindex, queue, flags).map_err(ctx("bind"))?;
        Ok(x)
    }

    /// The socket's descriptor (for the XSKMAP).
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives up to `batch.room()` frames, copied into packets from `pool`; every frame
    /// goes straight back to the fill ring. Returns the number of packets appended.
    pub(crate) fn rx(
        &mut self,
        pool: &mut PacketPool,
        batch: &mut Batch,
        stats: &mut PortStats,
    ) -> usize {
        self.refill_stash();
        let n = self.rx.available(batch.room() as u32);
        if n == 0 {
            if self.need_wakeup && self.fill.needs_wakeup() {
                self.counters.rx_kicks += 1;
                sys::kick_rx(&self.fd);
            }
            self.kick_tx_if_needed();
            return 0;
        }
        let before = batch.len();
        let room = self.fill.free(n);
        for k in 0..n {
            let d = self.rx.pop();
            match self.umem.frame(d.addr, d.len as usize) {
                Some(frame) => {
                    let _ = rx_copy(frame, pool, batch, stats);
                }
                None => {
                    self.counters.rx_invalid_descs += 1;
                    stats.rx_errors += 1;
                }
            }
            let base = self.umem.frame_base(d.addr);
            if base < self.umem.frame_addr(self.umem.frame_count()) {
                if k < room {
                    self.fill.push(base);
                } else if self.stash.len() < self.stash.capacity() {
                    self.stash.push(base);
                }
            }
        }
        self.rx.release();
        self.fill.submit();
        batch.len() - before
    }

    /// Puts stashed rx frames back on the fill ring when it has room.
    fn refill_stash(&mut self) {
        if self.stash.is_empty() {
            return;
        }
        let n = self.fill.free(self.stash.len() as u32);
        for _ in 0..n {
            if let Some(a) = self.stash.pop() {
                self.fill.push(a);
            }
        }
        self.fill.submit();
    }

    /// Takes sent frames back from the completion ring onto the free stack.
    pub(crate) fn reap(&mut self) {
        let n = self.comp.available(self.comp.size());
        if n == 0 {
            return;
        }
        for _ in 0..n {
            let a = self.comp.pop();
            let end = self.umem.frame_addr(self.umem.frame_count());
            if a < end && self.free_tx.len() < self.free_tx.capacity() {
                self.free_tx.push(self.umem.frame_base(a));
            }
        }
        self.comp.release();
    }

    /// Copies every packet of `batch` into a free tx frame and onto the tx ring, or drops it
    /// (counted) when the ring or the free frames run out; kicks the kernel if it asks.
    /// Does not free the packets. Returns the number put on the ring.
    pub(crate) fn tx(&mut self, batch: &Batch, stats: &mut PortStats) -> usize {
        self.reap();
        let room = self.tx.free(batch.len() as u32) as usize;
        let mut sent = 0;
        for p in batch.iter() {
            let data = p.data();
            if sent == room {
                self.counters.tx_ring_full += 1;
                stats.count_tx_error();
                continue;
            }
            let Some(addr) = self.free_tx.pop() else {
                self.counters.tx_no_frame += 1;
                stats.count_tx_error();
                continue;
            };
            match self.umem.frame_mut(addr, data.len()) {
                Some(f) => f.copy_from_slice(data),
                None => {
                    // Longer than a frame: cannot happen with frames of at least 2048 bytes
                    // and packets of at most MAX_FRAME; counted rather than trusted.
                    self.free_tx.push(addr);
                    stats.count_tx_error();
                    continue;
                }
            }
            self.tx.push(libc::xdp_desc {
                addr,
                len: data.len() as u32,
                options: 0,
            });
            stats.count_tx(data.len());
            sent += 1;
        }
        if sent > 0 {
            self.tx.submit();
        }
        self.kick_tx_if_needed();
        sent
    }

    /// Kicks the tx ring when frames wait on it and the kernel asks for it (always without
    /// need-wakeup).
    pub(crate) fn kick_tx_if_needed(&mut self) {
        if (!self.need_wakeup || self.tx.needs_wakeup()) && self.tx.pending() > 0 {
            self.counters.tx_kicks += 1;
            if sys::kick_tx(&self.fd).is_err() {
                self.counters.kick_errors += 1;
            }
        }
    }

    /// Frames on the tx ring not yet taken by the kernel.
    pub(crate) fn tx_pending(&self) -> u32 {
        self.tx.pending()
    }

    /// The kernel's counters for this socket (`XDP_STATISTICS`).
    pub(crate) fn kernel_stats(&self) -> io::Result<libc::xdp_statistics> {
        sys::getsockopt(
            &self.fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            libc::xdp_statistics {
                rx_dropped: 0,
                rx_invalid_descs: 0,
                tx_invalid_descs: 0,
                rx_ring_full: 0,
                rx_fill_ring_empty_descs: 0,
                tx_ring_empty_descs: 0,
            },
        )
    }

    /// Whether the socket was bound in zero-copy mode (`XDP_OPTIONS`).
    pub(crate) fn is_zero_copy(&self) -> bool {
        sys::getsockopt(
            &self.fd,
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
            libc::xdp_options { flags: 0 },
        )
        .is_ok_and(|o| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// Free tx frames now (for tests of frame reuse).
    pub(crate) fn free_tx_frames(&self) -> usize {
        self.free_tx.len()
    }

    /// UMEM frame size.
    #[allow(dead_code)]
    pub(crate) fn frame_size(&self) -> u32 {
        self.umem.frame_size()
    }
}
