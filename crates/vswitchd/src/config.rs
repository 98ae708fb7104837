//! The switch configuration as `ovs-vswitchd` reads it from OVS's `Open_vSwitch` database.
//!
//! [`Config::from_db`] turns a replica of the `Open_vSwitch`, `Bridge`, `Port`, `Interface`
//! and `Controller` tables into typed values: bridges by name, their ports by name, each
//! port's interfaces, and the datapath knobs of `Open_vSwitch:other_config`. Nothing here
//! talks to a socket; the replica may come from a live `ovsdb-server` or from a file.
//!
//! What the database may hold but the switch cannot use is *named*, never a panic: a bad
//! knob value, a dangling reference or a second bridge or port of one name becomes a
//! [`Problem`] (OVS logs such rows and goes on; so do we), and a bad interface value becomes
//! that interface's `error` column text.

use std::collections::BTreeMap;

use ovsdb::{Database, Row, Uuid};

/// Tables and columns the daemon monitors (everything it reads).
pub const MONITORED: &[(&str, &[&str])] = &[
    (
        "Open_vSwitch",
        &[
            "bridges",
            "next_cfg",
            "cur_cfg",
            "other_config",
            "external_ids",
        ],
    ),
    (
        "Bridge",
        &[
            "name",
            "ports",
            "datapath_type",
            "fail_mode",
            "other_config",
            "protocols",
            "controller",
            "datapath_id",
            "flow_tables",
        ],
    ),
    (
        "Port",
        &[
            "name",
            "interfaces",
            "tag",
            "trunks",
            "vlan_mode",
            "other_config",
        ],
    ),
    (
        "Interface",
        &[
            "name",
            "type",
            "options",
            "ofport",
            "ofport_request",
            "mac",
            "error",
            "admin_state",
            "link_state",
        ],
    ),
    ("Controller", &["target"]),
];

/// The monitor request for [`MONITORED`].
pub fn monitor_spec() -> ovsdb::MonitorSpec {
    MONITORED
        .iter()
        .fold(ovsdb::MonitorSpec::default(), |s, (t, cols)| {
            s.table(t, cols)
        })
}

/// Datapath knobs from `Open_vSwitch:other_config` (OVS's names; `None`: OVS's default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DpKnobs {
    /// `pmd-cpu-mask`: the CPUs PMD threads run on (hex, bit N = CPU N).
    pub pmd_cpu_mask: Option<u128>,
    /// `emc-insert-inv-prob`: insert into the EMC with probability 1/N (0 disables the EMC).
    pub emc_insert_inv_prob: Option<u32>,
    /// `smc-enable`.
    pub smc_enable: Option<bool>,
    /// `flow-limit`: the datapath flow ceiling.
    pub flow_limit: Option<usize>,
    /// `max-idle` (ms): idle datapath flows expire after this.
    pub max_idle_ms: Option<u64>,
    /// `n-revalidator-threads`.
    pub n_revalidators: Option<usize>,
    /// `n-handler-threads`.
    pub n_handlers: Option<usize>,
    /// `vlan-limit`: VLAN headers the datapath parses (any integer; ≤ 0 = no limit).
    pub vlan_limit: Option<i64>,
}

/// OVS's default `vlan-limit`: one tag.
pub const DEFAULT_VLAN_LIMIT: i64 = 1;

impl DpKnobs {
    /// The VLAN limit as the flow key takes it ([`flow::extract::PacketMeta::vlan_limit`]):
    /// 1, or 0 for "every tag the key holds" (OVS caps any limit at its two flow tags).
    pub fn effective_vlan_limit(&self) -> u8 {
        u8::from(self.vlan_limit.unwrap_or(DEFAULT_VLAN_LIMIT) == 1)
    }
}

/// One `Interface` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceCfg {
    /// Row id.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `type` (`""` is `system`).
    pub kind: String,
    /// `options`.
    pub options: BTreeMap<String, String>,
    /// `ofport_request` when it is a valid OpenFlow port number (1..=65279).
    pub ofport_request: Option<u16>,
    /// `mac` (requested MAC) when valid.
    pub mac: Option<[u8; 6]>,
    /// `ofport` as the database holds it now (what was written back last).
    pub ofport_in_db: Option<i64>,
    /// `error` as the database holds it now.
    pub error_in_db: Option<String>,
}

