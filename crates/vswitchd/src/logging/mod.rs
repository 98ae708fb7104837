//! OVS's vlog on top of `tracing`: log lines, destinations, per-module levels changed at run
//! time through `ovs-appctl vlog/…`, and rate limiting.
//!
//! # Model
//!
//! Libraries log with plain `tracing` macros. The daemon calls [`init`] once; it installs a
//! `tracing` subscriber whose only layer, [`VlogLayer`], plays OVS's `vlog`:
//!
//! * A message's **module** is its target's last `::` segment (`vswitchd::bridges` →
//!   `bridges`), so `tracing::info!(target: "bridge", …)` logs as module `bridge`. Modules
//!   are known once declared ([`LogOptions::modules`], [`LogHandle::declare_module`]) or once
//!   one of their call sites has been reached; `vlog/set` refuses an unknown module as OVS
//!   does (`no destination, level, or module "x"`).
//! * **Levels** are OVS's: `OFF`, `EMER`, `ERR`, `WARN`, `INFO`, `DBG`; `tracing`'s `ERROR`,
//!   `WARN`, `INFO` map to `ERR`, `WARN`, `INFO`, and `DEBUG` and `TRACE` to `DBG` (nothing
//!   logs at `EMER` through `tracing`; setting a destination to `EMER` silences all but it).
//!   Each module has one level per destination; the defaults are OVS's: `INFO` everywhere
//!   (the daemon sets console to `OFF` when it detaches, as OVS's `close_standard_fds`
//!   does). A call site whose level no destination wants is disabled in `tracing`'s
//!   interest cache, which is rebuilt when levels change: a disabled `debug!` costs a load
//!   and a branch.
//! * **Destinations**: console (stderr), file (`--log-file`, reopened by `vlog/reopen` for
//!   logrotate, closed by `vlog/close`) and syslog: a datagram written to `/dev/log` when
//!   that socket exists (nothing is sent otherwise; no `--syslog-target`). The datagram is
//!   OVS's syslog prefix `<%B> %D{%h %e %T} %E %A:` (RFC 3164-like: priority, time, host,
//!   program), a space and the syslog format; facility `daemon` unless `FACILITY:` says
//!   otherwise.
//! * **Lines** are OVS's default patterns ([`pattern`]): file
//!   `2026-11-26T00:47:12.345Z|00001|bridge|INFO|message`, console without the
//!   milliseconds; `%T` adds `(thread)` for named threads other than `main`, as OVS does for
//!   its handler threads. The message number counts messages written anywhere. Fields
//!   other than `message` are appended as ` key=value`.
//!
//! # Control commands ([`register_commands`])
//!
//! `vlog/set [SPEC…]` (each SPEC `module`, `destination`, `level` or `ANY` joined by `:`, `,`
//! or spaces, in any order; a missing destination means all, a missing level `dbg`; no SPEC
//! at all sets everything to `dbg`; `PATTERN:destination:pattern`; `FACILITY:facility`),
//! `vlog/list`, `vlog/list-pattern`, `vlog/reopen`, `vlog/close`,
//! `vlog/enable-rate-limit [module]...`, `vlog/disable-rate-limit [module]...`, with OVS's
//! texts and errors.
//!
//! # Rate limiting
//!
//! [`RateLimiter`] and the `rl_err!`, `rl_warn!`, `rl_info!`, `rl_dbg!` macros (see
//! [`ratelimit`]).
//!
//! # Differences from OVS
//!
//! * Modules come into being at run time (declared, or at their first call site), not at
//!   link time: `vlog/list` shows fewer modules until the daemon has run its code paths, and
//!   `vlog/set` of a module not yet known fails until it is (declare the daemon's modules in
//!   [`LogOptions::modules`] to avoid that).
//! * Control commands run on the unixctl connection threads (named `unixctl`), so a message
//!   logged by a command handler reads `module(unixctl)`, where OVS, running them on its main
//!   thread, writes `module`.
//! * `%d` is UTC like `%D` (OVS: local time); spans are not logged (they are disabled).
//! * Syslog is only `/dev/log` (no `--syslog-method`, no `--syslog-target`); facilities as
//!   OVS names them, plus `authpriv`.

