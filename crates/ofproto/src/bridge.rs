//! A bridge: ports (OpenFlow number, name, datapath number, VLAN mode), 255 OpenFlow tables,
//! flow mods, timeouts, MAC learning and recirculation ids (pooled and reference counted on
//! a datapath's bridge: [`crate::recirc`]).
//!
//! Flow-mod semantics follow OpenFlow 1.0 as OVS implements it (`ofproto.c`):
//! - **add** replaces a rule with the identical match and priority in the same table; the old
//!   counters are kept unless `reset_counts` is set (OVS keeps them for OpenFlow 1.0 adds);
//! - **modify** (non-strict) changes the actions of every rule whose match lies inside the
//!   given match (a *loose* match), in the given table or every table when none is given;
//!   **modify-strict** changes only the rule with exactly that match and priority; when
//!   nothing matched and no cookie mask was given, a modify acts as an add;
//! - **delete** / **delete-strict** select the same way; both honour `cookie=V/M` and
//!   `out_port=P` filters;
//! - idle and hard timeouts are checked by [`Bridge::expire`] against a caller-supplied clock
//!   in milliseconds.
//!
//! A flow mod is validated completely before anything changes, so a bad one leaves every
//! table untouched and returns a [`FlowModError`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use flow::ofp::{Action, FlowSpec, OfPort};

use crate::mac::MacLearning;
use crate::recirc::{RecircIds, RecircPool};
use crate::table::{Backend, FlowTable, OfRule, RuleHandle, loose_match};

/// Number of OpenFlow tables (0..=254).
pub const N_TABLES: usize = 255;
/// OVS's datapath port number of the bridge's own (LOCAL) port with the dummy datapath.
pub const DEFAULT_LOCAL_DP_PORT: u32 = 100;

/// How a port treats VLANs for `NORMAL` (OVS `vlan_mode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VlanMode {
    /// Carries the listed VLANs tagged (`None` = all VLANs, and untagged frames as VLAN 0).
    Trunk(Option<Vec<u16>>),
    /// Untagged frames belong to VLAN `tag`; tagged frames are dropped.
    Access(u16),
    /// Trunk whose untagged frames belong to `tag`; output in `tag` is tagged.
    NativeTagged {
        /// Native VLAN.
        tag: u16,
        /// Other trunked VLANs (`None` = all).
        trunks: Option<Vec<u16>>,
    },
    /// Trunk whose untagged frames belong to `tag`; output in `tag` is untagged.
    NativeUntagged {
        /// Native VLAN.
        tag: u16,
        /// Other trunked VLANs (`None` = all).
        trunks: Option<Vec<u16>>,
    },
}

impl Default for VlanMode {
    fn default() -> Self {
        VlanMode::Trunk(None)
    }
}

impl VlanMode {
    /// The mode `ovs-vsctl set port P tag=… trunks=… [vlan_mode=…]` gives (OVS `port_configure`:
    /// with no explicit mode, a tag means access and trunks are then ignored).
    pub fn from_ovs(tag: Option<u16>, trunks: Option<Vec<u16>>, mode: Option<&str>) -> VlanMode {
        match (mode, tag) {
            (Some("native-tagged"), Some(t)) => VlanMode::NativeTagged { tag: t, trunks },
            (Some("native-untagged"), Some(t)) => VlanMode::NativeUntagged { tag: t, trunks },
            (Some("trunk"), _) => VlanMode::Trunk(trunks),
            (Some("access"), Some(t)) | (None, Some(t)) => VlanMode::Access(t),
            _ => VlanMode::Trunk(trunks),
        }
    }

    /// The native/access VLAN (0 for a trunk).
    pub fn tag(&self) -> u16 {
        match self {
            VlanMode::Trunk(_) => 0,
            VlanMode::Access(t)
            | VlanMode::NativeTagged { tag: t, .. }
            | VlanMode::NativeUntagged { tag: t, .. } => *t,
        }
    }

