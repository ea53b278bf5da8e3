//! Filters against the engine: one behaviour per test, each on cells chosen for the filter's
//! edge cases (empty values, missing columns, several versions, deleted cells, several
//! families and regions, reverse scans), through the public async API; check-and-mutate with
//! a filter condition; the postcard round trip and its bounds on untrusted bytes (nesting
//! depth, lengths the input does not back), with a proptest that every filter within the
//! depth limit round-trips; and a proptest comparing filtered engine scans (with their seeks)
//! with the same filter applied to the model's unfiltered results.

use crate::common;

use basalt::client::{CheckAndMutate, CompareOp, Delete, Get, Put, RowResult, Scan, Table};
use basalt::filter::{
    BitOp, ColumnValueCondition, Comparator, Filter, ListOp, RowRangeSpec, MAX_FILTER_DEPTH,
};
use basalt::{ColumnFamilyDescriptor, Connection, Error, PreSplit, TableDescriptor, TableName};
use bytes::Bytes;
use common::model::{b, DeleteSpec, Model, PutSpec, ScanSpec};
use futures::TryStreamExt;
use proptest::prelude::*;
use tempfile::TempDir;

fn desc() -> TableDescriptor {
    TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("a").max_versions(3))
        .family(ColumnFamilyDescriptor::new("b").max_versions(3))
}

async fn open(splits: &[&str]) -> (TempDir, Connection, Table) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let split = PreSplit::Keys(splits.iter().map(|k| k.as_bytes().to_vec()).collect());
    conn.admin()
        .create_table_with_splits(desc(), split)
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    (dir, conn, t)
}

fn s(x: &[u8]) -> String {
    String::from_utf8_lossy(x).into_owned()
}

/// The fixture, split into regions at `r3` and `r6`; half of it flushed to store files:
///
/// | row | a                                   | b          |
/// | --- | ----------------------------------- | ---------- |
/// | r1  | q1 = v1@1, v2@2; q2 = ""@1          | x = bx@1   |
/// | r2  | q1 = w@1                            | y = by@5   |
/// | r3  | q3 = v3@1; q1 deleted (all versions)|            |
/// | r4  | (nothing visible: deleted row)      |            |
/// | r5  | ab = 5@1; ac = 6@1; b = 7@1         | q1 = z@2   |
/// | r7  | q1 = v7@3, v6@2, v5@1               |            |
/// | s1  | q1 = s@1                            |            |
async fn fixture() -> (TempDir, Connection, Table) {
    let (dir, conn, t) = open(&["r3", "r6"]).await;
    let puts = [
        ("r1", "a", "q1", 1, "v1"),
        ("r1", "a", "q1", 2, "v2"),
        ("r1", "a", "q2", 1, ""),
        ("r1", "b", "x", 1, "bx"),
        ("r2", "a", "q1", 1, "w"),
        ("r2", "b", "y", 5, "by"),
        ("r3", "a", "q3", 1, "v3"),
        ("r3", "a", "q1", 1, "gone"),
        ("r4", "a", "q1", 1, "gone"),
    ];
    for (r, f, q, ts, v) in puts {
        t.put(Put::new(r).add_column_ts(f, q, ts, v)).await.unwrap();
    }
    conn.admin()
        .flush(&TableName::parse("t").unwrap())
        .await
        .unwrap();
    t.delete(Delete::new("r3").add_columns("a", "q1"))
        .await
        .unwrap();
    t.delete(Delete::new("r4")).await.unwrap();
    let puts = [
        ("r5", "a", "ab", 1, "5"),
        ("r5", "a", "ac", 1, "6"),
        ("r5", "a", "b", 1, "7"),
        ("r5", "b", "q1", 2, "z"),
        ("r7", "a", "q1", 1, "v5"),
        ("r7", "a", "q1", 2, "v6"),
        ("r7", "a", "q1", 3, "v7"),
        ("s1", "a", "q1", 1, "s"),
    ];
    for (r, f, q, ts, v) in puts {
        t.put(Put::new(r).add_column_ts(f, q, ts, v)).await.unwrap();
    }
    (dir, conn, t)
}

async fn scan(t: &Table, sc: Scan) -> Vec<RowResult> {
    t.scan(sc).unwrap().try_collect().await.unwrap()
}

/// Filtered scan as `row: f:q@ts=v ...` lines; also checks the scan equals the filter applied
/// to the unfiltered scan (the seek-free reference).
async fn run(t: &Table, f: Filter, sc: Scan, reverse: bool) -> Vec<String> {
    let base = sc.clone().reversed(reverse);
    let got = scan(t, base.clone().filter(f.clone())).await;
    // The filter sees every version the families keep; the scan's max versions caps what
    // it included (HBASE-17125).
    let every = scan(t, base.clone().max_versions(u32::MAX)).await;
    let want = f
        .apply_versions(every, reverse, base.get_max_versions())
        .unwrap();
    assert_eq!(
        got, want,
        "filtered scan differs from the filter applied to the rows"
    );
    got.iter().map(line).collect()
}

fn line(r: &RowResult) -> String {
    let cells: Vec<String> = r
        .cells
        .iter()
        .map(|c| {
            format!(
                "{}:{}@{}={}",
                s(&c.family),
                s(&c.qualifier),
                c.timestamp,
                s(&c.value)
            )
        })
        .collect();
    format!("{}: {}", s(&r.row), cells.join(" "))
}

async fn rows(t: &Table, f: Filter) -> Vec<String> {
    run(t, f, Scan::new(), false)
        .await
        .iter()
        .map(|l| l.split(':').next().unwrap_or("").to_string())
        .collect()
}

async fn rows_rev(t: &Table, f: Filter) -> Vec<String> {
    run(t, f, Scan::new(), true)
        .await
        .iter()
        .map(|l| l.split(':').next().unwrap_or("").to_string())
        .collect()
}

