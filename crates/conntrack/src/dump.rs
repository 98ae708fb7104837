//! `ovs-appctl dpctl/dump-conntrack` lines and flush tuples.
//!
//! Why: operators and the differential test read connections in OVS's text; a
//! [`ConnDump`]'s `Display` is one line of OVS 3.1's `ct_dpif_format_entry` without
//! `-m`/`-s`: `PROTO,orig=(…),reply=(…)[,zone=Z][,mark=M][,labels=0x…][,protoinfo=(state=S)]`.
//!
//! How: protocol by name for icmp, icmpv6, tcp, udp, sctp, udplite, dccp, igmp, otherwise
//! its number; tuples as `src=…,dst=…,sport=…,dport=…` or, for ICMP, `…,id=…,type=…,code=…`;
//! zone and mark only when non-zero; labels as hex without leading zeros; TCP's state is the
//! larger of the two peers' states with FIN_WAIT_2 shown as TIME_WAIT and SYN_RECV as
//! ESTABLISHED (OVS's `coalesce_tcp_state`). The remaining time (`timeout`, in seconds) is
//! kept in the struct (OVS prints it only with `-s`).
//!
//! Invariant: dumps are sorted (by zone, then the original tuple), so two trackers with the
//! same connections dump equal vectors.

use crate::key::ConnKey;
use crate::l4::tcp_state;
use crate::table::Conn;
use std::fmt;
use std::net::IpAddr;

/// One direction's tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DumpTuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Ports (TCP/UDP/other), or 0.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// ICMP (id, type, code) instead of ports.
    pub icmp: Option<(u16, u8, u8)>,
}

/// One connection as dumped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnDump {
    /// Zone.
    pub zone: u16,
    /// Original-direction tuple.
    pub orig: DumpTuple,
    /// Reply-direction tuple (after NAT: the translated reply).
    pub reply: DumpTuple,
    /// IP protocol.
    pub proto: u8,
    /// `ct_mark`.
    pub mark: u32,
    /// `ct_label`.
    pub label: u128,
    /// TCP (state_orig, state_reply), OVS `CT_DPIF_TCPS_*` numbers.
    pub tcp: Option<(u8, u8)>,
    /// Seconds until expiry.
    pub timeout: u64,
}

fn tuple(k: &ConnKey) -> DumpTuple {
    DumpTuple {
        src: k.src_ip(),
        dst: k.dst_ip(),
        sport: if k.is_icmp() { 0 } else { k.sport },
        dport: if k.is_icmp() { 0 } else { k.dport },
        icmp: k.is_icmp().then_some((k.sport, k.stype, 0)),
    }
}

pub(crate) fn to_dump(c: &Conn, now: u64) -> ConnDump {
    let m = c.lock();
    let exp = c.expiration.load(std::sync::atomic::Ordering::Relaxed);
    ConnDump {
        zone: c.key.zone,
        orig: tuple(&c.key),
        reply: tuple(&c.rev_key),
        proto: c.key.proto,
        mark: m.mark,
        label: u128::from(m.label[0]) | u128::from(m.label[1]) << 64,
        tcp: m.l4.tcp_states(),
        timeout: exp.saturating_sub(now) / 1000,
    }
}

impl fmt::Display for DumpTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "src={},dst={}", self.src, self.dst)?;
        match self.icmp {
            Some((id, ty, code)) => write!(f, ",id={id},type={ty},code={code}"),
            None => write!(f, ",sport={},dport={}", self.sport, self.dport),
        }
    }
}

fn proto_name(p: u8) -> Option<&'static str> {
    Some(match p {
        1 => "icmp",
        58 => "icmpv6",
        6 => "tcp",
        17 => "udp",
        132 => "sctp",
        136 => "udplite",
        33 => "dccp",
        2 => "igmp",
        _ => return None,
    })
}

impl fmt::Display for ConnDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match proto_name(self.proto) {
            Some(n) => f.write_str(n)?,
            None => write!(f, "{}", self.proto)?,
        }
        write!(f, ",orig=({}),reply=({})", self.orig, self.reply)?;
        if self.zone != 0 {
            write!(f, ",zone={}", self.zone)?;
        }
        if self.mark != 0 {
            write!(f, ",mark={}", self.mark)?;
        }
        if self.label != 0 {
            write!(f, ",labels={:#x}", self.label)?;
        }
        if let Some((o, r)) = self.tcp {
            let s = match o.max(r) {
                tcp_state::FIN_WAIT_2 => tcp_state::TIME_WAIT,
                tcp_state::SYN_RECV => tcp_state::ESTABLISHED,
                s => s,
            };
            write!(f, ",protoinfo=(state={})", tcp_state::name(s))?;
        }
        Ok(())
    }
}

/// A tuple naming one connection to flush (OVS `flush-conntrack` with a tuple).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlushTuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address (same family as `src`).
    pub dst: IpAddr,
    /// IP protocol.
    pub proto: u8,
    /// Source port (TCP/UDP).
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// ICMP echo id.
    pub icmp_id: u16,
    /// ICMP type (an echo-like request or reply type).
    pub icmp_type: u8,
    /// ICMP code.
    pub icmp_code: u8,
}

impl FlushTuple {
    pub(crate) fn key_in(&self, zone: u16) -> Option<ConnKey> {
        let v6 = match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => false,
            (IpAddr::V6(_), IpAddr::V6(_)) => true,
            _ => return None,
        };
        let mut k = ConnKey {
            src: crate::key::ip_bytes(self.src),
            dst: crate::key::ip_bytes(self.dst),
            zone,
            proto: self.proto,
            v6,
            ..ConnKey::default()
        };
        if k.is_icmp() {
            let rev = match (v6, self.icmp_type) {
                (false, 8) => 0,
                (false, 0) => 8,
                (false, 13) => 14,
                (false, 14) => 13,
                (false, 15) => 16,
                (false, 16) => 15,
                (true, 128) => 129,
                (true, 129) => 128,
                _ => return None,
            };
            if self.icmp_code != 0 {
                return None;
            }
            k.sport = self.icmp_id;
            k.dport = self.icmp_id;
            k.stype = self.icmp_type;
            k.dtype = rev;
        } else if k.is_pat() {
            k.sport = self.sport;
            k.dport = self.dport;
        }
        Some(k)
    }
}