    /// OVS `xbundle_trunks_vlan` with the native VLAN forced in (and VLAN 0 forced out) for the
    /// native modes, as `bundle_set` does.
    pub fn trunks_vlan(&self, vid: u16) -> bool {
        match self {
            VlanMode::Access(_) => false,
            VlanMode::Trunk(t) => t.as_ref().is_none_or(|t| t.contains(&vid)),
            VlanMode::NativeTagged { tag, trunks } | VlanMode::NativeUntagged { tag, trunks } => {
                if *tag != 0 {
                    if vid == *tag {
                        return true;
                    }
                    if vid == 0 {
                        return false;
                    }
                }
                trunks.as_ref().is_none_or(|t| t.contains(&vid))
            }
        }
    }
}

/// One bridge port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// OpenFlow port number.
    pub ofport: OfPort,
    /// Name (`p1`, `br0`).
    pub name: String,
    /// Datapath port number.
    pub dp_port: u32,
    /// VLAN mode for `NORMAL`.
    pub vlan: VlanMode,
    /// `no-flood` (excluded from `FLOOD`).
    pub no_flood: bool,
}

/// Which flow-mod command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowModCommand {
    /// `add-flow`.
    Add,
    /// `mod-flows`.
    Modify,
    /// `mod-flows --strict`.
    ModifyStrict,
    /// `del-flows`.
    Delete,
    /// `del-flows --strict`.
    DeleteStrict,
}

/// A flow mod: a command and its flow spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    /// The command.
    pub command: FlowModCommand,
    /// Match, priority, table, cookie (and mask), timeouts, out_port filter, actions.
    pub spec: FlowSpec,
    /// Reset the counters of replaced/modified rules (`reset_counts`).
    pub reset_counts: bool,
}

/// Why a flow mod was refused (OVS `ofperr` names where they exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowModError {
    /// `table=255` (or another invalid table) for an add (`OFPFMFC_BAD_TABLE_ID`).
    BadTable(u8),
    /// `goto_table` not to a later table (`OFPBIC_BAD_TABLE_ID`).
    BadGoto {
        /// Table of the rule.
        from: u8,
        /// Target.
        to: u8,
    },
    /// Output to a port that can never be an output (`OFPBAC_BAD_OUT_PORT`).
    BadOutPort(OfPort),
    /// `check_overlap` found an overlapping rule of the same priority (`OFPFMFC_OVERLAP`).
    Overlap,
    /// The flow text did not parse.
    Parse(String),
    // conjunctive matches (issue #17).
    /// `conjunction` beside an action other than `conjunction`/`note`
    /// (`NXBAC_BAD_CONJUNCTION`, OVS `ofpacts_verify`'s message).
    BadConjunction(String),
    /// `group:N` names a group the bridge does not have (`OFPBAC_BAD_OUT_GROUP`).
    BadOutGroup(u32),
}

impl fmt::Display for FlowModError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowModError::BadTable(t) => write!(f, "OFPFMFC_BAD_TABLE_ID: table {t}"),
            FlowModError::BadGoto { from, to } => write!(
                f,
                "OFPBIC_BAD_TABLE_ID: goto_table:{to} from table {from} (must go forward)"
            ),
            FlowModError::BadOutPort(p) => write!(f, "OFPBAC_BAD_OUT_PORT: output to {p}"),
            FlowModError::Overlap => write!(f, "OFPFMFC_OVERLAP: overlapping rule exists"),
            FlowModError::Parse(e) => write!(f, "bad flow syntax: {e}"),
            FlowModError::BadConjunction(e) => write!(f, "NXBAC_BAD_CONJUNCTION: {e}"),
            FlowModError::BadOutGroup(g) => write!(f, "OFPBAC_BAD_OUT_GROUP: group {g}"),
        }
    }
}

impl std::error::Error for FlowModError {}

