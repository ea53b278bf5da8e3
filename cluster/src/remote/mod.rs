//! The client's second backend: [`RemoteBackend`] implements `basalt_core::Backend` over a
//! cluster, so `Connection<RemoteBackend>` gives the same `Table`, `Admin`, `SaltedTable`
//! and `Snapshot` API as an embedded connection ([`connect`]).
//!
//! Row operations go to the server of the row's region (`route`); a scan goes through the
//! table's regions in order (`scan`); a split or a region's compaction to the region's
//! server; a flush or a table's compaction to every server of the table; a schema change,
//! a snapshot or a restore to the one server its tables are gathered on, a merge to the
//! one server its two regions are gathered on (`schema`); anything else (listings, plugins, a check) to any live server, which
//! answers from the shared catalog. A batch goes to the one server of its rows' regions;
//! a batch whose rows live on more than one server is refused ([`Error::BadArgument`]
//! saying so), as its atomicity is per server.
//!
//! Layers, bottom to top: `route`, `read_point`, `scan`, `endpoint`, `schema`, `backend`
//! (the trait's implementation).
//!
//! Invariants: what the client caches (locations, table descriptors) is a hint the servers
//! correct: a refusal that means "not here" re-reads it and retries within the operation's
//! deadline ([`RetryPolicy`]); a call that may have reached a server is repeated only when
//! repeating it is harmless (reads, puts, deletes); increments, appends, checks and batches
//! are not retried after a timeout.
//!
//! [`Error::BadArgument`]: basalt_core::Error::BadArgument

mod backend;
mod endpoint;
mod read_point;
mod route;
mod scan;
mod schema;

pub use read_point::RemoteReadPoint;
pub use route::RetryPolicy;

use crate::rpc::client::{unexpected, RpcClient};
use crate::rpc::messages::{Acknowledgement, Reply, Request};
use crate::{EtcdConfig, EtcdCoordination};
use basalt_core::client::BatchOp;
use basalt_core::{Connection, Error, Result, TableDescriptor, TableName};
use route::{lock, with_retries, Router};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// Connects to the cluster whose etcd is at `endpoints` (keys under the default prefix,
/// `/basalt`): the same client API as `Connection::open(dir)`, on [`RemoteBackend`].
pub async fn connect<S: AsRef<str>>(
    endpoints: impl IntoIterator<Item = S>,
) -> Result<Connection<RemoteBackend>> {
    connect_with(EtcdConfig::new(endpoints), RetryPolicy::default()).await
}

/// [`connect`] with an etcd configuration and a retry policy of one's own.
pub async fn connect_with(
    etcd: EtcdConfig,
    policy: RetryPolicy,
) -> Result<Connection<RemoteBackend>> {
    let coord = EtcdCoordination::connect(etcd).await?;
    let backend = Arc::new(RemoteBackend {
        router: Arc::new(Router::new(coord)),
        policy,
        descriptors: Mutex::new(HashMap::new()),
        read_points: AtomicU64::new(0),
        acks: Mutex::new(None),
    });
    backend.refresh_descriptors().await?;
    Ok(Connection::new(backend))
}

/// A cluster as a client's `Backend` (see the module doc).
pub struct RemoteBackend {
    router: Arc<Router>,
    policy: RetryPolicy,
    /// Table descriptors as last read (`describe_table` answers from them).
    descriptors: Mutex<HashMap<TableName, TableDescriptor>>,
    /// Read points taken so far.
    read_points: AtomicU64,
    /// Told of every acknowledged row write (see [`RemoteBackend::observe_acknowledgements`]).
    acks: Mutex<Option<AckObserver>>,
}

impl std::fmt::Debug for RemoteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBackend")
            .field("router", &self.router)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Told of each acknowledged row write: its table, its row and who acknowledged it.
pub type AckObserver = Arc<dyn Fn(&TableName, &[u8], &Acknowledgement) + Send + Sync>;

/// Which server a call goes to.
enum Target<'a> {
    /// The server of `row`'s region of the table.
    Row(&'a TableName, &'a [u8]),
    /// The server of region `.1` of the table.
    Region(&'a TableName, u64),
    /// Any live server.
    Any,
}

