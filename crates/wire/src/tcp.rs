//! TCP segments (RFC 9293): the checked view [`TcpPacket`], flags ([`TcpFlags`], including
//! NS/CWR/ECE), options ([`TcpOption`], [`TcpOptionsIter`]) and [`TcpRepr`].
//!
//! Invariant of a view built by `new_checked`: buffer ≥ 20 bytes, data offset ≥ 5 and the
//! header length ≤ buffer length. The segment extends to the end of the buffer (pass the IP
//! payload). The options walk checks every length byte before stepping, so it ends on any
//! input. The checksum covers the IPv4 or IPv6 pseudo header ([`PseudoHeader`]).

use core::fmt;

use crate::checksum::PseudoHeader;
use crate::constants::{ip_proto, tcp_flags as tf};
use crate::error::{Result, WireError};
use crate::field;
use crate::options::OptionBytes;

/// The nine TCP flag bits (FIN = bit 0 … NS = bit 8), see [`crate::constants::tcp_flags`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// FIN.
    pub const FIN: TcpFlags = TcpFlags(tf::FIN);
    /// SYN.
    pub const SYN: TcpFlags = TcpFlags(tf::SYN);
    /// RST.
    pub const RST: TcpFlags = TcpFlags(tf::RST);
    /// PSH.
    pub const PSH: TcpFlags = TcpFlags(tf::PSH);
    /// ACK.
    pub const ACK: TcpFlags = TcpFlags(tf::ACK);
    /// URG.
    pub const URG: TcpFlags = TcpFlags(tf::URG);
    /// ECE.
    pub const ECE: TcpFlags = TcpFlags(tf::ECE);
    /// CWR.
    pub const CWR: TcpFlags = TcpFlags(tf::CWR);
    /// NS.
    pub const NS: TcpFlags = TcpFlags(tf::NS);

    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl fmt::Debug for TcpFlags {
    /// Prints the set flags like `SYN|ACK` (`(none)` for none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 9] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR", "NS"];
        let mut first = true;
        for (i, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("(none)")?;
        }
        if self.0 & !tf::ALL != 0 {
            write!(f, "|{:#x}", self.0 & !tf::ALL)?;
        }
        Ok(())
    }
}

/// A checked view of a TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Header length without options.
    pub const MIN_HEADER_LEN: usize = 20;

    fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps `buffer` after checking the data offset against it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < Self::MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let hl = p.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(WireError::Malformed("TCP data offset below 5"));
        }
        if hl > len {
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

    /// Source port.
    pub fn src_port(&self) -> u16 {
        field::u16_at(self.b(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        field::u16_at(self.b(), 2)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        field::u32_at(self.b(), 4)
    }

    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        field::u32_at(self.b(), 8)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[12] >> 4) * 4
    }

    /// The nine flag bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(field::u16_at(self.b(), 12) & tf::ALL)
    }

    /// The three reserved bits between data offset and NS.
    pub fn reserved_bits(&self) -> u8 {
        (self.b()[12] >> 1) & 0x07
    }

    /// Window.
    pub fn window_len(&self) -> u16 {
        field::u16_at(self.b(), 14)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.b(), 16)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        field::u16_at(self.b(), 18)
    }

    /// Option bytes (20 up to the header length).
    pub fn options(&self) -> &[u8] {
        let b = self.b();
        &b[field::clamp(Self::MIN_HEADER_LEN..self.header_len(), b.len())]
    }

    /// Walks the options.
    pub fn options_iter(&self) -> TcpOptionsIter<'_> {
        TcpOptionsIter::new(self.options())
    }

    /// Payload: everything after the header.
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        &b[field::clamp(self.header_len()..b.len(), b.len())]
    }

    /// True when the checksum verifies over `pseudo`.
    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> bool {
        pseudo.verify(ip_proto::TCP, self.b())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        field::set_u16(self.bm(), 0, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        field::set_u16(self.bm(), 2, v);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        field::set_u32(self.bm(), 4, v);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        field::set_u32(self.bm(), 8, v);
    }

    /// Sets the header length in bytes; `Err(Malformed)` unless a multiple of 4 in 20..=60,
    /// `Err(Truncated)` if longer than the buffer.
    pub fn set_header_len(&mut self, len: usize) -> Result<()> {
        if !(20..=60).contains(&len) || !len.is_multiple_of(4) {
            return Err(WireError::Malformed(
                "TCP header length must be 20..=60, multiple of 4",
            ));
        }
        if len > self.b().len() {
            return Err(WireError::Truncated);
        }
        let b = self.bm();
        b[12] = (b[12] & 0x0f) | (((len / 4) as u8) << 4);
        Ok(())
    }

    /// Sets the nine flag bits (higher bits of `flags` ignored; reserved bits kept).
    pub fn set_flags(&mut self, flags: TcpFlags) {
        let w = (field::u16_at(self.b(), 12) & !tf::ALL) | (flags.0 & tf::ALL);
        field::set_u16(self.bm(), 12, w);
    }

    /// Sets the window.
    pub fn set_window_len(&mut self, v: u16) {
        field::set_u16(self.bm(), 14, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.bm(), 16, v);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, v: u16) {
        field::set_u16(self.bm(), 18, v);
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let r = field::clamp(Self::MIN_HEADER_LEN..self.header_len(), self.b().len());
        &mut self.bm()[r]
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.b().len();
        let r = field::clamp(self.header_len()..len, len);
        &mut self.bm()[r]
    }

    /// Recomputes and stores the checksum over `pseudo` and the whole buffer.
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        self.set_checksum(0);
        let c = pseudo.checksum(ip_proto::TCP, self.b());
        self.set_checksum(c);
    }
}

