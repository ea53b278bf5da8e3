//! Compaction orchestration: choosing, running and committing minor and major compactions,
//! running them in the background, slowing writers down when a store has too many files.
//!
//! Protocol of one compaction of one store (holding the store's `compaction_lock` from start
//! to end, so a store runs one compaction at a time):
//!
//! 1. Select the inputs under the state lock: a minor compaction takes the window of files
//!    the exploring policy picks ([`crate::storage::compaction::policy`]), a major one every
//!    file. Take the smallest read point of any open scan and the clock.
//! 2. Off the async workers (`spawn_blocking`), merge the inputs through the
//!    [`CompactionIter`] into a new store file (written to a temporary name, fsynced,
//!    renamed, as a flush does). Writers and readers go on meanwhile: the inputs are
//!    immutable and flushes only ever add newer files.
//! 3. One catalog update removes the inputs from the store's list and puts the output where
//!    they were. Then, under the state lock, the store's readers are swapped the same way and
//!    each input that no region of the table lists any more (a split's daughters share
//!    their parent's files) is marked compacted away: the last holder (a scan that opened
//!    it earlier) deletes it from disk when it drops it.
//!
//! A store holding references (files of a split parent reaching outside the region) always
//! compacts all its files, clipped to the region's range, so one compaction drops them all;
//! a compaction of a region a split or merge retired does nothing.
//!
//! Crash safety: a crash before step 3 leaves the output file unlisted; a crash after it may
//! leave inputs on disk. Open deletes every file the catalog does not list
//! ([`super::recovery`]), so both are cleaned and no cell is lost (the catalog names either
//! the inputs or the output, never neither).
//!
//! Background: after each flush, every store of the region with at least the table's
//! `min_files` files is checked and compacted (minor) until the policy selects nothing. A
//! table with a major-compaction interval gets a major compaction of every region that
//! often, from one engine-wide timer task that holds only a weak reference to the engine
//! and stops when it closes. `close` waits for running compactions.
//!
//! Writers: a write to a store holding more than `Config::blocking_store_files` files
//! requests a compaction and waits in short sleeps until the count drops, at most
//! `Config::blocking_wait_ms`; then it proceeds. Writes slow down, they never fail for it,
//! and MemStores keep flushing, so memory stays bounded. A store at the blocking count is
//! "stuck" for the policy: it compacts even a window out of ratio or smaller than the
//! table's `min_files` (but at least 2 files, so open refuses a blocking count below 2).
//!
//! Coprocessors: after step 1, a table's hooks may shrink the selection and add cell
//! transforms that see, change or drop every cell written in step 2; `post_compact` follows
//! step 3 ([`super::lifecycle`]).
//!
//! Admin: `compact` / `major_compact` of a table or one region return once the compaction
//! finished. A major compaction does not flush first (as HBase): cells in the MemStore are
//! not part of it.

use crate::catalog::FileEntry;
use crate::cell::now_ms;
use crate::coprocessor::CompactionOutcome;
use crate::error::{Error, Result};
use crate::region::{Region, Store};
use crate::schema::{CompactionSettings, TableName};
use crate::server::flush::Maintenance;
use crate::server::hooks::lifecycle;
use crate::storage::compaction::policy::{self, PolicyConfig};
use crate::storage::compaction::{CompactionIter, CompactionKind, CompactionRules};
use crate::storage::merge::{CellSource, MergeIter};
use crate::storage::storefile::{CacheMode, StoreFileReader, StoreFileWriter, WriterOptions};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the periodic major-compaction timer looks at the tables.
const PERIODIC_TICK: Duration = Duration::from_millis(200);
/// How long a throttled writer sleeps between looks at the file count.
const THROTTLE_STEP: Duration = Duration::from_millis(10);

fn task_err(what: &str, e: tokio::task::JoinError) -> Error {
    Error::Io(std::io::Error::other(format!("{what} task failed: {e}")))
}

impl Maintenance {
    fn compaction_settings(&self, table: &TableName) -> Result<CompactionSettings> {
        Ok(self
            .shared
            .table(table)?
            .descriptor
            .read()
            .compaction
            .clone())
    }

