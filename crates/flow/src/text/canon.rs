//! Canonicalisation: what a flow mod looks like after `ovs-ofctl` encodes it in the chosen
//! OpenFlow protocol and decodes it again (which is what `parse-flow` and `dump-flows` print).
//!
//! Match side:
//! - OpenFlow 1.0 standard match (`OF10_STD*`): only the twelve OF1.0 fields survive, VLANs go
//!   through `dl_vlan`/`dl_vlan_pcp` (a TCI without CFI becomes "no VLAN", `vlan_tci=0x0000`),
//!   then OVS's normalisation drops fields whose prerequisites are missing, and a match with no
//!   wildcard at all gets priority 65535.
//! - NXM / OXM: only fields whose prerequisites the match establishes are encoded (OVS
//!   `nx_put_raw`); OXM carries VLANs as `vlan_vid` + `vlan_pcp`.
//!
//! Action side (`ofpacts_put_openflow_actions` then decode):
//! - OpenFlow 1.0: `set_field` becomes the OF1.0 action where one exists (`mod_dl_src`,
//!   `mod_nw_tos`, `mod_vlan_vid`, …) else `load`s; `pop_vlan` → `strip_vlan`; `goto_table:T` →
//!   `resubmit(,T)`; `set_vlan_vid` → `mod_vlan_vid`.
//! - OpenFlow 1.3: `mod_*` become `set_field`s (with a `push_vlan` first where `mod_vlan_*`
//!   would have pushed a tag); `strip_vlan` → `pop_vlan`; masked `set_field` → `load`s.
//! - Both: `load`s wider than 64 bits or with split masks print as several `load`s; notes are
//!   zero-padded to the NXAST_NOTE length.

use crate::field::{FieldId, VLAN_CFI};
use crate::ofp::action::{Action, Subfield};
use crate::ofp::fields::{Mf, Protocols, is_cidr};
use crate::ofp::matching::{
    ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_RARP, Match, ipproto,
};
use crate::ofp::{FlowSpec, OfPort};
use crate::text::Dialect;

/// Applies the encode/decode round trip of protocol `proto` (one bit of [`Protocols`]) to
/// `spec`, in place.
pub fn canonicalize(spec: &mut FlowSpec, proto: Protocols, dialect: Dialect) -> Result<(), String> {
    let std10 = proto.intersects(Protocols::OF10_STD_ANY);
    let orig = spec.match_;
    if std10 {
        let (m, exact) = of10_round_trip(&orig);
        spec.match_ = m;
        if exact {
            spec.priority = u16::MAX;
        }
    } else {
        spec.match_ = nx_round_trip(&orig, dialect == Dialect::OpenFlow13)
            .map_err(|e| format!("decode error: {e}"))?;
    }
    spec.importance = 0;
    spec.cookie_mask = 0;
    if spec.table == Some(0) {
        spec.table = None;
    }
    let mut has_vlan = orig.has_vlan();
    spec.actions = canon_actions(&spec.actions, &orig, dialect, &mut has_vlan)?;
    Ok(())
}

fn copy(out: &mut Match, m: &Match, f: FieldId) {
    out.set_storage(f, m.value(f), m.mask_of(f));
}

