//! Region split and merge: one region becomes two daughters at a row, or two adjacent
//! regions become one.
//!
//! Split protocol (one structural change at a time, under the engine's `region_ops` lock,
//! which table flushes and compactions (`Admin::flush`, `compact`, `major_compact` and their
//! region variants) also hold, so none of them skips a region retired under it):
//!
//! 1. If the parent still holds references (it is itself a daughter not yet compacted),
//!    compact them away first: a reference is never split again.
//! 2. Take every store's compaction lock, then the parent's `write_gate` exclusively: no
//!    compaction changes its files and no commit writes into it from here on (commits that
//!    already hold the gate finish their MemStore inserts first).
//! 3. Flush the parent, then hold its flush lock: its MemStores are empty, so its store
//!    files hold every write it took, and its `flushed_seq` covers them.
//! 4. Choose the split row (given, or the first row of the middle block of the largest
//!    file of the largest store; none when that row is the file's first or last row). Under
//!    a split restriction a given row must be a group boundary, and a computed one is cut
//!    to its group (`guard.rs`).
//! 5. One atomic catalog update replaces the parent's entry by two daughters
//!    `[start, row)` and `[row, end)` with fresh ids, the parent's `flushed_seq`, and, per
//!    family, the parent's files whose key range overlaps the daughter. A file that reaches
//!    outside a daughter is a *reference*: the daughter reads only its own rows of it.
//! 6. The daughters (sharing the parent's open file readers) replace the parent in the
//!    table's region list; the parent is marked retired; the locks go. Commits that waited
//!    on the gate see the parent retired and re-locate their rows.
//! 7. In the background, every daughter store holding references is compacted (a minor
//!    compaction of all its files, clipped to the daughter's range), which drops them.
//!
//! Merge protocol: the same with two adjacent regions (gates and compaction locks taken in
//! region-id order, as commits take gates): both are compacted free of references, flushed,
//! and one catalog update replaces both entries by one region `[a.start, b.end)` with a fresh
//! id, the larger `flushed_seq` and the union of their files; then the merged region
//! replaces both in memory. Because neither holds references, every file of each lies
//! inside its own range, so the merged region holds no reference either.
//!
//! Crash safety: a crash before the catalog update leaves the parent (or both merge inputs)
//! with all their data in store files; a crash after it leaves the daughters (or the merged
//! region). WAL records that name a region the catalog no longer lists are skipped at
//! recovery ([`super::recovery`]): a retired region took no write after its last flush, so
//! every such record is already in the files its successors list. Writes after the change
//! name the successors. No row is lost or doubled.
//!
//! File deletion: daughters share their parent's files. A compaction deletes an input file
//! only when no region of the table lists it any more (the catalog is the source of truth),
//! and then only when the last reader holding it (a scan of a retired region included)
//! drops it ([`crate::storage::storefile::StoreFileReader::mark_compacted_away`]).
//!
//! Salted tables: no split or merge makes a region span two salt buckets. Regions start at
//! the bucket boundaries, a split row lies strictly inside its region, and a merge of two
//! regions of different buckets is refused ([`crate::schema::salt`]).
//!
//! Automatic splits: after each flush and compaction, a region without references whose
//! largest store's files pass the [`SplitPolicy`] threshold splits itself in the background
//! at the computed row (when there is one), once it gets `region_ops` (the policy is checked
//! again then).
//!
//! Coprocessors: once the split row is known, under the locks, `pre_split` may veto the
//! split (the region stays whole, `None` is returned); the parent's close hooks, the
//! successors' `post_open` and `post_split` follow ([`super::lifecycle`] gives the order).
//!
//! Reads need nothing here: they take their read point before they locate regions, and a
//! retired region keeps answering exactly at any read point taken before it was retired
//! ([`crate::region`]). A family added, changed or removed during a split or merge reaches
//! the new regions because the table's region list stays write-locked from the catalog
//! update to the swap.

use crate::catalog::RegionEntry;
use crate::error::{Error, Result};
use crate::ops::validate_row;
use crate::region::{Region, Store};
use crate::schema::TableName;
use crate::server::flush::Maintenance;
use crate::server::hooks::lifecycle;
use crate::server::shared::TableState;
use crate::storage::compaction::CompactionKind;
use crate::storage::storefile::StoreFileReader;
use bytes::Bytes;
use std::collections::BTreeMap;

