//! The local rows of regions a split or merge replaces ([`crate::keys::local`]), rewritten
//! for the regions that replace them.
//!
//! Local rows are keyed by their region's start, so a parent's file cannot be shared by
//! reference as its other files are: each local row goes to the new region that holds its
//! owner row, re-keyed with that region's start, into one new store file per new region.
//! Every cell is copied as it is (timestamp, type, sequence id): delete markers and older
//! versions included, so what any read point sees is unchanged. The replaced regions' files
//! are streamed (each region's cells are in key order once re-keyed; several are merged by
//! key), so the rewrite holds one cell per region in memory. A cell that is no local row of
//! its region is dropped with a warning (user writes cannot name the family, so only a
//! damaged file holds one); a re-keyed row longer than a row may be fails the split or merge
//! before it changes anything.
//!
//! Runs under the split's or merge's locks, after the replaced regions' last flush: their
//! local store files hold every local row they took. The new files are created before the
//! catalog update that lists them (a crash before it leaves them unlisted, removed at the
//! next open as orphans); the replaced regions' local files are unlisted by that update
//! and deleted once their last reader drops them. A write whose hooks keyed its local rows
//! before the split or merge is re-keyed at its commit (`write::commit`).

use crate::catalog::Catalog;
use crate::catalog::FileEntry;
use crate::cell::{StoreCell, StoreKey};
use crate::error::{Error, Result};
use crate::keys::local;
use crate::region::Region;
use crate::server::flush::Maintenance;
use crate::storage::merge::{CellSource, MergeIter};
use crate::storage::storefile::{CacheMode, StoreFileReader, StoreFileWriter};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A new region's local-row file: its catalog entry and its reader (`None`: no local row).
pub(super) type LocalFile = Option<(FileEntry, Arc<StoreFileReader>)>;

/// A new region's key range.
pub(super) struct Target {
    pub(super) start: Bytes,
    pub(super) end: Bytes,
}

impl Target {
    fn holds(&self, row: &[u8]) -> bool {
        row >= self.start.as_ref() && (self.end.is_empty() || row < self.end.as_ref())
    }
}

/// Rewrites the local rows of `sources` (flushed, without references, under the caller's
/// locks) into one file per target; `None` when no source has a local-row family.
pub(super) async fn rewrite(
    m: &Maintenance,
    sources: &[Arc<Region>],
    targets: Vec<Target>,
) -> Result<Option<Vec<LocalFile>>> {
    let stores: Vec<_> = sources
        .iter()
        .filter_map(|r| r.store(local::LOCAL_FAMILY).map(|s| (r.start.clone(), s)))
        .collect();
    let Some((_, first)) = stores.first() else {
        return Ok(None);
    };
    let d = first.descriptor();
    let opts = m.shared.writer_options(&d);
    let inputs: Vec<(Bytes, Vec<Arc<StoreFileReader>>)> = stores
        .iter()
        .map(|(start, s)| (start.clone(), s.state.read().files.clone()))
        .collect();
    let ids = targets
        .iter()
        .map(|_| m.take_file_id())
        .collect::<Result<Vec<u64>>>()?;
    // The new regions start at the largest generation of the regions they replace.
    let generation = sources.iter().map(|r| r.generation).max().unwrap_or(0);
    let names: Vec<String> = ids
        .iter()
        .map(|id| crate::catalog::store_file_name(*id, generation))
        .collect();
    let objects = m.shared.objects.clone();
    let cache = m.shared.cache.clone();
    tokio::task::spawn_blocking(move || -> Result<Vec<LocalFile>> {
        // One stream per replaced region, each in key order once re-keyed (a region's local
        // rows share its start); merged by key, each cell goes to its new region's file as
        // it comes: nothing is held but one cell per stream.
        let mut streams: Vec<std::iter::Peekable<Moved<'_>>> = inputs
            .iter()
            .map(|(start, files)| moved(start, files, &targets).peekable())
            .collect();
        let mut writers: Vec<Option<StoreFileWriter>> = targets.iter().map(|_| None).collect();
        loop {
            let mut best: Option<(usize, StoreKey)> = None;
            for (k, s) in streams.iter_mut().enumerate() {
                let key = match s.peek() {
                    None => continue,
                    Some(Ok((_, c))) => c.key.clone(),
                    Some(Err(_)) => match s.next() {
                        Some(Err(e)) => return Err(e),
                        _ => continue,
                    },
                };
                if best.as_ref().is_none_or(|(_, b)| key < *b) {
                    best = Some((k, key));
                }
            }
            let Some((k, _)) = best else { break };
            let Some(Some(Ok((target, cell)))) = streams.get_mut(k).map(Iterator::next) else {
                continue;
            };
            let (Some(slot), Some(name)) = (writers.get_mut(target), names.get(target)) else {
                continue;
            };
            let w = match slot {
                Some(w) => w,
                None => slot.insert(StoreFileWriter::create(&objects, name, opts)?),
            };
            w.append(&cell)?;
        }
        drop(streams);
        let mut files = Vec::with_capacity(writers.len());
        for ((w, id), name) in writers.into_iter().zip(ids).zip(names) {
            let Some(w) = w else {
                files.push(None);
                continue;
            };
            let info = w.finish()?;
            let reader = StoreFileReader::open(&objects, &name, id, Some(cache.clone()))?;
            let entry = FileEntry {
                id,
                max_seq: info.max_seq,
                size: info.file_size,
                entries: info.entry_count,
                generation,
            };
            files.push(Some((entry, reader)));
        }
        Ok(files)
    })
    .await
    .map_err(|e| {
        Error::Io(std::io::Error::other(format!(
            "local-row rewrite failed: {e}"
        )))
    })?
    .map(Some)
}

