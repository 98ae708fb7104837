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
//!   old rule (OpenFlow "identical flow" semantics).

use std::collections::HashMap;

use classifier::{LinearClassifier, OfTable, RuleId};
use flow::ofp::{Action, Match};
use flow::{FlowKey, FlowMask};

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
            Backend::TupleSpace => Cls::Tss(Box::new(OfTable::new())),
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
        self.actions.iter().any(|a| match a {
            Action::Output { port: p, .. } | Action::OutputTrunc { port: p, .. } => *p == port,
            Action::Controller { .. } => port == flow::ofp::OfPort::CONTROLLER,
            _ => false,
        })
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

/// One OpenFlow table.
#[derive(Debug, Clone)]
pub struct FlowTable {
    cls: Cls,
    rules: HashMap<u64, (RuleId, OfRule)>,
    next: u64,
}

impl FlowTable {
    /// An empty table using `backend`.
    pub fn new(backend: Backend) -> FlowTable {
        FlowTable {
            cls: Cls::new(backend),
            rules: HashMap::new(),
            next: 0,
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

    /// Inserts a rule (the caller has removed any identical one) and returns its handle.
    pub fn insert(&mut self, rule: OfRule) -> RuleHandle {
        let h = self.next;
        self.next += 1;
        let id = self.cls.insert(u32::from(rule.priority), &rule.match_, h);
        self.rules.insert(h, (id, rule));
        RuleHandle(h)
    }

    /// Removes a rule.
    pub fn remove(&mut self, h: RuleHandle) -> Option<OfRule> {
        let (id, rule) = self.rules.remove(&h.0)?;
        self.cls.remove(id);
        Some(rule)
    }

    /// The rule with this exact match and priority.
    pub fn find_strict(&self, m: &Match, priority: u16) -> Option<RuleHandle> {
        self.rules
            .iter()
            .find(|(_, (_, r))| r.priority == priority && r.match_ == *m)
            .map(|(h, _)| RuleHandle(*h))
    }

    /// The highest-priority rule matching `key`, adding every consulted bit to `wc`.
    pub fn lookup_wc(&self, key: &FlowKey, wc: &mut FlowMask) -> Option<(RuleHandle, &OfRule)> {
        let h = self.cls.lookup_wc(key, wc)?;
        self.rules.get(&h).map(|(_, r)| (RuleHandle(h), r))
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
