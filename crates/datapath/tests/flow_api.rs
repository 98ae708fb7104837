//! The flow table API (`Dpcls::put/get/del/flush/dump`, the datapath view `DpifFlows`) and
//! the reclaiming action table, each against a trivially correct twin (hash maps) on random
//! operation sequences drawn from `TestRng`; bad input gets its error, never a panic.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datapath::{
    ActionSet, ActionTable, ActionsId, DpAction, Dpcls, DpclsConfig, DpifFlows, FlowError, FlowPut,
    FlowStatsSnapshot, PutMode, PutOutcome, TerseFlow, Ufid,
};
use flow::{FlowKey, FlowMask};
use testutil::rng::TestRng;

/// Megaflow `(port, id, v)`: in_port and recirc_id exact, nw_src = id exact, and a mask on
/// the L4 word that depends on `id` only, with value `v`. Two different triples never
/// overlap (same port and id: same mask, different `v`).
fn megaflow(port: u32, id: u64, v: u64) -> (FlowKey, FlowMask) {
    let mut m = FlowMask::CATCHALL;
    m.w[0] = u64::MAX;
    m.w[19] = 0xffff_ffff;
    m.w[29] = [0xffff, 0xffff_0000, 0xff00_ff00][(id % 3) as usize];
    let mut k = FlowKey::ZERO;
    k.w[0] = u64::from(port) << 32;
    k.w[19] = id;
    k.w[29] = [0x1234_5678, 0x0a0b_0c0d, 0x7777_1111][v as usize % 3] & m.w[29];
    (k, m)
}

