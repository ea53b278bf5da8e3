//! The region scanner: merges a region's families by row and applies the matcher per row.
//!
//! Forward scans yield rows in ascending order, reverse scans descending; within a row the
//! cells are always in family, qualifier, timestamp-descending order. Invariants: every cell
//! read is filtered by the one read point fixed when the scan began, so a scan sees each
//! batch whole or not at all; rows outside the row range are never returned.
//!
//! With a filter ([`crate::filter`]) the matcher's visible cells of each row pass through it
//! (`begin_row`, `offer`, `end_row`); a row the filter drops by its key is skipped without
//! matching, and when the filter names a later row where the next acceptable row starts
//! (in a reverse scan: a lower row above which none is acceptable), every family's merge
//! seeks there instead of reading the rows in between; a hint to a later column of the row
//! seeks that family's merge within the row (forward scans). Without a filter
//! the loop is the same as before: one branch per cell, no allocation, no dynamic call.

use crate::cell::{same_bytes, Cell, RowResult, StoreCell, StoreKey};
use crate::error::Result;
use crate::filter::{FilterExec, RowStart};
use crate::region::Store;
use crate::storage::matcher::{
    match_row_from, match_row_into, FamilyRules, PlainRow, ReadSpec, RowSource,
};
use crate::storage::merge::MergeIter;
use bytes::Bytes;
use std::collections::BTreeSet;
use std::ops::Bound;

use crate::keys::range::{row_successor, RowRange};
use std::sync::Arc;

/// The cells of one row, pulled off a family's merge as the matcher asks for them. An error
/// from the merge ends the row and is left in `err`.
struct RowCells<'a> {
    iter: &'a mut MergeIter,
    row: &'a Bytes,
    err: &'a mut Option<crate::error::Error>,
    /// A later qualifier of this row to seek to before the next cell (a filter's hint).
    /// `None` without a filter: the unfiltered loop pays one branch for this.
    seek: Option<&'a std::cell::Cell<Option<Bytes>>>,
}

impl Iterator for RowCells<'_> {
    type Item = StoreCell;

    #[inline]
    fn next(&mut self) -> Option<StoreCell> {
        if let Some(qualifier) = self.seek.and_then(std::cell::Cell::take) {
            // Skipping whole columns keeps the matcher's state right: the family's markers
            // came first, and a column's markers only touch that column.
            self.iter.seek(&StoreKey {
                qualifier,
                ..StoreKey::first_on_row(self.row.clone())
            });
        }
        if !self
            .iter
            .peek()
            .is_some_and(|c| same_bytes(&c.key.row, self.row))
        {
            if let Err(e) = take_error(self.iter) {
                *self.err = Some(e);
            }
            return None;
        }
        match self.iter.next()? {
            Ok(c) => Some(c),
            Err(e) => {
                *self.err = Some(e);
                None
            }
        }
    }
}

/// Cells of a finished column [`RowCells`] steps over before it seeks past the column:
/// stepping a cell is cheaper than a seek (which repositions every source of the merge),
/// so a column of a few versions is walked and one of many is jumped.
const COLUMN_STEPS_BEFORE_SEEK: usize = 2;

impl RowSource for RowCells<'_> {
    fn column_done(&mut self, qualifier: &[u8]) {
        let in_column = |iter: &mut MergeIter, row: &Bytes| {
            iter.peek().is_some_and(|c| {
                same_bytes(&c.key.row, row) && same_bytes(&c.key.qualifier, qualifier)
            })
        };
        for _ in 0..COLUMN_STEPS_BEFORE_SEEK {
            if !in_column(self.iter, self.row) {
                return;
            }
            // `peek` saw a cell, so this is it (an error stays pending for `next`).
            let _ = self.iter.next();
        }
        if in_column(self.iter, self.row) {
            // The smallest qualifier after this one is this one followed by a zero byte.
            let mut next = Vec::with_capacity(qualifier.len() + 1);
            next.extend_from_slice(qualifier);
            next.push(0);
            self.iter.seek(&StoreKey::first_on_column(
                self.row.clone(),
                Bytes::from(next),
            ));
        }
    }
}

