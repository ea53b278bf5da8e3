//! The MemStore: the sorted in-memory buffer of one store's recent writes.
//!
//! Two levels: a lock-free skiplist of rows, and per row a small sorted map of its cells
//! (qualifier, timestamp descending, type, sequence id descending) behind a short read-write
//! lock. A put of ten columns searches the big skiplist once instead of ten times, which is
//! where a wide-column store spends its write time. A row's map is a sorted vector of 40-byte
//! slots while the row has at most `NARROW_MAX` (32) cells, and becomes a B-tree past that,
//! so wide rows and long version chains stay logarithmic.
//!
//! Bytes live in an arena, as in HBase's MSLAB: an insert copies its row key, qualifiers and
//! values into one span of the MemStore's current chunk (chunks grow from 64 KiB to 2 MiB;
//! an insert over 256 KiB gets its own allocation). A narrow row's slots name their span
//! and offsets in it, so a cell costs no heap object and no reference count of its own; the
//! cells a read returns are `Bytes` views of the chunk, which lives until the MemStore and
//! the last such view are gone.
//!
//! Invariants: together the levels hold exactly the [`StoreKey`] order of the cells; a key is
//! inserted once (sequence ids make keys unique; a replayed duplicate carries an identical key
//! and value, so overwriting is harmless); a row once present is never removed while the
//! MemStore lives. The MemStore never filters by read point: the matcher does.

mod row;
mod scanner;

pub use scanner::MemStoreScanner;

use crate::cell::{CellRef, StoreCell, StoreKey};
use crate::storage::row_filter::RowFilter;
use bytes::{Bytes, BytesMut};
use crossbeam_skiplist::SkipMap;
use parking_lot::{Mutex, RwLock};
use row::RowMap;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// A row key in the row skiplist: its first 16 bytes as a big-endian number (zero-padded)
/// beside the key. Comparing the numbers first orders keys exactly as comparing their bytes
/// (when the numbers differ, they differ where the bytes first do, or where the shorter
/// key ended), and it decides most comparisons of a search without following the key's
/// pointer: random keys (index rows, hashed row keys) miss the cache once per skiplist
/// node instead of twice. `repr(C)` with the number last: in the skiplist's node it sits
/// just before the node's tower of links, so a search step reads both from one cache line
/// more often.
#[derive(Debug, Clone)]
#[repr(C)]
struct RowKey {
    row: Bytes,
    head: u128,
}

impl RowKey {
    fn new(row: Bytes) -> Self {
        let mut head = [0u8; 16];
        let n = row.len().min(16);
        if let (Some(dst), Some(src)) = (head.get_mut(..n), row.get(..n)) {
            dst.copy_from_slice(src);
        }
        RowKey {
            head: u128::from_be_bytes(head),
            row,
        }
    }
}

impl Ord for RowKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.head
            .cmp(&other.head)
            .then_with(|| self.row.cmp(&other.row))
    }
}

impl PartialOrd for RowKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for RowKey {
    fn eq(&self, other: &Self) -> bool {
        self.head == other.head && self.row == other.row
    }
}

impl Eq for RowKey {}

/// The bump allocator a MemStore copies its cells' bytes into, as HBase's MSLAB: one
/// insert's row key, qualifiers and values go into one contiguous span of a chunk, so a
/// row costs one span instead of one heap object per cell, and the chunk is freed when the
/// MemStore and the last cell read from it are gone. Chunks start small (a MemStore that
/// gets a few cells does not pin 2 MiB) and double up to [`CHUNK_MAX`].
#[derive(Default)]
struct Arena {
    cur: BytesMut,
    next_chunk: usize,
}

/// The first chunk's size.
const CHUNK_MIN: usize = 64 << 10;
/// The largest chunk (HBase's MSLAB chunk size).
const CHUNK_MAX: usize = 2 << 20;
/// Inserts larger than this get their own allocation (HBase's MSLAB max allocation).
const ARENA_MAX_ALLOC: usize = 256 << 10;

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("free", &(self.cur.capacity() - self.cur.len()))
            .finish()
    }
}

