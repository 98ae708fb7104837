//! The real-OVN oracle: private `ovsdb-server`s, `ovn-northd` and `ovn-trace` run as child
//! processes in a scratch directory (killed by their own PIDs and removed on drop), and
//! a direct unixctl client so thousands of `ovn-trace` queries cost milliseconds, not a
//! process each.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Paths of the OVN and OVSDB programs and schemas.
#[derive(Debug, Clone)]
pub struct OvnTools {
    /// `ovsdb-server`.
    pub ovsdb_server: PathBuf,
    /// `ovsdb-tool`.
    pub ovsdb_tool: PathBuf,
    /// `ovn-northd`.
    pub northd: PathBuf,
    /// `ovn-nbctl`.
    pub nbctl: PathBuf,
    /// `ovn-sbctl`.
    pub sbctl: PathBuf,
    /// `ovn-trace`.
    pub trace: PathBuf,
    /// The NB schema.
    pub nb_schema: PathBuf,
    /// The SB schema.
    pub sb_schema: PathBuf,
}

fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl OvnTools {
    /// Finds everything, or says what is missing (for `skip`).
    pub fn find() -> Result<OvnTools, String> {
        let need = |n: &str| {
            program(n).ok_or_else(|| format!("{n} not installed (apt-get install ovn-central)"))
        };
        let schema = |n: &str| {
            let p = PathBuf::from("/usr/share/ovn").join(n);
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!("no {} (apt-get install ovn-central)", p.display()))
            }
        };
        Ok(OvnTools {
            ovsdb_server: need("ovsdb-server")?,
            ovsdb_tool: need("ovsdb-tool")?,
            northd: need("ovn-northd")?,
            nbctl: need("ovn-nbctl")?,
            sbctl: need("ovn-sbctl")?,
            trace: need("ovn-trace")?,
            nb_schema: schema("ovn-nb.ovsschema")?,
            sb_schema: schema("ovn-sb.ovsschema")?,
        })
    }
}

/// A scratch directory with the processes started in it.
#[derive(Debug)]
pub struct Sandbox {
    dir: PathBuf,
    tools: OvnTools,
    children: Vec<Child>,
}

