//! The engine: one process-wide host of regions, like an HBase region server with its master
//! folded in.
//!
//! [`Engine`] is the state every stage shares ([`EngineShared`]: settings, catalog, open
//! tables, WAL, MVCC, block cache, the directory lock) and three stages built on it, each a
//! type owning its own state and using only the stages before it: the read path
//! ([`ReadPath`], [`read`] and [`endpoint`]: gets, scans, region-local endpoint reads, the
//! registry of open read points), maintenance ([`Maintenance`], [`flush`], [`compact`],
//! [`split`]: flushes and the global MemStore budget, compactions and write throttling,
//! splits and merges) and the write pipeline ([`WritePipeline`], [`write`](mod@write): row
//! locks, one pipeline for every write kind, the hooked-write clock). Around them:
//! [`admin`] (schema changes), [`hooks`] and [`lifecycle`] (coprocessor hook calls),
//! [`recovery`] (what an open recovers), [`check`] and [`repair`] (integrity checks, offline
//! repair of a closed data directory). Invariant: a table's regions are sorted by start key
//! and cover the whole key space without gaps or overlaps.

pub mod admin;
pub mod check;
pub mod compact;
mod config;
pub mod endpoint;
pub mod flush;
pub mod hooks;
pub mod lifecycle;
pub(crate) mod ownership;
pub(crate) use ownership::check_unowned;
pub mod read;
pub(crate) mod read_points;
pub mod recovery;
pub mod repair;
pub mod split;
pub(crate) mod takeover;
pub(crate) mod verify_pending;
pub mod write;

pub use config::{Config, HooksLoader};
pub(crate) use flush::Maintenance;
pub(crate) use read::ReadPath;
pub(crate) use write::WritePipeline;

use crate::catalog::Catalog;
use crate::coprocessor::{HookSlot, RegionHooks};
use crate::error::{Error, Result};
use crate::fs::FileLock;
use crate::mvcc::Mvcc;
use crate::objects::Objects;
use crate::region::Region;
use crate::schema::{ColumnFamilyDescriptor, TableDescriptor, TableName};
use crate::storage::storefile::{BlockCache, WriterOptions};
use crate::wal::Wal;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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

    /// The regions this engine serves (all but those another engine of a shared store
    /// serves, see [`Config::serve_regions`]).
    pub fn served_regions(&self) -> Vec<Arc<Region>> {
        let regions = self.regions.read();
        regions
            .iter()
            .filter(|r| !r.served_elsewhere())
            .cloned()
            .collect()
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

/// What every stage of the engine shares: the settings, the catalog and the open tables,
/// the WAL with the lock that orders its appends, MVCC and the block cache.
///
/// Invariant: sequence ids are taken and WAL records appended only under `commit_lock`, so
/// WAL order is sequence order (a flush takes the lock to cut its snapshot between two
/// commits).
pub(crate) struct EngineShared {
    pub(crate) config: Config,
    pub(crate) catalog: Catalog,
    /// Where the catalog and the store files live ([`Config::objects`] or the data
    /// directory's).
    pub(crate) objects: Arc<dyn Objects>,
    /// On cache lines of its own: every operation read-locks it (an atomic write), and the
    /// fields every read only loads (`closed`, `config`) should not share its line (bench
    /// `core`, random reads after the re-cut into stages: 0.79x of before without the
    /// padding, within noise with it).
    pub(crate) tables: CacheLine<RwLock<BTreeMap<TableName, Arc<TableState>>>>,
    pub(crate) wal: Wal,
    pub(crate) commit_lock: Mutex<()>,
    pub(crate) mvcc: Mvcc,
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) closed: AtomicBool,
    /// Holds an exclusive lock on `<dir>/LOCK` so that two engines never share a directory.
    /// Here rather than in [`Engine`]: background work (a flush, a compaction) holds the
    /// shared state, and with it the directory, until it ends, even when the engine was
    /// dropped without a close.
    pub(crate) dir_lock: Mutex<Option<Box<dyn FileLock>>>,
    /// The engine's lease and regions in the coordination store, once a connection took
    /// them ([`Engine::take_ownership`]).
    pub(crate) ownership: std::sync::OnceLock<Arc<ownership::Ownership>>,
}

