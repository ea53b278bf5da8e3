//! The region server's side of the RPC: every [`Request`] dispatched to a
//! `basalt_core::Backend` (the region server's engine), scans streamed in pages.
//!
//! Invariants: every call runs in a task of its own, so a client that gives up (its
//! deadline passed, its connection dropped) never cancels an operation half way: the
//! engine finishes it or refuses it, as it would for an embedded caller, and a panic in it
//! becomes an `Internal` status, not a dead server. A scan's pages are produced one at a
//! time into a channel of [`SCAN_PAGES_AHEAD`] pages, so a client that reads slowly holds
//! the scan (HTTP/2 flow control, then the channel) instead of the server buffering its
//! rows; a scan whose client takes no page for [`SCANNER_LEASE`] is closed, and at most
//! [`MAX_OPEN_SCANS`] run at once (more are refused with `Busy`). A region server's
//! service answers only while its lease surely lives ([`RegionRpc::with_guard`]): checked
//! before every call and every scan page. Pinned read points are bounded in number
//! ([`MAX_PINNED_READ_POINTS`]) and expire when unused for [`READ_POINT_IDLE`], so a
//! client that vanished pins nothing for long.

use super::incoming::{admit, RpcLimits};
use super::load::{LoadSource, RpcCounters};
use super::messages::{
    Acknowledgement, EndpointRequest, Reply, Request, ScanPage, ScanRequest, ServerLoad,
    PROTOCOL_VERSION,
};
use super::service::region_server_server::{RegionServer, RegionServerServer};
use super::MAX_MESSAGE_BYTES;
use basalt_core::client::{Backend, RowResult};
use basalt_core::{Error, ErrorWire, Result};
use futures::{Stream, StreamExt};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tonic::{Response, Status};

/// Pages a scan produces ahead of its client.
pub const SCAN_PAGES_AHEAD: usize = 2;
/// Rows per scan page, at most.
pub const PAGE_ROWS: usize = 1024;
/// Bytes of cells per scan page, about (a page ends after the row that passes it).
pub const PAGE_BYTES: usize = 1 << 20;
/// Read points one server keeps pinned for its clients, at most.
pub const MAX_PINNED_READ_POINTS: usize = 10_000;
/// How long a pinned read point lives unused.
pub const READ_POINT_IDLE: Duration = Duration::from_secs(300);
/// Scans one server runs at once, at most (more are refused with `Busy`): each holds up to
/// [`SCAN_PAGES_AHEAD`] pages and its engine scanner.
pub const MAX_OPEN_SCANS: usize = 512;
/// How long a scan waits for its client to take a page (HBase's scanner lease): past it,
/// the scan ends with an error page and frees what it held.
pub const SCANNER_LEASE: Duration = Duration::from_secs(60);

/// A region server's RPC service over `backend`.
pub struct RegionRpc<B: Backend> {
    inner: Arc<Inner<B>>,
}

impl<B: Backend> std::fmt::Debug for RegionRpc<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionRpc")
            .field("process", &self.inner.process)
            .finish()
    }
}

/// Whether the server may answer now (a region server's lease check); an error is the
/// refusal every call gets.
pub type Guard = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// Where a server's WAL stands: its writer number and newest segment.
pub type WalPosition = Arc<dyn Fn() -> (u64, u64) + Send + Sync>;

struct Inner<B: Backend> {
    backend: Arc<B>,
    /// What the service answered (see [`RegionRpc::counting`]).
    counters: Arc<RpcCounters>,
    process: String,
    guard: Option<Guard>,
    /// Run before a call that reads the catalog (see [`RegionRpc::refreshing`]).
    refresh: Option<Guard>,
    /// Where the WAL stands, for a write's acknowledgement (see [`RegionRpc::reporting`]).
    position: Option<WalPosition>,
    read_points: Mutex<HashMap<u64, (B::ReadPoint, Instant)>>,
    next_handle: AtomicU64,
    /// Scans running now.
    open_scans: Arc<std::sync::atomic::AtomicUsize>,
}

