//! The upcall handler: a datapath miss translated through the OpenFlow tables.
//!
//! [`OfprotoUpcall`] implements [`datapath::Upcall`] over a [`SharedBridge`]: it runs
//! `ofproto::xlate` on the missed key and converts the datapath actions xlate emits
//! ([`OdpAction`](ofproto::OdpAction), OVS's `Datapath actions:` vocabulary) into what the
//! PMD executes ([`DpAction`]). Used by `demo`, `bench` and the revalidator.
//!
//! # Sharing the bridge
//!
//! One [`ofproto::Bridge`] is used by three parties: the upcall handler (on the PMD thread,
//! only on a miss — never per hit), the control path (flow mods) and the revalidator
//! ([`crate::revalidate`]). It lives in a [`SharedBridge`], published through a
//! [`DoubleBuffer`]: translations read the published copy lock-free ([`SharedBridge::read`])
//! and never wait for a flow mod; flow mods, rule-stat credits and expiries are operations
//! applied to both copies ([`SharedBridge::write`]; a writer may wait for readers of the
//! older copy, never the reverse). What translation itself changes — the MAC table and the
//! recirculation ids — is shared by both copies under its own short lock (`ofproto::mac`).
//! Beside it: the clock every party reads MAC-learning time from and a change signal
//! ([`SharedBridge::notify`]) that wakes a revalidator thread after a flow mod or a MAC-table
//! change.
//!
//! # Ukeys (OVS `struct udpif_key`)
//!
//! When a revalidator is attached ([`crate::revalidate::Revalidator::upcall`]), every answer
//! is also recorded as a [`Ukey`] keyed by the megaflow it installs (masked key, mask as
//! installed): the full packet key it was translated from, the table version and MAC-table
//! generation it was made at, the MAC entries NORMAL consulted, the rules it hit (for stats)
//! and the MACs it learned (refreshed while the megaflow keeps hitting). The revalidator adopts
//! the ukey of each new megaflow; a megaflow without one is revalidated from its masked key.
//!
//! # Answers, failures and the install check
//!
//! Every translation gives an answer: a translation that fails (a resubmit loop, too many
//! actions) or gives actions the datapath refuses is answered with a drop over the bits it
//! looked at ([`dp_answer`]), so the flow's later packets hit that megaflow instead of
//! translating again for every packet (OVS does the same); only an upcall for an unknown
//! recirculation id, or with the action table full, fails (nothing installed). With a
//! revalidator attached, the handler applies the flow limit ([`crate::udpif::FlowLimit`]:
//! over it, [`datapath::Upcall::may_install`] says no and the packet is forwarded without a
//! megaflow) and checks each install right after it happened
//! ([`datapath::Upcall::installed`]: still the current table version and MAC entries, else
//! the PMD removes it again; see [`crate::revalidate`], "Races"). Every outcome is counted
//! in [`crate::udpif::UpcallCounters`].
//!
//! # Frozen states and recirculation ids
//!
//! The bridge pools one reference-counted recirculation id per frozen state
//! (`ofproto::recirc`; this handle: [`SharedBridge::recirc`]). A ukey holds references
//! ([`Ukey::recircs`]) to the ids its megaflow uses in its actions — taken by the translation
//! (`XlateOut::recirc_refs`) — and to the id it matches: an upcall for a recirculated packet
//! ([`SharedBridge::resume_in`]) reads the frozen state and references its id in one step, so
//! a second-pass megaflow keeps its id, and no megaflow is left matching an id once it is
//! freed. An upcall for an unknown id (never given, or freed after its grace) fails, counted
//! by the PMD as `upcall_failed`; a released id not freed yet still resumes in its own state.
//! The revalidator holds the ukeys of installed megaflows and drops them (releasing the ids)
//! when it deletes the megaflows; it also runs the pool's grace-period maintenance.
//!
//! # Lock order
//!
//! No two of these locks are ever held at once: the bridge writers' lock (inside
//! [`SharedBridge::write`]), the ukey-store lock, the change-signal lock and the datapath
//! classifier's writer lock (taken by `Dpcls::insert` and `Dpcls::remove`). Each is taken,
//! used and released on its own. The MAC-table and recirculation-id locks are leaves: taken
//! inside a translation or a write operation, for one lookup or update, never while taking
//! another. The recirculation-id lock (which also guards the frozen states: there is no
//! separate frozen-state lock) is also taken whenever a ukey is dropped or cloned (its
//! [`Ukey::recircs`]), which may happen under the ukey-store lock; as a leaf it cannot
//! deadlock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use classifier::double_buffer::{DoubleBuffer, ReadGuard};
use std::time::{Duration, Instant};

use crate::dp_actions::to_dp_actions;
use crate::packet_in::{PACKET_FIELDS, PIPELINE_FIELDS, PacketIns, packet_in_of};
use crate::udpif::{Udpif, UpcallCounters};
use datapath::{ActionTable, DpAction, DpFlow, Ufid, UfidBuild, Upcall, UpcallError};
use flow::field::FieldId;
use flow::ofp::{ControllerCookie, OfPort};
use flow::{FlowKey, FlowMask};
use ofproto::recirc::{RecircPool, RecircRef};
use ofproto::table::RuleHandle;
use ofproto::xlate::XlateError;
use ofproto::{Bridge, FlowModCommand, FlowModError, XlateIn, XlateOut, xlate};

