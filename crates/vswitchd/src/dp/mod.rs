//! The daemon's datapath side: one userspace datapath per running bridge, its threads, its
//! ports, and the text of the datapath control verbs.
//!
//! # One datapath per bridge
//!
//! OVS has a single `ovs-netdev` datapath (one per datapath type: `netdev`, and `dummy`
//! in its test suite) for every userspace bridge: one classifier per PMD thread, one port
//! number space, one connection tracker, every bridge's ports polled by the same threads,
//! and `ofproto-dpif` telling the bridges apart by the datapath in_port of each upcall. Here
//! each [`RunningBridge`] gets its own [`Datapath`]: its own classifier, action table,
//! revalidators and thread, its upcalls answered by its own [`SharedBridge`]. That is what
//! flowswitch's upcall path supports today (a handler and a revalidator translate through
//! *one* bridge), and it keeps bridges independent: adding a port to one stops only that
//! bridge's thread. What OVS users see is kept: datapath port numbers come from one
//! daemon-wide space ([`crate::bridges`] allocates them), and the verbs print one datapath
//! per type (`dpctl/show` sums the bridges of a type under `dummy@ovs-dummy` or
//! `netdev@ovs-netdev`). Patch ports between bridges, and one conntrack zone space across
//! bridges, would need the single datapath; the connection tracker is already shared by all
//! bridges ([`Datapaths`] owns it), as OVS's is.
//!
//! # Threads
//!
//! Each datapath runs one [`PmdThread`] polling every port of the bridge. Without
//! `other_config:pmd-cpu-mask` it is not pinned and parks when idle (woken by each
//! injection): OVS polls non-PMD ports (`dummy`, `internal`, `system`) on its main thread,
//! which sleeps in its poll loop, and a busy-polling thread per bridge on a 2-core machine
//! would take a core from everything else. With a mask the thread is pinned to one CPU of
//! the mask (bridges in name order take the CPUs in turn) and polls without pause, as an
//! OVS PMD thread does; the verbs then print it as `pmd thread numa_id 0 core_id N`, and
//! an unpinned one as OVS's `main thread`.
//!
//! Beside it, the revalidators ([`RevalidatorPool`], `n-revalidator-threads`, default 1):
//! a pass at least every 500 ms (OVS's `ofproto_max_revalidator`) and right after every
//! change signalled on the bridge ([`SharedBridge::changes`]: flow mods through the shared
//! bridge, MAC-table changes by upcalls), so a flow mod reaches cached megaflows within
//! one pass. A pass pushes megaflow stats to the OpenFlow rules (`n_packets` of
//! `ovs-ofctl dump-flows`), expires megaflows idle for `max-idle` (10 s) and OpenFlow
//! timeouts, and fixes or deletes megaflows a flow mod made stale.
//!
//! # Ports while running
//!
//! [`Datapath::sync_ports`] takes the datapath to the bridge's interfaces: new ones added,
//! gone ones removed, ones whose options changed re-opened (their queued frames kept). Like
//! OVS's PMD reload, the thread is stopped and joined (it finishes the burst it is in, its
//! outputs sent), the ports are changed on the returned [`Pmd`], and it is spawned again
//! with its caches and counters. Frames queued on the other ports wait in their queues
//! meanwhile; none is lost.
//!
//! # Ports
//!
//! Every interface is a [`port::DummyPort`] (see there for `tx_pcap`, `rxq_pcap`, `pcap`
//! and flowswitch's `flowswitch-rx-pcap`). [`Datapaths::netdev_dummy_receive`] is the verb
//! `netdev-dummy/receive PORT FRAME...` (frames in hex).

pub mod port;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime};

use conntrack::Conntrack;
use conntrack::ipf::{Ipf, IpfConfig};
use datapath::dpctl::{DpPortInfo, DpShow, KeyFormat, PmdPerf, PortNames};
use datapath::{ActionTable, Dpcls, DpclsConfig, Pmd, PmdConfig, PmdThread, PmdThreadConfig};
use netdev::MAX_FRAME;
use upcall::ct_adapter::CtAdapter;
use upcall::handler::SharedBridge;
use upcall::revalidate::{DEFAULT_PERIOD_MS, RevalidatorConfig, RevalidatorPool};

use crate::bridges::{Bridges, RunningBridge};
use crate::config::DpKnobs;
use port::{DummyHandle, MIN_FRAME, PortSpec};

/// How long control verbs wait for a thread (a clear, a drain).
const VERB_WAIT: Duration = Duration::from_secs(5);

/// Longest an idle, unpinned datapath thread sleeps before it looks at its ports again.
const IDLE_PARK: Duration = Duration::from_millis(100);