mod daughters;
mod guard;
mod local;
use crate::schema::split::choose_split_row;
use daughters::{daughter, entry_files};
use local::{local_store, with_local, Target};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The computed split row of a region (from the largest file of its largest store), with
/// the first and last rows of that file.
fn split_point_in_file(region: &Region) -> Option<(Bytes, (Bytes, Bytes))> {
    let store = region.user_stores().into_iter().max_by_key(|s| {
        s.state
            .read()
            .files
            .iter()
            .map(|f| f.info().file_size)
            .sum::<u64>()
    })?;
    let file = store
        .state
        .read()
        .files
        .iter()
        .max_by_key(|f| f.info().file_size)
        .cloned()?;
    let info = file.info();
    let middle = file.middle_key()?;
    let first = info.first_key.as_ref()?;
    let last = info.last_key.as_ref()?;
    let row = choose_split_row(
        &middle.row,
        &first.row,
        &last.row,
        &region.start,
        &region.end,
    )?;
    Some((row, (first.row.clone(), last.row.clone())))
}

impl Maintenance {
    /// Splits region `region_id` of table `name` at `split_row` (a row strictly inside the
    /// region), or at its computed split point when `None`. Returns the daughters' ids, or
    /// `None` when no split point was found (a computed one only).
    pub(crate) async fn split_region(
        self: &Arc<Self>,
        name: &TableName,
        region_id: u64,
        split_row: Option<&[u8]>,
    ) -> Result<Option<(u64, u64)>> {
        let t = self.shared.table(name)?;
        t.check_enabled()?;
        if let Some(row) = split_row {
            validate_row(row)?;
        }
        let _ops = self.region_ops.lock().await;
        let parent = t.region(region_id)?;
        parent.check_online()?;
        self.split_locked(&t, &parent, split_row.map(Bytes::copy_from_slice))
            .await
    }

