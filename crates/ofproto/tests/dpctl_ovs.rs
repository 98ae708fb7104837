//! Differential test of `datapath::dpctl` against a live OVS 3.1 (dummy datapath): random
//! pipelines (`testutil::pipelines`) are loaded into OVS and into our bridge; each packet is
//! injected with `netdev-dummy/receive` after a `revalidator/purge`, and OVS's
//! `dpctl/dump-flows` line for it (`recirc_id(0),in_port(N),...`) is compared with ours:
//!
//! - **formatter** (asserted): our `format_key` on the packet's key and *OVS's* megaflow mask
//!   (the `Megaflow:` of `ofproto/trace`, parsed, plus the VLAN rule dpif-netdev applies at
//!   install, [`dpif_netdev_vlan_rule`]) must print exactly OVS's key text — this isolates the
//!   formatter from translation differences;
//! - **end to end** (reported): our `format_key` on the packet key and *our* xlate mask, and
//!   the `DpFlow` form (masked key) — equal unless our megaflow mask differs from OVS's or a
//!   partial mask prints the masked value;
//! - **actions** (reported): `ofproto::format_odp_actions` vs the dump's `actions:` (compared
//!   by effect, recirculation ids renumbered).
//!
//! Also checks our `dpctl/show` layout against OVS's text. Skipped without OVS.

mod common;
use common::same_actions;

use std::time::Duration;

use datapath::dpctl::{DpPortInfo, DpShow, KeyFormat, format_key};
use datapath::{DpFlow, Ufid};
use flow::FlowKey;
use flow::extract::{PacketMeta, extract};
use ofproto::{Backend, Bridge, FlowMod, FlowModCommand, VlanMode, XlateIn, xlate};
use testutil::ovs::OvsSandbox;
use testutil::pipelines::{
    PipelineMix, PortCfg, flow_protocol, random_packets_for, random_pipeline,
};
use testutil::rng::TestRng;

const PIPELINES: usize = 16;
const PACKETS: usize = 5;

fn vlan_mode(p: &PortCfg) -> VlanMode {
    let trunks = (!p.trunks.is_empty()).then(|| p.trunks.clone());
    VlanMode::from_ovs(p.tag, trunks, p.vlan_mode.map(|m| m.as_str()))
}

/// Our bridge with the pipeline, or `None` if a flow does not load.
fn our_bridge(flows: &[String], ports: &[PortCfg]) -> Option<Bridge> {
    let mut br = Bridge::ovs_sandbox(4, Backend::TupleSpace);
    for p in ports {
        br.set_port_vlan(flow::ofp::OfPort(p.port as u16), vlan_mode(p));
    }
    for f in flows {
        let dialect = if flow_protocol(f) == "OpenFlow13" {
            flow::text::Dialect::OpenFlow13
        } else {
            flow::text::Dialect::OpenFlow10
        };
        let spec = flow::text::parse_flow_with(f, dialect).ok()?;
        let fm = FlowMod {
            command: FlowModCommand::Add,
            spec,
            reset_counts: false,
        };
        br.flow_mod(&fm, 0).ok()?;
    }
    Some(br)
}

fn key_text(key: &FlowKey, mask: &flow::FlowMask) -> String {
    let mut s = String::new();
    // Our `extract` parses two VLAN tags, as OVS does with `vlan-limit=2`.
    let fmt = KeyFormat {
        port_names: None,
        vlan_limit: 2,
    };
    format_key(&mut s, key, mask, &fmt);
    s
}

#[derive(Debug, Default)]
struct Counts {
    packets: usize,
    no_flow: usize,
    formatter_equal: usize,
    formatter_checked: usize,
    e2e_equal: usize,
    dpflow_equal: usize,
    actions_equal: usize,
    vlan_rule_applied: usize,
    e2e_vlan_rule_equal: usize,
    metadata_first: usize,
}

