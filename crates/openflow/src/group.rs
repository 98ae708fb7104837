//! Group messages (OVS `lib/ofp-group.c`): `OFPT_GROUP_MOD` (OpenFlow 1.1–1.5) onto
//! [`flow::ofp::group::GroupMod`], and the bodies of the group description, group statistics
//! and group features multipart replies.
//!
//! - 1.1–1.4 buckets (`ofp11_bucket`: length, weight, watch port, watch group, actions) get
//!   ids by position, as OVS's decoder gives them; 1.5 buckets (`ofp15_bucket`: length,
//!   action length, bucket id, actions, then weight/watch properties) carry theirs.
//! - 1.5 group properties: OVS's `ntr_selection_method` experimenter property
//!   (`selection_method`, `selection_method_param`, hashed fields as OXM headers with masks);
//!   other properties are refused.
//! - Missing weight/watch properties take OVS's defaults (weight 1 in select groups, else 0;
//!   no watch).

use flow::ofp::OfPort;
use flow::ofp::group::{
    Bucket, GroupCommand, GroupDesc, GroupMod, GroupProps, GroupType, OFPG_ANY,
};

use crate::action::{EncodeCtx, decode_actions, encode_action_list};
use crate::codec::{Rd, Wr};
use crate::error::{Error, Result};
use crate::header::version;

/// `OFPT_GROUP_MOD` message type (1.1+).
pub const OFPT_GROUP_MOD: u8 = 15;
/// `OFPMP_GROUP` (group statistics).
pub const OFPMP_GROUP: u16 = 6;
/// `OFPMP_GROUP_DESC`.
pub const OFPMP_GROUP_DESC: u16 = 7;
/// `OFPMP_GROUP_FEATURES`.
pub const OFPMP_GROUP_FEATURES: u16 = 8;
/// The ONF-registered experimenter id OVS uses for `ntr_selection_method` (`NTR_VENDOR_ID`).
pub const NTR_VENDOR_ID: u32 = 0x0000_154d;

fn invalid(s: impl Into<String>) -> Error {
    Error::Invalid(s.into())
}

fn command(c: u16) -> Result<GroupCommand> {
    Ok(match c {
        0 => GroupCommand::Add,
        1 => GroupCommand::Modify,
        2 => GroupCommand::Delete,
        0x8000 => GroupCommand::AddOrMod,
        3 => GroupCommand::InsertBucket,
        // (4 is reserved in OpenFlow 1.5.)
        5 => GroupCommand::RemoveBucket,
        c => return Err(Error::Unsupported(format!("group mod command {c}"))),
    })
}

fn command_code(c: GroupCommand) -> u16 {
    match c {
        GroupCommand::Add => 0,
        GroupCommand::Modify => 1,
        GroupCommand::Delete => 2,
        GroupCommand::AddOrMod => 0x8000,
        GroupCommand::InsertBucket => 3,
        GroupCommand::RemoveBucket => 5,
    }
}

fn port_from_wire(p: u32) -> Result<OfPort> {
    OfPort::from_ofp11(p).ok_or_else(|| invalid(format!("watch port 0x{p:x}")))
}

