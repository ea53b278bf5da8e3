//! Split restrictions: which rows a split may never separate (HBase's
//! `KeyPrefixRegionSplitRestriction`).
//!
//! A table with [`SplitRestriction::KeyPrefix`]`(n)` keeps every *group* of rows in one
//! region: the rows sharing their first `n` bytes (a row shorter than `n` bytes is a group
//! of its own). A group `g` of `n` bytes holds exactly the keys in
//! `[g, g's prefix successor)`, so a region boundary never falls inside a group when every
//! boundary is at most `n` bytes long: such a boundary `b` either sorts below `g` or above
//! every key that starts with `g` (it cannot start with `g` and be longer).
//!
//! Invariants kept by the engine for a restricted table: every pre-split key and every split
//! row is a [`SplitRestriction::is_boundary`]; a computed split point is cut to its group
//! ([`SplitRestriction::group`]), and no split happens when the cut point is not strictly
//! inside the region; a given split row inside a group is refused; merges only remove
//! boundaries. The restriction is fixed when the table is created.
//!
//! What it is for: rows of one group commit, split and merge together, so a region-local
//! index can check a value unique within a group in one region (see `basalt-index`).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Which rows of a table a split never separates.
///
/// ```
/// use basalt_core::SplitRestriction;
/// let r = SplitRestriction::KeyPrefix(4);
/// assert_eq!(r.group(b"user42|2026"), b"user");
/// assert!(r.is_boundary(b"usez"));
/// assert!(!r.is_boundary(b"user42"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SplitRestriction {
    /// Rows sharing their first `n` bytes stay in one region (HBase's
    /// `KeyPrefixRegionSplitRestriction` with `prefix_length` `n`).
    KeyPrefix(u32),
}

impl SplitRestriction {
    /// The group of `row`: the part of its key that rows of one region share.
    pub fn group<'a>(&self, row: &'a [u8]) -> &'a [u8] {
        match *self {
            SplitRestriction::KeyPrefix(n) => row.get(..n as usize).unwrap_or(row),
        }
    }

    /// True when a region may start at `row`: no group has rows on both sides of it.
    pub fn is_boundary(&self, row: &[u8]) -> bool {
        self.group(row).len() == row.len()
    }

    /// The prefix length, in bytes.
    pub fn prefix_len(&self) -> usize {
        match *self {
            SplitRestriction::KeyPrefix(n) => n as usize,
        }
    }

    /// Refuses a prefix length of 0 or longer than a row may be.
    pub fn validate(&self) -> Result<()> {
        let n = self.prefix_len();
        if n == 0 || n > crate::cell::MAX_ROW_LENGTH {
            return Err(Error::bad_argument(format!(
                "split restriction: the key prefix length must be in 1..={}, not {n}",
                crate::cell::MAX_ROW_LENGTH
            )));
        }
        Ok(())
    }

    /// Refuses a split row (or pre-split key) that falls inside a group.
    pub fn check_split_row(&self, row: &[u8]) -> Result<()> {
        if self.is_boundary(row) {
            return Ok(());
        }
        Err(Error::bad_argument(format!(
            "split row {:?} falls inside the group of rows sharing its first {} bytes, which \
             the table's split restriction keeps in one region (split at {:?} instead)",
            String::from_utf8_lossy(row),
            self.prefix_len(),
            String::from_utf8_lossy(self.group(row))
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a model (every row of a small alphabet, grouped by the definition): a
        /// boundary never has rows of one group on both sides, and every split point cut to
        /// its group is a boundary.
        #[test]
        fn boundaries_never_separate_a_group(
            n in 1u32..4,
            b in proptest::collection::vec(0u8..3, 0..6),
        ) {
            let r = SplitRestriction::KeyPrefix(n);
            let mut rows: Vec<Vec<u8>> = vec![Vec::new()];
            for len in 1..6 {
                let mut next = Vec::new();
                for row in rows.iter().filter(|x| x.len() == len - 1) {
                    for c in 0u8..3 {
                        let mut x = row.clone();
                        x.push(c);
                        next.push(x);
                    }
                }
                rows.extend(next);
            }
            let cut = r.group(&b).to_vec();
            prop_assert!(r.is_boundary(&cut));
            prop_assert!(cut.len() <= n as usize && b.starts_with(&cut));
            if r.is_boundary(&b) {
                let group_of = |x: &Vec<u8>| x.get(..n as usize).unwrap_or(x).to_vec();
                let below: std::collections::BTreeSet<Vec<u8>> =
                    rows.iter().filter(|x| **x < b).map(group_of).collect();
                for x in rows.iter().filter(|x| **x >= b) {
                    prop_assert!(!below.contains(&group_of(x)), "{b:?} splits {x:?}");
                }
            } else {
                prop_assert!(r.check_split_row(&b).is_err());
            }
        }
    }

    #[test]
    fn lengths_are_validated() {
        assert!(SplitRestriction::KeyPrefix(0).validate().is_err());
        assert!(SplitRestriction::KeyPrefix(40_000).validate().is_err());
        assert!(SplitRestriction::KeyPrefix(8).validate().is_ok());
        assert_eq!(SplitRestriction::KeyPrefix(8).group(b"ab"), b"ab");
    }
}
