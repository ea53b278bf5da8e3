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

pub use crate::answers::{
    collect_ordered, fold, fold_partial, merge_sorted, try_collect_ordered, Partial,
    RegionResponse, ResponseStream,
};
use crate::endpoint::{call_isolated, decode, encode, Endpoint, EndpointRegistry};
use basalt_core::client::{Backend, Connection, ReadPointHandle};
use basalt_core::endpoint::{EndpointCall, RegionPart, RegionSpan};
use basalt_core::keys::prefix_successor;
use basalt_core::keys::RowRange;
use basalt_core::{Engine, IntoTableName, TableName};
use basalt_core::{Error, Result};
use bytes::Bytes;
use futures::stream::BoxStream;
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

/// The answers of one planned part each (more than one when its region was redone).
type BatchStream<R> = Pin<Box<dyn Stream<Item = Vec<RegionResponse<R>>> + Send>>;

/// Calls endpoints of a connection's tables: the functions of a registry in this process
/// ([`Endpoints::new`], on an embedded engine), or the services the backend serves
/// ([`Endpoints::served`]: a cluster's region servers, or an engine given
/// `Engine::serve_endpoints`).
pub struct Endpoints<B: Backend = Engine> {
    conn: Connection<B>,
    /// `Some`: the functions run here, on this engine, from this registry; `None`: the
    /// backend runs its own.
    local: Option<(Connection, Arc<EndpointRegistry>)>,
    options: CallOptions,
}

