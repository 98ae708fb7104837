//! `OverlayMap`: a hash map whose clone is cheap, for the lookups an incremental round
//! patches (LSP name / UUID → switch and port).
//!
//! An incremental round keeps the last round's context while it builds the next one, so a
//! patched lookup is a copy with a few entries changed. Copying a 10,000-entry `HashMap`
//! costs more than the rest of an LSP add's context patch (≈ 0.3 ms of its 0.7 ms at 800
//! nodes); here the copy shares the bulk (`base`, behind an `Arc`) and owns only the
//! changes (`delta`, `None` = removed). Reads look in `delta` first (skipped while it is
//! empty, the case of every full build), then in `base`. When `delta` grows past an eighth
//! of `base` it is folded into a fresh `base`, so a long series of patches costs amortised
//! O(1) per change and reads stay at most two probes. While nothing else shares `base`
//! (a context being built), writes go straight into it.
//!
//! Its trivially correct twin is a plain `HashMap`, compared on random operation
//! sequences with clones interleaved (tests below).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

/// A map of `K` to `V`, cheap to clone (see the module doc).
#[derive(Clone, Debug)]
pub struct OverlayMap<K, V> {
    base: Arc<HashMap<K, V>>,
    delta: HashMap<K, Option<V>>,
    len: usize,
}

impl<K, V> Default for OverlayMap<K, V> {
    fn default() -> Self {
        OverlayMap {
            base: Arc::new(HashMap::new()),
            delta: HashMap::new(),
            len: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> OverlayMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value of `k`.
    pub fn get<Q>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if !self.delta.is_empty()
            && let Some(e) = self.delta.get(k)
        {
            return e.as_ref();
        }
        self.base.get(k)
    }

    /// True when `k` has a value.
    pub fn contains_key<Q>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(k).is_some()
    }

    /// Sets `k` to `v`; returns the value it had. Setting a key back to the value `base`
    /// holds (a port removed and put back at the same place) leaves no change behind.
    pub fn insert(&mut self, k: K, v: V) -> Option<V>
    where
        V: PartialEq,
    {
        if self.delta.is_empty()
            && let Some(base) = Arc::get_mut(&mut self.base)
        {
            let old = base.insert(k, v);
            self.len += usize::from(old.is_none());
            return old;
        }
        let old = self.get(&k).cloned();
        self.len += usize::from(old.is_none());
        if self.base.get(&k) == Some(&v) {
            self.delta.remove(&k);
        } else {
            self.delta.insert(k, Some(v));
            self.maybe_fold();
        }
        old
    }

    /// Removes `k`; returns the value it had.
    pub fn remove<Q>(&mut self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.delta.is_empty()
            && let Some(base) = Arc::get_mut(&mut self.base)
        {
            let old = base.remove(k);
            self.len -= usize::from(old.is_some());
            return old;
        }
        let old = self.get(k).cloned()?;
        self.len -= 1;
        if let Some((bk, _)) = self.base.get_key_value(k) {
            let bk = bk.clone();
            self.delta.insert(bk, None);
        } else {
            self.delta.remove(k);
        }
        self.maybe_fold();
        Some(old)
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        let delta = &self.delta;
        self.base
            .iter()
            .filter(move |(k, _)| delta.is_empty() || !delta.contains_key(*k))
            .chain(
                self.delta
                    .iter()
                    .filter_map(|(k, v)| v.as_ref().map(|v| (k, v))),
            )
    }

    /// Folds `delta` into a new `base` once it holds more than an eighth of it (and more
    /// than a few entries): amortised O(1) per change, reads at most two probes.
    fn maybe_fold(&mut self) {
        if self.delta.len() <= 64 + self.base.len() / 8 {
            return;
        }
        let mut base: HashMap<K, V> = HashMap::with_capacity(self.len);
        for (k, v) in self.iter() {
            base.insert(k.clone(), v.clone());
        }
        self.base = Arc::new(base);
        self.delta.clear();
    }
}

impl<K: Hash + Eq + Clone, V: Clone> From<HashMap<K, V>> for OverlayMap<K, V> {
    fn from(m: HashMap<K, V>) -> Self {
        OverlayMap {
            len: m.len(),
            base: Arc::new(m),
            delta: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone + PartialEq> FromIterator<(K, V)> for OverlayMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        HashMap::from_iter(iter).into()
    }
}

/// Equal when they map the same keys to equal values (however they are split).
impl<K: Hash + Eq + Clone, V: Clone + PartialEq> PartialEq for OverlayMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testutil::rng::TestRng;

    /// Random inserts, removes and reads on an `OverlayMap` and a plain `HashMap` (the
    /// twin), with clones taken and dropped along the way (so `base` is sometimes shared,
    /// sometimes not, and folds happen): every read, the length and the whole contents
    /// agree after every operation; earlier clones keep their own contents.
    #[test]
    fn agrees_with_a_hashmap() {
        for seed in 0..40 {
            let mut rng = TestRng::new(seed);
            let mut m: OverlayMap<u32, u64> = OverlayMap::new();
            let mut twin: HashMap<u32, u64> = HashMap::new();
            let mut snapshots: Vec<(OverlayMap<u32, u64>, HashMap<u32, u64>)> = Vec::new();
            let keys = 1 + rng.below(600) as u32;
            for step in 0..3000u64 {
                let k = rng.below(keys as u64) as u32;
                match rng.below(10) {
                    0..=3 => assert_eq!(m.insert(k, step), twin.insert(k, step)),
                    4..=6 => assert_eq!(m.remove(&k), twin.remove(&k)),
                    7 => {
                        snapshots.push((m.clone(), twin.clone()));
                        if snapshots.len() > 3 {
                            snapshots.remove(rng.below(4) as usize);
                        }
                    }
                    _ => assert_eq!(m.get(&k), twin.get(&k)),
                }
                assert_eq!(m.len(), twin.len(), "seed {seed} step {step}");
                assert_eq!(m.contains_key(&k), twin.contains_key(&k));
                if step % 97 == 0 {
                    let got: HashMap<u32, u64> = m.iter().map(|(k, v)| (*k, *v)).collect();
                    assert_eq!(got, twin, "seed {seed} step {step}");
                    assert_eq!(m.iter().count(), twin.len());
                }
            }
            for (s, t) in &snapshots {
                let got: HashMap<u32, u64> = s.iter().map(|(k, v)| (*k, *v)).collect();
                assert_eq!(&got, t, "seed {seed}: a clone changed");
                assert_eq!(s.len(), t.len());
            }
            let fresh: OverlayMap<u32, u64> = twin.clone().into();
            assert!(fresh == m, "seed {seed}: equality across different splits");
        }
    }

    #[test]
    fn borrowed_keys_read_and_remove() {
        let mut m: OverlayMap<Arc<str>, usize> = OverlayMap::new();
        m.insert("a".into(), 1);
        let shared = m.clone();
        m.insert("b".into(), 2);
        assert_eq!(m.get("a"), Some(&1));
        assert_eq!(m.remove("a"), Some(1));
        assert_eq!(m.get("a"), None);
        assert_eq!(shared.get("a"), Some(&1));
        assert_eq!(shared.get("b"), None);
        assert_eq!(m.len(), 1);
        // Removed and put back as it was: nothing left in the overlay.
        let mut n = shared.clone();
        n.remove("a");
        n.insert("a".into(), 1);
        assert!(n.delta.is_empty());
        assert!(n == shared);
    }
}
