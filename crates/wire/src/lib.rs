//! `wire`: the validated, general packet wire layer of flowswitch.
//!
//! The design follows smoltcp's two-level `wire` layer:
//!
//! 1. A **checked view** `Foo<T: AsRef<[u8]>>` wraps a byte buffer. It is built only through
//!    `Foo::new_checked(buffer)`, which validates the buffer length and every header length
//!    field, so the fixed-offset getters that follow can read without further checks. Setters
//!    exist when `T: AsMut<[u8]>`. `payload()` returns the bytes after the header.
//! 2. A **validated representation** `FooRepr` is a plain value with `parse(&view)`,
//!    `buffer_len()` and `emit(&self, &mut view)`. `parse → emit → parse` yields an equal
//!    representation. `FooRepr::emit_into(buffer)` builds a fresh view over a blank buffer.
//!
//! Views and reprs never allocate. Checksums are *not* verified by `parse`; each view with a
//! checksum offers `verify_checksum` and `fill_checksum`, and `emit` always writes a correct
//! checksum.
//!
//! # Panic contract
//!
//! **No function in this crate panics on any input bytes.** Checked constructors
//! (`new_checked`, `parse`, `FromStr`) return `Err(WireError)` on short, truncated or malformed
//! input. The unchecked constructors are private: the fixed-offset (unchecked) accessors are
//! only reachable after `new_checked` (or after `emit_into`, which checks the buffer length
//! itself). Setters cannot shrink a buffer, and every accessor of a variable-length region
//! (options, payload) clamps its range to the buffer, so no sequence of setter calls can make
//! a later getter panic either. `emit` returns `Err` instead of writing out of bounds.
//!
//! The hot per-packet parse lives in the `flow` crate; this crate is the general layer used by
//! actions, builders, generators and tests.
#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod constants;
pub mod error;
pub mod ethernet;
mod field;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod nd;
pub mod options;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use arp::{ArpPacket, ArpRepr};
pub use checksum::PseudoHeader;
pub use error::{Result, WireError};
pub use ethernet::{EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ipv6ext::{
    Ipv6Ext, Ipv6ExtHeader, Ipv6ExtIter, Ipv6ExtRepr, Ipv6ExtSummary, Ipv6FragmentHeader,
    Ipv6FragmentRepr,
};
pub use nd::{NdOption, NdOptionsIter};
pub use options::OptionBytes;
pub use sctp::{SctpPacket, SctpRepr};
pub use tcp::{TcpFlags, TcpOption, TcpOptionsIter, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{L2Repr, VlanHeader, VlanRepr, VlanTag};
