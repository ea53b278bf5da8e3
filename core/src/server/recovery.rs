//! Opening the engine: load the catalog, open every region's store files, delete orphans,
//! and replay the WAL records each region had not flushed.
//!
//! Tables' coprocessor hooks are loaded before the WAL is replayed, so their
//! `pre_wal_restore` / `post_wal_restore` see the replayed edits; `post_open` follows for
//! every region of every enabled table with coprocessors ([`super::lifecycle`]).
//!
//! Invariants after open: every acknowledged write is in a MemStore or a store file; the
//! next sequence id exceeds every id on disk; files no region lists (a flush that crashed
//! before its catalog update) are gone.

use super::{Config, EngineShared, TableState};
use crate::catalog::{Catalog, RegionEntry, TableEntry};
use crate::error::{Error, Result};
use crate::mvcc::Mvcc;
use crate::objects::Objects;
use crate::region::{Region, RegionFault, Store};
use crate::schema::TableDescriptor;
use crate::schema::TableName;
use crate::storage::storefile::{BlockCache, StoreFileReader};
use crate::wal::{DamageAction, Wal, WalCut, WalDamage, WalOptions, WalRecoveryMode};

pub use super::verify_pending::{RecoveryRepair, RecoveryRepairOutcome};

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What recovery hands the engine it opens: the shared state with the store files open and
/// the WAL started, the store file ids it may hand out, the report so far and the WAL records to
/// replay (once the stages exist, so that replay can run the tables' hooks).
pub(super) struct Recovered {
    pub(super) shared: Arc<EngineShared>,
    pub(super) file_ids: std::ops::Range<u64>,
    pub(super) report: RecoveryReport,
    pub(super) records: Vec<crate::wal::WalRecord>,
}

