//! The engine's settings ([`Config`]) and the plug-ins it is given: the loader of the coprocessor
//! hooks a table lists ([`HooksLoader`]) and the repairs of derived data run after a salvage
//! ([`RecoveryRepair`]).
//!
//! Invariant: every setting has a default that is safe for a small embedded engine; the
//! engine checks the values at open ([`super::Engine::open`]), not here.

use crate::coord::Coordination;
use crate::coprocessor::{EngineHooks, RegionHooks};
use crate::error::Result;
use crate::fs::{FileSystem, StdFs};
use crate::objects::Objects;
use crate::schema::split::SplitPolicy;
use crate::schema::{CoprocessorDescriptor, TableDescriptor, TableName};
use crate::wal::WalRecoveryMode;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Turns a table's coprocessor list into the hooks the engine calls.
pub trait HooksLoader: Send + Sync + std::fmt::Debug {
    /// The hooks for `table` (whose `coprocessors` list is not empty), or an error when a
    /// listed coprocessor cannot be loaded (the table change, or the open, then fails).
    fn load(&self, table: &TableDescriptor) -> Result<Arc<dyn RegionHooks>>;

    /// The verifications and repairs of derived data (indexes) that
    /// `Connection::open_with` runs after a salvage or an offline repair
    /// ([`RecoveryRepair`]); none by default.
    fn recovery_repairs(&self) -> Vec<Arc<dyn RecoveryRepair>> {
        Vec::new()
    }

    /// Checks that `bytes` are a plugin this loader can run (`Admin::upload_plugin`), and
    /// says what they export. By default the loader runs no plugins and refuses them.
    fn validate_plugin(&self, bytes: &[u8]) -> Result<crate::catalog::PluginKind> {
        let _ = bytes;
        Err(crate::Error::bad_argument(
            "this engine's coprocessor loader runs no plugins (build with the plugin runtime)",
        ))
    }

    /// Gives the loader where uploaded plugins' bytes are read (called by the engine at
    /// open, before any table's coprocessors load). Ignored by default.
    fn bind_plugins(&self, source: Arc<dyn PluginSource>) {
        let _ = source;
    }
}

/// Where a loader reads uploaded plugins' bytes: the engine's object space.
pub trait PluginSource: Send + Sync + std::fmt::Debug {
    /// The bytes of plugin `id` (a hex sha256), checked against their sha256;
    /// [`crate::Error::PluginNotFound`] when no such plugin was stored.
    fn plugin_bytes(&self, id: &str) -> Result<bytes::Bytes>;
}

