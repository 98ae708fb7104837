//! The OVN northbound model northd compiles: typed rows read from an `OVN_Northbound`
//! replica ([`ovsdb::Database`]), references resolved.
//!
//! A dangling reference or a malformed value is a [`Diag`] for that row (logged by the
//! caller, as ovn-northd logs it); the row is skipped or the bad part dropped, and the rest of
//! the network still compiles. Every typed row keeps its raw [`ovsdb::Row`] (`row`) so a stage
//! can read a column this model does not name yet.

use ovsdb::{Database, Row, Uuid};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// A string→string map column.
pub type Smap = BTreeMap<String, String>;

fn smap(row: &Row, col: &str) -> Smap {
    row.get(col)
        .str_pairs()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn strings(row: &Row, col: &str) -> Vec<String> {
    row.strs(col).map(str::to_owned).collect()
}

/// A problem with one NB row: reported, and the rest compiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    /// Table of the bad row.
    pub table: &'static str,
    /// The row.
    pub uuid: Uuid,
    /// What is wrong.
    pub msg: String,
}

impl std::fmt::Display for Diag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.table, self.uuid, self.msg)
    }
}

/// `Logical_Switch_Port`.
#[derive(Debug, Clone)]
pub struct Lsp {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `type` (`""`, `router`, `localnet`, `localport`, `external`, `virtual`, …).
    pub kind: String,
    /// `addresses` entries as written (`"MAC IP..."`, `router`, `unknown`, `dynamic`).
    pub addresses: Vec<String>,
    /// `port_security` entries as written.
    pub port_security: Vec<String>,
    /// `options`.
    pub options: Smap,
    /// `enabled` (absent means enabled).
    pub enabled: Option<bool>,
    /// `up`.
    pub up: Option<bool>,
    /// `external_ids`.
    pub external_ids: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

impl Lsp {
    /// False only when `enabled` is explicitly false.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }
}

/// `Logical_Switch`.
#[derive(Debug, Clone)]
pub struct LogicalSwitch {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `ports`, in UUID order.
    pub ports: Vec<Lsp>,
    /// `acls` (UUIDs into [`Nb::acls`]).
    pub acls: Vec<Uuid>,
    /// `load_balancer` (UUIDs into [`Nb::lbs`]).
    pub load_balancer: Vec<Uuid>,
    /// `load_balancer_group` (UUIDs into [`Nb::lb_groups`]).
    pub load_balancer_group: Vec<Uuid>,
    /// `other_config`.
    pub other_config: Smap,
    /// `external_ids`.
    pub external_ids: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `Logical_Router_Port`.
#[derive(Debug, Clone)]
pub struct Lrp {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `mac`.
    pub mac: String,
    /// `networks`.
    pub networks: Vec<String>,
    /// `peer`.
    pub peer: Option<String>,
    /// `options`.
    pub options: Smap,
    /// `enabled`.
    pub enabled: Option<bool>,
    /// `gateway_chassis` (UUIDs).
    pub gateway_chassis: Vec<Uuid>,
    /// `ha_chassis_group`.
    pub ha_chassis_group: Option<Uuid>,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `Logical_Router_Static_Route`.
#[derive(Debug, Clone)]
pub struct StaticRoute {
    /// Row UUID.
    pub uuid: Uuid,
    /// `ip_prefix`.
    pub ip_prefix: String,
    /// `nexthop`.
    pub nexthop: String,
    /// `policy` (`dst-ip` when absent).
    pub policy: Option<String>,
    /// `output_port`.
    pub output_port: Option<String>,
    /// `route_table`.
    pub route_table: String,
    /// `options`.
    pub options: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `Logical_Router_Policy`.
#[derive(Debug, Clone)]
pub struct RouterPolicy {
    /// Row UUID.
    pub uuid: Uuid,
    /// `priority`.
    pub priority: i64,
    /// `match`.
    pub match_: String,
    /// `action` (`allow`, `drop`, `reroute`).
    pub action: String,
    /// `nexthop` (deprecated single).
    pub nexthop: Option<String>,
    /// `nexthops`.
    pub nexthops: Vec<String>,
    /// `options`.
    pub options: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `NAT`.
#[derive(Debug, Clone)]
pub struct Nat {
    /// Row UUID.
    pub uuid: Uuid,
    /// `type` (`snat`, `dnat`, `dnat_and_snat`).
    pub kind: String,
    /// `external_ip`.
    pub external_ip: String,
    /// `external_mac`.
    pub external_mac: Option<String>,
    /// `external_port_range`.
    pub external_port_range: String,
    /// `logical_ip`.
    pub logical_ip: String,
    /// `logical_port`.
    pub logical_port: Option<String>,
    /// `options`.
    pub options: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `Logical_Router`.
#[derive(Debug, Clone)]
pub struct LogicalRouter {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `ports`, in UUID order.
    pub ports: Vec<Lrp>,
    /// `static_routes`.
    pub static_routes: Vec<StaticRoute>,
    /// `policies`.
    pub policies: Vec<RouterPolicy>,
    /// `nat`.
    pub nat: Vec<Nat>,
    /// `load_balancer`.
    pub load_balancer: Vec<Uuid>,
    /// `load_balancer_group`.
    pub load_balancer_group: Vec<Uuid>,
    /// `enabled`.
    pub enabled: Option<bool>,
    /// `options`.
    pub options: Smap,
    /// `external_ids`.
    pub external_ids: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `ACL`.
#[derive(Debug, Clone)]
pub struct Acl {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: Option<String>,
    /// `priority`.
    pub priority: i64,
    /// `direction` (`from-lport`, `to-lport`).
    pub direction: String,
    /// `match`.
    pub match_: String,
    /// `action` (`allow`, `allow-related`, `allow-stateless`, `drop`, `reject`, `pass`).
    pub action: String,
    /// `log`.
    pub log: bool,
    /// `severity`.
    pub severity: Option<String>,
    /// `meter`.
    pub meter: Option<String>,
    /// `label`.
    pub label: i64,
    /// `options`.
    pub options: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `Port_Group`.
#[derive(Debug, Clone)]
pub struct PortGroup {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `ports` (LSP UUIDs).
    pub ports: Vec<Uuid>,
    /// `acls`.
    pub acls: Vec<Uuid>,
}

/// `Address_Set`.
#[derive(Debug, Clone)]
pub struct AddressSet {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `addresses`.
    pub addresses: Vec<String>,
}

/// `Load_Balancer`.
#[derive(Debug, Clone)]
pub struct LoadBalancer {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `vips`: `VIP[:PORT]` → `BACKEND[:PORT],...`, in key order.
    pub vips: Vec<(String, String)>,
    /// `protocol` (`tcp` when absent).
    pub protocol: Option<String>,
    /// `selection_fields`.
    pub selection_fields: Vec<String>,
    /// `options`.
    pub options: Smap,
    /// `external_ids`.
    pub external_ids: Smap,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `QoS` (a switch refers to its rules by UUID in its `qos_rules` column).
#[derive(Debug, Clone)]
pub struct Qos {
    /// Row UUID.
    pub uuid: Uuid,
    /// `priority`.
    pub priority: i64,
    /// `direction` (`from-lport`, `to-lport`).
    pub direction: String,
    /// `match`.
    pub match_: String,
    /// `action:dscp`.
    pub dscp: Option<i64>,
    /// `bandwidth:rate`.
    pub rate: Option<i64>,
    /// `bandwidth:burst`.
    pub burst: Option<i64>,
    /// The raw row.
    pub row: Arc<Row>,
}

/// `DHCP_Options` (a port refers to its rows by UUID in `dhcpv4_options` /
/// `dhcpv6_options`).
#[derive(Debug, Clone)]
pub struct DhcpOptions {
    /// Row UUID.
    pub uuid: Uuid,
    /// `cidr`.
    pub cidr: String,
    /// `options`.
    pub options: Smap,
}

/// `Load_Balancer_Group`.
#[derive(Debug, Clone)]
pub struct LbGroup {
    /// Row UUID.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `load_balancer`.
    pub load_balancer: Vec<Uuid>,
}

/// `Forwarding_Group`.
#[derive(Debug, Clone)]
pub struct ForwardingGroup {
    /// Row UUID.
    pub uuid: Uuid,
    /// `vip`.
    pub vip: String,
    /// `vmac`.
    pub vmac: String,
    /// `child_port`.
    pub child_port: Vec<String>,
    /// `liveness`.
    pub liveness: bool,
}

/// The whole northbound database, typed.
#[derive(Debug, Clone, Default)]
pub struct Nb {
    /// `NB_Global.options` (first row).
    pub global_options: Smap,
    /// Logical switches, sorted by name then UUID.
    pub switches: Vec<Arc<LogicalSwitch>>,
    /// Logical routers, sorted by name then UUID.
    pub routers: Vec<Arc<LogicalRouter>>,
    /// ACLs by UUID.
    pub acls: HashMap<Uuid, Arc<Acl>>,
    /// Port groups, sorted by name.
    pub port_groups: Vec<Arc<PortGroup>>,
    /// Address sets, sorted by name.
    pub address_sets: Vec<Arc<AddressSet>>,
    /// Load balancers by UUID.
    pub lbs: HashMap<Uuid, Arc<LoadBalancer>>,
    /// Load-balancer groups by UUID.
    pub lb_groups: HashMap<Uuid, LbGroup>,
    /// QoS rules by UUID.
    pub qos: HashMap<Uuid, Qos>,
    /// `DHCP_Options` by UUID.
    pub dhcp_options: HashMap<Uuid, DhcpOptions>,
    /// `Load_Balancer_Health_Check` `vip` by UUID.
    pub lb_health_check_vips: HashMap<Uuid, String>,
    /// Names of the `Meter`s with `fair` set (an ACL log meter then gets a per-ACL name).
    pub fair_meters: BTreeSet<String>,
    /// `Forwarding_Group` rows by UUID.
    pub forwarding_groups: HashMap<Uuid, ForwardingGroup>,
    /// `DNS` rows' `records` by UUID.
    pub dns_records: HashMap<Uuid, Smap>,
}

impl Nb {
    /// Reads the typed model from an `OVN_Northbound` replica; problems are returned as
    /// diagnostics, one per bad row or reference.
    pub fn from_db(db: &Database) -> (Nb, Vec<Diag>) {
        Nb::from_db_threads(db, 1)
    }

