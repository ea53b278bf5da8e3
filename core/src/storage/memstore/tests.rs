//! Tests of the MemStore: its flags, chunked scans both ways, rows turning wide, the arena's
//! large inserts, and property tests against a sorted map of `StoreKey`s.

use super::*;
use crate::cell::CellType;
use crate::error::Result;
use proptest::prelude::*;

fn cell(row: &str, q: &str, ts: u64, seq: u64) -> StoreCell {
    StoreCell {
        key: StoreKey {
            row: Bytes::copy_from_slice(row.as_bytes()),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            ts,
            kind: CellType::Put,
            seq,
        },
        value: Bytes::from_static(b"v"),
    }
}

#[test]
fn may_drop_cells_only_after_a_delete_or_a_second_cell_in_a_column() {
    // Narrow rows, a wide row (past NARROW_MAX cells), and each way a column can stack.
    let puts_only = MemStore::new();
    for i in 0..40u64 {
        puts_only.insert(cell("wide", &format!("q{i:02}"), 5, 1));
        puts_only.insert(cell(&format!("r{i}"), "a", 5, 1));
        puts_only.insert(cell(&format!("r{i}"), "b", 5, 1));
    }
    // The same key again (a replayed duplicate) overwrites: still nothing to drop.
    puts_only.insert(cell("r1", "a", 5, 1));
    puts_only.insert(cell("wide", "q07", 5, 1));
    assert!(!puts_only.may_drop_cells());

    let older_version = MemStore::new();
    older_version.insert(cell("r", "a", 5, 1));
    older_version.insert(cell("r", "b", 5, 1));
    older_version.insert(cell("r", "a", 4, 2));
    assert!(older_version.may_drop_cells());

    let same_version_later = MemStore::new();
    same_version_later.insert(cell("r", "a", 5, 1));
    same_version_later.insert(cell("r", "a", 5, 2));
    assert!(same_version_later.may_drop_cells());

    let wide_stacked = MemStore::new();
    for i in 0..40u64 {
        wide_stacked.insert(cell("wide", &format!("q{i:02}"), 5, 1));
    }
    assert!(!wide_stacked.may_drop_cells());
    wide_stacked.insert(cell("wide", "q39", 6, 2));
    assert!(wide_stacked.may_drop_cells());

    let delete = MemStore::new();
    delete.insert(cell("r", "a", 5, 1));
    let mut marker = cell("s", "a", 5, 2);
    marker.key.kind = CellType::DeleteColumn;
    marker.value = Bytes::new();
    delete.insert(marker);
    assert!(delete.may_drop_cells());
}

#[test]
fn scans_both_ways_across_chunks() {
    let m = Arc::new(MemStore::new());
    for i in 0..1000u64 {
        m.insert(cell(&format!("r{i:04}"), "q", 1, i));
    }
    let fwd: Vec<_> = m
        .scan_from(Some(StoreKey::first_on_row(Bytes::from_static(b"r0500"))))
        .map(|c| c.unwrap().key.row)
        .collect();
    assert_eq!(fwd.len(), 500);
    assert_eq!(fwd[0], Bytes::from_static(b"r0500"));
    let rev: Vec<_> = m
        .scan_rev_from(Some(StoreKey::first_on_row(Bytes::from_static(b"r0500"))))
        .map(|c| c.unwrap().key.row)
        .collect();
    assert_eq!(rev.len(), 500);
    assert_eq!(rev[0], Bytes::from_static(b"r0499"));
    assert_eq!(rev[499], Bytes::from_static(b"r0000"));
    assert_eq!(m.len(), 1000);
    assert_eq!(m.max_seq(), 999);
}

#[test]
fn a_row_rewritten_past_its_buffer_limit_turns_wide_and_keeps_the_latest_value() {
    // Each insert copies into a new span; a narrow row refers to at most 255 of them.
    let m = Arc::new(MemStore::new());
    for i in 0..300u64 {
        let mut c = cell("r", "q", 5, 1); // the same key each time: a replayed duplicate
        c.value = Bytes::from(format!("v{i}"));
        m.insert(c);
        let mut other = cell("r", "p", 5, 1);
        other.value = Bytes::from(format!("w{i}"));
        m.insert(other);
    }
    assert_eq!(m.len(), 2);
    let cells: Vec<_> = m.iter().collect();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0].key.qualifier, Bytes::from_static(b"p"));
    assert_eq!(cells[0].value, Bytes::from_static(b"w299"));
    assert_eq!(cells[1].value, Bytes::from_static(b"v299"));
    assert!(!m.may_drop_cells());
}

#[test]
fn large_inserts_bypass_the_arena_and_read_back_whole() {
    let m = Arc::new(MemStore::new());
    let big = Bytes::from(vec![7u8; ARENA_MAX_ALLOC + 10]);
    let mut cells = Vec::new();
    for q in ["a", "b", "c"] {
        let mut c = cell("r", q, 1, 1);
        c.value = big.clone();
        cells.push(c);
    }
    m.insert_row(&Bytes::from_static(b"r"), &cells);
    m.insert(cell("s", "a", 1, 2));
    let got: Vec<_> = m.iter().collect();
    assert_eq!(got.len(), 4);
    for (g, c) in got.iter().zip(&cells) {
        assert_eq!(g, c);
    }
    assert_eq!(got[3].key.row, Bytes::from_static(b"s"));
}

