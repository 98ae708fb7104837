//! `sb::plan_threads` on 2 and 3 threads against the 1-thread plan, its trivially correct
//! twin: the same transactions in the same order, for SBs that hold a random part of the
//! flows (some twice, some on existing datapath groups), rows that are not ours, and part
//! of the port bindings, some of them stale. Needs the OVN NB and SB schemas (installed
//! with `ovn-central`); skips without them.

use northd::build::{Ctx, DpKind};
use northd::engine::{self, Strategy};
use northd::nb::Nb;
use northd::sb;
use northd::topology::{self, Params};
use ovsdb::db::UpdateKind;
use ovsdb::{Database, Uuid};
use serde_json::{Value, json};
use std::collections::HashMap;
use testutil::rng::TestRng;

const SB_SCHEMA: &str = "/usr/share/ovn/ovn-sb.ovsschema";

fn uuid_ref(u: Uuid) -> Value {
    json!(["uuid", u.to_string()])
}

fn put(db: &mut Database, t: &str, u: Uuid, row: Value) {
    db.apply_tables(&json!({t: {u.to_string(): row}}), UpdateKind::Values)
        .unwrap();
}

#[test]
fn threaded_plan_equals_serial() {
    let (Ok((_, nb_schema)), Ok((_, sb_schema))) = (
        topology::read_schema(topology::DEFAULT_NB_SCHEMA),
        topology::read_schema(SB_SCHEMA),
    ) else {
        testutil::skip("no OVN NB/SB schema (apt-get install ovn-central)");
        return;
    };
    for seed in 1..=4u64 {
        let mut rng = TestRng::new(seed);
        let nbdb = topology::generate(&nb_schema, &Params::with_nodes(4 + seed as usize)).unwrap();
        let mut ctx = Ctx::new(Nb::from_db(&nbdb).0);
        let mut db = Database::new(sb_schema.clone());
        let mut next = 1u128;
        let mut fresh = || {
            next += 1;
            Uuid::from_u128((u128::from(seed) << 96) | next)
        };
        // Every datapath bound (else the flows wait for a second round).
        let mut dp_uuid = Vec::new();
        for (i, d) in ctx.datapaths.iter().enumerate() {
            let u = fresh();
            let k = match d.kind {
                DpKind::Switch(_) => "logical-switch",
                DpKind::Router(_) => "logical-router",
            };
            put(
                &mut db,
                "Datapath_Binding",
                u,
                json!({"tunnel_key": i + 1, "external_ids": ["map", [[k, d.uuid.to_string()]]]}),
            );
            dp_uuid.push(u);
        }
        ctx.load_tunnel_keys(&db);
        let want = sb::want(&ctx);
        // Part of the port bindings, some on the wrong datapath or with another type.
        for (n, p) in want.ports.iter().enumerate() {
            if rng.chance(1, 3) {
                continue;
            }
            let dp = if rng.chance(1, 10) {
                dp_uuid[rng.below(dp_uuid.len() as u64) as usize]
            } else {
                dp_uuid[p.dp]
            };
            let kind = if rng.chance(1, 10) { "stale" } else { &p.kind };
            put(
                &mut db,
                "Port_Binding",
                fresh(),
                json!({"logical_port": p.name, "tunnel_key": n + 1, "type": kind,
                       "datapath": uuid_ref(dp)}),
            );
        }
        // Half the flows, 1 in 10 twice; flows on several datapaths on a group row made
        // for their datapath set (when the coin says the SB has that group).
        let flows = engine::build(&ctx, 1, Strategy::Serial);
        // What the plan must do: insert each flow the SB lacks (or holds on other
        // datapaths), delete every row beyond the first holding a flow, and every row
        // holding none.
        let (mut added, mut deleted) = (0, 0);
        let mut groups: HashMap<Vec<u32>, Option<Uuid>> = HashMap::new();
        for f in &flows {
            let dps: Vec<u32> = f.dps.as_slice().iter().map(|d| d.0).collect();
            let on = if dps.len() == 1 {
                Some(("logical_datapath", dp_uuid[dps[0] as usize]))
            } else {
                let g = *groups.entry(dps.clone()).or_insert_with(|| {
                    rng.chance(2, 3).then(|| {
                        let g = fresh();
                        let set: Vec<Value> =
                            dps.iter().map(|&d| uuid_ref(dp_uuid[d as usize])).collect();
                        put(
                            &mut db,
                            "Logical_DP_Group",
                            g,
                            json!({"datapaths": ["set", set]}),
                        );
                        g
                    })
                });
                g.map(|g| ("logical_dp_group", g))
            };
            let copies = match rng.below(20) {
                0..=9 => 0,
                10 => 2,
                _ => 1,
            };
            match (on, copies) {
                (Some(_), 0) => added += 1,
                (Some(_), n) => deleted += n - 1,
                (None, n) => {
                    added += 1;
                    deleted += n;
                }
            }
            for _ in 0..copies {
                let (col, u) = on.unwrap_or(("logical_datapath", dp_uuid[dps[0] as usize]));
                put(
                    &mut db,
                    "Logical_Flow",
                    fresh(),
                    json!({
                        col: uuid_ref(u),
                        "pipeline": f.stage.pipeline().name(),
                        "table_id": f.stage.table(),
                        "priority": f.priority,
                        "match": f.match_,
                        "actions": f.actions,
                        "external_ids": ["map", [["stage-name", f.stage.name()]]],
                    }),
                );
            }
        }
        // Rows that are not ours: an unknown stage, and a flow on no datapath.
        put(
            &mut db,
            "Logical_Flow",
            fresh(),
            json!({"pipeline": "ingress", "table_id": 0, "priority": 1, "match": "1",
                   "actions": "next;", "logical_datapath": uuid_ref(dp_uuid[0]),
                   "external_ids": ["map", [["stage-name", "no_such_stage"]]]}),
        );
        put(
            &mut db,
            "Logical_Flow",
            fresh(),
            json!({"pipeline": "ingress", "table_id": 0, "priority": 1, "match": "1",
                   "actions": "next;"}),
        );
        let plan = |threads| {
            let p = sb::plan_threads(&ctx, &want, Some(&flows), &db, None, threads);
            let counts = (p.flows_added, p.flows_deleted, p.flows_ready);
            (counts, p.into_txns().collect::<Vec<_>>())
        };
        deleted += 2;
        let serial = plan(1);
        assert_eq!(
            serial.0,
            (added, deleted, true),
            "seed {seed}: flows added, deleted, ready"
        );
        for threads in [2, 3] {
            let p = plan(threads);
            assert_eq!(p.0, serial.0, "seed {seed} threads {threads}: counts");
            assert!(
                p.1 == serial.1,
                "seed {seed} threads {threads}: the transactions differ"
            );
        }
    }
}
