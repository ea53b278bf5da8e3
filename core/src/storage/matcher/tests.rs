//! Tests of the matcher: unit cases and property tests against a simple model of the
//! read rules and of the raw rules (R1-R6).

use super::*;
use crate::cell::StoreKey;

fn c(q: &str, ts: u64, kind: CellType, seq: u64, v: &str) -> StoreCell {
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

fn run(mut cells: Vec<StoreCell>, max_versions: u32, spec_versions: u32) -> Vec<(String, u64)> {
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    let rules = FamilyRules {
        max_versions,
        min_versions: 0,
        ttl_ms: None,
        keep_deleted_cells: KeepDeletedCells::False,
    };
    let spec = ReadSpec {
        read_point: 100,
        min_ts: 0,
        max_ts: u64::MAX,
        max_versions: spec_versions,
        now_ms: 1000,
        raw: false,
    };
    match_row(cells, &rules, &spec, None)
        .into_iter()
        .map(|v| (String::from_utf8_lossy(&v.qualifier).into_owned(), v.ts))
        .collect()
}

#[test]
fn delete_masks_later_put_with_older_ts() {
    let got = run(
        vec![
            c("a", 5, CellType::DeleteColumn, 1, ""),
            c("a", 3, CellType::Put, 2, "x"),
            c("a", 7, CellType::Put, 3, "y"),
        ],
        3,
        3,
    );
    assert_eq!(got, vec![("a".into(), 7)]);
}

#[test]
fn later_write_at_same_ts_wins_and_versions_cap() {
    let cells = vec![
        c("a", 5, CellType::Put, 1, "old"),
        c("a", 5, CellType::Put, 2, "new"),
        c("a", 4, CellType::Put, 3, "x"),
        c("a", 3, CellType::Put, 4, "y"),
    ];
    let mut sorted = cells.clone();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let rules = FamilyRules {
        max_versions: 2,
        min_versions: 0,
        ttl_ms: None,
        keep_deleted_cells: KeepDeletedCells::False,
    };
    let spec = ReadSpec {
        read_point: 100,
        min_ts: 0,
        max_ts: u64::MAX,
        max_versions: 10,
        now_ms: 0,
        raw: false,
    };
    let got = match_row(sorted, &rules, &spec, None);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].value, Bytes::from_static(b"new"));
    assert_eq!(got[1].ts, 4);
}

#[test]
fn family_markers_and_invisible_cells() {
    let got = run(
        vec![
            c("", 4, CellType::DeleteFamily, 1, ""),
            c("", 9, CellType::DeleteFamilyVersion, 1, ""),
            c("a", 4, CellType::Put, 2, "x"),
            c("a", 6, CellType::Put, 2, "x"),
            c("b", 9, CellType::Put, 2, "x"),
            c("b", 8, CellType::Put, 200, "invisible"),
            c("c", 2, CellType::Delete, 1, ""),
            c("c", 2, CellType::Put, 1, "x"),
            c("c", 1, CellType::Put, 1, "x"),
        ],
        5,
        5,
    );
    assert_eq!(got, vec![("a".into(), 6)]);
}

pub(super) fn raw_spec(max_versions: u32) -> ReadSpec {
    ReadSpec {
        read_point: 100,
        min_ts: 0,
        max_ts: u64::MAX,
        max_versions,
        now_ms: 1000,
        raw: true,
    }
}

pub(super) fn plain_rules(max_versions: u32, kdc: bool) -> FamilyRules {
    FamilyRules {
        max_versions,
        min_versions: 0,
        ttl_ms: None,
        keep_deleted_cells: kdc.into(),
    }
}

fn raw_read(
    mut cells: Vec<StoreCell>,
    rules: &FamilyRules,
    spec: &ReadSpec,
) -> Vec<(String, u64, CellType)> {
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    match_row(cells, rules, spec, None)
        .into_iter()
        .map(|v| {
            (
                String::from_utf8_lossy(&v.qualifier).into_owned(),
                v.ts,
                v.kind,
            )
        })
        .collect()
}

