//! testutil crate (being written).
