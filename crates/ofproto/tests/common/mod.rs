//! Shared by the differential tests: comparing datapath actions by effect, counting megaflow
//! bits, and the soundness tests' `perturb`.
#![allow(dead_code)]

use flow::FlowKey;
use flow::field::{FRAG_LATER, FieldId, VLAN_CFI};
use flow::ofp::matching::{ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ipproto};
use testutil::pipelines::{canonical_datapath_actions, normalize_recirc_ids, split_top_level};
use testutil::rng::TestRng;

/// 1-bits of a printed megaflow, counted by parsing it with our match parser. Megaflows use
/// print-only syntax that `ovs-ofctl`'s match parser (and ours, which follows it) rejects:
/// the inner VLAN (`dl_vlan1`, `dl_vlan_pcp1`, `vlan_tci1`) and masked `icmp_type` /
/// `icmp_code`. Those pairs are counted here (a TCI as our key holds it: `dl_vlan` is VID and
/// CFI, `dl_vlan_pcp` PCP and CFI; ICMP type and code are 8-bit) and the rest is parsed.
pub fn megaflow_bits(s: &str) -> Option<u32> {
    let mut rest = Vec::new();
    let mut tci1: u16 = 0;
    let mut extra = 0;
    for pair in s.split(',') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let masked = |v: &str, width: u32| -> Option<u32> {
            let (_, m) = v.split_once('/')?;
            let m = u32::from_str_radix(m.trim_start_matches("0x"), 16).ok()?;
            Some((m & ((1 << width) - 1)).count_ones())
        };
        match k.trim() {
            "dl_vlan1" => tci1 |= 0x1fff,
            "dl_vlan_pcp1" => tci1 |= 0xf000,
            "vlan_tci1" => {
                let m = match v.split_once('/') {
                    Some((_, m)) => u16::from_str_radix(m.trim_start_matches("0x"), 16).ok()?,
                    None => 0xffff,
                };
                tci1 |= m;
            }
            "icmp_type" | "icmp_code" if v.contains('/') => extra += masked(v, 8)?,
            // Datapath metadata our flow key does not have (`set_queue`): counted as OVS's.
            "skb_priority" => {
                extra += match v.split_once('/') {
                    Some((_, m)) => u32::from_str_radix(m.trim_start_matches("0x"), 16)
                        .ok()?
                        .count_ones(),
                    None => 32,
                }
            }
            _ => rest.push(pair),
        }
    }
    let m = flow::text::parse_match(&rest.join(",")).ok()?;
    Some(m.mask.count_ones() + tci1.count_ones() + extra)
}

/// Datapath actions compared as what they do: recirculation ids renumbered, and every output
/// described by (port, VLAN stack at that point, header fields set so far), outputs between
/// two barriers (`ct`, `recirc`, `userspace`, ...) sorted, since OVS floods in an order that
/// changes between runs. Falls back to `testutil`'s canonical form for the set fields.
pub fn effect(actions: &str, key: &FlowKey) -> Vec<String> {
    let mut norm = normalize_recirc_ids(&[actions]).remove(0);
    // Controller continuations carry a daemon-global recirculation id in decimal.
    while let Some(i) = norm
        .find("recirc_id=")
        .filter(|i| norm[i + 10..].starts_with(|c: char| c.is_ascii_digit()))
    {
        let end = norm[i + 10..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(norm.len(), |e| i + 10 + e);
        norm.replace_range(i + 10..end, "N");
    }
    // The packet's own tags, inner first, written as `push_vlan` would print them.
    let mut stack: Vec<String> = Vec::new();
    for (tp, tc) in [
        (flow::FieldId::Vlan1Tpid, flow::FieldId::Vlan1Tci),
        (flow::FieldId::Vlan0Tpid, flow::FieldId::Vlan0Tci),
    ] {
        let (tpid, tci) = (tp.get(key) as u16, tc.get(key) as u16);
        if tci & 0x1000 != 0 {
            let t = if tpid == 0x8100 {
                String::new()
            } else {
                format!("tpid={tpid:#06x},")
            };
            stack.push(format!("{t}vid={},pcp={}", tci & 0xfff, tci >> 13));
        }
    }

    let mut sets: std::collections::BTreeMap<String, String> = Default::default();
    let mut seg: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for tok in split_top_level(norm.trim()) {
        let tok = tok.trim();
        if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) {
            seg.push(format!("{tok}{{{};{:?}}}", stack.join("/"), sets));
        } else if let Some(inner) = tok.strip_prefix("push_vlan(") {
            stack.push(inner.trim_end_matches(')').to_string());
        } else if tok == "pop_vlan" {
            stack.pop();
        } else if let Some(inner) = tok.strip_prefix("set(").and_then(|t| t.strip_suffix(')')) {
            let (hdr, fields) = match inner.split_once('(') {
                Some((h, f)) => (h, f.strip_suffix(')').unwrap_or(f)),
                None => (inner, ""),
            };
            for f in split_top_level(fields) {
                let (k, v) = f.split_once('=').unwrap_or((f, ""));
                sets.insert(format!("{hdr}.{k}"), v.to_string());
            }
        } else {
            seg.sort();
            out.append(&mut seg);
            out.push(tok.to_string());
        }
    }
    seg.sort();
    out.append(&mut seg);
    out
}

