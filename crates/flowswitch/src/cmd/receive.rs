//! `receive`: a stateful replay, frame by frame, through the whole datapath — OVS's
//! `netdev-dummy/receive` for flowswitch.
//!
//! `flowswitch receive --flows FILE [--dump-conntrack] [--hex] SCRIPT` builds OVS's test
//! bridge (`br0`, ports `p1..pN` numbered 1..N, every port a memory port), loads the flows,
//! and runs SCRIPT line by line. A line `<in_port> <frame as hex>` sends that frame into the
//! datapath — caches, upcalls, the connection tracker, recirculation — and prints
//! `<line number> -> <output ports, ascending>` or `<line number> -> drop` (with `--hex`,
//! each output frame follows as `  <port>: <hex>`). Blank lines and `#` comments are
//! skipped; line numbers count every line of the file from 1.
//!
//! Other lines are control commands in OVS's vocabulary (`ovs-appctl dpctl/…`), run in
//! order between frames, their output printed in place:
//!
//! | line | does |
//! |---|---|
//! | `dump-conntrack [zone=N]` | the connection table, `dpctl/dump-conntrack` lines |
//! | `flush-conntrack [zone=N] [TUPLE]` | removes connections (TUPLE: `ct_nw_src=…,ct_nw_dst=…,ct_nw_proto=…,ct_tp_src=…,ct_tp_dst=…`) |
//! | `ct-stats-show` | connection counts per protocol and the tracker's counters |
//! | `ipf-get-status` | the fragment reassembler's configuration and counters (`dpctl/ipf-get-status`) |
//! | `ct-set-maxconns N` / `ct-get-maxconns` / `ct-get-nconns` | the global limit and count |
//! | `ct-set-limits [default=N] [zone=Z,limit=N]…` / `ct-get-limits` / `ct-del-limits zone=Z[,Z…]` | per-zone limits |
//! | `advance MS` | moves the tracker's and the bridge's clocks MS milliseconds forward (expiry without waiting) |
//! | `add-flow FLOW` / `mod-flows FLOW` / `del-flows [FLOW]` | an OpenFlow flow mod (`ovs-ofctl` syntax); cached megaflows stay until a revalidation |
//! | `revalidator/wait` | one revalidator pass: stats pushed, idle megaflows expired, stale ones fixed or deleted |
//! | `revalidator/purge` | deletes every megaflow (stats pushed first) |
//! | `upcall/show` / `upcall/set-flow-limit N` | flow counts, flow limit, dump duration, upcall outcomes / the flow-limit ceiling |
//! | `dpctl/dump-flows [-m] [--terse]` | the megaflows, sorted (`-m`: ufid first; `--terse`: ufid and stats only) |
//!
//! After the script, `--dump-conntrack` prints the whole table. Every frame is checked
//! against the counters: it is received once, and leaves as outputs or counted drops.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use conntrack::ipf::{Ipf, IpfConfig};
use conntrack::{Config, Conntrack};
use datapath::{ActionTable, Dpcls, DpclsConfig, Pmd, PmdConfig};
use netdev::{MAX_FRAME, MemHandle, MemPort};
use ofproto::{Backend, Bridge};

use ofproto::FlowModCommand;
use upcall::ct_adapter::CtAdapter;
use upcall::handler::SharedBridge;
use upcall::revalidate::{Revalidator, RevalidatorConfig};

/// Most ports the bridge may have.
pub const MAX_PORTS: u16 = 4096;
/// Largest script accepted, in bytes.
pub const MAX_SCRIPT_BYTES: u64 = 256 << 20;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Flow file in `ovs-ofctl add-flows` syntax (one flow per line, `#` comments).
    #[arg(long)]
    pub flows: PathBuf,
    /// Number of ports `p1..pN` on the bridge (1..=4096).
    #[arg(long, default_value_t = 8)]
    pub bridge_ports: u16,
    /// Print the connection table (`dpctl/dump-conntrack` format) after the script.
    #[arg(long)]
    pub dump_conntrack: bool,
    /// Print each output frame in hex under its frame's line.
    #[arg(long)]
    pub hex: bool,
    /// The script: `<in_port> <frame hex>` lines and control commands (module doc).
    pub script: PathBuf,
}