/// What the datapaths of every bridge share: the connection tracker and its fragment
/// reassembler (OVS: one per datapath, and one datapath serves every bridge).
#[derive(Debug, Clone)]
pub struct DpShared {
    /// The connection tracker.
    pub ct: Arc<Conntrack>,
    /// IP fragment reassembly.
    pub ipf: Arc<Ipf>,
    /// Milliseconds added to the tracker's clock (0 in the daemon).
    pub offset_ms: Arc<AtomicU64>,
}

impl Default for DpShared {
    fn default() -> Self {
        DpShared {
            ct: Arc::new(Conntrack::new(conntrack::Config::default())),
            ipf: Arc::new(Ipf::new(IpfConfig::default())),
            offset_ms: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// The CPUs of a `pmd-cpu-mask`, ascending.
pub fn mask_cpus(mask: u128) -> Vec<usize> {
    (0..128).filter(|b| mask >> b & 1 == 1).collect()
}

/// One datapath port.
#[derive(Debug)]
struct DpPort {
    no: u32,
    spec: PortSpec,
    counters: Arc<port::SharedCounters>,
    /// Dummy ports only.
    dummy: Option<DummyHandle>,
}

/// The datapath of one bridge (module doc).
pub struct Datapath {
    bridge: String,
    dp_type: String,
    shared: Arc<SharedBridge>,
    dpcls: Arc<Dpcls>,
    actions: Arc<ActionTable>,
    reval: Option<RevalidatorPool>,
    thread: Option<PmdThread>,
    core: Option<usize>,
    ports: BTreeMap<String, DpPort>,
    /// Reloads done (port changes while running).
    reloads: u64,
    /// What real ports attached, how, since last taken ([`Datapath::take_attached`]).
    attached: Vec<String>,
    /// Interfaces that could not be opened, with why (retried at each port change).
    failed: BTreeMap<String, String>,
    /// VLAN headers the PMD parses ([`DpKnobs::effective_vlan_limit`]).
    vlan_limit: u8,
    /// The PMD's execute queue (packet-outs); the PMD keeps it across restarts.
    exec: Arc<datapath::ExecuteQueue>,
}

impl std::fmt::Debug for Datapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datapath")
            .field("bridge", &self.bridge)
            .field("core", &self.core)
            .field("ports", &self.ports)
            .field("reloads", &self.reloads)
            .finish_non_exhaustive()
    }
}

/// A port that opened with a problem (it works without what failed), or could not be
/// changed: `(interface, text)`.
pub type PortProblem = (String, String);

impl Datapath {
    /// The datapath of `rb`: its ports opened, its thread (pinned to `core` if given) and
    /// revalidators started. Problems opening ports are returned beside it (those ports
    /// work without what failed).
    pub fn new(
        rb: &RunningBridge,
        knobs: &DpKnobs,
        core: Option<usize>,
        env: &DpShared,
    ) -> Result<(Datapath, Vec<PortProblem>), String> {
        let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
        let actions = Arc::new(ActionTable::new(1 << 16));
        let rcfg = RevalidatorConfig {
            max_idle_ms: knobs
                .max_idle_ms
                .unwrap_or(upcall::revalidate::DEFAULT_MAX_IDLE_MS),
            ..RevalidatorConfig::default()
        };
        let reval = RevalidatorPool::spawn(
            rb.shared.clone(),
            dpcls.clone(),
            actions.clone(),
            rcfg,
            knobs.n_revalidators.unwrap_or(1).max(1),
            Duration::from_millis(DEFAULT_PERIOD_MS),
        )
        .map_err(|e| format!("bridge {}: cannot start the revalidators: {e}", rb.name))?;
        if let Some(limit) = knobs.flow_limit {
            // A bad value (0) keeps OVS's default.
            let _ = reval.udpif().limit.set_ceiling(limit);
        }
        let cfg = PmdConfig {
            emc_insert_inv_prob: knobs
                .emc_insert_inv_prob
                .unwrap_or(datapath::emc::DEFAULT_EMC_INSERT_INV_PROB),
            smc: knobs.smc_enable.unwrap_or(false),
            core_id: core.map_or(0, |c| c as u32),
            vlan_limit: knobs.effective_vlan_limit(),
            ..PmdConfig::default()
        };
        let mut pmd = Pmd::new(
            cfg,
            dpcls.clone(),
            actions.clone(),
            Box::new(reval.upcall()),
        );
        pmd.set_conntrack(Box::new(CtAdapter::new(
            env.ct.clone(),
            env.ipf.clone(),
            env.offset_ms.clone(),
        )));
        let exec = pmd.execute_queue().clone();
        let mut dp = Datapath {
            exec,
            bridge: rb.name.clone(),
            dp_type: dp_type_name(&rb.cfg.datapath_type).to_owned(),
            shared: rb.shared.clone(),
            dpcls,
            actions,
            reval: Some(reval),
            thread: None,
            core,
            ports: BTreeMap::new(),
            reloads: 0,
            attached: Vec::new(),
            failed: BTreeMap::new(),
            vlan_limit: cfg.vlan_limit,
        };
        let problems = dp.apply_ports(&mut pmd, rb);
        dp.thread = Some(dp.spawn(pmd)?);
        Ok((dp, problems))
    }

