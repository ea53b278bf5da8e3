//! The matcher: HBase's read rules applied to the cells of one row of one store.
//!
//! Input: every cell of one row of one family, in [`StoreKey`](crate::cell::StoreKey) order (all family delete
//! markers first, since they carry an empty qualifier; then each column with its versions
//! newest first, markers before puts at equal timestamps, newest write first). Output: the
//! versions a reader may see. The rules, which the test model mirrors exactly:
//!
//! 1. Cells with a sequence id above the read point do not exist for this reader.
//! 2. A delete marker applies when it lies at or after the time range's minimum (inside the
//!    time range when it keeps deleted cells: in a family with `KEEP_DELETED_CELLS` true, or
//!    `TTL` while the marker is younger than the TTL). DeleteFamily masks every put with
//!    ts <= its own, DeleteFamilyVersion every put at exactly its ts, DeleteColumn the column's
//!    puts with ts <= its own, Delete the column's put at exactly its ts, whatever order the
//!    marker and the put were written in.
//! 3. Of several puts at one timestamp only the newest write counts (the later one wins).
//! 4. The family keeps its newest `max_versions` unmasked versions per column; of these, a
//!    version older than the TTL is dropped unless it is among the newest `min_versions`,
//!    and a version whose own TTL ran out (a put with a cell TTL: timestamp plus TTL below
//!    the clock) is dropped whatever min versions say. An expired version still counts
//!    among the `max_versions`, so an older one does not come back when it expires.
//! 5. Of what remains, versions inside the time range are returned, newest first, at most the
//!    reader's max versions per column.
//!
//! Rule 4 is what a major compaction keeps, so results do not change when files compact.
//!
//! A raw read (`Scan::raw`, HBase's `Scan.setRaw`) returns the markers too, and the versions
//! rules 2 and 4 hide, but never what a flush or a minor compaction may already have dropped,
//! so that its answer, too, does not depend on when they ran:
//!
//! R1. Rule 1 holds.
//! R2. Every delete marker inside the time range is returned, once per qualifier, timestamp
//!     and kind (a marker written twice shows once).
//! R3. A put inside the time range is returned unless an older write at its timestamp (rule
//!     3), masked by a marker (whatever its timestamp) that does not keep deleted cells
//!     (see [`KeepDeletedCells`]), or older than the TTL in a family without min versions:
//!     what a minor compaction drops. Versions beyond the family's max versions show until a major
//!     compaction removes them.
//! R4. At most the reader's max versions puts per column, newest first; markers do not
//!     count. A column selection applies to markers by their qualifier (the family markers'
//!     is empty).

use crate::cell::{same_bytes, CellType, StoreCell, Timestamp};
use crate::schema::KeepDeletedCells;
use bytes::Bytes;
use std::collections::BTreeSet;

/// The column-family settings the matcher needs.
#[derive(Debug, Clone, Copy)]
pub struct FamilyRules {
    /// Versions kept per column.
    pub max_versions: u32,
    /// Versions kept despite TTL.
    pub min_versions: u32,
    /// TTL in milliseconds.
    pub ttl_ms: Option<u64>,
    /// Whether deleted cells stay visible to time-range reads that end before the delete.
    pub keep_deleted_cells: KeepDeletedCells,
}

/// What one reader asks for.
#[derive(Debug, Clone)]
pub struct ReadSpec {
    /// Only cells with `seq <= read_point` exist.
    pub read_point: u64,
    /// Time range `[min, max)`.
    pub min_ts: Timestamp,
    /// Exclusive upper bound of the time range.
    pub max_ts: Timestamp,
    /// Versions per column the reader wants.
    pub max_versions: u32,
    /// Wall clock in milliseconds, for TTL.
    pub now_ms: u64,
    /// A raw read: markers and the versions rules 2 and 4 hide (rules R1 to R4).
    pub raw: bool,
}

/// One version the reader may see.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg(test)]
pub struct Version {
    /// The qualifier.
    pub qualifier: Bytes,
    /// The timestamp.
    pub ts: Timestamp,
    /// A put, or (in a raw read) a delete marker.
    pub kind: CellType,
    /// The value.
    pub value: Bytes,
}

