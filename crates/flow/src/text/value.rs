//! Value syntaxes of the flow language, parsed and printed the way OVS does.
//!
//! Parsers mirror OVS's C helpers byte for byte where it matters for which inputs are accepted:
//! `parse_int_string` (hex of any length up to the field width, else `strtoull` base 0),
//! `ovs_scan`'s `%hhu`/`%hhx` (silent wrap-around, so `10.0.0.256` is `10.0.0.0`), `inet_pton`
//! for IPv6, OVS's flag syntaxes for `ct_state` and `tcp_flags`. Printers mirror `ip_format_masked`,
//! `ipv6_format_masked` (glibc `inet_ntop`), `eth_format_masked` and `format_flags_masked`.
//!
//! Nothing here panics on any input: every parser returns `None`/`Err` instead.

use std::fmt::Write as _;

/// Why an integer did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntErr {
    /// Not a number.
    Syntax,
    /// Too large for the field.
    Range,
}

/// C `strtoull(s, &tail, 0)`: optional leading spaces and sign, `0x` hex, leading-`0` octal,
/// else decimal. Returns the value (negated modulo 2^64 for `-`) and the tail.
pub fn strtoull0(s: &str) -> Result<(u64, &str), IntErr> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = i < b.len() && b[i] == b'-';
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let mut base = 10u32;
    if i + 1 < b.len() && b[i] == b'0' && (b[i + 1] == b'x' || b[i + 1] == b'X') {
        if i + 2 < b.len() && (b[i + 2] as char).is_ascii_hexdigit() {
            base = 16;
            i += 2;
        } else {
            // "0x" with no hex digit: parses the "0", tail starts at "x".
            return Ok((0, &s[i + 1..]));
        }
    } else if i < b.len() && b[i] == b'0' {
        base = 8;
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while i < b.len() {
        let dg = match (b[i] as char).to_digit(base) {
            Some(d) => d,
            None => break,
        };
        match v
            .checked_mul(u64::from(base))
            .and_then(|x| x.checked_add(u64::from(dg)))
        {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return Err(IntErr::Syntax);
    }
    if overflow {
        return Err(IntErr::Range);
    }
    Ok((if neg { v.wrapping_neg() } else { v }, &s[i..]))
}

/// C `strtoll(s, 10 or 0)` over the whole string into an `int` (OVS `str_to_int`).
pub fn str_to_int(s: &str) -> Option<i64> {
    let (v, tail) = strtoull0(s).ok()?;
    if !tail.is_empty() {
        return None;
    }
    // strtoll semantics: reinterpret; reject values outside i32.
    let neg = s.trim_start().starts_with('-');
    let mag = if neg { v.wrapping_neg() } else { v };
    if neg {
        if mag > 0x8000_0000 {
            return None;
        }
        Some(-(mag as i64))
    } else {
        if mag > i32::MAX as u64 {
            return None;
        }
        Some(mag as i64)
    }
}

/// OVS `str_to_u16`: `str_to_int` then 0..=65535.
pub fn str_to_u16(s: &str) -> Option<u16> {
    str_to_int(s).and_then(|v| u16::try_from(v).ok())
}

/// OVS `str_to_u8`.
pub fn str_to_u8(s: &str) -> Option<u8> {
    str_to_int(s).and_then(|v| u8::try_from(v).ok())
}

/// OVS `str_to_u64` (`strtoull` base 0 over the whole string; non-empty).
pub fn str_to_u64(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    match strtoull0(s) {
        Ok((v, "")) => Some(v),
        _ => None,
    }
}

/// OVS `str_to_u32` (`strtoul` base 0; values above 2^32 wrap as on LP64 `unsigned long`
/// assignment, i.e. are truncated).
pub fn str_to_u32(s: &str) -> Option<u32> {
    str_to_u64(s).map(|v| v as u32)
}

/// OVS `str_to_uint(s, 10)`: decimal (optional sign/spaces), 0..=u32::MAX.
pub fn str_to_uint10(s: &str) -> Option<u32> {
    let t = s.trim_start();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v = digits.bytes().try_fold(0u64, |a, b| {
        a.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })?;
    if neg && v != 0 {
        return None;
    }
    u32::try_from(v).ok()
}

/// OVS `parse_int_string` for a field of `n_bytes` bytes: `0x` followed by hex digits (any
/// count, spaces skipped, significant digits must fit), else `strtoull` base 0 (must fit).
/// Returns the value and the unparsed tail.
pub fn parse_int_string(s: &str, n_bytes: u32) -> Result<(u128, &str), IntErr> {
    let n_bytes = n_bytes.min(16);
    if let Some(rest) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        let b = rest.as_bytes();
        let mut i = 0;
        let mut v: u128 = 0;
        let mut len = 0u32;
        loop {
            while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
                i += 1;
            }
            let Some(h) = b.get(i).and_then(|c| (*c as char).to_digit(16)) else {
                break;
            };
            if h != 0 || len > 0 {
                if (len + 1).div_ceil(2) > n_bytes {
                    return Err(IntErr::Range);
                }
                v = (v << 4) | u128::from(h);
                len += 1;
            }
            i += 1;
        }
        return Ok((v, &rest[i..]));
    }
    let (v, tail) = strtoull0(s)?;
    let v = u128::from(v);
    if n_bytes < 16 && v >> (8 * n_bytes) != 0 {
        return Err(IntErr::Range);
    }
    Ok((v, tail))
}

