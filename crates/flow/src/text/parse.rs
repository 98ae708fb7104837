//! Parser for `ovs-ofctl add-flow` text (OVS `parse_ofp_str`, `ofpacts_parse`).
//!
//! [`parse_flow_with`] runs the same stages as `ovs-ofctl parse-flow`: split off the actions at
//! the first `action`, parse the match pairs (OVS `mf_set` semantics, tracking which OpenFlow
//! protocols can carry each field), parse the actions, check them against the match (OVS
//! `ofpacts_check`), pick the protocol `ovs-ofctl` would pick for the dialect, and finally
//! canonicalise match and actions through that protocol ([`super::canon`]) so that printing the
//! result gives `ovs-ofctl`'s output.
//!
//! Errors carry the 1-based character column of the offending token. No input panics.

use crate::field::{FieldId, VLAN_CFI};
use crate::ofp::FlowSpec;
use crate::ofp::action::{Action, Ct, CtZone, Nat, NatKind, NatRange, PacketInReason, Subfield};
use crate::ofp::fields::{Mf, MfFormat, Protocols};
use crate::ofp::matching::{ETH_TYPE_IP, ETH_TYPE_IPV6, Match, ipproto};
use crate::ofp::port::OfPort;
use crate::text::lex::{Kv, KvIter};
use crate::text::value::*;
use crate::text::{Dialect, ParseError};

/// Maximum nesting of `ct(exec(...))`-style action lists (OVS `MAX_OFPACT_PARSE_DEPTH`).
const MAX_DEPTH: usize = 100;

/// Parsing context: the whole text, for columns.
pub(crate) struct Ctx<'a> {
    pub text: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn err(&self, at: usize, token: &str, message: impl Into<String>) -> ParseError {
        let at = at.min(self.text.len());
        let column = self.text.get(..at).map_or(at, |p| p.chars().count()) + 1;
        ParseError {
            column,
            token: token.to_string(),
            message: message.into(),
        }
    }
}

/// Offset of `sub` inside `whole` (both slices of the same text), else 0.
pub(crate) fn offset_in(whole: &str, sub: &str) -> usize {
    let w = whole.as_ptr() as usize;
    let s = sub.as_ptr() as usize;
    if s >= w && s <= w + whole.len() {
        s - w
    } else {
        0
    }
}

/// Result of parsing the match part.
pub(crate) struct ParsedMatch {
    pub spec: FlowSpec,
    pub usable: Protocols,
}

/// Parses a value of `mf` into `(value, mask)` (OVS `mf_parse`), in field units.
pub(crate) fn mf_parse(mf: Mf, s: &str) -> Result<(u128, u128), String> {
    let d = mf.def();
    if s == "*" {
        return Ok((0, 0));
    }
    let full = mf.byte_max();
    let (v, m) = match d.format {
        MfFormat::Decimal | MfFormat::Hex => {
            let what = |e: IntErr, part: &str| match e {
                IntErr::Range => {
                    format!(
                        "{s}: {part} too large for {}-byte field {}",
                        d.n_bytes, d.name
                    )
                }
                IntErr::Syntax => format!("{s}: bad syntax for {} {part}", d.name),
            };
            let (v, tail) = parse_int_string(s, d.n_bytes).map_err(|e| what(e, "value"))?;
            if let Some(ms) = tail.strip_prefix('/') {
                let (m, t2) = parse_int_string(ms, d.n_bytes).map_err(|e| what(e, "mask"))?;
                if !t2.is_empty() {
                    return Err(what(IntErr::Syntax, "mask"));
                }
                (v, m)
            } else if tail.is_empty() {
                (v, full)
            } else {
                return Err(what(IntErr::Syntax, "value"));
            }
        }
        MfFormat::CtState => {
            let (v, m) = parse_flags(s, ct_state_name, "ct_state", 0xff)?;
            (u128::from(v), u128::from(m))
        }
        MfFormat::TcpFlags => {
            let (v, m) = parse_flags(s, tcp_flag_name, "TCP", 0x0fff)?;
            (u128::from(v as u16), u128::from(m as u16))
        }
        MfFormat::Ethernet => {
            let bad = || format!("{s}: invalid Ethernet address");
            let (mac, n) = scan_eth(s).ok_or_else(bad)?;
            if n == s.len() {
                (u128::from(mac), full)
            } else if s.as_bytes()[n] == b'/' {
                match scan_eth(&s[n + 1..]) {
                    Some((m, k)) if n + 1 + k == s.len() => (u128::from(mac), u128::from(m)),
                    _ => return Err(bad()),
                }
            } else {
                return Err(bad());
            }
        }
        MfFormat::Ipv4 => {
            let (ip, m) = ip_parse_masked(s)?;
            (u128::from(ip), u128::from(m))
        }
        MfFormat::Ipv6 => ipv6_parse_masked(s)?,
        MfFormat::OfpPort => {
            let p = OfPort::parse(s)
                .ok_or_else(|| format!("{s}: invalid or unknown port for {}", d.name))?;
            (u128::from(p.0), full)
        }
        MfFormat::OfpPortOxm => {
            let p = OfPort::parse(s)
                .ok_or_else(|| format!("{s}: port value out of range for {}", d.name))?;
            (u128::from(p.to_ofp11()), full)
        }
        MfFormat::Frag => {
            const FRAGS: [(&str, u8, u8); 7] = [
                ("no", 3, 0),
                ("first", 3, 1),
                ("later", 3, 3),
                ("no", 1, 0),
                ("yes", 1, 1),
                ("not_later", 2, 0),
                ("later", 2, 2),
            ];
            let (_, m, v) = FRAGS.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(s)).ok_or_else(|| {
                format!(
                    "{s}: unknown fragment type (valid types are \"no\", \"yes\", \"first\", \"later\", \"not_later\""
                )
            })?;
            (u128::from(*v), u128::from(*m | !3u8))
        }
    };
    if !d.maskable && m != 0 && m & full != full {
        return Err(format!("{s}: invalid mask for field {}", d.name));
    }
    Ok((v & full, m & full))
}

