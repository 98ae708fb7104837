//! Internet checksums (RFC 1071), pseudo-header sums, incremental updates (RFC 1624), and the
//! CRC32c used by SCTP (RFC 4960 appendix B).
//!
//! Conventions: [`sum`] returns the folded 16-bit ones'-complement sum (not complemented);
//! [`checksum`] returns its complement, the value that goes into a header. Sums of separate
//! regions combine with [`combine`] as long as each region starts at an even offset of the
//! checksummed data. Incremental updates assume the changed field is 16-bit aligned within
//! the checksummed data (true for every address, port and length field this crate knows).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Folds a wide ones'-complement accumulator to 16 bits (end-around carry).
#[inline]
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Ones'-complement sum of `data` as big-endian 16-bit words (an odd trailing byte is padded
/// with a zero byte), folded to 16 bits, not complemented.
///
/// Works eight bytes at a time with a 64-bit end-around-carry accumulator: since
/// 2^16 ≡ 1 (mod 0xffff), a 64-bit ones'-complement sum folds to the same 16-bit sum.
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let (chunks, rest) = data.as_chunks::<8>();
    for c in chunks {
        let (s, carry) = acc.overflowing_add(u64::from_be_bytes(*c));
        acc = s + u64::from(carry);
    }
    // Fold first so the few remaining additions cannot overflow.
    let mut acc = u64::from(fold(acc));
    let (words, tail) = rest.as_chunks::<2>();
    for w in words {
        acc += u64::from(u16::from_be_bytes(*w));
    }
    if let Some(&b) = tail.first() {
        acc += u64::from(b) << 8;
    }
    fold(acc)
}

/// Ones'-complement sum of partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The Internet checksum of `data`: `!sum(data)`.
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// True when `data`, checksum field included, sums to 0xffff (the RFC 1071 verification).
pub fn verify(data: &[u8]) -> bool {
    sum(data) == 0xffff
}

/// Checksum of an IPv4 header, computed as if its checksum field (bytes 10..12) were zero.
/// A header shorter than 12 bytes is summed as it is.
pub fn ipv4_header_checksum(header: &[u8]) -> u16 {
    match (header.get(..10), header.get(12..)) {
        (Some(a), Some(b)) => !combine(&[sum(a), sum(b)]),
        _ => checksum(header),
    }
}

/// True when an IPv4 header's checksum field is correct.
pub fn verify_ipv4_header(header: &[u8]) -> bool {
    verify(header)
}

/// Sum of the IPv4 pseudo header (RFC 793/768): addresses, zero, protocol, upper-layer length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u16 {
    let mut b = [0u8; 12];
    b[0..4].copy_from_slice(&src.octets());
    b[4..8].copy_from_slice(&dst.octets());
    b[9] = protocol;
    b[10..12].copy_from_slice(&len.to_be_bytes());
    sum(&b)
}

/// Sum of the IPv6 pseudo header (RFC 8200 §8.1): addresses, 32-bit upper-layer length,
/// zeros, next header.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) -> u16 {
    let mut b = [0u8; 40];
    b[0..16].copy_from_slice(&src.octets());
    b[16..32].copy_from_slice(&dst.octets());
    b[32..36].copy_from_slice(&len.to_be_bytes());
    b[39] = next_header;
    sum(&b)
}

/// The addresses of a transport checksum's pseudo header, for either IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PseudoHeader {
    /// Over IPv4.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
    },
    /// Over IPv6.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
    },
}

impl PseudoHeader {
    /// Sum of the pseudo header for `protocol` and an upper-layer length `len`.
    /// Over IPv4 a length above 65535 is truncated to 16 bits (it cannot occur in a valid
    /// IPv4 packet).
    pub fn sum(&self, protocol: u8, len: usize) -> u16 {
        match *self {
            PseudoHeader::V4 { src, dst } => pseudo_header_v4(src, dst, protocol, len as u16),
            PseudoHeader::V6 { src, dst } => {
                pseudo_header_v6(src, dst, protocol, u32::try_from(len).unwrap_or(u32::MAX))
            }
        }
    }

    /// Checksum of `segment` (with its checksum field zeroed or included, see
    /// [`PseudoHeader::verify`]) over this pseudo header.
    pub fn checksum(&self, protocol: u8, segment: &[u8]) -> u16 {
        !combine(&[self.sum(protocol, segment.len()), sum(segment)])
    }

