//! Private big-endian field helpers.
//!
//! Invariant: callers pass offsets that the view's constructor has already proven to lie
//! inside the buffer (fixed-offset header fields below the view's minimum length). Variable
//! ranges go through [`clamp`], which never panics.

use core::ops::Range;

use crate::error::{Result, WireError};

#[inline]
pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline]
pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub(crate) fn set_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn array<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[off..off + N]);
    out
}

/// `range` clamped to `0..len` (start never past end), so slicing with it cannot panic.
#[inline]
pub(crate) fn clamp(range: Range<usize>, len: usize) -> Range<usize> {
    let end = range.end.min(len);
    let start = range.start.min(end);
    start..end
}

/// `Ok` when a buffer of `have` bytes is exactly `need` long.
pub(crate) fn exact_len(have: usize, need: usize) -> Result<()> {
    match have.cmp(&need) {
        core::cmp::Ordering::Less => Err(WireError::Truncated),
        core::cmp::Ordering::Greater => Err(WireError::Malformed(
            "buffer longer than the message (no length field to bound it)",
        )),
        core::cmp::Ordering::Equal => Ok(()),
    }
}
