//! The per-row hooks of the compiled filter tree, HBase's: `reset`, `filter_all_remaining`,
//! `filter_row_key` with the row hints a scan seeks to (forward and reverse),
//! `filter_row_cells` and `filter_row`.
//!
//! Invariants kept: `reset` clears exactly the per-row state; a forward row hint is above the
//! row it was computed for and below or at the next row the node's `row_key` can accept, a
//! reverse one at or below the row with no row it accepts from there up to the row, so a seek
//! never skips a row the filter would accept.

use super::Node;
use crate::cell::Cell;
use crate::filter::rows::{next_range_start, past_all};
use bytes::Bytes;

fn random_accepts(seed: u64, row: &[u8], chance: f32) -> bool {
    let h = xxhash_rust::xxh3::xxh3_64_with_seed(row, seed);
    ((h >> 11) as f64 / (1u64 << 53) as f64) < f64::from(chance)
}

impl Node {
    pub(super) fn reset(&mut self) {
        match self {
            Node::ColumnCountGet { count, .. } | Node::ColumnPagination { count, .. } => *count = 0,
            Node::ColumnValue(v) => {
                v.found = false;
                v.matched = false;
            }
            Node::Dependent(d) => d.stamps.clear(),
            Node::FirstKeyOnly { found } => *found = false,
            Node::WhileMatch { inner, .. } => inner.reset(),
            Node::Skip { inner, out } => {
                inner.reset();
                *out = false;
            }
            Node::List(l) => {
                l.kids.iter_mut().for_each(Node::reset);
                l.row_out.iter_mut().for_each(|b| *b = false);
                l.included.iter_mut().for_each(|b| *b = false);
                l.hint = None;
            }
            _ => {}
        }
    }

    pub(super) fn all_remaining(&self) -> bool {
        match self {
            Node::Prefix { passed, .. } => *passed,
            Node::InclusiveStop { done, .. } | Node::MultiRange { done, .. } => *done,
            Node::Page { size, accepted } => accepted >= size,
            Node::ColumnCountGet { limit, count } => count > limit,
            Node::WhileMatch { inner, done } => *done || inner.all_remaining(),
            // SkipFilter passes only per-cell calls and transforms to the filter it wraps.
            Node::Skip { .. } => false,
            Node::List(l) if l.all => l.kids.iter().any(Node::all_remaining),
            Node::List(l) => !l.kids.is_empty() && l.kids.iter().all(Node::all_remaining),
            _ => false,
        }
    }

    /// True drops the row.
    pub(super) fn row_key(&mut self, row: &[u8]) -> bool {
        match self {
            Node::Prefix {
                prefix,
                reverse,
                passed,
            } => {
                if row.starts_with(prefix) {
                    return false;
                }
                if (!*reverse && row > prefix.as_ref()) || (*reverse && row < prefix.as_ref()) {
                    *passed = true;
                }
                true
            }
            Node::Row(op, c) => !c.test(*op, row),
            Node::InclusiveStop {
                stop,
                reverse,
                done,
            } => {
                let past = if *reverse {
                    row < stop.as_ref()
                } else {
                    row > stop.as_ref()
                };
                if past {
                    *done = true;
                }
                past
            }
            Node::RandomRow { chance, seed } => !random_accepts(*seed, row, *chance),
            Node::Fuzzy(rules) => !rules.iter().any(|r| r.matches(row)),
            Node::MultiRange {
                ranges,
                reverse,
                done,
            } => {
                if ranges.iter().any(|r| r.contains(row)) {
                    return false;
                }
                if past_all(ranges, row, *reverse) {
                    *done = true;
                }
                true
            }
            Node::WhileMatch { inner, done } => {
                let r = inner.row_key(row);
                if r {
                    *done = true;
                }
                r
            }
            Node::Skip { .. } => false,
            Node::List(l) if l.all => {
                // Every member sees the row key, as HBase's MUST_PASS_ALL asks them all:
                // PrefixFilter, InclusiveStopFilter, MultiRowRangeFilter and WhileMatchFilter
                // learn there that the scan passed them.
                let mut refused = false;
                for k in l.kids.iter_mut() {
                    if k.all_remaining() || k.row_key(row) {
                        refused = true;
                    }
                }
                refused
            }
            Node::List(l) => {
                for (k, out) in l.kids.iter_mut().zip(l.row_out.iter_mut()) {
                    *out = k.all_remaining() || k.row_key(row);
                }
                !l.row_out.is_empty() && l.row_out.iter().all(|o| *o)
            }
            _ => false,
        }
    }

