//! An in-memory replica of a database: tables of rows by UUID, updated by whole rows,
//! RFC 7047 `update` notifications, and `update2`/file-format diffs.
//!
//! Memory: replicas of an `OVN_Southbound` hold hundreds of thousands of rows, so a row is
//! compact — its table's column names and defaults live once per table ([`Layout`]), a row
//! stores only its non-default values by column position ([`Columns`]), and values read
//! into a table are shared between its rows (a logical flow's pipeline, table, priority,
//! stage name and datapath repeat across thousands of rows). `update2` bodies can be applied
//! from their text row by row ([`Database::apply_update2_text`]) without a tree of the whole
//! body.
//!
//! A table can be *streamed* instead of kept ([`Database::stream_table`]): its updates are
//! queued as [`StreamEvent`]s for a reader that keeps its own digest of the rows (northd's
//! record of the SB logical flows: a fingerprint per row where the replica would hold the
//! text), and the replica holds none of its rows.

use crate::datum::Datum;
use crate::schema::{ColumnType, DatabaseSchema, TableSchema};
use crate::{Error, Result, Uuid};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// A table's columns as its rows share them: the names, sorted, and each column's default
/// value (one per table, behind an `Arc`, so a row does not repeat its column names).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    names: Vec<String>,
    defaults: Vec<Datum>,
}

impl Layout {
    /// The layout of a table schema's columns.
    pub fn of(ts: &TableSchema) -> Layout {
        Layout {
            names: ts.columns.keys().cloned().collect(),
            defaults: ts.columns.values().map(Datum::default_of).collect(),
        }
    }

    /// A column's position.
    pub fn index(&self, col: &str) -> Option<usize> {
        self.names.binary_search_by(|n| n.as_str().cmp(col)).ok()
    }

    /// The column names, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// A row's column values: every column of its [`Layout`] is present; only the values that
/// differ from the column's default are stored (by column position), so a row of mostly
/// empty columns costs little. Reads like a map of column name → value.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    layout: Arc<Layout>,
    /// (column position, value), sorted by position; values are shared between rows
    /// (see [`Table`]).
    vals: Vec<(u32, Arc<Datum>)>,
}

impl Columns {
    /// A row of `layout`'s defaults.
    pub fn new(layout: Arc<Layout>) -> Columns {
        Columns {
            layout,
            vals: Vec::new(),
        }
    }

    /// The layout.
    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    fn slot(&self, i: usize) -> std::result::Result<usize, usize> {
        self.vals.binary_search_by_key(&(i as u32), |(j, _)| *j)
    }

    fn at(&self, i: usize) -> &Datum {
        match self.slot(i) {
            Ok(k) => &self.vals[k].1,
            Err(_) => &self.layout.defaults[i],
        }
    }

    /// A column's value (`None` for a column the row does not have).
    pub fn get(&self, col: &str) -> Option<&Datum> {
        self.layout.index(col).map(|i| self.at(i))
    }

    /// A column's value, to change in place.
    pub fn get_mut(&mut self, col: &str) -> Option<&mut Datum> {
        let i = self.layout.index(col)?;
        let k = match self.slot(i) {
            Ok(k) => k,
            Err(k) => {
                self.vals
                    .insert(k, (i as u32, Arc::new(self.layout.defaults[i].clone())));
                k
            }
        };
        Some(Arc::make_mut(&mut self.vals[k].1))
    }

    /// True when the row has column `col`.
    pub fn contains_key(&self, col: &str) -> bool {
        self.layout.index(col).is_some()
    }

    /// Fills a row of defaults from (position, value) pairs sorted by position, each
    /// position once at most (a fresh row: nothing stored yet).
    fn set_all(&mut self, vals: impl Iterator<Item = (usize, Arc<Datum>)>) {
        let layout = &self.layout;
        // Not `collect`: collected in place from a `Vec` of bigger items, the result would
        // keep that allocation (7 columns: 448 bytes where 112 are used).
        let mut v = Vec::with_capacity(vals.size_hint().0);
        for (i, d) in vals {
            if *d != layout.defaults[i] {
                v.push((i as u32, d));
            }
        }
        v.dedup_by_key(|(i, _)| *i);
        v.shrink_to_fit();
        self.vals = v;
    }

    /// Sets column `i` (a position in the layout).
    fn set_at(&mut self, i: usize, d: Arc<Datum>) {
        let default = *d == self.layout.defaults[i];
        match (self.slot(i), default) {
            (Ok(k), true) => {
                self.vals.remove(k);
            }
            (Ok(k), false) => self.vals[k].1 = d,
            (Err(_), true) => {}
            (Err(k), false) => self.vals.insert(k, (i as u32, d)),
        }
    }

