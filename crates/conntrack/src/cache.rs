//! The per-PMD established fast path: a small direct-mapped cache of connection references.
//!
//! Why: on a PMD the cost of a tracked packet on an established flow is dominated by the
//! index lookup (hash, shard read lock — a shared cache line written by every reader — and
//! the refcount increment). A PMD sees the same few thousand flows again and again, so it
//! keeps its own references.
//!
//! How: `slots` (a power of two) entries, each `Option<Arc<Conn>>`, indexed by a hash of the
//! packet's key. A probe is a hit when the slot's connection has the packet's key as its
//! original or reply key, has not been removed from the table (`dead`, set under the commit
//! lock before an entry leaves the index and never cleared) and has not expired at `now`.
//! On a miss the table is asked and the answer stored in the slot. A cache is bound to one
//! tracker (by id); used with another it clears itself.
//!
//! Why a hit equals the table's answer (invariant 6): the table maps a key to at most one
//! entry; a slot holds an entry the table returned for a key `k` of that entry, in the
//! direction recorded with it, and a hit requires the probed key to be that same key of
//! that entry (full key compare plus direction); an entry stays indexed under a key until
//! it is removed, and `dead` is set before removal; expiry is checked with the same `now`.
//! So a validated hit is exactly the entry the table lookup would return, in the same
//! direction. The cache holds no
//! copy of any state — mark, label, TCP windows, expiry all stay in the one entry — and
//! every packet, hit or miss, then runs the same protocol update, NAT and metadata code.
//! Nothing is skipped but the index probe; TCP, UDP, ICMP (echo and related errors) alike.
//!
//! Size: the cache starts with the slots it is given and doubles itself (up to
//! [`FastCache::MAX_SLOTS`]) when, over a window of as many lookups as it has slots, at least
//! one lookup in eight missed and evicted a live connection: the working set does not fit. A PMD with
//! 10k connections and a 4096-slot cache would otherwise miss on most packets and pay the
//! shared index (a shard lock's cache line written by every reader) each time. Growing moves
//! slot `i` to `i` or `i + n` (the index is the hash's low bits), so no entry is lost.
//!
//! Memory: a removed connection stays allocated until its slot is overwritten or the cache
//! dropped: at most `slots` such entries per PMD; 24 bytes per slot.

use crate::key::ConnKey;
use crate::table::Conn;
use crate::{Conntrack, Stripe};
use std::sync::Arc;

/// (key hash, direction the table answered, reference).
type Slot = (u64, bool, Option<Arc<Conn>>);

/// A per-PMD cache of connection references for [`Conntrack::execute_cached`].
#[derive(Debug)]
pub struct FastCache {
    /// (key hash, direction the table answered, reference): the hash is compared first so
    /// that a probe for another key does not touch (and miss the CPU cache on) the slot's
    /// connection; the direction makes a hit require the very key the table answered for.
    slots: Box<[Slot]>,
    mask: usize,
    owner: u64,
    /// This cache's packet counters in its tracker (one writer: the cache's owner).
    stripe: Option<Arc<Stripe>>,
    /// Most slots this cache grows to.
    max_slots: usize,
    /// Lookups and live evictions in the current growth window.
    window_lookups: usize,
    window_evictions: usize,
    hits: u64,
    misses: u64,
}

impl FastCache {
    /// Most slots the cache grows to by itself (12 MiB).
    pub const MAX_SLOTS: usize = 1 << 19;

    /// A cache of `slots` entries (rounded up to a power of two, at least 1) that grows by
    /// itself up to [`FastCache::MAX_SLOTS`] when its working set does not fit.
    pub fn new(slots: usize) -> FastCache {
        let mut c = FastCache::fixed(slots);
        c.max_slots = Self::MAX_SLOTS.max(c.slots.len());
        c
    }