/// Where MAC-learning and flow-mod time comes from.
#[derive(Debug)]
enum Clock {
    /// Milliseconds since the bridge was shared.
    Real(Instant),
    /// Set by the owner (tests, replays).
    Manual(AtomicU64),
}

/// A bridge shared by the upcall handler, the control path and the revalidator. See the
/// module doc.
#[derive(Debug)]
pub struct SharedBridge {
    bridge: DoubleBuffer<Bridge>,
    clock: Clock,
    changes: Mutex<u64>,
    changed: Condvar,
    /// The bridge's recirculation ids (shared by both copies): frozen translation states by
    /// id (OVS `recirc_id_node`), reference counted (`ofproto::recirc`).
    recirc: RecircPool,
    /// Packet-ins for the OpenFlow connections ([`crate::packet_in`]).
    packet_ins: PacketIns,
    /// OpenFlow connections that want packet-ins on table misses
    /// ([`Self::want_packet_in_on_miss`]).
    miss_wanted: Mutex<usize>,
}

impl SharedBridge {
    /// `bridge`, shared, on a real clock starting at 0 now.
    pub fn new(bridge: Bridge) -> Arc<SharedBridge> {
        Self::with_clock(bridge, Clock::Real(Instant::now()))
    }

    /// `bridge`, shared, on a clock that only [`SharedBridge::set_now_ms`] moves.
    pub fn with_manual_clock(bridge: Bridge, now_ms: u64) -> Arc<SharedBridge> {
        Self::with_clock(bridge, Clock::Manual(AtomicU64::new(now_ms)))
    }

    fn with_clock(bridge: Bridge, clock: Clock) -> Arc<SharedBridge> {
        // A datapath's bridge: one recirculation id per frozen state.
        bridge.pool_recirc_ids();
        let replica = bridge.replica();
        let recirc = bridge.recirc_pool();
        Arc::new(SharedBridge {
            bridge: DoubleBuffer::new(bridge, replica),
            clock,
            changes: Mutex::new(0),
            changed: Condvar::new(),
            recirc,
            packet_ins: PacketIns::default(),
            miss_wanted: Mutex::new(0),
        })
    }

    /// The bridge's recirculation ids: frozen states, references, grace-period maintenance
    /// (the revalidator runs it once per pass), counters.
    pub fn recirc(&self) -> &RecircPool {
        &self.recirc
    }

    /// The translation input for a datapath key: table 0 on the first pass; for a
    /// recirculated packet (`recirc_id != 0`) the frozen state's table, with the metadata
    /// the datapath does not carry (`metadata`, registers) restored from it. `None` for an
    /// unknown recirculation id (never given, or freed after its grace). Takes no reference:
    /// for a caller that holds one already (the revalidator's ukey of a second-pass megaflow)
    /// or that keeps nothing; an upcall uses [`Self::resume_in`].
    pub fn xlate_in(&self, key: &FlowKey, now_ms: u64, side_effects: bool) -> Option<XlateIn> {
        let rid = FieldId::RecircId.get(key) as u32;
        let state = if rid == 0 {
            None
        } else {
            Some(self.recirc.state(rid)?)
        };
        let mut input = resume_input(key, state, now_ms, side_effects);
        self.to_ofp_in_port(&mut input.key);
        Some(input)
    }

    /// The key's `in_port` is a datapath port number; translation works on OpenFlow port
    /// numbers (OVS `xlate_lookup` maps one to the other through the port table). A
    /// datapath port the bridge does not know is left as it is. Identity where the two
    /// numberings agree (`Bridge::ovs_sandbox`).
    fn to_ofp_in_port(&self, key: &mut FlowKey) {
        let dp = FieldId::InPort.get(key);
        let br = self.read();
        if br
            .port(OfPort(dp as u16))
            .is_some_and(|p| u128::from(p.dp_port) == dp)
        {
            return;
        }
        if let Some(p) = br.ports().find(|p| u128::from(p.dp_port) == dp) {
            FieldId::InPort.set(key, u128::from(p.ofport.0));
        }
    }

    /// [`Self::xlate_in`] plus, for a recirculated packet, a reference to its recirculation
    /// id taken in the same step as the state is read (reviving a released id that is not
    /// freed yet): the megaflow the upcall installs matches that id, and its ukey keeps it
    /// alive (OVS `ukey->key_recirc_id`). `None` for an unknown id.
    pub fn resume_in(
        &self,
        key: &FlowKey,
        now_ms: u64,
        side_effects: bool,
    ) -> Option<(XlateIn, Option<RecircRef>)> {
        let rid = FieldId::RecircId.get(key) as u32;
        if rid == 0 {
            let mut input = resume_input(key, None, now_ms, side_effects);
            self.to_ofp_in_port(&mut input.key);
            return Some((input, None));
        }
        let (table, meta, r) = self.recirc.resume(rid)?;
        let mut input = resume_input(key, Some((table, meta)), now_ms, side_effects);
        self.to_ofp_in_port(&mut input.key);
        Some((input, Some(r)))
    }

    /// The bridge's packet-in queue: `controller` actions executed by its datapath.
    pub fn packet_ins(&self) -> &PacketIns {
        &self.packet_ins
    }

