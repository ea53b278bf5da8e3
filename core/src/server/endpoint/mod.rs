//! Region-local calls for endpoints: run a function once per region of a key range, every
//! region at one pinned read point, with region-local reads that never leave the region.
//!
//! An [`EndpointCall`] pins a read point (registered like a scan's, so flushes and
//! compactions keep every version it may read) when it is made and holds it until dropped:
//! everything run through it reads one snapshot of the table, however many passes it makes.
//! [`EndpointCall::parts`] lists the table's current regions overlapping a range, each with
//! its share of the range; [`EndpointCall::run`] runs a function on one part through a
//! [`RegionView`].
//!
//! Splits and merges: a part's result must be computed entirely on one region object that
//! was live from start to end. After the function returns, `run` checks whether the region
//! was retired (retirement is final, so a region that is live at the end was live
//! throughout); if so it discards the result and runs the function again on the region's
//! successors in the table's current region list, each restricted to the retired part's
//! range, in key order. Successors hold every version at the pinned read point (a retired
//! region's writes are all in the store files its successors list, and compactions keep
//! what registered read points need), so the redo reads the same snapshot. Because every
//! redo is clipped to the retired part's range, a merge of two planned parts is read once
//! for each part's range: no row is skipped or counted twice.
//!
//! After [`MAX_REDOS`] redos in one call (regions splitting and merging faster than the
//! function runs), a retired region's answer is kept instead: it is exact as well, because
//! a retired region holds every write at or below the pinned read point and keeps its files
//! while the call holds it. So a busy table slows a call down but never fails it.
//!
//! In-place reads: [`RegionView::count_rows`] and [`RegionView::fold_column`] answer from a
//! store file's blocks without building cells when a store's whole content at the read
//! point is one file (empty MemStores, every cell at or below the read point, no TTL) and
//! the range holds no delete marker: every put there is then visible, and the first entry of
//! a row (or column) is its newest cell. A walk that meets a delete marker starts over
//! through the scanner, so the answer is always the scanner's. [`RegionView::read_columns`]
//! reads a page of a few columns' newest values the same way (a sandboxed plugin's column
//! scanner): a walk that meets a delete marker goes on through the scanner from that row.
//! These reads live in `columns`.
//!
//! Invariants: a function sees only rows of its part's range, at the pinned read point; each
//! row of the range is counted in exactly one part's answer.

use super::read::resolve;
use super::read::ScanPoint;
use super::validate::validate_versions;
use crate::cell::now_ms;
use crate::coprocessor::region_accessors;
use crate::error::Result;
use crate::keys::RowRange;
use crate::ops::{Get, RowResult, Scan};
use crate::region::scanner::RegionScanner;
use crate::region::Region;
use crate::schema::TableName;
use crate::server::read::ReadPath;
use crate::server::shared::TableState;
use crate::storage::matcher::ReadSpec;
use bytes::Bytes;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How many times one call redoes parts on successors; past it, a part whose region retired
/// keeps the answer computed on that region, which is exact at the call's read point too
/// (only regions splitting and merging faster than the function runs get there).
pub const MAX_REDOS: usize = 64;

/// One region's share of a call's range.
#[derive(Debug, Clone)]
pub struct RegionPart {
    region: Arc<Region>,
    range: RowRange,
}

impl RegionPart {
    /// Where this part runs.
    pub fn span(&self) -> RegionSpan {
        RegionSpan {
            region_id: self.region.id,
            region_start: self.region.start.clone(),
            region_end: self.region.end.clone(),
            range: self.range.clone(),
        }
    }
}

/// Where a result was computed: the region and the part of the call's range it covered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegionSpan {
    /// The region's id.
    pub region_id: u64,
    /// The region's start key (inclusive, empty for the first region).
    pub region_start: Bytes,
    /// The region's end key (exclusive, empty for the last region).
    pub region_end: Bytes,
    /// The rows of the call's range inside the region: what the result covers.
    pub range: RowRange,
}

impl RegionSpan {
    /// Orders spans by the start of their range (spans of one call never overlap).
    pub fn key_order(&self, other: &RegionSpan) -> std::cmp::Ordering {
        lower_cmp(&self.range.lo, &other.range.lo)
    }
}

/// A snapshot of one table for endpoint calls (see the module doc).
pub struct EndpointCall {
    reads: Arc<ReadPath>,
    table: Arc<TableState>,
    point: Arc<ScanPoint>,
}

impl std::fmt::Debug for EndpointCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointCall")
            .field("table", &self.table.name)
            .field("read_point", &self.point.point())
            .finish()
    }
}

impl ReadPath {
    /// Pins a read point of table `name` for endpoint calls.
    pub(crate) fn endpoint_call(self: &Arc<Self>, name: &TableName) -> Result<EndpointCall> {
        let table = self.shared.table(name)?;
        table.check_enabled()?;
        // The read point first: every region listed afterwards holds every write at or
        // below it (see `read`).
        let point = Arc::new(self.register_scan());
        Ok(EndpointCall {
            reads: self.clone(),
            table,
            point,
        })
    }
}

