//! Turning checked operations into the cells they write (under the row locks: a delete of
//! the latest version and an increment read the row), and the read-modify-write changes
//! (`Delta`) with their checks. The checks every stage shares are in `server::validate`.
//!
//! Invariant: a prepared cell names the region and store that hold its row, so the commit
//! inserts it without another lookup.

use crate::cell::{CellType, StoreCell, StoreKey, Timestamp, LATEST_TIMESTAMP};
use crate::error::{Error, Result};
use crate::ops::validate_row;
use crate::ops::{DeleteKind, Get, Mutation, TimeRange};
use crate::region::PreparedCell;
use crate::region::{Region, Store};
use crate::server::config::Config;
use crate::server::read::ReadPath;
use crate::server::shared::TableState;
use crate::server::validate;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Turns a validated mutation into cells. Must run under the row lock: a delete of the
/// latest version reads the row to find that version's timestamp.
pub(crate) fn prepare(
    reads: &ReadPath,
    t: &TableState,
    m: &Mutation,
    now: Timestamp,
    out: &mut Vec<PreparedCell>,
) -> Result<()> {
    prepare_in(reads, t, m, now, out, None)
}

/// [`prepare`] with `seen`, a region a hook found for the row, used while it still serves
/// the row (not retired, online, holding it): saves a region lookup. A split or merge
/// after this check is caught by the commit, which re-routes cells of retired regions.
pub(crate) fn prepare_in(
    reads: &ReadPath,
    t: &TableState,
    m: &Mutation,
    now: Timestamp,
    out: &mut Vec<PreparedCell>,
    seen: Option<&Arc<Region>>,
) -> Result<()> {
    let row = m.row().clone();
    let region = match seen.filter(|r| r.serves(&row)) {
        Some(r) => Arc::clone(r),
        None => t.online_region(&row)?,
    };
    let cell =
        |store: Arc<Store>, q: Bytes, ts: Timestamp, kind: CellType, value: Bytes| PreparedCell {
            region: region.clone(),
            store,
            cell: StoreCell {
                key: StoreKey {
                    row: row.clone(),
                    qualifier: q,
                    ts,
                    kind,
                    seq: 0,
                },
                value,
            },
        };
    match m {
        Mutation::Put(p) => {
            let default_ts = if p.ts == LATEST_TIMESTAMP {
                region.stamp(now, now)
            } else {
                p.ts
            };
            let (kind, ttl) = match p.ttl_ms {
                Some(ttl) => (CellType::ExpiringPut, ttl),
                None => (CellType::Put, 0),
            };
            // Columns of one family usually come together: look the store up once per run.
            let mut last: Option<(&[u8], Arc<Store>)> = None;
            for (f, q, ts, v) in p.shared_cells() {
                let ts = if ts == LATEST_TIMESTAMP {
                    default_ts
                } else {
                    ts
                };
                let store = match &last {
                    Some((lf, s)) if *lf == f => s.clone(),
                    _ => {
                        let s = validate::store_of(t, &region, f)?;
                        last = Some((f, s.clone()));
                        s
                    }
                };
                let v = if kind == CellType::ExpiringPut {
                    crate::cell::expiring_value(ttl, &v)
                } else {
                    v
                };
                out.push(cell(store, q, ts, kind, v));
            }
        }
        Mutation::Delete(d) => {
            let dts = if d.ts == LATEST_TIMESTAMP {
                region.stamp(now, now)
            } else {
                d.ts
            };
            // As in HBase's prepareDeleteTimestamps, the n-th "latest version" marker of
            // one column in one delete takes the n-th newest visible version.
            let mut latest_seen: BTreeMap<(&Bytes, &Bytes), usize> = BTreeMap::new();
            if d.kinds.is_empty() {
                for store in region.user_stores() {
                    out.push(cell(
                        store,
                        Bytes::new(),
                        dts,
                        CellType::DeleteFamily,
                        Bytes::new(),
                    ));
                }
            }
            for k in &d.kinds {
                match k {
                    DeleteKind::Version {
                        family,
                        qualifier,
                        ts,
                    } => {
                        let store = validate::store_of(t, &region, family)?;
                        let ts = match ts {
                            Some(ts) => Some(*ts),
                            None if d.ts != LATEST_TIMESTAMP => Some(d.ts),
                            None => {
                                let n = latest_seen.entry((family, qualifier)).or_default();
                                *n += 1;
                                nth_latest_ts(reads, &region, &store, &row, qualifier, *n)?
                            }
                        };
                        // A column showing no such version: a no-op.
                        if let Some(ts) = ts {
                            out.push(cell(
                                store,
                                qualifier.clone(),
                                ts,
                                CellType::Delete,
                                Bytes::new(),
                            ));
                        }
                    }
                    DeleteKind::Column {
                        family,
                        qualifier,
                        ts,
                    } => {
                        let store = validate::store_of(t, &region, family)?;
                        let ts = ts.unwrap_or(dts);
                        out.push(cell(
                            store,
                            qualifier.clone(),
                            ts,
                            CellType::DeleteColumn,
                            Bytes::new(),
                        ));
                    }
                    DeleteKind::Family { family, ts } => {
                        let store = validate::store_of(t, &region, family)?;
                        let ts = ts.unwrap_or(dts);
                        out.push(cell(
                            store,
                            Bytes::new(),
                            ts,
                            CellType::DeleteFamily,
                            Bytes::new(),
                        ));
                    }
                    DeleteKind::FamilyVersion { family, ts } => {
                        let store = validate::store_of(t, &region, family)?;
                        out.push(cell(
                            store,
                            Bytes::new(),
                            *ts,
                            CellType::DeleteFamilyVersion,
                            Bytes::new(),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The timestamp of the `n`-th newest (from 1) visible version of a column.
pub(crate) fn nth_latest_ts(
    reads: &ReadPath,
    region: &Region,
    store: &Arc<Store>,
    row: &Bytes,
    qualifier: &Bytes,
    n: usize,
) -> Result<Option<Timestamp>> {
    let versions = u32::try_from(n).unwrap_or(u32::MAX);
    let get = Get::new(row)
        .add_column(&store.family, qualifier)
        .max_versions(versions);
    let res = reads.read_row_in(region, &get, reads.shared.mvcc.read_point())?;
    Ok(res.cells.get(n.saturating_sub(1)).map(|c| c.timestamp))
}
/// The newest visible `(timestamp, value)` of a column, read at the current read point.
pub(crate) fn latest_cell(
    reads: &ReadPath,
    region: &Region,
    store: &Arc<Store>,
    row: &Bytes,
    qualifier: &Bytes,
    range: TimeRange,
) -> Result<Option<(Timestamp, Bytes)>> {
    let get = Get::new(row)
        .add_column(&store.family, qualifier)
        .time_range(range);
    let res = reads.read_row_in(region, &get, reads.shared.mvcc.read_point())?;
    Ok(res.cells.into_iter().next().map(|c| (c.timestamp, c.value)))
}

/// Checks an increment's or append's columns without writing anything.
pub(crate) fn validate_read_modify_write(
    config: &Config,
    t: &TableState,
    row: &Bytes,
    deltas: &[(&Bytes, &Bytes, Delta)],
) -> Result<()> {
    t.check_enabled()?;
    validate_row(row)?;
    if deltas.is_empty() {
        return Err(Error::bad_argument("no column given"));
    }
    let region = t.online_region(row)?;
    for (f, _, d) in deltas {
        validate::store_of(t, &region, f)?;
        if let Delta::Append(v) = d {
            validate::check_value(config, v)?;
        }
    }
    Ok(())
}

/// Reads the latest value of each column inside `range` under the row lock (the caller
/// holds it) and prepares the cells of the new values; returns the new cells, sorted by
/// column.
pub(crate) fn resolve_deltas(
    reads: &ReadPath,
    t: &TableState,
    row: &Bytes,
    deltas: Vec<(&Bytes, &Bytes, Delta)>,
    opts: DeltaOptions,
    now: Timestamp,
    cells: &mut Vec<PreparedCell>,
) -> Result<Vec<crate::cell::Cell>> {
    // Located under the row lock: a split may have moved the row meanwhile.
    let region = t.online_region(row)?;
    let mut result = Vec::new();
    for (f, q, delta) in deltas {
        let store = validate::store_of(t, &region, f)?;
        let old = latest_cell(reads, &region, &store, row, q, opts.range)?;
        // No older than the version read plus one (HBase's reckonDeltas), but never
        // the "server time" sentinel: over a version at the largest timestamp the new
        // value replaces it there.
        let ts = old.as_ref().map_or(now, |(ts, _)| {
            now.max(ts.saturating_add(1).min(crate::cell::LATEST_TIMESTAMP - 1))
        });
        // Never below a timestamp the region stamped before (a put at server time after
        // a burst of increments must not land under them).
        let ts = region.stamp(ts, now);
        let value = match delta {
            Delta::Add(amount) => {
                let base = match &old {
                    None => 0i64,
                    Some((_, v)) => {
                        let arr: [u8; 8] =
                            v.as_ref().try_into().map_err(|_| Error::NotACounter {
                                column: format!(
                                    "{}:{}",
                                    String::from_utf8_lossy(f),
                                    String::from_utf8_lossy(q)
                                ),
                                len: v.len(),
                            })?;
                        i64::from_be_bytes(arr)
                    }
                };
                Bytes::copy_from_slice(&base.wrapping_add(amount).to_be_bytes())
            }
            Delta::Append(v) => {
                let mut buf = old.map(|(_, o)| o.to_vec()).unwrap_or_default();
                buf.extend_from_slice(&v);
                validate::check_value(&reads.shared.config, &buf)?;
                Bytes::from(buf)
            }
        };
        result.push(crate::cell::Cell {
            row: row.clone(),
            family: f.clone(),
            qualifier: q.clone(),
            timestamp: ts,
            kind: crate::cell::CellType::Put,
            value: value.clone(),
        });
        let (kind, value) = match opts.ttl_ms {
            Some(ttl) => (
                CellType::ExpiringPut,
                crate::cell::expiring_value(ttl, &value),
            ),
            None => (CellType::Put, value),
        };
        cells.push(PreparedCell {
            region: region.clone(),
            store,
            cell: StoreCell {
                key: StoreKey {
                    row: row.clone(),
                    qualifier: q.clone(),
                    ts,
                    kind,
                    seq: 0,
                },
                value,
            },
        });
    }
    result.sort_by(|a, b| (&a.family, &a.qualifier).cmp(&(&b.family, &b.qualifier)));
    Ok(result)
}

/// About how many cells a mutation writes.
pub(crate) fn cell_hint(m: &Mutation) -> usize {
    match m {
        Mutation::Put(p) => p.cells().len(),
        Mutation::Delete(d) => d.kinds.len().max(1),
    }
}

/// A read-modify-write change of one column.
#[derive(Clone)]
pub(crate) enum Delta {
    /// Add to an 8-byte big-endian counter.
    Add(i64),
    /// Append bytes.
    Append(Bytes),
}

/// How an increment or append reads and writes: the time range its current values are
/// read in, and its new values' own TTL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeltaOptions {
    pub(crate) range: TimeRange,
    pub(crate) ttl_ms: Option<u64>,
}

impl Default for DeltaOptions {
    fn default() -> Self {
        DeltaOptions {
            range: TimeRange::ALL,
            ttl_ms: None,
        }
    }
}
