//! Test support: a fake switch on a unix socket that speaks through this crate's codec,
//! records everything `ovs-ofctl` sends (raw bytes and decoded message), and answers
//! HELLO, ECHO, FEATURES, GET_CONFIG, BARRIER, ROLE and the stats requests `ovs-ofctl`
//! makes, from a configurable [`Config`]. Plus `ovs-ofctl` runners.

#![allow(dead_code)]

use openflow::msg::{Features, Role, SwitchConfig, hello, hello_versions};
use openflow::port::PortDesc;
use openflow::stats::{
    AggregateStats, Desc, FlowStats, MpReply, MpRequest, PortStats, TableFeatures, TableStats,
};
use openflow::{Body, Framer, Msg, version};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the fake switch answers with.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Flows for FLOW / NXST_FLOW replies.
    pub flows: Vec<FlowStats>,
    /// Ports (features reply ≤ 1.2, PORT_DESC 1.3+).
    pub ports: Vec<PortDesc>,
    /// Port counters.
    pub port_stats: Vec<PortStats>,
    /// Datapath id.
    pub dpid: u64,
    /// Asynchronous messages sent (xid 0) right after each barrier reply.
    pub after_barrier: Vec<Body>,
}

/// One message received.
#[derive(Debug, Clone)]
pub struct Rx {
    /// Bytes as received.
    pub bytes: Vec<u8>,
    /// Decoded, or the decode error.
    pub msg: Result<Msg, String>,
}

#[derive(Debug, Default)]
struct Shared {
    rx: Vec<Rx>,
    errors: Vec<String>,
}

