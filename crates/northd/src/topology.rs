//! Synthetic ovn-kubernetes-like NB databases (central, non-IC, shared gateway), for tests
//! and benchmarks: the Rust twin of the project's `gen_ovnk.py` generator, producing the
//! same rows (same names, columns and values; only UUIDs differ) without Python or a
//! running `ovsdb-server`.
//!
//! Per node `i` (`node-i`): a node switch (`other_config:subnet=10.X.Y.0/24`) with its
//! router port `stor-node-i`, management port `k8s-node-i` and `P` pods, a management ACL
//! and the cluster/switch LB groups; `rtos-node-i` on `ovn_cluster_router` with two static
//! routes and two reroute policies; a gateway router `GR_node-i` (join and external ports,
//! two routes, one SNAT, the cluster/router LB groups, optional NodePort LBs); its join
//! port `jtor-GR_node-i`; an external switch `ext_node-i` with `etor-GR_node-i` and the
//! localnet `breth0_node-i`. Globally: `ovn_cluster_router`, the `join` switch, three LB
//! groups, `clusterPortGroup` and `clusterRtrPortGroup` with their ACLs, `S` ClusterIP
//! service LBs in `clusterLBGroup`, one address set per namespace, and network-policy port
//! groups with their ACLs (pod `k`, in node-major order, is in namespace `k % NS`). Plus
//! the one `NB_Global` row `ovn-nbctl init` creates, which the generator runs after.
//!
//! UUIDs are deterministic: a counter in insertion order, tagged so they read as
//! generated (`7090xxxx-…`).

use ovsdb::db::UpdateKind;
use ovsdb::{Atom, Database, DatabaseSchema, Uuid};
use serde_json::{Value, json};

/// Where the `ovn-central` package installs the NB schema.
pub const DEFAULT_NB_SCHEMA: &str = "/usr/share/ovn/ovn-nb.ovsschema";

/// Reads a schema file: its JSON (for [`ovsdb::file::write`]) and the parsed schema.
pub fn read_schema(path: &str) -> Result<(Value, DatabaseSchema), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let json: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let schema = DatabaseSchema::from_json(&json).map_err(|e| format!("{path}: {e}"))?;
    Ok((json, schema))
}

/// The generator's knobs, named and defaulted as `gen_ovnk.py`'s options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// `--nodes` (N, default 100, at most 1000).
    pub nodes: usize,
    /// `--pods-per-node` (P, default 10, at most 250).
    pub pods_per_node: usize,
    /// `--services` (ClusterIP load balancers; `None` = 2N).
    pub services: Option<usize>,
    /// `--backends` per service (default 2).
    pub backends: usize,
    /// `--namespaces` (`None` = N).
    pub namespaces: Option<usize>,
    /// `--netpols` (network policies; `None` = N).
    pub netpols: Option<usize>,
    /// `--nodeport-svcs`: NodePort LBs per node (each a GR and a switch LB; default 0).
    pub nodeport_svcs: usize,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            nodes: 100,
            pods_per_node: 10,
            services: None,
            backends: 2,
            namespaces: None,
            netpols: None,
            nodeport_svcs: 0,
        }
    }
}

impl Params {
    /// Defaults for `nodes` nodes.
    pub fn with_nodes(nodes: usize) -> Params {
        Params {
            nodes,
            ..Params::default()
        }
    }

    /// The number of services (2N unless set).
    pub fn services(&self) -> usize {
        self.services.unwrap_or(2 * self.nodes)
    }

    /// The number of namespaces (N unless set).
    pub fn namespaces(&self) -> usize {
        self.namespaces.unwrap_or(self.nodes)
    }

    /// The number of network policies (N unless set).
    pub fn netpols(&self) -> usize {
        self.netpols.unwrap_or(self.nodes)
    }

