//! Conntrack oracle: packet scripts run through real OVS 3.1's userspace connection tracker
//! (dummy datapath) and through `flowswitch receive`, answers in one comparable shape.
//!
//! A *script* is the file `flowswitch receive` takes: one `<in_port> <frame hex>` per line,
//! blank lines and `#` comments ignored, line numbers counting every line (1-based). Each
//! [`Script`] also carries the OpenFlow pipeline it runs under and how strictly it is compared
//! ([`Check`]). [`scripts`] builds the whole corpus (hand-written TCP/UDP/ICMP/IPv6/fragment/
//! zone/mark/label/force-commit/NAT scripts plus seeded random interleavings); frames come from
//! [`crate::packets`], never from the `wire` crate.
//!
//! On OVS ([`OvsSandbox::run_ct_script`]): each port `pN` writes what it sends to
//! `options:tx_pcap`; after every `netdev-dummy/receive pN <hex>` (plus one round trip through
//! the daemon as a barrier) the growth of each port's pcap file says where the frame went and
//! what it looked like. Then `dpctl/dump-conntrack`. Between scripts: `del-flows`,
//! `dpctl/flush-conntrack`, `revalidator/purge`.
//!
//! On our side ([`parse_receive_output`]): the stdout of
//! `flowswitch receive --flows F --dump-conntrack --hex S`:
//! ```text
//! 3 -> 8,12
//!   8: 66778899aabb...
//!   12: 66778899aabb...
//! 4 -> drop
//! udp,orig=(src=10.0.0.1,...),reply=(...),zone=5
//! ```
//! Both sides become [`Answers`]; [`compare`] lists the differences in words.
//!
//! Pipelines ([`Pipeline`]): seed 002's firewall (ports 1 ↔ 2) and the *ct_state decoder*,
//! whose output ports name the ct_state bits each packet had after `ct(table=1)` (see
//! [`ports`]). Facts observed on OVS 3.1 are in `data/ct_oracle_notes.md`; OVS's recorded
//! answers for every script are in `data/ct_oracle_answers.txt` (regenerate with
//! `cargo test -p testutil --test ct_oracle -- --ignored regen_ct_oracle_answers`).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use crate::ovs::{OvsError, OvsSandbox};
use crate::packets::{
    self, DST_MAC, Ipv4Spec, Ipv6Ext, Ipv6Spec, Pseudo, SRC_MAC, TcpSpec, ethertype, from_hex,
    ipproto, tcp_flags as tf, to_hex,
};
use crate::rng::TestRng;

/// Number of dummy ports every script's sandbox has (`p1..p15`).
pub const N_PORTS: u32 = 15;

/// Output ports of the ct_state decoder pipeline.
pub mod ports {
    /// Client side, zone A.
    pub const CLIENT: u32 = 1;
    /// Server side, zone A.
    pub const SERVER: u32 = 2;
    /// Client side, zone B.
    pub const CLIENT_B: u32 = 3;
    /// Server side, zone B.
    pub const SERVER_B: u32 = 4;
    /// `+inv+trk`.
    pub const INV: u32 = 5;
    /// `+rel+rpl+trk`.
    pub const REL_RPL: u32 = 6;
    /// `+rel+trk`.
    pub const REL: u32 = 7;
    /// `+new+trk`.
    pub const NEW: u32 = 8;
    /// `+est+rpl+trk`.
    pub const EST_RPL: u32 = 9;
    /// `+est+trk`.
    pub const EST: u32 = 10;
    /// `+trk` and none of the above.
    pub const TRK: u32 = 11;
    /// Additionally: `ct_mark=0x1` (after the state port).
    pub const MARK1: u32 = 12;
    /// Additionally: `ct_label=0x1`.
    pub const LABEL1: u32 = 13;
    /// Additionally: `+snat`.
    pub const SNAT: u32 = 14;
    /// Additionally: `+dnat`.
    pub const DNAT: u32 = 15;
    /// The state port's name.
    pub fn name(p: u32) -> &'static str {
        match p {
            INV => "inv",
            REL_RPL => "rel+rpl",
            REL => "rel",
            NEW => "new",
            EST_RPL => "est+rpl",
            EST => "est",
            TRK => "trk-only",
            MARK1 => "mark=1",
            LABEL1 => "label=1",
            SNAT => "snat",
            DNAT => "dnat",
            _ => "",
        }
    }
}

/// Who commits in the decoder pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Table 0: `ct(commit,zone=Z,table=1[,exec])` for every IP packet.
    All,
    /// Table 0: `ct(zone=Z,table=1)`; table 1 commits only `+new` from a client port.
    NewFromClient,
    /// Table 0: `ct(commit,force,zone=Z,table=1)` (`force_commit`) for every IP packet.
    Force,
    /// Nothing is committed.
    Never,
}

/// A pipeline a script runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pipeline {
    /// Seed 002's firewall (`../shared/ovs-bench/firewall/flows-firewall.txt`): new from
    /// port 1 is committed and sent to 2, established goes 1 ↔ 2, everything else drops.
    Firewall,
    /// The ct_state decoder: ports 1/2 in zone `zone_a`, 3/4 in `zone_b`; output port = state.
    Decoder {
        /// Zone of ports 1 and 2.
        zone_a: u16,
        /// Zone of ports 3 and 4.
        zone_b: u16,
        /// Who commits.
        commit: Commit,
        /// `exec(...)` actions of the commit (e.g. `set_field:0x1->ct_mark`), or empty.
        exec: String,
        /// `nat(...)` of the client-side commit (e.g. `nat(src=10.0.0.100)`), or empty;
        /// server-side packets then go through `ct(zone=Z,nat,table=1)`.
        nat: String,
    },
    /// Any flows (e.g. read from a file), one per entry.
    Custom(Vec<String>),
}

impl Pipeline {
    /// A decoder with zone 0 / 5, `commit`, no exec, no NAT.
    pub fn decoder(commit: Commit) -> Pipeline {
        Pipeline::Decoder {
            zone_a: 0,
            zone_b: 5,
            commit,
            exec: String::new(),
            nat: String::new(),
        }
    }

    /// The flows, in `ovs-ofctl add-flows` syntax (OpenFlow 1.3 accepted).
    pub fn flows(&self) -> Vec<String> {
        match self {
            Pipeline::Firewall => [
                "table=0,priority=1,actions=drop",
                "table=0,priority=10,arp,actions=NORMAL",
                "table=0,priority=100,ct_state=-trk,ip,actions=ct(table=1)",
                "table=1,priority=32768,ct_state=+new+trk,ip,in_port=1,actions=ct(commit),output:2",
                "table=1,priority=32768,ct_state=+new+trk,ip,in_port=2,actions=drop",
                "table=1,priority=32768,ct_state=+est+trk,ip,in_port=1,actions=output:2",
                "table=1,priority=32768,ct_state=+est+trk,ip,in_port=2,actions=output:1",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            Pipeline::Decoder {
                zone_a,
                zone_b,
                commit,
                exec,
                nat,
            } => decoder_flows(*zone_a, *zone_b, *commit, exec, nat),
            Pipeline::Custom(flows) => flows.clone(),
        }
    }
}

fn decoder_flows(zone_a: u16, zone_b: u16, commit: Commit, exec: &str, nat: &str) -> Vec<String> {
    let mut f = Vec::new();
    let exec_arg = if exec.is_empty() {
        String::new()
    } else {
        format!(",exec({exec})")
    };
    for (port, zone, client) in [
        (ports::CLIENT, zone_a, true),
        (ports::SERVER, zone_a, false),
        (ports::CLIENT_B, zone_b, true),
        (ports::SERVER_B, zone_b, false),
    ] {
        let nat_arg = match (nat.is_empty(), client) {
            (true, _) => String::new(),
            (false, true) => format!(",{nat}"),
            (false, false) => ",nat".to_string(),
        };
        let ct = match commit {
            Commit::All if client || nat.is_empty() => {
                format!("ct(commit,zone={zone}{nat_arg}{exec_arg},table=1)")
            }
            Commit::Force if client || nat.is_empty() => {
                format!("ct(commit,force,zone={zone}{nat_arg}{exec_arg},table=1)")
            }
            _ => format!("ct(zone={zone}{nat_arg},table=1)"),
        };
        // A NAT address of one family cannot be used with a match on the other.
        let nat_v6 = nat.contains("::");
        for (proto, v6_) in [("ip", false), ("ipv6", true)] {
            if nat.is_empty() || !client || nat_v6 == v6_ {
                f.push(format!(
                    "table=0,priority=100,{proto},in_port={port},actions={ct}"
                ));
            }
        }
        if commit == Commit::NewFromClient && client {
            for proto in ["ip", "ipv6"] {
                if !nat.is_empty() && nat.contains("::") != (proto == "ipv6") {
                    continue;
                }
                f.push(format!(
                    "table=1,priority=75,ct_state=+new-inv-rel+trk,{proto},in_port={port},actions=ct(commit,zone={zone}{nat_arg}{exec_arg}),output:{},resubmit(,2)",
                    ports::NEW
                ));
            }
        }
    }
    f.push("table=0,priority=0,actions=drop".to_string());
    let states = [
        ("+inv+trk", ports::INV, 100),
        ("+rel+rpl+trk", ports::REL_RPL, 90),
        ("+rel+trk", ports::REL, 80),
        ("+new+trk", ports::NEW, 70),
        ("+est+rpl+trk", ports::EST_RPL, 60),
        ("+est+trk", ports::EST, 50),
        ("+trk", ports::TRK, 40),
    ];
    for (state, port, prio) in states {
        for proto in ["ip", "ipv6"] {
            f.push(format!(
                "table=1,priority={prio},ct_state={state},{proto},actions=output:{port},resubmit(,2)"
            ));
        }
    }
    // Table 2: mark, 3: label, 4: snat, 5: dnat — each adds a port and goes on.
    f.push(format!(
        "table=2,priority=10,ct_mark=0x1,actions=output:{},resubmit(,3)",
        ports::MARK1
    ));
    f.push("table=2,priority=0,actions=resubmit(,3)".to_string());
    f.push(format!(
        "table=3,priority=10,ct_label=0x1,actions=output:{},resubmit(,4)",
        ports::LABEL1
    ));
    f.push("table=3,priority=0,actions=resubmit(,4)".to_string());
    f.push(format!(
        "table=4,priority=10,ct_state=+snat+trk,actions=output:{},resubmit(,5)",
        ports::SNAT
    ));
    f.push("table=4,priority=0,actions=resubmit(,5)".to_string());
    f.push(format!(
        "table=5,priority=10,ct_state=+dnat+trk,actions=output:{}",
        ports::DNAT
    ));
    f
}

/// How a script's answers are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Output ports per frame and the conntrack dump.
    Ports,
    /// Also every output frame byte for byte (NAT scripts).
    Frames,
    /// NAT from an address/port range: OVS picks from the range by a hash with a random
    /// per-process basis (and may refuse before the range is full), so only ports, frames
    /// with the translated source masked, and range properties of the dump are compared.
    NatRange {
        /// Lowest and highest translated IPv4 address (last octet).
        ips: (u8, u8),
        /// Lowest and highest translated port.
        ports: (u16, u16),
    },
}

