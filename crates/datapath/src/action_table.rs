//! The datapath's action sets: interned, reference-counted by the megaflows that use them,
//! reclaimed when none does, read by the PMDs without locks or reference-count traffic.
//!
//! # The problem
//!
//! A megaflow's actions are a list of [`DpAction`]s, shared by every megaflow with the same
//! list (interning: a firewall's thousands of megaflows have a handful of distinct lists).
//! The PMD executes a flow batch's list once per batch and must not pay for the sharing:
//! today's cost is one bounds check and one load. The old table was append-only (65,536
//! slots, then every miss failed); this one frees what no megaflow uses and reuses the slot,
//! but never under a PMD that may still execute it — a PMD may hold a flow it found live for
//! the rest of a burst and execute it after a revalidator removed it, or read a flow's
//! actions id just before a modify replaced it.
//!
//! # The choice: memory goes with the last reference, ids are generation-tagged
//!
//! Of the two designs the issue names — refcounted ids reused after a quiescent-state grace
//! period, or the actions held as an `Arc` by the flow and interned through weak references —
//! this is the second, with an id-indexed read path kept for speed:
//!
//! - An [`ActionSet`] (an `Arc`) is the owning handle: its id and its list. A megaflow holds
//!   its set ([`crate::megaflow::DpFlow::action_set`]); a modify swaps the flow's set. The
//!   table keeps only a `Weak` per set (the intern map of weak references): the set is *dead*
//!   when the last flow holding it lets go. Nothing counts references by hand, so no path
//!   (remove, modify, flush, a failed install, a flow dropped from an EMC much later) can
//!   leak or double-free one.
//! - For the PMD, lists are also published by id in an immutable-once-set array of slots
//!   ([`ActionsView`]: `OnceLock<(id, list)>` per slot, the [`crate::flow_table`] arena
//!   pattern), held through an `ArcSwap` and cached per PMD ([`ActionsReader`]: one atomic
//!   load per pass when nothing changed, no reference-count update). Interning a new list
//!   sets a free slot of the published array in place.
//! - **Reuse.** A dead set's slot stays set until the array runs out of free slots; then the
//!   writer builds a new array holding only the live sets (and grows it when more than half
//!   is live, up to the capacity), publishes it, and hands the dropped slots out again under
//!   a new *generation*: an id is `generation << 32 | slot`, so an id is never handed out
//!   twice (2³² generations per slot). A PMD still on an older array keeps it alive through
//!   its `Arc` (RCU), so the lists it may execute stay in memory until it moves on.
//! - **The read rule.** [`ActionsView::get`] answers an id only if the slot holds that exact
//!   id, so a hit is always that id's list, whatever array the PMD holds. A miss (the PMD's
//!   array predates the intern, or the id was reclaimed after the flow let go of it) falls
//!   back to the flow's own set ([`crate::megaflow::DpFlow::action_set`], one `ArcSwap`
//!   load): the flow's current actions, old or new, never a torn list. So a flow picked for
//!   a batch is always executed with actions it had, and reclamation needs no grace period,
//!   no per-PMD epoch and no coordination with the PMDs at all.
//!
//! **When a set dies.** A removed megaflow lets go of its set when its last `Arc<DpFlow>`
//! goes: the classifier's arena keeps removed flows until its next compaction, a PMD's EMC,
//! recirculation hints and flow batches until their slow sweep (one entry per poll round,
//! see [`crate::pmd`]), an idle PMD's classifier snapshot until its next sweep. Each of these
//! is bounded (the arena's capacity, 8,192 EMC entries and 64 pinned flows per PMD), so the
//! sets of removed flows are reclaimed within a bounded delay and in bounded number, and a
//! flow any PMD could still execute keeps its actions.
//!
//! Why not only the `Arc` in the flow: reading it is an `ArcSwap` load per batch (a few
//! dozen instructions and two atomic read-modify-writes); the id path keeps the common case
//! at today's cost. Why not a quiescent-state scheme: every PMD would have to publish an
//! epoch, an idle or stopped PMD would stall reclamation, and reusing a slot in place needs
//! either `unsafe` or a per-read guard — this crate has no `unsafe`.
//!
//! # Pending references (the [`crate::pmd::Upcall`] contract)
//!
//! [`ActionTable::intern`] returns a bare id (the upcall trait's currency): the table holds
//! the set for the caller — one *pending* reference — until [`ActionTable::take`] turns it
//! into the `Arc` the new megaflow owns, or [`ActionTable::release`] drops it. The PMD takes
//! every id an upcall returns, so pending references live for the length of one upcall. A
//! caller that interns and never takes keeps the set alive (tests; the table is then simply
//! not reclaimed for those ids).
//!
//! # Invariants
//!
//! - A slot of the published array, once set, keeps `(id, list)` for the array's life; a
//!   slot is set only in an array where it was free; the writer sets it (under its lock).
//! - Every live set (pending > 0 or a strong `Arc` outside the table) is in the published
//!   array under its id, and the intern map finds it by its list.
//! - Memory: live sets, plus at most one array's worth of dead sets (a dead set leaves at the
//!   next rebuild), plus the arrays the PMDs still hold (one each at most after their next pass).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use arc_swap::{ArcSwap, Cache};

