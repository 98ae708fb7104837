//! A blocking OVSDB (RFC 7047) client over one connection to an `ovsdb-server`.
//!
//! # What this module owns
//!
//! * [`Client`]: one `unix:PATH` / `tcp:HOST:PORT` connection (std sockets, no runtime), the
//!   JSON-RPC exchange on it ([`Client::call`]), `get_schema`, `transact`, and at most one
//!   monitor whose [`Database`] replica it keeps current.
//! * [`MonitorSpec`]: which tables (and columns) a monitor covers.
//!
//! Reconnecting is not done here: see [`crate::session::Session`].
//!
//! # Invariants
//!
//! * Every message the server sends is handled in arrival order, whichever call is waiting:
//!   `echo` requests are answered at once, monitor updates are applied to the replica as they
//!   arrive (so after `transact` returns, updates the server sent before its reply are in).
//!   `update2` notifications are applied row by row from the received bytes, never parsed
//!   into one tree (a 20,000-row insert's echo is tens of MB as a `Value`).
//! * Rows touched by applied updates are recorded until [`Client::take_changes`]; the
//!   [`Client::generation`] counter grows by one per applied update message.
//! * Bad input from the server is an [`Error`], never a panic; an I/O failure, EOF or a
//!   framing error is [`Error::Disconnected`]/[`Error::Protocol`], after which the client is
//!   dead (every later call fails with [`Error::Disconnected`]).
//!
//! no unsafe

use crate::db::{Database, UpdateKind};
use crate::jsonrpc::{Decoder, Message, error_text};
use crate::schema::DatabaseSchema;
use crate::{Error, Result, Uuid};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The default time an RPC may take before [`Error::Timeout`].
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(60);

/// Where to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Unix socket.
    Unix(PathBuf),
    /// `HOST:PORT` (IPv6 hosts in brackets).
    Tcp(String),
}

impl Target {
    /// Reads `unix:PATH`, `tcp:HOST:PORT` or a bare socket path.
    pub fn parse(s: &str) -> Result<Target> {
        if let Some(p) = s.strip_prefix("unix:") {
            return Ok(Target::Unix(p.into()));
        }
        if let Some(hp) = s.strip_prefix("tcp:") {
            if !hp.contains(':') {
                return Err(Error::syntax(format!("{s:?}: expected tcp:HOST:PORT")));
            }
            return Ok(Target::Tcp(hp.to_owned()));
        }
        for scheme in ["ssl:", "punix:", "ptcp:", "pssl:"] {
            if s.starts_with(scheme) {
                return Err(Error::syntax(format!(
                    "{s:?}: only unix: and tcp: (active) targets are supported"
                )));
            }
        }
        if s.is_empty() {
            return Err(Error::syntax("empty target"));
        }
        Ok(Target::Unix(s.into()))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Tcp(hp) => write!(f, "tcp:{hp}"),
        }
    }
}

#[derive(Debug)]
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(d),
            Stream::Tcp(s) => s.set_read_timeout(d),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
    /// A read that takes only what has arrived already (`WouldBlock` when nothing has).
    fn read_ready(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let set = |s: &Stream, on| match s {
            Stream::Unix(s) => s.set_nonblocking(on),
            Stream::Tcp(s) => s.set_nonblocking(on),
        };
        set(self, true)?;
        let r = self.read(buf);
        set(self, false)?;
        r
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.write_all(buf),
            Stream::Tcp(s) => s.write_all(buf),
        }
    }
}

/// Which tables and columns a monitor covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MonitorSpec {
    /// Table → columns (empty: all columns). No tables at all: every table of the schema.
    pub tables: BTreeMap<String, Vec<String>>,
    /// Tables whose rows the replica does not keep but hands over as events
    /// ([`Client::take_events`], [`crate::Database::stream_table`]).
    pub streamed: BTreeSet<String>,
}

impl MonitorSpec {
    /// Every table, every column.
    pub fn all() -> MonitorSpec {
        MonitorSpec::default()
    }

    /// Adds `table` with `columns` (empty: all of them).
    pub fn table(mut self, table: &str, columns: &[&str]) -> MonitorSpec {
        self.tables.insert(
            table.to_owned(),
            columns.iter().map(|c| (*c).to_owned()).collect(),
        );
        self
    }