/// What a flow mod did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowModResult {
    /// Rules added.
    pub added: usize,
    /// Rules whose actions/cookie changed (including replaced ones).
    pub modified: usize,
    /// Rules removed.
    pub deleted: usize,
}

/// A rule removed by [`Bridge::expire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// Its table.
    pub table: u8,
    /// The rule.
    pub rule: OfRule,
    /// `"idle"` or `"hard"`.
    pub reason: &'static str,
}

/// An OpenFlow bridge.
///
/// The tables, ports and version are plain data owned by the bridge; the MAC table and the
/// recirculation ids are *shared* by [`Bridge::replica`]s (translation changes them, on any
/// thread, so every copy of the tables must see the same ones). See `ARCHITECTURE.md`
/// ("Concurrency") for how a datapath's bridge is published to lock-free readers.
#[derive(Debug)]
pub struct Bridge {
    /// Name (`br0`).
    pub name: String,
    pub(crate) tables: Vec<FlowTable>,
    pub(crate) ports: BTreeMap<OfPort, Port>,
    /// MAC learning table for `NORMAL` (shared by replicas).
    pub mac: MacLearning,
    /// Table version: bumped by every flow mod that changed something (for revalidation).
    pub version: u64,
    /// Shared by replicas.
    pub(crate) recirc: Arc<Mutex<RecircIds>>,
    /// The group table ([`crate::group`]).
    pub(crate) groups: crate::group::GroupTable,
    /// A table miss sends the packet to the controllers (OVS's `miss_rule`): some OpenFlow
    /// connection with controller id 0 speaks OpenFlow 1.0–1.2 (or has not said yet), as
    /// OVS's `connmgr_wants_packet_in_on_miss`. Off: a miss drops.
    pub packet_in_on_miss: bool,
}

impl Bridge {
    /// An empty bridge (no ports, empty tables) using `backend` for its tables.
    pub fn new(name: &str, backend: Backend) -> Bridge {
        Bridge {
            name: name.to_string(),
            tables: (0..N_TABLES).map(|_| FlowTable::new(backend)).collect(),
            ports: BTreeMap::new(),
            mac: MacLearning::default(),
            version: 0,
            recirc: Arc::new(Mutex::new(RecircIds::new())),
            groups: Default::default(),
            packet_in_on_miss: false,
        }
    }

    /// A second copy of the bridge: tables, ports and version copied, the MAC table and the
    /// recirculation ids shared (the two copies a publisher keeps; see the type's doc). The
    /// two copies stay equal under the same sequence of flow mods, credits and expiries, which
    /// are deterministic (rule handles are slab slots filled in order).
    pub fn replica(&self) -> Bridge {
        Bridge {
            name: self.name.clone(),
            tables: self.tables.clone(),
            ports: self.ports.clone(),
            mac: self.mac.clone(),
            version: self.version,
            recirc: self.recirc.clone(),
            groups: self.groups.clone(),
            packet_in_on_miss: self.packet_in_on_miss,
        }
    }

