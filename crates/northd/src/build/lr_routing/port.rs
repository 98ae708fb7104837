//! One router port's flows: admission, neighbor lookup, IP input, connected routes, ARP
//! resolve for the ports of the switch it is attached to, delivery.

use super::{
    ARP_REPLY, all_ipv6, always_learn, is_gateway_router, opt_true, set_or_one, solicited_node,
};
use crate::addr::Mac;
use crate::addr::{Ipv4Net, Ipv6Net, parse_lsp_addresses};
use crate::build::Ctx;
use crate::lflow::Sink;
use crate::stage::Stage::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One router port's flows in these stages.
pub fn router_port(ctx: &Ctx, rt: usize, port: usize, out: &mut Sink<'_>) {
    let r = ctx.router(rt);
    let p = ctx.lrp(rt, port);
    // A disabled port keeps its flows except admission and delivery.
    let enabled = p.enabled != Some(false);
    let Some(n) = ctx.lrp_networks[rt][port].as_ref() else {
        return;
    };
    let Some(mac) = n.mac else { return };
    let name = &p.name;
    let dgp = ctx.lr_index[rt].dgp == Some(port);
    // ` && is_chassis_resident("cr-P")` on the distributed gateway port.
    let res = if dgp {
        format!(" && is_chassis_resident(\"cr-{name}\")")
    } else {
        String::new()
    };
    // Gateway routers and routers with a gateway port accept traffic to their IPs (NAT,
    // LB): no unreachables.
    let gw = is_gateway_router(r) || ctx.lr_index[rt].dgp.is_some();
    let v6 = all_ipv6(n);
    // Not yet: several distributed gateway ports on one router (only the first gets the
    // gateway treatment), reside-on-redirect-chassis, redirect-type=bridged.

    // Admission.
    let mtu = gateway_mtu(p);
    let chk = mtu
        .map(|m| format!("reg9[1] = check_pkt_larger({}); ", m + 14))
        .unwrap_or_default();
    if enabled {
        out.add(
            LrInAdmission,
            50,
            format!("eth.mcast && inport == \"{name}\""),
            format!("{chk}xreg0[0..47] = {mac}; next;"),
        );
        out.add(
            LrInAdmission,
            50,
            format!("eth.dst == {mac} && inport == \"{name}\"{res}"),
            format!("{chk}xreg0[0..47] = {mac}; next;"),
        );
    }
    if let Some(m) = mtu {
        // Not yet: options:gateway_mtu_bypass (priority-55 flows).
        out.add(
            LrInChkPktLen,
            50,
            format!("outport == \"{name}\""),
            format!("{chk}next;"),
        );
        if let Some(a) = n.ipv4.first() {
            out.add(
                LrInIpInput,
                150,
                format!("inport == \"{name}\" && ip4 && reg9[1] && reg9[0] == 0"),
                frag_needed4(mac, a.addr, m),
            );
        }
        if let Some(a) = v6.first() {
            out.add(
                LrInIpInput,
                150,
                format!("inport == \"{name}\" && ip6 && reg9[1] && reg9[0] == 0"),
                frag_needed6(mac, a.addr, m),
            );
        }
        // Packets routed from every other port out of this one.
        for (q, qp) in r.ports.iter().enumerate() {
            if q == port {
                continue;
            }
            let Some(qn) = ctx.lrp_networks[rt][q].as_ref() else {
                continue;
            };
            let Some(qmac) = qn.mac else { continue };
            let qname = &qp.name;
            if let Some(a) = qn.ipv4.first() {
                out.add(
                    LrInLargerPkts,
                    150,
                    format!("inport == \"{qname}\" && outport == \"{name}\" && ip4 && reg9[1] && reg9[0] == 0"),
                    frag_needed4(qmac, a.addr, m),
                );
            }
            if let Some(a) = all_ipv6(qn).first() {
                out.add(
                    LrInLargerPkts,
                    150,
                    format!("inport == \"{qname}\" && outport == \"{name}\" && ip6 && reg9[1] && reg9[0] == 0"),
                    frag_needed6(qmac, a.addr, m),
                );
            }
        }
    }

    // Neighbor lookup.
    let learn = always_learn(r);
    for a in &n.ipv4 {
        let net = format!("{}/{}", a.network(), a.plen);
        if learn {
            out.add(
                LrInLookupNeighbor,
                100,
                format!("inport == \"{name}\" && arp.spa == {net} && arp.op == 1{res}"),
                "reg9[2] = lookup_arp(inport, arp.spa, arp.sha); next;",
            );
        } else {
            out.add(
                LrInLookupNeighbor,
                110,
                format!(
                    "inport == \"{name}\" && arp.spa == {net} && arp.tpa == {} && arp.op == 1{res}",
                    a.addr
                ),
                "reg9[2] = lookup_arp(inport, arp.spa, arp.sha); reg9[3] = 1; next;",
            );
            out.add(
                LrInLookupNeighbor,
                100,
                format!("inport == \"{name}\" && arp.spa == {net} && arp.op == 1{res}"),
                "reg9[2] = lookup_arp(inport, arp.spa, arp.sha); reg9[3] = lookup_arp_ip(inport, arp.spa); next;",
            );
        }
    }

    // IP input.
    if !n.ipv4.is_empty() {
        let mut srcs = Vec::new();
        for a in &n.ipv4 {
            srcs.push(a.addr.to_string());
            srcs.push(a.broadcast().to_string());
        }
        out.add(
            LrInIpInput,
            100,
            format!("ip4.src == {{{}}} && reg9[0] == 0", srcs.join(", ")),
            "drop;",
        );
    }
    for a in &v6 {
        out.add(
            LrInIpInput,
            100,
            format!("ip6.dst == {} && udp.src == 547 && udp.dst == 546", a.addr),
            "reg0 = 0; handle_dhcpv6_reply;",
        );
    }
    if !n.ipv4.is_empty() {
        let ips: Vec<String> = n.ipv4.iter().map(|a| a.addr.to_string()).collect();
        out.add(
            LrInIpInput,
            90,
            format!(
                "ip4.dst == {} && icmp4.type == 8 && icmp4.code == 0",
                set_or_one(&ips)
            ),
            "ip4.dst <-> ip4.src; ip.ttl = 255; icmp4.type = 0; flags.loopback = 1; next; ",
        );
    }
    if !v6.is_empty() {
        let ips: Vec<String> = v6.iter().map(|a| a.addr.to_string()).collect();
        out.add(
            LrInIpInput,
            90,
            format!(
                "ip6.dst == {} && icmp6.type == 128 && icmp6.code == 0",
                set_or_one(&ips)
            ),
            "ip6.dst <-> ip6.src; ip.ttl = 255; icmp6.type = 129; flags.loopback = 1; next; ",
        );
    }
    for a in &n.ipv4 {
        out.add(
            LrInIpInput,
            90,
            format!(
                "inport == \"{name}\" && arp.op == 1 && arp.tpa == {} && arp.spa == {}/{}{res}",
                a.addr,
                a.network(),
                a.plen
            ),
            ARP_REPLY,
        );
    }
    for a in &v6 {
        out.add(
            LrInIpInput,
            90,
            format!(
                "inport == \"{name}\" && ip6.dst == {{{}, {}}} && nd_ns && nd.target == {}{res}",
                a.addr,
                solicited_node(a.addr),
                a.addr
            ),
            "nd_na_router { eth.src = xreg0[0..47]; ip6.src = nd.target; nd.tll = xreg0[0..47]; outport = inport; flags.loopback = 1; output; };",
        );
    }
    if !gw {
        for a in &n.ipv4 {
            let m = format!("ip4 && ip4.dst == {} && !ip.later_frag", a.addr);
            unreachables(out, &m, "4", "ip4", "3", "3", "2");
        }
        for a in &v6 {
            let m = format!("ip6 && ip6.dst == {} && !ip.later_frag", a.addr);
            unreachables(out, &m, "6", "ip6", "1", "4", "3");
        }
    }
    // Drop other traffic to the port's IPs, except the ones used for SNAT.
    let force_snat_router_ip = gw
        && r.options
            .get("lb_force_snat_ip")
            .is_some_and(|v| v == "router_ip");
    if !force_snat_router_ip {
        let snat = &ctx.lr_index[rt].snat_lb_ips;
        let d4: Vec<String> = n
            .ipv4
            .iter()
            .filter(|a| !snat.contains(&IpAddr::V4(a.addr)))
            .map(|a| a.addr.to_string())
            .collect();
        if !d4.is_empty() {
            out.add(
                LrInIpInput,
                60,
                format!("ip4.dst == {{{}}}", d4.join(", ")),
                "drop;",
            );
        }
        let d6: Vec<String> = v6
            .iter()
            .filter(|a| !snat.contains(&IpAddr::V6(a.addr)))
            .map(|a| a.addr.to_string())
            .collect();
        if !d6.is_empty() {
            out.add(
                LrInIpInput,
                60,
                format!("ip6.dst == {{{}}}", d6.join(", ")),
                "drop;",
            );
        }
    }
    // Traffic still addressed to one of the port's SNAT / LB IPs after unSNAT / DNAT.
    let late = &ctx.lr_index[rt].snat_lb_ips;
    let l4: Vec<String> = n
        .ipv4
        .iter()
        .filter(|a| late.contains(&IpAddr::V4(a.addr)))
        .map(|a| a.addr.to_string())
        .collect();
    if !l4.is_empty() {
        out.add(
            LrInArpResolve,
            2,
            format!("ip4.dst == {{{}}}", l4.join(", ")),
            "drop;",
        );
    }
    let l6: Vec<String> = v6
        .iter()
        .filter(|a| late.contains(&IpAddr::V6(a.addr)))
        .map(|a| a.addr.to_string())
        .collect();
    if !l6.is_empty() {
        out.add(
            LrInArpResolve,
            2,
            format!("ip6.dst == {{{}}}", l6.join(", ")),
            "drop;",
        );
    }
    for a in &n.ipv4 {
        out.add(
            LrInIpInput,
            31,
            format!("inport == \"{name}\" && ip4 && ip.ttl == {{0, 1}} && !ip.later_frag"),
            format!(
                "icmp4 {{eth.dst <-> eth.src; icmp4.type = 11; /* Time exceeded */ icmp4.code = 0; /* TTL exceeded in transit */ {} ; ip.ttl = 254; outport = \"{name}\"; flags.loopback = 1; output; }};",
                // On the gateway port the reply leaves through SNAT.
                if dgp {
                    "ip4.dst <-> ip4.src".to_string()
                } else {
                    format!("ip4.dst = ip4.src; ip4.src = {}", a.addr)
                }
            ),
        );
    }
    for a in &n.ipv6 {
        out.add(
            LrInIpInput,
            31,
            format!(
                "inport == \"{name}\" && ip6 && ip6.src == {}/{} && ip.ttl == {{0, 1}} && !ip.later_frag",
                a.network(),
                a.plen
            ),
            format!(
                "icmp6 {{eth.dst <-> eth.src; ip6.dst = ip6.src; ip6.src = {} ; ip.ttl = 254; icmp6.type = 3; /* Time exceeded */ icmp6.code = 0; /* TTL exceeded in transit */ outport = \"{name}\"; flags.loopback = 1; output; }};",
                a.addr
            ),
        );
    }
    if let Some(id) = p
        .options
        .get("route_table")
        .and_then(|t| ctx.lr_index[rt].route_tables.get(t))
    {
        out.add(
            LrInIpRoutingPre,
            100,
            format!("inport == \"{name}\""),
            format!("reg7 = {id}; next;"),
        );
    }
    nd_ra(ctx, rt, port, mac, n, &v6, out);
    if ctx.lr_index[rt].mcast_flood {
        out.add(
            LrInIpRouting,
            10550,
            format!("eth.src == {mac} && igmp"),
            "drop;",
        );
        out.add(
            LrInIpRouting,
            10550,
            format!("eth.src == {mac} && (mldv1 || mldv2)"),
            "drop;",
        );
    }
    // Not yet: BFD.

    // Connected routes.
    for a in &n.ipv4 {
        out.add(
            LrInIpRouting,
            a.plen as u16 * 3 + 2,
            format!("ip4.dst == {}/{}", a.network(), a.plen),
            format!(
                "ip.ttl--; reg8[0..15] = 0; reg0 = ip4.dst; reg1 = {}; eth.src = {mac}; outport = \"{name}\"; flags.loopback = 1; next;",
                a.addr
            ),
        );
    }
    for a in &v6 {
        let lla = a.addr.segments()[0] & 0xffc0 == 0xfe80;
        let m = if lla {
            format!(
                "inport == \"{name}\" && ip6.dst == {}/{}",
                a.network(),
                a.plen
            )
        } else {
            format!("ip6.dst == {}/{}", a.network(), a.plen)
        };
        out.add(
            LrInIpRouting,
            a.plen as u16 * 3 + 2,
            m,
            format!(
                "ip.ttl--; reg8[0..15] = 0; xxreg0 = ip6.dst; xxreg1 = {}; eth.src = {mac}; outport = \"{name}\"; flags.loopback = 1; next;",
                a.addr
            ),
        );
    }

    arp_resolve(ctx, rt, port, out);

    if dgp && enabled {
        out.add(
            LrInGwRedirect,
            50,
            format!("outport == \"{name}\""),
            format!("outport = \"cr-{name}\"; next;"),
        );
    }

    // Delivery.
    if !enabled {
        return;
    }
    if opt_true(r, "mcast_relay") {
        out.add(
            LrOutDelivery,
            110,
            format!("(ip4.mcast || ip6.mcast) && outport == \"{name}\""),
            format!("eth.src = {mac}; output;"),
        );
    }
    out.add(
        LrOutDelivery,
        100,
        format!("outport == \"{name}\""),
        "output;",
    );
}