/// OVS `mf_is_value_valid` (for `set_field`).
fn mf_value_valid(mf: Mf, v: u128) -> bool {
    match mf {
        Mf::InPortOxm => OfPort::from_ofp11(v as u32).is_some(),
        Mf::IpDscp => v & !0xfc == 0,
        Mf::IpDscpShifted => v & 0xc0 == 0,
        Mf::IpEcn => v & !3 == 0,
        Mf::IpFrag => v & !3 == 0,
        Mf::TcpFlags => v & !0x0fff == 0,
        Mf::ArpOp => v & 0xff00 == 0,
        Mf::DlVlan => v & 0xf000 == 0,
        Mf::VlanVid => v & 0xe000 == 0,
        Mf::DlVlanPcp | Mf::VlanPcp => v & !7 == 0,
        Mf::Ipv6Label => v & !0xfffff == 0,
        _ => true,
    }
}

/// OVS `mf_parse_subfield`: `NAME[]`, `NAME[a..b]`, `NAME[a]` or bare `NAME`; returns the
/// subfield and bytes consumed (the parse stops at the first byte that is not part of it).
pub(crate) fn parse_subfield_prefix(s: &str) -> Result<(Subfield, usize), String> {
    let name_len = s.bytes().take_while(|b| *b != b'[' && *b != b'-').count();
    let name = &s[..name_len];
    let field = Mf::from_nxm_name(name)
        .or_else(|| Mf::from_name(name))
        .ok_or_else(|| format!("{s}: unknown field `{name}'"))?;
    let width = field.def().n_bits as i64;
    let mut pos = name_len;
    let (mut start, mut end) = (0i64, width - 1);
    if s.as_bytes().get(pos) == Some(&b'[') {
        let r = &s[pos..];
        let syntax = || format!("{s}: syntax error expecting [] or [<bit>] or [<start>..<end>]");
        if r.starts_with("[]") {
        } else if let Some((a, n)) = scan_int(&r[1..]) {
            let after = &r[1 + n..];
            if let Some(rest) = after.strip_prefix("..") {
                let (b, m) = scan_int(rest).ok_or_else(syntax)?;
                if !rest[m..].starts_with(']') {
                    return Err(syntax());
                }
                start = a;
                end = b;
            } else if after.starts_with(']') {
                start = a;
                end = a;
            } else {
                return Err(syntax());
            }
        } else {
            return Err(syntax());
        }
        pos += r.find(']').map_or(r.len(), |i| i + 1);
    }
    if start > end {
        return Err(format!(
            "{s}: starting bit {start} is after ending bit {end}"
        ));
    } else if start >= width {
        return Err(format!(
            "{s}: starting bit {start} is not valid because field is only {width} bits wide"
        ));
    } else if end >= width {
        return Err(format!(
            "{s}: ending bit {end} is not valid because field is only {width} bits wide"
        ));
    } else if start < 0 {
        return Err(format!("{s}: starting bit {start} is not valid"));
    }
    Ok((
        Subfield {
            field,
            ofs: start as u32,
            n_bits: (end - start + 1) as u32,
        },
        pos,
    ))
}

/// Whole-string subfield.
pub(crate) fn parse_subfield(s: &str) -> Result<Subfield, String> {
    let (sf, n) = parse_subfield_prefix(s)?;
    if n != s.len() {
        return Err("unexpected input following field syntax".into());
    }
    Ok(sf)
}

/// Parses the match part of a flow (everything before `actions=`) into `spec`.
pub(crate) fn parse_match_part(
    cx: &Ctx<'_>,
    part: &str,
    with_flow_fields: bool,
) -> Result<ParsedMatch, ParseError> {
    let mut spec = FlowSpec::default();
    let mut usable = Protocols::ANY;
    let base = offset_in(cx.text, part);
    let mut m = Match::catchall();
    for kv in KvIter::new(part) {
        let Kv {
            key,
            key_at,
            value,
            value_at,
            ..
        } = kv;
        let (key_at, value_at) = (base + key_at, base + value_at);
        let at_value = |msg: String| cx.err(value_at, value, msg);
        if let Some((dl, proto)) = protocol(key) {
            m.set_field(Mf::EthType, u128::from(dl));
            if proto != 0 {
                m.set_field(Mf::IpProto, u128::from(proto));
            }
            continue;
        }
        match key {
            "eth" | "no_readonly_table" | "allow_hidden_fields" => continue,
            "send_flow_rem" if with_flow_fields => {
                spec.send_flow_rem = true;
                continue;
            }
            "check_overlap" if with_flow_fields => {
                spec.check_overlap = true;
                continue;
            }
            _ => {}
        }
        if let Some(mf) = Mf::from_name(key) {
            let v = if value.is_empty() { "0/0" } else { value };
            let (val, mask) = mf_parse(mf, v).map_err(at_value)?;
            usable = usable.and(mf.usable(mask));
            m.set_field_masked(mf, val, mask);
            continue;
        }
        if let Some(n) = key
            .strip_prefix("xreg")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n < 8 && key.len() <= 5)
        {
            let v = if value.is_empty() { "0/0" } else { value };
            let (val, mask) = parse_xreg(v).map_err(at_value)?;
            usable = usable.and(if mask == 0 {
                Protocols::ANY
            } else {
                Protocols::NXM_OXM_ANY
            });
            for (i, shift) in [(2 * n, 32), (2 * n + 1, 0)] {
                if let Some(r) = Mf::reg(i) {
                    let (rv, rm) = ((val >> shift) as u32, (mask >> shift) as u32);
                    m.set_field_masked(r, u128::from(rv), u128::from(rm));
                }
            }
            continue;
        }
        if key.contains('[') {
            let sf = parse_subfield(key).map_err(|e| cx.err(key_at, key, e))?;
            let d = sf.field.def();
            let (val, tail) = parse_int_string(value, d.n_bytes)
                .map_err(|_| at_value(format!("{key}: cannot parse integer value: {value}")))?;
            if !tail.is_empty() {
                return Err(at_value(format!(
                    "{key}: cannot parse integer value: {value}"
                )));
            }
            if val.checked_shr(sf.n_bits).unwrap_or(0) != 0 {
                return Err(at_value(format!(
                    "{key}: value {val} does not fit into {} bits",
                    sf.n_bits
                )));
            }
            let (cv, cm) = m.get_field(sf.field);
            let nv = (cv & !sf.mask()) | (val << sf.ofs);
            let nm = cm | sf.mask();
            usable = usable.and(sf.field.usable(nm));
            m.set_field_masked(sf.field, nv, nm);
            continue;
        }
        if value.is_empty() {
            return Err(cx.err(key_at, key, format!("field {key} missing value")));
        }
        match key {
            "table" => {
                let t = parse_table(value)
                    .ok_or_else(|| at_value(format!("unknown table \"{value}\"")))?;
                if t != 255 {
                    usable = usable.and(Protocols::TID);
                    spec.table = Some(t);
                }
            }
            "priority" if with_flow_fields => {
                spec.priority = str_to_u16(value)
                    .ok_or_else(|| at_value(format!("invalid priority \"{value}\"")))?;
            }
            "idle_timeout" if with_flow_fields => {
                spec.idle_timeout = str_to_u16(value)
                    .ok_or_else(|| at_value(format!("invalid idle_timeout \"{value}\"")))?;
            }
            "hard_timeout" if with_flow_fields => {
                spec.hard_timeout = str_to_u16(value)
                    .ok_or_else(|| at_value(format!("invalid hard_timeout \"{value}\"")))?;
            }
            "importance" if with_flow_fields => {
                spec.importance = str_to_u16(value)
                    .ok_or_else(|| at_value(format!("invalid importance \"{value}\"")))?;
            }
            "cookie" => {
                if value.contains('/') {
                    return Err(at_value("flow additions cannot use a cookie mask".into()));
                }
                spec.cookie = str_to_u64(value)
                    .ok_or_else(|| at_value(format!("invalid numeric format {value}")))?;
            }
            "duration" | "n_packets" | "n_bytes" | "idle_age" | "hard_age" => {}
            _ => return Err(cx.err(key_at, key, format!("unknown keyword {key}"))),
        }
    }
    if m.dl_type() == ETH_TYPE_IPV6 {
        let any = [
            FieldId::NwProto,
            FieldId::NwTos,
            FieldId::TpSrc,
            FieldId::TpDst,
        ]
        .iter()
        .any(|f| m.mask_of(*f) != 0);
        if any {
            usable = usable.and(Protocols::NXM_OXM_ANY);
        }
    }
    spec.match_ = m;
    Ok(ParsedMatch { spec, usable })
}

