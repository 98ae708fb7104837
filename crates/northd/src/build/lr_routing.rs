//! Logical router forwarding stages: admission, neighbor lookup and learning, IP input,
//! ND RA, routing (pre, routes, ECMP), policies, ARP resolve, packet-length checks, gateway
//! redirect, ARP request; egress loop and delivery.
//!
//! Split by NB object:
//!
//! * [`router_dp`]: each stage's fixed flows (they depend on router options:
//!   `always_learn_from_arp_request`, `mcast_relay`), multicast flooding, and the ARP/ND
//!   replies for the router's reachable load-balancer VIPs (one flow per port matching the
//!   `$_rtr_lb_KEY_ip4/6` address set).
//! * [`router_port`]: one router port's admission (with `gateway_mtu` checks), neighbor
//!   lookup, IP input (ARP/ND/ICMP replies, unreachables, drops, time exceeded,
//!   fragmentation needed), ND RA, connected routes, the late drop of its SNAT/LB IPs,
//!   the static MAC bindings of its neighbours (the ports of the switch it is attached
//!   to, or its `peer` router port), the gateway redirect of a distributed gateway port,
//!   larger-packet replies, delivery.
//! * [`router_route`]: one static route (dst-ip / src-ip, `output_port`, route tables,
//!   discard, ECMP groups, ECMP symmetric reply, IPv6 next-hop solicitations).
//! * [`router_policy`]: one policy (allow / drop / reroute, multi-nexthop ECMP, pkt_mark).
//! * [`router_nat`]: a NAT rule's ARP/ND replies and, on a router with a distributed
//!   gateway port, its admission, IP input, ARP resolve, redirect and egress loopback.
//!
//! What routes, policies, NAT rules and ports need about the whole router (which port
//! reaches a next hop, ECMP groups, route table ids, the distributed gateway port, the
//! router IPs that are SNAT IPs or LB VIPs, VIP reachability) is computed once per router
//! in [`RouterIndex`] ([`Ctx::lr_index`]). Dependencies for incremental runs: a router's
//! index depends on its ports, static routes, NAT rules, options and load balancers; a
//! port item also reads the ports of the switch it is attached to (or its peer port).

mod port;
mod route;

use super::Ctx;
use crate::addr::{Ipv4Net, Ipv6Net, LportAddresses, parse_ip_net};
use crate::lflow::Sink;
use crate::nb::{LoadBalancer, LogicalRouter, Nb};
use crate::stage::Stage;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr};

pub use port::router_port;
pub use route::{router_policy, router_route};

/// Per-router lookups for routes and policies, computed once in [`Ctx::new`].
#[derive(Debug, Clone, Default)]
pub struct RouterIndex {
    /// (masked network, prefix length) → the first port (in port order) with that network.
    net_to_port: HashMap<(IpAddr, u8), usize>,
    /// The distinct IPv4 prefix lengths of the router's networks, longest first.
    plens_v4: Vec<u8>,
    /// The distinct IPv6 prefix lengths (including the link-local /64), longest first.
    plens_v6: Vec<u8>,
    /// Route table name → id (1-based, in name order; the main table `""` is 0).
    pub route_tables: HashMap<String, u32>,
    /// Per static route: its ECMP group, when it shares (route table, policy, prefix)
    /// with other routes.
    pub ecmp: Vec<Option<Ecmp>>,
    /// The first distributed gateway port (not on gateway routers).
    pub dgp: Option<usize>,
    /// The router's own IPs that are also SNAT IPs (NAT external IPs, explicit
    /// `lb_force_snat_ip` / `dnat_force_snat_ip`) or load-balancer VIPs: no "drop traffic
    /// to router IP" flows for them in IP input; dropped late in ARP resolve instead.
    pub snat_lb_ips: Vec<IpAddr>,
    /// Multicast relay on and some port floods multicast (`options:mcast_flood`).
    pub mcast_flood: bool,
    /// Whether some IPv4 / IPv6 load-balancer VIP is in one of the router's networks.
    pub lb_reach: (bool, bool),
}

/// One static route's place in an ECMP group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ecmp {
    /// Group id (1-based, in order of the groups' first routes).
    pub gid: u32,
    /// Member id within the group (1-based, route order).
    pub mid: u32,
    /// Number of members.
    pub members: u32,
    /// Index of the group's first route (it writes the group's routing flow).
    pub first: usize,
}

