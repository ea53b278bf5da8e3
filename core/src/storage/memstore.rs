//! The MemStore: the sorted in-memory buffer of one store's recent writes.
//!
//! Two levels: a lock-free skiplist of rows, and per row a small sorted map of its cells
//! (qualifier, timestamp descending, type, sequence id descending) behind a short read-write
//! lock. A put of ten columns searches the big skiplist once instead of ten times, which is
//! where a wide-column store spends its write time. A row's map is a sorted vector while the
//! row has at most `NARROW_MAX` (32) cells (a one-cell index row costs one 88-byte entry, not a
//! B-tree leaf of eleven) and becomes a B-tree past that, so wide rows and long version
//! chains stay logarithmic.
//!
//! Invariants: together the levels hold exactly the [`StoreKey`] order of the cells; a key is
//! inserted once (sequence ids make keys unique; a replayed duplicate carries an identical key
//! and value, so overwriting is harmless); a row once present is never removed while the
//! MemStore lives. The MemStore never filters by read point: the matcher does.

use crate::cell::{same_bytes, CellType, StoreCell, StoreKey, Timestamp};
use crate::error::Result;
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use parking_lot::RwLock;
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

/// A cell's key within its row.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ColKey {
    qualifier: Bytes,
    ts: Timestamp,
    kind: CellType,
    seq: u64,
}

impl Ord for ColKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.qualifier
            .cmp(&other.qualifier)
            .then_with(|| other.ts.cmp(&self.ts))
            .then_with(|| other.kind.code().cmp(&self.kind.code()))
            .then_with(|| other.seq.cmp(&self.seq))
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

/// A row key in the row skiplist: its first 16 bytes as a big-endian number (zero-padded)
/// beside the key. Comparing the numbers first orders keys exactly as comparing their bytes
/// (when the numbers differ, they differ where the bytes first do, or where the shorter
/// key ended), and it decides most comparisons of a search without following the key's
/// pointer: random keys (index rows, hashed row keys) miss the cache once per skiplist
/// node instead of twice.
#[derive(Debug, Clone)]
struct RowKey {
    head: u128,
    row: Bytes,
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

/// One row's cells in [`ColKey`] order.
#[derive(Debug)]
enum RowMap {
    /// Sorted by key, no duplicates, at most [`NARROW_MAX`] entries.
    Narrow(Vec<(ColKey, Bytes)>),
    /// Past [`NARROW_MAX`] cells.
    Wide(BTreeMap<ColKey, Bytes>),
}

impl RowMap {
    fn with_capacity(n: usize) -> Self {
        RowMap::Narrow(Vec::with_capacity(n.min(NARROW_MAX)))
    }

