//! Queries of a local index: one scan per region of the data table, merged in index order.
//!
//! Every region holds its data rows' local index rows in logical key order
//! ([`crate::layout`]), so a query scans, in each region, the range of local rows its bounds
//! give (at most `limit` rows of each), then merges the regions' answers by logical key
//! and keeps the first `limit`.
//!
//! Consistency: the regions are scanned at one snapshot, so each region's answer is its
//! state at that read point. The region list is read before and after the scans; when a
//! split or merge changed it meanwhile (the local rows moved to the new regions), the
//! query runs again, at most [`ATTEMPTS`] times, then fails with a clear error.

use crate::layout::Bounds;
use crate::layout::Layout;
use basalt_core::client::{Backend, Scan, Snapshot};
use basalt_core::keys::{local, prefix_successor};
use basalt_core::now_ms;
use basalt_core::{Error, Result, Table};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::{BTreeMap, HashMap};

/// How many times a query re-reads when splits or merges keep changing the regions.
pub const ATTEMPTS: usize = 8;

/// One local index row: its logical key and its cells.
pub(crate) type LocalRow = (Bytes, BTreeMap<Bytes, Bytes>);

/// What a query asks of a local index's rows besides their bounds.
pub(crate) struct LocalQuery<'a, B: Backend> {
    /// The snapshot to read at (`None`: a fresh one).
    pub(crate) snapshot: Option<&'a Snapshot<B>>,
    /// Highest index order first.
    pub(crate) reverse: bool,
    /// The most rows wanted.
    pub(crate) limit: Option<usize>,
}

/// The index rows answering `q` within `bounds` (logical keys), in index order.
pub(crate) async fn rows<B: Backend>(
    layout: &Layout,
    data: &Table<B>,
    ttls: &HashMap<Bytes, u64>,
    q: &LocalQuery<'_, B>,
    bounds: &Bounds,
) -> Result<Vec<LocalRow>> {
    let snapshot = match q.snapshot {
        Some(s) => s.clone(),
        None => data.snapshot()?,
    };
    for _ in 0..ATTEMPTS {
        let before = data.regions().await?;
        let scans = before
            .iter()
            .map(|r| region_rows(layout, data, ttls, q, bounds, &r.start_key, &snapshot));
        let answers = futures::future::try_join_all(scans).await?;
        let after = data.regions().await?;
        let same =
            before.len() == after.len() && before.iter().zip(&after).all(|(a, b)| a.id == b.id);
        if !same {
            continue;
        }
        let mut all: Vec<LocalRow> = answers.into_iter().flatten().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        if q.reverse {
            all.reverse();
        }
        if let Some(n) = q.limit {
            all.truncate(n);
        }
        return Ok(all);
    }
    Err(Error::bad_argument(format!(
        "local index {}: the regions of {} kept splitting or merging during the query; \
         try again",
        layout.def.name,
        data.name()
    )))
}

/// The index rows answering `q` in the region starting at `start`, in index order.
async fn region_rows<B: Backend>(
    layout: &Layout,
    data: &Table<B>,
    ttls: &HashMap<Bytes, u64>,
    q: &LocalQuery<'_, B>,
    bounds: &Bounds,
    start: &Bytes,
    snapshot: &Snapshot<B>,
) -> Result<Vec<LocalRow>> {
    let tag = layout.local_tag();
    let physical = |logical: &[u8]| {
        let mut p = tag.to_vec();
        p.extend_from_slice(logical);
        local::lower_bound(start, &p)
    };
    let first = physical(bounds.lo.as_deref().unwrap_or_default());
    let stop = match &bounds.hi {
        Some(h) => physical(h),
        None => end_of_tag(start, tag),
    };
    let scan = Scan::new().add_family(local::LOCAL_FAMILY);
    let scan = if q.reverse {
        // From the high end down; rows at or past it are dropped below.
        scan.start_row(&stop).reversed(true)
    } else {
        scan.start_row(&first).stop_row(&stop)
    };
    let mut stream = data.scan_at(scan, snapshot)?;
    let now = now_ms();
    let ttl = |f: &[u8]| ttls.get(f).copied();
    let mut out = Vec::new();
    if q.limit == Some(0) {
        return Ok(out);
    }
    while let Some(r) = stream.try_next().await? {
        let Some(logical) = layout.local_logical(&r.row, start) else {
            if q.reverse && r.row < first {
                break; // below this index's rows of this region
            }
            continue;
        };
        if bounds.hi.as_ref().is_some_and(|h| logical >= h.as_slice()) {
            continue;
        }
        if bounds.lo.as_ref().is_some_and(|x| logical < x.as_slice()) {
            if q.reverse {
                break;
            }
            continue;
        }
        let cells: BTreeMap<Bytes, Bytes> = r
            .cells
            .iter()
            .filter(|c| c.family.as_ref() == local::LOCAL_FAMILY)
            .map(|c| (c.qualifier.clone(), c.value.clone()))
            .collect();
        if layout.expiry(&cells, &ttl).is_some_and(|x| x <= now) {
            continue;
        }
        out.push((Bytes::copy_from_slice(logical), cells));
        if q.limit.is_some_and(|n| out.len() >= n) {
            break;
        }
    }
    Ok(out)
}

