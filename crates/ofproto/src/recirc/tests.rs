use std::collections::HashMap;

use testutil::rng::TestRng;

use super::*;

fn state(s: u64) -> (u8, FlowKey) {
    let mut k = FlowKey::ZERO;
    k.w[3] = s;
    ((s % 3) as u8, k)
}

fn alloc(p: &RecircPool, s: u64) -> Result<RecircRef, RecircError> {
    let (t, k) = state(s);
    p.alloc(t, &k).expect("pooled")
}

/// The trivially correct model: every known id with its state, its holders (a count) and
/// the maintenance epoch of its release; the counter, scanned linearly.
#[derive(Debug, Default)]
struct Model {
    ids: HashMap<u32, (u64, u64, Option<u64>)>,
    next: u32,
    epoch: u64,
    last_run: Option<u64>,
    limit: usize,
}

impl Model {
    fn take(&mut self, id: u32) -> bool {
        match self.ids.get_mut(&id) {
            Some(e) => {
                e.1 += 1;
                e.2 = None;
                true
            }
            None => false,
        }
    }

    fn release(&mut self, id: u32) {
        let e = self.ids.get_mut(&id).expect("held id is known");
        e.1 -= 1;
        if e.1 == 0 {
            e.2 = Some(self.epoch);
        }
    }

    fn alloc(&mut self, s: u64) -> Result<u32, ()> {
        if let Some((&id, _)) = self.ids.iter().find(|(_, e)| e.0 == s) {
            self.take(id);
            return Ok(id);
        }
        if self.ids.len() >= self.limit {
            return Err(());
        }
        loop {
            let id = self.next;
            self.next = self.next.wrapping_add(1).max(1);
            if let std::collections::hash_map::Entry::Vacant(e) = self.ids.entry(id) {
                e.insert((s, 1, None));
                return Ok(id);
            }
        }
    }

    fn run(&mut self, now: u64) {
        if self.last_run.is_some_and(|t| now < t + RECIRC_GRACE_MS) {
            return;
        }
        self.last_run = Some(now);
        self.epoch += 1;
        let epoch = self.epoch;
        self.ids
            .retain(|_, e| !(e.1 == 0 && e.2.is_some_and(|r| r + 2 <= epoch)));
    }

    fn check(&self, p: &RecircPool, ctx: &str) {
        let st = p.stats();
        let live = self.ids.values().filter(|e| e.1 > 0).count();
        assert_eq!(
            (st.live, st.expiring),
            (live, self.ids.len() - live),
            "{ctx}"
        );
        assert_eq!(p.next(), self.next, "{ctx}");
        for (&id, &(s, holders, _)) in &self.ids {
            assert_eq!(p.state(id), Some(state(s)), "{ctx}: id {id:#x}");
            assert_eq!(p.refs(id), holders, "{ctx}: id {id:#x}");
        }
    }
}

