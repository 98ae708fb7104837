//! [`OptionBytes`]: an inline, allocation-free copy of up to 40 option bytes, the most an
//! IPv4 header (IHL 15) or a TCP header (data offset 15) can carry.
//!
//! Invariant: `len <= 40` and the bytes past `len` are zero (so derived equality is
//! equality of the stored bytes).

use crate::error::{Result, WireError};

/// Up to 40 raw option bytes, stored inline (no allocation, `Copy`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptionBytes {
    bytes: [u8; 40],
    len: u8,
}

impl OptionBytes {
    /// Most option bytes an IPv4 or TCP header can hold.
    pub const MAX_LEN: usize = 40;

    /// No options.
    pub const EMPTY: OptionBytes = OptionBytes {
        bytes: [0; 40],
        len: 0,
    };

    /// Copies `data`; `Err(Malformed)` if longer than 40 bytes.
    pub fn from_slice(data: &[u8]) -> Result<Self> {
        if data.len() > Self::MAX_LEN {
            return Err(WireError::Malformed("more than 40 option bytes"));
        }
        let mut bytes = [0u8; 40];
        bytes[..data.len()].copy_from_slice(data);
        Ok(OptionBytes {
            bytes,
            len: data.len() as u8,
        })
    }

    /// The stored bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len).min(Self::MAX_LEN)]
    }

    /// Number of stored bytes.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True when no option bytes are stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Length rounded up to a multiple of 4 (what a header needs to hold them).
    pub fn padded_len(&self) -> usize {
        (self.len() + 3) & !3
    }
}

impl Default for OptionBytes {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl core::fmt::Debug for OptionBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "OptionBytes({:02x?})", self.as_slice())
    }
}
