//! A reconnecting monitor session: a [`Client`] that comes back after the connection drops.
//!
//! # What this module owns
//!
//! * [`Session`]: connects to one target, monitors one database (`monitor_cond`, falling
//!   back to `monitor`), and on any connection loss reconnects with exponential backoff,
//!   re-fetches the schema, re-monitors and rebuilds the replica from scratch.
//! * [`Backoff`] (the delays) and [`Clock`] (time, injectable so tests run the backoff
//!   without waiting; [`SystemClock`] is the real one).
//!
//! # Invariants
//!
//! * After each successful (re)connect the replica is exactly the server's contents (a
//!   fresh monitor's initial reply into an empty [`Database`]): nothing from before the drop
//!   survives, so rows inserted or deleted while disconnected are neither lost nor kept.
//! * Rows that differ between the replica before the drop and the rebuilt one are reported
//!   by [`Session::take_changes`] along with rows touched by ordinary updates, so a caller
//!   doing incremental work sees every change exactly as if it had been notified.
//! * A streamed table's events ([`Session::take_events`]) come in order across reconnects:
//!   those the lost connection had not handed over yet, then the new replica's
//!   [`crate::RowEvent::Reset`] and its rows.
//! * Attempts are spaced: the first right after the loss, then `initial`, doubling up to
//!   `max`; a success resets the delay. [`Session::poll`] never waits past its timeout.
//!
//! no unsafe

use crate::client::{Client, MonitorSpec};
use crate::db::{Database, StreamEvent};
use crate::{Error, Result, Uuid};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

/// Reconnection delays: `initial`, doubling on each failure, capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failed attempt.
    pub initial: Duration,
    /// The largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    /// 100 ms doubling to 8 s.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(8),
        }
    }
}

/// Time as the session sees it (for the backoff only; socket timeouts are real time).
pub trait Clock: fmt::Debug + Send {
    /// Now.
    fn now(&self) -> Instant;
    /// Waits `d`.
    fn sleep(&mut self, d: Duration);
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// A monitor of one database that survives disconnections.
#[derive(Debug)]
pub struct Session {
    target: String,
    db: String,
    spec: MonitorSpec,
    backoff: Backoff,
    clock: Box<dyn Clock>,
    rpc_timeout: Duration,
    client: Option<Client>,
    /// The replica while disconnected (the last one the dead client had).
    stale: Option<Database>,
    changes: BTreeSet<(String, Uuid)>,
    /// Streamed tables' events taken from a client that went away.
    events: Vec<StreamEvent>,
    delay: Duration,
    next_attempt: Option<Instant>,
    connects: u64,
    failures: u64,
    last_error: Option<String>,
}

/// Errors that mean "the connection is gone, try again": the others are reported.
fn is_transient(e: &Error) -> bool {
    matches!(
        e,
        Error::Disconnected(_) | Error::Timeout(_) | Error::Protocol(_) | Error::Io { .. }
    )
}

impl Session {
    /// A session monitoring `spec` of `db` at `target`; it connects on the first
    /// [`Session::poll`].
    pub fn new(target: &str, db: &str, spec: MonitorSpec) -> Session {
        let backoff = Backoff::default();
        Session {
            target: target.to_owned(),
            db: db.to_owned(),
            spec,
            backoff,
            clock: Box::new(SystemClock),
            rpc_timeout: crate::client::DEFAULT_RPC_TIMEOUT,
            client: None,
            stale: None,
            changes: BTreeSet::new(),
            events: Vec::new(),
            delay: backoff.initial,
            next_attempt: None,
            connects: 0,
            failures: 0,
            last_error: None,
        }
    }

    /// Sets the reconnection delays.
    pub fn with_backoff(mut self, backoff: Backoff) -> Session {
        self.backoff = backoff;
        self.delay = backoff.initial;
        self
    }

    /// Sets the clock the backoff runs on.
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Session {
        self.clock = Box::new(clock);
        self
    }

