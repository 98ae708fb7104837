//! SCTP common header (RFC 9260 §3.1): ports, verification tag, CRC32c checksum. Chunks are
//! left raw in the payload.
//!
//! Invariant of a view: the buffer holds the 12-byte common header; the packet extends to
//! the end of the buffer (pass the IP payload). The CRC32c is stored least-significant byte
//! first (as Linux's `sctp_compute_cksum` stores `cpu_to_le32(crc)`), computed with the
//! checksum field zeroed.

use crate::checksum;
use crate::error::{Result, WireError};
use crate::field;

/// A checked view of an SCTP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Length of the common header.
    pub const HEADER_LEN: usize = 12;

    /// Wraps `buffer`; `Err(Truncated)` if shorter than 12 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(SctpPacket { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 2)
    }

    /// Verification tag.
    pub fn verification_tag(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), 4)
    }

    /// The checksum field read as a big-endian word (the raw bytes; see the module doc for
    /// the CRC's byte order).
    pub fn checksum(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), 8)
    }

    /// Chunks (bytes after the common header).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }

    /// CRC32c of the packet with the checksum field taken as zero.
    pub fn compute_crc32c(&self) -> u32 {
        let b = self.buffer.as_ref();
        let c = checksum::crc32c_update(0, &b[..8]);
        let c = checksum::crc32c_update(c, &[0; 4]);
        checksum::crc32c_update(c, &b[12..])
    }

    /// True when the stored CRC32c matches.
    pub fn verify_checksum(&self) -> bool {
        self.buffer.as_ref()[8..12] == self.compute_crc32c().to_le_bytes()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 0, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the verification tag.
    pub fn set_verification_tag(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), 4, v);
    }

    /// Sets the checksum field (raw, big-endian word as read by [`SctpPacket::checksum`]).
    pub fn set_checksum(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), 8, v);
    }

    /// Mutable chunks.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }

    /// Computes and stores the CRC32c.
    pub fn fill_checksum(&mut self) {
        let c = self.compute_crc32c();
        self.buffer.as_mut()[8..12].copy_from_slice(&c.to_le_bytes());
    }
}

/// A parsed SCTP packet (common header and raw chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SctpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Verification tag.
    pub verification_tag: u32,
    /// Chunks, raw.
    pub payload: &'a [u8],
}

impl<'a> SctpRepr<'a> {
    /// Parses a checked packet (the checksum is not verified).
    pub fn parse<T: AsRef<[u8]>>(p: &'a SctpPacket<T>) -> Result<Self> {
        Ok(SctpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            verification_tag: p.verification_tag(),
            payload: p.payload(),
        })
    }

    /// Packet length: 12 + chunks.
    pub fn buffer_len(&self) -> usize {
        SctpPacket::<&[u8]>::HEADER_LEN + self.payload.len()
    }

    /// Writes the packet with its CRC32c; the buffer must be exactly
    /// [`SctpRepr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SctpPacket<T>) -> Result<()> {
        field::exact_len(p.buffer.as_ref().len(), self.buffer_len())?;
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_verification_tag(self.verification_tag);
        p.payload_mut().copy_from_slice(self.payload);
        p.fill_checksum();
        Ok(())
    }

    /// Writes the packet into `buffer` (exactly [`SctpRepr::buffer_len`] bytes) and returns
    /// the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<SctpPacket<T>> {
        let mut p = SctpPacket::new_checked(buffer)?;
        self.emit(&mut p)?;
        Ok(p)
    }
}