pub mod pattern;
pub mod ratelimit;

#[doc(hidden)]
pub use tracing as __tracing;

pub use pattern::Pattern;
pub use ratelimit::{RateLimiter, Verdict, monotonic_ms};

use crate::unixctl::{Registry, Server};
use pattern::Record;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Instant, SystemTime};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// An OVS log level, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Nothing is logged.
    Off = 0,
    /// Emergencies only.
    Emer = 1,
    /// Errors.
    Err = 2,
    /// Warnings.
    Warn = 3,
    /// Information.
    Info = 4,
    /// Debugging.
    Dbg = 5,
}

const LEVELS: [Level; 6] = [
    Level::Off,
    Level::Emer,
    Level::Err,
    Level::Warn,
    Level::Info,
    Level::Dbg,
];

impl Level {
    /// OVS's name (`INFO`, `DBG`, …).
    pub fn name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Emer => "EMER",
            Level::Err => "ERR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Dbg => "DBG",
        }
    }

    /// The level named `s` (case-insensitive), as `vlog/set` reads it.
    pub fn from_name(s: &str) -> Option<Level> {
        LEVELS
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s))
    }

    /// The level a `tracing` level logs at.
    pub fn from_tracing(l: &tracing::Level) -> Level {
        match *l {
            tracing::Level::ERROR => Level::Err,
            tracing::Level::WARN => Level::Warn,
            tracing::Level::INFO => Level::Info,
            _ => Level::Dbg,
        }
    }

    fn from_u8(v: u8) -> Level {
        LEVELS[(v as usize).min(5)]
    }

    /// Syslog severity.
    fn severity(self) -> u32 {
        match self {
            Level::Off | Level::Emer => 0,
            Level::Err => 3,
            Level::Warn => 4,
            Level::Info => 6,
            Level::Dbg => 7,
        }
    }
}

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Destination {
    /// Standard error.
    Console = 0,
    /// `/dev/log`.
    Syslog = 1,
    /// The log file.
    File = 2,
}

const DESTINATIONS: [Destination; 3] =
    [Destination::Console, Destination::Syslog, Destination::File];

impl Destination {
    /// OVS's name (`console`, `syslog`, `file`).
    pub fn name(self) -> &'static str {
        match self {
            Destination::Console => "console",
            Destination::Syslog => "syslog",
            Destination::File => "file",
        }
    }

    /// The destination named `s` (case-insensitive).
    pub fn from_name(s: &str) -> Option<Destination> {
        DESTINATIONS
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
    }
}

const FACILITIES: [(&str, u32); 20] = [
    ("kern", 0),
    ("user", 1),
    ("mail", 2),
    ("daemon", 3),
    ("auth", 4),
    ("syslog", 5),
    ("lpr", 6),
    ("news", 7),
    ("uucp", 8),
    ("clock", 9),
    ("authpriv", 10),
    ("ftp", 11),
    ("ntp", 12),
    ("audit", 13),
    ("alert", 14),
    ("clock2", 15),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
];

fn facility_from_name(s: &str) -> Option<u32> {
    if let Some(n) = s.strip_prefix("local").and_then(|n| n.parse::<u32>().ok())
        && n <= 7
    {
        return Some(16 + n);
    }
    FACILITIES.iter().find(|(n, _)| *n == s).map(|(_, v)| *v)
}

/// How [`init`] sets logging up.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Program name (`%A`, syslog), `ovs-vswitchd` by default.
    pub program: String,
    /// The log file (`--log-file[=PATH]`, already resolved), none by default.
    pub log_file: Option<PathBuf>,
    /// The syslog socket, `/dev/log` by default; used only if it exists.
    pub syslog_socket: Option<PathBuf>,
    /// Modules known from the start (so `vlog/set` accepts them before they have logged).
    pub modules: Vec<String>,
    /// `-v`/`--verbose` arguments, applied in order after the defaults (each as one
    /// `vlog/set` argument; `""` sets everything to `dbg`).
    pub specs: Vec<String>,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            program: "ovs-vswitchd".into(),
            log_file: None,
            syslog_socket: Some(PathBuf::from("/dev/log")),
            modules: Vec::new(),
            specs: Vec::new(),
        }
    }
}

