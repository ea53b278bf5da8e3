//! [`Maintenance`], the engine's stage of background work: flushes here, compactions
//! ([`super::compact`]), splits and merges ([`super::split`]) and the global MemStore budget
//! (here). It owns their state: file ids, the budget's counters, the lock that serializes
//! region splits and merges, the running compactions.
//!
//! Flush: a region's MemStores become store files, and WAL segments nobody needs go away.
//!
//! Protocol: under the region's update lock (exclusive) take the read point `S` and move every
//! non-empty active MemStore to its snapshot slot; write each snapshot to a new store file
//! (fsynced, renamed into place); record the files and `flushed_seq = S` in the catalog in one
//! atomic update; then swap the files in and drop the snapshots. A crash before the catalog
//! update leaves orphan files (deleted at open) and the WAL replays the data; a crash after it
//! replays only writes above `S`. Cells above `S` that were also flushed are replayed as exact
//! duplicates, which reads deduplicate.
//!
//! Before it writes any file, a flush fsyncs the WAL: a flush makes its writes durable, and
//! every write acknowledged before them must be durable too (a machine crash then keeps a
//! prefix of the acknowledged writes, never a later write without an earlier one).
//!
//! A flush writes the snapshot through the minor-compaction filter
//! ([`crate::storage::compaction`]), as HBase's flush does: a put masked by a marker in the
//! same snapshot (without keep-deleted-cells), an older write of the same version and, in a
//! family without min versions, a put past its TTL are not written; no read result changes
//! but a raw read's, which no longer shows the masked put (HBase's flush drops it too).
//! A successful flush then checks the region's stores for a background minor compaction.
//!
//! The global MemStore budget: all MemStores of the engine together stay near
//! [`Config::global_memstore_size`](super::Config::global_memstore_size).
//! Each region flushes by itself at its flush size, but many regions each below it can still
//! hold more than the process can afford. As HBase's `MemStoreFlusher` does, a write that
//! finds the total over the budget forces flushes of the largest MemStores (until the total
//! would be under the lower limit) and waits until the total is back under the budget.
//! The total is never tracked, only summed from the regions (a flush, a failed flush that
//! puts cells back, WAL replay and a dropped table all change it, and a derived sum cannot
//! drift); summing costs one pass over the regions, so a write sums only after about a
//! sixteenth of the budget has been written since the last sum, or while the budget is known
//! to be exceeded (then every writer waits and sums until it is not). Hence the total may
//! pass the budget by that step plus the writes in flight when the flag is set. A writer
//! waits at most [`Config::memstore_wait_ms`](super::Config::memstore_wait_ms): if flushes
//! keep failing (a full disk) the write fails with [`Error::Busy`] before it touches the WAL,
//! instead of hanging; closing the engine ends every wait.
//!
//! Coprocessors: `pre_flush` runs per store with cells to flush before the snapshot is
//! taken, `post_flush` after the flush committed ([`super::lifecycle`]); neither can stop it.

use crate::catalog::FileEntry;
use crate::cell::now_ms;
use crate::error::{Error, Result};
use crate::region::Region;
use crate::schema::TableName;
use crate::server::hooks::lifecycle;
use crate::server::read::ReadPath;
use crate::server::shared::EngineShared;
use crate::storage::compaction::{CompactionIter, CompactionKind, CompactionRules};
use crate::storage::memstore::MemStore;
use crate::storage::storefile::{StoreFileReader, StoreFileWriter};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The engine's background work and the state it owns (see the module doc).
pub(crate) struct Maintenance {
    pub(crate) shared: Arc<EngineShared>,
    pub(crate) reads: Arc<ReadPath>,
    /// The store file ids this engine may still hand out (its block, see
    /// `Catalog::reserve_file_ids`).
    file_ids: parking_lot::Mutex<std::ops::Range<u64>>,
    /// MemStore bytes written since the global budget was last checked.
    memstore_unchecked: AtomicU64,
    /// Set while the MemStores are known to be over the global budget: every writer waits.
    memstore_over: AtomicBool,
    /// Writes that had to wait for the global MemStore budget.
    memstore_blocked_writes: AtomicU64,
    /// Serializes region splits and merges engine-wide.
    pub(crate) region_ops: Arc<tokio::sync::Mutex<()>>,
    /// Region flushes that wrote store files, since open.
    pub(crate) flushes: AtomicU64,
    /// Store compactions committed, since open.
    pub(crate) compactions: AtomicU64,
}