/// One running scan, counted while it lives.
struct OpenScan(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for OpenScan {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Sends `page` within the scanner lease; false when the client went away or let the lease
/// pass (the scan then ends).
async fn deliver(
    tx: &tokio::sync::mpsc::Sender<std::result::Result<ScanPage, Status>>,
    page: ScanPage,
) -> bool {
    match tokio::time::timeout(SCANNER_LEASE, tx.send(Ok(page))).await {
        Ok(sent) => sent.is_ok(),
        Err(_) => {
            let e = Error::Busy(format!(
                "the scan waited {SCANNER_LEASE:?} for its client to read; it was closed"
            ));
            let _ = tx.try_send(Ok(ScanPage::Error((&e).into())));
            false
        }
    }
}

impl<B: Backend> RegionRpc<B> {
    /// The service of `backend`, for the server named `process`.
    pub fn new(backend: Arc<B>, process: impl Into<String>) -> Self {
        Self::with_guard(backend, process, None)
    }

    /// [`RegionRpc::new`], answering only while `guard` says so (when given): every call,
    /// and every page of a scan, is refused with its error otherwise.
    pub fn with_guard(backend: Arc<B>, process: impl Into<String>, guard: Option<Guard>) -> Self {
        RegionRpc {
            inner: Arc::new(Inner {
                backend,
                counters: Arc::default(),
                process: process.into(),
                guard,
                refresh: None,
                position: None,
                read_points: Mutex::new(HashMap::new()),
                next_handle: AtomicU64::new(1),
                open_scans: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            }),
        }
    }

    /// This service, running `refresh` before every call that reads the catalog (lists,
    /// describes or checks tables, namespaces or regions): a region server serving some
    /// regions re-reads the tables other servers created or changed. Its error is the
    /// call's.
    pub fn refreshing(self, refresh: Guard) -> Self {
        self.configured(|inner| inner.refresh = Some(refresh))
    }

    /// This service, attaching to every write's reply an [`Acknowledgement`] naming the
    /// server and where `position` says its WAL stands (writer, newest segment).
    pub fn reporting(self, position: WalPosition) -> Self {
        self.configured(|inner| inner.position = Some(position))
    }

    /// This service, counting what it answers in `counters` (a server's lives share
    /// them). [`Request::ServerLoad`] itself is not counted.
    pub fn counting(self, counters: Arc<RpcCounters>) -> Self {
        self.configured(|inner| inner.counters = counters)
    }

    /// A handle on what the service counts, readable while and after it serves.
    pub fn load_source(&self) -> LoadSource {
        LoadSource {
            counters: Arc::clone(&self.inner.counters),
            open_scans: Arc::clone(&self.inner.open_scans),
        }
    }

    /// This service changed by `change`, unless a clone already serves (then as it is).
    fn configured(self, change: impl FnOnce(&mut Inner<B>)) -> Self {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                change(&mut inner);
                RegionRpc {
                    inner: Arc::new(inner),
                }
            }
            Err(shared) => RegionRpc { inner: shared },
        }
    }

    /// The tonic service, with the message size bounds of [`MAX_MESSAGE_BYTES`].
    pub fn into_service(self) -> RegionServerServer<Self> {
        RegionServerServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

/// Serves `backend` on `listener` until `shutdown` completes.
pub async fn serve<B: Backend>(
    backend: Arc<B>,
    process: impl Into<String>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    serve_rpc(RegionRpc::new(backend, process), listener, shutdown).await
}

/// Serves `rpc` on `listener` until `shutdown` completes, within the default
/// [`RpcLimits`].
pub async fn serve_rpc<B: Backend>(
    rpc: RegionRpc<B>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    serve_rpc_within(rpc, listener, RpcLimits::default(), shutdown).await
}

/// [`serve_rpc`], within `limits`: connections at once and the time each has to send
/// its HTTP/2 preface.
pub async fn serve_rpc_within<B: Backend>(
    rpc: RegionRpc<B>,
    listener: TcpListener,
    limits: RpcLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let service = rpc.into_service();
    tonic::transport::Server::builder()
        .concurrency_limit_per_connection(256)
        .max_concurrent_streams(256)
        .http2_max_header_list_size(16 << 10)
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .add_service(service)
        .serve_with_incoming_shutdown(admit(listener, limits), shutdown)
        .await
        .map_err(|e| Error::Io(std::io::Error::other(format!("RPC server: {e}"))))
}

type PageStream = Pin<Box<dyn Stream<Item = std::result::Result<ScanPage, Status>> + Send>>;

#[tonic::async_trait]
impl<B: Backend> RegionServer for RegionRpc<B> {
    async fn call(
        &self,
        request: tonic::Request<Request>,
    ) -> std::result::Result<Response<Reply>, Status> {
        let inner = Arc::clone(&self.inner);
        let request = request.into_inner();
        let name = request.name();
        let writes = request.writes();
        let counted = !matches!(request, Request::ServerLoad);
        let counters = Arc::clone(&inner.counters);
        let count = move |error: bool| {
            if counted {
                counters.answered(error);
            }
        };
        if let Err(e) = inner.allowed() {
            count(true);
            return Ok(Response::new(Reply::Error((&e).into())));
        }
        let task = tokio::spawn(async move {
            if let (Some(refresh), true) = (&inner.refresh, request.reads_catalog()) {
                if let Err(e) = refresh() {
                    return Reply::Error(ErrorWire::from(&e));
                }
            }
            match inner.dispatch(request).await {
                Ok(reply) => reply,
                Err(e) => Reply::Error(ErrorWire::from(&e)),
            }
        });
        match task.await {
            Ok(reply) => {
                count(matches!(reply, Reply::Error(_)));
                let acknowledged = writes && !matches!(reply, Reply::Error(_));
                let mut response = Response::new(reply);
                if let (Some(position), true) = (&self.inner.position, acknowledged) {
                    let (writer, segment) = position();
                    let ack = Acknowledgement {
                        server: self.inner.process.clone(),
                        writer,
                        segment,
                    };
                    ack.to_metadata(response.metadata_mut());
                }
                Ok(response)
            }
            Err(e) => {
                count(true);
                Err(Status::internal(format!(
                    "{name} failed on the server: {e}"
                )))
            }
        }
    }

    type ScanStream = PageStream;

    async fn scan(
        &self,
        request: tonic::Request<ScanRequest>,
    ) -> std::result::Result<Response<Self::ScanStream>, Status> {
        let request = request.into_inner();
        let counters = &self.inner.counters;
        // A scan counts as one request: an error when refused or when it cannot open (a
        // failure later in its stream is not counted again).
        let refused = |e: &Error| {
            counters.answered(true);
            let page: PageStream = Box::pin(futures::stream::iter([Ok(ScanPage::Error(e.into()))]));
            Ok(Response::new(page))
        };
        if let Err(e) = self.inner.allowed() {
            return refused(&e);
        }
        let at = match request.read_point {
            None => None,
            Some(h) => match self.inner.read_point(h) {
                Some(at) => Some(at),
                None => {
                    let e = Error::bad_argument(format!(
                        "read point {h} is not pinned on this server (released or expired)"
                    ));
                    return refused(&e);
                }
            },
        };
        let open = OpenScan(Arc::clone(&self.inner.open_scans));
        if open.0.fetch_add(1, Ordering::SeqCst) >= MAX_OPEN_SCANS {
            let e = Error::Busy(format!(
                "{MAX_OPEN_SCANS} scans run on this server; retry later"
            ));
            return refused(&e);
        }
        let (tx, rx) = tokio::sync::mpsc::channel(SCAN_PAGES_AHEAD);
        let inner = Arc::clone(&self.inner);
        let opened = self
            .inner
            .backend
            .scan(&request.table, request.scan, at.as_ref());
        counters.answered(opened.is_err());
        if opened.is_ok() {
            counters.scan_opened();
        }
        tokio::spawn(async move {
            let _open = open;
            let mut rows = match opened {
                Ok(rows) => rows,
                Err(e) => {
                    deliver(&tx, ScanPage::Error((&e).into())).await;
                    return;
                }
            };
            loop {
                let mut page: Vec<RowResult> = Vec::new();
                let mut bytes = 0usize;
                let mut failed = None;
                let mut ended = false;
                while page.len() < PAGE_ROWS && bytes < PAGE_BYTES {
                    match rows.next().await {
                        Some(Ok(row)) => {
                            bytes += row_bytes(&row);
                            page.push(row);
                        }
                        Some(Err(e)) => {
                            failed = Some(e);
                            break;
                        }
                        None => {
                            ended = true;
                            break;
                        }
                    }
                }
                if let Err(e) = inner.allowed() {
                    deliver(&tx, ScanPage::Error((&e).into())).await;
                    return;
                }
                if !page.is_empty() && !deliver(&tx, ScanPage::Rows(page)).await {
                    return; // the client went away, or let the lease pass
                }
                if let Some(e) = failed {
                    deliver(&tx, ScanPage::Error((&e).into())).await;
                    return;
                }
                if ended {
                    return;
                }
            }
        });
        let pages: PageStream = Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|page| (page, rx))
        }));
        Ok(Response::new(pages))
    }
}