/// One script: name, pipeline, the script file's text, how to compare.
#[derive(Debug, Clone)]
pub struct Script {
    /// Unique name (used in messages and in the answers file).
    pub name: String,
    /// The pipeline.
    pub pipeline: Pipeline,
    /// The script file (`<in_port> <hex>` lines and `#` comments).
    pub text: String,
    /// Comparison mode.
    pub check: Check,
    /// Named frames (tag, line number), for hand-checked facts.
    pub tags: Vec<(String, usize)>,
}

impl Script {
    /// Line number of the frame tagged `tag`.
    pub fn line_of(&self, tag: &str) -> Option<usize> {
        self.tags.iter().find(|(t, _)| t == tag).map(|&(_, l)| l)
    }

    /// The frames: (line, in_port, bytes).
    pub fn frames(&self) -> Result<Vec<(usize, u32, Vec<u8>)>, String> {
        parse_script(&self.text)
    }
}

/// Parses a script file: `<in_port> <hex>` lines, blank lines and `#` comments skipped.
pub fn parse_script(text: &str) -> Result<Vec<(usize, u32, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let (p, h) = t
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("line {}: expected `<port> <hex>`", i + 1))?;
        let port: u32 = p
            .parse()
            .map_err(|_| format!("line {}: bad port {p:?}", i + 1))?;
        let bytes = from_hex(h.trim()).ok_or_else(|| format!("line {}: bad hex", i + 1))?;
        out.push((i + 1, port, bytes));
    }
    Ok(out)
}

/// What happened to one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameAnswer {
    /// Script line number.
    pub line: usize,
    /// Output ports, ascending (empty = drop).
    pub ports: Vec<u32>,
    /// Every output packet: (port, bytes), in port order.
    pub out: Vec<(u32, Vec<u8>)>,
}

/// A whole script's answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answers {
    /// One per frame, in script order.
    pub frames: Vec<FrameAnswer>,
    /// `dpctl/dump-conntrack` lines, sorted.
    pub dump: Vec<String>,
}

/// Parses `flowswitch receive [--hex] [--dump-conntrack]` stdout.
pub fn parse_receive_output(stdout: &str) -> Result<Answers, String> {
    let mut a = Answers::default();
    for (i, raw) in stdout.lines().enumerate() {
        let l = raw.trim_end();
        if l.trim().is_empty() {
            continue;
        }
        if raw.starts_with(' ') || raw.starts_with('\t') {
            let t = l.trim();
            let (p, h) = t
                .split_once(':')
                .ok_or_else(|| format!("output line {}: expected `  <port>: <hex>`", i + 1))?;
            let port: u32 = p
                .trim()
                .parse()
                .map_err(|_| format!("output line {}: bad port {p:?}", i + 1))?;
            let bytes =
                from_hex(h.trim()).ok_or_else(|| format!("output line {}: bad hex", i + 1))?;
            let f = a
                .frames
                .last_mut()
                .ok_or_else(|| format!("output line {}: packet before any frame", i + 1))?;
            f.out.push((port, bytes));
            continue;
        }
        if let Some((n, rest)) = l.split_once(" -> ")
            && let Ok(line) = n.trim().parse::<usize>()
        {
            let rest = rest.trim();
            let ports = if rest == "drop" {
                Vec::new()
            } else {
                rest.split(',')
                    .map(|p| p.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| format!("output line {}: bad port list {rest:?}", i + 1))?
            };
            a.frames.push(FrameAnswer {
                line,
                ports,
                out: Vec::new(),
            });
            continue;
        }
        a.dump.push(l.trim().to_string());
    }
    for f in &mut a.frames {
        f.out.sort_by_key(|&(p, _)| p);
    }
    a.dump.sort();
    Ok(a)
}

/// Prints `a` the way `flowswitch receive --hex --dump-conntrack` does (the inverse of
/// [`parse_receive_output`]; the reference for that command's format).
pub fn format_receive_output(a: &Answers) -> String {
    let mut s = String::new();
    for f in &a.frames {
        if f.ports.is_empty() {
            let _ = writeln!(s, "{} -> drop", f.line);
        } else {
            let p: Vec<String> = f.ports.iter().map(u32::to_string).collect();
            let _ = writeln!(s, "{} -> {}", f.line, p.join(","));
        }
        for (port, bytes) in &f.out {
            let _ = writeln!(s, "  {port}: {}", to_hex(bytes));
        }
    }
    for l in &a.dump {
        let _ = writeln!(s, "{l}");
    }
    s
}

// ---------------------------------------------------------------------------------------------
// OVS side.

