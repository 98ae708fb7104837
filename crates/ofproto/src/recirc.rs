//! Recirculation ids and the frozen translation states they name (OVS `ofproto-dpif-rid.c`).
//!
//! A translation that freezes (`ct(table=N)`, a controller continuation) emits `recirc(id)`;
//! the recirculated packet comes back to the slow path (or to a second-pass megaflow matching
//! `recirc_id=id`) and must resume in the state that was frozen: the table and the metadata
//! (`metadata`, registers, …) the datapath does not carry. Two regimes, chosen per bridge:
//!
//! * **Unpooled** (the default; `ofproto/trace`): every translation numbers its freezes from
//!   a fresh-id counter, as OVS's trace output shows them; nothing is kept.
//! * **Pooled** (a datapath's bridge, [`crate::Bridge::pool_recirc_ids`]): one id per frozen
//!   state (table, metadata), reference counted. This module is that pool.
//!
//! # Who holds a reference
//!
//! A [`RecircRef`] is one reference (RAII: cloning takes another, dropping releases it).
//! A translation takes one per distinct id it freezes and hands them out in
//! `XlateOut::recirc_refs`; the upcall handler moves them into the megaflow's ukey, together
//! with a reference to the id the megaflow *matches* (a second-pass megaflow keeps its
//! `recirc_id` alive, as OVS's `ukey->key_recirc_id`). So an id lives exactly as long as some
//! megaflow uses it in its actions or matches on it (or a translation is in progress). The
//! revalidator drops a ukey's references when it deletes the megaflow (idle expiry, changed
//! decision, flush). Because second-pass megaflows hold their id, a freed id never has a
//! megaflow left matching it: no stale second pass can survive into a reuse of the id.
//!
//! # Release, grace, reuse
//!
//! When the last reference goes, the state is *released*: it stays in both maps (id → state,
//! state → id) so that a packet still in flight with that id resumes in the right state, and
//! a new reference to the same state (a new translation, or an upcall for a recirculated
//! packet) *revives* it with the same id — safe, since the id still names the same state.
//! (OVS instead retires the node at once and gives the state a new id; reviving saves id churn
//! when a connection's megaflows idle out and come back, and changes no binding.)
//!
//! A released state is *freed* (both maps forget it; the id may be handed out again) at the
//! first effective call of [`RecircPool::run`] at which (1) it was released before the
//! previous effective call, where calls less than [`RECIRC_GRACE_MS`] apart are not
//! effective, and (2) every PMD burst that was running when (1) first held has ended. The
//! revalidator calls `run` at the end of every pass, so a released id waits at least
//! [`RECIRC_GRACE_MS`], at least one full revalidator pass (OVS `recirc_run`: the
//! `expiring` and `expired` lists, 250 ms each), and for the bursts in flight. Why all
//! three: a full pass guarantees that a megaflow installed by an upcall racing with the
//! release has been dumped and re-referenced (or deleted) before its id can be freed; and a
//! recirculating packet carries its id without a reference only within one PMD burst (the
//! second pass runs before the burst ends; frames the connection tracker releases run the
//! action list of the packet that released them, never a stored one) — but a descheduled
//! PMD can sleep through any delay, so the burst counters of `datapath::bursts` (a
//! quiescent-state grace, OVS's RCU postponement; registered with
//! [`RecircPool::watch_in_flight`] by the revalidator) are what makes it safe, not time.
//! Until freed, a released id is still *known*: an upcall for it resumes in its own state;
//! once freed it is unknown and the upcall fails (counted). A packet never resumes in a
//! state other than the one its id was given for.
//!
//! # Allocation
//!
//! A new state takes the next id of a wrapping 32-bit counter (never 0), skipping every id
//! still known (live or released-not-freed), as OVS's `recirc_alloc_id__`. The counter only
//! moves forward, so a freed id is reused as late as possible (after a wrap). Amortised O(1):
//! within one turn of the counter an id is skipped only if it was in use when the turn began
//! (ids allocated during the turn lie behind the counter), so a turn of 2³² steps makes at
//! least 2³² − `limit` allocations for at most `limit` skips. At most `limit` states
//! ([`DEFAULT_RECIRC_ID_LIMIT`], [`RecircPool::set_limit`]) are known at once; beyond it an
//! allocation fails with [`RecircError::Exhausted`] (counted; the translation fails with
//! `XlateError::NoRecircId` and the upcall with it), never a panic nor an endless scan.
//!
//! # Locking
//!
//! One mutex, shared by a bridge's replicas, held for one map operation at a time and never
//! while taking another lock (a leaf). Dropping a [`RecircRef`] takes it: never drop one while
//! holding it (nothing in this module does).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use flow::FlowKey;
use flow::ofp::Action;