    /// Streams `table` (which the monitor must cover): its rows are not kept in the
    /// replica but handed over as events, for a reader that keeps its own digest of a large
    /// table.
    pub fn streamed(mut self, table: &str) -> MonitorSpec {
        self.streamed.insert(table.to_owned());
        self
    }

    /// The `<monitor-requests>` object for `schema`.
    fn requests(&self, schema: &DatabaseSchema) -> Result<Value> {
        let mut o = Map::new();
        if self.tables.is_empty() {
            for t in schema.tables.keys() {
                o.insert(t.clone(), json!({}));
            }
        }
        for (t, cols) in &self.tables {
            let ts = schema.tables.get(t).ok_or_else(|| {
                Error::syntax(format!("monitor: no table {t:?} in {}", schema.name))
            })?;
            for c in cols {
                if !ts.columns.contains_key(c) {
                    return Err(Error::syntax(format!("monitor: no column {t}.{c}")));
                }
            }
            let req = if cols.is_empty() {
                json!({})
            } else {
                json!({ "columns": cols })
            };
            o.insert(t.clone(), req);
        }
        Ok(Value::Object(o))
    }
}

/// How the running monitor's updates arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonitorKind {
    /// `monitor_cond`: `update2` notifications (diffs).
    Cond,
    /// Plain RFC 7047 `monitor`: `update` notifications (old/new rows).
    Plain,
}

/// What [`Client::recv`] got.
enum Incoming {
    /// A message for the caller.
    Msg(Message),
    /// The monitor's `update2` notification, already applied.
    Applied,
}

/// If `bytes` is an `update2` notification of `mon`, applies it to the replica without
/// building a tree of the whole message (it can be tens of MB) and returns true; otherwise
/// false (also for anything that does not parse this way: the caller's full parse reports it).
fn apply_update2_frame(
    mon: &mut Monitor,
    bytes: &[u8],
    changes: &mut BTreeSet<(String, Uuid)>,
) -> Result<bool> {
    use serde_json::value::RawValue;
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(false);
    };
    let Ok(top) = serde_json::from_str::<BTreeMap<&str, &RawValue>>(text) else {
        return Ok(false);
    };
    let is_update2 = top.get("method").map(|m| m.get()) == Some("\"update2\"")
        && top.get("id").is_none_or(|id| id.get() == "null");
    let Some(params) = top.get("params").filter(|_| is_update2) else {
        return Ok(false);
    };
    let Ok(p) = serde_json::from_str::<Vec<&RawValue>>(params.get()) else {
        return Ok(false);
    };
    let [id, updates] = p.as_slice() else {
        return Ok(false);
    };
    if serde_json::from_str::<Value>(id.get()).ok().as_ref() != Some(&mon.id) {
        return Ok(false);
    }
    mon.replica.apply_update2_text(updates.get(), |t, u| {
        changes.insert((t.to_owned(), u));
    })?;
    Ok(true)
}

#[derive(Debug)]
struct Monitor {
    id: Value,
    db: String,
    kind: MonitorKind,
    replica: Database,
}

/// One connection to an `ovsdb-server`.
#[derive(Debug)]
pub struct Client {
    target: Target,
    stream: Option<Stream>,
    decoder: Decoder,
    next_id: u64,
    rpc_timeout: Duration,
    monitor: Option<Monitor>,
    changes: BTreeSet<(String, Uuid)>,
    generation: u64,
    echoes: u64,
    /// Bytes received from the server so far.
    received: u64,
}

/// How much a read whose deadline has passed takes from the socket in one call at most
/// (what has already arrived is read, but a server streaming a large backlog cannot hold
/// the caller for long).
const DRAIN_PER_CALL: usize = 4 << 20;

