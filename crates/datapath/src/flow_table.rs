//! The flow table of one PMD's megaflow cache: an index → flow arena.
//!
//! Subtables and the SMC refer to flows by a small integer (the SMC keeps 16 bits, as OVS's
//! `cmap_find_index`), so flows live in an arena of fixed capacity whose slots are written
//! once: [`FlowArena::push`] publishes a flow in a `OnceLock` (release), [`FlowArena::get`]
//! is one acquire load and a pointer read, safe code, no reference-count traffic.
//!
//! Slots are allocated by a monotone counter and never reused: removing a flow marks it dead
//! (see [`crate::megaflow`]) and leaves its slot set. When the arena runs out, the writer
//! builds a new arena holding only the live flows (compaction, in `dpcls`) and publishes it
//! with a new snapshot; readers on the old snapshot keep the old arena alive through their
//! `Arc` until they move on. An index is therefore only meaningful together with the arena
//! it came from: a stale index (an SMC entry from before a compaction) can reach a different
//! flow, which is why every SMC hit is verified against the packet.
//!
//! Because slots are write-once, a dump needs no lock: it takes the published arena and
//! walks slots `0..used`, skipping dead flows ([`crate::dpcls::Dpcls::dump`]); the arena it
//! holds stays valid (and unchanged below `used`) however the writer proceeds.
//!
//! # Invariants
//!
//! - `get(i)` is `Some` only for `i < next` (slots below the counter), and once `Some`, stays
//!   the same `Arc` for the arena's life.
//! - Only the writer (holding the classifier's writer lock) calls [`FlowArena::push`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::megaflow::DpFlow;

/// Index of a flow in a [`FlowArena`].
pub type FlowIndex = u32;

/// Fixed-capacity, write-once arena of flows.
#[derive(Debug)]
pub struct FlowArena {
    slots: Box<[OnceLock<Arc<DpFlow>>]>,
    next: AtomicU32,
}

impl FlowArena {
    /// An empty arena of `capacity` slots (at least 1, at most `u32::MAX - 1`).
    pub fn new(capacity: usize) -> FlowArena {
        let capacity = capacity.clamp(1, (u32::MAX - 1) as usize);
        FlowArena {
            slots: (0..capacity).map(|_| OnceLock::new()).collect(),
            next: AtomicU32::new(0),
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Number of slots handed out so far (live or dead flows).
    pub fn used(&self) -> usize {
        self.next.load(Ordering::Relaxed) as usize
    }

    /// The flow at `i`, if that slot was set.
    #[inline]
    pub fn get(&self, i: FlowIndex) -> Option<&Arc<DpFlow>> {
        self.slots.get(i as usize).and_then(OnceLock::get)
    }

    /// Takes the next free slot and stores `flow` in it; `None` if the arena is full.
    /// Writer only.
    pub fn push(&self, flow: Arc<DpFlow>) -> Option<FlowIndex> {
        let i = self.next.load(Ordering::Relaxed);
        let slot = self.slots.get(i as usize)?;
        slot.set(flow).ok()?;
        if let Some(f) = slot.get() {
            f.set_arena_index(i);
        }
        self.next.store(i + 1, Ordering::Release);
        Some(i)
    }

    /// Bytes of the arena itself (slots), not counting the flows.
    pub fn slot_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<OnceLock<Arc<DpFlow>>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::megaflow::Ufid;
    use flow::{FlowKey, FlowMask};

    #[test]
    fn push_get_full() {
        let a = FlowArena::new(2);
        let f = Arc::new(DpFlow::new(Ufid(1), &FlowKey::ZERO, &FlowMask::CATCHALL, 0));
        assert!(a.get(0).is_none());
        assert_eq!(a.push(f.clone()), Some(0));
        assert_eq!(a.push(f.clone()), Some(1));
        assert_eq!(a.push(f.clone()), None);
        assert!(Arc::ptr_eq(a.get(1).unwrap(), &f));
        assert!(a.get(2).is_none() && a.get(u32::MAX).is_none());
        assert_eq!(a.used(), 2);
    }
}
