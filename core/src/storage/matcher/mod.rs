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

/// The cells of one row of one store as the matcher reads them, in
/// [`StoreKey`](crate::cell::StoreKey) order: an iterator that may also skip the rest of
/// a column when the matcher needs nothing more of it (HBase's `SEEK_NEXT_COL`).
pub trait RowSource: Iterator<Item = StoreCell> {
    /// The matcher needs no more cells of column `qualifier` (the column of the cell it
    /// read last): the source may skip the column's cells it has not yielded yet. A hint:
    /// a source that yields them anyway changes nothing but the time spent.
    fn column_done(&mut self, qualifier: &[u8]) {
        let _ = qualifier;
    }
}

impl<S: RowSource + ?Sized> RowSource for &mut S {
    fn column_done(&mut self, qualifier: &[u8]) {
        (**self).column_done(qualifier);
    }
}

/// A plain iterator as a [`RowSource`] that skips nothing.
pub struct Cells<I>(pub I);

impl<I: Iterator<Item = StoreCell>> Iterator for Cells<I> {
    type Item = StoreCell;

    #[inline]
    fn next(&mut self) -> Option<StoreCell> {
        self.0.next()
    }
}

impl<I: Iterator<Item = StoreCell>> RowSource for Cells<I> {}

/// [`match_row`] handing each visible cell, whole, to `emit` (no copies).
pub fn match_row_into<I>(
    cells: I,
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
    emit: impl FnMut(StoreCell),
) where
    I: IntoIterator<Item = StoreCell>,
{
    match_row_from(Cells(cells.into_iter()), rules, spec, columns, emit)
}

/// [`match_row_into`] reading from a [`RowSource`]: once a column has given the reader all
/// it can (the family's max versions counted, or the reader's max versions returned, or
/// a column the read did not select), the source is told, so a column of many versions
/// (a hot row's updates, not yet compacted away) costs a seek instead of a walk. The
/// column of the empty qualifier is never skipped: the family's delete markers live there,
/// and one older than a put of that column still masks the other columns.
pub fn match_row_from<S: RowSource>(
    mut cells: S,
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
    mut emit: impl FnMut(StoreCell),
) {
    if spec.raw {
        return match_row_raw_into(cells, rules, spec, columns, emit);
    }
    let mut masks = Masks::default();
    let mut col = ColumnState::default();
    let expire_before = rules
        .ttl_ms
        .map(|ttl| spec.now_ms.saturating_sub(ttl))
        .unwrap_or(0);

    while let Some(cell) = cells.next() {
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
        let selected = columns.is_none_or(|cols| cols.contains(&k.qualifier));
        let visible = index < rules.max_versions
            && !(k.ts < expire_before && index >= rules.min_versions)
            && !cell.cell_expired(spec.now_ms)
            && k.ts >= spec.min_ts
            && k.ts < spec.max_ts
            && col.returned < spec.max_versions
            && selected;
        if visible {
            col.returned += 1;
        }
        // Every later put of the column would fail the version checks above (or the
        // selection), and its markers only mask its own older puts.
        let finished =
            col.kept >= rules.max_versions || col.returned >= spec.max_versions || !selected;
        if visible {
            emit(cell.into_user());
        }
        if finished && !col.skipped && !col.qualifier.is_empty() {
            col.skipped = true;
            cells.column_done(&col.qualifier);
        }
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

/// What [`PlainRow::offer`] decides for one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The reader does not see the cell.
    Skip,
    /// The reader sees the cell.
    Emit,
    /// The cell needs the general matcher (a delete marker, or a put with its own TTL): the
    /// caller drops what it emitted for the row and matches the row with
    /// [`match_row_from`].
    Abort,
}

/// The matcher for the common row: a read that is not raw, of a family without TTL, whose
/// cells are all plain puts. It keeps [`match_row_from`]'s rules for such a row (1, 3, 4
/// and 5 of the module doc; rule 2 has no marker to apply) with a few integers of state
/// and no cell of its own, so a row can be read straight off a block or a MemStore row,
/// each cell built only when it is seen. Any other cell makes [`PlainRow::offer`] answer
/// [`Verdict::Abort`] before the cell is judged.
pub(crate) struct PlainRow<'a> {
    max_versions: u32,
    spec: &'a ReadSpec,
    columns: Option<&'a BTreeSet<Bytes>>,
    started: bool,
    qualifier: ColumnName,
    last_put_ts: Timestamp,
    kept: u32,
    returned: u32,
    selected: bool,
    /// Cells skipped so far (see [`PLAIN_ROW_MAX_SKIPPED`]).
    skipped: u32,
}

