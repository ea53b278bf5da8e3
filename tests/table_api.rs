//! Table API integration tests: puts, gets, the five delete kinds, versions, TTL, scans (range,
//! prefix, reverse, columns, time range, limit, batch, across regions), exists, increment,
//! append, check-and-mutate, row mutations, batches, argument errors, and reads that merge
//! MemStores with store files across flush and reopen.
//!
//! Every test asserts what an HBase user expects from the equivalent `Table` call (HBase
//! reference guide semantics), against a fresh engine in its own temporary directory.

use basalt::client::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, CompareOp, Delete, Get, Increment, Put,
    RowMutations, RowResult, Scan, Table, TimeRange,
};
use basalt::now_ms;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, TableDescriptor, TableName,
    MAX_ROW_LENGTH,
};
use futures::TryStreamExt;
use tempfile::TempDir;

fn cf(name: &str) -> ColumnFamilyDescriptor {
    ColumnFamilyDescriptor::new(name)
}

fn tn() -> TableName {
    TableName::parse("t").unwrap()
}

async fn create(conn: &Connection, families: Vec<ColumnFamilyDescriptor>, split: PreSplit) {
    let d = families
        .into_iter()
        .fold(TableDescriptor::new(tn()), |d, f| d.family(f));
    conn.admin()
        .create_table_with_splits(d, split)
        .await
        .unwrap();
}

/// A fresh engine with table `t` of the given families.
async fn setup(families: Vec<ColumnFamilyDescriptor>) -> (TempDir, Connection, Table) {
    setup_split(families, PreSplit::None).await
}

async fn setup_split(
    families: Vec<ColumnFamilyDescriptor>,
    split: PreSplit,
) -> (TempDir, Connection, Table) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    create(&conn, families, split).await;
    let t = conn.table("t").unwrap();
    (dir, conn, t)
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every cell of a result as (family, qualifier, timestamp, value).
fn cells(r: &RowResult) -> Vec<(String, String, u64, String)> {
    r.cells
        .iter()
        .map(|c| (s(&c.family), s(&c.qualifier), c.timestamp, s(&c.value)))
        .collect()
}

/// The versions of one column as (timestamp, value), newest first.
fn versions(r: &RowResult, f: &str, q: &str) -> Vec<(u64, String)> {
    r.versions(f, q)
        .iter()
        .map(|c| (c.timestamp, s(&c.value)))
        .collect()
}

fn value(r: &RowResult, f: &str, q: &str) -> Option<String> {
    r.value(f, q).map(|v| s(v))
}

fn c(f: &str, q: &str, ts: u64, v: &str) -> (String, String, u64, String) {
    (f.into(), q.into(), ts, v.into())
}

fn v(ts: u64, val: &str) -> (u64, String) {
    (ts, val.into())
}

async fn scan(t: &Table, sc: Scan) -> Vec<RowResult> {
    t.scan(sc).unwrap().try_collect().await.unwrap()
}

fn keys(rows: &[RowResult]) -> Vec<String> {
    rows.iter().map(|r| s(&r.row)).collect()
}

/// Puts `f:q = <row>` into each row.
async fn put_rows(t: &Table, rows: &[&str]) {
    for r in rows {
        t.put(Put::new(r).add_column("f", "q", r)).await.unwrap();
    }
}

/// Puts versions at the given timestamps into `r` / `f:q`, value `v<ts>`.
async fn put_versions(t: &Table, row: &str, f: &str, q: &str, tss: &[u64]) {
    for ts in tss {
        t.put(Put::new(row).add_column_ts(f, q, *ts, format!("v{ts}")))
            .await
            .unwrap();
    }
}

fn counter(v: i64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

// ---------------------------------------------------------------------------------------
// Puts and gets
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn put_many_columns_and_get_the_whole_row_sorted() {
    let (_d, _c, t) = setup(vec![cf("f"), cf("g")]).await;
    t.put(
        Put::new("r")
            .add_column_ts("g", "z", 5, "gz")
            .add_column_ts("f", "b", 5, "fb")
            .add_column_ts("f", "a", 5, "fa")
            .add_column_ts("g", "a", 5, "ga"),
    )
    .await
    .unwrap();
    let r = t.get(Get::new("r")).await.unwrap();
    assert_eq!(r.row, "r");
    // Sorted by family, then qualifier.
    assert_eq!(
        cells(&r),
        vec![
            c("f", "a", 5, "fa"),
            c("f", "b", 5, "fb"),
            c("g", "a", 5, "ga"),
            c("g", "z", 5, "gz"),
        ]
    );
    // Binary qualifiers and values, and an empty value, round-trip.
    t.put(
        Put::new([0u8, 255])
            .add_column("f", [0u8, 1], [255u8, 0])
            .add_column("f", "empty", ""),
    )
    .await
    .unwrap();
    let r = t.get(Get::new([0u8, 255])).await.unwrap();
    assert_eq!(r.value("f", [0u8, 1]).unwrap().as_ref(), &[255u8, 0]);
    assert_eq!(r.value("f", "empty").unwrap().as_ref(), b"");
}

#[tokio::test]
async fn a_get_of_a_missing_row_is_empty() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let r = t.get(Get::new("nope")).await.unwrap();
    assert!(r.is_empty());
    assert!(r.row.is_empty());
    assert_eq!(r.value("f", "q"), None);
}

#[tokio::test]
async fn explicit_timestamps_are_kept() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5)]).await;
    t.put(
        Put::new("r")
            .timestamp(100)
            .add_column("f", "a", "put-ts")
            .add_column_ts("f", "b", 42, "cell-ts"),
    )
    .await
    .unwrap();
    let r = t.get(Get::new("r")).await.unwrap();
    // A cell's own timestamp wins over the put's.
    assert_eq!(
        cells(&r),
        vec![c("f", "a", 100, "put-ts"), c("f", "b", 42, "cell-ts")]
    );
    // Timestamp 0 is a legal version.
    t.put(Put::new("r0").add_column_ts("f", "q", 0, "zero"))
        .await
        .unwrap();
    let r = t.get(Get::new("r0")).await.unwrap();
    assert_eq!(cells(&r), vec![c("f", "q", 0, "zero")]);
}

#[tokio::test]
async fn server_timestamps_are_the_current_time() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let before = now_ms();
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    let after = now_ms();
    let r = t.get(Get::new("r")).await.unwrap();
    let ts = r.cells[0].timestamp;
    assert!(before <= ts && ts <= after, "{before} <= {ts} <= {after}");
}

#[tokio::test]
async fn a_newer_put_of_a_column_replaces_it_for_default_gets() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(3)]).await;
    put_versions(&t, "r", "f", "q", &[10, 30, 20]).await;
    let r = t.get(Get::new("r")).await.unwrap();
    // Default get: newest timestamp, one version, whatever the write order.
    assert_eq!(versions(&r, "f", "q"), vec![v(30, "v30")]);
}

#[tokio::test]
async fn get_limited_to_families_and_columns() {
    let (_d, _c, t) = setup(vec![cf("f"), cf("g"), cf("h")]).await;
    t.put(
        Put::new("r")
            .timestamp(1)
            .add_column("f", "a", "1")
            .add_column("f", "b", "2")
            .add_column("g", "a", "3")
            .add_column("g", "b", "4")
            .add_column("h", "a", "5"),
    )
    .await
    .unwrap();
    let r = t.get(Get::new("r").add_family("g")).await.unwrap();
    assert_eq!(cells(&r), vec![c("g", "a", 1, "3"), c("g", "b", 1, "4")]);

    let r = t
        .get(Get::new("r").add_column("f", "b").add_column("h", "a"))
        .await
        .unwrap();
    assert_eq!(cells(&r), vec![c("f", "b", 1, "2"), c("h", "a", 1, "5")]);

    // A family plus a column of another family: the union.
    let r = t
        .get(Get::new("r").add_family("f").add_column("g", "b"))
        .await
        .unwrap();
    assert_eq!(
        cells(&r),
        vec![
            c("f", "a", 1, "1"),
            c("f", "b", 1, "2"),
            c("g", "b", 1, "4")
        ]
    );

    // A family and one of its columns: the whole family (as HBase).
    let r = t
        .get(Get::new("r").add_column("f", "a").add_family("f"))
        .await
        .unwrap();
    assert_eq!(cells(&r), vec![c("f", "a", 1, "1"), c("f", "b", 1, "2")]);

    // A missing column of an existing family: an empty result, not an error.
    let r = t.get(Get::new("r").add_column("f", "zz")).await.unwrap();
    assert!(r.is_empty());
}

