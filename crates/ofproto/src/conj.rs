//! Conjunctive matches (`conjunction(id,k/n)` and `conj_id`), as OVS's classifier does them
//! (`lib/classifier.c`, `classifier_lookup__` with soft matches).
//!
//! # Semantics
//!
//! A rule whose actions hold a `conjunction` is *soft*: it is never the result of a lookup.
//! A lookup first finds the best *hard* rule (any other rule), of priority `hard_pri`. Then it
//! collects the soft rules that match the packet with a priority above `hard_pri` and walks
//! their priorities from the highest down. At one priority `P`, conjunction `id` with `n`
//! clauses is *satisfied* when, for every clause `1..=n`, some soft rule of priority `P` that
//! matches carries `conjunction(id,k/n)`; the rules are visited in a fixed order and the first
//! id that becomes satisfied is tried (OVS `find_conjunctive_match`, which stops at the first
//! satisfied id of a rule): the table is looked up again, hard rules only, with `conj_id` set
//! to `id`. That re-lookup returns the best of the `conj_id=id` rules and the hard match; if it
//! returns a rule, that rule is the result. Otherwise the walk goes on (other ids at `P`, then
//! lower priorities), and ends with the hard match.
//!
//! One corner of OVS is not reproduced: OVS keeps rules with an identical match in one list and
//! its conjunctive re-lookup sees only the list's head, so a soft rule can hide a lower-priority
//! hard rule with the very same match from the re-lookup. Here the re-lookup always sees every
//! hard rule (the result differs only in tables that have a soft and a hard rule with the same
//! match, where the hard one's priority is between the `conj_id` rule's and the soft one's).
//!
//! # Structure
//!
//! A table keeps its hard rules that match `conj_id` (`conj_id=N`, N ≠ 0) in a classifier of
//! their own, looked up only by the re-lookup: no packet carries a `conj_id`, so for packets
//! those rules can never match and leaving them out is exact. Soft rules live in a
//! [`SoftIndex`]: one hash map per distinct mask (OVS's subtables without stages or tries),
//! masked key → rules with that exact match, highest priority first.
//!
//! # Megaflow
//!
//! Every soft subtable un-wildcards its whole mask, whether it is probed or not and whether
//! the probe hits or not, so any packet equal under the mask finds the same soft rules. Those
//! whose rules cannot beat the hard match are not probed (they cannot change the result while
//! the hard match stays, and its bits are in the mask already), but their bits are kept: OVS
//! walks its subtables before it knows the final hard match and may visit them, and our
//! megaflow must never be wider than OVS's. This is OVS without stages or prefix tries on
//! soft subtables: sound, at times narrower than OVS's. The re-lookups add the bits their
//! classifiers consult. `conj_id` itself is cleared from the mask by the table:
//! every packet has `conj_id` 0, as OVS never shows it in a megaflow.
//!
//! [`reference_lookup`] is the trivially correct twin: a scan of every rule with the same
//! semantics, against which both table backends are property-tested.

use std::collections::{BTreeMap, HashMap};

use flow::ofp::Action;
use flow::{FieldId, FlowKey, FlowMask};

/// The conjunctions of one soft rule: `(id, clause (0-based), n_clauses)`.
pub type Conjs = Vec<(u32, u8, u8)>;

/// The conjunctions of an action list (empty: the rule is hard).
pub fn conjunctions(actions: &[Action]) -> Conjs {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Conjunction {
                id,
                clause,
                n_clauses,
            } => Some((*id, *clause, *n_clauses)),
            _ => None,
        })
        .collect()
}

/// Whether a match constrains `conj_id` to a non-zero value (only a re-lookup can match it).
pub fn needs_conj_id(m: &flow::ofp::Match) -> bool {
    m.mask_of(FieldId::ConjId) != 0 && m.value(FieldId::ConjId) != 0
}

#[derive(Debug, Clone)]
struct SoftRule {
    priority: u16,
    handle: u64,
    conjs: Conjs,
    min_n: u8,
}

