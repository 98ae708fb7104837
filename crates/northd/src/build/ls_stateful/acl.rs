//! ACL stages: hints, the ACL tables before and after LB (ingress) and the egress ACL
//! table; datapath defaults and each ACL's own flows.

use super::{SwitchFacts, default_acl_drop};
use crate::build::Ctx;
use crate::lflow::Sink;
use crate::nb::{Acl, Nb};
use crate::stage::{Pipeline, Stage};
use std::collections::BTreeSet;

/// ACL priorities are offset by this much in the logical tables.
const ACL_PRI_OFFSET: i64 = 1000;

/// Replies of committed, not blocked connections.
const ESTABLISHED_REPLY: &str =
    "ct.est && !ct.rel && !ct.new && !ct.inv && ct.rpl && ct_mark.blocked == 0";
/// Traffic related to committed, not blocked connections.
const RELATED: &str = "!ct.est && ct.rel && !ct.new && !ct.inv && ct_mark.blocked == 0";

/// The datapath-wide flows of the ACL hint and ACL stages.
pub(super) fn switch_dp(ctx: &Ctx, sw: usize, f: SwitchFacts, out: &mut Sink<'_>) {
    use Stage::*;
    let any = f.has_acls || f.has_lb_vip;
    let drop = default_acl_drop(ctx);

    for st in [LsInAclHint, LsOutAclHint] {
        if any {
            out.add(st, 0, "1", "next;");
        } else {
            out.add(st, u16::MAX, "1", "next;");
        }
        if !f.stateful() {
            continue;
        }
        out.add(
            st,
            7,
            "ct.new && !ct.est",
            "reg0[7] = 1; reg0[9] = 1; next;",
        );
        out.add(
            st,
            6,
            "!ct.new && ct.est && !ct.rpl && ct_mark.blocked == 1",
            "reg0[7] = 1; reg0[9] = 1; next;",
        );
        out.add(st, 5, "!ct.trk", "reg0[8] = 1; reg0[9] = 1; next;");
        out.add(
            st,
            4,
            "!ct.new && ct.est && !ct.rpl && ct_mark.blocked == 0",
            "reg0[8] = 1; reg0[10] = 1; next;",
        );
        out.add(st, 3, "!ct.est", "reg0[9] = 1; next;");
        out.add(
            st,
            2,
            "ct.est && ct_mark.blocked == 1",
            "reg0[9] = 1; next;",
        );
        out.add(
            st,
            1,
            "ct.est && ct_mark.blocked == 0",
            "reg0[10] = 1; next;",
        );
    }

    for st in [LsInAcl, LsOutAcl] {
        if any {
            out.add(st, 0, "1", if drop { "drop;" } else { "next;" });
        } else {
            out.add(st, u16::MAX, "1", "next;");
        }
        out.add(st, 65532, "nd || nd_ra || nd_rs || mldv1 || mldv2", "next;");
    }
    let default_action = if any && drop { "drop;" } else { "next;" };
    out.add(LsInAclAfterLb, 0, "1", default_action);
    out.add(
        LsInAclAfterLb,
        65532,
        "nd || nd_ra || nd_rs || mldv1 || mldv2",
        "next;",
    );

    if f.stateful() {
        for (st, ingress) in [(LsInAcl, true), (LsOutAcl, false)] {
            out.add(
                st,
                1,
                "ip && !ct.est",
                if drop { "drop;" } else { "reg0[1] = 1; next;" },
            );
            out.add(
                st,
                1,
                "ip && ct.est && ct_mark.blocked == 1",
                "reg0[1] = 1; next;",
            );
            out.add(
                st,
                65532,
                "ct.inv || (ct.est && ct.rpl && ct_mark.blocked == 1)",
                "drop;",
            );
            out.add(
                st,
                65532,
                ESTABLISHED_REPLY,
                if ingress {
                    "reg0[9] = 0; reg0[10] = 0; reg0[17] = 1; next;"
                } else {
                    "next;"
                },
            );
            out.add(
                st,
                65532,
                RELATED,
                if ingress {
                    "reg0[17] = 1; ct_commit_nat;"
                } else {
                    "ct_commit_nat;"
                },
            );
        }
        out.add(LsInAclAfterLb, 65532, "reg0[17] == 1", "next;");
    }
    if any {
        out.add(LsInAcl, 34000, "eth.dst == $svc_monitor_mac", "next;");
        out.add(LsOutAcl, 34000, "eth.src == $svc_monitor_mac", "next;");
    }
    let commit = if f.stateful() {
        "ct_commit; next;"
    } else {
        "next;"
    };
    if ctx.switch(sw).row.uuids("dns_records").next().is_some() {
        out.add(LsOutAcl, 34000, "udp.src == 53", commit);
    }
    // The DHCP reply bypasses are the ports' (see `dhcp_reply_bypass`).
}

