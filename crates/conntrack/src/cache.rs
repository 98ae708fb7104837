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
//! Memory: a removed connection stays allocated until its slot is overwritten or the cache
//! dropped: at most `slots` such entries per PMD.

use crate::Conntrack;
use crate::key::ConnKey;
use crate::table::Conn;
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
    hits: u64,
    misses: u64,
}

impl FastCache {
    /// A cache of `slots` entries (rounded up to a power of two, at least 1).
    pub fn new(slots: usize) -> FastCache {
        let n = slots.max(1).next_power_of_two();
        FastCache {
            slots: (0..n).map(|_| (0, false, None)).collect(),
            mask: n - 1,
            owner: 0,
            hits: 0,
            misses: 0,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// (hits, misses) so far.
    pub fn hit_stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Drops every reference.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = (0, false, None));
    }

    pub(crate) fn lookup(
        &mut self,
        ct: &Conntrack,
        k: &ConnKey,
        now: u64,
    ) -> Option<(Arc<Conn>, bool)> {
        if self.owner != ct.id() {
            self.clear();
            self.owner = ct.id();
        }
        let h = k.cache_hash();
        let i = (h as usize) & self.mask;
        if let (tag, dir, Some(c)) = &self.slots[i]
            && *tag == h
            && c.live(now)
            && let Some(reply) = c.direction(k)
            && reply == *dir
        {
            self.hits += 1;
            return Some((Arc::clone(c), reply));
        }
        self.misses += 1;
        let found = ct.table_lookup(k, now);
        if let Some((c, reply)) = &found {
            self.slots[i] = (h, *reply, Some(Arc::clone(c)));
        }
        found
    }
}
