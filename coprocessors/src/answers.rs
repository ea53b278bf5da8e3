//! Folding and ordering the per-region answers of an endpoint call
//! ([`ResponseStream`]): in key order ([`collect_ordered`],
//! [`try_collect_ordered`], [`merge_sorted`]), folded ([`fold`]), or folded with the failed
//! regions kept apart ([`fold_partial`]).
//!
//! Invariant: regions of one call never overlap, so ordering answers by their spans' lower
//! bounds is key order, and concatenating key-ordered lists in that order is key order.

use basalt_core::endpoint::RegionSpan;
use basalt_core::{Error, Result};
use futures::{Stream, StreamExt};
use std::pin::Pin;

/// One region's answer.
#[derive(Debug)]
pub struct RegionResponse<R> {
    /// The region and the part of the range the answer covers.
    pub span: RegionSpan,
    /// The answer, or why the region failed.
    pub result: Result<R>,
}

/// The per-region answers of one call.
pub type ResponseStream<R> = Pin<Box<dyn Stream<Item = RegionResponse<R>> + Send>>;

/// Every answer, in key order.
pub async fn collect_ordered<R>(stream: ResponseStream<R>) -> Vec<RegionResponse<R>> {
    let mut all: Vec<RegionResponse<R>> = stream.collect().await;
    all.sort_by(|a, b| a.span.key_order(&b.span));
    all
}

/// Every answer in key order, or the first error.
pub async fn try_collect_ordered<R>(stream: ResponseStream<R>) -> Result<Vec<(RegionSpan, R)>> {
    collect_ordered(stream)
        .await
        .into_iter()
        .map(|r| r.result.map(|v| (r.span, v)))
        .collect()
}

/// Folds the answers (in arrival order) into one; the first failed region's error ends it.
pub async fn fold<R, A>(
    mut stream: ResponseStream<R>,
    init: A,
    mut f: impl FnMut(A, R) -> A,
) -> Result<A> {
    let mut acc = init;
    while let Some(r) = stream.next().await {
        acc = f(acc, r.result?);
    }
    Ok(acc)
}

/// A fold over the regions that answered, and the errors of those that failed.
#[derive(Debug)]
pub struct Partial<A> {
    /// The fold of the successful answers.
    pub value: A,
    /// The regions that failed, with their errors, in key order.
    pub errors: Vec<(RegionSpan, Error)>,
}

impl<A> Partial<A> {
    /// True when every region answered.
    pub fn is_complete(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Folds the successful answers and keeps every failed region's error (use with
/// [`ErrorMode::Partial`](crate::ErrorMode::Partial)).
pub async fn fold_partial<R, A>(
    mut stream: ResponseStream<R>,
    init: A,
    mut f: impl FnMut(A, R) -> A,
) -> Partial<A> {
    let mut acc = init;
    let mut errors = Vec::new();
    while let Some(r) = stream.next().await {
        match r.result {
            Ok(v) => acc = f(acc, v),
            Err(e) => errors.push((r.span, e)),
        }
    }
    errors.sort_by(|a, b| a.0.key_order(&b.0));
    Partial { value: acc, errors }
}

/// Merges answers that are each a key-ordered list into one key-ordered list: regions
/// never overlap, so the lists are concatenated in region key order. The first failed
/// region's error is returned instead.
pub async fn merge_sorted<T>(stream: ResponseStream<Vec<T>>) -> Result<Vec<T>> {
    Ok(try_collect_ordered(stream)
        .await?
        .into_iter()
        .flat_map(|(_, v)| v)
        .collect())
}
