//! `vswitchd`: flowswitch as a drop-in `ovs-vswitchd` (issue 15).
//!
//! # What this crate owns
//!
//! * [`config`]: the switch configuration read from OVS's own `Open_vSwitch` database
//!   (`Open_vSwitch`, `Bridge`, `Port`, `Interface`, `Controller` rows) into typed values,
//!   with every bad value named instead of panicking.
//! * [`static_config`]: the same configuration from a TOML file (no `ovsdb-server`), and the
//!   built-in default.
//! * [`bridges`]: the running bridges (an OpenFlow bridge each, its ports and OpenFlow port
//!   numbers) and the reconciliation that takes them from one configuration to the next.
//! * [`switch`]: the running switch as other threads see it — a handle per bridge (what
//!   OpenFlow connections and control commands use) and its OpenFlow listeners, kept in
//!   step with the bridges.
//! * [`ofconn`]: one OpenFlow connection, sans-I/O: version negotiation, requests answered
//!   from and flow mods applied to a bridge ([`ofconn::OfBridge`]).
//! * [`ofserver`]: the listeners (`RUNDIR/<bridge>.mgmt`, `ptcp:`/`punix:` targets) and the
//!   threads that drive [`ofconn`] over sockets.
//! * [`unixctl`]: the `ovs-appctl` control socket (`RUNDIR/ovs-vswitchd.<pid>.ctl`, JSON-RPC).
//! * [`verbs`]: the `ovs-appctl` verbs over the datapaths and bridges (`dpif-netdev/*`,
//!   `dpctl/*`, `netdev-dummy/receive`, `upcall/show`, `revalidator/*`, `ofproto/trace`,
//!   `fdb/*`).
//! * [`dp`]: each bridge's datapath: PMD thread, dummy ports (`tx_pcap`, `rxq_pcap`),
//!   revalidators, and the datapath verbs' texts.
//! * [`logging`]: `tracing` set up as OVS's vlog (module levels changed at run time,
//!   rate-limited per-packet messages, a log file).
//! * [`metrics`]: Prometheus text on a loopback HTTP endpoint, read from the live counters
//!   at scrape time.
//! * [`coverage`]: `coverage/show` and `coverage/read-counter`: named events with their
//!   rates over 5 s, a minute and an hour, sampled every 5 s by a thread of [`service`].
//! * [`service`]: one daemon process from start to exit (what `flowswitch vswitchd` runs).
//! * [`rundir`]: the run directory, pidfile and `--detach`.
//! * [`writeback`]: what the daemon writes back to the database (`ofport`, `error`,
//!   `datapath_id`, then `cur_cfg`), as OVSDB operations.
//! * [`daemon`]: the daemon's life: the OVSDB session, write-back (`cur_cfg`, `ofport`,
//!   `datapath_id`, …), the control verbs, clean exit on `SIGTERM` and `ovs-appctl exit`.
//!
//! # Threads
//!
//! The main thread owns the OVSDB session and the configuration; the OpenFlow listeners and
//! connections, the unixctl server and the coverage sampler run on their own threads and reach a bridge only
//! through `upcall::handler::SharedBridge` (lock-free reads, double-buffered writes) and the
//! shared registries in [`bridges`]; no lock is held across a socket read or write.

pub mod bridges;
pub mod config;
pub mod coverage;
pub mod daemon;
pub mod dp;
pub mod logging;
pub mod metrics;
pub mod ofconn;
pub mod ofgroup;
pub mod ofserver;
pub mod rundir;
pub mod service;
pub mod static_config;
pub mod switch;
pub mod unixctl;
pub mod verbs;
pub mod writeback;
