//! How a parent region's store files divide between its daughters: each daughter starts
//! on the parent's files that may hold rows of its half (shared readers, later compacted
//! into files of its own), and the catalog records the same division.
//!
//! Invariant: a file is given to every half it may hold rows of (judged by its first and
//! last row), so no row of the parent is lost; an empty file goes to the lower half.

use crate::catalog::{FileEntry, RegionEntry};
use crate::region::{Region, Store};
use crate::storage::storefile::StoreFileReader;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// True when `f` may hold rows of `[lo, hi)` (empty `hi` = no bound). An empty file belongs
/// to the range that starts the key space of its region (`lo_is_first`).
fn overlaps(f: &StoreFileReader, lo: &[u8], hi: &[u8], lo_is_first: bool) -> bool {
    let info = f.info();
    match (&info.first_key, &info.last_key) {
        (Some(first), Some(last)) => {
            (hi.is_empty() || first.row.as_ref() < hi) && last.row.as_ref() >= lo
        }
        _ => lo_is_first,
    }
}

/// The files of `entry` (a catalog region) that `readers` say overlap `[lo, hi)`.
pub(super) fn entry_files(
    entry: &RegionEntry,
    readers: &BTreeMap<u64, Arc<StoreFileReader>>,
    lo: &[u8],
    hi: &[u8],
) -> BTreeMap<Bytes, Vec<FileEntry>> {
    let lo_is_first = lo == entry.start.as_ref();
    entry
        .files
        .iter()
        .map(|(fam, files)| {
            let kept = files
                .iter()
                .filter(|f| {
                    readers
                        .get(&f.id)
                        .is_none_or(|r| overlaps(r, lo, hi, lo_is_first))
                })
                .cloned()
                .collect();
            (fam.clone(), kept)
        })
        .collect()
}

/// A daughter region over `[lo, hi)` sharing the parent's readers that overlap it.
pub(super) fn daughter(parent: &Region, id: u64, lo: Bytes, hi: Bytes) -> Region {
    let lo_is_first = lo == parent.start;
    let stores = parent
        .all_stores()
        .iter()
        .map(|s| {
            let files: Vec<Arc<StoreFileReader>> = s
                .state
                .read()
                .files
                .iter()
                .filter(|f| overlaps(f, &lo, &hi, lo_is_first))
                .cloned()
                .collect();
            (
                s.family.clone(),
                Arc::new(Store::new(s.descriptor(), files)),
            )
        })
        .collect();
    let daughter = Region::new(
        id,
        parent.table.clone(),
        lo,
        hi,
        parent.flushed_seq.load(Ordering::Acquire),
        parent.generation,
        stores,
    );
    daughter.inherit_clock(parent);
    daughter
}
