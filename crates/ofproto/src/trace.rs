//! The `ofproto/trace` report: the tree of bridges, tables, actions and notes a translation
//! walked ([`Tracer`]), and the whole text OVS prints ([`format_trace`]).
//!
//! The tree and its printer follow OVS `ofproto-dpif-trace.c` exactly: a table node is
//! appended to the current list and becomes the current list while its actions run (so a
//! resubmitted table is a *sibling* that follows the `resubmit` action), and
//! `oftrace_node_print_details` indents a node by `(level + more) * 4` where `more` says
//! whether it has a following sibling or is a leaf; children print at `level + 2 * more`.

use std::fmt::Write as _;

use flow::FlowKey;

use crate::odp::format_odp_actions;
use crate::xlate::XlateOut;

/// Kind of a trace node (OVS `enum oftrace_node_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// `bridge("br0")` with an underline.
    Bridge,
    /// ` 0. match, priority N`.
    Table,
    /// An action (leaf).
    Action,
    /// ` -> detail` (leaf).
    Detail,
    /// ` >> warning` (leaf).
    Warn,
    /// ` >>>> error <<<<` (leaf).
    Error,
    /// `thaw` and, one level in, the text (`Resuming from table N`) (leaf).
    Thaw,
    /// `bucket N` of a group, its actions one level in (not a leaf).
    Bucket,
}

impl NodeKind {
    fn terminal(self) -> bool {
        !matches!(self, NodeKind::Bridge | NodeKind::Table | NodeKind::Bucket)
    }
}

#[derive(Debug, Clone)]
struct Node {
    kind: NodeKind,
    text: String,
    subs: Vec<usize>,
}

/// The trace tree under construction. Node 0 is the invisible root.
#[derive(Debug, Clone)]
pub struct Tracer {
    nodes: Vec<Node>,
    cur: usize,
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer {
            nodes: vec![Node {
                kind: NodeKind::Bridge,
                text: String::new(),
                subs: Vec::new(),
            }],
            cur: 0,
        }
    }
}

impl Tracer {
    /// Appends a node to the current list; returns its index.
    pub fn report(&mut self, kind: NodeKind, text: String) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node {
            kind,
            text,
            subs: Vec::new(),
        });
        self.nodes[self.cur].subs.push(id);
        id
    }

    /// Appends a node and makes its children the current list; returns the previous list, to
    /// give back to [`Tracer::leave`].
    pub fn enter(&mut self, kind: NodeKind, text: String) -> usize {
        let id = self.report(kind, text);
        std::mem::replace(&mut self.cur, id)
    }

    /// Like [`Tracer::enter`], but under the last node of the current list: OVS keeps
    /// reporting into the first table's list once the pipeline is done (issue #17:
    /// `--. Executing action set:`).
    pub fn enter_under_last(&mut self, kind: NodeKind, text: String) -> usize {
        let prev = self.cur;
        if let Some(&last) = self.nodes[self.cur].subs.last() {
            self.cur = last;
        }
        self.enter(kind, text);
        prev
    }

    /// Returns to the list `prev` (from [`Tracer::enter`]).
    pub fn leave(&mut self, prev: usize) {
        self.cur = prev;
    }

    /// The tree as OVS prints it.
    pub fn print(&self) -> String {
        let mut out = String::new();
        self.print_list(&mut out, &self.nodes[0].subs, 0);
        out
    }

    fn print_list(&self, out: &mut String, list: &[usize], level: usize) {
        for (i, &id) in list.iter().enumerate() {
            let n = &self.nodes[id];
            if n.kind == NodeKind::Bridge {
                out.push('\n');
            }
            // (OVS reports bucket nodes with `always_indent`.)
            let more =
                usize::from(i + 1 < list.len() || n.kind.terminal() || n.kind == NodeKind::Bucket);
            let ind = " ".repeat((level + more) * 4);
            out.push_str(&ind);
            match n.kind {
                NodeKind::Detail => {
                    let _ = writeln!(out, " -> {}", n.text);
                }
                NodeKind::Warn => {
                    let _ = writeln!(out, " >> {}", n.text);
                }
                NodeKind::Error => {
                    let _ = writeln!(out, " >>>> {} <<<<", n.text);
                }
                NodeKind::Bridge => {
                    let _ = writeln!(out, "{}", n.text);
                    out.push_str(&ind);
                    out.push_str(&"-".repeat(n.text.len()));
                    out.push('\n');
                }
                NodeKind::Table | NodeKind::Action | NodeKind::Bucket => {
                    let _ = writeln!(out, "{}", n.text);
                }
                NodeKind::Thaw => {
                    let _ = writeln!(out, "thaw\n{ind}    {}", n.text);
                }
            }
            self.print_list(out, &n.subs, level + 2 * more);
        }
    }
}

/// The full `ofproto/trace` text for a translation of `initial` (`Flow:`, the tree,
/// `Final flow:`, `Megaflow:`, `Datapath actions:` and, on failure, the error line).
pub fn format_trace(initial: &FlowKey, out: &XlateOut) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Flow: {}", flow::text::format_flow_line(initial));
    if let Some(t) = &out.trace {
        s.push_str(&t.print());
    }
    s.push_str("\nFinal flow: ");
    if out.final_key == *initial {
        s.push_str("unchanged");
    } else {
        s.push_str(&flow::text::format_flow_line(&out.final_key));
    }
    s.push('\n');
    let _ = writeln!(s, "Megaflow: {}", format_megaflow(initial, out));
    let _ = write!(s, "Datapath actions: {}", format_odp_actions(&out.actions));
    if let Some(e) = out.error {
        let _ = write!(
            s,
            "\nTranslation failed ({}), packet is dropped.",
            e.as_str()
        );
    }
    s.push('\n');
    s
}