    /// Compacts one store. A minor compaction rewrites the files the policy picks (nothing
    /// when it picks none), a major one every file. With `wait` false it gives up at once
    /// when the store is already compacting. Returns what it did, `None` when nothing.
    pub(crate) async fn compact_store(
        self: &Arc<Self>,
        region: &Arc<Region>,
        store: &Arc<Store>,
        kind: CompactionKind,
        wait: bool,
    ) -> Result<Option<CompactionOutcome>> {
        let _guard = if wait {
            store.compaction_lock.clone().lock_owned().await
        } else {
            match store.compaction_lock.clone().try_lock_owned() {
                Ok(g) => g,
                Err(_) => return Ok(None),
            }
        };
        self.shared.check_open()?;
        if region.is_retired() {
            return Ok(None); // a split or merge replaced it; its daughters compact their own
        }
        // An offline region's catalog entry still lists its bad file for the repair; the
        // other regions of its table compact as usual.
        if region.is_offline() {
            return Ok(None);
        }
        let settings = self.compaction_settings(&region.table)?;
        let inputs: Vec<Arc<StoreFileReader>> = {
            let st = store.state.read();
            let references = st.files.iter().any(|f| region.is_reference(f));
            match kind {
                CompactionKind::Major => st.files.clone(),
                // A store holding references rewrites every file, so they all go at once.
                CompactionKind::Minor if references => st.files.clone(),
                CompactionKind::Minor => {
                    // The store lists newest first; the policy wants oldest first.
                    let sizes: Vec<u64> =
                        st.files.iter().rev().map(|f| f.info().file_size).collect();
                    let stuck = sizes.len() >= self.shared.config.blocking_store_files;
                    let mut min_files = settings.min_files as usize;
                    if stuck {
                        // A blocking count below the minimum must still bring the count down.
                        min_files = min_files.min(sizes.len()).max(2);
                    }
                    let cfg = PolicyConfig {
                        min_files,
                        max_files: settings.max_files as usize,
                        ratio: settings.ratio(),
                    };
                    match policy::select(&sizes, &cfg, stuck) {
                        Some(r) => {
                            let n = sizes.len();
                            st.files[n - r.end..n - r.start].to_vec()
                        }
                        None => Vec::new(),
                    }
                }
            }
        };
        if inputs.is_empty() {
            return Ok(None);
        }
        let (kind, inputs, transforms) = match lifecycle::region_hooks(&self.shared, region) {
            None => (kind, inputs, Vec::new()),
            Some((t, hooks)) => {
                match lifecycle::hooks_pre_compact(
                    &self.reads,
                    &t,
                    &hooks,
                    region,
                    store,
                    kind,
                    inputs,
                )
                .await?
                {
                    Some(run) => run,
                    None => return Ok(None),
                }
            }
        };
        let rules = CompactionRules {
            kind,
            family: store.rules(),
            smallest_read_point: self.reads.smallest_read_point(),
            now_ms: now_ms(),
        };
        let d = store.descriptor();
        let opts = WriterOptions {
            compression: d.compression_for_compaction(),
            ..self.shared.writer_options(&d)
        };
        let id = self.take_file_id()?;
        let path = self.shared.file_name(id, region);
        let cache = self.shared.cache.clone();
        let objects = self.shared.objects.clone();
        let files = inputs.clone();
        let (start, end) = (region.start.clone(), region.end.clone());
        let family = store.family.clone();
        let (output, outcome) = tokio::task::spawn_blocking(move || -> Result<_> {
            // Clipped to the region: a reference contributes only the region's rows.
            let first = crate::cell::StoreKey::first_on_row(start);
            let sources: Vec<CellSource> = files
                .iter()
                .map(|f| CellSource::File(f.scan_from(&first).cache_mode(CacheMode::Bypass)))
                .collect();
            let clipped = MergeIter::new(sources, false).take_while(|c| match c {
                Ok(c) => end.is_empty() || c.key.row < end,
                Err(_) => true,
            });
            let mut iter = CompactionIter::new(clipped, rules);
            let mut w = StoreFileWriter::create(&objects, &path, opts)?;
            let mut hook_dropped = 0u64;
            if transforms.is_empty() {
                for cell in iter.by_ref() {
                    w.append(&cell?)?;
                }
            } else {
                for cell in iter.by_ref() {
                    let mut cell = cell?;
                    let keep = transforms
                        .iter()
                        .all(|t| t.transform(&family, &cell.key, &mut cell.value));
                    if keep {
                        w.append(&cell)?;
                    } else {
                        hook_dropped += 1;
                    }
                }
            }
            let outcome = CompactionOutcome {
                files_in: files.len(),
                cells_in: iter.cells_in,
                cells_dropped: iter.cells_dropped + hook_dropped,
            };
            let info = w.finish()?;
            if info.entry_count == 0 {
                objects.delete(&path)?;
                return Ok((None, outcome));
            }
            let reader = StoreFileReader::open(&objects, &path, id, Some(cache))?;
            Ok((Some((info, reader)), outcome))
        })
        .await
        .map_err(|e| task_err("compaction", e))??;

        let committed = self.commit_compaction(region, store, &inputs, id, output.as_ref());
        if let Err(e) = committed {
            // The output stays on disk: a catalog write that failed after its rename (at the
            // directory sync) may still be the catalog read at the next open, and it lists
            // the output instead of the inputs. Open removes whichever files the catalog it
            // reads does not list.
            tracing::warn!(file = id, error = %e,
                "compaction commit failed; its output is kept until the next open");
            return Err(e);
        }
        self.compactions.fetch_add(1, Ordering::Relaxed);
        self.shared
            .point_manifests(&region.table, &[region.id])
            .await;
        tracing::debug!(region = %region.name(), family = %String::from_utf8_lossy(&store.family),
            ?kind, files = outcome.files_in, dropped = outcome.cells_dropped, "compacted");
        lifecycle::hooks_post_compact(&self.reads, region, &store.family, &outcome).await;
        self.maybe_split(region);
        Ok(Some(outcome))
    }

