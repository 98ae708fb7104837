//! Logical switch L2 stages: port security, FDB, ARP/ND responder, DHCP, DNS, external
//! ports, L2 lookup and unknown; egress port security.
//!
//! Where the flows come from:
//!
//! * [`switch_dp`]: every stage's defaults, the admission drops, DNS (when one of the
//!   switch's `dns_records` rows has records), forwarding groups, the L2 lookup's
//!   service-monitor, multicast (`mcast_snoop`), broadcast and FDB fallbacks, and the
//!   `outport == "none"` rule of `ls_in_l2_unknown`.
//! * [`switch_port`]: a port's own rules — disabled/VTEP/queue admission, FDB learning, its
//!   ARP/ND replies (or the localnet skip, or virtual-port binding), DHCP, external-port
//!   drops, its MACs in L2 lookup and, for a port attached to a router, the router's
//!   ARP/ND forwarding (priorities 80 and 75).
//! * [`switch_lb`]: nothing — in 23.03 a switch's own load balancers add no flows to these
//!   stages. Load balancers do show up elsewhere: a router's VIPs reachable from a switch
//!   are in the attached port's item (from [`Ctx::router_lb_ips`]), and health-check
//!   source IPs are answered in the backend port's item (from [`Ctx::svc_mon_src_ips`]),
//!   on the backend's switch whichever datapath the load balancer is applied to.
//!
//! Port security itself (`port_security` column) yields no flows here in 23.03: it is
//! checked by the `check_in_port_sec()` / `check_out_port_sec()` actions.
//!
//! Checked against ovn-northd 23.03 on the gen_ovnk oracles and on private variants
//! (scripts in /work/lsl2-exp): disabled, VTEP, queued, virtual, external, localport,
//! l2gateway and `unknown` ports; `ignore_lsp_down=false`; `dynamic` addresses;
//! `vlan-passthru`; multicast relay/static/flood-unregistered; NAT and LB VIPs (v4/v6) on
//! router ports; distributed gateway ports and `reside-on-redirect-chassis`; `arp_proxy`;
//! DHCPv4/v6; DNS; health checks; forwarding groups. (Load balancers'
//! `options:neighbor_responder` was checked to make no difference to these stages.)
//!
//! Not yet: IGMP groups learnt in the SB (priority 90); the order of a multi-MAC set in the priority-75 flow (ovn-northd
//! prints a hash-set order; we print the router port's MAC then NAT MACs in NAT order).

use super::Ctx;
use crate::addr::{Ipv4Net, Ipv6Net, LportAddresses, parse_lsp_addresses};
use crate::lflow::Sink;
use crate::nb::{LoadBalancer, Lsp};
use crate::stage::Stage;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod dhcp;

/// The register bit `check_*_port_sec()` sets.
const PORT_SEC_DROP: &str = "reg0[15]";

/// A name as a quoted OVN string literal.
pub(crate) fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// The solicited-node multicast address of `a` (ff02::1:ffXX:XXXX).
fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15],
    ])
}

/// `nd_ns && ip6.dst == {A, SOL} && nd.target == A`.
fn nd_ns_match(a: Ipv6Addr) -> String {
    format!(
        "nd_ns && ip6.dst == {{{a}, {}}} && nd.target == {a}",
        solicited_node(a)
    )
}

/// A router port's addresses with its EUI-64 link-local address added, as OVN lists a
/// router port's IPv6 addresses.
fn with_lla(n: &LportAddresses) -> LportAddresses {
    let mut n = n.clone();
    if let Some(mac) = n.mac {
        n.ipv6.push(Ipv6Net {
            addr: mac.ipv6_lla(),
            plen: 64,
        });
    }
    n
}

/// The addresses a switch port answers for: its `addresses` entries (`router` resolved to
/// the peer router port's MAC, networks and link-local address; `dynamic` to
/// `dynamic_addresses`), malformed entries and `unknown` skipped.
fn port_addrs(ctx: &Ctx, sw: usize, port: usize) -> Vec<LportAddresses> {
    let p = ctx.lsp(sw, port);
    let mut v = Vec::new();
    for a in &p.addresses {
        let a = a.trim();
        if a == "router" {
            if let Some((ri, rj)) = ctx.lsp_router_peer[sw][port]
                && let Some(n) = &ctx.lrp_networks[ri][rj]
            {
                v.push(with_lla(n));
            }
        } else if a == "unknown" {
        } else if a == "dynamic" || a.ends_with(" dynamic") {
            if let Some(d) = p.row.get("dynamic_addresses").as_str()
                && let Some(la) = parse_lsp_addresses(d)
            {
                v.push(la);
            }
        } else if let Some(la) = parse_lsp_addresses(a) {
            v.push(la);
        }
    }
    v
}

