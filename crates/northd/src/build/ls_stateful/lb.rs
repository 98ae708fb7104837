//! Load balancer VIPs on a switch: pre-stateful, LB (and affinity) flows per VIP.

use crate::build::Ctx;
use crate::lflow::Sink;
use crate::nb::LoadBalancer;
use crate::stage::Stage;
use std::net::IpAddr;

/// A parsed `VIP[:PORT]` key (or backend entry) of `Load_Balancer.vips`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vip {
    /// The address.
    pub ip: IpAddr,
    /// The L4 port, when one was given.
    pub port: Option<u16>,
}

impl Vip {
    /// The address as ovn-northd prints it in matches (IPv6 without brackets).
    pub fn ip_str(&self) -> String {
        self.ip.to_string()
    }

    /// `IP:PORT`, `[IP6]:PORT` or just the address, as in `ct_lb_mark(backends=...)`.
    pub fn endpoint(&self) -> String {
        match (self.ip, self.port) {
            (IpAddr::V4(a), Some(p)) => format!("{a}:{p}"),
            (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
            (ip, None) => ip.to_string(),
        }
    }
}

/// Parses `IP`, `IP:PORT`, `IP6` or `[IP6]:PORT`. `None` when malformed (templates
/// included).
pub fn parse_vip(s: &str) -> Option<Vip> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, tail) = rest.split_once(']')?;
        let ip: std::net::Ipv6Addr = ip.parse().ok()?;
        let port = match tail {
            "" => None,
            t => Some(
                t.strip_prefix(':')?
                    .parse::<u16>()
                    .ok()
                    .filter(|&p| p != 0)?,
            ),
        };
        return Some(Vip {
            ip: IpAddr::V6(ip),
            port,
        });
    }
    match s.matches(':').count() {
        0 => Some(Vip {
            ip: IpAddr::V4(s.parse().ok()?),
            port: None,
        }),
        1 => {
            let (ip, p) = s.split_once(':')?;
            Some(Vip {
                ip: IpAddr::V4(ip.parse().ok()?),
                port: Some(p.parse::<u16>().ok().filter(|&p| p != 0)?),
            })
        }
        _ => Some(Vip {
            ip: IpAddr::V6(s.parse().ok()?),
            port: None,
        }),
    }
}

/// Parses a `vips` value: comma-separated backends. `None` when one is malformed.
pub fn parse_backends(s: &str) -> Option<Vec<Vip>> {
    s.split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(parse_vip)
        .collect()
}

/// One load balancer's flows on a switch.
pub(super) fn switch_lb(_ctx: &Ctx<'_>, _sw: usize, lb: &LoadBalancer, out: &mut Sink<'_>) {
    let proto = match lb.protocol.as_deref() {
        None | Some("") => "tcp",
        Some(p) => p,
    };
    let reject_empty = lb.options.get("reject").is_some_and(|v| v == "true");
    let hash_fields = selection_fields(lb, proto);
    for (key, value) in &lb.vips {
        let Some(vip) = parse_vip(key) else { continue };
        let Some(backends) = parse_backends(value) else {
            continue;
        };
        let (ipm, reg) = match vip.ip {
            IpAddr::V4(_) => ("ip4", "reg1"),
            IpAddr::V6(_) => ("ip6", "xxreg1"),
        };
        let ip = vip.ip_str();

        // Pre-stateful: load the original destination and send to conntrack.
        let mut m = format!("reg0[2] == 1 && {ipm}.dst == {ip}");
        let mut a = format!("{reg} = {ip}; ");
        if let Some(p) = vip.port {
            m.push_str(&format!(" && {proto}.dst == {p}"));
            a.push_str(&format!("reg2[0..15] = {p}; "));
        }
        a.push_str("ct_lb_mark;");
        out.add(Stage::LsInPreStateful, 120, m, a);

        // LB: new connections.
        let mut m = format!("ct.new && {ipm}.dst == {ip}");
        let prio = match vip.port {
            Some(p) => {
                m.push_str(&format!(" && {proto}.dst == {p}"));
                120
            }
            None => 110,
        };
        let a = if backends.is_empty() && reject_empty {
            format!(
                "reg0 = 0; reject {{ outport <-> inport; next(pipeline=egress,table={});}};",
                Stage::LsOutQosMark.table()
            )
        } else {
            let list: Vec<String> = backends.iter().map(Vip::endpoint).collect();
            let mut a = format!("reg0[1] = 0; ct_lb_mark(backends={}", list.join(","));
            if let Some(h) = &hash_fields {
                a.push_str(&format!("; hash_fields=\"{h}\""));
            }
            a.push_str(");");
            a
        };
        out.add(Stage::LsInLb, prio, m, a);
        // Not yet: empty-backend controller events (`options:event` with NB_Global
        // `controller_event`), health checks, affinity (`options:affinity_timeout`).
    }
}

/// `selection_fields` as `hash_fields`: `tp_src`/`tp_dst` become the protocol's.
fn selection_fields(lb: &LoadBalancer, proto: &str) -> Option<String> {
    if lb.selection_fields.is_empty() {
        return None;
    }
    let v: Vec<String> = lb
        .selection_fields
        .iter()
        .map(|f| match f.as_str() {
            "tp_src" => format!("{proto}_src"),
            "tp_dst" => format!("{proto}_dst"),
            f => f.to_owned(),
        })
        .collect();
    Some(v.join(","))
}
