//! dpcls: the megaflow classifier of one PMD thread — one classifier per in_port, subtables
//! per mask, batch lookup, subtables ranked per in_port by hits.
//!
//! # Semantics
//!
//! Megaflows do not overlap (the slow path builds them so), so a packet matches at most one
//! live megaflow and the first subtable that hits has the answer: no priorities. Each megaflow
//! matches its in_port exactly (OVS always un-wildcards it), so the flows of one in_port form
//! a classifier of their own ([`DpclsConfig::per_port`]; off = one classifier for every port,
//! the pre-2016 OVS layout, kept for the seed-000 comparison).
//!
//! # Ranking (seed 000, OVS `dpcls_sort_subtable_vector`)
//!
//! Lookup probes a port's subtables in its ranked order and counts, per subtable, the keys it
//! matched (one relaxed `fetch_add` per subtable per batch, on the subtable's own cache
//! line, written by the PMD only), and per batch the sum of the 1-based positions of the hit
//! subtables ("subtable lookups", OVS's `avg. subtable lookups per megaflow hit` =
//! lookups / hits). [`Dpcls::rank`] (called by the PMD every [`DpclsConfig::rank_interval_ms`],
//! 1 s by default) sorts each port's subtables by the hits of the last interval, descending
//! (stable: ties keep their order), and publishes the new order.
//!
//! # Publish protocol (readers never wait)
//!
//! Everything a lookup reads hangs off one immutable [`Snapshot`] — the flow arena, and per
//! port the ranked `Vec<Arc<Subtable>>` — held in an `ArcSwap`. A reader (PMD) keeps an
//! [`arc_swap::Cache`] of it ([`DpclsReader`]): per batch, one atomic load checks for a newer
//! snapshot; the reader then works on its `Arc<Snapshot>`, which keeps everything it reaches
//! alive (RCU: the old snapshot is freed when the last reader drops it). Writers — installs
//! from upcalls, removals from revalidators, the ranker — serialise on one `Mutex` (the only
//! lock; nothing else is locked inside it), build a new snapshot that shares every unchanged
//! part, and `store` it. The ranker uses `try_lock` and skips a round if a writer holds the
//! lock, so a PMD calling `rank` never blocks either.
//!
//! Two kinds of writes do not go through a new snapshot:
//! - adding a flow to an existing subtable with room: the flow is published in the arena
//!   (write-once slot), then its slot in the subtable's atomic table is stored (release);
//! - removing a flow: the flow is marked dead, then its slot becomes a tombstone.
//!
//! A reader on an older snapshot may miss a flow added since (it then goes to the upcall,
//! which re-checks the table under the lock — [`Dpcls::insert`] returns the existing flow —
//! so nothing is installed twice), and may reach a removed flow, which is dead and so a miss.
//! Creating or deleting a subtable, growing or cleaning a subtable's table, compacting the
//! arena and re-ranking all publish a new snapshot. (A fully concurrent table such as OVS's
//! `cmap` would avoid rebuilding a subtable when it grows; the rebuild is amortised O(1)
//! per install, and is the only O(n) step.)
//!
//! # The flow table API, ufids and dumps
//!
//! Flows are indexed by ufid on the writer side. The PMD installs with the megaflow's own
//! ufid ([`crate::megaflow::Ufid::of`]): an install under an installed ufid is the same
//! megaflow (returned as existing) or a ufid collision — refused and counted
//! ([`Dpcls::ufid_collisions`]), never aliased. ofproto's operations — put with
//! create/modify flags, get, delete, flush, full and terse dump — are [`api`]; a dump walks
//! the published snapshot's write-once arena without the writer lock ([`Dpcls::dump`],
//! [`Dpcls::flows`]), in chunks if wanted, so dumping a million flows never blocks an
//! install, a delete or a lookup.
//!
//! # Invariants
//!
//! - A lookup returns only live flows (at the time of the check) that match the key under
//!   their mask; with non-overlapping live flows, exactly the flow a linear scan returns
//!   (tested against the [`crate::twin`] on random sequences).
//! - Every subtable in a snapshot is non-empty, and every port entry has a subtable.
//! - Only the writer (under the lock) mutates subtable tables and the arena.
//! - Every live flow is in the writer's ufid index and in the published arena (so a dump
//!   sees it); a flow out of the index is dead.

pub mod api;
pub mod subtable;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use arc_swap::{ArcSwap, Cache};
use flow::hash::{Crc32c, CrcTask, Level, hash_masked_with, run_at, run_best};
use flow::{FlowKey, FlowMask, WordMap};

use crate::flow_table::{FlowArena, FlowIndex};
use crate::megaflow::{DpFlow, Ufid};
pub use api::{FlowDump, FlowError, FlowPut, PutMode, PutOutcome, TerseFlow};
pub use subtable::{Impl, MAX_SPECIALISED, Shape, Subtable};

/// Largest batch a lookup handles in one pass (longer slices are done in chunks).
pub const LOOKUP_BATCH: usize = 32;

/// Classifier configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpclsConfig {
    /// One classifier per in_port (OVS since 2.7); false = one for all ports.
    pub per_port: bool,
    /// Re-sort subtables by hits at all.
    pub ranking: bool,
    /// Interval between rankings, ms (OVS `DPCLS_OPTIMIZATION_INTERVAL` = 1000).
    pub rank_interval_ms: u64,
    /// Initial flow arena size; indices below 0xffff can be cached in the SMC.
    pub arena_capacity: usize,
    /// Skip subtables whose signature filter rules the key out (see the module doc).
    pub prefilter: bool,
}