impl Client {
    /// Connects to `target` (`unix:PATH`, `tcp:HOST:PORT` or a bare socket path).
    pub fn connect(target: &str) -> Result<Client> {
        let target = Target::parse(target)?;
        let stream = match &target {
            Target::Unix(p) => UnixStream::connect(p).map(Stream::Unix),
            Target::Tcp(hp) => TcpStream::connect(hp.as_str()).map(|s| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        }
        .map_err(|e| Error::Disconnected(format!("{target}: connect: {e}")))?;
        Ok(Client {
            target,
            stream: Some(stream),
            decoder: Decoder::new(),
            next_id: 0,
            rpc_timeout: DEFAULT_RPC_TIMEOUT,
            monitor: None,
            changes: BTreeSet::new(),
            generation: 0,
            received: 0,
            echoes: 0,
        })
    }

    /// Sets how long an RPC may wait for its answer.
    pub fn set_rpc_timeout(&mut self, d: Duration) {
        self.rpc_timeout = d;
    }

    /// Sets the largest message accepted from the server (default
    /// [`crate::jsonrpc::DEFAULT_MAX_MESSAGE`]); takes effect for the bytes not yet read.
    pub fn set_max_message(&mut self, max: usize) {
        if self.decoder.buffered() == 0 {
            self.decoder = Decoder::with_max(max);
        }
    }

    /// Where this client is connected.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// False once the connection has failed or closed.
    pub fn is_connected(&self) -> bool {
        self.stream.is_some()
    }

    /// The `echo` requests answered so far.
    pub fn echoes_answered(&self) -> u64 {
        self.echoes
    }

    fn dead(&mut self, why: String) -> Error {
        self.stream = None;
        Error::Disconnected(format!("{}: {why}", self.target))
    }

    fn send(&mut self, msg: &Message) -> Result<()> {
        let bytes = msg.to_bytes();
        let Some(s) = self.stream.as_mut() else {
            return Err(Error::Disconnected(format!(
                "{}: not connected",
                self.target
            )));
        };
        if let Err(e) = s.write_all(&bytes) {
            return Err(self.dead(format!("write: {e}")));
        }
        Ok(())
    }

    /// Reads the next message, waiting until `deadline`; `None` on timeout. An `update2`
    /// notification of the running monitor is applied to the replica here, straight from the
    /// received bytes, and reported as [`Incoming::Applied`].
    fn recv(&mut self, deadline: Instant) -> Result<Option<Incoming>> {
        let mut buf = [0u8; 64 * 1024];
        // Once the deadline has passed, what the socket holds already is still read (up to
        // `DRAIN_PER_CALL` per call): a zero timeout means "no waiting", not "ignore what
        // has arrived". Reading one buffer per call instead left a server's backlog (the
        // update after a large transaction, tens of MB) to drain at one buffer per poll,
        // and the next transaction's reply waited behind it.
        let mut drained = 0usize;
        let mut empty = false;
        loop {
            let frame = match self.decoder.next_frame() {
                Ok(f) => f,
                Err(e) => {
                    self.stream = None;
                    return Err(e);
                }
            };
            if let Some(bytes) = frame {
                let mon = self
                    .monitor
                    .as_mut()
                    .filter(|m| m.kind == MonitorKind::Cond);
                let changes = &mut self.changes;
                let r = match mon {
                    Some(mon) => apply_update2_frame(mon, bytes, changes),
                    None => Ok(false),
                };
                match r {
                    Ok(true) => {
                        self.generation += 1;
                        return Ok(Some(Incoming::Applied));
                    }
                    Ok(false) => {}
                    Err(e) => {
                        // The replica may be half-updated: it can no longer be trusted, nor
                        // the stream.
                        self.stream = None;
                        return Err(e);
                    }
                }
                let v = match serde_json::from_slice(bytes) {
                    Ok(v) => v,
                    Err(e) => {
                        let e = self.decoder.poison(format!("bad JSON message: {e}"));
                        self.stream = None;
                        return Err(e);
                    }
                };
                return match Message::from_json(v) {
                    Ok(m) => Ok(Some(Incoming::Msg(m))),
                    Err(e) => {
                        self.stream = None;
                        Err(e)
                    }
                };
            }
            let Some(s) = self.stream.as_mut() else {
                return Err(Error::Disconnected(format!(
                    "{}: not connected",
                    self.target
                )));
            };
            let now = Instant::now();
            let late = now >= deadline;
            let read = if late {
                if empty || drained >= DRAIN_PER_CALL {
                    return Ok(None);
                }
                s.read_ready(&mut buf)
            } else {
                // A zero read timeout means "block forever" to the OS: wait at least 1 ms.
                let wait = (deadline - now).max(Duration::from_millis(1));
                if let Err(e) = s.set_read_timeout(Some(wait)) {
                    return Err(self.dead(format!("set timeout: {e}")));
                }
                s.read(&mut buf)
            };
            match read {
                Ok(0) => return Err(self.dead("connection closed by server".into())),
                Ok(n) => {
                    self.decoder.feed(&buf[..n]);
                    self.received += n as u64;
                    if late {
                        drained += n;
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    empty |= late;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.dead(format!("read: {e}"))),
            }
        }
    }

    /// Handles a message nobody is waiting for (requests and notifications); returns
    /// responses for the caller to match.
    fn dispatch(&mut self, msg: Message) -> Result<Option<Message>> {
        match msg {
            Message::Request { method, params, id } => {
                let reply = if method == "echo" {
                    self.echoes += 1;
                    Message::Response { result: params, id }
                } else {
                    Message::Error {
                        error: json!("unknown method"),
                        id,
                    }
                };
                self.send(&reply)?;
                Ok(None)
            }
            Message::Notify { method, params } => {
                self.notified(&method, &params)?;
                Ok(None)
            }
            other => Ok(Some(other)),
        }
    }

    fn notified(&mut self, method: &str, params: &Value) -> Result<()> {
        let Some(mon) = self.monitor.as_mut() else {
            return Ok(());
        };
        let p = params.as_array().map(Vec::as_slice).unwrap_or(&[]);
        match (method, p) {
            ("update2", [id, updates]) if *id == mon.id && mon.kind == MonitorKind::Cond => {
                self.apply_notification(updates)?;
            }
            ("update", [id, updates]) if *id == mon.id && mon.kind == MonitorKind::Plain => {
                self.apply_notification(updates)?;
            }
            ("monitor_canceled", [id]) if *id == mon.id => {
                let db = mon.db.clone();
                self.monitor = None;
                return Err(self.dead(format!("the server canceled the monitor of {db}")));
            }
            _ => {}
        }
        Ok(())
    }

    fn apply_notification(&mut self, updates: &Value) -> Result<()> {
        let Some(mon) = self.monitor.as_mut() else {
            return Ok(());
        };
        if let Err(e) = apply(mon, updates, &mut self.changes) {
            // The replica may be half-updated: it can no longer be trusted, nor the stream.
            self.stream = None;
            return Err(e);
        }
        self.generation += 1;
        Ok(())
    }

    /// Calls `method` and waits for its answer, handling everything else that arrives
    /// meanwhile. A server error answer is [`Error::Rpc`].
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&Message::Request {
            method: method.to_owned(),
            params,
            id: id.clone(),
        })?;
        let deadline = Instant::now() + self.rpc_timeout;
        loop {
            let msg = match self.recv(deadline)? {
                None => {
                    return Err(Error::Timeout(format!(
                        "{}: no answer to {method} within {:?}",
                        self.target, self.rpc_timeout
                    )));
                }
                Some(Incoming::Applied) => continue,
                Some(Incoming::Msg(msg)) => msg,
            };
            match self.dispatch(msg)? {
                Some(Message::Response { result, id: rid }) if rid == id => return Ok(result),
                Some(Message::Error { error, id: rid }) if rid == id => {
                    return Err(Error::Rpc {
                        method: method.to_owned(),
                        error: error_text(&error),
                    });
                }
                _ => {} // An answer to nothing we are waiting for.
            }
        }
    }

