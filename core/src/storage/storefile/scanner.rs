//! Forward and reverse scanners over one store file.
//!
//! A scanner holds its reader, the decoded block it is in and a position inside it; it reads
//! the next block only when the current one is used up, so a full scan streams block by
//! block and never holds more than one block. The seek is lazy: nothing is read until the
//! first `next()`. Cells are zero-copy slices of the block's buffer. After an error a
//! scanner yields `None` forever.

use super::cache::CacheMode;
use super::codec::RawKey;
use super::data::DataBlock;
use super::reader::{ReadAhead, StoreFileReader};
use crate::cell::{same_bytes, StoreCell, StoreKey};
use crate::error::Result;
use bytes::Bytes;
use std::sync::Arc;

enum State<S> {
    /// Not positioned yet; holds the seek key.
    Seek(S),
    /// Positioned in block `idx`.
    At {
        idx: usize,
        block: Arc<DataBlock>,
        pos: usize,
    },
    Done,
}

/// Turns a step result into an iterator item, ending the scan on `None` or an error.
fn finish<S>(state: &mut State<S>, r: Result<Option<StoreCell>>) -> Option<Result<StoreCell>> {
    match r {
        Ok(Some(cell)) => Some(Ok(cell)),
        Ok(None) => {
            *state = State::Done;
            None
        }
        Err(e) => {
            *state = State::Done;
            Some(Err(e))
        }
    }
}

/// A store file's scanners start here.
impl StoreFileReader {
    /// Forward scanner over the cells with key `>= start`, ascending.
    pub fn scan_from(self: &Arc<Self>, start: &StoreKey) -> StoreFileScanner {
        StoreFileScanner::new(Arc::clone(self), start.clone())
    }

    /// Reverse scanner over the cells with key `<= start`, descending; `None` starts from the
    /// last cell.
    pub fn scan_rev_from(self: &Arc<Self>, start: Option<&StoreKey>) -> StoreFileRevScanner {
        StoreFileRevScanner::new(Arc::clone(self), start.cloned())
    }
}

/// Ascending scan over the cells of one file with key `>=` a start key.
///
/// The block being read and the position in it are plain fields, so the common step (the
/// next entry of the same block) is one comparison and one decode.
pub struct StoreFileScanner {
    reader: Arc<StoreFileReader>,
    /// The seek key, until the first step.
    seek: Option<StoreKey>,
    /// The block being read (`None` before the seek and after the end or an error).
    block: Option<Arc<DataBlock>>,
    /// Its index in the file.
    idx: usize,
    /// The next entry to return from it.
    pos: usize,
    /// How blocks read from the file use the block cache.
    mode: CacheMode,
    /// Runs of blocks read ahead for moves to the next block.
    ahead: ReadAhead,
    /// The last row wanted (a point read's row): a block starting past it is not read.
    end_row: Option<Bytes>,
}

impl StoreFileScanner {
    pub(crate) fn new(reader: Arc<StoreFileReader>, start: StoreKey) -> Self {
        StoreFileScanner {
            reader,
            seek: Some(start),
            block: None,
            idx: 0,
            pos: 0,
            mode: CacheMode::Normal,
            ahead: ReadAhead::default(),
            end_row: None,
        }
    }

    /// Ends the scan before the first block that starts past `row`. The scanner may still
    /// return cells of later rows from a block it reads; the caller stops at them. A point
    /// read of a row that ends where its block does reads no further block.
    pub fn end_at_row(mut self, row: Bytes) -> Self {
        self.end_row = Some(row);
        self
    }

    /// Sets how the blocks this scanner reads use the block cache (default
    /// [`CacheMode::Normal`]).
    pub fn cache_mode(mut self, mode: CacheMode) -> Self {
        self.mode = mode;
        self
    }

    /// Repositions the scanner at the first cell `>= key`. Inside the current block this is
    /// a search of that block; otherwise the next step looks the block up.
    pub fn seek_to(&mut self, key: &StoreKey) {
        if let Some(b) = &self.block {
            if self.seek.is_none() && self.reader.block_at_or_before(key) == Some(self.idx) {
                if let Ok(pos) = b.lower_bound(key) {
                    self.pos = pos;
                    return;
                }
            }
        }
        self.block = None;
        self.seek = Some(key.clone());
    }

    /// Walks the entries of `row` from the scanner's position on, in place: `f` sees each
    /// one's block, key and value range and returns false to stop. Returns true when the
    /// walk passed the row's last entry: the scanner then stands on the first entry after
    /// the row (or at its end). When `f` stopped it, returns false and puts the scanner
    /// back where it stood before the walk. The scanner must be positioned (a cell taken
    /// since the last seek).
    pub(crate) fn walk_row(
        &mut self,
        row: &[u8],
        mut f: impl FnMut(&DataBlock, &RawKey, std::ops::Range<usize>) -> bool,
    ) -> Result<bool> {
        if self.seek.is_some() {
            return Ok(false);
        }
        let saved = (self.block.clone(), self.idx, self.pos);
        loop {
            let Some(b) = &self.block else {
                return Ok(true);
            };
            while self.pos < b.len() {
                let (k, value) = b
                    .raw_entry(self.pos)
                    .map_err(|e| self.reader.block_corruption(self.idx, e))?;
                let same_row = b
                    .payload()
                    .get(k.row.clone())
                    .is_some_and(|r| same_bytes(r, row));
                if !same_row {
                    return Ok(true);
                }
                if !f(b, &k, value) {
                    (self.block, self.idx, self.pos) = saved;
                    return Ok(false);
                }
                self.pos += 1;
            }
            self.next_block()?;
        }
    }

