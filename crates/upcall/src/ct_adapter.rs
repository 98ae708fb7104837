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
//!
//! IP fragments (OVS 3.1's userspace `ipf`, on by default): one [`conntrack::Ipf`] per
//! datapath, shared by every PMD's adapter, reassembles in front of the tracker, as its module
//! doc prescribes. A packet whose IP header says "fragment" ([`may_be_fragment`]: a few
//! byte loads; any other packet goes straight to the tracker and never takes the reassembly
//! lock) is given to [`conntrack::Ipf::process`]: a fragment it keeps is
//! [`CtVerdict::Held`]; the one that completes a datagram is held too, the tracker runs on
//! the reassembled packet, and every original fragment (NAT applied by
//! [`conntrack::ipf::apply_to_fragments`]) is released, in offset order, with the
//! reassembled packet's conntrack metadata; fragments it refuses go to the tracker, which
//! answers `+trk+inv`. After each call (one packet, or one batch), if a datagram's 15 s
//! reassembly time has passed (an atomic load when not), its fragments are released
//! `+trk+inv` in the action's zone, at most one datagram per call (OVS's
//! `ipf_send_expired_frags`), with the in_port and recirc_id of the packet (of the batch's
//! last packet) whose call sent them. OVS keeps each fragment's own metadata instead; the
//! fragments of one datagram normally share it. Datagrams still held 10 s after
//! expiry are purged by the expiry slice ([`IPF_PURGE_BUDGET`] contexts at most per slice).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use conntrack::ipf::{Ipf, IpfVerdict, apply_to_fragments};
use conntrack::{Conntrack, CtAction, FastCache, NatAction};
use datapath::{ConnTracker, CtOut, CtParams, CtRelease, CtVerdict};
use flow::extract::{CtOrigTuple, PacketMeta};
use flow::field::ct_state;
use flow::ofp::{Nat, NatKind, NatRange};
use netdev::Packet;

/// Connections examined per expiry slice.
pub const SWEEP_BUDGET: usize = 1024;
/// Milliseconds between expiry slices of one PMD.
pub const SWEEP_INTERVAL_MS: u64 = 10;
/// Fast-path cache slots a PMD starts with (the cache doubles itself, up to 2^19 slots,
/// while lookups keep evicting live connections: see `conntrack::FastCache`).
pub const FAST_CACHE_SLOTS: usize = 4096;
/// Fast-cache size from which a batch's slots and connections are prefetched (the cache
/// has grown: its working set no longer fits, and neither, likely, do the connections).
pub const PREFETCH_MIN_SLOTS: usize = 1 << 14;
/// Reassembly contexts purged at most per expiry slice (OVS's clean thread has no bound;
/// ours must stay bounded: the rest go at the next slices).
pub const IPF_PURGE_BUDGET: usize = 64;

/// A PMD's handle on the shared connection table. See the module doc.
#[derive(Debug)]
pub struct CtAdapter {
    ct: Arc<Conntrack>,
    ipf: Arc<Ipf>,
    cache: FastCache,
    offset_ms: Arc<AtomicU64>,
    next_sweep_ms: u64,
    /// Last `ct` parameters seen and their tracker form (a flow's packets repeat them).
    last: Option<(CtParams, CtAction)>,
    /// Prefetch a batch's cache slots and connections once the cache has this many slots
    /// ([`PREFETCH_MIN_SLOTS`]; `usize::MAX`: never).
    prefetch_min_slots: usize,
}

impl CtAdapter {
    /// A PMD's adapter over the shared table `ct` and the datapath's reassembler `ipf`;
    /// `offset_ms` is added to the PMD's time.
    pub fn new(ct: Arc<Conntrack>, ipf: Arc<Ipf>, offset_ms: Arc<AtomicU64>) -> Self {
        CtAdapter {
            ct,
            ipf,
            cache: FastCache::new(FAST_CACHE_SLOTS),
            offset_ms,
            next_sweep_ms: 0,
            last: None,
            prefetch_min_slots: PREFETCH_MIN_SLOTS,
        }
    }

    /// Turns batch prefetching on (the default) or off (to measure it).
    pub fn set_prefetch(&mut self, on: bool) {
        self.prefetch_min_slots = if on { PREFETCH_MIN_SLOTS } else { usize::MAX };
    }

