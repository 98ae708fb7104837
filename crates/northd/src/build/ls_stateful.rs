//! Logical switch stateful stages: pre-ACL/LB/stateful, ACL hints, ACLs, QoS, LB affinity,
//! LB, hairpin, ACL-after-LB and stateful, ingress and egress.
//!
//! Three facts about a switch change flows datapath-wide ([`SwitchFacts`], precomputed per
//! switch in [`Ctx::switch_facts`]): whether any ACL applies to it, whether one of them is
//! stateful (`allow-related`), and whether a load balancer with a VIP applies to it. The
//! per-ACL (`acl`) and per-VIP (`lb`) flows live in their own items; the port items add
//! the conntrack bypass for router and localnet ports, DHCP reply bypasses, interconnect
//! IGMP punts and (with `install_ls_lb_from_router`) the peer router's LB VIPs.
//!
//! An ACL's flows depend only on the ACL and whether the switch is stateful, and an LB's
//! switch flows only on the LB, so both are computed once per NB row in [`Ctx::new`]
//! ([`Ctx::switch_acl_flows`], [`Ctx::switch_lb_flows`]) and the per-switch items clone them.
//!
//! Not yet: template LB VIPs (`^VAR`), and the `Service_Monitor` status of health-checked
//! backends (from the SB; every monitored backend is taken as online).

mod acl;
mod lb;

use super::Ctx;
use crate::addr::Mac;
use crate::lflow::{DpId, Lflow, Sink};
use crate::nb::{Acl, LoadBalancer, Lrp, Nb};
use crate::stage::Stage;
use ovsdb::Uuid;

pub use lb::{LspByName, Vip, parse_backends, parse_vip};

/// What a switch's ACLs and load balancers imply for its datapath-wide flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchFacts {
    /// Some ACL applies (own or a port group's).
    pub has_acls: bool,
    /// Some applied ACL is `allow-related`.
    pub has_stateful_acl: bool,
    /// Some applied load balancer has a VIP.
    pub has_lb_vip: bool,
}

impl SwitchFacts {
    /// Computes the facts from the switch's applied ACLs and load balancers (UUIDs into
    /// `nb.acls` / `nb.lbs`; unknown UUIDs are ignored).
    pub fn compute(nb: &Nb, acls: &[Uuid], lbs: &[Uuid]) -> SwitchFacts {
        let mut f = SwitchFacts::default();
        for a in acls.iter().filter_map(|u| nb.acls.get(u)) {
            f.has_acls = true;
            if a.action == "allow-related" {
                f.has_stateful_acl = true;
                break;
            }
        }
        f.has_lb_vip = lbs
            .iter()
            .filter_map(|u| nb.lbs.get(u))
            .any(|lb| lb.vips.iter().any(|(k, _)| parse_vip(k).is_some()));
        f
    }

    /// Stateful ACLs or load balancers: connections are tracked and committed.
    pub fn stateful(self) -> bool {
        self.has_stateful_acl || self.has_lb_vip
    }
}

/// `NB_Global options:install_ls_lb_from_router`: a router's load balancers also get their
/// switch flows on the switches attached to it.
pub fn install_lbs_from_routers(nb: &Nb) -> bool {
    nb.global_options
        .get("install_ls_lb_from_router")
        .is_some_and(|v| v == "true")
}

/// `NB_Global options:default_acl_drop`.
fn default_acl_drop(ctx: &Ctx) -> bool {
    ctx.nb
        .global_options
        .get("default_acl_drop")
        .is_some_and(|v| v == "true")
}

