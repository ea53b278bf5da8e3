//! A cluster on this machine for tests: a local etcd, a shared directory as the object
//! store, and region servers (`basalt_cluster::regionserver`) in this process, each with a
//! scratch directory of its own; clients connect through etcd like any remote client.
//!
//! Each cluster keeps its keys under a prefix of its own, so the tests of one binary may
//! share one etcd. Servers are stopped (engines closed, registrations removed) when the
//! cluster drops, and etcd with the last cluster.
#![allow(dead_code)]

use basalt::endpoint::EndpointHost;
use basalt::{Config, Connection, HooksLoader};
use basalt_cluster::regionserver::{self, RegionServerConfig, RunningServer};
use basalt_cluster::{EtcdConfig, LocalEtcd, RemoteBackend, RetryPolicy};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tempfile::TempDir;

/// etcd shared by the clusters alive in this test binary.
fn shared_etcd() -> Arc<LocalEtcd> {
    static SHARED: Mutex<Weak<LocalEtcd>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap();
    if let Some(etcd) = shared.upgrade() {
        return etcd;
    }
    let etcd = Arc::new(LocalEtcd::start().expect("etcd starts (Debian's etcd-server)"));
    *shared = Arc::downgrade(&etcd);
    etcd
}

/// A cluster of region servers on one etcd and one shared directory.
pub struct TestCluster {
    pub etcd: Arc<LocalEtcd>,
    pub prefix: String,
    pub store: TempDir,
    pub scratch: TempDir,
    pub servers: Vec<Option<RunningServer>>,
    /// What every server loads: a coprocessor loader and the endpoints it serves.
    pub coprocessors: Option<Coprocessors>,
    /// What every server's engine configuration changes (split sizes, ...).
    pub configure: Option<Configure>,
}

/// A change of every server's engine configuration.
pub type Configure = Arc<dyn Fn(Config) -> Config + Send + Sync>;

/// The coprocessors a test cluster's servers load.
#[derive(Clone)]
pub struct Coprocessors {
    /// The loader of the tables' observers (indexes, ...).
    pub loader: Arc<dyn HooksLoader>,
    /// The endpoint services served.
    pub endpoints: Arc<dyn EndpointHost>,
}

impl TestCluster {
    /// Starts `servers` region servers and waits until one serves.
    pub async fn start(servers: usize) -> TestCluster {
        Self::start_with(servers, None).await
    }

    /// [`TestCluster::start`], every server loading `coprocessors`.
    pub async fn start_with(servers: usize, coprocessors: Option<Coprocessors>) -> TestCluster {
        Self::start_full(servers, coprocessors, None).await
    }

    /// [`TestCluster::start`], every server's engine configured by `configure`.
    pub async fn start_configured(
        servers: usize,
        configure: impl Fn(Config) -> Config + Send + Sync + 'static,
    ) -> TestCluster {
        Self::start_full(servers, None, Some(Arc::new(configure))).await
    }

    async fn start_full(
        servers: usize,
        coprocessors: Option<Coprocessors>,
        configure: Option<Configure>,
    ) -> TestCluster {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let etcd = shared_etcd();
        let prefix = format!(
            "/test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut cluster = TestCluster {
            etcd,
            prefix,
            store: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
            servers: Vec::new(),
            coprocessors,
            configure,
        };
        for i in 0..servers {
            let server = cluster.start_server(i).await;
            cluster.servers.push(Some(server));
        }
        cluster
    }

    /// The etcd configuration of this cluster.
    pub fn etcd_config(&self) -> EtcdConfig {
        EtcdConfig::new([self.etcd.endpoint()]).prefix(self.prefix.clone())
    }

    /// Starts server number `i` (its name `rs-<i>`) with the cluster's coprocessors.
    pub async fn start_server(&self, i: usize) -> RunningServer {
        self.start_server_with(i, self.coprocessors.clone()).await
    }

    /// Starts server number `i` (its name `rs-<i>`) with coprocessors of its own (a
    /// server started from another binary).
    pub async fn start_server_with(
        &self,
        i: usize,
        coprocessors: Option<Coprocessors>,
    ) -> RunningServer {
        let data = self.scratch.path().join(format!("rs-{i}"));
        std::fs::create_dir_all(&data).unwrap();
        let mut config = RegionServerConfig::new(
            self.etcd_config(),
            self.store.path(),
            data,
            format!("rs-{i}"),
        );
        config.lease_ttl = Duration::from_secs(3);
        let loader = coprocessors.as_ref().map(|c| Arc::clone(&c.loader));
        config.endpoints = coprocessors.as_ref().map(|c| Arc::clone(&c.endpoints));
        let configure = self.configure.clone();
        regionserver::start_with(config, move |cfg| {
            let cfg = match &loader {
                Some(loader) => cfg.coprocessor_loader(Arc::clone(loader)),
                None => cfg,
            };
            match &configure {
                Some(configure) => configure(cfg),
                None => cfg,
            }
        })
        .await
        .unwrap()
    }

    /// A client of the cluster.
    pub async fn connect(&self) -> Connection<RemoteBackend> {
        basalt_cluster::connect_with(self.etcd_config(), RetryPolicy::default())
            .await
            .unwrap()
    }

    /// Stops every server.
    pub async fn stop(mut self) {
        for s in self.servers.iter_mut() {
            if let Some(s) = s.take() {
                s.stop().await.unwrap();
            }
        }
    }
}
