//! The AF_PACKET port: any Linux interface (a veth end, a NIC without AF_XDP), received
//! through a `TPACKET_V3` ring and sent with batched `sendmmsg`.
//!
//! # Receive
//!
//! The kernel writes frames into a ring of blocks mapped into our memory (`PACKET_RX_RING`,
//! `TPACKET_V3`): each block holds many frames and is handed to us whole, when full or after
//! [`AfPacketOptions::retire_ms`]. `rx_burst` walks the ready blocks from where the previous
//! burst stopped (a burst takes at most 32 frames; a block may hold more), copies each frame
//! into a pool packet as a NIC's DMA would, and gives a block back to the kernel only once
//! every frame of it is taken. No system call on this path: a burst with nothing ready reads
//! one status word. What the kernel had to drop because the ring was full is read with
//! `PACKET_STATISTICS` every 1024 bursts (a system call; [`Port::stats`] makes none, as the
//! datapath reads counters after every burst) and counted as `rx_overrun`.
//!
//! The kernel hands frames to a packet socket as its stack holds them, so three repairs
//! make each frame what was on the wire:
//! * **VLAN tag**: a device with receive VLAN offload (veth has it) strips the 802.1Q tag
//!   into metadata; the ring reports it (`TP_STATUS_VLAN_VALID`, TCI and TPID) and we put it
//!   back in front of the EtherType.
//! * **Partial checksum**: a frame sent by a local stack with checksum offload reaches us with
//!   its TCP/UDP checksum not filled in (`TP_STATUS_CSUMNOTREADY`); we compute it in software
//!   (IPv4 and IPv6 without extension headers; other frames go on unchanged, counted).
//! * **Oversize**: a frame longer than [`MAX_FRAME`](crate::MAX_FRAME) (a GSO/GRO
//!   aggregate when the peer has TSO on, or a jumbo) is dropped and counted as `rx_too_large`.
//!   GRO on our own end is turned off while the port is open ([`netif::GroGuard`]); the
//!   peer's TSO is the peer's business (OVS's system tests turn `tx` offload off on the
//!   namespace end of each veth, and so do ours).
//!
//! Frames this socket sends are not received back (`PACKET_IGNORE_OUTGOING`).
//!
//! # Send
//!
//! A burst is one `sendmmsg(MSG_DONTWAIT)` of up to 32 frames (the `iovec`/`mmsghdr` arrays
//! are built on the stack: nothing allocated), with the queueing discipline bypassed
//! (`PACKET_QDISC_BYPASS`, as DPDK-like drivers do). A frame the kernel refuses (too large for
//! the MTU) is counted as a tx error and the rest of the burst goes on; when the socket
//! buffer is full the rest of the burst is dropped and counted, never waited for.
//!
//! # Leaving the interface as found
//!
//! Promiscuous mode is a socket membership (`PACKET_MR_PROMISC`), which the kernel removes
//! when the socket closes, also when the process dies; GRO is restored on drop. Closing the
//! socket unmaps nothing the kernel still writes: the ring is unmapped after the socket is
//! closed.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::batch::{BATCH_MAX, Batch};
use crate::netif;
use crate::packet::{MAX_FRAME, PacketPool};
use crate::port::{Port, PortError, PortStats};

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_COPY: u32 = 1 << 1;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then `tpacket_hdr_v1`).
const BLK_STATUS: usize = 8;
const BLK_NUM_PKTS: usize = 12;
const BLK_FIRST: usize = 16;
const BLK_HDR_LEN: usize = 48;
/// Offsets in `struct tpacket3_hdr`.
const H_NEXT: usize = 0;
const H_SNAPLEN: usize = 12;
const H_LEN: usize = 16;
const H_STATUS: usize = 20;
const H_MAC: usize = 24;
const H_VLAN_TCI: usize = 32;
const H_VLAN_TPID: usize = 36;
const H_SIZE: usize = 48;

/// Bursts between two reads of the kernel's drop counter.
const OVERRUN_POLL_BURSTS: u32 = 1024;

