//! PMD threads: a [`Pmd`] polling on its own OS thread, pinned to one core, until told to stop.
//!
//! [`PmdThread::spawn`] moves a configured [`Pmd`] onto a new thread (named `pmd-cNN`, as OVS
//! names its PMD threads), pins it to the requested core with `core_affinity` and loops on
//! [`Pmd::poll_once`]. The returned [`PmdThread`] is the handle: [`PmdThread::snapshot`] reads
//! the counters while the thread runs, [`PmdThread::clear_stats`] asks it to zero them
//! (OVS `pmd-stats-clear`), [`PmdThread::stop`] asks it to stop and [`PmdThread::join`] gives
//! the [`Pmd`] back (with its ports, caches and final counters). Several PMD threads, one per
//! core, are independent: each owns its `Pmd` (EMC, SMC, pool, ports, counters).
//!
//! # Pinning
//!
//! If the core does not exist or the OS refuses the affinity, the thread runs unpinned; the
//! handle says so ([`Pinning`]) instead of failing, so a benchmark on a small VM still runs
//! and its report can state what happened.
//!
//! # Sleeping when idle
//!
//! By default the loop never pauses (OVS's PMD threads busy-poll their pinned core). With
//! [`PmdThreadConfig::idle_park`] the thread parks, bounded, once a whole check interval
//! received nothing, after publishing a snapshot; [`PmdThread::wake`] (and a clear or a
//! stop) unparks it. Input the thread cannot see arrive must be followed by a wake (a
//! memory port's injection); a parked thread still looks at its ports at least once per
//! `idle_park`.
//!
//! # What crosses threads (and what does not)
//!
//! Nothing written per packet is shared. The packet path updates the `Pmd`'s own counters
//! (plain `u64`s, thread-local by ownership). Every [`PmdThreadConfig::check_every`] polls
//! the thread reads the clock and, once per [`PmdThreadConfig::publish_interval`] (or at once
//! after a clear, and on exit), publishes a copy of its [`PmdStats`] as an immutable
//! [`PmdSnapshot`] in an `ArcSwap` that readers load without locks and without ever blocking
//! the PMD. The only state the PMD reads that others write is the stop flag (one relaxed load
//! per poll of a line written once) and the clear-request counter (read once per check).
//!
//! # Invariants
//!
//! - A snapshot is a consistent copy taken between two polls, so within it the counters
//!   partition the packets ([`PmdStats::classified`] `== packets_received`).
//! - Snapshots are published in order: `seq` strictly increases, and `clear_generation` never
//!   decreases; a snapshot with `clear_generation >= g` was taken after clear request `g`
//!   was honoured.
//! - After [`PmdThread::join`] returns, the last snapshot equals the returned `Pmd`'s stats.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::pmd::{Pmd, PmdStats};

/// How a PMD thread is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmdThreadConfig {
    /// Core to pin to (`None`: do not pin).
    pub core: Option<usize>,
    /// Polls between two looks at the clock and the clear-request counter (≥ 1).
    pub check_every: u32,
    /// Minimum time between two published snapshots.
    pub publish_interval: Duration,
    /// Thread name (`None`: `pmd-cNN` from the core, or `pmd` when unpinned).
    pub name: Option<String>,
    /// Sleep when idle: after [`PmdThreadConfig::check_every`] polls in a row received
    /// nothing, the thread publishes a snapshot and parks for at most this long, until
    /// [`PmdThread::wake`] (or a clear, a stop) unparks it. `None` (the default): poll
    /// without pause, as OVS's PMD threads do. For a thread that shares its core with
    /// others (the daemon's unpinned datapath thread, like OVS's main thread polling
    /// non-PMD ports).
    pub idle_park: Option<Duration>,
}

impl Default for PmdThreadConfig {
    fn default() -> Self {
        PmdThreadConfig {
            core: None,
            check_every: 64,
            publish_interval: Duration::from_millis(1),
            name: None,
            idle_park: None,
        }
    }
}

impl PmdThreadConfig {
    /// The default configuration pinned to `core`.
    pub fn on_core(core: usize) -> Self {
        PmdThreadConfig {
            core: Some(core),
            ..PmdThreadConfig::default()
        }
    }
}