/// Returns the merge's pending error, if it has one. Call it where `peek` said `None`: a
/// merge that failed must not look like one that ended.
fn take_error(iter: &mut MergeIter) -> Result<()> {
    if iter.has_error() {
        if let Some(Err(e)) = iter.next() {
            return Err(e);
        }
    }
    Ok(())
}

/// Skips the rest of `row`'s cells.
fn skip_row(iter: &mut MergeIter, row: &[u8]) -> Result<()> {
    while iter.peek().is_some_and(|c| same_bytes(&c.key.row, row)) {
        if let Some(Err(e)) = iter.next() {
            return Err(e);
        }
    }
    take_error(iter)
}

/// One family's part of a scan. The merge's next cell (`iter.peek()`) says which row the
/// family is at.
pub struct FamilyScan {
    family: Bytes,
    rules: FamilyRules,
    columns: Option<BTreeSet<Bytes>>,
    iter: MergeIter,
}

/// Scans one region's rows.
pub struct RegionScanner {
    fams: Vec<FamilyScan>,
    spec: ReadSpec,
    range: RowRange,
    reverse: bool,
    done: bool,
    /// A reused buffer for one row's cells of one family.
    row_buf: Vec<StoreCell>,
    /// The most cells a row has had so far, to size the next row's vector.
    cells_hint: usize,
    /// The get's or scan's filter, if any.
    filter: Option<Box<FilterExec>>,
    /// The read's max versions per column. With a filter, the matcher passes every version
    /// the family keeps and the filter caps what it included at this (see
    /// [`FilterExec::set_max_versions`]).
    read_versions: u32,
    /// True once the filter said no later row can pass.
    filter_done: bool,
    /// Rows returned so far, until the merges are pipelined.
    rows_out: usize,
    /// Whether the merges may move to helper threads after [`PIPELINE_AFTER_ROWS`] rows.
    pipeline: bool,
}

/// Rows a scan without a filter returns before it moves its families' merges to helper
/// threads ([`MergeIter::pipeline`]): a scan this long is likely to go on, and the merge
/// (file decoding included) then runs beside the matching instead of before it.
const PIPELINE_AFTER_ROWS: usize = 512;

/// Seeks every family's merge to the first cell of `row`: forward, the scan goes on at
/// `row`; reverse, below it.
fn seek_families(fams: &mut [FamilyScan], row: Bytes) {
    let key = StoreKey::first_on_row(row);
    for f in fams {
        f.iter.seek(&key);
    }
}

impl RegionScanner {
    /// A scanner over `range` (already clipped to the region) of the given stores, each with
    /// an optional set of qualifiers, sorted by family name. `cache_blocks` false reads
    /// blocks without caching them.
    pub fn new(
        stores: Vec<(Arc<Store>, Option<BTreeSet<Bytes>>)>,
        range: RowRange,
        reverse: bool,
        spec: ReadSpec,
        cache_blocks: bool,
    ) -> Result<Self> {
        let start: Option<StoreKey> = if reverse {
            match &range.hi {
                Bound::Included(r) => Some(StoreKey::first_on_row(row_successor(r))),
                Bound::Excluded(r) => Some(StoreKey::first_on_row(r.clone())),
                Bound::Unbounded => None,
            }
        } else {
            match &range.lo {
                Bound::Included(r) => Some(StoreKey::first_on_row(r.clone())),
                Bound::Excluded(r) => Some(StoreKey::first_on_row(row_successor(r))),
                Bound::Unbounded => None,
            }
        };
        let mut fams = Vec::with_capacity(stores.len());
        for (store, columns) in stores {
            // A range of exactly one row is a point read: bloom filters may skip files.
            let point = match (&range.lo, &range.hi) {
                (Bound::Included(a), Bound::Included(b)) if a == b => {
                    Some((a.as_ref(), columns.as_ref()))
                }
                _ => None,
            };
            let mut iter = store.merged(start.as_ref(), reverse, point, cache_blocks);
            take_error(&mut iter)?;
            fams.push(FamilyScan {
                family: store.family.clone(),
                rules: store.rules(),
                columns,
                iter,
            });
        }
        fams.sort_by(|a, b| a.family.cmp(&b.family));
        Ok(RegionScanner {
            fams,
            read_versions: spec.max_versions,
            spec,
            range,
            reverse,
            done: false,
            row_buf: Vec::with_capacity(16),
            cells_hint: 4,
            filter: None,
            filter_done: false,
            rows_out: 0,
            pipeline: true,
        })
    }

