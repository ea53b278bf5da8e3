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
//! family without min versions, a put past its TTL are not written; no read result changes.
//! A successful flush then checks the region's stores for a background minor compaction.
//!
//! Coprocessors: `pre_flush` runs per store with cells to flush before the snapshot is
//! taken, `post_flush` after the flush committed ([`super::lifecycle`]); neither can stop it.

use super::Engine;
use crate::catalog::FileEntry;
use crate::error::{Error, Result};
use crate::region::Region;
use crate::storage::compaction::{CompactionIter, CompactionKind, CompactionRules};
use crate::storage::memstore::MemStore;
use crate::storage::storefile::{StoreFileReader, StoreFileWriter};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Engine {
    /// Flushes one region's MemStores to store files.
    pub(crate) async fn flush_region(self: &Arc<Self>, region: &Arc<Region>) -> Result<()> {
        let _serial = region.flush_lock.lock().await;
        let stores = region.all_stores();
        // Flush hooks run for the stores with cells to flush (writes meanwhile may add one
        // whose MemStore was empty: it is flushed without them).
        let hooked: Vec<bytes::Bytes> = if self.region_hooks(region).is_some() {
            let fams: Vec<_> = stores
                .iter()
                .filter(|s| !s.state.read().active.is_empty())
                .map(|s| s.family.clone())
                .collect();
            self.hooks_flush(region, &fams, false).await;
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
            let s = self.mvcc.read_point();
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
        if !hooked.is_empty() {
            self.hooks_flush(region, &hooked, true).await;
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
            let _order = self.commit_lock.lock();
            self.wal.mark(self.mvcc.last_assigned())?
        };
        self.wal.sync_marker(marker).await?;
        let mut jobs = Vec::new();
        let smallest_read_point = self.smallest_read_point();
        let now = super::now_ms();
        for (store, snap) in snapshots {
            let d = store.descriptor();
            let rules = CompactionRules {
                kind: CompactionKind::Minor,
                family: store.rules(),
                smallest_read_point,
                now_ms: now,
            };
            let id = self.next_file_id.fetch_add(1, Ordering::Relaxed);
            jobs.push((
                store.clone(),
                snap.clone(),
                id,
                self.file_path(id),
                self.writer_options(&d),
                rules,
            ));
        }
        let cache = self.cache.clone();
        let fs = self.config.fs.clone();
        let written = tokio::task::spawn_blocking(move || -> Result<Vec<_>> {
            let mut out = Vec::new();
            for (store, snap, id, path, opts, rules) in jobs {
                let mut w = StoreFileWriter::create(&fs, &path, opts)?;
                if snap.may_drop_cells() || rules.family.ttl_ms.is_some() {
                    for cell in CompactionIter::new(snap.iter().map(Ok), rules) {
                        w.append(&cell?)?;
                    }
                } else {
                    // Nothing the rules could drop (puts only, one cell per column, no TTL):
                    // written as they are.
                    for cell in snap.iter() {
                        w.append(&cell)?;
                    }
                }
                let info = w.finish()?;
                // Every cell of the snapshot may be one the filter drops (a put and the
                // marker masking it): no file then, but the flush still counts.
                let reader = if info.entry_count == 0 {
                    fs.remove_file(&path)?;
                    None
                } else {
                    Some(StoreFileReader::open(&fs, &path, id, Some(cache.clone()))?)
                };
                out.push((store, id, info, reader));
            }
            Ok(out)
        })
        .await
        .map_err(|e| Error::Io(std::io::Error::other(format!("flush task failed: {e}"))))??;

        let table = region.table.to_string();
        let next_id = self.next_file_id.load(Ordering::Relaxed);
        self.catalog.update(|s| {
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
            for (store, id, info, _) in written.iter().filter(|w| w.3.is_some()) {
                r.files.entry(store.family.clone()).or_default().insert(
                    0,
                    FileEntry {
                        id: *id,
                        max_seq: info.max_seq,
                        size: info.file_size,
                        entries: info.entry_count,
                    },
                );
            }
            Ok(())
        })?;
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
        let mut boundary = self.mvcc.read_point().saturating_add(1);
        for t in self.tables.read().values() {
            for r in t.regions.read().iter() {
                // Acquire pairs with the flush's Release store: a cleared `oldest_unflushed`
                // implies its value is already visible in `snapshot_oldest`.
                boundary = boundary.min(r.oldest_unflushed.load(Ordering::Acquire));
                boundary = boundary.min(r.snapshot_oldest.load(Ordering::Relaxed));
            }
        }
        if let Err(e) = self.wal.purge_up_to(boundary.saturating_sub(1)) {
            tracing::warn!(error = %e, "WAL purge failed; segments are kept");
        }
    }

    /// Flushes the region holding the oldest unflushed edit when the WAL has too many
    /// segments, so that a region that stopped taking writes cannot pin the log forever.
    pub(crate) fn flush_if_wal_too_long(self: &Arc<Self>) {
        if self.wal.segments().len() <= self.config.max_wal_segments {
            return;
        }
        let oldest = self
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
