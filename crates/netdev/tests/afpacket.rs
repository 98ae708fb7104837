//! AF_PACKET and tap ports on real interfaces (root, network namespaces; skipped with the
//! reason elsewhere): two namespaces joined through two AF_PACKET ports by a test loop that
//! moves every frame from one port to the other (a two-port wire), so `ping` between the
//! namespaces works only if both ports receive and send whole, correct frames.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use netdev::afpacket::afpacket_missing_reason;
use netdev::{AfPacketOptions, AfPacketPort, Batch, PacketPool, Port, PortError, TapPort};
use testutil::netns::{Netns, Veth, netns_missing_reason};

fn can_run() -> bool {
    can_run_with(&[])
}

/// Skips (and returns false) without namespaces, AF_PACKET, `ping` or one of `tools`.
fn can_run_with(tools: &[&str]) -> bool {
    let why = netns_missing_reason()
        .or_else(afpacket_missing_reason)
        .or_else(|| {
            ["ping"]
                .iter()
                .chain(tools)
                .find_map(|t| testutil::netns::tool_missing_reason(t))
        });
    match why {
        Some(r) => {
            testutil::skip(&r);
            false
        }
        None => true,
    }
}

/// Two namespaces, each with a veth whose outside end the test opens.
struct Pair {
    ns: [Netns; 2],
    veth: [Veth; 2],
}

fn pair(mtu: Option<u32>) -> Pair {
    let ns1 = Netns::new("a").unwrap();
    let ns2 = Netns::new("b").unwrap();
    let v1 = Veth::new(&ns1, &["10.77.0.1/24", "fd77::1/64"], mtu).unwrap();
    let v2 = Veth::new(&ns2, &["10.77.0.2/24", "fd77::2/64"], mtu).unwrap();
    for (ns, v) in [(&ns1, &v1), (&ns2, &v2)] {
        // As OVS's system tests: no checksum offload on the namespace end.
        ns.exec(&["ethtool", "-K", &v.inside, "tx", "off"]).unwrap();
    }
    Pair {
        ns: [ns1, ns2],
        veth: [v1, v2],
    }
}

