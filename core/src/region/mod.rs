//! Regions: a table is a sorted set of regions, each owning the rows in `[start, end)`.
//!
//! A region holds one [`Store`] per column family and counts its requests. It knows nothing
//! of clients. Invariants: `update_lock` is held shared by every MemStore insert and
//! exclusively while a flush swaps MemStores, so a flush's snapshot holds every cell whose
//! sequence id is at or below the read point taken during the swap.
//!
//! Splits and merges ([`crate::server::split`]): `write_gate` is held shared by every commit
//! that writes into the region, from before its sequence id is taken until its cells are in
//! the MemStores, and exclusively by a split or merge from its last flush of the region to
//! the moment the region is `retired` (replaced in the table's region list). A retired
//! region never takes another write (a writer that finds it retired after taking the gate
//! re-locates its rows), so its store files hold every write it ever took; readers that
//! still hold it read correct data at any read point taken before it was retired.
//!
//! References: every cell in a region's MemStores lies inside `[start, end)`; a store file
//! whose key range reaches outside it is a *reference* to (part of) a split parent's file,
//! and every read of a region is clipped to its range ([`Region::is_reference`]).

pub mod locks;
pub mod scanner;
pub mod store;

pub use store::Store;

use crate::cell::{StoreCell, Timestamp};
use crate::error::{Error, Result};
use crate::schema::TableName;
use crate::storage::storefile::StoreFileReader;
use bytes::Bytes;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One region of a table.
#[derive(Debug)]
pub struct Region {
    /// Engine-wide unique id.
    pub id: u64,
    /// The table it belongs to.
    pub table: TableName,
    /// Inclusive start key (empty = no lower bound).
    pub start: Bytes,
    /// Exclusive end key (empty = no upper bound).
    pub end: Bytes,
    /// Stores by family name.
    pub stores: RwLock<BTreeMap<Bytes, Arc<Store>>>,
    /// Shared by inserts, exclusive while a flush swaps MemStores.
    pub update_lock: RwLock<()>,
    /// Writes at or below this sequence id are in store files.
    pub flushed_seq: AtomicU64,
    /// The region's generation in the catalog while this engine serves it: the store files
    /// it writes carry it in their names.
    pub generation: u64,
    /// Smallest sequence id in the MemStores (u64::MAX when empty).
    pub oldest_unflushed: AtomicU64,
    /// Smallest sequence id in MemStore snapshots being flushed (u64::MAX when none).
    pub snapshot_oldest: AtomicU64,
    /// Reads served.
    pub read_requests: AtomicU64,
    /// Endpoint answers (row counts, column folds) read in place from a store file's blocks
    /// (see `server::endpoint::RegionView::count_rows`).
    pub in_place_reads: AtomicU64,
    /// Writes served: one per mutation (a row of a put, delete or batch), as HBase counts.
    pub write_requests: AtomicU64,
    /// Serializes flushes of this region.
    pub flush_lock: tokio::sync::Mutex<()>,
    /// Set while a background flush is queued or running, so that the writers that all see
    /// the MemStore past its flush size start one flush, not one each.
    pub flush_requested: AtomicBool,
    /// Shared by commits writing into the region, exclusive while a split or merge retires it.
    pub write_gate: Arc<tokio::sync::RwLock<()>>,
    /// Set once a split or merge replaced the region; it takes no writes afterwards.
    pub retired: AtomicBool,
    /// Set at open when a store file the region lists is missing or cannot be opened: the
    /// region then refuses reads and writes with [`Error::RegionOffline`] (and is never
    /// compacted, split or merged) until an offline repair sets the file aside. WAL edits
    /// are still replayed into it and flushed, so nothing acknowledged is dropped.
    pub offline: std::sync::OnceLock<RegionFault>,
    /// The largest timestamp the server stamped a write of this region with (see
    /// [`Region::stamp`]).
    server_clock: AtomicU64,
}

/// Why a region is offline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionFault {
    /// The store file at fault.
    pub file: std::path::PathBuf,
    /// What is wrong with it.
    pub reason: String,
    /// True when nothing is wrong but another engine of a shared store serves the region
    /// (this one opened other regions, `Config::serve_regions`): it fails with
    /// [`Error::RegionNotServed`], and no file of it is open here.
    pub elsewhere: bool,
}

/// How far ahead of the wall clock a region's server clock may be moved by its own stamps
/// (a burst of increments of one cell moves it a millisecond per increment): a second. A
/// stamp further ahead (an increment over a version a client dated later, or a burst of
/// more than a thousand increments of one cell within a second) is used but not recorded.
/// A restart takes longer than that, so a reopened region's clock starts at the wall clock.
pub const MAX_CLOCK_LEAD_MS: u64 = 1_000;

