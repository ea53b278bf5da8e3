//! Endpoint calls through a cluster: a range of rows is cut at the region boundaries the
//! client knows, and each piece sent to its region's server with the read point pinned
//! there (`read_point`); the answers come back in key order.
//!
//! Invariants: each row of the range is answered by exactly one server: a piece is sent
//! again (after the locations are read anew) only when its server refused all of it
//! (`RegionNotServed`, a move or a split that left its rows elsewhere; a server that
//! cannot be reached), and the next piece starts where the answered one's region ended. A
//! service's own errors are answers of their regions, not retried.

use super::route::{with_retries, Router};
use super::RemoteReadPoint;
use super::RetryPolicy;
use crate::rpc::client::unexpected;
use crate::rpc::messages::{EndpointRequest, Reply, Request};
use basalt_core::endpoint::EndpointAnswers;
use basalt_core::keys::{row_successor, RowRange};
use basalt_core::{Error, Result, TableName};
use bytes::Bytes;
use std::ops::Bound;

/// Runs endpoint `service` of `table` on `range` at `at` (see the module doc).
pub(crate) async fn call(
    router: &Router,
    policy: RetryPolicy,
    table: &TableName,
    service: &str,
    range: RowRange,
    request: Bytes,
    at: &RemoteReadPoint,
) -> Result<EndpointAnswers> {
    let mut out = Vec::new();
    let mut rest = Some(range);
    while let Some(range) = rest.take().filter(|r| !r.is_empty()) {
        let (answers, region_end) = with_retries(router, Some(table), policy, true, || {
            let range = &range;
            let request = request.clone();
            async move {
                let first = first_row(range);
                let region = router.locate(table, &first).await?;
                let piece = range.clip(&region.start, &region.end);
                let handle = at.handle_on(&region.server, policy.rpc_timeout).await?;
                let call = Request::CallEndpoint(EndpointRequest {
                    table: table.clone(),
                    service: service.to_string(),
                    range: piece,
                    request,
                    read_point: Some(handle),
                });
                match region.server.call(call, policy.operation_timeout).await? {
                    Reply::Endpoint(answers) => Ok((answers, region.end)),
                    other => Err(unexpected("call_endpoint", &other)),
                }
            }
        })
        .await?;
        out.extend(
            answers
                .into_iter()
                .map(|(span, r)| (span, r.map_err(Error::from))),
        );
        if !region_end.is_empty() {
            let after = RowRange {
                lo: Bound::Included(region_end),
                hi: Bound::Unbounded,
            };
            rest = Some(range.intersect(&after));
        }
    }
    Ok(out)
}

/// The first row a range can hold (the row to locate its first region by).
fn first_row(range: &RowRange) -> Bytes {
    match &range.lo {
        Bound::Unbounded => Bytes::new(),
        Bound::Included(k) => k.clone(),
        Bound::Excluded(k) => row_successor(k),
    }
}
