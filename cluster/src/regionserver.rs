//! A region server: an engine on the cluster's shared store, its regions owned through
//! etcd, its RPC service on the network, registered under its lease while it serves.
//!
//! [`start`] connects to etcd, binds the RPC address, then waits for its turn to serve
//! the store: the cluster's election (`EtcdCoordination::campaign`, one key under a lease
//! of the server's own, renewed every third of its time to live), so that at most one
//! server opens the store at a time, even one with no region yet. Having won, it opens the
//! engine on the shared store with [`EtcdCoordination`] as its coordination. The engine
//! claims the regions it opens; while the previous server's engine lease still owns them,
//! the open fails with `RegionOwned` and is tried again every [`STANDBY_RETRY`]. When the
//! owner's lease ends (killed, paused, cut off), the standby's open succeeds: the engine fences the
//! owner's WAL writer, replays its edits above the regions' flushed sequence ids and
//! serves (`basalt_core`'s `server/open/takeover.rs`). Only then does the server register
//! (`P/servers/<process>` under the engine's lease) and answer RPCs, so clients, which
//! route by the regions' owners and the registrations, reach only a serving server.
//!
//! A server whose registration vanished (its lease ended: it was paused or cut off past
//! its time to live) stops answering, closes its engine (whose writes were already refused
//! by the lease check) and starts over as a standby with a new lease, a new node
//! generation.
//!
//! Invariants: the RPC service answers only while the lease its registration is bound to
//! surely lives (the sending time of the engine's last successful renewal plus the time
//! to live, checked on the local clock before every call and scan page: a paused server
//! that wakes up answers nothing, reads included); a write after the lease ended is also
//! refused by the engine itself, and a takeover fences its WAL; every life of a
//! server listens on the same address, and nothing listens there while it stands by.

use crate::rpc::server::{serve_rpc, Guard, RegionRpc};
use crate::{EtcdConfig, EtcdCoordination, ServerInfo};
use basalt_core::coord::Coordination;
use basalt_core::objects::{Objects, StoreObjects};
use basalt_core::{Config, Connection, Error, Result};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How often a standby tries to open the store again.
pub const STANDBY_RETRY: Duration = Duration::from_millis(500);
/// How often a serving server checks that its registration (its lease) lives.
pub const LEASE_CHECK: Duration = Duration::from_millis(250);

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
}

impl RegionServerConfig {
    /// A server named `process` of the cluster at `etcd` and `store`, its scratch in
    /// `data_dir`, listening on a free loopback port, with a 3 s lease.
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
        }
    }
}

