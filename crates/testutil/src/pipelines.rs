//! Random OpenFlow pipelines and packets for the pipeline differential test, the OVS helpers to
//! run them, and the golden file recorded from OVS 3.1 (`data/pipelines_golden.tsv`).
//!
//! - [`random_pipeline`]: 1–8 tables of overlapping rules (unique priority per table) matching
//!   every field kind with prerequisites respected; actions `output:N`, `drop`, `resubmit(,T)`
//!   (forward; backward/same table in "loop" pipelines), `goto_table`, `set_field`/`load`/`move`
//!   into registers, metadata, `pkt_mark` and headers, `mod_dl_*`, `mod_nw_*`, `mod_tp_*`,
//!   `mod_nw_tos`, `dec_ttl`, `push_vlan`/`mod_vlan_vid`/`mod_vlan_pcp`/`strip_vlan`, `NORMAL`
//!   (with access/trunk/native port configs), `FLOOD`, `ALL`, `IN_PORT`, `LOCAL`, a nonexistent
//!   port, `ct(commit?,zone=N,table=T)` plus `ct_state` matches in `T`.
//! - [`random_packets_for`]: packets drawn from the same value pools as the rules.
//! - `impl OvsSandbox`: [`configure_ports`](OvsSandbox::configure_ports),
//!   [`fdb_flush`](OvsSandbox::fdb_flush), [`load_pipeline`](OvsSandbox::load_pipeline),
//!   [`trace_full`](OvsSandbox::trace_full) / [`trace_batch`](OvsSandbox::trace_batch) (one
//!   `ovs-appctl` per trace, ~7 ms; a pipeline load ~100 ms; the whole golden ~80–100 s).
//! - Golden: [`golden_pipelines`] (seed [`PIPELINES_GOLDEN_SEED`], 600 pipelines × 5 packets),
//!   [`pipelines_golden`] reads `data/pipelines_golden.tsv`; regenerate with
//!   `cargo test -p testutil -- --ignored regen_pipelines`.
//! - Comparison helpers: [`canonical_datapath_actions`], [`normalize_recirc_ids`].
//!
//! Invariants: generation is a pure function of the [`TestRng`] state; every generated flow is
//! accepted by OVS 3.1 when added with [`flow_protocol`] (checked by the regen test); readers
//! never panic on a malformed file except [`pipelines_golden`], which is documented to.
//!
//! # What OVS 3.1 does (observed; matters for a translator that must match it exactly)
//!
//! Recording setup: dummy datapath, ports `p1..p4` = OpenFlow ports 1..4 = datapath ports 1..4,
//! bridge-internal port `LOCAL` = OpenFlow 65534 = **datapath port 100**, `fail-mode=secure`
//! (table miss = drop in every table), `vlan-limit=2`. Per pipeline: `del-flows`, add flows,
//! set port VLAN configs, `fdb/flush`, then trace the 5 packets in order.
//!
//! **State.** `ofproto/trace` with a packet *does* MAC-learn (NORMAL), so traces of one pipeline
//! depend on the earlier ones (FDB flushed per pipeline). Recirculation ids come from a
//! daemon-global counter (`recirc(0x1)`, `0x2`, ... never reset by `del-flows`): compare them
//! with [`normalize_recirc_ids`].
//!
//! **Megaflow format.** Field order: `pkt_mark, recirc_id, ct_state, ct_zone, eth, <proto
//! shorthand>, reg0..7, metadata, in_port, vlan (vlan_tci=… | dl_vlan,dl_vlan_pcp[,dl_vlan1,
//! dl_vlan_pcp1]), dl_src, dl_dst, [dl_type=0x…], nw_src|ipv6_src|arp_spa, nw_dst|ipv6_dst|
//! arp_tpa, [arp_op, arp_sha, arp_tha], [nw_proto=N when no shorthand], nw_tos, nw_ecn, nw_ttl,
//! nw_frag, tp_src, tp_dst, tcp_flags`. Masks print as `/N` prefixes when contiguous, else as
//! dotted/colon masks (`nw_src=192.168.1.0/255.255.123.0`, `dl_dst=00:00:00:97:d6:af/
//! 01:00:00:ff:ff:ff`, `reg1=0/0x7e40d5ab`, `tp_src=0x0/0xc000`, `tcp_flags=+syn-ack` i.e. flags
//! over the mask); values are ANDed with masks; `ipv6_dst=a5bf:…::/64` compressed.
//! - Always exact: `recirc_id`, `eth`, `in_port`, the ethertype (`dl_type`, printed via the
//!   shorthand `ip`/`ipv6`/`arp` or `dl_type=0x88cc`), and for IP `nw_frag` (printed
//!   `nw_frag=no`). VLAN *presence* is implicitly exact (the datapath key carries the 0x8100
//!   ethertype) but is not printed; `vlan_tci=0x0000` / `dl_vlan=…` appear only when TCI bits
//!   were consulted.
//! - Only the bits a lookup consulted appear, staged per subtable and with prefix tries
//!   (`nw_src=0.0.0.0/3`, `ipv6_dst=…/64`); registers/metadata/pkt_mark consulted while still 0
//!   print as `reg3=0`, `metadata=0`, `pkt_mark=0/0xff` (pkt_mark printed first of all).
//! - `nw_proto` shows as the shorthand (`udp`, `tcp6`) whenever it was un-wildcarded: by a match
//!   or by committing an L3/L4 `set` (e.g. `mod_nw_src` gives `udp,…,nw_src=<orig>` ).
//! - A field written by `set_field`/`mod_*`/`dec_ttl` is un-wildcarded with its *original*
//!   value even when no datapath action results (`mod_dl_dst` then no output: `dl_dst=<orig>`,
//!   actions `drop`). `dec_ttl` gives `nw_ttl=64`; `mod_tp_dst` gives `tp_dst=<orig>`.
//! - `NORMAL` un-wildcards `dl_src`, `dl_dst` (and VLAN TCI with VLAN port configs); learning
//!   moves do not show in the megaflow.
//! - Recirculated stages: `recirc_id=0x<id>,ct_state=<only consulted bits, e.g. -est+trk>,eth,
//!   ip,in_port=…,nw_frag=no`.
//!
//! **Datapath actions.**
//! - Nothing output: `drop`. Outputs are datapath port numbers; `LOCAL` is `100`.
//! - Header changes are *lazy*: accumulated and committed as `set(...)` only just before an
//!   output/`ct`/`recirc` that needs them, one `set` per header with all changed fields
//!   (`set(eth(src=…,dst=…))`), headers in order eth, ipv4/ipv6, tcp/udp: `set(ipv4(ttl=63)),
//!   set(udp(dst=99)),2`. Changes after the last output vanish. `set(ipv4(src=1.2.3.4)),2,
//!   set(eth(dst=…)),3`: each output commits only what changed since the previous commit.
//! - VLAN: `mod_vlan_vid:7` on untagged ⇒ `push_vlan(vid=7,pcp=0)`; on tagged ⇒
//!   `pop_vlan,push_vlan(vid=7,pcp=<old pcp>)` (never `set(vlan)`; megaflow gets the full TCI
//!   `dl_vlan=5,dl_vlan_pcp=0`); `mod_vlan_pcp:3` on untagged ⇒ `push_vlan(vid=0,pcp=3)`;
//!   `strip_vlan` on untagged ⇒ nothing; double-tagged edits pop both and re-push both:
//!   `pop_vlan,pop_vlan,push_vlan(tpid=0x88a8,vid=10,pcp=0),push_vlan(vid=1137,pcp=0)`
//!   (`tpid=` printed only when not 0x8100).
//! - `output:<in_port>` is skipped (trace note `>> skipping output to input port`); only
//!   `IN_PORT` sends back: `actions=output:1,output:2,IN_PORT` from port 1 ⇒ `2,1`. A nonexistent
//!   port is skipped (`>> Nonexistent output port`).
//! - `FLOOD`/`ALL` and `NORMAL` flooding output to every port but the input, `LOCAL` (100)
//!   included, e.g. `100,4,2,3`; the order is an internal hash/list order that **changes
//!   between vswitchd runs** for NORMAL — compare with [`canonical_datapath_actions`]. NORMAL
//!   with VLAN port configs interleaves `push_vlan`/`pop_vlan` per output port. A learned
//!   destination ⇒ one port. Repeated NORMAL/FLOOD in a pipeline repeats all outputs.
//! - `ct(commit,zone=5,table=3)` ⇒ `ct(commit,zone=5),recirc(0x<id>)`; zone 0 is omitted
//!   (`ct(commit)`, bare `ct`); without `table=` no `recirc`. Pending `set`s are committed before
//!   `ct`. The trace follows the recirculation itself (a second `Flow:` with
//!   `recirc_id=0x<id>,ct_state=new|trk,ct_zone=5,…`, registers carried over) — recorded as
//!   stage 1 in [`PipelineTrace::stages`]. After `ct`, the original pipeline continues untracked.
//! - Resubmit loops: `>>>> over max translation depth 64 <<<<` and
//!   `Translation failed (Recursion too deep), packet is dropped.` — the **whole** action list
//!   becomes `drop`, even outputs emitted before the error; the megaflow is still printed.
//! - NORMAL VLAN admission drops are reported as errors too: `>>>> dropping VLAN 10 tagged
//!   packet received on port p2 configured as VLAN 20 access port <<<<`, `>>>> dropping VLAN 10
//!   packet received on port p1 not configured for trunking VLAN 10 <<<<` (other actions of the
//!   pipeline still happen).
//!
//! **Flow mods.** Flows containing `goto_table` or `push_vlan` are added with `-O OpenFlow13`,
//! others with `-O OpenFlow10` ([`flow_protocol`]): OpenFlow 1.1+ refuses `strip_vlan` without a
//! VLAN match, `mod_nw_*` without `ip`, `dec_ttl` without `ip`/`ipv6`, a second pop, pushes that
//! could exceed two tags (`OFPBAC_BAD_TAG`), and turns `mod_vlan_vid` into `push_vlan` +
//! `set_field`. `ct` needs an `ip`/`ipv6` match in every protocol (`OFPBAC_MATCH_INCONSISTENT`).

use std::fmt;
use std::fs;
use std::path::PathBuf;

