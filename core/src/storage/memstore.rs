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

use crate::cell::{same_bytes, CellType, StoreCell, StoreKey, Timestamp};
use crate::error::Result;
use crate::storage::row_filter::RowFilter;
use bytes::{Bytes, BytesMut};
use crossbeam_skiplist::SkipMap;
use parking_lot::{Mutex, RwLock};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// How many cells a MemStore scanner copies out on its first refill; each refill doubles it
/// up to [`MAX_CHUNK`], so point reads copy little and scans amortize.
const FIRST_CHUNK: usize = 16;
/// The largest refill.
const MAX_CHUNK: usize = 512;

/// A cell's key within its row (the form wide rows, scanner cursors and bounds use).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ColKey {
    qualifier: Bytes,
    ts: Timestamp,
    kind: CellType,
    seq: u64,
}

impl Ord for ColKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_ref().cmp(&other.as_ref())
    }
}

impl PartialOrd for ColKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl ColKey {
    fn of(k: &StoreKey) -> Self {
        ColKey {
            qualifier: k.qualifier.clone(),
            ts: k.ts,
            kind: k.kind,
            seq: k.seq,
        }
    }

    fn as_ref(&self) -> ColRef<'_> {
        ColRef {
            qualifier: &self.qualifier,
            ts: self.ts,
            kind: self.kind,
            seq: self.seq,
        }
    }

    fn cell(&self, row: &Bytes, value: &Bytes) -> StoreCell {
        StoreCell {
            key: StoreKey {
                row: row.clone(),
                qualifier: self.qualifier.clone(),
                ts: self.ts,
                kind: self.kind,
                seq: self.seq,
            },
            value: value.clone(),
        }
    }
}

/// A cell's key within its row, borrowed: qualifier ascending, then timestamp, type code
/// and sequence id descending (the [`StoreKey`] order inside one row).
#[derive(Debug, Clone, Copy)]
struct ColRef<'a> {
    qualifier: &'a [u8],
    ts: Timestamp,
    kind: CellType,
    seq: u64,
}

impl ColRef<'_> {
    fn cmp(&self, other: &ColRef<'_>) -> Ordering {
        self.qualifier
            .cmp(other.qualifier)
            .then_with(|| other.ts.cmp(&self.ts))
            .then_with(|| other.kind.rank().cmp(&self.kind.rank()))
            .then_with(|| other.seq.cmp(&self.seq))
            .then_with(|| other.kind.code().cmp(&self.kind.code()))
    }
}

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

/// The most cells a row keeps in a sorted vector; one more turns it into a B-tree.
const NARROW_MAX: usize = 32;

/// The most buffers a narrow row refers to (one per insert into the row); one more turns
/// it into a B-tree.
const NARROW_MAX_BUFS: usize = 255;

/// A cell of a narrow row: its key, and where its qualifier and value sit in one of the
/// row's buffers. 40 bytes, where a (ColKey, value) pair of `Bytes` takes 88.
#[derive(Debug, Clone, Copy)]
struct Slot {
    q_at: u32,
    q_len: u32,
    v_at: u32,
    v_len: u32,
    ts: Timestamp,
    seq: u64,
    kind: CellType,
    /// Index of the buffer: 0 is `Narrow::first`, i > 0 is `Narrow::more[i - 1]`.
    buf: u8,
}

/// A row of at most [`NARROW_MAX`] cells: the buffers its inserts copied their bytes into
/// (usually one), and its cells sorted by key, without duplicates.
#[derive(Debug, Default)]
struct Narrow {
    first: Bytes,
    more: Vec<Bytes>,
    slots: Vec<Slot>,
}

impl Narrow {
    fn buf(&self, i: u8) -> &Bytes {
        match i.checked_sub(1) {
            None => &self.first,
            // A slot's index always names a registered buffer.
            Some(j) => self.more.get(usize::from(j)).unwrap_or(&self.first),
        }
    }

    fn bytes(&self, i: u8, at: u32, len: u32) -> &[u8] {
        let (at, len) = (at as usize, len as usize);
        self.buf(i).get(at..at + len).unwrap_or_default()
    }

