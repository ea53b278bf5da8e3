//! Compaction: which cells a rewrite of store files (or a flush of a MemStore) may drop.
//!
//! [`CompactionIter`] takes the merged, deduplicated cells of its input (the selected files
//! of one store, or one MemStore snapshot) in [`StoreKey`](crate::cell::StoreKey) order and
//! yields the cells to write. It works one row at a time, against the matcher's rules
//! ([`crate::storage::matcher`]), and drops only what no reader can miss:
//!
//! * **Every kind** ([`CompactionKind::Minor`], also used by flushes, and
//!   [`CompactionKind::Major`]) drops an older write of a put when a newer write at the same
//!   timestamp is in the input (rule 3 hides it from every reader that sees the newer one),
//!   and, when the family does not keep deleted cells, a put masked by a delete marker in
//!   the input (rule 2 hides it from every reader that sees the marker; the marker stays).
//!   A put older than the TTL is dropped when the family has no min versions (rule 4 hides
//!   it, and every put older than it, from every reader now and later).
//! * A **minor** compaction drops nothing else. Its input is not the whole store: versions
//!   beyond max versions, expired versions protected by min versions and delete markers can
//!   all matter to cells outside the input (a newer version in another file may be deleted;
//!   a marker may mask a put in another file or in the MemStore). So a minor compaction never
//!   changes any read result.
//! * A **major** compaction covers every file of the store. Without keep-deleted-cells it
//!   keeps exactly what the matcher's rule 4 keeps for a reader that sees everything: it
//!   drops every delete marker, every masked put, versions beyond max versions and expired
//!   versions beyond min versions. For any time range and any reader version count the
//!   result is then unchanged, because a marker that a time-range reader ignores only ever
//!   hides puts below the range. With keep-deleted-cells, markers and masked puts stay (a
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

use crate::cell::{same_bytes, CellType, StoreCell, Timestamp};
use crate::error::Result;
use crate::storage::matcher::FamilyRules;
use bytes::Bytes;

/// Minor (part of a store's files) or major (all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    let mut family_ts: Option<Timestamp> = None;
    let mut family_versions: Vec<Timestamp> = Vec::new();
    let mut col = Column::default();
    let mut out = Vec::with_capacity(cells.len());
    for cell in cells {
        let k = &cell.key;
        if col.qualifier.as_ref() != Some(&k.qualifier) {
            col = Column {
                qualifier: Some(k.qualifier.clone()),
                ..Column::default()
            };
        }
        if k.kind.is_delete() {
            match k.kind {
                CellType::DeleteFamily => {
                    family_ts = Some(family_ts.map_or(k.ts, |t| t.max(k.ts)));
                }
                CellType::DeleteFamilyVersion => family_versions.push(k.ts),
                CellType::DeleteColumn => {
                    col.column_ts = Some(col.column_ts.map_or(k.ts, |t| t.max(k.ts)));
                }
                CellType::Delete => col.version_deletes.push(k.ts),
                CellType::Put => {}
            }
            if !major || f.keep_deleted_cells {
                out.push(cell);
            }
            continue;
        }
        if col.last_put_ts == Some(k.ts) {
            continue; // an older write of the same version (rule 3)
        }
        col.last_put_ts = Some(k.ts);
        let masked = family_ts.is_some_and(|t| k.ts <= t)
            || family_versions.contains(&k.ts)
            || col.column_ts.is_some_and(|t| k.ts <= t)
            || col.version_deletes.contains(&k.ts);
        let expired = k.ts < expire_before;
        let keep = match (major, f.keep_deleted_cells) {
            (false, kdc) => {
                let masked_away = masked && !kdc;
                let expired_away = expired && f.min_versions == 0;
                !masked_away && !expired_away
            }
            (true, false) => {
                if masked {
                    false
                } else {
                    let index = col.unmasked;
                    col.unmasked += 1;
                    index < f.max_versions && !(expired && index >= f.min_versions)
                }
            }
            (true, true) => {
                // The fewest newer versions any reader can count: those no marker masks.
                let fewest = col.unmasked;
                if !masked {
                    col.unmasked += 1;
                }
                fewest < f.max_versions && !(expired && fewest >= f.min_versions)
            }
        };
        if keep {
            out.push(cell);
        }
    }
    out
}

/// The state of the column being filtered.
#[derive(Default)]
struct Column {
    qualifier: Option<Bytes>,
    column_ts: Option<Timestamp>,
    version_deletes: Vec<Timestamp>,
    last_put_ts: Option<Timestamp>,
    /// Distinct-timestamp puts seen so far that no marker masks.
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
