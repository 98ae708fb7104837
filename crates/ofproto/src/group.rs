//! The group table of a bridge (OVS `ofproto.c` group mods, `ofproto-dpif.c` group
//! construction): groups by id, group mods with OVS's checks and errors, and what a select
//! group precomputes for translation (its selection method and `dp_hash` bucket map).
//!
//! # Group mods (OVS 3.1 semantics)
//!
//! - **add** refuses an existing id (`OFPGMFC_GROUP_EXISTS`); **modify** refuses a missing one
//!   (`OFPGMFC_UNKNOWN_GROUP`); add-or-modify does whichever applies. A modified group keeps
//!   its creation time and its counters restart.
//! - **delete** of one id (a missing id is not an error) or of every group (`group_id=all`)
//!   also deletes every flow whose actions name a deleted group, as OVS does.
//! - Checks, in OVS's order: bucket ids above `OFPG15_BUCKET_MAX` or repeated
//!   (`OFPGMFC_BAD_BUCKET`); a selection method on a non-select group, a method other than
//!   `hash`/`dp_hash`, or `fields` without `hash` (`OFPBPC_BAD_VALUE`); an indirect group
//!   without exactly one bucket, a weight outside a select group, a fast-failover bucket
//!   without liveness (`OFPGMFC_INVALID_GROUP`); a watch on an `all`/`indirect` bucket
//!   (`OFPGMFC_WATCH_UNSUPPORTED`); an id above `OFPG_MAX` (`OFPGMFC_INVALID_GROUP`).
//! - A bucket may name a group that does not exist (OVS accepts it; translation reports it),
//!   and groups may chain; loops end at the translation depth limit, as in OVS.
//! - Flows naming a group that does not exist are refused at flow-mod time
//!   (`OFPBAC_BAD_OUT_GROUP`, [`crate::FlowModError::BadOutGroup`]).
//!
//! Every group mod that changes something bumps the bridge's table version, so cached
//! decisions are re-translated exactly as after a flow mod.
//!
//! # Select groups
//!
//! OVS 3.1 `group_set_selection_method`: without a method, a group whose weights fit in at
//! most 256 hash values uses `dp_hash` with the symmetric L4 hash (`hash(sym_l4(0))`), else the
//! default hash in the slow path; `selection_method=dp_hash` uses `dp_hash` whenever at most
//! 256 values do (algorithm and basis from `selection_method_param`: high 32 bits the
//! algorithm, low 32 the basis); `selection_method=hash` with fields hashes those fields in
//! translation. The `dp_hash` bucket map is OVS's Webster apportionment
//! (`group_setup_dp_hash_table`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use flow::ofp::group::{
    BUCKET_ALL, BUCKET_FIRST, BUCKET_LAST, BUCKET_MAX, Bucket, GroupCommand, GroupDesc, GroupMod,
    GroupType, OFPG_ALL, OFPG_MAX,
};
use flow::ofp::{Action, OfPort};

use crate::bridge::Bridge;

/// Most `dp_hash` values a select group may use (`MAX_SELECT_GROUP_HASH_VALUES`).
pub const MAX_SELECT_GROUP_HASH_VALUES: u64 = 256;

/// How a select group picks its bucket (OVS `enum group_selection_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Symmetric L4 hash of the packet in translation (`SEL_METHOD_DEFAULT`).
    Default,
    /// Hash of the group's `fields` in translation (`SEL_METHOD_HASH`).
    Hash,
    /// `hash(...)` in the datapath, recirculation, bucket by `dp_hash` (`SEL_METHOD_DP_HASH`).
    DpHash {
        /// `OVS_HASH_ALG_SYM_L4` rather than `OVS_HASH_ALG_L4`.
        symmetric: bool,
        /// Hash basis.
        basis: u32,
    },
}

