//! The client side of the built-ins: [`AggregationClient`], one call of an endpoint per
//! aggregate (a few for the median), and the merging of the per-region answers
//! ([`stats_with`], [`median_with`]), which salted tables share.
//!
//! Invariants kept: every pass of one answer reads at one read point; statistics merge
//! exactly (integer sums checked for overflow); the median narrows the value range pass by
//! pass until each region's values in it are few enough to ship, so the answer is always one
//! of the column's values.

use super::{
    bucket_width, Aggregate, AggregateOp, AggregateRequest, AggregateResponse, Column, Number,
    RegionHistogram, RegionStats, RowCount, AGGREGATE, MEDIAN_BUCKETS, MEDIAN_SHIP_LIMIT,
    ROW_COUNT,
};
use crate::service::{fold, Endpoints, KeyRange, ResponseStream, Snapshot};
use basalt_core::client::Backend;
use basalt_core::{Engine, IntoTableName};
use basalt_core::{Error, Result};
use futures::StreamExt;

/// HBase's `AggregationClient`: each method is one call of a built-in endpoint (two or a
/// few for the median), merged on the client; see the module doc for the semantics.
pub struct AggregationClient<B: Backend = Engine> {
    endpoints: Endpoints<B>,
}

impl<B: Backend> Clone for AggregationClient<B> {
    fn clone(&self) -> Self {
        AggregationClient {
            endpoints: self.endpoints.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for AggregationClient<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregationClient")
            .field("endpoints", &self.endpoints)
            .finish()
    }
}

impl<B: Backend> AggregationClient<B> {
    /// A client calling the built-ins through `endpoints` (whose registry must hold them,
    /// e.g. [`EndpointRegistry::with_builtins`]).
    ///
    /// [`EndpointRegistry::with_builtins`]: crate::EndpointRegistry::with_builtins
    pub fn new(endpoints: Endpoints<B>) -> Self {
        AggregationClient { endpoints }
    }

