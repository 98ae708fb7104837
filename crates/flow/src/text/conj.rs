//! The `conjunction(id,k/n)` action's text (OVS `parse_CONJUNCTION`) and OVS's rule that
//! conjunctions may share an action list only with notes (`ofpacts_verify`).
//!
//! The numbers are read as OVS's `ovs_scan("%i , %hhu / %hhu %n")` reads them: the id in
//! decimal, `0x` hexadecimal or `0` octal with an optional sign, kept modulo 2^32 (OVS stores
//! the `int32` it scanned into a `uint32`); `k` and `n` modulo 2^8. Spaces are allowed around
//! the separators and at the end.

use crate::ofp::Action;

/// Scans an integer as C `strtoll` with base 0 (`%i`) or 10 (`%u`) from the start of `s`,
/// returning the value modulo 2^64 and the bytes used; `None` if no digit.
fn scan_int(s: &str, base0: bool) -> Option<(u64, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let mut radix = 10;
    if base0 && i < b.len() && b[i] == b'0' {
        if b.get(i + 1).is_some_and(|c| *c == b'x' || *c == b'X')
            && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            radix = 16;
            i += 2;
        } else {
            radix = 8;
        }
    }
    let start = i;
    let mut v: u64 = 0;
    while let Some(d) = b.get(i).and_then(|c| (*c as char).to_digit(radix)) {
        v = v.wrapping_mul(u64::from(radix)).wrapping_add(u64::from(d));
        i += 1;
    }
    if i == start {
        return None;
    }
    Some((if neg { v.wrapping_neg() } else { v }, i))
}

/// Skips whitespace, then requires `c`.
fn expect(s: &str, c: char) -> Option<&str> {
    s.trim_start().strip_prefix(c)
}

/// Parses the argument of `conjunction(...)` with OVS's checks and messages.
pub fn parse_conjunction(arg: &str) -> Result<Action, String> {
    const SYNTAX: &str = "\"conjunction\" syntax is \"conjunction(id,i/n)\"";
    let scan = || -> Option<(u32, u8, u8)> {
        let (id, n) = scan_int(arg, true)?;
        let rest = expect(&arg[n..], ',')?;
        let (k, n) = scan_int(rest, false)?;
        let rest = expect(&rest[n..], '/')?;
        let (nc, n) = scan_int(rest, false)?;
        if !rest[n..].trim().is_empty() {
            return None;
        }
        Some((id as u32, k as u8, nc as u8))
    };
    let (id, k, n) = scan().ok_or_else(|| SYNTAX.to_string())?;
    if n < 2 {
        Err("conjunction must have at least 2 clauses".into())
    } else if n > 64 {
        Err("conjunction must have at most 64 clauses".into())
    } else if k < 1 {
        Err("clause index must be positive".into())
    } else if k > n {
        Err("clause index must be less than or equal to number of clauses".into())
    } else {
        Ok(Action::Conjunction {
            id,
            clause: k - 1,
            n_clauses: n,
        })
    }
}

/// OVS's name of an action's kind (`ofpact_name`), as its error messages print it.
pub fn ofpact_name(a: &Action) -> String {
    match a {
        Action::Output { .. } => "output".into(),
        Action::OutputReg { .. } => "output_reg".into(),
        Action::OutputTrunc { .. } => "output_trunc".into(),
        Action::Load { .. } | Action::SetField { .. } => "set_field".into(),
        Action::ModVlanVid { .. } => "set_vlan_vid".into(),
        Action::ModVlanPcp { .. } => "set_vlan_pcp".into(),
        Action::PopVlan | Action::StripVlan => "strip_vlan".into(),
        other => {
            // Every other kind prints as its OVS name followed by `(`, `:` or nothing.
            let s = crate::text::format_actions(core::slice::from_ref(other));
            s.split(['(', ':', ','])
                .next()
                .unwrap_or_default()
                .to_string()
        }
    }
}

/// OVS `ofpacts_verify`'s conjunction rule: a list holding a `conjunction` may hold only
/// conjunctions and notes. On violation, the index of the first other action and OVS's
/// message.
pub fn check_conjunction_mix(acts: &[Action]) -> Result<(), (usize, String)> {
    if !acts.iter().any(|a| matches!(a, Action::Conjunction { .. })) {
        return Ok(());
    }
    match acts
        .iter()
        .position(|a| !matches!(a, Action::Conjunction { .. } | Action::Note(_)))
    {
        None => Ok(()),
        Some(i) => Err((
            i,
            format!(
                "\"conjunction\" actions may be used along with \"note\" but not any other kind \
                 of action (such as the \"{}\" action used here)",
                ofpact_name(&acts[i])
            ),
        )),
    }
}

/// Whether a rule with these actions is a soft (conjunctive) match: it has a conjunction.
pub fn is_conjunctive(acts: &[Action]) -> bool {
    acts.iter().any(|a| matches!(a, Action::Conjunction { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_ovs() {
        let c = |id: u32, k: u8, n: u8| Action::Conjunction {
            id,
            clause: k - 1,
            n_clauses: n,
        };
        assert_eq!(parse_conjunction("1,2/3"), Ok(c(1, 2, 3)));
        assert_eq!(parse_conjunction(" 0x10 , 1 / 2 "), Ok(c(16, 1, 2)));
        assert_eq!(parse_conjunction("4294967296,1/2"), Ok(c(0, 1, 2)));
        assert_eq!(parse_conjunction("010,1/64"), Ok(c(8, 1, 64)));
        for (arg, msg) in [
            ("1", "syntax"),
            ("1,2/3x", "syntax"),
            ("x,1/2", "syntax"),
            ("1,1/1", "at least 2"),
            ("1,1/65", "at most 64"),
            ("1,0/2", "positive"),
            ("1,3/2", "less than or equal"),
        ] {
            let e = parse_conjunction(arg).unwrap_err();
            assert!(e.contains(msg), "{arg}: {e}");
        }
    }
}