/// Reads pcap records appended to a file since byte `offset`; returns them and the new offset.
pub fn read_pcap_from(path: &Path, offset: u64) -> Result<(Vec<Vec<u8>>, u64), String> {
    let data = fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    if data.len() < 24 {
        return Ok((Vec::new(), offset));
    }
    let le = match &data[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        m => return Err(format!("{}: bad pcap magic {m:02x?}", path.display())),
    };
    let u32_at = |at: usize| -> u32 {
        let b = [data[at], data[at + 1], data[at + 2], data[at + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let mut pos = (offset as usize).max(24);
    let mut out = Vec::new();
    while pos + 16 <= data.len() {
        let caplen = u32_at(pos + 8) as usize;
        if pos + 16 + caplen > data.len() {
            break;
        }
        out.push(data[pos + 16..pos + 16 + caplen].to_vec());
        pos += 16 + caplen;
    }
    Ok((out, pos as u64))
}

impl OvsSandbox {
    fn tx_pcap_path(&self, port: u32) -> PathBuf {
        self.dir().join(format!("p{port}-tx.pcap"))
    }

    /// Sets `options:tx_pcap=<dir>/pN-tx.pcap` on every port (one transaction; waits until
    /// vswitchd applied it).
    pub fn enable_tx_pcap(&self) -> Result<(), OvsError> {
        let mut args: Vec<String> = Vec::new();
        for p in 1..=self.n_ports() {
            if !args.is_empty() {
                args.push("--".into());
            }
            args.extend([
                "set".to_string(),
                "interface".to_string(),
                format!("p{p}"),
                format!("options:tx_pcap={}", self.tx_pcap_path(p).display()),
            ]);
        }
        self.vsctl(&args)?;
        for p in 1..=self.n_ports() {
            let path = self.tx_pcap_path(p);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while fs::metadata(&path).map(|m| m.len()).unwrap_or(0) < 24 {
                if std::time::Instant::now() > deadline {
                    return Err(OvsError::Timeout(format!("{} not created", path.display())));
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// Forgets everything a previous script left: OpenFlow flows, datapath flows, conntrack.
    pub fn ct_reset(&self) -> Result<(), OvsError> {
        self.del_flows()?;
        self.appctl(&["revalidator/purge"])?;
        self.appctl(&["dpctl/flush-conntrack"])?;
        Ok(())
    }

    /// `ovs-appctl dpctl/dump-conntrack`, lines sorted.
    pub fn dump_conntrack(&self) -> Result<Vec<String>, OvsError> {
        let out = self.appctl(&["dpctl/dump-conntrack"])?;
        let mut v: Vec<String> = out
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        v.sort();
        Ok(v)
    }

    /// Runs `script` on this sandbox (which must have [`N_PORTS`] ports and
    /// [`enable_tx_pcap`](Self::enable_tx_pcap) done): reset, install the flows, send every
    /// frame, record where it went, dump conntrack.
    pub fn run_ct_script(&self, script: &Script) -> Result<Answers, OvsError> {
        let frames = script.frames().map_err(OvsError::Invalid)?;
        self.ct_reset()?;
        self.add_flows(&script.pipeline.flows())?;
        let n = self.n_ports();
        let mut offsets: Vec<u64> = (1..=n)
            .map(|p| {
                fs::metadata(self.tx_pcap_path(p))
                    .map(|m| m.len())
                    .unwrap_or(0)
            })
            .collect();
        let mut answers = Answers::default();
        for (line, port, bytes) in frames {
            self.dp_receive(port, &bytes)?;
            // Barrier: the daemon's main thread polls the dummy ports and runs upcalls and
            // conntrack itself, so once it answers another request the frame is done.
            self.appctl(&["version"])?;
            let mut f = FrameAnswer {
                line,
                ports: Vec::new(),
                out: Vec::new(),
            };
            for p in 1..=n {
                let (pkts, off) = read_pcap_from(&self.tx_pcap_path(p), offsets[p as usize - 1])
                    .map_err(OvsError::Parse)?;
                offsets[p as usize - 1] = off;
                if !pkts.is_empty() {
                    f.ports.push(p);
                }
                for pk in pkts {
                    f.out.push((p, pk));
                }
            }
            answers.frames.push(f);
        }
        answers.dump = self.dump_conntrack()?;
        Ok(answers)
    }
}

/// Starts a sandbox fit for [`OvsSandbox::run_ct_script`].
pub fn ct_sandbox() -> Result<OvsSandbox, OvsError> {
    let sb = OvsSandbox::start(N_PORTS)?;
    sb.enable_tx_pcap()?;
    Ok(sb)
}

// ---------------------------------------------------------------------------------------------
// Comparison and printing.

/// A one-line summary of an Ethernet frame (`tcp 10.0.0.1:1000>10.0.0.2:80 [S] seq=1 ack=0
/// len=0`), written independently of the `wire` crate.
pub fn describe(frame: &[u8]) -> String {
    let Some(et) = frame.get(12..14) else {
        return format!("short frame ({} bytes)", frame.len());
    };
    let et = u16::from_be_bytes([et[0], et[1]]);
    let l3 = &frame[14..];
    let (src, dst, proto, l4, frag): (String, String, u8, &[u8], String) = match et {
        ethertype::IPV4 if l3.len() >= 20 => {
            let ihl = usize::from(l3[0] & 15) * 4;
            let tot = usize::from(u16::from_be_bytes([l3[2], l3[3]]));
            let fo = u16::from_be_bytes([l3[6], l3[7]]);
            let frag = if fo & 0x3fff != 0 {
                format!(" frag(off={},mf={})", (fo & 0x1fff) * 8, (fo >> 13) & 1)
            } else {
                String::new()
            };
            let end = tot.min(l3.len()).max(ihl.min(l3.len()));
            let l4 = if fo & 0x1fff != 0 {
                &[][..]
            } else {
                l3.get(ihl..end).unwrap_or(&[])
            };
            (
                format!("{}.{}.{}.{}", l3[12], l3[13], l3[14], l3[15]),
                format!("{}.{}.{}.{}", l3[16], l3[17], l3[18], l3[19]),
                l3[9],
                l4,
                frag,
            )
        }
        ethertype::IPV6 if l3.len() >= 40 => {
            let v6 = |b: &[u8]| {
                let words: Vec<String> = b
                    .chunks(2)
                    .map(|c| format!("{:x}", u16::from_be_bytes([c[0], c[1]])))
                    .collect();
                words.join(":")
            };
            let mut nh = l3[6];
            let mut rest = &l3[40..];
            let mut frag = String::new();
            if nh == ipproto::FRAGMENT && rest.len() >= 8 {
                let fo = u16::from_be_bytes([rest[2], rest[3]]);
                frag = format!(" frag(off={},mf={})", (fo >> 3) * 8, fo & 1);
                nh = rest[0];
                rest = if fo >> 3 != 0 { &[][..] } else { &rest[8..] };
            }
            (v6(&l3[8..24]), v6(&l3[24..40]), nh, rest, frag)
        }
        _ => return format!("ethertype 0x{et:04x} ({} bytes)", frame.len()),
    };
    let body = match proto {
        ipproto::TCP if l4.len() >= 20 => {
            let fl = u16::from_be_bytes([l4[12], l4[13]]) & 0xfff;
            let names = [
                (tf::FIN, 'F'),
                (tf::SYN, 'S'),
                (tf::RST, 'R'),
                (tf::PSH, 'P'),
                (tf::ACK, '.'),
                (tf::URG, 'U'),
            ];
            let flags: String = names
                .iter()
                .filter(|(b, _)| fl & b != 0)
                .map(|&(_, c)| c)
                .collect();
            let hl = usize::from(l4[12] >> 4) * 4;
            format!(
                "tcp {src}:{}>{dst}:{} [{flags}] seq={} ack={} win={} len={}",
                u16::from_be_bytes([l4[0], l4[1]]),
                u16::from_be_bytes([l4[2], l4[3]]),
                u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]),
                u32::from_be_bytes([l4[8], l4[9], l4[10], l4[11]]),
                u16::from_be_bytes([l4[14], l4[15]]),
                l4.len().saturating_sub(hl)
            )
        }
        ipproto::UDP if l4.len() >= 8 => format!(
            "udp {src}:{}>{dst}:{} len={}",
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
            l4.len() - 8
        ),
        ipproto::ICMP | ipproto::ICMPV6 if l4.len() >= 4 => {
            let name = if proto == ipproto::ICMP {
                "icmp"
            } else {
                "icmp6"
            };
            let mut s = format!("{name} {src}>{dst} type={} code={}", l4[0], l4[1]);
            if l4.len() >= 8 && matches!(l4[0], 0 | 8 | 128 | 129) {
                let _ = write!(
                    s,
                    " id={} seq={}",
                    u16::from_be_bytes([l4[4], l4[5]]),
                    u16::from_be_bytes([l4[6], l4[7]])
                );
            } else if l4.len() > 8 {
                let inner = [&frame[..14], &l4[8..]].concat();
                let mut inner = inner;
                // Give the inner packet the outer ethertype so `describe` can read it.
                inner[12..14].copy_from_slice(&et.to_be_bytes());
                let _ = write!(s, " inner=[{}]", describe(&inner));
            }
            s
        }
        p => format!("ip proto {p} {src}>{dst} ({} bytes of L4)", l4.len()),
    };
    format!("{body}{frag}")
}

fn ports_text(ports: &[u32]) -> String {
    if ports.is_empty() {
        "drop".to_string()
    } else {
        ports
            .iter()
            .map(|p| {
                let n = ports::name(*p);
                if n.is_empty() {
                    p.to_string()
                } else {
                    format!("{p}({n})")
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn ports_text_for(pipeline: &Pipeline, ports_: &[u32]) -> String {
    match pipeline {
        Pipeline::Decoder { .. } => ports_text(ports_),
        Pipeline::Firewall | Pipeline::Custom(_) => {
            if ports_.is_empty() {
                "drop".into()
            } else {
                ports_
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            }
        }
    }
}

/// Masks the IPv4 source address, IP checksum, L4 source port and L4 checksum of a frame
/// (what a range SNAT may choose differently).
fn mask_snat(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    if f.len() >= 34 && f[12..14] == [0x08, 0x00] {
        let ihl = usize::from(f[14] & 15) * 4;
        for b in &mut f[24..30] {
            *b = 0; // checksum + source address
        }
        let l4 = 14 + ihl;
        let proto = f[23];
        if f.len() >= l4 + 2 {
            f[l4] = 0;
            f[l4 + 1] = 0;
        }
        let csum_at = match proto {
            ipproto::TCP => Some(l4 + 16),
            ipproto::UDP => Some(l4 + 6),
            _ => None,
        };
        if let Some(c) = csum_at
            && f.len() >= c + 2
        {
            f[c] = 0;
            f[c + 1] = 0;
        }
    }
    f
}

/// The tuple values of a dump line: `reply=(src=..,dst=..,sport=..,dport=..)` → (dst, dport).
fn reply_dst(line: &str) -> Option<(String, String)> {
    let r = line.split("reply=(").nth(1)?;
    let r = r.split(')').next()?;
    let get = |k: &str| {
        r.split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")[..]))
            .map(str::to_string)
    };
    Some((get("dst")?, get("dport")?))
}

/// Checks the NAT-range properties of one side's answers: each dump entry's translated
/// address/port in range and distinct; at most `capacity` entries.
pub fn nat_range_violations(a: &Answers, ips: (u8, u8), ports_: (u16, u16)) -> Vec<String> {
    let mut v = Vec::new();
    let cap = (usize::from(ips.1 - ips.0) + 1) * (usize::from(ports_.1 - ports_.0) + 1);
    if a.dump.len() > cap {
        v.push(format!("{} connections for a range of {cap}", a.dump.len()));
    }
    let mut seen = BTreeSet::new();
    for l in &a.dump {
        let Some((ip, port)) = reply_dst(l) else {
            v.push(format!("no reply tuple in {l}"));
            continue;
        };
        let last: Option<u8> = ip.strip_prefix("10.0.0.").and_then(|x| x.parse().ok());
        let port_n: Option<u16> = port.parse().ok();
        match (last, port_n) {
            (Some(o), Some(p))
                if (ips.0..=ips.1).contains(&o) && (ports_.0..=ports_.1).contains(&p) => {}
            _ => v.push(format!("translated {ip}:{port} out of range in {l}")),
        }
        if !seen.insert((ip.clone(), port.clone())) {
            v.push(format!("{ip}:{port} given twice"));
        }
    }
    v
}

/// Lists every difference between OVS's answers and ours for `script`, in words (empty when
/// they agree).
pub fn compare(script: &Script, ovs: &Answers, ours: &Answers) -> Vec<String> {
    let mut d = Vec::new();
    let frames = script.frames().unwrap_or_default();
    let name = &script.name;
    if ovs.frames.len() != ours.frames.len() {
        d.push(format!(
            "{name}: OVS answered {} frames, ours {}",
            ovs.frames.len(),
            ours.frames.len()
        ));
    }
    // A range SNAT may refuse a commit on one side only: ignore the `+snat` port there.
    let masked = matches!(script.check, Check::NatRange { .. });
    let strip = |f: &FrameAnswer| -> FrameAnswer {
        let mut f = f.clone();
        if masked {
            f.ports.retain(|&p| p != ports::SNAT);
            f.out.retain(|&(p, _)| p != ports::SNAT);
        }
        f
    };
    for (i, o) in ovs.frames.iter().enumerate() {
        let Some(u) = ours.frames.get(i) else { break };
        let (o, u) = (&strip(o), &strip(u));
        let (in_port, summary) = frames
            .iter()
            .find(|(l, _, _)| *l == o.line)
            .map(|(_, p, b)| (*p, describe(b)))
            .unwrap_or((0, String::new()));
        let head = format!("{name} line {} (in_port {in_port}: {summary})", o.line);
        if o.line != u.line {
            d.push(format!("{head}: ours answered line {} here", u.line));
            continue;
        }
        if o.ports != u.ports {
            d.push(format!(
                "{head}:\n    OVS  -> {}\n    ours -> {}",
                ports_text_for(&script.pipeline, &o.ports),
                ports_text_for(&script.pipeline, &u.ports)
            ));
            continue;
        }
        if matches!(script.check, Check::Frames) || masked {
            for (k, (op, ob)) in o.out.iter().enumerate() {
                let Some((up, ub)) = u.out.get(k) else {
                    d.push(format!("{head}: ours sent no packet #{k} (OVS: port {op})"));
                    break;
                };
                let (ob2, ub2) = if masked {
                    (mask_snat(ob), mask_snat(ub))
                } else {
                    (ob.clone(), ub.clone())
                };
                if op != up || ob2 != ub2 {
                    let at = ob2
                        .iter()
                        .zip(&ub2)
                        .position(|(a, b)| a != b)
                        .unwrap_or(ob2.len().min(ub2.len()));
                    d.push(format!(
                        "{head}: output packet #{k} differs (first at byte {at}{})\n    OVS  {op}: {}\n         {}\n    ours {up}: {}\n         {}",
                        if masked { ", NAT source masked" } else { "" },
                        describe(ob),
                        to_hex(ob),
                        describe(ub),
                        to_hex(ub)
                    ));
                }
            }
            if u.out.len() > o.out.len() {
                d.push(format!(
                    "{head}: ours sent {} packets, OVS {}",
                    u.out.len(),
                    o.out.len()
                ));
            }
        }
    }
    match script.check {
        Check::NatRange { ips, ports: pr } => {
            for v in nat_range_violations(ours, ips, pr) {
                d.push(format!("{name} dump (ours): {v}"));
            }
            let cap = (usize::from(ips.1 - ips.0) + 1) * (usize::from(pr.1 - pr.0) + 1);
            // Each frame of a range script opens its own connection.
            let want = frames.len().min(cap);
            if ours.dump.len() != want {
                d.push(format!(
                    "{name} dump: ours has {} connections, expected {want} (a free slot in the range must be found while one exists; OVS had {})",
                    ours.dump.len(),
                    ovs.dump.len()
                ));
            }
        }
        _ => {
            let o: BTreeSet<&String> = ovs.dump.iter().collect();
            let u: BTreeSet<&String> = ours.dump.iter().collect();
            for l in o.difference(&u) {
                d.push(format!("{name} dump: only in OVS:  {l}"));
            }
            for l in u.difference(&o) {
                d.push(format!("{name} dump: only in ours: {l}"));
            }
        }
    }
    d
}

/// The answers of one script as text (used for `data/ct_oracle_answers.txt` and the printing
/// example): header, flows, each frame with its summary and ports (and output bytes when the
/// script compares frames), then the dump.
pub fn format_answers(script: &Script, a: &Answers) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## {}", script.name);
    let _ = writeln!(s, "# check: {:?}", script.check);
    for f in script.pipeline.flows() {
        let _ = writeln!(s, "# flow: {f}");
    }
    let frames = script.frames().unwrap_or_default();
    let comments: Vec<(usize, &str)> = script
        .text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| l.trim().strip_prefix('#').map(|c| (i + 1, c.trim())))
        .collect();
    for fa in &a.frames {
        for (cl, c) in &comments {
            if *cl + 1 == fa.line {
                let _ = writeln!(s, "  # {c}");
            }
        }
        let (p, summary) = frames
            .iter()
            .find(|(l, _, _)| *l == fa.line)
            .map(|(_, p, b)| (*p, describe(b)))
            .unwrap_or((0, String::new()));
        let _ = writeln!(
            s,
            "{} in={p} {summary} -> {}",
            fa.line,
            ports_text_for(&script.pipeline, &fa.ports)
        );
        if script.check != Check::Ports {
            for (port, b) in &fa.out {
                let _ = writeln!(s, "    {port}: {}  [{}]", to_hex(b), describe(b));
            }
        }
    }
    for l in &a.dump {
        let _ = writeln!(s, "dump: {l}");
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Frame building.

/// An IP address of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ip {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

fn v6(last: u8) -> Ip {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[1] = 0x00;
    a[15] = last;
    Ip::V6(a)
}

fn v4(last: u8) -> Ip {
    Ip::V4([10, 0, 0, last])
}

/// Ethernet + IP (`src` → `dst`, protocol `proto`) around the L4 bytes `l4(pseudo)`.
pub fn ip_frame(src: Ip, dst: Ip, proto: u8, l4: impl FnOnce(Pseudo) -> Vec<u8>) -> Vec<u8> {
    match (src, dst) {
        (Ip::V4(s), Ip::V4(d)) => {
            let ip = Ipv4Spec::new(s, d, proto);
            let body = l4(ip.pseudo());
            packets::ethernet(
                DST_MAC,
                SRC_MAC,
                &[],
                ethertype::IPV4,
                &packets::ipv4(&ip, &body),
            )
        }
        (Ip::V6(s), Ip::V6(d)) => {
            let ip = Ipv6Spec::new(s, d);
            let body = l4(ip.pseudo(proto));
            packets::ethernet(
                DST_MAC,
                SRC_MAC,
                &[],
                ethertype::IPV6,
                &packets::ipv6(&ip, &[], proto, &body),
            )
        }
        _ => Vec::new(),
    }
}

fn data(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_add(salt)).collect()
}

/// A TCP conversation between a client and a server.
#[derive(Debug, Clone, Copy)]
pub struct TcpConv {
    /// Client address.
    pub c: Ip,
    /// Server address.
    pub s: Ip,
    /// Client port.
    pub cp: u16,
    /// Server port.
    pub sp: u16,
}

impl TcpConv {
    /// A segment from the client (`from_client`) or the server.
    pub fn seg(&self, from_client: bool, flags: u16, seq: u32, ack: u32, len: usize) -> Vec<u8> {
        let (src, dst, sp, dp) = if from_client {
            (self.c, self.s, self.cp, self.sp)
        } else {
            (self.s, self.c, self.sp, self.cp)
        };
        ip_frame(src, dst, ipproto::TCP, |ph| {
            let mut t = TcpSpec::new(sp, dp, flags);
            t.seq = seq;
            t.ack = ack;
            t.window = 65535;
            packets::tcp(ph, &t, &data(len, seq as u8))
        })
    }
}

fn udp_frame(src: Ip, dst: Ip, sp: u16, dp: u16, len: usize) -> Vec<u8> {
    ip_frame(src, dst, ipproto::UDP, |ph| {
        packets::udp(ph, sp, dp, &data(len, sp as u8))
    })
}

fn echo(src: Ip, dst: Ip, id: u16, seq: u16, request: bool) -> Vec<u8> {
    let mut rest = Vec::new();
    rest.extend_from_slice(&id.to_be_bytes());
    rest.extend_from_slice(&seq.to_be_bytes());
    rest.extend_from_slice(&data(8, 0));
    match src {
        Ip::V4(_) => ip_frame(src, dst, ipproto::ICMP, |_| {
            packets::icmp4(if request { 8 } else { 0 }, 0, &rest)
        }),
        Ip::V6(_) => ip_frame(src, dst, ipproto::ICMPV6, |ph| {
            packets::icmp6(ph, if request { 128 } else { 129 }, 0, &rest)
        }),
    }
}

/// An ICMP(v6) error from `src` to `dst` quoting `quoted` (an Ethernet frame; its IP header
/// and up to `quote_l4` bytes of L4 are quoted). IPv4: type 3 code 3; IPv6: type 1 code 4.
fn icmp_error(src: Ip, dst: Ip, quoted: &[u8], quote_l4: usize) -> Vec<u8> {
    let l3 = &quoted[14..];
    let q = match src {
        Ip::V4(_) => {
            let ihl = usize::from(l3[0] & 15) * 4;
            l3[..(ihl + quote_l4).min(l3.len())].to_vec()
        }
        Ip::V6(_) => l3[..(40 + quote_l4).min(l3.len())].to_vec(),
    };
    let mut rest = vec![0u8; 4];
    rest.extend_from_slice(&q);
    match src {
        Ip::V4(_) => ip_frame(src, dst, ipproto::ICMP, |_| packets::icmp4(3, 3, &rest)),
        Ip::V6(_) => ip_frame(src, dst, ipproto::ICMPV6, |ph| {
            packets::icmp6(ph, 1, 4, &rest)
        }),
    }
}

/// Builds a script's text line by line.
#[derive(Debug, Default)]
struct Builder {
    text: String,
    line: usize,
    tags: Vec<(String, usize)>,
}

impl Builder {
    fn comment(&mut self, c: &str) {
        self.line += 1;
        let _ = writeln!(self.text, "# {c}");
    }

    fn send(&mut self, port: u32, frame: &[u8]) -> usize {
        self.line += 1;
        let _ = writeln!(self.text, "{port} {}", to_hex(frame));
        self.line
    }

    fn tag(&mut self, tag: &str, port: u32, frame: &[u8]) {
        let l = self.send(port, frame);
        self.tags.push((tag.to_string(), l));
    }

    fn build(self, name: &str, pipeline: Pipeline, check: Check) -> Script {
        Script {
            name: name.to_string(),
            pipeline,
            text: self.text,
            check,
            tags: self.tags,
        }
    }
}

const C: u32 = ports::CLIENT;
const S: u32 = ports::SERVER;

fn conv4() -> TcpConv {
    TcpConv {
        c: v4(1),
        s: v4(2),
        cp: 40000,
        sp: 80,
    }
}

/// The three-way handshake on `t` with client ISN `ci`, server ISN `si`, client on port `cport`
/// and server on `sport`; tags `syn`, `synack`, `ack`.
fn handshake(b: &mut Builder, t: &TcpConv, ci: u32, si: u32, cport: u32, sport: u32) {
    b.comment("handshake: SYN, SYN+ACK, ACK");
    b.tag("syn", cport, &t.seg(true, tf::SYN, ci, 0, 0));
    b.tag(
        "synack",
        sport,
        &t.seg(false, tf::SYN | tf::ACK, si, ci + 1, 0),
    );
    b.tag("ack", cport, &t.seg(true, tf::ACK, ci + 1, si + 1, 0));
}

fn script_tcp_full(commit: Commit, name: &str) -> Script {
    let t = conv4();
    let mut b = Builder::default();
    let (ci, si) = (1000, 5000);
    handshake(&mut b, &t, ci, si, C, S);
    b.comment("data client -> server (100 bytes), server -> client (50 bytes), acks");
    b.tag(
        "data_c",
        C,
        &t.seg(true, tf::PSH | tf::ACK, ci + 1, si + 1, 100),
    );
    b.tag(
        "data_s",
        S,
        &t.seg(false, tf::PSH | tf::ACK, si + 1, ci + 101, 50),
    );
    b.send(C, &t.seg(true, tf::ACK, ci + 101, si + 51, 0));
    b.comment("client closes: FIN, server ACKs, server FIN, client last ACK (TIME_WAIT)");
    b.tag(
        "fin_c",
        C,
        &t.seg(true, tf::FIN | tf::ACK, ci + 101, si + 51, 0),
    );
    b.send(S, &t.seg(false, tf::ACK, si + 51, ci + 102, 0));
    b.tag(
        "fin_s",
        S,
        &t.seg(false, tf::FIN | tf::ACK, si + 51, ci + 102, 0),
    );
    b.tag("last_ack", C, &t.seg(true, tf::ACK, ci + 102, si + 52, 0));
    b.build(name, Pipeline::decoder(commit), Check::Ports)
}

fn script_tcp_window() -> Script {
    let t = TcpConv {
        cp: 40001,
        ..conv4()
    };
    let mut b = Builder::default();
    let (ci, si) = (70000, 900_000);
    handshake(&mut b, &t, ci, si, C, S);
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, ci + 1, si + 1, 200));
    b.send(S, &t.seg(false, tf::ACK, si + 1, ci + 201, 0));
    b.comment("retransmit of the 200-byte segment");
    b.tag(
        "retransmit",
        C,
        &t.seg(true, tf::PSH | tf::ACK, ci + 1, si + 1, 200),
    );
    b.comment("out of window: seq far ahead (+2^30)");
    b.tag(
        "oow",
        C,
        &t.seg(true, tf::PSH | tf::ACK, ci + 201 + (1 << 30), si + 1, 100),
    );
    b.comment("out of window from the server: ack far ahead of what the client sent");
    b.send(S, &t.seg(false, tf::ACK, si + 1, ci + 201 + (1 << 30), 0));
    b.comment("zero-length ACKs far ahead / far behind, then 1 byte far ahead");
    b.tag(
        "oow_ack0_ahead",
        C,
        &t.seg(true, tf::ACK, ci + 201 + (1 << 30), si + 1, 0),
    );
    b.tag(
        "oow_ack0_behind",
        C,
        &t.seg(true, tf::ACK, ci.wrapping_sub(1 << 30), si + 1, 0),
    );
    b.tag(
        "oow_len1_ahead",
        C,
        &t.seg(true, tf::ACK, ci + 201 + (1 << 30), si + 1, 1),
    );
    b.comment("just past the window (seq = ack + win of the peer + 1) with 10 bytes");
    b.tag(
        "past_window",
        C,
        &t.seg(true, tf::PSH | tf::ACK, ci + 201 + 65536, si + 1, 10),
    );
    b.comment("in window again");
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, ci + 201, si + 1, 10));
    b.comment("RST out of window (seq far off)");
    b.tag(
        "rst_oow",
        S,
        &t.seg(false, tf::RST, si + 1 + (1 << 30), 0, 0),
    );
    b.send(C, &t.seg(true, tf::ACK, ci + 211, si + 1, 0));
    b.comment("RST in window");
    b.tag(
        "rst_in",
        S,
        &t.seg(false, tf::RST | tf::ACK, si + 1, ci + 211, 0),
    );
    b.comment("after the RST");
    b.tag("after_rst", C, &t.seg(true, tf::ACK, ci + 211, si + 1, 0));
    b.build(
        "tcp_window_rst",
        Pipeline::decoder(Commit::All),
        Check::Ports,
    )
}

/// Short TCP scripts that stop at each step of a close, so the dump shows each state.
fn scripts_tcp_states() -> Vec<Script> {
    let steps: [(&str, usize); 6] = [
        ("tcp_state_after_syn", 1),
        ("tcp_state_after_synack", 2),
        ("tcp_state_after_ack", 3),
        ("tcp_state_after_fin", 4),
        ("tcp_state_after_fin_ack", 5),
        ("tcp_state_after_fin2", 6),
    ];
    steps
        .iter()
        .enumerate()
        .map(|(i, &(name, n))| {
            let t = TcpConv {
                cp: 47000 + i as u16,
                ..conv4()
            };
            let segs = [
                (C, t.seg(true, tf::SYN, 100, 0, 0)),
                (S, t.seg(false, tf::SYN | tf::ACK, 300, 101, 0)),
                (C, t.seg(true, tf::ACK, 101, 301, 0)),
                (C, t.seg(true, tf::FIN | tf::ACK, 101, 301, 0)),
                (S, t.seg(false, tf::ACK, 301, 102, 0)),
                (S, t.seg(false, tf::FIN | tf::ACK, 301, 102, 0)),
            ];
            let mut b = Builder::default();
            b.comment(&format!(
                "the first {n} steps of SYN, SYN+ACK, ACK, FIN, ACK, FIN"
            ));
            for (port, f) in segs.iter().take(n) {
                b.send(*port, f);
            }
            b.build(name, Pipeline::decoder(Commit::All), Check::Ports)
        })
        .collect()
}

fn script_tcp_orig_before_reply() -> Script {
    let t = TcpConv {
        cp: 47100,
        ..conv4()
    };
    let mut b = Builder::default();
    b.comment("client-side packets before the server ever answers");
    b.tag("syn", C, &t.seg(true, tf::SYN, 100, 0, 0));
    b.tag("syn_again", C, &t.seg(true, tf::SYN, 100, 0, 0));
    b.tag("ack_early", C, &t.seg(true, tf::ACK, 101, 1, 0));
    b.tag("data_early", C, &t.seg(true, tf::PSH | tf::ACK, 101, 1, 20));
    b.comment("a SYN with a different ISN while SYN_SENT");
    b.tag("syn_other_isn", C, &t.seg(true, tf::SYN, 5000, 0, 0));
    b.build(
        "tcp_orig_before_reply",
        Pipeline::decoder(Commit::All),
        Check::Ports,
    )
}

fn script_tcp_midstream() -> Script {
    let t = TcpConv {
        cp: 47200,
        ..conv4()
    };
    let mut b = Builder::default();
    b.comment("pick-up of a connection seen mid-stream (no SYN): ACK, data, reply");
    b.tag("ack", C, &t.seg(true, tf::ACK, 5000, 9000, 0));
    b.tag("data", C, &t.seg(true, tf::PSH | tf::ACK, 5000, 9000, 30));
    b.tag("reply", S, &t.seg(false, tf::ACK, 9000, 5030, 0));
    b.tag("data2", C, &t.seg(true, tf::PSH | tf::ACK, 5030, 9000, 30));
    b.comment("a lone FIN, a lone RST, a lone SYN+ACK as first packets of other tuples");
    let t2 = TcpConv { cp: 47201, ..t };
    b.tag("fin_first", C, &t2.seg(true, tf::FIN | tf::ACK, 1, 1, 0));
    let t3 = TcpConv { cp: 47202, ..t };
    b.tag("rst_first", C, &t3.seg(true, tf::RST, 1, 0, 0));
    let t4 = TcpConv { cp: 47203, ..t };
    b.tag("synack_first", C, &t4.seg(true, tf::SYN | tf::ACK, 1, 1, 0));
    b.build(
        "tcp_midstream_pickup",
        Pipeline::decoder(Commit::All),
        Check::Ports,
    )
}

fn script_mark_values() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("mark 0x1a2b and a label with high and low bits: how the dump prints them");
    b.send(C, &udp_frame(c, s, 10, 20, 4));
    b.send(S, &udp_frame(s, c, 20, 10, 4));
    b.send(C, &icmp_echo_v6_pair_first());
    b.build(
        "mark_label_values",
        Pipeline::Decoder {
            zone_a: 65535,
            zone_b: 1,
            commit: Commit::All,
            exec:
                "set_field:0x1a2b->ct_mark,set_field:0xffff000000000000000000000000abcd->ct_label"
                    .into(),
            nat: String::new(),
        },
        Check::Ports,
    )
}

fn icmp_echo_v6_pair_first() -> Vec<u8> {
    echo(v6(1), v6(2), 3, 1, true)
}

fn script_tcp_closed_port() -> Script {
    let t = TcpConv {
        cp: 40002,
        sp: 23,
        ..conv4()
    };
    let mut b = Builder::default();
    b.comment("SYN to a closed port, RST+ACK reply, then the client retries");
    b.tag("syn", C, &t.seg(true, tf::SYN, 3000, 0, 0));
    b.tag("rst", S, &t.seg(false, tf::RST | tf::ACK, 0, 3001, 0));
    b.tag("retry", C, &t.seg(true, tf::SYN, 3000, 0, 0));
    b.build(
        "tcp_syn_closed_port",
        Pipeline::decoder(Commit::All),
        Check::Ports,
    )
}

fn script_tcp_timewait_reuse() -> Script {
    let t = TcpConv {
        cp: 40003,
        ..conv4()
    };
    let mut b = Builder::default();
    let (ci, si) = (10, 20);
    handshake(&mut b, &t, ci, si, C, S);
    b.send(C, &t.seg(true, tf::FIN | tf::ACK, ci + 1, si + 1, 0));
    b.send(S, &t.seg(false, tf::FIN | tf::ACK, si + 1, ci + 2, 0));
    b.tag("last_ack", C, &t.seg(true, tf::ACK, ci + 2, si + 2, 0));
    b.comment("new SYN reusing the TIME_WAIT tuple (higher ISN), then its handshake");
    b.tag("syn2", C, &t.seg(true, tf::SYN, 100_000, 0, 0));
    b.tag(
        "synack2",
        S,
        &t.seg(false, tf::SYN | tf::ACK, 200_000, 100_001, 0),
    );
    b.tag("ack2", C, &t.seg(true, tf::ACK, 100_001, 200_001, 0));
    b.build(
        "tcp_timewait_reuse",
        Pipeline::decoder(Commit::All),
        Check::Ports,
    )
}

fn script_tcp_bad() -> Script {
    let t = TcpConv {
        cp: 40004,
        ..conv4()
    };
    let mut b = Builder::default();
    b.comment("SYN+FIN");
    b.tag("synfin", C, &t.seg(true, tf::SYN | tf::FIN, 1, 0, 0));
    b.comment("TCP header truncated to 12 bytes (IP total length says so)");
    let mut f = t.seg(true, tf::SYN, 1, 0, 0);
    f.truncate(14 + 20 + 12);
    let tot = (20u16 + 12).to_be_bytes();
    f[16] = tot[0];
    f[17] = tot[1];
    fix_ipv4_checksum(&mut f);
    b.tag("short", C, &f);
    b.comment("data offset 4 (16-byte header, below the minimum)");
    let mut f = t.seg(true, tf::SYN, 1, 0, 0);
    f[14 + 20 + 12] = (4 << 4) | (f[14 + 20 + 12] & 0x0f);
    fix_tcp4_checksum(&mut f);
    b.tag("doff4", C, &f);
    b.comment("bad TCP checksum on a SYN");
    let mut f = t.seg(true, tf::SYN, 1, 0, 0);
    f[14 + 20 + 16] ^= 0x55;
    b.tag("badsum", C, &f);
    b.comment("no flags at all");
    b.tag("noflags", C, &t.seg(true, 0, 1, 0, 0));
    b.comment("a good SYN afterwards, then a SYN+ACK with a bad checksum, then a good one");
    b.tag("syn", C, &t.seg(true, tf::SYN, 1, 0, 0));
    let mut f = t.seg(false, tf::SYN | tf::ACK, 9, 2, 0);
    f[14 + 20 + 16] ^= 0x55;
    b.tag("synack_badsum", S, &f);
    b.tag("synack", S, &t.seg(false, tf::SYN | tf::ACK, 9, 2, 0));
    b.comment("bad IPv4 header checksum on an established packet");
    let mut f = t.seg(true, tf::ACK, 2, 10, 0);
    f[14 + 10] ^= 0x55;
    b.tag("bad_ipsum", C, &f);
    b.tag("ack", C, &t.seg(true, tf::ACK, 2, 10, 0));
    b.build(
        "tcp_bad_packets",
        Pipeline::decoder(Commit::All),
        Check::Ports,
    )
}

fn fix_ipv4_checksum(f: &mut [u8]) {
    f[24] = 0;
    f[25] = 0;
    let c = packets::internet_checksum(&[&f[14..34]]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

fn fix_tcp4_checksum(f: &mut [u8]) {
    let l4 = 34;
    f[l4 + 16] = 0;
    f[l4 + 17] = 0;
    let mut ph = Vec::new();
    ph.extend_from_slice(&f[26..34]);
    ph.extend_from_slice(&[0, ipproto::TCP]);
    ph.extend_from_slice(&((f.len() - l4) as u16).to_be_bytes());
    let c = packets::internet_checksum(&[&ph, &f[l4..]]);
    f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
}

fn script_udp() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("first packet, reply, more both ways");
    b.tag("first", C, &udp_frame(c, s, 5000, 53, 20));
    b.tag("second_orig", C, &udp_frame(c, s, 5000, 53, 21));
    b.tag("reply", S, &udp_frame(s, c, 53, 5000, 40));
    b.tag("after_reply", C, &udp_frame(c, s, 5000, 53, 22));
    b.send(S, &udp_frame(s, c, 53, 5000, 41));
    b.comment("a second flow from the server side first (new, from port 2)");
    b.tag("server_first", S, &udp_frame(s, c, 6000, 7000, 10));
    b.send(C, &udp_frame(c, s, 7000, 6000, 10));
    b.comment("bad UDP checksum, then UDP checksum 0 (none)");
    let mut f = udp_frame(c, s, 5001, 53, 20);
    f[14 + 20 + 6] ^= 0x33;
    b.tag("badsum", C, &f);
    let mut f = udp_frame(c, s, 5002, 53, 20);
    f[14 + 20 + 6] = 0;
    f[14 + 20 + 7] = 0;
    b.tag("nosum", C, &f);
    b.comment("UDP length field larger than the datagram");
    let mut f = udp_frame(c, s, 5003, 53, 20);
    f[14 + 20 + 4] = 0;
    f[14 + 20 + 5] = 200;
    b.tag("badlen", C, &f);
    b.build("udp_basic", Pipeline::decoder(Commit::All), Check::Ports)
}

fn script_udp_new_from_client() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("commit only +new from port 1: server-first is never committed");
    b.tag("server_first", S, &udp_frame(s, c, 53, 5000, 10));
    b.tag("server_again", S, &udp_frame(s, c, 53, 5000, 10));
    b.tag("client", C, &udp_frame(c, s, 5000, 53, 10));
    b.tag("reply", S, &udp_frame(s, c, 53, 5000, 10));
    b.send(C, &udp_frame(c, s, 5000, 53, 10));
    b.build(
        "udp_commit_new_from_client",
        Pipeline::decoder(Commit::NewFromClient),
        Check::Ports,
    )
}

fn script_icmp() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("ICMP echo request, reply, second request; an unsolicited reply");
    b.tag("req", C, &echo(c, s, 7, 1, true));
    b.tag("rep", S, &echo(s, c, 7, 1, false));
    b.tag("req2", C, &echo(c, s, 7, 2, true));
    b.send(S, &echo(s, c, 7, 2, false));
    b.tag("unsolicited_reply", S, &echo(s, c, 99, 1, false));
    b.comment("ICMPv6 echo");
    let (c6, s6) = (v6(1), v6(2));
    b.tag("req6", C, &echo(c6, s6, 8, 1, true));
    b.tag("rep6", S, &echo(s6, c6, 8, 1, false));
    b.send(C, &echo(c6, s6, 8, 2, true));
    b.comment("bad ICMP checksum on a new echo request, then ICMPv6");
    let mut f = echo(c, s, 1234, 1, true);
    f[14 + 20 + 2] ^= 0x5a;
    b.tag("badsum", C, &f);
    let mut f = echo(c6, s6, 1234, 1, true);
    f[14 + 40 + 2] ^= 0x5a;
    b.tag("badsum6", C, &f);
    b.comment("an echo request whose ICMP header is cut to 4 bytes");
    let mut f = echo(c, s, 4321, 1, true);
    f.truncate(14 + 20 + 4);
    f[17] = 24;
    fix_ipv4_checksum(&mut f);
    b.tag("short", C, &f);
    b.build("icmp_echo", Pipeline::decoder(Commit::All), Check::Ports)
}

fn script_icmp_related() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    let router = v4(254);
    b.comment("UDP committed, then port unreachable from the server quoting it (+rel)");
    let u = udp_frame(c, s, 5555, 9999, 16);
    b.tag("udp", C, &u);
    b.tag("udp_unreach", S, &icmp_error(s, c, &u, 8));
    b.comment("same from a router on the path");
    b.tag("udp_unreach_router", S, &icmp_error(router, c, &u, 8));
    b.comment("ICMP error in the original direction (client quoting the server's reply)");
    let r = udp_frame(s, c, 9999, 5555, 16);
    b.tag("udp_unreach_orig", C, &icmp_error(c, s, &r, 8));
    b.comment("TCP: handshake, then an ICMP error quoting a client segment");
    let t = TcpConv {
        cp: 41000,
        ..conv4()
    };
    handshake(&mut b, &t, 100, 200, C, S);
    let seg = t.seg(true, tf::PSH | tf::ACK, 101, 201, 20);
    b.send(C, &seg);
    b.tag("tcp_unreach", S, &icmp_error(router, c, &seg, 8));
    b.comment("ICMP error quoting a tuple that has no connection");
    let other = udp_frame(c, s, 1, 2, 16);
    b.tag("unrelated", S, &icmp_error(s, c, &other, 8));
    b.comment("ICMPv6 error quoting a committed UDP6 connection");
    let (c6, s6) = (v6(1), v6(2));
    let u6 = udp_frame(c6, s6, 5555, 9999, 16);
    b.tag("udp6", C, &u6);
    b.tag("udp6_unreach", S, &icmp_error(s6, c6, &u6, 8));
    b.build("icmp_related", Pipeline::decoder(Commit::All), Check::Ports)
}

fn script_ipv6() -> Script {
    let t = TcpConv {
        c: v6(1),
        s: v6(2),
        cp: 42000,
        sp: 443,
    };
    let mut b = Builder::default();
    handshake(&mut b, &t, 1, 2, C, S);
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, 2, 3, 30));
    b.send(S, &t.seg(false, tf::ACK, 3, 32, 0));
    b.tag("oow6", C, &t.seg(true, tf::ACK, 2 + (1 << 30), 3, 0));
    b.comment("bad TCP6 and UDP6 checksums on first packets");
    let t2 = TcpConv { cp: 42001, ..t };
    let mut f = t2.seg(true, tf::SYN, 1, 0, 0);
    f[14 + 40 + 16] ^= 0x11;
    b.tag("tcp6_badsum", C, &f);
    let mut f = udp_frame(v6(1), v6(2), 5354, 5354, 10);
    f[14 + 40 + 6] ^= 0x11;
    b.tag("udp6_badsum", C, &f);
    b.comment("UDP6 first, reply");
    b.tag("udp6", C, &udp_frame(v6(1), v6(2), 5353, 5353, 10));
    b.tag("udp6_reply", S, &udp_frame(v6(2), v6(1), 5353, 5353, 10));
    b.build("ipv6_tcp_udp", Pipeline::decoder(Commit::All), Check::Ports)
}

