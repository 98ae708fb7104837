//! Real Open vSwitch as a test oracle: a private, unprivileged sandbox and `ovs-ofctl` helpers.
//!
//! [`OvsSandbox::start`] does what OVS's own testsuite sandbox does: a private temporary
//! directory holds the database, every unix socket, pidfile and log; `OVS_RUNDIR`,
//! `OVS_LOGDIR`, `OVS_DBDIR` and `OVS_SYSCONFDIR` point there for every child; `ovsdb-server`
//! and `ovs-vswitchd --enable-dummy=override --disable-system` run as children of the test
//! process (never `--detach`), and bridge `br0` uses `datapath_type=dummy` with ports `p1..pN`
//! of `type=dummy` and `ofport_request=i`. `fail-mode=secure` means the bridge starts with an
//! **empty** flow table (checked: `dump-flows` prints no flow), so a table miss drops.
//!
//! Invariants:
//! - A system OVS is never touched: every tool gets an explicit target (`ovs-vsctl
//!   --db=unix:<dir>/db.sock`, `ovs-appctl -t <dir>/ovs-vswitchd.ctl`, `ovs-ofctl ...
//!   unix:<dir>/br0.mgmt`) and the environment points at the private directory.
//! - Every wait is bounded (tools get `--timeout`, polls give up after [`START_TIMEOUT`]).
//! - Dropping the sandbox stops both daemons by their own control sockets (`exit`), then by
//!   PID (`Child::kill`), reaps them and removes the directory. Sandboxes left behind by a
//!   killed test process are cleaned by the next [`OvsSandbox::start`] (their daemons are asked
//!   to exit through the control sockets inside the stale directory; nothing is killed by name).
//!
//! `ovs-ofctl parse-flow` output, for reference (OVS 3.1):
//! ```text
//! usable protocols: any
//! chosen protocol: OpenFlow10-table_id
//! OFPT_FLOW_MOD (xid=0x1): ADD table:3 priority=5,ip cookie:0x10 idle:10 hard:20 actions=drop
//! ```
//! [`parse_flow`] returns the text after `ADD ` (note: that is the *flow-mod* printer, which
//! writes `table:3`, `cookie:0x10`, `idle:10`, `hard:20` with colons, unlike `dump-flows`).
//! The line prefix varies with the chosen protocol (`OFPT_FLOW_MOD (OF1.3) (xid=0x1):`,
//! `NXT_FLOW_MOD (xid=0x1):`), so we search for `): ADD `.
//!
//! # OVS 3.1 behaviour worth knowing (observed, recorded in `data/*.tsv`)
//!
//! ## `ovs-ofctl parse-flow`
//! - The printed text is the flow-mod printer: `table:3 priority=5,ip cookie:0x10 idle:10
//!   hard:20 actions=...`. `table=0` and `cookie=0xffffffffffffffff` print nothing;
//!   `priority` is printed unless it is the default 32768.
//! - Match field order is fixed, not input order: `priority, recirc_id, dp_hash, pkt_mark,
//!   ct_state, ct_zone, ct_mark, ct_label, [eth], <proto shorthand>, metadata, regN, in_port,
//!   dl_vlan, dl_vlan_pcp (or vlan_tci), dl_src, dl_dst, [dl_type], nw_src|ipv6_src|arp_spa,
//!   nw_dst|ipv6_dst|arp_tpa, arp_op, arp_sha, arp_tha, nw_proto, ipv6_label, nw_tos, nw_ecn,
//!   nw_ttl, nw_frag, tp_src|icmp_type, tp_dst|icmp_code, tcp_flags, nd_target, nd_sll, nd_tll`.
//!   `reg15=1,reg14=2` prints `reg14=0x2,reg15=0x1`.
//! - Aliases are canonicalised: `eth_src`→`dl_src`, `ip_src`→`nw_src`, `tcp_src`/`udp_src`/
//!   `sctp_src`→`tp_src`, `icmpv6_type`→`icmp_type`, `ip_ecn`→`nw_ecn`, `ip_frag`→`nw_frag`,
//!   `ip_dscp=46`→`nw_tos=184`, `vlan_vid=0x100a`→`dl_vlan=10`, `vlan_pcp`→`dl_vlan_pcp`,
//!   `vlan_tci=0x100a`→`dl_vlan=10,dl_vlan_pcp=0`, `dl_vlan=0xffff`→`vlan_tci=0x0000` (OF1.3:
//!   `vlan_tci=0x0000/0x1fff`!), `xreg0=0x100000001`→`reg0=0x1,reg1=0x1`, `arp,nw_src=`→
//!   `arp_spa=`, `in_port=65534`→`in_port=LOCAL`, `dl_type=0x0800`→`ip`, `ip,nw_proto=6`→`tcp`,
//!   `ipv6,nw_proto=17`→`udp6`, `ct_state=0x21/0x21`→`+new+trk`.
//! - Values are printed in a per-field style: regs/pkt_mark/metadata/ct_mark in hex (`reg0=0x5`),
//!   ports decimal unless masked (`tp_dst=0x12b0/0xfff0`, value already ANDed with the mask;
//!   `tp_dst=0/0xfc00` → `0x0/0xfc00`), `ipv6_label=0x00001/0x0000f` (5 hex digits when masked),
//!   `recirc_id=5` → `recirc_id=0x5,eth,ip` (nonzero recirc_id prints hex and adds `eth`, but
//!   `recirc_id=0` prints `recirc_id=0`), masks shortened to prefixes where contiguous
//!   (`/255.255.255.0`→`/24`, `/32` dropped, `/0` drops the field), values ANDed with masks
//!   (`vlan_tci=0xf00a/0xefff`→`0xe00a/0xefff`, `arp_tpa=130.60.98.121/21`→`130.60.96.0/21`).
//! - `ct_state` flags print in the fixed order new,est,rel,rpl,inv,trk,snat,dnat, `+`/`-` per
//!   flag (`+trk+est-new` → `-new+est+trk`). `tcp_flags=+syn-ack` keeps flag syntax; a hex
//!   value/mask prints as the flag list over the mask (`0x012/0x0ff` →
//!   `-fin+syn-rst-psh+ack-urg-ece-cwr`), an exact value as `syn`.
//! - Out-of-range values are often silently truncated, not errors: `nw_src=300.0.0.1` →
//!   `44.0.0.1`, `dl_vlan=5000` → `904`, `dl_vlan_pcp=8` → `0`, `nw_tos=3` → `0`,
//!   `ip_dscp=64` → `nw_tos=0`. But `tp_src=70000` and `nw_src=.../33` are errors.
//! - Missing prerequisites are NOT errors: `tp_src=80` (no `tcp`), `nw_src=` (no `ip`),
//!   `icmp_type=8`, `arp_op=1`, `nd_target` without `icmp_type=135/136` are dropped silently
//!   (an `ofp_match|INFO|normalization changed` log line on stderr, see
//!   [`ParseFlowAnswer::log`]). `ip,,actions=drop` is accepted.
//! - Actions, OF1.0 (default): `set_field` is printed as the OF1.0 action when one exists
//!   (`mod_nw_dst:`, `mod_dl_src:`, `mod_tp_dst:`, `mod_nw_tos:40` for `ip_dscp=10`) and
//!   as `load:` otherwise (`set_field:5->reg0` → `load:0x5->NXM_NX_REG0[]`, IPv6 addresses as
//!   two 64-bit loads); `goto_table:1` → `resubmit(,1)`; `pop_vlan` → `strip_vlan`;
//!   `push_vlan` and `set_field:..->vlan_vid` without a VLAN match fail (`no usable protocol` /
//!   `OFPBAC_MATCH_INCONSISTENT`). `resubmit(2)` → `resubmit:2`; `actions=1,2` →
//!   `output:1,output:2`; `output:LOCAL` → `LOCAL`; `CONTROLLER` → `CONTROLLER:65535`;
//!   `controller(max_len=64)` → `CONTROLLER:64`; `note:` bytes are zero-padded to 6, 14, 22, ... bytes
//!   (`note:01.02` → `note:01.02.00.00.00.00`, 8 bytes → 14, `note:` → 6 zero bytes); `load:0x001122...`
//!   drops leading zeros; subfields become NXM names (`reg0[0..15]` → `NXM_NX_REG0[0..15]`).
//! - Actions, OF1.3: the reverse: `mod_*` → `set_field:V->field` (`mod_nw_tos:8` →
//!   `set_field:2->ip_dscp`), `mod_vlan_vid:10` → `push_vlan:0x8100,set_field:4106->vlan_vid`,
//!   `strip_vlan`/`pop_vlan` without a VLAN match, `mod_tp_src` without L4 prerequisite and
//!   `mod_nw_src` without `ip` all fail with `no usable protocol` (they are accepted in OF1.0).
//! - `ct(...)` prints its arguments in the order `commit, table, zone, nat(...), exec(...)`
//!   (`ct(zone=5,table=3)` → `ct(table=3,zone=5)`), `nat([2001:db8::1])` single IPv6 address
//!   loses its brackets but a range keeps them; `exec(set_field:1->ct_mark)` →
//!   `exec(load:0x1->NXM_NX_CT_MARK[])` (OF1.0) or `exec(set_field:0x1->ct_mark)` (OF1.3).
//! - Some texts parse but OVS fails to decode its own encoding (`***decode error: ...***` on
//!   stdout, exit 0): `ct(nat(src=...))` without `commit`, `ip_frag=later` with `tp_src`
//!   (`OFPBMC_BAD_PREREQ`), OF1.3 `vlan_tci=0xf00a/0xefff`. [`parse_flow`] reports them as
//!   `Err("decode error: CODE[: reason]")`.
//!
//! ## `ofproto/trace` `Flow:` lines (see `data/trace_golden*.tsv`)
//! - Field order: `<proto>,in_port=1,<vlan>,dl_src,dl_dst,[dl_type],<l3>,<l4>`. Note `dl_src`
//!   comes before `dl_dst`. The proto shorthand is present only when it applies; otherwise
//!   `dl_type=0x....` is printed after the MACs, and for IP without a known L4 `nw_proto=N` is
//!   printed after the addresses (`ip,...,nw_proto=47,nw_tos=...`).
//! - VLANs: no tag prints `vlan_tci=0x0000`; one tag prints
//!   `dl_vlan=V,dl_vlan_pcp=P,vlan_tci1=0x0000`; two tags (only with `vlan-limit` ≥ 2) print
//!   `dl_vlan=V,dl_vlan_pcp=P,dl_vlan1=V2,dl_vlan_pcp1=P2`. The TPID (0x8100 vs 0x88a8) is
//!   never printed, and the DEI/CFI bit is lost (`tci=0x1005` prints `dl_vlan=5,dl_vlan_pcp=0`).
//!   **OVS's default `other_config:vlan-limit` is 1**: with two tags the inner TPID becomes
//!   the ethertype (`...,dl_type=0x8100`) and nothing after it is parsed. Hence two golden files.
//! - IPv4: `nw_src,nw_dst,[nw_proto],nw_tos,nw_ecn,nw_ttl,nw_frag` then L4. `nw_tos` is the
//!   DSCP part (ECN bits cleared), `nw_ecn` separate. The version nibble is not checked (an
//!   IPv4 ethertype with version 6 parses as IPv4). IHL < 5, total length < IHL*4 or total
//!   length > bytes present ⇒ L3 is all zero (`nw_src=0.0.0.0,...,nw_proto=0,nw_ttl=0,
//!   nw_frag=no`) but the shorthand stays `ip`. Trailing padding beyond total length is fine.
//! - Fragments: first ⇒ `nw_frag=first` with L4 fields; later (offset > 0) ⇒ `nw_frag=later`,
//!   the shorthand still names the protocol (`sctp,`/`udp,`) but no L4 fields are printed at
//!   all. IPv6 later fragments are different: the shorthand is `ipv6` and `nw_proto=44` (the
//!   fragment header), not the upper protocol. IPv6 atomic fragments (offset 0, M=0) are
//!   `nw_frag=no` with L4 parsed.
//! - IPv6: `ipv6_src,ipv6_dst,ipv6_label=0x%05x,[nw_proto],nw_tos,nw_ecn,nw_ttl,nw_frag`.
//!   Extension headers (hop-by-hop anywhere in the chain is accepted, routing, dest-options,
//!   fragment) are skipped. Payload length > bytes present ⇒ addresses and everything zero
//!   (`ipv6_src=::`). A truncated extension header ⇒ addresses KEPT but
//!   `ipv6_label`/`nw_proto`/`nw_tos`/`nw_ecn`/`nw_ttl` all 0.
//! - L4 header shorter than needed (TCP < 20, UDP < 8, ICMP < 4 bytes) ⇒ proto kept, ports
//!   `tp_src=0,tp_dst=0` (`tcp_flags=0`, `icmp_type=0,icmp_code=0`).
//! - `tcp_flags` prints names joined by `|` in bit order
//!   (`fin|syn|rst|psh|ack|urg|ece|cwr|ns`), reserved bits as `[200]|[400]|[800]`, and `0`
//!   when no flag is set; it is printed only for TCP.
//! - ICMPv6 ND (type 135/136 with code 0 only): always prints all three of
//!   `nd_target=...,nd_sll=...,nd_tll=...`, zeros when absent. The SLL/TLL option is taken by
//!   option type regardless of NS/NA (an NS carrying a TLL option sets `nd_tll`). A malformed
//!   option (length 0 or running past the end) zeroes `nd_sll`/`nd_tll` but keeps
//!   `nd_target`. ND with code ≠ 0 prints no `nd_*` fields at all.
//! - ARP/RARP: `arp_spa,arp_tpa,arp_op,arp_sha,arp_tha` (note op after the IPs). Unless
//!   htype=1, ptype=0x0800, hlen=6, plen=4 and the 28 bytes are present, every ARP field is 0
//!   (`arp_op=0`). RARP prints `rarp,` with the same fields.
//! - 802.3 frames (type < 0x600): `dl_type=0x05ff` unless LLC/SNAP with OUI 0, whose inner
//!   ethertype is used (an SNAP-encapsulated IPv6 packet prints as `ipv6`).
//! - Packets shorter than 14 bytes: `ofproto/trace` fails with
//!   `Packet data too short for Ethernet`.
//! - Megaflow with an empty table or a single `actions=drop` rule:
//!   `recirc_id=0,eth,ip,in_port=1,nw_frag=no` (IP: `nw_frag` always un-wildcarded, VLAN never),
//!   `recirc_id=0,eth,arp,in_port=1`, `recirc_id=0,eth,in_port=1,dl_type=0x05ff`; datapath
//!   actions `drop`.

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Upper bound for the daemons to come up.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Seconds given to every OVS tool as `--timeout`.
const TOOL_TIMEOUT_SECS: &str = "10";
/// Prefix of every sandbox directory under the system temp dir.
const DIR_PREFIX: &str = "flowswitch-ovs-";

