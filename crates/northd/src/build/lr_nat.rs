//! Logical router NAT and load-balancing stages: unSNAT, defrag, LB affinity, DNAT, ECMP
//! stateful; egress chk_dnat_local, unDNAT, post-unDNAT, SNAT, post-SNAT.
//!
//! Two router flavours matter here:
//!
//! * gateway routers (`options:chassis` set): NAT in one zone, `ct_snat`/`ct_dnat`, force-SNAT
//!   options (`lb_force_snat_ip`, `dnat_force_snat_ip`; `lb_force_snat_ip=router_ip` gives
//!   per-port flows, only on ports that have a peer), SNAT priorities `plen + 1`;
//! * distributed routers with distributed gateway ports: each NAT rule is pinned to one gateway
//!   port GW (its `gateway_port`, else the one whose networks hold the external IP) with
//!   `is_chassis_resident("cr-GW")` (or of the NAT's `logical_port` when the rule is
//!   distributed, i.e. has `logical_port` and `external_mac`), `*_in_czone` actions, SNAT
//!   priorities `plen + 1 + 128`; load balancers use the first gateway port.
//!
//! A distributed router without a gateway port gets no NAT flows (its load balancers still get
//! DNAT flows). Where ovn-northd's output and the ovn-northd(8) text disagree (e.g. exempted
//! IP priorities, force-SNAT unSNAT priority 110), this follows the output.
//!
//! Not yet: ECMP symmetric-reply routes (`lr_in_defrag`/`lr_in_ecmp_stateful` priority 100:
//! they need port tunnel keys and route grouping); LB health checks (service monitor status
//! filtering of backends).

use super::Ctx;
use crate::addr::{parse_ipv4_net, parse_ipv6_net};
use crate::lflow::Sink;
use crate::nb::{LoadBalancer, LogicalRouter, Lrp, Nat};
use crate::stage::Stage;
use std::fmt::Write as _;
use std::net::IpAddr;

/// Bit set in `lr_out_chk_dnat_local` when the DNAT IP is local.
const DST_NAT_LOCAL: &str = "reg9[4]";

fn is_gateway_router(r: &LogicalRouter) -> bool {
    r.options.get("chassis").is_some_and(|c| !c.is_empty())
}

/// The router's first distributed gateway port (the one its load balancers use).
fn gateway_port(ctx: &Ctx, rt: usize) -> Option<&Lrp> {
    ctx.router_dgps[rt].first().map(|&j| ctx.lrp(rt, j))
}

/// The distributed gateway port a NAT rule uses: its `gateway_port`, else the one whose
/// networks hold the external IP, else the only one.
fn nat_gateway_port<'c>(ctx: &'c Ctx, rt: usize, n: &Nat, ext: IpAddr) -> Option<&'c Lrp> {
    let dgps = &ctx.router_dgps[rt];
    if let Some(u) = n.row.uuids("gateway_port").next() {
        return dgps.iter().map(|&j| ctx.lrp(rt, j)).find(|p| p.uuid == u);
    }
    if dgps.len() == 1 {
        return Some(ctx.lrp(rt, dgps[0]));
    }
    dgps.iter().copied().find_map(|j| {
        let nets = ctx.lrp_networks[rt][j].as_ref()?;
        let hit = match ext {
            IpAddr::V4(a) => nets.ipv4.iter().any(|n| {
                let m = u32::from(n.mask());
                u32::from(a) & m == u32::from(n.network())
            }),
            IpAddr::V6(a) => nets.ipv6.iter().any(|n| {
                crate::addr::Ipv6Net {
                    addr: a,
                    plen: n.plen,
                }
                .network()
                    == n.network()
            }),
        };
        hit.then(|| ctx.lrp(rt, j))
    })
}

/// True when some load balancer applied to router `rt` has a VIP.
fn has_lb_vips(ctx: &Ctx, rt: usize) -> bool {
    ctx.router_lbs[rt]
        .iter()
        .any(|u| ctx.nb.lbs.get(u).is_some_and(|lb| !lb.vips.is_empty()))
}

fn ipv(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "ip4" } else { "ip6" }
}