/// `xregN` value: a 64-bit integer with optional mask.
fn parse_xreg(s: &str) -> Result<(u64, u64), String> {
    if s == "*" {
        return Ok((0, 0));
    }
    let bad = || format!("{s}: bad syntax for xreg value");
    let (v, tail) = parse_int_string(s, 8).map_err(|_| bad())?;
    let m = if let Some(ms) = tail.strip_prefix('/') {
        match parse_int_string(ms, 8) {
            Ok((m, "")) => m,
            _ => return Err(bad()),
        }
    } else if tail.is_empty() {
        u128::from(u64::MAX)
    } else {
        return Err(bad());
    };
    Ok(((v & m) as u64, m as u64))
}

/// Protocol shorthands (`ofp_parse_protocol`): `(dl_type, nw_proto)`.
fn protocol(name: &str) -> Option<(u16, u8)> {
    Some(match name {
        "ip" | "ipv4" | "ip4" => (ETH_TYPE_IP, 0),
        "arp" => (0x0806, 0),
        "icmp" => (ETH_TYPE_IP, ipproto::ICMP),
        "tcp" => (ETH_TYPE_IP, ipproto::TCP),
        "udp" => (ETH_TYPE_IP, ipproto::UDP),
        "sctp" => (ETH_TYPE_IP, ipproto::SCTP),
        "ipv6" | "ip6" => (ETH_TYPE_IPV6, 0),
        "icmp6" => (ETH_TYPE_IPV6, ipproto::ICMPV6),
        "tcp6" => (ETH_TYPE_IPV6, ipproto::TCP),
        "udp6" => (ETH_TYPE_IPV6, ipproto::UDP),
        "sctp6" => (ETH_TYPE_IPV6, ipproto::SCTP),
        "rarp" => (0x8035, 0),
        "mpls" => (0x8847, 0),
        "mplsm" => (0x8848, 0),
        _ => return None,
    })
}

/// `ofputil_table_from_string` without a table map.
fn parse_table(s: &str) -> Option<u8> {
    if s.starts_with('-') {
        return None;
    }
    str_to_uint10(s).and_then(|t| u8::try_from(t).ok())
}

/// Action parser state.
pub(crate) struct ActCtx<'a, 'b> {
    pub cx: &'b Ctx<'a>,
    pub usable: Protocols,
    pub depth: usize,
}

/// `(…)` argument of `key(…)`, or the `:`/`=` value.
fn is_ct_field(mf: Mf) -> bool {
    matches!(mf, Mf::CtMark | Mf::CtLabel)
}

