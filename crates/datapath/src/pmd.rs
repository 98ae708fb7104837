//! One PMD (poll-mode driver) thread's loop: rx bursts → extract + hash → EMC → SMC → dpcls →
//! upcall on a miss → actions → per-port tx bursts, with OVS's per-thread counters.
//!
//! # What a [`Pmd`] owns
//!
//! Its EMC and SMC (`&mut self`, nothing shared), its packet pool, its counters
//! ([`PmdStats`]), the ports it polls and outputs to, and a [`DpclsReader`] of a megaflow
//! classifier it shares (through an `Arc`) with whoever else installs or removes megaflows
//! (revalidators, the control path). As in OVS the classifier is meant to be per PMD: two
//! PMDs may share one (it is safe, and tested), but then both write the per-flow stats,
//! which the [`crate::megaflow`] protocol allows only as lost updates. Datapath actions live
//! in a reclaiming [`ActionTable`] ([`crate::action_table`]); a megaflow owns its action set
//! and carries its [`ActionsId`]; the PMD executes through its cached view of the table (a
//! pointer compare per pass, no reference-count update) and falls back to the flow's own set
//! when the view misses the id. The slow path is reached through the [`Upcall`] trait,
//! called on the PMD's thread; the PMD takes the action set the upcall interned and installs
//! the megaflow under its own ufid ([`Ufid::of`] the masked key and mask), so a duplicate
//! install of the same megaflow is recognised by ufid.
//!
//! # One rx burst (OVS `dp_netdev_input` / `dfc_processing` / `fast_path_processing`)
//!
//! 1. `rx_burst` of ≤ [`BATCH_MAX`] packets; frames shorter than an Ethernet header are
//!    dropped here and counted as `lost` (reason [`LostReasons::runt`]), as are the port's own
//!    rx drops (pool exhausted, frame too large), read from its counters after each burst.
//! 2. The batch is extracted and hashed at once ([`flow::extract::extract_hash_batch`]).
//! 3. The EMC (if on) for the whole burst ([`crate::emc::Emc::lookup_batch`]; its entries
//!    prefetched first when it holds many flows), then per EMC miss the SMC (if on; its
//!    buckets prefetched when it is the first tier); the misses go to dpcls as one batch.
//!    A dpcls hit fills the EMC (probabilistically) and the SMC; an SMC hit fills the EMC.
//!    As in OVS, what one packet inserts into the EMC serves later bursts, not the rest of
//!    its own (those packets find the same flow in the SMC or dpcls).
//! 4. The remaining misses go one by one to the [`Upcall`]. Before each upcall after the
//!    first install of the batch, the classifier is looked up again (a flow installed for an
//!    earlier packet of the batch may cover this one: counted as a megaflow hit, as OVS does),
//!    so a batch never installs a megaflow twice; [`Dpcls::insert`] re-checks too. The mask
//!    the upcall returns is widened to match `in_port` and `recirc_id` exactly (more 1-bits
//!    are always sound). Each in_port has a token bucket of upcalls
//!    ([`PmdConfig::upcall_rate`], [`PmdConfig::upcall_burst`], refilled from the burst
//!    time): a miss over it is not upcalled but dropped and counted `lost`
//!    ([`LostReasons::upcall_limited`]), so a flood of new flows on one port costs the PMD
//!    a bounded share of its time and known flows on every port keep forwarding. The slow
//!    path may ask for an answer not to be installed ([`Upcall::may_install`]: the flow
//!    limit) — the packet is handled with it all the same — and is told of each new install
//!    ([`Upcall::installed`]), which it may revoke when the decision went stale meanwhile:
//!    the flow is removed before any cache tier keeps it.
//! 5. Packets are grouped into flow batches (one per megaflow hit, OVS
//!    `packet_batch_per_flow`; flow stats written once per batch) and actions are executed
//!    per batch, batches in the order of their first packet, packets in rx order within one:
//!    `Output` appends to the port's output batch (a copy for every output but the last; a
//!    burst whose packets all have the same single-output actions is handed over whole, in
//!    rx order, by swapping batches), `Drop`
//!    stops, VLAN push/pop and masked sets edit the frame in place ([`crate::actions`]),
//!    `Ct` runs the [`crate::ct::ConnTracker`] and `Recirc` queues the packet for another
//!    pass with its new metadata (at most [`crate::ct::MAX_RECIRC_DEPTH`] passes; the queue
//!    is run dry after the burst). A batch whose actions are exactly `ct(...),recirc(id)`
//!    (a stateful pipeline's first pass) is handed to the tracker whole
//!    ([`crate::ct::ConnTracker::track_batch`], same order, same effect) and then queued. A
//!    tracker may hold a packet (an IP fragment: it stops there, counted `ct_held`) and
//!    release frames (a reassembled datagram's fragments, expired ones): each gets a buffer
//!    from the pool and runs the actions after the `ct`, right after the packet that released
//!    it, on both paths. Output batches are sent with one `tx_burst` per port at
//!    the end of the pass (or earlier when one fills).
//!
//! # Invariants
//!
//! - **Counters partition passes** (ARCHITECTURE.md 4): every packet counted in
//!   `packets_received`, and every recirculated pass counted in `recirculations`, is counted
//!   once in exactly one of `emc_hits`, `recirc_hint_hits`, `smc_hits`, `megaflow_hits`,
//!   `upcall_ok`, `upcall_failed`, `lost` ([`PmdStats::classified`]; `lost` includes the
//!   misses over the upcall rate limit).
//! - **Dead flows are let go.** Every 16 poll rounds the EMC (and its recirculation hints)
//!   and the flow batches' pinned flows are swept for dead megaflows, 16 entries each (one
//!   per round, as OVS's `emc_cache_slow_sweep`), so a removed megaflow — and the action set
//!   it owns — is not kept alive by a cache entry nothing hits any more.
//! - **Tiers agree with the slow path** (ARCHITECTURE.md 2): a packet's actions are those of
//!   a live megaflow matching it, or the upcall's answer for it; with a sound upcall (its mask
//!   covers every bit its answer depends on) both are what the upcall would answer.
//! - No input bytes panic: short frames are counted drops, anything else is extracted (the
//!   extractor never panics) and classified.
//! - Every packet buffer goes back to the pool: after a burst, nothing is held.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flow::extract::{PacketMeta, extract_hash_batch};
use flow::field::ct_state;
use flow::ofp::ControllerCookie;
use flow::{FlowKey, FlowMask, WordMap};
use netdev::{BATCH_MAX, Batch, Packet, PacketPool, Port};

use crate::action_table::{ActionSet, ActionsReader, ActionsView};
use crate::actions::{DpAction, apply_edit};
use crate::ct::{
    ConnTracker, CtOut, CtParams, CtRelease, CtVerdict, MAX_RECIRC_DEPTH, UntrackedConntrack,
    ct_clear,
};
use crate::dpcls::{Dpcls, DpclsReader, RankOutcome, Snapshot};
use crate::emc::{DEFAULT_EMC_INSERT_INV_PROB, Emc};
use crate::exec_queue::{EXECUTE_QUEUE_MAX, Execute, ExecuteQueue};
use crate::megaflow::{ActionsId, DpFlow, Ufid};
use crate::recirc_hint::Origin;
use crate::smc::Smc;

/// Bytes of an Ethernet header: shorter frames are dropped before classification.
pub const ETH_HEADER_LEN: usize = 14;

/// Most packets waiting for recirculation at once; more are dropped and counted
/// ([`PmdStats::recirc_dropped`]).
pub const RECIRC_QUEUE_MAX: usize = 8 * BATCH_MAX;

pub use crate::action_table::ActionTable;

/// Why an upcall gave no answer (the packet is dropped and counted as a failed upcall).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpcallError {
    /// The action table is full.
    ActionsFull,
    /// The slow path refused (reason).
    Failed(String),
}

impl fmt::Display for UpcallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpcallError::ActionsFull => f.write_str("the datapath action table is full"),
            UpcallError::Failed(r) => write!(f, "upcall failed: {r}"),
        }
    }
}

impl std::error::Error for UpcallError {}

/// The slow path as the PMD sees it: for a packet key, the megaflow mask and actions.
///
/// Contract (soundness, ARCHITECTURE.md 1): every key equal to `key` under the returned mask
/// gets the same answer, and masks of different answers never let one key match two
/// megaflows. The actions are interned in `actions` (the table the PMD executes from).
pub trait Upcall: Send {
    /// Classifies `key`.
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError>;

    /// Whether the answer [`Self::upcall`] just gave may be installed as a megaflow. When
    /// false the packet is handled with that answer and nothing is installed (OVS: above the
    /// flow limit, packets still go through the slow path); counted in
    /// [`PmdStats::flows_not_installed`].
    fn may_install(&mut self) -> bool {
        true
    }

    /// Called right after the answer was installed as `flow` (a new megaflow, visible to
    /// lookups and dumps): false when the decision went stale while it was being installed
    /// (the tables changed after the translation, and a revalidation pass may already have
    /// dumped the flows without it), and the PMD removes the flow again before any cache
    /// tier keeps it; the packet itself still runs the answer, as it would have had it
    /// arrived a moment earlier. Counted in [`PmdStats::installs_revoked`].
    fn installed(&mut self, flow: &DpFlow) -> bool {
        let _ = flow;
        true
    }

    /// A `userspace` action ran on a packet (OVS's `DPIF_UC_ACTION` upcall): `frame` is the
    /// packet as the actions before it left it and `key` its flow key, extracted again with
    /// the packet's metadata (ct state, recirc id, in_port). Called on the PMD's thread;
    /// the packet itself goes on with the next action. The default ignores it.
    fn action_upcall(&mut self, key: &FlowKey, frame: &[u8], cookie: &ControllerCookie) {
        let _ = (key, frame, cookie);
    }
}

/// Switches of one PMD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmdConfig {
    /// Use the exact-match cache.
    pub emc: bool,
    /// Use the signature-match cache.
    pub smc: bool,
    /// EMC insert inverse probability (OVS `emc-insert-inv-prob`, default 100 = 1 %; 1 =
    /// always; 0 = never).
    pub emc_insert_inv_prob: u32,
    /// Packet buffers in the pool.
    pub pool_size: usize,
    /// NUMA node, for the stats header.
    pub numa_id: u32,
    /// Core, for the stats header.
    pub core_id: u32,
    /// Recirculation hints ([`crate::recirc_hint`]; need the EMC): a `ct,recirc` packet's
    /// second pass takes the flow an earlier packet of its EMC entry found, when its
    /// conntrack metadata is the same.
    pub recirc_hints: bool,
    /// Upcalls per second allowed per in_port (a token bucket per port, refilled from the
    /// PMD's clock; 0 = unlimited). Misses over the limit are dropped and counted
    /// ([`LostReasons::upcall_limited`]), so a flood of new flows on one port cannot spend
    /// the PMD's time on the slow path while known flows on other ports wait. Default
    /// [`DEFAULT_UPCALL_RATE`].
    pub upcall_rate: u32,
    /// Bucket size: upcalls a port may make at once after being quiet (at least 1 when the
    /// rate is limited). Default [`DEFAULT_UPCALL_BURST`].
    pub upcall_burst: u32,
    /// VLAN headers parsed per packet (OVS `other_config:vlan-limit`, whose default is 1):
    /// 1 = the outer tag only, 0 = every tag the flow key holds (two). Default 0.
    pub vlan_limit: u8,
}

/// Default per-port upcall rate (per second). An upcall costs the PMD a few microseconds
/// (translation, install: ≈ 5 µs), so 100,000 a second bounds one flooding port to about
/// half the PMD's time, leaving the other half to the EMC/dpcls hits of every port — well
/// above what legitimate flow setup on one port needs (OVS's default flow limit is 200,000
/// megaflows in all, revalidated over seconds).
pub const DEFAULT_UPCALL_RATE: u32 = 100_000;