    fn thread_cfg(&self) -> PmdThreadConfig {
        PmdThreadConfig {
            core: self.core,
            // Real ports wake the sleeping thread through their descriptors
            // (`netdev::wait`); dummy ports through the injection's wake.
            idle_park: self.core.is_none().then_some(IDLE_PARK),
            ..PmdThreadConfig::default()
        }
    }

    fn spawn(&self, pmd: Pmd) -> Result<PmdThread, String> {
        PmdThread::spawn(pmd, self.thread_cfg()).map_err(|e| format!("bridge {}: {e}", self.bridge))
    }

    /// Takes the ports of `pmd` (stopped) to `rb`'s interfaces; returns the problems.
    fn apply_ports(&mut self, pmd: &mut Pmd, rb: &RunningBridge) -> Vec<PortProblem> {
        let mut problems = Vec::new();
        let want = wanted_ports(rb);
        self.failed.retain(|n, _| want.contains_key(n.as_str()));
        let gone: Vec<String> = self
            .ports
            .iter()
            .filter(|(n, p)| {
                want.get(n.as_str())
                    .is_none_or(|(no, spec)| *no != p.no || *spec != p.spec)
            })
            .map(|(n, _)| n.clone())
            .collect();
        // Queues of re-opened ports (same name, same number), carried over.
        let mut queues = BTreeMap::new();
        for name in gone {
            let Some(p) = self.ports.remove(&name) else {
                continue;
            };
            if let Some(old) = pmd.remove_port(p.no)
                && want.get(name.as_str()).is_some_and(|(no, _)| *no == p.no)
            {
                drop(old);
                if let Some(h) = p.dummy {
                    queues.insert(name, h);
                }
            }
        }
        for (name, (no, spec)) in want {
            if self.ports.contains_key(name) {
                continue;
            }
            let rx = queues.remove(name).map(|h| h.rx_queue());
            let opened = match port::open_port(name, &spec, rx) {
                Ok(o) => o,
                Err(e) => {
                    self.failed.insert(name.to_owned(), e.clone());
                    problems.push((name.to_owned(), e));
                    continue;
                }
            };
            self.failed.remove(name);
            problems.extend(opened.problems.into_iter().map(|e| (name.to_owned(), e)));
            if let Some(info) = &opened.info {
                self.attached.push(info.clone());
            }
            if let Err(e) = pmd.add_port(no, opened.port, true) {
                problems.push((name.to_owned(), format!("{name}: {e}")));
                continue;
            }
            self.ports.insert(
                name.to_owned(),
                DpPort {
                    no,
                    spec,
                    counters: opened.counters,
                    dummy: opened.dummy,
                },
            );
        }
        problems
    }

    /// Takes the datapath's ports to `rb`'s interfaces: adds what is new, removes what is
    /// gone, re-opens what changed (module doc: a reload). Nothing happens if nothing
    /// changed. Returns the problems (ports work without what failed); an `Err` means the
    /// thread could not be stopped or restarted and the datapath is down.
    pub fn sync_ports(&mut self, rb: &RunningBridge) -> Result<Vec<PortProblem>, String> {
        let want = wanted_ports(rb);
        let same = want.len() == self.ports.len()
            && want.iter().all(|(n, (no, spec))| {
                self.ports
                    .get(*n)
                    .is_some_and(|p| p.no == *no && p.spec == *spec)
            });
        if same {
            return Ok(Vec::new());
        }
        let mut pmd = self.stop_thread()?;
        let problems = self.apply_ports(&mut pmd, rb);
        self.thread = Some(self.spawn(pmd)?);
        self.reloads += 1;
        Ok(problems)
    }

    fn stop_thread(&mut self) -> Result<Pmd, String> {
        let t = self
            .thread
            .take()
            .ok_or_else(|| format!("bridge {}: the datapath thread is down", self.bridge))?;
        t.join().map_err(|e| format!("bridge {}: {e}", self.bridge))
    }

    /// Interfaces that could not be opened, with why.
    pub fn failed_ports(&self) -> &BTreeMap<String, String> {
        &self.failed
    }

