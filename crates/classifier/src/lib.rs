//! `classifier`: packet classification over [`flow::FlowKey`]s.
//!
//! It holds the trivially correct reference, [`linear::LinearClassifier`] (rules in priority
//! order, scanned one by one), the OpenFlow-table classifier [`oftable::OfTable`] (relaxed
//! tuple-space search, priority-ordered, staged megaflow un-wildcarding), and the ClassBench
//! loader [`classbench`]. Every faster structure is tested against the linear twin on random
//! rules and packets, after every insert and delete.
//!
//! Panic contract: no lookup, insert or remove panics on any key, mask or priority.
#![forbid(unsafe_code)]

pub mod classbench;
pub mod double_buffer;
pub mod linear;
pub mod oftable;

pub use linear::{LinearClassifier, RuleId};
pub use oftable::OfTable;