#[tokio::test]
async fn get_time_range_is_min_inclusive_max_exclusive() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(10)]).await;
    put_versions(&t, "r", "f", "q", &[10, 20, 30, 40]).await;
    let range = TimeRange::new(20, 40).unwrap();
    let r = t
        .get(Get::new("r").time_range(range).max_versions(10))
        .await
        .unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(30, "v30"), v(20, "v20")]);
    // One version by default: the newest inside the range.
    let r = t.get(Get::new("r").time_range(range)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(30, "v30")]);
    // A range holding no version gives an empty result.
    let r = t
        .get(Get::new("r").time_range(TimeRange::new(41, 100).unwrap()))
        .await
        .unwrap();
    assert!(r.is_empty());
}

#[tokio::test]
async fn get_at_an_exact_timestamp() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(10)]).await;
    put_versions(&t, "r", "f", "q", &[10, 20, 30]).await;
    let r = t.get(Get::new("r").timestamp(20)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(20, "v20")]);
    let r = t.get(Get::new("r").timestamp(25)).await.unwrap();
    assert!(r.is_empty());
    let r = t
        .get(Get::new("r").time_range(TimeRange::at(10)))
        .await
        .unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(10, "v10")]);
}

#[tokio::test]
async fn get_max_versions_returns_the_newest_n() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(10)]).await;
    put_versions(&t, "r", "f", "q", &[1, 2, 3, 4]).await;
    put_versions(&t, "r", "f", "p", &[5]).await;
    let r = t.get(Get::new("r").max_versions(2)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(4, "v4"), v(3, "v3")]);
    assert_eq!(versions(&r, "f", "p"), vec![v(5, "v5")]);
    let r = t.get(Get::new("r").max_versions(100)).await.unwrap();
    assert_eq!(
        versions(&r, "f", "q"),
        vec![v(4, "v4"), v(3, "v3"), v(2, "v2"), v(1, "v1")]
    );
}

#[tokio::test]
async fn family_max_versions_caps_what_reads_return() {
    let (_d, conn, t) = setup(vec![cf("f").max_versions(2)]).await;
    put_versions(&t, "r", "f", "q", &[1, 2, 3, 4]).await;
    let all = Get::new("r").max_versions(10);
    let r = t.get(all.clone()).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(4, "v4"), v(3, "v3")]);
    conn.admin().flush(&tn()).await.unwrap();
    let r = t.get(all).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(4, "v4"), v(3, "v3")]);
}

#[tokio::test]
async fn two_writes_at_the_same_timestamp_the_later_wins() {
    let (_d, conn, t) = setup(vec![cf("f").max_versions(5)]).await;
    t.put(Put::new("r").add_column_ts("f", "q", 7, "first"))
        .await
        .unwrap();
    t.put(Put::new("r").add_column_ts("f", "q", 7, "second"))
        .await
        .unwrap();
    let all = Get::new("r").max_versions(5);
    let r = t.get(all.clone()).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(7, "second")]);

    // Still true when the older write is in a store file and the newer in the MemStore.
    conn.admin().flush(&tn()).await.unwrap();
    t.put(Put::new("r").add_column_ts("f", "q", 7, "third"))
        .await
        .unwrap();
    let r = t.get(all.clone()).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(7, "third")]);
    // And when both are in store files.
    conn.admin().flush(&tn()).await.unwrap();
    let r = t.get(all).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(7, "third")]);
}

// ---------------------------------------------------------------------------------------
// Deletes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn delete_latest_version_reveals_the_older_one() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(3)]).await;
    put_versions(&t, "r", "f", "q", &[1, 2]).await;
    put_versions(&t, "r", "f", "other", &[1]).await;
    t.delete(Delete::new("r").add_column("f", "q"))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(3)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(1, "v1")]);
    assert_eq!(versions(&r, "f", "other"), vec![v(1, "v1")]);
    t.delete(Delete::new("r").add_column("f", "q"))
        .await
        .unwrap();
    let r = t.get(Get::new("r").add_column("f", "q")).await.unwrap();
    assert!(r.is_empty(), "{r:?}");
    // Deleting the latest version of a column that has none is harmless.
    t.delete(Delete::new("r").add_column("f", "q"))
        .await
        .unwrap();
    let r = t.get(Get::new("r")).await.unwrap();
    assert_eq!(cells(&r), vec![c("f", "other", 1, "v1")]);
}

#[tokio::test]
async fn delete_latest_version_applies_to_the_newest_timestamp_not_the_newest_write() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(3)]).await;
    put_versions(&t, "r", "f", "q", &[20, 10]).await;
    t.delete(Delete::new("r").add_column("f", "q"))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(3)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(10, "v10")]);
}

#[tokio::test]
async fn delete_exact_version() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5)]).await;
    put_versions(&t, "r", "f", "q", &[1, 2, 3]).await;
    t.delete(Delete::new("r").add_column_ts("f", "q", 2))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(3, "v3"), v(1, "v1")]);
    // With the delete's own timestamp, add_column deletes that exact version.
    t.delete(Delete::new("r").timestamp(3).add_column("f", "q"))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(1, "v1")]);
}

#[tokio::test]
async fn delete_all_versions_of_a_column_up_to_a_timestamp() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5)]).await;
    put_versions(&t, "r", "f", "q", &[1, 2, 3]).await;
    put_versions(&t, "r", "f", "p", &[1, 2, 3]).await;
    t.delete(Delete::new("r").add_columns_ts("f", "q", 2))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(3, "v3")]);
    assert_eq!(versions(&r, "f", "p").len(), 3);
    // Without a timestamp: every version up to now.
    t.delete(Delete::new("r").add_columns("f", "q"))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert!(versions(&r, "f", "q").is_empty());
    assert_eq!(versions(&r, "f", "p").len(), 3);
}

#[tokio::test]
async fn delete_whole_family() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5), cf("g")]).await;
    put_versions(&t, "r", "f", "a", &[1, 2, 3]).await;
    put_versions(&t, "r", "f", "b", &[1]).await;
    put_versions(&t, "r", "g", "a", &[1]).await;
    t.delete(Delete::new("r").add_family("f")).await.unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(cells(&r), vec![c("g", "a", 1, "v1")]);
}

#[tokio::test]
async fn delete_family_up_to_a_timestamp() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5), cf("g")]).await;
    put_versions(&t, "r", "f", "a", &[1, 2, 3]).await;
    put_versions(&t, "r", "f", "b", &[2]).await;
    put_versions(&t, "r", "g", "a", &[1]).await;
    t.delete(Delete::new("r").add_family_ts("f", 2))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(cells(&r), vec![c("f", "a", 3, "v3"), c("g", "a", 1, "v1")]);
}

#[tokio::test]
async fn delete_family_version_masks_every_column_at_exactly_that_timestamp() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5), cf("g")]).await;
    put_versions(&t, "r", "f", "a", &[1, 2, 3]).await;
    put_versions(&t, "r", "f", "b", &[2]).await;
    put_versions(&t, "r", "f", "c", &[1]).await;
    put_versions(&t, "r", "g", "a", &[2]).await;
    t.delete(Delete::new("r").add_family_version("f", 2))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(
        cells(&r),
        vec![
            c("f", "a", 3, "v3"),
            c("f", "a", 1, "v1"),
            c("f", "c", 1, "v1"),
            c("g", "a", 2, "v2"),
        ]
    );
}

#[tokio::test]
async fn delete_whole_row() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5), cf("g")]).await;
    put_versions(&t, "r", "f", "a", &[1, 2]).await;
    put_versions(&t, "r", "g", "a", &[1]).await;
    put_versions(&t, "other", "f", "a", &[1]).await;
    t.delete(Delete::new("r")).await.unwrap();
    assert!(t
        .get(Get::new("r").max_versions(5))
        .await
        .unwrap()
        .is_empty());
    assert!(!t.exists(Get::new("r")).await.unwrap());
    assert!(t.exists(Get::new("other")).await.unwrap());
    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), vec!["other"]);
}

