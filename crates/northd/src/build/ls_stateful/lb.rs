//! Load balancer VIPs on a switch: pre-stateful, LB (and affinity) flows per VIP.

use crate::lflow::Sink;
use crate::nb::{LoadBalancer, Nb};
use crate::stage::Stage;
use std::net::IpAddr;

/// LSP name → (switch index, port index), as [`crate::build::Ctx::lsp_by_name`].
pub type LspByName = crate::overlay::OverlayMap<std::sync::Arc<str>, (usize, usize)>;

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

/// Parses a `vips` value: comma-separated backends. `None` when one is malformed (a space
/// after a comma is, as for ovn-northd, which then skips the VIP).
pub fn parse_backends(s: &str) -> Option<Vec<Vip>> {
    s.split(',')
        .filter(|b| !b.is_empty())
        .map(parse_vip)
        .collect()
}

/// True when `ip_port_mappings` gives backend `ip` a health-check source: `PORT:SRC_IP`
/// with an existing, enabled switch port.
fn health_checked(nb: &Nb, lsps: &LspByName, lb: &LoadBalancer, ip: &str) -> bool {
    let Some(m) = lb.row.map_get("ip_port_mappings", ip) else {
        return false;
    };
    let Some((port, src)) = m.split_once(':') else {
        return false;
    };
    let src_ok = match src.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => src.parse::<std::net::Ipv4Addr>().is_ok(),
    };
    src_ok
        && lsps
            .get(port)
            .is_some_and(|&(i, j)| nb.switches[i].ports[j].is_enabled())
}

/// One load balancer's flows on any switch (they do not depend on the switch).
pub(super) fn switch_lb(nb: &Nb, lsps: &LspByName, lb: &LoadBalancer, out: &mut Sink<'_>) {
    let proto = match lb.protocol.as_deref() {
        None | Some("") => "tcp",
        Some(p) => p,
    };
    let opt_true = |k: &str| lb.options.get(k).is_some_and(|v| v == "true");
    let reject_empty = opt_true("reject");
    let event_empty = !reject_empty
        && (opt_true("event")
            || nb
                .global_options
                .get("controller_event")
                .is_some_and(|v| v == "true"));
    let affinity = lb
        .options
        .get("affinity_timeout")
        .and_then(|t| t.parse::<u32>().ok())
        .filter(|&t| t > 0);
    let hash_fields = selection_fields(lb, proto);
    for (key, value) in &lb.vips {
        let Some(vip) = parse_vip(key) else { continue };
        let Some(backends) = parse_backends(value) else {
            continue;
        };
        let checked = lb
            .row
            .uuids("health_check")
            .any(|u| nb.lb_health_check_vips.get(&u).is_some_and(|v| v == key));
        let v = VipFlows {
            vip,
            proto,
            ipm: if vip.ip.is_ipv4() { "ip4" } else { "ip6" },
            reg: if vip.ip.is_ipv4() { "reg1" } else { "xxreg1" },
            ip: vip.ip_str(),
        };
        v.pre_stateful(out);
        if backends.is_empty() {
            v.empty(reject_empty, event_empty, lb, out);
            continue;
        }
        // With a health check, only backends with a monitor source are used. Not yet: the
        // monitors' status (`Service_Monitor` in the SB), taken here as online.
        let backends: Vec<Vip> = if checked {
            backends
                .into_iter()
                .filter(|b| health_checked(nb, lsps, lb, &b.ip_str()))
                .collect()
        } else {
            backends
        };
        if backends.is_empty() {
            v.empty(reject_empty, false, lb, out);
            continue;
        }
        let list: Vec<String> = backends.iter().map(Vip::endpoint).collect();
        let mut a = format!("reg0[1] = 0; ct_lb_mark(backends={}", list.join(","));
        if let Some(h) = &hash_fields {
            a.push_str(&format!("; hash_fields=\"{h}\""));
        }
        a.push_str(");");
        out.add(Stage::LsInLb, v.lb_priority(), v.lb_match(), a);
        if let Some(t) = affinity {
            v.affinity(&backends, t, out);
        }
        // Not yet: template VIPs.
    }
}

/// The text pieces of one VIP's flows.
struct VipFlows<'a> {
    vip: Vip,
    proto: &'a str,
    /// `ip4` / `ip6`.
    ipm: &'static str,
    /// Register holding the original destination (`reg1` / `xxreg1`).
    reg: &'static str,
    ip: String,
}