/// Applies the rules to one row of one family. `columns`, when given, limits the qualifiers
/// returned (family markers still apply).
#[cfg(test)]
pub fn match_row<I>(
    cells: I,
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
) -> Vec<Version>
where
    I: IntoIterator<Item = StoreCell>,
{
    let mut out = Vec::new();
    match_row_into(cells, rules, spec, columns, |c| {
        out.push(Version {
            qualifier: c.key.qualifier,
            ts: c.key.ts,
            kind: c.key.kind,
            value: c.value,
        })
    });
    out
}

/// [`match_row`] handing each visible cell, whole, to `emit` (no copies).
pub fn match_row_into<I>(
    cells: I,
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
    mut emit: impl FnMut(StoreCell),
) where
    I: IntoIterator<Item = StoreCell>,
{
    if spec.raw {
        return match_row_raw_into(cells, rules, spec, columns, emit);
    }
    let mut masks = Masks::default();
    let mut col = ColumnState::default();
    let expire_before = rules
        .ttl_ms
        .map(|ttl| spec.now_ms.saturating_sub(ttl))
        .unwrap_or(0);

    for cell in cells {
        let k = &cell.key;
        if k.seq > spec.read_point {
            continue;
        }
        if !col.started || !same_bytes(&col.qualifier, &k.qualifier) {
            col.reset(&k.qualifier);
            masks.next_column();
        }
        if k.kind.is_delete() {
            let applies = if rules.keep_deleted_cells.keeps(k.ts, expire_before) {
                k.ts >= spec.min_ts && k.ts < spec.max_ts
            } else {
                k.ts >= spec.min_ts
            };
            if applies {
                masks.add(k.kind, k.ts);
            }
            continue;
        }
        // A put.
        if col.last_put_ts == Some(k.ts) {
            continue; // an older write of the same version
        }
        col.last_put_ts = Some(k.ts);
        if masks.masks(k.ts) {
            continue;
        }
        let index = col.kept;
        col.kept += 1;
        if index >= rules.max_versions {
            continue;
        }
        if k.ts < expire_before && index >= rules.min_versions {
            continue;
        }
        if cell.cell_expired(spec.now_ms) {
            continue; // its own TTL ran out: it still takes its place among the versions
        }
        if k.ts < spec.min_ts || k.ts >= spec.max_ts {
            continue;
        }
        if col.returned >= spec.max_versions {
            continue;
        }
        if let Some(cols) = columns {
            if !cols.contains(&k.qualifier) {
                continue;
            }
        }
        col.returned += 1;
        emit(cell.into_user());
    }
}

/// [`match_row_into`] for a raw read: rules R1 to R4 of the module doc.
fn match_row_raw_into<I>(
    cells: I,
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
    mut emit: impl FnMut(StoreCell),
) where
    I: IntoIterator<Item = StoreCell>,
{
    // Only markers that do not keep what they mask hide puts from a raw read.
    let mut masks = Masks::default();
    let mut col = ColumnState::default();
    let mut last_marker: Option<(Timestamp, CellType)> = None;
    let expire_before = rules
        .ttl_ms
        .map(|ttl| spec.now_ms.saturating_sub(ttl))
        .unwrap_or(0);
    let in_range = |ts: Timestamp| ts >= spec.min_ts && ts < spec.max_ts;
    for cell in cells {
        let k = &cell.key;
        if k.seq > spec.read_point {
            continue;
        }
        if !col.started || !same_bytes(&col.qualifier, &k.qualifier) {
            col.reset(&k.qualifier);
            masks.next_column();
            last_marker = None;
        }
        let selected = columns.is_none_or(|c| c.contains(&k.qualifier));
        if k.kind.is_delete() {
            if !rules.keep_deleted_cells.keeps(k.ts, expire_before) {
                masks.add(k.kind, k.ts);
            }
            if last_marker == Some((k.ts, k.kind)) {
                continue; // the same marker written again
            }
            last_marker = Some((k.ts, k.kind));
            if in_range(k.ts) && selected {
                emit(cell);
            }
            continue;
        }
        if col.last_put_ts == Some(k.ts) {
            continue;
        }
        col.last_put_ts = Some(k.ts);
        if masks.masks(k.ts)
            || (k.ts < expire_before && rules.min_versions == 0)
            || !in_range(k.ts)
            || !selected
            || col.returned >= spec.max_versions
        {
            continue;
        }
        col.returned += 1;
        emit(cell.into_user());
    }
}

