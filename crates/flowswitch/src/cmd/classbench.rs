//! `classbench` subcommand (being written).

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
