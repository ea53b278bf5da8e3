//! Opening a data directory the way the tool does ([`DataDir::open`]): with Basalt's
//! built-in coprocessors registered (secondary indexes, relations), the plugin runtime (so
//! tables run their uploaded plugins, `plugin:{sha256}`), the built-in endpoints
//! (aggregation, fast row count) and endpoint plugins, and every table that lists a coprocessor the
//! tool does not have opened read-only (reads work, writes fail with
//! `Error::ReadOnlyTable` naming the missing coprocessors), so looking at any directory
//! never needs the application's code.
//!
//! Invariant: the tool never writes a table whose coprocessors it cannot run (derived data
//! such as an application's own index would go out of sync).

use basalt_coprocessors::{EndpointRegistry, Endpoints, Registry};
use basalt_core::{Config, Connection, Result, TableName};
use basalt_plugins::{PluginEndpoints, PluginHost};
use std::path::Path;
use std::sync::Arc;

/// An open data directory and the tool's coprocessor machinery over it.
#[derive(Clone)]
pub struct DataDir {
    /// The connection to the directory's engine.
    pub conn: Connection,
    /// The coprocessor registry the engine loads tables' coprocessors from.
    pub coprocessors: Arc<Registry>,
    /// The runtime of the index coprocessors (for `IndexAdmin`).
    pub indexes: Arc<basalt_index::Runtime>,
    /// The endpoint services the tool can call (the built-in aggregations).
    pub endpoints: Arc<EndpointRegistry>,
    /// Endpoint plugins, loaded on first call.
    pub plugins: Arc<PluginEndpoints>,
    /// The plugin runtime (its per-attachment counters: p99 latency, memory).
    pub plugin_host: Arc<PluginHost>,
}

impl DataDir {
    /// The tool's coprocessor registry: the built-ins, read-only for unknown names.
    fn registry() -> Result<(Arc<Registry>, Arc<basalt_index::Runtime>, Arc<PluginHost>)> {
        let registry = Arc::new(Registry::new().read_only_when_missing());
        let host = PluginHost::with_defaults()?;
        registry.set_plugin_runtime(host.clone());
        let indexes = basalt_index::register(&registry)?;
        basalt_coprocessors::relations::register_relations(&registry)?;
        Ok((registry, indexes, host))
    }

    /// The tool's coprocessor loader on its own (a region server's, `regionserver`).
    pub(crate) fn tool_registry() -> Result<Arc<Registry>> {
        Ok(Self::registry()?.0)
    }

    /// Opens (creating if missing) the data directory `dir`.
    pub async fn open(dir: &Path) -> Result<DataDir> {
        Self::open_with(Config::new(dir)).await
    }

    /// Opens with the settings of `config` (its coprocessor loader is replaced by the
    /// tool's).
    pub async fn open_with(config: Config) -> Result<DataDir> {
        let (coprocessors, indexes, host) = Self::registry()?;
        let conn = Connection::open_with(config.coprocessor_loader(coprocessors.clone())).await?;
        Ok(DataDir {
            conn,
            coprocessors,
            indexes,
            endpoints: Arc::new(EndpointRegistry::with_builtins()),
            plugins: Arc::new(PluginEndpoints::new(host.clone())),
            plugin_host: host,
        })
    }

    /// The endpoint caller over this directory.
    pub fn endpoints(&self) -> Endpoints {
        Endpoints::new(&self.conn, self.endpoints.clone())
    }

    /// The coprocessors `table` lists that the tool does not have (the table is read-only
    /// here when this is not empty).
    pub async fn missing_coprocessors(&self, table: &TableName) -> Result<Vec<String>> {
        let desc = self.conn.admin().describe_table(table.clone()).await?;
        Ok(self.coprocessors.missing(&desc))
    }

    /// Closes the engine (flushing nothing it need not: the WAL holds every write).
    pub async fn close(&self) -> Result<()> {
        self.conn.close().await
    }
}
