//! Compaction: which cells a rewrite of store files (or a flush of a MemStore) may drop.
//!
//! [`CompactionIter`] takes the merged, deduplicated cells of its input (the selected files
//! of one store, or one MemStore snapshot) in [`StoreKey`](crate::cell::StoreKey) order and
//! yields the cells to write. It works one row at a time, against the matcher's rules
//! ([`crate::storage::matcher`]), and drops only what no reader can miss (a raw reader
//! aside, as in HBase: it sees the masked puts a flush or compaction drops):
//!
//! * **Every kind** ([`CompactionKind::Minor`], also used by flushes, and
//!   [`CompactionKind::Major`]) drops an older write of a put when a newer write at the same
//!   timestamp is in the input (rule 3 hides it from every reader that sees the newer one),
//!   and a put masked by a delete marker in the input that does not keep deleted cells
//!   (rule 2 hides it from every reader that sees the marker; the marker stays). A marker
//!   keeps deleted cells in a family with `KEEP_DELETED_CELLS` true, and with `TTL` while it
//!   is younger than the TTL ([`crate::schema::KeepDeletedCells`]).
//!   A put older than the TTL is dropped when the family has no min versions (rule 4 hides
//!   it, and every put older than it, from every reader now and later). A put whose own
//!   cell TTL ran out is not: it still counts among the versions, keeping older ones out.
//! * A **minor** compaction drops nothing else. Its input is not the whole store: versions
//!   beyond max versions, expired versions protected by min versions and delete markers can
//!   all matter to cells outside the input (a newer version in another file may be deleted;
//!   a marker may mask a put in another file or in the MemStore). So a minor compaction never
//!   changes any read result, except a raw read's: like HBase's, that shows masked puts
//!   until a compaction or flush drops them (rules R1 to R6 of the matcher).
//! * A **major** compaction covers every file of the store. Without keep-deleted-cells it
//!   keeps exactly what the matcher's rule 4 keeps for a reader that sees everything: it
//!   drops every delete marker, every masked put, versions beyond max versions and expired
//!   versions beyond min versions, and versions whose own cell TTL ran out and that are older
//!   than every other version it keeps (a newer one stays: readers count it among the
//!   versions of the older ones). For any time range and any reader version count the
//!   result is then unchanged, because a marker that a time-range reader ignores only ever
//!   hides puts below the range. Markers that keep deleted cells, and the puts they mask,
//!   stay (a
//!   time-range read may show them), and a put is dropped only when even the fewest newer
//!   versions any reader could count (those no marker masks) already reach max versions, or
//!   reach min versions while it is expired. What a major compaction removes is gone for
//!   good: a later delete no longer uncovers a dropped version, and a put written after a
//!   dropped marker is no longer masked by it (HBase's documented behaviour).
//!
//! Read points: a scan of many regions opens each region's scanner when it gets there, at
//! the read point it took when it began, so a compaction may be read by a reader whose read
//! point is older than the newest cells of its input. The caller passes the smallest read
//! point any open reader holds; a row with any cell above it is written unchanged, so every
//! cell that justifies a drop is visible to every reader.
//!
//! Invariants: the output is a sorted subsequence of the input; for the same input the output
//! depends only on the rules, the smallest read point and the clock; an error from the input
//! ends the iteration with that error.

pub mod policy;

use crate::cell::{same_bytes, StoreCell, Timestamp};
use crate::error::Result;
use crate::storage::matcher::{FamilyRules, Masks};
use bytes::Bytes;

/// Minor (part of a store's files) or major (all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CompactionKind {
    /// Some files, or a MemStore flush: never changes a read result.
    Minor,
    /// Every file of the store: drops markers, masked, excess and expired versions.
    Major,
}

/// What a compaction needs to know to decide.
#[derive(Debug, Clone, Copy)]
pub struct CompactionRules {
    /// Minor or major.
    pub kind: CompactionKind,
    /// The family's settings.
    pub family: FamilyRules,
    /// The smallest read point of any reader that may read the output.
    pub smallest_read_point: u64,
    /// The wall clock in milliseconds, for the TTL.
    pub now_ms: u64,
}

