//! Tests of the k-way merge: property tests against the sorted union of its sources, seeks,
//! and the pipelined merge against the inline one.

use super::*;
use crate::cell::{CellType, StoreKey};
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn cell(row: u8, seq: u64) -> StoreCell {
    StoreCell {
        key: StoreKey {
            row: Bytes::copy_from_slice(&[row]),
            qualifier: Bytes::new(),
            ts: 1,
            kind: CellType::Put,
            seq,
        },
        value: Bytes::new(),
    }
}

/// Merges `lists` of (row, qualifier, seq) cells, one source per list, and compares the
/// output with the sorted set of all their keys.
fn check_merge(lists: &[Vec<(u8, u8, u64)>], reverse: bool) -> Result<(), TestCaseError> {
    let mut model = BTreeSet::new();
    let mut sources: Vec<CellSource> = Vec::new();
    for l in lists {
        let mut cells: Vec<StoreCell> = l
            .iter()
            .map(|(r, q, s)| {
                let mut c = cell(*r, *s);
                c.key.qualifier = Bytes::copy_from_slice(&[*q]);
                c
            })
            .collect();
        cells.sort_by(|a, b| a.key.cmp(&b.key));
        cells.dedup_by(|a, b| a.key == b.key);
        if reverse {
            cells.reverse();
        }
        for c in &cells {
            model.insert(c.key.clone());
        }
        sources.push(CellSource::Boxed(Box::new(cells.into_iter().map(Ok))));
    }
    let got: Vec<StoreKey> = MergeIter::new(sources, reverse)
        .map(|c| c.map(|c| c.key))
        .collect::<Result<_>>()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut want: Vec<StoreKey> = model.into_iter().collect();
    if reverse {
        want.reverse();
    }
    prop_assert_eq!(got, want);
    Ok(())
}

fn keyed(row: u8, q: u8, seq: u64) -> StoreCell {
    let mut c = cell(row, seq);
    c.key.qualifier = Bytes::copy_from_slice(&[q]);
    c
}

proptest! {
    /// Seeking a merge of MemStores, store-file-like boxed sources and real MemStore
    /// scanners yields exactly the unseen cells at or after each seek key.
    #[test]
    fn seek_skips_exactly_to_the_key(
        lists in prop::collection::vec(prop::collection::btree_set((0u8..12, 0u8..3, 0u64..3), 0..30), 1..5),
        steps in prop::collection::vec((0usize..4, 0u8..14, 0u8..4), 0..8),
        reverse in any::<bool>(),
    ) {
        let mut model = BTreeSet::new();
        let mut sources: Vec<CellSource> = Vec::new();
        for (i, l) in lists.iter().enumerate() {
            let mut cells: Vec<StoreCell> = l.iter().map(|(r, q, s)| keyed(*r, *q, *s)).collect();
            cells.sort_by(|a, b| a.key.cmp(&b.key));
            for c in &cells { model.insert(c.key.clone()); }
            if i % 2 == 0 {
                let m = std::sync::Arc::new(crate::storage::memstore::MemStore::new());
                for c in cells { m.insert(c); }
                sources.push(CellSource::Mem(if reverse { m.scan_rev_from(None) } else { m.scan_from(None) }));
            } else {
                if reverse { cells.reverse(); }
                sources.push(CellSource::Boxed(Box::new(cells.into_iter().map(Ok))));
            }
        }
        let mut want: Vec<StoreKey> = model.into_iter().collect();
        if reverse { want.reverse(); }
        let mut m = MergeIter::new(sources, reverse);
        let mut pos = 0;
        for (take, row, q) in steps {
            for _ in 0..take {
                let got = m.next().map(|c| c.unwrap().key);
                prop_assert_eq!(got.as_ref(), want.get(pos));
                if got.is_some() { pos += 1; }
            }
            let mut key = StoreKey::first_on_row(Bytes::copy_from_slice(&[row]));
            key.qualifier = Bytes::copy_from_slice(&[q]);
            // Only seek ahead of what was yielded.
            let ahead = match pos.checked_sub(1).and_then(|p| want.get(p)) {
                None => true,
                Some(last) => if reverse { key < *last } else { key > *last },
            };
            if !ahead { continue; }
            m.seek(&key);
            while want.get(pos).is_some_and(|k| if reverse { *k > key } else { *k < key }) {
                pos += 1;
            }
        }
        let rest: Vec<StoreKey> = m.map(|c| c.unwrap().key).collect();
        prop_assert_eq!(&rest[..], &want[pos.min(want.len())..]);
    }

    /// A merge moved to a helper thread after any number of cells yields exactly what
    /// the same merge yields inline: the same cells, seeks (by stepping) included, and a
    /// source's error after the same cells, then nothing.
    #[test]
    fn pipelined_merge_yields_what_the_inline_merge_yields(
        lists in prop::collection::vec(prop::collection::btree_set((0u8..40, 0u8..3, 0u64..3), 0..600), 1..4),
        fail_after in proptest::option::of(0usize..700),
        pipeline_at in 0usize..800,
        seek in proptest::option::of((0usize..900, 0u8..42)),
        reverse in any::<bool>(),
    ) {
        let build = || {
            let mut sources: Vec<CellSource> = Vec::new();
            for (i, l) in lists.iter().enumerate() {
                let mut cells: Vec<StoreCell> = l.iter().map(|(r, q, s)| keyed(*r, *q, *s)).collect();
                cells.sort_by(|a, b| a.key.cmp(&b.key));
                if reverse { cells.reverse(); }
                let items: Vec<Result<StoreCell>> = cells.into_iter().enumerate().map(|(n, c)| {
                    match fail_after {
                        Some(f) if i == 0 && n >= f => Err(crate::error::Error::bad_argument("source failed")),
                        _ => Ok(c),
                    }
                }).collect();
                sources.push(CellSource::Boxed(Box::new(items.into_iter())));
            }
            MergeIter::new(sources, reverse)
        };
        let run = |pipelined: bool| {
            let mut m = build();
            let mut out = Vec::new();
            let mut n = 0;
            loop {
                if pipelined && n == pipeline_at { m.pipeline(); }
                if let Some((at, row)) = seek {
                    if n == at { m.seek(&StoreKey::first_on_row(Bytes::copy_from_slice(&[row]))); }
                }
                let peeked = m.peek().map(|c| c.key.clone());
                match m.next() {
                    Some(Ok(c)) => {
                        assert_eq!(peeked.as_ref(), Some(&c.key));
                        out.push(Ok(c.key));
                    }
                    Some(Err(e)) => {
                        assert!(!m.has_error());
                        out.push(Err(e.to_string()));
                    }
                    None => break,
                }
                n += 1;
            }
            assert!(m.next().is_none());
            out
        };
        prop_assert_eq!(run(true), run(false));
    }

    /// Single-cell rows, many sources, duplicates across sources.
    #[test]
    fn merge_equals_sorted_union(
        lists in prop::collection::vec(prop::collection::vec((0u8..20, 0u8..1, 0u64..5), 0..30), 0..5),
        reverse in any::<bool>(),
    ) {
        check_merge(&lists, reverse)?;
    }

    /// Rows of many cells, shared or not between sources: the row-run shortcut never
    /// yields a cell out of order or twice.
    #[test]
    fn merge_of_row_runs_equals_sorted_union(
        lists in prop::collection::vec(prop::collection::vec((0u8..6, 0u8..4, 0u64..3), 0..40), 1..5),
        reverse in any::<bool>(),
    ) {
        check_merge(&lists, reverse)?;
    }
}
