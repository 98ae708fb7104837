//! Protocol numbers: ethertypes, IP protocol numbers, ICMP/ICMPv6 types, TCP flag bits.
//!
//! Plain integer constants, so any value seen on the wire stays representable.

/// Ethertypes (IEEE 802 / IANA).
pub mod ethertype {
    /// Internet Protocol version 4.
    pub const IPV4: u16 = 0x0800;
    /// Address Resolution Protocol.
    pub const ARP: u16 = 0x0806;
    /// Reverse ARP.
    pub const RARP: u16 = 0x8035;
    /// 802.1Q VLAN tag (C-tag).
    pub const VLAN: u16 = 0x8100;
    /// Internet Protocol version 6.
    pub const IPV6: u16 = 0x86dd;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// 802.1ad service tag (S-tag, QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Link Layer Discovery Protocol.
    pub const LLDP: u16 = 0x88cc;
    /// Values below this are 802.3 lengths, not ethertypes.
    pub const MIN_ETHERTYPE: u16 = 0x0600;

    /// True for the TPIDs this crate treats as VLAN tags (0x8100, 0x88a8).
    pub const fn is_vlan_tpid(t: u16) -> bool {
        t == VLAN || t == QINQ
    }
}

/// IP protocol / IPv6 next-header numbers (IANA).
pub mod ip_proto {
    /// IPv6 hop-by-hop options.
    pub const HOPOPT: u8 = 0;
    /// ICMP for IPv4.
    pub const ICMP: u8 = 1;
    /// IGMP.
    pub const IGMP: u8 = 2;
    /// IPv4 encapsulation.
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 encapsulation.
    pub const IPV6: u8 = 41;
    /// IPv6 routing header.
    pub const IPV6_ROUTE: u8 = 43;
    /// IPv6 fragment header.
    pub const IPV6_FRAG: u8 = 44;
    /// GRE.
    pub const GRE: u8 = 47;
    /// IPsec ESP.
    pub const ESP: u8 = 50;
    /// IPsec AH.
    pub const AH: u8 = 51;
    /// ICMP for IPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header".
    pub const IPV6_NONXT: u8 = 59;
    /// IPv6 destination options.
    pub const IPV6_OPTS: u8 = 60;
    /// SCTP.
    pub const SCTP: u8 = 132;
}

/// ICMPv4 message types (RFC 792).
pub mod icmpv4 {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 12;
}

/// ICMPv6 message types (RFC 4443, RFC 4861).
pub mod icmpv6 {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PKT_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect.
    pub const REDIRECT: u8 = 137;
}

/// TCP flag bits as held in [`crate::tcp::TcpFlags`] (the low 9 bits of bytes 12..14).
pub mod tcp_flags {
    /// No more data from sender.
    pub const FIN: u16 = 0x001;
    /// Synchronize sequence numbers.
    pub const SYN: u16 = 0x002;
    /// Reset the connection.
    pub const RST: u16 = 0x004;
    /// Push function.
    pub const PSH: u16 = 0x008;
    /// Acknowledgment field significant.
    pub const ACK: u16 = 0x010;
    /// Urgent pointer field significant.
    pub const URG: u16 = 0x020;
    /// ECN echo.
    pub const ECE: u16 = 0x040;
    /// Congestion window reduced.
    pub const CWR: u16 = 0x080;
    /// ECN nonce sum (RFC 3540, historic).
    pub const NS: u16 = 0x100;
    /// All nine flag bits.
    pub const ALL: u16 = 0x1ff;
}

/// ARP operation codes and hardware types.
pub mod arp {
    /// Hardware type: Ethernet.
    pub const HTYPE_ETHERNET: u16 = 1;
    /// ARP request.
    pub const OP_REQUEST: u16 = 1;
    /// ARP reply.
    pub const OP_REPLY: u16 = 2;
}
