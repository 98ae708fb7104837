//! The connection table: entries, the sharded two-key index, limits and sweeping.
//!
//! Why this structure: one table is shared by every PMD thread and a connection's two
//! directions may arrive on different PMDs, so lookups must not serialise on a table-wide
//! lock, while commits must be atomic (check-then-insert of two keys, NAT allocation that
//! must not race another allocation).
//!
//! How:
//! - An entry is an `Arc<Conn>`: immutable keys and NAT bits, an atomic expiration and a
//!   `dead` flag, and the mutable protocol state, mark and label behind the entry's own
//!   mutex (OVS's `conn->lock`).
//! - The index is [`SHARDS`] shards, each an `RwLock<IndexMap<key, Arc<Conn>>>`; a key's
//!   shard comes from its seeded hash. Each connection is indexed under its original key
//!   and its reply key (they usually live in different shards). A lookup read-locks one
//!   shard for a hash probe and a refcount increment; no table-wide lock is taken. We chose
//!   sharded `RwLock`s over a lock-free map (e.g. `papaya`) deliberately: the established
//!   fast path ([`crate::FastCache`]) does not touch the index at all, so index reads are
//!   only paid on cache misses; `indexmap` (already in the workspace's lock file, well
//!   kept) gives positional access, which makes bounded, resumable sweeping trivial; and it
//!   keeps the whole crate free of `unsafe` and of epoch-reclamation subtleties.
//! - Structural changes (commit, removal by sweep/flush, zone-limit changes) hold the
//!   tracker's commit lock, like OVS's `ct_lock`; lookups never take it.
//! - Expiry: an entry whose `expiration <= now` is treated as absent by every lookup and
//!   is removed by [`Table::sweep`], which examines at most `budget` index slots per call
//!   from a cursor that walks the shards round-robin, so no caller does unbounded work.
//!
//! Lock order (never acquire against it): commit lock → one shard lock at a time (never
//! two shards at once) → a connection's state mutex (a leaf: nothing is acquired while it
//! is held). Packet processing takes shard read locks and connection mutexes only, never
//! both at once.
//!
//! Invariants: (1) a live (non-`dead`) entry is indexed under its original key, and under
//! its reply key unless another live entry already held that key when it was committed
//! (possible only without NAT, see `conn_not_found`), each mapping to that very entry; (2) a key maps to at most one entry; (3) `dead` is set,
//! under the commit lock, before an entry leaves the index, and never cleared — which is
//! what makes a cached `Arc<Conn>` safe to validate without the index; (4) `nconns` counts
//! live entries.

use crate::key::{ConnKey, KeyHashBuilder, TableKey};
use crate::l4::L4State;
use indexmap::IndexMap;
use indexmap::map::raw_entry_v1::{RawEntryApiV1, RawEntryMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Number of index shards (a power of two).
pub(crate) const SHARDS: usize = 64;

/// Mutable part of a connection (guarded by `Conn::m`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnMut {
    pub l4: L4State,
    pub mark: u32,
    /// Label as two halves (keeps the entry 8-aligned).
    pub label: [u64; 2],
}

/// One tracked connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub key: ConnKey,
    pub rev_key: ConnKey,
    /// NAT action bits (`nat::NAT_*`), 0 without NAT.
    pub nat: u8,
    /// Zone limit that admitted it (a zone, or -1 for the default limit) and that
    /// limit's sequence (0 = none).
    pub admit_zone: i32,
    pub admit_seq: u32,
    /// Milliseconds; `now >= expiration` means expired.
    pub expiration: AtomicU64,
    /// Set once, when the entry is removed from the index.
    pub dead: AtomicBool,
    pub m: Mutex<ConnMut>,
}

impl Conn {
    pub fn lock(&self) -> MutexGuard<'_, ConnMut> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn expired(&self, now: u64) -> bool {
        now >= self.expiration.load(Ordering::Relaxed)
    }

    /// Usable by a lookup at `now`: still indexed and not expired.
    pub fn live(&self, now: u64) -> bool {
        !self.dead.load(Ordering::Acquire) && !self.expired(now)
    }

    pub fn force_expire(&self) {
        self.expiration.store(0, Ordering::Relaxed);
    }

    /// Which direction `k` is, if it is one of the keys (original key checked first).
    pub fn direction(&self, k: &ConnKey) -> Option<bool> {
        if self.key == *k {
            Some(false)
        } else if self.rev_key == *k {
            Some(true)
        } else {
            None
        }
    }
}

type Shard = IndexMap<TableKey, Arc<Conn>, KeyHashBuilder>;

