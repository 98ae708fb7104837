//! Recirculation hints: the exact-match cache extended through `ct(...),recirc(id)`.
//!
//! A stateful pipeline sends each packet through the datapath twice: the first pass runs
//! `ct(...)` and `recirc(id)`, the second classifies the packet again with the tracker's
//! metadata (`recirc_id`, `ct_state`, `ct_zone`, `ct_mark`, `ct_label`, the original tuple)
//! in its key. When the tracker did not rewrite the packet (no NAT), the second pass's key is
//! a function of the first pass's key and that metadata: the same bytes are extracted again,
//! with new metadata. So a packet whose first pass hit an EMC entry, and whose metadata after
//! `ct` equals what an earlier packet of the same entry had, finds the megaflow that earlier
//! packet's second pass found — as long as that flow is alive. A hint per EMC entry keeps
//! that pair (metadata, second-pass flow); the second pass then skips extraction, hashing
//! and the cache lookups (seed 002's cost of recirculation) while the packet still goes
//! through the tracker with every check, and through the recirculation queue in order.
//!
//! # What a hint holds, and why it is exact
//!
//! Hint `s` belongs to EMC entry `s` and names no connection state: only the metadata the
//! tracker returned and a reference to a megaflow. It is valid for a packet that hit entry
//! `s` (so the packet's first-pass key equals the entry's key), whose metadata after `ct`
//! equals the hint's exactly, and only while the flow is not dead — the EMC's own rule for a
//! cached flow. Every change of entry `s` (insert, eviction, sweep, clear) drops hint `s`
//! and bumps its sequence number, so a hint can never outlive the key it was learned for.
//!
//! # Sequence numbers
//!
//! A packet carries an [`Origin`] through the recirculation queue: the slot and the
//! sequence number it saw at `ct` time. At its second pass, [`RecircHints::flow`] answers
//! only if the hint is still the one checked (same sequence number) and its flow is alive;
//! [`RecircHints::learn`] records what a full second pass found only if the entry did not
//! change in between. Either way a stale origin is a plain miss: the packet takes the full
//! second pass.

use std::sync::Arc;

use flow::extract::PacketMeta;

use crate::megaflow::DpFlow;

/// What the first pass of a recirculated packet knew about its second (see the module
/// doc), carried with the packet through the recirculation queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// Nothing: the first pass did not hit the EMC, or the tracker rewrote the packet.
    #[default]
    None,
    /// No usable hint: the second pass classifies in full and records what it finds in
    /// hint `slot` (if its sequence number is still `seq`).
    Learn {
        /// EMC entry of the first pass.
        slot: u16,
        /// Its hint's sequence number then.
        seq: u32,
    },
    /// The hint matched: the second pass takes its flow (if still `seq` and alive).
    Pre {
        /// EMC entry of the first pass.
        slot: u16,
        /// Its hint's sequence number then.
        seq: u32,
    },
}

#[derive(Debug, Clone)]
struct Hint {
    seq: u32,
    md: PacketMeta,
    flow: Option<Arc<DpFlow>>,
}

impl Hint {
    const EMPTY: Hint = Hint {
        seq: 0,
        md: PacketMeta::port(0),
        flow: None,
    };
}

/// One hint per EMC entry. See the module doc.
#[derive(Debug)]
pub struct RecircHints {
    slots: Box<[Hint]>,
}

impl RecircHints {
    /// `n` empty hints (one per EMC entry).
    pub fn new(n: usize) -> RecircHints {
        RecircHints {
            slots: vec![Hint::EMPTY; n].into_boxed_slice(),
        }
    }

    /// EMC entry `slot` changed: its hint is dropped and its sequence number bumped.
    #[inline]
    pub fn entry_changed(&mut self, slot: usize) {
        if let Some(h) = self.slots.get_mut(slot) {
            h.seq = h.seq.wrapping_add(1);
            h.flow = None;
        }
    }

