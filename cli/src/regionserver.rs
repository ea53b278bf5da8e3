//! `basalt regionserver`: a region server of a cluster ([`basalt_cluster::regionserver`])
//! with the tool's coprocessors, as `basalt serve` opens a directory: the built-in ones
//! (indexes, relations), the plugin runtime (tables' uploaded plugins), and tables whose
//! native coprocessors this binary lacks opened read-only. A user's own binary calls
//! [`run`] with its own loader to serve tables with its native Rust coprocessors.
//!
//! Invariant: the server stops (closing its engine with a flush, removing its registration)
//! on SIGTERM or Ctrl-C; a kill leaves its lease to expire and a standby to take over.

use crate::datadir::DataDir;
use crate::serve::wait_for_signal;
use basalt_cluster::regionserver::{self, RegionServerConfig};
use basalt_cluster::EtcdConfig;
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
}

/// Runs a region server until SIGTERM or Ctrl-C, with `loader` as its coprocessor loader
/// (the tool's when `None`); `ready` is told the RPC address once it is bound.
pub fn run(
    options: RegionServerOptions,
    loader: Option<Arc<dyn HooksLoader>>,
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