use crate::golden::{data_dir, escape, unescape};
use crate::ovs::{OvsError, OvsSandbox};
use crate::packets::{
    self, Ipv4Spec, Ipv6Spec, Pseudo, TcpSpec, ethertype, from_hex, ipproto, to_hex,
};
use crate::rng::TestRng;

// ---------------------------------------------------------------------------------------------
// Pipelines.

/// Knobs of [`random_pipeline`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineMix {
    /// Number of switch ports `1..=n_ports` (the sandbox must have exactly these ports, since
    /// `NORMAL`, `FLOOD` and `ALL` output to every port).
    pub n_ports: u32,
    /// Tables used are `0..n` with `n` uniform in `1..=max_tables` (at most 254).
    pub max_tables: u32,
    /// Rules per table are uniform in `1..=max_rules_per_table`.
    pub max_rules_per_table: u32,
    /// Per-mille of pipelines using `ct(...)` (and `ct_state` matches in its target tables).
    pub ct_permille: u32,
    /// Per-mille of pipelines using `NORMAL`.
    pub normal_permille: u32,
    /// Per-mille of pipelines whose `NORMAL` ports get VLAN configurations.
    pub vlan_ports_permille: u32,
    /// Per-mille of pipelines allowed to resubmit to the same or a lower table (loops).
    pub loop_permille: u32,
}

impl Default for PipelineMix {
    fn default() -> PipelineMix {
        PipelineMix {
            n_ports: 4,
            max_tables: 8,
            max_rules_per_table: 6,
            ct_permille: 200,
            normal_permille: 350,
            vlan_ports_permille: 500,
            loop_permille: 80,
        }
    }
}

/// `vlan_mode` of a port (`ovs-vsctl set port pN vlan_mode=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VlanMode {
    /// Untagged access port in VLAN `tag`.
    Access,
    /// Trunk carrying `trunks` (all VLANs when empty).
    Trunk,
    /// Trunk whose untagged frames belong to `tag`, sent tagged.
    NativeTagged,
    /// Trunk whose untagged frames belong to `tag`, sent untagged.
    NativeUntagged,
}

impl VlanMode {
    /// The `ovs-vsctl` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VlanMode::Access => "access",
            VlanMode::Trunk => "trunk",
            VlanMode::NativeTagged => "native-tagged",
            VlanMode::NativeUntagged => "native-untagged",
        }
    }

    fn parse(s: &str) -> Option<VlanMode> {
        Some(match s {
            "access" => VlanMode::Access,
            "trunk" => VlanMode::Trunk,
            "native-tagged" => VlanMode::NativeTagged,
            "native-untagged" => VlanMode::NativeUntagged,
            _ => return None,
        })
    }
}

/// VLAN configuration of one port, as seen by `NORMAL`. The default (all `None`/empty) is
/// OVS's default: a trunk carrying every VLAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCfg {
    /// OpenFlow (and datapath) port number; the port is named `p<port>`.
    pub port: u32,
    /// `vlan_mode`, `None` for OVS's default.
    pub vlan_mode: Option<VlanMode>,
    /// `tag` (access VLAN / native VLAN).
    pub tag: Option<u16>,
    /// `trunks` (empty: all VLANs).
    pub trunks: Vec<u16>,
}

impl PortCfg {
    /// OVS's default configuration for port `port`.
    pub fn default_for(port: u32) -> PortCfg {
        PortCfg {
            port,
            vlan_mode: None,
            tag: None,
            trunks: Vec::new(),
        }
    }

    /// Text form used in the golden file: `1` (default) or `2:vlan_mode=access:tag=10` or
    /// `3:vlan_mode=trunk:trunks=10,20` (keys in this order, each optional).
    pub fn to_text(&self) -> String {
        let mut s = self.port.to_string();
        if let Some(m) = self.vlan_mode {
            s.push_str(":vlan_mode=");
            s.push_str(m.as_str());
        }
        if let Some(t) = self.tag {
            s.push_str(&format!(":tag={t}"));
        }
        if !self.trunks.is_empty() {
            let t: Vec<String> = self.trunks.iter().map(u16::to_string).collect();
            s.push_str(&format!(":trunks={}", t.join(",")));
        }
        s
    }

    /// Parses [`to_text`](Self::to_text).
    pub fn from_text(text: &str) -> Result<PortCfg, String> {
        let mut parts = text.split(':');
        let port = parts
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .ok_or_else(|| format!("bad port config {text:?}"))?;
        let mut cfg = PortCfg::default_for(port);
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("bad port config item {kv:?} in {text:?}"))?;
            match k {
                "vlan_mode" => {
                    cfg.vlan_mode =
                        Some(VlanMode::parse(v).ok_or_else(|| format!("bad vlan_mode {v:?}"))?)
                }
                "tag" => cfg.tag = Some(v.parse().map_err(|_| format!("bad tag {v:?}"))?),
                "trunks" => {
                    cfg.trunks = v
                        .split(',')
                        .map(|t| t.parse().map_err(|_| format!("bad trunk {t:?}")))
                        .collect::<Result<_, _>>()?
                }
                _ => return Err(format!("unknown port config key {k:?} in {text:?}")),
            }
        }
        Ok(cfg)
    }

    /// `ovs-vsctl` arguments (without the leading `--`) that clear then set this port's VLAN
    /// configuration.
    pub fn vsctl_args(&self) -> Vec<String> {
        let name = format!("p{}", self.port);
        let mut v = vec![
            "clear".to_string(),
            "port".to_string(),
            name.clone(),
            "tag".to_string(),
            "trunks".to_string(),
            "vlan_mode".to_string(),
        ];
        let mut set = Vec::new();
        if let Some(m) = self.vlan_mode {
            set.push(format!("vlan_mode={}", m.as_str()));
        }
        if let Some(t) = self.tag {
            set.push(format!("tag={t}"));
        }
        if !self.trunks.is_empty() {
            let t: Vec<String> = self.trunks.iter().map(u16::to_string).collect();
            set.push(format!("trunks={}", t.join(",")));
        }
        if !set.is_empty() {
            v.extend([
                "--".to_string(),
                "set".to_string(),
                "port".to_string(),
                name,
            ]);
            v.extend(set);
        }
        v
    }
}

/// The values a pipeline's rules were drawn from; [`random_packets_for`] draws from them too,
/// so packets hit the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineValues {
    /// Unicast MAC addresses.
    pub macs: Vec<[u8; 6]>,
    /// IPv4 addresses.
    pub ipv4: Vec<[u8; 4]>,
    /// IPv6 addresses.
    pub ipv6: Vec<[u8; 16]>,
    /// TCP/UDP ports.
    pub l4_ports: Vec<u16>,
    /// VLAN ids (1..=4094).
    pub vlans: Vec<u16>,
    /// Register / metadata values.
    pub regs: Vec<u32>,
}

/// A random OpenFlow pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    /// `ovs-ofctl add-flow` lines (each with `table=` and `priority=`; priorities are unique
    /// within a table, so the winner of overlapping rules never depends on insertion order).
    /// Install each with the protocol [`flow_protocol`] names.
    pub flows: Vec<String>,
    /// One configuration per port `1..=n_ports`.
    pub ports: Vec<PortCfg>,
    /// Short summary, e.g. `tables=3 rules=11 normal vlan-ports ct loop`.
    pub description: String,
    /// The pools the rules were drawn from.
    pub values: PipelineValues,
}

/// The `ovs-ofctl -O` protocol a generated flow must be added with: `OpenFlow13` for flows
/// using `goto_table` or `push_vlan` (OpenFlow 1.1+ only), `OpenFlow10` for all others
/// (OpenFlow 1.0 + NXM accepts `strip_vlan`, `mod_vlan_vid`, `mod_nw_*`, `dec_ttl` without
/// match prerequisites, which OpenFlow 1.3 refuses, and keeps `mod_vlan_vid` meaning "modify or
/// push", where OpenFlow 1.3 would turn it into `push_vlan` + `set_field`).
pub fn flow_protocol(flow: &str) -> &'static str {
    if flow.contains("goto_table") || flow.contains("push_vlan") {
        "OpenFlow13"
    } else {
        "OpenFlow10"
    }
}

