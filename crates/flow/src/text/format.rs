//! Printer: matches, actions and flow mods in `ovs-ofctl` syntax (OVS `match_format`,
//! `ofpacts_format`, `ofputil_flow_mod_format`).
//!
//! Printing is a pure function of the value; to get exactly what `ovs-ofctl parse-flow` prints,
//! print a value that went through [`super::canon`] (the parser does that).

use std::fmt::Write as _;

use crate::field::{FieldId, VLAN_CFI};
use crate::ofp::action::{Action, Ct, CtZone, Nat, NatKind, NatRange, PacketInReason, Subfield};
use crate::ofp::fields::{Mf, MfFormat};
use crate::ofp::matching::{
    ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_RARP, Match, ipproto,
};
use crate::ofp::{DEFAULT_PRIORITY, FlowSpec, OfPort};
use crate::text::value::*;

/// C `%#x`: `0` for zero, else `0x…`.
pub(crate) fn hash_x(out: &mut String, v: u128) {
    if v == 0 {
        out.push('0');
    } else {
        let _ = write!(out, "0x{v:x}");
    }
}

/// OVS `ds_put_hex` of a big-endian value (`0` for zero, else `0x…`).
pub(crate) fn put_hex(out: &mut String, v: u128) {
    hash_x(out, v);
}

fn uint32_masked(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        hash_x(out, v);
        if m != 0xffff_ffff {
            out.push('/');
            hash_x(out, m);
        }
        out.push(',');
    }
}

fn be64_masked(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        hash_x(out, v);
        if m != u128::from(u64::MAX) {
            out.push('/');
            hash_x(out, m);
        }
        out.push(',');
    }
}

fn u16_masked(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        if m == 0xffff {
            let _ = write!(out, "{name}={v},");
        } else {
            let _ = write!(out, "{name}=0x{v:x}/0x{m:x},");
        }
    }
}

fn eth_masked(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        fmt_eth(out, v as u64, Some(m as u64));
        out.push(',');
    }
}

fn ip_masked(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        fmt_ipv4_masked(out, v as u32, m as u32);
        out.push(',');
    }
}

fn ipv6_masked(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        fmt_ipv6_masked(out, v, m);
        out.push(',');
    }
}

