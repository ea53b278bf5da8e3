//! The engine: one process-wide host of regions, like an HBase region server with its master
//! folded in.
//!
//! It owns the catalog, the engine-wide WAL and MVCC, the row locks, the block cache and every
//! open region. Submodules split its jobs: [`admin`] (schema changes), [`write`](mod@write) (the write
//! path), [`read`] (gets and scans), [`check`] (integrity checks of a table's files),
//! [`flush`] (MemStore to store file, WAL purge), [`hooks`] (coprocessor hook calls), [`lifecycle`]
//! (lifecycle, scanner and engine-wide hook calls), [`memory`] (the global MemStore budget),
//! [`compact`] (minor and major compaction, write throttling), [`endpoint`] (region-local calls
//! at one pinned read point, for endpoints), [`split`] (region split and
//! merge, split policy), [`recovery`] (open and replay) and [`repair`] (offline check and
//! repair of a closed data directory). Invariant: a table's regions are
//! sorted by start key and cover the whole key space without gaps or overlaps.

pub mod admin;
pub mod check;
pub mod compact;
pub mod endpoint;
pub mod flush;
pub mod hooks;
pub mod lifecycle;
pub mod memory;
pub mod read;
pub(crate) mod read_points;
pub mod recovery;
pub mod repair;
pub mod split;
pub(crate) mod verify_pending;
pub mod write;

use crate::catalog::Catalog;
use crate::coprocessor::{EngineHooks, HookSlot, RegionHooks};
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, StdFs};
use crate::mvcc::Mvcc;
use crate::region::locks::RowLocks;
use crate::region::Region;
use crate::schema::{ColumnFamilyDescriptor, CoprocessorDescriptor, TableDescriptor, TableName};
use crate::storage::storefile::{BlockCache, WriterOptions};
use crate::wal::{Wal, WalRecoveryMode};
use parking_lot::{Mutex, RwLock};
pub use split::SplitPolicy;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Turns a table's coprocessor list into the hooks the engine calls.
pub trait HooksLoader: Send + Sync + std::fmt::Debug {
    /// The hooks for `table` (whose `coprocessors` list is not empty), or an error when a
    /// listed coprocessor cannot be loaded (the table change, or the open, then fails).
    fn load(&self, table: &TableDescriptor) -> Result<Arc<dyn RegionHooks>>;

    /// The verifications and repairs of derived data (indexes) that
    /// `Connection::open_with` runs after a salvage or an offline repair
    /// ([`recovery::RecoveryRepair`]); none by default.
    fn recovery_repairs(&self) -> Vec<Arc<dyn recovery::RecoveryRepair>> {
        Vec::new()
    }
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
    /// or cannot keep up) fails with [`Error::Busy`] having written nothing.
    pub memstore_wait_ms: u64,
    /// The false-positive rate of the bloom filters written into new store files, in (0, 1)
    /// (HBase's `io.storefile.bloom.error.rate`, default 0.01). Files keep the rate they
    /// were written with.
    pub bloom_error_rate: f64,
    /// Every file the engine touches goes through this (default [`StdFs`], the real disk;
    /// tests pass a [`crate::fs::FaultFs`]).
    pub fs: Arc<dyn FileSystem>,
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
    /// fails with [`Error::RowLockTimeout`] having written nothing (see
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
            split_policy: SplitPolicy::default(),
            max_region_size: 10 << 30,
            coprocessor_loader: None,
            row_lock_wait_ms: 5000,
            system_coprocessors: Vec::new(),
            observer: None,
            wal_recovery: WalRecoveryMode::default(),
        }
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

/// An open table: descriptor, state and regions.
#[derive(Debug)]
pub struct TableState {
    /// The name.
    pub name: TableName,
    /// The name as `ns:name`, formatted once (row locks are keyed by it on every write).
    pub key: String,
    /// XXH3 of `key`, the seed of the hooked-write clock's row hash.
    pub(crate) key_hash: u64,
    /// The descriptor.
    pub descriptor: RwLock<TableDescriptor>,
    /// False when disabled.
    pub enabled: AtomicBool,
    /// Regions sorted by start key.
    pub regions: RwLock<Vec<Arc<Region>>>,
    /// The coprocessor hooks; `None` when the table lists no coprocessor (the fast path).
    pub hooks: HookSlot,
}

impl TableState {
    /// The table's hooks, if it has coprocessors (no allocation either way).
    pub fn hooks(&self) -> Option<Arc<dyn RegionHooks>> {
        self.hooks.get()
    }

    /// The region holding `row`.
    pub fn locate(&self, row: &[u8]) -> Option<Arc<Region>> {
        let regions = self.regions.read();
        let idx = regions.partition_point(|r| r.start.as_ref() <= row);
        idx.checked_sub(1).and_then(|i| regions.get(i).cloned())
    }

