//! The in-place reads of a region view (see the parent module's doc, "In-place reads"):
//! [`RegionView::count_rows`], [`RegionView::fold_column`] and the paged read of a few
//! columns, [`RegionView::read_columns`], that a sandboxed plugin's column scanner serves
//! its pages from.
//!
//! Invariant: each read answers exactly what the merging scanner answers at the view's
//! read point. It reads a store file's blocks in place only where every entry there is
//! visible and the first entry of a column in a row is its newest value (the store's whole
//! content at the read point is that one file, no TTL, no delete marker met); anything else
//! goes through the scanner (a column read: from the row holding the first marker met on).

use super::{OwnedRegionView, RegionView};
use crate::cell::{same_bytes, CellType};
use crate::error::Result;
use crate::keys::RowRange;
use crate::ops::Scan;
use crate::region::Store;
use crate::storage::storefile::{CacheMode, StoreFileReader};
use bytes::Bytes;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where one store's data at a read point can be read in place (see [`RegionView`]).
enum InPlace {
    /// The store holds nothing at all: no file, empty MemStores.
    Empty,
    /// Everything the store holds is in this one file, all of it at or below the read point,
    /// and the family has no TTL.
    File(Arc<StoreFileReader>, CacheMode),
    /// Anything else: read through the merging scanner.
    No,
}

/// How `store` can be read in place at `read_point`. The MemStores and the file list are
/// looked at under one lock: writes at or below a pinned read point are all in a MemStore
/// or a listed file, so an empty MemStore pair and one file of cells at or below the read
/// point hold every cell the read point sees (a file held stays readable after a
/// compaction replaces it).
fn in_place(store: &Store, read_point: u64) -> InPlace {
    let ttl = store.descriptor().ttl_secs.is_some();
    let mode = store.cache_mode(true);
    let st = store.state.read();
    if !st.active.is_empty() || st.snapshot.as_ref().is_some_and(|m| !m.is_empty()) {
        return InPlace::No;
    }
    match st.files.as_slice() {
        [] => InPlace::Empty,
        [f] if !ttl && f.info().max_seq <= read_point => InPlace::File(f.clone(), mode),
        _ => InPlace::No,
    }
}

impl RegionView<'_> {
    /// How many endpoint answers (and pages of column reads) of this region were read in
    /// place so far (all calls).
    pub fn in_place_reads(&self) -> u64 {
        self.region.in_place_reads.load(Ordering::Relaxed)
    }

    /// Counts the rows of the call's range with at least one visible cell, as
    /// `scan(&Scan::new())?.count_rows()` would, but in place when it can: when the only
    /// store holding data has it all in one file at or below the read point, the family has
    /// no TTL and the file holds no delete marker in the range, the distinct rows of the
    /// file's entries in the range are counted straight from its blocks (every put there is
    /// visible: nothing deletes or expires it). Otherwise (a delete marker met, MemStore
    /// data, several files or stores, a TTL) it counts through the scanner.
    pub fn count_rows(&self) -> Result<u64> {
        self.reads.shared.check_open()?;
        let stores: Vec<Arc<Store>> = self.region.user_stores();
        let mut source = None;
        for store in &stores {
            match in_place(store, self.read_point) {
                InPlace::Empty => {}
                InPlace::File(f, mode) if source.is_none() => source = Some((f, mode)),
                _ => return self.scan(&Scan::new())?.count_rows(),
            }
        }
        let Some((file, mode)) = source else {
            return Ok(0);
        };
        let mut rows = 0u64;
        let mut last: Vec<u8> = Vec::new();
        let mut clean = true;
        file.walk_range(self.range, mode, |e| {
            if e.kind != CellType::Put {
                clean = false;
                return false;
            }
            if rows == 0 || e.row != last.as_slice() {
                rows += 1;
                last.clear();
                last.extend_from_slice(e.row);
            }
            true
        })?;
        if clean {
            self.region.in_place_reads.fetch_add(1, Ordering::Relaxed);
            Ok(rows)
        } else {
            self.scan(&Scan::new())?.count_rows()
        }
    }

    /// Folds the newest visible value of column `family:qualifier` of every row of the
    /// call's range, in row order, into `init()` with `step`; returns the number of rows
    /// having the column and the folded value. The same as scanning the column and folding
    /// each row's cell, but in place when it can (the family's store holds everything in
    /// one file at or below the read point, no TTL, no delete marker in the range): the
    /// first entry of the column in each row of the file is its newest version. When the
    /// in-place walk meets a delete marker it starts over through the scanner, with a fresh
    /// `init()`.
    pub fn fold_column<A>(
        &self,
        family: &[u8],
        qualifier: &[u8],
        init: impl Fn() -> A,
        mut step: impl FnMut(&mut A, &[u8]) -> Result<()>,
    ) -> Result<(u64, A)> {
        self.reads.shared.check_open()?;
        let store = self.region.stores.read().get(family).cloned();
        let source = match &store {
            // A family the table lacks: the scan reports it.
            None => InPlace::No,
            Some(store) => in_place(store, self.read_point),
        };
        match source {
            InPlace::Empty => return Ok((0, init())),
            InPlace::File(file, mode) => {
                let mut acc = init();
                let mut rows = 0u64;
                let mut last: Vec<u8> = Vec::new();
                let mut clean = true;
                let mut failed = None;
                file.walk_range(self.range, mode, |e| {
                    if e.kind != CellType::Put {
                        clean = false;
                        return false;
                    }
                    if e.qualifier != qualifier || (rows > 0 && e.row == last.as_slice()) {
                        return true;
                    }
                    rows += 1;
                    last.clear();
                    last.extend_from_slice(e.row);
                    match step(&mut acc, e.value) {
                        Ok(()) => true,
                        Err(err) => {
                            failed = Some(err);
                            false
                        }
                    }
                })?;
                if let Some(err) = failed {
                    return Err(err);
                }
                if clean {
                    self.region.in_place_reads.fetch_add(1, Ordering::Relaxed);
                    return Ok((rows, acc));
                }
            }
            InPlace::No => {}
        }
        let mut acc = init();
        let mut rows = 0u64;
        let mut scanner = self.scan(&Scan::new().add_column(family, qualifier))?;
        while let Some(row) = scanner.next_row()? {
            rows += 1;
            if let Some(cell) = row.cells.first() {
                step(&mut acc, &cell.value)?;
            }
        }
        Ok((rows, acc))
    }
}