/// OVS `ofputil_match_to_ofp10_match` + `ofputil_match_from_ofp10_match` +
/// `ofputil_normalize_match`. Returns the match and whether it had no OF1.0 wildcard.
pub fn of10_round_trip(m: &Match) -> (Match, bool) {
    let mut out = Match::catchall();
    let mut wild = false;
    for f in [
        FieldId::InPort,
        FieldId::DlType,
        FieldId::NwProto,
        FieldId::DlSrc,
        FieldId::DlDst,
    ] {
        if m.mask_of(f) != 0 {
            let full = if f == FieldId::InPort {
                0xffff_ffff
            } else {
                f.max()
            };
            out.set_storage(f, m.value(f), full);
        } else {
            wild = true;
        }
    }
    for f in [FieldId::TpSrc, FieldId::TpDst] {
        if m.mask_of(f) != 0 {
            out.set_storage(f, m.value(f), 0xffff);
        } else {
            wild = true;
        }
    }
    for f in [FieldId::NwSrc, FieldId::NwDst] {
        let mask = m.mask_of(f);
        // ofputil_netmask_to_wcbits on a non-CIDR mask counts the leading ones.
        let bits = if is_cidr(mask, 32) {
            mask.count_ones()
        } else {
            (mask as u32).leading_ones()
        };
        if bits != 32 {
            wild = true;
        }
        let nm = crate::text::value::prefix_mask(bits, 32);
        out.set_storage(f, m.value(f), nm);
    }
    let tos_m = m.mask_of(FieldId::NwTos) as u8;
    if tos_m & 0xfc != 0 {
        out.set_storage(FieldId::NwTos, m.value(FieldId::NwTos) & 0xfc, 0xfc);
    } else {
        wild = true;
    }
    let tci = m.value(FieldId::Vlan0Tci) as u16;
    let tci_m = m.mask_of(FieldId::Vlan0Tci) as u16;
    if tci_m == 0 {
        wild = true;
    } else if tci_m & VLAN_CFI != 0 && tci & VLAN_CFI == 0 {
        out.set_storage(FieldId::Vlan0Tci, 0, 0xffff);
    } else {
        let mut nm = 0u16;
        let mut nv = VLAN_CFI;
        if tci_m & 0x0fff != 0 {
            nm |= 0x0fff | VLAN_CFI;
            nv |= tci & 0x0fff;
        } else {
            wild = true;
        }
        if tci_m & 0xe000 != 0 {
            nm |= 0xe000 | VLAN_CFI;
            nv |= tci & 0xe000;
        } else {
            wild = true;
        }
        out.set_storage(FieldId::Vlan0Tci, u128::from(nv), u128::from(nm));
    }
    out.normalize();
    (out, !wild)
}