impl Sandbox {
    /// A fresh scratch directory named after `tag`.
    pub fn new(tools: &OvnTools, tag: &str) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("fs-ovn-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Sandbox {
            dir,
            tools: tools.clone(),
            children: Vec::new(),
        }
    }

    /// A path inside the scratch directory.
    pub fn path(&self, f: &str) -> String {
        self.dir.join(f).to_str().expect("utf-8 path").to_owned()
    }

    /// The tools.
    pub fn tools(&self) -> &OvnTools {
        &self.tools
    }

    fn spawn(&mut self, cmd: &mut Command) {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        self.children.push(child);
    }

    /// Waits until `path` exists and, when it is a socket, accepts a connection (its file
    /// appears at bind(), a moment before listen()).
    fn wait_for(&mut self, path: &str, what: &str, log: &str) {
        let t0 = Instant::now();
        let ready = |p: &str| {
            Path::new(p).exists() && (!p.ends_with(".sock") || UnixStream::connect(p).is_ok())
        };
        while !ready(path) {
            if let Some(Ok(Some(st))) = self.children.last_mut().map(|c| c.try_wait()) {
                panic!(
                    "{what} exited ({st}): {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            // (ovsdb-server reads an 800-node dense NB for over half a minute.)
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "{what}: {path} never appeared (5 min)"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Creates `name.db` from `schema` (unless `db` gives a file to serve) and serves it on
    /// `unix:<dir>/name.sock`; returns that target.
    pub fn ovsdb_server(&mut self, name: &str, schema: &Path, db: Option<&str>) -> String {
        let file = match db {
            Some(f) => f.to_owned(),
            None => {
                let f = self.path(&format!("{name}.db"));
                let st = Command::new(&self.tools.ovsdb_tool)
                    .arg("create")
                    .arg(&f)
                    .arg(schema)
                    .status()
                    .expect("ovsdb-tool");
                assert!(st.success(), "ovsdb-tool create {f}");
                f
            }
        };
        let sock = self.path(&format!("{name}.sock"));
        let log = self.path(&format!("{name}.log"));
        let server = self.tools.ovsdb_server.clone();
        self.spawn(
            Command::new(server)
                .arg("--no-chdir")
                .arg(format!("--remote=punix:{sock}"))
                .arg(format!("--unixctl={}", self.path(&format!("{name}.ctl"))))
                .arg(format!("--log-file={log}"))
                .arg("-vconsole:off")
                .arg(&file),
        );
        self.wait_for(&sock, "ovsdb-server", &log);
        format!("unix:{sock}")
    }

    /// Starts the real `ovn-northd` between `nb` and `sb`.
    pub fn ovn_northd(&mut self, nb: &str, sb: &str) {
        let log = self.path("northd.log");
        let ctl = self.path("northd.ctl");
        let northd = self.tools.northd.clone();
        self.spawn(
            Command::new(northd)
                .arg("--no-chdir")
                .arg(format!("--ovnnb-db={nb}"))
                .arg(format!("--ovnsb-db={sb}"))
                .arg(format!("--unixctl={ctl}"))
                .arg(format!("--log-file={log}"))
                .arg("-vconsole:off"),
        );
        self.wait_for(&ctl, "ovn-northd", &log);
    }

    /// Runs `ovn-nbctl --db=nb ARGS` and returns its stdout.
    pub fn nbctl(&self, nb: &str, args: &[&str]) -> String {
        run(Command::new(&self.tools.nbctl)
            .arg(format!("--db={nb}"))
            .args(args))
    }

    /// Runs `ovn-sbctl --db=sb ARGS` and returns its stdout.
    pub fn sbctl(&self, sb: &str, args: &[&str]) -> String {
        run(Command::new(&self.tools.sbctl)
            .arg(format!("--db={sb}"))
            .args(args))
    }

    /// Starts an `ovn-trace` daemon on `sb`; query it with [`Unixctl`] on the returned
    /// socket path.
    pub fn ovn_trace(&mut self, sb: &str, tag: &str) -> String {
        let ctl = self.path(&format!("trace-{tag}.ctl"));
        let log = self.path(&format!("trace-{tag}.log"));
        let trace = self.tools.trace.clone();
        self.spawn(
            Command::new(trace)
                .arg("--no-chdir")
                .arg(format!("--db={sb}"))
                .arg(format!("--unixctl={ctl}"))
                .arg(format!("--log-file={log}"))
                .arg("-vconsole:off")
                .arg("--detach")
                .arg(format!(
                    "--pidfile={}",
                    self.path(&format!("trace-{tag}.pid"))
                )),
        );
        // --detach: the process we started exits once the daemon (a grandchild, killed on
        // drop through its pidfile) has loaded the SB and signalled that it is ready; a
        // query sent before that can crash ovn-trace 23.03. Loading (and parsing every flow
        // of) the SB of an 800-node network takes it minutes.
        let t0 = Instant::now();
        loop {
            if let Some(Ok(Some(st))) = self.children.last_mut().map(|c| c.try_wait()) {
                assert!(
                    st.success(),
                    "ovn-trace failed to start ({st}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(1800),
                "ovn-trace never became ready (30 min)"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        ctl
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "pid")
                    && let Ok(pid) = std::fs::read_to_string(&p)
                    && let Ok(pid) = pid.trim().parse::<i32>()
                {
                    let _ = Command::new("kill").arg(pid.to_string()).status();
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// A unixctl (JSON-RPC over a unix socket) connection, as `ovs-appctl` speaks it.
#[derive(Debug)]
pub struct Unixctl {
    sock: UnixStream,
    buf: Vec<u8>,
    id: u64,
}

impl Unixctl {
    /// Connects to a daemon's control socket.
    pub fn connect(path: &str) -> std::io::Result<Unixctl> {
        let sock = UnixStream::connect(path)?;
        sock.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Unixctl {
            sock,
            buf: Vec::new(),
            id: 0,
        })
    }

    /// Runs `command ARGS...`; `Ok` with the reply text, `Err` with the daemon's error.
    pub fn call(&mut self, command: &str, args: &[&str]) -> Result<String, String> {
        self.id += 1;
        let req = json!({"method": command, "params": args, "id": self.id});
        self.sock
            .write_all(req.to_string().as_bytes())
            .map_err(|e| e.to_string())?;
        loop {
            let mut it = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
            match it.next() {
                Some(Ok(v)) => {
                    let used = it.byte_offset();
                    self.buf.drain(..used);
                    if v.get("id").and_then(Value::as_u64) != Some(self.id) {
                        return Err(format!("reply to another request: {v}"));
                    }
                    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
                        return Err(e
                            .as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| e.to_string()));
                    }
                    return Ok(v
                        .get("result")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned());
                }
                Some(Err(e)) if !e.is_eof() => return Err(format!("bad reply: {e}")),
                _ => {
                    let mut chunk = [0u8; 65536];
                    let n = self.sock.read(&mut chunk).map_err(|e| e.to_string())?;
                    if n == 0 {
                        return Err(format!(
                            "connection closed after {:?}",
                            String::from_utf8_lossy(&self.buf)
                        ));
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
}
