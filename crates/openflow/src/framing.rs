//! Sans-I/O framing: split a byte stream, fed in chunks cut anywhere, into whole messages.
//!
//! [`Framer::feed`] appends bytes; [`Framer::next_message`] hands out one complete message
//! (header included) at a time. The 16-bit length field bounds every message to 64 KiB; a
//! lower limit can be set ([`Framer::with_limit`]).
//!
//! Invariants:
//! - never panics on any input; a header whose length is below 8 or above the limit is an
//!   [`Error::BadLength`], after which framing is lost and the framer keeps returning that
//!   error (drop the connection);
//! - the buffer holds at most one incomplete message plus the last chunk fed; consumed bytes
//!   are dropped lazily, so feeding is amortised O(bytes).

use crate::error::{Error, Result};
use crate::header::{HEADER_LEN, Header};

/// The largest message the 16-bit length allows.
pub const MAX_MESSAGE: usize = u16::MAX as usize;

/// An incremental OpenFlow message splitter.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    start: usize,
    limit: usize,
    failed: Option<Error>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new()
    }
}

impl Framer {
    /// A framer accepting any length the header can carry.
    pub fn new() -> Framer {
        Framer::with_limit(MAX_MESSAGE)
    }

    /// A framer rejecting messages longer than `limit` bytes (at least 8).
    pub fn with_limit(limit: usize) -> Framer {
        Framer {
            buf: Vec::new(),
            start: 0,
            limit: limit.max(HEADER_LEN),
            failed: None,
        }
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet handed out.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete message (header and body), `Ok(None)` when more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Vec<u8>>> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let avail = &self.buf[self.start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = match Header::parse(avail) {
            Ok(h) => h,
            Err(e) => return Err(self.fail(e)),
        };
        let len = usize::from(h.length);
        if len > self.limit {
            return Err(self.fail(Error::BadLength {
                what: "OpenFlow message (over the limit)",
                len,
            }));
        }
        if avail.len() < len {
            return Ok(None);
        }
        let msg = avail[..len].to_vec();
        self.start += len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(msg))
    }

    fn fail(&mut self, e: Error) -> Error {
        self.failed = Some(e.clone());
        self.buf = Vec::new();
        self.start = 0;
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_anywhere() {
        let mut stream = Vec::new();
        for (i, body) in [&b""[..], b"abc", b"0123456789"].iter().enumerate() {
            let h = Header {
                version: 4,
                msg_type: 2,
                length: (8 + body.len()) as u16,
                xid: i as u32,
            };
            stream.extend_from_slice(&h.to_bytes());
            stream.extend_from_slice(body);
        }
        for cut in 1..stream.len() {
            let mut f = Framer::new();
            let mut got = Vec::new();
            for chunk in stream.chunks(cut) {
                f.feed(chunk);
                while let Some(m) = f.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got.concat(), stream);
            assert_eq!(got.len(), 3);
            assert_eq!(f.buffered(), 0);
        }
    }

    #[test]
    fn bad_lengths_are_errors_that_stick() {
        let mut f = Framer::new();
        f.feed(&[4, 0, 0, 7, 0, 0, 0, 1]);
        assert!(matches!(
            f.next_message(),
            Err(Error::BadLength { len: 7, .. })
        ));
        f.feed(&[4, 0, 0, 8, 0, 0, 0, 1]);
        assert!(f.next_message().is_err());
        let mut f = Framer::with_limit(100);
        f.feed(&[4, 0, 0, 101, 0, 0, 0, 1]);
        assert!(f.next_message().is_err());
        let mut f = Framer::new();
        f.feed(&[4, 0, 0xff, 0xff, 0, 0, 0, 1, 0]);
        assert_eq!(f.next_message(), Ok(None));
    }
}
