//! `sb_index::SbIndex` against its trivially correct twin — a scan of the SB replica — after
//! random inserts, updates (a row moving to another datapath or name) and deletes of the
//! five tables it follows, applied through the change list as the daemon applies them.
//! Needs the OVN SB schema (installed with `ovn-central`); skips without it.

use northd::sb_index::{SbIndex, bound_nb_datapath, pg_group};
use ovsdb::db::UpdateKind;
use ovsdb::{Database, Uuid};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use testutil::rng::TestRng;

const SB_SCHEMA: &str = "/usr/share/ovn/ovn-sb.ovsschema";

fn scan(db: &Database, t: &str, keep: impl Fn(&ovsdb::Row) -> bool) -> BTreeSet<Uuid> {
    db.table(t)
        .rows
        .iter()
        .filter(|(_, r)| keep(r))
        .map(|(u, _)| *u)
        .collect()
}

fn uuid_ref(u: Uuid) -> Value {
    json!(["uuid", u.to_string()])
}

#[test]
fn index_equals_a_scan_after_random_changes() {
    let Ok((_, schema)) = northd::topology::read_schema(SB_SCHEMA) else {
        testutil::skip("no OVN SB schema (apt-get install ovn-central)");
        return;
    };
    for seed in 1..=4u64 {
        let mut rng = TestRng::new(seed);
        let mut db = Database::new(schema.clone());
        let mut index = SbIndex::default();
        let nbs: Vec<Uuid> = (1..=4).map(|i| Uuid::from_u128(0xaa00 + i)).collect();
        let names = ["7_pg1", "8_pg1", "7_pg_2", "pg1", "x_pg1", "as1", "pg1_ip4"];
        let mut live: Vec<(&str, Uuid)> = Vec::new();
        let mut dps: Vec<Uuid> = Vec::new();
        for step in 0..300u64 {
            // Built part way through: what was there is read whole, the rest arrives as
            // changes.
            if step == 40 {
                index.ensure(&db);
            }
            let mut changes = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let u = Uuid::from_u128(
                    ((seed as u128) << 64) | (step as u128) << 8 | rng.below(256) as u128,
                );
                let op = rng.below(10);
                if op < 3 && !live.is_empty() {
                    // Delete (a datapath only when nothing names it: the SB refuses that).
                    let i = rng.below(live.len() as u64) as usize;
                    let (t, v) = live[i];
                    if t == "Datapath_Binding" {
                        continue;
                    }
                    live.swap_remove(i);
                    db.apply_tables(&json!({t: {v.to_string(): null}}), UpdateKind::Values)
                        .unwrap();
                    changes.push((t.to_owned(), v));
                    continue;
                }
                // Insert, or rewrite an existing row of the same table.
                let t = [
                    "Datapath_Binding",
                    "Port_Binding",
                    "Multicast_Group",
                    "Port_Group",
                    "Address_Set",
                ][rng.below(5) as usize];
                let existing: Vec<Uuid> = live
                    .iter()
                    .filter(|(x, _)| *x == t)
                    .map(|(_, v)| *v)
                    .collect();
                let u = if op < 6 && !existing.is_empty() {
                    existing[rng.below(existing.len() as u64) as usize]
                } else {
                    u
                };
                if t != "Datapath_Binding"
                    && dps.is_empty()
                    && matches!(t, "Port_Binding" | "Multicast_Group")
                {
                    continue;
                }
                let name = names[rng.below(names.len() as u64) as usize];
                let row = match t {
                    "Datapath_Binding" => {
                        let nb = nbs[rng.below(nbs.len() as u64) as usize];
                        let k = if rng.chance(1, 2) {
                            "logical-switch"
                        } else {
                            "logical-router"
                        };
                        json!({"tunnel_key": 1 + rng.below(100), "external_ids": ["map", [[k, nb.to_string()]]]})
                    }
                    "Port_Binding" => json!({
                        "logical_port": format!("p{}", rng.below(20)),
                        "tunnel_key": 1 + rng.below(100),
                        "datapath": uuid_ref(dps[rng.below(dps.len() as u64) as usize]),
                    }),
                    "Multicast_Group" => json!({
                        "name": name, "tunnel_key": 32768,
                        "datapath": uuid_ref(dps[rng.below(dps.len() as u64) as usize]),
                    }),
                    _ => json!({"name": name}),
                };
                db.apply_tables(&json!({t: {u.to_string(): row}}), UpdateKind::Values)
                    .unwrap();
                if !live.contains(&(t, u)) {
                    live.push((t, u));
                    if t == "Datapath_Binding" {
                        dps.push(u);
                    }
                }
                changes.push((t.to_owned(), u));
            }
            index.apply(&db, &changes);
            if step < 40 {
                continue;
            }
            for &nb in &nbs {
                let want = scan(&db, "Datapath_Binding", |r| {
                    bound_nb_datapath(r) == Some(nb)
                })
                .into_iter()
                .next();
                assert_eq!(
                    index.datapath(nb),
                    want,
                    "seed {seed} step {step}: datapath of {nb}"
                );
            }
            for &dp in &dps {
                let on = |r: &ovsdb::Row| r.uuids("datapath").next() == Some(dp);
                let got: BTreeSet<Uuid> = index.port_bindings(dp).collect();
                assert_eq!(
                    got,
                    scan(&db, "Port_Binding", on),
                    "seed {seed} step {step}: port bindings"
                );
                let got: BTreeSet<Uuid> = index.mcast_groups(dp).collect();
                assert_eq!(
                    got,
                    scan(&db, "Multicast_Group", on),
                    "seed {seed} step {step}: multicast groups"
                );
            }
            for g in ["pg1", "pg_2", "x_pg1", "as1", "pg1_ip4"] {
                let got: BTreeSet<Uuid> = index.port_groups(g).collect();
                let want = scan(&db, "Port_Group", |r| pg_group(r.str("name")) == g);
                assert_eq!(got, want, "seed {seed} step {step}: port groups of {g}");
                let got: BTreeSet<Uuid> = index.address_sets(g).collect();
                let want = scan(&db, "Address_Set", |r| r.str("name") == g);
                assert_eq!(got, want, "seed {seed} step {step}: address sets {g}");
            }
        }
    }
}