/// A router's own flows in these stages.
pub fn router_dp(ctx: &Ctx, rt: usize, out: &mut Sink<'_>) {
    use Stage::*;
    let r = ctx.router(rt);
    for st in [
        LrInUnsnat,
        LrInDefrag,
        LrInLbAffCheck,
        LrInDnat,
        LrInLbAffLearn,
        LrInEcmpStateful,
        LrOutUndnat,
        LrOutPostUndnat,
        LrOutSnat,
        LrOutPostSnat,
    ] {
        out.add(st, 0, "1", "next;");
    }
    out.add(
        LrOutChkDnatLocal,
        0,
        "1",
        format!("{DST_NAT_LOCAL} = 0; next;"),
    );
    out.add(LrOutSnat, 120, "nd_ns", "next;");

    let gr = is_gateway_router(r);
    let has_lb = has_lb_vips(ctx, rt);
    let has_nat = !r.nat.is_empty();
    if has_lb {
        for (m, a) in [
            (
                "ct.est && !ct.rel && !ct.new && ct_mark.natted && ct_mark.force_snat == 1",
                "flags.force_snat_for_lb = 1; next;",
            ),
            (
                "ct.est && !ct.rel && !ct.new && ct_mark.natted && ct_mark.skip_snat == 1",
                "flags.skip_snat_for_lb = 1; next;",
            ),
            (
                "ct.rel && !ct.est && !ct.new && ct_mark.force_snat == 1",
                "flags.force_snat_for_lb = 1; ct_commit_nat;",
            ),
            (
                "ct.rel && !ct.est && !ct.new && ct_mark.skip_snat == 1",
                "flags.skip_snat_for_lb = 1; ct_commit_nat;",
            ),
        ] {
            out.add(LrInDnat, 70, m, a);
        }
        out.add(
            LrInDnat,
            50,
            "ct.est && !ct.rel && !ct.new && ct_mark.natted",
            "next;",
        );
        out.add(
            LrInDnat,
            50,
            "ct.rel && !ct.est && !ct.new",
            "ct_commit_nat;",
        );
    }
    if gr && (has_nat || has_lb) {
        out.add(LrOutUndnat, 100, "nd || nd_rs || nd_ra", "next;");
        out.add(LrOutUndnat, 50, "ip", "flags.loopback = 1; ct_dnat;");
        out.add(
            LrOutPostUndnat,
            50,
            "ip && ct.new",
            "ct_commit { } ; next; ",
        );
    }
    if has_nat && (gr || !ctx.router_dgps[rt].is_empty()) {
        out.add(
            LrOutChkDnatLocal,
            50,
            "ip && ct_mark.natted == 1",
            format!("{DST_NAT_LOCAL} = 1; next;"),
        );
    }
    if gr {
        for (opt, flag) in [
            ("lb_force_snat_ip", "force_snat_for_lb"),
            ("dnat_force_snat_ip", "force_snat_for_dnat"),
        ] {
            let Some(v) = r.options.get(opt) else {
                continue;
            };
            if v == "router_ip" {
                continue;
            }
            for ip in first_v4_v6(v.split_whitespace()) {
                let f = ipv(ip);
                out.add(
                    LrInUnsnat,
                    110,
                    format!("{f} && {f}.dst == {ip}"),
                    "ct_snat;",
                );
                out.add(
                    LrOutSnat,
                    100,
                    format!("flags.{flag} == 1 && {f}"),
                    format!("ct_snat({ip});"),
                );
            }
        }
    }
}

/// The first IPv4 and the first IPv6 address among `words` (bad ones skipped).
fn first_v4_v6<'a>(words: impl Iterator<Item = &'a str>) -> Vec<IpAddr> {
    let (mut v4, mut v6) = (None, None);
    for w in words {
        match w.parse::<IpAddr>() {
            Ok(ip @ IpAddr::V4(_)) if v4.is_none() => v4 = Some(ip),
            Ok(ip @ IpAddr::V6(_)) if v6.is_none() => v6 = Some(ip),
            _ => {}
        }
    }
    v4.into_iter().chain(v6).collect()
}

/// One router port's flows in these stages: the per-port force-SNAT flows of a gateway
/// router with `options:lb_force_snat_ip=router_ip` (only for ports attached to a peer).
pub fn router_port(ctx: &Ctx, rt: usize, port: usize, out: &mut Sink<'_>) {
    let r = ctx.router(rt);
    if !is_gateway_router(r)
        || r.options.get("lb_force_snat_ip").map(String::as_str) != Some("router_ip")
    {
        return;
    }
    let p = ctx.lrp(rt, port);
    if ctx.lrp_switch_peer[rt][port].is_none() && p.peer.is_none() {
        return;
    }
    let Some(nets) = &ctx.lrp_networks[rt][port] else {
        return;
    };
    let v4 = nets.ipv4.first().map(|n| IpAddr::V4(n.addr));
    let v6 = nets.ipv6.first().map(|n| IpAddr::V6(n.addr));
    for ip in v4.into_iter().chain(v6) {
        let f = ipv(ip);
        out.add(
            Stage::LrInUnsnat,
            110,
            format!("inport == \"{}\" && {f}.dst == {ip}", p.name),
            "ct_snat;",
        );
        out.add(
            Stage::LrOutSnat,
            110,
            format!(
                "flags.force_snat_for_lb == 1 && {f} && outport == \"{}\"",
                p.name
            ),
            format!("ct_snat({ip});"),
        );
    }
}