    /// One OpenFlow connection more (`want`) or less wants packet-ins on table misses
    /// (controller id 0, OpenFlow 1.0–1.2: OVS's `want_packet_in_on_miss` count). When the
    /// count leaves or reaches zero the bridge's [`Bridge::packet_in_on_miss`] follows (a
    /// write, so cached megaflows of misses are translated again). The count's lock is held
    /// across that write so that writes apply in count order; no bridge writer takes it.
    pub fn want_packet_in_on_miss(&self, want: bool) {
        let mut n = self.miss_wanted.lock().unwrap_or_else(|e| e.into_inner());
        let before = *n > 0;
        *n = if want { *n + 1 } else { n.saturating_sub(1) };
        let after = *n > 0;
        if before != after {
            self.write(move |b| b.set_packet_in_on_miss(after));
            drop(n);
            self.notify();
        }
    }

    /// Queues the packet-in for `frame`, which reached a `controller` action (`cookie`) with
    /// the datapath key `key`; counted and dropped when nobody takes packet-ins, the
    /// translation had no side effects (a trace) or the frozen state is gone.
    pub fn send_packet_in(&self, key: &FlowKey, frame: &[u8], cookie: &ControllerCookie) {
        if cookie.dont_send {
            return;
        }
        let pins = &self.packet_ins;
        if !pins.wanted() {
            pins.note_unsent();
            return;
        }
        let Some((table, frozen)) = self.recirc.state(cookie.recirc_id) else {
            pins.note_unsent();
            return;
        };
        let userdata = self
            .recirc
            .frozen_userdata(cookie.recirc_id)
            .unwrap_or_default();
        let mut k = *key;
        self.to_ofp_in_port(&mut k);
        let mut p = packet_in_of(cookie, &k, table, &frozen, frame, &userdata);
        p.odp_port = FieldId::InPort.get(key) as u32;
        if cookie.continuation {
            let rest = self.recirc.frozen_actions(cookie.recirc_id);
            p.continuation = Some(rest.map(|a| a.to_vec()).unwrap_or_default());
        }
        pins.push(p);
    }

    /// The current time (ms).
    pub fn now_ms(&self) -> u64 {
        match &self.clock {
            Clock::Real(t0) => u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
            Clock::Manual(t) => t.load(Ordering::Relaxed),
        }
    }

    /// Moves a manual clock to `now_ms`; false (and nothing done) on a real clock.
    pub fn set_now_ms(&self, now_ms: u64) -> bool {
        match &self.clock {
            Clock::Real(_) => false,
            Clock::Manual(t) => {
                t.store(now_ms, Ordering::Relaxed);
                true
            }
        }
    }

    /// The published bridge (lock-free; never waits for a writer). Hold the guard for one
    /// translation or one dump: the second write after it waits for it to be dropped.
    pub fn read(&self) -> ReadGuard<Bridge> {
        self.bridge.read()
    }

    /// Applies `op` to the bridge (both copies; see the module doc) and returns its result on
    /// the copy it publishes. `op` must be deterministic; flow mods, credits and expiries are.
    /// Does not signal the change (see [`Self::notify`]).
    pub fn write<R>(&self, op: impl Fn(&mut Bridge) -> R + Send + 'static) -> R {
        self.bridge.write(op)
    }

    /// Whether the two copies of the bridge agree (published vs spare brought up to date);
    /// tests call it after random flow-mod sequences.
    pub fn check_replicas(&self) -> Result<(), String> {
        self.bridge.with_spare(|spare| self.read().diff(spare))
    }

    /// (table version, MAC-table generation): what a cached decision depends on.
    pub fn generation(&self) -> (u64, u64) {
        let b = self.read();
        (b.version, b.mac.generation())
    }

    /// Applies one flow mod in `ovs-ofctl` syntax at the current time and signals the change.
    pub fn flow_mod_text(
        &self,
        command: FlowModCommand,
        text: &str,
    ) -> Result<ofproto::bridge::FlowModResult, FlowModError> {
        let now = self.now_ms();
        let text = text.to_string();
        let r = self.write(move |b| b.flow_mod_text(command, &text, now));
        self.notify();
        r
    }

    /// Applies a flow mod at the current time and signals the change.
    pub fn flow_mod(
        &self,
        fm: &ofproto::FlowMod,
    ) -> Result<ofproto::bridge::FlowModResult, FlowModError> {
        let now = self.now_ms();
        let fm = fm.clone();
        let r = self.write(move |b| b.flow_mod(&fm, now));
        self.notify();
        r
    }

    /// Applies `fms` in order as one write (one publication, one change signal: what an
    /// `ovs-ofctl add-flows` file or a bundle needs), each flow mod independently: a failing
    /// one changes nothing and the others still apply. Results in order.
    pub fn flow_mods(
        &self,
        fms: &[ofproto::FlowMod],
    ) -> Vec<Result<ofproto::bridge::FlowModResult, FlowModError>> {
        if fms.is_empty() {
            return Vec::new();
        }
        let now = self.now_ms();
        let fms = fms.to_vec();
        let r = self.write(move |b| fms.iter().map(|fm| b.flow_mod(fm, now)).collect());
        self.notify();
        r
    }

    /// Signals that the tables or the MAC table may have changed (wakes [`Self::wait_change`]).
    pub fn notify(&self) {
        let mut n = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.wrapping_add(1);
        self.changed.notify_all();
    }

