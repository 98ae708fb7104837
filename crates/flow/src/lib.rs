//! `flow`: the packet's flow key and everything that reads or writes it.
//!
//! Owns [`FlowKey`]/[`FlowMask`] (fixed word layout, miniflow-style maps), the storage-field
//! table, packet → key extraction, hashing, and the `ovs-ofctl` text syntax for matches and
//! actions. Does not own any table or cache: the classifier and datapath crates build on this.
//!
//! Panic contract: nothing here panics on packet bytes or flow text; errors are values.
//! `unsafe` is denied crate-wide; only the SIMD hashing module opts back in, block by block,
//! each with a `// SAFETY:` comment.
#![deny(unsafe_code)]

pub mod extract;
pub mod field;
pub mod hash;
pub mod key;
pub mod ofp;
pub mod text;

pub use field::{FIELDS, FieldId};
pub use key::{FLOW_WORDS, FlowKey, FlowMask, Stage, WordMap};