    /// What real ports attached since the last call, and how (for the log).
    pub fn take_attached(&mut self) -> Vec<String> {
        std::mem::take(&mut self.attached)
    }

    /// The bridge.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// The datapath type as OVS names it (`netdev` or `dummy`).
    pub fn dp_type(&self) -> &str {
        &self.dp_type
    }

    /// The CPU the thread was pinned to (`None`: unpinned, shown as OVS's main thread;
    /// if the OS refused the pinning the thread runs unpinned, see [`Datapath::pinning`]).
    pub fn core(&self) -> Option<usize> {
        self.core
    }

    /// Whether the thread was asked to be pinned (it may have failed: see
    /// [`Datapath::pinning`]).
    pub fn pinned(&self) -> bool {
        self.core.is_some()
    }

    /// What the thread's pinning came to.
    pub fn pinning(&self) -> Option<&datapath::Pinning> {
        self.thread.as_ref().map(|t| t.pinning())
    }

    /// Port reloads so far.
    pub fn reloads(&self) -> u64 {
        self.reloads
    }

    /// Whether the thread runs.
    pub fn running(&self) -> bool {
        self.thread.is_some()
    }

    /// Datapath ports: `(interface name, number)`, by name.
    pub fn ports(&self) -> Vec<(String, u32)> {
        self.ports.iter().map(|(n, p)| (n.clone(), p.no)).collect()
    }

    /// Each port's published counters, by port name.
    pub fn port_counters(&self) -> BTreeMap<String, Arc<port::SharedCounters>> {
        self.ports
            .iter()
            .map(|(n, p)| (n.clone(), p.counters.clone()))
            .collect()
    }

    /// Whether interface `name` is a port of this datapath.
    pub fn has_port(&self, name: &str) -> bool {
        self.ports.contains_key(name)
    }

    /// Queues `frames` to be received on port `name` (all or none) and wakes the thread:
    /// `netdev-dummy/receive` for frames already decoded. Errors: unknown port (OVS's
    /// text), a frame shorter than an Ethernet header or longer than a packet buffer, a
    /// full queue.
    pub fn receive_frames(&self, name: &str, frames: &[Vec<u8>]) -> Result<(), String> {
        let h = self
            .ports
            .get(name)
            .and_then(|p| p.dummy.as_ref())
            .ok_or_else(|| format!("no such dummy netdev {name:?}"))?;
        check_frames(frames)?;
        h.receive(frames)?;
        if let Some(t) = &self.thread {
            t.wake();
        }
        Ok(())
    }

    /// [`Datapath::receive_frames`] of one frame.
    pub fn receive(&self, name: &str, frame: &[u8]) -> Result<(), String> {
        self.receive_frames(name, &[frame.to_vec()])
    }

    /// Waits (up to `timeout`) until every frame queued so far has been received and
    /// processed (its outputs sent); false on timeout or a stopped thread.
    pub fn drain(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let Some(t) = &self.thread else {
            return false;
        };
        while self
            .ports
            .values()
            .any(|p| p.dummy.as_ref().is_some_and(|h| h.pending() > 0))
        {
            if Instant::now() >= deadline {
                return false;
            }
            t.wake();
            std::thread::sleep(Duration::from_micros(200));
        }
        // The burst that took the last frames ends before any later publish.
        let mark = Instant::now();
        t.wake();
        t.wait_for(deadline.saturating_duration_since(Instant::now()), |s| {
            s.at > mark
        })
        .is_some()
    }

    /// The thread's latest counters (`None` if the thread is down).
    pub fn snapshot(&self) -> Option<Arc<datapath::PmdSnapshot>> {
        self.thread.as_ref().map(|t| t.snapshot())
    }

    /// `revalidator/wait`: returns after a whole revalidator pass started after the call.
    pub fn revalidator_wait(&self) {
        if let Some(r) = &self.reval {
            r.wait();
        }
    }

    /// `revalidator/purge`: every megaflow deleted, its stats pushed first.
    pub fn revalidator_purge(&self) {
        if let Some(r) = &self.reval {
            r.purge();
        }
    }

    /// The queue of packets to execute on the datapath thread (OpenFlow packet-out): the
    /// same for the datapath's life, through thread restarts.
    pub fn execute_queue(&self) -> &Arc<datapath::ExecuteQueue> {
        &self.exec
    }

    /// The shared bridge.
    pub fn shared(&self) -> &Arc<SharedBridge> {
        &self.shared
    }

    /// The classifier.
    pub fn dpcls(&self) -> &Arc<Dpcls> {
        &self.dpcls
    }

    /// Stops the thread and the revalidators, flushing and closing every port (pcap files
    /// complete). Returns the thread's final counters.
    pub fn shutdown(mut self) -> Result<datapath::PmdStats, String> {
        self.shutdown_inner()
    }