impl EndpointCall {
    /// The pinned read point.
    pub fn read_point(&self) -> u64 {
        self.point.point()
    }

    /// The table's name.
    pub fn table_name(&self) -> &TableName {
        &self.table.name
    }

    /// The table's current regions overlapping `range`, in key order, each with its share.
    pub fn parts(&self, range: &RowRange) -> Result<Vec<RegionPart>> {
        self.reads.shared.check_open()?;
        self.table.check_enabled()?;
        Ok(self
            .table
            .regions
            .read()
            .iter()
            .filter(|r| range.overlaps(&r.start, &r.end) && !clip(range, r).is_empty())
            .map(|r| RegionPart {
                region: r.clone(),
                range: clip(range, r),
            })
            .collect())
    }

    /// Runs `f` on `part`; when the region was retired by a split or merge before `f`
    /// returned, discards the result and runs `f` on its successors, each restricted to the
    /// part's range. Returns one result per region that answered, in key order. Fails (no
    /// result at all) when the table went away or the part was redone `MAX_REDOS` times.
    pub fn run<T>(
        &self,
        part: &RegionPart,
        mut f: impl FnMut(&RegionView<'_>) -> T,
    ) -> Result<Vec<(RegionSpan, T)>> {
        let mut out = Vec::new();
        let mut todo = VecDeque::from([part.clone()]);
        let mut redos = 0;
        while let Some(p) = todo.pop_front() {
            p.region.read_requests.fetch_add(1, Ordering::Relaxed);
            let view = RegionView {
                reads: &self.reads,
                region: &p.region,
                range: &p.range,
                read_point: self.read_point(),
            };
            let value = f(&view);
            // Past the redo budget the answer computed on the retired region stands: a
            // retired region took every write at or below the pinned read point before it
            // retired and keeps its files while held, so that answer is exact too.
            if !p.region.is_retired() || redos >= MAX_REDOS {
                out.push((p.span(), value));
                continue;
            }
            redos += 1;
            tracing::debug!(region = %p.region.name(), "region retired during an endpoint call; redoing on its successors");
            for s in self.parts(&p.range)?.into_iter().rev() {
                todo.push_front(s);
            }
        }
        Ok(out)
    }
}

/// `range` clipped to region `r`.
fn clip(range: &RowRange, r: &Region) -> RowRange {
    range.clip(&r.start, &r.end)
}

/// Compares two lower bounds: unbounded first; at the same key, included before excluded.
fn lower_cmp(a: &Bound<Bytes>, b: &Bound<Bytes>) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Less,
        (_, Bound::Unbounded) => Greater,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Less),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Greater),
    }
}

/// Compares two upper bounds: at the same key, excluded before included; unbounded last.
fn upper_cmp(a: &Bound<Bytes>, b: &Bound<Bytes>) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Greater,
        (_, Bound::Unbounded) => Less,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Greater),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Less),
    }
}

impl RowRange {
    /// The rows inside both ranges.
    pub fn intersect(&self, other: &RowRange) -> RowRange {
        let lo = if lower_cmp(&self.lo, &other.lo).is_ge() {
            self.lo.clone()
        } else {
            other.lo.clone()
        };
        let hi = if upper_cmp(&self.hi, &other.hi).is_le() {
            self.hi.clone()
        } else {
            other.hi.clone()
        };
        RowRange { lo, hi }
    }

    /// True when no row lies inside.
    pub fn is_empty(&self) -> bool {
        match (&self.lo, &self.hi) {
            (Bound::Included(l), Bound::Included(h)) => l > h,
            (Bound::Included(l), Bound::Excluded(h)) | (Bound::Excluded(l), Bound::Included(h)) => {
                l >= h
            }
            // (l, h) with h the successor of l (l + 0x00) is empty too.
            (Bound::Excluded(l), Bound::Excluded(h)) => {
                l >= h || (h.len() == l.len() + 1 && h.starts_with(l) && h.last() == Some(&0))
            }
            (_, Bound::Excluded(h)) => h.is_empty(),
            _ => false,
        }
    }
}

/// What an endpoint function sees of one region: its range and reads at the call's pinned
/// read point. Rows read here never leave the region unless the function returns them.
#[derive(Debug)]
pub struct RegionView<'a> {
    reads: &'a Arc<ReadPath>,
    region: &'a Arc<Region>,
    range: &'a RowRange,
    read_point: u64,
}