    /// True when `segment`, checksum field included, verifies over this pseudo header.
    pub fn verify(&self, protocol: u8, segment: &[u8]) -> bool {
        combine(&[self.sum(protocol, segment.len()), sum(segment)]) == 0xffff
    }
}

/// RFC 1624 eqn. 3: new checksum after a 16-bit field changes from `old` to `new`:
/// `HC' = ~(~HC + ~m + m')`.
///
/// Agrees with a full recompute except when the whole data becomes all zeros (a full
/// recompute then gives 0xffff, the update gives 0x0000: both are ones'-complement zero).
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!hc) + u64::from(!old) + u64::from(new))
}

/// RFC 1624 update for a 32-bit field (two 16-bit words), e.g. an IPv4 address.
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let acc = u64::from(!hc)
        + u64::from(!(old >> 16) as u16)
        + u64::from(!(old as u16))
        + u64::from(new >> 16)
        + u64::from(new as u16);
    !fold(acc)
}

/// RFC 1624 update for a 128-bit field (eight 16-bit words), e.g. an IPv6 address.
pub fn update128(hc: u16, old: [u8; 16], new: [u8; 16]) -> u16 {
    let mut acc = u64::from(!hc);
    let (o, _) = old.as_chunks::<2>();
    let (n, _) = new.as_chunks::<2>();
    for (o, n) in o.iter().zip(n) {
        acc += u64::from(!u16::from_be_bytes(*o)) + u64::from(u16::from_be_bytes(*n));
    }
    !fold(acc)
}

/// RFC 1624 update for a field of any length that starts at an even offset of the
/// checksummed data: `old` and `new` are its bytes before and after (equal lengths; an odd
/// last byte is the high byte of its 16-bit word, as [`sum`] pads it). `update_bytes(hc, o,
/// n)` equals [`update16`]/[`update32`]/[`update128`] on 2-, 4- and 16-byte fields. Extra
/// bytes of the longer slice, if the lengths differ, are ignored.
pub fn update_bytes(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    let n = old.len().min(new.len());
    let (old, new) = (&old[..n], &new[..n]);
    // ~m summed is 0xffff·words − sum(m): fold(!hc + Σ!m + Σm') with Σ!m = !sum(m) mod 0xffff.
    !combine(&[!hc, !sum(old), sum(new)])
}

/// CRC32c (Castagnoli, reflected polynomial 0x82F63B78) lookup table.
const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut k = 0;
        while k < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
            k += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC32c of `data` (initial value and final xor 0xffffffff). `crc32c(b"123456789")` is
/// 0xe3069283.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_update(0, data)
}

