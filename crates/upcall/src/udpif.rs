//! What the upcall handlers and the revalidators of one datapath share (OVS `struct udpif`):
//! the ukeys waiting for adoption, the flow limit, and the counters `upcall/show` prints.
//!
//! # Flow limit (OVS semantics)
//!
//! Two numbers, as in OVS:
//! - the **ceiling** (`other_config:flow-limit`, [`DEFAULT_FLOW_LIMIT`] = 200,000; set with
//!   `upcall/set-flow-limit`), never exceeded;
//! - the **current limit**, which starts at `min(ceiling, 10,000)` and follows how long the
//!   revalidators take to dump the flows ([`FlowLimit::adjust`], after each pass): a dump
//!   over 2 s divides it by the seconds taken, over 1.3 s takes a quarter off, under 1 s with
//!   more than 2,000 flows and a limit below what a second of dumping would cover adds 1,000;
//!   always kept within `[1000, ceiling]`.
//!
//! At or above the current limit the handler answers upcalls but asks the PMD not to install
//! them ([`datapath::Upcall::may_install`]): packets are still forwarded, through the slow
//! path, and counted (`flow_limit_hits`). The revalidator, seeing more flows than the limit,
//! shrinks the idle time to [`FLOW_LIMIT_MAX_IDLE_MS`] (100 ms), and above twice the limit
//! deletes every flow it dumps (OVS's `kill_them_all`).
//!
//! The flow count the handlers compare with is the number the last pass dumped plus the
//! installs since (OVS reads a cached datapath count the same way): it can lag a pass behind
//! deletions, never installs.
//!
//! # Counters
//!
//! [`UpcallCounters`]: every answered upcall and every way one can end, by reason. Relaxed
//! atomics: each is exact on its own, a reader may see two of them a few events apart.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::handler::UkeyStore;

/// Default ceiling on datapath flows (OVS `other_config:flow-limit`).
pub const DEFAULT_FLOW_LIMIT: usize = 200_000;

/// The current limit never starts above this (OVS: `MIN(flow_limit, 10000)`).
pub const INITIAL_FLOW_LIMIT: usize = 10_000;

/// The current limit never goes below this (unless the ceiling is lower).
pub const MIN_FLOW_LIMIT: usize = 1_000;

/// Idle time of megaflows while the datapath holds more flows than the current limit.
pub const FLOW_LIMIT_MAX_IDLE_MS: u64 = 100;

/// The flow limit shared by the handlers and revalidators. See the module doc.
#[derive(Debug)]
pub struct FlowLimit {
    ceiling: AtomicUsize,
    current: AtomicUsize,
    n_flows: AtomicUsize,
    /// [`FlowLimit::pin`]ned: the passes leave the current limit alone.
    pinned: AtomicBool,
}

impl FlowLimit {
    /// A limit with `ceiling` (the current limit starts at `min(ceiling, 10,000)`).
    pub fn new(ceiling: usize) -> FlowLimit {
        let ceiling = ceiling.max(1);
        FlowLimit {
            ceiling: AtomicUsize::new(ceiling),
            current: AtomicUsize::new(ceiling.min(INITIAL_FLOW_LIMIT)),
            n_flows: AtomicUsize::new(0),
            pinned: AtomicBool::new(false),
        }
    }

    /// The ceiling (`flow-limit`).
    pub fn ceiling(&self) -> usize {
        self.ceiling.load(Relaxed)
    }

    /// The current (dynamic) limit.
    pub fn current(&self) -> usize {
        self.current.load(Relaxed)
    }

    /// Flows in the datapath, as of the last pass plus installs since.
    pub fn n_flows(&self) -> usize {
        self.n_flows.load(Relaxed)
    }

    /// Sets the ceiling (`upcall/set-flow-limit`); the current limit is brought under it at
    /// once. A ceiling of 0 is refused (it would forbid every install forever).
    pub fn set_ceiling(&self, ceiling: usize) -> Result<(), String> {
        if ceiling == 0 {
            return Err("flow limit must be at least 1".into());
        }
        self.ceiling.store(ceiling, Relaxed);
        let cur = self.current.load(Relaxed);
        self.current.store(cur.min(ceiling), Relaxed);
        Ok(())
    }

    /// Sets the current limit directly (clamped to the ceiling): what a benchmark that sizes
    /// the datapath itself uses instead of waiting for the passes to grow it.
    pub fn set_current(&self, limit: usize) {
        self.current.store(limit.clamp(1, self.ceiling()), Relaxed);
    }

    /// Sets ceiling and current limit to `limit` and stops the passes from adjusting it (not an
    /// OVS setting: what a benchmark that must hold N megaflows uses, so that it measures
    /// learning, not the dynamic limit's reaction to its own dump times). 0 is refused.
    pub fn pin(&self, limit: usize) -> Result<(), String> {
        self.set_ceiling(limit)?;
        self.current.store(limit, Relaxed);
        self.pinned.store(true, Relaxed);
        Ok(())
    }