/// OVS `match_format` with `priority` (printed first when not the default).
pub fn format_match_priority(m: &Match, priority: u16) -> String {
    let mut s = String::new();
    let g = |f: FieldId| (m.value(f), m.mask_of(f));
    if priority != DEFAULT_PRIORITY {
        let _ = write!(s, "priority={priority},");
    }
    let (v, k) = g(FieldId::PktMark);
    uint32_masked(&mut s, "pkt_mark", v, k);
    let (v, k) = g(FieldId::RecircId);
    uint32_masked(&mut s, "recirc_id", v, k);
    let (v, k) = g(FieldId::DpHash);
    uint32_masked(&mut s, "dp_hash", v, k);
    if g(FieldId::ConjId).1 != 0 {
        let _ = write!(s, "conj_id={},", g(FieldId::ConjId).0);
    }
    let (v, k) = g(FieldId::CtState);
    if k != 0 {
        s.push_str("ct_state=");
        if k & 0xff == 0xff {
            fmt_flags(&mut s, ct_state_name, v as u32);
        } else {
            fmt_flags_masked(&mut s, ct_state_name, v as u32, k as u32, 0xff);
        }
        s.push(',');
    }
    let (v, k) = g(FieldId::CtZone);
    u16_masked(&mut s, "ct_zone", v, k);
    let (v, k) = g(FieldId::CtMark);
    uint32_masked(&mut s, "ct_mark", v, k);
    let (v, k) = g(FieldId::CtLabel);
    if k != 0 {
        s.push_str("ct_label=");
        put_hex(&mut s, v);
        if k != u128::MAX {
            s.push('/');
            put_hex(&mut s, k);
        }
        s.push(',');
    }
    let (v, k) = g(FieldId::CtNwSrc);
    ip_masked(&mut s, "ct_nw_src", v, k);
    let (v, k) = g(FieldId::CtNwDst);
    ip_masked(&mut s, "ct_nw_dst", v, k);
    let (v, k) = g(FieldId::CtNwProto);
    if k != 0 {
        let _ = write!(s, "ct_nw_proto={v},");
        let (v, k) = g(FieldId::CtTpSrc);
        u16_masked(&mut s, "ct_tp_src", v, k);
        let (v, k) = g(FieldId::CtTpDst);
        u16_masked(&mut s, "ct_tp_dst", v, k);
    }
    // OVS prints the (default, Ethernet) packet type only for megaflow-like matches, i.e. with
    // recirc_id; the packet type is set whenever a field of layer 2 or above is matched.
    if m.mask_of(FieldId::RecircId) != 0
        && (crate::key::w::DL_DST_TYPE..=crate::key::w::TP).any(|i| m.mask.w[i] != 0)
    {
        s.push_str("eth,");
    }
    let dl = m.dl_type();
    let proto = m.nw_proto();
    let proto_m = m.mask_of(FieldId::NwProto) != 0;
    let mut skip_type = false;
    let mut skip_proto = false;
    if m.mask_of(FieldId::DlType) != 0 {
        skip_type = true;
        let name = match dl {
            ETH_TYPE_IP => Some(match (proto_m, proto) {
                (true, ipproto::ICMP) => "icmp",
                (true, ipproto::TCP) => "tcp",
                (true, ipproto::UDP) => "udp",
                (true, ipproto::SCTP) => "sctp",
                _ => "ip",
            }),
            ETH_TYPE_IPV6 => Some(match (proto_m, proto) {
                (true, ipproto::ICMPV6) => "icmp6",
                (true, ipproto::TCP) => "tcp6",
                (true, ipproto::UDP) => "udp6",
                (true, ipproto::SCTP) => "sctp6",
                _ => "ipv6",
            }),
            ETH_TYPE_ARP => Some("arp"),
            ETH_TYPE_RARP => Some("rarp"),
            0x8847 => Some("mpls"),
            0x8848 => Some("mplsm"),
            _ => None,
        };
        match name {
            Some(n) => {
                skip_proto =
                    proto_m && !matches!(n, "ip" | "ipv6" | "arp" | "rarp" | "mpls" | "mplsm");
                s.push_str(n);
                s.push(',');
            }
            None => skip_type = false,
        }
    }
    for i in 0..16 {
        if let Some(r) = Mf::reg(i) {
            let (v, k) = m.get_field(r);
            uint32_masked(&mut s, &format!("reg{i}"), v, k);
        }
    }
    let (v, k) = g(FieldId::Metadata);
    be64_masked(&mut s, "metadata", v, k);
    let (v, k) = g(FieldId::InPort);
    if k != 0 {
        let _ = write!(s, "in_port={},", OfPort(v as u16));
    }
    for (i, f) in [FieldId::Vlan0Tci, FieldId::Vlan1Tci]
        .into_iter()
        .enumerate()
    {
        let (v, k) = g(f);
        let (v, k) = (v as u16, k as u16);
        if k == 0 {
            break;
        }
        let sfx = if i == 0 { String::new() } else { i.to_string() };
        let vid_m = k & 0x0fff;
        let pcp_m = k & 0xe000;
        let cfi = k & VLAN_CFI;
        if cfi != 0
            && v & VLAN_CFI != 0
            && (vid_m == 0 || vid_m == 0x0fff)
            && (pcp_m == 0 || pcp_m == 0xe000)
            && (vid_m != 0 || pcp_m != 0)
        {
            if vid_m != 0 {
                let _ = write!(s, "dl_vlan{sfx}={},", v & 0x0fff);
            }
            if pcp_m != 0 {
                let _ = write!(s, "dl_vlan_pcp{sfx}={},", v >> 13);
            }
        } else if k == 0xffff {
            let _ = write!(s, "vlan_tci{sfx}=0x{v:04x},");
        } else {
            let _ = write!(s, "vlan_tci{sfx}=0x{v:04x}/0x{k:04x},");
        }
    }
    let (v, k) = g(FieldId::DlSrc);
    eth_masked(&mut s, "dl_src", v, k);
    let (v, k) = g(FieldId::DlDst);
    eth_masked(&mut s, "dl_dst", v, k);
    if !skip_type && m.mask_of(FieldId::DlType) != 0 {
        let _ = write!(s, "dl_type=0x{dl:04x},");
    }
    let arp = dl == ETH_TYPE_ARP || dl == ETH_TYPE_RARP;
    if dl == ETH_TYPE_IPV6 {
        let (v, k) = g(FieldId::Ipv6Src);
        ipv6_masked(&mut s, "ipv6_src", v, k);
        let (v, k) = g(FieldId::Ipv6Dst);
        ipv6_masked(&mut s, "ipv6_dst", v, k);
        let (v, k) = g(FieldId::Ipv6Label);
        if k != 0 {
            if k == 0xffff_ffff {
                let _ = write!(s, "ipv6_label=0x{v:05x},");
            } else {
                let _ = write!(s, "ipv6_label=0x{v:05x}/0x{k:05x},");
            }
        }
    } else if arp {
        let (v, k) = g(FieldId::NwSrc);
        ip_masked(&mut s, "arp_spa", v, k);
        let (v, k) = g(FieldId::NwDst);
        ip_masked(&mut s, "arp_tpa", v, k);
    } else {
        let (v, k) = g(FieldId::NwSrc);
        ip_masked(&mut s, "nw_src", v, k);
        let (v, k) = g(FieldId::NwDst);
        ip_masked(&mut s, "nw_dst", v, k);
    }
    if !skip_proto && proto_m {
        let _ = write!(s, "{}={proto},", if arp { "arp_op" } else { "nw_proto" });
    }
    if arp {
        let (v, k) = g(FieldId::ArpSha);
        eth_masked(&mut s, "arp_sha", v, k);
        let (v, k) = g(FieldId::ArpTha);
        eth_masked(&mut s, "arp_tha", v, k);
    }
    let (tos, tos_m) = g(FieldId::NwTos);
    if tos_m & 0xfc != 0 {
        let _ = write!(s, "nw_tos={},", tos & 0xfc);
    }
    if tos_m & 0x03 != 0 {
        let _ = write!(s, "nw_ecn={},", tos & 0x03);
    }
    let (v, k) = g(FieldId::NwTtl);
    if k != 0 {
        let _ = write!(s, "nw_ttl={v},");
    }
    let (fv, fm) = g(FieldId::NwFrag);
    match fm & 3 {
        3 => {
            let n = match fv & 3 {
                0 => "no",
                1 => "first",
                3 => "later",
                _ => "<error>",
            };
            let _ = write!(s, "nw_frag={n},");
        }
        1 => {
            let _ = write!(s, "nw_frag={},", if fv & 1 != 0 { "yes" } else { "no" });
        }
        2 => {
            let _ = write!(
                s,
                "nw_frag={},",
                if fv & 2 != 0 { "later" } else { "not_later" }
            );
        }
        _ => {}
    }
    let (tsv, tsm) = g(FieldId::TpSrc);
    let (tdv, tdm) = g(FieldId::TpDst);
    if dl == ETH_TYPE_IP && proto == ipproto::ICMP {
        u16_masked(&mut s, "icmp_type", tsv, tsm);
        u16_masked(&mut s, "icmp_code", tdv, tdm);
    } else if dl == ETH_TYPE_IPV6 && proto == ipproto::ICMPV6 {
        u16_masked(&mut s, "icmp_type", tsv, tsm);
        u16_masked(&mut s, "icmp_code", tdv, tdm);
        let (v, k) = g(FieldId::NdTarget);
        ipv6_masked(&mut s, "nd_target", v, k);
        let (v, k) = g(FieldId::ArpSha);
        eth_masked(&mut s, "nd_sll", v, k);
        let (v, k) = g(FieldId::ArpTha);
        eth_masked(&mut s, "nd_tll", v, k);
    } else {
        u16_masked(&mut s, "tp_src", tsv, tsm);
        u16_masked(&mut s, "tp_dst", tdv, tdm);
    }
    let (v, k) = g(FieldId::TcpFlags);
    if m.is_ip_any() && proto == ipproto::TCP && k != 0 {
        s.push_str("tcp_flags=");
        fmt_flags_masked(&mut s, tcp_flag_name, v as u32, (k & 0x0fff) as u32, 0x0fff);
        s.push(',');
    }
    if s.ends_with(',') {
        s.pop();
    }
    s
}