/// One replaced region's local cells, in key order, each with the index of the new region
/// that holds its owner and re-keyed with that region's start.
type Moved<'a> = Box<dyn Iterator<Item = Result<(usize, StoreCell)>> + 'a>;

/// The cells of `files` (the local-row files of the region starting at `start`) moved to
/// `targets`. A cell that is no local row of that region, or whose owner no target holds
/// (nothing the engine writes), is dropped with a warning rather than blocking the split.
/// A re-keyed row longer than a row may be fails the split.
fn moved<'a>(start: &'a Bytes, files: &[Arc<StoreFileReader>], targets: &'a [Target]) -> Moved<'a> {
    let sources: Vec<CellSource> = files
        .iter()
        .map(|f| {
            CellSource::File(
                f.scan_from(&StoreKey::first_on_row(Bytes::new()))
                    .cache_mode(CacheMode::Bypass),
            )
        })
        .collect();
    Box::new(MergeIter::new(sources, false).filter_map(move |cell| {
        let mut cell = match cell {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let place = local::parts(&cell.key.row)
            .filter(|(s, _, _)| *s == start.as_ref())
            .and_then(|(_, _, owner)| targets.iter().position(|t| t.holds(owner)));
        let Some(k) = place else {
            tracing::warn!(row = %String::from_utf8_lossy(&cell.key.row),
                "a cell of the local-row family is no local row of its region; dropped");
            return None;
        };
        let row = targets
            .get(k)
            .and_then(|t| local::rekey_to(&cell.key.row, &t.start))
            .filter(|r| r.len() <= crate::cell::MAX_ROW_LENGTH);
        match row {
            Some(r) => {
                cell.key.row = r;
                Some(Ok((k, cell)))
            }
            None => Some(Err(Error::bad_argument(
                "the split row is too long for the table's local index rows, which start \
                 with their region's first row",
            ))),
        }
    }))
}

/// The local-row files of regions a split or merge replaced, unlisted by its catalog
/// update (`catalog`, read after it): each that no region lists any more is deleted once
/// its last reader drops it.
pub(super) fn retire_inputs(sources: &[Arc<Region>], catalog: &Catalog) {
    for r in sources {
        if let Some(s) = r.store(local::LOCAL_FAMILY) {
            for f in s.state.read().files.iter() {
                if !catalog.lists_file(f.file_id()) {
                    f.mark_compacted_away();
                }
            }
        }
    }
}

/// Refuses a split of `[start, end)` at `row` after which a daughter could not hold its
/// local rows ([`local::holds_local_rows`]).
pub(super) fn check_split_row(start: &[u8], row: &[u8], end: &[u8]) -> Result<()> {
    if local::holds_local_rows(start, row) && local::holds_local_rows(row, end) {
        return Ok(());
    }
    Err(Error::bad_argument(format!(
        "split row {:?} would give a region an end that begins with its start and a zero \
         byte, which leaves no room for the table's local index rows",
        String::from_utf8_lossy(row)
    )))
}

/// A new region's catalog files with its local-row family's list replaced by `local` (its
/// rewritten file, if any), when the table has local rows (`Some`).
pub(super) fn with_local(
    mut files: BTreeMap<Bytes, Vec<FileEntry>>,
    local: Option<LocalFile>,
) -> BTreeMap<Bytes, Vec<FileEntry>> {
    if let Some(file) = local {
        files.insert(
            Bytes::from_static(crate::keys::local::LOCAL_FAMILY),
            file.map(|(e, _)| e).into_iter().collect(),
        );
    }
    files
}

/// `region` with its local-row store holding only `local` (its rewritten file, if any),
/// when the table has local rows (`Some`).
pub(super) fn local_store(region: Region, local: Option<LocalFile>) -> Region {
    if let Some(file) = local {
        let mut stores = region.stores.write();
        if let Some(s) = stores.get(crate::keys::local::LOCAL_FAMILY) {
            let files = file.map(|(_, r)| r).into_iter().collect();
            let fresh = Arc::new(crate::region::Store::new(s.descriptor(), files));
            stores.insert(Bytes::from_static(crate::keys::local::LOCAL_FAMILY), fresh);
        }
    }
    region
}