/// The pool against the model on random sequences of alloc / ref / clone / unref / run
/// (with time), from counters near 1 and near `u32::MAX` (so the wrap and the skipping of
/// known ids come up), with limits small enough to be reached.
#[test]
fn twin_against_model() {
    let mut exhausted = 0;
    let mut revived = 0;
    let mut freed = 0;
    let mut skipped = 0;
    for seed in 0..200u64 {
        let mut rng = TestRng::new(seed);
        let start = if rng.chance(1, 2) {
            u32::MAX - rng.below(20) as u32
        } else {
            1 + rng.below(5) as u32
        };
        let limit = [3usize, 8, 64][rng.index(3)];
        let p = RecircPool::standalone(start);
        p.set_limit(limit);
        let mut m = Model {
            next: start,
            limit,
            ..Model::default()
        };
        let n_states = 2 + rng.below(20);
        let mut held: Vec<RecircRef> = Vec::new();
        let mut now = 0u64;
        let mut ever: Vec<u32> = Vec::new();
        for step in 0..400 {
            let ctx = format!("seed {seed} step {step}");
            match rng.below(11) {
                0..=2 => {
                    let s = rng.below(n_states);
                    match (alloc(&p, s), m.alloc(s)) {
                        (Ok(r), Ok(id)) => {
                            assert_eq!(r.id(), id, "{ctx}");
                            assert_ne!(id, 0);
                            ever.push(id);
                            held.push(r);
                        }
                        (Err(RecircError::Exhausted { limit: l }), Err(())) => {
                            assert_eq!(l, limit);
                            exhausted += 1;
                        }
                        (a, b) => panic!("{ctx}: pool {a:?} model {b:?}"),
                    }
                }
                3 => {
                    // Any id: held, known, freed, or never given.
                    let id = match (rng.below(3), ever.is_empty()) {
                        (0, false) => ever[rng.index(ever.len())],
                        (1, _) => start.wrapping_add(rng.below(40) as u32),
                        _ => rng.next_u32(),
                    };
                    let want = m.ids.get(&id).map(|e| e.0);
                    let was_released = m.ids.get(&id).is_some_and(|e| e.1 == 0);
                    let got = p.resume(id);
                    assert_eq!(got.as_ref().map(|g| g.2.id()), want.map(|_| id), "{ctx}");
                    if let Some((t, k, r)) = got {
                        assert_eq!(Some((t, k)), want.map(state), "{ctx}");
                        assert!(m.take(id));
                        revived += u64::from(was_released);
                        held.push(r);
                    }
                }
                4 => {
                    if !held.is_empty() {
                        let r = held[rng.index(held.len())].clone();
                        assert!(m.take(r.id()));
                        held.push(r);
                    }
                }
                5..=7 => {
                    if !held.is_empty() {
                        let r = held.swap_remove(rng.index(held.len()));
                        let id = r.id();
                        drop(r);
                        m.release(id);
                    }
                }
                10 => {
                    // Move the counter back onto ids given before (some still known).
                    let to = match ever.is_empty() {
                        false => ever[rng.index(ever.len())],
                        true => start,
                    };
                    p.set_next(to);
                    m.next = to.max(1);
                }
                _ => {
                    now += rng.below(2 * RECIRC_GRACE_MS);
                    let before = m.ids.len();
                    m.run(now);
                    let n = p.run(now);
                    assert_eq!(n, before - m.ids.len(), "{ctx}");
                    freed += n;
                }
            }
            m.check(&p, &ctx);
        }
        skipped += p.stats().skipped;
        drop(held);
        // With nothing held, everything is freed after two effective runs.
        for _ in 0..2 {
            now += RECIRC_GRACE_MS;
            p.run(now);
        }
        assert_eq!(p.stats().known(), 0, "seed {seed}");
    }
    // The sequences exercised what they claim.
    assert!(
        exhausted > 0 && revived > 0 && freed > 0 && skipped > 0,
        "exhausted {exhausted} revived {revived} freed {freed} skipped {skipped}"
    );
}