pub fn same_actions(a: &str, b: &str, key: &FlowKey) -> bool {
    effect(a, key) == effect(b, key)
        || canonical_datapath_actions(&normalize_recirc_ids(&[a])[0])
            == canonical_datapath_actions(&normalize_recirc_ids(&[b])[0])
}

/// `p` with header bits outside `mask` re-drawn, keeping `q` a packet `extract` could produce.
pub fn perturb(p: &FlowKey, mask: &flow::FlowMask, rng: &mut TestRng) -> FlowKey {
    let mut q = *p;
    let dl = FieldId::DlType.get(p) as u16;
    let proto = FieldId::NwProto.get(p) as u8;
    let later = FieldId::NwFrag.get(p) as u8 & FRAG_LATER != 0;
    let mut fields: Vec<(FieldId, u128)> = vec![
        (FieldId::DlSrc, 0xffff_ffff_ffff),
        (FieldId::DlDst, 0xffff_ffff_ffff),
    ];
    if FieldId::Vlan0Tci.get(p) as u16 & VLAN_CFI != 0 {
        fields.push((FieldId::Vlan0Tci, 0xefff));
    }
    if FieldId::Vlan1Tci.get(p) as u16 & VLAN_CFI != 0 {
        fields.push((FieldId::Vlan1Tci, 0xefff));
    }
    match dl {
        ETH_TYPE_IP | ETH_TYPE_IPV6 => {
            if dl == ETH_TYPE_IP {
                fields.push((FieldId::NwSrc, 0xffff_ffff));
                fields.push((FieldId::NwDst, 0xffff_ffff));
            } else {
                fields.push((FieldId::Ipv6Src, u128::MAX));
                fields.push((FieldId::Ipv6Dst, u128::MAX));
                fields.push((FieldId::Ipv6Label, 0xfffff));
            }
            fields.push((FieldId::NwTos, 0xff));
            fields.push((FieldId::NwTtl, 0xff));
            if !later {
                match proto {
                    ipproto::TCP | ipproto::UDP | ipproto::SCTP => {
                        fields.push((FieldId::TpSrc, 0xffff));
                        fields.push((FieldId::TpDst, 0xffff));
                    }
                    ipproto::ICMP => {
                        fields.push((FieldId::TpSrc, 0xff));
                        fields.push((FieldId::TpDst, 0xff));
                    }
                    _ => {}
                }
                if proto == ipproto::TCP {
                    fields.push((FieldId::TcpFlags, 0x0fff));
                }
            }
        }
        ETH_TYPE_ARP => {
            fields.push((FieldId::NwSrc, 0xffff_ffff));
            fields.push((FieldId::NwDst, 0xffff_ffff));
            fields.push((FieldId::ArpSha, 0xffff_ffff_ffff));
            fields.push((FieldId::ArpTha, 0xffff_ffff_ffff));
        }
        _ => {}
    }
    for (f, domain) in fields {
        let r = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) & domain;
        let m = f.get_mask(mask);
        let v = (f.get(p) & m) | (r & !m & domain) | (f.get(p) & !domain);
        f.set(&mut q, v);
    }
    q
}

/// Invariant 1 on `keys` through `br`: for each packet p, every packet q equal to p under
/// p's megaflow (`perturb`, 8 draws) gets p's actions and error; p then learns (side effects
/// on), as the datapath would, before the next packet.
pub fn check_sound(
    br: &ofproto::Bridge,
    keys: &[FlowKey],
    seed: u64,
) -> Result<(), proptest::test_runner::TestCaseError> {
    check_sound_by(br, keys, seed, |a, b, _| a == b)
}

/// [`check_sound`] with the comparison of q's actions `a` and p's `b` given (q's key third).
pub fn check_sound_by(
    br: &ofproto::Bridge,
    keys: &[FlowKey],
    seed: u64,
    same: impl Fn(&[ofproto::odp::OdpAction], &[ofproto::odp::OdpAction], &FlowKey) -> bool,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use ofproto::{XlateIn, xlate, xlate_ro};
    use proptest::{prop_assert, prop_assert_eq};
    let mut rng = TestRng::new(seed ^ 0x5eed);
    for (i, p) in keys.iter().enumerate() {
        let out = xlate_ro(br, &XlateIn::new(*p));
        for _ in 0..8 {
            let q = perturb(p, &out.mask, &mut rng);
            prop_assert!(p.eq_masked(&q, &out.mask));
            let oq = xlate_ro(br, &XlateIn::new(q));
            prop_assert!(
                same(&oq.actions, &out.actions, &q),
                "seed {:#x} packet {}: q equal to p under the megaflow got other actions\n p={:?}\n q={:?}\n megaflow={}\n q's: {}\n p's: {}",
                seed,
                i,
                p,
                q,
                ofproto::trace::format_megaflow(p, &out),
                ofproto::format_odp_actions(&oq.actions),
                ofproto::format_odp_actions(&out.actions)
            );
            prop_assert_eq!(oq.error, out.error);
        }
        // Learn from this packet, as the datapath would, before the next one.
        let mut input = XlateIn::new(*p);
        input.side_effects = true;
        xlate(br, &input);
    }
    Ok(())
}