/// Computes the [`RouterIndex`] of every router (`nets` is [`Ctx::lrp_networks`]).
pub fn index_routers(nb: &Nb, nets: &[Vec<Option<LportAddresses>>]) -> Vec<RouterIndex> {
    // The VIPs of each load-balancer group routers use, sorted: routers share groups (one
    // cluster-wide group on every gateway router), so each group is parsed once.
    let mut group_vips: HashMap<ovsdb::Uuid, Vec<IpAddr>> = HashMap::new();
    for r in &nb.routers {
        for g in &r.load_balancer_group {
            group_vips.entry(*g).or_insert_with(|| {
                let lbs = nb
                    .lb_groups
                    .get(g)
                    .map_or(&[][..], |g| &g.load_balancer[..]);
                sorted_vips(nb, lbs)
            });
        }
    }
    nb.routers
        .iter()
        .zip(nets)
        .map(|(r, n)| index_router(nb, &group_vips, r, n))
        .collect()
}

/// The VIPs of these load balancers, sorted, each once.
fn sorted_vips(nb: &Nb, lbs: &[ovsdb::Uuid]) -> Vec<IpAddr> {
    let mut v: Vec<IpAddr> = lbs
        .iter()
        .filter_map(|u| nb.lbs.get(u))
        .flat_map(|lb| lb.vips.iter().filter_map(|(vip, _)| vip_ip(vip)))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// True when some IP of the sorted `vips` is in `lo..=hi`.
fn any_in(vips: &[IpAddr], lo: IpAddr, hi: IpAddr) -> bool {
    let i = vips.partition_point(|&v| v < lo);
    vips.get(i).is_some_and(|&v| v <= hi)
}

fn index_router(
    nb: &Nb,
    group_vips: &HashMap<ovsdb::Uuid, Vec<IpAddr>>,
    r: &LogicalRouter,
    nets: &[Option<LportAddresses>],
) -> RouterIndex {
    let mut ix = RouterIndex {
        dgp: if is_gateway_router(r) {
            None
        } else {
            r.ports.iter().position(is_dgp)
        },
        ..Default::default()
    };
    for (j, n) in nets.iter().enumerate() {
        let Some(n) = n else { continue };
        for a in &n.ipv4 {
            ix.net_to_port
                .entry((IpAddr::V4(a.network()), a.plen))
                .or_insert(j);
            ix.plens_v4.push(a.plen);
        }
        for a in all_ipv6(n) {
            ix.net_to_port
                .entry((IpAddr::V6(a.network()), a.plen))
                .or_insert(j);
            ix.plens_v6.push(a.plen);
        }
    }
    for p in [&mut ix.plens_v4, &mut ix.plens_v6] {
        p.sort_unstable_by(|a, b| b.cmp(a));
        p.dedup();
    }
    ix.mcast_flood = opt_true(r, "mcast_relay")
        && r.ports
            .iter()
            .any(|p| p.options.get("mcast_flood").is_some_and(|v| v == "true"));
    let owned_order: Vec<IpAddr> = nets
        .iter()
        .flatten()
        .flat_map(|n| {
            n.ipv4
                .iter()
                .map(|a| IpAddr::V4(a.addr))
                .chain(all_ipv6(n).into_iter().map(|a| IpAddr::V6(a.addr)))
        })
        .collect();
    let owned: HashSet<IpAddr> = owned_order.iter().copied().collect();
    let add_owned = |ix: &mut RouterIndex, ip: IpAddr| {
        if owned.contains(&ip) && !ix.snat_lb_ips.contains(&ip) {
            ix.snat_lb_ips.push(ip);
        }
    };
    if is_gateway_router(r) {
        for key in ["lb_force_snat_ip", "dnat_force_snat_ip"] {
            let ips = r.options.get(key).map_or("", String::as_str);
            if ips == "router_ip" {
                continue;
            }
            for ip in ips.split_whitespace().filter_map(|a| a.parse().ok()) {
                add_owned(&mut ix, ip);
            }
        }
    }
    for nat in &r.nat {
        if (nat.kind == "snat" || nat.kind == "dnat_and_snat")
            && let Some(ip) = nat_external_ip(&nat.external_ip)
        {
            add_owned(&mut ix, ip);
        }
    }
    let own_vips = sorted_vips(nb, &r.load_balancer);
    let sets = std::iter::once(&own_vips).chain(
        r.load_balancer_group
            .iter()
            .filter_map(|g| group_vips.get(g)),
    );
    for vips in sets {
        if vips.is_empty() {
            continue;
        }
        for &ip in &owned_order {
            if vips.binary_search(&ip).is_ok() {
                add_owned(&mut ix, ip);
            }
        }
        // Global networks only: a VIP is not reachable through a link-local one.
        for n in nets.iter().flatten() {
            for x in &n.ipv4 {
                let (lo, hi) = (IpAddr::V4(x.network()), IpAddr::V4(x.broadcast()));
                ix.lb_reach.0 |= any_in(vips, lo, hi);
            }
            for x in &n.ipv6 {
                let lo = x.network();
                let hi = Ipv6Addr::from(
                    u128::from(lo) | (u128::MAX.checked_shr(x.plen as u32).unwrap_or(0)),
                );
                ix.lb_reach.1 |= any_in(vips, IpAddr::V6(lo), IpAddr::V6(hi));
            }
        }
    }
    let mut tables: Vec<&str> = r
        .static_routes
        .iter()
        .map(|x| x.route_table.as_str())
        .chain(
            r.ports
                .iter()
                .filter_map(|p| p.options.get("route_table").map(String::as_str)),
        )
        .filter(|t| !t.is_empty())
        .collect();
    tables.sort_unstable();
    tables.dedup();
    ix.route_tables = tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32 + 1))
        .collect();
    // ECMP groups: routes with the same route table, policy and (normalized) prefix.
    let mut groups: HashMap<(String, bool, String), Vec<usize>> = HashMap::new();
    let mut order = Vec::new();
    for (k, rt) in r.static_routes.iter().enumerate() {
        let Some(pfx) = route::parse_prefix(&rt.ip_prefix) else {
            continue;
        };
        let key = (
            rt.route_table.clone(),
            route::is_src_ip(rt),
            pfx.to_string(),
        );
        let e = groups.entry(key).or_default();
        if e.is_empty() {
            order.push(k);
        }
        e.push(k);
    }
    ix.ecmp = vec![None; r.static_routes.len()];
    let mut firsts: Vec<(usize, &Vec<usize>)> = groups
        .values()
        .filter(|m| m.len() > 1)
        .map(|m| (m[0], m))
        .collect();
    firsts.sort_unstable();
    for (g, (first, members)) in firsts.into_iter().enumerate() {
        for (m, &k) in members.iter().enumerate() {
            ix.ecmp[k] = Some(Ecmp {
                gid: g as u32 + 1,
                mid: m as u32 + 1,
                members: members.len() as u32,
                first,
            });
        }
    }
    ix
}

