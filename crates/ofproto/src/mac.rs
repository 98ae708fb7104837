//! MAC learning for the `NORMAL` action (OVS `mac-learning.c`): (MAC, VLAN) → port, with aging
//! by an explicit clock and a generation counter for revalidation.
//!
//! Every change that could alter a forwarding decision (a new entry, a MAC moving to another
//! port, an entry aged out or flushed) bumps [`MacTable::generation`] and stamps the entry with
//! it. A cached decision that consulted the table at generation `g` is stale iff some entry it
//! looked up (or could have found) changed after `g`; [`MacTable::changed_since`] answers that
//! for one (MAC, VLAN) so revalidators re-translate only affected megaflows.
//!
//! Invariants: at most `max_entries` entries; every entry's `generation` ≤ the table's.
//!
//! A bridge holds its table as a [`MacLearning`]: shared (not copied) between the two copies
//! of the bridge that flow-mod publication keeps (see `classifier::double_buffer`), behind a
//! read-write lock held only for one lookup or one update, as OVS guards `struct
//! mac_learning` with its `rwlock`. Learning happens during translation, on any thread.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use flow::ofp::OfPort;

/// OVS's default MAC aging time (seconds).
pub const DEFAULT_AGING_S: u64 = 300;
/// OVS's default table size.
pub const DEFAULT_MAX_ENTRIES: usize = 8192;

/// One learned address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacEntry {
    /// The port it was last seen on.
    pub port: OfPort,
    /// When it was last seen (ms).
    pub seen_ms: u64,
    /// Table generation of its last change of port (or creation).
    pub generation: u64,
}

/// The learning table of one bridge.
#[derive(Debug, Clone)]
pub struct MacTable {
    entries: HashMap<(u64, u16), MacEntry>,
    /// Aging time in ms.
    pub aging_ms: u64,
    /// Capacity.
    pub max_entries: usize,
    generation: u64,
    /// Generations at which entries were removed (aged/flushed), per key, so that lookups of a
    /// now-missing key also see the change.
    removed: HashMap<(u64, u16), u64>,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable {
            entries: HashMap::new(),
            aging_ms: DEFAULT_AGING_S * 1000,
            max_entries: DEFAULT_MAX_ENTRIES,
            generation: 0,
            removed: HashMap::new(),
        }
    }
}

impl MacTable {
    /// Current generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The port `mac` in `vlan` was learned on, if the entry has not aged out at `now_ms`.
    pub fn lookup(&self, mac: u64, vlan: u16, now_ms: u64) -> Option<OfPort> {
        let e = self.entries.get(&(mac, vlan))?;
        (now_ms < e.seen_ms.saturating_add(self.aging_ms)).then_some(e.port)
    }

    /// Learns that `mac` in `vlan` is on `port` (OVS `mac_learning_update`). Returns whether the
    /// table changed in a way that affects forwarding (new entry or moved).
    pub fn learn(&mut self, mac: u64, vlan: u16, port: OfPort, now_ms: u64) -> bool {
        // Multicast sources are never learned.
        if mac & (1 << 40) != 0 {
            return false;
        }
        let key = (mac, vlan);
        if let Some(e) = self.entries.get_mut(&key) {
            e.seen_ms = now_ms;
            if e.port == port {
                return false;
            }
            self.generation += 1;
            e.port = port;
            e.generation = self.generation;
            return true;
        }
        if self.entries.len() >= self.max_entries {
            // Evict the oldest entry.
            if let Some(old) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.seen_ms)
                .map(|(k, _)| *k)
            {
                self.entries.remove(&old);
                self.generation += 1;
                self.removed.insert(old, self.generation);
            }
        }
        self.generation += 1;
        self.entries.insert(
            key,
            MacEntry {
                port,
                seen_ms: now_ms,
                generation: self.generation,
            },
        );
        true
    }

    /// Removes entries not seen for the aging time; returns how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let aging = self.aging_ms;
        let old: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, e)| now_ms >= e.seen_ms.saturating_add(aging))
            .map(|(k, _)| *k)
            .collect();
        for k in &old {
            self.entries.remove(k);
            self.generation += 1;
            self.removed.insert(*k, self.generation);
        }
        old.len()
    }

    /// Forgets everything (`fdb/flush`).
    pub fn flush(&mut self) {
        let keys: Vec<_> = self.entries.keys().copied().collect();
        self.generation += 1;
        for k in keys {
            self.removed.insert(k, self.generation);
        }
        self.entries.clear();
    }

    /// Whether the entry for (`mac`, `vlan`) was created, moved or removed after generation `g`.
    pub fn changed_since(&self, mac: u64, vlan: u16, g: u64) -> bool {
        self.entries
            .get(&(mac, vlan))
            .is_some_and(|e| e.generation > g)
            || self.removed.get(&(mac, vlan)).is_some_and(|r| *r > g)
    }

    /// Entries as (mac, vlan, entry), sorted.
    pub fn entries(&self) -> Vec<(u64, u16, MacEntry)> {
        let mut v: Vec<_> = self
            .entries
            .iter()
            .map(|((m, vl), e)| (*m, *vl, *e))
            .collect();
        v.sort_by_key(|(m, vl, _)| (*vl, *m));
        v
    }
}

