//! A region server: an engine on the cluster's shared store serving the regions the
//! master assigns it, its regions owned through etcd, its RPC service on the network,
//! registered under its lease while it serves; and a candidate for master.
//!
//! [`start`] connects to etcd, binds the RPC address, and starts the server's lives. A
//! life opens an engine on the shared store with [`EtcdCoordination`] as its
//! coordination, serving no region yet (`Config::serve_regions([])`), registers
//! (`P/servers/<process>` under the engine's lease), answers RPCs, and follows the
//! master's assignments every [`FOLLOW_TICK`]: it closes each region it serves that is
//! assigned elsewhere (a flush, then the region is given up: a graceful move) and opens
//! each region assigned to it (`Engine::open_region`: while the previous owner's lease
//! still owns it, the open fails with `RegionOwned` and is tried again on the next tick;
//! once that lease ended, the open fences the owner's WAL and replays the region's edits;
//! a region the catalog no longer lists for [`LISTING_GRACE`] makes the server bring
//! etcd's region list of its table in line with the catalog, `Engine::sync_region_listing`:
//! a server that died between a split's catalog update and the list's left it behind).
//! Every [`LISTING_CHECK`] it also compares each table of the catalog with its list and
//! mends one out of line for [`LISTING_GRACE`]: a create, clone or restore cut short
//! (`listing`).
//! Every [`GC_INTERVAL`] it deletes what dead writers no region needs any more left: their
//! WAL folders and their store files no region lists (`Engine::collect_garbage`). Alongside, the server campaigns for master
//! (`master::master_duty`) unless told not to.
//!
//! A server whose registration vanished (its lease ended: it was paused or cut off past
//! its time to live) stops answering, closes its engine (whose writes were already refused
//! by the lease check) and starts a new life with a new lease, a new node generation,
//! serving nothing until the master assigns it regions again.
//!
//! Invariants: the RPC service answers only while the lease its registration is bound to
//! surely lives (the sending time of the engine's last successful renewal plus the time
//! to live, checked on the local clock before every call and scan page: a paused server
//! that wakes up answers nothing, reads included); a write after the lease ended is also
//! refused by the engine itself, and a takeover fences its WAL; a region is opened here
//! only when the master assigned it here; every life of a server listens on the same
//! address, and nothing listens there between lives.