impl RegionView<'_> {
    region_accessors!();

    /// The table of the region.
    pub fn table(&self) -> &crate::schema::TableName {
        &self.region.table
    }

    /// The part of the call's range inside this region: what this call covers.
    pub fn range(&self) -> &RowRange {
        self.range
    }

    /// The call's pinned read point.
    pub fn read_point(&self) -> u64 {
        self.read_point
    }

    /// Scans this region's rows of the call's range (narrowed further by the scan's own
    /// start, stop or prefix) at the pinned read point. The scan's columns, time range,
    /// versions, filter, direction and limit apply; `batch` does not (rows come whole).
    pub fn scan(&self, scan: &Scan) -> Result<LocalScanner> {
        self.scan_rows(scan, &scan.row_range())
    }

    /// [`RegionView::scan`] of the rows of `rows` (in the call's range) instead of the
    /// scan's own start, stop or prefix.
    fn scan_rows(&self, scan: &Scan, rows: &RowRange) -> Result<LocalScanner> {
        self.reads.shared.check_open()?;
        validate_versions(scan.max_versions)?;
        let range = self.range.intersect(rows);
        let filter = match &scan.filter {
            Some(f) => Some(Box::new(f.compile(scan.reverse)?)),
            None => None,
        };
        let stores = resolve(self.region, &scan.columns)?;
        let spec = ReadSpec {
            read_point: self.read_point,
            min_ts: scan.time_range.min,
            max_ts: scan.time_range.max,
            max_versions: scan.max_versions,
            now_ms: now_ms(),
            raw: scan.raw,
        };
        let empty = range.is_empty();
        let mut inner = RegionScanner::new(stores, range, scan.reverse, spec, scan.cache_blocks)?;
        inner.set_filter(filter);
        Ok(LocalScanner {
            inner,
            left: if empty {
                Some(0)
            } else {
                scan.limit.filter(|n| *n > 0)
            },
        })
    }

    /// Reads one row of this region at the pinned read point (an empty result when the row
    /// lies outside the call's range in this region).
    pub fn get(&self, g: &Get) -> Result<RowResult> {
        self.reads.shared.check_open()?;
        if !self.range.contains(&g.row) {
            return Ok(RowResult::default());
        }
        validate_versions(g.max_versions)?;
        self.reads.read_row_in(self.region, g, self.read_point)
    }
}

impl RegionView<'_> {
    /// This view, held past the call's borrow (a sandboxed endpoint's host functions keep
    /// one while the plugin runs).
    pub fn to_owned_view(&self) -> OwnedRegionView {
        OwnedRegionView {
            reads: Arc::clone(self.reads),
            region: Arc::clone(self.region),
            range: self.range.clone(),
            read_point: self.read_point,
        }
    }
}

/// A [`RegionView`] that owns what it reads through ([`RegionView::to_owned_view`]).
#[derive(Debug, Clone)]
pub struct OwnedRegionView {
    reads: Arc<ReadPath>,
    region: Arc<Region>,
    range: RowRange,
    read_point: u64,
}

impl OwnedRegionView {
    /// The view, borrowed from this one.
    pub fn view(&self) -> RegionView<'_> {
        RegionView {
            reads: &self.reads,
            region: &self.region,
            range: &self.range,
            read_point: self.read_point,
        }
    }

    /// [`RegionView::scan`].
    pub fn scan(&self, scan: &Scan) -> Result<LocalScanner> {
        self.view().scan(scan)
    }

    /// [`RegionView::get`].
    pub fn get(&self, g: &Get) -> Result<RowResult> {
        self.view().get(g)
    }
}

/// The rows of a region-local scan, as an iterator (see [`RegionView::scan`]).
pub struct LocalScanner {
    inner: RegionScanner,
    left: Option<usize>,
}

impl std::fmt::Debug for LocalScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalScanner")
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}

impl LocalScanner {
    /// Counts the rows left (up to the scan's limit) without building them: the fast path
    /// of a row count.
    pub fn count_rows(&mut self) -> Result<u64> {
        match self.left {
            None => self.inner.count_rows(),
            Some(_) => {
                let mut n = 0;
                while self.next_row()?.is_some() {
                    n += 1;
                }
                Ok(n)
            }
        }
    }

    /// The next row, or `None` at the end.
    pub fn next_row(&mut self) -> Result<Option<RowResult>> {
        if self.left == Some(0) {
            return Ok(None);
        }
        let row = self.inner.next_row()?;
        if row.is_some() {
            if let Some(n) = self.left.as_mut() {
                *n -= 1;
            }
        }
        Ok(row)
    }
}

impl Iterator for LocalScanner {
    type Item = Result<RowResult>;

    fn next(&mut self) -> Option<Result<RowResult>> {
        match self.next_row() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => None,
            Err(e) => {
                self.left = Some(0);
                Some(Err(e))
            }
        }
    }
}

mod columns;
mod served;

pub use columns::ColumnRow;
pub(crate) use served::{no_host, serve};
pub use served::{EndpointAnswers, EndpointHost};

#[cfg(test)]
mod tests;
