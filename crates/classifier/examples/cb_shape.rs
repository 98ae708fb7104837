//! Subtable shapes of a ClassBench table (tuning aid): `cargo run --release -p classifier
//! --example cb_shape -- RULES`. One line per subtable in lookup order: prefix lengths of the
//! subtable mask on nw_src, nw_dst, tp_src, tp_dst, nw_proto, then rules and max priority.

use std::path::Path;

use classifier::OfTable;
use classifier::classbench;
use flow::FieldId;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rules = classbench::read_rules(Path::new(&args[1])).expect("rules");
    let n = rules.len() as u32;
    let mut table: OfTable<u32> = OfTable::new();
    for (line, r) in rules.iter().enumerate() {
        for (k, m) in r.expand() {
            table.insert(n - line as u32, &k, &m, line as u32);
        }
    }
    let trace = args
        .get(2)
        .map(|t| classbench::read_trace(Path::new(t)).expect("trace"));
    let mut per = vec![[0usize; 3]; table.n_subtables()];
    let nt = trace.as_ref().map_or(1, |t| t.len().max(1));
    for h in trace.iter().flatten() {
        table.probe_detail(&h.key(), &mut per);
    }
    let st = table.stats();
    println!("subtables={} max_list={}", st.subtables, st.max_list);
    for ((m, cnt, prio), c) in table.subtable_summary().into_iter().zip(&per) {
        let l = |f: FieldId| f.get_mask(&m).count_ones();
        println!(
            "src/{:<2} dst/{:<2} sp/{:<2} dp/{:<2} proto/{:<2}  rules={:<6} max_prio={:<6} \
             probes={:.3} hits={:.3} compared={:.3}",
            l(FieldId::NwSrc),
            l(FieldId::NwDst),
            l(FieldId::TpSrc),
            l(FieldId::TpDst),
            l(FieldId::NwProto),
            cnt,
            prio,
            c[0] as f64 / nt as f64,
            c[1] as f64 / nt as f64,
            c[2] as f64 / nt as f64,
        );
    }
}
