//! Datapath introspection text in Open vSwitch 3.1's formats: `dpctl/dump-flows` lines,
//! `dpctl/show` and `dpif-netdev/pmd-perf-show`.
//!
//! What is here: pure formatters over values the caller hands in (a key and mask, flow
//! stats, a port-name table, counters). Nothing here reads a clock or touches a PMD; the
//! caller passes `now` and the counters. Datapath *actions* are formatted elsewhere (the
//! caller passes their text), so this module does not depend on how actions are printed.
//!
//! # `dump-flows` rules (OVS 3.1 `odp_flow_format`, non-verbose, userspace datapath)
//!
//! Learned from `lib/odp-util.c` (`odp_flow_key_from_flow__`, `format_odp_key_attr__`) and
//! checked against a live `ovs-vswitchd` with the dummy datapath
//! (`crates/ofproto/tests/dpctl_ovs.rs`). The key is printed as the datapath's netlink
//! attributes, in this order, each one only when its mask is not all zero:
//! `skb_mark`, `ct_state`, `ct_zone`, `ct_mark`, `ct_label`, `ct_tuple4`/`ct_tuple6`,
//! `recirc_id`, `dp_hash`, `in_port`, `packet_type(ns=0,id=0)` (always: our packets are
//! Ethernet), `eth(src=,dst=)`, then per VLAN tag `eth_type(TPID),vlan(...),encap(` … `)`,
//! `eth_type`, one of `ipv4`/`ipv6`/`arp`, then `tcp`+`tcp_flags`/`udp`/`sctp`/`icmp`/
//! `icmpv6`+`nd` (no L4 for later fragments).
//!
//! - Which attributes exist depends on the **key** (`dl_type`, `nw_proto`, VLAN tags,
//!   fragment bits), whether they print on the **mask**. Inside an attribute, a sub-field
//!   with an all-zero mask is omitted, an exact one prints `name=value`, a partial one
//!   `name=value/mask` (value as stored in the key: OVS's userspace datapath keeps the
//!   *unmasked* packet key, so it prints e.g. `src=192.168.0.1/128.0.0.0`; a [`DpFlow`]
//!   stores the masked key and prints `src=128.0.0.0/128.0.0.0`; see [`format_key`]).
//! - Number styles: `recirc_id`, `dp_hash`, `skb_mark`, `ct_zone`, `ct_mark` `%#x` (so `0`
//!   and `0x5`); `eth_type` `0x%04x`; ports and `proto`, `ttl`, `hlimit`, ICMP type/code,
//!   ARP `op` decimal; `tos`/`tclass` and `label` `%#x`; masks `/%#x`; IPv4 masks dotted,
//!   never `/len`; `frag=no|first|later` (any `nw_frag` mask bit makes it exact).
//! - `in_port` exact prints the port's name when a name table is given, else its number.
//! - `vlan(vid=V[/M],pcp=P[/M][,cfi=0])`: `vid`/`pcp` printed when the key or mask part is
//!   non-zero. OVS parses at most `vlan-limit` tags ([`KeyFormat::vlan_limit`]; OVS's default
//!   is 1, ours 2 because `flow::extract` parses two tags, as OVS with `vlan-limit=2`).
//! - Not a formatting rule but visible in every dump of a tagged packet: OVS 3.1's
//!   `dpif-netdev` turns an all-wildcarded outer TCI mask into VID + CFI exact (`0x1fff`)
//!   before installing a megaflow ("the Netlink encoding of datapath flow keys cannot express
//!   wildcarding the presence of a VLAN tag", `handle_packet_upcall`), so its lines show
//!   `vlan(vid=V[,pcp=P/0x0])` where `ofproto/trace`'s `Megaflow:` has no VLAN match. A
//!   datapath that wants identical dumps applies the same rule at install.
//! - 802.3 frames (`dl_type` < 0x600): no `eth_type` in the key, and the line ends with
//!   `,eth_type(0/0xffff)`.
//! - `tcp_flags(syn|ack)` when the mask covers all 12 bits, else `tcp_flags(+syn-ack)`;
//!   `ct_state` is always the `+trk-new` form (the datapath mask is never all 32 bits).
//! - ICMP type/code are 8 bits: masks are the low byte of `tp_src`/`tp_dst` (OVS clears the
//!   high bytes in `xlate_wc_finish`); `nd(...)` only when both are exact.
//!
//! The line: `<key>, packets:N, bytes:N, used:never|<secs>.<ms>s[, flags:<S.F...>],
//! actions:<actions>`; a dump groups flows under `flow-dump from pmd on cpu core: N` /
//! `flow-dump from the main thread:`.
//!
//! # Invariants
//!
//! - Formatting never panics and never allocates beyond the output string.
//! - [`format_key`] depends only on the key bits the rules above consult and the mask: two
//!   keys equal under the mask with the same structural bits format identically.

use std::collections::BTreeMap;
use std::fmt::{self, Write};

use flow::field::{FRAG_ANY, FRAG_LATER, FieldId, VLAN_CFI};
use flow::text::value::{
    ct_state_name, fmt_eth, fmt_flags, fmt_flags_masked, fmt_ipv4, fmt_ipv6, tcp_flag_name,
};
use flow::{FlowKey, FlowMask};

use crate::megaflow::{DpFlow, FlowStatsSnapshot};

/// Datapath port number → name, for `in_port(NAME)` (OVS `--names`, the default of `-m`).
pub type PortNames = BTreeMap<u32, String>;

/// How to format a key.
#[derive(Debug, Clone, Copy)]
pub struct KeyFormat<'a> {
    /// Print `in_port` by name when the port is in the table.
    pub port_names: Option<&'a PortNames>,
    /// VLAN headers the datapath parses (OVS `other_config:vlan-limit`; 0 means no limit,
    /// which for our key is 2). Default 2: what `flow::extract` parses.
    pub vlan_limit: usize,
}

impl Default for KeyFormat<'_> {
    fn default() -> Self {
        KeyFormat {
            port_names: None,
            vlan_limit: 2,
        }
    }
}

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const ETH_TYPE_RARP: u16 = 0x8035;
const ETH_TYPE_MIN: u16 = 0x0600;

fn eth_type_vlan(t: u16) -> bool {
    t == 0x8100 || t == 0x88a8
}

/// Key and mask read field by field.
struct Km<'a> {
    key: &'a FlowKey,
    mask: &'a FlowMask,
}

impl Km<'_> {
    fn k(&self, f: FieldId) -> u128 {
        f.get(self.key)
    }
    fn m(&self, f: FieldId) -> u128 {
        f.get_mask(self.mask)
    }
}

/// One attribute list (a level of `odp_flow_format`): handles the `,` between attributes.
struct Attrs<'o> {
    out: &'o mut String,
    first: bool,
}

impl Attrs<'_> {
    fn start(&mut self, name: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        self.out.push_str(name);
        self.out.push('(');
    }
}

/// Removes one trailing `c` (OVS `ds_chomp`).
fn chomp(out: &mut String, c: char) {
    if out.ends_with(c) {
        out.pop();
    }
}

/// C's `%#x`: `0` for zero (no prefix), else `0x` and lower-case hex.
struct Hx(u128);