/// About how many bytes a row's cells take.
fn row_bytes(row: &RowResult) -> usize {
    row.cells
        .iter()
        .map(|c| c.row.len() + c.family.len() + c.qualifier.len() + c.value.len() + 16)
        .sum()
}

impl<B: Backend> Inner<B> {
    /// What the service counted so far, with the scans running now.
    fn load(&self) -> ServerLoad {
        LoadSource {
            counters: Arc::clone(&self.counters),
            open_scans: Arc::clone(&self.open_scans),
        }
        .load()
    }

    /// Whether the server may answer now.
    fn allowed(&self) -> Result<()> {
        match &self.guard {
            Some(guard) => guard(),
            None => Ok(()),
        }
    }

    /// Runs an endpoint call at the read point it names (or one of its own).
    async fn call_endpoint(&self, call: EndpointRequest) -> Result<Reply> {
        let at = match call.read_point {
            Some(h) => self.read_point(h).ok_or_else(|| {
                Error::bad_argument(format!(
                    "read point {h} is not pinned on this server (released or expired)"
                ))
            })?,
            None => self.backend.pin_read_point()?,
        };
        let answers = self
            .backend
            .call_endpoint(&call.table, &call.service, call.range, call.request, &at)
            .await?;
        Ok(Reply::Endpoint(
            answers
                .into_iter()
                .map(|(span, r)| (span, r.map_err(|e| ErrorWire::from(&e))))
                .collect(),
        ))
    }