impl VipFlows<'_> {
    /// Pre-stateful: load the original destination and send to conntrack.
    fn pre_stateful(&self, out: &mut Sink<'_>) {
        let (ipm, ip, reg) = (self.ipm, &self.ip, self.reg);
        let mut m = format!("reg0[2] == 1 && {ipm}.dst == {ip}");
        let mut a = format!("{reg} = {ip}; ");
        if let Some(p) = self.vip.port {
            m.push_str(&format!(" && {}.dst == {p}", self.proto));
            a.push_str(&format!("reg2[0..15] = {p}; "));
        }
        a.push_str("ct_lb_mark;");
        out.add(Stage::LsInPreStateful, 120, m, a);
    }

    fn lb_priority(&self) -> u16 {
        if self.vip.port.is_some() { 120 } else { 110 }
    }

    /// The ls_in_lb match for new connections to the VIP.
    fn lb_match(&self) -> String {
        let mut m = format!("ct.new && {}.dst == {}", self.ipm, self.ip);
        if let Some(p) = self.vip.port {
            m.push_str(&format!(" && {}.dst == {p}", self.proto));
        }
        m
    }

    /// A VIP without (active) backends: reject, or drop (and maybe an empty-LB controller
    /// event).
    fn empty(&self, reject: bool, event: bool, lb: &LoadBalancer, out: &mut Sink<'_>) {
        let a = if reject {
            format!(
                "reg0 = 0; reject {{ outport <-> inport; next(pipeline=egress,table={});}};",
                Stage::LsOutQosMark.table()
            )
        } else {
            "drop;".to_owned()
        };
        out.add(Stage::LsInLb, self.lb_priority(), self.lb_match(), a);
        if event {
            let proto = self.proto;
            let mut m = format!("{}.dst == {} && {proto}", self.ipm, self.ip);
            if let Some(p) = self.vip.port {
                m.push_str(&format!(" && {proto}.dst == {p}"));
            }
            out.add(
                Stage::LsInPreLb,
                130,
                m,
                format!(
                    "trigger_event(event = \"empty_lb_backends\", vip = \"{}\", protocol = \"{proto}\", load_balancer = \"{}\");",
                    self.vip.endpoint(),
                    lb.uuid
                ),
            );
        }
    }

    /// Affinity (`options:affinity_timeout`): check, per-backend LB and learn flows.
    fn affinity(&self, backends: &[Vip], timeout: u32, out: &mut Sink<'_>) {
        let (ipm, ip, reg, proto) = (self.ipm, &self.ip, self.reg, self.proto);
        let mut vip_m = format!("ct.new && {ipm} && {reg} == {ip}");
        let mut vip_a = format!("reg0[1] = 0; {reg} = {ip}; ");
        if let Some(p) = self.vip.port {
            vip_m.push_str(&format!(" && reg2[0..15] == {p}"));
            vip_a.push_str(&format!("reg2[0..15] = {p}; "));
        }
        out.add(
            Stage::LsInLbAffCheck,
            100,
            vip_m.clone(),
            "reg9[6] = chk_lb_aff(); next;",
        );
        let breg = if self.vip.ip.is_ipv4() {
            "reg4"
        } else {
            "xxreg0"
        };
        for b in backends {
            let bip = b.ip_str();
            let mut m = format!("reg9[6] == 1 && ct.new && {ipm} && {breg} == {bip}");
            let mut learn = format!("reg9[6] == 0 && {vip_m} && {ipm}.dst == {bip}");
            if let Some(p) = b.port {
                m.push_str(&format!(" && reg8[0..15] == {p}"));
                learn.push_str(&format!(" && {proto}.dst == {p}"));
            }
            out.add(
                Stage::LsInLb,
                150,
                m,
                format!("{vip_a}ct_lb_mark(backends={});", b.endpoint()),
            );
            let proto_arg = if self.vip.port.is_some() {
                format!("proto = {proto}, ")
            } else {
                String::new()
            };
            out.add(
                Stage::LsInLbAffLearn,
                100,
                learn,
                format!(
                    "commit_lb_aff(vip = \"{}\", backend = \"{}\", {proto_arg}timeout = {timeout}); /* drop */",
                    self.vip.endpoint(),
                    b.endpoint()
                ),
            );
        }
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
