//! IPv4 packets (RFC 791): the checked view [`Ipv4Packet`] and [`Ipv4Repr`], with options
//! and fragmentation fields (DF, MF, offset).
//!
//! Invariant of a view built by `new_checked`: buffer ≥ 20 bytes, version 4, IHL ≥ 5 and
//! `header_len ≤ total_len ≤ buffer length`. Bytes past `total_len` (Ethernet padding) are
//! not part of `payload()`. Setters may break the length relations; the variable-range
//! getters then clamp rather than panic.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Result, WireError};
use crate::field;
use crate::options::OptionBytes;

/// A checked view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Length of the header without options.
    pub const MIN_HEADER_LEN: usize = 20;

    fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after checking version, IHL and total length against it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < Self::MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if p.version() != 4 {
            return Err(WireError::Malformed("IPv4 version is not 4"));
        }
        let hl = p.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(WireError::Malformed("IPv4 IHL below 5"));
        }
        let total = usize::from(p.total_len());
        if total < hl {
            return Err(WireError::Malformed(
                "IPv4 total length below header length",
            ));
        }
        if hl > len || total > len {
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

    /// Version (4).
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[0] & 0x0f) * 4
    }

    /// DSCP (6 bits).
    pub fn dscp(&self) -> u8 {
        self.b()[1] >> 2
    }

    /// ECN (2 bits).
    pub fn ecn(&self) -> u8 {
        self.b()[1] & 0x03
    }

    /// Total length (header + payload).
    pub fn total_len(&self) -> u16 {
        field::u16_at(self.b(), 2)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        field::u16_at(self.b(), 4)
    }

    /// The reserved ("evil") flag bit.
    pub fn reserved_flag(&self) -> bool {
        self.b()[6] & 0x80 != 0
    }

    /// Don't fragment.
    pub fn dont_frag(&self) -> bool {
        self.b()[6] & 0x40 != 0
    }

    /// More fragments.
    pub fn more_frags(&self) -> bool {
        self.b()[6] & 0x20 != 0
    }

    /// Fragment offset in bytes (the 13-bit field × 8).
    pub fn frag_offset(&self) -> u16 {
        (field::u16_at(self.b(), 6) & 0x1fff) << 3
    }

    /// True when MF is set or the offset is non-zero.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[8]
    }

    /// Protocol number (see [`crate::constants::ip_proto`]).
    pub fn protocol(&self) -> u8 {
        self.b()[9]
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.b(), 10)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(field::array::<4>(self.b(), 12))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(field::array::<4>(self.b(), 16))
    }

    /// The header (with options), clamped to the buffer.
    pub fn header(&self) -> &[u8] {
        &self.b()[field::clamp(0..self.header_len(), self.b().len())]
    }

    /// Option bytes (between byte 20 and the header length).
    pub fn options(&self) -> &[u8] {
        let b = self.b();
        &b[field::clamp(Self::MIN_HEADER_LEN..self.header_len(), b.len())]
    }

    /// The payload: bytes from the header length up to the total length.
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        &b[field::clamp(self.header_len()..usize::from(self.total_len()), b.len())]
    }

    /// True when the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify_ipv4_header(self.header())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets version (low 4 bits used).
    pub fn set_version(&mut self, v: u8) {
        let b = self.bm();
        b[0] = (b[0] & 0x0f) | (v << 4);
    }

    /// Sets the header length in bytes; `Err(Malformed)` unless a multiple of 4 in 20..=60,
    /// `Err(Truncated)` if longer than the buffer.
    pub fn set_header_len(&mut self, len: usize) -> Result<()> {
        if !(20..=60).contains(&len) || !len.is_multiple_of(4) {
            return Err(WireError::Malformed(
                "IPv4 header length must be 20..=60, multiple of 4",
            ));
        }
        if len > self.b().len() {
            return Err(WireError::Truncated);
        }
        let b = self.bm();
        b[0] = (b[0] & 0xf0) | (len / 4) as u8;
        Ok(())
    }

    /// Sets DSCP (low 6 bits used).
    pub fn set_dscp(&mut self, v: u8) {
        let b = self.bm();
        b[1] = (b[1] & 0x03) | (v << 2);
    }

    /// Sets ECN (low 2 bits used).
    pub fn set_ecn(&mut self, v: u8) {
        let b = self.bm();
        b[1] = (b[1] & 0xfc) | (v & 0x03);
    }

    /// Sets the total length field.
    pub fn set_total_len(&mut self, v: u16) {
        field::set_u16(self.bm(), 2, v);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        field::set_u16(self.bm(), 4, v);
    }

    fn set_flag(&mut self, mask: u8, on: bool) {
        let b = self.bm();
        b[6] = if on { b[6] | mask } else { b[6] & !mask };
    }

    /// Sets the reserved flag.
    pub fn set_reserved_flag(&mut self, on: bool) {
        self.set_flag(0x80, on);
    }

    /// Sets DF.
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag(0x40, on);
    }

    /// Sets MF.
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag(0x20, on);
    }

    /// Sets the fragment offset in bytes; `Err(Malformed)` unless a multiple of 8.
    pub fn set_frag_offset(&mut self, bytes: u16) -> Result<()> {
        if !bytes.is_multiple_of(8) {
            return Err(WireError::Malformed(
                "IPv4 fragment offset not a multiple of 8",
            ));
        }
        let v = (field::u16_at(self.b(), 6) & 0xe000) | (bytes >> 3);
        field::set_u16(self.bm(), 6, v);
        Ok(())
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[8] = v;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, v: u8) {
        self.bm()[9] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.bm(), 10, v);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.bm()[12..16].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.bm()[16..20].copy_from_slice(&a.octets());
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let r = field::clamp(Self::MIN_HEADER_LEN..self.header_len(), self.b().len());
        &mut self.bm()[r]
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let r = field::clamp(
            self.header_len()..usize::from(self.total_len()),
            self.b().len(),
        );
        &mut self.bm()[r]
    }

    /// Recomputes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        let c = checksum::ipv4_header_checksum(self.header());
        self.set_checksum(c);
    }
}