impl Default for DpclsConfig {
    fn default() -> Self {
        DpclsConfig {
            per_port: true,
            ranking: true,
            rank_interval_ms: 1000,
            arena_capacity: 0xffff,
            prefilter: true,
        }
    }
}

/// One port's classifier: its subtables in ranked order.
#[derive(Debug)]
pub struct PortCls {
    /// The port (0 for the shared classifier when not `per_port`).
    pub port: u32,
    /// Subtables, most-hit first after a ranking.
    pub subtables: Vec<Arc<Subtable>>,
    /// The bits every subtable's mask has (their intersection): the signature's projection.
    pub common: FlowMask,
    common_map: WordMap,
    /// Whether lookups consult the signature filters.
    pub filtered: bool,
}

/// Hash basis of signatures (any constant other than the subtables' 0 decorrelates them).
const SIG_BASIS: u32 = 0x5eed_f117;

impl PortCls {
    /// A port classifier over `subtables`; sets the signature bit of every live flow (in
    /// `arena`) under the new common mask (bits are only ever added: see the module doc).
    fn build(port: u32, subtables: Vec<Arc<Subtable>>, arena: &FlowArena, prefilter: bool) -> Self {
        let mut common = FlowMask {
            w: [u64::MAX; flow::FLOW_WORDS],
        };
        for st in &subtables {
            for (c, m) in common.w.iter_mut().zip(st.mask.w.iter()) {
                *c &= *m;
            }
        }
        if subtables.is_empty() {
            common = FlowMask::CATCHALL;
        }
        // A projection of word 0 only (in_port, recirc_id) is the same for every key of the
        // port: nothing to filter on.
        let filtered = prefilter && subtables.len() >= 2 && common.w[1..].iter().any(|&w| w != 0);
        let pc = PortCls {
            port,
            subtables,
            common_map: common.map(),
            common,
            filtered,
        };
        if filtered {
            for st in &pc.subtables {
                for (_, idx) in st.entries() {
                    if let Some(f) = arena.get(idx) {
                        st.sig_set(pc.sig(&f.key));
                    }
                }
            }
        }
        pc
    }

    /// The same classifier with its subtables in another order (the common mask, and so
    /// every signature bit, stays valid).
    fn reordered(&self, subtables: Vec<Arc<Subtable>>) -> Self {
        PortCls {
            port: self.port,
            subtables,
            common: self.common,
            common_map: self.common_map,
            filtered: self.filtered,
        }
    }

    /// The signature bit of `key` (writer side).
    fn sig(&self, key: &FlowKey) -> u32 {
        flow::hash::hash_masked(key, &self.common, self.common_map, SIG_BASIS) >> 23
    }

    #[inline(always)]
    fn sig_with<C: Crc32c>(&self, c: C, key: &FlowKey) -> u32 {
        hash_masked_with(c, key, &self.common, self.common_map, SIG_BASIS) >> 23
    }
}

/// Everything a lookup reads, published as a whole.
#[derive(Debug)]
pub struct Snapshot {
    /// The flow arena the subtables' indices refer to.
    pub arena: Arc<FlowArena>,
    /// Port classifiers, sorted by port.
    pub ports: Vec<Arc<PortCls>>,
    per_port: bool,
    prefilter: bool,
}

/// Counters of one batch lookup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LookupStats {
    /// Keys found.
    pub hits: u64,
    /// Sum over found keys of the 1-based position of the subtable that matched.
    pub lookups: u64,
}

impl LookupStats {
    /// Adds `o`.
    pub fn add(&mut self, o: LookupStats) {
        self.hits += o.hits;
        self.lookups += o.lookups;
    }

    /// OVS's "avg. subtable lookups per megaflow hit".
    pub fn lookups_per_hit(&self) -> f64 {
        if self.hits == 0 {
            0.0
        } else {
            self.lookups as f64 / self.hits as f64
        }
    }
}

impl Snapshot {
    fn port_key(&self, in_port: u32) -> u32 {
        if self.per_port { in_port } else { 0 }
    }

    /// The classifier of `in_port`.
    pub fn port(&self, in_port: u32) -> Option<&Arc<PortCls>> {
        let k = self.port_key(in_port);
        self.ports
            .binary_search_by_key(&k, |p| p.port)
            .ok()
            .and_then(|i| self.ports.get(i))
    }

    /// Looks up every key of `keys` (packets received on `in_port`): `out[i]` = the live flow
    /// matching `keys[i]`, or `None`. `out` must be at least as long as `keys` (extra keys
    /// are ignored). Any length works; the work is done in batches of [`LOOKUP_BATCH`].
    #[inline]
    pub fn lookup_batch<'s>(
        &'s self,
        in_port: u32,
        keys: &[FlowKey],
        out: &mut [Option<&'s Arc<DpFlow>>],
    ) -> LookupStats {
        self.lookup_batch_with(in_port, keys, out, Impl::Auto, None)
    }