/// A bridge's MAC table, shared by every copy of the bridge (cloning shares it). Each method
/// takes the lock for its own duration only.
#[derive(Debug, Clone, Default)]
pub struct MacLearning(Arc<RwLock<MacTable>>);

impl MacLearning {
    /// The table, for reading (poison recovered: every update leaves it consistent).
    pub fn read(&self) -> RwLockReadGuard<'_, MacTable> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The table, for writing.
    pub fn write(&self) -> RwLockWriteGuard<'_, MacTable> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// [`MacTable::generation`].
    pub fn generation(&self) -> u64 {
        self.read().generation()
    }

    /// [`MacTable::len`].
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// [`MacTable::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// [`MacTable::lookup`].
    pub fn lookup(&self, mac: u64, vlan: u16, now_ms: u64) -> Option<OfPort> {
        self.read().lookup(mac, vlan, now_ms)
    }

    /// [`MacTable::learn`].
    pub fn learn(&self, mac: u64, vlan: u16, port: OfPort, now_ms: u64) -> bool {
        self.write().learn(mac, vlan, port, now_ms)
    }

    /// [`MacTable::expire`].
    pub fn expire(&self, now_ms: u64) -> usize {
        self.write().expire(now_ms)
    }

    /// [`MacTable::flush`].
    pub fn flush(&self) {
        self.write().flush();
    }

    /// [`MacTable::changed_since`].
    pub fn changed_since(&self, mac: u64, vlan: u16, g: u64) -> bool {
        self.read().changed_since(mac, vlan, g)
    }

    /// [`MacTable::entries`].
    pub fn entries(&self) -> Vec<(u64, u16, MacEntry)> {
        self.read().entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learn_move_age() {
        let mut t = MacTable::default();
        assert!(t.learn(0x0a, 10, OfPort(1), 0));
        let g = t.generation();
        assert!(!t.learn(0x0a, 10, OfPort(1), 5));
        assert!(!t.changed_since(0x0a, 10, g));
        assert_eq!(t.lookup(0x0a, 10, 10), Some(OfPort(1)));
        assert_eq!(t.lookup(0x0a, 20, 10), None);
        assert!(t.learn(0x0a, 10, OfPort(2), 10));
        assert!(t.changed_since(0x0a, 10, g));
        assert_eq!(t.lookup(0x0a, 10, 10), Some(OfPort(2)));
        assert_eq!(t.lookup(0x0a, 10, 10 + 300_000), None);
        let g2 = t.generation();
        assert_eq!(t.expire(10 + 300_000), 1);
        assert!(t.changed_since(0x0a, 10, g2));
        assert!(
            !t.learn(0x0100_0000_0000, 1, OfPort(1), 0),
            "multicast learned"
        );
    }
}
