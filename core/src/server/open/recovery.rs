//! Opening the engine: load the catalog, open every region's store files, delete orphans,
//! and replay the WAL records each region had not flushed.
//!
//! Tables' coprocessor hooks are loaded before the WAL is replayed, so their
//! `pre_wal_restore` / `post_wal_restore` see the replayed edits; `post_open` follows for
//! every region of every enabled table with coprocessors (`server::hooks::lifecycle`).
//!
//! Invariants after open: every acknowledged write is in a MemStore or a store file; the
//! next sequence id exceeds every id on disk; files no region lists (a flush that crashed
//! before its catalog update) are gone.

use super::directory::{lock_data_dir, missing_catalog};
use super::pending::{pending_tables, with_coprocessors};
use super::regions::open_table;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::mvcc::Mvcc;
use crate::objects::Objects;
use crate::schema::TableName;
use crate::server::config::Config;
use crate::server::hooks::lifecycle::observe_wal_rolls;
use crate::server::plugins::{sweep_unlisted, ObjectPlugins};
use crate::server::shared::CacheLine;
use crate::server::shared::EngineShared;
use crate::storage::storefile::BlockCache;
use crate::wal::{DamageAction, Wal, WalCut, WalDamage, WalOptions, WalRecoveryMode};

use crate::server::config::RecoveryRepairOutcome;

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What recovery hands the engine it opens: the shared state with the store files open and
/// the WAL started, the store file ids it may hand out, the report so far and the WAL records to
/// replay (once the stages exist, so that replay can run the tables' hooks).
pub(crate) struct Recovered {
    pub(crate) shared: Arc<EngineShared>,
    pub(crate) file_ids: std::ops::Range<u64>,
    pub(crate) report: RecoveryReport,
    pub(crate) records: Vec<crate::wal::WalRecord>,
}

/// Opens the directory's catalog, store files and WAL (see the module doc): everything of an
/// open but the replay.
pub(crate) fn recover(config: Config) -> Result<Recovered> {
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
    if let Some(loader) = &config.coprocessor_loader {
        loader.bind_plugins(Arc::new(ObjectPlugins {
            objects: objects.clone(),
        }));
    }
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
    let to_read = super::takeover::writers_to_read(
        &full,
        (config.serve_regions.is_some(), &served),
        &listed,
        writer,
    );
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
    // A snapshot's files are kept as a table's are, and their sequence ids count (a
    // clone of it goes on above them).
    live_files.extend(full.listed_file_names());
    for r in full
        .snapshots
        .values()
        .flat_map(|s| s.tables.values())
        .flat_map(|t| &t.regions)
    {
        max_seq = max_seq.max(r.flushed_seq);
        for f in r.files.values().flatten() {
            max_seq = max_seq.max(f.max_seq);
        }
    }
    // An engine serving some regions leaves files alone: the others serve the rest.
    if config.serve_regions.is_none() {
        remove_orphans(&*objects, &live_files, orphan_ids)?;
        let unlisted = sweep_unlisted(&*objects, &full)?;
        if unlisted > 0 {
            tracing::info!(
                plugins = unlisted,
                "removed plugin uploads a crash interrupted"
            );
        }
    }
    if mode == WalRecoveryMode::Salvage && !recovered.damage.is_empty() {
        // Skipped records may have held any table's writes: a data row may have lost
        // what derives from it (its index rows) or the reverse. Recorded before the WAL
        // changes, so that no crash forgets it.
        super::pending::add(&**fs, &config.dir, &with_coprocessors(&state))?;
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
    observe_wal_rolls(&config, &wal);
    let shared = Arc::new(EngineShared {
        mvcc: Mvcc::new(max_seq),
        catalog,
        objects,
        wal,
        cache,
        tables: CacheLine(RwLock::new(tables)),
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

/// A region that refuses reads and writes because a store file it lists is missing or
/// cannot be opened (see `crate::region::Region::offline`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
