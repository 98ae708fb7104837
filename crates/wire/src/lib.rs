//! wire crate (being written).
