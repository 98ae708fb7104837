//! The PMD loop against the slow path it caches (ARCHITECTURE.md invariants 2 and 4).
//!
//! A linear rule table with masks is the upcall; its megaflow mask is the union of the masks
//! of every rule it examined (sound, and megaflows of different answers never overlap). The
//! test feeds random packets (plus runts and garbage) through `MemPort`s and checks that every
//! output port receives exactly the frames a direct execution of the upcall's answer gives,
//! in order, with every cache tier combination, twice over the same traffic (so the caches
//! hit); that the counters partition the packets; and that every buffer returns to the pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use datapath::DpAction;
use datapath::pmd::{ActionTable, Pmd, PmdConfig, Upcall, UpcallError};
use datapath::{ActionsId, Dpcls, DpclsConfig};
use flow::extract::{PacketMeta, extract};
use flow::{FlowKey, FlowMask};
use netdev::{MemHandle, MemPort, NullPort, ReplayPort};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Outcome {
    Acts(Vec<DpAction>),
    Fail,
}

#[derive(Debug, Clone)]
struct Rule {
    key: FlowKey,
    mask: FlowMask,
    outcome: Outcome,
}

/// Rules in priority order; first match wins; no match = drop.
#[derive(Debug, Clone)]
struct Rules(Arc<Vec<Rule>>);

impl Rules {
    fn decide(&self, key: &FlowKey) -> (FlowMask, Outcome) {
        let mut m = FlowMask::CATCHALL;
        for r in self.0.iter() {
            m.union_with(&r.mask);
            if key.eq_masked(&r.key, &r.mask) {
                return (m, r.outcome.clone());
            }
        }
        (m, Outcome::Acts(vec![DpAction::Drop]))
    }
}

struct RulesUpcall {
    rules: Rules,
    calls: Arc<AtomicU64>,
}

impl Upcall for RulesUpcall {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        match self.rules.decide(key) {
            (m, Outcome::Acts(a)) => Ok((m, actions.intern(&a).ok_or(UpcallError::ActionsFull)?)),
            (_, Outcome::Fail) => Err(UpcallError::Failed("rule says fail".into())),
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn frame(rng: &mut Rng) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, rng.below(3) as u8]);
    f.extend_from_slice(&[0x04, 0, 0, 0, 0, rng.below(3) as u8]);
    if rng.below(4) == 0 {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 10 + rng.below(2) as u8]);
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let tcp = rng.below(2) == 0;
    let l4len = if tcp { 20 } else { 8 };
    let total = (20 + l4len) as u16;
    f.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0, 0, 64]);
    f.push(if tcp { 6 } else { 17 });
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&[10, 0, rng.below(2) as u8, rng.below(4) as u8]);
    f.extend_from_slice(&[10, 1, 0, rng.below(4) as u8]);
    let sport = 1000 + rng.below(3) as u16;
    let dport = 80 + rng.below(3) as u16;
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    if tcp {
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        f.extend_from_slice(&[0, 8, 0, 0]);
    }
    f
}

fn bad_frame(rng: &mut Rng) -> Vec<u8> {
    let len = if rng.below(2) == 0 {
        rng.below(14)
    } else {
        rng.below(80)
    };
    (0..len).map(|_| rng.next() as u8).collect()
}

fn random_mask(rng: &mut Rng) -> FlowMask {
    let mut m = FlowMask::CATCHALL;
    if rng.below(3) == 0 {
        m.w[0] = 0xffff_ffff << 32; // in_port
    }
    if rng.below(2) == 0 {
        m.w[16] = 0xffff; // dl_type
    }
    if rng.below(3) == 0 {
        m.w[18] = 0xffff_ffff << 32; // outer vlan tpid + tci
    }
    match rng.below(4) {
        0 => {}
        1 => m.w[19] |= 0xffff_0000u64 << 32, // nw_src/16
        2 => m.w[19] |= 0xffff_ffffu64 << 32, // nw_src/32
        _ => m.w[19] |= 0xffff_ffff,          // nw_dst
    }
    if rng.below(2) == 0 {
        m.w[24] = 0xff; // nw_proto
    }
    match rng.below(3) {
        0 => {}
        1 => m.w[29] = 0xffff << 48, // tp_src
        _ => m.w[29] = 0xffff << 32, // tp_dst
    }
    m
}

