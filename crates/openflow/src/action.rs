//! Actions: OpenFlow 1.0 actions, OpenFlow 1.1+ actions and the Nicira (`NXAST_*`) extension
//! actions, mapped onto [`flow::ofp::Action`] both ways.
//!
//! Every action is `type:16, len:16, …`, `len` a multiple of 8 covering the whole action;
//! vendor/experimenter actions (`type = 0xffff`) continue with `vendor:32, subtype:16` for
//! Nicira (`0x00002320`). What the model has no variant for (`enqueue`, `group`, `learn`,
//! `multipath`, …) decodes to [`Error::Unsupported`] naming the action, never to a guess.
//! The forms of the issue-#17 actions (`write_metadata`, `mod_nw_ttl`, `exit`, …) live in
//! [`crate::action_ext`].
//!
//! Encoding picks the form OVS 3.1 sends for the wire version: OpenFlow 1.0 actions where
//! 1.0 has one, `OFPAT_SET_FIELD` for whole-field sets in 1.2+, `NXAST_REG_LOAD` for
//! `load` (a masked `OFPAT_SET_FIELD` in 1.5, which has no `NXAST_REG_LOAD`),
//! `NXAST_REG_LOAD2` for masked sets 1.2–1.4 cannot carry, `OFPAT_COPY_FIELD` for `move` in
//! 1.5, Nicira actions otherwise. The `mod_*` actions become `set_field` in 1.2+
//! (the transport port field chosen from the flow's `nw_proto`, [`EncodeCtx::nw_proto`]);
//! `push_vlan` has no OpenFlow 1.0 form and, as in OVS, is left out there (1.0's
//! `mod_vlan_vid` pushes a tag itself).
//!
//! Lossy corners (the model has no place for them): `NXAST_RESUBMIT` and `NXAST_RESUBMIT_TABLE`
//! with table `0xff` both decode to `resubmit` without a table and are re-encoded, as OVS
//! encodes its own, as `NXAST_RESUBMIT_TABLE`; `output_reg`'s `max_len` is not kept (written
//! as OVS's default, 65535).
//!
//! Invariant: for any action list that decodes in version `v`, encoding it in `v` and
//! decoding again gives the same list (property-tested).

use crate::codec::{Rd, Wr, be_uint};
use crate::error::{Error, Result, invalid, unsupported};
use crate::fields::{self, HeaderDef, Target};
use crate::header::version;
use flow::ofp::matching::ipproto;
use flow::ofp::{Action, Mf, OfPort, PacketInReason, Subfield};

/// Nicira's vendor id.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// Action type of vendor/experimenter actions.
pub const OFPAT_VENDOR: u16 = 0xffff;

/// Nicira action subtypes used here.
#[allow(missing_docs)]
pub mod nxast {
    pub const RESUBMIT: u16 = 1;
    pub const REG_MOVE: u16 = 6;
    pub const REG_LOAD: u16 = 7;
    pub const NOTE: u16 = 8;
    pub const RESUBMIT_TABLE: u16 = 14;
    pub const OUTPUT_REG: u16 = 15;
    pub const DEC_TTL: u16 = 18;
    pub const CONTROLLER: u16 = 20;
    pub const DEC_TTL_CNT_IDS: u16 = 21;
    pub const OUTPUT_REG2: u16 = 32;
    pub const REG_LOAD2: u16 = 33;
    pub const CT: u16 = 35;
    pub const NAT: u16 = 36;
    pub const CONTROLLER2: u16 = 37;
    pub const OUTPUT_TRUNC: u16 = 39;
    pub const CT_CLEAR: u16 = 43;
    pub const RESUBMIT_TABLE_CT: u16 = 44;
    // conjunctive matches (issue #17).
    pub const CONJUNCTION: u16 = 34;
    /// `group:N` in OpenFlow 1.0 (OVS `NXAST_RAW_GROUP`).
    pub const GROUP: u16 = 40;
}

/// OpenFlow 1.0 action types.
#[allow(missing_docs)]
pub mod ofpat10 {
    pub const OUTPUT: u16 = 0;
    pub const SET_VLAN_VID: u16 = 1;
    pub const SET_VLAN_PCP: u16 = 2;
    pub const STRIP_VLAN: u16 = 3;
    pub const SET_DL_SRC: u16 = 4;
    pub const SET_DL_DST: u16 = 5;
    pub const SET_NW_SRC: u16 = 6;
    pub const SET_NW_DST: u16 = 7;
    pub const SET_NW_TOS: u16 = 8;
    pub const SET_TP_SRC: u16 = 9;
    pub const SET_TP_DST: u16 = 10;
    pub const ENQUEUE: u16 = 11;
}