/// One row of a column read ([`RegionView::read_columns`]): its key and the newest visible
/// value of each column asked for, in the order asked.
#[derive(Debug, Clone, Copy)]
pub struct ColumnRow<'a> {
    row: &'a [u8],
    values: Values<'a>,
}

/// Where a [`ColumnRow`]'s values are.
#[derive(Debug, Clone, Copy)]
enum Values<'a> {
    /// One column was asked for: its value, straight from where it was read.
    One(Option<&'a [u8]>),
    /// Per column asked for, where its value lies in `buf` (`None`: the row lacks it).
    Gathered {
        buf: &'a [u8],
        spans: &'a [Option<(usize, usize)>],
    },
}

impl<'a> ColumnRow<'a> {
    /// The row key.
    #[inline]
    pub fn row(&self) -> &'a [u8] {
        self.row
    }

    /// How many columns were asked for (each has a value or `None`).
    #[inline]
    pub fn columns(&self) -> usize {
        match self.values {
            Values::One(_) => 1,
            Values::Gathered { spans, .. } => spans.len(),
        }
    }

    /// The value of the `i`th column asked for; `None` when the row lacks it (or there is
    /// no `i`th column).
    #[inline]
    pub fn value(&self, i: usize) -> Option<&'a [u8]> {
        match self.values {
            Values::One(v) => v.filter(|_| i == 0),
            Values::Gathered { buf, spans } => {
                let (start, end) = (*spans.get(i)?)?;
                buf.get(start..end)
            }
        }
    }

    /// The value of every column asked for, in the order asked.
    #[inline]
    pub fn values(&self) -> impl Iterator<Item = Option<&'a [u8]>> + '_ {
        (0..self.columns()).map(|i| self.value(i))
    }
}

/// The row a column read is gathering: its key and then the values found so far, copied
/// into one buffer (reused from row to row: no allocation per row).
struct Gather {
    buf: Vec<u8>,
    row_len: usize,
    spans: Vec<Option<(usize, usize)>>,
    /// How many columns have a value.
    found: usize,
}

impl Gather {
    fn new(columns: usize) -> Self {
        Gather {
            buf: Vec::with_capacity(256),
            row_len: 0,
            spans: vec![None; columns],
            found: 0,
        }
    }

    /// Starts gathering `row`.
    fn start(&mut self, row: &[u8]) {
        self.buf.clear();
        self.buf.extend_from_slice(row);
        self.row_len = row.len();
        self.spans.fill(None);
        self.found = 0;
    }

    fn row_key(&self) -> &[u8] {
        self.buf.get(..self.row_len).unwrap_or_default()
    }

    /// Sets column `i`'s value unless it has one already (a newer version came first).
    fn set(&mut self, i: usize, value: &[u8]) {
        if let Some(span @ None) = self.spans.get_mut(i) {
            let start = self.buf.len();
            self.buf.extend_from_slice(value);
            *span = Some((start, self.buf.len()));
            self.found += 1;
        }
    }

    fn as_row(&self) -> ColumnRow<'_> {
        ColumnRow {
            row: self.row_key(),
            values: Values::Gathered {
                buf: &self.buf,
                spans: &self.spans,
            },
        }
    }
}

