//! `Flow:` line: our `extract` + `format_flow_line` against the `Flow:` lines real OVS 3.1
//! printed for testutil's trace corpus (`ofproto/trace br0 in_port=1 <hex>`).

use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::text::format_flow_line;

/// `vlan_limit` is OVS's `other_config:vlan-limit`; our `extract` parses two tags (limit 2), so
/// for limit 1 the double-tagged packets (whose inner tag OVS then leaves unparsed) are skipped.
fn check(vlan_limit: u32) {
    let golden = testutil::golden::trace_golden(vlan_limit).expect("trace golden file");
    let (mut pass, mut total) = (0, 0);
    let mut fails = Vec::new();
    for g in &golden {
        let Ok(want) = &g.flow else {
            continue;
        };
        if vlan_limit == 1 && g.kind.starts_with("vlan2") {
            continue;
        }
        total += 1;
        let mut key = FlowKey::ZERO;
        extract(&g.packet, &PacketMeta::port(1), &mut key);
        let ours = format_flow_line(&key);
        if ours == *want {
            pass += 1;
        } else {
            fails.push(format!(
                "{} {}\n  ovs:  {want}\n  ours: {ours}",
                g.kind,
                hex(&g.packet)
            ));
        }
    }
    eprintln!("vlan-limit={vlan_limit}: {pass}/{total} Flow: lines equal to OVS");
    for f in fails.iter().take(20) {
        eprintln!("{f}");
    }
    assert!(total >= 1000 || (vlan_limit == 1 && total >= 900));
    assert!(fails.is_empty(), "{} mismatches", fails.len());
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn flow_lines_match_ovs_vlan_limit_1() {
    check(1);
}

#[test]
fn flow_lines_match_ovs_vlan_limit_2() {
    check(2);
}