fn random_outcome(rng: &mut Rng) -> Outcome {
    let port = [1, 2, 3][rng.below(3) as usize];
    match rng.below(13) {
        // check_pkt_len: a branch per frame size (42/46 UDP, 54/58 TCP bytes), the packet
        // as it was after it.
        10 => Outcome::Acts(vec![
            DpAction::CheckPktLen {
                size: 50,
                gt: 2,
                le: 1,
            },
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 0x0003,
            },
            DpAction::Output(2),
            DpAction::Output(3),
            DpAction::Output(1),
        ]),
        // Nested in a branch, a clone inside, and a check as the last action.
        11 => Outcome::Acts(vec![
            DpAction::CheckPktLen {
                size: 45,
                gt: 1,
                le: 5,
            },
            DpAction::Output(2),
            DpAction::Clone { len: 2 },
            DpAction::PopVlan,
            DpAction::Output(3),
            DpAction::CheckPktLen {
                size: 55,
                gt: 1,
                le: 0,
            },
            DpAction::Output(port),
        ]),
        // The length after a push_vlan.
        12 => Outcome::Acts(vec![
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0x0004,
            },
            DpAction::CheckPktLen {
                size: 56,
                gt: 1,
                le: 1,
            },
            DpAction::Output(2),
            DpAction::Output(3),
        ]),
        // `clone(push_vlan,2),3`: the tag only on the clone's copy.
        8 => Outcome::Acts(vec![
            DpAction::Clone { len: 2 },
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 0x0007,
            },
            DpAction::Output(2),
            DpAction::Output(3),
        ]),
        // Nested, a drop inside, and a clone as the last action (body runs on the packet).
        9 => Outcome::Acts(vec![
            DpAction::Clone { len: 4 },
            DpAction::PopVlan,
            DpAction::Clone { len: 1 },
            DpAction::Drop,
            DpAction::Output(port),
            DpAction::Output(1),
            DpAction::Clone { len: 2 },
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0x0009,
            },
            DpAction::Output(3),
        ]),
        0 => Outcome::Fail,
        1 => Outcome::Acts(vec![DpAction::Drop]),
        2 => Outcome::Acts(vec![]),
        3 => Outcome::Acts(vec![DpAction::Output(2), DpAction::Output(3)]),
        4 => Outcome::Acts(vec![
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 0x2005,
            },
            DpAction::Output(port),
        ]),
        5 => Outcome::Acts(vec![
            DpAction::Output(2),
            DpAction::PopVlan,
            DpAction::Output(3),
        ]),
        6 => Outcome::Acts(vec![DpAction::Output(99), DpAction::Output(port)]),
        _ => Outcome::Acts(vec![DpAction::Output(port)]),
    }
}

/// The length `check_pkt_len` compares, written independently of the PMD: the frame up to
/// the end of its IPv4/IPv6 datagram when padding follows it, else the whole frame.
fn ip_frame_len(f: &[u8]) -> usize {
    let mut l3 = 14;
    while l3 + 4 <= f.len() && (f[l3 - 2..l3] == [0x81, 0] || f[l3 - 2..l3] == [0x88, 0xa8]) {
        l3 += 4;
    }
    let Some(et) = f.get(l3 - 2..l3) else {
        return f.len();
    };
    let datagram = match et {
        [0x08, 0x00] if f.len() >= l3 + 20 && f[l3] >> 4 == 4 && f[l3] & 15 >= 5 => {
            let tot = usize::from(f[l3 + 2]) * 256 + usize::from(f[l3 + 3]);
            (tot >= usize::from(f[l3] & 15) * 4).then_some(tot)
        }
        [0x86, 0xdd] if f.len() >= l3 + 40 && f[l3] >> 4 == 6 => {
            Some(40 + usize::from(f[l3 + 4]) * 256 + usize::from(f[l3 + 5]))
        }
        _ => None,
    };
    match datagram {
        Some(d) if l3 + d < f.len() => l3 + d,
        _ => f.len(),
    }
}