/// One `Port` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCfg {
    /// Row id.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `tag` (access VLAN).
    pub tag: Option<u16>,
    /// `trunks`.
    pub trunks: Vec<u16>,
    /// `vlan_mode`.
    pub vlan_mode: Option<String>,
    /// Its interfaces (OVS: bonds have several; a plain port one).
    pub interfaces: Vec<IfaceCfg>,
}

/// One `Bridge` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeCfg {
    /// Row id.
    pub uuid: Uuid,
    /// `name`.
    pub name: String,
    /// `datapath_type` (`""` is `system`; `netdev` and `dummy` are userspace).
    pub datapath_type: String,
    /// `fail_mode` (`secure` or `standalone`; empty is standalone).
    pub fail_mode: Option<String>,
    /// `other_config:datapath-id` when it is 16 hex digits.
    pub datapath_id_request: Option<u64>,
    /// `other_config:hwaddr` when valid.
    pub hwaddr: Option<[u8; 6]>,
    /// `protocols` (`OpenFlow10` …); empty: OVS's default set.
    pub protocols: Vec<String>,
    /// `Controller.target` of each controller row (`ptcp:`, `punix:`, `tcp:` …).
    pub controllers: Vec<String>,
    /// `datapath_id` as the database holds it now.
    pub datapath_id_in_db: Option<String>,
    /// Ports by name.
    pub ports: BTreeMap<String, PortCfg>,
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// The `Open_vSwitch` row (none before `ovs-vsctl init`).
    pub root: Option<Uuid>,
    /// `next_cfg`: the configuration generation `ovs-vsctl` asked for.
    pub next_cfg: i64,
    /// `cur_cfg`: the generation the switch last said it applied.
    pub cur_cfg: i64,
    /// Datapath knobs.
    pub knobs: DpKnobs,
    /// Bridges by name.
    pub bridges: BTreeMap<String, BridgeCfg>,
}

/// Something in the database the switch cannot use (logged; the rest still applies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(pub String);

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn str_map(row: &Row, col: &str) -> BTreeMap<String, String> {
    row.get(col)
        .str_pairs()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn knob<T: std::str::FromStr>(
    oc: &BTreeMap<String, String>,
    name: &str,
    ok: impl Fn(&T) -> bool,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let v = oc.get(name)?;
    match v.parse::<T>() {
        Ok(x) if ok(&x) => Some(x),
        _ => {
            problems.push(Problem(format!(
                "other_config:{name}={v:?} is not a valid value; using the default"
            )));
            None
        }
    }
}

/// The datapath knobs in an `other_config` map; bad values become [`Problem`]s.
pub fn knobs_from(oc: &BTreeMap<String, String>, problems: &mut Vec<Problem>) -> DpKnobs {
    let pmd_cpu_mask = oc.get("pmd-cpu-mask").and_then(|v| {
        let hex = v.trim_start_matches("0x").trim_start_matches("0X");
        match u128::from_str_radix(hex, 16) {
            Ok(m) if m != 0 => Some(m),
            _ => {
                problems.push(Problem(format!(
                    "other_config:pmd-cpu-mask={v:?} is not a non-zero hex CPU mask; using the default"
                )));
                None
            }
        }
    });
    let smc_enable = oc.get("smc-enable").and_then(|v| match v.as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => {
            problems.push(Problem(format!(
                "other_config:smc-enable={v:?} is not true or false; using the default"
            )));
            None
        }
    });
    DpKnobs {
        pmd_cpu_mask,
        emc_insert_inv_prob: knob(oc, "emc-insert-inv-prob", |_| true, problems),
        smc_enable,
        flow_limit: knob(oc, "flow-limit", |n| *n > 0, problems),
        max_idle_ms: knob(oc, "max-idle", |n| *n > 0, problems),
        n_revalidators: knob(
            oc,
            "n-revalidator-threads",
            |n| (1..=64).contains(n),
            problems,
        ),
        n_handlers: knob(oc, "n-handler-threads", |n| (1..=64).contains(n), problems),
        vlan_limit: knob(oc, "vlan-limit", |_| true, problems),
    }
}