use crate::actions::DpAction;
use crate::megaflow::ActionsId;

/// Slots of a new table's first array (it grows by doubling up to the capacity).
const INITIAL_SLOTS: usize = 1024;

/// An interned action list and its id; megaflows hold it (see the module doc).
#[derive(Debug, PartialEq, Eq)]
pub struct ActionSet {
    id: ActionsId,
    list: Arc<[DpAction]>,
}

impl ActionSet {
    /// The set's id (unique for the table's life: never handed out for another list).
    #[inline]
    pub fn id(&self) -> ActionsId {
        self.id
    }

    /// The actions.
    #[inline]
    pub fn actions(&self) -> &[DpAction] {
        &self.list
    }

    /// The actions as a shared list.
    pub fn list(&self) -> &Arc<[DpAction]> {
        &self.list
    }
}

/// Slot index of an id.
#[inline(always)]
fn slot_of(id: ActionsId) -> usize {
    (id & 0xffff_ffff) as usize
}

/// One slot of an [`ActionsView`]: an id and its list, set once.
type Slot = OnceLock<(ActionsId, Arc<[DpAction]>)>;

/// One published array of action slots (see the module doc): what a PMD executes from.
#[derive(Debug)]
pub struct ActionsView {
    slots: Box<[Slot]>,
}

impl ActionsView {
    fn new(n: usize) -> ActionsView {
        ActionsView {
            slots: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The actions of `id` if this array holds exactly that id (a miss is not "no actions":
    /// see the read rule in the module doc).
    #[inline]
    pub fn get(&self, id: ActionsId) -> Option<&[DpAction]> {
        match self.slots.get(slot_of(id))?.get() {
            Some((x, l)) if *x == id => Some(l),
            _ => None,
        }
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }
}

/// A PMD's cached handle of the published [`ActionsView`] (one atomic load per refresh).
#[derive(Debug)]
pub struct ActionsReader {
    cache: Cache<Arc<ArcSwap<ActionsView>>, Arc<ActionsView>>,
}

impl ActionsReader {
    /// The newest view.
    #[inline]
    pub fn view(&mut self) -> &Arc<ActionsView> {
        self.cache.load()
    }
}

/// The intern map's hasher: a multiply-rotate over 8-byte words with a per-table random
/// seed (SipHash, field by field over the actions' enums, was a tenth of an install's cost;
/// the lists come from the controller's rules, and the seed keeps collisions unpredictable).
#[derive(Debug, Clone, Copy)]
struct ListHash {
    seed: u64,
}

impl ListHash {
    fn new() -> ListHash {
        ListHash {
            seed: std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64),
        }
    }
}

impl BuildHasher for ListHash {
    type Hasher = ListHasher;
    fn build_hasher(&self) -> ListHasher {
        ListHasher(self.seed)
    }
}

#[derive(Debug, Clone, Copy)]
struct ListHasher(u64);

impl ListHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for ListHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ (rest.len() as u64) << 56);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^ (k >> 33)
    }
}

#[derive(Debug)]
struct Entry {
    id: ActionsId,
    list: Arc<[DpAction]>,
    weak: Weak<ActionSet>,
    /// References handed out by `intern` and not yet taken or released.
    pending: u32,
    /// The set, held while `pending > 0`.
    held: Option<Arc<ActionSet>>,
}

