//! Refusals and bundles against our OpenFlow server and a real `ovs-vswitchd`: bad tables
//! through `ovs-ofctl`, malformed messages sent raw over the socket (the same OpenFlow error,
//! xid and data back, and the connection still answers an echo), a framing error (that
//! connection closes, the server carries on), and `ovs-ofctl --bundle add-flows` (applied
//! atomically: a bundle with one bad flow changes nothing).

mod ofctl_support;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use ofctl_support::{Pair, flow_file};
use openflow::{Body, Framer, Msg};

#[test]
fn bad_tables_and_refusals_match_ovs() {
    let Some(p) = Pair::start() else { return };
    for args in [
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "br0",
            "table=255,actions=drop",
        ][..],
        &[
            "-O",
            "OpenFlow15",
            "add-flow",
            "br0",
            "table=254,actions=drop",
        ],
        &["add-flow", "br0", "table=254,actions=drop"],
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "br0",
            "table=2,actions=goto_table:1",
        ],
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "br0",
            "recirc_id=7,actions=drop",
        ],
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "br0",
            "priority=5,ip,actions=drop",
        ],
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "br0",
            "check_overlap,priority=5,ip,nw_src=1.2.3.4,actions=drop",
        ],
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "br0",
            "check_overlap,priority=5,ip,actions=output:1",
        ],
        &["-O", "OpenFlow13", "dump-flows", "br0"],
    ] {
        p.same(args);
    }
}

/// Talks OpenFlow 1.3 raw on a fresh connection: HELLO exchange, then `msgs`, then an echo
/// request; returns every message received after the HELLO, up to the echo reply (or the
/// close).
fn raw_session(sock: &Path, msgs: &[Vec<u8>]) -> (Vec<Msg>, bool) {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(&openflow::msg::hello(&[4], 1).encode().expect("hello"))
        .expect("send hello");
    for m in msgs {
        s.write_all(m).expect("send");
    }
    let echo = Msg::new(4, 0x77, Body::EchoRequest(b"still here".to_vec()));
    let _ = s.write_all(&echo.encode().expect("echo"));
    let mut f = Framer::new();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return (got, false),
            Ok(n) => n,
        };
        f.feed(&buf[..n]);
        while let Ok(Some(m)) = f.next_message() {
            let m = Msg::decode(&m).expect("decode a reply");
            match &m.body {
                Body::Hello(_) => {}
                Body::EchoReply(d) if m.xid == 0x77 => {
                    assert_eq!(d, b"still here");
                    return (got, true);
                }
                _ => got.push(m),
            }
        }
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn malformed_messages_get_the_same_errors_and_the_connection_lives() {
    let Some(p) = Pair::start() else { return };
    let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
        // FEATURES_REQUEST with a stray byte: OFPBRC_BAD_LEN.
        (
            "features request too long",
            vec![hex("04 05 0009 00000011 2a")],
        ),
        // Unknown message type 0x63: OFPBRC_BAD_TYPE.
        ("unknown type", vec![hex("04 63 000c 00000012 01020304")]),
        // A flow mod cut inside its match.
        (
            "flow mod cut short",
            vec![hex(
                "04 0e 0034 00000013 0000000000000000 0000000000000000 00 00 0000 0000 8000 ffffffff ffffffff ffffffff 0000 0000 0001 0010",
            )],
        ),
        // Unknown Nicira subtype: OFPBRC_BAD_SUBTYPE.
        (
            "unknown nicira subtype",
            vec![hex("04 04 0010 00000014 00002320 000003e7")],
        ),
        // Unknown experimenter: OFPBRC_BAD_EXPERIMENTER.
        (
            "unknown experimenter",
            vec![hex("04 04 0010 00000015 00abcdef 00000001")],
        ),
        // Other versions on an OpenFlow 1.3 connection: an echo is answered in its own
        // version, anything else refused.
        ("echo of another version", vec![hex("01 02 0008 00000016")]),
        (
            "features request of another version",
            vec![hex("01 05 0008 00000018")],
        ),
        // Nicira vendor errors (NXBAC_BAD_CONJUNCTION, an experimenter error in 1.3): a
        // conjunction of one clause (refused while decoding), and a conjunction beside an
        // output (refused by the switch's action checks).
        (
            "conjunction of one clause",
            vec![hex(
                "04 0e 0050 00000021 0000000000000000 0000000000000000 00 00 0000 0000 8000 ffffffff ffffffff ffffffff 0000 0000 0001 0004 00000000 0004 0018 00000000 ffff 0010 00002320 0022 00 01 00000001",
            )],
        ),
        (
            "conjunction beside an output",
            vec![hex(
                "04 0e 0060 00000022 0000000000000000 0000000000000000 00 00 0000 0000 8000 ffffffff ffffffff ffffffff 0000 0000 0001 0004 00000000 0004 0028 00000000 ffff 0010 00002320 0022 00 02 00000001 0000 0010 00000001 ffff 000000000000",
            )],
        ),
        // Multipart of an unknown type: OFPBRC_BAD_MULTIPART.
        (
            "unknown multipart",
            vec![hex("04 12 0010 00000017 ff07 0000 00000000")],
        ),
    ];
    for (what, msgs) in &cases {
        let (ours, ours_alive) = raw_session(&p.ours.sock, msgs);
        let (ovs, ovs_alive) = raw_session(&p.ovs_sock(), msgs);
        assert_eq!(ours, ovs, "{what}: replies, ours (left) vs OVS");
        assert!(ours_alive && ovs_alive, "{what}: connection still answers");
        assert!(
            ours.iter()
                .all(|m| matches!(m.body, Body::Error(_) | Body::EchoReply(_))),
            "{what}: {ours:?}"
        );
    }
}