impl ActCtx<'_, '_> {
    /// OVS `ofpacts_parse__`: parses an action list. `outer_ct` restricts it to what `ct(exec())`
    /// allows.
    pub(crate) fn parse_list(
        &mut self,
        s: &str,
        outer_ct: bool,
    ) -> Result<Vec<Action>, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(self
                .cx
                .err(offset_in(self.cx.text, s), s, "Action nested too deeply"));
        }
        self.depth += 1;
        let r = self.parse_list_inner(s, outer_ct);
        self.depth -= 1;
        r
    }

    fn parse_list_inner(&mut self, s: &str, outer_ct: bool) -> Result<Vec<Action>, ParseError> {
        let base = offset_in(self.cx.text, s);
        let mut out: Vec<Action> = Vec::new();
        let mut out_at: Vec<(usize, &str)> = Vec::new();
        let mut drop_at: Option<usize> = None;
        let mut key_ats: Vec<usize> = Vec::new();
        for kv in KvIter::new(s) {
            let key_at = base + kv.key_at;
            let value_at = base + kv.value_at;
            let key = kv.key;
            let value = kv.value;
            let cx = self.cx;
            let verr = |msg: String| cx.err(value_at, value, msg);
            let kerr = |msg: String| cx.err(key_at, key, msg);
            let lk = key.to_ascii_lowercase();
            let act = match lk.as_str() {
                "output" => self.parse_output(value).map_err(verr)?,
                "controller" => parse_controller(value).map_err(verr)?,
                "resubmit" => parse_resubmit(value).map_err(verr)?,
                "goto_table" => {
                    let t = parse_table(value)
                        .ok_or_else(|| verr(format!("unknown table \"{value}\"")))?;
                    Action::GotoTable(t)
                }
                "set_field" => self.parse_set_field(value).map_err(verr)?,
                "load" => parse_load(value).map_err(verr)?,
                "move" => parse_move(value).map_err(verr)?,
                "mod_dl_src" | "mod_dl_dst" => {
                    let mac = match scan_eth(value) {
                        Some((m, n)) if n == value.len() => m,
                        _ => return Err(verr(format!("invalid mac address {value}"))),
                    };
                    if lk == "mod_dl_src" {
                        Action::ModDlSrc(mac)
                    } else {
                        Action::ModDlDst(mac)
                    }
                }
                "mod_nw_src" | "mod_nw_dst" => {
                    let ip = match scan_ipv4(value) {
                        Some((ip, n)) if n == value.len() => ip,
                        _ => return Err(verr(format!("{value}: invalid IP address"))),
                    };
                    if lk == "mod_nw_src" {
                        Action::ModNwSrc(ip)
                    } else {
                        Action::ModNwDst(ip)
                    }
                }
                "mod_nw_tos" => {
                    let t =
                        str_to_u8(value).ok_or_else(|| verr(format!("invalid TOS \"{value}\"")))?;
                    if t & !0xfc != 0 {
                        return Err(verr(format!("{value}: not a valid TOS")));
                    }
                    Action::ModNwTos(t)
                }
                "mod_tp_src" | "mod_tp_dst" => {
                    let p = str_to_u16(value)
                        .ok_or_else(|| verr(format!("invalid {lk} \"{value}\"")))?;
                    if lk == "mod_tp_src" {
                        Action::ModTpSrc(p)
                    } else {
                        Action::ModTpDst(p)
                    }
                }
                "mod_vlan_vid" | "set_vlan_vid" => {
                    let v = str_to_u16(value)
                        .ok_or_else(|| verr(format!("invalid VLAN VID \"{value}\"")))?;
                    if v & !0x0fff != 0 {
                        return Err(verr(format!("{value}: not a valid VLAN VID")));
                    }
                    Action::ModVlanVid {
                        vid: v,
                        push_if_needed: lk == "mod_vlan_vid",
                    }
                }
                "mod_vlan_pcp" | "set_vlan_pcp" => {
                    let v = str_to_u8(value)
                        .ok_or_else(|| verr(format!("invalid VLAN PCP \"{value}\"")))?;
                    if v & !7 != 0 {
                        return Err(verr(format!("{value}: not a valid VLAN PCP")));
                    }
                    Action::ModVlanPcp {
                        pcp: v,
                        push_if_needed: lk == "mod_vlan_pcp",
                    }
                }
                "strip_vlan" => Action::StripVlan,
                "pop_vlan" => Action::PopVlan,
                "push_vlan" => {
                    self.usable = self.usable.and(Protocols::OF11_UP);
                    let t = str_to_u16(value)
                        .ok_or_else(|| verr(format!("invalid ethertype \"{value}\"")))?;
                    if t != 0x8100 && t != 0x88a8 {
                        return Err(verr(format!("{value}: not a valid VLAN ethertype")));
                    }
                    Action::PushVlan(t)
                }
                "dec_ttl" => {
                    if value.is_empty() {
                        Action::DecTtl(Vec::new())
                    } else {
                        let ids: Vec<u16> = value
                            .split([',', ' '])
                            .filter(|t| !t.is_empty())
                            .map(|t| atoi(t) as u16)
                            .collect();
                        if ids.is_empty() {
                            return Err(verr(
                                "dec_ttl_cnt_ids: expected at least one controller id.".into(),
                            ));
                        }
                        Action::DecTtl(ids)
                    }
                }
                "ct" => Action::Ct(self.parse_ct(value)?),
                "ct_clear" => Action::CtClear,
                "conjunction" => crate::text::conj::parse_conjunction(value).map_err(verr)?,
                "group" => crate::text::group::parse_group_action(value).map_err(verr)?,
                "note" => Action::Note(
                    parse_hex_bytes(value)
                        .ok_or_else(|| verr("bad hex digit in `note' argument".into()))?,
                ),
                "drop" => {
                    drop_at = Some(key_at);
                    continue;
                }
                "apply_actions" => {
                    return Err(kerr("apply_actions is the default instruction".into()));
                }
                k if super::actions_ext::handles(k) => self.parse_ext(k, value).map_err(verr)?,
                "multipath" => super::lb::parse_multipath(value).map_err(verr)?,
                "bundle" => super::lb::parse_bundle(value, false).map_err(verr)?,
                "bundle_load" => super::lb::parse_bundle(value, true).map_err(verr)?,
                "sample" => super::lb::parse_sample(value).map_err(verr)?,
                "check_pkt_larger" => super::lb::parse_check_pkt_larger(value).map_err(verr)?,
                // issue #17: a nested list, no instructions inside (depth > 1).
                "clone" => Action::Clone(self.parse_list(value, false)?),
                "write_actions" => Action::WriteActions(self.parse_list(value, false)?),
                _ => match OfPort::parse(key) {
                    Some(p) => Action::output(p),
                    None => return Err(kerr(format!("unknown action {key}"))),
                },
            };
            let ct_dst = match &act {
                Action::SetField { field, .. } => is_ct_field(*field),
                Action::Load { dst, .. } | Action::Move { dst, .. } => is_ct_field(dst.field),
                _ => false,
            };
            if ct_dst && !outer_ct {
                return Err(kerr("cannot set CT fields outside of ct action".into()));
            }
            if outer_ct {
                let ok = ct_dst;
                if !ok {
                    return Err(kerr(format!(
                        "ct action doesn't support nested action {key}"
                    )));
                }
            }
            out.push(act);
            out_at.push((key_at, key));
            key_ats.push(key_at);
        }
        if let Some(at) = drop_at.filter(|_| !out.is_empty()) {
            return Err(self.cx.err(
                at,
                "drop",
                "\"drop\" must not be accompanied by any other action or instruction",
            ));
        }
        // Instructions only at the top level (`clone(...)`, `ct(exec(...))` nest deeper).
        super::actions_ext::verify_instructions(self.cx, &out, &out_at, self.depth == 1)?;
        if let Err((i, msg)) = crate::text::conj::check_conjunction_mix(&out) {
            let at = key_ats[i];
            let tok = self.cx.text.get(at..).unwrap_or_default();
            let tok = tok.split([',', '(', ':', ' ']).next().unwrap_or_default();
            return Err(self.cx.err(at, tok, msg));
        }
        Ok(out)
    }

    fn parse_output(&mut self, arg: &str) -> Result<Action, String> {
        if arg.contains("port") && arg.contains("max_len") {
            let mut port = OfPort(0);
            let mut max_len = 0u32;
            for kv in KvIter::new(arg) {
                match kv.key {
                    "port" => {
                        port = OfPort::parse(kv.value).ok_or_else(|| {
                            format!("output to unknown truncate port: {}", kv.value)
                        })?;
                        if port.0 > OfPort::MAX.0
                            && port != OfPort::LOCAL
                            && port != OfPort::IN_PORT
                        {
                            return Err(format!(
                                "output to unsupported truncate port: {}",
                                kv.value
                            ));
                        }
                    }
                    "max_len" => {
                        max_len = str_to_u32(kv.value)
                            .ok_or_else(|| format!("invalid numeric format {}", kv.value))?;
                        if max_len < 14 {
                            return Err(format!(
                                "max_len {max_len} is less than the minimum value 14"
                            ));
                        }
                    }
                    k => return Err(format!("invalid key '{k}' in output_trunc argument")),
                }
            }
            return Ok(Action::OutputTrunc { port, max_len });
        }
        if let Some(port) = OfPort::parse(arg) {
            let max_len = if port == OfPort::CONTROLLER {
                u16::MAX
            } else {
                0
            };
            return Ok(Action::Output { port, max_len });
        }
        match parse_subfield(arg) {
            Ok(src) => Ok(Action::OutputReg { src }),
            Err(_) => Err(format!("{arg}: output to unknown port")),
        }
    }

    fn parse_set_field(&mut self, arg: &str) -> Result<Action, String> {
        let (value, key) = split_arrow(arg)?;
        let mf =
            Mf::from_name(key).ok_or_else(|| format!("{key} is not a valid OXM field name"))?;
        if !mf.def().writable {
            return Err(format!("{key} is read-only"));
        }
        let (v, m) = mf_parse(mf, value)?;
        if !mf_value_valid(mf, v) {
            return Err(format!("{value} is not a valid value for field {key}"));
        }
        self.usable = self.usable.and(mf.usable(mf.byte_max()));
        Ok(Action::SetField {
            field: mf,
            value: v & m,
            mask: m,
        })
    }

    fn parse_ct(&mut self, arg: &str) -> Result<Ct, ParseError> {
        let base = offset_in(self.cx.text, arg);
        let mut ct = Ct::default();
        for kv in KvIter::new(arg) {
            let cx = self.cx;
            let at = base + kv.value_at;
            let verr = |m: String| cx.err(at, kv.value, m);
            match kv.key {
                "commit" => ct.commit = true,
                "force" => ct.force = true,
                "table" => {
                    let t = parse_table(kv.value)
                        .ok_or_else(|| verr(format!("unknown table {}", kv.value)))?;
                    if t == 255 {
                        return Err(verr(format!("invalid table {t:#x}")));
                    }
                    ct.table = Some(t);
                }
                "zone" => {
                    ct.zone = match str_to_u16(kv.value) {
                        Some(z) => CtZone::Imm(z),
                        None => CtZone::Field(parse_subfield(kv.value).map_err(verr)?),
                    };
                }
                "alg" => {
                    ct.alg = Some(match kv.value {
                        "ftp" => 21,
                        "tftp" => 69,
                        v => return Err(verr(format!("unknown connection tracking helper {v}"))),
                    });
                }
                "nat" => ct.nat = Some(parse_nat(kv.value).map_err(verr)?),
                "exec" => {
                    let saved = self.usable;
                    self.usable = Protocols::ANY;
                    ct.exec = self.parse_list(kv.value, true)?;
                    self.usable = self.usable.and(saved);
                }
                k => {
                    return Err(cx.err(
                        base + kv.key_at,
                        k,
                        format!("invalid argument to \"ct\" action: `{k}'"),
                    ));
                }
            }
        }
        if ct.force && !ct.commit {
            return Err(self
                .cx
                .err(base, arg, "\"force\" flag requires \"commit\" flag."));
        }
        if matches!(ct.zone, CtZone::Field(sf) if sf.n_bits != 16) {
            return Err(self.cx.err(base, arg, "zone subfield must be 16 bits wide"));
        }
        let nat_has_args = ct.nat.is_some_and(|n| n.kind.is_some());
        if !ct.commit && (!ct.exec.is_empty() || nat_has_args) {
            return Err(self.cx.err(
                base,
                arg,
                "CT action requires commit flag if actions other than NAT without arguments are specified.",
            ));
        }
        Ok(ct)
    }
}