const OVS_OFCTL: &str = "ovs-ofctl";
const OVS_VSCTL: &str = "ovs-vsctl";
const OVS_APPCTL: &str = "ovs-appctl";
const OVSDB_TOOL: &str = "ovsdb-tool";
const OVSDB_SERVER: &str = "ovsdb-server";
const OVS_VSWITCHD: &str = "ovs-vswitchd";
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// Everything that can go wrong while driving OVS.
#[derive(Debug)]
pub enum OvsError {
    /// A binary or the schema is not installed.
    Missing(String),
    /// Spawning a process or touching the sandbox directory failed.
    Io {
        /// What we were doing.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A tool ran and failed.
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status text.
        status: String,
        /// Its stderr (trimmed).
        stderr: String,
    },
    /// Something did not become ready in time.
    Timeout(String),
    /// A tool's output did not have the expected shape.
    Parse(String),
    /// Bad argument given by the caller (e.g. an empty packet).
    Invalid(String),
}

impl fmt::Display for OvsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OvsError::Missing(s) => write!(f, "Open vSwitch not available: {s}"),
            OvsError::Io { context, source } => write!(f, "{context}: {source}"),
            OvsError::Command {
                cmd,
                status,
                stderr,
            } => write!(f, "`{cmd}` failed ({status}): {stderr}"),
            OvsError::Timeout(s) => write!(f, "timed out: {s}"),
            OvsError::Parse(s) => write!(f, "unexpected OVS output: {s}"),
            OvsError::Invalid(s) => write!(f, "invalid argument: {s}"),
        }
    }
}

