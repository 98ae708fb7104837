//! Packet → flow key, checked against real Open vSwitch.
//!
//! For each packet we extract a key and print it as `ofproto/trace` prints its `Flow:` line;
//! a live OVS (private dummy-datapath `ovs-vswitchd`, started by the test) answers for the same
//! bytes. 1,200 fresh random packets (a seed other than the recorded golden file's, which
//! `text_flow_line.rs` checks everywhere, OVS or not).
//!
//! flowswitch parses two VLAN tags (802.1ad + 802.1Q), so OVS is run with
//! `other_config:vlan-limit=2`; OVS's default (1) stops at the first tag.

use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use flow::text::format_flow_line;
use testutil::packets::random_packet;
use testutil::rng::TestRng;

/// Our `Flow:` text for a packet, or the error OVS gives for a frame too short to parse.
fn our_flow(packet: &[u8]) -> Result<String, String> {
    if packet.len() < 14 {
        return Err("Packet data too short for Ethernet".to_string());
    }
    let mut key = FlowKey::ZERO;
    extract(packet, &PacketMeta::port(1), &mut key);
    Ok(format_flow_line(&key))
}

/// Compares and returns a report of the first differences (empty = all equal).
fn compare(cases: &[(Vec<u8>, Result<String, String>, String)]) -> (usize, String) {
    let mut bad = 0;
    let mut report = String::new();
    for (packet, ovs, kind) in cases {
        let ours = our_flow(packet);
        let equal = match (&ours, ovs) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !equal {
            bad += 1;
            if bad <= 10 {
                report.push_str(&format!(
                    "\n[{kind}] {}\n  ovs:  {ovs:?}\n  ours: {ours:?}",
                    testutil::packets::to_hex(packet)
                ));
            }
        }
    }
    (bad, report)
}

#[test]
fn flow_lines_match_live_ovs() {
    testutil::skip_without_ovs!();
    let ovs = testutil::ovs::OvsSandbox::start(2).expect("start OVS sandbox");
    ovs.set_vlan_limit(2).expect("vlan-limit=2");
    // A seed of its own, so the live run covers packets the golden file does not.
    let mut rng = TestRng::new(0x11fe_5eed);
    let mut cases = Vec::new();
    for _ in 0..1200 {
        let packet = random_packet(&mut rng);
        if packet.is_empty() {
            continue;
        }
        let ovs_flow = match ovs.trace(1, &packet) {
            Ok(t) => Ok(t.flow),
            Err(e) => Err(e.to_string()),
        };
        cases.push((packet, ovs_flow, String::from("random")));
    }
    let (bad, report) = compare(&cases);
    eprintln!("live OVS trace: {} packets, {bad} differ", cases.len());
    assert_eq!(
        bad,
        0,
        "{bad} of {} packets differ from OVS:{report}",
        cases.len()
    );
}