    /// The change counter (bumped by every [`Self::notify`]).
    pub fn changes(&self) -> u64 {
        *self.changes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the change counter differs from `seen` or `timeout` passes; returns the
    /// counter.
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> u64 {
        let g = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .changed
            .wait_timeout_while(g, timeout, |n| *n == seen)
            .unwrap_or_else(|e| e.into_inner());
        *g
    }
}

/// An OpenFlow packet-out translated for the datapath ([`SharedBridge::packet_out`]).
#[derive(Debug)]
pub struct PacketOutPlan {
    /// The datapath in_port to give the packet (the in_port's datapath port; for a port the
    /// bridge does not have, `CONTROLLER` or `NONE`, the OpenFlow number itself).
    pub dp_in_port: u32,
    /// What the datapath executes (an empty list is `[Drop]`).
    pub actions: Vec<DpAction>,
    /// References to the recirculation ids the actions use: keep them until the packet has
    /// been executed.
    pub recirc_refs: Vec<RecircRef>,
}

/// Why a packet-out cannot be executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketOutError {
    /// Translation failed (a resubmit loop, too many actions, no recirculation id).
    Xlate(String),
    /// Translation gave actions the datapath cannot execute.
    Refused(String),
}

impl std::fmt::Display for PacketOutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PacketOutError::Xlate(e) => write!(f, "translation failed: {e}"),
            PacketOutError::Refused(e) => write!(f, "datapath cannot execute: {e}"),
        }
    }
}

impl SharedBridge {
    /// Translates an OpenFlow packet-out (OVS `ofproto_packet_out`): `frame` received on
    /// OpenFlow port `in_port` (any number, `LOCAL`, `CONTROLLER`, `NONE`), its key made as
    /// an upcall's (`flow::extract` with the datapath in_port, then the OpenFlow in_port),
    /// `actions` run instead of a table lookup ([`ofproto::xlate_actions`]: outputs, edits,
    /// `resubmit`/`output:TABLE` into the tables, NORMAL learning as an upcall does) and
    /// converted to datapath actions as an upcall's answer.
    pub fn packet_out(
        &self,
        frame: &[u8],
        in_port: OfPort,
        actions: &[flow::ofp::Action],
    ) -> Result<PacketOutPlan, PacketOutError> {
        self.run_given(frame, in_port, None, actions)
    }

    /// A controller's `NXT_RESUME` (OVS `ofproto_dpif_resume`): `frame` with the pipeline
    /// fields of `metadata` (in_port, registers, `metadata`, `pkt_mark`, conntrack fields, as
    /// the packet-in gave them and the controller may have changed them) runs `actions`,
    /// the continuation's rest of the pipeline (`unroll_xlate` markers restore the table
    /// and cookie), as a packet-out runs its actions.
    pub fn resume(
        &self,
        frame: &[u8],
        metadata: &flow::ofp::Match,
        actions: &[flow::ofp::Action],
    ) -> Result<PacketOutPlan, PacketOutError> {
        let in_port = OfPort(metadata.value(FieldId::InPort) as u16);
        self.run_given(frame, in_port, Some(metadata), actions)
    }

    fn run_given(
        &self,
        frame: &[u8],
        in_port: OfPort,
        metadata: Option<&flow::ofp::Match>,
        actions: &[flow::ofp::Action],
    ) -> Result<PacketOutPlan, PacketOutError> {
        let (mut out, dp_in_port, mac_changed) = {
            let br = self.read();
            let dp_in_port = br.port(in_port).map_or(u32::from(in_port.0), |p| p.dp_port);
            let mut key = FlowKey::ZERO;
            let meta = flow::extract::PacketMeta::port(dp_in_port);
            flow::extract::extract(frame, &meta, &mut key);
            FieldId::InPort.set(&mut key, u128::from(in_port.0));
            if let Some(m) = metadata {
                // The fields the packet-in reported (and the controller may have changed):
                // `metadata`, the registers, the mark, the conntrack state and tuple.
                for f in PIPELINE_FIELDS.into_iter().chain(PACKET_FIELDS) {
                    f.set(&mut key, m.value(f));
                }
            }
            let input = XlateIn {
                key,
                now_ms: self.now_ms(),
                side_effects: true,
                trace: false,
                table: 0,
            };
            let g = br.mac.generation();
            let out = ofproto::xlate_actions(&br, &input, actions);
            let changed = br.mac.generation() != g;
            (out, dp_in_port, changed)
        };
        if mac_changed {
            self.notify();
        }
        if let Some(e) = &out.error {
            return Err(PacketOutError::Xlate(format!("{e:?}")));
        }
        let mut dp = to_dp_actions(&out.actions).map_err(PacketOutError::Refused)?;
        if dp.is_empty() {
            dp.push(DpAction::Drop);
        }
        Ok(PacketOutPlan {
            dp_in_port,
            actions: dp,
            recirc_refs: std::mem::take(&mut out.recirc_refs),
        })
    }
}