/// Default per-port upcall burst: a port may install this many new megaflows at once (a
/// warm-up of the largest benchmark table, 100k flows, passes without a drop).
pub const DEFAULT_UPCALL_BURST: u32 = 100_000;

impl Default for PmdConfig {
    fn default() -> Self {
        PmdConfig {
            emc: true,
            smc: false,
            emc_insert_inv_prob: DEFAULT_EMC_INSERT_INV_PROB,
            pool_size: 4096,
            numa_id: 0,
            core_id: 0,
            recirc_hints: true,
            upcall_rate: DEFAULT_UPCALL_RATE,
            upcall_burst: DEFAULT_UPCALL_BURST,
            vlan_limit: 0,
        }
    }
}

/// The line names of OVS 3.1's `dpif-netdev/pmd-stats-show` block, in its order (as a running
/// ovs-vswitchd 3.1.0 printed them): [`PmdStats`]' block prints these first (0 for a tier we
/// do not have), then flowswitch's own lines.
pub const OVS_PMD_STATS_LINES: [&str; 17] = [
    "packets received",
    "packet recirculations",
    "avg. datapath passes per packet",
    "phwol hits",
    "mfex opt hits",
    "simple match hits",
    "emc hits",
    "smc hits",
    "megaflow hits",
    "avg. subtable lookups per megaflow hit",
    "miss with success upcall",
    "miss with failed upcall",
    "avg. packets per output batch",
    "idle cycles",
    "processing cycles",
    "avg cycles per packet",
    "avg processing cycles per packet",
];

/// flowswitch's own lines of the block, after OVS's, in order.
pub const OWN_PMD_STATS_LINES: [&str; 4] = [
    "lost",
    "recirculation hint hits",
    "recirculations fused",
    "upcalls rate-limited",
];

/// Packets (or passes) dropped without a classification answer, per reason (their sum is
/// [`PmdStats::lost`]): before classification, or at a miss that was not let through to the
/// slow path.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LostReasons {
    /// Shorter than an Ethernet header.
    pub runt: u64,
    /// The port had no packet buffer (pool exhausted).
    pub rx_nobuf: u64,
    /// The frame was larger than a buffer.
    pub rx_too_large: u64,
    /// A miss over its in_port's upcall rate limit ([`PmdConfig::upcall_rate`]).
    pub upcall_limited: u64,
}

impl LostReasons {
    /// Sum of the reasons.
    pub fn total(&self) -> u64 {
        self.runt + self.rx_nobuf + self.rx_too_large + self.upcall_limited
    }
}

/// Counters of one PMD, printed in `dpif-netdev/pmd-stats-show` vocabulary by `Display`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PmdStats {
    /// NUMA node (header line).
    pub numa_id: u32,
    /// Core (header line).
    pub core_id: u32,
    /// Packets received (including those lost before classification).
    pub packets_received: u64,
    /// EMC hits.
    pub emc_hits: u64,
    /// SMC hits.
    pub smc_hits: u64,
    /// dpcls hits (including re-lookups after an install in the same batch).
    pub megaflow_hits: u64,
    /// Sum over megaflow hits of the 1-based rank of the subtable that matched.
    pub subtable_lookups: u64,
    /// Misses the upcall answered.
    pub upcall_ok: u64,
    /// Misses the upcall could not answer (dropped).
    pub upcall_failed: u64,
    /// Dropped without a classification answer: before classification, or a miss over the
    /// upcall rate limit ([`LostReasons::total`]).
    pub lost: u64,
    /// Datapath passes after the first (each recirculated packet entering classification
    /// again); every pass is counted once among the hit/miss/lost counters.
    pub recirculations: u64,
    /// Recirculated passes that took their flow from a recirculation hint
    /// ([`crate::recirc_hint`]) instead of the cache tiers.
    pub recirc_hint_hits: u64,
    /// Of those, passes fused into the first ([`Pmd`]'s `ct,recirc` batches): the hint's
    /// flow only outputs, so the packet went to its port without joining the queue.
    pub recirc_fused: u64,
    /// `userspace` actions executed: copies of packets handed to
    /// [`Upcall::action_upcall`] (packet-ins).
    pub action_upcalls: u64,
    /// Packets a `recirc` action would have sent past [`MAX_RECIRC_DEPTH`] passes, or into a
    /// full recirculation queue: dropped (their pass was already counted).
    pub recirc_dropped: u64,
    /// Why they were lost.
    pub lost_reasons: LostReasons,
    /// Upcalls answered whose megaflow could not be installed (the packet was still handled).
    pub install_failed: u64,
    /// Megaflows installed.
    pub flows_installed: u64,
    /// Upcalls answered whose megaflow the slow path asked not to install
    /// ([`Upcall::may_install`]: the flow limit); the packet was still handled.
    pub flows_not_installed: u64,
    /// Megaflows removed right after their install because the decision went stale during
    /// it ([`Upcall::installed`]); included in `flows_installed`.
    pub installs_revoked: u64,
    /// Packets handed to output batches.
    pub tx_packets: u64,
    /// Output batches sent.
    pub tx_batches: u64,
    /// Packets no action sent anywhere (explicit or implicit drop, unknown actions id).
    pub action_drops: u64,
    /// `hash(...)` actions executed (a select group's `dp_hash`, set for the next pass).
    pub dp_hashes: u64,
    /// Copies for a non-final output that failed (no buffer) or went to an unknown port.
    pub output_errors: u64,
    /// Poll-loop iterations ([`Pmd::poll_once`] calls) and those that received nothing.
    pub iterations: u64,
    /// Iterations that received no packet on any port.
    pub idle_iterations: u64,
    /// Cycles spent in upcalls (included in `processing_cycles`).
    pub upcall_cycles: u64,
    /// Packets the connection tracker kept at a `ct` action (IP fragments held for
    /// reassembly, and each fragment that completed a datagram: its frames come back
    /// released). Not output, not an action drop.
    pub ct_held: u64,
    /// Frames the connection tracker released (the fragments of each reassembled datagram,
    /// fragments whose reassembly timed out): each ran the rest of its action list.
    pub ct_released: u64,
    /// Released frames dropped for want of a packet buffer (pool exhausted; included in
    /// `ct_released`).
    pub ct_release_dropped: u64,
    /// Cycles of polls that received nothing.
    pub idle_cycles: u64,
    /// Cycles of polls that received packets.
    pub processing_cycles: u64,
}

impl PmdStats {
    /// Every datapath pass — each received packet, and each recirculation — is counted
    /// exactly once among these: `classified() == packets_received + recirculations`.
    pub fn classified(&self) -> u64 {
        self.emc_hits
            + self.recirc_hint_hits
            + self.smc_hits
            + self.megaflow_hits
            + self.upcall_ok
            + self.upcall_failed
            + self.lost
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl fmt::Display for PmdStats {
    /// OVS 3.1's `pmd-stats-show` block, its lines in its order (checked against a running
    /// `ovs-vswitchd`): `phwol hits`, `mfex opt hits` and `simple match hits` are tiers
    /// flowswitch does not have and print 0; the cycle lines are left out when no cycles were
    /// counted and the per-packet averages when no packet was, as OVS does. Lines OVS does not
    /// print (`lost:`) come after OVS's. No trailing newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.idle_cycles + self.processing_cycles;
        write!(
            f,
            "pmd thread numa_id {} core_id {}:",
            self.numa_id, self.core_id
        )?;
        write!(f, "\n  packets received: {}", self.packets_received)?;
        write!(f, "\n  packet recirculations: {}", self.recirculations)?;
        write!(
            f,
            "\n  avg. datapath passes per packet: {:.2}",
            ratio(
                self.packets_received + self.recirculations,
                self.packets_received
            )
        )?;
        write!(f, "\n  phwol hits: 0")?;
        write!(f, "\n  mfex opt hits: 0")?;
        write!(f, "\n  simple match hits: 0")?;
        write!(f, "\n  emc hits: {}", self.emc_hits)?;
        write!(f, "\n  smc hits: {}", self.smc_hits)?;
        write!(f, "\n  megaflow hits: {}", self.megaflow_hits)?;
        write!(
            f,
            "\n  avg. subtable lookups per megaflow hit: {:.2}",
            ratio(self.subtable_lookups, self.megaflow_hits)
        )?;
        write!(f, "\n  miss with success upcall: {}", self.upcall_ok)?;
        write!(f, "\n  miss with failed upcall: {}", self.upcall_failed)?;
        write!(
            f,
            "\n  avg. packets per output batch: {:.2}",
            ratio(self.tx_packets, self.tx_batches)
        )?;
        if total != 0 {
            write!(
                f,
                "\n  idle cycles: {} ({:.2}%)",
                self.idle_cycles,
                100.0 * ratio(self.idle_cycles, total)
            )?;
            write!(
                f,
                "\n  processing cycles: {} ({:.2}%)",
                self.processing_cycles,
                100.0 * ratio(self.processing_cycles, total)
            )?;
            if self.packets_received != 0 {
                write!(
                    f,
                    "\n  avg cycles per packet: {:.2} ({}/{})",
                    ratio(total, self.packets_received),
                    total,
                    self.packets_received
                )?;
                write!(
                    f,
                    "\n  avg processing cycles per packet: {:.2} ({}/{})",
                    ratio(self.processing_cycles, self.packets_received),
                    self.processing_cycles,
                    self.packets_received
                )?;
            }
        }
        // flowswitch's own lines, after OVS's.
        write!(f, "\n  lost: {}", self.lost)?;
        write!(f, "\n  recirculation hint hits: {}", self.recirc_hint_hits)?;
        write!(f, "\n  recirculations fused: {}", self.recirc_fused)?;
        write!(
            f,
            "\n  upcalls rate-limited: {}",
            self.lost_reasons.upcall_limited
        )
    }
}

/// Why a port could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmdError {
    /// A port with this number is already attached.
    DuplicatePort(u32),
}

impl fmt::Display for PmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmdError::DuplicatePort(n) => write!(f, "port {n} is already attached"),
        }
    }
}

impl std::error::Error for PmdError {}

/// What [`Pmd::run_for`] did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Counters at the end (cumulative since creation or the last reset).
    pub stats: PmdStats,
    /// Packets received during this run.
    pub packets: u64,
    /// Wall time of this run.
    pub elapsed: Duration,
}

impl RunReport {
    /// Millions of packets per second of this run.
    pub fn mpps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.packets as f64 / s / 1e6
        } else {
            0.0
        }
    }
}

struct PortSlot {
    no: u32,
    port: Box<dyn Port>,
    poll: bool,
    out: Batch,
    seen_nobuf: u64,
    seen_too_large: u64,
    /// Upcalls this port may still make ([`PmdConfig::upcall_rate`]).
    bucket: UpcallBucket,
}

/// A token bucket of upcalls, in thousandths of an upcall (a rate of `r` per second adds
/// `r` thousandths per millisecond: no division, no rounding drift).
#[derive(Debug, Clone, Copy)]
struct UpcallBucket {
    milli: u64,
    last_ms: u64,
}

impl UpcallBucket {
    fn full(burst: u32) -> UpcallBucket {
        UpcallBucket {
            milli: u64::from(burst.max(1)) * 1000,
            last_ms: 0,
        }
    }

