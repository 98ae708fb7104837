//! The OpenFlow listeners of a bridge: its management socket `RUNDIR/<bridge>.mgmt` (what
//! `ovs-ofctl <cmd> <bridge>` connects to) and the `punix:PATH` / `ptcp:PORT[:IP]` targets,
//! each connection driving an [`OfConn`] over a socket.
//!
//! Threads: one accept thread per listener and one thread per connection, with blocking
//! reads and writes. OpenFlow management connections are few (an `ovs-ofctl` run, a
//! controller or two) and a blocking thread keeps a connection's replies strictly in order
//! with no readiness bookkeeping; the flow tables are reached only through the lock-free
//! `SharedBridge`, so connections never wait on each other except for the bridge's single
//! writer. A connection reads up to [`READ_CHUNK`] bytes at a time and writes the whole
//! answer before reading again. Flow mods are held back ([`OfConn::feed_deferred`]) while
//! more keep arriving — until the peer pauses for [`BATCH_PAUSE`], anything else arrives,
//! or [`MAX_BATCH`] are waiting — and then applied as one batch: `ovs-ofctl add-flows`
//! writes its flow mods one by one, and one bridge write per flow mod would cost far more
//! than the flow mods themselves. What one connection buffers is bounded by one read, at
//! most [`MAX_BATCH`] flow mods, and one answer (a dump is encoded, written, dropped).
//!
//! Asynchronous messages: a dispatcher thread per server takes the bridge's packet-ins and
//! expired rules (`upcall::packet_in`), [`OfServer::port_status`] is handed port changes,
//! and each message is encoded per connection that wants it and queued (bounded) to that
//! connection's writer thread, which shares the socket's write side with the replies.
//!
//! [`OfServer::shutdown`] stops the accept threads (woken by a connection to themselves; one
//! that cannot be woken, its socket file removed by someone else, is not waited for),
//! shuts every connection's socket down (which wakes its blocked read), joins every thread
//! and removes the socket files it created. Dropping the server does the same.
//!
//! How the daemon serves a bridge (its `SharedBridge` made by the bridge registry, its
//! datapath id, its `Controller` targets from the database):
//!
//! ```no_run
//! use std::sync::Arc;
//! use vswitchd::ofconn::{OfBridge, StaticBridge};
//! use vswitchd::ofserver::OfServer;
//!
//! # fn demo(shared: Arc<upcall::handler::SharedBridge>) -> Result<(), Box<dyn std::error::Error>> {
//! let bridge: Arc<dyn OfBridge> = Arc::new(StaticBridge::new("br0", 0x1, shared));
//! let server = OfServer::start_bridge(
//!     bridge,
//!     std::path::Path::new("/var/run/openvswitch"), // RUNDIR: serves RUNDIR/br0.mgmt
//!     &["ptcp:6653:127.0.0.1".to_string()],
//! )?;
//! // ... on reconfiguration or exit:
//! server.shutdown();
//! # Ok(())
//! # }
//! ```

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::ofconn::{OfBridge, OfConn};
use upcall::packet_in::AsyncMsg;

/// Bytes read from a socket at once.
pub const READ_CHUNK: usize = 256 * 1024;

/// Flow mods held back for one batch at most (then applied even if more keep coming).
pub const MAX_BATCH: usize = 20_000;

/// How long a connection with flow mods held back waits for more before applying them.
pub const BATCH_PAUSE: Duration = Duration::from_millis(1);

/// Most connections served at once per server; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 256;

/// A listener's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A unix socket path (`punix:PATH`, and the management socket).
    Unix(PathBuf),
    /// A TCP address (`ptcp:PORT[:IP]`; port 0 picks a free one).
    Tcp(SocketAddr),
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The target is not `punix:PATH` or `ptcp:PORT[:IP]`.
    #[error("bad OpenFlow listener target {0:?} (expected punix:PATH or ptcp:PORT[:IP])")]
    BadTarget(String),
    /// Binding or listening failed.
    #[error("cannot listen on {what}: {source}")]
    Io {
        /// The address.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl Listen {
    /// Parses an OVS passive target: `punix:PATH`, `ptcp:PORT[:IP]` (IP defaults to
    /// `0.0.0.0`; an IPv6 address in brackets).
    pub fn parse(target: &str) -> Result<Listen, ServerError> {
        let bad = || ServerError::BadTarget(target.to_string());
        if let Some(p) = target.strip_prefix("punix:") {
            if p.is_empty() {
                return Err(bad());
            }
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        let rest = target.strip_prefix("ptcp:").ok_or_else(bad)?;
        let (port, ip) = match rest.split_once(':') {
            Some((p, ip)) => (p, ip.trim_start_matches('[').trim_end_matches(']')),
            None => (rest, "0.0.0.0"),
        };
        let port: u16 = port.parse().map_err(|_| bad())?;
        let ip: std::net::IpAddr = ip.parse().map_err(|_| bad())?;
        Ok(Listen::Tcp(SocketAddr::new(ip, port)))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "punix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "ptcp:{}:{}", a.port(), a.ip()),
        }
    }
}

