//! Loom models of the two concurrency protocols of `datapath::dpcls` (see its module doc):
//! (1) ranking-publish — a writer re-sorts a port's subtable order and publishes a new
//! snapshot while a PMD reads the old one; (2) megaflow install / removal vs a concurrent
//! lookup and an EMC entry holding the removed flow.
//!
//! The models re-implement the protocols' essential steps with loom's atomics (loom explores
//! every interleaving and every value a weakly-ordered load may return; no preemption bound,
//! so the exploration is exhaustive), in safe code. Each model takes a [`Fault`] that swaps or weakens one step; the
//! `*_broken_*` tests are `#[should_panic]`: they show the model's assertions catch the
//! reordering, so the passing run of the real ordering means something.
//!
//! # Model 1: ranking-publish (`Dpcls::rank_locked` + `publish`, `DpclsReader`)
//!
//! | model step | real step |
//! |---|---|
//! | `SnapCell::slots[i].order` | a `Snapshot`'s `PortCls::subtables` (the ranked `Vec<Arc<Subtable>>` of one port); subtable `s` holds flow `s`, so "every flow findable in exactly one subtable" = "order is a permutation" |
//! | `hits[s].fetch_add(Relaxed)` (reader) | `Subtable::hits` bumped by the PMD per batch |
//! | writer: lock, read current order and hits, stable sort by hits descending | `rank_locked`: under the writer `Mutex`, `hits` load + `ranked_hits` swap, `sort_by_key(Reverse)` |
//! | writer: wait until `slots[j].readers == 0`, poison, fill `order` | `Arc::new(Snapshot { .. })`: fresh memory, never memory a reader still uses — the old snapshot is freed only when its last `Arc`/arc-swap debt is gone. The model recycles two slots and makes "freed" explicit: a slot is reused only when no reader holds it (a hazard count, which is what arc-swap's debt list amounts to), and reuse first poisons it with zeros, as freeing would |
//! | writer: `fence(SeqCst)` before the hazard check; reader: `fence(SeqCst)` between its hazard increment and the re-check | arc-swap's SeqCst operations (loom models SeqCst accesses as AcqRel, so the store→load order they give is written as fences) |
//! | writer: `cur.store(j, SeqCst)` after filling | `ArcSwap::store` (release; arc-swap uses SeqCst) after the snapshot is fully built |
//! | reader: `i = cur.load`; `readers[i] += 1`; re-check `cur == i` else undo and retry | `Cache::load` / `ArcSwap::load`: load the pointer, record a debt (hazard), confirm the pointer is still current, else fall back — the reader never waits for a writer |
//! | reader: read `order`, assert permutation, bump a hit; `readers[i] -= 1` | lookup over `snap.port(p).subtables` in ranked order; dropping the `Arc`/guard |
//!
//! Faults (each must make the model fail): [`Fault::PublishBeforeFill`] (store the pointer,
//! then build the snapshot), [`Fault::RelaxedPublish`] (no release on the store),
//! [`Fault::NoRevalidate`] (reader skips the hazard re-check), [`Fault::FreeWhileRead`]
//! (writer frees/reuses a snapshot a reader still holds — what a missing refcount would do).
//!
//! # Model 2: install / remove vs lookup (`Dpcls::insert`, `Dpcls::remove`, `Subtable::probe`, EMC)
//!
//! | model step | real step |
//! |---|---|
//! | `pool[f].key/actions` stored before anything else | `DpFlow::new` + `Arc::new`: key, mask, actions written before the flow is shared |
//! | `arena[i].store(f + 1, Release)` | `FlowArena::push`: `OnceLock::set` (release) |
//! | `sub_slot.store(pack(i), Release)` | `Subtable::insert`: slot `store(pack(hash, idx + 1), Release)` |
//! | `pool[a].dead.store(true, Release)` then `sub_slot.store(TOMB, Release)` | `Dpcls::remove`: `mark_dead()` then `Subtable::remove` (tombstone) |
//! | reader: `sub_slot.load(Acquire)` → `arena[i].load(Acquire)` (0 = miss) → `dead.load(Acquire)` → read key/actions | `Subtable::probe`: slot acquire, `arena.get` (acquire), `!f.is_dead()`, masked compare; actions through the flow |
//! | reader: EMC entry = flow id held across the writer's removal | `Emc` holding an `Arc<DpFlow>`; every EMC hit checks `is_dead()` (acquire) |
//!
//! Scenario: flow A (key K) is installed and cached in the reader's EMC; the writer removes A
//! and installs its replacement B (same key, new actions, reusing A's tombstoned slot, as a
//! revalidation after a flow mod does). The reader looks K up in the classifier, then in its
//! EMC. Assertions: a flow reached through the classifier is fully initialised (never torn);
//! and once the reader has seen B live, A is dead (a removed flow is never used after its
//! replacement is visible — which needs "mark dead" to happen before the unpublish).
//!
//! Faults: [`Fault::FillAfterPublish`] (publish in the arena and the subtable, then write
//! key/actions) and
//! [`Fault::TombstoneBeforeDead`] (unpublish, install B, mark A dead last).
//!
//! What is *not* modelled: memory reclamation itself (Rust's `Arc`), the hash-table probe
//! sequence, growth/compaction (those publish a new snapshot, i.e. model 1's path).

