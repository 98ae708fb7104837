//! One daemon process from start to exit: what `flowswitch vswitchd` runs.
//!
//! Order of start-up, as `ovs-vswitchd` does it: detach (before any thread), run directory,
//! logging, signal handlers, the pidfile, then the main loop ([`crate::daemon::Daemon`]).
//! The parent of `--detach` exits only once the daemon is ready (pidfile written and the
//! first configuration applied, as OVS), so a script may use the switch as soon as the
//! command returns. Exit on `SIGTERM`, `SIGINT`
//! or `ovs-appctl exit`: listeners closed and their sockets removed, the pidfile last.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::Context;
use tracing::info;

use crate::bridges::DummyMode;
use crate::daemon::{Daemon, Options};
use crate::dp::Datapaths;
use crate::logging::{self, LogHandle, LogOptions};
use crate::metrics::MetricsServer;
use crate::rundir::{self, Detached, Pidfile};
use crate::switch::Switch;
use crate::unixctl::Server;
use std::sync::Arc;
use std::sync::Mutex;
use tracing::warn;

/// How the process was asked to run (OVS's `ovs-vswitchd` options).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `DATABASE` (`unix:PATH`, `tcp:IP:PORT`); default `unix:$OVS_RUNDIR/db.sock`.
    pub db: Option<String>,
    /// `--pidfile[=FILE]`: `Some(None)` is the default path `$OVS_RUNDIR/ovs-vswitchd.pid`.
    pub pidfile: Option<Option<PathBuf>>,
    /// `--detach`.
    pub detach: bool,
    /// `--log-file[=FILE]`: `Some(None)` is `$OVS_LOGDIR/ovs-vswitchd.log`.
    pub log_file: Option<Option<PathBuf>>,
    /// `--unixctl=SOCKET`: default `$OVS_RUNDIR/ovs-vswitchd.<pid>.ctl`.
    pub unixctl: Option<PathBuf>,
    /// `-v`/`--verbose` specs (`module:destination:level`).
    pub verbose: Vec<String>,
    /// `--enable-dummy[=override]`.
    pub dummy: DummyMode,
    /// `--config FILE`: a TOML configuration instead of a database.
    pub config: Option<PathBuf>,
    /// `--metrics=ADDR`: serve Prometheus text on this (loopback) address.
    pub metrics: Option<std::net::SocketAddr>,
    /// A TOML configuration given as text (`flowswitch switch` builds one).
    pub config_toml: Option<String>,
    /// The run directory instead of `$OVS_RUNDIR`.
    pub rundir: Option<PathBuf>,
    /// Flows (`ovs-ofctl add-flows` text) added to a bridge once it exists: `(bridge,
    /// text)`; a flow that does not parse stops the daemon with the error.
    pub flows: Option<(String, String)>,
    /// Every configured interface must open at the first configuration, or the daemon
    /// exits with the reasons (`flowswitch switch`; OVS's daemon keeps running instead and
    /// reports them in `Interface:error`).
    pub strict_ports: bool,
}

impl ServeOptions {
    /// The run directory: [`ServeOptions::rundir`] or OVS's (`$OVS_RUNDIR`).
    pub fn run_dir(&self) -> PathBuf {
        self.rundir.clone().unwrap_or_else(rundir::rundir)
    }

    /// The pidfile path, if one is wanted.
    pub fn pidfile_path(&self) -> Option<PathBuf> {
        self.pidfile.as_ref().map(|p| {
            p.clone()
                .unwrap_or_else(|| self.run_dir().join("ovs-vswitchd.pid"))
        })
    }
}

/// Runs the daemon until it is told to exit.
pub fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    let mut detached = if opts.detach {
        rundir::detach().context("--detach")?
    } else {
        Detached::none()
    };
    match start(&opts) {
        Ok(mut running) => {
            running.run(detached);
            match running.failure.take() {
                Some(e) => Err(anyhow::anyhow!(e)),
                None => Ok(()),
            }
        }
        Err(e) => {
            detached.failed(&format!("{e:#}"));
            Err(e)
        }
    }
}