impl EngineShared {
    /// The open table `name`.
    pub(crate) fn table(&self, name: &TableName) -> Result<Arc<TableState>> {
        self.check_open()?;
        self.tables
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TableNotFound(name.to_string()))
    }

    /// The open table `name`, for a schema change: every region of it must be served here
    /// ([`Error::RegionNotServed`] otherwise: the engines serving the others would go on
    /// with the old schema).
    pub(crate) fn whole_table(&self, name: &TableName) -> Result<Arc<TableState>> {
        let t = self.table(name)?;
        let elsewhere = t
            .regions
            .read()
            .iter()
            .find(|r| r.served_elsewhere())
            .cloned();
        match elsewhere {
            Some(r) => Err(Error::RegionNotServed {
                table: name.to_string(),
                region: r.id,
            }),
            None => Ok(t),
        }
    }

    /// Every open table, in name order.
    pub(crate) fn all_tables(&self) -> Vec<Arc<TableState>> {
        self.tables.read().values().cloned().collect()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
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

    /// The object name of store file `id` written by `region` (at its generation).
    pub(crate) fn file_name(&self, id: u64, region: &Region) -> String {
        crate::catalog::store_file_name(id, region.generation)
    }
}

/// A value on cache lines of its own (128 bytes: two lines, as adjacent-line prefetch pairs
/// them), so that atomic writes to it do not slow down loads of its neighbours.
#[repr(align(128))]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The engine: the state every stage shares and three stages built on it, each owning its
/// own state: the read path (gets, scans, endpoint reads, the registry of open read
/// points), maintenance (flushes, compactions, splits and merges, the global MemStore
/// budget) and the write pipeline (row locks, the commit path, the hooked-write clock).
/// Each stage uses only the stages before it in that list (`docs/ARCHITECTURE.md`).
pub struct Engine {
    pub(crate) shared: Arc<EngineShared>,
    pub(crate) reads: Arc<ReadPath>,
    pub(crate) upkeep: Arc<Maintenance>,
    pub(crate) writes: Arc<WritePipeline>,
    /// What the open recovered, repaired and set aside.
    recovery: RwLock<recovery::RecoveryReport>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("dir", &self.shared.config.dir)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens (or creates) the engine in `config.dir`, recovering from any crash
    /// (`server/recovery.rs`), then builds its stages and replays the WAL into them.
    pub fn open(config: Config) -> Result<Arc<Engine>> {
        let recovery::Recovered {
            shared,
            file_ids,
            report,
            records,
        } = recovery::recover(config)?;
        let reads = Arc::new(ReadPath::new(shared.clone()));
        let upkeep = Arc::new(Maintenance::new(shared.clone(), reads.clone(), file_ids));
        let writes = Arc::new(WritePipeline::new(
            shared.clone(),
            reads.clone(),
            upkeep.clone(),
        ));
        let engine = Arc::new(Engine {
            shared,
            reads,
            upkeep,
            writes,
            recovery: RwLock::new(report),
        });
        // After the stages exist: the WAL-restore and open hooks of tables with
        // coprocessors read through them.
        let replayed = match lifecycle::replay_wal(&engine.reads, records) {
            Ok(n) => n,
            Err(e) => {
                let report = engine.recovery.read();
                if !report.damage.is_empty() {
                    tracing::warn!(error = %e, "WAL recovery found damage, then replay failed: {report}");
                }
                return Err(e);
            }
        };
        if replayed > 0 {
            tracing::info!(cells = replayed, "replayed WAL edits not yet flushed");
        }
        if let Err(e) = takeover::settle_writers(&engine.shared) {
            tracing::warn!(error = %e, "could not record the regions' WAL writers after replay");
        }
        let offline = engine.offline_regions();
        if !offline.is_empty() {
            tracing::warn!(
                regions = offline.len(),
                "regions offline: store files missing or unreadable; run the offline repair"
            );
        }
        {
            let mut report = engine.recovery.write();
            report.cells_replayed = replayed;
            report.offline_regions = offline;
            // Logged once the replay is done: the figures are the report's own.
            if let Some(damage) = report.damage.first() {
                tracing::warn!(
                    mode = ?report.mode,
                    damaged = report.damage.len(),
                    first = %damage.segment.display(),
                    offset = damage.offset,
                    "WAL recovery found damage: {report}"
                );
            }
        }
        Ok(engine)
    }

    /// What the open found and did: WAL segments read, records replayed, damage cut,
    /// skipped or set aside.
    pub fn recovery_report(&self) -> recovery::RecoveryReport {
        self.recovery.read().clone()
    }

    /// The open table `name`.
    pub fn table(&self, name: &TableName) -> Result<Arc<TableState>> {
        self.shared.table(name)
    }

    /// The block cache.
    pub fn block_cache(&self) -> &Arc<BlockCache> {
        &self.shared.cache
    }

    /// Bytes held by every MemStore of the engine (active and being flushed).
    pub fn global_memstore_size(&self) -> u64 {
        self.upkeep.global_memstore_size()
    }

    /// Writes that waited for the global MemStore budget since the engine opened.
    pub fn memstore_blocked_writes(&self) -> u64 {
        self.upkeep.memstore_blocked_writes()
    }