/// Whether [`match_row_into`] returns a put of column `qualifier` at `ts`, one the read
/// point covers, when no other cell of its column is read with it (and no family marker):
/// a new row's only write of a column. Same rules, without the state a column's versions
/// and markers need.
pub fn lone_put_visible(
    qualifier: &Bytes,
    ts: Timestamp,
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
) -> bool {
    let expire_before = rules
        .ttl_ms
        .map(|ttl| spec.now_ms.saturating_sub(ttl))
        .unwrap_or(0);
    rules.max_versions >= 1
        && (ts >= expire_before || rules.min_versions >= 1)
        && ts >= spec.min_ts
        && ts < spec.max_ts
        && spec.max_versions >= 1
        && columns.is_none_or(|c| c.contains(qualifier))
}

/// The delete markers seen so far in a row: the family's, and the current column's.
#[derive(Default)]
pub(crate) struct Masks {
    family_ts: Option<Timestamp>,
    family_versions: Vec<Timestamp>,
    column_ts: Option<Timestamp>,
    version_deletes: Vec<Timestamp>,
}

impl Masks {
    pub(crate) fn next_column(&mut self) {
        self.column_ts = None;
        self.version_deletes.clear();
    }

    pub(crate) fn add(&mut self, kind: CellType, ts: Timestamp) {
        match kind {
            CellType::DeleteFamily => {
                self.family_ts = Some(self.family_ts.map_or(ts, |t| t.max(ts)))
            }
            CellType::DeleteFamilyVersion => self.family_versions.push(ts),
            CellType::DeleteColumn => {
                self.column_ts = Some(self.column_ts.map_or(ts, |t| t.max(ts)))
            }
            CellType::Delete => self.version_deletes.push(ts),
            CellType::Put | CellType::ExpiringPut => {}
        }
    }

    pub(crate) fn masks(&self, ts: Timestamp) -> bool {
        self.family_ts.is_some_and(|t| ts <= t)
            || self.family_versions.contains(&ts)
            || self.column_ts.is_some_and(|t| ts <= t)
            || self.version_deletes.contains(&ts)
    }
}

/// The state of the column being matched. Its qualifier is kept as a reused byte buffer, so
/// moving to the next column costs a copy of a few bytes, not a reference-count round trip.
#[derive(Default)]
struct ColumnState {
    started: bool,
    qualifier: Vec<u8>,
    last_put_ts: Option<Timestamp>,
    kept: u32,
    returned: u32,
}