impl RemoteBackend {
    /// The retry policy.
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// Has `observer` told of every row write acknowledged from now on, with the server
    /// that acknowledged it and where that server's WAL stood (an audit trail: a test
    /// checks that no acknowledgement came from a fenced writer). One observer at a time.
    pub fn observe_acknowledgements(&self, observer: AckObserver) {
        if let Ok(mut slot) = self.acks.lock() {
            *slot = Some(observer);
        }
    }

    /// Tells the observer, if there is one, that `row` of `table` was acknowledged.
    fn acknowledged(&self, table: &TableName, row: &[u8], ack: &Acknowledgement) {
        let observer = self.acks.lock().ok().and_then(|o| o.clone());
        if let Some(observe) = observer {
            observe(table, row, ack);
        }
    }

    /// Sends `request` to `target`'s server, retrying as the module doc says.
    async fn send(&self, target: Target<'_>, request: Request, idempotent: bool) -> Result<Reply> {
        let rpc = match target {
            Target::Row(..) => self.policy.rpc_timeout,
            Target::Region(..) | Target::Any => self.policy.operation_timeout,
        };
        let router = &self.router;
        let table = match &target {
            Target::Row(t, _) | Target::Region(t, _) => Some(*t),
            Target::Any => None,
        };
        with_retries(router, table, self.policy, idempotent, || {
            let request = request.clone();
            let target = &target;
            async move {
                let server = match target {
                    Target::Row(t, row) => router.locate(t, row).await?.server,
                    Target::Region(t, id) => router.locate_region(t, *id).await?.server,
                    Target::Any => router.any().await?,
                };
                let (reply, ack) = server.call_acknowledged(request, rpc).await?;
                if let (Target::Row(t, row), Some(ack)) = (target, ack) {
                    self.acknowledged(t, row, &ack);
                }
                Ok(reply)
            }
        })
        .await
    }

    /// Sends a row operation of `table` to its row's server.
    async fn row_call(&self, table: &TableName, row: &[u8], request: Request) -> Result<Reply> {
        let idempotent = matches!(
            request,
            Request::Put(..) | Request::Delete(..) | Request::Get(..) | Request::Exists(..)
        );
        self.send(Target::Row(table, row), request, idempotent)
            .await
    }

    /// Sends an operation that is not a row's: a schema change, snapshot or merge where
    /// its tables or regions are gathered ([`Request::held`], `schema`), a region's operation
    /// to the region's server ([`Request::region`]), any other to any server.
    async fn any_call(&self, request: Request, idempotent: bool) -> Result<Reply> {
        if let Some(held) = request.held() {
            return schema::call(&self.router, self.policy, held, request).await;
        }
        match request.region() {
            Some((t, id)) => {
                let t = t.clone();
                self.send(Target::Region(&t, id), request, idempotent).await
            }
            None => self.send(Target::Any, request, idempotent).await,
        }
    }

    /// Sends `request` to every server of `table`'s regions (a flush, a compaction: each
    /// engine acts on the regions it serves), again to all of them when one refuses.
    async fn table_call(&self, table: &TableName, request: Request) -> Result<Reply> {
        let rpc = self.policy.operation_timeout;
        // Read afresh: a server that lost a region meanwhile would skip it silently.
        self.router.forget(table);
        with_retries(&self.router, Some(table), self.policy, true, || {
            let request = request.clone();
            async move {
                let mut last = None;
                for server in self.router.table_servers(table).await? {
                    last = Some(server.call(request.clone(), rpc).await?);
                }
                last.ok_or_else(|| Error::TableNotFound(table.to_string()))
            }
        })
        .await
    }