/// OpenFlow 1.1+ action types.
#[allow(missing_docs)]
pub mod ofpat11 {
    pub const OUTPUT: u16 = 0;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const GROUP: u16 = 22;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const COPY_FIELD: u16 = 28;
}

/// What encoding needs to know beyond the action list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeCtx {
    /// Wire version.
    pub version: u8,
    /// The flow's `nw_proto` (picks `tcp_src`/`udp_src`/`sctp_src` for `mod_tp_src` in 1.2+).
    pub nw_proto: u8,
}

fn reason_from_wire(r: u8) -> Result<PacketInReason> {
    PacketInReason::from_code(r).ok_or_else(|| invalid(format!("packet-in reason {r}")))
}

/// Decodes an action list filling all of `b`.
pub fn decode_actions(b: &[u8], ver: u8) -> Result<Vec<Action>> {
    let mut r = Rd::new(b, "action list");
    let mut out = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.peek_u16(2)?);
        if len < 8 || !len.is_multiple_of(8) {
            return Err(Error::BadLength {
                what: "action",
                len,
            });
        }
        let mut a = r.sub(len, "action")?;
        let typ = a.u16()?;
        a.skip(2)?;
        if typ == OFPAT_VENDOR {
            decode_vendor(&mut a, ver, &mut out)?;
        } else if ver == version::OF10 {
            out.push(decode_of10(typ, &mut a)?);
        } else {
            out.push(decode_of11(typ, &mut a, ver)?);
        }
    }
    crate::action_ext::verify_order(&out, false)?;
    Ok(out)
}

fn decode_of10(typ: u16, a: &mut Rd<'_>) -> Result<Action> {
    use ofpat10::*;
    Ok(match typ {
        OUTPUT => {
            let port = OfPort(a.u16()?);
            let max_len = a.u16()?;
            Action::Output { port, max_len }
        }
        SET_VLAN_VID => Action::ModVlanVid {
            vid: a.u16()? & 0x0fff,
            push_if_needed: true,
        },
        SET_VLAN_PCP => Action::ModVlanPcp {
            pcp: a.u8()? & 7,
            push_if_needed: true,
        },
        STRIP_VLAN => Action::StripVlan,
        SET_DL_SRC => Action::ModDlSrc(a.mac()?),
        SET_DL_DST => Action::ModDlDst(a.mac()?),
        SET_NW_SRC => Action::ModNwSrc(a.u32()?),
        SET_NW_DST => Action::ModNwDst(a.u32()?),
        SET_NW_TOS => Action::ModNwTos(a.u8()? & 0xfc),
        SET_TP_SRC => Action::ModTpSrc(a.u16()?),
        SET_TP_DST => Action::ModTpDst(a.u16()?),
        ENQUEUE => crate::action_ext::decode_of10_enqueue(a)?,
        t => return Err(unsupported(format!("OpenFlow 1.0 action type {t}"))),
    })
}

fn decode_of11(typ: u16, a: &mut Rd<'_>, ver: u8) -> Result<Action> {
    use ofpat11::*;
    Ok(match typ {
        OUTPUT => {
            let p = a.u32()?;
            let port =
                OfPort::from_ofp11(p).ok_or_else(|| invalid(format!("output port 0x{p:x}")))?;
            let max_len = a.u16()?;
            Action::Output { port, max_len }
        }
        PUSH_VLAN => Action::PushVlan(a.u16()?),
        POP_VLAN => Action::PopVlan,
        DEC_NW_TTL => Action::DecTtl(Vec::new()),
        SET_FIELD if ver >= version::OF12 => {
            let (d, value, mask) = read_tlv(a)?;
            let mf = tlv_mf(d)?;
            let mask = mask.unwrap_or(mf.byte_max());
            if mask != mf.byte_max() && ver < version::OF15 {
                return Err(invalid("masked OFPAT_SET_FIELD before OpenFlow 1.5"));
            }
            Action::SetField {
                field: mf,
                value: value & mask,
                mask,
            }
        }
        COPY_FIELD if ver >= version::OF15 => {
            let n_bits = u32::from(a.u16()?);
            let src_ofs = u32::from(a.u16()?);
            let dst_ofs = u32::from(a.u16()?);
            a.skip(2)?;
            let src = read_subfield_header(a)?;
            let dst = read_subfield_header(a)?;
            Action::Move {
                src: subfield(src, src_ofs, n_bits)?,
                dst: subfield(dst, dst_ofs, n_bits)?,
            }
        }
        crate::action_ext::OFPAT11_SET_NW_TTL => crate::action_ext::decode_of11_set_nw_ttl(a)?,
        GROUP => Action::Group(a.u32()?),
        crate::action_ext::OFPAT11_SET_QUEUE => Action::SetQueue(a.u32()?),
        t if ver == version::OF11 && (1..=10).contains(&t) => decode_of11_set(t, a)?,
        t => return Err(unsupported(format!("OpenFlow 1.1+ action type {t}"))),
    })
}

