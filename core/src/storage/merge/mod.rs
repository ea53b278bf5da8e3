//! K-way merge of sorted cell sources (MemStores and store files) into one sorted stream.
//!
//! Forward merges yield ascending [`StoreKey`] order, reverse merges descending. Invariant:
//! identical keys (the same write seen twice, e.g. replayed from the WAL after it was already
//! flushed) are yielded once; a single source never repeats a key (MemStores and store files
//! hold each key once). An error from any source ends the merge with that error.
//!
//! A long scan may move its merge to a helper thread ([`MergeIter::pipeline`]): the helper
//! merges (and so reads and decodes the files' blocks) into batches on a bounded channel
//! while the scan's own thread matches versions and builds rows. The cells, their order and
//! where an error falls are the same as inline (a proptest checks this).

use crate::cell::{same_bytes, StoreCell, StoreKey};
use crate::error::Result;
use crate::storage::memstore::MemStoreScanner;
use crate::storage::storefile::{StoreFileRevScanner, StoreFileScanner};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::mpsc::{sync_channel, Receiver};

/// A sorted source of cells. The engine's own sources are variants, so the merge calls them
/// without dynamic dispatch and the store-file decoder inlines into the scan loop; anything
/// else (tests, tools) can come boxed.
pub enum CellSource {
    /// A MemStore, forward or reverse.
    Mem(MemStoreScanner),
    /// A store file, ascending.
    File(StoreFileScanner),
    /// A store file, descending.
    FileRev(StoreFileRevScanner),
    /// Any other sorted iterator.
    Boxed(Box<dyn Iterator<Item = Result<StoreCell>> + Send>),
}

impl CellSource {
    /// The next cell, `None` at the end.
    #[inline]
    fn next(&mut self) -> Option<Result<StoreCell>> {
        match self {
            CellSource::Mem(s) => s.next(),
            CellSource::File(s) => s.next(),
            CellSource::FileRev(s) => s.next(),
            CellSource::Boxed(s) => s.next(),
        }
    }

    /// Repositions the source at the first cell at or after `key` (at or before it when the
    /// source is descending). Returns false for a boxed source, which cannot seek: the caller
    /// steps it instead.
    fn seek(&mut self, key: &StoreKey) -> bool {
        match self {
            CellSource::Mem(s) => s.seek(key),
            CellSource::File(s) => s.seek_to(key),
            CellSource::FileRev(s) => s.seek_to(key),
            CellSource::Boxed(_) => return false,
        }
        true
    }
}

struct Head {
    cell: StoreCell,
    src: usize,
    reverse: bool,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    // BinaryHeap is a max-heap: forward order pops the smallest key, reverse the largest.
    fn cmp(&self, other: &Self) -> Ordering {
        let o = self
            .cell
            .key
            .cmp(&other.cell.key)
            .then_with(|| self.src.cmp(&other.src));
        if self.reverse {
            o
        } else {
            o.reverse()
        }
    }
}

/// Key equality, cheapest fields first: neighbouring cells usually share their row (and often
/// their write's sequence id and timestamp) and differ in the qualifier.
#[inline]
fn same_key(a: &crate::cell::StoreKey, b: &crate::cell::StoreKey) -> bool {
    a.seq == b.seq
        && a.ts == b.ts
        && a.kind == b.kind
        && a.qualifier.len() == b.qualifier.len()
        && a.row.len() == b.row.len()
        && same_bytes(&a.qualifier, &b.qualifier)
        && same_bytes(&a.row, &b.row)
}

/// Merges many sorted sources.
///
/// The head that comes next is kept outside the heap (`cur`): when one source supplies a run
/// of consecutive cells, as a single file or the newest MemStore usually does, each step costs
/// one comparison with the heap's top instead of a pop and a push. When every head in the
/// heap is on a later row than `cur` (`row_clear`), the rest of `cur`'s row in its source
/// comes next and cannot be repeated elsewhere, so those cells cost a row equality test only.
pub struct MergeIter {
    /// Set once the merge moved to a helper thread: every method reads from it instead.
    piped: Option<Box<Piped>>,
    sources: Vec<CellSource>,
    heap: BinaryHeap<Head>,
    /// The next head to yield; every head in `heap` comes after it.
    cur: Option<Head>,
    /// True when every head in `heap` is on a row strictly after `cur`'s (in scan order).
    row_clear: bool,
    reverse: bool,
    pending_err: Option<crate::error::Error>,
    done: bool,
}

