//! The engine: one process-wide host of regions, like an HBase region server with its master
//! folded in.
//!
//! Stages of `server`, bottom to top: `config`, `ownership`, `shared`, `validate`,
//! `plugins`, `read_points`, `read`, `endpoint`, `hooks`, `flush`, `compact`, `split`, `write`, `open`,
//! `admin`, `snapshots`, `backup`.
//!
//! Each stage uses only the stages before it in that list (`tests/architecture.rs` checks
//! it as it checks the crate's layers). At the bottom what the engine is given and shares:
//! its settings and plug-ins ([`config`]), its lease and region ownership in the
//! coordination store ([`ownership`]), and the state every stage shares ([`shared`]:
//! [`EngineShared`], [`TableState`]); the checks of operations against a table
//! ([`validate`]); uploaded plugins ([`plugins`]: sandboxed coprocessors stored by their
//! sha256). Then three stages, each a type owning its own state: the read path
//! ([`ReadPath`]: [`read_points`], [`read`], [`endpoint`]: gets, scans, region-local endpoint
//! reads, the registry of open read points); every call of a coprocessor hook ([`hooks`]:
//! reads, writes, scanners, region lifecycle, WAL replay, load); maintenance
//! ([`Maintenance`]: [`flush`], [`compact`], [`split`]: flushes and the global MemStore
//! budget, compactions and write throttling, splits and merges); and the write pipeline
//! ([`WritePipeline`], [`write`](mod@write): row locks, one pipeline for every write kind,
//! the hooked-write clock). Above them opening a data directory ([`open`]: recovery,
//! takeover of another engine's regions, integrity checks, offline repair) and schema
//! changes ([`admin`]), and on top table snapshots ([`snapshots`]: take, list, delete, clone,
//! restore) and backups of a running engine ([`backup`]). [`Engine`], here, owns one of
//! each stage.
//!
//! Invariant: a table's regions are sorted by start key and cover the whole key space
//! without gaps or overlaps.

pub(crate) mod admin;
pub(crate) mod backup;
pub(crate) mod compact;
pub(crate) mod config;
pub(crate) mod endpoint;
pub(crate) mod flush;
pub(crate) mod hooks;
pub(crate) mod open;
pub(crate) mod ownership;
pub(crate) mod plugins;
pub(crate) mod read;
pub(crate) mod read_points;
pub(crate) mod shared;
pub(crate) mod snapshots;
pub(crate) mod split;
pub(crate) mod validate;
pub(crate) mod write;

