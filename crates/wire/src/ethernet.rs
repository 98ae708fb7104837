//! Ethernet II frames: [`EthernetAddress`], the checked view [`EthernetFrame`] and
//! [`EthernetRepr`].
//!
//! Invariant of a view: the buffer holds at least the 14-byte header. VLAN tags are handled
//! by [`crate::vlan`]; the ethertype here is whatever follows the source address (a TPID for
//! a tagged frame).

use core::fmt;
use core::str::FromStr;

use crate::error::{Result, WireError};
use crate::field;

/// A 48-bit Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: EthernetAddress = EthernetAddress([0; 6]);

    /// Copies the first six bytes of `data`; `Err(Truncated)` if shorter.
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        let b = data.get(..6).ok_or(WireError::Truncated)?;
        Ok(EthernetAddress(field::array(b, 0)))
    }

    /// The six octets.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True when the group bit (I/G) is set; includes broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True when neither multicast nor broadcast.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// True when the locally-administered bit (U/L) is set.
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for EthernetAddress {
    type Err = WireError;

    /// Parses `aa:bb:cc:dd:ee:ff` (also `-` as separator; one or two hex digits per octet).
    fn from_str(s: &str) -> Result<Self> {
        const BAD: WireError = WireError::Malformed("Ethernet address must be xx:xx:xx:xx:xx:xx");
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for o in out.iter_mut() {
            let p = parts.next().ok_or(BAD)?;
            if p.is_empty() || p.len() > 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(BAD);
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| BAD)?;
        }
        if parts.next().is_some() {
            return Err(BAD);
        }
        Ok(EthernetAddress(out))
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(b: [u8; 6]) -> Self {
        EthernetAddress(b)
    }
}

/// A checked view of an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Length of the Ethernet II header.
    pub const HEADER_LEN: usize = 14;

    /// Wraps `buffer`; `Err(Truncated)` if shorter than 14 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (always 14).
    pub fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// Destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress(field::array(self.buffer.as_ref(), 0))
    }

    /// Source address.
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress(field::array(self.buffer.as_ref(), 6))
    }

    /// The ethertype (or TPID) at bytes 12..14.
    pub fn ethertype(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 12)
    }

    /// Everything after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[0..6].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[6..12].copy_from_slice(&a.0);
    }

    /// Sets the ethertype.
    pub fn set_ethertype(&mut self, t: u16) {
        field::set_u16(self.buffer.as_mut(), 12, t);
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }
}

/// A parsed Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// Ethertype (or outer TPID).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes the header needs (14).
    pub const fn buffer_len(&self) -> usize {
        EthernetFrame::<&[u8]>::HEADER_LEN
    }

    /// Writes the header into `frame` (which already holds at least 14 bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) -> Result<()> {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
        Ok(())
    }

    /// Writes the header at the start of `buffer` and returns the view over it.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<EthernetFrame<T>> {
        let mut frame = EthernetFrame::new_checked(buffer)?;
        self.emit(&mut frame)?;
        Ok(frame)
    }
}
