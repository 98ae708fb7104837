//! Bounds-checked big-endian reading ([`Rd`]) and writing ([`Wr`]) of wire structures.
//!
//! [`Rd`] never indexes past its slice: every read checks the remaining length first and
//! returns [`Error::Truncated`] naming the structure being read. [`Wr`] appends to a `Vec`,
//! and can patch a 16-bit length written earlier ([`Wr::patch_u16`]) once the body is known.

use crate::error::{Error, Result};

/// A cursor over a byte slice.
#[derive(Debug, Clone)]
pub(crate) struct Rd<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Rd<'a> {
    /// A reader over `buf`; `what` names it in errors.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Rd<'a> {
        Rd { buf, pos: 0, what }
    }

    /// Bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether nothing is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Takes the next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                what: self.what,
                need: n,
                have: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Takes the rest.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// A sub-reader over the next `n` bytes (consumed here).
    pub(crate) fn sub(&mut self, n: usize, what: &'static str) -> Result<Rd<'a>> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                what,
                need: n,
                have: self.remaining(),
            });
        }
        Ok(Rd::new(self.bytes(n)?, what))
    }

    /// One OpenFlow property (`ofp_prop_header`: type, length counting the 4-byte header,
    /// body, zero padding to 8 bytes, which may be missing at the very end): its type and a
    /// reader over its body. A length below 4 is a `BadLength` error named `what`.
    pub(crate) fn prop(&mut self, what: &'static str) -> Result<(u16, Rd<'a>)> {
        let typ = self.u16()?;
        let len = usize::from(self.u16()?);
        if len < 4 {
            return Err(Error::BadLength { what, len });
        }
        let body = self.sub(len - 4, what)?;
        self.skip((len.next_multiple_of(8) - len).min(self.remaining()))?;
        Ok((typ, body))
    }

    /// Skips `n` bytes.
    pub(crate) fn skip(&mut self, n: usize) -> Result<()> {
        self.bytes(n).map(drop)
    }

    /// Fixed-size array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    /// A 48-bit Ethernet address as the low bits of a `u64`.
    pub(crate) fn mac(&mut self) -> Result<u64> {
        Ok(be_uint(self.bytes(6)?) as u64)
    }
    /// Peeks a `u16` at `ofs` bytes ahead without consuming.
    pub(crate) fn peek_u16(&self, ofs: usize) -> Result<u16> {
        let mut r = self.clone();
        r.skip(ofs)?;
        r.u16()
    }
}

/// Big-endian unsigned integer of up to 16 bytes.
pub(crate) fn be_uint(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x))
}

/// An appending writer.
#[derive(Debug, Default)]
pub(crate) struct Wr {
    pub(crate) buf: Vec<u8>,
}

impl Wr {
    pub(crate) fn new() -> Wr {
        Wr { buf: Vec::new() }
    }
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn mac(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes()[2..]);
    }
    /// The low `n` bytes of `v`, big-endian (`n` ≤ 16).
    pub(crate) fn uint(&mut self, v: u128, n: usize) {
        self.buf.extend_from_slice(&v.to_be_bytes()[16 - n..]);
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    pub(crate) fn zeros(&mut self, n: usize) {
        self.buf.resize(self.buf.len() + n, 0);
    }
    /// Zero-pads so that the bytes written since `start` are a multiple of 8.
    pub(crate) fn pad8_from(&mut self, start: usize) {
        let n = self.buf.len() - start;
        self.zeros(n.next_multiple_of(8) - n);
    }
    /// Overwrites the `u16` at `at`.
    pub(crate) fn patch_u16(&mut self, at: usize, v: u16) {
        self.buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    /// Writes the length of everything since `start` into the `u16` at `at`, failing when it
    /// does not fit.
    pub(crate) fn patch_len(&mut self, at: usize, start: usize, what: &'static str) -> Result<()> {
        let n = self.buf.len() - start;
        let n16 = u16::try_from(n).map_err(|_| Error::BadLength { what, len: n })?;
        self.patch_u16(at, n16);
        Ok(())
    }
}

/// A NUL-padded fixed-width string field as text (up to the first NUL; must be UTF-8).
pub(crate) fn c_string(b: &[u8], what: &'static str) -> Result<String> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8(b[..end].to_vec())
        .map_err(|_| crate::error::invalid(format!("{what}: not UTF-8")))
}

/// `s` as a NUL-padded field of `n` bytes (cut at a character boundary when longer).
pub(crate) fn put_c_string(w: &mut Wr, s: &str, n: usize) {
    let mut k = s.len().min(n);
    while !s.is_char_boundary(k) {
        k -= 1;
    }
    w.bytes(&s.as_bytes()[..k]);
    w.zeros(n - k);
}