/// Opens the directory's catalog, store files and WAL (see the module doc): everything of an
/// open but the replay.
pub(super) fn recover(config: Config) -> Result<Recovered> {
    if config.memstore_flush_size == 0 || config.wal_segment_size == 0 {
        return Err(Error::bad_argument(
            "flush size and WAL segment size must be positive",
        ));
    }
    let rate = config.bloom_error_rate;
    if !(rate > 0.0 && rate < 1.0) {
        return Err(Error::bad_argument(format!(
            "bloom error rate must be in (0, 1), got {rate}"
        )));
    }
    if config.blocking_store_files < 2 {
        return Err(Error::bad_argument(format!(
            "blocking store files must be at least 2, got {}",
            config.blocking_store_files
        )));
    }
    let limit = config.global_memstore_lower_limit;
    if !(limit > 0.0 && limit <= 1.0) {
        return Err(Error::bad_argument(format!(
            "global MemStore lower limit must be in (0, 1], got {limit}"
        )));
    }
    let fs = &config.fs;
    fs.create_dir_all(&config.dir.join("data"))?;
    fs.create_dir_all(&config.dir.join("wal"))?;
    let lock = lock_data_dir(&config)?;
    let objects = config.resolved_objects();
    if let Some(problem) = missing_catalog(&*objects)? {
        return Err(Error::corruption(Catalog::locate(&*objects), 0, problem));
    }
    // What a crashed writer left unfinished (the engine is the directory's only writer).
    objects.sweep_unfinished("")?;
    let catalog = Catalog::open(&objects)?;
    let shared_store = config.objects.as_ref().filter(|o| !o.is_local());
    let writer_folders = || match shared_store {
        Some(o) => Wal::writers(o),
        None => Ok(BTreeSet::new()),
    };
    // Past every folder (those of engines older than catalog format 9 included).
    let min_writer = writer_folders()?.last().map_or(1, |w| w + 1);
    // On a shared store: from here on an engine that had the store (or the regions) open
    // cannot change them.
    let claimed = match &config.serve_regions {
        None => catalog.claim(min_writer)?,
        Some(ids) => catalog.claim_regions(ids, min_writer)?,
    };
    let writer = claimed.writer;
    // Listed after the claim: an engine whose folder is missing here checks its claim after
    // creating its folder, and finds this one's (see `Catalog::check_claim`).
    // Folders numbered from this engine's on belong to later claimers: their claims fence
    // this one (its check after the WAL starts fails), and it must not fence them.
    let mut listed = writer_folders()?;
    listed.retain(|w| *w < writer || writer == 0);
    let served = |id: u64| {
        config
            .serve_regions
            .as_ref()
            .is_none_or(|s| s.contains(&id))
    };
    let full = catalog.snapshot();
    // What this engine recovers: the regions it serves (all of them unless told otherwise).
    let state = super::takeover::scoped(&full, &served);
    let cache = Arc::new(BlockCache::new(config.block_cache_size));

    let mut live_files = HashSet::new();
    let mut max_seq = 0u64;
    let mut tables = BTreeMap::new();
    for entry in full.tables.values() {
        let t = open_table(
            &config,
            &objects,
            entry,
            &cache,
            (&mut live_files, &mut max_seq),
            &served,
        )?;
        tables.insert(t.name.clone(), t);
    }
    let wal_dir = config.dir.join("wal");
    let wal_store = match shared_store {
        Some(o) => Wal::writer_store(o, writer),
        None => crate::wal::SegmentStore::Dir {
            fs: Arc::clone(&config.fs),
            dir: config.dir.join("wal"),
        },
    };
    let mode = config.wal_recovery;
    let to_read = super::takeover::writers_to_read(&full, &served, &listed, writer);
    let mut recovered = Wal::scan(&wal_store, mode, &to_read)?;
    if let Some(ids) = &config.serve_regions {
        recovered.keep_regions(ids);
    }
    // A WAL without markers was written before they existed: in the default mode its
    // cut can only be the newest segment's torn tail, which that version's flushes
    // (they synced the WAL before writing files) kept above every store file.
    let check_cut = match mode {
        WalRecoveryMode::Salvage => false,
        WalRecoveryMode::TolerateCorruptedTail => recovered.saw_marker,
        WalRecoveryMode::PointInTime => true,
    };
    if let Some(cut) = recovered.cut.as_ref().filter(|_| check_cut) {
        let newer = tables_newer_than(&state, cut.last_seq);
        if !newer.is_empty() {
            return Err(Error::WalCorruption {
                segment: cut.segment.clone(),
                offset: cut.offset,
                reason: format!(
                    "replay would stop here, but store files hold writes newer than the \
                     last record before it (seq {}): not a point in time",
                    cut.last_seq
                ),
                tables: newer,
            });
        }
    }
    // Every flush wrote a marker at least as high as its files' writes before it wrote
    // them, so a store file past the WAL's end means the WAL lost its tail.
    let marked = recovered.saw_marker;
    let past_end = if marked {
        tables_newer_than(&state, recovered.max_seq)
    } else {
        Vec::new()
    };
    if !past_end.is_empty() {
        let (segment, offset) = recovered
            .last_segment
            .clone()
            .unwrap_or_else(|| (wal_dir.clone(), 0));
        let reason = format!(
            "the WAL ends at seq {}, but store files hold later writes: records at its end \
             were lost",
            recovered.max_seq
        );
        if mode != WalRecoveryMode::Salvage {
            return Err(Error::WalCorruption {
                segment,
                offset,
                reason,
                tables: past_end,
            });
        }
        recovered.damage.push(WalDamage {
            segment,
            offset,
            reason,
            action: DamageAction::Lost,
            moved_to: None,
        });
        recovered.bridge_to(max_seq);
    }
    // On a shared store, only ids this engine's claim could hand out (below its next file
    // id): a file with a larger id was written by an engine that took the store over since,
    // and its catalog lists it.
    let orphan_ids = match objects.is_local() {
        true => u64::MAX,
        false => claimed.file_ids.start,
    };
    // An engine serving some regions leaves files alone: the others serve the rest.
    if config.serve_regions.is_none() {
        remove_orphans(&*objects, &live_files, orphan_ids)?;
    }
    if mode == WalRecoveryMode::Salvage && !recovered.damage.is_empty() {
        // Skipped records may have held any table's writes: a data row may have lost
        // what derives from it (its index rows) or the reverse. Recorded before the WAL
        // changes, so that no crash forgets it.
        super::verify_pending::add(&**fs, &config.dir, &with_coprocessors(&state))?;
    }
    // Cuts, moves aside and rewrites now, so that the report says where files went.
    recovered.apply(&wal_store)?;
    let records = std::mem::take(&mut recovered.records);
    // The new segment's opening marker: the WAL's own largest seq continues the chain;
    // a WAL without markers (written before they existed) or that lost its tail
    // (salvaged) starts from the store files' largest seq.
    let opening = if marked && past_end.is_empty() {
        recovered.max_seq
    } else {
        max_seq.max(recovered.max_seq)
    };
    for rec in &records {
        max_seq = max_seq.max(rec.seq);
    }
    max_seq = max_seq.max(recovered.max_seq);
    let report = RecoveryReport {
        mode,
        segments_read: recovered.segments_read,
        records_replayed: records.len(),
        cells_replayed: 0,
        cut: recovered.cut.clone(),
        damage: recovered.damage.clone(),
        tables_to_verify: pending_tables(&**fs, &config.dir, &state)?,
        repairs: Vec::new(),
        offline_regions: Vec::new(),
    };
    let wal = Wal::start(
        wal_store,
        WalOptions {
            segment_size: config.wal_segment_size,
            recovery: mode,
        },
        recovered,
        opening,
    )?;
    // Its writer folder exists now: an engine that claims the store after this check lists
    // it and fences it. One that claimed before it may have missed it: then this open fails.
    catalog.check_claim()?;
    if let Some(o) = config.observer.clone().filter(|o| o.observes_wal()) {
        wal.on_roll(Box::new(move |closed, opened| {
            o.post_wal_roll(closed, opened)
        }));
    }
    let shared = Arc::new(EngineShared {
        mvcc: Mvcc::new(max_seq),
        catalog,
        objects,
        wal,
        cache,
        tables: super::CacheLine(RwLock::new(tables)),
        commit_lock: Mutex::new(()),
        closed: AtomicBool::new(false),
        dir_lock: Mutex::new(Some(lock)),
        ownership: std::sync::OnceLock::new(),
        config,
    });
    Ok(Recovered {
        shared,
        file_ids: claimed.file_ids,
        report,
        records,
    })
}