impl RouterIndex {
    /// The port (and its address in the matching network) that reaches `ip`, longest
    /// prefix first.
    fn port_for(&self, ctx: &Ctx, rt: usize, ip: IpAddr) -> Option<(usize, IpAddr)> {
        let plens = match ip {
            IpAddr::V4(_) => &self.plens_v4,
            IpAddr::V6(_) => &self.plens_v6,
        };
        for &p in plens {
            let key = (mask(ip, p), p);
            if let Some(&j) = self.net_to_port.get(&key) {
                let a = port_addr_in(ctx, rt, j, ip)?;
                return Some((j, a));
            }
        }
        None
    }
}

/// `ip` masked to `plen` bits.
fn mask(ip: IpAddr, plen: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Net { addr: a, plen }.network()),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Net { addr: a, plen }.network()),
    }
}

/// Port `j`'s address in the network that contains `ip`; else its first address of that
/// family.
fn port_addr_in(ctx: &Ctx, rt: usize, j: usize, ip: IpAddr) -> Option<IpAddr> {
    let n = ctx.lrp_networks[rt][j].as_ref()?;
    match ip {
        IpAddr::V4(a) => n
            .ipv4
            .iter()
            .find(|x| {
                Ipv4Net {
                    addr: a,
                    plen: x.plen,
                }
                .network()
                    == x.network()
            })
            .or(n.ipv4.first())
            .map(|x| IpAddr::V4(x.addr)),
        IpAddr::V6(a) => {
            let all = all_ipv6(n);
            all.iter()
                .find(|x| {
                    Ipv6Net {
                        addr: a,
                        plen: x.plen,
                    }
                    .network()
                        == x.network()
                })
                .or(all.first())
                .map(|x| IpAddr::V6(x.addr))
        }
    }
}

/// A router port's IPv6 addresses: its networks, then the link-local one from its MAC.
fn all_ipv6(n: &LportAddresses) -> Vec<Ipv6Net> {
    let mut v = n.ipv6.clone();
    if let Some(m) = n.mac {
        let lla = m.ipv6_lla();
        if !v.iter().any(|x| x.addr == lla) {
            v.push(Ipv6Net {
                addr: lla,
                plen: 64,
            });
        }
    }
    v
}

/// `{a, b}` when more than one, else `a`.
fn set_or_one(v: &[String]) -> String {
    if v.len() == 1 {
        v[0].clone()
    } else {
        format!("{{{}}}", v.join(", "))
    }
}

