//! flow crate (being written).