#[test]
fn framing_error_closes_only_that_connection() {
    let Some(p) = Pair::start() else { return };
    // A header whose length (4) is below the header's own 8 bytes: no way to find the next
    // message. Both switches drop the connection.
    for sock in [p.ours.sock.clone(), p.ovs_sock()] {
        let (got, alive) = raw_session(&sock, &[hex("04 02 0004 00000001")]);
        assert!(!alive, "{}: {got:?}", sock.display());
    }
    p.same(&["show", "br0"]);
}

#[test]
fn bundles_are_atomic_like_ovs() {
    let Some(p) = Pair::start() else { return };
    let good: Vec<String> = (1..=50)
        .map(|i| format!("priority={i},in_port=1,tcp,tp_dst={i},actions=output:2"))
        .collect();
    let mut bad = good
        .iter()
        .map(|f| f.replace("output:2", "output:3"))
        .collect::<Vec<_>>();
    bad.push("table=2,actions=goto_table:1".to_string());
    let good_file = flow_file(&p.ours.dir, "good.txt", &good);
    let bad_file = flow_file(&p.ours.dir, "bad.txt", &bad);
    for v in ["OpenFlow14", "OpenFlow15"] {
        p.same(&[
            "-O",
            v,
            "--bundle",
            "add-flows",
            "br0",
            good_file.to_str().expect("utf-8"),
        ]);
        p.same_flows(&["-O", "OpenFlow14"], "a bundle");
        // Nothing of a failing bundle is applied.
        let (a, b) = p.both(&[
            "-O",
            v,
            "--bundle",
            "add-flows",
            "br0",
            bad_file.to_str().expect("utf-8"),
        ]);
        assert!(!a.ok && !b.ok, "bad bundle refused: {a:?} {b:?}");
        p.same_flows(&["-O", "OpenFlow14"], "a failed bundle");
        p.same(&["-O", v, "--bundle", "del-flows", "br0"]);
        p.same_flows(&["-O", "OpenFlow14"], "del-flows in a bundle");
    }
}