    /// Step 3 of the protocol: one catalog update, then the readers' swap.
    fn commit_compaction(
        &self,
        region: &Region,
        store: &Store,
        inputs: &[Arc<StoreFileReader>],
        id: u64,
        output: Option<&(crate::storage::storefile::FileInfo, Arc<StoreFileReader>)>,
    ) -> Result<()> {
        self.shared.check_open()?;
        let ids: Vec<u64> = inputs.iter().map(|f| f.file_id()).collect();
        let table = region.table.to_string();
        let next_id = self.file_ids_in_use();
        let unlisted = self.shared.catalog.update(|s| {
            s.next_file_id = s.next_file_id.max(next_id).max(id + 1);
            let entry = s.table_mut(&table)?;
            let r = entry
                .regions
                .iter_mut()
                .find(|r| r.id == region.id)
                .ok_or_else(|| Error::bad_argument("region vanished during compaction"))?;
            let list = r
                .files
                .get_mut(&store.family)
                .ok_or_else(|| Error::bad_argument("family vanished during compaction"))?;
            if !ids.iter().all(|i| list.iter().any(|f| f.id == *i)) {
                return Err(Error::bad_argument(
                    "compaction inputs are no longer listed",
                ));
            }
            let pos = list.iter().position(|f| ids.contains(&f.id)).unwrap_or(0);
            list.retain(|f| !ids.contains(&f.id));
            if let Some((info, _)) = output {
                list.insert(
                    pos,
                    FileEntry {
                        id,
                        max_seq: info.max_seq,
                        size: info.file_size,
                        entries: info.entry_count,
                        generation: region.generation,
                    },
                );
            }
            // A split parent's file stays while a sibling region (of any table) lists it.
            let unlisted: Vec<u64> = ids.iter().copied().filter(|i| !s.lists_file(*i)).collect();
            Ok(unlisted)
        })?;
        let mut st = store.state.write();
        let pos = st
            .files
            .iter()
            .position(|f| ids.contains(&f.file_id()))
            .unwrap_or(0);
        st.files.retain(|f| !ids.contains(&f.file_id()));
        if let Some((_, reader)) = output {
            let pos = pos.min(st.files.len());
            st.files.insert(pos, reader.clone());
        }
        drop(st);
        for f in inputs {
            if unlisted.contains(&f.file_id()) {
                f.mark_compacted_away();
            }
        }
        Ok(())
    }

    /// Compacts every store of `region` and returns once done: a major compaction rewrites
    /// each store's files once; a minor one compacts until the policy selects nothing.
    pub(crate) async fn compact_region_stores(
        self: &Arc<Self>,
        region: &Arc<Region>,
        kind: CompactionKind,
    ) -> Result<()> {
        for store in region.all_stores() {
            match kind {
                CompactionKind::Major => {
                    self.compact_store(region, &store, kind, true).await?;
                }
                CompactionKind::Minor => {
                    // Each round leaves fewer files, so this ends.
                    while self
                        .compact_store(region, &store, kind, true)
                        .await?
                        .is_some()
                    {}
                }
            }
        }
        Ok(())
    }

    /// Compacts every region of a table (Admin `compact` / `major_compact`); returns once
    /// every compaction finished.
    pub(crate) async fn compact_table(
        self: &Arc<Self>,
        name: &TableName,
        kind: CompactionKind,
    ) -> Result<()> {
        let t = self.shared.table(name)?;
        t.check_enabled()?;
        // No split or merge meanwhile: each region listed now is compacted, none retired.
        let _ops = self.region_ops.lock().await;
        let regions: Vec<_> = t.regions.read().clone();
        for r in regions {
            self.compact_region_stores(&r, kind).await?;
        }
        Ok(())
    }

