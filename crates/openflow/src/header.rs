//! The 8-byte OpenFlow header and the protocol's version and message-type numbers.
//!
//! Every OpenFlow message starts with `version`, `type`, `length` (of the whole message,
//! header included, so ≥ 8) and `xid`. Message-type numbers are the same in every version up
//! to `FLOW_MOD` (14); above that OpenFlow 1.0 and 1.1+ differ ([`msg_type`]).

use crate::codec::Rd;
use crate::error::{Error, Result};

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// Wire version numbers.
pub mod version {
    /// OpenFlow 1.0.
    pub const OF10: u8 = 1;
    /// OpenFlow 1.1.
    pub const OF11: u8 = 2;
    /// OpenFlow 1.2.
    pub const OF12: u8 = 3;
    /// OpenFlow 1.3.
    pub const OF13: u8 = 4;
    /// OpenFlow 1.4.
    pub const OF14: u8 = 5;
    /// OpenFlow 1.5.
    pub const OF15: u8 = 6;
}

/// Message type numbers.
#[allow(missing_docs)]
pub mod msg_type {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    /// `OFPT_VENDOR` (1.0) / `OFPT_EXPERIMENTER` (1.1+).
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    /// OpenFlow 1.0 numbers above 14.
    pub mod of10 {
        pub const PORT_MOD: u8 = 15;
        pub const STATS_REQUEST: u8 = 16;
        pub const STATS_REPLY: u8 = 17;
        pub const BARRIER_REQUEST: u8 = 18;
        pub const BARRIER_REPLY: u8 = 19;
    }
    /// OpenFlow 1.1+ numbers above 14.
    pub mod of11 {
        pub const GROUP_MOD: u8 = 15;
        pub const PORT_MOD: u8 = 16;
        pub const TABLE_MOD: u8 = 17;
        pub const MULTIPART_REQUEST: u8 = 18;
        pub const MULTIPART_REPLY: u8 = 19;
        pub const BARRIER_REQUEST: u8 = 20;
        pub const BARRIER_REPLY: u8 = 21;
        pub const ROLE_REQUEST: u8 = 24;
        pub const ROLE_REPLY: u8 = 25;
        pub const GET_ASYNC_REQUEST: u8 = 26;
        pub const GET_ASYNC_REPLY: u8 = 27;
        pub const SET_ASYNC: u8 = 28;
    }
}

/// An OpenFlow header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Wire version (1 = OpenFlow 1.0 … 6 = OpenFlow 1.5).
    pub version: u8,
    /// Message type.
    pub msg_type: u8,
    /// Length of the whole message, header included.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// Reads a header from the first 8 bytes of `b`, checking only that `length` ≥ 8.
    pub fn parse(b: &[u8]) -> Result<Header> {
        let mut r = Rd::new(b, "OpenFlow header");
        let h = Header {
            version: r.u8()?,
            msg_type: r.u8()?,
            length: r.u16()?,
            xid: r.u32()?,
        };
        if usize::from(h.length) < HEADER_LEN {
            return Err(Error::BadLength {
                what: "OpenFlow header",
                len: usize::from(h.length),
            });
        }
        Ok(h)
    }

    /// The 8 wire bytes.
    pub fn to_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.version;
        b[1] = self.msg_type;
        b[2..4].copy_from_slice(&self.length.to_be_bytes());
        b[4..8].copy_from_slice(&self.xid.to_be_bytes());
        b
    }
}
