//! The compiler: NB model → logical flows.
//!
//! [`Ctx`] is the model plus what every stage looks up (datapaths, port peers, the ACLs and
//! load balancers that apply to each datapath). The work is cut into [`Item`]s — one
//! datapath's own flows, one port's, one ACL's on one switch, one load balancer's on one
//! datapath, one route, one policy, one NAT rule — so that the build can run items on
//! several threads and a change can re-run only the items it touches. Each stage module
//! implements the item kinds it has flows for:
//!
//! * [`ls_l2`]: switch port security, FDB, ARP/ND responder, DHCP/DNS, external ports, L2
//!   lookup and unknown (`ls_in_check_port_sec` … `ls_in_l2_unknown` except the stateful
//!   stages; `ls_out_check_port_sec`, `ls_out_apply_port_sec`).
//! * [`ls_stateful`]: pre-ACL/LB/stateful, ACL hints, ACLs, QoS, LB affinity, LB, hairpin,
//!   ACL-after-LB, stateful (ingress and egress).
//! * [`lr_routing`]: router admission, neighbor lookup/learning, IP input, ND RA, routing,
//!   policies, ARP resolve, packet-length checks, gateway redirect, ARP request, egress loop
//!   and delivery.
//! * [`lr_nat`]: router unSNAT, defrag, LB affinity, DNAT, ECMP stateful, and the egress
//!   NAT stages (`lr_out_chk_dnat_local` … `lr_out_post_snat`).

pub mod lr_nat;
pub mod lr_routing;
pub mod ls_l2;
pub mod ls_stateful;

use crate::addr::{LportAddresses, parse_lrp_networks};
use crate::lflow::{DpId, Dps, Lflow, Sink};
use crate::nb::{Diag, LogicalRouter, LogicalSwitch, Lrp, Lsp, Nb, PortGroup};
use crate::overlay::OverlayMap;
use ovsdb::Uuid;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// The port groups with a port on one switch (sorted by UUID).
pub type SwitchPgs = Arc<[Arc<PortGroup>]>;

/// Per port of one switch (router), the router (switch) port it is attached to, as
/// (datapath index, port index). Shared: a patched context copies only the lists of the
/// datapaths it touched.
pub type Peers = Arc<[Option<(usize, usize)>]>;

/// Tunnel keys an SB holds for a context's datapaths and router ports
/// ([`Ctx::read_tunnel_keys`]).
#[derive(Debug, Default)]
pub struct TunnelKeys {
    /// (datapath index, key).
    pub datapaths: Vec<(usize, u32)>,
    /// (router, port, key).
    pub router_ports: Vec<(usize, usize, u32)>,
}

/// Switch or router, and its index in [`Nb::switches`] / [`Nb::routers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DpKind {
    /// A logical switch.
    Switch(usize),
    /// A logical router.
    Router(usize),
}

/// One logical datapath.
#[derive(Debug, Clone)]
pub struct Datapath {
    /// NB name.
    pub name: String,
    /// NB row UUID (printed where `lflow-list` prints the SB datapath's).
    pub uuid: Uuid,
    /// Which NB row.
    pub kind: DpKind,
}

/// The model and the lookups every stage shares. Built once per full compute.
#[derive(Debug)]
pub struct Ctx {
    /// The NB (shared: an incremental engine patches it in place when it holds the only
    /// reference).
    pub nb: Arc<Nb>,
    /// Datapaths: switches first (in `nb.switches` order), then routers.
    pub datapaths: Arc<Vec<Datapath>>,
    /// LSP name → (switch index, port index). (An [`OverlayMap`]: a patched context
    /// shares the bulk with the one it was patched from.)
    pub lsp_by_name: OverlayMap<Arc<str>, (usize, usize)>,
    /// LSP UUID → (switch index, port index).
    pub lsp_by_uuid: OverlayMap<Uuid, (usize, usize)>,
    /// LRP name → (router index, port index).
    pub lrp_by_name: Arc<HashMap<String, (usize, usize)>>,
    /// Per switch: per port, the router port it is attached to (`type=router`,
    /// `options:router-port`), as (router index, port index).
    pub lsp_router_peer: Vec<Peers>,
    /// Per router: per port, the switch port that attaches it, as (switch index, port
    /// index), when one does.
    pub lrp_switch_peer: Vec<Peers>,
    /// Per router: per port, its parsed MAC and networks (`None` when malformed).
    pub lrp_networks: Arc<Vec<Vec<Option<LportAddresses>>>>,
    /// Per switch: the ACLs applied (its own and those of port groups with a port on it),
    /// sorted by UUID.
    pub switch_acls: Vec<Arc<[Uuid]>>,
    /// Per switch: the port groups with a port on it, by UUID (the rows `nb` holds).
    pub switch_pgs: Vec<SwitchPgs>,
    /// Per switch: the load balancers applied (own and groups'), sorted by UUID.
    pub switch_lbs: Vec<Arc<[Uuid]>>,
    /// Per router: the load balancers applied (own and groups'), sorted by UUID.
    pub router_lbs: Arc<Vec<Arc<[Uuid]>>>,
    /// Load-balancer classes of switches: switches that apply the same load-balancer
    /// groups share one class (the groups' LBs built once for all of them), and each switch
    /// with LBs of its own has a class of one for those.
    pub switch_lb_classes: Arc<Vec<LbClass>>,
    /// Load-balancer classes of routers, likewise, also split by the router properties
    /// the LB flows depend on ([`router_lb_flavor`]).
    pub router_lb_classes: Arc<Vec<LbClass>>,
    /// Per router: the `external_ip`s of its NAT rules (parsed; malformed ones left out).
    pub router_nat_ips: Arc<Vec<HashSet<IpAddr>>>,
    /// Per router: its distributed gateway ports (`gateway_chassis`, `ha_chassis_group` or
    /// `options:redirect-chassis` set), as port indices in UUID order.
    pub router_dgps: Arc<Vec<Vec<usize>>>,
    /// The NAT external addresses of all routers (see [`Item::RouterLb`]).
    pub all_nat_ips: Arc<HashSet<IpAddr>>,
    /// Per switch: whether it has ACLs, stateful ACLs, LB VIPs (datapath-wide flow choices).
    pub switch_facts: Vec<ls_stateful::SwitchFacts>,
    /// Per ACL applied to some switch: its flows on a switch without (`[0]`) and with
    /// (`[1]`) stateful ACLs or LB VIPs (datapath left as a placeholder).
    pub switch_acl_flows: OverlayMap<Uuid, Arc<[Vec<Lflow>; 2]>>,
    /// Per switch: indices of its ports attached to a router port (those with a
    /// `lsp_router_peer`), in port order.
    pub switch_router_ports: Vec<Arc<[usize]>>,
    /// Per switch: indices of its `localnet` ports, in port order.
    pub switch_localnet_ports: Vec<Arc<[usize]>>,
    /// Per router: its load balancers' VIP addresses, as sets whose union is the router's
    /// VIPs — one per load-balancer group (shared by the routers using the group) and one
    /// for its own load balancers.
    pub router_lb_ips: Arc<Vec<Vec<Arc<LbIps>>>>,
    /// Per switch port (switch index, port index): the service-monitor source IPs that
    /// health-checked load balancers map to it (`ip_port_mappings` `PORT:SRC_IP`), sorted.
    pub svc_mon_src_ips: Arc<HashMap<(usize, usize), Vec<IpAddr>>>,
    /// Per router: next-hop lookup and ECMP groups of its static routes
    /// ([`lr_routing::index_routers`]).
    pub lr_index: Arc<Vec<lr_routing::RouterIndex>>,
    /// Per datapath (same order as `datapaths`): its SB tunnel key. Defaults to the
    /// position + 1; a caller that knows the SB `Datapath_Binding` keys may overwrite them
    /// (they appear in flows as `$_rtr_lb_KEY_ip4`).
    pub tunnel_keys: Arc<Vec<u32>>,
    /// Per router: per port, its SB `Port_Binding` tunnel key (default position + 1;
    /// [`Ctx::load_tunnel_keys`] takes the SB's). Appears in ECMP symmetric-reply flows.
    pub lrp_tunnel_keys: Arc<Vec<Vec<u32>>>,
    /// Problems found while building the context.
    pub diags: Vec<Diag>,
}

