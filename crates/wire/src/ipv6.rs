//! IPv6 packets (RFC 8200): the checked view [`Ipv6Packet`] and [`Ipv6Repr`] for the fixed
//! 40-byte header. Extension headers are in [`crate::ipv6ext`].
//!
//! Invariant of a view built by `new_checked`: buffer ≥ 40 bytes, version 6, and
//! `40 + payload_len ≤ buffer length`. Bytes after the payload length are not part of
//! `payload()`. Jumbograms (payload length 0 with a jumbo option) are not supported: the
//! payload is then empty.

use std::net::Ipv6Addr;

use crate::error::{Result, WireError};
use crate::field;
use crate::ipv6ext::{self, Ipv6ExtSummary};

/// A checked view of an IPv6 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Length of the fixed header.
    pub const HEADER_LEN: usize = 40;

    fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after checking version and payload length against it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if p.version() != 6 {
            return Err(WireError::Malformed("IPv6 version is not 6"));
        }
        if Self::HEADER_LEN + usize::from(p.payload_len()) > len {
            return Err(WireError::Truncated);
        }
        Ok(p)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version (6).
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        ((field::u16_at(self.b(), 0) >> 4) & 0xff) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        field::u32_at(self.b(), 0) & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header, extension headers included).
    pub fn payload_len(&self) -> u16 {
        field::u16_at(self.b(), 4)
    }

    /// Next header after the fixed header.
    pub fn next_header(&self) -> u8 {
        self.b()[6]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(field::array::<16>(self.b(), 8))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(field::array::<16>(self.b(), 24))
    }

    /// The payload (extension headers and upper layer), `payload_len` bytes.
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        &b[field::clamp(
            Self::HEADER_LEN..Self::HEADER_LEN + usize::from(self.payload_len()),
            b.len(),
        )]
    }

    /// Walks the extension headers of the payload; offsets in the result are relative to
    /// [`Ipv6Packet::payload`].
    pub fn extensions(&self) -> Result<Ipv6ExtSummary> {
        ipv6ext::walk(self.next_header(), self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets version (low 4 bits used).
    pub fn set_version(&mut self, v: u8) {
        let b = self.bm();
        b[0] = (b[0] & 0x0f) | (v << 4);
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (field::u16_at(self.b(), 0) & 0xf00f) | (u16::from(tc) << 4);
        field::set_u16(self.bm(), 0, w);
    }

    /// Sets the flow label (low 20 bits used).
    pub fn set_flow_label(&mut self, fl: u32) {
        let w = (field::u32_at(self.b(), 0) & 0xfff0_0000) | (fl & 0x000f_ffff);
        field::set_u32(self.bm(), 0, w);
    }

    /// Sets the payload length field.
    pub fn set_payload_len(&mut self, v: u16) {
        field::set_u16(self.bm(), 4, v);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.bm()[6] = v;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.bm()[7] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.bm()[8..24].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.bm()[24..40].copy_from_slice(&a.octets());
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let r = field::clamp(
            Self::HEADER_LEN..Self::HEADER_LEN + usize::from(self.payload_len()),
            self.b().len(),
        );
        &mut self.bm()[r]
    }
}

/// A parsed IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (0..=0xfffff).
    pub flow_label: u32,
    /// Payload length (extension headers included).
    pub payload_len: usize,
}

impl Ipv6Repr {
    /// Parses a checked packet (the extension headers are not walked: see
    /// [`Ipv6Packet::extensions`]).
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Self> {
        Ok(Ipv6Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            payload_len: usize::from(p.payload_len()),
        })
    }

    /// Header length (40).
    pub const fn buffer_len(&self) -> usize {
        Ipv6Packet::<&[u8]>::HEADER_LEN
    }

    /// Writes the header into `p`; the payload is not touched.
    ///
    /// `Err(Truncated)` if the buffer cannot hold header + payload, `Err(Malformed)` for a
    /// payload above 65535 bytes or a flow label above 20 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv6Packet<T>) -> Result<()> {
        let plen = u16::try_from(self.payload_len)
            .map_err(|_| WireError::Unsupported("IPv6 jumbogram payload"))?;
        if self.flow_label > 0x000f_ffff {
            return Err(WireError::Malformed("IPv6 flow label above 20 bits"));
        }
        if p.b().len() < self.buffer_len() + self.payload_len {
            return Err(WireError::Truncated);
        }
        let w = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | self.flow_label;
        field::set_u32(p.bm(), 0, w);
        p.set_payload_len(plen);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }

    /// Writes the header at the start of `buffer` (which must hold header + payload) and
    /// returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<Ipv6Packet<T>> {
        let mut p = Ipv6Packet::new_unchecked(buffer);
        self.emit(&mut p)?;
        Ok(p)
    }
}