fn has_unknown(p: &Lsp) -> bool {
    p.addresses.iter().any(|a| a.trim() == "unknown")
}

/// A switch's own flows in these stages.
pub fn switch_dp(ctx: &Ctx, sw: usize, out: &mut Sink<'_>) {
    let s = ctx.switch(sw);
    let cfg = |k: &str| s.other_config.get(k).map(String::as_str);

    out.add(Stage::LsInCheckPortSec, 100, "eth.src[40]", "drop;");
    if cfg("vlan-passthru") != Some("true") {
        out.add(Stage::LsInCheckPortSec, 100, "vlan.present", "drop;");
    }
    out.add(
        Stage::LsInCheckPortSec,
        50,
        "1",
        format!("{PORT_SEC_DROP} = check_in_port_sec(); next;"),
    );
    out.add(
        Stage::LsInApplyPortSec,
        50,
        format!("{PORT_SEC_DROP} == 1"),
        "drop;",
    );
    out.add(Stage::LsInApplyPortSec, 0, "1", "next;");
    for st in [
        Stage::LsInLookupFdb,
        Stage::LsInPutFdb,
        Stage::LsInArpRsp,
        Stage::LsInDhcpOptions,
        Stage::LsInDhcpResponse,
        Stage::LsInDnsLookup,
        Stage::LsInDnsResponse,
        Stage::LsInExternalPort,
    ] {
        out.add(st, 0, "1", "next;");
    }

    let has_dns = s
        .row
        .uuids("dns_records")
        .any(|u| ctx.nb.dns_records.get(&u).is_some_and(|r| !r.is_empty()));
    if has_dns {
        out.add(
            Stage::LsInDnsLookup,
            100,
            "udp.dst == 53",
            "reg0[4] = dns_lookup(); next;",
        );
        for ip in ["ip4", "ip6"] {
            out.add(
                Stage::LsInDnsResponse,
                100,
                "udp.dst == 53 && reg0[4]",
                format!(
                    "eth.dst <-> eth.src; {ip}.src <-> {ip}.dst; udp.dst = udp.src; \
                     udp.src = 53; outport = inport; flags.loopback = 1; output;"
                ),
            );
        }
    }

    forwarding_group(ctx, sw, out);
    out.add(
        Stage::LsInL2Lkup,
        110,
        "eth.dst == $svc_monitor_mac && (tcp || icmp || icmp6)",
        "handle_svc_check(inport);",
    );
    if cfg("mcast_snoop") == Some("true") {
        mcast_flows(ctx, sw, out);
    }
    out.add(
        Stage::LsInL2Lkup,
        70,
        "eth.mcast",
        "outport = \"_MC_flood\"; output;",
    );
    out.add(
        Stage::LsInL2Lkup,
        0,
        "1",
        "outport = get_fdb(eth.dst); next;",
    );

    let unknown = s.ports.iter().any(has_unknown);
    out.add(
        Stage::LsInL2Unknown,
        50,
        "outport == \"none\"",
        if unknown {
            "outport = \"_MC_unknown\"; output;"
        } else {
            "drop;"
        },
    );
    out.add(Stage::LsInL2Unknown, 0, "1", "output;");

    out.add(
        Stage::LsOutCheckPortSec,
        100,
        "eth.mcast",
        format!("{PORT_SEC_DROP} = 0; next;"),
    );
    out.add(
        Stage::LsOutCheckPortSec,
        0,
        "1",
        format!("{PORT_SEC_DROP} = check_out_port_sec(); next;"),
    );
    out.add(
        Stage::LsOutApplyPortSec,
        50,
        format!("{PORT_SEC_DROP} == 1"),
        "drop;",
    );
    out.add(Stage::LsOutApplyPortSec, 0, "1", "output;");
}