/// A subfield as `mf_format_subfield` prints it.
pub fn format_subfield(out: &mut String, sf: &Subfield) {
    out.push_str(sf.field.subfield_name());
    if sf.is_whole() {
        out.push_str("[]");
    } else if sf.n_bits == 1 {
        let _ = write!(out, "[{}]", sf.ofs);
    } else {
        let _ = write!(out, "[{}..{}]", sf.ofs, sf.ofs + sf.n_bits - 1);
    }
}

/// A field value as `mf_format` prints it (`mask` all ones of the byte width = exact).
pub fn format_mf_value(out: &mut String, mf: Mf, value: u128, mask: u128) {
    let exact = mask == mf.byte_max();
    if mask == 0 {
        out.push_str("ANY");
        return;
    }
    match mf.def().format {
        MfFormat::OfpPort if exact => {
            let _ = write!(out, "{}", OfPort(value as u16));
        }
        MfFormat::OfpPortOxm if exact => match OfPort::from_ofp11(value as u32) {
            Some(p) => {
                let _ = write!(out, "{p}");
            }
            None => {
                let _ = write!(out, "{value}");
            }
        },
        MfFormat::Decimal | MfFormat::OfpPort | MfFormat::OfpPortOxm => {
            let _ = write!(out, "{value}");
            if !exact {
                out.push('/');
                put_hex(out, mask);
            }
        }
        MfFormat::Hex => {
            put_hex(out, value);
            if !exact {
                out.push('/');
                put_hex(out, mask);
            }
        }
        MfFormat::Ethernet => fmt_eth(out, value as u64, Some(mask as u64)),
        MfFormat::Ipv4 => fmt_ipv4_masked(out, value as u32, mask as u32),
        MfFormat::Ipv6 => fmt_ipv6_masked(out, value, mask),
        MfFormat::CtState => {
            fmt_flags_masked(out, ct_state_name, value as u32, mask as u32, u32::MAX)
        }
        MfFormat::TcpFlags => {
            fmt_flags_masked(out, tcp_flag_name, value as u32, mask as u32, 0xffff)
        }
        MfFormat::Frag => {
            let n = match (mask & 3, value & 3) {
                (3, 0) => "no",
                (3, 1) => "first",
                (3, 3) => "later",
                (1, 0) => "no",
                (1, 1) => "yes",
                (2, 0) => "not_later",
                (2, 2) => "later",
                _ => "<error>",
            };
            out.push_str(n);
        }
    }
}

