//! Groups through the drop-in daemon, driven by real `ovs-ofctl` (issue 17): the same group
//! commands (`add-group`, `mod-group`, `del-groups` in OpenFlow 1.3 and 1.5, refused ones
//! included) go to `flowswitch vswitchd` and to a real OVS 3.1 (`testutil::ovs::OvsSandbox`);
//! what `ovs-ofctl` prints back (`dump-groups`, `dump-group-features`, `dump-flows`, and the
//! OpenFlow error of each refused command) must be the same; and after the same packets
//! (`netdev-dummy/receive`) and a `mod-group`, so must `dump-group-stats` (group and bucket
//! counters, `ref_count`; durations left out).

mod common;

use common::Env;

/// The lines `ovs-ofctl` printed, without the reply header (its xid differs) and sorted
/// (OVS prints groups in hash order).
fn body(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .lines()
        .filter(|l| !l.contains("reply (") && !l.trim().is_empty())
        .map(|l| {
            // dump-flows: durations and counters differ between the two switches.
            l.split(", ")
                .filter(|p| !p.starts_with(" duration=") && !p.starts_with("duration="))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    v.sort();
    v
}

/// The OpenFlow error name in a refused command's stderr.
fn error_name(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c == ':' || c == '"' || c == '\\')
        .find(|w| w.starts_with("OFP") && !w.starts_with("OFPT_"))
        .unwrap_or("")
        .to_string()
}

/// `flowswitch vswitchd` with bridge br0 (secure fail mode) and dummy ports p1–p3 as
/// OpenFlow ports 1–3.
fn daemon_with_three_ports(tag: &str) -> Env {
    let env = Env::new(tag, true);
    let db = format!("unix:{}", env.dir.join("db.sock").display());
    env.start_daemon(&[&db]);
    let mut add = vec![
        "ovs-vsctl",
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "fail-mode=secure",
    ];
    let names = ["p1", "p2", "p3"];
    let reqs = ["ofport_request=1", "ofport_request=2", "ofport_request=3"];
    for i in 0..3 {
        add.extend([
            "--",
            "add-port",
            "br0",
            names[i],
            "--",
            "set",
            "interface",
            names[i],
            "type=dummy",
            reqs[i],
        ]);
    }
    env.ok(&add);
    env
}

#[test]
fn group_commands_answer_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let env = daemon_with_three_ports("groups");
    let sb = testutil::ovs::OvsSandbox::start(3).expect("OVS sandbox");

    // (OpenFlow version, command, argument)
    let steps: &[(&str, &str, &str)] = &[
        (
            "OpenFlow13",
            "add-group",
            "group_id=1,type=select,bucket=weight:100,output:2,bucket=weight:50,output:3",
        ),
        (
            "OpenFlow15",
            "add-group",
            "group_id=2,type=select,selection_method=hash,fields(ip_src,tcp_dst),bucket=output:2,bucket=output:3",
        ),
        (
            "OpenFlow15",
            "add-group",
            "group_id=3,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=ct(commit,table=2,zone=7,nat(dst=10.0.0.10:80)),bucket=bucket_id:1,weight:100,actions=output:2",
        ),
        (
            "OpenFlow13",
            "add-group",
            "group_id=4,type=fast_failover,bucket=watch_port:3,output:3,bucket=watch_group:1,group:1",
        ),
        (
            "OpenFlow13",
            "add-group",
            "group_id=5,type=all,bucket=output:1,bucket=set_field:00:00:00:00:00:09->eth_src,output:2",
        ),
        (
            "OpenFlow13",
            "add-group",
            "group_id=6,type=indirect,bucket=group:5",
        ),
        // Refused: exists, indirect without its bucket, duplicate bucket ids, a watch on an
        // all group, a modify of a missing group.
        (
            "OpenFlow13",
            "add-group",
            "group_id=1,type=all,bucket=output:1",
        ),
        ("OpenFlow13", "add-group", "group_id=7,type=indirect"),
        (
            "OpenFlow15",
            "add-group",
            "group_id=8,type=select,bucket=bucket_id:5,output:1,bucket=bucket_id:5,output:2",
        ),
        (
            "OpenFlow13",
            "add-group",
            "group_id=9,type=all,bucket=watch_port:2,output:1",
        ),
        (
            "OpenFlow13",
            "mod-group",
            "group_id=10,type=all,bucket=output:1",
        ),
        ("OpenFlow13", "add-flow", "priority=10,udp,actions=group:1"),
        (
            "OpenFlow13",
            "add-flow",
            "priority=10,tcp,actions=group:5,output:3",
        ),
        (
            "OpenFlow13",
            "add-flow",
            "priority=10,icmp,actions=group:42",
        ),
        (
            "OpenFlow13",
            "mod-group",
            "group_id=1,type=all,bucket=output:3",
        ),
        // OpenFlow 1.5 bucket commands on group 5 (buckets 0, 1): first, behind a bucket,
        // last; then refused: an id the group has, a bucket it lacks, a missing group.
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=5,command_bucket_id=first,bucket=bucket_id:7,actions=output:3",
        ),
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=5,command_bucket_id=0,bucket=bucket_id:8,actions=output:1,bucket=bucket_id:12,actions=output:2",
        ),
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=5,command_bucket_id=last,bucket=bucket_id:9,actions=output:2",
        ),
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=5,command_bucket_id=last,bucket=bucket_id:1,actions=output:2",
        ),
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=5,command_bucket_id=42,bucket=bucket_id:10,actions=output:2",
        ),
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=77,command_bucket_id=first,bucket=bucket_id:10,actions=output:2",
        ),
        // The group's own type rules: a watched bucket into a fast-failover group, a second
        // bucket into an indirect group.
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=4,command_bucket_id=last,bucket=bucket_id:5,watch_port:2,actions=output:2",
        ),
        (
            "OpenFlow15",
            "insert-buckets",
            "group_id=6,command_bucket_id=last,bucket=bucket_id:5,actions=output:2",
        ),
        (
            "OpenFlow15",
            "remove-buckets",
            "group_id=5,command_bucket_id=first",
        ),
        (
            "OpenFlow15",
            "remove-buckets",
            "group_id=5,command_bucket_id=9",
        ),
        (
            "OpenFlow15",
            "remove-buckets",
            "group_id=5,command_bucket_id=42",
        ),
        (
            "OpenFlow15",
            "remove-buckets",
            "group_id=5,command_bucket_id=last",
        ),
        ("OpenFlow15", "remove-buckets", "group_id=2"),
        ("OpenFlow13", "del-groups", "group_id=5"),
    ];
    let mut refused = 0;
    for (ver, cmd, arg) in steps {
        let ours = env.run(&["ovs-ofctl", "-O", ver, cmd, "br0", arg]);
        let theirs = sb.ofctl(&["-O", ver, cmd, "br0", arg]);
        match theirs {
            Ok(_) => assert!(
                ours.status.success(),
                "{cmd} {arg}: OVS accepted it, we said {}",
                String::from_utf8_lossy(&ours.stderr)
            ),
            Err(e) => {
                assert!(
                    !ours.status.success(),
                    "{cmd} {arg}: OVS refused it ({e}), we accepted it"
                );
                assert_eq!(
                    error_name(&String::from_utf8_lossy(&ours.stderr)),
                    error_name(&e.to_string()),
                    "{cmd} {arg}"
                );
                refused += 1;
            }
        }
        for (v, what) in [
            ("OpenFlow13", "dump-groups"),
            ("OpenFlow15", "dump-groups"),
            ("OpenFlow13", "dump-flows"),
        ] {
            let o = env.ok(&["ovs-ofctl", "-O", v, what, "br0"]);
            let t = sb.ofctl(&["-O", v, what, "br0"]).expect("OVS dump");
            assert_eq!(body(&o), body(&t), "after {cmd} {arg}: {v} {what}");
        }
    }
    // Six group mods, an existing bucket id, a missing bucket (insert and remove), a missing
    // group, a watch in an insert (its message says `all`).
    assert_eq!(refused, 11, "the refusals");
    let o = env.ok(&[
        "ovs-ofctl",
        "-O",
        "OpenFlow13",
        "dump-group-features",
        "br0",
    ]);
    let t = sb
        .ofctl(&["-O", "OpenFlow13", "dump-group-features", "br0"])
        .expect("OVS features");
    assert_eq!(body(&o), body(&t));
    env.ok(&["ovs-ofctl", "-O", "OpenFlow13", "del-groups", "br0"]);
    assert_eq!(
        body(&env.ok(&["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", "br0"])),
        Vec::<String>::new()
    );
    // Deleting every group deleted the flow that used group 1; the tcp flow went with group 5.
    assert!(body(&env.ok(&["ovs-ofctl", "dump-flows", "br0"])).is_empty());
}

