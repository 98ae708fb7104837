//! The key/value tokenizer of the flow language (OVS `ofputil_parse_key_value`), with byte
//! offsets so errors can name a column.
//!
//! A pair is `key`, `key=value`, `key:value` or `key(value)`. Pairs are separated by commas or
//! white space. A `:`/`=` value runs to the next comma or white space, except that balanced
//! parentheses are taken whole (`ct(commit,exec(...))`); a `(` value runs to the matching `)`,
//! and `key(x)->y` keeps `x)->y` as the value (OVS's special case for `move`-like syntax).
//!
//! All delimiters are ASCII, so every offset produced lies on a `char` boundary.

/// One key/value pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kv<'a> {
    /// The key.
    pub key: &'a str,
    /// Byte offset of the key in the tokenized text.
    pub key_at: usize,
    /// The value (empty when absent).
    pub value: &'a str,
    /// Byte offset of the value.
    pub value_at: usize,
    /// The byte that ended the key (`b'='`, `b':'`, `b'('`, a separator, or 0 at the end).
    pub delim: u8,
}

/// Iterator over the pairs of a string.
#[derive(Debug, Clone)]
pub struct KvIter<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> KvIter<'a> {
    /// Tokenizes `s`.
    pub fn new(s: &'a str) -> KvIter<'a> {
        KvIter { s, pos: 0 }
    }
}

fn is_sep(b: u8) -> bool {
    matches!(b, b',' | b' ' | b'\t' | b'\r' | b'\n')
}

/// OVS `parse_value`: length of the value starting at `s[start..]` up to a delimiter in
/// `delims` (or the end), taking parenthesized groups whole.
fn parse_value(b: &[u8], start: usize, delims: &[u8]) -> usize {
    let mut n = start;
    while n < b.len() && !delims.contains(&b[n]) {
        if b[n] == b'(' {
            let mut level = 0i32;
            loop {
                if n >= b.len() {
                    return n - start;
                }
                match b[n] {
                    b'(' => level += 1,
                    b')' => level -= 1,
                    _ => {}
                }
                n += 1;
                if level <= 0 {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n - start
}

impl<'a> Iterator for KvIter<'a> {
    type Item = Kv<'a>;

    fn next(&mut self) -> Option<Kv<'a>> {
        let b = self.s.as_bytes();
        while self.pos < b.len() && is_sep(b[self.pos]) {
            self.pos += 1;
        }
        if self.pos >= b.len() {
            return None;
        }
        let key_at = self.pos;
        let mut key_end = key_at;
        while key_end < b.len() && !matches!(b[key_end], b':' | b'=' | b'(') && !is_sep(b[key_end])
        {
            key_end += 1;
        }
        let delim = b.get(key_end).copied().unwrap_or(0);
        let key = &self.s[key_at..key_end];
        self.pos = key_end + usize::from(delim != 0);
        let value_delims: &[u8] = match delim {
            b':' | b'=' => b", \t\r\n",
            b'(' => b")",
            _ => {
                return Some(Kv {
                    key,
                    key_at,
                    value: "",
                    value_at: key_end,
                    delim,
                });
            }
        };
        let value_at = self.pos;
        let mut len = parse_value(b, value_at, value_delims);
        let end = value_at + len;
        if delim == b'('
            && b.get(end) == Some(&b')')
            && b.get(end + 1) == Some(&b'-')
            && b.get(end + 2) == Some(&b'>')
        {
            len += parse_value(b, end, b", \t\r\n");
        }
        let end = value_at + len;
        let value = &self.s[value_at..end];
        self.pos = end + usize::from(end < b.len());
        Some(Kv {
            key,
            key_at,
            value,
            value_at,
            delim,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(s: &str) -> Vec<(&str, &str)> {
        KvIter::new(s).map(|k| (k.key, k.value)).collect()
    }

    #[test]
    fn splits_like_ovs() {
        assert_eq!(
            kv("ip, nw_src=1.2.3.4 tcp"),
            vec![("ip", ""), ("nw_src", "1.2.3.4"), ("tcp", "")]
        );
        assert_eq!(
            kv("ct(commit,exec(load:1->NXM_NX_CT_MARK[])),2"),
            vec![("ct", "commit,exec(load:1->NXM_NX_CT_MARK[])"), ("2", "")]
        );
        assert_eq!(
            kv("output:1,resubmit(,3)"),
            vec![("output", "1"), ("resubmit", ",3")]
        );
        assert_eq!(kv("set_field:1->reg0"), vec![("set_field", "1->reg0")]);
        assert_eq!(kv("a(b"), vec![("a", "b")]);
        assert_eq!(kv(",,  "), vec![]);
    }
}