/// Decodes the body (after the 8-byte header) of an `OFPT_GROUP_MOD` of wire version `ver`.
pub fn decode_group_mod(body: &[u8], ver: u8) -> Result<GroupMod> {
    let mut r = Rd::new(body, "group mod");
    let cmd = command(r.u16()?)?;
    let ty = r.u8()?;
    r.skip(1)?;
    let group_id = r.u32()?;
    // An insert or remove keeps the group's own type: `ovs-ofctl` sends whatever its
    // parser left there, and OVS takes the group's (a type outside 0–3 reads as `all`).
    let group_type = match GroupType::from_ofp(ty) {
        Some(t) => t,
        None if matches!(cmd, GroupCommand::InsertBucket | GroupCommand::RemoveBucket) => {
            GroupType::All
        }
        None => return Err(Error::Unsupported(format!("group type {ty}"))),
    };
    let mut gm = GroupMod {
        command: cmd,
        group_id,
        group_type,
        buckets: Vec::new(),
        props: GroupProps::default(),
        command_bucket_id: flow::ofp::group::BUCKET_ALL,
    };
    let default_weight = u16::from(group_type == GroupType::Select);
    if ver < version::OF15 {
        let mut id = 0u32;
        while !r.is_empty() {
            let len = usize::from(r.peek_u16(0)?);
            if len < 16 || len % 8 != 0 {
                return Err(Error::BadLength {
                    what: "bucket",
                    len,
                });
            }
            let mut b = r.sub(len, "bucket")?;
            b.skip(2)?;
            let weight = b.u16()?;
            let watch_port = port_from_wire(b.u32()?)?;
            let watch_group = b.u32()?;
            b.skip(4)?;
            let actions = decode_actions(b.rest(), ver)?;
            gm.buckets.push(Bucket {
                bucket_id: id,
                weight,
                watch_port,
                watch_group,
                actions,
            });
            id += 1;
        }
        return Ok(gm);
    }
    let bucket_len = usize::from(r.u16()?);
    r.skip(2)?;
    gm.command_bucket_id = r.u32()?;
    let mut buckets = r.sub(bucket_len, "bucket array")?;
    while !buckets.is_empty() {
        let len = usize::from(buckets.peek_u16(0)?);
        if len < 8 {
            return Err(Error::BadLength {
                what: "bucket",
                len,
            });
        }
        let mut b = buckets.sub(len, "bucket")?;
        b.skip(2)?;
        let alen = usize::from(b.u16()?);
        let bucket_id = b.u32()?;
        let actions = decode_actions(b.bytes(alen)?, ver)?;
        let mut bk = Bucket {
            bucket_id,
            weight: default_weight,
            watch_port: OfPort::ANY,
            watch_group: OFPG_ANY,
            actions,
        };
        while !b.is_empty() {
            let pt = b.u16()?;
            let pl = usize::from(b.u16()?);
            if pl < 8 {
                return Err(Error::BadLength {
                    what: "bucket property",
                    len: pl,
                });
            }
            let mut p = b.sub(pl - 4, "bucket property")?;
            match pt {
                0 => bk.weight = p.u16()?,
                1 => bk.watch_port = port_from_wire(p.u32()?)?,
                2 => bk.watch_group = p.u32()?,
                t => return Err(Error::Unsupported(format!("bucket property {t}"))),
            }
        }
        gm.buckets.push(bk);
    }
    while !r.is_empty() {
        let pt = r.u16()?;
        let pl = usize::from(r.u16()?);
        if pl < 8 {
            return Err(Error::BadLength {
                what: "group property",
                len: pl,
            });
        }
        let padded = pl.div_ceil(8) * 8;
        let mut p = r.sub(pl - 4, "group property")?;
        r.skip((padded - pl).min(r.remaining()))?;
        let exp = if pt == 0xffff { p.u32()? } else { 0 };
        let exp_type = if pt == 0xffff { p.u32()? } else { 0 };
        if pt != 0xffff || exp != NTR_VENDOR_ID || exp_type != 1 {
            return Err(Error::Unsupported(format!(
                "group property type {pt} (experimenter 0x{exp:x})"
            )));
        }
        p.skip(4)?;
        let name = p.bytes(16)?;
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        gm.props.selection_method = String::from_utf8_lossy(&name[..end]).into_owned();
        gm.props.selection_method_param = p.u64()?;
        while p.remaining() >= 4 {
            if p.peek_u16(0)? == 0 {
                // Padding to 8 bytes.
                break;
            }
            let h = crate::fields::read_header(&mut p)?;
            let d = crate::fields::resolve(&h)?;
            let mf = crate::action::tlv_mf(d)?;
            let n = usize::from(d.len);
            // The entry's value is the hash mask (OVS `oxm_pull_field_array`).
            let mut mask = crate::codec::be_uint(p.bytes(n)?);
            if h.has_mask {
                mask &= crate::codec::be_uint(p.bytes(n)?);
            }
            gm.props.fields.push((mf, mask));
        }
        gm.props.fields.sort_by_key(|(f, _)| *f);
    }
    Ok(gm)
}

