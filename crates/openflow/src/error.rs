//! The one error type of the codec: what was wrong with the bytes, never a panic.
//!
//! Every decoder returns [`Error`]; the variants say whether the input was cut short, carried
//! a length that does not fit, used something this codec (or the `flow` model under it) does
//! not represent, or broke an OpenFlow rule.

/// Why bytes could not be decoded (or a value could not be encoded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input ended inside `what`.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A length field that is impossible where it is (too short, not a multiple of 8, past
    /// the end of its container, above a limit).
    #[error("bad length {len} in {what}")]
    BadLength {
        /// What carried the length.
        what: &'static str,
        /// The length found.
        len: usize,
    },
    /// Well-formed OpenFlow that this codec or the `flow` model does not represent
    /// (`unsupported action NXAST_LEARN`).
    #[error("unsupported {0}")]
    Unsupported(String),
    /// Ill-formed OpenFlow (`duplicate field NXM_OF_ETH_SRC`, `bad prerequisite for tcp_src`).
    #[error("invalid {0}")]
    Invalid(String),
}

/// Result alias of the crate.
pub type Result<T> = core::result::Result<T, Error>;

/// An [`Error::Unsupported`] with a formatted message.
pub(crate) fn unsupported(what: impl Into<String>) -> Error {
    Error::Unsupported(what.into())
}

/// An [`Error::Invalid`] with a formatted message.
pub(crate) fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(what.into())
}
