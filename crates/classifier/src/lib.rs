//! `classifier`: packet classification over [`flow::FlowKey`]s.
//!
//! Today it holds the trivially correct reference, [`linear::LinearClassifier`]: rules in
//! priority order, scanned one by one. Every faster structure added here (the OpenFlow
//! tuple-space classifier, the datapath's megaflow classifier) is tested against it on random
//! rules and packets, after every insert and delete.
//!
//! Panic contract: no lookup, insert or remove panics on any key, mask or priority.
#![forbid(unsafe_code)]

pub mod linear;

pub use linear::{LinearClassifier, RuleId};
