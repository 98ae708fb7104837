//! OpenFlow port numbers ([`OfPort`]), with OVS's names for the reserved ones.
//!
//! Ports use the OpenFlow 1.0 16-bit space, as OVS's `ofp_port_t` does: 1..0xff00 are
//! physical/logical ports, 0xfff7..=0xffff are reserved (`UNSET`, `IN_PORT`, `TABLE`, `NORMAL`,
//! `FLOOD`, `ALL`, `CONTROLLER`, `LOCAL`, `ANY`). OpenFlow 1.1+ 32-bit numbers convert with
//! [`OfPort::from_ofp11`] / [`OfPort::to_ofp11`].

/// An OpenFlow port number (OpenFlow 1.0 numbering, as OVS `ofp_port_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OfPort(pub u16);

impl OfPort {
    /// Highest ordinary port + 1 (`OFPP_MAX`).
    pub const MAX: OfPort = OfPort(0xff00);
    /// Not a port (`OFPP_UNSET`), first reserved number.
    pub const UNSET: OfPort = OfPort(0xfff7);
    /// The packet's input port.
    pub const IN_PORT: OfPort = OfPort(0xfff8);
    /// Submit to the first table (packet-out only).
    pub const TABLE: OfPort = OfPort(0xfff9);
    /// Traditional L2 switching.
    pub const NORMAL: OfPort = OfPort(0xfffa);
    /// All ports except input and those with flooding disabled.
    pub const FLOOD: OfPort = OfPort(0xfffb);
    /// All ports except input.
    pub const ALL: OfPort = OfPort(0xfffc);
    /// To the controller.
    pub const CONTROLLER: OfPort = OfPort(0xfffd);
    /// The local (bridge) port.
    pub const LOCAL: OfPort = OfPort(0xfffe);
    /// Wildcard / none (`OFPP_ANY`, also spelled `NONE`).
    pub const ANY: OfPort = OfPort(0xffff);

    const NAMES: [(&'static str, OfPort); 10] = [
        ("IN_PORT", OfPort::IN_PORT),
        ("TABLE", OfPort::TABLE),
        ("NORMAL", OfPort::NORMAL),
        ("FLOOD", OfPort::FLOOD),
        ("ALL", OfPort::ALL),
        ("CONTROLLER", OfPort::CONTROLLER),
        ("LOCAL", OfPort::LOCAL),
        ("ANY", OfPort::ANY),
        ("UNSET", OfPort::UNSET),
        ("NONE", OfPort::ANY),
    ];

    /// The reserved name, if this is a reserved port.
    pub fn reserved_name(self) -> Option<&'static str> {
        Self::NAMES
            .iter()
            .find(|(_, p)| *p == self)
            .map(|(n, _)| *n)
    }

    /// Parses a port as `ofputil_port_from_string` does: a decimal number (0..=0xffff, or
    /// 0xffffff00..=0xffffffff meaning the OpenFlow 1.1 reserved ports) or a reserved name
    /// (case-insensitive).
    pub fn parse(s: &str) -> Option<OfPort> {
        if s.starts_with('-') {
            return None;
        }
        if let Some(n) = parse_c_decimal(s) {
            if n <= 0xffff {
                return Some(OfPort(n as u16));
            }
            if (0xffff_ff00..=0xffff_ffff).contains(&n) {
                return Some(OfPort((n - 0xffff_0000) as u16));
            }
            return None;
        }
        Self::NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(s))
            .map(|(_, p)| *p)
    }

    /// The OpenFlow 1.1+ 32-bit number of this port.
    pub fn to_ofp11(self) -> u32 {
        if self.0 < 0xff00 {
            u32::from(self.0)
        } else {
            u32::from(self.0) + 0xffff_0000
        }
    }

    /// Converts an OpenFlow 1.1+ number; `None` for numbers with no 16-bit equivalent.
    pub fn from_ofp11(p: u32) -> Option<OfPort> {
        if p < 0xff00 {
            Some(OfPort(p as u16))
        } else if p >= 0xffff_ff00 {
            Some(OfPort((p - 0xffff_0000) as u16))
        } else {
            None
        }
    }
}

/// `strtoll(s, 10)` over the whole string (optional `+`, digits), as `str_to_uint` uses it.
fn parse_c_decimal(s: &str) -> Option<u64> {
    let t = s.strip_prefix('+').unwrap_or(s);
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u128 = t.bytes().try_fold(0u128, |a, b| {
        a.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })?;
    if v > u128::from(u32::MAX) {
        return Some(u64::MAX);
    }
    Some(v as u64)
}

impl core::fmt::Display for OfPort {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.reserved_name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(OfPort::parse("local"), Some(OfPort::LOCAL));
        assert_eq!(OfPort::parse("none"), Some(OfPort::ANY));
        assert_eq!(OfPort::parse("65535"), Some(OfPort::ANY));
        assert_eq!(OfPort::parse("4294967294"), Some(OfPort::LOCAL));
        assert_eq!(OfPort::parse("70000"), None);
        assert_eq!(OfPort::parse("0xfffe"), None);
        assert_eq!(OfPort::parse("-1"), None);
        assert_eq!(OfPort::ANY.to_string(), "ANY");
        assert_eq!(OfPort(7).to_string(), "7");
        assert_eq!(
            OfPort::from_ofp11(OfPort::LOCAL.to_ofp11()),
            Some(OfPort::LOCAL)
        );
    }
}