#[tokio::test]
async fn delete_whole_row_up_to_a_timestamp() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5), cf("g")]).await;
    put_versions(&t, "r", "f", "a", &[1, 2, 3]).await;
    put_versions(&t, "r", "g", "a", &[1, 4]).await;
    t.delete(Delete::new("r").timestamp(2)).await.unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(cells(&r), vec![c("f", "a", 3, "v3"), c("g", "a", 4, "v4")]);
}

#[tokio::test]
async fn a_delete_marker_masks_puts_that_arrive_later_with_older_timestamps() {
    let (_d, conn, t) = setup(vec![cf("f").max_versions(5)]).await;
    // Every marker kind, written before any put.
    t.delete(
        Delete::new("r")
            .add_columns_ts("f", "col", 100)
            .add_column_ts("f", "ver", 100),
    )
    .await
    .unwrap();
    t.delete(Delete::new("fam").add_family_ts("f", 100))
        .await
        .unwrap();
    t.delete(Delete::new("famv").add_family_version("f", 100))
        .await
        .unwrap();
    t.delete(Delete::new("row").timestamp(100)).await.unwrap();
    for (row, q) in [
        ("r", "col"),
        ("r", "ver"),
        ("fam", "q"),
        ("famv", "q"),
        ("row", "q"),
    ] {
        put_versions(&t, row, "f", q, &[50, 100, 150]).await;
    }
    let check = |r: &RowResult, row: &str, q: &str| {
        let got = versions(r, "f", q);
        let want = match (row, q) {
            // Version and family-version markers mask exactly ts 100.
            ("r", "ver") | ("famv", _) => vec![v(150, "v150"), v(50, "v50")],
            // Column, family and row markers mask everything <= 100.
            _ => vec![v(150, "v150")],
        };
        assert_eq!(got, want, "{row}/{q}");
    };
    for round in 0..2 {
        for (row, q) in [
            ("r", "col"),
            ("r", "ver"),
            ("fam", "q"),
            ("famv", "q"),
            ("row", "q"),
        ] {
            let r = t.get(Get::new(row).max_versions(5)).await.unwrap();
            check(&r, row, q);
        }
        if round == 0 {
            // The markers keep masking once in store files.
            conn.admin().flush(&tn()).await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_server_time_delete_masks_a_later_put_with_an_older_explicit_timestamp() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.delete(Delete::new("r")).await.unwrap();
    t.put(Put::new("r").add_column_ts("f", "q", now_ms() - 60_000, "old"))
        .await
        .unwrap();
    assert!(t.get(Get::new("r")).await.unwrap().is_empty());
    t.put(Put::new("r").add_column_ts("f", "q", now_ms() + 60_000, "future"))
        .await
        .unwrap();
    assert_eq!(
        value(&t.get(Get::new("r")).await.unwrap(), "f", "q").as_deref(),
        Some("future")
    );
}

#[tokio::test]
async fn an_empty_qualifier_is_a_column_like_any_other() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5)]).await;
    put_versions(&t, "r", "f", "", &[3, 10]).await;
    put_versions(&t, "r", "f", "a", &[3, 10]).await;
    let r = t.get(Get::new("r").add_column("f", "")).await.unwrap();
    assert_eq!(cells(&r), vec![c("f", "", 10, "v10")]);
    // Family markers mask it like every other column of the family.
    t.delete(Delete::new("r").add_family_ts("f", 5))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(
        cells(&r),
        vec![c("f", "", 10, "v10"), c("f", "a", 10, "v10")]
    );
    t.delete(Delete::new("r").add_family_version("f", 10))
        .await
        .unwrap();
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert!(r.is_empty(), "{r:?}");
}

#[tokio::test]
async fn time_range_reads_do_not_see_deleted_versions() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5)]).await;
    put_versions(&t, "r", "f", "q", &[10, 30]).await;
    t.delete(Delete::new("r").add_columns_ts("f", "q", 20))
        .await
        .unwrap();
    // The marker at 20 masks version 10 even for a read whose range ends before 20.
    let r = t
        .get(Get::new("r").time_range(TimeRange::new(0, 15).unwrap()))
        .await
        .unwrap();
    assert!(r.is_empty(), "{r:?}");
    let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(30, "v30")]);
}

#[tokio::test]
async fn keep_deleted_cells_serves_time_range_reads_that_end_before_the_delete() {
    let (_d, conn, t) = setup(vec![cf("f").max_versions(5).keep_deleted_cells(true)]).await;
    put_versions(&t, "r", "f", "q", &[10, 30]).await;
    t.delete(Delete::new("r").add_columns_ts("f", "q", 20))
        .await
        .unwrap();
    for round in 0..2 {
        // A plain read does not see the deleted version.
        let r = t.get(Get::new("r").max_versions(5)).await.unwrap();
        assert_eq!(versions(&r, "f", "q"), vec![v(30, "v30")]);
        // A read whose time range ends before the delete does.
        let r = t
            .get(Get::new("r").time_range(TimeRange::new(0, 20).unwrap()))
            .await
            .unwrap();
        assert_eq!(versions(&r, "f", "q"), vec![v(10, "v10")]);
        // One that includes the delete does not.
        let r = t
            .get(Get::new("r").time_range(TimeRange::new(0, 21).unwrap()))
            .await
            .unwrap();
        assert!(r.is_empty(), "{r:?}");
        if round == 0 {
            conn.admin().flush(&tn()).await.unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------
// TTL and min versions
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn cells_older_than_the_ttl_are_not_returned() {
    // A TTL of an hour and cells two hours old: the live cells, written at server time, stay
    // live through both rounds however slow the machine (a TTL of a second let them expire
    // before the second round's reads on a loaded one).
    let (_d, conn, t) = setup(vec![cf("f").ttl_secs(3600).max_versions(3)]).await;
    let old = now_ms() - 7_200_000;
    t.put(Put::new("old").add_column_ts("f", "q", old, "expired"))
        .await
        .unwrap();
    t.put(Put::new("fresh").add_column("f", "q", "live"))
        .await
        .unwrap();
    t.put(Put::new("mixed").add_column_ts("f", "q", old, "expired"))
        .await
        .unwrap();
    t.put(Put::new("mixed").add_column("f", "q", "live"))
        .await
        .unwrap();
    for round in 0..2 {
        assert!(t.get(Get::new("old")).await.unwrap().is_empty());
        assert!(!t.exists(Get::new("old")).await.unwrap());
        let r = t.get(Get::new("mixed").max_versions(3)).await.unwrap();
        assert_eq!(r.versions("f", "q").len(), 1, "{r:?}");
        assert_eq!(value(&r, "f", "q").as_deref(), Some("live"));
        let rows = scan(&t, Scan::new()).await;
        assert_eq!(keys(&rows), vec!["fresh", "mixed"]);
        if round == 0 {
            conn.admin().flush(&tn()).await.unwrap();
        }
    }
}

#[tokio::test]
async fn min_versions_keeps_the_newest_versions_despite_the_ttl() {
    let (_d, _c, t) = setup(vec![cf("f").ttl_secs(1).min_versions(1).max_versions(3)]).await;
    let old = now_ms() - 10_000;
    put_versions(&t, "r", "f", "q", &[old - 2, old - 1, old]).await;
    let r = t.get(Get::new("r").max_versions(3)).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(old, &format!("v{old}"))]);
    let rows = scan(&t, Scan::new().max_versions(3)).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].cells.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Scans
// ---------------------------------------------------------------------------------------

const TEN: [&str; 10] = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"];

#[tokio::test]
async fn scan_whole_table_in_row_order() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    put_rows(&t, &["r5", "r1", "r9", "r0", "r3"]).await;
    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), vec!["r0", "r1", "r3", "r5", "r9"]);
    assert_eq!(value(&rows[2], "f", "q").as_deref(), Some("r3"));
}

#[tokio::test]
async fn scan_start_row_is_inclusive_and_stop_row_exclusive() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    put_rows(&t, &TEN).await;
    let rows = scan(&t, Scan::new().start_row("r3").stop_row("r7")).await;
    assert_eq!(keys(&rows), vec!["r3", "r4", "r5", "r6"]);
    // Bounds that are not rows.
    let rows = scan(&t, Scan::new().start_row("r2a").stop_row("r5a")).await;
    assert_eq!(keys(&rows), vec!["r3", "r4", "r5"]);
    let rows = scan(&t, Scan::new().start_row("r8")).await;
    assert_eq!(keys(&rows), vec!["r8", "r9"]);
    let rows = scan(&t, Scan::new().stop_row("r2")).await;
    assert_eq!(keys(&rows), vec!["r0", "r1"]);
    let rows = scan(&t, Scan::new().start_row("r4").stop_row("r4")).await;
    assert!(rows.is_empty());
}