    /// The databases the server has.
    pub fn list_dbs(&mut self) -> Result<Vec<String>> {
        let v = self.call("list_dbs", json!([]))?;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .ok_or_else(|| Error::Protocol(format!("list_dbs answered {v}")))
    }

    /// The schema of `db`.
    pub fn get_schema(&mut self, db: &str) -> Result<DatabaseSchema> {
        let v = self.call("get_schema", json!([db]))?;
        DatabaseSchema::from_json(&v)
    }

    /// Runs a transaction of `ops` (RFC 7047 §5.2 operations) on `db` and returns one result
    /// per operation. When the server refuses it, the error names the first failing operation
    /// ([`Error::Transaction`], `op: None` for an error at commit).
    pub fn transact(&mut self, db: &str, ops: Vec<Value>) -> Result<Vec<Value>> {
        let n = ops.len();
        let mut params = Vec::with_capacity(n + 1);
        params.push(json!(db));
        params.extend(ops);
        let v = self.call("transact", Value::Array(params))?;
        let Value::Array(results) = v else {
            return Err(Error::Protocol(format!(
                "transact answered a non-array: {v}"
            )));
        };
        for (i, r) in results.iter().enumerate() {
            if let Some(e) = r.get("error").filter(|e| !e.is_null()) {
                return Err(Error::Transaction {
                    op: (i < n).then_some(i),
                    error: e.as_str().map_or_else(|| e.to_string(), str::to_owned),
                    details: r
                        .get("details")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                });
            }
        }
        if results.len() < n {
            return Err(Error::Protocol(format!(
                "transact answered {} results for {n} operations and no error",
                results.len()
            )));
        }
        Ok(results)
    }

