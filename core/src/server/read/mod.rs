//! The read path: gets and scans at one read point.
//!
//! A get reads one row of one region; a scan walks the table's regions in key order (or
//! reverse) with a [`RegionScanner`] each, all at the read point taken when the scan began,
//! so the whole scan is one snapshot. Scans are streams that fill a small buffer of rows at
//! a time. Reads take the read point before they locate regions, so a region a split or
//! merge retires meanwhile still answers them exactly (see [`crate::region`]).

use super::read_points::{ReadPoints, Registration};
use super::shared::{EngineShared, TableState};
use super::validate::validate_versions;
use crate::cell::now_ms;
use crate::error::{Error, Result};
use crate::keys::RowRange;
use crate::ops::{validate_row, ColumnSelection, Get, RowResult, Scan};
use crate::region::scanner::RegionScanner;
use crate::region::{PreparedCell, Region, Store};
use crate::schema::TableName;
use crate::storage::matcher::ReadSpec;
use bytes::Bytes;
use futures::Stream;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

mod scanner;

pub(crate) use scanner::ScanStream;

/// A stream of scan results.
pub type ResultStream = Pin<Box<dyn Stream<Item = Result<RowResult>> + Send>>;

/// A store to read and, optionally, the only qualifiers wanted from it.
pub(crate) type StoreSelection = (Arc<Store>, Option<BTreeSet<Bytes>>);

/// The cells a get makes room for before reading.
const ROW_CELLS_HINT: usize = 16;

/// Rows a scan reads ahead per refill.
const SCAN_CHUNK: usize = 256;

fn family_err(region: &Region, family: &[u8]) -> Error {
    Error::FamilyNotFound {
        table: region.table.to_string(),
        family: String::from_utf8_lossy(family).into_owned(),
    }
}

/// Resolves a column selection to stores with optional qualifier sets.
/// Fails first if the region is offline.
pub(crate) fn resolve(region: &Region, sel: &ColumnSelection) -> Result<Vec<StoreSelection>> {
    region.check_online()?;
    if sel.items.is_empty() {
        return Ok(region
            .user_stores()
            .into_iter()
            .map(|s| (s, None))
            .collect());
    }
    let mut by_family: BTreeMap<Bytes, Option<BTreeSet<Bytes>>> = BTreeMap::new();
    for (f, q) in &sel.items {
        let entry = by_family
            .entry(f.clone())
            .or_insert_with(|| Some(BTreeSet::new()));
        match (q, entry.as_mut()) {
            (None, _) => *entry = None,
            (Some(q), Some(set)) => {
                set.insert(q.clone());
            }
            (Some(_), None) => {}
        }
    }
    by_family
        .into_iter()
        .map(|(f, cols)| {
            region
                .store(&f)
                .map(|s| (s, cols))
                .ok_or_else(|| family_err(region, &f))
        })
        .collect()
}

/// What a get of `g` reads at `read_point`.
fn read_spec(g: &Get, read_point: u64) -> ReadSpec {
    ReadSpec {
        read_point,
        min_ts: g.time_range.min,
        max_ts: g.time_range.max,
        max_versions: g.max_versions,
        now_ms: now_ms(),
        raw: false,
    }
}

/// The engine's read stage: gets, scans and the reads of hooks and endpoints, at read points
/// it registers so that flushes and compactions keep what an open reader may still need.
pub(crate) struct ReadPath {
    pub(crate) shared: Arc<EngineShared>,
    /// This stage itself, for the region readers hooks keep past a call's borrow.
    me: std::sync::Weak<ReadPath>,
    /// Read points of open gets and scans.
    read_points: ReadPoints,
}

/// A registered scan read point; unregistered on drop.
pub(crate) struct ScanPoint {
    reads: Arc<ReadPath>,
    reg: Registration,
}

impl std::fmt::Debug for ReadPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadPath").finish_non_exhaustive()
    }
}

impl ScanPoint {
    /// The read point.
    pub(crate) fn point(&self) -> u64 {
        self.reg.point
    }
}

impl Drop for ScanPoint {
    fn drop(&mut self) {
        self.reads.read_points.release(self.reg);
    }
}

