//! IPv6 extension headers: hop-by-hop (0), routing (43), fragment (44) and destination
//! options (60), plus a walker that skips them and reports the upper-layer protocol.
//!
//! Views: [`Ipv6ExtHeader`] (the generic `next header, hdr ext len, data` layout of
//! hop-by-hop, routing and destination options; invariant: buffer ≥ 8 bytes and ≥ the
//! header length) and [`Ipv6FragmentHeader`] (invariant: buffer ≥ 8 bytes).
//!
//! The walker ([`walk`], [`Ipv6ExtIter`]) checks every length before stepping, requires
//! hop-by-hop to come first (RFC 8200 §4.1), and stops after the fragment header of a
//! non-first fragment (what follows is not a header). Each header is ≥ 8 bytes, so the walk
//! ends after at most `len / 8` steps. Other protocols (AH, ESP, mobility) end the walk and
//! are reported as the final next header.

use crate::constants::ip_proto;
use crate::error::{Result, WireError};
use crate::field;

/// True for the extension headers this module walks: 0, 43, 44, 60.
pub const fn is_extension(next_header: u8) -> bool {
    matches!(
        next_header,
        ip_proto::HOPOPT | ip_proto::IPV6_ROUTE | ip_proto::IPV6_FRAG | ip_proto::IPV6_OPTS
    )
}

/// A checked view of a hop-by-hop, routing or destination-options header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Smallest header (hdr ext len 0).
    pub const MIN_LEN: usize = 8;

    fn new_unchecked(buffer: T) -> Self {
        Ipv6ExtHeader { buffer }
    }

    /// Wraps `buffer`; `Err(Truncated)` if shorter than 8 bytes or than the header length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        let len = h.buffer.as_ref().len();
        if len < Self::MIN_LEN || h.header_len() > len {
            return Err(WireError::Truncated);
        }
        Ok(h)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Header length in bytes: (hdr ext len + 1) × 8.
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 1) * 8
    }

    /// Bytes after the first two (options, or routing type / segments left / data).
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[field::clamp(2..self.header_len(), b.len())]
    }

    /// Routing type (meaningful for a routing header).
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }

    /// Segments left (meaningful for a routing header).
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }

    /// Bytes after this header.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[field::clamp(self.header_len()..b.len(), b.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Mutable data bytes.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let r = field::clamp(2..self.header_len(), self.buffer.as_ref().len());
        &mut self.buffer.as_mut()[r]
    }
}

/// A parsed hop-by-hop, routing or destination-options header (data kept raw).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6ExtRepr<'a> {
    /// Next header.
    pub next_header: u8,
    /// The bytes after next header and length: `data.len() + 2` is a multiple of 8.
    pub data: &'a [u8],
}

impl<'a> Ipv6ExtRepr<'a> {
    /// Parses a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &'a Ipv6ExtHeader<T>) -> Result<Self> {
        Ok(Ipv6ExtRepr {
            next_header: h.next_header(),
            data: h.data(),
        })
    }

    /// Header length: `data.len() + 2`.
    pub fn buffer_len(&self) -> usize {
        self.data.len() + 2
    }

    /// Writes the header; `Err(Malformed)` unless `data.len() + 2` is a multiple of 8 up to
    /// 2048, `Err(Truncated)` if the buffer is shorter.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Ipv6ExtHeader<T>) -> Result<()> {
        let len = self.buffer_len();
        if !len.is_multiple_of(8) || len > 2048 {
            return Err(WireError::Malformed(
                "IPv6 extension length not a multiple of 8",
            ));
        }
        let b = h.buffer.as_mut();
        if b.len() < len {
            return Err(WireError::Truncated);
        }
        b[0] = self.next_header;
        b[1] = (len / 8 - 1) as u8;
        b[2..len].copy_from_slice(self.data);
        Ok(())
    }

    /// Writes the header at the start of `buffer` and returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<Ipv6ExtHeader<T>> {
        let mut h = Ipv6ExtHeader::new_unchecked(buffer);
        self.emit(&mut h)?;
        Ok(h)
    }
}

/// A checked view of an IPv6 fragment header (8 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    /// Length of the fragment header.
    pub const LEN: usize = 8;

    /// Wraps `buffer`; `Err(Truncated)` if shorter than 8 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::LEN {
            return Err(WireError::Truncated);
        }
        Ok(Ipv6FragmentHeader { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Fragment offset in bytes (13-bit field × 8).
    pub fn frag_offset(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 2) & 0xfff8
    }

    /// More fragments.
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[3] & 1 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), 4)
    }

    /// Bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragmentHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Sets offset (bytes, a multiple of 8) and M flag; `Err(Malformed)` otherwise.
    pub fn set_frag(&mut self, offset: u16, more: bool) -> Result<()> {
        if !offset.is_multiple_of(8) {
            return Err(WireError::Malformed(
                "IPv6 fragment offset not a multiple of 8",
            ));
        }
        field::set_u16(self.buffer.as_mut(), 2, offset | u16::from(more));
        Ok(())
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), 4, v);
    }
}