/// Datapaths that get the same flows for a set of load balancers.
#[derive(Debug, Clone)]
pub struct LbClass {
    /// A member (switch or router index) the builders read datapath properties from.
    pub rep: usize,
    /// All members' datapaths.
    pub dps: Dps,
    /// The load balancers.
    pub lbs: Vec<Uuid>,
}

/// The router properties a load balancer's flows depend on: routers that differ here get
/// their LB flows built separately.
pub fn router_lb_flavor(r: &LogicalRouter) -> String {
    let o = |k: &str| r.options.get(k).map(String::as_str).unwrap_or("");
    let has_gw_port = r.ports.iter().any(|p| {
        !p.gateway_chassis.is_empty()
            || p.ha_chassis_group.is_some()
            || p.options.contains_key("redirect-chassis")
    });
    format!(
        "gw={} gwport={} force_snat={} lb_force_snat_ip={} skip_snat={}",
        r.options.contains_key("chassis"),
        has_gw_port,
        o("lb_force_snat_ip").is_empty(),
        o("lb_force_snat_ip"),
        o("lb_skip_snat")
    )
}

fn lb_classes<T>(
    rows: &[T],
    dp: impl Fn(usize) -> DpId,
    own: impl Fn(&T) -> &[Uuid],
    groups: impl Fn(&T) -> &[Uuid],
    flavor: impl Fn(&T) -> String,
    nb: &Nb,
) -> Vec<LbClass> {
    let mut by_key: BTreeMap<(Vec<Uuid>, String), Vec<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let mut g = groups(r).to_vec();
        g.sort();
        g.dedup();
        if !g.is_empty() {
            by_key.entry((g, flavor(r))).or_default().push(i);
        }
        if !own(r).is_empty() {
            let mut lbs = own(r).to_vec();
            lbs.sort();
            lbs.dedup();
            out.push(LbClass {
                rep: i,
                dps: Dps::One(dp(i)),
                lbs,
            });
        }
    }
    for ((g, _), members) in by_key {
        let lbs = nb.lbs_of(&[], &g);
        if lbs.is_empty() {
            continue;
        }
        let dps = Dps::from_sorted(members.iter().map(|&i| dp(i)).collect())
            .unwrap_or(Dps::One(dp(members[0])));
        out.push(LbClass {
            rep: members[0],
            dps,
            lbs,
        });
    }
    out
}

/// The VIP addresses of a set of load balancers, each once, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LbIps {
    /// IPv4 VIPs.
    pub v4: Vec<Ipv4Addr>,
    /// IPv6 VIPs.
    pub v6: Vec<Ipv6Addr>,
}

impl LbIps {
    /// The VIP addresses of the load balancers `lbs`.
    pub fn of(nb: &Nb, lbs: &[Uuid]) -> LbIps {
        let mut ips = LbIps::default();
        for lb in lbs.iter().filter_map(|u| nb.lbs.get(u)) {
            for ip in lb.vips.iter().filter_map(|(k, _)| lb_vip_ip(k)) {
                match ip {
                    IpAddr::V4(a) => ips.v4.push(a),
                    IpAddr::V6(a) => ips.v6.push(a),
                }
            }
        }
        ips.v4.sort_unstable();
        ips.v4.dedup();
        ips.v6.sort_unstable();
        ips.v6.dedup();
        ips
    }
}

/// The IP of a load balancer `vips` key: `IP`, `IP:PORT`, `IPv6` or `[IPv6]:PORT`.
pub fn lb_vip_ip(key: &str) -> Option<IpAddr> {
    if let Some(rest) = key.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    if let Ok(ip) = key.parse::<IpAddr>() {
        return Some(ip);
    }
    key.rsplit_once(':')?
        .0
        .parse::<Ipv4Addr>()
        .ok()
        .map(IpAddr::V4)
}

/// Load-balancer lists shared between datapaths that apply the same groups and no load
/// balancer of their own (800 node switches applying the cluster groups hold one list).
#[derive(Debug, Default)]
struct LbLists(HashMap<Vec<Uuid>, Arc<[Uuid]>>);