    /// Every statistic of `column` over `range`, merged, at one snapshot.
    pub async fn stats(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<RegionStats> {
        let table = &table.into_table_name()?;
        let snap = self.endpoints.snapshot(table)?;
        stats_at(&snap, range, column).await
    }

    /// Rows of `range` having `column`.
    pub async fn row_count(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<u64> {
        let table = &table.into_table_name()?;
        Ok(self.stats(table, range, column).await?.rows)
    }

    /// Every row of `range`, counted region-locally without shipping rows.
    pub async fn fast_row_count(&self, table: impl IntoTableName, range: KeyRange) -> Result<u64> {
        let table = &table.into_table_name()?;
        let s = self
            .endpoints
            .coprocessor_service::<RowCount>(table, ROW_COUNT, range, &())?;
        fold(s, 0u64, |a, n| a + n).await
    }

    /// The exact sum (`None` when no value).
    pub async fn sum(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<Option<Number>> {
        let table = &table.into_table_name()?;
        self.stats(table, range, column)
            .await?
            .sum(column.interpreter)
    }

    /// The smallest value.
    pub async fn min(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<Option<Number>> {
        let table = &table.into_table_name()?;
        Ok(self
            .stats(table, range, column)
            .await?
            .min(column.interpreter))
    }

    /// The largest value.
    pub async fn max(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<Option<Number>> {
        let table = &table.into_table_name()?;
        Ok(self
            .stats(table, range, column)
            .await?
            .max(column.interpreter))
    }

    /// The mean.
    pub async fn avg(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<Option<f64>> {
        let table = &table.into_table_name()?;
        Ok(self
            .stats(table, range, column)
            .await?
            .avg(column.interpreter))
    }

    /// The population standard deviation.
    pub async fn std(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<Option<f64>> {
        let table = &table.into_table_name()?;
        Ok(self.stats(table, range, column).await?.std())
    }

    /// The lower median: the value at rank `(n - 1) / 2` of the sorted values.
    pub async fn median(
        &self,
        table: impl IntoTableName,
        range: KeyRange,
        column: &Column,
    ) -> Result<Option<Number>> {
        let table = &table.into_table_name()?;
        let snap = self.endpoints.snapshot(table)?;
        median_with(
            &|req: &AggregateRequest| {
                snap.coprocessor_service::<Aggregate>(AGGREGATE, range.clone(), req)
            },
            column,
        )
        .await
    }
}

/// Runs one aggregation request over a call's whole range at one read point and streams the
/// per-region answers: a plain table's snapshot, or a salted table's per-bucket fan-out
/// ([`crate::salted`]).
pub(crate) type AggregateCall<'a> =
    dyn Fn(&AggregateRequest) -> Result<ResponseStream<AggregateResponse>> + Send + Sync + 'a;

/// The merged statistics of `column` through `call`.
pub(crate) async fn stats_with(call: &AggregateCall<'_>, column: &Column) -> Result<RegionStats> {
    let req = AggregateRequest {
        column: column.clone(),
        op: AggregateOp::Stats,
    };
    let mut stream = call(&req)?;
    let mut total = RegionStats::default();
    while let Some(r) = stream.next().await {
        if let AggregateResponse::Stats(s) = r.result? {
            total = total.merge(s)?;
        }
    }
    Ok(total)
}

/// The lower median of `column` through `call` (every pass at the call's one read point).
pub(crate) async fn median_with(
    call: &AggregateCall<'_>,
    column: &Column,
) -> Result<Option<Number>> {
    let s = stats_with(call, column).await?;
    let (Some(mut lo), Some(mut hi)) = (s.min_key, s.max_key) else {
        return Ok(None);
    };
    let rank = (s.values - 1) / 2;
    loop {
        if lo == hi {
            return Ok(Some(column.interpreter.unkey(lo)));
        }
        let req = AggregateRequest {
            column: column.clone(),
            op: AggregateOp::Histogram {
                lo,
                hi,
                buckets: MEDIAN_BUCKETS,
                ship_limit: MEDIAN_SHIP_LIMIT,
            },
        };
        let stream = call(&req)?;
        let hists: Vec<RegionHistogram> = fold(stream, Vec::new(), |mut v, r| {
            if let AggregateResponse::Histogram(h) = r {
                v.push(h);
            }
            v
        })
        .await?;
        let below: u64 = hists.iter().map(|h| h.below).sum();
        let Some(in_window) = rank.checked_sub(below) else {
            return Err(Error::bad_argument(
                "median: regions disagree (snapshot broken)",
            ));
        };
        if hists.iter().all(|h| h.keys.is_some()) {
            let mut keys: Vec<u64> = hists
                .into_iter()
                .flat_map(|h| h.keys.unwrap_or_default())
                .collect();
            keys.sort_unstable();
            return keys
                .get(in_window as usize)
                .map(|k| Some(column.interpreter.unkey(*k)))
                .ok_or_else(|| Error::bad_argument("median: regions disagree (snapshot broken)"));
        }
        let width = bucket_width(lo, hi, MEDIAN_BUCKETS);
        let mut seen = 0u64;
        let mut found = None;
        for b in 0..MEDIAN_BUCKETS as usize {
            let n: u64 = hists
                .iter()
                .map(|h| h.buckets.get(b).copied().unwrap_or(0))
                .sum();
            if in_window < seen + n {
                found = Some(b);
                break;
            }
            seen += n;
        }
        let Some(b) = found else {
            return Err(Error::bad_argument(
                "median: regions disagree (snapshot broken)",
            ));
        };
        let start = u128::from(lo) + b as u128 * width;
        let end = (start + width - 1).min(u128::from(hi));
        // Both lie inside [lo, hi], so they fit in u64.
        (lo, hi) = (start as u64, end as u64);
    }
}

/// The merged statistics of `column` over `range` at `snap`.
async fn stats_at<B: Backend>(
    snap: &Snapshot<B>,
    range: KeyRange,
    column: &Column,
) -> Result<RegionStats> {
    stats_with(
        &|req: &AggregateRequest| {
            snap.coprocessor_service::<Aggregate>(AGGREGATE, range.clone(), req)
        },
        column,
    )
    .await
}
