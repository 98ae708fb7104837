//! Ports of flowswitch: packet buffers, batches, the [`Port`] trait and its kinds.
//!
//! # What this crate owns
//!
//! * [`Packet`] and [`PacketPool`] (module [`packet`]): fixed 2 KiB buffers with 128 bytes of
//!   headroom, taken from and returned to a per-thread, preallocated free list.
//! * [`Batch`] (module [`batch`]): up to [`BATCH_MAX`] = 32 packets, the unit of every burst.
//! * [`Port`] (module [`port`]): `rx_burst` / `tx_burst` in batches, [`PortStats`] with a
//!   counter per drop reason, [`PortError`] for open/configuration errors.
//! * Port kinds: [`PcapReaderPort`] / [`PcapWriterPort`] and whole-file helpers
//!   [`read_pcap`] / [`write_pcap`] (module [`pcap`]); [`ReplayPort`], an in-memory pcap looped
//!   forever (module [`replay`]); [`GeneratorPort`], synthetic traffic for N flows (module
//!   [`generator`]; the benchmark connections' frames in [`conn_frames`]); [`NullPort`], a
//!   sink (module [`null`]); [`MemPort`], injected rx and captured tx for tests (module
//!   [`mem`]); real Linux interfaces: [`AfPacketPort`] (module [`afpacket`], a `TPACKET_V3`
//!   ring and batched `sendmmsg`), [`AfXdpPort`] (module [`afxdp`], AF_XDP sockets and an XDP
//!   redirect program flowswitch loads itself) and [`TapPort`] (module [`tap`], an interface
//!   the switch creates for the host), with interface helpers in [`netif`].
//!
//! It does not parse packets beyond what building generator frames needs (that is `wire` and
//! `flow`), and it does not decide anything about forwarding.
//!
//! # Invariants
//!
//! * The hot path (`rx_burst`, `tx_burst`, `PacketPool::alloc`/`free`, `Batch` operations)
//!   allocates nothing in steady state: every port kind except [`MemPort`] copies frames into
//!   pool buffers the way a NIC driver DMAs them (DPDK's pcap PMD with `infinite_rx`), and the
//!   pool and batches only move owned boxes around reserved `Vec` capacity. A test with a
//!   counting global allocator guards this (`tests/no_alloc.rs`).
//! * No input bytes make a port panic: oversize frames, an exhausted pool, malformed pcap
//!   records and write failures are counted ([`PortStats`]) or returned as [`PortError`].
//! * A batch never holds more than [`BATCH_MAX`] packets.
//!
//! # Unsafe
//!
//! This crate is where the I/O `unsafe` of flowswitch lives, each block with a `// SAFETY:`
//! comment: [`afpacket`] (socket options, the mapped ring, `sendmmsg`), [`afxdp`]'s submodules
//! (the `bpf(2)` syscall, UMEM, rings and sockets), [`tap`] and [`netif`] (`ioctl`s). The
//! other port kinds are safe code; the CPU helpers [`tsc`] (cycle counter) and [`prefetch`]
//! (cache hint) each wrap one intrinsic.

pub mod afpacket;
pub mod afxdp;
pub mod batch;
pub mod conn_frames;
pub mod generator;
pub mod mem;
pub mod netif;
pub mod null;
pub mod packet;
pub mod pcap;
pub mod port;
pub mod prefetch;
pub mod replay;
pub mod tap;
pub mod tsc;
pub mod wait;

pub use afpacket::{AfPacketOptions, AfPacketPort};
pub use afxdp::{AfXdpOptions, AfXdpPort, AfXdpStats, XdpMode, afxdp_missing_reason};
pub use batch::{BATCH_MAX, Batch};
pub use generator::{
    FlowSpec, FrameSize, GeneratorConfig, GeneratorPort, L4Spec, Order, ProtocolMix,
};
pub use mem::{MemHandle, MemPort};
pub use null::NullPort;
pub use packet::{BUF_SIZE, HEADROOM, MAX_FRAME, Packet, PacketError, PacketPool, PoolStats};
pub use pcap::{
    PcapReaderPort, PcapWriterPort, read_pcap, read_pcap_each, read_pcap_each_from, read_pcap_from,
    write_pcap, write_pcap_to,
};
pub use port::{Port, PortError, PortStats};
pub use replay::{FrameSet, ReplayPort};
pub use tap::TapPort;
