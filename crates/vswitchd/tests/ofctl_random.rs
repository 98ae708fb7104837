//! A seeded random sequence of `ovs-ofctl` flow commands (adds, modifies and deletes, loose
//! and strict, with cookie masks, `out_port` and tables, in OpenFlow 1.0, 1.3 and 1.5) run
//! against our OpenFlow server and a real `ovs-vswitchd`; after every step both answer the
//! same way and hold the same flows.

mod ofctl_support;
use ofctl_support::Pair;
use testutil::rng::TestRng;

const STEPS: usize = 150;

fn pick<'a>(rng: &mut TestRng, items: &[&'a str]) -> &'a str {
    items[rng.index(items.len())]
}

/// A match from a small vocabulary, so that modifies and deletes hit what adds made.
fn random_match(rng: &mut TestRng) -> String {
    let mut parts: Vec<String> = Vec::new();
    if rng.chance(1, 2) {
        parts.push(format!("in_port={}", rng.range(1, 3)));
    }
    match rng.below(4) {
        0 => {}
        1 => parts.push("ip".into()),
        2 => {
            parts.push("tcp".into());
            if rng.chance(1, 2) {
                parts.push(format!("tp_dst={}", pick(rng, &["22", "80", "443"])));
            }
        }
        _ => {
            parts.push("ip".into());
            parts.push(format!("nw_src=10.0.0.{}", rng.range(1, 3)));
        }
    }
    parts.join(",")
}

fn random_actions(rng: &mut TestRng, table: u64, of13: bool) -> String {
    let mut v: Vec<String> = Vec::new();
    for _ in 0..rng.range(0, 2) {
        v.push(match rng.below(4) {
            0 => format!("output:{}", rng.range(1, 3)),
            1 => "mod_dl_src:00:00:00:00:00:0a".into(),
            2 => format!("set_field:{}->reg0", rng.range(1, 9)),
            _ => "LOCAL".into(),
        });
    }
    if of13 && table < 3 && rng.chance(1, 4) {
        v.push(format!("goto_table:{}", table + 1));
    }
    if v.is_empty() {
        "drop".into()
    } else {
        v.join(",")
    }
}

#[test]
fn random_flow_commands_match_ovs_step_by_step() {
    let Some(p) = Pair::start() else { return };
    let mut rng = TestRng::new(0x0f_c0_22);
    let mut kinds = [0usize; 3];
    for step in 0..STEPS {
        let version = pick(&mut rng, &["OpenFlow10", "OpenFlow13", "OpenFlow15"]);
        let of13 = version != "OpenFlow10";
        let table = if rng.chance(1, 3) { rng.range(0, 3) } else { 0 };
        let mut fields: Vec<String> = Vec::new();
        if table != 0 || rng.chance(1, 5) {
            fields.push(format!("table={table}"));
        }
        let m = random_match(&mut rng);
        let kind = rng.weighted(&[5, 3, 2]).unwrap_or(0);
        kinds[kind] += 1;
        let mut args: Vec<String> = vec!["-O".into(), version.into()];
        let strict = rng.chance(1, 3);
        let prio = format!("priority={}", pick(&mut rng, &["1", "5", "10"]));
        match kind {
            0 => {
                args.push("add-flow".into());
                fields.push(format!("cookie=0x{:x}", rng.range(1, 4) * 0x11));
                fields.push(prio);
                if !m.is_empty() {
                    fields.push(m);
                }
                fields.push(format!("actions={}", random_actions(&mut rng, table, of13)));
            }
            1 => {
                args.push("mod-flows".into());
                if strict {
                    args.push("--strict".into());
                    fields.push(prio);
                }
                if of13 && rng.chance(1, 3) {
                    fields.push(format!("cookie=0x{:x}/0xf", rng.range(1, 3)));
                }
                if !m.is_empty() {
                    fields.push(m);
                }
                fields.push(format!("actions={}", random_actions(&mut rng, table, of13)));
            }
            _ => {
                args.push("del-flows".into());
                if strict {
                    args.push("--strict".into());
                    fields.push(prio);
                }
                if of13 && rng.chance(1, 3) {
                    fields.push(format!("cookie=0x{:x}/0xff", rng.range(1, 4) * 0x11));
                }
                if rng.chance(1, 4) {
                    fields.push(format!("out_port={}", rng.range(1, 3)));
                }
                if !m.is_empty() {
                    fields.push(m);
                }
            }
        }
        args.push("br0".into());
        args.push(fields.join(","));
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        p.same(&argv);
        let ctx = format!("step {step}: ovs-ofctl {}", args.join(" "));
        let n = p.same_flows(&["-O", "OpenFlow13"], &ctx).len();
        if step % 10 == 9 {
            p.same_flows(&[], &ctx);
            p.same(&["-O", "OpenFlow13", "dump-aggregate", "br0"]);
        }
        if step % 50 == 49 {
            eprintln!("step {step}: {n} flows");
        }
    }
    assert!(kinds.iter().all(|k| *k >= 20), "a poor mix: {kinds:?}");
}
