//! One OpenFlow table: rules (match, priority, actions, cookie, timeouts, counters) indexed by a
//! classifier that reports the bits each lookup consulted.
//!
//! The classifier is either the linear reference ([`classifier::LinearClassifier`]) or the
//! tuple-space [`classifier::OfTable`]; both have the same semantics (highest priority wins,
//! ties by insertion order) and both report a sound wildcard mask from `lookup_wc`, so the
//! translation layer does not care which one it talks to ([`Backend`]).
//!
//! Invariants:
//! - every rule in `rules` is in the classifier exactly once, under its own match and priority,
//!   and the classifier holds nothing else;
//! - no two rules have the same (match, priority): an add with an identical pair replaces the
//!   old rule (OpenFlow "identical flow" semantics);
//! - the *exact index* (OVS `classifier_find_rule_exactly`) maps the hash of every rule's
//!   (match, priority) to its handle: `exact` holds one handle per hash, `exact_more` the
//!   others with the same hash (64-bit collisions; checked, never assumed away). Strict
//!   flow mods and add-replace find their rule through it in O(1) instead of a scan.
//! - conjunctive matches ([`crate::conj`]): a rule with a `conjunction` action (soft) is in
//!   the table's [`crate::conj::SoftIndex`] and not in the classifier; a hard rule matching a
//!   non-zero `conj_id` is in the second classifier `conj_cls`, consulted only by the
//!   conjunctive re-lookup; every other rule is in `cls`. Where a rule lives is a function of
//!   its match and actions ([`Place::of`]); changing a rule's actions re-files it.

use std::collections::HashMap;

use classifier::{LinearClassifier, OfTable, RuleId};
use flow::ofp::{Action, Match};
use flow::{FieldId, FlowKey, FlowMask};

/// Which classifier a table uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The linear reference scan (obviously right; every examined rule's mask is un-wildcarded).
    Linear,
    /// The tuple-space classifier with staged lookup (narrower megaflows).
    #[default]
    TupleSpace,
}

#[derive(Debug, Clone)]
enum Cls {
    Linear(LinearClassifier<u64>),
    Tss(Box<OfTable<u64>>),
}

impl Cls {
    fn new(b: Backend) -> Cls {
        match b {
            Backend::Linear => Cls::Linear(LinearClassifier::new()),
            // Prefix tries on, as OVS keeps them on its tables: a miss on an address
            // prefix un-wildcards only the bits that decided it.
            Backend::TupleSpace => Cls::Tss(Box::new(OfTable::with_config(
                classifier::oftable::Config {
                    prefix_tries: true,
                    ..classifier::oftable::Config::default()
                },
            ))),
        }
    }
    fn insert(&mut self, prio: u32, m: &Match, v: u64) -> RuleId {
        match self {
            Cls::Linear(c) => c.insert(prio, &m.key, &m.mask, v),
            Cls::Tss(c) => c.insert(prio, &m.key, &m.mask, v),
        }
    }
    fn remove(&mut self, id: RuleId) {
        match self {
            Cls::Linear(c) => {
                c.remove(id);
            }
            Cls::Tss(c) => {
                c.remove(id);
            }
        }
    }
    fn lookup_wc(&self, key: &FlowKey, wc: &mut FlowMask) -> Option<u64> {
        match self {
            Cls::Linear(c) => c.lookup_wc(key, wc).map(|r| r.value),
            Cls::Tss(c) => c.lookup_wc(key, wc).map(|r| r.value),
        }
    }
}

/// One rule of a table (OVS `struct rule`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfRule {
    /// The match.
    pub match_: Match,
    /// Priority.
    pub priority: u16,
    /// Cookie.
    pub cookie: u64,
    /// Idle timeout in seconds (0 = none).
    pub idle_timeout: u16,
    /// Hard timeout in seconds (0 = none).
    pub hard_timeout: u16,
    /// `importance=`.
    pub importance: u16,
    /// The actions (empty = drop).
    pub actions: Vec<Action>,
    /// When the rule was added (ms, caller's clock).
    pub created_ms: u64,
    /// When the actions were last modified (ms).
    pub modified_ms: u64,
    /// When a packet last hit the rule (ms); starts at `created_ms`.
    pub used_ms: u64,
    /// Packets that hit the rule.
    pub n_packets: u64,
    /// Bytes of those packets.
    pub n_bytes: u64,
}