    /// Sets a column, returning its old value; a column the layout lacks is added to this
    /// row's (copied) layout.
    pub fn insert(&mut self, col: String, d: Datum) -> Option<Datum> {
        match self.layout.index(&col) {
            Some(i) => {
                let old = self.at(i).clone();
                self.set_at(i, Arc::new(d));
                Some(old)
            }
            None => {
                let pos = self.layout.names.partition_point(|n| *n < col);
                let l = Arc::make_mut(&mut self.layout);
                l.names.insert(pos, col);
                l.defaults.insert(pos, Datum::default());
                for (j, _) in &mut self.vals {
                    if *j as usize >= pos {
                        *j += 1;
                    }
                }
                self.set_at(pos, Arc::new(d));
                None
            }
        }
    }

    /// Columns and values, in column-name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Datum)> {
        self.layout
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), self.at(i)))
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.layout.names.len()
    }

    /// True for a row without columns.
    pub fn is_empty(&self) -> bool {
        self.layout.names.is_empty()
    }
}

impl PartialEq for Columns {
    fn eq(&self, o: &Columns) -> bool {
        if Arc::ptr_eq(&self.layout, &o.layout) || self.layout == o.layout {
            // Same columns: compare position by position (a stored value may equal the
            // default after an in-place change, so not the stored lists).
            (0..self.len()).all(|i| self.at(i) == o.at(i))
        } else {
            self.iter().eq(o.iter())
        }
    }
}
impl Eq for Columns {}

/// One row: column name → value (every schema column present).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Row {
    /// Column values.
    pub cols: Columns,
}

impl Row {
    /// A row of the schema's defaults.
    pub fn defaults(ts: &TableSchema) -> Row {
        Row {
            cols: Columns::new(Arc::new(Layout::of(ts))),
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
        for (c, d) in self.cols.iter() {
            let Some(ct) = ts.columns.get(c) else {
                continue;
            };
            if *d != Datum::default_of(ct) {
                o.insert(c.to_owned(), d.to_json());
            }
        }
        Value::Object(o)
    }
}

/// One table's rows.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Rows by UUID (shared: a reader may keep a row while the replica moves on; an update
    /// copies a row only if someone still holds it).
    pub rows: HashMap<Uuid, Arc<Row>>,
    /// The layout new rows get (made from the schema on first use).
    layout: Option<Arc<Layout>>,
    /// Values read into this table's rows, shared: most columns repeat across rows (a
    /// logical flow's pipeline, table, priority, stage name, datapath), so each distinct
    /// value is held once.
    values: Interner,
}

/// A set of shared values; values no row holds any more are dropped as the set grows.
#[derive(Debug, Clone, Default)]
struct Interner {
    set: HashSet<Arc<Datum>, rustc_hash::FxBuildHasher>,
    /// Size after the last sweep.
    live: usize,
}

impl Interner {
    fn intern(&mut self, d: Datum) -> Arc<Datum> {
        if let Some(a) = self.set.get(&d) {
            return a.clone();
        }
        if self.set.len() >= 2 * self.live + 1024 {
            self.set.retain(|a| Arc::strong_count(a) > 1);
            self.live = self.set.len();
        }
        let a = Arc::new(d);
        self.set.insert(a.clone());
        a
    }
}

impl PartialEq for Table {
    fn eq(&self, o: &Table) -> bool {
        self.rows == o.rows
    }
}
impl Eq for Table {}

impl Table {
    fn new_row(&mut self, ts: &TableSchema) -> Row {
        let l = self.layout.get_or_insert_with(|| Arc::new(Layout::of(ts)));
        Row {
            cols: Columns::new(l.clone()),
        }
    }
}

/// How a row update's columns are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    /// Listed columns carry their whole new value (RFC 7047 `update`, old file format).
    Values,
    /// Listed set/map columns carry a diff (`update2` `modify`, files with `_is_diff`).
    Diff,
}

/// What happened to a row of a streamed table ([`Database::stream_table`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowEvent {
    /// Forget every row of the table known so far; the rows it holds follow as `Put`s (the
    /// first event of a new replica, after a reconnect for example).
    Reset,
    /// The row now holds exactly these values (inserted, or replaced whole).
    Put(Uuid, Row),
    /// The row changed, but the update carried only a diff, which a replica that does not
    /// hold the row cannot apply: its contents are unknown here.
    Changed(Uuid),
    /// The row was deleted.
    Deleted(Uuid),
}

