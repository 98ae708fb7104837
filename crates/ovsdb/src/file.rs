//! The standalone database file `ovsdb-server` keeps: a log of records, each
//! `OVSDB JSON <length> <sha1>\n<json>\n`; the first holds the schema, each later one a
//! committed transaction (`{table: {uuid: row | null}, "_date": …, "_is_diff": true?}`).
//!
//! Clustered (Raft) database files are refused with a clear error: convert them with
//! `ovsdb-tool cluster-to-standalone`.

use crate::db::{Database, UpdateKind};
use crate::schema::DatabaseSchema;
use crate::{Error, Result};
use serde_json::Value;

/// Reads a database file into a replica.
pub fn read(path: &str) -> Result<Database> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&bytes).map_err(|e| Error::syntax(format!("{path}: {e}")))
}

/// Parses the bytes of a database file.
pub fn parse(bytes: &[u8]) -> Result<Database> {
    let mut records = Records { bytes, pos: 0 };
    let (magic, schema) = records
        .next()
        .ok_or_else(|| Error::syntax("empty database file"))??;
    if magic != "OVSDB JSON" {
        return Err(Error::syntax(format!(
            "{magic:?} database files are not supported (only standalone; try `ovsdb-tool cluster-to-standalone`)"
        )));
    }
    let mut db = Database::new(DatabaseSchema::from_json(&schema)?);
    for (n, rec) in (2usize..).zip(records) {
        let (_, txn) = rec?;
        let kind = if txn.get("_is_diff").and_then(Value::as_bool) == Some(true) {
            UpdateKind::Diff
        } else {
            UpdateKind::Values
        };
        db.apply_tables(&txn, kind)
            .map_err(|e| Error::syntax(format!("record {n}: {e}")))?;
    }
    Ok(db)
}

struct Records<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Iterator for Records<'_> {
    type Item = Result<(String, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            self.pos = self.bytes.len();
            return Some(Err(Error::syntax("truncated record header")));
        };
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        let mut words: Vec<&str> = header.split(' ').collect();
        // "<magic words...> <length> <sha1>"
        let parsed = (|| {
            let _sha = words.pop()?;
            let len: usize = words.pop()?.parse().ok()?;
            Some(len)
        })();
        let Some(len) = parsed else {
            self.pos = self.bytes.len();
            return Some(Err(Error::syntax(format!("bad record header {header:?}"))));
        };
        let magic = words.join(" ");
        let start = nl + 1;
        let Some(body) = rest.get(start..start.saturating_add(len)) else {
            // A torn last write: ovsdb-server ignores it too.
            self.pos = self.bytes.len();
            return None;
        };
        self.pos += start + len;
        if self.bytes.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
        }
        Some(
            serde_json::from_slice(body)
                .map(|v| (magic, v))
                .map_err(Error::from),
        )
    }
}