fn v(x: &[&str]) -> Vec<String> {
    x.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn prefix_filter_forward_and_reverse() {
    let (_d, _c, t) = fixture().await;
    assert_eq!(
        rows(&t, Filter::prefix("r")).await,
        v(&["r1", "r2", "r3", "r5", "r7"])
    );
    assert_eq!(rows(&t, Filter::prefix("r7")).await, v(&["r7"]));
    assert_eq!(rows(&t, Filter::prefix("s")).await, v(&["s1"]));
    assert_eq!(
        rows_rev(&t, Filter::prefix("r")).await,
        v(&["r7", "r5", "r3", "r2", "r1"])
    );
    assert!(rows(&t, Filter::prefix("q")).await.is_empty());
    // r4 has only deleted cells: the prefix matches it, nothing shows.
    assert!(rows(&t, Filter::prefix("r4")).await.is_empty());
}

#[tokio::test]
async fn row_filter_with_each_comparator() {
    let (_d, _c, t) = fixture().await;
    let f = |op, c| Filter::Row(op, c);
    assert_eq!(
        rows(&t, f(CompareOp::Less, Comparator::binary("r3"))).await,
        v(&["r1", "r2"])
    );
    assert_eq!(
        rows(&t, f(CompareOp::GreaterOrEqual, Comparator::binary("r5"))).await,
        v(&["r5", "r7", "s1"])
    );
    assert_eq!(
        rows(&t, f(CompareOp::Equal, Comparator::regex("[57]$"))).await,
        v(&["r5", "r7"])
    );
    assert_eq!(
        rows(&t, f(CompareOp::Equal, Comparator::substring("S"))).await,
        v(&["s1"])
    );
    assert_eq!(
        rows(&t, f(CompareOp::NotEqual, Comparator::binary_prefix("r"))).await,
        v(&["s1"])
    );
    assert!(rows(&t, f(CompareOp::Equal, Comparator::Null))
        .await
        .is_empty());
    // "r" = 0x72, "s" = 0x73: AND with 0x01 leaves a bit only for "s1", with 0x02 for every
    // row; a mask of another length never matches.
    let bit = |m: &[u8]| Comparator::Bit(Bytes::copy_from_slice(m), BitOp::And);
    assert_eq!(
        rows(&t, f(CompareOp::Equal, bit(&[0x01, 0x00]))).await,
        v(&["s1"])
    );
    assert!(rows(&t, f(CompareOp::Equal, bit(&[0x02]))).await.is_empty());
    assert_eq!(
        rows(&t, f(CompareOp::Equal, bit(&[0x02, 0x00])))
            .await
            .len(),
        6
    );
    assert_eq!(
        rows_rev(&t, f(CompareOp::Greater, Comparator::binary("r2"))).await,
        v(&["s1", "r7", "r5", "r3"])
    );
}

#[tokio::test]
async fn family_filter_keeps_other_families_cells_out() {
    let (_d, _c, t) = fixture().await;
    let got = run(
        &t,
        Filter::Family(CompareOp::Equal, Comparator::binary("b")),
        Scan::new(),
        false,
    )
    .await;
    assert_eq!(got, v(&["r1: b:x@1=bx", "r2: b:y@5=by", "r5: b:q1@2=z"]));
}

#[tokio::test]
async fn qualifier_filter_across_families() {
    let (_d, _c, t) = fixture().await;
    let got = run(
        &t,
        Filter::Qualifier(CompareOp::Equal, Comparator::binary("q1")),
        Scan::new().max_versions(3),
        false,
    )
    .await;
    assert_eq!(
        got,
        v(&[
            "r1: a:q1@2=v2 a:q1@1=v1",
            "r2: a:q1@1=w",
            "r5: b:q1@2=z",
            "r7: a:q1@3=v7 a:q1@2=v6 a:q1@1=v5",
            "s1: a:q1@1=s",
        ])
    );
}

#[tokio::test]
async fn value_filter_matches_empty_values_and_older_versions() {
    let (_d, _c, t) = fixture().await;
    let empty = run(
        &t,
        Filter::Value(CompareOp::Equal, Comparator::binary("")),
        Scan::new(),
        false,
    )
    .await;
    assert_eq!(empty, v(&["r1: a:q2@1="]));
    // v1 is r1's older version: the filter sees it before the version cap (HBASE-17125,
    // `TestFromClientSide5#testReadWithFilter`), with one version as with two.
    let f = Filter::Value(CompareOp::Equal, Comparator::binary("v1"));
    assert_eq!(
        run(&t, f.clone(), Scan::new(), false).await,
        v(&["r1: a:q1@1=v1"])
    );
    assert_eq!(
        run(&t, f, Scan::new().max_versions(2), false).await,
        v(&["r1: a:q1@1=v1"])
    );
    // A deleted cell is never offered to the filter.
    let gone = Filter::Value(CompareOp::Equal, Comparator::binary("gone"));
    assert!(run(&t, gone, Scan::new().max_versions(3), false)
        .await
        .is_empty());
}

#[tokio::test]
async fn column_prefix_filter_seeks_within_each_family() {
    let (_d, _c, t) = fixture().await;
    let got = run(&t, Filter::column_prefix("q"), Scan::new(), false).await;
    assert_eq!(
        got,
        v(&[
            "r1: a:q1@2=v2 a:q2@1=",
            "r2: a:q1@1=w",
            "r3: a:q3@1=v3",
            "r5: b:q1@2=z",
            "r7: a:q1@3=v7",
            "s1: a:q1@1=s",
        ])
    );
    let got = run(&t, Filter::column_prefix("a"), Scan::new(), true).await;
    assert_eq!(got, v(&["r5: a:ab@1=5 a:ac@1=6"]));
}

#[tokio::test]
async fn multiple_column_prefix_filter() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::MultipleColumnPrefix(vec![b("ac"), b("x"), b("b")]);
    let got = run(&t, f, Scan::new(), false).await;
    assert_eq!(got, v(&["r1: b:x@1=bx", "r5: a:ac@1=6 a:b@1=7"]));
}

