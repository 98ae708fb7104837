//! The client against a scripted fake server on a Unix socket (no Open vSwitch needed):
//! the fallback from `monitor_cond` to plain `monitor`, `echo` answered while waiting,
//! messages split into tiny writes, transaction error reporting, and bad server input
//! (garbage, oversized messages) turning into errors rather than panics.

use ovsdb::client::MonitorKind;
use ovsdb::jsonrpc::{Decoder, Message};
use ovsdb::{Client, Error, MonitorSpec, Uuid};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

const U1: &str = "00000000-0000-0000-0000-000000000001";
const U2: &str = "00000000-0000-0000-0000-000000000002";

fn schema() -> Value {
    json!({"name": "Test", "version": "1.0.0", "tables": {"T": {"columns": {
        "name": {"type": "string"},
        "m": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
        "s": {"type": {"key": "integer", "min": 0, "max": "unlimited"}}}}}})
}

/// The server's end of one connection.
struct Peer {
    s: UnixStream,
    d: Decoder,
}

impl Peer {
    fn recv(&mut self) -> Message {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(m) = self.d.next_message().expect("client sent bad JSON-RPC") {
                return m;
            }
            let n = self.s.read(&mut buf).expect("read");
            assert!(n > 0, "client closed");
            self.d.feed(&buf[..n]);
        }
    }

    /// Receives a request for `method`, returning its id and params.
    fn expect(&mut self, method: &str) -> (Value, Value) {
        match self.recv() {
            Message::Request {
                method: m,
                params,
                id,
            } if m == method => (id, params),
            other => panic!("expected {method}, got {other:?}"),
        }
    }

    /// Sends `v` in writes of a few bytes each.
    fn send_split(&mut self, v: &Value) {
        let bytes = serde_json::to_vec(v).unwrap();
        for chunk in bytes.chunks(3) {
            self.s.write_all(chunk).unwrap();
            self.s.flush().unwrap();
        }
    }

    fn send(&mut self, v: &Value) {
        self.s.write_all(&serde_json::to_vec(v).unwrap()).unwrap();
    }
}

/// Listens on a fresh socket, runs `script` on the first connection in a thread.
fn fake(script: impl FnOnce(Peer) + Send + 'static) -> (String, JoinHandle<()>, PathBuf) {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ovsdb-fake-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sock");
    let l = UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        script(Peer {
            s,
            d: Decoder::new(),
        });
    });
    (path.display().to_string(), h, dir)
}