impl Entry {
    fn is_live(&self) -> bool {
        self.pending > 0 || self.weak.strong_count() > 0
    }
}

#[derive(Debug)]
struct Writer {
    cur: Arc<ActionsView>,
    /// Slot → its entry (live or dead-but-still-set), `None` = free in `cur`.
    entries: Vec<Option<Entry>>,
    /// Generation of each slot's last id.
    gens: Vec<u32>,
    /// Free slots of `cur`, lowest first.
    free: BinaryHeap<Reverse<u32>>,
    by_list: HashMap<Arc<[DpAction]>, u32, ListHash>,
    rebuilds: u64,
    reclaimed: u64,
}

/// Why an action list could not be interned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionsFull {
    /// The table's capacity (live action sets).
    pub capacity: usize,
}

impl std::fmt::Display for ActionsFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the datapath action table is full ({} live action sets)",
            self.capacity
        )
    }
}

impl std::error::Error for ActionsFull {}

/// What an [`ActionTable`] holds (see [`ActionTable::memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActionTableMemory {
    /// Live action sets.
    pub live: usize,
    /// Dead sets still in the published array (dropped at the next rebuild).
    pub dead: usize,
    /// Slots of the published array.
    pub slots: usize,
    /// Arrays rebuilt so far.
    pub rebuilds: u64,
    /// Sets reclaimed so far (their slots freed for reuse).
    pub reclaimed: u64,
    /// Bytes: the array's slots, the writer's index, and the lists of live and dead sets.
    pub bytes: usize,
}

/// The datapath's store of action sets (see the module doc), shared by the upcall side
/// (interns), the control path ([`crate::dpcls::Dpcls::put`] takes sets), and the PMDs
/// (read through an [`ActionsReader`]).
#[derive(Debug)]
pub struct ActionTable {
    current: Arc<ArcSwap<ActionsView>>,
    w: Mutex<Writer>,
    capacity: usize,
}

impl Default for ActionTable {
    fn default() -> Self {
        ActionTable::new(1 << 16)
    }
}