#[tokio::test]
async fn column_range_filter_bounds() {
    let (_d, _c, t) = fixture().await;
    let range = |min: &str, mi, max: &str, ma| Filter::ColumnRange {
        min: (!min.is_empty()).then(|| b(min)),
        min_inclusive: mi,
        max: (!max.is_empty()).then(|| b(max)),
        max_inclusive: ma,
    };
    let got = run(
        &t,
        range("ab", false, "b", true),
        Scan::new().add_family("a"),
        false,
    )
    .await;
    assert_eq!(got, v(&["r5: a:ac@1=6 a:b@1=7"]));
    let got = run(
        &t,
        range("ab", true, "b", false),
        Scan::new().add_family("a"),
        false,
    )
    .await;
    assert_eq!(got, v(&["r5: a:ab@1=5 a:ac@1=6"]));
    let got = run(&t, range("q2", true, "", false), Scan::new(), true).await;
    assert_eq!(
        got,
        v(&["r3: a:q3@1=v3", "r2: b:y@5=by", "r1: a:q2@1= b:x@1=bx"])
    );
}

#[tokio::test]
async fn column_count_get_filter_on_a_get() {
    let (_d, _c, t) = fixture().await;
    let r = t
        .get(Get::new("r5").filter(Filter::ColumnCountGet(2)))
        .await
        .unwrap();
    assert_eq!(line(&r), "r5: a:ab@1=5 a:ac@1=6");
    let r = t
        .get(
            Get::new("r1")
                .max_versions(3)
                .filter(Filter::ColumnCountGet(1)),
        )
        .await
        .unwrap();
    assert_eq!(line(&r), "r1: a:q1@2=v2");
}

#[tokio::test]
async fn column_pagination_filter_offset_and_column_offset() {
    let (_d, _c, t) = fixture().await;
    let page = |limit, offset| Filter::ColumnPagination {
        limit,
        offset,
        column_offset: None,
    };
    let got = run(
        &t,
        page(2, 1),
        Scan::new().start_row("r5").stop_row("r6"),
        false,
    )
    .await;
    assert_eq!(got, v(&["r5: a:ac@1=6 a:b@1=7"]));
    let got = run(&t, page(1, 1), Scan::new().max_versions(3), false).await;
    assert_eq!(got, v(&["r1: a:q2@1=", "r2: b:y@5=by", "r5: a:ac@1=6"]));
    let f = Filter::ColumnPagination {
        limit: 2,
        offset: 0,
        column_offset: Some(b("b")),
    };
    let got = run(&t, f, Scan::new().start_row("r5").stop_row("r6"), false).await;
    assert_eq!(got, v(&["r5: a:b@1=7 b:q1@2=z"]));
}

#[tokio::test]
async fn single_column_value_filter_missing_and_versions() {
    let (_d, _c, t) = fixture().await;
    let cond = ColumnValueCondition::new("a", "q1", CompareOp::Equal, Comparator::binary("v1"));
    // Rows without a:q1 pass unless filter-if-missing; r1's newest q1 is v2, so it fails.
    assert_eq!(
        rows(&t, Filter::SingleColumnValue(cond.clone())).await,
        v(&["r3", "r5"])
    );
    let strict = cond.clone().filter_if_missing(true);
    assert!(rows(&t, Filter::SingleColumnValue(strict.clone()))
        .await
        .is_empty());
    // Any version (of those read): with 2 versions r1's older v1 matches.
    let any = strict.latest_version_only(false);
    let got = run(
        &t,
        Filter::SingleColumnValue(any.clone()),
        Scan::new().max_versions(2),
        false,
    )
    .await;
    assert_eq!(got, v(&["r1: a:q1@2=v2 a:q1@1=v1 a:q2@1= b:x@1=bx"]));
    // The deleted a:q1 of r3 counts as missing.
    let gone = ColumnValueCondition::new("a", "q1", CompareOp::Equal, Comparator::binary("gone"))
        .filter_if_missing(true);
    assert!(rows(&t, Filter::SingleColumnValue(gone)).await.is_empty());
    // Reverse.
    let ge = ColumnValueCondition::new(
        "a",
        "q1",
        CompareOp::GreaterOrEqual,
        Comparator::binary("v"),
    )
    .filter_if_missing(true);
    assert_eq!(
        rows_rev(&t, Filter::SingleColumnValue(ge)).await,
        v(&["r7", "r2", "r1"])
    );
}

#[tokio::test]
async fn single_column_value_exclude_filter_drops_the_tested_column() {
    let (_d, _c, t) = fixture().await;
    let cond = ColumnValueCondition::new("a", "q1", CompareOp::Equal, Comparator::binary("w"))
        .filter_if_missing(true);
    let got = run(
        &t,
        Filter::SingleColumnValueExclude(cond),
        Scan::new(),
        false,
    )
    .await;
    assert_eq!(got, v(&["r2: b:y@5=by"]));
    // A row whose only cell is the tested column disappears.
    let cond = ColumnValueCondition::new("a", "q1", CompareOp::Equal, Comparator::binary("s"))
        .filter_if_missing(true);
    assert!(run(
        &t,
        Filter::SingleColumnValueExclude(cond),
        Scan::new(),
        false
    )
    .await
    .is_empty());
}

#[tokio::test]
async fn dependent_column_filter_keeps_matching_timestamps() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::DependentColumn {
        family: b("a"),
        qualifier: b("q1"),
        drop_dependent_column: false,
        condition: None,
    };
    let got = run(&t, f, Scan::new().max_versions(3), false).await;
    assert_eq!(
        got,
        v(&[
            "r1: a:q1@2=v2 a:q1@1=v1 a:q2@1= b:x@1=bx",
            "r2: a:q1@1=w",
            "r7: a:q1@3=v7 a:q1@2=v6 a:q1@1=v5",
            "s1: a:q1@1=s",
        ])
    );
    let f = Filter::DependentColumn {
        family: b("a"),
        qualifier: b("q1"),
        drop_dependent_column: true,
        condition: Some((CompareOp::Equal, Comparator::binary("v1"))),
    };
    let got = run(&t, f, Scan::new().max_versions(3), false).await;
    assert_eq!(got, v(&["r1: a:q2@1= b:x@1=bx"]));
}