use loom::sync::Mutex;
use loom::sync::atomic::AtomicBool;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use loom::sync::atomic::fence;
use loom::thread;

/// Which step of the real protocol to break (`None` = the real ordering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    PublishBeforeFill,
    RelaxedPublish,
    NoRevalidate,
    FreeWhileRead,
    FillAfterPublish,
    TombstoneBeforeDead,
}

/// Exhaustive exploration (no preemption bound): about 5 s for both models on this machine.
fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = None;
    b
}

// ---------------------------------------------------------------------------------------
// Model 1: ranking-publish.
// ---------------------------------------------------------------------------------------

const NSUB: usize = 3;

/// One snapshot's memory: the ranked order (subtable id + 1; 0 = poisoned/unwritten) and the
/// readers holding it.
struct Slot {
    order: [AtomicUsize; NSUB],
    readers: AtomicUsize,
}

impl Slot {
    fn new(order: [usize; NSUB]) -> Slot {
        Slot {
            order: order.map(AtomicUsize::new),
            readers: AtomicUsize::new(0),
        }
    }
}

struct SnapCell {
    slots: [Slot; 2],
    cur: AtomicUsize,
    writer: Mutex<()>,
    hits: [AtomicUsize; NSUB],
}

/// Reader: pin the current snapshot (hazard + re-check), never waiting for the writer.
fn pin(c: &SnapCell, fault: Fault) -> usize {
    loop {
        let i = c.cur.load(SeqCst);
        c.slots[i].readers.fetch_add(1, SeqCst);
        // Store-load ordering (Dekker) against the writer's publish + hazard check. loom treats
        // SeqCst accesses as AcqRel, so the order comes from SeqCst fences, as in arc-swap.
        fence(SeqCst);
        if fault == Fault::NoRevalidate || c.cur.load(SeqCst) == i {
            return i;
        }
        c.slots[i].readers.fetch_sub(1, SeqCst);
        thread::yield_now();
    }
}

/// Reader: one lookup over the pinned snapshot's ranked order.
fn lookup(c: &SnapCell, fault: Fault, hit: usize) {
    let i = pin(c, fault);
    let order: Vec<usize> = c.slots[i].order.iter().map(|o| o.load(Relaxed)).collect();
    let mut seen = [0usize; NSUB];
    for &o in &order {
        assert!((1..=NSUB).contains(&o), "torn snapshot: order {order:?}");
        seen[o - 1] += 1;
    }
    // Every flow (one per subtable) is findable in exactly one subtable of the order.
    assert!(
        seen.iter().all(|&n| n == 1),
        "snapshot order is not a permutation: {order:?}"
    );
    // The lookup hits the subtable of flow `hit`: bump its counter (PMD-only, relaxed).
    c.hits[hit].fetch_add(1, Relaxed);
    c.slots[i].readers.fetch_sub(1, SeqCst);
}