impl LbLists {
    fn of(&mut self, nb: &Nb, own: &[Uuid], groups: &[Uuid]) -> Arc<[Uuid]> {
        if !own.is_empty() {
            return nb.lbs_of(own, groups).into();
        }
        self.0
            .entry(groups.to_vec())
            .or_insert_with(|| nb.lbs_of(&[], groups).into())
            .clone()
    }
}

/// Indexes switch `i`'s ports by name and UUID; a name already taken is a diagnostic
/// (the later port wins, as everywhere a name is looked up).
fn index_ports(
    nb: &Nb,
    i: usize,
    lsp_by_name: &mut OverlayMap<Arc<str>, (usize, usize)>,
    lsp_by_uuid: &mut OverlayMap<Uuid, (usize, usize)>,
    diags: &mut Vec<Diag>,
) {
    for (j, p) in nb.switches[i].ports.iter().enumerate() {
        if lsp_by_name.insert(p.name.as_str().into(), (i, j)).is_some() {
            diags.push(Diag {
                table: "Logical_Switch_Port",
                uuid: p.uuid,
                msg: format!("duplicate port name {:?}", p.name),
            });
        }
        lsp_by_uuid.insert(p.uuid, (i, j));
    }
}

/// Attaches switch `i`'s router-type ports to the router ports they name
/// (`options:router-port`): fills `lsp_router_peer[i]` and the routers' side.
fn attach_switch(
    nb: &Nb,
    i: usize,
    lrp_by_name: &HashMap<String, (usize, usize)>,
    lsp_router_peer: &mut [Peers],
    lrp_switch_peer: &mut [Peers],
    diags: &mut Vec<Diag>,
) {
    let s = &nb.switches[i];
    let mut mine = vec![None; s.ports.len()];
    for (j, p) in s.ports.iter().enumerate() {
        if p.kind != "router" {
            continue;
        }
        let Some(rp) = p.options.get("router-port") else {
            continue;
        };
        match lrp_by_name.get(rp.as_str()) {
            Some(&(ri, rj)) => {
                mine[j] = Some((ri, rj));
                Arc::make_mut(&mut lrp_switch_peer[ri])[rj] = Some((i, j));
            }
            None => diags.push(Diag {
                table: "Logical_Switch_Port",
                uuid: p.uuid,
                msg: format!("router-port {rp:?} does not exist"),
            }),
        }
    }
    lsp_router_peer[i] = mine.into();
}

/// Per switch, the port groups with a port on it (sorted by UUID).
fn switch_port_groups(nb: &Nb, lsp_by_uuid: &OverlayMap<Uuid, (usize, usize)>) -> Vec<SwitchPgs> {
    let mut on: Vec<Vec<Arc<PortGroup>>> = vec![Vec::new(); nb.switches.len()];
    for pg in &nb.port_groups {
        let sws: BTreeSet<usize> = pg
            .ports
            .iter()
            .filter_map(|p| lsp_by_uuid.get(p).map(|&(i, _)| i))
            .collect();
        for i in sws {
            on[i].push(pg.clone());
        }
    }
    on.into_iter()
        .map(|mut v| {
            v.sort_by_key(|g| g.uuid);
            v.into()
        })
        .collect()
}

/// The ACLs applied to switch `sw` whose port groups are `pgs`: its own and the groups',
/// sorted by UUID.
fn applied_acls(sw: &LogicalSwitch, pgs: &[Arc<PortGroup>]) -> Arc<[Uuid]> {
    let mut v: Vec<Uuid> = sw.acls.clone();
    for g in pgs {
        v.extend(g.acls.iter().copied());
    }
    v.sort_unstable();
    v.dedup();
    v.into()
}

/// Adds to `map` the flows of every applied ACL it lacks.
fn add_acl_flows(
    nb: &Nb,
    applied: &[Arc<[Uuid]>],
    map: &mut OverlayMap<Uuid, Arc<[Vec<Lflow>; 2]>>,
    threads: usize,
) {
    let missing: Vec<&Arc<crate::nb::Acl>> = applied
        .iter()
        .flat_map(|a| a.iter())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|u| !map.contains_key(u))
        .filter_map(|u| nb.acls.get(u))
        .collect();
    let made = crate::par::par_map(&missing, threads, |acl| {
        (acl.uuid, Arc::new(ls_stateful::acl_flows(nb, acl)))
    });
    for (u, f) in made {
        map.insert(u, f);
    }
}

/// Switch `i`'s ports attached to routers and its `localnet` ports (indices, in order).
fn special_ports(nb: &Nb, i: usize, lsp_router_peer: &[Peers]) -> (Arc<[usize]>, Arc<[usize]>) {
    let s = &nb.switches[i];
    (
        (0..s.ports.len())
            .filter(|&j| lsp_router_peer[i][j].is_some())
            .collect(),
        (0..s.ports.len())
            .filter(|&j| s.ports[j].kind == "localnet")
            .collect(),
    )
}

/// Per router, its load balancers' VIPs ([`Ctx::router_lb_ips`]).
fn router_lb_ips(nb: &Nb) -> Vec<Vec<Arc<LbIps>>> {
    let mut group_ips: HashMap<Uuid, Arc<LbIps>> = HashMap::new();
    nb.routers
        .iter()
        .map(|r| {
            let mut sets: Vec<Arc<LbIps>> = Vec::new();
            for g in &r.load_balancer_group {
                if let Some(lg) = nb.lb_groups.get(g) {
                    sets.push(
                        group_ips
                            .entry(*g)
                            .or_insert_with(|| Arc::new(LbIps::of(nb, &lg.load_balancer)))
                            .clone(),
                    );
                }
            }
            if !r.load_balancer.is_empty() {
                sets.push(Arc::new(LbIps::of(nb, &r.load_balancer)));
            }
            sets
        })
        .collect()
}

