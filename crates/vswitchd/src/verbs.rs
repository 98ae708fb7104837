//! The `ovs-appctl` verbs of the daemon beyond logging and `exit`: the datapath's (over
//! [`Datapaths`]) and the bridges' (`ofproto/trace`, `fdb/show`, `fdb/flush`, over the
//! [`Switch`] handles), with OVS's names, argument counts and output formats.

use std::sync::{Arc, Mutex};

use crate::dp::Datapaths;
use crate::ofconn::OfBridge;
use crate::service::lock;
use crate::switch::Switch;
use crate::unixctl::Server;

/// The datapath verbs of `ovs-appctl` (OVS's names and argument counts).
pub fn register_datapath_verbs(server: &Server, dps: &Arc<Mutex<Datapaths>>) {
    type Verb = fn(&Datapaths, &[&str]) -> Result<String, String>;
    let verbs: [(&str, &str, usize, usize, Verb); 10] = [
        (
            "netdev-dummy/receive",
            "name [--qid queue_id] packet|flow [--len packet_len]",
            2,
            usize::MAX,
            |d, a| d.netdev_dummy_receive(a),
        ),
        (
            "dpif-netdev/pmd-stats-show",
            "[-pmd core] [dp]",
            0,
            3,
            |d, _| Ok(d.pmd_stats_show()),
        ),
        (
            "dpif-netdev/pmd-stats-clear",
            "[-pmd core] [dp]",
            0,
            3,
            |d, _| d.pmd_stats_clear(),
        ),
        (
            "dpif-netdev/pmd-rxq-show",
            "[-pmd core] [-secs secs] [dp]",
            0,
            5,
            |d, _| Ok(d.pmd_rxq_show()),
        ),
        (
            "dpif-netdev/pmd-perf-show",
            "[-nh] [-it iter-history-len] [-ms ms-history-len] [-pmd core] [dp]",
            0,
            8,
            |d, _| Ok(d.pmd_perf_show()),
        ),
        ("dpctl/show", "[-s] [dp...]", 0, usize::MAX, |d, _| {
            Ok(d.dpctl_show())
        }),
        (
            "dpctl/dump-flows",
            "[-m] [--names | --no-names] [dp] [filter=..] [type=..] [pmd=..]",
            0,
            6,
            |d, a| d.dpctl_dump_flows(a),
        ),
        ("upcall/show", "", 0, 0, |d, _| Ok(d.upcall_show())),
        (
            "revalidator/wait",
            "",
            0,
            0,
            |d, _| Ok(d.revalidator_wait()),
        ),
        ("revalidator/purge", "", 0, 0, |d, _| {
            Ok(d.revalidator_purge())
        }),
    ];
    for (name, usage, min, max, f) in verbs.into_iter().chain([
        (
            "dpctl/dump-conntrack",
            "[-m] [-s] [dp] [zone=N]",
            0,
            4,
            dump_conntrack as Verb,
        ),
        (
            "dpctl/flush-conntrack",
            "[dp] [zone=N]",
            0,
            2,
            flush_conntrack as Verb,
        ),
    ]) {
        let dps = dps.clone();
        server.register(name, usage, min, max, move |args| {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            f(&lock(&dps), &a)
        });
    }
}

/// The `zone=N` argument of the conntrack verbs, if any; other words (`-m`, `-s`, a datapath
/// name) are accepted and ignored, as they only select among OVS's datapaths and columns.
fn zone_arg(args: &[&str]) -> Result<Option<u16>, String> {
    let mut zone = None;
    for a in args {
        if let Some(z) = a.strip_prefix("zone=") {
            zone = Some(
                z.parse::<u16>()
                    .map_err(|_| format!("invalid zone {z:?}"))?,
            );
        } else if a.contains('=') {
            return Err(format!("{a}: only zone=N is supported here"));
        }
    }
    Ok(zone)
}

/// `dpctl/dump-conntrack`: the shared connection table, one line per connection (sorted).
fn dump_conntrack(d: &Datapaths, args: &[&str]) -> Result<String, String> {
    let zone = zone_arg(args)?;
    let mut lines: Vec<String> = d
        .env()
        .ct
        .dump(zone)
        .iter()
        .map(|c| c.to_string())
        .collect();
    lines.sort();
    Ok(lines.iter().map(|l| format!("{l}\n")).collect())
}

