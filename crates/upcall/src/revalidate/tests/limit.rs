//! Tests of the flow limit, drop megaflows for failed translations and the install-time
//! staleness check (included in `revalidate`'s test module: they use its `Harness`).

use super::*;
use std::time::Duration;

/// Above the current limit, answers forward the packet but install nothing; the pass then
/// shortens idle time, and above twice the limit deletes every flow.
#[test]
fn flow_limit_stops_installs_and_shrinks_idle() {
    // A rule per source port makes one megaflow per frame: 4 go in, the rest are answered
    // only.
    let rules: String = (0..10)
        .map(|i| format!("priority=20,udp,tp_src={},actions=output:2\n", 1000 + i))
        .collect();
    let mut h = Harness::new(bridge(&rules), true, true, RevalidatorConfig::default());
    let limit = &h.reval.udpif().limit;
    limit.set_ceiling(4).expect("ceiling");
    let frames: Vec<Vec<u8>> = (0..10u8).map(|i| udp(1000 + u16::from(i))).collect();
    for f in &frames {
        let (got, want) = h.send_check(1, f);
        assert_eq!(got, want);
    }
    let st = h.pmd.stats().clone();
    let c = h.reval.udpif().counters.snapshot();
    assert_eq!(
        (st.flows_installed, st.flows_not_installed),
        (4, 6),
        "{st:?}"
    );
    assert_eq!(
        (c.answered, c.installed, c.flow_limit_hits),
        (10, 4, 6),
        "{c:?}"
    );
    assert_eq!(h.pmd.dpcls().len(), 4);
    // Still forwarded (slow path) on the next round.
    for f in &frames {
        let (got, want) = h.send_check(1, f);
        assert_eq!(got, want);
    }

    // 4 flows at a limit of 4: not over, so the normal idle time applies.
    h.advance(FLOW_LIMIT_MAX_IDLE_MS + 1);
    let st = h.revalidate();
    assert!(!st.flow_limit_idle && st.removed() == 0, "{st:?}");
    // Lower the limit under the flow count: flows idle for 100 ms go.
    h.reval.udpif().limit.set_ceiling(3).expect("ceiling");
    h.advance(FLOW_LIMIT_MAX_IDLE_MS + 1);
    h.send(1, &frames[0]); // keeps one active
    let st = h.revalidate();
    assert!(st.flow_limit_idle && !st.flow_limit_killed, "{st:?}");
    assert_eq!(st.removed_idle, 3, "{st:?}");
    assert_eq!(h.pmd.dpcls().len(), 1);
    assert_eq!(h.reval.udpif().limit.n_flows(), 1);

    // More than twice the limit: everything goes, active or not.
    h.reval.udpif().limit.set_ceiling(1_000).expect("ceiling");
    h.reval.udpif().limit.set_current(1_000);
    for f in &frames {
        h.send(1, f);
    }
    assert_eq!(h.pmd.dpcls().len(), 10);
    h.reval.udpif().limit.set_ceiling(4).expect("ceiling");
    for f in &frames {
        h.send(1, f);
    }
    let st = h.revalidate();
    assert!(st.flow_limit_killed, "{st:?}");
    assert_eq!(st.removed(), 10, "{st:?}");
    assert!(h.pmd.dpcls().is_empty());
    // And packets still get through.
    let (got, want) = h.send_check(1, &frames[3]);
    assert_eq!(got, want);
}

/// A translation that fails installs a drop megaflow: later packets of the flow hit it
/// instead of translating again, and the revalidator keeps it while the failure stands.
#[test]
fn failed_translation_installs_a_drop_megaflow() {
    for (emc, smc) in TIERS {
        let mut h = Harness::new(
            bridge("priority=10,udp,actions=resubmit(,0)\npriority=5,icmp,actions=output:2"),
            emc,
            smc,
            RevalidatorConfig::default(),
        );
        let f = udp(9);
        for _ in 0..5 {
            assert!(h.send(1, &f).is_empty());
        }
        let st = h.pmd.stats().clone();
        let c = h.reval.udpif().counters.snapshot();
        assert_eq!((st.upcall_ok, st.upcall_failed), (1, 0), "{st:?}");
        assert_eq!((c.xlate_errors, c.installed), (1, 1), "{c:?}");
        assert_eq!(h.pmd.dpcls().len(), 1);
        let st = h.revalidate();
        let st2 = h.reval.run_full(h.now());
        assert_eq!((st.removed(), st2.removed()), (0, 0), "{st:?} {st2:?}");
        // Fixing the table replaces the drop megaflow at the next pass.
        h.shared
            .flow_mod_text(
                FlowModCommand::ModifyStrict,
                "priority=10,udp,actions=output:3",
            )
            .expect("mod");
        let st = h.revalidate();
        assert_eq!(st.removed_changed, 1, "{st:?}");
        let (got, want) = h.send_check(1, &f);
        assert_eq!(got, want);
        assert_eq!(ports_of(&got), [3]);
    }
}