    /// [`Snapshot::lookup_batch`] with a given implementation and hash level (`None` = the
    /// best of this CPU; a level the CPU lacks also falls back to the best). For tests and
    /// benchmarks that compare them.
    pub fn lookup_batch_with<'s>(
        &'s self,
        in_port: u32,
        keys: &[FlowKey],
        out: &mut [Option<&'s Arc<DpFlow>>],
        imp: Impl,
        level: Option<Level>,
    ) -> LookupStats {
        let n = keys.len().min(out.len());
        let (keys, out) = (keys.get(..n).unwrap_or_default(), out.get_mut(..n));
        let Some(out) = out else {
            return LookupStats::default();
        };
        out.fill(None);
        let Some(port) = self.port(in_port) else {
            return LookupStats::default();
        };
        let mut stats = LookupStats::default();
        for (k, o) in keys.chunks(LOOKUP_BATCH).zip(out.chunks_mut(LOOKUP_BATCH)) {
            let task = BatchTask {
                port,
                arena: &self.arena,
                keys: k,
                out: o,
                imp,
            };
            let s = match level {
                Some(l) => match run_at(task, l) {
                    Some(s) => s,
                    None => {
                        // The CPU lacks `l`: run the best level instead.
                        run_best(BatchTask {
                            port,
                            arena: &self.arena,
                            keys: k,
                            out: o,
                            imp,
                        })
                    }
                },
                None => run_best(task),
            };
            stats.add(s);
        }
        stats
    }

    /// Number of subtables of `in_port`'s classifier.
    pub fn subtable_count(&self, in_port: u32) -> usize {
        self.port(in_port).map_or(0, |p| p.subtables.len())
    }
}

struct BatchTask<'s, 'k, 'o> {
    port: &'s PortCls,
    arena: &'s FlowArena,
    keys: &'k [FlowKey],
    out: &'o mut [Option<&'s Arc<DpFlow>>],
    imp: Impl,
}

impl CrcTask for BatchTask<'_, '_, '_> {
    type Output = LookupStats;
    #[inline(always)]
    fn run<C: Crc32c>(self, c: C) -> LookupStats {
        let n = self.keys.len().min(LOOKUP_BATCH);
        let mut remaining: u32 = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        if self.port.filtered {
            return self.run_filtered(c, n, remaining);
        }
        let mut stats = LookupStats::default();
        for (pos, st) in self.port.subtables.iter().enumerate() {
            if remaining == 0 {
                break;
            }
            let found = st.lookup_batch(c, self.imp, self.arena, self.keys, remaining, self.out);
            if found != 0 {
                stats.lookups += count_hits(st, found, &mut stats) * (pos as u64 + 1);
                remaining &= !found;
            }
        }
        stats
    }
}

/// Counts the keys of `found` as hits of `st` (its ranking counter, one relaxed add per
/// batch) and of the batch; returns how many.
#[inline(always)]
fn count_hits(st: &Subtable, found: u32, stats: &mut LookupStats) -> u64 {
    let k = u64::from(found.count_ones());
    st.hits.0.fetch_add(k, std::sync::atomic::Ordering::Relaxed);
    stats.hits += k;
    k
}

impl BatchTask<'_, '_, '_> {
    /// The lookup with signature filters: each key is probed only in the subtables whose
    /// filter has its signature bit. "Subtable lookups" counts, per hit key, the subtables
    /// it was actually probed in (without filters that is the hit subtable's position).
    #[inline(always)]
    fn run_filtered<C: Crc32c>(self, c: C, n: usize, mut remaining: u32) -> LookupStats {
        let mut sig = [0u32; LOOKUP_BATCH];
        for (s, k) in sig.iter_mut().zip(self.keys).take(n) {
            *s = self.port.sig_with(c, k);
        }
        let mut probes = [0u8; LOOKUP_BATCH];
        let mut stats = LookupStats::default();
        for st in &self.port.subtables {
            if remaining == 0 {
                break;
            }
            let mut cand = 0u32;
            let mut r = remaining;
            while r != 0 {
                let i = r.trailing_zeros() as usize;
                r &= r - 1;
                if sig.get(i).is_some_and(|&b| st.sig_has(b)) {
                    cand |= 1 << i;
                    if let Some(p) = probes.get_mut(i) {
                        *p = p.saturating_add(1);
                    }
                }
            }
            if cand == 0 {
                continue;
            }
            let found = st.lookup_batch(c, self.imp, self.arena, self.keys, cand, self.out);
            if found != 0 {
                count_hits(st, found, &mut stats);
                let mut f = found;
                while f != 0 {
                    let i = f.trailing_zeros() as usize;
                    f &= f - 1;
                    stats.lookups += u64::from(probes.get(i).copied().unwrap_or(0));
                }
                remaining &= !found;
            }
        }
        stats
    }
}

/// Why an install failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertError {
    /// A different megaflow is installed under this ufid (a ufid collision: counted in
    /// [`Dpcls::ufid_collisions`], never aliased).
    DuplicateUfid,
    /// Per-port classifiers need the mask to cover the whole in_port.
    InPortNotExact,
}

impl std::fmt::Display for InsertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InsertError::DuplicateUfid => {
                "a different megaflow is already installed under this ufid"
            }
            InsertError::InPortNotExact => "the megaflow mask does not match in_port exactly",
        })
    }
}

impl std::error::Error for InsertError {}

/// What [`Dpcls::insert`] did.
#[derive(Debug, Clone)]
pub enum Inserted {
    /// The flow was installed, at this arena index.
    New(Arc<DpFlow>, FlowIndex),
    /// A live flow with the same mask and masked key was already there (a racing upcall
    /// installed it, or the same ufid names it): that one is returned and nothing is
    /// installed.
    Existing(Arc<DpFlow>, FlowIndex),
}

impl Inserted {
    /// The flow now in the table.
    pub fn flow(&self) -> &Arc<DpFlow> {
        match self {
            Inserted::New(f, _) | Inserted::Existing(f, _) => f,
        }
    }

