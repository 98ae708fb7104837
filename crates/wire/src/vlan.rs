//! 802.1Q / 802.1ad VLAN tags.
//!
//! [`VlanHeader`] views the four bytes that follow a TPID (TCI, then the inner ethertype),
//! the same split etherparse and the kernel use. [`L2Repr`] is the whole L2 header: Ethernet
//! plus up to two stacked tags (TPID 0x8100 or 0x88a8 at either position), with the final
//! ethertype. A third tag is reported as `Unsupported`.
//!
//! Invariant of a [`VlanHeader`] view: the buffer holds at least 4 bytes.

use crate::constants::ethertype;
use crate::error::{Result, WireError};
use crate::ethernet::{EthernetAddress, EthernetFrame};
use crate::field;

/// A checked view of one VLAN tag body: TCI (PCP 3 bits, DEI 1 bit, VID 12 bits) and the
/// encapsulated ethertype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// Length of a tag body (after the TPID).
    pub const HEADER_LEN: usize = 4;

    /// Wraps `buffer`; `Err(Truncated)` if shorter than 4 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(VlanHeader { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw 16-bit TCI.
    pub fn tci(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 0)
    }

    /// Priority code point (0..=7).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (formerly CFI).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (0..=4095).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The encapsulated ethertype (or the next TPID).
    pub fn ethertype(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 2)
    }

    /// Bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    /// Sets the raw TCI.
    pub fn set_tci(&mut self, tci: u16) {
        field::set_u16(self.buffer.as_mut(), 0, tci);
    }

    /// Sets the PCP (low 3 bits of `pcp` used).
    pub fn set_pcp(&mut self, pcp: u8) {
        self.set_tci((self.tci() & 0x1fff) | (u16::from(pcp & 7) << 13));
    }

    /// Sets the DEI bit.
    pub fn set_dei(&mut self, dei: bool) {
        self.set_tci((self.tci() & !0x1000) | if dei { 0x1000 } else { 0 });
    }

    /// Sets the VID (low 12 bits of `vid` used).
    pub fn set_vid(&mut self, vid: u16) {
        self.set_tci((self.tci() & 0xf000) | (vid & 0x0fff));
    }

    /// Sets the encapsulated ethertype.
    pub fn set_ethertype(&mut self, t: u16) {
        field::set_u16(self.buffer.as_mut(), 2, t);
    }

    /// Mutable bytes after the tag.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }
}

/// A parsed tag body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095).
    pub vid: u16,
    /// Encapsulated ethertype.
    pub ethertype: u16,
}

impl VlanRepr {
    /// Reads a checked tag.
    pub fn parse<T: AsRef<[u8]>>(h: &VlanHeader<T>) -> Result<Self> {
        Ok(VlanRepr {
            pcp: h.pcp(),
            dei: h.dei(),
            vid: h.vid(),
            ethertype: h.ethertype(),
        })
    }

    /// Bytes the tag body needs (4).
    pub const fn buffer_len(&self) -> usize {
        VlanHeader::<&[u8]>::HEADER_LEN
    }

    /// Writes the tag; `Err(Malformed)` if `pcp > 7` or `vid > 4095`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut VlanHeader<T>) -> Result<()> {
        let tci = VlanTag::tci_of(self.pcp, self.dei, self.vid)?;
        h.set_tci(tci);
        h.set_ethertype(self.ethertype);
        Ok(())
    }

    /// Writes the tag at the start of `buffer` and returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<VlanHeader<T>> {
        let mut h = VlanHeader::new_checked(buffer)?;
        self.emit(&mut h)?;
        Ok(h)
    }
}

/// One tag as it appears in a frame: its TPID and TCI fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub tpid: u16,
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095).
    pub vid: u16,
}

impl VlanTag {
    fn tci_of(pcp: u8, dei: bool, vid: u16) -> Result<u16> {
        if pcp > 7 {
            return Err(WireError::Malformed("VLAN PCP above 7"));
        }
        if vid > 0x0fff {
            return Err(WireError::Malformed("VLAN VID above 4095"));
        }
        Ok((u16::from(pcp) << 13) | if dei { 0x1000 } else { 0 } | vid)
    }