/// OpenFlow 1.1's own set actions (types 1–10; replaced by `set_field` in 1.2). As in OVS,
/// 1.1's `set_vlan_vid`/`set_vlan_pcp` do not push a tag.
fn decode_of11_set(t: u16, a: &mut Rd<'_>) -> Result<Action> {
    Ok(match t {
        1 => Action::ModVlanVid {
            vid: a.u16()? & 0x0fff,
            push_if_needed: false,
        },
        2 => Action::ModVlanPcp {
            pcp: a.u8()? & 7,
            push_if_needed: false,
        },
        3 => Action::ModDlSrc(a.mac()?),
        4 => Action::ModDlDst(a.mac()?),
        5 => Action::ModNwSrc(a.u32()?),
        6 => Action::ModNwDst(a.u32()?),
        7 => Action::ModNwTos(a.u8()? & 0xfc),
        8 => return Err(unsupported("action OFPAT11_SET_NW_ECN")),
        9 => Action::ModTpSrc(a.u16()?),
        _ => Action::ModTpDst(a.u16()?),
    })
}

/// Reads a TLV (header, value, optional mask) from an action body.
fn read_tlv(a: &mut Rd<'_>) -> Result<(&'static HeaderDef, u128, Option<u128>)> {
    let rh = fields::read_header(a)?;
    let d = fields::resolve(&rh)?;
    let n = usize::from(d.len);
    let value = be_uint(a.bytes(n)?);
    let mask = if rh.has_mask {
        Some(be_uint(a.bytes(n)?))
    } else {
        None
    };
    Ok((d, value, mask))
}

pub(crate) fn tlv_mf(d: &HeaderDef) -> Result<Mf> {
    match d.target {
        Target::Mf(mf) => Ok(mf),
        _ => Err(unsupported(format!("field {} in an action", d.name))),
    }
}

pub(crate) fn read_subfield_header(a: &mut Rd<'_>) -> Result<Mf> {
    let rh = fields::read_header(a)?;
    let d = fields::lookup(rh.class, rh.field, rh.experimenter).ok_or_else(|| {
        unsupported(format!(
            "field class 0x{:04x} field {} in an action",
            rh.class, rh.field
        ))
    })?;
    tlv_mf(d)
}

pub(crate) fn subfield(field: Mf, ofs: u32, n_bits: u32) -> Result<Subfield> {
    if n_bits == 0 || ofs + n_bits > field.def().n_bits {
        return Err(invalid(format!(
            "subfield {}[{}..{}]",
            field.subfield_name(),
            ofs,
            i64::from(ofs) + i64::from(n_bits) - 1
        )));
    }
    Ok(Subfield { field, ofs, n_bits })
}

pub(crate) fn ofs_nbits(v: u16, field: Mf) -> Result<Subfield> {
    subfield(field, u32::from(v >> 6), u32::from(v & 0x3f) + 1)
}

