//! Sans-I/O JSON-RPC 1.0 framing, as `ovsdb-server` speaks it (RFC 7047 §4).
//!
//! # What this module owns
//!
//! * [`Decoder`]: turns a byte stream, fed in chunks split anywhere, into complete JSON
//!   values. The peer sends back-to-back JSON objects with no delimiter (whitespace between
//!   them is allowed and skipped); the decoder finds each message's end with a small
//!   string- and escape-aware bracket scanner, then parses exactly those bytes.
//! * [`Message`]: the four message kinds (request, notification, response, error response)
//!   read from and written as JSON.
//!
//! No sockets here: the [`crate::client`] reads bytes and hands them over.
//!
//! # Invariants
//!
//! * Memory is bounded: a message longer than the decoder's limit
//!   ([`DEFAULT_MAX_MESSAGE`] unless set) is an [`Error::Protocol`] as soon as its first
//!   `limit + 1` bytes have been seen; the buffer never holds more than the message being
//!   read plus the last chunk fed (its capacity grows by a quarter at a time and is given
//!   back once a message of over 1 MiB has been consumed).
//! * [`Decoder::next_frame`] hands out a message's bytes unparsed, for callers that read a
//!   big message piecewise.
//! * Every top-level value is an object or an array; anything else (or bytes that are not
//!   JSON) is an [`Error::Protocol`], never a panic. After an error the stream's framing is
//!   lost and the decoder keeps returning that error: drop the connection.
//! * Nesting depth is bounded by `serde_json`'s recursion limit, so hostile input cannot
//!   overflow the stack.
//!
//! no unsafe

use crate::{Error, Result};
use serde_json::{Value, json};

/// The default bound on one message: 256 MiB (a large `OVN_Southbound` initial monitor reply
/// is tens of MiB).
pub const DEFAULT_MAX_MESSAGE: usize = 256 << 20;

/// Buffer capacity the decoder gives back once the message that needed it is consumed.
const SHRINK_ABOVE: usize = 1 << 20;

