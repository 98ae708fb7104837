//! Shared harness of the `ofctl_*` tests: our OpenFlow server on a temp socket next to a real
//! `ovs-vswitchd` (`OvsSandbox`), and real `ovs-ofctl` run against both with the same
//! arguments; outputs are compared after masking what legitimately differs (durations, ages,
//! xids, MAC addresses).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use ofproto::{Backend, Bridge};
use testutil::ovs::{OvsSandbox, ovs_missing_reason};
use upcall::handler::SharedBridge;
use vswitchd::ofconn::StaticBridge;
use vswitchd::ofserver::{Listen, OfServer};

/// Our switch: bridge `br0` with ports p1..pN (ofports 1..N) and LOCAL, served on a socket in
/// a private (0700) temp directory.
pub struct Ours {
    pub dir: PathBuf,
    pub sock: PathBuf,
    pub shared: Arc<SharedBridge>,
    pub server: Option<OfServer>,
}

impl Ours {
    pub fn start(n_ports: u16) -> Ours {
        let dir = std::env::temp_dir().join(format!(
            "ofctl-ours-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("temp dir");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let shared = SharedBridge::new(Bridge::ovs_sandbox(n_ports, Backend::TupleSpace));
        let bridge = Arc::new(StaticBridge::new("br0", 1, shared.clone()));
        let sock = OfServer::mgmt_path(&dir, "br0");
        let server =
            OfServer::start(bridge, &[Listen::Unix(sock.clone())]).expect("start OfServer");
        Ours {
            dir,
            sock,
            shared,
            server: Some(server),
        }
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Both switches, or `None` (after a recorded skip) where OVS is missing.
pub struct Pair {
    pub ours: Ours,
    pub ovs: OvsSandbox,
}

impl Pair {
    pub fn start() -> Option<Pair> {
        if let Some(why) = ovs_missing_reason() {
            testutil::skip(&format!("OVS oracle: {why}"));
            return None;
        }
        let ovs = OvsSandbox::start(3).expect("OVS sandbox");
        Some(Pair {
            ours: Ours::start(3),
            ovs,
        })
    }

    pub fn ovs_sock(&self) -> PathBuf {
        self.ovs.dir().join("br0.mgmt")
    }

    /// Runs `ovs-ofctl ARGS` against both; `br0` in ARGS names the switch.
    pub fn both(&self, args: &[&str]) -> (Out, Out) {
        (ofctl(&self.ours.sock, args), ofctl(&self.ovs_sock(), args))
    }

    /// Runs on both and asserts the masked outputs are equal; returns ours.
    pub fn same(&self, args: &[&str]) -> Out {
        let (a, b) = self.both(args);
        assert_eq!(
            a.masked(),
            b.masked(),
            "ovs-ofctl {args:?}: ours (left) vs ovs-vswitchd (right)"
        );
        a
    }

    /// `dump-flows` lines (sorted, masked, header dropped) with extra ARGS, on both.
    pub fn flows(&self, extra: &[&str]) -> (Vec<String>, Vec<String>) {
        let mut args = vec!["dump-flows", "br0"];
        args.extend_from_slice(extra);
        let (a, b) = self.both(&args);
        (flow_lines(&a), flow_lines(&b))
    }

    pub fn same_flows(&self, extra: &[&str], context: &str) -> Vec<String> {
        let (a, b) = self.flows(extra);
        if a != b {
            let only_ours: Vec<_> = a.iter().filter(|l| !b.contains(l)).collect();
            let only_ovs: Vec<_> = b.iter().filter(|l| !a.contains(l)).collect();
            panic!(
                "dump-flows {extra:?} after {context}: {} lines ours, {} OVS\nonly ours: {only_ours:#?}\nonly OVS: {only_ovs:#?}",
                a.len(),
                b.len()
            );
        }
        a
    }
}

/// One `ovs-ofctl` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Exit status, stdout and stderr with durations, ages, xids, MACs and socket paths
    /// masked.
    pub fn masked(&self) -> String {
        format!(
            "ok={}\n{}\n--stderr--\n{}",
            self.ok,
            mask(&self.stdout),
            mask(&self.stderr)
        )
    }
}

pub fn ofctl(sock: &Path, args: &[&str]) -> Out {
    let target = format!("unix:{}", sock.display());
    let mut c = Command::new("ovs-ofctl");
    c.arg("--timeout=20");
    for a in args {
        if *a == "br0" {
            c.arg(&target);
        } else {
            c.arg(a);
        }
    }
    let o = c.output().expect("run ovs-ofctl");
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr)
            .replace(&target, "unix:SOCK")
            .replace(&sock.display().to_string(), "SOCK"),
    }
}

/// Masks the value after each of `keys` up to a delimiter.
pub fn mask(s: &str) -> String {
    // Log lines start with a timestamp: `2026-11-26T00:53:06Z|00001|ofp_match|INFO|...`.
    let s: String = s
        .lines()
        .map(|l| match l.find("Z|") {
            Some(i) if i == 19 && l.as_bytes()[4] == b'-' => format!("TIME{}\n", &l[i + 1..]),
            _ => format!("{l}\n"),
        })
        .collect();
    // hard_age is printed only when it differs from the duration in whole seconds: timing.
    let s = s.replace(", hard_age=", ", HARD_AGE=");
    let s = strip_hard_age(&s);
    let s = s.as_str();
    const KEYS: [&str; 6] = [
        "duration=",
        "idle_age=",
        "hard_age=",
        "xid=",
        "addr:",
        "ovs-ofctl: ",
    ];
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    'outer: while !rest.is_empty() {
        for k in KEYS {
            if let Some(after) = rest.strip_prefix(k) {
                out.push_str(k);
                if k == "ovs-ofctl: " {
                    rest = after;
                    continue 'outer;
                }
                let end = after.find([',', ' ', ')', '\n']).unwrap_or(after.len());
                out.push('?');
                rest = &after[end..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Flow lines of a `dump-flows` output: masked, trimmed, header dropped, sorted.
pub fn flow_lines(o: &Out) -> Vec<String> {
    assert!(o.ok, "dump-flows failed: {}", o.stderr);
    let mut v: Vec<String> = o
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains(" reply"))
        .map(|l| mask(l.trim()))
        .collect();
    v.sort();
    v
}

/// Writes `lines` to a file in `dir` and returns its path.
pub fn flow_file(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let p = dir.join(name);
    let mut t = lines.join("\n");
    t.push('\n');
    std::fs::write(&p, t).expect("write flow file");
    p
}

/// Drops `HARD_AGE=N, ` (renamed by [`mask`]) from `s`.
fn strip_hard_age(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(", HARD_AGE=") {
        out.push_str(&rest[..i]);
        let after = &rest[i + ", HARD_AGE=".len()..];
        let end = after.find(',').unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}