    fn shutdown_inner(&mut self) -> Result<datapath::PmdStats, String> {
        let r = self.stop_thread().map(|pmd| {
            let s = pmd.stats().clone();
            drop(pmd); // ports dropped: files flushed and closed
            s
        });
        if let Some(rv) = self.reval.take() {
            rv.stop();
        }
        self.ports.clear();
        r
    }

    /// Header of this datapath's thread in `pmd-stats-show`: OVS's `main thread:` when
    /// unpinned, else `pmd thread numa_id 0 core_id N:`.
    fn thread_header(&self) -> String {
        match self.core() {
            Some(c) => format!("pmd thread numa_id 0 core_id {c}:"),
            None => "main thread:".to_owned(),
        }
    }

    /// This datapath's `dpif-netdev/pmd-stats-show` block (no trailing newline).
    pub fn pmd_stats_show(&self) -> String {
        let Some(s) = self.snapshot() else {
            return format!("{}: datapath thread down", self.bridge);
        };
        let text = s.stats.to_string();
        let body = text.split_once('\n').map_or("", |(_, b)| b);
        format!("{}\n{body}", self.thread_header())
    }

    /// `dpif-netdev/pmd-stats-clear` for this datapath: waits until the thread has cleared.
    pub fn pmd_stats_clear(&self) -> Result<(), String> {
        let t = self
            .thread
            .as_ref()
            .ok_or_else(|| format!("bridge {}: the datapath thread is down", self.bridge))?;
        t.clear_stats_wait(VERB_WAIT)
            .map(drop)
            .ok_or_else(|| format!("bridge {}: the datapath thread did not clear", self.bridge))
    }

    /// This datapath's `dpif-netdev/pmd-rxq-show` block: only for a pinned thread (OVS
    /// lists PMD threads only; non-PMD ports, polled by the main thread, are not shown).
    pub fn pmd_rxq_show(&self) -> String {
        let Some(core) = self.core() else {
            return String::new();
        };
        let mut out = format!("pmd thread numa_id 0 core_id {core}:\n  isolated : false\n");
        let mut ports: Vec<(&String, &DpPort)> = self.ports.iter().collect();
        ports.sort_by_key(|(_, p)| p.no);
        for (name, _) in &ports {
            let _ = writeln!(
                out,
                "  port: {name:<16}  queue-id: {:2} (enabled)   pmd usage: NOT AVAIL",
                0
            );
        }
        if !ports.is_empty() {
            out.push_str("  overhead: NOT AVAIL\n");
        }
        out
    }

    /// This datapath's `dpif-netdev/pmd-perf-show` text: only for a pinned thread (OVS
    /// shows PMD threads only).
    pub fn pmd_perf_show(&self) -> String {
        let (Some(core), Some(s)) = (self.core(), self.snapshot()) else {
            return String::new();
        };
        let mut p = PmdPerf::from_pmd_stats(&s.stats);
        p.core_id = core as u32;
        p.duration_s = s.elapsed().as_secs_f64();
        p.time = wall_time();
        p.sleep_iterations = s.parks;
        p.to_string()
    }

    /// Lookup counters for `dpctl/show`: `(hit, missed, lost, flows)`.
    fn lookups(&self) -> (u64, u64, u64, u64) {
        let flows = self.dpcls.flows().iter().filter(|f| !f.is_dead()).count() as u64;
        let Some(s) = self.snapshot() else {
            return (0, 0, 0, flows);
        };
        let st = &s.stats;
        (
            st.emc_hits + st.smc_hits + st.megaflow_hits + st.recirc_hint_hits,
            st.upcall_ok + st.upcall_failed,
            st.upcall_failed,
            flows,
        )
    }

    fn port_infos(&self) -> Vec<DpPortInfo> {
        self.ports
            .iter()
            .map(|(n, p)| DpPortInfo {
                no: p.no,
                name: n.clone(),
                kind: p.spec.kind.clone(),
                config: Vec::new(),
            })
            .collect()
    }