/// The translation input for `key`, resumed in frozen state `state` (table, metadata) if any.
fn resume_input(
    key: &FlowKey,
    state: Option<(u8, FlowKey)>,
    now_ms: u64,
    side_effects: bool,
) -> XlateIn {
    let mut k = *key;
    let mut table = 0;
    if let Some((t, meta)) = state {
        k.w[FROZEN_WORDS].copy_from_slice(&meta.w[FROZEN_WORDS]);
        table = t;
    }
    XlateIn {
        key: k,
        now_ms,
        side_effects,
        trace: false,
        table,
    }
}

/// What an upcall decided, kept for the revalidator (OVS `struct udpif_key`).
#[derive(Debug, Clone)]
pub struct Ukey {
    /// The packet key translated (unmasked).
    pub key: FlowKey,
    /// Bridge table version at translation.
    pub table_version: u64,
    /// MAC-table generation at translation.
    pub mac_generation: u64,
    /// (MAC, VLAN) entries NORMAL looked up.
    pub mac_deps: Vec<(u64, u16)>,
    /// OpenFlow rules hit (stats go to these).
    pub rules: Vec<(u8, RuleHandle)>,
    /// Groups gone through, with the bucket chosen (stats go to these too;
    /// `XlateOut::groups`).
    pub groups: Vec<(u32, Option<u32>)>,
    /// MACs the translation learned (refreshed while the megaflow hits, OVS `XC_NORMAL`).
    pub learned: Vec<(u64, u16, OfPort)>,
    /// References to the recirculation ids the megaflow uses in its actions (`recirc(id)`)
    /// and the one it matches (`recirc_id`, if not 0): they keep those ids and their frozen
    /// states alive for as long as the ukey lives (OVS `ukey->recircs`,
    /// `ukey->key_recirc_id`); dropping the ukey releases them (`ofproto::recirc`).
    pub recircs: Vec<RecircRef>,
    /// Revalidation pass during which it was recorded (for collecting unadopted ukeys).
    pub(crate) pass: u64,
}

impl Ukey {
    /// The record of translation `out` of `key` (holding no recirculation id: the caller
    /// moves `out.recirc_refs` into [`Ukey::recircs`] if the ukey is to keep them).
    pub fn from_xlate(key: &FlowKey, out: &XlateOut, learned: Vec<(u64, u16, OfPort)>) -> Ukey {
        Ukey {
            key: *key,
            table_version: out.table_version,
            mac_generation: out.mac_generation,
            mac_deps: out.mac_deps.clone(),
            rules: out.rules.clone(),
            groups: out.groups.clone(),
            learned,
            recircs: Vec::new(),
            pass: 0,
        }
    }
}

/// Most ukeys kept waiting for adoption (OVS's default flow limit); beyond it, answers are not
/// recorded and the revalidator falls back to the megaflow's masked key.
pub const UKEY_MAX: usize = 200_000;

/// Ukeys of answered upcalls not yet adopted by the revalidator, keyed by the id of the
/// megaflow they install: its ufid ([`Ufid::of`] of the masked key and the mask as
/// installed — the id the PMD gives that megaflow; the revalidator checks the megaflow
/// matches the ukey's key before adopting it). Each ukey is boxed: the map holds 24-byte
/// entries, so growing it moves little, and adoption moves the box, not the ukey.
#[derive(Debug, Default)]
pub struct UkeyStore {
    map: Mutex<UkeyMap>,
    /// The revalidator's pass counter (stamps new ukeys).
    pub(crate) pass: AtomicU64,
    /// Ukeys not recorded because the store was full.
    pub(crate) dropped: AtomicU64,
}

/// The ukey store's map.
pub(crate) type UkeyMap = HashMap<Ufid, Box<Ukey>, UfidBuild>;

impl UkeyStore {
    /// The map, locked (poison recovered: it holds plain data).
    pub(crate) fn lock(&self) -> MutexGuard<'_, UkeyMap> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn record(&self, flow_key: &FlowKey, mask: &FlowMask, mut ukey: Box<Ukey>) {
        ukey.pass = self.pass.load(Ordering::Relaxed);
        let id = Ufid::of(flow_key, mask);
        let mut m = self.lock();
        if m.len() >= UKEY_MAX && !m.contains_key(&id) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        m.insert(id, ukey);
    }
}

/// The mask the PMD installs for an upcall's `mask`: `in_port` and `recirc_id` (word 0) made
/// exact, as `datapath::pmd` does before `Dpcls::insert` (its module doc, step 4). The
/// revalidator compares installed masks with this; a test checks they agree.
pub fn dp_mask(mask: &FlowMask) -> FlowMask {
    let mut m = *mask;
    m.w[0] = u64::MAX;
    // `metadata` and the registers are never in a datapath key (always 0 there): on a
    // recirculated pass they come from the frozen state, which `recirc_id` (exact) names.
    for w in &mut m.w[FROZEN_WORDS] {
        *w = 0;
    }
    // OVS dpif-netdev's install rule: an outer VLAN TCI the translation left wildcarded is
    // installed with VID and CFI exact, so a tagged and an untagged packet never share a
    // megaflow (more 1-bits: always sound; dump-flows then shows `vlan(vid=…)` as OVS's does).
    if FieldId::Vlan0Tci.get(&FlowKey { w: m.w }) == 0 {
        FieldId::Vlan0Tci.set_mask(&mut m, 0x1fff);
    }
    m
}

/// Key words a recirculation restores from its frozen state rather than from the packet:
/// `metadata` and `reg0`..`reg15` (flow::key's words 2..=10).
const FROZEN_WORDS: std::ops::RangeInclusive<usize> = flow::key::w::METADATA..=10;