/// The most cells [`PlainRow`] skips in a row before it gives the row up
/// ([`Verdict::Abort`]): a row with many hidden versions (a hot row's updates, not yet
/// compacted away) is read faster by the general path, which seeks past a column's
/// versions once the reader has what it wants instead of walking them.
pub(crate) const PLAIN_ROW_MAX_SKIPPED: u32 = 32;

/// The current column's qualifier, copied: inline while short (no allocation for a
/// typical qualifier), in a vector past that.
struct ColumnName {
    inline: [u8; 32],
    len: usize,
    spilled: Vec<u8>,
}

impl ColumnName {
    #[inline(always)]
    fn get(&self) -> &[u8] {
        match self.inline.get(..self.len) {
            Some(q) => q,
            None => &self.spilled,
        }
    }

    #[inline(always)]
    fn set(&mut self, q: &[u8]) {
        match self.inline.get_mut(..q.len()) {
            Some(dst) => {
                dst.copy_from_slice(q);
                self.len = q.len();
            }
            None => {
                self.spilled.clear();
                self.spilled.extend_from_slice(q);
                self.len = usize::MAX;
            }
        }
    }
}

impl<'a> PlainRow<'a> {
    /// The matcher for one row of a family with `rules`, or `None` when the read or the
    /// family needs the general one (a raw read, a TTL).
    pub(crate) fn new(
        rules: &FamilyRules,
        spec: &'a ReadSpec,
        columns: Option<&'a BTreeSet<Bytes>>,
    ) -> Option<Self> {
        if spec.raw || rules.ttl_ms.is_some() {
            return None;
        }
        Some(PlainRow {
            max_versions: rules.max_versions,
            spec,
            columns,
            started: false,
            qualifier: ColumnName {
                inline: [0; 32],
                len: 0,
                spilled: Vec::new(),
            },
            last_put_ts: 0,
            kept: 0,
            returned: 0,
            selected: false,
            skipped: 0,
        })
    }

    /// A cell the reader does not see; past [`PLAIN_ROW_MAX_SKIPPED`] of them, the row goes
    /// to the general path.
    #[inline(always)]
    fn skip(&mut self) -> Verdict {
        self.skipped += 1;
        if self.skipped > PLAIN_ROW_MAX_SKIPPED {
            Verdict::Abort
        } else {
            Verdict::Skip
        }
    }

    /// Judges the next cell of the row (cells come in [`StoreKey`](crate::cell::StoreKey)
    /// order).
    #[inline(always)]
    pub(crate) fn offer(
        &mut self,
        qualifier: &[u8],
        ts: Timestamp,
        kind: CellType,
        seq: u64,
    ) -> Verdict {
        if kind != CellType::Put {
            return Verdict::Abort;
        }
        if seq > self.spec.read_point {
            return self.skip();
        }
        if !self.started || !same_bytes(self.qualifier.get(), qualifier) {
            self.started = true;
            self.qualifier.set(qualifier);
            self.kept = 0;
            self.returned = 0;
            self.selected = self.columns.is_none_or(|cols| cols.contains(qualifier));
        } else if self.last_put_ts == ts {
            return self.skip(); // an older write of the same version
        }
        self.last_put_ts = ts;
        let index = self.kept;
        self.kept += 1;
        let visible = index < self.max_versions
            && ts >= self.spec.min_ts
            && ts < self.spec.max_ts
            && self.returned < self.spec.max_versions
            && self.selected;
        if visible {
            self.returned += 1;
            Verdict::Emit
        } else {
            self.skip()
        }
    }
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
    /// The source was told the column is done.
    skipped: bool,
}

impl ColumnState {
    fn reset(&mut self, qualifier: &[u8]) {
        self.started = true;
        self.qualifier.clear();
        self.qualifier.extend_from_slice(qualifier);
        self.last_put_ts = None;
        self.kept = 0;
        self.returned = 0;
        self.skipped = false;
    }
}

#[cfg(test)]
mod plain_tests;
#[cfg(test)]
mod tests;
