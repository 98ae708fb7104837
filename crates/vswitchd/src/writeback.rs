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
pub fn ops(cfg: &Config, bridges: &Bridges) -> Vec<Value> {
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
                    (Some(ri), _) if ri.uuid == icfg.uuid => (i64::from(ri.ofport.0), None),
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
