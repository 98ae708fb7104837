//! The control socket driven by the real `ovs-appctl`, and compared with the real
//! `ovs-vswitchd`'s answers where the texts are OVS's.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use testutil::ovs::{OvsSandbox, ovs_missing_reason};
use vswitchd::unixctl::{self, Server};

/// Removes a test's directory when the test ends (also on failure).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh private directory for one test's socket.
fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fs-unixctl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `ovs-appctl -t SOCKET ARGS`: (exit code, stdout, stderr).
fn appctl(sock: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("ovs-appctl")
        .arg("--timeout=10")
        .arg("-t")
        .arg(sock)
        .args(args)
        .output()
        .expect("run ovs-appctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn have_appctl() -> bool {
    if let Some(why) = ovs_missing_reason() {
        testutil::skip(&why);
        return false;
    }
    true
}

fn server(tag: &str) -> (Server, PathBuf) {
    let dir = tmpdir(tag);
    let sock = dir.join("ovs-vswitchd.ctl");
    let s = Server::bind(&sock).expect("bind");
    s.register("test/join", "a [b...]", 1, 3, |args| Ok(args.join("+")));
    s.register("test/fail", "", 0, 0, |_| Err("it failed".to_string()));
    s.register("exit", "[--cleanup]", 0, 1, |_| Ok(String::new()));
    s.register("bond/hash", "mac [vlan] [basis]", 1, 3, |_| {
        Ok(String::new())
    });
    (s, sock)
}

#[test]
fn appctl_builtins_and_registered_commands() {
    if !have_appctl() {
        return;
    }
    let (s, sock) = server("basic");
    let _cleanup = Cleanup(sock.parent().unwrap().to_path_buf());
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "socket is owner-only");

    let (rc, out, err) = appctl(&sock, &["version"]);
    assert_eq!((rc, err.as_str()), (0, ""));
    assert_eq!(out, format!("{}\n", unixctl::VERSION));
    assert!(out.starts_with("ovs-vswitchd (flowswitch ") && out.ends_with(" 3.1.0\n"));

    let (rc, out, _) = appctl(&sock, &["list-commands"]);
    assert_eq!(rc, 0);
    assert_eq!(
        out,
        "The available commands are:\n\
         \x20 bond/hash               mac [vlan] [basis]\n\
         \x20 exit                    [--cleanup]\n\
         \x20 list-commands           \n\
         \x20 test/fail               \n\
         \x20 test/join               a [b...]\n\
         \x20 version                 \n"
    );

    let (rc, out, _) = appctl(&sock, &["test/join", "x", "y z", "w"]);
    assert_eq!((rc, out.as_str()), (0, "x+y z+w\n"));

    // Registered after start.
    s.register("late", "", 0, 0, |_| Ok("late\n".into()));
    assert_eq!(appctl(&sock, &["late"]).1, "late\n");

    let (rc, out, err) = appctl(&sock, &["test/fail"]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "it failed\novs-appctl: {}: server returned an error\n",
            sock.display()
        )
    );

    assert_eq!(
        unixctl::call(&sock, "test/join", &["a", "b"]).unwrap(),
        Ok("a+b\n".into())
    );
    s.shutdown();
    assert!(!sock.exists(), "shutdown removes the socket");
    let (rc, _, _) = appctl(&sock, &["version"]);
    assert_ne!(rc, 0);
}

/// Unknown commands and wrong argument counts: the same exit status and stderr as the real
/// `ovs-vswitchd` (socket path aside).
#[test]
fn appctl_errors_match_real_ovs_vswitchd() {
    if !have_appctl() {
        return;
    }
    let (_s, sock) = server("errors");
    let _cleanup = Cleanup(sock.parent().unwrap().to_path_buf());
    let sb = OvsSandbox::start(0).expect("OVS sandbox");
    let real = sb.dir().join("ovs-vswitchd.ctl");
    let cases: &[&[&str]] = &[
        &["no-such-command"],
        &["no-such-command", "a", "b"],
        &["bond/hash"],
        &["exit", "a", "b"],
        &["version", "x"],
        &["list-commands", "x"],
    ];
    for args in cases {
        let (rc_real, out_real, err_real) = appctl(&real, args);
        let (rc, out, err) = appctl(&sock, args);
        let err_real = err_real.replace(&real.display().to_string(), "SOCK");
        let err = err.replace(&sock.display().to_string(), "SOCK");
        assert_eq!(
            (rc, out.as_str(), err.as_str()),
            (rc_real, out_real.as_str(), err_real.as_str()),
            "{args:?}"
        );
        assert_eq!(rc, 2, "{args:?}");
    }
    let real_version = appctl(&real, &["version"]).1;
    assert!(real_version.starts_with("ovs-vswitchd (Open vSwitch) 3.1.0"));
    // The test client reads the real server's replies too.
    assert_eq!(
        unixctl::call(&real, "version", &[]).unwrap(),
        Ok(real_version)
    );
    assert_eq!(
        unixctl::call(&real, "exit", &["a", "b"]).unwrap(),
        Err("\"exit\" command takes at most 1 arguments\n".into())
    );
}