    /// This datapath's `dpctl/dump-flows` group: a header (`flow-dump from the main
    /// thread:` or `flow-dump from pmd on cpu core: N`) and one line per megaflow, sorted;
    /// `more` (`-m`): each line starts with its ufid and `in_port` names the port. Empty
    /// when there is no flow.
    pub fn dump_flows(&self, more: bool) -> String {
        let now_ms = netdev::tsc::now() / (netdev::tsc::hz() / 1000).max(1);
        let names: PortNames = self.ports.iter().map(|(n, p)| (p.no, n.clone())).collect();
        let fmt = KeyFormat {
            port_names: more.then_some(&names),
            vlan_limit: usize::from(self.vlan_limit),
        };
        let mut lines: Vec<String> = self
            .dpcls
            .flows()
            .iter()
            .filter(|f| !f.is_dead())
            .map(|f| {
                let actions = datapath::dpctl::flow_actions_text(&self.actions, f);
                let line = datapath::dpctl::format_dp_flow(f, now_ms, &actions, &fmt);
                if more {
                    format!("ufid:{}, {line}", datapath::dpctl::ufid_text(f.ufid.0))
                } else {
                    line
                }
            })
            .collect();
        if lines.is_empty() {
            return String::new();
        }
        lines.sort();
        let header = match self.core() {
            Some(c) => format!("flow-dump from pmd on cpu core: {c}"),
            None => "flow-dump from the main thread:".to_owned(),
        };
        let mut out = header + "\n";
        for l in lines {
            out += &l;
            out.push('\n');
        }
        out
    }

    /// This datapath's `upcall/show` block under the name `dp`.
    pub fn upcall_show(&self, dp: &str) -> String {
        self.reval
            .as_ref()
            .map(|r| r.udpif().show(dp))
            .unwrap_or_default()
    }

    /// The upcall handler's counters (`None` before the datapath runs).
    pub fn upcall_counters(&self) -> Option<upcall::udpif::UpcallCountersSnapshot> {
        self.reval.as_ref().map(|r| r.udpif().counters.snapshot())
    }
}

impl Drop for Datapath {
    fn drop(&mut self) {
        if self.thread.is_some() || self.reval.is_some() {
            let _ = self.shutdown_inner();
        }
    }
}

/// `netdev` and `dummy` as OVS names the datapath types (`""` and `system` are the kernel
/// datapath, which the daemon does not have; their bridges run userspace, shown as
/// `netdev`).
fn dp_type_name(t: &str) -> &str {
    match t {
        "dummy" => "dummy",
        _ => "netdev",
    }
}

/// The bridge's interfaces as ports: name → (datapath number, spec).
fn wanted_ports(rb: &RunningBridge) -> BTreeMap<&str, (u32, PortSpec)> {
    let empty = BTreeMap::new();
    rb.ifaces
        .values()
        .map(|i| {
            let options = rb
                .cfg
                .ports
                .values()
                .flat_map(|p| &p.interfaces)
                .find(|c| c.name == i.name)
                .map_or(&empty, |c| &c.options);
            (
                i.name.as_str(),
                (i.dp_port, PortSpec::from_iface(i.backend, options)),
            )
        })
        .collect()
}

fn check_frames(frames: &[Vec<u8>]) -> Result<(), String> {
    for f in frames {
        if f.len() < MIN_FRAME {
            return Err(format!(
                "frame of {} bytes is shorter than an Ethernet header ({MIN_FRAME} bytes)",
                f.len()
            ));
        }
        if f.len() > MAX_FRAME {
            return Err(format!(
                "frame of {} bytes exceeds the {MAX_FRAME}-byte maximum",
                f.len()
            ));
        }
    }
    Ok(())
}

/// A frame in hex (OVS's `netdev-dummy/receive` form; whitespace is not allowed inside one
/// argument, as in OVS) → bytes. The error starts with OVS's `syntax error at ARG`.
pub fn parse_hex_frame(arg: &str) -> Result<Vec<u8>, String> {
    let why = if arg.is_empty() {
        Some("empty frame")
    } else if !arg.bytes().all(|b| b.is_ascii_hexdigit()) {
        Some("not hex digits (OVS's flow syntax is not supported)")
    } else if !arg.len().is_multiple_of(2) {
        Some("odd number of hex digits")
    } else {
        None
    };
    if let Some(why) = why {
        let shown: String = arg.chars().take(40).collect();
        return Err(format!("syntax error at {shown} ({why})"));
    }
    Ok(arg
        .as_bytes()
        .chunks(2)
        .map(|p| {
            let h = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            h(p[0]) << 4 | h(p[1])
        })
        .collect())
}

/// `HH:MM:SS.mmm` (UTC), as `pmd-perf-show` prints its `Time:`.
fn wall_time() -> String {
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let s = t.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        t.subsec_millis()
    )
}

/// The datapaths of every running bridge, and the verbs over all of them.
#[derive(Debug, Default)]
pub struct Datapaths {
    map: BTreeMap<String, Datapath>,
    knobs: DpKnobs,
    env: DpShared,
}

impl Datapaths {
    /// No datapath yet; `knobs` as configured.
    pub fn new(knobs: &DpKnobs) -> Datapaths {
        Datapaths {
            knobs: knobs.clone(),
            ..Datapaths::default()
        }
    }

    /// What the datapaths share (the connection tracker).
    pub fn env(&self) -> &DpShared {
        &self.env
    }