/// A group as the bridge holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// What the controller gave (id, type, buckets, properties).
    pub desc: GroupDesc,
    /// Selection method in effect (select groups; `Default` otherwise).
    pub selection: Selection,
    /// `dp_hash & hash_mask` → bucket index (select groups using `dp_hash`).
    pub hash_map: Vec<usize>,
    /// Mask of the `dp_hash` bits the bucket map uses.
    pub hash_mask: u32,
    /// Creation time (ms).
    pub created_ms: u64,
    /// Packets and bytes through the group (OVS `group_dpif` counters; a mod starts them
    /// again, as OVS's new group object does).
    pub stats: (u64, u64),
    /// Packets and bytes through each bucket, in bucket order.
    pub bucket_stats: Vec<(u64, u64)>,
}

impl Group {
    fn new(desc: GroupDesc, created_ms: u64) -> Group {
        let mut g = Group {
            desc,
            selection: Selection::Default,
            hash_map: Vec::new(),
            hash_mask: 0,
            created_ms,
            stats: (0, 0),
            bucket_stats: Vec::new(),
        };
        g.bucket_stats = vec![(0, 0); g.desc.buckets.len()];
        if g.desc.group_type == GroupType::Select {
            g.set_selection_method();
        }
        g
    }

    /// OVS `group_set_selection_method`.
    fn set_selection_method(&mut self) {
        let method = self.desc.props.selection_method.clone();
        let param = self.desc.props.selection_method_param;
        let has_fields = !self.desc.props.fields.is_empty();
        match method.as_str() {
            "" if self.setup_dp_hash_table(256) => {
                self.selection = Selection::DpHash {
                    symmetric: true,
                    basis: 0,
                };
            }
            // High 32 bits: the algorithm (0 = L4, 1 = symmetric L4; anything else falls
            // back to L4, as OVS does); low 32: the basis.
            "dp_hash" if self.setup_dp_hash_table(0) => {
                self.selection = Selection::DpHash {
                    symmetric: param >> 32 == 1,
                    basis: param as u32,
                };
            }
            "hash" if has_fields => self.selection = Selection::Hash,
            _ => {}
        }
    }

    /// OVS `group_setup_dp_hash_table`: Webster's method over `n_hash` hash values.
    fn setup_dp_hash_table(&mut self, max_hash: u64) -> bool {
        let b = &self.desc.buckets;
        if b.is_empty() {
            return false;
        }
        let total: u64 = b.iter().map(|x| u64::from(x.weight)).sum();
        if total == 0 {
            return false;
        }
        let min_weight = b
            .iter()
            .map(|x| x.weight)
            .filter(|w| *w > 0)
            .min()
            .unwrap_or(u16::MAX);
        let min_slots = total.div_ceil(u64::from(min_weight));
        let n_hash = min_slots.next_power_of_two().max(16);
        if n_hash > MAX_SELECT_GROUP_HASH_VALUES || (max_hash != 0 && n_hash > max_hash) {
            return false;
        }
        let mut value: Vec<f64> = b.iter().map(|x| f64::from(x.weight)).collect();
        let mut divisor: Vec<u32> = vec![1; b.len()];
        self.hash_map = (0..n_hash)
            .map(|_| {
                let mut w = 0;
                for i in 1..b.len() {
                    if value[i] > value[w] {
                        w = i;
                    }
                }
                divisor[w] += 2;
                value[w] = f64::from(b[w].weight) / f64::from(divisor[w]);
                w
            })
            .collect();
        self.hash_mask = (n_hash - 1) as u32;
        true
    }
}

/// The groups of a bridge, by id. Cloning is cheap (groups are shared).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupTable {
    groups: BTreeMap<u32, Arc<Group>>,
}

impl GroupTable {
    /// Group `id`.
    pub fn get(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id).map(|g| &**g)
    }

    /// Every group in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Group> {
        self.groups.values().map(|g| &**g)
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// Why a group mod was refused (OVS's OpenFlow error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupModError {
    /// `OFPGMFC_GROUP_EXISTS`.
    GroupExists,
    /// `OFPGMFC_UNKNOWN_GROUP`.
    UnknownGroup,
    /// `OFPGMFC_INVALID_GROUP`.
    InvalidGroup,
    /// `OFPGMFC_BAD_BUCKET`.
    BadBucket,
    /// `OFPGMFC_WATCH_UNSUPPORTED`.
    WatchUnsupported,
    /// `OFPBPC_BAD_VALUE` (a selection-method property OVS refuses).
    BadPropValue,
    /// `OFPGMFC_UNKNOWN_BUCKET` (an insert or remove names a bucket the group lacks).
    UnknownBucket,
    /// `OFPGMFC_BUCKET_EXISTS` (an insert brings a bucket id the group has).
    BucketExists,
}