#[tokio::test]
async fn key_only_filter_drops_values() {
    let (_d, _c, t) = fixture().await;
    let got = run(
        &t,
        Filter::KeyOnly {
            len_as_value: false,
        },
        Scan::new().start_row("s"),
        false,
    )
    .await;
    assert_eq!(got, v(&["s1: a:q1@1="]));
    let got = t
        .get(Get::new("r2").filter(Filter::KeyOnly { len_as_value: true }))
        .await
        .unwrap();
    assert_eq!(got.cells[0].value.as_ref(), &[0, 0, 0, 1]);
    assert_eq!(got.cells[1].value.as_ref(), &[0, 0, 0, 2]);
}

#[tokio::test]
async fn first_key_only_filter_one_cell_per_row() {
    let (_d, _c, t) = fixture().await;
    let got = run(&t, Filter::FirstKeyOnly, Scan::new().max_versions(3), true).await;
    assert_eq!(
        got,
        v(&[
            "s1: a:q1@1=s",
            "r7: a:q1@3=v7",
            "r5: a:ab@1=5",
            "r3: a:q3@1=v3",
            "r2: a:q1@1=w",
            "r1: a:q1@2=v2",
        ])
    );
}

#[tokio::test]
async fn inclusive_stop_filter_includes_its_row_both_ways() {
    let (_d, _c, t) = fixture().await;
    assert_eq!(
        rows(&t, Filter::inclusive_stop("r3")).await,
        v(&["r1", "r2", "r3"])
    );
    assert_eq!(
        rows(&t, Filter::inclusive_stop("r4")).await,
        v(&["r1", "r2", "r3"])
    );
    assert_eq!(
        rows_rev(&t, Filter::inclusive_stop("r5")).await,
        v(&["s1", "r7", "r5"])
    );
}

#[tokio::test]
async fn page_filter_spans_regions() {
    let (_d, _c, t) = fixture().await;
    assert_eq!(
        rows(&t, Filter::Page(4)).await,
        v(&["r1", "r2", "r3", "r5"])
    );
    assert_eq!(rows_rev(&t, Filter::Page(2)).await, v(&["s1", "r7"]));
    assert!(rows(&t, Filter::Page(0)).await.is_empty());
    // Rows another filter drops do not count.
    let f = Filter::all([Filter::prefix("r"), Filter::Page(2)]);
    assert_eq!(rows_rev(&t, f).await, v(&["r7", "r5"]));
}

#[tokio::test]
async fn timestamps_filter_picks_versions() {
    let (_d, _c, t) = fixture().await;
    let got = run(
        &t,
        Filter::Timestamps(vec![2, 5]),
        Scan::new().max_versions(3),
        false,
    )
    .await;
    assert_eq!(
        got,
        v(&[
            "r1: a:q1@2=v2",
            "r2: b:y@5=by",
            "r5: b:q1@2=z",
            "r7: a:q1@2=v6"
        ])
    );
    assert!(run(&t, Filter::Timestamps(vec![]), Scan::new(), false)
        .await
        .is_empty());
}

#[tokio::test]
async fn random_row_filter_is_repeatable_by_seed() {
    let (_d, _c, t) = fixture().await;
    let f = |chance, seed| Filter::RandomRow { chance, seed };
    assert!(rows(&t, f(0.0, 1)).await.is_empty());
    assert_eq!(rows(&t, f(1.0, 1)).await.len(), 6);
    let half = rows(&t, f(0.5, 42)).await;
    assert_eq!(half, rows(&t, f(0.5, 42)).await);
    let mut back = rows_rev(&t, f(0.5, 42)).await;
    back.reverse();
    assert_eq!(half, back);
}

#[tokio::test]
async fn while_match_filter_ends_the_scan_at_the_first_refusal() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::WhileMatch(Box::new(Filter::Row(
        CompareOp::NotEqual,
        Comparator::binary("r5"),
    )));
    assert_eq!(rows(&t, f.clone()).await, v(&["r1", "r2", "r3"]));
    assert_eq!(rows_rev(&t, f).await, v(&["s1", "r7"]));
    // A refused cell ends it too, dropping its row.
    let f = Filter::WhileMatch(Box::new(Filter::Qualifier(
        CompareOp::NotEqual,
        Comparator::binary("q2"),
    )));
    assert_eq!(rows(&t, f).await, Vec::<String>::new());
}

#[tokio::test]
async fn skip_filter_drops_rows_with_any_refused_cell() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::Skip(Box::new(Filter::Value(
        CompareOp::NotEqual,
        Comparator::binary(""),
    )));
    assert_eq!(rows(&t, f).await, v(&["r2", "r3", "r5", "r7", "s1"]));
}

#[tokio::test]
async fn fuzzy_row_filter_matches_fixed_positions() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::fuzzy_row([("?5", [1u8, 0])]);
    assert_eq!(rows(&t, f.clone()).await, v(&["r5"]));
    assert_eq!(rows_rev(&t, f).await, v(&["r5"]));
    let f = Filter::fuzzy_row([("?1", [1u8, 0]), ("r7", [0, 0])]);
    assert_eq!(rows(&t, f).await, v(&["r1", "r7", "s1"]));
    let bad = Filter::fuzzy_row([("r1", [0u8])]);
    assert!(matches!(
        t.scan(Scan::new().filter(bad)),
        Err(Error::BadArgument(_))
    ));
}

#[tokio::test]
async fn multi_row_range_filter() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::MultiRowRange(vec![
        RowRangeSpec::new("r5", "s"),
        RowRangeSpec {
            start: b("r1"),
            start_inclusive: false,
            stop: b("r3"),
            stop_inclusive: true,
        },
    ]);
    assert_eq!(rows(&t, f.clone()).await, v(&["r2", "r3", "r5", "r7"]));
    assert_eq!(rows_rev(&t, f).await, v(&["r7", "r5", "r3", "r2"]));
}