    /// Compacts one region of a table, by region id; returns once it finished.
    pub(crate) async fn compact_region(
        self: &Arc<Self>,
        name: &TableName,
        region_id: u64,
        kind: CompactionKind,
    ) -> Result<()> {
        let t = self.shared.table(name)?;
        t.check_enabled()?;
        let _ops = self.region_ops.lock().await;
        let region = t.region(region_id)?;
        self.compact_region_stores(&region, kind).await
    }

    /// Starts a background minor compaction of each store of `region` that has enough files
    /// and is not compacting already.
    pub(crate) fn maybe_compact(self: &Arc<Self>, region: &Arc<Region>) {
        if region.is_offline() {
            return;
        }
        let Ok(settings) = self.compaction_settings(&region.table) else {
            return;
        };
        for store in region.all_stores() {
            let n = store.file_count();
            if (n < settings.min_files as usize && n <= self.shared.config.blocking_store_files)
                || store.compaction_lock.try_lock().is_err()
            {
                continue;
            }
            let engine = self.clone();
            let region = region.clone();
            tokio::spawn(async move {
                loop {
                    if engine.shared.check_open().is_err() {
                        break;
                    }
                    match engine
                        .compact_store(&region, &store, CompactionKind::Minor, false)
                        .await
                    {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            if engine.shared.check_open().is_ok() {
                                tracing::error!(region = %region.name(), error = %e,
                                    "background compaction failed; files stay as they are");
                            }
                            break;
                        }
                    }
                }
            });
        }
    }

    /// Slows a writer down while a store it writes to has more than the blocking number of
    /// files: requests compactions and waits, at most `blocking_wait_ms` in all.
    pub(crate) async fn throttle_writes<'a>(
        self: &Arc<Self>,
        targets: impl Iterator<Item = (&'a Arc<Region>, &'a Arc<Store>)>,
    ) {
        let limit = self.shared.config.blocking_store_files;
        let mut busy: Vec<(&Arc<Region>, &Arc<Store>)> = Vec::new();
        // The address only identifies consecutive cells of one store (a raw pointer would
        // make this future not `Send`).
        let mut last: Option<usize> = None;
        for (r, s) in targets {
            let ptr = Arc::as_ptr(s) as usize;
            if last == Some(ptr) {
                continue;
            }
            last = Some(ptr);
            // A region a split or merge retired compacts no more; the commit re-routes.
            if r.is_retired() {
                continue;
            }
            if s.file_count() > limit && !busy.iter().any(|(_, b)| Arc::ptr_eq(b, s)) {
                busy.push((r, s));
            }
        }
        if busy.is_empty() {
            return;
        }
        let deadline = Instant::now() + Duration::from_millis(self.shared.config.blocking_wait_ms);
        for (r, _) in &busy {
            self.maybe_compact(r);
        }
        while Instant::now() < deadline && busy.iter().any(|(_, s)| s.file_count() > limit) {
            tokio::time::sleep(THROTTLE_STEP).await;
        }
    }

    /// Waits until no compaction runs (used by `close`, after `closed` is set, so none
    /// starts afterwards).
    pub(crate) async fn wait_for_compactions(&self) {
        let tables: Vec<_> = self.shared.tables.read().values().cloned().collect();
        for t in tables {
            let regions: Vec<_> = t.regions.read().clone();
            for r in regions {
                for s in r.all_stores() {
                    drop(s.compaction_lock.lock().await);
                }
            }
        }
    }

    /// Starts the timer task that runs periodic major compactions of tables that ask for
    /// them. It holds the engine only while it works and stops once the engine is closed
    /// or dropped.
    pub(crate) fn start_periodic_compactions(self: &Arc<Self>) {
        let weak: Weak<Maintenance> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last: HashMap<TableName, Instant> = HashMap::new();
            loop {
                tokio::time::sleep(PERIODIC_TICK).await;
                let Some(engine) = weak.upgrade() else {
                    break;
                };
                if engine.shared.check_open().is_err() {
                    break;
                }
                let due: Vec<TableName> = {
                    let tables = engine.shared.tables.read();
                    let now = Instant::now();
                    last.retain(|n, _| tables.contains_key(n));
                    tables
                        .values()
                        .filter(|t| t.enabled.load(Ordering::Acquire))
                        .filter_map(|t| {
                            let every = t.descriptor.read().compaction.major_interval_ms?;
                            let since = last.entry(t.name.clone()).or_insert(now);
                            if now.duration_since(*since) >= Duration::from_millis(every) {
                                *since = now;
                                Some(t.name.clone())
                            } else {
                                None
                            }
                        })
                        .collect()
                };
                for name in due {
                    if let Err(e) = engine.compact_table(&name, CompactionKind::Major).await {
                        if engine.shared.check_open().is_ok() {
                            tracing::warn!(table = %name, error = %e, "periodic major compaction failed");
                        }
                    }
                }
            }
        });
    }
}
