//! The `ovs-appctl` control socket: OVS's `lib/unixctl.c` server, in Rust.
//!
//! # Protocol (as observed on real `ovs-vswitchd` 3.1)
//!
//! JSON-RPC 1.0 over a unix stream socket, messages back to back with no delimiter. A
//! request is `{"method": NAME, "params": [STRING…], "id": ID}` (`ovs-appctl` sends exactly
//! that); the reply is, byte for byte as OVS writes it,
//!
//! * `{"id":ID,"result":TEXT,"error":null}` on success, and
//! * `{"id":ID,"error":TEXT}` on failure (OVS's C jsonrpc writes no `result` member).
//!
//! A non-empty TEXT that does not end in a newline gets one (OVS's `unixctl_command_reply__`
//! does the same), so `ovs-appctl` prints it as a line. Errors are worded as OVS words them:
//!
//! * `"NAME" is not a valid command (use "list-commands" to see a list of valid commands)`
//! * `"NAME" command requires at least N arguments`, `"NAME" command takes at most N arguments`
//! * `"NAME" command has non-string argument`
//!
//! checked in that order (so a command taking no arguments given one non-string argument
//! says "takes at most 0 arguments", as OVS does). A connection carries any number of
//! requests, answered in order. What OVS does not answer but drops the connection for, this
//! server drops it for too: bytes that are not JSON (or not UTF-8), a top-level value that is not an object,
//! an object with members other than `method`/`params`/`id`, a `params` that is not an
//! array, a missing or `null` id (a notification), a reply sent to the server, and, unlike
//! OVS which has no bound, a message longer than [`MAX_MESSAGE`]. OVS's unixctl server does
//! not answer the JSON-RPC `echo` method (it says `"echo" is not a valid command`); neither
//! does this one, unless a command named `echo` is registered.
//!
//! # Threads and shutdown
//!
//! [`Server::bind`] binds the socket and starts one accept thread; each connection gets its
//! own thread (at most [`MAX_CONNECTIONS`] at once; more are accepted and closed at once),
//! blocked in `accept`/`read` while idle (no polling).
//! Handlers run on the connection's thread, with no lock held (the registry lock is released
//! before a handler runs), so a handler may register further commands; a handler that
//! panics gets an error reply, not a dead server. [`Server::shutdown`] (also run on drop)
//! stops the threads, joins them and removes the socket file: it shuts the listening socket
//! down (which wakes `accept` on Linux) and every connection's socket (which wakes its
//! `read`); a handler still running is waited for.
//!
//! # The socket file
//!
//! The socket is owner-only (`0700`; real OVS leaves it `0750`, group-readable via the
//! umask). To have no window in which it is more open, it is bound inside a fresh private
//! (`0700`) directory next to the final path, its mode set, then renamed into place. If that
//! temporary path would be too long for `sun_path`, the socket is bound in place and its mode
//! set right after. A stale socket file (nobody accepts on it) is replaced; a live one is
//! `AddrInUse`.
//!
//! Built-in commands: `list-commands` (OVS's `"  %-23s %s\n"` table, sorted) and `version`
//! (see [`VERSION`]).

use ovsdb::jsonrpc::Decoder;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// The longest request accepted, in bytes; a longer one closes the connection.
pub const MAX_MESSAGE: usize = 4 << 20;
/// How many connections are served at once; further ones are closed on accept.
pub const MAX_CONNECTIONS: usize = 64;
/// How long the accept thread waits after an unexpected `accept` failure (out of file
/// descriptors, say) before trying again.
const POLL: Duration = Duration::from_millis(100);
/// How long a reply may wait for a client that does not read it before the connection is
/// dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What `version` answers: OVS's `PROGRAM (PACKAGE) VERSION` shape, with the package naming
/// flowswitch and the last word the OVS version whose behaviour is reproduced (scripts that
/// take the last word of `ovs-vswitchd --version` keep working).
pub const VERSION: &str = concat!(
    "ovs-vswitchd (flowswitch ",
    env!("CARGO_PKG_VERSION"),
    ", Open vSwitch compatible) 3.1.0"
);

/// A command's handler: the arguments (the method name not included) to the reply text, or
/// to the error text.
pub type Handler = dyn Fn(&[String]) -> Result<String, String> + Send + Sync + 'static;

struct Command {
    usage: String,
    min_args: usize,
    max_args: usize,
    handler: Arc<Handler>,
}