#[test]
fn falls_back_to_monitor_answers_echo_and_reads_split_updates() {
    let (path, h, dir) = fake(|mut p| {
        let (id, params) = p.expect("get_schema");
        assert_eq!(params, json!(["Test"]));
        p.send_split(&json!({"id": id, "result": schema(), "error": null}));
        let (id, _) = p.expect("monitor_cond");
        p.send(&json!({"id": id, "result": null, "error": "unknown method"}));
        let (id, _) = p.expect("get_schema");
        p.send(&json!({"id": id, "result": schema(), "error": null}));
        let (mid, params) = p.expect("monitor");
        assert_eq!(params[0], "Test");
        assert_eq!(params[2], json!({"T": {"columns": ["name", "m"]}}));
        // An echo before the answer: the client must reply while it waits.
        p.send(&json!({"method": "echo", "params": ["x"], "id": "echo"}));
        match p.recv() {
            Message::Response { result, id } => {
                assert_eq!((result, id), (json!(["x"]), json!("echo")));
            }
            other => panic!("expected the echo reply, got {other:?}"),
        }
        p.send_split(&json!({"id": mid, "error": null, "result": {"T": {
            U1: {"new": {"name": "a", "m": ["map", [["k", "v"]]]}},
            U2: {"new": {"name": "b"}}}}}));
        let mon = params[1].clone();
        // Modify U1 (whole new values), delete U2, in one notification split in tiny writes.
        p.send_split(&json!({"method": "update", "id": null, "params": [mon, {"T": {
            U1: {"old": {"m": ["map", [["k", "v"]]]}, "new": {"name": "a", "m": ["map", [["k", "w"], ["j", "x"]]]}},
            U2: {"old": {"name": "b"}}}}]}));
        // A notification of another monitor is ignored.
        p.send(&json!({"method": "update", "id": null, "params": ["other", {"T": {U2: {"new": {"name": "zz"}}}}]}));
        let (id, _) = p.expect("transact");
        p.send(&json!({"id": id, "error": null,
                       "result": [{"uuid": ["uuid", U1]}, {"error": "constraint violation", "details": "dup"}]}));
        let (id, _) = p.expect("transact");
        p.send(&json!({"id": id, "error": null,
                       "result": [{}, {"error": "referential integrity violation", "details": "ref"}]}));
        let (id, _) = p.expect("transact");
        p.send(&json!({"id": id, "error": {"error": "unknown database", "details": "nope"}, "result": null}));
        // Finally garbage.
        p.s.write_all(b"{\"id\": 1} 42").unwrap();
        std::thread::sleep(Duration::from_millis(200));
    });
    let mut c = Client::connect(&path).expect("bare path target");
    c.set_rpc_timeout(Duration::from_secs(5));
    let spec = MonitorSpec::default().table("T", &["name", "m"]);
    c.monitor_cond("Test", &spec)
        .expect("monitor with fallback");
    assert_eq!(c.monitor_kind(), Some(MonitorKind::Plain));
    assert_eq!(c.echoes_answered(), 1);
    let (u1, u2) = (Uuid::parse(U1).unwrap(), Uuid::parse(U2).unwrap());
    assert_eq!(c.replica().unwrap().table("T").rows.len(), 2);
    assert_eq!(
        c.take_changes(),
        [("T".to_owned(), u1), ("T".to_owned(), u2)]
    );
    assert!(c.poll(Duration::from_secs(5)).unwrap());
    let db = c.replica().unwrap();
    assert!(db.row("T", u2).is_none());
    let r1 = db.row("T", u1).unwrap();
    assert_eq!(r1.map_get("m", "k"), Some("w"));
    assert_eq!(r1.map_get("m", "j"), Some("x"));
    assert_eq!(
        c.take_changes(),
        [("T".to_owned(), u1), ("T".to_owned(), u2)]
    );

    let e = c.transact("Test", vec![json!({}), json!({})]).unwrap_err();
    assert!(
        matches!(&e, Error::Transaction { op: Some(1), error, details } if error == "constraint violation" && details == "dup"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "transaction failed at operation 1: constraint violation (dup)"
    );
    let e = c.transact("Test", vec![json!({})]).unwrap_err();
    assert!(matches!(e, Error::Transaction { op: None, .. }), "{e}");
    let e = c.transact("Test", vec![json!({})]).unwrap_err();
    assert!(
        matches!(&e, Error::Rpc { error, .. } if error == "unknown database: nope"),
        "{e}"
    );
    // The ignored notification for another monitor changed nothing.
    assert_eq!(c.replica().unwrap().table("T").rows.len(), 1);

    let e = c.poll(Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, Error::Protocol(_)), "{e}");
    assert!(!c.is_connected());
    assert!(matches!(c.list_dbs().unwrap_err(), Error::Disconnected(_)));
    h.join().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn oversized_and_malformed_server_input_are_errors() {
    // A message over the limit.
    let (path, h, dir) = fake(|mut p| {
        let (id, _) = p.expect("list_dbs");
        let big = "x".repeat(100_000);
        let _ = p.s.write_all(
            format!("{{\"id\": {id}, \"error\": null, \"result\": [\"{big}\"]}}").as_bytes(),
        );
        std::thread::sleep(Duration::from_millis(100));
    });
    let mut c = Client::connect(&format!("unix:{path}")).unwrap();
    c.set_max_message(10_000);
    let e = c.list_dbs().unwrap_err();
    assert!(
        matches!(&e, Error::Protocol(m) if m.contains("limit")),
        "{e}"
    );
    h.join().unwrap();
    let _ = std::fs::remove_dir_all(dir);

    // A schema of the wrong shape, an update that does not fit the schema, then EOF.
    let (path, h, dir) = fake(|mut p| {
        let (id, _) = p.expect("get_schema");
        p.send(&json!({"id": id, "error": null, "result": {"tables": 3}}));
        let (id, _) = p.expect("get_schema");
        p.send(&json!({"id": id, "error": null, "result": schema()}));
        let (id, params) = p.expect("monitor_cond");
        p.send(&json!({"id": id, "error": null, "result": {}}));
        p.send(&json!({"method": "update2", "id": null, "params": [params[1], {"T": {U1: {"insert": {"s": "not an int"}}}}]}));
        std::thread::sleep(Duration::from_millis(100));
    });
    let mut c = Client::connect(&format!("unix:{path}")).unwrap();
    c.set_rpc_timeout(Duration::from_secs(5));
    assert!(matches!(
        c.get_schema("Test").unwrap_err(),
        Error::Syntax(_)
    ));
    c.monitor_cond("Test", &MonitorSpec::all()).unwrap();
    assert_eq!(c.monitor_kind(), Some(MonitorKind::Cond));
    let e = c.poll(Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, Error::Syntax(_)), "{e}");
    assert!(
        !c.is_connected(),
        "a replica that could not apply an update is not trusted"
    );
    h.join().unwrap();
    let _ = std::fs::remove_dir_all(dir);

    // The server closes the connection while an RPC waits.
    let (path, h, dir) = fake(|mut p| {
        let _ = p.expect("list_dbs");
    });
    let mut c = Client::connect(&format!("unix:{path}")).unwrap();
    let e = c.list_dbs().unwrap_err();
    assert!(matches!(e, Error::Disconnected(_)), "{e}");
    h.join().unwrap();
    let _ = std::fs::remove_dir_all(dir);

    // Nothing listening.
    let e = Client::connect("unix:/nonexistent/ovsdb.sock").unwrap_err();
    assert!(matches!(e, Error::Disconnected(_)), "{e}");
}