fn mac_str(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

fn ip4_str(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

fn ip6_str(a: &[u8; 16]) -> String {
    let w: Vec<String> = a
        .chunks(2)
        .map(|c| format!("{:x}", u16::from_be_bytes([c[0], c[1]])))
        .collect();
    w.join(":")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L3 {
    Any,
    Ip4,
    Ip6,
    Arp,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L4 {
    Any,
    Tcp,
    Udp,
    Icmp,
}

/// What a rule's match guarantees about the packet (for action prerequisites).
#[derive(Debug, Clone, Copy)]
struct MatchInfo {
    l3: L3,
    l4: L4,
    tagged: bool,
}

struct Gen<'a> {
    rng: &'a mut TestRng,
    mix: &'a PipelineMix,
    v: PipelineValues,
    n_tables: u32,
    ct: bool,
    normal: bool,
    looping: bool,
    /// Tables that some `ct(table=T)` targets.
    ct_tables: Vec<u32>,
}

fn pool_values(rng: &mut TestRng) -> PipelineValues {
    let mut macs = Vec::new();
    while macs.len() < 4 {
        let mut m = [0u8; 6];
        for b in &mut m {
            *b = rng.next_u8();
        }
        m[0] &= 0xfe; // unicast
        if rng.chance(1, 2) {
            m[..3].copy_from_slice(&[0x00, 0x16, 0x3e]);
        }
        if !macs.contains(&m) {
            macs.push(m);
        }
    }
    let mut ipv4 = Vec::new();
    while ipv4.len() < 4 {
        let a = match rng.below(3) {
            0 => [10, rng.next_u8() & 3, rng.next_u8() & 7, rng.next_u8()],
            1 => [192, 168, rng.next_u8() & 3, rng.next_u8()],
            _ => [rng.next_u8(), rng.next_u8(), rng.next_u8(), rng.next_u8()],
        };
        if !ipv4.contains(&a) {
            ipv4.push(a);
        }
    }
    let mut ipv6 = Vec::new();
    while ipv6.len() < 3 {
        let mut a = [0u8; 16];
        match rng.below(3) {
            0 => {
                a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                a[7] = rng.next_u8() & 3;
                a[14] = rng.next_u8() & 1;
                a[15] = rng.next_u8();
            }
            1 => {
                a[..2].copy_from_slice(&[0xfe, 0x80]);
                for b in &mut a[8..] {
                    *b = rng.next_u8();
                }
            }
            _ => {
                for b in &mut a {
                    *b = rng.next_u8();
                }
            }
        }
        if !ipv6.contains(&a) {
            ipv6.push(a);
        }
    }
    let mut l4_ports = Vec::new();
    while l4_ports.len() < 4 {
        let p = if rng.chance(1, 2) {
            *rng.pick(&[22u16, 53, 80, 443, 8080, 4789, 67])
                .unwrap_or(&80)
        } else {
            rng.range(1, 65535) as u16
        };
        if !l4_ports.contains(&p) {
            l4_ports.push(p);
        }
    }
    let mut vlans = Vec::new();
    while vlans.len() < 3 {
        let v = if rng.chance(2, 3) {
            *rng.pick(&[10u16, 20, 30, 100, 4094]).unwrap_or(&10)
        } else {
            rng.range(1, 4094) as u16
        };
        if !vlans.contains(&v) {
            vlans.push(v);
        }
    }
    let mut regs = Vec::new();
    while regs.len() < 4 {
        let r = if rng.chance(2, 3) {
            rng.range(1, 16) as u32
        } else {
            rng.next_u32()
        };
        if !regs.contains(&r) {
            regs.push(r);
        }
    }
    PipelineValues {
        macs,
        ipv4,
        ipv6,
        l4_ports,
        vlans,
        regs,
    }
}

impl Gen<'_> {
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.index(items.len())]
    }

    fn mac(&mut self) -> [u8; 6] {
        if self.rng.chance(4, 5) {
            let m = self.v.macs.clone();
            self.pick(&m)
        } else {
            let mut m = [0u8; 6];
            for b in &mut m {
                *b = self.rng.next_u8();
            }
            m
        }
    }

    fn mac_match(&mut self) -> String {
        let m = self.mac();
        match self.rng.below(6) {
            0 => "01:00:00:00:00:00/01:00:00:00:00:00".to_string(),
            1 => "00:00:00:00:00:00/01:00:00:00:00:00".to_string(),
            2 => {
                let mask = [0xff, 0xff, 0xff, 0, 0, 0];
                let v: Vec<u8> = m.iter().zip(mask).map(|(a, b)| a & b).collect();
                format!(
                    "{}/ff:ff:ff:00:00:00",
                    mac_str(&[v[0], v[1], v[2], v[3], v[4], v[5]])
                )
            }
            3 => {
                let mut mask = [0u8; 6];
                for b in &mut mask {
                    *b = self.rng.next_u8();
                }
                let mut v = m;
                for (a, b) in v.iter_mut().zip(mask) {
                    *a &= b;
                }
                format!("{}/{}", mac_str(&v), mac_str(&mask))
            }
            _ => mac_str(&m),
        }
    }

    fn ip4(&mut self) -> [u8; 4] {
        if self.rng.chance(4, 5) {
            let v = self.v.ipv4.clone();
            self.pick(&v)
        } else {
            [
                self.rng.next_u8(),
                self.rng.next_u8(),
                self.rng.next_u8(),
                self.rng.next_u8(),
            ]
        }
    }

    fn ip4_match(&mut self) -> String {
        let a = u32::from_be_bytes(self.ip4());
        let mask: u32 = match self.rng.below(6) {
            0 | 1 => u32::MAX,
            2 => 0xffff_ff00,
            3 => {
                let len = self.rng.range(0, 32) as u32;
                if len == 0 { 0 } else { u32::MAX << (32 - len) }
            }
            4 => 0xffff_0000 | u32::from(self.rng.next_u8()) << 8,
            _ => self.rng.next_u32(),
        };
        let v = a & mask;
        if mask == u32::MAX {
            ip4_str(v.to_be_bytes())
        } else if mask.leading_ones() + mask.trailing_zeros() == 32 {
            format!("{}/{}", ip4_str(v.to_be_bytes()), mask.leading_ones())
        } else {
            format!(
                "{}/{}",
                ip4_str(v.to_be_bytes()),
                ip4_str(mask.to_be_bytes())
            )
        }
    }

    fn ip6(&mut self) -> [u8; 16] {
        if self.rng.chance(4, 5) {
            let v = self.v.ipv6.clone();
            self.pick(&v)
        } else {
            let mut a = [0u8; 16];
            for b in &mut a {
                *b = self.rng.next_u8();
            }
            a
        }
    }

    fn ip6_match(&mut self) -> String {
        let a = u128::from_be_bytes(self.ip6());
        let len: u32 = match self.rng.below(5) {
            0 | 1 => 128,
            2 => 64,
            3 => self.pick(&[48, 56, 96, 120, 127]),
            _ => self.rng.range(0, 128) as u32,
        };
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        let v = (a & mask).to_be_bytes();
        if len == 128 {
            ip6_str(&v)
        } else {
            format!("{}/{len}", ip6_str(&v))
        }
    }

    fn port(&mut self) -> u16 {
        if self.rng.chance(4, 5) {
            let v = self.v.l4_ports.clone();
            self.pick(&v)
        } else {
            self.rng.next_u16()
        }
    }

    fn port_match(&mut self) -> String {
        let p = self.port();
        if self.rng.chance(1, 3) {
            let mask = match self.rng.below(4) {
                0 => 0xfff0,
                1 => 0xff00,
                2 => 0x8000,
                _ => self.rng.next_u16(),
            };
            format!("0x{:x}/0x{mask:x}", p & mask)
        } else {
            p.to_string()
        }
    }

    fn reg_val(&mut self) -> u32 {
        if self.rng.chance(4, 5) {
            let v = self.v.regs.clone();
            self.pick(&v)
        } else {
            self.rng.next_u32()
        }
    }

    fn masked32(&mut self, v: u32) -> String {
        if self.rng.chance(1, 2) {
            format!("0x{v:x}")
        } else {
            let mask = match self.rng.below(3) {
                0 => 0xff,
                1 => 0xffff,
                _ => self.rng.next_u32() | 1,
            };
            format!("0x{:x}/0x{mask:x}", v & mask)
        }
    }

    fn vlan(&mut self) -> u16 {
        if self.rng.chance(5, 6) {
            let v = self.v.vlans.clone();
            self.pick(&v)
        } else {
            self.rng.range(1, 4094) as u16
        }
    }

    fn out_port(&mut self) -> String {
        match self.rng.below(40) {
            0 => "LOCAL".to_string(),
            1 => "output:9".to_string(),
            _ => format!("output:{}", self.rng.range(1, u64::from(self.mix.n_ports))),
        }
    }

    /// A match for a rule in `table`, and what it guarantees.
    fn gen_match(&mut self, table: u32) -> (Vec<String>, MatchInfo) {
        let mut m: Vec<String> = Vec::new();
        let l3 = match self.rng.weighted(&[40, 34, 16, 12, 4]) {
            Some(1) => L3::Ip4,
            Some(2) => L3::Ip6,
            Some(3) => L3::Arp,
            Some(4) => L3::Other,
            _ => L3::Any,
        };
        let mut l4 = L4::Any;
        match l3 {
            L3::Any => {}
            L3::Ip4 => {
                let (s, l) = match self.rng.weighted(&[30, 25, 25, 12, 8]) {
                    Some(1) => ("tcp", L4::Tcp),
                    Some(2) => ("udp", L4::Udp),
                    Some(3) => ("icmp", L4::Icmp),
                    Some(4) => ("ip,nw_proto=47", L4::Any),
                    _ => ("ip", L4::Any),
                };
                m.push(s.to_string());
                l4 = l;
            }
            L3::Ip6 => {
                let (s, l) = match self.rng.weighted(&[30, 25, 25, 20]) {
                    Some(1) => ("tcp6", L4::Tcp),
                    Some(2) => ("udp6", L4::Udp),
                    Some(3) => ("icmp6", L4::Icmp),
                    _ => ("ipv6", L4::Any),
                };
                m.push(s.to_string());
                l4 = l;
            }
            L3::Arp => m.push("arp".to_string()),
            L3::Other => m.push(self.pick(&["dl_type=0x88cc", "dl_type=0x8847"]).to_string()),
        }
        if self.ct && self.ct_tables.contains(&table) && self.rng.chance(2, 3) {
            let s = self.pick(&[
                "ct_state=+trk",
                "ct_state=-trk",
                "ct_state=+trk+new",
                "ct_state=+trk+est",
                "ct_state=+trk-new",
            ]);
            m.push(s.to_string());
            if self.rng.chance(1, 4) {
                m.push(format!("ct_zone={}", self.rng.range(0, 3)));
            }
        }
        if self.rng.chance(1, 5) {
            m.push(format!(
                "in_port={}",
                self.rng.range(1, u64::from(self.mix.n_ports))
            ));
        }
        if self.rng.chance(1, 8) {
            let s = self.mac_match();
            m.push(format!("dl_src={s}"));
        }
        if self.rng.chance(1, 7) {
            let s = self.mac_match();
            m.push(format!("dl_dst={s}"));
        }
        let mut tagged = false;
        if self.rng.chance(1, 8) {
            let v = self.vlan();
            let s = match self.rng.below(5) {
                0 => "vlan_tci=0x0000".to_string(),
                1 => {
                    tagged = true;
                    "vlan_tci=0x1000/0x1000".to_string()
                }
                2 => {
                    tagged = true;
                    format!("dl_vlan={v}")
                }
                3 => {
                    tagged = true;
                    format!("dl_vlan={v},dl_vlan_pcp={}", self.rng.range(0, 7))
                }
                _ => {
                    tagged = true;
                    format!("vlan_tci=0x{:04x}/0x1fff", 0x1000 | v)
                }
            };
            m.push(s);
        }
        match l3 {
            L3::Ip4 => {
                if self.rng.chance(2, 5) {
                    let s = self.ip4_match();
                    m.push(format!("nw_src={s}"));
                }
                if self.rng.chance(2, 5) {
                    let s = self.ip4_match();
                    m.push(format!("nw_dst={s}"));
                }
            }
            L3::Ip6 => {
                if self.rng.chance(2, 5) {
                    let s = self.ip6_match();
                    m.push(format!("ipv6_src={s}"));
                }
                if self.rng.chance(2, 5) {
                    let s = self.ip6_match();
                    m.push(format!("ipv6_dst={s}"));
                }
            }
            L3::Arp => {
                if self.rng.chance(2, 5) {
                    let s = self.ip4_match();
                    m.push(format!("arp_spa={s}"));
                }
                if self.rng.chance(2, 5) {
                    let s = self.ip4_match();
                    m.push(format!("arp_tpa={s}"));
                }
                if self.rng.chance(1, 4) {
                    m.push(format!("arp_op={}", self.rng.range(1, 2)));
                }
                if self.rng.chance(1, 6) {
                    let s = self.mac_match();
                    m.push(format!("arp_sha={s}"));
                }
                if self.rng.chance(1, 8) {
                    let s = self.mac_match();
                    m.push(format!("arp_tha={s}"));
                }
            }
            _ => {}
        }
        if matches!(l3, L3::Ip4 | L3::Ip6) {
            if self.rng.chance(1, 10) {
                m.push(format!("nw_tos={}", self.pick(&[0, 32, 184])));
            }
            if self.rng.chance(1, 12) {
                m.push(format!("nw_ttl={}", self.pick(&[1, 64, 255])));
            }
            if self.rng.chance(1, 20) {
                m.push(format!("nw_ecn={}", self.rng.range(0, 3)));
            }
        }
        match l4 {
            L4::Tcp | L4::Udp => {
                if self.rng.chance(1, 3) {
                    let s = self.port_match();
                    m.push(format!("tp_src={s}"));
                }
                if self.rng.chance(2, 5) {
                    let s = self.port_match();
                    m.push(format!("tp_dst={s}"));
                }
                if l4 == L4::Tcp && self.rng.chance(1, 5) {
                    let s = self.pick(&[
                        "+syn",
                        "+syn-ack",
                        "+ack",
                        "-syn",
                        "+fin",
                        "+rst",
                        "0x002/0x012",
                    ]);
                    m.push(format!("tcp_flags={s}"));
                }
            }
            L4::Icmp => {
                if self.rng.chance(1, 2) {
                    let t = if l3 == L3::Ip4 {
                        self.pick(&[0, 3, 8, 11])
                    } else {
                        self.pick(&[1, 128, 129, 135, 136])
                    };
                    m.push(format!("icmp_type={t}"));
                }
                if self.rng.chance(1, 5) {
                    m.push(format!("icmp_code={}", self.rng.range(0, 1)));
                }
            }
            L4::Any => {}
        }
        if self.rng.chance(1, 10) {
            let v = self.reg_val();
            let s = self.masked32(v);
            m.push(format!("metadata={s}"));
        }
        let n_regs = match self.rng.below(10) {
            0..=5 => 0,
            6..=8 => 1,
            _ => 2,
        };
        for _ in 0..n_regs {
            let r = self.rng.range(0, 7);
            let v = self.reg_val();
            let s = self.masked32(v);
            let key = format!("reg{r}=");
            if !m.iter().any(|x| x.starts_with(&key)) {
                m.push(format!("{key}{s}"));
            }
        }
        if self.rng.chance(1, 20) {
            let v = self.reg_val();
            let s = self.masked32(v);
            m.push(format!("pkt_mark={s}"));
        }
        (m, MatchInfo { l3, l4, tagged })
    }

    fn later_table(&mut self, table: u32) -> Option<u32> {
        if table + 1 >= self.n_tables {
            None
        } else {
            Some(
                self.rng
                    .range(u64::from(table) + 1, u64::from(self.n_tables) - 1)
                    as u32,
            )
        }
    }

    /// `ct(...)`, usually recirculating to a later table (which then gets `ct_state` matches).
    fn ct_action(&mut self, table: u32) -> String {
        let t = self.later_table(table);
        if let Some(t) = t {
            self.ct_tables.push(t);
        }
        let zone = self.rng.range(0, 3);
        let commit = if self.rng.chance(2, 3) { "commit," } else { "" };
        match t {
            Some(t) => format!("ct({commit}zone={zone},table={t})"),
            None => format!("ct({commit}zone={zone})"),
        }
    }

    /// Actions of a rule in `table`; returns the text and whether it needs OpenFlow 1.0
    /// (lenient prerequisites) — goto_table/push_vlan are then avoided.
    fn gen_actions(&mut self, table: u32, mi: MatchInfo) -> String {
        struct Act {
            text: String,
            of10_only: bool,
            of13_only: bool,
        }
        let act = |text: String| Act {
            text,
            of10_only: false,
            of13_only: false,
        };
        let mut acts: Vec<Act> = Vec::new();
        let n = self.rng.weighted(&[30, 35, 20, 10, 5]).unwrap_or(0);
        let ip = matches!(mi.l3, L3::Ip4 | L3::Ip6);
        // VLAN tags known to be present (OpenFlow 1.3 refuses a pop without one).
        let mut known_tags: u32 = u32::from(mi.tagged);
        for _ in 0..n {
            let w = [
                5,                                    // output
                3,                                    // set_field reg
                2,                                    // load reg bits
                1,                                    // move reg->reg
                1,                                    // metadata
                1,                                    // pkt_mark
                3,                                    // mod_dl_*
                1,                                    // move eth
                if mi.l3 == L3::Ip4 { 4 } else { 1 }, // mod_nw_*
                if ip { 2 } else { 0 },               // dec_ttl
                if mi.l3 == L3::Ip4 { 1 } else { 0 }, // mod_nw_tos
                if mi.l3 == L3::Ip4 { 1 } else { 0 }, // move ip_src->reg
                if mi.l3 == L3::Ip6 { 2 } else { 0 }, // set ipv6 addr
                if matches!(mi.l4, L4::Tcp | L4::Udp) {
                    3
                } else {
                    0
                }, // mod_tp_*
                3,                                    // mod_vlan_vid
                1,                                    // mod_vlan_pcp
                2,                                    // strip_vlan
                1,                                    // push_vlan
                if self.n_tables > table + 1 { 2 } else { 0 }, // resubmit forward
                if self.ct && ip { 2 } else { 0 },    // ct
                if self.normal { 1 } else { 0 },      // NORMAL mid-list
                1,                                    // FLOOD/ALL/IN_PORT mid-list
            ];
            let Some(k) = self.rng.weighted(&w) else {
                break;
            };
            let a = match k {
                0 => act(self.out_port()),
                1 => {
                    let v = self.reg_val();
                    act(format!("set_field:{v}->reg{}", self.rng.range(0, 7)))
                }
                2 => {
                    let lo = self.rng.range(0, 31);
                    let hi = self.rng.range(lo, 31);
                    let width = hi - lo + 1;
                    let v = u64::from(self.reg_val()) & ((1u64 << width) - 1);
                    act(format!(
                        "load:0x{v:x}->NXM_NX_REG{}[{lo}..{hi}]",
                        self.rng.range(0, 7)
                    ))
                }
                3 => {
                    let a = self.rng.range(0, 7);
                    let b = self.rng.range(0, 7);
                    if self.rng.chance(1, 2) {
                        act(format!("move:NXM_NX_REG{a}[]->NXM_NX_REG{b}[]"))
                    } else {
                        act(format!("move:NXM_NX_REG{a}[0..15]->NXM_NX_REG{b}[16..31]"))
                    }
                }
                4 => {
                    let v = self.reg_val();
                    if self.rng.chance(1, 2) {
                        act(format!("set_field:0x{v:x}->metadata"))
                    } else {
                        act(format!("set_field:0x{:x}/0xff->metadata", v & 0xff))
                    }
                }
                5 => {
                    let v = self.reg_val();
                    act(format!("set_field:0x{v:x}->pkt_mark"))
                }
                6 => {
                    let m = self.mac();
                    let f = self.pick(&["mod_dl_src", "mod_dl_dst"]);
                    act(format!("{f}:{}", mac_str(&m)))
                }
                7 => act(self
                    .pick(&[
                        "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
                        "move:NXM_OF_ETH_DST[0..23]->NXM_NX_REG2[0..23]",
                    ])
                    .to_string()),
                8 => {
                    let a = self.ip4();
                    let f = self.pick(&["mod_nw_src", "mod_nw_dst"]);
                    Act {
                        text: format!("{f}:{}", ip4_str(a)),
                        of10_only: mi.l3 != L3::Ip4,
                        of13_only: false,
                    }
                }
                9 => act("dec_ttl".to_string()),
                10 => act(format!("mod_nw_tos:{}", self.pick(&[0, 32, 184]))),
                11 => act(format!(
                    "move:NXM_OF_IP_SRC[]->NXM_NX_REG{}[]",
                    self.rng.range(0, 7)
                )),
                12 => {
                    let a = self.ip6();
                    let f = self.pick(&["ipv6_src", "ipv6_dst"]);
                    act(format!("set_field:{}->{f}", ip6_str(&a)))
                }
                13 => {
                    let p = self.port();
                    let f = self.pick(&["mod_tp_src", "mod_tp_dst"]);
                    act(format!("{f}:{p}"))
                }
                14 => {
                    let v = self.vlan();
                    Act {
                        text: format!("mod_vlan_vid:{v}"),
                        of10_only: true,
                        of13_only: false,
                    }
                }
                15 => Act {
                    text: format!("mod_vlan_pcp:{}", self.rng.range(0, 7)),
                    of10_only: true,
                    of13_only: false,
                },
                16 => {
                    let of10_only = known_tags == 0;
                    known_tags = known_tags.saturating_sub(1);
                    Act {
                        text: "strip_vlan".to_string(),
                        of10_only,
                        of13_only: false,
                    }
                }
                17 if acts.iter().any(|a| a.text.starts_with("push_vlan")) => {
                    // OVS refuses a flow whose pushes could exceed two tags (OFPBAC_BAD_TAG).
                    known_tags = known_tags.saturating_sub(1);
                    act("strip_vlan".to_string())
                }
                17 => {
                    known_tags += 1;
                    let v = self.vlan();
                    let tpid = self.pick(&["0x8100", "0x8100", "0x88a8"]);
                    Act {
                        text: format!("push_vlan:{tpid},set_field:{}->vlan_vid", 0x1000 | v),
                        of10_only: false,
                        of13_only: true,
                    }
                }
                18 => {
                    let t = self.later_table(table).unwrap_or(table + 1);
                    act(format!("resubmit(,{t})"))
                }
                19 => act(self.ct_action(table)),
                20 => act("NORMAL".to_string()),
                _ => act(self.pick(&["FLOOD", "ALL", "IN_PORT"]).to_string()),
            };
            acts.push(a);
        }
        // Terminal action.
        let later = self.later_table(table);
        let w = [
            if later.is_some() { 4 } else { 0 }, // goto_table
            if later.is_some() { 4 } else { 0 }, // resubmit forward
            4,                                   // output
            if self.normal { 5 } else { 0 },     // NORMAL
            2,                                   // FLOOD / ALL / IN_PORT
            2,                                   // nothing more
            if self.looping { 3 } else { 0 },    // resubmit back
            if self.ct && ip { 8 } else { 0 },   // ct
        ];
        match self.rng.weighted(&w) {
            Some(0) => acts.push(Act {
                text: format!("goto_table:{}", later.unwrap_or(table + 1)),
                of10_only: false,
                of13_only: true,
            }),
            Some(1) => acts.push(act(format!("resubmit(,{})", later.unwrap_or(table + 1)))),
            Some(2) => {
                let o = self.out_port();
                acts.push(act(o));
            }
            Some(3) => acts.push(act("NORMAL".to_string())),
            Some(4) => {
                let s = self.pick(&["FLOOD", "FLOOD", "ALL", "IN_PORT"]);
                acts.push(act(s.to_string()));
            }
            Some(6) => {
                let t = self.rng.range(0, u64::from(table));
                acts.push(act(format!("resubmit(,{t})")));
            }
            Some(7) => {
                let a = self.ct_action(table);
                acts.push(act(a));
            }
            _ => {}
        }
        // Resolve protocol conflicts: OpenFlow 1.0 cannot say goto_table/push_vlan, 1.3 refuses
        // actions whose prerequisites the match lacks.
        if acts.iter().any(|a| a.of10_only) {
            for a in &mut acts {
                if a.of13_only {
                    if let Some(t) = a.text.strip_prefix("goto_table:") {
                        a.text = format!("resubmit(,{t})");
                    } else {
                        let v = self.vlan();
                        a.text = format!("mod_vlan_vid:{v}");
                    }
                    a.of13_only = false;
                }
            }
        }
        if acts.is_empty() {
            "drop".to_string()
        } else {
            let t: Vec<String> = acts.into_iter().map(|a| a.text).collect();
            t.join(",")
        }
    }

    fn gen_ports(&mut self, vlan_ports: bool) -> Vec<PortCfg> {
        (1..=self.mix.n_ports)
            .map(|port| {
                let mut c = PortCfg::default_for(port);
                if !vlan_ports {
                    return c;
                }
                match self.rng.below(5) {
                    0 => {}
                    1 => {
                        c.vlan_mode = Some(VlanMode::Access);
                        c.tag = Some(self.vlan());
                    }
                    2 => {
                        c.vlan_mode = Some(VlanMode::Trunk);
                        let n = self.rng.range(1, 2);
                        for _ in 0..n {
                            let v = self.vlan();
                            if !c.trunks.contains(&v) {
                                c.trunks.push(v);
                            }
                        }
                        c.trunks.sort_unstable();
                    }
                    3 => {
                        c.vlan_mode = Some(VlanMode::NativeUntagged);
                        c.tag = Some(self.vlan());
                        if self.rng.chance(1, 2) {
                            let v = self.vlan();
                            c.trunks.push(v);
                        }
                    }
                    _ => {
                        c.vlan_mode = Some(VlanMode::NativeTagged);
                        c.tag = Some(self.vlan());
                        if self.rng.chance(1, 2) {
                            let v = self.vlan();
                            c.trunks.push(v);
                        }
                    }
                }
                c
            })
            .collect()
    }
}