/// A switch's own flows in these stages.
pub fn switch_dp(ctx: &Ctx, sw: usize, out: &mut Sink<'_>) {
    use Stage::*;
    let f = ctx.switch_facts[sw];

    // Pre-ACL.
    out.add(LsInPreAcl, 0, "1", "next;");
    out.add(LsOutPreAcl, 0, "1", "next;");
    out.add(LsInPreAcl, 110, "eth.dst == $svc_monitor_mac", "next;");
    out.add(LsOutPreAcl, 110, "eth.src == $svc_monitor_mac", "next;");
    if f.has_stateful_acl {
        for st in [LsInPreAcl, LsOutPreAcl] {
            out.add(
                st,
                110,
                "nd || nd_rs || nd_ra || mldv1 || mldv2 || (udp && udp.src == 546 && udp.dst == 547)",
                "next;",
            );
            out.add(st, 110, "eth.mcast", "next;");
            out.add(st, 100, "ip", "reg0[0] = 1; next;");
        }
    }

    // Pre-LB.
    out.add(LsInPreLb, 0, "1", "next;");
    out.add(LsOutPreLb, 0, "1", "next;");
    out.add(LsInPreLb, 110, "eth.dst == $svc_monitor_mac", "next;");
    out.add(LsOutPreLb, 110, "eth.src == $svc_monitor_mac", "next;");
    for st in [LsInPreLb, LsOutPreLb] {
        out.add(st, 110, "eth.mcast", "next;");
        out.add(st, 110, "nd || nd_rs || nd_ra || mldv1 || mldv2", "next;");
        out.add(st, 110, "reg0[16] == 1", "next;");
        if f.has_lb_vip {
            out.add(st, 100, "ip", "reg0[2] = 1; next;");
        }
    }
    // (The priority-120 IGMP/MLD punt of interconnect switches is the remote ports'.)

    // Pre-stateful.
    for st in [LsInPreStateful, LsOutPreStateful] {
        out.add(st, 0, "1", "next;");
        out.add(st, 110, "reg0[2] == 1", "ct_lb_mark;");
        out.add(st, 100, "reg0[0] == 1", "ct_next;");
    }

    acl::switch_dp(ctx, sw, f, out);

    // QoS.
    for st in [LsInQosMark, LsInQosMeter, LsOutQosMark, LsOutQosMeter] {
        out.add(st, 0, "1", "next;");
    }
    let qos_rules = ctx.switch(sw).row.uuids("qos_rules");
    for q in qos_rules.filter_map(|u| ctx.nb.qos.get(&u)) {
        let ingress = match q.direction.as_str() {
            "from-lport" => true,
            "to-lport" => false,
            _ => continue,
        };
        let Ok(prio) = u16::try_from(q.priority) else {
            continue;
        };
        if let Some(d) = q.dscp {
            let st = if ingress { LsInQosMark } else { LsOutQosMark };
            out.add(st, prio, q.match_.as_str(), format!("ip.dscp = {d}; next;"));
        }
        if let Some(rate) = q.rate {
            let st = if ingress { LsInQosMeter } else { LsOutQosMeter };
            let a = match q.burst {
                Some(b) => format!("set_meter({rate}, {b}); next;"),
                None => format!("set_meter({rate}); next;"),
            };
            out.add(st, prio, q.match_.as_str(), a);
        }
    }

    // LB affinity, LB, hairpin.
    for st in [
        LsInLbAffCheck,
        LsInLb,
        LsInLbAffLearn,
        LsInPreHairpin,
        LsInNatHairpin,
        LsInHairpin,
    ] {
        out.add(st, 0, "1", "next;");
    }
    if f.has_lb_vip {
        out.add(
            LsInPreHairpin,
            100,
            "ip && ct.trk",
            "reg0[6] = chk_lb_hairpin(); reg0[12] = chk_lb_hairpin_reply(); next;",
        );
        out.add(
            LsInNatHairpin,
            100,
            "ip && ct.new && ct.trk && reg0[6] == 1",
            "ct_snat_to_vip; next;",
        );
        out.add(
            LsInNatHairpin,
            100,
            "ip && ct.est && ct.trk && reg0[6] == 1",
            "ct_snat;",
        );
        out.add(LsInNatHairpin, 90, "ip && reg0[12] == 1", "ct_snat;");
        out.add(
            LsInHairpin,
            1,
            "(reg0[6] == 1 || reg0[12] == 1)",
            "eth.dst <-> eth.src; outport = inport; flags.loopback = 1; output;",
        );
    }

    // Traffic from VTEP ports stays on the chassis of each distributed gateway port.
    let sw_row = ctx.switch(sw);
    if sw_row.ports.iter().any(|p| p.kind == "vtep") {
        for (j, _) in sw_row.ports.iter().enumerate() {
            let Some((r, rp)) = ctx.lsp_router_peer[sw][j] else {
                continue;
            };
            let lrp = ctx.lrp(r, rp);
            if is_dgp(lrp) {
                out.add(
                    LsInHairpin,
                    2000,
                    format!(
                        "reg0[14] == 1 && is_chassis_resident({})",
                        quoted(&format!("cr-{}", lrp.name))
                    ),
                    "next;",
                );
            }
        }
    }

    // Stateful.
    for st in [LsInStateful, LsOutStateful] {
        out.add(st, 0, "1", "next;");
        out.add(
            st,
            100,
            "reg0[1] == 1 && reg0[13] == 0",
            "ct_commit { ct_mark.blocked = 0; }; next;",
        );
        out.add(
            st,
            100,
            "reg0[1] == 1 && reg0[13] == 1",
            "ct_commit { ct_mark.blocked = 0; ct_label.label = reg3; }; next;",
        );
    }
}

/// A distributed gateway port: a router port bound to gateway chassis.
fn is_dgp(lrp: &Lrp) -> bool {
    !lrp.gateway_chassis.is_empty()
        || lrp.ha_chassis_group.is_some()
        || lrp.options.contains_key("redirect-chassis")
}

