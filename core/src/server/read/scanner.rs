//! The scan stream of a table: rows read ahead in chunks on a blocking thread, region after
//! region in key order (or reverse), every region at the scan's one read point.

use super::*;
use crate::cell::now_ms;
use crate::error::{Error, Result};
use crate::filter::FilterExec;
use crate::keys::RowRange;
use crate::ops::{RowResult, Scan};
use crate::region::scanner::RegionScanner;
use crate::region::Region;
use crate::server::read::ReadPath;
use crate::server::read::ScanPoint;
use crate::server::shared::TableState;
use crate::storage::matcher::ReadSpec;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A chunk of rows and the region they came from (the last one read, when a chunk spans
/// regions).
type Chunk = (VecDeque<RowResult>, Option<Arc<Region>>);

/// What a scan stream's reader is doing.
enum Ahead {
    /// Waiting for the caller (or not started).
    Idle(Box<TableScanner>),
    /// Reading the next chunk on a blocking thread.
    Reading(tokio::task::JoinHandle<(Box<TableScanner>, Result<Chunk>)>),
    /// Every row has been read, or reading failed.
    Done,
}

/// The state of a scan stream: the rows read and not yet taken, and the reader.
pub(crate) struct ScanStream {
    ahead: Ahead,
    buf: VecDeque<RowResult>,
    prefetch: bool,
}

impl ScanStream {
    /// The rows of the scan, one at a time (a failed read ends the stream with its error).
    pub(crate) fn into_stream(self) -> ResultStream {
        let stream = futures::stream::unfold(self, |mut s| async move {
            if s.buf.is_empty() {
                match s.next_chunk().await {
                    Ok(chunk) => s.buf = chunk,
                    Err(e) => {
                        s.ahead = Ahead::Done;
                        return Some((Err(e), s));
                    }
                }
            }
            let row = s.buf.pop_front()?;
            Some((Ok(row), s))
        });
        Box::pin(stream)
    }

    /// A stream over `scan` of `t`; with `per_region`, no chunk holds rows of two regions.
    /// It reads at `point` when given, else at a read point taken now.
    pub(crate) fn new(
        reads: Arc<ReadPath>,
        t: Arc<TableState>,
        scan: Scan,
        per_region: bool,
        point: Option<Arc<ScanPoint>>,
    ) -> Result<Self> {
        let prefetch = scan.prefetch;
        let mut scanner = TableScanner::new(reads, t, scan, point)?;
        scanner.per_region = per_region;
        Ok(ScanStream {
            ahead: Ahead::Idle(Box::new(scanner)),
            buf: VecDeque::new(),
            prefetch,
        })
    }

    /// The next chunk of rows (empty at the end).
    async fn next_chunk(&mut self) -> Result<VecDeque<RowResult>> {
        self.next_chunk_from().await.map(|(rows, _)| rows)
    }

    /// The next chunk of rows (empty at the end) and its region; starts reading the one
    /// after it when prefetching.
    pub(crate) async fn next_chunk_from(&mut self) -> Result<Chunk> {
        let (mut scanner, chunk) = match std::mem::replace(&mut self.ahead, Ahead::Done) {
            Ahead::Done => return Ok((VecDeque::new(), None)),
            Ahead::Idle(mut scanner) => {
                // Reading is synchronous; yield first so a long scan shares its worker thread
                // with other tasks instead of holding it to the end.
                tokio::task::yield_now().await;
                let chunk = scanner.read_chunk();
                (scanner, chunk)
            }
            Ahead::Reading(handle) => handle.await.map_err(|e| {
                Error::Io(std::io::Error::other(format!(
                    "scan reader task failed: {e}"
                )))
            })?,
        };
        let chunk = chunk?;
        if !scanner.finished {
            self.ahead = match tokio::runtime::Handle::try_current() {
                Ok(rt) if self.prefetch => Ahead::Reading(rt.spawn_blocking(move || {
                    let chunk = scanner.read_chunk();
                    (scanner, chunk)
                })),
                _ => Ahead::Idle(scanner),
            };
        }
        Ok(chunk)
    }
}

/// Walks a table's regions for one scan.
struct TableScanner {
    reads: Arc<ReadPath>,
    regions: VecDeque<Arc<Region>>,
    current: Option<RegionScanner>,
    /// The region `current` reads.
    current_region: Option<Arc<Region>>,
    /// End a chunk where a region ends (for the scanner hooks, which see one region's rows).
    per_region: bool,
    scan: Scan,
    range: RowRange,
    read_point: u64,
    /// Keeps the read point registered, so compactions keep what this scan may still read
    /// (shared with the other scans of one snapshot, such as a salted scan's buckets).
    _point: Arc<ScanPoint>,
    rows_left: Option<usize>,
    finished: bool,
    /// The scan's compiled filter, while no region scanner holds it.
    filter: Option<Box<FilterExec>>,
}

impl TableScanner {
    fn new(
        reads: Arc<ReadPath>,
        t: Arc<TableState>,
        scan: Scan,
        point: Option<Arc<ScanPoint>>,
    ) -> Result<Self> {
        reads.shared.check_open()?;
        t.check_enabled()?;
        validate_versions(scan.max_versions)?;
        if scan.batch == Some(0) {
            return Err(Error::bad_argument("batch size must be at least 1"));
        }
        let range = scan.row_range();
        let filter = match &scan.filter {
            Some(f) => Some(Box::new(f.compile(scan.reverse)?)),
            None => None,
        };
        // The read point before the region list: every region listed afterwards took every
        // write at or below it, and keeps it even if a split or merge retires the region
        // while the scan runs (a retired region takes no more writes and its files live as
        // long as the scan holds it). So the planned regions are read as they are, and
        // every row comes once, in order, whatever splits and merges happen meanwhile. A
        // shared point was registered before this call, so the same holds for it.
        let point = point.unwrap_or_else(|| Arc::new(reads.register_scan()));
        let regions: Vec<Arc<Region>> = t
            .regions
            .read()
            .iter()
            .filter(|r| range.overlaps(&r.start, &r.end))
            .cloned()
            .collect();
        // Check the requested families exist before streaming anything.
        if let Some(r) = regions.first() {
            resolve(r, &scan.columns)?;
        }
        let mut regions: VecDeque<_> = regions.into();
        if scan.reverse {
            regions = regions.into_iter().rev().collect();
        }
        Ok(TableScanner {
            read_point: point.point(),
            _point: point,
            reads,
            regions,
            current: None,
            current_region: None,
            per_region: false,
            rows_left: scan.limit.filter(|n| *n > 0),
            range,
            scan,
            finished: false,
            filter,
        })
    }

    /// Reads the next chunk of rows; an error ends the scan.
    fn read_chunk(&mut self) -> Result<Chunk> {
        let mut buf = VecDeque::with_capacity(SCAN_CHUNK);
        let r = self.fill(&mut buf);
        if r.is_err() {
            self.finished = true;
        }
        r.map(|()| (buf, self.current_region.clone()))
    }

    fn fill(&mut self, buf: &mut VecDeque<RowResult>) -> Result<()> {
        let mut rows = 0;
        while !self.finished && rows < SCAN_CHUNK {
            if self.rows_left == Some(0) {
                self.finished = true;
                break;
            }
            if self.current.is_none() {
                let Some(region) = self.regions.pop_front() else {
                    self.finished = true;
                    break;
                };
                region.read_requests.fetch_add(1, Ordering::Relaxed);
                let stores = resolve(&region, &self.scan.columns)?;
                let spec = ReadSpec {
                    read_point: self.read_point,
                    min_ts: self.scan.time_range.min,
                    max_ts: self.scan.time_range.max,
                    max_versions: self.scan.max_versions,
                    now_ms: now_ms(),
                    raw: self.scan.raw,
                };
                let range = self.range.clip(&region.start, &region.end);
                let mut scanner = RegionScanner::new(
                    stores,
                    range,
                    self.scan.reverse,
                    spec,
                    self.scan.cache_blocks,
                )?;
                scanner.set_filter(self.filter.take());
                scanner.set_pipelining(self.scan.pipeline_merges);
                self.current = Some(scanner);
                self.current_region = Some(region);
            }
            let next = match self.current.as_mut() {
                Some(s) => s.next_row()?,
                None => None,
            };
            let Some(row) = next else {
                if let Some(mut done) = self.current.take() {
                    self.filter = done.take_filter();
                    if done.filter_done() {
                        self.finished = true;
                    }
                }
                if self.per_region && rows > 0 {
                    break;
                }
                continue;
            };
            rows += 1;
            if let Some(n) = self.rows_left.as_mut() {
                *n -= 1;
            }
            match self.scan.batch {
                Some(b) if row.cells.len() > b => {
                    for chunk in row.cells.chunks(b) {
                        buf.push_back(RowResult {
                            row: row.row.clone(),
                            cells: chunk.to_vec(),
                        });
                    }
                }
                _ => buf.push_back(row),
            }
        }
        let _ = &self.reads;
        Ok(())
    }
}
