//! Incremental recompute against a full recompute, after random NB change sequences on the
//! benchmark topology: after every change the engine's flows (and reference counts) equal a
//! fresh full build's, and the flow changes it reported, applied to the previous flows,
//! give the new flows. Most steps must take the incremental path (else the test proves
//! nothing about it). Needs the OVN NB schema (installed with `ovn-central`); skips without it.

use northd::build::Ctx;
use northd::engine::{Strategy, build_with_dups};
use northd::incr::{Engine, FlowState};
use northd::lflow::{Dps, FlowKey};
use northd::nb::Nb;
use northd::topology::{self, Params};
use ovsdb::{Database, Datum, Uuid};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use testutil::rng::TestRng;

fn set_col(db: &mut Database, t: &str, u: Uuid, col: &str, v: Value) {
    let mut row = db.row(t, u).expect("row").clone();
    let ty = &db.schema.tables[t].columns[col];
    row.cols
        .insert(col.into(), Datum::from_json(&v, ty).expect("datum"));
    db.insert_row(t, u, row).expect("insert");
}

fn insert(db: &mut Database, t: &str, u: Uuid, cols: Value) {
    let mut row = ovsdb::Row::default();
    let ts = &db.schema.tables[t];
    for (c, v) in cols.as_object().expect("object") {
        row.cols.insert(
            c.clone(),
            Datum::from_json(v, &ts.columns[c]).expect("datum"),
        );
    }
    db.insert_row(t, u, row).expect("insert");
}

fn uuids(db: &Database, t: &str, u: Uuid, col: &str) -> Vec<Uuid> {
    db.row(t, u)
        .map(|r| r.uuids(col).collect())
        .unwrap_or_default()
}

fn uset(v: &[Uuid]) -> Value {
    json!([
        "set",
        v.iter()
            .map(|u| json!(["uuid", u.to_string()]))
            .collect::<Vec<_>>()
    ])
}

fn rows(db: &Database, t: &str) -> Vec<Uuid> {
    let mut v: Vec<Uuid> = db.table(t).rows.keys().copied().collect();
    v.sort();
    v
}

/// Removes `x` from the UUID set `col` of row `u`.
fn remove_from(db: &mut Database, t: &str, u: Uuid, col: &str, x: Uuid) {
    let v: Vec<Uuid> = uuids(db, t, u, col)
        .into_iter()
        .filter(|&y| y != x)
        .collect();
    set_col(db, t, u, col, uset(&v));
}

/// The node switches (where pods live).
fn node_switches(db: &Database) -> Vec<Uuid> {
    rows(db, "Logical_Switch")
        .into_iter()
        .filter(|&s| {
            db.row("Logical_Switch", s)
                .is_some_and(|r| r.str("name").starts_with("node-"))
        })
        .collect()
}

fn vif_ports(db: &Database) -> Vec<(Uuid, Uuid)> {
    let mut v = Vec::new();
    for s in rows(db, "Logical_Switch") {
        for p in uuids(db, "Logical_Switch", s, "ports") {
            if db
                .row("Logical_Switch_Port", p)
                .is_some_and(|r| r.str("type").is_empty())
            {
                v.push((s, p));
            }
        }
    }
    v
}

