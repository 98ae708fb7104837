//! Recirculation ids and frozen states in a long-running switch (`ofproto::recirc`): held by
//! the ukeys of the megaflows that use or match them, released when the revalidator deletes
//! those, freed after a grace; a recirculating packet resumes in its own state or fails its
//! upcall (counted), never in another state. Time is the bridge's manual clock: no sleeps.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use conntrack::Conntrack;
use conntrack::ipf::{Ipf, IpfConfig};
use datapath::{ActionTable, DpAction, Dpcls, DpclsConfig, Pmd, PmdConfig, Upcall, UpcallError};
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::field::FieldId;
use netdev::{MemHandle, MemPort};
use ofproto::recirc::RECIRC_GRACE_MS;
use ofproto::{Backend, Bridge};
use upcall::ct_adapter::CtAdapter;
use upcall::handler::{OfprotoUpcall, SharedBridge};
use upcall::revalidate::{DEFAULT_MAX_IDLE_MS, PassStats, Revalidator, RevalidatorConfig};

/// Datapath ports of `Bridge::ovs_sandbox(4)`.
const DP_PORTS: [u32; 5] = [1, 2, 3, 4, 100];

struct Switch {
    pmd: Pmd,
    reval: Revalidator,
    shared: Arc<SharedBridge>,
    actions: Arc<ActionTable>,
    ports: Vec<(u32, MemHandle)>,
}

impl Switch {
    /// A PMD over `flows` (real conntrack if `ct`), a revalidator, memory ports, and a
    /// manual clock. `ukeys`: the PMD's upcalls record ukeys for the revalidator.
    fn new(flows: &str, ct: bool, ukeys: bool) -> Switch {
        let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
        br.add_flows_text(flows, 0).expect("flows");
        let shared = SharedBridge::with_manual_clock(br, 1_000);
        let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
        // The action table is append-only and every recirculation id makes a new first-pass
        // action list: room for the big test.
        let actions = Arc::new(ActionTable::new(1 << 18));
        let reval = Revalidator::new(
            shared.clone(),
            dpcls.clone(),
            actions.clone(),
            RevalidatorConfig::default(),
        );
        let up: Box<dyn Upcall> = if ukeys {
            Box::new(reval.upcall())
        } else {
            Box::new(OfprotoUpcall::with_shared(shared.clone()))
        };
        let cfg = PmdConfig {
            pool_size: 256,
            ..PmdConfig::default()
        };
        let mut pmd = Pmd::new(cfg, dpcls, actions.clone(), up);
        if ct {
            let tracker = CtAdapter::new(
                Arc::new(Conntrack::new(conntrack::Config::default())),
                Arc::new(Ipf::new(IpfConfig::default())),
                Arc::new(AtomicU64::new(0)),
            );
            pmd.set_conntrack(Box::new(tracker));
        }
        let mut ports = Vec::new();
        for no in DP_PORTS {
            let p = MemPort::new(format!("p{no}"));
            ports.push((no, p.handle()));
            pmd.add_port(no, Box::new(p), true).expect("port");
        }
        Switch {
            pmd,
            reval,
            shared,
            actions,
            ports,
        }
    }

    fn port(&self, no: u32) -> &MemHandle {
        &self.ports.iter().find(|(n, _)| *n == no).expect("port").1
    }