    /// A `Bytes` view of a span (no copy; empty spans share nothing).
    fn slice(&self, i: u8, at: u32, len: u32) -> Bytes {
        let (at, len) = (at as usize, len as usize);
        let b = self.buf(i);
        if len == 0 || at + len > b.len() {
            Bytes::new()
        } else {
            b.slice(at..at + len)
        }
    }

    fn key(&self, s: &Slot) -> ColRef<'_> {
        ColRef {
            qualifier: self.bytes(s.buf, s.q_at, s.q_len),
            ts: s.ts,
            kind: s.kind,
            seq: s.seq,
        }
    }

    fn col_key(&self, s: &Slot) -> ColKey {
        ColKey {
            qualifier: self.slice(s.buf, s.q_at, s.q_len),
            ts: s.ts,
            kind: s.kind,
            seq: s.seq,
        }
    }

    fn cell(&self, row: &Bytes, s: &Slot) -> StoreCell {
        StoreCell {
            key: StoreKey {
                row: row.clone(),
                qualifier: self.slice(s.buf, s.q_at, s.q_len),
                ts: s.ts,
                kind: s.kind,
                seq: s.seq,
            },
            value: self.slice(s.buf, s.v_at, s.v_len),
        }
    }

    /// Registers `blob` as one of the row's buffers; `None` when the row has too many or
    /// the blob is too long for 32-bit offsets.
    fn register(&mut self, blob: &Bytes) -> Option<u8> {
        if u32::try_from(blob.len()).is_err() {
            return None;
        }
        if self.first.is_empty() && self.more.is_empty() {
            self.first = blob.clone();
            return Some(0);
        }
        if self.more.len() >= NARROW_MAX_BUFS {
            return None;
        }
        self.more.push(blob.clone());
        u8::try_from(self.more.len()).ok()
    }

    /// Inserts `c`, whose qualifier sits at `at` in buffer `b` and whose value follows it;
    /// `None` (nothing changed) when the row is full and the key is new.
    fn insert(&mut self, b: u8, at: usize, c: &StoreCell) -> Option<Inserted> {
        let k = ColRef {
            qualifier: &c.key.qualifier,
            ts: c.key.ts,
            kind: c.key.kind,
            seq: c.key.seq,
        };
        // Cells of one put arrive in order: try the end first.
        let pos = match self.slots.last() {
            Some(last) if self.key(last).cmp(&k) == Ordering::Less => Err(self.slots.len()),
            None => Err(0),
            _ => self.slots.binary_search_by(|s| self.key(s).cmp(&k)),
        };
        // `register` checked the buffer's length, so the offsets fit.
        let q_len = c.key.qualifier.len();
        let slot = Slot {
            q_at: at as u32,
            q_len: q_len as u32,
            v_at: (at + q_len) as u32,
            v_len: c.value.len() as u32,
            ts: c.key.ts,
            seq: c.key.seq,
            kind: c.key.kind,
            buf: b,
        };
        match pos {
            Ok(i) => {
                if let Some(s) = self.slots.get_mut(i) {
                    *s = slot;
                }
                Some(Inserted::Overwrote)
            }
            Err(i) => {
                if self.slots.len() >= NARROW_MAX {
                    return None;
                }
                let same_col = |j: Option<usize>| {
                    j.and_then(|j| self.slots.get(j)).is_some_and(|s| {
                        same_bytes(self.bytes(s.buf, s.q_at, s.q_len), &c.key.qualifier)
                    })
                };
                let stacked = same_col(i.checked_sub(1)) || same_col(Some(i));
                self.slots.insert(i, slot);
                Some(Inserted::New { stacked })
            }
        }
    }

    /// The first slot index whose key is not before `b` (`or_equal`: not at or before).
    fn position(&self, b: &ColKey, or_equal: bool) -> usize {
        let b = b.as_ref();
        self.slots.partition_point(|s| match self.key(s).cmp(&b) {
            Ordering::Less => true,
            Ordering::Equal => or_equal,
            Ordering::Greater => false,
        })
    }
}