/// Whether the thread got the core it asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinning {
    /// No core was requested.
    NotRequested,
    /// Pinned to this core.
    Pinned(usize),
    /// Pinning to `core` failed; the thread runs unpinned.
    Unpinned {
        /// The core asked for.
        core: usize,
        /// Why it failed.
        reason: String,
    },
}

impl Pinning {
    /// The core the thread is pinned to, if any.
    pub fn core(&self) -> Option<usize> {
        match self {
            Pinning::Pinned(c) => Some(*c),
            _ => None,
        }
    }
}

impl fmt::Display for Pinning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pinning::NotRequested => f.write_str("unpinned (no core requested)"),
            Pinning::Pinned(c) => write!(f, "pinned to core {c}"),
            Pinning::Unpinned { core, reason } => {
                write!(f, "UNPINNED (core {core} requested: {reason})")
            }
        }
    }
}

/// One published copy of a PMD thread's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmdSnapshot {
    /// Publication number (0 = the one made at spawn, before the first poll).
    pub seq: u64,
    /// Clear requests honoured so far (compare with [`PmdThread::clear_stats`]'s return).
    pub clear_generation: u64,
    /// Polls since the thread started.
    pub polls: u64,
    /// The counters (cumulative since the last clear).
    pub stats: PmdStats,
    /// When the copy was taken (on the PMD thread).
    pub at: Instant,
    /// When the counters were last cleared (or the thread started).
    pub since: Instant,
    /// True for the final snapshot, published when the thread stopped.
    pub last: bool,
    /// Times the thread parked for want of packets ([`PmdThreadConfig::idle_park`]).
    pub parks: u64,
}

impl PmdSnapshot {
    /// Time the counters cover: from the last clear to this copy.
    pub fn elapsed(&self) -> Duration {
        self.at.saturating_duration_since(self.since)
    }

    /// Millions of packets received per second over [`PmdSnapshot::elapsed`].
    pub fn mpps(&self) -> f64 {
        let s = self.elapsed().as_secs_f64();
        if s > 0.0 {
            self.stats.packets_received as f64 / s / 1e6
        } else {
            0.0
        }
    }
}

/// Why a PMD thread could not be started or joined.
#[derive(Debug)]
pub enum PmdThreadError {
    /// The OS could not create the thread.
    Spawn(std::io::Error),
    /// The thread panicked (its `Pmd` is lost).
    Panicked(String),
}

impl fmt::Display for PmdThreadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmdThreadError::Spawn(e) => write!(f, "cannot start the PMD thread: {e}"),
            PmdThreadError::Panicked(m) => write!(f, "the PMD thread panicked: {m}"),
        }
    }
}

impl std::error::Error for PmdThreadError {}

struct Shared {
    stop: AtomicBool,
    clear_requests: AtomicU64,
    snapshot: ArcSwap<PmdSnapshot>,
    /// Wakes the thread when it sleeps on its ports' descriptors.
    waker: Option<netdev::wait::Waker>,
}

/// Handle of a running PMD thread. See the module doc.
///
/// Dropping the handle without [`PmdThread::join`] stops the thread and waits for it.
pub struct PmdThread {
    shared: Arc<Shared>,
    join: Option<JoinHandle<Pmd>>,
    pinning: Pinning,
    tid: Option<u32>,
    name: String,
}

impl fmt::Debug for PmdThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PmdThread")
            .field("name", &self.name)
            .field("pinning", &self.pinning)
            .field("tid", &self.tid)
            .finish_non_exhaustive()
    }
}

/// The calling thread's kernel thread id (Linux: from `/proc/thread-self`).
fn current_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

fn pin(core: usize) -> Pinning {
    let Some(ids) = core_affinity::get_core_ids() else {
        return Pinning::Unpinned {
            core,
            reason: "the OS did not list the cores".into(),
        };
    };
    let Some(id) = ids.into_iter().find(|c| c.id == core) else {
        return Pinning::Unpinned {
            core,
            reason: "no such core in this process's affinity set".into(),
        };
    };
    if core_affinity::set_for_current(id) {
        Pinning::Pinned(core)
    } else {
        Pinning::Unpinned {
            core,
            reason: "the OS refused the affinity".into(),
        }
    }
}

/// The PMD thread's side: the loop and its publishing state.
struct Runner {
    pmd: Pmd,
    shared: Arc<Shared>,
    seq: u64,
    polls: u64,
    clear_generation: u64,
    since: Instant,
    parks: u64,
    /// Sleeps on the ports' descriptors, when they have some (else a timed park).
    waiter: Option<netdev::wait::Waiter>,
    fds: Vec<std::os::fd::RawFd>,
}