    /// Checks the parameters: `gen_ovnk.py`'s assertions (P ≤ 250, N ≤ 1000), and what
    /// would make it divide by zero or write addresses that are not addresses.
    pub fn validate(&self) -> Result<(), String> {
        let (n, p) = (self.nodes, self.pods_per_node);
        if p > 250 {
            return Err(format!(
                "pods_per_node {p} > 250 (pod IPs are .3-.252 of a /24)"
            ));
        }
        if n > 1000 {
            return Err(format!("nodes {n} > 1000"));
        }
        let (sv, ns, np) = (self.services(), self.namespaces(), self.netpols());
        if ns == 0 && (n * p > 0 || sv > 0 || np > 0) {
            return Err("namespaces is 0 but there are pods, services or netpols".into());
        }
        if sv > 0 && self.backends > 0 && n * p == 0 {
            return Err("services have backends but there are no pods".into());
        }
        if sv > 254 * 256 {
            return Err(format!(
                "services {sv} > {} (VIPs are 172.30.0.0/16)",
                254 * 256
            ));
        }
        if self.nodeport_svcs > 65535 - 30000 {
            return Err(format!(
                "nodeport_svcs {} > {} (ports 30000..65535)",
                self.nodeport_svcs,
                65535 - 30000
            ));
        }
        Ok(())
    }
}

fn ip4(a: usize, b: usize, c: usize, d: usize) -> String {
    format!("{a}.{b}.{c}.{d}")
}

fn mac_of(ip: &str) -> String {
    let mut s = String::from("0a:58");
    for x in ip.split('.') {
        s.push_str(&format!(":{:02x}", x.parse::<u8>().unwrap_or(0)));
    }
    s
}

fn node_subnet(i: usize) -> (usize, usize, usize) {
    (10, 128 + i / 256, i % 256)
}

/// The gateway router's join IP.
fn join_ip(i: usize) -> String {
    let k = i + 2;
    ip4(100, 64, k / 256, k % 256)
}

/// The node's external IP.
fn node_ip(i: usize) -> String {
    let k = i + 2;
    ip4(172, 18, k / 256, k % 256)
}

fn vip(s: usize) -> String {
    ip4(172, 30, s / 254, s % 254 + 1)
}

fn pod_ip(i: usize, j: usize) -> String {
    let (a, b, c) = node_subnet(i);
    ip4(a, b, c, 3 + j)
}

/// `["set", [...]]`.
fn set<I: IntoIterator<Item = Value>>(items: I) -> Value {
    json!(["set", items.into_iter().collect::<Vec<_>>()])
}

/// `["map", [[k, v]...]]` of strings.
fn map(pairs: &[(&str, &str)]) -> Value {
    json!([
        "map",
        pairs.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()
    ])
}

fn uref(u: Uuid) -> Value {
    json!(["uuid", u.to_string()])
}

fn urefs(us: &[Uuid]) -> Value {
    set(us.iter().map(|&u| uref(u)))
}

/// Inserts rows with counter UUIDs into a database.
struct Gen {
    db: Database,
    next: u128,
}

impl Gen {
    fn insert(&mut self, table: &str, row: Value) -> Result<Uuid, String> {
        self.next += 1;
        let uuid = Uuid::from_u128((0x7090_u128 << 112) | self.next);
        self.db
            .apply_row(table, uuid, Some(&row), UpdateKind::Values)
            .map_err(|e| format!("{table}: {e}"))?;
        Ok(uuid)
    }

    /// An OVSDB `mutate … insert` of references into a set column.
    fn add_refs(&mut self, table: &str, row: Uuid, col: &str, refs: &[Uuid]) -> Result<(), String> {
        let d = self
            .db
            .tables
            .get_mut(table)
            .and_then(|t| t.rows.get_mut(&row))
            .and_then(|r| std::sync::Arc::make_mut(r).cols.get_mut(col))
            .ok_or_else(|| format!("no {table}.{col} in row {row}"))?;
        d.keys.extend(refs.iter().map(|&u| Atom::Uuid(u)));
        d.keys.sort();
        d.keys.dedup();
        Ok(())
    }
}

