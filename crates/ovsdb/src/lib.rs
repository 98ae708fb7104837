//! OVSDB (RFC 7047) data model, database files and the JSON-RPC client core.
//!
//! # What this crate owns
//!
//! * [`uuid`]: row identities ([`Uuid`]).
//! * [`datum`]: typed column values — [`Atom`]s and [`Datum`]s (sets and maps, scalars as
//!   one-element sets) — read from and written as RFC 7047 JSON against a column type.
//! * [`schema`]: database schemas (tables, column types, references).
//! * [`db`]: an in-memory replica ([`Database`]) that applies row updates: whole rows,
//!   RFC 7047 `update` notifications and the `update2`/file-format *diffs*; rows are stored
//!   compactly (non-default values by column position, equal values shared per table). A
//!   table can be *streamed* instead of kept: its updates become [`StreamEvent`]s for a
//!   reader that keeps its own digest of a large table.
//! * [`jsonrpc`]: sans-I/O JSON-RPC 1.0 framing (an incremental, size-bounded decoder of
//!   back-to-back JSON messages) and the message types.
//! * [`client`]: one blocking connection to an `ovsdb-server` (`unix:`/`tcp:`): RPCs,
//!   `transact`, and a monitor that keeps a [`Database`] replica up to date.
//! * [`session`]: a [`client::Client`] that reconnects with exponential backoff and rebuilds its
//!   replica from scratch after each reconnect.
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

pub mod client;
pub mod datum;
pub mod db;
pub mod file;
pub mod jsonrpc;
pub mod schema;
pub mod session;
pub mod uuid;

pub use client::{Client, MonitorSpec};
pub use datum::{Atom, Datum};
pub use db::{Database, Row, RowEvent, StreamEvent, Table};
pub use schema::{AtomicType, BaseType, ColumnType, DatabaseSchema, TableSchema};
pub use session::{Backoff, Session};
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
    /// Bytes from a peer that are not a well-formed JSON-RPC stream (bad framing, a message
    /// over the size limit, a message of no known shape). The connection is unusable after it.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server answered an RPC with an error.
    #[error("{method}: server error: {error}")]
    Rpc {
        /// The method called.
        method: String,
        /// The server's error (its `error` and `details`, as text).
        error: String,
    },
    /// A `transact` that the server refused: the first failing operation (`op` is its index
    /// in the request, `None` for an error of the commit as a whole).
    #[error("transaction failed at {}: {error}{}", txn_where(*.op), txn_details(.details))]
    Transaction {
        /// Index of the failing operation, `None` for a commit-time error.
        op: Option<usize>,
        /// The error's name (`constraint violation`, `referential integrity violation`, …).
        error: String,
        /// The server's details, `""` when it gave none.
        details: String,
    },
    /// The connection could not be made, was closed or failed.
    #[error("disconnected: {0}")]
    Disconnected(String),
    /// No answer within the time allowed.
    #[error("timed out: {0}")]
    Timeout(String),
}

fn txn_where(op: Option<usize>) -> String {
    op.map_or_else(|| "commit".to_owned(), |i| format!("operation {i}"))
}

fn txn_details(details: &str) -> String {
    if details.is_empty() {
        String::new()
    } else {
        format!(" ({details})")
    }
}

impl Error {
    pub(crate) fn syntax(msg: impl Into<String>) -> Self {
        Error::Syntax(msg.into())
    }
}

/// Shorthand for this crate's results.
pub type Result<T> = std::result::Result<T, Error>;