/// A random pipeline: 1–`max_tables` tables of overlapping rules with unique priorities per
/// table, matches over every field kind (prerequisites respected) and actions as listed in the
/// module docs. A pure function of the generator state.
pub fn random_pipeline(rng: &mut TestRng, mix: &PipelineMix) -> Pipeline {
    let values = pool_values(rng);
    let n_tables = rng.range(1, u64::from(mix.max_tables.clamp(1, 254))) as u32;
    let ct = rng.chance(u64::from(mix.ct_permille), 1000);
    let normal = rng.chance(u64::from(mix.normal_permille), 1000);
    let vlan_ports = normal && rng.chance(u64::from(mix.vlan_ports_permille), 1000);
    let looping = rng.chance(u64::from(mix.loop_permille), 1000);
    let mut g = Gen {
        rng,
        mix,
        v: values,
        n_tables,
        ct,
        normal,
        looping,
        ct_tables: Vec::new(),
    };
    let mut flows = Vec::new();
    for table in 0..n_tables {
        let n_rules = g.rng.range(1, u64::from(mix.max_rules_per_table.max(1)));
        let mut prios: Vec<u64> = Vec::new();
        for _ in 0..n_rules {
            let mut p = g.rng.range(1, 300);
            while prios.contains(&p) {
                p += 1;
            }
            prios.push(p);
            let (m, mi) = g.gen_match(table);
            let actions = g.gen_actions(table, mi);
            let mut text = format!("table={table},priority={p}");
            for f in m {
                text.push(',');
                text.push_str(&f);
            }
            text.push_str(",actions=");
            text.push_str(&actions);
            flows.push(text);
        }
        // ct pipelines: a broad, high-priority rule sending IP traffic through conntrack.
        if ct && table == 0 && n_tables > 1 && g.rng.chance(3, 4) {
            let l3 = g.pick(&["ip", "ip", "ipv6", "tcp", "udp"]);
            let a = g.ct_action(table);
            let pre = if g.rng.chance(1, 3) {
                let v = g.reg_val();
                format!("set_field:{v}->reg{},", g.rng.range(0, 7))
            } else {
                String::new()
            };
            flows.push(format!(
                "table={table},priority={},{l3},actions={pre}{a}",
                400 + table
            ));
        }
        // A catch-all often (priority 0 is below every random priority).
        if g.rng.chance(if table == 0 { 2 } else { 1 }, 3) {
            let mi = MatchInfo {
                l3: L3::Any,
                l4: L4::Any,
                tagged: false,
            };
            let actions = g.gen_actions(table, mi);
            flows.push(format!("table={table},priority=0,actions={actions}"));
        }
    }
    let ports = g.gen_ports(vlan_ports);
    let mut description = format!("tables={n_tables} rules={}", flows.len());
    for (on, word) in [
        (normal, "normal"),
        (vlan_ports, "vlan-ports"),
        (ct, "ct"),
        (looping, "loop"),
    ] {
        if on {
            description.push(' ');
            description.push_str(word);
        }
    }
    Pipeline {
        flows,
        ports,
        description,
        values: g.v,
    }
}

