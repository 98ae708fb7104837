//! HELLO: its elements ([`HelloElem`], the version bitmap of OpenFlow 1.3.1+), building the
//! HELLO OVS sends ([`hello`]) and version negotiation ([`negotiate`]): the highest version
//! both sides offer, where a HELLO without a bitmap offers every version up to its header's.

use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid};
use crate::header::version;
use crate::msg::{Body, Msg};

/// One element of a HELLO.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HelloElem {
    /// `OFPHET_VERSIONBITMAP`: bit `v` of word `v / 32` set for each supported version.
    VersionBitmap(Vec<u32>),
    /// Another element type, raw.
    Unknown {
        /// Element type.
        typ: u16,
        /// Element data (without header and padding).
        data: Vec<u8>,
    },
}

pub(crate) fn decode_hello(body: &[u8]) -> Result<Vec<HelloElem>> {
    let mut r = Rd::new(body, "hello element");
    let mut out = Vec::new();
    while !r.is_empty() {
        let (typ, mut d) = r.prop("hello element")?;
        if typ == 1 {
            if !d.remaining().is_multiple_of(4) {
                return Err(invalid("version bitmap length"));
            }
            let mut words = Vec::with_capacity(d.remaining() / 4);
            while !d.is_empty() {
                words.push(d.u32()?);
            }
            out.push(HelloElem::VersionBitmap(words));
        } else {
            out.push(HelloElem::Unknown {
                typ,
                data: d.rest().to_vec(),
            });
        }
    }
    Ok(out)
}

pub(crate) fn encode_hello(w: &mut Wr, elems: &[HelloElem]) -> Result<()> {
    for e in elems {
        let start = w.len();
        match e {
            HelloElem::VersionBitmap(words) => {
                w.u16(1);
                w.u16(0);
                for x in words {
                    w.u32(*x);
                }
            }
            HelloElem::Unknown { typ, data } => {
                w.u16(*typ);
                w.u16(0);
                w.bytes(data);
            }
        }
        w.patch_len(start + 2, start, "hello element")?;
        w.pad8_from(start);
    }
    Ok(())
}

/// A HELLO announcing every version in `versions` (wire numbers), as OVS sends it: no
/// element when only OpenFlow 1.0 is offered, else a version bitmap.
pub fn hello(versions: &[u8], xid: u32) -> Msg {
    let max = versions.iter().copied().max().unwrap_or(version::OF10);
    let bitmap: u32 = versions
        .iter()
        .filter(|v| **v < 32)
        .fold(0, |a, v| a | 1 << v);
    let elems = if max == version::OF10 {
        Vec::new()
    } else {
        vec![HelloElem::VersionBitmap(vec![bitmap])]
    };
    Msg::new(max, xid, Body::Hello(elems))
}

/// The version two peers speak (OpenFlow 1.3.1 §6.3.1): the highest version both offer,
/// `None` when they share none. `ours` are wire numbers.
pub fn negotiate(ours: &[u8], their_hello: &Msg) -> Option<u8> {
    let theirs = hello_versions(their_hello);
    ours.iter().copied().filter(|v| theirs.contains(v)).max()
}

/// The versions a HELLO offers: its bitmap, or every version up to the header's.
pub fn hello_versions(m: &Msg) -> Vec<u8> {
    if let Body::Hello(elems) = &m.body {
        for e in elems {
            if let HelloElem::VersionBitmap(words) = e {
                let mut v = Vec::new();
                for (i, w) in words.iter().enumerate() {
                    for b in 0..32 {
                        if w & (1 << b) != 0
                            && let Ok(x) = u8::try_from(i * 32 + b)
                        {
                            v.push(x);
                        }
                    }
                }
                return v;
            }
        }
    }
    (version::OF10..=m.version).collect()
}