impl MergeIter {
    /// Merges `sources`, each sorted ascending (or descending when `reverse`).
    pub fn new(sources: Vec<CellSource>, reverse: bool) -> Self {
        let n = sources.len();
        let mut m = MergeIter {
            piped: None,
            sources,
            heap: BinaryHeap::with_capacity(n),
            cur: None,
            row_clear: false,
            reverse,
            pending_err: None,
            done: false,
        };
        for i in 0..n {
            if let Some(h) = m.pull(i) {
                m.heap.push(h);
            }
        }
        m.cur = m.heap.pop();
        m.update_row_clear();
        m
    }

    /// Recomputes `row_clear` for the current `cur` and heap.
    fn update_row_clear(&mut self) {
        self.row_clear = match (&self.cur, self.heap.peek()) {
            (Some(cur), Some(top)) => {
                let o = top.cell.key.row.cmp(&cur.cell.key.row);
                o == if self.reverse {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            _ => false,
        };
    }

    /// The next cell of source `src`, as a head.
    fn pull(&mut self, src: usize) -> Option<Head> {
        match self.sources.get_mut(src)?.next()? {
            Ok(cell) => Some(Head {
                cell,
                src,
                reverse: self.reverse,
            }),
            Err(e) => {
                self.pending_err.get_or_insert(e);
                None
            }
        }
    }

    /// Refills `cur` (which is empty) from source `src`, keeping `cur` ahead of the heap.
    fn refill_from(&mut self, src: usize) {
        let next = self.pull(src);
        self.place(next);
    }

    /// Makes `next` (a source's new head, or `None` when that source ended) or the heap's
    /// top, whichever comes first, the current head; `cur` is empty.
    fn place(&mut self, next: Option<Head>) {
        match next {
            Some(h) => {
                // In the heap's order the head that comes first is the greatest.
                if self.heap.peek().is_some_and(|top| *top > h) {
                    self.heap.push(h);
                    self.cur = self.heap.pop();
                } else {
                    self.cur = Some(h);
                }
            }
            None => self.cur = self.heap.pop(),
        }
    }
}

impl MergeIter {
    /// The cell the next call to `next` returns, without taking it; `None` at the end or when
    /// an error is pending (which `next` then returns).
    #[inline]
    pub fn peek(&self) -> Option<&StoreCell> {
        if let Some(p) = &self.piped {
            return p.head();
        }
        if self.done || self.pending_err.is_some() {
            return None;
        }
        self.cur.as_ref().map(|h| &h.cell)
    }

    /// True when the merge has an error to report: `peek` says `None` but `next` has more.
    pub fn has_error(&self) -> bool {
        if let Some(p) = &self.piped {
            return p.head().is_none() && p.err.is_some();
        }
        !self.done && self.pending_err.is_some()
    }

    /// Skips ahead: afterwards the merge yields the cells at or after `key` (at or before it
    /// when reverse) that it has not yielded yet. `key` must not lie behind a cell already
    /// yielded; a source whose next cell is already past `key` is left where it is, the
    /// others seek (a boxed source, which cannot, is stepped).
    pub fn seek(&mut self, key: &StoreKey) {
        let reverse = self.reverse;
        let past = |k: &StoreKey| if reverse { k <= key } else { k >= key };
        if let Some(p) = self.piped.as_deref_mut() {
            // The sources are on the helper thread: step to the key.
            while p.head().is_some_and(|c| !past(&c.key)) {
                let _ = p.take();
            }
            return;
        }
        if self.done || self.pending_err.is_some() {
            return;
        }
        if self.cur.as_ref().is_none_or(|h| past(&h.cell.key)) {
            // Every head in the heap comes after `cur`, so all are past `key` already.
            return;
        }
        if self.heap.is_empty() {
            // One live source (the common case of a compacted store): no heap to rebuild.
            if let Some(h) = self.cur.take() {
                let src = h.src;
                let seeked = self.sources.get_mut(src).is_some_and(|s| s.seek(key));
                let mut next = if seeked { self.pull(src) } else { Some(h) };
                while let Some(n) = next.take() {
                    if past(&n.cell.key) {
                        self.cur = Some(n);
                        break;
                    }
                    next = self.pull(src);
                }
            }
            return;
        }
        let mut heads: Vec<Head> = self.heap.drain().collect();
        heads.extend(self.cur.take());
        let mut keep = Vec::with_capacity(heads.len());
        for h in heads {
            if past(&h.cell.key) {
                keep.push(h);
                continue;
            }
            let src = h.src;
            let seeked = self.sources.get_mut(src).is_some_and(|s| s.seek(key));
            let mut next = if seeked { self.pull(src) } else { Some(h) };
            while let Some(n) = next.take() {
                if past(&n.cell.key) {
                    keep.push(n);
                    break;
                }
                next = self.pull(src);
            }
        }
        self.heap.extend(keep);
        self.cur = self.heap.pop();
        self.update_row_clear();
    }
}

/// Cells a pipelined merge hands over at a time.
const PIPE_BATCH: usize = 1024;

/// Batches a pipelined merge may hold ready before its reader takes them.
const PIPE_DEPTH: usize = 2;

/// Merge helper threads allowed at once in the process; beyond that, merges stay inline.
pub const MAX_PIPELINED_MERGES: usize = 64;

/// Merge helper threads running now.
static PIPELINED: AtomicUsize = AtomicUsize::new(0);

/// A helper thread's place in [`PIPELINED`], given back when the thread ends.
struct PipeSlot;

impl PipeSlot {
    fn take() -> Option<PipeSlot> {
        if PIPELINED.fetch_add(1, AtomicOrdering::AcqRel) >= MAX_PIPELINED_MERGES {
            PIPELINED.fetch_sub(1, AtomicOrdering::AcqRel);
            return None;
        }
        Some(PipeSlot)
    }
}

impl Drop for PipeSlot {
    fn drop(&mut self) {
        PIPELINED.fetch_sub(1, AtomicOrdering::AcqRel);
    }
}

/// How a batch from the helper ends.
enum BatchEnd {
    /// More batches follow.
    More,
    /// The merge ended after this batch.
    Done,
    /// The merge failed after this batch's cells.
    Failed(crate::error::Error),
}

/// The reader's side of a merge running on a helper thread.
///
/// Invariants: the next cell is the first of `batch` (so `peek` is a look at a slice, and a
/// cell is moved once, out of the batch, when taken); `batch` is refilled from the channel
/// as soon as it runs empty, so `peek` never blocks; an error comes after every cell merged
/// before it; a channel that closes without the helper's `Done` is an error, never a
/// silently shorter merge.
struct Piped {
    batch: std::vec::IntoIter<StoreCell>,
    rx: Option<Receiver<(Vec<StoreCell>, BatchEnd)>>,
    err: Option<crate::error::Error>,
    /// The helper, joined on drop so that the files it reads are released when the merge is.
    helper: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Piped {
    fn drop(&mut self) {
        // Closing the channel stops the helper at its next send (at most one batch away).
        self.rx = None;
        if let Some(h) = self.helper.take() {
            let _ = h.join();
        }
    }
}

impl Piped {
    /// The next cell, if one is here (`None` at the end or before a pending error).
    #[inline]
    fn head(&self) -> Option<&StoreCell> {
        self.batch.as_slice().first()
    }

    /// Waits for the helper's next batch while `batch` is empty and more may come.
    fn refill(&mut self) {
        while self.batch.as_slice().is_empty() {
            if self.err.is_some() {
                return;
            }
            let Some(rx) = &self.rx else {
                return;
            };
            match rx.recv() {
                Ok((cells, end)) => {
                    self.batch = cells.into_iter();
                    match end {
                        BatchEnd::More => {}
                        BatchEnd::Done => self.rx = None,
                        BatchEnd::Failed(e) => {
                            self.rx = None;
                            self.err = Some(e);
                        }
                    }
                }
                Err(_) => {
                    self.rx = None;
                    self.err = Some(crate::error::Error::Io(std::io::Error::other(
                        "a pipelined merge's helper thread stopped before the merge ended",
                    )));
                }
            }
        }
    }

    /// The next item: the head cell, or the error once the cells before it are taken.
    #[inline]
    fn take(&mut self) -> Option<Result<StoreCell>> {
        match self.batch.next() {
            Some(c) => {
                if self.batch.as_slice().is_empty() {
                    self.refill();
                }
                Some(Ok(c))
            }
            None => self.err.take().map(Err),
        }
    }
}

impl MergeIter {
    /// Moves the merging of the sources to a helper thread, which hands cells over in
    /// batches through a bounded channel, so that a long scan merges and decodes on one
    /// core while the caller matches and builds rows on another. What the merge yields is
    /// unchanged; `seek` still works (by stepping). Does nothing when the merge is already
    /// pipelined, finished or failed, or when no helper may start (see
    /// [`MAX_PIPELINED_MERGES`]). Blocks until the first batch is ready.
    pub fn pipeline(&mut self) {
        if self.piped.is_some() || self.done || self.pending_err.is_some() || self.cur.is_none() {
            return;
        }
        let Some(slot) = PipeSlot::take() else {
            return;
        };
        let (give, receive) = std::sync::mpsc::channel::<MergeIter>();
        let (tx, rx) = sync_channel(PIPE_DEPTH);
        let spawned = std::thread::Builder::new()
            .name("basalt-merge".into())
            .spawn(move || {
                let _slot = slot;
                let Ok(mut merge) = receive.recv() else {
                    return;
                };
                loop {
                    let mut cells = Vec::with_capacity(PIPE_BATCH);
                    let mut end = BatchEnd::More;
                    while cells.len() < PIPE_BATCH {
                        match merge.next() {
                            Some(Ok(c)) => cells.push(c),
                            Some(Err(e)) => {
                                end = BatchEnd::Failed(e);
                                break;
                            }
                            None => {
                                end = BatchEnd::Done;
                                break;
                            }
                        }
                    }
                    let last = !matches!(end, BatchEnd::More);
                    // A send fails once the reader dropped its end: stop merging.
                    if tx.send((cells, end)).is_err() || last {
                        return;
                    }
                }
            });
        let Ok(helper) = spawned else {
            return;
        };
        let reverse = self.reverse;
        let inner = std::mem::replace(self, MergeIter::new(Vec::new(), reverse));
        if let Err(back) = give.send(inner) {
            // The helper is gone already: keep merging here.
            *self = back.0;
            return;
        }
        let mut piped = Piped {
            batch: Vec::new().into_iter(),
            rx: Some(rx),
            err: None,
            helper: Some(helper),
        };
        piped.refill();
        self.piped = Some(Box::new(piped));
    }
}

impl Iterator for MergeIter {
    type Item = Result<StoreCell>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(p) = self.piped.as_deref_mut() {
            return p.take();
        }
        self.step()
    }
}

impl MergeIter {
    /// The next cell of a merge that runs here (not pipelined).
    fn step(&mut self) -> Option<Result<StoreCell>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending_err.take() {
            self.done = true;
            return Some(Err(e));
        }
        if self.heap.is_empty() {
            // One source left: its cells are unique and sorted, so its next cell simply
            // replaces the head, with no comparison and no duplicate check.
            let head = self.cur.as_mut()?;
            let next = self.sources.get_mut(head.src).and_then(|s| s.next());
            return match next {
                Some(Ok(cell)) => Some(Ok(std::mem::replace(&mut head.cell, cell))),
                Some(Err(e)) => {
                    self.done = true;
                    Some(Err(e))
                }
                None => self.cur.take().map(|h| Ok(h.cell)),
            };
        }
        if self.row_clear {
            // The heap waits on later rows: the next cell of the current head's source comes
            // next if it is on the same row (and no other source holds that row, so no
            // duplicate). It replaces the head in place, as with one source.
            let cur = self.cur.as_mut()?;
            let src = cur.src;
            let next = self.sources.get_mut(src).and_then(|s| s.next());
            let next = match next {
                Some(Ok(cell)) if same_bytes(&cell.key.row, &cur.cell.key.row) => {
                    return Some(Ok(std::mem::replace(&mut cur.cell, cell)));
                }
                Some(Ok(cell)) => Some(Head {
                    cell,
                    src,
                    reverse: self.reverse,
                }),
                Some(Err(e)) => {
                    self.pending_err.get_or_insert(e);
                    None
                }
                None => None,
            };
            // A new row, or the source ended: the general step.
            let head = self.cur.take()?;
            self.place(next);
            return self.finish_step(head);
        }
        let head = self.cur.take()?;
        self.refill_from(head.src);
        self.finish_step(head)
    }
}

impl MergeIter {
    /// Ends a step that yields `head` once the next head is placed: drops other sources'
    /// copies of `head`'s key and reports a source's error in its place.
    fn finish_step(&mut self, head: Head) -> Option<Result<StoreCell>> {
        // Drop identical keys from other sources.
        while self
            .cur
            .as_ref()
            .is_some_and(|c| same_key(&c.cell.key, &head.cell.key))
        {
            if let Some(dup) = self.cur.take() {
                self.refill_from(dup.src);
            }
        }
        self.update_row_clear();
        if let Some(e) = self.pending_err.take() {
            self.done = true;
            return Some(Err(e));
        }
        Some(Ok(head.cell))
    }
}

mod plain;
#[cfg(test)]
mod tests;
