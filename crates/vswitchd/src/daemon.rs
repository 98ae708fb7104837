//! The daemon's life: the OVSDB session, reconciliation, write-back and a clean exit.
//!
//! [`Daemon::step`] is one turn of the main loop: wait (bounded) for database updates,
//! read the configuration ([`crate::config`]), take the running bridges to it
//! ([`crate::bridges`]), start or stop what the changes need, and write back what OVS's
//! `ovs-vswitchd` writes ([`crate::writeback`]). A refused or lost write-back is retried on
//! the next turn; a lost database connection is re-established by the session with backoff
//! and the replica rebuilt, so restarting `ovsdb-server` under a running daemon loses
//! nothing: the running bridges stay as they are until the new replica says otherwise.
//!
//! [`Daemon::run`] loops until [`Daemon::exit_flag`] is raised (`SIGTERM`, `SIGINT`,
//! `ovs-appctl exit`), then drops everything in order: listeners closed and their sockets
//! removed, the pidfile last.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ovsdb::Session;
use serde_json::Value;
use tracing::{info, warn};

use crate::bridges::{Bridges, DummyMode, Event};
use crate::config::{self, Config};
use crate::writeback;

/// How often interface statistics are written to the database (OVS's default
/// `other_config:stats-update-interval`).
pub const STATS_INTERVAL: Duration = Duration::from_secs(5);

/// How the daemon was asked to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The database: `unix:PATH` or `tcp:IP:PORT` (OVS's default `unix:$RUNDIR/db.sock`).
    pub db: String,
    /// Run directory (sockets, pidfile).
    pub rundir: PathBuf,
    /// How interface kinds map to backends (`--enable-dummy`).
    pub dummy: DummyMode,
}

impl Options {
    /// OVS's defaults for `rundir`.
    pub fn new(rundir: PathBuf) -> Options {
        Options {
            db: format!("unix:{}", rundir.join("db.sock").display()),
            rundir,
            dummy: DummyMode::Off,
        }
    }
}

/// The running daemon (see the module doc).
/// Where the configuration comes from.
#[derive(Debug)]
enum Source {
    /// A database (the normal case).
    Db(Box<Session>),
    /// A fixed configuration (`--config FILE.toml`, the built-in default): applied once,
    /// nothing written back.
    Static {
        /// The configuration.
        cfg: Box<Config>,
        /// Already applied?
        applied: bool,
    },
}

#[derive(Debug)]
pub struct Daemon {
    opts: Options,
    source: Source,
    bridges: Bridges,
    cfg: Config,
    exit: Arc<AtomicBool>,
    problems: Vec<String>,
    /// Write-back still owed (a transaction failed, or the configuration changed).
    dirty: bool,
    writebacks: u64,
    /// Configurations applied so far.
    applied: u64,
    /// Interfaces the datapath could not open, with why ([`Daemon::set_datapath_errors`]).
    dp_errors: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    /// `dp_errors` changed since the last write-back.
    dp_errors_dirty: AtomicBool,
}

impl Daemon {
    /// A daemon for `opts` (it connects on the first [`Daemon::step`]).
    pub fn new(opts: Options) -> Daemon {
        let session = Session::new(&opts.db, "Open_vSwitch", config::monitor_spec());
        Daemon {
            bridges: Bridges::new(opts.dummy),
            opts,
            source: Source::Db(Box::new(session)),
            cfg: Config::default(),
            exit: Arc::new(AtomicBool::new(false)),
            problems: Vec::new(),
            dirty: true,
            writebacks: 0,
            applied: 0,
            dp_errors: Default::default(),
            dp_errors_dirty: AtomicBool::new(false),
        }
    }

    /// A daemon running the fixed configuration `cfg` (no database).
    pub fn with_static_config(opts: Options, cfg: Config) -> Daemon {
        let mut d = Daemon::new(opts);
        d.source = Source::Static {
            cfg: Box::new(cfg),
            applied: false,
        };
        d
    }

