//! A scan through a cluster: the table's regions in the scan's order, each scanned on its
//! server (the scan clamped to the region, `Scan::within`), their rows streamed one region
//! after the other.
//!
//! Invariants: rows come in the scan's order, each once: when a region's scan fails with an
//! error that means the region moved (or its server went away) the locations are re-read
//! and the scan goes on from the row after the last one returned, until the operation's
//! deadline; a limit counts rows over all regions. A scan at a read point pins it on each
//! server it reaches (`read_point`).

use super::read_point::RemoteReadPoint;
use super::route::{retryable, Located, RetryPolicy, Router};
use crate::rpc::messages::ScanRequest;
use basalt_core::client::{RowResult, Scan};
use basalt_core::{Result, TableName};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use std::sync::Arc;
use std::time::Instant;

/// The state of one scan through a cluster.
struct ClusterScan {
    router: Arc<Router>,
    policy: RetryPolicy,
    table: TableName,
    scan: Scan,
    at: Option<RemoteReadPoint>,
    deadline: Instant,
    /// The regions left to scan, in the scan's order (`None`: to be read).
    regions: Option<Vec<Located>>,
    /// The region being scanned.
    current: Option<BoxStream<'static, Result<RowResult>>>,
    /// The last row returned.
    last: Option<Bytes>,
    /// Rows still to return, when the scan has a limit.
    remaining: Option<usize>,
    done: bool,
}

/// The rows of `scan` over `table`'s regions (see the module doc).
pub(crate) fn rows(
    router: Arc<Router>,
    policy: RetryPolicy,
    table: TableName,
    scan: Scan,
    at: Option<RemoteReadPoint>,
) -> impl Stream<Item = Result<RowResult>> + Send + 'static {
    let remaining = scan.get_limit();
    let state = ClusterScan {
        router,
        policy,
        table,
        scan,
        at,
        deadline: Instant::now() + policy.operation_timeout,
        regions: None,
        current: None,
        last: None,
        remaining,
        done: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        let item = s.next_row().await?;
        Some((item, s))
    })
}

impl ClusterScan {
    /// The next row, an error (the stream's last item), or `None` at the end.
    async fn next_row(&mut self) -> Option<Result<RowResult>> {
        loop {
            if self.done || self.remaining == Some(0) {
                return None;
            }
            if let Some(current) = &mut self.current {
                match current.next().await {
                    Some(Ok(row)) => {
                        if self.last.as_ref() != Some(&row.row) {
                            if let Some(n) = &mut self.remaining {
                                *n = n.saturating_sub(1);
                            }
                        }
                        self.last = Some(row.row.clone());
                        return Some(Ok(row));
                    }
                    Some(Err(e)) => {
                        self.current = None;
                        if let Err(e) = self.retry_after(e).await {
                            self.done = true;
                            return Some(Err(e));
                        }
                        continue;
                    }
                    None => {
                        self.current = None;
                        if let Some(regions) = &mut self.regions {
                            if !regions.is_empty() {
                                regions.remove(0);
                            }
                        }
                        continue;
                    }
                }
            }
            if self.regions.is_none() {
                let located = match self.router.settle().await {
                    Ok(()) => self.router.regions(&self.table).await,
                    Err(e) => Err(e),
                };
                match located {
                    Ok(all) => self.regions = Some(self.ordered(&all)),
                    Err(e) => {
                        if let Err(e) = self.retry_after(e).await {
                            self.done = true;
                            return Some(Err(e));
                        }
                        continue;
                    }
                }
            }
            let region = self.regions.as_ref().and_then(|r| r.first()).cloned()?;
            let Some(part) = self.part(&region) else {
                if let Some(regions) = &mut self.regions {
                    regions.remove(0);
                }
                continue;
            };
            let opening = open(
                self.table.clone(),
                self.at.clone(),
                self.policy.rpc_timeout,
                region,
                part,
            );
            match opening.await {
                Ok(stream) => self.current = Some(stream),
                Err(e) => {
                    if let Err(e) = self.retry_after(e).await {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
        }
    }

    /// `all` in the scan's order.
    fn ordered(&self, all: &[Located]) -> Vec<Located> {
        let mut out = all.to_vec();
        if self.scan.is_reversed() {
            out.reverse();
        }
        out
    }

    /// The part of the scan in `region` past the last row returned, if any.
    fn part(&self, region: &Located) -> Option<Scan> {
        let (mut lo, mut hi) = (region.start.clone(), region.end.clone());
        if let Some(last) = &self.last {
            if self.scan.is_reversed() {
                if hi.is_empty() || last < &hi {
                    hi = last.clone();
                }
            } else {
                let mut after = last.to_vec();
                after.push(0);
                if after[..] > lo[..] {
                    lo = Bytes::from(after);
                }
            }
        }
        if !hi.is_empty() && lo >= hi {
            return None;
        }
        let mut part = self.scan.within(&lo, &hi)?;
        if let Some(n) = self.remaining {
            part = part.limit(n);
        }
        Some(part)
    }

    /// After `e`: re-reads the locations and pauses when `e` may pass and time is left,
    /// else gives `e` back.
    async fn retry_after(&mut self, e: basalt_core::Error) -> Result<()> {
        if !retryable(&e, true) {
            return Err(e);
        }
        self.router.forget(&self.table);
        self.regions = None;
        let pause = self.policy.pause;
        if Instant::now() + pause >= self.deadline {
            return Err(e);
        }
        tokio::time::sleep(pause).await;
        Ok(())
    }
}

/// Opens the scan of `part` of `table` on `region`'s server (at `at`, pinned there first).
async fn open(
    table: TableName,
    at: Option<RemoteReadPoint>,
    rpc: std::time::Duration,
    region: Located,
    part: Scan,
) -> Result<BoxStream<'static, Result<RowResult>>> {
    let read_point = match &at {
        Some(at) => Some(at.handle_on(&region.server, rpc).await?),
        None => None,
    };
    let request = ScanRequest {
        table,
        scan: part,
        read_point,
    };
    Ok(region.server.scan(request, rpc).await?.boxed())
}