fn atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, d) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = d
        .bytes()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |a, b| {
            a.wrapping_mul(10).wrapping_add(i64::from(b - b'0'))
        });
    if neg { -v } else { v }
}

/// OVS `ofpbuf_put_hex`: hex byte pairs, optionally separated by `.` or spaces.
pub(crate) fn parse_hex_bytes(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && matches!(b[i], b'.' | b' ' | b'\t' | b'\r' | b'\n') {
            i += 1;
        }
        if i >= b.len() {
            return Some(out);
        }
        let hi = (b[i] as char).to_digit(16)?;
        let lo = b.get(i + 1).and_then(|c| (*c as char).to_digit(16))?;
        out.push((hi * 16 + lo) as u8);
        i += 2;
    }
}

fn split_arrow(arg: &str) -> Result<(&str, &str), String> {
    let i = arg
        .find("->")
        .ok_or_else(|| format!("{arg}: missing `->'"))?;
    let key = &arg[i + 2..];
    if key.is_empty() {
        return Err(format!("{arg}: missing field name following `->'"));
    }
    Ok((&arg[..i], key))
}

fn parse_load(arg: &str) -> Result<Action, String> {
    let (value, key) = split_arrow(arg)?;
    let dst = parse_subfield(key)?;
    let d = dst.field.def();
    let v = match parse_int_string(value, d.n_bytes) {
        Ok((v, _)) => v,
        Err(_) => return Err(format!("{arg}: cannot parse integer value")),
    };
    if v.checked_shr(dst.n_bits).unwrap_or(0) != 0 {
        return Err(format!(
            "{arg}: value {v} does not fit into {} bits",
            dst.n_bits
        ));
    }
    Ok(Action::Load { value: v, dst })
}