/// A stream of either kind.
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }
    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.write_all(buf),
            Stream::Tcp(s) => s.write_all(buf),
        }
    }
}

enum Listener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener, SocketAddr),
}

/// A live connection: id, a clone of its socket (to shut it down), its thread, and what its
/// thread shares with the packet-in dispatcher.
type Conn = (u64, Stream, Option<JoinHandle<()>>, Arc<ConnShared>);

/// Most asynchronous messages (packet-ins, port status, flow removed) waiting to be written
/// to one connection (OVS's default `controller_queue_size`); more are dropped, counted in
/// [`OfServer::packet_ins_dropped`].
pub const CONN_PACKET_IN_MAX: usize = 100;

/// Asynchronous messages encoded for one connection, waiting for its writer.
#[derive(Default)]
struct PinQueue {
    msgs: std::collections::VecDeque<Vec<u8>>,
    /// The connection ended: the writer stops.
    closed: bool,
}

/// What a connection's reader thread shares with the dispatcher and the connection's
/// asynchronous-message writer: the protocol state (version, packet-in format, asynchronous
/// configuration, role), the socket's write side (one message at a time, from either
/// thread) and the connection's queue of asynchronous messages (packet-ins, port status,
/// flow removed). The writer thread is started with the first message the connection
/// takes, so a connection that takes none costs no thread; a peer that stops reading blocks
/// only its own writer, and what does not fit in the queue is dropped.
struct ConnShared {
    conn: Mutex<OfConn>,
    writer: Mutex<Stream>,
    pins: Mutex<PinQueue>,
    pins_ready: Condvar,
    pin_writer: Mutex<Option<JoinHandle<()>>>,
}

impl ConnShared {
    /// Writes `bytes` whole (replies and packet-ins never interleave).
    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(bytes)
    }

    /// Queues a packet-in for the writer (started now if need be); false if the queue was
    /// full or the connection has ended.
    fn queue_packet_in(self: &Arc<Self>, msg: Vec<u8>) -> bool {
        {
            let mut q = self.pins.lock().unwrap_or_else(|e| e.into_inner());
            if q.closed || q.msgs.len() >= CONN_PACKET_IN_MAX {
                return false;
            }
            q.msgs.push_back(msg);
        }
        self.pins_ready.notify_one();
        let mut w = self.pin_writer.lock().unwrap_or_else(|e| e.into_inner());
        if w.is_none() {
            let me = self.clone();
            match std::thread::Builder::new()
                .name("ofconn-pin".into())
                .spawn(move || me.write_packet_ins())
            {
                Ok(h) => *w = Some(h),
                Err(e) => tracing::warn!("cannot start a packet-in writer: {e}"),
            }
        }
        true
    }

    /// The writer thread: sends queued packet-ins until the connection ends.
    fn write_packet_ins(&self) {
        loop {
            let batch: Vec<Vec<u8>> = {
                let q = self.pins.lock().unwrap_or_else(|e| e.into_inner());
                let mut q = self
                    .pins_ready
                    .wait_while(q, |q| q.msgs.is_empty() && !q.closed)
                    .unwrap_or_else(|e| e.into_inner());
                if q.closed {
                    return;
                }
                q.msgs.drain(..).collect()
            };
            for m in batch {
                if self.write(&m).is_err() {
                    return;
                }
            }
        }
    }

    /// Ends the packet-in writer (after the socket was shut down, so a blocked write fails).
    fn close(&self) {
        self.pins.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.pins_ready.notify_all();
        let h = self
            .pin_writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }
}