/// An incremental decoder of back-to-back JSON values.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out as messages (dropped lazily).
    consumed: usize,
    /// Where the scanner is in `buf`.
    pos: usize,
    /// Start of the message being scanned, once its first byte has been seen.
    start: Option<usize>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    max: usize,
    failed: Option<String>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with the [`DEFAULT_MAX_MESSAGE`] limit.
    pub fn new() -> Decoder {
        Decoder::with_max(DEFAULT_MAX_MESSAGE)
    }

    /// A decoder refusing messages longer than `max` bytes.
    pub fn with_max(max: usize) -> Decoder {
        Decoder {
            buf: Vec::new(),
            consumed: 0,
            pos: 0,
            start: None,
            depth: 0,
            in_string: false,
            escaped: false,
            max: max.max(1),
            failed: None,
        }
    }

    /// The message size limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes buffered and not yet returned as messages.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.consumed
    }

    /// Appends bytes read from the stream. Call [`Decoder::next_value`] until it returns
    /// `None` after each feed: that is what keeps the buffer bounded.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if self.consumed > 0 {
            self.buf.drain(..self.consumed);
            self.pos -= self.consumed;
            self.start = self.start.map(|s| s - self.consumed);
            self.consumed = 0;
            // A big message is gone: give its room back rather than keep it for good.
            if self.buf.capacity() > SHRINK_ABOVE && self.buf.len() < self.buf.capacity() / 4 {
                self.buf.shrink_to(self.buf.len().max(SHRINK_ABOVE / 16));
            }
        }
        // Grow by a quarter rather than double: a message of tens of MB is held whole, and
        // doubling would keep up to as much again unused.
        let (len, cap) = (self.buf.len(), self.buf.capacity());
        if cap - len < bytes.len() {
            self.buf.reserve_exact(bytes.len().max(len / 4));
        }
        self.buf.extend_from_slice(bytes);
    }

    fn fail(&mut self, msg: String) -> Error {
        self.failed = Some(msg.clone());
        self.buf = Vec::new();
        self.consumed = 0;
        self.pos = 0;
        Error::Protocol(msg)
    }

    /// The next complete JSON value, `None` when more bytes are needed.
    pub fn next_value(&mut self) -> Result<Option<Value>> {
        let Some((start, end)) = self.next_span()? else {
            return Ok(None);
        };
        match serde_json::from_slice(&self.buf[start..end]) {
            Ok(v) => Ok(Some(v)),
            Err(e) => Err(self.fail(format!("bad JSON message: {e}"))),
        }
    }

    /// The next complete message's bytes (one JSON object or array, not parsed beyond
    /// finding its end), `None` when more bytes are needed. For a caller that reads a big
    /// message piecewise instead of as one [`Value`]; if those bytes turn out not to be
    /// JSON, call [`Decoder::poison`].
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>> {
        Ok(self.next_span()?.map(|(start, end)| &self.buf[start..end]))
    }

    /// Marks the stream broken (a frame that was not JSON): every later call fails.
    pub fn poison(&mut self, why: String) -> Error {
        self.fail(why)
    }

    fn next_span(&mut self) -> Result<Option<(usize, usize)>> {
        if let Some(msg) = &self.failed {
            return Err(Error::Protocol(msg.clone()));
        }
        while self.pos < self.buf.len() {
            let b = self.buf[self.pos];
            match self.start {
                None => {
                    match b {
                        b' ' | b'\t' | b'\r' | b'\n' => self.consumed = self.pos + 1,
                        b'{' | b'[' => {
                            self.start = Some(self.pos);
                            self.depth = 1;
                        }
                        _ => {
                            return Err(self.fail(format!(
                                "expected a JSON object or array, got byte 0x{b:02x}"
                            )));
                        }
                    }
                    self.pos += 1;
                }
                Some(start) => {
                    self.pos += 1;
                    if self.pos - start > self.max {
                        return Err(
                            self.fail(format!("message longer than the {} byte limit", self.max))
                        );
                    }
                    if self.in_string {
                        if self.escaped {
                            self.escaped = false;
                        } else if b == b'\\' {
                            self.escaped = true;
                        } else if b == b'"' {
                            self.in_string = false;
                        }
                    } else {
                        match b {
                            b'"' => self.in_string = true,
                            b'{' | b'[' => self.depth += 1,
                            b'}' | b']' => {
                                self.depth -= 1;
                                if self.depth == 0 {
                                    let end = self.pos;
                                    self.start = None;
                                    self.consumed = end;
                                    return Ok(Some((start, end)));
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    /// The next complete message, `None` when more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Message>> {
        self.next_value()?.map(Message::from_json).transpose()
    }
}

/// One JSON-RPC 1.0 message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A call that wants an answer.
    Request {
        /// Method name.
        method: String,
        /// Parameters (an array in OVSDB).
        params: Value,
        /// Non-null id the answer carries back.
        id: Value,
    },
    /// A call that wants no answer (`"id": null`).
    Notify {
        /// Method name.
        method: String,
        /// Parameters.
        params: Value,
    },
    /// A successful answer.
    Response {
        /// The result.
        result: Value,
        /// The request's id.
        id: Value,
    },
    /// An error answer.
    Error {
        /// The error (a string or an object with `error`/`details`).
        error: Value,
        /// The request's id.
        id: Value,
    },
}

impl Message {
    /// Reads a message from its JSON form.
    pub fn from_json(v: Value) -> Result<Message> {
        let Value::Object(mut o) = v else {
            return Err(Error::Protocol(format!("message is not an object: {v}")));
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(method) = o.remove("method") {
            let Value::String(method) = method else {
                return Err(Error::Protocol(format!("method is not a string: {method}")));
            };
            let params = o.remove("params").unwrap_or_else(|| json!([]));
            return Ok(if id.is_null() {
                Message::Notify { method, params }
            } else {
                Message::Request { method, params, id }
            });
        }
        let result = o.remove("result");
        let error = o.remove("error");
        match (result, error) {
            (_, Some(error)) if !error.is_null() => Ok(Message::Error { error, id }),
            (Some(result), _) => Ok(Message::Response { result, id }),
            _ => Err(Error::Protocol(format!(
                "message with neither method, result nor error (id {id})"
            ))),
        }
    }

    /// The message's JSON form.
    pub fn to_json(&self) -> Value {
        match self {
            Message::Request { method, params, id } => {
                json!({"method": method, "params": params, "id": id})
            }
            Message::Notify { method, params } => {
                json!({"method": method, "params": params, "id": null})
            }
            Message::Response { result, id } => json!({"result": result, "error": null, "id": id}),
            Message::Error { error, id } => json!({"result": null, "error": error, "id": id}),
        }
    }

    /// The message as bytes to send (written from the parts, without copying them into
    /// one `Value` first: a big transaction's operations are tens of MB as a tree).
    pub fn to_bytes(&self) -> Vec<u8> {
        let null = Value::Null;
        let method_v;
        let fields: [(&str, &Value); 3] = match self {
            Message::Request { method, params, id } => {
                method_v = Value::String(method.clone());
                [("method", &method_v), ("params", params), ("id", id)]
            }
            Message::Notify { method, params } => {
                method_v = Value::String(method.clone());
                [("method", &method_v), ("params", params), ("id", &null)]
            }
            Message::Response { result, id } => [("result", result), ("error", &null), ("id", id)],
            Message::Error { error, id } => [("result", &null), ("error", error), ("id", id)],
        };
        let mut out = Vec::new();
        out.push(b'{');
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b"\":");
            // Writing a `Value` to a `Vec` cannot fail (its map keys are strings).
            let _ = serde_json::to_writer(&mut out, v);
        }
        out.push(b'}');
        out
    }
}

/// An RPC error value as text: `"error: details"` for the usual object, the string itself
/// for a bare string.
pub fn error_text(e: &Value) -> String {
    match e {
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            let err = o.get("error").and_then(Value::as_str).unwrap_or("error");
            match o.get("details").and_then(Value::as_str) {
                Some(d) if !d.is_empty() => format!("{err}: {d}"),
                _ => err.to_owned(),
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(d: &mut Decoder, out: &mut Vec<Value>) -> Result<()> {
        while let Some(v) = d.next_value()? {
            out.push(v);
        }
        Ok(())
    }

    #[test]
    fn strings_with_brackets_quotes_and_escapes() {
        let msgs = [
            json!({"a": "}{][", "b": "\"}\\", "c": [1, {"d": "\\\\\"]"}]}),
            json!(["x", "\u{1F600}é", {"e": null}]),
            json!({"method": "echo", "params": [], "id": "echo"}),
        ];
        let mut bytes = Vec::new();
        for m in &msgs {
            bytes.extend(serde_json::to_vec(m).unwrap());
            bytes.extend(b" \n");
        }
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for b in &bytes {
            d.feed(std::slice::from_ref(b));
            decode_all(&mut d, &mut out).unwrap();
        }
        assert_eq!(out, msgs);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn oversized_message_is_an_error_and_memory_stays_bounded() {
        let mut d = Decoder::with_max(1000);
        d.feed(b"{\"a\":\"");
        let chunk = [b'x'; 100];
        let mut err = None;
        for _ in 0..100 {
            d.feed(&chunk);
            assert!(d.buffered() <= 1000 + chunk.len() + 8);
            if let Err(e) = d.next_value() {
                err = Some(e);
                break;
            }
        }
        let err = err.expect("oversized message must fail");
        assert!(
            matches!(err, Error::Protocol(ref m) if m.contains("limit")),
            "{err}"
        );
        // Poisoned: later input is refused too, and nothing is buffered.
        d.feed(b"{}");
        assert!(d.next_value().is_err());
        assert_eq!(d.buffered(), 0);
        // A message of exactly the limit passes.
        let mut d = Decoder::with_max(10);
        d.feed(b"{\"a\":\"xx\"}{\"a\":\"xxx\"}");
        assert_eq!(d.next_value().unwrap(), Some(json!({"a": "xx"})));
        assert!(d.next_value().is_err());
    }

    #[test]
    fn bad_input_is_an_error() {
        for bad in [&b"42"[..], b"\"s\"", b"{\"a\":tru}", b"{]", b"nul"] {
            let mut d = Decoder::new();
            d.feed(bad);
            let mut out = Vec::new();
            assert!(
                decode_all(&mut d, &mut out).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // Invalid UTF-8 inside a string.
        let mut d = Decoder::new();
        d.feed(b"{\"a\":\"\xff\"}");
        assert!(d.next_value().is_err());
    }

    #[test]
    fn messages_round_trip_and_classify() {
        let cases = [
            Message::Request {
                method: "echo".into(),
                params: json!([]),
                id: json!("echo"),
            },
            Message::Notify {
                method: "update2".into(),
                params: json!([null, {}]),
            },
            Message::Response {
                result: json!([1]),
                id: json!(3),
            },
            Message::Error {
                error: json!({"error": "e", "details": "d"}),
                id: json!(3),
            },
        ];
        for m in cases {
            assert_eq!(Message::from_json(m.to_json()).unwrap(), m);
            let back: Value = serde_json::from_slice(&m.to_bytes()).unwrap();
            assert_eq!(back, m.to_json());
        }
        assert!(Message::from_json(json!([1])).is_err());
        assert!(Message::from_json(json!({"id": 1})).is_err());
        assert!(Message::from_json(json!({"method": 1, "id": 1})).is_err());
        assert_eq!(error_text(&json!({"error": "e", "details": "d"})), "e: d");
        assert_eq!(error_text(&json!("unknown method")), "unknown method");
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            "[ -~\\\\\"{}\\[\\]é\u{1F600}]{0,12}".prop_map(Value::String),
        ];
        let inner = leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z{}\"\\\\]{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        // Top level: an object or an array.
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    }

    proptest! {
        #[test]
        fn random_splits_yield_the_same_messages(
            msgs in prop::collection::vec(arb_json(), 1..8),
            seps in prop::collection::vec(prop_oneof![Just(""), Just(" "), Just("\n"), Just("\r\n\t")], 8),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let mut bytes = Vec::new();
            for (i, m) in msgs.iter().enumerate() {
                bytes.extend(serde_json::to_vec(m).unwrap());
                bytes.extend(seps[i % seps.len()].as_bytes());
            }
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            points.push(0);
            points.push(bytes.len());
            points.sort_unstable();
            let mut d = Decoder::new();
            let mut out = Vec::new();
            for w in points.windows(2) {
                d.feed(&bytes[w[0]..w[1]]);
                decode_all(&mut d, &mut out).unwrap();
            }
            prop_assert_eq!(out, msgs);
            prop_assert_eq!(d.buffered(), 0);
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..32), 0..8),
        ) {
            let mut d = Decoder::with_max(64);
            for c in &chunks {
                d.feed(c);
                while let Ok(Some(v)) = d.next_value() {
                    let _ = Message::from_json(v);
                }
                prop_assert!(d.buffered() <= 64 + 32 + 1);
            }
        }
    }
}
