//! `basalt serve`: HBase's Thrift1 gateway over a data directory ([`serve()`]) or in front
//! of a cluster ([`serve_cluster`], `basalt serve --etcd URLS`), so that programs written
//! for HBase's Thrift server (happybase above all) run unchanged on Basalt. The gateway is
//! generic over the client's backend: the same handler, scanners and status page over an
//! embedded engine or over a cluster's region servers.
//!
//! The service is HBase's `Hbase.thrift` as happybase 1.3 ships it, compiled by Apache
//! Thrift's compiler into the `basalt-thrift` crate; the `handler` module implements it over the
//! engine with HBase's semantics. Each connection gets a thread (at most
//! [`ServeOptions::max_connections`] at once; more are closed as soon as accepted) that detects
//! its transport and protocol from the first bytes (the `conn` module), unless forced by
//! [`ServeOptions::transport`] / [`ServeOptions::protocol`], and serves requests until the client
//! leaves, idles past the read timeout, or sends something malformed.
//!
//! Invariants: nothing listens beyond loopback unless [`ServeOptions::bind`] says so; every size
//! a client sends is checked against a limit before anything is allocated for it; a client
//! can end only its own connection; SIGTERM or Ctrl-C stops accepting, closes the
//! connections and closes the engine (or the connection to the cluster) cleanly.

mod calls;
mod conn;
mod convert;
mod guard;
mod handler;
pub(crate) mod info;
mod metrics;
pub(crate) mod page;
mod scanners;
pub(crate) mod scrape;
mod state;
pub(crate) mod status;

pub use status::{
    ClusterInfo, CoprocessorStatus, FamilyStatus, GatewayCounters, IndexStatus, RegionStatus,
    ServerInfo, Status, TableStatus,
};

use crate::datadir::DataDir;
use basalt_core::client::Backend;
use basalt_thrift::hbase::HbaseSyncProcessor;
use handler::Handler;
use scanners::Scanners;
use state::State;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A Thrift transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Unframed (happybase's `buffered`, HBase's default).
    Buffered,
    /// Each message after its 4-byte big-endian length.
    Framed,
}

/// A Thrift protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The strict binary protocol.
    Binary,
    /// The compact protocol.
    Compact,
}

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to listen on (default loopback).
    pub bind: IpAddr,
    /// The port (default 9090, HBase's); 0 picks a free one.
    pub port: u16,
    /// The info port of the status page, its JSON and the metrics (default 9095, HBase's);
    /// 0 picks a free one, `None` serves no info port (`basalt thrift`).
    pub info_port: Option<u16>,
    /// Forces a transport; `None` detects it per connection.
    pub transport: Option<Transport>,
    /// Forces a protocol; `None` detects it per connection.
    pub protocol: Option<Protocol>,
    /// The largest frame, and the largest unframed message, in bytes (default 2 MiB, HBase's
    /// framed default); also the largest string.
    pub max_message_bytes: usize,
    /// The most elements a list, set or map may announce (default 100,000).
    pub max_container_len: usize,
    /// The deepest nesting of structs (default 64).
    pub max_depth: usize,
    /// How long a connection may wait for a request's bytes before it is closed
    /// (default 60 s, HBase's).
    pub read_timeout: Duration,
    /// How long a new connection has to send its first complete request (default 60 s,
    /// HBase's read timeout: happybase connects when a `Connection` is made, maybe well
    /// before its first call): a client that stays silent, or trickles, is closed then.
    /// Silent clients cannot lock others out meanwhile: a full server makes room by
    /// closing the one that waited longest.
    pub first_request_timeout: Duration,
    /// Connections served at once (default 64). Past it, a new connection takes the place
    /// of the connection that has waited longest for its first request (at least
    /// `MIN_WAIT_BEFORE_EVICTION`); when none has, the new one is closed.
    pub max_connections: usize,
    /// Connections one client address may hold at once (0, the default: no limit beyond
    /// `max_connections`; HBase's has none). More are closed when accepted.
    pub max_connections_per_peer: usize,
    /// Scanners open at once (default 1,000).
    pub max_scanners: usize,
    /// How long an unused scanner lives (default 60 s, HBase's lease).
    pub scanner_lease: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 9090,
            info_port: Some(9095),
            transport: None,
            protocol: None,
            max_message_bytes: 2 * 1024 * 1024,
            max_container_len: 100_000,
            max_depth: 64,
            read_timeout: Duration::from_secs(60),
            first_request_timeout: Duration::from_secs(60),
            max_connections: 64,
            max_connections_per_peer: 0,
            max_scanners: 1000,
            scanner_lease: Duration::from_secs(60),
        }
    }
}

/// Logs to standard error through `tracing-subscriber`, filtered by `RUST_LOG` (default
/// `info`; `RUST_LOG=basalt_cli=debug` adds one line per request).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Where the server listens, once it does.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    /// The Thrift service.
    pub thrift: SocketAddr,
    /// The status page, its JSON and the metrics (`None` without an info port).
    pub info: Option<SocketAddr>,
}