    /// Refills for the time since the last call (a clock going back refills nothing) and
    /// takes one upcall if there is one.
    fn take(&mut self, now_ms: u64, rate: u32, burst: u32) -> bool {
        if rate == 0 {
            return true;
        }
        let cap = u64::from(burst.max(1)) * 1000;
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now_ms);
        self.milli = self
            .milli
            .saturating_add(elapsed.saturating_mul(u64::from(rate)))
            .min(cap);
        if self.milli >= 1000 {
            self.milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// Poll rounds between two slow sweeps of the caches (each sweep visits this many EMC
/// entries and pinned flows: one per round on average).
const SWEEP_EVERY: u64 = 16;

/// EMC occupancy above which a batch's EMC entries are prefetched: this many entries' first
/// lines (8 KiB) stay in a 32 KiB L1 next to the batch's keys.
const EMC_PREFETCH_MIN: usize = 128;

/// Per-burst scratch, allocated once.
struct Scratch {
    keys: Box<[FlowKey; BATCH_MAX]>,
    miss_keys: Box<[FlowKey; BATCH_MAX]>,
    maps: [WordMap; BATCH_MAX],
    hashes: [u32; BATCH_MAX],
    metas: [PacketMeta; BATCH_MAX],
    lens: [u32; BATCH_MAX],
    /// Datapath passes each packet of the batch has taken before this one (0 = first).
    depth: [u8; BATCH_MAX],
    pkts: Vec<Option<Packet>>,
    /// A `ct(...),recirc(id)` flow batch gathered for the tracker: packets, their metadata
    /// and passes taken.
    ct_pkts: Vec<Packet>,
    ct_metas: [PacketMeta; BATCH_MAX],
    ct_depth: [u8; BATCH_MAX],
    /// The EMC entry each packet of the pass hit ([`NO_SLOT`]: none), for recirculation hints.
    emc_slot: [u16; BATCH_MAX],
    /// What each packet of a recirculated pass brought from its previous pass.
    origin: [Origin; BATCH_MAX],
    /// Each packet's TCP flags, for a pass taken from hints (no key extracted).
    hint_flags: [u16; BATCH_MAX],
    /// For the `ct(...),recirc(id)` flow batch: EMC slots and TCP flags, as `ct_metas`.
    ct_slot: [u16; BATCH_MAX],
    ct_flags: [u16; BATCH_MAX],
}

/// [`Scratch::emc_slot`] of a packet that did not hit the EMC.
const NO_SLOT: u16 = u16::MAX;

/// A packet waiting in the recirculation queue.
struct Queued {
    p: Packet,
    /// Its metadata for the next pass (`recirc_id` set).
    md: PacketMeta,
    /// Datapath passes taken so far.
    depth: u8,
    /// Its TCP flags (for the next pass's flow stats when the pass is taken from a hint).
    tcp_flags: u16,
    origin: Origin,
}

/// The flow batches of one burst (OVS `packet_batch_per_flow`): packets grouped by the flow
/// they hit, so that flow stats are written once per flow and burst, and actions are looked
/// up once per batch. Nothing is written into the shared flow.
///
/// Each flow has a hint slot, its arena index mod [`FlowBatches::HINTS`] (distinct for the
/// flows of one classifier): the slot names the batch the flow may have (checked by flow
/// address before use), so a burst spread over a few megaflows — the `sub10` bench — finds
/// each packet's batch in one probe, as does a burst of one flow; a flow whose slot no batch
/// of the burst uses opens a batch without a search.
///
/// # Flow references
///
/// A batch keeps its flow alive (so the address comparison cannot be fooled by a freed and
/// reused allocation). To keep reference-count traffic (two atomic read-modify-writes per
/// batch and burst) off the common path, the reference is held in `pinned`, indexed by hint
/// slot and kept across bursts: a flow hit burst after burst is pinned once. A flow whose
/// slot another batch of the burst already uses holds its own reference in `own`, dropped at
/// the end of the burst. `pinned` thus keeps up to [`FlowBatches::HINTS`] recently hit flows
/// alive (removed ones included, until their slot is reused); they are marked dead, so this
/// only delays freeing their memory.
///
/// A flow whose arena index changes mid-burst (the writer compacted the arena) may get a
/// second batch: its packets before and after stay in rx order and the stats of both
/// batches add up, so that is only a lost saving.
struct FlowBatches {
    n: usize,
    /// Packet → batch (`NONE`: no actions, e.g. a failed upcall).
    of: [u8; BATCH_MAX],
    /// Hint slot → a batch that a flow of that slot may have (meaningful only where
    /// `hinted` has the slot's bit; checked by address before use).
    hint: [u8; FlowBatches::HINTS],
    /// Bit `h`: some batch of this burst has a flow of hint slot `h` (so a flow whose slot
    /// bit is clear has no batch yet: it opens one without a search).
    hinted: u64,
    /// Batch → address of its flow (0: a batch without a flow, and every entry from `n` on).
    addr: [usize; BATCH_MAX],
    /// Batch → the `pinned` slot holding its flow, or `NONE` (then `own` holds it, if any).
    pin: [u8; BATCH_MAX],
    /// Batch → its flow, for flows not held in `pinned`; emptied at the end of the burst.
    own: [Option<Arc<DpFlow>>; BATCH_MAX],
    /// Hint slot → the last flow of that slot that opened a batch (kept across bursts).
    pinned: [Option<Arc<DpFlow>>; FlowBatches::HINTS],
    aid: [ActionsId; BATCH_MAX],
    packets: [u32; BATCH_MAX],
    bytes: [u64; BATCH_MAX],
    flags: [u16; BATCH_MAX],
    /// Action sets of batches without a flow (an upcall answer that could not be
    /// installed), held until the end of the burst so the table cannot reclaim them.
    keep: Vec<Arc<ActionSet>>,
    /// Next pinned slot the slow sweep visits.
    sweep_pos: usize,
}

impl Default for FlowBatches {
    fn default() -> Self {
        FlowBatches {
            n: 0,
            of: [FlowBatches::NONE; BATCH_MAX],
            hint: [0; FlowBatches::HINTS],
            hinted: 0,
            addr: [0; BATCH_MAX],
            pin: [FlowBatches::NONE; BATCH_MAX],
            own: [const { None }; BATCH_MAX],
            pinned: [const { None }; FlowBatches::HINTS],
            aid: [0; BATCH_MAX],
            packets: [0; BATCH_MAX],
            bytes: [0; BATCH_MAX],
            flags: [0; BATCH_MAX],
            keep: Vec::new(),
            sweep_pos: 0,
        }
    }
}

impl FlowBatches {
    const NONE: u8 = u8::MAX;
    /// Hint slots (64: one bit each in `hinted`).
    const HINTS: usize = 64;

    #[inline]
    fn clear(&mut self) {
        self.release();
        self.of = [Self::NONE; BATCH_MAX];
    }

    /// The address a batch records for `flow`.
    #[inline(always)]
    fn addr_of(flow: &Arc<DpFlow>) -> usize {
        Arc::as_ptr(flow) as usize
    }

    /// Opens batch `n` with no flow yet (`addr` 0, no reference).
    #[inline]
    fn open(&mut self, aid: ActionsId) -> usize {
        let g = self.n;
        if g < BATCH_MAX {
            self.addr[g] = 0;
            self.pin[g] = Self::NONE;
            self.aid[g] = aid;
            self.packets[g] = 0;
            self.bytes[g] = 0;
            self.flags[g] = 0;
            self.n += 1;
        }
        g
    }

    /// Opens a batch for `flow` (hint slot `h`), holding the flow in `pinned[h]` if no batch
    /// of the burst uses that slot, else in `own`.
    fn open_flow(&mut self, flow: &Arc<DpFlow>, h: usize) -> usize {
        let g = self.open(flow.actions());
        if g < BATCH_MAX {
            self.addr[g] = Self::addr_of(flow);
            if self.hinted & (1 << h) == 0 {
                let p = &mut self.pinned[h];
                if !p.as_ref().is_some_and(|f| Arc::ptr_eq(f, flow)) {
                    *p = Some(Arc::clone(flow));
                }
                self.pin[g] = h as u8;
            } else {
                self.own[g] = Some(Arc::clone(flow));
            }
        }
        g
    }

    /// Batch `g`'s flow, if it has one.
    fn flow_of(&self, g: usize) -> Option<&Arc<DpFlow>> {
        match self.pin.get(g).copied() {
            Some(Self::NONE) => self.own.get(g)?.as_ref(),
            Some(h) => self.pinned.get(usize::from(h))?.as_ref(),
            None => None,
        }
    }

    #[inline]
    fn add(&mut self, i: usize, g: usize, len: u32, flags: u16) {
        if let (Some(o), Some(p)) = (self.of.get_mut(i), self.packets.get_mut(g)) {
            *o = g as u8;
            *p += 1;
            self.bytes[g] += u64::from(len);
            self.flags[g] |= flags;
        }
    }

    /// Adds packet `i` to the batch of `flow`: the batch the hint names (one probe, inlined
    /// into the caller), else a search, else a new batch (out of line).
    #[inline(always)]
    fn join(&mut self, i: usize, flow: &Arc<DpFlow>, len: u32, flags: u16) {
        let h = Self::hint_slot(flow);
        let g = usize::from(self.hint[h]);
        // `addr` is 0 above `n`, so a stale hint cannot match.
        if self.addr.get(g) == Some(&Self::addr_of(flow)) {
            self.add(i, g, len, flags);
            return;
        }
        self.join_other(i, flow, h, len, flags);
    }

    /// The hint slot of `flow`: its arena index (on the cache line the lookup's liveness
    /// check already read), which differs between the flows of one arena.
    #[inline(always)]
    fn hint_slot(flow: &DpFlow) -> usize {
        flow.arena_index_raw() as usize % Self::HINTS
    }

    /// [`FlowBatches::join`] when the hint (slot `h`) does not name `flow`'s batch: a new
    /// batch if no batch has slot `h`, else a search (slot shared with another flow).
    #[inline(never)]
    fn join_other(&mut self, i: usize, flow: &Arc<DpFlow>, h: usize, len: u32, flags: u16) {
        let a = Self::addr_of(flow);
        let found = if self.hinted & (1 << h) == 0 {
            None
        } else {
            self.addr[..self.n].iter().position(|&x| x == a)
        };
        let g = match found {
            Some(g) => g,
            None => self.open_flow(flow, h),
        };
        self.hint[h] = g as u8;
        self.hinted |= 1 << h;
        self.add(i, g, len, flags);
    }

    /// Adds packet `i`, whose actions have no installed flow, to a batch of `aid` (holding
    /// `set`, if any, for the burst).
    fn join_unflowed(&mut self, i: usize, aid: ActionsId, set: Option<Arc<ActionSet>>) {
        if let Some(s) = set {
            self.keep.push(s);
        }
        let g = (0..self.n)
            .find(|&g| self.addr[g] == 0 && self.aid[g] == aid)
            .unwrap_or_else(|| self.open(aid));
        self.add(i, g, 0, 0);
    }

    /// One stats update per flow.
    fn record_stats(&self, now_ms: u64) {
        for g in 0..self.n {
            if let Some(f) = self.flow_of(g) {
                f.stats.record(
                    u64::from(self.packets[g]),
                    self.bytes[g],
                    now_ms,
                    self.flags[g],
                );
            }
        }
    }

    /// The batches in the order of their first packet, and packet indexes `0..n` grouped
    /// in that order, rx order within a batch (a counting sort).
    fn order(&self, n: usize) -> ([u8; BATCH_MAX], [u8; BATCH_MAX]) {
        let mut seq = [0u8; BATCH_MAX];
        let mut start = [Self::NONE; BATCH_MAX];
        let (mut k, mut acc) = (0usize, 0u8);
        for &g in self.of.iter().take(n) {
            if let Some(st) = start.get_mut(usize::from(g))
                && *st == Self::NONE
            {
                *st = acc;
                acc = acc.wrapping_add(self.packets[usize::from(g)] as u8);
                seq[k] = g;
                k += 1;
            }
        }
        let mut out = [0u8; BATCH_MAX];
        for (i, &g) in self.of.iter().enumerate().take(n) {
            if let Some(st) = start.get_mut(usize::from(g)) {
                if let Some(o) = out.get_mut(usize::from(*st)) {
                    *o = i as u8;
                }
                *st += 1;
            }
        }
        (seq, out)
    }

    /// Drops dead flows among the next `n` pinned slots (between bursts only: no batch is
    /// open), so a removed megaflow is not kept alive by a slot no flow hits any more.
    fn sweep_pinned(&mut self, n: usize) {
        for _ in 0..n.min(Self::HINTS) {
            let h = self.sweep_pos % Self::HINTS;
            self.sweep_pos = (h + 1) % Self::HINTS;
            if let Some(p) = self.pinned.get_mut(h)
                && p.as_ref().is_some_and(|f| f.is_dead())
            {
                *p = None;
            }
        }
    }

    /// Ends the burst: drops the batches' own flow references (pinned ones stay).
    fn release(&mut self) {
        for (f, &p) in self.own[..self.n].iter_mut().zip(&self.pin[..self.n]) {
            if p == Self::NONE {
                *f = None;
            }
        }
        self.addr[..self.n].fill(0);
        self.n = 0;
        self.hinted = 0;
        if !self.keep.is_empty() {
            self.keep.clear();
        }
    }
}

/// One PMD thread's state and loop. See the module doc.
pub struct Pmd {
    cfg: PmdConfig,
    /// This PMD's burst counter ([`crate::bursts`]), odd inside [`Pmd::poll_once`].
    burst: crate::bursts::BurstSlot,
    emc: Emc,
    smc: Smc,
    dpcls: Arc<Dpcls>,
    reader: DpclsReader,
    actions: Arc<ActionTable>,
    /// The PMD's cached view of the action table, and the view itself between passes
    /// (taken out for a pass: no reference-count update per pass).
    act_reader: ActionsReader,
    view: Option<Arc<ActionsView>>,
    upcall: Box<dyn Upcall>,
    ports: Vec<PortSlot>,
    pool: PacketPool,
    batch: Batch,
    stats: PmdStats,
    s: Scratch,
    g: FlowBatches,
    ct: Box<dyn ConnTracker>,
    /// The tracker was checked for being the placeholder (and the warning printed if it
    /// was): once per tracker, not per packet.
    ct_checked: bool,
    /// What the tracker held or released at the `ct` being executed; empty between calls
    /// (kept for its allocation).
    ct_out: CtOut,
    /// Packets waiting for their next datapath pass: metadata (recirc_id, conntrack) and the
    /// passes taken so far.
    recirc: VecDeque<Queued>,
    /// Packets whose second pass was fused into their first ([`Pmd::fused_output`]), with
    /// their output port's index: sent after the pass's own outputs, where the queued
    /// second pass would have sent them.
    fused: Vec<(usize, Packet)>,
    cycles_per_ms: u64,
    next_rank_ms: u64,
    /// Milliseconds of the cycle counter at the start of the burst being processed: the time of every flow-stats update and conntrack call of
    /// the burst and its recirculations (OVS likewise reads the clock once per batch).
    batch_ms: u64,
    /// A clock set by the caller (ms) instead of the cycle counter, for the burst times
    /// (tests: flow `used` times, conntrack time, upcall rate limits without sleeping).
    manual_ms: Option<Arc<std::sync::atomic::AtomicU64>>,
    metas_port: Option<u32>,
    /// Packets other threads hand over to execute ([`crate::exec_queue`]), and the list
    /// they are taken into (kept for its allocation).
    exec: Arc<ExecuteQueue>,
    exec_buf: Vec<Execute>,
}

impl fmt::Debug for Pmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pmd")
            .field("cfg", &self.cfg)
            .field(
                "ports",
                &self.ports.iter().map(|p| p.no).collect::<Vec<_>>(),
            )
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Pmd {
    /// A PMD classifying with `dpcls`, executing from `actions`, asking `upcall` on misses.
    pub fn new(
        cfg: PmdConfig,
        dpcls: Arc<Dpcls>,
        actions: Arc<ActionTable>,
        upcall: Box<dyn Upcall>,
    ) -> Pmd {
        let reader = dpcls.reader();
        let burst = dpcls.bursts().register();
        let mut act_reader = actions.reader();
        let view = Some(act_reader.view().clone());
        Pmd {
            burst,
            act_reader,
            view,
            emc: Emc::new(cfg.emc_insert_inv_prob),
            smc: Smc::new(),
            reader,
            dpcls,
            actions,
            upcall,
            ports: Vec::new(),
            pool: PacketPool::new(cfg.pool_size.max(2 * BATCH_MAX)),
            batch: Batch::new(),
            stats: PmdStats {
                numa_id: cfg.numa_id,
                core_id: cfg.core_id,
                ..PmdStats::default()
            },
            s: Scratch {
                keys: Box::new([FlowKey::ZERO; BATCH_MAX]),
                miss_keys: Box::new([FlowKey::ZERO; BATCH_MAX]),
                maps: [WordMap::EMPTY; BATCH_MAX],
                hashes: [0; BATCH_MAX],
                metas: [PacketMeta::port(0); BATCH_MAX],
                lens: [0; BATCH_MAX],
                depth: [0; BATCH_MAX],
                pkts: Vec::with_capacity(BATCH_MAX),
                ct_pkts: Vec::with_capacity(BATCH_MAX),
                ct_metas: [PacketMeta::port(0); BATCH_MAX],
                ct_depth: [0; BATCH_MAX],
                emc_slot: [NO_SLOT; BATCH_MAX],
                origin: [Origin::None; BATCH_MAX],
                hint_flags: [0; BATCH_MAX],
                ct_slot: [NO_SLOT; BATCH_MAX],
                ct_flags: [0; BATCH_MAX],
            },
            g: FlowBatches::default(),
            ct: Box::new(UntrackedConntrack),
            ct_checked: false,
            ct_out: CtOut::default(),
            recirc: VecDeque::with_capacity(RECIRC_QUEUE_MAX),
            fused: Vec::with_capacity(BATCH_MAX),
            cycles_per_ms: (netdev::tsc::hz() / 1000).max(1),
            next_rank_ms: 0,
            batch_ms: 0,
            manual_ms: None,
            metas_port: None,
            exec: Arc::new(ExecuteQueue::new(EXECUTE_QUEUE_MAX)),
            exec_buf: Vec::new(),
            cfg,
        }
    }

    /// Attaches `port` as datapath port `no`; `poll` = receive from it (else output only).
    pub fn add_port(&mut self, no: u32, port: Box<dyn Port>, poll: bool) -> Result<(), PmdError> {
        if self.ports.iter().any(|p| p.no == no) {
            return Err(PmdError::DuplicatePort(no));
        }
        let s = port.stats();
        self.ports.push(PortSlot {
            no,
            port,
            poll,
            out: Batch::new(),
            seen_nobuf: s.rx_nobuf,
            seen_too_large: s.rx_too_large,
            bucket: UpcallBucket::full(self.cfg.upcall_burst),
        });
        Ok(())
    }

    /// The descriptors of the polled ports that signal input ([`Port::rx_fds`]).
    pub fn rx_fds(&self, out: &mut Vec<std::os::fd::RawFd>) {
        for s in self.ports.iter().filter(|s| s.poll) {
            s.port.rx_fds(out);
        }
    }

    /// Detaches port `no` and gives it back (`None` if no such port). Output still batched
    /// for it is sent first (between two polls there is none: every burst ends by sending its
    /// output batches); flows that output to `no` count an output error from now on, as
    /// OVS's datapath drops output to a port that is gone.
    pub fn remove_port(&mut self, no: u32) -> Option<Box<dyn Port>> {
        let pi = self.ports.iter().position(|p| p.no == no)?;
        let mut slot = self.ports.remove(pi);
        if !slot.out.is_empty() {
            self.stats.tx_packets += slot.out.len() as u64;
            self.stats.tx_batches += 1;
            slot.port.tx_burst(&mut slot.out, &mut self.pool);
        }
        if self.metas_port == Some(no) {
            self.metas_port = None;
        }
        Some(slot.port)
    }

    /// The numbers of the attached ports, in the order they were attached.
    pub fn port_numbers(&self) -> Vec<u32> {
        self.ports.iter().map(|p| p.no).collect()
    }

    /// The port attached as `no`.
    pub fn port(&self, no: u32) -> Option<&dyn Port> {
        self.ports.iter().find(|p| p.no == no).map(|p| &*p.port)
    }

    /// Turns the EMC on or off (off also empties it).
    pub fn set_emc(&mut self, on: bool) {
        self.cfg.emc = on;
        if !on {
            self.emc.clear();
        }
    }

    /// Turns the SMC on or off (off also empties it).
    pub fn set_smc(&mut self, on: bool) {
        self.cfg.smc = on;
        if !on {
            self.smc.clear();
        }
    }

    /// Takes the burst time (ms) from `clock` instead of the cycle counter (`None`: back to
    /// the cycle counter). Cycle counts (idle/processing) still come from the counter.
    pub fn set_manual_clock(&mut self, clock: Option<Arc<std::sync::atomic::AtomicU64>>) {
        self.manual_ms = clock;
    }

    /// Sets the per-port upcall rate limit (see [`PmdConfig::upcall_rate`]); buckets are
    /// refilled to the new burst.
    pub fn set_upcall_limit(&mut self, rate: u32, burst: u32) {
        self.cfg.upcall_rate = rate;
        self.cfg.upcall_burst = burst;
        for p in &mut self.ports {
            p.bucket = UpcallBucket {
                last_ms: self.batch_ms,
                ..UpcallBucket::full(burst)
            };
        }
    }

    /// The configuration.
    pub fn config(&self) -> PmdConfig {
        self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &PmdStats {
        &self.stats
    }

    /// Zeroes the counters (OVS `pmd-stats-clear`).
    pub fn clear_stats(&mut self) {
        self.stats = PmdStats {
            numa_id: self.cfg.numa_id,
            core_id: self.cfg.core_id,
            ..PmdStats::default()
        };
    }

    /// The packet pool (for leak checks: after a poll every buffer is back).
    pub fn pool(&self) -> &PacketPool {
        &self.pool
    }

    /// The classifier.
    pub fn dpcls(&self) -> &Arc<Dpcls> {
        &self.dpcls
    }

    /// One round over the polled ports (one burst each); returns the packets received.
    pub fn poll_once(&mut self) -> u64 {
        // Everything this round does is one burst for the slow path's grace periods
        // (`crate::bursts`): a packet between `recirc(id)` and its second pass holds no
        // reference to its id.
        self.burst.begin();
        let got = self.poll_round();
        self.burst.end();
        got
    }

    fn poll_round(&mut self) -> u64 {
        let before = self.stats.packets_received;
        self.stats.iterations += 1;
        if !self.exec.is_empty() {
            self.run_executes();
        }
        // One cycle-counter read per port polled plus one: each poll ends where the next
        // begins (`rdtsc` costs tens of cycles; a burst is 32 packets).
        let mut t = netdev::tsc::now();
        for pi in 0..self.ports.len() {
            if self.ports.get(pi).is_some_and(|p| p.poll) {
                t = self.poll_port(pi, t);
            }
        }
        let cfg = self.dpcls.config();
        if cfg.ranking {
            // Local check first: `rank` takes the writer lock (try_lock) on every call.
            let now_ms = t / self.cycles_per_ms;
            if now_ms >= self.next_rank_ms {
                match self.dpcls.rank(now_ms) {
                    RankOutcome::Busy => {}
                    _ => self.next_rank_ms = now_ms.saturating_add(cfg.rank_interval_ms.max(1)),
                }
            }
        }
        self.ct.poll_housekeeping(t / self.cycles_per_ms);
        if self.stats.iterations.is_multiple_of(SWEEP_EVERY) {
            // Let go of dead megaflows the caches still hold (and so of the action sets
            // they own): the EMC and its hints at one entry per poll round, as OVS's
            // `emc_cache_slow_sweep`, and the flow batches' pinned flows.
            self.emc.sweep(SWEEP_EVERY as usize);
            self.g.sweep_pinned(SWEEP_EVERY as usize);
            // An idle PMD moves on to the newest classifier snapshot too, letting go of the
            // old one (and the removed flows only it still holds).
            self.reader.snapshot();
        }
        let got = self.stats.packets_received - before;
        if got == 0 {
            self.stats.idle_iterations += 1;
        }
        got
    }

    /// The queue of packets other threads hand to this PMD to execute
    /// ([`crate::exec_queue`]); it stays with the PMD across thread restarts.
    pub fn execute_queue(&self) -> &Arc<ExecuteQueue> {
        &self.exec
    }

    /// Runs every packet waiting in the execute queue: each gets a buffer, the metadata of
    /// a fresh packet on its in_port, and its actions (as a megaflow's, recirculations run
    /// dry after it); outputs are sent before the tickets are marked done.
    fn run_executes(&mut self) {
        let mut list = std::mem::take(&mut self.exec_buf);
        self.exec.take(&mut list);
        self.batch_ms = match &self.manual_ms {
            Some(c) => c.load(std::sync::atomic::Ordering::Relaxed),
            None => netdev::tsc::now() / self.cycles_per_ms,
        };
        let (mut run, mut dropped) = (0, 0);
        for e in list.drain(..) {
            let Some(mut p) = self.pool.alloc() else {
                dropped += 1;
                continue;
            };
            if p.set_data(&e.frame).is_err() {
                self.pool.free(p);
                dropped += 1;
                continue;
            }
            p.in_port = e.in_port;
            self.s.metas[0] = PacketMeta::port(e.in_port).with_vlan_limit(self.cfg.vlan_limit);
            self.s.depth[0] = 0;
            self.metas_port = None;
            self.execute_actions(&e.actions, 0, p, 0);
            self.run_recirculations();
            self.flush_outputs();
            run += 1;
            drop(e.keep);
        }
        self.exec_buf = list;
        self.exec.finished(run, dropped);
    }

    /// Polls until `packets` packets were received or a round receives nothing (an
    /// in-memory source drained or at its limit); returns the run's figures.
    pub fn run_for(&mut self, packets: u64) -> RunReport {
        let start = Instant::now();
        let before = self.stats.packets_received;
        while self.stats.packets_received - before < packets {
            if self.poll_once() == 0 {
                break;
            }
        }
        RunReport {
            stats: self.stats.clone(),
            packets: self.stats.packets_received - before,
            elapsed: start.elapsed(),
        }
    }

    /// Polls port `pi` once, starting at cycle count `t0`; returns the cycle count at the end
    /// (the time is counted as processing if packets came, else idle).
    fn poll_port(&mut self, pi: usize, t0: u64) -> u64 {
        let Some(slot) = self.ports.get_mut(pi) else {
            return t0;
        };
        let in_port = slot.no;
        let n = slot.port.rx_burst(&mut self.pool, &mut self.batch);
        // The port's own rx drops are packets lost before classification.
        let ps = slot.port.stats();
        let nobuf = ps.rx_nobuf.wrapping_sub(slot.seen_nobuf);
        let too_large = ps.rx_too_large.wrapping_sub(slot.seen_too_large);
        slot.seen_nobuf = ps.rx_nobuf;
        slot.seen_too_large = ps.rx_too_large;
        let st = &mut self.stats;
        st.lost_reasons.rx_nobuf += nobuf;
        st.lost_reasons.rx_too_large += too_large;
        st.lost += nobuf + too_large;
        st.packets_received += nobuf + too_large;
        if n == 0 {
            let t1 = netdev::tsc::now();
            self.stats.idle_cycles += t1.wrapping_sub(t0);
            return t1;
        }
        self.batch_ms = match &self.manual_ms {
            Some(c) => c.load(std::sync::atomic::Ordering::Relaxed),
            None => t0 / self.cycles_per_ms,
        };
        self.process_batch(in_port);
        let t1 = netdev::tsc::now();
        self.stats.processing_cycles += t1.wrapping_sub(t0);
        t1
    }

    /// Classifies and executes `self.batch` (received on `in_port`), leaving it empty, then
    /// the packets its actions recirculated, pass after pass.
    fn process_batch(&mut self, in_port: u32) {
        self.stats.packets_received += self.batch.len() as u64;
        // One pass over the packets: stamp the in_port, note lengths (for the flow stats),
        // spot runts.
        let mut runt = false;
        for (p, l) in self.batch.iter_mut().zip(self.s.lens.iter_mut()) {
            p.in_port = in_port;
            *l = p.len() as u32;
            runt |= p.len() < ETH_HEADER_LEN;
        }
        if runt {
            let before = self.batch.len();
            self.batch
                .retain_or_free(&mut self.pool, |p| p.len() >= ETH_HEADER_LEN);
            let runts = (before - self.batch.len()) as u64;
            self.stats.lost_reasons.runt += runts;
            self.stats.lost += runts;
            for (p, l) in self.batch.iter().zip(self.s.lens.iter_mut()) {
                *l = p.len() as u32;
            }
        }
        let n = self.batch.len().min(BATCH_MAX);
        if n == 0 {
            return;
        }
        if self.metas_port != Some(in_port) {
            self.s
                .metas
                .fill(PacketMeta::port(in_port).with_vlan_limit(self.cfg.vlan_limit));
            self.metas_port = Some(in_port);
        }
        self.s.depth[..n].fill(0);
        self.run_pass(in_port, n, false, 0);
        self.run_recirculations();
    }

    /// One datapath pass over `self.batch` (`n` packets, metadata in `s.metas`, frame lengths
    /// in `s.lens`); with `learn`, the packets' origins (`s.origin`) learn the flows found;
    /// the packets of bit mask `pre` take the flows their hints name instead of a lookup.
    fn run_pass(&mut self, in_port: u32, n: usize, learn: bool, pre: u32) {
        {
            let pkts = self.batch.as_slice();
            extract_hash_batch(
                pkts.get(..n).unwrap_or_default(),
                &self.s.metas[..n],
                &mut self.s.keys[..n],
                &mut self.s.maps[..n],
                &mut self.s.hashes[..n],
                0,
            );
        }
        self.classify(in_port, n, pre);
        if learn {
            self.learn_hints(n);
        }
        self.execute(n);
    }

    /// Records, for each packet of this (recirculated) pass whose origin asks for it, the
    /// flow its full classification found ([`crate::recirc_hint`]).
    fn learn_hints(&mut self, n: usize) {
        for i in 0..n.min(BATCH_MAX) {
            let o = self.s.origin[i];
            if !matches!(o, Origin::Learn { .. }) {
                continue;
            }
            let g = usize::from(self.g.of[i]);
            if let Some(f) = self.g.flow_of(g) {
                self.emc.hints_mut().learn(o, &self.s.metas[i], f);
            }
        }
    }

    /// A recirculated pass whose every packet's flow a hint names: no extraction, hashing or
    /// lookup; the packets join their flows' batches and run their actions as after a
    /// classification (counted as recirculation-hint hits).
    fn run_hinted(&mut self, n: usize) {
        let n = n.min(BATCH_MAX);
        self.g.clear();
        self.s.emc_slot[..n].fill(NO_SLOT);
        for i in 0..n {
            if let Some(f) = self.emc.hints().taken(self.s.origin[i]) {
                self.g.join(i, f, self.s.lens[i], self.s.hint_flags[i]);
            }
        }
        self.stats.recirc_hint_hits += n as u64;
        self.g.record_stats(self.batch_ms);
        self.execute(n);
    }

    /// Runs the recirculation queue dry, a batch of ≤ 32 at a time (OVS runs a recirculated
    /// batch right after the pass that produced it; the depth limit ends any loop).
    fn run_recirculations(&mut self) {
        while !self.recirc.is_empty() {
            // Packets of one batch share an in_port (one PMD batch comes from one port).
            let Some(in_port) = self.recirc.front().map(|q| q.md.in_port) else {
                break;
            };
            let mut n = 0;
            let (mut pre, mut learn) = (0u32, false);
            while n < BATCH_MAX && self.recirc.front().is_some_and(|q| q.md.in_port == in_port) {
                let Some(q) = self.recirc.pop_front() else {
                    break;
                };
                self.s.metas[n] = q.md;
                self.s.depth[n] = q.depth;
                self.s.lens[n] = q.p.len() as u32;
                self.s.origin[n] = q.origin;
                self.s.hint_flags[n] = q.tcp_flags;
                if let Err(p) = self.batch.push(q.p) {
                    self.pool.free(p);
                    self.stats.recirc_dropped += 1;
                    continue;
                }
                if self.emc.hints().flow(q.origin).is_some() {
                    pre |= 1 << n;
                }
                learn |= matches!(q.origin, Origin::Learn { .. });
                n += 1;
            }
            // The metadata array now holds per-packet values.
            self.metas_port = None;
            self.stats.recirculations += n as u64;
            let all = u32::MAX.checked_shr((BATCH_MAX - n) as u32).unwrap_or(0);
            if n > 0 && pre == all {
                self.run_hinted(n);
            } else {
                self.run_pass(in_port, n, learn, pre);
            }
        }
    }

    /// Queues `p` (packet `i` of the current pass) for another pass with `recirc_id = id`.
    fn recirculate(&mut self, p: Packet, i: usize, id: u32) {
        let (Some(&md), Some(&depth)) = (self.s.metas.get(i), self.s.depth.get(i)) else {
            self.pool.free(p);
            return;
        };
        self.queue_recirc(p, md, depth, id, 0, Origin::None);
    }

    /// Queues `p` (metadata `md`, `depth` passes taken before this one) for another pass with
    /// `recirc_id = id`, or drops it past the depth limit or into a full queue.
    #[inline(always)]
    fn queue_recirc(
        &mut self,
        p: Packet,
        mut md: PacketMeta,
        depth: u8,
        id: u32,
        tcp_flags: u16,
        origin: Origin,
    ) {
        let depth = depth.saturating_add(1);
        if depth >= MAX_RECIRC_DEPTH || self.recirc.len() >= RECIRC_QUEUE_MAX {
            self.stats.recirc_dropped += 1;
            self.pool.free(p);
            return;
        }
        md.recirc_id = id;
        self.recirc.push_back(Queued {
            p,
            md,
            depth,
            tcp_flags,
            origin,
        });
    }

    /// Executes `ct(params),recirc(id)` for a flow batch (`members`, rx order, taken out of
    /// `pkts`): the same as [`Pmd::execute_one`] on each packet in turn — the tracker sees
    /// them in the same order ([`ConnTracker::track_batch`]) and they join the recirculation
    /// queue in the same order, with the same drops — but the tracker is called once, and
    /// the packets' metadata is gathered beside them rather than written back into the
    /// pass's (so a first pass leaves `s.metas` as it was).
    fn ct_recirc_batch(
        &mut self,
        view: &ActionsView,
        members: &[u8],
        pkts: &mut [Option<Packet>],
        params: &CtParams,
        id: u32,
    ) {
        let mut ps = std::mem::take(&mut self.s.ct_pkts);
        ps.clear();
        for &i in members {
            let i = usize::from(i);
            let (Some(&md), Some(&depth)) = (self.s.metas.get(i), self.s.depth.get(i)) else {
                continue;
            };
            if let Some(p) = pkts.get_mut(i).and_then(Option::take) {
                let k = ps.len().min(BATCH_MAX - 1);
                self.s.ct_metas[k] = md;
                self.s.ct_depth[k] = depth;
                let slot = self.s.emc_slot[i];
                self.s.ct_slot[k] = slot;
                // The TCP flags of the key this pass extracted (only a hinted packet uses
                // them, and only a packet with an EMC slot, whose key is this pass's).
                self.s.ct_flags[k] = if slot == NO_SLOT {
                    0
                } else {
                    tcp_flags(&self.s.keys[i])
                };
                ps.push(p);
            }
        }
        let k = ps.len().min(BATCH_MAX);
        self.warn_placeholder();
        let mut out = std::mem::take(&mut self.ct_out);
        self.ct.track_batch(
            &mut ps[..k],
            &mut self.s.ct_metas[..k],
            params,
            self.batch_ms,
            &mut out,
        );
        if out.is_empty() {
            let hints = self.cfg.emc && self.cfg.recirc_hints;
            for (j, p) in ps.drain(..).enumerate() {
                let j = j.min(BATCH_MAX - 1);
                let depth = self.s.ct_depth[j];
                let slot = self.s.ct_slot[j];
                // The metadata is read in place (it is copied only into a queue entry).
                let md = &mut self.s.ct_metas[j];
                md.recirc_id = id;
                // A hint needs the packet as the first pass saw it: not after NAT rewrote it.
                let origin = if hints
                    && slot != NO_SLOT
                    && md.ct_state & (ct_state::SRC_NAT | ct_state::DST_NAT) == 0
                {
                    self.emc.hints().check(usize::from(slot), md)
                } else {
                    Origin::None
                };
                // The second pass right here when its flow only outputs and no packet
                // waits in the queue: the packet is sent after this pass's own outputs,
                // before any queued pass runs — where the queue would have sent it.
                if self.recirc.is_empty()
                    && depth.saturating_add(1) < MAX_RECIRC_DEPTH
                    && let Some(pi) = self.fused_output(view, origin, p.len(), j)
                {
                    self.fused.push((pi, p));
                    continue;
                }
                let md = self.s.ct_metas[j];
                self.queue_recirc(p, md, depth, id, self.s.ct_flags[j], origin);
            }
        } else {
            // IP fragments held or released: a held packet is dropped here; the frames a
            // packet released follow it in the queue (as in `execute_one`), in the tracker's
            // order, with its passes. No recirculation hints on this rare path.
            let held = out.held;
            let mut rel = out.released.drain(..).peekable();
            for (j, p) in ps.drain(..).enumerate() {
                let jj = j.min(BATCH_MAX - 1);
                if j < 64 && held & (1 << j) != 0 {
                    self.stats.ct_held += 1;
                    self.pool.free(p);
                } else {
                    let (md, depth) = (self.s.ct_metas[jj], self.s.ct_depth[jj]);
                    self.queue_recirc(p, md, depth, id, 0, Origin::None);
                }
                while let Some(r) = rel.next_if(|r| r.from <= j) {
                    self.queue_released(r, id);
                }
            }
            for r in rel {
                self.queue_released(r, id);
            }
            out.clear();
        }
        self.ct_out = out;
        self.s.ct_pkts = ps;
    }

    /// The fused second pass of packet `j` of a `ct,recirc` batch (`len` bytes, first pass
    /// hit EMC entry whose hint `origin` matched): when the hint's flow is alive and its
    /// actions are one `output`, that pass is counted (a recirculation taken from a hint, the
    /// flow's stats) and the port's index returned for the caller to send the packet to —
    /// the same outcome as queueing the packet and running a hinted pass over it (seed
    /// 002's saving, with the tracker still run on the packet and nothing about the
    /// connection cached). `None`: nothing done, the packet takes the queue.
    #[inline]
    fn fused_output(
        &mut self,
        view: &ActionsView,
        origin: Origin,
        len: usize,
        j: usize,
    ) -> Option<usize> {
        let f = self.emc.hints().flow(origin)?;
        let &[DpAction::Output(no)] = view.get(f.actions())? else {
            return None;
        };
        let pi = self.ports.iter().position(|p| p.no == no)?;
        let flags = self.s.ct_flags.get(j).copied().unwrap_or(0);
        f.stats.record(1, len as u64, self.batch_ms, flags);
        self.stats.recirculations += 1;
        self.stats.recirc_hint_hits += 1;
        self.stats.recirc_fused += 1;
        Some(pi)
    }

    /// Queues a frame the tracker released in `ct_recirc_batch` for its next pass.
    fn queue_released(&mut self, r: CtRelease, id: u32) {
        let depth = self.s.ct_depth[r.from.min(BATCH_MAX - 1)];
        if let Some(p) = self.released_packet(&r.frame, r.md.in_port) {
            self.queue_recirc(p, r.md, depth, id, 0, Origin::None);
        }
    }

    /// A frame the tracker released, in a buffer of the pool (counted; without a buffer,
    /// counted as dropped and `None`).
    fn released_packet(&mut self, frame: &[u8], in_port: u32) -> Option<Packet> {
        self.stats.ct_released += 1;
        let Some(mut p) = self.pool.alloc() else {
            self.stats.ct_release_dropped += 1;
            return None;
        };
        if p.set_data(frame).is_err() {
            self.pool.free(p);
            self.stats.ct_release_dropped += 1;
            return None;
        }
        p.in_port = in_port;
        Some(p)
    }

    /// Runs the frames the tracker released at the `ct` action `list[start - 1]`, executed
    /// for packet `i`, through `list[start..]`, in order, each with its own metadata (in
    /// `s.metas[i]`, which the packet no longer needs).
    fn run_released(&mut self, list: &[DpAction], start: usize, mut out: CtOut, i: usize) {
        for r in out.released.drain(..) {
            let Some(p) = self.released_packet(&r.frame, r.md.in_port) else {
                continue;
            };
            if let Some(md) = self.s.metas.get_mut(i) {
                *md = r.md;
                self.metas_port = None;
                self.execute_actions(list, start, p, i);
            } else {
                self.pool.free(p);
            }
        }
        // Keep the allocation for the next time.
        out.clear();
        if self.ct_out.released.capacity() == 0 {
            self.ct_out = out;
        }
    }

    /// Warns once if `ct` runs the placeholder tracker.
    fn warn_placeholder(&mut self) {
        if self.ct_checked {
            return;
        }
        self.ct_checked = true;
        if self.ct.is_placeholder() {
            eprintln!(
                "warning: pmd on core {}: ct() runs the placeholder tracker (every packet +trk+inv); \
                 configure a connection tracker with Pmd::set_conntrack",
                self.stats.core_id
            );
        }
    }

    /// Runs packet `i` of the current pass through the connection tracker. True if the
    /// tracker held the packet or released frames (then in `ct_out`, for the caller to take).
    fn conntrack(&mut self, p: &mut Packet, i: usize, params: &CtParams, now_ms: u64) -> bool {
        self.warn_placeholder();
        let Some(md) = self.s.metas.get_mut(i) else {
            return false;
        };
        self.metas_port = None;
        if self
            .ct
            .track(p, md, params, now_ms, &mut self.ct_out.released)
            == CtVerdict::Held
        {
            self.ct_out.hold(0);
        }
        !self.ct_out.is_empty()
    }

    /// Forgets packet `i`'s conntrack metadata (`ct_clear`).
    fn ct_clear(&mut self, i: usize) {
        if let Some(md) = self.s.metas.get_mut(i) {
            ct_clear(md);
            self.metas_port = None;
        }
    }

    /// Replaces the connection tracker (the default answers `+trk+inv`; see [`crate::ct`]).
    pub fn set_conntrack(&mut self, ct: Box<dyn ConnTracker>) {
        self.ct = ct;
        self.ct_checked = false;
    }

    fn classify(&mut self, in_port: u32, n: usize, pre: u32) {
        // A pass is at most one batch (lets the compiler drop the per-packet bounds checks).
        let n = n.min(BATCH_MAX);
        // The burst's start time stands for every packet of it (flow `used` times, in ms).
        let now_ms = self.batch_ms;
        let (emc_on, smc_on) = (self.cfg.emc, self.cfg.smc);
        // The classifier snapshot is held (an `Arc` count up and down: two atomic operations)
        // only with the SMC on or for misses: with the SMC off an all-EMC-hit burst does not
        // need it. It is still refreshed every burst (one atomic load when unchanged), so a
        // snapshot the PMD no longer uses (and the removed flows it holds) is let go.
        let mut snap = if smc_on {
            Some(self.reader.snapshot().clone())
        } else {
            self.reader.snapshot();
            None
        };
        let mut miss_idx = [0u8; BATCH_MAX];
        let mut m = 0usize;
        self.g.clear();
        // Request the batch's cache entries at once: with many flows they are misses, and
        // overlapping them beats paying each in turn in the loop below. An EMC of a few
        // entries stays in L1 and is not prefetched (the hint would only cost instructions);
        // the SMC is prefetched only when it is the first tier (behind the EMC it sees few
        // packets).
        if emc_on {
            if self.emc.occupied() > EMC_PREFETCH_MIN {
                for &h in &self.s.hashes[..n] {
                    self.emc.prefetch(h);
                }
            }
        } else if smc_on {
            for &h in &self.s.hashes[..n] {
                self.smc.prefetch(h);
            }
        }
        // EMC for the whole burst first, each hit joined to its flow batch on the spot, before
        // anything is inserted into it (an insert could replace an entry a later packet
        // would hit). As OVS's emc_processing, so a packet whose key another packet of the
        // same burst inserts still misses the EMC this time; the flow it finds is the same.
        self.s.emc_slot[..n].fill(NO_SLOT);
        // Packets a recirculation hint classified (a pass mixing them with others).
        let mut p = pre;
        while p != 0 {
            let i = p.trailing_zeros() as usize % BATCH_MAX;
            p &= p - 1;
            if let Some(f) = self.emc.hints().taken(self.s.origin[i]) {
                self.g
                    .join(i, f, self.s.lens[i], tcp_flags(&self.s.keys[i]));
            }
        }
        self.stats.recirc_hint_hits += u64::from(pre.count_ones());
        let hits = if emc_on {
            let (g, lens, keys) = (&mut self.g, &self.s.lens, &self.s.keys);
            let slots = &mut self.s.emc_slot;
            self.emc
                .lookup_batch(&self.s.keys, &self.s.maps, &self.s.hashes, n, |i, s, f| {
                    if pre & (1 << (i % BATCH_MAX)) == 0 {
                        slots[i % BATCH_MAX] = s as u16;
                        g.join(i, f, lens[i % BATCH_MAX], tcp_flags(&keys[i % BATCH_MAX]))
                    }
                })
                & !pre
        } else {
            0
        };
        let emc_hits = u64::from(hits.count_ones());
        // Bits 0..n (no bit for an empty pass) but the hits and the hinted.
        let mut rest = u32::MAX.checked_shr((BATCH_MAX - n) as u32).unwrap_or(0) & !hits & !pre;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let (k, map, h) = (&self.s.keys[i], self.s.maps[i], self.s.hashes[i]);
            if let Some(snap) = &snap
                && let Some(f) = self.smc.lookup(&snap.arena, k, h)
            {
                self.stats.smc_hits += 1;
                self.g.join(i, f, self.s.lens[i], tcp_flags(k));
                if emc_on {
                    self.emc.maybe_insert(k, map, h, f);
                }
                continue;
            }
            if let Some(x) = miss_idx.get_mut(m) {
                *x = i as u8;
                m += 1;
            }
        }
        self.stats.emc_hits += emc_hits;
        if m > 0 {
            let snap = snap.get_or_insert_with(|| self.reader.snapshot().clone());
            self.classify_misses(in_port, snap, &miss_idx[..m]);
        }
        self.g.record_stats(now_ms);
    }

    /// dpcls for the EMC/SMC misses, then upcalls for what dpcls missed.
    fn classify_misses(&mut self, in_port: u32, snap: &Arc<Snapshot>, miss_idx: &[u8]) {
        let m = miss_idx.len();
        // With the EMC and SMC off (or cold) every packet misses: look the batch's keys up in
        // place instead of copying 256-byte keys.
        let identity = miss_idx
            .iter()
            .enumerate()
            .all(|(j, &i)| usize::from(i) == j);
        if !identity {
            for (j, &i) in miss_idx.iter().enumerate() {
                self.s.miss_keys[j] = self.s.keys[usize::from(i)];
            }
        }
        let keys = if identity {
            &self.s.keys[..m]
        } else {
            &self.s.miss_keys[..m]
        };
        let mut out: [Option<&Arc<DpFlow>>; BATCH_MAX] = [None; BATCH_MAX];
        let ls = snap.lookup_batch(in_port, keys, &mut out[..m]);
        self.stats.subtable_lookups += ls.lookups;
        let mut still = [0u8; BATCH_MAX];
        let mut s_n = 0usize;
        for (j, &i) in miss_idx.iter().enumerate() {
            let i = usize::from(i);
            match out[j] {
                Some(f) => self.megaflow_hit(f, i),
                None => {
                    still[s_n] = i as u8;
                    s_n += 1;
                }
            }
        }
        let mut installed = false;
        for &i in &still[..s_n] {
            let i = usize::from(i);
            if installed {
                // A flow installed for an earlier packet of this batch may cover this one.
                let fresh = self.dpcls.snapshot();
                let mut o = [None];
                let ls = fresh.lookup_batch(in_port, std::slice::from_ref(&self.s.keys[i]), &mut o);
                if let Some(f) = o[0] {
                    self.stats.subtable_lookups += ls.lookups;
                    self.megaflow_hit(f, i);
                    continue;
                }
            }
            if !self.upcall_allowed(in_port) {
                // Over the port's upcall rate: dropped and counted (no batch, freed with
                // the packets without actions).
                self.stats.lost_reasons.upcall_limited += 1;
                self.stats.lost += 1;
                continue;
            }
            let key = self.s.keys[i];
            let t0 = netdev::tsc::now();
            let answer = self.upcall.upcall(&key, &self.actions);
            self.stats.upcall_cycles += netdev::tsc::now().wrapping_sub(t0);
            match answer {
                Ok((mask, aid)) => {
                    self.stats.upcall_ok += 1;
                    if !self.upcall.may_install() {
                        self.stats.flows_not_installed += 1;
                        let set = self.actions.take(aid);
                        self.g.join_unflowed(i, aid, set);
                        continue;
                    }
                    let mut mask = mask;
                    mask.w[0] = u64::MAX; // in_port and recirc_id exact, as OVS
                    // The ufid is the megaflow's own (a duplicate install is recognised by
                    // it); the flow owns the upcall's action set.
                    let ufid = Ufid::of(&key, &mask);
                    let set = self.actions.take(aid);
                    let flow = match &set {
                        Some(s) => DpFlow::with_actions(ufid, &key, &mask, Arc::clone(s)),
                        None => DpFlow::new(ufid, &key, &mask, aid),
                    };
                    match self.dpcls.insert(flow) {
                        Ok(ins) => {
                            installed = true;
                            let f = ins.flow();
                            if matches!(ins, crate::dpcls::Inserted::New(..)) {
                                self.stats.flows_installed += 1;
                                if !self.upcall.installed(f) {
                                    self.stats.installs_revoked += 1;
                                    self.dpcls.remove(f.ufid);
                                    self.g.join_unflowed(i, aid, f.action_set());
                                    continue;
                                }
                            }
                            self.g.join(i, f, self.s.lens[i], tcp_flags(&key));
                            let (map, h) = (self.s.maps[i], self.s.hashes[i]);
                            if self.cfg.emc {
                                self.emc.maybe_insert(&key, map, h, f);
                            }
                            if self.cfg.smc {
                                self.smc.insert(h, ins.index());
                            }
                        }
                        Err(_) => {
                            self.stats.install_failed += 1;
                            self.g.join_unflowed(i, aid, set);
                        }
                    }
                }
                Err(_) => self.stats.upcall_failed += 1,
            }
        }
    }

    /// Whether `in_port` may make one more upcall now (takes it from the port's bucket).
    fn upcall_allowed(&mut self, in_port: u32) -> bool {
        let (rate, burst, now) = (self.cfg.upcall_rate, self.cfg.upcall_burst, self.batch_ms);
        if rate == 0 {
            return true;
        }
        match self.ports.iter_mut().find(|p| p.no == in_port) {
            Some(p) => p.bucket.take(now, rate, burst),
            None => true,
        }
    }

    fn megaflow_hit(&mut self, f: &Arc<DpFlow>, i: usize) {
        let (k, map, h) = (&self.s.keys[i], self.s.maps[i], self.s.hashes[i]);
        self.g.join(i, f, self.s.lens[i], tcp_flags(k));
        self.stats.megaflow_hits += 1;
        if self.cfg.emc {
            self.emc.maybe_insert(k, map, h, f);
        }
        if self.cfg.smc
            && let Some(idx) = f.arena_index()
        {
            self.smc.insert(h, idx);
        }
    }

    /// Executes each flow batch's actions (batches in the order of their first packet,
    /// packets in rx order within one), then sends the output batches.
    fn execute(&mut self, n: usize) {
        let view = self.take_view();
        if self.execute_whole_batch(n, &view) {
            self.g.release();
            self.flush_outputs();
            self.view = Some(view);
            return;
        }
        let mut pkts = std::mem::take(&mut self.s.pkts);
        pkts.clear();
        pkts.extend(self.batch.drain().map(Some));
        let n = n.min(pkts.len());
        let (seq, order) = self.g.order(n);
        let mut pos = 0usize;
        for &g in &seq[..self.g.n] {
            let g = usize::from(g);
            let cnt = self.g.packets[g] as usize;
            let members = order.get(pos..pos + cnt).unwrap_or_default();
            pos += cnt;
            let aid = self.g.aid[g];
            // The view answers the id only if it holds exactly that id; else the flow's own
            // set (see `crate::action_table`, "the read rule").
            let fallback;
            let list = match view.get(aid) {
                Some(l) => Some(l),
                None => {
                    fallback = self.fallback_actions(g, aid);
                    fallback.as_deref()
                }
            };
            if let Some(&[DpAction::Output(no)]) = list
                && let Some(pi) = self.ports.iter().position(|p| p.no == no)
            {
                // The common case: every packet of the batch goes to one port, no copies.
                for &i in members {
                    if let Some(p) = pkts.get_mut(usize::from(i)).and_then(Option::take) {
                        self.enqueue(pi, p);
                    }
                }
                continue;
            }
            if let Some(&[DpAction::Ct(ref params), DpAction::Recirc(id)]) = list {
                // Every stateful pipeline's first pass: the tracker takes the batch at once.
                self.ct_recirc_batch(&view, members, &mut pkts, params, id);
                continue;
            }
            for &i in members {
                if let Some(p) = pkts.get_mut(usize::from(i)).and_then(Option::take) {
                    match list {
                        Some(list) => self.execute_actions(list, 0, p, usize::from(i)),
                        None => {
                            self.stats.action_drops += 1;
                            self.pool.free(p);
                        }
                    }
                }
            }
        }
        self.g.release();
        // Packets without actions (failed upcalls, counted there).
        for p in pkts.iter_mut().filter_map(Option::take) {
            self.pool.free(p);
        }
        self.s.pkts = pkts;
        let mut fused = std::mem::take(&mut self.fused);
        for (pi, p) in fused.drain(..) {
            self.enqueue(pi, p);
        }
        self.fused = fused;
        self.flush_outputs();
        self.view = Some(view);
    }

    /// The newest action-table view, taken out of `self` for a pass (a pointer compare when
    /// nothing changed: no reference-count update). Put back with `self.view = Some(..)`.
    #[inline]
    fn take_view(&mut self) -> Arc<ActionsView> {
        let cur = self.act_reader.view();
        match self.view.take() {
            Some(v) if Arc::ptr_eq(&v, cur) => v,
            _ => Arc::clone(cur),
        }
    }

    /// Batch `g`'s actions when the PMD's view misses `aid`: the flow's own set (its current
    /// actions), else (a batch without a flow, whose set the batch holds, or a flow built
    /// from a bare id) the newest view.
    #[cold]
    fn fallback_actions(&self, g: usize, aid: ActionsId) -> Option<Arc<[DpAction]>> {
        match self.g.flow_of(g).and_then(|f| f.action_set()) {
            Some(set) => Some(Arc::clone(set.list())),
            None => self.actions.get(aid),
        }
    }

    /// The common case of a burst whose every packet hit a flow with the same actions, one
    /// output: the whole rx batch becomes the port's output batch in rx order (a swap, no
    /// per-packet work; flow stats were already written per flow). False if the burst is not
    /// that case (nothing done).
    fn execute_whole_batch(&mut self, n: usize, view: &ActionsView) -> bool {
        let groups = self.g.n;
        if groups == 0 || self.batch.len() != n {
            return false;
        }
        let aid = self.g.aid[0];
        if self.g.aid[1..groups].iter().any(|&a| a != aid)
            || self.g.packets[..groups]
                .iter()
                .map(|&p| p as usize)
                .sum::<usize>()
                != n
        {
            return false;
        }
        let Some(&[DpAction::Output(no)]) = view.get(aid) else {
            return false;
        };
        let Some(slot) = self.ports.iter_mut().find(|p| p.no == no) else {
            return false;
        };
        if !slot.out.is_empty() {
            return false;
        }
        std::mem::swap(&mut self.batch, &mut slot.out);
        true
    }

    /// Sends every non-empty output batch.
    fn flush_outputs(&mut self) {
        for slot in &mut self.ports {
            if !slot.out.is_empty() {
                self.stats.tx_packets += slot.out.len() as u64;
                self.stats.tx_batches += 1;
                slot.port.tx_burst(&mut slot.out, &mut self.pool);
            }
        }
    }

    /// Executes `list[start..]` on `pkt` (packet `i` of the pass, metadata `s.metas[i]`).
    fn execute_actions(&mut self, list: &[DpAction], start: usize, pkt: Packet, i: usize) {
        if !self.run_actions(list, start, pkt, i) {
            self.stats.action_drops += 1;
        }
    }

    /// [`Self::execute_actions`] without the drop count: whether the packet (or a copy) was
    /// sent, recirculated or held.
    fn run_actions(&mut self, list: &[DpAction], start: usize, pkt: Packet, i: usize) -> bool {
        let mut pkt = Some(pkt);
        let mut sent = false;
        // Frames the tracker released at a `ct`, with the index of the action after it.
        let mut released: Vec<(usize, CtOut)> = Vec::new();
        // The end of a clone body already run: its actions are skipped here.
        let mut resume = 0;
        for (j, a) in list.iter().enumerate().skip(start) {
            if j < resume {
                continue;
            }
            let last = j + 1 == list.len();
            match *a {
                DpAction::CheckPktLen { size, gt, le } => {
                    let g = (j + 1 + usize::from(gt)).min(list.len());
                    let end = (g + usize::from(le)).min(list.len());
                    resume = end;
                    let Some(p) = pkt.as_ref() else {
                        continue;
                    };
                    let larger = crate::check_len::check_len_size(p.data()) > usize::from(size);
                    let (from, to) = if larger { (j + 1, g) } else { (g, end) };
                    // As a clone: a copy with the metadata as it is now, or the packet itself
                    // when the check is the list's last action.
                    let body = if end == list.len() {
                        pkt.take()
                    } else {
                        self.clone_packet(p)
                    };
                    let Some(copy) = body else {
                        self.stats.output_errors += 1;
                        continue;
                    };
                    let saved = self.s.metas.get(i).copied();
                    let body = list.get(from..to).unwrap_or_default();
                    sent |= self.run_actions(body, 0, copy, i);
                    if let (Some(m), Some(md)) = (saved, self.s.metas.get_mut(i)) {
                        *md = m;
                    }
                    if pkt.is_none() {
                        break;
                    }
                }
                DpAction::Clone { len } => {
                    let end = (j + 1 + usize::from(len)).min(list.len());
                    resume = end;
                    // The body runs on a copy with the metadata as it is now; afterwards the
                    // packet and its metadata are as before (the clone as the list's last
                    // action takes the packet itself).
                    let body = if end == list.len() {
                        pkt.take()
                    } else {
                        pkt.as_ref().and_then(|p| self.clone_packet(p))
                    };
                    let Some(copy) = body else {
                        self.stats.output_errors += 1;
                        continue;
                    };
                    let saved = self.s.metas.get(i).copied();
                    let body = list.get(j + 1..end).unwrap_or_default();
                    sent |= self.run_actions(body, 0, copy, i);
                    if let (Some(m), Some(md)) = (saved, self.s.metas.get_mut(i)) {
                        *md = m;
                    }
                    if pkt.is_none() {
                        break;
                    }
                }
                DpAction::Output(no) => {
                    let Some(pi) = self.ports.iter().position(|p| p.no == no) else {
                        self.stats.output_errors += 1;
                        continue;
                    };
                    let p = if last {
                        pkt.take()
                    } else {
                        pkt.as_ref().and_then(|p| self.clone_packet(p))
                    };
                    let Some(p) = p else {
                        self.stats.output_errors += 1;
                        continue;
                    };
                    self.enqueue(pi, p);
                    sent = true;
                }
                DpAction::Drop => break,
                DpAction::Ct(params) => {
                    if let Some(p) = pkt.as_mut()
                        && self.conntrack(p, i, &params, self.batch_ms)
                    {
                        // Held or released IP fragments: the released frames run the rest
                        // of the list once this packet is done.
                        let out = std::mem::take(&mut self.ct_out);
                        if out.held != 0 {
                            if let Some(p) = pkt.take() {
                                self.pool.free(p);
                            }
                            self.stats.ct_held += 1;
                            sent = true;
                        }
                        released.push((j + 1, out));
                        if pkt.is_none() {
                            break;
                        }
                    }
                }
                DpAction::CtClear => self.ct_clear(i),
                DpAction::Userspace(ref cookie) => {
                    if let Some(p) = pkt.as_ref() {
                        let md = self
                            .s
                            .metas
                            .get(i)
                            .copied()
                            .unwrap_or(PacketMeta::port(p.in_port));
                        let mut key = FlowKey::ZERO;
                        flow::extract::extract(p.data(), &md, &mut key);
                        self.upcall.action_upcall(&key, p.data(), cookie);
                        self.stats.action_upcalls += 1;
                    }
                }
                DpAction::Hash { symmetric, basis } => {
                    if let Some(p) = pkt.as_ref() {
                        let h = crate::actions::packet_dp_hash(p.data(), symmetric, basis);
                        if let Some(md) = self.s.metas.get_mut(i) {
                            md.dp_hash = h;
                            self.metas_port = None;
                        }
                        self.stats.dp_hashes += 1;
                    }
                }
                DpAction::Recirc(id) => {
                    let p = if last {
                        pkt.take()
                    } else {
                        pkt.as_ref().and_then(|p| self.clone_packet(p))
                    };
                    match p {
                        Some(p) => {
                            self.recirculate(p, i, id);
                            sent = true;
                        }
                        None => self.stats.output_errors += 1,
                    }
                }
                ref edit => {
                    if let Some(p) = pkt.as_mut() {
                        apply_edit(p, edit);
                    }
                }
            }
        }
        if let Some(p) = pkt {
            self.pool.free(p);
        }
        for (start, out) in released {
            self.run_released(list, start, out, i);
        }
        sent
    }

    fn clone_packet(&mut self, p: &Packet) -> Option<Packet> {
        let mut c = self.pool.alloc()?;
        if c.set_data(p.data()).is_err() {
            self.pool.free(c);
            return None;
        }
        c.in_port = p.in_port;
        Some(c)
    }

    fn enqueue(&mut self, pi: usize, p: Packet) {
        let Some(slot) = self.ports.get_mut(pi) else {
            self.pool.free(p);
            return;
        };
        if slot.out.is_full() {
            self.stats.tx_packets += slot.out.len() as u64;
            self.stats.tx_batches += 1;
            slot.port.tx_burst(&mut slot.out, &mut self.pool);
        }
        if let Err(p) = slot.out.push(p) {
            self.pool.free(p);
        }
    }
}

#[inline]
fn tcp_flags(k: &FlowKey) -> u16 {
    ((k.w[flow::key::w::TP] >> 16) & 0x0fff) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `FlowBatches` against a trivially-correct grouping (a linear scan by flow pointer) on
    /// random bursts over flows whose hint slots collide (arena indices 64 apart) or are
    /// absent (never pushed): same batch per packet, same counts, bytes, flags and order.
    #[test]
    fn flow_batches_match_linear_grouping() {
        use crate::flow_table::FlowArena;
        use crate::megaflow::Ufid;
        use flow::FlowMask;
        let arena = FlowArena::new(300);
        let flows: Vec<Arc<DpFlow>> = (0..200u32)
            .map(|i| {
                let f = Arc::new(DpFlow::new(
                    Ufid(u128::from(i)),
                    &FlowKey::ZERO,
                    &FlowMask::CATCHALL,
                    u64::from(i % 3),
                ));
                if i < 190 {
                    arena.push(f.clone()).expect("room");
                }
                f
            })
            .collect();
        let mut x = 0x2545_f491u32;
        let mut rnd = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n
        };
        let mut g = FlowBatches::default();
        for burst in 0..2000 {
            let n = 1 + rnd(BATCH_MAX as u32) as usize;
            // Few or many distinct flows per burst, from a narrow or a colliding set.
            let pool: Vec<usize> = match burst % 4 {
                0 => vec![rnd(200) as usize],
                1 => (0..10).map(|_| rnd(200) as usize).collect(),
                2 => (0..6).map(|j| (j * 64 + rnd(2) as usize) % 200).collect(),
                _ => (0..40).map(|_| rnd(200) as usize).collect(),
            };
            g.clear();
            let mut want: Vec<(usize, u32, u64, u16)> = Vec::new(); // flow, packets, bytes, flags
            let mut want_of = Vec::new();
            for i in 0..n {
                let fi = pool[rnd(pool.len() as u32) as usize];
                let (len, fl) = (60 + rnd(1000), rnd(0x1000) as u16);
                g.join(i, &flows[fi], len, fl);
                let b = match want.iter().position(|w| w.0 == fi) {
                    Some(b) => b,
                    None => {
                        want.push((fi, 0, 0, 0));
                        want.len() - 1
                    }
                };
                want[b].1 += 1;
                want[b].2 += u64::from(len);
                want[b].3 |= fl;
                want_of.push(b);
            }
            assert_eq!(g.n, want.len(), "burst {burst}");
            for (b, w) in want.iter().enumerate() {
                let f = g.flow_of(b).expect("flow");
                assert!(Arc::ptr_eq(f, &flows[w.0]), "burst {burst} batch {b}");
                assert_eq!(
                    (g.packets[b], g.bytes[b], g.flags[b], g.aid[b]),
                    (w.1, w.2, w.3, flows[w.0].actions()),
                    "burst {burst} batch {b}"
                );
            }
            for (i, &b) in want_of.iter().enumerate() {
                assert_eq!(usize::from(g.of[i]), b, "burst {burst} packet {i}");
            }
            let (seq, order) = g.order(n);
            assert!(
                seq[..g.n]
                    .iter()
                    .enumerate()
                    .all(|(b, &s)| usize::from(s) == b)
            );
            let mut by_batch: Vec<u8> = Vec::new();
            for b in 0..want.len() {
                by_batch.extend((0..n).filter(|&i| want_of[i] == b).map(|i| i as u8));
            }
            assert_eq!(&order[..n], &by_batch[..], "burst {burst}");
            g.release();
        }
        // References: the test's, the arena's (first 190), and at most one per pinned slot.
        let extra: Vec<usize> = flows
            .iter()
            .enumerate()
            .map(|(i, f)| Arc::strong_count(f) - 1 - usize::from(i < 190))
            .collect();
        assert!(extra.iter().all(|&e| e <= 1), "{extra:?}");
        assert!(extra.iter().sum::<usize>() <= FlowBatches::HINTS);
    }

    #[test]
    fn stats_lines_and_partition() {
        let s = PmdStats {
            packets_received: 10,
            emc_hits: 4,
            smc_hits: 1,
            megaflow_hits: 2,
            subtable_lookups: 3,
            upcall_ok: 1,
            upcall_failed: 1,
            lost: 1,
            recirc_hint_hits: 2,
            recirculations: 2,
            tx_packets: 6,
            tx_batches: 4,
            ..PmdStats::default()
        };
        assert_eq!(s.classified(), 12);
        let text = s.to_string();
        assert!(text.starts_with("pmd thread numa_id 0 core_id 0:\n  packets received: 10\n"));
        assert!(text.contains("\n  avg. subtable lookups per megaflow hit: 1.50\n"));
        assert!(text.contains("\n  avg. packets per output batch: 1.50\n"));
        assert!(
            text.ends_with(
                "\n  lost: 1\n  recirculation hint hits: 2\n  recirculations fused: 0\n  upcalls rate-limited: 0"
            ),
            "{text}"
        );
        // No cycles counted: OVS prints no cycle lines, and neither do we.
        assert!(!text.contains("cycles"), "{text}");
    }

    /// The block's lines, in order, are OVS 3.1's `dpif-netdev/pmd-stats-show` lines (as a
    /// running ovs-vswitchd 3.1.0 printed them, its `main thread:` header aside), then ours.
    #[test]
    fn stats_lines_are_ovs_lines_in_ovs_order() {
        let s = PmdStats {
            packets_received: 7,
            emc_hits: 7,
            idle_cycles: 100,
            processing_cycles: 300,
            ..PmdStats::default()
        };
        let text = s.to_string();
        let names: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.trim_start().split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(
            names[..OVS_PMD_STATS_LINES.len()],
            OVS_PMD_STATS_LINES,
            "{text}"
        );
        assert_eq!(
            names[OVS_PMD_STATS_LINES.len()..],
            OWN_PMD_STATS_LINES,
            "{text}"
        );
        assert!(text.contains("\n  phwol hits: 0\n  mfex opt hits: 0\n  simple match hits: 0\n"));
        assert!(text.contains("\n  avg cycles per packet: 57.14 (400/7)\n"));
        // No packet: OVS stops after the cycle counts.
        let idle = PmdStats {
            idle_cycles: 5,
            ..PmdStats::default()
        };
        assert!(!idle.to_string().contains("cycles per packet"), "{idle}");
    }
}
