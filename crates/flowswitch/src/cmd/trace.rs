//! `trace` subcommand: `ovs-appctl ofproto/trace` for a pipeline given as an `ovs-ofctl
//! add-flows` file.
//!
//! `flowswitch trace --flows FILE [--bridge-ports N] 'in_port=1,udp,nw_dst=10.1.1.1'` traces a
//! flow written in match syntax; `--packet HEX` traces packet bytes instead (the flow argument
//! then only supplies metadata such as `in_port`, as in `ofproto/trace br0 in_port=1 HEX`). The
//! bridge is OVS's test bridge: `br0` with its LOCAL port (datapath port 100) and ports
//! `p1..pN` numbered 1..N. Output: `Flow:`, the per-table tree, `Final flow:`, `Megaflow:`,
//! `Datapath actions:`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use flow::FieldId;
use flow::extract::{PacketMeta, extract};
use ofproto::{Backend, Bridge, XlateIn};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Flow file in `ovs-ofctl add-flows` syntax: one flow per line; a `#` starts a comment
    /// that runs to the end of its line, blank lines are skipped.
    #[arg(long)]
    pub flows: PathBuf,
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
    /// The flow, in match syntax (`in_port=1,udp,nw_dst=10.1.1.1`).
    pub flow: String,
}

/// Conntrack state flags in OVS's order and names.
const CT_FLAGS: [(&str, u32); 8] = [
    ("new", flow::field::ct_state::NEW),
    ("est", flow::field::ct_state::ESTABLISHED),
    ("rel", flow::field::ct_state::RELATED),
    ("rpl", flow::field::ct_state::REPLY_DIR),
    ("inv", flow::field::ct_state::INVALID),
    ("trk", flow::field::ct_state::TRACKED),
    ("snat", flow::field::ct_state::SRC_NAT),
    ("dnat", flow::field::ct_state::DST_NAT),
];

/// `trk,est`, `trk|est` or `+trk+est` → bits.
fn parse_ct_state(s: &str) -> anyhow::Result<u32> {
    let mut bits = 0;
    for name in s.split([',', '|', '+']).filter(|w| !w.is_empty()) {
        let Some((_, b)) = CT_FLAGS.iter().find(|(n, _)| *n == name) else {
            bail!(
                "--ct-next: unknown ct_state flag {name:?} (new, est, rel, rpl, inv, trk, snat, dnat)"
            );
        };
        bits |= b;
    }
    Ok(bits)
}

/// `est|trk`: the flags, `|`-separated, in OVS's order.
fn format_ct_state(bits: u32) -> String {
    CT_FLAGS
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join("|")
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
    br.add_flows_text(&text, 0)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.flows.display()))?;
    let m = flow::text::parse_match(&args.flow)
        .map_err(|e| anyhow::anyhow!("Bad openflow flow syntax: {e}"))?;
    let (key, side_effects) = match &args.packet {
        Some(hex) => {
            let bytes = super::receive::unhex(hex)?;
            if bytes.len() < 14 {
                bail!("Packet data too short for Ethernet");
            }
            let in_port = m.value(FieldId::InPort) as u32;
            let mut meta = PacketMeta::port(in_port);
            meta.recirc_id = m.value(FieldId::RecircId) as u32;
            meta.pkt_mark = m.value(FieldId::PktMark) as u32;
            let mut k = flow::FlowKey::ZERO;
            extract(&bytes, &meta, &mut k);
            (k, true)
        }
        None => (m.key, false),
    };
    let input = XlateIn {
        key,
        now_ms: 0,
        side_effects,
        trace: true,
        table: 0,
    };
    let mut ct_next = args
        .ct_next
        .iter()
        .map(|s| parse_ct_state(s))
        .collect::<anyhow::Result<std::collections::VecDeque<u32>>>()?;
    let out = ofproto::xlate(&br, &input);
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", ofproto::format_trace(&key, &out))?;
    // Each recirculation the pass froze resumes as `ofproto/trace` shows it, breadth first.
    let mut pending: std::collections::VecDeque<ofproto::xlate::Frozen> =
        out.frozen.into_iter().collect();
    let mut passes = 1;
    while let Some(f) = pending.pop_front() {
        passes += 1;
        if passes > usize::from(datapath::MAX_RECIRC_DEPTH) * 8 {
            bail!("more than {passes} recirculations: stopping the trace");
        }
        let rule = "=".repeat(79);
        let title = if f.zone.is_none() {
            format!("recirc({:#x}) - resume table {}", f.id, f.table)
        } else if let Some(st) = ct_next.pop_front() {
            format!(
                "recirc({:#x}) - resume conntrack with ct_state={}",
                f.id,
                format_ct_state(st)
            )
        } else {
            format!(
                "recirc({:#x}) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)",
                f.id
            )
        };
        let state = match title.split("ct_state=").nth(1) {
            Some(t) => parse_ct_state(t.split(' ').next().unwrap_or(""))?,
            None => 0,
        };
        writeln!(stdout, "\n{rule}\n{title}\n{rule}\n")?;
        let key = ofproto::xlate::resume_key(&f, state);
        let input = XlateIn {
            key,
            now_ms: 0,
            side_effects,
            trace: true,
            table: f.table,
        };
        let out = ofproto::xlate(&br, &input);
        write!(stdout, "{}", ofproto::format_trace(&key, &out))?;
        pending.extend(out.frozen);
    }
    stdout.flush()?;
    Ok(())
}