fn script_fragments() -> Script {
    let mut b = Builder::default();
    let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let mut ip = Ipv4Spec::new(c, s, ipproto::UDP);
    ip.id = 0x1234;
    let l4 = packets::udp(ip.pseudo(), 4000, 4001, &data(100, 3));
    let frags = packets::ipv4_fragments(&ip, &l4, 64);
    b.comment("a UDP datagram in two small IPv4 fragments (first, then last)");
    b.tag("frag1", C, &frags[0]);
    b.tag("frag2", C, &frags[1]);
    b.comment("the same datagram unfragmented, then a reply");
    b.tag(
        "whole",
        C,
        &udp_frame(Ip::V4(c), Ip::V4(s), 4000, 4001, 100),
    );
    b.tag("reply", S, &udp_frame(Ip::V4(s), Ip::V4(c), 4001, 4000, 10));
    b.comment("a lone later fragment");
    let mut ip2 = ip.clone();
    ip2.id = 0x777;
    let frags2 = packets::ipv4_fragments(&ip2, &l4, 64);
    b.tag("lone_later", C, &frags2[1]);
    b.comment("IPv6 first fragment of a UDP datagram");
    let ip6 = Ipv6Spec::new([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = 2;
        a
    });
    let l4v6 = packets::udp(ip6.pseudo(ipproto::UDP), 4000, 4001, &data(100, 3));
    let f6 = packets::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        ethertype::IPV6,
        &packets::ipv6(
            &ip6,
            &[Ipv6Ext::Fragment {
                offset: 0,
                more: true,
                id: 99,
            }],
            ipproto::UDP,
            &l4v6[..64],
        ),
    );
    b.tag("frag6", C, &f6);
    b.build("ip_fragments", Pipeline::decoder(Commit::All), Check::Ports)
}