/// One row's cells in [`ColKey`] order.
#[derive(Debug)]
enum RowMap {
    /// At most [`NARROW_MAX`] cells.
    Narrow(Narrow),
    /// Past [`NARROW_MAX`] cells (or [`NARROW_MAX_BUFS`] buffers).
    Wide(BTreeMap<ColKey, Bytes>),
}

impl RowMap {
    fn with_capacity(n: usize) -> Self {
        RowMap::Narrow(Narrow {
            slots: Vec::with_capacity(n.min(NARROW_MAX)),
            ..Narrow::default()
        })
    }

    /// Turns a narrow row into a B-tree.
    fn widen(&mut self) {
        if let RowMap::Narrow(n) = self {
            let wide = n
                .slots
                .iter()
                .map(|s| (n.col_key(s), n.slice(s.buf, s.v_at, s.v_len)))
                .collect();
            *self = RowMap::Wide(wide);
        }
    }

    /// Inserts or overwrites `cells`, each given with the offset of its qualifier in `blob`
    /// (its value follows the qualifier); returns how many keys were new and whether a
    /// column now holds more than one cell.
    fn insert_cells<'a>(
        &mut self,
        blob: &Bytes,
        cells: impl Iterator<Item = (&'a StoreCell, usize)>,
    ) -> (usize, bool) {
        let mut b = None;
        if let RowMap::Narrow(n) = self {
            b = n.register(blob);
            if b.is_none() {
                self.widen();
            }
        }
        let (mut added, mut stacked) = (0, false);
        for (c, at) in cells {
            let done = match (&mut *self, b) {
                (RowMap::Narrow(n), Some(b)) => n.insert(b, at, c),
                _ => None,
            };
            let r = match done {
                Some(r) => r,
                None => {
                    self.widen();
                    self.insert_wide(blob, at, c)
                }
            };
            if let Inserted::New { stacked: s } = r {
                added += 1;
                stacked |= s;
            }
        }
        (added, stacked)
    }

    fn insert_wide(&mut self, blob: &Bytes, at: usize, c: &StoreCell) -> Inserted {
        let RowMap::Wide(m) = self else {
            return Inserted::Overwrote; // only called on wide rows
        };
        let span = |at: usize, len: usize| match blob.get(at..at + len) {
            Some(_) if len > 0 => blob.slice(at..at + len),
            _ => Bytes::new(),
        };
        let q_len = c.key.qualifier.len();
        let k = ColKey {
            qualifier: span(at, q_len),
            ts: c.key.ts,
            kind: c.key.kind,
            seq: c.key.seq,
        };
        let v = span(at + q_len, c.value.len());
        let same_col = |n: Option<(&ColKey, &Bytes)>| {
            n.is_some_and(|(n, _)| same_bytes(&n.qualifier, &k.qualifier))
        };
        // Neighbours before the insert (used only when the key is new).
        let stacked = same_col(m.range(..&k).next_back()) || same_col(m.range(&k..).next());
        match m.insert(k, v) {
            Some(_) => Inserted::Overwrote,
            None => Inserted::New { stacked },
        }
    }

    /// Calls `f` on every cell in order.
    fn for_each_cell(&self, row: &Bytes, mut f: impl FnMut(StoreCell)) {
        match self {
            RowMap::Narrow(n) => n.slots.iter().for_each(|s| f(n.cell(row, s))),
            RowMap::Wide(m) => m.iter().for_each(|(k, v)| f(k.cell(row, v))),
        }
    }