impl ActionTable {
    /// A table with room for `capacity` live action sets at once (at least 1).
    pub fn new(capacity: usize) -> ActionTable {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        let n = capacity.min(INITIAL_SLOTS);
        let view = Arc::new(ActionsView::new(n));
        ActionTable {
            current: Arc::new(ArcSwap::new(view.clone())),
            w: Mutex::new(Writer {
                cur: view,
                entries: (0..n).map(|_| None).collect(),
                gens: vec![0; n],
                free: (0..n as u32).map(Reverse).collect(),
                by_list: HashMap::with_hasher(ListHash::new()),
                rebuilds: 0,
                reclaimed: 0,
            }),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        // Every publish point leaves the writer consistent: a poisoned lock is still usable.
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most live sets the table holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The set of `actions`, interning it if new (memory shared with every equal list).
    pub fn intern_set(&self, actions: &[DpAction]) -> Result<Arc<ActionSet>, ActionsFull> {
        let mut w = self.lock();
        self.acquire(&mut w, actions)
    }

    /// The id of `actions`, interning it if new, with one pending reference held for the
    /// caller (see the module doc: [`ActionTable::take`] or [`ActionTable::release`] it);
    /// `None` if the table is full.
    pub fn intern(&self, actions: &[DpAction]) -> Option<ActionsId> {
        let mut w = self.lock();
        let set = self.acquire(&mut w, actions).ok()?;
        let e = w.entries.get_mut(slot_of(set.id))?.as_mut()?;
        e.pending = e.pending.saturating_add(1);
        let id = set.id;
        e.held = Some(set);
        Some(id)
    }

    /// Turns a pending reference of `id` (from [`ActionTable::intern`]) into the set's
    /// `Arc`; without a pending reference, the set if it is live. `None` for an id this table
    /// never handed out or has reclaimed.
    pub fn take(&self, id: ActionsId) -> Option<Arc<ActionSet>> {
        let mut w = self.lock();
        let e = w.entries.get_mut(slot_of(id))?.as_mut()?;
        if e.id != id {
            return None;
        }
        if e.pending > 0 {
            e.pending -= 1;
            return if e.pending == 0 {
                e.held.take()
            } else {
                e.held.clone()
            };
        }
        e.weak.upgrade()
    }

    /// Drops a pending reference of `id` without taking it.
    pub fn release(&self, id: ActionsId) {
        drop(self.take(id));
    }

    /// The actions of `id` in the newest array (a copy of the list's `Arc`), if the table
    /// holds that id (live, or dead and not reclaimed yet).
    pub fn get(&self, id: ActionsId) -> Option<Arc<[DpAction]>> {
        let view = self.current.load();
        match view.slots.get(slot_of(id))?.get() {
            Some((x, l)) if *x == id => Some(l.clone()),
            _ => None,
        }
    }

    /// The newest view (a full `Arc` load; PMDs use an [`ActionsReader`]).
    pub fn view(&self) -> Arc<ActionsView> {
        self.current.load_full()
    }

    /// A PMD's cached reader.
    pub fn reader(&self) -> ActionsReader {
        ActionsReader {
            cache: Cache::new(self.current.clone()),
        }
    }

    /// Number of live action sets.
    pub fn len(&self) -> usize {
        let w = self.lock();
        w.entries.iter().flatten().filter(|e| e.is_live()).count()
    }

    /// Whether no set is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the table holds now (O(slots)).
    pub fn memory(&self) -> ActionTableMemory {
        let w = self.lock();
        let mut m = ActionTableMemory {
            slots: w.cur.slots.len(),
            rebuilds: w.rebuilds,
            reclaimed: w.reclaimed,
            ..ActionTableMemory::default()
        };
        let mut list_bytes = 0;
        for e in w.entries.iter().flatten() {
            if e.is_live() {
                m.live += 1;
            } else {
                m.dead += 1;
            }
            list_bytes += 2 * std::mem::size_of::<usize>()
                + std::mem::size_of_val::<[DpAction]>(&e.list)
                + std::mem::size_of::<ActionSet>()
                + 2 * std::mem::size_of::<usize>();
        }
        let slot = std::mem::size_of::<Slot>()
            + std::mem::size_of::<Option<Entry>>()
            + std::mem::size_of::<u32>()
            + std::mem::size_of::<Reverse<u32>>();
        let map = (std::mem::size_of::<(Arc<[DpAction]>, u32)>() + 1) * w.by_list.capacity();
        m.bytes = m.slots * slot + map + list_bytes;
        m
    }

    fn acquire(&self, w: &mut Writer, actions: &[DpAction]) -> Result<Arc<ActionSet>, ActionsFull> {
        if let Some(&i) = w.by_list.get(actions)
            && let Some(Some(e)) = w.entries.get_mut(i as usize)
        {
            if let Some(s) = e.weak.upgrade() {
                return Ok(s);
            }
            // Dead but still in the array under its id, with this very list: it lives again
            // under the same id (a reader holding the id sees the same list either way).
            let s = Arc::new(ActionSet {
                id: e.id,
                list: e.list.clone(),
            });
            e.weak = Arc::downgrade(&s);
            return Ok(s);
        }
        if w.free.is_empty() {
            self.rebuild(w);
        }
        let Some(Reverse(i)) = w.free.pop() else {
            return Err(ActionsFull {
                capacity: self.capacity,
            });
        };
        let i = i as usize;
        let (Some(g), Some(slot), Some(e)) =
            (w.gens.get_mut(i), w.cur.slots.get(i), w.entries.get(i))
        else {
            return Err(ActionsFull {
                capacity: self.capacity,
            });
        };
        debug_assert!(e.is_none());
        *g = g.wrapping_add(1);
        let id = (u64::from(*g) << 32) | i as u64;
        let list: Arc<[DpAction]> = actions.into();
        // A free slot of the published array is unset (invariant), so this cannot fail.
        let _ = slot.set((id, list.clone()));
        let set = Arc::new(ActionSet {
            id,
            list: list.clone(),
        });
        if let Some(e) = w.entries.get_mut(i) {
            *e = Some(Entry {
                id,
                list: list.clone(),
                weak: Arc::downgrade(&set),
                pending: 0,
                held: None,
            });
        }
        w.by_list.insert(list, i as u32);
        Ok(set)
    }

    /// A new array with the live sets only (larger if more than half is live), published;
    /// the dead sets' slots and the new slots become free.
    fn rebuild(&self, w: &mut Writer) {
        let live = w.entries.iter().flatten().filter(|e| e.is_live()).count();
        let size = w.cur.slots.len();
        let new_size = if (live + 1) * 2 > size {
            (size * 2).min(self.capacity).max(size)
        } else {
            size
        };
        if live == size && new_size == size {
            return; // full: nothing to reclaim, no room to grow
        }
        let view = ActionsView::new(new_size);
        w.entries.resize_with(new_size, || None);
        w.gens.resize(new_size, 0);
        let mut free = Vec::new();
        for i in 0..new_size {
            let keep = match w.entries.get(i) {
                Some(Some(e)) if e.is_live() => {
                    if let Some(slot) = view.slots.get(i) {
                        let _ = slot.set((e.id, e.list.clone()));
                    }
                    true
                }
                Some(Some(e)) => {
                    let list = e.list.clone();
                    w.by_list.remove(&list);
                    w.reclaimed += 1;
                    false
                }
                _ => false,
            };
            if !keep {
                if let Some(e) = w.entries.get_mut(i) {
                    *e = None;
                }
                free.push(Reverse(i as u32));
            }
        }
        w.free = free.into();
        w.by_list.shrink_to(w.by_list.len() * 2);
        let view = Arc::new(view);
        w.cur = view.clone();
        w.rebuilds += 1;
        self.current.store(view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_take_reclaim_reuse() {
        let t = ActionTable::new(4);
        let a = t.intern_set(&[DpAction::Output(1)]).unwrap();
        let b = t.intern_set(&[DpAction::Output(2)]).unwrap();
        assert_eq!(t.intern_set(&[DpAction::Output(1)]).unwrap().id(), a.id());
        assert_eq!(t.len(), 2);
        let v = t.view();
        assert_eq!(v.get(a.id()), Some(&[DpAction::Output(1)][..]));
        let (ida, idb) = (a.id(), b.id());
        drop(a);
        assert_eq!(t.len(), 1);
        // Dead but not reclaimed: the same list comes back under the same id.
        let a2 = t.intern_set(&[DpAction::Output(1)]).unwrap();
        assert_eq!(a2.id(), ida);
        drop(a2);
        // Fill: 4 slots; the dead one is reclaimed by the rebuild, under a new id.
        let c = t.intern_set(&[DpAction::Output(3)]).unwrap();
        let d = t.intern_set(&[DpAction::Output(4)]).unwrap();
        // Slots: 0 = a (dead), 1 = b, 2 = c, 3 = d. The next intern rebuilds and reclaims 0.
        let e = t.intern_set(&[DpAction::Output(5)]).unwrap();
        assert_ne!(e.id(), ida);
        assert_eq!(
            slot_of(e.id()),
            slot_of(ida),
            "the reclaimed slot is reused"
        );
        assert_eq!(
            v.get(ida),
            Some(&[DpAction::Output(1)][..]),
            "old view intact"
        );
        assert_eq!(
            v.get(e.id()),
            None,
            "the old view does not answer the new id"
        );
        assert_eq!(t.get(ida), None);
        assert_eq!(t.view().get(e.id()), Some(&[DpAction::Output(5)][..]));
        // Four live sets: full.
        assert_eq!(
            t.intern_set(&[DpAction::Output(6)]).unwrap_err(),
            ActionsFull { capacity: 4 }
        );
        drop(c);
        let f = t.intern_set(&[DpAction::Output(6)]).unwrap();
        assert_eq!(t.len(), 4);
        assert!(t.get(idb).is_some() && t.get(f.id()).is_some());
        let m = t.memory();
        assert_eq!((m.live, m.dead, m.slots, m.reclaimed), (4, 0, 4, 2));
        drop((b, d, e, f));
    }

    #[test]
    fn pending_references() {
        let t = ActionTable::new(2);
        let a = t.intern(&[DpAction::Drop]).unwrap();
        assert_eq!(t.intern(&[DpAction::Drop]), Some(a));
        assert_eq!(t.len(), 1);
        let s = t.take(a).unwrap();
        t.release(a);
        assert_eq!(t.len(), 1, "the taken Arc keeps it");
        drop(s);
        assert_eq!(t.len(), 0);
        assert!(t.take(a).is_none());
        assert!(t.take(12345).is_none());
    }
}
