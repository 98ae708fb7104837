//! `ls_in_dhcp_options` / `ls_in_dhcp_response` for ports with `dhcpv4_options` /
//! `dhcpv6_options`.
//!
//! DHCPv4 needs `server_id`, `server_mac` and `lease_time`, and a port IPv4 address inside
//! the options' `cidr` (the first such is offered); the `put_dhcp_opts` arguments are
//! `offerip` then the options (plus `netmask` from the CIDR and the port's
//! `options:hostname`, minus `server_mac`) in name order, values as written. DHCPv6 needs
//! `server_id` (a MAC) and a port IPv6 address in `cidr` (offered as `ia_addr` unless
//! `dhcpv6_stateless=true`).
//!
//! An external port (with an HA chassis group) gets the same flows on each localnet port
//! of its switch, guarded by `is_chassis_resident`.
//!
//! Not yet: option value validation (values are printed as written).

use super::super::Ctx;
use super::quoted;
use crate::addr::{LportAddresses, Mac, parse_ipv4_net, parse_ipv6_net};
use crate::lflow::Sink;
use crate::nb::{Lsp, Smap};
use crate::stage::Stage;
use std::fmt::Write as _;

/// `name = value, …` of `opts` in name order.
fn opt_list(s: &mut String, opts: &Smap) {
    for (k, v) in opts {
        let _ = write!(s, ", {k} = {v}");
    }
}

/// A port's DHCPv4/DHCPv6 flows. An external port (with an HA chassis group) is served
/// through each localnet port of its switch, on the chassis it is resident on.
pub(super) fn port_flows(
    ctx: &Ctx,
    sw: usize,
    p: &Lsp,
    addrs: &[LportAddresses],
    out: &mut Sink<'_>,
) {
    if !p.is_enabled() {
        return;
    }
    let v4_opts = p
        .row
        .uuids("dhcpv4_options")
        .next()
        .and_then(|u| ctx.nb.dhcp_options.get(&u));
    let v6_opts = p
        .row
        .uuids("dhcpv6_options")
        .next()
        .and_then(|u| ctx.nb.dhcp_options.get(&u));
    if v4_opts.is_none() && v6_opts.is_none() {
        return;
    }
    // (quoted inport, match suffix)
    let via: Vec<(String, String)> = if p.kind == "external" {
        if p.row.uuids("ha_chassis_group").next().is_none() {
            return;
        }
        let res = format!(" && is_chassis_resident({})", quoted(&p.name));
        ctx.switch_localnet_ports[sw]
            .iter()
            .map(|&ln| (quoted(&ctx.lsp(sw, ln).name), res.clone()))
            .collect()
    } else {
        vec![(quoted(&p.name), String::new())]
    };
    for (q, res) in &via {
        if let Some(d) = v4_opts {
            v4(p, q, res, &d.cidr, &d.options, addrs, out);
        }
        if let Some(d) = v6_opts {
            v6(q, res, &d.cidr, &d.options, addrs, out);
        }
    }
}

fn v4(
    p: &Lsp,
    q: &str,
    res: &str,
    cidr: &str,
    opts: &Smap,
    addrs: &[LportAddresses],
    out: &mut Sink<'_>,
) {
    let Some(net) = parse_ipv4_net(cidr) else {
        return;
    };
    let (Some(server_id), Some(server_mac), Some(_)) = (
        opts.get("server_id"),
        opts.get("server_mac"),
        opts.get("lease_time"),
    ) else {
        return;
    };
    for la in addrs {
        let Some(mac) = la.mac else { continue };
        let Some(ip) = la
            .ipv4
            .iter()
            .map(|a| a.addr)
            .find(|&a| crate::addr::Ipv4Net { addr: a, ..net }.network() == net.network())
        else {
            continue;
        };
        let mut o = opts.clone();
        o.remove("server_mac");
        o.entry("netmask".into())
            .or_insert_with(|| net.mask().to_string());
        if let Some(h) = p.options.get("hostname") {
            o.entry("hostname".into()).or_insert_with(|| h.clone());
        }
        let mut action = format!("reg0[3] = put_dhcp_opts(offerip = {ip}");
        opt_list(&mut action, &o);
        action.push_str("); next;");
        let pre = format!("inport == {q} && eth.src == {mac}");
        out.add(
            Stage::LsInDhcpOptions,
            100,
            format!(
                "{pre} && ip4.src == 0.0.0.0 && ip4.dst == 255.255.255.255 && udp.src == 68 \
                 && udp.dst == 67{res}"
            ),
            action.clone(),
        );
        out.add(
            Stage::LsInDhcpOptions,
            100,
            format!(
                "{pre} && ip4.src == {ip} && ip4.dst == {{{server_id}, 255.255.255.255}} && \
                 udp.src == 68 && udp.dst == 67{res}"
            ),
            action,
        );
        out.add(
            Stage::LsInDhcpResponse,
            100,
            format!("{pre} && ip4 && udp.src == 68 && udp.dst == 67 && reg0[3]{res}"),
            format!(
                "eth.dst = eth.src; eth.src = {server_mac}; ip4.src = {server_id}; \
                 udp.src = 67; udp.dst = 68; outport = inport; flags.loopback = 1; output;"
            ),
        );
    }
}

fn v6(q: &str, res: &str, cidr: &str, opts: &Smap, addrs: &[LportAddresses], out: &mut Sink<'_>) {
    let Some(net) = parse_ipv6_net(cidr) else {
        return;
    };
    let Some(server) = opts.get("server_id").and_then(|s| Mac::parse(s)) else {
        return;
    };
    let stateless = opts.get("dhcpv6_stateless").map(String::as_str) == Some("true");
    for la in addrs {
        let Some(mac) = la.mac else { continue };
        let Some(ip) = la
            .ipv6
            .iter()
            .map(|a| a.addr)
            .find(|&a| crate::addr::Ipv6Net { addr: a, ..net }.network() == net.network())
        else {
            continue;
        };
        let mut o = opts.clone();
        o.remove("dhcpv6_stateless");
        let mut action = String::from("reg0[3] = put_dhcpv6_opts(");
        let mut list = String::new();
        if !stateless {
            let _ = write!(list, ", ia_addr = {ip}");
        }
        opt_list(&mut list, &o);
        action.push_str(list.trim_start_matches(", "));
        action.push_str("); next;");
        let m = format!(
            "inport == {q} && eth.src == {mac} && ip6.dst == ff02::1:2 && udp.src == 546 && \
             udp.dst == 547{res}"
        );
        out.add(Stage::LsInDhcpOptions, 100, m.clone(), action);
        out.add(
            Stage::LsInDhcpResponse,
            100,
            format!("{m} && reg0[3]"),
            format!(
                "eth.dst = eth.src; eth.src = {server}; ip6.dst = ip6.src; ip6.src = {}; \
                 udp.src = 547; udp.dst = 546; outport = inport; flags.loopback = 1; output;",
                server.ipv6_lla()
            ),
        );
    }
}