    /// Steps 1-7 of the split protocol; the caller holds `region_ops`.
    async fn split_locked(
        self: &Arc<Self>,
        t: &Arc<TableState>,
        parent: &Arc<Region>,
        split_row: Option<Bytes>,
    ) -> Result<Option<(u64, u64)>> {
        if let Some(row) = &split_row {
            guard::check_given(t, parent, row)?;
        }
        self.compact_references(parent).await?;
        let stores = parent.all_stores();
        let mut compaction_locks = Vec::with_capacity(stores.len());
        for s in &stores {
            compaction_locks.push(s.compaction_lock.clone().lock_owned().await);
        }
        if parent.is_retired() || parent.has_references() {
            return Err(Error::bad_argument(format!(
                "region {} changed while preparing its split",
                parent.name()
            )));
        }
        let gate = parent.write_gate.clone().write_owned().await;
        self.flush_region(parent).await?;
        let flush_guard = parent.flush_lock.lock().await;
        if parent.memstore_size() != 0 {
            return Err(Error::bad_argument("region took writes during its split"));
        }
        let given = split_row.is_some();
        let row = match split_row {
            Some(r) => r,
            None => match guard::restricted_split_point(t, parent) {
                Some(r) => r,
                None => return Ok(None),
            },
        };
        guard::check_buckets(t, &parent.start, &row, &parent.end)?;
        if parent.store(crate::keys::local::LOCAL_FAMILY).is_some() {
            match local::check_split_row(&parent.start, &row, &parent.end) {
                Ok(()) => {}
                Err(e) if given => return Err(e),
                Err(_) => return Ok(None),
            }
        }
        let hooks = t.hooks();
        if let Some(h) = &hooks {
            if !lifecycle::hooks_pre_split(&self.reads, t, h, parent, &row).await? {
                tracing::info!(region = %parent.name(), "a coprocessor vetoed the split");
                return Ok(None);
            }
        }
        let readers: BTreeMap<u64, Arc<StoreFileReader>> = stores
            .iter()
            .flat_map(|s| s.state.read().files.clone())
            .map(|f| (f.file_id(), f))
            .collect();
        let halves = vec![
            Target {
                start: parent.start.clone(),
                end: row.clone(),
            },
            Target {
                start: row.clone(),
                end: parent.end.clone(),
            },
        ];
        let local_files = local::rewrite(self, std::slice::from_ref(parent), halves).await?;
        let local_of = |k: usize| local_files.as_ref().map(|f| f.get(k).cloned().flatten());
        let next_file_id = self.file_ids_in_use();
        self.shared.check_open()?;
        let key = t.name.to_string();
        let parent_id = parent.id;
        // The table's region list stays locked from the catalog update to the swap, so a
        // family added, changed or removed meanwhile (catalog first, then every listed
        // region) reaches the parent before it is copied or the daughters after.
        let (lo_id, hi_id, lo, hi) = {
            let mut regions = t.regions.write();
            let (lo_id, hi_id) = self.shared.catalog.update(|s| {
                let lo_id = s.next_region_id;
                let hi_id = lo_id + 1;
                s.next_region_id += 2;
                s.next_file_id = s.next_file_id.max(next_file_id);
                let entry = s.table_mut(&key)?;
                let pos = entry
                    .regions
                    .iter()
                    .position(|r| r.id == parent_id)
                    .ok_or_else(|| Error::bad_argument("region vanished during its split"))?;
                let p = entry.regions[pos].clone();
                let lo = RegionEntry {
                    id: lo_id,
                    start: p.start.clone(),
                    end: row.clone(),
                    flushed_seq: p.flushed_seq,
                    files: with_local(entry_files(&p, &readers, &p.start, &row), local_of(0)),
                    generation: p.generation,
                    writers: p.writers.clone(),
                };
                let hi = RegionEntry {
                    id: hi_id,
                    start: row.clone(),
                    end: p.end.clone(),
                    flushed_seq: p.flushed_seq,
                    files: with_local(entry_files(&p, &readers, &row, &p.end), local_of(1)),
                    generation: p.generation,
                    writers: p.writers.clone(),
                };
                entry.regions.splice(pos..=pos, [lo, hi]);
                Ok((lo_id, hi_id))
            })?;
            let lo = daughter(parent, lo_id, parent.start.clone(), row.clone());
            let hi = daughter(parent, hi_id, row.clone(), parent.end.clone());
            let lo = Arc::new(local_store(lo, local_of(0)));
            let hi = Arc::new(local_store(hi, local_of(1)));
            if let Some(pos) = regions.iter().position(|r| Arc::ptr_eq(r, parent)) {
                regions.splice(pos..=pos, [lo.clone(), hi.clone()]);
            }
            parent.retired.store(true, Ordering::Release);
            drop(regions);
            (lo_id, hi_id, lo, hi)
        };
        if local_files.is_some() {
            local::retire_inputs(std::slice::from_ref(parent), &self.shared.catalog);
        }
        drop(flush_guard);
        drop(gate);
        drop(compaction_locks);
        tracing::info!(parent = %parent.name(), row = %String::from_utf8_lossy(&row),
            lower = lo_id, upper = hi_id, "split region");
        if let Some(h) = &hooks {
            lifecycle::hooks_post_split(&self.reads, t, h, parent, [&lo, &hi]).await;
        }
        for d in [lo, hi] {
            self.spawn_reference_compaction(d);
        }
        self.shared
            .hand_over(&t.name, &[parent_id], &[lo_id, hi_id])
            .await?;
        Ok(Some((lo_id, hi_id)))
    }

