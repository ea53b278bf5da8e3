//! The host side of `region.column-scanner`: pages of the newest values of a few columns,
//! packed into one byte buffer per call (the encoding is in the WIT, `column-scanner.next`)
//! and read from the region view in place where it can (`RegionView::read_columns`).
//!
//! Invariants: a page reads only the region of the current call, at its read point (the
//! resource holds no view: what to read and where the next page starts, nothing more); a
//! call outside an endpoint call answers an error; a page holds at most
//! [`MAX_ROWS_PER_PAGE`] rows and ends after the row that takes it to [`PAGE_BYTES`].

use crate::bindings::{region, ColumnScanner};
use crate::state::{HostState, Reads};
use basalt_core::endpoint::ColumnRow;
use basalt_core::keys::RowRange;
use bytes::Bytes;
use std::ops::Bound;
use wasmtime::component::Resource;

/// The most rows one `next` call returns.
pub(crate) const MAX_ROWS_PER_PAGE: u32 = 16 * 1024;

/// The size at which a page ends (after the row that reaches it: a row is never cut).
pub(crate) const PAGE_BYTES: usize = 1 << 20;

/// The marker of a column the row lacks, in place of a value's length.
const ABSENT: u32 = u32::MAX;

/// Appends `b` with its length.
fn bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<(), String> {
    let n = u32::try_from(b.len())
        .ok()
        .filter(|n| *n != ABSENT)
        .ok_or_else(|| format!("a value of {} bytes does not fit a page", b.len()))?;
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(b);
    Ok(())
}

/// Appends `row` in the page encoding: its key, then each column's value or [`ABSENT`].
fn pack(out: &mut Vec<u8>, row: &ColumnRow<'_>) -> Result<(), String> {
    bytes(out, row.row())?;
    for v in row.values() {
        match v {
            Some(v) => bytes(out, v)?,
            None => out.extend_from_slice(&ABSENT.to_le_bytes()),
        }
    }
    Ok(())
}

impl region::HostColumnScanner for HostState {
    fn new(
        &mut self,
        start: Vec<u8>,
        stop: Vec<u8>,
        columns: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> wasmtime::Result<Resource<ColumnScanner>> {
        let lo = if start.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(Bytes::from(start))
        };
        let hi = if stop.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(Bytes::from(stop))
        };
        let scanner = ColumnScanner {
            columns: columns
                .into_iter()
                .map(|(f, q)| (Bytes::from(f), Bytes::from(q)))
                .collect(),
            rows: RowRange { lo, hi },
            done: false,
            last_page: 0,
        };
        Ok(self.table.push(scanner)?)
    }

    fn next(
        &mut self,
        scanner: Resource<ColumnScanner>,
        max: u32,
    ) -> wasmtime::Result<Result<Vec<u8>, String>> {
        let s = self.table.get_mut(&scanner)?;
        let Reads::Endpoint(view) = &self.reads else {
            return Ok(Err("column scanners are open to endpoint calls only".into()));
        };
        if s.done {
            return Ok(Ok(Vec::new()));
        }
        // The last page's size is the best guess of this one's: one allocation per page.
        let mut out = Vec::with_capacity(s.last_page.min(PAGE_BYTES));
        let mut failed = None;
        let max_rows = max.clamp(1, MAX_ROWS_PER_PAGE) as usize;
        let last = view.read_columns(&s.columns, &s.rows, max_rows, |row| {
            if let Err(e) = pack(&mut out, row) {
                failed = Some(e);
                return false;
            }
            out.len() < PAGE_BYTES
        });
        match (last, failed) {
            (_, Some(e)) => return Ok(Err(e)),
            (Err(e), None) => return Ok(Err(e.to_string())),
            (Ok(Some(last)), None) => s.rows.lo = Bound::Excluded(last),
            (Ok(None), None) => s.done = true,
        }
        s.last_page = out.len();
        Ok(Ok(out))
    }

    fn drop(&mut self, scanner: Resource<ColumnScanner>) -> wasmtime::Result<()> {
        self.table.delete(scanner)?;
        Ok(())
    }
}