    /// A cache of exactly `slots` entries (rounded up to a power of two) that never grows:
    /// for tests that want eviction and stale references to happen.
    pub fn fixed(slots: usize) -> FastCache {
        let n = slots.max(1).next_power_of_two();
        FastCache {
            slots: (0..n).map(|_| (0, false, None)).collect(),
            mask: n - 1,
            owner: 0,
            stripe: None,
            max_slots: n,
            window_lookups: 0,
            window_evictions: 0,
            hits: 0,
            misses: 0,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The cache hash [`Conntrack::execute_cached`] will probe with for `frame` in `zone`,
    /// computed from the common shape alone (untagged IPv4 TCP/UDP, no validity checks) —
    /// for prefetching a batch's slots and connections ahead of tracking it
    /// ([`FastCache::slot_at`], [`FastCache::conn_at`]). A hint: `None` for another shape, and
    /// a NATed packet (probed by its reversed key) gets a useless but harmless answer.
    #[inline]
    pub fn hint_hash(frame: &[u8], zone: u16) -> Option<u64> {
        let h: &[u8; 38] = frame.get(..38)?.try_into().ok()?;
        if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || (h[23] != 6 && h[23] != 17) {
            return None;
        }
        let (ip, ports) = h.split_at(34);
        let mut key = crate::parse::v4_key(ip.try_into().ok()?, zone);
        key.sport = u16::from_be_bytes([ports[0], ports[1]]);
        key.dport = u16::from_be_bytes([ports[2], ports[3]]);
        Some(key.cache_hash())
    }

    /// The slot a probe with cache hash `hash` reads (to prefetch; see
    /// [`FastCache::hint_hash`]).
    #[inline]
    pub fn slot_at(&self, hash: u64) -> &impl Sized {
        &self.slots[(hash as usize) & self.mask]
    }

    /// Parts of the connection the slot of `hash` holds that a probe and an update read —
    /// the entry's start, its reply key and its lock with the protocol state — to prefetch
    /// (after [`FastCache::slot_at`]'s line has arrived); `None` for an empty slot.
    #[inline]
    pub fn conn_at(&self, hash: u64) -> Option<(&impl Sized, &impl Sized, &impl Sized)> {
        let c = self.slots[(hash as usize) & self.mask].2.as_deref()?;
        Some((c, &c.rev_key, &c.m))
    }

    /// (hits, misses) so far.
    pub fn hit_stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Drops every reference.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = (0, false, None));
    }

    /// Binds the cache to `ct` (clearing it and taking a counter stripe of `ct` if it was
    /// bound to another tracker). Called once per packet, before [`FastCache::lookup`].
    #[inline]
    pub(crate) fn bind(&mut self, ct: &Conntrack) {
        if self.owner != ct.id() || self.stripe.is_none() {
            self.clear();
            self.owner = ct.id();
            self.stripe = Some(ct.register_stripe());
        }
    }

    /// The counter stripe (after [`FastCache::bind`]).
    pub(crate) fn stripe(&mut self) -> &Stripe {
        self.stripe.get_or_insert_with(Default::default)
    }

    /// The live connection with key `k` and whether `k` is its reply key: a validated slot,
    /// else the table (and the answer is kept in the slot). Returns a reference into the
    /// slot: no refcount traffic on a hit.
    pub(crate) fn lookup(
        &mut self,
        ct: &Conntrack,
        k: &ConnKey,
        now: u64,
    ) -> Option<(&Arc<Conn>, bool)> {
        debug_assert_eq!(self.owner, ct.id());
        self.window_lookups += 1;
        let h = k.cache_hash();
        let i = (h as usize) & self.mask;
        // A hit: same tag, live, and `k` is the key of the direction the slot recorded —
        // one key compared (the table's `Conn::direction(k)` answer, which the slot
        // recorded, names the key equal to `k`; the original key wins when both are).
        if let (tag, dir, Some(c)) = &self.slots[i]
            && *tag == h
            && c.live(now)
            && (if *dir {
                c.key != *k && c.rev_key == *k
            } else {
                c.key == *k
            })
        {
            self.hits += 1;
            let reply = *dir;
            // Re-borrow (the checks above borrowed the slot only for the condition).
            return self.slots[i].2.as_ref().map(|c| (c, reply));
        }
        self.misses += 1;
        let (c, reply) = ct.table_lookup(k, now)?;
        if self.slots[i].2.as_ref().is_some_and(|old| old.live(now)) {
            self.window_evictions += 1;
        }
        self.slots[i] = (h, reply, Some(c));
        let out = (h, reply);
        if self.window_lookups >= self.slots.len() {
            if self.window_evictions * 8 >= self.window_lookups && self.slots.len() < self.max_slots
            {
                self.grow();
            }
            self.window_lookups = 0;
            self.window_evictions = 0;
        }
        let i = (out.0 as usize) & self.mask;
        self.slots[i].2.as_ref().map(|c| (c, out.1))
    }

