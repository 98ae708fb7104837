//! `flowswitch switch` (and the daemon's `type=system` ports) forwarding between network
//! namespaces joined by veth pairs, each scenario with AF_PACKET and with AF_XDP ports
//! (issue 16). Root only; elsewhere each test says `SKIP:` with the reason.
//!
//! Hosts are namespaces with one veth each (tx checksum offload off on their end, as OVS's
//! system tests do); the switch opens the other ends. Nothing is faked: `ping`, `nc` and the
//! kernel's stacks talk through the switch.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testutil::netns::{Netns, Veth, netns_missing_reason, tool_missing_reason};

const BIN: &str = env!("CARGO_BIN_EXE_flowswitch");

/// Why these tests cannot run here (`tools` must be installed too).
fn cannot_run(tools: &[&str]) -> Option<String> {
    netns_missing_reason()
        .or_else(netdev::afpacket::afpacket_missing_reason)
        .or_else(|| {
            tools.iter().find_map(|t| match *t {
                "ovs" => testutil::ovs::ovs_missing_reason(),
                t => tool_missing_reason(t),
            })
        })
}

/// A test per port kind for scenario `$scenario(kind)`; the AF_XDP one says `SKIP:` where
/// AF_XDP sockets cannot be made.
macro_rules! per_kind {
    ($scenario:ident, $afpacket:ident, $afxdp:ident) => {
        #[test]
        fn $afpacket() {
            $scenario("afpacket");
        }

        #[test]
        fn $afxdp() {
            if let Some(r) = netdev::afxdp_missing_reason() {
                testutil::skip(&r);
                return;
            }
            $scenario("afxdp");
        }
    };
}

/// Skips (and returns false) when the scenario cannot run here: no namespaces, a missing
/// tool, or — `"ovs"` among `tools` — no Open vSwitch tools.
fn skip_unless(tools: &[&str]) -> bool {
    match cannot_run(tools) {
        Some(r) => {
            testutil::skip(&r);
            false
        }
        None => true,
    }
}

/// A host: a namespace with one veth to the switch, address 10.80.0.N/24 and fd80::N/64.
struct Host {
    ns: Netns,
    veth: Veth,
    ip: String,
    ip6: String,
}

fn host(n: u8) -> Host {
    let ns = Netns::new(&format!("h{n}")).expect("namespace");
    let ip = format!("10.80.0.{n}");
    let ip6 = format!("fd80::{n}");
    let veth = Veth::new(&ns, &[&format!("{ip}/24"), &format!("{ip6}/64")], None).expect("veth");
    ns.exec(&["ethtool", "-K", &veth.inside, "tx", "off"])
        .expect("ethtool");
    Host { ns, veth, ip, ip6 }
}

impl Host {
    fn ping(&self, to: &str, extra: &[&str]) -> Result<String, String> {
        let mut argv = vec!["ping", "-c", "2", "-i", "0.2", "-W", "2"];
        argv.extend_from_slice(extra);
        argv.push(to);
        self.ns.exec(&argv)
    }
}

/// A running `flowswitch switch` (or daemon), stopped with SIGTERM on drop.
struct Running {
    child: Option<Child>,
    rundir: PathBuf,
    log: PathBuf,
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fs-switch-{tag}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ rand_bits()
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn rand_bits() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    u128::from(h.finish())
}