/// A fast non-cryptographic hasher for masked keys (FxHash's multiply-rotate per word): the
/// default SipHash over a key's 32 words dominated a soft probe.
#[derive(Debug, Default, Clone, Copy)]
pub struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // A key's `[u64; 32]` arrives here as one 256-byte slice.
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_ne_bytes(w));
        }
        for b in chunks.remainder() {
            self.write_u64(u64::from(*b));
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

type KeyMap<V> = HashMap<FlowKey, V, std::hash::BuildHasherDefault<WordHasher>>;

#[derive(Debug, Clone)]
struct SoftSubtable {
    mask: FlowMask,
    /// Masked key → rules with that exact match, priority descending, then handle ascending.
    rules: KeyMap<Vec<SoftRule>>,
    /// Priority → number of rules, for the subtable's best priority.
    prios: BTreeMap<u16, usize>,
}

/// The soft (conjunctive) rules of one table, by mask.
#[derive(Debug, Clone, Default)]
pub struct SoftIndex {
    subtables: Vec<SoftSubtable>,
    len: usize,
}

/// One soft rule that matched a packet.
#[derive(Debug, Clone, Copy)]
pub struct SoftMatch<'a> {
    /// Its priority.
    pub priority: u16,
    /// Its handle in the table.
    pub handle: u64,
    conjs: &'a [(u32, u8, u8)],
    min_n: u8,
}

impl SoftIndex {
    /// Number of soft rules.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of distinct masks.
    pub fn n_subtables(&self) -> usize {
        self.subtables.len()
    }

    /// Adds a soft rule (`conjs` non-empty) with match `key`/`mask`.
    pub fn insert(
        &mut self,
        key: &FlowKey,
        mask: &FlowMask,
        priority: u16,
        handle: u64,
        conjs: Conjs,
    ) {
        let min_n = conjs.iter().map(|c| c.2).min().unwrap_or(0);
        let i = match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(i) => i,
            None => {
                self.subtables.push(SoftSubtable {
                    mask: *mask,
                    rules: KeyMap::default(),
                    prios: BTreeMap::new(),
                });
                self.subtables.len() - 1
            }
        };
        let st = &mut self.subtables[i];
        let list = st.rules.entry(key.masked(mask)).or_default();
        let at = list
            .iter()
            .position(|r| {
                (r.priority, std::cmp::Reverse(r.handle)) < (priority, std::cmp::Reverse(handle))
            })
            .unwrap_or(list.len());
        list.insert(
            at,
            SoftRule {
                priority,
                handle,
                conjs,
                min_n,
            },
        );
        *st.prios.entry(priority).or_default() += 1;
        self.len += 1;
    }

    /// Removes the soft rule `handle` with match `key`/`mask`; whether it was there.
    pub fn remove(&mut self, key: &FlowKey, mask: &FlowMask, priority: u16, handle: u64) -> bool {
        let Some(i) = self.subtables.iter().position(|s| s.mask == *mask) else {
            return false;
        };
        let st = &mut self.subtables[i];
        let mk = key.masked(mask);
        let Some(list) = st.rules.get_mut(&mk) else {
            return false;
        };
        let Some(at) = list.iter().position(|r| r.handle == handle) else {
            return false;
        };
        list.remove(at);
        if list.is_empty() {
            st.rules.remove(&mk);
        }
        if let Some(n) = st.prios.get_mut(&priority) {
            *n -= 1;
            if *n == 0 {
                st.prios.remove(&priority);
            }
        }
        if st.rules.is_empty() {
            self.subtables.swap_remove(i);
        }
        self.len -= 1;
        true
    }

    /// The soft rules matching `key` with a priority above `above` (`-1`: all), priority
    /// descending then handle ascending; un-wildcards the mask of every subtable.
    pub fn matches(&self, key: &FlowKey, wc: &mut FlowMask, above: i32) -> Vec<SoftMatch<'_>> {
        let mut out = Vec::new();
        for st in &self.subtables {
            // Un-wildcarded even when its rules cannot beat `above`: OVS visits a subtable
            // before it knows the final hard match, so its megaflow may hold these bits and
            // ours must never be wider.
            wc.union_with(&st.mask);
            let best = st.prios.keys().next_back().copied().map_or(-1, i32::from);
            if best <= above {
                continue;
            }
            if let Some(list) = st.rules.get(&key.masked(&st.mask)) {
                out.extend(
                    list.iter()
                        .filter(|r| i32::from(r.priority) > above)
                        .map(|r| SoftMatch {
                            priority: r.priority,
                            handle: r.handle,
                            conjs: &r.conjs,
                            min_n: r.min_n,
                        }),
                );
            }
        }
        out.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.handle.cmp(&b.handle)));
        out
    }
}