    /// [`Nb::from_db`] with the switches (most of the rows) read by `threads` threads.
    pub fn from_db_threads(db: &Database, threads: usize) -> (Nb, Vec<Diag>) {
        let mut diags = Vec::new();
        let mut nb = Nb::default();
        if let Some(g) = db.table("NB_Global").rows.values().next() {
            nb.global_options = smap(g, "options");
        }
        // Load balancers, ACLs and address sets need no other table: one parallel pass
        // reads all three (one join and one tail instead of three).
        enum Pass1Row<'a> {
            Lb(Uuid, &'a Arc<Row>),
            Acl(Uuid, &'a Arc<Row>),
            AddrSet(Uuid, &'a Arc<Row>),
        }
        enum Pass1Out {
            Lb(LoadBalancer),
            Acl(Acl),
            AddrSet(AddressSet),
        }
        let jobs: Vec<Pass1Row<'_>> = (db.table("Load_Balancer").rows.iter())
            .map(|(&u, r)| Pass1Row::Lb(u, r))
            .chain(
                db.table("ACL")
                    .rows
                    .iter()
                    .map(|(&u, r)| Pass1Row::Acl(u, r)),
            )
            .chain((db.table("Address_Set").rows.iter()).map(|(&u, r)| Pass1Row::AddrSet(u, r)))
            .collect();
        let done = crate::par::par_map(&jobs, threads, |j| match *j {
            Pass1Row::Lb(u, r) => Pass1Out::Lb(lb_from_row(u, r)),
            Pass1Row::Acl(u, r) => Pass1Out::Acl(acl_from_row(u, r)),
            Pass1Row::AddrSet(u, r) => Pass1Out::AddrSet(address_set_from_row(u, r)),
        });
        for d in done {
            match d {
                Pass1Out::Lb(lb) => {
                    nb.lbs.insert(lb.uuid, Arc::new(lb));
                }
                Pass1Out::Acl(acl) => {
                    nb.acls.insert(acl.uuid, Arc::new(acl));
                }
                Pass1Out::AddrSet(a) => nb.address_sets.push(Arc::new(a)),
            }
        }
        for (&uuid, r) in &db.table("DHCP_Options").rows {
            nb.dhcp_options.insert(
                uuid,
                DhcpOptions {
                    uuid,
                    cidr: r.str("cidr").to_owned(),
                    options: smap(r, "options"),
                },
            );
        }
        for (&uuid, r) in &db.table("Load_Balancer_Health_Check").rows {
            nb.lb_health_check_vips
                .insert(uuid, r.str("vip").to_owned());
        }
        for r in db.table("Meter").rows.values() {
            if r.bool("fair") == Some(true) {
                nb.fair_meters.insert(r.str("name").to_owned());
            }
        }
        for (&uuid, r) in &db.table("QoS").rows {
            let int = |col: &str, key: &str| r.get(col).get(key).and_then(|a| a.as_int());
            nb.qos.insert(
                uuid,
                Qos {
                    uuid,
                    priority: r.int("priority").unwrap_or(0),
                    direction: r.str("direction").to_owned(),
                    match_: r.str("match").to_owned(),
                    dscp: int("action", "dscp"),
                    rate: int("bandwidth", "rate"),
                    burst: int("bandwidth", "burst"),
                    row: r.clone(),
                },
            );
        }
        for (&uuid, r) in &db.table("Load_Balancer_Group").rows {
            let load_balancer = refs(
                &mut diags,
                "Load_Balancer_Group",
                uuid,
                r,
                "load_balancer",
                |u| nb.lbs.contains_key(&u),
            );
            nb.lb_groups.insert(
                uuid,
                LbGroup {
                    uuid,
                    name: r.str("name").to_owned(),
                    load_balancer,
                },
            );
        }
        for (&uuid, r) in &db.table("DNS").rows {
            nb.dns_records.insert(uuid, smap(r, "records"));
        }
        for (&uuid, r) in &db.table("Forwarding_Group").rows {
            nb.forwarding_groups.insert(
                uuid,
                ForwardingGroup {
                    uuid,
                    vip: r.str("vip").to_owned(),
                    vmac: r.str("vmac").to_owned(),
                    child_port: strings(r, "child_port"),
                    liveness: r.bool("liveness").unwrap_or(false),
                },
            );
        }
        nb.address_sets
            .sort_by(|a, b| (&a.name, a.uuid).cmp(&(&b.name, b.uuid)));
        // Port groups, switches and routers need only what is read above: one pass over
        // all three (a join switch with a port per node, 800 gateway routers and the port
        // groups balance better together than in three passes, each with its own tail).
        let tables = RouterTables {
            lrps: &db.table("Logical_Router_Port").rows,
            routes: &db.table("Logical_Router_Static_Route").rows,
            pols: &db.table("Logical_Router_Policy").rows,
            nats: &db.table("NAT").rows,
        };
        let lsps = &db.table("Logical_Switch_Port").rows;
        enum Pass2Row<'a> {
            Pg(Uuid, &'a Arc<Row>),
            Switch(Uuid, &'a Arc<Row>),
            Router(Uuid, &'a Arc<Row>),
        }
        enum Pass2Out {
            Pg(PortGroup),
            Switch(LogicalSwitch),
            Router(LogicalRouter),
        }
        let jobs: Vec<Pass2Row<'_>> = (db.table("Logical_Switch").rows.iter())
            .map(|(&u, r)| Pass2Row::Switch(u, r))
            .chain(
                db.table("Logical_Router")
                    .rows
                    .iter()
                    .map(|(&u, r)| Pass2Row::Router(u, r)),
            )
            .chain(
                db.table("Port_Group")
                    .rows
                    .iter()
                    .map(|(&u, r)| Pass2Row::Pg(u, r)),
            )
            .collect();
        let nb_ref = &nb;
        let built = crate::par::par_map(&jobs, threads, |j| match *j {
            Pass2Row::Pg(u, r) => {
                let mut d = Vec::new();
                (
                    Pass2Out::Pg(nb_ref.port_group_from_row(&mut d, lsps, u, r)),
                    d,
                )
            }
            Pass2Row::Switch(u, r) => {
                let (sw, d) = nb_ref.switch_from_row(lsps, u, r);
                (Pass2Out::Switch(sw), d)
            }
            Pass2Row::Router(u, r) => {
                let (lr, d) = nb_ref.router_from_row(&tables, u, r);
                (Pass2Out::Router(lr), d)
            }
        });
        // Diagnostics in the order of the separate passes: port groups, switches, routers.
        let (mut pg_d, mut sw_d, mut rt_d) = (Vec::new(), Vec::new(), Vec::new());
        for (b, d) in built {
            match b {
                Pass2Out::Pg(pg) => {
                    nb.port_groups.push(Arc::new(pg));
                    pg_d.extend(d);
                }
                Pass2Out::Switch(sw) => {
                    nb.switches.push(Arc::new(sw));
                    sw_d.extend(d);
                }
                Pass2Out::Router(lr) => {
                    nb.routers.push(Arc::new(lr));
                    rt_d.extend(d);
                }
            }
        }
        diags.extend(pg_d);
        diags.extend(sw_d);
        diags.extend(rt_d);
        nb.port_groups
            .sort_by(|a, b| (&a.name, a.uuid).cmp(&(&b.name, b.uuid)));
        nb.switches
            .sort_by(|a, b| (&a.name, a.uuid).cmp(&(&b.name, b.uuid)));
        nb.routers
            .sort_by(|a, b| (&a.name, a.uuid).cmp(&(&b.name, b.uuid)));
        (nb, diags)
    }

    /// The load balancers applied to a datapath: its own and its groups', each once, in
    /// UUID order.
    pub fn lbs_of(&self, own: &[Uuid], groups: &[Uuid]) -> Vec<Uuid> {
        let mut v: Vec<Uuid> = own.to_vec();
        for g in groups {
            if let Some(g) = self.lb_groups.get(g) {
                v.extend_from_slice(&g.load_balancer);
            }
        }
        v.sort();
        v.dedup();
        v
    }
}

fn refs(
    diags: &mut Vec<Diag>,
    table: &'static str,
    uuid: Uuid,
    r: &Row,
    col: &str,
    exists: impl Fn(Uuid) -> bool,
) -> Vec<Uuid> {
    let mut out = Vec::new();
    for u in r.uuids(col) {
        if exists(u) {
            out.push(u);
        } else {
            diags.push(Diag {
                table,
                uuid,
                msg: format!("{col}: {u} does not exist"),
            });
        }
    }
    out
}

/// An `ACL` row.
pub fn acl_from_row(uuid: Uuid, r: &Arc<Row>) -> Acl {
    Acl {
        uuid,
        name: r.get("name").as_str().map(str::to_owned),
        priority: r.int("priority").unwrap_or(0),
        direction: r.str("direction").to_owned(),
        match_: r.str("match").to_owned(),
        action: r.str("action").to_owned(),
        log: r.bool("log").unwrap_or(false),
        severity: r.get("severity").as_str().map(str::to_owned),
        meter: r.get("meter").as_str().map(str::to_owned),
        label: r.int("label").unwrap_or(0),
        options: smap(r, "options"),
        row: r.clone(),
    }
}

/// A `Load_Balancer` row.
pub fn lb_from_row(uuid: Uuid, r: &Arc<Row>) -> LoadBalancer {
    LoadBalancer {
        uuid,
        name: r.str("name").to_owned(),
        vips: r
            .get("vips")
            .str_pairs()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        protocol: r.get("protocol").as_str().map(str::to_owned),
        selection_fields: strings(r, "selection_fields"),
        options: smap(r, "options"),
        external_ids: smap(r, "external_ids"),
        row: r.clone(),
    }
}

/// An `Address_Set` row.
pub fn address_set_from_row(uuid: Uuid, r: &Row) -> AddressSet {
    AddressSet {
        uuid,
        name: r.str("name").to_owned(),
        addresses: strings(r, "addresses"),
    }
}

/// The tables a router row refers to (ports, static routes, policies, NAT rules).
struct RouterTables<'a> {
    lrps: &'a HashMap<Uuid, Arc<Row>>,
    routes: &'a HashMap<Uuid, Arc<Row>>,
    pols: &'a HashMap<Uuid, Arc<Row>>,
    nats: &'a HashMap<Uuid, Arc<Row>>,
}

impl Nb {
    /// A `Logical_Router` row with its ports, routes, policies and NAT rules; references
    /// to rows that do not exist are diagnostics.
    fn router_from_row(
        &self,
        t: &RouterTables<'_>,
        uuid: Uuid,
        r: &Arc<Row>,
    ) -> (LogicalRouter, Vec<Diag>) {
        let nb = self;
        let (lrps, routes, pols, nats) = (t.lrps, t.routes, t.pols, t.nats);
        let mut diags = Vec::new();
        let mut lr = LogicalRouter {
            uuid,
            name: r.str("name").to_owned(),
            ports: Vec::new(),
            static_routes: Vec::new(),
            policies: Vec::new(),
            nat: Vec::new(),
            load_balancer: refs(
                &mut diags,
                "Logical_Router",
                uuid,
                r,
                "load_balancer",
                |u| nb.lbs.contains_key(&u),
            ),
            load_balancer_group: refs(
                &mut diags,
                "Logical_Router",
                uuid,
                r,
                "load_balancer_group",
                |u| nb.lb_groups.contains_key(&u),
            ),
            enabled: r.bool("enabled"),
            options: smap(r, "options"),
            external_ids: smap(r, "external_ids"),
            row: r.clone(),
        };
        for pu in r.uuids("ports") {
            let Some(p) = lrps.get(&pu) else {
                diags.push(Diag {
                    table: "Logical_Router",
                    uuid,
                    msg: format!("port {pu} does not exist"),
                });
                continue;
            };
            lr.ports.push(Lrp {
                uuid: pu,
                name: p.str("name").to_owned(),
                mac: p.str("mac").to_owned(),
                networks: strings(p, "networks"),
                peer: p.get("peer").as_str().map(str::to_owned),
                options: smap(p, "options"),
                enabled: p.bool("enabled"),
                gateway_chassis: p.uuids("gateway_chassis").collect(),
                ha_chassis_group: p.uuids("ha_chassis_group").next(),
                row: p.clone(),
            });
        }
        for ru in r.uuids("static_routes") {
            let Some(s) = routes.get(&ru) else {
                diags.push(Diag {
                    table: "Logical_Router",
                    uuid,
                    msg: format!("static route {ru} does not exist"),
                });
                continue;
            };
            lr.static_routes.push(StaticRoute {
                uuid: ru,
                ip_prefix: s.str("ip_prefix").to_owned(),
                nexthop: s.str("nexthop").to_owned(),
                policy: s.get("policy").as_str().map(str::to_owned),
                output_port: s.get("output_port").as_str().map(str::to_owned),
                route_table: s.str("route_table").to_owned(),
                options: smap(s, "options"),
                row: s.clone(),
            });
        }
        for pu in r.uuids("policies") {
            let Some(s) = pols.get(&pu) else {
                diags.push(Diag {
                    table: "Logical_Router",
                    uuid,
                    msg: format!("policy {pu} does not exist"),
                });
                continue;
            };
            lr.policies.push(RouterPolicy {
                uuid: pu,
                priority: s.int("priority").unwrap_or(0),
                match_: s.str("match").to_owned(),
                action: s.str("action").to_owned(),
                nexthop: s.get("nexthop").as_str().map(str::to_owned),
                nexthops: strings(s, "nexthops"),
                options: smap(s, "options"),
                row: s.clone(),
            });
        }
        for nu in r.uuids("nat") {
            let Some(s) = nats.get(&nu) else {
                diags.push(Diag {
                    table: "Logical_Router",
                    uuid,
                    msg: format!("NAT {nu} does not exist"),
                });
                continue;
            };
            lr.nat.push(Nat {
                uuid: nu,
                kind: s.str("type").to_owned(),
                external_ip: s.str("external_ip").to_owned(),
                external_mac: s.get("external_mac").as_str().map(str::to_owned),
                external_port_range: s.str("external_port_range").to_owned(),
                logical_ip: s.str("logical_ip").to_owned(),
                logical_port: s.get("logical_port").as_str().map(str::to_owned),
                options: smap(s, "options"),
                row: s.clone(),
            });
        }
        (lr, diags)
    }
}

impl Nb {
    /// A `Port_Group` row; references to ports (in `lsps`) and ACLs (in `self.acls`) that
    /// do not exist are diagnostics.
    pub fn port_group_from_row(
        &self,
        diags: &mut Vec<Diag>,
        lsps: &HashMap<Uuid, Arc<Row>>,
        uuid: Uuid,
        r: &Row,
    ) -> PortGroup {
        let ports = refs(diags, "Port_Group", uuid, r, "ports", |u| {
            lsps.contains_key(&u)
        });
        let acls = refs(diags, "Port_Group", uuid, r, "acls", |u| {
            self.acls.contains_key(&u)
        });
        PortGroup {
            uuid,
            name: r.str("name").to_owned(),
            ports,
            acls,
        }
    }

    /// A `Logical_Switch` row with its ports (rows of `lsps`); references to ACLs, load
    /// balancers and groups are checked against `self`.
    pub fn switch_from_row(
        &self,
        lsps: &HashMap<Uuid, Arc<Row>>,
        uuid: Uuid,
        r: &Arc<Row>,
    ) -> (LogicalSwitch, Vec<Diag>) {
        let nb = self;
        let mut diags = Vec::new();
        let mut ports = Vec::new();
        for pu in r.uuids("ports") {
            match lsps.get(&pu) {
                Some(p) => ports.push(Lsp {
                    uuid: pu,
                    name: p.str("name").to_owned(),
                    kind: p.str("type").to_owned(),
                    addresses: strings(p, "addresses"),
                    port_security: strings(p, "port_security"),
                    options: smap(p, "options"),
                    enabled: p.bool("enabled"),
                    up: p.bool("up"),
                    external_ids: smap(p, "external_ids"),
                    row: p.clone(),
                }),
                None => diags.push(Diag {
                    table: "Logical_Switch",
                    uuid,
                    msg: format!("port {pu} does not exist"),
                }),
            }
        }
        let acls = refs(&mut diags, "Logical_Switch", uuid, r, "acls", |u| {
            nb.acls.contains_key(&u)
        });
        let load_balancer = refs(
            &mut diags,
            "Logical_Switch",
            uuid,
            r,
            "load_balancer",
            |u| nb.lbs.contains_key(&u),
        );
        let load_balancer_group = refs(
            &mut diags,
            "Logical_Switch",
            uuid,
            r,
            "load_balancer_group",
            |u| nb.lb_groups.contains_key(&u),
        );
        let sw = LogicalSwitch {
            uuid,
            name: r.str("name").to_owned(),
            ports,
            acls,
            load_balancer,
            load_balancer_group,
            other_config: smap(r, "other_config"),
            external_ids: smap(r, "external_ids"),
            row: r.clone(),
        };
        (sw, diags)
    }
}

/// What [`Nb::patched`] changed, for the lookups built on the model.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    /// Switches rebuilt (indices into [`Nb::switches`]; the same in the old and new model).
    pub switches: Vec<usize>,
    /// ACL rows changed, added or removed.
    pub acls: Vec<Uuid>,
    /// Load-balancer rows changed, added or removed.
    pub lbs: Vec<Uuid>,
    /// Port-group rows changed, added or removed.
    pub port_groups: Vec<Uuid>,
    /// Address-set rows changed, added or removed.
    pub address_sets: Vec<Uuid>,
}

impl Nb {
    /// The model after the NB rows `changes` (`(table, uuid)`) changed in `db`, sharing every
    /// unchanged row with `self`. `lsp_switch` finds the switch (index) an existing port
    /// belongs to. `Err(why)` for a change this does not follow — a switch added, removed or
    /// renamed, a router-side or global table other than `NB_Global` — then the caller reads
    /// the whole model again.
    pub fn patched(
        &self,
        db: &Database,
        changes: &[(String, Uuid)],
        lsp_switch: impl Fn(Uuid) -> Option<usize>,
    ) -> Result<(Nb, Vec<Diag>, Patch), String> {
        let mut nb = self.clone();
        let mut diags = Vec::new();
        let mut patch = Patch::default();
        let mut dirty_sw: BTreeSet<usize> = BTreeSet::new();
        let sw_index = |u: Uuid| self.switches.iter().position(|s| s.uuid == u);
        let mut pgs_changed: BTreeSet<Uuid> = BTreeSet::new();
        let mut ases_changed: BTreeSet<Uuid> = BTreeSet::new();
        for (t, u) in changes {
            let u = *u;
            let row = db.table(t).rows.get(&u);
            match t.as_str() {
                "NB_Global" => {
                    nb.global_options = row.map(|r| smap(r, "options")).unwrap_or_default();
                }
                "ACL" => {
                    match row {
                        Some(r) => nb.acls.insert(u, Arc::new(acl_from_row(u, r))),
                        None => nb.acls.remove(&u),
                    };
                    patch.acls.push(u);
                }
                "Load_Balancer" => {
                    match row {
                        Some(r) => nb.lbs.insert(u, Arc::new(lb_from_row(u, r))),
                        None => nb.lbs.remove(&u),
                    };
                    patch.lbs.push(u);
                }
                "Address_Set" => {
                    ases_changed.insert(u);
                }
                "Port_Group" => {
                    pgs_changed.insert(u);
                }
                "Logical_Switch_Port" => {
                    // A new port arrives with its switch's row; a changed or deleted one is
                    // found where it was.
                    if let Some(i) = lsp_switch(u) {
                        dirty_sw.insert(i);
                    }
                }
                "Logical_Switch" => {
                    let i = sw_index(u).ok_or("a switch added")?;
                    let r = row.ok_or("a switch removed")?;
                    if r.str("name") != self.switches[i].name {
                        return Err("a switch renamed".into());
                    }
                    dirty_sw.insert(i);
                }
                t => return Err(format!("a change to {t}")),
            }
        }
        if !ases_changed.is_empty() {
            nb.address_sets.retain(|a| !ases_changed.contains(&a.uuid));
            for &u in &ases_changed {
                if let Some(r) = db.table("Address_Set").rows.get(&u) {
                    nb.address_sets.push(Arc::new(address_set_from_row(u, r)));
                }
            }
            nb.address_sets
                .sort_by(|a, b| (&a.name, a.uuid).cmp(&(&b.name, b.uuid)));
            patch.address_sets = ases_changed.into_iter().collect();
        }
        let lsps = &db.table("Logical_Switch_Port").rows;
        if !pgs_changed.is_empty() {
            nb.port_groups.retain(|g| !pgs_changed.contains(&g.uuid));
            for &u in &pgs_changed {
                if let Some(r) = db.table("Port_Group").rows.get(&u) {
                    let pg = nb.port_group_from_row(&mut diags, lsps, u, r);
                    nb.port_groups.push(Arc::new(pg));
                }
            }
            nb.port_groups
                .sort_by(|a, b| (&a.name, a.uuid).cmp(&(&b.name, b.uuid)));
            patch.port_groups = pgs_changed.into_iter().collect();
        }
        for &i in &dirty_sw {
            let u = self.switches[i].uuid;
            let r = db
                .table("Logical_Switch")
                .rows
                .get(&u)
                .ok_or("a switch removed")?;
            let (sw, d) = nb.switch_from_row(lsps, u, r);
            diags.extend(d);
            nb.switches[i] = Arc::new(sw);
        }
        patch.switches = dirty_sw.into_iter().collect();
        Ok((nb, diags, patch))
    }
}