/// A read point registered for the life of one borrow of the read path (a get): as
/// [`ScanPoint`] without holding a reference count.
pub(crate) struct LocalReadPoint<'a> {
    reads: &'a ReadPath,
    reg: Registration,
}

impl LocalReadPoint<'_> {
    /// The read point.
    pub(crate) fn point(&self) -> u64 {
        self.reg.point
    }
}

impl Drop for LocalReadPoint<'_> {
    fn drop(&mut self) {
        self.reads.read_points.release(self.reg);
    }
}

impl ReadPath {
    /// The read stage over `shared`.
    pub(crate) fn new(shared: Arc<EngineShared>) -> Arc<Self> {
        Arc::new_cyclic(|me| ReadPath {
            shared,
            me: me.clone(),
            read_points: ReadPoints::default(),
        })
    }

    /// Takes the current read point for a scan and registers it until the guard drops.
    pub(crate) fn register_scan(self: &Arc<Self>) -> ScanPoint {
        ScanPoint {
            reads: self.clone(),
            reg: self.read_points.register(&self.shared.mvcc),
        }
    }

    /// Takes the current read point for one read that ends before the guard drops.
    pub(crate) fn register_read(&self) -> LocalReadPoint<'_> {
        LocalReadPoint {
            reads: self,
            reg: self.read_points.register(&self.shared.mvcc),
        }
    }

    /// The smallest read point a reader may still open store files at.
    pub(crate) fn smallest_read_point(&self) -> u64 {
        self.read_points.smallest(&self.shared.mvcc)
    }

    /// Reads one row.
    pub(crate) fn get(&self, t: &TableState, g: &Get) -> Result<RowResult> {
        self.shared.check_open()?;
        t.check_enabled()?;
        validate_row(&g.row)?;
        validate_versions(g.max_versions)?;
        // The read point first: the region located afterwards took (or, when a split or
        // merge retired it since, still holds) every write at or below it. It is registered
        // like a scan's, so a flush or compaction meanwhile keeps what this read may need.
        let point = self.register_read();
        let region = t
            .locate(&g.row)
            .ok_or_else(|| Error::TableNotFound(t.name.to_string()))?;
        region.read_requests.fetch_add(1, Ordering::Relaxed);
        let stores = resolve(region.as_ref(), &g.columns)?;
        if g.filter.is_some() {
            // A filter is compiled (and its errors reported) on the full path only.
            return self.read_stores_row(stores, g, point.point());
        }
        self.read_row_by_store(stores, g, point.point())
    }

    /// Reads `g`'s row (`g` has no filter) one store at a time, in family order: a store
    /// that holds the row in one source, with rules [`Store::read_row_plain`] can apply,
    /// is read straight from that source; any other through a scanner of its own. Without
    /// a filter a row's families are matched independently, so this is what one scanner
    /// over every store returns (the property tests of `tests/read_paths.rs` check it).
    fn read_row_by_store(
        &self,
        mut stores: Vec<StoreSelection>,
        g: &Get,
        read_point: u64,
    ) -> Result<RowResult> {
        let spec = read_spec(g, read_point);
        stores.sort_by(|a, b| a.0.family.cmp(&b.0.family));
        // Room for a typical row up front: growing the vector cell by cell moved it twice.
        let mut cells = Vec::with_capacity(ROW_CELLS_HINT);
        for (store, columns) in stores {
            if store.read_row_plain(&g.row, columns.as_ref(), &spec, true, &mut cells)? {
                continue;
            }
            let range = RowRange {
                lo: Bound::Included(g.row.clone()),
                hi: Bound::Included(g.row.clone()),
            };
            let mut scanner =
                RegionScanner::new(vec![(store, columns)], range, false, spec.clone(), true)?;
            if let Some(r) = scanner.next_row()? {
                cells.extend(r.cells);
            }
        }
        Ok(match cells.first() {
            Some(c) => RowResult {
                row: c.row.clone(),
                cells,
            },
            None => RowResult::default(),
        })
    }

    /// Reads one row of `region` at `read_point`.
    pub(crate) fn read_row_in(
        &self,
        region: &Region,
        g: &Get,
        read_point: u64,
    ) -> Result<RowResult> {
        self.read_stores_row(resolve(region, &g.columns)?, g, read_point)
    }

    /// Reads `g`'s row from `stores` (resolved from its region) at `read_point`.
    fn read_stores_row(
        &self,
        stores: Vec<StoreSelection>,
        g: &Get,
        read_point: u64,
    ) -> Result<RowResult> {
        let spec = read_spec(g, read_point);
        let range = RowRange {
            lo: Bound::Included(g.row.clone()),
            hi: Bound::Included(g.row.clone()),
        };
        let filter = match &g.filter {
            Some(f) => Some(Box::new(f.compile(false)?)),
            None => None,
        };
        let mut scanner = RegionScanner::new(stores, range, false, spec, true)?;
        scanner.set_filter(filter);
        Ok(scanner.next_row()?.unwrap_or_default())
    }

    /// Reads `g`'s row of `region` as committed (what a get at the current read point
    /// gives) and as it will be once the `pending` cells (a batch's own, prepared under the
    /// row lock, not yet committed) are, from one read of the stores: `(before, after)`. The
    /// row's committed cells and the pending ones of that row go through the matcher
    /// together, the pending ones as one later write (of equal keys the last pending one
    /// counts, as in the MemStore). The caller holds the row's lock, so no other write of
    /// the row is in flight. `g`'s filter is not applied. A store that cannot hold the row
    /// is not read; when the batch puts each of the row's columns in it
    /// once, its after-image is those puts as [`lone_put_visible`] judges each (the matcher's
    /// verdict without a column to weigh them against).
    ///
    /// [`lone_put_visible`]: crate::storage::matcher::lone_put_visible
    pub(crate) fn read_row_before_after(
        &self,
        region: &Region,
        g: &Get,
        pending: &[PreparedCell],
    ) -> Result<(RowResult, RowResult)> {
        use crate::cell::{Cell, CellType, StoreCell, StoreKey};
        use crate::storage::matcher::{lone_put_visible, match_row_into};
        let stores = resolve(region, &g.columns)?;
        // Under the row lock nobody else writes the row: a row no store may hold (no
        // MemStore has it, every file's bloom filter rules it out) stays absent, and the
        // stores are not read at all (a new row's index maintenance).
        let present: Vec<bool> = stores
            .iter()
            .map(|(store, columns)| store.may_hold_row(&g.row, columns.as_ref()))
            .collect();
        let point = present.contains(&true).then(|| self.register_read());
        let read_point = match &point {
            Some(p) => p.point(),
            None => self.shared.mvcc.read_point(),
        };
        let spec = ReadSpec {
            read_point: read_point.saturating_add(1),
            min_ts: g.time_range.min,
            max_ts: g.time_range.max,
            max_versions: g.max_versions,
            now_ms: now_ms(),
            raw: false,
        };
        let mut out = Vec::new();
        let mut before = Vec::new();
        for ((store, columns), present) in stores.into_iter().zip(present) {
            let rules = store.rules();
            if !present {
                // Nothing committed: when the batch only puts distinct columns of this
                // store, each is visible or not on its own (no version or delete of the
                // row to weigh it against), and the matcher has nothing to decide.
                let mine = fresh_puts(pending, region, &store, &g.row);
                if let Some(mine) = mine {
                    for p in mine {
                        // Pending cells are read as the next write: the read point covers them.
                        let k = &p.cell.key;
                        if lone_put_visible(&k.qualifier, k.ts, &rules, &spec, columns.as_ref()) {
                            out.push(Cell {
                                row: g.row.clone(),
                                family: store.family.clone(),
                                qualifier: k.qualifier.clone(),
                                timestamp: k.ts,
                                kind: CellType::Put,
                                value: p.cell.value.clone(),
                            });
                        }
                    }
                    continue;
                }
            }
            let start = StoreKey::first_on_row(g.row.clone());
            let mut cells: Vec<StoreCell> = Vec::new();
            let iter = present
                .then(|| store.merged(Some(&start), false, Some((&g.row, columns.as_ref())), true))
                .into_iter()
                .flatten();
            for c in iter {
                let c = c?;
                if c.key.row != g.row {
                    break;
                }
                if c.key.seq <= read_point {
                    cells.push(c);
                }
            }
            // The batch's cells of this row, latest last; of equal keys the last counts.
            let mut mine: Vec<StoreCell> = pending
                .iter()
                .filter(|p| {
                    p.region.id == region.id
                        && p.store.family == store.family
                        && p.cell.key.row == g.row
                })
                .map(|p| {
                    let mut c = p.cell.clone();
                    c.key.seq = read_point.saturating_add(1);
                    c
                })
                .collect();
            mine.reverse();
            mine.sort_by(|a, b| a.key.cmp(&b.key));
            mine.dedup_by(|later, kept| later.key == kept.key);
            let family = store.family.clone();
            if cells.is_empty() {
                // Nothing committed (a new row): `before` has nothing of this store.
                cells = mine;
            } else {
                match_row_into(cells.clone(), &rules, &spec, columns.as_ref(), |c| {
                    before.push(Cell {
                        row: g.row.clone(),
                        family: family.clone(),
                        qualifier: c.key.qualifier,
                        timestamp: c.key.ts,
                        kind: CellType::Put,
                        value: c.value,
                    })
                });
                cells.extend(mine);
                cells.sort_by(|a, b| a.key.cmp(&b.key));
            }
            match_row_into(cells, &rules, &spec, columns.as_ref(), |c| {
                out.push(Cell {
                    row: g.row.clone(),
                    family: family.clone(),
                    qualifier: c.key.qualifier,
                    timestamp: c.key.ts,
                    kind: CellType::Put,
                    value: c.value,
                })
            });
        }
        let row = |cells| RowResult {
            row: g.row.clone(),
            cells,
        };
        Ok((row(before), row(out)))
    }

    /// Starts a scan of `t` without its scanner hooks (`hooks::scan` runs them); rows arrive
    /// as a stream, at `point` when given (a read point already registered, shared by
    /// several scans that must read one snapshot), else at a read point of its own.
    ///
    /// Rows are read in chunks of 256. The first chunk is read when the stream is
    /// first polled, on the caller's task; with prefetch on (the default), each later chunk is
    /// read on a blocking thread while the caller handles the one before, so at most two
    /// chunks are held. Dropping the stream abandons a chunk being read.
    pub(crate) fn scan_at(
        self: &Arc<Self>,
        t: Arc<TableState>,
        scan: Scan,
        point: Option<Arc<ScanPoint>>,
    ) -> Result<ResultStream> {
        Ok(ScanStream::new(self.clone(), t, scan, false, point)?.into_stream())
    }
}