impl Runner {
    fn publish(&mut self, last: bool) {
        self.seq += 1;
        let snap = PmdSnapshot {
            seq: self.seq,
            clear_generation: self.clear_generation,
            polls: self.polls,
            stats: self.pmd.stats().clone(),
            at: Instant::now(),
            since: self.since,
            last,
            parks: self.parks,
        };
        self.shared.snapshot.store(Arc::new(snap));
    }

    fn run(mut self, cfg: &PmdThreadConfig) -> Pmd {
        let check_every = u64::from(cfg.check_every.max(1));
        let mut next_check = check_every;
        let mut next_publish = Instant::now() + cfg.publish_interval;
        // Polls in a row that received nothing.
        let mut idle = 0u64;
        while !self.shared.stop.load(Ordering::Relaxed) {
            if self.pmd.poll_once() == 0 {
                idle += 1;
            } else {
                idle = 0;
            }
            self.polls += 1;
            if self.polls < next_check {
                continue;
            }
            next_check = self.polls + check_every;
            if let Some(max) = cfg.idle_park
                && idle >= check_every
                && self.shared.clear_requests.load(Ordering::Acquire) == self.clear_generation
            {
                // Readers see the counters (and this pause) as they are before it.
                self.parks += 1;
                self.publish(false);
                next_publish = Instant::now() + cfg.publish_interval;
                idle = 0;
                // A wake between the last poll and here leaves the token set: no lost
                // wake-up.
                self.fds.clear();
                self.pmd.rx_fds(&mut self.fds);
                match &mut self.waiter {
                    Some(w) if !self.fds.is_empty() => {
                        w.wait(&self.fds, max);
                    }
                    _ => std::thread::park_timeout(max),
                }
                continue;
            }
            let requested = self.shared.clear_requests.load(Ordering::Acquire);
            if requested != self.clear_generation {
                self.pmd.clear_stats();
                self.clear_generation = requested;
                self.since = Instant::now();
                self.publish(false);
                next_publish = self.since + cfg.publish_interval;
                continue;
            }
            let now = Instant::now();
            if now >= next_publish {
                self.publish(false);
                next_publish = now + cfg.publish_interval;
            }
        }
        self.publish(true);
        self.pmd
    }
}