/// Fragments big enough for OVS's reassembly (`ipf`: v4 non-last fragments >= 1200 bytes,
/// v6 >= 1280), in order and out of order, IPv4 and IPv6.
fn script_fragments_reassembled() -> Script {
    let mut b = Builder::default();
    let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let mut ip = Ipv4Spec::new(c, s, ipproto::UDP);
    ip.id = 0x4242;
    let l4 = packets::udp(ip.pseudo(), 4100, 4101, &data(2000, 9));
    let frags = packets::ipv4_fragments(&ip, &l4, 1400);
    b.comment("a 2008-byte UDP datagram in two IPv4 fragments (1400 + 608), in order");
    b.tag("v4_frag1", C, &frags[0]);
    b.tag("v4_frag2", C, &frags[1]);
    b.tag(
        "v4_reply",
        S,
        &udp_frame(Ip::V4(s), Ip::V4(c), 4101, 4100, 10),
    );
    b.comment("the next datagram of the flow, last fragment first");
    ip.id = 0x4243;
    let frags = packets::ipv4_fragments(&ip, &l4, 1400);
    b.tag("v4_ooo_last", C, &frags[1]);
    b.tag("v4_ooo_first", C, &frags[0]);
    b.comment("IPv6: the same datagram in two fragments (1400 + 608)");
    let (c6, s6) = (v6(1), v6(2));
    let (Ip::V6(c6a), Ip::V6(s6a)) = (c6, s6) else {
        unreachable!()
    };
    let ip6 = Ipv6Spec::new(c6a, s6a);
    let l4v6 = packets::udp(ip6.pseudo(ipproto::UDP), 4100, 4101, &data(2000, 9));
    for (i, (off, chunk)) in [(0usize, &l4v6[..1400]), (1400, &l4v6[1400..])]
        .into_iter()
        .enumerate()
    {
        let f = packets::ethernet(
            DST_MAC,
            SRC_MAC,
            &[],
            ethertype::IPV6,
            &packets::ipv6(
                &ip6,
                &[Ipv6Ext::Fragment {
                    offset: (off / 8) as u16,
                    more: i == 0,
                    id: 0x6666,
                }],
                ipproto::UDP,
                chunk,
            ),
        );
        b.tag(&format!("v6_frag{}", i + 1), C, &f);
    }
    b.tag("v6_reply", S, &udp_frame(s6, c6, 4101, 4100, 10));
    b.build(
        "ip_fragments_reassembled",
        Pipeline::decoder(Commit::All),
        Check::Frames,
    )
}