/// Least time (ms, on the caller's clock) between two effective [`RecircPool::run`] calls; a
/// released id is freed at the second one after its release (OVS `recirc_run`'s 250 ms).
pub const RECIRC_GRACE_MS: u64 = 250;

/// Default most frozen states known at once (live or waiting to be freed): 4 Mi, ~0.1 % of
/// the id space (so allocation skips are rare) and far above the 200 000-megaflow limit.
pub const DEFAULT_RECIRC_ID_LIMIT: usize = 1 << 22;

/// Why no recirculation id could be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecircError {
    /// `limit` states are known already (live or waiting out their grace).
    Exhausted {
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for RecircError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecircError::Exhausted { limit } => {
                write!(
                    f,
                    "recirculation ids exhausted ({limit} frozen states in use)"
                )
            }
        }
    }
}

impl std::error::Error for RecircError {}

/// The pool's counters and sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecircStats {
    /// States with at least one reference.
    pub live: usize,
    /// Released states not freed yet (their ids are still known and not reusable).
    pub expiring: usize,
    /// Ids given to new states.
    pub allocated: u64,
    /// Released states referenced again before being freed.
    pub revived: u64,
    /// States freed (ids reusable).
    pub freed: u64,
    /// Allocations refused: too many states ([`RecircError::Exhausted`]).
    pub exhausted: u64,
    /// Ids the allocator skipped because they were still known.
    pub skipped: u64,
}

impl RecircStats {
    /// States known: live plus expiring.
    pub fn known(&self) -> usize {
        self.live + self.expiring
    }
}

#[derive(Debug)]
struct Node {
    table: u8,
    key: FlowKey,
    /// Actions to resume with (a select group's `dp_hash` freeze); empty = look up `table`.
    actions: Arc<[Action]>,
    /// A `controller(userdata=…)` freeze's userdata (the packet-in carries it).
    userdata: Arc<[u8]>,
    refs: u64,
    /// The `run` epoch at its latest release, while it has no reference.
    released: Option<u64>,
}

/// Threads that may use a recirculation id without holding a reference: the PMDs of a
/// datapath, between a packet's `recirc(id)` and its second pass (one burst).
pub trait InFlight: Send + Sync {
    /// Marks now: the check returned says whether everything in flight at the mark has
    /// finished since.
    fn mark(&self) -> Box<dyn Fn() -> bool + Send>;
    /// Tells registrations of the same source apart (a pointer, say).
    fn id(&self) -> usize;
}

/// Released states (id, release epoch) past their two effective runs, and the marks of
/// what was in flight when they got there.
#[derive(Debug)]
struct Due {
    marks: Vec<InFlightMark>,
    ids: Vec<(u32, u64)>,
}

/// One [`InFlight::mark`].
struct InFlightMark(Box<dyn Fn() -> bool + Send>);

impl fmt::Debug for InFlightMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InFlightMark")
    }
}

/// What identifies a frozen state: table, metadata key, actions to resume with, userdata.
type FrozenState = (u8, FlowKey, Arc<[Action]>, Arc<[u8]>);

