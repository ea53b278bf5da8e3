//! What the tool works on ([`DataDir`]): an embedded data directory opened the tool's way
//! ([`DataDir::open`]), or a cluster reached through etcd ([`DataDir::connect`]), each with
//! the handles the shell and the Thrift gateway use over it (the connection, an index admin
//! and an endpoint client).
//!
//! A directory is opened with Basalt's built-in coprocessors registered (secondary
//! indexes, relations), the plugin runtime (so tables run their uploaded plugins,
//! `plugin:{sha256}`), the built-in endpoints (aggregation, fast row count) and endpoint
//! plugins, and every table that lists a coprocessor the tool does not have opened
//! read-only (reads work, writes fail with `Error::ReadOnlyTable` naming the missing
//! coprocessors), so looking at any directory never needs the application's code.
//!
//! Over a cluster the region servers run the coprocessors and serve the endpoints (the
//! stock `basalt regionserver` loads the same built-ins): the client calls the services
//! they serve ([`Endpoints::served`], [`IndexAdmin::served`]). What only a process holding
//! the engine has (the engine's counters, coprocessor metrics, plugin statistics, endpoint
//! plugins run in this process) is in [`Embedded`], which a cluster's `DataDir` lacks:
//! asking for it there is a [`NotOnCluster`] error naming what and why.
//!
//! Invariants: the tool never writes a table whose coprocessors it cannot run (derived
//! data such as an application's own index would go out of sync); a `DataDir` has either
//! [`Embedded`] parts (a directory) or a [`ClusterAddress`] and a [`ClusterAdmin`] (a
//! cluster), never both.

use basalt_cluster::{ClusterAdmin, EtcdConfig, RemoteBackend, RetryPolicy};
use basalt_coprocessors::{EndpointRegistry, Endpoints, Registry};
use basalt_core::client::Backend;
use basalt_core::{Config, Connection, Engine, Result, TableName};
use basalt_index::IndexAdmin;
use basalt_plugins::{PluginEndpoints, PluginHost};
use std::path::Path;
use std::sync::Arc;

/// An open data directory or a connected cluster, with the tool's handles over it.
pub struct DataDir<B: Backend = Engine> {
    /// The connection to the engine (a directory) or to the cluster.
    pub conn: Connection<B>,
    /// The tool's coprocessor registry: the names `alter` may attach, and what a table
    /// lacks here. A directory's engine loads tables' coprocessors from it; a cluster's
    /// stock region servers load the same built-ins.
    pub coprocessors: Arc<Registry>,
    /// The runtime of the tool's index coprocessors: an embedded engine's maintainers run
    /// on it. Over a cluster the region servers run their own and this one stays idle:
    /// use [`DataDir::index_admin`].
    pub indexes: Arc<basalt_index::Runtime>,
    index_admin: IndexAdmin<B>,
    endpoints: Endpoints<B>,
    embedded: Option<Embedded>,
    cluster: Option<(ClusterAddress, ClusterAdmin)>,
}

impl<B: Backend> Clone for DataDir<B> {
    fn clone(&self) -> Self {
        DataDir {
            conn: self.conn.clone(),
            coprocessors: self.coprocessors.clone(),
            indexes: self.indexes.clone(),
            index_admin: self.index_admin.clone(),
            endpoints: self.endpoints.clone(),
            embedded: self.embedded.clone(),
            cluster: self.cluster.clone(),
        }
    }
}

/// What only a directory opened in this process has.
#[derive(Clone)]
pub struct Embedded {
    /// The same engine as [`DataDir::conn`], typed as the engine's connection (its
    /// counters, in-process endpoint calls, index repairs that delete rows).
    pub conn: Connection,
    /// The endpoint services run in this process (the built-in aggregations).
    pub endpoints: Arc<EndpointRegistry>,
    /// Endpoint plugins, loaded on first call.
    pub plugins: Arc<PluginEndpoints>,
    /// The plugin runtime (its per-attachment counters: p99 latency, memory).
    pub plugin_host: Arc<PluginHost>,
}

/// Where a cluster is: etcd's members and the prefix of its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAddress {
    /// etcd's members, as given.
    pub etcd: Vec<String>,
    /// The prefix of the cluster's keys in etcd.
    pub prefix: String,
}

impl std::fmt::Display for ClusterAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "etcd {} (prefix {})", self.etcd.join(","), self.prefix)
    }
}

/// Something only an embedded engine has, asked of a cluster.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} is not available over a cluster: {why}")]
pub struct NotOnCluster {
    /// What was asked for.
    pub what: String,
    /// Why a cluster cannot give it, and what to do instead.
    pub why: String,
}

