//! AF_XDP ports on veth pairs into network namespaces (root only; others say SKIP).
//!
//! The hosts are namespaces `ns1`/`ns2` (testutil::netns); the test opens the outside ends of
//! their veth pairs as [`AfXdpPort`]s and moves frames between them in a loop (a two-port
//! "wire": rx_burst from one port, tx_burst to the other), then pings, sends UDP bursts and
//! checks counters, errors and that no XDP program is left behind.

use netdev::{AfXdpOptions, AfXdpPort, Batch, PacketPool, Port, PortError, XdpMode};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use testutil::netns::{Netns, Veth, ip, netns_missing_reason};

/// Why these tests cannot run here, if they cannot.
fn missing() -> Option<String> {
    netns_missing_reason().or_else(netdev::afxdp_missing_reason)
}

macro_rules! require_root {
    () => {
        if let Some(r) = missing() {
            testutil::skip(&r);
            return;
        }
    };
}

/// Whether `ip link show IF` shows an XDP program (`xdp`, `xdpgeneric`, `xdpdrv` …).
fn xdp_attached(ifname: &str) -> bool {
    let out = ip(&["-o", "link", "show", ifname]).expect("ip link show");
    out.split_whitespace()
        .any(|w| w.starts_with("xdp") || w.starts_with("prog/xdp"))
}

/// Whether `cond` holds within 2 s. For what the kernel undoes when a descriptor's last copy
/// closes: a process that died releases its descriptors from a work queue, and a child of
/// another test thread between fork and exec holds copies of ours for a moment.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while !cond() {
        if t0.elapsed() > Duration::from_secs(2) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The interface's promiscuity count (`ip -d link show`).
fn promiscuity(ifname: &str) -> u32 {
    let out = ip(&["-d", "-o", "link", "show", ifname]).expect("ip link show");
    out.split_whitespace()
        .skip_while(|w| *w != "promiscuity")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("promiscuity in ip -d link show")
}

/// A namespace with one veth pair, tx offloads off on the inside end.
fn host(addr: &str) -> (Netns, Veth) {
    let ns = Netns::new("x").expect("netns");
    let v = Veth::new(&ns, &[addr], None).expect("veth");
    ns.exec(&["ethtool", "-K", &v.inside, "tx", "off"])
        .expect("ethtool tx off");
    (ns, v)
}

fn open(ifname: &str) -> AfXdpPort {
    AfXdpPort::open(ifname, &AfXdpOptions::default())
        .unwrap_or_else(|e| panic!("open {ifname}: {e}"))
}

/// Is this an IPv4 UDP frame to port 9999?
fn is_test_udp(f: &[u8]) -> bool {
    f.len() >= 42
        && f[12..14] == [0x08, 0x00]
        && f[23] == 17
        && (f[14] & 0x0f) == 5
        && f[36..38] == 9999u16.to_be_bytes()
}

/// Moves frames between two ports until stopped; counts test UDP frames a→b.
struct Wire {
    stop: Arc<AtomicBool>,
    udp_ab: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<(AfXdpPort, AfXdpPort, PacketPool)>,
}

impl Wire {
    fn start(mut a: AfXdpPort, mut b: AfXdpPort) -> Wire {
        let stop = Arc::new(AtomicBool::new(false));
        let udp_ab = Arc::new(AtomicU64::new(0));
        let (s, u) = (stop.clone(), udp_ab.clone());
        let handle = std::thread::spawn(move || {
            let mut pool = PacketPool::new(1024);
            let mut batch = Batch::new();
            let mut idle = 0u32;
            while !s.load(Ordering::Relaxed) {
                let n1 = a.rx_burst(&mut pool, &mut batch);
                let udp = batch.iter().filter(|p| is_test_udp(p.data())).count();
                u.fetch_add(udp as u64, Ordering::Relaxed);
                b.tx_burst(&mut batch, &mut pool);
                let n2 = b.rx_burst(&mut pool, &mut batch);
                a.tx_burst(&mut batch, &mut pool);
                if n1 + n2 == 0 {
                    idle += 1;
                    if idle > 100 {
                        std::thread::sleep(Duration::from_micros(20));
                    } else {
                        std::thread::yield_now();
                    }
                } else {
                    idle = 0;
                }
            }
            a.flush().unwrap();
            b.flush().unwrap();
            (a, b, pool)
        });
        Wire {
            stop,
            udp_ab,
            handle,
        }
    }

