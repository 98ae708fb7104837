//! vlog on tracing, driven through the control socket by the real `ovs-appctl`, and compared
//! with the real `ovs-vswitchd` where the texts are OVS's.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use testutil::ovs::{OvsSandbox, ovs_missing_reason};
use vswitchd::logging::{self, Destination, Level, LogHandle, LogOptions, RateLimiter};
use vswitchd::unixctl::Server;

/// Removes a test's directory when the test ends (also on failure).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fs-vlog-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn appctl(sock: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("ovs-appctl")
        .arg("--timeout=10")
        .arg("-t")
        .arg(sock)
        .args(args)
        .output()
        .expect("run ovs-appctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn have_ovs() -> bool {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return false;
    }
    true
}

/// A handle logging to `dir/test.log` (no console, no syslog) and a server with the vlog
/// commands.
fn setup(dir: &Path, modules: &[&str]) -> (LogHandle, Server, PathBuf, PathBuf) {
    let log = dir.join("test.log");
    let h = LogHandle::new(LogOptions {
        log_file: Some(log.clone()),
        syslog_socket: None,
        modules: modules.iter().map(|s| s.to_string()).collect(),
        specs: vec!["console:off".into()],
        ..LogOptions::default()
    })
    .expect("logging");
    let sock = dir.join("ctl");
    let s = Server::bind(&sock).expect("bind");
    logging::register_commands(&s, &h);
    (h, s, log, sock)
}

/// Runs `f` on an unnamed thread (no `(thread)` in the lines) with `h` as its subscriber.
fn with_logging(h: &LogHandle, f: impl FnOnce() + Send + 'static) {
    let sub = h.subscriber();
    std::thread::spawn(move || tracing::subscriber::with_default(sub, f))
        .join()
        .unwrap();
}

/// Taken first by every test here: they run one at a time. `tracing` caches each callsite's
/// interest across every live subscriber and rebuilds it whenever levels change (each
/// `LogHandle::new` and `vlog/set` does); `rl_log!`'s `enabled!` and `event!` are two
/// callsites, so another test's rebuild between the two could drop a message that already
/// took a rate-limit token. The daemon has one global subscriber.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Checks that `line` is `TIME|NNNNN|module|LEVEL|message` with OVS's file timestamp.
fn assert_file_line(line: &str, module: &str, level: &str, message: &str) {
    let parts: Vec<&str> = line.splitn(5, '|').collect();
    assert_eq!(parts.len(), 5, "{line}");
    let t = parts[0].as_bytes();
    assert_eq!(t.len(), 24, "{line}");
    for (i, &c) in t.iter().enumerate() {
        match i {
            4 | 7 => assert_eq!(c, b'-', "{line}"),
            10 => assert_eq!(c, b'T', "{line}"),
            13 | 16 => assert_eq!(c, b':', "{line}"),
            19 => assert_eq!(c, b'.', "{line}"),
            23 => assert_eq!(c, b'Z', "{line}"),
            _ => assert!(c.is_ascii_digit(), "{line}"),
        }
    }
    assert!(
        parts[1].len() == 5 && parts[1].bytes().all(|c| c.is_ascii_digit()),
        "{line}"
    );
    assert_eq!(&parts[2..], &[module, level, message], "{line}");
}

