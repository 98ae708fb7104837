//! Lock-free readers over a structure that one writer changes: two copies, one published.
//!
//! How the OpenFlow tables are read while flow mods change them (the classifier issue's "a
//! lookup never waits for a writer"). It is the *left-right* scheme (two full copies, an
//! operation log) built on [`arc_swap::ArcSwap`]:
//!
//! - Readers call [`DoubleBuffer::read`]: one `ArcSwap::load` (lock-free; no lock, no wait,
//!   whatever a writer is doing). The guard keeps that copy alive and unchanged for as long as
//!   it is held; a reader therefore always sees one consistent state, before or after each
//!   write, never half of one.
//! - A writer ([`DoubleBuffer::write`], serialised by a mutex among writers only) takes the
//!   *spare* copy — the one published before the current one — and first waits until no reader
//!   still holds it (`Arc::get_mut` succeeds; readers only ever drop references to an
//!   unpublished copy, they cannot gain new ones). It replays on it the operations logged since
//!   it was last written (bringing it equal to the published copy), applies the new operation,
//!   publishes it with one `ArcSwap::swap`, and keeps the copy it replaced as the new spare with
//!   the new operation logged for it.
//! - So readers never wait; a writer waits for readers of the copy *two* writes old, which
//!   finish their short lookups (a reader that holds a guard for long delays the second write
//!   after it, never the first).
//!
//! Why both copies stay equal: each operation is a closure applied to both, first to one and
//! (at the next write) to the other; closures must be deterministic functions of the copy they
//! get (the same operations in the same order on equal copies give equal copies). For the
//! OpenFlow tables that holds: inserts fill the same slab slots in the same order, so rule ids
//! agree between copies. Tests compare the two copies after random operation sequences.
//!
//! Cost: twice the memory of one copy, and every operation runs twice (the replay is off the
//! readers' path). The `left-right` crate implements the same scheme, but it returns nothing
//! from an operation; a flow mod must return its result (errors, counts) from the copy it was
//! applied to, so the scheme is written here on top of `arc-swap`, which the datapath already
//! uses for its classifier snapshots.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};

/// What [`DoubleBuffer::read`] returns: the published copy, kept alive while held.
pub type ReadGuard<T> = Guard<Arc<T>>;

/// A logged operation, replayed on the spare copy at the next write.
type Op<T> = Box<dyn Fn(&mut T) + Send>;

struct Spare<T> {
    copy: Arc<T>,
    /// Operations applied to the published copy but not yet to `copy`.
    log: Vec<Op<T>>,
}

/// Two copies of a `T`; readers see the published one, writers change both (module doc).
pub struct DoubleBuffer<T> {
    published: ArcSwap<T>,
    spare: Mutex<Spare<T>>,
}

impl<T: fmt::Debug> fmt::Debug for DoubleBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DoubleBuffer")
            .field("published", &self.published.load())
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> DoubleBuffer<T> {
    /// A buffer publishing `a`; `b` must be equal to `a` (a deep copy).
    pub fn new(a: T, b: T) -> Self {
        DoubleBuffer {
            published: ArcSwap::from_pointee(a),
            spare: Mutex::new(Spare {
                copy: Arc::new(b),
                log: Vec::new(),
            }),
        }
    }

    /// The published copy (lock-free, never waits). Hold the guard briefly: the second write
    /// after this one waits for it to be dropped.
    pub fn read(&self) -> ReadGuard<T> {
        self.published.load()
    }

    /// The published copy as an owned `Arc` (for holding across a longer task; same caveat).
    pub fn read_full(&self) -> Arc<T> {
        self.published.load_full()
    }

    fn lock_spare(&self) -> MutexGuard<'_, Spare<T>> {
        // Operations must not panic (the workspace's panic contract for table operations): one
        // that did would leave the spare copy half-changed, and the next write would publish
        // it. The poison flag is cleared rather than propagated so that such a bug cannot also
        // wedge every later writer.
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies `op` to both copies (to the spare now and publishes it; to the other copy at the
    /// next write) and returns what it returned on the copy now published. `op` must be
    /// deterministic (module doc). Waits, if it must, for readers of the spare copy.
    pub fn write<R>(&self, op: impl Fn(&mut T) -> R + Send + 'static) -> R {
        let mut guard = self.lock_spare();
        let spare = &mut *guard;
        let copy = wait_unique(&mut spare.copy);
        for logged in spare.log.drain(..) {
            logged(copy);
        }
        let r = op(copy);
        let fresh = spare.copy.clone();
        // `swap` returns only after every reader that loaded the old pointer holds a real
        // reference to it (arc-swap pays its debts), so `Arc::get_mut` on it later is exact.
        let old = self.published.swap(fresh);
        spare.copy = old;
        spare.log.push(Box::new(move |t| {
            op(t);
        }));
        r
    }

    /// Runs `f` on the spare copy brought up to date (for tests: it must equal the published
    /// copy). Waits for readers of the spare copy.
    pub fn with_spare<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let mut guard = self.lock_spare();
        let spare = &mut *guard;
        let copy = wait_unique(&mut spare.copy);
        for logged in spare.log.drain(..) {
            logged(copy);
        }
        f(copy)
    }
}