/// The `Megaflow:` text (OVS `match_format` of the flow under the mask). The VLAN TPID bits
/// we keep for soundness are not printed (OVS has no such field in its match syntax).
pub fn format_megaflow(initial: &FlowKey, out: &XlateOut) -> String {
    let mut m = out.megaflow(initial);
    flow::FieldId::Vlan0Tpid.set_mask(&mut m.mask, 0);
    flow::FieldId::Vlan1Tpid.set_mask(&mut m.mask, 0);
    m.key = m.key.masked(&m.mask);
    flow::text::format_match(&m)
}

/// The flow `ofproto/trace` starts from, and whether the trace may change state (a packet
/// given as bytes learns MACs, as OVS's does; a flow spec does not).
///
/// With `packet`, its bytes extracted with the flow's metadata (`in_port`, `recirc_id`,
/// `pkt_mark`) and `vlan_limit` (OVS `other_config:vlan-limit`, see
/// [`flow::extract::PacketMeta::vlan_limit`]). Without, the flow itself, with the TPID 0x8100
/// filled in for each VLAN tag it names: match syntax cannot name a TPID, while every tagged
/// packet's key carries one, so without it a flow-spec trace of a tagged packet would be
/// translated (and its megaflow printed) as if the packet had no tag.
pub fn trace_start(
    m: &flow::ofp::Match,
    packet: Option<&[u8]>,
    vlan_limit: u8,
) -> Result<(FlowKey, bool), String> {
    use flow::FieldId;
    match packet {
        Some(bytes) => {
            if bytes.len() < 14 {
                return Err("Packet data too short for Ethernet".into());
            }
            let mut meta = flow::extract::PacketMeta::port(m.value(FieldId::InPort) as u32)
                .with_vlan_limit(vlan_limit);
            meta.recirc_id = m.value(FieldId::RecircId) as u32;
            meta.pkt_mark = m.value(FieldId::PktMark) as u32;
            let mut k = FlowKey::ZERO;
            flow::extract::extract(bytes, &meta, &mut k);
            Ok((k, true))
        }
        None => {
            let mut k = m.key;
            for (tpid, tci) in [
                (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
                (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
            ] {
                if tci.get(&k) as u16 & flow::field::VLAN_CFI != 0 && tpid.get(&k) == 0 {
                    tpid.set(&mut k, 0x8100);
                }
            }
            Ok((k, false))
        }
    }
}

/// Conntrack state flags in OVS's order and names (`ofproto/trace --ct-next`).
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
pub fn parse_ct_state(s: &str) -> Result<u32, String> {
    let mut bits = 0;
    for name in s.split([',', '|', '+']).filter(|w| !w.is_empty()) {
        let Some((_, b)) = CT_FLAGS.iter().find(|(n, _)| *n == name) else {
            return Err(format!(
                "unknown ct_state flag {name:?} (new, est, rel, rpl, inv, trk, snat, dnat)"
            ));
        };
        bits |= b;
    }
    Ok(bits)
}

/// `est|trk`: the flags, `|`-separated, in OVS's order.
pub fn format_ct_state(bits: u32) -> String {
    CT_FLAGS
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join("|")
}

/// The whole `ofproto/trace` text for `key` on `br`, recirculations included: each frozen
/// state resumes as OVS shows it, breadth first — `ct(...)` with the next of `ct_next`'s
/// states (OVS's default `trk|new` when they run out), other recirculations at their table.
/// More than `max_passes` passes is an error (a pipeline that recirculates forever).
/// `now_ms` is the bridge's clock (MAC learning ages by it).
pub fn trace_with_resumes(
    br: &crate::Bridge,
    key: FlowKey,
    now_ms: u64,
    side_effects: bool,
    ct_next: &[u32],
    max_passes: usize,
) -> Result<String, String> {
    use crate::xlate::{XlateIn, resume_key, xlate};
    let mut ct_next: std::collections::VecDeque<u32> = ct_next.iter().copied().collect();
    let input = XlateIn {
        key,
        now_ms,
        side_effects,
        trace: true,
        table: 0,
    };
    let out = xlate(br, &input);
    let mut s = format_trace(&key, &out);
    let mut pending: std::collections::VecDeque<crate::xlate::Frozen> = out
        .frozen
        .into_iter()
        .filter(|f| f.actions.is_empty() && !f.packet_in)
        .collect();
    let mut passes = 1;
    while let Some(f) = pending.pop_front() {
        passes += 1;
        if passes > max_passes {
            return Err(format!(
                "more than {max_passes} recirculations: stopping the trace"
            ));
        }
        let rule = "=".repeat(79);
        let (title, state) = if f.zone.is_none() {
            (format!("recirc({:#x}) - resume table {}", f.id, f.table), 0)
        } else if let Some(st) = ct_next.pop_front() {
            (
                format!(
                    "recirc({:#x}) - resume conntrack with ct_state={}",
                    f.id,
                    format_ct_state(st)
                ),
                st,
            )
        } else {
            (
                format!(
                    "recirc({:#x}) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)",
                    f.id
                ),
                flow::field::ct_state::TRACKED | flow::field::ct_state::NEW,
            )
        };
        let _ = writeln!(s, "\n{rule}\n{title}\n{rule}\n");
        let key = resume_key(&f, state);
        let input = XlateIn {
            key,
            now_ms,
            side_effects,
            trace: true,
            table: f.table,
        };
        let out = xlate(br, &input);
        s.push_str(&format_trace(&key, &out));
        // `ofproto/trace` does not follow a select group's `dp_hash` recirculation.
        pending.extend(
            out.frozen
                .into_iter()
                .filter(|f| f.actions.is_empty() && !f.packet_in),
        );
    }
    Ok(s)
}