/// What executing `acts` on `frame` sends, written independently of the PMD.
fn reference_exec(acts: &[DpAction], frame: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut f = frame.to_vec();
    let mut out = Vec::new();
    let mut j = 0;
    while j < acts.len() {
        let a = &acts[j];
        j += 1;
        match *a {
            DpAction::Clone { len } => {
                let end = (j + usize::from(len)).min(acts.len());
                out.extend(reference_exec(&acts[j..end], &f));
                j = end;
            }
            DpAction::CheckPktLen { size, gt, le } => {
                let g = (j + usize::from(gt)).min(acts.len());
                let end = (g + usize::from(le)).min(acts.len());
                let branch = if ip_frame_len(&f) > usize::from(size) {
                    &acts[j..g]
                } else {
                    &acts[g..end]
                };
                out.extend(reference_exec(branch, &f));
                j = end;
            }
            DpAction::Output(p) => {
                if (1..=3).contains(&p) {
                    out.push((p, f.clone()));
                }
            }
            DpAction::Drop => break,
            DpAction::PushVlan { tpid, tci } => {
                let mut g = f[..12].to_vec();
                g.extend_from_slice(&tpid.to_be_bytes());
                g.extend_from_slice(&tci.to_be_bytes());
                g.extend_from_slice(&f[12..]);
                f = g;
            }
            DpAction::PopVlan => {
                if f.len() >= 18 && (f[12..14] == [0x81, 0] || f[12..14] == [0x88, 0xa8]) {
                    f.drain(12..16);
                }
            }
            // Set actions have their own tests (tests/actions.rs); these rules make none.
            ref other => panic!("reference_exec: rules here never make {other:?}"),
        }
    }
    out
}

struct Setup {
    pmd: Pmd,
    rx: [MemHandle; 2],
    tx: [MemHandle; 3],
    calls: Arc<AtomicU64>,
}

fn setup(rules: &Rules, emc: bool, smc: bool) -> Setup {
    let cfg = PmdConfig {
        emc,
        smc,
        emc_insert_inv_prob: 1,
        pool_size: 256,
        ..PmdConfig::default()
    };
    let calls = Arc::new(AtomicU64::new(0));
    let up = RulesUpcall {
        rules: rules.clone(),
        calls: calls.clone(),
    };
    let mut pmd = Pmd::new(
        cfg,
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Arc::new(ActionTable::default()),
        Box::new(up),
    );
    let ports: Vec<MemPort> = (1..=4).map(|i| MemPort::new(format!("p{i}"))).collect();
    let h: Vec<MemHandle> = ports.iter().map(MemPort::handle).collect();
    for (i, p) in ports.into_iter().enumerate() {
        let no = i as u32 + 1;
        pmd.add_port(no, Box::new(p), no == 1 || no == 4).unwrap();
    }
    Setup {
        pmd,
        rx: [h[0].clone(), h[3].clone()],
        tx: [h[0].clone(), h[1].clone(), h[2].clone()],
        calls,
    }
}