    /// Raised to make [`Daemon::run`] return.
    pub fn exit_flag(&self) -> Arc<AtomicBool> {
        self.exit.clone()
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// The running bridges.
    pub fn bridges(&self) -> &Bridges {
        &self.bridges
    }

    /// The configuration last applied.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Write-back transactions committed so far.
    pub fn writebacks(&self) -> u64 {
        self.writebacks
    }

    /// Is the database connected?
    pub fn connected(&self) -> bool {
        match &self.source {
            Source::Db(s) => s.is_connected(),
            Source::Static { .. } => true,
        }
    }

    /// One turn of the main loop without listeners: [`Daemon::poll`], then
    /// [`Daemon::write_back`].
    pub fn step(&mut self, timeout: Duration) -> Vec<Event> {
        let events = self.poll(timeout);
        self.write_back();
        events
    }

    /// Waits at most `timeout` for database updates and takes the running bridges to the
    /// configuration; returns the bridge and port events (the caller starts and stops
    /// listeners on them before [`Daemon::write_back`] tells the database).
    pub fn poll(&mut self, timeout: Duration) -> Vec<Event> {
        let session = match &mut self.source {
            Source::Db(s) => s,
            Source::Static { cfg, applied } => {
                if *applied {
                    std::thread::sleep(timeout);
                    return Vec::new();
                }
                *applied = true;
                let cfg = (**cfg).clone();
                return self.apply(cfg, Vec::new());
            }
        };
        match session.poll(timeout) {
            Ok(changed) => self.dirty |= changed,
            Err(e) => {
                warn!(target: "bridge", "database {}: {e}", self.opts.db);
                return Vec::new();
            }
        }
        let changes = session.take_changes();
        self.dirty |= !changes.is_empty();
        if !self.dirty || !session.is_connected() {
            return Vec::new();
        }
        let Some(db) = session.replica() else {
            return Vec::new();
        };
        let (cfg, problems) = Config::from_db(db);
        if self.applied > 0 && cfg.requests() == self.cfg.requests() {
            // Only our own write-back (or nothing we read) changed: keep what runs, note
            // what the database now says.
            self.cfg = cfg;
            return Vec::new();
        }
        self.apply(cfg, problems)
    }

    fn apply(&mut self, cfg: Config, problems: Vec<config::Problem>) -> Vec<Event> {
        self.applied += 1;
        let problems: Vec<String> = problems.into_iter().map(|p| p.0).collect();
        for p in problems.iter().filter(|p| !self.problems.contains(p)) {
            warn!(target: "bridge", "{p}");
        }
        self.problems = problems;
        let events = self.bridges.reconcile(&cfg);
        for e in &events {
            info!(target: "bridge", "{}", describe(e));
        }
        self.cfg = cfg;
        events
    }

    /// Records the interfaces the datapath could not open (name → why): written back as
    /// `ofport` −1 and `error`, as OVS reports an interface it cannot open. Replaces the
    /// previous set.
    pub fn set_datapath_errors(&self, errors: std::collections::BTreeMap<String, String>) {
        let mut cur = self.dp_errors.lock().unwrap_or_else(|e| e.into_inner());
        if *cur != errors {
            *cur = errors;
            self.dp_errors_dirty.store(true, Ordering::Release);
        }
    }

    /// Writes back what the last [`Daemon::poll`] applied (nothing when the database
    /// already says it). A failure is logged and retried on the next turn.
    pub fn write_back(&mut self) {
        let Source::Db(session) = &mut self.source else {
            return;
        };
        if self.dp_errors_dirty.swap(false, Ordering::AcqRel) {
            self.dirty = true;
        }
        if !self.dirty || !session.is_connected() {
            return;
        }
        let errors = self
            .dp_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let ops = writeback::ops(&self.cfg, &self.bridges, &errors);
        if ops.is_empty() {
            self.dirty = false;
            return;
        }
        match session.transact(ops) {
            Ok(_) => {
                self.writebacks += 1;
                // Our own write comes back as an update; the next turn confirms it.
                self.dirty = false;
            }
            Err(e) => {
                warn!(target: "bridge", "writing the switch state back failed (will retry): {e}")
            }
        }
    }

    /// Runs until the exit flag is raised, calling `on_applied` after each turn that applied
    /// a configuration (with its events, maybe none: a datapath id or controller change
    /// has none), before the turn's write-back.
    pub fn run(&mut self, on_applied: impl FnMut(&Daemon, &[Event])) {
        self.run_with(on_applied, |_| Vec::new());
    }

    /// [`Daemon::run`], and every [`STATS_INTERVAL`] the operations `stats` returns (OVS's
    /// `Interface:statistics` refresh) are written, best effort: a failure is logged and the
    /// next interval tries again.
    pub fn run_with(
        &mut self,
        mut on_applied: impl FnMut(&Daemon, &[Event]),
        mut stats: impl FnMut(&Daemon) -> Vec<Value>,
    ) {
        let mut next_stats = std::time::Instant::now() + STATS_INTERVAL;
        while !self.exit.load(Ordering::Relaxed) {
            let before = self.applied;
            let events = self.poll(Duration::from_millis(100));
            if self.applied != before {
                on_applied(self, &events);
                // New interfaces get their statistics and state columns soon, not in 5 s.
                let soon = std::time::Instant::now() + Duration::from_millis(200);
                next_stats = next_stats.min(soon);
            }
            self.write_back();
            if std::time::Instant::now() >= next_stats {
                next_stats = std::time::Instant::now() + STATS_INTERVAL;
                let ops = stats(self);
                if let (false, Source::Db(session)) = (ops.is_empty(), &mut self.source)
                    && session.is_connected()
                    && let Err(e) = session.transact(ops)
                {
                    warn!(target: "bridge", "writing interface statistics failed: {e}");
                }
            }
        }
    }
}

fn describe(e: &Event) -> String {
    match e {
        Event::BridgeAdded(b) => format!("bridge {b}: added"),
        Event::BridgeRemoved(b) => format!("bridge {b}: deleted"),
        Event::PortAdded {
            bridge,
            iface,
            ofport,
        } => format!(
            "bridge {bridge}: added interface {iface} on port {}",
            ofport.0
        ),
        Event::PortRemoved {
            bridge,
            iface,
            ofport,
        } => format!(
            "bridge {bridge}: deleted interface {iface} on port {}",
            ofport.0
        ),
        Event::ControllersChanged(b) => format!("bridge {b}: controllers changed"),
    }
}
