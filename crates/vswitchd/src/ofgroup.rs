//! Group messages on an OpenFlow connection ([`crate::ofconn`]): `OFPT_GROUP_MOD` applied to
//! the bridge's group table (`ofproto::group`) with OVS's errors, and the group description
//! and group features multipart replies, so that `ovs-ofctl -O OpenFlow11..15 add-group`,
//! `mod-group`, `del-groups`, `dump-groups`, `dump-group-features` and `dump-group-stats`
//! work against the daemon. Group statistics are the packets and bytes the revalidators
//! credit to the groups (and buckets) each megaflow's translation went through, as OVS's
//! `xlate_group_stats`; `ref_count` counts the flows naming the group.

use flow::ofp::group::OFPG_ALL;
use ofproto::group::GroupModError;
use openflow::group::{
    OFPMP_GROUP, OFPMP_GROUP_DESC, OFPMP_GROUP_FEATURES, decode_group_mod, group_features,
    put_group_desc, put_group_stats,
};
use openflow::header::version;
use upcall::handler::SharedBridge;

use crate::ofconn::OfpErr;

/// OVS's `OFPGMFC_*` code of a refused group mod.
fn error(e: GroupModError) -> OfpErr {
    match e {
        GroupModError::GroupExists => OfpErr::GroupMod(0),
        GroupModError::InvalidGroup => OfpErr::GroupMod(1),
        GroupModError::WatchUnsupported => OfpErr::GroupMod(6),
        GroupModError::UnknownGroup => OfpErr::GroupMod(8),
        GroupModError::BadBucket => OfpErr::GroupMod(12),
        GroupModError::BadPropValue => OfpErr::BadPropValue,
        GroupModError::UnknownBucket => OfpErr::GroupMod(15),
        GroupModError::BucketExists => OfpErr::GroupMod(16),
    }
}

/// Decodes and applies a group mod (body after the header) of version `ver`; one write,
/// then the change signal (revalidation re-translates what the change may affect).
pub fn group_mod(shared: &SharedBridge, body: &[u8], ver: u8) -> Result<(), OfpErr> {
    let gm = decode_group_mod(body, ver).map_err(|e| OfpErr::of_codec(&e))?;
    let now = shared.now_ms();
    let r = shared.write(move |b| b.group_mod(&gm, now));
    shared.notify();
    r.map(drop).map_err(error)
}

/// The body of a group multipart reply of type `mp_type` to request body `req`, or the
/// error OVS gives.
pub fn multipart(
    shared: &SharedBridge,
    mp_type: u16,
    req: &[u8],
    ver: u8,
) -> Result<Vec<u8>, OfpErr> {
    match mp_type {
        OFPMP_GROUP if ver >= version::OF11 => {
            // `ofp11_group_stats_request`: group_id, 4 bytes of padding.
            let Some(id) = req
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            else {
                return Err(OfpErr::BadLen);
            };
            let now = shared.now_ms();
            let br = shared.read();
            let mut out = Vec::new();
            for g in br.groups().iter() {
                if id != OFPG_ALL && g.desc.group_id != id {
                    continue;
                }
                let refs = u32::try_from(br.group_ref_count(g.desc.group_id)).unwrap_or(u32::MAX);
                put_group_stats(
                    &mut out,
                    g.desc.group_id,
                    refs,
                    g.stats,
                    &g.bucket_stats,
                    now.saturating_sub(g.created_ms),
                    ver,
                )
                .map_err(|e| OfpErr::of_codec(&e))?;
            }
            Ok(out)
        }
        OFPMP_GROUP_DESC if ver >= version::OF11 => {
            let br = shared.read();
            let mut out = Vec::new();
            for g in br.groups().iter() {
                put_group_desc(&mut out, &g.desc, ver).map_err(|e| OfpErr::of_codec(&e))?;
            }
            Ok(out)
        }
        OFPMP_GROUP_FEATURES if ver >= version::OF12 => Ok(group_features(ver)),
        _ => Err(OfpErr::BadStat),
    }
}
