//! The compaction iterator against the matcher: whatever a compaction drops, every reader
//! the module doc promises to serve sees exactly what it saw before.

use super::*;
use crate::cell::{CellType, StoreKey};
use crate::schema::KeepDeletedCells;
use crate::storage::matcher::{match_row, ReadSpec, Version};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn cell(q: &str, ts: u64, kind: CellType, seq: u64, v: &str) -> StoreCell {
    StoreCell {
        key: StoreKey {
            row: Bytes::from_static(b"r"),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            ts,
            kind,
            seq,
        },
        value: Bytes::copy_from_slice(v.as_bytes()),
    }
}

fn rules(kind: CompactionKind, max: u32, min: u32, ttl: Option<u64>, kdc: bool) -> CompactionRules {
    CompactionRules {
        kind,
        family: FamilyRules {
            max_versions: max,
            min_versions: min,
            ttl_ms: ttl,
            keep_deleted_cells: kdc.into(),
        },
        smallest_read_point: u64::MAX,
        now_ms: 100,
    }
}

fn sorted(mut cells: Vec<StoreCell>) -> Vec<StoreCell> {
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    cells
}

fn kinds(cells: &[StoreCell]) -> Vec<(u64, CellType)> {
    cells.iter().map(|c| (c.key.ts, c.key.kind)).collect()
}

#[test]
fn minor_drops_masked_put_and_keeps_marker() {
    // As HBase's flush and minor compactions (`MinorCompactionScanQueryMatcher`): the put
    // is gone, also from raw reads; the marker stays for the puts outside the input.
    let input = sorted(vec![
        cell("q", 5, CellType::DeleteColumn, 2, ""),
        cell("q", 3, CellType::Put, 1, "x"),
        cell("q", 7, CellType::Put, 3, "y"),
    ]);
    let r = rules(CompactionKind::Minor, 1, 0, None, false);
    let got = filter_row(input.clone(), &r);
    assert_eq!(
        kinds(&got),
        vec![(7, CellType::Put), (5, CellType::DeleteColumn)]
    );
    // Keep-deleted-cells keeps both.
    let r = rules(CompactionKind::Minor, 1, 0, None, true);
    assert_eq!(filter_row(input, &r).len(), 3);
}

#[test]
fn major_drops_markers_excess_and_expired_versions() {
    let input = sorted(vec![
        cell("q", 9, CellType::Delete, 5, ""),
        cell("q", 9, CellType::Put, 4, "deleted"),
        cell("q", 8, CellType::Put, 3, "a"),
        cell("q", 7, CellType::Put, 2, "b"),
        cell("q", 6, CellType::Put, 1, "excess"),
    ]);
    let r = rules(CompactionKind::Major, 2, 0, None, false);
    assert_eq!(
        kinds(&filter_row(input.clone(), &r)),
        vec![(8, CellType::Put), (7, CellType::Put)]
    );
    // TTL 93 ms at now 100: ts < 7 expired; min versions 1 keeps the newest.
    let r = rules(CompactionKind::Major, 3, 1, Some(93), false);
    assert_eq!(
        kinds(&filter_row(input, &r)),
        vec![(8, CellType::Put), (7, CellType::Put)]
    );
}

#[test]
fn rows_with_cells_above_the_smallest_read_point_stay_whole() {
    let input = sorted(vec![
        cell("q", 5, CellType::DeleteColumn, 9, ""),
        cell("q", 3, CellType::Put, 1, "x"),
    ]);
    let mut r = rules(CompactionKind::Major, 1, 0, None, false);
    r.smallest_read_point = 8;
    assert_eq!(filter_row(input.clone(), &r).len(), 2);
    r.smallest_read_point = 9;
    assert!(filter_row(input, &r).is_empty());
}

fn arb_kind() -> impl Strategy<Value = CellType> {
    prop_oneof![
        6 => Just(CellType::Put),
        2 => Just(CellType::ExpiringPut),
        1 => Just(CellType::Delete),
        1 => Just(CellType::DeleteColumn),
        1 => Just(CellType::DeleteFamily),
        1 => Just(CellType::DeleteFamilyVersion),
    ]
}

/// One row's cells: (qualifier, ts, kind, seq, outside-the-input).
fn arb_cells() -> impl Strategy<Value = Vec<(usize, u64, CellType, u64, bool)>> {
    prop::collection::vec(
        (0usize..3, 0u64..8, arb_kind(), 1u64..25, any::<bool>()),
        0..24,
    )
}

const QUALS: [&str; 3] = ["", "a", "b"];

fn build(raw: &[(usize, u64, CellType, u64, bool)]) -> (Vec<StoreCell>, Vec<StoreCell>) {
    // Identical keys collapse (the merge yields one), as do family markers' qualifiers.
    let mut by_key: BTreeMap<StoreKey, (StoreCell, bool)> = BTreeMap::new();
    for (i, (q, ts, kind, seq, outside)) in raw.iter().enumerate() {
        let q = if kind.is_family_delete() {
            ""
        } else {
            QUALS[*q]
        };
        let mut c = cell(q, *ts, *kind, *seq, &format!("v{i}"));
        if *kind == CellType::ExpiringPut {
            // Cell TTLs that run out before, around and after the readers' clocks (100..102).
            let ttl = [5u64, 93, 95, 200][i % 4];
            c.value = crate::cell::expiring_value(ttl, &c.value);
        }
        by_key.entry(c.key.clone()).or_insert((c, *outside));
    }
    let mut input = Vec::new();
    let mut outside = Vec::new();
    for (_, (c, o)) in by_key {
        if o {
            outside.push(c);
        } else {
            input.push(c);
        }
    }
    (input, outside)
}