// ---------------------------------------------------------------------------------------------
// Packets for a pipeline.

/// A packet to send into a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelinePacket {
    /// Input port (`1..=n_ports`).
    pub in_port: u32,
    /// The frame.
    pub bytes: Vec<u8>,
    /// How it was built, e.g. `vlan1 tcp4`.
    pub kind: String,
}

/// `n` packets biased to hit `pipeline`'s rules: MACs, addresses, ports and VLAN ids are mostly
/// taken from [`Pipeline::values`] (the pools the rules were drawn from), sometimes random.
/// Input ports are uniform over the pipeline's ports. A pure function of the generator state.
pub fn random_packets_for(pipeline: &Pipeline, rng: &mut TestRng, n: usize) -> Vec<PipelinePacket> {
    let n_ports = pipeline.ports.len().max(1) as u64;
    (0..n)
        .map(|_| {
            let in_port = rng.range(1, n_ports) as u32;
            let (bytes, kind) = packet_for(&pipeline.values, rng);
            PipelinePacket {
                in_port,
                bytes,
                kind,
            }
        })
        .collect()
}

fn pick_or<T: Copy>(rng: &mut TestRng, pool: &[T], random: impl FnOnce(&mut TestRng) -> T) -> T {
    match rng.pick(pool) {
        Some(&x) if rng.chance(4, 5) => x,
        _ => random(rng),
    }
}

