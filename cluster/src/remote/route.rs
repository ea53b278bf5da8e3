//! Where a table's rows are served: the region catalog and the regions' owners read from
//! etcd, the owners' RPC addresses from their registrations, cached per table as HBase's
//! client caches `hbase:meta`; and the retry loop that re-reads them when a server says a
//! region is not (or no longer) its, or cannot be reached.
//!
//! Invariants: a cached location is only a hint, the server is the authority (a region it
//! does not serve is refused with `RegionNotServed`, and the entry is dropped); an
//! operation never waits past its deadline; only errors that mean "ask again, maybe
//! elsewhere" are retried (see [`retryable`]), everything else reaches the caller at once.

use crate::rpc::client::RpcClient;
use crate::EtcdCoordination;
use basalt_core::coord::{Coordination, RegionKey};
use basalt_core::{Error, Result, TableName};
use bytes::Bytes;
use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One region of a table and the server that serves it.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    /// Its region id.
    pub(crate) id: u64,
    /// Its first row (empty: the table's start).
    pub(crate) start: Bytes,
    /// Its end row, exclusive (empty: the table's end).
    pub(crate) end: Bytes,
    /// Its server.
    pub(crate) server: RpcClient,
}

impl Located {
    /// True when `row` lies in the region.
    pub(crate) fn holds(&self, row: &[u8]) -> bool {
        row >= &self.start[..] && (self.end.is_empty() || row < &self.end[..])
    }
}

/// The location cache and the connections to servers.
#[derive(Debug)]
pub(crate) struct Router {
    pub(crate) coord: EtcdCoordination,
    tables: Mutex<HashMap<TableName, Arc<Vec<Located>>>>,
    servers: Mutex<HashMap<String, RpcClient>>,
    /// Read points being pinned on the servers (`read_point`): every later call of this
    /// client waits for them first, so none of its writes can slip under a read point it
    /// pinned before.
    pinning: Mutex<Vec<Shared<BoxFuture<'static, ()>>>>,
}

impl Router {
    pub(crate) fn new(coord: EtcdCoordination) -> Self {
        Router {
            coord,
            tables: Mutex::new(HashMap::new()),
            servers: Mutex::new(HashMap::new()),
            pinning: Mutex::new(Vec::new()),
        }
    }

    /// Adds a read point's pinning to what later calls wait for.
    pub(crate) fn pinning(&self, pin: BoxFuture<'static, ()>) -> Result<()> {
        let mut pending = lock(&self.pinning)?;
        pending.retain(|p| p.peek().is_none());
        pending.push(pin.shared());
        Ok(())
    }

    /// Waits until every read point pinned before now is pinned.
    pub(crate) async fn settle(&self) -> Result<()> {
        let pending: Vec<_> = lock(&self.pinning)?.clone();
        for p in pending {
            p.await;
        }
        Ok(())
    }

    /// The client of the server at `address` (one per address).
    pub(crate) fn client(&self, address: &str) -> Result<RpcClient> {
        let mut servers = lock(&self.servers)?;
        if let Some(c) = servers.get(address) {
            return Ok(c.clone());
        }
        let c = RpcClient::new(address)?;
        servers.insert(address.to_string(), c.clone());
        Ok(c)
    }

    /// The live servers' clients, by process name.
    pub(crate) async fn live(&self) -> Result<Vec<(String, RpcClient)>> {
        let mut out = Vec::new();
        for s in self.coord.live_servers().await? {
            out.push((s.process, self.client(&s.info.rpc_address)?));
        }
        Ok(out)
    }

    /// Some live server, for operations any server answers (schema, snapshots, plugins).
    pub(crate) async fn any(&self) -> Result<RpcClient> {
        let live = self.live().await?;
        live.into_iter()
            .map(|(_, c)| c)
            .next()
            .ok_or_else(|| no_server("no region server is registered"))
    }

    /// The regions of `table` with their servers, in key order (cached).
    pub(crate) async fn regions(&self, table: &TableName) -> Result<Arc<Vec<Located>>> {
        if let Some(found) = lock(&self.tables)?.get(table) {
            return Ok(Arc::clone(found));
        }
        let records = self.coord.regions(table).await?;
        if records.is_empty() {
            return Err(Error::TableNotFound(table.to_string()));
        }
        let addresses: HashMap<String, String> = self
            .coord
            .live_servers()
            .await?
            .into_iter()
            .map(|s| (s.process, s.info.rpc_address))
            .collect();
        let mut out = Vec::with_capacity(records.len());
        for r in records {
            let key = RegionKey::new(table.clone(), r.key.region);
            let owner = self.coord.owner(&key).await?;
            let address = owner
                .filter(|o| o.alive)
                .and_then(|o| addresses.get(&o.process).cloned())
                .ok_or_else(|| no_server(&format!("region {key} has no live server yet")))?;
            out.push(Located {
                id: r.key.region,
                start: r.start,
                end: r.end,
                server: self.client(&address)?,
            });
        }
        out.sort_by(|a, b| a.start.cmp(&b.start));
        let out = Arc::new(out);
        lock(&self.tables)?.insert(table.clone(), Arc::clone(&out));
        Ok(out)
    }