    /// With `on` false, keeps every family's merge on the reading thread (no helper
    /// threads), for scans that already run many at once in parallel.
    pub fn set_pipelining(&mut self, on: bool) {
        self.pipeline = on;
    }

    /// Sets the filter the rows pass through (the scan's one filter, handed from region to
    /// region so that its state, e.g. PageFilter's count, spans the whole scan).
    /// HBase's order applies (HBASE-17125): the family's version and TTL rules first, then
    /// the filter sees every version they keep, then the read's max versions caps the cells
    /// it included.
    pub fn set_filter(&mut self, mut filter: Option<Box<FilterExec>>) {
        self.spec.max_versions = match filter.as_deref_mut() {
            Some(f) => {
                f.set_max_versions(self.read_versions);
                u32::MAX
            }
            None => self.read_versions,
        };
        self.filter = filter;
    }

    /// Takes the filter back (to hand it to the next region's scanner).
    pub fn take_filter(&mut self) -> Option<Box<FilterExec>> {
        self.spec.max_versions = self.read_versions;
        self.filter.take()
    }

    /// True when the filter ended the scan: no later row, in this region or any other, can
    /// pass it.
    pub fn filter_done(&self) -> bool {
        self.filter_done
    }

    /// Counts the rows left that have at least one visible cell, building no cell and no
    /// row: what [`RegionScanner::next_row`] would return, counted. A scanner with a filter
    /// or a reverse one counts through `next_row` (the filter must see the cells).
    pub fn count_rows(&mut self) -> Result<u64> {
        if self.filter.is_some() || self.reverse {
            let mut n = 0;
            while self.next_row()?.is_some() {
                n += 1;
            }
            return Ok(n);
        }
        let mut n = 0;
        while !self.done {
            for f in &mut self.fams {
                take_error(&mut f.iter)?;
            }
            let Some(row) = self
                .fams
                .iter()
                .filter_map(|f| f.iter.peek().map(|c| &c.key.row))
                .min()
                .cloned()
            else {
                self.done = true;
                break;
            };
            if self.range.past_hi(&row) {
                self.done = true;
                break;
            }
            let mut visible = !self.range.contains(&row);
            let skip = visible;
            for f in &mut self.fams {
                if !visible {
                    let mut err = None;
                    let stream = RowCells {
                        iter: &mut f.iter,
                        row: &row,
                        err: &mut err,
                        seek: None,
                    };
                    match_row_from(stream, &f.rules, &self.spec, f.columns.as_ref(), |_| {
                        visible = true
                    });
                    if let Some(e) = err {
                        return Err(e);
                    }
                }
                skip_row(&mut f.iter, &row)?;
            }
            if visible && !skip {
                n += 1;
            }
        }
        Ok(n)
    }