fn decode_vendor(a: &mut Rd<'_>, ver: u8, out: &mut Vec<Action>) -> Result<()> {
    let vendor = a.u32()?;
    if vendor != NX_VENDOR_ID {
        return Err(unsupported(format!(
            "vendor action of vendor 0x{vendor:08x}"
        )));
    }
    let sub = a.u16()?;
    use nxast::*;
    let act = match sub {
        RESUBMIT | RESUBMIT_TABLE | RESUBMIT_TABLE_CT => {
            let p = OfPort(a.u16()?);
            let t = a.u8()?;
            Action::Resubmit {
                port: (p != OfPort::IN_PORT).then_some(p),
                table: (sub != RESUBMIT && t != 0xff).then_some(t),
                ct: sub == RESUBMIT_TABLE_CT,
            }
        }
        REG_MOVE => {
            let n_bits = u32::from(a.u16()?);
            let src_ofs = u32::from(a.u16()?);
            let dst_ofs = u32::from(a.u16()?);
            let src = read_subfield_header(a)?;
            let dst = read_subfield_header(a)?;
            Action::Move {
                src: subfield(src, src_ofs, n_bits)?,
                dst: subfield(dst, dst_ofs, n_bits)?,
            }
        }
        REG_LOAD if ver >= version::OF15 => {
            // As in OVS: 1.5 has set_field with masks instead.
            return Err(unsupported("action NXAST_REG_LOAD in OpenFlow 1.5"));
        }
        REG_LOAD => {
            let on = a.u16()?;
            let mf = read_subfield_header(a)?;
            let dst = ofs_nbits(on, mf)?;
            let value = u128::from(a.u64()?);
            if dst.n_bits < 64 && value >> dst.n_bits != 0 {
                return Err(invalid(format!(
                    "load value 0x{value:x} wider than {} bits",
                    dst.n_bits
                )));
            }
            Action::Load { value, dst }
        }
        REG_LOAD2 => {
            let (d, value, mask) = read_tlv(a)?;
            let mf = tlv_mf(d)?;
            let mask = mask.unwrap_or(mf.byte_max()) & mf.byte_max();
            Action::SetField {
                field: mf,
                value: value & mask,
                mask,
            }
        }
        NOTE => Action::Note(a.rest().to_vec()),
        OUTPUT_REG => {
            let on = a.u16()?;
            let mf = read_subfield_header(a)?;
            Action::OutputReg {
                src: ofs_nbits(on, mf)?,
            }
        }
        OUTPUT_REG2 => {
            let on = a.u16()?;
            let _max_len = a.u16()?;
            let mf = read_subfield_header(a)?;
            Action::OutputReg {
                src: ofs_nbits(on, mf)?,
            }
        }
        DEC_TTL => Action::DecTtl(Vec::new()),
        DEC_TTL_CNT_IDS => {
            let n = usize::from(a.u16()?);
            a.skip(4)?;
            let mut ids = Vec::with_capacity(n.min(a.remaining() / 2));
            for _ in 0..n {
                ids.push(a.u16()?);
            }
            Action::DecTtl(ids)
        }
        CONTROLLER => {
            let max_len = a.u16()?;
            let id = a.u16()?;
            let reason = reason_from_wire(a.u8()?)?;
            Action::Controller {
                max_len,
                reason,
                id,
                userdata: Vec::new(),
                pause: false,
            }
        }
        CONTROLLER2 => decode_controller2(a)?,
        OUTPUT_TRUNC => {
            let port = OfPort(a.u16()?);
            let max_len = a.u32()?;
            Action::OutputTrunc { port, max_len }
        }
        CT => crate::ct_action::decode_ct(a, ver)?,
        NAT => return Err(invalid("nat outside ct")),
        CT_CLEAR => Action::CtClear,
        crate::action_ext::NXAST_EXIT => Action::Exit,
        crate::action_lb::NXAST_MULTIPATH => crate::action_lb::decode_nx_multipath(a)?,
        crate::action_lb::NXAST_BUNDLE => crate::action_lb::decode_nx_bundle(a, false)?,
        crate::action_lb::NXAST_BUNDLE_LOAD => crate::action_lb::decode_nx_bundle(a, true)?,
        crate::action_lb::NXAST_SAMPLE
        | crate::action_lb::NXAST_SAMPLE2
        | crate::action_lb::NXAST_SAMPLE3 => crate::action_lb::decode_nx_sample(a, sub)?,
        crate::action_lb::NXAST_CHECK_PKT_LARGER => {
            crate::action_lb::decode_nx_check_pkt_larger(a)?
        }
        crate::action_ext::NXAST_CLONE => crate::action_ext::decode_nx_clone(a, ver)?,
        crate::action_ext::NXAST_WRITE_METADATA => crate::action_ext::decode_nx_write_metadata(a)?,
        // conjunctive matches (issue #17): `clause:8, n_clauses:8, id:32` (OVS
        // `decode_NXAST_RAW_CONJUNCTION`).
        CONJUNCTION => {
            let clause = a.u8()?;
            let n_clauses = a.u8()?;
            let id = a.u32()?;
            if !(2..=64).contains(&n_clauses) || clause >= n_clauses {
                return Err(invalid(format!(
                    "NXBAC_BAD_CONJUNCTION: conjunction clause {clause} of {n_clauses}"
                )));
            }
            Action::Conjunction {
                id,
                clause,
                n_clauses,
            }
        }
        GROUP => {
            a.skip(2)?;
            Action::Group(a.u32()?)
        }
        crate::action_ext::NXAST_SET_QUEUE => {
            a.skip(2)?;
            Action::SetQueue(a.u32()?)
        }
        crate::action_ext::NXAST_POP_QUEUE => Action::PopQueue,
        other => {
            let name = match other {
                2 => "NXAST_SET_TUNNEL",
                4 => "NXAST_SET_QUEUE",
                5 => "NXAST_POP_QUEUE",
                9 => "NXAST_SET_TUNNEL64",
                10 => "NXAST_MULTIPATH",
                12 => "NXAST_BUNDLE",
                13 => "NXAST_BUNDLE_LOAD",
                16 => "NXAST_LEARN",
                17 => "NXAST_EXIT",
                19 => "NXAST_FIN_TIMEOUT",
                22 => "NXAST_WRITE_METADATA",
                27 => "NXAST_STACK_PUSH",
                28 => "NXAST_STACK_POP",
                29 => "NXAST_SAMPLE",
                38 => "NXAST_SAMPLE2",
                42 => "NXAST_CLONE",
                _ => "",
            };
            return Err(if name.is_empty() {
                unsupported(format!("action NXAST subtype {other}"))
            } else {
                unsupported(format!("action {name}"))
            });
        }
    };
    out.push(act);
    Ok(())
}