impl OfRule {
    /// Whether the rule has an output-like action to `port` (the `out_port` filter, OVS
    /// `ofpacts_output_to_port`): `output:P`, `output(port=P,…)`, `enqueue`, or, inside
    /// `ct(exec(...))`, nothing (no outputs there).
    pub fn outputs_to(&self, port: flow::ofp::OfPort) -> bool {
        fn any(actions: &[Action], port: flow::ofp::OfPort) -> bool {
            actions.iter().any(|a| match a {
                Action::Output { port: p, .. } | Action::OutputTrunc { port: p, .. } => *p == port,
                Action::Controller { .. } => port == flow::ofp::OfPort::CONTROLLER,
                // OVS flattens nested lists (`clone(...)`) here.
                Action::Clone(inner) | Action::WriteActions(inner) => any(inner, port),
                Action::Enqueue { port: p, .. } => *p == port,
                _ => false,
            })
        }
        any(&self.actions, port)
    }

    /// Seconds since creation at `now_ms` (the `duration` of `dump-flows`).
    pub fn duration_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.created_ms)
    }

    /// Whether a timeout has expired at `now_ms`, and which (`"hard"` or `"idle"`).
    pub fn expired(&self, now_ms: u64) -> Option<&'static str> {
        if self.hard_timeout != 0
            && now_ms >= self.modified_ms.max(self.created_ms) + u64::from(self.hard_timeout) * 1000
        {
            return Some("hard");
        }
        if self.idle_timeout != 0 && now_ms >= self.used_ms + u64::from(self.idle_timeout) * 1000 {
            return Some("idle");
        }
        None
    }
}

/// Handle of a rule inside its table (stable until the rule is removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleHandle(pub u64);

/// Where a rule of a table lives (conjunctive matches, [`crate::conj`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The main classifier.
    Main,
    /// The classifier of hard rules matching a non-zero `conj_id`.
    ConjId,
    /// The soft index.
    Soft,
}

impl Place {
    fn of(rule: &OfRule) -> Place {
        if crate::conj::conjunctions(&rule.actions).is_empty() {
            if crate::conj::needs_conj_id(&rule.match_) {
                Place::ConjId
            } else {
                Place::Main
            }
        } else {
            Place::Soft
        }
    }
}

/// One OpenFlow table.
#[derive(Debug, Clone)]
pub struct FlowTable {
    cls: Cls,
    // conjunctive matches (issue #17).
    conj_cls: Cls,
    soft: crate::conj::SoftIndex,
    /// Rules in `cls` that look at `conj_id` (`conj_id=0`): the re-lookup must redo `cls`.
    main_conj_masked: usize,
    rules: HashMap<u64, (RuleId, OfRule)>,
    next: u64,
    exact: HashMap<u64, u64>,
    exact_more: HashMap<u64, Vec<u64>>,
    /// Rules with an idle or hard timeout (set only on insert): expiry skips a table
    /// without any instead of looking at every rule.
    timed: usize,
    /// ANDed into identity hashes: all ones, except in tests that force collisions.
    hash_mask: u64,
}

/// Hash of a rule's identity (match as stored, priority) for the exact index. Not
/// cryptographic and not seeded: collisions are resolved by comparing the rules.
fn identity_hash(m: &Match, priority: u16) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = u64::from(priority).wrapping_mul(K);
    for (k, w) in m.key.w.iter().zip(&m.mask.w) {
        h = (h ^ (k & w)).wrapping_mul(K).rotate_left(27);
        h = (h ^ w).wrapping_mul(K).rotate_left(31);
    }
    h ^ (h >> 32)
}