/// An upcall that stands in for a handler racing with a flow mod: the tables change after
/// the translation and before the install.
struct RacingUpcall {
    inner: OfprotoUpcall,
    shared: Arc<SharedBridge>,
    flow_mod: Option<String>,
}

impl datapath::Upcall for RacingUpcall {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(flow::FlowMask, datapath::ActionsId), datapath::UpcallError> {
        let r = self.inner.upcall(key, actions);
        if let Some(fm) = self.flow_mod.take() {
            self.shared
                .flow_mod_text(FlowModCommand::ModifyStrict, &fm)
                .expect("mod");
        }
        r
    }

    fn may_install(&mut self) -> bool {
        self.inner.may_install()
    }

    fn installed(&mut self, flow: &DpFlow) -> bool {
        self.inner.installed(flow)
    }
}

/// A megaflow translated before a flow mod and installed after it is revoked at once (OVS's
/// `reval_seq` check at install), with no revalidator pass in between: the packet that
/// raced runs the old answer, the next one gets the new.
#[test]
fn install_after_a_change_is_revoked() {
    for (emc, smc) in TIERS {
        let mut h = Harness::new(
            bridge("priority=10,udp,actions=output:2"),
            emc,
            smc,
            RevalidatorConfig::default(),
        );
        let racing = RacingUpcall {
            inner: h.reval.upcall(),
            shared: h.shared.clone(),
            flow_mod: Some("priority=10,udp,actions=output:3".into()),
        };
        let dpcls = h.pmd.dpcls().clone();
        let (pmd, ports) = pmd_on_dp_ports((emc, smc, 128), dpcls, &h.actions, Box::new(racing));
        h.pmd = pmd;
        h.ports = ports;
        let f = udp(5);
        assert_eq!(
            ports_of(&h.send(1, &f)),
            [2],
            "the racing packet: old answer"
        );
        assert!(h.pmd.dpcls().is_empty(), "revoked");
        let st = h.pmd.stats().clone();
        assert_eq!((st.flows_installed, st.installs_revoked), (1, 1), "{st:?}");
        assert_eq!(h.reval.udpif().counters.snapshot().revoked_stale, 1);
        for _ in 0..3 {
            let (got, want) = h.send_check(1, &f);
            assert_eq!(got, want);
            assert_eq!(ports_of(&got), [3]);
        }
        assert_eq!(h.pmd.stats().installs_revoked, 1);
    }
}

/// A PMD (EMC on, SMC off) with a memory port on every datapath port, whose upcalls go to
/// a pool of `n` revalidator threads over `shared` passing at least every `period`.
fn pmd_under_pool(
    shared: &Arc<SharedBridge>,
    n: usize,
    period: Duration,
    pool_size: usize,
) -> (Pmd, Vec<(u32, MemHandle)>, Arc<Dpcls>, RevalidatorPool) {
    let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
    let actions = Arc::new(ActionTable::new(1 << 12));
    let pool = RevalidatorPool::spawn(
        shared.clone(),
        dpcls.clone(),
        actions.clone(),
        RevalidatorConfig::default(),
        n,
        period,
    )
    .expect("spawn");
    let (pmd, handles) = pmd_on_dp_ports(
        (true, false, pool_size),
        dpcls.clone(),
        &actions,
        Box::new(pool.upcall()),
    );
    (pmd, handles, dpcls, pool)
}

/// Sends `frame` in on the first port and runs the PMD dry; the ports it went out on.
fn send_ports(pmd: &mut Pmd, handles: &[(u32, MemHandle)], frame: &[u8]) -> Vec<u32> {
    handles[0].1.inject(frame.to_vec());
    while pmd.poll_once() > 0 {}
    let mut out = Vec::new();
    for (no, h) in handles {
        out.extend(h.take_tx().into_iter().map(|_| *no));
    }
    out
}