/// Runs `frames[0]` into port 1 and `frames[1]` into port 4 and checks everything.
fn check_run(rules: &Rules, frames: &[Vec<Vec<u8>>; 2], emc: bool, smc: bool) {
    let mut s = setup(rules, emc, smc);
    let mut total = 0u64;
    let mut runts = 0u64;
    for pass in 0..2u64 {
        // Expected outputs, in the PMD's polling order: rounds of 32 from port 1 then port 4.
        let mut want: [Vec<Vec<u8>>; 3] = Default::default();
        let rounds = frames
            .iter()
            .map(|f| f.len().div_ceil(32))
            .max()
            .unwrap_or(0);
        for r in 0..rounds {
            for (pi, in_port) in [(0usize, 1u32), (1, 4)] {
                // One rx burst, executed per flow batch: packets of one megaflow grouped
                // (as OVS's packet_batch_per_flow), groups in order of their first packet.
                // A packet's megaflow is its upcall mask (in_port/recirc_id exact) and
                // masked key: every packet a megaflow covers gets that same pair.
                type Group<'a> = ((FlowMask, FlowKey), Vec<DpAction>, Vec<&'a Vec<u8>>);
                let mut groups: Vec<Group<'_>> = Vec::new();
                for f in frames[pi].iter().skip(r * 32).take(32) {
                    if f.len() < 14 {
                        if pass == 0 {
                            runts += 1;
                        }
                        continue;
                    }
                    let mut key = FlowKey::ZERO;
                    extract(f, &PacketMeta::port(in_port), &mut key);
                    if let (mut m, Outcome::Acts(a)) = rules.decide(&key) {
                        m.w[0] = u64::MAX;
                        let id = (m, key.masked(&m));
                        match groups.iter_mut().find(|(b, _, _)| *b == id) {
                            Some((_, _, fs)) => fs.push(f),
                            None => groups.push((id, a, vec![f])),
                        }
                    }
                }
                // A burst whose every packet has the same single-output actions goes out
                // whole, in rx order (the PMD swaps the batch instead of splitting it).
                let outs = groups
                    .first()
                    .map(|(_, a, _)| a.clone())
                    .filter(|a| matches!(a[..], [DpAction::Output(1..=4)]));
                let all = frames[pi]
                    .iter()
                    .skip(r * 32)
                    .take(32)
                    .filter(|f| f.len() >= 14)
                    .count();
                let grouped: usize = groups.iter().map(|(_, _, fs)| fs.len()).sum();
                if let Some(a) = outs
                    && grouped == all
                    && groups.iter().all(|(_, b, _)| *b == a)
                {
                    for f in frames[pi].iter().skip(r * 32).take(32) {
                        if f.len() >= 14 {
                            for (p, g) in reference_exec(&a, f) {
                                want[p as usize - 1].push(g);
                            }
                        }
                    }
                    continue;
                }
                for (_, a, fs) in groups {
                    for f in fs {
                        for (p, g) in reference_exec(&a, f) {
                            want[p as usize - 1].push(g);
                        }
                    }
                }
            }
        }
        for (pi, h) in s.rx.iter().enumerate() {
            for f in &frames[pi] {
                h.inject(f.clone());
                total += 1;
            }
        }
        let mut polls = 0;
        while s.rx.iter().any(|h| h.rx_pending() > 0) {
            s.pmd.poll_once();
            polls += 1;
            assert!(polls < 10_000);
        }
        for (i, h) in s.tx.iter().enumerate() {
            let got = h.take_tx();
            assert_eq!(
                got.len(),
                want[i].len(),
                "port {} pass {pass} emc {emc} smc {smc}",
                i + 1
            );
            if got != want[i] {
                let first = got.iter().zip(&want[i]).position(|(a, b)| a != b);
                let same_set = {
                    let mut a = got.clone();
                    let mut b = want[i].clone();
                    a.sort();
                    b.sort();
                    a == b
                };
                panic!(
                    "port {} frames differ at {first:?} (same multiset: {same_set}) emc {emc} smc {smc} pass {pass}",
                    i + 1
                );
            }
        }
        let st = s.pmd.stats();
        assert_eq!(st.packets_received, total);
        assert_eq!(st.classified(), st.packets_received, "{st:?}");
        assert_eq!(st.lost, st.lost_reasons.total());
        assert_eq!(st.lost_reasons.runt, runts * (pass + 1));
        assert_eq!(
            st.upcall_ok + st.upcall_failed,
            s.calls.load(Ordering::Relaxed)
        );
        assert_eq!(s.pmd.dpcls().len() as u64, st.flows_installed);
        assert_eq!(st.install_failed, 0);
        if !emc {
            assert_eq!(st.emc_hits, 0);
        }
        if !smc {
            assert_eq!(st.smc_hits, 0);
        }
        assert_eq!(s.pmd.pool().available(), s.pmd.pool().capacity(), "leak");
    }
    let st = s.pmd.stats();
    // The second pass repeats the first: nothing new goes to the upcall except failures.
    let ok_upcalls = st.upcall_ok;
    assert!(ok_upcalls <= st.flows_installed + st.install_failed);
    let valid = frames.iter().flatten().filter(|f| f.len() >= 14).count() as u64;
    if valid > 0 && st.upcall_failed == 0 {
        if emc {
            assert!(st.emc_hits > 0, "{st:?}");
        } else if smc {
            assert!(st.smc_hits > 0, "{st:?}");
        } else {
            assert!(st.megaflow_hits > 0, "{st:?}");
        }
    }
    let text = st.to_string();
    for line in [
        "packets received:",
        "emc hits:",
        "smc hits:",
        "megaflow hits:",
        "avg. subtable lookups per megaflow hit:",
        "miss with success upcall:",
        "miss with failed upcall:",
        "lost:",
        "avg. packets per output batch:",
        "idle cycles:",
        "processing cycles:",
    ] {
        assert!(text.contains(line), "{text}");
    }
}