impl ColumnState {
    fn reset(&mut self, qualifier: &[u8]) {
        self.started = true;
        self.qualifier.clear();
        self.qualifier.extend_from_slice(qualifier);
        self.last_put_ts = None;
        self.kept = 0;
        self.returned = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::StoreKey;

    fn c(q: &str, ts: u64, kind: CellType, seq: u64, v: &str) -> StoreCell {
        StoreCell {
            key: StoreKey {
                row: Bytes::from_static(b"r"),
                qualifier: Bytes::copy_from_slice(q.as_bytes()),
                ts,
                kind,
                seq,
            },
            value: Bytes::copy_from_slice(v.as_bytes()),
        }
    }

    fn run(mut cells: Vec<StoreCell>, max_versions: u32, spec_versions: u32) -> Vec<(String, u64)> {
        cells.sort_by(|a, b| a.key.cmp(&b.key));
        let rules = FamilyRules {
            max_versions,
            min_versions: 0,
            ttl_ms: None,
            keep_deleted_cells: KeepDeletedCells::False,
        };
        let spec = ReadSpec {
            read_point: 100,
            min_ts: 0,
            max_ts: u64::MAX,
            max_versions: spec_versions,
            now_ms: 1000,
            raw: false,
        };
        match_row(cells, &rules, &spec, None)
            .into_iter()
            .map(|v| (String::from_utf8_lossy(&v.qualifier).into_owned(), v.ts))
            .collect()
    }

    #[test]
    fn delete_masks_later_put_with_older_ts() {
        let got = run(
            vec![
                c("a", 5, CellType::DeleteColumn, 1, ""),
                c("a", 3, CellType::Put, 2, "x"),
                c("a", 7, CellType::Put, 3, "y"),
            ],
            3,
            3,
        );
        assert_eq!(got, vec![("a".into(), 7)]);
    }

    #[test]
    fn later_write_at_same_ts_wins_and_versions_cap() {
        let cells = vec![
            c("a", 5, CellType::Put, 1, "old"),
            c("a", 5, CellType::Put, 2, "new"),
            c("a", 4, CellType::Put, 3, "x"),
            c("a", 3, CellType::Put, 4, "y"),
        ];
        let mut sorted = cells.clone();
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        let rules = FamilyRules {
            max_versions: 2,
            min_versions: 0,
            ttl_ms: None,
            keep_deleted_cells: KeepDeletedCells::False,
        };
        let spec = ReadSpec {
            read_point: 100,
            min_ts: 0,
            max_ts: u64::MAX,
            max_versions: 10,
            now_ms: 0,
            raw: false,
        };
        let got = match_row(sorted, &rules, &spec, None);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].value, Bytes::from_static(b"new"));
        assert_eq!(got[1].ts, 4);
    }

    #[test]
    fn family_markers_and_invisible_cells() {
        let got = run(
            vec![
                c("", 4, CellType::DeleteFamily, 1, ""),
                c("", 9, CellType::DeleteFamilyVersion, 1, ""),
                c("a", 4, CellType::Put, 2, "x"),
                c("a", 6, CellType::Put, 2, "x"),
                c("b", 9, CellType::Put, 2, "x"),
                c("b", 8, CellType::Put, 200, "invisible"),
                c("c", 2, CellType::Delete, 1, ""),
                c("c", 2, CellType::Put, 1, "x"),
                c("c", 1, CellType::Put, 1, "x"),
            ],
            5,
            5,
        );
        assert_eq!(got, vec![("a".into(), 6)]);
    }

    proptest::proptest! {
        /// A row's lone puts (one per column, no markers): each is returned exactly when
        /// `lone_put_visible` says so, in the matcher's order.
        #[test]
        fn lone_puts_match_the_matcher(
            puts in proptest::collection::btree_map(0u8..12, (0u64..40, 1u64..30), 0..8),
            max_versions in 0u32..3,
            min_versions in 0u32..2,
            ttl_ms in proptest::option::of(0u64..30),
            min_ts in 0u64..20,
            span in 1u64..40,
            spec_versions in 0u32..3,
            read_point in 0u64..30,
            now_ms in 0u64..60,
            columns in proptest::option::of(proptest::collection::btree_set(0u8..12, 0..6)),
        ) {
            let cells: Vec<StoreCell> = puts
                .iter()
                .map(|(q, (ts, seq))| c(&format!("q{q:02}"), *ts, CellType::Put, *seq, "v"))
                .collect();
            let rules = FamilyRules { max_versions, min_versions, ttl_ms, keep_deleted_cells: KeepDeletedCells::False };
            let spec = ReadSpec {
                read_point,
                min_ts,
                max_ts: min_ts + span,
                max_versions: spec_versions,
                now_ms,
                raw: false,
            };
            let columns: Option<BTreeSet<Bytes>> = columns.map(|cs| {
                cs.iter().map(|q| Bytes::from(format!("q{q:02}"))).collect()
            });
            let mut sorted = cells.clone();
            sorted.sort_by(|a, b| a.key.cmp(&b.key));
            let mut matched = Vec::new();
            match_row_into(sorted, &rules, &spec, columns.as_ref(), |c| matched.push(c.key));
            let lone: Vec<StoreKey> = cells
                .into_iter()
                .filter(|c| {
                    c.key.seq <= spec.read_point
                        && lone_put_visible(&c.key.qualifier, c.key.ts, &rules, &spec, columns.as_ref())
                })
                .map(|c| c.key)
                .collect();
            proptest::prop_assert_eq!(matched, lone);
        }
    }
}