    /// A row above `row` below which `row_key` accepts no row (forward scans).
    pub(super) fn row_hint(&self, row: &[u8]) -> Option<Bytes> {
        match self {
            Node::Prefix {
                prefix,
                reverse: false,
                ..
            } if row < prefix.as_ref() => Some(prefix.clone()),
            Node::Fuzzy(rules) if !rules.iter().any(|r| r.matches(row)) => rules
                .iter()
                .filter_map(|r| r.next_after(row))
                .min()
                .map(Bytes::from),
            Node::MultiRange {
                ranges,
                reverse: false,
                ..
            } if !ranges.iter().any(|r| r.contains(row)) => next_range_start(ranges, row),

            Node::List(l) if l.all => l.kids.iter().filter_map(|k| k.row_hint(row)).max(),
            Node::List(l) => {
                let mut best: Option<Bytes> = None;
                for k in l.kids.iter().filter(|k| !k.all_remaining()) {
                    let h = k.row_hint(row)?;
                    best = Some(best.map_or(h.clone(), |b| b.min(h)));
                }
                best
            }
            _ => None,
        }
    }

    /// Reverse scans: a row at or below `row` such that `row_key` accepts no row from it up
    /// to `row`; the scanner seeks below it.
    pub(super) fn row_hint_rev(&self, row: &[u8]) -> Option<Bytes> {
        match self {
            Node::Prefix {
                prefix,
                reverse: true,
                ..
            } if row > prefix.as_ref() && !row.starts_with(prefix) => {
                crate::keys::prefix_successor(prefix)
            }

            Node::List(l) if l.all => l.kids.iter().filter_map(|k| k.row_hint_rev(row)).min(),
            Node::List(l) => {
                let mut best: Option<Bytes> = None;
                for k in l.kids.iter().filter(|k| !k.all_remaining()) {
                    let h = k.row_hint_rev(row)?;
                    best = Some(best.map_or(h.clone(), |b| b.max(h)));
                }
                best
            }
            _ => None,
        }
    }
    pub(super) fn row_cells(&mut self, cells: &mut Vec<Cell>) {
        match self {
            Node::ColumnValue(v) if v.exclude => {
                cells.retain(|c| c.family != v.family || c.qualifier != v.qualifier)
            }
            Node::Dependent(d) => {
                // Sorted once per row, so a wide row costs cells x log(versions).
                d.stamps.sort_unstable();
                cells.retain(|c| d.stamps.binary_search(&c.timestamp).is_ok())
            }
            Node::WhileMatch { inner, .. } => inner.row_cells(cells),
            Node::List(l) => {
                for (k, out) in l.kids.iter_mut().zip(&l.row_out) {
                    if l.all || !*out {
                        k.row_cells(cells);
                    }
                }
            }
            _ => {}
        }
    }

    /// True drops the assembled row.
    pub(super) fn row(&mut self) -> bool {
        match self {
            Node::ColumnValue(v) => {
                if v.found {
                    !v.matched
                } else {
                    v.filter_if_missing
                }
            }
            Node::Page { size, accepted } => {
                *accepted += 1;
                *accepted > *size
            }
            Node::Skip { out, .. } => *out,
            Node::WhileMatch { inner, done } => {
                if inner.row() {
                    *done = true;
                }
                *done
            }
            Node::List(l) if l.all => l.kids.iter_mut().any(Node::row),
            Node::List(l) => {
                let mut drop = true;
                for (k, out) in l.kids.iter_mut().zip(&l.row_out) {
                    if !*out && !k.row() {
                        drop = false;
                    }
                }
                drop && !l.kids.is_empty()
            }
            _ => false,
        }
    }
}