    /// Requests, for a batch about to be tracked, the fast-cache slots its packets will
    /// probe, then the connections those slots hold: with a working set beyond the CPU
    /// caches these are a miss each, and requesting them all first overlaps the misses
    /// instead of paying them one after another (as the PMD does for its EMC). A hint only:
    /// nothing changes but timing. Only once the cache has grown past
    /// [`PREFETCH_MIN_SLOTS`] (a small working set stays cached, and the hints would only
    /// cost instructions).
    #[inline]
    fn prefetch_batch(&self, pkts: &[Packet], zone: u16) {
        if self.cache.capacity() < self.prefetch_min_slots {
            return;
        }
        let mut hashes = [0u64; netdev::BATCH_MAX];
        let mut some = 0u64;
        for (j, p) in pkts.iter().take(netdev::BATCH_MAX).enumerate() {
            if let Some(h) = FastCache::hint_hash(p.data(), zone) {
                hashes[j] = h;
                some |= 1 << j;
                netdev::prefetch::prefetch(self.cache.slot_at(h));
            }
        }
        while some != 0 {
            let j = some.trailing_zeros() as usize;
            some &= some - 1;
            if let Some((a, b, c)) = self.cache.conn_at(hashes[j % netdev::BATCH_MAX]) {
                netdev::prefetch::prefetch(a);
                netdev::prefetch::prefetch(b);
                netdev::prefetch::prefetch(c);
            }
        }
    }

