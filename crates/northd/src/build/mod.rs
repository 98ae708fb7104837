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
use crate::lflow::{DpId, Lflow, Sink};
use crate::nb::{Diag, LogicalRouter, LogicalSwitch, Lrp, Lsp, Nb};
use ovsdb::Uuid;
use std::collections::{BTreeSet, HashMap};

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
pub struct Ctx<'a> {
    /// The NB.
    pub nb: &'a Nb,
    /// Datapaths: switches first (in `nb.switches` order), then routers.
    pub datapaths: Vec<Datapath>,
    /// LSP name → (switch index, port index).
    pub lsp_by_name: HashMap<&'a str, (usize, usize)>,
    /// LSP UUID → (switch index, port index).
    pub lsp_by_uuid: HashMap<Uuid, (usize, usize)>,
    /// LRP name → (router index, port index).
    pub lrp_by_name: HashMap<&'a str, (usize, usize)>,
    /// Per switch: per port, the router port it is attached to (`type=router`,
    /// `options:router-port`), as (router index, port index).
    pub lsp_router_peer: Vec<Vec<Option<(usize, usize)>>>,
    /// Per router: per port, the switch port that attaches it, as (switch index, port
    /// index), when one does.
    pub lrp_switch_peer: Vec<Vec<Option<(usize, usize)>>>,
    /// Per router: per port, its parsed MAC and networks (`None` when malformed).
    pub lrp_networks: Vec<Vec<Option<LportAddresses>>>,
    /// Per switch: the ACLs applied (its own and those of port groups with a port on it),
    /// sorted by UUID.
    pub switch_acls: Vec<Vec<Uuid>>,
    /// Per switch: the load balancers applied (own and groups'), sorted by UUID.
    pub switch_lbs: Vec<Vec<Uuid>>,
    /// Per router: the load balancers applied (own and groups'), sorted by UUID.
    pub router_lbs: Vec<Vec<Uuid>>,
    /// Per router: next-hop lookup and ECMP groups of its static routes
    /// ([`lr_routing::index_routers`]).
    pub lr_index: Vec<lr_routing::RouterIndex>,
    /// Per datapath (same order as `datapaths`): its SB tunnel key. Defaults to the
    /// position + 1; a caller that knows the SB `Datapath_Binding` keys may overwrite them
    /// (they appear in flows as `$_rtr_lb_KEY_ip4`).
    pub tunnel_keys: Vec<u32>,
    /// Per router: per port, its SB `Port_Binding` tunnel key (default position + 1;
    /// [`Ctx::load_tunnel_keys`] takes the SB's). Appears in ECMP symmetric-reply flows.
    pub lrp_tunnel_keys: Vec<Vec<u32>>,
    /// Problems found while building the context.
    pub diags: Vec<Diag>,
}