/// Revalidator threads sharded over one datapath: `wait` returns only after a whole pass
/// that saw the change, on every shard; `purge` empties the datapath.
#[test]
fn pool_wait_and_purge() {
    for n in [1, 3] {
        let shared = SharedBridge::with_manual_clock(bridge("priority=10,udp,actions=output:2"), 1);
        let (mut pmd, handles, dpcls, pool) =
            pmd_under_pool(&shared, n, Duration::from_secs(3600), 128);
        assert_eq!(pool.len(), n);
        let send = |pmd: &mut Pmd, f: &[u8]| send_ports(pmd, &handles, f);
        let frames: Vec<Vec<u8>> = (0..20).map(|i| udp(2000 + i)).collect();
        for f in &frames {
            assert_eq!(send(&mut pmd, f), [2]);
        }
        shared
            .flow_mod_text(FlowModCommand::Modify, "udp,actions=output:3")
            .expect("mod");
        pool.wait();
        for f in &frames {
            assert_eq!(send(&mut pmd, f), [3], "after wait, {n} revalidators");
        }
        assert!(!dpcls.is_empty());
        pool.purge();
        assert!(dpcls.is_empty(), "{n} revalidators");
        let show = pool.udpif().show("netdev@ovs-netdev");
        assert_eq!(show.matches(": (keys ").count(), n, "{show}");
        pool.stop();
    }
}

/// ARCHITECTURE.md invariant 3 under real races: a PMD forwarding (and upcalling) on this
/// thread, flow mods on another, two revalidator threads passing after every change. Once
/// the flow mods stop and `revalidator/wait` returns, every packet is forwarded exactly as
/// a fresh translation on the final tables says (no NORMAL here, so sending changes no
/// state a translation depends on).
#[test]
fn racing_upcalls_flow_mods_and_revalidators_converge() {
    let rules = |out: &[u16; 4]| -> Vec<String> {
        vec![
            format!("priority=30,udp,tp_dst=53,actions=output:{}", out[0]),
            format!("priority=20,udp,nw_dst=10.0.0.2,actions=output:{}", out[1]),
            format!("priority=10,udp,actions=output:{}", out[2]),
            format!("priority=5,ip,actions=output:{}", out[3]),
        ]
    };
    let (mut revoked, mut upcalls) = (0, 0);
    for seed in 0..6u64 {
        let mut rng = TestRng::new(seed);
        let shared = SharedBridge::with_manual_clock(bridge(&rules(&[1, 2, 3, 4]).join("\n")), 1);
        let (mut pmd, handles, _dpcls, pool) =
            pmd_under_pool(&shared, 2, Duration::from_millis(5), 256);
        let frames: Vec<Vec<u8>> = (0..64u16)
            .map(|i| {
                let dst = [10, 0, 0, 2 + (i % 3) as u8];
                let dport = if i % 4 == 0 { 53 } else { 1000 + i };
                testutil::packets::udp4([10, 0, 0, 1], dst, 5000 + i, dport, 10)
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let mods = {
            let (shared, stop) = (shared.clone(), stop.clone());
            let mut rng = TestRng::new(seed ^ 0xabcd);
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) || n < 50 {
                    let out: [u16; 4] = std::array::from_fn(|_| rng.range(1, 4) as u16);
                    let rule = &rules(&out)[rng.below(4) as usize];
                    shared
                        .flow_mod_text(FlowModCommand::ModifyStrict, rule)
                        .expect("mod");
                    n += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        };
        for _ in 0..20_000 {
            let f = &frames[rng.below(frames.len() as u64) as usize];
            send_ports(&mut pmd, &handles, f);
        }
        stop.store(true, Ordering::Relaxed);
        mods.join().expect("flow-mod thread");
        pool.wait();
        for f in &frames {
            let mut key = FlowKey::ZERO;
            extract(f, &PacketMeta::port(1), &mut key);
            let input = shared
                .xlate_in(&key, shared.now_ms(), false)
                .expect("input");
            let out = xlate_ro(&shared.read(), &input);
            let (mut want, _) = dp_answer(&out);
            want.retain(|a| *a != datapath::DpAction::Drop);
            let got: Vec<datapath::DpAction> = send_ports(&mut pmd, &handles, f)
                .into_iter()
                .map(datapath::DpAction::Output)
                .collect();
            assert_eq!(
                got, want,
                "seed {seed}: stale answer after revalidator/wait"
            );
        }
        let st = pmd.stats();
        assert_eq!(st.classified(), st.packets_received + st.recirculations);
        revoked += st.installs_revoked;
        upcalls += st.upcall_ok;
        pool.stop();
    }
    eprintln!("{upcalls} upcalls, {revoked} installs revoked as stale");
    assert!(upcalls > 100, "the flow mods did not keep the caches busy");
}