    /// Its arena index (for the SMC).
    pub fn index(&self) -> FlowIndex {
        match self {
            Inserted::New(_, i) | Inserted::Existing(_, i) => *i,
        }
    }
}

/// What [`Dpcls::rank`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankOutcome {
    /// The interval has not elapsed (or ranking is off).
    NotDue,
    /// A writer held the lock; try again on the next call.
    Busy,
    /// Ranked; how many port classifiers changed order.
    Ranked(usize),
}

#[derive(Debug)]
struct Loc {
    port: u32,
    idx: FlowIndex,
    flow: Arc<DpFlow>,
}

#[derive(Debug)]
struct Writer {
    cur: Arc<Snapshot>,
    flows: HashMap<Ufid, Loc, crate::megaflow::UfidBuild>,
    next_rank_ms: u64,
}

/// The megaflow classifier of one PMD (all its in_ports).
#[derive(Debug)]
pub struct Dpcls {
    current: Arc<ArcSwap<Snapshot>>,
    writer: Mutex<Writer>,
    cfg: DpclsConfig,
    /// Installs that met a different megaflow under their ufid.
    collisions: std::sync::atomic::AtomicU64,
    /// The bursts of the PMDs that read this classifier ([`crate::bursts`]).
    bursts: Arc<crate::bursts::Bursts>,
}

/// A reader's handle: a cached snapshot, refreshed by one atomic load per call.
#[derive(Debug)]
pub struct DpclsReader {
    cache: Cache<Arc<ArcSwap<Snapshot>>, Arc<Snapshot>>,
}

impl DpclsReader {
    /// The newest snapshot (one atomic load when nothing changed).
    #[inline]
    pub fn snapshot(&mut self) -> &Arc<Snapshot> {
        self.cache.load()
    }
}

impl Default for Dpcls {
    fn default() -> Self {
        Dpcls::new(DpclsConfig::default())
    }
}

impl Dpcls {
    /// An empty classifier.
    pub fn new(cfg: DpclsConfig) -> Dpcls {
        let snap = Arc::new(Snapshot {
            arena: Arc::new(FlowArena::new(cfg.arena_capacity)),
            ports: Vec::new(),
            per_port: cfg.per_port,
            prefilter: cfg.prefilter,
        });
        Dpcls {
            current: Arc::new(ArcSwap::new(snap.clone())),
            writer: Mutex::new(Writer {
                cur: snap,
                flows: HashMap::default(),
                next_rank_ms: cfg.rank_interval_ms,
            }),
            cfg,
            collisions: std::sync::atomic::AtomicU64::new(0),
            bursts: Arc::default(),
        }
    }

    /// The bursts of the PMDs reading this classifier: the slow path marks them before it
    /// frees what a running burst may use without a reference (recirculation ids).
    pub fn bursts(&self) -> &Arc<crate::bursts::Bursts> {
        &self.bursts
    }