    /// Starts a `monitor_cond` (update2) monitor of `db` and fills a fresh replica with the
    /// server's contents; falls back to plain [`Client::monitor`] when the server does not
    /// know `monitor_cond`. Replaces any earlier monitor of this client (the server is asked
    /// to cancel it).
    pub fn monitor_cond(&mut self, db: &str, spec: &MonitorSpec) -> Result<()> {
        match self.start_monitor(db, spec, MonitorKind::Cond) {
            Err(Error::Rpc { error, .. }) if error.starts_with("unknown method") => {
                self.start_monitor(db, spec, MonitorKind::Plain)
            }
            r => r,
        }
    }

    /// Starts a plain RFC 7047 `monitor` (old/new `update`s) of `db`; see
    /// [`Client::monitor_cond`].
    pub fn monitor(&mut self, db: &str, spec: &MonitorSpec) -> Result<()> {
        self.start_monitor(db, spec, MonitorKind::Plain)
    }

    fn start_monitor(&mut self, db: &str, spec: &MonitorSpec, kind: MonitorKind) -> Result<()> {
        if let Some(old) = self.monitor.take() {
            // Best effort: answer or error, the old monitor's updates are ignored from now on.
            let _ = self.call("monitor_cancel", json!([old.id]));
        }
        let schema = self.get_schema(db)?;
        let requests = spec.requests(&schema)?;
        self.next_id += 1;
        let id = json!(format!("flowswitch-monitor-{}", self.next_id));
        let method = match kind {
            MonitorKind::Cond => "monitor_cond",
            MonitorKind::Plain => "monitor",
        };
        let initial = self.call(method, json!([db, id, requests]))?;
        let mut replica = Database::new(schema);
        for t in &spec.streamed {
            if requests.get(t).is_none() {
                return Err(Error::syntax(format!(
                    "monitor: streamed table {t:?} not monitored"
                )));
            }
            replica.stream_table(t)?;
        }
        let mut mon = Monitor {
            id,
            db: db.to_owned(),
            kind,
            replica,
        };
        apply(&mut mon, &initial, &mut self.changes)?;
        self.generation += 1;
        self.monitor = Some(mon);
        Ok(())
    }

    /// The running monitor's kind, if any.
    pub fn monitor_kind(&self) -> Option<MonitorKind> {
        self.monitor.as_ref().map(|m| m.kind)
    }

    /// The monitor's replica (`None` before [`Client::monitor_cond`]).
    pub fn replica(&self) -> Option<&Database> {
        self.monitor.as_ref().map(|m| &m.replica)
    }

    /// The streamed tables' events since the last call ([`MonitorSpec::streamed`]).
    pub fn take_events(&mut self) -> Vec<crate::db::StreamEvent> {
        self.monitor
            .as_mut()
            .map(|m| m.replica.take_events())
            .unwrap_or_default()
    }