    /// Appends to `out` up to `room` cells of `row` from `col` on (forward: keys in `col..`;
    /// reverse: keys in `..col` descending); returns how many and the last key taken.
    fn take_range(
        &self,
        row: &Bytes,
        col: Bound<ColKey>,
        reverse: bool,
        room: usize,
        out: &mut Vec<StoreCell>,
    ) -> (usize, Option<ColKey>) {
        let mut taken = 0;
        match self {
            RowMap::Narrow(n) => {
                let mut last: Option<&Slot> = None;
                let mut push = |s: &Slot| {
                    out.push(n.cell(row, s));
                    taken += 1;
                };
                if reverse {
                    let end = match &col {
                        Bound::Unbounded => n.slots.len(),
                        Bound::Included(b) => n.position(b, true),
                        Bound::Excluded(b) => n.position(b, false),
                    };
                    for s in n
                        .slots
                        .get(..end)
                        .unwrap_or_default()
                        .iter()
                        .rev()
                        .take(room)
                    {
                        push(s);
                        last = Some(s);
                    }
                } else {
                    let start = match &col {
                        Bound::Unbounded => 0,
                        Bound::Included(b) => n.position(b, false),
                        Bound::Excluded(b) => n.position(b, true),
                    };
                    for s in n.slots.get(start..).unwrap_or_default().iter().take(room) {
                        push(s);
                        last = Some(s);
                    }
                }
                (taken, last.map(|s| n.col_key(s)))
            }
            RowMap::Wide(m) => {
                let mut last: Option<&ColKey> = None;
                let mut push = |k: &ColKey, v: &Bytes| {
                    out.push(k.cell(row, v));
                    taken += 1;
                };
                if reverse {
                    for (k, v) in m.range((Bound::Unbounded, col)).rev().take(room) {
                        push(k, v);
                        last = Some(k);
                    }
                } else {
                    for (k, v) in m.range((col, Bound::Unbounded)).take(room) {
                        push(k, v);
                        last = Some(k);
                    }
                }
                (taken, last.cloned())
            }
        }
    }
}

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

/// What an insert of one cell did.
enum Inserted {
    /// The key was there already; its value was replaced.
    Overwrote,
    /// The key is new; `stacked` when its column holds another cell too.
    New { stacked: bool },
}

/// A row's cells, boxed: the skiplist node holds its value before its key and links, and
/// an 88-byte value put every key and its links on different cache lines (CPU per indexed
/// put, whose index row lands at a random place, -3%).
type RowCells = Box<RwLock<RowMap>>;

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
            Box::new(RwLock::new(RowMap::with_capacity(hint)))
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

/// Where a scanner resumes: a row, and a bound on the column keys inside it.
#[derive(Debug)]
struct Cursor {
    row: Bound<Bytes>,
    col: Bound<ColKey>,
}

/// Iterates a MemStore in chunks, so it holds no borrow or lock between calls.
#[derive(Debug)]
pub struct MemStoreScanner {
    mem: Arc<MemStore>,
    next: Option<Cursor>,
    /// Buffered cells, stored reversed so `pop` yields the next one.
    buf: Vec<StoreCell>,
    chunk: usize,
    reverse: bool,
    /// Set for a point read: the scanner ends at the end of this row.
    only_row: Option<Bytes>,
}

impl MemStoreScanner {
    fn new(mem: Arc<MemStore>, start: Option<StoreKey>, reverse: bool) -> Self {
        let next = Some(match start {
            None => Cursor {
                row: Bound::Unbounded,
                col: Bound::Unbounded,
            },
            Some(k) => Cursor {
                col: Bound::Included(ColKey::of(&k)),
                row: Bound::Included(k.row),
            },
        });
        MemStoreScanner {
            mem,
            next,
            buf: Vec::new(),
            chunk: FIRST_CHUNK,
            reverse,
            only_row: None,
        }
    }

    /// Repositions the scanner at `key`: the next cell is the first at or after it (at or
    /// before it when reverse).
    pub fn seek(&mut self, key: &StoreKey) {
        self.next = Some(Cursor {
            col: Bound::Included(ColKey::of(key)),
            row: Bound::Included(key.row.clone()),
        });
        self.buf.clear();
        self.chunk = FIRST_CHUNK;
    }