/// Option kinds.
pub mod option_kind {
    /// End of option list.
    pub const END: u8 = 0;
    /// No operation.
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// End of option list (the rest is padding).
    EndOfList,
    /// No operation.
    NoOperation,
    /// Maximum segment size.
    MaxSegmentSize(u16),
    /// Window scale shift.
    WindowScale(u8),
    /// SACK permitted.
    SackPermitted,
    /// SACK blocks, raw: 1 to 4 pairs of (left, right) big-endian u32 edges.
    Sack(&'a [u8]),
    /// Timestamps.
    Timestamps {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other option: kind and the bytes after kind and length.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Encoded length.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(b) => 2 + b.len(),
            TcpOption::Timestamps { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Writes the option at the start of `buf`; returns its length.
    /// `Err(Truncated)` if `buf` is too short, `Err(Malformed)` for a length above 40 or SACK
    /// data that is not 8..=32 bytes in steps of 8.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if len > OptionBytes::MAX_LEN {
            return Err(WireError::Malformed("TCP option longer than 40 bytes"));
        }
        if let TcpOption::Sack(b) = self
            && (b.is_empty() || b.len() > 32 || !b.len().is_multiple_of(8))
        {
            return Err(WireError::Malformed("TCP SACK option needs 1 to 4 blocks"));
        }
        let out = buf.get_mut(..len).ok_or(WireError::Truncated)?;
        if len >= 2 {
            out[1] = len as u8;
        }
        match *self {
            TcpOption::EndOfList => out[0] = option_kind::END,
            TcpOption::NoOperation => out[0] = option_kind::NOP,
            TcpOption::MaxSegmentSize(v) => {
                out[0] = option_kind::MSS;
                field::set_u16(out, 2, v);
            }
            TcpOption::WindowScale(v) => {
                out[0] = option_kind::WINDOW_SCALE;
                out[2] = v;
            }
            TcpOption::SackPermitted => out[0] = option_kind::SACK_PERMITTED,
            TcpOption::Sack(b) => {
                out[0] = option_kind::SACK;
                out[2..].copy_from_slice(b);
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                out[0] = option_kind::TIMESTAMPS;
                field::set_u32(out, 2, tsval);
                field::set_u32(out, 6, tsecr);
            }
            TcpOption::Unknown { kind, data } => {
                out[0] = kind;
                out[2..].copy_from_slice(data);
            }
        }
        Ok(len)
    }
}

/// Iterator over TCP option bytes. After `EndOfList` it stops; on a bad length it yields
/// one `Err` and stops.
#[derive(Debug, Clone)]
pub struct TcpOptionsIter<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptionsIter<'a> {
    /// Walks `data` (the option bytes of a header).
    pub fn new(data: &'a [u8]) -> Self {
        TcpOptionsIter { data }
    }