fn script_zones() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("same UDP tuple in zone 0 (ports 1/2) and zone 5 (ports 3/4)");
    b.tag("z0_first", C, &udp_frame(c, s, 1111, 2222, 10));
    b.tag(
        "z5_first",
        ports::CLIENT_B,
        &udp_frame(c, s, 1111, 2222, 10),
    );
    b.tag(
        "z5_reply",
        ports::SERVER_B,
        &udp_frame(s, c, 2222, 1111, 10),
    );
    b.tag("z0_reply", S, &udp_frame(s, c, 2222, 1111, 10));
    b.comment("a reply in zone 5 to a tuple only zone 0 knows");
    b.send(C, &udp_frame(c, s, 3333, 4444, 10));
    b.tag(
        "z5_cross",
        ports::SERVER_B,
        &udp_frame(s, c, 4444, 3333, 10),
    );
    b.comment("TCP handshake in zone 5");
    let t = TcpConv {
        cp: 43000,
        ..conv4()
    };
    handshake(&mut b, &t, 1, 1, ports::CLIENT_B, ports::SERVER_B);
    b.build(
        "zones",
        Pipeline::Decoder {
            zone_a: 0,
            zone_b: 5,
            commit: Commit::All,
            exec: String::new(),
            nat: String::new(),
        },
        Check::Ports,
    )
}