    /// A pinned read point by its handle, renewed.
    fn read_point(&self, handle: u64) -> Option<B::ReadPoint> {
        let mut pins = self.read_points.lock().ok()?;
        let (at, used) = pins.get_mut(&handle)?;
        *used = Instant::now();
        Some(at.clone())
    }

    /// Pins the backend's read point under a new handle.
    fn pin(&self) -> Result<Reply> {
        use basalt_core::client::ReadPointHandle;
        let mut pins = self
            .read_points
            .lock()
            .map_err(|_| Error::Busy("the read point table is poisoned".into()))?;
        let now = Instant::now();
        pins.retain(|_, (_, used)| now.duration_since(*used) < READ_POINT_IDLE);
        if pins.len() >= MAX_PINNED_READ_POINTS {
            return Err(Error::Busy(format!(
                "{MAX_PINNED_READ_POINTS} read points pinned on this server; release some"
            )));
        }
        let at = self.backend.pin_read_point()?;
        let point = at.read_point();
        let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
        pins.insert(handle, (at, now));
        Ok(Reply::ReadPoint { handle, point })
    }

    async fn dispatch(&self, request: Request) -> Result<Reply> {
        use Request as Q;
        let b = &self.backend;
        Ok(match request {
            Q::Hello { version } => {
                if version != PROTOCOL_VERSION {
                    return Err(Error::bad_argument(format!(
                        "protocol version {version} is not this server's {PROTOCOL_VERSION}"
                    )));
                }
                Reply::Hello {
                    version: PROTOCOL_VERSION,
                    process: self.process.clone(),
                }
            }
            Q::Put(t, put) => b.put(&t, put).await.map(|()| Reply::Done)?,
            Q::Delete(t, d) => b.delete(&t, d).await.map(|()| Reply::Done)?,
            Q::Get(t, g) => Reply::Row(b.get(&t, g).await?),
            Q::Exists(t, g) => Reply::Flag(b.exists(&t, g).await?),
            Q::Increment(t, i) => Reply::Row(b.increment(&t, i).await?),
            Q::Append(t, a) => Reply::Row(b.append(&t, a).await?),
            Q::CheckAndMutate(t, c) => Reply::Flag(b.check_and_mutate(&t, c).await?),
            Q::MutateRow(t, m) => b.mutate_row(&t, m).await.map(|()| Reply::Done)?,
            Q::Batch(t, ops) => Reply::Batch(
                b.batch(&t, ops)
                    .await?
                    .into_iter()
                    .map(|r| r.map_err(|e| ErrorWire::from(&e)))
                    .collect(),
            ),
            Q::PinReadPoint => self.pin()?,
            Q::ReleaseReadPoint(h) => {
                if let Ok(mut pins) = self.read_points.lock() {
                    pins.remove(&h);
                }
                Reply::Done
            }
            Q::CreateTable(desc, split) => {
                b.create_table(desc, split).await.map(|()| Reply::Done)?
            }
            Q::DeleteTable(t) => b.delete_table(&t).await.map(|()| Reply::Done)?,
            Q::EnableTable(t) => b.enable_table(&t).await.map(|()| Reply::Done)?,
            Q::DisableTable(t) => b.disable_table(&t).await.map(|()| Reply::Done)?,
            Q::IsTableEnabled(t) => Reply::Flag(b.is_table_enabled(&t).await?),
            Q::TableExists(t) => Reply::Flag(b.table_exists(&t).await?),
            Q::ListTables => Reply::Tables(b.list_tables().await?),
            Q::DescribeTable(t) => Reply::Table(b.describe_table(&t)?),
            Q::AddColumnFamily(t, f) => b.add_column_family(&t, f).await.map(|()| Reply::Done)?,
            Q::ModifyColumnFamily(t, f) => {
                b.modify_column_family(&t, f).await.map(|()| Reply::Done)?
            }
            Q::DeleteColumnFamily(t, f) => {
                b.delete_column_family(&t, &f).await.map(|()| Reply::Done)?
            }
            Q::AddCoprocessor(t, c) => b.add_coprocessor(&t, c).await.map(|()| Reply::Done)?,
            Q::RemoveCoprocessor(t, n) => {
                b.remove_coprocessor(&t, &n).await.map(|()| Reply::Done)?
            }
            Q::SetCoprocessors(t, c) => b.set_coprocessors(&t, c).await.map(|()| Reply::Done)?,
            Q::CreateNamespace(n) => b.create_namespace(&n).await.map(|()| Reply::Done)?,
            Q::DeleteNamespace(n) => b.delete_namespace(&n).await.map(|()| Reply::Done)?,
            Q::ListNamespaces => Reply::Names(b.list_namespaces().await?),
            Q::Regions(t) => Reply::Regions(b.regions(&t).await?),
            Q::Flush(t) => b.flush(&t).await.map(|()| Reply::Done)?,
            Q::Compact(t, k) => b.compact(&t, k).await.map(|()| Reply::Done)?,
            Q::CompactRegion(t, id, k) => {
                b.compact_region(&t, id, k).await.map(|()| Reply::Done)?
            }
            Q::SplitRegion(t, id, at) => Reply::Split(b.split_region(&t, id, at.as_deref()).await?),
            Q::MergeRegions(t, a, c) => Reply::Region(b.merge_regions(&t, a, c).await?),
            Q::CheckTable(t) => Reply::Integrity(b.check_table(&t).await?),
            Q::OfflineRegions => Reply::Offline(b.offline_regions().await?),
            Q::Snapshot(n, tables, companions) => {
                Reply::Snapshot(b.snapshot(&n, &tables, companions).await?)
            }
            Q::ListSnapshots => Reply::Snapshots(b.list_snapshots().await?),
            Q::DescribeSnapshot(n) => Reply::Snapshot(b.describe_snapshot(&n).await?),
            Q::DeleteSnapshot(n) => b.delete_snapshot(&n).await.map(|()| Reply::Done)?,
            Q::CloneSnapshot(n, targets) => {
                b.clone_snapshot(&n, targets).await.map(|()| Reply::Done)?
            }
            Q::RestoreSnapshot(n) => Reply::Restored(b.restore_snapshot(&n).await?),
            Q::UploadPlugin(bytes) => Reply::Plugin(b.upload_plugin(bytes.to_vec()).await?),
            Q::ListPlugins => Reply::Plugins(b.list_plugins().await?),
            Q::DescribePlugin(id) => Reply::Plugin(b.describe_plugin(&id).await?),
            Q::PluginBytes(id) => Reply::Bytes(b.plugin_bytes(&id).await?),
            Q::DeletePlugin(id) => b.delete_plugin(&id).await.map(|()| Reply::Done)?,
            Q::CallEndpoint(call) => self.call_endpoint(call).await?,
            Q::ServerLoad => Reply::Load(self.load()),
        })
    }
}
