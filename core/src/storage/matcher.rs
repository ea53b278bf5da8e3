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
//! A raw read (`Scan::raw`, HBase's `Scan.setRaw` through its `RawScanQueryMatcher`) returns
//! the cells the store holds, delete markers included, with no marker applied: a put a
//! marker masks shows until a flush or a compaction whose input holds both drops it (as in
//! HBase, whose flushes and minor compactions drop masked puts too), and its answer depends
//! on when those ran. Per column (the family markers' column is the empty qualifier), newest
//! first:
//!
//! R1. Rule 1 holds.
//! R2. Of several puts at one timestamp only the newest write may show (rule 3); a marker
//!     written twice shows once. A put whose own TTL ran out does not show.
//! R3. No marker masks anything: masked puts show, whatever `KEEP_DELETED_CELLS` says.
//! R4. In a family without min versions, a cell (put or marker) older than the TTL does not
//!     show; nor does a cell outside the time range, or of a column the read did not select.
//! R5. The rest shows in store order (markers before puts at one timestamp), except:
//! R6. Puts count, markers do not: the reader's max versions (not the family's) bounds the
//!     puts per column, and the first put beyond it ends the column, so older markers do not
//!     show either. In a family with min versions, a cell older than the TTL ends the column
//!     when the puts counted so far (a put counts itself) exceed min versions.
//!
//! So a flush or a minor compaction changes a raw answer only through the masked puts it
//! drops: they no longer show, an older write of one of them kept in another file may show
//! in its place, and cells they pushed past the version bound come back. Everything else it
//! drops (rule 3's older writes, puts past the TTL without min versions) no raw read shows.

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
    /// A raw read: the stored cells, markers included (rules R1 to R6).
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