    /// Merges two adjacent regions of table `name` into one; returns the new region's id.
    pub(crate) async fn merge_regions(
        self: &Arc<Self>,
        name: &TableName,
        region_a: u64,
        region_b: u64,
    ) -> Result<u64> {
        let t = self.shared.table(name)?;
        t.check_enabled()?;
        if region_a == region_b {
            return Err(Error::bad_argument("cannot merge a region with itself"));
        }
        let _ops = self.region_ops.lock().await;
        let a = t.region(region_a)?;
        let b = t.region(region_b)?;
        a.check_online()?;
        b.check_online()?;
        let (first, second) = if a.end == b.start && !a.end.is_empty() {
            (a, b)
        } else if b.end == a.start && !b.end.is_empty() {
            (b, a)
        } else {
            return Err(Error::bad_argument(format!(
                "regions {region_a} and {region_b} of {name} are not adjacent"
            )));
        };
        if let Some(salt) = &t.descriptor.read().salt {
            if !salt.within_one_bucket(&first.start, &second.end) {
                return Err(Error::bad_argument(format!(
                    "regions {region_a} and {region_b} of salted table {name} lie in different \
                     salt buckets; a region never spans two buckets"
                )));
            }
        }
        self.compact_references(&first).await?;
        self.compact_references(&second).await?;
        // Locks in region-id order, as commits take gates.
        let mut by_id = [first.clone(), second.clone()];
        by_id.sort_by_key(|r| r.id);
        let mut compaction_locks = Vec::new();
        for r in &by_id {
            for s in r.all_stores() {
                compaction_locks.push(s.compaction_lock.clone().lock_owned().await);
            }
        }
        if by_id.iter().any(|r| r.is_retired() || r.has_references()) {
            return Err(Error::bad_argument(
                "regions changed while preparing their merge",
            ));
        }
        let mut gates = Vec::new();
        for r in &by_id {
            gates.push(r.write_gate.clone().write_owned().await);
        }
        for r in &by_id {
            self.flush_region(r).await?;
        }
        let mut flush_guards = Vec::new();
        for r in &by_id {
            flush_guards.push(r.flush_lock.lock().await);
        }
        if by_id.iter().any(|r| r.memstore_size() != 0) {
            return Err(Error::bad_argument(
                "regions took writes during their merge",
            ));
        }
        let hooks = t.hooks();
        if let Some(h) = &hooks {
            lifecycle::hooks_close(&self.reads, &t, h, &[first.clone(), second.clone()], false)
                .await;
        }
        let whole = vec![Target {
            start: first.start.clone(),
            end: second.end.clone(),
        }];
        let local_files = local::rewrite(self, &[first.clone(), second.clone()], whole).await?;
        let local_file = local_files.as_ref().map(|f| f.first().cloned().flatten());
        let next_file_id = self.file_ids_in_use();
        self.shared.check_open()?;
        let key = t.name.to_string();
        let (first_id, second_id) = (first.id, second.id);
        // Locked from the catalog update to the swap, as in a split.
        let merged = {
            let mut regions = t.regions.write();
            let merged_id = self.shared.catalog.update(|s| {
                let id = s.next_region_id;
                s.next_region_id += 1;
                s.next_file_id = s.next_file_id.max(next_file_id);
                let entry = s.table_mut(&key)?;
                let pos = entry
                    .regions
                    .iter()
                    .position(|r| r.id == first_id)
                    .ok_or_else(|| Error::bad_argument("region vanished during its merge"))?;
                let (x, y) = match (entry.regions.get(pos), entry.regions.get(pos + 1)) {
                    (Some(x), Some(y)) if y.id == second_id => (x.clone(), y.clone()),
                    _ => return Err(Error::bad_argument("regions vanished during their merge")),
                };
                let mut files = x.files.clone();
                for (fam, list) in &y.files {
                    let all = files.entry(fam.clone()).or_default();
                    all.extend(list.iter().cloned());
                    all.sort_by_key(|f| std::cmp::Reverse(f.max_seq));
                }
                let merged = RegionEntry {
                    id,
                    start: x.start.clone(),
                    end: y.end.clone(),
                    flushed_seq: x.flushed_seq.max(y.flushed_seq),
                    files: with_local(files, local_file.clone()),
                    generation: x.generation.max(y.generation),
                    writers: x.writers_and(&y),
                };
                entry.regions.splice(pos..=pos + 1, [merged]);
                Ok(id)
            })?;
            let stores = first
                .all_stores()
                .iter()
                .map(|s| {
                    let mut files = s.state.read().files.clone();
                    if let Some(other) = second.store(&s.family) {
                        files.extend(other.state.read().files.iter().cloned());
                    }
                    files.sort_by_key(|f| std::cmp::Reverse(f.info().max_seq));
                    (
                        s.family.clone(),
                        Arc::new(Store::new(s.descriptor(), files)),
                    )
                })
                .collect();
            let flushed = first
                .flushed_seq
                .load(Ordering::Acquire)
                .max(second.flushed_seq.load(Ordering::Acquire));
            let region = Region::new(
                merged_id,
                t.name.clone(),
                first.start.clone(),
                second.end.clone(),
                flushed,
                first.generation.max(second.generation),
                stores,
            );
            region.inherit_clock(&first);
            region.inherit_clock(&second);
            let merged = Arc::new(local_store(region, local_file));
            if let Some(pos) = regions.iter().position(|r| Arc::ptr_eq(r, &first)) {
                regions.splice(pos..=pos + 1, [merged.clone()]);
            }
            for r in &by_id {
                r.retired.store(true, Ordering::Release);
            }
            drop(regions);
            merged
        };
        let merged_id = merged.id;
        if local_files.is_some() {
            local::retire_inputs(&by_id, &self.shared.catalog);
        }
        drop(flush_guards);
        drop(gates);
        drop(compaction_locks);
        tracing::info!(first = %first.name(), second = %second.name(), merged = merged_id,
            "merged regions");
        if let Some(h) = &hooks {
            lifecycle::hooks_close(&self.reads, &t, h, &[first.clone(), second.clone()], true)
                .await;
            lifecycle::hooks_post_open(&self.reads, &t, h, std::slice::from_ref(&merged)).await;
        }
        self.maybe_compact(&merged);
        self.shared
            .hand_over(&t.name, &[first_id, second_id], &[merged_id])
            .await?;
        Ok(merged_id)
    }

