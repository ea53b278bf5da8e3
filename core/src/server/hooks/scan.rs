//! The scan of a table with coprocessors: the scanner hooks around the plain scan
//! (`pre_scanner_open`, `post_scanner_next`, `post_scanner_close` on every exit).

use crate::coprocessor::{HookEnv, RegionHooks};
use crate::error::{Error, Result};
use crate::ops::{RowResult, Scan};
use crate::region::Region;
use crate::server::hooks::lifecycle::{block_on_hooks, logged};
use crate::server::read::{ReadPath, ResultStream, ScanPoint, ScanStream};
use crate::server::shared::TableState;
use std::collections::VecDeque;
use std::sync::Arc;

/// The state of a hooked scan stream. Until `closed`, dropping it runs
/// `post_scanner_close` on a background task.
struct HookedScan {
    reads: Arc<ReadPath>,
    table: Arc<TableState>,
    hooks: Arc<dyn RegionHooks>,
    /// The scan until it is opened.
    scan: Option<Scan>,
    inner: Option<ScanStream>,
    /// The region the scan was opened on (the close hook's region).
    region: Option<Arc<Region>>,
    /// A read point shared with other scans, if the scan reads at one.
    point: Option<Arc<ScanPoint>>,
    buf: VecDeque<RowResult>,
    closed: bool,
    ended: bool,
}

impl HookedScan {
    async fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.inner = None;
        if let Some(region) = self.region.clone() {
            let env = HookEnv::new(&*self.reads, &self.table.name, region.clone());
            logged(
                "post_scanner_close",
                &region,
                self.hooks.post_scanner_close(&env).await,
            );
        }
    }

    async fn open(&mut self) -> Result<()> {
        let Some(mut scan) = self.scan.take() else {
            return Ok(());
        };
        let region = first_region(&self.table, &scan)
            .ok_or_else(|| Error::TableNotFound(self.table.name.to_string()))?;
        let env = HookEnv::new(&*self.reads, &self.table.name, region.clone());
        self.hooks.pre_scanner_open(&env, &mut scan).await?;
        // From here on the close hook is owed.
        self.region = Some(region);
        self.inner = Some(ScanStream::new(
            self.reads.clone(),
            self.table.clone(),
            scan,
            true,
            self.point.take(),
        )?);
        Ok(())
    }

    /// The next row, running hooks as batches arrive; `None` at the end.
    async fn next(&mut self) -> Option<Result<RowResult>> {
        if self.ended {
            return None;
        }
        if self.scan.is_some() {
            if let Err(e) = self.open().await {
                self.ended = true;
                self.close().await;
                return Some(Err(e));
            }
        }
        loop {
            if let Some(row) = self.buf.pop_front() {
                return Some(Ok(row));
            }
            let Some(inner) = self.inner.as_mut() else {
                self.ended = true;
                self.close().await;
                return None;
            };
            let (chunk, region) = match inner.next_chunk_from().await {
                Ok(c) => c,
                Err(e) => {
                    self.ended = true;
                    self.close().await;
                    return Some(Err(e));
                }
            };
            let Some(region) = region.filter(|_| !chunk.is_empty()) else {
                self.ended = true;
                self.close().await;
                return None;
            };
            let mut rows = Vec::from(chunk);
            let env = HookEnv::new(&*self.reads, &self.table.name, region);
            if let Err(e) = self.hooks.post_scanner_next(&env, &mut rows).await {
                self.ended = true;
                self.close().await;
                return Some(Err(e));
            }
            self.buf = rows.into();
        }
    }
}

impl Drop for HookedScan {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let Some(region) = self.region.take() else {
            return;
        };
        // Dropped early: the reader goes now, the close hook runs in the background.
        self.inner = None;
        let reads = self.reads.clone();
        let table = self.table.clone();
        let hooks = self.hooks.clone();
        let fut = async move {
            let env = HookEnv::new(&*reads, &table.name, region.clone());
            logged(
                "post_scanner_close",
                &region,
                hooks.post_scanner_close(&env).await,
            );
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(fut);
            }
            Err(_) => {
                let r = block_on_hooks(async move {
                    fut.await;
                    Ok(())
                });
                if let Err(e) = r {
                    tracing::warn!(error = %e, "scanner close hook failed");
                }
            }
        }
    }
}

/// The region a scan starts in, in its direction.
fn first_region(t: &TableState, scan: &Scan) -> Option<Arc<Region>> {
    // A scan narrowed to one region's bounds starts (either way) in that region.
    if let Some((start, _)) = scan.bounds() {
        return match start.is_empty() {
            true => t.regions.read().first().cloned(),
            false => t.locate(start),
        };
    }
    let start = scan
        .prefix
        .clone()
        .or_else(|| scan.start_row.clone())
        .filter(|r| !r.is_empty());
    match start {
        Some(row) => t.locate(&row),
        None if scan.reverse => t.regions.read().last().cloned(),
        None => t.regions.read().first().cloned(),
    }
}

/// Starts a scan of `t` (rows arrive as a stream, see [`ReadPath::scan_at`]) at `point` when
/// given (a read point already registered, shared by several scans that must read one
/// snapshot), else at a read point of its own; running the scanner hooks when the table
/// has coprocessors.
pub(crate) fn scan(
    reads: &Arc<ReadPath>,
    t: Arc<TableState>,
    scan: Scan,
    point: Option<Arc<ScanPoint>>,
) -> Result<ResultStream> {
    match t.hooks() {
        Some(hooks) => Ok(hooked(reads.clone(), t, hooks, scan, point)),
        None => reads.scan_at(t, scan, point),
    }
}

/// A scan stream running `hooks`' scanner hooks, at `point` when given (else at a read
/// point taken when it opens).
fn hooked(
    reads: Arc<ReadPath>,
    table: Arc<TableState>,
    hooks: Arc<dyn RegionHooks>,
    scan: Scan,
    point: Option<Arc<ScanPoint>>,
) -> ResultStream {
    let state = HookedScan {
        reads,
        table,
        hooks,
        scan: Some(scan),
        inner: None,
        region: None,
        point,
        buf: VecDeque::new(),
        closed: false,
        ended: false,
    };
    Box::pin(futures::stream::unfold(state, |mut s| async move {
        let item = s.next().await?;
        Some((item, s))
    }))
}