/// A [`RowEvent`] of a streamed table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    /// The table.
    pub table: Arc<str>,
    /// What happened.
    pub event: RowEvent,
}

/// A database replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    /// The schema.
    pub schema: DatabaseSchema,
    /// Table name → rows (every schema table present; a streamed table stays empty).
    pub tables: BTreeMap<String, Table>,
    /// The streamed tables, by name.
    streamed: BTreeMap<String, Arc<str>>,
    /// Their events not yet taken, in arrival order.
    events: Vec<StreamEvent>,
}

impl Database {
    /// An empty database of `schema`.
    pub fn new(schema: DatabaseSchema) -> Database {
        let tables = schema
            .tables
            .keys()
            .map(|t| (t.clone(), Table::default()))
            .collect();
        Database {
            schema,
            tables,
            streamed: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    /// Streams `table` from now on: its rows are not kept but handed over as events
    /// ([`Database::take_events`]), starting with a [`RowEvent::Reset`] and a
    /// [`RowEvent::Put`] for each row the table held. An unknown table is an error.
    pub fn stream_table(&mut self, table: &str) -> Result<()> {
        if !self.schema.tables.contains_key(table) {
            return Err(Error::syntax(format!("unknown table {table:?}")));
        }
        if self.streamed.contains_key(table) {
            return Ok(());
        }
        let name: Arc<str> = table.into();
        self.streamed.insert(table.to_owned(), name.clone());
        let event = |event| StreamEvent {
            table: name.clone(),
            event,
        };
        self.events.push(event(RowEvent::Reset));
        if let Some(t) = self.tables.get_mut(table) {
            for (u, r) in std::mem::take(&mut t.rows) {
                let r = Arc::try_unwrap(r).unwrap_or_else(|r| (*r).clone());
                self.events.push(event(RowEvent::Put(u, r)));
            }
        }
        Ok(())
    }

    /// Whether `table` is streamed.
    pub fn is_streamed(&self, table: &str) -> bool {
        self.streamed.contains_key(table)
    }

    /// The streamed tables' events since the last call, in arrival order.
    pub fn take_events(&mut self) -> Vec<StreamEvent> {
        std::mem::take(&mut self.events)
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
        let t = self.tables.entry(table.to_owned()).or_default();
        let mut full = t.new_row(ts);
        for (c, d) in row.cols.iter() {
            let ct = ts
                .columns
                .get(c)
                .ok_or_else(|| Error::syntax(format!("unknown column {table}.{c}")))?;
            // Round-trip through JSON: the one place values are checked against a type.
            let d = Datum::from_json(&d.to_json(), ct)
                .map_err(|e| Error::syntax(format!("{table}.{c}: {e}")))?;
            full.cols.insert(c.to_owned(), d);
        }
        if let Some(name) = self.streamed.get(table) {
            self.events.push(StreamEvent {
                table: name.clone(),
                event: RowEvent::Put(uuid, full),
            });
            return Ok(());
        }
        t.rows.insert(uuid, Arc::new(full));
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
        if let Some(name) = self.streamed.get(table) {
            let fresh = self.tables.entry(table.to_owned()).or_default().new_row(ts);
            let event = stream_event(table, ts, fresh, uuid, new, kind)?;
            self.events.push(StreamEvent {
                table: name.clone(),
                event,
            });
            return Ok(());
        }
        let t = self.tables.entry(table.to_owned()).or_default();
        let Some(new) = new else {
            t.rows.remove(&uuid);
            return Ok(());
        };
        let cols = new
            .as_object()
            .ok_or_else(|| Error::syntax(format!("row {uuid} is not an object")))?;
        let fresh = t.new_row(ts);
        // Parse everything first so a bad column leaves the row as it was.
        let mut parsed = parse_columns(table, ts, fresh.cols.layout(), cols)?;
        // A new row's columns are whole values even in a diff-format record.
        let values = &mut t.values;
        match t.rows.entry(uuid) {
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut row = fresh;
                parsed.sort_by_key(|p| p.0);
                row.cols
                    .set_all(parsed.into_iter().map(|(i, _, d)| (i, values.intern(d))));
                e.insert(Arc::new(row));
            }
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let row = Arc::make_mut(e.get_mut());
                for (i, ct, d) in parsed {
                    // OVSDB diffs (`ovsdb_datum_diff`) carry the new value for a column of at
                    // most one element (scalar or optional: `["set",[]]` clears it) and a
                    // toggle set only for sets of several elements and maps.
                    let d = if kind == UpdateKind::Diff && (ct.max > 1 || ct.is_map()) {
                        let mut v = row.cols.at(i).clone();
                        v.apply_diff(&d);
                        v
                    } else {
                        d
                    };
                    row.cols.set_at(i, values.intern(d));
                }
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
                self.apply_update2_row(table, u, r)?;
            }
        }
        Ok(())
    }

