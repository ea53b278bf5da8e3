//! Endpoint calls over a salted table by *logical* key range: the range becomes one physical
//! range per bucket ([`SaltedTable::bucket_ranges`]), every bucket range is called region by
//! region at one read point, and the per-region answers are folded, or merged in logical
//! key order.
//!
//! - [`SaltedEndpoints::snapshot`] pins one read point of the table ([`Snapshot`]); every
//!   bucket's call of a [`SaltedSnapshot`] reads at it, so a salted call is one snapshot,
//!   as a call over a plain table is, and several calls through one snapshot agree.
//! - At most [`CallOptions::concurrency`] regions run at once across all buckets (each
//!   bucket's regions run one after another; the buckets run in parallel). A region a split
//!   or merge retires meanwhile is redone on its successors by [`Snapshot`]'s own rule, and
//!   splits never cross a bucket, so no row is skipped or counted twice.
//! - Errors follow [`CallOptions::mode`]: fail-fast ends the stream after the first failed
//!   region and starts no other; partial runs every region.
//! - A prefix range (`KeyRange::prefix`, a stop row that is the start's prefix successor)
//!   whose prefix fixes the salt's hashed part calls one bucket only, as salted scans do.
//!
//! Endpoint functions see physical rows (salt in front); [`SaltedSnapshot::width`] is what to
//! strip. [`merge_logical`] merges answers that are each a key-ordered list into one list in
//! logical key order, given each item's logical key. [`SaltedAggregationClient`] is
//! [`AggregationClient`](crate::AggregationClient) over logical ranges.
//!
//! Invariants: the bucket ranges of a call are disjoint and together hold exactly the
//! physical rows of the logical range; every region answer of a call is at its one read
//! point; [`merge_logical`] returns exactly the items of the answers, each once.

use crate::aggregate::RegionStats;
use crate::aggregate::{
    median_with, stats_with, Aggregate, AggregateRequest, Column, Number, RowCount, AGGREGATE,
    ROW_COUNT,
};
use crate::endpoint::Endpoint;
use crate::service::{
    fold, try_collect_ordered, CallOptions, Endpoints, ErrorMode, KeyRange, RegionResponse,
    ResponseStream, Snapshot,
};
use basalt_core::client::{Backend, BucketRange, Scan};
use basalt_core::keys::prefix_successor;
use basalt_core::{Engine, Result, SaltedTable};
use futures::StreamExt;
use std::cmp::Ordering;

/// Endpoint calls over one salted table by logical key range.
pub struct SaltedEndpoints<B: Backend = Engine> {
    endpoints: Endpoints<B>,
    table: SaltedTable<B>,
}

impl<B: Backend> Clone for SaltedEndpoints<B> {
    fn clone(&self) -> Self {
        SaltedEndpoints {
            endpoints: self.endpoints.clone(),
            table: self.table.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for SaltedEndpoints<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaltedEndpoints")
            .field("endpoints", &self.endpoints)
            .field("table", &self.table.name())
            .finish()
    }
}

impl<B: Backend> SaltedEndpoints<B> {
    /// Calls of the endpoints `endpoints` serves, over `table`'s logical keys, with
    /// `endpoints`' call options.
    pub fn new(endpoints: &Endpoints<B>, table: &SaltedTable<B>) -> Self {
        SaltedEndpoints {
            endpoints: endpoints.clone(),
            table: table.clone(),
        }
    }

    /// The salted table.
    pub fn table(&self) -> &SaltedTable<B> {
        &self.table
    }

    /// Pins one read point of the table for one or more calls.
    pub fn snapshot(&self) -> Result<SaltedSnapshot<B>> {
        let options = self.endpoints.options().clone();
        // Each bucket's regions run one at a time; the buckets share the concurrency bound.
        let per_bucket = self
            .endpoints
            .clone()
            .with_options(options.clone().concurrency(1).ordered(true));
        Ok(SaltedSnapshot {
            snap: per_bucket.snapshot(self.table.name())?,
            table: self.table.clone(),
            options,
        })
    }

    /// Runs endpoint `service` (of type `E`) once per region of every bucket range of the
    /// logical `range`, all at one read point (see [`SaltedSnapshot::coprocessor_service`]).
    pub fn coprocessor_service<E: Endpoint>(
        &self,
        service: &str,
        range: KeyRange,
        request: &E::Request,
    ) -> Result<ResponseStream<E::Response>> {
        self.snapshot()?
            .coprocessor_service::<E>(service, range, request)
    }
}

/// One pinned read point of a salted table: every call through it reads the same snapshot.
pub struct SaltedSnapshot<B: Backend = Engine> {
    snap: Snapshot<B>,
    table: SaltedTable<B>,
    options: CallOptions,
}

impl<B: Backend> Clone for SaltedSnapshot<B> {
    fn clone(&self) -> Self {
        SaltedSnapshot {
            snap: self.snap.clone(),
            table: self.table.clone(),
            options: self.options.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for SaltedSnapshot<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaltedSnapshot")
            .field("snap", &self.snap)
            .field("table", &self.table.name())
            .field("options", &self.options)
            .finish()
    }
}

impl<B: Backend> SaltedSnapshot<B> {
    /// The pinned read point.
    pub fn read_point(&self) -> u64 {
        self.snap.read_point()
    }