fn arb_cell() -> impl Strategy<Value = StoreCell> {
    (
        prop::sample::select(vec![
            "",
            "a",
            "a\0",
            "ab",
            "b",
            "c",
            "0123456789abcdef",
            "0123456789abcdef\0",
            "0123456789abcdefg",
            "0123456789abcdeg",
        ]),
        prop::sample::select(vec!["", "q", "qq", "r"]),
        0u64..4,
        prop::sample::select(vec![
            CellType::Put,
            CellType::Delete,
            CellType::DeleteColumn,
            CellType::DeleteFamily,
            CellType::DeleteFamilyVersion,
        ]),
        0u64..6,
    )
        .prop_map(|(r, q, ts, kind, seq)| StoreCell {
            key: StoreKey {
                row: Bytes::copy_from_slice(r.as_bytes()),
                qualifier: Bytes::copy_from_slice(q.as_bytes()),
                ts,
                kind,
                seq,
            },
            value: Bytes::copy_from_slice(format!("{r}{q}{ts}{seq}").as_bytes()),
        })
}

proptest! {
    /// Cells inserted a row at a time (as a put writes them: one span per insert, rows
    /// that grow past the narrow limit across inserts) read back as one sorted map.
    #[test]
    fn row_inserts_match_a_sorted_map(
        batches in prop::collection::vec(
            (0usize..4, prop::collection::vec((0usize..40, 0u64..3, 0usize..120), 1..24)),
            1..30,
        ),
    ) {
        let m = Arc::new(MemStore::new());
        let mut model = std::collections::BTreeMap::new();
        for (seq, (r, cols)) in batches.iter().enumerate() {
            let row = Bytes::from(format!("row{r}"));
            let mut cells: Vec<StoreCell> = cols
                .iter()
                .map(|(q, ts, vlen)| StoreCell {
                    key: StoreKey {
                        row: row.clone(),
                        qualifier: Bytes::from(format!("q{q:02}")),
                        ts: *ts,
                        kind: if *vlen == 0 { CellType::DeleteColumn } else { CellType::Put },
                        seq: seq as u64,
                    },
                    value: Bytes::from(vec![b'a' + (*q % 26) as u8; *vlen]),
                })
                .collect();
            cells.sort_by(|a, b| a.key.cmp(&b.key));
            cells.dedup_by(|a, b| a.key == b.key);
            m.insert_row(&row, &cells);
            for c in cells {
                model.insert(c.key, c.value);
            }
        }
        prop_assert_eq!(m.len(), model.len());
        let all: Vec<_> = m.iter().map(|c| (c.key, c.value)).collect();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(all, want);
        let rev: Vec<_> = m.scan_rev_from(None).map(|c| c.map(|c| c.key)).collect::<Result<_>>().unwrap_or_default();
        let want_rev: Vec<_> = model.keys().rev().cloned().collect();
        prop_assert_eq!(rev, want_rev);
    }

    /// Cells inserted a row at a time in any order, with empty qualifiers and empty values
    /// (cells that take no bytes of the insert's span, so several share an offset), read
    /// back as one sorted map in which the last write of a key counts.
    #[test]
    fn unsorted_row_inserts_with_empty_cells_match_a_sorted_map(
        batches in prop::collection::vec(
            (0usize..3, prop::collection::vec((0usize..6, 0u64..3, 0usize..3), 1..40)),
            1..20,
        ),
    ) {
        let m = Arc::new(MemStore::new());
        let mut model = std::collections::BTreeMap::new();
        for (seq, (r, cols)) in batches.iter().enumerate() {
            let row = Bytes::from(format!("row{r}"));
            let cells: Vec<StoreCell> = cols
                .iter()
                .map(|(q, ts, vlen)| StoreCell {
                    key: StoreKey {
                        row: row.clone(),
                        qualifier: if *q == 0 { Bytes::new() } else { Bytes::from(format!("q{q}")) },
                        ts: *ts,
                        kind: CellType::Put,
                        seq: seq as u64,
                    },
                    value: Bytes::from(vec![b'a' + *q as u8; *vlen]),
                })
                .collect();
            m.insert_row(&row, &cells);
            for c in cells {
                model.insert(c.key, c.value);
            }
        }
        prop_assert_eq!(m.len(), model.len());
        let all: Vec<_> = m.iter().map(|c| (c.key, c.value)).collect();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(all, want);
    }

    /// Row keys with their 16-byte heads order exactly as their bytes, around the
    /// 16th byte, with zero bytes and with one key a prefix of the other.
    #[test]
    fn row_keys_order_as_bytes(
        a in prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 255]), 0..24),
        keep in 0usize..24,
        tail in prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 255]), 0..8),
    ) {
        // b shares a prefix of any length with a, then goes its own way.
        let mut b: Vec<u8> = a.iter().copied().take(keep).collect();
        b.extend(tail);
        let (ka, kb) = (RowKey::new(Bytes::from(a.clone())), RowKey::new(Bytes::from(b.clone())));
        prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
        prop_assert_eq!(ka == kb, a == b);
    }

    /// The two-level MemStore scans exactly like one sorted map of StoreKeys, from any
    /// start key, forward and reverse, across chunk boundaries; a row scanner yields
    /// exactly the start row's cells from the start key on.
    #[test]
    fn matches_a_sorted_map(
        cells in prop::collection::vec(arb_cell(), 0..300),
        start in prop::option::of(arb_cell()),
    ) {
        let m = Arc::new(MemStore::new());
        let mut model = std::collections::BTreeMap::new();
        for c in &cells {
            m.insert(c.clone());
            model.insert(c.key.clone(), c.value.clone());
        }
        prop_assert_eq!(m.len(), model.len());
        let all: Vec<_> = m.iter().map(|c| (c.key, c.value)).collect();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(all, want);
        let start_key = start.map(|c| c.key);
        let fwd: Vec<_> = m.scan_from(start_key.clone()).map(|c| c.unwrap().key).collect();
        let want_fwd: Vec<_> = match &start_key {
            Some(k) => model.range(k.clone()..).map(|(k, _)| k.clone()).collect(),
            None => model.keys().cloned().collect(),
        };
        prop_assert_eq!(fwd, want_fwd);
        let rev: Vec<_> = m.scan_rev_from(start_key.clone()).map(|c| c.unwrap().key).collect();
        let want_rev: Vec<_> = match &start_key {
            Some(k) => model.range(..=k.clone()).rev().map(|(k, _)| k.clone()).collect(),
            None => model.keys().rev().cloned().collect(),
        };
        prop_assert_eq!(rev, want_rev);
        if let Some(k) = &start_key {
            let row: Vec<_> = m.scan_row_from(k.clone()).map(|c| c.unwrap().key).collect();
            let want_row: Vec<_> = model
                .range(k.clone()..)
                .map(|(k, _)| k.clone())
                .take_while(|c| c.row == k.row)
                .collect();
            prop_assert_eq!(row, want_row);
        }
    }
}