impl fmt::Display for Hx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("0")
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

/// `name=%#x[/%#x],` for an 8-bit field (`format_u8x`); nothing if the mask is zero.
fn u8x(out: &mut String, name: &str, key: u8, mask: u8) {
    if mask != 0 {
        let _ = write!(out, "{name}={}", Hx(key.into()));
        if mask != u8::MAX {
            let _ = write!(out, "/{}", Hx(mask.into()));
        }
        out.push(',');
    }
}

/// `name=%u[/%#x],` for an 8-bit field (`format_u8u`).
fn u8u(out: &mut String, name: &str, key: u8, mask: u8) {
    if mask != 0 {
        let _ = write!(out, "{name}={key}");
        if mask != u8::MAX {
            let _ = write!(out, "/{}", Hx(mask.into()));
        }
        out.push(',');
    }
}

/// `name=%u[/%#x],` for a 16-bit field (`format_be16`).
fn be16(out: &mut String, name: &str, key: u16, mask: u16) {
    if mask != 0 {
        let _ = write!(out, "{name}={key}");
        if mask != u16::MAX {
            let _ = write!(out, "/{}", Hx(mask.into()));
        }
        out.push(',');
    }
}

/// `name=a.b.c.d[/m.m.m.m],` (`format_ipv4`).
fn ipv4(out: &mut String, name: &str, key: u32, mask: u32) {
    if mask != 0 {
        out.push_str(name);
        out.push('=');
        fmt_ipv4(out, key);
        if mask != u32::MAX {
            out.push('/');
            fmt_ipv4(out, mask);
        }
        out.push(',');
    }
}

/// `name=addr[/mask],` (`format_in6_addr`).
fn in6(out: &mut String, name: &str, key: u128, mask: u128) {
    if mask != 0 {
        out.push_str(name);
        out.push('=');
        fmt_ipv6(out, key);
        if mask != u128::MAX {
            out.push('/');
            fmt_ipv6(out, mask);
        }
        out.push(',');
    }
}

/// `name=mac[/mask],` (`format_eth`).
fn eth(out: &mut String, name: &str, key: u64, mask: u64) {
    let mask = mask & 0xffff_ffff_ffff;
    if mask != 0 {
        out.push_str(name);
        out.push('=');
        fmt_eth(out, key, Some(mask));
        out.push(',');
    }
}

/// `%#x[/%#x]` of a 32-bit attribute printed whole (`recirc_id`, `dp_hash`, `skb_mark`,
/// `ct_mark`); the caller has checked the mask is not zero.
fn whole_u32(out: &mut String, key: u32, mask: u32) {
    let _ = write!(out, "{}", Hx(key.into()));
    if mask != u32::MAX {
        let _ = write!(out, "/{}", Hx(mask.into()));
    }
}

/// OVS `ds_put_hex` of a 128-bit big-endian value: `0x` + hex without leading zeros, or `0`.
fn put_hex128(out: &mut String, v: u128) {
    if v == 0 {
        out.push('0');
    } else {
        let _ = write!(out, "{v:#x}");
    }
}

/// OVS `format_vlan_tci` (non-verbose).
fn vlan_tci(out: &mut String, tci: u16, mask: u16) {
    let vid = |t: u16| t & 0x0fff;
    let pcp = |t: u16| (t >> 13) & 7;
    if vid(tci) != 0 || vid(mask) != 0 {
        let _ = write!(out, "vid={}", vid(tci));
        if vid(mask) != 0x0fff {
            let _ = write!(out, "/0x{:x}", vid(mask));
        }
        out.push(',');
    }
    if pcp(tci) != 0 || pcp(mask) != 0 {
        let _ = write!(out, "pcp={}", pcp(tci));
        if pcp(mask) != 7 {
            let _ = write!(out, "/0x{:x}", pcp(mask));
        }
        out.push(',');
    }
    if tci & VLAN_CFI == 0 {
        out.push_str("cfi=0,");
    }
    chomp(out, ',');
}

/// Appends the match part of a `dump-flows` line for `key` under `mask` (see the module doc
/// for the rules). `key` may be masked (a [`DpFlow`]'s key) or the unmasked packet key that
/// created the flow (what OVS's userspace datapath stores and prints); the two differ only in
/// the values printed before a partial `/mask` and in `pcp`/`vid`/`cfi` parts of a VLAN tag
/// whose mask is partial.
pub fn format_key(out: &mut String, key: &FlowKey, mask: &FlowMask, fmt: &KeyFormat<'_>) {
    use FieldId::*;
    let km = Km { key, mask };
    let mut a = Attrs { out, first: true };

    // Metadata.
    let mark_m = km.m(PktMark) as u32;
    if mark_m != 0 {
        a.start("skb_mark");
        whole_u32(a.out, km.k(PktMark) as u32, mark_m);
        a.out.push(')');
    }
    // OVS's flow.ct_state is 8 bits wide, so the datapath mask is never all-ones.
    let cs_m = km.m(CtState) as u32 & 0xff;
    if cs_m != 0 {
        a.start("ct_state");
        fmt_flags_masked(
            a.out,
            ct_state_name,
            km.k(CtState) as u32 & 0xff,
            cs_m,
            u32::MAX,
        );
        a.out.push(')');
    }
    let zone_m = km.m(CtZone) as u16;
    if zone_m != 0 {
        a.start("ct_zone");
        let _ = write!(a.out, "{}", Hx(km.k(CtZone) & 0xffff));
        if zone_m != u16::MAX {
            let _ = write!(a.out, "/{}", Hx(zone_m.into()));
        }
        a.out.push(')');
    }
    let cmark_m = km.m(CtMark) as u32;
    if cmark_m != 0 {
        a.start("ct_mark");
        whole_u32(a.out, km.k(CtMark) as u32, cmark_m);
        a.out.push(')');
    }
    let label_m = km.m(CtLabel);
    if label_m != 0 {
        a.start("ct_label");
        put_hex128(a.out, km.k(CtLabel));
        if label_m != u128::MAX {
            a.out.push('/');
            put_hex128(a.out, label_m);
        }
        a.out.push(')');
    }
    let dl_type = km.k(DlType) as u16;
    if km.k(CtNwProto) != 0 && (dl_type == ETH_TYPE_IP || dl_type == ETH_TYPE_IPV6) {
        let tuple_m = km.m(CtNwSrc) | km.m(CtNwDst) | km.m(CtNwProto) | km.m(CtTpSrc);
        let tuple_m = tuple_m | km.m(CtTpDst);
        if tuple_m != 0 {
            let v4 = dl_type == ETH_TYPE_IP;
            a.start(if v4 { "ct_tuple4" } else { "ct_tuple6" });
            if v4 {
                ipv4(a.out, "src", km.k(CtNwSrc) as u32, km.m(CtNwSrc) as u32);
                ipv4(a.out, "dst", km.k(CtNwDst) as u32, km.m(CtNwDst) as u32);
            }
            // IPv6 conntrack addresses are not in our key: they print as wildcarded.
            u8u(a.out, "proto", km.k(CtNwProto) as u8, km.m(CtNwProto) as u8);
            let (sp, dp) = if v4 {
                ("tp_src", "tp_dst")
            } else {
                ("src_port", "dst_port")
            };
            be16(a.out, sp, km.k(CtTpSrc) as u16, km.m(CtTpSrc) as u16);
            be16(a.out, dp, km.k(CtTpDst) as u16, km.m(CtTpDst) as u16);
            chomp(a.out, ',');
            a.out.push(')');
        }
    }
    for (f, name) in [(RecircId, "recirc_id"), (DpHash, "dp_hash")] {
        let m = km.m(f) as u32;
        if m != 0 {
            a.start(name);
            whole_u32(a.out, km.k(f) as u32, m);
            a.out.push(')');
        }
    }
    let port_m = km.m(InPort) as u32;
    if port_m != 0 {
        a.start("in_port");
        let port = km.k(InPort) as u32;
        match fmt.port_names.and_then(|n| n.get(&port)) {
            Some(name) if port_m == u32::MAX => a.out.push_str(name),
            _ => {
                let _ = write!(a.out, "{port}");
                if port_m != u32::MAX {
                    let _ = write!(a.out, "/{}", Hx(port_m.into()));
                }
            }
        }
        a.out.push(')');
    }
    a.start("packet_type");
    a.out.push_str("ns=0,id=0)");

    // L2.
    let (src_m, dst_m) = (km.m(DlSrc) as u64, km.m(DlDst) as u64);
    if src_m != 0 || dst_m != 0 {
        a.start("eth");
        eth(a.out, "src", km.k(DlSrc) as u64, src_m);
        eth(a.out, "dst", km.k(DlDst) as u64, dst_m);
        chomp(a.out, ',');
        a.out.push(')');
    }
    let max_vlans = if fmt.vlan_limit == 0 {
        2
    } else {
        fmt.vlan_limit.min(2)
    };
    let tags = [(Vlan0Tpid, Vlan0Tci), (Vlan1Tpid, Vlan1Tci)];
    let mut open = 0usize;
    let mut truncated = false;
    for &(tpid_f, tci_f) in tags.iter().take(max_vlans) {
        let tci = km.k(tci_f) as u16;
        let tpid = if tci != 0 {
            km.k(tpid_f) as u16
        } else if eth_type_vlan(dl_type) {
            // A truncated tag: its TPID is the ethertype.
            dl_type
        } else {
            break;
        };
        a.start("eth_type");
        let _ = write!(a.out, "0x{tpid:04x})");
        let tci_m = km.m(tci_f) as u16;
        if tci_m != 0 {
            a.start("vlan");
            vlan_tci(a.out, tci, tci_m);
            a.out.push(')');
        }
        a.start("encap");
        // The encap's contents are a new attribute list.
        a.first = true;
        open += 1;
        if tci == 0 {
            truncated = true;
            break;
        }
    }
    if !truncated {
        format_l3_l4(&mut a, &km, dl_type);
    }
    for _ in 0..open {
        a.out.push(')');
    }
    if open == 0 && dl_type < ETH_TYPE_MIN {
        a.out.push_str(",eth_type(0/0xffff)");
    }
}