impl Running {
    /// Starts `flowswitch ARGS` with a private run directory and waits until its control
    /// socket is up and its ports attached.
    fn start(args: &[&str], env_rundir: bool) -> Result<Running, String> {
        let rundir = temp_dir("run");
        let log = rundir.join("stderr.log");
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        if env_rundir {
            cmd.env("OVS_RUNDIR", &rundir).env("OVS_LOGDIR", &rundir);
        } else {
            cmd.arg("--rundir").arg(&rundir);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut r = Running {
            child: Some(child),
            rundir,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = r.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                r.child = None;
                return Err(format!("exited with {status}: {}", r.log_text()));
            }
            if r.log_text().contains("OpenFlow on") {
                return Ok(r);
            }
            if Instant::now() > deadline {
                return Err(format!("did not start: {}", r.log_text()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    fn mgmt(&self) -> String {
        format!("unix:{}", self.rundir.join("br0.mgmt").display())
    }

    fn ctl(&self) -> Option<PathBuf> {
        std::fs::read_dir(&self.rundir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "ctl"))
    }

    /// Stops the switch (SIGTERM) and returns its exit status and log.
    fn stop(&mut self) -> (Option<std::process::ExitStatus>, String) {
        let status = self.child.take().map(|mut c| {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(Some(s)) = c.try_wait() {
                    break s;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    break c.wait().expect("wait");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        (status, self.log_text())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.rundir);
    }
}

fn tool(name: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(testutil::ovs::tool_path(name))
        .args(args)
        .output()
        .map_err(|e| format!("{name}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{name} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn ports(kind: &str, hosts: &[&Host]) -> Vec<String> {
    hosts
        .iter()
        .flat_map(|h| ["--port".to_owned(), format!("{kind}:{}", h.veth.outside)])
        .collect()
}

fn switch(kind: &str, hosts: &[&Host], extra: &[&str]) -> Running {
    let mut args = vec!["switch".to_owned()];
    args.extend(ports(kind, hosts));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Running::start(&args, false).unwrap_or_else(|e| panic!("flowswitch switch: {e}"))
}

/// Sends `bytes` random bytes over TCP from `a` to `b` (port 5001) and checks they arrive
/// intact.
fn tcp_transfer(a: &Host, b: &Host, bytes: usize, dir: &Path) {
    let sent = dir.join("sent.bin");
    let got = dir.join("got.bin");
    let mut data = vec![0u8; bytes];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for v in &mut data {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *v = x as u8;
    }
    std::fs::write(&sent, &data).expect("write");
    let mut server =
        b.ns.command("sh")
            .args([
                "-c",
                &format!("timeout 20 nc -l -p 5001 > {}", got.display()),
            ])
            .spawn()
            .expect("nc -l");
    std::thread::sleep(Duration::from_millis(300));
    let client = a.ns.exec(&[
        "sh",
        "-c",
        &format!("timeout 20 nc -N -w 5 {} 5001 < {}", b.ip, sent.display()),
    ]);
    let _ = server.wait();
    client.expect("nc client");
    let received = std::fs::read(&got).expect("received file");
    assert_eq!(received.len(), data.len(), "bytes received");
    assert!(received == data, "received bytes differ from sent bytes");
}

fn normal_forwarding(kind: &str) {
    if !skip_unless(&["ping", "nc", "ethtool"]) {
        return;
    }
    let (h1, h2) = (host(1), host(2));
    let mut sw = switch(kind, &[&h1, &h2], &[]);
    h1.ping(&h2.ip, &[]).expect("ping 1→2");
    h2.ping(&h1.ip, &[]).expect("ping 2→1");
    h1.ping(&h2.ip6, &[])
        .expect("ping6 1→2 (neighbour discovery)");
    h2.ping(&h1.ip6, &[]).expect("ping6 2→1");
    // MTU-sized frames: 1472 bytes of ICMP data, don't fragment (1514-byte frames).
    h1.ping(&h2.ip, &["-s", "1472", "-M", "do"])
        .expect("MTU-sized ping");
    let dir = temp_dir("tcp");
    tcp_transfer(&h1, &h2, 4 << 20, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let (status, log) = sw.stop();
    assert!(status.is_some_and(|s| s.success()), "{log}");
    assert!(
        log.contains(&format!("{kind} {}", h1.veth.outside)),
        "{log}"
    );
    for h in [&h1, &h2] {
        let link = testutil::netns::ip(&["link", "show", &h.veth.outside]).expect("ip link");
        assert!(!link.contains("xdp"), "an XDP program was left: {link}");
        assert!(
            !link.contains("PROMISC"),
            "promiscuous mode was left: {link}"
        );
    }
}

per_kind!(
    normal_forwarding,
    normal_forwarding_afpacket,
    normal_forwarding_afxdp
);

/// A stateful firewall: ns1 may open connections to ns2; ns2 may not open any to ns1;
/// replies pass.
fn firewall(kind: &str) {
    if !skip_unless(&["ping", "nc", "ethtool"]) {
        return;
    }
    let (h1, h2) = (host(1), host(2));
    let dir = temp_dir("fw");
    let flows = dir.join("flows.txt");
    std::fs::write(
        &flows,
        "table=0,priority=100,arp,actions=NORMAL\n\
         table=0,priority=10,ip,actions=ct(table=1)\n\
         table=1,priority=100,ip,in_port=1,ct_state=+trk+new,actions=ct(commit),NORMAL\n\
         table=1,priority=100,ip,ct_state=+trk+est,actions=NORMAL\n\
         table=1,priority=100,ip,ct_state=+trk+rel,actions=NORMAL\n\
         table=1,priority=1,actions=drop\n",
    )
    .expect("flows");
    let _sw = switch(
        kind,
        &[&h1, &h2],
        &["--flows", flows.to_str().expect("path")],
    );
    h1.ping(&h2.ip, &[])
        .expect("ns1 → ns2 ping (new outbound, replies pass)");
    assert!(
        h2.ping(&h1.ip, &["-c", "1", "-W", "1"]).is_err(),
        "ns2 → ns1 ping must be blocked"
    );
    let dir2 = temp_dir("fwtcp");
    tcp_transfer(&h1, &h2, 256 << 10, &dir2);
    // ns2 → ns1: the SYN is new inbound, dropped.
    let mut server = h1
        .ns
        .command("sh")
        .args(["-c", "timeout 4 nc -l -p 5002 > /dev/null"])
        .spawn()
        .expect("nc -l");
    std::thread::sleep(Duration::from_millis(300));
    let r = h2.ns.exec(&[
        "sh",
        "-c",
        &format!("echo hi | timeout 3 nc -N -w 2 {} 5002", h1.ip),
    ]);
    let _ = server.wait();
    assert!(r.is_err(), "ns2 → ns1 TCP must be blocked: {r:?}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

per_kind!(firewall, firewall_afpacket, firewall_afxdp);

/// A flow mod through the management socket takes effect while the switch forwards.
fn flow_mod_during_traffic(kind: &str) {
    if !skip_unless(&["ping", "ethtool", "ovs"]) {
        return;
    }
    let (h1, h2) = (host(1), host(2));
    let sw = switch(kind, &[&h1, &h2], &[]);
    // Background traffic for the whole test.
    let mut bg = h1
        .ns
        .command("ping")
        .args(["-i", "0.05", "-w", "8", &h2.ip])
        .stdout(Stdio::null())
        .spawn()
        .expect("ping");
    h1.ping(&h2.ip, &[]).expect("before the flow mod");
    tool(
        "ovs-ofctl",
        &["add-flow", &sw.mgmt(), "priority=100,icmp,actions=drop"],
    )
    .expect("add-flow");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        h1.ping(&h2.ip, &["-c", "2", "-W", "1"]).is_err(),
        "ICMP dropped after the flow mod"
    );
    tool(
        "ovs-ofctl",
        &["del-flows", "--strict", &sw.mgmt(), "priority=100,icmp"],
    )
    .expect("del-flows");
    std::thread::sleep(Duration::from_millis(300));
    h1.ping(&h2.ip, &[]).expect("after the flow is deleted");
    let dump = tool("ovs-ofctl", &["dump-flows", &sw.mgmt()]).expect("dump-flows");
    assert!(dump.contains("actions=NORMAL"), "{dump}");
    let _ = bg.kill();
    let _ = bg.wait();
}

per_kind!(
    flow_mod_during_traffic,
    flow_mod_during_traffic_afpacket,
    flow_mod_during_traffic_afxdp
);

/// An interface deleted under the switch while traffic flows: the switch keeps forwarding
/// between the others, answers its control socket, and exits cleanly.
fn port_removed_under_traffic(kind: &str) {
    if !skip_unless(&["ping", "ethtool"]) {
        return;
    }
    let (h1, h2, h3) = (host(1), host(2), host(3));
    let mut sw = switch(kind, &[&h1, &h2, &h3], &[]);
    h1.ping(&h3.ip, &[]).expect("ping 1→3");
    let mut bg = h3
        .ns
        .command("ping")
        .args(["-f", "-w", "3", &h1.ip])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ping flood");
    std::thread::sleep(Duration::from_millis(500));
    testutil::netns::ip(&["link", "del", &h3.veth.outside]).expect("delete h3's veth");
    let _ = bg.wait();
    h1.ping(&h2.ip, &[]).expect("ping 1→2 after the removal");
    if let (Some(ctl), None) = (sw.ctl(), testutil::ovs::ovs_missing_reason()) {
        let show = tool(
            "ovs-appctl",
            &["-t", ctl.to_str().expect("path"), "dpctl/show"],
        )
        .expect("dpctl/show");
        assert!(show.contains(&h1.veth.outside), "{show}");
    }
    let (status, log) = sw.stop();
    assert!(status.is_some_and(|s| s.success()), "{log}");
    for h in [&h1, &h2] {
        let link = testutil::netns::ip(&["link", "show", &h.veth.outside]).expect("ip link");
        assert!(!link.contains("xdp"), "an XDP program was left: {link}");
    }
}

per_kind!(
    port_removed_under_traffic,
    port_removed_under_traffic_afpacket,
    port_removed_under_traffic_afxdp
);

/// Access and trunk ports through the daemon's configuration (`tag`, `trunks`): hosts on
/// VLAN 10 reach each other, the host on VLAN 20 reaches neither; a trunk carrying VLAN 10
/// gets their frames tagged and its tagged frames reach them untagged. (The trunk host has
/// no VLAN interfaces — this kernel may lack 8021q — so it speaks through a packet socket
/// and reads the tag the kernel strips from `PACKET_AUXDATA`.)
#[test]
fn vlan_access_and_trunk_ports() {
    if !skip_unless(&["ping", "ethtool", "python3"]) {
        return;
    }
    let (h1, h2, h3, h4) = (host(1), host(2), host(3), host(4));
    let dir = temp_dir("vlan");
    let cfg = dir.join("switch.toml");
    let mut t = String::from("[[bridge]]\nname = \"br0\"\n");
    for (h, vlan) in [
        (&h1, "tag = 10"),
        (&h2, "tag = 10"),
        (&h3, "tag = 20"),
        (&h4, "trunks = [10]"),
    ] {
        t.push_str(&format!(
            "\n[[bridge.port]]\nname = \"{}\"\ntype = \"system\"\n{vlan}\n",
            h.veth.outside
        ));
    }
    std::fs::write(&cfg, t).expect("config");
    let _sw = Running::start(&["vswitchd", "--config", cfg.to_str().expect("path")], true)
        .unwrap_or_else(|e| panic!("vswitchd: {e}"));
    h1.ping(&h2.ip, &[]).expect("same VLAN");
    h2.ping(&h1.ip6, &[]).expect("same VLAN, v6");
    assert!(
        h1.ping(&h3.ip, &["-c", "1", "-W", "1"]).is_err(),
        "VLAN 10 must not reach VLAN 20"
    );
    // The trunk host: a made-up station 10.80.0.44 (MAC 02:00:00:00:00:44) that h1 knows
    // statically. It sends h1 an ICMP echo request tagged VLAN 10 and waits for the reply,
    // which must come back tagged VLAN 10.
    h1.ns
        .exec(&[
            "ip",
            "neigh",
            "replace",
            "10.80.0.44",
            "lladdr",
            "02:00:00:00:00:44",
            "dev",
            &h1.veth.inside,
        ])
        .expect("static neighbour");
    let mac1: String = h1.veth.inside_mac.split(':').collect();
    let script = format!(
        r#"
import socket, struct, time, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind(("{ifname}", 0))
s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
s.settimeout(0.5)
def csum(b):
    if len(b) % 2: b += b"\0"
    v = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while v >> 16: v = (v & 0xffff) + (v >> 16)
    return (~v) & 0xffff
icmp = struct.pack("!BBHHH", 8, 0, 0, 0x77, 1) + b"trunk-test"
icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 1, 0, 64, 1, 0,
                 socket.inet_aton("10.80.0.44"), socket.inet_aton("{dst}"))
ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
frame = bytes.fromhex("{mac1}") + bytes.fromhex("020000000044") + struct.pack("!HHH", 0x8100, 10, 0x0800) + ip + icmp
deadline = time.time() + 5
while time.time() < deadline:
    s.send(frame)
    end = time.time() + 0.5
    while time.time() < end:
        try:
            data, anc, flags, addr = s.recvmsg(2048, socket.CMSG_SPACE(64))
        except socket.timeout:
            break
        if data[0:6] != bytes.fromhex("020000000044") or data[12:14] != b"\x08\x00":
            continue
        if data[14 + 9] != 1 or data[14 + 20] != 0:
            continue
        for level, typ, d in anc:
            if level == 263 and typ == 8:
                status, length, snaplen, mac, net, tci, tpid = struct.unpack("IIIHHHH", d[:20])
                print("reply vlan", tci & 0xfff, "valid", bool(status & 16))
                sys.exit(0)
        print("reply without a tag")
        sys.exit(1)
print("no reply")
sys.exit(1)
"#,
        ifname = h4.veth.inside,
        dst = h1.ip,
        mac1 = mac1,
    );
    let out = h4.ns.exec(&["python3", "-c", &script]);
    let out = out.unwrap_or_else(|e| panic!("trunk host: {e}"));
    assert!(out.contains("reply vlan 10 valid True"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A missing interface, or one another switch holds through AF_XDP, stops the command
/// with a clear error and leaves the running switch untouched.
#[test]
fn bad_ports_are_clear_errors() {
    if !skip_unless(&["ping", "ethtool"]) {
        return;
    }
    let out = Command::new(BIN)
        .args(["switch", "--port", "afpacket:fsnosuchif9"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("fsnosuchif9") && err.contains("No such device"),
        "{err}"
    );
    if netdev::afxdp_missing_reason().is_some() {
        return;
    }
    let (h1, h2) = (host(1), host(2));
    let _first = switch("afxdp", &[&h1, &h2], &[]);
    h1.ping(&h2.ip, &[]).expect("first switch forwards");
    let second = Running::start(
        &["switch", "--port", &format!("afxdp:{}", h1.veth.outside)],
        false,
    );
    let e = second
        .err()
        .expect("the second switch must refuse a taken interface");
    assert!(e.contains("XDP program"), "{e}");
    h1.ping(&h2.ip, &[]).expect("first switch still forwards");
}

/// Garbage from the wire is forwarded or dropped as the frames it is, counted, and the
/// switch keeps forwarding. (Runts cannot be sent over a veth: the kernel refuses frames
/// shorter than an Ethernet header at the sender; the datapath counts any that arrive as
/// `lost`, reason `runt`, tested in the `datapath` crate.)
fn wire_garbage(kind: &str) {
    if !skip_unless(&["ping", "ethtool", "python3", "ovs"]) {
        return;
    }
    let (h1, h2) = (host(1), host(2));
    let sw = switch(kind, &[&h1, &h2], &[]);
    // 20 frames of random bytes, 5 IPv4 frames with impossible headers.
    let script = format!(
        "import socket,os\n\
         s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
         s.bind(('{}',0))\n\
         [s.send(os.urandom(60+i)) for i in range(20)]\n\
         [s.send(bytes.fromhex('ffffffffffff0200000000010800')+bytes([0x4f,0,0xff,0xff])+os.urandom(40)) for i in range(5)]\n",
        h1.veth.inside
    );
    h1.ns
        .exec(&["python3", "-c", &script])
        .expect("send garbage");
    h1.ping(&h2.ip, &[])
        .expect("still forwarding after garbage");
    let ctl = sw.ctl().expect("control socket");
    let show = tool(
        "ovs-appctl",
        &["-t", ctl.to_str().expect("path"), "dpctl/show"],
    )
    .expect("dpctl/show");
    let hits: u64 = ["hit:", "missed:"]
        .iter()
        .map(|k| {
            show.split(k)
                .nth(1)
                .and_then(|t| t.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {k} counter in {show}"))
        })
        .sum();
    assert!(
        hits >= 25,
        "the garbage frames went through the datapath: {show}"
    );
}

per_kind!(wire_garbage, wire_garbage_afpacket, wire_garbage_afxdp);

/// A flow file that does not parse stops `switch` before anything starts (no root needed:
/// the flows are checked before any port is opened).
#[test]
fn bad_flows_are_a_clear_error() {
    let dir = temp_dir("badflows");
    let flows = dir.join("flows.txt");
    std::fs::write(
        &flows,
        "in_port=1,actions=output:2\nin_port=2,actions=outptu:1\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["switch", "--port", "afpacket:lo", "--rundir"])
        .arg(dir.join("run"))
        .arg("--flows")
        .arg(&flows)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("line 2") && err.contains("outptu"), "{err}");
    assert!(!dir.join("run").join("br0.mgmt").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