impl GroupModError {
    /// OVS's error name.
    pub fn name(self) -> &'static str {
        match self {
            GroupModError::GroupExists => "OFPGMFC_GROUP_EXISTS",
            GroupModError::UnknownGroup => "OFPGMFC_UNKNOWN_GROUP",
            GroupModError::InvalidGroup => "OFPGMFC_INVALID_GROUP",
            GroupModError::BadBucket => "OFPGMFC_BAD_BUCKET",
            GroupModError::WatchUnsupported => "OFPGMFC_WATCH_UNSUPPORTED",
            GroupModError::BadPropValue => "OFPBPC_BAD_VALUE",
            GroupModError::UnknownBucket => "OFPGMFC_UNKNOWN_BUCKET",
            GroupModError::BucketExists => "OFPGMFC_BUCKET_EXISTS",
        }
    }
}

impl fmt::Display for GroupModError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for GroupModError {}

/// What a group mod did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupModResult {
    /// Groups added.
    pub added: usize,
    /// Groups modified.
    pub modified: usize,
    /// Groups deleted.
    pub deleted: usize,
    /// Flows deleted with them.
    pub flows_deleted: usize,
}

/// The checks OVS makes on a group mod before it touches the table (`ofputil_decode_group_mod`
/// bucket and property checks, `ofputil_check_group_mod`, `init_group`), in its order.
pub fn check_group_mod(gm: &GroupMod) -> Result<(), GroupModError> {
    if gm.command == GroupCommand::Delete {
        return Ok(());
    }
    for (i, b) in gm.buckets.iter().enumerate() {
        if b.bucket_id > BUCKET_MAX || gm.buckets[..i].iter().any(|o| o.bucket_id == b.bucket_id) {
            return Err(GroupModError::BadBucket);
        }
    }
    let p = &gm.props;
    if !p.selection_method.is_empty() {
        if gm.group_type != GroupType::Select
            || !matches!(p.selection_method.as_str(), "hash" | "dp_hash")
            || (!p.fields.is_empty() && p.selection_method != "hash")
        {
            return Err(GroupModError::BadPropValue);
        }
    } else if !p.fields.is_empty() || p.selection_method_param != 0 {
        return Err(GroupModError::BadPropValue);
    }
    if gm.group_type == GroupType::Indirect && gm.buckets.len() != 1 {
        return Err(GroupModError::InvalidGroup);
    }
    for b in &gm.buckets {
        if b.weight != 0 && gm.group_type != GroupType::Select {
            return Err(GroupModError::InvalidGroup);
        }
        match gm.group_type {
            GroupType::All | GroupType::Indirect if b.has_liveness() => {
                return Err(GroupModError::WatchUnsupported);
            }
            GroupType::FastFailover if !b.has_liveness() => {
                return Err(GroupModError::InvalidGroup);
            }
            _ => {}
        }
    }
    if gm.group_id > OFPG_MAX {
        return Err(GroupModError::InvalidGroup);
    }
    Ok(())
}