/// A switch's forwarding group: ARP replies for its VIP with its virtual MAC, and the MAC
/// forwarded to `fwd_group()` over its child ports.
///
/// ovn-northd 23.03 was seen to give flows to the first group (in UUID order) only, and
/// to spin forever on some switches with several groups; we follow the former.
fn forwarding_group(ctx: &Ctx, sw: usize, out: &mut Sink<'_>) {
    let s = ctx.switch(sw);
    let Some(fg) = s
        .row
        .uuids("forwarding_groups")
        .filter_map(|u| ctx.nb.forwarding_groups.get(&u))
        .min_by_key(|fg| fg.uuid)
    else {
        return;
    };
    let (Ok(vip), Some(vmac)) = (
        fg.vip.trim().parse::<Ipv4Addr>(),
        crate::addr::Mac::parse(fg.vmac.trim()),
    ) else {
        return;
    };
    out.add(
        Stage::LsInArpRsp,
        50,
        format!("arp.tpa == {vip} && arp.op == 1"),
        arp_reply(&vmac.to_string(), vip),
    );
    let children: Vec<String> = fg.child_port.iter().map(|c| quoted(c)).collect();
    let live = if fg.liveness {
        "liveness=\"true\","
    } else {
        ""
    };
    out.add(
        Stage::LsInL2Lkup,
        50,
        format!("eth.dst == {vmac}"),
        format!("fwd_group({live}childports={});", children.join(",")),
    );
}

/// The ARP reply answering for `a` with `e`.
fn arp_reply(e: &str, a: impl std::fmt::Display) -> String {
    format!(
        "eth.dst = eth.src; eth.src = {e}; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; \
         arp.sha = {e}; arp.tpa = arp.spa; arp.spa = {a}; outport = inport; \
         flags.loopback = 1; output;"
    )
}

/// The IGMP/MLD snooping flows of a switch with `other_config:mcast_snoop=true`.
fn mcast_flows(ctx: &Ctx, sw: usize, out: &mut Sink<'_>) {
    let s = ctx.switch(sw);
    out.add(Stage::LsInL2Lkup, 100, "igmp", "igmp;");
    out.add(Stage::LsInL2Lkup, 100, "mldv1 || mldv2", "igmp;");
    out.add(
        Stage::LsInL2Lkup,
        85,
        "ip4.mcast && ip4.dst == 224.0.0.0/24",
        "outport = \"_MC_flood_l2\"; output;",
    );
    out.add(
        Stage::LsInL2Lkup,
        85,
        "ip6.mcast_flood",
        "outport = \"_MC_flood\"; output;",
    );
    if s.other_config
        .get("mcast_flood_unregistered")
        .map(String::as_str)
        == Some("true")
    {
        return;
    }
    // Unregistered IP multicast: to routers relaying multicast, to ports flooding it, or
    // dropped.
    let relay = ctx.switch_router_ports[sw].iter().any(|&j| {
        ctx.lsp_router_peer[sw][j].is_some_and(|(ri, _)| {
            ctx.router(ri)
                .options
                .get("mcast_relay")
                .map(String::as_str)
                == Some("true")
        })
    });
    let flood_static = s
        .ports
        .iter()
        .any(|p| p.options.get("mcast_flood").map(String::as_str) == Some("true"));
    out.add(
        Stage::LsInL2Lkup,
        80,
        "ip4.mcast || ip6.mcast",
        mcast_unregistered_action(relay, flood_static),
    );
}

/// The action for unregistered IP multicast (ovn-northd's spacing kept).
fn mcast_unregistered_action(relay: bool, flood_static: bool) -> String {
    let mut actions = String::new();
    if relay {
        actions.push_str("clone { outport = \"_MC_mrouter_flood\"; output; }; ");
    }
    if flood_static {
        actions.push_str("outport =\"_MC_static\"; output;");
    }
    if !relay && !flood_static {
        actions.push_str("drop;");
    }
    actions
}

/// The action sending ARP/NS for a router's address to the router port `q` (quoted), and
/// when the switch has other ports, also to `_MC_flood_l2`.
fn router_forward_action(q: &str, flood: bool) -> String {
    if flood {
        format!("clone {{outport = {q}; output; }}; outport = \"_MC_flood_l2\"; output;")
    } else {
        format!("outport = {q}; output;")
    }
}

