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
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::ofconn::{OfBridge, OfConn};

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

/// A live connection: id, a clone of its socket (to shut it down), its thread.
type Conn = (u64, Stream, Option<JoinHandle<()>>);

/// What the threads share.
struct Shared {
    bridge: Arc<dyn OfBridge>,
    stop: AtomicBool,
    next_id: AtomicU64,
    /// Live connections: id, a clone of the socket (to shut it down), the thread.
    conns: Mutex<Vec<Conn>>,
}

/// The running listeners of one bridge (see the module doc).
pub struct OfServer {
    shared: Arc<Shared>,
    listeners: Vec<(Listen, JoinHandle<()>)>,
    sockets: Vec<PathBuf>,
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
        let mut ls = vec![Listen::Unix(Self::mgmt_path(rundir, bridge.name()))];
        for t in targets {
            ls.push(Listen::parse(t)?);
        }
        Self::start(bridge, &ls)
    }

    /// Serves `bridge` on `listens`. A stale socket file at a unix path is replaced; the new
    /// one is made owner-only (mode 0600).
    pub fn start(bridge: Arc<dyn OfBridge>, listens: &[Listen]) -> Result<OfServer, ServerError> {
        let shared = Arc::new(Shared {
            bridge,
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
        });
        let mut server = OfServer {
            shared,
            listeners: Vec::new(),
            sockets: Vec::new(),
        };
        for l in listens {
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
                .spawn(move || accept_loop(&sh, listener))
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

    /// Stops listening, closes every connection, joins every thread and removes the socket
    /// files.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
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
                .map(|(_, s, h)| {
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

fn accept_loop(sh: &Arc<Shared>, listener: Listener) {
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
        conns.retain(|(_, _, h)| h.as_ref().is_some_and(|h| !h.is_finished()));
        if conns.len() >= MAX_CONNECTIONS {
            tracing::warn!(bridge = sh.bridge.name(), "too many OpenFlow connections");
            stream.shutdown();
            continue;
        }
        let Ok(clone) = stream.try_clone() else {
            continue;
        };
        let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
        let sh2 = sh.clone();
        let h = std::thread::Builder::new()
            .name(format!("ofconn-{}-{id}", sh.bridge.name()))
            .spawn(move || serve(&sh2, stream));
        match h {
            Ok(h) => conns.push((id, clone, Some(h))),
            Err(e) => tracing::warn!(bridge = sh.bridge.name(), "cannot spawn: {e}"),
        }
    }
}

/// Drives one connection until the peer closes, the stream breaks or the server stops.
fn serve(sh: &Arc<Shared>, mut stream: Stream) {
    let mut conn = OfConn::new(sh.bridge.clone());
    if stream.write_all(&conn.hello()).is_err() {
        return;
    }
    let mut buf = vec![0u8; READ_CHUNK];
    // Whether reads time out after BATCH_PAUSE. Set when flow mods are held back (a pause of
    // the peer ends the batch) and cleared only when a read times out with nothing held
    // back: a peer that sends a flow mod per round trip (`ovs-ofctl add-flows`) keeps the
    // timeout set instead of costing two `setsockopt`s per flow mod; an idle connection
    // wakes once more and then blocks.
    let mut waiting = false;
    while !sh.stop.load(Ordering::Relaxed) {
        if conn.pending_flow_mods() > 0 && !waiting {
            if stream.set_read_timeout(Some(BATCH_PAUSE)).is_err() {
                break;
            }
            waiting = true;
        }
        let out = match stream.read(&mut buf) {
            Ok(0) => {
                let out = conn.flush();
                let _ = stream.write_all(&out);
                break;
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
        if !out.is_empty() && stream.write_all(&out).is_err() {
            break;
        }
        if let Some(why) = conn.closed() {
            tracing::info!(
                bridge = sh.bridge.name(),
                "closing OpenFlow connection: {why}"
            );
            break;
        }
    }
    // Flow mods still held back were received: apply them (their replies may go nowhere).
    let out = conn.flush();
    if !out.is_empty() {
        let _ = stream.write_all(&out);
    }
    stream.shutdown();
}
