//! Database schemas (RFC 7047 §3.2): tables, columns and their types.

use crate::{Error, Result};
use serde_json::Value;
use std::collections::BTreeMap;

/// The kinds of atom a column may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicType {
    /// 64-bit signed integer.
    Integer,
    /// Double.
    Real,
    /// `true`/`false`.
    Boolean,
    /// UTF-8 string.
    String,
    /// A row UUID.
    Uuid,
}

impl AtomicType {
    fn parse(s: &str) -> Result<AtomicType> {
        Ok(match s {
            "integer" => AtomicType::Integer,
            "real" => AtomicType::Real,
            "boolean" => AtomicType::Boolean,
            "string" => AtomicType::String,
            "uuid" => AtomicType::Uuid,
            _ => return Err(Error::syntax(format!("unknown atomic type {s:?}"))),
        })
    }
}

/// An atomic type with its constraints (only `refTable` is kept; the rest is the server's job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseType {
    /// The atom kind.
    pub atomic: AtomicType,
    /// For UUIDs: the table referred to.
    pub ref_table: Option<String>,
}

impl BaseType {
    fn parse(v: &Value) -> Result<BaseType> {
        match v {
            Value::String(s) => Ok(BaseType {
                atomic: AtomicType::parse(s)?,
                ref_table: None,
            }),
            Value::Object(o) => {
                let t = o
                    .get("type")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::syntax("base type without \"type\""))?;
                Ok(BaseType {
                    atomic: AtomicType::parse(t)?,
                    ref_table: o.get("refTable").and_then(Value::as_str).map(str::to_owned),
                })
            }
            _ => Err(Error::syntax("bad base type")),
        }
    }
}

/// A column's type: key, optional value (a map), and the number of elements allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnType {
    /// Key (or the element type for sets and scalars).
    pub key: BaseType,
    /// Value type for maps.
    pub value: Option<BaseType>,
    /// Minimum number of elements (0 or 1).
    pub min: u64,
    /// Maximum number of elements (`u64::MAX` for "unlimited").
    pub max: u64,
}

impl ColumnType {
    /// A plain scalar column of `atomic`.
    pub fn scalar(atomic: AtomicType) -> ColumnType {
        ColumnType {
            key: BaseType {
                atomic,
                ref_table: None,
            },
            value: None,
            min: 1,
            max: 1,
        }
    }

    /// True for a column holding exactly one atom (updates replace it, diffs too).
    pub fn is_scalar(&self) -> bool {
        self.min == 1 && self.max == 1 && self.value.is_none()
    }

    /// True for a map column.
    pub fn is_map(&self) -> bool {
        self.value.is_some()
    }

    fn parse(v: &Value) -> Result<ColumnType> {
        match v {
            Value::String(_) => Ok(ColumnType {
                key: BaseType::parse(v)?,
                value: None,
                min: 1,
                max: 1,
            }),
            Value::Object(o) => {
                let key = BaseType::parse(
                    o.get("key")
                        .ok_or_else(|| Error::syntax("column type without key"))?,
                )?;
                let value = o.get("value").map(BaseType::parse).transpose()?;
                let min = o.get("min").and_then(Value::as_u64).unwrap_or(1);
                let max = match o.get("max") {
                    None => 1,
                    Some(Value::String(s)) if s == "unlimited" => u64::MAX,
                    Some(m) => m.as_u64().ok_or_else(|| Error::syntax("bad max"))?,
                };
                Ok(ColumnType {
                    key,
                    value,
                    min,
                    max,
                })
            }
            _ => Err(Error::syntax("bad column type")),
        }
    }
}

/// One table's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// Column name → type (the implicit `_uuid`/`_version` are not listed).
    pub columns: BTreeMap<String, ColumnType>,
    /// Root tables keep unreferenced rows.
    pub is_root: bool,
}

/// A database schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSchema {
    /// Database name (`OVN_Northbound`, `Open_vSwitch`, …).
    pub name: String,
    /// Schema version string.
    pub version: String,
    /// Table name → schema.
    pub tables: BTreeMap<String, TableSchema>,
}

impl DatabaseSchema {
    /// Reads a schema from its JSON form (a `.ovsschema` file or `get_schema`'s answer).
    pub fn from_json(v: &Value) -> Result<DatabaseSchema> {
        let o = v
            .as_object()
            .ok_or_else(|| Error::syntax("schema is not an object"))?;
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::syntax("schema without name"))?
            .to_owned();
        let version = o
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut tables = BTreeMap::new();
        let ts = o
            .get("tables")
            .and_then(Value::as_object)
            .ok_or_else(|| Error::syntax("schema without tables"))?;
        for (tname, t) in ts {
            let cols = t
                .get("columns")
                .and_then(Value::as_object)
                .ok_or_else(|| Error::syntax(format!("table {tname} without columns")))?;
            let mut columns = BTreeMap::new();
            for (cname, c) in cols {
                let ty = c
                    .get("type")
                    .ok_or_else(|| Error::syntax(format!("column {tname}.{cname} without type")))?;
                columns.insert(
                    cname.clone(),
                    ColumnType::parse(ty)
                        .map_err(|e| Error::syntax(format!("column {tname}.{cname}: {e}")))?,
                );
            }
            let is_root = t.get("isRoot").and_then(Value::as_bool).unwrap_or(false);
            tables.insert(tname.clone(), TableSchema { columns, is_root });
        }
        Ok(DatabaseSchema {
            name,
            version,
            tables,
        })
    }
}
