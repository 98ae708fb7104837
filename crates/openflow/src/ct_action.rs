//! The Nicira conntrack actions: `ct(...)` (`NXAST_CT`, its nested actions, a leading
//! `NXAST_NAT` as the model's [`flow::ofp::Ct::nat`]) and `nat(...)`, both ways.
//!
//! `NXAST_CT` is `flags:16, zone_src:32 (a field header, 0 = immediate), zone:16 (value or
//! ofs_nbits), recirc_table:8 (0xff = none), pad:24, alg:16`, then nested actions. The NAT
//! range carries only the parts its `range_present` bits announce, in a fixed order
//! (IPv4 min/max, IPv6 min/max, port min/max), padded to 8.

use crate::action::{
    EncodeCtx, NX_VENDOR_ID, decode_actions, enc_ofs_nbits, encode_actions, end_action, nx_start,
    nxast, nxm_hdr, ofs_nbits, put_hdr_u32, tlv_mf,
};
use crate::codec::{Rd, Wr, be_uint};
use crate::error::{Result, invalid, unsupported};
use crate::fields;
use flow::ofp::{Action, Ct, CtZone, Nat, NatKind, NatRange};

const NX_CT_RECIRC_NONE: u8 = 0xff;
const CT_F_COMMIT: u16 = 1;
const CT_F_FORCE: u16 = 2;
const NAT_F_SRC: u16 = 1;
const NAT_F_DST: u16 = 2;
const NAT_F_PERSISTENT: u16 = 4;
const NAT_F_HASH: u16 = 8;
const NAT_F_RANDOM: u16 = 16;

pub(crate) fn decode_ct(a: &mut Rd<'_>, ver: u8) -> Result<Action> {
    let flags = a.u16()?;
    if flags & !(CT_F_COMMIT | CT_F_FORCE) != 0 {
        return Err(unsupported(format!("ct flags 0x{flags:x}")));
    }
    let zone_src = a.u32()?;
    let zone_v = a.u16()?;
    let table = a.u8()?;
    a.skip(3)?;
    let alg = a.u16()?;
    let zone = if zone_src == 0 {
        CtZone::Imm(zone_v)
    } else {
        let class = (zone_src >> 16) as u16;
        let field = ((zone_src >> 9) & 0x7f) as u8;
        let d = fields::lookup(class, field, 0)
            .ok_or_else(|| unsupported(format!("ct zone field 0x{zone_src:08x}")))?;
        CtZone::Field(ofs_nbits(zone_v, tlv_mf(d)?)?)
    };
    let mut nested = a.rest();
    let mut nat = None;
    if nested.len() >= 10 && nested[0..2] == [0xff, 0xff] {
        let mut p = Rd::new(nested, "ct actions");
        let len = usize::from(p.peek_u16(2)?);
        if nested[4..8] == NX_VENDOR_ID.to_be_bytes()
            && u16::from_be_bytes([nested[8], nested[9]]) == nxast::NAT
            && len >= 16
            && len % 8 == 0
        {
            let mut n = p.sub(len, "NXAST_NAT")?;
            n.skip(10)?;
            nat = Some(decode_nat(&mut n)?);
            nested = p.rest();
        }
    }
    let exec = decode_actions(nested, ver)?;
    for e in &exec {
        if matches!(e, Action::Ct(_)) {
            return Err(invalid("ct inside ct"));
        }
    }
    // OVS `decode_NXAST_RAW_CT`: without `commit`, the only thing a ct() may hold is a
    // `nat` without arguments.
    if flags & CT_F_COMMIT == 0 {
        let bare_nat = nat.as_ref().is_none_or(|n| {
            n.kind.is_none()
                && n.range.is_none()
                && n.ports == (0, 0)
                && !n.persistent
                && !n.hash
                && !n.random
        });
        if !exec.is_empty() || !bare_nat {
            return Err(invalid(
                "ct action requires commit flag if actions other than NAT without arguments are specified",
            ));
        }
    }
    Ok(Action::Ct(Ct {
        commit: flags & CT_F_COMMIT != 0,
        force: flags & CT_F_FORCE != 0,
        zone,
        table: (table != NX_CT_RECIRC_NONE).then_some(table),
        nat,
        exec,
        alg: (alg != 0).then_some(alg),
    }))
}

