//! IPv6 neighbour-discovery options (RFC 4861 §4.6): type, length in 8-byte units, data.
//!
//! [`NdOptionsIter`] walks an option list: a zero length or an option running past the end
//! is `Malformed` (and ends the walk), so the walk always terminates. Source/target
//! link-layer address options of length 1 are decoded as Ethernet addresses; everything
//! else is returned raw.

use crate::error::{Result, WireError};
use crate::ethernet::EthernetAddress;

/// Option type: source link-layer address.
pub const OPT_SOURCE_LLADDR: u8 = 1;
/// Option type: target link-layer address.
pub const OPT_TARGET_LLADDR: u8 = 2;
/// Option type: prefix information.
pub const OPT_PREFIX_INFO: u8 = 3;
/// Option type: MTU.
pub const OPT_MTU: u8 = 5;

/// One neighbour-discovery option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdOption<'a> {
    /// Source link-layer address (Ethernet).
    SourceLinkLayerAddr(EthernetAddress),
    /// Target link-layer address (Ethernet).
    TargetLinkLayerAddr(EthernetAddress),
    /// Any other option: its type and the bytes after type and length.
    Other {
        /// Option type.
        kind: u8,
        /// Bytes after the type and length bytes (length × 8 − 2 bytes).
        data: &'a [u8],
    },
}

impl NdOption<'_> {
    /// Encoded length in bytes (a multiple of 8 for a well-formed option).
    pub fn buffer_len(&self) -> usize {
        match self {
            NdOption::SourceLinkLayerAddr(_) | NdOption::TargetLinkLayerAddr(_) => 8,
            NdOption::Other { data, .. } => data.len() + 2,
        }
    }

    /// Writes the option at the start of `buf`; returns its length.
    /// `Err(Malformed)` if an `Other` option's length is not a multiple of 8 (or too long),
    /// `Err(Truncated)` if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if !len.is_multiple_of(8) || len > 255 * 8 {
            return Err(WireError::Malformed("ND option length not a multiple of 8"));
        }
        let out = buf.get_mut(..len).ok_or(WireError::Truncated)?;
        out[1] = (len / 8) as u8;
        match self {
            NdOption::SourceLinkLayerAddr(a) | NdOption::TargetLinkLayerAddr(a) => {
                out[0] = if matches!(self, NdOption::SourceLinkLayerAddr(_)) {
                    OPT_SOURCE_LLADDR
                } else {
                    OPT_TARGET_LLADDR
                };
                out[2..8].copy_from_slice(&a.0);
            }
            NdOption::Other { kind, data } => {
                out[0] = *kind;
                out[2..].copy_from_slice(data);
            }
        }
        Ok(len)
    }
}

/// Iterator over an ND option list.
#[derive(Debug, Clone)]
pub struct NdOptionsIter<'a> {
    data: &'a [u8],
}

impl<'a> NdOptionsIter<'a> {
    /// Walks `data` (the bytes after the fixed part of an ND message).
    pub fn new(data: &'a [u8]) -> Self {
        NdOptionsIter { data }
    }
}

impl<'a> Iterator for NdOptionsIter<'a> {
    type Item = Result<NdOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let data = self.data;
        let (&kind, rest) = data.split_first()?;
        let Some(&units) = rest.first() else {
            self.data = &[];
            return Some(Err(WireError::Truncated));
        };
        let len = usize::from(units) * 8;
        if len == 0 {
            self.data = &[];
            return Some(Err(WireError::Malformed("ND option with length 0")));
        }
        let Some(opt) = data.get(..len) else {
            self.data = &[];
            return Some(Err(WireError::Truncated));
        };
        self.data = &data[len..];
        let body = &opt[2..];
        Some(Ok(match (kind, units) {
            (OPT_SOURCE_LLADDR, 1) => {
                NdOption::SourceLinkLayerAddr(EthernetAddress(crate::field::array(body, 0)))
            }
            (OPT_TARGET_LLADDR, 1) => {
                NdOption::TargetLinkLayerAddr(EthernetAddress(crate::field::array(body, 0)))
            }
            _ => NdOption::Other { kind, data: body },
        }))
    }
}