#[tokio::test]
async fn scan_with_a_prefix() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    put_rows(&t, &["a", "ab", "ab1", "ab2", "abz", "ac", "b"]).await;
    let rows = scan(&t, Scan::new().with_prefix("ab")).await;
    assert_eq!(keys(&rows), vec!["ab", "ab1", "ab2", "abz"]);
    let rows = scan(&t, Scan::new().with_prefix("zz")).await;
    assert!(rows.is_empty());
    // A prefix ending in 0xFF bytes.
    for row in [
        &[0x61, 0xFF][..],
        &[0x61, 0xFF, 0x00],
        &[0x61, 0xFF, 0xFF],
        &[0x62],
    ] {
        t.put(Put::new(row).add_column("f", "q", "x"))
            .await
            .unwrap();
    }
    let rows = scan(&t, Scan::new().with_prefix([0x61, 0xFF])).await;
    let got: Vec<Vec<u8>> = rows.iter().map(|r| r.row.to_vec()).collect();
    assert_eq!(
        got,
        vec![
            vec![0x61, 0xFF],
            vec![0x61, 0xFF, 0x00],
            vec![0x61, 0xFF, 0xFF]
        ]
    );
}

#[tokio::test]
async fn reverse_scan_starts_at_the_high_row() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    put_rows(&t, &TEN).await;
    let rows = scan(&t, Scan::new().reversed(true)).await;
    let mut want: Vec<&str> = TEN.to_vec();
    want.reverse();
    assert_eq!(keys(&rows), want);
    // HBase: a reverse scan's start row is the high one (inclusive), its stop row the low one
    // (exclusive).
    let rows = scan(
        &t,
        Scan::new().reversed(true).start_row("r7").stop_row("r3"),
    )
    .await;
    assert_eq!(keys(&rows), vec!["r7", "r6", "r5", "r4"]);
    let rows = scan(
        &t,
        Scan::new().reversed(true).start_row("r6a").stop_row("r3a"),
    )
    .await;
    assert_eq!(keys(&rows), vec!["r6", "r5", "r4"]);
    let rows = scan(&t, Scan::new().reversed(true).start_row("r2")).await;
    assert_eq!(keys(&rows), vec!["r2", "r1", "r0"]);
    let rows = scan(&t, Scan::new().reversed(true).stop_row("r7")).await;
    assert_eq!(keys(&rows), vec!["r9", "r8"]);
}

#[tokio::test]
async fn reverse_scan_with_a_prefix() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    put_rows(&t, &["a", "ab", "ab1", "ab2", "ac", "b"]).await;
    let rows = scan(&t, Scan::new().with_prefix("ab").reversed(true)).await;
    assert_eq!(keys(&rows), vec!["ab2", "ab1", "ab"]);
}

#[tokio::test]
async fn reverse_scan_returns_each_row_whole_and_newest_first() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(3), cf("g")]).await;
    for row in ["a", "b"] {
        put_versions(&t, row, "f", "x", &[1, 2]).await;
        put_versions(&t, row, "f", "y", &[1]).await;
        put_versions(&t, row, "g", "x", &[1]).await;
    }
    let rows = scan(&t, Scan::new().reversed(true).max_versions(3)).await;
    assert_eq!(keys(&rows), vec!["b", "a"]);
    for r in &rows {
        assert_eq!(
            cells(r),
            vec![
                c("f", "x", 2, "v2"),
                c("f", "x", 1, "v1"),
                c("f", "y", 1, "v1"),
                c("g", "x", 1, "v1"),
            ]
        );
    }
}

#[tokio::test]
async fn scan_limited_to_families_and_columns() {
    let (_d, _c, t) = setup(vec![cf("f"), cf("g")]).await;
    for row in ["r1", "r2"] {
        t.put(
            Put::new(row)
                .timestamp(1)
                .add_column("f", "a", "fa")
                .add_column("f", "b", "fb")
                .add_column("g", "a", "ga"),
        )
        .await
        .unwrap();
    }
    // A row with nothing in the selected columns is not returned.
    t.put(Put::new("r3").timestamp(1).add_column("g", "b", "gb"))
        .await
        .unwrap();
    let rows = scan(&t, Scan::new().add_family("f")).await;
    assert_eq!(keys(&rows), vec!["r1", "r2"]);
    assert_eq!(
        cells(&rows[0]),
        vec![c("f", "a", 1, "fa"), c("f", "b", 1, "fb")]
    );
    let rows = scan(&t, Scan::new().add_column("f", "b").add_column("g", "a")).await;
    assert_eq!(keys(&rows), vec!["r1", "r2"]);
    assert_eq!(
        cells(&rows[1]),
        vec![c("f", "b", 1, "fb"), c("g", "a", 1, "ga")]
    );
    let rows = scan(&t, Scan::new().add_family("g")).await;
    assert_eq!(keys(&rows), vec!["r1", "r2", "r3"]);
}

#[tokio::test]
async fn scan_time_range_and_max_versions() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(10)]).await;
    for row in ["a", "b"] {
        put_versions(&t, row, "f", "q", &[10, 20, 30, 40]).await;
    }
    put_versions(&t, "c", "f", "q", &[5]).await;
    let rows = scan(
        &t,
        Scan::new()
            .time_range(TimeRange::new(20, 40).unwrap())
            .max_versions(10),
    )
    .await;
    assert_eq!(keys(&rows), vec!["a", "b"]);
    for r in &rows {
        assert_eq!(versions(r, "f", "q"), vec![v(30, "v30"), v(20, "v20")]);
    }
    let rows = scan(&t, Scan::new().max_versions(3)).await;
    assert_eq!(keys(&rows), vec!["a", "b", "c"]);
    assert_eq!(
        versions(&rows[0], "f", "q"),
        vec![v(40, "v40"), v(30, "v30"), v(20, "v20")]
    );
    // Default: one version.
    let rows = scan(&t, Scan::new()).await;
    assert_eq!(versions(&rows[1], "f", "q"), vec![v(40, "v40")]);
}

#[tokio::test]
async fn scan_limit_caps_the_number_of_rows() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    put_rows(&t, &TEN).await;
    let rows = scan(&t, Scan::new().limit(3)).await;
    assert_eq!(keys(&rows), vec!["r0", "r1", "r2"]);
    let rows = scan(&t, Scan::new().start_row("r5").limit(2)).await;
    assert_eq!(keys(&rows), vec!["r5", "r6"]);
    let rows = scan(&t, Scan::new().reversed(true).limit(2)).await;
    assert_eq!(keys(&rows), vec!["r9", "r8"]);
    let rows = scan(&t, Scan::new().limit(100)).await;
    assert_eq!(rows.len(), 10);
}

#[tokio::test]
async fn scan_batch_splits_a_wide_row_into_several_results() {
    let (_d, _c, t) = setup(vec![cf("f"), cf("g")]).await;
    t.put(
        Put::new("narrow")
            .timestamp(1)
            .add_column("f", "a", "1")
            .add_column("f", "b", "2"),
    )
    .await
    .unwrap();
    t.put(
        Put::new("wide")
            .timestamp(1)
            .add_column("f", "a", "1")
            .add_column("f", "b", "2")
            .add_column("f", "c", "3")
            .add_column("g", "a", "4")
            .add_column("g", "b", "5"),
    )
    .await
    .unwrap();
    let rows = scan(&t, Scan::new().batch(2)).await;
    assert_eq!(keys(&rows), vec!["narrow", "wide", "wide", "wide"]);
    assert_eq!(
        rows.iter().map(|r| r.cells.len()).collect::<Vec<_>>(),
        vec![2, 2, 2, 1]
    );
    // The parts, concatenated, are the row in order.
    let wide: Vec<_> = rows[1..].iter().flat_map(cells).collect();
    assert_eq!(
        wide,
        vec![
            c("f", "a", 1, "1"),
            c("f", "b", 1, "2"),
            c("f", "c", 1, "3"),
            c("g", "a", 1, "4"),
            c("g", "b", 1, "5"),
        ]
    );
    // A reverse scan splits the same way.
    let rows = scan(&t, Scan::new().batch(2).reversed(true)).await;
    assert_eq!(keys(&rows), vec!["wide", "wide", "wide", "narrow"]);
    let err = match t.scan(Scan::new().batch(0)) {
        Err(e) => e,
        Ok(st) => st.try_collect::<Vec<_>>().await.unwrap_err(),
    };
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
}

