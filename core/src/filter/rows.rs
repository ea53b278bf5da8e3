//! Row-key arithmetic for the filters that know where the next accepted row starts:
//! FuzzyRowFilter's next matching key and MultiRowRangeFilter's sorted, merged ranges.
//!
//! Invariant of every `next_*` function: no row strictly between the given row and the
//! returned one is accepted, so a scanner may seek straight to it.

use super::RowRangeSpec;
use bytes::Bytes;
use std::cmp::Ordering;

/// One fuzzy rule: `fixed[i]` says whether position `i` must equal `key[i]`.
#[derive(Debug, Clone)]
pub(crate) struct FuzzyRule {
    pub key: Vec<u8>,
    pub fixed: Vec<bool>,
}

impl FuzzyRule {
    /// True when `row` matches the rule.
    pub fn matches(&self, row: &[u8]) -> bool {
        row.len() >= self.key.len()
            && self
                .key
                .iter()
                .zip(&self.fixed)
                .zip(row)
                .all(|((k, f), r)| !f || k == r)
    }

    /// The smallest key `> row` that matches, for a `row` that does not match; `None` when no
    /// greater key matches.
    pub fn next_after(&self, row: &[u8]) -> Option<Vec<u8>> {
        let n = self.key.len();
        // Every row > `row` that matches is >= the smallest length-n string above `row`'s
        // prefix: `row` cut to n bytes, or padded with zeros (a non-matching row cut to n
        // bytes does not match either, so it is itself excluded).
        let mut t: Vec<u8> = row.iter().copied().take(n).collect();
        t.resize(n, 0);
        let fill = |s: &mut Vec<u8>, from: usize| {
            let rule = self.key.iter().zip(&self.fixed).skip(from);
            for (b, (k, fixed)) in s.iter_mut().skip(from).zip(rule) {
                *b = if *fixed { *k } else { 0 };
            }
        };
        for i in 0..n {
            if !self.fixed[i] || t[i] == self.key[i] {
                continue;
            }
            if self.key[i] > t[i] {
                t[i] = self.key[i];
                fill(&mut t, i + 1);
                return Some(t);
            }
            // Too big at a fixed position: raise the last free position before it.
            let j = (0..i).rev().find(|&j| !self.fixed[j] && t[j] < 0xFF)?;
            t[j] += 1;
            fill(&mut t, j + 1);
            return Some(t);
        }
        // `t` matches: it is above `row` only when `row` was shorter than n.
        (t.as_slice() > row).then_some(t)
    }
}

/// Sorted, non-overlapping ranges; `stop` `None` is unbounded.
#[derive(Debug, Clone)]
pub(crate) struct Range {
    pub start: Bytes,
    pub start_inclusive: bool,
    pub stop: Option<Bytes>,
    pub stop_inclusive: bool,
}

impl Range {
    fn above_start(&self, row: &[u8]) -> bool {
        match row.cmp(self.start.as_ref()) {
            Ordering::Greater => true,
            Ordering::Equal => self.start_inclusive,
            Ordering::Less => false,
        }
    }

    fn below_stop(&self, row: &[u8]) -> bool {
        match &self.stop {
            None => true,
            Some(s) => match row.cmp(s.as_ref()) {
                Ordering::Less => true,
                Ordering::Equal => self.stop_inclusive,
                Ordering::Greater => false,
            },
        }
    }

    /// True when `row` is inside.
    pub fn contains(&self, row: &[u8]) -> bool {
        self.above_start(row) && self.below_stop(row)
    }
}

/// The ranges, sorted by start; empty ranges dropped.
pub(crate) fn sort_ranges(specs: &[RowRangeSpec]) -> Vec<Range> {
    let mut v: Vec<Range> = specs
        .iter()
        .map(|s| Range {
            start: s.start.clone(),
            start_inclusive: s.start_inclusive || s.start.is_empty(),
            stop: (!s.stop.is_empty()).then(|| s.stop.clone()),
            stop_inclusive: s.stop_inclusive,
        })
        .filter(|r| match &r.stop {
            None => true,
            Some(stop) => match r.start.as_ref().cmp(stop.as_ref()) {
                Ordering::Less => true,
                Ordering::Equal => r.start_inclusive && r.stop_inclusive,
                Ordering::Greater => false,
            },
        })
        .collect();
    v.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.start_inclusive.cmp(&a.start_inclusive))
    });
    v
}

/// The first row above `row` that some range may hold, for a `row` no range holds.
pub(crate) fn next_range_start(ranges: &[Range], row: &[u8]) -> Option<Bytes> {
    ranges
        .iter()
        .filter(|r| !r.above_start(row) || r.start.as_ref() == row)
        .filter(|r| r.start.as_ref() >= row)
        .map(|r| {
            if r.start_inclusive && r.start.as_ref() > row {
                r.start.clone()
            } else {
                crate::keys::row_successor(&r.start)
            }
        })
        .min()
}

/// True when every range ends before `row` (forward) or starts after it (reverse).
pub(crate) fn past_all(ranges: &[Range], row: &[u8], reverse: bool) -> bool {
    if reverse {
        ranges.iter().all(|r| !r.above_start(row))
    } else {
        ranges.iter().all(|r| !r.below_stop(row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rule(key: &[u8], mask: &[u8]) -> FuzzyRule {
        FuzzyRule {
            key: key.to_vec(),
            fixed: mask.iter().map(|m| *m == 0).collect(),
        }
    }

    proptest! {
        /// The hint is a matching key above the row, and no key in between (of length up
        /// to 3 over a small alphabet) matches.
        #[test]
        fn fuzzy_next_is_the_next_match(
            key in prop::collection::vec(0u8..4, 1..3),
            mask in prop::collection::vec(0u8..2, 3),
            row in prop::collection::vec(prop_oneof![0u8..4, Just(0xFFu8)], 0..4),
        ) {
            let mask = &mask[..key.len()];
            let r = rule(&key, mask);
            prop_assume!(!r.matches(&row));
            let next = r.next_after(&row);
            let alphabet = [0u8, 1, 2, 3, 0xFF];
            let mut all: Vec<Vec<u8>> = vec![vec![]];
            for len in 1..=3 {
                let mut more = Vec::new();
                for p in all.iter().filter(|p| p.len() == len - 1) {
                    for a in alphabet {
                        let mut q = p.clone();
                        q.push(a);
                        more.push(q);
                    }
                }
                all.extend(more);
            }
            if let Some(n) = &next {
                prop_assert!(r.matches(n));
                prop_assert!(n.as_slice() > row.as_slice());
            }
            for k in all {
                if k.as_slice() > row.as_slice() && r.matches(&k) {
                    prop_assert!(next.as_ref().is_some_and(|n| n.as_slice() <= k.as_slice()),
                        "{:?} matches between {:?} and {:?}", k, row, next);
                }
            }
        }
    }

    #[test]
    fn range_starts() {
        let ranges = sort_ranges(&[RowRangeSpec::new("c", "e"), RowRangeSpec::new("a", "b")]);
        assert_eq!(next_range_start(&ranges, b"b").as_deref(), Some(&b"c"[..]));
        assert_eq!(next_range_start(&ranges, b"0").as_deref(), Some(&b"a"[..]));
        assert!(past_all(&ranges, b"e", false));
        assert!(!past_all(&ranges, b"d", false));
    }
}