/// Engine settings.
///
/// ```
/// let cfg = basalt_core::Config::new("/tmp/basalt-doc").memstore_flush_size(64 << 20);
/// assert_eq!(cfg.memstore_flush_size, 64 << 20);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// The data directory.
    pub dir: PathBuf,
    /// A region flushes when its MemStores pass this many bytes (default 128 MiB).
    pub memstore_flush_size: u64,
    /// WAL segments roll at this size (default 64 MiB).
    pub wal_segment_size: u64,
    /// Largest accepted value in bytes (default 10 MiB, HBase's `hbase.client.keyvalue.maxsize`).
    pub max_value_size: usize,
    /// Block cache capacity in bytes (default 256 MiB).
    pub block_cache_size: u64,
    /// When the WAL holds more segments than this, the region pinning the oldest one is
    /// flushed so that the log stays bounded (default 32).
    pub max_wal_segments: usize,
    /// A write to a store with more files than this waits for compaction to catch up, for
    /// at most `blocking_wait_ms` (HBase's `hbase.hstore.blockingStoreFiles`, default 16).
    pub blocking_store_files: usize,
    /// The longest one write waits for a store with too many files (default 1000 ms); after
    /// that it proceeds, so writes slow down but never fail for it.
    pub blocking_wait_ms: u64,
    /// The most bytes all MemStores together may hold (HBase's
    /// `hbase.regionserver.global.memstore.size`, default 2 GiB). Past it, writers wait while
    /// the largest MemStores flush, until the total is back under the limit.
    pub global_memstore_size: u64,
    /// Forced flushes go on until the total is below this fraction of
    /// `global_memstore_size` (HBase's `...global.memstore.size.lower.limit`, default 0.95).
    pub global_memstore_lower_limit: f64,
    /// The longest one write waits for the global MemStore budget (default 60,000 ms, as
    /// HBase's `hbase.busy.wait.duration`). A write still waiting then (flushes keep failing
    /// or cannot keep up) fails with [`Error::Busy`](crate::Error::Busy) having written nothing.
    pub memstore_wait_ms: u64,
    /// The false-positive rate of the bloom filters written into new store files, in (0, 1)
    /// (HBase's `io.storefile.bloom.error.rate`, default 0.01). Files keep the rate they
    /// were written with.
    pub bloom_error_rate: f64,
    /// Every file the engine touches goes through this (default [`StdFs`], the real disk;
    /// tests pass a [`crate::fs::FaultFs`]).
    pub fs: Arc<dyn FileSystem>,
    /// Where the catalog and the store files are kept (see `crate::objects`). Default none:
    /// a [`crate::objects::LocalObjects`] of `dir` through `fs`, the layout of a local data
    /// directory (`catalog`, `data/{id:016}.sf`). On an object store that is not local, the
    /// WAL goes there too (one object per write, in a writer folder of the engine's own,
    /// `wal/w{n:010}`; opening fences and replays every earlier writer's folder). The lock
    /// and the WAL of local objects stay in `dir`.
    pub objects: Option<Arc<dyn Objects>>,
    /// When a region splits by itself (default [`SplitPolicy::IncreasingToUpperBound`]).
    pub split_policy: SplitPolicy,
    /// The upper bound of a region's largest store, in bytes, before it splits (HBase's
    /// `hbase.hregion.max.filesize`, default 10 GiB).
    pub max_region_size: u64,
    /// Turns the coprocessors a table descriptor lists into hooks (default none: a table
    /// that lists coprocessors then fails to open or be created).
    pub coprocessor_loader: Option<Arc<dyn HooksLoader>>,
    /// The longest a batch waits, out of lock order, for the row lock of a row a
    /// coprocessor's batch hook added a mutation to (default 5,000 ms); past it the batch
    /// fails with [`Error::RowLockTimeout`](crate::Error::RowLockTimeout) having written nothing (see
    /// `crate::region::locks`).
    pub row_lock_wait_ms: u64,
    /// System-wide region coprocessors: loaded (through `coprocessor_loader`) for every user
    /// table, ahead of the table's own list (see `lifecycle`).
    pub system_coprocessors: Vec<CoprocessorDescriptor>,
    /// The engine-wide observer of table operations and the WAL (default none).
    pub observer: Option<Arc<dyn EngineHooks>>,
    /// How damage found in the WAL at open is treated (default
    /// [`WalRecoveryMode::TolerateCorruptedTail`], which never loses an acknowledged write
    /// without failing the open). See `recovery`.
    pub wal_recovery: WalRecoveryMode,
    /// Where the engine holds its lease and owns its regions (see `crate::coord`). Default
    /// none: a [`crate::coord::MemoryCoordination`] of the engine's own, which nothing else
    /// sees. Engines (or tools) given the same store see each other's ownership.
    pub coordination: Option<Arc<dyn Coordination>>,
    /// The engine's lease's time to live in a shared [`Config::coordination`] store
    /// (default 10,000 ms); the engine renews it every third of that. An engine whose lease
    /// expired refuses writes until it is reopened. The lease in the engine's own store
    /// (no store configured) never expires.
    pub lease_ttl_ms: u64,
    /// The process name the engine's lease is granted to (default `basalt@<data dir>`).
    pub process_name: Option<String>,
    /// The regions (catalog ids, of any tables) the engine opens of a shared object store,
    /// as a region server opens the regions assigned to it (default none: the whole
    /// store). The engine takes them over (fencing the WAL writers that hold their
    /// unflushed edits and replaying those edits) and serves only them; other engines
    /// serve the rest (see `server/open/takeover.rs`). Only a shared [`Config::objects`] store
    /// can be opened so.
    pub serve_regions: Option<BTreeSet<u64>>,
    /// Who splits a region its table's split policy finds too big (default none: the
    /// engine itself). A region server sets its cluster's master (see
    /// [`crate::coord::SplitAsker`]); splits asked through the API are the engine's.
    pub split_asker: Option<Arc<dyn crate::coord::SplitAsker>>,
}