impl Maintenance {
    /// The stage over `shared` and `reads`, handing out store file ids from `file_ids`.
    pub(crate) fn new(
        shared: Arc<EngineShared>,
        reads: Arc<ReadPath>,
        file_ids: std::ops::Range<u64>,
    ) -> Self {
        Maintenance {
            shared,
            reads,
            file_ids: parking_lot::Mutex::new(file_ids),
            memstore_unchecked: AtomicU64::new(0),
            memstore_over: AtomicBool::new(false),
            memstore_blocked_writes: AtomicU64::new(0),
            region_ops: Arc::new(tokio::sync::Mutex::new(())),
            flushes: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
        }
    }
    /// A store file id of this engine's: the next of its block, the next block reserved
    /// first when this one is used up.
    pub(crate) fn take_file_id(&self) -> Result<u64> {
        let mut ids = self.file_ids.lock();
        if ids.start >= ids.end {
            *ids = self.shared.catalog.reserve_file_ids(ids.end)?;
        }
        let id = ids.start;
        ids.start += 1;
        Ok(id)
    }

    /// The next store file id this engine would hand out.
    pub(crate) fn file_ids_in_use(&self) -> u64 {
        self.file_ids.lock().start
    }

    /// Flushes every region of a table.
    pub(crate) async fn flush_table(self: &Arc<Self>, name: &TableName) -> Result<()> {
        let t = self.shared.table(name)?;
        // No split or merge meanwhile: each region listed now is flushed, none retired.
        let _ops = self.region_ops.lock().await;
        let regions: Vec<_> = t.regions.read().clone();
        for r in regions {
            self.flush_region(&r).await?;
        }
        Ok(())
    }

    /// Flushes one region's MemStores to store files.
    pub(crate) async fn flush_region(self: &Arc<Self>, region: &Arc<Region>) -> Result<()> {
        let _serial = region.flush_lock.lock().await;
        let stores = region.all_stores();
        // Flush hooks run for the stores with cells to flush (writes meanwhile may add one
        // whose MemStore was empty: it is flushed without them).
        let hooked: Vec<bytes::Bytes> = if lifecycle::region_hooks(&self.shared, region).is_some() {
            let fams: Vec<_> = stores
                .iter()
                .filter(|s| !s.state.read().active.is_empty())
                .map(|s| s.family.clone())
                .collect();
            lifecycle::hooks_flush(&self.reads, region, &fams, false).await;
            fams
        } else {
            Vec::new()
        };
        // The next MemStores, built before the locks (a row filter planned for twice the
        // rows of the one it replaces is zeroed on allocation).
        let fresh: Vec<Arc<MemStore>> = stores
            .iter()
            .map(|s| {
                let rows = s.state.read().active.row_count().saturating_mul(2);
                Arc::new(MemStore::for_rows(rows))
            })
            .collect();
        let (read_point, snapshots) = {
            let _w = region.update_lock.write();
            let s = self.shared.mvcc.read_point();
            let mut snaps = Vec::new();
            for (store, next) in stores.iter().zip(fresh) {
                let mut st = store.state.write();
                if st.active.is_empty() {
                    continue;
                }
                let old = std::mem::replace(&mut st.active, next);
                st.snapshot = Some(old.clone());
                snaps.push((store.clone(), old));
            }
            // Publish the snapshot's oldest edit before clearing `oldest_unflushed`, so a
            // concurrent `purge_wal` never sees both at MAX and deletes segments whose edits
            // are only in the snapshot. Inserts hold the update lock shared, so nothing
            // changes `oldest_unflushed` between the load and the store.
            let oldest = region.oldest_unflushed.load(Ordering::Relaxed);
            region.snapshot_oldest.fetch_min(oldest, Ordering::Relaxed);
            region.oldest_unflushed.store(u64::MAX, Ordering::Release);
            (s, snaps)
        };
        if snapshots.is_empty() {
            return Ok(());
        }
        let result = self.write_snapshots(region, read_point, &snapshots).await;
        if let Err(e) = &result {
            tracing::error!(region = %region.name(), error = %e, "flush failed; data stays in MemStore and WAL");
            // Put the cells back so the next flush retries them.
            let _w = region.update_lock.write();
            for (store, snap) in &snapshots {
                let mut st = store.state.write();
                for cell in snap.iter() {
                    region
                        .oldest_unflushed
                        .fetch_min(cell.key.seq, Ordering::Relaxed);
                    st.active.insert(cell);
                }
                st.snapshot = None;
            }
            region.snapshot_oldest.store(u64::MAX, Ordering::Relaxed);
        }
        result?;
        self.flushes.fetch_add(1, Ordering::Relaxed);
        if !hooked.is_empty() {
            lifecycle::hooks_flush(&self.reads, region, &hooked, true).await;
        }
        self.purge_wal();
        self.maybe_compact(region);
        self.maybe_split(region);
        Ok(())
    }

