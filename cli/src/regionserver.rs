//! `basalt regionserver`: a region server of a cluster ([`basalt_cluster::regionserver`])
//! with the tool's coprocessors, as `basalt serve` opens a directory: the built-in ones
//! (indexes, relations), the plugin runtime (tables' uploaded plugins), and tables whose
//! native coprocessors this binary lacks opened read-only. A user's own binary calls
//! [`run`] with its own loader to serve tables with its native Rust coprocessors. Every
//! region server is a candidate for master unless told otherwise; `basalt master`
//! ([`run_master`]) is a candidate that serves no region.
//!
//! Each process serves its pages on its info port when given one (`crate::pages`): a
//! region server its status page, `/status.json`, `/metrics` and the cluster's page at
//! `/master`; `basalt master` the cluster's page at `/`.
//!
//! Invariant: the server stops (closing its engine with a flush, removing its registration)
//! on SIGTERM or Ctrl-C; a kill leaves its lease to expire and the master to move its
//! regions.

use crate::datadir::DataDir;
use crate::pages::{self, MasterPage, RegionServerPage};
use crate::serve::wait_for_signal;
use basalt_cluster::regionserver::{self, RegionServerConfig};
use basalt_cluster::{ClusterAdmin, EtcdConfig};
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
    /// Where its status page listens (port 0 picks a free one; `None`: no page).
    pub info: Option<SocketAddr>,
}

/// Where a started process listens.
#[derive(Debug, Clone, Copy)]
pub struct ServerAddresses {
    /// Its RPC service (none for `basalt master`).
    pub rpc: Option<SocketAddr>,
    /// Its status page, if it serves one.
    pub info: Option<SocketAddr>,
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
    /// Where its page of the cluster listens (port 0 picks a free one; `None`: no page).
    pub info: Option<SocketAddr>,
}

/// Binds the info port `at`, if given: the listener and its address.
async fn bind_info(
    at: Option<SocketAddr>,
) -> Result<(Option<tokio::net::TcpListener>, Option<SocketAddr>), String> {
    let Some(at) = at else {
        return Ok((None, None));
    };
    let listener = tokio::net::TcpListener::bind(at)
        .await
        .map_err(|e| format!("cannot listen on {at} (info port): {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("the info port's address: {e}"))?;
    Ok((Some(listener), Some(bound)))
}

/// The master's page of the cluster at `etcd`, served by the process `process`.
fn master_page(admin: ClusterAdmin, etcd: &[String], prefix: &str, process: &str) -> MasterPage {
    MasterPage {
        process: process.to_string(),
        etcd: etcd.to_vec(),
        prefix: prefix.to_string(),
        admin,
        started: std::time::Instant::now(),
        rates: Default::default(),
        clients: Default::default(),
        refused: Default::default(),
    }
}

/// Runs a candidate for master that serves no region ([`basalt_cluster::master`]) until
/// SIGTERM or Ctrl-C, with its page of the cluster on `options.info`; `ready` is told
/// where once it is connected to etcd.
pub fn run_master(
    options: MasterOptions,
    ready: impl FnOnce(ServerAddresses),
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let etcd = EtcdConfig::new(&options.etcd).prefix(options.prefix.clone());
        let coord = basalt_cluster::EtcdCoordination::connect(etcd)
            .await
            .map_err(|e| format!("cannot reach etcd: {e}"))?;
        let (info, info_at) = bind_info(options.info).await?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let page = info.map(|listener| {
            let admin = ClusterAdmin::new(coord.clone());
            let page = master_page(admin, &options.etcd, &options.prefix, &options.name);
            tokio::spawn(pages::serve_master(listener, page, stopped.clone()))
        });
        let duty = tokio::spawn(basalt_cluster::master::master_duty(
            coord,
            options.name,
            options.lease_ttl,
            stopped,
        ));
        ready(ServerAddresses {
            rpc: None,
            info: info_at,
        });
        wait_for_signal().await;
        let _ = stop.send(true);
        let _ = duty.await;
        if let Some(page) = page {
            let _ = page.await;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

/// Runs a region server until SIGTERM or Ctrl-C, with `loader` as its coprocessor loader
/// (the tool's when `None`) and serving the built-in aggregation endpoints; `ready` is
/// told where it listens once its addresses are bound.
pub fn run(
    options: RegionServerOptions,
    loader: Option<Arc<dyn HooksLoader>>,
    ready: impl FnOnce(ServerAddresses),
) -> Result<(), Box<dyn std::error::Error>> {
    run_with_endpoints(options, loader, None, ready)
}

/// [`run`], serving `endpoints` (a registry of the user's own endpoints, or the built-ins
/// when `None`) to `Endpoints::served` clients.
pub fn run_with_endpoints(
    options: RegionServerOptions,
    loader: Option<Arc<dyn HooksLoader>>,
    endpoints: Option<Arc<EndpointRegistry>>,
    ready: impl FnOnce(ServerAddresses),
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let loader: Arc<dyn HooksLoader> = match loader {
        Some(l) => l,
        None => DataDir::tool_registry()?,
    };
    std::fs::create_dir_all(&options.data_dir)?;
    let etcd = EtcdConfig::new(&options.etcd).prefix(options.prefix.clone());
    let mut config = RegionServerConfig::new(
        etcd.clone(),
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
        let (info, info_at) = bind_info(options.info).await?;
        config.info_port = info_at.map_or(0, |a| a.port());
        // Connected before the server starts: a failure stops nothing half way.
        let admin = match info {
            Some(_) => Some(
                ClusterAdmin::connect(etcd)
                    .await
                    .map_err(|e| format!("cannot reach etcd: {e}"))?,
            ),
            None => None,
        };
        let server =
            regionserver::start_with(config, move |c| c.coprocessor_loader(Arc::clone(&loader)))
                .await
                .map_err(|e| format!("cannot start the region server: {e}"))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let page = match info.zip(admin) {
            Some((listener, admin)) => {
                let rpc_address = server.address().to_string();
                let cluster =
                    master_page(admin.clone(), &options.etcd, &options.prefix, &options.name);
                let page = RegionServerPage {
                    name: options.name.clone(),
                    rpc_address,
                    etcd: options.etcd.clone(),
                    prefix: options.prefix.clone(),
                    lives: server.lives(),
                    admin,
                    started: std::time::Instant::now(),
                    rates: Default::default(),
                    refused: Default::default(),
                };
                Some(tokio::spawn(pages::serve_region_server(
                    listener, page, cluster, stopped,
                )))
            }
            None => None,
        };
        ready(ServerAddresses {
            rpc: Some(server.address()),
            info: info_at,
        });
        wait_for_signal().await;
        let _ = stop.send(true);
        if let Some(page) = page {
            let _ = page.await;
        }
        server.stop().await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
