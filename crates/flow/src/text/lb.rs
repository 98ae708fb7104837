//! Text syntax of the load-balancing actions (issue #17, session 13): `multipath(...)`,
//! `bundle(...)`, `bundle_load(...)`; `sample(...)` and `check_pkt_larger(N)->dst`.
//! Parsed as `ovs-ofctl` does (OVS's `strtok` on `", "`, `atoi` numbers), printed as it
//! prints them; errors carry OVS's words.

use std::fmt::Write as _;

use crate::ofp::action::{Action, Subfield};
use crate::ofp::lb::{
    BUNDLE_MAX_MEMBERS, Bundle, BundleAlgorithm, HashFields, MpAlgorithm, Multipath, Sample,
    SampleDirection,
};
use crate::ofp::matching::Match;
use crate::ofp::port::OfPort;
use crate::text::parse::parse_subfield;

/// C's `atoi` as glibc has it: `(int) strtol(s, NULL, 10)` — leading blanks, a sign, digits
/// up to the first non-digit (none = 0), saturated to `long`, then truncated to `int`.
pub(crate) fn atoi(s: &str) -> i32 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for b in t.bytes().take_while(u8::is_ascii_digit) {
        v = v
            .saturating_mul(10)
            .saturating_add(i64::from(b - b'0') * if neg { -1 } else { 1 });
    }
    v as i32
}

/// C's `strtok_r(s, delims)` over the whole string: the non-empty tokens.
pub(crate) fn strtok<'a>(s: &'a str, delims: &'a [char]) -> impl Iterator<Item = &'a str> + 'a {
    s.split(move |c| delims.contains(&c))
        .filter(|t| !t.is_empty())
}

/// Parses the text inside `multipath(...)` (OVS `multipath_parse`).
pub(crate) fn parse_multipath(arg: &str) -> Result<Action, String> {
    let t: Vec<&str> = strtok(arg, &[',', ' ']).take(6).collect();
    let [fields, basis, algorithm, n_links, mp_arg, dst] = t[..] else {
        return Err(format!("{arg}: not enough arguments to multipath action"));
    };
    let fields =
        HashFields::from_name(fields).ok_or_else(|| format!("{arg}: unknown fields `{fields}'"))?;
    let basis = atoi(basis) as u16;
    let algorithm = MpAlgorithm::from_name(algorithm)
        .ok_or_else(|| format!("{arg}: unknown algorithm `{algorithm}'"))?;
    let n_links = atoi(n_links);
    if !(1..=65536).contains(&n_links) {
        return Err(format!(
            "{arg}: n_links {n_links} is not in valid range 1 to 65536"
        ));
    }
    let mp_arg = atoi(mp_arg) as u32;
    let dst = parse_subfield(dst)?;
    check_links_fit(arg, &dst, n_links as u32)?;
    Ok(Action::Multipath(Multipath {
        fields,
        basis,
        algorithm,
        max_link: (n_links - 1) as u16,
        arg: mp_arg,
        dst,
    }))
}

/// C's `strtok_r` with a saved position: each call may use other delimiters.
struct Strtok<'a> {
    rest: &'a str,
}

impl<'a> Strtok<'a> {
    fn next(&mut self, delims: &[char]) -> Option<&'a str> {
        let s = self.rest.trim_start_matches(|c| delims.contains(&c));
        if s.is_empty() {
            self.rest = s;
            return None;
        }
        let end = s.find(|c| delims.contains(&c)).unwrap_or(s.len());
        let tok = &s[..end];
        // strtok skips the one delimiter that ended the token.
        self.rest = s[end..].get(1..).unwrap_or("");
        Some(tok)
    }
}

