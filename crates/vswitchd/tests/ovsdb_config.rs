//! The daemon's database side against the real `ovsdb-server` and `ovs-vsctl`: `--wait`
//! returns, `ofport`/`datapath_id`/`error` are written back as OVS writes them, and
//! restarting `ovsdb-server` under the running daemon loses nothing.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flow::ofp::OfPort;
use vswitchd::bridges::DummyMode;
use vswitchd::daemon::{Daemon, Options};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

struct Db {
    dir: PathBuf,
    server: Option<Child>,
}

impl Db {
    fn new(tag: &str) -> Db {
        let dir = std::env::temp_dir().join(format!("fs-vswitchd-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("ovsdb-tool")
            .arg("create")
            .arg(dir.join("conf.db"))
            .arg(SCHEMA)
            .status()
            .unwrap();
        assert!(st.success());
        let mut db = Db { dir, server: None };
        db.start();
        db.vsctl(&["--no-wait", "init"]);
        db
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("db.sock")
    }

    fn start(&mut self) {
        let child = Command::new("ovsdb-server")
            .arg("--no-chdir")
            .arg(format!("--remote=punix:{}", self.sock().display()))
            .arg(format!(
                "--unixctl={}",
                self.dir.join("ovsdb.ctl").display()
            ))
            .arg(format!(
                "--log-file={}",
                self.dir.join("ovsdb.log").display()
            ))
            .arg("-vconsole:off")
            .arg(self.dir.join("conf.db"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.server = Some(child);
        let t0 = Instant::now();
        while std::os::unix::net::UnixStream::connect(self.sock()).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "ovsdb-server did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(self.sock());
    }

    /// Runs ovs-vsctl; panics with its stderr on failure.
    fn vsctl(&self, args: &[&str]) -> String {
        let out = Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", self.sock().display()))
            .arg("--timeout=20")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ovs-vsctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Running {
    exit: Arc<AtomicBool>,
    thread: Option<JoinHandle<Daemon>>,
}

impl Running {
    fn start(db: &Db) -> Running {
        let mut opts = Options::new(db.dir.clone());
        opts.dummy = DummyMode::Off;
        let mut d = Daemon::new(opts);
        let exit = d.exit_flag();
        let thread = std::thread::spawn(move || {
            d.run(|_, _| {});
            d
        });
        Running {
            exit,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Daemon {
        self.exit.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

#[test]
fn vsctl_wait_returns_and_ofports_are_written_back() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let db = Db::new("wait");
    let run = Running::start(&db);
    let t0 = Instant::now();
    // Without --no-wait, ovs-vsctl waits until cur_cfg reaches its next_cfg.
    db.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
        "other-config:datapath-id=00000000000000ab",
        "--",
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "interface",
        "p1",
        "type=dummy",
        "ofport_request=7",
        "--",
        "add-port",
        "br0",
        "p2",
        "--",
        "set",
        "interface",
        "p2",
        "type=dummy",
        "--",
        "add-port",
        "br0",
        "eth-nonesuch",
    ]);
    let waited = t0.elapsed();
    assert_eq!(db.vsctl(&["get", "interface", "p1", "ofport"]), "7");
    assert_eq!(db.vsctl(&["get", "interface", "p2", "ofport"]), "1");
    assert_eq!(db.vsctl(&["get", "interface", "br0", "ofport"]), "65534");
    assert_eq!(
        db.vsctl(&["get", "interface", "eth-nonesuch", "ofport"]),
        "-1"
    );
    assert!(
        db.vsctl(&["get", "interface", "eth-nonesuch", "error"])
            .contains("could not open network device eth-nonesuch"),
    );
    assert_eq!(
        db.vsctl(&["get", "bridge", "br0", "datapath_id"]),
        "\"00000000000000ab\""
    );
    // Deleting a port and adding another: as OVS, the freed number is not handed out again
    // at once (old flows may name it); the next one is.
    db.vsctl(&[
        "del-port",
        "p2",
        "--",
        "add-port",
        "br0",
        "p3",
        "--",
        "set",
        "interface",
        "p3",
        "type=dummy",
    ]);
    assert_eq!(db.vsctl(&["get", "interface", "p3", "ofport"]), "2");
    let d = run.stop();
    let b = &d.bridges().map["br0"];
    let ports: Vec<(u16, String)> = b
        .shared
        .read()
        .ports()
        .map(|p| (p.ofport.0, p.name.clone()))
        .collect();
    assert_eq!(
        ports,
        vec![
            (2, "p3".into()),
            (7, "p1".into()),
            (OfPort::LOCAL.0, "br0".into())
        ]
    );
    eprintln!("first ovs-vsctl --wait took {waited:?}");
}

#[test]
fn restarting_ovsdb_server_loses_nothing() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let mut db = Db::new("restart");
    let run = Running::start(&db);
    db.vsctl(&[
        "add-br",
        "br0",
        "--",
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "interface",
        "p1",
        "type=dummy",
    ]);
    let before = db.vsctl(&["get", "interface", "p1", "ofport"]);
    db.stop();
    std::thread::sleep(Duration::from_millis(300));
    db.start();
    // The daemon reconnects with backoff; --wait returns once it applied the new config.
    db.vsctl(&[
        "add-port",
        "br0",
        "p2",
        "--",
        "set",
        "interface",
        "p2",
        "type=dummy",
    ]);
    assert_eq!(db.vsctl(&["get", "interface", "p1", "ofport"]), before);
    assert_eq!(db.vsctl(&["get", "interface", "p2", "ofport"]), "2");
    let d = run.stop();
    assert_eq!(d.bridges().map["br0"].shared.read().ports().count(), 3);
}
