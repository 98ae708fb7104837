//! The standalone database file `ovsdb-server` keeps: a log of records, each
//! `OVSDB JSON <length> <sha1>\n<json>\n`; the first holds the schema, each later one a
//! committed transaction (`{table: {uuid: row | null}, "_date": …, "_is_diff": true?}`).
//!
//! Reading follows `ovsdb-server` (3.1, checked against it): a damaged first record (bad
//! magic, bad header, wrong SHA-1, not JSON) makes the file unreadable, but damage in a
//! later record — a torn last write, a bad header, a length or SHA-1 that does not match
//! the bytes — ends the log there: the records before it are the database, the server logs
//! the damage and goes on. [`parse_report`] says where reading stopped; [`read`] and
//! [`parse`] keep quiet about it, as the server's clients see nothing either.
//!
//! Writing ([`write`], [`to_bytes`]) produces a fresh file of two records: the schema and
//! one transaction inserting every row, which `ovsdb-tool` and `ovsdb-server` accept.
//!
//! Clustered (Raft) database files are refused with a clear error: convert them with
//! `ovsdb-tool cluster-to-standalone`.

use crate::db::{Database, UpdateKind};
use crate::schema::DatabaseSchema;
use crate::{Error, Result};
use serde_json::Value;

/// The magic word of standalone database records.
const MAGIC: &str = "OVSDB JSON";

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
    Ok(parse_report(bytes)?.db)
}

/// A parsed database file, with what `ovsdb-server` would have logged about it.
#[derive(Debug)]
pub struct Parsed {
    /// The database: the schema and every transaction read.
    pub db: Database,
    /// Records read, the schema included.
    pub records: usize,
    /// Why reading stopped before the end of the bytes (a damaged record), if it did.
    pub stopped: Option<String>,
}

/// Parses the bytes of a database file, telling where reading stopped (module doc).
pub fn parse_report(bytes: &[u8]) -> Result<Parsed> {
    let mut records = Records { bytes, pos: 0 };
    let schema = match records.next() {
        None => return Err(Error::syntax("empty database file")),
        Some(Err(e)) => return Err(Error::syntax(e)),
        Some(Ok((magic, _))) if magic != MAGIC => {
            return Err(Error::syntax(format!(
                "{magic:?} database files are not supported (only standalone; try `ovsdb-tool cluster-to-standalone`)"
            )));
        }
        Some(Ok((_, schema))) => schema,
    };
    let mut db = Database::new(DatabaseSchema::from_json(&schema)?);
    let mut n = 1;
    let mut stopped = None;
    for rec in records {
        let txn = match rec {
            Ok((magic, txn)) if magic == MAGIC => txn,
            Ok((magic, _)) => {
                stopped = Some(format!("record {}: magic {magic:?}", n + 1));
                break;
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        };
        n += 1;
        let kind = if txn.get("_is_diff").and_then(Value::as_bool) == Some(true) {
            UpdateKind::Diff
        } else {
            UpdateKind::Values
        };
        db.apply_tables(&txn, kind)
            .map_err(|e| Error::syntax(format!("record {n}: {e}")))?;
    }
    Ok(Parsed {
        db,
        records: n,
        stopped,
    })
}

/// One record as `ovsdb-server` writes it: the header, then the JSON and a newline — the
/// newline is part of the body the length and SHA-1 cover.
fn record(json: &[u8]) -> Vec<u8> {
    let mut body = json.to_vec();
    body.push(b'\n');
    let sha = sha1_smol::Sha1::from(&body).digest().to_string();
    let mut out = format!("{MAGIC} {} {sha}\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The bytes of a standalone database file holding `db`: the schema record (`schema_json`,
/// the `.ovsschema` text's JSON, which must describe `db.schema`), then one transaction
/// record inserting every row (only non-default columns, as `ovsdb-server` writes them),
/// dated `date_ms` (milliseconds since the epoch).
pub fn to_bytes(schema_json: &Value, db: &Database, date_ms: u64) -> Result<Vec<u8>> {
    if DatabaseSchema::from_json(schema_json)? != db.schema {
        return Err(Error::syntax(format!(
            "schema JSON does not describe the database's schema ({} {})",
            db.schema.name, db.schema.version
        )));
    }
    let mut txn = serde_json::Map::new();
    for (tname, table) in &db.tables {
        if table.rows.is_empty() {
            continue;
        }
        let ts = db
            .schema
            .tables
            .get(tname)
            .ok_or_else(|| Error::syntax(format!("table {tname:?} is not in the schema")))?;
        let mut rows: Vec<_> = table.rows.iter().collect();
        rows.sort_by_key(|(u, _)| **u);
        let rows: serde_json::Map<String, Value> = rows
            .into_iter()
            .map(|(u, r)| (u.to_string(), r.to_json(ts)))
            .collect();
        txn.insert(tname.clone(), Value::Object(rows));
    }
    txn.insert("_date".to_owned(), Value::from(date_ms));
    let mut out = record(serde_json::to_string(schema_json)?.as_bytes());
    out.extend(record(
        serde_json::to_string(&Value::Object(txn))?.as_bytes(),
    ));
    Ok(out)
}

/// Writes `db` as a fresh standalone database file at `path` ([`to_bytes`], dated now),
/// through a temporary file renamed over `path`.
pub fn write(path: &str, schema_json: &Value, db: &Database) -> Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let bytes = to_bytes(schema_json, db, now)?;
    let tmp = format!("{path}.tmp{}", std::process::id());
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// The records of a file: `(magic, json)`, or a description of the damage that ends it.
struct Records<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Records<'_> {
    /// Reads the record at `self.pos`.
    fn read_one(&mut self) -> std::result::Result<(String, Value), String> {
        let at = self.pos;
        let rest = &self.bytes[at..];
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            return Err(format!("offset {at}: truncated record header"));
        };
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        let bad_header = || format!("offset {at}: bad record header {header:?}");
        // "<magic words...> <length> <sha1>"
        let mut words: Vec<&str> = header.split(' ').collect();
        let sha = words.pop().ok_or_else(bad_header)?;
        let len_s = words.pop().ok_or_else(bad_header)?;
        let len: usize = len_s
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| len_s.parse().ok())
            .flatten()
            .ok_or_else(bad_header)?;
        if words.is_empty() || sha.len() != 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad_header());
        }
        let magic = words.join(" ");
        let start = nl + 1;
        let Some(body) = rest.get(start..start.saturating_add(len)) else {
            return Err(format!(
                "offset {at}: record of {len} bytes cut short (a torn last write)"
            ));
        };
        let got = sha1_smol::Sha1::from(body).digest().to_string();
        if !got.eq_ignore_ascii_case(sha) {
            return Err(format!(
                "offset {at}: {len} bytes have SHA-1 {got} but the header says {sha}"
            ));
        }
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| format!("offset {at}: record is not JSON: {e}"))?;
        if !v.is_object() {
            return Err(format!("offset {at}: record is not a JSON object"));
        }
        self.pos += start + len;
        if self.bytes.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
        }
        Ok((magic, v))
    }
}

