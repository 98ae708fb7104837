//! An in-memory replica of a database: tables of rows by UUID, updated by whole rows,
//! RFC 7047 `update` notifications, and `update2`/file-format diffs.

use crate::datum::Datum;
use crate::schema::{DatabaseSchema, TableSchema};
use crate::{Error, Result, Uuid};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One row: column name → value (every schema column present).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Row {
    /// Column values.
    pub cols: BTreeMap<String, Datum>,
}

impl Row {
    /// A row of the schema's defaults.
    pub fn defaults(ts: &TableSchema) -> Row {
        Row {
            cols: ts
                .columns
                .iter()
                .map(|(n, t)| (n.clone(), Datum::default_of(t)))
                .collect(),
        }
    }

    /// A column's value (an empty datum for an unknown column).
    pub fn get(&self, col: &str) -> &Datum {
        static EMPTY: Datum = Datum {
            keys: Vec::new(),
            values: None,
        };
        self.cols.get(col).unwrap_or(&EMPTY)
    }

    /// A string column's value, `""` when empty.
    pub fn str(&self, col: &str) -> &str {
        self.get(col).as_str().unwrap_or("")
    }

    /// An integer column's value.
    pub fn int(&self, col: &str) -> Option<i64> {
        self.get(col).keys.first().and_then(|a| a.as_int())
    }

    /// A boolean column's value.
    pub fn bool(&self, col: &str) -> Option<bool> {
        self.get(col).keys.first().and_then(|a| a.as_bool())
    }

    /// The strings of a set-of-strings column.
    pub fn strs(&self, col: &str) -> impl Iterator<Item = &str> {
        self.get(col).keys.iter().filter_map(|a| a.as_str())
    }

    /// The UUIDs of a set-of-references column.
    pub fn uuids(&self, col: &str) -> impl Iterator<Item = Uuid> + '_ {
        self.get(col).keys.iter().filter_map(|a| a.as_uuid())
    }

    /// A value from a string→string map column.
    pub fn map_get(&self, col: &str, key: &str) -> Option<&str> {
        self.get(col).get(key).and_then(|a| a.as_str())
    }

    /// The row as the JSON object `ovsdb-server` writes for an insert: the columns whose
    /// value differs from the column type's default, in column-name order (columns not in
    /// `ts` are left out).
    pub fn to_json(&self, ts: &TableSchema) -> Value {
        let mut o = serde_json::Map::new();
        for (c, d) in &self.cols {
            let Some(ct) = ts.columns.get(c) else {
                continue;
            };
            if *d != Datum::default_of(ct) {
                o.insert(c.clone(), d.to_json());
            }
        }
        Value::Object(o)
    }
}

/// One table's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Rows by UUID.
    /// Rows by UUID (shared: a reader may keep a row while the replica moves on; an update
    /// copies a row only if someone still holds it).
    pub rows: HashMap<Uuid, Arc<Row>>,
}

/// How a row update's columns are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    /// Listed columns carry their whole new value (RFC 7047 `update`, old file format).
    Values,
    /// Listed set/map columns carry a diff (`update2` `modify`, files with `_is_diff`).
    Diff,
}

/// A database replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    /// The schema.
    pub schema: DatabaseSchema,
    /// Table name → rows (every schema table present).
    pub tables: BTreeMap<String, Table>,
}

impl Database {
    /// An empty database of `schema`.
    pub fn new(schema: DatabaseSchema) -> Database {
        let tables = schema
            .tables
            .keys()
            .map(|t| (t.clone(), Table::default()))
            .collect();
        Database { schema, tables }
    }

    /// A table's rows (an empty table for unknown names).
    pub fn table(&self, name: &str) -> &Table {
        static EMPTY: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
        self.tables
            .get(name)
            .unwrap_or_else(|| EMPTY.get_or_init(Table::default))
    }

    /// Looks a row up.
    pub fn row(&self, table: &str, uuid: Uuid) -> Option<&Row> {
        self.tables.get(table)?.rows.get(&uuid).map(|r| &**r)
    }

    /// Inserts (or replaces) a whole row: columns missing from `row` take their default,
    /// columns the table does not have are an error, as is a value that does not fit its
    /// column's type.
    pub fn insert_row(&mut self, table: &str, uuid: Uuid, row: Row) -> Result<()> {
        let ts = self
            .schema
            .tables
            .get(table)
            .ok_or_else(|| Error::syntax(format!("unknown table {table:?}")))?;
        let mut full = Row::defaults(ts);
        for (c, d) in row.cols {
            let ct = ts
                .columns
                .get(&c)
                .ok_or_else(|| Error::syntax(format!("unknown column {table}.{c}")))?;
            // Round-trip through JSON: the one place values are checked against a type.
            let d = Datum::from_json(&d.to_json(), ct)
                .map_err(|e| Error::syntax(format!("{table}.{c}: {e}")))?;
            full.cols.insert(c, d);
        }
        self.tables
            .entry(table.to_owned())
            .or_default()
            .rows
            .insert(uuid, Arc::new(full));
        Ok(())
    }