/// The registered commands; shared by the server and whoever registers commands.
#[derive(Default)]
pub struct Registry {
    commands: RwLock<BTreeMap<String, Command>>,
    /// Requests run ([`Registry::execute`] calls): OVS's `unixctl_received` event.
    pub received: std::sync::atomic::AtomicU64,
    /// Replies made (result or error): OVS's `unixctl_replied`.
    pub replied: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.read().keys().cloned().collect();
        f.debug_struct("Registry")
            .field("commands", &names)
            .finish()
    }
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Command>> {
        self.commands.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers (or replaces) command `name`, shown by `list-commands` with `usage`,
    /// taking `min_args..=max_args` arguments (`usize::MAX` for no upper bound).
    pub fn register<F>(&self, name: &str, usage: &str, min_args: usize, max_args: usize, handler: F)
    where
        F: Fn(&[String]) -> Result<String, String> + Send + Sync + 'static,
    {
        let cmd = Command {
            usage: usage.to_string(),
            min_args,
            max_args,
            handler: Arc::new(handler),
        };
        self.commands
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string(), cmd);
    }

    /// Removes command `name`; true if it was registered.
    pub fn unregister(&self, name: &str) -> bool {
        self.commands
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
            .is_some()
    }

    /// The registered command names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// `list-commands`' text.
    pub fn list_commands(&self) -> String {
        let mut s = String::from("The available commands are:\n");
        for (name, cmd) in self.read().iter() {
            s.push_str(&format!("  {name:<23} {}\n", cmd.usage));
        }
        s
    }

    /// Runs command `method` with `params` as OVS's `process_command` does: the reply text
    /// or the error text (without the trailing newline the wire form adds).
    pub fn execute(&self, method: &str, params: &[Value]) -> Result<String, String> {
        use std::sync::atomic::Ordering::Relaxed;
        self.received.fetch_add(1, Relaxed);
        let reply = self.run(method, params);
        self.replied.fetch_add(1, Relaxed);
        reply
    }

    fn run(&self, method: &str, params: &[Value]) -> Result<String, String> {
        let handler = {
            let commands = self.read();
            let Some(cmd) = commands.get(method) else {
                return Err(format!(
                    "\"{method}\" is not a valid command (use \"list-commands\" to see a list of valid commands)"
                ));
            };
            if params.len() < cmd.min_args {
                return Err(format!(
                    "\"{method}\" command requires at least {} arguments",
                    cmd.min_args
                ));
            }
            if params.len() > cmd.max_args {
                return Err(format!(
                    "\"{method}\" command takes at most {} arguments",
                    cmd.max_args
                ));
            }
            Arc::clone(&cmd.handler)
        };
        let mut args = Vec::with_capacity(params.len());
        for p in params {
            match p {
                Value::String(s) => args.push(s.clone()),
                _ => return Err(format!("\"{method}\" command has non-string argument")),
            }
        }
        match catch_unwind(AssertUnwindSafe(|| handler(&args))) {
            Ok(r) => r,
            Err(_) => Err(format!("\"{method}\" command failed (internal error)")),
        }
    }
}

/// A connection's thread and a handle on its socket (to wake it at shutdown).
type Conn = (JoinHandle<()>, UnixStream);

/// A running control socket server.
pub struct Server {
    path: PathBuf,
    registry: Arc<Registry>,
    stop: Arc<AtomicBool>,
    /// The listening socket (a second descriptor of it), shut down to wake `accept`.
    listener: UnixListener,
    accept: Mutex<Option<JoinHandle<()>>>,
    conns: Arc<Mutex<Vec<Conn>>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("path", &self.path)
            .field("registry", &self.registry)
            .finish()
    }
}

static TMP_SEQ: AtomicUsize = AtomicUsize::new(0);

/// Binds `path` as an owner-only socket (see the module doc).
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is in use by a running server", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp_dir = parent.join(format!(
        ".fsctl{}.{}",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp_sock = tmp_dir.join("s");
    let mode = std::fs::Permissions::from_mode(0o700);
    if tmp_sock.as_os_str().len() < 100
        && std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp_dir)
            .is_ok()
    {
        let bound = (|| {
            let l = UnixListener::bind(&tmp_sock)?;
            std::fs::set_permissions(&tmp_sock, mode.clone())?;
            std::fs::rename(&tmp_sock, path)?;
            Ok::<_, io::Error>(l)
        })();
        let _ = std::fs::remove_file(&tmp_sock);
        let _ = std::fs::remove_dir(&tmp_dir);
        return bound;
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, mode)?;
    Ok(l)
}