fn script_zones_nonzero_new_only() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("zones 7 and 9, commit only +new from the client ports, mark and label set");
    b.tag("z7_first", C, &udp_frame(c, s, 1111, 2222, 10));
    b.tag("z7_second", C, &udp_frame(c, s, 1111, 2222, 10));
    b.tag("z7_reply", S, &udp_frame(s, c, 2222, 1111, 10));
    b.tag(
        "z9_reply_first",
        ports::SERVER_B,
        &udp_frame(s, c, 2222, 1111, 10),
    );
    b.tag(
        "z9_first",
        ports::CLIENT_B,
        &udp_frame(c, s, 1111, 2222, 10),
    );
    let t = TcpConv {
        cp: 43001,
        ..conv4()
    };
    handshake(&mut b, &t, 5, 6, C, S);
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, 6, 7, 10));
    b.build(
        "zones_nonzero_commit_new_mark_label",
        Pipeline::Decoder {
            zone_a: 7,
            zone_b: 9,
            commit: Commit::NewFromClient,
            exec: "set_field:0x1->ct_mark,set_field:0x1->ct_label".into(),
            nat: String::new(),
        },
        Check::Ports,
    )
}

fn script_mark_label() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("commit every packet with mark 1 and a 128-bit label; matches see them");
    b.tag("first", C, &udp_frame(c, s, 1, 2, 10));
    b.tag("reply", S, &udp_frame(s, c, 2, 1, 10));
    let t = TcpConv {
        cp: 43002,
        ..conv4()
    };
    handshake(&mut b, &t, 5, 6, C, S);
    b.build(
        "mark_label",
        Pipeline::Decoder {
            zone_a: 3,
            zone_b: 4,
            commit: Commit::All,
            exec: "set_field:0x1->ct_mark,set_field:0x1000000000000000000000001->ct_label".into(),
            nat: String::new(),
        },
        Check::Ports,
    )
}

fn script_force_commit() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("force_commit on every packet: a reply-direction packet replaces the connection");
    b.tag("first", C, &udp_frame(c, s, 1000, 2000, 10));
    b.tag("reply", S, &udp_frame(s, c, 2000, 1000, 10));
    b.tag("orig_again", C, &udp_frame(c, s, 1000, 2000, 10));
    b.tag("reply_again", S, &udp_frame(s, c, 2000, 1000, 10));
    b.comment("TCP handshake under force_commit");
    let t = TcpConv {
        cp: 43003,
        ..conv4()
    };
    handshake(&mut b, &t, 5, 6, C, S);
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, 6, 7, 10));
    b.build(
        "force_commit",
        Pipeline::decoder(Commit::Force),
        Check::Ports,
    )
}

fn script_never_commit() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("no commit: everything stays +new, nothing in the table");
    b.tag("first", C, &udp_frame(c, s, 1000, 2000, 10));
    b.tag("reply", S, &udp_frame(s, c, 2000, 1000, 10));
    let t = TcpConv {
        cp: 43004,
        ..conv4()
    };
    b.tag("syn", C, &t.seg(true, tf::SYN, 1, 0, 0));
    b.tag("ack_only", C, &t.seg(true, tf::ACK, 2, 2, 0));
    b.tag("synfin", C, &t.seg(true, tf::SYN | tf::FIN, 1, 0, 0));
    b.build(
        "never_commit",
        Pipeline::decoder(Commit::Never),
        Check::Ports,
    )
}

fn script_firewall() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("seed 002's firewall: new from 1 is committed and forwarded; est both ways");
    b.tag("udp_first", C, &udp_frame(c, s, 1000, 2000, 10));
    b.tag("udp_reply", S, &udp_frame(s, c, 2000, 1000, 10));
    b.send(C, &udp_frame(c, s, 1000, 2000, 10));
    b.tag("udp_unsolicited", S, &udp_frame(s, c, 3000, 4000, 10));
    let t = TcpConv {
        cp: 44000,
        ..conv4()
    };
    handshake(&mut b, &t, 100, 500, C, S);
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, 101, 501, 64));
    b.send(S, &t.seg(false, tf::PSH | tf::ACK, 501, 165, 64));
    b.tag("oow", C, &t.seg(true, tf::ACK, 101 + (1 << 30), 565, 0));
    b.send(C, &t.seg(true, tf::FIN | tf::ACK, 165, 565, 0));
    b.send(S, &t.seg(false, tf::FIN | tf::ACK, 565, 166, 0));
    b.send(C, &t.seg(true, tf::ACK, 166, 566, 0));
    b.tag("icmp_req", C, &echo(c, s, 1, 1, true));
    b.tag("icmp_rep", S, &echo(s, c, 1, 1, false));
    b.build("firewall", Pipeline::Firewall, Check::Ports)
}

fn nat_pipeline(nat: &str, zone: u16) -> Pipeline {
    Pipeline::Decoder {
        zone_a: zone,
        zone_b: zone + 1,
        commit: Commit::All,
        exec: String::new(),
        nat: nat.to_string(),
    }
}

fn script_snat() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    let nat_ip = v4(100);
    b.comment("SNAT to 10.0.0.100 (ports kept): UDP, reply to the NAT address un-NATted");
    b.tag("udp", C, &udp_frame(c, s, 5000, 53, 12));
    b.tag("udp_reply", S, &udp_frame(s, nat_ip, 53, 5000, 12));
    b.send(C, &udp_frame(c, s, 5000, 53, 13));
    b.comment("a reply to the un-NATted client address (no connection for it)");
    b.tag("reply_to_real", S, &udp_frame(s, c, 53, 5000, 12));
    b.comment("TCP through the SNAT");
    let t = TcpConv {
        cp: 45000,
        ..conv4()
    };
    let tn = TcpConv { c: nat_ip, ..t };
    b.tag("syn", C, &t.seg(true, tf::SYN, 10, 0, 0));
    b.tag("synack", S, &tn.seg(false, tf::SYN | tf::ACK, 20, 11, 0));
    b.tag("ack", C, &t.seg(true, tf::ACK, 11, 21, 0));
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, 11, 21, 40));
    b.send(S, &tn.seg(false, tf::PSH | tf::ACK, 21, 51, 40));
    b.comment("ICMP echo through the SNAT");
    b.tag("echo", C, &echo(c, s, 77, 1, true));
    b.tag("echo_reply", S, &echo(s, nat_ip, 77, 1, false));
    b.comment("port unreachable from the server to the NAT address quoting the NATted datagram");
    let natted = udp_frame(nat_ip, s, 5000, 53, 12);
    b.tag("icmp_err", S, &icmp_error(s, nat_ip, &natted, 8));
    b.build(
        "nat_snat_single",
        nat_pipeline("nat(src=10.0.0.100)", 0),
        Check::Frames,
    )
}

fn script_dnat() -> Script {
    let mut b = Builder::default();
    let (c, vip, backend) = (v4(1), v4(200), v4(2));
    b.comment("DNAT 10.0.0.200:* to 10.0.0.2:8080 in zone 11");
    let t = TcpConv {
        c,
        s: vip,
        cp: 46000,
        sp: 80,
    };
    let tb = TcpConv {
        c,
        s: backend,
        cp: 46000,
        sp: 8080,
    };
    b.tag("syn", C, &t.seg(true, tf::SYN, 1, 0, 0));
    b.tag("synack", S, &tb.seg(false, tf::SYN | tf::ACK, 7, 2, 0));
    b.tag("ack", C, &t.seg(true, tf::ACK, 2, 8, 0));
    b.send(C, &t.seg(true, tf::PSH | tf::ACK, 2, 8, 33));
    b.send(S, &tb.seg(false, tf::PSH | tf::ACK, 8, 35, 33));
    b.comment("UDP to the VIP");
    b.tag("udp", C, &udp_frame(c, vip, 7000, 53, 9));
    b.tag("udp_reply", S, &udp_frame(backend, c, 8080, 7000, 9));
    b.build(
        "nat_dnat_port",
        nat_pipeline("nat(dst=10.0.0.2:8080)", 11),
        Check::Frames,
    )
}

fn script_snat_ipv6() -> Script {
    let mut b = Builder::default();
    let (c, s, n) = (v6(1), v6(2), v6(0x64));
    b.comment("IPv6 SNAT to fd00::64");
    b.tag("udp6", C, &udp_frame(c, s, 5000, 53, 12));
    b.tag("udp6_reply", S, &udp_frame(s, n, 53, 5000, 12));
    b.build(
        "nat_snat_ipv6",
        nat_pipeline("nat(src=fd00::64)", 2),
        Check::Frames,
    )
}

fn script_nat_range() -> Script {
    let mut b = Builder::default();
    let (c, s) = (v4(1), v4(2));
    b.comment("8 UDP connections into a 2-address x 3-port SNAT range (6 slots)");
    for i in 0..8u16 {
        b.tag(&format!("conn{i}"), C, &udp_frame(c, s, 1000 + i, 2000, 8));
    }
    b.build(
        "nat_range_exhaustion",
        nat_pipeline("nat(src=10.0.0.100-10.0.0.101:1000-1002)", 0),
        Check::NatRange {
            ips: (100, 101),
            ports: (1000, 1002),
        },
    )
}

/// One endpoint's view of a random TCP connection.
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    nxt: u32,
    started: bool,
    last_len: u32,
}