impl FlowTable {
    /// An empty table using `backend`.
    pub fn new(backend: Backend) -> FlowTable {
        FlowTable {
            cls: Cls::new(backend),
            conj_cls: Cls::new(backend),
            soft: crate::conj::SoftIndex::default(),
            main_conj_masked: 0,
            rules: HashMap::new(),
            next: 0,
            exact: HashMap::new(),
            exact_more: HashMap::new(),
            timed: 0,
            hash_mask: u64::MAX,
        }
    }

    /// A table whose exact index keeps only the low 2 bits of each hash, so that most rules
    /// collide (tests of the collision path).
    #[cfg(test)]
    fn with_colliding_index(backend: Backend) -> FlowTable {
        FlowTable {
            hash_mask: 3,
            ..FlowTable::new(backend)
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the table has no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Rules with an idle or hard timeout (none: nothing in this table ever expires).
    pub fn n_timed(&self) -> usize {
        self.timed
    }

    /// Inserts a rule (the caller has removed any identical one) and returns its handle.
    pub fn insert(&mut self, rule: OfRule) -> RuleHandle {
        self.timed += usize::from(rule.idle_timeout != 0 || rule.hard_timeout != 0);
        let h = self.next;
        self.next += 1;
        let id = self.file(h, &rule);
        let ih = identity_hash(&rule.match_, rule.priority) & self.hash_mask;
        if let std::collections::hash_map::Entry::Vacant(e) = self.exact.entry(ih) {
            e.insert(h);
        } else {
            self.exact_more.entry(ih).or_default().push(h);
        }
        self.rules.insert(h, (id, rule));
        RuleHandle(h)
    }

    /// Removes a rule.
    pub fn remove(&mut self, h: RuleHandle) -> Option<OfRule> {
        let (id, rule) = self.rules.remove(&h.0)?;
        self.timed -= usize::from(rule.idle_timeout != 0 || rule.hard_timeout != 0);
        self.unfile(h.0, id, &rule);
        let ih = identity_hash(&rule.match_, rule.priority) & self.hash_mask;
        if self.exact.get(&ih) == Some(&h.0) {
            match self.exact_more.get_mut(&ih).and_then(Vec::pop) {
                Some(next) => {
                    self.exact.insert(ih, next);
                }
                None => {
                    self.exact.remove(&ih);
                }
            }
        } else if let Some(v) = self.exact_more.get_mut(&ih) {
            v.retain(|x| *x != h.0);
        }
        if self.exact_more.get(&ih).is_some_and(Vec::is_empty) {
            self.exact_more.remove(&ih);
        }
        Some(rule)
    }

    /// The rule with this exact match and priority (O(1) through the exact index).
    pub fn find_strict(&self, m: &Match, priority: u16) -> Option<RuleHandle> {
        let ih = identity_hash(m, priority) & self.hash_mask;
        let first = self.exact.get(&ih).into_iter();
        let more = self.exact_more.get(&ih).into_iter().flatten();
        first
            .chain(more)
            .copied()
            .find(|h| {
                self.rules
                    .get(h)
                    .is_some_and(|(_, r)| r.priority == priority && r.match_ == *m)
            })
            .map(RuleHandle)
    }

    /// [`Self::find_strict`] by scanning every rule: the index's trivially correct twin.
    #[cfg(test)]
    fn find_strict_scan(&self, m: &Match, priority: u16) -> Option<RuleHandle> {
        self.rules
            .iter()
            .find(|(_, (_, r))| r.priority == priority && r.match_ == *m)
            .map(|(h, _)| RuleHandle(*h))
    }

    /// Puts rule `h` where it lives ([`Place`]); its classifier id (a dummy for soft rules).
    fn file(&mut self, h: u64, rule: &OfRule) -> RuleId {
        let prio = u32::from(rule.priority);
        match Place::of(rule) {
            Place::Main => {
                self.main_conj_masked += usize::from(rule.match_.mask_of(FieldId::ConjId) != 0);
                self.cls.insert(prio, &rule.match_, h)
            }
            Place::ConjId => self.conj_cls.insert(prio, &rule.match_, h),
            Place::Soft => {
                let conjs = crate::conj::conjunctions(&rule.actions);
                let m = &rule.match_;
                self.soft.insert(&m.key, &m.mask, rule.priority, h, conjs);
                RuleId(u64::MAX)
            }
        }
    }

    /// Takes rule `h` (classifier id `id`) out of where it lives.
    fn unfile(&mut self, h: u64, id: RuleId, rule: &OfRule) {
        match Place::of(rule) {
            Place::Main => {
                self.main_conj_masked -= usize::from(rule.match_.mask_of(FieldId::ConjId) != 0);
                self.cls.remove(id);
            }
            Place::ConjId => self.conj_cls.remove(id),
            Place::Soft => {
                let m = &rule.match_;
                self.soft.remove(&m.key, &m.mask, rule.priority, h);
            }
        }
    }

    /// Replaces a rule's actions (modify flows), re-filing it if that changes where it lives
    /// (a conjunction added or removed, or other conjunctions).
    pub fn set_actions(&mut self, h: RuleHandle, actions: Vec<Action>) {
        let Some((id, rule)) = self.rules.get(&h.0) else {
            return;
        };
        let (id, old) = (*id, rule.clone());
        let mut new = old.clone();
        new.actions = actions;
        let refile = Place::of(&old) == Place::Soft || Place::of(&new) == Place::Soft;
        let id = if refile {
            self.unfile(h.0, id, &old);
            self.file(h.0, &new)
        } else {
            id
        };
        self.rules.insert(h.0, (id, new));
    }

    /// Number of soft (conjunctive) rules.
    pub fn n_soft(&self) -> usize {
        self.soft.len()
    }

    /// The highest-priority rule matching `key`, adding every consulted bit to `wc`; with
    /// conjunctive matches as OVS's classifier does them ([`crate::conj`]). `conj_id` is never
    /// left in `wc` (no packet carries one).
    pub fn lookup_wc(&self, key: &FlowKey, wc: &mut FlowMask) -> Option<(RuleHandle, &OfRule)> {
        let h = if self.soft.is_empty() {
            self.cls.lookup_wc(key, wc)
        } else {
            self.lookup_conj(key, wc)
        };
        FieldId::ConjId.set_mask(wc, 0);
        let h = h?;
        self.rules.get(&h).map(|(_, r)| (RuleHandle(h), r))
    }

    fn prio(&self, h: u64) -> i32 {
        self.rules
            .get(&h)
            .map_or(-1, |(_, r)| i32::from(r.priority))
    }

    /// The lookup with soft matches (OVS `classifier_lookup__`).
    fn lookup_conj(&self, key: &FlowKey, wc: &mut FlowMask) -> Option<u64> {
        let hard = self.cls.lookup_wc(key, wc);
        let hard_pri = hard.map_or(-1, |h| self.prio(h));
        let soft = self.soft.matches(key, wc, hard_pri);
        let better = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => {
                let (px, py) = (self.prio(x), self.prio(y));
                Some(if px > py || (px == py && x < y) { x } else { y })
            }
            (x, None) => x,
            (None, y) => y,
        };
        crate::conj::walk_soft(&soft, |id| {
            let mut k2 = *key;
            FieldId::ConjId.set(&mut k2, u128::from(id));
            let base = if self.main_conj_masked > 0 {
                self.cls.lookup_wc(&k2, wc)
            } else {
                hard
            };
            better(base, self.conj_cls.lookup_wc(&k2, wc))
        })
        .or(hard)
    }

    /// A rule by handle.
    pub fn get(&self, h: RuleHandle) -> Option<&OfRule> {
        self.rules.get(&h.0).map(|(_, r)| r)
    }

    /// A rule by handle, mutably (never change `match_`/`priority` through this).
    pub(crate) fn get_mut(&mut self, h: RuleHandle) -> Option<&mut OfRule> {
        self.rules.get_mut(&h.0).map(|(_, r)| r)
    }

    /// Every rule, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (RuleHandle, &OfRule)> {
        self.rules.iter().map(|(h, (_, r))| (RuleHandle(*h), r))
    }

