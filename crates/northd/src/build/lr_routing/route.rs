//! Static routes (`lr_in_ip_routing`, `lr_in_ip_routing_ecmp`) and router policies
//! (`lr_in_policy`, `lr_in_policy_ecmp`).

use crate::addr::{Mac, parse_ip_net, parse_ipv4_net, parse_ipv6_net};
use crate::build::Ctx;
use crate::lflow::Sink;
use crate::nb::StaticRoute;
use crate::stage::Stage::*;
use std::fmt;
use std::net::IpAddr;

/// A route prefix, normalized to its network address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Network address.
    pub ip: IpAddr,
    /// Prefix length.
    pub plen: u8,
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip, self.plen)
    }
}

/// Parses a static route's `ip_prefix` (`IP[/PLEN]`), masked to the network address.
pub fn parse_prefix(s: &str) -> Option<Prefix> {
    if s.contains(':') {
        let n = parse_ipv6_net(s)?;
        Some(Prefix {
            ip: IpAddr::V6(n.network()),
            plen: n.plen,
        })
    } else {
        let n = parse_ipv4_net(s)?;
        Some(Prefix {
            ip: IpAddr::V4(n.network()),
            plen: n.plen,
        })
    }
}

/// True for a `policy=src-ip` route.
pub fn is_src_ip(r: &StaticRoute) -> bool {
    r.policy.as_deref() == Some("src-ip")
}

/// A resolved next hop: the port that reaches it, the port's address there, its MAC.
struct Hop {
    nh: IpAddr,
    port: String,
    addr: IpAddr,
    mac: Mac,
}

impl Hop {
    /// `reg0 = NH; reg1 = A; eth.src = E; outport = "P";` (xxreg for IPv6).
    fn regs(&self) -> String {
        let x = if self.nh.is_ipv6() { "xx" } else { "" };
        format!(
            "{x}reg0 = {}; {x}reg1 = {}; eth.src = {}; outport = \"{}\";",
            self.nh, self.addr, self.mac, self.port
        )
    }
}

/// Resolves next hop `nh`, through `output_port` when given, else through the port whose
/// network contains it.
fn resolve(ctx: &Ctx, rt: usize, nh: IpAddr, output_port: Option<&str>) -> Option<Hop> {
    let (j, addr) = match output_port {
        Some(name) => {
            let &(ri, j) = ctx.lrp_by_name.get(name)?;
            if ri != rt {
                return None;
            }
            (j, super::port_addr_in(ctx, rt, j, nh)?)
        }
        None => ctx.lr_index[rt].port_for(ctx, rt, nh)?,
    };
    let mac = ctx.lrp_networks[rt][j].as_ref()?.mac?;
    Some(Hop {
        nh,
        port: ctx.lrp(rt, j).name.clone(),
        addr,
        mac,
    })
}

/// One static route's flows.
pub fn router_route(ctx: &Ctx, rt: usize, route: usize, out: &mut Sink<'_>) {
    let r = ctx.router(rt);
    let sr = &r.static_routes[route];
    let Some(pfx) = parse_prefix(&sr.ip_prefix) else {
        return;
    };
    let table = if sr.route_table.is_empty() {
        0
    } else {
        match ctx.lr_index[rt].route_tables.get(&sr.route_table) {
            Some(&id) => id,
            None => return,
        }
    };
    let src = is_src_ip(sr);
    let fam = if pfx.ip.is_ipv6() { "ip6" } else { "ip4" };
    let m = if src {
        format!("{fam}.src == {pfx}")
    } else {
        format!("reg7 == {table} && {fam}.dst == {pfx}")
    };
    let prio = pfx.plen as u16 * 3 + u16::from(!src);
    if sr.nexthop == "discard" {
        out.add(LrInIpRouting, prio, m, "drop;");
        return;
    }
    // Not yet: BFD (needs SB BFD status); such routes are routed as plain routes.
    let Some(nh) = parse_ip_net(&sr.nexthop) else {
        return;
    };
    if nh.is_ipv6() != pfx.ip.is_ipv6() {
        return;
    }
    let Some(hop) = resolve(ctx, rt, nh, sr.output_port.as_deref()) else {
        return;
    };
    if sr
        .options
        .get("ecmp_symmetric_reply")
        .is_some_and(|v| v == "true")
        && super::is_gateway_router(r)
    {
        symmetric_reply(ctx, rt, &hop, pfx, fam, &m, out);
    }
    if let IpAddr::V6(g) = nh {
        let sn = super::solicited_node(g);
        let o = sn.octets();
        out.add(
            LrInArpRequest,
            200,
            format!("eth.dst == 00:00:00:00:00:00 && ip6 && xxreg0 == {g}"),
            format!(
                "nd_ns {{ eth.dst = 33:33:{:02x}:{:02x}:{:02x}:{:02x}; ip6.dst = {sn}; nd.target = {g}; output; }};",
                o[12], o[13], o[14], o[15]
            ),
        );
    }
    match ctx.lr_index[rt].ecmp.get(route).copied().flatten() {
        None => out.add(
            LrInIpRouting,
            prio,
            m,
            format!(
                "ip.ttl--; reg8[0..15] = 0; {} flags.loopback = 1; next;",
                hop.regs()
            ),
        ),
        Some(e) => {
            if e.first == route {
                let mids: Vec<String> = (1..=e.members).map(|i| i.to_string()).collect();
                out.add(
                    LrInIpRouting,
                    prio,
                    m,
                    format!(
                        "ip.ttl--; flags.loopback = 1; reg8[0..15] = {}; reg8[16..31] = select({});",
                        e.gid,
                        mids.join(", ")
                    ),
                );
            }
            out.add(
                LrInIpRoutingEcmp,
                100,
                format!("reg8[0..15] == {} && reg8[16..31] == {}", e.gid, e.mid),
                format!("{} next;", hop.regs()),
            );
        }
    }
}