#[derive(Debug)]
struct Module {
    levels: [AtomicU8; 3],
    /// False after `vlog/disable-rate-limit`: the `rl_*` macros then log everything.
    honor_rate_limits: AtomicBool,
}

impl Module {
    fn new(levels: [Level; 3]) -> Module {
        Module {
            levels: levels.map(|l| AtomicU8::new(l as u8)),
            honor_rate_limits: AtomicBool::new(true),
        }
    }

    fn level(&self, d: Destination) -> Level {
        Level::from_u8(self.levels[d as usize].load(Ordering::Relaxed))
    }

    fn max(&self) -> Level {
        DESTINATIONS
            .into_iter()
            .map(|d| self.level(d))
            .max()
            .unwrap_or(Level::Off)
    }
}

#[derive(Debug, Default)]
struct FileDest {
    path: Option<PathBuf>,
    file: Option<File>,
}

#[derive(Debug)]
struct Modules {
    by_name: HashMap<String, Arc<Module>>,
    defaults: [Level; 3],
}

#[derive(Debug)]
struct State {
    program: String,
    hostname: String,
    pid: u32,
    start: Instant,
    seq: AtomicU64,
    facility: AtomicU32,
    modules: RwLock<Modules>,
    /// Console, syslog, file formats.
    patterns: RwLock<[Pattern; 3]>,
    syslog_prefix: Pattern,
    file: Mutex<FileDest>,
    syslog: Option<(UnixDatagram, PathBuf)>,
}

/// The module a target logs as: its last `::` segment.
pub fn module_of(target: &str) -> &str {
    target.rsplit("::").next().unwrap_or(target)
}

impl State {
    fn module(&self, name: &str) -> Arc<Module> {
        if let Some(m) = self
            .modules
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_name
            .get(name)
        {
            return m.clone();
        }
        let mut w = self.modules.write().unwrap_or_else(PoisonError::into_inner);
        let defaults = w.defaults;
        w.by_name
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(Module::new(defaults)))
            .clone()
    }

    fn find_module(&self, name: &str) -> Option<String> {
        let r = self.modules.read().unwrap_or_else(PoisonError::into_inner);
        r.by_name
            .keys()
            .find(|k| k.eq_ignore_ascii_case(name))
            .cloned()
    }

    fn honors_rate_limits(&self, module: &str) -> bool {
        let r = self.modules.read().unwrap_or_else(PoisonError::into_inner);
        r.by_name
            .get(module)
            .is_none_or(|m| m.honor_rate_limits.load(Ordering::Relaxed))
    }

    fn wants(&self, meta: &Metadata<'_>) -> bool {
        self.module(module_of(meta.target())).max() >= Level::from_tracing(meta.level())
    }

    /// Writes one message to the destinations whose level for `module` admits it, as
    /// logged by the current thread (`%T`).
    fn log(&self, module: &str, level: Level, message: &str) {
        let thread = std::thread::current();
        self.log_as(module, level, message, thread.name());
    }

    /// [`State::log`] with the thread name given (`None`: as the main thread).
    fn log_as(&self, module: &str, level: Level, message: &str, thread: Option<&str>) {
        if level == Level::Off {
            return;
        }
        let m = self.module(module);
        let on = DESTINATIONS.map(|d| m.level(d) >= level);
        let file_open = on[2]
            && self
                .file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .file
                .is_some();
        let syslog_on = on[1] && self.syslog.is_some();
        if !on[0] && !syslog_on && !file_open {
            return;
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let rec = Record {
            program: &self.program,
            hostname: &self.hostname,
            priority: self.facility.load(Ordering::Relaxed) * 8 + level.severity(),
            module,
            level,
            message,
            seq,
            pid: self.pid,
            uptime_ms: self.start.elapsed().as_millis() as u64,
            thread,
            time: SystemTime::now(),
        };
        let patterns = self.patterns.read().unwrap_or_else(PoisonError::into_inner);
        let mut line = String::new();
        if on[0] {
            patterns[0].render(&rec, &mut line);
            line.push('\n');
            let _ = io::stderr().lock().write_all(line.as_bytes());
        }
        if syslog_on && let Some((sock, path)) = &self.syslog {
            line.clear();
            self.syslog_prefix.render(&rec, &mut line);
            line.push(' ');
            patterns[1].render(&rec, &mut line);
            let _ = sock.send_to(line.as_bytes(), path);
        }
        if file_open {
            line.clear();
            patterns[2].render(&rec, &mut line);
            line.push('\n');
            let mut f = self.file.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(file) = f.file.as_mut() {
                let _ = file.write_all(line.as_bytes());
            }
        }
    }
}