/// `"name"` as ovn-northd quotes a port name in a match.
pub(crate) fn quoted(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('"');
    for c in name.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// One switch port's flows in these stages: router ports (with an existing peer) and
/// localnet ports skip conntrack in pre-LB, and in pre-ACL when the switch has stateful ACLs.
pub fn switch_port(ctx: &Ctx, sw: usize, port: usize, out: &mut Sink<'_>) {
    let p = ctx.lsp(sw, port);
    if p.kind == "remote" {
        // Interconnect switch with multicast snooping: IGMP/MLD from remote ports go to
        // ovn-controller (ovn-northd puts these in the egress pre-LB table).
        let oc = &ctx.switch(sw).other_config;
        if oc.get("interconn-ts").is_some_and(|v| !v.is_empty())
            && oc.get("mcast_snoop").is_some_and(|v| v == "true")
        {
            let q = quoted(&p.name);
            for proto in ["igmp", "(mldv1 || mldv2)"] {
                out.add(
                    Stage::LsOutPreLb,
                    120,
                    format!("inport == {q} && {proto}"),
                    "clone { igmp; }; next;",
                );
            }
        }
    }
    if p.kind == "vtep" {
        // Traffic from VTEP (ramp) ports skips the hairpin stages (one flow per switch;
        // every vtep port yields it).
        out.add(
            Stage::LsInHairpin,
            1000,
            "reg0[14] == 1",
            format!(
                "next(pipeline=ingress, table={});",
                Stage::LsInL2Lkup.table()
            ),
        );
    }
    dhcp_reply_bypass(ctx, sw, port, out);
    if p.kind == "router"
        && let Some((r, _)) = ctx.lsp_router_peer[sw][port]
        && install_lbs_from_routers(&ctx.nb)
    {
        // The peer router's load balancers, on this switch too (only their per-VIP flows:
        // they do not make the switch stateful).
        for lb in ctx.router_lbs[r].iter().filter_map(|u| ctx.nb.lbs.get(u)) {
            switch_lb(ctx, sw, lb, out);
        }
    }
    let skip = match p.kind.as_str() {
        "router" => ctx.lsp_router_peer[sw][port].is_some(),
        "localnet" => true,
        _ => false,
    };
    if !skip {
        return;
    }
    let f = ctx.switch_facts[sw];
    let q = quoted(&p.name);
    let in_match = format!("ip && inport == {q}");
    let out_match = format!("ip && outport == {q}");
    let out_action = if f.has_stateful_acl {
        "next;"
    } else {
        "ct_clear; next;"
    };
    out.add(Stage::LsInPreLb, 110, in_match.clone(), "next;");
    out.add(Stage::LsOutPreLb, 110, out_match.clone(), out_action);
    if f.has_stateful_acl {
        out.add(Stage::LsInPreAcl, 110, in_match, "next;");
        out.add(Stage::LsOutPreAcl, 110, out_match, out_action);
    }
}

/// The egress ACL bypass (priority 34000) for DHCP replies from ovn-controller to a port
/// with usable DHCP options (v4: `server_id`, `server_mac`, `lease_time`; v6: `server_id`,
/// a MAC). ovn-northd neither checks the port's addresses against the `cidr` nor
/// normalises the MACs here.
fn dhcp_reply_bypass(ctx: &Ctx, sw: usize, port: usize, out: &mut Sink<'_>) {
    let p = ctx.lsp(sw, port);
    if p.kind == "external" {
        return;
    }
    let action = if ctx.switch_facts[sw].stateful() {
        "ct_commit; next;"
    } else {
        "next;"
    };
    let q = quoted(&p.name);
    let opts = |col: &str| {
        p.row
            .uuids(col)
            .next()
            .and_then(|u| ctx.nb.dhcp_options.get(&u))
            .map(|d| &d.options)
    };
    if let Some(o) = opts("dhcpv4_options")
        && let (Some(id), Some(mac), Some(_)) =
            (o.get("server_id"), o.get("server_mac"), o.get("lease_time"))
    {
        out.add(
            Stage::LsOutAcl,
            34000,
            format!(
                "outport == {q} && eth.src == {mac} && ip4.src == {id} && udp && udp.src == 67 && udp.dst == 68"
            ),
            action,
        );
    }
    if let Some(o) = opts("dhcpv6_options")
        && let Some(id) = o.get("server_id")
        && let Some(mac) = Mac::parse(id)
    {
        out.add(
            Stage::LsOutAcl,
            34000,
            format!(
                "outport == {q} && eth.src == {id} && ip6.src == {} && udp && udp.src == 547 && udp.dst == 546",
                mac.ipv6_lla()
            ),
            action,
        );
    }
}

/// One ACL's flows on a switch: they depend only on whether the switch is stateful, so
/// they are cloned from [`Ctx::switch_acl_flows`] (computed there once per ACL and variant
/// by [`acl_flows`]).
pub fn switch_acl(ctx: &Ctx, sw: usize, acl: &Acl, out: &mut Sink<'_>) {
    let stateful = ctx.switch_facts[sw].stateful();
    match ctx.switch_acl_flows.get(&acl.uuid) {
        Some(variants) => {
            for f in &variants[usize::from(stateful)] {
                out.add(f.stage, f.priority, f.match_.clone(), f.actions.clone());
            }
        }
        None => acl::switch_acl(&ctx.nb, stateful, acl, out),
    }
}

/// An ACL's flows on a switch that is not stateful (`[0]`) and on one that is (`[1]`), with
/// a placeholder datapath (for [`Ctx::switch_acl_flows`]).
pub fn acl_flows(nb: &Nb, acl: &Acl) -> [Vec<Lflow>; 2] {
    [false, true].map(|stateful| {
        let mut v = Vec::new();
        acl::switch_acl(nb, stateful, acl, &mut Sink::new(DpId(0), &mut v));
        v
    })
}

/// One load balancer's flows on a switch: the same on every switch, so cloned from
/// [`Ctx::switch_lb_flows`] (computed there once per load balancer by [`lb_flows`]).
pub fn switch_lb(ctx: &Ctx, _sw: usize, lb: &LoadBalancer, out: &mut Sink<'_>) {
    // Built once per class of switches applying the LB (`Item::SwitchLb`): the flows do
    // not depend on the switch.
    lb::switch_lb(&ctx.nb, &ctx.lsp_by_name, lb, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nb::Acl;

    fn acl(direction: &str, action: &str, label: i64, log: bool) -> Acl {
        Acl {
            uuid: Uuid::default(),
            name: log.then(|| "n1".to_owned()),
            priority: 150,
            direction: direction.to_owned(),
            match_: "tcp".to_owned(),
            action: action.to_owned(),
            log,
            severity: None,
            meter: None,
            label,
            options: Default::default(),
            row: Default::default(),
        }
    }

    fn texts(v: &[Lflow]) -> Vec<(Stage, u16, &str, &str)> {
        let mut t: Vec<_> = v
            .iter()
            .map(|f| (f.stage, f.priority, f.match_.as_str(), f.actions.as_str()))
            .collect();
        t.sort();
        t
    }

    #[test]
    fn stateful_reject_quirks() {
        // ovn-northd parenthesises the hint, not the ACL match, and leaves a double space.
        let [_, st] = acl_flows(&Nb::default(), &acl("from-lport", "reject", 0, true));
        let t = texts(&st);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].2, "(reg0[10] == 1) && tcp");
        assert_eq!(
            t[0].3,
            "log(name=\"n1\", severity=info, verdict=reject); ct_commit { ct_mark.blocked = 1; };  \
             reg0 = 0; reject { /* eth.dst <-> eth.src; ip.dst <-> ip.src; is implicit. */ \
             outport <-> inport; next(pipeline=egress,table=5); };"
        );
        assert_eq!(t[1].2, "(reg0[9] == 1) && tcp");
    }

    #[test]
    fn labelled_allow() {
        let [plain, st] = acl_flows(&Nb::default(), &acl("to-lport", "allow", 77, false));
        assert_eq!(texts(&plain), vec![(Stage::LsOutAcl, 1150, "tcp", "next;")]);
        let t = texts(&st);
        assert_eq!(t[0].2, "reg0[7] == 1 && (tcp)");
        assert_eq!(t[0].3, "reg0[1] = 1; reg0[13] = 1; reg3 = 77; next;");
        assert_eq!(t[1].2, "reg0[8] == 1 && (tcp)");
        assert_eq!(t[1].3, "reg0[1] = 1; reg0[13] = 1; reg3 = 77; next;");
    }

    #[test]
    fn vips_and_backends() {
        let v = parse_vip("[fd00::12]:80").unwrap();
        assert_eq!(v.endpoint(), "[fd00::12]:80");
        assert_eq!(v.ip_str(), "fd00::12");
        assert_eq!(parse_vip("fd00::11").unwrap().port, None);
        assert_eq!(parse_vip("10.0.0.1:80").unwrap().endpoint(), "10.0.0.1:80");
        assert!(parse_vip("10.0.0.1:0").is_none());
        // A space after the comma makes the whole VIP invalid, as in ovn-northd.
        assert!(parse_backends("10.0.0.3:80, 10.0.0.4:80").is_none());
        assert_eq!(parse_backends("").unwrap(), vec![]);
    }
}