/// Applies one random change to `db`; returns the rows it touched.
fn random_change(db: &mut Database, rng: &mut TestRng, step: u64) -> Vec<(String, Uuid)> {
    let fresh = |k: u64| {
        Uuid::from_u128(0xfeed_0000_0000_0000_0000_0000_0000_0000 | (step << 8 | k) as u128)
    };
    let mut ch = Vec::new();
    let mut note = |t: &str, u: Uuid| ch.push((t.to_owned(), u));
    match rng
        .weighted(&[6, 4, 3, 3, 3, 2, 3, 2, 1, 1, 2, 2])
        .unwrap_or(0)
    {
        0 => {
            // A pod: a VIF on a node switch, sometimes in a namespace port group.
            let sws = node_switches(db);
            let Some(&s) = rng.pick(&sws) else { return ch };
            let p = fresh(1);
            let ip = format!("10.200.{}.{}", step % 200, 10 + rng.below(200));
            let addr = format!("0a:58:0a:c8:{:02x}:{:02x} {ip}", step % 200, rng.below(250));
            insert(
                db,
                "Logical_Switch_Port",
                p,
                json!({"name": format!("newpod-{step}"), "addresses": addr, "port_security": addr}),
            );
            let mut ports = uuids(db, "Logical_Switch", s, "ports");
            ports.push(p);
            set_col(db, "Logical_Switch", s, "ports", uset(&ports));
            note("Logical_Switch_Port", p);
            note("Logical_Switch", s);
            if rng.chance(1, 2) {
                let pgs = rows(db, "Port_Group");
                if let Some(&g) = rng.pick(&pgs) {
                    let mut v = uuids(db, "Port_Group", g, "ports");
                    v.push(p);
                    set_col(db, "Port_Group", g, "ports", uset(&v));
                    note("Port_Group", g);
                }
            }
        }
        1 => {
            // A pod goes: out of its switch, its port groups, then the row.
            let vifs = vif_ports(db);
            let Some(&(s, p)) = rng.pick(&vifs) else {
                return ch;
            };
            remove_from(db, "Logical_Switch", s, "ports", p);
            note("Logical_Switch", s);
            for g in rows(db, "Port_Group") {
                if uuids(db, "Port_Group", g, "ports").contains(&p) {
                    remove_from(db, "Port_Group", g, "ports", p);
                    note("Port_Group", g);
                }
            }
            if let Some(t) = db.tables.get_mut("Logical_Switch_Port") {
                t.rows.remove(&p);
            }
            note("Logical_Switch_Port", p);
        }
        2 => {
            // A pod's addresses change.
            let vifs = vif_ports(db);
            let Some(&(_, p)) = rng.pick(&vifs) else {
                return ch;
            };
            let addr = format!(
                "0a:58:0a:c9:{:02x}:{:02x} 10.201.{}.{}",
                step % 250,
                rng.below(250),
                step % 250,
                rng.below(250)
            );
            set_col(db, "Logical_Switch_Port", p, "addresses", json!(addr));
            if rng.chance(1, 2) {
                set_col(db, "Logical_Switch_Port", p, "port_security", json!(addr));
            }
            note("Logical_Switch_Port", p);
        }
        3 => {
            // A VIF joins or leaves a port group.
            let vifs = vif_ports(db);
            let pgs = rows(db, "Port_Group");
            let (Some(&(_, p)), Some(&g)) = (rng.pick(&vifs), rng.pick(&pgs)) else {
                return ch;
            };
            let mut v = uuids(db, "Port_Group", g, "ports");
            if let Some(i) = v.iter().position(|&x| x == p) {
                v.remove(i);
            } else {
                v.push(p);
            }
            set_col(db, "Port_Group", g, "ports", uset(&v));
            note("Port_Group", g);
        }
        4 => {
            // An ACL's priority, match or action changes.
            let acls = rows(db, "ACL");
            let Some(&a) = rng.pick(&acls) else { return ch };
            match rng.below(3) {
                0 => set_col(db, "ACL", a, "priority", json!(1000 + rng.below(30) as i64)),
                1 => {
                    let m = db
                        .row("ACL", a)
                        .map(|r| r.str("match").to_owned())
                        .unwrap_or_default();
                    set_col(db, "ACL", a, "match", json!(format!("{m} && ip4")));
                }
                _ => set_col(
                    db,
                    "ACL",
                    a,
                    "action",
                    json!(
                        *rng.pick(&["allow", "allow-related", "drop", "reject"])
                            .unwrap_or(&"drop")
                    ),
                ),
            }
            note("ACL", a);
        }
        5 => {
            // A new ACL on a port group.
            let pgs = rows(db, "Port_Group");
            let Some(&g) = rng.pick(&pgs) else { return ch };
            let a = fresh(2);
            let dir = if rng.chance(1, 2) {
                "to-lport"
            } else {
                "from-lport"
            };
            insert(
                db,
                "ACL",
                a,
                json!({"direction": dir, "priority": 1001 + rng.below(20) as i64,
                "match": format!("ip4.src == 10.{}.0.0/16", rng.below(250)), "action": "allow-related"}),
            );
            let mut v = uuids(db, "Port_Group", g, "acls");
            v.push(a);
            set_col(db, "Port_Group", g, "acls", uset(&v));
            note("ACL", a);
            note("Port_Group", g);
        }
        6 => {
            // An address set's addresses change.
            let sets = rows(db, "Address_Set");
            let Some(&s) = rng.pick(&sets) else { return ch };
            let v: Vec<Value> = (0..rng.below(4))
                .map(|i| json!(format!("10.202.{}.{}", step % 250, i)))
                .collect();
            set_col(db, "Address_Set", s, "addresses", json!(["set", v]));
            note("Address_Set", s);
        }
        7 => {
            // A service's backends change; sometimes it gains a VIP.
            let lbs = rows(db, "Load_Balancer");
            let Some(&l) = rng.pick(&lbs) else { return ch };
            let mut vips: BTreeMap<String, String> = db
                .row("Load_Balancer", l)
                .map(|r| {
                    r.get("vips")
                        .str_pairs()
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            for v in vips.values_mut() {
                *v = format!("10.203.{}.{}:8080", step % 250, rng.below(250));
            }
            if rng.chance(1, 3) {
                vips.insert(
                    format!("172.31.{}.{}:80", step % 250, rng.below(250)),
                    "10.204.0.1:80".into(),
                );
            }
            let pairs: Vec<Value> = vips.into_iter().map(|(k, v)| json!([k, v])).collect();
            set_col(db, "Load_Balancer", l, "vips", json!(["map", pairs]));
            note("Load_Balancer", l);
        }
        8 => {
            // A new switch (a datapath more: a full recompute).
            let s = fresh(3);
            insert(
                db,
                "Logical_Switch",
                s,
                json!({"name": format!("extra-{step}")}),
            );
            note("Logical_Switch", s);
        }
        9 => {
            // A port group empties, or all its ACLs become stateful (switches gain or lose
            // stateful ACLs: their datapath-wide flows change).
            let pgs = rows(db, "Port_Group");
            let Some(&g) = rng.pick(&pgs) else { return ch };
            if rng.chance(1, 2) {
                set_col(db, "Port_Group", g, "ports", uset(&[]));
            } else {
                for a in uuids(db, "Port_Group", g, "acls") {
                    set_col(db, "ACL", a, "action", json!("allow-related"));
                    note("ACL", a);
                }
            }
            note("Port_Group", g);
        }
        11 => {
            // A pod moves to another node switch; its port groups' rows stay as they are
            // (only the two switches' rows change).
            let vifs = vif_ports(db);
            let Some(&(s, p)) = rng.pick(&vifs) else {
                return ch;
            };
            let others: Vec<Uuid> = node_switches(db).into_iter().filter(|&x| x != s).collect();
            let Some(&to) = rng.pick(&others) else {
                return ch;
            };
            remove_from(db, "Logical_Switch", s, "ports", p);
            let mut onto = uuids(db, "Logical_Switch", to, "ports");
            onto.push(p);
            set_col(db, "Logical_Switch", to, "ports", uset(&onto));
            note("Logical_Switch", s);
            note("Logical_Switch", to);
        }
        _ => {
            // A router-side change (not followed incrementally).
            let pols = rows(db, "Logical_Router_Policy");
            let Some(&p) = rng.pick(&pols) else { return ch };
            set_col(
                db,
                "Logical_Router_Policy",
                p,
                "priority",
                json!(100 + rng.below(5) as i64),
            );
            note("Logical_Router_Policy", p);
        }
    }
    ch
}

fn full_state(db: &Database) -> FlowState {
    let (nb, _) = Nb::from_db(db);
    let ctx = Ctx::new(nb);
    let (flows, dups) = build_with_dups(&ctx, 1, Strategy::Serial);
    FlowState::from_build(flows, dups, 1)
}

#[test]
fn incremental_equals_full_after_random_changes() {
    let Ok((_, schema)) = topology::read_schema(topology::DEFAULT_NB_SCHEMA) else {
        testutil::skip("no OVN NB schema (apt-get install ovn-central)");
        return;
    };
    let (mut incremental, mut full, mut patched) = (0, 0, 0);
    for seed in 1..=6u64 {
        let p = Params {
            nodes: 3,
            pods_per_node: 3,
            services: Some(if seed > 4 { 0 } else { 6 }),
            nodeport_svcs: (seed % 2) as usize,
            netpols: (seed > 4).then_some(0),
            ..Params::with_nodes(3)
        };
        let mut db = topology::generate(&schema, &p).unwrap();
        let mut rng = TestRng::new(seed);
        let mut engine = Engine::default();
        let (nb, _) = Nb::from_db(&db);
        engine.full(Ctx::new(nb), 1, Strategy::Serial);
        // What the SB would hold: the previous flows with the reported changes applied.
        let mut sb: BTreeMap<FlowKey, Dps> = engine
            .state()
            .to_sorted_vec()
            .into_iter()
            .map(|f| ((f.stage, f.priority, f.match_, f.actions), f.dps))
            .collect();
        for step in 0..40 {
            let changes = random_change(&mut db, &mut rng, step);
            // Alternate: the model and lookups patched from the last round's, or read whole.
            let ctx = if step % 4 == 3 {
                Ctx::new(Nb::from_db(&db).0)
            } else {
                let (ctx, _, was_patched) = engine.next_ctx(&db, &changes, 1);
                patched += usize::from(was_patched.is_some());
                ctx
            };
            match engine.incremental(ctx, &changes) {
                Ok((flow_changes, _)) => {
                    incremental += 1;
                    for c in flow_changes {
                        assert_eq!(
                            sb.get(&c.key),
                            c.before.as_ref(),
                            "seed {seed} step {step}: reported 'before' differs"
                        );
                        match c.after {
                            Some(d) => sb.insert(c.key, d),
                            None => sb.remove(&c.key),
                        };
                    }
                }
                Err((ctx, why)) => {
                    eprintln!("seed {seed} step {step}: full recompute: {why}");
                    full += 1;
                    engine.full(ctx, 1, Strategy::Serial);
                    sb = engine
                        .state()
                        .to_sorted_vec()
                        .into_iter()
                        .map(|f| ((f.stage, f.priority, f.match_, f.actions), f.dps))
                        .collect();
                }
            }
            // The patched lookups equal a fresh context's.
            if let Some(c) = engine.ctx() {
                let fresh = Ctx::new(Nb::from_db(&db).0);
                let pgs = |c: &Ctx| -> Vec<Vec<Uuid>> {
                    c.switch_pgs
                        .iter()
                        .map(|v| v.iter().map(|g| g.uuid).collect())
                        .collect()
                };
                assert_eq!(pgs(c), pgs(&fresh), "seed {seed} step {step}: switch_pgs");
                assert_eq!(
                    c.switch_acls, fresh.switch_acls,
                    "seed {seed} step {step}: switch_acls"
                );
                assert_eq!(
                    c.switch_facts, fresh.switch_facts,
                    "seed {seed} step {step}: switch_facts"
                );
                assert_eq!(
                    c.lsp_by_uuid, fresh.lsp_by_uuid,
                    "seed {seed} step {step}: lsp_by_uuid"
                );
                assert_eq!(
                    c.lsp_by_name, fresh.lsp_by_name,
                    "seed {seed} step {step}: lsp_by_name"
                );
            }
            let want = full_state(&db);
            let got = engine.state();
            if got.to_sorted_vec() != want.to_sorted_vec() {
                let (g, w) = (got.to_sorted_vec(), want.to_sorted_vec());
                let extra: Vec<_> = g.iter().filter(|f| !w.contains(f)).take(5).collect();
                let missing: Vec<_> = w.iter().filter(|f| !g.contains(f)).take(5).collect();
                panic!(
                    "seed {seed} step {step} after {changes:?}: incremental differs from full\n extra {extra:#?}\n missing {missing:#?}"
                );
            }
            assert_eq!(
                got.dups_sorted(),
                want.dups_sorted(),
                "seed {seed} step {step}: reference counts differ"
            );
            let sb_flows: Vec<_> = sb.iter().map(|(k, d)| (k.clone(), d.clone())).collect();
            let want_flows: Vec<_> = want
                .to_sorted_vec()
                .into_iter()
                .map(|f| ((f.stage, f.priority, f.match_, f.actions), f.dps))
                .collect();
            assert!(
                sb_flows == want_flows,
                "seed {seed} step {step}: reported changes do not add up to the new flows"
            );
        }
    }
    eprintln!("incremental rounds {incremental}, full {full}, contexts patched {patched}");
    assert!(patched >= 100, "too few patched contexts: {patched}");
    assert!(
        incremental >= 4 * full,
        "too few incremental rounds: {incremental} vs {full} full"
    );
}
