//! ICMPv6 (RFC 4443) and neighbour discovery NS/NA (RFC 4861): the checked view
//! [`Icmpv6Packet`] and [`Icmpv6Repr`].
//!
//! Invariant of a view: the buffer holds the 8-byte header; for NS/NA/redirect messages
//! `new_checked` also requires the 24 bytes up to the end of the target address. The
//! message extends to the end of the buffer (pass the upper-layer payload). ND accessors
//! return `Result` so that a type changed through a setter cannot make them panic.
//! The checksum covers the IPv6 pseudo header.

use std::net::Ipv6Addr;

use crate::checksum::PseudoHeader;
use crate::constants::{icmpv6 as ty, ip_proto};
use crate::error::{Result, WireError};
use crate::ethernet::EthernetAddress;
use crate::field;
use crate::nd::{NdOption, NdOptionsIter};

/// A checked view of an ICMPv6 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// True for message types laid out as `type, code, checksum, 4 bytes, target address`.
fn has_target(msg_type: u8) -> bool {
    matches!(
        msg_type,
        ty::NEIGHBOR_SOLICIT | ty::NEIGHBOR_ADVERT | ty::REDIRECT
    )
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Header length.
    pub const HEADER_LEN: usize = 8;
    /// Length of an NS/NA message without options.
    pub const ND_LEN: usize = 24;

    /// Wraps `buffer`; `Err(Truncated)` if shorter than 8 bytes (24 for NS/NA/redirect).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < Self::HEADER_LEN || (has_target(b[0]) && b.len() < Self::ND_LEN) {
            return Err(WireError::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 2)
    }

    /// Bytes 4..8 as a big-endian word (echo id/seq, NA flags, MTU, pointer…).
    pub fn rest_of_header(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), 4)
    }

    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 4)
    }

    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 6)
    }

    /// NA router flag.
    pub fn router_flag(&self) -> bool {
        self.buffer.as_ref()[4] & 0x80 != 0
    }

    /// NA solicited flag.
    pub fn solicited_flag(&self) -> bool {
        self.buffer.as_ref()[4] & 0x40 != 0
    }

    /// NA override flag.
    pub fn override_flag(&self) -> bool {
        self.buffer.as_ref()[4] & 0x20 != 0
    }

    /// Bytes after the 8-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }

    /// Target address of an NS/NA/redirect (bytes 8..24); `Err(Truncated)` if absent.
    pub fn target_addr(&self) -> Result<Ipv6Addr> {
        let b = self
            .buffer
            .as_ref()
            .get(8..24)
            .ok_or(WireError::Truncated)?;
        Ok(Ipv6Addr::from(field::array::<16>(b, 0)))
    }

    /// ND option bytes of an NS/NA (after byte 24; empty when absent).
    pub fn nd_options(&self) -> &[u8] {
        self.buffer.as_ref().get(Self::ND_LEN..).unwrap_or(&[])
    }

    /// Walks the ND options.
    pub fn nd_options_iter(&self) -> NdOptionsIter<'_> {
        NdOptionsIter::new(self.nd_options())
    }

    /// True when the checksum verifies over the IPv6 pseudo header.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        PseudoHeader::V6 { src, dst }.verify(ip_proto::ICMPV6, self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Sets the code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 2, v);
    }

    /// Sets bytes 4..8.
    pub fn set_rest_of_header(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), 4, v);
    }

    /// Sets the target address; `Err(Truncated)` if the buffer is shorter than 24 bytes.
    pub fn set_target_addr(&mut self, a: Ipv6Addr) -> Result<()> {
        let b = self
            .buffer
            .as_mut()
            .get_mut(8..24)
            .ok_or(WireError::Truncated)?;
        b.copy_from_slice(&a.octets());
        Ok(())
    }

    /// Mutable bytes after the 8-byte header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }

    /// Recomputes and stores the checksum over the IPv6 pseudo header.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let c = PseudoHeader::V6 { src, dst }.checksum(ip_proto::ICMPV6, self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A parsed ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6Repr<'a> {
    /// Echo request (type 128, code 0).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply (type 129, code 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Neighbor solicitation (type 135, code 0). Options other than the source link-layer
    /// address are validated and dropped.
    NeighborSolicit {
        /// Target address.
        target_addr: Ipv6Addr,
        /// Source link-layer address option.
        source_lladdr: Option<EthernetAddress>,
    },
    /// Neighbor advertisement (type 136, code 0). Options other than the target link-layer
    /// address are validated and dropped.
    NeighborAdvert {
        /// Router flag.
        router: bool,
        /// Solicited flag.
        solicited: bool,
        /// Override flag.
        override_: bool,
        /// Target address.
        target_addr: Ipv6Addr,
        /// Target link-layer address option.
        target_lladdr: Option<EthernetAddress>,
    },
    /// Any other message, kept raw.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// Bytes 4..8.
        rest_of_header: u32,
        /// Bytes after the header.
        data: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses a checked message (the checksum is not verified). ND option lists are walked;
    /// a malformed one is an error.
    pub fn parse<T: AsRef<[u8]>>(p: &'a Icmpv6Packet<T>) -> Result<Self> {
        let lladdr = |want_source: bool| -> Result<Option<EthernetAddress>> {
            let mut found = None;
            for opt in p.nd_options_iter() {
                match (opt?, want_source) {
                    (NdOption::SourceLinkLayerAddr(a), true)
                    | (NdOption::TargetLinkLayerAddr(a), false) => found = found.or(Some(a)),
                    _ => {}
                }
            }
            Ok(found)
        };
        Ok(match (p.msg_type(), p.code()) {
            (ty::ECHO_REQUEST, 0) => Icmpv6Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data: p.payload(),
            },
            (ty::ECHO_REPLY, 0) => Icmpv6Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data: p.payload(),
            },
            (ty::NEIGHBOR_SOLICIT, 0) => Icmpv6Repr::NeighborSolicit {
                target_addr: p.target_addr()?,
                source_lladdr: lladdr(true)?,
            },
            (ty::NEIGHBOR_ADVERT, 0) => Icmpv6Repr::NeighborAdvert {
                router: p.router_flag(),
                solicited: p.solicited_flag(),
                override_: p.override_flag(),
                target_addr: p.target_addr()?,
                target_lladdr: lladdr(false)?,
            },
            (msg_type, code) => Icmpv6Repr::Other {
                msg_type,
                code,
                rest_of_header: p.rest_of_header(),
                data: p.payload(),
            },
        })
    }

    /// Message length.
    pub fn buffer_len(&self) -> usize {
        const H: usize = Icmpv6Packet::<&[u8]>::HEADER_LEN;
        const ND: usize = Icmpv6Packet::<&[u8]>::ND_LEN;
        match self {
            Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. }
            | Icmpv6Repr::Other { data, .. } => H + data.len(),
            Icmpv6Repr::NeighborSolicit {
                source_lladdr: l, ..
            }
            | Icmpv6Repr::NeighborAdvert {
                target_lladdr: l, ..
            } => ND + if l.is_some() { 8 } else { 0 },
        }
    }

    /// Writes the message with its checksum over the IPv6 pseudo header of `src`/`dst`.
    /// The buffer must be exactly [`Icmpv6Repr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Icmpv6Packet<T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<()> {
        field::exact_len(p.buffer.as_ref().len(), self.buffer_len())?;
        let echo = |ident: u16, seq: u16| (u32::from(ident) << 16) | u32::from(seq);
        match *self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => self.emit_raw(p, ty::ECHO_REQUEST, 0, echo(ident, seq_no), data),
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => self.emit_raw(p, ty::ECHO_REPLY, 0, echo(ident, seq_no), data),
            Icmpv6Repr::Other {
                msg_type,
                code,
                rest_of_header,
                data,
            } => self.emit_raw(p, msg_type, code, rest_of_header, data),
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                p.set_msg_type(ty::NEIGHBOR_SOLICIT);
                p.set_code(0);
                p.set_rest_of_header(0);
                p.set_target_addr(target_addr)?;
                if let Some(a) = source_lladdr {
                    let buf = p.buffer.as_mut().get_mut(24..).unwrap_or(&mut []);
                    NdOption::SourceLinkLayerAddr(a).emit(buf)?;
                }
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                target_lladdr,
            } => {
                p.set_msg_type(ty::NEIGHBOR_ADVERT);
                p.set_code(0);
                let flags = (u32::from(router) << 31)
                    | (u32::from(solicited) << 30)
                    | (u32::from(override_) << 29);
                p.set_rest_of_header(flags);
                p.set_target_addr(target_addr)?;
                if let Some(a) = target_lladdr {
                    let buf = p.buffer.as_mut().get_mut(24..).unwrap_or(&mut []);
                    NdOption::TargetLinkLayerAddr(a).emit(buf)?;
                }
            }
        }
        p.fill_checksum(src, dst);
        Ok(())
    }

    fn emit_raw<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Icmpv6Packet<T>,
        msg_type: u8,
        code: u8,
        rest: u32,
        data: &[u8],
    ) {
        p.set_msg_type(msg_type);
        p.set_code(code);
        p.set_rest_of_header(rest);
        // Lengths were checked by the caller (`exact_len`).
        p.payload_mut().copy_from_slice(data);
    }

    /// Writes the message into `buffer` (exactly [`Icmpv6Repr::buffer_len`] bytes) and
    /// returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        buffer: T,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<Icmpv6Packet<T>> {
        field::exact_len(buffer.as_ref().len(), self.buffer_len())?;
        let mut p = Icmpv6Packet { buffer };
        self.emit(&mut p, src, dst)?;
        Ok(p)
    }
}