/// The running logging configuration: cheap to clone, shared with the unixctl commands.
#[derive(Debug, Clone)]
pub struct LogHandle {
    state: Arc<State>,
}

/// The `tracing` layer that writes vlog lines (see the module doc).
#[derive(Debug, Clone)]
pub struct VlogLayer {
    state: Arc<State>,
}

struct MessageVisitor<'a>(&'a mut String, &'a mut String);

impl tracing::field::Visit for MessageVisitor<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.1, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.1, " {}={:?}", field.name(), value);
        }
    }
}

impl<S: Subscriber> Layer<S> for VlogLayer {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.is_span() {
            return Interest::never();
        }
        if self.state.wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        !meta.is_span() && self.state.wants(meta)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let (mut msg, mut rest) = (String::new(), String::new());
        event.record(&mut MessageVisitor(&mut msg, &mut rest));
        msg.push_str(&rest);
        self.state.log(
            module_of(meta.target()),
            Level::from_tracing(meta.level()),
            &msg,
        );
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn open_log_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
}

impl LogHandle {
    /// Sets logging up as `opts` says, without installing it (see [`LogHandle::subscriber`],
    /// [`init`]). Fails if the log file cannot be opened or a spec is invalid.
    pub fn new(opts: LogOptions) -> io::Result<LogHandle> {
        let syslog = opts
            .syslog_socket
            .filter(|p| p.exists())
            .and_then(|p| UnixDatagram::unbound().ok().map(|s| (s, p)));
        if let Some((s, _)) = &syslog {
            let _ = s.set_nonblocking(true);
        }
        let state = State {
            program: opts.program,
            hostname: hostname(),
            pid: std::process::id(),
            start: Instant::now(),
            seq: AtomicU64::new(0),
            facility: AtomicU32::new(3),
            modules: RwLock::new(Modules {
                by_name: HashMap::new(),
                defaults: [Level::Info; 3],
            }),
            patterns: RwLock::new([
                Pattern::parse(pattern::CONSOLE_DEFAULT),
                Pattern::parse(pattern::SYSLOG_DEFAULT),
                Pattern::parse(pattern::FILE_DEFAULT),
            ]),
            syslog_prefix: Pattern::parse(pattern::SYSLOG_PREFIX),
            file: Mutex::new(FileDest::default()),
            syslog,
        };
        let h = LogHandle {
            state: Arc::new(state),
        };
        for m in ["vlog", "unixctl"]
            .iter()
            .map(|s| s.to_string())
            .chain(opts.modules)
        {
            h.declare_module(&m);
        }
        for spec in &opts.specs {
            h.set_spec(spec)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        }
        if let Some(path) = opts.log_file {
            h.set_log_file(Some(&path))?;
        }
        Ok(h)
    }

    /// The layer writing this configuration's lines.
    pub fn layer(&self) -> VlogLayer {
        VlogLayer {
            state: self.state.clone(),
        }
    }

