//! The conntrack adapter: the `conntrack` crate's tracker as the PMD's
//! [`datapath::ConnTracker`].
//!
//! One [`conntrack::Conntrack`] (the connection table) is shared by every PMD through an
//! `Arc`; each PMD gets its own [`CtAdapter`], which owns that PMD's
//! [`conntrack::FastCache`] (the established fast path: references to table entries,
//! validated before use — see the `conntrack` crate) and runs the tracker's expiry in
//! bounded slices between bursts.
//!
//! Expiry slices: every [`SWEEP_INTERVAL_MS`] a PMD examines at most [`SWEEP_BUDGET`] index
//! slots, and never more than the table has (two per connection): a slice over a small table
//! is one round over it, not [`SWEEP_BUDGET`] probes of mostly empty shards (the sweep's
//! cursor keeps walking empty shards between the few entries it examines), and an empty
//! table is not swept at all.
//!
//! Time: the PMD passes milliseconds of its cycle counter; the adapter adds a shared offset
//! (`receive` scripts move it with `advance MS` to test expiry without waiting).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use conntrack::{Conntrack, CtAction, FastCache, NatAction};
use datapath::{ConnTracker, CtParams};
use flow::extract::PacketMeta;
use flow::ofp::{Nat, NatKind, NatRange};
use netdev::Packet;

/// Connections examined per expiry slice.
pub const SWEEP_BUDGET: usize = 1024;
/// Milliseconds between expiry slices of one PMD.
pub const SWEEP_INTERVAL_MS: u64 = 10;
/// Fast-path cache slots per PMD.
pub const FAST_CACHE_SLOTS: usize = 4096;

/// A PMD's handle on the shared connection table. See the module doc.
#[derive(Debug)]
pub struct CtAdapter {
    ct: Arc<Conntrack>,
    cache: FastCache,
    offset_ms: Arc<AtomicU64>,
    next_sweep_ms: u64,
    /// Last `ct` parameters seen and their tracker form (a flow's packets repeat them).
    last: Option<(CtParams, CtAction)>,
}

impl CtAdapter {
    /// A PMD's adapter over the shared table `ct`; `offset_ms` is added to the PMD's time.
    pub fn new(ct: Arc<Conntrack>, offset_ms: Arc<AtomicU64>) -> Self {
        CtAdapter {
            ct,
            cache: FastCache::new(FAST_CACHE_SLOTS),
            offset_ms,
            next_sweep_ms: 0,
            last: None,
        }
    }

    fn now(&self, pmd_ms: u64) -> u64 {
        pmd_ms.saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }
}

impl ConnTracker for CtAdapter {
    fn track(&mut self, pkt: &mut Packet, md: &mut PacketMeta, params: &CtParams, now_ms: u64) {
        let now = self.now(now_ms);
        let act = match &self.last {
            Some((p, a)) if p == params => *a,
            _ => {
                let a = ct_action(params);
                self.last = Some((*params, a));
                a
            }
        };
        self.ct
            .execute_cached(&mut self.cache, pkt.data_mut(), md, &act, now);
    }

    fn poll_housekeeping(&mut self, now_ms: u64) {
        if now_ms >= self.next_sweep_ms {
            self.next_sweep_ms = now_ms.saturating_add(SWEEP_INTERVAL_MS);
            let budget = sweep_budget(self.ct.nconns());
            if budget > 0 {
                let now = self.now(now_ms);
                self.ct.sweep(now, budget);
            }
        }
    }
}

/// Index slots one expiry slice examines with `nconns` connections in the table: each has
/// two slots (one when its keys are equal), so `2 * nconns` covers the table once.
pub fn sweep_budget(nconns: u32) -> usize {
    (2 * nconns as usize).min(SWEEP_BUDGET)
}

/// The tracker's form of a datapath `ct(...)`.
pub fn ct_action(p: &CtParams) -> CtAction {
    CtAction {
        zone: p.zone,
        commit: p.commit || p.force,
        force: p.force,
        mark: p.mark,
        label: p.label,
        nat: p.nat.as_ref().map(nat_action),
    }
}

/// The tracker's form of a parsed `nat(...)` (a range's `max` 0 means "same as `min`").
pub fn nat_action(n: &Nat) -> NatAction {
    let addrs = n.range.map(|r| match r {
        NatRange::V4 { min, max } => {
            let max = if max == 0 { min } else { max };
            (
                IpAddr::V4(Ipv4Addr::from(min)),
                IpAddr::V4(Ipv4Addr::from(max)),
            )
        }
        NatRange::V6 { min, max } => {
            let max = if max == 0 { min } else { max };
            (
                IpAddr::V6(Ipv6Addr::from(min)),
                IpAddr::V6(Ipv6Addr::from(max)),
            )
        }
    });
    let ports = (n.ports.0 != 0).then(|| {
        let max = if n.ports.1 == 0 { n.ports.0 } else { n.ports.1 };
        (n.ports.0, max)
    });
    NatAction {
        kind: n.kind.map(|k| match k {
            NatKind::Src => conntrack::NatKind::Src,
            NatKind::Dst => conntrack::NatKind::Dst,
        }),
        addrs,
        ports,
        persistent: n.persistent,
        hash: n.hash,
        random: n.random,
    }
}
