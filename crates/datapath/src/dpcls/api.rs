//! The flow table API of one classifier, as ofproto drives a datapath (OVS `dpif`:
//! `flow_put` with create/modify flags, `flow_get`, `flow_del`, `flow_flush`, `flow_dump`
//! and its terse form): [`Dpcls::put`], [`Dpcls::get`], [`Dpcls::del`], [`Dpcls::flush`],
//! [`Dpcls::dump`] ([`FlowDump::next_chunk`], [`FlowDump::next_terse`]). The datapath-level
//! view over several PMDs' classifiers is [`crate::dpif`].
//!
//! # Put
//!
//! A put names a megaflow (key, mask — the mask must match `in_port` and `recirc_id`
//! exactly, as every datapath megaflow does), its action set, optionally its ufid (default:
//! [`Ufid::of`] the megaflow, what the PMD uses) and a [`PutMode`]:
//! - `Create` installs; an installed flow under the ufid is [`FlowError::Exists`];
//! - `Modify` replaces the actions of the installed flow in place (its stats and cache
//!   entries stay); no flow is [`FlowError::NotFound`];
//! - `CreateOrModify` does whichever applies.
//!
//! A ufid that names a *different* megaflow is a collision ([`FlowError::UfidCollision`],
//! counted in [`Dpcls::ufid_collisions`]); the megaflow installed under another ufid is
//! [`FlowError::MegaflowExists`]. Nothing is changed by a refused put. The caller guarantees,
//! as for [`Dpcls::insert`], that a new megaflow overlaps no other (xlate's never do).
//!
//! **Modify and readers.** The flow's action set is swapped (`ArcSwap`) and then its action
//! id (one atomic store): a PMD that read the old id executes the old list (its view of the
//! action table or the old set it falls back to), one that read the new id the new list;
//! each is a complete list, never a mix (see [`crate::action_table`]).
//!
//! # Dump: a snapshot walk, no lock
//!
//! [`Dpcls::dump`] takes the published snapshot's flow arena (one atomic load) and walks its
//! slots `0..used`, skipping dead flows. The arena is write-once, so the walk needs no lock
//! and never blocks an install, a delete or a lookup; an install meanwhile is seen if it
//! lands in the same arena (its slot is below `used` when the walk gets there). A cursor
//! ([`FlowDump`]) keeps the arena alive, so a dump taken in chunks sees each flow at most
//! once; a flow installed for the whole dump is seen exactly once; a flow deleted before the
//! walk reaches it is skipped; a flow installed after a compaction (which starts a new arena)
//! is left for the next dump — as OVS's dump, which promises nothing about flows changed
//! during it.
//!
//! Bad input (a mask without exact `in_port`/`recirc_id`, a modify or delete of an absent
//! ufid, a create of a present one) is a [`FlowError`], never a panic.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use flow::{FlowKey, FlowMask};

use super::{Dpcls, Inserted};
use crate::action_table::ActionSet;
use crate::flow_table::FlowArena;
use crate::megaflow::{DpFlow, FlowStatsSnapshot, Ufid};

/// What a put may do with an installed flow (OVS `DPIF_FP_CREATE` / `DPIF_FP_MODIFY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// Install; fail if the ufid is installed.
    Create,
    /// Replace the actions of the installed flow; fail if absent.
    Modify,
    /// Either.
    CreateOrModify,
}

/// A flow put.
#[derive(Debug, Clone)]
pub struct FlowPut {
    /// The key (masked here).
    pub key: FlowKey,
    /// The mask: `in_port` and `recirc_id` (word 0) must be exact.
    pub mask: FlowMask,
    /// The actions (from [`crate::action_table::ActionTable::intern_set`]).
    pub actions: Arc<ActionSet>,
    /// The flow's id; `None` = [`Ufid::of`] the megaflow.
    pub ufid: Option<Ufid>,
    /// Create, modify or both.
    pub mode: PutMode,
}

