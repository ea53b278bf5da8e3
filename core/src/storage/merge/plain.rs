//! A merge's plain rows: a row one store file holds whole, read straight off the file's
//! block and judged by [`PlainRow`] (see [`MergeIter::plain_row`]). Invariant: the merge is
//! left exactly as it was whenever the row is not read here.

use super::{CellSource, MergeIter};
use crate::cell::{same_bytes, Cell};
use crate::error::Result;
use crate::storage::matcher::{PlainRow, Verdict};
use bytes::Bytes;

impl MergeIter {
    /// Reads the visible cells of `row`, the current head's row, straight from the one
    /// source that holds it, into `out` (with `family`), judged by `plain`: no heap step and
    /// no cell of the merge's own per cell. Applies when the merge runs here, forward, and
    /// the head's source is a store file that holds the whole rest of the row (the only
    /// live source, or every other one is on a later row). Returns true when it read the
    /// row: the merge then stands on the first cell after it. Returns false, with the merge
    /// and `out` as they were, when it does not apply or `plain` needs the general matcher.
    pub(crate) fn plain_row(
        &mut self,
        row: &[u8],
        plain: &mut PlainRow<'_>,
        family: &Bytes,
        out: &mut Vec<Cell>,
    ) -> Result<bool> {
        if self.piped.is_some()
            || self.reverse
            || self.done
            || self.pending_err.is_some()
            || !(self.heap.is_empty() || self.row_clear)
        {
            return Ok(false);
        }
        let Some(cur) = &self.cur else {
            return Ok(false);
        };
        let Some(CellSource::File(scanner)) = self.sources.get_mut(cur.src) else {
            return Ok(false);
        };
        let k = &cur.cell.key;
        if !same_bytes(&k.row, row) {
            return Ok(false);
        }
        let before = out.len();
        match plain.offer(&k.qualifier, k.ts, k.kind, k.seq) {
            Verdict::Abort => return Ok(false),
            Verdict::Skip => {}
            Verdict::Emit => out.push(cur.cell.clone().into_put_cell(family)),
        }
        let walked = scanner.walk_row(row, |block, k, value| {
            let buf = block.payload();
            let qualifier = buf.get(k.qualifier.clone()).unwrap_or_default();
            match plain.offer(qualifier, k.ts, k.kind, k.seq) {
                Verdict::Abort => return false,
                Verdict::Skip => {}
                Verdict::Emit => out.push(block.put_cell(k, value, family)),
            }
            true
        });
        match walked {
            Ok(true) => {}
            Ok(false) => {
                out.truncate(before);
                return Ok(false);
            }
            Err(e) => {
                out.truncate(before);
                self.done = true;
                return Err(e);
            }
        }
        // The source stands after the row: its next cell, or the heap's top, is the head.
        let src = cur.src;
        self.cur = None;
        let next = self.pull(src);
        self.place(next);
        self.update_row_clear();
        Ok(true)
    }
}
