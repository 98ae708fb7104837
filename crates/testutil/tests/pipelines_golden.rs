//! The pipelines golden file: regeneration from real OVS
//! (`cargo test -p testutil -- --ignored regen_pipelines`), freshness against the seed, and a
//! live spot check that OVS still answers the same (skipped without OVS).

use std::fs;
use std::time::Instant;

use testutil::ovs::OvsSandbox;
use testutil::pipelines::{
    self, PIPELINES_GOLDEN_COUNT, PIPELINES_GOLDEN_PACKETS, PIPELINES_GOLDEN_SEED,
    PIPELINES_GOLDEN_VLAN_LIMIT, PipelineCase, PipelineMix, PipelineTrace,
    canonical_datapath_actions, golden_pipelines, normalize_recirc_ids, pipeline_line,
    pipelines_golden, trace_line,
};

fn sandbox() -> OvsSandbox {
    let sb = OvsSandbox::start(PipelineMix::default().n_ports).expect("sandbox starts");
    sb.set_vlan_limit(PIPELINES_GOLDEN_VLAN_LIMIT).unwrap();
    sb
}

/// Runs pipelines `cases` (pipeline, packets) in one fresh sandbox, in order.
fn record(
    sb: &OvsSandbox,
    cases: &[(pipelines::Pipeline, Vec<pipelines::PipelinePacket>)],
) -> Vec<Vec<PipelineTrace>> {
    let mut prev_ports: Option<Vec<pipelines::PortCfg>> = None;
    cases
        .iter()
        .enumerate()
        .map(|(id, (p, packets))| {
            sb.load_pipeline(&p.flows, &p.ports, prev_ports.as_deref())
                .unwrap_or_else(|e| panic!("pipeline {id} ({}) not accepted: {e}", p.description));
            prev_ports = Some(p.ports.clone());
            let batch: Vec<(u32, Vec<u8>)> = packets
                .iter()
                .map(|x| (x.in_port, x.bytes.clone()))
                .collect();
            sb.trace_batch(&batch)
                .into_iter()
                .zip(packets)
                .enumerate()
                .map(|(seq, (t, x))| {
                    let t = t.unwrap_or_else(|e| panic!("pipeline {id} packet {seq}: {e}"));
                    PipelineTrace {
                        seq,
                        in_port: x.in_port,
                        packet: x.bytes.clone(),
                        kind: x.kind.clone(),
                        stages: t.stages,
                        errors: t.errors,
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
#[ignore = "regenerates data/pipelines_golden.tsv from real OVS"]
fn regen_pipelines() {
    testutil::skip_without_ovs!();
    let cases = golden_pipelines();
    let sb = sandbox();
    let start = Instant::now();
    let traces = record(&sb, &cases);
    let n_traces: usize = traces.iter().map(Vec::len).sum();
    eprintln!(
        "recorded {} pipelines, {n_traces} traces in {:?}",
        cases.len(),
        start.elapsed()
    );
    let mut out = String::new();
    out.push_str(&format!(
        "# Pipelines traced by {} (dummy datapath, ports p1..p{}, other_config:vlan-limit={}); seed {:#x}, {} pipelines x {} packets.\n",
        testutil::ovs::tool_version("ovs-ofctl"),
        PipelineMix::default().n_ports,
        PIPELINES_GOLDEN_VLAN_LIMIT,
        PIPELINES_GOLDEN_SEED,
        PIPELINES_GOLDEN_COUNT,
        PIPELINES_GOLDEN_PACKETS,
    ));
    out.push_str("# P\\t<id>\\t<description>\\t<port configs>\\t<flows joined by \\x1f>\n");
    out.push_str("# T\\t<id>\\t<seq>\\t<in_port>\\t<hex>\\t<kind>\\t<Flow>\\t<Megaflow>\\t<Datapath actions>\\t<errors joined by \\x1f>\\t<recirculations joined by \\x1f, each flow\\x1emegaflow\\x1eactions>\n");
    out.push_str("# Per pipeline: del-flows, add flows, configure ports, fdb/flush, then trace the packets in order (MAC learning carries over between them).\n");
    for (id, ((p, _), ts)) in cases.iter().zip(&traces).enumerate() {
        out.push_str(&pipeline_line(id, p));
        out.push('\n');
        for t in ts {
            out.push_str(&trace_line(id, t));
            out.push('\n');
        }
    }
    let path = pipelines::pipelines_golden_path();
    fs::write(&path, out).unwrap();
    eprintln!("wrote {}", path.display());
}

#[test]
fn pipelines_golden_matches_generator() {
    let golden = pipelines_golden();
    let cases = golden_pipelines();
    assert_eq!(
        golden.len(),
        cases.len(),
        "golden out of date: run regen_pipelines"
    );
    let mut n_traces = 0;
    for (g, (p, packets)) in golden.iter().zip(&cases) {
        assert_eq!(g.flows, p.flows, "pipeline {}: run regen_pipelines", g.id);
        assert_eq!(g.ports, p.ports, "pipeline {}", g.id);
        assert_eq!(g.description, p.description);
        assert_eq!(g.traces.len(), packets.len());
        for (t, x) in g.traces.iter().zip(packets) {
            assert_eq!(
                (t.in_port, &t.packet, &t.kind),
                (x.in_port, &x.bytes, &x.kind)
            );
            assert!(!t.stages.is_empty());
            n_traces += 1;
        }
    }
    assert!(n_traces >= 2000);
    // The corpus exercises what it should.
    let all_traces = || golden.iter().flat_map(|c| c.traces.iter());
    let count = |f: &dyn Fn(&PipelineTrace) -> bool| all_traces().filter(|t| f(t)).count();
    let drops = count(&|t| t.stages[0].datapath_actions == "drop");
    let recirc = count(&|t| t.stages.len() > 1);
    let errors = count(&|t| !t.errors.is_empty());
    let sets = count(&|t| t.stages[0].datapath_actions.contains("set("));
    let pushes = count(&|t| t.stages[0].datapath_actions.contains("push_vlan("));
    let pops = count(&|t| t.stages[0].datapath_actions.contains("pop_vlan"));
    let multi_out = count(&|t| t.stages[0].datapath_actions.matches(',').count() >= 2);
    eprintln!(
        "traces={n_traces} drop={drops} recirc={recirc} errors={errors} set={sets} push={pushes} pop={pops} multi={multi_out}"
    );
    assert!(drops > 100 && drops < n_traces * 3 / 5, "drops={drops}");
    assert!(recirc > 50, "recirc={recirc}");
    assert!(errors > 10, "errors={errors}");
    assert!(sets > 200 && pushes > 50 && pops > 20 && multi_out > 200);
}

/// Replays every golden pipeline (600 × 5 packets) on a fresh OVS and compares with the golden
/// file (recirculation ids normalised): the golden answers our xlate is held to
/// (`ofproto/tests/pipelines_golden.rs`, actions equal and megaflow never more 1-bits) are
/// re-checked against live OVS on every run where it is installed (CI), ≈ 40 s. Catches a
/// generator/recorder drift and a different OVS.
#[test]
fn pipelines_golden_replays_on_live_ovs() {
    testutil::skip_without_ovs!();
    let golden: Vec<PipelineCase> = pipelines_golden();
    let cases: Vec<_> = golden_pipelines();
    assert_eq!(golden.len(), cases.len(), "golden file vs generator");
    assert!(
        golden.len() >= 500,
        "fewer than 500 pipelines: {}",
        golden.len()
    );
    let flat = |t: &PipelineTrace| {
        let acts: Vec<String> = t
            .stages
            .iter()
            .map(|s| canonical_datapath_actions(&s.datapath_actions))
            .collect();
        let v: Vec<&str> = t
            .stages
            .iter()
            .zip(&acts)
            .flat_map(|(s, a)| [s.flow.as_str(), &s.megaflow, a])
            .collect();
        (normalize_recirc_ids(&v), t.errors.clone())
    };
    let differs = |g: &PipelineCase, ts: &[PipelineTrace]| {
        g.traces.len() != ts.len() || g.traces.iter().zip(ts).any(|(a, b)| flat(a) != flat(b))
    };
    let sb = sandbox();
    let traces = record(&sb, &cases);
    drop(sb);
    // A pipeline that differs is recorded again alone in a fresh sandbox: the port
    // reconfiguration between consecutive pipelines of one sandbox is applied by vswitchd
    // asynchronously, and now and then a trace runs before it lands. OVS itself is not
    // fully reproducible either: pipeline 542 packet 3 (NORMAL flooding a VLAN-1509 packet to
    // native-untagged trunks) matched the golden file in one full replay on 2026-11-22 and,
    // on a busier machine an hour later, came out as `pop_vlan,push_vlan(vid=1509,pcp=2)` (the
    // same tag) where the recording has nothing, alone or in sequence. So: what still differs
    // after the retry is listed, and more than 1 % of the pipelines failing that way (a
    // different OVS, a recorder drift) fails the test.
    let mut retried = 0;
    let mut unstable = Vec::new();
    for (g, ts) in golden.iter().zip(&traces) {
        if !differs(g, ts) {
            continue;
        }
        retried += 1;
        let sb = sandbox();
        let again = record(&sb, std::slice::from_ref(&cases[g.id]));
        for (a, b) in g.traces.iter().zip(&again[0]) {
            if flat(a) != flat(b) {
                unstable.push(format!(
                    "pipeline {} packet {}:\n  golden {:?}\n  live   {:?}",
                    g.id,
                    a.seq,
                    flat(a),
                    flat(b)
                ));
            }
        }
    }
    eprintln!(
        "live OVS: {} pipelines replayed, {} traces; {retried} re-recorded alone after a first difference; {} traces differ from the recording:\n{}",
        golden.len(),
        golden.iter().map(|g| g.traces.len()).sum::<usize>(),
        unstable.len(),
        unstable.join("\n")
    );
    assert!(
        unstable.len() * 100 <= golden.len() * PIPELINES_GOLDEN_PACKETS,
        "{} traces differ from the recording (a different OVS or a recorder drift?):\n{}",
        unstable.len(),
        unstable.join("\n")
    );
    assert!(
        retried * 20 <= golden.len(),
        "{retried} pipelines differed on the first pass"
    );
}
