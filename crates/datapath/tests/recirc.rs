//! `ct` → `recirc` in the PMD: packets take a second datapath pass with the recirculation id
//! and the tracker's conntrack metadata in their key; passes are counted (every pass once
//! among the hit/miss counters); a pipeline that recirculates forever is cut at
//! `MAX_RECIRC_DEPTH` passes, counted, never a hang; buffers all come back.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use datapath::pmd::{ActionTable, Pmd, PmdConfig, Upcall, UpcallError};
use datapath::{
    ActionsId, ConnTracker, CtParams, CtRelease, CtVerdict, DpAction, Dpcls, DpclsConfig,
    MAX_RECIRC_DEPTH,
};
use flow::extract::PacketMeta;
use flow::field::{FieldId, ct_state};
use flow::{FlowKey, FlowMask};
use netdev::{MemHandle, Packet};
use testutil::rng::TestRng;

mod common;

/// A tracker with one rule: the first packet with given bytes is `+new`, later ones `+est`
/// (committed only when the action says `commit`).
#[derive(Default)]
struct SeenTracker {
    seen: HashSet<Vec<u8>>,
}

impl ConnTracker for SeenTracker {
    fn track(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        params: &CtParams,
        _now: u64,
        _released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        let known = self.seen.contains(pkt.data());
        if params.commit {
            self.seen.insert(pkt.data().to_vec());
        }
        md.ct_state = ct_state::TRACKED
            | if known {
                ct_state::ESTABLISHED
            } else {
                ct_state::NEW
            };
        md.ct_zone = params.zone;
        CtVerdict::Continue
    }
}

/// recirc_id 0: `ct(commit,zone=5),recirc(7)`; recirc_id 7: `+new` → port 2, `+est` → port 3.
/// The mask covers recirc_id, in_port and ct_state (what the answer depends on).
struct CtPipeline {
    calls: Arc<AtomicU64>,
}

fn mask_meta() -> FlowMask {
    let mut m = FlowMask::CATCHALL;
    m.w[0] = u64::MAX;
    FieldId::CtState.set_mask(&mut m, u128::from(u32::MAX));
    m
}

impl Upcall for CtPipeline {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let recirc = FieldId::RecircId.get(key) as u32;
        let state = FieldId::CtState.get(key) as u32;
        let acts = match recirc {
            0 => vec![
                DpAction::Ct(CtParams {
                    zone: 5,
                    commit: true,
                    ..CtParams::default()
                }),
                DpAction::Recirc(7),
            ],
            7 if state & ct_state::NEW != 0 => vec![DpAction::Output(2)],
            7 if state & ct_state::ESTABLISHED != 0 => vec![DpAction::Output(3)],
            _ => vec![DpAction::Drop],
        };
        Ok((
            mask_meta(),
            actions.intern(&acts).ok_or(UpcallError::ActionsFull)?,
        ))
    }
}

/// Every pass answers `recirc(id + 1)`: an endless loop the depth limit must cut.
struct Forever;

impl Upcall for Forever {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        let next = FieldId::RecircId.get(key) as u32 + 1;
        let id = actions
            .intern(&[DpAction::Recirc(next)])
            .ok_or(UpcallError::ActionsFull)?;
        Ok((mask_meta(), id))
    }
}

fn pmd_with(up: Box<dyn Upcall>, emc: bool) -> (Pmd, [MemHandle; 3]) {
    let cfg = PmdConfig {
        emc,
        emc_insert_inv_prob: 1,
        pool_size: 256,
        ..PmdConfig::default()
    };
    common::pmd_on_three_ports(cfg, Arc::new(Dpcls::new(DpclsConfig::default())), up)
}

fn frame(i: u8) -> Vec<u8> {
    testutil::packets::udp4([10, 0, 0, 1], [10, 0, 0, i], 1000 + u16::from(i), 53, 10)
}

fn drain(pmd: &mut Pmd, rx: &MemHandle) {
    let mut polls = 0;
    while rx.rx_pending() > 0 {
        pmd.poll_once();
        polls += 1;
        assert!(polls < 10_000, "PMD does not drain");
    }
}