/// One switch port's flows in these stages.
pub fn switch_port(ctx: &Ctx, sw: usize, port: usize, out: &mut Sink<'_>) {
    let p = ctx.lsp(sw, port);
    let q = quoted(&p.name);
    let queue = p
        .options
        .get("qdisc_queue_id")
        .and_then(|v| v.parse::<u32>().ok());

    // Admission.
    if !p.is_enabled() {
        out.add(
            Stage::LsInCheckPortSec,
            100,
            format!("inport == {q}"),
            format!("{PORT_SEC_DROP} = 1; next;"),
        );
        out.add(Stage::LsInL2Unknown, 50, format!("outport == {q}"), "drop;");
    } else if p.kind == "vtep" {
        out.add(
            Stage::LsInCheckPortSec,
            70,
            format!("inport == {q}"),
            format!(
                "reg0[14] = 1; next(pipeline=ingress, table={});",
                Stage::LsInHairpin.table()
            ),
        );
    } else if let Some(id) = queue {
        out.add(
            Stage::LsInCheckPortSec,
            70,
            format!("inport == {q}"),
            format!("set_queue({id}); {PORT_SEC_DROP} = check_in_port_sec(); next;"),
        );
    }
    if p.kind == "localnet"
        && let Some(id) = queue
    {
        out.add(
            Stage::LsOutApplyPortSec,
            100,
            format!("outport == {q}"),
            format!("set_queue({id}); output;"),
        );
    }

    // MAC learning for VIFs without port security that accept unknown MACs.
    if p.kind.is_empty() && p.port_security.is_empty() && has_unknown(p) {
        out.add(
            Stage::LsInLookupFdb,
            100,
            format!("inport == {q}"),
            "reg0[11] = lookup_fdb(inport, eth.src); next;",
        );
        out.add(
            Stage::LsInPutFdb,
            100,
            format!("inport == {q} && reg0[11] == 0"),
            "put_fdb(inport, eth.src); next;",
        );
    }

    let addrs = port_addrs(ctx, sw, port);
    arp_nd_responder(ctx, sw, port, &addrs, out);
    svc_monitor_replies(ctx, sw, port, out);
    dhcp::port_flows(ctx, sw, p, &addrs, out);
    if p.kind == "external" {
        external_port(ctx, sw, port, &addrs, out);
    }

    // Destination lookup: the port's own MACs.
    if p.kind != "external" {
        let action = if p.is_enabled() {
            format!("outport = {q}; output;")
        } else {
            "drop;".to_owned()
        };
        let resident = router_mac_residence(ctx, sw, port);
        for la in &addrs {
            if let Some(mac) = la.mac {
                let m = match &resident {
                    Some(r) => format!("eth.dst == {mac} && is_chassis_resident({r})"),
                    None => format!("eth.dst == {mac}"),
                };
                out.add(Stage::LsInL2Lkup, 50, m, action.clone());
            }
        }
        if resident.is_some() {
            dgp_nat_macs(ctx, sw, port, &action, out);
        }
    }
    if ctx.lsp_router_peer[sw][port].is_some() {
        router_arp_forwarding(ctx, sw, port, out);
    }
}

/// For a `router` port (addresses `router`) whose peer is a distributed gateway port, or
/// resides on the redirect chassis of its router's one (on a switch with a localnet
/// port): the chassis-redirect port its MAC is only reachable on (quoted).
fn router_mac_residence(ctx: &Ctx, sw: usize, port: usize) -> Option<String> {
    let p = ctx.lsp(sw, port);
    if p.kind != "router" || !p.addresses.iter().any(|a| a.trim() == "router") {
        return None;
    }
    let (ri, rj) = ctx.lsp_router_peer[sw][port]?;
    let lrp = ctx.lrp(ri, rj);
    if is_dgp(lrp) {
        return Some(quoted(&format!("cr-{}", lrp.name)));
    }
    if lrp
        .options
        .get("reside-on-redirect-chassis")
        .map(String::as_str)
        == Some("true")
        && !ctx.switch_localnet_ports[sw].is_empty()
    {
        // Only on a switch with a localnet port, and with exactly one distributed gateway
        // port on the router.
        let mut dgps = ctx.router(ri).ports.iter().filter(|l| is_dgp(l));
        if let (Some(d), None) = (dgps.next(), dgps.next()) {
            return Some(quoted(&format!("cr-{}", d.name)));
        }
    }
    None
}

