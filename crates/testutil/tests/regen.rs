//! Regenerates the golden files in `data/` from real OVS:
//! `cargo test -p testutil -- --ignored regen` (needs Open vSwitch 3.1 installed).

use std::fs;
use std::io::Write;

use testutil::golden::{
    self, TraceGolden, parse_golden_inputs, parse_golden_line, trace_golden_line,
    trace_golden_packets,
};
use testutil::ovs::{OvsError, OvsSandbox, parse_flows};

#[test]
#[ignore = "regenerates golden files from real OVS"]
fn regen_parse_flow_golden() {
    testutil::skip_without_ovs!();
    let inputs = parse_golden_inputs();
    for of13 in [false, true] {
        let answers = parse_flows(&inputs, of13);
        let path = golden::parse_golden_path(of13);
        fs::create_dir_all(golden::data_dir()).unwrap();
        let mut out = String::new();
        out.push_str(&format!(
            "# ovs-ofctl {}parse-flow answers, recorded from {}\n",
            if of13 { "-O OpenFlow13 " } else { "" },
            testutil::ovs::tool_version("ovs-ofctl")
        ));
        out.push_str("# <input>\\t<ok|err>\\t<text after \"ADD \" | error message without \"ovs-ofctl: \">\n");
        for (input, a) in inputs.iter().zip(answers) {
            let a = a.unwrap_or_else(|e| panic!("ovs-ofctl failed to run on {input:?}: {e}"));
            out.push_str(&parse_golden_line(input, &a.result));
            out.push('\n');
        }
        fs::File::create(&path)
            .unwrap()
            .write_all(out.as_bytes())
            .unwrap();
        eprintln!("wrote {}", path.display());
    }
}

#[test]
#[ignore = "regenerates golden files from real OVS"]
fn regen_trace_golden() {
    testutil::skip_without_ovs!();
    regen_trace(1);
    regen_trace(2);
}

fn regen_trace(vlan_limit: u32) {
    let packets = trace_golden_packets();
    let sb = OvsSandbox::start(2).unwrap();
    sb.set_vlan_limit(vlan_limit).unwrap();
    let trace_all = || -> Vec<Result<testutil::ovs::Trace, String>> {
        packets
            .iter()
            .map(|p| match sb.trace(1, &p.bytes) {
                Ok(t) => Ok(t),
                Err(OvsError::Command { stderr, .. }) => {
                    Err(stderr.lines().next().unwrap_or("").trim().to_string())
                }
                Err(OvsError::Invalid(e)) => Err(e),
                Err(e) => panic!("trace failed: {e}"),
            })
            .collect()
    };
    let empty = trace_all();
    sb.add_flow("actions=drop").unwrap();
    let dropped = trace_all();
    let mut out = String::new();
    out.push_str(&format!(
        "# ofproto/trace br0 in_port=1 <hex>, recorded from {} with other_config:vlan-limit={vlan_limit}; seed {:#x}\n",
        testutil::ovs::tool_version("ovs-ofctl"),
        golden::TRACE_GOLDEN_SEED
    ));
    out.push_str("# <hex>\\t<Flow>\\t<Megaflow empty table>\\t<Datapath actions empty table>\\t<Megaflow with actions=drop>\\t<Datapath actions with actions=drop>\\t<generator kind>\n");
    for ((p, e), d) in packets.iter().zip(empty).zip(dropped) {
        let row = match (e, d) {
            (Ok(e), Ok(d)) => {
                assert_eq!(e.flow, d.flow, "Flow: must not depend on the table");
                TraceGolden {
                    packet: p.bytes.clone(),
                    flow: Ok(e.flow),
                    empty_megaflow: e.megaflow,
                    empty_actions: e.datapath_actions,
                    drop_megaflow: d.megaflow,
                    drop_actions: d.datapath_actions,
                    kind: p.kind.clone(),
                }
            }
            (Err(e), _) | (_, Err(e)) => TraceGolden {
                packet: p.bytes.clone(),
                flow: Err(e),
                empty_megaflow: String::new(),
                empty_actions: String::new(),
                drop_megaflow: String::new(),
                drop_actions: String::new(),
                kind: p.kind.clone(),
            },
        };
        out.push_str(&trace_golden_line(&row));
        out.push('\n');
    }
    let path = golden::trace_golden_path(vlan_limit);
    fs::create_dir_all(golden::data_dir()).unwrap();
    fs::write(&path, out).unwrap();
    eprintln!("wrote {}", path.display());
}
