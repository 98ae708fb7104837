//! Placeholder: filled in by its owner (see lib.rs).