/// A distributed gateway port: one with gateway chassis, an HA chassis group or
/// `options:redirect-chassis`.
fn is_dgp(lrp: &crate::nb::Lrp) -> bool {
    !lrp.gateway_chassis.is_empty()
        || lrp.ha_chassis_group.is_some()
        || lrp.options.contains_key("redirect-chassis")
}

/// The external MACs of the router's distributed NAT rules (`dnat_and_snat` with
/// `external_mac` and `logical_port`), reachable through a distributed gateway port where
/// the NAT's logical port is resident.
fn dgp_nat_macs(ctx: &Ctx, sw: usize, port: usize, action: &str, out: &mut Sink<'_>) {
    let Some((ri, _)) = ctx.lsp_router_peer[sw][port] else {
        return;
    };
    for nat in &ctx.router(ri).nat {
        if nat.kind != "dnat_and_snat" {
            continue;
        }
        let (Some(lp), Some(mac)) = (
            nat.logical_port.as_deref(),
            nat.external_mac
                .as_deref()
                .and_then(crate::addr::Mac::parse),
        ) else {
            continue;
        };
        out.add(
            Stage::LsInL2Lkup,
            50,
            format!("eth.dst == {mac} && is_chassis_resident({})", quoted(lp)),
            action,
        );
    }
}

/// `ls_in_arp_rsp` for one port: the localnet skip, virtual-port binding, or replies for
/// the port's addresses (and the priority-100 "don't answer the owner" rules).
fn arp_nd_responder(
    ctx: &Ctx,
    sw: usize,
    port: usize,
    addrs: &[LportAddresses],
    out: &mut Sink<'_>,
) {
    let s = ctx.switch(sw);
    let p = ctx.lsp(sw, port);
    let q = quoted(&p.name);
    match p.kind.as_str() {
        "localnet" => {
            out.add(Stage::LsInArpRsp, 100, format!("inport == {q}"), "next;");
            return;
        }
        "virtual" => {
            virtual_port(ctx, sw, p, out);
            return;
        }
        "external" => return,
        _ => {}
    }
    if s.other_config.get("vlan-passthru").map(String::as_str) == Some("true") || has_unknown(p) {
        return;
    }
    let ignore_down = ctx
        .nb
        .global_options
        .get("ignore_lsp_down")
        .map(String::as_str)
        != Some("false");
    let is_router = p.kind == "router";
    if !ignore_down && !is_router && p.kind != "localport" && p.up != Some(true) {
        return;
    }
    let na = if is_router { "nd_na_router" } else { "nd_na" };
    if is_router
        && let Some(proxy) = p.options.get("arp_proxy")
        && let Some(e) = addrs.iter().find_map(|la| la.mac)
    {
        let ips: Vec<&str> = proxy
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
            .collect();
        if !ips.is_empty() {
            out.add(
                Stage::LsInArpRsp,
                50,
                format!("arp.op == 1 && arp.tpa == {{{}}}", ips.join(",")),
                format!(
                    "eth.dst = eth.src; eth.src = {e}; arp.op = 2; /* ARP reply */ \
                     arp.tha = arp.sha; arp.sha = {e}; arp.tpa <-> arp.spa; \
                     outport = inport; flags.loopback = 1; output;"
                ),
            );
        }
    }
    for la in addrs {
        let Some(e) = la.mac else { continue };
        for a in &la.ipv4 {
            let a = a.addr;
            let m = format!("arp.tpa == {a} && arp.op == 1");
            out.add(
                Stage::LsInArpRsp,
                100,
                format!("{m} && inport == {q}"),
                "next;",
            );
            out.add(Stage::LsInArpRsp, 50, m, arp_reply(&e.to_string(), a));
        }
        for a in &la.ipv6 {
            let a = a.addr;
            let m = nd_ns_match(a);
            out.add(
                Stage::LsInArpRsp,
                100,
                format!("{m} && inport == {q}"),
                "next;",
            );
            out.add(
                Stage::LsInArpRsp,
                50,
                m,
                format!(
                    "{na} {{ eth.src = {e}; ip6.src = {a}; nd.target = {a}; nd.tll = {e}; \
                     outport = inport; flags.loopback = 1; output; }};"
                ),
            );
        }
    }
}