impl Region {
    /// A region with the given stores.
    pub fn new(
        id: u64,
        table: TableName,
        start: Bytes,
        end: Bytes,
        flushed_seq: u64,
        generation: u64,
        stores: BTreeMap<Bytes, Arc<Store>>,
    ) -> Self {
        Region {
            id,
            table,
            start,
            end,
            generation,
            stores: RwLock::new(stores),
            update_lock: RwLock::new(()),
            flushed_seq: AtomicU64::new(flushed_seq),
            oldest_unflushed: AtomicU64::new(u64::MAX),
            snapshot_oldest: AtomicU64::new(u64::MAX),
            read_requests: AtomicU64::new(0),
            in_place_reads: AtomicU64::new(0),
            write_requests: AtomicU64::new(0),
            flush_lock: tokio::sync::Mutex::new(()),
            flush_requested: AtomicBool::new(false),
            write_gate: Arc::new(tokio::sync::RwLock::new(())),
            retired: AtomicBool::new(false),
            offline: std::sync::OnceLock::new(),
            server_clock: AtomicU64::new(0),
        }
    }

    /// The timestamp of a write the server stamps with `ts` at wall-clock time `now` (`ts`
    /// is `now`, or for an increment the version it must exceed, `max(now, old + 1)`): `ts`,
    /// or the largest timestamp the region stamped before when that is later. Server
    /// timestamps never go backwards within a region, so a write a client issued later is
    /// never hidden by one the server stamped earlier (a burst of increments runs ahead of
    /// the wall clock). A `ts` more than [`MAX_CLOCK_LEAD_MS`] past `now` (an increment
    /// over a version a client dated far ahead) is used but not recorded: the region's
    /// clock follows its own stamps, not clients' dates. One atomic max per write.
    pub fn stamp(&self, ts: Timestamp, now: Timestamp) -> Timestamp {
        if ts > now.saturating_add(MAX_CLOCK_LEAD_MS) {
            return ts.max(self.server_clock());
        }
        self.server_clock.fetch_max(ts, Ordering::AcqRel).max(ts)
    }

    /// The largest timestamp [`Region::stamp`] handed out (0 before the first).
    pub fn server_clock(&self) -> Timestamp {
        self.server_clock.load(Ordering::Acquire)
    }

    /// Carries the clocks of the regions a split or merge replaces into this one.
    pub fn inherit_clock(&self, from: &Region) {
        self.server_clock
            .fetch_max(from.server_clock(), Ordering::AcqRel);
    }

    /// Fails with [`Error::RegionOffline`] when the region is offline.
    pub fn check_online(&self) -> Result<()> {
        match self.offline.get() {
            None => Ok(()),
            Some(fault) if fault.elsewhere => Err(Error::RegionNotServed {
                table: self.table.to_string(),
                region: self.id,
            }),
            Some(fault) => Err(Error::RegionOffline {
                table: self.table.to_string(),
                region: self.id,
                file: fault.file.clone(),
                reason: fault.reason.clone(),
            }),
        }
    }

    /// True when another engine of a shared store serves the region (see
    /// [`RegionFault::elsewhere`]).
    pub fn served_elsewhere(&self) -> bool {
        self.offline.get().is_some_and(|f| f.elsewhere)
    }

    /// True when the region is offline (see [`Region::offline`]).
    pub fn is_offline(&self) -> bool {
        self.offline.get().is_some()
    }

    /// True once a split or merge replaced this region.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// True when store file `f` holds rows outside the region: a reference to a split
    /// parent's file, readable only through the region's range.
    pub fn is_reference(&self, f: &StoreFileReader) -> bool {
        let info = f.info();
        let below = info
            .first_key
            .as_ref()
            .is_some_and(|k| k.row.as_ref() < self.start.as_ref());
        let above = !self.end.is_empty()
            && info
                .last_key
                .as_ref()
                .is_some_and(|k| k.row.as_ref() >= self.end.as_ref());
        below || above
    }

    /// True when any store of the region holds a reference file.
    pub fn has_references(&self) -> bool {
        self.all_stores()
            .iter()
            .any(|s| s.state.read().files.iter().any(|f| self.is_reference(f)))
    }

    /// Bytes in the store files of the region's largest store.
    pub fn largest_store_size(&self) -> u64 {
        self.all_stores()
            .iter()
            .map(|s| {
                s.state
                    .read()
                    .files
                    .iter()
                    .map(|f| f.info().file_size)
                    .sum()
            })
            .max()
            .unwrap_or(0)
    }

    /// The region's name as HBase prints it: `table,start,id`.
    pub fn name(&self) -> String {
        format!(
            "{},{},{}",
            self.table,
            String::from_utf8_lossy(&self.start),
            self.id
        )
    }

    /// True when `row` belongs to this region.
    pub fn contains(&self, row: &[u8]) -> bool {
        row >= self.start.as_ref() && (self.end.is_empty() || row < self.end.as_ref())
    }

    /// True while this region serves `row`: not retired by a split or merge, online, and
    /// holding the row.
    pub fn serves(&self, row: &[u8]) -> bool {
        !self.is_retired() && self.check_online().is_ok() && self.contains(row)
    }

    /// The store of `family`.
    pub fn store(&self, family: &[u8]) -> Option<Arc<Store>> {
        self.stores.read().get(family).cloned()
    }