/// The buckets of a group after insert or remove `gm` (OVS `copy_buckets_for_insert_bucket`
/// and `copy_buckets_for_remove_bucket`): an insert puts the mod's buckets first
/// (`command_bucket_id=first`), last (`last`) or right behind bucket N; a remove takes out
/// the first, the last, bucket N, or every bucket (`all`).
fn bucket_command(old: &[Bucket], gm: &GroupMod) -> Result<Vec<Bucket>, GroupModError> {
    let at = |id: u32| old.iter().position(|b| b.bucket_id == id);
    let cb = gm.command_bucket_id;
    if gm.command == GroupCommand::RemoveBucket {
        let skip = match cb {
            BUCKET_ALL => return Ok(Vec::new()),
            BUCKET_FIRST => (!old.is_empty()).then_some(0),
            BUCKET_LAST => old.len().checked_sub(1),
            id => Some(at(id).ok_or(GroupModError::UnknownBucket)?),
        };
        return Ok(old
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, b)| b.clone())
            .collect());
    }
    let behind = if cb <= BUCKET_MAX {
        Some(at(cb).ok_or(GroupModError::UnknownBucket)?)
    } else {
        None
    };
    if gm.buckets.iter().any(|n| at(n.bucket_id).is_some()) {
        return Err(GroupModError::BucketExists);
    }
    let new = gm.buckets.iter().cloned();
    Ok(match (cb, behind) {
        (_, Some(i)) => old[..=i]
            .iter()
            .cloned()
            .chain(new)
            .chain(old[i + 1..].iter().cloned())
            .collect(),
        (BUCKET_LAST, None) => old.iter().cloned().chain(new).collect(),
        // `first` (and `all`, which the parser refuses for an insert: OVS leaves the new
        // buckets first then too).
        _ => new.chain(old.iter().cloned()).collect(),
    })
}

fn names_group(actions: &[Action], ids: &dyn Fn(u32) -> bool) -> bool {
    actions.iter().any(|a| match a {
        Action::Group(g) => ids(*g),
        Action::Ct(ct) => names_group(&ct.exec, ids),
        _ => false,
    })
}

impl Bridge {
    /// The group table.
    pub fn groups(&self) -> &GroupTable {
        &self.groups
    }

    /// Group `id`.
    pub fn group(&self, id: u32) -> Option<&Group> {
        self.groups.get(id)
    }

    /// Applies a group mod at time `now_ms` (see the module doc). On error nothing changed.
    pub fn group_mod(
        &mut self,
        gm: &GroupMod,
        now_ms: u64,
    ) -> Result<GroupModResult, GroupModError> {
        check_group_mod(gm)?;
        let exists = self.groups.groups.contains_key(&gm.group_id);
        let mut res = GroupModResult::default();
        match gm.command {
            GroupCommand::Add if exists => return Err(GroupModError::GroupExists),
            GroupCommand::Modify if !exists => return Err(GroupModError::UnknownGroup),
            GroupCommand::Add | GroupCommand::Modify | GroupCommand::AddOrMod => {
                let created = self
                    .groups
                    .groups
                    .get(&gm.group_id)
                    .map_or(now_ms, |g| g.created_ms);
                let g = Group::new(gm.desc(), created);
                self.groups.groups.insert(gm.group_id, Arc::new(g));
                if exists {
                    res.modified = 1;
                } else {
                    res.added = 1;
                }
            }
            GroupCommand::InsertBucket | GroupCommand::RemoveBucket => {
                let Some(old) = self.groups.groups.get(&gm.group_id) else {
                    return Err(GroupModError::UnknownGroup);
                };
                let desc = GroupDesc {
                    buckets: bucket_command(&old.desc.buckets, gm)?,
                    ..old.desc.clone()
                };
                // As OVS, the message was checked with its own type (what `ovs-ofctl`
                // sends: `all`) and the group that results is not checked again: an insert
                // can give an indirect group a second bucket.
                let g = Group::new(desc, old.created_ms);
                self.groups.groups.insert(gm.group_id, Arc::new(g));
                res.modified = 1;
            }
            GroupCommand::Delete => {
                let dead: Vec<u32> = if gm.group_id == OFPG_ALL {
                    self.groups.groups.keys().copied().collect()
                } else {
                    self.groups
                        .groups
                        .contains_key(&gm.group_id)
                        .then_some(gm.group_id)
                        .into_iter()
                        .collect()
                };
                if dead.is_empty() {
                    return Ok(res);
                }
                for id in &dead {
                    self.groups.groups.remove(id);
                }
                res.deleted = dead.len();
                let is_dead = |g: u32| dead.binary_search(&g).is_ok();
                for table in &mut self.tables {
                    let hits: Vec<_> = table
                        .iter()
                        .filter(|(_, r)| names_group(&r.actions, &is_dead))
                        .map(|(h, _)| h)
                        .collect();
                    for h in hits {
                        table.remove(h);
                        res.flows_deleted += 1;
                    }
                }
            }
        }
        self.version += 1;
        Ok(res)
    }

