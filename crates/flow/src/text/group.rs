//! The `ovs-ofctl` group syntax (OVS `lib/ofp-group.c`): `add-group` / `mod-group` /
//! `del-groups` text into a [`GroupMod`], and a group printed as `ovs-ofctl dump-groups`
//! prints it ([`format_group`]), plus the `group:N` action argument.
//!
//! Parsing follows `parse_ofp_group_mod_str__`: the text up to the first `bucket=` holds the
//! group keywords (`group_id`, `type`, `selection_method`, `selection_method_param`,
//! `fields(...)`); each `bucket=` starts a bucket that runs to the next `bucket=`, made of the
//! bucket keywords (`weight`, `watch_port`, `watch_group`, `bucket_id`) and actions (after
//! `actions=`, or bare). Missing bucket ids are assigned as `ovs-ofctl` does when it encodes an
//! OpenFlow 1.5 group mod (the lowest id not given to a later bucket, in order), so a group
//! parsed here carries the ids OVS's switch reports. What the text layer accepts but a switch
//! refuses (an unknown `selection_method`, a `selection_method` on a non-select group, watch
//! ports on non-fast-failover groups, duplicate bucket ids) is checked by `ofproto`'s group
//! table, with OVS's OpenFlow error, as OVS checks it at group-mod time.
//!
//! Errors are [`ParseError`]s with OVS's message and the 1-based column of the token at fault.

use std::fmt::Write as _;

use crate::ofp::action::Action;
use crate::ofp::fields::Mf;
use crate::ofp::group::{
    BUCKET_ALL, BUCKET_FIRST, BUCKET_LAST, BUCKET_MAX, Bucket, GroupCommand, GroupDesc, GroupMod,
    GroupProps, GroupType, MAX_SELECTION_METHOD_LEN, OFPG_ALL, OFPG_ANY, OFPG_MAX,
};
use crate::ofp::port::OfPort;
use crate::text::ParseError;
use crate::text::format::format_mf_value;
use crate::text::lex::KvIter;
use crate::text::parse::{Ctx, mf_parse, offset_in};
use crate::text::value::{str_to_u16, str_to_u32, str_to_u64};

/// The argument of `group:N` (OVS `parse_GROUP`: `str_to_u32`).
pub fn parse_group_action(value: &str) -> Result<Action, String> {
    if value.is_empty() {
        return Err("missing required numeric argument".into());
    }
    str_to_u32(value)
        .map(Action::Group)
        .ok_or_else(|| format!("invalid numeric format {value}"))
}