/// Writer: one ranking round (sort by hits, publish a new snapshot).
fn rank(c: &SnapCell, fault: Fault) {
    let _g = c.writer.lock().unwrap_or_else(|e| e.into_inner());
    let cur = c.cur.load(Relaxed); // only writers store `cur`, under the lock
    let old: Vec<usize> = c.slots[cur].order.iter().map(|o| o.load(Relaxed)).collect();
    let mut new = old.clone();
    new.sort_by_key(|&s| std::cmp::Reverse(c.hits[s - 1].load(Relaxed)));
    let j = 1 - cur;
    // Free + allocate: only memory no reader holds.
    if fault != Fault::FreeWhileRead {
        fence(SeqCst);
        while c.slots[j].readers.load(SeqCst) != 0 {
            thread::yield_now();
        }
    }
    let fill = |c: &SnapCell| {
        for o in &c.slots[j].order {
            o.store(0, Relaxed); // poison: what freeing the old memory would leave
        }
        for (o, &v) in c.slots[j].order.iter().zip(&new) {
            o.store(v, Relaxed);
        }
    };
    match fault {
        Fault::PublishBeforeFill => {
            c.cur.store(j, SeqCst);
            fill(c);
        }
        Fault::RelaxedPublish => {
            fill(c);
            c.cur.store(j, Relaxed);
        }
        _ => {
            fill(c);
            c.cur.store(j, SeqCst);
        }
    }
}

fn ranking_model(fault: Fault) {
    builder().check(move || {
        let c = loom::sync::Arc::new(SnapCell {
            slots: [Slot::new([1, 2, 3]), Slot::new([0, 0, 0])],
            cur: AtomicUsize::new(0),
            writer: Mutex::new(()),
            hits: [
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
            ],
        });
        let w = c.clone();
        let writer = thread::spawn(move || {
            rank(&w, fault);
            rank(&w, fault);
        });
        // The PMD: two lookups that hit the last subtable, so ranking reorders.
        lookup(&c, fault, 2);
        lookup(&c, fault, 2);
        writer.join().unwrap_or_else(|_| panic!("writer panicked"));
        // After everything, the published order is still a permutation.
        lookup(&c, fault, 0);
    });
}

#[test]
fn ranking_publish_is_consistent() {
    ranking_model(Fault::None);
}

#[test]
#[should_panic(expected = "snapshot")]
fn ranking_publish_broken_publish_before_fill() {
    ranking_model(Fault::PublishBeforeFill);
}

#[test]
#[should_panic(expected = "snapshot")]
fn ranking_publish_broken_relaxed_publish() {
    ranking_model(Fault::RelaxedPublish);
}

#[test]
#[should_panic(expected = "snapshot")]
fn ranking_publish_broken_reader_skips_recheck() {
    ranking_model(Fault::NoRevalidate);
}

#[test]
#[should_panic(expected = "snapshot")]
fn ranking_publish_broken_free_while_read() {
    ranking_model(Fault::FreeWhileRead);
}

// ---------------------------------------------------------------------------------------
// Model 2: megaflow install / removal vs lookup and EMC.
// ---------------------------------------------------------------------------------------

const KEY: usize = 7;
const EMPTY: usize = 0;
const TOMB: usize = usize::MAX;

/// A flow's fields (0 = not yet written). Actions are `KEY * 10 + id` so a torn flow (key
/// of one, actions of another, or unwritten) is detectable.
struct Flow {
    key: AtomicUsize,
    actions: AtomicUsize,
    dead: AtomicBool,
}

impl Flow {
    fn blank() -> Flow {
        Flow {
            key: AtomicUsize::new(0),
            actions: AtomicUsize::new(0),
            dead: AtomicBool::new(false),
        }
    }
}

