//! The crate's error type. Every fallible operation returns [`WireError`]; nothing panics.

use core::fmt;

/// Why a buffer could not be viewed, parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// The buffer is shorter than a header or a length field requires.
    Truncated,
    /// A field holds a value the protocol forbids (the text says which).
    Malformed(&'static str),
    /// Valid on the wire, but not handled by this crate (the text says what).
    Unsupported(&'static str),
    /// A checksum did not verify.
    BadChecksum,
}

/// `Result` with [`WireError`].
pub type Result<T> = core::result::Result<T, WireError>;

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => f.write_str("truncated packet"),
            WireError::Malformed(what) => write!(f, "malformed packet: {what}"),
            WireError::Unsupported(what) => write!(f, "unsupported: {what}"),
            WireError::BadChecksum => f.write_str("bad checksum"),
        }
    }
}

impl std::error::Error for WireError {}
