//! Bad NB rows get a diagnostic for that row and the rest of the network still compiles
//! (as ovn-northd logs and skips them): a switch naming a port that does not exist, a router
//! port with a malformed MAC, a switch port whose router port does not exist, a port group
//! naming a missing ACL. Needs the OVN NB schema (installed with `ovn-central`).

use northd::build::{Ctx, build_serial};
use northd::nb::Nb;
use northd::topology::{self, Params};
use ovsdb::Uuid;
use serde_json::{Value, json};

fn flows_on(ctx: &Ctx, flows: &[northd::lflow::Lflow], dp: &str) -> usize {
    let i = ctx.datapaths.iter().position(|d| d.name == dp).unwrap();
    flows
        .iter()
        .filter(|f| f.dps.as_slice().iter().any(|d| d.0 as usize == i))
        .count()
}

#[test]
fn bad_rows_are_reported_and_the_rest_compiles() {
    let Ok((_, schema)) = topology::read_schema(topology::DEFAULT_NB_SCHEMA) else {
        testutil::skip("no OVN NB schema (apt-get install ovn-central)");
        return;
    };
    let mut db = topology::generate(&schema, &Params::with_nodes(3)).unwrap();
    let good = {
        let (nb, d) = Nb::from_db(&db);
        assert!(d.is_empty(), "{d:?}");
        let ctx = Ctx::new(nb);
        let f = build_serial(&ctx);
        (
            flows_on(&ctx, &f, "node-2"),
            flows_on(&ctx, &f, "GR_node-2"),
        )
    };
    let find = |db: &ovsdb::Database, table: &str, name: &str| -> Uuid {
        *db.table(table)
            .rows
            .iter()
            .find(|(_, r)| r.str("name") == name)
            .unwrap()
            .0
    };
    // node-0 names a port that does not exist.
    let ls0 = find(&db, "Logical_Switch", "node-0");
    let ghost = Uuid::from_u128(0xdead);
    let mut ports: Vec<Value> = db
        .row("Logical_Switch", ls0)
        .unwrap()
        .uuids("ports")
        .map(|u| json!(["uuid", u.to_string()]))
        .collect();
    ports.push(json!(["uuid", ghost.to_string()]));
    db.apply_row(
        "Logical_Switch",
        ls0,
        Some(&json!({"ports": ["set", ports]})),
        ovsdb::db::UpdateKind::Values,
    )
    .unwrap();
    // GR_node-1's external port gets a malformed MAC.
    let lrp = find(&db, "Logical_Router_Port", "rtoe-GR_node-1");
    db.apply_row(
        "Logical_Router_Port",
        lrp,
        Some(&json!({"mac": "0a:58:zz:12:00:03"})),
        ovsdb::db::UpdateKind::Values,
    )
    .unwrap();
    // A switch port of node-1 points at a router port that does not exist.
    let lsp = find(&db, "Logical_Switch_Port", "stor-node-1");
    db.apply_row(
        "Logical_Switch_Port",
        lsp,
        Some(&json!({"options": ["map", [["router-port", "no-such-port"]]]})),
        ovsdb::db::UpdateKind::Values,
    )
    .unwrap();
    // A port group names an ACL that does not exist.
    let pg = find(&db, "Port_Group", "clusterPortGroup");
    let mut acls: Vec<Value> = db
        .row("Port_Group", pg)
        .unwrap()
        .uuids("acls")
        .map(|u| json!(["uuid", u.to_string()]))
        .collect();
    acls.push(json!(["uuid", Uuid::from_u128(0xbeef).to_string()]));
    db.apply_row(
        "Port_Group",
        pg,
        Some(&json!({"acls": ["set", acls]})),
        ovsdb::db::UpdateKind::Values,
    )
    .unwrap();

    let (nb, diags) = Nb::from_db(&db);
    // Read on three threads, the model reports the same problems in the same order.
    assert_eq!(Nb::from_db_threads(&db, 3).1, diags);
    let nb = std::sync::Arc::new(nb);
    let ctx = Ctx::new(nb.clone());
    // The lookups made on two threads (switch and router sides apart) report the same
    // problems in the same order.
    assert_eq!(Ctx::new_threads(nb, 2).diags, ctx.diags);
    assert!(ctx.diags.len() >= 2);
    let all: Vec<String> = diags
        .iter()
        .chain(&ctx.diags)
        .map(|d| d.to_string())
        .collect();
    for want in [
        "port 00000000-0000-0000-0000-00000000dead does not exist",
        "0a:58:zz:12:00:03",
        "router-port \"no-such-port\" does not exist",
        "acls: 00000000-0000-0000-0000-00000000beef does not exist",
    ] {
        assert!(
            all.iter().any(|d| d.contains(want)),
            "no diagnostic with {want:?} in {all:#?}"
        );
    }
    // The rest still compiles, and a datapath no bad row touches gets the same flows.
    let flows = build_serial(&ctx);
    assert_eq!(
        (
            flows_on(&ctx, &flows, "node-2"),
            flows_on(&ctx, &flows, "GR_node-2")
        ),
        good
    );
    assert!(flows_on(&ctx, &flows, "node-0") > 50);
}
