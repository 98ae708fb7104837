//! Packets handed to a PMD from another thread to run through given datapath actions (OVS
//! `dpif_execute`: what an OpenFlow packet-out becomes once translated).
//!
//! The ports belong to the PMD's thread, so a packet-out is executed there: the control
//! thread [`ExecuteQueue::push`]es `(frame, in_port, actions)` and wakes the thread; the
//! PMD takes the whole queue at the start of its next poll round and runs each packet with
//! the same action executor as megaflow actions (outputs, edits, `ct`, recirculation — the
//! recirculated passes are classified as any other). Frames of any length up to a packet
//! buffer are taken (a runt too: the caller decides). The queue is bounded
//! ([`EXECUTE_QUEUE_MAX`] by default): a push to a full queue is refused and counted, never
//! blocks the PMD. The hot path pays one relaxed atomic load per poll round
//! ([`ExecuteQueue::len`]) when the queue is empty.
//!
//! Each push returns a ticket; [`ExecuteQueue::wait`] returns once that packet has been
//! executed and its outputs sent (an OpenFlow barrier after a packet-out then finds the
//! frame out, as with OVS, which executes a packet-out before it reads the next message).
//!
//! The queue outlives its thread: a PMD stopped and spawned again (a port change) keeps it,
//! and what was queued meanwhile runs at the first round of the new thread.
//! [`crate::PmdThread::spawn`] sets the waker ([`ExecuteQueue::set_waker`]).

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::actions::DpAction;

/// Default bound of a PMD's execute queue.
pub const EXECUTE_QUEUE_MAX: usize = 256;

/// One packet to execute.
pub struct Execute {
    /// The frame.
    pub frame: Vec<u8>,
    /// Datapath in_port the packet is given (its metadata, and the key of a recirculated
    /// pass).
    pub in_port: u32,
    /// The actions (as a megaflow's).
    pub actions: Vec<DpAction>,
    /// Dropped once the packet has been executed (the caller's references that must outlive
    /// the execution, e.g. the recirculation ids its actions use).
    pub keep: Option<Box<dyn Any + Send>>,
}

impl fmt::Debug for Execute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Execute")
            .field("len", &self.frame.len())
            .field("in_port", &self.in_port)
            .field("actions", &self.actions)
            .finish_non_exhaustive()
    }
}

/// Why a packet was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecError {
    /// The queue holds its bound already.
    Full,
    /// Longer than a packet buffer.
    TooLong(usize),
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Full => f.write_str("execute queue full"),
            ExecError::TooLong(n) => {
                write!(f, "frame of {n} bytes is longer than {}", netdev::MAX_FRAME)
            }
        }
    }
}

impl std::error::Error for ExecError {}

/// The queue's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Packets queued.
    pub queued: u64,
    /// Packets executed (taken by the PMD and run).
    pub executed: u64,
    /// Pushes refused because the queue was full.
    pub rejected: u64,
    /// Packets taken but not run (no packet buffer free).
    pub dropped: u64,
}

#[derive(Default)]
struct Inner {
    q: VecDeque<Execute>,
    /// Tickets given (the last push's ticket).
    pushed: u64,
    /// Packets done (FIFO: ticket `t` is done once `done >= t`).
    done: u64,
}

type WakeFn = Box<dyn Fn() + Send + Sync>;

/// A PMD's execute queue (module doc). Shared through an `Arc`.
pub struct ExecuteQueue {
    len: AtomicUsize,
    cap: usize,
    inner: Mutex<Inner>,
    done_cv: Condvar,
    waker: Mutex<Option<WakeFn>>,
    queued: AtomicU64,
    executed: AtomicU64,
    rejected: AtomicU64,
    dropped: AtomicU64,
}

