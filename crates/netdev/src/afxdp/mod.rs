//! AF_XDP ports: a Linux interface polled through AF_XDP sockets, one per queue.
//!
//! # What opening a port does
//!
//! [`AfXdpPort::open`] (in this order, so that a refusal leaves the interface untouched):
//!
//! 1. validates the [`AfXdpOptions`] (bad sizes are [`PortError::Config`], before anything is
//!    allocated) and the interface name;
//! 2. finds the interface (a missing one is a [`PortError::Io`] with kind `NotFound`), checks
//!    that its MTU fits the packet buffers and that it has as many rx queues as asked;
//! 3. creates an XSKMAP and loads the redirect program (module [`bpf`]: five instructions
//!    assembled in code, `XDP_REDIRECT` to the socket of `ctx->rx_queue_index`, `XDP_PASS`
//!    when that queue has none), and attaches it through a **BPF link**, in driver mode when
//!    the driver supports XDP and in generic (skb) mode otherwise. An interface that already
//!    has an XDP program (someone else's, or another port's) is refused here;
//! 4. joins promiscuous mode through a socket membership (when asked; see below);
//! 5. creates one AF_XDP socket per queue (module `xsk`: a UMEM, fill/completion/rx/tx
//!    rings) bound in copy or zero-copy mode with need-wakeup, and puts it in the map.
//!
//! Frames arriving on a queue the port did not open find no socket in the map and go on to
//! the kernel's stack (`XDP_PASS`): on a NIC with RSS over more queues, open them all (or
//! reduce them with `ethtool -L IF combined N`), or the switch sees only part of the traffic.
//!
//! [`AfXdpPort::describe`] says what was attached (XDP mode, socket mode and why, queues,
//! sizes, MTU, promiscuity), for the caller to log.
//!
//! # Leaving the interface as found
//!
//! Everything the port changes on the interface is owned by a file descriptor the kernel
//! undoes on close: the BPF link (the program is detached when it closes — the reason for a
//! link rather than netlink's `IFLA_XDP`, see [`bpf`]), the AF_XDP sockets (their map slots
//! emptied), the promiscuous membership. Dropping the port closes them — and so does the
//! death of the process, by a panic or a signal. The MTU and offloads are not changed.
//!
//! # Interface handling
//!
//! * **MTU**: a frame of MTU + 18 bytes (Ethernet header and one VLAN tag) must fit both a
//!   packet buffer ([`MAX_FRAME`]) and a UMEM frame less the kernel's 256-byte XDP headroom;
//!   a larger MTU is a [`PortError::Config`] naming the largest MTU that fits (1902 with the
//!   default 4096-byte frames, 1774 with 2048-byte frames). Jumbo frames wait for issue #16
//!   item 0 (packets longer than 2 KiB). If the MTU is raised after open, longer frames are
//!   counted drops: `rx_too_large` when they fit a UMEM frame, the kernel's `rx_dropped`
//!   ([`AfXdpStats::kernel_rx_dropped`]) when they do not.
//! * **Promiscuous mode** (default on): a switch port must receive frames for every MAC.
//!   The port takes a `PACKET_MR_PROMISC` membership on an AF_PACKET socket, which the kernel
//!   counts and drops when the socket closes, so the interface's own setting comes back.
//! * **Offloads**: XDP in driver mode sees frames before GRO, and a driver refuses XDP while
//!   LRO is on, so received frames are wire frames. Frames the host itself sends through the
//!   interface with TSO or checksum offload are not turned into wire frames for XDP on every
//!   driver (veth hands them over as they are): turn tx offloads off on the sending side
//!   (`ethtool -K IF tx off`), as OVS's system tests do. This port does not change offloads.
//!
//! # Modes
//!
//! [`XdpMode::Copy`] (`XDP_COPY`, the default) works on every driver, veth included: the
//! kernel copies each frame into the UMEM. [`XdpMode::ZeroCopy`] (`XDP_ZEROCOPY`) needs driver
//! support (ice, i40e, mlx5, …; not veth) and fails with a clear error otherwise;
//! [`XdpMode::Auto`] tries zero-copy and falls back to copy, saying so in
//! [`AfXdpPort::describe`]. Frames are copied between the UMEM and [`PacketPool`] packets in
//! every mode today (the pool's buffers are not UMEM yet, issue #16 item 0).
//!
//! # Counters
//!
//! [`PortStats`] as the [`Port`] contract says: `rx_nobuf` (pool exhausted), `rx_too_large`,
//! `rx_errors` (an rx descriptor pointing outside the UMEM), and `tx_errors` for every tx
//! drop, whose reasons [`AfXdpPort::xdp_stats`] splits (tx ring full, no free tx frame), with
//! the kernel's own counters of each socket (`XDP_STATISTICS`: frames the kernel dropped
//! because the rx ring was full or the fill ring empty never reached the port, so they are
//! not in [`PortStats`]). `tx_packets` counts frames handed to the kernel on a tx ring, as a
//! NIC driver counts descriptors queued.
//!
//! # Unsafe
//!
//! The `unsafe` of AF_XDP lives in [`bpf`] (the `bpf(2)` syscall), `sys` (mmap, sockets,
//! socket options), `ring` (the shared ring indices and descriptors) and `umem` (frame
//! slices), every block with a `// SAFETY:` comment. This module is safe code.

