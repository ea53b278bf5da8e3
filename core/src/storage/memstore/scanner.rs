//! Scanning a MemStore: [`MemStoreScanner`] copies cells out in chunks (growing from
//! [`FIRST_CHUNK`] to [`MAX_CHUNK`]) and resumes from a cursor, forward or reverse, so it holds
//! no borrow or lock of the MemStore between calls.
//!
//! Invariants kept: the cells come in [`StoreKey`] order (descending when reverse), each
//! once, from the start key on; a cursor always resumes just after the last cell taken; a
//! point read (`only_row`) ends at the end of its row.

use super::row::ColKey;
use super::{MemStore, RowCells, RowKey};
use crate::cell::{StoreCell, StoreKey};
use crate::error::Result;
use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;

/// How many cells a MemStore scanner copies out on its first refill; each refill doubles it
/// up to [`MAX_CHUNK`], so point reads copy little and scans amortize.
const FIRST_CHUNK: usize = 16;
/// The largest refill.
const MAX_CHUNK: usize = 512;
/// The first refill after a seek inside the row the scanner is in: such a seek usually
/// skips a column's older versions, and the reader wants the next column's newest few.
const SEEK_IN_ROW_CHUNK: usize = 4;

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
    pub(super) only_row: Option<Bytes>,
    /// The row the last forward refill stopped inside (its chunk filled up), with its
    /// cells: resuming there needs no search of the row skiplist.
    in_row: Option<(Bytes, RowCells)>,
}

impl MemStoreScanner {
    pub(super) fn new(mem: Arc<MemStore>, start: Option<StoreKey>, reverse: bool) -> Self {
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
            in_row: None,
        }
    }

    /// Repositions the scanner at `key`: the next cell is the first at or after it (at or
    /// before it when reverse).
    pub fn seek(&mut self, key: &StoreKey) {
        // The buffer (stored reversed: its first cell is the chunk's last) may reach the key
        // already, as when a scan skips the rest of a column: then the cells before the key
        // are dropped and the chunk and the cursor stay.
        let reaches = |c: &StoreCell| {
            if self.reverse {
                c.key <= *key
            } else {
                c.key >= *key
            }
        };
        if self.buf.first().is_some_and(reaches) {
            while self.buf.last().is_some_and(|c| !reaches(c)) {
                self.buf.pop();
            }
            return;
        }
        self.next = Some(Cursor {
            col: Bound::Included(ColKey::of(key)),
            row: Bound::Included(key.row.clone()),
        });
        self.buf.clear();
        self.chunk = match &self.in_row {
            Some((row, _)) if *row == key.row => SEEK_IN_ROW_CHUNK,
            _ => FIRST_CHUNK,
        };
    }

    fn refill(&mut self) {
        let want = self.chunk;
        self.chunk = (self.chunk * 2).min(MAX_CHUNK);
        let mut out = Vec::with_capacity(want);
        if self.reverse {
            self.refill_reverse(want, &mut out);
        } else {
            self.refill_forward(want, &mut out);
        }
        out.reverse();
        self.buf = out;
    }

    /// Forward: one search of the row skiplist per refill, then its level-0 links row to
    /// row (a search per row cost a scan of short rows most of its time).
    fn refill_forward(&mut self, want: usize, out: &mut Vec<StoreCell>) {
        let Some(mut cur) = self.next.take() else {
            return;
        };
        // Resuming inside the row the last refill stopped in: its cells are at hand.
        if let (Bound::Included(r), Some((row, cells))) = (&cur.row, &self.in_row) {
            if r == row {
                let row = row.clone();
                let (taken, last) = cells.read().take_range(&row, cur.col, false, want, out);
                if taken == want {
                    self.next = Some(Cursor {
                        row: Bound::Included(row),
                        col: last.map_or(Bound::Unbounded, Bound::Excluded),
                    });
                    return;
                }
                self.in_row = None;
                if self.only_row.is_some() {
                    return; // the point read's row is done
                }
                cur = Cursor {
                    row: Bound::Excluded(row),
                    col: Bound::Unbounded,
                };
            }
        }
        let lo = cur.row.clone().map(RowKey::new);
        let mut first_col = Some(cur.col);
        for entry in self.mem.rows.range((lo.as_ref(), Bound::Unbounded)) {
            let row = &entry.key().row;
            if self.only_row.as_ref().is_some_and(|r| r != row) {
                return;
            }
            let row = row.clone();
            // The column bound applies only inside the row the cursor names (the first).
            let col = match (&cur.row, first_col.take()) {
                (Bound::Included(r), Some(col)) if *r == row => col,
                _ => Bound::Unbounded,
            };
            let room = want - out.len();
            let (taken, last) = entry.value().read().take_range(&row, col, false, room, out);
            if taken == room {
                // The chunk filled up: resume inside this row, after the last cell taken.
                self.in_row = Some((row.clone(), entry.value().clone()));
                self.next = Some(Cursor {
                    row: Bound::Included(row),
                    col: match last {
                        Some(k) => Bound::Excluded(k),
                        None => Bound::Unbounded,
                    },
                });
                return;
            }
        }
    }

    /// Reverse: the skiplist links only forward, so each row is a search.
    fn refill_reverse(&mut self, want: usize, out: &mut Vec<StoreCell>) {
        while out.len() < want {
            let Some(cur) = self.next.take() else { break };
            let entry = match &cur.row {
                Bound::Unbounded => self.mem.rows.back(),
                b => self
                    .mem
                    .rows
                    .upper_bound(b.clone().map(RowKey::new).as_ref()),
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
            let (taken, last) = entry.value().read().take_range(&row, col, true, room, out);
            self.next = Some(if taken == room {
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