impl std::error::Error for OvsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OvsError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> OvsError {
    let context = context.into();
    move |source| OvsError::Io { context, source }
}

/// Why OVS cannot be used here, or `None` if every binary and the schema are present.
pub fn ovs_missing_reason() -> Option<String> {
    for bin in [
        OVS_OFCTL,
        OVS_VSCTL,
        OVS_APPCTL,
        OVSDB_TOOL,
        OVSDB_SERVER,
        OVS_VSWITCHD,
    ] {
        if find_in_path(bin).is_none() {
            return Some(format!(
                "`{bin}` not found in PATH (install Debian's openvswitch-switch)"
            ));
        }
    }
    if !Path::new(SCHEMA).exists() {
        return Some(format!("schema {SCHEMA} not found"));
    }
    None
}

/// True when the OVS binaries needed by the sandbox are installed.
pub fn ovs_available() -> bool {
    ovs_missing_reason().is_none()
}

/// True when `ovs-ofctl` alone is installed (enough for [`parse_flow`]).
pub fn ofctl_available() -> bool {
    find_in_path(OVS_OFCTL).is_some()
}

/// An OVS program's path (`PATH`, then Debian's `/usr/sbin` and `/usr/bin`), or the bare name
/// when it is nowhere (running it then fails with a clear "not found").
pub fn tool_path(bin: &str) -> PathBuf {
    find_in_path(bin).unwrap_or_else(|| PathBuf::from(bin))
}