pub mod bpf;
mod ring;
mod sys;
mod umem;
mod xsk;

use crate::batch::Batch;
use crate::packet::{MAX_FRAME, PacketPool};
use crate::port::{Port, PortError, PortStats};
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::str::FromStr;
use xsk::{Sizes, Xsk};

/// Bytes the kernel keeps in front of every received frame in a UMEM chunk
/// (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// Bytes a frame may carry beyond the MTU: the Ethernet header (14) and one VLAN tag (4).
pub const L2_OVERHEAD: u32 = 18;
/// Most queues (sockets) a port may open.
pub const MAX_QUEUES: u32 = 64;
/// Smallest and largest ring size (each of fill, completion, rx, tx); a power of two.
pub const RING_SIZE_RANGE: (u32, u32) = (64, 16384);
/// Smallest and largest number of UMEM frames per queue.
pub const FRAME_COUNT_RANGE: (u32, u32) = (128, 65536);
/// Largest UMEM of a port, all queues together (1 GiB).
pub const MAX_UMEM_BYTES: u64 = 1 << 30;

/// How the AF_XDP sockets get frames from the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// `XDP_COPY`: the kernel copies frames into the UMEM. Every driver, veth included.
    #[default]
    Copy,
    /// `XDP_ZEROCOPY`: the driver DMAs into the UMEM. Fails if the driver cannot.
    ZeroCopy,
    /// Zero-copy if the driver can, copy otherwise.
    Auto,
}

impl fmt::Display for XdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XdpMode::Copy => "copy",
            XdpMode::ZeroCopy => "zero-copy",
            XdpMode::Auto => "auto",
        })
    }
}

impl FromStr for XdpMode {
    type Err = PortError;
    fn from_str(s: &str) -> Result<Self, PortError> {
        match s {
            "copy" => Ok(XdpMode::Copy),
            "zero-copy" | "zerocopy" | "zc" => Ok(XdpMode::ZeroCopy),
            "auto" => Ok(XdpMode::Auto),
            _ => Err(PortError::Config(format!(
                "AF_XDP mode {s:?}: expected copy, zero-copy or auto"
            ))),
        }
    }
}

/// Options of an AF_XDP port. [`AfXdpOptions::default`] suits a veth or a 1500-byte-MTU NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpOptions {
    /// Queues to open, 0..queues, one socket each (1..=[`MAX_QUEUES`], at most the
    /// interface's rx queues). Default 1.
    pub queues: u32,
    /// Copy, zero-copy or auto. Default copy.
    pub mode: XdpMode,
    /// Kick the kernel only when a ring's need-wakeup flag asks. Default on.
    pub need_wakeup: bool,
    /// Receive frames for every MAC address while the port is open. Default on.
    pub promiscuous: bool,
    /// Entries of each ring (power of two in [`RING_SIZE_RANGE`]). Default 2048.
    pub ring_size: u32,
    /// Bytes per UMEM frame: 2048 or 4096. Default 4096.
    pub frame_size: u32,
    /// UMEM frames per queue ([`FRAME_COUNT_RANGE`]); half (at most `ring_size`) receive, the
    /// rest send. Default 4096.
    pub frame_count: u32,
}

