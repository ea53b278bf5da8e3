//! Which store files a minor compaction rewrites: HBase's exploring selection.
//!
//! Input: the sizes of a store's files, oldest first. Output: one contiguous window of them
//! (adjacent in age, so that a compaction never reorders data between files it skips), or
//! nothing. The rules, as HBase's `ExploringCompactionPolicy`:
//!
//! 1. A window holds at least `min_files` and at most `max_files` files (HBase's
//!    `hbase.hstore.compaction.min` = 3, `.max` = 10).
//! 2. A window is *in ratio* when no file in it is larger than `ratio` times the sum of the
//!    other files in it (`hbase.hstore.compaction.ratio` = 1.2), so one big old file is not
//!    rewritten again and again for a few small new ones.
//! 3. Of the windows in ratio, the one with the most files wins; of equal counts, the
//!    smallest total size; of equal sizes, the oldest.
//! 4. When no window is in ratio but the store "may be stuck" (it has reached the blocking
//!    file count, so writers are being slowed), the smallest window of legal length is
//!    taken anyway, so that the file count always comes down.
//!
//! Invariants: the result is `None` or a range `start..end` with
//! `min_files <= end - start <= max_files` and `end <= sizes.len()`; without `may_be_stuck`
//! it is in ratio. The function is pure.

use std::ops::Range;

/// The knobs of the exploring selection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyConfig {
    /// Fewest files in one minor compaction (at least 2).
    pub min_files: usize,
    /// Most files in one minor compaction.
    pub max_files: usize,
    /// Size ratio (rule 2).
    pub ratio: f64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            min_files: 3,
            max_files: 10,
            ratio: 1.2,
        }
    }
}

/// True when no file of `window` is larger than `ratio` times the sum of the others.
pub fn files_in_ratio(window: &[u64], ratio: f64) -> bool {
    if window.len() < 2 {
        return true;
    }
    let total: u64 = window.iter().sum();
    window
        .iter()
        .all(|&s| s as f64 <= (total - s) as f64 * ratio)
}

/// Picks the files of a minor compaction from `sizes` (oldest first); see the module doc.
pub fn select(sizes: &[u64], cfg: &PolicyConfig, may_be_stuck: bool) -> Option<Range<usize>> {
    let min = cfg.min_files.max(2);
    let max = cfg.max_files.max(min);
    let n = sizes.len();
    let mut best: Option<(Range<usize>, u64)> = None;
    let mut smallest: Option<(Range<usize>, u64)> = None;
    for start in 0..n {
        for end in (start + min)..=n.min(start + max) {
            let window = &sizes[start..end];
            let size: u64 = window.iter().sum();
            if smallest.as_ref().is_none_or(|(_, s)| size < *s) {
                smallest = Some((start..end, size));
            }
            if !files_in_ratio(window, cfg.ratio) {
                continue;
            }
            let better = match &best {
                None => true,
                Some((r, s)) => window.len() > r.len() || (window.len() == r.len() && size < *s),
            };
            if better {
                best = Some((start..end, size));
            }
        }
    }
    match best {
        Some((r, _)) => Some(r),
        None if may_be_stuck => smallest.map(|(r, _)| r),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg(min: usize, max: usize, ratio: f64) -> PolicyConfig {
        PolicyConfig {
            min_files: min,
            max_files: max,
            ratio,
        }
    }

    #[test]
    fn too_few_files_select_nothing() {
        assert_eq!(select(&[10, 10], &PolicyConfig::default(), false), None);
        assert_eq!(select(&[], &PolicyConfig::default(), true), None);
    }

    #[test]
    fn skips_a_big_old_file() {
        // The 1000-byte file is out of ratio with the small ones; the small ones are taken.
        let sizes = [1000, 10, 12, 11, 9];
        assert_eq!(select(&sizes, &PolicyConfig::default(), false), Some(1..5));
    }

    #[test]
    fn caps_at_max_files_and_prefers_smaller_total() {
        let sizes = [50, 10, 10, 10, 10];
        // Windows of 3: [50,10,10] is out of ratio; [10,10,10] twice: the oldest wins.
        assert_eq!(select(&sizes, &cfg(3, 3, 1.2), false), Some(1..4));
        assert_eq!(
            select(&[30, 20, 10, 10], &cfg(2, 2, 1.2), false),
            Some(2..4)
        );
    }

    #[test]
    fn stuck_store_takes_the_smallest_window() {
        let sizes = [1, 100, 10_000, 1_000_000];
        assert_eq!(select(&sizes, &PolicyConfig::default(), false), None);
        assert_eq!(select(&sizes, &PolicyConfig::default(), true), Some(0..3));
    }

    /// The naive definition: every legal window, best by (most files, smallest size, oldest).
    fn brute(sizes: &[u64], c: &PolicyConfig, stuck: bool) -> Option<Range<usize>> {
        let mut windows = Vec::new();
        for s in 0..sizes.len() {
            for e in s..=sizes.len() {
                if e - s >= c.min_files && e - s <= c.max_files {
                    windows.push(s..e);
                }
            }
        }
        let total = |r: &Range<usize>| sizes[r.clone()].iter().sum::<u64>();
        let in_ratio = windows
            .iter()
            .filter(|r| {
                let w = &sizes[(*r).clone()];
                w.iter()
                    .all(|&x| x as f64 <= (w.iter().sum::<u64>() - x) as f64 * c.ratio)
            })
            .min_by_key(|r| (std::cmp::Reverse(r.len()), total(r), r.start))
            .cloned();
        in_ratio.or_else(|| {
            if stuck {
                windows.iter().min_by_key(|r| (total(r), r.start)).cloned()
            } else {
                None
            }
        })
    }

    proptest! {
        #[test]
        fn matches_the_naive_definition(
            sizes in prop::collection::vec(1u64..1000, 0..14),
            min in 2usize..5,
            extra in 0usize..6,
            ratio in prop_oneof![Just(1.0), Just(1.2), Just(2.0), Just(5.0)],
            stuck in any::<bool>(),
        ) {
            let c = cfg(min, min + extra, ratio);
            let got = select(&sizes, &c, stuck);
            prop_assert_eq!(got.clone(), brute(&sizes, &c, stuck));
            if let Some(r) = got {
                prop_assert!(r.len() >= min && r.len() <= min + extra && r.end <= sizes.len());
                if !stuck {
                    prop_assert!(files_in_ratio(&sizes[r], ratio));
                }
            }
        }
    }
}