/// OVS `nx_put_raw` followed by `nx_pull_raw` (NXM when `!oxm`, OXM otherwise). Fails with
/// OVS's decode error when the encoded match does not decode (a field whose prerequisites the
/// decoder finds unmet, e.g. `tp_src` with `nw_frag=later`).
pub fn nx_round_trip(m: &Match, oxm: bool) -> Result<Match, &'static str> {
    const BAD: &str = "OFPBMC_BAD_PREREQ";
    let mut out = Match::catchall();
    for f in [
        FieldId::DpHash,
        FieldId::RecircId,
        FieldId::ConjId,
        FieldId::InPort,
        FieldId::DlSrc,
        FieldId::DlDst,
        FieldId::DlType,
    ] {
        copy(&mut out, m, f);
    }
    let tci = m.value(FieldId::Vlan0Tci) as u16;
    let tci_m = m.mask_of(FieldId::Vlan0Tci) as u16;
    if !oxm {
        copy(&mut out, m, FieldId::Vlan0Tci);
    } else {
        let vid = tci & 0x1fff;
        let vm = tci_m & 0x1fff;
        let (mut v, mut msk) = (vid & vm, vm);
        if vid != 0 && tci_m & 0xe000 != 0 {
            if v & VLAN_CFI == 0 {
                return Err(BAD);
            }
            v |= (tci & 0xe000) | VLAN_CFI;
            msk |= 0xe000 | VLAN_CFI;
        }
        out.set_storage(FieldId::Vlan0Tci, u128::from(v), u128::from(msk));
    }
    let dl = m.dl_type();
    let proto = m.nw_proto();
    if dl == ETH_TYPE_IP || dl == ETH_TYPE_IPV6 {
        if dl == ETH_TYPE_IP {
            copy(&mut out, m, FieldId::NwSrc);
            copy(&mut out, m, FieldId::NwDst);
            if m.mask_of(FieldId::Ipv6Label) != 0 {
                return Err(BAD);
            }
        } else {
            copy(&mut out, m, FieldId::Ipv6Src);
            copy(&mut out, m, FieldId::Ipv6Dst);
            copy(&mut out, m, FieldId::Ipv6Label);
        }
        let fm = m.mask_of(FieldId::NwFrag) & 3;
        if fm != 0 {
            out.set_storage(FieldId::NwFrag, m.value(FieldId::NwFrag), fm);
        }
        let tos = m.value(FieldId::NwTos);
        let tm = m.mask_of(FieldId::NwTos);
        let mut ntm = 0;
        if tm & 0xfc != 0 {
            ntm |= 0xfc;
        }
        if tm & 0x03 != 0 {
            ntm |= 0x03;
        }
        out.set_storage(FieldId::NwTos, tos, ntm);
        if m.mask_of(FieldId::NwTtl) != 0 {
            out.set_storage(FieldId::NwTtl, m.value(FieldId::NwTtl), 0xff);
        }
        if m.mask_of(FieldId::NwProto) != 0 {
            out.set_storage(FieldId::NwProto, u128::from(proto), 0xff);
            let later = m.value(FieldId::NwFrag) & 2 != 0;
            let l4 = [FieldId::TpSrc, FieldId::TpDst, FieldId::TcpFlags]
                .iter()
                .any(|f| m.mask_of(*f) != 0 && (*f != FieldId::TcpFlags || proto == ipproto::TCP));
            if later && l4 && matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP) {
                return Err(BAD);
            }
            match proto {
                ipproto::TCP => {
                    copy(&mut out, m, FieldId::TpSrc);
                    copy(&mut out, m, FieldId::TpDst);
                    copy(&mut out, m, FieldId::TcpFlags);
                }
                ipproto::UDP | ipproto::SCTP => {
                    copy(&mut out, m, FieldId::TpSrc);
                    copy(&mut out, m, FieldId::TpDst);
                }
                ipproto::ICMP | ipproto::ICMPV6
                    if (proto == ipproto::ICMP) == (dl == ETH_TYPE_IP) =>
                {
                    for f in [FieldId::TpSrc, FieldId::TpDst] {
                        if m.mask_of(f) != 0 {
                            out.set_storage(f, m.value(f) & 0xff, 0xffff);
                        }
                    }
                    let t = m.value(FieldId::TpSrc);
                    if proto == ipproto::ICMPV6
                        && m.value(FieldId::TpDst) == 0
                        && (t == 135 || t == 136)
                    {
                        copy(&mut out, m, FieldId::NdTarget);
                        copy(
                            &mut out,
                            m,
                            if t == 135 {
                                FieldId::ArpSha
                            } else {
                                FieldId::ArpTha
                            },
                        );
                    }
                }
                _ => {}
            }
        }
    } else if dl == ETH_TYPE_ARP || dl == ETH_TYPE_RARP {
        if m.mask_of(FieldId::NwProto) != 0 {
            out.set_storage(FieldId::NwProto, u128::from(proto), 0xff);
        }
        for f in [
            FieldId::NwSrc,
            FieldId::NwDst,
            FieldId::ArpSha,
            FieldId::ArpTha,
        ] {
            copy(&mut out, m, f);
        }
    }
    for r in (0..16).filter_map(Mf::reg) {
        copy(&mut out, m, r.def().storage);
    }
    for f in [
        FieldId::PktMark,
        FieldId::CtState,
        FieldId::CtZone,
        FieldId::CtMark,
        FieldId::CtLabel,
        FieldId::CtNwSrc,
        FieldId::CtNwDst,
    ] {
        copy(&mut out, m, f);
    }
    let ct_fields = [
        FieldId::CtNwSrc,
        FieldId::CtNwDst,
        FieldId::CtNwProto,
        FieldId::CtTpSrc,
        FieldId::CtTpDst,
    ];
    let ct_used = ct_fields[..2].iter().any(|f| m.mask_of(*f) != 0)
        || (m.value(FieldId::CtNwProto) != 0 && ct_fields.iter().any(|f| m.mask_of(*f) != 0));
    if ct_used && !m.prereqs_ok(Mf::CtNwSrc) {
        return Err(BAD);
    }
    if m.value(FieldId::CtNwProto) != 0 {
        for f in [FieldId::CtNwProto, FieldId::CtTpSrc, FieldId::CtTpDst] {
            copy(&mut out, m, f);
        }
    }
    copy(&mut out, m, FieldId::Metadata);
    Ok(out)
}

/// Bytes an `NXAST_NOTE` carries for a note of `n` bytes (zero padded).
fn note_len(n: usize) -> usize {
    (10 + n).div_ceil(8).max(2) * 8 - 10
}

