//! The index row layout: which index row a data row has, and what it holds.
//!
//! Index row key (logical; a salted index table prefixes it with its bucket through the
//! salting API): the order-preserving encoding ([`basalt_core::keys::KeySchema`]) of the
//! indexed values, each a nullable bytes component in its own direction (null first), then,
//! for a non-unique index, the data row key as it is (the components are prefix-free, so the
//! data row is everything after them, and equal values sort by data row). A unique index
//! keys on the values alone.
//!
//! Cells, all in family [`FAMILY`]: `m` the timestamps of the indexed cells (8 bytes
//! big-endian each, in column order, 0 for a null), from which a query decides whether a
//! value has expired under its family's TTL, followed in a unique index by the data row key
//! (a non-unique index has it at the end of its row key); `c<family>:<qualifier>` each
//! covered column's newest value. One cell plus the covered ones: every cell is a MemStore
//! entry and a WAL edit on the write path.
//!
//! A local index ([`IndexDef::local`]) keeps the same rows in its data table's regions,
//! in the reserved family [`basalt_core::keys::local::LOCAL_FAMILY`]: the local row of a
//! data row in the region starting at `start` is keyed
//! `start ‖ 0x00 ‖ index name (encoded, prefix-free) ‖ logical key ‖ data row length`
//! ([`basalt_core::keys::local`]), so one region holds each index's rows in logical key
//! order, and a split or merge moves each to the region of its data row.
//!
//! A row prefix ([`IndexDef::row_prefix`]) is the first value of every entry: the data
//! row's first `n` bytes (all of them when shorter), encoded as an ascending bytes component
//! before the indexed columns (it has no timestamp in `m`). A unique local index keys its
//! local rows on the values alone and appends the row's group (that prefix) as the owner:
//! `start ‖ 0x00 ‖ name ‖ logical key ‖ group ‖ group length ‖ start length`. The group's
//! rows share a region (the table's split restriction), so the owner always lies in the data
//! row's region, and one key names each value in that region: the uniqueness check reads
//! one row.
//!
//! Which rows are indexed: a data row with no visible cell has no index row; a row that
//! lacks an indexed column is indexed with that value null, except in a sparse index (left
//! out) and in a unique index (left out: nulls never collide, as in SQL).

use crate::def::IndexDef;
use basalt_core::client::RowResult;
use basalt_core::keys::{encode_bytes_value, Field, KeySchema, Kind, Value};
use basalt_core::SaltSpec;
use basalt_core::{Error, Result};
use bytes::Bytes;
use std::collections::BTreeMap;

/// A query's answers as logical index keys: at or after `lo`, before `hi` (`None`:
/// unbounded).
#[derive(Debug, Clone, Default)]
pub(crate) struct Bounds {
    pub(crate) lo: Option<Vec<u8>>,
    pub(crate) hi: Option<Vec<u8>>,
}

/// The index table's one family.
pub const FAMILY: &[u8] = b"i";
/// The qualifier of the indexed cells' timestamps (and, in a unique index, the data row
/// key after them).
pub const META: &[u8] = b"m";

/// The qualifier a covered column is stored under.
pub fn covered_qualifier(family: &[u8], qualifier: &[u8]) -> Vec<u8> {
    let mut q = Vec::with_capacity(family.len() + qualifier.len() + 2);
    q.push(b'c');
    q.extend_from_slice(family);
    q.push(b':');
    q.extend_from_slice(qualifier);
    q
}

/// An indexed value: bytes, or null when the data row lacks the column.
pub type IndexValue = Option<Bytes>;

