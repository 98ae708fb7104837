//! `cargo run --release -p northd --example add_times -- [NODES] [ADDS]`: times the phases of
//! the incremental round one LSP add makes (as `ovn-nbctl lsp-add` + `lsp-set-addresses`
//! writes it) on the benchmark topology: the model patch, the context patch, the binding
//! scope and the items re-run. Medians over ADDS adds (default 20), one port per node switch
//! in turn.

use northd::incr::Engine;
use northd::topology;
use ovsdb::{Datum, Uuid};
use serde_json::json;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(800);
    let adds: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let (_, schema) =
        topology::read_schema(topology::DEFAULT_NB_SCHEMA).unwrap_or_else(|e| panic!("{e}"));
    let mut db = topology::generate(&schema, &topology::Params::with_nodes(n))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut engine = Engine::default();
    let (ctx, _, _) = engine.next_ctx(&db, &[], 1);
    engine.full(ctx, 1, northd::engine::Strategy::PerThread);
    // The node switches, in name order: the adds go round them (one port each per round).
    let mut node_switches: Vec<(String, Uuid)> = db
        .table("Logical_Switch")
        .rows
        .iter()
        .filter(|(_, r)| r.str("name").starts_with("node-"))
        .map(|(u, r)| (r.str("name").to_owned(), *u))
        .collect();
    node_switches.sort();
    let mut times: Vec<[f64; 5]> = Vec::new();
    for k in 0..adds {
        let sw = node_switches[k % node_switches.len()].1;
        let p = Uuid::from_u128(0xadd0_0000_0000_0000_0000_0000_0000_0000 | k as u128);
        let mut row = ovsdb::Row::default();
        let cols = &db.schema.tables["Logical_Switch_Port"].columns;
        row.cols.insert(
            "name".into(),
            Datum::from_json(&json!(format!("add-{k}")), &cols["name"]).unwrap(),
        );
        row.cols.insert(
            "addresses".into(),
            Datum::from_json(
                &json!(format!(
                    "0a:58:0a:f0:{:02x}:{:02x} 10.240.{}.{}",
                    k / 256 % 256,
                    k % 256,
                    k / 256 % 256,
                    k % 256
                )),
                &cols["addresses"],
            )
            .unwrap(),
        );
        db.insert_row("Logical_Switch_Port", p, row).unwrap();
        let mut ls = db.row("Logical_Switch", sw).unwrap().clone();
        let mut ports: Vec<Uuid> = ls.uuids("ports").collect();
        ports.push(p);
        let set = json!([
            "set",
            ports
                .iter()
                .map(|u| json!(["uuid", u.to_string()]))
                .collect::<Vec<_>>()
        ]);
        let ty = &db.schema.tables["Logical_Switch"].columns["ports"];
        ls.cols
            .insert("ports".into(), Datum::from_json(&set, ty).unwrap());
        db.insert_row("Logical_Switch", sw, ls).unwrap();
        let changes = vec![
            ("Logical_Switch_Port".to_owned(), p),
            ("Logical_Switch".to_owned(), sw),
        ];
        // `Engine::next_ctx`'s two steps, timed apart: the model, then the lookups.
        let old = engine.ctx().expect("a context");
        let t0 = Instant::now();
        let (nb, _, patch) = old
            .nb
            .patched(&db, &changes, |u| old.lsp_by_uuid.get(&u).map(|&(i, _)| i))
            .expect("an LSP add is patched");
        let tm = Instant::now();
        let ctx = old.patched(nb, &patch);
        let t1 = Instant::now();
        let scope = engine.binding_scope(&ctx, &patch);
        let t2 = Instant::now();
        let (_, items) = engine
            .incremental(ctx, &changes)
            .unwrap_or_else(|(_, why)| panic!("not incremental: {why}"));
        let t3 = Instant::now();
        engine.tidy();
        let t4 = Instant::now();
        std::hint::black_box((scope, items));
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        times.push([ms(t0, tm), ms(tm, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4)]);
    }
    let med = |i: usize| {
        let mut v: Vec<f64> = times.iter().map(|t| t[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let first = times[0];
    println!(
        "first add ms: model {:.2} ctx {:.2} binding_scope {:.2} incremental {:.2} tidy {:.2}",
        first[0], first[1], first[2], first[3], first[4]
    );
    println!(
        "nodes={n} adds={adds} median ms: model {:.2} ctx {:.2} binding_scope {:.2} incremental {:.2} tidy {:.2}",
        med(0),
        med(1),
        med(2),
        med(3),
        med(4)
    );
}