#[test]
fn ct_then_recirc_takes_a_second_pass_with_conntrack_state() {
    for emc in [false, true] {
        let calls = Arc::new(AtomicU64::new(0));
        let (mut pmd, [rx, p2, p3]) = pmd_with(
            Box::new(CtPipeline {
                calls: calls.clone(),
            }),
            emc,
        );
        pmd.set_conntrack(Box::new(SeenTracker::default()));
        // 40 distinct packets, then the same 40 again: first +new (port 2), then +est (3).
        for round in 0..2 {
            for i in 0..40u8 {
                rx.inject(frame(i));
            }
            drain(&mut pmd, &rx);
            let (to2, to3) = (p2.take_tx(), p3.take_tx());
            let want: Vec<Vec<u8>> = (0..40u8).map(frame).collect();
            if round == 0 {
                assert_eq!((to2.len(), to3.len()), (40, 0), "emc {emc}");
                assert_eq!(to2, want);
            } else {
                assert_eq!((to2.len(), to3.len()), (0, 40), "emc {emc}");
                assert_eq!(to3, want);
            }
        }
        let st = pmd.stats();
        assert_eq!(st.packets_received, 80);
        assert_eq!(st.recirculations, 80, "{st:?}");
        assert_eq!(st.classified(), st.packets_received + st.recirculations);
        assert_eq!(st.recirc_dropped, 0);
        // Megaflows: one for recirc 0 (ct_state 0), one per ct_state on recirc 7.
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        let text = st.to_string();
        assert!(text.contains("\n  packet recirculations: 80\n"), "{text}");
        assert!(
            text.contains("\n  avg. datapath passes per packet: 2.00\n"),
            "{text}"
        );
        assert_eq!(pmd.pool().outstanding(), 0);
    }
}

#[test]
fn endless_recirculation_stops_at_the_depth_limit() {
    let (mut pmd, [rx, _, _]) = pmd_with(Box::new(Forever), true);
    for i in 0..50u8 {
        rx.inject(frame(i));
    }
    drain(&mut pmd, &rx);
    let st = pmd.stats();
    let passes_after_first = u64::from(MAX_RECIRC_DEPTH) - 1;
    assert_eq!(st.packets_received, 50);
    assert_eq!(st.recirculations, 50 * passes_after_first, "{st:?}");
    assert_eq!(st.recirc_dropped, 50);
    assert_eq!(st.classified(), st.packets_received + st.recirculations);
    assert_eq!(pmd.pool().outstanding(), 0);
}

/// Every tracker call: bytes, zone, metadata before.
type CallLog = Arc<std::sync::Mutex<Vec<(Vec<u8>, u16, PacketMeta)>>>;

/// A tracker that logs every call (bytes, zone, metadata before) and answers as
/// [`SeenTracker`], so two runs can be compared call for call.
#[derive(Default)]
struct LogTracker {
    seen: SeenTracker,
    log: CallLog,
}

impl ConnTracker for LogTracker {
    fn track(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        params: &CtParams,
        now: u64,
        released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        self.log
            .lock()
            .unwrap()
            .push((pkt.data().to_vec(), params.zone, *md));
        self.seen.track(pkt, md, params, now, released)
    }
}

/// Recirc id r: `ct(commit,zone=r),recirc(r+1)` for r = 0 and, for `+est` packets to an odd
/// address, every r (a chain the depth limit cuts); else `+new` → port 2, `+est` → port 3.
/// With `tail_drop` every `ct,recirc` list ends in `drop` (the same effect through the
/// general executor: the recirculated copy, then the original dropped).
struct ChainPipeline {
    tail_drop: bool,
}

impl Upcall for ChainPipeline {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        let recirc = FieldId::RecircId.get(key) as u32;
        let state = FieldId::CtState.get(key) as u32;
        let odd = FieldId::NwDst.get(key) & 1 == 1;
        let mut acts = if recirc == 0 || (state & ct_state::ESTABLISHED != 0 && odd) {
            vec![
                DpAction::Ct(CtParams {
                    zone: recirc as u16,
                    commit: true,
                    ..CtParams::default()
                }),
                DpAction::Recirc(recirc + 1),
            ]
        } else if state & ct_state::NEW != 0 {
            vec![DpAction::Output(2)]
        } else {
            vec![DpAction::Output(3)]
        };
        if self.tail_drop && acts.len() == 2 {
            acts.push(DpAction::Drop);
        }
        let mut mask = mask_meta();
        FieldId::NwDst.set_mask(&mut mask, u128::from(u32::MAX));
        Ok((mask, actions.intern(&acts).ok_or(UpcallError::ActionsFull)?))
    }
}