    /// Credits `packets`/`bytes` to the groups a translation went through (`XlateOut::groups`:
    /// group id and the bucket chosen, or every bucket when `None`, as OVS's
    /// `group_dpif_credit_stats`). A group deleted (or replaced) since is skipped.
    pub fn credit_groups(&mut self, hits: &[(u32, Option<u32>)], packets: u64, bytes: u64) {
        for &(id, bucket) in hits {
            let Some(g) = self.groups.groups.get_mut(&id) else {
                continue;
            };
            let g = Arc::make_mut(g);
            g.stats.0 += packets;
            g.stats.1 += bytes;
            let idx = bucket.map(|b| g.desc.buckets.iter().position(|x| x.bucket_id == b));
            for (i, s) in g.bucket_stats.iter_mut().enumerate() {
                if idx.is_none_or(|want| want == Some(i)) {
                    s.0 += packets;
                    s.1 += bytes;
                }
            }
        }
    }

    /// Parses and applies one `ovs-ofctl add-group`/`mod-group`/`del-groups` text.
    pub fn group_mod_text(
        &mut self,
        command: GroupCommand,
        text: &str,
        now_ms: u64,
    ) -> Result<GroupModResult, String> {
        let gm = flow::text::group::parse_group_mod(text, command).map_err(|e| e.to_string())?;
        self.group_mod(&gm, now_ms).map_err(|e| e.to_string())
    }

    /// Adds every group of an `ovs-ofctl add-groups` file. All or nothing: on the first bad
    /// line (syntax or refused), the error names the line and no group from the text stays.
    pub fn add_groups_text(&mut self, text: &str, now_ms: u64) -> Result<usize, String> {
        let mods = flow::text::group::parse_groups_file(text)?;
        let before = self.groups.clone();
        let version = self.version;
        for (i, gm) in mods.iter().enumerate() {
            if let Err(e) = self.group_mod(gm, now_ms) {
                self.groups = before;
                self.version = version;
                return Err(format!("group {} (group_id={}): {e}", i + 1, gm.group_id));
            }
        }
        Ok(mods.len())
    }

    /// Number of flows whose actions name group `id` (the group's `ref_count`).
    pub fn group_ref_count(&self, id: u32) -> usize {
        let is = |g: u32| g == id;
        self.tables
            .iter()
            .map(|t| {
                t.iter()
                    .filter(|(_, r)| names_group(&r.actions, &is))
                    .count()
            })
            .sum()
    }

    /// Whether port `p` is live for a fast-failover watch (OVS `odp_port_is_alive`: the port
    /// exists; our ports have no link state that could take them down).
    pub fn port_is_alive(&self, p: OfPort) -> bool {
        self.ports.contains_key(&p)
    }
}

// ---- OVS's hash functions (lib/hash.h, the portable murmur-based variant OVS's Debian
// build uses), as select groups score buckets with them. ----

/// OVS `hash_add` (the portable murmur step).
pub fn mhash_add(hash: u32, data: u32) -> u32 {
    let mut h = hash;
    if data != 0 {
        let d = data
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15)
            .wrapping_mul(0x1b87_3593);
        h ^= d;
    }
    h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