impl Server {
    /// Binds the control socket at `path` and starts serving it, with the built-in
    /// `list-commands` and `version` commands.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<Server> {
        Server::bind_with(path, Arc::new(Registry::default()))
    }

    /// As [`Server::bind`], serving the commands of `registry` (which may be shared).
    pub fn bind_with(path: impl AsRef<Path>, registry: Arc<Registry>) -> io::Result<Server> {
        let path = path.as_ref().to_path_buf();
        {
            let weak = Arc::downgrade(&registry);
            registry.register("list-commands", "", 0, 0, move |_| {
                Ok(weak
                    .upgrade()
                    .map(|r| r.list_commands())
                    .unwrap_or_default())
            });
            registry.register("version", "", 0, 0, |_| Ok(VERSION.to_string()));
        }
        let listener = bind_private(&path)?;
        let wake = listener.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<Conn>>> = Arc::default();
        let accept = {
            let (stop, conns, registry) = (stop.clone(), conns.clone(), registry.clone());
            thread::Builder::new()
                .name("unixctl".into())
                .spawn(move || accept_loop(listener, registry, stop, conns))
        };
        let accept = match accept {
            Ok(a) => a,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        Ok(Server {
            path,
            registry,
            stop,
            listener: wake,
            accept: Mutex::new(Some(accept)),
            conns,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The command registry (to register commands from elsewhere, also after start).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Registers a command; see [`Registry::register`].
    pub fn register<F>(&self, name: &str, usage: &str, min_args: usize, max_args: usize, handler: F)
    where
        F: Fn(&[String]) -> Result<String, String> + Send + Sync + 'static,
    {
        self.registry
            .register(name, usage, min_args, max_args, handler);
    }

    /// Stops serving: the threads end (an open connection is closed, a running handler is
    /// waited for), are joined, and the socket file is removed. Idempotent.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let accept = self
            .accept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(accept) = accept else { return };
        // Wakes the accept thread: on Linux, `accept` on a listening socket that has been
        // shut down fails with EINVAL at once.
        // SAFETY: `shutdown` takes no pointers; the descriptor is `self.listener`'s, open for
        // as long as `self` lives.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        let _ = accept.join();
        let conns = std::mem::take(&mut *self.conns.lock().unwrap_or_else(PoisonError::into_inner));
        for (_, stream) in &conns {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        for (thread, _) in conns {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(
    listener: UnixListener,
    registry: Arc<Registry>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<Conn>>>,
) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let mut conns = conns.lock().unwrap_or_else(PoisonError::into_inner);
                conns.retain(|(h, _)| !h.is_finished());
                if conns.len() >= MAX_CONNECTIONS {
                    tracing::warn!(target: "unixctl", "too many control connections, dropping a new one");
                    continue;
                }
                let Ok(handle) = stream.try_clone() else {
                    continue;
                };
                let (registry, stop) = (registry.clone(), stop.clone());
                let spawned = thread::Builder::new()
                    .name("unixctl".into())
                    .spawn(move || serve_connection(stream, &registry, &stop));
                match spawned {
                    Ok(h) => conns.push((h, handle)),
                    Err(e) => {
                        tracing::warn!(target: "unixctl", "cannot start a connection thread: {e}");
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) if stop.load(Ordering::SeqCst) => return,
            Err(e) => {
                tracing::warn!(target: "unixctl", "accept failed: {e}");
                thread::sleep(POLL);
            }
        }
    }
}

/// Why a connection is dropped without a reply.
fn protocol_error(why: &str) {
    tracing::debug!(target: "unixctl", "closing control connection: {why}");
}

/// A parsed request: method, params, id. `Err` names why the connection must be dropped.
fn parse_request(v: Value) -> Result<(String, Vec<Value>, Value), String> {
    let Value::Object(mut o) = v else {
        return Err("message is not a JSON object".into());
    };
    let method = o.remove("method");
    let params = o.remove("params");
    let id = o.remove("id");
    if let Some(k) = o.keys().next() {
        return Err(format!("message has unexpected member \"{k}\""));
    }
    let Some(method) = method else {
        return Err("received a reply, not a request".into());
    };
    let Value::String(method) = method else {
        return Err("method is not a string".into());
    };
    let Some(Value::Array(params)) = params else {
        return Err("params is missing or not an array".into());
    };
    match id {
        None | Some(Value::Null) => Err(format!("received unexpected notification \"{method}\"")),
        Some(id) => Ok((method, params, id)),
    }
}

/// The reply's bytes, as OVS writes them (see the module doc).
pub fn encode_reply(id: &Value, reply: &Result<String, String>) -> Vec<u8> {
    let with_newline = |s: &str| {
        if s.is_empty() || s.ends_with('\n') {
            s.to_string()
        } else {
            format!("{s}\n")
        }
    };
    let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
    match reply {
        Ok(text) => format!(
            "{{\"id\":{id},\"result\":{},\"error\":null}}",
            Value::String(with_newline(text))
        ),
        Err(text) => format!(
            "{{\"id\":{id},\"error\":{}}}",
            Value::String(with_newline(text))
        ),
    }
    .into_bytes()
}

/// Serves one connection until the peer closes it, it breaks the protocol, or the server
/// stops; then shuts the socket down (the server keeps a second descriptor of it, so
/// dropping this one would not close the connection).
fn serve_connection(mut stream: UnixStream, registry: &Registry, stop: &AtomicBool) {
    serve_requests(&mut stream, registry, stop);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn serve_requests(stream: &mut UnixStream, registry: &Registry, stop: &AtomicBool) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err()
    {
        return;
    }
    let mut decoder = Decoder::with_max(MAX_MESSAGE);
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::SeqCst) {
        let n = match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        decoder.feed(&buf[..n]);
        loop {
            let v = match decoder.next_value() {
                Ok(Some(v)) => v,
                Ok(None) => break,
                Err(e) => return protocol_error(&e.to_string()),
            };
            let (method, params, id) = match parse_request(v) {
                Ok(r) => r,
                Err(why) => return protocol_error(&why),
            };
            let reply = registry.execute(&method, &params);
            if stream.write_all(&encode_reply(&id, &reply)).is_err() {
                return;
            }
        }
    }
}

/// A client for tests and tools: sends one request to the server at `path` and returns its
/// answer: `Ok(Ok(text))` for a result, `Ok(Err(text))` for an error reply (texts as sent,
/// with their trailing newline), `Err` for an I/O or protocol failure.
pub fn call(
    path: impl AsRef<Path>,
    method: &str,
    args: &[&str],
) -> io::Result<Result<String, String>> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let req = serde_json::json!({"method": method, "params": args, "id": 0});
    stream.write_all(req.to_string().as_bytes())?;
    let mut decoder = Decoder::with_max(MAX_MESSAGE);
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a reply",
            ));
        }
        decoder.feed(&buf[..n]);
        let v = decoder
            .next_value()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let Some(Value::Object(o)) = v else {
            if v.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "reply is not an object",
                ));
            }
            continue;
        };
        return match (o.get("error"), o.get("result")) {
            (Some(Value::String(e)), _) => Ok(Err(e.clone())),
            (_, Some(Value::String(r))) => Ok(Ok(r.clone())),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected reply {}", Value::Object(o.clone())),
            )),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_are_worded_as_ovs() {
        let r = Registry::default();
        r.register("two", "a b", 1, 2, |a| Ok(a.join(",")));
        assert_eq!(r.execute("two", &[json!("x")]), Ok("x".into()));
        assert_eq!(
            r.execute("nope", &[]),
            Err("\"nope\" is not a valid command (use \"list-commands\" to see a list of valid commands)".into())
        );
        assert_eq!(
            r.execute("two", &[]),
            Err("\"two\" command requires at least 1 arguments".into())
        );
        assert_eq!(
            r.execute("two", &[json!("a"), json!("b"), json!("c")]),
            Err("\"two\" command takes at most 2 arguments".into())
        );
        assert_eq!(
            r.execute("two", &[json!(1)]),
            Err("\"two\" command has non-string argument".into())
        );
    }

    #[test]
    fn a_panicking_handler_is_an_error_reply() {
        let r = Registry::default();
        r.register("boom", "", 0, 0, |_| panic!("handler bug"));
        assert_eq!(
            r.execute("boom", &[]),
            Err("\"boom\" command failed (internal error)".into())
        );
        // The registry is still usable (no lock was held, none is poisoned).
        r.register("ok", "", 0, 0, |_| Ok("fine".into()));
        assert_eq!(r.execute("ok", &[]), Ok("fine".into()));
    }

    #[test]
    fn replies_are_encoded_as_ovs() {
        assert_eq!(
            encode_reply(&json!(0), &Ok("x".into())),
            br#"{"id":0,"result":"x\n","error":null}"#
        );
        assert_eq!(
            encode_reply(&json!("a"), &Ok(String::new())),
            br#"{"id":"a","result":"","error":null}"#
        );
        assert_eq!(
            encode_reply(&json!(1), &Err("bad\n".into())),
            br#"{"id":1,"error":"bad\n"}"#
        );
    }

    #[test]
    fn bad_requests_are_refused() {
        assert!(parse_request(json!([1])).is_err());
        assert!(parse_request(json!({"method":"a","params":[],"id":null})).is_err());
        assert!(parse_request(json!({"method":"a","params":[]})).is_err());
        assert!(parse_request(json!({"method":"a","params":"x","id":1})).is_err());
        assert!(parse_request(json!({"method":"a","id":1})).is_err());
        assert!(parse_request(json!({"method":"a","params":[],"id":1,"x":2})).is_err());
        assert!(parse_request(json!({"result":"a","error":null,"id":1})).is_err());
        assert!(parse_request(json!({"method":"a","params":[1],"id":[1]})).is_ok());
    }

    #[test]
    fn list_commands_format() {
        let r = Registry::default();
        r.register("b/cmd", "[x]", 0, 1, |_| Ok(String::new()));
        r.register("a", "", 0, 0, |_| Ok(String::new()));
        assert_eq!(
            r.list_commands(),
            "The available commands are:\n  a                       \n  b/cmd                   [x]\n"
        );
    }
}