fn decode_controller2(a: &mut Rd<'_>) -> Result<Action> {
    a.skip(6)?;
    let (mut max_len, mut id, mut reason) = (u16::MAX, 0, PacketInReason::Action);
    let mut userdata = Vec::new();
    let mut pause = false;
    while !a.is_empty() {
        let (typ, mut p) = a.prop("NXAST_CONTROLLER2 property")?;
        match typ {
            0 => max_len = p.u16()?,
            1 => id = p.u16()?,
            2 => reason = reason_from_wire(p.u8()?)?,
            3 => userdata = p.rest().to_vec(),
            4 => pause = true,
            5 => return Err(unsupported("controller(meter_id=...)")),
            t => return Err(unsupported(format!("NXAST_CONTROLLER2 property {t}"))),
        }
    }
    Ok(Action::Controller {
        max_len,
        reason,
        id,
        userdata,
        pause,
    })
}

// ---------------------------------------------------------------------------------------
// Encoding.

/// Starts a Nicira action; returns its start offset (finish with [`end_action`]).
pub(crate) fn nx_start(w: &mut Wr, sub: u16) -> usize {
    let start = w.len();
    w.u16(OFPAT_VENDOR);
    w.u16(0);
    w.u32(NX_VENDOR_ID);
    w.u16(sub);
    start
}

/// Pads the action begun at `start` to 8 and writes its length.
pub(crate) fn end_action(w: &mut Wr, start: usize) -> Result<()> {
    w.pad8_from(start);
    w.patch_len(start + 2, start, "action")
}

fn std_start(w: &mut Wr, typ: u16) -> usize {
    let start = w.len();
    w.u16(typ);
    w.u16(0);
    start
}

pub(crate) fn nxm_hdr(mf: Mf) -> Result<&'static HeaderDef> {
    fields::nxm_header(mf).ok_or_else(|| unsupported(format!("field {mf} has no NXM/OXM header")))
}

pub(crate) fn put_hdr_u32(w: &mut Wr, d: &HeaderDef) -> Result<()> {
    if d.class == fields::OXM_EXPERIMENTER {
        return Err(unsupported(format!("experimenter field {} here", d.name)));
    }
    fields::write_header(w, d, false);
    Ok(())
}

pub(crate) fn enc_ofs_nbits(s: &Subfield) -> u16 {
    ((s.ofs << 6) | (s.n_bits.saturating_sub(1) & 0x3f)) as u16
}

/// Encodes an action list.
pub(crate) fn encode_actions(w: &mut Wr, acts: &[Action], cx: EncodeCtx) -> Result<()> {
    for a in acts {
        encode_action(w, a, cx)?;
    }
    Ok(())
}

