//! `northd`: compile an OVN northbound database into logical flows and print them as
//! `ovn-sbctl lflow-list` does; optionally compare them with ovn-northd's.

use anyhow::Context;
use northd::{build, compare, nb::Nb, output};
use std::io::Write;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The NB database file, as `ovsdb-server` keeps it (standalone format).
    #[arg(long = "nb-db")]
    pub nb_db: String,
    /// Compare with this `ovn-sbctl lflow-list` output instead of printing: one line per
    /// stage, then examples of differing flows (`+` only ours, `-` only ovn-northd's).
    #[arg(long)]
    pub compare: Option<String>,
    /// Differing flows shown per stage with `--compare`.
    #[arg(long, default_value_t = 3)]
    pub examples: usize,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let db = ovsdb::file::read(&args.nb_db)?;
    if db.schema.name != "OVN_Northbound" {
        anyhow::bail!(
            "{}: database {:?} is not OVN_Northbound",
            args.nb_db,
            db.schema.name
        );
    }
    let (nb, diags) = Nb::from_db(&db);
    let ctx = build::Ctx::new(&nb);
    for d in diags.iter().chain(&ctx.diags) {
        eprintln!("northd: warning: {d}");
    }
    let flows = build::build_serial(&ctx);
    let mut out = std::io::stdout().lock();
    match &args.compare {
        None => out.write_all(output::lflow_list(&ctx, &flows).as_bytes())?,
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            let theirs =
                output::parse_lflow_list(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            let ours = output::to_text_flows(&ctx, &flows);
            let d = compare::diff(&ours, &theirs);
            out.write_all(compare::report(&d, args.examples).as_bytes())?;
            if !compare::is_equal(&d) {
                out.flush()?;
                anyhow::bail!("logical flows differ from {path}");
            }
        }
    }
    out.flush()?;
    Ok(())
}