fn parse_move(arg: &str) -> Result<Action, String> {
    let (src, n) = parse_subfield_prefix(arg)?;
    let rest = &arg[n..];
    let rest = rest
        .strip_prefix("->")
        .ok_or_else(|| format!("{arg}: missing `->' following source"))?;
    let (dst, m) = parse_subfield_prefix(rest)?;
    if m != rest.len() {
        return Err(format!("{arg}: trailing garbage following destination"));
    }
    if src.n_bits != dst.n_bits {
        return Err(format!(
            "{arg}: source field is {} bits wide but destination is {} bits wide",
            src.n_bits, dst.n_bits
        ));
    }
    Ok(Action::Move { src, dst })
}

fn parse_controller(arg: &str) -> Result<Action, String> {
    let mut max_len = u16::MAX;
    let mut reason = PacketInReason::Action;
    let mut id = 0u16;
    let mut userdata = Vec::new();
    let mut pause = false;
    if arg.is_empty() {
    } else if arg.bytes().all(|b| b.is_ascii_digit()) {
        max_len = str_to_u16(arg).ok_or_else(|| format!("invalid max_len \"{arg}\""))?;
    } else {
        for kv in KvIter::new(arg) {
            match kv.key {
                "reason" => {
                    reason = PacketInReason::from_name(kv.value)
                        .ok_or_else(|| format!("unknown reason \"{}\"", kv.value))?;
                }
                "max_len" => {
                    max_len = str_to_u16(kv.value)
                        .ok_or_else(|| format!("invalid max_len \"{}\"", kv.value))?;
                }
                "id" => {
                    id = str_to_u16(kv.value)
                        .ok_or_else(|| format!("invalid id \"{}\"", kv.value))?;
                }
                "userdata" => {
                    userdata = parse_hex_bytes(kv.value)
                        .ok_or_else(|| "bad hex digit in `controller' argument".to_string())?;
                }
                "pause" => pause = true,
                k => return Err(format!("unknown key \"{k}\" parsing controller action")),
            }
        }
    }
    if reason == PacketInReason::Action && id == 0 && userdata.is_empty() && !pause {
        Ok(Action::Output {
            port: OfPort::CONTROLLER,
            max_len,
        })
    } else {
        Ok(Action::Controller {
            max_len,
            reason,
            id,
            userdata,
            pause,
        })
    }
}

fn parse_resubmit(arg: &str) -> Result<Action, String> {
    let mut parts = arg.splitn(3, ',');
    let p = parts.next().unwrap_or("");
    let t = parts.next().unwrap_or("");
    let c = parts.next().unwrap_or("");
    let port = if p.is_empty() {
        None
    } else {
        Some(OfPort::parse(p).ok_or_else(|| format!("{p}: resubmit to unknown port"))?)
    };
    let table = if t.is_empty() {
        None
    } else {
        Some(parse_table(t).ok_or_else(|| format!("{t}: resubmit to unknown table"))?)
    };
    let ct = if c.is_empty() {
        false
    } else if c == "ct" {
        true
    } else {
        return Err(format!("{c}: unknown parameter"));
    };
    let port = port.filter(|p| *p != OfPort::IN_PORT);
    let table = table.filter(|t| *t != 255);
    if port.is_none() && table.is_none() {
        return Err("at least one \"in_port\" or \"table\" must be specified on resubmit".into());
    }
    Ok(Action::Resubmit { port, table, ct })
}

fn parse_nat_range(s: &str, nat: &mut Nat) -> Result<(), String> {
    let bad = || format!("invalid nat range \"{s}\"");
    let b = s.as_bytes();
    let mut n = 0;
    if let Some((min, k)) = scan_ipv4(s) {
        n = k;
        let mut max = 0;
        if b.get(n) == Some(&b'-') {
            n += 1;
            let (mx, k2) = scan_ipv4(&s[n..]).ok_or_else(bad)?;
            if mx < min {
                return Err(bad());
            }
            max = mx;
            n += k2;
        }
        nat.range = Some(NatRange::V4 { min, max });
    } else {
        let scan6 = |from: usize| -> Option<(u128, usize)> {
            let r = &s[from..];
            let (txt, used) = if let Some(inner) = r.strip_prefix('[') {
                let k = inner
                    .bytes()
                    .take(46)
                    .take_while(|c| c.is_ascii_hexdigit() || *c == b':' || *c == b'.')
                    .count();
                if inner.as_bytes().get(k) != Some(&b']') {
                    return None;
                }
                (&inner[..k], k + 2)
            } else {
                let k = r
                    .bytes()
                    .take(46)
                    .take_while(|c| c.is_ascii_hexdigit() || *c == b':' || *c == b'.')
                    .count();
                (&r[..k], k)
            };
            if txt.is_empty() {
                return None;
            }
            ipv6_pton(txt).map(|a| (a, used))
        };
        if let Some((min, k)) = scan6(0) {
            n = k;
            let mut max = 0;
            if b.get(n) == Some(&b'-') {
                n += 1;
                let (mx, k2) = scan6(n).ok_or_else(bad)?;
                if mx < min {
                    return Err(bad());
                }
                max = mx;
                n += k2;
            }
            nat.range = Some(NatRange::V6 { min, max });
        }
    }
    if nat.range.is_some() && b.get(n) == Some(&b':') {
        n += 1;
        let (p, k) = scan_uint(&s[n..], 10).ok_or_else(bad)?;
        let pmin = p as u16;
        n += k;
        let mut pmax = 0;
        if b.get(n) == Some(&b'-') {
            n += 1;
            let (p2, k2) = scan_uint(&s[n..], 10).ok_or_else(bad)?;
            pmax = p2 as u16;
            if pmax < pmin {
                return Err(bad());
            }
            n += k2;
        }
        nat.ports = (pmin, pmax);
    }
    // OVS encodes a port range with a zero minimum, then refuses it when decoding.
    if nat.ports.0 == 0 && nat.ports.1 != 0 {
        return Err("decode error: OFPBAC_BAD_ARGUMENT: nat port range starts at 0".to_string());
    }
    // One representation per meaning: a range whose ends are equal is stored as a single
    // value (max 0), which is also how it prints.
    if nat.ports.1 == nat.ports.0 {
        nat.ports.1 = 0;
    }
    match &mut nat.range {
        Some(NatRange::V4 { min, max }) if *max == *min => *max = 0,
        Some(NatRange::V6 { min, max }) if *max == *min => *max = 0,
        _ => {}
    }
    if n != s.len() {
        return Err(format!(
            "garbage ({}) after nat range \"{s}\" (pos: {n})",
            &s[n.min(s.len())..]
        ));
    }
    Ok(())
}