#[tokio::test]
async fn scans_cross_region_boundaries_in_order_both_ways() {
    let split = PreSplit::Keys(vec![b"c".to_vec(), b"f".to_vec(), b"m".to_vec()]);
    let (_d, conn, t) = setup_split(vec![cf("f")], split).await;
    let all = ["a", "b", "c", "d", "f", "g", "l", "m", "n", "z"];
    put_rows(&t, &all).await;
    // Every region got some rows.
    let w: Vec<u64> = conn
        .admin()
        .regions(&tn())
        .await
        .unwrap()
        .iter()
        .map(|r| r.write_requests)
        .collect();
    assert_eq!(w, vec![2, 2, 3, 3]);

    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), all);
    let rows = scan(&t, Scan::new().reversed(true)).await;
    let mut rev = all.to_vec();
    rev.reverse();
    assert_eq!(keys(&rows), rev);

    let rows = scan(&t, Scan::new().start_row("b").stop_row("n")).await;
    assert_eq!(keys(&rows), vec!["b", "c", "d", "f", "g", "l", "m"]);
    let rows = scan(&t, Scan::new().reversed(true).start_row("n").stop_row("b")).await;
    assert_eq!(keys(&rows), vec!["n", "m", "l", "g", "f", "d", "c"]);
    // Bounds exactly on region boundaries.
    let rows = scan(&t, Scan::new().start_row("c").stop_row("m")).await;
    assert_eq!(keys(&rows), vec!["c", "d", "f", "g", "l"]);
    let rows = scan(&t, Scan::new().reversed(true).start_row("m").stop_row("c")).await;
    assert_eq!(keys(&rows), vec!["m", "l", "g", "f", "d"]);
    // A limit that ends in a later region.
    let rows = scan(&t, Scan::new().start_row("b").limit(4)).await;
    assert_eq!(keys(&rows), vec!["b", "c", "d", "f"]);
    let rows = scan(&t, Scan::new().reversed(true).start_row("g").limit(4)).await;
    assert_eq!(keys(&rows), vec!["g", "f", "d", "c"]);
}

#[tokio::test]
async fn scan_skips_deleted_rows_and_empty_regions() {
    let split = PreSplit::Keys(vec![b"c".to_vec(), b"f".to_vec(), b"m".to_vec()]);
    let (_d, _c, t) = setup_split(vec![cf("f")], split).await;
    put_rows(&t, &["a", "d", "e", "n"]).await;
    t.delete(Delete::new("d")).await.unwrap();
    t.delete(Delete::new("e")).await.unwrap();
    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), vec!["a", "n"]);
    let rows = scan(&t, Scan::new().reversed(true)).await;
    assert_eq!(keys(&rows), vec!["n", "a"]);
}

#[tokio::test]
async fn reverse_scan_applies_delete_markers_from_memstore_and_files() {
    let (_d, conn, t) = setup(vec![cf("f").max_versions(5), cf("g")]).await;
    for row in ["a", "b", "c", "d"] {
        put_versions(&t, row, "f", "q", &[1, 2, 3]).await;
        put_versions(&t, row, "g", "q", &[1]).await;
    }
    conn.admin().flush(&tn()).await.unwrap();
    t.delete(Delete::new("b")).await.unwrap();
    t.delete(Delete::new("c").add_column_ts("f", "q", 3))
        .await
        .unwrap();
    t.delete(Delete::new("d").add_family("g")).await.unwrap();
    put_versions(&t, "a", "f", "q", &[4]).await;
    for round in 0..2 {
        let fwd = scan(&t, Scan::new().max_versions(5)).await;
        let mut rev = scan(&t, Scan::new().max_versions(5).reversed(true)).await;
        assert_eq!(keys(&rev), vec!["d", "c", "a"]);
        rev.reverse();
        assert_eq!(
            fwd, rev,
            "a reverse scan returns the forward scan's rows, reversed"
        );
        assert_eq!(
            versions(&fwd[0], "f", "q"),
            vec![v(4, "v4"), v(3, "v3"), v(2, "v2"), v(1, "v1")]
        );
        assert_eq!(versions(&fwd[1], "f", "q"), vec![v(2, "v2"), v(1, "v1")]);
        assert_eq!(cells(&fwd[2]).len(), 3);
        assert!(versions(&fwd[2], "g", "q").is_empty());
        if round == 0 {
            conn.admin().flush(&tn()).await.unwrap();
        }
    }
}

#[tokio::test]
async fn long_scans_return_every_row_once_in_order() {
    let split = PreSplit::Keys(vec![b"0300".to_vec(), b"0700".to_vec()]);
    let (_d, conn, t) = setup_split(vec![cf("f")], split).await;
    let all: Vec<String> = (0..1000).map(|i| format!("{i:04}")).collect();
    for (i, row) in all.iter().enumerate() {
        t.put(Put::new(row).add_column("f", "q", row))
            .await
            .unwrap();
        if i == 500 {
            conn.admin().flush(&tn()).await.unwrap();
        }
    }
    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), all);
    let rows = scan(&t, Scan::new().reversed(true)).await;
    let mut rev = all.clone();
    rev.reverse();
    assert_eq!(keys(&rows), rev);
    let rows = scan(&t, Scan::new().start_row("0250").limit(600)).await;
    assert_eq!(keys(&rows), all[250..850].to_vec());
    let rows = scan(&t, Scan::new().reversed(true).start_row("0849").limit(600)).await;
    assert_eq!(keys(&rows), rev[150..750].to_vec());
}

// ---------------------------------------------------------------------------------------
// Exists, increment, append
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn exists_reports_whether_a_get_would_find_cells() {
    let (_d, _c, t) = setup(vec![cf("f"), cf("g")]).await;
    t.put(Put::new("r").add_column_ts("f", "q", 10, "v"))
        .await
        .unwrap();
    assert!(t.exists(Get::new("r")).await.unwrap());
    assert!(t.exists(Get::new("r").add_column("f", "q")).await.unwrap());
    assert!(!t.exists(Get::new("r").add_column("f", "p")).await.unwrap());
    assert!(!t.exists(Get::new("r").add_family("g")).await.unwrap());
    assert!(!t.exists(Get::new("r").timestamp(11)).await.unwrap());
    assert!(!t.exists(Get::new("nope")).await.unwrap());
}

#[tokio::test]
async fn increment_starts_absent_columns_at_zero_and_returns_new_values() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let r = t
        .increment(Increment::new("r").add_column("f", "c", 5))
        .await
        .unwrap();
    assert_eq!(r.value("f", "c").unwrap().as_ref(), counter(5));
    let r = t
        .increment(Increment::new("r").add_column("f", "c", 10))
        .await
        .unwrap();
    assert_eq!(r.value("f", "c").unwrap().as_ref(), counter(15));
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(g.value("f", "c").unwrap().as_ref(), counter(15));
    assert_eq!(g.cells.len(), 1);
}

#[tokio::test]
async fn increment_by_negative_amounts_and_several_columns() {
    let (_d, _c, t) = setup(vec![cf("f"), cf("g")]).await;
    t.put(Put::new("r").add_column("f", "a", counter(100)))
        .await
        .unwrap();
    let r = t
        .increment(
            Increment::new("r")
                .add_column("g", "b", -3)
                .add_column("f", "a", -150),
        )
        .await
        .unwrap();
    assert_eq!(r.value("f", "a").unwrap().as_ref(), counter(-50));
    assert_eq!(r.value("g", "b").unwrap().as_ref(), counter(-3));
    assert_eq!(r.cells.len(), 2);
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(g.value("f", "a").unwrap().as_ref(), counter(-50));
    assert_eq!(g.value("g", "b").unwrap().as_ref(), counter(-3));
    // Incrementing by zero reads the current value.
    let r = t
        .increment(Increment::new("r").add_column("f", "a", 0))
        .await
        .unwrap();
    assert_eq!(r.value("f", "a").unwrap().as_ref(), counter(-50));
}