    /// The region holding `row`, if it serves (an offline region fails with its reason).
    pub(crate) fn online_region(&self, row: &[u8]) -> Result<Arc<Region>> {
        let region = self
            .locate(row)
            .ok_or_else(|| Error::TableNotFound(self.name.to_string()))?;
        region.check_online()?;
        Ok(region)
    }

    /// Fails unless the table is enabled.
    pub fn check_enabled(&self) -> Result<()> {
        if self.enabled.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(Error::TableDisabled(self.name.to_string()))
        }
    }
}

/// Slots of the hooked-write clock (512 KiB). A row waits for the next millisecond only
/// when its slot saw a hooked write this millisecond; at 4,096 slots, 8 writers of indexed
/// puts (each marking a data row and an index row) collided often enough to cut indexed put
/// throughput by a third (bench `index`: 75K -> 115K puts/s with 65,536 slots).
pub(crate) const ROW_CLOCK_SLOTS: usize = 1 << 16;

/// The engine.
pub struct Engine {
    pub(crate) config: Config,
    pub(crate) catalog: Catalog,
    pub(crate) wal: Wal,
    pub(crate) mvcc: Mvcc,
    pub(crate) locks: RowLocks,
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) tables: RwLock<BTreeMap<TableName, Arc<TableState>>>,
    pub(crate) commit_lock: Mutex<()>,
    pub(crate) next_file_id: AtomicU64,
    pub(crate) commits: AtomicU64,
    /// Per (table, row) slot, the last timestamp a hooked write of the row took (see
    /// `write::hooked_now`). [`ROW_CLOCK_SLOTS`] slots: rows sharing a slot wait for each
    /// other's millisecond to pass.
    pub(crate) row_clock: Box<[AtomicU64]>,
    /// MemStore bytes written since the global budget was last checked (see [`memory`]).
    pub(crate) memstore_unchecked: AtomicU64,
    /// Set while the MemStores are known to be over the global budget: every writer waits.
    pub(crate) memstore_over: AtomicBool,
    /// Writes that had to wait for the global MemStore budget.
    pub(crate) memstore_blocked_writes: AtomicU64,
    pub(crate) closed: AtomicBool,
    /// Holds an exclusive lock on `<dir>/LOCK` so that two engines never share a directory.
    pub(crate) dir_lock: Mutex<Option<Box<dyn FileLock>>>,
    /// Read points of open gets and scans: compactions keep what they may still need.
    pub(crate) read_points: read_points::ReadPoints,
    /// Serializes region splits and merges engine-wide.
    pub(crate) region_ops: Arc<tokio::sync::Mutex<()>>,
    /// What the open recovered, repaired and set aside.
    pub(crate) recovery: RwLock<recovery::RecoveryReport>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("dir", &self.config.dir)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// What the open found and did: WAL segments read, records replayed, damage cut,
    /// skipped or set aside.
    pub fn recovery_report(&self) -> recovery::RecoveryReport {
        self.recovery.read().clone()
    }

    /// How a flush writes a store file of a family: the family's block size, compression and
    /// bloom type, the engine's bloom error rate (a compaction swaps in the family's
    /// compaction compression).
    pub(crate) fn writer_options(&self, d: &ColumnFamilyDescriptor) -> WriterOptions {
        WriterOptions {
            block_size: d.block_size as usize,
            compression: d.compression,
            bloom: d.bloom,
            bloom_fp_rate: self.config.bloom_error_rate,
        }
    }

    pub(crate) fn file_path(&self, id: u64) -> PathBuf {
        store_file_path(&self.config.dir, id)
    }

    /// The open table `name`.
    pub fn table(&self, name: &TableName) -> Result<Arc<TableState>> {
        self.check_open()?;
        self.tables
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TableNotFound(name.to_string()))
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// The block cache.
    pub fn block_cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }

    /// Flushes every MemStore, syncs the WAL and refuses further calls.
    pub async fn close(self: &Arc<Self>) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.hooks_close_all(false).await;
        let tables: Vec<_> = self.tables.read().values().cloned().collect();
        for t in tables {
            let regions: Vec<_> = t.regions.read().clone();
            for r in regions {
                self.flush_region(&r).await?;
            }
        }
        self.hooks_close_all(true).await;
        self.closed.store(true, Ordering::Release);
        // A running split or merge ends (or, seeing `closed`, gives up) first.
        drop(self.region_ops.lock().await);
        // A running compaction finishes (or, seeing `closed`, gives up) before the directory
        // lock goes, so no other engine ever sees its files half-committed.
        self.wait_for_compactions().await;
        let out = self.wal.close();
        // Dropping the file releases the directory lock, so the directory can be reopened.
        self.dir_lock.lock().take();
        out
    }
}

/// Where store file `id` lives under the data directory `root`.
pub fn store_file_path(root: &Path, id: u64) -> PathBuf {
    root.join("data").join(format!("{id:016}.sf"))
}

pub use crate::cell::now_ms;