#[tokio::test]
async fn filter_lists_nest_and_or() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::any([
        Filter::all([
            Filter::prefix("r1"),
            Filter::Family(CompareOp::Equal, Comparator::binary("b")),
        ]),
        Filter::all([
            Filter::Row(CompareOp::Greater, Comparator::binary("r5")),
            Filter::KeyOnly {
                len_as_value: false,
            },
        ]),
    ]);
    let got = run(&t, f.clone(), Scan::new(), false).await;
    assert_eq!(got, v(&["r1: b:x@1=bx", "r7: a:q1@3=", "s1: a:q1@1="]));
    let back = run(&t, f, Scan::new(), true).await;
    assert_eq!(back, v(&["s1: a:q1@1=", "r7: a:q1@3=", "r1: b:x@1=bx"]));
    let empty_and = Filter::List(ListOp::MustPassAll, vec![]);
    assert_eq!(rows(&t, empty_and).await.len(), 6);
}

#[tokio::test]
async fn get_with_a_filter_that_drops_the_row_is_empty() {
    let (_d, _c, t) = fixture().await;
    let r = t
        .get(Get::new("r1").filter(Filter::prefix("r2")))
        .await
        .unwrap();
    assert!(r.is_empty());
    let r = t
        .get(Get::new("r1").filter(Filter::column_prefix("x")))
        .await
        .unwrap();
    assert_eq!(line(&r), "r1: b:x@1=bx");
}

#[tokio::test]
async fn bad_regex_is_an_error_not_a_panic() {
    let (_d, _c, t) = fixture().await;
    let f = Filter::Value(CompareOp::Equal, Comparator::regex("("));
    assert!(matches!(
        t.scan(Scan::new().filter(f.clone())),
        Err(Error::BadArgument(_))
    ));
    assert!(t.get(Get::new("r1").filter(f)).await.is_err());
}

#[tokio::test]
async fn check_and_mutate_with_a_filter_condition() {
    let (_d, _c, t) = fixture().await;
    let cond = |v: &str| {
        Filter::SingleColumnValue(
            ColumnValueCondition::new("a", "q1", CompareOp::Equal, Comparator::binary(v))
                .filter_if_missing(true),
        )
    };
    let ok = t
        .check_and_mutate(
            CheckAndMutate::for_row("r2")
                .if_matches(cond("w"))
                .then_put(Put::new("r2").add_column_ts("a", "q9", 1, "yes")),
        )
        .await
        .unwrap();
    assert!(ok);
    let no = t
        .check_and_mutate(
            CheckAndMutate::for_row("r2")
                .if_matches(cond("nope"))
                .then_put(Put::new("r2").add_column_ts("a", "q8", 1, "no")),
        )
        .await
        .unwrap();
    assert!(!no);
    let r = t.get(Get::new("r2")).await.unwrap();
    assert_eq!(r.value("a", "q9").map(|v| s(v)), Some("yes".into()));
    assert!(r.value("a", "q8").is_none());
}

/// Regression (found by the proptest): a column hint from a cell with the empty qualifier
/// must not seek past the family's delete markers, which share that qualifier and sort after
/// its newer versions.
#[tokio::test]
async fn column_hint_from_the_empty_qualifier_keeps_family_markers() {
    let (_d, _c, t) = open(&[]).await;
    t.put(Put::new("k2").add_column_ts("b", "a", 1, "masked"))
        .await
        .unwrap();
    t.put(Put::new("k2").add_column_ts("b", "", 5, "x"))
        .await
        .unwrap();
    t.delete(Delete::new("k2").add_family_ts("b", 1))
        .await
        .unwrap();
    let f = Filter::any([Filter::column_prefix("a")]);
    assert!(run(&t, f, Scan::new(), false).await.is_empty());
}

#[test]
fn filters_round_trip_through_postcard() {
    let f = Filter::any([
        Filter::all([
            Filter::prefix("p"),
            Filter::Value(CompareOp::GreaterOrEqual, Comparator::regex("^a.*")),
            Filter::SingleColumnValueExclude(
                ColumnValueCondition::new("f", "q", CompareOp::Less, Comparator::Null)
                    .latest_version_only(false),
            ),
        ]),
        Filter::Skip(Box::new(Filter::fuzzy_row([("ab", [0u8, 1])]))),
        Filter::WhileMatch(Box::new(Filter::MultiRowRange(vec![RowRangeSpec::new(
            "a", "b",
        )]))),
        Filter::RandomRow {
            chance: 0.25,
            seed: 7,
        },
        Filter::Row(
            CompareOp::Equal,
            Comparator::Bit(Bytes::from_static(&[1, 2]), BitOp::Xor),
        ),
    ]);
    let bytes = f.to_bytes().unwrap();
    assert_eq!(Filter::from_bytes(&bytes).unwrap(), f);
    assert!(Filter::from_bytes(&bytes[..bytes.len() / 2]).is_err());
}

/// The encoding of a filter `levels` deep: `levels - 1` times `wrap` around
/// FirstKeyOnlyFilter, made by repeating the bytes `wrap` puts before the filter it wraps
/// (so it can be longer than any filter the encoder would take).
fn nested_bytes(wrap: fn(Filter) -> Filter, levels: usize) -> Vec<u8> {
    let leaf = Filter::FirstKeyOnly.to_bytes().unwrap();
    let one = wrap(Filter::FirstKeyOnly).to_bytes().unwrap();
    let (head, tail) = one.split_at(one.len() - leaf.len());
    assert_eq!(tail, &leaf[..], "the wrapped filter's bytes come last");
    let mut out = head.repeat(levels - 1);
    out.extend_from_slice(&leaf);
    out
}

