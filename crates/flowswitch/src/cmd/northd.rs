//! `northd`: compile an OVN northbound database into logical flows. With a database file,
//! print them as `ovn-sbctl lflow-list` does (or compare them with ovn-northd's); with
//! `unix:`/`tcp:` targets for `--nb-db` and `--sb-db`, run as the daemon that keeps a
//! running SB in step with a running NB, in place of `ovn-northd`.

use anyhow::Context;
use northd::{build, compare, nb::Nb, output};
use std::io::Write;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The NB: a database file as `ovsdb-server` keeps it (standalone format), or a running
    /// server's `unix:PATH` / `tcp:HOST:PORT` (then `--sb-db` is needed too).
    #[arg(long = "nb-db")]
    pub nb_db: String,
    /// The SB server to keep in step (`unix:PATH` / `tcp:HOST:PORT`): daemon mode.
    #[arg(long = "sb-db")]
    pub sb_db: Option<String>,
    /// Threads that build the logical flows.
    #[arg(long = "n-threads", default_value_t = 1)]
    pub n_threads: usize,
    /// How threads share the result: `per-thread` (own tables, merged) or `bucket-locks`
    /// (seed 003's hash-bucket locks); `serial` ignores `--n-threads`.
    #[arg(long, default_value = "per-thread")]
    pub strategy: northd::engine::Strategy,
    /// Daemon mode: exit after the first full sync.
    #[arg(long)]
    pub once: bool,
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
    if args.n_threads == 0 || args.n_threads > 256 {
        anyhow::bail!("--n-threads {}: expected 1 to 256", args.n_threads);
    }
    let live = |t: &str| t.starts_with("unix:") || t.starts_with("tcp:");
    if live(&args.nb_db) || args.sb_db.is_some() {
        let Some(sb) = args.sb_db.clone() else {
            anyhow::bail!("--nb-db {}: a running NB needs --sb-db too", args.nb_db);
        };
        if !live(&args.nb_db) || !live(&sb) {
            anyhow::bail!(
                "daemon mode: --nb-db and --sb-db must both be unix:PATH or tcp:HOST:PORT"
            );
        }
        let cfg = northd::daemon::Config {
            nb: args.nb_db.clone(),
            sb,
            threads: args.n_threads,
            strategy: args.strategy,
            once: args.once,
        };
        return northd::daemon::run(&cfg, |l| eprintln!("northd: {l}")).map_err(anyhow::Error::msg);
    }
    let db = ovsdb::file::read(&args.nb_db)?;
    if db.schema.name != "OVN_Northbound" {
        anyhow::bail!(
            "{}: database {:?} is not OVN_Northbound",
            args.nb_db,
            db.schema.name
        );
    }
    let (nb, diags) = Nb::from_db(&db);
    let ctx = build::Ctx::new(nb);
    for d in diags.iter().chain(&ctx.diags) {
        eprintln!("northd: warning: {d}");
    }
    let flows = northd::engine::build(&ctx, args.n_threads, args.strategy);
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