    /// Every rule sorted as `dump-flows --sort`-ish: priority descending, then insertion order.
    pub fn sorted(&self) -> Vec<(RuleHandle, &OfRule)> {
        let mut v: Vec<_> = self.iter().collect();
        v.sort_by(|a, b| b.1.priority.cmp(&a.1.priority).then(a.0.cmp(&b.0)));
        v
    }
}

/// OVS `cls_rule_is_loose_match`: whether `rule` lies inside the criteria `crit` (every bit
/// `crit` looks at, the rule looks at too, with the same value).
pub fn loose_match(rule: &Match, crit: &Match) -> bool {
    crit.mask.is_subset_of(&rule.mask) && rule.key.eq_masked(&crit.key, &crit.mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::field::FieldId;
    use proptest::prelude::*;

    fn rule(src: u8, plen: u8, dport: u16, priority: u16) -> OfRule {
        let mut key = FlowKey::ZERO;
        let mut mask = FlowMask::CATCHALL;
        FieldId::DlType.set(&mut key, 0x0800);
        FieldId::DlType.unwildcard(&mut mask);
        FieldId::NwSrc.set(&mut key, u128::from(u32::from(src) << 24));
        let m = if plen == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(plen.min(32)))
        };
        FieldId::NwSrc.set_mask(&mut mask, u128::from(m));
        if dport != 0 {
            FieldId::NwProto.set(&mut key, 6);
            FieldId::NwProto.unwildcard(&mut mask);
            FieldId::TpDst.set(&mut key, u128::from(dport));
            FieldId::TpDst.unwildcard(&mut mask);
        }
        OfRule {
            match_: Match {
                key: key.masked(&mask),
                mask,
            },
            priority,
            cookie: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            importance: 0,
            actions: Vec::new(),
            created_ms: 0,
            modified_ms: 0,
            used_ms: 0,
            n_packets: 0,
            n_bytes: 0,
        }
    }

    proptest! {
        /// The exact index against a scan of every rule, after every insert and remove of a
        /// random sequence, with full hashes and with hashes cut to 2 bits (collisions).
        #[test]
        fn exact_index_agrees_with_a_scan(
            ops in prop::collection::vec((0u8..3, 0u8..4, 0u8..3, 0u16..3, 0u16..3), 1..120),
            colliding in any::<bool>(),
        ) {
            let mut t = if colliding {
                FlowTable::with_colliding_index(Backend::TupleSpace)
            } else {
                FlowTable::new(Backend::TupleSpace)
            };
            let mut live: Vec<RuleHandle> = Vec::new();
            for (op, src, plen, dport, prio) in ops {
                let r = rule(src, plen * 8, dport * 80, prio);
                if op == 0 && !live.is_empty() {
                    let h = live.remove(usize::from(src) % live.len());
                    prop_assert!(t.remove(h).is_some());
                } else if t.find_strict_scan(&r.match_, r.priority).is_none() {
                    live.push(t.insert(r));
                }
                for (_, q) in t.iter() {
                    prop_assert_eq!(
                        t.find_strict(&q.match_, q.priority),
                        t.find_strict_scan(&q.match_, q.priority)
                    );
                }
                for s in 0..3u8 {
                    for d in 0..3u16 {
                        let probe = rule(s, 8, d * 80, 1);
                        prop_assert_eq!(
                            t.find_strict(&probe.match_, probe.priority),
                            t.find_strict_scan(&probe.match_, probe.priority)
                        );
                    }
                }
            }
            prop_assert_eq!(t.len(), live.len());
        }
    }
}