fn find_in_path(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    // Debian puts the daemons in /usr/sbin, which a non-root PATH may lack.
    dirs.push(PathBuf::from("/usr/sbin"));
    dirs.push(PathBuf::from("/usr/bin"));
    dirs.into_iter().map(|d| d.join(bin)).find(|p| p.is_file())
}

/// The first line `PROGRAM --version` prints (`ovs-ofctl (Open vSwitch) 3.1.0`), or an empty
/// string when it cannot run: what recorded oracle answers are stamped with.
pub fn tool_version(program: &str) -> String {
    Command::new(find_in_path(program).unwrap_or_else(|| PathBuf::from(program)))
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// Skips the current test ([`crate::skip()`]: counted, a failure in CI; then `return`) when OVS
/// is not installed. Call it first in every test that needs the oracle.
#[macro_export]
macro_rules! skip_without_ovs {
    () => {
        if let Some(reason) = $crate::ovs::ovs_missing_reason() {
            $crate::skip(&reason);
            return;
        }
    };
}

fn command_line(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn run_output(cmd: &mut Command) -> Result<Output, OvsError> {
    let line = command_line(cmd);
    cmd.stdin(Stdio::null())
        .output()
        .map_err(io_err(format!("running `{line}`")))
}

/// Runs `cmd`, returns its stdout on success, an [`OvsError::Command`] otherwise.
fn run(cmd: &mut Command) -> Result<String, OvsError> {
    let out = run_output(cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let mut stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if stderr.is_empty() {
            stderr = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        Err(OvsError::Command {
            cmd: command_line(cmd),
            status: out.status.to_string(),
            stderr,
        })
    }
}

/// The result of [`trace`](OvsSandbox::trace): the interesting lines of `ofproto/trace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// Text after `Flow: ` (the flow extracted from the packet, before the pipeline).
    pub flow: String,
    /// Text after `Megaflow: `.
    pub megaflow: String,
    /// Text after `Datapath actions: `.
    pub datapath_actions: String,
    /// The whole output.
    pub raw: String,
}

impl Trace {
    /// Picks the lines out of raw `ofproto/trace` output.
    pub fn parse(raw: &str) -> Result<Trace, OvsError> {
        let find = |prefix: &str| -> Result<String, OvsError> {
            raw.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(|s| s.trim_end().to_string())
                .ok_or_else(|| OvsError::Parse(format!("no `{prefix}` line in trace:\n{raw}")))
        };
        Ok(Trace {
            flow: find("Flow: ")?,
            megaflow: find("Megaflow: ")?,
            datapath_actions: find("Datapath actions: ")?,
            raw: raw.to_string(),
        })
    }
}

/// A private OVS (ovsdb-server + ovs-vswitchd with the dummy datapath) with bridge `br0`.
#[derive(Debug)]
pub struct OvsSandbox {
    dir: PathBuf,
    ovsdb: Option<Child>,
    vswitchd: Option<Child>,
    n_ports: u32,
}

static SANDBOX_SEQ: AtomicU32 = AtomicU32::new(0);

impl OvsSandbox {
    /// Starts a sandbox with bridge `br0` (dummy datapath, `fail-mode=secure`, empty tables)
    /// and ports `p1..=pN` with OpenFlow port numbers `1..=N`.
    pub fn start(n_ports: u32) -> Result<OvsSandbox, OvsError> {
        if let Some(reason) = ovs_missing_reason() {
            return Err(OvsError::Missing(reason));
        }
        cleanup_stale_sandboxes();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "{DIR_PREFIX}{}-{}-{nanos}",
            std::process::id(),
            SANDBOX_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let mut sb = OvsSandbox {
            dir,
            ovsdb: None,
            vswitchd: None,
            n_ports,
        };
        // On error `sb` is dropped, which stops whatever was started and removes the dir.
        sb.boot()?;
        Ok(sb)
    }

    fn boot(&mut self) -> Result<(), OvsError> {
        let dir = self.dir.clone();
        let db = dir.join("conf.db");
        run(self.cmd(OVSDB_TOOL).arg("create").arg(&db).arg(SCHEMA))?;

        let log = |name: &str| -> Result<Stdio, OvsError> {
            let f = fs::File::create(dir.join(name))
                .map_err(io_err(format!("creating {name} in {}", dir.display())))?;
            Ok(Stdio::from(f))
        };

        let ovsdb = self.spawn_daemon(
            OVSDB_SERVER,
            "ovsdb-server",
            &[
                db.display().to_string(),
                format!("--remote=punix:{}", self.db_sock().display()),
                format!("--unixctl={}", self.ovsdb_ctl().display()),
            ],
            &log,
        )?;
        self.ovsdb = Some(ovsdb);
        // The socket file appears at bind(), a moment before listen(): wait until it accepts.
        self.wait_for("ovsdb-server socket", |sb| {
            std::os::unix::net::UnixStream::connect(sb.db_sock()).is_ok()
        })?;
        run(self.vsctl_cmd().arg("--no-wait").arg("init"))?;

        let vswitchd = self.spawn_daemon(
            OVS_VSWITCHD,
            "ovs-vswitchd",
            &[
                "--enable-dummy=override".to_string(),
                "--disable-system".to_string(),
                "--disable-system-route".to_string(),
                format!("unix:{}", self.db_sock().display()),
                format!("--unixctl={}", self.vswitchd_ctl().display()),
            ],
            &log,
        )?;
        self.vswitchd = Some(vswitchd);
        self.wait_for("ovs-vswitchd control socket", |sb| {
            sb.vswitchd_ctl().exists()
        })?;

        // Without --no-wait, ovs-vsctl waits (bounded by --timeout) until vswitchd has
        // applied the configuration, so br0 and its ports exist when it returns.
        let mut vsctl = self.vsctl_cmd();
        vsctl.args([
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=dummy",
            "fail-mode=secure",
            "other-config:datapath-id=0000000000000001",
        ]);
        for i in 1..=self.n_ports {
            vsctl.args([
                "--".to_string(),
                "add-port".to_string(),
                "br0".to_string(),
                format!("p{i}"),
                "--".to_string(),
                "set".to_string(),
                "interface".to_string(),
                format!("p{i}"),
                "type=dummy".to_string(),
                format!("ofport_request={i}"),
            ]);
        }
        run(&mut vsctl)?;
        self.wait_for("br0.mgmt", |sb| sb.mgmt().exists())?;
        // The OpenFlow connection answers and the port numbers are what we asked for.
        let show = self.ofctl(&["show", "br0"])?;
        for i in 1..=self.n_ports {
            if !show.contains(&format!(" {i}(p{i}):")) {
                return Err(OvsError::Parse(format!(
                    "port p{i} is not ofport {i}:\n{show}"
                )));
            }
        }
        Ok(())
    }

    fn wait_for(
        &mut self,
        what: &str,
        ready: impl Fn(&OvsSandbox) -> bool,
    ) -> Result<(), OvsError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut pause = Duration::from_millis(1);
        loop {
            if ready(self) {
                return Ok(());
            }
            for (name, child) in [
                ("ovsdb-server", &mut self.ovsdb),
                ("ovs-vswitchd", &mut self.vswitchd),
            ] {
                if let Some(c) = child
                    && let Ok(Some(status)) = c.try_wait()
                {
                    let log = fs::read_to_string(self.dir.join(format!("{name}.stderr")))
                        .unwrap_or_default();
                    return Err(OvsError::Command {
                        cmd: name.to_string(),
                        status: status.to_string(),
                        stderr: log.trim().to_string(),
                    });
                }
            }
            if Instant::now() >= deadline {
                return Err(OvsError::Timeout(format!(
                    "{what} in {} after {START_TIMEOUT:?}",
                    self.dir.display()
                )));
            }
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// The private directory (database, sockets, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of dummy ports `p1..=pN`.
    pub fn n_ports(&self) -> u32 {
        self.n_ports
    }

    fn db_sock(&self) -> PathBuf {
        self.dir.join("db.sock")
    }

    fn ovsdb_ctl(&self) -> PathBuf {
        self.dir.join("ovsdb-server.ctl")
    }

    fn vswitchd_ctl(&self) -> PathBuf {
        self.dir.join("ovs-vswitchd.ctl")
    }

    fn mgmt(&self) -> PathBuf {
        self.dir.join("br0.mgmt")
    }

    /// A command with the sandbox environment set.
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(find_in_path(program).unwrap_or_else(|| PathBuf::from(program)));
        for var in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
            c.env(var, &self.dir);
        }
        c.current_dir(&self.dir);
        c
    }

    /// Starts one OVS daemon in the sandbox: `args`, then the pidfile and log file named
    /// after `name` in the sandbox directory, no console logging, stdout/stderr to
    /// `<name>.stdout`/`<name>.stderr` (opened by `log`).
    fn spawn_daemon(
        &self,
        program: &str,
        name: &str,
        args: &[String],
        log: &dyn Fn(&str) -> Result<Stdio, OvsError>,
    ) -> Result<Child, OvsError> {
        self.cmd(program)
            .args(args)
            .arg(format!(
                "--pidfile={}",
                self.dir.join(format!("{name}.pid")).display()
            ))
            .arg(format!(
                "--log-file={}",
                self.dir.join(format!("{name}.log")).display()
            ))
            .arg("--no-chdir")
            .arg("-vconsole:off")
            .stdin(Stdio::null())
            .stdout(log(&format!("{name}.stdout"))?)
            .stderr(log(&format!("{name}.stderr"))?)
            .spawn()
            .map_err(io_err(format!("spawning {name}")))
    }

    fn vsctl_cmd(&self) -> Command {
        let mut c = self.cmd(OVS_VSCTL);
        c.arg(format!("--db=unix:{}", self.db_sock().display()))
            .arg(format!("--timeout={TOOL_TIMEOUT_SECS}"));
        c
    }

    /// Runs `ovs-vsctl --db=unix:<dir>/db.sock ARGS...` and returns its stdout.
    pub fn vsctl<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, OvsError> {
        run(self.vsctl_cmd().args(args))
    }

    /// Runs `ovs-appctl -t <dir>/ovs-vswitchd.ctl ARGS...` and returns its stdout.
    pub fn appctl<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, OvsError> {
        run(self
            .cmd(OVS_APPCTL)
            .arg(format!("--timeout={TOOL_TIMEOUT_SECS}"))
            .arg("-t")
            .arg(self.vswitchd_ctl())
            .args(args))
    }

    /// Runs `ovs-ofctl ARGS...` where every argument equal to `br0` is replaced by
    /// `unix:<dir>/br0.mgmt` (so `ofctl(&["dump-flows", "br0"])` works as expected).
    pub fn ofctl<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, OvsError> {
        let mgmt = format!("unix:{}", self.mgmt().display());
        let mut c = self.cmd(OVS_OFCTL);
        c.arg(format!("--timeout={TOOL_TIMEOUT_SECS}"));
        for a in args {
            let a = a.as_ref();
            if a == "br0" {
                c.arg(&mgmt);
            } else {
                c.arg(a);
            }
        }
        run(&mut c)
    }

    /// Like [`ofctl`](Self::ofctl) with `-O OpenFlow13` first.
    pub fn ofctl13<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, OvsError> {
        let mut all: Vec<&OsStr> = vec![OsStr::new("-O"), OsStr::new("OpenFlow13")];
        all.extend(args.iter().map(|a| a.as_ref()));
        self.ofctl(&all)
    }

    /// `ovs-ofctl add-flow br0 FLOW` (OpenFlow 1.3 enabled, so `goto_table` etc. work).
    pub fn add_flow(&self, flow: &str) -> Result<(), OvsError> {
        self.ofctl13(&["add-flow", "br0", flow]).map(drop)
    }

    /// Adds many flows at once through a file and `ovs-ofctl add-flows`.
    pub fn add_flows(&self, flows: &[String]) -> Result<(), OvsError> {
        let path = self.dir.join(format!(
            "flows-{}.txt",
            SANDBOX_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mut text = flows.join("\n");
        text.push('\n');
        fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))?;
        let r = self.ofctl13(&[OsStr::new("add-flows"), OsStr::new("br0"), path.as_os_str()]);
        let _ = fs::remove_file(&path);
        r.map(drop)
    }

    /// Deletes every flow in every table.
    pub fn del_flows(&self) -> Result<(), OvsError> {
        self.ofctl13(&["del-flows", "br0"]).map(drop)
    }

    /// `ovs-ofctl -O OpenFlow13 dump-flows br0`: one string per flow, header line removed.
    pub fn dump_flows(&self) -> Result<Vec<String>, OvsError> {
        let out = self.ofctl13(&["dump-flows", "br0"])?;
        Ok(out
            .lines()
            .filter(|l| !l.is_empty() && !l.contains("_FLOW reply") && !l.contains("ST_FLOW"))
            .map(|l| l.trim().to_string())
            .collect())
    }

    /// Sets `other_config:vlan-limit` (OVS default 1: only the outer VLAN tag is parsed; 0 or
    /// 2 parses both tags). Waits until vswitchd has applied it.
    pub fn set_vlan_limit(&self, limit: u32) -> Result<(), OvsError> {
        self.vsctl(&[
            "set".to_string(),
            "Open_vSwitch".to_string(),
            ".".to_string(),
            format!("other_config:vlan-limit={limit}"),
        ])
        .map(drop)
    }

    /// `ovs-appctl ofproto/trace br0 in_port=N <packet hex>`.
    pub fn trace(&self, in_port: u32, packet: &[u8]) -> Result<Trace, OvsError> {
        if packet.is_empty() {
            return Err(OvsError::Invalid("empty packet".into()));
        }
        let out = self.appctl(&[
            "ofproto/trace".to_string(),
            "br0".to_string(),
            format!("in_port={in_port}"),
            crate::packets::to_hex(packet),
        ])?;
        Trace::parse(&out)
    }

    /// `ovs-appctl ofproto/trace br0 FLOW` (a flow string such as `in_port=1,tcp,tp_dst=80`).
    pub fn trace_flow(&self, flow: &str) -> Result<Trace, OvsError> {
        let out = self.appctl(&["ofproto/trace", "br0", flow])?;
        Trace::parse(&out)
    }

    fn stop_child(&mut self, ctl: PathBuf, which: fn(&mut OvsSandbox) -> &mut Option<Child>) {
        let Some(mut child) = which(self).take() else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            // Polite exit through the daemon's own control socket in our dir.
            let _ = self
                .cmd(OVS_APPCTL)
                .arg("--timeout=5")
                .arg("-t")
                .arg(&ctl)
                .arg("exit")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if !matches!(child.try_wait(), Ok(None)) {
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
        }
        if let Ok(None) = child.try_wait() {
            // By PID: SIGKILL to our own child.
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

impl Drop for OvsSandbox {
    fn drop(&mut self) {
        let ctl = self.vswitchd_ctl();
        self.stop_child(ctl, |s| &mut s.vswitchd);
        let ctl = self.ovsdb_ctl();
        self.stop_child(ctl, |s| &mut s.ovsdb);
        if std::env::var_os("FLOWSWITCH_KEEP_OVS_SANDBOX").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Removes sandboxes left by test processes that died without dropping them (e.g. killed by a
/// timeout). A sandbox belongs to the PID in its directory name; if that process is gone, its
/// daemons are asked to exit through the control sockets in that directory, then the directory
/// is removed. Nothing is killed by name and no other directory is touched.
fn cleanup_stale_sandboxes() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let dir = e.path();
        for ctl in ["ovs-vswitchd.ctl", "ovsdb-server.ctl"] {
            let ctl = dir.join(ctl);
            if ctl.exists() {
                let _ = Command::new(find_in_path(OVS_APPCTL).unwrap_or_else(|| OVS_APPCTL.into()))
                    .arg("--timeout=2")
                    .arg("-t")
                    .arg(&ctl)
                    .arg("exit")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let _ = fs::remove_dir_all(&dir);
    }
}

/// The full answer of `ovs-ofctl parse-flow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseFlowAnswer {
    /// The canonical flow text (after `ADD `) or OVS's error message (without the
    /// `ovs-ofctl: ` prefix; several lines are joined with `\n`).
    pub result: Result<String, String>,
    /// The `chosen protocol:` line's value (empty on error).
    pub protocol: String,
    /// Log lines OVS printed on stderr (e.g. `normalization changed ofp_match` notes when a
    /// field was silently dropped for a missing prerequisite), timestamps removed.
    pub log: Vec<String>,
}

fn ofctl_parse_cmd(text: &str, openflow13: bool) -> Command {
    let mut c = Command::new(find_in_path(OVS_OFCTL).unwrap_or_else(|| OVS_OFCTL.into()));
    if openflow13 {
        c.args(["-O", "OpenFlow13"]);
    }
    c.arg("parse-flow").arg(text);
    c
}

fn is_log_line(l: &str) -> bool {
    // 2026-11-21T23:13:24Z|00001|ofp_match|INFO|...
    let b = l.as_bytes();
    b.len() > 20 && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && l.contains('|')
}

fn is_hex_dump_line(l: &str) -> bool {
    // 00000000  ff ff 00 30 00 00 23 20-00 23 00 00 00 00 00 00
    let b = l.as_bytes();
    b.len() > 10 && b[..8].iter().all(u8::is_ascii_hexdigit) && &b[8..10] == b"  "
}

fn strip_log_prefix(l: &str) -> String {
    // Drop "timestamp|seq|" keep "module|LEVEL|msg".
    l.splitn(3, '|').nth(2).unwrap_or(l).to_string()
}

/// Runs `ovs-ofctl [-O OpenFlow13] parse-flow TEXT` and returns everything it said.
pub fn parse_flow_full(text: &str, openflow13: bool) -> Result<ParseFlowAnswer, OvsError> {
    if text.starts_with('-') {
        // ovs-ofctl would read it as an option.
        return Err(OvsError::Invalid(format!(
            "flow text starting with '-' cannot be passed to ovs-ofctl: {text}"
        )));
    }
    let out = run_output(&mut ofctl_parse_cmd(text, openflow13))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut log = Vec::new();
    let mut errors = Vec::new();
    for l in stderr.lines() {
        if is_log_line(l) {
            log.push(strip_log_prefix(l));
        } else if is_hex_dump_line(l) {
            // Continuation of a log message (OVS dumps the offending bytes).
            if let Some(last) = log.last_mut() {
                last.push('\n');
                last.push_str(l);
            }
        } else if !l.trim().is_empty() {
            errors.push(l.strip_prefix("ovs-ofctl: ").unwrap_or(l).to_string());
        }
    }
    let protocol = stdout
        .lines()
        .find_map(|l| l.strip_prefix("chosen protocol: "))
        .unwrap_or("")
        .to_string();
    let result = if out.status.success() {
        let adds: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.split_once("): ADD ").map(|(_, rest)| rest))
            .collect();
        let decode_errors: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.split_once("): ***decode error: ").map(|(_, rest)| rest))
            .collect();
        match (adds.as_slice(), decode_errors.as_slice()) {
            ([one], []) => Ok(one.to_string()),
            ([], [err]) => {
                // OVS parsed the text but could not decode its own encoding of it; the
                // reason is in a WARN log line (e.g. "CT action requires commit flag ...").
                let code = err.trim_end_matches('*');
                let why: Vec<&str> = log
                    .iter()
                    .filter_map(|l| l.lines().next())
                    .filter(|l| l.contains("|WARN|") && !l.contains("bad action at offset"))
                    .filter_map(|l| l.splitn(3, '|').nth(2))
                    .collect();
                Err(if why.is_empty() {
                    format!("decode error: {code}")
                } else {
                    format!("decode error: {code}: {}", why.join("; "))
                })
            }
            _ => {
                return Err(OvsError::Parse(format!(
                    "expected one `ADD` line from parse-flow {text:?}, got:\n{stdout}"
                )));
            }
        }
    } else {
        if errors.is_empty() {
            errors.push(format!("exit status {}", out.status));
        }
        Err(errors.join("\n"))
    };
    Ok(ParseFlowAnswer {
        result,
        protocol,
        log,
    })
}

/// `ovs-ofctl [-O OpenFlow13] parse-flow TEXT` (no daemon needed): the canonical flow text
/// (the part after `ADD `) or OVS's error message. Problems running the tool itself are
/// reported as `Err` with an `ovs-ofctl could not run` prefix.
pub fn parse_flow(text: &str, openflow13: bool) -> Result<String, String> {
    match parse_flow_full(text, openflow13) {
        Ok(a) => a.result,
        Err(e) => Err(format!("ovs-ofctl could not run: {e}")),
    }
}

/// [`parse_flow_full`] for many texts, run on a few threads; answers are in input order.
pub fn parse_flows(texts: &[String], openflow13: bool) -> Vec<Result<ParseFlowAnswer, OvsError>> {
    let workers = thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let chunk = texts.len().div_ceil(workers).max(1);
    thread::scope(|s| {
        let handles: Vec<_> = texts
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|t| parse_flow_full(t, openflow13))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![Err(OvsError::Parse("parse worker panicked".into()))])
            })
            .collect()
    })
}

