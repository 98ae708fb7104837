//! `ofproto`: the OpenFlow slow path of flowswitch.
//!
//! - [`table`]: one OpenFlow table (rules, counters, timeouts) over a classifier that reports
//!   the bits each lookup consulted;
//! - [`conj`]: conjunctive matches (`conjunction`, `conj_id`) as OVS's classifier does them;
//! - [`bridge`]: a bridge (ports with VLAN modes, 255 tables, flow mods, expiry, MAC learning);
//! - [`xlate`]: translation of a packet's flow key into datapath actions plus the megaflow mask
//!   (OVS `ofproto-dpif-xlate.c`), including `NORMAL`;
//! - [`odp`]: datapath actions and their OVS text form;
//! - [`trace`]: the `ofproto/trace` report;
//! - [`group`]: the group table (group mods, select-group bucket maps, OVS's hashes);
//! - [`mac`]: the MAC learning table;
//! - [`recirc`]: recirculation ids and frozen states — on a datapath's bridge one
//!   reference-counted id per frozen state, released when the last megaflow using or matching
//!   it goes, reusable only after a grace period (OVS `ofproto-dpif-rid.c`).
//!
//! Time is always passed in (milliseconds on the caller's clock); nothing here reads a clock or
//! does I/O. Panic contract: no flow mod, key or packet makes anything here panic; bad flow
//! mods return errors and change nothing; over-deep or looping pipelines end in a counted drop.
#![forbid(unsafe_code)]

pub mod bridge;
pub mod conj;
pub mod group;
pub mod mac;
pub mod odp;
pub mod recirc;
pub mod table;
pub mod trace;
pub mod xlate;

pub use bridge::{Bridge, FlowMod, FlowModCommand, FlowModError, Port, VlanMode};
pub use odp::{OdpAction, format_odp_actions};
pub use table::Backend;
pub use trace::format_trace;
pub use xlate::{XlateIn, XlateOut, xlate, xlate_actions, xlate_ro};