/// How long a connection waiting for its first request keeps its place when the server is
/// full: a newer connection takes it only past this.
pub const MIN_WAIT_BEFORE_EVICTION: Duration = Duration::from_millis(500);

/// A live connection, as the accept loop sees it.
struct Live {
    /// Its socket, to shut it down (at exit, or to make room).
    socket: TcpStream,
    /// The client's address.
    peer: IpAddr,
    /// When it was accepted.
    accepted: Instant,
    /// Set once its first request was received whole (then it is not evicted).
    answered: Arc<AtomicBool>,
}

/// The server's shared machinery: what the accept loop and the connections see.
struct Server<B: Backend> {
    opts: ServeOptions,
    state: Arc<State<B>>,
    stop: AtomicBool,
    active: AtomicUsize,
    /// The live connections, by id.
    sockets: Mutex<HashMap<u64, Live>>,
}

impl<B: Backend> Server<B> {
    /// Makes room for a new connection when the server is full: shuts down the connection
    /// that has waited longest for its first request, if it waited at least
    /// [`MIN_WAIT_BEFORE_EVICTION`]. Returns whether it did.
    fn peer_is_full(&self, peer: IpAddr) -> bool {
        let limit = self.opts.max_connections_per_peer;
        limit > 0
            && lock(&self.sockets)
                .values()
                .filter(|l| l.peer == peer)
                .count()
                >= limit
    }

    fn evict_a_silent_connection(&self) -> bool {
        let mut live = lock(&self.sockets);
        let victim = live
            .iter()
            .filter(|(_, l)| !l.answered.load(Ordering::SeqCst))
            .filter(|(_, l)| l.accepted.elapsed() >= MIN_WAIT_BEFORE_EVICTION)
            .min_by_key(|(_, l)| l.accepted)
            .map(|(id, _)| *id);
        match victim.and_then(|id| live.remove(&id)) {
            Some(l) => {
                // Counted first: whoever sees the connection closed sees it counted.
                self.state.metrics.timed_out.inc();
                let _ = l.socket.shutdown(std::net::Shutdown::Both);
                true
            }
            None => false,
        }
    }
}

/// Opens `dir` and serves HBase's Thrift1 service until SIGTERM or Ctrl-C; then closes the
/// connections and the engine. `ready` is called with the bound addresses once listening.
pub fn serve(
    dir: &Path,
    opts: ServeOptions,
    ready: impl FnOnce(Listening),
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let data = rt
        .block_on(DataDir::open(dir))
        .map_err(|e| format!("cannot open data directory {}: {e}", dir.display()))?;
    run(rt, data, Some(dir.display().to_string()), opts, ready)
}

/// Connects to the cluster whose etcd members are `etcd` (keys under `prefix`) and serves
/// HBase's Thrift1 service in front of it until SIGTERM or Ctrl-C, as [`serve()`] does
/// over a directory: every call goes to the region servers through the cluster's client.
pub fn serve_cluster(
    etcd: Vec<String>,
    prefix: String,
    opts: ServeOptions,
    ready: impl FnOnce(Listening),
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let at = format!("etcd {} (prefix {prefix})", etcd.join(","));
    let data = rt
        .block_on(DataDir::connect(etcd, prefix))
        .map_err(|e| format!("cannot reach the cluster at {at}: {e}"))?;
    run(rt, data, None, opts, ready)
}