/// What the threads share.
struct Shared {
    bridge: Arc<dyn OfBridge>,
    stop: AtomicBool,
    next_id: AtomicU64,
    /// Live connections: id, a clone of the socket (to shut it down), the thread.
    conns: Mutex<Vec<Conn>>,
    /// Packet-ins dropped because a connection's queue was full.
    pins_dropped: AtomicU64,
    /// Packet-ins queued for a connection.
    pins_sent: AtomicU64,
}

/// The running listeners of one bridge (see the module doc).
pub struct OfServer {
    shared: Arc<Shared>,
    listeners: Vec<(Listen, JoinHandle<()>)>,
    sockets: Vec<PathBuf>,
    dispatcher: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for OfServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfServer")
            .field("bridge", &self.shared.bridge.name())
            .field("listening", &self.addrs())
            .finish_non_exhaustive()
    }
}

impl OfServer {
    /// The management socket of `bridge` in `rundir`: `RUNDIR/<name>.mgmt`.
    pub fn mgmt_path(rundir: &Path, bridge: &str) -> PathBuf {
        rundir.join(format!("{bridge}.mgmt"))
    }

    /// Serves `bridge` on its management socket `RUNDIR/<name>.mgmt` and on `targets`
    /// (`punix:PATH`, `ptcp:PORT[:IP]`).
    pub fn start_bridge(
        bridge: Arc<dyn OfBridge>,
        rundir: &Path,
        targets: &[String],
    ) -> Result<OfServer, ServerError> {
        let mut ls = vec![(Listen::Unix(Self::mgmt_path(rundir, bridge.name())), true)];
        for t in targets {
            ls.push((Listen::parse(t)?, false));
        }
        Self::start_kinds(bridge, &ls)
    }

    /// Serves `bridge` on `listens`, every connection a service connection (as the
    /// management socket's). A stale socket file at a unix path is replaced; the new one is
    /// made owner-only (mode 0600).
    pub fn start(bridge: Arc<dyn OfBridge>, listens: &[Listen]) -> Result<OfServer, ServerError> {
        let ls: Vec<(Listen, bool)> = listens.iter().map(|l| (l.clone(), true)).collect();
        Self::start_kinds(bridge, &ls)
    }

    /// [`Self::start`] with each listener's kind: `true` for service connections (the
    /// management socket), `false` for primary ones (the `Controller` targets).
    fn start_kinds(
        bridge: Arc<dyn OfBridge>,
        listens: &[(Listen, bool)],
    ) -> Result<OfServer, ServerError> {
        let shared = Arc::new(Shared {
            bridge,
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
            pins_dropped: AtomicU64::new(0),
            pins_sent: AtomicU64::new(0),
        });
        let mut server = OfServer {
            shared,
            listeners: Vec::new(),
            sockets: Vec::new(),
            dispatcher: None,
        };
        let sh = server.shared.clone();
        let d = std::thread::Builder::new()
            .name(format!("ofpin-{}", server.shared.bridge.name()))
            .spawn(move || dispatch_packet_ins(&sh))
            .map_err(|source| ServerError::Io {
                what: "the packet-in dispatcher".into(),
                source,
            })?;
        server.dispatcher = Some(d);
        for (l, service) in listens {
            let service = *service;
            let io = |source| ServerError::Io {
                what: l.to_string(),
                source,
            };
            let listener = match l {
                Listen::Unix(path) => {
                    match std::fs::remove_file(path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == ErrorKind::NotFound => {}
                        Err(e) => return Err(io(e)),
                    }
                    let u = UnixListener::bind(path).map_err(io)?;
                    server.sockets.push(path.clone());
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                        .map_err(io)?;
                    Listener::Unix(u, path.clone())
                }
                Listen::Tcp(addr) => {
                    let t = TcpListener::bind(addr).map_err(io)?;
                    let a = t.local_addr().map_err(io)?;
                    Listener::Tcp(t, a)
                }
            };
            let actual = match &listener {
                Listener::Unix(_, p) => Listen::Unix(p.clone()),
                Listener::Tcp(_, a) => Listen::Tcp(*a),
            };
            let sh = server.shared.clone();
            let name = format!("ofserver-{}", server.shared.bridge.name());
            let h = std::thread::Builder::new()
                .name(name)
                .spawn(move || accept_loop(&sh, listener, service))
                .map_err(io)?;
            server.listeners.push((actual, h));
        }
        Ok(server)
    }