    /// A subscriber with just [`LogHandle::layer`] (for `tracing::subscriber::with_default`
    /// in tests; [`init`] installs it globally).
    pub fn subscriber(&self) -> impl Subscriber + Send + Sync + 'static {
        tracing_subscriber::registry().with(self.layer())
    }

    /// Makes `name` a known module (with the current default levels) if it is not one yet.
    pub fn declare_module(&self, name: &str) {
        self.state.module(name);
    }

    /// The known modules, sorted.
    pub fn modules(&self) -> Vec<String> {
        let r = self
            .state
            .modules
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let mut v: Vec<String> = r.by_name.keys().cloned().collect();
        v.sort();
        v
    }

    /// `module`'s level at `destination` (`None` if the module is unknown).
    pub fn level(&self, module: &str, destination: Destination) -> Option<Level> {
        let r = self
            .state
            .modules
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        r.by_name.get(module).map(|m| m.level(destination))
    }

    /// Sets the level of `module` (all modules, and the default of those not yet known, if
    /// `None`) at `destination` (all if `None`), as OVS's `vlog_set_levels`.
    pub fn set_level(&self, module: Option<&str>, destination: Option<Destination>, level: Level) {
        let dests: Vec<Destination> = match destination {
            Some(d) => vec![d],
            None => DESTINATIONS.to_vec(),
        };
        {
            let mut w = self
                .state
                .modules
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let apply = |m: &Module| {
                for d in &dests {
                    m.levels[*d as usize].store(level as u8, Ordering::Relaxed);
                }
            };
            match module {
                Some(name) => {
                    let defaults = w.defaults;
                    let m = w
                        .by_name
                        .entry(name.to_string())
                        .or_insert_with(|| Arc::new(Module::new(defaults)));
                    apply(m);
                }
                None => {
                    for d in &dests {
                        w.defaults[*d as usize] = level;
                    }
                    w.by_name.values().for_each(|m| apply(m));
                }
            }
        }
        // No lock of ours is held: the rebuild calls back into register_callsite.
        tracing::callsite::rebuild_interest_cache();
    }

    /// Applies one `vlog/set` argument (or `-v` option value), with OVS's errors.
    pub fn set_spec(&self, spec: &str) -> Result<(), String> {
        let is_delim = |c: char| matches!(c, ' ' | ',' | ':' | '\t');
        let trimmed = spec.trim_start_matches(is_delim);
        let (first, rest) = match trimmed.find(is_delim) {
            Some(i) => (&trimmed[..i], Some(&trimmed[i + 1..])),
            None => (trimmed, None),
        };
        if first.eq_ignore_ascii_case("PATTERN") {
            let rest = rest.unwrap_or("").trim_start_matches(is_delim);
            let (word, pat) = match rest.find(is_delim) {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            if word.is_empty() {
                return Err("missing destination".into());
            }
            let dests: Vec<Destination> = if word.eq_ignore_ascii_case("ANY") {
                DESTINATIONS.to_vec()
            } else {
                match Destination::from_name(word) {
                    Some(d) => vec![d],
                    None => return Err(format!("unknown destination \"{word}\"")),
                }
            };
            let mut p = self
                .state
                .patterns
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for d in dests {
                let default = match d {
                    Destination::Console => pattern::CONSOLE_DEFAULT,
                    Destination::Syslog => pattern::SYSLOG_DEFAULT,
                    Destination::File => pattern::FILE_DEFAULT,
                };
                p[d as usize] = Pattern::parse(pat.unwrap_or(default));
            }
            return Ok(());
        }
        if first.eq_ignore_ascii_case("FACILITY") {
            let name = rest.unwrap_or("").trim_matches(is_delim);
            let Some(f) = facility_from_name(name) else {
                return Err("invalid facility".into());
            };
            self.state.facility.store(f, Ordering::Relaxed);
            return Ok(());
        }
        let (mut module, mut level, mut dest) = (None, None, None);
        for word in spec.split(is_delim).filter(|w| !w.is_empty()) {
            if word.eq_ignore_ascii_case("ANY") {
                continue;
            } else if let Some(d) = Destination::from_name(word) {
                if dest.is_some() {
                    return Err("cannot specify multiple destinations".into());
                }
                dest = Some(d);
            } else if let Some(l) = Level::from_name(word) {
                if level.is_some() {
                    return Err("cannot specify multiple levels".into());
                }
                level = Some(l);
            } else if let Some(m) = self.state.find_module(word) {
                if module.is_some() {
                    return Err("cannot specify multiple modules".into());
                }
                module = Some(m);
            } else {
                return Err(format!("no destination, level, or module \"{word}\""));
            }
        }
        self.set_level(module.as_deref(), dest, level.unwrap_or(Level::Dbg));
        Ok(())
    }

    /// `vlog/list`'s table.
    pub fn list(&self) -> String {
        let mut s = String::from(
            "                 console    syslog    file\n                 -------    ------    ------\n",
        );
        let r = self
            .state
            .modules
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let sorted: BTreeMap<&String, &Arc<Module>> = r.by_name.iter().collect();
        for (name, m) in sorted {
            let _ = write!(
                s,
                "{name:<16}  {:>4}       {:>4}       {:>4}",
                m.level(Destination::Console).name(),
                m.level(Destination::Syslog).name(),
                m.level(Destination::File).name()
            );
            if !m.honor_rate_limits.load(Ordering::Relaxed) {
                s.push_str("    (rate limiting disabled)");
            }
            s.push('\n');
        }
        s
    }

    /// `vlog/enable-rate-limit` (`enable`) or `vlog/disable-rate-limit`: for the named
    /// modules (case-insensitive), all if none; stops at the first unknown one with OVS's
    /// `unknown module` (those before it are changed, as in OVS).
    pub fn set_rate_limits(&self, modules: &[String], enable: bool) -> Result<(), String> {
        if modules.is_empty() {
            let r = self
                .state
                .modules
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            for m in r.by_name.values() {
                m.honor_rate_limits.store(enable, Ordering::Relaxed);
            }
            return Ok(());
        }
        for name in modules {
            let Some(name) = self.state.find_module(name) else {
                return Err("unknown module".into());
            };
            self.state
                .module(&name)
                .honor_rate_limits
                .store(enable, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether the `rl_*` macros rate-limit `module` (unknown modules: yes).
    pub fn honors_rate_limits(&self, module: &str) -> bool {
        self.state.honors_rate_limits(module)
    }

    /// `vlog/list-pattern`'s table.
    pub fn list_patterns(&self) -> String {
        let p = self
            .state
            .patterns
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let mut s = String::from(
            "         prefix                            format\n         ------                            ------\n",
        );
        for (name, prefix, pat) in [
            ("SYSLOG", pattern::SYSLOG_PREFIX, &p[1]),
            ("CONSOLE", "none", &p[0]),
            ("FILE", "none", &p[2]),
        ] {
            let _ = writeln!(s, "{name:<7}  {prefix:<32}  {}", pat.as_str());
        }
        s
    }

    /// Uses `path` as the log file (closing the current one), or no file if `None`. Logs
    /// `opened log file PATH` (module `vlog`) as OVS does.
    pub fn set_log_file(&self, path: Option<&Path>) -> io::Result<()> {
        let Some(path) = path else {
            *self
                .state
                .file
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = FileDest::default();
            return Ok(());
        };
        let file = open_log_file(path)?;
        {
            let mut f = self
                .state
                .file
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            f.path = Some(path.to_path_buf());
            f.file = Some(file);
        }
        // The daemon's own message, from whichever thread asked (OVS's main thread).
        self.state.log_as(
            "vlog",
            Level::Info,
            &format!("opened log file {}", path.display()),
            None,
        );
        Ok(())
    }

    /// The configured log file, if any (kept across [`LogHandle::close_log_file`]).
    pub fn log_file(&self) -> Option<PathBuf> {
        self.state
            .file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .path
            .clone()
    }

    /// `vlog/reopen`: opens the log file's path again (after logrotate renamed it); nothing
    /// to do if the open file still is that path.
    pub fn reopen_log_file(&self) -> Result<(), String> {
        let (path, same) = {
            let f = self
                .state
                .file
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(path) = f.path.clone() else {
                return Err("Logging to file not configured".into());
            };
            let same = match (&f.file, std::fs::metadata(&path)) {
                (Some(file), Ok(on_disk)) => file
                    .metadata()
                    .is_ok_and(|m| m.dev() == on_disk.dev() && m.ino() == on_disk.ino()),
                _ => false,
            };
            (path, same)
        };
        if same {
            return Ok(());
        }
        self.set_log_file(Some(&path))
            .map_err(|e| format!("could not reopen log file \"{}\": {e}", path.display()))
    }

    /// `vlog/close`: closes the log file (a later `vlog/reopen` opens it again).
    pub fn close_log_file(&self) {
        self.state
            .file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .file = None;
    }

    /// Writes `message` as module `module` at `level` directly, not through `tracing`.
    pub fn log(&self, module: &str, level: Level, message: &str) {
        self.state.log(module, level, message);
    }
}

/// Whether the current subscriber's vlog (if any) rate-limits messages of `target`'s module;
/// used by the `rl_*` macros.
/// Whether this thread's vlog subscriber (if it is one) logs `level` for `target`'s module.
/// The `rl_*` macros ask it besides `tracing::enabled!`, whose per-call-site cache is shared
/// by every subscriber of the process: while another thread's subscriber registers, a call
/// site can read as enabled here though this one's level leaves it out, and it would take
/// a token.
#[doc(hidden)]
pub fn __wants(target: &str, level: tracing::Level) -> bool {
    tracing::dispatcher::get_default(|d| {
        d.downcast_ref::<VlogLayer>()
            .is_none_or(|l| l.state.module(module_of(target)).max() >= Level::from_tracing(&level))
    })
}

#[doc(hidden)]
pub fn __honors_rate_limits(target: &str) -> bool {
    tracing::dispatcher::get_default(|d| {
        d.downcast_ref::<VlogLayer>()
            .is_none_or(|l| l.state.honors_rate_limits(module_of(target)))
    })
}

/// Sets logging up as `opts` says and installs it as the process's `tracing` subscriber.
/// Call once; a second call (or any other global subscriber) is an `AlreadyExists` error.
pub fn init(opts: LogOptions) -> io::Result<LogHandle> {
    let h = LogHandle::new(opts)?;
    tracing::subscriber::set_global_default(h.subscriber())
        .map_err(|e| io::Error::new(io::ErrorKind::AlreadyExists, e.to_string()))?;
    Ok(h)
}

impl AsRef<Registry> for Server {
    fn as_ref(&self) -> &Registry {
        self.registry()
    }
}

impl AsRef<Registry> for Registry {
    fn as_ref(&self) -> &Registry {
        self
    }
}

/// Registers `vlog/set`, `vlog/list`, `vlog/list-pattern`, `vlog/reopen`, `vlog/close`,
/// `vlog/enable-rate-limit` and `vlog/disable-rate-limit` (OVS's usages and texts) on `server` (a [`Server`] or its [`Registry`]).
pub fn register_commands(server: &impl AsRef<Registry>, handle: &LogHandle) {
    let reg = server.as_ref();
    let h = handle.clone();
    reg.register(
        "vlog/set",
        "{spec | PATTERN:destination:pattern}",
        0,
        usize::MAX,
        move |args| {
            if args.is_empty() {
                h.set_level(None, None, Level::Dbg);
            }
            for a in args {
                h.set_spec(a)?;
            }
            Ok(String::new())
        },
    );
    let h = handle.clone();
    reg.register("vlog/list", "", 0, 0, move |_| Ok(h.list()));
    for (name, enable) in [
        ("vlog/enable-rate-limit", true),
        ("vlog/disable-rate-limit", false),
    ] {
        let h = handle.clone();
        reg.register(name, "[module]...", 0, usize::MAX, move |args| {
            h.set_rate_limits(args, enable).map(|()| String::new())
        });
    }
    let h = handle.clone();
    reg.register(
        "vlog/list-pattern",
        "",
        0,
        0,
        move |_| Ok(h.list_patterns()),
    );
    let h = handle.clone();
    reg.register("vlog/reopen", "", 0, 0, move |_| {
        h.reopen_log_file().map(|()| String::new())
    });
    let h = handle.clone();
    reg.register("vlog/close", "", 0, 0, move |_| {
        h.close_log_file();
        Ok(String::new())
    });
}