/// Parses `add-group` / `mod-group` / `del-groups` text for `command`.
pub fn parse_group_mod(text: &str, command: GroupCommand) -> Result<GroupMod, ParseError> {
    let cx = Ctx { text };
    // What each command takes, as `ovs-ofctl` (`parse_ofp_group_mod_str__`).
    let needs_type = !matches!(
        command,
        GroupCommand::Delete | GroupCommand::InsertBucket | GroupCommand::RemoveBucket
    );
    let takes_buckets = !matches!(command, GroupCommand::Delete | GroupCommand::RemoveBucket);
    let takes_command_bucket = matches!(
        command,
        GroupCommand::InsertBucket | GroupCommand::RemoveBucket
    );
    let mut had_command_bucket = false;
    let mut gm = GroupMod {
        command,
        group_id: OFPG_ANY,
        group_type: GroupType::All,
        buckets: Vec::new(),
        props: GroupProps::default(),
        command_bucket_id: BUCKET_ALL,
    };
    if command == GroupCommand::Delete && text.trim().is_empty() {
        gm.group_id = OFPG_ALL;
        return Ok(gm);
    }
    let (head, buckets) = match text.find("bucket=") {
        Some(at) => {
            if !takes_buckets {
                return Err(cx.err(at, "bucket", "bucket is not needed"));
            }
            (&text[..at], Some(at))
        }
        None => (text, None),
    };
    let mut had_type = false;
    let mut fields_at = None;
    for kv in KvIter::new(head) {
        let vat = kv.value_at;
        let verr = |m: String| cx.err(vat, kv.value, m);
        let kerr = |m: String| cx.err(kv.key_at, kv.key, m);
        match kv.key {
            "command_bucket_id" => {
                if !takes_command_bucket {
                    return Err(kerr("command bucket id is not needed".into()));
                }
                gm.command_bucket_id = match kv.value {
                    "all" => BUCKET_ALL,
                    "first" => BUCKET_FIRST,
                    "last" => BUCKET_LAST,
                    v => {
                        let id = str_to_u32(v)
                            .ok_or_else(|| verr(format!("invalid numeric format {v}")))?;
                        if id > BUCKET_MAX && ![BUCKET_FIRST, BUCKET_LAST, BUCKET_ALL].contains(&id)
                        {
                            return Err(verr(format!("invalid command bucket id {id}")));
                        }
                        id
                    }
                };
                if gm.command_bucket_id == BUCKET_ALL && command == GroupCommand::InsertBucket {
                    return Err(verr("command_bucket_id=all is not permitted".into()));
                }
                had_command_bucket = true;
            }
            "group_id" => {
                if kv.value == "all" {
                    gm.group_id = OFPG_ALL;
                } else {
                    gm.group_id = str_to_u32(kv.value)
                        .ok_or_else(|| verr(format!("invalid numeric format {}", kv.value)))?;
                    if gm.group_id != OFPG_ALL && gm.group_id > OFPG_MAX {
                        return Err(verr(format!("invalid group id {}", gm.group_id)));
                    }
                }
            }
            "type" => {
                if !needs_type {
                    return Err(kerr("type is not needed".into()));
                }
                gm.group_type = match kv.value {
                    "all" => GroupType::All,
                    "select" => GroupType::Select,
                    "indirect" => GroupType::Indirect,
                    "ff" | "fast_failover" => GroupType::FastFailover,
                    v => return Err(verr(format!("invalid group type {v}"))),
                };
                had_type = true;
            }
            "selection_method" => {
                if !needs_type {
                    return Err(kerr("selection method is not needed".into()));
                }
                if kv.value.len() >= MAX_SELECTION_METHOD_LEN {
                    return Err(verr(format!(
                        "selection method is longer than {} bytes long",
                        MAX_SELECTION_METHOD_LEN - 1
                    )));
                }
                gm.props.selection_method = kv.value.to_string();
            }
            "selection_method_param" => {
                if !needs_type {
                    return Err(kerr("selection method param is not needed".into()));
                }
                gm.props.selection_method_param = str_to_u64(kv.value)
                    .ok_or_else(|| verr(format!("invalid numeric format {}", kv.value)))?;
            }
            "fields" => {
                if !needs_type {
                    return Err(kerr("fields are not needed".into()));
                }
                fields_at = Some(kv.key_at);
                parse_fields(&cx, kv.value, &mut gm.props.fields)?;
            }
            k => return Err(kerr(format!("unknown keyword {k}"))),
        }
    }
    if gm.group_id == OFPG_ANY {
        return Err(cx.err(0, text, "must specify a group_id"));
    }
    if needs_type && !had_type {
        return Err(cx.err(0, text, "must specify a type"));
    }
    if command == GroupCommand::InsertBucket && !had_command_bucket {
        return Err(cx.err(0, text, "must specify a command bucket id"));
    }
    if gm.props.selection_method != "hash"
        && !gm.props.fields.is_empty()
        && let Some(at) = fields_at
    {
        return Err(cx.err(
            at,
            "fields",
            "fields may only be specified with \"selection_method=hash\"",
        ));
    }
    if gm.props.selection_method.is_empty() && gm.props.selection_method_param != 0 {
        return Err(cx.err(
            0,
            text,
            "selection_method_param is only allowed with \"selection_method\"",
        ));
    }
    let mut given: Vec<Option<u32>> = Vec::new();
    let mut at = buckets;
    while let Some(start) = at {
        let body = start + "bucket=".len();
        let next = text[body..].find("bucket=").map(|n| body + n);
        let end = next.unwrap_or(text.len());
        let (b, id) = parse_bucket(&cx, &text[body..end], gm.group_type)?;
        if gm.group_type != GroupType::Select && b.weight != 0 {
            return Err(cx.err(
                start,
                &text[start..end],
                "Only select groups can have bucket weights.",
            ));
        }
        gm.buckets.push(b);
        given.push(id);
        at = next;
    }
    if gm.group_type == GroupType::Indirect && gm.buckets.len() > 1 {
        return Err(cx.err(
            buckets.unwrap_or(0),
            "bucket",
            "Indirect groups can have at most one bucket.",
        ));
    }
    for (b, id) in gm.buckets.iter_mut().zip(assign_bucket_ids(&given)) {
        b.bucket_id = id;
    }
    gm.props.fields.sort_by_key(|(f, _)| *f);
    Ok(gm)
}