/// Why an answer is a drop the tables did not ask for (the translation could not give one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlowReason {
    /// Translation failed (too deep a resubmit chain, a loop, …).
    XlateError(String),
    /// Translation gave actions the datapath cannot execute.
    Refused(String),
}

/// The datapath actions the PMD executes for translation `out` (an empty list is `[Drop]`):
/// when translation failed or gave actions the datapath refuses, `[Drop]` and the reason.
/// The mask that goes with it is `out.mask`: the bits translation looked at before it
/// stopped, which decide that it stops the same way (OVS installs such flows too, so that a
/// failing flow does not translate again for every packet).
pub fn dp_answer(out: &XlateOut) -> (Vec<DpAction>, Option<SlowReason>) {
    if let Some(e) = &out.error {
        return (
            vec![DpAction::Drop],
            Some(SlowReason::XlateError(format!("{e:?}"))),
        );
    }
    match to_dp_actions(&out.actions) {
        Ok(mut dp) => {
            if dp.is_empty() {
                dp.push(DpAction::Drop);
            }
            (dp, None)
        }
        Err(e) => (vec![DpAction::Drop], Some(SlowReason::Refused(e))),
    }
}

/// The datapath actions the PMD executes for translation `out` (an empty list is `[Drop]`),
/// or why there are none (translation failed or gave actions the datapath refuses).
pub fn dp_actions_of(out: &XlateOut) -> Result<Vec<DpAction>, UpcallError> {
    match dp_answer(out) {
        (dp, None) => Ok(dp),
        (_, Some(SlowReason::XlateError(e) | SlowReason::Refused(e))) => {
            Err(UpcallError::Failed(e))
        }
    }
}

/// What the install-time check needs of the answer just given (OVS's `reval_seq` check).
#[derive(Debug)]
struct Answer {
    table_version: u64,
    mac_generation: u64,
    mac_deps: Vec<(u64, u16)>,
}

/// The upcall: translate through the OpenFlow tables, keep what the datapath executes.
#[derive(Debug)]
pub struct OfprotoUpcall {
    shared: Arc<SharedBridge>,
    udpif: Arc<Udpif>,
    /// Record ukeys (a revalidator adopts them) and apply the flow limit.
    revalidated: bool,
    last: Option<Answer>,
}

impl OfprotoUpcall {
    /// An upcall handler over `bridge` (shared with nobody else yet, real clock).
    pub fn new(bridge: Bridge) -> Self {
        Self::with_shared(SharedBridge::new(bridge))
    }

    /// An upcall handler over a shared bridge, without a revalidator (no ukeys, no flow
    /// limit; its counters are its own).
    pub fn with_shared(shared: Arc<SharedBridge>) -> Self {
        OfprotoUpcall {
            shared,
            udpif: Arc::new(Udpif::default()),
            revalidated: false,
            last: None,
        }
    }

    /// An upcall handler that records ukeys into `udpif` and applies its flow limit (see
    /// the module doc).
    pub(crate) fn with_udpif(shared: Arc<SharedBridge>, udpif: Arc<Udpif>) -> Self {
        OfprotoUpcall {
            shared,
            udpif,
            revalidated: true,
            last: None,
        }
    }

    /// The shared bridge.
    pub fn shared(&self) -> &Arc<SharedBridge> {
        &self.shared
    }

    /// The state shared with the revalidators (counters, flow limit).
    pub fn udpif(&self) -> &Arc<Udpif> {
        &self.udpif
    }
}

impl Upcall for OfprotoUpcall {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, datapath::ActionsId), UpcallError> {
        self.last = None;
        let counters = &self.udpif.counters;
        let Some((input, key_recirc)) = self.shared.resume_in(key, self.shared.now_ms(), true)
        else {
            UpcallCounters::bump(&counters.unknown_recirc);
            return Err(UpcallError::Failed(format!(
                "unknown recirculation id {:#x}",
                FieldId::RecircId.get(key)
            )));
        };
        let (mut out, mac_changed) = {
            let br = self.shared.read();
            let g = br.mac.generation();
            let out = xlate(&br, &input);
            let changed = br.mac.generation() != g;
            (out, changed)
        };
        if matches!(out.error, Some(XlateError::NoRecircId)) {
            // Out of recirculation ids: a resource, not a property of the flow — answer
            // nothing rather than install a drop megaflow that would outlive the shortage.
            UpcallCounters::bump(&counters.recirc_ids_exhausted);
            return Err(UpcallError::Failed("recirculation ids exhausted".into()));
        }
        let (dp, slow) = dp_answer(&out);
        let answer = match actions.intern(&dp) {
            None => {
                UpcallCounters::bump(&counters.actions_full);
                Err(UpcallError::ActionsFull)
            }
            Some(id) => {
                UpcallCounters::bump(&counters.answered);
                match slow {
                    Some(SlowReason::XlateError(_)) => UpcallCounters::bump(&counters.xlate_errors),
                    Some(SlowReason::Refused(_)) => UpcallCounters::bump(&counters.refused_actions),
                    None => {}
                }
                let m = dp_mask(&out.mask);
                if self.revalidated {
                    let learned = out.learned.clone();
                    let mut ukey = Box::new(Ukey::from_xlate(key, &out, learned));
                    // The megaflow's recirculation ids live as long as its ukey.
                    ukey.recircs = std::mem::take(&mut out.recirc_refs);
                    ukey.recircs.extend(key_recirc);
                    self.udpif.ukeys.record(&key.masked(&m), &m, ukey);
                }
                // Without a ukey (no revalidator), the references go with `out`: the ids
                // are released but, with no revalidator pass to run the grace, never freed.
                self.last = Some(Answer {
                    table_version: out.table_version,
                    mac_generation: out.mac_generation,
                    mac_deps: out.mac_deps.clone(),
                });
                Ok((m, id))
            }
        };
        if mac_changed {
            // A MAC was learned or moved: megaflows that consulted it must be revalidated
            // (signalled after the ukey is recorded, so the pass it wakes can find it).
            self.shared.notify();
        }
        answer
    }

    fn may_install(&mut self) -> bool {
        if !self.revalidated || self.udpif.limit.allows_install() {
            return true;
        }
        UpcallCounters::bump(&self.udpif.counters.flow_limit_hits);
        false
    }

    fn action_upcall(&mut self, key: &FlowKey, frame: &[u8], cookie: &ControllerCookie) {
        self.shared.send_packet_in(key, frame, cookie);
    }

    fn installed(&mut self, _flow: &DpFlow) -> bool {
        let current = self.last.take().is_none_or(|a| self.still_current(&a));
        if current {
            UpcallCounters::bump(&self.udpif.counters.installed);
            self.udpif.limit.note_install();
        } else {
            UpcallCounters::bump(&self.udpif.counters.revoked_stale);
        }
        current
    }
}

