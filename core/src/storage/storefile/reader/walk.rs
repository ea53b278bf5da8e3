//! Walks of a store file's entries in place (no cell built): the rows of a range, and one
//! row for a point read. Entries of every sequence id and type are passed: deciding what is
//! visible is the caller's job.

use super::{RawEntry, StoreFileReader};
use crate::cell::{same_bytes, StoreKey};
use crate::error::Result;
use crate::keys::RowRange;
use crate::storage::storefile::cache::CacheMode;
use crate::storage::storefile::codec::{parse_entry, RawKey};
use crate::storage::storefile::data::DataBlock;
use bytes::Bytes;
use std::ops::Bound;

impl StoreFileReader {
    /// Walks the entries of the rows inside `range`, in key order and in place: `f` sees
    /// each entry's row, qualifier, type and value as slices of its block (no cell is
    /// built) and returns false to stop the walk. Blocks come from the cache or are read as
    /// `mode` says. Entries of every sequence id and type are passed: deciding what is
    /// visible is the caller's job.
    pub fn walk_range(
        &self,
        range: &RowRange,
        mode: CacheMode,
        mut f: impl FnMut(&RawEntry<'_>) -> bool,
    ) -> Result<()> {
        let first = match &range.lo {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => self
                .block_at_or_before(&StoreKey::first_on_row(k.clone()))
                .unwrap_or(0),
        };
        for i in first..self.block_count() {
            let block = self.block(i, mode)?;
            let buf = block.payload().as_ref();
            let mut at = 0;
            while at < buf.len() {
                let (key, value, end) = parse_entry(buf, at)
                    .ok_or_else(|| self.block_corruption(i, "malformed entry".into()))?;
                at = end;
                let (Some(row), Some(qualifier), Some(value)) =
                    (buf.get(key.row), buf.get(key.qualifier), buf.get(value))
                else {
                    return Err(self.block_corruption(i, "entry out of bounds".into()));
                };
                if range.past_hi(row) {
                    return Ok(());
                }
                if !range.contains(row) {
                    continue;
                }
                let entry = RawEntry {
                    row,
                    qualifier,
                    kind: key.kind,
                    seq: key.seq,
                    value,
                };
                if !f(&entry) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Walks the entries of `row` in key order, in place: `f` sees each entry's block, key
    /// and value range in the block's payload, and returns false to stop. Blocks come from
    /// the cache or are read as `mode` says; a point read of a row inside one block reads
    /// that block alone. Entries of every sequence id and type are passed: deciding what is
    /// visible is the caller's job.
    pub(crate) fn walk_row(
        &self,
        row: &Bytes,
        mode: CacheMode,
        mut f: impl FnMut(&DataBlock, &RawKey, std::ops::Range<usize>) -> bool,
    ) -> Result<()> {
        let key = StoreKey::first_on_row(row.clone());
        let mut idx = self.seek_block(&key);
        if idx >= self.block_count() {
            return Ok(());
        }
        let mut block = self.block(idx, mode)?;
        let mut pos = block
            .lower_bound(&key)
            .map_err(|e| self.block_corruption(idx, e))?;
        loop {
            while pos < block.len() {
                let (k, value) = block
                    .raw_entry(pos)
                    .map_err(|e| self.block_corruption(idx, e))?;
                let same_row = block
                    .payload()
                    .get(k.row.clone())
                    .is_some_and(|r| same_bytes(r, row));
                if !same_row || !f(&block, &k, value) {
                    return Ok(());
                }
                pos += 1;
            }
            idx += 1;
            if idx >= self.block_count() || self.block_starts_past_row(idx, row) {
                return Ok(());
            }
            block = self.block(idx, mode)?;
            pos = 0;
        }
    }
}