#[test]
fn vlog_set_and_list_round_trip_and_the_file_follows() {
    let _serial = serial();
    if !have_ovs() {
        return;
    }
    let dir = tmpdir("roundtrip");
    let _cleanup = Cleanup(dir.clone());
    let (h, _s, log, sock) = setup(&dir, &["testmod", "other"]);

    let (rc, out, _) = appctl(&sock, &["vlog/list"]);
    assert_eq!(rc, 0);
    assert_eq!(
        out,
        "                 console    syslog    file\n\
         \x20                -------    ------    ------\n\
         other              OFF       INFO       INFO\n\
         testmod            OFF       INFO       INFO\n\
         unixctl            OFF       INFO       INFO\n\
         vlog               OFF       INFO       INFO\n"
    );
    assert_file_line(
        read(&log).lines().next().unwrap(),
        "vlog",
        "INFO",
        &format!("opened log file {}", log.display()),
    );

    with_logging(&h, || {
        tracing::debug!(target: "testmod", "dbg one");
        tracing::info!(target: "vswitchd::testmod", "info one");
    });
    let text = read(&log);
    assert!(!text.contains("dbg one"), "{text}");
    assert_file_line(text.lines().last().unwrap(), "testmod", "INFO", "info one");

    assert_eq!(appctl(&sock, &["vlog/set", "testmod:file:dbg"]).0, 0);
    assert_eq!(h.level("testmod", Destination::File), Some(Level::Dbg));
    with_logging(&h, || tracing::debug!(target: "testmod", n = 2, "dbg two"));
    assert_file_line(
        read(&log).lines().last().unwrap(),
        "testmod",
        "DBG",
        "dbg two n=2",
    );

    // Words in any order, any separator; a missing destination means all.
    assert_eq!(
        appctl(&sock, &["vlog/set", "WARN FILE testmod", "other,err"]).0,
        0
    );
    with_logging(&h, || {
        tracing::info!(target: "testmod", "info three");
        tracing::warn!(target: "testmod", "warn four");
        tracing::warn!(target: "other", "other warn");
        tracing::error!(target: "other", "other err");
    });
    let text = read(&log);
    assert!(
        !text.contains("info three") && !text.contains("other warn"),
        "{text}"
    );
    let last: Vec<&str> = text.lines().rev().take(2).collect();
    assert_file_line(last[1], "testmod", "WARN", "warn four");
    assert_file_line(last[0], "other", "ERR", "other err");
    let (_, out, _) = appctl(&sock, &["vlog/list"]);
    assert!(
        out.contains("\nother              ERR        ERR        ERR\n"),
        "{out}"
    );
    assert!(
        out.contains("\ntestmod            OFF       INFO       WARN\n"),
        "{out}"
    );

    // Off silences the file; no argument at all sets everything to DBG (as OVS).
    assert_eq!(appctl(&sock, &["vlog/set", "testmod:file:off"]).0, 0);
    with_logging(&h, || tracing::error!(target: "testmod", "err five"));
    assert!(!read(&log).contains("err five"));
    assert_eq!(appctl(&sock, &["vlog/set"]).0, 0);
    let (_, out, _) = appctl(&sock, &["vlog/list"]);
    assert!(
        out.contains("\ntestmod            DBG        DBG        DBG\n"),
        "{out}"
    );
    assert_eq!(appctl(&sock, &["vlog/set", "ANY:console:off"]).0, 0);

    // A module first seen through a call site is listed and settable.
    with_logging(&h, || tracing::info!(target: "crate::fresh", "fresh"));
    assert_eq!(appctl(&sock, &["vlog/set", "fresh:file:emer"]).0, 0);
    assert!(
        appctl(&sock, &["vlog/list"])
            .1
            .contains("\nfresh              OFF        DBG       EMER\n")
    );

    // PATTERN changes the file's lines.
    assert_eq!(appctl(&sock, &["vlog/set", "PATTERN:file:%c says %m"]).0, 0);
    with_logging(&h, || tracing::info!(target: "other", "hi"));
    assert_eq!(read(&log).lines().last().unwrap(), "other says hi");
    assert!(
        appctl(&sock, &["vlog/list-pattern"])
            .1
            .contains("\nFILE     none                              %c says %m\n")
    );
}