#[tokio::test]
async fn increment_of_a_non_counter_cell_fails_and_writes_nothing() {
    let (_d, _c, t) = setup(vec![cf("f").max_versions(5)]).await;
    t.put(Put::new("r").add_column_ts("f", "text", 1, "abc"))
        .await
        .unwrap();
    let err = t
        .increment(
            Increment::new("r")
                .add_column("f", "fresh", 1)
                .add_column("f", "text", 1),
        )
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::NotACounter { len: 3, .. }), "{err:?}");
    let g = t.get(Get::new("r").max_versions(5)).await.unwrap();
    assert_eq!(cells(&g), vec![c("f", "text", 1, "abc")]);
}

#[tokio::test]
async fn append_concatenates_and_returns_the_new_value() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let r = t
        .append(Append::new("r").add_column("f", "q", "ab"))
        .await
        .unwrap();
    assert_eq!(value(&r, "f", "q").as_deref(), Some("ab"));
    let r = t
        .append(
            Append::new("r")
                .add_column("f", "q", "cd")
                .add_column("f", "p", "x"),
        )
        .await
        .unwrap();
    assert_eq!(value(&r, "f", "q").as_deref(), Some("abcd"));
    assert_eq!(value(&r, "f", "p").as_deref(), Some("x"));
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(value(&g, "f", "q").as_deref(), Some("abcd"));
    assert_eq!(value(&g, "f", "p").as_deref(), Some("x"));
}

#[tokio::test]
async fn increment_and_append_after_an_explicit_future_timestamp_stay_newest() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let future = now_ms() + 3_600_000;
    t.put(Put::new("r").add_column_ts("f", "c", future, counter(1)))
        .await
        .unwrap();
    t.put(Put::new("r").add_column_ts("f", "s", future, "x"))
        .await
        .unwrap();
    t.increment(Increment::new("r").add_column("f", "c", 1))
        .await
        .unwrap();
    t.append(Append::new("r").add_column("f", "s", "y"))
        .await
        .unwrap();
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(g.value("f", "c").unwrap().as_ref(), counter(2));
    assert_eq!(value(&g, "f", "s").as_deref(), Some("xy"));
}

// ---------------------------------------------------------------------------------------
// Check-and-mutate, row mutations, batches
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn check_and_mutate_compares_stored_op_given() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    use CompareOp::*;
    // (op, given, passes) with "5" stored: the stored value is the left operand.
    let cases = [
        (Less, "4", false),
        (Less, "5", false),
        (Less, "6", true),
        (LessOrEqual, "4", false),
        (LessOrEqual, "5", true),
        (LessOrEqual, "6", true),
        (Equal, "4", false),
        (Equal, "5", true),
        (Equal, "6", false),
        (NotEqual, "4", true),
        (NotEqual, "5", false),
        (NotEqual, "6", true),
        (GreaterOrEqual, "4", true),
        (GreaterOrEqual, "5", true),
        (GreaterOrEqual, "6", false),
        (Greater, "4", true),
        (Greater, "5", false),
        (Greater, "6", false),
    ];
    for (i, (op, given, passes)) in cases.into_iter().enumerate() {
        let row = format!("r{i}");
        t.put(Put::new(&row).add_column("f", "q", "5"))
            .await
            .unwrap();
        let ok = t
            .check_and_mutate(
                CheckAndMutate::new(&row, "f", "q")
                    .if_value(op, given)
                    .then_put(Put::new(&row).add_column("f", "mark", "set")),
            )
            .await
            .unwrap();
        assert_eq!(ok, passes, "stored 5 {op:?} {given}");
        let g = t.get(Get::new(&row)).await.unwrap();
        assert_eq!(
            value(&g, "f", "mark").is_some(),
            passes,
            "stored 5 {op:?} {given}"
        );
    }
}

#[tokio::test]
async fn check_and_mutate_compares_bytes_unsigned_lexicographically() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.put(Put::new("r").add_column("f", "q", [0x80u8]))
        .await
        .unwrap();
    // 0x80 > 0x7F as unsigned bytes; "ab" < "b" and "a" < "ab" lexicographically.
    let ok = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "q")
                .if_value(CompareOp::Greater, [0x7Fu8])
                .then_put(Put::new("r").add_column("f", "q", "ab")),
        )
        .await
        .unwrap();
    assert!(ok);
    let ok = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "q")
                .if_value(CompareOp::Less, "b")
                .then_put(Put::new("r").add_column("f", "q", "a")),
        )
        .await
        .unwrap();
    assert!(ok);
    let ok = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "q")
                .if_value(CompareOp::GreaterOrEqual, "ab")
                .then_put(Put::new("r").add_column("f", "q", "never")),
        )
        .await
        .unwrap();
    assert!(!ok);
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(value(&g, "f", "q").as_deref(), Some("a"));
}

#[tokio::test]
async fn check_and_mutate_if_absent() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let cam = |ts: u64| {
        CheckAndMutate::new("r", "f", "lock")
            .if_absent()
            .then_put(Put::new("r").add_column_ts("f", "lock", ts, "owner"))
    };
    assert!(t.check_and_mutate(cam(10)).await.unwrap());
    assert!(!t.check_and_mutate(cam(10)).await.unwrap());
    // A value condition on an absent column never passes, whatever the operator.
    for op in [CompareOp::NotEqual, CompareOp::Less, CompareOp::Greater] {
        let ok = t
            .check_and_mutate(
                CheckAndMutate::new("r", "f", "missing")
                    .if_value(op, "x")
                    .then_put(Put::new("r").add_column("f", "bad", "x")),
            )
            .await
            .unwrap();
        assert!(!ok, "{op:?}");
    }
    // After the column is deleted it is absent again.
    t.delete(Delete::new("r").add_columns_ts("f", "lock", 10))
        .await
        .unwrap();
    assert!(t.check_and_mutate(cam(11)).await.unwrap());
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(cells(&g).len(), 1);
    assert_eq!(value(&g, "f", "lock").as_deref(), Some("owner"));
}

#[tokio::test]
async fn check_and_mutate_with_a_delete() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.put(
        Put::new("r")
            .add_column("f", "state", "done")
            .add_column("f", "data", "x"),
    )
    .await
    .unwrap();
    let ok = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "state")
                .if_value(CompareOp::Equal, "pending")
                .then_delete(Delete::new("r").add_columns("f", "data")),
        )
        .await
        .unwrap();
    assert!(!ok);
    assert!(t
        .exists(Get::new("r").add_column("f", "data"))
        .await
        .unwrap());
    let ok = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "state")
                .if_value(CompareOp::Equal, "done")
                .then_delete(Delete::new("r").add_columns("f", "data")),
        )
        .await
        .unwrap();
    assert!(ok);
    assert!(!t
        .exists(Get::new("r").add_column("f", "data"))
        .await
        .unwrap());
    assert!(t
        .exists(Get::new("r").add_column("f", "state"))
        .await
        .unwrap());
}

#[tokio::test]
async fn check_and_mutate_with_row_mutations() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.put(
        Put::new("r")
            .add_column("f", "v", "1")
            .add_column("f", "old", "x"),
    )
    .await
    .unwrap();
    let rm = RowMutations::new("r")
        .add(Put::new("r").add_column("f", "v", "2"))
        .add(Delete::new("r").add_columns("f", "old"));
    let ok = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "v")
                .if_value(CompareOp::Equal, "1")
                .then_mutate(rm.clone()),
        )
        .await
        .unwrap();
    assert!(ok);
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(value(&g, "f", "v").as_deref(), Some("2"));
    assert_eq!(value(&g, "f", "old"), None);
    // The same mutation no longer passes.
    let ok = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "v")
                .if_value(CompareOp::Equal, "1")
                .then_mutate(rm),
        )
        .await
        .unwrap();
    assert!(!ok);
}

#[tokio::test]
async fn check_and_mutate_refuses_another_row_or_no_action() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let err = t
        .check_and_mutate(
            CheckAndMutate::new("r", "f", "q")
                .if_absent()
                .then_put(Put::new("other").add_column("f", "q", "v")),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = t
        .check_and_mutate(CheckAndMutate::new("r", "f", "q").if_absent())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = t
        .check_and_mutate(
            CheckAndMutate::new("r", "nope", "q")
                .if_absent()
                .then_put(Put::new("r").add_column("f", "q", "v")),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FamilyNotFound { .. }), "{err:?}");
    assert!(t.get(Get::new("r")).await.unwrap().is_empty());
    assert!(t.get(Get::new("other")).await.unwrap().is_empty());
}

