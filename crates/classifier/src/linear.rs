//! The reference classifier: a priority-ordered list scanned from the top.
//!
//! It is deliberately naive: O(rules) per lookup, no hashing, no indexing. Its only job is to
//! be obviously right, so that clever classifiers can be compared with it on random input.
//!
//! Semantics (those of an OpenFlow table):
//! - a rule is `(priority, match key, mask)`; a packet `p` matches when
//!   `p & mask == key & mask`;
//! - the highest-priority matching rule wins; among equal priorities the earliest inserted wins
//!   (OpenFlow leaves that case undefined; being deterministic makes comparisons possible);
//! - [`LinearClassifier::lookup_wc`] also reports which bits decided the answer: the union of
//!   the masks of every rule it had to examine, which is always sound (never too narrow).

use flow::{FlowKey, FlowMask};

/// Identifies a rule for removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u64);

/// One rule of the reference classifier.
#[derive(Debug, Clone)]
pub struct LinearRule<T> {
    /// Identity given at insert.
    pub id: RuleId,
    /// Priority: higher wins.
    pub priority: u32,
    /// Match value, stored already masked.
    pub key: FlowKey,
    /// Significant bits.
    pub mask: FlowMask,
    /// What the rule carries (actions, a rule index, …).
    pub value: T,
}

/// Rules kept sorted by descending priority, then by insertion order.
#[derive(Debug, Clone)]
pub struct LinearClassifier<T> {
    rules: Vec<LinearRule<T>>,
    next_id: u64,
}

impl<T> Default for LinearClassifier<T> {
    fn default() -> Self {
        LinearClassifier {
            rules: Vec::new(),
            next_id: 0,
        }
    }
}

impl<T> LinearClassifier<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Adds a rule and returns its id.
    pub fn insert(&mut self, priority: u32, key: &FlowKey, mask: &FlowMask, value: T) -> RuleId {
        let id = RuleId(self.next_id);
        self.next_id += 1;
        // After every rule of priority >= ours: equal priorities keep insertion order.
        let pos = self.rules.partition_point(|r| r.priority >= priority);
        self.rules.insert(
            pos,
            LinearRule {
                id,
                priority,
                key: key.masked(mask),
                mask: *mask,
                value,
            },
        );
        id
    }

    /// Removes a rule; returns its value if it was there.
    pub fn remove(&mut self, id: RuleId) -> Option<T> {
        let pos = self.rules.iter().position(|r| r.id == id)?;
        Some(self.rules.remove(pos).value)
    }

    /// The winning rule for `key`, if any.
    pub fn lookup(&self, key: &FlowKey) -> Option<&LinearRule<T>> {
        self.rules.iter().find(|r| key.eq_masked(&r.key, &r.mask))
    }

    /// The winning rule for `key`, adding to `wc` every bit the scan consulted.
    pub fn lookup_wc(&self, key: &FlowKey, wc: &mut FlowMask) -> Option<&LinearRule<T>> {
        for r in &self.rules {
            wc.union_with(&r.mask);
            if key.eq_masked(&r.key, &r.mask) {
                return Some(r);
            }
        }
        None
    }

    /// Rules in lookup order.
    pub fn iter(&self) -> impl Iterator<Item = &LinearRule<T>> {
        self.rules.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::FieldId;

    fn key(f: FieldId, v: u128) -> FlowKey {
        let mut k = FlowKey::ZERO;
        f.set(&mut k, v);
        k
    }

    #[test]
    fn priority_then_insertion_order() {
        let mut c = LinearClassifier::new();
        let any = FlowMask::CATCHALL;
        let port = FieldId::InPort.full_mask();
        let low = c.insert(1, &FlowKey::ZERO, &any, "low");
        let _p1 = c.insert(10, &key(FieldId::InPort, 1), &port, "port1");
        let _p1b = c.insert(10, &key(FieldId::InPort, 1), &port, "port1-later");
        assert_eq!(
            c.lookup(&key(FieldId::InPort, 1)).map(|r| r.value),
            Some("port1")
        );
        assert_eq!(
            c.lookup(&key(FieldId::InPort, 2)).map(|r| r.value),
            Some("low")
        );
        assert_eq!(c.remove(low), Some("low"));
        assert!(c.lookup(&key(FieldId::InPort, 2)).is_none());
        assert_eq!(c.remove(low), None);
    }

    #[test]
    fn wildcards_cover_every_examined_rule() {
        let mut c = LinearClassifier::new();
        c.insert(10, &key(FieldId::TpDst, 80), &FieldId::TpDst.full_mask(), 1);
        c.insert(
            5,
            &key(FieldId::NwProto, 6),
            &FieldId::NwProto.full_mask(),
            2,
        );
        let pkt = key(FieldId::NwProto, 6);
        let mut wc = FlowMask::CATCHALL;
        assert_eq!(c.lookup_wc(&pkt, &mut wc).map(|r| r.value), Some(2));
        assert_eq!(FieldId::TpDst.get_mask(&wc), 0xffff);
        assert_eq!(FieldId::NwProto.get_mask(&wc), 0xff);
    }
}
