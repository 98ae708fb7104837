//! `datapath`: the datapath's cache tiers — megaflows, the exact-match cache, the
//! signature-match cache and the ranked per-in_port megaflow classifier (dpcls).
//!
//! ```text
//!  packet key + hash ─► Emc (exact key, per PMD) ─► Smc (16-bit signature → flow index,
//!  per PMD, verified) ─► dpcls (per in_port, subtables per mask, ranked, batch) ─► miss
//! ```
//!
//! What is here: the structures and their tests and benchmarks ([`megaflow`], [`flow_table`],
//! [`action_table`] (interned action sets, reclaimed when no megaflow uses them),
//! [`emc`], [`smc`], [`dpcls`] with its signature prefilter, and [`twin`], the linear
//! reference they are all checked against); [`pmd`], one PMD thread's loop over them: rx
//! bursts, the tiers, upcalls through the [`pmd::Upcall`] trait, actions per flow batch
//! ([`actions`]: output, drop, VLAN push/pop, masked set-field with checksum fix-ups; [`ct`]:
//! `ct` through a [`ct::ConnTracker`] and depth-limited `recirc`), and the per-PMD stats
//! lines; [`recirc_hint`], the EMC extended through `ct,recirc` (a second pass takes the
//! megaflow an earlier packet of the same EMC entry found, when the tracker's metadata
//! repeats); [`dpctl`], OVS's `dpctl/dump-flows`, `dpctl/show` and `pmd-perf-show` text;
//! the flow table API as ofproto drives it (put with create/modify, get, delete, flush, full
//! and terse dumps: [`dpcls::api`] per classifier, [`dpif`] over all PMDs, stats summed).
//! The connection tracker itself is not here: the `conntrack` crate implements
//! [`ct::ConnTracker`] and the `flowswitch` glue plugs it in. Not yet: rxq assignment.
//!
//! # Invariants (ARCHITECTURE.md 2)
//!
//! Every tier returns only a live megaflow that matches the packet under its mask: the EMC
//! because it compares the exact key and the flow was inserted for that key, the SMC because
//! it verifies each candidate, dpcls because it compares the masked words. With
//! non-overlapping megaflows that is the one the twin finds.
//!
//! # Concurrency
//!
//! The EMC and SMC are owned by one PMD thread (`&mut self`, no atomics). The classifier is
//! read without locks through published snapshots (see [`dpcls`] for the protocol); writers
//! serialise on one mutex. Flow stats are written by the owning PMD only ([`megaflow`]).
//! No `unsafe` in this crate.
#![forbid(unsafe_code)]

pub mod action_table;
pub mod actions;
pub mod bursts;
pub mod check_len;
pub mod ct;
pub mod dpcls;
pub mod dpctl;
pub mod dpif;
pub mod emc;
pub mod exec_queue;
pub mod flow_table;
pub mod megaflow;
pub mod pmd;
pub mod pmd_thread;
pub mod recirc_hint;
pub mod smc;
pub mod twin;

pub use action_table::{ActionSet, ActionTableMemory, ActionsFull, ActionsReader, ActionsView};
pub use actions::DpAction;
pub use ct::{
    ConnTracker, CtExt, CtExtId, CtOut, CtParams, CtRelease, CtVerdict, MAX_RECIRC_DEPTH,
    UntrackedConntrack,
};
pub use dpcls::{
    Dpcls, DpclsConfig, DpclsReader, FlowDump, FlowError, FlowPut, Inserted, LookupStats, PutMode,
    PutOutcome, RankOutcome, Snapshot, TerseFlow,
};
pub use dpctl::{DpPortInfo, DpShow, FlowOwner, KeyFormat, PmdPerf, PortNames};
pub use dpif::{DpFlowInfo, DpifFlows};
pub use emc::Emc;
pub use exec_queue::{ExecError, ExecStats, Execute, ExecuteQueue};
pub use flow_table::{FlowArena, FlowIndex};
pub use megaflow::{ActionsId, DpFlow, FlowStats, FlowStatsSnapshot, Ufid, UfidBuild};
pub use pmd::{ActionTable, Pmd, PmdConfig, PmdStats, RunReport, Upcall, UpcallError};
pub use pmd_thread::{Pinning, PmdSnapshot, PmdThread, PmdThreadConfig, PmdThreadError};
pub use smc::Smc;
pub use twin::LinearMegaflows;
