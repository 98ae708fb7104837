//! netdev crate (being written).