    /// The CPU for the datapath of the `index`-th bridge (name order), from the mask.
    fn core_for(&self, index: usize) -> Option<usize> {
        let cpus = mask_cpus(self.knobs.pmd_cpu_mask?);
        (!cpus.is_empty()).then(|| cpus[index % cpus.len()])
    }

    /// Takes the datapaths to the running bridges and `knobs`: a datapath started for each
    /// new bridge, stopped for each one gone, ports synchronised on the others
    /// ([`Datapath::sync_ports`]). A changed `pmd-cpu-mask` (or another knob) restarts
    /// every datapath. Returns the problems as `(bridge, interface or "", text)`.
    pub fn sync(&mut self, bridges: &Bridges, knobs: &DpKnobs) -> Vec<(String, String, String)> {
        let mut problems = Vec::new();
        if *knobs != self.knobs {
            self.knobs = knobs.clone();
            for (_, dp) in std::mem::take(&mut self.map) {
                if let Err(e) = dp.shutdown() {
                    problems.push((String::new(), String::new(), e));
                }
            }
        }
        let gone: Vec<String> = self
            .map
            .keys()
            .filter(|b| !bridges.map.contains_key(*b))
            .cloned()
            .collect();
        for b in gone {
            if let Some(dp) = self.map.remove(&b)
                && let Err(e) = dp.shutdown()
            {
                problems.push((b, String::new(), e));
            }
        }
        for (i, (name, rb)) in bridges.map.iter().enumerate() {
            let r = match self.map.get_mut(name) {
                Some(dp) => dp.sync_ports(rb),
                None => {
                    let core = self.core_for(i);
                    Datapath::new(rb, &self.knobs, core, &self.env).map(|(dp, p)| {
                        self.map.insert(name.clone(), dp);
                        p
                    })
                }
            };
            match r {
                Ok(p) => problems.extend(p.into_iter().map(|(i, e)| (name.clone(), i, e))),
                Err(e) => problems.push((name.clone(), String::new(), e)),
            }
        }
        problems
    }

    /// Interfaces that could not be opened, on every datapath: name → why.
    pub fn failed_ports(&self) -> BTreeMap<String, String> {
        self.map
            .values()
            .flat_map(|dp| dp.failed_ports().clone())
            .collect()
    }

    /// What real ports attached since the last call, and how: `(bridge, text)`.
    pub fn take_attached(&mut self) -> Vec<(String, String)> {
        self.map
            .iter_mut()
            .flat_map(|(b, dp)| dp.take_attached().into_iter().map(|t| (b.clone(), t)))
            .collect()
    }

    /// The datapath of `bridge`.
    pub fn get(&self, bridge: &str) -> Option<&Datapath> {
        self.map.get(bridge)
    }