/// The solicited-node multicast address of `a`.
fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let low = u128::from(a) & 0x00ff_ffff;
    Ipv6Addr::from(0xff02_0000_0000_0000_0000_0001_ff00_0000u128 | low)
}

/// True for a distributed gateway port (one with gateway chassis).
fn is_dgp(p: &crate::nb::Lrp) -> bool {
    !p.gateway_chassis.is_empty()
        || p.ha_chassis_group.is_some()
        || p.options
            .get("redirect-chassis")
            .is_some_and(|c| !c.is_empty())
}

/// ` && is_chassis_resident("cr-P")` for the router's distributed gateway port, else "".
fn resident_suffix(ctx: &Ctx, rt: usize, p: &crate::nb::Lrp) -> String {
    match ctx.lr_index[rt].dgp {
        Some(g) if ctx.lrp(rt, g).uuid == p.uuid => {
            format!(" && is_chassis_resident(\"cr-{}\")", p.name)
        }
        _ => String::new(),
    }
}

/// True for a gateway router (`options:chassis` set).
fn is_gateway_router(r: &LogicalRouter) -> bool {
    r.options.get("chassis").is_some_and(|c| !c.is_empty())
}

fn opt_true(r: &LogicalRouter, key: &str) -> bool {
    r.options.get(key).is_some_and(|v| v == "true")
}

/// `always_learn_from_arp_request` (default true).
fn always_learn(r: &LogicalRouter) -> bool {
    r.options
        .get("always_learn_from_arp_request")
        .is_none_or(|v| v != "false")
}

/// Parses a NAT external IP (no prefix).
fn nat_external_ip(s: &str) -> Option<IpAddr> {
    parse_ip_net(s)
}

/// The ARP reply actions (shared by router IPs, NAT IPs and LB VIPs).
const ARP_REPLY: &str = "eth.dst = eth.src; eth.src = xreg0[0..47]; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = xreg0[0..47]; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;";

/// The ND NA reply actions for NAT IPs and LB VIPs.
const ND_NA_REPLY: &str = "nd_na { eth.src = xreg0[0..47]; ip6.src = nd.target; nd.tll = xreg0[0..47]; outport = inport; flags.loopback = 1; output; };";