/// `dump-group-stats` lines without the durations (they differ), sorted.
fn group_stats(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .lines()
        .filter(|l| l.contains("group_id="))
        .map(|l| {
            l.trim()
                .split(',')
                .filter(|p| !p.starts_with("duration="))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn group_stats_count_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let env = daemon_with_three_ports("gstats");
    let sb = testutil::ovs::OvsSandbox::start(3).expect("OVS sandbox");
    let groups = [
        // Default select (OVS 3.1: dp_hash, chosen on the recirculated pass).
        "group_id=1,type=select,bucket=weight:100,output:2,bucket=weight:50,output:3",
        // Every bucket counts each packet.
        "group_id=2,type=all,bucket=output:2,bucket=output:3",
        // The first bucket watches a missing port: the second takes the packets.
        "group_id=3,type=fast_failover,bucket=watch_port:9,output:1,bucket=watch_port:3,output:3",
        // Hash of the source address.
        "group_id=4,type=select,selection_method=hash,fields(ip_src),bucket=output:2,bucket=output:3",
        // Named by no flow: all zero.
        "group_id=5,type=all,bucket=output:1",
    ];
    let flows = [
        "priority=10,udp,tp_dst=1,actions=group:1",
        "priority=10,udp,tp_dst=2,actions=group:2",
        "priority=10,udp,tp_dst=3,actions=group:3",
        "priority=10,udp,tp_dst=4,actions=group:4",
        "priority=10,udp,tp_dst=5,actions=group:2,group:4",
    ];
    for g in groups {
        env.ok(&["ovs-ofctl", "-O", "OpenFlow15", "add-group", "br0", g]);
        sb.ofctl(&["-O", "OpenFlow15", "add-group", "br0", g])
            .expect("OVS add-group");
    }
    for f in flows {
        env.ok(&["ovs-ofctl", "-O", "OpenFlow13", "add-flow", "br0", f]);
        sb.ofctl(&["-O", "OpenFlow13", "add-flow", "br0", f])
            .expect("OVS add-flow");
    }
    // Several sources and source ports per destination port, some packets repeated (megaflow
    // hits after the upcall), payloads of two sizes.
    let mut n = 0;
    for dport in 1..=5u16 {
        for i in 0..6u8 {
            let f = testutil::packets::udp4(
                [10, 0, 0, 1 + i % 3],
                [10, 0, 1, 1],
                1000 + u16::from(i),
                dport,
                8 + 8 * usize::from(i % 2),
            );
            for _ in 0..1 + i % 2 {
                let hex = testutil::packets::to_hex(&f);
                env.ok(&["ovs-appctl", "netdev-dummy/receive", "p1", &hex]);
                sb.dp_receive(1, &f).expect("OVS receive");
                n += 1;
            }
        }
    }
    assert!(n > 40);
    wait_equal_group_stats(&env, &sb, "after the first packets");
    // One group asked for alone, in OpenFlow 1.1 (no duration) and 1.5.
    for ver in ["OpenFlow11", "OpenFlow15"] {
        let o = env.ok(&[
            "ovs-ofctl",
            "-O",
            ver,
            "dump-group-stats",
            "br0",
            "group_id=2",
        ]);
        let t = sb
            .ofctl(&["-O", ver, "dump-group-stats", "br0", "group_id=2"])
            .expect("OVS dump-group-stats one");
        assert_eq!(group_stats(&o), group_stats(&t), "{ver}");
        assert_eq!(group_stats(&o).len(), 1, "{o}");
    }
    // A modified group starts counting again (OVS builds a new group object).
    let m = "group_id=2,type=all,bucket=output:3";
    env.ok(&["ovs-ofctl", "-O", "OpenFlow13", "mod-group", "br0", m]);
    sb.ofctl(&["-O", "OpenFlow13", "mod-group", "br0", m])
        .expect("OVS mod-group");
    for i in 0..3u8 {
        let f = testutil::packets::udp4([10, 0, 0, 9], [10, 0, 1, 1], 2000 + u16::from(i), 2, 8);
        let hex = testutil::packets::to_hex(&f);
        env.ok(&["ovs-appctl", "netdev-dummy/receive", "p1", &hex]);
        sb.dp_receive(1, &f).expect("OVS receive");
    }
    wait_equal_group_stats(&env, &sb, "after mod-group");
}

/// Waits (15 s at most) until `dump-group-stats` says the same on both switches, with some
/// packets counted: the revalidators push the datapath's counters up within a pass or two.
fn wait_equal_group_stats(env: &Env, sb: &testutil::ovs::OvsSandbox, when: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        env.ok(&["ovs-appctl", "revalidator/wait"]);
        sb.appctl(&["revalidator/wait"])
            .expect("OVS revalidator/wait");
        let ours =
            group_stats(&env.ok(&["ovs-ofctl", "-O", "OpenFlow13", "dump-group-stats", "br0"]));
        let theirs = group_stats(
            &sb.ofctl(&["-O", "OpenFlow13", "dump-group-stats", "br0"])
                .expect("OVS dump-group-stats"),
        );
        let counted = |v: &[String]| v.iter().any(|l| !l.contains("packet_count=0,"));
        if ours == theirs && counted(&ours) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{when}: group stats differ:\n ours   {ours:#?}\n theirs {theirs:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