/// A started daemon, ready to loop. Fields drop in order: control socket and metrics
/// first, the private database, the pidfile last.
struct Running {
    daemon: Daemon,
    /// Flows still to add once their bridge exists ([`ServeOptions::flows`]).
    flows: Option<(String, String)>,
    /// [`ServeOptions::strict_ports`].
    strict_ports: bool,
    /// Why the daemon stopped itself (strict ports), returned by [`serve`].
    failure: Option<String>,
    switch: Arc<Switch>,
    dps: Arc<Mutex<Datapaths>>,
    unixctl: Server,
    _metrics: Option<MetricsServer>,
    /// The configuration events counted for `coverage/show`.
    events: Arc<DaemonEvents>,
    _coverage: CoverageRun,
    _log: LogHandle,
    _private_db: Option<PrivateDb>,
    _pidfile: Option<Pidfile>,
}

/// The `ovsdb-server` started for the embedded default; stopped (and its files removed)
/// with the daemon.
#[derive(Debug)]
struct PrivateDb {
    child: std::process::Child,
    files: Vec<PathBuf>,
}

impl Drop for PrivateDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Where the configuration comes from when no `DATABASE` is given (README, "vswitchd").
enum Embedded {
    /// `$OVS_RUNDIR/db.sock` answers: OVS's default.
    Default,
    /// A private `ovsdb-server` serving OVS's installed schema on `$OVS_RUNDIR/db.sock`,
    /// filled with the built-in default configuration.
    Private(PrivateDb),
    /// No `ovsdb-server` installed: the built-in TOML default.
    Toml,
}

fn embedded(dir: &std::path::Path) -> anyhow::Result<Embedded> {
    let sock = dir.join("db.sock");
    if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
        return Ok(Embedded::Default);
    }
    let (Some(server), Some(tool)) = (find_program("ovsdb-server"), find_program("ovsdb-tool"))
    else {
        return Ok(Embedded::Toml);
    };
    if !std::path::Path::new(OVS_SCHEMA).exists() {
        return Ok(Embedded::Toml);
    }
    let db = dir.join("flowswitch-conf.db");
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_file(&sock);
    let st = std::process::Command::new(tool)
        .arg("create")
        .arg(&db)
        .arg(OVS_SCHEMA)
        .status()
        .context("running ovsdb-tool create")?;
    anyhow::ensure!(st.success(), "ovsdb-tool create {} failed", db.display());
    let child = std::process::Command::new(server)
        .arg("--no-chdir")
        .arg(format!("--remote=punix:{}", sock.display()))
        .arg(format!(
            "--unixctl={}",
            dir.join("flowswitch-ovsdb-server.ctl").display()
        ))
        .arg(format!(
            "--log-file={}",
            dir.join("flowswitch-ovsdb-server.log").display()
        ))
        .arg("-vconsole:off")
        .arg(&db)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("starting a private ovsdb-server")?;
    let private = PrivateDb {
        child,
        files: vec![
            db,
            sock.clone(),
            dir.join("flowswitch-ovsdb-server.log"),
            dir.join("flowswitch-ovsdb-server.ctl"),
            dir.join(".flowswitch-conf.db.~lock~"),
        ],
    };
    let t0 = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        anyhow::ensure!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "the private ovsdb-server did not come up on {}",
            sock.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut c = ovsdb::Client::connect(&format!("unix:{}", sock.display()))?;
    let (cfg, _) = crate::static_config::parse(crate::static_config::DEFAULT_TOML)
        .map_err(|e| anyhow::anyhow!("built-in default: {e}"))?;
    c.transact("Open_vSwitch", crate::writeback::initial_ops(&cfg))
        .context("writing the built-in default configuration")?;
    Ok(Embedded::Private(private))
}