/// `ovs_scan` `%u`/`%x`-style unsigned integer at the start of `s` in `base` (0 = auto), with
/// OVS's wrap-around; returns the value and the number of bytes used.
pub fn scan_uint(s: &str, base: u32) -> Option<(u64, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    let neg = b.first() == Some(&b'-');
    if matches!(b.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut base = base;
    if (base == 0 || base == 16)
        && b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
    {
        base = 16;
        i += 2;
    } else if base == 0 {
        base = if b.get(i) == Some(&b'0') { 8 } else { 10 };
    }
    let start = i;
    let mut v: u64 = 0;
    while let Some(d) = b.get(i).and_then(|c| (*c as char).to_digit(16)) {
        if d >= base {
            break;
        }
        v = v.wrapping_mul(u64::from(base)).wrapping_add(u64::from(d));
        i += 1;
    }
    if i == start {
        return None;
    }
    Some((if neg { v.wrapping_neg() } else { v }, i))
}

/// `%d` as `ovs_scan` reads it (decimal only when base is 10).
pub fn scan_int(s: &str) -> Option<(i64, usize)> {
    let (v, n) = scan_uint(s, 10)?;
    Some((v as i32 as i64, n))
}

/// Scans a dotted quad (`%hhu.%hhu.%hhu.%hhu`) at the start of `s`.
pub fn scan_ipv4(s: &str) -> Option<(u32, usize)> {
    let mut pos = 0;
    let mut ip = 0u32;
    for k in 0..4 {
        if k > 0 {
            if s.as_bytes().get(pos) != Some(&b'.') {
                return None;
            }
            pos += 1;
        }
        let (v, n) = scan_uint(&s[pos..], 10)?;
        ip = (ip << 8) | u32::from(v as u8);
        pos += n;
    }
    Some((ip, pos))
}

/// Scans `xx:xx:xx:xx:xx:xx` (`%hhx` each) at the start of `s`.
pub fn scan_eth(s: &str) -> Option<(u64, usize)> {
    let mut pos = 0;
    let mut mac = 0u64;
    for k in 0..6 {
        if k > 0 {
            if s.as_bytes().get(pos) != Some(&b':') {
                return None;
            }
            pos += 1;
        }
        let (v, n) = scan_uint(&s[pos..], 16)?;
        mac = (mac << 8) | u64::from(v as u8);
        pos += n;
    }
    Some((mac, pos))
}

/// Prefix mask of `bits` leading ones in a `width`-bit value.
pub fn prefix_mask(bits: u32, width: u32) -> u128 {
    let full = if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    if bits == 0 {
        0
    } else if bits >= width {
        full
    } else {
        full ^ (full >> bits)
    }
}

/// OVS `ip_parse_masked_len`: `a.b.c.d`, `a.b.c.d/e.f.g.h` or `a.b.c.d/len`; returns
/// `(ip, mask, bytes used)`.
pub fn ip_parse_masked_len(s: &str) -> Result<(u32, u32, usize), String> {
    let Some((ip, n)) = scan_ipv4(s) else {
        return Err(format!("{s}: invalid IP address"));
    };
    if s.as_bytes().get(n) == Some(&b'/') {
        if let Some((m, n2)) = scan_ipv4(&s[n + 1..]) {
            return Ok((ip, m, n + 1 + n2));
        }
        if let Some((p, n2)) = scan_int(&s[n + 1..]) {
            if !(0..=32).contains(&p) {
                return Err(format!(
                    "{s}: IPv4 network prefix bits not between 0 and 32, inclusive"
                ));
            }
            return Ok((ip, prefix_mask(p as u32, 32) as u32, n + 1 + n2));
        }
    }
    Ok((ip, u32::MAX, n))
}

/// OVS `ip_parse_masked`: the whole string.
pub fn ip_parse_masked(s: &str) -> Result<(u32, u32), String> {
    let (ip, m, n) = ip_parse_masked_len(s)?;
    if n != s.len() {
        return Err(format!("{s}: invalid IP address"));
    }
    Ok((ip, m))
}

/// `inet_pton(AF_INET6)`.
pub fn ipv6_pton(s: &str) -> Option<u128> {
    // glibc accepts exactly what std accepts for the forms OVS users write, except that std
    // also rejects nothing glibc accepts; both reject zone ids and brackets.
    s.parse::<std::net::Ipv6Addr>().ok().map(u128::from)
}

/// Bytes of `s` that `%46[0123456789abcdefABCDEF:.]` would take.
fn ipv6_scan_len(s: &str) -> usize {
    s.bytes()
        .take(46)
        .take_while(|c| c.is_ascii_hexdigit() || *c == b':' || *c == b'.')
        .count()
}

/// OVS `ipv6_parse_masked`: `addr`, `addr/len` or `addr/mask`, whole string.
pub fn ipv6_parse_masked(s: &str) -> Result<(u128, u128), String> {
    let bad = || format!("{s}: invalid IPv6 address");
    let lead = s.len() - s.trim_start().len();
    let t = &s[lead..];
    let n = ipv6_scan_len(t);
    if n == 0 {
        return Err(bad());
    }
    let ip = ipv6_pton(&t[..n]).ok_or_else(bad)?;
    let rest = &t[n..];
    let (mask, used) = if let Some(r) = rest.strip_prefix('/') {
        if let Some((p, k)) = scan_int(r) {
            if !(0..=128).contains(&p) {
                return Err(format!(
                    "{s}: IPv6 network prefix bits not between 0 and 128, inclusive"
                ));
            }
            (prefix_mask(p as u32, 128), 1 + k)
        } else {
            let k = ipv6_scan_len(r);
            if k == 0 {
                (u128::MAX, 0)
            } else {
                let m = ipv6_pton(&r[..k]).ok_or_else(|| format!("{s}: Invalid IPv6 mask"))?;
                (m, 1 + k)
            }
        }
    } else {
        (u128::MAX, 0)
    };
    if used != rest.len() {
        return Err(bad());
    }
    Ok((ip, mask))
}

/// OVS `eth_format`/`eth_format_masked`.
pub fn fmt_eth(out: &mut String, mac: u64, mask: Option<u64>) {
    let b = mac.to_be_bytes();
    let _ = write!(
        out,
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    );
    if let Some(m) = mask.filter(|m| m & 0xffff_ffff_ffff != 0xffff_ffff_ffff) {
        out.push('/');
        fmt_eth(out, m, None);
    }
}

/// Dotted quad.
pub fn fmt_ipv4(out: &mut String, ip: u32) {
    let b = ip.to_be_bytes();
    let _ = write!(out, "{}.{}.{}.{}", b[0], b[1], b[2], b[3]);
}

/// OVS `ip_format_masked`: address, `/len` for prefix masks, `/mask` otherwise.
pub fn fmt_ipv4_masked(out: &mut String, ip: u32, mask: u32) {
    fmt_ipv4(out, ip);
    if mask != u32::MAX {
        if crate::ofp::fields::is_cidr(u128::from(mask), 32) {
            let _ = write!(out, "/{}", mask.count_ones());
        } else {
            out.push('/');
            fmt_ipv4(out, mask);
        }
    }
}

/// glibc `inet_ntop(AF_INET6)` (BIND algorithm: longest run of ≥ 2 zero words becomes `::`,
/// first one on ties; IPv4-compatible and -mapped addresses end in a dotted quad).
pub fn fmt_ipv6(out: &mut String, a: u128) {
    let w: [u16; 8] = core::array::from_fn(|i| (a >> (112 - 16 * i)) as u16);
    let (mut best, mut best_len) = (usize::MAX, 0);
    let mut i = 0;
    while i < 8 {
        if w[i] == 0 {
            let s = i;
            while i < 8 && w[i] == 0 {
                i += 1;
            }
            if i - s > best_len {
                best = s;
                best_len = i - s;
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best = usize::MAX;
    }
    let mut i = 0;
    while i < 8 {
        if i == best {
            if i == 0 {
                out.push(':');
            }
            out.push(':');
            i += best_len;
            continue;
        }
        if i == 6 && best == 0 && (best_len == 6 || (best_len == 5 && w[5] == 0xffff)) {
            fmt_ipv4(out, a as u32);
            return;
        }
        let _ = write!(out, "{:x}", w[i]);
        if i < 7 {
            out.push(':');
        }
        i += 1;
    }
}

/// OVS `ipv6_format_masked`.
pub fn fmt_ipv6_masked(out: &mut String, a: u128, mask: u128) {
    fmt_ipv6(out, a);
    if mask != u128::MAX {
        if crate::ofp::fields::is_cidr(mask, 128) {
            let _ = write!(out, "/{}", mask.count_ones());
        } else {
            out.push('/');
            fmt_ipv6(out, mask);
        }
    }
}

/// Names of `ct_state` bits (bit value → name).
pub fn ct_state_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x01 => "new",
        0x02 => "est",
        0x04 => "rel",
        0x08 => "rpl",
        0x10 => "inv",
        0x20 => "trk",
        0x40 => "snat",
        0x80 => "dnat",
        _ => return None,
    })
}

