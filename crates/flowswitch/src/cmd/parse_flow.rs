//! `parse-flow`: parse a flow in `ovs-ofctl` syntax and print it canonically, as
//! `ovs-ofctl parse-flow` prints the flow of its `OFPT_FLOW_MOD ... ADD` line.

use flow::text::{Dialect, format_flow_add, parse_flow_with};
use std::io::Write;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The flow, e.g. `tcp,nw_src=10.0.0.0/8,tp_dst=80,actions=output:2`.
    pub flow: String,
    /// OpenFlow version to speak, as ovs-ofctl's `-O` (OpenFlow10 by default, or OpenFlow13).
    #[arg(short = 'O', long = "protocols", default_value = "OpenFlow10", value_parser = parse_dialect)]
    pub dialect: Dialect,
}

fn parse_dialect(s: &str) -> Result<Dialect, String> {
    match s.to_ascii_lowercase().as_str() {
        "openflow10" | "of10" => Ok(Dialect::OpenFlow10),
        "openflow13" | "of13" => Ok(Dialect::OpenFlow13),
        _ => Err(format!("'{s}': supported: OpenFlow10, OpenFlow13")),
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let spec = parse_flow_with(&args.flow, args.dialect).map_err(|e| {
        anyhow::anyhow!("{e}\n  {}\n  {:>width$}", args.flow, "^", width = e.column)
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", format_flow_add(&spec))?;
    out.flush()?;
    Ok(())
}