/// ARP/ND replies for the service-monitor source IPs health checks use towards this
/// port's backends, answered with `NB_Global` `options:svc_monitor_mac`.
fn svc_monitor_replies(ctx: &Ctx, sw: usize, port: usize, out: &mut Sink<'_>) {
    let Some(ips) = ctx.svc_mon_src_ips.get(&(sw, port)) else {
        return;
    };
    let Some(e) = ctx.nb.global_options.get("svc_monitor_mac") else {
        return;
    };
    for ip in ips {
        match ip {
            IpAddr::V4(a) => out.add(
                Stage::LsInArpRsp,
                110,
                format!("arp.tpa == {a} && arp.op == 1"),
                arp_reply(e, a),
            ),
            IpAddr::V6(a) => out.add(
                Stage::LsInArpRsp,
                110,
                format!("nd_ns && nd.target == {a}"),
                format!(
                    "nd_na {{ eth.dst = eth.src; eth.src = {e}; ip6.src = {a}; \
                     nd.target = {a}; nd.tll = {e}; outport = inport; flags.loopback = 1; \
                     output; }};"
                ),
            ),
        }
    }
}

/// A virtual port's `bind_vport` rules, one per virtual parent on the same switch.
fn virtual_port(ctx: &Ctx, sw: usize, p: &Lsp, out: &mut Sink<'_>) {
    let (Some(vip), Some(parents)) = (
        p.options
            .get("virtual-ip")
            .and_then(|v| v.trim().parse::<IpAddr>().ok()),
        p.options.get("virtual-parents"),
    ) else {
        return;
    };
    let action = format!("bind_vport({}, inport); next;", quoted(&p.name));
    for parent in parents.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if ctx.lsp_by_name.get(parent).is_none_or(|&(i, _)| i != sw) {
            continue;
        }
        let pq = quoted(parent);
        let m = match vip {
            IpAddr::V4(v) => format!(
                "inport == {pq} && ((arp.op == 1 && arp.spa == {v} && arp.tpa == {v}) || \
                 (arp.op == 2 && arp.spa == {v}))"
            ),
            IpAddr::V6(v) => format!(
                "inport == {pq} && (({}) ||(nd_na && nd.target == {v}))",
                nd_ns_match(v)
            ),
        };
        out.add(Stage::LsInArpRsp, 100, m, action.clone());
    }
}

/// `ls_in_external_port`: on other chassis, drop the external port's ARP/NS for the
/// switch's router IPs and its traffic to the routers' MACs, per localnet port.
fn external_port(ctx: &Ctx, sw: usize, port: usize, addrs: &[LportAddresses], out: &mut Sink<'_>) {
    let p = ctx.lsp(sw, port);
    let res = format!("!is_chassis_resident({})", quoted(&p.name));
    let routers: Vec<Vec<LportAddresses>> = ctx.switch_router_ports[sw]
        .iter()
        .map(|&rj| port_addrs(ctx, sw, rj))
        .collect();
    for &ln in ctx.switch_localnet_ports[sw].iter() {
        let lq = quoted(&ctx.lsp(sw, ln).name);
        for e in addrs.iter().filter_map(|la| la.mac) {
            let pre = format!("inport == {lq} && eth.src == {e}");
            for ra in routers.iter().flatten() {
                for a in &ra.ipv4 {
                    out.add(
                        Stage::LsInExternalPort,
                        100,
                        format!("{pre} && {res} && arp.tpa == {} && arp.op == 1", a.addr),
                        "drop;",
                    );
                }
                for a in &ra.ipv6 {
                    out.add(
                        Stage::LsInExternalPort,
                        100,
                        format!("{pre} && {res} && {}", nd_ns_match(a.addr)),
                        "drop;",
                    );
                }
                if let Some(rm) = ra.mac {
                    out.add(
                        Stage::LsInExternalPort,
                        100,
                        format!("{pre} && eth.dst == {rm} && {res}"),
                        "drop;",
                    );
                }
            }
        }
    }
}

