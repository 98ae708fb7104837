//! Group messages on an OpenFlow connection ([`crate::ofconn`]): `OFPT_GROUP_MOD` applied to
//! the bridge's group table (`ofproto::group`) with OVS's errors, and the group description
//! and group features multipart replies, so that `ovs-ofctl -O OpenFlow11..15 add-group`,
//! `mod-group`, `del-groups`, `dump-groups` and `dump-group-features` work against the
//! daemon. Group statistics are not answered (no group counters are kept yet).

use ofproto::group::GroupModError;
use openflow::group::{
    OFPMP_GROUP_DESC, OFPMP_GROUP_FEATURES, decode_group_mod, group_features, put_group_desc,
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

/// The body of a group multipart reply of type `mp_type`, or the error OVS gives.
pub fn multipart(shared: &SharedBridge, mp_type: u16, ver: u8) -> Result<Vec<u8>, OfpErr> {
    match mp_type {
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