/// The cells of one row of one store that a compaction keeps, in input order. `cells` must
/// be one row's cells in key order without identical keys.
pub fn filter_row(cells: Vec<StoreCell>, rules: &CompactionRules) -> Vec<StoreCell> {
    if cells.iter().any(|c| c.key.seq > rules.smallest_read_point) {
        return cells;
    }
    let f = &rules.family;
    let major = rules.kind == CompactionKind::Major;
    let expire_before = f
        .ttl_ms
        .map(|ttl| rules.now_ms.saturating_sub(ttl))
        .unwrap_or(0);
    // Markers that keep deleted cells (kept by a major compaction, with what they mask
    // counted as versions), and those that do not (dropped by it, with what they mask).
    let mut keeping = Masks::default();
    let mut dropping = Masks::default();
    let mut col = Column::default();
    let mut out = Vec::with_capacity(cells.len());
    for cell in cells {
        let k = &cell.key;
        if col.qualifier.as_ref() != Some(&k.qualifier) {
            if col.expired_kept {
                drop_trailing_expired(&mut out, col.start, rules.now_ms);
            }
            col = Column {
                qualifier: Some(k.qualifier.clone()),
                start: out.len(),
                ..Column::default()
            };
            keeping.next_column();
            dropping.next_column();
        }
        if k.kind.is_delete() {
            let keeps = f.keep_deleted_cells.keeps(k.ts, expire_before);
            if keeps {
                keeping.add(k.kind, k.ts);
            } else {
                dropping.add(k.kind, k.ts);
            }
            if !major || keeps {
                out.push(cell);
            }
            continue;
        }
        if col.last_put_ts == Some(k.ts) {
            continue; // an older write of the same version (rule 3)
        }
        col.last_put_ts = Some(k.ts);
        if dropping.masks(k.ts) {
            continue; // deleted for good, by a minor compaction too
        }
        let expired = k.ts < expire_before;
        let keep = if major {
            // The fewest newer versions any reader can count: those no marker masks.
            let fewest = col.unmasked;
            if !keeping.masks(k.ts) {
                col.unmasked += 1;
            }
            // A version whose own TTL ran out is counted and kept for now: it goes at the
            // column's end if no version older than it stays (see drop_trailing_expired).
            let keep = fewest < f.max_versions && !(expired && fewest >= f.min_versions);
            col.expired_kept |= keep && cell.cell_expired(rules.now_ms);
            keep
        } else {
            // A version whose own TTL ran out stays: it keeps an older version out of the
            // max versions, and a minor compaction does not see every older version.
            !(expired && f.min_versions == 0)
        };
        if keep {
            out.push(cell);
        }
    }
    if col.expired_kept {
        drop_trailing_expired(&mut out, col.start, rules.now_ms);
    }
    out
}

/// A major compaction's end of a column whose output (from `start`) holds puts whose own TTL
/// ran out: those older than every other put it keeps go (no reader sees them, and no kept
/// version counts them); the others stay, as every reader counts them among the versions of
/// the older versions kept.
fn drop_trailing_expired(out: &mut Vec<StoreCell>, start: usize, now_ms: u64) {
    let last_live = out
        .iter()
        .enumerate()
        .skip(start)
        .filter(|(_, c)| c.key.kind.is_put() && !c.cell_expired(now_ms))
        .map(|(i, _)| i)
        .last();
    let mut i = 0usize;
    out.retain(|c| {
        let drop = i >= start
            && last_live.is_none_or(|l| i > l)
            && c.key.kind.is_put()
            && c.cell_expired(now_ms);
        i += 1;
        !drop
    });
}

/// The state of the column being filtered.
#[derive(Default)]
struct Column {
    qualifier: Option<Bytes>,
    /// Where the column's cells begin in the output.
    start: usize,
    /// Whether the output holds a put of this column whose own TTL ran out.
    expired_kept: bool,
    last_put_ts: Option<Timestamp>,
    /// Distinct-timestamp puts seen so far that no keeping marker masks.
    unmasked: u32,
}

/// Applies [`filter_row`] to a sorted stream of one store's cells, row by row.
pub struct CompactionIter<I> {
    input: I,
    rules: CompactionRules,
    peeked: Option<StoreCell>,
    out: std::vec::IntoIter<StoreCell>,
    done: bool,
    /// Cells read from the input.
    pub cells_in: u64,
    /// Cells dropped.
    pub cells_dropped: u64,
}

impl<I: Iterator<Item = Result<StoreCell>>> CompactionIter<I> {
    /// Filters `input` (sorted, without identical keys) by `rules`.
    pub fn new(input: I, rules: CompactionRules) -> Self {
        CompactionIter {
            input,
            rules,
            peeked: None,
            out: Vec::new().into_iter(),
            done: false,
            cells_in: 0,
            cells_dropped: 0,
        }
    }

    fn pull(&mut self) -> Result<Option<StoreCell>> {
        if let Some(c) = self.peeked.take() {
            return Ok(Some(c));
        }
        let next = self.input.next().transpose()?;
        if next.is_some() {
            self.cells_in += 1;
        }
        Ok(next)
    }

    /// Reads the next row and filters it; false at the end of the input.
    fn next_row(&mut self) -> Result<bool> {
        let Some(first) = self.pull()? else {
            return Ok(false);
        };
        let mut row = vec![first];
        loop {
            match self.pull()? {
                Some(c) if same_bytes(&c.key.row, &row[0].key.row) => row.push(c),
                Some(c) => {
                    self.peeked = Some(c);
                    break;
                }
                None => break,
            }
        }
        let n = row.len();
        let kept = filter_row(row, &self.rules);
        self.cells_dropped += (n - kept.len()) as u64;
        self.out = kept.into_iter();
        Ok(true)
    }
}

impl<I: Iterator<Item = Result<StoreCell>>> Iterator for CompactionIter<I> {
    type Item = Result<StoreCell>;

    fn next(&mut self) -> Option<Result<StoreCell>> {
        loop {
            if let Some(c) = self.out.next() {
                return Some(Ok(c));
            }
            if self.done {
                return None;
            }
            match self.next_row() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
