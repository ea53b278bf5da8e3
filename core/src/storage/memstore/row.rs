//! One row of a MemStore: its cells in key order, as a sorted vector of 40-byte slots while
//! the row is narrow (at most [`NARROW_MAX`] cells in at most [`NARROW_MAX_BUFS`] buffers) and
//! as a B-tree past that, and the keys of cells within a row ([`ColKey`], [`ColRef`]).
//!
//! Invariants kept: a row's cells are sorted in the [`StoreKey`] order inside one row
//! (qualifier ascending, then timestamp, type and sequence id descending) without
//! duplicates; an insert of an existing key overwrites its value; a slot's offsets always
//! lie inside the buffer it names; a row turns wide at most once and never back.

use crate::cell::{same_bytes, CellRef, CellType, StoreCell, StoreKey, Timestamp};
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;

/// A cell's key within its row (the form wide rows, scanner cursors and bounds use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ColKey {
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
    pub(super) fn of(k: &StoreKey) -> Self {
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
pub(super) struct Narrow {
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

    /// The slot of `c`, whose qualifier sits at `at` in buffer `b` and whose value follows it.
    fn slot(b: u8, at: usize, c: &StoreCell) -> Slot {
        // `register` checked the buffer's length, so the offsets fit.
        let q_len = c.key.qualifier.len();
        Slot {
            q_at: at as u32,
            q_len: q_len as u32,
            v_at: (at + q_len) as u32,
            v_len: c.value.len() as u32,
            ts: c.key.ts,
            seq: c.key.seq,
            kind: c.key.kind,
            buf: b,
        }
    }

    /// Appends `c` (placed as [`Narrow::slot`] says) after the row's last cell: the caller
    /// knows its key is greater than every key of the row and that the row has room.
    fn push(&mut self, b: u8, at: usize, c: &StoreCell) {
        self.slots.push(Self::slot(b, at, c));
    }

    /// Inserts `c`, whose qualifier sits at `at` in buffer `b` and whose value follows it,
    /// and says whether its slot is now the row's last; `None` (nothing changed) when the
    /// row is full and the key is new.
    fn insert(&mut self, b: u8, at: usize, c: &StoreCell) -> Option<(Inserted, bool)> {
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
        let slot = Self::slot(b, at, c);
        let len = self.slots.len();
        match pos {
            Ok(i) => {
                if let Some(s) = self.slots.get_mut(i) {
                    *s = slot;
                }
                Some((Inserted::Overwrote, i + 1 == len))
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
                Some((Inserted::New { stacked }, i == len))
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
pub(super) enum RowMap {
    /// At most [`NARROW_MAX`] cells.
    Narrow(Narrow),
    /// Past [`NARROW_MAX`] cells (or [`NARROW_MAX_BUFS`] buffers).
    Wide(BTreeMap<ColKey, Bytes>),
}

impl RowMap {
    pub(super) fn with_capacity(n: usize) -> Self {
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
    pub(super) fn insert_cells<'a>(
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
        // The cell this call put at the end of a narrow row last, if it did: a put's
        // columns usually come in key order, and a cell after it goes to the end with one
        // comparison of the two cells (no look at the row's slots).
        let mut appended: Option<&StoreCell> = None;
        for (c, at) in cells {
            if let (RowMap::Narrow(n), Some(b), Some(prev)) = (&mut *self, b, appended) {
                let key = |c: &'a StoreCell| ColRef {
                    qualifier: &c.key.qualifier,
                    ts: c.key.ts,
                    kind: c.key.kind,
                    seq: c.key.seq,
                };
                if n.slots.len() < NARROW_MAX && key(prev).cmp(&key(c)) == Ordering::Less {
                    n.push(b, at, c);
                    added += 1;
                    stacked |= same_bytes(&prev.key.qualifier, &c.key.qualifier);
                    appended = Some(c);
                    continue;
                }
            }
            let (done, last) = match (&mut *self, b) {
                (RowMap::Narrow(n), Some(b)) => match n.insert(b, at, c) {
                    Some((r, last)) => (Some(r), last),
                    None => (None, false),
                },
                _ => (None, false),
            };
            // Only a cell placed last may be compared with instead of the row's slots.
            appended = last.then_some(c);
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
    pub(super) fn for_each_cell(&self, row: &Bytes, mut f: impl FnMut(StoreCell)) {
        match self {
            RowMap::Narrow(n) => n.slots.iter().for_each(|s| f(n.cell(row, s))),
            RowMap::Wide(m) => m.iter().for_each(|(k, v)| f(k.cell(row, v))),
        }
    }

    /// Calls `f` on every cell in order, borrowed (no reference count taken), until it
    /// fails.
    pub(super) fn for_each_ref<E>(
        &self,
        row: &[u8],
        mut f: impl FnMut(CellRef<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            RowMap::Narrow(n) => {
                for s in &n.slots {
                    f(CellRef {
                        row,
                        qualifier: n.bytes(s.buf, s.q_at, s.q_len),
                        ts: s.ts,
                        kind: s.kind,
                        seq: s.seq,
                        value: n.bytes(s.buf, s.v_at, s.v_len),
                    })?;
                }
            }
            RowMap::Wide(m) => {
                for (k, v) in m {
                    f(CellRef {
                        row,
                        qualifier: &k.qualifier,
                        ts: k.ts,
                        kind: k.kind,
                        seq: k.seq,
                        value: v,
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Calls `f` on every cell in order until it returns false.
    pub(super) fn for_each_cell_while(&self, row: &Bytes, mut f: impl FnMut(StoreCell) -> bool) {
        match self {
            RowMap::Narrow(n) => {
                for s in &n.slots {
                    if !f(n.cell(row, s)) {
                        return;
                    }
                }
            }
            RowMap::Wide(m) => {
                for (k, v) in m {
                    if !f(k.cell(row, v)) {
                        return;
                    }
                }
            }
        }
    }

    /// Appends to `out` up to `room` cells of `row` from `col` on (forward: keys in `col..`;
    /// reverse: keys in `..col` descending); returns how many and the last key taken.
    pub(super) fn take_range(
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

/// What an insert of one cell did.
enum Inserted {
    /// The key was there already; its value was replaced.
    Overwrote,
    /// The key is new; `stacked` when its column holds another cell too.
    New { stacked: bool },
}