/// IPv6 router advertisement replies for a port with `ipv6_ra_configs:address_mode`.
fn nd_ra(
    ctx: &Ctx,
    rt: usize,
    port: usize,
    mac: Mac,
    n: &crate::addr::LportAddresses,
    v6: &[crate::addr::Ipv6Net],
    out: &mut Sink<'_>,
) {
    let p = ctx.lrp(rt, port);
    if n.ipv6.is_empty() || (ctx.lrp_switch_peer[rt][port].is_none() && p.peer.is_none()) {
        return;
    }
    let cfg: std::collections::BTreeMap<&str, &str> =
        p.row.get("ipv6_ra_configs").str_pairs().collect();
    let Some(&mode) = cfg.get("address_mode") else {
        return;
    };
    if !matches!(mode, "slaac" | "dhcpv6_stateful" | "dhcpv6_stateless") {
        return;
    }
    let name = &p.name;
    let mut opts = format!("addr_mode = \"{mode}\", slla = {mac}");
    if let Some(m) = cfg.get("mtu").and_then(|m| m.parse::<u32>().ok()) {
        opts.push_str(&format!(", mtu = {m}"));
    }
    if let Some(&pref @ ("HIGH" | "LOW")) = cfg.get("router_preference") {
        opts.push_str(&format!(", router_preference = \"{pref}\""));
    }
    for a in &n.ipv6 {
        opts.push_str(&format!(", prefix = {}/{}", a.network(), a.plen));
    }
    // Not yet: rdnss, dnssl, route_info, prefix delegation.
    out.add(
        LrInNdRaOptions,
        50,
        format!("inport == \"{name}\" && ip6.dst == ff02::2 && nd_rs"),
        format!("reg0[5] = put_nd_ra_opts({opts}); next;"),
    );
    let lla = v6.last().map(|a| a.addr).unwrap_or(Ipv6Addr::UNSPECIFIED);
    out.add(
        LrInNdRaResponse,
        50,
        format!("inport == \"{name}\" && ip6.dst == ff02::2 && nd_ra && reg0[5]"),
        format!("eth.dst = eth.src; eth.src = {mac}; ip6.dst = ip6.src; ip6.src = {lla}; outport = inport; flags.loopback = 1; output;"),
    );
}

