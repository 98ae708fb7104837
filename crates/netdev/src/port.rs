//! The [`Port`] trait, port counters and port errors.
//!
//! # Contract of a port
//!
//! * [`Port::rx_burst`] appends at most `batch.room()` packets (so never more than
//!   [`BATCH_MAX`](crate::BATCH_MAX) in the batch), each a buffer taken from `pool`, and
//!   returns how many it appended. It never blocks. It returns 0 when nothing is available
//!   right now; [`Port::rx_eof`] says whether anything ever will be again.
//! * [`Port::tx_burst`] consumes *every* packet of the batch: each is either sent or dropped
//!   (counted), and its buffer goes back to `pool`. The batch is empty afterwards. It returns
//!   how many were sent.
//! * Frames that cannot be received are dropped and counted per reason, never a panic:
//!   `rx_nobuf` when the pool is exhausted, `rx_too_large` when the frame exceeds
//!   [`MAX_FRAME`](crate::MAX_FRAME).
//! * Counters: `rx_dropped == rx_nobuf + rx_too_large + rx_overrun`, `tx_dropped == tx_errors`.
//!   `rx_errors` counts malformed input records (e.g. a corrupt pcap record), which are not
//!   packets and so not in `rx_dropped`.
//!
//! Ports are `Send`: a PMD thread owns each port it polls; nothing here is shared.

use crate::batch::Batch;
use crate::packet::{PacketError, PacketPool};
use std::path::PathBuf;
use thiserror::Error;

/// Counters of one port. See the module doc for how they relate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets delivered by rx.
    pub rx_packets: u64,
    /// Bytes of the packets delivered by rx.
    pub rx_bytes: u64,
    /// Frames that arrived but were not delivered (sum of the rx drop reasons).
    pub rx_dropped: u64,
    /// Rx drops: the packet pool was exhausted.
    pub rx_nobuf: u64,
    /// Rx drops: the frame was larger than a packet buffer holds.
    pub rx_too_large: u64,
    /// Rx drops before the port saw the frame: the device's receive ring was full (a packet
    /// socket's ring, as the kernel counts it).
    pub rx_overrun: u64,
    /// Malformed input records (not counted as packets).
    pub rx_errors: u64,
    /// Packets sent by tx.
    pub tx_packets: u64,
    /// Bytes of the packets sent by tx.
    pub tx_bytes: u64,
    /// Packets given to tx but not sent (sum of the tx drop reasons).
    pub tx_dropped: u64,
    /// Tx drops: the output failed (I/O error).
    pub tx_errors: u64,
    /// Times a looping source (replay, generator) wrapped back to its first frame.
    pub rx_wraps: u64,
}

impl PortStats {
    /// Whether the drop totals equal the sum of their reasons.
    pub fn is_consistent(&self) -> bool {
        self.rx_dropped == self.rx_nobuf + self.rx_too_large + self.rx_overrun
            && self.tx_dropped == self.tx_errors
    }

    /// Counts one successfully received packet of `len` bytes.
    #[inline]
    pub(crate) fn count_rx(&mut self, len: usize) {
        self.rx_packets += 1;
        self.rx_bytes += len as u64;
    }

    /// Counts one successfully sent packet of `len` bytes.
    #[inline]
    pub(crate) fn count_tx(&mut self, len: usize) {
        self.tx_packets += 1;
        self.tx_bytes += len as u64;
    }

    /// Counts one tx drop for an output error.
    #[inline]
    pub(crate) fn count_tx_error(&mut self) {
        self.tx_errors += 1;
        self.tx_dropped += 1;
    }
}

