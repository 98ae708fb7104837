//! northd: compiles an OVN northbound database (logical switches, routers, ports, ACLs,
//! port groups, address sets, load balancers, NAT, routes, policies) into southbound logical
//! flows, the way ovn-northd 23.03 does, and prints them as `ovn-sbctl lflow-list`.
//!
//! # What this crate owns
//!
//! * [`nb`]: the typed NB model read from an `ovsdb` replica, with per-row diagnostics.
//! * [`addr`]: NB address text (MACs, `IP/PLEN`, port address lists, EUI-64 link-locals).
//! * [`stage`]: the pipelines' stages with OVN 23.03's table numbers and names.
//! * [`lflow`]: logical flows and the sink builders write to.
//! * [`build`]: the compiler, cut into items (a datapath, a port, an ACL on a switch, …)
//!   run by the stage modules.
//! * [`output`]: `lflow-list` text, printed and parsed; [`compare`]: ours against
//!   ovn-northd's, stage by stage.
//! * [`topology`]: synthetic ovn-kubernetes-like NB databases for tests and benchmarks
//!   (the twin of `gen_ovnk.py`).
//!
//! Not here: sockets (the `ovsdb` crate's client), the datapath (northd never touches
//! packets).
//!
//! # Invariants
//!
//! * A bad NB row yields a [`nb::Diag`] and no flows for that row; the rest compiles.
//! * The result is a set: the same flow produced by two items appears once.

pub mod addr;
pub mod build;
pub mod compare;
pub mod daemon;
pub mod engine;
pub mod incr;
pub mod lflow;
pub mod nb;
pub mod output;
pub mod overlay;
pub mod par;
pub mod sb;
pub mod sb_index;
pub mod stage;
pub mod topology;