/// The pooled states. See the module doc.
pub(crate) struct Pool {
    by_state: HashMap<FrozenState, u32>,
    nodes: HashMap<u32, Node>,
    /// (id, epoch of its release), in release order (epochs never decrease). An entry whose
    /// node was revived (or released again later) is skipped when it comes up.
    released: VecDeque<(u32, u64)>,
    /// Released states past their two effective runs, waiting for the PMD bursts that were
    /// running when they got here to end (the marks), in order.
    waiting: VecDeque<Due>,
    /// What may carry an id without a reference: the PMD bursts of the datapaths this
    /// bridge's megaflows live in.
    in_flight: Vec<Arc<dyn InFlight>>,
    epoch: u64,
    last_run_ms: Option<u64>,
    limit: usize,
    stats: RecircStats,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("known", &self.nodes.len())
            .field("released", &self.released.len())
            .field("waiting", &self.waiting.len())
            .field("in_flight", &self.in_flight.len())
            .field("epoch", &self.epoch)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Pool {
    fn new() -> Pool {
        Pool {
            by_state: HashMap::new(),
            nodes: HashMap::new(),
            released: VecDeque::new(),
            waiting: VecDeque::new(),
            in_flight: Vec::new(),
            epoch: 0,
            last_run_ms: None,
            limit: DEFAULT_RECIRC_ID_LIMIT,
            stats: RecircStats::default(),
        }
    }
}

/// Recirculation ids: the fresh-id counter and, when pooled, the refcounted frozen states.
#[derive(Debug)]
pub(crate) struct RecircIds {
    /// The next id to try (never 0).
    pub(crate) next: u32,
    pub(crate) pool: Option<Pool>,
}

impl RecircIds {
    pub(crate) fn new() -> RecircIds {
        RecircIds {
            next: 1,
            pool: None,
        }
    }

    /// Starts pooling (no-op if pooling already).
    pub(crate) fn start_pool(&mut self) {
        self.pool.get_or_insert_with(Pool::new);
    }

    /// A reference to the id of frozen state (`table`, `key`), allocating one if the state is
    /// not known (pooled only; `None` when unpooled).
    pub(crate) fn alloc(&mut self, table: u8, key: &FlowKey) -> Option<Result<u32, RecircError>> {
        self.alloc_frozen(table, key, &[], &[])
    }

    /// [`Self::alloc`] for a state that resumes with `actions` (a group's `dp_hash` freeze:
    /// the group action and what followed it) rather than with a lookup in `table`, or
    /// carries `userdata` (a `controller(userdata=…)`).
    pub(crate) fn alloc_frozen(
        &mut self,
        table: u8,
        key: &FlowKey,
        actions: &[Action],
        userdata: &[u8],
    ) -> Option<Result<u32, RecircError>> {
        let next = &mut self.next;
        let pool = self.pool.as_mut()?;
        let state = (
            table,
            *key,
            Arc::<[Action]>::from(actions),
            Arc::<[u8]>::from(userdata),
        );
        if let Some(&id) = pool.by_state.get(&state) {
            pool.take_ref(id);
            return Some(Ok(id));
        }
        if pool.nodes.len() >= pool.limit || pool.nodes.len() >= u32::MAX as usize - 1 {
            pool.stats.exhausted += 1;
            return Some(Err(RecircError::Exhausted { limit: pool.limit }));
        }
        // Terminates: fewer than 2³² − 1 ids are known.
        let id = loop {
            let id = *next;
            *next = next.wrapping_add(1).max(1);
            if !pool.nodes.contains_key(&id) {
                break id;
            }
            pool.stats.skipped += 1;
        };
        pool.nodes.insert(
            id,
            Node {
                table,
                key: *key,
                actions: state.2.clone(),
                userdata: state.3.clone(),
                refs: 1,
                released: None,
            },
        );
        pool.by_state.insert(state, id);
        pool.stats.allocated += 1;
        pool.stats.live += 1;
        Some(Ok(id))
    }
}

impl RecircIds {
    /// See [`RecircPool::frozen_actions`].
    pub(crate) fn frozen_actions(&self, id: u32) -> Option<Arc<[Action]>> {
        let n = self.pool.as_ref()?.nodes.get(&id)?;
        (!n.actions.is_empty()).then(|| n.actions.clone())
    }
}

impl Pool {
    /// One more reference to known id `id` (reviving it if released); false if unknown.
    fn take_ref(&mut self, id: u32) -> bool {
        let Some(n) = self.nodes.get_mut(&id) else {
            return false;
        };
        if n.refs == 0 {
            n.released = None;
            self.stats.expiring -= 1;
            self.stats.live += 1;
            self.stats.revived += 1;
        }
        n.refs += 1;
        true
    }