/// A seeded random interleaving of 2–4 connections (TCP, UDP, ICMP echo; a quarter IPv6),
/// both directions, in/out-of-window and retransmitted sequence numbers, random flags. With
/// `snat`, everything is IPv4 through `nat(src=10.0.0.100)` (replies go to 10.0.0.100) and
/// frames are compared byte for byte.
fn script_random(seed: u64, commit: Commit, steps: usize, snat: bool) -> Script {
    let mut rng = TestRng::new(seed);
    let mut b = Builder::default();
    b.comment(&format!("random interleaving, seed {seed}"));
    let nat_ip = v4(100);
    #[derive(Debug, Clone, Copy)]
    enum Kind {
        Tcp(TcpConv),
        Udp(Ip, Ip, u16, u16),
        Icmp(Ip, Ip, u16),
    }
    let n = rng.range(2, 4) as usize;
    let mut conns = Vec::new();
    for i in 0..n {
        let v6_ = rng.chance(1, 4) && !snat;
        let (c, s) = if v6_ {
            (v6(1 + i as u8), v6(50))
        } else {
            (v4(1 + i as u8), v4(50))
        };
        let k = match rng.weighted(&[6, 3, 1]).unwrap_or(0) {
            0 => Kind::Tcp(TcpConv {
                c,
                s,
                cp: 30000 + rng.below(1000) as u16,
                sp: 80,
            }),
            1 => Kind::Udp(c, s, 20000 + rng.below(1000) as u16, 53),
            _ => Kind::Icmp(c, s, rng.next_u16()),
        };
        let isn = [rng.next_u32(), rng.next_u32()];
        conns.push((
            k,
            [
                Side {
                    nxt: isn[0],
                    ..Side::default()
                },
                Side {
                    nxt: isn[1],
                    ..Side::default()
                },
            ],
            0u16,
        ));
    }
    for _ in 0..steps {
        let i = rng.index(conns.len());
        let from_client = rng.chance(3, 5);
        let port = if from_client { C } else { S };
        let (kind, sides, icmp_seq) = &mut conns[i];
        match *kind {
            Kind::Udp(c, s, cp, sp) => {
                let c = if snat && !from_client { nat_ip } else { c };
                let f = if from_client {
                    udp_frame(c, s, cp, sp, rng.index(30))
                } else {
                    udp_frame(s, c, sp, cp, rng.index(30))
                };
                b.send(port, &f);
            }
            Kind::Icmp(c, s, id) => {
                let c = if snat && !from_client { nat_ip } else { c };
                *icmp_seq += u16::from(from_client);
                let f = if from_client {
                    echo(c, s, id, *icmp_seq, true)
                } else {
                    echo(s, c, id, *icmp_seq, false)
                };
                b.send(port, &f);
            }
            Kind::Tcp(t) => {
                let t = if snat && !from_client {
                    TcpConv { c: nat_ip, ..t }
                } else {
                    t
                };
                let (me, peer) = if from_client { (0, 1) } else { (1, 0) };
                let flag_sets = [
                    tf::SYN,
                    tf::SYN | tf::ACK,
                    tf::ACK,
                    tf::PSH | tf::ACK,
                    tf::FIN | tf::ACK,
                    tf::RST,
                    tf::RST | tf::ACK,
                ];
                let flags = if !sides[me].started {
                    if from_client {
                        tf::SYN
                    } else {
                        tf::SYN | tf::ACK
                    }
                } else if rng.chance(1, 12) {
                    rng.next_u16() & 0x3f
                } else {
                    let w = [1, 1, 6, 8, 2, 1, 1];
                    flag_sets[rng.weighted(&w).unwrap_or(2)]
                };
                let len = if flags & (tf::SYN | tf::RST) != 0 || rng.chance(1, 3) {
                    0
                } else {
                    rng.range(1, 400) as u32
                };
                let choice = rng.weighted(&[12, 2, 2]).unwrap_or(0);
                let seq = match choice {
                    0 => sides[me].nxt,
                    1 => sides[me].nxt.wrapping_sub(sides[me].last_len), // retransmit
                    _ => sides[me]
                        .nxt
                        .wrapping_add(rng.range(1 << 20, 1 << 31) as u32),
                };
                let ack = if flags & tf::ACK != 0 {
                    if rng.chance(1, 10) {
                        sides[peer].nxt.wrapping_add(rng.next_u32() >> 4)
                    } else {
                        sides[peer].nxt
                    }
                } else {
                    0
                };
                b.send(port, &t.seg(from_client, flags, seq, ack, len as usize));
                if choice == 0 {
                    let adv =
                        len + u32::from(flags & tf::SYN != 0) + u32::from(flags & tf::FIN != 0);
                    sides[me].nxt = sides[me].nxt.wrapping_add(adv);
                    sides[me].last_len = adv;
                }
                sides[me].started = true;
            }
        }
    }
    if snat {
        b.build(
            &format!("random_snat_seed{seed}"),
            nat_pipeline("nat(src=10.0.0.100)", 0),
            Check::Frames,
        )
    } else {
        b.build(
            &format!("random_seed{seed}"),
            Pipeline::decoder(commit),
            Check::Ports,
        )
    }
}

/// Every script of the corpus, in a fixed order.
pub fn scripts() -> Vec<Script> {
    let mut v = vec![
        script_firewall(),
        script_tcp_full(Commit::All, "tcp_handshake_data_close"),
        script_tcp_full(Commit::NewFromClient, "tcp_handshake_commit_new_only"),
        script_tcp_window(),
        script_tcp_closed_port(),
        script_tcp_orig_before_reply(),
        script_tcp_midstream(),
        script_tcp_timewait_reuse(),
        script_tcp_bad(),
        script_udp(),
        script_udp_new_from_client(),
        script_icmp(),
        script_icmp_related(),
        script_ipv6(),
        script_fragments(),
        script_fragments_reassembled(),
        script_zones(),
        script_zones_nonzero_new_only(),
        script_mark_label(),
        script_mark_values(),
        script_force_commit(),
        script_never_commit(),
        script_snat(),
        script_dnat(),
        script_snat_ipv6(),
        script_nat_range(),
    ];
    v.extend(scripts_tcp_states());
    for seed in 1..=6u64 {
        let commit = if seed % 2 == 0 {
            Commit::NewFromClient
        } else {
            Commit::All
        };
        v.push(script_random(seed, commit, 40, false));
    }
    for seed in 101..=102u64 {
        v.push(script_random(seed, Commit::All, 30, true));
    }
    v
}

/// The script named `name`.
pub fn script(name: &str) -> Option<Script> {
    scripts().into_iter().find(|s| s.name == name)
}

/// Path of the recorded answers file.
pub fn answers_path() -> PathBuf {
    crate::golden::data_dir().join("ct_oracle_answers.txt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_receive_output_shapes() {
        let out =
            "3 -> 8,12\n  8: 0011\n  12: 0022\n4 -> drop\n\nudp,orig=(a),reply=(b)\ntcp,orig=(c)\n";
        let a = parse_receive_output(out).unwrap();
        assert_eq!(a.frames.len(), 2);
        assert_eq!(a.frames[0].ports, vec![8, 12]);
        assert_eq!(
            a.frames[0].out,
            vec![(8, vec![0, 0x11]), (12, vec![0, 0x22])]
        );
        assert_eq!(a.frames[1].ports, Vec::<u32>::new());
        assert_eq!(a.dump, vec!["tcp,orig=(c)", "udp,orig=(a),reply=(b)"]);
        assert!(parse_receive_output("  1: 00\n").is_err());
    }

    #[test]
    fn scripts_parse_and_are_deterministic() {
        let a = scripts();
        let b = scripts();
        let mut names = BTreeSet::new();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.text, y.text);
            assert!(names.insert(x.name.clone()), "duplicate {}", x.name);
            let f = x.frames().unwrap();
            assert!(!f.is_empty());
            for (_, p, bytes) in f {
                assert!((1..=N_PORTS).contains(&p));
                assert!(!describe(&bytes).is_empty());
            }
        }
    }

    #[test]
    fn describe_examples() {
        let t = conv4();
        assert_eq!(
            describe(&t.seg(true, tf::SYN, 5, 0, 0)),
            "tcp 10.0.0.1:40000>10.0.0.2:80 [S] seq=5 ack=0 win=65535 len=0"
        );
        let u = udp_frame(v4(1), v4(2), 1, 2, 3);
        assert_eq!(describe(&u), "udp 10.0.0.1:1>10.0.0.2:2 len=3");
        assert!(describe(&icmp_error(v4(2), v4(1), &u, 8)).contains("inner=[udp 10.0.0.1:1>"));
    }

    #[test]
    fn compare_reports_differences() {
        let script = script("udp_basic").unwrap();
        let frames = script.frames().unwrap();
        let ovs = Answers {
            frames: frames
                .iter()
                .map(|(l, _, b)| FrameAnswer {
                    line: *l,
                    ports: vec![ports::NEW],
                    out: vec![(ports::NEW, b.clone())],
                })
                .collect(),
            dump: vec!["udp,orig=(x)".into()],
        };
        let same = parse_receive_output(&format_receive_output(&ovs)).unwrap();
        assert_eq!(same, ovs);
        assert!(compare(&script, &ovs, &same).is_empty());
        let mut ours = same.clone();
        ours.frames[1].ports = vec![ports::EST];
        ours.dump = vec!["udp,orig=(y)".into()];
        let d = compare(&script, &ovs, &ours);
        assert_eq!(d.len(), 3, "{d:#?}");
        assert!(d[0].starts_with("udp_basic line 3 (in_port 1: udp 10.0.0.1:5000>10.0.0.2:53"));
        assert!(
            d[0].contains("OVS  -> 8(new)\n    ours -> 10(est)"),
            "{}",
            d[0]
        );
        assert!(d[1].contains("only in OVS:  udp,orig=(x)"));
        assert!(d[2].contains("only in ours: udp,orig=(y)"));
        // Frames are compared byte for byte only where the script asks for it.
        let mut nat = script.clone();
        nat.check = Check::Frames;
        let mut ours = same.clone();
        ours.frames[0].out[0].1[20] ^= 1;
        assert!(compare(&script, &ovs, &ours).is_empty());
        let d = compare(&nat, &ovs, &ours);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert!(d[0].contains("first at byte 20"), "{}", d[0]);
    }

    #[test]
    fn mask_and_range_checks() {
        let a = Answers {
            frames: vec![],
            dump: vec![
                "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2),reply=(src=10.0.0.2,dst=10.0.0.100,sport=2,dport=1000),zone=0".into(),
                "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=2,dport=2),reply=(src=10.0.0.2,dst=10.0.0.100,sport=2,dport=1000)".into(),
            ],
        };
        let v = nat_range_violations(&a, (100, 101), (1000, 1002));
        assert_eq!(v.len(), 1, "{v:?}");
    }
}
