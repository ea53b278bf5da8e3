//! Read operations: time ranges, column selections, Get and Scan, and the rows they return.

pub use crate::cell::RowResult;

use super::b;
use crate::cell::Timestamp;
use crate::error::{Error, Result};
use crate::keys::{prefix_successor, RowRange};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::ops::Bound;

/// A time range `[min, max)` of cell timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// Inclusive lower bound.
    pub min: Timestamp,
    /// Exclusive upper bound.
    pub max: Timestamp,
}

impl TimeRange {
    /// Every timestamp.
    pub const ALL: TimeRange = TimeRange {
        min: 0,
        max: u64::MAX,
    };

    /// `[min, max)`; an empty or inverted range is a bad argument.
    pub fn new(min: Timestamp, max: Timestamp) -> Result<Self> {
        if min >= max {
            return Err(Error::bad_argument(format!(
                "time range [{min}, {max}) is empty"
            )));
        }
        Ok(TimeRange { min, max })
    }

    /// Exactly one timestamp.
    pub fn at(ts: Timestamp) -> Self {
        TimeRange {
            min: ts,
            max: ts.saturating_add(1),
        }
    }
}

impl Default for TimeRange {
    fn default() -> Self {
        TimeRange::ALL
    }
}

/// Which columns a read returns: whole families or single columns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnSelection {
    /// (family, qualifier or None for the whole family).
    pub(crate) items: Vec<(Bytes, Option<Bytes>)>,
}

impl ColumnSelection {
    fn add_family(&mut self, family: Bytes) {
        self.items.push((family, None));
    }
    fn add_column(&mut self, family: Bytes, qualifier: Bytes) {
        self.items.push((family, Some(qualifier)));
    }
}

/// Reads one row.
///
/// ```
/// use basalt_core::client::Get;
/// let g = Get::new("r").add_family("f").max_versions(3);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Get {
    pub(crate) row: Bytes,
    pub(crate) columns: ColumnSelection,
    pub(crate) time_range: TimeRange,
    pub(crate) max_versions: u32,
    pub(crate) filter: Option<crate::filter::Filter>,
}

impl Get {
    /// A get of the newest version of every column of `row`.
    pub fn new(row: impl AsRef<[u8]>) -> Self {
        Get {
            row: b(row),
            columns: ColumnSelection::default(),
            time_range: TimeRange::ALL,
            max_versions: 1,
            filter: None,
        }
    }
    /// The row read (coprocessors look at it).
    pub fn row(&self) -> &Bytes {
        &self.row
    }
    /// Runs `filter` on the row inside the region (see [`crate::filter`]); a row the filter
    /// drops reads as empty.
    pub fn filter(mut self, filter: crate::filter::Filter) -> Self {
        self.filter = Some(filter);
        self
    }
    /// Limits to a family (may be called many times).
    pub fn add_family(mut self, family: impl AsRef<[u8]>) -> Self {
        self.columns.add_family(b(family));
        self
    }
    /// Limits to a column (may be called many times).
    pub fn add_column(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.columns.add_column(b(family), b(qualifier));
        self
    }
    /// Only versions with timestamps in `range`.
    pub fn time_range(mut self, range: TimeRange) -> Self {
        self.time_range = range;
        self
    }
    /// Only the version at exactly `ts`.
    pub fn timestamp(mut self, ts: Timestamp) -> Self {
        self.time_range = TimeRange::at(ts);
        self
    }
    /// Versions per column (default 1; 0 is a bad argument).
    pub fn max_versions(mut self, n: u32) -> Self {
        self.max_versions = n;
        self
    }
}

/// Reads a range of rows, forward or reverse, as a stream.
///
/// For a forward scan `start_row` is inclusive and `stop_row` exclusive. As in HBase, a
/// reverse scan starts at `start_row` (inclusive, the highest row) and stops before
/// `stop_row` (exclusive, the lowest).
///
/// ```
/// use basalt_core::client::Scan;
/// let s = Scan::new().with_prefix("user1").reversed(true).limit(10);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scan {
    pub(crate) start_row: Option<Bytes>,
    pub(crate) stop_row: Option<Bytes>,
    pub(crate) prefix: Option<Bytes>,
    pub(crate) reverse: bool,
    pub(crate) columns: ColumnSelection,
    pub(crate) time_range: TimeRange,
    pub(crate) max_versions: u32,
    pub(crate) limit: Option<usize>,
    pub(crate) batch: Option<usize>,
    pub(crate) prefetch: bool,
    /// Whether a long region scan may move its merges to helper threads (off for the bucket
    /// scans of a salted scan, whose buckets already run in parallel).
    pub(crate) pipeline_merges: bool,
    pub(crate) cache_blocks: bool,
    pub(crate) filter: Option<crate::filter::Filter>,
    pub(crate) raw: bool,
    /// Region bounds `[start, end)` (an empty end: none) the scan is narrowed to besides its
    /// own range ([`Scan::within`]).
    pub(crate) clamp: Option<(Bytes, Bytes)>,
}

