//! Split policies and the choice of a split row: pure functions, no engine state.
//!
//! Invariants: a threshold never exceeds the configured upper bound; a chosen split row is
//! strictly inside the region and is neither the first nor the last row of the file it came
//! from, so both daughters of a split get rows.

use bytes::Bytes;

/// When a region splits by itself (HBase's region split policies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SplitPolicy {
    /// Never by itself; `Admin::split_region` still splits.
    Disabled,
    /// When its largest store passes `Config::max_region_size` (HBase's
    /// `ConstantSizeRegionSplitPolicy`).
    ConstantSize,
    /// When its largest store passes `min(max_region_size, 2 * flush_size * n^3)`, where `n`
    /// is the number of regions of its table (HBase's `IncreasingToUpperBoundRegionSplitPolicy`,
    /// its default): a new table splits early and often, a big one at the upper bound.
    #[default]
    IncreasingToUpperBound,
}

impl SplitPolicy {
    /// The store size (bytes in files) above which a region splits, `None` when it never
    /// does by itself. `regions` is the table's region count (at least 1 is assumed).
    pub fn threshold(self, max_region_size: u64, flush_size: u64, regions: usize) -> Option<u64> {
        match self {
            SplitPolicy::Disabled => None,
            SplitPolicy::ConstantSize => Some(max_region_size),
            SplitPolicy::IncreasingToUpperBound => {
                let n = regions.max(1) as u64;
                let grown = flush_size
                    .saturating_mul(2)
                    .saturating_mul(n.saturating_mul(n).saturating_mul(n));
                Some(grown.min(max_region_size))
            }
        }
    }
}

/// The split row HBase picks from a file: the row of the first key of its middle block,
/// unless that row is the file's first or last row (no useful split), or is not strictly
/// inside `[start, end)` (empty `end` = no bound).
pub fn choose_split_row(
    middle: &[u8],
    first: &[u8],
    last: &[u8],
    start: &[u8],
    end: &[u8],
) -> Option<Bytes> {
    if middle == first || middle == last {
        return None;
    }
    if middle <= start || (!end.is_empty() && middle >= end) {
        return None;
    }
    Some(Bytes::copy_from_slice(middle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increasing_to_upper_bound_grows_with_the_cube_of_the_region_count() {
        let p = SplitPolicy::IncreasingToUpperBound;
        let mb = 1 << 20;
        assert_eq!(p.threshold(10_000 * mb, 128 * mb, 1), Some(256 * mb));
        assert_eq!(p.threshold(10_000 * mb, 128 * mb, 2), Some(2048 * mb));
        assert_eq!(p.threshold(10_000 * mb, 128 * mb, 3), Some(6912 * mb));
        assert_eq!(p.threshold(10_000 * mb, 128 * mb, 4), Some(10_000 * mb));
        assert_eq!(p.threshold(10_000 * mb, 128 * mb, 0), Some(256 * mb));
        assert_eq!(p.threshold(u64::MAX, u64::MAX, 1000), Some(u64::MAX));
        assert_eq!(SplitPolicy::ConstantSize.threshold(7, 128 * mb, 1), Some(7));
        assert_eq!(SplitPolicy::Disabled.threshold(7, 1, 1), None);
    }

    #[test]
    fn split_row_is_never_the_first_or_last_row_and_lies_inside_the_region() {
        let ok = choose_split_row(b"m", b"a", b"z", b"", b"");
        assert_eq!(ok, Some(Bytes::from_static(b"m")));
        assert_eq!(choose_split_row(b"a", b"a", b"z", b"", b""), None);
        assert_eq!(choose_split_row(b"z", b"a", b"z", b"", b""), None);
        // Outside or on the region's bounds.
        assert_eq!(choose_split_row(b"m", b"a", b"z", b"m", b""), None);
        assert_eq!(choose_split_row(b"m", b"a", b"z", b"", b"m"), None);
        assert_eq!(choose_split_row(b"m", b"a", b"z", b"n", b""), None);
        assert_eq!(
            choose_split_row(b"m", b"a", b"z", b"b", b"n"),
            Some(Bytes::from_static(b"m"))
        );
    }
}