/// The service-monitor source IPs health-checked load balancers map to each switch port
/// ([`Ctx::svc_mon_src_ips`]).
fn svc_mon_src_ips(
    nb: &Nb,
    lsp_by_name: &OverlayMap<Arc<str>, (usize, usize)>,
) -> HashMap<(usize, usize), Vec<IpAddr>> {
    let mut out: HashMap<(usize, usize), Vec<IpAddr>> = HashMap::new();
    for lb in nb.lbs.values() {
        if lb.row.uuids("health_check").next().is_none() {
            continue;
        }
        for (_, v) in lb.row.get("ip_port_mappings").str_pairs() {
            let Some((port, src)) = v.split_once(':') else {
                continue;
            };
            let src = src.trim_start_matches('[');
            let src = src.split(']').next().unwrap_or(src);
            if let (Some(&at), Ok(ip)) = (lsp_by_name.get(port), src.parse::<IpAddr>()) {
                out.entry(at).or_default().push(ip);
            }
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    out
}

/// The lookups [`Ctx::new_threads`] makes from the switches alone (none needs a router).
struct SwitchSide {
    lsp_by_name: OverlayMap<Arc<str>, (usize, usize)>,
    lsp_by_uuid: OverlayMap<Uuid, (usize, usize)>,
    switch_pgs: Vec<Arc<[Arc<crate::nb::PortGroup>]>>,
    switch_acls: Vec<Arc<[Uuid]>>,
    switch_lbs: Vec<Arc<[Uuid]>>,
    switch_facts: Vec<ls_stateful::SwitchFacts>,
    switch_lb_classes: Vec<LbClass>,
    switch_acl_flows: OverlayMap<Uuid, Arc<[Vec<Lflow>; 2]>>,
    diags: Vec<Diag>,
}

impl SwitchSide {
    fn new(nb: &Nb, threads: usize) -> SwitchSide {
        let mut lsp_by_name = OverlayMap::new();
        let mut lsp_by_uuid = OverlayMap::new();
        let mut diags = Vec::new();
        for i in 0..nb.switches.len() {
            index_ports(nb, i, &mut lsp_by_name, &mut lsp_by_uuid, &mut diags);
        }
        let switch_pgs = switch_port_groups(nb, &lsp_by_uuid);
        let switch_acls: Vec<Arc<[Uuid]>> = (0..nb.switches.len())
            .map(|i| applied_acls(&nb.switches[i], &switch_pgs[i]))
            .collect();
        let mut lb_lists = LbLists::default();
        let switch_lbs: Vec<Arc<[Uuid]>> = nb
            .switches
            .iter()
            .map(|s| lb_lists.of(nb, &s.load_balancer, &s.load_balancer_group))
            .collect();
        let switch_facts = (0..nb.switches.len())
            .map(|i| ls_stateful::SwitchFacts::compute(nb, &switch_acls[i], &switch_lbs[i]))
            .collect();
        let switch_lb_classes = lb_classes(
            &nb.switches,
            |i| DpId(i as u32),
            |s| &s.load_balancer,
            |s| &s.load_balancer_group,
            |_| String::new(),
            nb,
        );
        let mut switch_acl_flows = OverlayMap::new();
        add_acl_flows(nb, &switch_acls, &mut switch_acl_flows, threads);
        SwitchSide {
            lsp_by_name,
            lsp_by_uuid,
            switch_pgs,
            switch_acls,
            switch_lbs,
            switch_facts,
            switch_lb_classes,
            switch_acl_flows,
            diags,
        }
    }
}

/// The lookups [`Ctx::new_threads`] makes from the routers alone (none needs a switch).
struct RouterSide {
    lrp_by_name: HashMap<String, (usize, usize)>,
    lrp_networks: Vec<Vec<Option<crate::addr::LportAddresses>>>,
    router_lbs: Vec<Arc<[Uuid]>>,
    router_lb_classes: Vec<LbClass>,
    router_nat_ips: Vec<HashSet<IpAddr>>,
    all_nat_ips: HashSet<IpAddr>,
    router_dgps: Vec<Vec<usize>>,
    router_lb_ips: Vec<Vec<Arc<LbIps>>>,
    lr_index: Vec<lr_routing::RouterIndex>,
    diags: Vec<Diag>,
}

impl RouterSide {
    fn new(nb: &Nb) -> RouterSide {
        let mut lrp_by_name = HashMap::new();
        let mut diags = Vec::new();
        let mut lrp_networks = Vec::with_capacity(nb.routers.len());
        for (i, r) in nb.routers.iter().enumerate() {
            let mut nets = Vec::with_capacity(r.ports.len());
            for (j, p) in r.ports.iter().enumerate() {
                if lrp_by_name.insert(p.name.clone(), (i, j)).is_some() {
                    diags.push(Diag {
                        table: "Logical_Router_Port",
                        uuid: p.uuid,
                        msg: format!("duplicate port name {:?}", p.name),
                    });
                }
                let n = parse_lrp_networks(&p.mac, &p.networks);
                if n.is_none() {
                    diags.push(Diag {
                        table: "Logical_Router_Port",
                        uuid: p.uuid,
                        msg: format!("bad mac {:?} or networks {:?}", p.mac, p.networks),
                    });
                }
                nets.push(n);
            }
            lrp_networks.push(nets);
        }
        let mut lb_lists = LbLists::default();
        let router_lbs: Vec<Arc<[Uuid]>> = nb
            .routers
            .iter()
            .map(|r| lb_lists.of(nb, &r.load_balancer, &r.load_balancer_group))
            .collect();
        let n_sw = nb.switches.len();
        let router_lb_classes = lb_classes(
            &nb.routers,
            |i| DpId((n_sw + i) as u32),
            |r| &r.load_balancer,
            |r| &r.load_balancer_group,
            |r| router_lb_flavor(r),
            nb,
        );
        let router_nat_ips: Vec<HashSet<IpAddr>> = nb
            .routers
            .iter()
            .map(|r| {
                r.nat
                    .iter()
                    .filter_map(|n| crate::addr::parse_ip_net(&n.external_ip))
                    .collect()
            })
            .collect();
        let router_dgps = nb
            .routers
            .iter()
            .map(|r| {
                r.ports
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| {
                        !p.gateway_chassis.is_empty()
                            || p.ha_chassis_group.is_some()
                            || p.options
                                .get("redirect-chassis")
                                .is_some_and(|c| !c.is_empty())
                    })
                    .map(|(j, _)| j)
                    .collect()
            })
            .collect();
        let all_nat_ips = router_nat_ips.iter().flatten().copied().collect();
        let router_lb_ips = router_lb_ips(nb);
        let lr_index = lr_routing::index_routers(nb, &lrp_networks);
        RouterSide {
            lrp_by_name,
            lrp_networks,
            router_lbs,
            router_lb_classes,
            router_nat_ips,
            all_nat_ips,
            router_dgps,
            router_lb_ips,
            lr_index,
            diags,
        }
    }
}

impl Ctx {
    /// Builds the lookups.
    pub fn new(nb: impl Into<Arc<Nb>>) -> Ctx {
        Ctx::new_threads(nb, 1)
    }

    /// [`Ctx::new`] on `threads` threads: with two or more, the routers' lookups are made
    /// beside the switches', and the ACLs' flows are compiled on all of them.
    pub fn new_threads(nb: impl Into<Arc<Nb>>, threads: usize) -> Ctx {
        let nb_arc: Arc<Nb> = nb.into();
        let nb: &Nb = &nb_arc;
        let (sw, rt) = if threads >= 2 {
            std::thread::scope(|s| {
                let h = s.spawn(|| RouterSide::new(nb));
                let sw = SwitchSide::new(nb, threads);
                let rt = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                (sw, rt)
            })
        } else {
            let rt = RouterSide::new(nb);
            (SwitchSide::new(nb, 1), rt)
        };
        // Diagnostics in the order a serial pass meets them: switch ports, router ports,
        // then the attachments.
        let mut diags = sw.diags;
        diags.extend(rt.diags);
        let mut datapaths = Vec::with_capacity(nb.switches.len() + nb.routers.len());
        for (i, s) in nb.switches.iter().enumerate() {
            datapaths.push(Datapath {
                name: s.name.clone(),
                uuid: s.uuid,
                kind: DpKind::Switch(i),
            });
        }
        for (i, r) in nb.routers.iter().enumerate() {
            datapaths.push(Datapath {
                name: r.name.clone(),
                uuid: r.uuid,
                kind: DpKind::Router(i),
            });
        }
        let mut lsp_router_peer: Vec<Peers> = vec![Arc::from([]); nb.switches.len()];
        let mut lrp_switch_peer: Vec<Peers> = nb
            .routers
            .iter()
            .map(|r| vec![None; r.ports.len()].into())
            .collect();
        for i in 0..nb.switches.len() {
            attach_switch(
                nb,
                i,
                &rt.lrp_by_name,
                &mut lsp_router_peer,
                &mut lrp_switch_peer,
                &mut diags,
            );
        }
        let mut switch_router_ports = Vec::with_capacity(nb.switches.len());
        let mut switch_localnet_ports = Vec::with_capacity(nb.switches.len());
        for i in 0..nb.switches.len() {
            let (r, l) = special_ports(nb, i, &lsp_router_peer);
            switch_router_ports.push(r);
            switch_localnet_ports.push(l);
        }
        let svc_mon_src_ips = svc_mon_src_ips(nb, &sw.lsp_by_name);
        let tunnel_keys = (1..=datapaths.len() as u32).collect();
        let lrp_tunnel_keys = nb
            .routers
            .iter()
            .map(|r| (1..=r.ports.len() as u32).collect())
            .collect();
        Ctx {
            nb: nb_arc.clone(),
            lr_index: Arc::new(rt.lr_index),
            tunnel_keys: Arc::new(tunnel_keys),
            lrp_tunnel_keys: Arc::new(lrp_tunnel_keys),
            datapaths: Arc::new(datapaths),
            lsp_by_name: sw.lsp_by_name,
            lsp_by_uuid: sw.lsp_by_uuid,
            lrp_by_name: Arc::new(rt.lrp_by_name),
            lsp_router_peer,
            lrp_switch_peer,
            lrp_networks: Arc::new(rt.lrp_networks),
            switch_acls: sw.switch_acls,
            switch_pgs: sw.switch_pgs,
            switch_lbs: sw.switch_lbs,
            router_lbs: Arc::new(rt.router_lbs),
            switch_lb_classes: Arc::new(sw.switch_lb_classes),
            router_lb_classes: Arc::new(rt.router_lb_classes),
            all_nat_ips: Arc::new(rt.all_nat_ips),
            router_nat_ips: Arc::new(rt.router_nat_ips),
            router_dgps: Arc::new(rt.router_dgps),
            switch_facts: sw.switch_facts,
            switch_acl_flows: sw.switch_acl_flows,
            switch_router_ports,
            switch_localnet_ports,
            router_lb_ips: Arc::new(rt.router_lb_ips),
            svc_mon_src_ips: Arc::new(svc_mon_src_ips),
            diags,
        }
    }

    /// The context of `nb`, the model [`Nb::patched`] made from `self.nb` with `patch`:
    /// the lookups of the switches it rebuilt are redone, those that depend on ACLs, port
    /// groups and load balancers are recomputed, the rest (routers, datapaths, tunnel keys)
    /// is shared with `self`. Equal to `Ctx::new(nb)` with `self`'s tunnel keys (the
    /// incremental tests check the flows it gives).
    pub fn patched(&self, nb: Nb, patch: &crate::nb::Patch) -> Ctx {
        let nb_arc = Arc::new(nb);
        let nb: &Nb = &nb_arc;
        let mut diags = Vec::new();
        let mut lsp_by_name = self.lsp_by_name.clone();
        let mut lsp_by_uuid = self.lsp_by_uuid.clone();
        let mut lsp_router_peer = self.lsp_router_peer.clone();
        let mut lrp_switch_peer = self.lrp_switch_peer.clone();
        let mut switch_router_ports = self.switch_router_ports.clone();
        let mut switch_localnet_ports = self.switch_localnet_ports.clone();
        let mut switch_lbs = self.switch_lbs.clone();
        for &i in &patch.switches {
            for p in &self.nb.switches[i].ports {
                if lsp_by_name
                    .get(p.name.as_str())
                    .is_some_and(|&(s, _)| s == i)
                {
                    lsp_by_name.remove(p.name.as_str());
                }
                lsp_by_uuid.remove(&p.uuid);
            }
            for peers in lrp_switch_peer.iter_mut() {
                if peers.iter().any(|p| p.is_some_and(|(s, _)| s == i)) {
                    for peer in Arc::make_mut(peers).iter_mut() {
                        if peer.is_some_and(|(s, _)| s == i) {
                            *peer = None;
                        }
                    }
                }
            }
        }
        for &i in &patch.switches {
            index_ports(nb, i, &mut lsp_by_name, &mut lsp_by_uuid, &mut diags);
            attach_switch(
                nb,
                i,
                &self.lrp_by_name,
                &mut lsp_router_peer,
                &mut lrp_switch_peer,
                &mut diags,
            );
            let (r, l) = special_ports(nb, i, &lsp_router_peer);
            switch_router_ports[i] = r;
            switch_localnet_ports[i] = l;
            let s = &nb.switches[i];
            let was = &self.nb.switches[i];
            switch_lbs[i] = if s.load_balancer == was.load_balancer
                && s.load_balancer_group == was.load_balancer_group
            {
                self.switch_lbs[i].clone()
            } else {
                nb.lbs_of(&s.load_balancer, &s.load_balancer_group).into()
            };
        }
        // The switches whose port groups may differ: the rebuilt ones and those a changed
        // group had or has a port on. Elsewhere neither the groups nor their rows changed.
        let (switch_pgs, moved) = self.patched_switch_pgs(nb, patch, &lsp_by_uuid);
        let mut switch_acls = self.switch_acls.clone();
        for &i in &moved {
            let acls = applied_acls(&nb.switches[i], &switch_pgs[i]);
            // Unchanged lists stay shared (later comparisons are then by pointer).
            if acls != self.switch_acls[i] {
                switch_acls[i] = acls;
            }
        }
        // Facts follow the applied ACLs and load balancers: recomputed where those or their
        // rows changed.
        let all_facts = !patch.acls.is_empty() || !patch.lbs.is_empty();
        let mut switch_facts = self.switch_facts.clone();
        for (i, f) in switch_facts.iter_mut().enumerate() {
            // (`moved` holds the rebuilt switches too.)
            if all_facts || moved.contains(&i) {
                *f = ls_stateful::SwitchFacts::compute(nb, &switch_acls[i], &switch_lbs[i]);
            }
        }
        let lb_lists_moved = patch.switches.iter().any(|&i| {
            let (a, b) = (&self.nb.switches[i], &nb.switches[i]);
            a.load_balancer != b.load_balancer || a.load_balancer_group != b.load_balancer_group
        });
        let switch_lb_classes = if lb_lists_moved {
            Arc::new(lb_classes(
                &nb.switches,
                |i| DpId(i as u32),
                |s| &s.load_balancer,
                |s| &s.load_balancer_group,
                |_| String::new(),
                nb,
            ))
        } else {
            self.switch_lb_classes.clone()
        };
        // ACL flows: a changed ACL's are remade; an ACL newly applied somewhere gets its.
        // (An entry may outlive the last switch applying it; lookups go through
        // `switch_acls`.)
        let mut switch_acl_flows = self.switch_acl_flows.clone();
        for u in &patch.acls {
            switch_acl_flows.remove(u);
            if let Some(acl) = nb.acls.get(u) {
                switch_acl_flows.insert(*u, Arc::new(ls_stateful::acl_flows(nb, acl)));
            }
        }
        let moved_acls: Vec<Arc<[Uuid]>> = moved.iter().map(|&i| switch_acls[i].clone()).collect();
        add_acl_flows(nb, &moved_acls, &mut switch_acl_flows, 1);
        let (router_lb_ips, lr_index) = if patch.lbs.is_empty() {
            (self.router_lb_ips.clone(), self.lr_index.clone())
        } else {
            (
                Arc::new(router_lb_ips(nb)),
                Arc::new(lr_routing::index_routers(nb, &self.lrp_networks)),
            )
        };
        // Health-checked load balancers map port names to (switch, port index): remade
        // when there are any (indices move as ports come and go) or when LBs changed.
        let svc_mon_src_ips = if patch.lbs.is_empty() && self.svc_mon_src_ips.is_empty() {
            self.svc_mon_src_ips.clone()
        } else {
            Arc::new(svc_mon_src_ips(nb, &lsp_by_name))
        };
        Ctx {
            nb: nb_arc.clone(),
            datapaths: self.datapaths.clone(),
            lsp_by_name,
            lsp_by_uuid,
            lrp_by_name: self.lrp_by_name.clone(),
            lsp_router_peer,
            lrp_switch_peer,
            lrp_networks: self.lrp_networks.clone(),
            switch_acls,
            switch_pgs,
            switch_lbs,
            router_lbs: self.router_lbs.clone(),
            switch_lb_classes,
            router_lb_classes: self.router_lb_classes.clone(),
            router_nat_ips: self.router_nat_ips.clone(),
            router_dgps: self.router_dgps.clone(),
            all_nat_ips: self.all_nat_ips.clone(),
            switch_facts,
            switch_acl_flows,
            switch_router_ports,
            switch_localnet_ports,
            router_lb_ips,
            svc_mon_src_ips,
            lr_index,
            tunnel_keys: self.tunnel_keys.clone(),
            lrp_tunnel_keys: self.lrp_tunnel_keys.clone(),
            diags,
        }
    }

    /// The per-switch port groups after `patch` (`lsp_by_uuid` already patched), and the
    /// switches whose list was recomputed: the rebuilt switches and every switch a changed
    /// port group had or has a port on. A group gains a switch only through a change of
    /// its row or a port moving onto the switch; it can lose one only where it was listed
    /// — so the candidates for switch `i` are its old groups, the changed groups, and the
    /// groups of ports that moved onto it. Unchanged lists stay shared.
    fn patched_switch_pgs(
        &self,
        nb: &Nb,
        patch: &crate::nb::Patch,
        lsp_by_uuid: &OverlayMap<Uuid, (usize, usize)>,
    ) -> (Vec<SwitchPgs>, BTreeSet<usize>) {
        let changed: HashSet<Uuid> = patch.port_groups.iter().copied().collect();
        let new_changed: Vec<&Arc<PortGroup>> = if changed.is_empty() {
            Vec::new()
        } else {
            nb.port_groups
                .iter()
                .filter(|g| changed.contains(&g.uuid))
                .collect()
        };
        let mut todo: BTreeSet<usize> = patch.switches.iter().copied().collect();
        if !changed.is_empty() {
            for g in self
                .nb
                .port_groups
                .iter()
                .filter(|g| changed.contains(&g.uuid))
            {
                todo.extend(
                    g.ports
                        .iter()
                        .filter_map(|p| self.lsp_by_uuid.get(p).map(|&(i, _)| i)),
                );
            }
        }
        for g in &new_changed {
            todo.extend(
                g.ports
                    .iter()
                    .filter_map(|p| lsp_by_uuid.get(p).map(|&(i, _)| i)),
            );
        }
        let mut out = self.switch_pgs.clone();
        for &i in &todo {
            let mut cand: Vec<&Arc<PortGroup>> = self.switch_pgs[i]
                .iter()
                .filter(|g| !changed.contains(&g.uuid))
                .collect();
            cand.extend(new_changed.iter().copied());
            if patch.switches.contains(&i) {
                // Ports that were on another switch before: their groups are candidates.
                let moved_in: HashSet<Uuid> = nb.switches[i]
                    .ports
                    .iter()
                    .filter(|p| self.lsp_by_uuid.get(&p.uuid).is_some_and(|&(s, _)| s != i))
                    .map(|p| p.uuid)
                    .collect();
                if !moved_in.is_empty() {
                    cand.extend(
                        nb.port_groups
                            .iter()
                            .filter(|g| g.ports.iter().any(|p| moved_in.contains(p))),
                    );
                }
            }
            // A group is on the switch when it holds one of the switch's ports: a scan of
            // the group against the switch's few ports (a cluster-wide group holds
            // thousands; probing the whole port index for each is what this avoids).
            let here: HashSet<Uuid> = nb.switches[i]
                .ports
                .iter()
                .map(|p| p.uuid)
                .filter(|u| lsp_by_uuid.get(u).is_some_and(|&(s, _)| s == i))
                .collect();
            let mut v: Vec<Arc<PortGroup>> = cand
                .into_iter()
                .filter(|g| g.ports.iter().any(|p| here.contains(p)))
                .cloned()
                .collect();
            v.sort_by_key(|g| g.uuid);
            v.dedup_by_key(|g| g.uuid);
            let same = v.len() == self.switch_pgs[i].len()
                && v.iter()
                    .zip(self.switch_pgs[i].iter())
                    .all(|(a, b)| Arc::ptr_eq(a, b));
            if !same {
                out[i] = v.into();
            }
        }
        (out, todo)
    }

    /// Takes the datapaths' tunnel keys from an `OVN_Southbound` replica's
    /// `Datapath_Binding` rows (matched by `external_ids:logical-switch` /
    /// `logical-router`), as ovn-northd keeps the keys it assigned before. Datapaths the SB
    /// does not know keep their default key.
    pub fn load_tunnel_keys(&mut self, sb: &ovsdb::Database) {
        let keys = self.read_tunnel_keys(sb);
        self.set_tunnel_keys(keys);
    }

    /// The keys [`Ctx::load_tunnel_keys`] takes, read without changing the context (so
    /// the daemon reads them while it checks the SB's bindings on another thread).
    pub fn read_tunnel_keys(&self, sb: &ovsdb::Database) -> TunnelKeys {
        let mut by_uuid: HashMap<Uuid, u32> = HashMap::new();
        for r in sb.table("Datapath_Binding").rows.values() {
            let Some(key) = r.int("tunnel_key").and_then(|k| u32::try_from(k).ok()) else {
                continue;
            };
            for (k, v) in r.get("external_ids").str_pairs() {
                if (k == "logical-switch" || k == "logical-router")
                    && let Some(u) = Uuid::parse(v)
                {
                    by_uuid.insert(u, key);
                }
            }
        }
        let mut keys = TunnelKeys::default();
        for (i, d) in self.datapaths.iter().enumerate() {
            if let Some(&k) = by_uuid.get(&d.uuid) {
                keys.datapaths.push((i, k));
            }
        }
        for r in sb.table("Port_Binding").rows.values() {
            let Some(key) = r.int("tunnel_key").and_then(|k| u32::try_from(k).ok()) else {
                continue;
            };
            if let Some(&(ri, rj)) = self.lrp_by_name.get(r.str("logical_port")) {
                keys.router_ports.push((ri, rj, key));
            }
        }
        keys
    }

    /// Takes keys read by [`Ctx::read_tunnel_keys`].
    pub fn set_tunnel_keys(&mut self, keys: TunnelKeys) {
        for (i, k) in keys.datapaths {
            Arc::make_mut(&mut self.tunnel_keys)[i] = k;
        }
        for (ri, rj, k) in keys.router_ports {
            Arc::make_mut(&mut self.lrp_tunnel_keys)[ri][rj] = k;
        }
    }

    /// The datapath id of switch `i`.
    pub fn switch_dp(&self, i: usize) -> DpId {
        DpId(i as u32)
    }

    /// The datapath id of router `i`.
    pub fn router_dp(&self, i: usize) -> DpId {
        DpId((self.nb.switches.len() + i) as u32)
    }

    /// Switch `i`.
    pub fn switch(&self, i: usize) -> &LogicalSwitch {
        &self.nb.switches[i]
    }

    /// Router `i`.
    pub fn router(&self, i: usize) -> &LogicalRouter {
        &self.nb.routers[i]
    }

    /// Port `j` of switch `i`.
    pub fn lsp(&self, i: usize, j: usize) -> &Lsp {
        &self.nb.switches[i].ports[j]
    }

    /// Port `j` of router `i`.
    pub fn lrp(&self, i: usize, j: usize) -> &Lrp {
        &self.nb.routers[i].ports[j]
    }
}

/// One unit of work: the flows one NB object yields on one datapath.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Item {
    /// A switch's own flows (defaults and those over all its ports/ACLs/LBs).
    SwitchDp(usize),
    /// One switch port's flows.
    SwitchPort(usize, usize),
    /// One ACL on one switch.
    SwitchAcl(usize, Uuid),
    /// One load balancer on a class of switches (index into [`Ctx::switch_lb_classes`]).
    SwitchLb(usize, Uuid),
    /// A router's own flows.
    RouterDp(usize),
    /// One router port's flows.
    RouterPort(usize, usize),
    /// One static route (index into the router's `static_routes`).
    RouterRoute(usize, usize),
    /// One policy (index into the router's `policies`).
    RouterPolicy(usize, usize),
    /// One NAT rule (index into the router's `nat`).
    RouterNat(usize, usize),
    /// One load balancer on a class of routers (index into [`Ctx::router_lb_classes`]).
    RouterLb(usize, Uuid),
}