/// A NAT rule's addresses, parsed.
struct NatAddrs {
    ext: IpAddr,
    /// The logical IP as printed in matches (`A` or `NET/PLEN`).
    logical: String,
    /// The logical IP alone (for DNAT targets).
    logical_ip: IpAddr,
    plen: u8,
}

fn parse_nat(n: &Nat) -> Option<NatAddrs> {
    let ext: IpAddr = n.external_ip.parse().ok()?;
    // (address, prefix length, host prefix length, network) of the logical side.
    let (addr, plen, host, network) = match ext {
        IpAddr::V4(_) => {
            let l = parse_ipv4_net(&n.logical_ip)?;
            (IpAddr::V4(l.addr), l.plen, 32, IpAddr::V4(l.network()))
        }
        IpAddr::V6(_) => {
            let l = parse_ipv6_net(&n.logical_ip)?;
            (IpAddr::V6(l.addr), l.plen, 128, IpAddr::V6(l.network()))
        }
    };
    if n.kind != "snat" && plen != host {
        return None;
    }
    let logical = if plen == host {
        addr.to_string()
    } else {
        format!("{network}/{plen}")
    };
    Some(NatAddrs {
        ext,
        logical,
        logical_ip: addr,
        plen,
    })
}

/// The name of the address set a NAT column (`allowed_ext_ips`, `exempted_ext_ips`) refers to.
fn nat_address_set<'c>(ctx: &'c Ctx, n: &Nat, col: &str) -> Option<&'c str> {
    let u = n.row.uuids(col).next()?;
    ctx.nb
        .address_sets
        .iter()
        .find(|a| a.uuid == u)
        .map(|a| a.name.as_str())
}