    /// The TCI of this tag; `Err(Malformed)` if a field is out of range.
    pub fn tci(&self) -> Result<u16> {
        Self::tci_of(self.pcp, self.dei, self.vid)
    }

    fn from_tci(tpid: u16, tci: u16) -> Self {
        VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
}

/// An Ethernet header with up to two VLAN tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2Repr {
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// Source address.
    pub src_addr: EthernetAddress,
    /// The first (outer) tag, if any.
    pub outer_vlan: Option<VlanTag>,
    /// The second (inner) tag; only with an outer tag.
    pub inner_vlan: Option<VlanTag>,
    /// The ethertype after all tags.
    pub ethertype: u16,
}

impl L2Repr {
    /// Most tags handled.
    pub const MAX_TAGS: usize = 2;

    /// Parses the Ethernet header and any stacked tags of `frame`.
    ///
    /// `Err(Truncated)` if a tag is cut short, `Err(Unsupported)` on a third tag.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        let mut repr = L2Repr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            outer_vlan: None,
            inner_vlan: None,
            ethertype: frame.ethertype(),
        };
        let mut rest = frame.payload();
        for slot in 0..=Self::MAX_TAGS {
            if !ethertype::is_vlan_tpid(repr.ethertype) {
                break;
            }
            if slot == Self::MAX_TAGS {
                return Err(WireError::Unsupported("more than two VLAN tags"));
            }
            let h = VlanHeader::new_checked(rest)?;
            let tag = VlanTag::from_tci(repr.ethertype, h.tci());
            if slot == 0 {
                repr.outer_vlan = Some(tag);
            } else {
                repr.inner_vlan = Some(tag);
            }
            repr.ethertype = h.ethertype();
            rest = rest.get(VlanHeader::<&[u8]>::HEADER_LEN..).unwrap_or(&[]);
        }
        Ok(repr)
    }

    /// Parses the L2 header at the start of `frame` bytes; returns it with the offset of
    /// the L3 payload.
    pub fn parse_bytes(frame: &[u8]) -> Result<(Self, usize)> {
        let repr = Self::parse(&EthernetFrame::new_checked(frame)?)?;
        let len = repr.buffer_len();
        Ok((repr, len))
    }

    /// Number of tags (0, 1 or 2).
    pub fn tag_count(&self) -> usize {
        usize::from(self.outer_vlan.is_some()) + usize::from(self.inner_vlan.is_some())
    }

    /// Header length: 14 + 4 per tag.
    pub fn buffer_len(&self) -> usize {
        EthernetFrame::<&[u8]>::HEADER_LEN + VlanHeader::<&[u8]>::HEADER_LEN * self.tag_count()
    }

    /// Writes the header and tags into `frame`.
    ///
    /// `Err(Truncated)` if the frame is shorter than [`L2Repr::buffer_len`];
    /// `Err(Malformed)` for an inner tag without an outer one, or out-of-range TCI fields.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) -> Result<()> {
        let tags: &[VlanTag] = match (&self.outer_vlan, &self.inner_vlan) {
            (None, None) => &[],
            (Some(o), None) => core::slice::from_ref(o),
            (Some(o), Some(i)) => &[*o, *i],
            (None, Some(_)) => return Err(WireError::Malformed("inner VLAN tag without outer")),
        };
        if frame.payload().len() < VlanHeader::<&[u8]>::HEADER_LEN * tags.len() {
            return Err(WireError::Truncated);
        }
        let mut tcis = [0u16; 2];
        for (tci, tag) in tcis.iter_mut().zip(tags) {
            *tci = tag.tci()?;
        }
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(tags.first().map_or(self.ethertype, |t| t.tpid));
        for (i, tci) in tcis.iter().take(tags.len()).enumerate() {
            let next = tags.get(i + 1).map_or(self.ethertype, |t| t.tpid);
            let body = &mut frame.payload_mut()[4 * i..4 * i + 4];
            field::set_u16(body, 0, *tci);
            field::set_u16(body, 2, next);
        }
        Ok(())
    }

    /// Writes the header at the start of `buffer` and returns the frame view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<EthernetFrame<T>> {
        let mut frame = EthernetFrame::new_checked(buffer)?;
        self.emit(&mut frame)?;
        Ok(frame)
    }
}
