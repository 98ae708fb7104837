//! Datapath actions ([`OdpAction`]) and their text in OVS's `format_odp_actions` form
//! (`2`, `set(eth(src=…))`, `set(ipv4(src=…,ttl=…))`, `push_vlan(vid=5,pcp=0)`, `pop_vlan`,
//! `ct(commit,zone=5)`, `recirc(0x1)`, `userspace(…)`; an empty list prints `drop`).
//!
//! Set actions are *masked* sets as the userspace datapath gets them: each names only the
//! sub-fields that changed (`None` = untouched), which is exactly what OVS prints.

use std::fmt::{self, Write as _};

use flow::text::value::{fmt_eth, fmt_ipv4, fmt_ipv6};

/// How a set sub-field's value prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetFmt {
    /// `xx:xx:xx:xx:xx:xx`.
    Eth,
    /// Dotted quad.
    Ipv4,
    /// IPv6 text.
    Ipv6,
    /// Decimal (`/0x..` mask).
    Dec,
    /// `0x..` hex.
    Hex,
}

/// One sub-field of a masked set action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SetField {
    /// Name (`src`, `ttl`, …; empty for a single unnamed value such as `skb_mark`).
    pub name: &'static str,
    /// Value (already ANDed with `mask`).
    pub value: u128,
    /// Mask.
    pub mask: u128,
    /// All-ones of the field's width.
    pub full: u128,
    /// Print style.
    pub fmt: SetFmt,
}

fn put_val(out: &mut String, f: SetFmt, v: u128) {
    match f {
        SetFmt::Eth => fmt_eth(out, v as u64, None),
        SetFmt::Ipv4 => fmt_ipv4(out, v as u32),
        SetFmt::Ipv6 => fmt_ipv6(out, v),
        SetFmt::Dec => {
            let _ = write!(out, "{v}");
        }
        SetFmt::Hex => out.push_str(&c_hex(v)),
    }
}

/// C's `%#x`: `0x`-prefixed hex, but a bare `0` for zero (OVS prints datapath action fields
/// with it).
fn c_hex(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// One datapath action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OdpAction {
    /// Output to a datapath port.
    Output(u32),
    /// A masked set of one header: `set(eth(src=…))`, `set(ipv4(src=…,ttl=…))`,
    /// `set(ipv6(…))`, `set(tcp|udp|sctp(…))`, `set(arp(…))`, `set(skb_mark(…))`: only the
    /// sub-fields that changed, each with the bits the translation had un-wildcarded
    /// (printed `/mask` when that is not the whole field), as OVS's masked set actions.
    Set {
        /// Header name (`eth`, `ipv4`, `ipv6`, `tcp`, `udp`, `sctp`, `arp`, `skb_mark`).
        header: &'static str,
        /// Changed sub-fields, in OVS's print order.
        fields: Vec<SetField>,
    },
    /// `set(icmp(type=…,code=…))` / `icmpv6`.
    SetIcmp {
        /// ICMPv6 rather than ICMP.
        v6: bool,
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// `push_vlan(…)`.
    PushVlan {
        /// TPID.
        tpid: u16,
        /// TCI (CFI included).
        tci: u16,
    },
    /// `pop_vlan`.
    PopVlan,
    /// `ct(...)`.
    Ct {
        /// `commit`.
        commit: bool,
        /// `force_commit`.
        force: bool,
        /// Zone.
        zone: u16,
        /// `mark=value/mask`.
        mark: Option<(u32, u32)>,
        /// `label=value/mask`.
        label: Option<(u128, u128)>,
        /// `helper=` name.
        helper: Option<&'static str>,
        /// `nat(...)`, if any (printed as OVS prints it).
        nat: Option<flow::ofp::Nat>,
    },
    /// `ct_clear`.
    CtClear,
    /// `recirc(id)`.
    Recirc(u32),
    /// `userspace(pid=0,controller(...))`: the packet goes to the slow path as a packet-in.
    Userspace(flow::ofp::ControllerCookie),
    /// `clone(...)`: the nested actions run on a copy of the packet (issue #17; emitted only
    /// where OVS 3.1 nests, see `xlate::actions_ext`).
    Clone(Vec<OdpAction>),
    // ---- groups (issue #17) ----
    /// `hash(l4(basis))` / `hash(sym_l4(basis))`: set `dp_hash` from the packet (before a
    /// select group's `recirc`).
    Hash {
        /// Symmetric L4 hash (`OVS_HASH_ALG_SYM_L4`) rather than L4 (`OVS_HASH_ALG_L4`).
        symmetric: bool,
        /// Hash basis.
        basis: u32,
    },
    /// `check_pkt_len(size=N,gt(...),le(...))`: the first list for packets longer than `size`
    /// bytes, the second for the others, each on a copy of the packet unless last (issue #17,
    /// `check_pkt_larger`).
    CheckPktLen {
        /// Length compared with.
        size: u16,
        /// Actions for longer packets.
        gt: Vec<OdpAction>,
        /// Actions for the others.
        le: Vec<OdpAction>,
    },
}

impl fmt::Display for OdpAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        match self {
            OdpAction::Output(p) => {
                let _ = write!(s, "{p}");
            }
            OdpAction::Set { header, fields } => {
                let _ = write!(s, "set({header}(");
                for f in fields {
                    if !f.name.is_empty() {
                        let _ = write!(s, "{}=", f.name);
                    }
                    put_val(&mut s, f.fmt, f.value);
                    if f.mask != f.full {
                        s.push('/');
                        let mf = if f.fmt == SetFmt::Dec {
                            SetFmt::Hex
                        } else {
                            f.fmt
                        };
                        put_val(&mut s, mf, f.mask);
                    }
                    s.push(',');
                }
                chomp(&mut s);
                s.push_str("))");
            }
            OdpAction::SetIcmp { v6, ty, code } => {
                let _ = write!(
                    s,
                    "set({}(type={ty},code={code}))",
                    if *v6 { "icmpv6" } else { "icmp" }
                );
            }
            OdpAction::PushVlan { tpid, tci } => {
                s.push_str("push_vlan(");
                if *tpid != 0x8100 {
                    let _ = write!(s, "tpid={tpid:#06x},");
                }
                let _ = write!(s, "vid={},pcp={}", tci & 0xfff, tci >> 13);
                if tci & 0x1000 == 0 {
                    s.push_str(",cfi=0");
                }
                s.push(')');
            }
            OdpAction::PopVlan => s.push_str("pop_vlan"),
            OdpAction::Ct {
                commit,
                force,
                zone,
                mark,
                label,
                helper,
                nat,
            } => {
                s.push_str("ct");
                if *commit
                    || *force
                    || *zone != 0
                    || mark.is_some()
                    || label.is_some()
                    || helper.is_some()
                    || nat.is_some()
                {
                    s.push('(');
                    if *commit {
                        s.push_str("commit,");
                    }
                    if *force {
                        s.push_str("force_commit,");
                    }
                    if *zone != 0 {
                        let _ = write!(s, "zone={zone},");
                    }
                    if let Some((v, m)) = mark {
                        let _ = write!(
                            s,
                            "mark={}/{},",
                            c_hex(u128::from(*v)),
                            c_hex(u128::from(*m))
                        );
                    }
                    if let Some((v, m)) = label {
                        let _ = write!(s, "label={}/{},", c_hex(*v), c_hex(*m));
                    }
                    if let Some(h) = helper {
                        let _ = write!(s, "helper={h},");
                    }
                    if let Some(n) = nat {
                        s.push_str(&flow::text::format::format_odp_nat(n));
                    }
                    chomp(&mut s);
                    s.push(')');
                }
            }
            OdpAction::CtClear => s.push_str("ct_clear"),
            OdpAction::Recirc(id) => {
                let _ = write!(s, "recirc({id:#x})");
            }
            OdpAction::Userspace(t) => {
                let _ = write!(s, "userspace({t})");
            }
            OdpAction::Clone(inner) => {
                let _ = write!(s, "clone({})", format_odp_actions(inner));
            }
            OdpAction::CheckPktLen { size, gt, le } => {
                let _ = write!(
                    s,
                    "check_pkt_len(size={size},gt({}),le({}))",
                    format_odp_actions(gt),
                    format_odp_actions(le)
                );
            }
            OdpAction::Hash { symmetric, basis } => {
                let alg = if *symmetric { "sym_l4" } else { "l4" };
                let _ = write!(s, "hash({alg}({basis}))");
            }
        }
        f.write_str(&s)
    }
}