fn random_case(seed: u64) -> (Rules, [Vec<Vec<u8>>; 2]) {
    let mut rng = Rng(seed | 1);
    let mut frames: [Vec<Vec<u8>>; 2] = Default::default();
    for fs in &mut frames {
        let n = rng.below(80) as usize;
        for _ in 0..n {
            if rng.below(10) == 0 {
                fs.push(bad_frame(&mut rng));
            } else {
                fs.push(frame(&mut rng));
            }
        }
    }
    let mut rules = Vec::new();
    for _ in 0..1 + rng.below(8) {
        let mask = random_mask(&mut rng);
        let in_port = [1u32, 4][rng.below(2) as usize];
        let src = frame(&mut rng);
        let mut key = FlowKey::ZERO;
        extract(&src, &PacketMeta::port(in_port), &mut key);
        rules.push(Rule {
            key: key.masked(&mask),
            mask,
            outcome: random_outcome(&mut rng),
        });
    }
    (Rules(Arc::new(rules)), frames)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn pmd_forwards_as_the_upcall_answers(seed in any::<u64>()) {
        let (rules, frames) = random_case(seed);
        for (emc, smc) in [(true, true), (true, false), (false, true), (false, false)] {
            check_run(&rules, &frames, emc, smc);
        }
    }
}

#[test]
fn garbage_and_runts_are_counted_never_panic() {
    let rules = Rules(Arc::new(vec![Rule {
        key: FlowKey::ZERO,
        mask: FlowMask::CATCHALL,
        outcome: Outcome::Acts(vec![DpAction::Output(2)]),
    }]));
    let mut s = setup(&rules, true, true);
    let mut rng = Rng(0x1234_5678);
    let mut runts = 0;
    for len in 0..200usize {
        let f: Vec<u8> = (0..len % 70).map(|_| rng.next() as u8).collect();
        runts += u64::from(f.len() < 14);
        s.rx[0].inject(f);
    }
    // Too large for a buffer: the port drops it, the PMD counts it lost.
    s.rx[0].inject(vec![0u8; 4000]);
    while s.rx[0].rx_pending() > 0 {
        s.pmd.poll_once();
    }
    let st = s.pmd.stats();
    assert_eq!(st.packets_received, 201);
    assert_eq!(st.lost_reasons.runt, runts);
    assert_eq!(st.lost_reasons.rx_too_large, 1);
    assert_eq!(st.classified(), 201);
    assert_eq!(s.tx[1].take_tx().len() as u64, 200 - runts);
}

#[test]
fn run_for_replay_to_null() {
    let mut rng = Rng(99);
    let frames: Vec<Vec<u8>> = (0..100).map(|_| frame(&mut rng)).collect();
    let rules = Rules(Arc::new(vec![Rule {
        key: FlowKey::ZERO,
        mask: FlowMask::CATCHALL,
        outcome: Outcome::Acts(vec![DpAction::Output(2)]),
    }]));
    let calls = Arc::new(AtomicU64::new(0));
    let mut pmd = Pmd::new(
        PmdConfig::default(),
        Arc::new(Dpcls::default()),
        Arc::new(ActionTable::default()),
        Box::new(RulesUpcall {
            rules,
            calls: calls.clone(),
        }),
    );
    pmd.add_port(
        1,
        Box::new(ReplayPort::new("rx", &frames).with_limit(10_000)),
        true,
    )
    .unwrap();
    pmd.add_port(2, Box::new(NullPort::new("null")), false)
        .unwrap();
    let r = pmd.run_for(5_000);
    // Stops within one burst past the target.
    assert!((5_000..5_032).contains(&r.packets), "{}", r.packets);
    assert_eq!(r.stats.classified(), r.packets);
    // One megaflow (catch-all + exact in_port): one upcall, the rest hits.
    assert_eq!(r.stats.upcall_ok, 1);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(pmd.port(2).map(|p| p.stats().tx_packets), Some(r.packets));
    let r2 = pmd.run_for(u64::MAX);
    assert_eq!(
        r.packets + r2.packets,
        10_000,
        "the replay stops at its limit"
    );
    assert_eq!(pmd.stats().classified(), 10_000);
    assert!(r2.mpps() > 0.0);
}

#[test]
fn action_table_interns() {
    let t = ActionTable::new(2);
    let a = t.intern(&[DpAction::Output(1)]).unwrap();
    let b = t.intern(&[DpAction::Drop]).unwrap();
    assert_ne!(a, b);
    assert_eq!(t.intern(&[DpAction::Output(1)]), Some(a));
    assert_eq!(t.intern(&[DpAction::PopVlan]), None, "full");
    assert_eq!(t.get(b).as_deref(), Some(&[DpAction::Drop][..]));
    assert_eq!(t.get(7), None);
    assert_eq!(t.len(), 2);
}