/// How an in-place column walk ended.
enum Walk {
    /// At the end of the rows.
    End,
    /// After the page's last row (this one), with rows possibly left.
    Full(Bytes),
    /// At a delete marker (or an expiring put) in `row`, which was visited already or not:
    /// the page goes on through the scanner after it, or from it.
    Marker { row: Bytes, visited: bool },
}

impl RegionView<'_> {
    /// Reads one page of columns `columns` (family, qualifier pairs): visits the rows of
    /// `rows` inside the call's range that have at least one of the columns, in row order,
    /// each with the newest visible value of every column asked for (in the order asked; a
    /// column asked twice gets its value twice), at most `max_rows` of them (at least one);
    /// `visit` returns false to end the page after the row it was given. Returns the last row
    /// visited when the page ended before the rows did, so that the next page reads the rows
    /// after it (`rows.lo = Bound::Excluded(last)`), or `None` when no row is left. No column
    /// asked for: no row.
    ///
    /// The rows and values are what a scan of the columns at the pinned read point gives
    /// (`scan(&Scan::new().add_column(f, q)...)`, each column's first cell), but read in
    /// place when they can: when at most one of the requested families' stores holds data,
    /// all of it in one file at or below the read point, and the family has no TTL, the rows
    /// come straight from the file's blocks until a delete marker is met, and from the
    /// marker's row on (or the row after, if it was visited already) the page goes on
    /// through the scanner. Otherwise it scans. A page starts where its range starts (a
    /// store file's walk seeks to the block holding it), never at the beginning.
    pub fn read_columns<C: AsRef<[u8]>>(
        &self,
        columns: &[(C, C)],
        rows: &RowRange,
        max_rows: usize,
        mut visit: impl FnMut(&ColumnRow<'_>) -> bool,
    ) -> Result<Option<Bytes>> {
        self.reads.shared.check_open()?;
        if columns.is_empty() {
            return Ok(None);
        }
        let max_rows = max_rows.max(1);
        let range = self.range.intersect(rows);
        let mut g = Gather::new(columns.len());
        let (file, mode, family) = match self.columns_source(columns) {
            (InPlace::Empty, _) => return Ok(None),
            (InPlace::No, _) => return self.scan_columns(columns, &range, max_rows, &mut g, visit),
            (InPlace::File(file, mode), family) => (file, mode, family),
        };
        if range.is_empty() {
            return Ok(None);
        }
        let mut visited = 0usize;
        let walk = FileWalk {
            file: &file,
            mode,
            range: &range,
            max_rows,
        };
        let end = match columns {
            [(_, q)] => walk.one(q.as_ref(), &mut visited, &mut visit)?,
            _ => {
                // The columns of the file's family, with their places in a row's values.
                let wanted: Vec<(usize, &[u8])> = columns
                    .iter()
                    .enumerate()
                    .filter(|(_, (f, _))| f.as_ref() == family)
                    .map(|(i, (_, q))| (i, q.as_ref()))
                    .collect();
                walk.gathering(&wanted, &mut g, &mut visited, &mut visit)?
            }
        };
        let lo = match end {
            Walk::End => {
                self.region.in_place_reads.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            Walk::Full(last) => {
                self.region.in_place_reads.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(last));
            }
            // The rows before the marker's are exact (a marker masks cells of its own row
            // only), and so is the marker's row if it was visited (a marker masks only what
            // sorts after it, and a row is visited at its column's first entry); the rest
            // goes through the scanner.
            Walk::Marker { row, visited: true } => Bound::Excluded(row),
            Walk::Marker {
                row,
                visited: false,
            } => Bound::Included(row),
        };
        let rest = RowRange {
            lo,
            hi: range.hi.clone(),
        };
        self.scan_columns(columns, &rest, max_rows - visited, &mut g, visit)
    }

    /// Where `columns` can be read from in place, with the family of the one file to read:
    /// every family asked for has an empty store but (at most) one whose store is one file.
    fn columns_source<'c, C: AsRef<[u8]>>(&self, columns: &'c [(C, C)]) -> (InPlace, &'c [u8]) {
        let stores = self.region.stores.read();
        let mut source = (InPlace::Empty, &[][..]);
        for (f, _) in columns {
            let f = f.as_ref();
            // A family the table lacks: the scan reports it.
            let Some(store) = stores.get(f) else {
                return (InPlace::No, f);
            };
            if matches!(source.0, InPlace::File(..)) && source.1 == f {
                continue;
            }
            match (in_place(store, self.read_point), &source.0) {
                (InPlace::Empty, _) => {}
                (InPlace::File(file, mode), InPlace::Empty) => {
                    source = (InPlace::File(file, mode), f)
                }
                _ => return (InPlace::No, f),
            }
        }
        source
    }

    /// [`RegionView::read_columns`] through the scanner, from the start of `rows`.
    fn scan_columns<C: AsRef<[u8]>>(
        &self,
        columns: &[(C, C)],
        rows: &RowRange,
        max_rows: usize,
        g: &mut Gather,
        mut visit: impl FnMut(&ColumnRow<'_>) -> bool,
    ) -> Result<Option<Bytes>> {
        let scan = columns
            .iter()
            .fold(Scan::new(), |s, (f, q)| s.add_column(f, q));
        let mut scanner = self.scan_rows(&scan, rows)?;
        let mut visited = 0usize;
        while let Some(r) = scanner.next_row()? {
            g.start(&r.row);
            for (i, (f, q)) in columns.iter().enumerate() {
                // Cells come by column, newest first: the first of a column is its value.
                let cell = r.cells.iter().find(|c| {
                    c.family.as_ref() == f.as_ref() && c.qualifier.as_ref() == q.as_ref()
                });
                if let Some(c) = cell {
                    g.set(i, &c.value);
                }
            }
            if g.found == 0 {
                continue;
            }
            visited += 1;
            if !visit(&g.as_row()) || visited >= max_rows {
                return Ok(Some(r.row));
            }
        }
        Ok(None)
    }
}