use crate::listing::{self, Unlisted};
use crate::rpc::load::{LoadSource, RpcCounters};
use crate::rpc::messages::ServerLoad;
use crate::rpc::server::{serve_rpc, Guard, RegionRpc};
use crate::{EtcdConfig, EtcdCoordination, ServerInfo};
use basalt_core::coord::RegionKey;
use basalt_core::endpoint::EndpointHost;
use basalt_core::objects::{Objects, StoreObjects};
use basalt_core::{Config, Connection, Engine, Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How often a server that could not open its engine tries again.
pub const STANDBY_RETRY: Duration = Duration::from_millis(500);
/// How often a serving server checks that its registration (its lease) lives.
pub const LEASE_CHECK: Duration = Duration::from_millis(250);
/// How often a serving server follows the master's assignments.
pub const FOLLOW_TICK: Duration = Duration::from_millis(200);
/// How often a serving server collects what dead writers that no region needs any more
/// left: WAL folders and unlisted store files (`Engine::collect_garbage`; every server
/// does, deletes are idempotent).
pub const GC_INTERVAL: Duration = Duration::from_secs(60);
pub use crate::listing::{LISTING_CHECK, LISTING_GRACE};

/// What a region server needs.
#[derive(Debug, Clone)]
pub struct RegionServerConfig {
    /// Where etcd is.
    pub etcd: EtcdConfig,
    /// The cluster's shared store: a directory every server reaches.
    pub store: PathBuf,
    /// This server's own directory (scratch; nothing durable).
    pub data_dir: PathBuf,
    /// The server's process name (unique in the cluster).
    pub process: String,
    /// Where the RPC service listens (loopback unless told otherwise).
    pub listen: SocketAddr,
    /// The lease's time to live.
    pub lease_ttl: Duration,
    /// The port of its status page, as registered (0: none).
    pub info_port: u16,
    /// Whether it campaigns for master (true unless told otherwise).
    pub master_candidate: bool,
    /// The endpoint services it serves to `Endpoints::served` clients (none unless
    /// given: calls then fail with a typed error).
    pub endpoints: Option<Arc<dyn EndpointHost>>,
}

impl RegionServerConfig {
    /// A server named `process` of the cluster at `etcd` and `store`, its scratch in
    /// `data_dir`, listening on a free loopback port, with a 3 s lease, a candidate for
    /// master.
    pub fn new(
        etcd: EtcdConfig,
        store: impl Into<PathBuf>,
        data_dir: impl Into<PathBuf>,
        process: impl Into<String>,
    ) -> Self {
        RegionServerConfig {
            etcd,
            store: store.into(),
            data_dir: data_dir.into(),
            process: process.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            lease_ttl: Duration::from_secs(3),
            info_port: 0,
            master_candidate: true,
            endpoints: None,
        }
    }
}

/// The life a serving region server is in: its engine, the lease its registration is
/// bound to, and what its RPC service counted (for its status page).
#[derive(Clone)]
pub struct ServingLife {
    engine: Arc<Engine>,
    lease: u64,
    node_generation: u64,
    started_ms: u64,
    load: LoadSource,
}

impl std::fmt::Debug for ServingLife {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingLife")
            .field("lease", &self.lease)
            .field("node_generation", &self.node_generation)
            .field("started_ms", &self.started_ms)
            .finish()
    }
}

impl ServingLife {
    /// The engine serving this life's regions.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The lease its registration is bound to.
    pub fn lease(&self) -> u64 {
        self.lease
    }

    /// The node generation of that lease (one more per life of the same name).
    pub fn node_generation(&self) -> u64 {
        self.node_generation
    }

    /// When it registered, in milliseconds since the Unix epoch.
    pub fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// What its RPC service counted (since the server started: lives share counters).
    pub fn load(&self) -> ServerLoad {
        self.load.load()
    }
}

/// The life a server is in, if it serves (shared with [`ServerLives`]).
type LifeSlot = Arc<RwLock<Option<ServingLife>>>;

/// A view of a running server's lives, for its status page (cheap to clone; outlives
/// the server, then shows no life).
#[derive(Debug, Clone)]
pub struct ServerLives(LifeSlot);

impl ServerLives {
    /// The life the server serves in now; `None` while it opens its engine, between
    /// lives (its lease was lost) or once stopped.
    pub fn current(&self) -> Option<ServingLife> {
        self.0.read().ok().and_then(|l| l.clone())
    }
}