impl fmt::Debug for ExecuteQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecuteQueue")
            .field("len", &self.len())
            .field("cap", &self.cap)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ExecuteQueue {
    /// An empty queue of at most `cap` packets (at least 1).
    pub fn new(cap: usize) -> ExecuteQueue {
        ExecuteQueue {
            len: AtomicUsize::new(0),
            cap: cap.max(1),
            inner: Mutex::new(Inner::default()),
            done_cv: Condvar::new(),
            waker: Mutex::new(None),
            queued: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Packets waiting (one relaxed load: the PMD's per-round check).
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether nothing waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Queues `e` and wakes the PMD's thread; returns the ticket to [`Self::wait`] for.
    /// Refused (and nothing queued): a frame longer than a packet buffer, a full queue
    /// (counted in [`ExecStats::rejected`]). A frame shorter than an Ethernet header is
    /// executed as it is (whether to send runts is the caller's choice).
    pub fn push(&self, e: Execute) -> Result<u64, ExecError> {
        let n = e.frame.len();
        if n > netdev::MAX_FRAME {
            return Err(ExecError::TooLong(n));
        }
        let ticket = {
            let mut g = self.lock();
            if g.q.len() >= self.cap {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                return Err(ExecError::Full);
            }
            g.q.push_back(e);
            g.pushed += 1;
            self.len.store(g.q.len(), Ordering::Release);
            g.pushed
        };
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.wake();
        Ok(ticket)
    }

    /// Wakes the thread that runs the queue's PMD (if one set a waker).
    pub fn wake(&self) {
        if let Some(w) = self
            .waker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            w();
        }
    }

    /// Sets (or clears) what [`Self::push`] calls to wake the PMD's thread.
    pub fn set_waker(&self, w: Option<WakeFn>) {
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = w;
    }

    /// Waits (up to `timeout`) until the packet of `ticket` has been executed; false on
    /// timeout.
    pub fn wait(&self, ticket: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.lock();
        while g.done < ticket {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self
                .done_cv
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// The counters.
    pub fn stats(&self) -> ExecStats {
        ExecStats {
            queued: self.queued.load(Ordering::Relaxed),
            executed: self.executed.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// Moves every waiting packet to `out` (the PMD's side).
    pub(crate) fn take(&self, out: &mut Vec<Execute>) {
        let mut g = self.lock();
        out.extend(g.q.drain(..));
        self.len.store(0, Ordering::Release);
    }

    /// The PMD ran `executed` packets and dropped `dropped` of those it took; their tickets
    /// are done.
    pub(crate) fn finished(&self, executed: usize, dropped: usize) {
        self.executed.fetch_add(executed as u64, Ordering::Relaxed);
        self.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
        let mut g = self.lock();
        g.done += (executed + dropped) as u64;
        drop(g);
        self.done_cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(len: usize) -> Execute {
        Execute {
            frame: vec![0; len],
            in_port: 1,
            actions: vec![DpAction::Output(2)],
            keep: None,
        }
    }

    #[test]
    fn bounded_push_refuses_when_full_and_counts() {
        let q = ExecuteQueue::new(3);
        for i in 1..=3 {
            assert_eq!(q.push(ex(60)), Ok(i));
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.push(ex(60)), Err(ExecError::Full));
        assert_eq!(q.push(ex(60)), Err(ExecError::Full));
        let s = q.stats();
        assert_eq!((s.queued, s.rejected, s.executed), (3, 2, 0));
        let mut out = Vec::new();
        q.take(&mut out);
        assert_eq!(out.len(), 3);
        assert!(q.is_empty());
        // Room again once taken.
        assert_eq!(q.push(ex(60)), Ok(4));
    }

    #[test]
    fn oversized_frames_are_refused_uncounted() {
        let q = ExecuteQueue::new(4);
        let big = netdev::MAX_FRAME + 1;
        assert_eq!(q.push(ex(big)), Err(ExecError::TooLong(big)));
        assert_eq!(q.push(ex(0)), Ok(1));
        assert_eq!(q.push(ex(netdev::MAX_FRAME)), Ok(2));
        assert_eq!(q.stats().rejected, 0);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn wait_returns_once_finished_and_times_out_before() {
        let q = std::sync::Arc::new(ExecuteQueue::new(4));
        let t1 = q.push(ex(60)).unwrap();
        let t2 = q.push(ex(60)).unwrap();
        assert!(!q.wait(t1, Duration::from_millis(20)));
        let mut out = Vec::new();
        q.take(&mut out);
        q.finished(1, 0);
        assert!(q.wait(t1, Duration::from_millis(1)));
        assert!(!q.wait(t2, Duration::from_millis(1)));
        let q2 = q.clone();
        let h = std::thread::spawn(move || q2.wait(t2, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(10));
        q.finished(0, 1);
        assert!(h.join().unwrap());
        let s = q.stats();
        assert_eq!((s.executed, s.dropped), (1, 1));
    }

    #[test]
    fn push_wakes() {
        let q = ExecuteQueue::new(4);
        let n = std::sync::Arc::new(AtomicU64::new(0));
        let n2 = n.clone();
        q.set_waker(Some(Box::new(move || {
            n2.fetch_add(1, Ordering::Relaxed);
        })));
        q.push(ex(60)).unwrap();
        q.push(ex(60)).unwrap();
        assert_eq!(n.load(Ordering::Relaxed), 2);
        q.set_waker(None);
        q.push(ex(60)).unwrap();
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }
}
