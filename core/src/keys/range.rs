//! Row ranges and row successors: the bounds scans, store files and filters agree on.
//!
//! Invariant: [`row_successor`] is the smallest row above its argument, so `[a, succ(a))`
//! holds exactly row `a`.

use bytes::Bytes;
use std::ops::Bound;

/// A range of rows (its serde form is an endpoint call's range on the wire).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowRange {
    /// Lower bound.
    pub lo: Bound<Bytes>,
    /// Upper bound.
    pub hi: Bound<Bytes>,
}

impl RowRange {
    /// Every row.
    pub fn all() -> Self {
        RowRange {
            lo: Bound::Unbounded,
            hi: Bound::Unbounded,
        }
    }

    /// False when no row of the region `[start, end)` (an empty `end`: no upper bound) can be
    /// inside: the region ends at or below the lower bound, or starts above the upper one.
    /// True otherwise, which may still leave no row in common (a lower bound excluding `k`
    /// against a region ending at `k\0`): callers that need the rows clip the range.
    pub fn overlaps(&self, start: &[u8], end: &[u8]) -> bool {
        let ends_before = !end.is_empty()
            && match &self.lo {
                Bound::Included(l) | Bound::Excluded(l) => end <= l.as_ref(),
                Bound::Unbounded => false,
            };
        let starts_after = match &self.hi {
            Bound::Included(h) => start > h.as_ref(),
            Bound::Excluded(h) => start >= h.as_ref(),
            Bound::Unbounded => false,
        };
        !ends_before && !starts_after
    }

    /// True when `row` is inside.
    pub fn contains(&self, row: &[u8]) -> bool {
        let above = match &self.lo {
            Bound::Included(l) => row >= l.as_ref(),
            Bound::Excluded(l) => row > l.as_ref(),
            Bound::Unbounded => true,
        };
        let below = match &self.hi {
            Bound::Included(h) => row <= h.as_ref(),
            Bound::Excluded(h) => row < h.as_ref(),
            Bound::Unbounded => true,
        };
        above && below
    }

    /// True when `row` lies above the upper bound.
    pub fn past_hi(&self, row: &[u8]) -> bool {
        match &self.hi {
            Bound::Included(h) => row > h.as_ref(),
            Bound::Excluded(h) => row >= h.as_ref(),
            Bound::Unbounded => false,
        }
    }

    /// True when `row` lies below the lower bound.
    pub fn before_lo(&self, row: &[u8]) -> bool {
        match &self.lo {
            Bound::Included(l) => row < l.as_ref(),
            Bound::Excluded(l) => row <= l.as_ref(),
            Bound::Unbounded => false,
        }
    }

    /// Narrows the range to a region's `[start, end)`.
    pub fn clip(&self, start: &Bytes, end: &Bytes) -> RowRange {
        let lo = match &self.lo {
            Bound::Unbounded if start.is_empty() => Bound::Unbounded,
            Bound::Unbounded => Bound::Included(start.clone()),
            Bound::Included(l) | Bound::Excluded(l) if l < start => Bound::Included(start.clone()),
            b => b.clone(),
        };
        let hi = match &self.hi {
            Bound::Unbounded if end.is_empty() => Bound::Unbounded,
            Bound::Unbounded => Bound::Excluded(end.clone()),
            Bound::Included(h) | Bound::Excluded(h) if !end.is_empty() && h >= end => {
                Bound::Excluded(end.clone())
            }
            b => b.clone(),
        };
        RowRange { lo, hi }
    }
}

/// The smallest row greater than every row that starts with `p`, the exclusive end of a
/// prefix scan (`None`: no such row, `p` is empty or all 0xFF bytes).
///
/// ```
/// use basalt_core::keys::prefix_successor;
/// assert_eq!(prefix_successor(b"ab").as_deref(), Some(&b"ac"[..]));
/// assert_eq!(prefix_successor(b"a\xff").as_deref(), Some(&b"b"[..]));
/// assert_eq!(prefix_successor(b"\xff\xff"), None);
/// ```
pub fn prefix_successor(p: &[u8]) -> Option<Bytes> {
    let mut v = p.to_vec();
    while let Some(last) = v.pop() {
        if last < 0xFF {
            v.push(last + 1);
            return Some(Bytes::from(v));
        }
    }
    None
}

/// `row` followed by a zero byte: the smallest row greater than `row`.
pub fn row_successor(row: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(row.len() + 1);
    v.extend_from_slice(row);
    v.push(0);
    Bytes::from(v)
}