fn raw_exchange(stream: &mut UnixStream, req: &[u8]) -> String {
    stream.write_all(req).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Read until EOF (the server closed the connection); bounded by a timeout.
fn closed_by_server(stream: &mut UnixStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn second_client_and_many_requests_per_connection() {
    if !have_appctl() {
        return;
    }
    let (_s, sock) = server("two");
    let _cleanup = Cleanup(sock.parent().unwrap().to_path_buf());
    let mut first = UnixStream::connect(&sock).unwrap();
    // The first client sits connected, mid-message, while ovs-appctl is served.
    first.write_all(b"{\"method\":\"test/join\",").unwrap();
    let (rc, out, _) = appctl(&sock, &["test/join", "second"]);
    assert_eq!((rc, out.as_str()), (0, "second\n"));
    first.write_all(b"\"params\":[\"a\"],\"id\":7}").unwrap();
    let mut got = String::new();
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 512];
    while !got.ends_with('}') {
        let n = first.read(&mut buf).unwrap();
        got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    assert_eq!(got, r#"{"id":7,"result":"a\n","error":null}"#);
    // Two requests in one write, answered in order.
    let mut both = String::new();
    first
        .write_all(
            br#"{"method":"version","params":[],"id":"x"} {"method":"nope","params":[],"id":[1]}"#,
        )
        .unwrap();
    while both.matches('}').count() < 2 {
        let n = first.read(&mut buf).unwrap();
        both.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    assert_eq!(
        both,
        format!(
            "{{\"id\":\"x\",\"result\":\"{}\\n\",\"error\":null}}{{\"id\":[1],\"error\":\"\\\"nope\\\" is not a valid command (use \\\"list-commands\\\" to see a list of valid commands)\\n\"}}",
            unixctl::VERSION
        )
    );
}

#[test]
fn malformed_input_closes_only_that_connection() {
    if !have_appctl() {
        return;
    }
    let (_s, sock) = server("junk");
    let _cleanup = Cleanup(sock.parent().unwrap().to_path_buf());
    // Non-string argument: an error reply (as OVS), the connection stays usable.
    let mut c = UnixStream::connect(&sock).unwrap();
    assert_eq!(
        raw_exchange(&mut c, br#"{"method":"test/join","params":[1],"id":2}"#),
        r#"{"id":2,"error":"\"test/join\" command has non-string argument\n"}"#
    );
    assert_eq!(
        raw_exchange(&mut c, br#"{"method":"echo","params":[],"id":3}"#),
        r#"{"id":3,"error":"\"echo\" is not a valid command (use \"list-commands\" to see a list of valid commands)\n"}"#
    );
    let junk: &[&[u8]] = &[
        b"garbage\n",
        b"\x00\x01\xff\xfe",
        b"[1,2,3]",
        b"\"str\"",
        br#"{"method":"version","params":"x","id":1}"#,
        br#"{"method":"version","id":1}"#,
        br#"{"method":"version","params":[],"id":null}"#,
        br#"{"method":"version","params":[]}"#,
        br#"{"method":5,"params":[],"id":1}"#,
        br#"{"method":"version","params":[],"id":1,"extra":0}"#,
        br#"{"result":"x","error":null,"id":1}"#,
        b"{\"method\":\"version\",\"params\":[\"\xff\xfe\"],\"id\":1}",
        b"{]",
    ];
    for j in junk {
        let mut c = UnixStream::connect(&sock).unwrap();
        c.write_all(j).unwrap();
        assert!(closed_by_server(&mut c), "{:?}", String::from_utf8_lossy(j));
    }
    // Deeply nested: bounded, closed, no stack overflow.
    let mut c = UnixStream::connect(&sock).unwrap();
    let deep = "[".repeat(100_000);
    let _ = c.write_all(deep.as_bytes());
    let _ = c.write_all(&"]".repeat(100_000).into_bytes());
    assert!(closed_by_server(&mut c));
    // Longer than the bound: the server stops reading and closes.
    let mut c = UnixStream::connect(&sock).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sent = c.write_all(br#"{"method":"version","params":[""#).is_ok();
    let chunk = vec![b'a'; 1 << 16];
    let mut total = 0;
    while sent && total <= unixctl::MAX_MESSAGE + (1 << 17) {
        sent = c.write_all(&chunk).is_ok();
        total += chunk.len();
    }
    assert!(
        !sent || closed_by_server(&mut c),
        "oversized message not refused"
    );
    // The server still serves others.
    let (rc, out, _) = appctl(&sock, &["test/join", "still", "here"]);
    assert_eq!((rc, out.as_str()), (0, "still+here\n"));
}

#[test]
fn a_live_socket_is_not_stolen_and_a_stale_one_is_replaced() {
    let dir = tmpdir("stale");
    let _cleanup = Cleanup(dir.clone());
    let sock = dir.join("x.ctl");
    let s = Server::bind(&sock).unwrap();
    let e = Server::bind(&sock).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    // A stale socket file left behind by a dead process.
    drop(s);
    let stale = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    drop(stale);
    assert!(sock.exists());
    // Another test of this process spawning a program holds a copy of every descriptor
    // between fork and exec, so for a moment the dropped listener may still accept
    // connections (and look live): retry a few times.
    let mut tries = 0;
    let s = loop {
        match Server::bind(&sock) {
            Ok(s) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("binding over a stale socket: {e:?}"),
        }
    };
    assert_eq!(
        unixctl::call(&sock, "version", &[]).unwrap(),
        Ok(format!("{}\n", unixctl::VERSION))
    );
    s.shutdown();
    s.shutdown();
}

#[test]
fn shutdown_is_prompt_with_idle_clients_and_many_clients_are_served() {
    let dir = tmpdir("shutdown");
    let _cleanup = Cleanup(dir.clone());
    let sock = dir.join("s.ctl");
    let s = std::sync::Arc::new(Server::bind(&sock).unwrap());
    s.register("echo-args", "[arg...]", 0, usize::MAX, |a| Ok(a.join(" ")));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let a = format!("{t}-{i}");
                    assert_eq!(
                        unixctl::call(&sock, "echo-args", &[&a, "x"]).unwrap(),
                        Ok(format!("{a} x\n"))
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Idle clients, one of them mid-message, do not hold shutdown up.
    let idle = UnixStream::connect(&sock).unwrap();
    let mut partial = UnixStream::connect(&sock).unwrap();
    partial.write_all(b"{\"method\":").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t0 = std::time::Instant::now();
    s.shutdown();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(!sock.exists());
    assert!(closed_by_server(&mut partial));
    drop(idle);
}

/// `coverage/show` lines as real `ovs-vswitchd` prints them: each event line re-made from its
/// parsed name, rates and total by our formatter is the same line, byte for byte.
#[test]
fn coverage_lines_have_ovs_layout() {
    if !have_appctl() {
        return;
    }
    let ovs = OvsSandbox::start(1).expect("start OVS sandbox");
    // Events appear once OVS's first 5 s sample has run.
    let t0 = std::time::Instant::now();
    let theirs = loop {
        let t = ovs.appctl(&["coverage/show"]).expect("coverage/show");
        if t.lines().count() > 5 || t0.elapsed() > Duration::from_secs(12) {
            break t;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let mut lines = theirs.lines();
    let head = lines.next().unwrap_or_default();
    let ours = vswitchd::coverage::Coverage::default().show();
    let our_head = ours.lines().next().unwrap_or_default();
    let cut = |l: &str| l.split("hash=").next().unwrap_or_default().to_owned();
    assert_eq!(cut(our_head), cut(head), "OVS:\n{theirs}");
    let mut events = 0;
    for l in lines {
        if let Some(n) = l.strip_suffix(" events never hit") {
            assert!(n.parse::<u32>().is_ok(), "{l}");
            continue;
        }
        let w: Vec<&str> = l.split_whitespace().collect();
        let rate = |i: usize| -> f64 { w[i].trim_end_matches("/sec").parse().unwrap() };
        let total: u64 = w[w.len() - 1].parse().unwrap();
        let remade = vswitchd::coverage::line(w[0], [rate(1), rate(2), rate(3)], total);
        assert_eq!(remade, l, "OVS:\n{theirs}");
        events += 1;
    }
    assert!(events > 3, "too few events to compare:\n{theirs}");
    let never = ours.lines().last().unwrap_or_default();
    assert_eq!(
        never,
        format!("{} events never hit", vswitchd::coverage::EVENTS.len())
    );
}