/// What an open recovered: the WAL segments read and replayed, and every piece of damage
/// found with what was done about it. Read it from [`Engine::recovery_report`](crate::Engine::recovery_report) (or
/// `Connection::recovery_report`); when it is not clean it is also logged at WARN.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The WAL recovery mode the engine opened with.
    pub mode: WalRecoveryMode,
    /// WAL segments read.
    pub segments_read: usize,
    /// WAL records (batches) read; those a region had flushed are read but not applied.
    pub records_replayed: usize,
    /// Cells replayed into MemStores (edits of regions that had not flushed them).
    pub cells_replayed: usize,
    /// Where replay stopped before the end of the WAL, if it did: every write after it is
    /// lost (and no store file holds one, or the open would have failed).
    pub cut: Option<WalCut>,
    /// Every piece of damage found in the WAL, in file order, with what was done.
    pub damage: Vec<WalDamage>,
    /// Tables with coprocessors whose derived data (index rows, rows an observer keeps)
    /// had to be verified and repaired: after a salvage with damage, or an offline repair
    /// that set store files aside (the directory records them until the repairs ran).
    /// `Connection::open_with` runs the loader's recovery repairs on them before it
    /// returns ([`Self::repairs`]); an `Engine` opened alone leaves them recorded.
    pub tables_to_verify: Vec<TableName>,
    /// What the recovery repairs found and repaired, one entry per derived structure (an
    /// index) of each table in [`Self::tables_to_verify`].
    pub repairs: Vec<RecoveryRepairOutcome>,
    /// Regions left offline because a store file they list is missing or cannot be opened.
    pub offline_regions: Vec<OfflineRegion>,
}