/// The reference guide's "Keeping Deleted Cells" example before its flush: puts at 10,
/// 12 and 14 and a column delete at 11 all show, in a family that keeps deleted cells or
/// not; the marker does not count as a version, but the first put beyond the reader's
/// max versions ends the column, older markers included.
#[test]
fn raw_reads_show_masked_puts_and_count_only_puts() {
    let cells = vec![
        c("c1", 10, CellType::Put, 1, "v"),
        c("c1", 12, CellType::Put, 2, "v"),
        c("c1", 14, CellType::Put, 3, "v"),
        c("c1", 11, CellType::DeleteColumn, 4, ""),
    ];
    let col = |ts, kind| ("c1".to_string(), ts, kind);
    for kdc in [false, true] {
        // The family keeps one version: a raw read is bounded by the reader's count only.
        let rules = plain_rules(1, kdc);
        assert_eq!(
            raw_read(cells.clone(), &rules, &raw_spec(1000)),
            vec![
                col(14, CellType::Put),
                col(12, CellType::Put),
                col(11, CellType::DeleteColumn),
                col(10, CellType::Put),
            ]
        );
        assert_eq!(
            raw_read(cells.clone(), &rules, &raw_spec(2)),
            vec![
                col(14, CellType::Put),
                col(12, CellType::Put),
                col(11, CellType::DeleteColumn),
            ]
        );
        assert_eq!(
            raw_read(cells.clone(), &rules, &raw_spec(1)),
            vec![col(14, CellType::Put)]
        );
    }
}

/// Family markers show in the empty qualifier's column, before it and every other
/// column's cells; the puts they mask show in their own columns.
#[test]
fn raw_reads_show_family_markers_and_what_they_mask() {
    let cells = vec![
        c("", 150, CellType::DeleteFamily, 3, ""),
        c("", 100, CellType::DeleteFamilyVersion, 4, ""),
        c("", 100, CellType::DeleteFamilyVersion, 5, ""),
        c("", 120, CellType::Put, 1, "empty qualifier"),
        c("a", 100, CellType::Put, 1, "x"),
        c("a", 200, CellType::Put, 2, "y"),
        c("b", 100, CellType::Delete, 6, ""),
        c("b", 100, CellType::Put, 1, "z"),
    ];
    let got = raw_read(cells, &plain_rules(3, false), &raw_spec(10));
    let cell = |q: &str, ts, kind| (q.to_string(), ts, kind);
    assert_eq!(
        got,
        vec![
            cell("", 150, CellType::DeleteFamily),
            cell("", 120, CellType::Put),
            cell("", 100, CellType::DeleteFamilyVersion),
            cell("a", 200, CellType::Put),
            cell("a", 100, CellType::Put),
            cell("b", 100, CellType::Delete),
            cell("b", 100, CellType::Put),
        ]
    );
}

/// TTL and cell TTL in a raw read: without min versions every cell past the TTL is
/// hidden, markers too; with min versions such a cell shows while the puts counted do
/// not exceed them. A put whose own TTL ran out never shows, nor counts.
#[test]
fn raw_reads_hide_expired_cells() {
    let mut expiring = c("q", 990, CellType::ExpiringPut, 5, "");
    expiring.value = crate::cell::expiring_value(5, b"gone");
    let cells = vec![
        expiring,
        c("q", 980, CellType::Put, 1, "live"),
        c("q", 50, CellType::DeleteColumn, 2, ""),
        c("q", 40, CellType::Put, 3, "old"),
        c("q", 30, CellType::Put, 4, "older"),
    ];
    let mut rules = plain_rules(5, false);
    rules.ttl_ms = Some(100); // expired below 900 at now 1000
    let q = |ts, kind| ("q".to_string(), ts, kind);
    assert_eq!(
        raw_read(cells.clone(), &rules, &raw_spec(10)),
        vec![q(980, CellType::Put)]
    );
    rules.min_versions = 2;
    assert_eq!(
        raw_read(cells.clone(), &rules, &raw_spec(10)),
        vec![
            q(980, CellType::Put),
            q(50, CellType::DeleteColumn),
            q(40, CellType::Put),
        ]
    );
    // A marker does not count: with one min version it still shows after the one put.
    rules.min_versions = 1;
    assert_eq!(
        raw_read(cells, &rules, &raw_spec(10)),
        vec![q(980, CellType::Put), q(50, CellType::DeleteColumn)]
    );
}