/// Bucket ids as `ovs-ofctl` assigns them when it encodes an OpenFlow 1.5 group mod
/// (`ofputil_encode_ofp15_group_mod`): given ids are kept; from the first bucket without one,
/// the ids given to the buckets *after* it are taken, and each bucket without an id gets the
/// next free id of an `id_pool` (its `next_free_id` cursor first, else the lowest free id).
pub fn assign_bucket_ids(given: &[Option<u32>]) -> Vec<u32> {
    let Some(first) = given.iter().position(Option::is_none) else {
        return given.iter().map(|g| g.unwrap_or(0)).collect();
    };
    let mut used: std::collections::BTreeSet<u32> =
        given[first + 1..].iter().flatten().copied().collect();
    let mut next_free = 0u32;
    let mut out = Vec::with_capacity(given.len());
    for g in given {
        match g {
            Some(id) => out.push(*id),
            None => {
                let id = if !used.contains(&next_free) {
                    next_free
                } else {
                    (0..=BUCKET_MAX).find(|i| !used.contains(i)).unwrap_or(0)
                };
                used.insert(id);
                next_free = id.saturating_add(1);
                out.push(id);
            }
        }
    }
    out
}

/// OVS `parse_select_group_field`: `name[=mask]` pairs.
fn parse_fields(cx: &Ctx<'_>, s: &str, out: &mut Vec<(Mf, u128)>) -> Result<(), ParseError> {
    for kv in KvIter::new(s) {
        let at = offset_in(cx.text, s) + kv.key_at;
        let Some(mf) = Mf::from_name(kv.key) else {
            return Err(cx.err(at, kv.key, format!("{s}: unknown field {}", kv.key)));
        };
        if out.iter().any(|(f, _)| *f == mf) {
            return Err(cx.err(at, kv.key, format!("{}: duplicate field", kv.key)));
        }
        let mask = if kv.value.is_empty() {
            mf.byte_max()
        } else {
            let vat = offset_in(cx.text, s) + kv.value_at;
            let (v, _) = mf_parse(mf, kv.value).map_err(|e| cx.err(vat, kv.value, e))?;
            if v == 0 {
                return Err(cx.err(
                    vat,
                    kv.value,
                    format!(
                        "{}: values are wildcards here and must not be all-zeros",
                        kv.key
                    ),
                ));
            }
            if !mf.def().maskable && v != mf.byte_max() {
                return Err(cx.err(
                    vat,
                    kv.value,
                    format!("{}: invalid mask for field {}", kv.value, mf.def().name),
                ));
            }
            v
        };
        out.push((mf, mask));
    }
    Ok(())
}

