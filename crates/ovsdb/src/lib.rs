//! OVSDB (RFC 7047) data model, database files and the JSON-RPC client core.
//!
//! # What this crate owns
//!
//! * [`uuid`]: row identities ([`Uuid`]).
//! * [`datum`]: typed column values — [`Atom`]s and [`Datum`]s (sets and maps, scalars as
//!   one-element sets) — read from and written as RFC 7047 JSON against a column type.
//! * [`schema`]: database schemas (tables, column types, references).
//! * [`db`]: an in-memory replica ([`Database`]) that applies row updates: whole rows,
//!   RFC 7047 `update` notifications and the `update2`/file-format *diffs*.
//! * [`file`]: the on-disk log `ovsdb-server` keeps (`OVSDB JSON <len> <sha1>` records: the
//!   schema, then one transaction per record), read into a [`Database`] and written from one.
//!
//! What it does not own: what the tables mean (the `northd` and `vswitchd` crates), sockets
//! in the data model (the JSON-RPC session lives apart from the replica so the replica can
//! be fed from a file, a socket or a test).
//!
//! # Invariants
//!
//! * A value read from JSON always fits its column type (atom kinds, `min`/`max`); anything
//!   else is an [`Error`], never a panic.
//! * Sets and maps are kept sorted and free of duplicates, so equal values compare equal.

pub mod datum;
pub mod db;
pub mod file;
pub mod schema;
pub mod uuid;

pub use datum::{Atom, Datum};
pub use db::{Database, Row, Table};
pub use schema::{AtomicType, BaseType, ColumnType, DatabaseSchema, TableSchema};
pub use uuid::Uuid;

/// Everything that can go wrong reading OVSDB data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Text that is not JSON.
    #[error("bad JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON that does not fit the OVSDB grammar or the column's type.
    #[error("{0}")]
    Syntax(String),
    /// A file that could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn syntax(msg: impl Into<String>) -> Self {
        Error::Syntax(msg.into())
    }
}

/// Shorthand for this crate's results.
pub type Result<T> = std::result::Result<T, Error>;