impl Config {
    /// Defaults for a data directory.
    pub fn new(dir: impl AsRef<Path>) -> Self {
        Config {
            dir: dir.as_ref().to_path_buf(),
            memstore_flush_size: 128 << 20,
            wal_segment_size: 64 << 20,
            max_value_size: 10 << 20,
            block_cache_size: 256 << 20,
            max_wal_segments: 32,
            blocking_store_files: 16,
            blocking_wait_ms: 1000,
            global_memstore_size: 2 << 30,
            global_memstore_lower_limit: 0.95,
            memstore_wait_ms: 60_000,
            bloom_error_rate: crate::storage::storefile::DEFAULT_BLOOM_FP_RATE,
            fs: StdFs::shared(),
            objects: None,
            split_policy: SplitPolicy::default(),
            max_region_size: 10 << 30,
            coprocessor_loader: None,
            row_lock_wait_ms: 5000,
            system_coprocessors: Vec::new(),
            observer: None,
            wal_recovery: WalRecoveryMode::default(),
            coordination: None,
            lease_ttl_ms: 10_000,
            process_name: None,
            serve_regions: None,
            split_asker: None,
        }
    }
    /// Sets who splits a region its table's split policy finds too big (see
    /// [`Config::split_asker`]).
    pub fn split_asker(mut self, asker: Arc<dyn crate::coord::SplitAsker>) -> Self {
        self.split_asker = Some(asker);
        self
    }
    /// Sets the coordination store the engine holds its lease and regions in.
    pub fn coordination(mut self, c: Arc<dyn Coordination>) -> Self {
        self.coordination = Some(c);
        self
    }
    /// Sets the engine's lease's time to live, in milliseconds (at least 3).
    pub fn lease_ttl_ms(mut self, ms: u64) -> Self {
        self.lease_ttl_ms = ms;
        self
    }
    /// Opens only regions `ids` of the shared object store (see [`Config::serve_regions`]).
    pub fn serve_regions(mut self, ids: impl IntoIterator<Item = u64>) -> Self {
        self.serve_regions = Some(ids.into_iter().collect());
        self
    }
    /// Sets the process name the engine's lease is granted to.
    pub fn process_name(mut self, name: impl Into<String>) -> Self {
        self.process_name = Some(name.into());
        self
    }
    /// Sets how damage found in the WAL at open is treated.
    pub fn wal_recovery(mut self, mode: WalRecoveryMode) -> Self {
        self.wal_recovery = mode;
        self
    }
    /// Sets the longest out-of-order wait for the row lock of a row a batch hook added.
    pub fn row_lock_wait_ms(mut self, ms: u64) -> Self {
        self.row_lock_wait_ms = ms;
        self
    }
    /// Adds a system-wide region coprocessor, loaded for every user table (after those
    /// added before it, among equal priorities).
    pub fn system_coprocessor(mut self, cp: CoprocessorDescriptor) -> Self {
        self.system_coprocessors.push(cp);
        self
    }
    /// Sets the engine-wide observer of table operations and the WAL (e.g. a
    /// `basalt_coprocessors::EngineObserverHost`).
    pub fn observer(mut self, observer: Arc<dyn EngineHooks>) -> Self {
        self.observer = Some(observer);
        self
    }
    /// Sets the coprocessor loader (e.g. a `basalt_coprocessors::Registry`).
    pub fn coprocessor_loader(mut self, loader: Arc<dyn HooksLoader>) -> Self {
        self.coprocessor_loader = Some(loader);
        self
    }
    /// Sets the filesystem the engine reads and writes through.
    pub fn filesystem(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }
    /// Keeps the catalog and the store files in `objects` (an object store) instead of
    /// `dir`.
    pub fn objects(mut self, objects: Arc<dyn Objects>) -> Self {
        self.objects = Some(objects);
        self
    }
    /// The objects the engine keeps its catalog and store files in: [`Config::objects`], or
    /// the data directory's.
    pub(crate) fn resolved_objects(&self) -> Arc<dyn Objects> {
        match &self.objects {
            Some(objects) => Arc::clone(objects),
            None => crate::objects::local(Arc::clone(&self.fs), &self.dir),
        }
    }
    /// Sets the bloom filters' false-positive rate for new store files.
    pub fn bloom_error_rate(mut self, rate: f64) -> Self {
        self.bloom_error_rate = rate;
        self
    }
    /// Sets the global MemStore budget in bytes.
    pub fn global_memstore_size(mut self, bytes: u64) -> Self {
        self.global_memstore_size = bytes;
        self
    }
    /// Sets the split policy.
    pub fn split_policy(mut self, policy: SplitPolicy) -> Self {
        self.split_policy = policy;
        self
    }
    /// Sets the region size upper bound of the split policy.
    pub fn max_region_size(mut self, bytes: u64) -> Self {
        self.max_region_size = bytes;
        self
    }
    /// Sets the blocking store-file count.
    pub fn blocking_store_files(mut self, files: usize) -> Self {
        self.blocking_store_files = files;
        self
    }
    /// Sets the longest wait of one write for the global MemStore budget.
    pub fn memstore_wait_ms(mut self, ms: u64) -> Self {
        self.memstore_wait_ms = ms;
        self
    }
    /// Sets the longest wait of one write for a store with too many files.
    pub fn blocking_wait_ms(mut self, ms: u64) -> Self {
        self.blocking_wait_ms = ms;
        self
    }
    /// Sets the flush size.
    pub fn memstore_flush_size(mut self, bytes: u64) -> Self {
        self.memstore_flush_size = bytes;
        self
    }
    /// Sets the WAL segment size.
    pub fn wal_segment_size(mut self, bytes: u64) -> Self {
        self.wal_segment_size = bytes;
        self
    }
    /// Sets the value size limit.
    pub fn max_value_size(mut self, bytes: usize) -> Self {
        self.max_value_size = bytes;
        self
    }
    /// Sets the block cache size.
    pub fn block_cache_size(mut self, bytes: u64) -> Self {
        self.block_cache_size = bytes;
        self
    }
}