pub(crate) fn format_port(out: &mut String, p: OfPort) {
    let _ = write!(out, "{p}");
}

fn format_nat(out: &mut String, n: &Nat) {
    out.push_str("nat");
    let Some(kind) = n.kind else {
        return;
    };
    out.push('(');
    out.push_str(if kind == NatKind::Src { "src" } else { "dst" });
    if let Some(r) = n.range {
        out.push('=');
        match r {
            NatRange::V4 { min, max } => {
                fmt_ipv4(out, min);
                if max != 0 && max != min {
                    out.push('-');
                    fmt_ipv4(out, max);
                }
            }
            NatRange::V6 { min, max } => {
                let br = n.ports.0 != 0;
                let put = |out: &mut String, a: u128| {
                    if br {
                        out.push('[');
                    }
                    fmt_ipv6(out, a);
                    if br {
                        out.push(']');
                    }
                };
                put(out, min);
                if max != 0 && max != min {
                    out.push('-');
                    put(out, max);
                }
            }
        }
        if n.ports.0 != 0 {
            let _ = write!(out, ":{}", n.ports.0);
            if n.ports.1 != 0 && n.ports.1 != n.ports.0 {
                let _ = write!(out, "-{}", n.ports.1);
            }
        }
        out.push(',');
        if n.persistent {
            out.push_str("persistent,");
        }
        if n.hash {
            out.push_str("hash,");
        }
        if n.random {
            out.push_str("random,");
        }
    }
    if out.ends_with(',') {
        out.pop();
    }
    out.push(')');
}