/// Error texts and exit status of bad `vlog/set` specs, `vlog/list-pattern` and the shape of
/// `vlog/list` rows, next to the real ovs-vswitchd.
#[test]
fn vlog_texts_match_real_ovs_vswitchd() {
    let _serial = serial();
    if !have_ovs() {
        return;
    }
    let dir = tmpdir("oracle");
    let _cleanup = Cleanup(dir.clone());
    let (_h, _s, _log, sock) = setup(&dir, &[]);
    let sb = OvsSandbox::start(0).expect("OVS sandbox");
    let real = sb.dir().join("ovs-vswitchd.ctl");
    let cases: &[&[&str]] = &[
        &["vlog/set", "bogus"],
        &["vlog/set", "info:warn"],
        &["vlog/set", "file:console"],
        &["vlog/set", "vlog:unixctl"],
        &["vlog/set", "vlog:file:info:x"],
        &["vlog/set", "PATTERN"],
        &["vlog/set", "PATTERN:bogus:x"],
        &["vlog/set", "FACILITY:nope"],
        &["vlog/set", "vlog:file:info", "nope"],
        &["vlog/list", "x"],
        &["vlog/reopen", "x"],
        &["vlog/set", "FACILITY:local3"],
        &["vlog/set", "ANY:syslog:warn"],
        &["vlog/set", "vlog:file:dbg", "UNIXCTL,console,emer"],
        &["vlog/list-pattern"],
        &["vlog/close"],
        &["vlog/disable-rate-limit", "nosuch"],
        &["vlog/disable-rate-limit"],
        &["vlog/enable-rate-limit", "VLOG", "nosuch"],
    ];
    for args in cases {
        let (rc_real, out_real, err_real) = appctl(&real, args);
        let (rc, out, err) = appctl(&sock, args);
        let err_real = err_real.replace(&real.display().to_string(), "SOCK");
        let err = err.replace(&sock.display().to_string(), "SOCK");
        assert_eq!(
            (rc, &out, &err),
            (rc_real, &out_real, &err_real),
            "{args:?}"
        );
    }
    // The rows of modules both have, after the same settings.
    let ours = appctl(&sock, &["vlog/list"]).1;
    let theirs = appctl(&real, &["vlog/list"]).1;
    let rows = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with(' ') || l.starts_with("vlog ") || l.starts_with("unixctl "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(rows(&ours), rows(&theirs));
    assert_eq!(rows(&ours).len(), 4, "{ours}");
    assert!(ours.contains("(rate limiting disabled)"), "{ours}");
    // The vlog commands and their usages, as list-commands shows them.
    let vlog_cmds = |sock: &Path| -> Vec<String> {
        appctl(sock, &["list-commands"])
            .1
            .lines()
            .filter(|l| l.starts_with("  vlog/"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(vlog_cmds(&sock), vlog_cmds(&real));
    assert_eq!(vlog_cmds(&sock).len(), 7);
}

#[test]
fn reopen_after_logrotate_and_close() {
    let _serial = serial();
    if !have_ovs() {
        return;
    }
    let dir = tmpdir("reopen");
    let _cleanup = Cleanup(dir.clone());
    let (h, _s, log, sock) = setup(&dir, &["rot"]);
    with_logging(&h, || tracing::info!(target: "rot", "before rotate"));
    // Reopening the same file is a no-op.
    assert_eq!(
        appctl(&sock, &["vlog/reopen"]),
        (0, String::new(), String::new())
    );
    let rotated = dir.join("test.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    with_logging(&h, || tracing::info!(target: "rot", "still old file"));
    assert_eq!(appctl(&sock, &["vlog/reopen"]).0, 0);
    with_logging(&h, || tracing::info!(target: "rot", "after rotate"));
    let old = read(&rotated);
    let new = read(&log);
    assert!(
        old.contains("before rotate") && old.contains("still old file"),
        "{old}"
    );
    assert!(!old.contains("after rotate"));
    let lines: Vec<&str> = new.lines().collect();
    assert_eq!(lines.len(), 2, "{new}");
    assert_file_line(
        lines[0],
        "vlog",
        "INFO",
        &format!("opened log file {}", log.display()),
    );
    assert_file_line(lines[1], "rot", "INFO", "after rotate");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
        0o640
    );

    assert_eq!(appctl(&sock, &["vlog/close"]).0, 0);
    with_logging(&h, || tracing::info!(target: "rot", "while closed"));
    assert!(!read(&log).contains("while closed"));
    assert_eq!(appctl(&sock, &["vlog/reopen"]).0, 0);
    with_logging(&h, || tracing::info!(target: "rot", "reopened"));
    let text = read(&log);
    assert!(text.contains("reopened") && !text.contains("while closed"));

    // Without a log file, reopen fails as OVS's does; close succeeds.
    let h2 = LogHandle::new(LogOptions {
        syslog_socket: None,
        ..LogOptions::default()
    })
    .unwrap();
    let sock2 = dir.join("ctl2");
    let s2 = Server::bind(&sock2).unwrap();
    logging::register_commands(&s2, &h2);
    let (rc, out, err) = appctl(&sock2, &["vlog/reopen"]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "Logging to file not configured\novs-appctl: {}: server returned an error\n",
            sock2.display()
        )
    );
    assert_eq!(appctl(&sock2, &["vlog/close"]).0, 0);
}

static RL: RateLimiter = RateLimiter::new(1, 2);

#[test]
fn rate_limited_macros_log_the_burst_only() {
    let _serial = serial();
    let dir = tmpdir("rl");
    let _cleanup = Cleanup(dir.clone());
    let log = dir.join("rl.log");
    let h = LogHandle::new(LogOptions {
        log_file: Some(log.clone()),
        syslog_socket: None,
        specs: vec!["console:off".into()],
        ..LogOptions::default()
    })
    .unwrap();
    with_logging(&h, || {
        // Disabled messages take no token.
        for i in 0..5 {
            vswitchd::rl_dbg!(RL, target: "rlmod", "dbg {i}");
        }
        for i in 0..5 {
            vswitchd::rl_warn!(RL, target: "rlmod", "warn {i}");
        }
    });
    let text = read(&log);
    let got: Vec<&str> = text.lines().filter(|l| l.contains("|rlmod|")).collect();
    assert_eq!(got.len(), 2, "{text}");
    assert_file_line(got[0], "rlmod", "WARN", "warn 0");
    assert_file_line(got[1], "rlmod", "WARN", "warn 1");
    // With rate limiting disabled for the module, every message is logged.
    h.set_rate_limits(&["rlmod".to_string()], false).unwrap();
    with_logging(&h, || {
        for i in 5..10 {
            vswitchd::rl_warn!(RL, target: "rlmod", "warn {i}");
        }
    });
    let text = read(&log);
    assert_eq!(
        text.lines().filter(|l| l.contains("|rlmod|")).count(),
        7,
        "{text}"
    );
    h.set_rate_limits(&[], true).unwrap();
    with_logging(
        &h,
        || vswitchd::rl_warn!(RL, target: "rlmod", "limited again"),
    );
    assert!(!read(&log).contains("limited again"));
    // The module path is the default target.
    static RL2: RateLimiter = RateLimiter::new(1, 1);
    with_logging(&h, || vswitchd::rl_err!(RL2, "from the test crate"));
    assert!(read(&log).contains("|logging_vlog|ERR|from the test crate"));
}

#[test]
fn syslog_datagrams() {
    let _serial = serial();
    let dir = tmpdir("syslog");
    let _cleanup = Cleanup(dir.clone());
    let dev_log = dir.join("log");
    let rx = UnixDatagram::bind(&dev_log).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let h = LogHandle::new(LogOptions {
        program: "prog".into(),
        syslog_socket: Some(dev_log.clone()),
        specs: vec!["console:off".into(), "syslog:warn".into()],
        ..LogOptions::default()
    })
    .unwrap();
    with_logging(&h, || {
        tracing::info!(target: "sl", "not sent");
        tracing::warn!(target: "sl", "sent");
    });
    let mut buf = [0u8; 512];
    let n = rx.recv(&mut buf).unwrap();
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    // "<28> Nov 26 00:47:12 HOST prog: ovs|00001|sl|WARN|sent"
    assert!(msg.starts_with("<28> "), "{msg}");
    assert!(msg.ends_with(" prog: ovs|00001|sl|WARN|sent"), "{msg}");
    assert_eq!(msg.split(' ').count(), 7, "{msg}");
    h.set_spec("FACILITY:local0").unwrap();
    let h2 = h.clone();
    std::thread::spawn(move || h2.log("sl", Level::Err, "direct"))
        .join()
        .unwrap();
    let n = rx.recv(&mut buf).unwrap();
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        msg.starts_with("<131> ") && msg.ends_with("|sl|ERR|direct"),
        "{msg}"
    );
}

#[test]
fn specs_from_options_and_errors() {
    let _serial = serial();
    let h = LogHandle::new(LogOptions {
        syslog_socket: None,
        modules: vec!["m1".into()],
        specs: vec!["m1:syslog:emer".into(), "console:off".into()],
        ..LogOptions::default()
    })
    .unwrap();
    assert_eq!(h.level("m1", Destination::Syslog), Some(Level::Emer));
    assert_eq!(h.level("m1", Destination::Console), Some(Level::Off));
    assert_eq!(h.level("m1", Destination::File), Some(Level::Info));
    assert_eq!(h.level("nope", Destination::File), None);
    // Modules declared later get the defaults as changed by module-less specs.
    h.declare_module("m2");
    assert_eq!(h.level("m2", Destination::Console), Some(Level::Off));
    let bad = LogHandle::new(LogOptions {
        specs: vec!["nosuch:dbg".into()],
        ..LogOptions::default()
    });
    assert_eq!(
        bad.unwrap_err().to_string(),
        "no destination, level, or module \"nosuch\""
    );
}