proptest! {
    /// Interleaved steps and seeks, forward and reverse, read exactly what a sorted map
    /// gives: after a seek to a key beyond what was read (as the merge seeks its sources),
    /// the next cell is the first at or after it (at or before it when reverse), whether
    /// the key lies inside the chunk already copied out, at its edge or past it; a row
    /// scanner (a point read) seeking inside its row reads the row's cells only.
    #[test]
    fn seeks_between_steps_match_a_sorted_map(
        cells in prop::collection::vec(arb_cell(), 1..300),
        moves in prop::collection::vec((any::<bool>(), arb_cell(), 0usize..40), 1..20),
        reverse in any::<bool>(),
        point in prop::option::of(arb_cell()),
    ) {
        use std::ops::Bound;
        let m = Arc::new(MemStore::new());
        let mut model = std::collections::BTreeSet::new();
        for c in &cells {
            m.insert(c.clone());
            model.insert(c.key.clone());
        }
        // A point read: a row scanner from a key on, forward, over that row's cells only.
        let reverse = reverse && point.is_none();
        let mut scan = match &point {
            Some(p) => {
                model.retain(|k| k.row == p.key.row && k >= &p.key);
                m.scan_row_from(p.key.clone())
            }
            None if reverse => m.scan_rev_from(None),
            None => m.scan_from(None),
        };
        let mut moves = moves;
        if let Some(p) = &point {
            // Seeks stay inside the row, as a point read's do.
            for (_, target, _) in &mut moves {
                target.key.row = p.key.row.clone();
            }
        }
        // Where the model stands: the next cell is the first past this bound.
        let mut at: Bound<StoreKey> = match &point {
            Some(p) => Bound::Included(p.key.clone()),
            None => Bound::Unbounded,
        };
        let next_of = |at: &Bound<StoreKey>| -> Option<StoreKey> {
            if reverse {
                model.range((Bound::Unbounded, at.clone())).next_back().cloned()
            } else {
                model.range((at.clone(), Bound::Unbounded)).next().cloned()
            }
        };
        for (seek, target, steps) in moves {
            let beyond = match &at {
                Bound::Excluded(last) => (!reverse && target.key > *last) || (reverse && target.key < *last),
                Bound::Included(from) => (!reverse && target.key >= *from) || (reverse && target.key <= *from),
                Bound::Unbounded => true,
            };
            if seek && beyond {
                scan.seek(&target.key);
                at = Bound::Included(target.key);
            }
            for _ in 0..steps {
                let want = next_of(&at);
                let got = scan.next().map(|c| c.unwrap().key);
                prop_assert_eq!(&got, &want);
                match got {
                    Some(k) => at = Bound::Excluded(k),
                    None => break,
                }
            }
        }
    }
}
