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

use super::{store_file_path, Config, Engine, TableState};
use crate::catalog::{Catalog, RegionEntry, TableEntry};
use crate::error::{Error, Result};
use crate::mvcc::Mvcc;
use crate::region::locks::RowLocks;
use crate::region::{Region, Store};
use crate::schema::TableDescriptor;
use crate::storage::storefile::{BlockCache, StoreFileReader};
use crate::wal::{Wal, WalOptions};

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

impl Engine {
    /// Opens (or creates) the engine in `config.dir`, recovering from any crash.
    pub fn open(config: Config) -> Result<Arc<Engine>> {
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
        let lock = match fs.lock(&config.dir.join("LOCK")) {
            Ok(lock) => lock,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(Error::bad_argument(format!(
                    "{} is already open in another engine",
                    config.dir.display()
                )))
            }
            Err(e) => return Err(Error::Io(e)),
        };
        let catalog = Catalog::open(fs, &config.dir)?;
        let state = catalog.snapshot();
        let cache = Arc::new(BlockCache::new(config.block_cache_size));

        let mut live_files = HashSet::new();
        let mut max_seq = 0u64;
        let mut tables = BTreeMap::new();
        for entry in state.tables.values() {
            let t = open_table(&config, entry, &cache, &mut live_files, &mut max_seq)?;
            tables.insert(t.name.clone(), t);
        }
        remove_orphans(&config, &live_files)?;

        let (wal, records) = Wal::open(
            fs,
            &config.dir.join("wal"),
            WalOptions {
                segment_size: config.wal_segment_size,
            },
        )?;
        if let Some(o) = config.observer.clone().filter(|o| o.observes_wal()) {
            wal.on_roll(Box::new(move |closed, opened| {
                o.post_wal_roll(closed, opened)
            }));
        }
        for rec in &records {
            max_seq = max_seq.max(rec.seq);
        }
        let next_file_id = state.next_file_id;
        let engine = Arc::new(Engine {
            mvcc: Mvcc::new(max_seq),
            locks: RowLocks::new(4096),
            catalog,
            wal,
            cache,
            tables: RwLock::new(tables),
            commit_lock: Mutex::new(()),
            next_file_id: AtomicU64::new(next_file_id),
            commits: AtomicU64::new(0),
            row_clock: (0..super::ROW_CLOCK_SLOTS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            memstore_unchecked: AtomicU64::new(0),
            memstore_over: AtomicBool::new(false),
            memstore_blocked_writes: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            dir_lock: Mutex::new(Some(lock)),
            read_points: Default::default(),
            region_ops: Arc::new(tokio::sync::Mutex::new(())),
            config,
        });
        // After the engine exists: the WAL-restore and open hooks of tables with
        // coprocessors receive it.
        let replayed = engine.replay_wal(records)?;
        if replayed > 0 {
            tracing::info!(cells = replayed, "replayed WAL edits not yet flushed");
        }
        Ok(engine)
    }
}

fn open_table(
    config: &Config,
    entry: &TableEntry,
    cache: &Arc<BlockCache>,
    live: &mut HashSet<u64>,
    max_seq: &mut u64,
) -> Result<Arc<TableState>> {
    let mut regions = Vec::with_capacity(entry.regions.len());
    for r in &entry.regions {
        regions.push(Arc::new(open_region(
            config,
            &entry.descriptor,
            r,
            cache,
            live,
            max_seq,
        )?));
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
    config: &Config,
    desc: &TableDescriptor,
    entry: &RegionEntry,
    cache: &Arc<BlockCache>,
    live: &mut HashSet<u64>,
    max_seq: &mut u64,
) -> Result<Region> {
    *max_seq = (*max_seq).max(entry.flushed_seq);
    let mut stores = BTreeMap::new();
    for fam in &desc.families {
        let mut readers = Vec::new();
        for f in entry.files.get(&fam.name).into_iter().flatten() {
            let path = store_file_path(&config.dir, f.id);
            if !config.fs.exists(&path)? {
                return Err(Error::corruption(
                    path,
                    0,
                    "store file listed in the catalog is missing",
                ));
            }
            readers.push(StoreFileReader::open(
                &config.fs,
                &path,
                f.id,
                Some(cache.clone()),
            )?);
            live.insert(f.id);
            *max_seq = (*max_seq).max(f.max_seq);
        }
        stores.insert(fam.name.clone(), Arc::new(Store::new(fam.clone(), readers)));
    }
    Ok(Region::new(
        entry.id,
        desc.name.clone(),
        entry.start.clone(),
        entry.end.clone(),
        entry.flushed_seq,
        stores,
    ))
}

fn remove_orphans(config: &Config, live: &HashSet<u64>) -> Result<()> {
    let data = config.dir.join("data");
    for name in config.fs.list_dir(&data)? {
        let path = data.join(&name);
        let name = name.to_string_lossy();
        let id = name.strip_suffix(".sf").and_then(|s| s.parse::<u64>().ok());
        let keep = id.is_some_and(|id| live.contains(&id));
        if !keep {
            tracing::info!(file = %name, "removing store file no region lists");
            config.fs.remove_file(&path)?;
        }
    }
    Ok(())
}