/// The three ways a filter holds another.
const WRAPS: [fn(Filter) -> Filter; 3] = [
    |f| Filter::WhileMatch(Box::new(f)),
    |f| Filter::Skip(Box::new(f)),
    |f| Filter::all([f]),
];

fn assert_too_deep(out: basalt::Result<impl std::fmt::Debug>) {
    match out {
        Err(Error::BadArgument(msg)) => assert!(
            msg.contains(&format!("limit of {MAX_FILTER_DEPTH} levels")),
            "{msg}"
        ),
        other => panic!("expected a typed error naming the limit, got {other:?}"),
    }
}

#[test]
fn decoding_a_million_nested_levels_is_a_typed_error_not_a_stack_overflow() {
    for wrap in WRAPS {
        // Before the limit, this overflowed the stack and aborted the process.
        let bytes = nested_bytes(wrap, 1_000_000);
        assert_too_deep(Filter::from_bytes(&bytes));
        // The thread's nesting count is back to zero: a filter at the limit decodes after.
        let ok = nested_bytes(wrap, MAX_FILTER_DEPTH);
        assert_eq!(Filter::from_bytes(&ok).unwrap().depth(), MAX_FILTER_DEPTH);
    }
}

#[test]
fn a_filter_at_the_depth_limit_round_trips_and_one_level_more_is_refused_both_ways() {
    // Mixed wrappers, with siblings in the lists, exactly MAX_FILTER_DEPTH levels deep.
    let mut f = Filter::prefix("p");
    for i in 1..MAX_FILTER_DEPTH {
        f = match i % 3 {
            0 => Filter::WhileMatch(Box::new(f)),
            1 => Filter::Skip(Box::new(f)),
            _ => Filter::any([Filter::FirstKeyOnly, f, Filter::Page(3)]),
        };
    }
    assert_eq!(f.depth(), MAX_FILTER_DEPTH);
    let bytes = f.to_bytes().unwrap();
    assert_eq!(Filter::from_bytes(&bytes).unwrap(), f);
    for wrap in WRAPS {
        // One level more: the encoder refuses what the decoder would.
        let deeper = wrap(f.clone());
        assert_eq!(deeper.depth(), MAX_FILTER_DEPTH + 1);
        assert_too_deep(deeper.to_bytes());
        assert_too_deep(Filter::from_bytes(&nested_bytes(
            wrap,
            MAX_FILTER_DEPTH + 1,
        )));
        assert!(Filter::from_bytes(&nested_bytes(wrap, MAX_FILTER_DEPTH)).is_ok());
    }
}

#[test]
fn lengths_the_input_does_not_back_are_a_typed_error() {
    // A list, a timestamp list, a prefix list and a fuzzy list claiming u64::MAX elements,
    // and a prefix claiming u64::MAX bytes, in a few bytes of input.
    let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    for empty in [
        Filter::all([]),
        Filter::Timestamps(vec![]),
        Filter::MultipleColumnPrefix(vec![]),
        Filter::FuzzyRow(vec![]),
        Filter::MultiRowRange(vec![]),
        Filter::prefix(""),
    ] {
        let mut bytes = empty.to_bytes().unwrap();
        assert_eq!(bytes.pop(), Some(0), "{empty:?} ends with its length");
        bytes.extend_from_slice(&huge);
        match Filter::from_bytes(&bytes) {
            Err(Error::BadArgument(msg)) => assert!(msg.contains("filter decoding"), "{msg}"),
            other => panic!("{empty:?}: {other:?}"),
        }
    }
}

/// The depth of a filter, counted here independently of [`Filter::depth`].
fn nesting(f: &Filter) -> usize {
    match f {
        Filter::WhileMatch(f) | Filter::Skip(f) => 1 + nesting(f),
        Filter::List(_, fs) => 1 + fs.iter().map(nesting).max().unwrap_or(0),
        _ => 1,
    }
}