impl OfprotoUpcall {
    /// Whether answer `a`, just installed, is still what the tables decide.
    fn still_current(&self, a: &Answer) -> bool {
        // The flow is visible to dumps now. Either the pass that follows a change dumps it
        // (and revalidates it), or this load sees the change: a flow mod publishes the new
        // version and then wakes the revalidator, whose pass fences before it dumps
        // (`Revalidator::pass`); both sides fence between their store and their load.
        fence(Ordering::SeqCst);
        let br = self.shared.read();
        br.version == a.table_version
            && !a
                .mac_deps
                .iter()
                .any(|&(m, v)| br.mac.changed_since(m, v, a.mac_generation))
    }
}

/// A datapath's PMD bursts as what may carry a recirculation id without a reference
/// (`ofproto::recirc::InFlight`, `datapath::bursts`).
pub(crate) struct PmdBursts(pub(crate) Arc<datapath::bursts::Bursts>);

impl ofproto::recirc::InFlight for PmdBursts {
    fn mark(&self) -> Box<dyn Fn() -> bool + Send> {
        let m = self.0.mark();
        Box::new(move || m.passed())
    }

    fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;

    use flow::extract::{PacketMeta, extract};
    use ofproto::table::Backend;

    /// A bridge with ports p1, p2, p3 (OpenFlow 1, 2, 3) on datapath ports 7, 3, 1: numbers
    /// that differ, as the daemon allocates them per datapath.
    fn three_port_bridge() -> Bridge {
        let mut br = Bridge::new("br0", Backend::TupleSpace);
        for (of, dp, name) in [(1u16, 7u32, "p1"), (2, 3, "p2"), (3, 1, "p3")] {
            br.add_port(ofproto::bridge::Port {
                ofport: OfPort(of),
                name: name.into(),
                dp_port: dp,
                vlan: ofproto::VlanMode::default(),
                no_flood: false,
            });
        }
        br
    }

    /// Datapath port numbers that differ from the OpenFlow ones (the daemon allocates them
    /// per datapath): the upcall translates with the OpenFlow in_port, so `in_port=1`
    /// rules match packets arriving on datapath port 7, and outputs name datapath ports.
    #[test]
    fn upcall_maps_the_datapath_in_port_to_the_openflow_port() {
        let mut br = three_port_bridge();
        br.add_flows_text("in_port=1,actions=output:2\nin_port=3,actions=output:1", 0)
            .expect("flows");
        let shared = SharedBridge::with_manual_clock(br, 0);
        let mut pkt = [0u8; 60];
        pkt[12] = 0x88;
        pkt[13] = 0xb5;
        let actions = ActionTable::new(16);
        let mut up = OfprotoUpcall::with_shared(shared.clone());
        for (dp_in, out) in [(7u32, 3u32), (1, 7)] {
            let mut key = FlowKey::ZERO;
            extract(&pkt, &PacketMeta::port(dp_in), &mut key);
            let input = shared.xlate_in(&key, 0, false).expect("input");
            assert_ne!(FieldId::InPort.get(&input.key), u128::from(dp_in));
            let (_, id) = up.upcall(&key, &actions).expect("answer");
            assert_eq!(
                actions.get(id).as_deref(),
                Some(&[DpAction::Output(out)][..]),
                "in on dp {dp_in}"
            );
        }
    }

