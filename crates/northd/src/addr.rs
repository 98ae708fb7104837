//! Address text as the NB holds it: `"MAC IP..."` port addresses, `IP/PLEN` router networks,
//! and the IPv6 link-local address derived from a MAC (EUI-64).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A 48-bit Ethernet address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// Parses `xx:xx:xx:xx:xx:xx`.
    pub fn parse(s: &str) -> Option<Mac> {
        let mut m = [0u8; 6];
        let mut n = 0;
        for part in s.split(':') {
            if n == 6 || part.is_empty() || part.len() > 2 {
                return None;
            }
            m[n] = u8::from_str_radix(part, 16).ok()?;
            n += 1;
        }
        (n == 6).then_some(Mac(m))
    }

    /// The IPv6 link-local address made from this MAC (EUI-64, U/L bit flipped).
    pub fn ipv6_lla(self) -> Ipv6Addr {
        let m = self.0;
        Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 0x02,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ])
    }

    /// True for a multicast (group) address.
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl std::fmt::Display for Mac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// An IPv4 address with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Net {
    /// The address as written.
    pub addr: Ipv4Addr,
    /// Prefix length (32 when none was written).
    pub plen: u8,
}

impl Ipv4Net {
    /// The netmask.
    pub fn mask(self) -> Ipv4Addr {
        Ipv4Addr::from(if self.plen == 0 {
            0
        } else {
            u32::MAX << (32 - self.plen as u32)
        })
    }
    /// The network address.
    pub fn network(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & u32::from(self.mask()))
    }
    /// The broadcast address.
    pub fn broadcast(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !u32::from(self.mask()))
    }
}

/// An IPv6 address with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv6Net {
    /// The address as written.
    pub addr: Ipv6Addr,
    /// Prefix length (128 when none was written).
    pub plen: u8,
}

impl Ipv6Net {
    /// The network address.
    pub fn network(self) -> Ipv6Addr {
        let m = if self.plen == 0 {
            0
        } else {
            u128::MAX << (128 - self.plen as u32)
        };
        Ipv6Addr::from(u128::from(self.addr) & m)
    }
}

/// One port's addresses: a MAC and the IPs that go with it (OVN's `lport_addresses`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LportAddresses {
    /// The MAC as written (lower-cased).
    pub mac: Option<Mac>,
    /// IPv4 addresses.
    pub ipv4: Vec<Ipv4Net>,
    /// IPv6 addresses (not including the link-local one a router port gets from its MAC).
    pub ipv6: Vec<Ipv6Net>,
}

/// Parses `IP[/PLEN]` (v4 or v6).
pub fn parse_ip_net(s: &str) -> Option<IpAddr> {
    s.split('/').next()?.parse().ok()
}

/// Parses one IPv4 `A.B.C.D[/PLEN]`.
pub fn parse_ipv4_net(s: &str) -> Option<Ipv4Net> {
    let (a, p) = match s.split_once('/') {
        Some((a, p)) => (a, p.parse::<u8>().ok().filter(|&p| p <= 32)?),
        None => (s, 32),
    };
    Some(Ipv4Net {
        addr: a.parse().ok()?,
        plen: p,
    })
}

/// Parses one IPv6 `ADDR[/PLEN]`.
pub fn parse_ipv6_net(s: &str) -> Option<Ipv6Net> {
    let (a, p) = match s.split_once('/') {
        Some((a, p)) => (a, p.parse::<u8>().ok().filter(|&p| p <= 128)?),
        None => (s, 128),
    };
    Some(Ipv6Net {
        addr: a.parse().ok()?,
        plen: p,
    })
}

/// Parses a port `addresses`/`port_security` entry: `MAC [IP[/PLEN]...]`. `None` when the
/// MAC or an address is malformed.
pub fn parse_lsp_addresses(s: &str) -> Option<LportAddresses> {
    let mut words = s.split_whitespace();
    let mac = Mac::parse(words.next()?)?;
    let mut la = LportAddresses {
        mac: Some(mac),
        ..Default::default()
    };
    for w in words {
        if w.contains(':') {
            la.ipv6.push(parse_ipv6_net(w)?);
        } else {
            la.ipv4.push(parse_ipv4_net(w)?);
        }
    }
    Some(la)
}

/// Parses a router port's MAC and `networks` (each `IP/PLEN`).
pub fn parse_lrp_networks(mac: &str, networks: &[String]) -> Option<LportAddresses> {
    let mut la = LportAddresses {
        mac: Some(Mac::parse(mac)?),
        ..Default::default()
    };
    for n in networks {
        if !n.contains('/') {
            return None;
        }
        if n.contains(':') {
            la.ipv6.push(parse_ipv6_net(n)?);
        } else {
            la.ipv4.push(parse_ipv4_net(n)?);
        }
    }
    Some(la)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lla_matches_ovn() {
        let m = Mac::parse("0a:58:64:40:00:02").unwrap();
        assert_eq!(m.ipv6_lla().to_string(), "fe80::858:64ff:fe40:2");
        assert_eq!(m.to_string(), "0a:58:64:40:00:02");
    }

    #[test]
    fn nets() {
        let n = parse_ipv4_net("100.64.0.2/16").unwrap();
        assert_eq!(n.network().to_string(), "100.64.0.0");
        assert_eq!(n.broadcast().to_string(), "100.64.255.255");
        assert!(parse_ipv4_net("1.2.3.4/33").is_none());
        let a = parse_lsp_addresses("0a:58:0a:80:00:03 10.128.0.3").unwrap();
        assert_eq!(a.ipv4[0].plen, 32);
        assert!(parse_lsp_addresses("zz:58:0a:80:00:03 10.128.0.3").is_none());
        assert!(parse_lsp_addresses("0a:58:0a:80:00:03 10.128.0.300").is_none());
    }
}