fn parse_nat(arg: &str) -> Result<Nat, String> {
    let mut nat = Nat::default();
    let (mut src, mut dst) = (false, false);
    for kv in KvIter::new(arg) {
        match kv.key {
            "src" => {
                src = true;
                nat.kind = Some(NatKind::Src);
                nat.range = None;
                nat.ports = (0, 0);
                parse_nat_range(kv.value, &mut nat)?;
            }
            "dst" => {
                dst = true;
                nat.kind = Some(NatKind::Dst);
                nat.range = None;
                nat.ports = (0, 0);
                parse_nat_range(kv.value, &mut nat)?;
            }
            "persistent" => nat.persistent = true,
            "hash" => nat.hash = true,
            "random" => nat.random = true,
            k => return Err(format!("invalid key \"{k}\" in \"nat\" argument")),
        }
    }
    if src && dst {
        return Err("May only specify one of \"src\" or \"dst\".".into());
    }
    if !src && !dst && (nat.persistent || nat.hash || nat.random) {
        return Err("Flags allowed only with \"src\" or \"dst\".".into());
    }
    if nat.hash && nat.random {
        return Err("Both \"hash\" and \"random\" are not allowed.".into());
    }
    Ok(nat)
}

/// OVS `ofpacts_check` over a scratch copy of the match: validates actions against the match
/// and narrows `usable`. Returns the OVS error name on failure.
pub(crate) fn check_actions(
    actions: &[Action],
    m: &Match,
    table: Option<u8>,
    usable: &mut Protocols,
) -> Result<(), &'static str> {
    let mut m = *m;
    for a in actions {
        check_action(a, &mut m, table, usable)?;
    }
    Ok(())
}

/// OVS's consistency check of a packet-out's actions against the packet's own flow (every
/// field exact; table 0, as OVS checks them): `Ok` with the protocols the actions may be
/// used in (narrowed to OpenFlow 1.0 by what only 1.0 lets pass), or the OVS error name.
pub fn check_actions_for_flow(
    actions: &[Action],
    key: &crate::FlowKey,
) -> Result<Protocols, &'static str> {
    let m = Match {
        key: *key,
        mask: crate::FlowMask {
            w: [u64::MAX; crate::key::FLOW_WORDS],
        },
    };
    let mut usable = Protocols::ANY;
    check_actions(actions, &m, Some(0), &mut usable)?;
    Ok(usable)
}

fn inconsistent(usable: &mut Protocols) {
    *usable = usable.and(Protocols::OF10_ANY);
}

/// OVS `mf_check_dst`: a writable field, bits in range, prerequisites in the match.
pub(crate) fn check_dst(sf: &Subfield, m: &Match) -> Result<(), &'static str> {
    check_subfield(sf, m)?;
    if !sf.field.def().writable {
        return Err("OFPBAC_BAD_SET_ARGUMENT");
    }
    Ok(())
}

fn check_subfield(sf: &Subfield, m: &Match) -> Result<(), &'static str> {
    if sf.n_bits == 0 || sf.ofs + sf.n_bits > sf.field.def().n_bits {
        return Err("OFPBAC_BAD_SET_LEN");
    }
    if !m.prereqs_ok(sf.field) {
        return Err("OFPBAC_MATCH_INCONSISTENT");
    }
    Ok(())
}

pub(crate) fn check_output_port(p: OfPort) -> Result<(), &'static str> {
    if p == OfPort::ANY || (p.0 >= OfPort::MAX.0 && p.0 < OfPort::IN_PORT.0) {
        return Err("OFPBAC_BAD_OUT_PORT");
    }
    Ok(())
}

fn set_tci(m: &mut Match, tci: u16) {
    let mask = m.mask_of(FieldId::Vlan0Tci);
    FieldId::Vlan0Tci.set(&mut m.key, u128::from(tci));
    let _ = mask;
}