fn decode_nat(n: &mut Rd<'_>) -> Result<Nat> {
    n.skip(2)?;
    let flags = n.u16()?;
    let present = n.u16()?;
    if present & !0x3f != 0 {
        return Err(unsupported(format!("nat range bits 0x{present:x}")));
    }
    let kind = match flags & (NAT_F_SRC | NAT_F_DST) {
        0 => None,
        NAT_F_SRC => Some(NatKind::Src),
        NAT_F_DST => Some(NatKind::Dst),
        _ => return Err(invalid("nat with both src and dst")),
    };
    let mut v4 = (0u32, 0u32);
    let mut v6 = (0u128, 0u128);
    if present & 1 != 0 {
        v4.0 = n.u32()?;
    }
    if present & 2 != 0 {
        v4.1 = n.u32()?;
    }
    if present & 4 != 0 {
        v6.0 = be_uint(n.bytes(16)?);
    }
    if present & 8 != 0 {
        v6.1 = be_uint(n.bytes(16)?);
    }
    let mut ports = (0u16, 0u16);
    if present & 16 != 0 {
        ports.0 = n.u16()?;
    }
    if present & 32 != 0 {
        ports.1 = n.u16()?;
    }
    let range = if v4 != (0, 0) {
        if v6 != (0, 0) {
            return Err(invalid("nat with both IPv4 and IPv6 ranges"));
        }
        Some(NatRange::V4 {
            min: v4.0,
            max: v4.1,
        })
    } else if v6 != (0, 0) {
        Some(NatRange::V6 {
            min: v6.0,
            max: v6.1,
        })
    } else {
        None
    };
    Ok(Nat {
        kind,
        range,
        ports,
        persistent: flags & NAT_F_PERSISTENT != 0,
        hash: flags & NAT_F_HASH != 0,
        random: flags & NAT_F_RANDOM != 0,
    })
}

pub(crate) fn encode_ct(w: &mut Wr, ct: &Ct, cx: EncodeCtx) -> Result<()> {
    let s = nx_start(w, nxast::CT);
    let mut flags = 0;
    if ct.commit {
        flags |= CT_F_COMMIT;
    }
    if ct.force {
        flags |= CT_F_FORCE;
    }
    w.u16(flags);
    match ct.zone {
        CtZone::Imm(z) => {
            w.u32(0);
            w.u16(z);
        }
        CtZone::Field(sf) => {
            put_hdr_u32(w, nxm_hdr(sf.field)?)?;
            w.u16(enc_ofs_nbits(&sf));
        }
    }
    w.u8(ct.table.unwrap_or(NX_CT_RECIRC_NONE));
    w.zeros(3);
    w.u16(ct.alg.unwrap_or(0));
    if let Some(nat) = &ct.nat {
        encode_nat(w, nat)?;
    }
    encode_actions(w, &ct.exec, cx)?;
    end_action(w, s)
}

fn encode_nat(w: &mut Wr, nat: &Nat) -> Result<()> {
    let s = nx_start(w, nxast::NAT);
    w.zeros(2);
    let mut flags = match nat.kind {
        None => 0,
        Some(NatKind::Src) => NAT_F_SRC,
        Some(NatKind::Dst) => NAT_F_DST,
    };
    if nat.persistent {
        flags |= NAT_F_PERSISTENT;
    }
    if nat.hash {
        flags |= NAT_F_HASH;
    }
    if nat.random {
        flags |= NAT_F_RANDOM;
    }
    w.u16(flags);
    let at = w.len();
    w.u16(0);
    let mut present = 0u16;
    match nat.range {
        Some(NatRange::V4 { min, max }) => {
            if min != 0 {
                w.u32(min);
                present |= 1;
            }
            if max != 0 {
                w.u32(max);
                present |= 2;
            }
        }
        Some(NatRange::V6 { min, max }) => {
            if min != 0 {
                w.uint(min, 16);
                present |= 4;
            }
            if max != 0 {
                w.uint(max, 16);
                present |= 8;
            }
        }
        None => {}
    }
    if nat.ports.0 != 0 {
        w.u16(nat.ports.0);
        present |= 16;
    }
    if nat.ports.1 != 0 {
        w.u16(nat.ports.1);
        present |= 32;
    }
    w.patch_u16(at, present);
    end_action(w, s)
}