    /// The engine's counters since it opened, and its MemStore and block cache state
    /// now: what a status page or a metrics scrape shows.
    pub fn stats(&self) -> EngineStats {
        let cache = &self.shared.cache;
        EngineStats {
            flushes: self.upkeep.flushes.load(Ordering::Relaxed),
            compactions: self.upkeep.compactions.load(Ordering::Relaxed),
            wal_syncs: self.shared.wal.syncs(),
            wal_bytes: self.shared.wal.bytes_written(),
            block_cache_hits: cache.hits(),
            block_cache_misses: cache.misses(),
            block_cache_bytes: cache.used_bytes(),
            block_cache_capacity: cache.capacity_bytes(),
            memstore_bytes: self.upkeep.global_memstore_size(),
            memstore_blocked_writes: self.upkeep.memstore_blocked_writes(),
        }
    }

    /// Flushes every MemStore, syncs the WAL and refuses further calls.
    pub async fn close(self: &Arc<Self>) -> Result<()> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        lifecycle::hooks_close_all(&self.reads, false).await;
        for t in shared.all_tables() {
            let regions: Vec<_> = t.regions.read().clone();
            for r in regions {
                self.upkeep.flush_region(&r).await?;
            }
        }
        lifecycle::hooks_close_all(&self.reads, true).await;
        shared.closed.store(true, Ordering::Release);
        // A running split or merge ends (or, seeing `closed`, gives up) first.
        drop(self.upkeep.region_ops.lock().await);
        // A running compaction finishes (or, seeing `closed`, gives up) before the directory
        // lock goes, so no other engine ever sees its files half-committed.
        self.upkeep.wait_for_compactions().await;
        let out = shared.wal.close();
        if let Some(own) = shared.ownership.get() {
            own.end().await;
        }
        // Dropping the file releases the directory lock, so the directory can be reopened.
        shared.dir_lock.lock().take();
        out
    }

    /// Takes the engine's lease and claims every region it serves in the coordination
    /// store ([`Config::coordination`]), and keeps the lease alive (see `ownership`). Fails
    /// with [`Error::RegionOwned`] when another live process owns one of them.
    pub(crate) async fn take_ownership(&self) -> Result<()> {
        let mut regions = Vec::new();
        for t in self.shared.all_tables() {
            let served = t.served_regions();
            regions.extend(ownership::records(&t.name, &served));
        }
        let tables: Vec<(TableName, Vec<u64>)> = regions
            .iter()
            .map(|r| (r.key.table.clone(), r.key.region))
            .fold(Vec::new(), |mut acc, (t, id)| {
                match acc.last_mut() {
                    Some((last, ids)) if *last == t => ids.push(id),
                    _ => acc.push((t, vec![id])),
                }
                acc
            });
        let own = ownership::Ownership::begin(&self.shared.config, regions).await?;
        own.start_renewal(Arc::downgrade(&self.shared));
        if let Err(own) = self.shared.ownership.set(own) {
            // Taken twice: keep the first, give this one's claims back.
            own.end().await;
            return Ok(());
        }
        for (table, ids) in &tables {
            self.shared.point_manifests(table, ids).await;
        }
        Ok(())
    }

    /// The engine's lease in the coordination store, once taken.
    pub fn lease(&self) -> Option<crate::coord::Lease> {
        self.shared.ownership.get().map(|o| o.lease().clone())
    }

    /// The generation at which the engine owns region `region` of `table`, if it owns it.
    pub fn region_generation(&self, table: &TableName, region: u64) -> Option<u64> {
        let key = crate::coord::RegionKey::new(table.clone(), region);
        self.shared.ownership.get()?.generation(&key)
    }
}

/// The engine's counters since it opened ([`Engine::stats`]); the MemStore figures are
/// the state now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Region flushes that wrote store files.
    pub flushes: u64,
    /// Store compactions committed (minor and major).
    pub compactions: u64,
    /// WAL fsyncs: group commits of durable writes, background syncs and segment rolls.
    pub wal_syncs: u64,
    /// Bytes of WAL records written to segment files.
    pub wal_bytes: u64,
    /// Block reads the block cache served.
    pub block_cache_hits: u64,
    /// Block reads that went to the file.
    pub block_cache_misses: u64,
    /// Bytes of decoded blocks the block cache holds now.
    pub block_cache_bytes: u64,
    /// The block cache's capacity in bytes.
    pub block_cache_capacity: u64,
    /// Bytes held by every MemStore now (active and being flushed).
    pub memstore_bytes: u64,
    /// Writes that waited for the global MemStore budget.
    pub memstore_blocked_writes: u64,
}

pub use crate::cell::now_ms;