fn start(opts: &ServeOptions) -> anyhow::Result<Running> {
    if let Some((_, text)) = &opts.flows {
        // Checked before anything starts: a typo stops the start, not the running switch.
        let mut scratch = ofproto::Bridge::new("check", ofproto::table::Backend::TupleSpace);
        scratch
            .add_flows_text(text, 0)
            .map_err(|e| anyhow::anyhow!("flows: {e}"))?;
    }
    let dir = opts.run_dir();
    rundir::ensure_dir(&dir).with_context(|| format!("run directory {}", dir.display()))?;
    let mut specs = Vec::new();
    if opts.detach {
        // A detached daemon has no console (OVS: stderr goes to /dev/null).
        specs.push("console:off".to_owned());
    }
    specs.extend(opts.verbose.iter().cloned());
    let log_file = opts.log_file.as_ref().map(|f| {
        f.clone()
            .unwrap_or_else(|| rundir::logdir().join("ovs-vswitchd.log"))
    });
    if let Some(parent) = log_file.as_ref().and_then(|f| f.parent()) {
        rundir::ensure_dir(parent)
            .with_context(|| format!("log directory {}", parent.display()))?;
    }
    let log = logging::init(LogOptions {
        log_file,
        specs,
        modules: [
            "vswitchd", "bridge", "unixctl", "metrics", "ofconn", "ofserver", "dpif", "netdev",
        ]
        .map(String::from)
        .to_vec(),
        ..LogOptions::default()
    })
    .context("setting up logging")?;
    let mut dopts = Options::new(dir.clone());
    if let Some(db) = &opts.db {
        dopts.db = db.clone();
    }
    dopts.dummy = opts.dummy;
    let mut private_db = None;
    let daemon = if let Some(text) = &opts.config_toml {
        let (cfg, problems) =
            crate::static_config::parse(text).map_err(|e| anyhow::anyhow!("configuration: {e}"))?;
        for p in problems {
            tracing::warn!(target: "bridge", "{p}");
        }
        Daemon::with_static_config(dopts, cfg)
    } else if let Some(file) = &opts.config {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let (cfg, problems) = crate::static_config::parse(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        for p in problems {
            tracing::warn!(target: "bridge", "{}: {p}", file.display());
        }
        Daemon::with_static_config(dopts, cfg)
    } else if opts.db.is_some() {
        Daemon::new(dopts)
    } else {
        match embedded(&dir)? {
            Embedded::Default => Daemon::new(dopts),
            Embedded::Private(p) => {
                info!(target: "vswitchd", "no database given and none at {}: serving OVS's schema from a private ovsdb-server there, with the built-in default configuration", dopts.db);
                private_db = Some(p);
                Daemon::new(dopts)
            }
            Embedded::Toml => {
                info!(target: "vswitchd", "no database given and no ovsdb-server installed: running the built-in default configuration (br0 with dummy ports p1, p2)");
                let (cfg, _) = crate::static_config::parse(crate::static_config::DEFAULT_TOML)
                    .map_err(|e| anyhow::anyhow!("built-in default: {e}"))?;
                Daemon::with_static_config(dopts, cfg)
            }
        }
    };
    let exit = daemon.exit_flag();
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, exit.clone()).context("installing signal handlers")?;
    }
    let pidfile = match opts.pidfile_path() {
        Some(p) => Some(Pidfile::create(&p).with_context(|| format!("pidfile {}", p.display()))?),
        None => None,
    };
    let ctl = opts
        .unixctl
        .clone()
        .unwrap_or_else(|| dir.join(format!("ovs-vswitchd.{}.ctl", std::process::id())));
    let unixctl =
        Server::bind(&ctl).with_context(|| format!("control socket {}", ctl.display()))?;
    logging::register_commands(&unixctl, &log);
    let flag = exit.clone();
    unixctl.register("exit", "[--cleanup]", 0, 1, move |args| {
        if args.first().is_some_and(|a| a != "--cleanup") {
            return Err(format!("exit: unknown option {:?}", args[0]));
        }
        flag.store(true, Ordering::Relaxed);
        Ok(String::new())
    });
    let switch = Arc::new(Switch::new(dir.clone()));
    let dps = Arc::new(Mutex::new(Datapaths::new(&daemon.config().knobs)));
    crate::verbs::register_datapath_verbs(&unixctl, &dps);
    crate::verbs::register_bridge_verbs(&unixctl, &switch);
    let events = Arc::new(DaemonEvents::default());
    let coverage = CoverageRun::start(
        &unixctl,
        coverage_totals(events.clone(), unixctl.registry().clone(), dps.clone()),
    );
    let metrics = match opts.metrics {
        Some(addr) => {
            let m = MetricsServer::bind(addr, false, collector(&switch, &dps))
                .with_context(|| format!("metrics endpoint {addr}"))?;
            info!(target: "metrics", "serving Prometheus metrics on http://{}/metrics", m.local_addr());
            Some(m)
        }
        None => None,
    };
    let source = if opts.config_toml.is_some() {
        "configuration from the command line".to_owned()
    } else if let Some(f) = &opts.config {
        format!("configuration {}", f.display())
    } else {
        format!("database {}", daemon.options().db)
    };
    info!(target: "vswitchd", "flowswitch vswitchd started ({source})");
    Ok(Running {
        flows: opts.flows.clone(),
        strict_ports: opts.strict_ports,
        failure: None,
        daemon,
        switch,
        dps,
        unixctl,
        _metrics: metrics,
        events,
        _coverage: coverage,
        _log: log,
        _private_db: private_db,
        _pidfile: pidfile,
    })
}

