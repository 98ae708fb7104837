//! What `ovs-vswitchd` writes back to its database, as OVSDB operations.
//!
//! After each reconciliation the daemon tells the database what it made of the
//! configuration: each interface's `ofport` (−1 and an `error` when it could not be opened),
//! each bridge's `datapath_id`, and finally `Open_vSwitch:cur_cfg = next_cfg` — the value
//! `ovs-vsctl --wait` waits for, so it is written only once everything the configuration
//! asked for is in place. Only values that differ from what the replica holds are written,
//! so a quiet database gets no transactions.

use serde_json::{Value, json};

use crate::bridges::Bridges;
use crate::config::Config;

fn update(table: &str, uuid: ovsdb::Uuid, row: Value) -> Value {
    json!({
        "op": "update",
        "table": table,
        "where": [["_uuid", "==", ["uuid", uuid.to_string()]]],
        "row": row,
    })
}

fn opt_str(v: Option<&str>) -> Value {
    match v {
        Some(s) => json!(s),
        None => json!(["set", []]),
    }
}

/// The operations that bring the database's write-back columns to `bridges`' state for
/// `cfg` (empty when they already agree). `cur_cfg` comes last in the same transaction.
///
/// `dp_errors` names interfaces the datapath could not open (they have OpenFlow ports but
/// no datapath port): written as `ofport` −1 with the error, as OVS does.
pub fn ops(
    cfg: &Config,
    bridges: &Bridges,
    dp_errors: &std::collections::BTreeMap<String, String>,
) -> Vec<Value> {
    let mut ops = Vec::new();
    for (bname, bcfg) in &cfg.bridges {
        let Some(rb) = bridges.map.get(bname) else {
            continue;
        };
        let dpid = format!("{:016x}", rb.dpid);
        if bcfg.datapath_id_in_db.as_deref() != Some(dpid.as_str()) {
            ops.push(update("Bridge", bcfg.uuid, json!({ "datapath_id": dpid })));
        }
        for pcfg in bcfg.ports.values() {
            for icfg in &pcfg.interfaces {
                let (ofport, error) = match (rb.ifaces.get(&icfg.name), rb.failed.get(&icfg.name)) {
                    (Some(ri), _) if ri.uuid == icfg.uuid => match dp_errors.get(&icfg.name) {
                        Some(e) => (-1, Some(e.as_str())),
                        None => (i64::from(ri.ofport.0), None),
                    },
                    (_, Some(f)) if f.uuid == icfg.uuid => (-1, Some(f.error.as_str())),
                    _ => continue,
                };
                if icfg.ofport_in_db != Some(ofport) || icfg.error_in_db.as_deref() != error {
                    ops.push(update(
                        "Interface",
                        icfg.uuid,
                        json!({ "ofport": ofport, "error": opt_str(error) }),
                    ));
                }
            }
        }
    }
    if let Some(root) = cfg.root
        && cfg.cur_cfg != cfg.next_cfg
    {
        ops.push(update(
            "Open_vSwitch",
            root,
            json!({ "cur_cfg": cfg.next_cfg }),
        ));
    }
    ops
}

/// The operations that create `cfg` in an empty `Open_vSwitch` database (what
/// `ovs-vsctl init -- add-br … -- add-port …` would write): used to fill the private
/// database of the embedded default.
pub fn initial_ops(cfg: &Config) -> Vec<Value> {
    let mut ops = Vec::new();
    let mut bridges = Vec::new();
    for (bi, b) in cfg.bridges.values().enumerate() {
        let mut ports = Vec::new();
        for (pi, p) in b.ports.values().enumerate() {
            let mut ifaces = Vec::new();
            for (ii, i) in p.interfaces.iter().enumerate() {
                let name = format!("i{bi}_{pi}_{ii}");
                let mut row = json!({
                    "name": i.name,
                    "type": i.kind,
                    "options": ["map", i.options.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()],
                });
                if let Some(r) = i.ofport_request {
                    row["ofport_request"] = json!(r);
                }
                ops.push(
                    json!({"op": "insert", "table": "Interface", "row": row, "uuid-name": name}),
                );
                ifaces.push(json!(["named-uuid", name]));
            }
            let name = format!("p{bi}_{pi}");
            let mut row = json!({"name": p.name, "interfaces": ["set", ifaces]});
            if let Some(t) = p.tag {
                row["tag"] = json!(t);
            }
            ops.push(json!({"op": "insert", "table": "Port", "row": row, "uuid-name": name}));
            ports.push(json!(["named-uuid", name]));
        }
        let name = format!("b{bi}");
        let mut row = json!({"name": b.name, "ports": ["set", ports]});
        if let Some(f) = &b.fail_mode {
            row["fail_mode"] = json!(f);
        }
        if let Some(id) = b.datapath_id_request {
            row["other_config"] = json!(["map", [["datapath-id", format!("{id:016x}")]]]);
        }
        if !b.datapath_type.is_empty() {
            row["datapath_type"] = json!(b.datapath_type);
        }
        ops.push(json!({"op": "insert", "table": "Bridge", "row": row, "uuid-name": name}));
        bridges.push(json!(["named-uuid", name]));
    }
    ops.push(json!({
        "op": "insert",
        "table": "Open_vSwitch",
        "row": {"bridges": ["set", bridges], "next_cfg": 1},
    }));
    ops
}