    /// Inserts or overwrites; says whether the key was new and whether its column now holds
    /// more than one cell.
    fn insert(&mut self, k: ColKey, v: Bytes) -> Inserted {
        match self {
            RowMap::Narrow(cells) => {
                // Cells of one put arrive in order: try the end first.
                let at = match cells.last() {
                    Some((last, _)) if *last < k => Err(cells.len()),
                    None => Err(0),
                    _ => cells.binary_search_by(|(x, _)| x.cmp(&k)),
                };
                match at {
                    Ok(i) => {
                        if let Some(slot) = cells.get_mut(i) {
                            slot.1 = v;
                        }
                        Inserted::Overwrote
                    }
                    Err(i) => {
                        let same_col = |j: Option<usize>| {
                            j.and_then(|j| cells.get(j))
                                .is_some_and(|(n, _)| same_bytes(&n.qualifier, &k.qualifier))
                        };
                        let stacked = same_col(i.checked_sub(1)) || same_col(Some(i));
                        if cells.len() < NARROW_MAX {
                            cells.insert(i, (k, v));
                        } else {
                            let mut wide: BTreeMap<ColKey, Bytes> =
                                std::mem::take(cells).into_iter().collect();
                            wide.insert(k, v);
                            *self = RowMap::Wide(wide);
                        }
                        Inserted::New { stacked }
                    }
                }
            }
            RowMap::Wide(m) => {
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
        }
    }

    /// Calls `f` on every cell in order.
    fn for_each(&self, mut f: impl FnMut(&ColKey, &Bytes)) {
        match self {
            RowMap::Narrow(cells) => cells.iter().for_each(|(k, v)| f(k, v)),
            RowMap::Wide(m) => m.iter().for_each(|(k, v)| f(k, v)),
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
        let mut last: Option<&ColKey> = None;
        let mut push = |k: &ColKey, v: &Bytes| {
            out.push(k.cell(row, v));
            taken += 1;
        };
        match self {
            RowMap::Narrow(cells) => {
                if reverse {
                    let end = match &col {
                        Bound::Unbounded => cells.len(),
                        Bound::Included(b) => cells.partition_point(|(k, _)| k <= b),
                        Bound::Excluded(b) => cells.partition_point(|(k, _)| k < b),
                    };
                    for (k, v) in cells.get(..end).unwrap_or_default().iter().rev().take(room) {
                        push(k, v);
                        last = Some(k);
                    }
                } else {
                    let start = match &col {
                        Bound::Unbounded => 0,
                        Bound::Included(b) => cells.partition_point(|(k, _)| k < b),
                        Bound::Excluded(b) => cells.partition_point(|(k, _)| k <= b),
                    };
                    for (k, v) in cells.get(start..).unwrap_or_default().iter().take(room) {
                        push(k, v);
                        last = Some(k);
                    }
                }
            }
            RowMap::Wide(m) => {
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
            }
        }
        (taken, last.cloned())
    }
}

/// What [`RowMap::insert`] did.
enum Inserted {
    /// The key was there already; its value was replaced.
    Overwrote,
    /// The key is new; `stacked` when its column holds another cell too.
    New { stacked: bool },
}

type RowCells = RwLock<RowMap>;

/// One store's in-memory sorted cells.
#[derive(Debug, Default)]
pub struct MemStore {
    rows: SkipMap<RowKey, RowCells>,
    size: AtomicUsize,
    len: AtomicUsize,
    max_seq: AtomicU64,
    /// Some delete marker was inserted.
    deletes: AtomicBool,
    /// Some column holds more than one cell (versions, or puts a later one shadows).
    stacked: AtomicBool,
}

impl MemStore {
    /// An empty MemStore.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts one cell.
    pub fn insert(&self, cell: StoreCell) {
        self.insert_row(cell.key.row.clone(), std::iter::once(cell));
    }

    /// Inserts cells that all belong to `row`, searching the row skiplist once.
    pub fn insert_row(&self, row: Bytes, cells: impl IntoIterator<Item = StoreCell>) {
        let cells = cells.into_iter();
        // One search: the row's map is built only when the row is new.
        let hint = cells.size_hint().0;
        let entry = self.rows.get_or_insert_with(RowKey::new(row), || {
            RwLock::new(RowMap::with_capacity(hint))
        });
        // The shared counters are updated once per row, not once per cell: every writer of
        // this MemStore touches them, and each update moves their cache line between cores.
        let (mut size, mut max_seq, mut added) = (0, 0, 0);
        let (mut deletes, mut stacked) = (false, false);
        {
            let mut map = entry.value().write();
            for cell in cells {
                size += cell.heap_size();
                max_seq = max_seq.max(cell.key.seq);
                deletes |= cell.key.kind.is_delete();
                if let Inserted::New { stacked: s } = map.insert(ColKey::of(&cell.key), cell.value)
                {
                    added += 1;
                    stacked |= s;
                }
            }
        }
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
        self.rows.contains_key(&RowKey::new(row.clone()))
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
            e.value()
                .read()
                .for_each(|k, v| cells.push(k.cell(&row, v)));
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
