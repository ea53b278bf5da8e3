//! `basalt regionserver`: a region server of a cluster ([`basalt_cluster::regionserver`])
//! with the tool's coprocessors, as `basalt serve` opens a directory: the built-in ones
//! (indexes, relations), the plugin runtime (tables' uploaded plugins), and tables whose
//! native coprocessors this binary lacks opened read-only. A user's own binary calls
//! [`run`] with its own loader to serve tables with its native Rust coprocessors. Every
//! region server is a candidate for master unless told otherwise; `basalt master`
//! ([`run_master`]) is a candidate that serves no region.
//!
//! Invariant: the server stops (closing its engine with a flush, removing its registration)
//! on SIGTERM or Ctrl-C; a kill leaves its lease to expire and the master to move its
//! regions.

use crate::datadir::DataDir;
use crate::serve::wait_for_signal;
use basalt_cluster::regionserver::{self, RegionServerConfig};
use basalt_cluster::EtcdConfig;
use basalt_coprocessors::EndpointRegistry;
use basalt_core::HooksLoader;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What `basalt regionserver` is given.
#[derive(Debug, Clone)]
pub struct RegionServerOptions {
    /// etcd's members (`host:port` or URLs).
    pub etcd: Vec<String>,
    /// The prefix of the cluster's keys in etcd.
    pub prefix: String,
    /// The cluster's shared store: a directory every server reaches.
    pub store: PathBuf,
    /// This server's scratch directory.
    pub data_dir: PathBuf,
    /// The server's name, unique in the cluster.
    pub name: String,
    /// Where its RPC service listens.
    pub listen: SocketAddr,
    /// The lease's time to live.
    pub lease_ttl: Duration,
    /// Whether it campaigns for master.
    pub master_candidate: bool,
}

/// What `basalt master` is given.
#[derive(Debug, Clone)]
pub struct MasterOptions {
    /// etcd's members (`host:port` or URLs).
    pub etcd: Vec<String>,
    /// The prefix of the cluster's keys in etcd.
    pub prefix: String,
    /// The candidate's name (its lease is `<name>.master`).
    pub name: String,
    /// The lease's time to live: how long a dead master's term lasts.
    pub lease_ttl: Duration,
}

/// Runs a candidate for master that serves no region ([`basalt_cluster::master`]) until
/// SIGTERM or Ctrl-C; `ready` is told once it is connected to etcd.
pub fn run_master(
    options: MasterOptions,
    ready: impl FnOnce(),
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let etcd = EtcdConfig::new(&options.etcd).prefix(options.prefix.clone());
        let coord = basalt_cluster::EtcdCoordination::connect(etcd)
            .await
            .map_err(|e| format!("cannot reach etcd: {e}"))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let duty = tokio::spawn(basalt_cluster::master::master_duty(
            coord,
            options.name,
            options.lease_ttl,
            stopped,
        ));
        ready();
        wait_for_signal().await;
        let _ = stop.send(true);
        let _ = duty.await;
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

/// Runs a region server until SIGTERM or Ctrl-C, with `loader` as its coprocessor loader
/// (the tool's when `None`) and serving the built-in aggregation endpoints; `ready` is
/// told the RPC address once it is bound.
pub fn run(
    options: RegionServerOptions,
    loader: Option<Arc<dyn HooksLoader>>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Box<dyn std::error::Error>> {
    run_with_endpoints(options, loader, None, ready)
}

/// [`run`], serving `endpoints` (a registry of the user's own endpoints, or the built-ins
/// when `None`) to `Endpoints::served` clients.
pub fn run_with_endpoints(
    options: RegionServerOptions,
    loader: Option<Arc<dyn HooksLoader>>,
    endpoints: Option<Arc<EndpointRegistry>>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let loader: Arc<dyn HooksLoader> = match loader {
        Some(l) => l,
        None => DataDir::tool_registry()?,
    };
    std::fs::create_dir_all(&options.data_dir)?;
    let mut config = RegionServerConfig::new(
        EtcdConfig::new(&options.etcd).prefix(options.prefix.clone()),
        &options.store,
        &options.data_dir,
        options.name.clone(),
    );
    config.listen = options.listen;
    config.lease_ttl = options.lease_ttl;
    config.master_candidate = options.master_candidate;
    let endpoints = endpoints.unwrap_or_else(|| Arc::new(EndpointRegistry::with_builtins()));
    config.endpoints = Some(endpoints);
    rt.block_on(async move {
        let server =
            regionserver::start_with(config, move |c| c.coprocessor_loader(Arc::clone(&loader)))
                .await
                .map_err(|e| format!("cannot start the region server: {e}"))?;
        ready(server.address());
        wait_for_signal().await;
        server.stop().await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