/// `log(...); ` for an ACL with `log` set, else empty.
fn log_action(acl: &Acl, fair_meters: &BTreeSet<String>) -> String {
    if !acl.log {
        return String::new();
    }
    let mut s = String::from("log(");
    if let Some(n) = &acl.name {
        s.push_str(&format!("name=\"{n}\", "));
    }
    s.push_str(&format!(
        "severity={}, ",
        acl.severity.as_deref().unwrap_or("info")
    ));
    let verdict = match acl.action.as_str() {
        "drop" => "drop",
        "reject" => "reject",
        _ => "allow",
    };
    s.push_str(&format!("verdict={verdict}, "));
    if let Some(m) = &acl.meter {
        if fair_meters.contains(m) {
            s.push_str(&format!("meter=\"{m}__{}\", ", acl.uuid));
        } else {
            s.push_str(&format!("meter=\"{m}\", "));
        }
    }
    s.truncate(s.len() - 2);
    s.push_str("); ");
    s
}

/// The reject action for an ACL in `stage`.
fn reject_action(stage: Stage) -> String {
    let next = if stage.pipeline() == Pipeline::Ingress {
        format!(
            "next(pipeline=egress,table={});",
            Stage::LsOutQosMark.table()
        )
    } else {
        format!(
            "next(pipeline=ingress,table={});",
            Stage::LsInL2Lkup.table()
        )
    };
    format!(
        "reg0 = 0; reject {{ /* eth.dst <-> eth.src; ip.dst <-> ip.src; is implicit. */ outport <-> inport; {next} }};"
    )
}

/// One ACL's flows on a switch; `stateful` is [`SwitchFacts::stateful`] of the switch.
pub(super) fn switch_acl(nb: &Nb, stateful: bool, acl: &Acl, out: &mut Sink<'_>) {
    let stage = match acl.direction.as_str() {
        "from-lport" => {
            if acl
                .options
                .get("apply-after-lb")
                .is_some_and(|v| v == "true")
            {
                Stage::LsInAclAfterLb
            } else {
                Stage::LsInAcl
            }
        }
        "to-lport" => Stage::LsOutAcl,
        _ => return,
    };
    let Ok(prio) = u16::try_from(acl.priority + ACL_PRI_OFFSET) else {
        return;
    };
    let m = acl.match_.as_str();
    let log = log_action(acl, &nb.fair_meters);
    let label = (acl.label != 0).then_some(acl.label);

    // Logging of replies and related traffic for a labelled ACL: in the other direction.
    if stateful
        && acl.log
        && label.is_some()
        && acl.options.get("log-related").is_some_and(|v| v == "true")
    {
        let other = if acl.direction == "from-lport" {
            Stage::LsOutAcl
        } else {
            Stage::LsInAcl
        };
        let l = acl.label;
        for m in [ESTABLISHED_REPLY, RELATED] {
            out.add(
                other,
                65533,
                format!("{m} && ct_label.label == {l}"),
                format!("{log}next;"),
            );
        }
    }

    if acl.action == "allow-stateless" && stateful {
        let pre = if acl.direction == "from-lport" {
            Stage::LsInPreAcl
        } else {
            Stage::LsOutPreAcl
        };
        out.add(pre, prio, m, "reg0[16] = 1; next;");
    }

    match acl.action.as_str() {
        "allow" | "allow-related" if stateful => {
            let lbl = label
                .map(|l| format!("reg0[13] = 1; reg3 = {l}; "))
                .unwrap_or_default();
            out.add(
                stage,
                prio,
                format!("reg0[7] == 1 && ({m})"),
                format!("reg0[1] = 1; {lbl}{log}next;"),
            );
            let commit = if label.is_some() { "reg0[1] = 1; " } else { "" };
            out.add(
                stage,
                prio,
                format!("reg0[8] == 1 && ({m})"),
                format!("{commit}{lbl}{log}next;"),
            );
        }
        "allow" | "allow-related" | "allow-stateless" => {
            out.add(stage, prio, m, format!("{log}next;"));
        }
        "reject" => {
            let verdict = reject_action(stage);
            if stateful {
                // ovn-northd writes these hint matches and actions its own way.
                out.add(
                    stage,
                    prio,
                    format!("(reg0[9] == 1) && {m}"),
                    format!("{log}{verdict}"),
                );
                out.add(
                    stage,
                    prio,
                    format!("(reg0[10] == 1) && {m}"),
                    format!("{log}ct_commit {{ ct_mark.blocked = 1; }};  {verdict}"),
                );
            } else {
                out.add(stage, prio, m, format!("{log}{verdict}"));
            }
        }
        "drop" => {
            if stateful {
                out.add(
                    stage,
                    prio,
                    format!("reg0[9] == 1 && ({m})"),
                    format!("{log}/* drop */"),
                );
                out.add(
                    stage,
                    prio,
                    format!("reg0[10] == 1 && ({m})"),
                    format!("ct_commit {{ ct_mark.blocked = 1; }}; {log}/* drop */"),
                );
            } else {
                out.add(stage, prio, m, format!("{log}/* drop */"));
            }
        }
        _ => {}
    }
}