#[tokio::test]
async fn mutate_row_applies_puts_and_deletes_together() {
    let (_d, _c, t) = setup(vec![cf("f"), cf("g")]).await;
    t.put(
        Put::new("r")
            .add_column("f", "a", "1")
            .add_column("g", "b", "2"),
    )
    .await
    .unwrap();
    t.mutate_row(
        RowMutations::new("r")
            .add(Delete::new("r").add_family("g"))
            .add(Put::new("r").add_column("f", "c", "3")),
    )
    .await
    .unwrap();
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(value(&g, "f", "a").as_deref(), Some("1"));
    assert_eq!(value(&g, "f", "c").as_deref(), Some("3"));
    assert_eq!(value(&g, "g", "b"), None);
}

#[tokio::test]
async fn mutate_row_with_a_bad_mutation_applies_nothing() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.put(Put::new("r").add_column("f", "a", "1"))
        .await
        .unwrap();
    let err = t
        .mutate_row(
            RowMutations::new("r")
                .add(Delete::new("r").add_columns("f", "a"))
                .add(Put::new("r").add_column("f", "b", "2"))
                .add(Put::new("r").add_column("nope", "c", "3")),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FamilyNotFound { .. }), "{err:?}");
    let err = t
        .mutate_row(
            RowMutations::new("r")
                .add(Delete::new("r").add_columns("f", "a"))
                .add(Put::new("other").add_column("f", "b", "2")),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = t.mutate_row(RowMutations::new("r")).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(cells(&g).len(), 1);
    assert_eq!(value(&g, "f", "a").as_deref(), Some("1"));
    assert!(t.get(Get::new("other")).await.unwrap().is_empty());
}

#[tokio::test]
async fn batch_of_mixed_operations_returns_one_result_per_operation() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.put(
        Put::new("existing")
            .add_column_ts("f", "q", 1, "old")
            .add_column("f", "gone", "x"),
    )
    .await
    .unwrap();
    let ops = vec![
        BatchOp::Put(Put::new("p").add_column("f", "q", "put")),
        BatchOp::Get(Get::new("existing").add_column("f", "q")),
        BatchOp::Delete(Delete::new("existing").add_columns("f", "gone")),
        BatchOp::Increment(Increment::new("ctr").add_column("f", "n", 7)),
        BatchOp::Append(Append::new("app").add_column("f", "s", "xy")),
        BatchOp::RowMutations(
            RowMutations::new("rm").add(Put::new("rm").add_column("f", "q", "rm")),
        ),
        BatchOp::CheckAndMutate(
            CheckAndMutate::new("cam", "f", "q")
                .if_absent()
                .then_put(Put::new("cam").add_column("f", "q", "cam")),
        ),
        BatchOp::CheckAndMutate(
            CheckAndMutate::new("existing", "f", "q")
                .if_value(CompareOp::Equal, "nope")
                .then_put(Put::new("existing").add_column("f", "q", "never")),
        ),
    ];
    let res = t.batch(ops).await.unwrap();
    assert_eq!(res.len(), 8);
    assert!(matches!(res[0], Ok(BatchOutcome::Done)), "{:?}", res[0]);
    match &res[1] {
        Ok(BatchOutcome::Row(r)) => assert_eq!(cells(r), vec![c("f", "q", 1, "old")]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(res[2], Ok(BatchOutcome::Done)), "{:?}", res[2]);
    match &res[3] {
        Ok(BatchOutcome::Row(r)) => assert_eq!(r.value("f", "n").unwrap().as_ref(), counter(7)),
        other => panic!("{other:?}"),
    }
    match &res[4] {
        Ok(BatchOutcome::Row(r)) => assert_eq!(value(r, "f", "s").as_deref(), Some("xy")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(res[5], Ok(BatchOutcome::Done)), "{:?}", res[5]);
    assert!(
        matches!(res[6], Ok(BatchOutcome::Checked(true))),
        "{:?}",
        res[6]
    );
    assert!(
        matches!(res[7], Ok(BatchOutcome::Checked(false))),
        "{:?}",
        res[7]
    );

    let get = |row: &'static str| t.get(Get::new(row));
    assert_eq!(
        value(&get("p").await.unwrap(), "f", "q").as_deref(),
        Some("put")
    );
    let e = get("existing").await.unwrap();
    assert_eq!(cells(&e), vec![c("f", "q", 1, "old")]);
    assert_eq!(
        value(&get("rm").await.unwrap(), "f", "q").as_deref(),
        Some("rm")
    );
    assert_eq!(
        value(&get("cam").await.unwrap(), "f", "q").as_deref(),
        Some("cam")
    );
    assert_eq!(
        value(&get("app").await.unwrap(), "f", "s").as_deref(),
        Some("xy")
    );
}

#[tokio::test]
async fn a_bad_operation_in_a_batch_fails_alone() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.put(Put::new("d").add_column("f", "q", "x"))
        .await
        .unwrap();
    let ops = vec![
        BatchOp::Put(Put::new("a").add_column("f", "q", "1")),
        BatchOp::Put(Put::new("b").add_column("nope", "q", "2")),
        BatchOp::Delete(Delete::new("d")),
        BatchOp::Put(Put::new("").add_column("f", "q", "3")),
        BatchOp::Increment(Increment::new("e").add_column("nope", "n", 1)),
        BatchOp::Increment(Increment::new("e").add_column("f", "n", 1)),
        BatchOp::Delete(Delete::new("a").add_family("nope")),
        BatchOp::Get(Get::new("a").add_family("nope")),
        BatchOp::Put(Put::new("c").add_column("f", "q", "4")),
    ];
    let res = t.batch(ops).await.unwrap();
    assert_eq!(res.len(), 9);
    assert!(matches!(res[0], Ok(BatchOutcome::Done)), "{:?}", res[0]);
    assert!(
        matches!(res[1], Err(Error::FamilyNotFound { .. })),
        "{:?}",
        res[1]
    );
    assert!(matches!(res[2], Ok(BatchOutcome::Done)), "{:?}", res[2]);
    assert!(matches!(res[3], Err(Error::InvalidRow(_))), "{:?}", res[3]);
    assert!(
        matches!(res[4], Err(Error::FamilyNotFound { .. })),
        "{:?}",
        res[4]
    );
    assert!(matches!(res[5], Ok(BatchOutcome::Row(_))), "{:?}", res[5]);
    assert!(
        matches!(res[6], Err(Error::FamilyNotFound { .. })),
        "{:?}",
        res[6]
    );
    assert!(
        matches!(res[7], Err(Error::FamilyNotFound { .. })),
        "{:?}",
        res[7]
    );
    assert!(matches!(res[8], Ok(BatchOutcome::Done)), "{:?}", res[8]);

    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), vec!["a", "c", "e"]);
    assert_eq!(
        rows[2].value("f", "n").unwrap().as_ref(),
        counter(1),
        "the failed increment wrote nothing"
    );
}

