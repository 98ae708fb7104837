//! The memory port: frames injected by a test (or the CLI) are received, transmitted frames
//! are captured. For tests of everything above the ports.
//!
//! A [`MemPort`] and any number of [`MemHandle`]s share two queues behind a mutex, so a test
//! can keep a handle while the datapath owns the port (boxed, on another thread). The mutex is
//! taken once per burst; this port is not for benchmarks. A poisoned mutex is recovered, not
//! propagated (the queues hold plain bytes, always consistent).
//!
//! Rx delivers injected frames once, in order; oversize frames are dropped and counted; when
//! the pool is exhausted the frame stays queued for the next burst (unlike a NIC, so tests
//! lose nothing) and nothing is counted, since nothing was lost. Tx copies each frame into the capture list and frees the
//! packet; it never drops.

use crate::batch::Batch;
use crate::packet::{MAX_FRAME, PacketPool};
use crate::port::{Port, PortStats};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Queues {
    rx: VecDeque<Vec<u8>>,
    tx: Vec<Vec<u8>>,
}

fn lock(q: &Mutex<Queues>) -> MutexGuard<'_, Queues> {
    q.lock().unwrap_or_else(|e| e.into_inner())
}

/// A port over in-memory queues. See the module doc.
#[derive(Debug)]
pub struct MemPort {
    name: String,
    queues: Arc<Mutex<Queues>>,
    stats: PortStats,
}

/// A handle to a [`MemPort`]'s queues: inject frames for rx, collect the frames sent by tx.
#[derive(Debug, Clone)]
pub struct MemHandle {
    queues: Arc<Mutex<Queues>>,
}

impl MemPort {
    /// A new memory port with empty queues.
    pub fn new(name: impl Into<String>) -> Self {
        MemPort {
            name: name.into(),
            queues: Arc::default(),
            stats: PortStats::default(),
        }
    }

    /// A handle sharing this port's queues.
    pub fn handle(&self) -> MemHandle {
        MemHandle {
            queues: Arc::clone(&self.queues),
        }
    }
}

impl MemHandle {
    /// Queues a frame for the port to receive.
    pub fn inject(&self, frame: impl Into<Vec<u8>>) {
        lock(&self.queues).rx.push_back(frame.into());
    }

    /// Frames queued for rx and not yet received.
    pub fn rx_pending(&self) -> usize {
        lock(&self.queues).rx.len()
    }

    /// Takes every frame transmitted so far, in order.
    pub fn take_tx(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.queues).tx)
    }

    /// Number of transmitted frames not yet taken.
    pub fn tx_len(&self) -> usize {
        lock(&self.queues).tx.len()
    }
}

impl Port for MemPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut q = lock(&self.queues);
        let mut n = 0;
        while !batch.is_full() {
            let Some(frame) = q.rx.front() else { break };
            if frame.len() > MAX_FRAME {
                q.rx.pop_front();
                self.stats.rx_too_large += 1;
                self.stats.rx_dropped += 1;
                continue;
            }
            let Some(mut p) = pool.alloc() else {
                // Keep the frame queued for the next burst; nothing is lost.
                break;
            };
            if p.set_data(frame).is_err() {
                pool.free(p);
                break;
            }
            self.stats.count_rx(p.len());
            q.rx.pop_front();
            if let Err(p) = batch.push(p) {
                pool.free(p);
                break;
            }
            n += 1;
        }
        n
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        let n = batch.len();
        let mut q = lock(&self.queues);
        for p in batch.drain() {
            self.stats.count_tx(p.len());
            q.tx.push(p.data().to_vec());
            pool.free(p);
        }
        n
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_receive_transmit_capture() {
        let mut port = MemPort::new("m");
        let h = port.handle();
        for i in 0..40u8 {
            h.inject(vec![i; 60]);
        }
        h.inject(vec![0; MAX_FRAME + 1]);
        h.inject(vec![99; 61]);
        let mut pool = PacketPool::new(64);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 32);
        assert_eq!(h.rx_pending(), 10);
        assert_eq!(port.tx_burst(&mut b, &mut pool), 32);
        assert_eq!(port.rx_burst(&mut pool, &mut b), 9);
        assert_eq!(h.rx_pending(), 0);
        port.tx_burst(&mut b, &mut pool);
        let tx = h.take_tx();
        assert_eq!(tx.len(), 41);
        assert_eq!(tx[39], vec![39; 60]);
        assert_eq!(tx[40], vec![99; 61]);
        assert_eq!(h.tx_len(), 0);
        let s = port.stats();
        assert_eq!((s.rx_packets, s.rx_too_large, s.tx_packets), (41, 1, 41));
        assert!(s.is_consistent());
        assert_eq!(pool.available(), 64);
    }

    #[test]
    fn exhausted_pool_keeps_frames_queued() {
        let mut port = MemPort::new("m");
        let h = port.handle();
        for i in 0..5u8 {
            h.inject(vec![i; 60]);
        }
        let mut pool = PacketPool::new(3);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 3);
        assert_eq!(h.rx_pending(), 2);
        assert_eq!(port.stats().rx_dropped, 0);
        b.free_all(&mut pool);
        assert_eq!(port.rx_burst(&mut pool, &mut b), 2);
        assert_eq!(b.as_slice()[0].data(), &[3; 60]);
        b.free_all(&mut pool);
    }
}