/// The tool's coprocessor machinery: the registry (read-only for unknown names), the index
/// runtime and the plugin host.
fn registry() -> Result<(Arc<Registry>, Arc<basalt_index::Runtime>, Arc<PluginHost>)> {
    let registry = Arc::new(Registry::new().read_only_when_missing());
    let host = PluginHost::with_defaults()?;
    registry.set_plugin_runtime(host.clone());
    let indexes = basalt_index::register(&registry)?;
    basalt_coprocessors::relations::register_relations(&registry)?;
    Ok((registry, indexes, host))
}

impl DataDir {
    /// The tool's coprocessor loader on its own (a region server's, `regionserver`).
    pub(crate) fn tool_registry() -> Result<Arc<Registry>> {
        Ok(registry()?.0)
    }

    /// Opens (creating if missing) the data directory `dir`.
    pub async fn open(dir: &Path) -> Result<DataDir> {
        Self::open_with(Config::new(dir)).await
    }

    /// Opens with the settings of `config` (its coprocessor loader is replaced by the
    /// tool's).
    pub async fn open_with(config: Config) -> Result<DataDir> {
        let (coprocessors, indexes, host) = registry()?;
        let conn = Connection::open_with(config.coprocessor_loader(coprocessors.clone())).await?;
        let endpoints = Arc::new(EndpointRegistry::with_builtins());
        Ok(DataDir {
            index_admin: IndexAdmin::new(&conn, indexes.clone()),
            endpoints: Endpoints::new(&conn, endpoints.clone()),
            embedded: Some(Embedded {
                conn: conn.clone(),
                endpoints,
                plugins: Arc::new(PluginEndpoints::new(host.clone())),
                plugin_host: host,
            }),
            cluster: None,
            conn,
            coprocessors,
            indexes,
        })
    }
}

impl DataDir<RemoteBackend> {
    /// Connects to the cluster whose etcd members are `etcd` (`host:port` or URLs) and
    /// whose keys are under `prefix`; endpoint calls and index queries go to the region
    /// servers, which run the services and the maintainers, and the cluster's own
    /// administration (status, region placement, moves, the balancer) to etcd.
    pub async fn connect(etcd: Vec<String>, prefix: String) -> Result<DataDir<RemoteBackend>> {
        let (coprocessors, indexes, _host) = registry()?;
        let config = EtcdConfig::new(&etcd).prefix(prefix.clone());
        let conn = basalt_cluster::connect_with(config.clone(), RetryPolicy::default()).await?;
        let admin = ClusterAdmin::connect(config).await?;
        Ok(DataDir {
            index_admin: IndexAdmin::served(&conn),
            endpoints: Endpoints::served(&conn),
            embedded: None,
            cluster: Some((ClusterAddress { etcd, prefix }, admin)),
            conn,
            coprocessors,
            indexes,
        })
    }
}

impl<B: Backend> DataDir<B> {
    /// The endpoint client over this directory or cluster: functions run in this process
    /// on an embedded engine, the region servers' services over a cluster.
    pub fn endpoints(&self) -> &Endpoints<B> {
        &self.endpoints
    }

    /// The index admin: with the maintainers' runtime on an embedded engine; over a
    /// cluster, everything but deleting index rows no data row gives.
    pub fn index_admin(&self) -> &IndexAdmin<B> {
        &self.index_admin
    }

    /// What only an embedded engine has (`None` over a cluster).
    pub fn embedded(&self) -> Option<&Embedded> {
        self.embedded.as_ref()
    }

    /// [`embedded`](Self::embedded), or the error saying that `what` is not available
    /// over a cluster and `why`.
    pub fn require_embedded(
        &self,
        what: &str,
        why: &str,
    ) -> std::result::Result<&Embedded, NotOnCluster> {
        self.embedded.as_ref().ok_or_else(|| NotOnCluster {
            what: what.to_string(),
            why: why.to_string(),
        })
    }

    /// The cluster this is connected to (`None` for a data directory).
    pub fn cluster(&self) -> Option<&ClusterAddress> {
        self.cluster.as_ref().map(|(at, _)| at)
    }

    /// The cluster's administration: its status, where each region is served, moves and
    /// the balancer (`None` for a data directory, whose engine serves every region).
    pub fn cluster_admin(&self) -> Option<&ClusterAdmin> {
        self.cluster.as_ref().map(|(_, admin)| admin)
    }

    /// The coprocessors `table` lists that the tool does not have (the table is read-only
    /// here, and on a stock region server, when this is not empty).
    pub async fn missing_coprocessors(&self, table: &TableName) -> Result<Vec<String>> {
        let desc = self.conn.admin().describe_table(table.clone()).await?;
        Ok(self.coprocessors.missing(&desc))
    }

    /// Closes the engine (flushing nothing it need not: the WAL holds every write), or the
    /// connection to the cluster.
    pub async fn close(&self) -> Result<()> {
        self.conn.close().await
    }
}