/// Parses the text inside `bundle(...)` (`load` false) or `bundle_load(...)` (OVS
/// `bundle_parse` / `bundle_parse_load`).
pub(crate) fn parse_bundle(arg: &str, load: bool) -> Result<Action, String> {
    let mut t = Strtok { rest: arg };
    let cd = &[',', ' '];
    let fields = t.next(cd);
    let basis = t.next(cd);
    let algorithm = t.next(cd);
    let member_type = t.next(cd);
    let dst = if load { t.next(cd) } else { None };
    let delim = t.next(&[':', ' ']);
    let (Some(fields), Some(basis), Some(algorithm), Some(member_type), Some(delim)) =
        (fields, basis, algorithm, member_type, delim)
    else {
        return Err(format!("{arg}: not enough arguments to bundle action"));
    };
    if !delim.eq_ignore_ascii_case("members") && !delim.eq_ignore_ascii_case("slaves") {
        return Err(format!(
            "{arg}: missing member delimiter, expected `members', got `{delim}'"
        ));
    }
    let mut members = Vec::new();
    while members.len() < BUNDLE_MAX_MEMBERS {
        let Some(m) = t.next(&[',', ' ', '[', ']']) else {
            break;
        };
        members.push(OfPort::parse(m).ok_or_else(|| format!("{m}: bad port number"))?);
    }
    let basis = atoi(basis) as u16;
    let fields =
        HashFields::from_name(fields).ok_or_else(|| format!("{arg}: unknown fields `{fields}'"))?;
    let algorithm = BundleAlgorithm::from_name(algorithm)
        .ok_or_else(|| format!("{arg}: unknown algorithm `{algorithm}'"))?;
    if !member_type.eq_ignore_ascii_case("ofport") {
        return Err(format!("{arg}: unknown member_type `{member_type}'"));
    }
    let dst = match dst {
        Some(d) => Some(parse_subfield(d)?),
        None => None,
    };
    Ok(Action::Bundle(Bundle {
        fields,
        basis,
        algorithm,
        dst,
        members,
    }))
}

/// Parses the text inside `sample(...)` (OVS `parse_SAMPLE`).
pub(crate) fn parse_sample(arg: &str) -> Result<Action, String> {
    use crate::text::value::{str_to_u16, str_to_u64};
    let u32v = |v: &str| -> Result<u32, String> {
        if v.is_empty() {
            return Err("missing required numeric argument".into());
        }
        str_to_u64(v)
            .map(|x| x as u32)
            .ok_or_else(|| format!("invalid numeric format {v}"))
    };
    let mut s = Sample {
        probability: 0,
        collector_set_id: 0,
        obs_domain_id: 0,
        obs_point_id: 0,
        sampling_port: OfPort::ANY,
        direction: SampleDirection::Default,
    };
    for kv in crate::text::lex::KvIter::new(arg) {
        let v = kv.value;
        match kv.key {
            "probability" => {
                s.probability =
                    str_to_u16(v).ok_or_else(|| format!("invalid probability \"{v}\""))?;
                if s.probability == 0 {
                    return Err(format!("invalid probability value \"{v}\""));
                }
            }
            "collector_set_id" => s.collector_set_id = u32v(v)?,
            "obs_domain_id" => s.obs_domain_id = u32v(v)?,
            "obs_point_id" => s.obs_point_id = u32v(v)?,
            "sampling_port" => {
                s.sampling_port = OfPort::parse(v).ok_or_else(|| format!("{v}: unknown port"))?;
            }
            "ingress" => s.direction = SampleDirection::Ingress,
            "egress" => s.direction = SampleDirection::Egress,
            k => return Err(format!("invalid key \"{k}\" in \"sample\" argument")),
        }
    }
    if s.probability == 0 {
        return Err("non-zero \"probability\" must be specified on sample".into());
    }
    Ok(Action::Sample(s))
}