    /// Every EMC entry changed.
    pub fn all_changed(&mut self) {
        for s in 0..self.slots.len() {
            self.entry_changed(s);
        }
    }

    /// The origin of a packet that hit EMC entry `slot` and leaves `ct` with metadata `md`
    /// (its `recirc_id` already the next pass's): [`Origin::Pre`] if the hint's metadata
    /// equals `md` and its flow is alive, else [`Origin::Learn`].
    #[inline]
    pub fn check(&self, slot: usize, md: &PacketMeta) -> Origin {
        let Some(h) = self.slots.get(slot) else {
            return Origin::None;
        };
        let slot = slot as u16;
        match &h.flow {
            Some(f) if h.md == *md && !f.is_dead() => Origin::Pre { slot, seq: h.seq },
            _ => Origin::Learn { slot, seq: h.seq },
        }
    }

    /// The flow a [`Origin::Pre`] packet's second pass takes: `None` if the hint changed
    /// since the check or its flow died (then the pass classifies in full).
    #[inline]
    pub fn flow(&self, o: Origin) -> Option<&Arc<DpFlow>> {
        let Origin::Pre { slot, seq } = o else {
            return None;
        };
        let h = self.slots.get(usize::from(slot))?;
        h.flow.as_ref().filter(|f| h.seq == seq && !f.is_dead())
    }

    /// Records that the full second pass of a [`Origin::Learn`] packet, with metadata `md`,
    /// found `flow` (ignored for another origin or if the entry changed since).
    pub fn learn(&mut self, o: Origin, md: &PacketMeta, flow: &Arc<DpFlow>) {
        let Origin::Learn { slot, seq } = o else {
            return;
        };
        if let Some(h) = self.slots.get_mut(usize::from(slot))
            && h.seq == seq
        {
            h.seq = seq.wrapping_add(1);
            h.md = *md;
            h.flow = Some(Arc::clone(flow));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::megaflow::Ufid;
    use flow::{FlowKey, FlowMask};

    fn flow(n: u128) -> Arc<DpFlow> {
        Arc::new(DpFlow::new(Ufid(n), &FlowKey::ZERO, &FlowMask::CATCHALL, 0))
    }

    #[test]
    fn learn_then_pre_until_the_entry_or_flow_changes() {
        let mut h = RecircHints::new(4);
        let mut md = PacketMeta::port(1);
        md.recirc_id = 7;
        md.ct_state = 0x22;
        let f = flow(1);
        let o = h.check(2, &md);
        assert!(matches!(o, Origin::Learn { slot: 2, .. }));
        assert!(h.flow(o).is_none());
        h.learn(o, &md, &f);
        let p = h.check(2, &md);
        assert!(matches!(p, Origin::Pre { slot: 2, .. }));
        assert!(Arc::ptr_eq(h.flow(p).expect("hinted"), &f));
        // Other metadata: learn again.
        let mut md2 = md;
        md2.ct_state = 0x21;
        assert!(matches!(h.check(2, &md2), Origin::Learn { .. }));
        // A stale learn (the entry changed in between) records nothing.
        let stale = h.check(3, &md);
        h.entry_changed(3);
        h.learn(stale, &md, &f);
        assert!(matches!(h.check(3, &md), Origin::Learn { .. }));
        // The entry changes after the check: the queued packet's hint is gone.
        h.entry_changed(2);
        assert!(h.flow(p).is_none());
        assert!(matches!(h.check(2, &md), Origin::Learn { .. }));
        // A dead flow is no hint.
        let o = h.check(1, &md);
        h.learn(o, &md, &f);
        let p = h.check(1, &md);
        f.mark_dead();
        assert!(h.flow(p).is_none());
        assert!(matches!(h.check(1, &md), Origin::Learn { .. }));
        h.all_changed();
        assert_eq!(h.check(9, &md), Origin::None);
    }
}
