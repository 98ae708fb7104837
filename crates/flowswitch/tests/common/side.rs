//! `Side`: one switch under test (real `ovs-vswitchd` or ours), with its own run directory
//! and private `ovsdb-server` holding OVS's schema, started exactly as OVS's test suite
//! starts `ovs-vswitchd` (`unix:DB --pidfile --detach --log-file --enable-dummy=override`),
//! stopped and cleaned up on drop. The tests that compare our daemon with OVS's run one
//! `Side` of each.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::SCHEMA;

/// One switch under test: its run directory, `ovsdb-server` and daemon.
pub struct Side {
    pub name: &'static str,
    pub dir: PathBuf,
    ovsdb: Option<Child>,
    /// Pid files of the `ovs-ofctl monitor` daemons started here, killed on drop.
    monitors: Vec<PathBuf>,
}

/// Our daemon's command line.
pub fn our_vswitchd() -> [String; 2] {
    [
        env!("CARGO_BIN_EXE_flowswitch").to_owned(),
        "vswitchd".to_owned(),
    ]
}

impl Side {
    /// Real `ovs-vswitchd` (side `ovs_name`) and the daemon `ours` (side `ours_name`), each
    /// in its own directory (`fs-TAG-PID-NAME` under the temporary directory).
    pub fn both(
        tag: &str,
        ovs_name: &'static str,
        ours_name: &'static str,
        ours: &[String],
    ) -> (Side, Side) {
        let ovs = Side::start(
            tag,
            ovs_name,
            &[testutil::ovs::tool_path("ovs-vswitchd")
                .display()
                .to_string()],
        );
        (ovs, Side::start(tag, ours_name, ours))
    }

    /// `ovsdb-server` and then `daemon` (a command line, given the database, pid file,
    /// detach, log file and dummy datapath options), in directory `fs-TAG-PID-NAME`.
    pub fn start(tag: &str, name: &'static str, daemon: &[String]) -> Side {
        let dir = std::env::temp_dir().join(format!("fs-{tag}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("conf.db");
        let st = Command::new(testutil::ovs::tool_path("ovsdb-tool"))
            .arg("create")
            .arg(&db)
            .arg(SCHEMA)
            .status()
            .unwrap();
        assert!(st.success(), "ovsdb-tool create");
        let sock = dir.join("db.sock");
        let ovsdb = Command::new(testutil::ovs::tool_path("ovsdb-server"))
            .arg("--no-chdir")
            .arg(format!("--remote=punix:{}", sock.display()))
            .arg(format!(
                "--unixctl={}",
                dir.join("ovsdb-server.ctl").display()
            ))
            .arg(format!(
                "--log-file={}",
                dir.join("ovsdb-server.log").display()
            ))
            .arg("-vconsole:off")
            .arg(&db)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let side = Side {
            name,
            dir,
            ovsdb: Some(ovsdb),
            monitors: Vec::new(),
        };
        let t0 = Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "ovsdb-server did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        side.must(&["ovs-vsctl", "--no-wait", "init"]);
        let (prog, rest) = daemon.split_first().unwrap();
        let out = Command::new(prog)
            .args(rest)
            .arg(format!("unix:{}", sock.display()))
            .arg("--pidfile")
            .arg("--detach")
            .arg("--no-chdir")
            .arg(format!(
                "--log-file={}",
                side.dir.join("vswitchd.log").display()
            ))
            .arg("-vconsole:off")
            .arg("--enable-dummy=override")
            .arg("--disable-system")
            .env("OVS_RUNDIR", &side.dir)
            .env("OVS_LOGDIR", &side.dir)
            .env("OVS_DBDIR", &side.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {prog} did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        side
    }

    /// OVS tool `args[0]` with `args[1..]`, talking to this side.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let (prog, rest) = args.split_first().unwrap();
        let mut c = Command::new(testutil::ovs::tool_path(prog));
        if *prog == "ovs-vsctl" {
            c.arg("--timeout=20");
        }
        c.args(rest)
            .env("OVS_RUNDIR", &self.dir)
            .env("OVS_LOGDIR", &self.dir)
            .env("OVS_DBDIR", &self.dir)
            .current_dir(&self.dir);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// `run`, panicking (with the side's name and stderr) if the command fails; its stdout.
    pub fn must(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{}: {args:?}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Dummy ports p`i` for `i` in `ports` (`ofport_request` = i), each recording what it
    /// sends in `pI.pcap`, on bridge br0 — created first (dummy datapath,
    /// `fail-mode=secure`) when `new_bridge` — in one `ovs-vsctl` transaction.
    pub fn add_dummy_ports(&self, ports: std::ops::RangeInclusive<u32>, new_bridge: bool) {
        let mut a: Vec<String> = vec!["ovs-vsctl".into()];
        if new_bridge {
            a.extend(
                [
                    "add-br",
                    "br0",
                    "--",
                    "set",
                    "bridge",
                    "br0",
                    "datapath_type=dummy",
                    "fail-mode=secure",
                ]
                .map(String::from),
            );
        }
        for i in ports {
            if a.len() > 1 {
                a.push("--".into());
            }
            a.extend(["add-port", "br0"].map(String::from));
            a.push(format!("p{i}"));
            a.extend(["--", "set", "interface"].map(String::from));
            a.push(format!("p{i}"));
            a.push("type=dummy".into());
            a.push(format!("ofport_request={i}"));
            a.push(format!(
                "options:tx_pcap={}",
                self.dir.join(format!("p{i}.pcap")).display()
            ));
        }
        self.must(&a.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// The daemon's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("vswitchd.log")).unwrap_or_default()
    }

    /// Where monitor `name` prints.
    pub fn monitor_file(&self, name: &str) -> PathBuf {
        self.dir.join(format!("monitor-{name}.txt"))
    }

    /// `ovs-ofctl PRE monitor br0 POST --detach`, printing into `monitor_file(name)`. With
    /// `--detach` the command returns once the connection is set up (packet-in format and
    /// miss-len sent and acknowledged), so packets sent afterwards are seen.
    pub fn start_monitor(&mut self, name: &str, pre: &[&str], post: &[&str]) {
        let pidfile = self.dir.join(format!("monitor-{name}.pid"));
        let file = std::fs::File::create(self.monitor_file(name)).unwrap();
        let mut args = vec!["ovs-ofctl"];
        args.extend_from_slice(pre);
        args.extend_from_slice(&["monitor", "br0"]);
        args.extend_from_slice(post);
        let pidarg = format!("--pidfile={}", pidfile.display());
        args.extend_from_slice(&["--detach", "--no-chdir", &pidarg]);
        // `ovs-ofctl monitor` prints what it receives on stderr (stdout for good measure).
        let st = self
            .cmd(&args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .status()
            .unwrap();
        assert!(st.success(), "{}: {args:?} did not start", self.name);
        self.monitors.push(pidfile);
    }

    /// Kills the monitors started here (by the pids in their pid files) and waits until
    /// they are gone.
    pub fn stop_monitors(&mut self) {
        let pids: Vec<u32> = self
            .monitors
            .drain(..)
            .filter_map(|f| std::fs::read_to_string(f).ok()?.trim().parse().ok())
            .collect();
        for pid in &pids {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        let t0 = Instant::now();
        while pids.iter().any(|&p| running(p)) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether process `pid` still runs (a zombie does not: the detached monitors are reparented
/// to an init that may reap them late).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
    })
}

impl Drop for Side {
    fn drop(&mut self) {
        self.stop_monitors();
        let _ = self.run(&["ovs-appctl", "-t", "ovs-vswitchd", "exit"]);
        if let Some(mut c) = self.ovsdb.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