    fn unref(&mut self, id: u32) {
        let Some(n) = self.nodes.get_mut(&id) else {
            return;
        };
        if n.refs == 0 {
            return;
        }
        n.refs -= 1;
        if n.refs == 0 {
            n.released = Some(self.epoch);
            self.released.push_back((id, self.epoch));
            self.stats.live -= 1;
            self.stats.expiring += 1;
        }
    }

    fn run(&mut self, now_ms: u64) -> usize {
        if self
            .last_run_ms
            .is_some_and(|t| now_ms < t.saturating_add(RECIRC_GRACE_MS))
        {
            return 0;
        }
        self.last_run_ms = Some(now_ms);
        self.epoch += 1;
        let mut due = Vec::new();
        while let Some(&(id, e)) = self.released.front() {
            if e + 2 > self.epoch {
                break;
            }
            self.released.pop_front();
            due.push((id, e));
        }
        if !due.is_empty() {
            let marks = self
                .in_flight
                .iter()
                .map(|f| InFlightMark(f.mark()))
                .collect();
            self.waiting.push_back(Due { marks, ids: due });
        }
        let mut freed = 0;
        while let Some(d) = self.waiting.front() {
            if !d.marks.iter().all(|m| (m.0)()) {
                break;
            }
            let Some(d) = self.waiting.pop_front() else {
                break;
            };
            for (id, e) in d.ids {
                // Not if revived (or released again later) meanwhile.
                let still = self
                    .nodes
                    .get(&id)
                    .is_some_and(|n| n.refs == 0 && n.released == Some(e));
                if still && let Some(n) = self.nodes.remove(&id) {
                    self.by_state
                        .remove(&(n.table, n.key, n.actions, n.userdata));
                    self.stats.expiring -= 1;
                    self.stats.freed += 1;
                    freed += 1;
                }
            }
        }
        freed
    }
}

type Shared = Arc<Mutex<RecircIds>>;

fn lock(ids: &Shared) -> MutexGuard<'_, RecircIds> {
    ids.lock().unwrap_or_else(|e| e.into_inner())
}

/// One reference to a pooled recirculation id (and so to its frozen state): cloning takes
/// another, dropping releases it. See the module doc.
pub struct RecircRef {
    ids: Shared,
    id: u32,
}

impl RecircRef {
    /// A reference already counted in the pool (taken under its lock by the caller).
    pub(crate) fn counted(ids: Shared, id: u32) -> RecircRef {
        RecircRef { ids, id }
    }

    /// The id.
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl Clone for RecircRef {
    fn clone(&self) -> Self {
        if let Some(p) = lock(&self.ids).pool.as_mut() {
            // Known: this reference keeps it so.
            p.take_ref(self.id);
        }
        RecircRef {
            ids: self.ids.clone(),
            id: self.id,
        }
    }
}

impl Drop for RecircRef {
    fn drop(&mut self) {
        if let Some(p) = lock(&self.ids).pool.as_mut() {
            p.unref(self.id);
        }
    }
}

impl fmt::Debug for RecircRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecircRef({:#x})", self.id)
    }
}

impl PartialEq for RecircRef {
    fn eq(&self, o: &Self) -> bool {
        self.id == o.id && Arc::ptr_eq(&self.ids, &o.ids)
    }
}

impl Eq for RecircRef {}

/// A handle on a bridge's recirculation ids (shared by its replicas): the frozen states by
/// id, references, the grace-period clock and counters. Everything returns nothing (or
/// `None`) on an unpooled bridge. See the module doc.
#[derive(Clone)]
pub struct RecircPool {
    ids: Shared,
}

impl fmt::Debug for RecircPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecircPool({:?})", self.stats())
    }
}

impl RecircPool {
    pub(crate) fn new(ids: Shared) -> RecircPool {
        RecircPool { ids }
    }

    /// A pool of its own, pooled, with the counter at `next` (tests of the pool itself).
    pub fn standalone(next: u32) -> RecircPool {
        let mut ids = RecircIds::new();
        ids.start_pool();
        ids.next = next.max(1);
        RecircPool::new(Arc::new(Mutex::new(ids)))
    }

