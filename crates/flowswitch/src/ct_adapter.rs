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
//! is one round over it, and an empty table is not swept at all.
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
/// Fast-path cache slots a PMD starts with (the cache doubles itself, up to 2^19 slots,
/// while lookups keep evicting live connections: see `conntrack::FastCache`).
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

    /// The tracker's form of `params` (converted once per distinct parameters in a row).
    #[inline]
    fn action(&mut self, params: &CtParams) -> CtAction {
        match &self.last {
            Some((p, a)) if p == params => *a,
            _ => {
                let a = ct_action(params);
                self.last = Some((*params, a));
                a
            }
        }
    }
}

impl ConnTracker for CtAdapter {
    fn track(&mut self, pkt: &mut Packet, md: &mut PacketMeta, params: &CtParams, now_ms: u64) {
        let now = self.now(now_ms);
        let act = self.action(params);
        self.ct
            .execute_cached(&mut self.cache, pkt.data_mut(), md, &act, now);
    }

    /// One time offset read and one parameter conversion for the whole batch.
    fn track_batch(
        &mut self,
        pkts: &mut [Packet],
        mds: &mut [PacketMeta],
        params: &CtParams,
        now_ms: u64,
    ) {
        let now = self.now(now_ms);
        let act = self.action(params);
        for (p, md) in pkts.iter_mut().zip(mds) {
            self.ct
                .execute_cached(&mut self.cache, p.data_mut(), md, &act, now);
        }
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
    let ext = p.ext();
    CtAction {
        zone: p.zone,
        commit: p.commit || p.force,
        force: p.force,
        mark: p.mark,
        label: ext.label,
        nat: ext.nat.as_ref().map(nat_action),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::bench_firewall::{tcp_frames, udp_frame};

    /// `track_batch` against `track` packet by packet, on two fresh tables fed the same
    /// random batches (UDP both ways, TCP handshakes in and out of order, commit or not,
    /// two zones, time moving on): the same metadata, bytes and connections.
    #[test]
    fn track_batch_equals_track_per_packet() {
        let mut frames: Vec<[u8; 60]> = Vec::new();
        for i in 0..6 {
            frames.push(udp_frame(i, true));
            frames.push(udp_frame(i, false));
            frames.extend(tcp_frames(i));
        }
        let mut x = 0x9e37_79b9u32;
        let mut rnd = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n
        };
        let new = || {
            let ct = Arc::new(Conntrack::new(conntrack::Config::default()));
            CtAdapter::new(ct, Arc::new(AtomicU64::new(0)))
        };
        let (mut one, mut batch) = (new(), new());
        let mut now = 1_000u64;
        for round in 0..400 {
            let params = CtParams {
                zone: rnd(2) as u16,
                commit: rnd(3) != 0,
                ..CtParams::default()
            };
            let n = 1 + rnd(32) as usize;
            let mut a: Vec<Packet> = Vec::new();
            let mut b: Vec<Packet> = Vec::new();
            let mut mds: Vec<PacketMeta> = Vec::new();
            for _ in 0..n {
                let f = frames[rnd(frames.len() as u32) as usize];
                a.push(Packet::from_slice(&f).expect("packet"));
                b.push(Packet::from_slice(&f).expect("packet"));
                mds.push(PacketMeta::port(1 + rnd(2)));
            }
            let mut mds_b = mds.clone();
            for (p, md) in a.iter_mut().zip(mds.iter_mut()) {
                one.track(p, md, &params, now);
            }
            batch.track_batch(&mut b, &mut mds_b, &params, now);
            assert_eq!(mds, mds_b, "round {round}");
            for (p, q) in a.iter().zip(&b) {
                assert_eq!(p.data(), q.data(), "round {round}");
            }
            now += u64::from(rnd(5_000));
            if rnd(4) == 0 {
                one.poll_housekeeping(now);
                batch.poll_housekeeping(now);
            }
        }
        let dump = |c: &CtAdapter| -> Vec<String> {
            c.ct.dump(None).iter().map(ToString::to_string).collect()
        };
        assert_eq!(dump(&one), dump(&batch));
        assert!(one.ct.nconns() > 0);
    }
}