/// Names of TCP flag bits.
pub fn tcp_flag_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x001 => "fin",
        0x002 => "syn",
        0x004 => "rst",
        0x008 => "psh",
        0x010 => "ack",
        0x020 => "urg",
        0x040 => "ece",
        0x080 => "cwr",
        0x100 => "ns",
        0x200 => "[200]",
        0x400 => "[400]",
        0x800 => "[800]",
        _ => return None,
    })
}

/// OVS `parse_flags` with `end = '\0'` and a mask: `V/M` numbers, `+a-b` masked names, or
/// `a|b|N` unmasked. Returns `(flags, mask)`; unmasked forms give mask `u32::MAX`.
pub fn parse_flags(
    s: &str,
    name: fn(u32) -> Option<&'static str>,
    field: &str,
    allowed: u32,
) -> Result<(u32, u32), String> {
    let unknown = || format!("{s}: unknown {field} flag(s)");
    // "%i/%i"
    let numeric = scan_uint(s, 0).and_then(|(v, n)| {
        let rest = s.get(n..)?.strip_prefix('/')?;
        scan_uint(rest, 0).map(|(m, _)| (v as u32, m as u32))
    });
    if let Some((v, m)) = numeric {
        if v & !allowed != 0 || m & !allowed != 0 {
            return Err(unknown());
        }
        return Ok((v, m));
    }
    let b = s.as_bytes();
    if matches!(b.first(), Some(b'+' | b'-')) {
        let (mut flags, mut mask) = (0u32, 0u32);
        let mut i = 0;
        while i < b.len() {
            let set = match b[i] {
                b'+' => true,
                b'-' => false,
                _ => {
                    return Err(format!(
                        "{}: {field} must be preceded by '+' (for SET) or '-' (NOT SET)",
                        &s[i..]
                    ));
                }
            };
            i += 1;
            let rest = &s[i..];
            let mut found = None;
            for k in 0..32 {
                let bit = 1u32 << k;
                if let Some(n) = name(bit).filter(|n| {
                    rest.starts_with(n)
                        && matches!(rest.as_bytes().get(n.len()), None | Some(b'+' | b'-'))
                }) {
                    found = Some((bit, n.len()));
                    break;
                }
            }
            let Some((bit, len)) = found else {
                return Err(unknown());
            };
            if mask & bit != 0 {
                return Err(format!(
                    "{rest}: Each {field} flag can be specified only once"
                ));
            }
            if bit & allowed == 0 {
                return Err(unknown());
            }
            if set {
                flags |= bit;
            }
            mask |= bit;
            i += len;
        }
        return Ok((flags, mask));
    }
    let mut result = 0u32;
    let mut i = 0;
    while i < b.len() {
        if let Some((v, n)) = scan_uint(&s[i..], 0) {
            if v & !u64::from(allowed) != 0 {
                return Err(unknown());
            }
            result |= v as u32;
            i += n + usize::from(b.get(i + n) == Some(&b'|'));
            continue;
        }
        let rest = &s[i..];
        let mut found = None;
        for k in 0..32 {
            let bit = 1u32 << k;
            if let Some(n) = name(bit).filter(|n| {
                rest.starts_with(n) && matches!(rest.as_bytes().get(n.len()), None | Some(b'|'))
            }) {
                found = Some((bit, n.len()));
                break;
            }
        }
        let Some((bit, len)) = found else {
            return Err(unknown());
        };
        if bit & allowed == 0 {
            return Err(unknown());
        }
        result |= bit;
        i += len + usize::from(b.get(i + len) == Some(&b'|'));
    }
    Ok((result, u32::MAX))
}