/// ECMP symmetric reply: replies to connections that came in through the route's port
/// go back to the MAC they came from. The `lr_in_ecmp_stateful` commits (a stage of
/// `lr_nat`) come from the route too, so they are written here.
fn symmetric_reply(
    ctx: &Ctx,
    rt: usize,
    hop: &Hop,
    pfx: Prefix,
    fam: &str,
    route_match: &str,
    out: &mut Sink<'_>,
) {
    let Some(&(_, j)) = ctx.lrp_by_name.get(hop.port.as_str()) else {
        return;
    };
    let key = ctx.lrp_tunnel_keys[rt][j];
    let port = &hop.port;
    let v6 = pfx.ip.is_ipv6();
    for proto in ["sctp", "tcp", "udp"] {
        let act = format!(
            "ct_commit {{ ct_label.ecmp_reply_eth = eth.src;  ct_mark.ecmp_reply_port = {key};}}; commit_ecmp_nh(ipv6 = {v6}, proto = {proto}); next;"
        );
        out.add(
            LrInEcmpStateful,
            100,
            format!(
                "inport == \"{port}\" && {fam}.src == {pfx} && (!ct.rpl && ct.est) && {proto} && reg9[5] == 0"
            ),
            act.clone(),
        );
        out.add(
            LrInEcmpStateful,
            100,
            format!("inport == \"{port}\" && {fam}.src == {pfx} && (ct.new && !ct.est) && {proto}"),
            act,
        );
    }
    let rpl = format!("ct.rpl && reg9[5] == 1 && ct_mark.ecmp_reply_port == {key}");
    let x = if v6 { "xx" } else { "" };
    out.add(
        LrInIpRouting,
        10300,
        format!("{rpl} && {route_match}"),
        format!(
            "ip.ttl--; flags.loopback = 1; eth.src = {}; {x}reg1 = {}; outport = \"{port}\"; next;",
            hop.mac, hop.addr
        ),
    );
    out.add(LrInPolicy, 65535, rpl.clone(), "next;");
    out.add(
        LrInArpResolve,
        200,
        rpl,
        "push(xxreg1); xxreg1 = ct_label; eth.dst = xxreg1[32..79]; pop(xxreg1); next;",
    );
}

/// One policy's flows.
pub fn router_policy(ctx: &Ctx, rt: usize, policy: usize, out: &mut Sink<'_>) {
    let r = ctx.router(rt);
    let pol = &r.policies[policy];
    let Ok(prio) = u16::try_from(pol.priority) else {
        return;
    };
    let mark = pol
        .options
        .get("pkt_mark")
        .and_then(|m| m.parse::<u32>().ok())
        .filter(|&m| m != 0)
        .map(|m| format!("pkt.mark = {m}; "))
        .unwrap_or_default();
    let m = pol.match_.as_str();
    match pol.action.as_str() {
        "allow" => out.add(LrInPolicy, prio, m, format!("{mark}reg8[0..15] = 0; next;")),
        "drop" => out.add(LrInPolicy, prio, m, "drop;"),
        "reroute" => {
            let nhs = nexthops(pol);
            match nhs.len() {
                0 => {}
                1 => {
                    let Some(nh) = parse_ip_net(nhs[0]) else {
                        return;
                    };
                    let Some(hop) = resolve(ctx, rt, nh, None) else {
                        return;
                    };
                    out.add(
                        LrInPolicy,
                        prio,
                        m,
                        format!(
                            "{mark}{} flags.loopback = 1; reg8[0..15] = 0; next;",
                            hop.regs()
                        ),
                    );
                }
                n => {
                    // Group id: 1 + the multi-nexthop reroute policies before this one
                    // (in the order of the router's policies column; matched ovn-northd on lrrt-x). O(policies)
                    // for multi-nexthop policies only.
                    let gid = 1 + r.policies[..policy]
                        .iter()
                        .filter(|p| p.action == "reroute" && nexthops(p).len() > 1)
                        .count();
                    let mut hops = Vec::with_capacity(n);
                    for s in &nhs {
                        let Some(hop) = parse_ip_net(s).and_then(|nh| resolve(ctx, rt, nh, None))
                        else {
                            return;
                        };
                        hops.push(hop);
                    }
                    let mids: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
                    out.add(
                        LrInPolicy,
                        prio,
                        m,
                        format!(
                            "{mark}reg8[0..15] = {gid}; reg8[16..31] = select({});",
                            mids.join(", ")
                        ),
                    );
                    for (i, hop) in hops.iter().enumerate() {
                        out.add(
                            LrInPolicyEcmp,
                            100,
                            format!("reg8[0..15] == {gid} && reg8[16..31] == {}", i + 1),
                            format!("{} flags.loopback = 1; next;", hop.regs()),
                        );
                    }
                }
            }
        }
        _ => {}
    }
}

/// A reroute policy's next hops (`nexthops`, else the deprecated `nexthop`).
fn nexthops(p: &crate::nb::RouterPolicy) -> Vec<&str> {
    if !p.nexthops.is_empty() {
        p.nexthops.iter().map(String::as_str).collect()
    } else {
        p.nexthop.as_deref().into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_normalized() {
        assert_eq!(
            parse_prefix("10.128.0.5/14").unwrap().to_string(),
            "10.128.0.0/14"
        );
        assert_eq!(
            parse_prefix("100.64.0.2").unwrap().to_string(),
            "100.64.0.2/32"
        );
        assert_eq!(parse_prefix("fd00::1/64").unwrap().to_string(), "fd00::/64");
    }
}