/// Checks that `opts` is a well-formed IPv4 option list (RFC 791 §3.1): EOL ends the list,
/// NOP is one byte, every other option has a length byte ≥ 2 that fits.
pub fn validate_options(opts: &[u8]) -> Result<()> {
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => return Ok(()),
            1 => i += 1,
            _ => {
                let len = usize::from(*opts.get(i + 1).ok_or(WireError::Truncated)?);
                if len < 2 {
                    return Err(WireError::Malformed("IPv4 option length below 2"));
                }
                if i + len > opts.len() {
                    return Err(WireError::Malformed("IPv4 option overruns header"));
                }
                i += len;
            }
        }
    }
    Ok(())
}

/// A parsed IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol number.
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (0..=63).
    pub dscp: u8,
    /// ECN (0..=3).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
    /// More fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8, at most 65528).
    pub frag_offset: u16,
    /// Options (emitted zero-padded to a multiple of 4).
    pub options: OptionBytes,
    /// Payload length (total length − header length).
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// Parses a checked packet. Validates the option list; does not verify the checksum and
    /// ignores the reserved flag.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self> {
        let opts = p.options();
        validate_options(opts)?;
        Ok(Ipv4Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            options: OptionBytes::from_slice(opts)?,
            payload_len: p.payload().len(),
        })
    }

    /// Header length in bytes (20 + padded options).
    pub fn buffer_len(&self) -> usize {
        Ipv4Packet::<&[u8]>::MIN_HEADER_LEN + self.options.padded_len()
    }

    /// Header plus payload length.
    pub fn total_len(&self) -> usize {
        self.buffer_len().saturating_add(self.payload_len)
    }

    fn check(&self) -> Result<()> {
        if self.dscp > 63 || self.ecn > 3 {
            return Err(WireError::Malformed("IPv4 DSCP/ECN out of range"));
        }
        if !self.frag_offset.is_multiple_of(8) {
            return Err(WireError::Malformed(
                "IPv4 fragment offset not a multiple of 8",
            ));
        }
        if self.total_len() > usize::from(u16::MAX) {
            return Err(WireError::Malformed("IPv4 total length above 65535"));
        }
        Ok(())
    }

    /// Writes the header (with checksum) into `p`. The payload is not touched.
    ///
    /// `Err(Truncated)` if the buffer cannot hold header + payload length;
    /// `Err(Malformed)` for out-of-range fields.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4Packet<T>) -> Result<()> {
        self.check()?;
        let hl = self.buffer_len();
        if p.b().len() < self.total_len() {
            return Err(WireError::Truncated);
        }
        let b = p.bm();
        b[0] = 0x40 | (hl / 4) as u8;
        b[1] = (self.dscp << 2) | self.ecn;
        field::set_u16(b, 2, self.total_len() as u16);
        field::set_u16(b, 4, self.ident);
        let flags = (u16::from(self.dont_frag) << 14) | (u16::from(self.more_frags) << 13);
        field::set_u16(b, 6, flags | (self.frag_offset >> 3));
        b[8] = self.ttl;
        b[9] = self.protocol;
        field::set_u16(b, 10, 0);
        b[12..16].copy_from_slice(&self.src_addr.octets());
        b[16..20].copy_from_slice(&self.dst_addr.octets());
        let opts = self.options.as_slice();
        b[20..20 + opts.len()].copy_from_slice(opts);
        b[20 + opts.len()..hl].fill(0);
        p.fill_checksum();
        Ok(())
    }

    /// Writes the header at the start of `buffer` (which must hold header + payload) and
    /// returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<Ipv4Packet<T>> {
        let mut p = Ipv4Packet::new_unchecked(buffer);
        self.emit(&mut p)?;
        Ok(p)
    }
}