/// Moves frames both ways between `a` and `b` until `stop`; returns the ports.
fn wire(
    mut a: AfPacketPort,
    mut b: AfPacketPort,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<(AfPacketPort, AfPacketPort)> {
    thread::spawn(move || {
        let mut pool = PacketPool::new(1024);
        let mut batch = Batch::new();
        while !stop.load(Ordering::Relaxed) {
            let mut idle = true;
            if a.rx_burst(&mut pool, &mut batch) > 0 {
                b.tx_burst(&mut batch, &mut pool);
                idle = false;
            }
            if b.rx_burst(&mut pool, &mut batch) > 0 {
                a.tx_burst(&mut batch, &mut pool);
                idle = false;
            }
            if idle {
                thread::sleep(Duration::from_micros(200));
            }
        }
        assert_eq!(pool.available(), pool.capacity(), "no packet leaked");
        (a, b)
    })
}

#[test]
fn ping_v4_and_v6_across_two_afpacket_ports() {
    if !can_run() {
        return;
    }
    let p = pair(None);
    let opts = AfPacketOptions::default();
    let a = AfPacketPort::open(&p.veth[0].outside, &opts).unwrap();
    let b = AfPacketPort::open(&p.veth[1].outside, &opts).unwrap();
    assert!(a.info().contains("TPACKET_V3"), "{}", a.info());
    let stop = Arc::new(AtomicBool::new(false));
    let h = wire(a, b, stop.clone());
    let v4 = p.ns[0].exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.2"]);
    let v6 = p.ns[1].exec(&["ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd77::1"]);
    // A full-size frame, both ways (1472 bytes of ICMP data = a 1514-byte frame).
    let big = p.ns[0].exec(&[
        "ping",
        "-c",
        "2",
        "-i",
        "0.2",
        "-W",
        "2",
        "-M",
        "do",
        "-s",
        "1472",
        "10.77.0.2",
    ]);
    stop.store(true, Ordering::Relaxed);
    let (a, b) = h.join().unwrap();
    v4.unwrap();
    v6.unwrap();
    big.unwrap();
    for port in [&a, &b] {
        let s = port.stats();
        assert!(s.is_consistent(), "{s:?}");
        assert!(s.rx_packets >= 8 && s.tx_packets >= 8, "{s:?}");
        assert_eq!(s.tx_dropped, 0, "{s:?}");
    }
}

#[test]
fn vlan_tags_survive_receive_offload() {
    if !can_run_with(&["python3"]) {
        return;
    }
    let p = pair(None);
    let mut a = AfPacketPort::open(&p.veth[0].outside, &AfPacketOptions::default()).unwrap();
    // ns1 sends 802.1Q frames (VID 10, PCP 5; and an 802.1ad outer tag) from a raw socket.
    // The receiving stack strips the first tag into metadata before any packet socket sees
    // the frame; the port must put it back.
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
         s.bind(('{}',0))\n\
         d=bytes.fromhex('020000000002')\n\
         src=bytes.fromhex('020000000001')\n\
         s.send(d+src+bytes.fromhex('8100a00a0800')+bytes(46))\n\
         s.send(d+src+bytes.fromhex('88a80064810000c80800')+bytes(46))\n",
        p.veth[0].inside
    );
    p.ns[0].exec(&["python3", "-c", &script]).unwrap();
    let mut pool = PacketPool::new(64);
    let mut batch = Batch::new();
    let mut frames = Vec::new();
    for _ in 0..100 {
        a.rx_burst(&mut pool, &mut batch);
        for pk in batch.iter() {
            frames.push(pk.data().to_vec());
        }
        batch.free_all(&mut pool);
        if frames.iter().filter(|f| f.len() >= 60).count() >= 2 {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    // (IPv6 router solicitations and such may come too: look for ours.)
    let ours: Vec<_> = frames
        .iter()
        .filter(|f| f.get(6..12) == Some(&[2, 0, 0, 0, 0, 1][..]))
        .collect();
    assert_eq!(ours.len(), 2, "{frames:02x?}");
    assert_eq!(
        &ours[0][12..18],
        &[0x81, 0, 0xa0, 0x0a, 0x08, 0],
        "{:02x?}",
        ours[0]
    );
    assert_eq!(ours[0].len(), 64);
    assert_eq!(
        &ours[1][12..22],
        &[0x88, 0xa8, 0, 0x64, 0x81, 0, 0, 0xc8, 0x08, 0],
        "{:02x?}",
        ours[1]
    );
    assert!(a.extra_stats().vlan_restored >= 2, "{:?}", a.extra_stats());
}

#[test]
fn checksums_left_to_offload_are_completed() {
    if !can_run() {
        return;
    }
    let p = pair(None);
    // Turn tx checksum offload back on for ns1's end: its UDP frames reach the port with
    // partial checksums, which the port must complete for ns2 to accept them.
    p.ns[0]
        .exec(&["ethtool", "-K", &p.veth[0].inside, "tx", "on"])
        .unwrap();
    let opts = AfPacketOptions::default();
    let a = AfPacketPort::open(&p.veth[0].outside, &opts).unwrap();
    let b = AfPacketPort::open(&p.veth[1].outside, &opts).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let h = wire(a, b, stop.clone());
    // A TCP exchange (which would fail on bad checksums): nc listener in ns2, client in ns1.
    let mut server = p.ns[1]
        .command("sh")
        .args(["-c", "timeout 10 nc -l -p 5555 > /dev/null; echo done"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    let sent = p.ns[0].exec(&[
        "sh",
        "-c",
        "head -c 200000 /dev/urandom | timeout 10 nc -N -w 3 10.77.0.2 5555 && echo sent",
    ]);
    let _ = server.wait();
    stop.store(true, Ordering::Relaxed);
    let (a, _b) = h.join().unwrap();
    assert!(sent.unwrap().contains("sent"));
    assert!(a.extra_stats().csum_completed > 0, "{:?}", a.extra_stats());
}

#[test]
fn bad_interfaces_are_clear_errors() {
    if !can_run() {
        return;
    }
    let e = AfPacketPort::open("fsnosuchif1", &AfPacketOptions::default()).unwrap_err();
    assert!(matches!(e, PortError::Interface { .. }), "{e}");
    let ns = Netns::new("j").unwrap();
    let v = Veth::new(&ns, &[], Some(4000)).unwrap();
    let e = AfPacketPort::open(&v.outside, &AfPacketOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("MTU 4000"), "{e}");
}

#[test]
fn tap_port_carries_the_hosts_frames() {
    if !can_run() {
        return;
    }
    let ns = Netns::new("t").unwrap();
    // The tap lives in the namespace: create it from a thread that entered it.
    let name = "fstap0".to_owned();
    let nsname = ns.name().to_owned();
    let port = thread::spawn(move || {
        let f = std::fs::File::open(format!("/var/run/netns/{nsname}")).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: setns on this thread only, with a namespace file we hold open.
        let r = unsafe { libc_setns(f.as_raw_fd()) };
        assert_eq!(r, 0);
        TapPort::open(&name).unwrap()
    })
    .join()
    .unwrap();
    ns.exec(&["ip", "addr", "add", "10.79.0.1/24", "dev", "fstap0"])
        .unwrap();
    let mut port = port;
    // The host pings a neighbour on the tap's subnet: ARP requests come out of the tap.
    let _ = ns.exec(&["ping", "-c", "1", "-W", "1", "10.79.0.9"]);
    let mut pool = PacketPool::new(64);
    let mut batch = Batch::new();
    let mut got = 0;
    for _ in 0..50 {
        got += port.rx_burst(&mut pool, &mut batch);
        if got > 0 {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert!(got > 0, "no frame from the host");
    let arp = batch
        .iter()
        .any(|p| p.data().get(12..14) == Some(&[8, 6][..]));
    assert!(arp, "an ARP request from the host");
    batch.free_all(&mut pool);
    drop(port);
    assert!(
        ns.exec(&["ip", "link", "show", "fstap0"]).is_err(),
        "tap removed on drop"
    );
}

unsafe extern "C" {
    #[link_name = "setns"]
    fn libc_setns_raw(fd: i32, nstype: i32) -> i32;
}

/// setns(fd, CLONE_NEWNET) for the calling thread.
unsafe fn libc_setns(fd: i32) -> i32 {
    // SAFETY: forwarded; the caller guarantees `fd` is a network namespace file.
    unsafe { libc_setns_raw(fd, 0x4000_0000) }
}

#[test]
fn a_full_ring_is_counted_as_overrun() {
    if !can_run_with(&["python3"]) {
        return;
    }
    let p = pair(None);
    // One 4 KiB block: two full-size frames fill it; the rest of the burst is dropped by the
    // kernel while nobody reads.
    let opts = AfPacketOptions {
        block_size: 4096,
        blocks: 1,
        ..AfPacketOptions::default()
    };
    let mut a = AfPacketPort::open(&p.veth[0].outside, &opts).unwrap();
    let script = format!(
        "import socket\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('{}',0))\n\
         [s.send(bytes.fromhex('020000000002020000000001')+b'\\x08\\x00'+bytes(1400)) for i in range(200)]\n",
        p.veth[0].inside
    );
    p.ns[0].exec(&["python3", "-c", &script]).unwrap();
    let mut pool = PacketPool::new(64);
    let mut batch = Batch::new();
    for _ in 0..2048 {
        a.rx_burst(&mut pool, &mut batch);
        batch.free_all(&mut pool);
    }
    let s = a.stats();
    assert!(s.rx_overrun > 0, "{s:?}");
    assert!(s.is_consistent(), "{s:?}");
    assert!(s.rx_packets + s.rx_overrun <= 200 + 10, "{s:?}");
}