fn mhash_finish(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// OVS `hash_finish`.
pub fn hash_finish(hash: u32, fin: u32) -> u32 {
    mhash_finish(hash ^ fin)
}

/// OVS `hash_int`.
pub fn hash_int(x: u32, basis: u32) -> u32 {
    hash_finish(mhash_add(mhash_add(x, 0), basis), 8)
}

/// OVS `hash_uint64`.
pub fn hash_uint64(x: u64) -> u32 {
    hash_finish(mhash_add(mhash_add(0, x as u32), (x >> 32) as u32), 8)
}

/// OVS `hash_bytes` (little-endian words, as on x86).
pub fn hash_bytes(p: &[u8], basis: u32) -> u32 {
    let mut h = basis;
    let mut chunks = p.chunks_exact(4);
    for c in &mut chunks {
        h = mhash_add(h, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut t = [0u8; 4];
        t[..rest.len()].copy_from_slice(rest);
        h = mhash_add(h, u32::from_le_bytes(t));
    }
    hash_finish(h, p.len() as u32)
}

fn jhash_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn jhash_final(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// OVS `jhash_bytes` (lib/jhash.c; little-endian words).
pub fn jhash_bytes(p: &[u8], basis: u32) -> u32 {
    let word = |c: &[u8]| {
        let mut t = [0u8; 4];
        t[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(t)
    };
    let init = 0xdead_beefu32
        .wrapping_add(p.len() as u32)
        .wrapping_add(basis);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = p;
    while rest.len() >= 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        jhash_mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if !rest.is_empty() {
        let mut t = [0u8; 12];
        t[..rest.len()].copy_from_slice(rest);
        a = a.wrapping_add(word(&t[0..4]));
        b = b.wrapping_add(word(&t[4..8]));
        c = c.wrapping_add(word(&t[8..12]));
        jhash_final(&mut a, &mut b, &mut c);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, FlowModCommand};

    fn br() -> Bridge {
        Bridge::ovs_sandbox(4, Backend::Linear)
    }

    #[test]
    fn errors_as_ovs() {
        use GroupCommand::*;
        let mut b = br();
        let add = |b: &mut Bridge, t: &str| b.group_mod_text(Add, t, 0);
        add(&mut b, "group_id=1,type=all,bucket=output:1").unwrap();
        // What OVS 3.1 answered to these (ovs-ofctl -O OpenFlow15 add-group).
        for (t, e) in [
            (
                "group_id=1,type=all,bucket=output:1",
                "OFPGMFC_GROUP_EXISTS",
            ),
            ("group_id=13,type=indirect", "OFPGMFC_INVALID_GROUP"),
            (
                "group_id=15,type=select,bucket=bucket_id:5,output:1,bucket=bucket_id:5,output:2",
                "OFPGMFC_BAD_BUCKET",
            ),
            (
                "group_id=41,type=select,bucket=bucket_id:2,output:1,bucket=output:2,bucket=output:3,bucket=bucket_id:1,output:4",
                "OFPGMFC_BAD_BUCKET",
            ),
            (
                "group_id=16,type=select,selection_method=foo,bucket=output:1",
                "OFPBPC_BAD_VALUE",
            ),
            (
                "group_id=17,type=all,selection_method=hash,bucket=output:1",
                "OFPBPC_BAD_VALUE",
            ),
            (
                "group_id=19,type=all,bucket=watch_port:99,output:1",
                "OFPGMFC_WATCH_UNSUPPORTED",
            ),
        ] {
            assert_eq!(add(&mut b, t).unwrap_err(), e, "{t}");
        }
        assert_eq!(
            b.group_mod_text(Modify, "group_id=9,type=all,bucket=output:1", 0)
                .unwrap_err(),
            "OFPGMFC_UNKNOWN_GROUP"
        );
        // Accepted by OVS: a bucket naming a missing group, a self-chain, no buckets.
        for t in [
            "group_id=23,type=all,bucket=actions=group:999",
            "group_id=42,type=all,bucket=group:42",
            "group_id=24,type=all",
            "group_id=18,type=select,selection_method=hash,bucket=output:1",
        ] {
            add(&mut b, t).unwrap_or_else(|e| panic!("{t}: {e}"));
        }
        assert_eq!(b.groups().len(), 5);
    }

    #[test]
    fn flows_need_their_group_and_go_with_it() {
        let mut b = br();
        let e = b
            .flow_mod_text(FlowModCommand::Add, "tcp,actions=group:7", 0)
            .unwrap_err();
        assert_eq!(e.to_string(), "OFPBAC_BAD_OUT_GROUP: group 7");
        b.group_mod_text(GroupCommand::Add, "group_id=7,type=all,bucket=output:1", 0)
            .unwrap();
        b.group_mod_text(GroupCommand::Add, "group_id=8,type=all,bucket=output:2", 0)
            .unwrap();
        for f in [
            "tcp,actions=group:7",
            "udp,actions=output:3,group:7",
            "icmp,actions=group:8",
            "arp,actions=output:2",
        ] {
            b.flow_mod_text(FlowModCommand::Add, f, 0).unwrap();
        }
        assert_eq!(b.group_ref_count(7), 2);
        let v = b.version;
        let r = b
            .group_mod_text(GroupCommand::Delete, "group_id=7", 0)
            .unwrap();
        assert_eq!((r.deleted, r.flows_deleted), (1, 2));
        assert!(b.version > v);
        assert_eq!(b.n_rules(), 2);
        let r = b.group_mod_text(GroupCommand::Delete, "", 0).unwrap();
        assert_eq!((r.deleted, r.flows_deleted), (1, 1));
        assert_eq!(b.n_rules(), 1);
        // Deleting a missing group changes nothing (no version bump).
        let v = b.version;
        b.group_mod_text(GroupCommand::Delete, "group_id=5", 0)
            .unwrap();
        assert_eq!(b.version, v);
    }

    #[test]
    fn dp_hash_tables_as_ovs() {
        let mut b = br();
        // Two equal buckets: 16 values (mask 0xf); weights 1,1,20: 22 → 32 values (mask 0x1f),
        // as OVS's installed second-pass megaflows matched (`dp_hash(…/0xf)`, `…/0x1f`).
        b.group_mod_text(
            GroupCommand::Add,
            "group_id=1,type=select,selection_method=dp_hash,bucket=weight:100,output:1,bucket=weight:100,output:2",
            0,
        )
        .unwrap();
        b.group_mod_text(
            GroupCommand::Add,
            "group_id=5,type=select,bucket=output:1,bucket=output:2,bucket=weight=20,output:3",
            0,
        )
        .unwrap();
        let g1 = b.group(1).unwrap();
        assert_eq!(g1.hash_mask, 0xf);
        assert_eq!(
            g1.selection,
            Selection::DpHash {
                symmetric: false,
                basis: 0
            }
        );
        assert_eq!(g1.hash_map.iter().filter(|&&i| i == 0).count(), 8);
        let g5 = b.group(5).unwrap();
        assert_eq!(g5.hash_mask, 0x1f);
        assert_eq!(
            g5.selection,
            Selection::DpHash {
                symmetric: true,
                basis: 0
            }
        );
        // Weights 1 and 100 need 128 values (OVS 3.1 allows 256); 1 and 1000 need 1024: the
        // default selection then falls back to hashing in translation.
        b.group_mod_text(
            GroupCommand::Add,
            "group_id=6,type=select,bucket=weight=1,output:1,bucket=weight=100,output:2",
            0,
        )
        .unwrap();
        assert_eq!(b.group(6).unwrap().hash_mask, 127);
        b.group_mod_text(
            GroupCommand::Add,
            "group_id=7,type=select,bucket=weight=1,output:1,bucket=weight=1000,output:2",
            0,
        )
        .unwrap();
        assert_eq!(b.group(7).unwrap().selection, Selection::Default);
    }

    #[test]
    fn hash_functions_match_ovs() {
        // OVS 3.1 traced group 6 (`selection_method=hash,fields(ip_src,tcp_dst)`) for
        // nw_src=1.1.1.1, tp_dst=80 as "bucket 0: score 55743", "bucket 1: score 60393".
        let mut basis = hash_uint64(0);
        basis = hash_bytes(&[1, 1, 1, 1], basis);
        basis = hash_bytes(&80u16.to_be_bytes(), basis);
        assert_eq!(hash_int(0, basis) & 0xffff, 55743);
        assert_eq!(hash_int(1, basis) & 0xffff, 60393);
    }
}