/// An in-place walk of a page's rows in one store file.
struct FileWalk<'a> {
    file: &'a StoreFileReader,
    mode: CacheMode,
    range: &'a RowRange,
    max_rows: usize,
}

impl FileWalk<'_> {
    /// The in-place walk of one column (`qualifier` of the file's family): a row is visited at
    /// the column's first entry (its newest version, when no marker came before it in the row),
    /// its value read straight from the block; the row's other entries are skipped.
    fn one(
        &self,
        qualifier: &[u8],
        visited: &mut usize,
        visit: &mut impl FnMut(&ColumnRow<'_>) -> bool,
    ) -> Result<Walk> {
        let max_rows = self.max_rows;
        // The row of the last entry, and whether it was visited.
        let mut row: Vec<u8> = Vec::with_capacity(64);
        let (mut open, mut done) = (false, false);
        let mut end = Walk::End;
        self.file.walk_range(self.range, self.mode, |e| {
            if !open || !same_bytes(e.row, &row) {
                row.clear();
                row.extend_from_slice(e.row);
                (open, done) = (true, false);
            }
            if e.kind != CellType::Put {
                end = Walk::Marker {
                    row: Bytes::copy_from_slice(e.row),
                    visited: done,
                };
                return false;
            }
            if done || !same_bytes(e.qualifier, qualifier) {
                return true;
            }
            done = true;
            *visited += 1;
            let r = ColumnRow {
                row: e.row,
                values: Values::One(Some(e.value)),
            };
            if !visit(&r) || *visited >= max_rows {
                end = Walk::Full(Bytes::copy_from_slice(e.row));
                return false;
            }
            true
        })?;
        Ok(end)
    }

    /// The in-place walk of several columns (`wanted`: each column of the file's family with its
    /// place among the values): a row's values are gathered (copied) until its last entry, and
    /// the row is visited when the next row starts; a marker in a row stops the walk before
    /// that row is visited.
    fn gathering(
        &self,
        wanted: &[(usize, &[u8])],
        g: &mut Gather,
        visited: &mut usize,
        visit: &mut impl FnMut(&ColumnRow<'_>) -> bool,
    ) -> Result<Walk> {
        let max_rows = self.max_rows;
        let mut open = false;
        let mut end = Walk::End;
        self.file.walk_range(self.range, self.mode, |e| {
            if !open || !same_bytes(e.row, g.row_key()) {
                // A new row: the one gathered is complete.
                if open && g.found > 0 {
                    *visited += 1;
                    if !visit(&g.as_row()) || *visited >= max_rows {
                        end = Walk::Full(Bytes::copy_from_slice(g.row_key()));
                        return false;
                    }
                }
                g.start(e.row);
                open = true;
            }
            if e.kind != CellType::Put {
                end = Walk::Marker {
                    row: Bytes::copy_from_slice(e.row),
                    visited: false,
                };
                return false;
            }
            for (i, q) in wanted {
                if same_bytes(q, e.qualifier) {
                    g.set(*i, e.value);
                }
            }
            true
        })?;
        if matches!(end, Walk::End) && open && g.found > 0 {
            *visited += 1;
            visit(&g.as_row());
        }
        Ok(end)
    }
}

impl OwnedRegionView {
    /// [`RegionView::read_columns`].
    pub fn read_columns<C: AsRef<[u8]>>(
        &self,
        columns: &[(C, C)],
        rows: &RowRange,
        max_rows: usize,
        visit: impl FnMut(&ColumnRow<'_>) -> bool,
    ) -> Result<Option<Bytes>> {
        self.view().read_columns(columns, rows, max_rows, visit)
    }
}