fn set_field(w: &mut Wr, mf: Mf, value: u128, mask: u128, cx: EncodeCtx) -> Result<()> {
    let full = mf.byte_max();
    let mask = mask & full;
    if cx.version >= version::OF12 && (mask == full || cx.version >= version::OF15) {
        let d = fields::oxm_header(mf, cx.version)
            .ok_or_else(|| unsupported(format!("set_field of {mf}")))?;
        let start = std_start(w, ofpat11::SET_FIELD);
        let masked = mask != full;
        fields::write_header(w, d, masked);
        let n = usize::from(d.len);
        w.uint(value & mask, n);
        if masked {
            w.uint(mask, n);
        }
        return end_action(w, start);
    }
    let d = nxm_hdr(mf)?;
    let start = nx_start(w, nxast::REG_LOAD2);
    fields::write_header(w, d, true);
    let n = usize::from(d.len);
    w.uint(value & mask, n);
    w.uint(mask, n);
    end_action(w, start)
}

fn encode_action(w: &mut Wr, a: &Action, cx: EncodeCtx) -> Result<()> {
    if let Some(r) = crate::action_ext::encode_ext(w, a, cx) {
        return r;
    }
    if let Some(r) = crate::action_lb::encode_lb(w, a, cx) {
        return r;
    }
    let v10 = cx.version == version::OF10;
    match a {
        // Only a continuation holds one, and says it with properties, not an action.
        Action::UnrollXlate { .. } => Err(invalid("unroll_xlate has no OpenFlow encoding")),
        Action::Output { port, max_len } => {
            if v10 {
                let s = std_start(w, ofpat10::OUTPUT);
                w.u16(port.0);
                w.u16(*max_len);
                end_action(w, s)
            } else {
                let s = std_start(w, ofpat11::OUTPUT);
                w.u32(port.to_ofp11());
                w.u16(*max_len);
                w.zeros(6);
                end_action(w, s)
            }
        }
        Action::OutputTrunc { port, max_len } => {
            let s = nx_start(w, nxast::OUTPUT_TRUNC);
            w.u16(port.0);
            w.u32(*max_len);
            end_action(w, s)
        }
        Action::OutputReg { src } => {
            let d = nxm_hdr(src.field)?;
            if d.class == fields::OXM_EXPERIMENTER {
                let s = nx_start(w, nxast::OUTPUT_REG2);
                w.u16(enc_ofs_nbits(src));
                w.u16(u16::MAX);
                fields::write_header(w, d, false);
                end_action(w, s)
            } else {
                let s = nx_start(w, nxast::OUTPUT_REG);
                w.u16(enc_ofs_nbits(src));
                put_hdr_u32(w, d)?;
                w.u16(u16::MAX);
                end_action(w, s)
            }
        }
        Action::Controller {
            max_len,
            reason,
            id,
            userdata,
            pause: false,
        } if userdata.is_empty() => {
            let s = nx_start(w, nxast::CONTROLLER);
            w.u16(*max_len);
            w.u16(*id);
            w.u8(reason.code());
            end_action(w, s)
        }
        Action::Controller {
            max_len,
            reason,
            id,
            userdata,
            pause,
        } => {
            // OVS `encode_CONTROLLER`: NXAST_CONTROLLER2, six bytes of padding, then a
            // property per non-default setting, each padded to 8 bytes.
            let s = nx_start(w, nxast::CONTROLLER2);
            w.zeros(6);
            let prop = |w: &mut Wr, typ: u16, body: &[u8]| {
                let start = w.len();
                w.u16(typ);
                w.u16((4 + body.len()) as u16);
                w.bytes(body);
                w.zeros((start + 4 + body.len()).next_multiple_of(8) - (start + 4 + body.len()));
            };
            if *max_len != u16::MAX {
                prop(w, 0, &max_len.to_be_bytes());
            }
            if *id != 0 {
                prop(w, 1, &id.to_be_bytes());
            }
            if *reason != PacketInReason::Action {
                prop(w, 2, &[reason.code()]);
            }
            if userdata.len() > usize::from(u16::MAX) - 4 - 64 {
                return Err(invalid("controller userdata too long"));
            }
            if !userdata.is_empty() {
                prop(w, 3, userdata);
            }
            if *pause {
                prop(w, 4, &[]);
            }
            end_action(w, s)
        }
        Action::Resubmit { port, table, ct } => {
            let sub = if *ct {
                nxast::RESUBMIT_TABLE_CT
            } else {
                nxast::RESUBMIT_TABLE
            };
            let s = nx_start(w, sub);
            w.u16(port.unwrap_or(OfPort::IN_PORT).0);
            w.u8(table.unwrap_or(0xff));
            end_action(w, s)
        }
        Action::GotoTable(t) => {
            if v10 {
                encode_action(
                    w,
                    &Action::Resubmit {
                        port: None,
                        table: Some(*t),
                        ct: false,
                    },
                    cx,
                )
            } else {
                Err(unsupported("goto_table inside an action list"))
            }
        }
        Action::SetField { field, value, mask } => set_field(w, *field, *value, *mask, cx),
        Action::Load { value, dst } => {
            let d = nxm_hdr(dst.field)?;
            if cx.version >= version::OF15 {
                // 1.5 has no NXAST_REG_LOAD: a masked set_field does the same.
                return set_field(w, dst.field, value << dst.ofs, dst.mask(), cx);
            }
            if d.class == fields::OXM_EXPERIMENTER || dst.n_bits > 64 {
                return set_field(
                    w,
                    dst.field,
                    value << dst.ofs,
                    dst.mask(),
                    EncodeCtx {
                        version: version::OF10,
                        ..cx
                    },
                );
            }
            let s = nx_start(w, nxast::REG_LOAD);
            w.u16(enc_ofs_nbits(dst));
            put_hdr_u32(w, d)?;
            w.u64(*value as u64);
            end_action(w, s)
        }
        Action::Move { src, dst } => {
            if cx.version >= version::OF15 {
                let s = std_start(w, ofpat11::COPY_FIELD);
                w.u16(src.n_bits as u16);
                w.u16(src.ofs as u16);
                w.u16(dst.ofs as u16);
                w.u16(0);
                for f in [src.field, dst.field] {
                    let d = fields::oxm_header(f, cx.version)
                        .ok_or_else(|| unsupported(format!("move of {f}")))?;
                    fields::write_header(w, d, false);
                }
                end_action(w, s)
            } else {
                let s = nx_start(w, nxast::REG_MOVE);
                w.u16(src.n_bits as u16);
                w.u16(src.ofs as u16);
                w.u16(dst.ofs as u16);
                fields::write_header(w, nxm_hdr(src.field)?, false);
                fields::write_header(w, nxm_hdr(dst.field)?, false);
                end_action(w, s)
            }
        }
        Action::ModDlSrc(mac) | Action::ModDlDst(mac) => {
            let src = matches!(a, Action::ModDlSrc(_));
            if cx.version >= version::OF12 {
                let f = if src { Mf::EthSrc } else { Mf::EthDst };
                return set_field(w, f, u128::from(*mac), u128::MAX, cx);
            }
            let s = std_start(
                w,
                if src {
                    legacy(cx.version, ofpat10::SET_DL_SRC, 3)
                } else {
                    legacy(cx.version, ofpat10::SET_DL_DST, 4)
                },
            );
            w.mac(*mac);
            end_action(w, s)
        }
        Action::ModNwSrc(ip) | Action::ModNwDst(ip) => {
            let src = matches!(a, Action::ModNwSrc(_));
            if cx.version >= version::OF12 {
                let f = if src { Mf::Ipv4Src } else { Mf::Ipv4Dst };
                return set_field(w, f, u128::from(*ip), u128::MAX, cx);
            }
            let s = std_start(
                w,
                if src {
                    legacy(cx.version, ofpat10::SET_NW_SRC, 5)
                } else {
                    legacy(cx.version, ofpat10::SET_NW_DST, 6)
                },
            );
            w.u32(*ip);
            end_action(w, s)
        }
        Action::ModNwTos(tos) => {
            if cx.version >= version::OF12 {
                return set_field(w, Mf::IpDscpShifted, u128::from(tos >> 2), u128::MAX, cx);
            }
            let s = std_start(w, legacy(cx.version, ofpat10::SET_NW_TOS, 7));
            w.u8(*tos & 0xfc);
            end_action(w, s)
        }
        Action::ModTpSrc(p) | Action::ModTpDst(p) => {
            let src = matches!(a, Action::ModTpSrc(_));
            // OVS `encode_SET_L4_*_PORT`: a set-field of the flow's L4 protocol in 1.2+;
            // with no known protocol, the 1.1 action even there (OVS warns it is deprecated).
            let f = match (cx.nw_proto, src) {
                (ipproto::TCP, true) => Some(Mf::TcpSrc),
                (ipproto::TCP, false) => Some(Mf::TcpDst),
                (ipproto::UDP, true) => Some(Mf::UdpSrc),
                (ipproto::UDP, false) => Some(Mf::UdpDst),
                (ipproto::SCTP, true) => Some(Mf::SctpSrc),
                (ipproto::SCTP, false) => Some(Mf::SctpDst),
                _ => None,
            };
            if cx.version >= version::OF12
                && let Some(f) = f
            {
                return set_field(w, f, u128::from(*p), u128::MAX, cx);
            }
            let s = std_start(
                w,
                if src {
                    legacy(cx.version, ofpat10::SET_TP_SRC, 9)
                } else {
                    legacy(cx.version, ofpat10::SET_TP_DST, 10)
                },
            );
            w.u16(*p);
            end_action(w, s)
        }
        Action::ModVlanVid { vid, .. } => {
            if cx.version >= version::OF12 {
                let v = u128::from((*vid & 0x0fff) | 0x1000);
                return set_field(w, Mf::VlanVid, v, u128::MAX, cx);
            }
            let s = std_start(w, legacy(cx.version, ofpat10::SET_VLAN_VID, 1));
            w.u16(*vid & 0x0fff);
            end_action(w, s)
        }
        Action::ModVlanPcp { pcp, .. } => {
            if cx.version >= version::OF12 {
                return set_field(w, Mf::VlanPcp, u128::from(*pcp & 7), u128::MAX, cx);
            }
            let s = std_start(w, legacy(cx.version, ofpat10::SET_VLAN_PCP, 2));
            w.u8(*pcp & 7);
            end_action(w, s)
        }
        Action::StripVlan | Action::PopVlan => {
            let s = std_start(
                w,
                if v10 {
                    ofpat10::STRIP_VLAN
                } else {
                    ofpat11::POP_VLAN
                },
            );
            end_action(w, s)
        }
        Action::PushVlan(tpid) => {
            if v10 {
                return Ok(());
            }
            let s = std_start(w, ofpat11::PUSH_VLAN);
            w.u16(*tpid);
            end_action(w, s)
        }
        Action::DecTtl(ids) => {
            if ids.is_empty() {
                if v10 {
                    let s = nx_start(w, nxast::DEC_TTL);
                    end_action(w, s)
                } else {
                    let s = std_start(w, ofpat11::DEC_NW_TTL);
                    end_action(w, s)
                }
            } else {
                let s = nx_start(w, nxast::DEC_TTL_CNT_IDS);
                let n = u16::try_from(ids.len()).map_err(|_| Error::BadLength {
                    what: "dec_ttl ids",
                    len: ids.len(),
                })?;
                w.u16(n);
                w.zeros(4);
                for id in ids {
                    w.u16(*id);
                }
                end_action(w, s)
            }
        }
        Action::Ct(ct) => crate::ct_action::encode_ct(w, ct, cx),
        Action::CtClear => {
            let s = nx_start(w, nxast::CT_CLEAR);
            end_action(w, s)
        }
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => {
            let s = nx_start(w, nxast::CONJUNCTION);
            w.u8(*clause);
            w.u8(*n_clauses);
            w.u32(*id);
            end_action(w, s)
        }
        Action::Group(g) => {
            if v10 {
                let s = nx_start(w, nxast::GROUP);
                w.zeros(2);
                w.u32(*g);
                end_action(w, s)
            } else {
                let s = std_start(w, ofpat11::GROUP);
                w.u32(*g);
                end_action(w, s)
            }
        }
        Action::Note(bytes) => {
            let s = nx_start(w, nxast::NOTE);
            w.bytes(bytes);
            if w.len() - s < 16 {
                w.zeros(16 - (w.len() - s));
            }
            end_action(w, s)
        }
        // Encoded by `action_ext::encode_ext` above.
        Action::WriteMetadata { .. }
        | Action::ModNwTtl(_)
        | Action::Exit
        | Action::Clone(_)
        | Action::WriteActions(_)
        | Action::ClearActions
        | Action::SetQueue(_)
        | Action::Enqueue { .. }
        | Action::PopQueue => Ok(()),
        // Encoded by `action_lb::encode_lb` above.
        Action::Multipath(_)
        | Action::Bundle(_)
        | Action::Sample(_)
        | Action::CheckPktLarger { .. } => Ok(()),
    }
}

/// The type number of a legacy set action in 1.0 (`t10`) or 1.1 (`t11`); `None` from 1.2.
fn legacy(ver: u8, t10: u16, t11: u16) -> u16 {
    if ver == version::OF10 { t10 } else { t11 }
}

/// `acts` as wire actions of `cx.version`.
pub fn encode_action_list(acts: &[Action], cx: EncodeCtx) -> Result<Vec<u8>> {
    let mut w = Wr::new();
    encode_actions(&mut w, acts, cx)?;
    Ok(w.buf)
}