fn format_ct(out: &mut String, ct: &Ct) {
    out.push_str("ct(");
    if ct.commit {
        out.push_str("commit,");
    }
    if ct.force {
        out.push_str("force,");
    }
    if let Some(t) = ct.table {
        let _ = write!(out, "table={t},");
    }
    match &ct.zone {
        CtZone::Field(sf) => {
            out.push_str("zone=");
            format_subfield(out, sf);
            out.push(',');
        }
        CtZone::Imm(0) => {}
        CtZone::Imm(z) => {
            let _ = write!(out, "zone={z},");
        }
    }
    if let Some(n) = &ct.nat {
        format_nat(out, n);
        out.push(',');
    }
    if !ct.exec.is_empty() {
        out.push_str("exec(");
        format_actions_into(out, &ct.exec);
        out.push_str("),");
    }
    match ct.alg {
        Some(21) => out.push_str("alg=ftp,"),
        Some(69) => out.push_str("alg=tftp,"),
        Some(0) | None => {}
        Some(p) => {
            let _ = write!(out, "alg={p},");
        }
    }
    if out.ends_with(',') {
        out.pop();
    }
    out.push(')');
}

fn format_action(out: &mut String, a: &Action) {
    if super::actions_ext::format_ext(out, a) {
        return;
    }
    if super::lb::format_lb(out, a) {
        return;
    }
    match a {
        Action::Output { port, max_len } => {
            if port.0 < OfPort::MAX.0 {
                out.push_str("output:");
            }
            format_port(out, *port);
            if *port == OfPort::CONTROLLER {
                let _ = write!(out, ":{max_len}");
            }
        }
        Action::OutputTrunc { port, max_len } => {
            let _ = write!(out, "output(port={port},max_len={max_len})");
        }
        Action::OutputReg { src } => {
            out.push_str("output:");
            format_subfield(out, src);
        }
        Action::Controller {
            max_len,
            reason,
            id,
            userdata,
            pause,
        } => {
            out.push_str("controller(");
            if *reason != PacketInReason::Action {
                let _ = write!(out, "reason={},", reason.name());
            }
            if *max_len != u16::MAX {
                let _ = write!(out, "max_len={max_len},");
            }
            if *id != 0 {
                let _ = write!(out, "id={id},");
            }
            if !userdata.is_empty() {
                out.push_str("userdata=");
                format_hex_dotted(out, userdata);
                out.push(',');
            }
            if *pause {
                out.push_str("pause,");
            }
            if out.ends_with(',') {
                out.pop();
            }
            out.push(')');
        }
        Action::Resubmit { port, table, ct } => {
            if port.is_some() && table.is_none() && !ct {
                out.push_str("resubmit:");
                format_port(out, port.unwrap_or(OfPort::IN_PORT));
            } else {
                out.push_str("resubmit(");
                if let Some(p) = port {
                    format_port(out, *p);
                }
                out.push(',');
                if let Some(t) = table {
                    let _ = write!(out, "{t}");
                }
                if *ct {
                    out.push_str(",ct");
                }
                out.push(')');
            }
        }
        Action::GotoTable(t) => {
            let _ = write!(out, "goto_table:{t}");
        }
        Action::SetField { field, value, mask } => {
            out.push_str("set_field:");
            format_mf_value(out, *field, *value, *mask);
            let _ = write!(out, "->{}", field.def().name);
        }
        Action::Load { value, dst } => {
            out.push_str("load:");
            hash_x(out, *value);
            out.push_str("->");
            format_subfield(out, dst);
        }
        Action::Move { src, dst } => {
            out.push_str("move:");
            format_subfield(out, src);
            out.push_str("->");
            format_subfield(out, dst);
        }
        Action::ModDlSrc(m) | Action::ModDlDst(m) => {
            out.push_str(if matches!(a, Action::ModDlSrc(_)) {
                "mod_dl_src:"
            } else {
                "mod_dl_dst:"
            });
            fmt_eth(out, *m, None);
        }
        Action::ModNwSrc(ip) | Action::ModNwDst(ip) => {
            out.push_str(if matches!(a, Action::ModNwSrc(_)) {
                "mod_nw_src:"
            } else {
                "mod_nw_dst:"
            });
            fmt_ipv4(out, *ip);
        }
        Action::ModNwTos(t) => {
            let _ = write!(out, "mod_nw_tos:{t}");
        }
        Action::ModTpSrc(p) => {
            let _ = write!(out, "mod_tp_src:{p}");
        }
        Action::ModTpDst(p) => {
            let _ = write!(out, "mod_tp_dst:{p}");
        }
        Action::ModVlanVid {
            vid,
            push_if_needed,
        } => {
            let n = if *push_if_needed {
                "mod_vlan_vid"
            } else {
                "set_vlan_vid"
            };
            let _ = write!(out, "{n}:{vid}");
        }
        Action::ModVlanPcp {
            pcp,
            push_if_needed,
        } => {
            let n = if *push_if_needed {
                "mod_vlan_pcp"
            } else {
                "set_vlan_pcp"
            };
            let _ = write!(out, "{n}:{pcp}");
        }
        Action::StripVlan => out.push_str("strip_vlan"),
        Action::PopVlan => out.push_str("pop_vlan"),
        Action::PushVlan(t) => {
            out.push_str("push_vlan:");
            hash_x(out, u128::from(*t));
        }
        Action::DecTtl(ids) => {
            out.push_str("dec_ttl");
            if !ids.is_empty() {
                out.push('(');
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{id}");
                }
                out.push(')');
            }
        }
        Action::Ct(ct) => format_ct(out, ct),
        Action::CtClear => out.push_str("ct_clear"),
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => {
            let _ = write!(
                out,
                "conjunction({id},{}/{n_clauses})",
                u32::from(*clause) + 1
            );
        }
        Action::Group(g) => {
            let _ = write!(out, "group:{g}");
        }
        Action::UnrollXlate { table, cookie } => {
            let _ = write!(out, "unroll_xlate(table={table}, cookie={cookie})");
        }
        Action::Note(b) => {
            out.push_str("note:");
            format_hex_dotted(out, b);
        }
        // Printed by `actions_ext::format_ext` above.
        Action::WriteMetadata { .. } | Action::ModNwTtl(_) | Action::Exit | Action::Clone(_) => {}
        Action::WriteActions(_)
        | Action::ClearActions
        | Action::SetQueue(_)
        | Action::Enqueue { .. }
        | Action::PopQueue => {}
        // Printed by `lb::format_lb` above.
        Action::Multipath(_)
        | Action::Bundle(_)
        | Action::Sample(_)
        | Action::CheckPktLarger { .. } => {}
    }
}