/// One NAT rule's flows.
pub fn router_nat(ctx: &Ctx, rt: usize, nat: usize, out: &mut Sink<'_>) {
    use Stage::*;
    let r = ctx.router(rt);
    let n = &r.nat[nat];
    let (is_snat, is_dnat) = match n.kind.as_str() {
        "snat" => (true, false),
        "dnat" => (false, true),
        "dnat_and_snat" => (true, true),
        _ => return,
    };
    let Some(a) = parse_nat(n) else {
        return;
    };
    let gr = is_gateway_router(r);
    let gw = if gr {
        None
    } else {
        nat_gateway_port(ctx, rt, n, a.ext)
    };
    if !gr && gw.is_none() {
        return;
    }
    let stateless =
        n.kind == "dnat_and_snat" && n.options.get("stateless").map(String::as_str) == Some("true");
    let f = ipv(a.ext);
    let ext = a.ext;
    let lip = &a.logical;
    let range = if n.external_port_range.is_empty() {
        String::new()
    } else {
        format!(",{}", n.external_port_range)
    };
    let allowed = nat_address_set(ctx, n, "allowed_ext_ips");
    let exempted = if allowed.is_none() {
        nat_address_set(ctx, n, "exempted_ext_ips")
    } else {
        None
    };
    let force_dnat = gr && r.options.contains_key("dnat_force_snat_ip");

    let Some(gw) = gw else {
        // Gateway router.
        if is_snat {
            out.add(
                LrInUnsnat,
                90,
                format!("ip && {f}.dst == {ext}"),
                if stateless { "next;" } else { "ct_snat;" },
            );
        }
        if is_dnat {
            let mut m = format!("ip && {f}.dst == {ext}");
            if let Some(s) = allowed {
                let _ = write!(m, " && {f}.src == ${s}");
            }
            let mut act = String::new();
            if force_dnat {
                act.push_str("flags.force_snat_for_dnat = 1; ");
            }
            act.push_str("flags.loopback = 1; ");
            if stateless {
                let _ = write!(act, "{f}.dst={}; next;", a.logical_ip);
            } else {
                let _ = write!(act, "ct_dnat({}{range});", a.logical_ip);
            }
            out.add(LrInDnat, 100, m, act);
            if let Some(s) = exempted {
                out.add(
                    LrInDnat,
                    102,
                    format!("ip && {f}.dst == {ext} && {f}.src == ${s}"),
                    "next;",
                );
            }
        }
        if is_snat {
            let prio = a.plen as u16 + 1;
            let mut m = format!("ip && {f}.src == {lip}");
            if let Some(s) = allowed {
                let _ = write!(m, " && {f}.dst == ${s}");
            }
            if stateless {
                out.add(LrOutSnat, prio, m, format!("{f}.src={ext}; next;"));
            } else {
                m.push_str(" && (!ct.trk || !ct.rpl)");
                out.add(LrOutSnat, prio, m, format!("ct_snat({ext}{range});"));
            }
            if let Some(s) = exempted {
                out.add(
                    LrOutSnat,
                    prio + 2,
                    format!("ip && {f}.src == {lip} && {f}.dst == ${s}"),
                    "next;",
                );
            }
        }
        return;
    };

    // Distributed router with gateway port `gw`.
    let gwn = &gw.name;
    let distributed = n.kind == "dnat_and_snat"
        && n.logical_port.is_some()
        && n.external_mac
            .as_deref()
            .is_some_and(|m| crate::addr::Mac::parse(m).is_some());
    let (resident, eth_src) = if distributed {
        (
            String::new(),
            format!(
                "eth.src = {}; ",
                n.external_mac.as_deref().unwrap_or_default()
            ),
        )
    } else {
        (
            format!(" && is_chassis_resident(\"cr-{gwn}\")"),
            String::new(),
        )
    };
    let chk_resident = match (distributed, &n.logical_port) {
        (true, Some(lp)) => format!("is_chassis_resident(\"{lp}\")"),
        _ => format!("is_chassis_resident(\"cr-{gwn}\")"),
    };
    out.add(
        LrOutChkDnatLocal,
        50,
        format!("ip && {f}.dst == {ext} && {chk_resident}"),
        format!("{DST_NAT_LOCAL} = 1; next;"),
    );
    if is_snat {
        out.add(
            LrInUnsnat,
            100,
            format!(
                "ip && {f}.dst == {ext} && inport == \"{gwn}\" && flags.loopback == 0{resident}"
            ),
            if stateless {
                "next;"
            } else {
                "ct_snat_in_czone;"
            },
        );
        if !stateless {
            out.add(
                LrInUnsnat,
                100,
                format!(
                    "ip && {f}.dst == {ext} && inport == \"{gwn}\" && flags.loopback == 1 && flags.use_snat_zone == 1{resident}"
                ),
                "ct_snat;",
            );
        }
    }
    if is_dnat {
        let base = format!("ip && {f}.dst == {ext} && inport == \"{gwn}\"{resident}");
        let mut m = base.clone();
        if let Some(s) = allowed {
            let _ = write!(m, " && {f}.src == ${s}");
        }
        let act = if stateless {
            format!("{f}.dst={}; next;", a.logical_ip)
        } else {
            format!("ct_dnat_in_czone({}{range});", a.logical_ip)
        };
        out.add(LrInDnat, 100, m, act);
        if let Some(s) = exempted {
            out.add(LrInDnat, 102, format!("{base} && {f}.src == ${s}"), "next;");
        }
        out.add(
            LrOutUndnat,
            100,
            format!(
                "ip && {f}.src == {} && outport == \"{gwn}\"{resident}",
                a.logical_ip
            ),
            if stateless {
                format!("{eth_src}next;")
            } else {
                format!("{eth_src}ct_dnat_in_czone;")
            },
        );
    }
    if is_snat {
        let prio = a.plen as u16 + 1 + 128;
        let chk = if distributed {
            format!(" && {chk_resident}")
        } else {
            resident.clone()
        };
        let base = format!("ip && {f}.src == {lip} && outport == \"{gwn}\"{chk}");
        let mut m = base.clone();
        if let Some(s) = allowed {
            let _ = write!(m, " && {f}.dst == ${s}");
        }
        if stateless {
            out.add(LrOutSnat, prio, m, format!("{eth_src}{f}.src={ext}; next;"));
        } else {
            out.add(
                LrOutSnat,
                prio,
                m.clone(),
                format!("{eth_src}ct_snat_in_czone({ext}{range});"),
            );
            out.add(
                LrOutSnat,
                prio + 1,
                format!("{m} && {DST_NAT_LOCAL} == 1"),
                format!("{eth_src}{DST_NAT_LOCAL} = 0; ct_snat({ext}{range});"),
            );
        }
        if let Some(s) = exempted {
            out.add(
                LrOutSnat,
                prio + 2,
                format!("{base} && {f}.dst == ${s}"),
                "next;",
            );
        }
    }
}