    /// The next row with at least one visible cell, or `None` at the end of the range.
    pub fn next_row(&mut self) -> Result<Option<RowResult>> {
        if self.pipeline && self.rows_out == PIPELINE_AFTER_ROWS && self.filter.is_none() {
            for f in &mut self.fams {
                f.iter.pipeline();
            }
        }
        while !self.done {
            for f in &mut self.fams {
                take_error(&mut f.iter)?;
            }
            let next = self
                .fams
                .iter()
                .filter_map(|f| f.iter.peek().map(|c| &c.key.row));
            let row = if self.reverse { next.max() } else { next.min() };
            let Some(row) = row.cloned() else {
                self.done = true;
                break;
            };
            if (!self.reverse && self.range.past_hi(&row))
                || (self.reverse && self.range.before_lo(&row))
            {
                self.done = true;
                break;
            }
            let in_range = self.range.contains(&row);
            let plain_rows = in_range && !self.reverse && self.filter.is_none();
            let row_key_first = self.filter.as_ref().is_some_and(|f| f.row_key_first());
            if in_range && row_key_first {
                if let Some(filter) = self.filter.as_deref_mut() {
                    match filter.begin_row(&row) {
                        RowStart::Read => {}
                        RowStart::Done => {
                            self.done = true;
                            self.filter_done = true;
                            break;
                        }
                        RowStart::Skip(hint) => {
                            match hint {
                                Some(h) => seek_families(&mut self.fams, h),
                                _ => {
                                    for f in &mut self.fams {
                                        skip_row(&mut f.iter, &row)?;
                                    }
                                }
                            }
                            continue;
                        }
                    }
                }
            }
            let mut filter = if in_range && row_key_first {
                self.filter.as_deref_mut()
            } else {
                None
            };
            let seekable = filter.is_some();
            let mut cells = Vec::with_capacity(self.cells_hint);
            for f in &mut self.fams {
                let FamilyScan {
                    family,
                    rules,
                    columns,
                    iter,
                } = f;
                // A row one file holds whole, with plain rules and cells, and no filter to
                // see it: read straight off the file's block (see `MergeIter::plain_row`).
                if plain_rows {
                    if let Some(mut plain) = PlainRow::new(rules, &self.spec, columns.as_ref()) {
                        if iter.plain_row(&row, &mut plain, family, &mut cells)? {
                            skip_row(iter, &row)?;
                            continue;
                        }
                    }
                }
                let column_seek = std::cell::Cell::new(None);
                let emit = |c: StoreCell| {
                    let cell = Cell {
                        row: c.key.row,
                        family: family.clone(),
                        qualifier: c.key.qualifier,
                        timestamp: c.key.ts,
                        kind: c.key.kind,
                        value: c.value,
                    };
                    match filter.as_deref_mut() {
                        None => cells.push(cell),
                        Some(f) => {
                            f.offer(cell, &mut cells);
                            if let Some(q) = f.take_column_seek() {
                                column_seek.set(Some(q));
                            }
                        }
                    }
                };
                if in_range && !self.reverse {
                    // Forward: the matcher reads the row's cells straight off the merge.
                    let mut err = None;
                    let stream = RowCells {
                        iter,
                        row: &row,
                        err: &mut err,
                        seek: seekable.then_some(&column_seek),
                    };
                    match_row_from(stream, rules, &self.spec, columns.as_ref(), emit);
                    if let Some(e) = err {
                        return Err(e);
                    }
                    // The matcher may stop early only at the end of the row's cells.
                    skip_row(iter, &row)?;
                    continue;
                }
                // Reverse (cells arrive newest key first) or out of range: collect the row.
                let mut row_cells = std::mem::take(&mut self.row_buf);
                while iter.peek().is_some_and(|c| same_bytes(&c.key.row, &row)) {
                    match iter.next() {
                        Some(Ok(c)) => row_cells.push(c),
                        Some(Err(e)) => return Err(e),
                        None => break,
                    }
                }
                take_error(iter)?;
                if in_range && !row_cells.is_empty() {
                    row_cells.reverse();
                    match_row_into(
                        row_cells.drain(..),
                        rules,
                        &self.spec,
                        columns.as_ref(),
                        emit,
                    );
                }
                row_cells.clear();
                self.row_buf = row_cells;
            }
            self.cells_hint = self.cells_hint.max(cells.len());
            let filter = if in_range && !row_key_first && !cells.is_empty() {
                match self.filter.as_deref_mut() {
                    // The row has a visible cell: now the filter may judge its key.
                    Some(f) => match f.begin_row(&row) {
                        RowStart::Read => {
                            let read = std::mem::take(&mut cells);
                            for c in read {
                                f.offer(c, &mut cells);
                            }
                            Some(f)
                        }
                        RowStart::Done => {
                            self.done = true;
                            self.filter_done = true;
                            break;
                        }
                        RowStart::Skip(hint) => {
                            if let Some(h) = hint {
                                seek_families(&mut self.fams, h);
                            }
                            continue;
                        }
                    },
                    None => None,
                }
            } else {
                filter
            };
            if let Some(f) = filter {
                let keep = f.end_row(&mut cells);
                if let Some(to) = f.take_seek().filter(|_| !self.reverse) {
                    seek_families(&mut self.fams, to);
                }
                if !keep {
                    continue;
                }
            }
            if !cells.is_empty() {
                self.rows_out += 1;
                return Ok(Some(RowResult { row, cells }));
            }
        }
        Ok(None)
    }
}