/// OVS `format_flags` with `|`.
pub fn fmt_flags(out: &mut String, name: fn(u32) -> Option<&'static str>, flags: u32) {
    if flags == 0 {
        out.push('0');
        return;
    }
    let mut bad = 0;
    let mut first = true;
    for k in 0..32 {
        let bit = 1u32 << k;
        if flags & bit == 0 {
            continue;
        }
        match name(bit) {
            Some(n) => {
                if !first {
                    out.push('|');
                }
                out.push_str(n);
                first = false;
            }
            None => bad |= bit,
        }
    }
    if bad != 0 {
        if !first {
            out.push('|');
        }
        let _ = write!(out, "0x{bad:x}");
    }
}

/// OVS `format_flags_masked` (without the name).
pub fn fmt_flags_masked(
    out: &mut String,
    name: fn(u32) -> Option<&'static str>,
    flags: u32,
    mask: u32,
    max_mask: u32,
) {
    if mask == max_mask {
        fmt_flags(out, name, flags);
        return;
    }
    if mask == 0 {
        out.push_str("0/0");
        return;
    }
    for k in 0..32 {
        let bit = 1u32 << k;
        if mask & bit == 0 {
            continue;
        }
        out.push(if flags & bit != 0 { '+' } else { '-' });
        out.push_str(name(bit).unwrap_or("[Unknown]"));
    }
}