#[test]
fn dump_flows_lines_match_live_ovs() {
    testutil::skip_without_ovs!();
    let sb = OvsSandbox::start(4).expect("start OVS sandbox");
    sb.set_vlan_limit(2).expect("vlan-limit");

    // Datapath port numbers must equal OpenFlow port numbers for `in_port(N)` to compare;
    // and our `dpctl/show` must print OVS's layout for the same values.
    let show = sb.dp_show().expect("dpctl/show");
    for i in 1..=4 {
        assert!(
            show.contains(&format!("  port {i}: p{i} (dummy)\n")),
            "{show}"
        );
    }
    assert_eq!(parse_show(&show).to_string(), show);

    let mut rng = TestRng::new(0xd9c7_1f00_5eed);
    let mix = PipelineMix::default();
    let mut n = Counts::default();
    let mut bad = Vec::new();
    let mut prev_ports: Option<Vec<PortCfg>> = None;
    for _ in 0..PIPELINES {
        let p = random_pipeline(&mut rng, &mix);
        let pkts = random_packets_for(&p, &mut rng, PACKETS);
        let Some(br) = our_bridge(&p.flows, &p.ports) else {
            continue;
        };
        if sb
            .load_pipeline(&p.flows, &p.ports, prev_ports.as_deref())
            .is_err()
        {
            continue;
        }
        prev_ports = Some(p.ports.clone());
        for pkt in &pkts {
            n.packets += 1;
            sb.dp_purge().expect("revalidator/purge");
            sb.dp_receive(pkt.in_port, &pkt.bytes)
                .expect("netdev-dummy/receive");
            // The first pass's flow: `recirc_id(0)` (metadata such as `ct_state(-trk)` or
            // `skb_mark(..)` may come before it).
            let first_pass = format!("recirc_id(0),in_port({}),", pkt.in_port);
            let Ok(line) = sb.dp_wait_flow(|l| l.contains(&first_pass), Duration::from_secs(2))
            else {
                eprintln!("no datapath flow for {} on port {}", pkt.kind, pkt.in_port);
                n.no_flow += 1;
                continue;
            };
            if !line.starts_with("recirc_id(") {
                n.metadata_first += 1;
            }
            let (ovs_key, ovs_actions) = match (
                line.split_once(", packets:"),
                line.rsplit_once(", actions:"),
            ) {
                (Some((k, _)), Some((_, a))) => (k.to_string(), a.to_string()),
                _ => panic!("unexpected dump line {line}"),
            };
            let mut key = FlowKey::ZERO;
            extract(&pkt.bytes, &PacketMeta::port(pkt.in_port), &mut key);

            // Formatter alone: OVS's own megaflow mask.
            let trace = sb.trace_full(pkt.in_port, &pkt.bytes).expect("trace");
            if let Some(st) = trace.stages.first()
                && let Ok(m) = flow::text::parse_match(&st.megaflow)
            {
                n.formatter_checked += 1;
                let mut mask = m.mask;
                if dpif_netdev_vlan_rule(&mut mask) {
                    n.vlan_rule_applied += 1;
                }
                let ours = key_text(&key, &mask);
                if ours == ovs_key {
                    n.formatter_equal += 1;
                } else {
                    let vline = sb
                        .dp_dump_flows(&["-m"])
                        .unwrap_or_default()
                        .into_iter()
                        .find(|l| l.contains(&format!("in_port(p{}),", pkt.in_port)))
                        .unwrap_or_default();
                    bad.push(format!(
                        "{} ({}), megaflow {}\n  ours {ours}\n  ovs  {ovs_key}\n  -m   {vline}",
                        pkt.kind, p.description, st.megaflow
                    ));
                }
            }

            // End to end: our translation's mask.
            let out = xlate(
                &br,
                &XlateIn {
                    side_effects: true,
                    ..XlateIn::new(key)
                },
            );
            if key_text(&key, &out.mask) == ovs_key {
                n.e2e_equal += 1;
            }
            let mut dp_mask = out.mask;
            dpif_netdev_vlan_rule(&mut dp_mask);
            let e2e = key_text(&key, &dp_mask);
            if e2e == ovs_key {
                n.e2e_vlan_rule_equal += 1;
            } else {
                eprintln!(
                    "end-to-end differs ({}):\n  ours {e2e}\n  ovs  {ovs_key}",
                    pkt.kind
                );
            }
            let f = DpFlow::new(Ufid(1), &key, &out.mask, 0);
            if key_text(&f.key, &f.mask) == ovs_key {
                n.dpflow_equal += 1;
            }
            let ours_actions = ofproto::format_odp_actions(&out.actions);
            if same_actions(&ours_actions, &ovs_actions, &key) {
                n.actions_equal += 1;
            } else {
                eprintln!("actions differ:\n  ours {ours_actions}\n  ovs  {ovs_actions}");
            }
        }
    }
    eprintln!(
        "dpctl vs OVS 3.1: {} packets, {} without a dumped flow; formatter (OVS mask) \
         {}/{} equal; end to end (our mask, packet key) {} equal ({} with the dpif-netdev VLAN rule); DpFlow (masked key) {} \
         equal; actions {} equal; {} with the dpif-netdev VLAN rule applied; {} lines with metadata \
         (ct_state, skb_mark, ...) before recirc_id",
        n.packets,
        n.no_flow,
        n.formatter_equal,
        n.formatter_checked,
        n.e2e_equal,
        n.e2e_vlan_rule_equal,
        n.dpflow_equal,
        n.actions_equal,
        n.vlan_rule_applied,
        n.metadata_first
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(
        n.formatter_checked >= n.packets / 2,
        "too few packets compared: {n:?}"
    );
}

/// What OVS 3.1's `dpif-netdev` does to every megaflow mask before installing it
/// (`handle_packet_upcall` and `dpif_netdev_flow_put`): "the Netlink encoding of datapath flow
/// keys cannot express wildcarding the presence of a VLAN tag", so an all-wildcarded outer TCI
/// becomes VID + CFI exact (`0x1fff`). `ofproto/trace`'s `Megaflow:` is printed before this;
/// the datapath flow (and its dump line) has it. Returns whether the mask changed.
fn dpif_netdev_vlan_rule(mask: &mut flow::FlowMask) -> bool {
    let tci = flow::FieldId::Vlan0Tci;
    if tci.get_mask(mask) == 0 {
        tci.set_mask(mask, 0x1fff);
        true
    } else {
        false
    }
}

/// Reads OVS's `dpctl/show` text into a [`DpShow`] (header, counters, `port N: name (type)`).
fn parse_show(text: &str) -> DpShow {
    let mut lines = text.lines();
    let name = lines
        .next()
        .and_then(|l| l.strip_suffix(':'))
        .unwrap_or_default()
        .to_string();
    let mut show = DpShow {
        name,
        hit: 0,
        missed: 0,
        lost: 0,
        flows: 0,
        ports: Vec::new(),
    };
    let num = |s: &str, k: &str| -> u64 {
        s.split(k)
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    for l in lines {
        let l = l.trim_start();
        if l.starts_with("lookups:") {
            show.hit = num(l, "hit:");
            show.missed = num(l, "missed:");
            show.lost = num(l, "lost:");
        } else if let Some(f) = l.strip_prefix("flows: ") {
            show.flows = f.parse().unwrap_or(u64::MAX);
        } else if let Some(rest) = l.strip_prefix("port ") {
            let (no, rest) = rest.split_once(": ").unwrap_or(("", rest));
            let (pname, kind) = match rest.split_once(" (") {
                Some((n, k)) => (n, k.trim_end_matches(')')),
                None => (rest, "system"),
            };
            show.ports.push(DpPortInfo {
                no: no.parse().unwrap_or(u32::MAX),
                name: pname.to_string(),
                kind: kind.to_string(),
                config: Vec::new(),
            });
        }
    }
    show
}