/// A bridge's datapath driven frame by frame. Used by `receive` and by tests.
pub struct Replayer {
    pmd: Pmd,
    handles: Vec<(u32, MemHandle)>,
    ct: Arc<Conntrack>,
    ipf: Arc<Ipf>,
    offset_ms: Arc<AtomicU64>,
    shared: Arc<SharedBridge>,
    reval: Revalidator,
    dpcls: Arc<Dpcls>,
    actions: Arc<ActionTable>,
}

impl std::fmt::Debug for Replayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayer")
            .field("ports", &self.handles.len())
            .finish_non_exhaustive()
    }
}

/// What one frame did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameOutcome {
    /// Output frames, by port, in port order then output order.
    pub outputs: Vec<(u32, Vec<u8>)>,
}

impl Replayer {
    /// A datapath over `bridge_ports` memory ports with `flows` loaded.
    pub fn new(flows: &str, bridge_ports: u16) -> anyhow::Result<Replayer> {
        if bridge_ports == 0 || bridge_ports > MAX_PORTS {
            bail!("--bridge-ports must be 1..={MAX_PORTS}, not {bridge_ports}");
        }
        let mut bridge = Bridge::ovs_sandbox(bridge_ports, Backend::TupleSpace);
        bridge
            .add_flows_text(flows, 0)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let dpcls = Arc::new(Dpcls::new(DpclsConfig::default()));
        let actions = Arc::new(ActionTable::new(1 << 16));
        let cfg = PmdConfig {
            // Every flow enters the EMC at once, so a script exercises the cache tiers.
            emc_insert_inv_prob: 1,
            pool_size: 1024,
            ..PmdConfig::default()
        };
        // The bridge's clock (MAC learning, OpenFlow timeouts, megaflow idle time) is manual:
        // `advance` moves it with the tracker's.
        let shared = SharedBridge::with_manual_clock(bridge, 1_000);
        let reval = Revalidator::new(
            shared.clone(),
            dpcls.clone(),
            actions.clone(),
            RevalidatorConfig::default(),
        );
        let mut pmd = Pmd::new(
            cfg,
            dpcls.clone(),
            actions.clone(),
            Box::new(reval.upcall()),
        );
        let ct = Arc::new(Conntrack::new(Config::default()));
        let ipf = Arc::new(Ipf::new(IpfConfig::default()));
        let offset_ms = Arc::new(AtomicU64::new(0));
        pmd.set_conntrack(Box::new(CtAdapter::new(
            ct.clone(),
            ipf.clone(),
            offset_ms.clone(),
        )));
        let mut handles = Vec::new();
        for no in 1..=u32::from(bridge_ports) {
            let port = MemPort::new(format!("p{no}"));
            handles.push((no, port.handle()));
            pmd.add_port(no, Box::new(port), true)
                .with_context(|| format!("adding p{no}"))?;
        }
        Ok(Replayer {
            pmd,
            handles,
            ct,
            ipf,
            offset_ms,
            shared,
            reval,
            dpcls,
            actions,
        })
    }

    /// The shared connection table.
    pub fn conntrack(&self) -> &Arc<Conntrack> {
        &self.ct
    }

    /// Moves the tracker's and the bridge's clocks `ms` forward.
    pub fn advance(&self, ms: u64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
        self.shared
            .set_now_ms(self.shared.now_ms().saturating_add(ms));
    }

    /// Sends `frame` in on `in_port` and runs the datapath until it is idle.
    pub fn send(&mut self, in_port: u32, frame: &[u8]) -> anyhow::Result<FrameOutcome> {
        if frame.len() > MAX_FRAME {
            bail!(
                "frame of {} bytes exceeds the {MAX_FRAME}-byte maximum",
                frame.len()
            );
        }
        let Some((_, h)) = self.handles.iter().find(|(no, _)| *no == in_port) else {
            bail!(
                "no port {in_port} on the bridge (ports 1..={})",
                self.handles.len()
            );
        };
        h.inject(frame.to_vec());
        let before = self.pmd.stats().packets_received;
        // Each round receives at most what was injected; a round with nothing ends it.
        while self.pmd.poll_once() > 0 {}
        let got = self.pmd.stats().packets_received - before;
        if got != 1 {
            bail!("the datapath received {got} packets for one frame");
        }
        let mut outputs = Vec::new();
        for (no, h) in &self.handles {
            for f in h.take_tx() {
                outputs.push((*no, f));
            }
        }
        Ok(FrameOutcome { outputs })
    }

    /// The datapath's counters.
    pub fn stats(&self) -> &datapath::PmdStats {
        self.pmd.stats()
    }