fn lists() -> Vec<Vec<DpAction>> {
    (0..6u32)
        .map(|i| match i % 3 {
            0 => vec![DpAction::Output(i)],
            1 => vec![DpAction::PopVlan, DpAction::Output(i)],
            _ => vec![DpAction::Output(i), DpAction::Drop],
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
struct ModelFlow {
    key: FlowKey,
    mask: FlowMask,
    actions: ActionsId,
}

/// The twin: what a put should answer, and the table after it.
fn model_put(
    model: &mut HashMap<Ufid, ModelFlow>,
    put: &FlowPut,
    collisions: &mut u64,
) -> Result<bool, FlowError> {
    if put.mask.w[0] >> 32 != 0xffff_ffff {
        return Err(FlowError::InPortNotExact);
    }
    if put.mask.w[0] & 0xffff_ffff != 0xffff_ffff {
        return Err(FlowError::RecircIdNotExact);
    }
    let ufid = put.ufid();
    let key = put.key.masked(&put.mask);
    if let Some(f) = model.get_mut(&ufid) {
        if f.key != key || f.mask != put.mask {
            *collisions += 1;
            return Err(FlowError::UfidCollision(ufid));
        }
        if put.mode == PutMode::Create {
            return Err(FlowError::Exists(ufid));
        }
        f.actions = put.actions.id();
        return Ok(false);
    }
    if put.mode == PutMode::Modify {
        return Err(FlowError::NotFound(ufid));
    }
    if let Some((u, _)) = model
        .iter()
        .find(|(_, f)| f.key == key && f.mask == put.mask)
    {
        return Err(FlowError::MegaflowExists(*u));
    }
    model.insert(
        ufid,
        ModelFlow {
            key,
            mask: put.mask,
            actions: put.actions.id(),
        },
    );
    Ok(true)
}

fn random_put(r: &mut TestRng, sets: &[Arc<ActionSet>]) -> FlowPut {
    let (k, mut m) = megaflow(1 + r.below(3) as u32, r.below(30), r.below(3));
    match r.below(40) {
        0 => m.w[0] = 0xffff_ffff,       // no in_port
        1 => m.w[0] = 0xffff_ffff << 32, // no recirc_id
        _ => {}
    }
    let mode = [PutMode::Create, PutMode::Modify, PutMode::CreateOrModify][r.index(3)];
    let mut p = FlowPut::new(k, m, sets[r.index(sets.len())].clone(), mode);
    if r.chance(1, 8) {
        // A ufid of the caller's choosing from a tiny pool: collisions with other megaflows.
        p.ufid = Some(Ufid(1 + u128::from(r.below(3))));
    }
    p
}

fn dump_of(cls: &Dpcls, r: &mut TestRng) -> HashMap<Ufid, ModelFlow> {
    let mut d = cls.dump();
    let mut got = Vec::new();
    loop {
        let chunk = 1 + r.index(50);
        if d.next_chunk(chunk, &mut got) == 0 {
            break;
        }
    }
    assert!(d.is_done());
    let n = got.len();
    let map: HashMap<Ufid, ModelFlow> = got
        .into_iter()
        .map(|f| {
            (
                f.ufid,
                ModelFlow {
                    key: f.key,
                    mask: f.mask,
                    actions: f.actions(),
                },
            )
        })
        .collect();
    assert_eq!(map.len(), n, "a dump lists each flow once");
    map
}

#[test]
fn dpcls_flow_api_matches_twin() {
    for seed in 0..12u64 {
        let mut r = TestRng::new(0xf10a_0000 + seed);
        let table = ActionTable::new(64);
        let sets: Vec<Arc<ActionSet>> = lists()
            .iter()
            .map(|l| table.intern_set(l).expect("room"))
            .collect();
        let cls = Dpcls::new(DpclsConfig {
            arena_capacity: 16 + r.index(64), // small: compactions happen
            ..DpclsConfig::default()
        });
        let mut model: HashMap<Ufid, ModelFlow> = HashMap::new();
        let mut collisions = 0u64;
        for step in 0..1500 {
            match r.below(10) {
                0..=5 => {
                    let p = random_put(&mut r, &sets);
                    let want = model_put(&mut model, &p, &mut collisions);
                    let got = cls.put(&p);
                    match (&want, &got) {
                        (Ok(true), Ok(PutOutcome::Created(f))) => {
                            assert_eq!(f.ufid, p.ufid());
                        }
                        (Ok(false), Ok(PutOutcome::Modified { flow, .. })) => {
                            assert_eq!(flow.actions(), p.actions.id());
                            assert_eq!(flow.action_set().unwrap().id(), p.actions.id());
                        }
                        (Err(a), Err(b)) => assert_eq!(a, b, "seed {seed} step {step}"),
                        _ => panic!("seed {seed} step {step}: want {want:?} got {got:?}"),
                    }
                }
                6 | 7 => {
                    let u = match model.keys().nth(r.index(model.len() + 1)) {
                        Some(u) if r.chance(4, 5) => *u,
                        _ => Ufid(u128::from(r.next_u64())),
                    };
                    let want = model.remove(&u);
                    match cls.del(u) {
                        Ok(f) => {
                            assert!(want.is_some(), "seed {seed} step {step}");
                            assert!(f.is_dead());
                        }
                        Err(e) => {
                            assert!(want.is_none());
                            assert_eq!(e, FlowError::NotFound(u));
                        }
                    }
                }
                8 => {
                    let u = match model.keys().nth(r.index(model.len() + 1)) {
                        Some(u) => *u,
                        None => Ufid(7),
                    };
                    assert_eq!(
                        cls.get(u).map(|f| (f.key, f.mask, f.actions())),
                        model.get(&u).map(|f| (f.key, f.mask, f.actions))
                    );
                }
                _ => {
                    if r.chance(1, 10) {
                        assert_eq!(cls.flush(), model.len());
                        model.clear();
                    }
                }
            }
            assert_eq!(cls.len(), model.len());
            if step % 7 == 0 {
                assert_eq!(dump_of(&cls, &mut r), model, "seed {seed} step {step}");
                let terse: HashSet<Ufid> = cls.dump_terse().iter().map(|t| t.ufid).collect();
                assert_eq!(terse, model.keys().copied().collect::<HashSet<_>>());
                // Lookups agree: each model flow's key finds exactly that flow.
                let snap = cls.snapshot();
                for (u, f) in &model {
                    let port = (f.key.w[0] >> 32) as u32;
                    let mut out = [None];
                    snap.lookup_batch(port, std::slice::from_ref(&f.key), &mut out);
                    assert_eq!(out[0].map(|g| g.ufid), Some(*u));
                }
            }
        }
        assert_eq!(cls.ufid_collisions(), collisions, "seed {seed}");
    }
}

#[test]
fn bad_input_is_an_error() {
    let table = ActionTable::new(4);
    let set = table.intern_set(&[DpAction::Output(2)]).unwrap();
    let cls = Dpcls::new(DpclsConfig::default());
    let (k, m) = megaflow(1, 5, 0);
    let mut bad = m;
    bad.w[0] = 0xffff_ffff;
    assert_eq!(
        cls.put(&FlowPut::new(k, bad, set.clone(), PutMode::Create))
            .unwrap_err(),
        FlowError::InPortNotExact
    );
    bad.w[0] = 0xffff_ffff_0000_0000;
    assert_eq!(
        cls.put(&FlowPut::new(k, bad, set.clone(), PutMode::CreateOrModify))
            .unwrap_err(),
        FlowError::RecircIdNotExact
    );
    let u = Ufid::of(&k, &m);
    assert_eq!(
        cls.put(&FlowPut::new(k, m, set.clone(), PutMode::Modify))
            .unwrap_err(),
        FlowError::NotFound(u)
    );
    assert_eq!(cls.del(u).unwrap_err(), FlowError::NotFound(u));
    assert!(cls.get(u).is_none());
    let f = cls
        .put(&FlowPut::new(k, m, set.clone(), PutMode::Create))
        .unwrap();
    assert!(matches!(f, PutOutcome::Created(_)));
    assert_eq!(
        cls.put(&FlowPut::new(k, m, set.clone(), PutMode::Create))
            .unwrap_err(),
        FlowError::Exists(u)
    );
    // The same megaflow under another ufid; another megaflow under this ufid.
    let mut p = FlowPut::new(k, m, set.clone(), PutMode::Create);
    p.ufid = Some(Ufid(99));
    assert_eq!(cls.put(&p).unwrap_err(), FlowError::MegaflowExists(u));
    let (k2, m2) = megaflow(1, 6, 0);
    let mut p = FlowPut::new(k2, m2, set.clone(), PutMode::CreateOrModify);
    p.ufid = Some(u);
    assert_eq!(cls.put(&p).unwrap_err(), FlowError::UfidCollision(u));
    assert_eq!(cls.ufid_collisions(), 1);
    assert_eq!(cls.len(), 1);
    for e in [
        FlowError::InPortNotExact,
        FlowError::NotFound(u),
        FlowError::NoSuchPmd(3),
    ] {
        assert!(!e.to_string().is_empty());
    }
    let view = DpifFlows::new(vec![(0, Arc::new(cls))]);
    assert_eq!(
        view.put(Some(5), &FlowPut::new(k, m, set, PutMode::Create))
            .unwrap_err(),
        FlowError::NoSuchPmd(5)
    );
}

/// Ufids are the megaflow's: equal for equal megaflows (whatever the unmasked bits), and
/// distinct over many distinct megaflows.
#[test]
fn ufid_is_the_megaflows() {
    let mut r = TestRng::new(77);
    let mut seen = HashMap::new();
    for id in 0..20_000u64 {
        let (mut k, m) = megaflow(1 + (id % 4) as u32, id, id % 3);
        let u = Ufid::of(&k, &m);
        k.w[30] = r.next_u64(); // outside the mask
        k.w[29] |= !m.w[29] & r.next_u64();
        assert_eq!(Ufid::of(&k, &m), u);
        assert!(seen.insert(u, id).is_none(), "ufid collision at {id}");
    }
    // Same key, masks differing in one bit: different ufids.
    let (k, m) = megaflow(1, 3, 0);
    let mut m2 = m;
    m2.w[20] = 1;
    assert_ne!(Ufid::of(&k, &m), Ufid::of(&k, &m2));
}

fn sum(a: FlowStatsSnapshot, b: FlowStatsSnapshot) -> FlowStatsSnapshot {
    FlowStatsSnapshot {
        packets: a.packets + b.packets,
        bytes: a.bytes + b.bytes,
        used: a.used.max(b.used),
        tcp_flags: a.tcp_flags | b.tcp_flags,
    }
}

/// The datapath view over three PMD classifiers against per-PMD twin maps: puts to one PMD
/// or all, deletes, flushes, stats recorded per PMD and summed on get and dump.
#[test]
fn dpif_view_matches_twin() {
    for seed in 0..6u64 {
        let mut r = TestRng::new(0xd1f0 + seed);
        let table = ActionTable::new(64);
        let sets: Vec<Arc<ActionSet>> = lists()
            .iter()
            .map(|l| table.intern_set(l).expect("room"))
            .collect();
        let cores = [3u32, 5, 9];
        let cls: Vec<Arc<Dpcls>> = cores
            .iter()
            .map(|_| Arc::new(Dpcls::new(DpclsConfig::default())))
            .collect();
        let view = DpifFlows::new(cores.iter().copied().zip(cls.iter().cloned()).collect());
        let mut model: Vec<HashMap<Ufid, ModelFlow>> = vec![HashMap::new(); 3];
        let mut stats: Vec<HashMap<Ufid, FlowStatsSnapshot>> = vec![HashMap::new(); 3];
        let mut junk = 0;
        for step in 0..800 {
            let target = if r.chance(1, 2) {
                None
            } else {
                Some(r.index(3))
            };
            let pmd = target.map(|i| cores[i]);
            let idx: Vec<usize> = match target {
                Some(i) => vec![i],
                None => vec![0, 1, 2],
            };
            match r.below(8) {
                0..=3 => {
                    let mut p = random_put(&mut r, &sets);
                    p.ufid = None;
                    let mut want = Ok(());
                    for &i in &idx {
                        if let Err(e) = model_put(&mut model[i], &p, &mut junk)
                            && want.is_ok()
                        {
                            want = Err(e);
                        }
                    }
                    let got = view.put(pmd, &p).map(|_| ());
                    assert_eq!(got, want, "seed {seed} step {step}");
                }
                4 => {
                    let u = model
                        .iter()
                        .flat_map(|m| m.keys())
                        .nth(r.index(4))
                        .copied()
                        .unwrap_or(Ufid(1));
                    let mut want: Option<FlowStatsSnapshot> = None;
                    for &i in &idx {
                        if model[i].remove(&u).is_some() {
                            let s = stats[i].remove(&u).unwrap_or_default();
                            want = Some(want.map_or(s, |a| sum(a, s)));
                        }
                    }
                    assert_eq!(view.del(pmd, u).ok(), want, "seed {seed} step {step}");
                }
                5 => {
                    if r.chance(1, 6) {
                        let n: usize = idx.iter().map(|&i| model[i].len()).sum();
                        assert_eq!(view.flush(pmd), Ok(n));
                        for &i in &idx {
                            model[i].clear();
                            stats[i].clear();
                        }
                    }
                }
                _ => {
                    // Traffic: PMD i's counters of one of its flows.
                    let i = r.index(3);
                    if let Some(u) = model[i].keys().nth(r.index(model[i].len() + 1)).copied() {
                        let f = cls[i].get(u).expect("installed");
                        let (p, b, t, fl) = (
                            1 + r.below(5),
                            r.below(2000),
                            r.below(1000),
                            r.next_u16() & 0xfff,
                        );
                        f.stats.record(p, b, t, fl);
                        let s = stats[i].entry(u).or_default();
                        *s = sum(
                            *s,
                            FlowStatsSnapshot {
                                packets: p,
                                bytes: b,
                                used: t,
                                tcp_flags: fl,
                            },
                        );
                    }
                }
            }
            if step % 10 == 0 {
                // Summed twin.
                let mut want: HashMap<Ufid, (FlowStatsSnapshot, u32)> = HashMap::new();
                for i in 0..3 {
                    for u in model[i].keys() {
                        let s = stats[i].get(u).copied().unwrap_or_default();
                        let e = want.entry(*u).or_default();
                        e.0 = sum(e.0, s);
                        e.1 += 1;
                    }
                }
                let terse: Vec<TerseFlow> = view.dump_terse();
                assert_eq!(terse.len(), want.len());
                for t in &terse {
                    assert_eq!(Some(&t.stats), want.get(&t.ufid).map(|w| &w.0));
                }
                let full = view.dump();
                assert_eq!(full.len(), want.len());
                for f in &full {
                    assert_eq!(Some((f.stats, f.pmds)), want.get(&f.ufid).copied());
                    let g = view.get(f.ufid).expect("get");
                    assert_eq!((g.stats, g.pmds), (f.stats, f.pmds));
                }
            }
        }
    }
}

/// The action table against a twin: live counts, ids never naming two lists, every live id
/// answered by the table and its newest view, "full" only at capacity.
#[test]
fn action_table_matches_twin() {
    for seed in 0..10u64 {
        let mut r = TestRng::new(0xac7 + seed);
        let cap = 1 + r.index(12);
        let t = ActionTable::new(cap);
        let pool: Vec<Vec<DpAction>> = (0..40u32)
            .map(|i| vec![DpAction::Output(i), DpAction::Output(i + 1000)])
            .collect();
        let mut held: Vec<(usize, Arc<ActionSet>)> = Vec::new();
        let mut pending: HashMap<usize, (ActionsId, u32)> = HashMap::new();
        let mut names: HashMap<ActionsId, usize> = HashMap::new();
        let live = |held: &Vec<(usize, Arc<ActionSet>)>,
                    pending: &HashMap<usize, (ActionsId, u32)>| {
            let mut s: HashSet<usize> = held.iter().map(|(l, _)| *l).collect();
            s.extend(pending.iter().filter(|(_, p)| p.1 > 0).map(|(l, _)| *l));
            s
        };
        for step in 0..3000 {
            let l = r.index(pool.len());
            let alive = live(&held, &pending);
            match r.below(6) {
                0 | 1 => {
                    let got = t.intern_set(&pool[l]);
                    if alive.contains(&l) || alive.len() < cap {
                        let s = got.unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                        assert_eq!(s.actions(), &pool[l][..]);
                        assert_eq!(
                            *names.entry(s.id()).or_insert(l),
                            l,
                            "id reused for another list"
                        );
                        held.push((l, s));
                    } else {
                        assert!(got.is_err(), "seed {seed} step {step}: beyond capacity");
                    }
                }
                2 => {
                    if !held.is_empty() {
                        held.swap_remove(r.index(held.len()));
                    }
                }
                3 => {
                    let got = t.intern(&pool[l]);
                    if alive.contains(&l) || alive.len() < cap {
                        let id = got.expect("room");
                        assert_eq!(*names.entry(id).or_insert(l), l);
                        let p = pending.entry(l).or_insert((id, 0));
                        assert!(p.1 == 0 || p.0 == id);
                        *p = (id, p.1 + 1);
                    } else {
                        assert!(got.is_none());
                    }
                }
                4 => {
                    if let Some((&l, &(id, n))) = pending.iter().find(|(_, p)| p.1 > 0) {
                        let s = t.take(id).expect("pending");
                        assert_eq!(s.actions(), &pool[l][..]);
                        pending.insert(l, (id, n - 1));
                        if r.chance(1, 2) {
                            held.push((l, s));
                        }
                    }
                }
                _ => {
                    if let Some((&l, &(id, n))) = pending.iter().find(|(_, p)| p.1 > 0) {
                        t.release(id);
                        pending.insert(l, (id, n - 1));
                    }
                }
            }
            let alive = live(&held, &pending);
            assert_eq!(t.len(), alive.len(), "seed {seed} step {step}");
            let view = t.view();
            for (l, s) in &held {
                assert_eq!(t.get(s.id()).as_deref(), Some(&pool[*l][..]));
                assert_eq!(view.get(s.id()), Some(&pool[*l][..]));
            }
            let m = t.memory();
            assert!(m.slots <= cap.max(1) && m.live == alive.len());
        }
    }
}

/// Readers resolve a looked-up flow's actions as the PMD does (the cached view by id, else
/// the flow's own set) while a writer modifies actions in place, deletes and re-creates
/// flows, and churns sets through a table of 20 (the flows' 15 lists, which removed flows
/// still in the arena keep alive, and 5 slots to churn) so that slots are reclaimed and
/// reused all the time: a reader always gets one of that flow's own lists, never another flow's (a
/// reused id) and never nothing.
#[test]
fn readers_never_see_a_reused_or_torn_action_list() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let table = Arc::new(ActionTable::new(20));
    let cls = Arc::new(Dpcls::new(DpclsConfig::default()));
    // Flow f's lists: [Output(f * 100 + j)].
    let list = |f: u64, j: u64| vec![DpAction::Output((f * 100 + j) as u32)];
    let flows: Vec<(FlowKey, FlowMask)> = (0..3).map(|f| megaflow(1, f, 0)).collect();
    for (f, (k, m)) in flows.iter().enumerate() {
        let s = table.intern_set(&list(f as u64, 0)).unwrap();
        cls.put(&FlowPut::new(*k, *m, s, PutMode::Create)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (table, cls, stop, flows) =
                (table.clone(), cls.clone(), stop.clone(), flows.clone());
            std::thread::spawn(move || {
                let mut reader = cls.reader();
                let mut areader = table.reader();
                let mut checked = 0u64;
                while !stop.load(Ordering::Relaxed) || checked < 1000 {
                    let view = areader.view().clone();
                    let snap = reader.snapshot().clone();
                    for (f, (k, _)) in flows.iter().enumerate() {
                        let mut out = [None];
                        snap.lookup_batch(1, std::slice::from_ref(k), &mut out);
                        let Some(flow) = out[0] else { continue };
                        let id = flow.actions();
                        let got: Vec<DpAction> = match view.get(id) {
                            Some(l) => l.to_vec(),
                            None => flow.action_set().expect("own set").actions().to_vec(),
                        };
                        let DpAction::Output(x) = got[0] else {
                            panic!("reader {t}: {got:?}")
                        };
                        assert_eq!(
                            u64::from(x) / 100,
                            f as u64,
                            "reader {t}: another flow's list"
                        );
                        checked += 1;
                    }
                }
                checked
            })
        })
        .collect();
    let mut r = TestRng::new(5150);
    for _ in 0..20_000 {
        let f = r.index(3);
        let (k, m) = flows[f];
        match r.below(4) {
            0 => {
                let _ = cls.del(Ufid::of(&k, &m));
                let s = table.intern_set(&list(f as u64, r.below(5))).unwrap();
                let _ = cls.put(&FlowPut::new(k, m, s, PutMode::Create));
            }
            _ => {
                // Modify in place; churn unrelated sets so the table rebuilds and reuses.
                if let Ok(s) = table.intern_set(&list(f as u64, r.below(5))) {
                    let _ = cls.put(&FlowPut::new(k, m, s, PutMode::CreateOrModify));
                }
                let junk = table.intern_set(&list(50 + r.below(40), 0));
                drop(junk);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        assert!(h.join().expect("reader") >= 1000);
    }
    assert!(table.memory().reclaimed > 1000, "{:?}", table.memory());
}