/// A running region server ([`start`]); stops when [`RunningServer::stop`] is called or
/// it is dropped.
#[derive(Debug)]
pub struct RunningServer {
    address: SocketAddr,
    life: LifeSlot,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl RunningServer {
    /// Where its RPC service listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Its lives, as its status page follows them.
    pub fn lives(&self) -> ServerLives {
        ServerLives(Arc::clone(&self.life))
    }

    /// Stops serving, closes the engine (flushing it) and unregisters; returns the error
    /// that stopped it, if one did.
    pub async fn stop(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| Error::Io(std::io::Error::other(format!("region server: {e}"))))?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Starts a region server (see the module doc); returns once its address is bound, before
/// it serves.
pub async fn start(config: RegionServerConfig) -> Result<RunningServer> {
    start_with(config, |c| c).await
}

/// [`start`], with `configure` given each engine configuration before it opens (a
/// coprocessor loader, sizes).
pub async fn start_with(
    config: RegionServerConfig,
    configure: impl Fn(Config) -> Config + Send + Sync + 'static,
) -> Result<RunningServer> {
    let coord = EtcdCoordination::connect(config.etcd.clone()).await?;
    let store = StoreObjects::local_directory(&config.store)?;
    let objects: Arc<dyn Objects> = Arc::new(store);
    let std_listener = bind(config.listen)?;
    let address = std_listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let life = LifeSlot::default();
    let shared_life = Arc::clone(&life);
    let task = tokio::spawn(async move {
        let candidacy = config.master_candidate.then(|| {
            tokio::spawn(crate::master::master_duty(
                coord.clone(),
                config.process.clone(),
                config.lease_ttl,
                stopped.clone(),
            ))
        });
        let lives = Lives {
            config,
            coord,
            objects,
            address,
            configure: Box::new(configure),
            life: shared_life,
            counters: Arc::default(),
        };
        let out = lives.run(std_listener, stopped).await;
        if let Some(c) = candidacy {
            let _ = c.await;
        }
        out
    });
    Ok(RunningServer {
        address,
        life,
        stop,
        task: Some(task),
    })
}

/// What a server keeps across its lives.
struct Lives {
    config: RegionServerConfig,
    coord: EtcdCoordination,
    objects: Arc<dyn Objects>,
    address: SocketAddr,
    configure: Box<dyn Fn(Config) -> Config + Send + Sync>,
    /// The life serving now, for the status page.
    life: LifeSlot,
    /// What the RPC services of every life answered.
    counters: Arc<RpcCounters>,
}

impl Lives {
    /// Opens, serves, and again after a lost lease, until stopped.
    async fn run(
        self,
        listener: std::net::TcpListener,
        mut stopped: watch::Receiver<bool>,
    ) -> Result<()> {
        let mut first = Some(listener);
        loop {
            let Some(conn) = self.open(&mut stopped).await? else {
                return Ok(());
            };
            // The first life serves on the listener bound at start; a later one binds the
            // same address again (closed between lives, so that clients were refused at
            // once instead of waiting on a backlog).
            let listener = match first.take() {
                Some(l) => l,
                None => match bind(self.address) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = conn.close().await;
                        return Err(e);
                    }
                },
            };
            if self.serve(conn, listener, &mut stopped).await? {
                return Ok(());
            }
        }
    }

    /// Opens the engine serving no region yet, trying again while the store is busy
    /// (another server's claim raced this one's); `None` when stopped first.
    async fn open(&self, stopped: &mut watch::Receiver<bool>) -> Result<Option<Connection>> {
        loop {
            if *stopped.borrow() {
                return Ok(None);
            }
            let cfg = Config::new(&self.config.data_dir)
                .objects(Arc::clone(&self.objects))
                .coordination(Arc::new(self.coord.clone()))
                .process_name(self.config.process.clone())
                .lease_ttl_ms(self.config.lease_ttl.as_millis() as u64)
                .serve_regions([])
                .split_asker(Arc::new(crate::asks::MasterSplits::new(self.coord.clone())));
            match Connection::open_with((self.configure)(cfg)).await {
                Ok(conn) => return Ok(Some(conn)),
                Err(
                    e @ (Error::CoordinationConflict(_)
                    | Error::Fenced { .. }
                    | Error::LeaseExpired { .. }),
                ) => {
                    tracing::info!(error = %e, "open lost a race; trying again");
                }
                Err(e) => return Err(e),
            }
            tokio::select! {
                _ = tokio::time::sleep(STANDBY_RETRY) => {}
                _ = stopped.changed() => {}
            }
        }
    }

