//! The client side of endpoints: `coprocessor_service` fans a typed request out to every
//! region overlapping a key range and streams one typed answer per region.
//!
//! Every call pins one read point for all its regions ([`basalt_core::endpoint`]),
//! so the merged answer is a snapshot; a [`Snapshot`] keeps that read point across several
//! calls (multi-pass algorithms such as the exact median). Regions run on blocking threads,
//! at most [`CallOptions::concurrency`] at a time. A region retired by a split or merge
//! while its function ran is redone on its successors, restricted to its share of the
//! range, and the successors' answers are streamed in its place: no row is skipped or
//! counted twice.
//!
//! Errors are per region: each [`RegionResponse`] carries its own `Result` (a region that
//! runs past [`CallOptions::timeout`] answers an error too). With
//! [`ErrorMode::FailFast`] (the default) the stream ends right after the first failed
//! region, and regions not yet started are not run; with [`ErrorMode::Partial`] every
//! region answers. Helpers fold the answers ([`fold`], [`fold_partial`]), or collect them
//! in key order ([`collect_ordered`], [`try_collect_ordered`], [`merge_sorted`]).

use crate::endpoint::{call_isolated, decode, encode, Endpoint, EndpointRegistry};
use basalt_core::client::Connection;
use basalt_core::endpoint::{EndpointCall, RegionSpan};
use basalt_core::keys::prefix_successor;
use basalt_core::keys::RowRange;
use basalt_core::IntoTableName;
use basalt_core::{Error, Result};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::ops::Bound;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Rows `[start, stop)` of a call (`None` or empty: unbounded), as HBase's scan start and
/// stop rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRange {
    /// Inclusive start row.
    pub start: Option<Bytes>,
    /// Exclusive stop row.
    pub stop: Option<Bytes>,
}

impl KeyRange {
    /// Every row.
    pub fn all() -> Self {
        Self::default()
    }

    /// Rows `[start, stop)`.
    pub fn new(start: impl AsRef<[u8]>, stop: impl AsRef<[u8]>) -> Self {
        KeyRange {
            start: Some(Bytes::copy_from_slice(start.as_ref())),
            stop: Some(Bytes::copy_from_slice(stop.as_ref())),
        }
    }

    /// Rows from `start` on.
    pub fn from(start: impl AsRef<[u8]>) -> Self {
        KeyRange {
            start: Some(Bytes::copy_from_slice(start.as_ref())),
            stop: None,
        }
    }

    /// Rows starting with `prefix`.
    pub fn prefix(prefix: impl AsRef<[u8]>) -> Self {
        let p = prefix.as_ref();
        KeyRange {
            start: Some(Bytes::copy_from_slice(p)),
            stop: prefix_successor(p),
        }
    }

    /// The same rows as a [`RowRange`].
    pub fn to_row_range(&self) -> RowRange {
        RowRange {
            lo: self
                .start
                .clone()
                .filter(|s| !s.is_empty())
                .map_or(Bound::Unbounded, Bound::Included),
            hi: self
                .stop
                .clone()
                .filter(|s| !s.is_empty())
                .map_or(Bound::Unbounded, Bound::Excluded),
        }
    }
}

/// What the stream does after a region fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorMode {
    /// End the stream right after the first failed region; start no other region.
    #[default]
    FailFast,
    /// Run every region and report each one's outcome.
    Partial,
}

/// How a call fans out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOptions {
    /// The most regions computed at once (at least 1; default: the machine's parallelism).
    pub concurrency: usize,
    /// Fail-fast or partial results.
    pub mode: ErrorMode,
    /// Stream the answers in key order (a region's answer waits for the ones before it);
    /// off by default: answers come as regions finish.
    pub ordered: bool,
    /// How long one region's part may run (its redos on successors included); past it the
    /// region answers [`Error::Coprocessor`] ("ran past its timeout"), handled as any
    /// failed region under [`CallOptions::mode`]. The endpoint function itself is not
    /// interrupted (it is synchronous code on a blocking thread): it runs to its end in the
    /// background and its answer is dropped. `None` (the default): no limit.
    pub timeout: Option<Duration>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            concurrency: std::thread::available_parallelism().map_or(4, |n| n.get()),
            mode: ErrorMode::FailFast,
            ordered: false,
            timeout: None,
        }
    }
}

impl CallOptions {
    /// Sets the concurrency bound.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }
    /// Sets the error mode.
    pub fn mode(mut self, mode: ErrorMode) -> Self {
        self.mode = mode;
        self
    }
    /// Sets whether answers stream in key order.
    pub fn ordered(mut self, on: bool) -> Self {
        self.ordered = on;
        self
    }
    /// Sets the per-region timeout.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }
}

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

/// The answers of one planned part each (more than one when its region was redone).
type BatchStream<R> = Pin<Box<dyn Stream<Item = Vec<RegionResponse<R>>> + Send>>;

/// Calls endpoints of an engine's tables.
#[derive(Debug, Clone)]
pub struct Endpoints {
    conn: Connection,
    registry: Arc<EndpointRegistry>,
    options: CallOptions,
}