    /// Applies one row update: `None` deletes; otherwise the listed columns are set (a new
    /// row starts from defaults).
    pub fn apply_row(
        &mut self,
        table: &str,
        uuid: Uuid,
        new: Option<&Value>,
        kind: UpdateKind,
    ) -> Result<()> {
        let ts = self
            .schema
            .tables
            .get(table)
            .ok_or_else(|| Error::syntax(format!("unknown table {table:?}")))?;
        let t = self.tables.entry(table.to_owned()).or_default();
        let Some(new) = new else {
            t.rows.remove(&uuid);
            return Ok(());
        };
        let cols = new
            .as_object()
            .ok_or_else(|| Error::syntax(format!("row {uuid} is not an object")))?;
        // Parse everything first so a bad column leaves the row as it was.
        let mut parsed = Vec::with_capacity(cols.len());
        for (c, v) in cols {
            let Some(ct) = ts.columns.get(c) else {
                if c.starts_with('_') {
                    continue;
                }
                return Err(Error::syntax(format!("unknown column {table}.{c}")));
            };
            let d =
                Datum::from_json(v, ct).map_err(|e| Error::syntax(format!("{table}.{c}: {e}")))?;
            parsed.push((c, ct, d));
        }
        // A new row's columns are whole values even in a diff-format record.
        let is_new = !t.rows.contains_key(&uuid);
        let row = Arc::make_mut(
            t.rows
                .entry(uuid)
                .or_insert_with(|| Arc::new(Row::defaults(ts))),
        );
        for (c, ct, d) in parsed {
            let slot = row
                .cols
                .entry(c.clone())
                .or_insert_with(|| Datum::empty(ct));
            if kind == UpdateKind::Diff && !is_new && !ct.is_scalar() {
                slot.apply_diff(&d);
            } else {
                *slot = d;
            }
        }
        Ok(())
    }

    /// Applies a `{table: {uuid: row-or-null}}` object (a file record or an `update` body);
    /// keys starting with `_` are metadata and skipped.
    pub fn apply_tables(&mut self, v: &Value, kind: UpdateKind) -> Result<()> {
        let o = v
            .as_object()
            .ok_or_else(|| Error::syntax("update is not an object"))?;
        for (table, rows) in o {
            if table.starts_with('_') {
                continue;
            }
            let rows = rows
                .as_object()
                .ok_or_else(|| Error::syntax(format!("{table}: rows not an object")))?;
            for (u, r) in rows {
                let uuid =
                    Uuid::parse(u).ok_or_else(|| Error::syntax(format!("bad row uuid {u:?}")))?;
                let new = if r.is_null() { None } else { Some(r) };
                self.apply_row(table, uuid, new, kind)?;
            }
        }
        Ok(())
    }

    /// Applies an `update2` body (`{table: {uuid: {"initial"|"insert"|"modify": row} | {"delete": null}}}`).
    pub fn apply_update2(&mut self, v: &Value) -> Result<()> {
        let o = v
            .as_object()
            .ok_or_else(|| Error::syntax("update2 is not an object"))?;
        for (table, rows) in o {
            let rows = rows
                .as_object()
                .ok_or_else(|| Error::syntax(format!("{table}: rows not an object")))?;
            for (u, r) in rows {
                let uuid =
                    Uuid::parse(u).ok_or_else(|| Error::syntax(format!("bad row uuid {u:?}")))?;
                let r = r
                    .as_object()
                    .ok_or_else(|| Error::syntax("row update is not an object"))?;
                if let Some(row) = r.get("initial").or_else(|| r.get("insert")) {
                    self.apply_row(table, uuid, None, UpdateKind::Values)?;
                    self.apply_row(table, uuid, Some(row), UpdateKind::Values)?;
                } else if let Some(row) = r.get("modify") {
                    self.apply_row(table, uuid, Some(row), UpdateKind::Diff)?;
                } else if r.contains_key("delete") {
                    self.apply_row(table, uuid, None, UpdateKind::Values)?;
                } else {
                    return Err(Error::syntax(format!(
                        "row update for {uuid} has no known key"
                    )));
                }
            }
        }
        Ok(())
    }
}