/// `eth_type` and the L3/L4 attributes of one level (the innermost encap).
fn format_l3_l4(a: &mut Attrs<'_>, km: &Km<'_>, dl_type: u16) {
    use FieldId::*;
    if dl_type < ETH_TYPE_MIN {
        // No ethertype attribute in the key; the caller adds `eth_type(0/0xffff)` at the
        // top level (inside an encap the level is simply empty).
        return;
    }
    let t_m = km.m(DlType) as u16;
    if t_m != 0 {
        a.start("eth_type");
        let _ = write!(a.out, "0x{dl_type:04x}");
        if t_m != u16::MAX {
            let _ = write!(a.out, "/0x{t_m:04x}");
        }
        a.out.push(')');
    }
    if eth_type_vlan(dl_type) {
        return;
    }
    let frag = km.k(NwFrag) as u8;
    let frag_m = km.m(NwFrag) as u8;
    let frag_text = if frag & FRAG_ANY == 0 {
        "no"
    } else if frag & FRAG_LATER != 0 {
        "later"
    } else {
        "first"
    };
    let proto = km.k(NwProto) as u8;
    let is_ip = dl_type == ETH_TYPE_IP || dl_type == ETH_TYPE_IPV6;
    if dl_type == ETH_TYPE_IP {
        let any = km.m(NwSrc) | km.m(NwDst) | km.m(NwProto) | km.m(NwTos) | km.m(NwTtl);
        if any != 0 || frag_m & FRAG_ANY != 0 {
            a.start("ipv4");
            ipv4(a.out, "src", km.k(NwSrc) as u32, km.m(NwSrc) as u32);
            ipv4(a.out, "dst", km.k(NwDst) as u32, km.m(NwDst) as u32);
            u8u(a.out, "proto", proto, km.m(NwProto) as u8);
            u8x(a.out, "tos", km.k(NwTos) as u8, km.m(NwTos) as u8);
            u8u(a.out, "ttl", km.k(NwTtl) as u8, km.m(NwTtl) as u8);
            if frag_m & FRAG_ANY != 0 {
                let _ = write!(a.out, "frag={frag_text},");
            }
            chomp(a.out, ',');
            a.out.push(')');
        }
    } else if dl_type == ETH_TYPE_IPV6 {
        let any = km.m(Ipv6Src)
            | km.m(Ipv6Dst)
            | km.m(Ipv6Label)
            | km.m(NwProto)
            | km.m(NwTos)
            | km.m(NwTtl);
        if any != 0 || frag_m & FRAG_ANY != 0 {
            a.start("ipv6");
            in6(a.out, "src", km.k(Ipv6Src), km.m(Ipv6Src));
            in6(a.out, "dst", km.k(Ipv6Dst), km.m(Ipv6Dst));
            let (label, label_m) = (km.k(Ipv6Label) as u32, km.m(Ipv6Label) as u32);
            if label_m != 0 {
                let _ = write!(a.out, "label={}", Hx(label.into()));
                if label_m & 0xfffff != 0xfffff {
                    let _ = write!(a.out, "/{}", Hx(label_m.into()));
                }
                a.out.push(',');
            }
            u8u(a.out, "proto", proto, km.m(NwProto) as u8);
            u8x(a.out, "tclass", km.k(NwTos) as u8, km.m(NwTos) as u8);
            u8u(a.out, "hlimit", km.k(NwTtl) as u8, km.m(NwTtl) as u8);
            if frag_m & FRAG_ANY != 0 {
                let _ = write!(a.out, "frag={frag_text},");
            }
            chomp(a.out, ',');
            a.out.push(')');
        }
    } else if dl_type == ETH_TYPE_ARP || dl_type == ETH_TYPE_RARP {
        let op_m = match km.m(NwProto) as u8 {
            u8::MAX => u16::MAX,
            m => u16::from(m),
        };
        let any = km.m(NwSrc) | km.m(NwDst) | km.m(ArpSha) | km.m(ArpTha);
        if any != 0 || op_m != 0 {
            a.start("arp");
            ipv4(a.out, "sip", km.k(NwSrc) as u32, km.m(NwSrc) as u32);
            ipv4(a.out, "tip", km.k(NwDst) as u32, km.m(NwDst) as u32);
            be16(a.out, "op", u16::from(proto), op_m);
            eth(a.out, "sha", km.k(ArpSha) as u64, km.m(ArpSha) as u64);
            eth(a.out, "tha", km.k(ArpTha) as u64, km.m(ArpTha) as u64);
            chomp(a.out, ',');
            a.out.push(')');
        }
    }
    if !is_ip || frag & FRAG_LATER != 0 {
        return;
    }
    let (sp, dp) = (km.k(TpSrc) as u16, km.k(TpDst) as u16);
    let (sp_m, dp_m) = (km.m(TpSrc) as u16, km.m(TpDst) as u16);
    let tp = |a: &mut Attrs<'_>, name: &str| {
        if sp_m != 0 || dp_m != 0 {
            a.start(name);
            be16(a.out, "src", sp, sp_m);
            be16(a.out, "dst", dp, dp_m);
            chomp(a.out, ',');
            a.out.push(')');
        }
    };
    match proto {
        6 => {
            tp(a, "tcp");
            let flags_m = km.m(TcpFlags) as u32 & 0x0fff;
            if flags_m != 0 {
                a.start("tcp_flags");
                let flags = km.k(TcpFlags) as u32;
                if flags_m == 0x0fff {
                    fmt_flags(a.out, tcp_flag_name, flags);
                } else {
                    fmt_flags_masked(a.out, tcp_flag_name, flags, flags_m, 0x0fff);
                }
                a.out.push(')');
            }
        }
        17 => tp(a, "udp"),
        132 => tp(a, "sctp"),
        1 | 58 if (proto == 1) == (dl_type == ETH_TYPE_IP) => {
            let (t_m, c_m) = (sp_m as u8, dp_m as u8);
            if t_m != 0 || c_m != 0 {
                a.start(if proto == 1 { "icmp" } else { "icmpv6" });
                u8u(a.out, "type", sp as u8, t_m);
                u8u(a.out, "code", dp as u8, c_m);
                chomp(a.out, ',');
                a.out.push(')');
            }
            let is_nd = proto == 58 && (sp == 135 || sp == 136) && dp == 0;
            if is_nd && t_m == u8::MAX && c_m == u8::MAX {
                let any = km.m(NdTarget) != 0 || km.m(ArpSha) != 0 || km.m(ArpTha) != 0;
                if any {
                    a.start("nd");
                    in6(a.out, "target", km.k(NdTarget), km.m(NdTarget));
                    eth(a.out, "sll", km.k(ArpSha) as u64, km.m(ArpSha) as u64);
                    eth(a.out, "tll", km.k(ArpTha) as u64, km.m(ArpTha) as u64);
                    chomp(a.out, ',');
                    a.out.push(')');
                }
            }
        }
        _ => {}
    }
}