/// Every item of the network, in a fixed order.
pub fn items(ctx: &Ctx) -> Vec<Item> {
    let mut v = Vec::new();
    for (i, s) in ctx.nb.switches.iter().enumerate() {
        v.push(Item::SwitchDp(i));
        v.extend((0..s.ports.len()).map(|j| Item::SwitchPort(i, j)));
        v.extend(ctx.switch_acls[i].iter().map(|&a| Item::SwitchAcl(i, a)));
    }
    for (i, r) in ctx.nb.routers.iter().enumerate() {
        v.push(Item::RouterDp(i));
        v.extend((0..r.ports.len()).map(|j| Item::RouterPort(i, j)));
        v.extend((0..r.static_routes.len()).map(|j| Item::RouterRoute(i, j)));
        v.extend((0..r.policies.len()).map(|j| Item::RouterPolicy(i, j)));
        v.extend((0..r.nat.len()).map(|j| Item::RouterNat(i, j)));
    }
    for (c, class) in ctx.switch_lb_classes.iter().enumerate() {
        v.extend(class.lbs.iter().map(|&l| Item::SwitchLb(c, l)));
    }
    for (c, class) in ctx.router_lb_classes.iter().enumerate() {
        v.extend(class.lbs.iter().map(|&l| Item::RouterLb(c, l)));
    }
    v
}

