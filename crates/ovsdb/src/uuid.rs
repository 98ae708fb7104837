//! Row identities: 128-bit UUIDs in their 8-4-4-4-12 hexadecimal text form.

use std::fmt;

/// An OVSDB row UUID.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub u128);

impl Uuid {
    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (hex digits in either case).
    pub fn parse(s: &str) -> Option<Uuid> {
        let b = s.as_bytes();
        if b.len() != 36 {
            return None;
        }
        let mut v: u128 = 0;
        for (i, &c) in b.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != b'-' {
                    return None;
                }
                continue;
            }
            let d = (c as char).to_digit(16)?;
            v = (v << 4) | d as u128;
        }
        Some(Uuid(v))
    }

    /// A UUID made from a counter-like value, for tests and generated ids.
    pub fn from_u128(v: u128) -> Uuid {
        Uuid(v)
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = format!("{:032x}", self.0);
        write!(
            f,
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = "d75a2782-92a1-409e-9961-3b28a36926c0";
        let u = Uuid::parse(s).unwrap();
        assert_eq!(u.to_string(), s);
        assert!(Uuid::parse("d75a2782-92a1-409e-9961-3b28a36926c").is_none());
        assert!(Uuid::parse("d75a2782x92a1-409e-9961-3b28a36926c0").is_none());
        assert!(Uuid::parse("g75a2782-92a1-409e-9961-3b28a36926c0").is_none());
    }
}