fn chomp(s: &mut String) {
    if s.ends_with(',') {
        s.pop();
    }
}

/// The `Datapath actions:` text of a list (`drop` when empty).
pub fn format_odp_actions(actions: &[OdpAction]) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let v: Vec<String> = actions.iter().map(|a| a.to_string()).collect();
    v.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_ovs() {
        let acts = vec![
            OdpAction::Set {
                header: "eth",
                fields: vec![SetField {
                    name: "src",
                    value: 1,
                    mask: 0xffff_ffff_ffff,
                    full: 0xffff_ffff_ffff,
                    fmt: SetFmt::Eth,
                }],
            },
            OdpAction::Set {
                header: "ipv4",
                fields: vec![
                    SetField {
                        name: "src",
                        value: 0x0a01_0101,
                        mask: 0xffff_ffff,
                        full: 0xffff_ffff,
                        fmt: SetFmt::Ipv4,
                    },
                    SetField {
                        name: "tos",
                        value: 0x28,
                        mask: 0xfc,
                        full: 0xff,
                        fmt: SetFmt::Hex,
                    },
                    SetField {
                        name: "ttl",
                        value: 63,
                        mask: 0xff,
                        full: 0xff,
                        fmt: SetFmt::Dec,
                    },
                ],
            },
            OdpAction::Output(2),
            OdpAction::PushVlan {
                tpid: 0x8100,
                tci: 0x100a,
            },
            OdpAction::PopVlan,
            OdpAction::Ct {
                commit: true,
                force: false,
                zone: 5,
                mark: None,
                label: None,
                helper: None,
                nat: None,
            },
            OdpAction::Recirc(2),
        ];
        assert_eq!(
            format_odp_actions(&acts),
            "set(eth(src=00:00:00:00:00:01)),set(ipv4(src=10.1.1.1,tos=0x28/0xfc,ttl=63)),2,\
             push_vlan(vid=10,pcp=0),pop_vlan,ct(commit,zone=5),recirc(0x2)"
        );
        assert_eq!(format_odp_actions(&[]), "drop");
    }
}