/// Encodes `gm` as the body of an `OFPT_GROUP_MOD` of version `ver` (what `ovs-ofctl`
/// sends; used by tests and by clients).
pub fn encode_group_mod(gm: &GroupMod, ver: u8) -> Result<Vec<u8>> {
    let mut w = Wr::new();
    w.u16(command_code(gm.command));
    w.u8(gm.group_type.to_ofp());
    w.u8(0);
    w.u32(gm.group_id);
    let cx = EncodeCtx {
        version: ver,
        nw_proto: 0,
    };
    if ver < version::OF15 {
        for b in &gm.buckets {
            put_bucket11(&mut w, b, cx)?;
        }
        return Ok(w.buf);
    }
    let at = w.len();
    w.u16(0);
    w.zeros(2);
    w.u32(gm.command_bucket_id);
    let start = w.len();
    for b in &gm.buckets {
        put_bucket15(&mut w, b, gm.group_type, cx)?;
    }
    let n = u16::try_from(w.len() - start).map_err(|_| Error::BadLength {
        what: "bucket array",
        len: w.len() - start,
    })?;
    w.patch_u16(at, n);
    if !gm.props.selection_method.is_empty() {
        put_selection_method(&mut w, &gm.props, ver)?;
    }
    Ok(w.buf)
}

fn put_bucket11(w: &mut Wr, b: &Bucket, cx: EncodeCtx) -> Result<()> {
    let acts = encode_action_list(&b.actions, cx)?;
    let len = 16 + acts.len();
    w.u16(u16::try_from(len).map_err(|_| Error::BadLength {
        what: "bucket",
        len,
    })?);
    w.u16(b.weight);
    w.u32(b.watch_port.to_ofp11());
    w.u32(b.watch_group);
    w.zeros(4);
    w.bytes(&acts);
    Ok(())
}

fn put_bucket15(w: &mut Wr, b: &Bucket, ty: GroupType, cx: EncodeCtx) -> Result<()> {
    let acts = encode_action_list(&b.actions, cx)?;
    let start = w.len();
    w.u16(0);
    w.u16(u16::try_from(acts.len()).map_err(|_| Error::BadLength {
        what: "bucket actions",
        len: acts.len(),
    })?);
    w.u32(b.bucket_id);
    w.bytes(&acts);
    if ty == GroupType::Select {
        w.u16(0);
        w.u16(8);
        w.u16(b.weight);
        w.zeros(2);
    }
    if b.watch_port != OfPort::ANY {
        w.u16(1);
        w.u16(8);
        w.u32(b.watch_port.to_ofp11());
    }
    if b.watch_group != OFPG_ANY {
        w.u16(2);
        w.u16(8);
        w.u32(b.watch_group);
    }
    let len = w.len() - start;
    w.patch_u16(
        start,
        u16::try_from(len).map_err(|_| Error::BadLength {
            what: "bucket",
            len,
        })?,
    );
    Ok(())
}

fn put_selection_method(w: &mut Wr, p: &GroupProps, ver: u8) -> Result<()> {
    let start = w.len();
    w.u16(0xffff);
    w.u16(0);
    w.u32(NTR_VENDOR_ID);
    w.u32(1);
    w.zeros(4);
    crate::codec::put_c_string(w, &p.selection_method, 16);
    w.u64(p.selection_method_param);
    // OVS `oxm_put_field_array`: each field's header, unmasked, with the hash mask as its
    // value.
    for (mf, mask) in &p.fields {
        let d = crate::fields::oxm_header(*mf, ver)
            .or_else(|| crate::fields::nxm_header(*mf))
            .ok_or_else(|| Error::Unsupported(format!("hash field {mf:?}")))?;
        crate::fields::write_header(w, d, false);
        w.uint(*mask, usize::from(d.len));
    }
    let len = w.len() - start;
    w.patch_u16(
        start + 2,
        u16::try_from(len).map_err(|_| Error::BadLength {
            what: "group property",
            len,
        })?,
    );
    w.pad8_from(start);
    Ok(())
}

/// One entry of a group description reply (`ofp11_group_desc_stats` /
/// `ofp15_group_desc_stats`), appended to `w`.
pub fn put_group_desc(w: &mut Vec<u8>, g: &GroupDesc, ver: u8) -> Result<()> {
    let mut e = Wr::new();
    e.u16(0);
    e.u8(g.group_type.to_ofp());
    e.u8(0);
    e.u32(g.group_id);
    let cx = EncodeCtx {
        version: ver,
        nw_proto: 0,
    };
    if ver < version::OF15 {
        for b in &g.buckets {
            put_bucket11(&mut e, b, cx)?;
        }
    } else {
        e.u16(0);
        e.zeros(6);
        let start = e.len();
        for b in &g.buckets {
            put_bucket15(&mut e, b, g.group_type, cx)?;
        }
        let n = e.len() - start;
        e.patch_u16(
            8,
            u16::try_from(n).map_err(|_| Error::BadLength {
                what: "bucket list",
                len: n,
            })?,
        );
        if !g.props.selection_method.is_empty() {
            put_selection_method(&mut e, &g.props, ver)?;
        }
    }
    let len = e.len();
    e.patch_u16(
        0,
        u16::try_from(len).map_err(|_| Error::BadLength {
            what: "group desc",
            len,
        })?,
    );
    w.extend_from_slice(&e.buf);
    Ok(())
}