/// A raw read as the module doc's rules R1 to R6 state it, computed set-wise: the
/// newest visible write per put version and one copy per marker, the cells rule R4
/// hides removed, then each column's cells newest first until the versions run out.
fn raw_model(
    cells: &[StoreCell],
    rules: &FamilyRules,
    spec: &ReadSpec,
    columns: Option<&BTreeSet<Bytes>>,
) -> Vec<StoreCell> {
    use std::collections::BTreeMap;
    // (qualifier, ts, kind rank, kind) -> the newest visible write.
    let mut newest: BTreeMap<(Bytes, u64, u8, bool), StoreCell> = BTreeMap::new();
    for cell in cells.iter().filter(|c| c.key.seq <= spec.read_point) {
        let k = &cell.key;
        let slot = (k.qualifier.clone(), k.ts, k.kind.rank(), k.kind.is_put());
        if newest.get(&slot).is_none_or(|o| o.key.seq < k.seq) {
            newest.insert(slot, cell.clone());
        }
    }
    let expire_before = rules
        .ttl_ms
        .map_or(0, |ttl| spec.now_ms.saturating_sub(ttl));
    let mut by_column: BTreeMap<Bytes, Vec<StoreCell>> = BTreeMap::new();
    for ((q, ts, _, _), cell) in newest {
        let hidden = cell.cell_expired(spec.now_ms)
            || (ts < expire_before && rules.min_versions == 0)
            || ts < spec.min_ts
            || ts >= spec.max_ts
            || columns.is_some_and(|cs| !cs.contains(&q));
        if !hidden {
            by_column.entry(q).or_default().push(cell);
        }
    }
    let mut out = Vec::new();
    for (_, mut column) in by_column {
        column.sort_by(|a, b| a.key.cmp(&b.key));
        let mut puts = 0u32;
        for cell in column {
            puts += u32::from(cell.key.kind.is_put());
            let expired = cell.key.ts < expire_before;
            if puts > spec.max_versions || (expired && puts > rules.min_versions) {
                break;
            }
            out.push(cell.into_user());
        }
    }
    out
}

/// Qualifiers of [`build_row`]'s cells: the family markers' empty one, and two more.
const ROW_QUALS: [&str; 3] = ["", "a", "b"];

/// A row from generated `(qualifier, ts, kind, seq, ttl)` tuples: every kind of cell, family
/// markers on the empty qualifier, expiring puts with TTLs that ran out, run out at the clock
/// (10) or never do; identical keys collapse, as the merge yields one of them. Sorted.
pub(super) fn build_row(raw: &[(usize, u64, usize, u64, usize)]) -> Vec<StoreCell> {
    const KINDS: [CellType; 6] = [
        CellType::Put,
        CellType::ExpiringPut,
        CellType::Delete,
        CellType::DeleteColumn,
        CellType::DeleteFamily,
        CellType::DeleteFamilyVersion,
    ];
    let mut cells: Vec<StoreCell> = Vec::new();
    for (i, (q, ts, kind, seq, ttl)) in raw.iter().enumerate() {
        let kind = KINDS[*kind];
        let q = if kind.is_family_delete() {
            ""
        } else {
            ROW_QUALS[*q]
        };
        let mut cell = c(q, *ts, kind, *seq, &format!("v{i}"));
        if kind == CellType::ExpiringPut {
            // Cell TTLs that ran out, run out at the clock, and never do.
            cell.value = crate::cell::expiring_value([1u64, 5, 8, 100][*ttl], &cell.value);
        }
        // Identical keys collapse, as the merge yields one of them (a put and an
        // expiring put rank alike).
        let same = |o: &StoreCell| {
            (&o.key.qualifier, o.key.ts, o.key.kind.rank(), o.key.seq)
                == (
                    &cell.key.qualifier,
                    cell.key.ts,
                    cell.key.kind.rank(),
                    cell.key.seq,
                )
        };
        if !cells.iter().any(same) {
            cells.push(cell);
        }
    }
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    cells
}

