//! The UMEM: the memory an AF_XDP socket receives into and sends from.
//!
//! One anonymous mapping of `frame_count` frames of `frame_size` bytes (aligned chunk mode:
//! `frame_size` is a power of two, 2048 or 4096), registered with the socket
//! (`XDP_UMEM_REG`). Frames are named by their byte offset in the region ("address"). The
//! rings say who owns a frame at any moment; a frame owned by user space is read or written
//! only through [`Umem::frame`] / [`Umem::frame_mut`], which check the bounds.
//!
//! Packets are *copied* between frames and [`PacketPool`](crate::PacketPool) buffers today:
//! the pool's buffers are plain heap boxes (issue #16 item 0 will let a pool be backed by a
//! UMEM, and then rx can hand frames over without a copy).

use super::sys::{self, Mapping};
use std::io;
use std::os::fd::OwnedFd;

/// One socket's UMEM.
#[derive(Debug)]
pub(crate) struct Umem {
    map: Mapping,
    frame_size: u32,
    frame_count: u32,
}

impl Umem {
    /// Maps `frame_count * frame_size` bytes (the caller validated both).
    pub(crate) fn new(frame_size: u32, frame_count: u32) -> io::Result<Umem> {
        let len = frame_size as usize * frame_count as usize;
        Ok(Umem {
            map: Mapping::anonymous(len)?,
            frame_size,
            frame_count,
        })
    }

    /// Registers the region with AF_XDP socket `fd`.
    pub(crate) fn register(&self, fd: &OwnedFd) -> io::Result<()> {
        let reg = libc::xdp_umem_reg {
            addr: self.map.ptr() as u64,
            len: self.map.len() as u64,
            chunk_size: self.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::setsockopt(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
    }

    /// Address of frame number `i`.
    pub(crate) fn frame_addr(&self, i: u32) -> u64 {
        u64::from(i) * u64::from(self.frame_size)
    }

    /// Number of frames.
    pub(crate) fn frame_count(&self) -> u32 {
        self.frame_count
    }

    /// Bytes per frame.
    pub(crate) fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// The start of the frame holding `addr` (rx descriptors point past the kernel's headroom).
    pub(crate) fn frame_base(&self, addr: u64) -> u64 {
        addr & !(u64::from(self.frame_size) - 1)
    }

    /// Whether `[addr, addr + len)` lies inside one frame of the region.
    fn in_bounds(&self, addr: u64, len: usize) -> bool {
        let end = addr.checked_add(len as u64);
        end.is_some_and(|end| {
            end <= self.map.len() as u64
                && (len == 0 || self.frame_base(addr) == self.frame_base(end - 1))
        })
    }

    /// The bytes `[addr, addr + len)` of a frame user space owns, or `None` if out of bounds.
    pub(crate) fn frame(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if !self.in_bounds(addr, len) {
            return None;
        }
        // SAFETY: the range lies inside the live mapping (checked above). The frame is owned by
        // user space (the caller took it from the rx or completion ring, or holds it as free),
        // so the kernel does not write it while this borrow of `self` lasts.
        Some(unsafe { std::slice::from_raw_parts(self.map.ptr().add(addr as usize), len) })
    }

    /// The bytes `[addr, addr + len)` of a frame user space owns, writable.
    pub(crate) fn frame_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        if !self.in_bounds(addr, len) {
            return None;
        }
        // SAFETY: as in `frame`; `&mut self` makes this the only borrow of the region in user
        // space, and a free frame is not read by the kernel until it is put on the tx ring.
        Some(unsafe { std::slice::from_raw_parts_mut(self.map.ptr().add(addr as usize), len) })
    }
}
