//! ICMPv4 (RFC 792): the checked view [`Icmpv4Packet`] and [`Icmpv4Repr`].
//!
//! Invariant of a view: the buffer holds the 8-byte header (type, code, checksum, and the
//! 4-byte "rest of header"). The message extends to the end of the buffer (ICMP has no
//! length field; pass the IPv4 payload).

use crate::checksum;
use crate::constants::icmpv4 as ty;
use crate::error::{Result, WireError};
use crate::field;

/// A checked view of an ICMPv4 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Header length.
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer`; `Err(Truncated)` if shorter than 8 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Icmpv4Packet { buffer })
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

    /// The 4 bytes after the checksum, as a big-endian word.
    pub fn rest_of_header(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), 4)
    }

    /// Echo identifier (bytes 4..6).
    pub fn echo_ident(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 4)
    }

    /// Echo sequence number (bytes 6..8).
    pub fn echo_seq_no(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 6)
    }

    /// Bytes after the 8-byte header (echo data, or the offending datagram of an error).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }

    /// True when the checksum over the whole message verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
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

    /// Sets the rest of header.
    pub fn set_rest_of_header(&mut self, v: u32) {
        field::set_u32(self.buffer.as_mut(), 4, v);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 4, v);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        field::set_u16(self.buffer.as_mut(), 6, v);
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }

    /// Recomputes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A parsed ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr<'a> {
    /// Echo request (type 8, code 0).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply (type 0, code 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Any other message, kept raw (destination unreachable, time exceeded, …).
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

impl<'a> Icmpv4Repr<'a> {
    /// Parses a checked message (the checksum is not verified).
    pub fn parse<T: AsRef<[u8]>>(p: &'a Icmpv4Packet<T>) -> Result<Self> {
        Ok(match (p.msg_type(), p.code()) {
            (ty::ECHO_REQUEST, 0) => Icmpv4Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data: p.payload(),
            },
            (ty::ECHO_REPLY, 0) => Icmpv4Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data: p.payload(),
            },
            (msg_type, code) => Icmpv4Repr::Other {
                msg_type,
                code,
                rest_of_header: p.rest_of_header(),
                data: p.payload(),
            },
        })
    }

    fn parts(&self) -> (u8, u8, u32, &'a [u8]) {
        match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => (
                ty::ECHO_REQUEST,
                0,
                (u32::from(ident) << 16) | u32::from(seq_no),
                data,
            ),
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => (
                ty::ECHO_REPLY,
                0,
                (u32::from(ident) << 16) | u32::from(seq_no),
                data,
            ),
            Icmpv4Repr::Other {
                msg_type,
                code,
                rest_of_header,
                data,
            } => (msg_type, code, rest_of_header, data),
        }
    }

    /// Message length: 8 + data.
    pub fn buffer_len(&self) -> usize {
        Icmpv4Packet::<&[u8]>::HEADER_LEN + self.parts().3.len()
    }

    /// Writes the message with its checksum. The buffer must be exactly
    /// [`Icmpv4Repr::buffer_len`] bytes (`Err(Truncated)` if shorter, `Err(Malformed)` if
    /// longer: the checksum covers the whole buffer).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Icmpv4Packet<T>) -> Result<()> {
        let (msg_type, code, rest, data) = self.parts();
        field::exact_len(p.buffer.as_ref().len(), self.buffer_len())?;
        p.set_msg_type(msg_type);
        p.set_code(code);
        p.set_rest_of_header(rest);
        p.payload_mut().copy_from_slice(data);
        p.fill_checksum();
        Ok(())
    }

    /// Writes the message into `buffer` (exactly [`Icmpv4Repr::buffer_len`] bytes) and
    /// returns the view.
    pub fn emit_into<T: AsRef<[u8]> + AsMut<[u8]>>(&self, buffer: T) -> Result<Icmpv4Packet<T>> {
        let mut p = Icmpv4Packet::new_checked(buffer)?;
        self.emit(&mut p)?;
        Ok(p)
    }
}