    /// Installs (and puts) that found a *different* megaflow under their ufid: refused and
    /// counted, never aliased.
    pub fn ufid_collisions(&self) -> u64 {
        self.collisions.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The configuration.
    pub fn config(&self) -> DpclsConfig {
        self.cfg
    }

    /// A reader handle (one per PMD thread).
    pub fn reader(&self) -> DpclsReader {
        DpclsReader {
            cache: Cache::new(self.current.clone()),
        }
    }

    /// The current snapshot (a full `Arc` load; PMDs use a [`DpclsReader`]).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock leaves the writer state consistent at every
        // publish point, so a poisoned lock is still usable.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of installed flows.
    pub fn len(&self) -> usize {
        self.lock().flows.len()
    }

    /// Whether no flow is installed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The installed flow with id `ufid`.
    pub fn get(&self, ufid: Ufid) -> Option<Arc<DpFlow>> {
        self.lock().flows.get(&ufid).map(|l| l.flow.clone())
    }

    /// Installs `flow`, unless a live flow with the same mask and masked key is installed
    /// (then returns that one). A flow under the same ufid is that same megaflow (returned
    /// as existing) or a collision ([`InsertError::DuplicateUfid`], counted). The caller
    /// guarantees that the new flow overlaps no other live flow (megaflows from xlate never
    /// do).
    pub fn insert(&self, flow: DpFlow) -> Result<Inserted, InsertError> {
        let mut w = self.lock();
        if let Some(l) = w.flows.get(&flow.ufid) {
            if l.flow.mask == flow.mask && l.flow.key == flow.key {
                return Ok(Inserted::Existing(l.flow.clone(), l.idx));
            }
            self.collisions
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(InsertError::DuplicateUfid);
        }
        let port = if self.cfg.per_port {
            flow.in_port().ok_or(InsertError::InPortNotExact)?
        } else {
            0
        };
        Ok(self.install_locked(&mut w, port, flow))
    }

    /// The live flow with `flow`'s megaflow on `port`'s classifier, if any (writer side).
    fn find_megaflow(w: &Writer, port: u32, flow: &DpFlow) -> Option<(Arc<DpFlow>, FlowIndex)> {
        let cur = &w.cur;
        let pc = cur.ports.iter().find(|p| p.port == port)?;
        let st = pc.subtables.iter().find(|s| s.mask == flow.mask)?;
        let old = st.find(&cur.arena, &flow.key)?;
        let idx = w.flows.get(&old.ufid).map_or(0, |l| l.idx);
        Some((old.clone(), idx))
    }

    /// [`Dpcls::insert`] once the ufid is known to be free: re-checks the megaflow, takes an
    /// arena slot, files the flow in its subtable (publishing as needed).
    fn install_locked(&self, w: &mut Writer, port: u32, flow: DpFlow) -> Inserted {
        // Re-check: the same megaflow may have been installed since the caller's lookup.
        if let Some((old, idx)) = Self::find_megaflow(w, port, &flow) {
            return Inserted::Existing(old, idx);
        }
        let flow = Arc::new(flow);
        let cur = w.cur.clone();
        let pc = cur.ports.iter().find(|p| p.port == port);
        let st = pc.and_then(|p| p.subtables.iter().find(|s| s.mask == flow.mask));
        // Arena slot (compacting if full).
        let (arena, idx, compacted) = match cur.arena.push(flow.clone()) {
            Some(i) => (cur.arena.clone(), i, false),
            None => {
                let (arena, idx) = compact(w, &flow, self.cfg.arena_capacity);
                (arena, idx, true)
            }
        };
        w.flows.insert(
            flow.ufid,
            Loc {
                port,
                idx,
                flow: flow.clone(),
            },
        );
        if compacted {
            // Every subtable rebuilt from `flows` against the new arena.
            let snap = rebuild_all(w, arena, self.cfg.per_port, &cur);
            self.publish(w, snap);
            return Inserted::New(flow, idx);
        }
        match st {
            Some(st) if st.has_room() => {
                // Signature bit first, then the slot (release): a reader that can find the
                // flow through this port classifier also sees its bit.
                if let Some(pc) = pc {
                    st.sig_set(pc.sig(&flow.key));
                }
                st.insert(flow.hash, idx);
            }
            Some(st) => {
                let new = grow(st, Some((flow.hash, idx)));
                let snap = replace_subtable(&cur, port, st, Some(new));
                self.publish(w, snap);
            }
            None => {
                let new = Arc::new(Subtable::new(&flow.mask, 4));
                new.insert(flow.hash, idx);
                let snap = add_subtable(&cur, port, new);
                self.publish(w, snap);
            }
        }
        Inserted::New(flow, idx)
    }

    /// Removes the flow `ufid` (marks it dead first); returns it.
    pub fn remove(&self, ufid: Ufid) -> Option<Arc<DpFlow>> {
        let mut w = self.lock();
        self.remove_locked(&mut w, ufid)
    }

    fn remove_locked(&self, w: &mut Writer, ufid: Ufid) -> Option<Arc<DpFlow>> {
        let loc = w.flows.remove(&ufid)?;
        loc.flow.mark_dead();
        let cur = w.cur.clone();
        let st = cur
            .ports
            .iter()
            .find(|p| p.port == loc.port)
            .and_then(|p| p.subtables.iter().find(|s| s.mask == loc.flow.mask));
        if let Some(st) = st {
            st.remove(loc.flow.hash, loc.idx);
            if st.is_empty() {
                let snap = replace_subtable(&cur, loc.port, st, None);
                self.publish(w, snap);
            }
        }
        if w.flows.capacity() > 64 && w.flows.len() * 4 < w.flows.capacity() {
            // Keep the index proportional to the live flows after a mass expiry.
            let n = w.flows.len() * 2;
            w.flows.shrink_to(n);
        }
        Some(loc.flow)
    }

    /// Every installed flow: a lock-free walk of the published snapshot's arena
    /// ([`Dpcls::dump`]); never blocks an install or a lookup.
    pub fn flows(&self) -> Vec<Arc<DpFlow>> {
        self.dump().collect()
    }

    fn publish(&self, w: &mut Writer, snap: Snapshot) {
        let snap = Arc::new(snap);
        w.cur = snap.clone();
        self.current.store(snap);
    }

    /// Re-sorts subtables by hits if `now_ms` is past the next ranking time (see the module
    /// doc). Never blocks: if a writer holds the lock, returns [`RankOutcome::Busy`].
    pub fn rank(&self, now_ms: u64) -> RankOutcome {
        if !self.cfg.ranking {
            return RankOutcome::NotDue;
        }
        let mut w = match self.writer.try_lock() {
            Ok(w) => w,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return RankOutcome::Busy,
        };
        if now_ms < w.next_rank_ms {
            return RankOutcome::NotDue;
        }
        w.next_rank_ms = now_ms.saturating_add(self.cfg.rank_interval_ms);
        self.rank_locked(&mut w)
    }

    /// Ranks now, waiting for the lock (tests, benchmarks, the control path).
    pub fn rank_now(&self) -> RankOutcome {
        let mut w = self.lock();
        self.rank_locked(&mut w)
    }

    fn rank_locked(&self, w: &mut Writer) -> RankOutcome {
        let cur = w.cur.clone();
        let mut changed = 0;
        let mut ports = Vec::with_capacity(cur.ports.len());
        for p in &cur.ports {
            let mut v: Vec<(u64, Arc<Subtable>)> = p
                .subtables
                .iter()
                .map(|s| {
                    let h = s.hits.0.load(std::sync::atomic::Ordering::Relaxed);
                    let last = s.ranked_hits.swap(h, std::sync::atomic::Ordering::Relaxed);
                    (h.wrapping_sub(last), s.clone())
                })
                .collect();
            v.sort_by_key(|e| std::cmp::Reverse(e.0));
            let same = v
                .iter()
                .zip(&p.subtables)
                .all(|((_, a), b)| Arc::ptr_eq(a, b));
            if same {
                ports.push(p.clone());
            } else {
                changed += 1;
                ports.push(Arc::new(
                    p.reordered(v.into_iter().map(|(_, s)| s).collect()),
                ));
            }
        }
        if changed > 0 {
            let snap = Snapshot {
                arena: cur.arena.clone(),
                ports,
                per_port: cur.per_port,
                prefilter: cur.prefilter,
            };
            self.publish(w, snap);
        }
        RankOutcome::Ranked(changed)
    }

    /// Bytes used: per flow (`DpFlow` + `Arc` header + arena slot), and the subtables.
    pub fn memory(&self) -> DpclsMemory {
        let w = self.lock();
        let subtables: usize = w
            .cur
            .ports
            .iter()
            .flat_map(|p| p.subtables.iter())
            .map(|s| s.bytes())
            .sum();
        DpclsMemory {
            flows: w.flows.len(),
            flow_bytes: std::mem::size_of::<DpFlow>() + 2 * std::mem::size_of::<usize>(),
            arena_bytes: w.cur.arena.slot_bytes(),
            subtable_bytes: subtables,
        }
    }
}

/// Memory of a [`Dpcls`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpclsMemory {
    /// Installed flows.
    pub flows: usize,
    /// Bytes of one flow object (with its `Arc` header).
    pub flow_bytes: usize,
    /// Bytes of the arena's slots.
    pub arena_bytes: usize,
    /// Bytes of all subtables (headers + slots).
    pub subtable_bytes: usize,
}