/// A router's own flows in these stages.
pub fn router_dp(ctx: &Ctx, rt: usize, out: &mut Sink<'_>) {
    use Stage::*;
    let r = ctx.router(rt);
    let mcast_relay = opt_true(r, "mcast_relay");
    let learn = always_learn(r);

    out.add(LrInAdmission, 100, "vlan.present || eth.src[40]", "drop;");
    out.add(LrInAdmission, 0, "1", "drop;");

    if !learn {
        out.add(
        LrInLookupNeighbor,
        110,
        "nd_na && ip6.src == fe80::/10 && ip6.dst == ff00::/8",
        "reg9[2] = lookup_nd(inport, ip6.src, nd.tll); reg9[3] = lookup_nd_ip(inport, ip6.src); next;",
    );
    }
    if learn {
        out.add(
            LrInLookupNeighbor,
            100,
            "arp.op == 2",
            "reg9[2] = lookup_arp(inport, arp.spa, arp.sha); next;",
        );
        out.add(
            LrInLookupNeighbor,
            100,
            "nd_na",
            "reg9[2] = lookup_nd(inport, nd.target, nd.tll); next;",
        );
        out.add(
            LrInLookupNeighbor,
            100,
            "nd_ns",
            "reg9[2] = lookup_nd(inport, ip6.src, nd.sll); next;",
        );
    } else {
        out.add(
            LrInLookupNeighbor,
            100,
            "arp.op == 2",
            "reg9[2] = lookup_arp(inport, arp.spa, arp.sha); reg9[3] = 1; next;",
        );
        out.add(
            LrInLookupNeighbor,
            100,
            "nd_na",
            "reg9[2] = lookup_nd(inport, nd.target, nd.tll); reg9[3] = 1; next;",
        );
        out.add(
            LrInLookupNeighbor,
            100,
            "nd_ns",
            "reg9[2] = lookup_nd(inport, ip6.src, nd.sll); reg9[3] = lookup_nd_ip(inport, ip6.src); next;",
        );
    }
    out.add(LrInLookupNeighbor, 0, "1", "reg9[2] = 1; next;");

    out.add(
        LrInLearnNeighbor,
        100,
        if learn {
            "reg9[2] == 1"
        } else {
            "reg9[2] == 1 || reg9[3] == 0"
        },
        "next;",
    );
    out.add(
        LrInLearnNeighbor,
        95,
        "nd_na && nd.tll == 0",
        "put_nd(inport, nd.target, eth.src); next;",
    );
    out.add(
        LrInLearnNeighbor,
        95,
        "nd_ns && (ip6.src == 0 || nd.sll == 0)",
        "next;",
    );
    out.add(
        LrInLearnNeighbor,
        90,
        "arp",
        "put_arp(inport, arp.spa, arp.sha); next;",
    );
    out.add(
        LrInLearnNeighbor,
        90,
        "nd_na",
        "put_nd(inport, nd.target, nd.tll); next;",
    );
    out.add(
        LrInLearnNeighbor,
        90,
        "nd_ns",
        "put_nd(inport, ip6.src, nd.sll); next;",
    );
    out.add(LrInLearnNeighbor, 0, "1", "drop;");

    out.add(
        LrInIpInput,
        100,
        "ip4.src_mcast ||ip4.src == 255.255.255.255 || ip4.src == 127.0.0.0/8 || ip4.dst == 127.0.0.0/8 || ip4.src == 0.0.0.0/8 || ip4.dst == 0.0.0.0/8",
        "drop;",
    );
    out.add(LrInIpInput, 85, "arp || nd", "drop;");
    out.add(LrInIpInput, 84, "nd_rs || nd_ra", "next;");
    out.add(LrInIpInput, 83, "ip6.mcast_rsvd", "drop;");
    out.add(
        LrInIpInput,
        82,
        "ip4.mcast || ip6.mcast",
        if mcast_relay { "next;" } else { "drop;" },
    );
    out.add(LrInIpInput, 50, "eth.bcast", "drop;");
    out.add(
        LrInIpInput,
        32,
        "ip.ttl == {0, 1} && !ip.later_frag && (ip4.mcast || ip6.mcast)",
        "drop;",
    );
    out.add(LrInIpInput, 30, "ip.ttl == {0, 1}", "drop;");
    out.add(LrInIpInput, 0, "1", "next;");
    let flood = ctx.lr_index[rt].mcast_flood;
    if flood {
        out.add(LrInIpInput, 120, "igmp && ip.ttl == 1", "next;");
        out.add(LrInIpInput, 120, "(mldv1 || mldv2) && ip.ttl == 1", "next;");
    }

    out.add(LrInNdRaOptions, 0, "1", "next;");
    out.add(LrInNdRaResponse, 0, "1", "next;");

    out.add(LrInIpRoutingPre, 0, "1", "reg7 = 0; next;");
    out.add(LrInIpRouting, 10550, "nd_rs || nd_ra", "drop;");
    // Not yet: the 10500 registered-group flows (need SB IGMP_Group).
    if flood {
        out.add(
            LrInIpRouting,
            10460,
            "igmp",
            "clone { outport = \"_MC_static\"; next; };",
        );
        out.add(
            LrInIpRouting,
            10460,
            "mldv1 || mldv2",
            "clone { outport = \"_MC_static\"; next; };",
        );
        out.add(
            LrInIpRouting,
            10450,
            "ip4.mcast || ip6.mcast",
            "clone { outport = \"_MC_static\"; ip.ttl--; next; };",
        );
    } else if mcast_relay {
        // No router port floods: unregistered multicast drops.
        out.add(LrInIpRouting, 10450, "ip4.mcast || ip6.mcast", "drop;");
    }
    out.add(LrInIpRouting, 0, "1", "drop;");
    out.add(LrInIpRoutingEcmp, 150, "reg8[0..15] == 0", "next;");
    out.add(LrInIpRoutingEcmp, 0, "1", "drop;");

    out.add(LrInPolicy, 0, "1", "reg8[0..15] = 0; next;");
    out.add(LrInPolicyEcmp, 150, "reg8[0..15] == 0", "next;");
    out.add(LrInPolicyEcmp, 0, "1", "drop;");

    out.add(LrInArpResolve, 500, "ip4.mcast || ip6.mcast", "next;");
    out.add(LrInArpResolve, 1, "ip4", "get_arp(outport, reg0); next;");
    out.add(LrInArpResolve, 1, "ip6", "get_nd(outport, xxreg0); next;");
    out.add(LrInArpResolve, 0, "1", "drop;");

    out.add(LrInChkPktLen, 0, "1", "next;");
    out.add(LrInLargerPkts, 0, "1", "next;");
    out.add(LrInGwRedirect, 0, "1", "next;");
    // gateway_mtu and distributed gateway port flows are the ports' and NAT rules'.

    out.add(
        LrInArpRequest,
        100,
        "eth.dst == 00:00:00:00:00:00 && ip4",
        "arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };",
    );
    out.add(
        LrInArpRequest,
        100,
        "eth.dst == 00:00:00:00:00:00 && ip6",
        "nd_ns { nd.target = xxreg0; output; };",
    );
    out.add(LrInArpRequest, 0, "1", "output;");

    out.add(LrOutEgrLoop, 0, "1", "next;");
    out.add(LrOutDelivery, 0, "1", "drop;");

    lb_vip_arp(ctx, rt, out);
}

