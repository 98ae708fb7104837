//! Fast-failover liveness on groups that watch each other. OVS walks the watch graph by
//! recursion cut at 128 links, which takes 2^128 steps when two dead buckets watch their own
//! group; ours answers the same question (`xlate::liveness`) and must give OVS's answer:
//! a bucket is live when a bucket live on its own (no watch, or a port that exists) is fewer
//! than 128 watch links away. Each case here used to hang the translation.

use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::ofp::group::GroupCommand;
use ofproto::{Backend, Bridge, FlowModCommand, XlateIn, format_odp_actions, xlate_ro};
use testutil::packets::{Ipv4Spec, ethernet, ipv4, udp};

fn packet() -> FlowKey {
    let ip = Ipv4Spec::new([10, 0, 0, 1], [10, 0, 0, 2], 17);
    let bytes = ethernet(
        [0, 0x16, 0x3e, 0, 0, 0xa],
        [0, 0x16, 0x3e, 0, 0, 0xb],
        &[],
        0x0800,
        &ipv4(&ip, &udp(ip.pseudo(), 1000, 2000, &[0; 8])),
    );
    let mut k = FlowKey::ZERO;
    extract(&bytes, &PacketMeta::port(1), &mut k);
    k
}

/// The datapath actions of `group:first` with `groups` installed (ports 1–4 exist).
fn run(groups: &[String], first: u32, backend: Backend) -> String {
    let mut br = Bridge::ovs_sandbox(4, backend);
    for g in groups {
        br.group_mod_text(GroupCommand::Add, g, 0)
            .unwrap_or_else(|e| panic!("{g}: {e:?}"));
    }
    br.flow_mod_text(
        FlowModCommand::Add,
        &format!("in_port=1,actions=group:{first}"),
        0,
    )
    .unwrap();
    let out = xlate_ro(&br, &XlateIn::new(packet()));
    assert_eq!(out.error, None);
    format_odp_actions(&out.actions)
}

/// Group `id`, fast failover, two dead buckets watching group `watch`, then `extra`.
fn ff(id: u32, watch: u32, extra: &str) -> String {
    format!(
        "group_id={id},type=ff,bucket=watch_group={watch},actions=output:2,\
         bucket=watch_group={watch},actions=output:3{extra}"
    )
}

#[test]
fn dead_buckets_watching_their_own_group_are_dead() {
    for backend in [Backend::TupleSpace, Backend::Linear] {
        assert_eq!(run(&[ff(1, 1, "")], 1, backend), "drop");
        // A third bucket live on its own makes the group live, so the first bucket (which
        // watches it) is the one used.
        assert_eq!(
            run(
                &[ff(1, 1, ",bucket=watch_port=4,actions=output:4")],
                1,
                backend
            ),
            "2"
        );
        // A third bucket watching a missing port leaves all dead.
        assert_eq!(
            run(
                &[ff(1, 1, ",bucket=watch_port=9,actions=output:4")],
                1,
                backend
            ),
            "drop"
        );
    }
}

#[test]
fn a_cycle_with_a_live_bucket_is_live_through_it() {
    // 1 watches 2, 2 watches 1 and has a live bucket last: 1's first bucket is live.
    let groups = [
        ff(1, 2, ""),
        ff(2, 1, ",bucket=watch_port=4,actions=output:4"),
    ];
    assert_eq!(run(&groups, 1, Backend::TupleSpace), "2");
}

#[test]
fn chains_are_cut_at_128_links() {
    // Group i watches group i+1 (two buckets each: exponential for the walk); group `n`
    // has a bucket live on its own. Group 1's first bucket is n-1 links from it.
    for (n, want) in [(100u32, "2"), (128, "2"), (129, "drop"), (140, "drop")] {
        let mut groups: Vec<String> = (1..n).map(|i| ff(i, i + 1, "")).collect();
        groups.push(format!(
            "group_id={n},type=ff,bucket=watch_port=3,actions=output:3"
        ));
        assert_eq!(run(&groups, 1, Backend::TupleSpace), want, "chain of {n}");
    }
}

#[test]
fn weight_zero_select_buckets_do_not_pass_liveness_on() {
    // A select group's weight-0 bucket is never live, whatever it watches.
    let groups = [
        ff(1, 2, ""),
        "group_id=2,type=select,bucket=weight=0,watch_port=4,actions=output:4,\
         bucket=weight=0,watch_group=2,actions=output:3"
            .to_string(),
    ];
    assert_eq!(run(&groups, 1, Backend::TupleSpace), "drop");
}
