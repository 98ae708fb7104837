//! ARP packets (RFC 826). The view [`ArpPacket`] handles any hardware/protocol address
//! lengths; [`ArpRepr`] supports Ethernet/IPv4 only (others are `Unsupported`).
//!
//! Invariant of a view: the buffer holds the 8-byte fixed header and both address pairs
//! (`8 + 2 * (hlen + plen)` bytes).

use std::net::Ipv4Addr;

use crate::constants::{arp as arpc, ethertype};
use crate::error::{Result, WireError};
use crate::ethernet::EthernetAddress;
use crate::field;

/// A checked view of an ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 8;

    fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps `buffer`; `Err(Truncated)` unless it holds the fixed header and addresses.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < Self::FIXED_LEN {
            return Err(WireError::Truncated);
        }
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < p.packet_len() {
            return Err(WireError::Truncated);
        }
        Ok(p)
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 0)
    }

    /// Protocol type (an ethertype; 0x0800 = IPv4).
    pub fn protocol_type(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 2)
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[5]
    }

    /// Operation (1 request, 2 reply).
    pub fn operation(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 6)
    }

    /// Length of the packet implied by the address lengths.
    pub fn packet_len(&self) -> usize {
        Self::FIXED_LEN + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()))
    }

    fn slice(&self, start: usize, len: u8) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[field::clamp(start..start + usize::from(len), b.len())]
    }

    /// Sender hardware address bytes.
    pub fn sender_hardware_addr(&self) -> &[u8] {
        self.slice(8, self.hardware_len())
    }

    /// Sender protocol address bytes.
    pub fn sender_protocol_addr(&self) -> &[u8] {
        self.slice(8 + usize::from(self.hardware_len()), self.protocol_len())
    }

    /// Target hardware address bytes.
    pub fn target_hardware_addr(&self) -> &[u8] {
        let h = usize::from(self.hardware_len());
        let p = usize::from(self.protocol_len());
        self.slice(8 + h + p, self.hardware_len())
    }

    /// Target protocol address bytes.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let h = usize::from(self.hardware_len());
        let p = usize::from(self.protocol_len());
        self.slice(8 + 2 * h + p, self.protocol_len())
    }

    /// Bytes after the addresses (Ethernet padding, usually).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[field::clamp(self.packet_len()..b.len(), b.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 0, v);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 6, v);
    }

    /// Sets both address lengths; `Err(Truncated)` (nothing written) if the buffer would no
    /// longer hold the addresses.
    pub fn set_address_lens(&mut self, hlen: u8, plen: u8) -> Result<()> {
        let need = Self::FIXED_LEN + 2 * (usize::from(hlen) + usize::from(plen));
        if self.buffer.as_ref().len() < need {
            return Err(WireError::Truncated);
        }
        self.buffer.as_mut()[4] = hlen;
        self.buffer.as_mut()[5] = plen;
        Ok(())
    }

    fn set_slice(&mut self, start: usize, len: u8, v: &[u8]) -> Result<()> {
        if v.len() != usize::from(len) {
            return Err(WireError::Malformed("ARP address length mismatch"));
        }
        let b = self.buffer.as_mut();
        let r = field::clamp(start..start + v.len(), b.len());
        if r.len() != v.len() {
            return Err(WireError::Truncated);
        }
        b[r].copy_from_slice(v);
        Ok(())
    }

    /// Sets the sender hardware address; its length must equal `hardware_len()`.
    pub fn set_sender_hardware_addr(&mut self, v: &[u8]) -> Result<()> {
        self.set_slice(8, self.hardware_len(), v)
    }

    /// Sets the sender protocol address; its length must equal `protocol_len()`.
    pub fn set_sender_protocol_addr(&mut self, v: &[u8]) -> Result<()> {
        let h = usize::from(self.hardware_len());
        self.set_slice(8 + h, self.protocol_len(), v)
    }

    /// Sets the target hardware address.
    pub fn set_target_hardware_addr(&mut self, v: &[u8]) -> Result<()> {
        let h = usize::from(self.hardware_len());
        let p = usize::from(self.protocol_len());
        self.set_slice(8 + h + p, self.hardware_len(), v)
    }

    /// Sets the target protocol address.
    pub fn set_target_protocol_addr(&mut self, v: &[u8]) -> Result<()> {
        let h = usize::from(self.hardware_len());
        let p = usize::from(self.protocol_len());
        self.set_slice(8 + 2 * h + p, self.protocol_len(), v)
    }
}

/// A parsed Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation (see [`crate::constants::arp`]).
    pub operation: u16,
    /// Sender MAC.
    pub sender_hardware_addr: EthernetAddress,
    /// Sender IPv4 address.
    pub sender_protocol_addr: Ipv4Addr,
    /// Target MAC.
    pub target_hardware_addr: EthernetAddress,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Length of an Ethernet/IPv4 ARP packet.
    pub const LEN: usize = 28;

    /// Parses an Ethernet/IPv4 ARP packet; other kinds are `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Result<Self> {
        if p.hardware_type() != arpc::HTYPE_ETHERNET
            || p.protocol_type() != ethertype::IPV4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(WireError::Unsupported("ARP other than Ethernet/IPv4"));
        }
        let ip = |b: &[u8]| -> Result<Ipv4Addr> {
            let a: [u8; 4] = b.try_into().map_err(|_| WireError::Truncated)?;
            Ok(Ipv4Addr::from(a))
        };
        Ok(ArpRepr {
            operation: p.operation(),
            sender_hardware_addr: EthernetAddress::from_bytes(p.sender_hardware_addr())?,
            sender_protocol_addr: ip(p.sender_protocol_addr())?,
            target_hardware_addr: EthernetAddress::from_bytes(p.target_hardware_addr())?,
            target_protocol_addr: ip(p.target_protocol_addr())?,
        })
    }

    /// Bytes needed (28).
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Writes the packet into `p`; `Err(Truncated)` if its buffer is shorter than 28 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ArpPacket<T>) -> Result<()> {
        p.set_address_lens(6, 4)?;
        p.set_hardware_type(arpc::HTYPE_ETHERNET);
        p.set_protocol_type(ethertype::IPV4);
        p.set_operation(self.operation);
        p.set_sender_hardware_addr(&self.sender_hardware_addr.0)?;
        p.set_sender_protocol_addr(&self.sender_protocol_addr.octets())?;
        p.set_target_hardware_addr(&self.target_hardware_addr.0)?;
        p.set_target_protocol_addr(&self.target_protocol_addr.octets())?;
        Ok(())
    }

    /// Writes the packet at the start of `buffer` and returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<ArpPacket<T>> {
        if buffer.as_ref().len() < Self::LEN {
            return Err(WireError::Truncated);
        }
        let mut p = ArpPacket::new_unchecked(buffer);
        self.emit(&mut p)?;
        Ok(p)
    }
}