/// Continues a CRC32c: `crc32c_update(crc32c(a), b) == crc32c(a ++ b)`.
pub fn crc32c_update(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = CRC32C_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Trivially simple RFC 1071 sum: one byte pair at a time, fold after every add.
    fn ref_sum(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        let mut i = 0;
        while i < data.len() {
            let hi = u32::from(data[i]);
            let lo = u32::from(*data.get(i + 1).unwrap_or(&0));
            s += (hi << 8) | lo;
            s = (s & 0xffff) + (s >> 16);
            i += 2;
        }
        s as u16
    }

    /// Bitwise CRC32c, no table.
    fn ref_crc32c(data: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82f6_3b78
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // Wikipedia's example header, checksum b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert!(verify_ipv4_header(&h));
        assert_eq!(ipv4_header_checksum(&h), 0xb861);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
        assert!(!verify_ipv4_header(&h));
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(ref_crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[]), 0);
    }

    #[test]
    fn empty_and_zero() {
        assert_eq!(sum(&[]), 0);
        assert_eq!(sum(&[0; 33]), 0);
        assert_eq!(sum(&[0xff; 64]), 0xffff);
    }

    fn not_all_zero(v: &[u8]) -> bool {
        v.iter().any(|&b| b != 0)
    }

    proptest! {
        #[test]
        fn sum_matches_reference(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
            prop_assert_eq!(sum(&data), ref_sum(&data));
        }

        #[test]
        fn sum_split_combines(data in proptest::collection::vec(any::<u8>(), 0..600), cut in 0usize..300) {
            let cut = (cut * 2).min(data.len() & !1);
            let (a, b) = data.split_at(cut);
            prop_assert_eq!(combine(&[sum(a), sum(b)]), ref_sum(&data));
        }

        #[test]
        fn crc32c_matches_reference(data in proptest::collection::vec(any::<u8>(), 0..600), cut in 0usize..600) {
            prop_assert_eq!(crc32c(&data), ref_crc32c(&data));
            let cut = cut.min(data.len());
            prop_assert_eq!(crc32c_update(crc32c(&data[..cut]), &data[cut..]), crc32c(&data));
        }

        #[test]
        fn filled_checksum_verifies(mut data in proptest::collection::vec(any::<u8>(), 2..200), at in 0usize..100) {
            let at = (at * 2) % (data.len() & !1);
            data[at] = 0;
            data[at + 1] = 0;
            let c = checksum(&data);
            data[at..at + 2].copy_from_slice(&c.to_be_bytes());
            prop_assert!(verify(&data));
        }

        #[test]
        fn update16_matches_recompute(mut data in proptest::collection::vec(any::<u8>(), 2..120), at in 0usize..60, new in any::<u16>()) {
            let at = (at * 2) % (data.len() & !1);
            let hc = checksum(&data);
            let old = u16::from_be_bytes([data[at], data[at + 1]]);
            data[at..at + 2].copy_from_slice(&new.to_be_bytes());
            prop_assume!(not_all_zero(&data));
            prop_assert_eq!(update16(hc, old, new), checksum(&data));
        }

        #[test]
        fn update32_matches_recompute(mut data in proptest::collection::vec(any::<u8>(), 4..120), at in 0usize..60, new in any::<u32>()) {
            let at = (at * 2) % ((data.len() - 2) & !1);
            let hc = checksum(&data);
            let old = u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
            data[at..at + 4].copy_from_slice(&new.to_be_bytes());
            prop_assume!(not_all_zero(&data));
            prop_assert_eq!(update32(hc, old, new), checksum(&data));
        }

        #[test]
        fn update128_matches_recompute(mut data in proptest::collection::vec(any::<u8>(), 16..120), at in 0usize..60, new in any::<[u8; 16]>()) {
            let at = (at * 2) % ((data.len() - 14) & !1);
            let hc = checksum(&data);
            let mut old = [0u8; 16];
            old.copy_from_slice(&data[at..at + 16]);
            data[at..at + 16].copy_from_slice(&new);
            prop_assume!(not_all_zero(&data));
            prop_assert_eq!(update128(hc, old, new), checksum(&data));
        }

        #[test]
        fn update_bytes_matches_recompute(mut data in proptest::collection::vec(any::<u8>(), 2..120), at in 0usize..60, new in proptest::collection::vec(any::<u8>(), 1..20)) {
            let at = (at * 2) % (data.len() & !1);
            let end = (at + new.len()).min(data.len());
            let new = &new[..end - at];
            let hc = checksum(&data);
            let old = data[at..end].to_vec();
            data[at..end].copy_from_slice(new);
            prop_assume!(not_all_zero(&data));
            prop_assert_eq!(update_bytes(hc, &old, new), checksum(&data));
            if old.len() == 4 {
                let (o, n) = (u32::from_be_bytes([old[0], old[1], old[2], old[3]]), u32::from_be_bytes([new[0], new[1], new[2], new[3]]));
                prop_assert_eq!(update_bytes(hc, &old, new), update32(hc, o, n));
            }
        }

        #[test]
        fn pseudo_v4_matches_reference(src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), p in any::<u8>(), len in any::<u16>()) {
            let mut b = Vec::new();
            b.extend_from_slice(&src);
            b.extend_from_slice(&dst);
            b.extend_from_slice(&[0, p]);
            b.extend_from_slice(&len.to_be_bytes());
            prop_assert_eq!(pseudo_header_v4(src.into(), dst.into(), p, len), ref_sum(&b));
        }

        #[test]
        fn pseudo_v6_matches_reference(src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), p in any::<u8>(), len in any::<u32>()) {
            let mut b = Vec::new();
            b.extend_from_slice(&src);
            b.extend_from_slice(&dst);
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, p]);
            prop_assert_eq!(pseudo_header_v6(src.into(), dst.into(), p, len), ref_sum(&b));
        }
    }
}