    /// Registers and serves `conn` until stopped (`true`) or the lease is lost (`false`);
    /// the listener is closed either way.
    async fn serve(
        &self,
        conn: Connection,
        listener: std::net::TcpListener,
        stopped: &mut watch::Receiver<bool>,
    ) -> Result<bool> {
        let engine = Arc::clone(conn.engine());
        if let Some(host) = &self.config.endpoints {
            engine.serve_endpoints(Arc::clone(host));
        }
        let Some(lease) = engine.lease() else {
            let _ = conn.close().await;
            return Err(Error::Io(std::io::Error::other(
                "the engine holds no lease",
            )));
        };
        let info = ServerInfo {
            rpc_address: self.address.to_string(),
            info_port: self.config.info_port,
            started_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        };
        if let Err(e) = self.coord.register_server(&lease, &info).await {
            let _ = conn.close().await;
            return Err(e);
        }
        let tokio_listener = TcpListener::from_std(listener)?;
        let (quit, quitting) = watch::channel(false);
        let mut quitting_rx = quitting.clone();
        // Nothing is answered past the lease: a paused server that wakes up refuses every
        // call at once, before it learns that another server took over.
        let lease_engine = Arc::clone(&engine);
        let lease_id = lease.id;
        let guard: Guard = Arc::new(move || match lease_engine.lease_valid_until() {
            Some(until) if Instant::now() >= until => Err(Error::LeaseExpired { lease: lease_id }),
            _ => Ok(()),
        });
        let catalog_engine = Arc::clone(&engine);
        let refresh: Guard = Arc::new(move || catalog_engine.refresh_catalog());
        let process = self.config.process.clone();
        let wal_engine = Arc::clone(&engine);
        let rpc = RegionRpc::with_guard(Arc::clone(&engine), process.clone(), Some(guard))
            .refreshing(refresh)
            .reporting(Arc::new(move || wal_engine.wal_position()))
            .counting(Arc::clone(&self.counters));
        self.set_life(Some(ServingLife {
            engine: Arc::clone(&engine),
            lease: lease.id,
            node_generation: lease.node_generation,
            started_ms: info.started_ms,
            load: rpc.load_source(),
        }));
        let server = tokio::spawn(serve_rpc(rpc, tokio_listener, async move {
            let _ = quitting_rx.wait_for(|q| *q).await;
        }));
        let (leave, leaving) = watch::channel(false);
        let follower = tokio::spawn(follow(
            Arc::clone(&engine),
            self.coord.clone(),
            process,
            leaving,
        ));
        let ended = loop {
            tokio::select! {
                _ = tokio::time::sleep(LEASE_CHECK) => {
                    if !self.registered(lease.id).await {
                        tracing::warn!(process = %self.config.process, "lease lost: serving stops");
                        break false;
                    }
                }
                _ = stopped.changed() => {
                    if *stopped.borrow() {
                        break true;
                    }
                }
            }
        };
        self.set_life(None);
        // Stopped between two opens or closes, never in the middle of one (a close cut
        // short after its flush began would leave its MemStore snapshot behind).
        let _ = leave.send(true);
        let _ = follower.await;
        let _ = quit.send(true);
        drop(quitting);
        let _ = server.await;
        if ended {
            let _ = self.coord.unregister_server(&lease).await;
        }
        let _ = conn.close().await;
        Ok(ended)
    }

    /// Records the life serving now (`None`: none).
    fn set_life(&self, life: Option<ServingLife>) {
        if let Ok(mut slot) = self.life.write() {
            *slot = life;
        }
    }

    /// True while this server's registration under lease `lease` is listed (an etcd that
    /// cannot be reached counts as listed until the lease would have ended anyway: the
    /// engine's own renewals fail then, and its writes are refused).
    async fn registered(&self, lease: u64) -> bool {
        match self.coord.live_servers().await {
            Ok(live) => live
                .iter()
                .any(|s| s.process == self.config.process && s.lease == lease),
            Err(_) => true,
        }
    }
}