    /// `dpctl/dump-flows` lines, sorted: `-m` puts each flow's ufid first, `--terse` prints
    /// only the ufid and the stats (OVS's terse dump).
    fn dump_flows(&self, more: bool, terse: bool) -> Vec<String> {
        let now_ms = netdev::tsc::now() / (netdev::tsc::hz() / 1000).max(1);
        let fmt = datapath::dpctl::KeyFormat::default();
        let mut v: Vec<String> = self
            .dpcls
            .flows()
            .iter()
            .filter(|f| !f.is_dead())
            .map(|f| {
                let mut l = String::new();
                if more || terse {
                    l = format!("ufid:{}, ", datapath::dpctl::ufid_text(f.ufid.0));
                }
                if terse {
                    datapath::dpctl::format_flow_stats(&mut l, &f.stats.snapshot(), now_ms);
                } else {
                    let actions = datapath::dpctl::actions_text(&self.actions, f.actions());
                    l += &datapath::dpctl::format_dp_flow(f, now_ms, &actions, &fmt);
                }
                l
            })
            .collect();
        v.sort();
        v
    }

    /// Runs one control command (module doc); its output, one line each.
    pub fn command(&mut self, line: &str) -> anyhow::Result<Vec<String>> {
        let mut words = line.split_whitespace();
        let Some(cmd) = words.next() else {
            return Ok(Vec::new());
        };
        let args: Vec<&str> = words.collect();
        let ct = &self.ct;
        let mut out = Vec::new();
        match cmd {
            "dump-conntrack" => {
                let zone = match args.as_slice() {
                    [] => None,
                    [z] => Some(parse_zone(z)?),
                    _ => bail!("usage: dump-conntrack [zone=N]"),
                };
                out.extend(dump_lines(ct, zone));
            }
            "flush-conntrack" => {
                let mut zone = None;
                let mut tuple = None;
                for a in &args {
                    if a.starts_with("zone=") {
                        zone = Some(parse_zone(a)?);
                    } else {
                        tuple = Some(parse_flush_tuple(a).context("flush-conntrack")?);
                    }
                }
                ct.flush(zone, tuple.as_ref());
            }
            "ct-stats-show" => out.extend(stats_lines(ct)),
            "ipf-get-status" => {
                if !args.is_empty() {
                    bail!("usage: ipf-get-status");
                }
                out.extend(self.ipf.status_lines());
            }
            "ct-set-maxconns" => {
                let [n] = args.as_slice() else {
                    bail!("usage: ct-set-maxconns N");
                };
                let n: u32 = n
                    .parse()
                    .with_context(|| format!("ct-set-maxconns: bad number {n:?}"))?;
                ct.set_maxconns(n);
                out.push("setting maxconns successful".into());
            }
            "ct-get-maxconns" => out.push(ct.maxconns().to_string()),
            "ct-get-nconns" => out.push(ct.nconns().to_string()),
            "ct-set-limits" => {
                // Parsed whole first: a bad argument changes nothing.
                let limits = args
                    .iter()
                    .map(|a| parse_zone_limit(a))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                for l in limits {
                    match l {
                        (None, limit) => ct.set_default_zone_limit(Some(limit)),
                        (Some(zone), limit) => ct.set_zone_limit(zone, Some(limit)),
                    }
                }
            }
            "ct-del-limits" => {
                let [zs] = args.as_slice() else {
                    bail!("usage: ct-del-limits zone=Z[,Z…]");
                };
                for z in parse_zone_list(zs).context("usage: ct-del-limits zone=Z[,Z…]")? {
                    ct.set_zone_limit(z, None);
                }
            }
            "ct-get-limits" => {
                let default = ct.default_zone_limit().map_or(0, |(limit, _)| limit);
                out.push(format!("default limit={default}"));
                let only: Option<Vec<u16>> = match args.as_slice() {
                    [] => None,
                    [zs] => {
                        Some(parse_zone_list(zs).context("usage: ct-get-limits [zone=Z[,Z…]]")?)
                    }
                    _ => bail!("usage: ct-get-limits [zone=Z[,Z…]]"),
                };
                for (z, limit, count) in ct.zone_limits() {
                    if only.as_ref().is_none_or(|o| o.contains(&z)) {
                        out.push(format!("zone={z},limit={limit},count={count}"));
                    }
                }
            }
            "advance" => {
                let [ms] = args.as_slice() else {
                    bail!("usage: advance MS");
                };
                let ms: u64 = ms
                    .parse()
                    .with_context(|| format!("advance: bad milliseconds {ms:?}"))?;
                self.advance(ms);
                // Expire what the new time ends, as the sweeper would.
                let now = netdev::tsc::now() / (netdev::tsc::hz() / 1000).max(1)
                    + self.offset_ms.load(Ordering::Relaxed);
                while ct.sweep(now, usize::MAX) > 0 {}
            }
            "upcall/show" => {
                if !args.is_empty() {
                    bail!("usage: upcall/show");
                }
                let show = self.reval.udpif().show("netdev@ovs-netdev");
                out.extend(show.lines().map(str::to_string));
            }
            "upcall/set-flow-limit" => {
                let [n] = args.as_slice() else {
                    bail!("usage: upcall/set-flow-limit N");
                };
                let n: usize = n
                    .parse()
                    .with_context(|| format!("upcall/set-flow-limit: bad number {n:?}"))?;
                self.reval
                    .udpif()
                    .limit
                    .set_ceiling(n)
                    .map_err(|e| anyhow::anyhow!("upcall/set-flow-limit: {e}"))?;
                out.push(format!("set flow_limit to {n}"));
            }
            "revalidator/wait" | "revalidator/purge" => {
                if !args.is_empty() {
                    bail!("usage: {cmd}");
                }
                let now = self.shared.now_ms();
                if cmd == "revalidator/wait" {
                    self.reval.run(now);
                } else {
                    self.reval.run_purge(now);
                }
            }
            "dpctl/dump-flows" => {
                let (mut more, mut terse) = (false, false);
                for a in &args {
                    match *a {
                        "-m" | "--more" => more = true,
                        "--terse" => terse = true,
                        _ => bail!("usage: dpctl/dump-flows [-m] [--terse]"),
                    }
                }
                out.extend(self.dump_flows(more, terse));
            }
            "add-flow" | "mod-flows" | "del-flows" => {
                let text = line[cmd.len()..].trim();
                let command = match cmd {
                    "add-flow" => FlowModCommand::Add,
                    "mod-flows" => FlowModCommand::Modify,
                    _ => FlowModCommand::Delete,
                };
                if text.is_empty() && command != FlowModCommand::Delete {
                    bail!("usage: {cmd} FLOW");
                }
                self.shared
                    .flow_mod_text(command, text)
                    .map_err(|e| anyhow::anyhow!("{cmd}: {e}"))?;
            }
            _ => bail!("unknown command {cmd:?}"),
        }
        Ok(out)
    }
}