    /// A reference to the id of frozen state (`table`, `key`): its id if known (reviving a
    /// released one), else a new one. `None` on an unpooled bridge.
    pub fn alloc(&self, table: u8, key: &FlowKey) -> Option<Result<RecircRef, RecircError>> {
        let r = lock(&self.ids).alloc(table, key)?;
        Some(r.map(|id| RecircRef::counted(self.ids.clone(), id)))
    }

    /// The actions a known id's state resumes with (a select group's `dp_hash` freeze), if
    /// it has any (`None` for an unknown id or a state that resumes at its table).
    pub fn frozen_actions(&self, id: u32) -> Option<Arc<[Action]>> {
        lock(&self.ids).frozen_actions(id)
    }

    /// The userdata a known id's `controller(userdata=…)` state carries (empty if none).
    pub fn frozen_userdata(&self, id: u32) -> Option<Arc<[u8]>> {
        let g = lock(&self.ids);
        Some(g.pool.as_ref()?.nodes.get(&id)?.userdata.clone())
    }

    /// The frozen state (table, metadata key) of known id `id`.
    pub fn state(&self, id: u32) -> Option<(u8, FlowKey)> {
        let g = lock(&self.ids);
        let n = g.pool.as_ref()?.nodes.get(&id)?;
        Some((n.table, n.key))
    }

    /// A new reference to known id `id` (reviving it if released), with its state, in one
    /// step; `None` if the id is unknown (never given, or freed).
    pub fn resume(&self, id: u32) -> Option<(u8, FlowKey, RecircRef)> {
        let mut g = lock(&self.ids);
        let p = g.pool.as_mut()?;
        let n = p.nodes.get(&id)?;
        let (table, key) = (n.table, n.key);
        p.take_ref(id);
        drop(g);
        Some((table, key, RecircRef::counted(self.ids.clone(), id)))
    }

    /// A new reference to known id `id` (reviving it if released); `None` if unknown.
    pub fn try_ref(&self, id: u32) -> Option<RecircRef> {
        self.resume(id).map(|(_, _, r)| r)
    }

    /// Grace-period maintenance at `now_ms` (the revalidator calls it once per pass): frees
    /// the states released before the previous effective call whose in-flight grace
    /// ([`RecircPool::watch_in_flight`]) has passed; a call less than
    /// [`RECIRC_GRACE_MS`] after the last effective one does nothing. Returns the number
    /// freed.
    pub fn run(&self, now_ms: u64) -> usize {
        lock(&self.ids).pool.as_mut().map_or(0, |p| p.run(now_ms))
    }

    /// Frees released states only once what `f` tracks (a datapath's PMD bursts) has
    /// finished everything that was in flight when they became due (see the module doc).
    /// The revalidator of each datapath the bridge's megaflows live in registers its own;
    /// registering the same [`InFlight::id`] again changes nothing.
    pub fn watch_in_flight(&self, f: Arc<dyn InFlight>) {
        if let Some(p) = lock(&self.ids).pool.as_mut()
            && !p.in_flight.iter().any(|g| g.id() == f.id())
        {
            p.in_flight.push(f);
        }
    }

    /// References held on `id` (0 if released or unknown).
    pub fn refs(&self, id: u32) -> u64 {
        let g = lock(&self.ids);
        g.pool
            .as_ref()
            .and_then(|p| p.nodes.get(&id))
            .map_or(0, |n| n.refs)
    }

    /// Counters and sizes.
    pub fn stats(&self) -> RecircStats {
        lock(&self.ids)
            .pool
            .as_ref()
            .map_or_else(RecircStats::default, |p| p.stats)
    }

    /// Most states known at once (see the module doc); existing states are kept.
    pub fn set_limit(&self, limit: usize) {
        if let Some(p) = lock(&self.ids).pool.as_mut() {
            p.limit = limit;
        }
    }

    /// Moves the allocation counter to `next` (0 is taken as 1): tests inject a start near
    /// `u32::MAX` to reach the wrap. Known ids are still skipped.
    pub fn set_next(&self, next: u32) {
        lock(&self.ids).next = next.max(1);
    }

    /// The next id the counter will try.
    pub fn next(&self) -> u32 {
        lock(&self.ids).next
    }
}

#[cfg(test)]
mod tests;