#[test]
fn one_batch_installs_a_megaflow_once() {
    let rules = Rules(Arc::new(vec![Rule {
        key: FlowKey::ZERO,
        mask: FlowMask::CATCHALL,
        outcome: Outcome::Acts(vec![DpAction::Output(2)]),
    }]));
    let mut s = setup(&rules, false, false);
    let mut rng = Rng(5);
    // 32 different packets, all covered by one megaflow.
    for _ in 0..32 {
        s.rx[0].inject(frame(&mut rng));
    }
    s.pmd.poll_once();
    let st = s.pmd.stats();
    assert_eq!(st.upcall_ok, 1);
    assert_eq!(st.megaflow_hits, 31, "re-lookup after the first install");
    assert_eq!(s.calls.load(Ordering::Relaxed), 1);
    assert_eq!(s.pmd.dpcls().len(), 1);
    assert_eq!(st.tx_batches, 1);
    assert_eq!(st.tx_packets, 32);
    assert_eq!(s.tx[1].take_tx().len(), 32);
}

#[test]
fn two_pmds_share_one_classifier() {
    let mut rng = Rng(77);
    let frames: Vec<Vec<u8>> = (0..300).map(|_| frame(&mut rng)).collect();
    let (rules, _) = random_case(0xfeed);
    let dpcls = Arc::new(Dpcls::default());
    let actions = Arc::new(ActionTable::default());
    let handles: Vec<_> = (0..2u32)
        .map(|t| {
            let mut pmd = Pmd::new(
                PmdConfig {
                    core_id: t,
                    ..PmdConfig::default()
                },
                dpcls.clone(),
                actions.clone(),
                Box::new(RulesUpcall {
                    rules: rules.clone(),
                    calls: Arc::new(AtomicU64::new(0)),
                }),
            );
            let rx = ReplayPort::new("rx", &frames).with_limit(20_000);
            pmd.add_port(1, Box::new(rx), true).unwrap();
            for no in 2..=4 {
                pmd.add_port(no, Box::new(NullPort::new("null")), false)
                    .unwrap();
            }
            std::thread::spawn(move || {
                let r = pmd.run_for(u64::MAX);
                (r, pmd)
            })
        })
        .collect();
    for h in handles {
        let (r, pmd) = h.join().unwrap();
        assert_eq!(r.packets, 20_000);
        assert_eq!(r.stats.classified(), 20_000);
        assert_eq!(r.stats.install_failed, 0);
        assert_eq!(pmd.pool().available(), pmd.pool().capacity());
    }
    // Both installed into the same table; a racing install returned the existing flow.
    for f in dpcls.flows() {
        assert!(f.arena_index().is_some());
    }
}

/// Throughput smoke figures (not a benchmark: `cargo test -p datapath --test pmd -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn throughput_smoke() {
    for (flows, emc, smc) in [
        (1u32, true, false),
        (1000, true, false),
        (1000, false, false),
        (1000, false, true),
    ] {
        let mut rng = Rng(3);
        let frames: Vec<Vec<u8>> = (0..flows)
            .map(|i| {
                let mut f = frame(&mut rng);
                let l = f.len();
                f[l - 8..l - 4].copy_from_slice(&i.to_be_bytes());
                f
            })
            .collect();
        // A first rule that never matches but un-wildcards the IP addresses and transport
        // ports (one megaflow per flow), then output everything to port 2.
        let mut mask = FlowMask::CATCHALL;
        mask.w[19] = u64::MAX;
        mask.w[29] = u64::MAX << 32;
        let rules = Rules(Arc::new(vec![
            Rule {
                key: FlowKey::ZERO,
                mask,
                outcome: Outcome::Fail,
            },
            Rule {
                key: FlowKey::ZERO,
                mask: FlowMask::CATCHALL,
                outcome: Outcome::Acts(vec![DpAction::Output(2)]),
            },
        ]));
        let mut pmd = Pmd::new(
            PmdConfig {
                emc,
                smc,
                ..PmdConfig::default()
            },
            Arc::new(Dpcls::default()),
            Arc::new(ActionTable::default()),
            Box::new(RulesUpcall {
                rules,
                calls: Arc::new(AtomicU64::new(0)),
            }),
        );
        pmd.add_port(1, Box::new(ReplayPort::new("rx", &frames)), true)
            .unwrap();
        pmd.add_port(2, Box::new(NullPort::new("null")), false)
            .unwrap();
        pmd.run_for(100_000);
        pmd.clear_stats();
        let r = pmd.run_for(5_000_000);
        println!(
            "flows {flows} emc {emc} smc {smc}: {:.2} Mpps\n{}",
            r.mpps(),
            r.stats
        );
    }
}

