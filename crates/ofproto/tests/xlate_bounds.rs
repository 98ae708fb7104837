//! Translations whose work would grow exponentially end quickly, with an error where OVS's
//! limits apply: `check_pkt_larger` translates the rest of its list in both branches, so a
//! list of n of them has 2^n leaves; the datapath actions are bounded as OVS bounds them
//! (`MAX_ODP_ACTIONS`), and the translation stops there (`TooManyActions`).

use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use ofproto::xlate::XlateError;
use ofproto::{Backend, Bridge, FlowModCommand, XlateIn, xlate_ro};
use testutil::packets::udp4;

fn key() -> FlowKey {
    let f = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 8);
    let mut k = FlowKey::ZERO;
    extract(&f, &PacketMeta::port(1), &mut k);
    k
}

#[test]
fn sequential_check_pkt_larger_is_bounded() {
    for n in [4usize, 30, 64] {
        let mut acts: Vec<String> = (0..n)
            .map(|i| format!("check_pkt_larger(100)->NXM_NX_REG0[{}]", i % 32))
            .collect();
        acts.push("output:2".into());
        let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
        br.flow_mod_text(
            FlowModCommand::Add,
            &format!("in_port=1,actions={}", acts.join(",")),
            0,
        )
        .expect("flow");
        let t = std::time::Instant::now();
        let out = xlate_ro(&br, &XlateIn::new(key()));
        let small = n <= 4;
        assert_eq!(
            out.error,
            if small {
                None
            } else {
                Some(XlateError::TooManyActions)
            },
            "n={n}"
        );
        // Not a timing assertion: a wall-clock note for whoever reads a failure.
        eprintln!("n={n}: {:?}", t.elapsed());
    }
}

#[test]
fn chains_of_all_groups_are_bounded() {
    use flow::ofp::group::GroupCommand;
    // Group i (an `all` group) runs group i+1 from each of its two buckets: 2^n bucket runs,
    // none of them emitting an action (the last group only rewrites a field).
    for n in [3u32, 40] {
        let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
        for i in 1..n {
            br.group_mod_text(
                GroupCommand::Add,
                &format!(
                    "group_id={i},type=all,bucket=group:{},bucket=group:{}",
                    i + 1,
                    i + 1
                ),
                0,
            )
            .expect("group");
        }
        br.group_mod_text(
            GroupCommand::Add,
            &format!("group_id={n},type=all,bucket=mod_nw_tos:8"),
            0,
        )
        .expect("last group");
        br.flow_mod_text(FlowModCommand::Add, "in_port=1,actions=group:1,output:2", 0)
            .expect("flow");
        let t = std::time::Instant::now();
        let out = xlate_ro(&br, &XlateIn::new(key()));
        eprintln!("n={n}: {:?} {:?}", t.elapsed(), out.error);
        if n == 3 {
            assert_eq!(out.error, None);
            assert_eq!(ofproto::format_odp_actions(&out.actions), "2");
        } else {
            assert_eq!(out.error, Some(XlateError::TooManyResubmits));
        }
    }
}