/// `dpctl/dump-conntrack` lines of `zone` (all zones if `None`), sorted.
pub fn dump_lines(ct: &Conntrack, zone: Option<u16>) -> Vec<String> {
    let mut v: Vec<String> = ct.dump(zone).iter().map(|c| c.to_string()).collect();
    v.sort();
    v
}

/// `zone=Z[,Z…]`, parsed whole (an error leaves nothing half done).
fn parse_zone_list(s: &str) -> anyhow::Result<Vec<u16>> {
    let zs = s
        .strip_prefix("zone=")
        .with_context(|| format!("expected zone=Z[,Z…], got {s:?}"))?;
    zs.split(',')
        .map(|z| {
            z.parse()
                .with_context(|| format!("bad zone {z:?} (0..=65535)"))
        })
        .collect()
}

fn parse_zone(s: &str) -> anyhow::Result<u16> {
    let z = s
        .strip_prefix("zone=")
        .with_context(|| format!("expected zone=N, got {s:?}"))?;
    z.parse()
        .with_context(|| format!("bad zone {z:?} (0..=65535)"))
}

/// `default=N` (the pool shared by zones without a limit of their own) or `zone=Z,limit=N`.
fn parse_zone_limit(s: &str) -> anyhow::Result<(Option<u16>, u32)> {
    if let Some(n) = s.strip_prefix("default=") {
        return Ok((None, n.parse().with_context(|| format!("bad limit {n:?}"))?));
    }
    let mut zone = None;
    let mut limit = None;
    for kv in s.split(',') {
        match kv.split_once('=') {
            Some(("zone", z)) => zone = Some(z.parse().with_context(|| format!("bad zone {z:?}"))?),
            Some(("limit", n)) => {
                limit = Some(n.parse().with_context(|| format!("bad limit {n:?}"))?)
            }
            _ => bail!("expected default=N or zone=Z,limit=N, got {s:?}"),
        }
    }
    match (zone, limit) {
        (Some(z), Some(l)) => Ok((Some(z), l)),
        _ => bail!("expected default=N or zone=Z,limit=N, got {s:?}"),
    }
}