impl Running {
    /// Loops until told to exit. The `--detach` parent is released once the first
    /// configuration is applied (bridges, datapaths and OpenFlow listeners up), as OVS's
    /// `daemonize_complete` after its first reconfiguration: a script may use the switch as
    /// soon as the command returns.
    fn run(&mut self, mut detached: Detached) {
        let switch = self.switch.clone();
        let dps = self.dps.clone();
        let stats_switch = self.switch.clone();
        let mut flows = self.flows.take();
        let mut strict = self.strict_ports;
        let mut failure = None;
        let exit_flag = self.daemon.exit_flag();
        let counted = self.events.clone();
        self.daemon.run_with(
            |d, events| {
                counted.applied(events);
                if let Some((bridge, text)) = flows.take() {
                    match d.bridges().map.get(&bridge) {
                        Some(rb) => {
                            let now = rb.shared.now_ms();
                            let t = text.clone();
                            match rb.shared.write(move |b| b.add_flows_text(&t, now)) {
                                Ok(n) => info!(target: "bridge", "{bridge}: {n} flows added"),
                                Err(e) => warn!(target: "bridge", "{bridge}: flows: {e}"),
                            }
                            rb.shared.notify();
                        }
                        None => flows = Some((bridge, text)),
                    }
                }
                let problems = lock(&dps).sync(d.bridges(), &d.config().knobs);
                if strict {
                    strict = false;
                    let mut why: Vec<String> = problems
                        .iter()
                        .map(|(_, iface, text)| format!("{iface}: {text}"))
                        .collect();
                    for rb in d.bridges().map.values() {
                        why.extend(rb.failed.values().map(|f| f.error.clone()));
                    }
                    if !why.is_empty() {
                        // Stop before the OpenFlow listeners open: nothing was served.
                        failure = Some(why.join("; "));
                        exit_flag.store(true, Ordering::Relaxed);
                        return;
                    }
                }
                for (bridge, iface, text) in problems {
                    warn!(target: "dpif", "bridge {bridge}: {iface}: {text}");
                }
                for (bridge, text) in lock(&dps).take_attached() {
                    info!(target: "netdev", "bridge {bridge}: {text}");
                }
                d.set_datapath_errors(lock(&dps).failed_ports());
                switch.sync(d.bridges());
                switch.set_vlan_limit(d.config().knobs.effective_vlan_limit());
                let dps = lock(&dps);
                for b in switch.bridges() {
                    use crate::ofconn::OfBridge;
                    let dp = dps.get(b.name());
                    if let Some(dp) = dp {
                        b.set_counters(dp.port_counters());
                    }
                    b.set_execute_queue(dp.map(|dp| dp.execute_queue().clone()));
                }
                drop(dps);
                detached.ready();
            },
            |d| crate::writeback::statistics_ops(d.config(), d.bridges(), &stats_switch),
        );
        self.failure = failure;
        // Told to exit before any configuration arrived: release the parent anyway.
        detached.ready();
        let exit = self.daemon.exit_flag();
        info!(target: "vswitchd", "exiting (exit flag {})", exit.load(Ordering::Relaxed));
        self.unixctl.shutdown();
        self.switch.shutdown();
        for e in lock(&self.dps).shutdown() {
            warn!(target: "dpif", "shutting the datapath down: {e}");
        }
    }
}

pub(crate) fn lock(dps: &Mutex<Datapaths>) -> std::sync::MutexGuard<'_, Datapaths> {
    dps.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a metrics scrape reads: per bridge its OpenFlow rules, per datapath its PMD