fn check_action(
    a: &Action,
    m: &mut Match,
    table: Option<u8>,
    usable: &mut Protocols,
) -> Result<(), &'static str> {
    let tci = m.value(FieldId::Vlan0Tci) as u16;
    match a {
        Action::Output { port, .. } | Action::OutputTrunc { port, .. } => check_output_port(*port),
        Action::OutputReg { src } => check_subfield(src, m),
        Action::WriteMetadata { .. }
        | Action::ModNwTtl(_)
        | Action::Exit
        | Action::Clone(_)
        | Action::WriteActions(_)
        | Action::ClearActions
        | Action::SetQueue(_)
        | Action::Enqueue { .. }
        | Action::PopQueue => super::actions_ext::check_ext(a, m, table, usable),
        Action::Multipath(_)
        | Action::Bundle(_)
        | Action::Sample(_)
        | Action::CheckPktLarger { .. } => super::lb::check_lb(a, m),
        // conjunctive matches (issue #17): OVS `check_CONJUNCTION` accepts every match.
        Action::Conjunction { .. } => Ok(()),
        Action::Controller { .. }
        | Action::UnrollXlate { .. }
        | Action::Note(_)
        | Action::CtClear
        | Action::Group(_) => Ok(()),
        Action::Resubmit { ct, .. } => {
            if *ct && !m.ct_valid() {
                return Err("OFPBAC_MATCH_INCONSISTENT");
            }
            Ok(())
        }
        Action::GotoTable(t) => {
            if table.is_some_and(|cur| *t <= cur) {
                return Err("OFPBIC_BAD_TABLE_ID");
            }
            Ok(())
        }
        Action::SetField { field, value, .. } => {
            if !m.prereqs_ok(*field) || (*field == Mf::VlanVid && tci & VLAN_CFI == 0) {
                return Err("OFPBAC_MATCH_INCONSISTENT");
            }
            if *field == Mf::VlanTci {
                set_tci(m, *value as u16);
            }
            Ok(())
        }
        Action::Load { dst, .. } => {
            check_subfield(dst, m)?;
            if !dst.field.def().writable {
                return Err("OFPBAC_BAD_SET_ARGUMENT");
            }
            if dst.field == Mf::VlanVid && tci & VLAN_CFI == 0 {
                return Err("OFPBAC_MATCH_INCONSISTENT");
            }
            Ok(())
        }
        Action::Move { src, dst } => {
            check_subfield(src, m)?;
            check_subfield(dst, m)?;
            if !dst.field.def().writable {
                return Err("OFPBAC_BAD_SET_ARGUMENT");
            }
            Ok(())
        }
        Action::ModDlSrc(_) | Action::ModDlDst(_) => Ok(()),
        Action::ModNwSrc(_) | Action::ModNwDst(_) => {
            if m.dl_type() != ETH_TYPE_IP {
                inconsistent(usable);
            }
            Ok(())
        }
        Action::ModNwTos(_) | Action::DecTtl(_) => {
            if !m.is_ip_any() {
                inconsistent(usable);
            }
            Ok(())
        }
        Action::ModTpSrc(_) | Action::ModTpDst(_) => {
            let later = m.value(FieldId::NwFrag) as u8 & crate::field::FRAG_LATER != 0;
            if !m.is_ip_any()
                || later
                || !matches!(m.nw_proto(), ipproto::TCP | ipproto::UDP | ipproto::SCTP)
            {
                inconsistent(usable);
            }
            Ok(())
        }
        Action::ModVlanVid { push_if_needed, .. } | Action::ModVlanPcp { push_if_needed, .. } => {
            if tci & VLAN_CFI == 0 && !push_if_needed {
                inconsistent(usable);
            }
            set_tci(m, tci | VLAN_CFI);
            Ok(())
        }
        Action::StripVlan | Action::PopVlan => {
            if tci & VLAN_CFI == 0 {
                inconsistent(usable);
            }
            // flow_pop_vlan: the second tag (if any) becomes the first.
            let inner = m.value(FieldId::Vlan1Tci) as u16;
            set_tci(m, inner);
            FieldId::Vlan1Tci.set(&mut m.key, 0);
            Ok(())
        }
        Action::PushVlan(_) => {
            if m.value(FieldId::Vlan1Tci) as u16 & VLAN_CFI != 0 {
                return Err("OFPBAC_BAD_TAG");
            }
            FieldId::Vlan1Tci.set(&mut m.key, u128::from(tci));
            set_tci(m, tci | VLAN_CFI);
            Ok(())
        }
        Action::Ct(ct) => {
            let st = m.value(FieldId::CtState) as u32;
            let alg_bad = match ct.alg {
                Some(21) => m.nw_proto() != ipproto::TCP,
                Some(69) => m.nw_proto() != ipproto::UDP,
                _ => false,
            };
            if !m.is_ip_any() || (st & crate::field::ct_state::INVALID != 0 && ct.commit) || alg_bad
            {
                return Err("OFPBAC_MATCH_INCONSISTENT");
            }
            if let CtZone::Field(sf) = &ct.zone {
                check_subfield(sf, m)?;
            }
            if let Some(n) = &ct.nat {
                let dl = m.dl_type();
                let bad = match n.range {
                    Some(NatRange::V4 { .. }) => dl != ETH_TYPE_IP,
                    Some(NatRange::V6 { .. }) => dl != ETH_TYPE_IPV6,
                    None => false,
                };
                if bad {
                    return Err("OFPBAC_MATCH_INCONSISTENT");
                }
            }
            for e in &ct.exec {
                check_action(e, m, table, usable)?;
            }
            Ok(())
        }
    }
}

/// Splits `text` at OVS's `ofp_extract_actions` point: `(match part, actions part)`.
pub(crate) fn split_actions(text: &str) -> Option<(&str, &str)> {
    let i = text.find("action")?;
    let rest = &text[i + 1..];
    let eq = rest.find('=')?;
    Some((&text[..i], &rest[eq + 1..]))
}

/// Full parse (see module docs).
pub(crate) fn parse_flow_impl(text: &str, dialect: Dialect) -> Result<FlowSpec, ParseError> {
    let cx = Ctx { text };
    let Some((mpart, apart)) = split_actions(text) else {
        return Err(cx.err(text.len(), "", "must specify an action"));
    };
    let ParsedMatch {
        mut spec,
        mut usable,
    } = parse_match_part(&cx, mpart, true)?;
    let mut acx = ActCtx {
        cx: &cx,
        usable: Protocols::ANY,
        depth: 0,
    };
    let actions = acx.parse_list(apart, false)?;
    usable = usable.and(acx.usable);
    let aat = offset_in(text, apart);
    check_actions(&actions, &spec.match_, spec.table, &mut usable).map_err(|e| {
        cx.err(
            aat,
            apart,
            format!("actions are invalid with specified match ({e})"),
        )
    })?;
    let allowed = match dialect {
        Dialect::OpenFlow10 => Protocols::OF10_ANY,
        Dialect::OpenFlow13 => Protocols::OF13_OXM,
    };
    let Some(proto) = usable.and(allowed).lowest() else {
        if usable == Protocols::NONE {
            return Err(cx.err(
                aat,
                apart,
                "actions are invalid with specified match (OFPBAC_MATCH_INCONSISTENT)",
            ));
        }
        return Err(cx.err(0, text, "no usable protocol"));
    };
    spec.actions = actions;
    super::canon::canonicalize(&mut spec, proto, dialect).map_err(|e| cx.err(0, text, e))?;
    Ok(spec)
}