impl<'a> Ctx<'a> {
    /// Builds the lookups.
    pub fn new(nb: &'a Nb) -> Ctx<'a> {
        let mut datapaths = Vec::with_capacity(nb.switches.len() + nb.routers.len());
        let mut lsp_by_name = HashMap::new();
        let mut lsp_by_uuid = HashMap::new();
        let mut lrp_by_name = HashMap::new();
        let mut diags = Vec::new();
        for (i, s) in nb.switches.iter().enumerate() {
            datapaths.push(Datapath {
                name: s.name.clone(),
                uuid: s.uuid,
                kind: DpKind::Switch(i),
            });
            for (j, p) in s.ports.iter().enumerate() {
                if lsp_by_name.insert(p.name.as_str(), (i, j)).is_some() {
                    diags.push(Diag {
                        table: "Logical_Switch_Port",
                        uuid: p.uuid,
                        msg: format!("duplicate port name {:?}", p.name),
                    });
                }
                lsp_by_uuid.insert(p.uuid, (i, j));
            }
        }
        let mut lrp_networks = Vec::with_capacity(nb.routers.len());
        for (i, r) in nb.routers.iter().enumerate() {
            datapaths.push(Datapath {
                name: r.name.clone(),
                uuid: r.uuid,
                kind: DpKind::Router(i),
            });
            let mut nets = Vec::with_capacity(r.ports.len());
            for (j, p) in r.ports.iter().enumerate() {
                if lrp_by_name.insert(p.name.as_str(), (i, j)).is_some() {
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
        let mut lsp_router_peer: Vec<Vec<Option<(usize, usize)>>> = nb
            .switches
            .iter()
            .map(|s| vec![None; s.ports.len()])
            .collect();
        let mut lrp_switch_peer: Vec<Vec<Option<(usize, usize)>>> = nb
            .routers
            .iter()
            .map(|r| vec![None; r.ports.len()])
            .collect();
        for (i, s) in nb.switches.iter().enumerate() {
            for (j, p) in s.ports.iter().enumerate() {
                if p.kind != "router" {
                    continue;
                }
                let Some(rp) = p.options.get("router-port") else {
                    continue;
                };
                match lrp_by_name.get(rp.as_str()) {
                    Some(&(ri, rj)) => {
                        lsp_router_peer[i][j] = Some((ri, rj));
                        lrp_switch_peer[ri][rj] = Some((i, j));
                    }
                    None => diags.push(Diag {
                        table: "Logical_Switch_Port",
                        uuid: p.uuid,
                        msg: format!("router-port {rp:?} does not exist"),
                    }),
                }
            }
        }
        let mut switch_acls: Vec<BTreeSet<Uuid>> = nb
            .switches
            .iter()
            .map(|s| s.acls.iter().copied().collect())
            .collect();
        for pg in &nb.port_groups {
            let mut on: BTreeSet<usize> = BTreeSet::new();
            for p in &pg.ports {
                if let Some(&(i, _)) = lsp_by_uuid.get(p) {
                    on.insert(i);
                }
            }
            for i in on {
                switch_acls[i].extend(pg.acls.iter().copied());
            }
        }
        let switch_lbs = nb
            .switches
            .iter()
            .map(|s| nb.lbs_of(&s.load_balancer, &s.load_balancer_group))
            .collect();
        let router_lbs = nb
            .routers
            .iter()
            .map(|r| nb.lbs_of(&r.load_balancer, &r.load_balancer_group))
            .collect();
        let lr_index = lr_routing::index_routers(nb, &lrp_networks);
        let tunnel_keys = (1..=datapaths.len() as u32).collect();
        let lrp_tunnel_keys = nb
            .routers
            .iter()
            .map(|r| (1..=r.ports.len() as u32).collect())
            .collect();
        Ctx {
            nb,
            lr_index,
            tunnel_keys,
            lrp_tunnel_keys,
            datapaths,
            lsp_by_name,
            lsp_by_uuid,
            lrp_by_name,
            lsp_router_peer,
            lrp_switch_peer,
            lrp_networks,
            switch_acls: switch_acls
                .into_iter()
                .map(|s| s.into_iter().collect())
                .collect(),
            switch_lbs,
            router_lbs,
            diags,
        }
    }

    /// Takes the datapaths' tunnel keys from an `OVN_Southbound` replica's
    /// `Datapath_Binding` rows (matched by `external_ids:logical-switch` /
    /// `logical-router`), as ovn-northd keeps the keys it assigned before. Datapaths the SB
    /// does not know keep their default key.
    pub fn load_tunnel_keys(&mut self, sb: &ovsdb::Database) {
        let mut by_uuid: HashMap<String, u32> = HashMap::new();
        for r in sb.table("Datapath_Binding").rows.values() {
            let Some(key) = r.int("tunnel_key").and_then(|k| u32::try_from(k).ok()) else {
                continue;
            };
            for (k, v) in r.get("external_ids").str_pairs() {
                if k == "logical-switch" || k == "logical-router" {
                    by_uuid.insert(v.to_owned(), key);
                }
            }
        }
        for (i, d) in self.datapaths.iter().enumerate() {
            if let Some(&k) = by_uuid.get(&d.uuid.to_string()) {
                self.tunnel_keys[i] = k;
            }
        }
        for r in sb.table("Port_Binding").rows.values() {
            let Some(key) = r.int("tunnel_key").and_then(|k| u32::try_from(k).ok()) else {
                continue;
            };
            if let Some(&(ri, rj)) = self.lrp_by_name.get(r.str("logical_port")) {
                self.lrp_tunnel_keys[ri][rj] = key;
            }
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
    pub fn switch(&self, i: usize) -> &'a LogicalSwitch {
        &self.nb.switches[i]
    }

    /// Router `i`.
    pub fn router(&self, i: usize) -> &'a LogicalRouter {
        &self.nb.routers[i]
    }

    /// Port `j` of switch `i`.
    pub fn lsp(&self, i: usize, j: usize) -> &'a Lsp {
        &self.nb.switches[i].ports[j]
    }

    /// Port `j` of router `i`.
    pub fn lrp(&self, i: usize, j: usize) -> &'a Lrp {
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
    /// One load balancer on one switch.
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
    /// One load balancer on one router.
    RouterLb(usize, Uuid),
}

/// Every item of the network, in a fixed order.
pub fn items(ctx: &Ctx<'_>) -> Vec<Item> {
    let mut v = Vec::new();
    for (i, s) in ctx.nb.switches.iter().enumerate() {
        v.push(Item::SwitchDp(i));
        v.extend((0..s.ports.len()).map(|j| Item::SwitchPort(i, j)));
        v.extend(ctx.switch_acls[i].iter().map(|&a| Item::SwitchAcl(i, a)));
        v.extend(ctx.switch_lbs[i].iter().map(|&l| Item::SwitchLb(i, l)));
    }
    for (i, r) in ctx.nb.routers.iter().enumerate() {
        v.push(Item::RouterDp(i));
        v.extend((0..r.ports.len()).map(|j| Item::RouterPort(i, j)));
        v.extend((0..r.static_routes.len()).map(|j| Item::RouterRoute(i, j)));
        v.extend((0..r.policies.len()).map(|j| Item::RouterPolicy(i, j)));
        v.extend((0..r.nat.len()).map(|j| Item::RouterNat(i, j)));
        v.extend(ctx.router_lbs[i].iter().map(|&l| Item::RouterLb(i, l)));
    }
    v
}

/// Runs one item, appending its flows to `out`.
pub fn build_item(ctx: &Ctx<'_>, item: Item, out: &mut Vec<Lflow>) {
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
        Item::SwitchLb(i, l) => {
            if let Some(lb) = ctx.nb.lbs.get(&l) {
                let mut s = Sink::new(ctx.switch_dp(i), out);
                ls_stateful::switch_lb(ctx, i, lb, &mut s);
                ls_l2::switch_lb(ctx, i, lb, &mut s);
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
        Item::RouterLb(i, l) => {
            if let Some(lb) = ctx.nb.lbs.get(&l) {
                let mut s = Sink::new(ctx.router_dp(i), out);
                lr_nat::router_lb(ctx, i, lb, &mut s);
                lr_routing::router_lb(ctx, i, lb, &mut s);
            }
        }
    }
}

/// Builds every flow on one thread; duplicates (the same flow from two items) kept once,
/// sorted.
pub fn build_serial(ctx: &Ctx<'_>) -> Vec<Lflow> {
    let mut out = Vec::new();
    for it in items(ctx) {
        build_item(ctx, it, &mut out);
    }
    out.sort_unstable();
    out.dedup();
    out
}