/// OVS `packet_format_tcp_flags` (the `flags:` of a dump line).
pub fn format_tcp_flags_short(out: &mut String, flags: u16) {
    if flags == 0 {
        out.push_str("none");
        return;
    }
    for (bit, s) in [
        (0x002, "S"),
        (0x001, "F"),
        (0x008, "P"),
        (0x004, "R"),
        (0x020, "U"),
        (0x010, "."),
        (0x040, "E"),
        (0x080, "C"),
        (0x100, "N"),
        (0x200, "[200]"),
        (0x400, "[400]"),
        (0x800, "[800]"),
    ] {
        if flags & bit != 0 {
            out.push_str(s);
        }
    }
}

/// OVS `dpif_flow_stats_format`: `packets:N, bytes:N, used:never|S.MMMs[, flags:...]`.
/// `used` and `now_ms` are in milliseconds (`used == 0` means never).
pub fn format_flow_stats(out: &mut String, s: &FlowStatsSnapshot, now_ms: u64) {
    let _ = write!(out, "packets:{}, bytes:{}, used:", s.packets, s.bytes);
    if s.used == 0 {
        out.push_str("never");
    } else {
        let age = now_ms as i128 - s.used as i128;
        let _ = write!(out, "{:.3}s", age as f64 / 1000.0);
    }
    if s.tcp_flags != 0 {
        out.push_str(", flags:");
        format_tcp_flags_short(out, s.tcp_flags);
    }
}

/// One `dpctl/dump-flows` line from its parts: `<key>, <stats>, actions:<actions>`.
pub fn format_flow_line(
    key: &FlowKey,
    mask: &FlowMask,
    stats: &FlowStatsSnapshot,
    now_ms: u64,
    actions: &str,
    fmt: &KeyFormat<'_>,
) -> String {
    let mut s = String::with_capacity(160);
    format_key(&mut s, key, mask, fmt);
    s.push_str(", ");
    format_flow_stats(&mut s, stats, now_ms);
    s.push_str(", actions:");
    s.push_str(actions);
    s
}

/// The `dump-flows` line of a megaflow (its masked key; see [`format_key`]).
pub fn format_dp_flow(flow: &DpFlow, now_ms: u64, actions: &str, fmt: &KeyFormat<'_>) -> String {
    format_flow_line(
        &flow.key,
        &flow.mask,
        &flow.stats.snapshot(),
        now_ms,
        actions,
        fmt,
    )
}

/// The `actions:` text of a megaflow: its interned actions in OVS syntax
/// ([`crate::actions::format_dp_actions`]), or `<unknown actions N>` for an id the table never
/// handed out (or has reclaimed). Use as
/// `dump_flows(.., &|f| actions_text(table, f.actions()), ..)`; [`flow_actions_text`] prefers
/// the flow's own action set.
pub fn actions_text(table: &crate::pmd::ActionTable, id: crate::megaflow::ActionsId) -> String {
    match table.get(id) {
        Some(a) => crate::actions::format_dp_actions(&a),
        None => format!("<unknown actions {id}>"),
    }
}

/// The `actions:` text of `flow`: its own action set if it has one, else its id in `table`.
pub fn flow_actions_text(table: &crate::pmd::ActionTable, flow: &DpFlow) -> String {
    match flow.action_set() {
        Some(s) => crate::actions::format_dp_actions(s.actions()),
        None => actions_text(table, flow.actions()),
    }
}

/// Which thread's classifier a group of flows comes from (the dump's header lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowOwner {
    /// The non-PMD ("main") thread.
    Main,
    /// A PMD thread on this core.
    Pmd(u32),
}

impl fmt::Display for FlowOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowOwner::Main => f.write_str("flow-dump from the main thread:"),
            FlowOwner::Pmd(core) => write!(f, "flow-dump from pmd on cpu core: {core}"),
        }
    }
}

/// A whole `dpctl/dump-flows` reply: for each group, a header line when the owner changes,
/// then one line per live flow. `actions` gives each flow's actions text (OVS format).
pub fn dump_flows<'f>(
    groups: impl IntoIterator<Item = (FlowOwner, Vec<&'f DpFlow>)>,
    now_ms: u64,
    actions: &dyn Fn(&DpFlow) -> String,
    fmt: &KeyFormat<'_>,
) -> String {
    let mut out = String::new();
    let mut last: Option<FlowOwner> = None;
    for (owner, flows) in groups {
        for f in flows.into_iter().filter(|f| !f.is_dead()) {
            if last != Some(owner) {
                let _ = writeln!(out, "{owner}");
                last = Some(owner);
            }
            out.push_str(&format_dp_flow(f, now_ms, &actions(f), fmt));
            out.push('\n');
        }
    }
    out
}

