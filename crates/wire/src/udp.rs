//! UDP datagrams (RFC 768): the checked view [`UdpPacket`] and [`UdpRepr`].
//!
//! Invariant of a view built by `new_checked`: buffer ≥ 8 bytes and
//! `8 ≤ length field ≤ buffer length`; bytes past the length field are not payload. A zero
//! checksum means "none" over IPv4 (it verifies); over IPv6 it is invalid (RFC 8200 §8.1).

use crate::checksum::PseudoHeader;
use crate::constants::ip_proto;
use crate::error::{Result, WireError};
use crate::field;

/// A checked view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Header length.
    pub const HEADER_LEN: usize = 8;

    fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after checking the length field against it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let l = usize::from(p.len());
        if l < Self::HEADER_LEN {
            return Err(WireError::Malformed("UDP length below 8"));
        }
        if l > len {
            return Err(WireError::Truncated);
        }
        Ok(p)
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

    /// Length field (header + payload).
    pub fn len(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 4)
    }

    /// True when the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= Self::HEADER_LEN
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 6)
    }

    fn datagram(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[field::clamp(0..usize::from(self.len()), b.len())]
    }

    /// Payload: bytes 8 up to the length field.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[field::clamp(Self::HEADER_LEN..usize::from(self.len()), b.len())]
    }

    /// True when the checksum verifies over `pseudo` (or is 0 over IPv4).
    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> bool {
        if self.checksum() == 0 {
            return matches!(pseudo, PseudoHeader::V4 { .. });
        }
        pseudo.verify(ip_proto::UDP, self.datagram())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 0, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 4, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 6, v);
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.buffer.as_ref().len();
        let r = field::clamp(Self::HEADER_LEN..usize::from(self.len()), len);
        &mut self.buffer.as_mut()[r]
    }

    /// Recomputes and stores the checksum (a computed 0 is sent as 0xffff).
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        self.set_checksum(0);
        let c = pseudo.checksum(ip_proto::UDP, self.datagram());
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

/// A parsed UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> UdpRepr<'a> {
    /// Parses a checked datagram (the checksum is not verified).
    pub fn parse<T: AsRef<[u8]>>(p: &'a UdpPacket<T>) -> Result<Self> {
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload: p.payload(),
        })
    }

    /// Datagram length: 8 + payload.
    pub fn buffer_len(&self) -> usize {
        UdpPacket::<&[u8]>::HEADER_LEN + self.payload.len()
    }

    /// Writes the datagram (header, payload, checksum over `pseudo`) at the start of the
    /// view's buffer. `Err(Truncated)` if shorter than [`UdpRepr::buffer_len`],
    /// `Err(Malformed)` for a payload above 65527 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut UdpPacket<T>,
        pseudo: &PseudoHeader,
    ) -> Result<()> {
        let len = self.buffer_len();
        let len16 =
            u16::try_from(len).map_err(|_| WireError::Malformed("UDP datagram above 65535"))?;
        let b = p.buffer.as_mut();
        if b.len() < len {
            return Err(WireError::Truncated);
        }
        field::set_u16(b, 0, self.src_port);
        field::set_u16(b, 2, self.dst_port);
        field::set_u16(b, 4, len16);
        b[8..len].copy_from_slice(self.payload);
        p.fill_checksum(pseudo);
        Ok(())
    }

    /// Writes the datagram into `buffer` and returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        buffer: T,
        pseudo: &PseudoHeader,
    ) -> Result<UdpPacket<T>> {
        let mut p = UdpPacket::new_unchecked(buffer);
        self.emit(&mut p, pseudo)?;
        Ok(p)
    }
}