impl Arena {
    /// A span of `len` bytes that `fill` writes.
    fn take(&mut self, len: usize, fill: impl FnOnce(&mut BytesMut)) -> Bytes {
        if len > ARENA_MAX_ALLOC {
            let mut b = BytesMut::with_capacity(len);
            fill(&mut b);
            return b.freeze();
        }
        if self.cur.capacity() - self.cur.len() < len {
            let size = self.next_chunk.clamp(CHUNK_MIN, CHUNK_MAX);
            self.next_chunk = (size * 2).min(CHUNK_MAX);
            self.cur = BytesMut::with_capacity(size);
        }
        fill(&mut self.cur);
        self.cur.split().freeze()
    }
}

/// A row's cells, behind a pointer: the skiplist node holds its value before its key and
/// links, and an 88-byte value put every key and its links on different cache lines (CPU
/// per indexed put, whose index row lands at a random place, -3%). An `Arc` (one
/// allocation, as a `Box`) so that a scanner resuming inside a row, as a read skipping the
/// versions of its columns does once per column, keeps the row at hand instead of
/// searching the skiplist again.
type RowCells = Arc<RwLock<RowMap>>;

/// One row of a MemStore, found by [`MemStore::find_row`]: its cells stay readable (and
/// may still grow) while this is held.
pub struct MemRow {
    row: Bytes,
    cells: RowCells,
}

impl MemRow {
    /// Calls `f` on every cell of the row in key order until it returns false.
    pub fn for_each_cell_while(&self, f: impl FnMut(StoreCell) -> bool) {
        self.cells.read().for_each_cell_while(&self.row, f);
    }
}

/// One store's in-memory sorted cells.
#[derive(Debug)]
pub struct MemStore {
    rows: SkipMap<RowKey, RowCells>,
    /// Every row inserted (see [`RowFilter`]): most absent rows skip the skiplist search.
    filter: RowFilter,
    arena: Mutex<Arena>,
    size: AtomicUsize,
    len: AtomicUsize,
    max_seq: AtomicU64,
    /// Some delete marker was inserted.
    deletes: AtomicBool,
    /// Some column holds more than one cell (versions, or puts a later one shadows).
    stacked: AtomicBool,
}

impl Default for MemStore {
    fn default() -> Self {
        Self::for_rows(0)
    }
}

impl MemStore {
    /// An empty MemStore (its row filter at the smallest size).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty MemStore whose row filter is planned for `rows` rows (a flush plans the
    /// next MemStore for twice the rows of the one it flushes).
    pub fn for_rows(rows: usize) -> Self {
        MemStore {
            rows: SkipMap::new(),
            filter: RowFilter::for_rows(rows),
            arena: Mutex::default(),
            size: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            max_seq: AtomicU64::new(0),
            deletes: AtomicBool::new(false),
            stacked: AtomicBool::new(false),
        }
    }

    /// The number of rows held.
    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// Inserts one cell.
    pub fn insert(&self, cell: StoreCell) {
        self.insert_row(&cell.key.row, std::slice::from_ref(&cell));
    }

    /// Inserts cells that all belong to `row`, searching the row skiplist once. Their bytes
    /// (and the row key's) are copied into the MemStore's arena in one span.
    pub fn insert_row<'a, I>(&self, row: &Bytes, cells: I)
    where
        I: IntoIterator<Item = &'a StoreCell>,
        I::IntoIter: Clone,
    {
        let cells = cells.into_iter();
        let hint = cells.size_hint().0;
        let len = row.len()
            + cells
                .clone()
                .map(|c| c.key.qualifier.len() + c.value.len())
                .sum::<usize>();
        let blob = self.arena.lock().take(len, |b| {
            b.extend_from_slice(row);
            for c in cells.clone() {
                b.extend_from_slice(&c.key.qualifier);
                b.extend_from_slice(&c.value);
            }
        });
        let row_key = match blob.get(..row.len()) {
            Some(_) if !row.is_empty() => blob.slice(..row.len()),
            _ => row.clone(),
        };
        self.filter.insert(row);
        // One search: the row's map is built only when the row is new.
        let entry = self.rows.get_or_insert_with(RowKey::new(row_key), || {
            Arc::new(RwLock::new(RowMap::with_capacity(hint)))
        });
        // The shared counters are updated once per row, not once per cell: every writer of
        // this MemStore touches them, and each update moves their cache line between cores.
        let (mut size, mut max_seq, mut deletes) = (0, 0, false);
        let mut at = row.len();
        let placed = cells.map(|c| {
            size += c.heap_size();
            max_seq = max_seq.max(c.key.seq);
            deletes |= c.key.kind.is_delete();
            let here = at;
            at += c.key.qualifier.len() + c.value.len();
            (c, here)
        });
        let (added, stacked) = entry.value().write().insert_cells(&blob, placed);
        if deletes && !self.deletes.load(AtomicOrdering::Relaxed) {
            self.deletes.store(true, AtomicOrdering::Release);
        }
        if stacked && !self.stacked.load(AtomicOrdering::Relaxed) {
            self.stacked.store(true, AtomicOrdering::Release);
        }
        self.size.fetch_add(size, AtomicOrdering::Relaxed);
        self.max_seq.fetch_max(max_seq, AtomicOrdering::Relaxed);
        if added > 0 {
            self.len.fetch_add(added, AtomicOrdering::Relaxed);
        }
    }