    /// Whether a new megaflow may be installed now.
    pub fn allows_install(&self) -> bool {
        self.n_flows() < self.current()
    }

    /// A megaflow was installed.
    pub fn note_install(&self) {
        self.n_flows.fetch_add(1, Relaxed);
    }

    /// A pass dumped `n` flows.
    pub fn set_n_flows(&self, n: usize) {
        self.n_flows.store(n, Relaxed);
    }

    /// OVS's rule after a dump of `n_flows` flows that took `dump_ms` (see the module doc);
    /// returns the new current limit.
    pub fn adjust(&self, dump_ms: u64, n_flows: usize) -> usize {
        if self.pinned.load(Relaxed) {
            return self.current();
        }
        let duration = dump_ms.max(1) as usize;
        let mut limit = self.current();
        if duration > 2000 {
            limit /= duration / 1000;
        } else if duration > 1300 {
            limit = limit * 3 / 4;
        } else if duration < 1000
            && n_flows > 2000
            && limit < n_flows.saturating_mul(1000) / duration
        {
            limit = limit.saturating_add(1000);
        }
        let ceiling = self.ceiling();
        let limit = limit.max(MIN_FLOW_LIMIT).min(ceiling);
        self.current.store(limit, Relaxed);
        limit
    }
}

/// How upcalls ended, by reason (see the module doc).
#[derive(Debug, Default)]
pub struct UpcallCounters {
    /// Upcalls answered (the packet was handled; installed or not).
    pub answered: AtomicU64,
    /// New megaflows installed from an answer.
    pub installed: AtomicU64,
    /// Answers not installed because the datapath was at the flow limit.
    pub flow_limit_hits: AtomicU64,
    /// Megaflows removed right after their install: the tables or the MAC table changed
    /// while they were being installed (OVS's `reval_seq` check at install).
    pub revoked_stale: AtomicU64,
    /// Translations that failed (too deep a resubmit chain, a loop, …): answered with a drop
    /// megaflow over the bits translation had looked at, so later packets of the flow do not
    /// translate again.
    pub xlate_errors: AtomicU64,
    /// Translations whose actions the datapath cannot execute: answered with a drop
    /// megaflow, as translation errors are.
    pub refused_actions: AtomicU64,
    /// Upcalls for a recirculation id with no frozen state (not answered; nothing
    /// installed: OVS does not install a flow for an id it holds no reference to).
    pub unknown_recirc: AtomicU64,
    /// Upcalls not answered because the datapath's action table was full.
    pub actions_full: AtomicU64,
    /// Upcalls not answered because no recirculation id was free (`ofproto::recirc`'s
    /// limit): nothing installed, the next packet tries again.
    pub recirc_ids_exhausted: AtomicU64,
}

/// A point-in-time copy of [`UpcallCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct UpcallCountersSnapshot {
    pub answered: u64,
    pub installed: u64,
    pub flow_limit_hits: u64,
    pub revoked_stale: u64,
    pub xlate_errors: u64,
    pub refused_actions: u64,
    pub unknown_recirc: u64,
    pub actions_full: u64,
    pub recirc_ids_exhausted: u64,
}

impl UpcallCounters {
    /// Adds one to `c`.
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> UpcallCountersSnapshot {
        UpcallCountersSnapshot {
            answered: self.answered.load(Relaxed),
            installed: self.installed.load(Relaxed),
            flow_limit_hits: self.flow_limit_hits.load(Relaxed),
            revoked_stale: self.revoked_stale.load(Relaxed),
            xlate_errors: self.xlate_errors.load(Relaxed),
            refused_actions: self.refused_actions.load(Relaxed),
            unknown_recirc: self.unknown_recirc.load(Relaxed),
            actions_full: self.actions_full.load(Relaxed),
            recirc_ids_exhausted: self.recirc_ids_exhausted.load(Relaxed),
        }
    }
}

/// What one revalidator's last pass looked like, for `upcall/show`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RevalidatorReport {
    /// Megaflows this revalidator tracks (its shard).
    pub keys: usize,
    /// Duration of its last pass (ms).
    pub pass_ms: u64,
}

/// The state one datapath's handlers and revalidators share. See the module doc.
#[derive(Debug)]
pub struct Udpif {
    /// Ukeys of answered upcalls waiting for a revalidator to adopt them.
    pub(crate) ukeys: UkeyStore,
    /// The flow limit.
    pub limit: FlowLimit,
    /// How upcalls ended.
    pub counters: UpcallCounters,
    /// Per-revalidator reports and the last dump's duration (ms).
    reports: Mutex<(Vec<RevalidatorReport>, u64)>,
    /// Running average and maximum of the flow count seen by passes.
    flow_stats: Mutex<(u64, u64, u64)>,
    /// Passes delete every megaflow while set (`revalidator/purge`).
    pub(crate) purge: AtomicBool,
}