    fn stop(self) -> (AfXdpPort, AfXdpPort, PacketPool, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let (a, b, pool) = self.handle.join().expect("wire thread");
        (a, b, pool, self.udp_ab.load(Ordering::Relaxed))
    }
}

const UDP_RECEIVER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((sys.argv[1], 9999))
print("ready", flush=True)
s.settimeout(2.0)
n = 0
try:
    while True:
        s.recv(4096)
        n += 1
except socket.timeout:
    pass
print(n, flush=True)
"#;

const UDP_SENDER: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n = int(sys.argv[2])
for i in range(n):
    s.sendto(b"flowswitch afxdp %06d" % i + b"x" * 100, (sys.argv[1], 9999))
    if i % 16 == 15:
        time.sleep(0.002)
"#;

#[test]
fn two_port_wire_ping_and_udp_burst() {
    require_root!();
    let (ns1, v1) = host("10.201.0.1/24");
    let (ns2, v2) = host("10.201.0.2/24");
    let (p1_promisc, p2_promisc) = (promiscuity(&v1.outside), promiscuity(&v2.outside));
    let a = open(&v1.outside);
    let b = open(&v2.outside);
    for p in [&a, &b] {
        let d = p.describe();
        assert!(d.contains("1 queue(s)") && d.contains("copy mode"), "{d}");
        assert!(d.contains("need-wakeup on"), "{d}");
        assert_eq!(p.queues(), 1);
        assert!(!p.is_zero_copy());
        eprintln!("{d}");
    }
    assert!(xdp_attached(&v1.outside) && xdp_attached(&v2.outside));
    assert_eq!(promiscuity(&v1.outside), p1_promisc + 1);

    let wire = Wire::start(a, b);
    let ping = ns1
        .command("ping")
        .args(["-c", "3", "-i", "0.2", "-W", "2", "10.201.0.2"])
        .output()
        .expect("ping");
    let ping_ok = ping.status.success();

    // A paced burst of UDP datagrams ns1 → ns2, counted at the wire and by the receiver.
    const N: u64 = 600;
    let mut rx = ns2
        .command("python3")
        .args(["-c", UDP_RECEIVER, "10.201.0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("receiver");
    let mut out = BufReader::new(rx.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready line");
    assert_eq!(line.trim(), "ready");
    let sent = ns1
        .command("python3")
        .args(["-c", UDP_SENDER, "10.201.0.2", &N.to_string()])
        .status()
        .expect("sender");
    line.clear();
    out.read_line(&mut line).expect("count line");
    let _ = rx.wait();
    let received: u64 = line.trim().parse().unwrap_or(0);

    let (a, b, pool, udp_ab) = wire.stop();
    assert!(
        ping_ok,
        "ping ns1 → ns2 through the AF_XDP wire failed:\n{}\n{}",
        String::from_utf8_lossy(&ping.stdout),
        String::from_utf8_lossy(&ping.stderr)
    );
    assert!(sent.success());
    let (sa, sb) = (a.stats(), b.stats());
    eprintln!(
        "a: {sa:?}\n   {:?}\nb: {sb:?}\n   {:?}",
        a.xdp_stats(),
        b.xdp_stats()
    );
    assert_eq!(udp_ab, N, "UDP frames seen by the wire");
    assert_eq!(received, N, "UDP datagrams received in ns2");
    for s in [sa, sb] {
        assert!(s.is_consistent(), "{s:?}");
        assert_eq!(
            (s.rx_dropped, s.tx_dropped, s.rx_errors),
            (0, 0, 0),
            "{s:?}"
        );
    }
    // Everything a received went out of b, and back.
    assert_eq!(sa.rx_packets, sb.tx_packets + sb.tx_dropped);
    assert_eq!(sb.rx_packets, sa.tx_packets + sa.tx_dropped);
    assert_eq!(sa.rx_bytes, sb.tx_bytes);
    assert!(sa.rx_packets >= N + 3, "{sa:?}");
    assert!(sb.rx_packets >= 3, "{sb:?}");
    assert_eq!(pool.available(), pool.capacity(), "no packet leaked");

    drop((a, b));
    for v in [&v1, &v2] {
        assert!(
            !xdp_attached(&v.outside),
            "XDP program left on {}",
            v.outside
        );
    }
    assert!(eventually(|| promiscuity(&v1.outside) == p1_promisc));
    assert!(eventually(|| promiscuity(&v2.outside) == p2_promisc));
}

#[test]
fn second_open_is_refused_and_first_port_keeps_working() {
    require_root!();
    let (ns, v) = host("10.202.0.1/24");
    let mut a = open(&v.outside);
    let err = AfXdpPort::open(&v.outside, &AfXdpOptions::default()).unwrap_err();
    let text = err.to_string();
    eprintln!("{text}");
    assert!(
        text.contains(&v.outside) && text.contains("already has an XDP program"),
        "{text}"
    );
    assert!(matches!(err, PortError::Io { .. }), "{err:?}");
    assert!(
        xdp_attached(&v.outside),
        "the refusal detached the first port"
    );
    // The first port still receives: ARP requests for an absent neighbour.
    let mut pinger = ns
        .command("ping")
        .args(["-c", "2", "-i", "0.2", "-W", "1", "10.202.0.9"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ping");
    let mut pool = PacketPool::new(64);
    let mut batch = Batch::new();
    let t0 = Instant::now();
    let mut got = 0;
    while got == 0 && t0.elapsed() < Duration::from_secs(3) {
        got += a.rx_burst(&mut pool, &mut batch);
        batch.free_all(&mut pool);
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = pinger.wait();
    assert!(got > 0, "no frame received after the refused second open");
    drop(a);
    assert!(!xdp_attached(&v.outside));
}

#[test]
fn zero_copy_on_veth_is_refused_and_auto_falls_back() {
    require_root!();
    let (_ns, v) = host("10.203.0.1/24");
    let zc = AfXdpOptions {
        mode: XdpMode::ZeroCopy,
        ..AfXdpOptions::default()
    };
    let text = AfXdpPort::open(&v.outside, &zc).unwrap_err().to_string();
    eprintln!("{text}");
    assert!(text.contains("zero-copy"), "{text}");
    assert!(!xdp_attached(&v.outside), "failed open left a program");
    let auto = AfXdpOptions {
        mode: XdpMode::Auto,
        ..AfXdpOptions::default()
    };
    let p = AfXdpPort::open(&v.outside, &auto).expect("auto mode");
    assert!(!p.is_zero_copy());
    eprintln!("{}", p.describe());
    assert!(
        p.describe().contains("copy mode (zero-copy refused"),
        "{}",
        p.describe()
    );
    drop(p);
    assert!(!xdp_attached(&v.outside));
}

#[test]
fn interface_checks_mtu_and_queues() {
    require_root!();
    let ns = Netns::new("m").expect("netns");
    let big = Veth::new(&ns, &["10.204.0.1/24"], Some(3000)).expect("veth");
    let err = AfXdpPort::open(&big.outside, &AfXdpOptions::default()).unwrap_err();
    assert!(matches!(err, PortError::Config(_)), "{err:?}");
    let text = err.to_string();
    eprintln!("{text}");
    assert!(text.contains("MTU 3000") && text.contains("1902"), "{text}");
    assert!(!xdp_attached(&big.outside));
    // 2048-byte frames hold MTU 1774 at most: 1500 fits.
    let v = Veth::new(&ns, &["10.204.1.1/24"], None).expect("veth");
    let small = AfXdpOptions {
        frame_size: 2048,
        ..AfXdpOptions::default()
    };
    drop(AfXdpPort::open(&v.outside, &small).expect("2048-byte frames"));
    // A veth has one rx queue by default.
    let two = AfXdpOptions {
        queues: 2,
        ..AfXdpOptions::default()
    };
    let text = AfXdpPort::open(&v.outside, &two).unwrap_err().to_string();
    assert!(text.contains("1 rx queue(s), 2 asked"), "{text}");
    assert!(!xdp_attached(&v.outside));
}

/// A veth pair with `q` queues on each end, inside end in `ns`; deleted on drop.
struct MultiQueueVeth {
    outside: String,
}

impl MultiQueueVeth {
    fn new(ns: &Netns, q: u32, addr: &str) -> MultiQueueVeth {
        let outside = testutil::netns::unique_name("q");
        let inside = testutil::netns::unique_name("j");
        let q = q.to_string();
        ip(&[
            "link",
            "add",
            &outside,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &inside,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])
        .expect("ip link add");
        let v = MultiQueueVeth { outside };
        ip(&["link", "set", &inside, "netns", ns.name()]).expect("netns");
        ns.exec(&["ip", "addr", "add", addr, "dev", &inside])
            .expect("addr");
        ns.exec(&["ip", "link", "set", &inside, "up"]).expect("up");
        ns.exec(&["ethtool", "-K", &inside, "tx", "off"])
            .expect("ethtool");
        ip(&["link", "set", &v.outside, "up"]).expect("up");
        v
    }
}

impl Drop for MultiQueueVeth {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.outside]);
    }
}

#[test]
fn two_queues_on_a_two_queue_veth() {
    require_root!();
    let ns1 = Netns::new("q").expect("netns");
    let v1 = MultiQueueVeth::new(&ns1, 2, "10.205.0.1/24");
    let (ns2, v2) = host("10.205.0.2/24");
    let _ = ns2;
    let opts = AfXdpOptions {
        queues: 2,
        ..AfXdpOptions::default()
    };
    let a = AfXdpPort::open(&v1.outside, &opts).expect("two queues");
    assert_eq!(a.queues(), 2);
    assert!(a.describe().contains("2 queue(s)"), "{}", a.describe());
    // The other port kicks on every burst instead of waiting for need-wakeup flags.
    let no_wakeup = AfXdpOptions {
        need_wakeup: false,
        ..AfXdpOptions::default()
    };
    let b = AfXdpPort::open(&v2.outside, &no_wakeup).expect("need-wakeup off");
    assert!(b.describe().contains("need-wakeup off"), "{}", b.describe());
    let wire = Wire::start(a, b);
    let ping = ns1
        .command("ping")
        .args(["-c", "3", "-i", "0.2", "-W", "2", "10.205.0.2"])
        .output()
        .expect("ping");
    let (a, b, _, _) = wire.stop();
    assert!(
        ping.status.success(),
        "{}",
        String::from_utf8_lossy(&ping.stdout)
    );
    assert!(a.stats().is_consistent() && b.stats().is_consistent());
    drop((a, b));
    assert!(!xdp_attached(&v1.outside));
}

#[test]
fn full_tx_ring_is_a_counted_drop_and_frames_are_reused() {
    require_root!();
    let (_ns, v) = host("10.206.0.1/24");
    let opts = AfXdpOptions {
        ring_size: 64,
        frame_count: 128,
        ..AfXdpOptions::default()
    };
    let mut p = AfXdpPort::open(&v.outside, &opts).expect("open");
    let mut pool = PacketPool::new(64);
    let mut batch = Batch::new();
    let mut burst = |p: &mut AfXdpPort, pool: &mut PacketPool| {
        for _ in 0..32 {
            let mut pk = pool.alloc().expect("packet");
            let mut f = vec![0xffu8; 60];
            f[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental ethertype
            pk.set_data(&f).unwrap();
            batch.push(pk).unwrap();
        }
        p.tx_burst(&mut batch, pool)
    };
    // Interface down: the kernel takes nothing from the tx ring, which fills up (64 entries,
    // 64 tx frames); every packet beyond is dropped and counted, and tx_burst returns at once.
    ip(&["link", "set", &v.outside, "down"]).expect("down");
    let t0 = Instant::now();
    let sent: usize = (0..10).map(|_| burst(&mut p, &mut pool)).sum();
    assert!(t0.elapsed() < Duration::from_secs(2), "tx blocked");
    let s = p.stats();
    assert_eq!(sent, 64, "{s:?} {:?}", p.xdp_stats());
    assert_eq!((s.tx_packets, s.tx_dropped, s.tx_errors), (64, 256, 256));
    let x = p.xdp_stats();
    assert_eq!(x.tx_ring_full + x.tx_no_frame, 256, "{x:?}");
    assert_eq!(pool.available(), pool.capacity());
    // Up again: the ring drains, completed frames come back and are sent again, many times
    // over the 64 tx frames.
    ip(&["link", "set", &v.outside, "up"]).expect("up");
    let t0 = Instant::now();
    while p.xdp_stats().tx_free_frames < 64 && t0.elapsed() < Duration::from_secs(5) {
        p.flush().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(p.xdp_stats().tx_free_frames, 64, "{:?}", p.xdp_stats());
    let before = p.stats().tx_packets;
    for _ in 0..20 {
        burst(&mut p, &mut pool);
        p.flush().unwrap();
    }
    let s = p.stats();
    assert!(s.is_consistent());
    assert!(
        s.tx_packets - before >= 20 * 32 - 64,
        "{s:?} {:?}",
        p.xdp_stats()
    );
    drop(p);
    assert!(!xdp_attached(&v.outside));
}

#[test]
fn interface_deleted_under_the_port() {
    require_root!();
    let (ns, v) = host("10.208.0.1/24");
    let mut p = open(&v.outside);
    let mut pool = PacketPool::new(64);
    let mut batch = Batch::new();
    ip(&["link", "del", &v.outside]).expect("link del");
    // No crash, no hang: rx finds nothing, tx is counted (sent into the dead ring or
    // dropped), flush and drop succeed.
    let t0 = Instant::now();
    for _ in 0..8 {
        assert_eq!(p.rx_burst(&mut pool, &mut batch), 0);
        for _ in 0..32 {
            let mut pk = pool.alloc().expect("packet");
            pk.set_data(&[0u8; 60]).unwrap();
            batch.push(pk).unwrap();
        }
        p.tx_burst(&mut batch, &mut pool);
        assert!(batch.is_empty());
        p.flush().unwrap();
    }
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "a dead interface blocked the port"
    );
    let s = p.stats();
    assert!(s.is_consistent());
    assert_eq!(s.tx_packets + s.tx_dropped, 8 * 32, "{s:?}");
    assert_eq!(pool.available(), pool.capacity());
    drop(p);
    drop(ns);
}

/// An interface made by `ip link add NAME type …` in the test's namespace, deleted on drop.
struct Link(String);

impl Drop for Link {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.0]);
    }
}

#[test]
fn generic_xdp_on_a_driver_without_native_xdp() {
    require_root!();
    // The bridge driver has no native XDP: the program goes on in generic (skb) mode.
    let d = Link(testutil::netns::unique_name("b"));
    ip(&["link", "add", &d.0, "type", "bridge"]).expect("bridge");
    ip(&["link", "set", &d.0, "up"]).expect("up");
    let mut p = open(&d.0);
    assert!(
        p.describe().contains("generic (skb) mode"),
        "{}",
        p.describe()
    );
    assert!(xdp_attached(&d.0));
    let mut pool = PacketPool::new(64);
    let mut batch = Batch::new();
    for _ in 0..4 {
        let mut pk = pool.alloc().expect("packet");
        pk.set_data(&[0xffu8; 60]).unwrap();
        batch.push(pk).unwrap();
    }
    assert_eq!(p.tx_burst(&mut batch, &mut pool), 4);
    p.flush().unwrap();
    assert!(p.stats().is_consistent());
    drop(p);
    assert!(!xdp_attached(&d.0));
}

/// Run by `a_killed_process_leaves_nothing_behind` in a child process (does nothing when run
/// directly): opens a port on the interface the environment names and waits to be killed.
#[test]
fn child_holds_a_port_until_killed() {
    let Ok(ifname) = std::env::var("AFXDP_TEST_CHILD_IF") else {
        return;
    };
    let p = open(&ifname);
    println!("AFXDP-OPEN {}", p.ifindex());
    std::thread::sleep(Duration::from_secs(60));
    drop(p);
}

#[test]
fn a_killed_process_leaves_nothing_behind() {
    require_root!();
    let (_ns, v) = host("10.207.0.1/24");
    let promisc = promiscuity(&v.outside);
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_holds_a_port_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("AFXDP_TEST_CHILD_IF", &v.outside)
        .stdout(Stdio::piped())
        .spawn()
        .expect("child");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let opened = out
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("AFXDP-OPEN"));
    assert!(opened, "the child did not open the port");
    assert!(xdp_attached(&v.outside));
    assert_eq!(promiscuity(&v.outside), promisc + 1);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert!(
        eventually(|| !xdp_attached(&v.outside)),
        "XDP program left behind by a killed process"
    );
    assert!(eventually(|| promiscuity(&v.outside) == promisc));
}