fn format_actions_into(out: &mut String, actions: &[Action]) {
    if actions.is_empty() {
        out.push_str("drop");
        return;
    }
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        format_action(out, a);
    }
}

/// An action list as `ofpacts_format` prints it (`drop` when empty).
pub fn format_actions(actions: &[Action]) -> String {
    let mut s = String::new();
    format_actions_into(&mut s, actions);
    s
}

impl core::fmt::Display for Action {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut s = String::new();
        format_action(&mut s, self);
        f.write_str(&s)
    }
}

impl core::fmt::Display for Match {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&format_match_priority(self, DEFAULT_PRIORITY))
    }
}

impl core::fmt::Display for FlowSpec {
    /// What `ovs-ofctl parse-flow` prints after `ADD ` (OVS `ofputil_flow_mod_format`).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut s = String::new();
        if let Some(t) = self.table.filter(|t| *t != 0) {
            let _ = write!(s, "table:{t} ");
        }
        let m = format_match_priority(&self.match_, self.priority);
        if !m.is_empty() {
            s.push_str(&m);
            s.push(' ');
        }
        if self.cookie != 0 && self.cookie != u64::MAX {
            let _ = write!(s, "cookie:0x{:x} ", self.cookie);
        }
        if self.cookie_mask != 0 {
            let _ = write!(s, "cookie:0x{:x}/0x{:x} ", self.cookie, self.cookie_mask);
        }
        if self.idle_timeout != 0 {
            let _ = write!(s, "idle:{} ", self.idle_timeout);
        }
        if self.hard_timeout != 0 {
            let _ = write!(s, "hard:{} ", self.hard_timeout);
        }
        if self.importance != 0 {
            let _ = write!(s, "importance:{} ", self.importance);
        }
        if let Some(p) = self.out_port.filter(|p| *p != OfPort::ANY) {
            let _ = write!(s, "out_port:{p} ");
        }
        if self.send_flow_rem {
            s.push_str("send_flow_rem ");
        }
        if self.check_overlap {
            s.push_str("check_overlap ");
        }
        s.push_str("actions=");
        format_actions_into(&mut s, &self.actions);
        f.write_str(&s)
    }
}

