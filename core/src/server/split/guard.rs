//! Which rows a region may split at: strictly inside it, inside one salt bucket, and, for a
//! table with a split restriction ([`crate::schema::SplitRestriction`]), at a group
//! boundary.
//!
//! Invariants: a given split row that breaks a rule is refused with a typed error before
//! anything changes; a computed split point is cut to its group, and dropped (no split)
//! when the cut point is no longer strictly inside the region.

use crate::error::{Error, Result};
use crate::region::Region;
use crate::server::shared::TableState;
use bytes::Bytes;

/// Refuses a split of `[start, end)` at `row` whose daughters would span two salt buckets
/// of a salted table. A region of a salted table lies inside one bucket (it is created so
/// and merges never cross a boundary), so any row strictly inside it keeps both daughters
/// inside that bucket; this guard keeps the invariant even if that ever stops holding.
pub(super) fn check_buckets(t: &TableState, start: &[u8], row: &[u8], end: &[u8]) -> Result<()> {
    if let Some(salt) = &t.descriptor.read().salt {
        if !salt.within_one_bucket(start, row) || !salt.within_one_bucket(row, end) {
            return Err(Error::bad_argument(format!(
                "split row {:?} of table {} would make a region span two salt buckets",
                String::from_utf8_lossy(row),
                t.name
            )));
        }
    }
    Ok(())
}

/// True when `row` lies strictly inside `region` (after its start, before its end).
fn strictly_inside(region: &Region, row: &[u8]) -> bool {
    row > region.start.as_ref() && (region.end.is_empty() || row < region.end.as_ref())
}

/// Refuses a split row the caller gave: not strictly inside `parent`, spanning two salt
/// buckets, or inside a group of the table's split restriction.
pub(super) fn check_given(t: &TableState, parent: &Region, row: &[u8]) -> Result<()> {
    if !strictly_inside(parent, row) {
        return Err(Error::bad_argument(format!(
            "split row {:?} is not strictly inside region {}",
            String::from_utf8_lossy(row),
            parent.name()
        )));
    }
    check_buckets(t, &parent.start, row, &parent.end)?;
    t.descriptor.read().check_split_keys(&[row])
}

/// The region's computed split point (`split_point_in_file`) cut to its group under the
/// table's split restriction (HBase's restricted split point), or when that leaves a
/// daughter without rows of the file the point came from (the point fell in its first
/// group), the first key after that group: no longer than the group, so a boundary too.
/// `None` when neither splits the file's rows strictly inside the region (the region holds
/// one group: no split).
pub(super) fn restricted_split_point(t: &TableState, parent: &Region) -> Option<Bytes> {
    let (row, (first, last)) = super::split_point_in_file(parent)?;
    let Some(r) = t.descriptor.read().split_restriction else {
        return Some(row);
    };
    let splits = |x: &Bytes| strictly_inside(parent, x) && first < x && x <= &last;
    let cut = row.slice(..r.group(&row).len());
    if splits(&cut) {
        return Some(cut);
    }
    crate::keys::prefix_successor(&cut).filter(splits)
}

/// False when a region of a table with a split restriction has no split point (it holds one
/// group): the split policy then does not ask for a split it would only give up after
/// taking the region's locks and flushing it. True for every other table (its split point
/// is looked for under the locks).
pub(super) fn has_split_point(t: &TableState, region: &Region) -> bool {
    t.descriptor.read().split_restriction.is_none() || restricted_split_point(t, region).is_some()
}
