//! Connection keys: zone + addresses + L4 identifiers, the unit the table is indexed by.
//!
//! Why: a connection is found from either direction, so each stored connection has two
//! keys — its original-direction key and its reply key (the reversed original, or after NAT
//! the reversed *translated* tuple) — and both point at the one entry.
//!
//! How: [`ConnKey`] mirrors OVS's `struct conn_key` (two endpoints, L3 type, zone,
//! protocol). Addresses are 16 bytes; an IPv4 address occupies the first four (OVS's
//! `union ct_addr` lays them out the same way). For TCP/UDP an endpoint carries its port;
//! for ICMP/ICMPv6 echo-like messages each endpoint carries the echo id and a type (the
//! source endpoint the message's type, the destination endpoint the reverse type), so that
//! a request and its reply are each other's reversed key. Other protocols have no L4 key.
//!
//! Invariant: `k.reversed().reversed() == k`; the zone, family and protocol never change
//! under reversal. Hashing uses a seeded multiply-rotate mix over five 64-bit words: fast
//! on the per-packet path, and seeded per tracker so that keys an attacker picks do not
//! collide in a predictable way (it is not a cryptographic PRF; shards bound the damage).

use std::hash::{BuildHasher, Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(crate) struct ConnKey {
    /// Source address (IPv4 in the first four bytes).
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Source port, or ICMP echo id.
    pub sport: u16,
    /// Destination port, or ICMP echo id.
    pub dport: u16,
    /// Conntrack zone.
    pub zone: u16,
    /// ICMP type of the source endpoint (0 for other protocols).
    pub stype: u8,
    /// ICMP type of the destination endpoint.
    pub dtype: u8,
    /// IP protocol.
    pub proto: u8,
    /// IPv6 (else IPv4).
    pub v6: bool,
}

impl ConnKey {
    /// The other direction's key.
    pub fn reversed(&self) -> ConnKey {
        ConnKey {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            stype: self.dtype,
            dtype: self.stype,
            ..*self
        }
    }

    /// True for ICMP over IPv4 or ICMPv6 over IPv6 (keys with echo ids, not ports).
    pub fn is_icmp(&self) -> bool {
        (!self.v6 && self.proto == 1) || (self.v6 && self.proto == 58)
    }

    /// True for TCP and UDP (the protocols whose ports NAT rewrites).
    pub fn is_pat(&self) -> bool {
        self.proto == 6 || self.proto == 17
    }

    pub fn addr(&self, b: &[u8; 16]) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(*b))
        } else {
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        }
    }

    pub fn src_ip(&self) -> IpAddr {
        self.addr(&self.src)
    }

    pub fn dst_ip(&self) -> IpAddr {
        self.addr(&self.dst)
    }

    fn words(&self) -> [u64; 5] {
        let w = |b: &[u8; 16], i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        [
            w(&self.src, 0),
            w(&self.src, 8) ^ w(&self.dst, 0).rotate_left(17),
            w(&self.dst, 8),
            u64::from(self.sport) | u64::from(self.dport) << 16 | u64::from(self.zone) << 32,
            u64::from(self.stype)
                | u64::from(self.dtype) << 8
                | u64::from(self.proto) << 16
                | u64::from(self.v6) << 24,
        ]
    }

    /// A cheap hash for the per-PMD cache index: three folded 64×64→128 multiplies over the
    /// five words (foldhash's mixing step). The cache verifies the full key, so collisions
    /// only cost a miss — but they must be rare: the former xor-fold of the words before
    /// one multiply let address and port bits cancel, and keys that differ by a counter in
    /// both (the usual shape of test and scan traffic) collided in half the probes.
    pub fn cache_hash(&self) -> u64 {
        let w = self.words();
        let a = folded_mul(w[0] ^ 0x243f_6a88_85a3_08d3, w[1] ^ 0x1319_8a2e_0370_7344);
        let b = folded_mul(w[2] ^ 0xa409_3822_299f_31d0, w[3] ^ 0x082e_fa98_ec4e_6c89);
        folded_mul(a ^ w[4] ^ 0x4528_21e6_38d0_1377, b ^ 0xbe54_66cf_34e9_0c6c)
    }

    /// Seeded 64-bit hash of the key.
    pub fn hash_with(&self, seed: u64) -> u64 {
        let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
        for w in self.words() {
            h = (h.rotate_left(23) ^ w).wrapping_mul(0x2545_f491_4f6c_dd1d);
        }
        mix64(h)
    }
}

