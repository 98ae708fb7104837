//! Column values: [`Atom`]s and [`Datum`]s, read from and written as RFC 7047 JSON.
//!
//! A datum is a sorted, duplicate-free list of keys, with values for maps; a scalar column
//! holds a one-element set. JSON forms: a bare atom, `["set", [...]]`, `["map", [[k, v]...]]`,
//! `["uuid", "…"]` (and `["named-uuid", "…"]` in transactions, resolved by the caller).

use crate::schema::{AtomicType, BaseType, ColumnType};
use crate::{Error, Result, Uuid};
use serde_json::{Value, json};
use std::cmp::Ordering;

/// One value of an atomic type.
#[derive(Debug, Clone)]
pub enum Atom {
    /// Integer.
    Integer(i64),
    /// Real.
    Real(f64),
    /// Boolean.
    Boolean(bool),
    /// String.
    String(String),
    /// UUID (a reference when the column has a `refTable`).
    Uuid(Uuid),
}

impl Atom {
    fn rank(&self) -> u8 {
        match self {
            Atom::Integer(_) => 0,
            Atom::Real(_) => 1,
            Atom::Boolean(_) => 2,
            Atom::String(_) => 3,
            Atom::Uuid(_) => 4,
        }
    }

    /// Reads an atom of `ty` from JSON.
    pub fn from_json(v: &Value, ty: &BaseType) -> Result<Atom> {
        let bad = || Error::syntax(format!("expected {:?}, got {v}", ty.atomic));
        Ok(match ty.atomic {
            AtomicType::Integer => Atom::Integer(v.as_i64().ok_or_else(bad)?),
            AtomicType::Real => Atom::Real(v.as_f64().ok_or_else(bad)?),
            AtomicType::Boolean => Atom::Boolean(v.as_bool().ok_or_else(bad)?),
            AtomicType::String => Atom::String(v.as_str().ok_or_else(bad)?.to_owned()),
            AtomicType::Uuid => {
                let a = v.as_array().ok_or_else(bad)?;
                match (
                    a.first().and_then(Value::as_str),
                    a.get(1).and_then(Value::as_str),
                ) {
                    (Some("uuid"), Some(s)) if a.len() == 2 => Atom::Uuid(
                        Uuid::parse(s).ok_or_else(|| Error::syntax(format!("bad uuid {s:?}")))?,
                    ),
                    _ => return Err(bad()),
                }
            }
        })
    }

    /// The atom's JSON form.
    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(i) => json!(i),
            Atom::Real(r) => json!(r),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(s),
            Atom::Uuid(u) => json!(["uuid", u.to_string()]),
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    /// The UUID, if this is one.
    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            Atom::Uuid(u) => Some(*u),
            _ => None,
        }
    }
}

impl PartialEq for Atom {
    fn eq(&self, o: &Atom) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Atom {}
impl PartialOrd for Atom {
    fn partial_cmp(&self, o: &Atom) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Atom {
    fn cmp(&self, o: &Atom) -> Ordering {
        match (self, o) {
            (Atom::Integer(a), Atom::Integer(b)) => a.cmp(b),
            (Atom::Real(a), Atom::Real(b)) => a.total_cmp(b),
            (Atom::Boolean(a), Atom::Boolean(b)) => a.cmp(b),
            (Atom::String(a), Atom::String(b)) => a.cmp(b),
            (Atom::Uuid(a), Atom::Uuid(b)) => a.cmp(b),
            _ => self.rank().cmp(&o.rank()),
        }
    }
}

impl std::hash::Hash for Atom {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // Consistent with `Eq` (`Ord`): reals are equal exactly when their bits are.
        self.rank().hash(h);
        match self {
            Atom::Integer(i) => i.hash(h),
            Atom::Real(r) => r.to_bits().hash(h),
            Atom::Boolean(b) => b.hash(h),
            Atom::String(s) => s.hash(h),
            Atom::Uuid(u) => u.hash(h),
        }
    }
}

/// A column value: sorted unique keys, and for maps one value per key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Datum {
    /// Keys (set elements), sorted, unique.
    pub keys: Vec<Atom>,
    /// Values, parallel to `keys`, for maps; `None` for sets and scalars.
    pub values: Option<Vec<Atom>>,
}

