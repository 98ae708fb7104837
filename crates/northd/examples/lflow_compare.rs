//! `cargo run --release -p northd --example lflow_compare -- NB.db LFLOWS.txt [EXAMPLES [STAGE-PREFIX]]`:
//! compiles NB.db and compares the result with ovn-northd's `ovn-sbctl lflow-list` output,
//! stage by stage (a quick loop for stage work; `flowswitch northd --compare` is the same
//! through the CLI).

use northd::{build, compare, nb::Nb, output};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: lflow_compare NB.db LFLOWS.txt [EXAMPLES [STAGE-PREFIX]]");
        std::process::exit(2);
    }
    let examples: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let prefix = args.get(4).cloned().unwrap_or_default();
    let db = ovsdb::file::read(&args[1]).unwrap_or_else(|e| panic!("{e}"));
    let (nb, diags) = Nb::from_db(&db);
    let mut ctx = build::Ctx::new(nb);
    // Tunnel keys (they appear in some flows) come from the SB ovn-northd wrote, when
    // there is one next to the NB.
    if let Some(sb_path) = args[1]
        .strip_suffix("nb.db")
        .map(|p| format!("{p}sb.db"))
        .filter(|p| std::path::Path::new(p).exists())
    {
        match ovsdb::file::read(&sb_path) {
            Ok(sb) => ctx.load_tunnel_keys(&sb),
            Err(e) => eprintln!("warning: {sb_path}: {e}"),
        }
    }
    for d in diags.iter().chain(&ctx.diags) {
        eprintln!("warning: {d}");
    }
    let t = std::time::Instant::now();
    let flows = build::build_serial(&ctx);
    eprintln!("built {} flows in {:?}", flows.len(), t.elapsed());
    let text = std::fs::read_to_string(&args[2]).unwrap_or_else(|e| panic!("{}: {e}", args[2]));
    let theirs: Vec<_> = output::parse_lflow_list(&text)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .filter(|f| f.stage.name().starts_with(&prefix))
        .collect();
    let ours: Vec<_> = output::to_text_flows(&ctx, &flows)
        .into_iter()
        .filter(|f| f.stage.name().starts_with(&prefix))
        .collect();
    print!(
        "{}",
        compare::report(&compare::diff(&ours, &theirs), examples)
    );
}