    /// The addresses listened on (a `ptcp:0` target shows its real port).
    pub fn addrs(&self) -> Vec<Listen> {
        self.listeners.iter().map(|(l, _)| l.clone()).collect()
    }

    /// Connections open now.
    pub fn n_connections(&self) -> usize {
        self.shared
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Tells every connection that takes them of port changes (`OFPT_PORT_STATUS`), in
    /// order, through the connections' asynchronous-message writers.
    pub fn port_status(&self, changes: &[crate::ofconn::PortChange]) {
        let conns: Vec<Arc<ConnShared>> = live_conns(&self.shared);
        for c in &conns {
            for ch in changes {
                let msg = c
                    .conn
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .port_status(ch);
                if let Some(m) = msg
                    && !c.queue_packet_in(m)
                {
                    self.shared.pins_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Packet-ins dropped because a connection's queue ([`CONN_PACKET_IN_MAX`]) was full.
    pub fn packet_ins_dropped(&self) -> u64 {
        self.shared.pins_dropped.load(Ordering::Relaxed)
    }

    /// Packet-ins queued for a connection (one per connection that took it).
    pub fn packet_ins_sent(&self) -> u64 {
        self.shared.pins_sent.load(Ordering::Relaxed)
    }

    /// Stops listening, closes every connection, joins every thread and removes the socket
    /// files.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.bridge.shared().packet_ins().wake();
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
        for (l, h) in self.listeners.drain(..) {
            // Wake the blocked accept() with a connection of our own. If that fails (the
            // socket file was removed behind our back), the thread is left to end with the
            // process rather than joined forever.
            let woke = match &l {
                Listen::Unix(p) => UnixStream::connect(p).is_ok(),
                Listen::Tcp(a) => {
                    let mut a = *a;
                    if a.ip().is_unspecified() {
                        a.set_ip(if a.is_ipv4() {
                            std::net::Ipv4Addr::LOCALHOST.into()
                        } else {
                            std::net::Ipv6Addr::LOCALHOST.into()
                        });
                    }
                    TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok()
                }
            };
            if woke {
                let _ = h.join();
            } else {
                tracing::warn!(
                    bridge = self.shared.bridge.name(),
                    "cannot wake the listener on {l}; not waiting for it"
                );
            }
        }
        let conns: Vec<_> = {
            let mut c = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
            c.iter_mut()
                .map(|(_, s, h, _)| {
                    s.shutdown();
                    h.take()
                })
                .collect()
        };
        for h in conns.into_iter().flatten() {
            let _ = h.join();
        }
        for p in self.sockets.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for OfServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Takes the bridge's asynchronous messages (packet-ins; removed rules that asked for it
/// with `send_flow_rem`) and queues each for every connection that wants it, encoded in
/// that connection's version and format; never blocks on a connection.
fn dispatch_packet_ins(sh: &Arc<Shared>) {
    let pins = sh.bridge.shared().packet_ins();
    let _attached = pins.attach();
    while !sh.stop.load(Ordering::SeqCst) {
        let batch = pins.wait_pop(Duration::from_millis(100));
        if batch.is_empty() {
            continue;
        }
        let conns = live_conns(sh);
        for m in &batch {
            // An expired rule is checked here for `send_flow_rem`; a deleted one was checked
            // by the connection that deleted it (its flags are gone by now).
            if let AsyncMsg::FlowRemoved(f) = m
                && f.reason != 2
                && !sh
                    .bridge
                    .flow_flags()
                    .sends_flow_removed(f.table, f.priority, &f.match_)
            {
                continue;
            }
            for c in &conns {
                let conn = c.conn.lock().unwrap_or_else(|e| e.into_inner());
                let msg = match m {
                    AsyncMsg::PacketIn(p) => conn.packet_in(p),
                    AsyncMsg::FlowRemoved(f) => conn.flow_removed(f),
                };
                drop(conn);
                if let Some(m) = msg {
                    if c.queue_packet_in(m) {
                        sh.pins_sent.fetch_add(1, Ordering::Relaxed);
                    } else {
                        sh.pins_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

/// The connections whose threads still run.
fn live_conns(sh: &Shared) -> Vec<Arc<ConnShared>> {
    sh.conns
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(_, _, h, _)| h.as_ref().is_some_and(|h| !h.is_finished()))
        .map(|(_, _, _, c)| c.clone())
        .collect()
}

fn accept_loop(sh: &Arc<Shared>, listener: Listener, service: bool) {
    loop {
        let accepted = match &listener {
            Listener::Unix(l, _) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l, _) => l.accept().map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        };
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        let stream = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(bridge = sh.bridge.name(), "accept failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        let mut conns = sh.conns.lock().unwrap_or_else(|e| e.into_inner());
        // Forget connections that ended (their threads are done or finishing).
        conns.retain(|(_, _, h, _)| h.as_ref().is_some_and(|h| !h.is_finished()));
        if conns.len() >= MAX_CONNECTIONS {
            tracing::warn!(bridge = sh.bridge.name(), "too many OpenFlow connections");
            stream.shutdown();
            continue;
        }
        let (Ok(clone), Ok(writer)) = (stream.try_clone(), stream.try_clone()) else {
            continue;
        };
        let mut conn = OfConn::new(sh.bridge.clone());
        if !service {
            conn.set_primary();
        }
        let cs = Arc::new(ConnShared {
            conn: Mutex::new(conn),
            writer: Mutex::new(writer),
            pins: Mutex::new(PinQueue::default()),
            pins_ready: Condvar::new(),
            pin_writer: Mutex::new(None),
        });
        let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
        let sh2 = sh.clone();
        let cs2 = cs.clone();
        let h = std::thread::Builder::new()
            .name(format!("ofconn-{}-{id}", sh.bridge.name()))
            .spawn(move || serve(&sh2, stream, &cs2));
        match h {
            Ok(h) => conns.push((id, clone, Some(h), cs)),
            Err(e) => tracing::warn!(bridge = sh.bridge.name(), "cannot spawn: {e}"),
        }
    }
}

/// Drives one connection until the peer closes, the stream breaks or the server stops.
fn serve(sh: &Arc<Shared>, mut stream: Stream, cs: &Arc<ConnShared>) {
    let lock = || cs.conn.lock().unwrap_or_else(|e| e.into_inner());
    let hello = lock().hello();
    if cs.write(&hello).is_ok() {
        converse(sh, &mut stream, cs);
    }
    lock().end();
    stream.shutdown();
    cs.close();
}

/// The reading side of [`serve`]: messages in, replies out, until the connection ends.
fn converse(sh: &Arc<Shared>, stream: &mut Stream, cs: &Arc<ConnShared>) {
    let lock = || cs.conn.lock().unwrap_or_else(|e| e.into_inner());
    let mut buf = vec![0u8; READ_CHUNK];
    // Whether reads time out after BATCH_PAUSE. Set when flow mods are held back (a pause of
    // the peer ends the batch) and cleared only when a read times out with nothing held
    // back: a peer that sends a flow mod per round trip (`ovs-ofctl add-flows`) keeps the
    // timeout set instead of costing two `setsockopt`s per flow mod; an idle connection
    // wakes once more and then blocks.
    let mut waiting = false;
    while !sh.stop.load(Ordering::Relaxed) {
        if lock().pending_flow_mods() > 0 && !waiting {
            if stream.set_read_timeout(Some(BATCH_PAUSE)).is_err() {
                break;
            }
            waiting = true;
        }
        let read = stream.read(&mut buf);
        let mut conn = lock();
        let out = match read {
            Ok(0) => {
                let out = conn.flush();
                drop(conn);
                let _ = cs.write(&out);
                return;
            }
            Ok(n) => {
                let mut out = conn.feed_deferred(&buf[..n]);
                if conn.pending_flow_mods() >= MAX_BATCH {
                    out.extend(conn.flush());
                }
                out
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if conn.pending_flow_mods() == 0 {
                    if stream.set_read_timeout(None).is_err() {
                        break;
                    }
                    waiting = false;
                }
                conn.flush()
            }
            Err(_) => {
                conn.flush();
                break;
            }
        };
        let closed = conn.closed().map(str::to_owned);
        drop(conn);
        if !out.is_empty() && cs.write(&out).is_err() {
            break;
        }
        if let Some(why) = closed {
            tracing::info!(
                bridge = sh.bridge.name(),
                "closing OpenFlow connection: {why}"
            );
            break;
        }
    }
    // Flow mods still held back were received: apply them (their replies may go nowhere).
    let out = lock().flush();
    if !out.is_empty() {
        let _ = cs.write(&out);
    }
}