struct Table {
    /// Flow memory (ids 0 = A, 1 = B); lives for the whole model, as an `Arc` would while
    /// anyone holds it.
    pool: [Flow; 2],
    /// Arena slots: flow id + 1, 0 = unset (`OnceLock`).
    arena: [AtomicUsize; 2],
    /// The subtable slot both flows hash to: arena index + 1, `EMPTY` or `TOMB`.
    sub_slot: AtomicUsize,
}

fn actions_of(id: usize) -> usize {
    KEY * 10 + id
}

/// `Dpcls::insert` of flow `id` at arena index `idx` into the (tombstoned or empty) slot.
fn install(t: &Table, id: usize, idx: usize, fault: Fault) {
    let fill = || {
        t.pool[id].key.store(KEY, Relaxed);
        t.pool[id].actions.store(actions_of(id), Relaxed);
    };
    if fault != Fault::FillAfterPublish {
        fill();
    }
    t.arena[idx].store(id + 1, Release);
    let tag = t.sub_slot.load(Relaxed);
    assert!(tag == EMPTY || tag == TOMB, "slot still live");
    t.sub_slot.store(idx + 1, Release);
    if fault == Fault::FillAfterPublish {
        fill();
    }
}

/// `Subtable::probe` for `KEY`: the live, initialised flow id, or `None`.
fn probe(t: &Table) -> Option<usize> {
    let tag = t.sub_slot.load(Acquire);
    if tag == EMPTY || tag == TOMB {
        return None;
    }
    let id = t.arena[tag - 1].load(Acquire).checked_sub(1)?;
    let f = &t.pool[id];
    if f.dead.load(Acquire) {
        return None;
    }
    let (k, a) = (f.key.load(Relaxed), f.actions.load(Relaxed));
    assert_eq!(k, KEY, "torn flow {id}: key not initialised");
    assert_eq!(a, actions_of(id), "torn flow {id}: actions not initialised");
    Some(id)
}

fn install_model(fault: Fault) {
    builder().check(move || {
        let t = loom::sync::Arc::new(Table {
            pool: [Flow::blank(), Flow::blank()],
            arena: [AtomicUsize::new(0), AtomicUsize::new(0)],
            sub_slot: AtomicUsize::new(EMPTY),
        });
        // A installed before the threads start, and cached in the reader's EMC.
        install(&t, 0, 0, Fault::None);
        let emc_entry = 0usize;

        let w = t.clone();
        let writer = thread::spawn(move || {
            // Remove A (`Dpcls::remove`), then install its replacement B.
            if fault == Fault::TombstoneBeforeDead {
                w.sub_slot.store(TOMB, Release);
                install(&w, 1, 1, Fault::None);
                w.pool[0].dead.store(true, Release);
            } else {
                w.pool[0].dead.store(true, Release);
                w.sub_slot.store(TOMB, Release);
                install(&w, 1, 1, fault);
            }
        });

        // The PMD: classifier lookup, then an EMC hit on the cached A.
        let found = probe(&t);
        let a_live_in_emc = !t.pool[emc_entry].dead.load(Acquire);
        if found == Some(1) {
            assert!(
                !a_live_in_emc,
                "replacement B visible while the removed A is still live in the EMC"
            );
        }
        if a_live_in_emc {
            let f = &t.pool[emc_entry];
            assert_eq!(f.actions.load(Relaxed), actions_of(0));
        }
        writer.join().unwrap_or_else(|_| panic!("writer panicked"));
        // Quiescent: exactly B is findable.
        assert_eq!(probe(&t), Some(1));
    });
}

#[test]
fn install_and_remove_are_never_torn() {
    install_model(Fault::None);
}

#[test]
#[should_panic(expected = "torn flow")]
fn install_broken_fill_after_publish() {
    install_model(Fault::FillAfterPublish);
}

#[test]
#[should_panic(expected = "replacement B visible")]
fn remove_broken_tombstone_before_dead() {
    install_model(Fault::TombstoneBeforeDead);
}
