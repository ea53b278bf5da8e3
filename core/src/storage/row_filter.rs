//! A MemStore's filter of the rows it holds: a blocked bloom filter that answers "certainly
//! not here" for most rows a MemStore lacks without searching its skiplist.
//!
//! Index maintenance asks, under the row lock, whether any store holds a data row before it
//! reads it ([`crate::region::Store::may_hold_row`]); for a new row the MemStore's answer was
//! a full skiplist search (8% of an indexed put's extra CPU). The filter sets three bits of
//! one 64-bit word per row, chosen by XXH3 of the row, so a probe costs one hash and one
//! load.
//!
//! Invariant: no false negative. Every row inserted into the MemStore is added to its filter
//! before the insert returns, and bits are never cleared. A reader that must see an insert
//! (a get whose read point covers it, a writer holding the row lock after it) is ordered
//! after it by the MVCC read point or the lock, so it sees the bits. False positives (about
//! 2% at the planned row count, more past it) only cost the search the filter would save.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits planned per row.
const BITS_PER_ROW: usize = 10;
/// The smallest filter: 1,024 words (8 KiB).
const MIN_WORDS: usize = 1 << 10;
/// The largest filter: 2^22 words (32 MiB), for 26 million planned rows.
const MAX_WORDS: usize = 1 << 22;

/// A blocked bloom filter over row keys.
#[derive(Debug)]
pub struct RowFilter {
    words: Box<[AtomicU64]>,
}

impl RowFilter {
    /// A filter planned for `rows` rows (clamped to 8 KiB .. 32 MiB).
    pub fn for_rows(rows: usize) -> Self {
        let words = (rows.saturating_mul(BITS_PER_ROW) / 64).clamp(MIN_WORDS, MAX_WORDS);
        RowFilter {
            words: (0..words.next_power_of_two())
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// The word and the three bits of `row`.
    fn slot(&self, row: &[u8]) -> (usize, u64) {
        let h = xxhash_rust::xxh3::xxh3_64(row);
        // `words.len()` is a power of two: the top bits pick the word, the low 18 the bits.
        let word = (h >> 32) as usize & (self.words.len() - 1);
        let mask = (1u64 << (h & 63)) | (1u64 << ((h >> 6) & 63)) | (1u64 << ((h >> 12) & 63));
        (word, mask)
    }

    /// Adds `row`.
    pub fn insert(&self, row: &[u8]) {
        let (word, mask) = self.slot(row);
        if let Some(w) = self.words.get(word) {
            if w.load(Ordering::Relaxed) & mask != mask {
                w.fetch_or(mask, Ordering::Release);
            }
        }
    }

    /// False when `row` was certainly never added.
    pub fn may_contain(&self, row: &[u8]) -> bool {
        let (word, mask) = self.slot(row);
        self.words
            .get(word)
            .is_none_or(|w| w.load(Ordering::Acquire) & mask == mask)
    }

    /// The filter's size in bytes.
    #[cfg(test)]
    pub fn size(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Against a set of rows: every added row is reported, at any size.
        #[test]
        fn never_a_false_negative(
            rows in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..400),
            probes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..100),
            planned in 0usize..5000,
        ) {
            let f = RowFilter::for_rows(planned);
            let model: BTreeSet<Vec<u8>> = rows.iter().cloned().collect();
            for r in &rows {
                f.insert(r);
            }
            for r in rows.iter().chain(&probes) {
                if model.contains(r) {
                    prop_assert!(f.may_contain(r));
                }
            }
        }
    }

    #[test]
    fn false_positives_stay_rare_at_the_planned_size() {
        let f = RowFilter::for_rows(100_000);
        for i in 0..100_000u64 {
            f.insert(format!("row-{i}").as_bytes());
        }
        let hits = (0..100_000u64)
            .filter(|i| f.may_contain(format!("absent-{i}").as_bytes()))
            .count();
        // Three bits in one word at 10+ bits per row: about 2%.
        assert!(hits < 4_000, "{hits} false positives in 100,000");
        assert!(
            hits > 0,
            "a filter with no false positive at all is suspicious"
        );
    }

    #[test]
    fn sizes_are_clamped_powers_of_two() {
        assert_eq!(RowFilter::for_rows(0).size(), MIN_WORDS * 8);
        assert_eq!(RowFilter::for_rows(usize::MAX).size(), MAX_WORDS * 8);
        assert!(RowFilter::for_rows(1_000_000).size().is_power_of_two());
    }
}