/// Splits a (value, mask) set on `field` into `load`s of contiguous runs of at most 64 bits
/// (OVS `next_load_segment`).
fn loads(field: Mf, value: u128, mask: u128, out: &mut Vec<Action>) {
    let n_bits = field.def().n_bits;
    let mut ofs = 0u32;
    while ofs < n_bits {
        if mask >> ofs & 1 == 0 {
            ofs += 1;
            continue;
        }
        let mut end = ofs + 1;
        while end < n_bits && end < ofs + 64 && mask >> end & 1 == 1 {
            end += 1;
        }
        let n = end - ofs;
        let m = if n >= 128 {
            u128::MAX
        } else {
            (1u128 << n) - 1
        };
        out.push(Action::Load {
            value: (value >> ofs) & m,
            dst: Subfield {
                field,
                ofs,
                n_bits: n,
            },
        });
        ofs = end;
    }
}

fn canon_actions(
    actions: &[Action],
    m: &Match,
    dialect: Dialect,
    has_vlan: &mut bool,
) -> Result<Vec<Action>, String> {
    let of13 = dialect == Dialect::OpenFlow13;
    let mut out = Vec::with_capacity(actions.len());
    for (i, a) in actions.iter().enumerate() {
        match a {
            Action::Load { value, dst } => {
                loads(dst.field, value << dst.ofs, dst.mask(), &mut out);
            }
            Action::SetField { field, value, mask } => {
                let full = *mask == field.byte_max();
                if *field == Mf::VlanTci {
                    *has_vlan = *value as u16 & VLAN_CFI != 0;
                }
                if !full {
                    loads(*field, *value, *mask, &mut out);
                } else if of13 {
                    if *field == Mf::VlanVid && *value as u16 & VLAN_CFI == 0 {
                        return Err(format!(
                            "decode error: OFPBAC_BAD_SET_ARGUMENT: Invalid value for set field vlan_vid: {value}"
                        ));
                    }
                    out.push(a.clone());
                } else {
                    set_field_of10(*field, *value, &mut out);
                }
            }
            Action::GotoTable(t) if !of13 => out.push(Action::Resubmit {
                port: None,
                table: Some(*t),
                ct: false,
            }),
            Action::PopVlan | Action::StripVlan => {
                *has_vlan = false;
                out.push(if of13 {
                    Action::PopVlan
                } else {
                    Action::StripVlan
                });
            }
            Action::PushVlan(_) => {
                *has_vlan = true;
                out.push(a.clone());
            }
            Action::ModVlanVid {
                vid,
                push_if_needed,
            } => {
                if of13 {
                    if *push_if_needed && !*has_vlan {
                        out.push(Action::PushVlan(0x8100));
                    }
                    out.push(Action::SetField {
                        field: Mf::VlanVid,
                        value: u128::from(*vid | VLAN_CFI),
                        mask: Mf::VlanVid.byte_max(),
                    });
                } else {
                    out.push(Action::ModVlanVid {
                        vid: *vid,
                        push_if_needed: true,
                    });
                }
                *has_vlan = true;
            }
            Action::ModVlanPcp {
                pcp,
                push_if_needed,
            } => {
                if of13 {
                    if *push_if_needed && !*has_vlan {
                        out.push(Action::PushVlan(0x8100));
                    }
                    out.push(Action::SetField {
                        field: Mf::VlanPcp,
                        value: u128::from(*pcp),
                        mask: Mf::VlanPcp.byte_max(),
                    });
                } else {
                    out.push(Action::ModVlanPcp {
                        pcp: *pcp,
                        push_if_needed: true,
                    });
                }
                *has_vlan = true;
            }
            Action::ModDlSrc(v) if of13 => out.push(sf(Mf::EthSrc, u128::from(*v))),
            Action::ModDlDst(v) if of13 => out.push(sf(Mf::EthDst, u128::from(*v))),
            Action::ModNwSrc(v) if of13 => out.push(sf(Mf::Ipv4Src, u128::from(*v))),
            Action::ModNwDst(v) if of13 => out.push(sf(Mf::Ipv4Dst, u128::from(*v))),
            Action::ModNwTos(v) if of13 => out.push(sf(Mf::IpDscpShifted, u128::from(*v >> 2))),
            Action::ModTpSrc(v) | Action::ModTpDst(v) if of13 => {
                let src = matches!(a, Action::ModTpSrc(_));
                let field = match (m.nw_proto(), src) {
                    (ipproto::UDP, true) => Mf::UdpSrc,
                    (ipproto::UDP, false) => Mf::UdpDst,
                    (ipproto::SCTP, true) => Mf::SctpSrc,
                    (ipproto::SCTP, false) => Mf::SctpDst,
                    (ipproto::TCP, true) => Mf::TcpSrc,
                    (ipproto::TCP, false) => Mf::TcpDst,
                    // No L4 protocol known (only inside `write_actions`, whose check does
                    // not narrow the protocols): OVS sends `OFPAT11_SET_TP_*`.
                    _ => {
                        out.push(a.clone());
                        continue;
                    }
                };
                out.push(sf(field, u128::from(*v)));
            }
            Action::Note(bytes) => {
                let mut b = bytes.clone();
                b.resize(note_len(bytes.len()), 0);
                out.push(Action::Note(b));
            }
            Action::Ct(ct) => {
                let mut ct = ct.clone();
                let mut hv = *has_vlan;
                ct.exec = canon_actions(&ct.exec, m, dialect, &mut hv)?;
                out.push(Action::Ct(ct));
            }
            Action::Output { port, max_len } if *port != OfPort::CONTROLLER && *max_len != 0 => out
                .push(Action::Output {
                    port: *port,
                    max_len: 0,
                }),
            Action::WriteMetadata { .. }
            | Action::ModNwTtl(_)
            | Action::Exit
            | Action::ClearActions
            | Action::Enqueue { .. } => {
                super::actions_ext::canon_ext(a, &actions[i + 1..], m, dialect, &mut out)?;
            }
            Action::Bundle(_) => {
                super::lb::canon_lb(a)?;
                out.push(a.clone());
            }
            Action::Clone(inner) => {
                // The clone's VLAN changes stay inside it.
                let mut hv = *has_vlan;
                out.push(Action::Clone(canon_actions(inner, m, dialect, &mut hv)?));
            }
            Action::WriteActions(inner) if of13 => {
                let mut hv = *has_vlan;
                let inner = canon_actions(inner, m, dialect, &mut hv)?;
                super::actions_ext::canon_write_actions(inner, m, &mut out)?;
            }
            Action::WriteActions(_) => {}
            _ => out.push(a.clone()),
        }
    }
    Ok(out)
}

