//! Shared by the differential tests: comparing datapath actions by effect, counting megaflow
//! bits.
#![allow(dead_code)]

use flow::FlowKey;
use testutil::pipelines::{canonical_datapath_actions, normalize_recirc_ids, split_top_level};

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
