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