impl DpclsMemory {
    /// Bytes per installed megaflow, everything included.
    pub fn per_flow(&self) -> f64 {
        if self.flows == 0 {
            return 0.0;
        }
        self.flow_bytes as f64 + (self.arena_bytes + self.subtable_bytes) as f64 / self.flows as f64
    }
}

/// A copy of `st` with a table sized for its live flows (plus `extra`), tombstones dropped.
fn grow(st: &Subtable, extra: Option<(u32, FlowIndex)>) -> Arc<Subtable> {
    let live: Vec<(u32, FlowIndex)> = st.entries().chain(extra).collect();
    let new = Subtable::new(&st.mask, (live.len() * 2).max(4));
    for (h, i) in live {
        new.insert(h, i);
    }
    let hits = st.hits.0.load(std::sync::atomic::Ordering::Relaxed);
    new.hits.0.store(hits, std::sync::atomic::Ordering::Relaxed);
    new.ranked_hits.store(
        st.ranked_hits.load(std::sync::atomic::Ordering::Relaxed),
        std::sync::atomic::Ordering::Relaxed,
    );
    Arc::new(new)
}

/// `cur` with subtable `old` of `port` replaced by `new` (or dropped; a port left without
/// subtables is dropped too).
fn replace_subtable(
    cur: &Snapshot,
    port: u32,
    old: &Arc<Subtable>,
    new: Option<Arc<Subtable>>,
) -> Snapshot {
    let mut ports = Vec::with_capacity(cur.ports.len());
    for p in &cur.ports {
        if p.port != port {
            ports.push(p.clone());
            continue;
        }
        let subtables: Vec<Arc<Subtable>> = p
            .subtables
            .iter()
            .filter_map(|s| {
                if Arc::ptr_eq(s, old) {
                    new.clone()
                } else {
                    Some(s.clone())
                }
            })
            .collect();
        if !subtables.is_empty() {
            ports.push(Arc::new(PortCls::build(
                port,
                subtables,
                &cur.arena,
                cur.prefilter,
            )));
        }
    }
    Snapshot {
        arena: cur.arena.clone(),
        ports,
        per_port: cur.per_port,
        prefilter: cur.prefilter,
    }
}

/// `cur` with `new` appended to `port`'s subtables (creating the port's classifier).
fn add_subtable(cur: &Snapshot, port: u32, new: Arc<Subtable>) -> Snapshot {
    let mut ports: Vec<Arc<PortCls>> = cur.ports.clone();
    match ports.binary_search_by_key(&port, |p| p.port) {
        Ok(i) => {
            if let Some(p) = ports.get_mut(i) {
                let mut subtables = p.subtables.clone();
                subtables.push(new);
                *p = Arc::new(PortCls::build(port, subtables, &cur.arena, cur.prefilter));
            }
        }
        Err(i) => ports.insert(
            i,
            Arc::new(PortCls::build(port, vec![new], &cur.arena, cur.prefilter)),
        ),
    }
    Snapshot {
        arena: cur.arena.clone(),
        ports,
        per_port: cur.per_port,
        prefilter: cur.prefilter,
    }
}

/// A new arena holding every live flow of `w` plus `flow`, with the new indices recorded in
/// `w.flows`; returns it and `flow`'s index.
fn compact(w: &mut Writer, flow: &Arc<DpFlow>, min_cap: usize) -> (Arc<FlowArena>, FlowIndex) {
    let need = (w.flows.len() + 1) * 2;
    let arena = Arc::new(FlowArena::new(need.max(min_cap)));
    for loc in w.flows.values_mut() {
        // Capacity ≥ 2 × (live + 1): pushes cannot fail.
        loc.idx = arena.push(loc.flow.clone()).unwrap_or(u32::MAX);
    }
    let idx = arena.push(flow.clone()).unwrap_or(u32::MAX);
    (arena, idx)
}