/// `dpctl/flush-conntrack [zone=N]`: removes the zone's connections (all without a zone).
/// OVS's tuple form is not supported here.
fn flush_conntrack(d: &Datapaths, args: &[&str]) -> Result<String, String> {
    let zone = zone_arg(args)?;
    d.env().ct.flush(zone, None);
    Ok(String::new())
}

/// Most passes a traced packet may make (recirculations included).
const MAX_TRACE_PASSES: usize = 64;

/// `ofproto/trace [--ct-next FLAGS]... BRIDGE FLOW [PACKET]`: OVS's bridge form (the flow in
/// `ovs-ofctl` match syntax; with a packet in hex, the flow supplies only metadata such as
/// `in_port`). `-generate` is accepted and ignored (every trace here is side-effect free
/// unless a packet is given).
fn ofproto_trace(switch: &Switch, args: &[String]) -> Result<String, String> {
    let mut ct_next = Vec::new();
    let mut pos = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--ct-next" => {
                let v = it.next().ok_or("--ct-next needs an argument")?;
                ct_next.push(ofproto::trace::parse_ct_state(v)?);
            }
            "-generate" => {}
            _ => pos.push(a.as_str()),
        }
    }
    let (br_name, flow_text, packet) = match pos.as_slice() {
        [b, f] => (*b, *f, None),
        [b, f, p] => (*b, *f, Some(*p)),
        _ => return Err("syntax: ofproto/trace [--ct-next FLAGS] BRIDGE FLOW [PACKET]".into()),
    };
    let br = switch
        .bridge(br_name)
        .ok_or_else(|| format!("{br_name}: unknown bridge"))?;
    let m =
        flow::text::parse_match(flow_text).map_err(|e| format!("Bad openflow flow syntax: {e}"))?;
    let bytes = packet
        .map(|hex| {
            hex::decode(hex.trim()).map_err(|e| format!("Trailing garbage in packet data ({e})"))
        })
        .transpose()?;
    let (key, side_effects) =
        ofproto::trace::trace_start(&m, bytes.as_deref(), switch.vlan_limit())?;
    let now = br.shared().now_ms();
    let guard = br.shared().read();
    ofproto::trace::trace_with_resumes(&guard, key, now, side_effects, &ct_next, MAX_TRACE_PASSES)
}

/// `fdb/show BRIDGE` in OVS's format: ` port  VLAN  MAC                Age`.
fn fdb_show(switch: &Switch, args: &[String]) -> Result<String, String> {
    let br = switch.bridge(&args[0]).ok_or("no such bridge")?;
    let shared = br.shared();
    let now = shared.now_ms();
    let mut out = String::from(" port  VLAN  MAC                Age\n");
    let bridge = shared.read();
    for (mac, vlan, e) in bridge.mac.entries() {
        let port = if e.port == flow::ofp::OfPort::LOCAL {
            "LOCAL".to_owned()
        } else {
            e.port.0.to_string()
        };
        let b = mac.to_be_bytes();
        out += &format!(
            "{port:>5}  {vlan:>4}  {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}  {:>3}\n",
            b[2],
            b[3],
            b[4],
            b[5],
            b[6],
            b[7],
            now.saturating_sub(e.seen_ms) / 1000
        );
    }
    Ok(out)
}

/// The bridges' verbs.
pub fn register_bridge_verbs(server: &Server, switch: &Arc<Switch>) {
    let sw = switch.clone();
    server.register(
        "ofproto/trace",
        "{[dp_name] odp_flow | bridge br_flow} [OPTIONS...] [-generate|packet]",
        2,
        usize::MAX,
        move |a| ofproto_trace(&sw, a),
    );
    let sw = switch.clone();
    server.register("fdb/show", "bridge", 1, 1, move |a| fdb_show(&sw, a));
    let sw = switch.clone();
    server.register("fdb/flush", "[bridge]", 0, 1, move |a| {
        let bridges = match a.first() {
            Some(b) => vec![sw.bridge(b).ok_or("no such bridge")?],
            None => sw.bridges(),
        };
        for b in bridges {
            b.shared().read().mac.flush();
        }
        Ok("table successfully flushed\n".into())
    });
}
