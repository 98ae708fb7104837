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

use flow::extract::{CtOrigTuple, PacketMeta};

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

    /// Drops hint `slot` if its flow is dead (as if its entry changed); true if it did. The
    /// EMC's slow sweep calls this, so a dead megaflow (and the action set it holds) is not
    /// kept alive by a hint.
    pub fn drop_dead(&mut self, slot: usize) -> bool {
        let dead = self
            .slots
            .get(slot)
            .and_then(|h| h.flow.as_ref())
            .is_some_and(|f| f.is_dead());
        if dead {
            self.entry_changed(slot);
        }
        dead
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
            Some(f) if same_meta(&h.md, md) && !f.is_dead() => Origin::Pre { slot, seq: h.seq },
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

    /// The flow of a packet whose pass [`RecircHints::flow`] already assigned to its hint:
    /// checked by sequence number only. Nothing changes the EMC between that call and this
    /// one (the same pass), and a flow that died in between is still taken — as an EMC hit's
    /// flow is — so the packet keeps the flow it was classified to instead of being left
    /// without one (the liveness check is made once, by `flow`).
    #[inline]
    pub fn taken(&self, o: Origin) -> Option<&Arc<DpFlow>> {
        let Origin::Pre { slot, seq } = o else {
            return None;
        };
        let h = self.slots.get(usize::from(slot))?;
        h.flow.as_ref().filter(|_| h.seq == seq)
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

/// `a == b`, inlined (the derived comparison of the original tuple stayed an out-of-line
/// call on the firewall path: ~50 instructions a packet). Destructured so that a field added
/// to `PacketMeta` does not compile until it is compared here; the test checks it against
/// `==`.
#[inline(always)]
fn same_meta(a: &PacketMeta, b: &PacketMeta) -> bool {
    let PacketMeta {
        recirc_id,
        in_port,
        pkt_mark,
        dp_hash,
        ct_state,
        ct_zone,
        ct_mark,
        ct_label,
        ct_orig,
        vlan_limit,
    } = *a;
    recirc_id == b.recirc_id
        && vlan_limit == b.vlan_limit
        && ct_state == b.ct_state
        && ct_mark == b.ct_mark
        && ct_zone == b.ct_zone
        && in_port == b.in_port
        && pkt_mark == b.pkt_mark
        && dp_hash == b.dp_hash
        && ct_label == b.ct_label
        && match (ct_orig, b.ct_orig) {
            (CtOrigTuple::None, CtOrigTuple::None) => true,
            (
                CtOrigTuple::V4 {
                    src,
                    dst,
                    proto,
                    tp_src,
                    tp_dst,
                },
                CtOrigTuple::V4 {
                    src: s2,
                    dst: d2,
                    proto: p2,
                    tp_src: ts2,
                    tp_dst: td2,
                },
            ) => src == s2 && dst == d2 && proto == p2 && tp_src == ts2 && tp_dst == td2,
            (
                CtOrigTuple::V6 {
                    proto,
                    tp_src,
                    tp_dst,
                },
                CtOrigTuple::V6 {
                    proto: p2,
                    tp_src: ts2,
                    tp_dst: td2,
                },
            ) => proto == p2 && tp_src == ts2 && tp_dst == td2,
            _ => false,
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

    /// `same_meta` is `==` on metadata that differ in one field or in several, tuples of
    /// every kind included.
    #[test]
    fn same_meta_is_equality() {
        let mut r = testutil::rng::TestRng::new(0x2545_f491);
        let mut rnd = move |n: u32| r.below(u64::from(n)) as u32;
        let pick = |r: &mut dyn FnMut(u32) -> u32| {
            let orig = match r(3) {
                0 => CtOrigTuple::None,
                1 => CtOrigTuple::V4 {
                    src: r(2),
                    dst: r(2),
                    proto: r(2) as u8,
                    tp_src: r(2) as u16,
                    tp_dst: r(2) as u16,
                },
                _ => CtOrigTuple::V6 {
                    proto: r(2) as u8,
                    tp_src: r(2) as u16,
                    tp_dst: r(2) as u16,
                },
            };
            PacketMeta {
                recirc_id: r(2),
                in_port: r(2),
                pkt_mark: r(2),
                dp_hash: r(2),
                ct_state: r(2),
                ct_zone: r(2) as u16,
                ct_mark: r(2),
                ct_label: u128::from(r(2)) << 100,
                ct_orig: orig,
                vlan_limit: r(2) as u8,
            }
        };
        let (mut eq, mut ne) = (0, 0);
        for _ in 0..200_000 {
            let a = pick(&mut rnd);
            let mut b = if rnd(2) == 0 { a } else { pick(&mut rnd) };
            // Often just one field apart.
            match rnd(12) {
                0 => b.recirc_id ^= 1,
                1 => b.in_port ^= 1,
                2 => b.pkt_mark ^= 1,
                3 => b.dp_hash ^= 1,
                4 => b.ct_state ^= 1,
                5 => b.ct_zone ^= 1,
                6 => b.ct_mark ^= 1,
                7 => b.ct_label ^= 1,
                8 => b.ct_orig = pick(&mut rnd).ct_orig,
                9 => b.vlan_limit ^= 1,
                _ => {}
            }
            assert_eq!(same_meta(&a, &b), a == b, "{a:?} {b:?}");
            if a == b { eq += 1 } else { ne += 1 }
        }
        assert!(eq > 1000 && ne > 1000);
    }

    /// A hint fits in two cache lines (the EMC's 8192 entries carry ≤ 1 MiB of hints).
    #[test]
    fn a_hint_is_at_most_128_bytes() {
        assert!(
            std::mem::size_of::<Hint>() <= 128,
            "{}",
            std::mem::size_of::<Hint>()
        );
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
        assert!(h.flow(p).is_some());
        f.mark_dead();
        assert!(h.flow(p).is_none());
        // A packet already assigned keeps its flow; a changed entry takes it away.
        assert!(Arc::ptr_eq(h.taken(p).expect("assigned"), &f));
        let still = h.check(1, &md);
        h.entry_changed(1);
        assert!(h.taken(p).is_none() && h.taken(still).is_none());
        assert!(matches!(h.check(1, &md), Origin::Learn { .. }));
        h.all_changed();
        assert_eq!(h.check(9, &md), Origin::None);
    }
}