/// A VIP or backend: address and optional L4 port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Endpoint {
    ip: IpAddr,
    port: Option<u16>,
}

impl Endpoint {
    /// Parses `A`, `A:P`, `V6`, `[V6]` or `[V6]:P`.
    fn parse(s: &str) -> Option<Endpoint> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix('[') {
            let (a, tail) = rest.split_once(']')?;
            let ip = IpAddr::V6(a.parse().ok()?);
            let port = match tail {
                "" => None,
                t => Some(t.strip_prefix(':')?.parse().ok()?),
            };
            return Some(Endpoint { ip, port });
        }
        match s.matches(':').count() {
            0 => Some(Endpoint {
                ip: IpAddr::V4(s.parse().ok()?),
                port: None,
            }),
            1 => {
                let (a, p) = s.split_once(':')?;
                Some(Endpoint {
                    ip: IpAddr::V4(a.parse().ok()?),
                    port: Some(p.parse().ok()?),
                })
            }
            _ => Some(Endpoint {
                ip: IpAddr::V6(s.parse().ok()?),
                port: None,
            }),
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.ip, self.port) {
            (ip, None) => write!(f, "{ip}"),
            (IpAddr::V4(ip), Some(p)) => write!(f, "{ip}:{p}"),
            (IpAddr::V6(ip), Some(p)) => write!(f, "[{ip}]:{p}"),
        }
    }
}

/// Parses a VIP's backend list; `None` when malformed or inconsistent with the VIP.
fn parse_backends(vip: Endpoint, s: &str) -> Option<Vec<Endpoint>> {
    let mut v = Vec::new();
    for b in s.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        let e = Endpoint::parse(b)?;
        if e.ip.is_ipv4() != vip.ip.is_ipv4() || e.port.is_some() != vip.port.is_some() {
            return None;
        }
        v.push(e);
    }
    Some(v)
}

fn join_backends(bs: &[Endpoint]) -> String {
    let mut s = String::new();
    for (i, b) in bs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{b}");
    }
    s
}