/// A port's `options:gateway_mtu`, when a positive integer.
fn gateway_mtu(p: &crate::nb::Lrp) -> Option<u32> {
    p.options
        .get("gateway_mtu")
        .and_then(|m| m.parse::<u32>().ok())
        .filter(|&m| m > 0)
}

/// ICMPv4 "fragmentation needed" back through the ingress pipeline.
fn frag_needed4(mac: Mac, src: Ipv4Addr, mtu: u32) -> String {
    format!(
        "icmp4_error {{reg9[0] = 1; reg9[1] = 0; eth.dst = {mac}; ip4.dst = ip4.src; ip4.src = {src}; ip.ttl = 255; icmp4.type = 3; /* Destination Unreachable. */ icmp4.code = 4; /* Frag Needed and DF was Set. */ icmp4.frag_mtu = {mtu}; next(pipeline=ingress, table=0); }};"
    )
}

/// ICMPv6 "packet too big" back through the ingress pipeline.
fn frag_needed6(mac: Mac, src: Ipv6Addr, mtu: u32) -> String {
    format!(
        "icmp6_error {{reg9[0] = 1; reg9[1] = 0; eth.dst = {mac}; ip6.dst = ip6.src; ip6.src = {src}; ip.ttl = 255; icmp6.type = 2; /* Packet Too Big. */ icmp6.code = 0; icmp6.frag_mtu = {mtu}; next(pipeline=ingress, table=0); }};"
    )
}

