//! `OfConn` and `OfServer` without OVS: version negotiation, flow-mod batching (one bridge
//! write per batch), multipart splitting, garbage in (never a panic), the socket file's mode
//! and its removal on shutdown.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use flow::ofp::FlowSpec;
use ofproto::{Backend, Bridge};
use openflow::{Body, Framer, Msg};
use upcall::handler::SharedBridge;
use vswitchd::ofconn::{OfConn, StaticBridge};
use vswitchd::ofserver::{Listen, OfServer};

fn bridge() -> (Arc<SharedBridge>, Arc<StaticBridge>) {
    let shared = SharedBridge::new(Bridge::ovs_sandbox(3, Backend::TupleSpace));
    let b = Arc::new(StaticBridge::new("br0", 1, shared.clone()));
    (shared, b)
}

fn msgs(bytes: &[u8]) -> Vec<Msg> {
    let mut f = Framer::new();
    f.feed(bytes);
    let mut v = Vec::new();
    while let Ok(Some(m)) = f.next_message() {
        v.push(Msg::decode(&m).expect("our own output decodes"));
    }
    v
}

fn enc(m: Msg) -> Vec<u8> {
    m.encode().expect("encode")
}

#[test]
fn hello_negotiates_the_highest_common_version() {
    let (_, b) = bridge();
    let mut c = OfConn::new(b.clone());
    let ours = msgs(&c.hello());
    assert_eq!(
        openflow::msg::hello_versions(&ours[0]),
        vec![1, 2, 3, 4, 5, 6]
    );
    assert!(c.feed(&enc(openflow::msg::hello(&[1, 4], 1))).is_empty());
    assert_eq!(c.version(), Some(4));
    // No common version: HELLO_FAILED/INCOMPATIBLE, then closed.
    let mut c = OfConn::new(b);
    let hello7 = [7u8, 0, 0, 8, 0, 0, 0, 9];
    let hello7 = [&hello7[..], &[0, 1, 0, 8, 0, 0, 0, 0x80]].concat();
    let mut h = hello7.clone();
    h[3] = 16;
    let out = msgs(&c.feed(&h));
    assert!(
        matches!(&out[0].body, Body::Error(e) if e.typ == 0 && e.code == 0),
        "{out:?}"
    );
    assert!(c.closed().is_some());
}

#[test]
fn back_to_back_flow_mods_are_one_write_and_errors_keep_their_order() {
    let (shared, b) = bridge();
    let mut c = OfConn::new(b);
    c.feed(&enc(openflow::msg::hello(&[4], 1)));
    let mut stream = Vec::new();
    for i in 0..1000u32 {
        let mut spec = FlowSpec {
            priority: (i % 60000) as u16 + 1,
            ..FlowSpec::default()
        };
        if i == 500 {
            spec.table = Some(254); // refused: not a controller's table
        }
        let fm = openflow::FlowMod::add(spec);
        stream.extend(enc(Msg::new(4, 10_000 + i, Body::FlowMod(fm))));
    }
    stream.extend(enc(Msg::new(4, 77, Body::BarrierRequest)));
    let before = shared.changes();
    let out = msgs(&c.feed(&stream));
    assert_eq!(
        shared.changes(),
        before + 1,
        "one bridge write for the batch"
    );
    assert_eq!(shared.read().n_rules(), 999);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0].xid, 10_500);
    assert!(matches!(&out[0].body, Body::Error(e) if e.typ == 1 && e.code == 5));
    assert_eq!((out[1].xid, &out[1].body), (77, &Body::BarrierReply));
}

#[test]
fn big_dumps_are_split_under_64k() {
    let (shared, b) = bridge();
    let text: String = (0..3000)
        .map(|i| {
            format!(
                "priority={},ip,nw_src=10.{}.{}.1,actions=output:1\n",
                i % 100 + 1,
                i / 256,
                i % 256
            )
        })
        .collect();
    let now = shared.now_ms();
    shared
        .write(move |br| br.add_flows_text(&text, now))
        .expect("flows");
    let mut c = OfConn::new(b);
    c.feed(&enc(openflow::msg::hello(&[4], 1)));
    let req = Msg::new(
        4,
        5,
        Body::StatsRequest {
            flags: 0,
            body: openflow::stats::MpRequest::Flow(Default::default()),
        },
    );
    let out = c.feed(&enc(req));
    let replies = msgs(&out);
    assert!(replies.len() > 1);
    let mut n = 0;
    for (i, m) in replies.iter().enumerate() {
        let Body::StatsReply {
            flags,
            body: openflow::stats::MpReply::Flow(f),
        } = &m.body
        else {
            panic!("{m:?}")
        };
        assert_eq!(
            *flags,
            u16::from(i + 1 < replies.len()),
            "REPLY_MORE on all but the last"
        );
        n += f.len();
    }
    assert_eq!(n, 3000);
}

#[test]
fn garbage_never_panics() {
    let (_, b) = bridge();
    let mut rng = testutil::rng::TestRng::new(42);
    for round in 0..300 {
        let mut c = OfConn::new(b.clone());
        let v = [1u8, 4, 6][round % 3];
        c.feed(&enc(openflow::msg::hello(&[v], 1)));
        for _ in 0..20 {
            // Valid headers with random bodies, and sometimes pure noise.
            let len = rng.range(8, 200) as usize;
            let mut m = rng.bytes(len);
            if !rng.chance(1, 10) {
                m[0] = v;
                m[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            }
            let _ = c.feed(&m);
            if c.closed().is_some() {
                break;
            }
        }
    }
}

#[test]
fn server_socket_is_private_answers_and_goes_away() {
    let (_, b) = bridge();
    let dir = std::env::temp_dir().join(format!("ofconn-srv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("dir");
    let path = OfServer::mgmt_path(&dir, "br0");
    std::fs::write(&path, b"stale").expect("stale file");
    let server = OfServer::start_bridge(b, &dir, &["ptcp:0:127.0.0.1".to_string()]).expect("start");
    let mode = std::fs::metadata(&path)
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let addrs = server.addrs();
    assert_eq!(addrs.len(), 2);
    let mut s = UnixStream::connect(&path).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(&enc(openflow::msg::hello(&[4], 1)))
        .expect("hello");
    s.write_all(&enc(Msg::new(4, 3, Body::EchoRequest(b"x".to_vec()))))
        .expect("echo");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while msgs(&got).len() < 2 {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(msgs(&got)[1].body, Body::EchoReply(b"x".to_vec()));
    if let Listen::Tcp(a) = &addrs[1] {
        let mut t = std::net::TcpStream::connect(a).expect("tcp connect");
        t.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut h = [0u8; 16];
        t.read_exact(&mut h[..8]).expect("hello over tcp");
        assert_eq!(h[1], 0);
    } else {
        panic!("{addrs:?}");
    }
    assert!(server.n_connections() >= 1);
    server.shutdown();
    assert!(!path.exists(), "socket removed");
    // The connection was closed by the shutdown.
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(Listen::parse("tcp:1").is_err() && Listen::parse("ptcp:x").is_err());
    assert_eq!(
        Listen::parse("ptcp:6653:127.0.0.1").expect("parse"),
        Listen::Tcp("127.0.0.1:6653".parse().expect("addr"))
    );
}
