//! `vswitchd`: flowswitch as a drop-in `ovs-vswitchd`, invoked as OVS's daemon is
//! (`flowswitch vswitchd [unix:DB.sock] --pidfile --detach --log-file`); the daemon itself
//! lives in the `vswitchd` crate.

use std::path::PathBuf;

use anyhow::bail;
use vswitchd::bridges::DummyMode;
use vswitchd::service::{ServeOptions, serve};

/// Arguments (OVS's `ovs-vswitchd` options; sockets and pidfile in `$OVS_RUNDIR`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration database: `unix:PATH` or `tcp:IP:PORT` (default
    /// `unix:$OVS_RUNDIR/db.sock`, `OVS_RUNDIR` defaulting to `/var/run/openvswitch`).
    pub database: Option<String>,
    /// Write the process id to FILE (default `$OVS_RUNDIR/ovs-vswitchd.pid`).
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true)]
    pub pidfile: Option<Option<PathBuf>>,
    /// Run in the background; the command returns once the daemon is ready.
    #[arg(long)]
    pub detach: bool,
    /// Log to FILE (default `$OVS_LOGDIR/ovs-vswitchd.log`).
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true)]
    pub log_file: Option<Option<PathBuf>>,
    /// The control socket `ovs-appctl` talks to (default `$OVS_RUNDIR/ovs-vswitchd.<pid>.ctl`).
    #[arg(long, value_name = "SOCKET")]
    pub unixctl: Option<PathBuf>,
    /// Log levels, OVS's `-v` syntax (`module:destination:level`, e.g. `-vconsole:off`).
    #[arg(short = 'v', long = "verbose", value_name = "SPEC", num_args = 0..=1, default_missing_value = "ANY:ANY:dbg")]
    pub verbose: Vec<String>,
    /// `--enable-dummy`: accept OVS's `dummy` interfaces; `--enable-dummy=override` treats
    /// every interface as a dummy, as OVS's test suite runs.
    #[arg(long, value_name = "override", num_args = 0..=1, require_equals = true)]
    pub enable_dummy: Option<Option<String>>,
    /// Run the bridges and ports of a TOML file instead of a database (format: the
    /// `vswitchd::static_config` module doc). With neither DATABASE nor `--config` and no
    /// `$OVS_RUNDIR/db.sock`, flowswitch starts a private ovsdb-server there with a default
    /// `br0` (or, without OVS installed, runs that default from its built-in TOML).
    #[arg(long, value_name = "FILE", conflicts_with = "database")]
    pub config: Option<PathBuf>,
    /// Serve Prometheus metrics over HTTP on ADDR (a loopback address, e.g. 127.0.0.1:9475).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Accepted for compatibility with OVS's invocations; flowswitch never changes directory.
    #[arg(long)]
    pub no_chdir: bool,
    /// Accepted for compatibility: flowswitch has no kernel datapath to disable.
    #[arg(long)]
    pub disable_system: bool,
    /// Accepted for compatibility: flowswitch reads no system routes yet.
    #[arg(long)]
    pub disable_system_route: bool,
}

/// Runs the daemon.
pub fn run(a: Args) -> anyhow::Result<()> {
    let dummy = match a.enable_dummy.as_ref().map(|v| v.as_deref()) {
        None | Some(None) => DummyMode::Off,
        Some(Some("override")) => DummyMode::Override,
        Some(Some(other)) => bail!("--enable-dummy={other}: the only value is `override`"),
    };
    serve(ServeOptions {
        db: a.database,
        pidfile: a.pidfile,
        detach: a.detach,
        log_file: a.log_file,
        unixctl: a.unixctl,
        verbose: a.verbose,
        dummy,
        config: a.config,
        metrics: a.metrics,
        ..ServeOptions::default()
    })
}