impl FlowPut {
    /// A put of `key`/`mask` with `actions`, ufid derived from the megaflow.
    pub fn new(key: FlowKey, mask: FlowMask, actions: Arc<ActionSet>, mode: PutMode) -> Self {
        FlowPut {
            key,
            mask,
            actions,
            ufid: None,
            mode,
        }
    }

    /// The ufid this put installs or modifies.
    pub fn ufid(&self) -> Ufid {
        self.ufid.unwrap_or_else(|| Ufid::of(&self.key, &self.mask))
    }
}

/// What a put did.
#[derive(Debug, Clone)]
pub enum PutOutcome {
    /// A new flow was installed.
    Created(Arc<DpFlow>),
    /// The installed flow's actions were replaced; `old` is its previous action set.
    Modified {
        /// The flow.
        flow: Arc<DpFlow>,
        /// The set it had.
        old: Option<Arc<ActionSet>>,
    },
}

impl PutOutcome {
    /// The flow put.
    pub fn flow(&self) -> &Arc<DpFlow> {
        match self {
            PutOutcome::Created(f) | PutOutcome::Modified { flow: f, .. } => f,
        }
    }
}

/// Why a flow table request was refused (nothing was changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowError {
    /// The mask does not match all of `in_port`.
    InPortNotExact,
    /// The mask does not match all of `recirc_id`.
    RecircIdNotExact,
    /// A create of a ufid that is installed.
    Exists(Ufid),
    /// A modify, get or delete of a ufid that is not installed.
    NotFound(Ufid),
    /// The ufid names a different megaflow (counted; never aliased).
    UfidCollision(Ufid),
    /// The megaflow is installed under this other ufid.
    MegaflowExists(Ufid),
    /// No PMD with this core id (datapath-level requests).
    NoSuchPmd(u32),
}

impl std::fmt::Display for FlowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowError::InPortNotExact => {
                f.write_str("the megaflow mask does not match in_port exactly")
            }
            FlowError::RecircIdNotExact => {
                f.write_str("the megaflow mask does not match recirc_id exactly")
            }
            FlowError::Exists(u) => write!(f, "flow ufid:{:032x} is already installed", u.0),
            FlowError::NotFound(u) => write!(f, "no flow ufid:{:032x}", u.0),
            FlowError::UfidCollision(u) => {
                write!(f, "ufid:{:032x} names a different megaflow", u.0)
            }
            FlowError::MegaflowExists(u) => {
                write!(f, "the megaflow is installed as ufid:{:032x}", u.0)
            }
            FlowError::NoSuchPmd(c) => write!(f, "no pmd on core {c}"),
        }
    }
}

impl std::error::Error for FlowError {}

/// One line of a terse dump: the flow's id and stats (OVS `dpif_flow_dump` with `terse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerseFlow {
    /// The flow's id.
    pub ufid: Ufid,
    /// Its counters.
    pub stats: FlowStatsSnapshot,
}

/// A dump in progress over one published arena (see the module doc). Also an iterator of
/// the live flows.
#[derive(Debug)]
pub struct FlowDump {
    arena: Arc<FlowArena>,
    pos: u32,
}

impl FlowDump {
    /// Appends up to `max` live flows to `out`; returns how many (0: the dump is over).
    pub fn next_chunk(&mut self, max: usize, out: &mut Vec<Arc<DpFlow>>) -> usize {
        let mut n = 0;
        self.walk(max, |f| {
            out.push(Arc::clone(f));
            n += 1;
        });
        n
    }

    /// Appends up to `max` live flows' ufid and stats to `out` (no flow reference taken);
    /// returns how many (0: the dump is over).
    pub fn next_terse(&mut self, max: usize, out: &mut Vec<TerseFlow>) -> usize {
        let mut n = 0;
        self.walk(max, |f| {
            out.push(TerseFlow {
                ufid: f.ufid,
                stats: f.stats.snapshot(),
            });
            n += 1;
        });
        n
    }

    /// Whether the walk has passed every slot used so far.
    pub fn is_done(&self) -> bool {
        self.pos as usize >= self.arena.used()
    }