/// A generated read: a row ([`build_row`]), the family's rules (versions, TTL, keep deleted
/// cells), the reader's spec (read point, time range, versions; raw or not; the clock at 10)
/// and a column selection.
pub(super) fn arb_read(
    raw: bool,
) -> impl proptest::strategy::Strategy<
    Value = (
        Vec<StoreCell>,
        FamilyRules,
        ReadSpec,
        Option<BTreeSet<Bytes>>,
    ),
> {
    use proptest::strategy::Strategy;
    (
        proptest::collection::vec((0usize..3, 0u64..10, 0usize..6, 1u64..25, 0usize..4), 0..30),
        (
            1u32..4,
            0u32..3,
            proptest::option::of(proptest::sample::select(vec![2u64, 5, 8])),
            0usize..3,
        ),
        (0u64..26, 0u64..6, 1u64..12, 0u32..5),
        proptest::option::of(proptest::collection::btree_set(0usize..3, 0..3)),
    )
        .prop_map(
            move |(
                cells,
                (max_versions, min_versions, ttl_ms, kdc),
                (read_point, min_ts, span, spec_versions),
                columns,
            )| {
                let rules = FamilyRules {
                    max_versions,
                    min_versions,
                    ttl_ms,
                    keep_deleted_cells: [
                        KeepDeletedCells::False,
                        KeepDeletedCells::True,
                        KeepDeletedCells::Ttl,
                    ][kdc],
                };
                let spec = ReadSpec {
                    read_point,
                    min_ts,
                    max_ts: if span == 11 { u64::MAX } else { min_ts + span },
                    max_versions: spec_versions,
                    now_ms: 10,
                    raw,
                };
                let columns = columns.map(|cs: BTreeSet<usize>| {
                    cs.into_iter()
                        .map(|q| Bytes::from_static(ROW_QUALS[q].as_bytes()))
                        .collect()
                });
                (build_row(&cells), rules, spec, columns)
            },
        )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 2000,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Raw reads of random rows (every kind of cell, repeated writes and markers, cell
    /// TTLs, read points, time ranges, TTL and min versions, column selections) return
    /// exactly what the set-wise model of rules R1 to R6 returns.
    #[test]
    fn raw_reads_match_the_model(
        case in arb_read(true),
    ) {
        let (cells, rules, spec, columns) = case;
        let mut got = Vec::new();
        match_row_into(cells.clone(), &rules, &spec, columns.as_ref(), |c| got.push(c));
        let want = raw_model(&cells, &rules, &spec, columns.as_ref());
        proptest::prop_assert_eq!(got, want);
    }
}

proptest::proptest! {
    /// A row's lone puts (one per column, no markers): each is returned exactly when
    /// `lone_put_visible` says so, in the matcher's order.
    #[test]
    fn lone_puts_match_the_matcher(
        puts in proptest::collection::btree_map(0u8..12, (0u64..40, 1u64..30), 0..8),
        max_versions in 0u32..3,
        min_versions in 0u32..2,
        ttl_ms in proptest::option::of(0u64..30),
        min_ts in 0u64..20,
        span in 1u64..40,
        spec_versions in 0u32..3,
        read_point in 0u64..30,
        now_ms in 0u64..60,
        columns in proptest::option::of(proptest::collection::btree_set(0u8..12, 0..6)),
    ) {
        let cells: Vec<StoreCell> = puts
            .iter()
            .map(|(q, (ts, seq))| c(&format!("q{q:02}"), *ts, CellType::Put, *seq, "v"))
            .collect();
        let rules = FamilyRules { max_versions, min_versions, ttl_ms, keep_deleted_cells: KeepDeletedCells::False };
        let spec = ReadSpec {
            read_point,
            min_ts,
            max_ts: min_ts + span,
            max_versions: spec_versions,
            now_ms,
            raw: false,
        };
        let columns: Option<BTreeSet<Bytes>> = columns.map(|cs| {
            cs.iter().map(|q| Bytes::from(format!("q{q:02}"))).collect()
        });
        let mut sorted = cells.clone();
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        let mut matched = Vec::new();
        match_row_into(sorted, &rules, &spec, columns.as_ref(), |c| matched.push(c.key));
        let lone: Vec<StoreKey> = cells
            .into_iter()
            .filter(|c| {
                c.key.seq <= spec.read_point
                    && lone_put_visible(&c.key.qualifier, c.key.ts, &rules, &spec, columns.as_ref())
            })
            .map(|c| c.key)
            .collect();
        proptest::prop_assert_eq!(matched, lone);
    }
}

/// A [`RowSource`] over a sorted row that does skip: told a column is done, it drops the
/// column's cells up to the next column, and counts the cells it yielded.
struct Skipping {
    cells: std::collections::VecDeque<StoreCell>,
    yielded: usize,
}

impl Iterator for Skipping {
    type Item = StoreCell;

    fn next(&mut self) -> Option<StoreCell> {
        let c = self.cells.pop_front()?;
        self.yielded += 1;
        Some(c)
    }
}

impl RowSource for Skipping {
    fn column_done(&mut self, qualifier: &[u8]) {
        while self
            .cells
            .front()
            .is_some_and(|c| c.key.qualifier.as_ref() == qualifier)
        {
            self.cells.pop_front();
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 2000,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Reads (not raw) of random rows return the same cells whether or not the source
    /// skips the columns the matcher says are done: put columns, the empty qualifier with
    /// family markers older than its puts, versions, TTLs, time ranges, selections.
    #[test]
    fn skipping_done_columns_changes_no_read(
        case in arb_read(false),
    ) {
        let (cells, rules, spec, columns) = case;
        let mut want = Vec::new();
        match_row_into(cells.clone(), &rules, &spec, columns.as_ref(), |c| want.push(c));
        let mut got = Vec::new();
        let source = Skipping { cells: cells.into(), yielded: 0 };
        match_row_from(source, &rules, &spec, columns.as_ref(), |c| got.push(c));
        proptest::prop_assert_eq!(got, want);
    }
}

#[test]
fn a_column_of_many_versions_is_skipped_after_the_newest() {
    // A hot row's column: 1,000 updates of `a`, then one of `b`; the family keeps one version.
    let mut cells: Vec<StoreCell> = (1..=1000u64)
        .map(|i| c("a", i, CellType::Put, i, &format!("a{i}")))
        .collect();
    cells.push(c("b", 5, CellType::Put, 1001, "b"));
    cells.sort_by(|a, b| a.key.cmp(&b.key));
    let rules = plain_rules(1, false);
    let spec = ReadSpec {
        raw: false,
        read_point: u64::MAX,
        ..raw_spec(1)
    };
    let mut source = Skipping {
        cells: cells.into(),
        yielded: 0,
    };
    let mut got = Vec::new();
    match_row_from(&mut source, &rules, &spec, None, |c| got.push(c.value));
    assert_eq!(got, [Bytes::from("a1000"), Bytes::from("b")]);
    assert_eq!(
        source.yielded, 2,
        "only the newest version of each column was read"
    );
}
