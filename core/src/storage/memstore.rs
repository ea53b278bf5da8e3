//! The MemStore: the sorted in-memory buffer of one store's recent writes.
//!
//! A lock-free skiplist of [`StoreKey`] -> value. Writers insert concurrently; readers iterate
//! without blocking writers. Invariant: a key is inserted once (sequence ids make keys unique;
//! a replayed duplicate carries an identical key and value, so overwriting is harmless).
//! The MemStore never filters by read point: the matcher does.

use crate::cell::{StoreCell, StoreKey};
use crate::error::Result;
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// How many cells a MemStore scanner copies out of the skiplist on its first refill; each
/// refill doubles it up to [`MAX_CHUNK`], so point reads copy little and scans amortize.
const FIRST_CHUNK: usize = 16;
/// The largest refill.
const MAX_CHUNK: usize = 512;

/// One store's in-memory sorted cells.
#[derive(Debug, Default)]
pub struct MemStore {
    map: SkipMap<StoreKey, Bytes>,
    size: AtomicUsize,
    max_seq: AtomicU64,
}

impl MemStore {
    /// An empty MemStore.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts one cell.
    pub fn insert(&self, cell: StoreCell) {
        self.size.fetch_add(cell.heap_size(), Ordering::Relaxed);
        self.max_seq.fetch_max(cell.key.seq, Ordering::Relaxed);
        self.map.insert(cell.key, cell.value);
    }

    /// Approximate bytes held.
    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no cell was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Largest sequence id inserted (0 when empty).
    pub fn max_seq(&self) -> u64 {
        self.max_seq.load(Ordering::Relaxed)
    }

    /// Every cell in order (for flush).
    pub fn iter(&self) -> impl Iterator<Item = StoreCell> + '_ {
        self.map.iter().map(|e| StoreCell {
            key: e.key().clone(),
            value: e.value().clone(),
        })
    }

    /// Forward scanner over keys >= `start` (every key when `None`).
    pub fn scan_from(self: &Arc<Self>, start: Option<StoreKey>) -> MemStoreScanner {
        MemStoreScanner {
            mem: self.clone(),
            next_bound: Some(start.map_or(Bound::Unbounded, Bound::Included)),
            buf: Vec::new(),
            chunk: FIRST_CHUNK,
            reverse: false,
        }
    }

    /// Reverse scanner over keys <= `start` (every key when `None`), descending.
    pub fn scan_rev_from(self: &Arc<Self>, start: Option<StoreKey>) -> MemStoreScanner {
        MemStoreScanner {
            mem: self.clone(),
            next_bound: Some(start.map_or(Bound::Unbounded, Bound::Included)),
            buf: Vec::new(),
            chunk: FIRST_CHUNK,
            reverse: true,
        }
    }
}

/// Iterates a MemStore in chunks, so it holds no borrow of the skiplist between calls and
/// sees a consistent order even while writers insert.
#[derive(Debug)]
pub struct MemStoreScanner {
    mem: Arc<MemStore>,
    next_bound: Option<Bound<StoreKey>>,
    /// Buffered cells, stored reversed so `pop` yields the next one.
    buf: Vec<StoreCell>,
    chunk: usize,
    reverse: bool,
}

impl MemStoreScanner {
    fn refill(&mut self) {
        let Some(bound) = self.next_bound.take() else {
            return;
        };
        let to_cell = |e: crossbeam_skiplist::map::Entry<'_, StoreKey, Bytes>| StoreCell {
            key: e.key().clone(),
            value: e.value().clone(),
        };
        let n = self.chunk;
        self.chunk = (self.chunk * 2).min(MAX_CHUNK);
        let chunk: Vec<StoreCell> = if self.reverse {
            self.mem
                .map
                .range((Bound::Unbounded, bound))
                .rev()
                .take(n)
                .map(to_cell)
                .collect()
        } else {
            self.mem
                .map
                .range((bound, Bound::Unbounded))
                .take(n)
                .map(to_cell)
                .collect()
        };
        if chunk.len() == n {
            if let Some(last) = chunk.last() {
                self.next_bound = Some(Bound::Excluded(last.key.clone()));
            }
        }
        self.buf = chunk;
        self.buf.reverse();
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
    use crate::cell::CellType;

    fn cell(row: &str, ts: u64, seq: u64) -> StoreCell {
        StoreCell {
            key: StoreKey {
                row: Bytes::copy_from_slice(row.as_bytes()),
                qualifier: Bytes::from_static(b"q"),
                ts,
                kind: CellType::Put,
                seq,
            },
            value: Bytes::from_static(b"v"),
        }
    }

    #[test]
    fn scans_both_ways_across_chunks() {
        let m = Arc::new(MemStore::new());
        for i in 0..1000u64 {
            m.insert(cell(&format!("r{i:04}"), 1, i));
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
}