/// The UDP/TCP/SCTP (priority 80) and other-protocol (70) unreachables for one address.
fn unreachables(
    out: &mut Sink<'_>,
    m: &str,
    v: &str,
    ip: &str,
    unreach_type: &str,
    port_code: &str,
    proto_code: &str,
) {
    out.add(
        LrInIpInput,
        80,
        format!("{m} && sctp"),
        format!("sctp_abort {{eth.dst <-> eth.src; {ip}.dst <-> {ip}.src; next; }};"),
    );
    out.add(
        LrInIpInput,
        80,
        format!("{m} && tcp"),
        format!("tcp_reset {{eth.dst <-> eth.src; {ip}.dst <-> {ip}.src; next; }};"),
    );
    out.add(
        LrInIpInput,
        80,
        format!("{m} && udp"),
        format!(
            "icmp{v} {{eth.dst <-> eth.src; {ip}.dst <-> {ip}.src; ip.ttl = 255; icmp{v}.type = {unreach_type}; icmp{v}.code = {port_code}; next; }};"
        ),
    );
    out.add(
        LrInIpInput,
        70,
        m.to_string(),
        format!(
            "icmp{v} {{eth.dst <-> eth.src; {ip}.dst <-> {ip}.src; ip.ttl = 255; icmp{v}.type = {unreach_type}; icmp{v}.code = {proto_code}; next; }};"
        ),
    );
}