    /// Doubles the slots, keeping every entry (slot `i` moves to `i` or `i + n`).
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let mut new: Box<[Slot]> = (0..n).map(|_| (0, false, None)).collect();
        for s in std::mem::take(&mut self.slots).into_vec() {
            if s.2.is_some() {
                let i = (s.0 as usize) & (n - 1);
                new[i] = s;
            }
        }
        self.slots = new;
        self.mask = n - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, CtAction, build};
    use flow::extract::PacketMeta;
    use std::net::{IpAddr, Ipv4Addr};

    /// The prefetch hint names the slot the probe will read: for every frame the straight-line
    /// parser keys, `hint_hash` is the hash of that key (random TCP/UDP over IPv4, zones);
    /// other shapes get no hint, and no bytes make it panic.
    #[test]
    fn hint_hash_is_the_probe_hash() {
        let mut x = 0x9e37_79b9u32;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let ip = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        let mut keyed = 0;
        for i in 0..20_000u32 {
            let (s, d) = (ip(rnd() % 7), ip(rnd() % 7));
            let (sp, dp) = ((rnd() % 3) as u16, (rnd() % 3) as u16 + 1);
            let zone = (rnd() % 3) as u16;
            let mut f = if i % 2 == 0 {
                build::udp(s, d, sp, dp, b"payload")
            } else {
                build::tcp(s, d, sp, dp, rnd(), rnd(), 0x10, 1000, &[], b"")
            };
            if i % 5 == 0 {
                let at = (rnd() as usize) % f.len();
                f[at] ^= 1 << (rnd() % 8);
            }
            if i % 7 == 0 {
                f.truncate((rnd() as usize) % f.len());
            }
            let hint = FastCache::hint_hash(&f, zone);
            if let Some(p) = crate::parse::parse_fast(&f, zone) {
                assert_eq!(hint, Some(p.key.cache_hash()), "{f:02x?}");
                keyed += 1;
            }
        }
        assert!(keyed > 5_000, "{keyed}");
        for n in 0..64 {
            let _ = FastCache::hint_hash(&vec![0x45; n], 0);
        }
    }

    /// A growing cache gives, packet by packet, what the full path gives on a twin tracker,
    /// while it grows from 16 slots past the working set of 3000 connections.
    #[test]
    fn growing_cache_agrees_with_the_full_path() {
        let (full, fast) = (
            Conntrack::with_seed(Config::default(), 5),
            Conntrack::with_seed(Config::default(), 5),
        );
        let commit = CtAction {
            commit: true,
            ..CtAction::default()
        };
        let ip = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        let mut frames = Vec::new();
        for i in 0..3000u32 {
            frames.push(build::udp(ip(1), ip(0x1000 + i), 1024 + i as u16, 53, b"x"));
            frames.push(build::udp(ip(0x1000 + i), ip(1), 53, 1024 + i as u16, b"y"));
        }
        let mut cache = FastCache::new(16);
        for round in 0..6u64 {
            for (j, f) in frames.iter().enumerate() {
                let act = if round == 0 {
                    commit
                } else {
                    CtAction::default()
                };
                let (mut a, mut b) = (f.clone(), f.clone());
                let (mut ma, mut mb) = (PacketMeta::port(1), PacketMeta::port(1));
                full.execute(&mut a, &mut ma, &act, 1 + round);
                fast.execute_cached(&mut cache, &mut b, &mut mb, &act, 1 + round);
                assert_eq!((ma, a), (mb, b), "round {round} packet {j}");
            }
        }
        assert!(cache.capacity() >= 8192, "{}", cache.capacity());
        assert_eq!(full.stats(), fast.stats());
        let (hits, _) = cache.hit_stats();
        assert!(hits > 4 * 6000 / 2, "{:?}", cache.hit_stats());
    }
}