/// Serves `data` (the directory `dir`, or a cluster when `None`) on the runtime `rt` it
/// was opened on.
fn run<B: Backend>(
    rt: tokio::runtime::Runtime,
    data: DataDir<B>,
    dir: Option<String>,
    opts: ServeOptions,
    ready: impl FnOnce(Listening),
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind((opts.bind, opts.port))
        .map_err(|e| format!("cannot listen on {}:{}: {e}", opts.bind, opts.port))?;
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let info_listener = match opts.info_port {
        Some(port) => Some(
            rt.block_on(tokio::net::TcpListener::bind((opts.bind, port)))
                .map_err(|e| format!("cannot listen on {}:{port} (info port): {e}", opts.bind))?,
        ),
        None => None,
    };
    let state = Arc::new(State {
        data: data.clone(),
        rt: rt.handle().clone(),
        scanners: Scanners::new(opts.max_scanners, opts.scanner_lease),
        metrics: Arc::new(metrics::GatewayMetrics::new()?),
        dir,
        host: addr.ip().to_string(),
        port: addr.port(),
    });
    let (stop_info, info_stopped) = tokio::sync::watch::channel(false);
    let info_addr = match info_listener {
        Some(ref l) => Some(l.local_addr()?),
        None => None,
    };
    let info_task = info_listener.map(|l| rt.spawn(info::serve(l, state.clone(), info_stopped)));
    let server = Arc::new(Server {
        opts,
        state,
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        sockets: Mutex::new(HashMap::new()),
    });
    let watcher = server.clone();
    rt.spawn(async move {
        wait_for_signal().await;
        tracing::info!("stopping: closing connections and the engine (or cluster connection)");
        watcher.stop.store(true, Ordering::SeqCst);
    });
    tracing::info!(%addr, "serving HBase's Thrift1 service");
    if let Some(info) = info_addr {
        tracing::info!(%info, "status page, /status.json and /metrics");
    }
    ready(Listening {
        thrift: addr,
        info: info_addr,
    });
    accept_loop(&server, &listener);
    let _ = stop_info.send(true);
    if let Some(task) = info_task {
        // Requests being answered finish; a stuck client is not waited for.
        let _ = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await });
    }
    // Stop: no new connections; wake every connection thread and wait for them.
    drop(listener);
    for l in lock(&server.sockets).values() {
        let _ = l.socket.shutdown(std::net::Shutdown::Both);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.state.scanners.clear();
    rt.block_on(data.close())?;
    match data.cluster() {
        None => tracing::info!("engine closed"),
        Some(at) => tracing::info!("connection to the cluster at {at} closed"),
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// SIGTERM or Ctrl-C.
pub(crate) async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Counts an event and logs it at most once a second with the count since the last line:
/// a flood must not flood the log too.
pub(crate) struct RateLimitedLog {
    count: u64,
    last: Option<Instant>,
}

impl RateLimitedLog {
    /// Nothing counted yet.
    pub(crate) fn new() -> Self {
        RateLimitedLog {
            count: 0,
            last: None,
        }
    }

    /// Counts one event; returns the count to log when a line is due.
    pub(crate) fn tick(&mut self) -> Option<u64> {
        self.count += 1;
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.last = Some(Instant::now());
            return Some(std::mem::take(&mut self.count));
        }
        None
    }
}

/// The wait after a failed accept (out of descriptors, say): doubled after each failure in
/// a row from 10 ms up to one second, so a process at its descriptor limit keeps serving
/// its connections rather than spinning.
pub(crate) fn accept_backoff(failures: u32) -> Duration {
    Duration::from_millis(10u64 << failures.min(7)).min(Duration::from_secs(1))
}

fn accept_loop<B: Backend>(server: &Arc<Server<B>>, listener: &TcpListener) {
    let mut next_id = 0u64;
    let mut last_sweep = Instant::now();
    let mut refusals = RateLimitedLog::new();
    let mut accept_errors = RateLimitedLog::new();
    let mut failures = 0u32;
    while !server.stop.load(Ordering::SeqCst) {
        if last_sweep.elapsed() > Duration::from_secs(1) {
            server.state.scanners.expire();
            last_sweep = Instant::now();
        }
        let (stream, peer) = match listener.accept() {
            Ok(x) => {
                failures = 0;
                x
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => {
                if let Some(n) = accept_errors.tick() {
                    tracing::warn!("accept failed ({n} time(s) since the last line): {e}");
                }
                std::thread::sleep(accept_backoff(failures));
                failures = failures.saturating_add(1);
                continue;
            }
        };
        let full = if server.peer_is_full(peer.ip()) {
            Some(format!(
                "{} connections already open from one address",
                server.opts.max_connections_per_peer
            ))
        } else if server.active.load(Ordering::SeqCst) >= server.opts.max_connections
            && !server.evict_a_silent_connection()
        {
            Some(format!(
                "{} connections already open",
                server.opts.max_connections
            ))
        } else {
            None
        };
        if let Some(why) = full {
            // Counted first: whoever sees the connection closed sees it counted.
            server.state.metrics.refuse("thrift");
            let _ = stream.shutdown(std::net::Shutdown::Both);
            if let Some(n) = refusals.tick() {
                tracing::warn!(%peer, "refused {n} connection(s): {why}");
            }
            continue;
        }
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        next_id += 1;
        let id = next_id;
        let answered = Arc::new(AtomicBool::new(false));
        if let Ok(socket) = stream.try_clone() {
            let live = Live {
                socket,
                peer: peer.ip(),
                accepted: Instant::now(),
                answered: answered.clone(),
            };
            lock(&server.sockets).insert(id, live);
        }
        server.active.fetch_add(1, Ordering::SeqCst);
        server.state.metrics.connections.inc();
        let srv = server.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("thrift-conn-{id}"))
            .stack_size(1024 * 1024)
            .spawn(move || {
                let processor = HbaseSyncProcessor::new(Handler {
                    state: srv.state.clone(),
                });
                let why = conn::serve(
                    stream,
                    peer,
                    &srv.opts,
                    &processor,
                    &srv.state.metrics,
                    &answered,
                );
                if why.starts_with("malformed")
                    || why.starts_with("unrecognized")
                    || why.starts_with("truncated")
                {
                    tracing::warn!(%peer, "connection closed: {why}");
                } else {
                    tracing::debug!(%peer, "connection closed: {why}");
                }
                lock(&srv.sockets).remove(&id);
                srv.state.metrics.connections.dec();
                srv.active.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            tracing::warn!(%peer, "cannot start a connection thread: {e}");
            lock(&server.sockets).remove(&id);
            server.state.metrics.connections.dec();
            server.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
