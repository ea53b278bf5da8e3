//! The read methods of the Thrift1 service: `get`, `getVer`, `getVerTs` (versions of one
//! column) and the `getRow*`/`getRows*` family (whole rows, optionally restricted to
//! columns and to timestamps before one).
//!
//! Invariants: a read timestamp is exclusive, as the reference server's (a timestamp no
//! cell can be below reads nothing); a row without cells is left out of the answer; at
//! least one version is read whatever `numVersions` says.

use super::Handler;
use crate::serve::convert::*;
use basalt_core::client::Backend;
use basalt_thrift::hbase::{TCell, TRowResult};

/// `getRow*`: each row that has cells, restricted to `columns`, before `ts`.
pub(super) fn rows<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    rows: &[Vec<u8>],
    columns: &[Vec<u8>],
    ts: Option<i64>,
) -> thrift::Result<Vec<TRowResult>> {
    let (_, t) = h.table(table)?;
    let range = match ts {
        Some(ts) => match read_range(ts) {
            Some(r) => Some(r),
            None => return Ok(Vec::new()),
        },
        None => None,
    };
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut g = get_with_columns(row, columns);
        if let Some(r) = range {
            g = g.time_range(r);
        }
        let r = h.run(t.get(g)).map_err(engine)?;
        if !r.is_empty() {
            out.push(row_result(r, false));
        }
    }
    Ok(out)
}

/// `get`/`getVer*`: up to `versions` versions of one column (or family).
pub(super) fn versions<B: Backend>(
    h: &Handler<B>,
    table: &[u8],
    row: &[u8],
    column: &[u8],
    versions: i32,
    ts: Option<i64>,
) -> thrift::Result<Vec<TCell>> {
    let (_, t) = h.table(table)?;
    let versions = u32::try_from(versions).unwrap_or(0).max(1);
    let mut g = get_with_columns(row, std::slice::from_ref(&column.to_vec()));
    g = g.max_versions(versions);
    if let Some(ts) = ts {
        match read_range(ts) {
            Some(r) => g = g.time_range(r),
            None => return Ok(Vec::new()),
        }
    }
    let r = h.run(t.get(g)).map_err(engine)?;
    Ok(cells(&r))
}