/// Static MAC bindings for router port `port`: the addresses of the ports on the switch it
/// is attached to (VIFs, and other routers' ports unless `dynamic_neigh_routers`).
fn arp_resolve(ctx: &Ctx, rt: usize, port: usize, out: &mut Sink<'_>) {
    let Some(me) = ctx.lrp_networks[rt][port].as_ref() else {
        return;
    };
    let name = &ctx.lrp(rt, port).name;
    let dyn_neigh = opt_true(ctx.router(rt), "dynamic_neigh_routers");
    let my6 = all_ipv6(me);
    // A router port patched directly to another router's port (`peer`).
    if let Some(&(ort, oport)) = ctx
        .lrp(rt, port)
        .peer
        .as_deref()
        .and_then(|p| ctx.lrp_by_name.get(p))
    {
        if dyn_neigh {
            return;
        }
        let Some(other) = ctx.lrp_networks[ort][oport].as_ref() else {
            return;
        };
        let Some(omac) = other.mac else { return };
        if !other.ipv4.is_empty() {
            let ips: Vec<String> = other.ipv4.iter().map(|a| a.addr.to_string()).collect();
            out.add(
                LrInArpResolve,
                100,
                // (sic: no space before `==`, as ovn-northd prints it)
                format!("outport == \"{name}\" && reg0== {}", set_or_one(&ips)),
                format!("eth.dst = {omac}; next;"),
            );
        }
        let ips: Vec<String> = all_ipv6(other).iter().map(|a| a.addr.to_string()).collect();
        out.add(
            LrInArpResolve,
            100,
            format!("outport == \"{name}\" && xxreg0 == {}", set_or_one(&ips)),
            format!("eth.dst = {omac}; next;"),
        );
        return;
    }
    let Some((si, _)) = ctx.lrp_switch_peer[rt][port] else {
        return;
    };
    let s = ctx.switch(si);
    for (k, lsp) in s.ports.iter().enumerate() {
        if lsp.kind == "router" {
            if dyn_neigh {
                continue;
            }
            let Some((ort, oport)) = ctx.lsp_router_peer[si][k] else {
                continue;
            };
            if (ort, oport) == (rt, port) {
                continue;
            }
            let Some(other) = ctx.lrp_networks[ort][oport].as_ref() else {
                continue;
            };
            let Some(omac) = other.mac else { continue };
            let reach4 = other.ipv4.iter().any(|a| {
                me.ipv4.iter().any(|x| {
                    Ipv4Net {
                        addr: a.addr,
                        plen: x.plen,
                    }
                    .network()
                        == x.network()
                })
            });
            if reach4 {
                let ips: Vec<String> = other.ipv4.iter().map(|a| a.addr.to_string()).collect();
                out.add(
                    LrInArpResolve,
                    100,
                    format!("outport == \"{name}\" && reg0 == {}", set_or_one(&ips)),
                    format!("eth.dst = {omac}; next;"),
                );
            }
            let o6 = all_ipv6(other);
            let reach6 = o6.iter().any(|a| {
                my6.iter().any(|x| {
                    Ipv6Net {
                        addr: a.addr,
                        plen: x.plen,
                    }
                    .network()
                        == x.network()
                })
            });
            if reach6 {
                let ips: Vec<String> = o6.iter().map(|a| a.addr.to_string()).collect();
                out.add(
                    LrInArpResolve,
                    100,
                    format!("outport == \"{name}\" && xxreg0 == {}", set_or_one(&ips)),
                    format!("eth.dst = {omac}; next;"),
                );
            }
            continue;
        }
        if lsp.kind == "virtual" {
            // The virtual IP resolves by ARP until a parent claims it. Not yet: the
            // claimed parent's MAC (SB Port_Binding virtual_parent).
            match lsp
                .options
                .get("virtual-ip")
                .and_then(|v| v.parse::<IpAddr>().ok())
            {
                Some(IpAddr::V4(a)) => out.add(
                    LrInArpResolve,
                    100,
                    format!("outport == \"{name}\" && reg0 == {a}"),
                    "eth.dst = 00:00:00:00:00:00; next;",
                ),
                Some(IpAddr::V6(a)) => out.add(
                    LrInArpResolve,
                    100,
                    format!("outport == \"{name}\" && xxreg0 == {a}"),
                    "eth.dst = 00:00:00:00:00:00; next;",
                ),
                None => {}
            }
            continue;
        }
        let dynamic = lsp.row.get("dynamic_addresses").as_str();
        for entry in &lsp.addresses {
            let entry = if entry == "dynamic" {
                match dynamic {
                    Some(d) => d,
                    None => continue,
                }
            } else {
                entry.as_str()
            };
            let Some(la) = parse_lsp_addresses(entry) else {
                continue;
            };
            let Some(m) = la.mac else { continue };
            for a in &la.ipv4 {
                out.add(
                    LrInArpResolve,
                    100,
                    format!("outport == \"{name}\" && reg0 == {}", a.addr),
                    format!("eth.dst = {m}; next;"),
                );
            }
            for a in &la.ipv6 {
                out.add(
                    LrInArpResolve,
                    100,
                    format!("outport == \"{name}\" && xxreg0 == {}", a.addr),
                    format!("eth.dst = {m}; next;"),
                );
            }
        }
    }
}
