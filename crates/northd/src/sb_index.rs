//! Indexes of the SB rows an incremental round's binding plan reads — datapath bindings by
//! the NB row they bind, port bindings and multicast groups by datapath, port groups by the
//! NB group they come from, address sets by name — kept between rounds and updated from the
//! session's change list (as [`crate::sb::FlowCache`] is for logical flows). With them a
//! round that touched one switch reads that switch's rows instead of every row of five SB
//! tables (at 800 nodes the scans were most of an LSP add's planning time).
//!
//! The index holds row UUIDs only: the rows are read from the replica when used, so an
//! index entry can never disagree with the row's content, only with its existence — and
//! [`SbIndex::apply`] is called with every change the session reports.

use crate::build::Ctx;
use ovsdb::{Database, Row, Uuid};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;
use std::hash::Hash;

/// Rows of one table grouped by a key read from the row.
#[derive(Debug)]
struct Grouped<K> {
    by_key: HashMap<K, BTreeSet<Uuid>>,
    key_of: HashMap<Uuid, K>,
}

impl<K> Default for Grouped<K> {
    fn default() -> Self {
        Grouped {
            by_key: HashMap::default(),
            key_of: HashMap::default(),
        }
    }
}

impl<K: Hash + Eq + Clone> Grouped<K> {
    fn remove(&mut self, u: Uuid) {
        if let Some(k) = self.key_of.remove(&u)
            && let Some(set) = self.by_key.get_mut(&k)
        {
            set.remove(&u);
            if set.is_empty() {
                self.by_key.remove(&k);
            }
        }
    }

    fn insert(&mut self, k: K, u: Uuid) {
        self.by_key.entry(k.clone()).or_default().insert(u);
        self.key_of.insert(u, k);
    }

    fn get<'s, Q>(&'s self, k: &Q) -> impl Iterator<Item = Uuid> + use<'s, K, Q>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.by_key.get(k).into_iter().flatten().copied()
    }
}

/// The NB datapath (switch or router UUID) a `Datapath_Binding` row binds.
pub fn bound_nb_datapath(r: &Row) -> Option<Uuid> {
    r.map_get("external_ids", "logical-switch")
        .or_else(|| r.map_get("external_ids", "logical-router"))
        .and_then(Uuid::parse)
}

/// The datapath row a port binding or multicast group row names.
fn datapath_of(r: &Row) -> Option<Uuid> {
    r.get("datapath").keys.first().and_then(|a| a.as_uuid())
}

/// The NB port group an SB port group (`<datapath key>_<group>`) comes from; names of
/// another shape index as themselves.
pub fn pg_group(name: &str) -> &str {
    match name.split_once('_') {
        Some((k, g)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => g,
        _ => name,
    }
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct SbIndex {
    built: bool,
    datapaths: Grouped<Uuid>,
    port_bindings: Grouped<Uuid>,
    mcast_groups: Grouped<Uuid>,
    port_groups: Grouped<String>,
    address_sets: Grouped<String>,
}

/// The tables the index follows.
const TABLES: [&str; 5] = [
    "Datapath_Binding",
    "Port_Binding",
    "Multicast_Group",
    "Port_Group",
    "Address_Set",
];

impl SbIndex {
    /// Forgets everything: the next [`SbIndex::ensure`] reads the tables whole.
    pub fn invalidate(&mut self) {
        *self = SbIndex::default();
    }

    /// Builds the index from `sb` unless it is built already.
    pub fn ensure(&mut self, sb: &Database) {
        if self.built {
            return;
        }
        *self = SbIndex {
            built: true,
            ..SbIndex::default()
        };
        for t in TABLES {
            for (&u, r) in &sb.table(t).rows {
                self.add(t, u, r);
            }
        }
    }

    fn add(&mut self, table: &str, u: Uuid, r: &Row) {
        match table {
            "Datapath_Binding" => {
                if let Some(n) = bound_nb_datapath(r) {
                    self.datapaths.insert(n, u);
                }
            }
            "Port_Binding" => {
                if let Some(d) = datapath_of(r) {
                    self.port_bindings.insert(d, u);
                }
            }
            "Multicast_Group" => {
                if let Some(d) = datapath_of(r) {
                    self.mcast_groups.insert(d, u);
                }
            }
            "Port_Group" => self
                .port_groups
                .insert(pg_group(r.str("name")).to_owned(), u),
            "Address_Set" => self.address_sets.insert(r.str("name").to_owned(), u),
            _ => {}
        }
    }

    fn remove(&mut self, table: &str, u: Uuid) {
        match table {
            "Datapath_Binding" => self.datapaths.remove(u),
            "Port_Binding" => self.port_bindings.remove(u),
            "Multicast_Group" => self.mcast_groups.remove(u),
            "Port_Group" => self.port_groups.remove(u),
            "Address_Set" => self.address_sets.remove(u),
            _ => {}
        }
    }

    /// Takes in the SB changes the session reported (`(table, uuid)` of rows inserted,
    /// modified or deleted; `sb` is the replica after them).
    pub fn apply(&mut self, sb: &Database, changes: &[(String, Uuid)]) {
        if !self.built {
            return;
        }
        for (t, u) in changes {
            if !TABLES.contains(&t.as_str()) {
                continue;
            }
            self.remove(t, *u);
            if let Some(r) = sb.row(t, *u) {
                self.add(t, *u, r);
            }
        }
    }

    /// The SB datapath row of each of `ctx`'s datapaths (`None` where the SB has no
    /// binding; of two bindings of one NB row, the lower UUID).
    pub fn sb_datapaths(&self, ctx: &Ctx) -> Vec<Option<Uuid>> {
        ctx.datapaths
            .iter()
            .map(|d| self.datapath(d.uuid))
            .collect()
    }

    /// The SB datapath row binding NB switch or router `nb` (the lowest UUID of several).
    pub fn datapath(&self, nb: Uuid) -> Option<Uuid> {
        self.datapaths.get(&nb).next()
    }

    /// The port bindings on SB datapath row `dp`.
    pub fn port_bindings(&self, dp: Uuid) -> impl Iterator<Item = Uuid> + '_ {
        self.port_bindings.get(&dp)
    }

    /// The multicast groups on SB datapath row `dp`.
    pub fn mcast_groups(&self, dp: Uuid) -> impl Iterator<Item = Uuid> + '_ {
        self.mcast_groups.get(&dp)
    }

    /// The SB port groups made from NB port group `group` (one per datapath).
    pub fn port_groups(&self, group: &str) -> impl Iterator<Item = Uuid> + '_ {
        self.port_groups.get(group)
    }

    /// The SB address sets named `name` (normally at most one).
    pub fn address_sets(&self, name: &str) -> impl Iterator<Item = Uuid> + '_ {
        self.address_sets.get(name)
    }
}