/// A parsed IPv6 fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    /// Next header (of the fragmentable part).
    pub next_header: u8,
    /// Offset in bytes (a multiple of 8).
    pub frag_offset: u16,
    /// More fragments follow.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    /// Parses a checked header (the reserved bits are ignored).
    pub fn parse<T: AsRef<[u8]>>(h: &Ipv6FragmentHeader<T>) -> Result<Self> {
        Ok(Ipv6FragmentRepr {
            next_header: h.next_header(),
            frag_offset: h.frag_offset(),
            more_frags: h.more_frags(),
            ident: h.ident(),
        })
    }

    /// True for the first fragment (offset 0).
    pub fn is_first(&self) -> bool {
        self.frag_offset == 0
    }

    /// Header length (8).
    pub const fn buffer_len(&self) -> usize {
        Ipv6FragmentHeader::<&[u8]>::LEN
    }

    /// Writes the header; `Err(Malformed)` if the offset is not a multiple of 8.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Ipv6FragmentHeader<T>) -> Result<()> {
        h.set_frag(self.frag_offset, self.more_frags)?;
        h.set_next_header(self.next_header);
        h.buffer.as_mut()[1] = 0;
        h.set_ident(self.ident);
        Ok(())
    }

    /// Writes the header at the start of `buffer` and returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        buffer: T,
    ) -> Result<Ipv6FragmentHeader<T>> {
        let mut h = Ipv6FragmentHeader::new_checked(buffer)?;
        self.emit(&mut h)?;
        Ok(h)
    }
}

/// One extension header met by the walker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Ext<'a> {
    /// Which header this is (0, 43, 44 or 60).
    pub kind: u8,
    /// Its next-header field.
    pub next_header: u8,
    /// Its offset in the walked bytes.
    pub offset: usize,
    /// The whole header.
    pub bytes: &'a [u8],
    /// Set for a fragment header.
    pub fragment: Option<Ipv6FragmentRepr>,
}

/// Iterator over the extension headers of an IPv6 payload. Yields `Err` once and then
/// stops on a truncated or misplaced header.
#[derive(Debug, Clone)]
pub struct Ipv6ExtIter<'a> {
    data: &'a [u8],
    next_header: u8,
    offset: usize,
    count: usize,
    done: bool,
}

impl<'a> Ipv6ExtIter<'a> {
    /// Starts a walk over `data` (an IPv6 payload) whose first header is `next_header`.
    pub fn new(next_header: u8, data: &'a [u8]) -> Self {
        Ipv6ExtIter {
            data,
            next_header,
            offset: 0,
            count: 0,
            done: false,
        }
    }

    /// The next-header value reached so far (the upper layer once the iterator is done).
    pub fn next_header(&self) -> u8 {
        self.next_header
    }

    /// Offset of the first byte not yet walked.
    pub fn offset(&self) -> usize {
        self.offset
    }

    fn step(&mut self) -> Result<Ipv6Ext<'a>> {
        let kind = self.next_header;
        if kind == ip_proto::HOPOPT && self.count != 0 {
            return Err(WireError::Malformed("IPv6 hop-by-hop header not first"));
        }
        let rest = self.data.get(self.offset..).unwrap_or(&[]);
        let (len, next, fragment) = if kind == ip_proto::IPV6_FRAG {
            let h = Ipv6FragmentHeader::new_checked(rest)?;
            let f = Ipv6FragmentRepr::parse(&h)?;
            (Ipv6FragmentHeader::<&[u8]>::LEN, f.next_header, Some(f))
        } else {
            let h = Ipv6ExtHeader::new_checked(rest)?;
            (h.header_len(), h.next_header(), None)
        };
        let ext = Ipv6Ext {
            kind,
            next_header: next,
            offset: self.offset,
            bytes: &rest[..len],
            fragment,
        };
        self.offset += len;
        self.count += 1;
        self.next_header = next;
        if fragment.is_some_and(|f| !f.is_first()) {
            // A non-first fragment carries data, not headers.
            self.done = true;
        }
        Ok(ext)
    }
}

impl<'a> Iterator for Ipv6ExtIter<'a> {
    type Item = Result<Ipv6Ext<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || !is_extension(self.next_header) {
            return None;
        }
        let r = self.step();
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}

/// What the walk over the extension headers found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6ExtSummary {
    /// The upper-layer protocol (or the next header after a non-first fragment's header).
    pub final_next_header: u8,
    /// Offset of the upper-layer data in the walked bytes.
    pub payload_offset: usize,
    /// The fragment header, if one was met.
    pub fragment: Option<Ipv6FragmentRepr>,
    /// Number of extension headers skipped.
    pub ext_count: usize,
}

impl Ipv6ExtSummary {
    /// True when a fragment header with a non-zero offset was met: the upper-layer header
    /// is not in this packet.
    pub fn is_later_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| !f.is_first())
    }
}

/// Walks the extension headers of `data` (an IPv6 payload) starting at `next_header`.
pub fn walk(next_header: u8, data: &[u8]) -> Result<Ipv6ExtSummary> {
    let mut it = Ipv6ExtIter::new(next_header, data);
    let mut fragment = None;
    let mut ext_count = 0;
    for ext in &mut it {
        let ext = ext?;
        ext_count += 1;
        if ext.fragment.is_some() {
            if fragment.is_some() {
                return Err(WireError::Malformed("two IPv6 fragment headers"));
            }
            fragment = ext.fragment;
        }
    }
    Ok(Ipv6ExtSummary {
        final_next_header: it.next_header(),
        payload_offset: it.offset(),
        fragment,
        ext_count,
    })
}