/// Exclusive access to `arc`'s value once every other holder has dropped it. Only readers of
/// an unpublished copy can hold it, and they do not get new references, so this ends.
fn wait_unique<T>(arc: &mut Arc<T>) -> &mut T {
    let mut spins = 0u32;
    while Arc::get_mut(arc).is_none() {
        spins = spins.saturating_add(1);
        // Readers hold a copy for one lookup: spin briefly, then yield (a preempted reader
        // needs the CPU back to finish); sleep only now and then, so a reader that holds a
        // guard for long does not cost a busy core. (Sleeping at once cost a scheduler tick,
        // ~4 ms, per write on a busy 2-vCPU machine.)
        if spins < 64 {
            std::hint::spin_loop();
        } else if !spins.is_multiple_of(4096) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    // The loop above ended with `get_mut` succeeding and nobody can clone `arc` meanwhile (we
    // hold the writer mutex and the copy is not published).
    Arc::get_mut(arc).expect("unique after wait")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A toy state: values plus their sum, so a torn read is detectable.
    #[derive(Debug, Clone, PartialEq, Default)]
    struct State {
        vals: Vec<u64>,
        sum: u64,
        version: u64,
    }

    fn push(v: u64) -> impl Fn(&mut State) -> usize + Send + 'static {
        move |s: &mut State| {
            s.vals.push(v);
            s.sum += v;
            s.version += 1;
            s.vals.len()
        }
    }

    #[test]
    fn writes_reach_both_copies_and_return_the_published_result() {
        let db = DoubleBuffer::new(State::default(), State::default());
        let mut twin = State::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..500u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = x % 1000;
            if x.is_multiple_of(5) && !twin.vals.is_empty() {
                let idx = (v as usize) % twin.vals.len();
                let op = move |s: &mut State| {
                    let removed = s.vals.remove(idx % s.vals.len());
                    s.sum -= removed;
                    s.version += 1;
                    s.vals.len()
                };
                let want = op(&mut twin);
                assert_eq!(db.write(op), want);
            } else {
                let want = push(v)(&mut twin);
                assert_eq!(db.write(push(v)), want);
            }
            assert_eq!(**db.read(), twin, "published copy after write {i}");
            if i.is_multiple_of(17) {
                db.with_spare(|s| assert_eq!(s, &twin, "spare copy after write {i}"));
            }
        }
    }

    #[test]
    fn readers_see_whole_states_while_a_writer_runs() {
        use std::sync::atomic::AtomicU64;
        let db = Arc::new(DoubleBuffer::new(State::default(), State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (db, stop, reads) = (db.clone(), stop.clone(), reads.clone());
                std::thread::spawn(move || {
                    let mut last = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let s = db.read();
                        assert_eq!(s.vals.iter().sum::<u64>(), s.sum, "torn state");
                        assert_eq!(s.vals.len() as u64, s.version);
                        assert!(s.version >= last, "went back in time");
                        last = s.version;
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // Write until the readers have overlapped many writes (they may start late on a busy
        // machine), with a bound so a stuck reader fails the test instead of hanging it.
        let mut v = 0u64;
        while v < 2000 || (reads.load(Ordering::Relaxed) < 2000 && v < 2_000_000) {
            v += 1;
            db.write(push(v));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader");
        }
        assert!(reads.load(Ordering::Relaxed) >= 2000, "readers never ran");
        assert_eq!(db.read().version, v);
        db.with_spare(|s| assert_eq!(s.version, v));
    }

    #[test]
    fn a_held_guard_keeps_its_state() {
        let db = DoubleBuffer::new(State::default(), State::default());
        db.write(push(1));
        let held = db.read_full();
        let t = std::thread::scope(|sc| {
            let h = sc.spawn(|| {
                db.write(push(2));
                db.write(push(3)); // waits for `held`
                db.read().version
            });
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(held.vals, vec![1], "a reader's copy never changes under it");
            drop(held);
            h.join().expect("writer")
        });
        assert_eq!(t, 3);
    }
}