/// A running fake switch.
#[derive(Debug)]
pub struct FakeSwitch {
    dir: PathBuf,
    /// The socket path.
    pub sock: PathBuf,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeSwitch {
    /// Starts listening in a fresh private directory.
    pub fn start(tag: &str, cfg: Config) -> FakeSwitch {
        let dir = std::env::temp_dir().join(format!(
            "openflow-test-{}-{}-{}",
            tag,
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let sock = dir.join("sw.sock");
        let listener = UnixListener::bind(&sock).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        let cfg = Arc::new(cfg);
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        let (sh, cfg, st) = (sh.clone(), cfg.clone(), st.clone());
                        conns.push(std::thread::spawn(move || serve(s, &sh, &cfg, &st)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        FakeSwitch {
            dir,
            sock,
            shared,
            stop,
            thread: Some(thread),
        }
    }

    /// The switch's private directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// `unix:PATH` for `ovs-ofctl`.
    pub fn target(&self) -> String {
        format!("unix:{}", self.sock.display())
    }

    /// Takes what was received so far (and, when `OPENFLOW_RECORD=FILE` is set, appends
    /// each message's hex to FILE: how `tests/data/ovs_ofctl_messages.txt` is made).
    pub fn take(&self) -> Vec<Rx> {
        let rx = std::mem::take(&mut self.shared.lock().expect("lock").rx);
        if let Some(path) = std::env::var_os("OPENFLOW_RECORD") {
            let text: String = rx
                .iter()
                .map(|r| format!("{}\n", hex::encode(&r.bytes)))
                .collect();
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .expect("record messages");
        }
        rx
    }

    /// Errors the switch hit (decode failures of what it received, encode failures).
    pub fn errors(&self) -> Vec<String> {
        self.shared.lock().expect("lock").errors.clone()
    }
}

impl Drop for FakeSwitch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(mut s: UnixStream, sh: &Mutex<Shared>, cfg: &Config, stop: &AtomicBool) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut framer = Framer::new();
    let mut buf = vec![0u8; 65536];
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => framer.feed(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return,
        }
        loop {
            let bytes = match framer.next_message() {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    sh.lock()
                        .expect("lock")
                        .errors
                        .push(format!("framing: {e}"));
                    return;
                }
            };
            let msg = Msg::decode(&bytes).map_err(|e| e.to_string());
            let reply = msg.as_ref().ok().and_then(|m| answer(m, cfg));
            {
                let mut g = sh.lock().expect("lock");
                if let Err(e) = &msg {
                    g.errors
                        .push(format!("decode {}: {e}", hex::encode(&bytes)));
                }
                g.rx.push(Rx { bytes, msg });
            }
            for r in reply.into_iter().flatten() {
                match r.encode() {
                    Ok(b) => {
                        if s.write_all(&b).is_err() {
                            return;
                        }
                    }
                    Err(e) => sh
                        .lock()
                        .expect("lock")
                        .errors
                        .push(format!("encode {r:?}: {e}")),
                }
            }
        }
    }
}

fn answer(m: &Msg, cfg: &Config) -> Option<Vec<Msg>> {
    let v = m.version;
    let reply = |body| Some(vec![Msg::new(v, m.xid, body)]);
    match &m.body {
        Body::Hello(_) => {
            let mut h = hello(&hello_versions(m), m.xid);
            h.version = v;
            Some(vec![h])
        }
        Body::EchoRequest(d) => reply(Body::EchoReply(d.clone())),
        Body::FeaturesRequest => reply(Body::FeaturesReply(Features {
            datapath_id: cfg.dpid,
            n_buffers: 0,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: 0xc7,
            actions: if v == version::OF10 { 0xfff } else { 0 },
            ports: if v < version::OF13 {
                cfg.ports.clone()
            } else {
                Vec::new()
            },
        })),
        Body::GetConfigRequest => reply(Body::GetConfigReply(SwitchConfig {
            flags: 0,
            miss_send_len: 128,
        })),
        Body::BarrierRequest => {
            let mut v = vec![Msg::new(v, m.xid, Body::BarrierReply)];
            v.extend(
                cfg.after_barrier
                    .iter()
                    .map(|b| Msg::new(m.version, 0, b.clone())),
            );
            Some(v)
        }
        Body::RoleRequest(r) => reply(Body::RoleReply(Role {
            role: r.role,
            generation_id: r.generation_id,
        })),
        Body::NxRoleRequest(r) => reply(Body::NxRoleReply(*r)),
        Body::BundleControl(c) if c.ctrl_type % 2 == 0 => {
            reply(Body::BundleControl(openflow::msg::BundleControl {
                ctrl_type: c.ctrl_type + 1,
                props: Vec::new(),
                ..c.clone()
            }))
        }
        Body::StatsRequest { body, .. } => {
            let rep = match body {
                MpRequest::Desc => MpReply::Desc(Desc {
                    mfr_desc: "flowswitch".into(),
                    hw_desc: "fake".into(),
                    sw_desc: "openflow crate test".into(),
                    serial_num: "42".into(),
                    dp_desc: "br0".into(),
                }),
                MpRequest::Table => MpReply::Table(
                    (0..if v == version::OF10 { 1 } else { 3 })
                        .map(|t| TableStats {
                            table_id: t,
                            name: if t == 0 {
                                "classifier".into()
                            } else {
                                format!("table{t}")
                            },
                            wildcards: 0x3f_ffff,
                            max_entries: 1_000_000,
                            active_count: 7 + u32::from(t),
                            lookup_count: 1000 + u64::from(t),
                            matched_count: 500 + u64::from(t),
                        })
                        .collect(),
                ),
                MpRequest::TableFeatures(_) => MpReply::TableFeatures(vec![TableFeatures {
                    table_id: 0,
                    name: "classifier".into(),
                    metadata_match: u64::MAX,
                    metadata_write: u64::MAX,
                    max_entries: 1_000_000,
                    // Every OpenFlow 1.3 property type, each with an empty list.
                    properties: [0u16, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13, 14, 15]
                        .iter()
                        .flat_map(|t| {
                            let mut p = t.to_be_bytes().to_vec();
                            p.extend_from_slice(&[0, 4, 0, 0, 0, 0]);
                            p
                        })
                        .collect(),
                    ..TableFeatures::default()
                }]),
                MpRequest::PortDesc(_) => MpReply::PortDesc(cfg.ports.clone()),
                MpRequest::Port(_) => MpReply::Port(cfg.port_stats.clone()),
                MpRequest::Flow(_) => MpReply::Flow(cfg.flows.clone()),
                MpRequest::NxFlow(_) => MpReply::NxFlow(cfg.flows.clone()),
                MpRequest::Aggregate(_) | MpRequest::NxAggregate(_) => {
                    let a = AggregateStats {
                        packet_count: cfg.flows.iter().map(|f| f.packet_count).sum(),
                        byte_count: cfg.flows.iter().map(|f| f.byte_count).sum(),
                        flow_count: cfg.flows.len() as u32,
                    };
                    if matches!(body, MpRequest::NxAggregate(_)) {
                        MpReply::NxAggregate(a)
                    } else {
                        MpReply::Aggregate(a)
                    }
                }
                MpRequest::Raw { .. } => return None,
            };
            reply(Body::StatsReply {
                flags: 0,
                body: rep,
            })
        }
        _ => None,
    }
}

/// The `ovs-ofctl` binary: from `PATH`, else where Debian installs it (the same places
/// `testutil::ovs::ofctl_available` looks).
fn ofctl_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push(PathBuf::from("/usr/sbin"));
    dirs.push(PathBuf::from("/usr/bin"));
    dirs.into_iter()
        .map(|d| d.join("ovs-ofctl"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("ovs-ofctl"))
}

/// `ovs-ofctl --timeout=10 ARGS`: (success, stdout, stderr).
pub fn ofctl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(ofctl_bin())
        .arg("--timeout=10")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ovs-ofctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `ovs-ofctl --timeout=SECS ARGS` with `OVS_RUNDIR` set to `rundir` (for commands such as
/// `monitor` that open a control socket and run until the timeout kills them): stdout.
pub fn ofctl_until_timeout(secs: u32, rundir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(ofctl_bin())
        .arg(format!("--timeout={secs}"))
        .args(args)
        .env("OVS_RUNDIR", rundir)
        .stdin(Stdio::null())
        .output()
        .expect("run ovs-ofctl");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `ovs-ofctl ofp-print HEX`: the printed text.
pub fn ofp_print(bytes: &[u8]) -> String {
    let (ok, out, err) = ofctl(&["ofp-print", &hex::encode(bytes)]);
    assert!(ok, "ofp-print failed: {err}");
    out
}

/// Skips (through the project's mechanism) when `ovs-ofctl` is missing; true = go on.
pub fn have_ofctl() -> bool {
    if testutil::ovs::ofctl_available() {
        true
    } else {
        testutil::skip("ovs-ofctl not installed (Debian: openvswitch-common)");
        false
    }
}

/// Writes `text` to a file in a fresh temp dir, returns its path.
pub fn temp_file(tag: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("openflow-{tag}-{}.txt", std::process::id()));
    std::fs::File::create(&p)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .expect("write temp file");
    p
}