/// counters (from the published snapshot: no lock on the packet path).
fn collector(switch: &Arc<Switch>, dps: &Arc<Mutex<Datapaths>>) -> crate::metrics::Collect {
    use crate::metrics::{Family, Kind};
    let (switch, dps) = (switch.clone(), dps.clone());
    Arc::new(move || {
        let mut rules = Family::new(
            "flowswitch_openflow_rules",
            "OpenFlow rules installed, per bridge.",
            Kind::Gauge,
        );
        let mut ports = Family::new(
            "flowswitch_bridge_ports",
            "OpenFlow ports, per bridge.",
            Kind::Gauge,
        );
        let mut pins = Family::new(
            "flowswitch_packet_ins_total",
            "Packet-ins from controller actions, per bridge and outcome: queued for the \
             OpenFlow connections, dropped (queue full), unsent (no server, or frozen state gone).",
            Kind::Counter,
        );
        for b in switch.bridges() {
            use crate::ofconn::OfBridge;
            rules.sample(&[("bridge", b.name())], b.shared().read().n_rules() as f64);
            ports.sample(&[("bridge", b.name())], b.ports().len() as f64);
            let c = &b.shared().packet_ins().counters;
            for (outcome, v) in [
                ("queued", &c.queued),
                ("dropped", &c.dropped),
                ("unsent", &c.unsent),
            ] {
                pins.sample(
                    &[("bridge", b.name()), ("outcome", outcome)],
                    v.load(Ordering::Relaxed) as f64,
                );
            }
        }
        let mut port_fams: Vec<Family> = [
            (
                "flowswitch_port_rx_packets_total",
                "Packets received, per port.",
            ),
            (
                "flowswitch_port_rx_bytes_total",
                "Bytes received, per port.",
            ),
            (
                "flowswitch_port_tx_packets_total",
                "Packets sent, per port.",
            ),
            ("flowswitch_port_tx_bytes_total", "Bytes sent, per port."),
        ]
        .into_iter()
        .map(|(n, h)| Family::new(n, h, Kind::Counter))
        .collect();
        for b in switch.bridges() {
            use crate::ofconn::OfBridge;
            let names: std::collections::BTreeMap<u32, String> =
                b.ports().into_iter().map(|p| (p.port_no, p.name)).collect();
            for st in b.port_stats() {
                let Some(name) = names.get(&st.port_no) else {
                    continue;
                };
                let labels = [("bridge", b.name()), ("port", name.as_str())];
                for (f, v) in port_fams.iter_mut().zip([
                    st.rx_packets,
                    st.rx_bytes,
                    st.tx_packets,
                    st.tx_bytes,
                ]) {
                    f.sample(&labels, v as f64);
                }
            }
        }
        let mut fams = vec![rules, ports, pins];
        fams.append(&mut port_fams);
        type Counter = (&'static str, &'static str, fn(&datapath::PmdStats) -> u64);
        let counters: [Counter; 7] = [
            (
                "flowswitch_pmd_packets_received_total",
                "Packets received by the bridge's datapath thread.",
                |s| s.packets_received,
            ),
            (
                "flowswitch_pmd_emc_hits_total",
                "Exact-match cache hits.",
                |s| s.emc_hits,
            ),
            (
                "flowswitch_pmd_smc_hits_total",
                "Signature-match cache hits.",
                |s| s.smc_hits,
            ),
            (
                "flowswitch_pmd_megaflow_hits_total",
                "Megaflow classifier hits.",
                |s| s.megaflow_hits,
            ),
            (
                "flowswitch_pmd_upcalls_ok_total",
                "Misses answered by an upcall.",
                |s| s.upcall_ok,
            ),
            (
                "flowswitch_pmd_upcalls_failed_total",
                "Misses the upcall could not answer (dropped).",
                |s| s.upcall_failed,
            ),
            (
                "flowswitch_pmd_lost_total",
                "Packets dropped without a classification answer.",
                |s| s.lost,
            ),
        ];
        let snaps: Vec<(String, Arc<datapath::PmdSnapshot>)> = lock(&dps)
            .iter()
            .filter_map(|(b, d)| d.snapshot().map(|s| (b.clone(), s)))
            .collect();
        for (name, help, get) in counters {
            let mut f = Family::new(name, help, Kind::Counter);
            for (b, s) in &snaps {
                f.sample(&[("bridge", b)], get(&s.stats) as f64);
            }
            fams.push(f);
        }
        fams
    })
}