fn packet_for(v: &PipelineValues, rng: &mut TestRng) -> (Vec<u8>, String) {
    let rand_mac = |r: &mut TestRng| {
        let mut m = [0u8; 6];
        for b in &mut m {
            *b = r.next_u8();
        }
        m[0] &= 0xfe;
        m
    };
    let src = pick_or(rng, &v.macs, rand_mac);
    let dst = match rng.below(10) {
        0 => [0xff; 6],
        1 => [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01],
        _ => pick_or(rng, &v.macs, rand_mac),
    };
    let ip4 = |r: &mut TestRng| pick_or(r, &v.ipv4, |r| r.next_u32().to_be_bytes());
    let ip6 = |r: &mut TestRng| {
        pick_or(r, &v.ipv6, |r| {
            let mut a = [0u8; 16];
            for b in &mut a {
                *b = r.next_u8();
            }
            a
        })
    };
    let l4port = |r: &mut TestRng| pick_or(r, &v.l4_ports, |r| r.next_u16());
    let ttl = |r: &mut TestRng| match r.below(10) {
        0 => 1,
        1 => 2,
        _ => 64,
    };
    let tos = |r: &mut TestRng| *r.pick(&[0u8, 0, 32, 184, 185, 2]).unwrap_or(&0);
    let data: Vec<u8> = (0..rng.range(0, 20) as u8).collect();
    let kinds = [20, 18, 8, 12, 10, 10, 8, 4, 3];
    let (ethertype_, l3, kind) = match rng.weighted(&kinds).unwrap_or(0) {
        k @ 0..=2 => {
            let (proto, name) = match k {
                0 => (ipproto::TCP, "tcp4"),
                1 => (ipproto::UDP, "udp4"),
                _ => (ipproto::ICMP, "icmp4"),
            };
            let mut spec = Ipv4Spec::new(ip4(rng), ip4(rng), proto);
            spec.ttl = ttl(rng);
            spec.tos = tos(rng);
            let l4 = l4_bytes(rng, spec.pseudo(), proto, l4port, &data);
            (ethertype::IPV4, packets::ipv4(&spec, &l4), name)
        }
        3 => {
            let op = rng.range(1, 2) as u16;
            let tha = if op == 1 { [0; 6] } else { dst };
            (
                ethertype::ARP,
                packets::arp_payload(op, src, ip4(rng), tha, ip4(rng)),
                "arp",
            )
        }
        k @ 4..=6 => {
            let (proto, name) = match k {
                4 => (ipproto::TCP, "tcp6"),
                5 => (ipproto::UDP, "udp6"),
                _ => (ipproto::ICMPV6, "icmp6"),
            };
            let mut spec = Ipv6Spec::new(ip6(rng), ip6(rng));
            spec.hop_limit = ttl(rng);
            spec.tclass = tos(rng);
            let l4 = l4_bytes(rng, spec.pseudo(proto), proto, l4port, &data);
            (ethertype::IPV6, packets::ipv6(&spec, &[], proto, &l4), name)
        }
        7 => {
            let mut spec = Ipv4Spec::new(ip4(rng), ip4(rng), 47);
            spec.ttl = ttl(rng);
            (ethertype::IPV4, packets::ipv4(&spec, &data), "gre4")
        }
        _ => (0x88cc, data.clone(), "lldp"),
    };
    let mut tags: Vec<(u16, u16)> = Vec::new();
    let n_tags = rng.weighted(&[65, 27, 8]).unwrap_or(0);
    for i in 0..n_tags {
        let vid = pick_or(rng, &v.vlans, |r| r.range(1, 4094) as u16);
        let pcp = if rng.chance(1, 4) {
            rng.range(1, 7) as u16
        } else {
            0
        };
        let tpid = if i == 0 && n_tags == 2 && rng.chance(1, 2) {
            ethertype::QINQ
        } else {
            ethertype::VLAN
        };
        tags.push((tpid, (pcp << 13) | vid));
    }
    let bytes = packets::ethernet(dst, src, &tags, ethertype_, &l3);
    let kind = if n_tags > 0 {
        format!("vlan{n_tags} {kind}")
    } else {
        kind.to_string()
    };
    (bytes, kind)
}

fn l4_bytes(
    rng: &mut TestRng,
    pseudo: Pseudo,
    proto: u8,
    mut port: impl FnMut(&mut TestRng) -> u16,
    data: &[u8],
) -> Vec<u8> {
    match proto {
        ipproto::TCP => {
            let flags = *rng
                .pick(&[0x002u16, 0x012, 0x010, 0x018, 0x011, 0x004, 0x000, 0x0c2])
                .unwrap_or(&0x002);
            let spec = TcpSpec::new(port(rng), port(rng), flags);
            packets::tcp(pseudo, &spec, data)
        }
        ipproto::UDP => packets::udp(pseudo, port(rng), port(rng), data),
        ipproto::ICMP => {
            let t = *rng.pick(&[8u8, 0, 3, 11, 5]).unwrap_or(&8);
            let mut rest = vec![0, 1, 0, 1];
            rest.extend_from_slice(data);
            packets::icmp4(t, rng.range(0, 1) as u8, &rest)
        }
        _ => {
            let t = *rng.pick(&[128u8, 129, 1, 2, 135, 136]).unwrap_or(&128);
            let mut rest = vec![0, 0, 0, 0];
            if t == 135 || t == 136 {
                // Target address; no options.
                rest.extend_from_slice(&[0xfe, 0x80]);
                rest.extend_from_slice(&[0; 13]);
                rest.push(rng.next_u8());
            } else {
                rest.extend_from_slice(data);
            }
            packets::icmp6(pseudo, t, 0, &rest)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Driving OVS.

/// One `Flow:`/`Megaflow:`/`Datapath actions:` group of an `ofproto/trace` output. The first
/// stage is the packet as received; each later one is a recirculation (after `ct(...,table=T)`)
/// that `ofproto/trace` follows by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceStage {
    /// Text after `Flow: `.
    pub flow: String,
    /// Text after `Megaflow: `.
    pub megaflow: String,
    /// Text after `Datapath actions: `.
    pub datapath_actions: String,
}

/// Everything the pipeline differential test needs from one `ofproto/trace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullTrace {
    /// Stage 0 is the packet as received, later ones are recirculations.
    pub stages: Vec<TraceStage>,
    /// Error lines: `>>>> ... <<<<` notes (e.g. `over max translation depth 64`) and
    /// `Translation failed (...)`, in output order, trimmed.
    pub errors: Vec<String>,
    /// The whole output.
    pub raw: String,
}

impl FullTrace {
    /// Splits raw `ofproto/trace` output into stages and error lines.
    pub fn parse(raw: &str) -> Result<FullTrace, OvsError> {
        let mut stages: Vec<TraceStage> = Vec::new();
        let mut errors = Vec::new();
        for l in raw.lines() {
            if let Some(f) = l.strip_prefix("Flow: ") {
                stages.push(TraceStage {
                    flow: f.trim_end().to_string(),
                    megaflow: String::new(),
                    datapath_actions: String::new(),
                });
            } else if let Some(m) = l.strip_prefix("Megaflow: ") {
                match stages.last_mut() {
                    Some(s) if s.megaflow.is_empty() => s.megaflow = m.trim_end().to_string(),
                    _ => {
                        return Err(OvsError::Parse(format!(
                            "unexpected Megaflow line in trace:\n{raw}"
                        )));
                    }
                }
            } else if let Some(a) = l.strip_prefix("Datapath actions: ") {
                match stages.last_mut() {
                    Some(s) if s.datapath_actions.is_empty() => {
                        s.datapath_actions = a.trim_end().to_string()
                    }
                    _ => {
                        return Err(OvsError::Parse(format!(
                            "unexpected Datapath actions line in trace:\n{raw}"
                        )));
                    }
                }
            } else {
                let t = l.trim();
                if (t.starts_with(">>>>") && t.ends_with("<<<<"))
                    || t.starts_with("Translation failed")
                {
                    errors.push(t.to_string());
                }
            }
        }
        if stages.is_empty()
            || stages
                .iter()
                .any(|s| s.megaflow.is_empty() || s.datapath_actions.is_empty())
        {
            return Err(OvsError::Parse(format!("incomplete trace:\n{raw}")));
        }
        Ok(FullTrace {
            stages,
            errors,
            raw: raw.to_string(),
        })
    }
}

impl OvsSandbox {
    /// Sets every port's VLAN configuration (`tag`, `trunks`, `vlan_mode`) in one `ovs-vsctl`
    /// transaction, clearing what a previous pipeline set; waits until vswitchd applied it.
    pub fn configure_ports(&self, ports: &[PortCfg]) -> Result<(), OvsError> {
        let mut args: Vec<String> = Vec::new();
        for p in ports {
            if p.port == 0 || p.port > self.n_ports() {
                return Err(OvsError::Invalid(format!("no port p{}", p.port)));
            }
            if !args.is_empty() {
                args.push("--".to_string());
            }
            args.extend(p.vsctl_args());
        }
        if args.is_empty() {
            return Ok(());
        }
        self.vsctl(&args).map(drop)
    }

    /// `ovs-appctl fdb/flush br0`: forgets every learned MAC.
    pub fn fdb_flush(&self) -> Result<(), OvsError> {
        self.appctl(&["fdb/flush", "br0"]).map(drop)
    }

    /// Adds flows with `ovs-ofctl -O <protocol> add-flows`, each with its
    /// [`flow_protocol`] (one `add-flows` per protocol).
    pub fn add_pipeline_flows(&self, flows: &[String]) -> Result<(), OvsError> {
        for proto in ["OpenFlow10", "OpenFlow13"] {
            let part: Vec<&str> = flows
                .iter()
                .filter(|f| flow_protocol(f) == proto)
                .map(String::as_str)
                .collect();
            if part.is_empty() {
                continue;
            }
            let path = self.dir().join(format!("pipeline-{proto}.txt"));
            let mut text = part.join("\n");
            text.push('\n');
            fs::write(&path, text).map_err(|source| OvsError::Io {
                context: format!("writing {}", path.display()),
                source,
            })?;
            let r = self.ofctl(&[
                "-O".as_ref(),
                proto.as_ref(),
                "add-flows".as_ref(),
                "br0".as_ref(),
                path.as_os_str(),
            ]);
            let _ = fs::remove_file(&path);
            r?;
        }
        Ok(())
    }

    /// Replaces whatever was installed by `pipeline`: deletes every flow, adds the pipeline's
    /// flows, configures its ports (only when `ports` differs from `previous_ports`, which
    /// saves a database round trip) and flushes the MAC table.
    pub fn load_pipeline(
        &self,
        pipeline_flows: &[String],
        ports: &[PortCfg],
        previous_ports: Option<&[PortCfg]>,
    ) -> Result<(), OvsError> {
        self.del_flows()?;
        self.add_pipeline_flows(pipeline_flows)?;
        if previous_ports != Some(ports) {
            self.configure_ports(ports)?;
        }
        self.fdb_flush()
    }

    /// `ofproto/trace br0 in_port=N <hex>` split into stages (see [`FullTrace`]). Traces are
    /// stateful: `NORMAL` learns the source MAC of every traced packet.
    pub fn trace_full(&self, in_port: u32, packet: &[u8]) -> Result<FullTrace, OvsError> {
        if packet.is_empty() {
            return Err(OvsError::Invalid("empty packet".into()));
        }
        let out = self.appctl(&[
            "ofproto/trace".to_string(),
            "br0".to_string(),
            format!("in_port={in_port}"),
            to_hex(packet),
        ])?;
        FullTrace::parse(&out)
    }

    /// Traces `packets` in order (one `ovs-appctl` each, about 5–10 ms; measured ~7 ms).
    pub fn trace_batch(&self, packets: &[(u32, Vec<u8>)]) -> Vec<Result<FullTrace, OvsError>> {
        packets
            .iter()
            .map(|(port, bytes)| self.trace_full(*port, bytes))
            .collect()
    }
}

/// Renames datapath recirculation ids in order of first appearance across `texts`
/// (`recirc(0x2a)` → `recirc(#1)`, `recirc_id=0x2a` → `recirc_id=#1`; `recirc_id=0` is kept).
/// OVS allocates ids from a global counter, so only their pattern is comparable.
pub fn normalize_recirc_ids(texts: &[&str]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    texts
        .iter()
        .map(|t| {
            let mut out = String::with_capacity(t.len());
            let mut rest = *t;
            loop {
                let a = rest.find("recirc(0x");
                let b = rest.find("recirc_id=0x");
                let (pos, plen) = match (a, b) {
                    (Some(a), Some(b)) if a < b => (a, "recirc(".len()),
                    (Some(a), None) => (a, "recirc(".len()),
                    (_, Some(b)) => (b, "recirc_id=".len()),
                    (None, None) => break,
                };
                out.push_str(&rest[..pos + plen]);
                rest = &rest[pos + plen..];
                let end = 2 + rest[2..]
                    .find(|c: char| !c.is_ascii_hexdigit())
                    .unwrap_or(rest.len() - 2);
                let id = &rest[..end];
                let n = match seen.iter().position(|s| s == id) {
                    Some(i) => i + 1,
                    None => {
                        seen.push(id.to_string());
                        seen.len()
                    }
                };
                out.push_str(&format!("#{n}"));
                rest = &rest[end..];
            }
            out.push_str(rest);
            out
        })
        .collect()
}

/// Splits `text` at commas outside parentheses.
pub fn split_top_level(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// A canonical form of a `Datapath actions:` text in which the order of outputs that OVS does
/// not fix is gone: each output becomes `port{state}` where `state` is the packet as sent
/// (VLAN tags pushed/popped so far, and every `set(...)` field so far, per field), and
/// outputs between two "barrier" actions (anything other than an output, `push_vlan`,
/// `pop_vlan`, `set`: e.g. `ct(...)`, `recirc(...)`, `drop`) are sorted. Two texts with the same
/// canonical form send the same packets to the same ports.
///
/// Needed because `NORMAL` floods in the order of its internal bundle list, which differs from
/// one `ovs-vswitchd` run to the next (`4,100,1,3` then `100,4,1,3` for the same pipeline).
pub fn canonical_datapath_actions(actions: &str) -> String {
    let mut pushed: Vec<String> = Vec::new();
    let mut popped = 0usize;
    let mut sets: Vec<(String, String)> = Vec::new();
    let mut segment: Vec<String> = Vec::new();
    let mut out: Vec<String> = Vec::new();
    let flush = |segment: &mut Vec<String>, out: &mut Vec<String>| {
        segment.sort();
        out.append(segment);
    };
    for tok in split_top_level(actions.trim()) {
        let tok = tok.trim();
        if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) {
            let mut sorted = sets.clone();
            sorted.sort();
            let sets_text: Vec<String> = sorted.iter().map(|(k, v)| format!("{k}={v}")).collect();
            segment.push(format!(
                "{tok}{{pop={popped};push={};set={}}}",
                pushed.join(";"),
                sets_text.join(";")
            ));
        } else if let Some(inner) = tok.strip_prefix("push_vlan(") {
            pushed.push(inner.trim_end_matches(')').to_string());
        } else if tok == "pop_vlan" {
            if pushed.pop().is_none() {
                popped += 1;
            }
        } else if let Some(inner) = tok.strip_prefix("set(").and_then(|t| t.strip_suffix(')')) {
            // set(HDR(f1=v1,f2=v2)) -> HDR.f1=v1, HDR.f2=v2 (later sets override fields).
            let (hdr, fields) = match inner.split_once('(') {
                Some((h, f)) => (h, f.strip_suffix(')').unwrap_or(f)),
                None => (inner, ""),
            };
            for f in split_top_level(fields) {
                let (k, v) = f.split_once('=').unwrap_or((f, ""));
                let key = format!("{hdr}.{k}");
                sets.retain(|(kk, _)| *kk != key);
                sets.push((key, v.to_string()));
            }
        } else {
            flush(&mut segment, &mut out);
            out.push(tok.to_string());
        }
    }
    flush(&mut segment, &mut out);
    out.join(",")
}

// ---------------------------------------------------------------------------------------------
// Golden file.

/// Seed of the golden pipelines.
pub const PIPELINES_GOLDEN_SEED: u64 = 0x0f10_0b1e_11e5;
/// Number of golden pipelines.
pub const PIPELINES_GOLDEN_COUNT: usize = 600;
/// Packets traced per golden pipeline, in order, after one FDB flush.
pub const PIPELINES_GOLDEN_PACKETS: usize = 5;
/// `other_config:vlan-limit` used for the recording.
pub const PIPELINES_GOLDEN_VLAN_LIMIT: u32 = 2;

/// Path of the golden file.
pub fn pipelines_golden_path() -> PathBuf {
    data_dir().join("pipelines_golden.tsv")
}

/// The golden pipelines and their packets, in order (a pure function of the seed).
pub fn golden_pipelines() -> Vec<(Pipeline, Vec<PipelinePacket>)> {
    let mut rng = TestRng::new(PIPELINES_GOLDEN_SEED);
    let mix = PipelineMix::default();
    (0..PIPELINES_GOLDEN_COUNT)
        .map(|_| {
            let p = random_pipeline(&mut rng, &mix);
            let pk = random_packets_for(&p, &mut rng, PIPELINES_GOLDEN_PACKETS);
            (p, pk)
        })
        .collect()
}

/// One traced packet of a golden pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineTrace {
    /// Position within the pipeline's packets (the MAC table was flushed before packet 0 and
    /// every earlier packet of the same pipeline was traced, and so learned, before this one).
    pub seq: usize,
    /// Input port.
    pub in_port: u32,
    /// The frame.
    pub packet: Vec<u8>,
    /// How the generator built it.
    pub kind: String,
    /// Stage 0 (`Flow:`, `Megaflow:`, `Datapath actions:`) then recirculations. Recirculation
    /// ids are as OVS printed them (see [`normalize_recirc_ids`]).
    pub stages: Vec<TraceStage>,
    /// Error lines (`>>>> over max translation depth 64 <<<<`, `Translation failed (...)`).
    pub errors: Vec<String>,
}

