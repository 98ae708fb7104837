//! What the daemon tests share: `Env`, a private run directory (and, on request, a private
//! `ovsdb-server` with OVS's schema) in which `flowswitch vswitchd` and the stock OVS tools
//! run, cleaned up on drop; and `Side` (in `side.rs`), one of the two switches (real
//! `ovs-vswitchd` and ours) that the comparison tests run side by side.
//!
//! Every test file that says `mod common;` compiles all of it, hence `allow(dead_code)`.

#![allow(dead_code)]

pub mod side;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

pub struct Env {
    pub dir: PathBuf,
    ovsdb: Option<Child>,
}

impl Env {
    pub fn new(tag: &str, with_db: bool) -> Env {
        let dir = std::env::temp_dir().join(format!(
            "fs-{}-{}-{tag}",
            env!("CARGO_CRATE_NAME"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut env = Env { dir, ovsdb: None };
        if with_db {
            let db = env.dir.join("conf.db");
            assert!(
                Command::new(testutil::ovs::tool_path("ovsdb-tool"))
                    .arg("create")
                    .arg(&db)
                    .arg(SCHEMA)
                    .status()
                    .unwrap()
                    .success()
            );
            let sock = env.dir.join("db.sock");
            env.ovsdb = Some(
                Command::new(testutil::ovs::tool_path("ovsdb-server"))
                    .arg("--no-chdir")
                    .arg(format!("--remote=punix:{}", sock.display()))
                    .arg(format!("--unixctl={}", env.dir.join("ovsdb.ctl").display()))
                    .arg(&db)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            let t0 = Instant::now();
            while std::os::unix::net::UnixStream::connect(&sock).is_err() {
                assert!(t0.elapsed() < Duration::from_secs(20));
                std::thread::sleep(Duration::from_millis(10));
            }
            env.ok(&["ovs-vsctl", "--no-wait", "init"]);
        }
        env
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let (p, rest) = args.split_first().unwrap();
        let mut c = if *p == "flowswitch" {
            Command::new(env!("CARGO_BIN_EXE_flowswitch"))
        } else {
            Command::new(testutil::ovs::tool_path(p))
        };
        if *p == "ovs-vsctl" {
            c.arg("--timeout=20");
        }
        c.args(rest)
            .env("OVS_RUNDIR", &self.dir)
            .env("OVS_LOGDIR", &self.dir)
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}\nlog:\n{}",
            String::from_utf8_lossy(&o.stderr),
            self.log()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `flowswitch vswitchd ARGS --pidfile --detach --log-file`, as OVS's daemon is started;
    /// panics (with the log) if it fails.
    pub fn start_daemon(&self, args: &[&str]) -> String {
        let mut all = vec!["flowswitch", "vswitchd"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--pidfile", "--detach", "--log-file"]);
        self.ok(&all)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.join("ovs-vswitchd.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub fn wait_gone(&self, pid: i32) {
        let t0 = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "pid {pid} did not exit"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the daemon left in the run directory besides the database's own files.
    pub fn leftovers(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                !(n.starts_with("conf.db")
                    || n.starts_with(".conf.db")
                    || n.starts_with("db.sock")
                    || n.starts_with("ovsdb")
                    || n.ends_with(".log"))
            })
            .collect();
        v.sort();
        v
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            // SAFETY-free: a plain kill(1) of the daemon we started, if still there.
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        if let Some(mut c) = self.ovsdb.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Reads a pcap file's packets (a cut-short last record, as a live file may end, is left
/// out).
pub fn pcap_frames(path: &std::path::Path) -> Vec<Vec<u8>> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if at + 16 + incl > bytes.len() {
            break;
        }
        out.push(bytes[at + 16..at + 16 + incl].to_vec());
        at += 16 + incl;
    }
    out
}