    fn now(&self, pmd_ms: u64) -> u64 {
        pmd_ms.saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Tracks one packet (packet `from` of the call): a fragment goes through reassembly
    /// first; anything else straight to the tracker.
    #[inline(always)]
    fn track_one(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        act: &CtAction,
        now: u64,
        from: usize,
        released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        if may_be_fragment(pkt.data()) {
            return self.track_fragment(pkt, md, act, now, from, released);
        }
        self.ct
            .execute_cached(&mut self.cache, pkt.data_mut(), md, act, now);
        CtVerdict::Continue
    }

    /// [`CtAdapter::track_one`] for a packet that may be an IP fragment (module doc).
    #[cold]
    #[inline(never)]
    fn track_fragment(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        act: &CtAction,
        now: u64,
        from: usize,
        released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        match self.ipf.process(pkt.data(), act.zone, now) {
            IpfVerdict::Held => CtVerdict::Held,
            IpfVerdict::Complete {
                mut reassembled,
                mut fragments,
            } => {
                self.ct
                    .execute_cached(&mut self.cache, &mut reassembled, md, act, now);
                if act.nat.is_some() {
                    apply_to_fragments(&reassembled, &mut fragments);
                }
                released.extend(fragments.into_iter().map(|frame| CtRelease {
                    from,
                    frame,
                    md: *md,
                }));
                // This packet is among the fragments released.
                CtVerdict::Held
            }
            IpfVerdict::NotFragment
            | IpfVerdict::TooSmall
            | IpfVerdict::Invalid
            | IpfVerdict::Refused => {
                self.ct
                    .execute_cached(&mut self.cache, pkt.data_mut(), md, act, now);
                CtVerdict::Continue
            }
        }
    }

    /// OVS's `ipf_send_expired_frags` after a call: the fragments of at most one datagram
    /// whose reassembly time has passed, `+trk+inv` in `zone`, with `base`'s other metadata.
    #[inline(always)]
    fn send_expired(
        &self,
        base: &PacketMeta,
        zone: u16,
        now: u64,
        from: usize,
        released: &mut Vec<CtRelease>,
    ) {
        if self.ipf.expiry_due(now) {
            self.send_expired_slow(base, zone, now, from, released);
        }
    }

    #[cold]
    #[inline(never)]
    fn send_expired_slow(
        &self,
        base: &PacketMeta,
        zone: u16,
        now: u64,
        from: usize,
        released: &mut Vec<CtRelease>,
    ) {
        let md = PacketMeta {
            ct_state: ct_state::TRACKED | ct_state::INVALID,
            ct_zone: zone,
            ct_mark: 0,
            ct_label: 0,
            ct_orig: CtOrigTuple::None,
            ..*base
        };
        released.extend(
            self.ipf
                .take_expired(now, 1)
                .into_iter()
                .map(|frame| CtRelease { from, frame, md }),
        );
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
    fn track(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        params: &CtParams,
        now_ms: u64,
        released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        let now = self.now(now_ms);
        let act = self.action(params);
        let v = self.track_one(pkt, md, &act, now, 0, released);
        self.send_expired(md, params.zone, now, 0, released);
        v
    }

    /// One time offset read and one parameter conversion for the whole batch.
    fn track_batch(
        &mut self,
        pkts: &mut [Packet],
        mds: &mut [PacketMeta],
        params: &CtParams,
        now_ms: u64,
        out: &mut CtOut,
    ) {
        let now = self.now(now_ms);
        let act = self.action(params);
        self.prefetch_batch(pkts, params.zone);
        for (i, (p, md)) in pkts.iter_mut().zip(mds.iter_mut()).enumerate() {
            if self.track_one(p, md, &act, now, i, &mut out.released) == CtVerdict::Held {
                out.hold(i);
            }
        }
        if let Some(last) = mds.last() {
            let from = mds.len() - 1;
            self.send_expired(last, params.zone, now, from, &mut out.released);
        }
    }

    fn poll_housekeeping(&mut self, now_ms: u64) {
        if now_ms >= self.next_sweep_ms {
            self.next_sweep_ms = now_ms.saturating_add(SWEEP_INTERVAL_MS);
            let budget = sweep_budget(self.ct.nconns());
            let now = self.now(now_ms);
            if budget > 0 {
                self.ct.sweep(now, budget);
            }
            // An atomic load unless a reassembly context is due for purging.
            self.ipf.expire(now, IPF_PURGE_BUDGET);
        }
    }
}

/// True if `frame` may be an IP fragment that [`Ipf::process`] would not call "not a
/// fragment": IPv4 (after up to two VLAN tags) with MF or a fragment offset, or IPv6 whose
/// first next header is a fragment header or an extension header that may precede one. A
/// few byte loads: every packet at a `ct` is checked, and a `false` skips reassembly.
#[inline(always)]
pub fn may_be_fragment(frame: &[u8]) -> bool {
    // The common case, untagged IPv4, in one bounds check: ethertype at 12, flags and
    // fragment offset at 14 + 6. Anything shorter has no IPv4 header to be a fragment with.
    match frame.get(12..22) {
        Some(&[0x08, 0x00, _, _, _, _, _, _, a, b]) => u16::from_be_bytes([a, b]) & 0x3fff != 0,
        Some(_) => may_be_fragment_other(frame),
        None => false,
    }
}

/// [`may_be_fragment`] for anything but untagged IPv4.
#[inline(never)]
fn may_be_fragment_other(frame: &[u8]) -> bool {
    let be16 = |o: usize| match frame.get(o..o + 2) {
        Some(&[a, b]) => u16::from_be_bytes([a, b]),
        _ => 0,
    };
    let mut l3 = 14;
    let mut et = be16(12);
    for _ in 0..2 {
        if et == 0x8100 || et == 0x88a8 {
            et = be16(l3 + 2);
            l3 += 4;
        }
    }
    match et {
        0x0800 => be16(l3 + 6) & 0x3fff != 0,
        0x86dd => matches!(frame.get(l3 + 6), Some(0 | 43 | 44 | 51 | 60)),
        _ => false,
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
    use netdev::conn_frames::{tcp_frames, udp_frame};

    /// `track_batch` (prefetching) against `track` packet by packet, on two fresh tables fed the same
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
            let ipf = Arc::new(Ipf::new(conntrack::ipf::IpfConfig::default()));
            CtAdapter::new(ct, ipf, Arc::new(AtomicU64::new(0)))
        };
        let (mut one, mut batch) = (new(), new());
        // The batch side prefetches whatever the cache size, so its prefetch path runs too.
        batch.prefetch_min_slots = 0;
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
            let mut rel = Vec::new();
            for (p, md) in a.iter_mut().zip(mds.iter_mut()) {
                assert_eq!(
                    one.track(p, md, &params, now, &mut rel),
                    CtVerdict::Continue
                );
            }
            let mut out = CtOut::default();
            batch.track_batch(&mut b, &mut mds_b, &params, now, &mut out);
            assert!(rel.is_empty() && out.is_empty());
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

    fn adapter() -> (CtAdapter, Arc<AtomicU64>) {
        let ct = Arc::new(Conntrack::new(conntrack::Config::default()));
        let ipf = Arc::new(Ipf::new(conntrack::ipf::IpfConfig::default()));
        let off = Arc::new(AtomicU64::new(0));
        (CtAdapter::new(ct, ipf, off.clone()), off)
    }

    /// A 2008-byte UDP datagram 10.0.0.1:4100 > 10.0.0.2:4101 in two IPv4 fragments
    /// (1400 + 608), IP id `id`.
    fn v4_frags(id: u16) -> Vec<Vec<u8>> {
        use testutil::packets::{Ipv4Spec, ipv4_fragments, udp};
        let mut ip = Ipv4Spec::new([10, 0, 0, 1], [10, 0, 0, 2], 17);
        ip.id = id;
        let data: Vec<u8> = (0..2000u32).map(|i| i as u8).collect();
        let l4 = udp(ip.pseudo(), 4100, 4101, &data);
        ipv4_fragments(&ip, &l4, 1400)
    }

    fn commit(zone: u16) -> CtParams {
        CtParams {
            zone,
            commit: true,
            ..CtParams::default()
        }
    }

    fn pkt(f: &[u8]) -> Packet {
        Packet::from_slice(f).expect("packet")
    }

    #[test]
    fn fragments_are_held_then_released_with_the_datagrams_state() {
        let (mut a, _) = adapter();
        let fr = v4_frags(0x4242);
        assert_eq!(fr.len(), 2);
        let mut rel = Vec::new();
        // Last fragment first: held, nothing released, nothing tracked.
        let mut md = PacketMeta::port(1);
        let v = a.track(&mut pkt(&fr[1]), &mut md, &commit(3), 1_000, &mut rel);
        assert_eq!((v, rel.len(), a.ct.nconns()), (CtVerdict::Held, 0, 0));
        // The first completes it: held too; both frames released in offset order, bytes
        // unchanged, with the reassembled datagram's state (committed: +new).
        let mut md = PacketMeta::port(1);
        let v = a.track(&mut pkt(&fr[0]), &mut md, &commit(3), 1_001, &mut rel);
        assert_eq!(v, CtVerdict::Held);
        assert_eq!(rel.len(), 2);
        for (r, f) in rel.iter().zip(&fr) {
            assert_eq!(&r.frame, f);
            assert_eq!(r.from, 0);
            assert_eq!(r.md.ct_state, ct_state::TRACKED | ct_state::NEW);
            assert_eq!((r.md.ct_zone, r.md.in_port), (3, 1));
        }
        assert_eq!(a.ct.nconns(), 1);
        let s = a.ipf.stats();
        assert_eq!((s.v4.accepted, s.v4.completed, s.nfrag), (2, 2, 0));
        // A reply (+est+rpl), then the next datagram of the flow, as one batch: +est.
        rel.clear();
        let reply = testutil::packets::udp4([10, 0, 0, 2], [10, 0, 0, 1], 4101, 4100, 10);
        let mut md = PacketMeta::port(2);
        let v = a.track(&mut pkt(&reply), &mut md, &commit(3), 1_500, &mut rel);
        assert_eq!((v, rel.len()), (CtVerdict::Continue, 0));
        assert_eq!(
            md.ct_state,
            ct_state::TRACKED | ct_state::ESTABLISHED | ct_state::REPLY_DIR
        );
        let fr = v4_frags(0x4243);
        let mut out = CtOut::default();
        let mut ps = vec![pkt(&fr[0]), pkt(&fr[1])];
        let mut mds = vec![PacketMeta::port(1); 2];
        a.track_batch(&mut ps, &mut mds, &commit(3), 2_000, &mut out);
        assert_eq!(out.held, 0b11);
        assert_eq!(out.released.len(), 2);
        assert!(
            out.released
                .iter()
                .all(|r| r.from == 1 && r.md.ct_state == ct_state::TRACKED | ct_state::ESTABLISHED)
        );
    }

    #[test]
    fn nat_is_applied_to_the_released_fragments() {
        let (mut a, _) = adapter();
        let nat = flow::ofp::Nat {
            kind: Some(NatKind::Src),
            range: Some(NatRange::V4 {
                min: u32::from(Ipv4Addr::new(10, 0, 0, 100)),
                max: 0,
            }),
            ..Default::default()
        };
        let ext = datapath::ct::intern_ext(datapath::CtExt {
            label: None,
            nat: Some(nat),
        })
        .expect("intern");
        let params = CtParams {
            ext: Some(ext),
            ..commit(0)
        };
        let fr = v4_frags(7);
        let mut rel = Vec::new();
        for f in &fr {
            let _ = a.track(&mut pkt(f), &mut PacketMeta::port(1), &params, 0, &mut rel);
        }
        assert_eq!(rel.len(), 2);
        for r in &rel {
            // IPv4 source rewritten, header checksum still valid.
            assert_eq!(&r.frame[26..30], &[10, 0, 0, 100]);
            assert!(wire::checksum::verify(&r.frame[14..34]));
            assert_ne!(r.md.ct_state & ct_state::SRC_NAT, 0);
        }
    }

    #[test]
    fn expired_fragments_come_out_invalid_at_the_next_call() {
        let (mut a, off) = adapter();
        let fr = v4_frags(9);
        let mut rel = Vec::new();
        let v = a.track(
            &mut pkt(&fr[0]),
            &mut PacketMeta::port(4),
            &commit(2),
            0,
            &mut rel,
        );
        assert_eq!(v, CtVerdict::Held);
        let udp = netdev::conn_frames::udp_frame(1, true);
        // Not yet due: a plain packet continues, nothing else comes out.
        let v = a.track(
            &mut pkt(&udp),
            &mut PacketMeta::port(4),
            &commit(2),
            15_000,
            &mut rel,
        );
        assert_eq!((v, rel.len()), (CtVerdict::Continue, 0));
        // 15 s later (the shared clock offset moved): the held fragment comes out +trk+inv
        // in the action's zone, after the packet that was tracked.
        off.store(1, Ordering::Relaxed);
        let mut md = PacketMeta::port(4);
        let v = a.track(&mut pkt(&udp), &mut md, &commit(7), 15_000, &mut rel);
        assert_eq!(v, CtVerdict::Continue);
        assert_eq!(rel.len(), 1);
        assert_eq!(rel[0].frame, fr[0]);
        assert_eq!(rel[0].md.ct_state, ct_state::TRACKED | ct_state::INVALID);
        assert_eq!((rel[0].md.ct_zone, rel[0].md.in_port), (7, 4));
        assert_eq!(a.ipf.stats().v4.expired, 1);
        // Purging: a context held 10 s past expiry goes in a housekeeping slice.
        let _ = a.track(
            &mut pkt(&fr[1]),
            &mut PacketMeta::port(4),
            &commit(2),
            20_000,
            &mut rel,
        );
        assert_eq!(a.ipf.stats().nfrag, 1);
        a.poll_housekeeping(20_000 + 25_000);
        assert_eq!((a.ipf.stats().nfrag, a.ipf.stats().v4.purged), (0, 1));
    }

    #[test]
    fn fragment_check_is_conservative_and_total() {
        let fr = v4_frags(1);
        assert!(fr.iter().all(|f| may_be_fragment(f)));
        let tagged = testutil::packets::vlan(&fr[0], 0x8100, 5, 0);
        assert!(may_be_fragment(&tagged));
        let qinq = testutil::packets::vlan(&tagged, 0x88a8, 6, 0);
        assert!(may_be_fragment(&qinq));
        assert!(!may_be_fragment(&netdev::conn_frames::udp_frame(1, true)));
        assert!(!may_be_fragment(&testutil::packets::udp4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            1,
            2,
            3
        )));
        // Every prefix, and random bytes: no panic; whatever Ipf would take as a fragment
        // is never skipped.
        let ipf = Ipf::new(conntrack::ipf::IpfConfig::default());
        let mut x = 0x1234_5678u32;
        for f in fr.iter().chain([&tagged, &qinq]) {
            for n in 0..=f.len() {
                let _ = may_be_fragment(&f[..n]);
            }
        }
        for _ in 0..20_000 {
            let mut f = fr[(x & 1) as usize].clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let i = (x as usize) % 60;
                f[i] = (x >> 8) as u8;
            }
            if !may_be_fragment(&f) {
                assert_eq!(ipf.process(&f, 0, 0), IpfVerdict::NotFragment, "{f:02x?}");
            }
        }
    }
}