impl Default for AfXdpOptions {
    fn default() -> Self {
        AfXdpOptions {
            queues: 1,
            mode: XdpMode::Copy,
            need_wakeup: true,
            promiscuous: true,
            ring_size: 2048,
            frame_size: 4096,
            frame_count: 4096,
        }
    }
}

impl AfXdpOptions {
    /// Checks every bound; the error says which option is wrong and what is allowed.
    pub fn validate(&self) -> Result<(), PortError> {
        let bad = |m: String| Err(PortError::Config(format!("AF_XDP: {m}")));
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return bad(format!(
                "queues {} out of range 1..={MAX_QUEUES}",
                self.queues
            ));
        }
        let (lo, hi) = RING_SIZE_RANGE;
        if !self.ring_size.is_power_of_two() || self.ring_size < lo || self.ring_size > hi {
            return bad(format!(
                "ring size {} must be a power of two in {lo}..={hi}",
                self.ring_size
            ));
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad(format!(
                "frame size {} must be 2048 or 4096",
                self.frame_size
            ));
        }
        let (lo, hi) = FRAME_COUNT_RANGE;
        if self.frame_count < lo || self.frame_count > hi {
            return bad(format!(
                "frame count {} out of range {lo}..={hi}",
                self.frame_count
            ));
        }
        let total =
            u64::from(self.queues) * u64::from(self.frame_count) * u64::from(self.frame_size);
        if total > MAX_UMEM_BYTES {
            return bad(format!(
                "UMEM of {total} bytes ({} queues x {} frames x {} bytes) exceeds {MAX_UMEM_BYTES}",
                self.queues, self.frame_count, self.frame_size
            ));
        }
        Ok(())
    }

    /// The largest frame this configuration receives: a packet buffer and a UMEM frame less
    /// the kernel's headroom, whichever is smaller.
    pub fn max_frame(&self) -> u32 {
        (MAX_FRAME as u32).min(self.frame_size.saturating_sub(XDP_HEADROOM))
    }

    /// The largest interface MTU this configuration accepts.
    pub fn max_mtu(&self) -> u32 {
        self.max_frame().saturating_sub(L2_OVERHEAD)
    }
}

/// AF_XDP counters beyond [`PortStats`], all queues summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AfXdpStats {
    /// Tx drops: the tx ring was full (part of `PortStats::tx_errors`).
    pub tx_ring_full: u64,
    /// Tx drops: no free tx frame (all in flight; part of `PortStats::tx_errors`).
    pub tx_no_frame: u64,
    /// Rx descriptors pointing outside the UMEM (`PortStats::rx_errors`).
    pub rx_invalid_descs: u64,
    /// `sendto` kicks of the tx rings.
    pub tx_kicks: u64,
    /// `recvfrom` kicks of the fill rings.
    pub rx_kicks: u64,
    /// Kicks that failed with something other than a transient refusal.
    pub kick_errors: u64,
    /// Frames on the tx rings the kernel has not taken yet.
    pub tx_pending: u64,
    /// Free tx frames (all queues).
    pub tx_free_frames: u64,
    /// Kernel: frames dropped for other reasons (`XDP_STATISTICS.rx_dropped`).
    pub kernel_rx_dropped: u64,
    /// Kernel: frames dropped because the rx ring was full.
    pub kernel_rx_ring_full: u64,
    /// Kernel: times the fill ring was empty when a frame arrived.
    pub kernel_rx_fill_ring_empty: u64,
    /// Kernel: invalid rx descriptors.
    pub kernel_rx_invalid_descs: u64,
    /// Kernel: invalid tx descriptors.
    pub kernel_tx_invalid_descs: u64,
    /// Kernel: times the tx ring was empty when kicked.
    pub kernel_tx_ring_empty: u64,
}