/// Wrap-around: the counter goes past `u32::MAX` to 1 and skips every id still known —
/// live or released and within its grace — and hands a freed id out again only after the
/// grace, never 0.
#[test]
fn wrap_skips_live_and_expiring_ids() {
    let p = RecircPool::standalone(1);
    let a = alloc(&p, 1).unwrap();
    let b = alloc(&p, 2).unwrap();
    let c = alloc(&p, 3).unwrap();
    assert_eq!((a.id(), b.id(), c.id()), (1, 2, 3));
    p.set_next(u32::MAX - 1);
    let d = alloc(&p, 4).unwrap();
    let e = alloc(&p, 5).unwrap();
    assert_eq!((d.id(), e.id()), (u32::MAX - 1, u32::MAX));
    // Wraps: 0 is never an id, 1..=3 are live.
    let f = alloc(&p, 6).unwrap();
    assert_eq!(f.id(), 4);
    assert_eq!(p.stats().skipped, 3);
    // The same state again: the same id, no allocation.
    let f2 = alloc(&p, 6).unwrap();
    assert_eq!((f2.id(), p.refs(4)), (4, 2));
    // b released: expiring, still known (its state resumes), not reusable.
    drop(b);
    assert_eq!(p.state(2), Some(state(2)));
    assert_eq!(
        p.stats(),
        RecircStats {
            live: 5,
            expiring: 1,
            allocated: 6,
            skipped: 3,
            ..RecircStats::default()
        }
    );
    p.set_next(1);
    let g = alloc(&p, 7).unwrap();
    assert_eq!(g.id(), 5, "1 live, 2 expiring, 3 and 4 live");
    // One maintenance run is not enough; a second one within the grace does nothing.
    assert_eq!(p.run(1_000), 0);
    assert_eq!(p.run(1_000 + RECIRC_GRACE_MS - 1), 0);
    p.set_next(1);
    assert_eq!(alloc(&p, 8).unwrap().id(), 6);
    // Now freed: unknown, and the counter may hand it out again (to another state).
    assert_eq!(p.run(1_000 + RECIRC_GRACE_MS), 1);
    assert_eq!(p.state(2), None);
    assert!(p.try_ref(2).is_none());
    p.set_next(u32::MAX);
    let h = alloc(&p, 9).unwrap();
    assert_eq!(h.id(), 2, "u32::MAX live, 0 skipped, 1 live, 2 free");
    assert_eq!(p.state(2), Some(state(9)));
    drop((a, c, d, e, f, f2, g, h));
}

/// A released state referenced again before it is freed keeps its id (revived), and its
/// grace starts over at its next release.
#[test]
fn revive_keeps_the_id_and_restarts_the_grace() {
    let p = RecircPool::standalone(10);
    let a = alloc(&p, 1).unwrap();
    drop(a);
    p.run(0);
    let a = alloc(&p, 1).unwrap();
    assert_eq!(a.id(), 10);
    assert_eq!(p.stats().revived, 1);
    p.run(RECIRC_GRACE_MS);
    assert_eq!(p.state(10), Some(state(1)), "held: not freed");
    drop(a);
    assert_eq!(
        p.run(2 * RECIRC_GRACE_MS),
        0,
        "released after the last run: one more"
    );
    assert_eq!(p.run(3 * RECIRC_GRACE_MS), 1);
    assert_eq!(p.stats().known(), 0);
}

/// Exhaustion is an error, counted, and goes away when states are freed.
#[test]
fn exhaustion_is_a_counted_error() {
    let p = RecircPool::standalone(u32::MAX);
    p.set_limit(2);
    let a = alloc(&p, 1).unwrap();
    let b = alloc(&p, 2).unwrap();
    assert_eq!(
        alloc(&p, 3).unwrap_err(),
        RecircError::Exhausted { limit: 2 }
    );
    assert_eq!(
        alloc(&p, 1).unwrap().id(),
        a.id(),
        "a known state needs no new id"
    );
    assert_eq!(p.stats().exhausted, 1);
    drop(b);
    assert!(alloc(&p, 3).is_err(), "released but not freed still counts");
    p.run(0);
    p.run(RECIRC_GRACE_MS);
    assert_eq!(alloc(&p, 3).unwrap().id(), 2);
    assert_eq!(p.stats().exhausted, 2);
    drop(a);
}

/// An unpooled bridge's handle does nothing.
#[test]
fn unpooled_handle_is_inert() {
    let br = crate::Bridge::new("br0", crate::Backend::Linear);
    let p = br.recirc_pool();
    let (t, k) = state(1);
    assert!(p.alloc(t, &k).is_none());
    assert!(p.try_ref(1).is_none());
    assert_eq!(p.run(0), 0);
    assert_eq!(p.stats(), RecircStats::default());
}