/// Whether `marker` masks `put` by rule 2 of the matcher (for a reader that applies it).
fn masks(marker: &StoreKey, put: &StoreKey) -> bool {
    match marker.kind {
        CellType::DeleteFamily => put.ts <= marker.ts,
        CellType::DeleteFamilyVersion => put.ts == marker.ts,
        CellType::DeleteColumn => put.qualifier == marker.qualifier && put.ts <= marker.ts,
        CellType::Delete => put.qualifier == marker.qualifier && put.ts == marker.ts,
        CellType::Put | CellType::ExpiringPut => false,
    }
}

fn read(cells: &[StoreCell], f: &FamilyRules, spec: &ReadSpec) -> Vec<Version> {
    match_row(sorted(cells.to_vec()), f, spec, None)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Readers at or above the smallest read point, now or later, with any time range and
    /// version count, see the same versions before and after the compaction. A minor
    /// compaction's input is any part of the row's cells; a major one's is all of them.
    #[test]
    fn compaction_never_changes_what_readers_see(
        raw in arb_cells(),
        major in any::<bool>(),
        max in 1u32..4,
        min_frac in 0u32..4,
        ttl in prop_oneof![Just(None), Just(Some(95u64)), Just(Some(97u64))],
        kdc in prop_oneof![
            Just(KeepDeletedCells::False),
            Just(KeepDeletedCells::True),
            Just(KeepDeletedCells::Ttl),
        ],
        srp in 0u64..26,
        readers in prop::collection::vec((0u64..26, 0u64..9, 1u64..10, 1u32..4, 0u64..3), 1..8),
    ) {
        let (mut input, mut outside) = build(&raw);
        if major {
            input.append(&mut outside);
            input = sorted(input);
        }
        let r = CompactionRules {
            kind: if major { CompactionKind::Major } else { CompactionKind::Minor },
            family: FamilyRules {
                max_versions: max,
                min_versions: min_frac.min(max),
                ttl_ms: ttl,
                keep_deleted_cells: kdc,
            },
            smallest_read_point: srp,
            now_ms: 100,
        };
        let kept = filter_row(input.clone(), &r);
        // A sorted subsequence of the input.
        let mut it = input.iter();
        for c in &kept {
            prop_assert!(it.any(|i| i.key == c.key));
        }
        let before: Vec<StoreCell> = input.iter().chain(&outside).cloned().collect();
        let after: Vec<StoreCell> = kept.iter().chain(&outside).cloned().collect();
        // `before` less what the compaction dropped for any reason but a marker of its
        // input that does not keep deleted cells masking a put.
        let masked_drop = |c: &StoreCell| {
            c.key.kind.is_put()
                && input.iter().any(|m| {
                    let expire_before = ttl.map_or(0, |t| r.now_ms.saturating_sub(t));
                    m.key.kind.is_delete()
                        && !kdc.keeps(m.key.ts, expire_before)
                        && masks(&m.key, &c.key)
                })
        };
        let without_others: Vec<StoreCell> = before
            .iter()
            .filter(|c| kept.iter().any(|k| k.key == c.key) || outside.contains(c) || masked_drop(c))
            .cloned()
            .collect();
        let max_seq = before.iter().map(|c| c.key.seq).max().unwrap_or(0);
        for (rp, min_ts, width, versions, later) in readers {
            let spec = ReadSpec {
                read_point: rp.clamp(srp, max_seq.max(srp)),
                min_ts,
                max_ts: if width == 9 { u64::MAX } else { min_ts + width },
                max_versions: versions,
                now_ms: 100 + later,
                raw: false,
            };
            prop_assert_eq!(
                read(&before, &r.family, &spec),
                read(&after, &r.family, &spec),
                "spec {:?}", spec
            );
            // A raw read shows what the store holds, masked puts too (as HBase's): a minor
            // compaction changes its answer only by the masked puts it drops. Without them
            // everything else it dropped (older writes of a version, puts past the TTL
            // without min versions) was never shown.
            if !major {
                let raw_spec = ReadSpec { raw: true, ..spec };
                prop_assert_eq!(
                    read(&before, &r.family, &raw_spec),
                    read(&without_others, &r.family, &raw_spec),
                    "raw spec {:?}", raw_spec
                );
            }
        }
    }

    /// The iterator filters row by row and counts what it drops.
    #[test]
    fn iterator_filters_each_row(raw in arb_cells(), raw2 in arb_cells(), major in any::<bool>()) {
        let (a, _) = build(&raw);
        let (b, _) = build(&raw2);
        let b: Vec<StoreCell> = b
            .into_iter()
            .map(|mut c| {
                c.key.row = Bytes::from_static(b"s");
                c
            })
            .collect();
        let kind = if major { CompactionKind::Major } else { CompactionKind::Minor };
        let r = rules(kind, 2, 0, None, false);
        let want: Vec<StoreCell> = filter_row(a.clone(), &r)
            .into_iter()
            .chain(filter_row(b.clone(), &r))
            .collect();
        let all: Vec<StoreCell> = a.into_iter().chain(b).collect();
        let n = all.len() as u64;
        let mut iter = CompactionIter::new(all.into_iter().map(Ok), r);
        let got: Vec<StoreCell> = iter.by_ref().map(|c| c.unwrap()).collect();
        prop_assert_eq!(iter.cells_in, n);
        prop_assert_eq!(iter.cells_dropped, n - got.len() as u64);
        prop_assert_eq!(got, want);
    }
}