fn iface(uuid: Uuid, row: &Row, problems: &mut Vec<Problem>) -> IfaceCfg {
    let name = row.str("name").to_owned();
    let ofport_request = row.int("ofport_request").and_then(|n| {
        if (1..=0xfeff).contains(&n) {
            Some(n as u16)
        } else {
            problems.push(Problem(format!(
                "interface {name}: ofport_request {n} is not in 1..65279; ignored"
            )));
            None
        }
    });
    let mac = match row.get("mac").as_str() {
        Some(s) if !s.is_empty() => {
            let m = parse_mac(s);
            if m.is_none() {
                problems.push(Problem(format!(
                    "interface {name}: mac {s:?} is not a MAC address; ignored"
                )));
            }
            m
        }
        _ => None,
    };
    IfaceCfg {
        uuid,
        kind: row.str("type").to_owned(),
        options: str_map(row, "options"),
        ofport_request,
        mac,
        ofport_in_db: row.int("ofport"),
        error_in_db: row.get("error").as_str().map(str::to_owned),
        name,
    }
}

fn port(db: &Database, uuid: Uuid, row: &Row, problems: &mut Vec<Problem>) -> PortCfg {
    let name = row.str("name").to_owned();
    let mut interfaces = Vec::new();
    for iu in row.uuids("interfaces") {
        match db.row("Interface", iu) {
            Some(ir) => interfaces.push(iface(iu, ir, problems)),
            None => problems.push(Problem(format!(
                "port {name}: interface {iu} does not exist"
            ))),
        }
    }
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    let vlan = |n: i64| u16::try_from(n).ok().filter(|v| *v < 4096);
    let tag = row.int("tag").and_then(|n| {
        let v = vlan(n);
        if v.is_none() {
            problems.push(Problem(format!(
                "port {name}: tag {n} is not a VLAN; ignored"
            )));
        }
        v
    });
    let trunks = row
        .get("trunks")
        .keys
        .iter()
        .filter_map(|a| a.as_int())
        .filter_map(vlan)
        .collect();
    PortCfg {
        uuid,
        tag,
        trunks,
        vlan_mode: row.get("vlan_mode").as_str().map(str::to_owned),
        interfaces,
        name,
    }
}