/// One load balancer's flows on a router.
pub fn router_lb(ctx: &Ctx, rt: usize, lb: &LoadBalancer, out: &mut Sink<'_>) {
    use Stage::*;
    let r = ctx.router(rt);
    let gr = is_gateway_router(r);
    let gw = if gr { None } else { gateway_port(ctx, rt) };
    let proto = lb.protocol.as_deref().unwrap_or("tcp");
    let opt_true = |k: &str| lb.options.get(k).map(String::as_str) == Some("true");
    let skip_snat = opt_true("skip_snat");
    let reject = opt_true("reject");
    // `router_ip` only means something on gateway routers; explicit IPs force SNAT on any
    // router (the SNAT flows themselves exist on gateway routers only).
    let force_snat = !skip_snat
        && match r.options.get("lb_force_snat_ip").map(String::as_str) {
            None => false,
            Some("router_ip") => gr,
            Some(_) => true,
        };
    let (flag_pre, ct_suffix) = if skip_snat {
        ("flags.skip_snat_for_lb = 1; ", "; skip_snat")
    } else if force_snat {
        ("flags.force_snat_for_lb = 1; ", "; force_snat")
    } else {
        ("", "")
    };
    let affinity: u32 = lb
        .options
        .get("affinity_timeout")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let resident = gw
        .map(|g| format!(" && is_chassis_resident(\"cr-{}\")", g.name))
        .unwrap_or_default();
    let nat_ips = &ctx.router_nat_ips[rt];
    let controller_event = ctx
        .nb
        .global_options
        .get("controller_event")
        .is_some_and(|v| v == "true");
    let hash = if lb.selection_fields.is_empty() {
        String::new()
    } else {
        let mut f = lb.selection_fields.clone();
        f.sort();
        let f: Vec<String> = f
            .iter()
            .map(|x| match x.strip_prefix("tp_") {
                Some(rest) => format!("{proto}_{rest}"),
                None => x.clone(),
            })
            .collect();
        format!("; hash_fields=\"{}\"", f.join(","))
    };
    let mut any = false;
    for (k, v) in &lb.vips {
        let Some(vip) = Endpoint::parse(k) else {
            continue;
        };
        let Some(backends) = parse_backends(vip, v) else {
            continue;
        };
        any = true;
        let f = ipv(vip.ip);
        let ip = vip.ip;
        out.add(
            LrInDefrag,
            100,
            format!("ip && {f}.dst == {ip}"),
            "ct_dnat;",
        );
        let (prio, l4) = match vip.port {
            Some(p) => (120, format!(" && {proto} && {proto}.dst == {p}")),
            None => (110, String::new()),
        };
        if nat_ips.contains(&ip) {
            let pdst = vip
                .port
                .map(|p| format!(" && {proto}.dst == {p}"))
                .unwrap_or_default();
            out.add(
                LrInUnsnat,
                120,
                format!("{f} && {f}.dst == {ip} && {proto}{pdst}"),
                "next;",
            );
        }
        let m = format!("ct.new && !ct.rel && {f} && {f}.dst == {ip}{l4}");
        let bl = join_backends(&backends);
        if backends.is_empty() && !reject && controller_event {
            let vm = match vip.port {
                Some(p) => format!("{f}.dst == {ip} && {proto} && {proto}.dst == {p}"),
                None => format!("{f}.dst == {ip} && {proto}"),
            };
            out.add(
                LrInDnat,
                130,
                vm,
                format!(
                    "trigger_event(event = \"empty_lb_backends\", vip = \"{vip}\", protocol = \"{proto}\", load_balancer = \"{}\");",
                    lb.uuid
                ),
            );
        }
        let act = if backends.is_empty() {
            if reject {
                format!(
                    "{flag_pre}reg0 = 0; reject {{ outport <-> inport; next(pipeline=egress,table={});}};",
                    LrOutSnat.table()
                )
            } else {
                format!("{flag_pre}drop;")
            }
        } else {
            format!("{flag_pre}ct_lb_mark(backends={bl}{hash}{ct_suffix});")
        };
        out.add(LrInDnat, prio, format!("{m}{resident}"), act);

        if let (Some(vport), true) = (vip.port, affinity > 0 && !backends.is_empty()) {
            let (reg, xreg_b) = if vip.ip.is_ipv4() {
                ("reg0", "reg4")
            } else {
                ("xxreg0", "xxreg1")
            };
            out.add(
                LrInLbAffCheck,
                100,
                m.clone(),
                format!(
                    "{reg} = {f}.dst; reg9[16..31] = {proto}.dst; reg9[6] = chk_lb_aff(); next;"
                ),
            );
            for b in &backends {
                let bport = b.port.unwrap_or(0);
                out.add(
                    LrInDnat,
                    150,
                    format!(
                        "reg9[6] == 1 && ct.new && {f} && {xreg_b} == {} && reg8[0..15] == {bport}",
                        b.ip
                    ),
                    format!("{reg} = {ip}; {flag_pre}ct_lb_mark(backends={b}{ct_suffix});"),
                );
                out.add(
                    LrInLbAffLearn,
                    100,
                    format!(
                        "reg9[6] == 0 && ct.new && {f} && {reg} == {ip} && reg9[16..31] == {vport} && {f}.dst == {} && {proto}.dst == {bport}",
                        b.ip
                    ),
                    format!(
                        "commit_lb_aff(vip = \"{vip}\", backend = \"{b}\", proto = {proto}, timeout = {affinity}); /* drop */"
                    ),
                );
            }
        }

        if let Some(g) = gw
            && !backends.is_empty()
        {
            let mut alts = String::new();
            for (i, b) in backends.iter().enumerate() {
                if i > 0 {
                    alts.push_str(" || ");
                }
                match b.port {
                    Some(p) => {
                        let _ = write!(alts, "({f}.src == {} && {proto}.src == {p})", b.ip);
                    }
                    None => {
                        let _ = write!(alts, "({f}.src == {})", b.ip);
                    }
                }
            }
            let act = if skip_snat {
                "flags.skip_snat_for_lb = 1; next;"
            } else if force_snat {
                "flags.force_snat_for_lb = 1; next;"
            } else {
                "ct_dnat_in_czone;"
            };
            out.add(
                LrOutUndnat,
                120,
                format!("{f} && ({alts}) && outport == \"{}\"{resident}", g.name),
                act,
            );
        }
    }
    if any && skip_snat {
        out.add(LrOutSnat, 120, "flags.skip_snat_for_lb == 1 && ip", "next;");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{Item, build_item};
    use crate::nb::{LogicalSwitch, Lsp, Nb, Smap};
    use ovsdb::Uuid;

    fn uuid(n: u32) -> Uuid {
        Uuid::parse(&format!("00000000-0000-0000-0000-{n:012}")).unwrap()
    }

    fn smap(kv: &[(&str, &str)]) -> Smap {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn lrp(n: u32, name: &str, mac: &str, net: &str) -> Lrp {
        Lrp {
            uuid: uuid(n),
            name: name.into(),
            mac: mac.into(),
            networks: vec![net.into()],
            peer: None,
            options: Smap::new(),
            enabled: None,
            gateway_chassis: vec![],
            ha_chassis_group: None,
            row: Default::default(),
        }
    }

    fn nat(n: u32, kind: &str, ext: &str, logical: &str) -> Nat {
        Nat {
            uuid: uuid(n),
            kind: kind.into(),
            external_ip: ext.into(),
            external_mac: None,
            external_port_range: String::new(),
            logical_ip: logical.into(),
            logical_port: None,
            options: Smap::new(),
            row: Default::default(),
        }
    }

    fn router(n: u32, name: &str, ports: Vec<Lrp>, nat: Vec<Nat>, options: Smap) -> LogicalRouter {
        LogicalRouter {
            uuid: uuid(n),
            name: name.into(),
            ports,
            static_routes: vec![],
            policies: vec![],
            nat,
            load_balancer: vec![uuid(900)],
            load_balancer_group: vec![],
            enabled: None,
            options,
            external_ids: Smap::new(),
            row: Default::default(),
        }
    }

    fn lb(vip: &str, backends: &str) -> LoadBalancer {
        LoadBalancer {
            uuid: uuid(900),
            name: "lb".into(),
            vips: vec![(vip.into(), backends.into())],
            protocol: Some("tcp".into()),
            selection_fields: vec![],
            options: smap(&[("reject", "true"), ("skip_snat", "false")]),
            external_ids: Smap::new(),
            row: Default::default(),
        }
    }

    /// Every flow of router 0, as `stage prio match => actions` lines.
    fn flows(nb: &Nb) -> Vec<String> {
        let ctx = Ctx::new(nb.clone());
        let mut out = Vec::new();
        for it in crate::build::items(&ctx) {
            if matches!(
                it,
                Item::RouterDp(0)
                    | Item::RouterPort(0, _)
                    | Item::RouterNat(0, _)
                    | Item::RouterLb(0, _)
            ) {
                build_item(&ctx, it, &mut out);
            }
        }
        out.iter()
            .map(|f| {
                format!(
                    "{} {} {} => {}",
                    f.stage.name(),
                    f.priority,
                    f.match_,
                    f.actions
                )
            })
            .collect()
    }

    #[test]
    fn gateway_router_like_ovnk() {
        let mut nb = Nb::default();
        let ports = vec![
            lrp(1, "rtoe-GR", "0a:58:ac:12:00:02", "172.18.0.2/16"),
            lrp(2, "rtoj-GR", "0a:58:64:40:00:02", "100.64.0.2/16"),
        ];
        let opts = smap(&[("chassis", "c1"), ("lb_force_snat_ip", "router_ip")]);
        nb.routers.push(
            router(
                10,
                "GR",
                ports,
                vec![nat(20, "snat", "172.18.0.2", "10.128.0.0/14")],
                opts,
            )
            .into(),
        );
        let mut sw = LogicalSwitch {
            uuid: uuid(30),
            name: "ext".into(),
            ports: vec![],
            acls: vec![],
            load_balancer: vec![],
            load_balancer_group: vec![],
            other_config: Smap::new(),
            external_ids: Smap::new(),
            row: Default::default(),
        };
        sw.ports.push(Lsp {
            uuid: uuid(31),
            name: "etor-GR".into(),
            kind: "router".into(),
            addresses: vec!["router".into()],
            port_security: vec![],
            options: smap(&[("router-port", "rtoe-GR")]),
            enabled: None,
            up: None,
            external_ids: Smap::new(),
            row: Default::default(),
        });
        nb.switches.push(sw.into());
        nb.lbs
            .insert(uuid(900), lb("172.18.0.2:30000", "10.128.0.3:8080").into());
        let f = flows(&nb);
        for want in [
            "lr_in_unsnat 120 ip4 && ip4.dst == 172.18.0.2 && tcp && tcp.dst == 30000 => next;",
            "lr_in_unsnat 110 inport == \"rtoe-GR\" && ip4.dst == 172.18.0.2 => ct_snat;",
            "lr_in_unsnat 90 ip && ip4.dst == 172.18.0.2 => ct_snat;",
            "lr_in_dnat 120 ct.new && !ct.rel && ip4 && ip4.dst == 172.18.0.2 && tcp && tcp.dst == 30000 => flags.force_snat_for_lb = 1; ct_lb_mark(backends=10.128.0.3:8080; force_snat);",
            "lr_out_post_undnat 50 ip && ct.new => ct_commit { } ; next; ",
            "lr_out_snat 110 flags.force_snat_for_lb == 1 && ip4 && outport == \"rtoe-GR\" => ct_snat(172.18.0.2);",
            "lr_out_snat 15 ip && ip4.src == 10.128.0.0/14 && (!ct.trk || !ct.rpl) => ct_snat(172.18.0.2);",
            "lr_out_chk_dnat_local 50 ip && ct_mark.natted == 1 => reg9[4] = 1; next;",
        ] {
            assert!(f.iter().any(|l| l == want), "missing {want}\n{f:#?}");
        }
        // rtoj has no peer: no per-port force-SNAT flows.
        assert!(
            !f.iter()
                .any(|l| l.starts_with("lr_out_snat") && l.contains("outport == \"rtoj-GR\""))
        );
    }

    #[test]
    fn distributed_router_with_gateway_port() {
        let mut nb = Nb::default();
        let mut gw = lrp(1, "ext", "00:00:00:00:0e:01", "172.32.0.1/24");
        gw.gateway_chassis = vec![uuid(99)];
        let ports = vec![gw, lrp(2, "in", "00:00:00:00:0e:02", "10.6.0.1/24")];
        let mut sl = nat(21, "dnat_and_snat", "172.32.0.32", "10.6.0.32");
        sl.options = smap(&[("stateless", "true")]);
        let nats = vec![nat(20, "snat", "172.32.0.1", "10.6.0.0/24"), sl];
        nb.routers
            .push(router(10, "dr", ports, nats, Smap::new()).into());
        nb.lbs.insert(
            uuid(900),
            lb("172.17.0.100:80", "10.1.0.1:8080,10.1.0.2:8080").into(),
        );
        let f = flows(&nb);
        for want in [
            "lr_in_unsnat 100 ip && ip4.dst == 172.32.0.1 && inport == \"ext\" && flags.loopback == 1 && flags.use_snat_zone == 1 && is_chassis_resident(\"cr-ext\") => ct_snat;",
            "lr_in_unsnat 100 ip && ip4.dst == 172.32.0.32 && inport == \"ext\" && flags.loopback == 0 && is_chassis_resident(\"cr-ext\") => next;",
            "lr_in_dnat 100 ip && ip4.dst == 172.32.0.32 && inport == \"ext\" && is_chassis_resident(\"cr-ext\") => ip4.dst=10.6.0.32; next;",
            "lr_out_snat 154 ip && ip4.src == 10.6.0.0/24 && outport == \"ext\" && is_chassis_resident(\"cr-ext\") && reg9[4] == 1 => reg9[4] = 0; ct_snat(172.32.0.1);",
            "lr_out_snat 161 ip && ip4.src == 10.6.0.32 && outport == \"ext\" && is_chassis_resident(\"cr-ext\") => ip4.src=172.32.0.32; next;",
            "lr_out_undnat 120 ip4 && ((ip4.src == 10.1.0.1 && tcp.src == 8080) || (ip4.src == 10.1.0.2 && tcp.src == 8080)) && outport == \"ext\" && is_chassis_resident(\"cr-ext\") => ct_dnat_in_czone;",
        ] {
            assert!(f.iter().any(|l| l == want), "missing {want}\n{f:#?}");
        }
        assert!(!f.iter().any(|l| l.starts_with("lr_out_post_undnat 50")));
    }

    #[test]
    fn endpoints() {
        let e = Endpoint::parse("[fd17::100]:80").unwrap();
        assert_eq!(e.to_string(), "[fd17::100]:80");
        let e = Endpoint::parse("fd01:0::11").unwrap();
        assert_eq!(e.to_string(), "fd01::11");
        let e = Endpoint::parse("172.30.0.1:80").unwrap();
        assert_eq!(e.port, Some(80));
        assert!(Endpoint::parse("172.30.0.1:x").is_none());
        let vip = Endpoint::parse("172.30.0.1:80").unwrap();
        let bs = parse_backends(vip, "10.128.0.3:8080, 10.128.0.5:8080").unwrap();
        assert_eq!(join_backends(&bs), "10.128.0.3:8080,10.128.0.5:8080");
        assert!(parse_backends(vip, "10.128.0.3").is_none());
    }

    #[test]
    fn force_ips() {
        let v = first_v4_v6("1.1.1.1 fd00::1 2.2.2.2".split_whitespace());
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].to_string(), "fd00::1");
    }
}