/// Ring geometry and attach behaviour of an [`AfPacketPort`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPacketOptions {
    /// Bytes per ring block: a power of two, at least a page (4 KiB), at most 4 MiB.
    pub block_size: usize,
    /// Number of blocks (1 to 4096); the ring is `block_size × blocks` bytes (≤ 256 MiB).
    pub blocks: usize,
    /// Milliseconds after which a block that is not full is handed to us anyway (1–1000):
    /// the latency a lone packet sees.
    pub retire_ms: u32,
    /// Receive frames for every destination (a switch port must); removed on close.
    pub promisc: bool,
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            block_size: 1 << 18,
            blocks: 16,
            retire_ms: 1,
            promisc: true,
        }
    }
}

impl AfPacketOptions {
    /// Checks the geometry (module doc); a clear error instead of a runaway mapping.
    pub fn validate(&self) -> Result<(), PortError> {
        let bad = |m: String| Err(PortError::Config(m));
        if !self.block_size.is_power_of_two() || self.block_size < 4096 || self.block_size > 4 << 20
        {
            return bad(format!(
                "AF_PACKET block size {} must be a power of two from 4096 to 4194304",
                self.block_size
            ));
        }
        if self.blocks == 0 || self.blocks > 4096 {
            return bad(format!(
                "AF_PACKET block count {} must be 1 to 4096",
                self.blocks
            ));
        }
        if self.block_size * self.blocks > 256 << 20 {
            return bad(format!(
                "AF_PACKET ring of {} bytes is larger than 256 MiB",
                self.block_size * self.blocks
            ));
        }
        if self.retire_ms == 0 || self.retire_ms > 1000 {
            return bad(format!(
                "AF_PACKET block timeout {} ms must be 1 to 1000",
                self.retire_ms
            ));
        }
        Ok(())
    }
}

/// Counters beyond [`PortStats`] that say what the port repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AfPacketStats {
    /// Frames whose VLAN tag the kernel had stripped, put back.
    pub vlan_restored: u64,
    /// Frames whose TCP/UDP checksum we completed in software.
    pub csum_completed: u64,
    /// Frames marked as having a partial checksum that we could not complete (not IPv4/IPv6
    /// TCP/UDP, or extension headers): delivered as they are.
    pub csum_left: u64,
}

/// The kernel's receive ring, mapped into our memory.
struct Ring {
    base: *mut u8,
    len: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned; the socket that the kernel
        // writes through is closed before this runs (field order of AfPacketPort).
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// An AF_PACKET port on one Linux interface (module doc).
pub struct AfPacketPort {
    name: String,
    ifindex: u32,
    // Field order matters for drop: the socket closes before the ring is unmapped, and the
    // GRO setting is restored last.
    fd: OwnedFd,
    ring: Ring,
    _gro: Option<netif::GroGuard>,
    block_size: usize,
    blocks: usize,
    /// Block being read, frame index inside it, and the byte offset of that frame.
    cur_block: usize,
    cur_pkt: u32,
    cur_off: usize,
    bursts: u32,
    stats: PortStats,
    extra: AfPacketStats,
    overrun_seen: u64,
    info: String,
}

// SAFETY: the ring pointer is owned by this port alone (mapped for it, unmapped on its
// drop); moving the port to another thread moves that ownership with it.
unsafe impl Send for AfPacketPort {}

impl std::fmt::Debug for AfPacketPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfPacketPort")
            .field("name", &self.name)
            .field("ifindex", &self.ifindex)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn sys_err(name: &str, op: &'static str) -> PortError {
    PortError::Interface {
        name: name.to_owned(),
        op,
        source: io::Error::last_os_error(),
    }
}

fn setsockopt<T>(
    fd: &OwnedFd,
    name: &str,
    op: &'static str,
    level: libc::c_int,
    opt: libc::c_int,
    v: &T,
) -> Result<(), PortError> {
    // SAFETY: `v` points to a live `T` of exactly the length passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(sys_err(name, op));
    }
    Ok(())
}