fn bridge(db: &Database, uuid: Uuid, row: &Row, problems: &mut Vec<Problem>) -> BridgeCfg {
    let name = row.str("name").to_owned();
    let oc = str_map(row, "other_config");
    let datapath_id_request = oc.get("datapath-id").and_then(|v| {
        let hex = v.trim_start_matches("0x");
        match u64::from_str_radix(hex, 16) {
            Ok(id) if hex.len() == 16 => Some(id),
            _ => {
                problems.push(Problem(format!(
                    "bridge {name}: other_config:datapath-id {v:?} is not 16 hex digits; ignored"
                )));
                None
            }
        }
    });
    let hwaddr = oc.get("hwaddr").and_then(|v| {
        let m = parse_mac(v);
        if m.is_none() {
            problems.push(Problem(format!(
                "bridge {name}: other_config:hwaddr {v:?} is not a MAC address; ignored"
            )));
        }
        m
    });
    let mut ports = BTreeMap::new();
    for pu in row.uuids("ports") {
        let Some(pr) = db.row("Port", pu) else {
            problems.push(Problem(format!("bridge {name}: port {pu} does not exist")));
            continue;
        };
        let p = port(db, pu, pr, problems);
        if p.name.is_empty() {
            problems.push(Problem(format!("bridge {name}: port {pu} has no name")));
        } else if ports.contains_key(&p.name) {
            problems.push(Problem(format!(
                "bridge {name}: two ports are named {}; the second is ignored",
                p.name
            )));
        } else {
            ports.insert(p.name.clone(), p);
        }
    }
    let controllers = row
        .uuids("controller")
        .filter_map(|cu| db.row("Controller", cu))
        .map(|cr| cr.str("target").to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    BridgeCfg {
        uuid,
        datapath_type: row.str("datapath_type").to_owned(),
        fail_mode: row.get("fail_mode").as_str().map(str::to_owned),
        datapath_id_request,
        hwaddr,
        protocols: row.strs("protocols").map(str::to_owned).collect(),
        controllers,
        datapath_id_in_db: row.get("datapath_id").as_str().map(str::to_owned),
        ports,
        name,
    }
}

impl Config {
    /// The configuration without what the switch itself writes back (`cur_cfg`, `ofport`,
    /// `error`, `datapath_id`): two configurations with equal requests ask the same of the
    /// switch. OVS's own write-backs do not trigger a reconfiguration (its IDL omits alerts
    /// on those columns); comparing requests gives the daemon the same behaviour.
    pub fn requests(&self) -> Config {
        let mut c = self.clone();
        c.cur_cfg = 0;
        for b in c.bridges.values_mut() {
            b.datapath_id_in_db = None;
            for p in b.ports.values_mut() {
                for i in &mut p.interfaces {
                    i.ofport_in_db = None;
                    i.error_in_db = None;
                }
            }
        }
        c
    }

    /// The configuration in `db` (a replica of OVS's `Open_vSwitch` database) and what in it
    /// could not be used.
    pub fn from_db(db: &Database) -> (Config, Vec<Problem>) {
        let mut problems = Vec::new();
        let mut cfg = Config::default();
        let root_table = db.table("Open_vSwitch");
        let mut roots: Vec<_> = root_table.rows.iter().collect();
        roots.sort_by_key(|(u, _)| **u);
        if roots.len() > 1 {
            problems.push(Problem(format!(
                "Open_vSwitch has {} rows; using the first",
                roots.len()
            )));
        }
        let Some((root_uuid, root)) = roots.first() else {
            return (cfg, problems);
        };
        cfg.root = Some(**root_uuid);
        cfg.next_cfg = root.int("next_cfg").unwrap_or(0);
        cfg.cur_cfg = root.int("cur_cfg").unwrap_or(0);
        cfg.knobs = knobs_from(&str_map(root, "other_config"), &mut problems);
        // A port or interface may be listed by only one bridge (ovs-vsctl keeps it so;
        // a hand-made transaction may not).
        let mut port_owner: BTreeMap<String, String> = BTreeMap::new();
        for bu in root.uuids("bridges") {
            let Some(br) = db.row("Bridge", bu) else {
                problems.push(Problem(format!("bridge {bu} does not exist")));
                continue;
            };
            let mut b = bridge(db, bu, br, &mut problems);
            if b.name.is_empty() || cfg.bridges.contains_key(&b.name) {
                problems.push(Problem(format!(
                    "bridge {bu}: name {:?} is empty or taken; ignored",
                    b.name
                )));
                continue;
            }
            b.ports.retain(|pname, _| {
                if let Some(owner) = port_owner.get(pname) {
                    problems.push(Problem(format!(
                        "port {pname} is on bridge {owner} and on {}; kept on {owner}",
                        b.name
                    )));
                    false
                } else {
                    port_owner.insert(pname.clone(), b.name.clone());
                    true
                }
            });
            cfg.bridges.insert(b.name.clone(), b);
        }
        (cfg, problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_strictly() {
        assert_eq!(
            parse_mac("0a:1B:2c:3d:4e:5f"),
            Some([0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f])
        );
        for bad in [
            "",
            "0a:1b",
            "0a:1b:2c:3d:4e:5f:60",
            "0a::2c:3d:4e:5f",
            "zz:1b:2c:3d:4e:5f",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_knobs_are_problems_not_values() {
        let oc: BTreeMap<String, String> = [
            ("pmd-cpu-mask", "0x6"),
            ("flow-limit", "-3"),
            ("smc-enable", "yes"),
            ("max-idle", "10000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut p = Vec::new();
        let k = knobs_from(&oc, &mut p);
        assert_eq!(k.pmd_cpu_mask, Some(6));
        assert_eq!(k.flow_limit, None);
        assert_eq!(k.smc_enable, None);
        assert_eq!(k.max_idle_ms, Some(10_000));
        assert_eq!(p.len(), 2, "{p:?}");
    }
}