impl<B: Backend> Clone for Endpoints<B> {
    fn clone(&self) -> Self {
        Endpoints {
            conn: self.conn.clone(),
            local: self.local.clone(),
            options: self.options.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Endpoints<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("registry", &self.registry())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Endpoints {
    /// A client of the endpoints `registry` holds, run in this process on `conn`'s engine.
    pub fn new(conn: &Connection, registry: Arc<EndpointRegistry>) -> Self {
        Endpoints {
            conn: conn.clone(),
            local: Some((conn.clone(), registry)),
            options: CallOptions::default(),
        }
    }
}

impl<B: Backend> Endpoints<B> {
    /// A client of the endpoint services `conn`'s backend serves: each region's part is
    /// sent to the backend ([`Backend::call_endpoint`]), which runs the service where the
    /// region is (a remote cluster's region servers run the registries they were started
    /// with). The same answers, options and error modes as [`Endpoints::new`].
    pub fn served(conn: &Connection<B>) -> Self {
        Endpoints {
            conn: conn.clone(),
            local: None,
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

    /// The registry whose functions run in this process (`None` for a client of the
    /// backend's served endpoints).
    pub fn registry(&self) -> Option<&Arc<EndpointRegistry>> {
        self.local.as_ref().map(|(_, registry)| registry)
    }

    /// Pins a read point of `table` for one or more calls.
    pub fn snapshot(&self, table: impl IntoTableName) -> Result<Snapshot<B>> {
        let table = table.into_table_name()?;
        let pinned = match &self.local {
            Some((engine, registry)) => Pinned::Local {
                call: Arc::new(engine.endpoint_call(&table)?),
                registry: registry.clone(),
            },
            None => {
                let backend = self.conn.backend();
                // The table must exist (its descriptor is at hand, cached for a remote
                // backend): an unknown table fails here, before any call.
                backend.describe_table(&table)?;
                Pinned::Served {
                    backend: backend.clone(),
                    at: backend.pin_read_point()?,
                    table,
                }
            }
        };
        Ok(Snapshot {
            pinned,
            options: self.options.clone(),
        })
    }

    /// Runs endpoint `service` (of type `E`) of `table` once per region overlapping `range`,
    /// every region at one read point; answers stream per region (see the module doc).
    /// Fails before streaming when the table does not exist, the options are invalid, or
    /// the request cannot be encoded, and (functions run here) when the service does not
    /// exist; a served service that does not exist fails each region's answer.
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

/// Where one call's parts run.
enum Pinned<B: Backend> {
    /// On the engine in this process, from the client's registry.
    Local {
        call: Arc<EndpointCall>,
        registry: Arc<EndpointRegistry>,
    },
    /// On the backend, which serves its own services.
    Served {
        backend: Arc<B>,
        table: TableName,
        at: B::ReadPoint,
    },
}

impl<B: Backend> Clone for Pinned<B> {
    fn clone(&self) -> Self {
        match self {
            Pinned::Local { call, registry } => Pinned::Local {
                call: call.clone(),
                registry: registry.clone(),
            },
            Pinned::Served { backend, table, at } => Pinned::Served {
                backend: backend.clone(),
                table: table.clone(),
                at: at.clone(),
            },
        }
    }
}

/// One planned part of a call.
enum Part {
    /// A region of the engine in this process.
    Local(RegionPart),
    /// A region's share of the range, as the client planned it from the region list.
    Served(RegionSpan),
    /// The plan itself failed (the region list could not be read).
    Failed(RegionSpan, Error),
}

impl Part {
    fn span(&self) -> RegionSpan {
        match self {
            Part::Local(p) => p.span(),
            Part::Served(s) | Part::Failed(s, _) => s.clone(),
        }
    }
}

/// One pinned read point of one table: every call through it reads the same snapshot.
pub struct Snapshot<B: Backend = Engine> {
    pinned: Pinned<B>,
    options: CallOptions,
}

impl<B: Backend> Clone for Snapshot<B> {
    fn clone(&self) -> Self {
        Snapshot {
            pinned: self.pinned.clone(),
            options: self.options.clone(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Snapshot<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("read_point", &self.read_point())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> Snapshot<B> {
    /// The pinned read point (for a remote backend, which of the client's read points it
    /// is: see `ReadPointHandle::read_point`).
    pub fn read_point(&self) -> u64 {
        match &self.pinned {
            Pinned::Local { call, .. } => call.read_point(),
            Pinned::Served { at, .. } => at.read_point(),
        }
    }

    /// The parts of `range`, planned: the engine's regions, or the backend's region list.
    fn plan(&self, range: &RowRange) -> Result<BoxStream<'static, Part>> {
        match &self.pinned {
            Pinned::Local { call, .. } => {
                let parts = call.parts(range)?;
                Ok(Box::pin(futures::stream::iter(
                    parts.into_iter().map(Part::Local),
                )))
            }
            Pinned::Served { backend, table, .. } => {
                let (backend, table, range) = (backend.clone(), table.clone(), range.clone());
                let listed = async move {
                    match backend.regions(&table).await {
                        Ok(regions) => regions
                            .into_iter()
                            .map(|r| RegionSpan {
                                range: range.clip(&r.start_key, &r.end_key),
                                region_id: r.id,
                                region_start: r.start_key,
                                region_end: r.end_key,
                            })
                            .filter(|s| !s.range.is_empty() && overlaps(&range, s))
                            .map(Part::Served)
                            .collect(),
                        Err(e) => {
                            let whole = RegionSpan {
                                region_id: 0,
                                region_start: Bytes::new(),
                                region_end: Bytes::new(),
                                range,
                            };
                            vec![Part::Failed(whole, e)]
                        }
                    }
                };
                Ok(Box::pin(
                    futures::stream::once(listed).flat_map(futures::stream::iter),
                ))
            }
        }
    }

    /// Runs one part: its answers (more than one when its region was redone or the
    /// backend answered per region).
    async fn run(
        pinned: Pinned<B>,
        part: Part,
        service: Arc<str>,
        request: Arc<Vec<u8>>,
    ) -> Result<Vec<(RegionSpan, Result<Vec<u8>>)>> {
        match (pinned, part) {
            (_, Part::Failed(_, e)) => Err(e),
            (Pinned::Local { call, registry }, Part::Local(part)) => {
                let endpoint = registry.lookup(call.table_name(), &service)?;
                tokio::task::spawn_blocking(move || {
                    call.run(&part, |view| {
                        call_isolated(&service, &*endpoint, view, &request)
                    })
                })
                .await
                .map_err(|e| {
                    Error::Io(std::io::Error::other(format!("endpoint task failed: {e}")))
                })?
            }
            (Pinned::Served { backend, table, at }, Part::Served(span)) => {
                let request = Bytes::copy_from_slice(&request);
                let answers = backend
                    .call_endpoint(&table, &service, span.range, request, &at)
                    .await?;
                Ok(answers
                    .into_iter()
                    .map(|(span, r)| (span, r.map(|b| b.to_vec())))
                    .collect())
            }
            _ => Err(Error::bad_argument(
                "an endpoint part planned for another runner",
            )),
        }
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
        if let Pinned::Local { call, registry } = &self.pinned {
            registry.lookup(call.table_name(), service)?;
        }
        let request = Arc::new(encode(request, "request")?);
        let parts = self.plan(&range.to_row_range())?;
        let fail_fast = self.options.mode == ErrorMode::FailFast;
        let stop = Arc::new(AtomicBool::new(false));
        let pinned = self.pinned.clone();
        let name: Arc<str> = Arc::from(service);
        let limit = self.options.timeout;
        let tasks = parts.map(move |part| {
            let (pinned, request, name, stop) =
                (pinned.clone(), request.clone(), name.clone(), stop.clone());
            async move {
                if stop.load(Ordering::Acquire) {
                    return Vec::new();
                }
                let span = part.span();
                let job = Self::run(pinned, part, name.clone(), request);
                let outcome = match limit {
                    Some(limit) => match tokio::time::timeout(limit, job).await {
                        Ok(out) => out,
                        Err(_) => Err(Error::Coprocessor {
                            name: name.to_string(),
                            msg: format!(
                                "endpoint ran past its timeout of {} ms in region {}",
                                limit.as_millis(),
                                span.region_id
                            ),
                        }),
                    },
                    None => job.await,
                };
                let answers: Vec<RegionResponse<E::Response>> = match outcome {
                    Ok(answers) => answers
                        .into_iter()
                        .map(|(span, r)| RegionResponse {
                            span,
                            result: r.and_then(|b| decode(&b, "response")),
                        })
                        .collect(),
                    Err(e) => vec![RegionResponse {
                        span,
                        result: Err(e),
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

/// True when `span`'s region overlaps `range`.
fn overlaps(range: &RowRange, span: &RegionSpan) -> bool {
    range.overlaps(&span.region_start, &span.region_end)
}