/// OVS `parse_bucket_str`. Returns the bucket (id 0) and the id the text gave, if any.
fn parse_bucket(
    cx: &Ctx<'_>,
    s: &str,
    group_type: GroupType,
) -> Result<(Bucket, Option<u32>), ParseError> {
    let base = offset_in(cx.text, s);
    let mut b = Bucket {
        bucket_id: 0,
        weight: u16::from(group_type == GroupType::Select),
        watch_port: OfPort::ANY,
        watch_group: OFPG_ANY,
        actions: Vec::new(),
    };
    let mut id = None;
    let mut had_actions = false;
    for kv in KvIter::new(s) {
        let vat = base + kv.value_at;
        let verr = |m: String| cx.err(vat, kv.value, m);
        match kv.key.to_ascii_lowercase().as_str() {
            "weight" => {
                b.weight = str_to_u16(kv.value)
                    .ok_or_else(|| verr(format!("invalid weight \"{}\"", kv.value)))?;
            }
            "watch_port" => {
                b.watch_port = OfPort::parse(kv.value)
                    .filter(|p| {
                        p.0 < OfPort::MAX.0 || *p == OfPort::ANY || *p == OfPort::CONTROLLER
                    })
                    .ok_or_else(|| verr(format!("{}: invalid watch_port", kv.value)))?;
            }
            "watch_group" => {
                b.watch_group = str_to_u32(kv.value)
                    .ok_or_else(|| verr(format!("invalid numeric format {}", kv.value)))?;
                if b.watch_group > OFPG_MAX {
                    return Err(verr(format!("invalid watch_group id {}", b.watch_group)));
                }
            }
            "bucket_id" => {
                let v = str_to_u32(kv.value)
                    .ok_or_else(|| verr(format!("invalid numeric format {}", kv.value)))?;
                if v > BUCKET_MAX {
                    return Err(verr(format!("invalid bucket_id id {v}")));
                }
                id = Some(v);
            }
            k => {
                // `actions=A` takes A (up to the next separator); any other pair is an action
                // itself (`output:1`, `ct(commit)`), as OVS rebuilds it into `key(value)`.
                let slice = if k == "action" || k == "actions" {
                    kv.value
                } else {
                    let start = kv.key_at;
                    let mut end = (kv.value_at + kv.value.len()).max(kv.key_at + kv.key.len());
                    if kv.delim == b'(' && s.as_bytes().get(end) == Some(&b')') {
                        end += 1;
                    }
                    &s[start..end]
                };
                had_actions = true;
                let at = offset_in(cx.text, slice);
                let col0 = cx.text[..at].chars().count();
                let acts = crate::text::parse_actions(slice).map_err(|mut e| {
                    e.column += col0;
                    e
                })?;
                if acts.iter().any(|a| matches!(a, Action::GotoTable(_))) {
                    return Err(cx.err(at, slice, "goto_table instruction not allowed here"));
                }
                b.actions.extend(acts);
            }
        }
    }
    if !had_actions {
        return Err(cx.err(base, s, "bucket must specify actions"));
    }
    if group_type == GroupType::FastFailover && !b.has_liveness() {
        return Err(cx.err(
            base,
            s,
            "fast failover bucket requires watch_port or watch_group",
        ));
    }
    Ok((b, id))
}

/// A group as `ovs-ofctl dump-groups` prints it (OVS `ofp_print_group`), without the leading
/// space. `of15`: the OpenFlow 1.5 form (bucket ids and the selection-method properties,
/// which older versions do not carry).
pub fn format_group(g: &GroupDesc, of15: bool) -> String {
    let mut s = format!("group_id={},type={}", g.group_id, g.group_type.name());
    let p = &g.props;
    if of15 && !p.selection_method.is_empty() {
        let _ = write!(s, ",selection_method={}", p.selection_method);
        if p.selection_method_param != 0 {
            let _ = write!(s, ",selection_method_param={}", p.selection_method_param);
        }
        let mut f = String::new();
        for (i, (mf, mask)) in p.fields.iter().enumerate() {
            if i > 0 {
                f.push(',');
            }
            f.push_str(mf.def().name);
            if *mask != mf.byte_max() {
                f.push('=');
                format_mf_value(&mut f, *mf, *mask, mf.byte_max());
            }
        }
        match p.fields.len() {
            0 => {}
            1 => {
                let _ = write!(s, ",fields={f}");
            }
            _ => {
                let _ = write!(s, ",fields({f})");
            }
        }
    }
    for b in &g.buckets {
        s.push_str(",bucket=");
        if of15 {
            let _ = write!(s, "bucket_id:{},", b.bucket_id);
        }
        if b.weight != u16::from(g.group_type == GroupType::Select) {
            let _ = write!(s, "weight:{},", b.weight);
        }
        if b.watch_port != OfPort::ANY {
            let _ = write!(s, "watch_port:{},", b.watch_port);
        }
        if b.watch_group != OFPG_ANY {
            let _ = write!(s, "watch_group:{},", b.watch_group);
        }
        s.push_str("actions=");
        s.push_str(&crate::text::format_actions(&b.actions));
    }
    s
}