/// Errors opening or configuring a port, or reading/writing pcap files.
#[derive(Debug, Error)]
pub enum PortError {
    /// An I/O error on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A pcap file is malformed.
    #[error("{context}: malformed pcap: {message}")]
    Pcap {
        /// What was being read or written (usually the path).
        context: String,
        /// What is wrong.
        message: String,
    },
    /// A pcap file has a link type other than Ethernet.
    #[error("{context}: unsupported pcap link type {linktype} (only Ethernet, 1, is supported)")]
    UnsupportedLinkType {
        /// What was being read (usually the path).
        context: String,
        /// The link type number found.
        linktype: u32,
    },
    /// A frame is too large for what it is written to or loaded into.
    #[error("frame {index} is {len} bytes, more than the {max} allowed")]
    FrameTooLarge {
        /// Position of the frame in its input, from 0.
        index: usize,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A Linux interface refused an operation (it does not exist, is taken, or we lack the
    /// permission).
    #[error("{name}: {op}: {source}")]
    Interface {
        /// The interface.
        name: String,
        /// What was being done.
        op: &'static str,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// An invalid port configuration.
    #[error("invalid port configuration: {0}")]
    Config(String),
}

/// A port: a source and sink of packets polled in bursts by a PMD thread.
/// See the module doc for the contract.
pub trait Port: Send {
    /// The port's name.
    fn name(&self) -> &str;

    /// Receives up to `batch.room()` packets into `batch`, buffers taken from `pool`.
    /// Returns the number appended.
    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize;

    /// Sends or drops every packet of `batch`, returning their buffers to `pool`; the batch is
    /// empty afterwards. Returns the number sent.
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize;

    /// A snapshot of the port's counters.
    fn stats(&self) -> PortStats;

    /// True once rx will never deliver a packet again (a pcap at its end, a replay or generator
    /// at its limit). Sinks and live ports return false.
    fn rx_eof(&self) -> bool {
        false
    }

    /// Pushes buffered output to its destination.
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    /// Appends the descriptors that become readable when this port has input (a real
    /// port's sockets), for a thread with nothing to do to sleep on ([`crate::wait`]).
    /// Ports whose input comes from memory have none.
    fn rx_fds(&self, _out: &mut Vec<std::os::fd::RawFd>) {}
}

impl<P: Port + ?Sized> Port for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        (**self).rx_burst(pool, batch)
    }
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        (**self).tx_burst(batch, pool)
    }
    fn stats(&self) -> PortStats {
        (**self).stats()
    }
    fn rx_eof(&self) -> bool {
        (**self).rx_eof()
    }
    fn flush(&mut self) -> Result<(), PortError> {
        (**self).flush()
    }
    fn rx_fds(&self, out: &mut Vec<std::os::fd::RawFd>) {
        (**self).rx_fds(out)
    }
}

/// Outcome of [`rx_copy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxCopy {
    /// The frame was copied into a packet and appended to the batch.
    Delivered,
    /// The frame was too large and dropped (counted).
    TooLarge,
    /// The pool was exhausted; the frame was dropped (counted). The burst should end.
    NoBuf,
}

/// What a NIC does for one received frame: take a buffer from the pool, copy the frame into
/// it (the "DMA"), append it to the batch, count. The caller guarantees `batch` has room.
#[inline]
pub(crate) fn rx_copy(
    frame: &[u8],
    pool: &mut PacketPool,
    batch: &mut Batch,
    stats: &mut PortStats,
) -> RxCopy {
    if frame.len() > crate::packet::MAX_FRAME {
        stats.rx_too_large += 1;
        stats.rx_dropped += 1;
        return RxCopy::TooLarge;
    }
    let Some(mut p) = pool.alloc() else {
        stats.rx_nobuf += 1;
        stats.rx_dropped += 1;
        return RxCopy::NoBuf;
    };
    match p.set_data(frame) {
        Ok(()) => {}
        Err(PacketError::TooLarge { .. }) => {
            // Unreachable after the length check above; count it rather than panic.
            pool.free(p);
            stats.rx_too_large += 1;
            stats.rx_dropped += 1;
            return RxCopy::TooLarge;
        }
    }
    stats.count_rx(frame.len());
    if let Err(p) = batch.push(p) {
        // The caller broke its promise of room; undo rather than overfill.
        stats.rx_packets -= 1;
        stats.rx_bytes -= frame.len() as u64;
        stats.rx_nobuf += 1;
        stats.rx_dropped += 1;
        pool.free(p);
        return RxCopy::NoBuf;
    }
    RxCopy::Delivered
}