    fn refill(&mut self) {
        let want = self.chunk;
        self.chunk = (self.chunk * 2).min(MAX_CHUNK);
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            let Some(cur) = self.next.take() else { break };
            let entry = if self.reverse {
                match &cur.row {
                    Bound::Unbounded => self.mem.rows.back(),
                    b => self
                        .mem
                        .rows
                        .upper_bound(b.clone().map(RowKey::new).as_ref()),
                }
            } else {
                self.mem
                    .rows
                    .lower_bound(cur.row.clone().map(RowKey::new).as_ref())
            };
            let Some(entry) = entry else { break };
            if self
                .only_row
                .as_ref()
                .is_some_and(|r| *r != entry.key().row)
            {
                break;
            }
            let row = entry.key().row.clone();
            // The column bound applies only inside the row the cursor names.
            let col = match &cur.row {
                Bound::Included(r) if *r == row => cur.col,
                _ => Bound::Unbounded,
            };
            let room = want - out.len();
            let (taken, last) =
                entry
                    .value()
                    .read()
                    .take_range(&row, col, self.reverse, room, &mut out);
            self.next = Some(if taken == room {
                // The chunk filled up: resume inside this row, after the last cell taken.
                Cursor {
                    row: Bound::Included(row),
                    col: match last {
                        Some(k) => Bound::Excluded(k),
                        None => Bound::Unbounded,
                    },
                }
            } else {
                Cursor {
                    row: Bound::Excluded(row),
                    col: Bound::Unbounded,
                }
            });
        }
        out.reverse();
        self.buf = out;
    }
}