/// Builds the NB database `gen_ovnk.py` builds (after `ovn-nbctl init`) for `p`.
pub fn generate(schema: &DatabaseSchema, p: &Params) -> Result<Database, String> {
    p.validate()?;
    let (n_nodes, n_pods) = (p.nodes, p.pods_per_node);
    let (n_svc, n_ns, n_np) = (p.services(), p.namespaces(), p.netpols());
    let mut g = Gen {
        db: Database::new(schema.clone()),
        next: 0,
    };

    // ---- what `ovn-nbctl init` creates ----
    g.insert("NB_Global", json!({}))?;

    // ---- global objects ----
    let rtoj_cr = g.insert(
        "Logical_Router_Port",
        json!({"name": "rtoj-ovn_cluster_router", "mac": mac_of("100.64.0.1"),
               "networks": set([json!("100.64.0.1/16")])}),
    )?;
    let mut pols = Vec::new();
    for m in [
        "ip4.src == 10.128.0.0/14 && ip4.dst == 10.128.0.0/14",
        "ip4.src == 10.128.0.0/14 && ip4.dst == 100.64.0.0/16",
    ] {
        pols.push(g.insert(
            "Logical_Router_Policy",
            json!({"priority": 102, "match": m, "action": "allow"}),
        )?);
    }
    let cr = g.insert(
        "Logical_Router",
        json!({"name": "ovn_cluster_router", "ports": urefs(&[rtoj_cr]),
               "policies": urefs(&pols),
               "options": map(&[("always_learn_from_arp_request", "false"),
                                ("mcast_relay", "true")])}),
    )?;
    let jtor_cr = g.insert(
        "Logical_Switch_Port",
        json!({"name": "jtor-ovn_cluster_router", "type": "router", "addresses": "router",
               "options": map(&[("router-port", "rtoj-ovn_cluster_router")])}),
    )?;
    let join = g.insert(
        "Logical_Switch",
        json!({"name": "join", "ports": urefs(&[jtor_cr])}),
    )?;
    let lbg_cluster = g.insert("Load_Balancer_Group", json!({"name": "clusterLBGroup"}))?;
    let lbg_switch = g.insert(
        "Load_Balancer_Group",
        json!({"name": "clusterSwitchLBGroup"}),
    )?;
    let lbg_router = g.insert(
        "Load_Balancer_Group",
        json!({"name": "clusterRouterLBGroup"}),
    )?;
    let mut acls = Vec::new();
    for (d, m) in [
        (
            "from-lport",
            "inport == @clusterPortGroup && (ip4.mcast || mldv1 || mldv2)",
        ),
        (
            "to-lport",
            "outport == @clusterPortGroup && (ip4.mcast || mldv1 || mldv2)",
        ),
    ] {
        acls.push(g.insert(
            "ACL",
            json!({"direction": d, "match": m, "action": "drop", "priority": 1011}),
        )?);
    }
    let cpg = g.insert(
        "Port_Group",
        json!({"name": "clusterPortGroup", "acls": urefs(&acls)}),
    )?;
    let cra0 = g.insert(
        "ACL",
        json!({"direction": "to-lport", "priority": 1012, "action": "allow",
               "match": "outport == @clusterRtrPortGroup && ip4.mcast"}),
    )?;
    let crpg = g.insert(
        "Port_Group",
        json!({"name": "clusterRtrPortGroup", "acls": urefs(&[cra0])}),
    )?;

    // ---- nodes ----
    let mut ns_pods: Vec<Vec<(String, String, Uuid)>> = vec![Vec::new(); n_ns];
    let mut gidx = 0usize;
    for i in 0..n_nodes {
        let n = format!("node-{i}");
        let (sa, sb, sc) = node_subnet(i);
        let subnet = format!("{sa}.{sb}.{sc}.0/24");
        let (rip, mip) = (ip4(sa, sb, sc, 1), ip4(sa, sb, sc, 2));
        let (jip, nip) = (join_ip(i), node_ip(i));
        let rtos = g.insert(
            "Logical_Router_Port",
            json!({"name": format!("rtos-{n}"), "mac": mac_of(&rip),
                   "networks": set([json!(format!("{rip}/24"))])}),
        )?;
        let mut ports = Vec::new();
        let stor = g.insert(
            "Logical_Switch_Port",
            json!({"name": format!("stor-{n}"), "type": "router", "addresses": "router",
                   "options": map(&[("router-port", &format!("rtos-{n}"))])}),
        )?;
        ports.push(stor);
        let k8s = g.insert(
            "Logical_Switch_Port",
            json!({"name": format!("k8s-{n}"), "addresses": format!("{} {mip}", mac_of(&mip))}),
        )?;
        ports.push(k8s);
        for j in 0..n_pods {
            let ns = gidx % n_ns;
            gidx += 1;
            let pip = pod_ip(i, j);
            let pname = format!("ns{ns}_pod-{i}-{j}");
            let addr = format!("{} {pip}", mac_of(&pip));
            let u = g.insert(
                "Logical_Switch_Port",
                json!({"name": pname, "addresses": addr, "port_security": addr,
                       "options": map(&[("requested-chassis", &n)]),
                       "external_ids": map(&[("namespace", &format!("ns{ns}")),
                                             ("pod", "true")])}),
            )?;
            ports.push(u);
            ns_pods[ns].push((pname, pip, u));
        }
        let mgacl = g.insert(
            "ACL",
            json!({"direction": "to-lport", "priority": 1001,
                   "match": format!("ip4.src=={mip}"), "action": "allow-related"}),
        )?;
        let ls = g.insert(
            "Logical_Switch",
            json!({"name": n, "ports": urefs(&ports), "acls": urefs(&[mgacl]),
                   "other_config": map(&[("subnet", &subnet), ("exclude_ips", &mip),
                                         ("mcast_snoop", "true"),
                                         ("mcast_querier", "false")]),
                   "load_balancer_group": urefs(&[lbg_cluster, lbg_switch])}),
        )?;
        let crr_a = g.insert(
            "Logical_Router_Static_Route",
            json!({"ip_prefix": subnet, "nexthop": jip, "policy": "src-ip"}),
        )?;
        let crr_b = g.insert(
            "Logical_Router_Static_Route",
            json!({"ip_prefix": format!("{jip}/32"), "nexthop": jip}),
        )?;
        let pol_a = g.insert(
            "Logical_Router_Policy",
            json!({"priority": 1004, "action": "reroute", "nexthops": set([json!(mip)]),
                   "match": format!("ip4.src == {subnet} && ip4.dst == {nip} /* {n} */")}),
        )?;
        let pol_b = g.insert(
            "Logical_Router_Policy",
            json!({"priority": 1003, "action": "reroute", "nexthops": set([json!(mip)]),
                   "match": format!("inport == \"rtos-{n}\" && ip4.dst == {nip} /* {n} */")}),
        )?;
        // gateway router
        let gr = format!("GR_{n}");
        let rtoj = g.insert(
            "Logical_Router_Port",
            json!({"name": format!("rtoj-{gr}"), "mac": mac_of(&jip),
                   "networks": set([json!(format!("{jip}/16"))])}),
        )?;
        let rtoe = g.insert(
            "Logical_Router_Port",
            json!({"name": format!("rtoe-{gr}"), "mac": mac_of(&nip),
                   "networks": set([json!(format!("{nip}/16"))])}),
        )?;
        let grr_a = g.insert(
            "Logical_Router_Static_Route",
            json!({"ip_prefix": "10.128.0.0/14", "nexthop": "100.64.0.1"}),
        )?;
        let grr_b = g.insert(
            "Logical_Router_Static_Route",
            json!({"ip_prefix": "0.0.0.0/0", "nexthop": "172.18.0.1",
                   "output_port": set([json!(format!("rtoe-{gr}"))])}),
        )?;
        let nat = g.insert(
            "NAT",
            json!({"type": "snat", "external_ip": nip, "logical_ip": "10.128.0.0/14"}),
        )?;
        let (mut gr_lbs, mut sw_lbs) = (Vec::new(), Vec::new());
        for q in 0..p.nodeport_svcs {
            for kind in ["router", "switch"] {
                let lb = g.insert(
                    "Load_Balancer",
                    json!({"name": format!("Service_np{q}_TCP_node_{kind}_{n}"),
                           "protocol": "tcp",
                           "vips": map(&[(&format!("{nip}:{}", 30000 + q),
                                          &format!("{}:8080", pod_ip((i + q) % n_nodes, 0)))]),
                           "options": map(&[("reject", "true"), ("skip_snat", "false")])}),
                )?;
                if kind == "router" {
                    gr_lbs.push(lb);
                } else {
                    sw_lbs.push(lb);
                }
            }
        }
        g.insert(
            "Logical_Router",
            json!({"name": gr, "ports": urefs(&[rtoj, rtoe]),
                   "static_routes": urefs(&[grr_a, grr_b]),
                   "nat": urefs(&[nat]),
                   "load_balancer": urefs(&gr_lbs),
                   "load_balancer_group": urefs(&[lbg_cluster, lbg_router]),
                   "options": map(&[("chassis", &format!("chassis-{n}")),
                                    ("lb_force_snat_ip", "router_ip"),
                                    ("snat-ct-zone", "0"),
                                    ("always_learn_from_arp_request", "false"),
                                    ("dynamic_neigh_routers", "true"),
                                    ("mac_binding_age_threshold", "300")]),
                   "external_ids": map(&[("physical_ip", &nip)])}),
        )?;
        g.add_refs("Logical_Switch", ls, "load_balancer", &sw_lbs)?;
        let jtor = g.insert(
            "Logical_Switch_Port",
            json!({"name": format!("jtor-{gr}"), "type": "router", "addresses": "router",
                   "options": map(&[("router-port", &format!("rtoj-{gr}"))])}),
        )?;
        // external switch
        let etor = g.insert(
            "Logical_Switch_Port",
            json!({"name": format!("etor-{gr}"), "type": "router", "addresses": "router",
                   "options": map(&[("router-port", &format!("rtoe-{gr}"))])}),
        )?;
        let breth = g.insert(
            "Logical_Switch_Port",
            json!({"name": format!("breth0_{n}"), "type": "localnet", "addresses": "unknown",
                   "options": map(&[("network_name", "physnet")])}),
        )?;
        g.insert(
            "Logical_Switch",
            json!({"name": format!("ext_{n}"), "ports": urefs(&[etor, breth])}),
        )?;
        g.add_refs("Logical_Router", cr, "ports", &[rtos])?;
        g.add_refs("Logical_Router", cr, "static_routes", &[crr_a, crr_b])?;
        g.add_refs("Logical_Router", cr, "policies", &[pol_a, pol_b])?;
        g.add_refs("Logical_Switch", join, "ports", &[jtor])?;
        g.add_refs("Port_Group", cpg, "ports", &[k8s])?;
        g.add_refs("Port_Group", crpg, "ports", &[stor])?;
    }

    // ---- services: ClusterIP LBs in clusterLBGroup ----
    let all_pods: Vec<&(String, String, Uuid)> = ns_pods.iter().flatten().collect();
    let mut lbs = Vec::with_capacity(n_svc);
    for s in 0..n_svc {
        let bes = (0..p.backends)
            .map(|b| format!("{}:8080", all_pods[(s * p.backends + b) % all_pods.len()].1))
            .collect::<Vec<_>>()
            .join(",");
        let ns = s % n_ns;
        lbs.push(g.insert(
            "Load_Balancer",
            json!({"name": format!("Service_ns{ns}/svc{s}_TCP_cluster"),
                   "protocol": "tcp",
                   "vips": map(&[(&format!("{}:80", vip(s)), &bes)]),
                   "options": map(&[("event", "false"), ("reject", "true"),
                                    ("skip_snat", "false"),
                                    ("hairpin_snat_ip", "169.254.169.5")]),
                   "external_ids": map(&[("k8s.ovn.org/kind", "Service"),
                                         ("k8s.ovn.org/owner", &format!("ns{ns}/svc{s}"))])}),
        )?);
    }
    g.add_refs("Load_Balancer_Group", lbg_cluster, "load_balancer", &lbs)?;

    // ---- namespaces: address sets; network policies ----
    for (k, pods) in ns_pods.iter().enumerate() {
        g.insert(
            "Address_Set",
            json!({"name": format!("a_ns{k}"),
                   "addresses": set(pods.iter().map(|(_, ip, _)| json!(ip)))}),
        )?;
    }
    let mut ns_with_np: Vec<usize> = (0..n_np).map(|q| q % n_ns).collect();
    ns_with_np.sort_unstable();
    ns_with_np.dedup();
    let pods_of = |k: usize| -> Vec<Uuid> { ns_pods[k].iter().map(|(_, _, u)| *u).collect() };
    for k in ns_with_np {
        let uu = pods_of(k);
        for (dirn, d, pv) in [
            ("ingress", "to-lport", "outport"),
            ("egress", "from-lport", "inport"),
        ] {
            let pg = format!("{dirn}DefaultDeny_ns{k}");
            let opts = if d == "from-lport" {
                map(&[("apply-after-lb", "true")])
            } else {
                map(&[])
            };
            let dd = g.insert(
                "ACL",
                json!({"direction": d, "priority": 1000, "action": "drop",
                       "match": format!("{pv} == @{pg}"), "options": opts}),
            )?;
            let da = g.insert(
                "ACL",
                json!({"direction": d, "priority": 1001, "action": "allow",
                       "match": format!("{pv} == @{pg} && (arp || nd)"), "options": opts}),
            )?;
            g.insert(
                "Port_Group",
                json!({"name": pg, "ports": urefs(&uu), "acls": urefs(&[dd, da])}),
            )?;
        }
    }
    for q in 0..n_np {
        let k = q % n_ns;
        let pg = format!("np_ns{k}_p{q}");
        let npa = g.insert(
            "ACL",
            json!({"direction": "to-lport", "priority": 1001, "action": "allow-related",
                   "match": format!("ip4.src == {{$a_ns{k}}} && outport == @{pg}")}),
        )?;
        g.insert(
            "Port_Group",
            json!({"name": pg, "ports": urefs(&pods_of(k)), "acls": urefs(&[npa])}),
        )?;
    }
    Ok(g.db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_mirrors_the_generators_asserts() {
        assert!(Params::default().validate().is_ok());
        let p = Params {
            pods_per_node: 251,
            ..Params::default()
        };
        assert!(p.validate().unwrap_err().contains("250"));
        assert!(
            Params::with_nodes(1001)
                .validate()
                .unwrap_err()
                .contains("1000")
        );
        let p = Params {
            namespaces: Some(0),
            ..Params::with_nodes(2)
        };
        assert!(p.validate().is_err());
        let p = Params {
            pods_per_node: 0,
            ..Params::with_nodes(2)
        };
        assert!(p.validate().unwrap_err().contains("no pods"));
        assert!(Params::with_nodes(0).validate().is_ok());
    }

    #[test]
    fn defaults_follow_nodes() {
        let p = Params::with_nodes(7);
        assert_eq!((p.services(), p.namespaces(), p.netpols()), (14, 7, 7));
        assert_eq!((p.pods_per_node, p.backends, p.nodeport_svcs), (10, 2, 0));
    }

    #[test]
    fn addresses() {
        assert_eq!(mac_of("10.128.1.2"), "0a:58:0a:80:01:02");
        assert_eq!(join_ip(300), "100.64.1.46");
        assert_eq!(node_ip(0), "172.18.0.2");
        assert_eq!(vip(0), "172.30.0.1");
        assert_eq!(vip(254), "172.30.1.1");
        assert_eq!(pod_ip(257, 4), "10.129.1.7");
    }
}