/// One entry of a group statistics reply (`ofp11_group_stats`, with the 1.3+ duration),
/// appended to `w`: `ref_count` flows use the group; `counts` are (packets, bytes) of the
/// group, then of each bucket.
pub fn put_group_stats(
    w: &mut Vec<u8>,
    group_id: u32,
    ref_count: u32,
    counts: (u64, u64),
    buckets: &[(u64, u64)],
    duration_ms: u64,
    ver: u8,
) -> Result<()> {
    let mut e = Wr::new();
    e.u16(0);
    e.zeros(2);
    e.u32(group_id);
    e.u32(ref_count);
    e.zeros(4);
    e.u64(counts.0);
    e.u64(counts.1);
    if ver >= version::OF13 {
        e.u32((duration_ms / 1000) as u32);
        e.u32(((duration_ms % 1000) * 1_000_000) as u32);
    }
    for (p, b) in buckets {
        e.u64(*p);
        e.u64(*b);
    }
    let len = e.len();
    e.patch_u16(
        0,
        u16::try_from(len).map_err(|_| Error::BadLength {
            what: "group stats",
            len,
        })?,
    );
    w.extend_from_slice(&e.buf);
    Ok(())
}

/// The group features reply body (OpenFlow 1.2+) OVS 3.1 sends (`ofputil_encode_group_features_reply` with
/// `ofproto.c`'s defaults): every type, select weight/liveness and chaining capabilities,
/// `OFPG_MAX` groups of each type, and the actions OVS allows for each.
pub fn group_features(ver: u8) -> Vec<u8> {
    let mut w = Wr::new();
    w.u32(0xf); // all, select, indirect, ff
    // OFPGFC_SELECT_WEIGHT | OFPGFC_SELECT_LIVENESS | OFPGFC_CHAINING
    w.u32(0x1 | 0x2 | 0x4);
    for _ in 0..4 {
        w.u32(flow::ofp::group::OFPG_MAX);
    }
    // The actions OVS 3.1 lists for every type (OpenFlow 1.2+ numbering): output, group,
    // set_field, pop_vlan, push_vlan, set_nw_ttl, dec_nw_ttl, set/dec_mpls_ttl, push/pop_mpls,
    // set_queue — bits 0 and 15..=25.
    let _ = ver;
    for _ in 0..4 {
        w.u32(0x1 | (0x7ff << 15));
    }
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::text::group::parse_group_mod;

    #[test]
    fn group_mods_round_trip_every_version() {
        for text in [
            "group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=output:1,bucket=bucket_id:1,weight:100,actions=output:2",
            "group_id=3,type=ff,bucket=watch_port:4,output:4,bucket=watch_group:3,output:3",
            "group_id=5,type=select,selection_method=hash,fields(ip_src=255.255.0.0,tcp_dst),bucket=output:1",
            "group_id=7,type=all,bucket=output:1,bucket=output:2,output:3",
            "group_id=8,type=indirect,bucket=group:7",
        ] {
            let gm = parse_group_mod(text, GroupCommand::Add).unwrap();
            for ver in [version::OF11, version::OF13, version::OF15] {
                let wire = encode_group_mod(&gm, ver).unwrap();
                let back = decode_group_mod(&wire, ver).unwrap();
                let mut want = gm.clone();
                if ver < version::OF15 {
                    // 1.1–1.4 carry no bucket ids (given by position) or properties.
                    for (i, b) in want.buckets.iter_mut().enumerate() {
                        b.bucket_id = i as u32;
                    }
                    want.props = GroupProps::default();
                }
                assert_eq!(back, want, "{text} v{ver}");
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for ver in [version::OF11, version::OF13, version::OF15] {
            for n in 0..64 {
                let b: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
                let _ = decode_group_mod(&b, ver);
            }
        }
    }
}