/// A snapshot with every subtable rebuilt from `w.flows` (indices into `arena`), keeping
/// each port's subtable order and hit counters from `cur`.
fn rebuild_all(w: &Writer, arena: Arc<FlowArena>, per_port: bool, cur: &Snapshot) -> Snapshot {
    let mut groups: HashMap<(u32, FlowMask), Vec<(u32, FlowIndex)>> = HashMap::new();
    for loc in w.flows.values() {
        groups
            .entry((loc.port, loc.flow.mask))
            .or_default()
            .push((loc.flow.hash, loc.idx));
    }
    let mut ports = Vec::new();
    let mut port_ids: Vec<u32> = groups.keys().map(|(p, _)| *p).collect();
    port_ids.sort_unstable();
    port_ids.dedup();
    for port in port_ids {
        // Existing order first, then new masks.
        let old: Vec<&Arc<Subtable>> = cur
            .ports
            .iter()
            .filter(|p| p.port == port)
            .flat_map(|p| p.subtables.iter())
            .collect();
        let mut masks: Vec<FlowMask> = old.iter().map(|s| s.mask).collect();
        for (p, m) in groups.keys() {
            if *p == port && !masks.contains(m) {
                masks.push(*m);
            }
        }
        let mut subtables = Vec::new();
        for m in masks {
            let Some(entries) = groups.get(&(port, m)) else {
                continue;
            };
            let st = Subtable::new(&m, entries.len() * 2);
            for &(h, i) in entries {
                st.insert(h, i);
            }
            if let Some(o) = old.iter().find(|s| s.mask == m) {
                st.hits
                    .0
                    .store(o.hits(), std::sync::atomic::Ordering::Relaxed);
                st.ranked_hits.store(
                    o.ranked_hits.load(std::sync::atomic::Ordering::Relaxed),
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            subtables.push(Arc::new(st));
        }
        ports.push(Arc::new(PortCls::build(
            port,
            subtables,
            &arena,
            cur.prefilter,
        )));
    }
    Snapshot {
        arena,
        ports,
        per_port,
        prefilter: cur.prefilter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mask `i` of a family of distinct masks that all cover in_port and nw_src fully.
    fn mask(i: usize) -> FlowMask {
        let mut m = FlowMask::CATCHALL;
        m.w[0] = 0xffff_ffff << 32;
        m.w[19] = 0xffff_ffff_0000_0000;
        m.w[29] = (i as u64 + 1) << 48;
        m
    }

    fn key(port: u32, src: u64) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.w[0] = u64::from(port) << 32;
        k.w[19] = src << 32;
        k
    }

    #[test]
    fn prefilter_probes_only_the_subtable_with_the_signature() {
        // The masks of `mask(i)` share in_port and nw_src: the signature is (port, src), and
        // each src has its flow in one subtable.
        for prefilter in [false, true] {
            let cls = Dpcls::new(DpclsConfig {
                prefilter,
                ..DpclsConfig::default()
            });
            for i in 0..5u64 {
                let f = DpFlow::new(Ufid(u128::from(i)), &key(1, i), &mask(i as usize), 0);
                assert!(matches!(cls.insert(f), Ok(Inserted::New(..))));
            }
            let snap = cls.snapshot();
            assert_eq!(snap.port(1).unwrap().filtered, prefilter);
            let mut stats = LookupStats::default();
            for (src, n) in [(4u64, 40), (2, 20), (0, 5)] {
                let keys = vec![key(1, src); n];
                let mut out = vec![None; n];
                stats.add(snap.lookup_batch(1, &keys, &mut out));
                assert!(out.iter().all(Option::is_some));
            }
            // Misses stay misses (src 9 has no flow; its bit may collide, never its match).
            let mut out = vec![None; 3];
            snap.lookup_batch(1, &[key(1, 9), key(2, 4), key(1, 4)], &mut out);
            assert!(out[0].is_none() && out[1].is_none() && out[2].is_some());
            let want = if prefilter { 65 } else { 40 * 5 + 20 * 3 + 5 };
            assert_eq!(stats.lookups, want, "prefilter {prefilter}");
        }
    }

    #[test]
    fn rank_orders_by_descending_hits_and_lookups_drop() {
        // Ranking alone (the prefilter would make every hit cost one probe).
        let cls = Dpcls::new(DpclsConfig {
            prefilter: false,
            ..DpclsConfig::default()
        });
        // Subtable i holds the flow for src = i; created in order 0..5.
        for i in 0..5u64 {
            let f = DpFlow::new(Ufid(u128::from(i)), &key(1, i), &mask(i as usize), 0);
            assert!(matches!(cls.insert(f), Ok(Inserted::New(..))));
        }
        let mut r = cls.reader();
        let snap = r.snapshot().clone();
        assert_eq!(snap.subtable_count(1), 5);
        // Hits: subtable 4 gets 40, 2 gets 20, 0 gets 5, others 0.
        let mut stats = LookupStats::default();
        for (src, n) in [(4u64, 40), (2, 20), (0, 5)] {
            let keys = vec![key(1, src); n];
            let mut out = vec![None; n];
            stats.add(snap.lookup_batch(1, &keys, &mut out));
            assert!(out.iter().all(Option::is_some));
        }
        // Unranked: positions 5, 3 and 1.
        assert_eq!(stats.lookups, 40 * 5 + 20 * 3 + 5);
        assert_eq!(cls.rank(0), RankOutcome::NotDue);
        assert_eq!(cls.rank(1000), RankOutcome::Ranked(1));
        let snap = r.snapshot().clone();
        let hits: Vec<u64> = snap
            .port(1)
            .unwrap()
            .subtables
            .iter()
            .map(|s| s.hits())
            .collect();
        assert_eq!(hits, vec![40, 20, 5, 0, 0]);
        let keys = vec![key(1, 4); 32];
        let mut out = vec![None; 32];
        let s = snap.lookup_batch(1, &keys, &mut out);
        assert_eq!(s.lookups_per_hit(), 1.0);
        // Next interval: only subtable 0 is hit → it moves to the front.
        let keys = vec![key(1, 0); 40];
        let mut out = vec![None; 40];
        snap.lookup_batch(1, &keys, &mut out);
        assert_eq!(cls.rank(1500), RankOutcome::NotDue);
        assert_eq!(cls.rank(2000), RankOutcome::Ranked(1));
        let snap = r.snapshot().clone();
        let first = &snap.port(1).unwrap().subtables[0];
        assert_eq!(first.mask, mask(0));
        // Other ports are separate classifiers.
        assert_eq!(snap.subtable_count(2), 0);
        let mut out = vec![None; 1];
        assert_eq!(snap.lookup_batch(2, &[key(2, 4)], &mut out).hits, 0);
    }

    #[test]
    fn rank_never_blocks() {
        let cls = Dpcls::new(DpclsConfig::default());
        let guard = cls.lock();
        assert_eq!(cls.rank(10_000), RankOutcome::Busy);
        drop(guard);
        assert_eq!(cls.rank(10_000), RankOutcome::Ranked(0));
    }

    #[test]
    fn reinstall_returns_existing_and_shapes() {
        let cls = Dpcls::new(DpclsConfig::default());
        let f = DpFlow::new(Ufid(1), &key(1, 9), &mask(0), 0);
        let a = cls.insert(f).unwrap();
        let g = DpFlow::new(Ufid(2), &key(1, 9), &mask(0), 0);
        let b = cls.insert(g).unwrap();
        assert!(matches!(b, Inserted::Existing(..)));
        assert!(Arc::ptr_eq(a.flow(), b.flow()));
        assert_eq!(
            cls.insert(DpFlow::new(Ufid(1), &key(1, 8), &mask(0), 0))
                .unwrap_err(),
            InsertError::DuplicateUfid
        );
        assert_eq!(
            cls.insert(DpFlow::new(Ufid(3), &key(1, 8), &FlowMask::CATCHALL, 0))
                .unwrap_err(),
            InsertError::InPortNotExact
        );
        let snap = cls.snapshot();
        assert_eq!(snap.port(1).unwrap().subtables[0].shape(), Shape::Words(3));
        let mut wide = mask(0);
        for i in 1..12 {
            wide.w[i] = 1;
        }
        assert_eq!(Subtable::new(&wide, 1).shape(), Shape::Generic);
        assert!(cls.remove(Ufid(1)).is_some());
        assert!(cls.is_empty() && cls.snapshot().ports.is_empty());
    }

    #[test]
    fn many_flows_grow_and_compact() {
        let cls = Dpcls::new(DpclsConfig {
            arena_capacity: 16,
            ..DpclsConfig::default()
        });
        for round in 0..3u64 {
            for i in 0..1000u64 {
                let u = u128::from(round * 1000 + i);
                let f = DpFlow::new(Ufid(u), &key(1, i), &mask((i % 3) as usize), 0);
                cls.insert(f).unwrap();
            }
            let snap = cls.snapshot();
            let keys: Vec<FlowKey> = (0..1000).map(|i| key(1, i)).collect();
            let mut out = vec![None; 1000];
            assert_eq!(snap.lookup_batch(1, &keys, &mut out).hits, 1000);
            for i in 0..1000u64 {
                cls.remove(Ufid(u128::from(round * 1000 + i))).unwrap();
            }
            let mut out = vec![None; 1000];
            assert_eq!(cls.snapshot().lookup_batch(1, &keys, &mut out).hits, 0);
        }
    }

    /// Hash collisions: a flow filed under the hash of a key that differs from it in one
    /// masked bit must not be returned for that key, by any implementation, for every word
    /// count 1..=12 (specialised and generic shapes) and every word of the mask.
    #[test]
    fn compare_rejects_colliding_keys() {
        use flow::hash::hash_masked;
        let words = [0usize, 16, 17, 19, 20, 21, 22, 23, 24, 29, 2, 3];
        for n in 1..=words.len() {
            let mut m = FlowMask::CATCHALL;
            let mut k = FlowKey::ZERO;
            for &i in &words[..n] {
                m.w[i] = 0x00ff_00ff_00ff_00ff;
                k.w[i] = 0x0011_0022_0033_0044 ^ i as u64;
            }
            for &j in &words[..n] {
                let cls = Dpcls::new(DpclsConfig {
                    per_port: false,
                    ..DpclsConfig::default()
                });
                let f = Arc::new(DpFlow::new(Ufid(1), &k, &m, 0));
                let snap = cls.snapshot();
                let idx = snap.arena.push(f.clone()).unwrap();
                let mut b = k;
                b.w[j] ^= 1 << 16;
                let st = Arc::new(Subtable::new(&m, 4));
                st.insert(hash_masked(&b, &m, m.map(), 0), idx);
                st.insert(f.hash, idx);
                let snap = Snapshot {
                    arena: snap.arena.clone(),
                    ports: vec![Arc::new(PortCls::build(0, vec![st], &snap.arena, true))],
                    per_port: false,
                    prefilter: true,
                };
                for imp in [Impl::Auto, Impl::Generic] {
                    let mut out = [None; 2];
                    snap.lookup_batch_with(0, &[b, k], &mut out, imp, None);
                    assert!(out[0].is_none(), "n={n} word {j} {imp:?}");
                    assert!(out[1].is_some(), "n={n} word {j} {imp:?}");
                }
            }
        }
    }
}