#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::schema::TableName;
use crate::storage::storefile::BlockCache;
use config::Config;
use flush::Maintenance;
use hooks::lifecycle;
use open::{recovery, takeover};
use parking_lot::RwLock;
use read::ReadPath;
use shared::EngineShared;
use shared::TableState;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use write::WritePipeline;

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
    /// The endpoint services served to remote callers ([`Engine::serve_endpoints`]).
    endpoints: RwLock<Option<Arc<dyn endpoint::EndpointHost>>>,
    /// Store files its garbage collections found deletable, with when.
    garbage: open::garbage::Candidates,
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
    /// (`server/open/recovery.rs`), then builds its stages and replays the WAL into them.
    pub fn open(config: Config) -> Result<Arc<Engine>> {
        let recovery::Recovered {
            shared,
            file_ids,
            report,
            records,
        } = recovery::recover(config)?;
        let reads = ReadPath::new(shared.clone());
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
            endpoints: RwLock::new(None),
            garbage: Default::default(),
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
        if let Err(e) = snapshots::drop_leftover_backup_snapshots(&engine) {
            tracing::warn!(error = %e, "could not remove the snapshots of interrupted backups");
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
        if out.is_ok() && shared.config.serve_regions.is_some() && !shared.objects.is_local() {
            // A region server's engine fences its own WAL once it wrote its last record:
            // the regions it closed cleanly name it no more, so nothing else would, and
            // without a fence its folder (and store files it left) would never be collected
            // (`open/garbage.rs`).
            let folder = crate::wal::writer_folder(shared.catalog.writer());
            if let Err(e) = crate::wal::fence(&*shared.objects, &folder) {
                tracing::warn!(%folder, error = %e, "could not fence the closed engine's WAL");
            }
        }
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
        self.shared.start_lease_renewal(own.clone());
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

    /// Until when the engine's lease surely lives: the sending time of its last successful
    /// renewal plus its time to live (`None` when it never expires: the engine's own
    /// coordination store). A server answers nothing past it (HBase's gap of a paused
    /// region server serving stale reads, closed by a local clock check).
    pub fn lease_valid_until(&self) -> Option<std::time::Instant> {
        self.shared.ownership.get().and_then(|o| o.valid_until())
    }

    /// Opens region `id` of `table` while the engine runs, as a region server does for an
    /// assignment (`server/open/runtime.rs`): after it returns the region serves here with
    /// every write an earlier owner acknowledged. Only an engine serving some regions of a
    /// shared object store opens regions so ([`Error::BadArgument`] otherwise);
    /// [`Error::RegionOwned`] when another live process owns the region. Opening a region
    /// served here does nothing.
    ///
    /// [`Error::BadArgument`]: crate::Error::BadArgument
    /// [`Error::RegionOwned`]: crate::Error::RegionOwned
    pub async fn open_region(self: &Arc<Self>, table: &TableName, id: u64) -> Result<()> {
        open::runtime::open_region(self, table, id).await
    }

    /// Closes region `id` of `table` while the engine runs: flushes it with its writes
    /// stopped, records that no WAL holds an edit of it (its next opener replays nothing)
    /// and gives it up; it then refuses reads and writes here
    /// ([`Error::RegionNotServed`](crate::Error::RegionNotServed)). Closing a region not
    /// served here does nothing.
    pub async fn close_region(self: &Arc<Self>, table: &TableName, id: u64) -> Result<()> {
        open::runtime::close_region(self, table, id).await
    }

    /// Re-reads the catalog of a shared object store, taking in the tables, regions and
    /// schemas other engines changed (`server/open/runtime.rs`). Nothing on a local
    /// directory.
    pub fn refresh_catalog(&self) -> Result<()> {
        open::runtime::refresh_catalog(self)
    }

    /// Makes the coordination store's list of `table`'s regions match the catalog's newest
    /// version (the list is read first, then the catalog): what a region server does when
    /// it is assigned a region the catalog no longer lists. A server that died between a
    /// split's (merge's, drop's) catalog update and the list's update left the list
    /// behind, and nothing would route to the new regions. The catalog's regions missing
    /// from the list are listed first, then the list's regions the catalog lacks are
    /// removed; a record another process wrote or removed the same way meanwhile counts as
    /// done. Returns how many records were written and removed (none without a
    /// coordination store).
    pub async fn sync_region_listing(&self, table: &TableName) -> Result<(usize, usize)> {
        open::runtime::sync_listing(self, table).await
    }

    /// The tables of the catalog's newest version whose regions the coordination store
    /// does not list as the catalog has them (none without a coordination store): for a
    /// moment while a create, split, merge, clone or restore updates both, and for good
    /// when its server died between the two. Nothing is assigned that would show a table
    /// created, cloned or restored that way, so a region server looks for them now and
    /// then and, when one stays unlisted, mends its list with
    /// [`Engine::sync_region_listing`].
    pub async fn unlisted_tables(&self) -> Result<Vec<open::runtime::UnlistedTable>> {
        open::runtime::unlisted_tables(self).await
    }

    /// Where the engine's WAL stands: its writer number on a shared store (0 on a local
    /// directory) and the id of its newest segment. A write acknowledged before the call is
    /// in that segment or an older one of that writer: what a region server reports with
    /// each acknowledgement, so that none can be shown to come from a fenced writer.
    pub fn wal_position(&self) -> (u64, u64) {
        (
            self.shared.catalog.writer(),
            self.shared.wal.current_segment(),
        )
    }

    /// Gives up, in the coordination store, the regions the engine still owns but no
    /// longer serves (a close whose release the store refused): for the one caller that
    /// opens and closes regions, between its opens and closes.
    pub async fn release_unserved(&self) {
        open::runtime::release_unserved(self).await
    }

    /// Serves `host`'s endpoint services to callers of
    /// [`Backend::call_endpoint`](crate::client::Backend::call_endpoint) (a region
    /// server's remote clients); replaces what was served before.
    pub fn serve_endpoints(&self, host: Arc<dyn endpoint::EndpointHost>) {
        *self.endpoints.write() = Some(host);
    }

    /// The endpoint services served here, if any.
    pub(crate) fn endpoint_host(&self) -> Option<Arc<dyn endpoint::EndpointHost>> {
        self.endpoints.read().clone()
    }

    /// Deletes what dead writers left on a shared store (fenced, named by no region of the
    /// catalog; see `server/open/garbage.rs`): their WAL segments (the fences stay) and
    /// the store files of their blocks of file ids that no region or snapshot lists, once
    /// this engine's collections found them so for [`GARBAGE_GRACE`](crate::GARBAGE_GRACE). What a region
    /// server runs now and then; nothing on a local directory.
    pub fn collect_garbage(&self) -> Result<open::garbage::GarbageCollection> {
        open::garbage::collect(self, open::garbage::GARBAGE_GRACE)
    }

    /// [`Engine::collect_garbage`] with a grace period of `grace` (zero: unlisted files
    /// go at once, which is safe only when no scan can still read them).
    pub fn collect_garbage_after(
        &self,
        grace: std::time::Duration,
    ) -> Result<open::garbage::GarbageCollection> {
        open::garbage::collect(self, grace)
    }

    /// The regions served here, by table.
    pub fn served_regions(&self) -> Vec<(TableName, u64)> {
        open::runtime::served_regions(self)
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
    /// WAL fsyncs: group commits of durable writes, background syncs and segment rolls (on
    /// an object store: the segment objects stored, each one durable group commit).
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