impl RecoveryReport {
    /// True when the WAL held no damage and every region opened.
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty() && self.offline_regions.is_empty()
    }

    /// Bytes cut, skipped or set aside, over all damage.
    pub fn bytes_dropped(&self) -> u64 {
        self.damage
            .iter()
            .map(|d| match d.action {
                DamageAction::Cut { bytes }
                | DamageAction::Skipped { bytes }
                | DamageAction::SetAside { bytes } => bytes,
                DamageAction::Removed | DamageAction::Lost => 0,
            })
            .sum()
    }
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WAL recovery ({:?}): {} segments read, {} records read, {} cells replayed",
            self.mode, self.segments_read, self.records_replayed, self.cells_replayed
        )?;
        if let Some(cut) = &self.cut {
            write!(
                f,
                "; cut at {} offset {} (after seq {})",
                cut.segment.display(),
                cut.offset,
                cut.last_seq
            )?;
        }
        for d in &self.damage {
            write!(f, "; {d}")?;
        }
        for r in &self.offline_regions {
            write!(
                f,
                "; region {} of {} offline: {} {}",
                r.region_id,
                r.table,
                r.file.display(),
                r.reason
            )?;
        }
        if !self.tables_to_verify.is_empty() {
            let names: Vec<String> = self
                .tables_to_verify
                .iter()
                .map(|t| t.to_string())
                .collect();
            write!(f, "; derived data to verify on: {}", names.join(", "))?;
        }
        for r in &self.repairs {
            write!(
                f,
                "; {} of {}: {} differences repaired",
                r.what, r.table, r.differences
            )?;
        }
        Ok(())
    }
}

/// The tables with coprocessors (the ones with derived data).
pub(crate) fn with_coprocessors(state: &crate::catalog::CatalogState) -> Vec<TableName> {
    state
        .tables
        .values()
        .filter(|t| !t.descriptor.coprocessors.is_empty())
        .map(|t| t.descriptor.name.clone())
        .collect()
}

/// The tables the directory's record names that still exist (a damaged record: every table
/// with coprocessors).
fn pending_tables(
    fs: &dyn crate::fs::FileSystem,
    dir: &std::path::Path,
    state: &crate::catalog::CatalogState,
) -> Result<Vec<TableName>> {
    use super::verify_pending::Pending;
    Ok(match super::verify_pending::read(fs, dir)? {
        Pending::Nothing => Vec::new(),
        Pending::Unreadable => with_coprocessors(state),
        Pending::Tables(t) => t
            .into_iter()
            .filter(|t| state.tables.contains_key(&t.to_string()))
            .collect(),
    })
}

/// A region that refuses reads and writes because a store file it lists is missing or
/// cannot be opened (see `crate::region::Region::offline`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfflineRegion {
    /// The table.
    pub table: TableName,
    /// The region's id.
    pub region_id: u64,
    /// The region's start key (inclusive; empty = first).
    pub start: bytes::Bytes,
    /// The region's end key (exclusive; empty = last).
    pub end: bytes::Bytes,
    /// The store file at fault.
    pub file: std::path::PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// Takes the exclusive lock of `config.dir` (`LOCK`): one engine or offline tool at a time.
pub(crate) fn lock_data_dir(config: &Config) -> Result<Box<dyn crate::fs::FileLock>> {
    match config.fs.lock(&config.dir.join("LOCK")) {
        Ok(lock) => Ok(lock),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(Error::bad_argument(format!(
            "{} is already open in another engine",
            config.dir.display()
        ))),
        Err(e) => Err(Error::Io(e)),
    }
}

/// Where the engine's WAL goes: appended segment files in `<dir>/wal` (the default, and
/// with local objects), or one object per write in a writer folder of its own on an object
/// store (see `crate::wal`'s `segment` module).
/// Why the engine's objects cannot be opened for want of their catalog: there is none, yet
/// `data/` holds store files (an open would delete them all as orphans). `None` when a
/// catalog exists or `data/` holds no store file (a new directory).
pub(crate) fn missing_catalog(objects: &dyn Objects) -> Result<Option<String>> {
    if Catalog::exists(objects)? {
        return Ok(None);
    }
    let files = objects
        .list("data")?
        .iter()
        .filter(|n| n.ends_with(".sf"))
        .count();
    Ok((files > 0).then(|| {
        format!(
            "the catalog is missing, yet data/ holds {files} store files; restore the catalog \
             from a backup (nothing was changed)"
        )
    }))
}

/// The tables some of whose store files hold a write with a seq above `seq`.
fn tables_newer_than(state: &crate::catalog::CatalogState, seq: u64) -> Vec<String> {
    state
        .tables
        .values()
        .filter(|t| {
            t.regions
                .iter()
                .flat_map(|r| r.files.values().flatten())
                .any(|f| f.max_seq > seq)
        })
        .map(|t| t.descriptor.name.to_string())
        .collect()
}