/// OVS `find_conjunctive_match`: records the clauses of `m` in `acc` ((id, clause bits)) and
/// returns the first id of `m` that this completes. `n_at_pri` is the number of soft matches at
/// this priority (a conjunction with more clauses cannot be complete).
pub fn find_conjunctive_match(
    conjs: &[(u32, u8, u8)],
    min_n: u8,
    n_at_pri: usize,
    acc: &mut Vec<(u32, u64)>,
) -> Option<u32> {
    if n_at_pri < usize::from(min_n) {
        return None;
    }
    for &(id, clause, n) in conjs {
        if usize::from(n) > n_at_pri {
            continue;
        }
        let i = match acc.iter().position(|e| e.0 == id) {
            Some(i) => i,
            None => {
                let init = if n >= 64 { 0 } else { u64::MAX << n };
                acc.push((id, init));
                acc.len() - 1
            }
        };
        acc[i].1 |= 1u64 << (clause & 63);
        if acc[i].1 == u64::MAX {
            return Some(id);
        }
    }
    None
}

/// The soft-match walk shared by the table and the reference: `soft` sorted by priority
/// descending (then handle); `relookup(id)` is the hard re-lookup with `conj_id = id`. Returns
/// the re-lookup's rule if one conjunction leads to a rule, else `None` (the hard match
/// stands).
pub fn walk_soft<R>(
    soft: &[SoftMatch<'_>],
    mut relookup: impl FnMut(u32) -> Option<R>,
) -> Option<R> {
    let mut i = 0;
    while i < soft.len() {
        let p = soft[i].priority;
        let j = i + soft[i..].iter().take_while(|s| s.priority == p).count();
        let mut acc: Vec<(u32, u64)> = Vec::new();
        for s in &soft[i..j] {
            if let Some(id) = find_conjunctive_match(s.conjs, s.min_n, j - i, &mut acc)
                && let Some(r) = relookup(id)
            {
                return Some(r);
            }
        }
        i = j;
    }
    None
}

/// A rule as the reference sees it: (handle, priority, match key, match mask, actions).
pub type RefRule<'a> = (u64, u16, &'a FlowKey, &'a FlowMask, &'a [Action]);

/// The trivially correct twin of a table lookup with conjunctions: scans every rule. Returns
/// the winning rule's handle (ties: the lowest handle).
pub fn reference_lookup(rules: &[RefRule<'_>], key: &FlowKey) -> Option<u64> {
    let best_hard = |k: &FlowKey| {
        rules
            .iter()
            .filter(|r| conjunctions(r.4).is_empty() && k.eq_masked(r.2, r.3))
            .min_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)))
            .map(|r| (r.0, r.1))
    };
    let hard = best_hard(key);
    let hard_pri = hard.map_or(-1, |h| i32::from(h.1));
    let conjs: Vec<(u64, u16, Conjs)> = rules
        .iter()
        .filter(|r| i32::from(r.1) > hard_pri && key.eq_masked(r.2, r.3))
        .map(|r| (r.0, r.1, conjunctions(r.4)))
        .filter(|r| !r.2.is_empty())
        .collect();
    let mut soft: Vec<SoftMatch<'_>> = conjs
        .iter()
        .map(|(h, p, c)| SoftMatch {
            priority: *p,
            handle: *h,
            conjs: c,
            min_n: c.iter().map(|x| x.2).min().unwrap_or(0),
        })
        .collect();
    soft.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.handle.cmp(&b.handle)));
    let r = walk_soft(&soft, |id| {
        let mut k2 = *key;
        FieldId::ConjId.set(&mut k2, u128::from(id));
        best_hard(&k2).map(|h| h.0)
    });
    r.or(hard.map(|h| h.0))
}