    async fn write_snapshots(
        self: &Arc<Self>,
        region: &Arc<Region>,
        read_point: u64,
        snapshots: &[(Arc<crate::region::Store>, Arc<MemStore>)],
    ) -> Result<()> {
        // The WAL first: once the catalog lists the new files, the writes in them survive a
        // machine crash, and so must every write before them (in any region), or recovery
        // could keep a later write and lose an earlier one.
        // A marker with the largest seq handed out goes first: if a later crash or damage
        // cuts the WAL before it, recovery sees that these files may hold newer writes
        // (skipped-WAL ones included) than the cut.
        let marker = {
            let _order = self.shared.commit_lock.lock();
            self.shared.wal.mark(self.shared.mvcc.last_assigned())?
        };
        self.shared.wal.sync_marker(marker).await?;
        let mut jobs = Vec::new();
        let smallest_read_point = self.reads.smallest_read_point();
        let now = now_ms();
        for (store, snap) in snapshots {
            let d = store.descriptor();
            let rules = CompactionRules {
                kind: CompactionKind::Minor,
                family: store.rules(),
                smallest_read_point,
                now_ms: now,
            };
            let id = self.take_file_id()?;
            jobs.push((
                store.clone(),
                snap.clone(),
                id,
                self.shared.file_name(id, region),
                self.shared.writer_options(&d),
                rules,
            ));
        }
        let cache = self.shared.cache.clone();
        let objects = self.shared.objects.clone();
        let written = tokio::task::spawn_blocking(move || -> Result<Vec<_>> {
            let mut out = Vec::new();
            for (store, snap, id, path, opts, rules) in jobs {
                let mut w = StoreFileWriter::create(&objects, &path, opts)?;
                if snap.may_drop_cells() || rules.family.ttl_ms.is_some() {
                    for cell in CompactionIter::new(snap.iter().map(Ok), rules) {
                        w.append(&cell?)?;
                    }
                } else {
                    // Nothing the rules could drop (puts only, one cell per column, no TTL):
                    // written as they are.
                    snap.for_each_ref(|cell| w.append_ref(&cell))?;
                }
                let info = w.finish()?;
                // Every cell of the snapshot may be one the filter drops (a put and the
                // marker masking it): no file then, but the flush still counts.
                let reader = if info.entry_count == 0 {
                    objects.delete(&path)?;
                    None
                } else {
                    Some(StoreFileReader::open(
                        &objects,
                        &path,
                        id,
                        Some(cache.clone()),
                    )?)
                };
                out.push((store, id, info, reader));
            }
            Ok(out)
        })
        .await
        .map_err(|e| Error::Io(std::io::Error::other(format!("flush task failed: {e}"))))??;

        let table = region.table.to_string();
        let next_id = self.file_ids_in_use();
        let writer = self.shared.catalog.writer();
        self.shared.catalog.update(|s| {
            s.next_file_id = s.next_file_id.max(next_id);
            let t = s
                .tables
                .get_mut(&table)
                .ok_or_else(|| Error::TableNotFound(table.clone()))?;
            let r = t
                .regions
                .iter_mut()
                .find(|r| r.id == region.id)
                .ok_or_else(|| Error::bad_argument("region vanished during flush"))?;
            r.flushed_seq = r.flushed_seq.max(read_point);
            if writer > 0 {
                // Every edit at or below the flushed seq is in store files now, replayed
                // ones of earlier writers included: only this engine's WAL holds later ones.
                r.writers = vec![writer];
            }
            for (store, id, info, _) in written.iter().filter(|w| w.3.is_some()) {
                r.files.entry(store.family.clone()).or_default().insert(
                    0,
                    FileEntry {
                        id: *id,
                        max_seq: info.max_seq,
                        size: info.file_size,
                        entries: info.entry_count,
                        generation: region.generation,
                    },
                );
            }
            Ok(())
        })?;
        self.shared
            .point_manifests(&region.table, &[region.id])
            .await;
        for (store, _, _, reader) in written {
            let mut st = store.state.write();
            if let Some(reader) = reader {
                st.files.insert(0, reader);
            }
            st.snapshot = None;
        }
        region.flushed_seq.fetch_max(read_point, Ordering::Relaxed);
        region.snapshot_oldest.store(u64::MAX, Ordering::Relaxed);
        Ok(())
    }

    /// Deletes WAL segments whose every edit is in store files.
    pub(crate) fn purge_wal(&self) {
        let mut boundary = self.shared.mvcc.read_point().saturating_add(1);
        for t in self.shared.tables.read().values() {
            for r in t.regions.read().iter() {
                // Acquire pairs with the flush's Release store: a cleared `oldest_unflushed`
                // implies its value is already visible in `snapshot_oldest`.
                boundary = boundary.min(r.oldest_unflushed.load(Ordering::Acquire));
                boundary = boundary.min(r.snapshot_oldest.load(Ordering::Relaxed));
            }
        }
        if let Err(e) = self.shared.wal.purge_up_to(boundary.saturating_sub(1)) {
            tracing::warn!(error = %e, "WAL purge failed; segments are kept");
        }
    }