impl Default for Scan {
    fn default() -> Self {
        Self::new()
    }
}

impl Scan {
    /// The scan's rows as a range, following HBase's reverse-scan convention (a reverse
    /// scan starts at `start_row`, inclusive, and stops above `stop_row`, exclusive).
    pub fn row_range(&self) -> RowRange {
        let range = self.own_range();
        match &self.clamp {
            Some((start, end)) => range.clip(start, end),
            None => range,
        }
    }

    /// The scan's rows as its start, stop and prefix name them (no [`Scan::within`]).
    fn own_range(&self) -> RowRange {
        if let Some(p) = &self.prefix {
            let hi = match prefix_successor(p) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            };
            let lo = if p.is_empty() {
                Bound::Unbounded
            } else {
                Bound::Included(p.clone())
            };
            return RowRange { lo, hi };
        }
        let nonempty = |b: &Option<Bytes>| b.clone().filter(|r| !r.is_empty());
        if self.reverse {
            RowRange {
                hi: nonempty(&self.start_row).map_or(Bound::Unbounded, Bound::Included),
                lo: nonempty(&self.stop_row).map_or(Bound::Unbounded, Bound::Excluded),
            }
        } else {
            RowRange {
                lo: nonempty(&self.start_row).map_or(Bound::Unbounded, Bound::Included),
                hi: nonempty(&self.stop_row).map_or(Bound::Unbounded, Bound::Excluded),
            }
        }
    }

    /// A scan of the whole table.
    pub fn new() -> Self {
        Scan {
            start_row: None,
            stop_row: None,
            prefix: None,
            reverse: false,
            columns: ColumnSelection::default(),
            time_range: TimeRange::ALL,
            max_versions: 1,
            limit: None,
            batch: None,
            prefetch: true,
            pipeline_merges: true,
            cache_blocks: true,
            filter: None,
            raw: false,
            clamp: None,
        }
    }

    /// The part of this scan inside region bounds `[start, end)` (an empty `end`: no upper
    /// bound), or `None` when none of its rows can lie there: what a client sends the
    /// server of each region when a scan spans regions on several servers. Everything else
    /// (direction, columns, filter, limit) stays; a scan narrowed twice keeps both.
    ///
    /// ```
    /// use basalt_core::client::Scan;
    /// let s = Scan::new().start_row("b").stop_row("x");
    /// let part = s.within(b"m", b"q").unwrap();
    /// assert!(part.row_range().contains(b"m") && !part.row_range().contains(b"q"));
    /// assert!(s.within(b"x", b"").is_none());
    /// ```
    pub fn within(&self, start: &[u8], end: &[u8]) -> Option<Scan> {
        let (start, end) = match &self.clamp {
            None => (start.to_vec(), end.to_vec()),
            Some((s, e)) => {
                let lo = std::cmp::max(s.as_ref(), start).to_vec();
                let hi = match (e.is_empty(), end.is_empty()) {
                    (true, _) => end.to_vec(),
                    (false, true) => e.to_vec(),
                    (false, false) => std::cmp::min(e.as_ref(), end).to_vec(),
                };
                (lo, hi)
            }
        };
        if !end.is_empty() && start >= end {
            return None;
        }
        if !self.own_range().overlaps(&start, &end) {
            return None;
        }
        let mut out = self.clone();
        out.clamp = Some((Bytes::from(start), Bytes::from(end)));
        Some(out)
    }

    /// The region bounds the scan was narrowed to ([`Scan::within`]), if any.
    pub fn bounds(&self) -> Option<(&Bytes, &Bytes)> {
        self.clamp.as_ref().map(|(s, e)| (s, e))
    }

    /// The most rows the scan returns, if limited (a limit of 0 is none).
    pub fn get_limit(&self) -> Option<usize> {
        self.limit.filter(|n| *n > 0)
    }

    /// True for a scan from high rows to low rows.
    pub fn is_reversed(&self) -> bool {
        self.reverse
    }
    /// A raw scan (HBase's `Scan.setRaw`, the shell's `RAW => true`): the cells the stores
    /// hold, delete markers as cells of their kind ([`crate::cell::Cell::kind`]), with no
    /// marker applied. A put a marker masks shows until a flush or compaction whose input
    /// holds both drops it (as HBase's do, unless the family keeps deleted cells), so the
    /// answer depends on when those ran; versions beyond the family's max versions show
    /// until a major compaction. `max_versions` counts puts only, and the first put past it
    /// ends its column (older markers included); the family markers' qualifier is empty.
    /// Rules R1 to R6 of the matcher (`core/src/storage/matcher/mod.rs`).
    ///
    /// ```
    /// use basalt_core::client::Scan;
    /// let s = Scan::new().raw(true).max_versions(10);
    /// ```
    pub fn raw(mut self, raw: bool) -> Self {
        self.raw = raw;
        self
    }
    /// Runs `filter` inside each region the scan reads (see [`crate::filter`]): rows and
    /// cells it refuses never leave the region, and its seek hints skip what it would refuse.
    /// One filter state spans the whole scan (a PageFilter's page is the scan's). `limit`
    /// and `batch` apply to the filtered rows.
    pub fn filter(mut self, filter: crate::filter::Filter) -> Self {
        self.filter = Some(filter);
        self
    }
    /// Sets the start row (inclusive).
    pub fn start_row(mut self, row: impl AsRef<[u8]>) -> Self {
        self.start_row = Some(b(row));
        self
    }
    /// Sets the stop row (exclusive).
    pub fn stop_row(mut self, row: impl AsRef<[u8]>) -> Self {
        self.stop_row = Some(b(row));
        self
    }
    /// Only rows starting with `prefix` (replaces start and stop rows).
    pub fn with_prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.prefix = Some(b(prefix));
        self
    }
    /// Scans from high rows to low rows.
    pub fn reversed(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }
    /// Limits to a family.
    pub fn add_family(mut self, family: impl AsRef<[u8]>) -> Self {
        self.columns.add_family(b(family));
        self
    }
    /// Limits to a column.
    pub fn add_column(mut self, family: impl AsRef<[u8]>, qualifier: impl AsRef<[u8]>) -> Self {
        self.columns.add_column(b(family), b(qualifier));
        self
    }
    /// Only versions with timestamps in `range`.
    pub fn time_range(mut self, range: TimeRange) -> Self {
        self.time_range = range;
        self
    }
    /// Versions per column (default 1).
    pub fn max_versions(mut self, n: u32) -> Self {
        self.max_versions = n;
        self
    }
    /// The versions per column this scan returns.
    pub fn get_max_versions(&self) -> u32 {
        self.max_versions
    }
    /// At most `n` rows (0 means no limit, as in HBase).
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
    /// At most `n` cells per result: a wider row comes back as several results.
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = Some(n);
        self
    }
    /// Whether the engine reads the next chunk of rows on a blocking thread while the caller
    /// handles the current one (HBase's `Scan#setAsyncPrefetch`). On by default; it needs a
    /// tokio runtime and falls back to reading inline without one. Turn it off to keep a
    /// scan on the caller's thread, e.g. when many scans run at once on few cores.
    pub fn prefetch(mut self, on: bool) -> Self {
        self.prefetch = on;
        self
    }
    /// Whether blocks this scan reads from files go into the block cache (HBase's
    /// `Scan#setCacheBlocks`, default true). Turn it off for a one-off scan of much data, so
    /// that it does not push out the blocks other readers use; cached blocks are still used.
    pub fn cache_blocks(mut self, on: bool) -> Self {
        self.cache_blocks = on;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::Scan;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(0u8..4, 0..3)
    }

    proptest! {
        /// `within` keeps exactly the scan's rows inside the bounds, in either direction,
        /// narrowed once or twice; `None` only when no row of the scan lies there.
        #[test]
        fn within_is_the_intersection(
            start in proptest::option::of(key()),
            stop in proptest::option::of(key()),
            prefix in proptest::option::of(key()),
            reverse in any::<bool>(),
            bounds in proptest::collection::vec((key(), key()), 1..3),
            probe in key(),
        ) {
            let mut scan = Scan::new().reversed(reverse);
            if let Some(s) = &start { scan = scan.start_row(s); }
            if let Some(s) = &stop { scan = scan.stop_row(s); }
            if let Some(p) = &prefix { scan = scan.with_prefix(p); }
            let inside = |lo: &[u8], hi: &[u8], row: &[u8]| row >= lo && (hi.is_empty() || row < hi);
            let mut narrowed = Some(scan.clone());
            for (lo, hi) in &bounds {
                narrowed = narrowed.and_then(|n| n.within(lo, hi));
            }
            let want = scan.row_range().contains(&probe)
                && bounds.iter().all(|(lo, hi)| inside(lo, hi, &probe));
            match narrowed {
                Some(n) => {
                    prop_assert_eq!(n.row_range().contains(&probe), want);
                    prop_assert_eq!(n.is_reversed(), reverse);
                }
                None => prop_assert!(!want),
            }
        }
    }
}