#[test]
fn missing_interface_is_a_clear_error() {
    // Needs no privilege: the interface is looked up before anything is created.
    let err = AfXdpPort::open("fsnosuch0", &AfXdpOptions::default()).unwrap_err();
    let text = err.to_string();
    assert_eq!(text, "fsnosuch0: no such network interface");
    match err {
        PortError::Io { source, .. } => assert_eq!(source.kind(), std::io::ErrorKind::NotFound),
        e => panic!("{e:?}"),
    }
    let err = AfXdpPort::open("bad/name", &AfXdpOptions::default()).unwrap_err();
    assert!(matches!(err, PortError::Config(_)), "{err:?}");
}

#[test]
fn bad_options_are_config_errors() {
    let d = AfXdpOptions::default();
    let bad = [
        AfXdpOptions {
            queues: 0,
            ..d.clone()
        },
        AfXdpOptions {
            queues: 65,
            ..d.clone()
        },
        AfXdpOptions {
            ring_size: 100,
            ..d.clone()
        },
        AfXdpOptions {
            ring_size: 32,
            ..d.clone()
        },
        AfXdpOptions {
            ring_size: 1 << 20,
            ..d.clone()
        },
        AfXdpOptions {
            frame_size: 1000,
            ..d.clone()
        },
        AfXdpOptions {
            frame_size: 8192,
            ..d.clone()
        },
        AfXdpOptions {
            frame_count: 0,
            ..d.clone()
        },
        AfXdpOptions {
            frame_count: u32::MAX,
            ..d.clone()
        },
        AfXdpOptions {
            queues: 64,
            frame_count: 65536,
            ..d.clone()
        },
    ];
    for o in bad {
        // Refused before the interface is even looked up (no runaway allocation either).
        match AfXdpPort::open("lo", &o) {
            Err(PortError::Config(m)) => assert!(m.starts_with("AF_XDP: "), "{m}"),
            other => panic!("{o:?}: {other:?}"),
        }
    }
    assert!(matches!(
        "turbo".parse::<XdpMode>(),
        Err(PortError::Config(_))
    ));
    // The loopback's 65536-byte MTU does not fit the buffers: a Config error, nothing attached.
    match AfXdpPort::open("lo", &d) {
        Err(PortError::Config(m)) => assert!(m.contains("MTU 65536"), "{m}"),
        other => panic!("{other:?}"),
    }
}