    /// Sends `frames` into port 1; returns (datapath port, frames out) counts per port.
    fn send(&mut self, frames: impl IntoIterator<Item = Vec<u8>>) -> Vec<(u32, usize)> {
        let rx = self.port(1).clone();
        for f in frames {
            rx.inject(f);
            if rx.rx_pending() >= 32 {
                self.pmd.poll_once();
            }
        }
        while rx.rx_pending() > 0 {
            self.pmd.poll_once();
        }
        self.ports
            .iter()
            .map(|(no, h)| (*no, h.take_tx().len()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    fn now(&self) -> u64 {
        self.shared.now_ms()
    }

    fn pass_after(&mut self, ms: u64) -> PassStats {
        let now = self.now() + ms;
        self.shared.set_now_ms(now);
        self.reval.run(now)
    }

    /// The recirculation id in the actions of the first-pass megaflow of source `src`.
    fn recirc_of(&self, src: [u8; 4]) -> u32 {
        let want = u32::from_be_bytes(src);
        for f in self.pmd.dpcls().flows() {
            if FieldId::NwSrc.get(&f.key) as u32 != want || FieldId::RecircId.get(&f.key) != 0 {
                continue;
            }
            for a in self.actions.get(f.actions()).as_deref().unwrap_or_default() {
                if let DpAction::Recirc(id) = a {
                    return *id;
                }
            }
        }
        panic!("no first-pass megaflow for {src:?}");
    }
}

fn udp(src: [u8; 4]) -> Vec<u8> {
    testutil::packets::udp4(src, [192, 168, 0, 1], 1000, 53, 8)
}

fn src(i: u32) -> [u8; 4] {
    let b = (i + 1).to_be_bytes();
    [10, b[1], b[2], b[3]]
}

/// The datapath key of `frame` recirculated with `recirc_id` (what the PMD upcalls with for
/// its second pass; the placeholder tracker's `+trk+inv` is left out: the pipelines below
/// do not look at it).
fn second_pass_key(frame: &[u8], recirc_id: u32) -> FlowKey {
    let md = PacketMeta {
        recirc_id,
        ..PacketMeta::port(1)
    };
    let mut k = FlowKey::ZERO;
    extract(frame, &md, &mut k);
    k
}

/// A stateful pipeline whose frozen state differs per flow (the source address is moved to
/// `reg0` before `ct(table=1)`), traffic from 100 000 sources in rounds, megaflows expired by
/// the revalidator: every packet is forwarded as the pipeline says, and the frozen states and
/// pooled ids stay bounded by what two rounds use, then return to zero.
#[test]
fn frozen_states_are_bounded_under_churn() {
    const ROUND: u32 = 1_000;
    const ROUNDS: u32 = 100;
    let mut sw = Switch::new(
        "table=0,ip,actions=move:NXM_OF_IP_SRC[]->NXM_NX_REG0[],ct(table=1)\n\
         table=1,ct_state=+trk+new,ip,actions=ct(commit),output:2\n\
         table=1,ct_state=+trk+est,ip,actions=output:2",
        true,
        true,
    );
    let pool = sw.shared.recirc().clone();
    let mut most = 0;
    for r in 0..ROUNDS {
        let frames = (r * ROUND..(r + 1) * ROUND).map(|i| udp(src(i)));
        assert_eq!(sw.send(frames), [(2, ROUND as usize)], "round {r}");
        // The second packet of a few connections: established, through the megaflows.
        let again = (r * ROUND..r * ROUND + 10).map(|i| udp(src(i)));
        assert_eq!(sw.send(again), [(2, 10)], "round {r}");
        let st = sw.pass_after(1);
        assert_eq!(st.removed(), 0, "round {r}: {st:?}");
        most = most.max(pool.stats().known());
        let st = sw.pass_after(DEFAULT_MAX_IDLE_MS + 1);
        assert!(st.removed_idle >= 2 * ROUND as usize, "round {r}: {st:?}");
        assert!(sw.pmd.dpcls().is_empty(), "round {r}");
        most = most.max(pool.stats().known());
    }
    let st = pool.stats();
    assert!(st.allocated >= u64::from(ROUNDS * ROUND), "{st:?}");
    // Each round's states are freed two passes after their megaflows go: at most two rounds
    // (plus the live one) are known at any time.
    assert!(
        most <= 3 * ROUND as usize,
        "{most} states known at once: {st:?}"
    );
    for _ in 0..2 {
        sw.pass_after(RECIRC_GRACE_MS);
    }
    let st = pool.stats();
    assert_eq!((st.live, st.expiring), (0, 0), "{st:?}");
    assert_eq!(st.freed, st.allocated, "{st:?}");
    assert_eq!(sw.shared.read().pooled_recirc_ids(), 0);
    let p = sw.pmd.stats();
    assert_eq!(p.upcall_failed, 0, "{p:?}");
}

/// Two flows freezing different states (reg0 = 1 resumes to port 2, reg0 = 2 to port 3).
const TWO_STATES: &str = "table=0,ip,nw_src=10.0.0.1,actions=load:1->NXM_NX_REG0[],ct(table=1)\n\
     table=0,ip,nw_src=10.0.0.2,actions=load:2->NXM_NX_REG0[],ct(table=1)\n\
     table=1,reg0=1,actions=output:2\n\
     table=1,reg0=2,actions=output:3";

/// Who holds an id: the first-pass megaflow using it and the second-pass megaflow matching
/// it, through their ukeys; idle expiry of both releases it. While released (within its
/// grace) a packet recirculating with it resumes in its own state, and the allocator skips it
/// even when the counter comes round to it; once freed, the upcall fails (counted reason); a
/// reuse of the id after that is for a new state.
#[test]
fn released_id_resumes_its_own_state_or_fails() {
    let mut sw = Switch::new(TWO_STATES, false, true);
    let a = udp([10, 0, 0, 1]);
    let b = udp([10, 0, 0, 2]);
    assert_eq!(sw.send([a.clone()]), [(2, 1)]);
    let x = sw.recirc_of([10, 0, 0, 1]);
    let pool = sw.shared.recirc().clone();
    // Held by the ukeys waiting for adoption, then by the adopted megaflows: two holders.
    sw.pass_after(1);
    assert_eq!(pool.refs(x), 2);
    // Both megaflows idle out: released, not freed.
    let st = sw.pass_after(DEFAULT_MAX_IDLE_MS + 1);
    assert_eq!(st.removed_idle, 2, "{st:?}");
    assert_eq!((pool.refs(x), pool.stats().expiring), (0, 1));
    // A packet still in flight with `x` resumes in its own state (reg0 = 1: port 2).
    let mut up = sw.reval.upcall();
    let (_, aid) = up
        .upcall(&second_pass_key(&a, x), &sw.actions)
        .expect("resumes");
    assert_eq!(
        sw.actions.get(aid).as_deref(),
        Some(&[DpAction::Output(2)][..])
    );
    // The counter comes round to `x`: skipped, b's state gets another id.
    pool.set_next(x);
    assert_eq!(sw.send([b.clone()]), [(3, 1)]);
    let y = sw.recirc_of([10, 0, 0, 2]);
    assert_ne!(x, y);
    // The in-flight upcall's ukey (never installed) is collected; grace runs out: freed.
    sw.pass_after(RECIRC_GRACE_MS);
    sw.pass_after(RECIRC_GRACE_MS);
    sw.pass_after(RECIRC_GRACE_MS);
    assert_eq!(pool.state(x), None, "{:?}", pool.stats());
    match up.upcall(&second_pass_key(&a, x), &sw.actions) {
        Err(UpcallError::Failed(why)) => {
            assert!(why.contains("unknown recirculation id"), "{why}")
        }
        other => panic!("resumed with a freed id: {other:?}"),
    }
    // `b` is still live (its megaflows were just active): its id stays its own.
    assert_eq!(sw.send([b.clone()]), [(3, 1)]);
    // Reused now (for a's state, new again): a packet with `x` resumes in the new state.
    pool.set_next(x);
    assert_eq!(sw.send([a.clone()]), [(2, 1)]);
    assert_eq!(sw.recirc_of([10, 0, 0, 1]), x);
    assert_eq!(sw.pmd.stats().upcall_failed, 0);
}

/// A megaflow left using an id that was freed (here: installed without ukeys, then the grace
/// run out with no revalidator pass): a packet whose second pass misses fails its upcall,
/// counted, and the next revalidator pass deletes both megaflows; traffic then gets a fresh
/// id.
#[test]
fn megaflow_with_a_freed_id_fails_counted_and_is_deleted() {
    // The second pass looks at tp_dst, the first does not.
    let mut sw = Switch::new(
        "table=0,ip,nw_src=10.0.0.1,actions=load:1->NXM_NX_REG0[],ct(table=1)\n\
         table=1,reg0=1,udp,tp_dst=53,actions=output:2\n\
         table=1,reg0=1,actions=output:3",
        false,
        false,
    );
    let a = udp([10, 0, 0, 1]);
    let a54 = testutil::packets::udp4([10, 0, 0, 1], [192, 168, 0, 1], 1000, 54, 8);
    assert_eq!(sw.send([a.clone()]), [(2, 1)]);
    let x = sw.recirc_of([10, 0, 0, 1]);
    let pool = sw.shared.recirc().clone();
    // Nobody holds `x` (no ukeys): released at once; two maintenance runs free it.
    assert_eq!(pool.refs(x), 0);
    pool.run(sw.now());
    pool.run(sw.now() + RECIRC_GRACE_MS);
    assert_eq!(pool.state(x), None);
    // The first pass still hits its megaflow; the second pass misses and cannot resume.
    let failed = sw.pmd.stats().upcall_failed;
    assert_eq!(sw.send([a54.clone()]), []);
    assert_eq!(sw.pmd.stats().upcall_failed, failed + 1);
    // The revalidator finds both stale (the first pass uses `x`, the second matches it):
    // deleted, not revalidated.
    let st = sw.pass_after(RECIRC_GRACE_MS);
    assert_eq!(
        (st.flows, st.removed_failed, st.revalidated),
        (2, 2, 0),
        "{st:?}"
    );
    assert!(sw.pmd.dpcls().is_empty());
    // A fresh upcall, a fresh id, the right state.
    assert_eq!(sw.send([a54.clone()]), [(3, 1)]);
    assert_ne!(sw.recirc_of([10, 0, 0, 1]), x);
}

/// Ids run out: the upcall fails with the reason, counted, the switch goes on; ids freed by
/// the revalidator are available again.
#[test]
fn exhausted_ids_fail_the_upcall_not_the_switch() {
    let mut sw = Switch::new(TWO_STATES, false, true);
    let pool = sw.shared.recirc().clone();
    pool.set_limit(1);
    assert_eq!(sw.send([udp([10, 0, 0, 1])]), [(2, 1)]);
    let mut up = sw.reval.upcall();
    let k = second_pass_key(&udp([10, 0, 0, 2]), 0);
    match up.upcall(&k, &sw.actions) {
        Err(UpcallError::Failed(why)) => assert!(why.contains("ids exhausted"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(sw.send([udp([10, 0, 0, 2])]), []);
    assert_eq!(sw.pmd.stats().upcall_failed, 1);
    assert_eq!(pool.stats().exhausted, 2);
    assert_eq!(
        sw.reval.udpif().counters.snapshot().recirc_ids_exhausted,
        2,
        "counted by the handler"
    );
    sw.pass_after(1);
    sw.pass_after(DEFAULT_MAX_IDLE_MS + 1);
    sw.pass_after(RECIRC_GRACE_MS);
    sw.pass_after(RECIRC_GRACE_MS);
    assert_eq!(pool.stats().known(), 0, "{:?}", pool.stats());
    assert_eq!(sw.send([udp([10, 0, 0, 2])]), [(3, 1)]);
}

/// A flush (`dpctl/del-flows`) deletes every megaflow — adopted or not yet — crediting their
/// last stats, and releases every id; the grace then frees them, and traffic afterwards is
/// translated afresh.
#[test]
fn flush_releases_every_id() {
    let mut sw = Switch::new(TWO_STATES, false, true);
    let pool = sw.shared.recirc().clone();
    // a's megaflows adopted; b's ukeys still waiting in the store.
    assert_eq!(sw.send([udp([10, 0, 0, 1])]), [(2, 1)]);
    sw.pass_after(1);
    assert_eq!(sw.send([udp([10, 0, 0, 2]), udp([10, 0, 0, 2])]), [(3, 2)]);
    assert_eq!(pool.stats().live, 2);
    let now = sw.now();
    assert_eq!(sw.reval.flush(now), 4);
    assert!(sw.pmd.dpcls().is_empty());
    assert_eq!((pool.stats().live, pool.stats().expiring), (0, 2));
    {
        let br = sw.shared.read();
        let mut n: Vec<u64> = (0..2)
            .flat_map(|t| br.table(t).expect("table").iter().map(|(_, r)| r.n_packets))
            .collect();
        n.sort();
        assert_eq!(n, [1, 1, 2, 2], "every megaflow's packets credited");
    }
    sw.pass_after(RECIRC_GRACE_MS);
    sw.pass_after(RECIRC_GRACE_MS);
    assert_eq!(pool.stats().known(), 0, "{:?}", pool.stats());
    assert_eq!(
        sw.send([udp([10, 0, 0, 1]), udp([10, 0, 0, 2])]),
        [(2, 1), (3, 1)]
    );
    assert_eq!(pool.stats().live, 2);
}

/// Concurrency: a PMD thread forwarding traffic from ever new sources (a frozen state per
/// source) while the revalidator expires megaflows, the clock jumps (so ids are released and
/// freed under the traffic) and the allocation counter is moved back again and again (so
/// freed ids are reused at once, for states of the other parity). A packet resumed in another
/// source's state would leave by the other parity's port: none does. (Some upcalls may fail:
/// the clock jumps 700 ms a pass, so an id can be freed two passes after its release while
/// its packet is still on the PMD's side — with a real clock that is ≥ 250 ms. Failing is
/// allowed and counted; resuming elsewhere is not.)
#[test]
fn ids_reused_under_traffic_never_resume_another_state() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let mut sw = Switch::new(
        "table=0,ip,actions=move:NXM_OF_IP_SRC[]->NXM_NX_REG0[],ct(table=1)\n\
         table=1,reg0=0x0/0x1,actions=output:2\n\
         table=1,reg0=0x1/0x1,actions=output:3",
        false,
        true,
    );
    let pool = sw.shared.recirc().clone();
    let rx = sw.port(1).clone();
    let (p2, p3) = (sw.port(2).clone(), sw.port(3).clone());
    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let shared = sw.shared.clone();
    let (pmd, reval) = (&mut sw.pmd, &mut sw.reval);
    const PASSES: u64 = 80;
    let window = AtomicU64::new(0);
    let mut wrong = 0usize;
    let mut out = 0usize;
    let check = |frames: Vec<Vec<u8>>, parity: u8, wrong: &mut usize, out: &mut usize| {
        for f in frames {
            *out += 1;
            if f.get(29).is_none_or(|b| b & 1 != parity) {
                *wrong += 1;
            }
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u32;
            while !stop.load(Ordering::Acquire) {
                // A window of 256 sources moving on by 64 a pass: each source is active for
                // four passes, then idles out (new frozen states keep coming).
                let base = window.load(Ordering::Acquire) as u32 * 64;
                for _ in 0..32 {
                    rx.inject(udp(src(base + i % 256)));
                    i = i.wrapping_add(7);
                }
                sent.fetch_add(32, Ordering::Relaxed);
                let mut polls = 0;
                while rx.rx_pending() > 0 {
                    pmd.poll_once();
                    polls += 1;
                    assert!(polls < 100_000, "the PMD does not drain its port");
                }
            }
        });
        let mut at_last_pass = 0;
        for k in 0..PASSES {
            // Let the PMD make progress between passes (spinning, not sleeping): at least
            // four more bursts since the last pass, each begun after the one before ended,
            // however far ahead the PMD ran while this thread was descheduled (a pass must
            // not follow the last with the PMD stuck inside one burst: the ids released
            // would wait for that burst, rightly, and none would be freed).
            while sent.load(Ordering::Relaxed) < at_last_pass + 128 && !stop.load(Ordering::Acquire)
            {
                std::thread::yield_now();
            }
            at_last_pass = sent.load(Ordering::Relaxed);
            let now = shared.now_ms() + 700;
            shared.set_now_ms(now);
            reval.run(now);
            window.store(k + 1, Ordering::Release);
            if k % 8 == 0 {
                pool.set_next(1);
            }
            check(p2.take_tx(), 0, &mut wrong, &mut out);
            check(p3.take_tx(), 1, &mut wrong, &mut out);
        }
        stop.store(true, Ordering::Release);
    });
    check(p2.take_tx(), 0, &mut wrong, &mut out);
    check(p3.take_tx(), 1, &mut wrong, &mut out);
    let st = pool.stats();
    let p = sw.pmd.stats();
    let sent = sent.load(Ordering::Relaxed);
    eprintln!(
        "sent {sent} out {out} {st:?} upcall_failed {}",
        p.upcall_failed
    );
    assert_eq!(wrong, 0, "packets resumed in another state");
    assert!(st.freed > 0 && st.skipped > 0, "{st:?}");
    assert!(out as u64 > sent / 2, "{p:?}");
}
