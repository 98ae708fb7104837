//! OpenFlow groups (OVS `struct ofputil_group_mod`, `struct ofputil_bucket`): the group types,
//! buckets and the selection-method properties of select groups.
//!
//! Plain data. The `ovs-ofctl add-group` / `dump-groups` text lives in [`crate::text::group`];
//! the group table and translation live in `ofproto`.

use crate::ofp::action::Action;
use crate::ofp::fields::Mf;
use crate::ofp::port::OfPort;

/// Highest group number a group may have (`OFPG_MAX`).
pub const OFPG_MAX: u32 = 0xffff_ff00;
/// "All groups" in a delete or stats request (`OFPG_ALL`).
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// "Any group" / no group (`OFPG_ANY`), e.g. a bucket without `watch_group`.
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// Highest bucket id (`OFPG15_BUCKET_MAX`).
pub const BUCKET_MAX: u32 = 0xffff_ff00;
/// `command_bucket_id=first` (`OFPG15_BUCKET_FIRST`).
pub const BUCKET_FIRST: u32 = 0xffff_fffd;
/// `command_bucket_id=last` (`OFPG15_BUCKET_LAST`).
pub const BUCKET_LAST: u32 = 0xffff_fffe;
/// `command_bucket_id=all`, and "no bucket command" (`OFPG15_BUCKET_ALL`).
pub const BUCKET_ALL: u32 = 0xffff_ffff;
/// Longest selection method name, terminating NUL included (`NTR_MAX_SELECTION_METHOD_LEN`).
pub const MAX_SELECTION_METHOD_LEN: usize = 16;

/// A group type (`enum ofp11_group_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupType {
    /// `all`: every bucket, each on a copy of the packet.
    All,
    /// `select`: one bucket, chosen by hash and weight.
    Select,
    /// `indirect`: the single bucket.
    Indirect,
    /// `ff` / `fast_failover`: the first live bucket.
    FastFailover,
}

impl GroupType {
    /// The OpenFlow number (`OFPGT11_*`).
    pub fn to_ofp(self) -> u8 {
        match self {
            GroupType::All => 0,
            GroupType::Select => 1,
            GroupType::Indirect => 2,
            GroupType::FastFailover => 3,
        }
    }

    /// From the OpenFlow number.
    pub fn from_ofp(t: u8) -> Option<GroupType> {
        Some(match t {
            0 => GroupType::All,
            1 => GroupType::Select,
            2 => GroupType::Indirect,
            3 => GroupType::FastFailover,
            _ => return None,
        })
    }

    /// The name `dump-groups` prints (`ff` for fast failover).
    pub fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "ff",
        }
    }
}

/// One bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// `bucket_id` (≤ [`BUCKET_MAX`] once assigned).
    pub bucket_id: u32,
    /// `weight` (select groups; 1 by default there, 0 elsewhere).
    pub weight: u16,
    /// `watch_port` (`OfPort::ANY` = none).
    pub watch_port: OfPort,
    /// `watch_group` ([`OFPG_ANY`] = none).
    pub watch_group: u32,
    /// The bucket's actions.
    pub actions: Vec<Action>,
}

impl Bucket {
    /// Whether the bucket names a liveness source (`ofputil_bucket_has_liveness`).
    pub fn has_liveness(&self) -> bool {
        self.watch_port != OfPort::ANY || self.watch_group != OFPG_ANY
    }
}

/// The properties of a select group (`struct ofputil_group_props`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupProps {
    /// `selection_method=` (empty = the switch's default).
    pub selection_method: String,
    /// `selection_method_param=`.
    pub selection_method_param: u64,
    /// `fields(...)`: hashed fields with their masks (field units), in field order.
    pub fields: Vec<(Mf, u128)>,
}

/// A group mod command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupCommand {
    /// `add-group`.
    Add,
    /// `mod-group`.
    Modify,
    /// `del-groups`.
    Delete,
    /// `add-group --may-create` / `mod-group --may-create` (OVS `OFPGC11_ADD_OR_MOD`).
    AddOrMod,
    /// `insert-buckets` (OpenFlow 1.5 `OFPGC15_INSERT_BUCKET`): the mod's buckets go into the
    /// group before, after or behind one of its buckets (`command_bucket_id`).
    InsertBucket,
    /// `remove-buckets` (`OFPGC15_REMOVE_BUCKET`): the first, the last, one by id, or all.
    RemoveBucket,
}

/// A group mod (OVS `struct ofputil_group_mod`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupMod {
    /// The command.
    pub command: GroupCommand,
    /// `group_id` ([`OFPG_ALL`] for "every group" in a delete).
    pub group_id: u32,
    /// The type (ignored by delete).
    pub group_type: GroupType,
    /// The buckets, ids assigned.
    pub buckets: Vec<Bucket>,
    /// Selection-method properties.
    pub props: GroupProps,
    /// Which bucket an insert or remove is about ([`BUCKET_FIRST`], [`BUCKET_LAST`],
    /// [`BUCKET_ALL`] or a bucket id); [`BUCKET_ALL`] for the other commands.
    pub command_bucket_id: u32,
}

/// A group as a switch holds and describes it (`struct ofputil_group_desc`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    /// `group_id`.
    pub group_id: u32,
    /// The type.
    pub group_type: GroupType,
    /// The buckets.
    pub buckets: Vec<Bucket>,
    /// Selection-method properties.
    pub props: GroupProps,
}

impl GroupMod {
    /// The group an add or modify describes.
    pub fn desc(&self) -> GroupDesc {
        GroupDesc {
            group_id: self.group_id,
            group_type: self.group_type,
            buckets: self.buckets.clone(),
            props: self.props.clone(),
        }
    }
}