    /// The salt's width in bytes: what an endpoint strips from a physical row key to get
    /// its logical key.
    pub fn width(&self) -> usize {
        self.table.spec().width()
    }

    /// The physical ranges a logical range covers, one per bucket that may hold its rows.
    pub fn bucket_ranges(&self, range: &KeyRange) -> Vec<BucketRange> {
        self.table.bucket_ranges(&logical_scan(range))
    }

    /// Runs endpoint `service` (of type `E`) once per region of every bucket range of the
    /// logical `range`, at this snapshot's read point. Answers stream per region as they
    /// finish (with [`CallOptions::ordered`]: bucket by bucket, each in key order), each
    /// with its physical span; fold them with [`fold`] or merge them
    /// with [`merge_logical`]. Fails before streaming when the service does not exist, the
    /// options are invalid, or the request cannot be encoded.
    pub fn coprocessor_service<E: Endpoint>(
        &self,
        service: &str,
        range: KeyRange,
        request: &E::Request,
    ) -> Result<ResponseStream<E::Response>> {
        let ranges = self.bucket_ranges(&range);
        if self.options.concurrency == 0 {
            return Err(basalt_core::Error::bad_argument(
                "endpoint concurrency must be at least 1",
            ));
        }
        let mut calls = Vec::with_capacity(ranges.len());
        for r in ranges {
            let physical = KeyRange {
                start: Some(r.start),
                stop: (!r.stop.is_empty()).then_some(r.stop),
            };
            calls.push(
                self.snap
                    .coprocessor_service::<E>(service, physical, request)?,
            );
        }
        let n = self.options.concurrency;
        let merged: ResponseStream<E::Response> = if self.options.ordered {
            Box::pin(
                futures::stream::iter(calls)
                    .map(|s| s.collect::<Vec<RegionResponse<E::Response>>>())
                    .buffered(n)
                    .flat_map(futures::stream::iter),
            )
        } else {
            Box::pin(futures::stream::iter(calls).flatten_unordered(n))
        };
        let fail_fast = self.options.mode == ErrorMode::FailFast;
        Ok(Box::pin(merged.scan(false, move |failed, item| {
            let out = if *failed {
                None
            } else {
                *failed = fail_fast && item.result.is_err();
                Some(item)
            };
            futures::future::ready(out)
        })))
    }
}

/// The logical scan whose rows a key range holds (a prefix when the stop row is the start
/// row's prefix successor, so the salt can narrow it to one bucket).
fn logical_scan(range: &KeyRange) -> Scan {
    let start = range.start.clone().filter(|s| !s.is_empty());
    let stop = range.stop.clone().filter(|s| !s.is_empty());
    if let (Some(a), Some(b)) = (&start, &stop) {
        if prefix_successor(a).as_ref() == Some(b) {
            return Scan::new().with_prefix(a);
        }
    }
    let mut scan = Scan::new();
    if let Some(a) = start {
        scan = scan.start_row(a);
    }
    if let Some(b) = stop {
        scan = scan.stop_row(b);
    }
    scan
}

/// Merges answers that are each a list in logical key order (`key` gives an item's
/// logical key) into one list in logical key order; items with equal keys keep the order
/// of their answers' physical spans. The first failed region's error is returned instead.
pub async fn merge_logical<T, K: Ord>(
    stream: ResponseStream<Vec<T>>,
    key: impl Fn(&T) -> K,
) -> Result<Vec<T>> {
    let lists: Vec<std::vec::IntoIter<T>> = try_collect_ordered(stream)
        .await?
        .into_iter()
        .map(|(_, v)| v.into_iter())
        .collect();
    Ok(kway_merge(lists, key))
}

/// The k-way merge of sorted lists: a binary heap of list indexes keyed by each list's
/// head (ties by index); items move, none is cloned.
fn kway_merge<T, K: Ord>(lists: Vec<std::vec::IntoIter<T>>, key: impl Fn(&T) -> K) -> Vec<T> {
    struct Head<T, K> {
        key: K,
        list: usize,
        item: T,
    }
    impl<T, K: Ord> PartialEq for Head<T, K> {
        fn eq(&self, o: &Self) -> bool {
            self.cmp(o) == Ordering::Equal
        }
    }
    impl<T, K: Ord> Eq for Head<T, K> {}
    impl<T, K: Ord> PartialOrd for Head<T, K> {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    impl<T, K: Ord> Ord for Head<T, K> {
        // Reversed: the max-heap pops the smallest key (then the lowest list) first.
        fn cmp(&self, o: &Self) -> Ordering {
            o.key.cmp(&self.key).then(o.list.cmp(&self.list))
        }
    }
    let total = lists.iter().map(|l| l.len()).sum();
    let mut lists = lists;
    let mut heap = std::collections::BinaryHeap::with_capacity(lists.len());
    for (i, l) in lists.iter_mut().enumerate() {
        if let Some(item) = l.next() {
            heap.push(Head {
                key: key(&item),
                list: i,
                item,
            });
        }
    }
    let mut out = Vec::with_capacity(total);
    while let Some(h) = heap.pop() {
        if let Some(item) = lists.get_mut(h.list).and_then(|l| l.next()) {
            heap.push(Head {
                key: key(&item),
                list: h.list,
                item,
            });
        }
        out.push(h.item);
    }
    out
}

/// [`AggregationClient`](crate::AggregationClient) over a salted table's logical key ranges:
/// each method fans the built-in aggregation out per bucket at one read point (a few
/// passes at that read point for the median) and merges the answers.
pub struct SaltedAggregationClient<B: Backend = Engine> {
    endpoints: SaltedEndpoints<B>,
}

impl<B: Backend> Clone for SaltedAggregationClient<B> {
    fn clone(&self) -> Self {
        SaltedAggregationClient {
            endpoints: self.endpoints.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for SaltedAggregationClient<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaltedAggregationClient")
            .field("endpoints", &self.endpoints)
            .finish()
    }
}

impl<B: Backend> SaltedAggregationClient<B> {
    /// A client calling the built-ins through `endpoints` (whose registry must hold them,
    /// e.g. [`EndpointRegistry::with_builtins`](crate::EndpointRegistry::with_builtins)).
    pub fn new(endpoints: SaltedEndpoints<B>) -> Self {
        SaltedAggregationClient { endpoints }
    }

    /// Every statistic of `column` over the logical `range`, merged, at one snapshot.
    pub async fn stats(&self, range: KeyRange, column: &Column) -> Result<RegionStats> {
        let snap = self.endpoints.snapshot()?;
        stats_with(
            &|req: &AggregateRequest| {
                snap.coprocessor_service::<Aggregate>(AGGREGATE, range.clone(), req)
            },
            column,
        )
        .await
    }

    /// Rows of `range` having `column`.
    pub async fn row_count(&self, range: KeyRange, column: &Column) -> Result<u64> {
        Ok(self.stats(range, column).await?.rows)
    }

    /// Every row of `range`, counted region-locally without shipping rows.
    pub async fn fast_row_count(&self, range: KeyRange) -> Result<u64> {
        let s = self
            .endpoints
            .coprocessor_service::<RowCount>(ROW_COUNT, range, &())?;
        fold(s, 0u64, |a, n| a + n).await
    }

    /// The exact sum (`None` when no value).
    pub async fn sum(&self, range: KeyRange, column: &Column) -> Result<Option<Number>> {
        self.stats(range, column).await?.sum(column.interpreter)
    }

    /// The smallest value.
    pub async fn min(&self, range: KeyRange, column: &Column) -> Result<Option<Number>> {
        Ok(self.stats(range, column).await?.min(column.interpreter))
    }

    /// The largest value.
    pub async fn max(&self, range: KeyRange, column: &Column) -> Result<Option<Number>> {
        Ok(self.stats(range, column).await?.max(column.interpreter))
    }

    /// The mean.
    pub async fn avg(&self, range: KeyRange, column: &Column) -> Result<Option<f64>> {
        Ok(self.stats(range, column).await?.avg(column.interpreter))
    }

    /// The population standard deviation.
    pub async fn std(&self, range: KeyRange, column: &Column) -> Result<Option<f64>> {
        Ok(self.stats(range, column).await?.std())
    }

    /// The lower median: the value at rank `(n - 1) / 2` of the sorted values.
    pub async fn median(&self, range: KeyRange, column: &Column) -> Result<Option<Number>> {
        let snap = self.endpoints.snapshot()?;
        median_with(
            &|req: &AggregateRequest| {
                snap.coprocessor_service::<Aggregate>(AGGREGATE, range.clone(), req)
            },
            column,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The k-way merge equals a stable sort of the concatenated lists.
        #[test]
        fn kway_merge_equals_a_stable_sort(
            mut lists in prop::collection::vec(prop::collection::vec((0u8..20, any::<u16>()), 0..12), 0..10)
        ) {
            for l in &mut lists {
                l.sort_by_key(|x| x.0);
            }
            let mut want: Vec<(u8, u16)> = lists.iter().flatten().copied().collect();
            want.sort_by_key(|x| x.0);
            let got = kway_merge(lists.into_iter().map(|l| l.into_iter()).collect(), |x| x.0);
            prop_assert_eq!(got, want);
        }
    }
}