/// One datapath port for `dpctl/show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpPortInfo {
    /// Datapath port number.
    pub no: u32,
    /// Port name.
    pub name: String,
    /// Port type (`system` prints no parenthesis; `dummy`, `dpdk`, `internal`, `afxdp`...).
    pub kind: String,
    /// `netdev` configuration (`key=value`), printed sorted by key.
    pub config: Vec<(String, String)>,
}

/// `dpctl/show` for one datapath.
///
/// OVS's userspace datapath counts `hit` = packets that found a flow in any tier (EMC, SMC,
/// megaflow), `missed` = packets that needed an upcall (successful or not), `lost` = packets
/// whose upcall failed; over all PMDs and the main thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpShow {
    /// `type@name`, e.g. `netdev@ovs-netdev` (OVS's dummy datapath: `dummy@ovs-dummy`).
    pub name: String,
    /// Lookup hits.
    pub hit: u64,
    /// Lookup misses (upcalls).
    pub missed: u64,
    /// Failed upcalls.
    pub lost: u64,
    /// Installed flows.
    pub flows: u64,
    /// Ports (printed sorted by number).
    pub ports: Vec<DpPortInfo>,
}

impl fmt::Display for DpShow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}:", self.name)?;
        writeln!(
            f,
            "  lookups: hit:{} missed:{} lost:{}",
            self.hit, self.missed, self.lost
        )?;
        writeln!(f, "  flows: {}", self.flows)?;
        let mut ports: Vec<&DpPortInfo> = self.ports.iter().collect();
        ports.sort_by_key(|p| p.no);
        for p in ports {
            write!(f, "  port {}: {}", p.no, p.name)?;
            if p.kind != "system" {
                write!(f, " ({}", p.kind)?;
                let mut cfg: Vec<&(String, String)> = p.config.iter().collect();
                cfg.sort();
                for (j, (k, v)) in cfg.into_iter().enumerate() {
                    write!(f, "{} {k}={v}", if j == 0 { ':' } else { ',' })?;
                }
                f.write_str(")")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// The counters of `dpif-netdev/pmd-perf-show` (OVS 3.1 `pmd_perf_format_overall_stats`)
/// for one thread over a measurement interval.
///
/// The PMD loop must maintain (all monotone, reset together): `iterations` (every poll
/// loop pass), `idle_iterations` (passes that received nothing), `idle_cycles` /
/// `busy_cycles` (TSC cycles of idle / busy passes), `sleep_iterations`/`sleep_cycles` (0
/// when the PMD never sleeps), `rx_packets`, `recirculations`, the tier hits
/// (`emc_hits`, `smc_hits`, `megaflow_hits`, `subtable_lookups` = sum over megaflow hits of
/// subtables searched), `upcalls` (misses with a successful upcall) and `upcall_cycles`,
/// `lost_upcalls` (failed upcalls), `tx_packets`, `tx_batches`; plus `tsc_hz` and the
/// measurement `duration_s`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PmdPerf {
    /// `Time: HH:MM:SS.mmm` (wall clock; the caller formats it).
    pub time: String,
    /// Seconds since the counters were cleared.
    pub duration_s: f64,
    /// TSC frequency (cycles per second).
    pub tsc_hz: f64,
    /// NUMA node, if known.
    pub numa_id: Option<u32>,
    /// Core the PMD runs on.
    pub core_id: u32,
    /// Poll-loop iterations.
    pub iterations: u64,
    /// Iterations that received no packet.
    pub idle_iterations: u64,
    /// Iterations that slept.
    pub sleep_iterations: u64,
    /// Cycles of idle iterations.
    pub idle_cycles: u64,
    /// Cycles of busy iterations.
    pub busy_cycles: u64,
    /// Cycles slept.
    pub sleep_cycles: u64,
    /// Packets received from rx queues.
    pub rx_packets: u64,
    /// Recirculated passes.
    pub recirculations: u64,
    /// Hardware offload hits (always 0 here).
    pub phwol_hits: u64,
    /// Optimised miniflow-extract hits (always 0 here).
    pub mfex_opt_hits: u64,
    /// Simple-match cache hits (always 0 here).
    pub simple_match_hits: u64,
    /// EMC hits.
    pub emc_hits: u64,
    /// SMC hits.
    pub smc_hits: u64,
    /// Megaflow (dpcls) hits.
    pub megaflow_hits: u64,
    /// Subtables searched over all megaflow hits.
    pub subtable_lookups: u64,
    /// Misses with a successful upcall.
    pub upcalls: u64,
    /// Cycles spent in upcalls.
    pub upcall_cycles: u64,
    /// Misses whose upcall failed.
    pub lost_upcalls: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Output batches sent.
    pub tx_batches: u64,
}

/// `a / b`, 0 when `b == 0` (where OVS would print `nan`/`inf`).
fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

impl PmdPerf {
    /// Fills the counters `PmdStats` already keeps (rx, tiers, upcalls, lost, tx, cycles);
    /// the caller adds iterations, sleep, upcall cycles, clock and identity.
    pub fn from_pmd_stats(s: &crate::pmd::PmdStats) -> PmdPerf {
        PmdPerf {
            numa_id: Some(s.numa_id),
            core_id: s.core_id,
            tsc_hz: netdev::tsc::hz() as f64,
            iterations: s.iterations,
            idle_iterations: s.idle_iterations,
            idle_cycles: s.idle_cycles,
            busy_cycles: s.processing_cycles,
            rx_packets: s.packets_received,
            recirculations: s.recirculations,
            upcall_cycles: s.upcall_cycles,
            emc_hits: s.emc_hits,
            smc_hits: s.smc_hits,
            megaflow_hits: s.megaflow_hits,
            subtable_lookups: s.subtable_lookups,
            upcalls: s.upcall_ok,
            lost_upcalls: s.upcall_failed,
            tx_packets: s.tx_packets,
            tx_batches: s.tx_batches,
            ..PmdPerf::default()
        }
    }
}

impl fmt::Display for PmdPerf {
    /// The text of one PMD in `ovs-appctl dpif-netdev/pmd-perf-show` (without histograms).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.duration_s == 0.0 {
            return Ok(());
        }
        writeln!(f)?;
        writeln!(f, "Time: {}", self.time)?;
        writeln!(f, "Measurement duration: {:.3} s", self.duration_s)?;
        writeln!(f)?;
        f.write_str("pmd thread")?;
        if let Some(n) = self.numa_id {
            write!(f, " numa_id {n}")?;
        }
        writeln!(f, " core_id {}:", self.core_id)?;
        writeln!(f)?;

        let us_per_cycle = ratio(1_000_000.0, self.tsc_hz);
        let tot_cycles = (self.idle_cycles + self.busy_cycles) as f64;
        let tot_iter = self.iterations;
        let busy_iter = tot_iter.saturating_sub(self.idle_iterations);
        let sleep_cycles = self.sleep_cycles as f64;
        writeln!(
            f,
            "  Iterations:         {:12}  ({:.2} us/it)",
            tot_iter,
            ratio((tot_cycles + sleep_cycles) * us_per_cycle, tot_iter as f64)
        )?;
        writeln!(
            f,
            "  - Used TSC cycles:  {:12}  ({:5.1} % of total cycles)",
            self.idle_cycles + self.busy_cycles,
            ratio(100.0 * ratio(tot_cycles, self.duration_s), self.tsc_hz)
        )?;
        writeln!(
            f,
            "  - idle iterations:  {:12}  ({:5.1} % of used cycles)",
            self.idle_iterations,
            ratio(100.0 * self.idle_cycles as f64, tot_cycles)
        )?;
        writeln!(
            f,
            "  - busy iterations:  {:12}  ({:5.1} % of used cycles)",
            busy_iter,
            ratio(100.0 * self.busy_cycles as f64, tot_cycles)
        )?;
        writeln!(
            f,
            "  - sleep iterations: {:12}  ({:5.1} % of iterations)",
            self.sleep_iterations,
            ratio(100.0 * self.sleep_iterations as f64, tot_iter as f64)
        )?;
        writeln!(
            f,
            "  Sleep time (us):    {:12.0}  ({:3.0} us/iteration avg.)",
            sleep_cycles * us_per_cycle,
            ratio(sleep_cycles * us_per_cycle, self.sleep_iterations as f64)
        )?;
        if self.rx_packets > 0 {
            let rx = self.rx_packets as f64;
            let passes = self.rx_packets + self.recirculations;
            let p = passes as f64;
            let pct = |x: u64| ratio(100.0 * x as f64, p);
            writeln!(
                f,
                "  Rx packets:         {:12}  ({:.0} Kpps, {:.0} cycles/pkt)",
                self.rx_packets,
                rx / self.duration_s / 1000.0,
                self.busy_cycles as f64 / rx
            )?;
            writeln!(
                f,
                "  Datapath passes:    {:12}  ({:.2} passes/pkt)",
                passes,
                p / rx
            )?;
            for (name, v) in [
                ("  - PHWOL hits:       ", self.phwol_hits),
                ("  - MFEX Opt hits:    ", self.mfex_opt_hits),
                ("  - Simple Match hits:", self.simple_match_hits),
                ("  - EMC hits:         ", self.emc_hits),
                ("  - SMC hits:         ", self.smc_hits),
            ] {
                writeln!(f, "{name}{v:12}  ({:5.1} %)", pct(v))?;
            }
            writeln!(
                f,
                "  - Megaflow hits:    {:12}  ({:5.1} %, {:.2} subtbl lookups/hit)",
                self.megaflow_hits,
                pct(self.megaflow_hits),
                ratio(self.subtable_lookups as f64, self.megaflow_hits as f64)
            )?;
            writeln!(
                f,
                "  - Upcalls:          {:12}  ({:5.1} %, {:.1} us/upcall)",
                self.upcalls,
                pct(self.upcalls),
                ratio(
                    self.upcall_cycles as f64 * us_per_cycle,
                    self.upcalls as f64
                )
            )?;
            writeln!(
                f,
                "  - Lost upcalls:     {:12}  ({:5.1} %)",
                self.lost_upcalls,
                pct(self.lost_upcalls)
            )?;
        } else {
            writeln!(f, "  Rx packets:         {:12}", 0)?;
        }
        if self.tx_packets > 0 {
            writeln!(
                f,
                "  Tx packets:         {:12}  ({:.0} Kpps)",
                self.tx_packets,
                self.tx_packets as f64 / self.duration_s / 1000.0
            )?;
            writeln!(
                f,
                "  Tx batches:         {:12}  ({:.2} pkts/batch)",
                self.tx_batches,
                ratio(self.tx_packets as f64, self.tx_batches as f64)
            )?;
        } else {
            writeln!(f, "  Tx packets:         {:12}", 0)?;
            writeln!(f)?;
        }
        Ok(())
    }
}