/// A PMD over `dpcls` running [`ChainPipeline`] with `tracker`, ports 1 (polled), 2 and 3;
/// returns it with the ports' handles.
fn chain_pmd(
    cfg: PmdConfig,
    dpcls: Arc<Dpcls>,
    tail_drop: bool,
    tracker: Box<dyn ConnTracker>,
) -> (Pmd, [MemHandle; 3]) {
    let (mut pmd, h) =
        common::pmd_on_three_ports(cfg, dpcls, Box::new(ChainPipeline { tail_drop }));
    pmd.set_conntrack(tracker);
    (pmd, h)
}

/// The project's seeded test generator as `rnd(n)`, a number in `0..n`.
fn rng(seed: u32) -> impl FnMut(u32) -> u32 {
    let mut r = TestRng::new(u64::from(seed));
    move |n: u32| r.below(u64::from(n)) as u32
}

/// The PMD's batch path for `ct(...),recirc(id)` flow batches (`ConnTracker::track_batch`)
/// against the general per-packet executor, on random bursts over a few flows: the same
/// tracker calls in the same order, the same frames on each port in the same order, the
/// same counters.
#[test]
fn ct_recirc_batch_path_equals_per_packet_path() {
    let run = |tail_drop: bool, seed: u32| {
        // Hints off: they move second passes from the EMC counter to their own, and this
        // test compares counters exactly (`recirc_hints_change_only_counters` covers them).
        let cfg = PmdConfig {
            emc_insert_inv_prob: 1 + seed % 3,
            pool_size: 4096,
            recirc_hints: false,
            ..PmdConfig::default()
        };
        let log = CallLog::default();
        let (mut pmd, h) = chain_pmd(
            cfg,
            Arc::new(Dpcls::new(DpclsConfig::default())),
            tail_drop,
            Box::new(LogTracker {
                seen: SeenTracker::default(),
                log: log.clone(),
            }),
        );
        let mut rnd = rng(seed);
        let mut out = Vec::new();
        for _ in 0..60 {
            let burst = rnd(41);
            let flows = 1 + rnd(12);
            for _ in 0..burst {
                h[0].inject(frame(rnd(flows) as u8));
            }
            pmd.poll_once();
            out.push((h[1].take_tx(), h[2].take_tx()));
        }
        drain(&mut pmd, &h[0]);
        out.push((h[1].take_tx(), h[2].take_tx()));
        let mut st = pmd.stats().clone();
        assert_eq!(st.classified(), st.packets_received + st.recirculations);
        assert_eq!(pmd.pool().outstanding(), 0);
        (st.idle_cycles, st.processing_cycles, st.upcall_cycles) = (0, 0, 0);
        let calls = log.lock().unwrap().clone();
        (out, st, calls)
    };
    for seed in 1..=40u32 {
        let (out_b, st_b, log_b) = run(false, seed * 7919);
        let (out_g, st_g, log_g) = run(true, seed * 7919);
        assert!(st_b.recirculations > 0, "seed {seed}: {st_b:?}");
        assert_eq!(log_b, log_g, "seed {seed}: tracker calls");
        assert_eq!(out_b, out_g, "seed {seed}: frames out");
        assert_eq!(st_b, st_g, "seed {seed}: counters");
    }
}

/// A tracker whose answers vary along a connection, from the call sequence alone: `+new`
/// first, then mostly `+est`, sometimes `+inv`, a `ct_mark` that changes every 16 packets
/// (so hints are relearned) and now and then the `+snat` bit (a packet a hint must not
/// follow). Logs every call as [`LogTracker`].
#[derive(Default)]
struct MoodyTracker {
    count: std::collections::HashMap<Vec<u8>, u32>,
    log: CallLog,
}

impl ConnTracker for MoodyTracker {
    fn track(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        params: &CtParams,
        _now: u64,
        _released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        self.log
            .lock()
            .unwrap()
            .push((pkt.data().to_vec(), params.zone, *md));
        let c = self.count.entry(pkt.data().to_vec()).or_insert(0);
        md.ct_state = ct_state::TRACKED
            | match *c {
                0 => ct_state::NEW,
                c if c % 7 == 3 => ct_state::INVALID,
                c if c % 5 == 2 => ct_state::ESTABLISHED | ct_state::SRC_NAT,
                _ => ct_state::ESTABLISHED,
            };
        md.ct_zone = params.zone;
        md.ct_mark = *c / 16;
        *c += 1;
        CtVerdict::Continue
    }
}

