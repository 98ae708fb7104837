//! The client and the session against a real `ovsdb-server` (Open vSwitch's), started as a
//! child process in a temporary directory: monitors fill replicas that match fresh full
//! reads and the database file; a session survives the server's death and restart.
//!
//! Skipped (via `testutil::skip`, a failure under `FLOWSWITCH_NO_SKIP=1`) when
//! `ovsdb-server`/`ovsdb-tool` are not installed.

use ovsdb::client::MonitorKind;
use ovsdb::db::UpdateKind;
use ovsdb::session::Backoff;
use ovsdb::{Client, Database, Error, MonitorSpec, Row, RowEvent, Session, StreamEvent, Uuid};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const NB_SCHEMA: &str = "/usr/share/ovn/ovn-nb.ovsschema";
const VS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

fn find(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

/// A private ovsdb-server over one database file.
struct Server {
    dir: PathBuf,
    db: PathBuf,
    sock: PathBuf,
    server: PathBuf,
    tool: PathBuf,
    child: Option<Child>,
}

impl Server {
    /// Creates a database of `schema` and starts a server on it; `None` (after recording
    /// the skip) when OVS's tools or the schema are missing.
    fn start(schema: &str) -> Option<Server> {
        let (Some(server), Some(tool)) = (find("ovsdb-server"), find("ovsdb-tool")) else {
            testutil::skip("ovsdb-server not installed");
            return None;
        };
        if !Path::new(schema).exists() {
            testutil::skip(&format!("ovsdb-server not installed ({schema} missing)"));
            return None;
        }
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ovsdb-it-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let db = dir.join("test.db");
        let st = Command::new(&tool)
            .arg("create")
            .arg(&db)
            .arg(schema)
            .status()
            .expect("run ovsdb-tool");
        assert!(st.success(), "ovsdb-tool create failed");
        let mut s = Server {
            sock: dir.join("db.sock"),
            dir,
            db,
            server,
            tool,
            child: None,
        };
        s.run();
        Some(s)
    }

    fn target(&self) -> String {
        format!("unix:{}", self.sock.display())
    }

    fn db_path(&self) -> &str {
        self.db.to_str().expect("utf-8 temp path")
    }

    /// Starts the server process and waits for its socket to accept connections.
    fn run(&mut self) {
        assert!(self.child.is_none());
        let _ = std::fs::remove_file(&self.sock);
        let child = Command::new(&self.server)
            .arg("--no-chdir")
            .arg(format!("--remote=punix:{}", self.sock.display()))
            .arg(format!("--unixctl={}", self.dir.join("ctl").display()))
            .arg(format!("--pidfile={}", self.dir.join("pid").display()))
            .arg(format!("--log-file={}", self.dir.join("log").display()))
            .arg(&self.db)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ovsdb-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&self.sock).is_err() {
            assert!(Instant::now() < deadline, "ovsdb-server did not come up");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILLs the server and reaps it.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Runs a transaction on the database file with `ovsdb-tool` (server stopped).
    fn tool_transact(&self, txn: &Value) {
        let out = Command::new(&self.tool)
            .arg("transact")
            .arg(&self.db)
            .arg(txn.to_string())
            .output()
            .expect("run ovsdb-tool transact");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !stdout.contains("\"error\""),
            "ovsdb-tool transact: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every row of every table of `db`, read with one `select` per table.
fn fresh_read(c: &mut Client, db: &str) -> Database {
    let schema = c.get_schema(db).expect("get_schema");
    let tables: Vec<String> = schema.tables.keys().cloned().collect();
    let ops = tables
        .iter()
        .map(|t| json!({"op": "select", "table": t, "where": []}))
        .collect();
    let results = c.transact(db, ops).expect("select all");
    let mut body = serde_json::Map::new();
    for (t, r) in tables.iter().zip(&results) {
        let mut rows = serde_json::Map::new();
        for row in r["rows"].as_array().expect("rows") {
            let uuid = row["_uuid"][1].as_str().expect("_uuid").to_owned();
            rows.insert(uuid, row.clone());
        }
        body.insert(t.clone(), Value::Object(rows));
    }
    let mut out = Database::new(schema);
    out.apply_tables(&Value::Object(body), UpdateKind::Values)
        .expect("apply select");
    out
}

/// Panics with the first difference when two replicas do not hold the same rows.
fn assert_same(what: &str, a: &Database, b: &Database) {
    assert_eq!(
        a.schema.tables.keys().collect::<Vec<_>>(),
        b.schema.tables.keys().collect::<Vec<_>>()
    );
    for t in a.schema.tables.keys() {
        let (ra, rb) = (&a.table(t).rows, &b.table(t).rows);
        for (u, row) in ra {
            assert_eq!(Some(row), rb.get(u), "{what}: {t} row {u} differs");
        }
        for u in rb.keys() {
            assert!(ra.contains_key(u), "{what}: {t} row {u} only in the second");
        }
    }
}

fn uuid_of(result: &Value) -> Uuid {
    Uuid::parse(result["uuid"][1].as_str().expect("insert result")).expect("uuid")
}

fn where_uuid(u: Uuid) -> Value {
    json!([["_uuid", "==", ["uuid", u.to_string()]]])
}

/// Polls `c` until `pred` holds on its replica (5 s at most).
fn poll_until(c: &mut Client, what: &str, pred: impl Fn(&Database) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pred(c.replica().expect("monitoring")) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        c.poll(Duration::from_millis(100)).expect("poll");
    }
}

fn connect(s: &Server) -> Client {
    let mut c = Client::connect(&s.target()).expect("connect");
    c.set_rpc_timeout(Duration::from_secs(10));
    c
}

#[test]
fn nb_monitor_sees_transactions_and_matches_fresh_reads() {
    let Some(server) = Server::start(NB_SCHEMA) else {
        return;
    };
    let nb = "OVN_Northbound";
    let mut c = connect(&server);
    assert!(c.list_dbs().unwrap().contains(&nb.to_owned()));
    c.monitor_cond(nb, &MonitorSpec::all())
        .expect("monitor_cond");
    assert_eq!(c.monitor_kind(), Some(MonitorKind::Cond));
    assert!(
        c.replica()
            .unwrap()
            .tables
            .values()
            .all(|t| t.rows.is_empty())
    );
    // A second client on plain `monitor` (RFC 7047 `update`s), of two tables only.
    let mut plain = connect(&server);
    let spec = MonitorSpec::all()
        .table("Logical_Switch", &[])
        .table("Logical_Switch_Port", &[]);
    plain.monitor(nb, &spec).expect("monitor");
    assert_eq!(plain.monitor_kind(), Some(MonitorKind::Plain));

    // Insert a switch with a port, a map and a set.
    let r = c
        .transact(
            nb,
            vec![
                json!({"op": "insert", "table": "Logical_Switch", "row": {
                    "name": "sw0",
                    "external_ids": ["map", [["a", "1"], ["b", "2"]]],
                    "ports": ["set", [["named-uuid", "p0"]]]}}),
                json!({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "p0", "row": {
                    "name": "lsp0",
                    "addresses": ["set", ["00:00:00:00:00:01 10.0.0.1", "router"]]}}),
            ],
        )
        .expect("insert");
    let (sw, p0) = (uuid_of(&r[0]), uuid_of(&r[1]));
    poll_until(&mut c, "sw0", |db| db.row("Logical_Switch", sw).is_some());
    let db = c.replica().unwrap();
    let row = db.row("Logical_Switch", sw).unwrap();
    assert_eq!(row.str("name"), "sw0");
    assert_eq!(row.map_get("external_ids", "b"), Some("2"));
    assert_eq!(row.uuids("ports").collect::<Vec<_>>(), [p0]);
    assert_eq!(
        db.row("Logical_Switch_Port", p0)
            .unwrap()
            .strs("addresses")
            .count(),
        2
    );
    let changes = c.take_changes();
    assert!(
        changes.contains(&("Logical_Switch".into(), sw)),
        "{changes:?}"
    );
    assert!(
        changes.contains(&("Logical_Switch_Port".into(), p0)),
        "{changes:?}"
    );
    let generation = c.generation();

    // Modify maps and sets: update2 diffs (map key added, changed, removed; set elements
    // toggled), a port replaced (the old one garbage-collected), a scalar changed.
    let r = c
        .transact(
            nb,
            vec![
                json!({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "p1",
                       "row": {"name": "lsp1", "options": ["map", [["k", "v"]]]}}),
                json!({"op": "mutate", "table": "Logical_Switch", "where": where_uuid(sw),
                       "mutations": [
                           ["external_ids", "delete", ["set", ["a"]]],
                           ["external_ids", "insert", ["map", [["c", "3"]]]],
                           ["ports", "insert", ["set", [["named-uuid", "p1"]]]],
                           ["ports", "delete", ["set", [["uuid", p0.to_string()]]]]]}),
                json!({"op": "update", "table": "Logical_Switch", "where": where_uuid(sw),
                       "row": {"other_config": ["map", [["x", "y"]]], "name": "sw0-renamed"}}),
            ],
        )
        .expect("mutate");
    let p1 = uuid_of(&r[0]);
    poll_until(&mut c, "the mutation", |db| {
        db.row("Logical_Switch", sw)
            .is_some_and(|r| r.str("name") == "sw0-renamed")
    });
    assert!(c.generation() > generation);
    let db = c.replica().unwrap();
    let row = db.row("Logical_Switch", sw).unwrap();
    assert_eq!(row.map_get("external_ids", "a"), None);
    assert_eq!(row.map_get("external_ids", "c"), Some("3"));
    assert_eq!(row.map_get("other_config", "x"), Some("y"));
    assert_eq!(row.uuids("ports").collect::<Vec<_>>(), [p1]);
    assert!(
        db.row("Logical_Switch_Port", p0).is_none(),
        "unreferenced port collected"
    );
    let changes = c.take_changes();
    assert!(
        changes.contains(&("Logical_Switch_Port".into(), p0)),
        "{changes:?}"
    );
    assert!(
        changes.contains(&("Logical_Switch_Port".into(), p1)),
        "{changes:?}"
    );

    // A map value changed in place by update2's "modify" diff (same key, new value).
    c.transact(
        nb,
        vec![
            json!({"op": "update", "table": "Logical_Switch", "where": where_uuid(sw),
                    "row": {"external_ids": ["map", [["b", "22"], ["c", "3"]]]}}),
        ],
    )
    .expect("update");
    poll_until(&mut c, "b=22", |db| {
        db.row("Logical_Switch", sw)
            .and_then(|r| r.map_get("external_ids", "b"))
            == Some("22")
    });

    // The replica equals a fresh full read, a fresh monitor and the database file.
    let fresh = fresh_read(&mut c, nb);
    assert_same("replica vs select", c.replica().unwrap(), &fresh);
    let mut c2 = connect(&server);
    c2.monitor_cond(nb, &MonitorSpec::all()).unwrap();
    assert_same(
        "replica vs fresh monitor",
        c.replica().unwrap(),
        c2.replica().unwrap(),
    );
    let file = ovsdb::file::read(server.db_path()).expect("read db file");
    assert_same("replica vs file", c.replica().unwrap(), &file);
    assert_eq!(file.table("Logical_Switch").rows.len(), 1);
    assert_eq!(file.table("Logical_Switch_Port").rows.len(), 1);
    // The plain monitor (two tables) agrees on its tables.
    poll_until(&mut plain, "plain monitor to catch up", |db| {
        db.table("Logical_Switch").rows == fresh.table("Logical_Switch").rows
            && db.table("Logical_Switch_Port").rows == fresh.table("Logical_Switch_Port").rows
    });
    assert!(plain.replica().unwrap().table("ACL").rows.is_empty());

    // Per-operation and commit errors are reported as such.
    let e = c
        .transact(
            nb,
            vec![
                json!({"op": "comment", "comment": "fine"}),
                json!({"op": "insert", "table": "Logical_Switch", "row": {"no_such_column": 1}}),
            ],
        )
        .unwrap_err();
    assert!(matches!(e, Error::Transaction { op: Some(1), .. }), "{e}");
    // A commit error: two ports with one name (the name index).
    let e = c
        .transact(
            nb,
            vec![
                json!({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "d",
                       "row": {"name": "lsp1"}}),
                json!({"op": "mutate", "table": "Logical_Switch", "where": where_uuid(sw),
                       "mutations": [["ports", "insert", ["set", [["named-uuid", "d"]]]]]}),
            ],
        )
        .unwrap_err();
    assert!(
        matches!(e, Error::Transaction { op: None, ref error, .. } if error == "constraint violation"),
        "{e}"
    );
    let e = c.get_schema("No_Such_DB").unwrap_err();
    assert!(matches!(e, Error::Rpc { .. }), "{e}");
    assert!(c.is_connected());
}

#[test]
fn session_reconnects_and_rebuilds_the_replica() {
    let Some(mut server) = Server::start(VS_SCHEMA) else {
        return;
    };
    let vs = "Open_vSwitch";
    let mut s = Session::new(&server.target(), vs, MonitorSpec::all())
        .with_backoff(Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(80),
        })
        .with_rpc_timeout(Duration::from_secs(10));
    assert!(s.replica().is_none());
    assert!(s.poll(Duration::from_secs(5)).expect("first connect"));
    assert_eq!(s.connects(), 1);
    let r = s
        .transact(vec![
            json!({"op": "insert", "table": "Open_vSwitch", "row": {
                "bridges": ["set", [["named-uuid", "b0"], ["named-uuid", "b1"]]]}}),
            json!({"op": "insert", "table": "Bridge", "uuid-name": "b0", "row": {
                "name": "br0", "external_ids": ["map", [["k", "v"]]]}}),
            json!({"op": "insert", "table": "Bridge", "uuid-name": "b1", "row": {"name": "br1"}}),
        ])
        .expect("insert");
    let (ovs, b0, b1) = (uuid_of(&r[0]), uuid_of(&r[1]), uuid_of(&r[2]));
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.replica().unwrap().table("Bridge").rows.len() < 2 {
        assert!(Instant::now() < deadline, "bridges did not arrive");
        s.poll(Duration::from_millis(100)).unwrap();
    }
    s.take_changes();
    // A second session streams the bridges instead of keeping them; a record folded from
    // its events (`None`: changed, contents unknown) follows the kept replica.
    let mut st = Session::new(&server.target(), vs, MonitorSpec::all().streamed("Bridge"))
        .with_backoff(Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(80),
        });
    let mut record: BTreeMap<Uuid, Option<Row>> = BTreeMap::new();
    let fold = |rec: &mut BTreeMap<Uuid, Option<Row>>, evs: Vec<StreamEvent>| {
        for e in evs {
            assert_eq!(&*e.table, "Bridge");
            match e.event {
                RowEvent::Reset => rec.clear(),
                RowEvent::Put(u, r) => drop(rec.insert(u, Some(r))),
                RowEvent::Changed(u) => drop(rec.insert(u, None)),
                RowEvent::Deleted(u) => drop(rec.remove(&u)),
            }
        }
    };
    let kept = |s: &Session| -> BTreeMap<Uuid, Option<Row>> {
        let t = &s.replica().unwrap().table("Bridge").rows;
        t.iter().map(|(u, r)| (*u, Some((**r).clone()))).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while record.len() < 2 {
        assert!(Instant::now() < deadline, "streamed bridges did not arrive");
        st.poll(Duration::from_millis(100)).unwrap();
        fold(&mut record, st.take_events());
    }
    assert_eq!(record, kept(&s));
    assert!(st.replica().unwrap().table("Bridge").rows.is_empty());
    assert!(
        st.take_changes().iter().all(|(t, _)| t != "Bridge"),
        "streamed rows are events, not changes"
    );

    // The server dies; the database changes behind the session's back.
    server.kill();
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.is_connected() {
        assert!(
            Instant::now() < deadline,
            "the session did not notice the server's death"
        );
        s.poll(Duration::from_millis(50))
            .expect("a lost connection is not an error");
    }
    assert!(s.failures() >= 1, "a reconnect was attempted");
    assert!(s.transact(vec![]).is_err());
    assert_eq!(
        s.replica().unwrap().table("Bridge").rows.len(),
        2,
        "stale replica kept"
    );
    server.tool_transact(&json!([vs,
        {"op": "insert", "table": "Bridge", "uuid-name": "b2", "row": {"name": "br2"}},
        {"op": "mutate", "table": "Open_vSwitch", "where": [],
         "mutations": [["bridges", "delete", ["set", [["uuid", b1.to_string()]]]],
                       ["bridges", "insert", ["set", [["named-uuid", "b2"]]]]]},
        {"op": "mutate", "table": "Bridge", "where": where_uuid(b0),
         "mutations": [["external_ids", "insert", ["map", [["k2", "v2"]]]]]}]));
    server.run();
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.connects() < 2 {
        assert!(
            Instant::now() < deadline,
            "no reconnect: {:?}",
            s.last_error()
        );
        s.poll(Duration::from_millis(100)).expect("poll");
    }
    // The streaming session starts over from the new replica: a reset, then every row.
    let deadline = Instant::now() + Duration::from_secs(5);
    while st.connects() < 2 {
        assert!(
            Instant::now() < deadline,
            "no reconnect of the streaming session"
        );
        st.poll(Duration::from_millis(100)).expect("poll");
    }
    let evs = st.take_events();
    assert!(evs.iter().any(|e| e.event == RowEvent::Reset), "{evs:?}");
    fold(&mut record, evs);
    assert_eq!(record, kept(&s), "streamed record after the reconnect");
    let db = s.replica().unwrap();
    let names: Vec<&str> = db
        .table("Bridge")
        .rows
        .values()
        .map(|r| r.str("name"))
        .collect();
    assert_eq!(db.table("Bridge").rows.len(), 2, "{names:?}");
    assert!(
        db.row("Bridge", b1).is_none(),
        "br1 deleted while disconnected"
    );
    assert_eq!(
        db.row("Bridge", b0).unwrap().map_get("external_ids", "k2"),
        Some("v2")
    );
    let b2 = db
        .table("Bridge")
        .rows
        .iter()
        .find(|(_, r)| r.str("name") == "br2")
        .map(|(u, _)| *u);
    let b2 = b2.expect("br2 inserted while disconnected");
    let changes = s.take_changes();
    for (t, u) in [
        ("Bridge", b1),
        ("Bridge", b2),
        ("Bridge", b0),
        ("Open_vSwitch", ovs),
    ] {
        assert!(
            changes.contains(&(t.to_owned(), u)),
            "{t} {u} missing from {changes:?}"
        );
    }

    // The monitor is live again, and everything agrees with the server and the file.
    s.transact(vec![
        json!({"op": "update", "table": "Bridge", "where": where_uuid(b2),
                           "row": {"datapath_type": "netdev"}}),
    ])
    .expect("update after reconnect");
    let deadline = Instant::now() + Duration::from_secs(5);
    while s
        .replica()
        .unwrap()
        .row("Bridge", b2)
        .unwrap()
        .str("datapath_type")
        != "netdev"
    {
        assert!(
            Instant::now() < deadline,
            "update after reconnect did not arrive"
        );
        s.poll(Duration::from_millis(100)).unwrap();
    }
    assert_eq!(s.take_changes(), [("Bridge".to_owned(), b2)]);
    // The streamed side learns that br2 changed, not how (an `update2` diff).
    let deadline = Instant::now() + Duration::from_secs(5);
    while record.get(&b2).is_some_and(Option::is_some) {
        assert!(Instant::now() < deadline, "streamed update did not arrive");
        st.poll(Duration::from_millis(100)).unwrap();
        fold(&mut record, st.take_events());
    }
    assert_eq!(
        record.keys().collect::<Vec<_>>(),
        kept(&s).keys().collect::<Vec<_>>()
    );
    let fresh = fresh_read(s.client().expect("connected"), vs);
    assert_same("session replica vs select", s.replica().unwrap(), &fresh);
    let file = ovsdb::file::read(server.db_path()).expect("read db file");
    assert_same("session replica vs file", s.replica().unwrap(), &file);
    assert_eq!(file.table("Bridge").rows.len(), 2);
}