fn open_table(
    config: &Config,
    objects: &Arc<dyn Objects>,
    entry: &TableEntry,
    cache: &Arc<BlockCache>,
    (live, max_seq): (&mut HashSet<String>, &mut u64),
    served: &dyn Fn(u64) -> bool,
) -> Result<Arc<TableState>> {
    let mut regions = Vec::with_capacity(entry.regions.len());
    for r in &entry.regions {
        let region = match served(r.id) {
            true => open_region(objects, &entry.descriptor, r, cache, live, max_seq)?,
            false => super::takeover::unserved_region(&entry.descriptor, r),
        };
        regions.push(Arc::new(region));
    }
    Ok(Arc::new(TableState {
        name: entry.descriptor.name.clone(),
        key: entry.descriptor.name.to_string(),
        key_hash: crate::keys::hash::xxh3(entry.descriptor.name.to_string().as_bytes()),
        descriptor: RwLock::new(entry.descriptor.clone()),
        enabled: AtomicBool::new(entry.enabled),
        regions: RwLock::new(regions),
        hooks: crate::coprocessor::HookSlot::new(super::hooks::load_hooks(
            config,
            &entry.descriptor,
        )?),
    }))
}

/// Opens one region's stores from its catalog entry.
pub(crate) fn open_region(
    objects: &Arc<dyn Objects>,
    desc: &TableDescriptor,
    entry: &RegionEntry,
    cache: &Arc<BlockCache>,
    live: &mut HashSet<String>,
    max_seq: &mut u64,
) -> Result<Region> {
    *max_seq = (*max_seq).max(entry.flushed_seq);
    let mut stores = BTreeMap::new();
    let mut fault: Option<RegionFault> = None;
    for fam in &desc.families {
        let mut readers = Vec::new();
        for f in entry.files.get(&fam.name).into_iter().flatten() {
            let name = f.name();
            // Listed, so never removed as an orphan: the repair needs it.
            live.insert(name.clone());
            *max_seq = (*max_seq).max(f.max_seq);
            let opened = if objects.exists(&name)? {
                StoreFileReader::open(objects, &name, f.id, Some(cache.clone()))
                    .map_err(|e| e.to_string())
            } else {
                Err("store file listed in the catalog is missing".to_string())
            };
            match opened {
                Ok(reader) => readers.push(reader),
                Err(reason) => {
                    tracing::error!(
                        table = %desc.name,
                        region = entry.id,
                        file = %name,
                        %reason,
                        "store file cannot be opened; the region stays offline"
                    );
                    let file = objects.locate(&name);
                    fault.get_or_insert(RegionFault {
                        file,
                        reason,
                        elsewhere: false,
                    });
                }
            }
        }
        stores.insert(fam.name.clone(), Arc::new(Store::new(fam.clone(), readers)));
    }
    Ok(region_of(desc, entry, stores, fault))
}

/// The region of catalog entry `entry` of table `desc` with `stores`, offline for `fault`
/// if there is one.
pub(super) fn region_of(
    desc: &TableDescriptor,
    entry: &RegionEntry,
    stores: BTreeMap<bytes::Bytes, Arc<Store>>,
    fault: Option<RegionFault>,
) -> Region {
    let region = Region::new(
        entry.id,
        desc.name.clone(),
        entry.start.clone(),
        entry.end.clone(),
        entry.flushed_seq,
        entry.generation,
        stores,
    );
    if let Some(fault) = fault {
        let _ = region.offline.set(fault);
    }
    region
}

/// Deletes the store files no region lists, of ids below `below` (and any other object
/// under `data/`).
fn remove_orphans(objects: &dyn Objects, live: &HashSet<String>, below: u64) -> Result<()> {
    for name in objects.list("data")? {
        let id = name
            .strip_prefix("data/")
            .and_then(|n| n.get(..16))
            .and_then(|n| n.parse::<u64>().ok());
        if id.is_some_and(|id| id >= below) {
            tracing::debug!(file = %name, "keeping a store file of a newer engine");
            continue;
        }
        if !live.contains(&name) {
            tracing::info!(file = %name, "removing store file no region lists");
            objects.delete(&name)?;
        }
    }
    Ok(())
}