/// The batch's pending cells of `row` in `store` of `region`, in qualifier order, when
/// they are all puts of distinct columns (one write per column, so none hides another);
/// `None` otherwise.
fn fresh_puts<'a>(
    pending: &'a [PreparedCell],
    region: &Region,
    store: &crate::region::Store,
    row: &Bytes,
) -> Option<Vec<&'a PreparedCell>> {
    let mut mine: Vec<&PreparedCell> = Vec::new();
    for p in pending {
        if p.region.id == region.id && p.store.family == store.family && p.cell.key.row == *row {
            if p.cell.key.kind != crate::cell::CellType::Put {
                return None;
            }
            mine.push(p);
        }
    }
    mine.sort_unstable_by(|a, b| a.cell.key.qualifier.cmp(&b.cell.key.qualifier));
    if mine
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.cell.key.qualifier == b.cell.key.qualifier))
    {
        return None;
    }
    Some(mine)
}

impl crate::coprocessor::HookReads for ReadPath {
    fn get(&self, table: &TableName, g: &Get) -> Result<RowResult> {
        let t = self.shared.table(table)?;
        ReadPath::get(self, &t, g)
    }

    fn get_before_after(
        &self,
        region: &Region,
        g: &Get,
        pending: &[PreparedCell],
    ) -> Result<(RowResult, RowResult)> {
        self.read_row_before_after(region, g, pending)
    }

    fn owned(&self) -> Option<Arc<dyn crate::coprocessor::HookReads>> {
        self.me
            .upgrade()
            .map(|r| r as Arc<dyn crate::coprocessor::HookReads>)
    }
}
