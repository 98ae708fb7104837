//! One daemon process from start to exit: what `flowswitch vswitchd` runs.
//!
//! Order of start-up, as `ovs-vswitchd` does it: detach (before any thread), run directory,
//! logging, signal handlers, the pidfile, then the main loop ([`crate::daemon::Daemon`]).
//! The parent of `--detach` exits only once the daemon is ready (pidfile written), so a
//! script may use the switch as soon as the command returns. Exit on `SIGTERM`, `SIGINT`
//! or `ovs-appctl exit`: listeners closed and their sockets removed, the pidfile last.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use anyhow::Context;
use tracing::info;

use crate::bridges::DummyMode;
use crate::daemon::{Daemon, Options};
use crate::rundir::{self, Detached, Pidfile};

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
}

impl ServeOptions {
    /// The pidfile path, if one is wanted.
    pub fn pidfile_path(&self) -> Option<PathBuf> {
        self.pidfile.as_ref().map(|p| {
            p.clone()
                .unwrap_or_else(|| rundir::rundir().join("ovs-vswitchd.pid"))
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
            detached.ready();
            running.run();
            Ok(())
        }
        Err(e) => {
            detached.failed(&format!("{e:#}"));
            Err(e)
        }
    }
}

/// A started daemon, ready to loop.
struct Running {
    daemon: Daemon,
    _pidfile: Option<Pidfile>,
}

fn start(opts: &ServeOptions) -> anyhow::Result<Running> {
    let dir = rundir::rundir();
    rundir::ensure_dir(&dir).with_context(|| format!("run directory {}", dir.display()))?;
    let mut dopts = Options::new(dir.clone());
    if let Some(db) = &opts.db {
        dopts.db = db.clone();
    }
    dopts.dummy = opts.dummy;
    let daemon = Daemon::new(dopts);
    let exit = daemon.exit_flag();
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, exit.clone()).context("installing signal handlers")?;
    }
    let pidfile = match opts.pidfile_path() {
        Some(p) => Some(Pidfile::create(&p).with_context(|| format!("pidfile {}", p.display()))?),
        None => None,
    };
    info!(target: "vswitchd", "flowswitch vswitchd started (database {})", daemon.options().db);
    Ok(Running {
        daemon,
        _pidfile: pidfile,
    })
}

impl Running {
    fn run(&mut self) {
        self.daemon.run(|_, _| {});
        let exit = self.daemon.exit_flag();
        info!(target: "vswitchd", "exiting (exit flag {})", exit.load(Ordering::Relaxed));
    }
}