/// The key schema of an index's values: the row prefix's first when the index has one
/// ([`IndexDef::row_prefix`], ascending), then one per indexed column.
pub fn key_schema(def: &IndexDef) -> KeySchema {
    let prefix = def.row_prefix.map(|_| Field::new(Kind::Bytes).nullable());
    KeySchema::new(
        prefix
            .into_iter()
            .chain(def.columns.iter().map(|(_, order)| {
                let f = Field::new(Kind::Bytes).nullable();
                match order {
                    basalt_core::keys::Order::Asc => f,
                    basalt_core::keys::Order::Desc => f.desc(),
                }
            }))
            .collect(),
    )
}

/// Values as key components.
pub fn to_components(values: &[IndexValue]) -> Vec<Value> {
    values
        .iter()
        .map(|v| v.as_ref().map_or(Value::Null, |b| Value::Bytes(b.to_vec())))
        .collect()
}

/// One index row: its physical key and its cells (qualifier, value) in [`FAMILY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The physical row key in the index table.
    pub row: Bytes,
    /// The cells, by qualifier.
    pub cells: BTreeMap<Bytes, Bytes>,
}

/// Everything an index needs to lay out its rows.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The definition.
    pub def: IndexDef,
    schema: KeySchema,
    salt: Option<SaltSpec>,
    /// The prefix-free encoding of the index's name that starts each local row's payload.
    tag: Vec<u8>,
}

impl Layout {
    /// The layout of `def`.
    pub fn new(def: IndexDef) -> Self {
        let schema = key_schema(&def);
        let salt = def.salt_buckets.map(SaltSpec::new);
        let mut tag = Vec::with_capacity(def.name.len() + 3);
        // A bytes value into a bytes field: the encoding cannot fail.
        let _ = encode_bytes_value(
            &mut tag,
            &Field::new(Kind::Bytes),
            Some(def.name.as_bytes()),
        );
        Layout {
            def,
            schema,
            salt,
            tag,
        }
    }