/// Filters around the depth limit: a chain of wrappers (with random siblings in lists)
/// around a random filter.
fn deep_filter() -> impl Strategy<Value = Filter> {
    (
        filter(),
        prop::collection::vec((0u8..4, filter()), 0..MAX_FILTER_DEPTH + 4),
    )
        .prop_map(|(inner, wraps)| {
            wraps
                .into_iter()
                .fold(inner, |f, (kind, sibling)| match kind {
                    0 => Filter::Skip(Box::new(f)),
                    1 => Filter::WhileMatch(Box::new(f)),
                    2 => Filter::all([sibling, f]),
                    _ => Filter::any([f, sibling]),
                })
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every filter within the depth limit encodes and decodes back to itself; every deeper
    /// one is refused by the encoder (which would otherwise write what the decoder refuses).
    #[test]
    fn filters_within_the_depth_limit_round_trip(f in prop_oneof![filter(), deep_filter()]) {
        let depth = nesting(&f);
        prop_assert_eq!(f.depth(), depth);
        if depth <= MAX_FILTER_DEPTH {
            let bytes = f.to_bytes().unwrap();
            prop_assert_eq!(Filter::from_bytes(&bytes).unwrap(), f);
            // Any cut of the bytes is an error, never a panic.
            for cut in [0, bytes.len() / 3, bytes.len().saturating_sub(1)] {
                if cut < bytes.len() {
                    prop_assert!(Filter::from_bytes(&bytes[..cut]).is_err());
                }
            }
        } else {
            prop_assert!(f.to_bytes().is_err());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Proptest: filtered engine scans against the model.

const ROWS: &[&str] = &["k0", "k1", "k2", "k3", "k5", "k7", "l1", "l10"];
const QUALS: &[&str] = &["", "a", "ab", "b", "c"];
const VALUES: &[&str] = &["", "x", "xy", "y"];

fn pick(xs: &'static [&'static str]) -> impl Strategy<Value = Bytes> + Clone {
    prop::sample::select(xs).prop_map(b)
}

fn op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![
        CompareOp::Less,
        CompareOp::LessOrEqual,
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::GreaterOrEqual,
        CompareOp::Greater,
    ])
}

fn comparator() -> impl Strategy<Value = Comparator> {
    prop_oneof![
        pick(&["", "a", "k2", "x", "ab", "l"]).prop_map(Comparator::Binary),
        pick(&["k", "l1", "a", "x"]).prop_map(Comparator::BinaryPrefix),
        prop::sample::select(vec!["X", "1", "b"]).prop_map(Comparator::substring),
        prop::sample::select(vec!["^k[0-3]", "y$", "b"]).prop_map(Comparator::regex),
        Just(Comparator::Null),
    ]
}

fn leaf() -> impl Strategy<Value = Filter> {
    let fam = pick(&["a", "b"]);
    prop_oneof![
        pick(&["k", "k3", "l1", "j", "m"]).prop_map(Filter::Prefix),
        (op(), comparator()).prop_map(|(o, c)| Filter::Row(o, c)),
        (op(), comparator()).prop_map(|(o, c)| Filter::Family(o, c)),
        (op(), comparator()).prop_map(|(o, c)| Filter::Qualifier(o, c)),
        (op(), comparator()).prop_map(|(o, c)| Filter::Value(o, c)),
        pick(QUALS).prop_map(Filter::ColumnPrefix),
        prop::collection::vec(pick(QUALS), 0..3).prop_map(Filter::MultipleColumnPrefix),
        (
            prop::option::of(pick(QUALS)),
            any::<bool>(),
            prop::option::of(pick(QUALS)),
            any::<bool>()
        )
            .prop_map(
                |(min, min_inclusive, max, max_inclusive)| Filter::ColumnRange {
                    min,
                    min_inclusive,
                    max,
                    max_inclusive
                }
            ),
        (0u32..3).prop_map(Filter::ColumnCountGet),
        (0u32..3, 0u32..3, prop::option::of(pick(QUALS))).prop_map(
            |(limit, offset, column_offset)| Filter::ColumnPagination {
                limit,
                offset,
                column_offset
            }
        ),
        (
            fam.clone(),
            pick(QUALS),
            op(),
            comparator(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(f, q, o, c, missing, latest, exclude)| {
                let cond = ColumnValueCondition::new(f, q, o, c)
                    .filter_if_missing(missing)
                    .latest_version_only(latest);
                if exclude {
                    Filter::SingleColumnValueExclude(cond)
                } else {
                    Filter::SingleColumnValue(cond)
                }
            }),
        (
            fam,
            pick(QUALS),
            any::<bool>(),
            prop::option::of((op(), comparator()))
        )
            .prop_map(|(family, qualifier, drop_dependent_column, condition)| {
                Filter::DependentColumn {
                    family,
                    qualifier,
                    drop_dependent_column,
                    condition,
                }
            }),
        any::<bool>().prop_map(|len_as_value| Filter::KeyOnly { len_as_value }),
        Just(Filter::FirstKeyOnly),
        pick(ROWS).prop_map(Filter::InclusiveStop),
        (0u64..4).prop_map(Filter::Page),
        prop::collection::vec(0u64..6, 0..3).prop_map(Filter::Timestamps),
        (0.0f32..1.0, 0u64..3).prop_map(|(chance, seed)| Filter::RandomRow { chance, seed }),
        prop::collection::vec(
            prop::sample::select(vec![
                ("k?", vec![0u8, 1]),
                ("?1", vec![1, 0]),
                ("l10", vec![0, 1, 0]),
                ("?3", vec![1, 0])
            ]),
            1..3
        )
        .prop_map(Filter::fuzzy_row),
        prop::collection::vec(
            (
                pick(ROWS),
                any::<bool>(),
                pick(&["", "k2", "k5", "l1"]),
                any::<bool>()
            ),
            1..3
        )
        .prop_map(|rs| Filter::MultiRowRange(
            rs.into_iter()
                .map(
                    |(start, start_inclusive, stop, stop_inclusive)| RowRangeSpec {
                        start,
                        start_inclusive,
                        stop,
                        stop_inclusive
                    }
                )
                .collect()
        )),
    ]
}

fn filter() -> impl Strategy<Value = Filter> {
    leaf().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3)
                .prop_map(|v| Filter::List(ListOp::MustPassAll, v)),
            prop::collection::vec(inner.clone(), 0..3)
                .prop_map(|v| Filter::List(ListOp::MustPassOne, v)),
            inner.clone().prop_map(|f| Filter::Skip(Box::new(f))),
            inner.prop_map(|f| Filter::WhileMatch(Box::new(f))),
        ]
    })
}

#[derive(Debug, Clone)]
enum Write {
    Put(PutSpec),
    Delete(DeleteSpec),
    Flush,
}

fn write() -> impl Strategy<Value = Write> {
    let put = (
        pick(ROWS),
        prop::collection::vec(
            (pick(&["a", "b"]), pick(QUALS), 1u64..6, pick(VALUES)),
            1..4,
        ),
    )
        .prop_map(|(r, cells)| {
            Write::Put(
                cells
                    .into_iter()
                    .fold(PutSpec::new(&r), |p, (f, q, ts, v)| p.cell(f, q, ts, v)),
            )
        });
    let delete = (pick(ROWS), pick(&["a", "b"]), pick(QUALS), 1u64..6, 0u8..3).prop_map(
        |(r, f, q, ts, kind)| {
            let d = DeleteSpec::new(&r).at(ts);
            Write::Delete(match kind {
                0 => d.column(f, q, Some(ts)),
                1 => d.version(f, q, ts),
                _ => d.family(f, Some(ts)),
            })
        },
    );
    prop_oneof![6 => put, 2 => delete, 1 => Just(Write::Flush)]
}

