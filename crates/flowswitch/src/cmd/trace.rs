//! `trace` subcommand: `ovs-appctl ofproto/trace` for a pipeline given as an `ovs-ofctl
//! add-flows` file.
//!
//! `flowswitch trace --flows FILE [--bridge-ports N] 'in_port=1,udp,nw_dst=10.1.1.1'` traces a
//! flow written in match syntax; `--packet HEX` traces packet bytes instead (the flow argument
//! then only supplies metadata such as `in_port`, as in `ofproto/trace br0 in_port=1 HEX`). The
//! bridge is OVS's test bridge: `br0` with its LOCAL port (datapath port 100) and ports
//! `p1..pN` numbered 1..N. Output: `Flow:`, the per-table tree, `Final flow:`, `Megaflow:`,
//! `Datapath actions:`. `--groups FILE` first adds the groups of an `ovs-ofctl add-groups`
//! file (one `add-group` text per line), so that flows may use `group:N`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use ofproto::{Backend, Bridge};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Flow file in `ovs-ofctl add-flows` syntax: one flow per line; a `#` starts a comment
    /// that runs to the end of its line, blank lines are skipped.
    #[arg(long)]
    pub flows: PathBuf,
    /// Group file in `ovs-ofctl add-groups` syntax (one `group_id=…,type=…,bucket=…` per
    /// line; `#` comments and blank lines skipped), added before the flows.
    #[arg(long)]
    pub groups: Option<PathBuf>,
    /// Number of ports `p1..pN` on the bridge.
    #[arg(long, default_value_t = 4)]
    pub bridge_ports: u16,
    /// Packet bytes in hex (the flow argument then gives only metadata, e.g. `in_port=1`).
    #[arg(long)]
    pub packet: Option<String>,
    /// Use the linear reference classifier instead of the tuple-space one.
    #[arg(long)]
    pub linear: bool,
    /// `ct_state` for the next conntrack recirculation (`trk,est`; repeat for later ones;
    /// default `trk,new`), as `ofproto/trace --ct-next`.
    #[arg(long = "ct-next")]
    pub ct_next: Vec<String>,
    /// VLAN headers parsed from `--packet` bytes (OVS `other_config:vlan-limit`: 1, OVS's
    /// default, parses the outer tag only; 0 or 2 parse both).
    #[arg(long, default_value_t = 1)]
    pub vlan_limit: u32,
    /// The flow, in match syntax (`in_port=1,udp,nw_dst=10.1.1.1`).
    pub flow: String,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.flows)
        .with_context(|| format!("reading {}", args.flows.display()))?;
    let backend = if args.linear {
        Backend::Linear
    } else {
        Backend::TupleSpace
    };
    let mut br = Bridge::ovs_sandbox(args.bridge_ports, backend);
    if let Some(g) = &args.groups {
        let gtext =
            std::fs::read_to_string(g).with_context(|| format!("reading {}", g.display()))?;
        br.add_groups_text(&gtext, 0)
            .map_err(|e| anyhow::anyhow!("{}: {e}", g.display()))?;
    }
    br.add_flows_text(&text, 0)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.flows.display()))?;
    let m = flow::text::parse_match(&args.flow)
        .map_err(|e| anyhow::anyhow!("Bad openflow flow syntax: {e}"))?;
    let bytes = args
        .packet
        .as_deref()
        .map(super::receive::unhex)
        .transpose()?;
    let limit = u8::from(args.vlan_limit == 1);
    let (key, side_effects) =
        ofproto::trace::trace_start(&m, bytes.as_deref(), limit).map_err(anyhow::Error::msg)?;
    let ct_next = args
        .ct_next
        .iter()
        .map(|s| ofproto::trace::parse_ct_state(s).map_err(|e| anyhow::anyhow!("--ct-next: {e}")))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    let text = ofproto::trace::trace_with_resumes(
        &br,
        key,
        0,
        side_effects,
        &ct_next,
        usize::from(datapath::MAX_RECIRC_DEPTH) * 8,
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{text}")?;
    stdout.flush()?;
    Ok(())
}
