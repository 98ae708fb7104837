//! Text syntax of the load-balancing actions (issue #17, session 13): `multipath(...)`.
//! Parsed as `ovs-ofctl` does (OVS's `strtok` on `", "`, `atoi` numbers), printed as it
//! prints them; errors carry OVS's words.

use std::fmt::Write as _;

use crate::ofp::action::{Action, Subfield};
use crate::ofp::lb::{HashFields, MpAlgorithm, Multipath};
use crate::ofp::matching::Match;
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
        _ => return false,
    }
    true
}

/// OVS `ofpacts_check` for the actions of this module (`mf_check_dst` on the destination).
pub(crate) fn check_lb(a: &Action, m: &Match) -> Result<(), &'static str> {
    match a {
        Action::Multipath(mp) => crate::text::parse::check_dst(&mp.dst, m),
        _ => Ok(()),
    }
}