impl Datum {
    /// The empty value of a column type.
    pub fn empty(ty: &ColumnType) -> Datum {
        Datum {
            keys: Vec::new(),
            values: ty.value.as_ref().map(|_| Vec::new()),
        }
    }

    /// The default value of a column type (RFC 7047: empty, or the atom's zero when min is 1).
    pub fn default_of(ty: &ColumnType) -> Datum {
        let mut d = Datum::empty(ty);
        if ty.min >= 1 {
            d.keys.push(zero(ty.key.atomic));
            if let (Some(vs), Some(vt)) = (d.values.as_mut(), ty.value.as_ref()) {
                vs.push(zero(vt.atomic));
            }
        }
        d
    }

    /// A one-atom datum.
    pub fn scalar(a: Atom) -> Datum {
        Datum {
            keys: vec![a],
            values: None,
        }
    }

    /// Reads a value of `ty` from JSON.
    pub fn from_json(v: &Value, ty: &ColumnType) -> Result<Datum> {
        let mut d = Datum::empty(ty);
        let tagged =
            v.as_array()
                .and_then(|a| match (a.first().and_then(Value::as_str), a.len()) {
                    (Some(tag), 2) if tag == "set" || tag == "map" => Some((tag, &a[1])),
                    _ => None,
                });
        match (tagged, &ty.value) {
            (Some(("map", Value::Array(pairs))), Some(vt)) => {
                let mut kv = Vec::with_capacity(pairs.len());
                for p in pairs {
                    match p.as_array().map(Vec::as_slice) {
                        Some([k, v]) => {
                            kv.push((Atom::from_json(k, &ty.key)?, Atom::from_json(v, vt)?))
                        }
                        _ => return Err(Error::syntax(format!("bad map pair {p}"))),
                    }
                }
                kv.sort_by(|a, b| a.0.cmp(&b.0));
                kv.dedup_by(|a, b| a.0 == b.0);
                // Exact capacities: replicas hold millions of these.
                let (mut k, mut v) = (Vec::with_capacity(kv.len()), Vec::with_capacity(kv.len()));
                for (a, b) in kv {
                    k.push(a);
                    v.push(b);
                }
                d.keys = k;
                d.values = Some(v);
            }
            (Some(("set", Value::Array(elems))), None) => {
                d.keys.reserve_exact(elems.len());
                for e in elems {
                    d.keys.push(Atom::from_json(e, &ty.key)?);
                }
                d.keys.sort();
                d.keys.dedup();
                d.keys.shrink_to_fit();
            }
            // An empty set is also how an empty map is written.
            (Some(("set", Value::Array(elems))), Some(_)) if elems.is_empty() => {}
            (None, None) => d.keys = vec![Atom::from_json(v, &ty.key)?],
            _ => {
                return Err(Error::syntax(format!(
                    "value {v} does not fit its column type"
                )));
            }
        }
        let n = d.keys.len() as u64;
        if n > ty.max {
            return Err(Error::syntax(format!(
                "{n} elements where at most {} fit",
                ty.max
            )));
        }
        Ok(d)
    }