    /// Sets each RPC's timeout (see [`Client::set_rpc_timeout`]).
    pub fn with_rpc_timeout(mut self, d: Duration) -> Session {
        self.rpc_timeout = d;
        self
    }

    /// The database monitored.
    pub fn db(&self) -> &str {
        &self.db
    }

    /// True while connected and monitoring.
    pub fn is_connected(&self) -> bool {
        self.client.as_ref().is_some_and(Client::is_connected)
    }

    /// Successful connections so far (the first one included).
    pub fn connects(&self) -> u64 {
        self.connects
    }

    /// Bytes the current connection has received ([`Client::received`]; 0 while
    /// disconnected): a caller that polls with a zero timeout sees more may be waiting when it
    /// moved.
    pub fn received(&self) -> u64 {
        self.client.as_ref().map_or(0, Client::received)
    }

    /// Failed connection attempts so far.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Why the last attempt or connection failed.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The replica: current while connected, the last known contents while disconnected,
    /// `None` before the first connection.
    pub fn replica(&self) -> Option<&Database> {
        self.client
            .as_ref()
            .and_then(Client::replica)
            .or(self.stale.as_ref())
    }

    /// The live client, for other RPCs (`None` while disconnected).
    pub fn client(&mut self) -> Option<&mut Client> {
        self.client.as_mut().filter(|c| c.is_connected())
    }

    /// The rows (table, uuid) that changed since the last call, sorted; after a reconnect,
    /// those that differ between the old and the rebuilt replica.
    pub fn take_changes(&mut self) -> Vec<(String, Uuid)> {
        if let Some(c) = self.client.as_mut() {
            self.changes.extend(c.take_changes());
        }
        std::mem::take(&mut self.changes).into_iter().collect()
    }

    /// The streamed tables' events since the last call, in order ([`MonitorSpec::streamed`]):
    /// after a reconnect, the new replica's [`crate::db::RowEvent::Reset`] and its rows.
    pub fn take_events(&mut self) -> Vec<StreamEvent> {
        if let Some(c) = self.client.as_mut() {
            self.events.extend(c.take_events());
        }
        std::mem::take(&mut self.events)
    }

    /// Runs a transaction on the monitored database (not retried: on a connection loss it
    /// fails with [`Error::Disconnected`] and the next [`Session::poll`] reconnects).
    pub fn transact(&mut self, ops: Vec<Value>) -> Result<Vec<Value>> {
        let Some(c) = self.client.as_mut() else {
            return Err(Error::Disconnected(format!(
                "{}: not connected",
                self.target
            )));
        };
        let r = c.transact(&self.db, ops);
        if !c.is_connected() {
            self.lost(
                r.as_ref()
                    .err()
                    .map_or_else(|| "connection lost".into(), |e| e.to_string()),
            );
        }
        r
    }

    fn lost(&mut self, why: String) {
        if let Some(mut c) = self.client.take() {
            self.changes.extend(c.take_changes());
            self.events.extend(c.take_events());
            if let Some(db) = c.take_replica() {
                self.stale = Some(db);
            }
        }
        self.last_error = Some(why);
        self.delay = self.backoff.initial;
        self.next_attempt = None;
    }

    fn attempt(&mut self) -> Result<()> {
        let mut c = Client::connect(&self.target)?;
        c.set_rpc_timeout(self.rpc_timeout);
        c.monitor_cond(&self.db, &self.spec)?;
        let _ = c.take_changes();
        let fresh = c
            .replica()
            .ok_or_else(|| Error::Protocol("monitor started without a replica".into()))?;
        match self.stale.take() {
            Some(old) => self.changes.extend(diff(&old, fresh)),
            None => {
                for (t, table) in &fresh.tables {
                    self.changes
                        .extend(table.rows.keys().map(|u| (t.clone(), *u)));
                }
            }
        }
        self.client = Some(c);
        Ok(())
    }