/// Recirculation hints against full second passes (ARCHITECTURE.md invariant 2 through
/// `ct,recirc`): on random bursts over a few connections, with megaflows removed and the EMC
/// cleared at random between bursts, the same tracker calls, the same frames on each port in
/// the same order, the same flow stats, and the same pass totals — only which counter a
/// second pass lands in may differ.
#[test]
fn recirc_hints_change_only_counters() {
    let run = |hints: bool, seed: u32| {
        let cfg = PmdConfig {
            emc_insert_inv_prob: 1 + seed % 2,
            pool_size: 4096,
            recirc_hints: hints,
            ..PmdConfig::default()
        };
        let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
        let log = CallLog::default();
        let (mut pmd, h) = chain_pmd(
            cfg,
            Arc::clone(&dpcls),
            false,
            Box::new(MoodyTracker {
                count: Default::default(),
                log: log.clone(),
            }),
        );
        let mut rnd = rng(seed);
        let mut out = Vec::new();
        let mut flow_stats = std::collections::BTreeMap::new();
        for _ in 0..80 {
            match rnd(10) {
                0 => {
                    // Remove one megaflow (chosen by key: ufids differ between runs).
                    let mut flows = dpcls.flows();
                    flows.sort_by_key(|f| format!("{:?}", f.key));
                    if !flows.is_empty() {
                        let f = &flows[rnd(flows.len() as u32) as usize];
                        let st = f.stats.snapshot();
                        *flow_stats.entry(format!("{:?}", f.key)).or_insert((0, 0)) =
                            (st.packets, st.bytes);
                        dpcls.remove(f.ufid);
                    }
                }
                1 => {
                    pmd.set_emc(false);
                    pmd.set_emc(true);
                }
                _ => {}
            }
            let burst = rnd(41);
            let flows = 1 + rnd(8);
            for _ in 0..burst {
                h[0].inject(frame(rnd(flows) as u8));
            }
            pmd.poll_once();
            out.push((h[1].take_tx(), h[2].take_tx()));
        }
        drain(&mut pmd, &h[0]);
        out.push((h[1].take_tx(), h[2].take_tx()));
        for f in dpcls.flows() {
            let st = f.stats.snapshot();
            let e = flow_stats.entry(format!("{:?}", f.key)).or_insert((0, 0));
            e.0 += st.packets;
            e.1 += st.bytes;
        }
        let st = pmd.stats().clone();
        assert_eq!(st.classified(), st.packets_received + st.recirculations);
        assert_eq!(pmd.pool().outstanding(), 0);
        let calls = log.lock().unwrap().clone();
        (out, st, calls, flow_stats)
    };
    let (mut hint_hits, mut fused) = (0, 0);
    for seed in 1..=40u32 {
        let (out_a, st_a, log_a, fs_a) = run(false, seed * 104_729);
        let (out_b, st_b, log_b, fs_b) = run(true, seed * 104_729);
        assert_eq!((st_a.recirc_hint_hits, st_a.recirc_fused), (0, 0));
        assert!(st_b.recirc_fused <= st_b.recirc_hint_hits);
        hint_hits += st_b.recirc_hint_hits;
        fused += st_b.recirc_fused;
        // `assert!`, not `assert_eq!`: a difference would print megabytes of frames.
        assert!(log_a == log_b, "seed {seed}: tracker calls differ");
        assert!(out_a == out_b, "seed {seed}: frames out differ");
        assert_eq!(fs_a, fs_b, "seed {seed}: flow stats");
        let total = |s: &datapath::PmdStats| {
            (
                s.packets_received,
                s.recirculations,
                s.recirc_dropped,
                s.tx_packets,
                s.action_drops,
                s.upcall_ok,
                s.flows_installed,
            )
        };
        assert_eq!(total(&st_a), total(&st_b), "seed {seed}");
    }
    assert!(hint_hits > 1000, "hints were hardly used: {hint_hits}");
    // Second passes fused into the first (their flow only outputs) were among them.
    assert!(
        fused > 500,
        "second passes were hardly fused: {fused} of {hint_hits}"
    );
}