/// Configuration events for `coverage/show`, counted by the main loop as it applies them.
#[derive(Debug, Default)]
struct DaemonEvents {
    reconfigures: AtomicU64,
    ports_added: AtomicU64,
    ports_removed: AtomicU64,
}

impl DaemonEvents {
    fn applied(&self, events: &[crate::bridges::Event]) {
        use crate::bridges::Event;
        self.reconfigures.fetch_add(1, Ordering::Relaxed);
        for e in events {
            match e {
                Event::PortAdded { .. } => self.ports_added.fetch_add(1, Ordering::Relaxed),
                Event::PortRemoved { .. } => self.ports_removed.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
        }
    }
}

/// The coverage events' totals now: what each of [`crate::coverage::EVENTS`] counts.
type Totals = Box<dyn Fn() -> Vec<(&'static str, u64)> + Send>;

fn coverage_totals(
    events: Arc<DaemonEvents>,
    unixctl: Arc<crate::unixctl::Registry>,
    dps: Arc<Mutex<Datapaths>>,
) -> Totals {
    Box::new(move || {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (mut installed, mut limit_hits, mut upcall_failed) = (0, 0, 0);
        for (_, dp) in lock(&dps).iter() {
            if let Some(c) = dp.upcall_counters() {
                installed += c.installed;
                limit_hits += c.flow_limit_hits;
            }
            if let Some(s) = dp.snapshot() {
                upcall_failed += s.stats.upcall_failed;
            }
        }
        let (added, removed) = (get(&events.ports_added), get(&events.ports_removed));
        vec![
            // A configuration from the database applied to the bridges.
            ("bridge_reconfigure", get(&events.reconfigures)),
            // An OpenFlow port added or removed.
            ("ofproto_update_port", added + removed),
            ("dpif_port_add", added),
            ("dpif_port_del", removed),
            // A megaflow installed by an upcall.
            ("dpif_flow_put", installed),
            // An upcall's megaflow not installed: the datapath was at its flow limit.
            ("upcall_flow_limit_hit", limit_hits),
            // A packet dropped because its upcall failed.
            ("datapath_drop_upcall_error", upcall_failed),
            // A control request run, and answered.
            ("unixctl_received", get(&unixctl.received)),
            ("unixctl_replied", get(&unixctl.replied)),
        ]
    })
}

/// The thread that samples the coverage events every [`crate::coverage::INTERVAL`] (OVS's
/// main loop runs `coverage_run` as often), and the verbs that read them.
struct CoverageRun {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CoverageRun {
    fn start(unixctl: &Server, totals: Totals) -> CoverageRun {
        use crate::coverage::{Coverage, INTERVAL};
        let cov = Arc::new(Mutex::new(Coverage::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let c = cov.clone();
        unixctl.register("coverage/show", "", 0, 0, move |_| {
            Ok(c.lock().unwrap_or_else(|e| e.into_inner()).show())
        });
        let c = cov.clone();
        unixctl.register("coverage/read-counter", "COUNTER", 1, 1, move |a| {
            let total = c.lock().unwrap_or_else(|e| e.into_inner()).total(&a[0]);
            total
                .map(|t| format!("{t}\n"))
                .ok_or_else(|| "No such counter".to_owned())
        });
        let (c, flag) = (cov, stop.clone());
        let thread = std::thread::Builder::new()
            .name("coverage".into())
            .spawn(move || {
                let mut next = std::time::Instant::now() + INTERVAL;
                while !flag.load(Ordering::Relaxed) {
                    let now = std::time::Instant::now();
                    if now < next {
                        std::thread::sleep((next - now).min(std::time::Duration::from_millis(100)));
                        continue;
                    }
                    next += INTERVAL;
                    let t = totals();
                    c.lock().unwrap_or_else(|e| e.into_inner()).sample(&t);
                }
            })
            .map_err(|e| warn!(target: "vswitchd", "coverage sampler not started: {e}"))
            .ok();
        CoverageRun { stop, thread }
    }
}

impl Drop for CoverageRun {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