async fn model_case(
    splits: Vec<&'static str>,
    writes: Vec<Write>,
    filters: Vec<Filter>,
    reverse: bool,
    versions: u32,
) -> Result<(), TestCaseError> {
    let (_d, conn, t) = open(&splits).await;
    let mut model = Model::new(&desc());
    for w in &writes {
        match w {
            Write::Put(p) => {
                t.put(p.to_put()).await.unwrap();
                model.put(p);
            }
            Write::Delete(d) => {
                t.delete(d.to_delete()).await.unwrap();
                model.delete(d);
            }
            Write::Flush => conn
                .admin()
                .flush(&TableName::parse("t").unwrap())
                .await
                .unwrap(),
        }
    }
    let spec = ScanSpec {
        reverse,
        max_versions: versions,
        ..ScanSpec::default()
    };
    // Every version the families keep: a filter sees them all, then the read's max versions
    // caps what it included (HBASE-17125).
    let unfiltered = model.scan(&ScanSpec {
        max_versions: u32::MAX,
        ..spec.clone()
    });
    for f in filters {
        let want = f
            .apply_versions(unfiltered.clone(), reverse, versions)
            .unwrap();
        let got = scan(&t, spec.to_scan().filter(f.clone())).await;
        prop_assert_eq!(&got, &want, "filter {:?}", f);
        for row in ROWS {
            let g = Get::new(row).max_versions(versions).filter(f.clone());
            let got = t.get(g).await.unwrap();
            let one: Vec<RowResult> = unfiltered
                .iter()
                .filter(|r| r.row.as_ref() == row.as_bytes())
                .cloned()
                .collect();
            let want = f
                .apply_versions(one, false, versions)
                .unwrap()
                .pop()
                .unwrap_or_default();
            prop_assert_eq!(&got, &want, "get {} with {:?}", row, f);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Filtered scans and gets (seeks and all) equal the filter applied to the model's
    /// unfiltered rows.
    #[test]
    fn filtered_scans_match_the_model(
        splits in prop::sample::select(vec![vec![], vec!["k3", "l1"], vec!["k1"], vec!["k5", "l10"]]),
        writes in prop::collection::vec(write(), 1..40),
        filters in prop::collection::vec(filter(), 1..6),
        reverse in any::<bool>(),
        versions in 1u32..4,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(model_case(splits, writes, filters, reverse, versions))?;
    }
}

#[tokio::test]
async fn every_and_member_sees_each_row_key() {
    // HBase asks every MUST_PASS_ALL member about a row key: the WhileMatchFilter sees r3
    // even though the first member already refused it, and the scan ends there.
    let (_d, _c, t) = fixture().await;
    let f =
        Filter::parse("RowFilter (!=, 'binary:r3') AND WHILE RowFilter (!=, 'binary:r3')").unwrap();
    assert_eq!(rows(&t, f.clone()).await, v(&["r1", "r2"]));
    // Reverse: s1, r7, r5 pass, then r3 ends the scan.
    assert_eq!(rows_rev(&t, f).await, v(&["s1", "r7", "r5"]));
}

#[tokio::test]
async fn a_row_hint_never_skips_rows_a_while_match_filter_must_see() {
    // PrefixFilter('r5') would seek from r1 straight to r5, past r2, which the WhileMatch
    // refuses: the scan must end at r2 and return nothing.
    let (_d, _c, t) = fixture().await;
    let f = Filter::parse("WHILE RowFilter (!=, 'binary:r2') AND PrefixFilter ('r5')").unwrap();
    assert_eq!(rows(&t, f).await, Vec::<String>::new());
    // Without the WhileMatch the hint is taken and r5 comes back.
    let f = Filter::parse("RowFilter (!=, 'binary:r2') AND PrefixFilter ('r5')").unwrap();
    assert_eq!(rows(&t, f).await, v(&["r5"]));
}

#[tokio::test]
async fn match_comparators_order_a_non_match_below_the_comparator() {
    // As HBase's regex/substring comparators (a non-match compares as 1: the comparator
    // above the cell): `<` keeps the rows that do not match, `>` keeps none.
    let (_d, _c, t) = fixture().await;
    let less = Filter::parse("RowFilter (<, 'regexstring:^r[12]$')").unwrap();
    assert_eq!(rows(&t, less).await, v(&["r3", "r5", "r7", "s1"]));
    let less_eq = Filter::parse("RowFilter (<=, 'substring:r1')").unwrap();
    assert_eq!(
        rows(&t, less_eq).await,
        v(&["r1", "r2", "r3", "r5", "r7", "s1"])
    );
    let greater = Filter::parse("RowFilter (>, 'regexstring:^r[12]$')").unwrap();
    assert_eq!(rows(&t, greater).await, Vec::<String>::new());
}

#[tokio::test]
async fn skip_filter_passes_only_cells_to_the_filter_it_wraps() {
    // HBase's SkipFilter forwards neither row keys nor the row decision: SKIP PrefixFilter
    // refuses no row by its key (its cells all pass), and SKIP PageFilter never ends a scan.
    let (_d, _c, t) = fixture().await;
    let all = v(&["r1", "r2", "r3", "r5", "r7", "s1"]);
    let f = Filter::parse("SKIP PrefixFilter ('r5')").unwrap();
    assert_eq!(rows(&t, f).await, all);
    let f = Filter::parse("SKIP PageFilter (1)").unwrap();
    assert_eq!(rows(&t, f).await, all);
    // A cell the wrapped filter refuses still drops its whole row.
    let f = Filter::parse("SKIP ValueFilter (!=, 'binary:w')").unwrap();
    assert_eq!(rows(&t, f).await, v(&["r1", "r3", "r5", "r7", "s1"]));
}

/// An empty list at the depth limit has no filter below it: it encodes, so it decodes.
#[test]
fn an_empty_list_at_the_depth_limit_round_trips() {
    let mut f = Filter::List(ListOp::MustPassAll, Vec::new());
    for _ in 1..MAX_FILTER_DEPTH {
        f = Filter::WhileMatch(Box::new(f));
    }
    assert_eq!(f.depth(), MAX_FILTER_DEPTH);
    let bytes = f.to_bytes().unwrap();
    assert_eq!(Filter::from_bytes(&bytes).unwrap(), f);
}