impl PmdThread {
    /// Starts `pmd` polling on a new thread configured by `cfg`.
    ///
    /// Returns once the thread has pinned itself (or failed to) and published its first
    /// snapshot, so [`PmdThread::pinning`] and [`PmdThread::tid`] are known.
    pub fn spawn(pmd: Pmd, cfg: PmdThreadConfig) -> Result<PmdThread, PmdThreadError> {
        let now = Instant::now();
        let first = PmdSnapshot {
            seq: 0,
            clear_generation: 0,
            polls: 0,
            stats: pmd.stats().clone(),
            at: now,
            since: now,
            last: false,
            parks: 0,
        };
        // Without a waiter (no eventfd) the thread parks on a timer, as without real ports.
        let (waiter, waker) = match cfg.idle_park.map(|_| netdev::wait::Waiter::new()) {
            Some(Ok((w, k))) => (Some(w), Some(k)),
            _ => (None, None),
        };
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            clear_requests: AtomicU64::new(0),
            snapshot: ArcSwap::from_pointee(first),
            waker,
        });
        let name = cfg.name.clone().unwrap_or_else(|| match cfg.core {
            Some(c) => format!("pmd-c{c:02}"),
            None => "pmd".to_string(),
        });
        let (tx, rx) = mpsc::channel::<(Pinning, Option<u32>)>();
        let exec = Arc::clone(pmd.execute_queue());
        let exec_waker = shared.waker.clone();
        let thread_shared = Arc::clone(&shared);
        let join = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let pinning = match cfg.core {
                    Some(c) => pin(c),
                    None => Pinning::NotRequested,
                };
                // The receiver waits for this message; if it is gone nobody cares.
                let _ = tx.send((pinning, current_tid()));
                let runner = Runner {
                    pmd,
                    shared: thread_shared,
                    seq: 0,
                    polls: 0,
                    clear_generation: 0,
                    since: Instant::now(),
                    parks: 0,
                    waiter,
                    fds: Vec::new(),
                };
                runner.run(&cfg)
            })
            .map_err(PmdThreadError::Spawn)?;
        // Packets queued for execution wake this thread (a respawned PMD's queue is woken
        // by its new thread from now on).
        let th = join.thread().clone();
        exec.set_waker(Some(Box::new(move || {
            th.unpark();
            if let Some(w) = &exec_waker {
                w.wake();
            }
        })));
        let mut handle = PmdThread {
            shared,
            join: Some(join),
            pinning: Pinning::NotRequested,
            tid: None,
            name,
        };
        match rx.recv() {
            Ok((pinning, tid)) => {
                handle.pinning = pinning;
                handle.tid = tid;
                Ok(handle)
            }
            // The thread died before reporting: join to learn why.
            Err(_) => match handle.join() {
                Ok(_) => Err(PmdThreadError::Panicked(
                    "the thread exited before starting".into(),
                )),
                Err(e) => Err(e),
            },
        }
    }

    /// Whether the thread is pinned.
    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }

    /// The thread's kernel id (for `/proc/self/task/TID/...`), when the OS tells it.
    pub fn tid(&self) -> Option<u32> {
        self.tid
    }

    /// The thread's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The latest published snapshot (lock-free; at most one publish interval old while the
    /// thread polls, or the final one once it has stopped).
    pub fn snapshot(&self) -> Arc<PmdSnapshot> {
        self.shared.snapshot.load_full()
    }

    /// Asks the thread to zero its counters; returns the clear generation to wait for
    /// (a snapshot with `clear_generation >=` it was taken after the clear).
    pub fn clear_stats(&self) -> u64 {
        let g = self.shared.clear_requests.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake();
        g
    }

    /// Unparks the thread if it sleeps for want of packets ([`PmdThreadConfig::idle_park`]);
    /// call after queueing input it cannot see arrive (a memory port's injection).
    pub fn wake(&self) {
        if let Some(j) = &self.join {
            j.thread().unpark();
        }
        if let Some(w) = &self.shared.waker {
            w.wake();
        }
    }

    /// [`PmdThread::clear_stats`], then waits (up to `timeout`) for the snapshot taken right
    /// after the clear and returns it; `None` if the thread did not honour it in time.
    pub fn clear_stats_wait(&self, timeout: Duration) -> Option<Arc<PmdSnapshot>> {
        let generation = self.clear_stats();
        self.wait_for(timeout, |s| s.clear_generation >= generation)
    }

    /// Waits (up to `timeout`, sleeping between looks) until a published snapshot satisfies
    /// `pred`, and returns it.
    pub fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&PmdSnapshot) -> bool,
    ) -> Option<Arc<PmdSnapshot>> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.snapshot();
            if pred(&s) {
                return Some(s);
            }
            if s.last || Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The thread's on-CPU time so far, from `/proc/self/task/TID/schedstat` (Linux).
    pub fn cpu_time(&self) -> Option<Duration> {
        let tid = self.tid?;
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
        Some(Duration::from_nanos(ns))
    }

    /// Asks the thread to stop after its current poll (does not wait).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.wake();
    }

    /// Stops the thread, waits for it and returns its `Pmd`.
    pub fn join(mut self) -> Result<Pmd, PmdThreadError> {
        self.stop();
        let Some(j) = self.join.take() else {
            return Err(PmdThreadError::Panicked("already joined".into()));
        };
        j.join().map_err(|e| {
            let msg = e
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            PmdThreadError::Panicked(msg)
        })
    }
}

impl Drop for PmdThread {
    fn drop(&mut self) {
        if let Some(j) = self.join.take() {
            self.shared.stop.store(true, Ordering::Relaxed);
            j.thread().unpark();
            if let Some(w) = &self.shared.waker {
                w.wake();
            }
            let _ = j.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_to_a_missing_core_is_reported() {
        assert!(matches!(pin(usize::MAX), Pinning::Unpinned { .. }));
        assert_eq!(Pinning::Pinned(3).core(), Some(3));
        assert!(Pinning::NotRequested.to_string().contains("unpinned"));
    }

    #[test]
    fn tid_of_this_thread_is_listed() {
        if let Some(tid) = current_tid() {
            assert!(std::path::Path::new(&format!("/proc/self/task/{tid}")).exists());
        }
    }
}