/// OVS's `flush-conntrack` tuple: `ct_nw_src=…,ct_nw_dst=…` (or `ct_ipv6_src/dst`),
/// `ct_nw_proto=…`, and `ct_tp_src/ct_tp_dst` (TCP/UDP…) or `icmp_id/icmp_type/icmp_code`.
pub fn parse_flush_tuple(s: &str) -> anyhow::Result<conntrack::FlushTuple> {
    use std::net::IpAddr;
    let (mut src, mut dst): (Option<IpAddr>, Option<IpAddr>) = (None, None);
    let mut t = conntrack::FlushTuple {
        src: IpAddr::from([0, 0, 0, 0]),
        dst: IpAddr::from([0, 0, 0, 0]),
        proto: 0,
        sport: 0,
        dport: 0,
        icmp_id: 0,
        icmp_type: 0,
        icmp_code: 0,
    };
    let mut proto = None;
    for kv in s.split(',') {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("expected key=value, got {kv:?}");
        };
        let bad = || format!("bad value {v:?} for {k}");
        match k {
            "ct_nw_src" | "ct_ipv6_src" => src = Some(v.parse().with_context(bad)?),
            "ct_nw_dst" | "ct_ipv6_dst" => dst = Some(v.parse().with_context(bad)?),
            "ct_nw_proto" => proto = Some(v.parse().with_context(bad)?),
            "ct_tp_src" => t.sport = v.parse().with_context(bad)?,
            "ct_tp_dst" => t.dport = v.parse().with_context(bad)?,
            "icmp_id" => t.icmp_id = v.parse().with_context(bad)?,
            "icmp_type" => t.icmp_type = v.parse().with_context(bad)?,
            "icmp_code" => t.icmp_code = v.parse().with_context(bad)?,
            _ => bail!("unknown tuple field {k:?}"),
        }
    }
    let (Some(src), Some(dst), Some(proto)) = (src, dst, proto) else {
        bail!("a tuple needs its source, destination and ct_nw_proto");
    };
    if src.is_ipv4() != dst.is_ipv4() {
        bail!("source and destination are of different families");
    }
    t.src = src;
    t.dst = dst;
    t.proto = proto;
    Ok(t)
}

/// `dpctl/ct-stats-show`: connections per protocol, then the tracker's counters.
fn stats_lines(ct: &Conntrack) -> Vec<String> {
    let dump = ct.dump(None);
    let mut per: std::collections::BTreeMap<String, u64> = Default::default();
    for c in &dump {
        let line = c.to_string();
        let proto = line.split(',').next().unwrap_or("").to_uppercase();
        *per.entry(proto).or_default() += 1;
    }
    let mut v = vec![
        "Connections Stats:".to_string(),
        format!("    Total: {}", dump.len()),
    ];
    for (p, n) in per {
        v.push(format!("    {p}: {n}"));
    }
    let st = ct.stats();
    v.push("Tracker counters:".into());
    for (name, n) in [
        ("packets", st.packets),
        ("new", st.new),
        ("established", st.established),
        ("related", st.related),
        ("invalid", st.invalid),
        ("committed", st.committed),
        ("refused (global limit)", st.refused_global_limit),
        ("refused (zone limit)", st.refused_zone_limit),
        ("nat tuples exhausted", st.nat_exhausted),
        ("expired", st.expired),
        ("flushed", st.flushed),
        ("replaced", st.replaced),
    ] {
        v.push(format!("    {name}: {n}"));
    }
    for (r, n) in st.invalid_by_reason {
        if n > 0 {
            v.push(format!("    invalid ({}): {n}", r.name()));
        }
    }
    v
}