    /// [`Database::apply_update2`] on the body's JSON text, one row at a time: no tree of
    /// the whole body is built (an `update2` for 20,000 inserted rows is tens of MB as a
    /// `Value`). `touched` receives each kept row's (table, uuid) (a streamed table's rows
    /// become events instead).
    pub fn apply_update2_text(
        &mut self,
        text: &str,
        mut touched: impl FnMut(&str, Uuid),
    ) -> Result<()> {
        use serde_json::value::RawValue;
        let tables: BTreeMap<String, BTreeMap<String, &RawValue>> = serde_json::from_str(text)
            .map_err(|e| Error::syntax(format!("update2 is not an object of objects: {e}")))?;
        for (table, rows) in tables {
            let streamed = self.is_streamed(&table);
            for (u, r) in rows {
                let r: Value = serde_json::from_str(r.get())?;
                let uuid = self.apply_update2_row(&table, &u, &r)?;
                if !streamed {
                    touched(&table, uuid);
                }
            }
        }
        Ok(())
    }

    fn apply_update2_row(&mut self, table: &str, u: &str, r: &Value) -> Result<Uuid> {
        let uuid = Uuid::parse(u).ok_or_else(|| Error::syntax(format!("bad row uuid {u:?}")))?;
        let r = r
            .as_object()
            .ok_or_else(|| Error::syntax("row update is not an object"))?;
        if let Some(row) = r.get("initial").or_else(|| r.get("insert")) {
            // The row as a whole (a streamed table's `Put` replaces whatever was known).
            if !self.is_streamed(table) {
                self.apply_row(table, uuid, None, UpdateKind::Values)?;
            }
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
        Ok(uuid)
    }
}

/// The event for an update of a streamed table's row (`row`: the table's defaults): a whole
/// row is parsed and checked as a kept row would be; a diff cannot be applied without the
/// row.
fn stream_event(
    table: &str,
    ts: &TableSchema,
    mut row: Row,
    uuid: Uuid,
    new: Option<&Value>,
    kind: UpdateKind,
) -> Result<RowEvent> {
    let Some(new) = new else {
        return Ok(RowEvent::Deleted(uuid));
    };
    let cols = new
        .as_object()
        .ok_or_else(|| Error::syntax(format!("row {uuid} is not an object")))?;
    if kind == UpdateKind::Diff {
        return Ok(RowEvent::Changed(uuid));
    }
    let mut parsed = parse_columns(table, ts, row.cols.layout(), cols)?;
    parsed.sort_by_key(|p| p.0);
    row.cols
        .set_all(parsed.into_iter().map(|(i, _, d)| (i, Arc::new(d))));
    Ok(RowEvent::Put(uuid, row))
}

/// A row update's columns (`cols`), each checked against its type in `ts` and placed by
/// `layout`: (position, type, value). Metadata columns (`_…`) are skipped; an unknown column
/// or a value that does not fit is an error naming `table`.
fn parse_columns<'a>(
    table: &str,
    ts: &'a TableSchema,
    layout: &Layout,
    cols: &serde_json::Map<String, Value>,
) -> Result<Vec<(usize, &'a ColumnType, Datum)>> {
    let mut parsed = Vec::with_capacity(cols.len());
    for (c, v) in cols {
        let (Some(ct), Some(i)) = (ts.columns.get(c), layout.index(c)) else {
            if c.starts_with('_') {
                continue;
            }
            return Err(Error::syntax(format!("unknown column {table}.{c}")));
        };
        let d = Datum::from_json(v, ct).map_err(|e| Error::syntax(format!("{table}.{c}: {e}")))?;
        parsed.push((i, ct, d));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Atom;
    use serde_json::json;

    fn db() -> Database {
        let schema = DatabaseSchema::from_json(&json!({
            "name": "T", "version": "1.0.0",
            "tables": {"R": {"columns": {
                "n": {"type": "integer"},
                "s": {"type": "string"},
                "m": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
                "e": {"type": {"key": "integer", "min": 0, "max": "unlimited"}}
            }}}
        }))
        .unwrap();
        Database::new(schema)
    }

    #[test]
    fn rows_read_like_maps_and_share_values() {
        let mut d = db();
        let (a, b) = (Uuid(1), Uuid(2));
        let row = json!({"n": 7, "s": "x", "m": ["map", [["k", "v"]]]});
        d.apply_row("R", a, Some(&row), UpdateKind::Values).unwrap();
        d.apply_row("R", b, Some(&row), UpdateKind::Values).unwrap();
        let (ra, rb) = (d.row("R", a).unwrap(), d.row("R", b).unwrap());
        assert_eq!(ra, rb);
        assert_eq!((ra.int("n"), ra.str("s")), (Some(7), "x"));
        assert_eq!(ra.map_get("m", "k"), Some("v"));
        // Defaults read as the column type's; unknown columns as empty.
        assert!(ra.get("e").keys.is_empty() && ra.get("nope").keys.is_empty());
        assert_eq!(
            ra.cols.iter().map(|(c, _)| c).collect::<Vec<_>>(),
            ["e", "m", "n", "s"]
        );
        assert!(
            std::ptr::eq(ra.get("s"), rb.get("s")),
            "equal values are shared"
        );
        // A diff changes one row only.
        d.apply_row(
            "R",
            a,
            Some(&json!({"e": ["set", [3]], "n": 0})),
            UpdateKind::Diff,
        )
        .unwrap();
        let (ra, rb) = (d.row("R", a).unwrap(), d.row("R", b).unwrap());
        assert_eq!(ra.uuids("e").count(), 0);
        assert_eq!(ra.get("e").keys, [Atom::Integer(3)]);
        assert_eq!((ra.int("n"), rb.int("n")), (Some(0), Some(7)));
        assert_ne!(ra, rb);
        // In-place changes and added columns.
        let mut r = rb.clone();
        r.cols.get_mut("n").unwrap().keys = vec![Atom::Integer(0)];
        r.cols.get_mut("m").unwrap().keys.clear();
        r.cols.get_mut("m").unwrap().values = Some(Vec::new());
        assert_eq!(r.int("n"), Some(0));
        assert_eq!(rb.int("n"), Some(7), "the shared value is untouched");
        let mut want = Row::default();
        want.cols
            .insert("s".into(), Datum::scalar(Atom::String("x".into())));
        want.cols
            .insert("n".into(), Datum::scalar(Atom::Integer(0)));
        assert_eq!(want.cols.len(), 2);
        d.insert_row("R", Uuid(3), want).unwrap();
        assert_eq!(d.row("R", Uuid(3)).unwrap(), &r);
        assert_eq!(r.to_json(&d.schema.tables["R"]), json!({"s": "x"}));
    }

    #[test]
    fn a_streamed_table_hands_its_rows_over_as_events() {
        let mut d = db();
        let (a, b) = (Uuid(1), Uuid(2));
        d.apply_row("R", a, Some(&json!({"n": 1})), UpdateKind::Values)
            .unwrap();
        d.stream_table("R").unwrap();
        assert!(d.stream_table("nope").is_err());
        assert!(d.table("R").rows.is_empty(), "the rows held become events");
        let ev = |e| StreamEvent {
            table: "R".into(),
            event: e,
        };
        let row = |v: Value| {
            let mut o = db();
            o.apply_row("R", Uuid(9), Some(&v), UpdateKind::Values)
                .unwrap();
            o.row("R", Uuid(9)).unwrap().clone()
        };
        assert_eq!(
            d.take_events(),
            [
                ev(RowEvent::Reset),
                ev(RowEvent::Put(a, row(json!({"n": 1}))))
            ]
        );
        let mut touched = Vec::new();
        d.apply_update2_text(
            r#"{"R": {"00000000-0000-0000-0000-000000000002": {"insert": {"s": "x", "n": 2}},
                      "00000000-0000-0000-0000-000000000001": {"modify": {"n": 3}}}}"#,
            |t, u| touched.push((t.to_owned(), u)),
        )
        .unwrap();
        d.apply_update2(&json!({"R": {"00000000-0000-0000-0000-000000000002": {"delete": null}}}))
            .unwrap();
        assert!(
            touched.is_empty(),
            "streamed rows are not reported as changed"
        );
        assert!(d.table("R").rows.is_empty());
        assert_eq!(
            d.take_events(),
            [
                ev(RowEvent::Changed(a)),
                ev(RowEvent::Put(b, row(json!({"s": "x", "n": 2})))),
                ev(RowEvent::Deleted(b)),
            ]
        );
        // A bad row is an error and no event.
        assert!(
            d.apply_row("R", b, Some(&json!({"n": "x"})), UpdateKind::Values)
                .is_err()
        );
        assert!(d.take_events().is_empty());
    }
}