    /// The region of `table` holding `row`.
    pub(crate) async fn locate(&self, table: &TableName, row: &[u8]) -> Result<Located> {
        let regions = self.regions(table).await?;
        regions
            .iter()
            .find(|r| r.holds(row))
            .cloned()
            .ok_or_else(|| no_server(&format!("no region of {table} holds the row")))
    }

    /// Region `id` of `table`, read anew from etcd when the cache lacks it;
    /// [`Error::RegionNotFound`] when the catalog does not list it (a split or merge
    /// retired it).
    pub(crate) async fn locate_region(&self, table: &TableName, id: u64) -> Result<Located> {
        for fresh in [false, true] {
            if fresh {
                self.forget(table);
            }
            if let Some(r) = self.regions(table).await?.iter().find(|r| r.id == id) {
                return Ok(r.clone());
            }
        }
        Err(Error::RegionNotFound {
            table: table.to_string(),
            id,
        })
    }

    /// The servers serving regions of `table`, each once.
    pub(crate) async fn table_servers(&self, table: &TableName) -> Result<Vec<RpcClient>> {
        let mut out: Vec<RpcClient> = Vec::new();
        for r in self.regions(table).await?.iter() {
            if !out.iter().any(|s| s.address() == r.server.address()) {
                out.push(r.server.clone());
            }
        }
        Ok(out)
    }

    /// Forgets what is cached of `table` (after a refusal or a schema change).
    pub(crate) fn forget(&self, table: &TableName) {
        if let Ok(mut t) = lock(&self.tables) {
            t.remove(table);
        }
    }

    /// Forgets every cached location.
    pub(crate) fn forget_all(&self) {
        if let Ok(mut t) = lock(&self.tables) {
            t.clear();
        }
    }
}

/// The retry policy of one operation.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// The whole operation's deadline, retries included (HBase's
    /// `hbase.client.operation.timeout`).
    pub operation_timeout: Duration,
    /// Each row operation's or scan page's deadline (HBase's `hbase.rpc.timeout`): a
    /// server that does not answer in time (paused, cut off) is given up and the region
    /// located again. Schema, snapshot and maintenance calls, which may run long (a major
    /// compaction), wait up to the operation's deadline instead.
    pub rpc_timeout: Duration,
    /// The first pause between tries; it doubles up to [`RetryPolicy::max_pause`].
    pub pause: Duration,
    /// The longest pause between tries.
    pub max_pause: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            operation_timeout: Duration::from_secs(30),
            rpc_timeout: Duration::from_secs(5),
            pause: Duration::from_millis(20),
            max_pause: Duration::from_millis(1000),
        }
    }
}

/// True for an error that means "the region may be elsewhere now, or the server may be
/// back soon": the location is re-read and the operation tried again. `idempotent` says
/// whether a call that may have reached the server (a timeout, a connection broken with
/// the call sent) may be repeated: an increment, an append or a batch holding one is not,
/// so a counter never counts one attempt twice.
pub(crate) fn retryable(e: &Error, idempotent: bool) -> bool {
    match e {
        Error::RegionNotServed { .. }
        | Error::Closed
        | Error::Busy(_)
        | Error::Fenced { .. }
        | Error::LeaseExpired { .. }
        | Error::RegionOwned { .. } => true,
        Error::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused | ErrorKind::NotConnected | ErrorKind::NotFound => true,
            // The call may have reached the server: repeated only when that is harmless.
            ErrorKind::TimedOut | ErrorKind::ConnectionAborted => idempotent,
            _ => false,
        },
        _ => false,
    }
}

/// Runs `attempt` until it succeeds, fails for good, or `policy`'s deadline passes; between
/// tries forgets `table`'s locations (all of them when `None`) and pauses.
pub(crate) async fn with_retries<T, F, Fut>(
    router: &Router,
    table: Option<&TableName>,
    policy: RetryPolicy,
    idempotent: bool,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let deadline = Instant::now() + policy.operation_timeout;
    let mut pause = policy.pause;
    router.settle().await?;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if retryable(&e, idempotent) => {
                match table {
                    Some(t) => router.forget(t),
                    None => router.forget_all(),
                }
                let now = Instant::now();
                if now + pause >= deadline {
                    return Err(e);
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(policy.max_pause);
            }
            Err(e) => return Err(e),
        }
    }
}

/// The error of a region (or a cluster) with no live server yet: retried (`NotFound`).
fn no_server(msg: &str) -> Error {
    Error::Io(std::io::Error::new(ErrorKind::NotFound, msg.to_string()))
}

/// Locks `m`, mapping poisoning (a panic elsewhere while holding it) to an error.
pub(crate) fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| Error::Io(std::io::Error::other("a client lock was poisoned")))
}