/// The sharded two-key index.
#[derive(Debug)]
pub(crate) struct Table {
    shards: Box<[RwLock<Shard>]>,
    seed: u64,
}

impl Table {
    pub fn new(seed: u64) -> Table {
        let shards = (0..SHARDS)
            .map(|_| RwLock::new(IndexMap::with_hasher(KeyHashBuilder { seed })))
            .collect();
        Table { shards, seed }
    }

    /// `k`'s shard and its hash in that shard's map, from one hash of the key: the map's own
    /// hash (`KeyHashBuilder` over a `TableKey`), whose bits 40.. pick the shard — bits the
    /// map uses neither for its bucket index (low bits) nor for its control bytes (top 7).
    /// Every probe and insert passes the hash to the map (`raw_entry_v1`), so a key is
    /// hashed once per operation, not once for the shard and again for the map.
    #[inline]
    fn hashed(&self, k: &ConnKey) -> (usize, u64) {
        let h = crate::key::table_hash(k, self.seed);
        ((h >> 40) as usize & (SHARDS - 1), h)
    }

    fn read(&self, i: usize) -> std::sync::RwLockReadGuard<'_, Shard> {
        self.shards[i].read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self, i: usize) -> std::sync::RwLockWriteGuard<'_, Shard> {
        self.shards[i].write().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry indexed under `k`, live or not.
    pub fn get_any(&self, k: &ConnKey) -> Option<Arc<Conn>> {
        let (i, h) = self.hashed(k);
        self.read(i)
            .raw_entry_v1()
            .from_key_hashed_nocheck(h, &TableKey(*k))
            .map(|(_, v)| Arc::clone(v))
    }

    /// OVS `conn_lookup`: the live connection with `k` as either key, and whether `k` is
    /// its reply key.
    pub fn lookup(&self, k: &ConnKey, now: u64) -> Option<(Arc<Conn>, bool)> {
        let c = self.get_any(k)?;
        if !c.live(now) {
            return None;
        }
        let reply = c.direction(k)?;
        Some((c, reply))
    }

    /// Indexes `c` under both keys. Caller holds the commit lock and has removed any entry
    /// those keys mapped to.
    pub fn insert(&self, c: &Arc<Conn>, with_reply_key: bool) {
        let keys = if with_reply_key {
            &[c.key, c.rev_key][..]
        } else {
            &[c.key][..]
        };
        for k in keys {
            let (i, h) = self.hashed(k);
            let mut s = self.write(i);
            match s
                .raw_entry_mut_v1()
                .from_key_hashed_nocheck(h, &TableKey(*k))
            {
                RawEntryMut::Occupied(mut o) => *o.get_mut() = Arc::clone(c),
                RawEntryMut::Vacant(v) => {
                    v.insert_hashed_nocheck(h, TableKey(*k), Arc::clone(c));
                }
            }
        }
    }

    /// Unindexes `c` (both keys, only where they still map to `c`). Caller holds the commit
    /// lock and has set `dead`.
    pub fn unindex(&self, c: &Arc<Conn>) {
        for k in [c.key, c.rev_key] {
            let (i, h) = self.hashed(&k);
            let mut s = self.write(i);
            let tk = TableKey(k);
            if let RawEntryMut::Occupied(o) = s.raw_entry_mut_v1().from_key_hashed_nocheck(h, &tk)
                && Arc::ptr_eq(o.get(), c)
            {
                o.swap_remove();
            }
        }
    }

    /// Entry at `(shard, index)` of the index, for the sweeping cursor.
    pub fn at(&self, shard: usize, idx: usize) -> Option<(ConnKey, Arc<Conn>)> {
        self.read(shard)
            .get_index(idx)
            .map(|(k, v)| (k.0, Arc::clone(v)))
    }

    /// Every entry once (by its original key).
    pub fn for_each_primary(&self, mut f: impl FnMut(&Arc<Conn>)) {
        for i in 0..SHARDS {
            let s = self.read(i);
            for (k, v) in s.iter() {
                if k.0 == v.key {
                    f(v);
                }
            }
        }
    }

    /// Total index slots in use (two per connection, one when both keys are equal).
    pub fn slots(&self) -> usize {
        (0..SHARDS).map(|i| self.read(i).len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_stays_compact() {
        // Keys 2 × 42, atomics, flags, the mutex with TCP state, mark and label.
        let n = std::mem::size_of::<Conn>();
        println!("Conn is {n} bytes");
        assert!(n <= 176, "Conn is {n} bytes");
        assert_eq!(std::mem::size_of::<crate::key::TableKey>(), 42);
    }
}
