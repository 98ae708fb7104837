//! The glue between the OpenFlow bridge (`ofproto`) and the datapath (`datapath`): what OVS
//! calls `ofproto-dpif` and `ofproto-dpif-upcall`.
//!
//! # What this crate owns
//!
//! * [`handler`]: the upcall handler — a datapath miss translated through the OpenFlow tables
//!   ([`handler::OfprotoUpcall`], the `datapath::Upcall` the PMDs call), the bridge shared by
//!   the handler, the control path and the revalidators ([`handler::SharedBridge`]: lock-free
//!   reads, double-buffered writes, frozen translation states by recirculation id through the
//!   bridge's reference-counted pool, `ofproto::recirc`) and the ukeys ([`handler::Ukey`],
//!   OVS's `udpif_key`, holding references to the recirculation ids their megaflows use and
//!   match).
//! * [`revalidate`]: the revalidator — dumps the datapath's megaflows, pushes their stats up
//!   to the OpenFlow rules, expires idle ones and re-translates them after flow mods and MAC
//!   moves, fixing or deleting those whose answer changed; deleting a megaflow releases its
//!   recirculation ids, and each pass runs their grace-period maintenance.
//! * [`packet_in`]: packet-ins — `controller` actions the datapath executed, with their
//!   frozen pipeline state — queued (bounded) for the bridge's OpenFlow connections.
//! * [`dp_actions`]: the conversion of xlate's datapath actions (`ofproto::OdpAction`, OVS's
//!   `Datapath actions:` vocabulary) into the actions the PMD executes (`datapath::DpAction`).
//! * [`ct_adapter`]: the `conntrack` tracker as the PMD's `datapath::ConnTracker` (one shared
//!   table and fragment reassembler per datapath, a per-PMD established fast path).
//!
//! The `flowswitch` binary is a command-line front end over this crate; it holds no part of
//! the control path itself.
//!
//! # Lock order
//!
//! Written in [`handler`]'s module doc: no two of the control path's locks are held at once;
//! the MAC-table and recirculation-id locks are leaves.

pub mod ct_adapter;
pub mod dp_actions;
pub mod handler;
pub mod packet_in;
pub mod revalidate;
pub mod udpif;