// ---------------------------------------------------------------------------------------
// Argument errors
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn empty_and_oversized_row_keys_are_invalid() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let long = vec![b'x'; MAX_ROW_LENGTH + 1];
    assert_eq!(MAX_ROW_LENGTH, 32_767);
    for row in [Vec::new(), long] {
        let err = t
            .put(Put::new(&row).add_column("f", "q", "v"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
        let err = t.get(Get::new(&row)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
        let err = t.delete(Delete::new(&row)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
        let err = t
            .increment(Increment::new(&row).add_column("f", "c", 1))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
        let err = t
            .append(Append::new(&row).add_column("f", "c", "x"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
        let err = t
            .check_and_mutate(
                CheckAndMutate::new(&row, "f", "q")
                    .if_absent()
                    .then_put(Put::new(&row).add_column("f", "q", "v")),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
    }
    // The longest legal row works.
    let max = vec![b'y'; MAX_ROW_LENGTH];
    t.put(Put::new(&max).add_column("f", "q", "v"))
        .await
        .unwrap();
    let r = t.get(Get::new(&max)).await.unwrap();
    assert_eq!(r.row.len(), MAX_ROW_LENGTH);
    assert_eq!(keys(&scan(&t, Scan::new()).await).len(), 1);
}

#[tokio::test]
async fn values_over_the_configured_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open_with(Config::new(dir.path()).max_value_size(1024))
        .await
        .unwrap();
    create(&conn, vec![cf("f")], PreSplit::None).await;
    let t = conn.table("t").unwrap();
    t.put(Put::new("r").add_column("f", "max", vec![1u8; 1024]))
        .await
        .unwrap();
    let err = t
        .put(
            Put::new("r")
                .add_column("f", "ok", "small")
                .add_column("f", "big", vec![1u8; 1025]),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ValueTooLarge {
                size: 1025,
                limit: 1024
            }
        ),
        "{err:?}"
    );
    // The whole put was refused, not just the big cell.
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(g.cells.len(), 1);
    assert_eq!(g.value("f", "max").unwrap().len(), 1024);
    // An append whose result would be too large is refused too.
    let err = t
        .append(Append::new("r").add_column("f", "max", "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ValueTooLarge { .. }), "{err:?}");
    assert_eq!(
        t.get(Get::new("r"))
            .await
            .unwrap()
            .value("f", "max")
            .unwrap()
            .len(),
        1024
    );
}

#[tokio::test]
async fn unknown_families_are_family_not_found() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();
    let fnf = |e: &Error| matches!(e, Error::FamilyNotFound { family, .. } if family == "nope");
    let err = t
        .put(
            Put::new("r")
                .add_column("f", "a", "1")
                .add_column("nope", "q", "v"),
        )
        .await
        .unwrap_err();
    assert!(fnf(&err), "{err:?}");
    let err = t.get(Get::new("r").add_family("nope")).await.unwrap_err();
    assert!(fnf(&err), "{err:?}");
    let err = t
        .get(Get::new("r").add_column("nope", "q"))
        .await
        .unwrap_err();
    assert!(fnf(&err), "{err:?}");
    let err = match t.scan(Scan::new().add_family("nope")) {
        Err(e) => e,
        Ok(st) => st.try_collect::<Vec<_>>().await.unwrap_err(),
    };
    assert!(fnf(&err), "{err:?}");
    let err = t
        .delete(Delete::new("r").add_family("nope"))
        .await
        .unwrap_err();
    assert!(fnf(&err), "{err:?}");
    let err = t
        .increment(Increment::new("r").add_column("nope", "c", 1))
        .await
        .unwrap_err();
    assert!(fnf(&err), "{err:?}");
    let err = t
        .append(Append::new("r").add_column("nope", "c", "x"))
        .await
        .unwrap_err();
    assert!(fnf(&err), "{err:?}");
    // Nothing of the failed put was written.
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(cells(&g).len(), 1);
}

#[tokio::test]
async fn zero_max_versions_and_empty_time_ranges_are_bad_arguments() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let err = t.get(Get::new("r").max_versions(0)).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = match t.scan(Scan::new().max_versions(0)) {
        Err(e) => e,
        Ok(st) => st.try_collect::<Vec<_>>().await.unwrap_err(),
    };
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    for (min, max) in [(5, 5), (6, 5)] {
        let err = TimeRange::new(min, max).unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    }
    assert_eq!(
        TimeRange::new(5, 6).unwrap(),
        TimeRange::at(5),
        "[5, 6) is exactly timestamp 5"
    );
}

#[tokio::test]
async fn a_put_without_columns_is_a_bad_argument() {
    let (_d, _c, t) = setup(vec![cf("f")]).await;
    let err = t.put(Put::new("r")).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = t.increment(Increment::new("r")).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
}

#[tokio::test]
async fn operations_on_a_missing_table_are_table_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let t = conn.table("missing").unwrap();
    let err = t
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    let err = t.get(Get::new("r")).await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    let err = t.scan(Scan::new()).err().unwrap();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
}

// ---------------------------------------------------------------------------------------
// MemStore + store files, flush and reopen
// ---------------------------------------------------------------------------------------

/// Writes rows 00..20 (v1), flushes, then overwrites every third row (v2), deletes every
/// fifth row and one column of row 01, and flushes nothing more.
async fn write_mixed(conn: &Connection, t: &Table) {
    for i in 0..20 {
        let row = format!("{i:02}");
        t.put(
            Put::new(&row)
                .add_column_ts("f", "a", 10, format!("{row}-v1"))
                .add_column_ts("f", "b", 10, "b"),
        )
        .await
        .unwrap();
    }
    conn.admin().flush(&tn()).await.unwrap();
    for i in (0..20).step_by(3) {
        let row = format!("{i:02}");
        t.put(Put::new(&row).add_column_ts("f", "a", 20, format!("{row}-v2")))
            .await
            .unwrap();
    }
    for i in (0..20).step_by(5) {
        t.delete(Delete::new(format!("{i:02}"))).await.unwrap();
    }
    t.delete(Delete::new("01").add_columns("f", "b"))
        .await
        .unwrap();
}

async fn check_mixed(t: &Table) {
    let rows = scan(t, Scan::new().max_versions(5)).await;
    let want: Vec<String> = (0..20)
        .filter(|i| i % 5 != 0)
        .map(|i| format!("{i:02}"))
        .collect();
    assert_eq!(keys(&rows), want);
    for r in &rows {
        let row = s(&r.row);
        let i: u32 = row.parse().unwrap();
        let mut want_a = Vec::new();
        if (0..20).step_by(3).any(|k| k == i) {
            want_a.push(v(20, &format!("{row}-v2")));
        }
        want_a.push(v(10, &format!("{row}-v1")));
        assert_eq!(versions(r, "f", "a"), want_a, "row {row}");
        let want_b = if i == 1 { vec![] } else { vec![v(10, "b")] };
        assert_eq!(versions(r, "f", "b"), want_b, "row {row}");
        // A get sees what the scan sees.
        let g = t.get(Get::new(&row).max_versions(5)).await.unwrap();
        assert_eq!(&g, r);
    }
    for i in (0..20).step_by(5) {
        assert!(t.get(Get::new(format!("{i:02}"))).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn reads_merge_memstore_and_store_files() {
    let (_d, conn, t) = setup(vec![cf("f").max_versions(5)]).await;
    write_mixed(&conn, &t).await;
    let regions = conn.admin().regions(&tn()).await.unwrap();
    assert!(regions[0].store_files > 0 && regions[0].memstore_size > 0);
    check_mixed(&t).await;
    // And again once everything is in store files.
    conn.admin().flush(&tn()).await.unwrap();
    check_mixed(&t).await;
}

#[tokio::test]
async fn data_survives_flush_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = Connection::open(dir.path()).await.unwrap();
        create(&conn, vec![cf("f").max_versions(5)], PreSplit::None).await;
        let t = conn.table("t").unwrap();
        write_mixed(&conn, &t).await;
        check_mixed(&t).await;
        conn.close().await.unwrap();
    }
    {
        let conn = Connection::open(dir.path()).await.unwrap();
        let t = conn.table("t").unwrap();
        check_mixed(&t).await;
        // Delete markers from before the reopen still mask later puts with older timestamps.
        t.put(Put::new("00").add_column_ts("f", "a", 5, "masked"))
            .await
            .unwrap();
        assert!(t.get(Get::new("00")).await.unwrap().is_empty());
        conn.close().await.unwrap();
    }
    let conn = Connection::open(dir.path()).await.unwrap();
    check_mixed(&conn.table("t").unwrap()).await;
}

#[tokio::test]
async fn unflushed_writes_survive_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = Connection::open(dir.path()).await.unwrap();
        create(&conn, vec![cf("f")], PreSplit::None).await;
        let t = conn.table("t").unwrap();
        t.put(Put::new("r").add_column("f", "q", "v"))
            .await
            .unwrap();
        t.increment(Increment::new("r").add_column("f", "n", 3))
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
    let conn = Connection::open(dir.path()).await.unwrap();
    let t = conn.table("t").unwrap();
    let g = t.get(Get::new("r")).await.unwrap();
    assert_eq!(value(&g, "f", "q").as_deref(), Some("v"));
    assert_eq!(g.value("f", "n").unwrap().as_ref(), counter(3));
    let r = t
        .increment(Increment::new("r").add_column("f", "n", 1))
        .await
        .unwrap();
    assert_eq!(r.value("f", "n").unwrap().as_ref(), counter(4));
}