/// Runs one item, appending its flows to `out`.
pub fn build_item(ctx: &Ctx, item: Item, out: &mut Vec<Lflow>) {
    match item {
        Item::SwitchDp(i) => {
            let mut s = Sink::new(ctx.switch_dp(i), out);
            ls_l2::switch_dp(ctx, i, &mut s);
            ls_stateful::switch_dp(ctx, i, &mut s);
        }
        Item::SwitchPort(i, j) => {
            let mut s = Sink::new(ctx.switch_dp(i), out);
            ls_l2::switch_port(ctx, i, j, &mut s);
            ls_stateful::switch_port(ctx, i, j, &mut s);
        }
        Item::SwitchAcl(i, a) => {
            if let Some(acl) = ctx.nb.acls.get(&a) {
                ls_stateful::switch_acl(ctx, i, acl, &mut Sink::new(ctx.switch_dp(i), out));
            }
        }
        Item::SwitchLb(c, l) => {
            let class = &ctx.switch_lb_classes[c];
            if let Some(lb) = ctx.nb.lbs.get(&l) {
                let mut s = Sink::group(class.dps.clone(), out);
                ls_stateful::switch_lb(ctx, class.rep, lb, &mut s);
                ls_l2::switch_lb(ctx, class.rep, lb, &mut s);
            }
        }
        Item::RouterDp(i) => {
            let mut s = Sink::new(ctx.router_dp(i), out);
            lr_routing::router_dp(ctx, i, &mut s);
            lr_nat::router_dp(ctx, i, &mut s);
        }
        Item::RouterPort(i, j) => {
            let mut s = Sink::new(ctx.router_dp(i), out);
            lr_routing::router_port(ctx, i, j, &mut s);
            lr_nat::router_port(ctx, i, j, &mut s);
        }
        Item::RouterRoute(i, j) => {
            lr_routing::router_route(ctx, i, j, &mut Sink::new(ctx.router_dp(i), out))
        }
        Item::RouterPolicy(i, j) => {
            lr_routing::router_policy(ctx, i, j, &mut Sink::new(ctx.router_dp(i), out))
        }
        Item::RouterNat(i, j) => {
            let mut s = Sink::new(ctx.router_dp(i), out);
            lr_nat::router_nat(ctx, i, j, &mut s);
            lr_routing::router_nat(ctx, i, j, &mut s);
        }
        Item::RouterLb(c, l) => {
            let class = &ctx.router_lb_classes[c];
            let Some(lb) = ctx.nb.lbs.get(&l) else { return };
            // A VIP that is also some member's NAT address changes that member's flows:
            // then build the LB for each member on its own.
            let split = matches!(class.dps, Dps::Group(_))
                && lb
                    .vips
                    .iter()
                    .any(|(k, _)| lb_vip_ip(k).is_some_and(|ip| ctx.all_nat_ips.contains(&ip)));
            if split {
                for &d in class.dps.as_slice() {
                    let rt = d.0 as usize - ctx.nb.switches.len();
                    let mut s = Sink::new(d, out);
                    lr_nat::router_lb(ctx, rt, lb, &mut s);
                    lr_routing::router_lb(ctx, rt, lb, &mut s);
                }
            } else {
                let mut s = Sink::group(class.dps.clone(), out);
                lr_nat::router_lb(ctx, class.rep, lb, &mut s);
                lr_routing::router_lb(ctx, class.rep, lb, &mut s);
            }
        }
    }
}

/// Builds every flow on one thread; the same flow from several items becomes one flow on
/// the union of their datapaths ([`merge_same`]); sorted.
pub fn build_serial(ctx: &Ctx) -> Vec<Lflow> {
    let mut map = crate::lflow::MergeMap::default();
    let mut out = Vec::new();
    for it in items(ctx) {
        build_item(ctx, it, &mut out);
        if out.len() > 4096 {
            crate::lflow::merge_into(&mut map, std::mem::take(&mut out));
        }
    }
    crate::lflow::merge_into(&mut map, out);
    crate::lflow::finish(map)
}