    /// A packet-out is translated from its OpenFlow in_port (rules matching `in_port` see
    /// it; the packet gets the port's datapath number), runs its own actions, outputs name
    /// datapath ports; a port the bridge lacks keeps its number; a loop is an error.
    #[test]
    fn packet_out_translates_its_actions_with_datapath_ports() {
        let mut br = three_port_bridge();
        br.add_flows_text(
            "table=1,in_port=1,actions=output:3\ntable=1,in_port=2,actions=output:1\ntable=2,actions=resubmit(,2)",
            0,
        )
        .expect("flows");
        let shared = SharedBridge::with_manual_clock(br, 0);
        let mut pkt = [0u8; 60];
        pkt[12] = 0x88;
        pkt[13] = 0xb5;
        let acts = |t: &str| flow::text::parse_actions(t).expect("actions");
        let p = shared
            .packet_out(&pkt, OfPort(1), &acts("output:2"))
            .expect("plan");
        assert_eq!((p.dp_in_port, p.actions), (7, vec![DpAction::Output(3)]));
        let p = shared
            .packet_out(&pkt, OfPort(2), &acts("resubmit(,1)"))
            .expect("plan");
        assert_eq!((p.dp_in_port, p.actions), (3, vec![DpAction::Output(7)]));
        let p = shared
            .packet_out(&pkt, OfPort(1), &acts("resubmit(,1)"))
            .expect("plan");
        assert_eq!(p.actions, vec![DpAction::Output(1)]);
        let p = shared
            .packet_out(&pkt, OfPort::CONTROLLER, &acts("output:1"))
            .expect("plan");
        assert_eq!(
            (p.dp_in_port, p.actions),
            (0xfffd, vec![DpAction::Output(7)])
        );
        let p = shared.packet_out(&pkt, OfPort(1), &[]).expect("plan");
        assert_eq!(p.actions, vec![DpAction::Drop]);
        assert!(matches!(
            shared.packet_out(&pkt, OfPort(1), &acts("resubmit(,2)")),
            Err(PacketOutError::Xlate(_))
        ));
    }

    /// An upcall made while a flow mod is in the middle of being applied (the writer holds
    /// the writers' lock and is stopped inside the operation) completes, with the answer of
    /// the tables as published before the flow mod; afterwards the new rule wins. If reading
    /// the bridge took any lock a writer holds, the upcall would block until the writer's
    /// 10 s timeout and then see the new rule.
    #[test]
    fn upcall_does_not_wait_for_a_flow_mod_in_progress() {
        let mut br = Bridge::ovs_sandbox(3, Backend::TupleSpace);
        br.add_flows_text("priority=1,actions=output:2", 0)
            .expect("flow");
        let shared = SharedBridge::with_manual_clock(br, 0);
        let (in_write_tx, in_write_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let writer = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let first = AtomicBool::new(true);
                shared.write(move |b| {
                    if first.swap(false, Ordering::Relaxed) {
                        let _ = in_write_tx.send(());
                        let _ = release_rx.recv_timeout(Duration::from_secs(10));
                    }
                    b.flow_mod_text(FlowModCommand::Add, "priority=2,actions=output:3", 0)
                })
            })
        };
        in_write_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("writer entered the flow mod");
        let mut pkt = [0u8; 60];
        pkt[12] = 0x88;
        pkt[13] = 0xb5;
        let mut key = FlowKey::ZERO;
        extract(&pkt, &PacketMeta::port(1), &mut key);
        let actions = ActionTable::new(16);
        let mut up = OfprotoUpcall::with_shared(shared.clone());
        let t0 = Instant::now();
        let (_, id) = up.upcall(&key, &actions).expect("upcall");
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the upcall waited for the writer"
        );
        assert_eq!(actions.get(id).as_deref(), Some(&[DpAction::Output(2)][..]));
        release_tx.send(()).expect("release");
        writer
            .join()
            .expect("writer thread")
            .expect("flow mod applied");
        let (_, id) = up.upcall(&key, &actions).expect("upcall");
        assert_eq!(actions.get(id).as_deref(), Some(&[DpAction::Output(3)][..]));
        shared.check_replicas().expect("copies agree");
    }

    /// A batch applies each flow mod on its own: a bad one fails alone, the rest are in
    /// both copies after one publication.
    #[test]
    fn flow_mod_batch_applies_each_independently() {
        let shared =
            SharedBridge::with_manual_clock(Bridge::ovs_sandbox(3, Backend::TupleSpace), 0);
        let parse = |t: &str| ofproto::FlowMod {
            command: FlowModCommand::Add,
            spec: flow::text::parse_flow(t).expect("flow"),
            reset_counts: false,
        };
        // Output to port 0: refused by the bridge's validation.
        let mut bad = parse("table=3,priority=1,actions=output:2");
        bad.spec.actions = vec![flow::ofp::Action::Output {
            port: OfPort(0),
            max_len: 0,
        }];
        let fms = [
            parse("priority=1,actions=output:2"),
            bad,
            parse("priority=2,ip,actions=output:3"),
        ];
        let v0 = shared.generation().0;
        let r = shared.flow_mods(&fms);
        assert_eq!(r.len(), 3);
        assert!(r[0].is_ok() && r[2].is_ok(), "{r:?}");
        assert!(r[1].is_err(), "output:0 must fail: {r:?}");
        assert_eq!(shared.read().n_rules(), 2);
        assert!(shared.generation().0 > v0);
        shared.flow_mods(&[parse("priority=3,actions=drop")]);
        shared.check_replicas().expect("copies agree");
        assert_eq!(shared.read().n_rules(), 3);
    }
}