impl Iterator for MemStoreScanner {
    type Item = Result<StoreCell>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            self.refill();
        }
        self.buf.pop().map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cell(row: &str, q: &str, ts: u64, seq: u64) -> StoreCell {
        StoreCell {
            key: StoreKey {
                row: Bytes::copy_from_slice(row.as_bytes()),
                qualifier: Bytes::copy_from_slice(q.as_bytes()),
                ts,
                kind: CellType::Put,
                seq,
            },
            value: Bytes::from_static(b"v"),
        }
    }

    #[test]
    fn may_drop_cells_only_after_a_delete_or_a_second_cell_in_a_column() {
        // Narrow rows, a wide row (past NARROW_MAX cells), and each way a column can stack.
        let puts_only = MemStore::new();
        for i in 0..40u64 {
            puts_only.insert(cell("wide", &format!("q{i:02}"), 5, 1));
            puts_only.insert(cell(&format!("r{i}"), "a", 5, 1));
            puts_only.insert(cell(&format!("r{i}"), "b", 5, 1));
        }
        // The same key again (a replayed duplicate) overwrites: still nothing to drop.
        puts_only.insert(cell("r1", "a", 5, 1));
        puts_only.insert(cell("wide", "q07", 5, 1));
        assert!(!puts_only.may_drop_cells());

        let older_version = MemStore::new();
        older_version.insert(cell("r", "a", 5, 1));
        older_version.insert(cell("r", "b", 5, 1));
        older_version.insert(cell("r", "a", 4, 2));
        assert!(older_version.may_drop_cells());

        let same_version_later = MemStore::new();
        same_version_later.insert(cell("r", "a", 5, 1));
        same_version_later.insert(cell("r", "a", 5, 2));
        assert!(same_version_later.may_drop_cells());

        let wide_stacked = MemStore::new();
        for i in 0..40u64 {
            wide_stacked.insert(cell("wide", &format!("q{i:02}"), 5, 1));
        }
        assert!(!wide_stacked.may_drop_cells());
        wide_stacked.insert(cell("wide", "q39", 6, 2));
        assert!(wide_stacked.may_drop_cells());

        let delete = MemStore::new();
        delete.insert(cell("r", "a", 5, 1));
        let mut marker = cell("s", "a", 5, 2);
        marker.key.kind = CellType::DeleteColumn;
        marker.value = Bytes::new();
        delete.insert(marker);
        assert!(delete.may_drop_cells());
    }

    #[test]
    fn scans_both_ways_across_chunks() {
        let m = Arc::new(MemStore::new());
        for i in 0..1000u64 {
            m.insert(cell(&format!("r{i:04}"), "q", 1, i));
        }
        let fwd: Vec<_> = m
            .scan_from(Some(StoreKey::first_on_row(Bytes::from_static(b"r0500"))))
            .map(|c| c.unwrap().key.row)
            .collect();
        assert_eq!(fwd.len(), 500);
        assert_eq!(fwd[0], Bytes::from_static(b"r0500"));
        let rev: Vec<_> = m
            .scan_rev_from(Some(StoreKey::first_on_row(Bytes::from_static(b"r0500"))))
            .map(|c| c.unwrap().key.row)
            .collect();
        assert_eq!(rev.len(), 500);
        assert_eq!(rev[0], Bytes::from_static(b"r0499"));
        assert_eq!(rev[499], Bytes::from_static(b"r0000"));
        assert_eq!(m.len(), 1000);
        assert_eq!(m.max_seq(), 999);
    }

    #[test]
    fn a_row_rewritten_past_its_buffer_limit_turns_wide_and_keeps_the_latest_value() {
        // Each insert copies into a new span; a narrow row refers to at most 255 of them.
        let m = Arc::new(MemStore::new());
        for i in 0..300u64 {
            let mut c = cell("r", "q", 5, 1); // the same key each time: a replayed duplicate
            c.value = Bytes::from(format!("v{i}"));
            m.insert(c);
            let mut other = cell("r", "p", 5, 1);
            other.value = Bytes::from(format!("w{i}"));
            m.insert(other);
        }
        assert_eq!(m.len(), 2);
        let cells: Vec<_> = m.iter().collect();
        assert_eq!(cells.len(), 2);
        assert_eq!(cells[0].key.qualifier, Bytes::from_static(b"p"));
        assert_eq!(cells[0].value, Bytes::from_static(b"w299"));
        assert_eq!(cells[1].value, Bytes::from_static(b"v299"));
        assert!(!m.may_drop_cells());
    }

    #[test]
    fn large_inserts_bypass_the_arena_and_read_back_whole() {
        let m = Arc::new(MemStore::new());
        let big = Bytes::from(vec![7u8; ARENA_MAX_ALLOC + 10]);
        let mut cells = Vec::new();
        for q in ["a", "b", "c"] {
            let mut c = cell("r", q, 1, 1);
            c.value = big.clone();
            cells.push(c);
        }
        m.insert_row(&Bytes::from_static(b"r"), &cells);
        m.insert(cell("s", "a", 1, 2));
        let got: Vec<_> = m.iter().collect();
        assert_eq!(got.len(), 4);
        for (g, c) in got.iter().zip(&cells) {
            assert_eq!(g, c);
        }
        assert_eq!(got[3].key.row, Bytes::from_static(b"s"));
    }

    fn arb_cell() -> impl Strategy<Value = StoreCell> {
        (
            prop::sample::select(vec![
                "",
                "a",
                "a\0",
                "ab",
                "b",
                "c",
                "0123456789abcdef",
                "0123456789abcdef\0",
                "0123456789abcdefg",
                "0123456789abcdeg",
            ]),
            prop::sample::select(vec!["", "q", "qq", "r"]),
            0u64..4,
            prop::sample::select(vec![
                CellType::Put,
                CellType::Delete,
                CellType::DeleteColumn,
                CellType::DeleteFamily,
                CellType::DeleteFamilyVersion,
            ]),
            0u64..6,
        )
            .prop_map(|(r, q, ts, kind, seq)| StoreCell {
                key: StoreKey {
                    row: Bytes::copy_from_slice(r.as_bytes()),
                    qualifier: Bytes::copy_from_slice(q.as_bytes()),
                    ts,
                    kind,
                    seq,
                },
                value: Bytes::copy_from_slice(format!("{r}{q}{ts}{seq}").as_bytes()),
            })
    }

    proptest! {
        /// Cells inserted a row at a time (as a put writes them: one span per insert, rows
        /// that grow past the narrow limit across inserts) read back as one sorted map.
        #[test]
        fn row_inserts_match_a_sorted_map(
            batches in prop::collection::vec(
                (0usize..4, prop::collection::vec((0usize..40, 0u64..3, 0usize..120), 1..24)),
                1..30,
            ),
        ) {
            let m = Arc::new(MemStore::new());
            let mut model = std::collections::BTreeMap::new();
            for (seq, (r, cols)) in batches.iter().enumerate() {
                let row = Bytes::from(format!("row{r}"));
                let mut cells: Vec<StoreCell> = cols
                    .iter()
                    .map(|(q, ts, vlen)| StoreCell {
                        key: StoreKey {
                            row: row.clone(),
                            qualifier: Bytes::from(format!("q{q:02}")),
                            ts: *ts,
                            kind: if *vlen == 0 { CellType::DeleteColumn } else { CellType::Put },
                            seq: seq as u64,
                        },
                        value: Bytes::from(vec![b'a' + (*q % 26) as u8; *vlen]),
                    })
                    .collect();
                cells.sort_by(|a, b| a.key.cmp(&b.key));
                cells.dedup_by(|a, b| a.key == b.key);
                m.insert_row(&row, &cells);
                for c in cells {
                    model.insert(c.key, c.value);
                }
            }
            prop_assert_eq!(m.len(), model.len());
            let all: Vec<_> = m.iter().map(|c| (c.key, c.value)).collect();
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(all, want);
            let rev: Vec<_> = m.scan_rev_from(None).map(|c| c.map(|c| c.key)).collect::<Result<_>>().unwrap_or_default();
            let want_rev: Vec<_> = model.keys().rev().cloned().collect();
            prop_assert_eq!(rev, want_rev);
        }

        /// Row keys with their 16-byte heads order exactly as their bytes, around the
        /// 16th byte, with zero bytes and with one key a prefix of the other.
        #[test]
        fn row_keys_order_as_bytes(
            a in prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 255]), 0..24),
            keep in 0usize..24,
            tail in prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 255]), 0..8),
        ) {
            // b shares a prefix of any length with a, then goes its own way.
            let mut b: Vec<u8> = a.iter().copied().take(keep).collect();
            b.extend(tail);
            let (ka, kb) = (RowKey::new(Bytes::from(a.clone())), RowKey::new(Bytes::from(b.clone())));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert_eq!(ka == kb, a == b);
        }

        /// The two-level MemStore scans exactly like one sorted map of StoreKeys, from any
        /// start key, forward and reverse, across chunk boundaries; a row scanner yields
        /// exactly the start row's cells from the start key on.
        #[test]
        fn matches_a_sorted_map(
            cells in prop::collection::vec(arb_cell(), 0..300),
            start in prop::option::of(arb_cell()),
        ) {
            let m = Arc::new(MemStore::new());
            let mut model = std::collections::BTreeMap::new();
            for c in &cells {
                m.insert(c.clone());
                model.insert(c.key.clone(), c.value.clone());
            }
            prop_assert_eq!(m.len(), model.len());
            let all: Vec<_> = m.iter().map(|c| (c.key, c.value)).collect();
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(all, want);
            let start_key = start.map(|c| c.key);
            let fwd: Vec<_> = m.scan_from(start_key.clone()).map(|c| c.unwrap().key).collect();
            let want_fwd: Vec<_> = match &start_key {
                Some(k) => model.range(k.clone()..).map(|(k, _)| k.clone()).collect(),
                None => model.keys().cloned().collect(),
            };
            prop_assert_eq!(fwd, want_fwd);
            let rev: Vec<_> = m.scan_rev_from(start_key.clone()).map(|c| c.unwrap().key).collect();
            let want_rev: Vec<_> = match &start_key {
                Some(k) => model.range(..=k.clone()).rev().map(|(k, _)| k.clone()).collect(),
                None => model.keys().rev().cloned().collect(),
            };
            prop_assert_eq!(rev, want_rev);
            if let Some(k) = &start_key {
                let row: Vec<_> = m.scan_row_from(k.clone()).map(|c| c.unwrap().key).collect();
                let want_row: Vec<_> = model
                    .range(k.clone()..)
                    .map(|(k, _)| k.clone())
                    .take_while(|c| c.row == k.row)
                    .collect();
                prop_assert_eq!(row, want_row);
            }
        }
    }
}