/// Addresses of a family as the 16-byte key representation.
pub(crate) fn ip_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v.octets());
            b
        }
        IpAddr::V6(v) => v.octets(),
    }
}

/// The high and low halves of the full product, xored.
#[inline]
fn folded_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A final avalanche (splitmix64's finaliser).
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `BuildHasher` for maps keyed by [`ConnKey`]: the key hashes itself once
/// ([`ConnKey::hash_with`]) and the hasher passes that value through.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHashBuilder {
    pub seed: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHasher {
    seed: u64,
    h: u64,
}

impl BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            seed: self.seed,
            h: 0,
        }
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.h
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for types other than ConnKey; fold bytes in.
        for b in bytes {
            self.h = (self.h.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.h = mix64(v ^ self.seed);
    }
}

/// The hash a table map built with `KeyHashBuilder { seed }` gives `TableKey(*k)`
/// (`TableKey::hash` writes `hash_with(0)`, `KeyHasher` mixes the seed in): the table
/// computes it once per operation and passes it to the map (twin test below).
#[inline]
pub(crate) fn table_hash(k: &ConnKey, seed: u64) -> u64 {
    mix64(k.hash_with(0) ^ seed)
}

/// The table's key wrapper: hashing a `TableKey` writes the key's seeded hash once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableKey(pub ConnKey);

impl Hash for TableKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The tracker's seed is mixed in by `KeyHasher::write_u64`.
        state.write_u64(self.0.hash_with(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `table_hash` is what the map's own hasher computes for a `TableKey`: probes with a
    /// precomputed hash and the map's growth (which rehashes with the builder) agree.
    #[test]
    fn table_hash_is_the_maps_hash() {
        let mut rng = testutil::rng::TestRng::new(0x7ab1e);
        let mut r = move |n: u64| rng.below(n);
        for _ in 0..1000 {
            let seed = r(u64::MAX);
            let k = ConnKey {
                zone: r(4) as u16,
                proto: [6, 17, 1][r(3) as usize],
                src: (u128::from(r(u64::MAX)) << 64 | u128::from(r(5))).to_le_bytes(),
                dst: u128::from(r(7)).to_le_bytes(),
                sport: r(9) as u16,
                dport: r(9) as u16,
                ..ConnKey::default()
            };
            let b = KeyHashBuilder { seed };
            assert_eq!(b.hash_one(TableKey(k)), table_hash(&k, seed));
        }
    }

    #[test]
    fn reverse_twice_is_identity_and_hash_differs_by_direction() {
        let k = ConnKey {
            src: [1; 16],
            dst: [2; 16],
            sport: 5,
            dport: 6,
            zone: 3,
            stype: 8,
            dtype: 0,
            proto: 1,
            v6: false,
        };
        assert_eq!(k.reversed().reversed(), k);
        // Counter-shaped keys (address and port both step) spread over the cache's slots.
        let mut seen = std::collections::HashSet::new();
        for i in 0..20_000u32 {
            let mut k = ConnKey {
                proto: 17,
                sport: 1024 + i as u16,
                dport: 53,
                ..ConnKey::default()
            };
            k.src[..4].copy_from_slice(&[10, 0, 0, 1]);
            k.dst[..4].copy_from_slice(&(0x0a10_0000 + i).to_be_bytes());
            seen.insert(k.cache_hash() & 0x3_ffff);
            seen.insert(k.reversed().cache_hash() & 0x3_ffff);
        }
        // 40,000 keys into 262,144 slots: ~2,900 collisions expected from a random hash.
        assert!(seen.len() > 36_000, "{}", seen.len());
        assert_ne!(k.hash_with(1), k.reversed().hash_with(1));
        assert_ne!(k.hash_with(1), k.hash_with(2));
    }
}