/// One local index row as stored: its physical key, its logical key and its cells.
pub(crate) type StoredRow = (Bytes, Bytes, BTreeMap<Bytes, Bytes>);

/// Every local row of `layout`'s index in `data`, region by region (for verify, repair
/// and drop: meant for a quiet table), with the region starts read before the scans.
pub(crate) async fn stored_rows<B: Backend>(
    layout: &Layout,
    data: &Table<B>,
) -> Result<(Vec<Bytes>, Vec<StoredRow>)> {
    let tag = layout.local_tag();
    let starts: Vec<Bytes> = data
        .regions()
        .await?
        .into_iter()
        .map(|r| r.start_key)
        .collect();
    let mut out = Vec::new();
    for start in &starts {
        let stop = end_of_tag(start, tag);
        let scan = Scan::new()
            .add_family(local::LOCAL_FAMILY)
            .start_row(local::lower_bound(start, tag))
            .stop_row(stop);
        let mut stream = data.scan(scan)?;
        while let Some(r) = stream.try_next().await? {
            let Some(logical) = layout.local_logical(&r.row, start) else {
                continue;
            };
            let cells = r
                .cells
                .iter()
                .filter(|c| c.family.as_ref() == local::LOCAL_FAMILY)
                .map(|c| (c.qualifier.clone(), c.value.clone()))
                .collect();
            out.push((r.row.clone(), Bytes::copy_from_slice(logical), cells));
        }
    }
    Ok((starts, out))
}

/// The first key after every row of the index tagged `tag` in the region starting at
/// `start`.
fn end_of_tag(start: &[u8], tag: &[u8]) -> Bytes {
    prefix_successor(tag)
        .map(|t| local::lower_bound(start, &t))
        .unwrap_or_else(|| local::end_of_local_rows(start))
}

/// The start of the region (of `starts`, ascending) that holds `row`.
pub(crate) fn region_start_of<'a>(starts: &'a [Bytes], row: &[u8]) -> &'a [u8] {
    let i = starts.partition_point(|s| s.as_ref() <= row);
    starts.get(i.saturating_sub(1)).map_or(&[], |s| s.as_ref())
}

/// Refuses a local index on a table with a region whose end begins with its start and a
/// zero byte: no local row of that region would sort inside it ([`local::holds_local_rows`]).
pub(crate) async fn check_regions<B: Backend>(data: &Table<B>) -> Result<()> {
    for r in data.regions().await? {
        if !local::holds_local_rows(&r.start_key, &r.end_key) {
            return Err(Error::bad_argument(format!(
                "region {} of {} ends with its start and a zero byte: it has no room for \
                 local index rows (merge it with its neighbour first)",
                r.name,
                data.name()
            )));
        }
    }
    Ok(())
}

/// Refuses a unique local index on a table that does not keep each of its values in one
/// region: the table needs a split restriction whose groups (the rows sharing their first
/// `m` bytes) hold every row of one index row prefix (the first `n >= m` bytes).
pub(crate) fn check_unique(
    def: &crate::IndexDef,
    data: &basalt_core::TableDescriptor,
) -> Result<()> {
    let (true, Some(n)) = (def.unique, def.row_prefix) else {
        return Ok(());
    };
    match data.split_restriction {
        Some(basalt_core::SplitRestriction::KeyPrefix(m)) if m <= n => Ok(()),
        other => Err(Error::bad_argument(format!(
            "unique local index {}: table {} must keep the rows sharing their first {n} bytes \
             in one region (a split restriction KeyPrefix(m) with m <= {n}), but its split \
             restriction is {other:?}",
            def.name, data.name
        ))),
    }
}