/// ARP replies for the router's load-balancer VIPs reachable from one of its ports: one
/// flow per port matching the router's `$_rtr_lb_K_ip4` address set.
fn lb_vip_arp(ctx: &Ctx, rt: usize, out: &mut Sink<'_>) {
    let (any4, any6) = ctx.lr_index[rt].lb_reach;
    if !any4 && !any6 {
        return;
    }
    let key = ctx.tunnel_keys[ctx.router_dp(rt).0 as usize];
    for p in &ctx.router(rt).ports {
        if any4 {
            out.add(
                Stage::LrInIpInput,
                90,
                format!(
                    "inport == \"{}\" && arp.op == 1 && arp.tpa == $_rtr_lb_{key}_ip4{}",
                    p.name,
                    resident_suffix(ctx, rt, p)
                ),
                ARP_REPLY,
            );
        }
        if any6 {
            out.add(
                Stage::LrInIpInput,
                90,
                format!(
                    "inport == \"{}\" && nd_ns && nd.target == $_rtr_lb_{key}_ip6{}",
                    p.name,
                    resident_suffix(ctx, rt, p)
                ),
                ND_NA_REPLY,
            );
        }
    }
}

use super::lb_vip_ip as vip_ip;

/// One NAT rule's flows in these stages (ARP replies for its external IP).
pub fn router_nat(ctx: &Ctx, rt: usize, nat: usize, out: &mut Sink<'_>) {
    let r = ctx.router(rt);
    let n = &r.nat[nat];
    let Some(ext) = nat_external_ip(&n.external_ip) else {
        return;
    };
    if let Some(g) = ctx.lr_index[rt].dgp {
        dgp_nat(ctx, rt, g, n, ext, out);
    }
    match ext {
        IpAddr::V4(a) => out.add(
            Stage::LrInIpInput,
            90,
            format!("arp.op == 1 && arp.tpa == {a}"),
            ARP_REPLY,
        ),
        IpAddr::V6(a) => out.add(
            Stage::LrInIpInput,
            90,
            format!(
                "ip6.dst == {{{a}, {}}} && nd_ns && nd.target == {a}",
                solicited_node(a)
            ),
            ND_NA_REPLY,
        ),
    }
}

/// A NAT rule's flows on a router with a distributed gateway port `g`.
fn dgp_nat(ctx: &Ctx, rt: usize, g: usize, n: &crate::nb::Nat, ext: IpAddr, out: &mut Sink<'_>) {
    use Stage::*;
    let IpAddr::V4(a) = ext else {
        // Not yet: IPv6 NAT on distributed gateway ports.
        return;
    };
    // Not yet: several DGPs (the NAT's gateway_port column), stateless NAT and
    // allowed/exempted external IPs.
    let gp = ctx.lrp(rt, g);
    let gname = &gp.name;
    let Some(gmac) = ctx.lrp_networks[rt][g].as_ref().and_then(|x| x.mac) else {
        return;
    };
    let ext_mac = n.external_mac.as_deref().and_then(crate::addr::Mac::parse);
    let distributed = n.kind == "dnat_and_snat" && n.logical_port.is_some() && ext_mac.is_some();
    let resident = match (&n.logical_port, distributed) {
        (Some(lp), true) => format!("is_chassis_resident(\"{lp}\")"),
        _ => format!("is_chassis_resident(\"cr-{gname}\")"),
    };
    if let (true, Some(m)) = (distributed, ext_mac) {
        out.add(
            LrInAdmission,
            50,
            format!("eth.dst == {m} && inport == \"{gname}\" && {resident}"),
            format!("xreg0[0..47] = {gmac}; next;"),
        );
    }
    let (reply, mac) = match (distributed, ext_mac) {
        (true, Some(m)) => (
            format!(
                "eth.dst = eth.src; eth.src = {m}; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = {m}; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;"
            ),
            m,
        ),
        _ => (ARP_REPLY.to_string(), gmac),
    };
    out.add(
        LrInIpInput,
        92,
        format!("inport == \"{gname}\" && arp.op == 1 && arp.tpa == {a} && {resident}"),
        reply,
    );
    out.add(
        LrInIpInput,
        91,
        format!("inport == \"{gname}\" && arp.op == 1 && arp.tpa == {a}"),
        "drop;",
    );
    if n.kind == "snat" {
        out.add(
            LrInIpInput,
            120,
            format!("inport == \"{gname}\" && ip4.src == {a}"),
            "next;",
        );
    }
    let in_subnet = ctx.lrp_networks[rt].iter().flatten().any(|x| {
        x.ipv4.iter().any(|y| {
            Ipv4Net {
                addr: a,
                plen: y.plen,
            }
            .network()
                == y.network()
        })
    });
    if in_subnet || n.options.get("add_route").is_some_and(|v| v == "true") {
        out.add(
            LrInArpResolve,
            100,
            format!("outport == \"{gname}\" && reg0 == {a}"),
            format!("eth.dst = {mac}; next;"),
        );
        out.add(
            LrInArpResolve,
            150,
            format!("inport == \"{gname}\" && outport == \"{gname}\" && ip4.dst == {a}"),
            "drop;",
        );
    }
    if let (true, Some(m), Some(IpAddr::V4(li))) =
        (distributed, ext_mac, parse_ip_net(&n.logical_ip))
    {
        out.add(
            LrInGwRedirect,
            100,
            format!("ip4.src == {li} && outport == \"{gname}\" && {resident}"),
            format!("eth.src = {m}; reg1 = {a}; next;"),
        );
    }
    out.add(
        LrOutEgrLoop,
        100,
        format!("ip4.dst == {a} && outport == \"{gname}\" && {resident}"),
        "clone { ct_clear; inport = outport; outport = \"\"; eth.dst <-> eth.src; flags = 0; flags.loopback = 1; flags.use_snat_zone = reg9[4]; reg0 = 0; reg1 = 0; reg2 = 0; reg3 = 0; reg4 = 0; reg5 = 0; reg6 = 0; reg7 = 0; reg8 = 0; reg9 = 0; reg9[0] = 1; next(pipeline=ingress, table=0); };",
    );
}

