//! Groups through the drop-in daemon, driven by real `ovs-ofctl` (issue 17): the same group
//! commands (`add-group`, `mod-group`, `del-groups` in OpenFlow 1.3 and 1.5, refused ones
//! included) go to `flowswitch vswitchd` and to a real OVS 3.1 (`testutil::ovs::OvsSandbox`);
//! what `ovs-ofctl` prints back (`dump-groups`, `dump-group-features`, `dump-flows`, and the
//! OpenFlow error of each refused command) must be the same.

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

#[test]
fn group_commands_answer_as_ovs() {
    if let Some(why) = testutil::ovs::ovs_missing_reason() {
        testutil::skip::skip(&why);
        return;
    }
    let env = Env::new("groups", true);
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
    assert_eq!(refused, 6, "the six refusals");
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