    /// Compacts every store of `region` that holds references, and waits.
    async fn compact_references(self: &Arc<Self>, region: &Arc<Region>) -> Result<()> {
        for store in region.all_stores() {
            let refs = store
                .state
                .read()
                .files
                .iter()
                .any(|f| region.is_reference(f));
            if refs {
                self.compact_store(region, &store, CompactionKind::Minor, true)
                    .await?;
            }
        }
        Ok(())
    }

    /// Compacts a new daughter's references away in the background (HBase compacts daughters
    /// right after a split).
    fn spawn_reference_compaction(self: &Arc<Self>, region: Arc<Region>) {
        if !region.has_references() {
            return;
        }
        let engine = self.clone();
        tokio::spawn(async move {
            if let Err(e) = engine.compact_references(&region).await {
                if engine.shared.check_open().is_ok() {
                    tracing::warn!(region = %region.name(), error = %e,
                        "compaction of references failed; the next one retries");
                }
            }
        });
    }

    /// Splits `region` in the background when the split policy says it is too big and it
    /// holds no references (once no other split, merge, table flush or compaction runs), or
    /// asks the engine's [`crate::coord::SplitAsker`] to have it split.
    pub(crate) fn maybe_split(self: &Arc<Self>, region: &Arc<Region>) {
        if region.is_offline() {
            return;
        }
        let Ok(t) = self.shared.table(&region.table) else {
            return;
        };
        if !self.wants_split(&t, region) {
            return;
        }
        if let Some(asker) = self.shared.config.split_asker.clone() {
            let key = crate::coord::RegionKey::new(region.table.clone(), region.id);
            tokio::spawn(async move {
                if let Err(e) = asker.ask_split(&key).await {
                    tracing::warn!(region = %key, error = %e,
                        "asking for a split failed; the next flush asks again");
                }
            });
            return;
        }
        let engine = self.clone();
        let region = region.clone();
        tokio::spawn(async move {
            // Waits for a running split, merge, table flush or compaction, then looks again.
            let _ops = engine.region_ops.lock().await;
            if !engine.wants_split(&t, &region) {
                return;
            }
            if let Err(e) = engine.split_locked(&t, &region, None).await {
                if engine.shared.check_open().is_ok() {
                    tracing::warn!(region = %region.name(), error = %e, "automatic split failed");
                }
            }
        });
    }

    /// True when the split policy says `region` should split now.
    fn wants_split(&self, t: &TableState, region: &Region) -> bool {
        if region.is_retired() || self.shared.check_open().is_err() || t.check_enabled().is_err() {
            return false;
        }
        let flush_size = t
            .descriptor
            .read()
            .memstore_flush_size
            .unwrap_or(self.shared.config.memstore_flush_size);
        let n = t.regions.read().len();
        let limit = self.shared.config.split_policy.threshold(
            self.shared.config.max_region_size,
            flush_size,
            n,
        );
        limit.is_some_and(|l| region.largest_store_size() >= l)
            && !region.has_references()
            && guard::has_split_point(t, region)
    }
}