    /// Re-reads every table's descriptor.
    async fn refresh_descriptors(&self) -> Result<Vec<TableDescriptor>> {
        let tables = match self.any_call(Request::ListTables, true).await {
            Ok(Reply::Tables(t)) => t,
            Ok(other) => return Err(unexpected("list_tables", &other)),
            // A cluster with no server yet: nothing to describe.
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut cache = lock(&self.descriptors)?;
        cache.clear();
        for t in &tables {
            cache.insert(t.name.clone(), t.clone());
        }
        Ok(tables)
    }

    /// After a schema change of `table`: re-reads its descriptor and forgets its locations.
    async fn changed(&self, table: &TableName) -> Result<()> {
        self.router.forget(table);
        match self
            .any_call(Request::DescribeTable(table.clone()), true)
            .await
        {
            Ok(Reply::Table(d)) => {
                lock(&self.descriptors)?.insert(table.clone(), d);
            }
            Ok(other) => return Err(unexpected("describe_table", &other)),
            Err(Error::TableNotFound(_)) => {
                lock(&self.descriptors)?.remove(table);
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The one server the rows of `ops` live on. Rows found on two servers are located
    /// again from etcd (the cached locations may be stale); rows whose regions the master
    /// assigned to different servers (a spread table) are a batch the cluster cannot run
    /// atomically, refused at once with [`Error::BadArgument`]; rows assigned to one
    /// server but still served by two are a region in transition (a table group moving
    /// region by region) for up to [`MOVE_GRACE`] after `split_since` was first set, a
    /// retryable [`Error::Busy`], and then refused too.
    async fn batch_server(
        &self,
        table: &TableName,
        ops: &[BatchOp],
        split_since: &Mutex<Option<std::time::Instant>>,
    ) -> Result<RpcClient> {
        let split = match self.one_server(table, ops).await? {
            Ok(server) => return Ok(server),
            Err(_) => {
                self.router.forget(table);
                match self.one_server(table, ops).await? {
                    Ok(server) => return Ok(server),
                    Err(split) => split,
                }
            }
        };
        let refused = || {
            Error::bad_argument(format!(
                "{split}: a batch is atomic per server only; send one batch per server"
            ))
        };
        // Regions the master placed apart (a spread table) stay apart: refused at once.
        if self.assigned_apart(table, ops).await? {
            return Err(refused());
        }
        let first = *lock(split_since)?.get_or_insert_with(std::time::Instant::now);
        if first.elapsed() < MOVE_GRACE {
            return Err(Error::Busy(format!(
                "{split}; waiting for a region in transition"
            )));
        }
        Err(refused())
    }

    /// Whether the master assigned the regions of `ops`'s rows to more than one server.
    async fn assigned_apart(&self, table: &TableName, ops: &[BatchOp]) -> Result<bool> {
        let mut ids = std::collections::BTreeSet::new();
        for op in ops {
            ids.insert(self.router.locate(table, batch_row(op)).await?.id);
        }
        let assigned = self.router.coord.assignments().await?;
        let servers: std::collections::BTreeSet<&String> = ids
            .into_iter()
            .filter_map(|id| assigned.get(&basalt_core::coord::RegionKey::new(table.clone(), id)))
            .collect();
        Ok(servers.len() > 1)
    }

    /// The one server the rows of `ops` live on, or what says they live on two.
    async fn one_server(
        &self,
        table: &TableName,
        ops: &[BatchOp],
    ) -> Result<std::result::Result<RpcClient, String>> {
        let mut server: Option<RpcClient> = None;
        for op in ops {
            let here = self.router.locate(table, batch_row(op)).await?.server;
            match &server {
                Some(s) if s.address() != here.address() => {
                    return Ok(Err(format!(
                        "a batch's rows live on more than one server ({} and {})",
                        s.address(),
                        here.address()
                    )));
                }
                Some(_) => {}
                None => server = Some(here),
            }
        }
        server
            .map(Ok)
            .ok_or_else(|| Error::bad_argument("an empty batch"))
    }
}

/// How long a batch whose rows live on two servers waits for a region in transition
/// before it is refused.
pub const MOVE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The row a batch operation writes or reads.
pub(crate) fn batch_row(op: &BatchOp) -> &[u8] {
    match op {
        BatchOp::Put(p) => p.row(),
        BatchOp::Delete(d) => d.row(),
        BatchOp::Get(g) => g.row(),
        BatchOp::Increment(i) => i.row(),
        BatchOp::Append(a) => a.row(),
        BatchOp::RowMutations(m) => m.row(),
        BatchOp::CheckAndMutate(c) => c.row(),
    }
}