/// A flow's ufid as OVS prints it in `dpctl/dump-flows -m` (8-4-4-4-12 hex digits).
pub fn ufid_text(u: u128) -> String {
    let h = format!("{u:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    //! Expected lines were recorded from OVS 3.1 (`ovs-appctl dpctl/dump-flows` on the dummy
    //! datapath after `netdev-dummy/receive`; see the module doc).
    use super::*;
    use crate::megaflow::Ufid;
    use FieldId::*;

    fn kv(fields: &[(FieldId, u128, u128)]) -> (FlowKey, FlowMask) {
        let mut k = FlowKey::ZERO;
        let mut m = FlowMask::CATCHALL;
        // What every megaflow of OVS's xlate has: recirc_id, in_port 1, dl_type exact.
        InPort.set(&mut k, 1);
        InPort.unwildcard(&mut m);
        RecircId.unwildcard(&mut m);
        DlType.unwildcard(&mut m);
        for &(f, v, mask) in fields {
            f.set(&mut k, v);
            f.set_mask(&mut m, mask);
        }
        (k, m)
    }

    fn line(k: &FlowKey, m: &FlowMask) -> String {
        let mut s = String::new();
        format_key(&mut s, k, m, &KeyFormat::default());
        s
    }

    const MAC5: u128 = 0x5054_0000_0005;
    const MAC7: u128 = 0x5054_0000_0007;
    const ALL: u128 = u128::MAX;

    #[test]
    fn ipv4_exact_fields_only() {
        let (k, m) = kv(&[
            (DlSrc, MAC5, 0),
            (DlDst, MAC7, 0),
            (DlType, 0x0800, ALL),
            (NwSrc, 0xc0a8_0001, 0),
            (NwDst, 0x0a00_0002, ALL),
            (NwProto, 17, 0),
            (NwTtl, 64, 0),
            (NwFrag, 0, 3),
            (TpSrc, 1, 0),
            (TpDst, 2, 0),
        ]);
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(dst=10.0.0.2,frag=no)"
        );
        let f = DpFlow::new(Ufid(1), &k, &m, 0);
        assert_eq!(
            format_dp_flow(&f, 0, "2", &KeyFormat::default()),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(dst=10.0.0.2,frag=no), packets:0, bytes:0, used:never, actions:2"
        );
    }

    #[test]
    fn partial_masks_print_key_slash_mask() {
        let (k, m) = kv(&[
            (DlSrc, 1, 0x0100_0000_0001),
            (DlDst, MAC7, 0),
            (DlType, 0x0800, ALL),
            (NwSrc, 0xc0a8_0001, 0x8000_0000),
            (NwDst, 0x0a00_0003, 0),
            (NwProto, 17, 0xff),
            (NwFrag, 1, 3),
            (TpSrc, 1, 0),
        ]);
        let want = "recirc_id(0),in_port(1),packet_type(ns=0,id=0),\
                    eth(src=00:00:00:00:00:01/01:00:00:00:00:01),eth_type(0x0800),\
                    ipv4(src=192.168.0.1/128.0.0.0,proto=17,frag=first)";
        assert_eq!(line(&k, &m), want);
        // The masked key (what a DpFlow stores) differs only in the partial value.
        assert_eq!(
            line(&k.masked(&m), &m),
            want.replace("192.168.0.1/", "128.0.0.0/")
        );
        // A later fragment has no L4 attribute even with ports masked.
        let (k, m) = kv(&[
            (DlType, 0x0800, ALL),
            (NwProto, 17, 0xff),
            (NwFrag, 3, 3),
            (TpDst, 2, 0xffff),
        ]);
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(proto=17,frag=later)"
        );
    }

    #[test]
    fn vlan_encap_arp_and_8023() {
        let (k, m) = kv(&[
            (DlSrc, MAC5, 0x0100_0000_0001),
            (Vlan0Tpid, 0x8100, 0),
            (Vlan0Tci, 0x1000 | 3 << 13 | 5, 0x1fff),
            (DlType, 0x0806, ALL),
            (NwSrc, 0x0102_0304, 0),
            (NwProto, 2, 0xff),
        ]);
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),\
             eth(src=50:54:00:00:00:05/01:00:00:00:00:01),eth_type(0x8100),\
             vlan(vid=5,pcp=3/0x0),encap(eth_type(0x0806),arp(op=2))"
        );
        let (k, m) = kv(&[(DlSrc, MAC5, 0x0100_0000_0001), (DlType, 0x05ff, ALL)]);
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),\
             eth(src=50:54:00:00:00:05/01:00:00:00:00:01),eth_type(0/0xffff)"
        );
        // Two tags (vlan-limit 2), the inner one wildcarded (OVS 3.1 live dump).
        let (k, m) = kv(&[
            (Vlan0Tpid, 0x8100, 0),
            (Vlan0Tci, 0x1000 | 3 << 13 | 2775, 0x1fff),
            (Vlan1Tpid, 0x8100, 0),
            (Vlan1Tci, 0x1000 | 2990, 0),
            (DlType, 0x0800, ALL),
            (NwProto, 6, 0xff),
            (NwTtl, 64, 0xff),
            (NwFrag, 0, 3),
        ]);
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),\
             vlan(vid=2775,pcp=3/0x0),encap(eth_type(0x8100),encap(eth_type(0x0800),\
             ipv4(proto=6,ttl=64,frag=no)))"
        );
        // Two tags with vlan-limit 1: the inner TPID is the ethertype, nothing after it.
        let (k, m) = kv(&[
            (Vlan0Tpid, 0x88a8, 0),
            (Vlan0Tci, 0x1000 | 10, 0x1fff),
            (DlType, 0x8100, ALL),
        ]);
        let limit1 = KeyFormat {
            port_names: None,
            vlan_limit: 1,
        };
        let mut s = String::new();
        format_key(&mut s, &k, &m, &limit1);
        assert_eq!(
            s,
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x88a8),vlan(vid=10),\
             encap(eth_type(0x8100))"
        );
    }

    #[test]
    fn l4_icmp_tcp_flags_nd() {
        let (k, m) = kv(&[
            (DlType, 0x0800, ALL),
            (NwSrc, 0xc0a8_0001, 0x8000_0000),
            (NwProto, 6, 0xff),
            (NwFrag, 0, 3),
            (TpDst, 80, 0),
            (TcpFlags, 0x002, 0x012),
        ]);
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(src=192.168.0.1/128.0.0.0,proto=6,frag=no),tcp_flags(+syn-ack)"
        );
        let (k, m) = kv(&[
            (DlType, 0x0800, ALL),
            (NwProto, 1, 0xff),
            (NwFrag, 0, 3),
            (TpSrc, 8, 0xffff),
            (TpDst, 0, 0),
        ]);
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(proto=1,frag=no),icmp(type=8)"
        );
        let (k, m) = kv(&[
            (DlType, 0x86dd, ALL),
            (NwProto, 58, 0xff),
            (NwFrag, 0, 3),
            (TpSrc, 135, 0xff),
            (NdTarget, 0xfe80 << 112 | 1, ALL),
        ]);
        // Code not exact: no `nd(...)`, as OVS.
        assert_eq!(
            line(&k, &m),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x86dd),\
             ipv6(proto=58,frag=no),icmpv6(type=135)"
        );
        let mut m2 = m;
        TpDst.set_mask(&mut m2, 0xff);
        assert_eq!(
            line(&k, &m2),
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x86dd),\
             ipv6(proto=58,frag=no),icmpv6(type=135,code=0),nd(target=fe80::1)"
        );
    }

    #[test]
    fn metadata_names_and_stats() {
        let (k, m) = kv(&[
            (RecircId, 5, ALL),
            (PktMark, 9, 0xf),
            (CtState, 0x21, 0x21),
            (CtZone, 3, 0xffff),
            (CtLabel, 0x10, ALL),
            (DlType, 0x0800, ALL),
            (NwFrag, 0, 3),
            (NwTos, 0x21, 0xfc),
            (Ipv6Label, 0, 0),
        ]);
        let mut names = PortNames::new();
        names.insert(1, "p1".to_string());
        let fmt = KeyFormat {
            port_names: Some(&names),
            vlan_limit: 1,
        };
        let mut s = String::new();
        format_key(&mut s, &k, &m, &fmt);
        assert_eq!(
            s,
            "skb_mark(0x9/0xf),ct_state(+new+trk),ct_zone(0x3),ct_label(0x10),recirc_id(0x5),\
             in_port(p1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(tos=0x21/0xfc,frag=no)"
        );
        let st = FlowStatsSnapshot {
            packets: 3,
            bytes: 180,
            used: 1_000,
            tcp_flags: 0x012,
        };
        let mut s = String::new();
        format_flow_stats(&mut s, &st, 1_250);
        assert_eq!(s, "packets:3, bytes:180, used:0.250s, flags:S.");
    }

    #[test]
    fn recirculated_ct_flow_line() {
        // OVS 3.1: `ct(zone=5,table=1)` then a `ct_state=+new+trk,ct_zone=5` rule.
        let (k, m) = kv(&[
            (RecircId, 1, ALL),
            (CtState, 0x21, 0x21),
            (CtZone, 5, 0xffff),
            (CtNwProto, 17, 0),
            (CtNwSrc, 0x0a01_0203, 0),
            (DlType, 0x0800, ALL),
            (NwProto, 17, 0),
            (NwFrag, 0, 3),
        ]);
        let st = FlowStatsSnapshot {
            packets: 1,
            bytes: 106,
            used: 10_000,
            tcp_flags: 0,
        };
        assert_eq!(
            format_flow_line(
                &k,
                &m,
                &st,
                10_313,
                "ct(commit,zone=5),2",
                &KeyFormat::default()
            ),
            "ct_state(+new+trk),ct_zone(0x5),recirc_id(0x1),in_port(1),packet_type(ns=0,id=0),\
             eth_type(0x0800),ipv4(frag=no), packets:1, bytes:106, used:0.313s, \
             actions:ct(commit,zone=5),2"
        );
        // An exact zero prints as `0` (C's `%#x`), as OVS's `skb_mark(0)`.
        let (k, m) = kv(&[(PktMark, 0, 0xffff_ffff), (DlType, 0x0806, ALL)]);
        assert_eq!(
            line(&k, &m),
            "skb_mark(0),recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0806)"
        );
    }

    /// Fields whose decision bits the rules consult (which attributes exist).
    const STRUCTURAL: [FieldId; 10] = [
        DlType, NwProto, NwFrag, Vlan0Tpid, Vlan0Tci, Vlan1Tpid, Vlan1Tci, TpSrc, TpDst, CtNwProto,
    ];

    proptest::proptest! {
        /// Twin property: a field whose mask is zero never shows (unless it decides which
        /// attributes exist): changing it leaves the text unchanged. Also: never panics.
        #[test]
        fn wildcarded_fields_never_print(
            a in proptest::collection::vec(proptest::prelude::any::<u64>(), 32),
            b in proptest::collection::vec(proptest::prelude::any::<u64>(), 32),
            m in proptest::collection::vec(proptest::prelude::any::<u64>(), 32),
            sel in proptest::collection::vec(0u8..3, 52),
            vlan_limit in 0usize..3,
        ) {
            let mut k1 = FlowKey::ZERO;
            k1.w.copy_from_slice(&a);
            let mut mask = FlowMask::CATCHALL;
            let mut k2 = k1;
            for (f, &s) in FieldId::all().zip(&sel) {
                match s {
                    0 => {
                        if !STRUCTURAL.contains(&f) {
                            f.set_words(&mut k2.w, f.get_words(&b));
                        }
                    }
                    1 => f.unwildcard(&mut mask),
                    _ => f.set_mask(&mut mask, f.get_words(&m) | 1),
                }
            }
            let fmt = KeyFormat { port_names: None, vlan_limit };
            let (mut t1, mut t2) = (String::new(), String::new());
            format_key(&mut t1, &k1, &mask, &fmt);
            format_key(&mut t2, &k2, &mask, &fmt);
            proptest::prop_assert_eq!(t1, t2);
        }
    }

    #[test]
    fn dump_groups_and_skips_dead() {
        let (k, m) = kv(&[(DlType, 0x0806, ALL)]);
        let a = DpFlow::new(Ufid(1), &k, &m, 0);
        let mut k2 = k;
        InPort.set(&mut k2, 2);
        let b = DpFlow::new(Ufid(2), &k2, &m, 0);
        let c = DpFlow::new(Ufid(3), &k2, &m, 0);
        c.mark_dead();
        let text = dump_flows(
            [
                (FlowOwner::Pmd(3), vec![&a]),
                (FlowOwner::Main, vec![&b, &c]),
            ],
            0,
            &|_| "drop".to_string(),
            &KeyFormat::default(),
        );
        let tail = "packet_type(ns=0,id=0),eth_type(0x0806), packets:0, bytes:0, used:never, \
                    actions:drop";
        assert_eq!(
            text,
            format!(
                "flow-dump from pmd on cpu core: 3\nrecirc_id(0),in_port(1),{tail}\n\
                 flow-dump from the main thread:\nrecirc_id(0),in_port(2),{tail}\n"
            )
        );
    }

    #[test]
    fn show_matches_ovs_layout() {
        let port = |no: u32, name: &str, kind: &str| DpPortInfo {
            no,
            name: name.to_string(),
            kind: kind.to_string(),
            config: Vec::new(),
        };
        let mut show = DpShow {
            name: "dummy@ovs-dummy".to_string(),
            hit: 0,
            missed: 5,
            lost: 0,
            flows: 5,
            ports: vec![
                port(100, "br0", "dummy-internal"),
                port(0, "ovs-dummy", "dummy-internal"),
                port(1, "p1", "dummy"),
            ],
        };
        assert_eq!(
            show.to_string(),
            "dummy@ovs-dummy:\n  lookups: hit:0 missed:5 lost:0\n  flows: 5\n\
             \x20 port 0: ovs-dummy (dummy-internal)\n  port 1: p1 (dummy)\n\
             \x20 port 100: br0 (dummy-internal)\n"
        );
        show.ports = vec![
            DpPortInfo {
                config: vec![("z".into(), "1".into()), ("a".into(), "2".into())],
                ..port(2, "eth0", "afxdp")
            },
            port(3, "eth1", "system"),
        ];
        assert!(
            show.to_string()
                .ends_with("  port 2: eth0 (afxdp: a=2, z=1)\n  port 3: eth1\n")
        );
    }

    #[test]
    fn pmd_perf_layout() {
        let p = PmdPerf {
            time: "12:00:00.000".into(),
            duration_s: 2.0,
            tsc_hz: 1e9,
            numa_id: Some(0),
            core_id: 1,
            iterations: 1000,
            idle_iterations: 250,
            idle_cycles: 500_000_000,
            busy_cycles: 1_500_000_000,
            rx_packets: 3_000_000,
            recirculations: 1_000_000,
            emc_hits: 2_000_000,
            smc_hits: 1_000_000,
            megaflow_hits: 500_000,
            subtable_lookups: 750_000,
            upcalls: 500_000,
            upcall_cycles: 1_000_000_000,
            lost_upcalls: 0,
            tx_packets: 3_000_000,
            tx_batches: 100_000,
            ..PmdPerf::default()
        };
        let want = "\nTime: 12:00:00.000\nMeasurement duration: 2.000 s\n\n\
            pmd thread numa_id 0 core_id 1:\n\n\
            \x20 Iterations:                 1000  (2000.00 us/it)\n\
            \x20 - Used TSC cycles:    2000000000  (100.0 % of total cycles)\n\
            \x20 - idle iterations:           250  ( 25.0 % of used cycles)\n\
            \x20 - busy iterations:           750  ( 75.0 % of used cycles)\n\
            \x20 - sleep iterations:            0  (  0.0 % of iterations)\n\
            \x20 Sleep time (us):               0  (  0 us/iteration avg.)\n\
            \x20 Rx packets:              3000000  (1500 Kpps, 500 cycles/pkt)\n\
            \x20 Datapath passes:         4000000  (1.33 passes/pkt)\n\
            \x20 - PHWOL hits:                  0  (  0.0 %)\n\
            \x20 - MFEX Opt hits:               0  (  0.0 %)\n\
            \x20 - Simple Match hits:           0  (  0.0 %)\n\
            \x20 - EMC hits:              2000000  ( 50.0 %)\n\
            \x20 - SMC hits:              1000000  ( 25.0 %)\n\
            \x20 - Megaflow hits:          500000  ( 12.5 %, 1.50 subtbl lookups/hit)\n\
            \x20 - Upcalls:                500000  ( 12.5 %, 2.0 us/upcall)\n\
            \x20 - Lost upcalls:                0  (  0.0 %)\n\
            \x20 Tx packets:              3000000  (1500 Kpps)\n\
            \x20 Tx batches:               100000  (30.00 pkts/batch)\n";
        assert_eq!(p.to_string(), want);
        let idle = PmdPerf {
            rx_packets: 0,
            tx_packets: 0,
            ..p
        };
        assert!(idle.to_string().ends_with(
            "  Rx packets:                    0\n  Tx packets:                    0\n\n"
        ));
        assert_eq!(PmdPerf::default().to_string(), "");
    }
}