/// Parses the text after `check_pkt_larger(` (the lexer hands over `N)->dst`; OVS
/// `parse_CHECK_PKT_LARGER`).
pub(crate) fn parse_check_pkt_larger(arg: &str) -> Result<Action, String> {
    let Some(i) = arg.find("->") else {
        return Err(format!("{arg}: missing `->'"));
    };
    let key = &arg[i + 2..];
    if key.is_empty() {
        return Err(format!("{arg}: missing field name following `->'"));
    }
    let value = &arg[..i];
    let value = value.strip_suffix(')').unwrap_or(value);
    let dst = parse_subfield(key)?;
    if dst.n_bits != 1 {
        return Err("Only 1-bit destination field is allowed".into());
    }
    // OVS passes no name to `str_to_u16`, and glibc prints it as "(null)".
    let pkt_len = crate::text::value::str_to_u16(value)
        .ok_or_else(|| format!("invalid (null) \"{value}\""))?;
    Ok(Action::CheckPktLarger { pkt_len, dst })
}

/// A destination narrower than 16 bits must hold every link number.
fn check_links_fit(arg: &str, dst: &Subfield, n_links: u32) -> Result<(), String> {
    if dst.n_bits < 16 && n_links > (1u32 << dst.n_bits) {
        return Err(format!(
            "{arg}: {}-bit destination field has {} possible values, less than specified n_links {n_links}",
            dst.n_bits,
            1u32 << dst.n_bits
        ));
    }
    Ok(())
}

/// Prints an action of this module; false for any other action.
pub(crate) fn format_lb(out: &mut String, a: &Action) -> bool {
    match a {
        Action::Multipath(mp) => {
            let _ = write!(
                out,
                "multipath({},{},{},{},{},",
                mp.fields.name(),
                mp.basis,
                mp.algorithm.name(),
                u32::from(mp.max_link) + 1,
                mp.arg
            );
            crate::text::format::format_subfield(out, &mp.dst);
            out.push(')');
        }
        Action::Bundle(b) => {
            let _ = write!(
                out,
                "{}({},{},{},ofport,",
                if b.dst.is_some() {
                    "bundle_load"
                } else {
                    "bundle"
                },
                b.fields.name(),
                b.basis,
                b.algorithm.name()
            );
            if let Some(d) = &b.dst {
                crate::text::format::format_subfield(out, d);
                out.push(',');
            }
            out.push_str("members:");
            for (i, m) in b.members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{m}");
            }
            out.push(')');
        }
        Action::Sample(x) => {
            let _ = write!(
                out,
                "sample(probability={},collector_set_id={},obs_domain_id={},obs_point_id={}",
                x.probability, x.collector_set_id, x.obs_domain_id, x.obs_point_id
            );
            if x.sampling_port != OfPort::ANY {
                let _ = write!(out, ",sampling_port={}", x.sampling_port);
            }
            match x.direction {
                SampleDirection::Ingress => out.push_str(",ingress"),
                SampleDirection::Egress => out.push_str(",egress"),
                SampleDirection::Default => {}
            }
            out.push(')');
        }
        Action::CheckPktLarger { pkt_len, dst } => {
            let _ = write!(out, "check_pkt_larger({pkt_len})->");
            crate::text::format::format_subfield(out, dst);
        }
        _ => return false,
    }
    true
}

/// OVS `ofpacts_check` for the actions of this module (`mf_check_dst` on the destination).
pub(crate) fn check_lb(a: &Action, m: &Match) -> Result<(), &'static str> {
    match a {
        Action::Multipath(mp) => crate::text::parse::check_dst(&mp.dst, m),
        // OVS `bundle_check`.
        Action::Bundle(b) => {
            if let Some(d) = &b.dst {
                crate::text::parse::check_dst(d, m)?;
            }
            for &p in &b.members {
                if p != OfPort::ANY {
                    crate::text::parse::check_output_port(p)?;
                }
                if p == OfPort::CONTROLLER {
                    return Err("OFPBAC_BAD_OUT_PORT");
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// OVS's decoder refuses what the encoder wrote (`ovs-ofctl parse-flow`'s round trip).
pub(crate) fn canon_lb(a: &Action) -> Result<(), String> {
    if let Action::Bundle(b) = a
        && b.dst.is_some_and(|d| d.n_bits < 16)
    {
        // "bundle_load action requires at least 16 bit destination."
        return Err("decode error: OFPBAC_BAD_ARGUMENT".into());
    }
    Ok(())
}