/// Parses an `ovs-ofctl add-groups` file: one `add-group` text per line; blank lines and
/// `#` comments skipped. All or nothing: the first bad line's error names its line.
pub fn parse_groups_file(text: &str) -> Result<Vec<GroupMod>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.split_once('#').map_or(line, |(g, _)| g).trim();
        if l.is_empty() {
            continue;
        }
        out.push(
            parse_group_mod(l, GroupCommand::Add).map_err(|e| format!("line {}: {e}", i + 1))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(s: &str) -> Result<GroupMod, ParseError> {
        parse_group_mod(s, GroupCommand::Add)
    }

    #[test]
    fn prints_as_dump_groups() {
        // Expected texts are what OVS 3.1's `ovs-ofctl -O OpenFlow15 dump-groups` printed for
        // these `add-group` texts.
        for (input, of15, of13) in [
            (
                "group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=ct(commit,table=5,zone=7,nat(dst=10.0.0.5:80)),bucket=bucket_id:1,weight:100,actions=output:2",
                "group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=ct(commit,table=5,zone=7,nat(dst=10.0.0.5:80)),bucket=bucket_id:1,weight:100,actions=output:2",
                "group_id=1,type=select,bucket=weight:100,actions=ct(commit,table=5,zone=7,nat(dst=10.0.0.5:80)),bucket=weight:100,actions=output:2",
            ),
            (
                "group_id=3,type=fast_failover,bucket=watch_port:4,output:4,bucket=watch_port:3,output:3",
                "group_id=3,type=ff,bucket=bucket_id:0,watch_port:4,actions=output:4,bucket=bucket_id:1,watch_port:3,actions=output:3",
                "group_id=3,type=ff,bucket=watch_port:4,actions=output:4,bucket=watch_port:3,actions=output:3",
            ),
            (
                "group_id=5,type=select,bucket=output:1,bucket=output:2,bucket=weight=20,output:3",
                "group_id=5,type=select,bucket=bucket_id:0,actions=output:1,bucket=bucket_id:1,actions=output:2,bucket=bucket_id:2,weight:20,actions=output:3",
                "group_id=5,type=select,bucket=actions=output:1,bucket=actions=output:2,bucket=weight:20,actions=output:3",
            ),
            (
                "group_id=6,type=select,selection_method=hash,fields(ip_src,tcp_dst),bucket=output:1,bucket=output:2",
                "group_id=6,type=select,selection_method=hash,fields(ip_src,tcp_dst),bucket=bucket_id:0,actions=output:1,bucket=bucket_id:1,actions=output:2",
                "group_id=6,type=select,bucket=actions=output:1,bucket=actions=output:2",
            ),
            (
                "group_id=7,type=select,selection_method=hash,selection_method_param=7,fields(eth_src),bucket=output:1,bucket=output:2",
                "group_id=7,type=select,selection_method=hash,selection_method_param=7,fields=eth_src,bucket=bucket_id:0,actions=output:1,bucket=bucket_id:1,actions=output:2",
                "group_id=7,type=select,bucket=actions=output:1,bucket=actions=output:2",
            ),
            (
                "group_id=26,type=select,selection_method=hash,fields(ip_src=255.255.0.0,nw_proto),bucket=output:1",
                "group_id=26,type=select,selection_method=hash,fields(ip_src=255.255.0.0,nw_proto),bucket=bucket_id:0,actions=output:1",
                "group_id=26,type=select,bucket=actions=output:1",
            ),
            (
                "group_id=24,type=all",
                "group_id=24,type=all",
                "group_id=24,type=all",
            ),
            (
                "group_id=27,type=fast_failover,bucket=watch_group:4,output:1",
                "group_id=27,type=ff,bucket=bucket_id:0,watch_group:4,actions=output:1",
                "group_id=27,type=ff,bucket=watch_group:4,actions=output:1",
            ),
            (
                "group_id=40,type=select,bucket=output:1,bucket=bucket_id:0,output:2,bucket=output:3",
                "group_id=40,type=select,bucket=bucket_id:1,actions=output:1,bucket=bucket_id:0,actions=output:2,bucket=bucket_id:2,actions=output:3",
                "group_id=40,type=select,bucket=actions=output:1,bucket=actions=output:2,bucket=actions=output:3",
            ),
            (
                "group_id=14,type=select,bucket=bucket_id:5,output:1,bucket=output:2",
                "group_id=14,type=select,bucket=bucket_id:5,actions=output:1,bucket=bucket_id:0,actions=output:2",
                "group_id=14,type=select,bucket=actions=output:1,bucket=actions=output:2",
            ),
            (
                "group_id=22,type=all,bucket=group:1",
                "group_id=22,type=all,bucket=bucket_id:0,actions=group:1",
                "group_id=22,type=all,bucket=actions=group:1",
            ),
        ] {
            let g = add(input).unwrap_or_else(|e| panic!("{input}: {e}")).desc();
            assert_eq!(format_group(&g, true), of15, "{input}");
            assert_eq!(format_group(&g, false), of13, "{input}");
            // The OpenFlow 1.5 print parses back to the same group.
            assert_eq!(add(of15).unwrap().desc(), g, "{of15}");
        }
    }

    #[test]
    fn errors_as_ovs_ofctl() {
        for (input, msg) in [
            ("type=all,bucket=output:1", "must specify a group_id"),
            ("group_id=10,bucket=output:1", "must specify a type"),
            (
                "group_id=10,type=foo,bucket=output:1",
                "invalid group type foo",
            ),
            (
                "group_id=10,type=all,bucket=weight:5,output:1",
                "Only select groups can have bucket weights.",
            ),
            (
                "group_id=11,type=fast_failover,bucket=output:1",
                "fast failover bucket requires watch_port or watch_group",
            ),
            (
                "group_id=12,type=indirect,bucket=output:1,bucket=output:2",
                "Indirect groups can have at most one bucket.",
            ),
            (
                "group_id=4294967041,type=all,bucket=output:1",
                "invalid group id 4294967041",
            ),
            ("group_id=20,type=all,bucket=foo:1", "unknown action foo"),
            (
                "group_id=21,type=select,bucket=weight:70000,output:1",
                "invalid weight \"70000\"",
            ),
            (
                "group_id=25,type=all,bucket=output:1,goto_table:3",
                "goto_table instruction not allowed here",
            ),
            ("group_id=1,type=all,frob=2", "unknown keyword frob"),
            (
                "group_id=1,type=all,bucket=weight:0",
                "bucket must specify actions",
            ),
            (
                "group_id=1,type=all,fields(ip_src),bucket=output:1",
                "fields may only be specified with \"selection_method=hash\"",
            ),
            (
                "group_id=1,type=select,selection_method_param=3,bucket=output:1",
                "selection_method_param is only allowed with \"selection_method\"",
            ),
        ] {
            let e = add(input).expect_err(input);
            assert_eq!(e.message, msg, "{input}");
        }
        let e = add("group_id=20,type=all,bucket=foo:1").unwrap_err();
        assert_eq!(e.column, "group_id=20,type=all,bucket=".len() + 1);
        assert_eq!(e.token, "foo");
        assert_eq!(
            parse_group_action("abc"),
            Err("invalid numeric format abc".into())
        );
        assert_eq!(parse_group_action("0x10"), Ok(Action::Group(16)));
    }

    #[test]
    fn delete_forms() {
        let d = parse_group_mod("", GroupCommand::Delete).unwrap();
        assert_eq!(d.group_id, OFPG_ALL);
        let d = parse_group_mod("group_id=5", GroupCommand::Delete).unwrap();
        assert_eq!(d.group_id, 5);
        assert!(parse_group_mod("group_id=5,bucket=output:1", GroupCommand::Delete).is_err());
        assert!(parse_group_mod("group_id=5,type=all", GroupCommand::Delete).is_err());
    }

    #[test]
    fn bucket_command_forms() {
        let i = |t: &str| parse_group_mod(t, GroupCommand::InsertBucket);
        let r = |t: &str| parse_group_mod(t, GroupCommand::RemoveBucket);
        let g = i("group_id=5,command_bucket_id=first,bucket=bucket_id:7,output:1").unwrap();
        assert_eq!((g.group_id, g.command_bucket_id), (5, BUCKET_FIRST));
        assert_eq!(g.buckets.len(), 1);
        assert_eq!(
            i("group_id=5,command_bucket_id=last,bucket=output:1")
                .unwrap()
                .command_bucket_id,
            BUCKET_LAST
        );
        assert_eq!(
            i("group_id=5,command_bucket_id=3,bucket=output:1")
                .unwrap()
                .command_bucket_id,
            3
        );
        assert_eq!(r("group_id=5").unwrap().command_bucket_id, BUCKET_ALL);
        assert_eq!(
            r("group_id=5,command_bucket_id=all")
                .unwrap()
                .command_bucket_id,
            BUCKET_ALL
        );
        assert_eq!(
            r("group_id=5,command_bucket_id=9")
                .unwrap()
                .command_bucket_id,
            9
        );
        let msg = |e: ParseError| e.to_string();
        for (t, want) in [
            (
                "group_id=5,bucket=output:1",
                "must specify a command bucket id",
            ),
            (
                "group_id=5,command_bucket_id=all,bucket=output:1",
                "command_bucket_id=all is not permitted",
            ),
            (
                "group_id=5,type=all,command_bucket_id=first",
                "type is not needed",
            ),
            (
                "group_id=5,command_bucket_id=0xffffff01",
                "invalid command bucket id 4294967041",
            ),
        ] {
            let e = msg(i(t).unwrap_err());
            assert!(e.contains(want), "{t}: {e}");
        }
        for (t, want) in [
            ("group_id=5,bucket=output:1", "bucket is not needed"),
            ("group_id=5,type=all", "type is not needed"),
        ] {
            let e = msg(r(t).unwrap_err());
            assert!(e.contains(want), "{t}: {e}");
        }
        let e = msg(parse_group_mod(
            "group_id=5,type=all,command_bucket_id=1,bucket=output:1",
            GroupCommand::Add,
        )
        .unwrap_err());
        assert!(e.contains("command bucket id is not needed"), "{e}");
    }

    #[test]
    fn bucket_ids_as_ofctl_assigns() {
        assert_eq!(assign_bucket_ids(&[None, None]), vec![0, 1]);
        assert_eq!(assign_bucket_ids(&[Some(5), None]), vec![5, 0]);
        assert_eq!(assign_bucket_ids(&[None, Some(0), None]), vec![1, 0, 2]);
        // OVS marks only the ids after the first unnumbered bucket: this one collides (and the
        // switch refuses it with OFPGMFC_BAD_BUCKET).
        assert_eq!(
            assign_bucket_ids(&[Some(2), None, None, Some(1)]),
            vec![2, 0, 2, 1]
        );
    }

    #[test]
    fn garbage_never_panics() {
        for s in [
            "",
            "bucket=",
            "group_id=1,type=all,bucket=",
            "group_id=1,type=all,bucket=bucket=",
            "group_id=1,type=select,fields(",
            "group_id=1,type=select,selection_method=hash,fields(zzz)",
            "group_id=é,type=all",
            "group_id=1,type=all,bucket=actions=(((",
        ] {
            let _ = add(s);
            let _ = parse_group_mod(s, GroupCommand::Delete);
        }
    }
}