impl Iterator for Records<'_> {
    type Item = std::result::Result<(String, Value), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let r = self.read_one();
        if r.is_err() {
            // Nothing after damage is read: the log ends there.
            self.pos = self.bytes.len();
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Atom, Datum, Row, Uuid};
    use serde_json::json;

    fn schema_json() -> Value {
        json!({
            "name": "Test", "version": "1.0.0",
            "tables": {
                "Parent": {"isRoot": true, "columns": {
                    "name": {"type": "string"},
                    "n": {"type": "integer"},
                    "kids": {"type": {"key": {"type": "uuid", "refTable": "Kid"},
                                       "min": 0, "max": "unlimited"}},
                    "opts": {"type": {"key": "string", "value": "string",
                                       "min": 0, "max": "unlimited"}}}},
                "Kid": {"columns": {"tag": {"type": {"key": "string", "min": 0, "max": 1}}}}
            }
        })
    }

    fn sample() -> (Value, Database) {
        let sj = schema_json();
        let mut db = Database::new(DatabaseSchema::from_json(&sj).unwrap());
        let k1 = Uuid::from_u128(0x11);
        let k2 = Uuid::from_u128(0x12);
        let mut kid = Row::default();
        kid.cols
            .insert("tag".into(), Datum::scalar(Atom::String("a".into())));
        db.insert_row("Kid", k1, kid).unwrap();
        db.insert_row("Kid", k2, Row::default()).unwrap();
        let mut p = Row::default();
        p.cols
            .insert("name".into(), Datum::scalar(Atom::String("p".into())));
        p.cols.insert("n".into(), Datum::scalar(Atom::Integer(7)));
        p.cols.insert(
            "kids".into(),
            Datum {
                keys: vec![Atom::Uuid(k1), Atom::Uuid(k2)],
                values: None,
            },
        );
        p.cols.insert(
            "opts".into(),
            Datum {
                keys: vec![Atom::String("k".into())],
                values: Some(vec![Atom::String("v".into())]),
            },
        );
        db.insert_row("Parent", Uuid::from_u128(0x1), p).unwrap();
        (sj, db)
    }

    /// Offset of the second record's header.
    fn second(bytes: &[u8]) -> usize {
        let first_nl = bytes.iter().position(|&b| b == b'\n').unwrap();
        let header = std::str::from_utf8(&bytes[..first_nl]).unwrap();
        let len: usize = header.split(' ').nth(2).unwrap().parse().unwrap();
        first_nl + 1 + len
    }

    #[test]
    fn write_then_read_round_trips() {
        let (sj, db) = sample();
        let bytes = to_bytes(&sj, &db, 1_700_000_000_000).unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.starts_with("OVSDB JSON "), "{text}");
        assert_eq!(text.matches("OVSDB JSON ").count(), 2);
        assert!(text.contains("\"_date\":1700000000000"), "{text}");
        let p = parse_report(&bytes).unwrap();
        assert_eq!(p.records, 2);
        assert_eq!(p.stopped, None);
        assert_eq!(p.db, db);

        let dir = std::env::temp_dir().join(format!("ovsdb-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.db");
        let path = path.to_str().unwrap();
        write(path, &sj, &db).unwrap();
        assert_eq!(read(path).unwrap(), db);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file as `ovsdb-server` 3.1 wrote it (`ovsdb-tool create`, then one transaction).
    #[test]
    fn reads_a_file_written_by_ovsdb_server() {
        let schema = r#"{"name":"T","version":"1.0.0","tables":{"A":{"columns":{"x":{"type":"integer"}},"isRoot":true}}}"#;
        let txn =
            r#"{"_date":1,"A":{"00000000-0000-0000-0000-000000000001":{"x":5}},"_is_diff":true}"#;
        let mut bytes = Vec::new();
        for j in [schema, txn] {
            let body = format!("{j}\n");
            let sha = sha1_smol::Sha1::from(body.as_bytes()).digest().to_string();
            bytes.extend(format!("OVSDB JSON {} {sha}\n{body}", body.len()).bytes());
        }
        let p = parse_report(&bytes).unwrap();
        assert_eq!((p.records, p.stopped), (2, None));
        let row = p.db.row("A", Uuid::from_u128(1)).unwrap();
        assert_eq!(row.int("x"), Some(5));
        let again = to_bytes(&serde_json::from_str(schema).unwrap(), &p.db, 1).unwrap();
        let text = String::from_utf8(again).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0],
            format!("OVSDB JSON {} {}", lines[1].len() + 1, {
                let b = format!("{}\n", lines[1]);
                sha1_smol::Sha1::from(b.as_bytes()).digest().to_string()
            })
        );
    }

    #[test]
    fn writer_refuses_a_foreign_schema() {
        let (mut sj, db) = sample();
        sj["tables"]["Kid"]["columns"]["extra"] = json!({"type": "string"});
        assert!(to_bytes(&sj, &db, 0).is_err());
    }

    #[test]
    fn damage_after_the_schema_ends_the_log() {
        let (sj, db) = sample();
        let bytes = to_bytes(&sj, &db, 0).unwrap();
        let empty = Database::new(db.schema.clone());
        let at = second(&bytes);
        let header_end = at + bytes[at..].iter().position(|&b| b == b'\n').unwrap();

        // A torn last write: the records before it are the database.
        let p = parse_report(&bytes[..bytes.len() - 10]).unwrap();
        assert_eq!((p.records, &p.db), (1, &empty));
        assert!(p.stopped.unwrap().contains("cut short"));

        // A SHA-1 that does not match the bytes.
        let mut bad = bytes.clone();
        bad[header_end - 1] = if bad[header_end - 1] == b'0' {
            b'1'
        } else {
            b'0'
        };
        let p = parse_report(&bad).unwrap();
        assert_eq!(p.db, empty);
        assert!(p.stopped.unwrap().contains("SHA-1"));

        // A length that does not match: the SHA-1 of the bytes it covers is wrong.
        let header = std::str::from_utf8(&bytes[at..header_end]).unwrap();
        let mut w: Vec<String> = header.split(' ').map(str::to_owned).collect();
        w[2] = (w[2].parse::<usize>().unwrap() - 1).to_string();
        let mut bad = bytes[..at].to_vec();
        bad.extend(w.join(" ").bytes());
        bad.extend(&bytes[header_end..]);
        let p = parse_report(&bad).unwrap();
        assert_eq!(p.db, empty);
        assert!(p.stopped.unwrap().contains("SHA-1"));

        // A header that does not parse.
        let mut bad = bytes[..at].to_vec();
        bad.extend(b"OVSDB JSON xx yy");
        bad.extend(&bytes[header_end..]);
        let p = parse_report(&bad).unwrap();
        assert_eq!(p.db, empty);
        assert!(p.stopped.unwrap().contains("bad record header"));
        assert_eq!(parse(&bad).unwrap(), empty);
    }

    #[test]
    fn damage_in_the_schema_record_is_an_error() {
        let (sj, db) = sample();
        let bytes = to_bytes(&sj, &db, 0).unwrap();
        let mut bad = bytes.clone();
        bad[3] = b'X'; // "OVSXB JSON": unknown magic
        assert!(parse(&bad).is_err());
        let at = second(&bytes);
        let mut bad = bytes.clone();
        bad[at - 3] ^= 1; // inside the schema JSON: SHA-1 mismatch
        assert!(parse(&bad).is_err());
        assert!(parse(b"OVSDB JSON 12 zz\n").is_err());
        assert!(parse(b"").is_err());
        assert!(parse(&bytes[..20]).is_err());
    }
}