    /// Waits up to `timeout` (on the session's clock while reconnecting) for updates,
    /// reconnecting as needed. True when the replica changed (an update, or a (re)connect).
    /// Connection failures are retried within the timeout and only remembered
    /// ([`Session::last_error`]); other errors (an unknown database, a schema the replica
    /// cannot read) are returned, and the next poll tries again after the backoff delay.
    pub fn poll(&mut self, timeout: Duration) -> Result<bool> {
        let deadline = self.clock.now() + timeout;
        loop {
            if let Some(c) = self.client.as_mut() {
                let remaining = deadline.saturating_duration_since(self.clock.now());
                match c.poll(remaining) {
                    Ok(changed) => {
                        self.changes.extend(c.take_changes());
                        return Ok(changed);
                    }
                    Err(e) => {
                        self.lost(e.to_string());
                        if !is_transient(&e) {
                            return Err(e);
                        }
                        continue;
                    }
                }
            }
            let now = self.clock.now();
            if let Some(at) = self.next_attempt.filter(|&at| at > now) {
                if deadline <= now {
                    return Ok(false);
                }
                self.clock.sleep(at.min(deadline) - now);
                continue;
            }
            match self.attempt() {
                Ok(()) => {
                    self.connects += 1;
                    self.delay = self.backoff.initial;
                    self.next_attempt = None;
                    return Ok(true);
                }
                Err(e) => {
                    self.failures += 1;
                    self.last_error = Some(e.to_string());
                    self.next_attempt = Some(self.clock.now() + self.delay);
                    self.delay = (self.delay * 2).min(self.backoff.max);
                    if !is_transient(&e) {
                        return Err(e);
                    }
                }
            }
        }
    }
}

/// The rows that differ between two replicas.
fn diff(old: &Database, new: &Database) -> Vec<(String, Uuid)> {
    let mut out = Vec::new();
    let names: BTreeSet<&String> = old.tables.keys().chain(new.tables.keys()).collect();
    for t in names {
        let (a, b) = (old.table(t), new.table(t));
        for u in a.rows.keys().chain(b.rows.keys()) {
            if a.rows.get(u) != b.rows.get(u) {
                out.push((t.clone(), *u));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A clock that only moves when slept on, recording each sleep.
    #[derive(Debug, Clone)]
    struct FakeClock {
        now: Arc<Mutex<Instant>>,
        sleeps: Arc<Mutex<Vec<Duration>>>,
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            *self.now.lock().unwrap()
        }
        fn sleep(&mut self, d: Duration) {
            *self.now.lock().unwrap() += d;
            self.sleeps.lock().unwrap().push(d);
        }
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_poll_keeps_its_timeout() {
        let clock = FakeClock {
            now: Arc::new(Mutex::new(Instant::now())),
            sleeps: Arc::new(Mutex::new(Vec::new())),
        };
        let dir = std::env::temp_dir().join(format!("ovsdb-backoff-{}", std::process::id()));
        let target = format!("unix:{}", dir.join("nothing.sock").display());
        let mut s = Session::new(&target, "OVN_Northbound", MonitorSpec::all())
            .with_backoff(Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_secs(8),
            })
            .with_clock(clock.clone());
        let start = clock.now();
        assert!(!s.poll(Duration::from_secs(30)).unwrap());
        assert_eq!(
            clock.now() - start,
            Duration::from_secs(30),
            "poll waits exactly its timeout"
        );
        let ms: Vec<u64> = clock
            .sleeps
            .lock()
            .unwrap()
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect();
        // Attempts at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3, 12.7, 20.7, 28.7 s; then 1.3 s to the deadline.
        assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 6400, 8000, 8000, 1300]);
        assert_eq!(s.failures(), 10);
        assert!(
            s.last_error().unwrap().contains("connect"),
            "{:?}",
            s.last_error()
        );
        assert!(s.replica().is_none());
        // The next poll goes on from where the backoff was: 6.7 s until the next attempt.
        assert!(!s.poll(Duration::from_secs(1)).unwrap());
        assert_eq!(
            clock.sleeps.lock().unwrap().last(),
            Some(&Duration::from_secs(1))
        );
        assert_eq!(s.failures(), 10);
        assert!(s.transact(vec![]).is_err());
    }
}