impl AfPacketPort {
    /// Opens `ifname` (module doc). A missing interface, a lack of permission or a refused
    /// option is a clear error and changes nothing on the interface.
    pub fn open(ifname: &str, opts: &AfPacketOptions) -> Result<AfPacketPort, PortError> {
        opts.validate()?;
        let ifindex = netif::ifindex(ifname)?;
        let mtu = netif::mtu(ifname)?;
        if mtu as usize + 18 > MAX_FRAME {
            return Err(PortError::Config(format!(
                "{ifname}: MTU {mtu} is larger than the {} bytes a packet buffer holds (jumbo \
                 frames are not supported yet)",
                MAX_FRAME - 18
            )));
        }
        // Protocol 0: the socket receives nothing until it is bound to the interface below,
        // so no other interface's frames land in the ring.
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if raw < 0 {
            return Err(sys_err(ifname, "open packet socket"));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let version: libc::c_int = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        setsockopt(
            &fd,
            ifname,
            "set TPACKET_V3",
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &version,
        )?;
        let one: libc::c_int = 1;
        // Best effort (kernels before 4.20 lack it: then our own frames come back and the
        // switch sees them as input, which NORMAL's learning tolerates but is wasteful).
        let _ = setsockopt(
            &fd,
            ifname,
            "ignore outgoing",
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &one,
        );
        let _ = setsockopt(
            &fd,
            ifname,
            "bypass qdisc",
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &one,
        );
        let frame_size = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: opts.block_size as u32,
            tp_block_nr: opts.blocks as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (opts.block_size / frame_size as usize * opts.blocks) as u32,
            tp_retire_blk_tov: opts.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(
            &fd,
            ifname,
            "set up receive ring",
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &req,
        )?;
        let len = opts.block_size * opts.blocks;
        // SAFETY: maps the ring just configured on this socket, at an address of the
        // kernel's choice; the result is checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(sys_err(ifname, "map receive ring"));
        }
        let ring = Ring {
            base: base.cast(),
            len,
        };
        // SAFETY: `sockaddr_ll` is plain data; all-zero is valid before we fill it in.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the length given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(sys_err(ifname, "bind packet socket"));
        }
        if opts.promisc {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as i32,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(
                &fd,
                ifname,
                "set promiscuous mode",
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq,
            )?;
        }
        let gro = netif::GroGuard::off(ifname)?;
        let info = format!(
            "afpacket {ifname}: ifindex {ifindex}, mtu {mtu}, TPACKET_V3 ring {} x {} KiB, \
             block timeout {} ms{}{}",
            opts.blocks,
            opts.block_size / 1024,
            opts.retire_ms,
            if opts.promisc { ", promiscuous" } else { "" },
            if gro.is_some() {
                ", GRO turned off until the port closes"
            } else {
                ""
            }
        );
        Ok(AfPacketPort {
            name: ifname.to_owned(),
            ifindex,
            fd,
            ring,
            _gro: gro,
            block_size: opts.block_size,
            blocks: opts.blocks,
            cur_block: 0,
            cur_pkt: 0,
            cur_off: 0,
            bursts: 0,
            stats: PortStats::default(),
            extra: AfPacketStats::default(),
            overrun_seen: 0,
            info,
        })
    }

    /// What was attached and how, for the log.
    pub fn info(&self) -> &str {
        &self.info
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The repair counters.
    pub fn extra_stats(&self) -> AfPacketStats {
        self.extra
    }

    /// Start of block `i`.
    fn block(&self, i: usize) -> *mut u8 {
        // SAFETY: `i < blocks`, so the offset stays inside the mapping.
        unsafe { self.ring.base.add(i * self.block_size) }
    }

    /// `len` bytes at `off` in block `i`, as a slice.
    fn bytes(&self, i: usize, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.block_size && i < self.blocks);
        // SAFETY: the range lies inside block `i` of the mapping (asserted), which lives as
        // long as `&self`; the kernel does not write a block while its status says it is
        // ours, and callers only read blocks they found in that state.
        unsafe { std::slice::from_raw_parts(self.block(i).add(off), len) }
    }

    fn block_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status word is 4-aligned (blocks are page-aligned, offset 8) and lives
        // as long as the mapping, which outlives `&self`; the kernel accesses it atomically.
        unsafe { AtomicU32::from_ptr(self.block(i).add(BLK_STATUS).cast::<u32>()) }
    }

    /// Hands the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        self.block_status(self.cur_block)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.cur_block = (self.cur_block + 1) % self.blocks;
        self.cur_pkt = 0;
        self.cur_off = 0;
    }

    /// The kernel's running total of frames dropped for a full ring.
    fn poll_overrun(&mut self) -> u64 {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` and `len` are valid for writes of the sizes given.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r == 0 {
            // Reading clears the kernel's counters: keep the running total.
            self.overrun_seen += u64::from(st.tp_drops);
        }
        self.overrun_seen
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// Completes the TCP/UDP checksum of `frame` in software. False when the frame is not one
/// whose checksum we know how to place (see the module doc).
pub fn complete_l4_checksum(frame: &mut [u8]) -> bool {
    use wire::checksum::{combine, pseudo_header_v4, pseudo_header_v6, sum};
    let mut l3 = 14;
    let mut ethertype = match frame.get(12..14) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => return false,
    };
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        match frame.get(l3 + 2..l3 + 4) {
            Some(b) => ethertype = u16::from_be_bytes([b[0], b[1]]),
            None => return false,
        }
        l3 += 4;
    }
    let (proto, l4, l4_len, pseudo) = match ethertype {
        0x0800 => {
            let Some(h) = frame.get(l3..l3 + 20) else {
                return false;
            };
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff;
            if ihl < 20 || total < ihl || frag != 0 || l3 + total > frame.len() {
                return false;
            }
            let src = std::net::Ipv4Addr::new(h[12], h[13], h[14], h[15]);
            let dst = std::net::Ipv4Addr::new(h[16], h[17], h[18], h[19]);
            let len = total - ihl;
            (
                h[9],
                l3 + ihl,
                len,
                pseudo_header_v4(src, dst, h[9], len as u16),
            )
        }
        0x86dd => {
            let Some(h) = frame.get(l3..l3 + 40) else {
                return false;
            };
            let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if l3 + 40 + len > frame.len() {
                return false;
            }
            let a = |o: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&h[o..o + 16]);
                std::net::Ipv6Addr::from(b)
            };
            (
                h[6],
                l3 + 40,
                len,
                pseudo_header_v6(a(8), a(24), h[6], len as u32),
            )
        }
        _ => return false,
    };
    let at = match proto {
        6 if l4_len >= 20 => l4 + 16,
        17 if l4_len >= 8 => l4 + 6,
        _ => return false,
    };
    frame[at] = 0;
    frame[at + 1] = 0;
    let mut c = !combine(&[pseudo, sum(&frame[l4..l4 + l4_len])]);
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        self.bursts = self.bursts.wrapping_add(1);
        if self.bursts.is_multiple_of(OVERRUN_POLL_BURSTS) {
            let total = self.poll_overrun();
            let new = total - self.stats.rx_overrun;
            self.stats.rx_overrun = total;
            self.stats.rx_dropped += new;
        }
        let room = batch.room();
        let mut n = 0;
        while n < room {
            let status = self.block_status(self.cur_block).load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            let blk = self.bytes(self.cur_block, 0, BLK_HDR_LEN);
            let num = u32_at(blk, BLK_NUM_PKTS);
            if self.cur_pkt == 0 && self.cur_off == 0 {
                self.cur_off = u32_at(blk, BLK_FIRST) as usize;
            }
            if self.cur_pkt >= num {
                self.release_block();
                continue;
            }
            let off = self.cur_off;
            if off < BLK_HDR_LEN || off + H_SIZE > self.block_size {
                // A corrupt block: give it back rather than read outside it.
                self.stats.rx_errors += 1;
                self.release_block();
                continue;
            }
            let h = self.bytes(self.cur_block, off, H_SIZE);
            let next = u32_at(h, H_NEXT) as usize;
            let snap = u32_at(h, H_SNAPLEN) as usize;
            let wire_len = u32_at(h, H_LEN) as usize;
            let st = u32_at(h, H_STATUS);
            let mac = usize::from(u16_at(h, H_MAC));
            let tci = u32_at(h, H_VLAN_TCI) as u16;
            let tpid = u16_at(h, H_VLAN_TPID);
            self.cur_pkt += 1;
            self.cur_off = off + next;
            let last = self.cur_pkt >= num;
            if (next == 0 && !last) || off + mac + snap > self.block_size {
                self.stats.rx_errors += 1;
                self.release_block();
                continue;
            }
            let frame = self.bytes(self.cur_block, off + mac, snap);
            let vlan = st & TP_STATUS_VLAN_VALID != 0;
            let out_len = snap + if vlan { 4 } else { 0 };
            // Runts go on: the datapath counts them (`lost`, reason `runt`).
            if st & TP_STATUS_COPY != 0 || wire_len > snap || out_len > MAX_FRAME {
                self.stats.rx_too_large += 1;
                self.stats.rx_dropped += 1;
                if last {
                    self.release_block();
                }
                continue;
            }
            let Some(mut p) = pool.alloc() else {
                self.stats.rx_nobuf += 1;
                self.stats.rx_dropped += 1;
                if last {
                    self.release_block();
                }
                break;
            };
            if p.resize(out_len).is_err() {
                pool.free(p);
                self.stats.rx_too_large += 1;
                self.stats.rx_dropped += 1;
                if last {
                    self.release_block();
                }
                continue;
            }
            let d = p.data_mut();
            if vlan {
                let tpid = if st & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                    tpid
                } else {
                    0x8100
                };
                d[..12].copy_from_slice(&frame[..12]);
                d[12..14].copy_from_slice(&tpid.to_be_bytes());
                d[14..16].copy_from_slice(&tci.to_be_bytes());
                d[16..].copy_from_slice(&frame[12..]);
                self.extra.vlan_restored += 1;
            } else {
                d.copy_from_slice(frame);
            }
            if st & TP_STATUS_CSUMNOTREADY != 0 {
                if complete_l4_checksum(d) {
                    self.extra.csum_completed += 1;
                } else {
                    self.extra.csum_left += 1;
                }
            }
            if last {
                self.release_block();
            }
            self.stats.count_rx(out_len);
            if let Err(p) = batch.push(p) {
                // Cannot happen (n < room); undo rather than overfill.
                self.stats.rx_packets -= 1;
                self.stats.rx_bytes -= out_len as u64;
                self.stats.rx_nobuf += 1;
                self.stats.rx_dropped += 1;
                pool.free(p);
                break;
            }
            n += 1;
        }
        n
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        let pkts = batch.as_slice();
        let count = pkts.len().min(BATCH_MAX);
        // SAFETY: iovec and mmsghdr are plain C structs; all-zero is a valid value.
        let mut iov: [libc::iovec; BATCH_MAX] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH_MAX] = unsafe { std::mem::zeroed() };
        for (i, p) in pkts.iter().take(count).enumerate() {
            let d = p.data();
            iov[i].iov_base = d.as_ptr() as *mut libc::c_void;
            iov[i].iov_len = d.len();
        }
        for i in 0..count {
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        let mut done = 0usize;
        let mut sent = 0usize;
        while done < count {
            // SAFETY: `msgs[done..count]` are initialised, each pointing to one iovec that
            // points into a packet of `batch`, all alive until this call returns; the kernel
            // only reads them.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr().add(done),
                    (count - done) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                for p in &pkts[done..done + r as usize] {
                    self.stats.count_tx(p.len());
                }
                done += r as usize;
                sent += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    // The socket's buffer is full: drop the rest of the burst, counted.
                    for _ in done..count {
                        self.stats.count_tx_error();
                    }
                    done = count;
                }
                _ => {
                    // This frame was refused (too large, link down): count it, go on.
                    self.stats.count_tx_error();
                    done += 1;
                }
            }
        }
        for _ in count..pkts.len() {
            self.stats.count_tx_error();
        }
        batch.free_all(pool);
        sent
    }

    fn rx_fds(&self, out: &mut Vec<std::os::fd::RawFd>) {
        out.push(self.fd.as_raw_fd());
    }

    fn stats(&self) -> PortStats {
        // No system call here: callers read counters after every burst. The kernel's drop
        // count is folded in by `rx_burst` every OVERRUN_POLL_BURSTS bursts.
        self.stats
    }
}

/// Why AF_PACKET ports cannot be opened here, or `None` (they need `CAP_NET_RAW`).
pub fn afpacket_missing_reason() -> Option<String> {
    // SAFETY: socket(2) with constant arguments; closed right away.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Some(format!(
            "cannot open an AF_PACKET socket (needs CAP_NET_RAW): {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_geometry_is_a_config_error() {
        let base = AfPacketOptions::default();
        for o in [
            AfPacketOptions {
                block_size: 3000,
                ..base.clone()
            },
            AfPacketOptions {
                blocks: 0,
                ..base.clone()
            },
            AfPacketOptions {
                block_size: 4 << 20,
                blocks: 4096,
                ..base.clone()
            },
            AfPacketOptions {
                retire_ms: 0,
                ..base.clone()
            },
        ] {
            assert!(matches!(o.validate(), Err(PortError::Config(_))), "{o:?}");
            assert!(AfPacketPort::open("lo", &o).is_err());
        }
        assert!(base.validate().is_ok());
    }

    #[test]
    fn a_missing_interface_is_a_clear_error() {
        let e = AfPacketPort::open("fsnosuch0", &AfPacketOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("fsnosuch0"), "{e}");
    }

    #[test]
    fn completed_checksums_verify() {
        // IPv4 UDP and TCP, IPv6 UDP, behind a VLAN tag for one of them.
        let mut rng = 7u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) as u8
        };
        for case in 0..60 {
            let payload: Vec<u8> = (0..(case * 7 % 50)).map(|_| next()).collect();
            let v6 = case % 3 == 2;
            let tcp = case % 2 == 1;
            let vlan = case % 5 == 0;
            let mut f = vec![0u8; 12];
            if vlan {
                f.extend_from_slice(&[0x81, 0, 0, 5]);
            }
            let l4_len = if tcp { 20 } else { 8 } + payload.len();
            let mut l4 = vec![0u8; if tcp { 20 } else { 8 }];
            l4[0..2].copy_from_slice(&1234u16.to_be_bytes());
            l4[2..4].copy_from_slice(&80u16.to_be_bytes());
            if tcp {
                l4[12] = 0x50;
            } else {
                l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            }
            l4.extend_from_slice(&payload);
            let proto = if tcp { 6 } else { 17 };
            if v6 {
                f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
                f.extend_from_slice(&(l4_len as u16).to_be_bytes());
                f.extend_from_slice(&[proto, 64]);
                f.extend((0..32).map(|_| next()));
            } else {
                f.extend_from_slice(&[0x08, 0, 0x45, 0]);
                f.extend_from_slice(&((20 + l4_len) as u16).to_be_bytes());
                f.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
                f.extend((0..8).map(|_| next()));
            }
            let l4_at = f.len();
            f.extend_from_slice(&l4);
            assert!(complete_l4_checksum(&mut f), "case {case}");
            // Verify: the checksum over pseudo header + segment is 0xffff.
            let seg = &f[l4_at..];
            let ip = l4_at - if v6 { 40 } else { 20 };
            let pseudo = if v6 {
                let a = |o: usize| {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&f[ip + o..ip + o + 16]);
                    std::net::Ipv6Addr::from(b)
                };
                wire::checksum::pseudo_header_v6(a(8), a(24), proto, seg.len() as u32)
            } else {
                let a = |o: usize| {
                    std::net::Ipv4Addr::new(f[ip + o], f[ip + o + 1], f[ip + o + 2], f[ip + o + 3])
                };
                wire::checksum::pseudo_header_v4(a(12), a(16), proto, seg.len() as u16)
            };
            assert_eq!(
                wire::checksum::combine(&[pseudo, wire::checksum::sum(seg)]),
                0xffff,
                "case {case}"
            );
        }
        // Not ours to fix: ARP, a fragment, a truncated header.
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(!complete_l4_checksum(&mut arp));
        assert!(!complete_l4_checksum(&mut [0u8; 10]));
    }
}