    /// Takes the replica out, ending the monitor on this side (with the streamed tables'
    /// events not yet taken).
    pub fn take_replica(&mut self) -> Option<Database> {
        self.monitor.take().map(|m| m.replica)
    }

    /// Bytes received from the server so far (a caller polling with a zero timeout can
    /// tell from it whether more may be waiting).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Update messages applied so far (the initial contents count as one).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The rows (table, uuid) inserted, modified or deleted since the last call, sorted.
    pub fn take_changes(&mut self) -> Vec<(String, Uuid)> {
        std::mem::take(&mut self.changes).into_iter().collect()
    }

    /// Waits up to `timeout` for the server's messages, handling them (echo, updates), and
    /// returns as soon as at least one update has been applied (true) or the time is up
    /// (false). Messages already received are handled without waiting.
    pub fn poll(&mut self, timeout: Duration) -> Result<bool> {
        let start = self.generation;
        let deadline = Instant::now() + timeout;
        loop {
            // Once something changed, only drain what is already buffered.
            let d = if self.generation != start {
                Instant::now()
            } else {
                deadline
            };
            match self.recv(d)? {
                Some(Incoming::Msg(msg)) => {
                    self.dispatch(msg)?;
                }
                Some(Incoming::Applied) => {}
                None => return Ok(self.generation != start),
            }
        }
    }
}

/// Applies an update body (initial reply or notification) to `mon`'s replica, recording the
/// rows touched.
fn apply(mon: &mut Monitor, updates: &Value, changes: &mut BTreeSet<(String, Uuid)>) -> Result<()> {
    let touched = touched_rows(updates)?;
    match mon.kind {
        MonitorKind::Cond => mon.replica.apply_update2(updates)?,
        MonitorKind::Plain => {
            // RFC 7047 <table-updates>: {table: {uuid: {"old": row?, "new": row?}}}; "new"
            // carries whole values, absent for a delete.
            let mut rows_by_table = Map::new();
            for (table, rows) in updates.as_object().into_iter().flatten() {
                let mut out = Map::new();
                for (uuid, ru) in rows.as_object().into_iter().flatten() {
                    let ru = ru.as_object().ok_or_else(|| {
                        Error::Protocol(format!("update of {table} row {uuid} is not an object"))
                    })?;
                    out.insert(uuid.clone(), ru.get("new").cloned().unwrap_or(Value::Null));
                }
                rows_by_table.insert(table.clone(), Value::Object(out));
            }
            mon.replica
                .apply_tables(&Value::Object(rows_by_table), UpdateKind::Values)?;
        }
    }
    changes.extend(
        touched
            .into_iter()
            .filter(|(t, _)| !mon.replica.is_streamed(t)),
    );
    Ok(())
}

fn touched_rows(updates: &Value) -> Result<Vec<(String, Uuid)>> {
    let o = updates
        .as_object()
        .ok_or_else(|| Error::Protocol(format!("table updates are not an object: {updates}")))?;
    let mut out = Vec::new();
    for (table, rows) in o {
        let rows = rows
            .as_object()
            .ok_or_else(|| Error::Protocol(format!("updates of {table} are not an object")))?;
        for u in rows.keys() {
            let uuid =
                Uuid::parse(u).ok_or_else(|| Error::Protocol(format!("bad row uuid {u:?}")))?;
            out.push((table.clone(), uuid));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            Target::parse("unix:/a/b").unwrap(),
            Target::Unix("/a/b".into())
        );
        assert_eq!(Target::parse("/a/b").unwrap(), Target::Unix("/a/b".into()));
        assert_eq!(
            Target::parse("tcp:127.0.0.1:6641").unwrap(),
            Target::Tcp("127.0.0.1:6641".into())
        );
        assert_eq!(
            Target::parse("tcp:[::1]:6641").unwrap(),
            Target::Tcp("[::1]:6641".into())
        );
        assert!(Target::parse("tcp:host").is_err());
        assert!(Target::parse("ssl:1.2.3.4:6641").is_err());
        assert!(Target::parse("punix:/x").is_err());
        assert!(Target::parse("").is_err());
        assert_eq!(Target::parse("unix:/x").unwrap().to_string(), "unix:/x");
    }
}