/// Hex digits (whitespace ignored) → bytes.
pub fn unhex(s: &str) -> anyhow::Result<Vec<u8>> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        bail!("frame hex has an odd number of digits");
    }
    digits
        .chunks(2)
        .map(|p| {
            let h = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
            match (h(p[0]), h(p[1])) {
                (Some(a), Some(b)) => Ok(a << 4 | b),
                _ => bail!("frame hex has a non-hex digit"),
            }
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let flows = std::fs::read_to_string(&args.flows)
        .with_context(|| format!("reading {}", args.flows.display()))?;
    let size = std::fs::metadata(&args.script)
        .with_context(|| format!("reading {}", args.script.display()))?
        .len();
    if size > MAX_SCRIPT_BYTES {
        bail!(
            "{}: {size} bytes, more than the {MAX_SCRIPT_BYTES}-byte maximum",
            args.script.display()
        );
    }
    let script = std::fs::read_to_string(&args.script)
        .with_context(|| format!("reading {}", args.script.display()))?;
    let mut rp = Replayer::new(&flows, args.bridge_ports)
        .with_context(|| format!("{}", args.flows.display()))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    use std::io::Write as _;
    for (i, raw) in script.lines().enumerate() {
        let no = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ctx = || format!("{}:{no}", args.script.display());
        let first = line.split_whitespace().next().unwrap_or("");
        if let Ok(in_port) = first.parse::<u32>() {
            let frame = unhex(&line[first.len()..]).with_context(ctx)?;
            let o = rp.send(in_port, &frame).with_context(ctx)?;
            let mut ports: Vec<u32> = o.outputs.iter().map(|(p, _)| *p).collect();
            ports.dedup();
            if ports.is_empty() {
                writeln!(out, "{no} -> drop")?;
            } else {
                let list: Vec<String> = ports.iter().map(u32::to_string).collect();
                writeln!(out, "{no} -> {}", list.join(","))?;
            }
            if args.hex {
                for (p, f) in &o.outputs {
                    writeln!(out, "  {p}: {}", hex(f))?;
                }
            }
        } else {
            for l in rp.command(line).with_context(ctx)? {
                writeln!(out, "{l}")?;
            }
        }
    }
    if args.dump_conntrack {
        for l in dump_lines(rp.conntrack(), None) {
            writeln!(out, "{l}")?;
        }
    }
    out.flush()?;
    let st = rp.stats();
    anyhow::ensure!(
        st.classified() == st.packets_received + st.recirculations,
        "counters do not partition the packets: {} classified of {} + {} recirculated",
        st.classified(),
        st.packets_received,
        st.recirculations
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FW: &str = super::super::bench_firewall::FIREWALL_FLOWS;

    fn udp(fwd: bool) -> Vec<u8> {
        super::super::bench_firewall::udp_frame(7, fwd).to_vec()
    }

    fn ports(o: &FrameOutcome) -> Vec<u32> {
        o.outputs.iter().map(|(p, _)| *p).collect()
    }

    #[test]
    fn firewall_admits_replies_only_after_commit() {
        let mut rp = Replayer::new(FW, 2).expect("replayer");
        assert_eq!(
            ports(&rp.send(2, &udp(false)).expect("send")),
            Vec::<u32>::new()
        );
        assert_eq!(ports(&rp.send(1, &udp(true)).expect("send")), vec![2]);
        assert_eq!(ports(&rp.send(2, &udp(false)).expect("send")), vec![1]);
        assert_eq!(rp.conntrack().nconns(), 1);
        let dump = dump_lines(rp.conntrack(), None);
        assert_eq!(dump.len(), 1);
        assert!(
            dump[0].starts_with("udp,orig=(src=10.0.0.1,dst=10.0.0.2,"),
            "{dump:?}"
        );
        // Expiry: OVS's UDP timeouts are 30 s (multiple) at most.
        rp.command("advance 200000").expect("advance");
        assert_eq!(rp.command("ct-get-nconns").expect("nconns"), vec!["0"]);
        assert_eq!(
            ports(&rp.send(2, &udp(false)).expect("send")),
            Vec::<u32>::new()
        );
    }

    /// A 2008-byte UDP datagram from the firewall's client in two IPv4 fragments.
    fn fragments(id: u16) -> Vec<Vec<u8>> {
        use testutil::packets::{Ipv4Spec, ipv4_fragments, udp};
        let mut ip = Ipv4Spec::new([10, 0, 0, 1], [10, 0, 0, 2], 17);
        ip.id = id;
        let l4 = udp(ip.pseudo(), 4100, 4101, &[7u8; 2000]);
        ipv4_fragments(&ip, &l4, 1400)
    }

    #[test]
    fn fragments_are_reassembled_at_ct_and_sent_on_whole() {
        let mut rp = Replayer::new(FW, 2).expect("replayer");
        let fr = fragments(1);
        // The last fragment is held; the first completes the datagram: both go out, in
        // offset order, bytes unchanged (reassembled again at the commit's `ct`, as OVS).
        assert!(rp.send(1, &fr[1]).expect("send").outputs.is_empty());
        let o = rp.send(1, &fr[0]).expect("send");
        assert_eq!(o.outputs, vec![(2, fr[0].clone()), (2, fr[1].clone())]);
        assert_eq!(rp.conntrack().nconns(), 1);
        let st = rp.command("ipf-get-status").expect("status");
        assert_eq!(st[0], "        Fragmentation Module Status");
        assert!(
            st.contains(&"        v4 frags accepted: 4".to_string()),
            "{st:?}"
        );
        assert!(
            st.contains(&"        v4 frags completed: 4".to_string()),
            "{st:?}"
        );
        assert!(st.contains(&"        num frag: 0".to_string()), "{st:?}");
        // A lone fragment expires after 15 s: it comes out `+trk+inv` (the firewall drops
        // it) at the next packet through `ct`, and is counted.
        let fr = fragments(2);
        assert!(rp.send(1, &fr[0]).expect("send").outputs.is_empty());
        rp.command("advance 15001").expect("advance");
        assert_eq!(ports(&rp.send(1, &udp(true)).expect("send")), vec![2]);
        let st = rp.command("ipf-get-status").expect("status");
        assert!(
            st.contains(&"        v4 frags expired: 1".to_string()),
            "{st:?}"
        );
        assert!(rp.command("ipf-get-status -m").is_err());
        let s = rp.stats();
        assert_eq!(s.classified(), s.packets_received + s.recirculations);
        assert_eq!((s.ct_held, s.ct_released), (5, 5), "{s:?}");
    }

    #[test]
    fn control_commands_print_as_ovs_appctl() {
        // Outputs as `ovs-appctl dpctl/…` 3.1 printed them on a fresh datapath.
        let mut rp = Replayer::new(FW, 2).expect("replayer");
        let mut c = |l: &str| rp.command(l).expect(l);
        assert_eq!(c("ct-get-limits"), vec!["default limit=0"]);
        assert!(c("ct-set-limits default=7 zone=1,limit=5").is_empty());
        assert_eq!(
            c("ct-get-limits"),
            vec!["default limit=7", "zone=1,limit=5,count=0"]
        );
        assert_eq!(
            c("ct-get-limits zone=1"),
            vec!["default limit=7", "zone=1,limit=5,count=0"]
        );
        // A bad argument changes nothing.
        assert!(rp.command("ct-del-limits zone=1,x").is_err());
        assert!(rp.command("ct-set-limits zone=2,limit=3 zone=9").is_err());
        let mut c = |l: &str| rp.command(l).expect(l);
        assert_eq!(
            c("ct-get-limits"),
            vec!["default limit=7", "zone=1,limit=5,count=0"]
        );
        assert!(c("ct-del-limits zone=1").is_empty());
        assert_eq!(c("ct-get-limits"), vec!["default limit=7"]);
        assert_eq!(c("ct-get-nconns"), vec!["0"]);
        assert_eq!(c("ct-get-maxconns"), vec!["3000000"]);
        assert_eq!(c("ct-set-maxconns 10"), vec!["setting maxconns successful"]);
        assert_eq!(c("ct-get-maxconns"), vec!["10"]);
        assert_eq!(
            &c("ct-stats-show")[..2],
            ["Connections Stats:", "    Total: 0"]
        );
        assert!(c("flush-conntrack").is_empty());
    }

    #[test]
    fn flush_by_zone_and_tuple() {
        let mut rp = Replayer::new(FW, 2).expect("replayer");
        rp.send(1, &udp(true)).expect("send");
        assert_eq!(rp.conntrack().nconns(), 1);
        let (sport, dport) = (1024 + 7, 5000);
        rp.command(&format!(
            "flush-conntrack zone=0 ct_nw_src=10.0.0.9,ct_nw_dst=10.0.0.2,ct_nw_proto=17,ct_tp_src={sport},ct_tp_dst={dport}"
        ))
        .expect("flush other");
        assert_eq!(rp.conntrack().nconns(), 1, "another tuple is not flushed");
        rp.command(&format!(
            "flush-conntrack zone=0 ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=17,ct_tp_src={sport},ct_tp_dst={dport}"
        ))
        .expect("flush");
        assert_eq!(rp.conntrack().nconns(), 0);
    }

    #[test]
    fn bad_lines_are_clear_errors() {
        let mut rp = Replayer::new(FW, 2).expect("replayer");
        for (line, want) in [
            ("ct-set-maxconns lots", "bad number"),
            ("dump-conntrack zone=70000", "bad zone"),
            ("flush-conntrack ct_nw_src=1.2.3.4", "needs its source"),
            (
                "flush-conntrack ct_nw_src=1.2.3.4,ct_nw_dst=::1,ct_nw_proto=6",
                "families",
            ),
            ("ct-set-limits zone=1", "expected default=N"),
            ("advance soon", "bad milliseconds"),
            ("frobnicate", "unknown command"),
            ("upcall/set-flow-limit 0", "at least 1"),
            ("upcall/set-flow-limit many", "bad number"),
            ("dpctl/dump-flows -x", "usage"),
            ("revalidator/wait now", "usage"),
            ("add-flow", "usage"),
            ("add-flow frob=1,actions=drop", "add-flow"),
            ("mod-flows actions=frob", "mod-flows"),
        ] {
            let e = format!("{:#}", rp.command(line).unwrap_err());
            assert!(e.contains(want), "{line}: {e}");
        }
        assert!(format!("{:#}", rp.send(9, &udp(true)).unwrap_err()).contains("no port 9"));
        assert!(
            format!("{:#}", rp.send(1, &vec![0; MAX_FRAME + 1]).unwrap_err()).contains("exceeds")
        );
        assert!(unhex("abc").is_err() && unhex("zz").is_err());
        assert!(Replayer::new(FW, 0).is_err() && Replayer::new("bogus flow", 2).is_err());
        // A runt is a counted drop, not an error.
        assert!(rp.send(1, &[0u8; 4]).expect("runt").outputs.is_empty());
    }

    /// The control commands drive the control path: a flow mod is seen by cached packets
    /// only after `revalidator/wait`; dumps, purge and the flow limit work from a script.
    #[test]
    fn control_path_commands() {
        let mut rp = Replayer::new("priority=10,udp,actions=output:2", 4).expect("replayer");
        let f = udp(true);
        assert_eq!(rp.send(1, &f).expect("send").outputs[0].0, 2);
        let dump = rp.command("dpctl/dump-flows").expect("dump");
        assert_eq!(dump.len(), 1, "{dump:?}");
        assert!(dump[0].contains("actions:2"), "{dump:?}");
        let terse = rp.command("dpctl/dump-flows --terse").expect("terse");
        assert_eq!(terse.len(), 1);
        assert!(
            terse[0].starts_with("ufid:") && terse[0].contains("packets:1,"),
            "{terse:?}"
        );
        assert!(!terse[0].contains("actions"), "{terse:?}");
        let more = rp.command("dpctl/dump-flows -m").expect("-m");
        assert!(
            more[0].starts_with("ufid:") && more[0].contains("actions:2"),
            "{more:?}"
        );

        rp.command("mod-flows udp,actions=output:3").expect("mod");
        assert_eq!(
            rp.send(1, &f).expect("send").outputs[0].0,
            2,
            "cached until revalidated"
        );
        rp.command("revalidator/wait").expect("wait");
        assert_eq!(rp.send(1, &f).expect("send").outputs[0].0, 3);
        let show = rp.command("upcall/show").expect("show");
        assert!(show[1].contains("(current 1)"), "{show:?}");
        assert!(
            show.iter().any(|l| l.contains("answered 2 installed 2")),
            "{show:?}"
        );

        rp.command("revalidator/purge").expect("purge");
        assert!(rp.command("dpctl/dump-flows").expect("dump").is_empty());
        assert_eq!(
            rp.command("upcall/set-flow-limit 5000").expect("limit"),
            ["set flow_limit to 5000"]
        );
        rp.command("del-flows").expect("del");
        rp.command("revalidator/wait").expect("wait");
        assert!(rp.send(1, &f).expect("send").outputs.is_empty());
        // Idle megaflows expire with the bridge's clock.
        rp.command("add-flow priority=10,udp,actions=output:4")
            .expect("add");
        rp.command("revalidator/wait").expect("wait");
        assert_eq!(rp.send(1, &f).expect("send").outputs[0].0, 4);
        rp.command("revalidator/wait").expect("wait");
        rp.command("advance 10001").expect("advance");
        rp.command("revalidator/wait").expect("wait");
        assert!(rp.command("dpctl/dump-flows").expect("dump").is_empty());
    }
}