/// Follows the master's assignments every [`FOLLOW_TICK`] until `leaving` says so
/// (looked at between two regions' opens or closes).
async fn follow(
    engine: Arc<Engine>,
    coord: EtcdCoordination,
    process: String,
    mut leaving: watch::Receiver<bool>,
) {
    let mut collected = Instant::now();
    let mut missing = BTreeMap::new();
    let mut unlisted = Unlisted::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(FOLLOW_TICK) => {}
            _ = leaving.wait_for(|l| *l) => return,
        }
        if let Err(e) = follow_once(&engine, &coord, &process, &leaving, &mut missing).await {
            tracing::debug!(%process, error = %e, "could not read the assignments");
        }
        unlisted.check(&engine, &process).await;
        if collected.elapsed() >= GC_INTERVAL {
            collected = Instant::now();
            let gc = Arc::clone(&engine);
            match tokio::task::spawn_blocking(move || gc.collect_garbage()).await {
                Ok(Ok(c)) if !c.removed.is_empty() || !c.store_files.is_empty() => {
                    tracing::info!(
                        %process,
                        writers = ?c.removed,
                        store_files = c.store_files.len(),
                        "collected what dead writers left"
                    )
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::debug!(%process, error = %e, "collection failed"),
                Err(e) => tracing::debug!(%process, error = %e, "collection task failed"),
            }
        }
    }
}

/// Gives up regions still owned but no longer served, closes the regions served here
/// that are assigned elsewhere, then opens those assigned here that are not served; a
/// region that fails is tried again on the next pass. Returns early once `leaving`.
async fn follow_once(
    engine: &Arc<Engine>,
    coord: &EtcdCoordination,
    process: &str,
    leaving: &watch::Receiver<bool>,
    missing: &mut BTreeMap<RegionKey, Instant>,
) -> Result<()> {
    engine.release_unserved().await;
    let assigned = coord.assignments().await?;
    missing.retain(|k, _| assigned.get(k).is_some_and(|p| p == process));
    let served: BTreeSet<RegionKey> = engine
        .served_regions()
        .into_iter()
        .map(|(t, id)| RegionKey::new(t, id))
        .collect();
    for key in &served {
        if *leaving.borrow() {
            return Ok(());
        }
        let elsewhere = assigned.get(key).is_some_and(|p| p != process);
        if elsewhere {
            match engine.close_region(&key.table, key.region).await {
                Ok(()) => {
                    tracing::info!(%process, region = %key, "closed region assigned elsewhere")
                }
                Err(e) => {
                    tracing::warn!(%process, region = %key, error = %e, "closing a region failed")
                }
            }
        }
    }
    for (key, to) in &assigned {
        if *leaving.borrow() {
            return Ok(());
        }
        if to != process || served.contains(key) {
            continue;
        }
        let mut opened = engine.open_region(&key.table, key.region).await;
        if matches!(
            opened,
            Err(Error::TableNotFound(_) | Error::RegionNotFound { .. })
        ) {
            // Created (or split) by another server since this one read the catalog.
            opened = match engine.refresh_catalog() {
                Ok(()) => engine.open_region(&key.table, key.region).await,
                Err(e) => Err(e),
            };
        }
        if !matches!(
            opened,
            Err(Error::TableNotFound(_) | Error::RegionNotFound { .. })
        ) {
            missing.remove(key);
        }
        match opened {
            Ok(()) => tracing::info!(%process, region = %key, "opened assigned region"),
            Err(e @ Error::RegionOwned { .. }) => {
                tracing::debug!(%process, region = %key, error = %e, "waiting for the owner to let the region go");
            }
            Err(e @ (Error::TableNotFound(_) | Error::RegionNotFound { .. })) => {
                // Gone from the catalog but listed in etcd: past LISTING_GRACE, the server
                // that changed the catalog died before it updated the list, which is made
                // to match the catalog (the master then assigns the region's successors).
                tracing::debug!(%process, region = %key, error = %e, "the catalog no longer lists the region");
                let since = *missing.entry(key.clone()).or_insert_with(Instant::now);
                if since.elapsed() < LISTING_GRACE {
                    continue;
                }
                missing.remove(key);
                listing::mend(engine, process, &key.table).await;
            }
            Err(e) => {
                tracing::warn!(%process, region = %key, error = %e, "opening a region failed")
            }
        }
    }
    Ok(())
}

/// A non-blocking listener bound to `address`.
fn bind(address: SocketAddr) -> Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}