/// A golden pipeline with its traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineCase {
    /// Index in [`golden_pipelines`].
    pub id: usize,
    /// Generator's summary.
    pub description: String,
    /// Flow lines (install each with [`flow_protocol`]).
    pub flows: Vec<String>,
    /// Port configurations (ports `1..=n`).
    pub ports: Vec<PortCfg>,
    /// Traces in the order they were run.
    pub traces: Vec<PipelineTrace>,
}

/// Separator of list items inside one TSV field (ASCII unit separator).
pub const ITEM_SEP: char = '\x1f';
/// Separator of the three parts of a recirculation stage (ASCII record separator).
pub const PART_SEP: char = '\x1e';

/// The `P` line of a pipeline: `P\t<id>\t<description>\t<ports, space-separated>\t<flows,
/// \x1f-separated>`.
pub fn pipeline_line(id: usize, p: &Pipeline) -> String {
    let ports: Vec<String> = p.ports.iter().map(PortCfg::to_text).collect();
    format!(
        "P\t{id}\t{}\t{}\t{}",
        escape(&p.description),
        escape(&ports.join(" ")),
        escape(&p.flows.join(&ITEM_SEP.to_string()))
    )
}

/// The `T` line of a trace: `T\t<id>\t<seq>\t<in_port>\t<hex>\t<kind>\t<Flow>\t<Megaflow>\t
/// <Datapath actions>\t<errors, \x1f-separated>\t<recirculation stages, \x1f-separated, each
/// flow\x1emegaflow\x1eactions>`.
pub fn trace_line(id: usize, t: &PipelineTrace) -> String {
    let first = t.stages.first();
    let recirc: Vec<String> = t
        .stages
        .iter()
        .skip(1)
        .map(|s| {
            format!(
                "{}{PART_SEP}{}{PART_SEP}{}",
                s.flow, s.megaflow, s.datapath_actions
            )
        })
        .collect();
    [
        "T".to_string(),
        id.to_string(),
        t.seq.to_string(),
        t.in_port.to_string(),
        to_hex(&t.packet),
        t.kind.clone(),
        first.map(|s| s.flow.clone()).unwrap_or_default(),
        first.map(|s| s.megaflow.clone()).unwrap_or_default(),
        first
            .map(|s| s.datapath_actions.clone())
            .unwrap_or_default(),
        t.errors.join(&ITEM_SEP.to_string()),
        recirc.join(&ITEM_SEP.to_string()),
    ]
    .iter()
    .map(|s| escape(s))
    .collect::<Vec<_>>()
    .join("\t")
}

fn split_items(s: &str) -> Vec<String> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split(ITEM_SEP).map(str::to_string).collect()
    }
}

/// Parses the text of a pipelines golden file.
pub fn parse_pipelines_golden(text: &str) -> Result<Vec<PipelineCase>, String> {
    let mut cases: Vec<PipelineCase> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("line {}: {why}", n + 1);
        let f: Vec<String> = line.split('\t').map(unescape).collect();
        let num = |s: &str| s.parse::<usize>().map_err(|_| bad("bad number"));
        match f.first().map(String::as_str) {
            Some("P") => {
                let [_, id, desc, ports, flows] = f.as_slice() else {
                    return Err(bad("P line needs 5 fields"));
                };
                let id = num(id)?;
                if id != cases.len() {
                    return Err(bad("pipeline ids must be 0, 1, 2, ..."));
                }
                let ports = ports
                    .split(' ')
                    .filter(|p| !p.is_empty())
                    .map(PortCfg::from_text)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(&e))?;
                cases.push(PipelineCase {
                    id,
                    description: desc.clone(),
                    flows: split_items(flows),
                    ports,
                    traces: Vec::new(),
                });
            }
            Some("T") => {
                let [
                    _,
                    id,
                    seq,
                    in_port,
                    hex,
                    kind,
                    flow,
                    megaflow,
                    actions,
                    errors,
                    recirc,
                ] = f.as_slice()
                else {
                    return Err(bad("T line needs 11 fields"));
                };
                let id = num(id)?;
                let case = cases
                    .last_mut()
                    .filter(|c| c.id == id)
                    .ok_or_else(|| bad("T line does not follow its P line"))?;
                let mut stages = vec![TraceStage {
                    flow: flow.clone(),
                    megaflow: megaflow.clone(),
                    datapath_actions: actions.clone(),
                }];
                for r in split_items(recirc) {
                    let parts: Vec<&str> = r.split(PART_SEP).collect();
                    let [fl, mf, ac] = parts.as_slice() else {
                        return Err(bad("recirculation stage needs 3 parts"));
                    };
                    stages.push(TraceStage {
                        flow: fl.to_string(),
                        megaflow: mf.to_string(),
                        datapath_actions: ac.to_string(),
                    });
                }
                case.traces.push(PipelineTrace {
                    seq: num(seq)?,
                    in_port: in_port.parse().map_err(|_| bad("bad in_port"))?,
                    packet: from_hex(hex).ok_or_else(|| bad("bad hex"))?,
                    kind: kind.clone(),
                    stages,
                    errors: split_items(errors),
                });
            }
            _ => return Err(bad("line must start with P or T")),
        }
    }
    Ok(cases)
}