    fn walk(&mut self, max: usize, mut f: impl FnMut(&Arc<DpFlow>)) {
        let used = self.arena.used();
        let mut n = 0;
        while n < max && (self.pos as usize) < used {
            if let Some(fl) = self.arena.get(self.pos)
                && !fl.is_dead()
            {
                f(fl);
                n += 1;
            }
            self.pos += 1;
        }
    }
}

impl Iterator for FlowDump {
    type Item = Arc<DpFlow>;

    fn next(&mut self) -> Option<Arc<DpFlow>> {
        let mut out = None;
        self.walk(1, |f| out = Some(Arc::clone(f)));
        out
    }
}

/// Checks that `mask` matches `in_port` and `recirc_id` exactly.
pub(crate) fn check_mask(mask: &FlowMask) -> Result<(), FlowError> {
    if mask.w[0] >> 32 != 0xffff_ffff {
        return Err(FlowError::InPortNotExact);
    }
    if mask.w[0] & 0xffff_ffff != 0xffff_ffff {
        return Err(FlowError::RecircIdNotExact);
    }
    Ok(())
}

impl Dpcls {
    /// Puts a flow (see the module doc).
    pub fn put(&self, put: &FlowPut) -> Result<PutOutcome, FlowError> {
        check_mask(&put.mask)?;
        let ufid = put.ufid();
        let mut w = self.lock();
        if let Some(l) = w.flows.get(&ufid) {
            if !l.flow.same_megaflow(&put.key, &put.mask) {
                self.collisions.fetch_add(1, Ordering::Relaxed);
                return Err(FlowError::UfidCollision(ufid));
            }
            if put.mode == PutMode::Create {
                return Err(FlowError::Exists(ufid));
            }
            let flow = l.flow.clone();
            let old = flow.replace_actions(Arc::clone(&put.actions));
            return Ok(PutOutcome::Modified { flow, old });
        }
        if put.mode == PutMode::Modify {
            return Err(FlowError::NotFound(ufid));
        }
        let flow = DpFlow::with_actions(ufid, &put.key, &put.mask, Arc::clone(&put.actions));
        let port = if self.cfg.per_port {
            flow.in_port().ok_or(FlowError::InPortNotExact)?
        } else {
            0
        };
        if let Some((old, _)) = Self::find_megaflow(&w, port, &flow) {
            return Err(FlowError::MegaflowExists(old.ufid));
        }
        match self.install_locked(&mut w, port, flow) {
            Inserted::New(f, _) => Ok(PutOutcome::Created(f)),
            // Unreachable (checked above under the same lock); answered, not panicked.
            Inserted::Existing(f, _) => Err(FlowError::MegaflowExists(f.ufid)),
        }
    }

    /// Deletes the flow `ufid` (marked dead first: every cache tier then misses it);
    /// returns it with its last stats.
    pub fn del(&self, ufid: Ufid) -> Result<Arc<DpFlow>, FlowError> {
        self.remove(ufid).ok_or(FlowError::NotFound(ufid))
    }

    /// Deletes every flow; returns how many. Publishes an empty classifier with a fresh
    /// arena (readers on the old snapshot see every flow dead).
    pub fn flush(&self) -> usize {
        let mut w = self.lock();
        let n = w.flows.len();
        for l in w.flows.values() {
            l.flow.mark_dead();
        }
        w.flows = Default::default();
        let snap = super::Snapshot {
            arena: Arc::new(FlowArena::new(self.cfg.arena_capacity)),
            ports: Vec::new(),
            per_port: self.cfg.per_port,
            prefilter: self.cfg.prefilter,
        };
        self.publish(&mut w, snap);
        n
    }

    /// A dump of the live flows over the published snapshot (no lock; see the module doc).
    pub fn dump(&self) -> FlowDump {
        FlowDump {
            arena: Arc::clone(&self.current.load().arena),
            pos: 0,
        }
    }

    /// The whole terse dump (ufid + stats of every live flow) in one vector.
    pub fn dump_terse(&self) -> Vec<TerseFlow> {
        let mut d = self.dump();
        let mut out = Vec::with_capacity(d.arena.used());
        while d.next_terse(usize::MAX, &mut out) > 0 {}
        out
    }
}