/// An error about interface `ifname`: `ifname: message`.
fn if_error(ifname: &str, kind: io::ErrorKind, message: String) -> PortError {
    PortError::Io {
        path: PathBuf::from(ifname),
        source: io::Error::new(kind, message),
    }
}

/// Why AF_XDP ports cannot be opened here (not root, no AF_XDP or BPF support), or `None`
/// when they can.
pub fn afxdp_missing_reason() -> Option<String> {
    let perm = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES));
    match sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0) {
        Ok(_) => {}
        Err(e) if perm(&e) => {
            return Some(format!("AF_XDP sockets need root (CAP_NET_RAW): {e}"));
        }
        Err(e) => {
            return Some(format!(
                "the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS): {e}"
            ));
        }
    }
    let map = match bpf::create_xskmap(1) {
        Ok(m) => m,
        Err(e) if perm(&e) => {
            return Some(format!("BPF maps need root (CAP_BPF, CAP_NET_ADMIN): {e}"));
        }
        Err(e) => return Some(format!("cannot create an XSKMAP: {e}")),
    };
    match bpf::load_redirect_program(&map) {
        Ok(_) => None,
        Err(e) => Some(format!("cannot load an XDP program: {e}")),
    }
}

/// An AF_XDP port on one Linux interface (see the module doc).
#[derive(Debug)]
pub struct AfXdpPort {
    name: String,
    ifindex: u32,
    /// The sockets, queue `i` at index `i`. Dropped first: sockets closed, UMEMs unmapped.
    queues: Vec<Xsk>,
    /// The BPF link: dropping it detaches the program.
    _link: bpf::Link,
    _prog: OwnedFd,
    _map: OwnedFd,
    /// The promiscuous membership, when asked for.
    _promisc: Option<OwnedFd>,
    zero_copy: bool,
    stats: PortStats,
    info: String,
    next_rx: usize,
    next_tx: usize,
}

impl AfXdpPort {
    /// Opens interface `ifname` with `opts` (see the module doc for the steps and errors).
    pub fn open(ifname: &str, opts: &AfXdpOptions) -> Result<AfXdpPort, PortError> {
        opts.validate()?;
        if ifname.is_empty()
            || ifname.len() > 15
            || ifname
                .bytes()
                .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace())
        {
            return Err(PortError::Config(format!(
                "AF_XDP: {ifname:?} is not a valid interface name"
            )));
        }
        let Some(ifindex) = sys::ifindex(ifname) else {
            return Err(if_error(
                ifname,
                io::ErrorKind::NotFound,
                "no such network interface".into(),
            ));
        };
        let sys_err = |what: &str, e: io::Error| if_error(ifname, e.kind(), format!("{what}: {e}"));
        let mtu = sys::mtu(ifname).map_err(|e| sys_err("reading the MTU", e))?;
        if mtu > opts.max_mtu() {
            return Err(PortError::Config(format!(
                "AF_XDP: {ifname} has MTU {mtu}: frames of up to {} bytes do not fit the \
                 {}-byte packet buffers; lower its MTU to at most {} (jumbo frames are not \
                 supported yet)",
                mtu + L2_OVERHEAD,
                opts.max_frame(),
                opts.max_mtu()
            )));
        }
        let have = sys::rx_queues(ifname).map_err(|e| sys_err("counting rx queues", e))?;
        if opts.queues > have {
            return Err(PortError::Config(format!(
                "AF_XDP: {ifname} has {have} rx queue(s), {} asked",
                opts.queues
            )));
        }