/// Reads `data/pipelines_golden.tsv`.
pub fn read_pipelines_golden() -> Result<Vec<PipelineCase>, String> {
    let path = pipelines_golden_path();
    let text = fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    parse_pipelines_golden(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`read_pipelines_golden`] for tests: panics with the reason if the checked-in file is
/// missing or malformed.
pub fn pipelines_golden() -> Vec<PipelineCase> {
    match read_pipelines_golden() {
        Ok(c) => c,
        Err(e) => panic!("pipelines golden file unusable: {e}"),
    }
}

impl fmt::Display for PipelineCase {
    /// The pipeline as a reproducible shell recipe (for debugging a mismatch).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# pipeline {}: {}", self.id, self.description)?;
        for p in &self.ports {
            writeln!(f, "ovs-vsctl {}", p.vsctl_args().join(" "))?;
        }
        for fl in &self.flows {
            writeln!(f, "ovs-ofctl -O {} add-flow br0 '{fl}'", flow_protocol(fl))?;
        }
        for t in &self.traces {
            writeln!(
                f,
                "ovs-appctl ofproto/trace br0 in_port={} {}  # {}",
                t.in_port,
                to_hex(&t.packet),
                t.kind
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelines_are_deterministic_and_well_formed() {
        let mix = PipelineMix::default();
        let mut a = TestRng::new(3);
        let mut b = TestRng::new(3);
        for _ in 0..200 {
            let p = random_pipeline(&mut a, &mix);
            assert_eq!(p, random_pipeline(&mut b, &mix));
            assert_eq!(p.ports.len(), mix.n_ports as usize);
            assert!(!p.flows.is_empty());
            let mut keys = Vec::new();
            for f in &p.flows {
                assert!(f.starts_with("table="), "{f}");
                assert!(f.contains(",actions="), "{f}");
                let key: String = f.split(',').take(2).collect::<Vec<_>>().join(",");
                assert!(!keys.contains(&key), "duplicate table/priority {key}");
                keys.push(key);
                if f.contains("goto_table") || f.contains("push_vlan") {
                    for bad in ["mod_vlan_vid", "mod_vlan_pcp"] {
                        assert!(!f.contains(bad), "{f}");
                    }
                }
                assert!(!f.contains('\t') && !f.contains(ITEM_SEP), "{f}");
            }
            let pk = random_packets_for(&p, &mut a, 5);
            let pk2 = random_packets_for(&p, &mut b, 5);
            assert_eq!(pk, pk2);
            for x in &pk {
                assert!(x.bytes.len() >= 14);
                assert!((1..=mix.n_ports).contains(&x.in_port));
            }
        }
    }

    #[test]
    fn generator_covers_features() {
        let mix = PipelineMix::default();
        let mut rng = TestRng::new(11);
        let all: String = (0..300)
            .flat_map(|_| random_pipeline(&mut rng, &mix).flows)
            .collect::<Vec<_>>()
            .join("\n");
        for want in [
            "in_port=",
            "dl_src=",
            "dl_dst=",
            "/ff:ff:ff:00:00:00",
            "vlan_tci=",
            "dl_vlan=",
            "nw_src=",
            "nw_dst=",
            "/255.",
            "ipv6_src=",
            "ipv6_dst=",
            "tp_src=",
            "tp_dst=0x",
            "tcp_flags=",
            "icmp_type=",
            "arp_spa=",
            "arp_tpa=",
            "arp_op=",
            "arp_sha=",
            "metadata=",
            "reg0=",
            "reg7=",
            "pkt_mark=",
            "nw_tos=",
            "nw_ttl=",
            "nw_proto=47",
            "ct_state=",
            "output:",
            "actions=drop",
            "resubmit(,",
            "goto_table:",
            "set_field:",
            "load:",
            "move:",
            "mod_dl_src:",
            "mod_dl_dst:",
            "mod_nw_src:",
            "mod_nw_dst:",
            "mod_tp_dst:",
            "dec_ttl",
            "push_vlan:",
            "mod_vlan_vid:",
            "strip_vlan",
            "NORMAL",
            "FLOOD",
            "IN_PORT",
            "ALL",
            "ct(commit,zone=",
        ] {
            assert!(all.contains(want), "generator never produced {want:?}");
        }
    }

    #[test]
    fn port_cfg_text_round_trip() {
        let mut rng = TestRng::new(5);
        let mix = PipelineMix {
            normal_permille: 1000,
            vlan_ports_permille: 1000,
            ..PipelineMix::default()
        };
        let mut modes = 0;
        for _ in 0..50 {
            for c in random_pipeline(&mut rng, &mix).ports {
                assert_eq!(PortCfg::from_text(&c.to_text()), Ok(c.clone()));
                modes += usize::from(c.vlan_mode.is_some());
            }
        }
        assert!(modes > 50);
        assert!(PortCfg::from_text("x").is_err());
        assert!(PortCfg::from_text("1:tag").is_err());
        assert!(PortCfg::from_text("1:vlan_mode=bogus").is_err());
        let c = PortCfg::from_text("2:vlan_mode=access:tag=10").unwrap();
        assert_eq!(
            c.vsctl_args().join(" "),
            "clear port p2 tag trunks vlan_mode -- set port p2 vlan_mode=access tag=10"
        );
    }

    #[test]
    fn golden_lines_round_trip() {
        let mut rng = TestRng::new(9);
        let p = random_pipeline(&mut rng, &PipelineMix::default());
        let t = PipelineTrace {
            seq: 0,
            in_port: 2,
            packet: vec![1, 2, 3],
            kind: "x\ty".into(),
            stages: vec![
                TraceStage {
                    flow: "f".into(),
                    megaflow: "m".into(),
                    datapath_actions: "ct(commit,zone=1),recirc(0x1)".into(),
                },
                TraceStage {
                    flow: "recirc_id=0x1,f".into(),
                    megaflow: "m2".into(),
                    datapath_actions: "2".into(),
                },
            ],
            errors: vec!["a".into(), "b".into()],
        };
        let text = format!("# c\n{}\n{}\n", pipeline_line(0, &p), trace_line(0, &t));
        let cases = parse_pipelines_golden(&text).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].flows, p.flows);
        assert_eq!(cases[0].ports, p.ports);
        assert_eq!(cases[0].traces, vec![t]);
        assert!(parse_pipelines_golden("T\t0\t0").is_err());
        assert!(parse_pipelines_golden("P\t1\td\t\t").is_err());
        assert!(parse_pipelines_golden("X").is_err());
    }

    #[test]
    fn canonical_actions_ignore_flood_order_only() {
        let c = canonical_datapath_actions;
        assert_eq!(c("4,100,1,3"), c("100,4,1,3"));
        assert_eq!(c("drop"), "drop");
        assert_eq!(
            c("push_vlan(vid=10,pcp=0),2,pop_vlan,3"),
            c("3,push_vlan(vid=10,pcp=0),2")
        );
        assert_ne!(
            c("push_vlan(vid=10,pcp=0),2,3"),
            c("3,push_vlan(vid=10,pcp=0),2")
        );
        assert_eq!(
            c("set(eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02)),2"),
            c("set(eth(dst=00:00:00:00:00:02)),set(eth(src=00:00:00:00:00:01)),2")
        );
        assert_ne!(c("set(ipv4(src=1.2.3.4)),2"), c("2,set(ipv4(src=1.2.3.4))"));
        // Barriers keep their place.
        assert_ne!(
            c("2,ct(commit,zone=1),recirc(0x1)"),
            c("ct(commit,zone=1),recirc(0x1),2")
        );
        assert_eq!(
            c("3,2,ct(commit,zone=1),recirc(0x1)"),
            c("2,3,ct(commit,zone=1),recirc(0x1)")
        );
        assert_eq!(split_top_level("a(b,c),d"), vec!["a(b,c)", "d"]);
    }

    #[test]
    fn full_trace_parse_and_recirc_normalisation() {
        let raw = "Flow: udp,in_port=1\n\nbridge(\"br0\")\n     >>>> over max translation depth 64 <<<<\nMegaflow: recirc_id=0,eth,ip\nDatapath actions: ct(commit,zone=5),recirc(0x7)\n\n=====\nFlow: recirc_id=0x7,ct_state=new|trk,eth,udp\nMegaflow: recirc_id=0x7,eth,ip\nDatapath actions: 2\nTranslation failed (Recursion too deep), packet is dropped.\n";
        let t = FullTrace::parse(raw).unwrap();
        assert_eq!(t.stages.len(), 2);
        assert_eq!(t.stages[1].datapath_actions, "2");
        assert_eq!(t.errors.len(), 2);
        assert!(FullTrace::parse("Flow: x\n").is_err());
        assert!(FullTrace::parse("Megaflow: x\n").is_err());
        let n = normalize_recirc_ids(&[
            &t.stages[0].datapath_actions,
            &t.stages[1].megaflow,
            "recirc_id=0,recirc(0x8),recirc(0x7)",
        ]);
        assert_eq!(
            n,
            vec![
                "ct(commit,zone=5),recirc(#1)",
                "recirc_id=#1,eth,ip",
                "recirc_id=0,recirc(#2),recirc(#1)"
            ]
        );
    }
}