/// A running region server ([`start`]); stops when [`RunningServer::stop`] is called or
/// it is dropped.
#[derive(Debug)]
pub struct RunningServer {
    address: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl RunningServer {
    /// Where its RPC service listens.
    pub fn address(&self) -> SocketAddr {
        self.address
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
    let task = tokio::spawn(async move {
        let lives = Lives {
            config,
            coord,
            objects,
            address,
            configure: Box::new(configure),
        };
        lives.run(std_listener, stopped).await
    });
    Ok(RunningServer {
        address,
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
}

impl Lives {
    /// Standby, serve, and again, until stopped.
    async fn run(
        self,
        listener: std::net::TcpListener,
        mut stopped: watch::Receiver<bool>,
    ) -> Result<()> {
        let mut first = Some(listener);
        loop {
            let Some(turn) = self.campaign(&mut stopped).await? else {
                return Ok(());
            };
            let Some(conn) = self.open(&mut stopped).await? else {
                turn.end(&self.coord).await;
                return Ok(());
            };
            // The first life serves on the listener bound at start; a later one binds the
            // same address again (closed while the server stood by, so that clients were
            // refused at once instead of waiting on a backlog).
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
            let ended = self.serve(conn, listener, &turn, &mut stopped).await;
            turn.end(&self.coord).await;
            if ended? {
                return Ok(());
            }
        }
    }

    /// Waits for this server's turn to serve the store (the cluster's election, under a
    /// lease of its own renewed by a task); `None` when stopped first.
    async fn campaign(&self, stopped: &mut watch::Receiver<bool>) -> Result<Option<Turn>> {
        let name = format!("{}.serving", self.config.process);
        let lease = self.coord.grant_lease(&name, self.config.lease_ttl).await?;
        let lost = Arc::new(AtomicBool::new(false));
        let renewal = {
            let (coord, id, lost) = (self.coord.clone(), lease.id, Arc::clone(&lost));
            let every = self.config.lease_ttl / 3;
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if coord.keep_alive(id).await.is_err() {
                        lost.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            })
        };
        let mut turn = Turn {
            lease,
            term: None,
            renewal,
            lost,
        };
        let won = tokio::select! {
            won = self.coord.campaign(&turn.lease, STANDBY_RETRY) => Some(won),
            _ = stopped.wait_for(|s| *s) => None,
        };
        match won {
            Some(Ok(term)) => {
                turn.term = Some(term);
                Ok(Some(turn))
            }
            Some(Err(e)) => {
                turn.end(&self.coord).await;
                Err(e)
            }
            None => {
                turn.end(&self.coord).await;
                Ok(None)
            }
        }
    }

    /// Opens the engine, waiting as a standby while another server owns the store's
    /// regions; `None` when stopped first.
    async fn open(&self, stopped: &mut watch::Receiver<bool>) -> Result<Option<Connection>> {
        loop {
            if *stopped.borrow() {
                return Ok(None);
            }
            let cfg = Config::new(&self.config.data_dir)
                .objects(Arc::clone(&self.objects))
                .coordination(Arc::new(self.coord.clone()))
                .process_name(self.config.process.clone())
                .lease_ttl_ms(self.config.lease_ttl.as_millis() as u64);
            match Connection::open_with((self.configure)(cfg)).await {
                Ok(conn) => return Ok(Some(conn)),
                Err(Error::RegionOwned { owner, .. }) => {
                    tracing::debug!(%owner, "standby: the store's regions are owned");
                }
                Err(e @ (Error::CoordinationConflict(_) | Error::Fenced { .. })) => {
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
        turn: &Turn,
        stopped: &mut watch::Receiver<bool>,
    ) -> Result<bool> {
        let engine = Arc::clone(conn.engine());
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
        self.coord.register_server(&lease, &info).await?;
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
        let process = self.config.process.clone();
        let rpc = RegionRpc::with_guard(Arc::clone(&engine), process, Some(guard));
        let server = tokio::spawn(serve_rpc(rpc, tokio_listener, async move {
            let _ = quitting_rx.wait_for(|q| *q).await;
        }));
        let ended = loop {
            tokio::select! {
                _ = tokio::time::sleep(LEASE_CHECK) => {
                    if turn.lost.load(Ordering::SeqCst) || !self.registered(lease.id).await {
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
        let _ = quit.send(true);
        drop(quitting);
        let _ = server.await;
        if ended {
            let _ = self.coord.unregister_server(&lease).await;
        }
        let _ = conn.close().await;
        Ok(ended)
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

/// A non-blocking listener bound to `address`.
fn bind(address: SocketAddr) -> Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// A server's turn as the one serving the store: its election lease, renewed by a task,
/// and the term it won.
struct Turn {
    lease: basalt_core::coord::Lease,
    term: Option<crate::Leadership>,
    renewal: tokio::task::JoinHandle<()>,
    /// Set when a renewal failed: the turn is over.
    lost: Arc<AtomicBool>,
}

impl Turn {
    /// Ends the turn: resigns the term and revokes the lease (best effort: an unreachable
    /// etcd lets them expire).
    async fn end(self, coord: &EtcdCoordination) {
        self.renewal.abort();
        if let Some(term) = &self.term {
            let _ = coord.resign(term).await;
        }
        let _ = coord.revoke_lease(self.lease.id).await;
    }
}