impl Endpoints {
    /// A client of the endpoints `registry` holds, on `conn`'s engine.
    pub fn new(conn: &Connection, registry: Arc<EndpointRegistry>) -> Self {
        Endpoints {
            conn: conn.clone(),
            registry,
            options: CallOptions::default(),
        }
    }

    /// The same client with other call options.
    pub fn with_options(mut self, options: CallOptions) -> Self {
        self.options = options;
        self
    }

    /// The call options.
    pub fn options(&self) -> &CallOptions {
        &self.options
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<EndpointRegistry> {
        &self.registry
    }

    /// Pins a read point of `table` for one or more calls.
    pub fn snapshot(&self, table: impl IntoTableName) -> Result<Snapshot> {
        let table = &table.into_table_name()?;
        let name = table.clone();
        let call = self.conn.endpoint_call(&name)?;
        Ok(Snapshot {
            call: Arc::new(call),
            registry: self.registry.clone(),
            options: self.options.clone(),
        })
    }

    /// Runs endpoint `service` (of type `E`) of `table` once per region overlapping `range`,
    /// every region at one read point; answers stream per region (see the module doc).
    /// Fails before streaming when the table or the service does not exist, the options are
    /// invalid, or the request cannot be encoded.
    pub fn coprocessor_service<E: Endpoint>(
        &self,
        table: impl IntoTableName,
        service: &str,
        range: KeyRange,
        request: &E::Request,
    ) -> Result<ResponseStream<E::Response>> {
        let table = &table.into_table_name()?;
        self.snapshot(table)?
            .coprocessor_service::<E>(service, range, request)
    }
}

/// One pinned read point of one table: every call through it reads the same snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    call: Arc<EndpointCall>,
    registry: Arc<EndpointRegistry>,
    options: CallOptions,
}

impl Snapshot {
    /// The pinned read point.
    pub fn read_point(&self) -> u64 {
        self.call.read_point()
    }

    /// [`Endpoints::coprocessor_service`] at this snapshot's read point.
    pub fn coprocessor_service<E: Endpoint>(
        &self,
        service: &str,
        range: KeyRange,
        request: &E::Request,
    ) -> Result<ResponseStream<E::Response>> {
        if self.options.concurrency == 0 {
            return Err(Error::bad_argument(
                "endpoint concurrency must be at least 1",
            ));
        }
        let endpoint = self.registry.lookup(self.call.table_name(), service)?;
        let request = Arc::new(encode(request, "request")?);
        let parts = self.call.parts(&range.to_row_range())?;
        let fail_fast = self.options.mode == ErrorMode::FailFast;
        let stop = Arc::new(AtomicBool::new(false));
        let call = self.call.clone();
        let name: Arc<str> = Arc::from(service);
        let limit = self.options.timeout;
        let tasks = futures::stream::iter(parts).map(move |part| {
            let (call, endpoint, request, name, stop) = (
                call.clone(),
                endpoint.clone(),
                request.clone(),
                name.clone(),
                stop.clone(),
            );
            async move {
                if stop.load(Ordering::Acquire) {
                    return Vec::new();
                }
                let span = part.span();
                let name_in = name.clone();
                let job = tokio::task::spawn_blocking(move || {
                    call.run(&part, |view| {
                        call_isolated(&name_in, &*endpoint, view, &request)
                    })
                });
                let outcome = match limit {
                    Some(limit) => match tokio::time::timeout(limit, job).await {
                        Ok(out) => out,
                        Err(_) => {
                            let err = Error::Coprocessor {
                                name: name.to_string(),
                                msg: format!(
                                    "endpoint ran past its timeout of {} ms in region {}",
                                    limit.as_millis(),
                                    span.region_id
                                ),
                            };
                            Ok(Err(err))
                        }
                    },
                    None => job.await,
                };
                let answers: Vec<RegionResponse<E::Response>> = match outcome {
                    Ok(Ok(answers)) => answers
                        .into_iter()
                        .map(|(span, r)| RegionResponse {
                            span,
                            result: r.and_then(|b| decode(&b, "response")),
                        })
                        .collect(),
                    Ok(Err(e)) => vec![RegionResponse {
                        span,
                        result: Err(e),
                    }],
                    Err(e) => vec![RegionResponse {
                        span,
                        result: Err(Error::Io(std::io::Error::other(format!(
                            "endpoint task failed: {e}"
                        )))),
                    }],
                };
                if fail_fast && answers.iter().any(|a| a.result.is_err()) {
                    stop.store(true, Ordering::Release);
                }
                answers
            }
        });
        let n = self.options.concurrency;
        let answers: BatchStream<E::Response> = if self.options.ordered {
            Box::pin(tasks.buffered(n))
        } else {
            Box::pin(tasks.buffer_unordered(n))
        };
        let stream = answers
            .flat_map(futures::stream::iter)
            .scan(false, move |failed, item| {
                let out = if *failed {
                    None
                } else {
                    *failed = fail_fast && item.result.is_err();
                    Some(item)
                };
                futures::future::ready(out)
            });
        Ok(Box::pin(stream))
    }
}

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
/// [`ErrorMode::Partial`]).
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