    fn fail(&mut self, e: WireError) -> Option<Result<TcpOption<'a>>> {
        self.data = &[];
        Some(Err(e))
    }
}

impl<'a> Iterator for TcpOptionsIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let data = self.data;
        let (&kind, rest) = data.split_first()?;
        match kind {
            option_kind::END => {
                self.data = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            option_kind::NOP => {
                self.data = rest;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some(&len) = rest.first() else {
            return self.fail(WireError::Truncated);
        };
        let len = usize::from(len);
        if len < 2 {
            return self.fail(WireError::Malformed("TCP option length below 2"));
        }
        let Some(opt) = data.get(..len) else {
            return self.fail(WireError::Malformed("TCP option overruns header"));
        };
        let body = &opt[2..];
        let parsed = match (kind, len) {
            (option_kind::MSS, 4) => TcpOption::MaxSegmentSize(field::u16_at(body, 0)),
            (option_kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(body[0]),
            (option_kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (option_kind::SACK, 10 | 18 | 26 | 34) => TcpOption::Sack(body),
            (option_kind::TIMESTAMPS, 10) => TcpOption::Timestamps {
                tsval: field::u32_at(body, 0),
                tsecr: field::u32_at(body, 4),
            },
            (
                option_kind::MSS
                | option_kind::WINDOW_SCALE
                | option_kind::SACK_PERMITTED
                | option_kind::SACK
                | option_kind::TIMESTAMPS,
                _,
            ) => return self.fail(WireError::Malformed("TCP option with wrong length")),
            _ => TcpOption::Unknown { kind, data: body },
        };
        self.data = &data[len..];
        Some(Ok(parsed))
    }
}

/// A parsed TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number (meaningful with ACK).
    pub ack_number: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Window.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Raw option bytes (validated; emitted zero-padded to a multiple of 4). Walk them with
    /// [`TcpOptionsIter`]; build them with [`TcpOption::emit`].
    pub options: OptionBytes,
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> TcpRepr<'a> {
    /// Parses a checked segment: walks the options (a malformed option is an error); does not
    /// verify the checksum; ignores the reserved bits.
    pub fn parse<T: AsRef<[u8]>>(p: &'a TcpPacket<T>) -> Result<Self> {
        for opt in p.options_iter() {
            opt?;
        }
        Ok(TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            flags: p.flags(),
            window_len: p.window_len(),
            urgent_at: p.urgent_at(),
            options: OptionBytes::from_slice(p.options())?,
            payload: p.payload(),
        })
    }

    /// Header length (20 + padded options).
    pub fn header_len(&self) -> usize {
        TcpPacket::<&[u8]>::MIN_HEADER_LEN + self.options.padded_len()
    }

    /// Segment length: header + payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Writes the segment (header, options, payload, checksum over `pseudo`). The buffer
    /// must be exactly [`TcpRepr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut TcpPacket<T>,
        pseudo: &PseudoHeader,
    ) -> Result<()> {
        if self.flags.0 & !tf::ALL != 0 {
            return Err(WireError::Malformed(
                "TCP flags above the nine defined bits",
            ));
        }
        field::exact_len(p.b().len(), self.buffer_len())?;
        let hl = self.header_len();
        let b = p.bm();
        field::set_u16(b, 0, self.src_port);
        field::set_u16(b, 2, self.dst_port);
        field::set_u32(b, 4, self.seq_number);
        field::set_u32(b, 8, self.ack_number);
        field::set_u16(b, 12, ((hl as u16 / 4) << 12) | self.flags.0);
        field::set_u16(b, 14, self.window_len);
        field::set_u16(b, 16, 0);
        field::set_u16(b, 18, self.urgent_at);
        let opts = self.options.as_slice();
        b[20..20 + opts.len()].copy_from_slice(opts);
        b[20 + opts.len()..hl].fill(0);
        b[hl..].copy_from_slice(self.payload);
        p.fill_checksum(pseudo);
        Ok(())
    }

    /// Writes the segment into `buffer` (exactly [`TcpRepr::buffer_len`] bytes) and returns
    /// the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        buffer: T,
        pseudo: &PseudoHeader,
    ) -> Result<TcpPacket<T>> {
        let mut p = TcpPacket::new_unchecked(buffer);
        self.emit(&mut p, pseudo)?;
        Ok(p)
    }
}