/// The state columns OVS keeps on an `Interface` row: `admin_state`, `link_state`, `mtu`,
/// `mac_in_use`, `ifindex`, `link_resets`. A dummy port is up, MTU 1500, index 0, as OVS's
/// dummy netdev; a real port reports its Linux interface (flags `IFF_UP` and `IFF_RUNNING`,
/// MTU, address, index); one that has gone reports down.
pub fn state_columns(ri: &crate::bridges::RunningIface) -> Vec<(&'static str, Value)> {
    use crate::bridges::IfaceBackend;
    let fmt_mac = |m: [u8; 6]| {
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    };
    let updown = |b: bool| if b { "up" } else { "down" };
    match ri.backend {
        IfaceBackend::Dummy | IfaceBackend::DummyInternal => vec![
            ("admin_state", json!("up")),
            ("link_state", json!("up")),
            ("mtu", json!(1500)),
            ("mac_in_use", json!(fmt_mac(ri.mac))),
            ("ifindex", json!(0)),
            ("link_resets", json!(0)),
        ],
        IfaceBackend::AfPacket | IfaceBackend::AfXdp | IfaceBackend::Tap => {
            use netdev::netif;
            let flags = netif::flags(&ri.name).unwrap_or(0);
            let mut cols = vec![
                (
                    "admin_state",
                    json!(updown(flags & libc::IFF_UP as u32 != 0)),
                ),
                (
                    "link_state",
                    json!(updown(flags & libc::IFF_RUNNING as u32 != 0)),
                ),
                ("link_resets", json!(0)),
            ];
            if let Ok(m) = netif::mtu(&ri.name) {
                cols.push(("mtu", json!(m)));
            }
            if let Ok(m) = netif::mac(&ri.name) {
                cols.push(("mac_in_use", json!(fmt_mac(m))));
            }
            if let Ok(i) = netif::ifindex(&ri.name) {
                cols.push(("ifindex", json!(i)));
            }
            cols
        }
    }
}

/// `Interface:statistics` of every running interface, as OVS writes them (`rx_packets`,
/// `rx_bytes`, `rx_dropped`, `tx_packets`, `tx_bytes`, `tx_dropped`; counters a port does not
/// keep are left out, as OVS leaves out its unsupported ones), with the interface's state
/// columns ([`state_columns`]).
pub fn statistics_ops(
    cfg: &Config,
    bridges: &Bridges,
    switch: &crate::switch::Switch,
) -> Vec<Value> {
    use crate::ofconn::OfBridge;
    let mut ops = Vec::new();
    for b in switch.bridges() {
        let Some(bcfg) = cfg.bridges.get(b.name()) else {
            continue;
        };
        let names: std::collections::BTreeMap<u32, String> =
            b.ports().into_iter().map(|p| (p.port_no, p.name)).collect();
        for st in b.port_stats() {
            let Some(name) = names.get(&st.port_no) else {
                continue;
            };
            let Some(icfg) = bcfg
                .ports
                .values()
                .flat_map(|p| &p.interfaces)
                .find(|i| &i.name == name)
            else {
                continue;
            };
            let mut pairs = vec![
                json!(["rx_packets", st.rx_packets]),
                json!(["rx_bytes", st.rx_bytes]),
                json!(["tx_packets", st.tx_packets]),
                json!(["tx_bytes", st.tx_bytes]),
            ];
            for (k, v) in [("rx_dropped", st.rx_dropped), ("tx_dropped", st.tx_dropped)] {
                if v != u64::MAX {
                    pairs.push(json!([k, v]));
                }
            }
            pairs.sort_by(|a, b| a[0].as_str().cmp(&b[0].as_str()));
            let mut row = json!({ "statistics": ["map", pairs] });
            if let Some(ri) = bridges.map.get(b.name()).and_then(|rb| rb.ifaces.get(name)) {
                for (k, v) in state_columns(ri) {
                    row[k] = v;
                }
            }
            ops.push(update("Interface", icfg.uuid, row));
        }
    }
    ops
}