    /// Every datapath, by bridge name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Datapath)> {
        self.map.iter()
    }

    /// The datapath with port `name`.
    fn with_port(&self, name: &str) -> Result<&Datapath, String> {
        self.map
            .values()
            .find(|d| d.has_port(name))
            .ok_or_else(|| "no such dummy netdev".to_owned())
    }

    /// Frames into port `name` (any bridge): see [`Datapath::receive_frames`].
    pub fn receive(&self, name: &str, frame: &[u8]) -> Result<(), String> {
        self.with_port(name)?.receive(name, frame)
    }

    /// `netdev-dummy/receive PORT FRAME...`: every frame (hex) parsed and checked first,
    /// then all queued on the port; `Ok("")` as OVS replies. Errors: OVS's `no such dummy
    /// netdev`, `syntax error at …` (with why), a frame too short or too long, OVS's
    /// `--qid`/`--len` (not supported).
    pub fn netdev_dummy_receive(&self, args: &[&str]) -> Result<String, String> {
        let [port, frames @ ..] = args else {
            return Err("\"netdev-dummy/receive\" command requires at least 2 arguments".into());
        };
        if frames.is_empty() {
            return Err("\"netdev-dummy/receive\" command requires at least 2 arguments".into());
        }
        let dp = self.with_port(port)?;
        let mut parsed = Vec::with_capacity(frames.len());
        for a in frames {
            if a.starts_with("--") {
                return Err(format!("{a}: not supported by flowswitch"));
            }
            parsed.push(parse_hex_frame(a)?);
        }
        dp.receive_frames(port, &parsed)?;
        Ok(String::new())
    }

    /// Waits until every queued frame of every datapath has been processed.
    pub fn drain(&self, timeout: Duration) -> bool {
        self.map.values().all(|d| d.drain(timeout))
    }

    /// The name OVS gives the datapath of type `t`.
    fn dp_name(t: &str) -> String {
        format!("{t}@ovs-{t}")
    }

    /// `dpif-netdev/pmd-stats-show`: pinned threads (by core), then unpinned ones (OVS's
    /// `main thread:`), one block per bridge; each block ends with a newline.
    pub fn pmd_stats_show(&self) -> String {
        let mut dps: Vec<&Datapath> = self.map.values().collect();
        dps.sort_by_key(|d| (d.core().is_none(), d.core()));
        dps.iter().map(|d| d.pmd_stats_show() + "\n").collect()
    }

    /// `dpif-netdev/pmd-stats-clear`: every thread's counters zeroed; `""` as OVS replies.
    pub fn pmd_stats_clear(&self) -> Result<String, String> {
        for d in self.map.values() {
            d.pmd_stats_clear()?;
        }
        Ok(String::new())
    }

    /// `dpif-netdev/pmd-rxq-show`.
    pub fn pmd_rxq_show(&self) -> String {
        let mut out = "Displaying last 60 seconds pmd usage %\n".to_owned();
        let mut dps: Vec<&Datapath> = self.map.values().collect();
        dps.sort_by_key(|d| d.core());
        for d in dps {
            out += &d.pmd_rxq_show();
        }
        out
    }

    /// `dpif-netdev/pmd-perf-show` (empty without pinned threads, as OVS with no PMD).
    pub fn pmd_perf_show(&self) -> String {
        let mut dps: Vec<&Datapath> = self.map.values().collect();
        dps.sort_by_key(|d| d.core());
        dps.iter().map(|d| d.pmd_perf_show()).collect()
    }

    /// `dpctl/show`: one datapath per type, as OVS shows it (its bridges' counters summed,
    /// their ports together; port 0 is the datapath's own, `ovs-<type>`).
    pub fn dpctl_show(&self) -> String {
        let mut by_type: BTreeMap<&str, DpShow> = BTreeMap::new();
        for d in self.map.values() {
            let t = d.dp_type();
            let s = by_type.entry(t).or_insert_with(|| DpShow {
                name: Self::dp_name(t),
                hit: 0,
                missed: 0,
                lost: 0,
                flows: 0,
                ports: vec![DpPortInfo {
                    no: 0,
                    name: format!("ovs-{t}"),
                    kind: "dummy-internal".into(),
                    config: Vec::new(),
                }],
            });
            let (hit, missed, lost, flows) = d.lookups();
            s.hit += hit;
            s.missed += missed;
            s.lost += lost;
            s.flows += flows;
            s.ports.extend(d.port_infos());
        }
        by_type.values().map(|s| s.to_string()).collect()
    }

    /// `dpctl/dump-flows [-m] [DP]`: each datapath's group ([`Datapath::dump_flows`]);
    /// `DP` (`dummy@ovs-dummy`, `netdev@ovs-netdev`) keeps the bridges of that type.
    pub fn dpctl_dump_flows(&self, args: &[&str]) -> Result<String, String> {
        let mut more = false;
        let mut only: Option<&str> = None;
        for a in args {
            match *a {
                "-m" | "--more" => more = true,
                dp if dp.contains('@') => only = Some(dp),
                _ => return Err(format!("dpctl/dump-flows: unsupported argument {a:?}")),
            }
        }
        Ok(self
            .map
            .values()
            .filter(|d| only.is_none_or(|n| Self::dp_name(d.dp_type()) == n))
            .map(|d| d.dump_flows(more))
            .collect())
    }

    /// `upcall/show`: a block per bridge, named as OVS names the datapath (with `/BRIDGE`
    /// when several bridges share a type).
    pub fn upcall_show(&self) -> String {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for d in self.map.values() {
            *count.entry(d.dp_type()).or_default() += 1;
        }
        self.map
            .values()
            .map(|d| {
                let mut name = Self::dp_name(d.dp_type());
                if count[d.dp_type()] > 1 {
                    name = format!("{name}/{}", d.bridge());
                }
                d.upcall_show(&name)
            })
            .collect()
    }

    /// `revalidator/wait`: every datapath revalidated after the call; `""`.
    pub fn revalidator_wait(&self) -> String {
        for d in self.map.values() {
            d.revalidator_wait();
        }
        String::new()
    }

    /// `revalidator/purge`: every megaflow of every datapath deleted; `""`.
    pub fn revalidator_purge(&self) -> String {
        for d in self.map.values() {
            d.revalidator_purge();
        }
        String::new()
    }

    /// Stops every datapath (threads joined, pcap files complete); the errors, if any.
    pub fn shutdown(&mut self) -> Vec<String> {
        std::mem::take(&mut self.map)
            .into_values()
            .filter_map(|d| d.shutdown().err())
            .collect()
    }
}