        let map = bpf::create_xskmap(opts.queues)
            .map_err(|e| sys_err("creating the XSKMAP (root needed)", e))?;
        let prog = bpf::load_redirect_program(&map).map_err(|e| sys_err("XDP program", e))?;
        let taken = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EEXIST));
        let refuse = |e: io::Error| {
            if_error(
                ifname,
                io::ErrorKind::AddrInUse,
                format!(
                    "already has an XDP program attached (another AF_XDP port or someone \
                     else's); left untouched ({e})"
                ),
            )
        };
        let (link, xdp_attach) = match bpf::attach(&prog, ifindex, bpf::XDP_FLAGS_DRV_MODE) {
            Ok(l) => (l, "driver"),
            Err(e) if taken(&e) => return Err(refuse(e)),
            Err(_) => match bpf::attach(&prog, ifindex, bpf::XDP_FLAGS_SKB_MODE) {
                Ok(l) => (l, "generic (skb)"),
                Err(e) if taken(&e) => return Err(refuse(e)),
                Err(e) => return Err(sys_err("attaching the XDP program", e)),
            },
        };
        let promisc = if opts.promiscuous {
            Some(sys::promisc_guard(ifindex).map_err(|e| sys_err("promiscuous mode", e))?)
        } else {
            None
        };

        let sizes = Sizes {
            ring_size: opts.ring_size,
            frame_size: opts.frame_size,
            frame_count: opts.frame_count,
        };
        let mut queues = Vec::with_capacity(opts.queues as usize);
        let mut mode_note = String::new();
        for q in 0..opts.queues {
            let open = |zc| Xsk::open(ifindex, q, sizes, zc, opts.need_wakeup);
            let x = match opts.mode {
                XdpMode::Copy => open(false).map_err(|e| sys_err(&format!("queue {q}"), e))?,
                XdpMode::ZeroCopy => open(true).map_err(|e| {
                    if_error(
                        ifname,
                        e.kind(),
                        format!(
                            "queue {q}: the driver refuses AF_XDP zero-copy ({e}); use mode \
                             copy or auto"
                        ),
                    )
                })?,
                XdpMode::Auto => match open(true) {
                    Ok(x) => x,
                    Err(zc) => {
                        if mode_note.is_empty() {
                            mode_note = format!(" (zero-copy refused: {zc})");
                        }
                        open(false).map_err(|e| sys_err(&format!("queue {q}"), e))?
                    }
                },
            };
            bpf::xskmap_set(&map, q, x.raw_fd())
                .map_err(|e| sys_err(&format!("queue {q}: XSKMAP update"), e))?;
            queues.push(x);
        }
        let zero_copy = queues.iter().all(Xsk::is_zero_copy);
        let info = format!(
            "afxdp {ifname} (ifindex {ifindex}): XDP program in {xdp_attach} mode via BPF link; \
             {} queue(s) 0..{}, {} mode{mode_note}, need-wakeup {}, rings {} entries, UMEM \
             {} x {} bytes per queue; MTU {mtu} (max {}), promiscuous {}",
            opts.queues,
            opts.queues,
            if zero_copy { "zero-copy" } else { "copy" },
            if opts.need_wakeup { "on" } else { "off" },
            opts.ring_size,
            opts.frame_count,
            opts.frame_size,
            opts.max_mtu(),
            if opts.promiscuous { "on" } else { "unchanged" },
        );
        Ok(AfXdpPort {
            name: ifname.to_owned(),
            ifindex,
            queues,
            _link: link,
            _prog: prog,
            _map: map,
            _promisc: promisc,
            zero_copy,
            stats: PortStats::default(),
            info,
            next_rx: 0,
            next_tx: 0,
        })
    }

    /// What was attached: XDP mode, socket mode (and why), queues, sizes, MTU, promiscuity.
    pub fn describe(&self) -> &str {
        &self.info
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Number of queues (sockets).
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Whether every socket is bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// AF_XDP counters, user space and kernel, all queues summed.
    pub fn xdp_stats(&self) -> AfXdpStats {
        let mut s = AfXdpStats::default();
        for q in &self.queues {
            let c = q.counters;
            s.tx_ring_full += c.tx_ring_full;
            s.tx_no_frame += c.tx_no_frame;
            s.rx_invalid_descs += c.rx_invalid_descs;
            s.tx_kicks += c.tx_kicks;
            s.rx_kicks += c.rx_kicks;
            s.kick_errors += c.kick_errors;
            s.tx_pending += u64::from(q.tx_pending());
            s.tx_free_frames += q.free_tx_frames() as u64;
            if let Ok(k) = q.kernel_stats() {
                s.kernel_rx_dropped += k.rx_dropped;
                s.kernel_rx_ring_full += k.rx_ring_full;
                s.kernel_rx_fill_ring_empty += k.rx_fill_ring_empty_descs;
                s.kernel_rx_invalid_descs += k.rx_invalid_descs;
                s.kernel_tx_invalid_descs += k.tx_invalid_descs;
                s.kernel_tx_ring_empty += k.tx_ring_empty_descs;
            }
        }
        s
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let n = self.queues.len();
        let mut got = 0;
        for k in 0..n {
            if batch.room() == 0 {
                break;
            }
            let i = (self.next_rx + k) % n;
            got += self.queues[i].rx(pool, batch, &mut self.stats);
        }
        self.next_rx = (self.next_rx + 1) % n;
        got
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        if batch.is_empty() {
            return 0;
        }
        let q = self.next_tx;
        self.next_tx = (self.next_tx + 1) % self.queues.len();
        let sent = self.queues[q].tx(batch, &mut self.stats);
        pool.free_batch(batch);
        sent
    }

    fn rx_fds(&self, out: &mut Vec<std::os::fd::RawFd>) {
        out.extend(self.queues.iter().map(|q| q.raw_fd()));
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn flush(&mut self) -> Result<(), PortError> {
        for q in &mut self.queues {
            q.reap();
            q.kick_tx_if_needed();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_fit_a_1500_mtu() {
        let o = AfXdpOptions::default();
        o.validate().unwrap();
        assert_eq!(o.max_frame(), MAX_FRAME as u32);
        assert!(o.max_mtu() >= 1500);
        let small = AfXdpOptions {
            frame_size: 2048,
            ..o
        };
        assert_eq!(small.max_mtu(), 2048 - 256 - 18);
    }

    /// A program attached by someone else (the old netlink way, as `ip link set … xdp` does):
    /// the port refuses the interface and the program stays.
    #[test]
    fn someone_elses_program_is_refused_and_left_attached() {
        use testutil::netns::{Netns, Veth, ip, netns_missing_reason};
        if let Some(r) = netns_missing_reason().or_else(afxdp_missing_reason) {
            testutil::skip(&r);
            return;
        }
        let ns = Netns::new("e").expect("netns");
        let v = Veth::new(&ns, &["10.209.0.1/24"], None).expect("veth");
        let ifindex = sys::ifindex(&v.outside).expect("ifindex");
        let map = bpf::create_xskmap(1).unwrap();
        let prog = bpf::load_redirect_program(&map).unwrap();
        use std::os::fd::AsRawFd;
        sys::netlink_set_xdp(ifindex, prog.as_raw_fd(), bpf::XDP_FLAGS_SKB_MODE)
            .expect("netlink attach");
        drop(prog);
        let shown = || ip(&["-o", "link", "show", &v.outside]).unwrap();
        let before = shown();
        assert!(before.contains("xdpgeneric"), "{before}");
        for mode in [XdpMode::Copy, XdpMode::Auto] {
            let opts = AfXdpOptions {
                mode,
                ..AfXdpOptions::default()
            };
            let text = AfXdpPort::open(&v.outside, &opts).unwrap_err().to_string();
            assert!(text.contains("already has an XDP program"), "{text}");
        }
        assert_eq!(shown(), before, "the refusal changed the interface");
        sys::netlink_set_xdp(ifindex, -1, bpf::XDP_FLAGS_SKB_MODE).expect("netlink detach");
        assert!(!shown().contains("xdp"), "{}", shown());
    }

    #[test]
    fn modes_parse() {
        assert_eq!("copy".parse::<XdpMode>().unwrap(), XdpMode::Copy);
        assert_eq!("zero-copy".parse::<XdpMode>().unwrap(), XdpMode::ZeroCopy);
        assert_eq!("auto".parse::<XdpMode>().unwrap(), XdpMode::Auto);
        assert!(matches!(
            "fast".parse::<XdpMode>(),
            Err(PortError::Config(_))
        ));
        for m in [XdpMode::Copy, XdpMode::ZeroCopy, XdpMode::Auto] {
            assert_eq!(m.to_string().parse::<XdpMode>().unwrap(), m);
        }
    }
}