    /// The family of the index rows: [`FAMILY`] in an index table, the reserved local-row
    /// family in the data table for a local index.
    pub fn family(&self) -> &'static [u8] {
        if self.def.local {
            basalt_core::keys::local::LOCAL_FAMILY
        } else {
            FAMILY
        }
    }

    /// The prefix-free encoding of the index's name that starts each local row's payload.
    pub fn local_tag(&self) -> &[u8] {
        &self.tag
    }

    /// The group of rows `data_row` belongs to: its first [`IndexDef::row_prefix`] bytes
    /// (the whole key when shorter, or without a row prefix).
    pub fn row_group<'a>(&self, data_row: &'a [u8]) -> &'a [u8] {
        match self.def.row_prefix {
            Some(n) => data_row.get(..n as usize).unwrap_or(data_row),
            None => data_row,
        }
    }

    /// True when a local row's owner is the data row's group, not the data row: a unique
    /// local index keys its rows on the values alone, and its owner (the group's first
    /// possible row) follows them.
    fn owned_by_group(&self) -> bool {
        self.def.unique && self.def.row_prefix.is_some()
    }

    /// The local row key of logical key `logical` of `data_row` in the region starting at
    /// `region_start`: owned by the data row (the end of a non-unique logical key), or for
    /// a unique index by the row's group, appended after the logical key.
    pub fn local_key(&self, region_start: &[u8], logical: &[u8], data_row: &[u8]) -> Result<Bytes> {
        let too_long = || Error::bad_argument("local index row key: data row too long");
        if self.owned_by_group() {
            let group = self.row_group(data_row);
            basalt_core::keys::local::local_row_of(
                region_start,
                &[&self.tag, logical, group],
                group.len(),
            )
            .ok_or_else(too_long)
        } else {
            basalt_core::keys::local::local_row_of(
                region_start,
                &[&self.tag, logical],
                data_row.len(),
            )
            .ok_or_else(too_long)
        }
    }

    /// The logical key of a local row of this index in the region starting at
    /// `region_start`; `None` when the row is not one of this index's rows there.
    pub fn local_logical<'a>(&self, physical: &'a [u8], region_start: &[u8]) -> Option<&'a [u8]> {
        let (start, payload, owner) = basalt_core::keys::local::parts(physical)?;
        if start != region_start {
            return None;
        }
        let body = payload.strip_prefix(self.tag.as_slice())?;
        if self.owned_by_group() {
            body.get(..body.len().checked_sub(owner.len())?)
        } else {
            Some(body)
        }
    }

    /// The salt of the index table, if salted.
    pub fn salt(&self) -> Option<&SaltSpec> {
        self.salt.as_ref()
    }

    /// The key schema of the values.
    pub fn schema(&self) -> &KeySchema {
        &self.schema
    }

    /// The logical key prefix of these leading values.
    pub fn prefix(&self, values: &[IndexValue]) -> Result<Vec<u8>> {
        self.schema.encode_prefix(&to_components(values))
    }

    /// The logical index row key of `values` for `data_row`.
    pub fn logical_key(&self, values: &[IndexValue], data_row: &[u8]) -> Result<Vec<u8>> {
        let mut k = self.schema.encode(&to_components(values))?;
        if !self.def.unique {
            k.extend_from_slice(data_row);
        }
        Ok(k)
    }

    /// The physical key of a logical one.
    pub fn physical(&self, logical: &[u8]) -> Result<Bytes> {
        match &self.salt {
            Some(s) => s.physical_key(logical).map(Bytes::from),
            None => Ok(Bytes::copy_from_slice(logical)),
        }
    }

    /// Splits a logical index key into its values and the rest (the data row key of a
    /// non-unique index, empty for a unique one).
    pub fn split_key(&self, logical: &[u8]) -> Result<(Vec<IndexValue>, usize)> {
        let n = self.schema.fields.len();
        let end = match n.checked_sub(1) {
            Some(last) => self
                .schema
                .component_span(logical, last)
                .map(|r| r.end)
                .ok_or_else(|| Error::bad_argument("index row key does not decode"))?,
            None => 0,
        };
        let values = self
            .schema
            .decode(&logical[..end])?
            .into_iter()
            .map(|v| match v {
                Value::Bytes(b) => Some(Bytes::from(b)),
                _ => None,
            })
            .collect();
        Ok((values, end))
    }

    /// The logical key of a physical index row key.
    pub fn logical<'a>(&self, physical: &'a [u8]) -> Result<&'a [u8]> {
        match &self.salt {
            Some(s) => s.logical_key(physical),
            None => Ok(physical),
        }
    }

    /// The data row an index row (by logical key) points to.
    pub fn data_row_logical(
        &self,
        logical: &[u8],
        cells: &BTreeMap<Bytes, Bytes>,
    ) -> Result<Bytes> {
        if self.def.unique {
            let meta = cells
                .get(META)
                .ok_or_else(|| Error::bad_argument("unique index row without its data row"))?;
            Ok(meta.slice((self.def.columns.len() * 8).min(meta.len())..))
        } else {
            let (_, end) = self.split_key(logical)?;
            Ok(Bytes::copy_from_slice(&logical[end..]))
        }
    }

    /// The data row an index row (by physical key) points to.
    pub fn data_row(&self, physical: &[u8], cells: &BTreeMap<Bytes, Bytes>) -> Result<Bytes> {
        self.data_row_logical(self.logical(physical)?, cells)
    }

    /// The index row of a data row in the state `row` (everything visible of it), if the
    /// row is indexed (see the module doc).
    pub fn entry(&self, data_row: &[u8], row: &RowResult) -> Result<Option<Entry>> {
        if row.is_empty() {
            return Ok(None);
        }
        let find = |c: &crate::def::ColumnRef| {
            row.cells
                .iter()
                .find(|x| x.family.as_ref() == c.family && x.qualifier.as_ref() == c.qualifier)
        };
        let n = self.schema.fields.len();
        let mut times =
            Vec::with_capacity(n * 8 + if self.def.unique { data_row.len() } else { 0 });
        let mut value_len = 0;
        for (c, _) in &self.def.columns {
            match find(c) {
                Some(x) => {
                    value_len += x.value.len();
                    times.extend_from_slice(&x.timestamp.to_be_bytes());
                }
                None if self.def.sparse || self.def.unique => return Ok(None),
                None => times.extend_from_slice(&0u64.to_be_bytes()),
            }
        }
        // The values escaped (a zero byte takes two) and framed (a null flag before, two
        // bytes after each), then the data row: one buffer, written once.
        let mut logical = Vec::with_capacity(value_len + value_len / 8 + 3 * n + data_row.len());
        let mut fields = self.schema.fields.iter();
        if self.def.row_prefix.is_some() {
            if let Some(field) = fields.next() {
                encode_bytes_value(&mut logical, field, Some(self.row_group(data_row)))?;
            }
        }
        for ((c, _), field) in self.def.columns.iter().zip(fields) {
            encode_bytes_value(&mut logical, field, find(c).map(|x| x.value.as_ref()))?;
        }
        if !self.def.unique {
            logical.extend_from_slice(data_row);
        }
        let key = match &self.salt {
            // Unsalted: the logical key is the row key (no copy).
            None => Bytes::from(logical),
            Some(_) => self.physical(&logical)?,
        };
        if self.def.unique {
            times.extend_from_slice(data_row);
        }
        let mut cells = BTreeMap::new();
        cells.insert(Bytes::from_static(META), Bytes::from(times));
        for c in &self.def.covered {
            if let Some(v) = row.value(&c.family, &c.qualifier) {
                cells.insert(
                    Bytes::from(covered_qualifier(&c.family, &c.qualifier)),
                    v.clone(),
                );
            }
        }
        Ok(Some(Entry { row: key, cells }))
    }

    /// When the values of an index row expire (milliseconds), given each data family's
    /// TTL in milliseconds: the earliest `ts + ttl` over its non-null indexed cells.
    pub fn expiry(
        &self,
        cells: &BTreeMap<Bytes, Bytes>,
        ttl_ms: &dyn Fn(&[u8]) -> Option<u64>,
    ) -> Option<u64> {
        let times = cells.get(META)?;
        let times = times.get(..self.def.columns.len() * 8)?;
        self.def
            .columns
            .iter()
            .zip(times.chunks_exact(8))
            .filter_map(|((c, _), t)| {
                let ts = u64::from_be_bytes(t.try_into().ok()?);
                (ts != 0).then_some(())?;
                Some(ts.saturating_add(ttl_ms(&c.family)?))
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_core::cell::{Cell, CellType};

    fn row(cells: &[(&str, &str, u64, &str)]) -> RowResult {
        RowResult {
            row: Bytes::from_static(b"r1"),
            cells: cells
                .iter()
                .map(|(f, q, ts, v)| Cell {
                    row: Bytes::from_static(b"r1"),
                    family: Bytes::copy_from_slice(f.as_bytes()),
                    qualifier: Bytes::copy_from_slice(q.as_bytes()),
                    timestamp: *ts,
                    kind: CellType::Put,
                    value: Bytes::copy_from_slice(v.as_bytes()),
                })
                .collect(),
        }
    }

    #[test]
    fn keys_sort_by_values_then_data_row_and_split_back() {
        let l = Layout::new(
            IndexDef::new("i", "t")
                .column("f", "a")
                .column_desc("f", "b"),
        );
        let k1 = l
            .logical_key(&[Some("x".into()), Some("2".into())], b"r9")
            .unwrap();
        let k2 = l
            .logical_key(&[Some("x".into()), Some("1".into())], b"r1")
            .unwrap();
        let k3 = l.logical_key(&[None, Some("9".into())], b"r5").unwrap();
        // Null first, then "x"; "b" descending puts "2" before "1".
        assert!(k3 < k1 && k1 < k2);
        let (vals, end) = l.split_key(&k1).unwrap();
        assert_eq!(vals, vec![Some(Bytes::from("x")), Some(Bytes::from("2"))]);
        assert_eq!(&k1[end..], b"r9");
        assert!(k1.starts_with(&l.prefix(&[Some("x".into())]).unwrap()));
    }

    #[test]
    fn entries_follow_sparse_unique_and_covered_rules() {
        let plain = Layout::new(IndexDef::new("i", "t").column("f", "a").cover("f", "c"));
        let e = plain
            .entry(b"r1", &row(&[("f", "c", 5, "cv")]))
            .unwrap()
            .unwrap();
        assert_eq!(e.cells.get(b"cf:c".as_slice()).unwrap().as_ref(), b"cv");
        assert!(plain.entry(b"r1", &RowResult::default()).unwrap().is_none());
        let sparse = Layout::new(IndexDef::new("i", "t").column("f", "a").sparse());
        assert!(sparse
            .entry(b"r1", &row(&[("f", "c", 5, "cv")]))
            .unwrap()
            .is_none());
        let unique = Layout::new(IndexDef::new("i", "t").column("f", "a").unique());
        let e = unique
            .entry(b"r1", &row(&[("f", "a", 7, "v")]))
            .unwrap()
            .unwrap();
        assert_eq!(e.row, unique.logical_key(&[Some("v".into())], b"").unwrap());
        assert_eq!(unique.data_row(&e.row, &e.cells).unwrap().as_ref(), b"r1");
        let p = plain
            .entry(b"r1", &row(&[("f", "a", 5, "x")]))
            .unwrap()
            .unwrap();
        assert_eq!(p.cells.len(), 1);
        assert_eq!(plain.data_row(&p.row, &p.cells).unwrap().as_ref(), b"r1");
        let salted = Layout::new(IndexDef::new("i", "t").column("f", "a").salt_buckets(4));
        let s = salted
            .entry(b"r1", &row(&[("f", "a", 5, "x")]))
            .unwrap()
            .unwrap();
        assert_eq!(salted.data_row(&s.row, &s.cells).unwrap().as_ref(), b"r1");
        let ttl = |f: &[u8]| (f == b"f").then_some(100);
        assert_eq!(unique.expiry(&e.cells, &ttl), Some(107));
        assert_eq!(unique.expiry(&e.cells, &|_| None), None);
    }

    proptest::proptest! {
        /// An entry's row key is the key of its values as `logical_key` encodes them (each
        /// value, null for a missing column, then the data row unless unique), salted as
        /// `physical` salts it, and its `m` cell holds the values' timestamps.
        #[test]
        fn entry_keys_are_the_values_keys(
            values in proptest::collection::vec(
                proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..6)),
                1..4,
            ),
            desc in proptest::collection::vec(proptest::prelude::any::<bool>(), 3),
            unique in proptest::prelude::any::<bool>(),
            sparse in proptest::prelude::any::<bool>(),
            salt in proptest::option::of(2u32..9),
            data_row in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..6),
        ) {
            let mut def = IndexDef::new("i", "t");
            for (i, d) in values.iter().zip(&desc).enumerate().map(|(i, (_, d))| (i, d)) {
                let q = format!("c{i}");
                def = if *d { def.column_desc("f", &q) } else { def.column("f", &q) };
            }
            if unique { def = def.unique(); }
            if sparse { def = def.sparse(); }
            if let Some(b) = salt { def = def.salt_buckets(b); }
            let layout = Layout::new(def);
            let cells: Vec<Cell> = values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
                .map(|(i, v)| Cell {
                    row: Bytes::copy_from_slice(&data_row),
                    family: Bytes::from_static(b"f"),
                    qualifier: Bytes::from(format!("c{i}")),
                    timestamp: 10 + i as u64,
                    kind: CellType::Put,
                    value: Bytes::copy_from_slice(v),
                })
                .chain(std::iter::once(Cell {
                    row: Bytes::copy_from_slice(&data_row),
                    family: Bytes::from_static(b"f"),
                    qualifier: Bytes::from_static(b"other"),
                    timestamp: 1,
                    kind: CellType::Put,
                    value: Bytes::from_static(b"o"),
                }))
                .collect();
            let r = RowResult { row: Bytes::copy_from_slice(&data_row), cells };
            let got = layout.entry(&data_row, &r).unwrap();
            let missing = values.iter().any(Option::is_none);
            if missing && (unique || sparse) {
                proptest::prop_assert!(got.is_none());
                return Ok(());
            }
            let got = got.unwrap();
            let vals: Vec<IndexValue> = values.iter().map(|v| v.clone().map(Bytes::from)).collect();
            let logical = layout.logical_key(&vals, &data_row).unwrap();
            proptest::prop_assert_eq!(&got.row, &layout.physical(&logical).unwrap());
            let mut times: Vec<u8> = values
                .iter()
                .enumerate()
                .flat_map(|(i, v)| if v.is_some() { 10 + i as u64 } else { 0 }.to_be_bytes())
                .collect();
            if unique { times.extend_from_slice(&data_row); }
            proptest::prop_assert_eq!(got.cells.get(META).map(|b| b.to_vec()), Some(times));
        }

        /// A local row led by the row prefix: its logical key is the values' key with the
        /// data row's group first; its local key reads back that logical key in its region
        /// only; its owner is the group (unique) or the data row; and two local rows of one
        /// region sort like their logical keys.
        #[test]
        fn local_keys_lead_with_the_row_group(
            value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..6),
            other in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..6),
            n in 1u32..5,
            unique in proptest::prelude::any::<bool>(),
            data_row in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..8),
            other_row in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..8),
            start in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4),
        ) {
            let mut def = IndexDef::new("i", "t").column("f", "c").local().row_prefix(n);
            if unique { def = def.unique(); }
            let layout = Layout::new(def);
            let key = |row: &[u8], v: &[u8]| {
                let cell = Cell {
                    row: Bytes::copy_from_slice(row),
                    family: Bytes::from_static(b"f"),
                    qualifier: Bytes::from_static(b"c"),
                    timestamp: 3,
                    kind: CellType::Put,
                    value: Bytes::copy_from_slice(v),
                };
                let r = RowResult { row: Bytes::copy_from_slice(row), cells: vec![cell] };
                let e = layout.entry(row, &r).unwrap().unwrap();
                let group = row.get(..n as usize).unwrap_or(row);
                let vals = [Some(Bytes::copy_from_slice(group)), Some(Bytes::copy_from_slice(v))];
                proptest::prop_assert_eq!(&e.row[..], &layout.logical_key(&vals, row).unwrap()[..]);
                let (decoded, _) = layout.split_key(&e.row).unwrap();
                proptest::prop_assert_eq!(decoded, vals.to_vec());
                let local = layout.local_key(&start, &e.row, row).unwrap();
                proptest::prop_assert_eq!(layout.local_logical(&local, &start), Some(&e.row[..]));
                let mut elsewhere = start.clone();
                elsewhere.push(1);
                proptest::prop_assert_eq!(layout.local_logical(&local, &elsewhere), None);
                let owner = basalt_core::keys::local::owner(&local).unwrap();
                proptest::prop_assert_eq!(owner, if unique { group } else { row });
                Ok((e.row, local))
            };
            let (a, la) = key(&data_row, &value)?;
            let (b, lb) = key(&other_row, &other)?;
            // A unique index's logical keys are prefix-free (values alone); a non-unique
            // one's end with the data row, and one may be a prefix of another.
            if unique || !(a.starts_with(&b) || b.starts_with(&a)) {
                proptest::prop_assert_eq!(a.cmp(&b), la.cmp(&lb));
            }
        }
    }
}