/// [`match_row_into`] for a raw read: rules R1 to R6 of the module doc.
fn match_row_raw_into<I>(
    cells: I,
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
    mut emit: impl FnMut(StoreCell),
) where
    I: IntoIterator<Item = StoreCell>,
{
    let mut col = ColumnState::default();
    let mut last_marker: Option<(Timestamp, CellType)> = None;
    // Set when the column's versions ran out (R6): nothing more of it is returned.
    let mut column_done = false;
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
            last_marker = None;
            column_done = false;
        }
        if column_done {
            continue;
        }
        let marker = k.kind.is_delete();
        if marker {
            if last_marker == Some((k.ts, k.kind)) {
                continue; // the same marker written again
            }
            last_marker = Some((k.ts, k.kind));
        } else {
            if col.last_put_ts == Some(k.ts) {
                continue; // an older write of the same version
            }
            col.last_put_ts = Some(k.ts);
            if cell.cell_expired(spec.now_ms) {
                continue;
            }
        }
        let expired = k.ts < expire_before;
        if (expired && rules.min_versions == 0)
            || k.ts < spec.min_ts
            || k.ts >= spec.max_ts
            || !columns.is_none_or(|c| c.contains(&k.qualifier))
        {
            continue;
        }
        if !marker {
            col.returned += 1;
        }
        if col.returned > spec.max_versions || (expired && col.returned > rules.min_versions) {
            column_done = true;
            continue;
        }
        emit(if marker { cell } else { cell.into_user() });
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

    fn raw_spec(max_versions: u32) -> ReadSpec {
        ReadSpec {
            read_point: 100,
            min_ts: 0,
            max_ts: u64::MAX,
            max_versions,
            now_ms: 1000,
            raw: true,
        }
    }

    fn plain_rules(max_versions: u32, kdc: bool) -> FamilyRules {
        FamilyRules {
            max_versions,
            min_versions: 0,
            ttl_ms: None,
            keep_deleted_cells: kdc.into(),
        }
    }

    fn raw_read(
        mut cells: Vec<StoreCell>,
        rules: &FamilyRules,
        spec: &ReadSpec,
    ) -> Vec<(String, u64, CellType)> {
        cells.sort_by(|a, b| a.key.cmp(&b.key));
        match_row(cells, rules, spec, None)
            .into_iter()
            .map(|v| {
                (
                    String::from_utf8_lossy(&v.qualifier).into_owned(),
                    v.ts,
                    v.kind,
                )
            })
            .collect()
    }

    /// The reference guide's "Keeping Deleted Cells" example before its flush: puts at 10,
    /// 12 and 14 and a column delete at 11 all show, in a family that keeps deleted cells or
    /// not; the marker does not count as a version, but the first put beyond the reader's
    /// max versions ends the column, older markers included.
    #[test]
    fn raw_reads_show_masked_puts_and_count_only_puts() {
        let cells = vec![
            c("c1", 10, CellType::Put, 1, "v"),
            c("c1", 12, CellType::Put, 2, "v"),
            c("c1", 14, CellType::Put, 3, "v"),
            c("c1", 11, CellType::DeleteColumn, 4, ""),
        ];
        let col = |ts, kind| ("c1".to_string(), ts, kind);
        for kdc in [false, true] {
            // The family keeps one version: a raw read is bounded by the reader's count only.
            let rules = plain_rules(1, kdc);
            assert_eq!(
                raw_read(cells.clone(), &rules, &raw_spec(1000)),
                vec![
                    col(14, CellType::Put),
                    col(12, CellType::Put),
                    col(11, CellType::DeleteColumn),
                    col(10, CellType::Put),
                ]
            );
            assert_eq!(
                raw_read(cells.clone(), &rules, &raw_spec(2)),
                vec![
                    col(14, CellType::Put),
                    col(12, CellType::Put),
                    col(11, CellType::DeleteColumn),
                ]
            );
            assert_eq!(
                raw_read(cells.clone(), &rules, &raw_spec(1)),
                vec![col(14, CellType::Put)]
            );
        }
    }

    /// Family markers show in the empty qualifier's column, before it and every other
    /// column's cells; the puts they mask show in their own columns.
    #[test]
    fn raw_reads_show_family_markers_and_what_they_mask() {
        let cells = vec![
            c("", 150, CellType::DeleteFamily, 3, ""),
            c("", 100, CellType::DeleteFamilyVersion, 4, ""),
            c("", 100, CellType::DeleteFamilyVersion, 5, ""),
            c("", 120, CellType::Put, 1, "empty qualifier"),
            c("a", 100, CellType::Put, 1, "x"),
            c("a", 200, CellType::Put, 2, "y"),
            c("b", 100, CellType::Delete, 6, ""),
            c("b", 100, CellType::Put, 1, "z"),
        ];
        let got = raw_read(cells, &plain_rules(3, false), &raw_spec(10));
        let cell = |q: &str, ts, kind| (q.to_string(), ts, kind);
        assert_eq!(
            got,
            vec![
                cell("", 150, CellType::DeleteFamily),
                cell("", 120, CellType::Put),
                cell("", 100, CellType::DeleteFamilyVersion),
                cell("a", 200, CellType::Put),
                cell("a", 100, CellType::Put),
                cell("b", 100, CellType::Delete),
                cell("b", 100, CellType::Put),
            ]
        );
    }

    /// TTL and cell TTL in a raw read: without min versions every cell past the TTL is
    /// hidden, markers too; with min versions such a cell shows while the puts counted do
    /// not exceed them. A put whose own TTL ran out never shows, nor counts.
    #[test]
    fn raw_reads_hide_expired_cells() {
        let mut expiring = c("q", 990, CellType::ExpiringPut, 5, "");
        expiring.value = crate::cell::expiring_value(5, b"gone");
        let cells = vec![
            expiring,
            c("q", 980, CellType::Put, 1, "live"),
            c("q", 50, CellType::DeleteColumn, 2, ""),
            c("q", 40, CellType::Put, 3, "old"),
            c("q", 30, CellType::Put, 4, "older"),
        ];
        let mut rules = plain_rules(5, false);
        rules.ttl_ms = Some(100); // expired below 900 at now 1000
        let q = |ts, kind| ("q".to_string(), ts, kind);
        assert_eq!(
            raw_read(cells.clone(), &rules, &raw_spec(10)),
            vec![q(980, CellType::Put)]
        );
        rules.min_versions = 2;
        assert_eq!(
            raw_read(cells.clone(), &rules, &raw_spec(10)),
            vec![
                q(980, CellType::Put),
                q(50, CellType::DeleteColumn),
                q(40, CellType::Put),
            ]
        );
        // A marker does not count: with one min version it still shows after the one put.
        rules.min_versions = 1;
        assert_eq!(
            raw_read(cells, &rules, &raw_spec(10)),
            vec![q(980, CellType::Put), q(50, CellType::DeleteColumn)]
        );
    }

    /// A raw read as the module doc's rules R1 to R6 state it, computed set-wise: the
    /// newest visible write per put version and one copy per marker, the cells rule R4
    /// hides removed, then each column's cells newest first until the versions run out.
    fn raw_model(
        cells: &[StoreCell],
        rules: &FamilyRules,
        spec: &ReadSpec,
        columns: Option<&BTreeSet<Bytes>>,
    ) -> Vec<StoreCell> {
        use std::collections::BTreeMap;
        // (qualifier, ts, kind rank, kind) -> the newest visible write.
        let mut newest: BTreeMap<(Bytes, u64, u8, bool), StoreCell> = BTreeMap::new();
        for cell in cells.iter().filter(|c| c.key.seq <= spec.read_point) {
            let k = &cell.key;
            let slot = (k.qualifier.clone(), k.ts, k.kind.rank(), k.kind.is_put());
            if newest.get(&slot).is_none_or(|o| o.key.seq < k.seq) {
                newest.insert(slot, cell.clone());
            }
        }
        let expire_before = rules
            .ttl_ms
            .map_or(0, |ttl| spec.now_ms.saturating_sub(ttl));
        let mut by_column: BTreeMap<Bytes, Vec<StoreCell>> = BTreeMap::new();
        for ((q, ts, _, _), cell) in newest {
            let hidden = cell.cell_expired(spec.now_ms)
                || (ts < expire_before && rules.min_versions == 0)
                || ts < spec.min_ts
                || ts >= spec.max_ts
                || columns.is_some_and(|cs| !cs.contains(&q));
            if !hidden {
                by_column.entry(q).or_default().push(cell);
            }
        }
        let mut out = Vec::new();
        for (_, mut column) in by_column {
            column.sort_by(|a, b| a.key.cmp(&b.key));
            let mut puts = 0u32;
            for cell in column {
                puts += u32::from(cell.key.kind.is_put());
                let expired = cell.key.ts < expire_before;
                if puts > spec.max_versions || (expired && puts > rules.min_versions) {
                    break;
                }
                out.push(cell.into_user());
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2000,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Raw reads of random rows (every kind of cell, repeated writes and markers, cell
        /// TTLs, read points, time ranges, TTL and min versions, column selections) return
        /// exactly what the set-wise model of rules R1 to R6 returns.
        #[test]
        fn raw_reads_match_the_model(
            raw in proptest::collection::vec(
                (0usize..3, 0u64..10, 0usize..6, 1u64..25, 0usize..4),
                0..30,
            ),
            max_versions in 1u32..4,
            min_versions in 0u32..3,
            ttl_ms in proptest::option::of(proptest::sample::select(vec![2u64, 5, 8])),
            kdc in 0usize..3,
            read_point in 0u64..26,
            min_ts in 0u64..6,
            span in 1u64..12,
            spec_versions in 0u32..5,
            columns in proptest::option::of(proptest::collection::btree_set(0usize..3, 0..3)),
        ) {
            const QUALS: [&str; 3] = ["", "a", "b"];
            const KINDS: [CellType; 6] = [
                CellType::Put,
                CellType::ExpiringPut,
                CellType::Delete,
                CellType::DeleteColumn,
                CellType::DeleteFamily,
                CellType::DeleteFamilyVersion,
            ];
            let mut cells: Vec<StoreCell> = Vec::new();
            for (i, (q, ts, kind, seq, ttl)) in raw.iter().enumerate() {
                let kind = KINDS[*kind];
                let q = if kind.is_family_delete() { "" } else { QUALS[*q] };
                let mut cell = c(q, *ts, kind, *seq, &format!("v{i}"));
                if kind == CellType::ExpiringPut {
                    // Cell TTLs that ran out, run out at the clock, and never do.
                    cell.value = crate::cell::expiring_value([1u64, 5, 8, 100][*ttl], &cell.value);
                }
                // Identical keys collapse, as the merge yields one of them (a put and an
                // expiring put rank alike).
                let same = |o: &StoreCell| {
                    (&o.key.qualifier, o.key.ts, o.key.kind.rank(), o.key.seq)
                        == (&cell.key.qualifier, cell.key.ts, cell.key.kind.rank(), cell.key.seq)
                };
                if !cells.iter().any(same) {
                    cells.push(cell);
                }
            }
            cells.sort_by(|a, b| a.key.cmp(&b.key));
            let rules = FamilyRules {
                max_versions,
                min_versions,
                ttl_ms,
                keep_deleted_cells: [
                    KeepDeletedCells::False,
                    KeepDeletedCells::True,
                    KeepDeletedCells::Ttl,
                ][kdc],
            };
            let spec = ReadSpec {
                read_point,
                min_ts,
                max_ts: if span == 11 { u64::MAX } else { min_ts + span },
                max_versions: spec_versions,
                now_ms: 10,
                raw: true,
            };
            let columns: Option<BTreeSet<Bytes>> = columns
                .map(|cs| cs.into_iter().map(|q| Bytes::from_static(QUALS[q].as_bytes())).collect());
            let mut got = Vec::new();
            match_row_into(cells.clone(), &rules, &spec, columns.as_ref(), |c| got.push(c));
            let want = raw_model(&cells, &rules, &spec, columns.as_ref());
            proptest::prop_assert_eq!(got, want);
        }
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