    /// Moves to the start of the next block, or to the end (`block` `None`).
    fn next_block(&mut self) -> Result<()> {
        let next = self.idx + 1;
        self.block = None;
        let past_end = self
            .end_row
            .as_ref()
            .is_some_and(|row| self.reader.block_starts_past_row(next, row));
        if next < self.reader.block_count() && !past_end {
            self.block = Some(self.reader.next_block(next, self.mode, &mut self.ahead)?);
            self.idx = next;
            self.pos = 0;
        }
        Ok(())
    }

    /// Positions the scanner: the first key >= the seek key is in the last block starting at
    /// or before it, or else at the start of the next block.
    fn seek(&mut self, key: &StoreKey) -> Result<()> {
        let r = &self.reader;
        let idx = r.seek_block(key);
        if idx >= r.block_count() {
            return Ok(());
        }
        let block = r.block(idx, self.mode)?;
        self.pos = block
            .lower_bound(key)
            .map_err(|e| r.block_corruption(idx, e))?;
        self.idx = idx;
        self.block = Some(block);
        Ok(())
    }

    /// The step that is not the next entry of the current block: the seek, or moving to the
    /// next block.
    #[cold]
    fn advance(&mut self) -> Result<Option<StoreCell>> {
        if let Some(key) = self.seek.take() {
            self.seek(&key)?;
        } else if self.block.is_some() {
            self.next_block()?;
        }
        match &self.block {
            Some(b) if self.pos < b.len() => {
                let cell = b.cell(self.pos);
                self.pos += 1;
                cell.map(Some)
                    .map_err(|e| self.reader.block_corruption(self.idx, e))
            }
            // An empty block or a seek past the last key: the next call moves on.
            Some(_) => self.advance(),
            None => Ok(None),
        }
    }
}

impl Iterator for StoreFileScanner {
    type Item = Result<StoreCell>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let r = match &self.block {
            Some(b) if self.pos < b.len() => {
                let cell = b.cell(self.pos);
                self.pos += 1;
                cell.map(Some)
                    .map_err(|e| self.reader.block_corruption(self.idx, e))
            }
            _ => self.advance(),
        };
        match r {
            Ok(Some(cell)) => Some(Ok(cell)),
            Ok(None) => None,
            Err(e) => {
                // After an error the scanner yields nothing more.
                self.block = None;
                self.seek = None;
                Some(Err(e))
            }
        }
    }
}

/// Descending scan over the cells of one file with key `<=` a start key.
pub struct StoreFileRevScanner {
    reader: Arc<StoreFileReader>,
    state: State<Option<StoreKey>>,
    mode: CacheMode,
}

impl StoreFileRevScanner {
    pub(crate) fn new(reader: Arc<StoreFileReader>, start: Option<StoreKey>) -> Self {
        StoreFileRevScanner {
            reader,
            state: State::Seek(start),
            mode: CacheMode::Normal,
        }
    }

    /// Sets how the blocks this scanner reads use the block cache (default
    /// [`CacheMode::Normal`]).
    pub fn cache_mode(mut self, mode: CacheMode) -> Self {
        self.mode = mode;
        self
    }

    /// Repositions the scanner at the last cell `<= key`.
    pub fn seek_to(&mut self, key: &StoreKey) {
        self.state = State::Seek(Some(key.clone()));
    }

    fn step(&mut self) -> Result<Option<StoreCell>> {
        let r = &self.reader;
        loop {
            match &mut self.state {
                State::Done => return Ok(None),
                State::Seek(start) => {
                    let found = match start {
                        None => r.block_count().checked_sub(1),
                        Some(key) => r.block_at_or_before(key),
                    };
                    let Some(idx) = found else {
                        return Ok(None);
                    };
                    let block = r.block(idx, self.mode)?;
                    let pos = match start {
                        None => block.len(),
                        Some(key) => block
                            .upper_bound(key)
                            .map_err(|e| r.block_corruption(idx, e))?,
                    };
                    self.state = State::At { idx, block, pos };
                }
                // Entries `0 .. pos` of block `idx` are still to be returned.
                State::At { idx, block, pos } => {
                    if *pos > 0 {
                        *pos -= 1;
                        let cell = block.cell(*pos).map_err(|e| r.block_corruption(*idx, e))?;
                        return Ok(Some(cell));
                    }
                    let Some(prev) = idx.checked_sub(1) else {
                        return Ok(None);
                    };
                    *block = r.block(prev, self.mode)?;
                    *idx = prev;
                    *pos = block.len();
                }
            }
        }
    }
}

impl Iterator for StoreFileRevScanner {
    type Item = Result<StoreCell>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.step();
        finish(&mut self.state, r)
    }
}

impl std::fmt::Debug for StoreFileScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreFileScanner")
            .field("path", &self.reader.path())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for StoreFileRevScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreFileRevScanner")
            .field("path", &self.reader.path())
            .finish_non_exhaustive()
    }
}