/// The bridge of pipeline `p` (ports configured, every flow that parses added), keys of 8
/// random packets per port for it, and how many of the rules at priorities 301..=399 (the
/// ones `pipelines_ext` and `pipelines_lb` add) were accepted, of how many.
pub fn bridge_for(
    p: &testutil::pipelines::Pipeline,
    mix: &testutil::pipelines::PipelineMix,
    rng: &mut TestRng,
    backend: ofproto::Backend,
) -> (ofproto::Bridge, Vec<FlowKey>, usize, usize) {
    use flow::extract::{PacketMeta, extract};
    use ofproto::{Bridge, FlowMod, FlowModCommand, VlanMode};
    use testutil::pipelines::{flow_protocol, random_packets_for};
    let packets = random_packets_for(p, rng, 8);
    let mut br = Bridge::ovs_sandbox(mix.n_ports as u16, backend);
    for c in &p.ports {
        let trunks = (!c.trunks.is_empty()).then(|| c.trunks.clone());
        br.set_port_vlan(
            flow::ofp::OfPort(c.port as u16),
            VlanMode::from_ovs(c.tag, trunks, c.vlan_mode.map(|m| m.as_str())),
        );
    }
    let (mut ext_ok, mut ext_total) = (0, 0);
    for f in &p.flows {
        let d = if flow_protocol(f) == "OpenFlow13" {
            flow::text::Dialect::OpenFlow13
        } else {
            flow::text::Dialect::OpenFlow10
        };
        // The added rules are the ones at priorities 301..=399 (see `pipelines_ext`).
        let prio = f
            .split(',')
            .find_map(|kv| kv.strip_prefix("priority="))
            .and_then(|v| v.parse::<u32>().ok());
        let ext = prio.is_some_and(|p| (301..=399).contains(&p));
        ext_total += usize::from(ext);
        if let Ok(spec) = flow::text::parse_flow_with(f, d) {
            let added = br.flow_mod(
                &FlowMod {
                    command: FlowModCommand::Add,
                    spec,
                    reset_counts: false,
                },
                0,
            );
            ext_ok += usize::from(ext && added.is_ok());
        }
    }
    let keys = packets
        .iter()
        .map(|pk| {
            let mut k = FlowKey::ZERO;
            extract(&pk.bytes, &PacketMeta::port(pk.in_port), &mut k);
            k
        })
        .collect();
    (br, keys, ext_ok, ext_total)
}

/// Our trace tree against OVS's for one packet (`ofproto/trace` from the bridge line to the
/// line before `Final flow:`): `None` when they are equal, else both, for a failure message.
pub fn trace_tree_diff(
    sb: &testutil::ovs::OvsSandbox,
    br: &ofproto::Bridge,
    in_port: u32,
    pkt: &[u8],
) -> Option<String> {
    let tree = |raw: &str| -> String {
        let start = raw.find("bridge(\"br0\")").unwrap_or(0);
        let end = raw.find("\nFinal flow:").unwrap_or(raw.len());
        raw[start..end].trim_end().to_string()
    };
    let t = sb.trace_full(in_port, pkt).expect("ovs trace");
    let mut key = FlowKey::ZERO;
    flow::extract::extract(pkt, &flow::extract::PacketMeta::port(in_port), &mut key);
    let out = ofproto::xlate(
        br,
        &ofproto::XlateIn {
            trace: true,
            ..ofproto::XlateIn::new(key)
        },
    );
    let ours = tree(&ofproto::trace::format_trace(&key, &out));
    let ovs = tree(&t.raw);
    (ours != ovs).then(|| format!("in_port {in_port}:\n--- ours\n{ours}\n--- ovs\n{ovs}"))
}

/// Adds flow text `f` (parsed in `dialect`) to `br`; a refusal is a test failure.
pub fn add_flow(br: &mut ofproto::Bridge, f: &str, dialect: flow::text::Dialect) {
    let spec = flow::text::parse_flow_with(f, dialect).unwrap_or_else(|e| panic!("{f}: {e}"));
    br.flow_mod(
        &ofproto::FlowMod {
            command: ofproto::FlowModCommand::Add,
            spec,
            reset_counts: false,
        },
        0,
    )
    .unwrap_or_else(|e| panic!("{f}: {e}"));
}