/// One load balancer's flows in these stages: none of its own (the VIP ARP replies are
/// aggregated per router in [`router_dp`]).
pub fn router_lb(_ctx: &Ctx, _rt: usize, _lb: &LoadBalancer, _out: &mut Sink<'_>) {}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::build::build_serial;
    use crate::nb::{LogicalSwitch, Lrp, Lsp, StaticRoute};

    fn lrp(name: &str, mac: &str, net: &str) -> Lrp {
        Lrp {
            uuid: ovsdb::Uuid::default(),
            name: name.into(),
            mac: mac.into(),
            networks: vec![net.into()],
            peer: None,
            options: Default::default(),
            enabled: None,
            gateway_chassis: vec![],
            ha_chassis_group: None,
            row: Default::default(),
        }
    }

    fn lsp(name: &str, kind: &str, addr: &str, rp: Option<&str>) -> Lsp {
        Lsp {
            uuid: ovsdb::Uuid::default(),
            name: name.into(),
            kind: kind.into(),
            addresses: vec![addr.into()],
            port_security: vec![],
            options: rp
                .map(|r| [("router-port".to_string(), r.to_string())].into())
                .unwrap_or_default(),
            enabled: None,
            up: None,
            external_ids: Default::default(),
            row: Default::default(),
        }
    }

    fn route(prefix: &str, nh: &str, policy: Option<&str>) -> StaticRoute {
        StaticRoute {
            uuid: ovsdb::Uuid::default(),
            ip_prefix: prefix.into(),
            nexthop: nh.into(),
            policy: policy.map(Into::into),
            output_port: None,
            route_table: String::new(),
            options: Default::default(),
            row: Default::default(),
        }
    }

    /// One router `R` (gateway router when `chassis`) with port `rp` (10.0.0.1/24) on
    /// switch `S`, which has a VIF 10.0.0.5, and the given static routes.
    fn net(chassis: bool, routes: Vec<StaticRoute>) -> Nb {
        let mut options = crate::nb::Smap::new();
        if chassis {
            options.insert("chassis".into(), "ch1".into());
        }
        Nb {
            switches: vec![std::sync::Arc::new(LogicalSwitch {
                uuid: ovsdb::Uuid::default(),
                name: "S".into(),
                ports: vec![
                    lsp("s-r", "router", "router", Some("rp")),
                    lsp("vm", "", "0a:00:00:00:00:05 10.0.0.5", None),
                ],
                acls: vec![],
                load_balancer: vec![],
                load_balancer_group: vec![],
                other_config: Default::default(),
                external_ids: Default::default(),
                row: Default::default(),
            })],
            routers: vec![std::sync::Arc::new(LogicalRouter {
                uuid: ovsdb::Uuid::default(),
                name: "R".into(),
                ports: vec![lrp("rp", "0a:00:00:00:00:01", "10.0.0.1/24")],
                static_routes: routes,
                policies: vec![],
                nat: vec![],
                load_balancer: vec![],
                load_balancer_group: vec![],
                enabled: None,
                options,
                external_ids: Default::default(),
                row: Default::default(),
            })],
            ..Default::default()
        }
    }

    /// The router's flows in `stage` as `priority match => actions`.
    fn flows(nb: &Nb, stage: Stage) -> Vec<String> {
        let ctx = Ctx::new(nb.clone());
        build_serial(&ctx)
            .into_iter()
            .filter(|f| f.stage == stage)
            .map(|f| format!("{} {} => {}", f.priority, f.match_, f.actions))
            .collect()
    }

    #[test]
    fn gateway_router_has_no_unreachables_but_time_exceeded() {
        let g = flows(&net(true, vec![]), Stage::LrInIpInput);
        assert!(
            !g.iter()
                .any(|f| f.starts_with("80 ") || f.starts_with("70 "))
        );
        assert!(g.contains(&"31 inport == \"rp\" && ip4 && ip.ttl == {0, 1} && !ip.later_frag => icmp4 {eth.dst <-> eth.src; icmp4.type = 11; /* Time exceeded */ icmp4.code = 0; /* TTL exceeded in transit */ ip4.dst = ip4.src; ip4.src = 10.0.0.1 ; ip.ttl = 254; outport = \"rp\"; flags.loopback = 1; output; };".to_string()));
        let d = flows(&net(false, vec![]), Stage::LrInIpInput);
        assert!(d.contains(&"70 ip4 && ip4.dst == 10.0.0.1 && !ip.later_frag => icmp4 {eth.dst <-> eth.src; ip4.dst <-> ip4.src; ip.ttl = 255; icmp4.type = 3; icmp4.code = 2; next; };".to_string()));
        assert!(d.contains(&"60 ip4.dst == {10.0.0.1} => drop;".to_string()));
    }

    #[test]
    fn routes_priorities_and_resolve() {
        let nb = net(
            false,
            vec![
                route("10.0.0.0/24", "10.0.0.9", Some("src-ip")),
                route("192.168.0.0/16", "10.0.0.7", None),
                route("192.168.0.0/16", "10.0.0.8", None),
            ],
        );
        let r = flows(&nb, Stage::LrInIpRouting);
        assert!(r.contains(&"74 ip4.dst == 10.0.0.0/24 => ip.ttl--; reg8[0..15] = 0; reg0 = ip4.dst; reg1 = 10.0.0.1; eth.src = 0a:00:00:00:00:01; outport = \"rp\"; flags.loopback = 1; next;".to_string()));
        assert!(r.contains(&"72 ip4.src == 10.0.0.0/24 => ip.ttl--; reg8[0..15] = 0; reg0 = 10.0.0.9; reg1 = 10.0.0.1; eth.src = 0a:00:00:00:00:01; outport = \"rp\"; flags.loopback = 1; next;".to_string()));
        assert!(r.contains(&"49 reg7 == 0 && ip4.dst == 192.168.0.0/16 => ip.ttl--; flags.loopback = 1; reg8[0..15] = 1; reg8[16..31] = select(1, 2);".to_string()));
        let e = flows(&nb, Stage::LrInIpRoutingEcmp);
        assert!(e.contains(&"100 reg8[0..15] == 1 && reg8[16..31] == 2 => reg0 = 10.0.0.8; reg1 = 10.0.0.1; eth.src = 0a:00:00:00:00:01; outport = \"rp\"; next;".to_string()));
        let a = flows(&nb, Stage::LrInArpResolve);
        assert!(
            a.contains(
                &"100 outport == \"rp\" && reg0 == 10.0.0.5 => eth.dst = 0a:00:00:00:00:05; next;"
                    .to_string()
            )
        );
    }

    #[test]
    fn solicited() {
        let a: Ipv6Addr = "fe80::858:64ff:fe40:1".parse().unwrap();
        assert_eq!(solicited_node(a).to_string(), "ff02::1:ff40:1");
    }

    #[test]
    fn vips() {
        assert_eq!(vip_ip("172.30.0.1:80"), Some("172.30.0.1".parse().unwrap()));
        assert_eq!(vip_ip("172.30.0.1"), Some("172.30.0.1".parse().unwrap()));
        assert_eq!(vip_ip("[fd00::1]:80"), Some("fd00::1".parse().unwrap()));
    }
}