    /// True when some cell of `row` was inserted.
    pub fn contains_row(&self, row: &Bytes) -> bool {
        self.filter.may_contain(row) && self.rows.contains_key(&RowKey::new(row.clone()))
    }

    /// False when no cell of `row` was ever inserted, for sure (the row filter alone: no
    /// search of the skiplist; true may be a false positive).
    pub fn may_contain_row(&self, row: &[u8]) -> bool {
        self.filter.may_contain(row)
    }

    /// The row `row` when some cell of it was inserted: the row filter answers most absent
    /// rows without a search of the skiplist.
    pub fn find_row(&self, row: &Bytes) -> Option<MemRow> {
        if !self.filter.may_contain(row) {
            return None;
        }
        let entry = self.rows.get(&RowKey::new(row.clone()))?;
        Some(MemRow {
            row: entry.key().row.clone(),
            cells: entry.value().clone(),
        })
    }

    /// Approximate bytes held.
    pub fn size(&self) -> usize {
        self.size.load(AtomicOrdering::Relaxed)
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    /// True when no cell was inserted.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// True when a flush may have cells to drop: a delete marker, or a column with more
    /// than one cell (an older version, or an older write of the same version). Without
    /// either, and without a TTL, the minor-compaction rules keep every cell.
    pub fn may_drop_cells(&self) -> bool {
        self.deletes.load(AtomicOrdering::Acquire) || self.stacked.load(AtomicOrdering::Acquire)
    }

    /// Largest sequence id inserted (0 when empty).
    pub fn max_seq(&self) -> u64 {
        self.max_seq.load(AtomicOrdering::Relaxed)
    }

    /// Every cell in order (for flush). Cells inserted during the walk may or may not appear.
    pub fn iter(&self) -> impl Iterator<Item = StoreCell> + '_ {
        self.rows.iter().flat_map(|e| {
            let row = e.key().row.clone();
            let mut cells: Vec<StoreCell> = Vec::new();
            e.value().read().for_each_cell(&row, |c| cells.push(c));
            cells
        })
    }

    /// Calls `f` on every cell in order, borrowed from the rows (for a flush: no cell is
    /// built), until it fails. Cells inserted during the walk may or may not appear.
    pub fn for_each_ref<E>(
        &self,
        mut f: impl FnMut(CellRef<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        for e in self.rows.iter() {
            e.value().read().for_each_ref(&e.key().row, &mut f)?;
        }
        Ok(())
    }

    /// Forward scanner over keys >= `start` (every key when `None`).
    pub fn scan_from(self: &Arc<Self>, start: Option<StoreKey>) -> MemStoreScanner {
        MemStoreScanner::new(self.clone(), start, false)
    }

    /// Forward scanner over the cells of `start`'s row from `start` on: a point read
    /// copies nothing of the rows after it.
    pub fn scan_row_from(self: &Arc<Self>, start: StoreKey) -> MemStoreScanner {
        let mut s = MemStoreScanner::new(self.clone(), None, false);
        s.only_row = Some(start.row.clone());
        s.seek(&start);
        s
    }

    /// Reverse scanner over keys <= `start` (every key when `None`), descending.
    pub fn scan_rev_from(self: &Arc<Self>, start: Option<StoreKey>) -> MemStoreScanner {
        MemStoreScanner::new(self.clone(), start, true)
    }
}

#[cfg(test)]
mod tests;