    /// Where `self` and `other` differ in what flow mods, credits and expiries change
    /// (version, ports, every table's rules with handles, matches, actions and counters), or
    /// `Ok` if nowhere: the check that two [`Bridge::replica`]s stayed equal.
    pub fn diff(&self, other: &Bridge) -> Result<(), String> {
        if self.version != other.version {
            return Err(format!("version {} vs {}", self.version, other.version));
        }
        if self.ports != other.ports {
            return Err("ports differ".into());
        }
        if self.groups != other.groups {
            return Err("groups differ".into());
        }
        for (t, (a, b)) in self.tables.iter().zip(&other.tables).enumerate() {
            let (ra, rb) = (a.sorted(), b.sorted());
            if ra != rb {
                return Err(format!(
                    "table {t}: {} vs {} rules, first difference {:?}",
                    ra.len(),
                    rb.len(),
                    ra.iter().zip(&rb).find(|(x, y)| x != y)
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn recirc_ids(&self) -> MutexGuard<'_, RecircIds> {
        self.recirc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pools recirculation ids by frozen state from now on (a datapath's bridge; see
    /// [`crate::recirc`]): one reference-counted id per frozen state, held by the megaflows
    /// that use or match it, freed after a grace period once none does. Ids already handed
    /// out are not pooled. Translations then take a reference to a state's id when they
    /// freeze it (`XlateOut::recirc_refs`), so concurrent translations agree on it.
    pub fn pool_recirc_ids(&self) {
        self.recirc_ids().start_pool();
    }

    /// Number of pooled frozen states known (live, or released and waiting out their grace).
    pub fn pooled_recirc_ids(&self) -> usize {
        self.recirc_pool().stats().known()
    }

    /// A handle on the recirculation ids (shared with every replica): frozen states by id,
    /// references, grace-period maintenance, counters.
    pub fn recirc_pool(&self) -> RecircPool {
        RecircPool::new(self.recirc.clone())
    }

    /// The bridge `testutil::ovs::OvsSandbox::start(n)` builds: `br0` with its LOCAL port
    /// (datapath port 100) and trunk ports `p1..pN` numbered `1..N` (OpenFlow and datapath).
    pub fn ovs_sandbox(n_ports: u16, backend: Backend) -> Bridge {
        let mut b = Bridge::new("br0", backend);
        b.add_port(Port {
            ofport: OfPort::LOCAL,
            name: "br0".into(),
            dp_port: DEFAULT_LOCAL_DP_PORT,
            vlan: VlanMode::default(),
            no_flood: false,
        });
        for i in 1..=n_ports {
            b.add_port(Port {
                ofport: OfPort(i),
                name: format!("p{i}"),
                dp_port: u32::from(i),
                vlan: VlanMode::default(),
                no_flood: false,
            });
        }
        b
    }

    /// Turns packet-ins on table misses on or off ([`Bridge::packet_in_on_miss`]); a change
    /// bumps the version, so cached megaflows of misses are translated again.
    pub fn set_packet_in_on_miss(&mut self, on: bool) {
        if self.packet_in_on_miss != on {
            self.packet_in_on_miss = on;
            self.version += 1;
        }
    }

    /// Adds or replaces a port.
    pub fn add_port(&mut self, port: Port) {
        self.ports.insert(port.ofport, port);
        self.version += 1;
    }

    /// Removes a port.
    pub fn remove_port(&mut self, ofport: OfPort) -> Option<Port> {
        self.version += 1;
        self.ports.remove(&ofport)
    }

    /// Sets a port's VLAN mode; false if there is no such port.
    pub fn set_port_vlan(&mut self, ofport: OfPort, mode: VlanMode) -> bool {
        match self.ports.get_mut(&ofport) {
            Some(p) => {
                p.vlan = mode;
                self.version += 1;
                true
            }
            None => false,
        }
    }

    /// A port by OpenFlow number.
    pub fn port(&self, ofport: OfPort) -> Option<&Port> {
        self.ports.get(&ofport)
    }

    /// A port by name.
    pub fn port_by_name(&self, name: &str) -> Option<&Port> {
        self.ports.values().find(|p| p.name == name)
    }

    /// Ports in OpenFlow-number order.
    pub fn ports(&self) -> impl Iterator<Item = &Port> {
        self.ports.values()
    }

    /// Table `t`.
    pub fn table(&self, t: u8) -> Option<&FlowTable> {
        self.tables.get(usize::from(t))
    }

    /// Total number of rules.
    pub fn n_rules(&self) -> usize {
        self.tables.iter().map(FlowTable::len).sum()
    }

    /// Applies a flow mod at time `now_ms`. On error nothing changed.
    pub fn flow_mod(&mut self, fm: &FlowMod, now_ms: u64) -> Result<FlowModResult, FlowModError> {
        let spec = &fm.spec;
        match fm.command {
            FlowModCommand::Add => self.add(spec, fm.reset_counts, now_ms),
            FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
                let strict = fm.command == FlowModCommand::ModifyStrict;
                for t in self.target_tables(spec.table) {
                    self.validate_actions(t, &spec.actions)?;
                }
                let hits = self.select(spec, strict);
                if hits.is_empty() {
                    if spec.cookie_mask == 0 {
                        return self.add(spec, fm.reset_counts, now_ms);
                    }
                    return Ok(FlowModResult::default());
                }
                for (t, h) in &hits {
                    self.tables[usize::from(*t)].set_actions(*h, spec.actions.clone());
                    if let Some(r) = self.tables[usize::from(*t)].get_mut(*h) {
                        r.modified_ms = now_ms;
                        if spec.cookie_mask == 0 {
                            r.cookie = spec.cookie;
                        }
                        if fm.reset_counts {
                            r.n_packets = 0;
                            r.n_bytes = 0;
                        }
                    }
                }
                self.version += 1;
                Ok(FlowModResult {
                    modified: hits.len(),
                    ..Default::default()
                })
            }
            FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
                let hits = self.select(spec, fm.command == FlowModCommand::DeleteStrict);
                for (t, h) in &hits {
                    self.tables[usize::from(*t)].remove(*h);
                }
                if !hits.is_empty() {
                    self.version += 1;
                }
                Ok(FlowModResult {
                    deleted: hits.len(),
                    ..Default::default()
                })
            }
        }
    }

    fn target_tables(&self, t: Option<u8>) -> Vec<u8> {
        match t {
            Some(t) if usize::from(t) < N_TABLES => vec![t],
            Some(_) => vec![],
            None => (0..N_TABLES as u8).collect(),
        }
    }

    fn validate_actions(&self, table: u8, actions: &[Action]) -> Result<(), FlowModError> {
        flow::text::conj::check_conjunction_mix(actions)
            .map_err(|(_, msg)| FlowModError::BadConjunction(msg))?;
        for a in actions {
            match a {
                Action::GotoTable(to) if *to <= table || usize::from(*to) >= N_TABLES => {
                    return Err(FlowModError::BadGoto {
                        from: table,
                        to: *to,
                    });
                }
                Action::Output { port, .. } | Action::OutputTrunc { port, .. }
                    if port.0 == 0 || *port == OfPort::ANY || *port == OfPort::UNSET =>
                {
                    return Err(FlowModError::BadOutPort(*port));
                }
                Action::Resubmit { table: Some(t), .. } if usize::from(*t) >= N_TABLES => {
                    return Err(FlowModError::BadTable(*t));
                }
                // Issue #17: a nested list is checked like the outer one.
                Action::Clone(inner) | Action::WriteActions(inner) => {
                    self.validate_actions(table, inner)?
                }
                Action::Group(g) if self.groups.get(*g).is_none() => {
                    return Err(FlowModError::BadOutGroup(*g));
                }
                Action::Enqueue { port, .. } if port.0 == 0 => {
                    return Err(FlowModError::BadOutPort(*port));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn add(
        &mut self,
        spec: &FlowSpec,
        reset_counts: bool,
        now_ms: u64,
    ) -> Result<FlowModResult, FlowModError> {
        let t = spec.table.unwrap_or(0);
        if usize::from(t) >= N_TABLES {
            return Err(FlowModError::BadTable(t));
        }
        self.validate_actions(t, &spec.actions)?;
        let table = &mut self.tables[usize::from(t)];
        if spec.check_overlap {
            let overlap = table.iter().any(|(_, r)| {
                r.priority == spec.priority
                    && overlaps(&r.match_, &spec.match_)
                    && r.match_ != spec.match_
            });
            if overlap {
                return Err(FlowModError::Overlap);
            }
        }
        let mut rule = OfRule {
            match_: spec.match_,
            priority: spec.priority,
            cookie: spec.cookie,
            idle_timeout: spec.idle_timeout,
            hard_timeout: spec.hard_timeout,
            importance: spec.importance,
            actions: spec.actions.clone(),
            created_ms: now_ms,
            modified_ms: now_ms,
            used_ms: now_ms,
            n_packets: 0,
            n_bytes: 0,
        };
        let mut res = FlowModResult {
            added: 1,
            ..Default::default()
        };
        if let Some(old) = table.find_strict(&spec.match_, spec.priority) {
            if let Some(o) = table.remove(old)
                && !reset_counts
            {
                rule.n_packets = o.n_packets;
                rule.n_bytes = o.n_bytes;
            }
            res = FlowModResult {
                modified: 1,
                ..Default::default()
            };
        }
        table.insert(rule);
        self.version += 1;
        Ok(res)
    }

    /// Rules selected by a modify/delete: (table, handle).
    pub fn select(&self, spec: &FlowSpec, strict: bool) -> Vec<(u8, RuleHandle)> {
        let mut out = Vec::new();
        let keep = |r: &OfRule| {
            (r.cookie ^ spec.cookie) & spec.cookie_mask == 0
                && spec
                    .out_port
                    .is_none_or(|p| p == OfPort::ANY || r.outputs_to(p))
        };
        for t in self.target_tables(spec.table) {
            let table = &self.tables[usize::from(t)];
            if strict {
                // At most one rule has this (match, priority): the exact index finds it.
                if let Some(h) = table.find_strict(&spec.match_, spec.priority)
                    && table.get(h).is_some_and(keep)
                {
                    out.push((t, h));
                }
                continue;
            }
            for (h, r) in table.iter() {
                if loose_match(&r.match_, &spec.match_) && keep(r) {
                    out.push((t, h));
                }
            }
        }
        out.sort();
        out
    }

    /// Whether any rule has an idle or hard timeout (if not, [`Self::expire`] has nothing
    /// to do).
    pub fn has_timeouts(&self) -> bool {
        self.tables.iter().any(|t| t.n_timed() > 0)
    }

    /// Removes every rule whose idle or hard timeout has passed at `now_ms`.
    pub fn expire(&mut self, now_ms: u64) -> Vec<Expired> {
        let mut out = Vec::new();
        for (t, table) in self.tables.iter_mut().enumerate() {
            if table.n_timed() == 0 {
                // Nothing here can expire: no scan (the revalidator expires after every
                // flow mod; a scan of a 100k-rule table each time would dominate a load).
                continue;
            }
            let dead: Vec<(RuleHandle, &'static str)> = table
                .iter()
                .filter_map(|(h, r)| r.expired(now_ms).map(|why| (h, why)))
                .collect();
            for (h, reason) in dead {
                if let Some(rule) = table.remove(h) {
                    out.push(Expired {
                        table: t as u8,
                        rule,
                        reason,
                    });
                }
            }
        }
        if !out.is_empty() {
            self.version += 1;
        }
        out
    }

    /// Credits `packets`/`bytes` to the rules a translation hit and marks them used at `now_ms`.
    pub fn credit(&mut self, rules: &[(u8, RuleHandle)], packets: u64, bytes: u64, now_ms: u64) {
        for (t, h) in rules {
            if let Some(r) = self
                .tables
                .get_mut(usize::from(*t))
                .and_then(|tb| tb.get_mut(*h))
            {
                r.n_packets += packets;
                r.n_bytes += bytes;
                r.used_ms = r.used_ms.max(now_ms);
            }
        }
    }

    /// Parses and applies one line of `ovs-ofctl` flow text for `command` (`add-flow` syntax for
    /// adds; `mod-flows`/`del-flows` syntax otherwise).
    pub fn flow_mod_text(
        &mut self,
        command: FlowModCommand,
        text: &str,
        now_ms: u64,
    ) -> Result<FlowModResult, FlowModError> {
        let spec = match command {
            FlowModCommand::Add => flow::text::parse_flow(text).or_else(|e10| {
                flow::text::parse_flow_with(text, flow::text::Dialect::OpenFlow13).map_err(|_| e10)
            }),
            _ => flow::text::parse_flow_filter(text),
        }
        .map_err(|e| FlowModError::Parse(e.to_string()))?;
        self.flow_mod(
            &FlowMod {
                command,
                spec,
                reset_counts: false,
            },
            now_ms,
        )
    }

    /// Adds every non-empty, non-comment line of an `ovs-ofctl add-flows` file. All or nothing:
    /// on the first bad line, the error names the line and no flow from the text was added.
    pub fn add_flows_text(&mut self, text: &str, now_ms: u64) -> Result<usize, String> {
        let mut specs = Vec::new();
        for (i, line) in text.lines().enumerate() {
            // As `ovs-ofctl add-flows` (`ds_get_preprocessed_line`): a `#` anywhere starts a
            // comment that runs to the end of the line; a line left blank is skipped.
            let l = line.split_once('#').map_or(line, |(flow, _)| flow).trim();
            if l.is_empty() {
                continue;
            }
            let spec = flow::text::parse_flow(l)
                .or_else(|e| {
                    flow::text::parse_flow_with(l, flow::text::Dialect::OpenFlow13).map_err(|_| e)
                })
                .map_err(|e| format!("line {}: {e}", i + 1))?;
            let t = spec.table.unwrap_or(0);
            self.validate_actions(t, &spec.actions)
                .map_err(|e| format!("line {}: {e}", i + 1))?;
            specs.push(spec);
        }
        let n = specs.len();
        for spec in specs {
            self.add(&spec, false, now_ms)
                .map_err(|e| format!("internal: validated flow refused: {e}"))?;
        }
        Ok(n)
    }
}

/// Whether some packet matches both.
fn overlaps(a: &flow::ofp::Match, b: &flow::ofp::Match) -> bool {
    let mut common = a.mask;
    for (c, m) in common.w.iter_mut().zip(b.mask.w) {
        *c &= m;
    }
    a.key.eq_masked(&b.key, &common)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b() -> Bridge {
        Bridge::ovs_sandbox(4, Backend::Linear)
    }

    fn dump(b: &Bridge) -> Vec<String> {
        let mut v = Vec::new();
        for t in 0..N_TABLES as u8 {
            for (_, r) in b.table(t).map(|t| t.sorted()).unwrap_or_default() {
                v.push(format!(
                    "table={t},{} cookie={:#x} actions={}",
                    flow::text::format_match_priority(&r.match_, r.priority),
                    r.cookie,
                    flow::text::format_actions(&r.actions)
                ));
            }
        }
        v
    }

    #[test]
    fn add_replace_keeps_counters() {
        let mut br = b();
        use FlowModCommand::*;
        br.flow_mod_text(Add, "priority=5,ip,actions=output:1", 0)
            .unwrap();
        let (t, h) = (0u8, br.table(0).unwrap().iter().next().unwrap().0);
        br.credit(&[(t, h)], 3, 300, 10);
        let r = br
            .flow_mod_text(Add, "priority=5,ip,actions=output:2", 20)
            .unwrap();
        assert_eq!(r.modified, 1);
        let rules = br.table(0).unwrap().sorted();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].1.n_packets, 3);
        assert_eq!(rules[0].1.actions, vec![Action::output(OfPort(2))]);
    }

    #[test]
    fn modify_delete_loose_and_strict() {
        let mut br = b();
        use FlowModCommand::*;
        for f in [
            "table=0,priority=5,ip,nw_dst=10.0.0.1,actions=1",
            "table=0,priority=6,ip,actions=2",
            "table=1,priority=5,ip,nw_dst=10.0.0.1,cookie=0x10,actions=3",
            "table=1,priority=7,arp,actions=2",
        ] {
            br.flow_mod_text(Add, f, 0).unwrap();
        }
        // loose modify over all tables: every ip rule inside `ip`
        let r = br.flow_mod_text(Modify, "ip,actions=4", 0).unwrap();
        assert_eq!(r.modified, 3);
        // strict delete needs the priority
        assert_eq!(
            br.flow_mod_text(DeleteStrict, "table=1,ip,nw_dst=10.0.0.1", 0)
                .unwrap()
                .deleted,
            0
        );
        assert_eq!(
            br.flow_mod_text(DeleteStrict, "table=1,priority=5,ip,nw_dst=10.0.0.1", 0)
                .unwrap()
                .deleted,
            1
        );
        // cookie filter
        br.flow_mod_text(Add, "table=2,cookie=0x21,actions=1", 0)
            .unwrap();
        br.flow_mod_text(Add, "table=2,priority=9,cookie=0x31,actions=1", 0)
            .unwrap();
        assert_eq!(
            br.flow_mod_text(Delete, "cookie=0x20/0xf0", 0)
                .unwrap()
                .deleted,
            1
        );
        // out_port filter
        assert_eq!(
            br.flow_mod_text(Delete, "out_port=2", 0).unwrap().deleted,
            1
        );
        assert_eq!(br.n_rules(), 3, "{:#?}", dump(&br));
        assert_eq!(br.flow_mod_text(Delete, "", 0).unwrap().deleted, 3);
    }

    #[test]
    fn bad_mods_leave_tables_alone() {
        let mut br = b();
        use FlowModCommand::*;
        br.flow_mod_text(Add, "table=3,actions=1", 0).unwrap();
        let before = dump(&br);
        assert!(
            br.flow_mod_text(Add, "table=3,actions=goto_table:2", 0)
                .is_err()
        );
        let spec = FlowSpec {
            table: Some(3),
            actions: vec![Action::GotoTable(3)],
            ..Default::default()
        };
        let fm = FlowMod {
            command: Add,
            spec,
            reset_counts: false,
        };
        assert!(matches!(
            br.flow_mod(&fm, 0),
            Err(FlowModError::BadGoto { from: 3, to: 3 })
        ));
        assert!(
            br.flow_mod_text(Add, "table=3,ip,nw_dst=1.2.3.4/33,actions=1", 0)
                .is_err()
        );
        assert!(
            br.flow_mod_text(Modify, "table=3,actions=goto_table:1", 0)
                .is_err()
        );
        assert!(
            br.add_flows_text("actions=1\nfoo=bar,actions=1\n", 0)
                .is_err()
        );
        assert_eq!(dump(&br), before);
    }

    #[test]
    fn timeouts_expire() {
        let mut br = b();
        use FlowModCommand::*;
        br.flow_mod_text(Add, "idle_timeout=10,ip,actions=1", 0)
            .unwrap();
        br.flow_mod_text(Add, "hard_timeout=5,arp,actions=1", 0)
            .unwrap();
        assert!(br.expire(4_999).is_empty());
        let e = br.expire(5_000);
        assert_eq!((e.len(), e[0].reason), (1, "hard"));
        let (h, _) = br.table(0).unwrap().iter().next().unwrap();
        br.credit(&[(0, h)], 1, 60, 9_000);
        assert!(br.expire(18_999).is_empty());
        assert_eq!(br.expire(19_000)[0].reason, "idle");
        assert_eq!(br.n_rules(), 0);
    }

    #[test]
    fn vlan_modes() {
        let m = VlanMode::from_ovs(Some(10), Some(vec![20]), None);
        assert_eq!(m, VlanMode::Access(10));
        let n = VlanMode::from_ovs(Some(10), Some(vec![20]), Some("native-untagged"));
        assert!(n.trunks_vlan(10) && n.trunks_vlan(20) && !n.trunks_vlan(0) && !n.trunks_vlan(30));
        assert!(VlanMode::Trunk(None).trunks_vlan(0));
        assert!(!VlanMode::Trunk(Some(vec![5])).trunks_vlan(0));
    }
}