    /// Flushes the region holding the oldest unflushed edit when the WAL has too many
    /// segments, so that a region that stopped taking writes cannot pin the log forever.
    pub(crate) fn flush_if_wal_too_long(self: &Arc<Self>) {
        let config = &self.shared.config;
        if !self
            .shared
            .wal
            .longer_than(config.max_wal_segments, config.wal_segment_size)
        {
            return;
        }
        let oldest = self
            .shared
            .tables
            .read()
            .values()
            .flat_map(|t| t.regions.read().clone())
            .min_by_key(|r| r.oldest_unflushed.load(Ordering::Relaxed));
        if let Some(region) = oldest {
            self.maybe_flush(&region, 0);
        }
    }

    /// Flushes `region` in the background when its MemStores passed the flush size, unless
    /// a background flush of it is already queued or running (many writers cross the flush
    /// size at once; each starting a flush would write a trail of tiny files).
    pub(crate) fn maybe_flush(self: &Arc<Self>, region: &Arc<Region>, flush_size: u64) {
        if (region.memstore_size() as u64) < flush_size
            || region.flush_requested.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let engine = self.clone();
        let region = region.clone();
        tokio::spawn(async move {
            let result = engine.flush_region(&region).await;
            region.flush_requested.store(false, Ordering::Release);
            if let Err(e) = result {
                tracing::error!(region = %region.name(), error = %e, "background flush failed");
            }
        });
    }
}

/// How often a waiting writer looks at the total again.
const WAIT_STEP: Duration = Duration::from_millis(5);

impl Maintenance {
    /// Bytes held by every MemStore of the engine (active and being flushed).
    pub(crate) fn global_memstore_size(&self) -> u64 {
        self.shared
            .tables
            .read()
            .values()
            .flat_map(|t| t.regions.read().clone())
            .map(|r| r.memstore_size() as u64)
            .sum()
    }

    /// Writes that waited for the global MemStore budget since the engine opened.
    pub(crate) fn memstore_blocked_writes(&self) -> u64 {
        self.memstore_blocked_writes.load(Ordering::Relaxed)
    }

    /// Called by a write about to add `incoming` bytes to MemStores: when the total is over
    /// the budget, forces flushes of the largest MemStores and waits until it is under, or
    /// fails with [`Error::Busy`] after `memstore_wait_ms`.
    pub(crate) async fn reserve_memstore(self: &Arc<Self>, incoming: u64) -> Result<()> {
        let budget = self.shared.config.global_memstore_size.max(1);
        let step = (budget / 16).max(1);
        let unchecked = self
            .memstore_unchecked
            .fetch_add(incoming, Ordering::Relaxed)
            .saturating_add(incoming);
        if unchecked < step && !self.memstore_over.load(Ordering::Acquire) {
            return Ok(());
        }
        self.memstore_unchecked.store(0, Ordering::Relaxed);
        let mut waited = false;
        let deadline = Instant::now() + Duration::from_millis(self.shared.config.memstore_wait_ms);
        loop {
            let total = self.global_memstore_size();
            if total < budget {
                self.memstore_over.store(false, Ordering::Release);
                return Ok(());
            }
            self.shared.check_open()?;
            if Instant::now() >= deadline {
                return Err(Error::Busy(format!(
                    "MemStores hold {total} bytes, over the global budget of {budget}, after \
                     waiting {} ms for flushes",
                    self.shared.config.memstore_wait_ms
                )));
            }
            // Every writer now waits here, not only the one that summed.
            self.memstore_over.store(true, Ordering::Release);
            if !waited {
                waited = true;
                self.memstore_blocked_writes.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(total, budget, "global MemStore budget reached; writes wait");
            }
            let lower = (budget as f64 * self.shared.config.global_memstore_lower_limit) as u64;
            self.flush_largest(total.saturating_sub(lower));
            tokio::time::sleep(WAIT_STEP).await;
        }
    }

    /// Starts flushes of the regions with the largest MemStores (those not flushing already)
    /// until they hold at least `bytes`.
    fn flush_largest(self: &Arc<Self>, bytes: u64) {
        let mut regions: Vec<_> = self
            .shared
            .tables
            .read()
            .values()
            .flat_map(|t| t.regions.read().clone())
            .map(|r| (r.memstore_size() as u64, r))
            .filter(|(size, _)| *size > 0)
            .collect();
        regions.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
        let mut freed = 0u64;
        for (size, region) in regions {
            if freed >= bytes {
                break;
            }
            // A region already flushing counts: its snapshot is about to be freed.
            freed = freed.saturating_add(size);
            self.maybe_flush(&region, 0);
        }
    }
}