/// Verification and repair of what a coprocessor library derives from a table (an
/// index's rows, an observer's counters), run by `Connection::open_with` before it returns
/// when the directory's derived data may disagree with its tables: after an open that
/// salvaged a damaged WAL ([`crate::wal::WalRecoveryMode::Salvage`]), or after the offline
/// repair set store files aside. The configured [`HooksLoader`]
/// supplies them ([`HooksLoader::recovery_repairs`]);
/// `basalt::index::register` registers the indexes' one. A repair that needs the client API
/// opens `Connection::from_engine` on the engine it is given.
#[async_trait::async_trait]
pub trait RecoveryRepair: Send + Sync + std::fmt::Debug {
    /// Verifies and repairs what this library derives from `table`, returning one outcome
    /// per derived structure (none when it derives nothing from it). An error fails the
    /// open; the directory keeps the table recorded for the next one.
    async fn repair(
        &self,
        engine: &Arc<super::Engine>,
        table: &TableName,
    ) -> Result<Vec<RecoveryRepairOutcome>>;
}

/// What one recovery repair found in one derived structure of a table (see
/// [`RecoveryReport::repairs`](super::open::recovery::RecoveryReport::repairs)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryRepairOutcome {
    /// The data table.
    pub table: TableName,
    /// What was verified, as its library names it (`index by_user`).
    pub what: String,
    /// Differences found between the table and what derives from it, all repaired.
    pub differences: usize,
}