    /// Every store, by family name.
    pub fn all_stores(&self) -> Vec<Arc<Store>> {
        self.stores.read().values().cloned().collect()
    }

    /// Every store a user sees: all but the reserved family of region-local rows
    /// ([`crate::keys::local`]), which reads without a column selection, whole-row deletes
    /// and row counts skip.
    pub fn user_stores(&self) -> Vec<Arc<Store>> {
        self.stores
            .read()
            .iter()
            .filter(|(f, _)| !crate::schema::is_local_family(f))
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Inserts cells of one committed batch into the MemStores. Consecutive cells of one
    /// store and row go in with one MemStore row lookup.
    pub(crate) fn apply<T: RegionCell>(&self, family_cells: &[T]) {
        let _g = self.update_lock.read();
        // One update of the shared counter per batch (its cells usually share one seq).
        if let Some(oldest) = family_cells.iter().map(|c| c.cell().key.seq).min() {
            self.oldest_unflushed.fetch_min(oldest, Ordering::Relaxed);
        }
        let mut i = 0;
        while let Some(first) = family_cells.get(i) {
            let (store, row) = (first.store(), &first.cell().key.row);
            let run = family_cells
                .get(i..)
                .unwrap_or_default()
                .iter()
                .take_while(|c| Arc::ptr_eq(c.store(), store) && c.cell().key.row == *row)
                .count();
            let cells = family_cells.get(i..i + run).unwrap_or_default();
            store.insert_row(row, cells.iter().map(|c| c.cell()));
            i += run.max(1);
        }
    }

    /// Bytes held in MemStores.
    pub fn memstore_size(&self) -> usize {
        self.stores.read().values().map(|s| s.memstore_size()).sum()
    }
}

/// A cell on its way into a region's MemStore, with the store it goes to.
pub(crate) trait RegionCell {
    /// The store (family) of the cell.
    fn store(&self) -> &Arc<Store>;
    /// The cell, carrying its batch's sequence id.
    fn cell(&self) -> &StoreCell;
}

impl RegionCell for (Arc<Store>, StoreCell) {
    fn store(&self) -> &Arc<Store> {
        &self.0
    }
    fn cell(&self) -> &StoreCell {
        &self.1
    }
}

impl<T: RegionCell> RegionCell for &T {
    fn store(&self) -> &Arc<Store> {
        (*self).store()
    }
    fn cell(&self) -> &StoreCell {
        (*self).cell()
    }
}

/// Facts about one region, as HBase's region page shows them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegionInfo {
    /// `table,start,id`.
    pub name: String,
    /// Region id.
    pub id: u64,
    /// Inclusive start key.
    pub start_key: Bytes,
    /// Exclusive end key (empty = none).
    pub end_key: Bytes,
    /// Reads served since open.
    pub read_requests: u64,
    /// Writes served since open: one per mutation (a row of a put, delete or batch).
    pub write_requests: u64,
    /// Bytes in MemStores.
    pub memstore_size: u64,
    /// Number of store files.
    pub store_files: usize,
    /// Bytes in store files.
    pub store_file_size: u64,
    /// Cells (puts and delete markers) in store files.
    pub store_file_cells: u64,
    /// Store files point reads skipped thanks to bloom filters, since open.
    pub bloom_skipped_files: u64,
    /// Store files that are references to a split parent's files (reaching outside the
    /// region); compaction rewrites them, and the region splits again only once none is left.
    pub reference_files: usize,
}

impl Region {
    /// A snapshot of the region's facts.
    pub fn info(&self) -> RegionInfo {
        let stores = self.all_stores();
        let (mut n, mut size, mut skipped, mut cells, mut refs) = (0, 0, 0, 0, 0);
        for s in &stores {
            skipped += s.bloom_skips.load(Ordering::Relaxed);
            let st = s.state.read();
            refs += st.files.iter().filter(|f| self.is_reference(f)).count();
            n += st.files.len();
            size += st.files.iter().map(|f| f.info().file_size).sum::<u64>();
            cells += st.files.iter().map(|f| f.info().entry_count).sum::<u64>();
        }
        RegionInfo {
            name: self.name(),
            id: self.id,
            start_key: self.start.clone(),
            end_key: self.end.clone(),
            read_requests: self.read_requests.load(Ordering::Relaxed),
            write_requests: self.write_requests.load(Ordering::Relaxed),
            memstore_size: self.memstore_size() as u64,
            store_files: n,
            store_file_size: size,
            store_file_cells: cells,
            bloom_skipped_files: skipped,
            reference_files: refs,
        }
    }
}

/// One cell ready to commit, with the region and store it goes to.
pub(crate) struct PreparedCell {
    pub region: Arc<Region>,
    pub store: Arc<Store>,
    pub cell: StoreCell,
}

impl RegionCell for PreparedCell {
    fn store(&self) -> &Arc<Store> {
        &self.store
    }
    fn cell(&self) -> &StoreCell {
        &self.cell
    }
}

impl std::fmt::Debug for PreparedCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedCell")
            .field("region", &self.region.id)
            .field("key", &self.cell.key)
            .finish()
    }
}