/// VIPs in `ips` (sorted) inside `net`.
fn v4_in(ips: &[Ipv4Addr], net: Ipv4Net) -> &[Ipv4Addr] {
    let (lo, hi) = (net.network(), net.broadcast());
    let a = ips.partition_point(|&x| x < lo);
    let b = ips.partition_point(|&x| x <= hi);
    &ips[a..b]
}

/// VIPs in `ips` (sorted) inside `net`.
fn v6_in(ips: &[Ipv6Addr], net: Ipv6Net) -> &[Ipv6Addr] {
    let lo = net.network();
    let host = if net.plen >= 128 {
        0
    } else {
        u128::MAX >> net.plen
    };
    let hi = Ipv6Addr::from(u128::from(lo) | host);
    let a = ips.partition_point(|&x| x < lo);
    let b = ips.partition_point(|&x| x <= hi);
    &ips[a..b]
}

/// `ls_in_l2_lkup` priorities 80 and 75 for a port attached to a router: ARP requests and
/// NS for the router's IPs (its port's networks and link-local address, its DNAT
/// addresses, and its load balancers' VIPs inside the port's networks) go to the router
/// (and, when the switch has other ports, to `_MC_flood_l2`); the router's own requests
/// are flooded to `_MC_flood_l2`.
fn router_arp_forwarding(ctx: &Ctx, sw: usize, port: usize, out: &mut Sink<'_>) {
    let Some((ri, rj)) = ctx.lsp_router_peer[sw][port] else {
        return;
    };
    let Some(nets) = &ctx.lrp_networks[ri][rj] else {
        return;
    };
    let Some(rmac) = nets.mac else { return };
    let r = ctx.router(ri);
    let q = quoted(&ctx.lsp(sw, port).name);
    let flood = ctx.switch_router_ports[sw].len() != ctx.switch(sw).ports.len();
    let action = router_forward_action(&q, flood);

    let mut v4: Vec<Ipv4Addr> = nets.ipv4.iter().map(|n| n.addr).collect();
    let mut v6: Vec<Ipv6Addr> = nets.ipv6.iter().map(|n| n.addr).collect();
    v6.push(rmac.ipv6_lla());
    for nat in &r.nat {
        if nat.kind == "snat" {
            continue;
        }
        match nat.external_ip.trim().parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => v4.push(a),
            Ok(IpAddr::V6(a)) => v6.push(a),
            Err(_) => {}
        }
    }
    for lb in &ctx.router_lb_ips[ri] {
        for n in &nets.ipv4 {
            v4.extend_from_slice(v4_in(&lb.v4, *n));
        }
        for n in &nets.ipv6 {
            v6.extend_from_slice(v6_in(&lb.v6, *n));
        }
    }
    v4.sort_unstable();
    v4.dedup();
    v6.sort_unstable();
    v6.dedup();
    for a in v4 {
        out.add(
            Stage::LsInL2Lkup,
            80,
            format!("flags[1] == 0 && arp.op == 1 && arp.tpa == {a}"),
            action.clone(),
        );
    }
    for a in v6 {
        out.add(
            Stage::LsInL2Lkup,
            80,
            format!("flags[1] == 0 && nd_ns && nd.target == {a}"),
            action.clone(),
        );
    }

    if flood {
        let mut macs = vec![rmac.to_string()];
        for nat in &r.nat {
            if nat.kind == "dnat_and_snat"
                && nat.logical_port.is_some()
                && let Some(m) = nat
                    .external_mac
                    .as_deref()
                    .and_then(crate::addr::Mac::parse)
            {
                let m = m.to_string();
                if !macs.contains(&m) {
                    macs.push(m);
                }
            }
        }
        let mut set = String::new();
        for (k, m) in macs.iter().enumerate() {
            if k > 0 {
                set.push_str(", ");
            }
            let _ = write!(set, "{m}");
        }
        out.add(
            Stage::LsInL2Lkup,
            75,
            format!("eth.src == {{{set}}} && (arp.op == 1 || rarp.op == 3 || nd_ns)"),
            "outport = \"_MC_flood_l2\"; output;",
        );
    }
}

/// One load balancer's flows on a switch in these stages: none in 23.03.
pub fn switch_lb(_ctx: &Ctx, _sw: usize, _lb: &LoadBalancer, _out: &mut Sink<'_>) {}

#[cfg(test)]
mod tests;