/// A flow mod in `add-flow` syntax that [`crate::text::parse_flow`] reads back to the same
/// value (`table=`, `cookie=`, `idle_timeout=`… instead of the `table:`/`idle:` of
/// `parse-flow`'s display, which OVS itself does not re-read).
pub fn format_flow_add(spec: &FlowSpec) -> String {
    let mut s = String::new();
    if let Some(t) = spec.table {
        let _ = write!(s, "table={t},");
    }
    if spec.cookie != 0 {
        let _ = write!(s, "cookie=0x{:x},", spec.cookie);
    }
    if spec.idle_timeout != 0 {
        let _ = write!(s, "idle_timeout={},", spec.idle_timeout);
    }
    if spec.hard_timeout != 0 {
        let _ = write!(s, "hard_timeout={},", spec.hard_timeout);
    }
    if spec.importance != 0 {
        let _ = write!(s, "importance={},", spec.importance);
    }
    if spec.send_flow_rem {
        s.push_str("send_flow_rem,");
    }
    if spec.check_overlap {
        s.push_str("check_overlap,");
    }
    let m = format_match_priority(&spec.match_, spec.priority);
    if !m.is_empty() {
        s.push_str(&m);
        s.push(',');
    }
    s.push_str("actions=");
    format_actions_into(&mut s, &spec.actions);
    s
}

/// A datapath action's `nat(...)` as OVS's `format_odp_ct_nat` prints it.
pub fn format_odp_nat(n: &Nat) -> String {
    let mut s = String::from("nat");
    let Some(kind) = n.kind else {
        return s;
    };
    s.push('(');
    s.push_str(match kind {
        NatKind::Src => "src",
        NatKind::Dst => "dst",
    });
    if let Some(r) = n.range {
        s.push('=');
        match r {
            NatRange::V4 { min, max } => {
                fmt_ipv4(&mut s, min);
                if max != 0 && max != min {
                    s.push('-');
                    fmt_ipv4(&mut s, max);
                }
            }
            NatRange::V6 { min, max } => {
                s.push('[');
                fmt_ipv6(&mut s, min);
                if max != 0 && max != min {
                    s.push('-');
                    fmt_ipv6(&mut s, max);
                }
                s.push(']');
            }
        }
        if n.ports.0 != 0 {
            let _ = write!(s, ":{}", n.ports.0);
            if n.ports.1 != 0 && n.ports.1 != n.ports.0 {
                let _ = write!(s, "-{}", n.ports.1);
            }
        }
    }
    for (f, name) in [
        (n.persistent, "persistent"),
        (n.hash, "hash"),
        (n.random, "random"),
    ] {
        if f {
            let _ = write!(s, ",{name}");
        }
    }
    s.push(')');
    s
}

/// OVS `format_hex_arg`: bytes as hex pairs joined by `.`.
fn format_hex_dotted(out: &mut String, bytes: &[u8]) {
    for (i, x) in bytes.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        let _ = write!(out, "{x:02x}");
    }
}