/// OVS `ds_put_hex`: `0x` and the value's bytes in hex without leading zeros (`0x0` for 0).
pub fn fmt_hex(out: &mut String, v: u128) {
    let _ = write!(out, "0x{v:x}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> String {
        let mut o = String::new();
        fmt_ipv6(&mut o, ipv6_pton(s).unwrap_or(0));
        o
    }

    #[test]
    fn ipv6_text_matches_glibc() {
        assert_eq!(v6("::1"), "::1");
        assert_eq!(v6("::"), "::");
        assert_eq!(v6("::1.2.3.4"), "::1.2.3.4");
        assert_eq!(v6("::ffff:1.2.3.4"), "::ffff:1.2.3.4");
        assert_eq!(v6("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
        assert_eq!(v6("fe80::1:0"), "fe80::1:0");
        assert_eq!(v6("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
    }

    #[test]
    fn ints_like_c() {
        assert_eq!(parse_int_string("0x00ff", 1), Ok((0xff, "")));
        assert_eq!(parse_int_string("0x100", 1), Err(IntErr::Range));
        assert_eq!(parse_int_string("256", 1), Err(IntErr::Range));
        assert_eq!(parse_int_string("010", 1), Ok((8, "")));
        assert_eq!(parse_int_string("5/0xf", 1), Ok((5, "/0xf")));
        assert_eq!(str_to_u16("0x10"), Some(16));
        assert_eq!(str_to_u16("65536"), None);
        assert_eq!(scan_ipv4("10.0.0.256"), Some((0x0a00_0000, 10)));
    }

    #[test]
    fn flags() {
        let r = parse_flags("+trk-new", ct_state_name, "ct_state", 0xff);
        assert_eq!(r, Ok((0x20, 0x21)));
        let r = parse_flags("trk|est", ct_state_name, "ct_state", 0xff);
        assert_eq!(r, Ok((0x22, u32::MAX)));
        assert!(parse_flags("+bogus", ct_state_name, "ct_state", 0xff).is_err());
        let mut o = String::new();
        fmt_flags_masked(&mut o, tcp_flag_name, 0x2, 0x12, 0xfff);
        assert_eq!(o, "+syn-ack");
    }
}