impl Default for Udpif {
    fn default() -> Self {
        Udpif::new(DEFAULT_FLOW_LIMIT)
    }
}

impl Udpif {
    /// Shared state with flow-limit ceiling `ceiling`.
    pub fn new(ceiling: usize) -> Udpif {
        Udpif {
            ukeys: UkeyStore::default(),
            limit: FlowLimit::new(ceiling),
            counters: UpcallCounters::default(),
            reports: Mutex::new((Vec::new(), 0)),
            flow_stats: Mutex::new((0, 0, 0)),
            purge: AtomicBool::new(false),
        }
    }

    /// Records revalidator `k` of `n`'s last pass; the leader (0) also the dump duration and
    /// the flow count statistics.
    pub(crate) fn report(&self, k: usize, n: usize, r: RevalidatorReport, total_flows: usize) {
        let mut g = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        if g.0.len() != n {
            g.0.resize(n, RevalidatorReport::default());
        }
        if let Some(slot) = g.0.get_mut(k) {
            *slot = r;
        }
        if k == 0 {
            g.1 = r.pass_ms;
            drop(g);
            let mut f = self.flow_stats.lock().unwrap_or_else(|e| e.into_inner());
            let n = total_flows as u64;
            // OVS averages the flow count over passes: (avg + n) / 2.
            f.0 = if f.2 == 0 { n } else { (f.0 + n) / 2 };
            f.1 = f.1.max(n);
            f.2 += 1;
        }
    }

    /// `ovs-appctl upcall/show` text for datapath `dp` (OVS's layout, plus flowswitch's
    /// upcall counters after it).
    pub fn show(&self, dp: &str) -> String {
        let (reports, dump_ms) = self
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let (avg, max, _) = *self.flow_stats.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.counters.snapshot();
        let mut s = format!("{dp}:\n");
        s += &format!(
            "  flows         : (current {}) (avg {}) (max {}) (limit {})\n",
            self.limit.n_flows(),
            avg,
            max,
            self.limit.current()
        );
        s += &format!("  dump duration : {dump_ms}ms\n");
        s += "  ufid enabled : true\n\n";
        for (k, r) in reports.iter().enumerate() {
            s += &format!("  {}: (keys {})\n", k + 1, r.keys);
        }
        s += &format!(
            "  upcalls: answered {} installed {} flow-limit {} revoked-stale {} \
             xlate-error {} refused-actions {} unknown-recirc {} actions-full {} \
             recirc-ids-exhausted {}\n",
            c.answered,
            c.installed,
            c.flow_limit_hits,
            c.revoked_stale,
            c.xlate_errors,
            c.refused_actions,
            c.unknown_recirc,
            c.actions_full,
            c.recirc_ids_exhausted
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OVS's rule, written out case by case.
    #[test]
    fn adjust_follows_ovs() {
        let l = FlowLimit::new(200_000);
        assert_eq!(l.current(), 10_000);
        // Fast dump of many flows: +1000.
        assert_eq!(l.adjust(100, 9_000), 11_000);
        // Fast but few flows: unchanged.
        assert_eq!(l.adjust(100, 1_500), 11_000);
        // Fast, but the limit already covers a second of dumping: unchanged.
        assert_eq!(l.adjust(999, 5_000), 11_000);
        // Slow-ish: a quarter off.
        assert_eq!(l.adjust(1_500, 11_000), 8_250);
        // Very slow: divided by whole seconds.
        assert_eq!(l.adjust(4_100, 8_000), 2_062);
        // Floor.
        assert_eq!(l.adjust(10_000, 2_000), MIN_FLOW_LIMIT);
        // Ceiling.
        let l = FlowLimit::new(1_500);
        assert_eq!(l.current(), 1_500);
        assert_eq!(l.adjust(10, 100_000), 1_500);
        assert!(l.set_ceiling(0).is_err());
        l.set_ceiling(1_200).unwrap();
        assert_eq!(l.current(), 1_200);
        assert_eq!(l.adjust(5_000, 10), 1_000);
    }

    #[test]
    fn install_gate() {
        let l = FlowLimit::new(3);
        assert!(l.allows_install());
        l.note_install();
        l.note_install();
        assert!(l.allows_install());
        l.note_install();
        assert!(!l.allows_install());
        l.set_n_flows(1);
        assert!(l.allows_install());
        l.set_current(0);
        assert_eq!(l.current(), 1);
        l.pin(5).unwrap();
        assert_eq!((l.ceiling(), l.current(), l.adjust(5_000, 100)), (5, 5, 5));
        assert!(l.pin(0).is_err());
    }
}