    /// The value's JSON form.
    pub fn to_json(&self) -> Value {
        match &self.values {
            Some(vs) => json!([
                "map",
                self.keys
                    .iter()
                    .zip(vs)
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
            None if self.keys.len() == 1 => self.keys[0].to_json(),
            None => json!([
                "set",
                self.keys.iter().map(Atom::to_json).collect::<Vec<_>>()
            ]),
        }
    }

    /// Applies an `update2`/file-format diff: sets toggle the listed elements (symmetric
    /// difference); maps delete a key given with its current value, change a key given with
    /// another value and add a missing key.
    pub fn apply_diff(&mut self, diff: &Datum) {
        match (&mut self.values, &diff.values) {
            (Some(vals), Some(dvals)) => {
                for (k, v) in diff.keys.iter().zip(dvals) {
                    match self.keys.binary_search(k) {
                        Ok(i) if vals[i] == *v => {
                            self.keys.remove(i);
                            vals.remove(i);
                        }
                        Ok(i) => vals[i] = v.clone(),
                        Err(i) => {
                            self.keys.insert(i, k.clone());
                            vals.insert(i, v.clone());
                        }
                    }
                }
            }
            _ => {
                for k in &diff.keys {
                    match self.keys.binary_search(k) {
                        Ok(i) => {
                            self.keys.remove(i);
                        }
                        Err(i) => self.keys.insert(i, k.clone()),
                    }
                }
            }
        }
    }

    /// The first key as a string (scalar string columns).
    pub fn as_str(&self) -> Option<&str> {
        self.keys.first().and_then(Atom::as_str)
    }

    /// Looks a key up in a map.
    pub fn get(&self, key: &str) -> Option<&Atom> {
        let vals = self.values.as_ref()?;
        // Strings sort after every other atom kind and among themselves as `str`s do: search
        // without building an `Atom` (no allocation per lookup).
        let i = self
            .keys
            .binary_search_by(|a| match a {
                Atom::String(s) => s.as_str().cmp(key),
                Atom::Uuid(_) => std::cmp::Ordering::Greater,
                _ => std::cmp::Ordering::Less,
            })
            .ok()?;
        Some(&vals[i])
    }

    /// Iterates a string→string map.
    pub fn str_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        let vals = self.values.as_deref().unwrap_or(&[]);
        self.keys
            .iter()
            .zip(vals)
            .filter_map(|(k, v)| Some((k.as_str()?, v.as_str()?)))
    }
}

fn zero(t: AtomicType) -> Atom {
    match t {
        AtomicType::Integer => Atom::Integer(0),
        AtomicType::Real => Atom::Real(0.0),
        AtomicType::Boolean => Atom::Boolean(false),
        AtomicType::String => Atom::String(String::new()),
        AtomicType::Uuid => Atom::Uuid(Uuid(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::BaseType;

    fn set_ty(a: AtomicType) -> ColumnType {
        ColumnType {
            key: BaseType {
                atomic: a,
                ref_table: None,
            },
            value: None,
            min: 0,
            max: u64::MAX,
        }
    }
    fn map_ty() -> ColumnType {
        let s = BaseType {
            atomic: AtomicType::String,
            ref_table: None,
        };
        ColumnType {
            key: s.clone(),
            value: Some(s),
            min: 0,
            max: u64::MAX,
        }
    }

    #[test]
    fn set_diff_is_symmetric_difference() {
        let ty = set_ty(AtomicType::Integer);
        let mut d = Datum::from_json(&json!(["set", [3, 1, 2, 2]]), &ty).unwrap();
        assert_eq!(d.to_json(), json!(["set", [1, 2, 3]]));
        d.apply_diff(&Datum::from_json(&json!(["set", [2, 5]]), &ty).unwrap());
        assert_eq!(d.to_json(), json!(["set", [1, 3, 5]]));
    }

    #[test]
    fn map_diff_adds_changes_and_deletes() {
        let ty = map_ty();
        let mut d = Datum::from_json(&json!(["map", [["a", "1"], ["b", "2"]]]), &ty).unwrap();
        d.apply_diff(
            &Datum::from_json(&json!(["map", [["a", "1"], ["b", "3"], ["c", "4"]]]), &ty).unwrap(),
        );
        assert_eq!(d.to_json(), json!(["map", [["b", "3"], ["c", "4"]]]));
        assert_eq!(d.get("c").and_then(Atom::as_str), Some("4"));
    }

    #[test]
    fn bad_values_are_errors() {
        let ty = set_ty(AtomicType::Integer);
        assert!(Datum::from_json(&json!("x"), &ty).is_err());
        assert!(Datum::from_json(&json!(["map", []]), &ty).is_err());
        let one = ColumnType::scalar(AtomicType::String);
        assert!(Datum::from_json(&json!(["set", ["a", "b"]]), &one).is_err());
        assert!(
            Datum::from_json(
                &json!(["uuid", "nope"]),
                &ColumnType::scalar(AtomicType::Uuid)
            )
            .is_err()
        );
    }
}