/// Datapath-level helpers (`dpctl/*`, `netdev-dummy/receive`) for the dump-flows oracle.
///
/// `dpctl/dump-flows` on the dummy datapath (OVS 3.1) prints a header
/// `flow-dump from the main thread:` (dummy ports are polled by the main thread) and one line
/// per megaflow: `recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),
/// ipv4(dst=10.0.0.2,frag=no), packets:0, bytes:0, used:never, actions:2`. A packet given to
/// `netdev-dummy/receive` is queued on the port and handled on the main thread's next poll, so
/// its flow appears shortly after the command returns ([`OvsSandbox::dp_wait_flow`]).
impl OvsSandbox {
    /// `ovs-appctl netdev-dummy/receive pN <hex>`: the frame arrives on port `pN`.
    pub fn dp_receive(&self, port: u32, packet: &[u8]) -> Result<(), OvsError> {
        if packet.is_empty() {
            return Err(OvsError::Invalid("empty packet".into()));
        }
        self.appctl(&[
            "netdev-dummy/receive".to_string(),
            format!("p{port}"),
            crate::packets::to_hex(packet),
        ])
        .map(drop)
    }

    /// `ovs-appctl dpctl/dump-flows [ARGS]`: the flow lines (header lines removed).
    pub fn dp_dump_flows(&self, args: &[&str]) -> Result<Vec<String>, OvsError> {
        let mut a = vec!["dpctl/dump-flows"];
        a.extend_from_slice(args);
        let out = self.appctl(&a)?;
        Ok(out
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("flow-dump from"))
            .map(|l| l.trim_end().to_string())
            .collect())
    }

    /// `ovs-appctl dpctl/show`.
    pub fn dp_show(&self) -> Result<String, OvsError> {
        self.appctl(&["dpctl/show"])
    }

    /// `ovs-appctl revalidator/purge`: deletes every datapath flow and its upcall state, so
    /// the next packet installs its megaflow afresh.
    pub fn dp_purge(&self) -> Result<(), OvsError> {
        self.appctl(&["revalidator/purge"]).map(drop)
    }

    /// Polls `dpctl/dump-flows` until a line satisfies `want` (bounded by `timeout`);
    /// returns that line.
    pub fn dp_wait_flow(
        &self,
        want: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<String, OvsError> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(l) = self.dp_dump_flows(&[])?.into_iter().find(|l| want(l)) {
                return Ok(l);
            }
            if Instant::now() >= deadline {
                return Err(OvsError::Timeout(format!(
                    "no matching datapath flow after {timeout:?}"
                )));
            }
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_line_detection() {
        assert!(is_log_line(
            "2026-11-21T23:13:24Z|00001|ofp_match|INFO|normalization changed ofp_match, details:"
        ));
        assert!(!is_log_line("ovs-ofctl: unknown keyword foo"));
        assert_eq!(
            strip_log_prefix("2026-11-21T23:13:24Z|00002|ofp_match|INFO| pre: tp_src=80"),
            "ofp_match|INFO| pre: tp_src=80"
        );
    }

    #[test]
    fn trace_parse_picks_lines() {
        let raw = "Flow: udp,in_port=1\n\nbridge(\"br0\")\n-------------\n 0. No match.\n    drop\n\nFinal flow: unchanged\nMegaflow: recirc_id=0,eth,ip,in_port=1,nw_frag=no\nDatapath actions: drop\n";
        let t = Trace::parse(raw).unwrap();
        assert_eq!(t.flow, "udp,in_port=1");
        assert_eq!(t.megaflow, "recirc_id=0,eth,ip,in_port=1,nw_frag=no");
        assert_eq!(t.datapath_actions, "drop");
        assert!(Trace::parse("nothing").is_err());
    }
}