/// Answers `Output(port)` for everything, `port` switchable from the test.
struct SwitchUpcall(Arc<AtomicU64>);

impl Upcall for SwitchUpcall {
    fn upcall(
        &mut self,
        _key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        let port = self.0.load(Ordering::Relaxed) as u32;
        let mut m = FlowMask::CATCHALL;
        m.w[19] = u64::MAX;
        let id = actions
            .intern(&[DpAction::Output(port)])
            .ok_or(UpcallError::ActionsFull)?;
        Ok((m, id))
    }
}

#[test]
fn removed_megaflows_are_not_used_by_any_tier() {
    for (emc, smc) in [(true, true), (true, false), (false, true), (false, false)] {
        let port = Arc::new(AtomicU64::new(2));
        let mut pmd = Pmd::new(
            PmdConfig {
                emc,
                smc,
                emc_insert_inv_prob: 1,
                ..PmdConfig::default()
            },
            Arc::new(Dpcls::default()),
            Arc::new(ActionTable::default()),
            Box::new(SwitchUpcall(port.clone())),
        );
        let ports: Vec<MemPort> = (1..=3).map(|i| MemPort::new(format!("p{i}"))).collect();
        let h: Vec<MemHandle> = ports.iter().map(MemPort::handle).collect();
        for (i, p) in ports.into_iter().enumerate() {
            pmd.add_port(i as u32 + 1, Box::new(p), i == 0).unwrap();
        }
        let mut rng = Rng(11);
        let frames: Vec<Vec<u8>> = (0..100).map(|_| frame(&mut rng)).collect();
        for _ in 0..2 {
            for f in &frames {
                h[0].inject(f.clone());
            }
            while h[0].rx_pending() > 0 {
                pmd.poll_once();
            }
        }
        assert_eq!(h[1].take_tx().len(), 200);
        // The slow path changes its mind; the revalidator removes every megaflow.
        port.store(3, Ordering::Relaxed);
        for f in pmd.dpcls().flows() {
            pmd.dpcls().remove(f.ufid);
        }
        for f in &frames {
            h[0].inject(f.clone());
        }
        while h[0].rx_pending() > 0 {
            pmd.poll_once();
        }
        assert_eq!(h[1].take_tx().len(), 0, "emc {emc} smc {smc}");
        assert_eq!(h[2].take_tx().len(), 100);
        assert_eq!(pmd.stats().classified(), 300);
    }
}

/// A burst whose packets hit different megaflows with the same single output goes out whole
/// in rx order (the batch is handed to the port, not split per flow); each flow still gets
/// its own stats.
#[test]
fn uniform_single_output_burst_keeps_rx_order() {
    use flow::field::FieldId;
    let mut m = FlowMask::CATCHALL;
    FieldId::NwDst.unwildcard(&mut m);
    let rule = |dst: [u8; 4]| {
        let mut key = FlowKey::ZERO;
        FieldId::NwDst.set(&mut key, u128::from(u32::from_be_bytes(dst)));
        Rule {
            key,
            mask: m,
            outcome: Outcome::Acts(vec![DpAction::Output(2)]),
        }
    };
    let rules = Rules(Arc::new(vec![rule([10, 0, 0, 2]), rule([10, 0, 0, 3])]));
    for emc in [false, true] {
        let mut s = setup(&rules, emc, false);
        let frames: Vec<Vec<u8>> = (0..16u16)
            .map(|i| {
                let dst = [10, 0, 0, 2 + (i % 2) as u8];
                testutil::packets::udp4([10, 0, 0, 1], dst, 1000 + i, 53, 10)
            })
            .collect();
        for pass in 0..2 {
            for f in &frames {
                s.rx[0].inject(f.clone());
            }
            s.pmd.poll_once();
            assert_eq!(s.tx[1].take_tx(), frames, "emc {emc} pass {pass}");
        }
        let flows = s.pmd.dpcls().flows();
        assert_eq!(flows.len(), 2);
        for f in flows {
            assert_eq!(f.stats.snapshot().packets, 16, "emc {emc}");
        }
    }
}