fn sf(field: Mf, value: u128) -> Action {
    Action::SetField {
        field,
        value,
        mask: field.byte_max(),
    }
}

/// OVS `set_field_to_legacy_openflow` for OpenFlow 1.0.
fn set_field_of10(field: Mf, value: u128, out: &mut Vec<Action>) {
    match field {
        Mf::VlanTci => {
            let tci = value as u16;
            if tci & VLAN_CFI != 0 {
                out.push(Action::ModVlanVid {
                    vid: tci & 0x0fff,
                    push_if_needed: true,
                });
                out.push(Action::ModVlanPcp {
                    pcp: (tci >> 13) as u8,
                    push_if_needed: true,
                });
            } else {
                out.push(Action::StripVlan);
            }
        }
        Mf::VlanVid => out.push(Action::ModVlanVid {
            vid: value as u16 & 0x0fff,
            push_if_needed: true,
        }),
        Mf::VlanPcp => out.push(Action::ModVlanPcp {
            pcp: value as u8,
            push_if_needed: true,
        }),
        Mf::EthSrc => out.push(Action::ModDlSrc(value as u64)),
        Mf::EthDst => out.push(Action::ModDlDst(value as u64)),
        Mf::Ipv4Src => out.push(Action::ModNwSrc(value as u32)),
        Mf::Ipv4Dst => out.push(Action::ModNwDst(value as u32)),
        Mf::IpDscp => out.push(Action::ModNwTos(value as u8)),
        Mf::IpDscpShifted => out.push(Action::ModNwTos((value as u8) << 2)),
        Mf::TcpSrc | Mf::UdpSrc => out.push(Action::ModTpSrc(value as u16)),
        Mf::TcpDst | Mf::UdpDst => out.push(Action::ModTpDst(value as u16)),
        _ => loads(field, value, field.max(), out),
    }
}
