//! One API, two backends (issue 48): the Table API's behaviour does not depend on what a
//! [`Connection`] talks to. Every check below is written once, as an async function generic
//! over `B: Backend`, and run twice with the same assertions: against the embedded engine
//! (`Connection::open` on a temporary directory, module `embedded`) and against a
//! three-server cluster (`basalt_cluster::RemoteBackend`, module `cluster`).
//!
//! What the checks prove on each backend: puts and gets (many columns, explicit timestamps,
//! versions, time ranges, family and column selection, missing rows, exists); the five
//! delete kinds; scans (full, bounds, prefix, reverse, limit, batch, columns, versions,
//! filters) on one region and across a table pre-split into four regions, with reverse
//! scans and limits that cross region boundaries; increments, appends, check-and-mutate
//! (both outcomes), row mutations and a batch of mixed operations with one result each;
//! typed errors (`TableNotFound`, `FamilyNotFound`, `InvalidRow`, `TableExists`,
//! `TableDisabled`, `NamespaceExists`, `SnapshotNotFound`), matched on [`basalt::Error`]'s
//! variants; admin (tables, descriptors, regions of a pre-split, families added to a live
//! table, enable and disable, namespaces); salted tables by logical key with scans merged in
//! logical order; table snapshots cloned into new tables; and a pinned read point
//! ([`Snapshot`]) that later writes do not reach.
//!
//! Every check creates its own tables under the unique name its caller gives it, so checks
//! can share one backend. Endpoint calls and index queries, which need coprocessors on the
//! servers, are checked the same way in `tests/one_api_coprocessors.rs`.

use basalt::client::{
    Append, Backend, BatchOp, BatchOutcome, CheckAndMutate, CompareOp, Delete, Get, Increment, Put,
    RowMutations, RowResult, Scan, Snapshot, Table, TimeRange,
};
use basalt::filter::ColumnValueCondition;
use basalt::{
    ColumnFamilyDescriptor, Comparator, Connection, Error, Filter, PreSplit, SaltFormat, SaltSpec,
    TableDescriptor, TableName,
};
use futures::TryStreamExt;

// ---------------------------------------------------------------------------------------
// The two instantiations
// ---------------------------------------------------------------------------------------

use crate::cluster_harness;

/// Runs every listed check once on each backend: `embedded::<check>` on an engine in a
/// temporary directory, `cluster::<check>` on a three-server cluster. Each test gets its
/// own backend and passes the check's name as the unique name of its tables.
macro_rules! on_both_backends {
    ($($check:ident),* $(,)?) => {
        /// The checks on the embedded engine (`Connection<Engine>`).
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let dir = tempfile::tempdir().unwrap();
                    let conn = basalt::Connection::open(dir.path()).await.unwrap();
                    super::$check(&conn, stringify!($check)).await;
                    conn.close().await.unwrap();
                }
            )*
        }

        /// The checks on a three-server cluster (`Connection<RemoteBackend>`).
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let cluster = super::cluster_harness::TestCluster::start(3).await;
                    let conn = cluster.connect().await;
                    super::$check(&conn, stringify!($check)).await;
                    conn.close().await.unwrap();
                }
            )*
        }
    };
}

on_both_backends!(
    puts_and_gets,
    versions_and_time_ranges,
    deletes_of_every_kind,
    scans_of_one_region,
    scans_across_four_regions,
    counters_appends_and_conditional_mutations,
    batch_of_mixed_operations,
    typed_errors,
    disabled_tables,
    admin_tables_regions_and_families,
    namespaces,
    salted_tables,
    table_snapshots,
    read_point_snapshots,
);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn cf(name: &str) -> ColumnFamilyDescriptor {
    ColumnFamilyDescriptor::new(name)
}

/// Creates table `name` with `families`, pre-split as `split`, and returns its handle.
async fn create<B: Backend>(
    conn: &Connection<B>,
    name: &str,
    families: Vec<ColumnFamilyDescriptor>,
    split: PreSplit,
) -> Table<B> {
    let desc = families.into_iter().fold(
        TableDescriptor::new(TableName::parse(name).unwrap()),
        |d, f| d.family(f),
    );
    conn.admin()
        .create_table_with_splits(desc, split)
        .await
        .unwrap();
    conn.table(name).unwrap()
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

fn c(f: &str, q: &str, ts: u64, v: &str) -> (String, String, u64, String) {
    (f.into(), q.into(), ts, v.into())
}

/// The versions of one column as (timestamp, value), newest first.
fn versions(r: &RowResult, f: &str, q: &str) -> Vec<(u64, String)> {
    r.versions(f, q)
        .iter()
        .map(|c| (c.timestamp, s(&c.value)))
        .collect()
}

fn v(ts: u64, val: &str) -> (u64, String) {
    (ts, val.into())
}

fn value(r: &RowResult, f: &str, q: &str) -> Option<String> {
    r.value(f, q).map(|v| s(v))
}

fn keys(rows: &[RowResult]) -> Vec<String> {
    rows.iter().map(|r| s(&r.row)).collect()
}

fn counter(n: i64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

async fn scan<B: Backend>(t: &Table<B>, sc: Scan) -> Vec<RowResult> {
    t.scan(sc).unwrap().try_collect().await.unwrap()
}

/// The error of a scan, whether the backend reports it when the scan opens (the engine) or
/// on its first poll (a remote scanner opens lazily).
async fn scan_error<B: Backend>(t: &Table<B>, sc: Scan) -> Error {
    match t.scan(sc) {
        Err(e) => e,
        Ok(rows) => rows.try_collect::<Vec<_>>().await.unwrap_err(),
    }
}

/// Puts `f:q = <row>` into each row.
async fn put_rows<B: Backend>(t: &Table<B>, rows: &[&str]) {
    for r in rows {
        t.put(Put::new(r).add_column("f", "q", r)).await.unwrap();
    }
}

/// Puts versions at the given timestamps into `row` / `f:q`, value `v<ts>`.
async fn put_versions<B: Backend>(t: &Table<B>, row: &str, f: &str, q: &str, tss: &[u64]) {
    for ts in tss {
        t.put(Put::new(row).add_column_ts(f, q, *ts, format!("v{ts}")))
            .await
            .unwrap();
    }
}

fn is_table_not_found(e: &Error, table: &str) -> bool {
    matches!(e, Error::TableNotFound(t) if t.contains(table))
}

fn is_family_not_found(e: &Error, family: &str) -> bool {
    matches!(e, Error::FamilyNotFound { family: f, .. } if f == family)
}

const TEN: [&str; 10] = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"];

// ---------------------------------------------------------------------------------------
// 1. Puts and gets
// ---------------------------------------------------------------------------------------

/// Many columns of several families come back sorted; explicit timestamps are kept (a
/// cell's own over the put's); gets select families and columns; a missing row is empty;
/// exists says whether a get would find cells.
async fn puts_and_gets<B: Backend>(conn: &Connection<B>, name: &str) {
    let t = create(conn, name, vec![cf("f"), cf("g"), cf("h")], PreSplit::None).await;
    t.put(
        Put::new("r")
            .timestamp(100)
            .add_column("h", "a", "ha")
            .add_column("g", "z", "gz")
            .add_column_ts("f", "b", 42, "fb")
            .add_column("f", "a", "fa")
            .add_column("g", "a", "ga"),
    )
    .await
    .unwrap();
    let r = t.get(Get::new("r")).await.unwrap();
    assert_eq!(s(&r.row), "r");
    assert_eq!(
        cells(&r),
        vec![
            c("f", "a", 100, "fa"),
            c("f", "b", 42, "fb"),
            c("g", "a", 100, "ga"),
            c("g", "z", 100, "gz"),
            c("h", "a", 100, "ha"),
        ]
    );
    // Binary keys, qualifiers and values, an empty value and timestamp 0 round-trip.
    t.put(
        Put::new([0u8, 255])
            .add_column("f", [0u8, 1], [255u8, 0])
            .add_column("f", "empty", "")
            .add_column_ts("g", "zero", 0, "at zero"),
    )
    .await
    .unwrap();
    let r = t.get(Get::new([0u8, 255])).await.unwrap();
    assert_eq!(r.row.as_ref(), &[0u8, 255]);
    assert_eq!(r.value("f", [0u8, 1]).unwrap().as_ref(), &[255u8, 0]);
    assert_eq!(r.value("f", "empty").unwrap().as_ref(), b"");
    assert_eq!(versions(&r, "g", "zero"), vec![v(0, "at zero")]);

    // Families and columns.
    let r = t.get(Get::new("r").add_family("g")).await.unwrap();
    assert_eq!(
        cells(&r),
        vec![c("g", "a", 100, "ga"), c("g", "z", 100, "gz")]
    );
    let r = t
        .get(Get::new("r").add_column("f", "b").add_column("h", "a"))
        .await
        .unwrap();
    assert_eq!(
        cells(&r),
        vec![c("f", "b", 42, "fb"), c("h", "a", 100, "ha")]
    );
    let r = t
        .get(Get::new("r").add_family("f").add_column("g", "z"))
        .await
        .unwrap();
    assert_eq!(
        cells(&r),
        vec![
            c("f", "a", 100, "fa"),
            c("f", "b", 42, "fb"),
            c("g", "z", 100, "gz")
        ]
    );
    // A missing column of a declared family is empty, not an error.
    assert!(t
        .get(Get::new("r").add_column("f", "zz"))
        .await
        .unwrap()
        .is_empty());

    // A missing row is empty.
    let r = t.get(Get::new("nope")).await.unwrap();
    assert!(r.is_empty());
    assert!(r.row.is_empty());
    assert_eq!(value(&r, "f", "a"), None);

    // Exists.
    assert!(t.exists(Get::new("r")).await.unwrap());
    assert!(t.exists(Get::new("r").add_column("f", "b")).await.unwrap());
    assert!(!t.exists(Get::new("r").add_column("f", "zz")).await.unwrap());
    assert!(!t.exists(Get::new("r").timestamp(41)).await.unwrap());
    assert!(t.exists(Get::new("r").timestamp(42)).await.unwrap());
    assert!(!t.exists(Get::new("nope")).await.unwrap());

    // A server-timestamped put is newer than the explicit ones and replaces them for reads.
    t.put(Put::new("r").add_column("f", "a", "now"))
        .await
        .unwrap();
    let r = t.get(Get::new("r").add_column("f", "a")).await.unwrap();
    assert_eq!(value(&r, "f", "a").as_deref(), Some("now"));
    assert!(r.cells[0].timestamp > 100);
}

/// Versions: the newest by timestamp wins whatever the write order; `max_versions` on a
/// get, capped by the family's; time ranges are `[min, max)`; an exact timestamp; the same
/// timestamp written twice keeps the later write.
async fn versions_and_time_ranges<B: Backend>(conn: &Connection<B>, name: &str) {
    let t = create(
        conn,
        name,
        vec![cf("f").max_versions(10), cf("g").max_versions(2)],
        PreSplit::None,
    )
    .await;
    put_versions(&t, "r", "f", "q", &[10, 40, 20, 30]).await;
    put_versions(&t, "r", "g", "q", &[1, 2, 3, 4]).await;

    let r = t.get(Get::new("r")).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(40, "v40")]);
    let r = t.get(Get::new("r").max_versions(3)).await.unwrap();
    assert_eq!(
        versions(&r, "f", "q"),
        vec![v(40, "v40"), v(30, "v30"), v(20, "v20")]
    );
    // The family keeps two versions, whatever the get asks.
    let r = t.get(Get::new("r").max_versions(10)).await.unwrap();
    assert_eq!(versions(&r, "f", "q").len(), 4);
    assert_eq!(versions(&r, "g", "q"), vec![v(4, "v4"), v(3, "v3")]);
    // ... also once flushed to store files.
    conn.admin().flush(name).await.unwrap();
    let r = t.get(Get::new("r").max_versions(10)).await.unwrap();
    assert_eq!(versions(&r, "g", "q"), vec![v(4, "v4"), v(3, "v3")]);

    // Time ranges: min inclusive, max exclusive.
    let range = TimeRange::new(20, 40).unwrap();
    let r = t
        .get(
            Get::new("r")
                .add_family("f")
                .time_range(range)
                .max_versions(10),
        )
        .await
        .unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(30, "v30"), v(20, "v20")]);
    let r = t
        .get(Get::new("r").add_family("f").time_range(range))
        .await
        .unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(30, "v30")]);
    let r = t
        .get(Get::new("r").time_range(TimeRange::new(41, 100).unwrap()))
        .await
        .unwrap();
    assert!(r.is_empty(), "{r:?}");
    // An exact timestamp.
    let r = t
        .get(Get::new("r").add_family("f").timestamp(20))
        .await
        .unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(20, "v20")]);
    assert!(t.get(Get::new("r").timestamp(25)).await.unwrap().is_empty());

    // Two writes at one timestamp: the later wins, in the MemStore and over a store file.
    t.put(Put::new("same").add_column_ts("f", "q", 7, "first"))
        .await
        .unwrap();
    t.put(Put::new("same").add_column_ts("f", "q", 7, "second"))
        .await
        .unwrap();
    let all = Get::new("same").max_versions(5);
    assert_eq!(
        versions(&t.get(all.clone()).await.unwrap(), "f", "q"),
        vec![v(7, "second")]
    );
    conn.admin().flush(name).await.unwrap();
    t.put(Put::new("same").add_column_ts("f", "q", 7, "third"))
        .await
        .unwrap();
    assert_eq!(
        versions(&t.get(all).await.unwrap(), "f", "q"),
        vec![v(7, "third")]
    );
}

// ---------------------------------------------------------------------------------------
// 2. Deletes
// ---------------------------------------------------------------------------------------

/// The five delete kinds (row, family, family version, column all versions, column latest
/// or exact version), with and without timestamps, each masking exactly what HBase's does.
async fn deletes_of_every_kind<B: Backend>(conn: &Connection<B>, name: &str) {
    let t = create(
        conn,
        name,
        vec![cf("f").max_versions(5), cf("g")],
        PreSplit::None,
    )
    .await;
    let all = |row: &str| Get::new(row).max_versions(5);

    // Row: every cell, every family.
    put_versions(&t, "row", "f", "a", &[1, 2]).await;
    put_versions(&t, "row", "g", "a", &[1]).await;
    put_versions(&t, "other", "f", "a", &[1]).await;
    t.delete(Delete::new("row")).await.unwrap();
    assert!(t.get(all("row")).await.unwrap().is_empty());
    assert!(!t.exists(Get::new("row")).await.unwrap());
    assert!(t.exists(Get::new("other")).await.unwrap());
    // Row up to a timestamp.
    put_versions(&t, "rowts", "f", "a", &[1, 2, 3]).await;
    put_versions(&t, "rowts", "g", "a", &[1, 4]).await;
    t.delete(Delete::new("rowts").timestamp(2)).await.unwrap();
    assert_eq!(
        cells(&t.get(all("rowts")).await.unwrap()),
        vec![c("f", "a", 3, "v3"), c("g", "a", 4, "v4")]
    );

    // Family: every column of one family; up to a timestamp.
    put_versions(&t, "fam", "f", "a", &[1, 2, 3]).await;
    put_versions(&t, "fam", "f", "b", &[2]).await;
    put_versions(&t, "fam", "g", "a", &[1]).await;
    t.delete(Delete::new("fam").add_family_ts("f", 2))
        .await
        .unwrap();
    assert_eq!(
        cells(&t.get(all("fam")).await.unwrap()),
        vec![c("f", "a", 3, "v3"), c("g", "a", 1, "v1")]
    );
    t.delete(Delete::new("fam").add_family("f")).await.unwrap();
    assert_eq!(
        cells(&t.get(all("fam")).await.unwrap()),
        vec![c("g", "a", 1, "v1")]
    );

    // Family version: every column of the family at exactly that timestamp.
    put_versions(&t, "famv", "f", "a", &[1, 2, 3]).await;
    put_versions(&t, "famv", "f", "b", &[2]).await;
    put_versions(&t, "famv", "g", "a", &[2]).await;
    t.delete(Delete::new("famv").add_family_version("f", 2))
        .await
        .unwrap();
    assert_eq!(
        cells(&t.get(all("famv")).await.unwrap()),
        vec![
            c("f", "a", 3, "v3"),
            c("f", "a", 1, "v1"),
            c("g", "a", 2, "v2")
        ]
    );

    // Column, all versions: up to a timestamp, then every one.
    put_versions(&t, "col", "f", "q", &[1, 2, 3]).await;
    put_versions(&t, "col", "f", "p", &[1, 2, 3]).await;
    t.delete(Delete::new("col").add_columns_ts("f", "q", 2))
        .await
        .unwrap();
    let r = t.get(all("col")).await.unwrap();
    assert_eq!(versions(&r, "f", "q"), vec![v(3, "v3")]);
    assert_eq!(versions(&r, "f", "p").len(), 3);
    t.delete(Delete::new("col").add_columns("f", "q"))
        .await
        .unwrap();
    let r = t.get(all("col")).await.unwrap();
    assert!(versions(&r, "f", "q").is_empty());
    assert_eq!(versions(&r, "f", "p").len(), 3);

    // Column, one version: the latest (by timestamp, not by write order), or an exact one.
    put_versions(&t, "ver", "f", "q", &[4, 1, 3, 2]).await;
    t.delete(Delete::new("ver").add_column("f", "q"))
        .await
        .unwrap();
    assert_eq!(
        versions(&t.get(all("ver")).await.unwrap(), "f", "q"),
        vec![v(3, "v3"), v(2, "v2"), v(1, "v1")]
    );
    t.delete(Delete::new("ver").add_column_ts("f", "q", 2))
        .await
        .unwrap();
    assert_eq!(
        versions(&t.get(all("ver")).await.unwrap(), "f", "q"),
        vec![v(3, "v3"), v(1, "v1")]
    );

    // Markers keep masking once flushed, and mask puts that arrive later with older
    // timestamps.
    conn.admin().flush(name).await.unwrap();
    put_versions(&t, "rowts", "f", "a", &[2]).await;
    put_versions(&t, "col", "f", "q", &[1]).await;
    assert_eq!(
        cells(&t.get(all("rowts")).await.unwrap()),
        vec![c("f", "a", 3, "v3"), c("g", "a", 4, "v4")]
    );
    assert!(versions(&t.get(all("col")).await.unwrap(), "f", "q").is_empty());
    let rows = scan(&t, Scan::new()).await;
    assert_eq!(
        keys(&rows),
        vec!["col", "fam", "famv", "other", "rowts", "ver"]
    );
}

// ---------------------------------------------------------------------------------------
// 3. Scans
// ---------------------------------------------------------------------------------------

/// Scans of one region: full, start and stop rows, prefix, reverse (with its high start
/// row), limit, batch (a wide row in parts), family and column selection, versions and time
/// range, and a filter.
async fn scans_of_one_region<B: Backend>(conn: &Connection<B>, name: &str) {
    let t = create(
        conn,
        name,
        vec![cf("f").max_versions(3), cf("g")],
        PreSplit::None,
    )
    .await;
    put_rows(
        &t,
        &["r5", "r1", "r9", "r0", "r3", "r2", "r4", "r8", "r7", "r6"],
    )
    .await;

    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), TEN);
    assert_eq!(value(&rows[3], "f", "q").as_deref(), Some("r3"));
    let rows = scan(&t, Scan::new().start_row("r3").stop_row("r7")).await;
    assert_eq!(keys(&rows), vec!["r3", "r4", "r5", "r6"]);
    let rows = scan(&t, Scan::new().start_row("r2a").stop_row("r5a")).await;
    assert_eq!(keys(&rows), vec!["r3", "r4", "r5"]);
    assert!(scan(&t, Scan::new().start_row("r4").stop_row("r4"))
        .await
        .is_empty());

    // Reverse: the start row is the high one (inclusive), the stop row the low one.
    let rows = scan(&t, Scan::new().reversed(true)).await;
    let mut rev = TEN.to_vec();
    rev.reverse();
    assert_eq!(keys(&rows), rev);
    let rows = scan(
        &t,
        Scan::new().reversed(true).start_row("r7").stop_row("r3"),
    )
    .await;
    assert_eq!(keys(&rows), vec!["r7", "r6", "r5", "r4"]);

    // Limits.
    assert_eq!(
        keys(&scan(&t, Scan::new().limit(3)).await),
        vec!["r0", "r1", "r2"]
    );
    assert_eq!(
        keys(&scan(&t, Scan::new().reversed(true).limit(2)).await),
        vec!["r9", "r8"]
    );
    assert_eq!(scan(&t, Scan::new().limit(100)).await.len(), 10);

    // Prefixes, also one ending in 0xFF, forward and reverse.
    put_rows(&t, &["ab", "ab1", "ab2", "ac"]).await;
    for row in [&[0x61, 0xFF][..], &[0x61, 0xFF, 0x00], &[0x61, 0xFF, 0xFF]] {
        t.put(Put::new(row).add_column("f", "q", "x"))
            .await
            .unwrap();
    }
    assert_eq!(
        keys(&scan(&t, Scan::new().with_prefix("ab")).await),
        vec!["ab", "ab1", "ab2"]
    );
    assert_eq!(
        keys(&scan(&t, Scan::new().with_prefix("ab").reversed(true)).await),
        vec!["ab2", "ab1", "ab"]
    );
    let got: Vec<Vec<u8>> = scan(&t, Scan::new().with_prefix([0x61, 0xFF]))
        .await
        .iter()
        .map(|r| r.row.to_vec())
        .collect();
    assert_eq!(
        got,
        vec![
            vec![0x61, 0xFF],
            vec![0x61, 0xFF, 0x00],
            vec![0x61, 0xFF, 0xFF]
        ]
    );
    assert!(scan(&t, Scan::new().with_prefix("zz")).await.is_empty());

    // A wide row, its versions, and family and column selection.
    t.put(
        Put::new("w1")
            .timestamp(1)
            .add_column("f", "a", "1")
            .add_column("f", "b", "2")
            .add_column("f", "c", "3")
            .add_column("g", "a", "4")
            .add_column("g", "b", "5"),
    )
    .await
    .unwrap();
    t.put(Put::new("w1").add_column_ts("f", "a", 2, "1b"))
        .await
        .unwrap();
    t.put(Put::new("w2").timestamp(1).add_column("g", "b", "only g"))
        .await
        .unwrap();
    let wide = Scan::new().with_prefix("w");
    let rows = scan(&t, wide.clone().batch(2)).await;
    assert_eq!(keys(&rows), vec!["w1", "w1", "w1", "w2"]);
    assert_eq!(
        rows.iter().map(|r| r.cells.len()).collect::<Vec<_>>(),
        vec![2, 2, 1, 1]
    );
    let parts: Vec<_> = rows[..3].iter().flat_map(cells).collect();
    assert_eq!(
        parts,
        vec![
            c("f", "a", 2, "1b"),
            c("f", "b", 1, "2"),
            c("f", "c", 1, "3"),
            c("g", "a", 1, "4"),
            c("g", "b", 1, "5"),
        ]
    );
    let rows = scan(&t, wide.clone().batch(2).reversed(true)).await;
    assert_eq!(keys(&rows), vec!["w2", "w1", "w1", "w1"]);
    // Only rows with cells in the selection are returned.
    let rows = scan(&t, wide.clone().add_family("f")).await;
    assert_eq!(keys(&rows), vec!["w1"]);
    assert_eq!(
        cells(&rows[0]),
        vec![
            c("f", "a", 2, "1b"),
            c("f", "b", 1, "2"),
            c("f", "c", 1, "3")
        ]
    );
    let rows = scan(&t, wide.clone().add_column("f", "b").add_column("g", "b")).await;
    assert_eq!(keys(&rows), vec!["w1", "w2"]);
    assert_eq!(
        cells(&rows[0]),
        vec![c("f", "b", 1, "2"), c("g", "b", 1, "5")]
    );
    let rows = scan(&t, wide.clone().add_column("f", "a").max_versions(3)).await;
    assert_eq!(versions(&rows[0], "f", "a"), vec![v(2, "1b"), v(1, "1")]);
    let rows = scan(
        &t,
        wide.clone()
            .add_column("f", "a")
            .max_versions(3)
            .time_range(TimeRange::at(1)),
    )
    .await;
    assert_eq!(cells(&rows[0]), vec![c("f", "a", 1, "1")]);

    // A filter runs in the region: rows whose g:b is "5", and a row prefix filter.
    let cond = ColumnValueCondition::new("g", "b", CompareOp::Equal, Comparator::binary("5"))
        .filter_if_missing(true);
    let rows = scan(&t, Scan::new().filter(Filter::SingleColumnValue(cond))).await;
    assert_eq!(keys(&rows), vec!["w1"]);
    assert_eq!(rows[0].cells.len(), 5);
    let rows = scan(&t, Scan::new().filter(Filter::prefix("r")).reversed(true)).await;
    assert_eq!(keys(&rows), rev);
}

/// Scans across a table pre-split into four regions: every row once, in order, both ways;
/// bounds inside and on region boundaries; limits that end in a later region, forward and
/// reverse; a filter and a batch whose rows come from several regions.
async fn scans_across_four_regions<B: Backend>(conn: &Connection<B>, name: &str) {
    let split = PreSplit::Keys(vec![b"c".to_vec(), b"f".to_vec(), b"m".to_vec()]);
    let t = create(conn, name, vec![cf("f")], split).await;
    assert_eq!(t.regions().await.unwrap().len(), 4);
    let all = ["a", "b", "c", "d", "f", "g", "l", "m", "n", "z"];
    put_rows(&t, &["z", "a", "m", "d", "g", "b", "n", "c", "l", "f"]).await;

    assert_eq!(keys(&scan(&t, Scan::new()).await), all);
    let mut rev = all.to_vec();
    rev.reverse();
    assert_eq!(keys(&scan(&t, Scan::new().reversed(true)).await), rev);

    let rows = scan(&t, Scan::new().start_row("b").stop_row("n")).await;
    assert_eq!(keys(&rows), vec!["b", "c", "d", "f", "g", "l", "m"]);
    let rows = scan(&t, Scan::new().reversed(true).start_row("n").stop_row("b")).await;
    assert_eq!(keys(&rows), vec!["n", "m", "l", "g", "f", "d", "c"]);
    // Bounds exactly on region boundaries.
    let rows = scan(&t, Scan::new().start_row("c").stop_row("m")).await;
    assert_eq!(keys(&rows), vec!["c", "d", "f", "g", "l"]);
    let rows = scan(&t, Scan::new().reversed(true).start_row("m").stop_row("c")).await;
    assert_eq!(keys(&rows), vec!["m", "l", "g", "f", "d"]);
    // Limits that cross regions.
    let rows = scan(&t, Scan::new().start_row("b").limit(4)).await;
    assert_eq!(keys(&rows), vec!["b", "c", "d", "f"]);
    let rows = scan(&t, Scan::new().reversed(true).start_row("g").limit(4)).await;
    assert_eq!(keys(&rows), vec!["g", "f", "d", "c"]);
    let rows = scan(&t, Scan::new().reversed(true).limit(5)).await;
    assert_eq!(keys(&rows), vec!["z", "n", "m", "l", "g"]);

    // A filter over every region: one row of each of three regions passes.
    let pick = Filter::any([
        Filter::Value(CompareOp::Equal, Comparator::binary("b")),
        Filter::Value(CompareOp::Equal, Comparator::binary("g")),
        Filter::Value(CompareOp::Equal, Comparator::binary("z")),
    ]);
    let rows = scan(&t, Scan::new().filter(pick.clone())).await;
    assert_eq!(keys(&rows), vec!["b", "g", "z"]);
    let rows = scan(&t, Scan::new().filter(pick).reversed(true).limit(2)).await;
    assert_eq!(keys(&rows), vec!["z", "g"]);

    // Deleted rows and an emptied region are skipped; wide rows split across regions.
    t.delete(Delete::new("d")).await.unwrap();
    t.delete(Delete::new("f")).await.unwrap();
    t.delete(Delete::new("g")).await.unwrap();
    t.delete(Delete::new("l")).await.unwrap();
    for row in ["b", "n"] {
        t.put(
            Put::new(row)
                .add_column("f", "x", "1")
                .add_column("f", "y", "2"),
        )
        .await
        .unwrap();
    }
    let rows = scan(&t, Scan::new().batch(2)).await;
    assert_eq!(
        keys(&rows),
        vec!["a", "b", "b", "c", "m", "n", "n", "z"],
        "{rows:?}"
    );
    let rows = scan(&t, Scan::new().reversed(true).start_row("l").limit(2)).await;
    assert_eq!(keys(&rows), vec!["c", "b"]);

    // Many rows over every region, some flushed: each once, in order.
    let many: Vec<String> = (0..300).map(|i| format!("k{i:03}")).collect();
    for (i, row) in many.iter().enumerate() {
        t.put(Put::new(row).add_column("f", "q", row))
            .await
            .unwrap();
        if i == 150 {
            conn.admin().flush(name).await.unwrap();
        }
    }
    let rows = scan(&t, Scan::new().with_prefix("k")).await;
    assert_eq!(keys(&rows), many);
    let rows = scan(&t, Scan::new().start_row("a").stop_row("zz")).await;
    assert_eq!(rows.len(), 3 + 300 + 3);
    assert_eq!(keys(&rows)[..3], ["a", "b", "c"]);
    assert_eq!(keys(&rows)[3..303], many);
    assert_eq!(keys(&rows)[303..], ["m", "n", "z"]);
}

// ---------------------------------------------------------------------------------------
// 4. Atomic operations
// ---------------------------------------------------------------------------------------

/// Increments (absent counters start at zero, negative amounts, several columns), appends,
/// check-and-mutate with both outcomes (put, delete and row mutations as the action, an
/// absent-column condition), and row mutations applied together or not at all.
async fn counters_appends_and_conditional_mutations<B: Backend>(conn: &Connection<B>, name: &str) {
    let t = create(conn, name, vec![cf("f"), cf("g")], PreSplit::None).await;

    // Increments.
    let r = t
        .increment(Increment::new("ctr").add_column("f", "n", 5))
        .await
        .unwrap();
    assert_eq!(r.value("f", "n").unwrap().as_ref(), counter(5));
    let r = t
        .increment(
            Increment::new("ctr")
                .add_column("f", "n", -15)
                .add_column("g", "m", 3),
        )
        .await
        .unwrap();
    assert_eq!(r.value("f", "n").unwrap().as_ref(), counter(-10));
    assert_eq!(r.value("g", "m").unwrap().as_ref(), counter(3));
    assert_eq!(r.cells.len(), 2);
    let g = t.get(Get::new("ctr")).await.unwrap();
    assert_eq!(g.value("f", "n").unwrap().as_ref(), counter(-10));
    assert_eq!(g.value("g", "m").unwrap().as_ref(), counter(3));
    // A non-counter cell refuses, and nothing of the increment is written.
    t.put(Put::new("ctr").add_column("f", "text", "abc"))
        .await
        .unwrap();
    let err = t
        .increment(
            Increment::new("ctr")
                .add_column("f", "n", 1)
                .add_column("f", "text", 1),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotACounter { len: 3, .. }), "{err:?}");
    let g = t.get(Get::new("ctr")).await.unwrap();
    assert_eq!(g.value("f", "n").unwrap().as_ref(), counter(-10));

    // Appends.
    let r = t
        .append(Append::new("app").add_column("f", "s", "ab"))
        .await
        .unwrap();
    assert_eq!(value(&r, "f", "s").as_deref(), Some("ab"));
    let r = t
        .append(
            Append::new("app")
                .add_column("f", "s", "cd")
                .add_column("g", "t", "x"),
        )
        .await
        .unwrap();
    assert_eq!(value(&r, "f", "s").as_deref(), Some("abcd"));
    assert_eq!(value(&r, "g", "t").as_deref(), Some("x"));
    let g = t.get(Get::new("app")).await.unwrap();
    assert_eq!(value(&g, "f", "s").as_deref(), Some("abcd"));
    assert_eq!(value(&g, "g", "t").as_deref(), Some("x"));

    // Check-and-mutate: the stored value is the left operand.
    t.put(
        Put::new("cam")
            .add_column("f", "state", "5")
            .add_column("f", "data", "x"),
    )
    .await
    .unwrap();
    let held = t
        .check_and_mutate(
            CheckAndMutate::new("cam", "f", "state")
                .if_value(CompareOp::Less, "6")
                .then_put(Put::new("cam").add_column("f", "mark", "set")),
        )
        .await
        .unwrap();
    assert!(held);
    let failed = t
        .check_and_mutate(
            CheckAndMutate::new("cam", "f", "state")
                .if_value(CompareOp::Greater, "5")
                .then_put(Put::new("cam").add_column("f", "never", "x")),
        )
        .await
        .unwrap();
    assert!(!failed);
    let g = t.get(Get::new("cam")).await.unwrap();
    assert_eq!(value(&g, "f", "mark").as_deref(), Some("set"));
    assert_eq!(value(&g, "f", "never"), None);
    // With a delete as the action.
    let del = |expect: &str| {
        CheckAndMutate::new("cam", "f", "state")
            .if_value(CompareOp::Equal, expect)
            .then_delete(Delete::new("cam").add_columns("f", "data"))
    };
    assert!(!t.check_and_mutate(del("pending")).await.unwrap());
    assert!(t
        .exists(Get::new("cam").add_column("f", "data"))
        .await
        .unwrap());
    assert!(t.check_and_mutate(del("5")).await.unwrap());
    assert!(!t
        .exists(Get::new("cam").add_column("f", "data"))
        .await
        .unwrap());
    // If absent: the first wins, the second finds the column.
    let lock = |owner: &str| {
        CheckAndMutate::new("lock", "f", "owner")
            .if_absent()
            .then_put(Put::new("lock").add_column("f", "owner", owner))
    };
    assert!(t.check_and_mutate(lock("a")).await.unwrap());
    assert!(!t.check_and_mutate(lock("b")).await.unwrap());
    assert_eq!(
        value(&t.get(Get::new("lock")).await.unwrap(), "f", "owner").as_deref(),
        Some("a")
    );
    // With row mutations as the action: applied together, once.
    let rm = RowMutations::new("cam")
        .add(Put::new("cam").add_column("f", "state", "6"))
        .add(Delete::new("cam").add_columns("f", "mark"));
    let cond = || CheckAndMutate::new("cam", "f", "state").if_value(CompareOp::Equal, "5");
    assert!(t
        .check_and_mutate(cond().then_mutate(rm.clone()))
        .await
        .unwrap());
    assert!(!t.check_and_mutate(cond().then_mutate(rm)).await.unwrap());
    let g = t.get(Get::new("cam")).await.unwrap();
    assert_eq!(value(&g, "f", "state").as_deref(), Some("6"));
    assert_eq!(value(&g, "f", "mark"), None);

    // Row mutations: puts and deletes of one row together; a bad one applies nothing.
    t.put(
        Put::new("rm")
            .add_column("f", "a", "1")
            .add_column("g", "b", "2"),
    )
    .await
    .unwrap();
    t.mutate_row(
        RowMutations::new("rm")
            .add(Delete::new("rm").add_family("g"))
            .add(Put::new("rm").add_column("f", "c", "3")),
    )
    .await
    .unwrap();
    let g = t.get(Get::new("rm")).await.unwrap();
    assert_eq!(cells(&g).len(), 2);
    assert_eq!(value(&g, "f", "a").as_deref(), Some("1"));
    assert_eq!(value(&g, "f", "c").as_deref(), Some("3"));
    let err = t
        .mutate_row(
            RowMutations::new("rm")
                .add(Delete::new("rm").add_columns("f", "a"))
                .add(Put::new("rm").add_column("nope", "c", "3")),
        )
        .await
        .unwrap_err();
    assert!(is_family_not_found(&err, "nope"), "{err:?}");
    assert_eq!(t.get(Get::new("rm")).await.unwrap(), g);
}

/// A batch of every kind of operation answers one result per operation, in order; a bad
/// operation fails alone and the others apply.
async fn batch_of_mixed_operations<B: Backend>(conn: &Connection<B>, name: &str) {
    let t = create(conn, name, vec![cf("f")], PreSplit::None).await;
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
        BatchOp::Put(Put::new("bad").add_column("nope", "q", "x")),
        BatchOp::Put(Put::new("").add_column("f", "q", "x")),
        BatchOp::Get(Get::new("missing")),
    ];
    let res = t.batch(ops).await.unwrap();
    assert_eq!(res.len(), 11);
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
    assert!(
        matches!(&res[8], Err(e) if is_family_not_found(e, "nope")),
        "{:?}",
        res[8]
    );
    assert!(matches!(res[9], Err(Error::InvalidRow(_))), "{:?}", res[9]);
    match &res[10] {
        Ok(BatchOutcome::Row(r)) => assert!(r.is_empty(), "{r:?}"),
        other => panic!("{other:?}"),
    }

    let rows = scan(&t, Scan::new()).await;
    assert_eq!(
        keys(&rows),
        vec!["app", "cam", "ctr", "existing", "p", "rm"]
    );
    assert_eq!(cells(&rows[3]), vec![c("f", "q", 1, "old")]);
    assert_eq!(value(&rows[1], "f", "q").as_deref(), Some("cam"));
    assert_eq!(value(&rows[4], "f", "q").as_deref(), Some("put"));
    assert_eq!(value(&rows[5], "f", "q").as_deref(), Some("rm"));
}

// ---------------------------------------------------------------------------------------
// 5. Typed errors
// ---------------------------------------------------------------------------------------

/// Errors arrive as [`basalt::Error`]'s variants, naming what was wrong: `TableNotFound`
/// for an unknown table (data and admin calls), `FamilyNotFound` for an unknown family,
/// `InvalidRow` for an empty row, `TableExists` for a second create, `BadArgument` for a
/// malformed read; none of them writes anything.
async fn typed_errors<B: Backend>(conn: &Connection<B>, name: &str) {
    let admin = conn.admin();
    let missing_name = format!("{name}_missing");
    let missing = conn.table(missing_name.as_str()).unwrap();
    let err = missing
        .put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(is_table_not_found(&err, &missing_name), "{err:?}");
    let err = missing.get(Get::new("r")).await.unwrap_err();
    assert!(is_table_not_found(&err, &missing_name), "{err:?}");
    let err = scan_error(&missing, Scan::new()).await;
    assert!(is_table_not_found(&err, &missing_name), "{err:?}");
    let err = admin
        .describe_table(missing_name.as_str())
        .await
        .unwrap_err();
    assert!(is_table_not_found(&err, &missing_name), "{err:?}");
    let err = admin.regions(missing_name.as_str()).await.unwrap_err();
    assert!(is_table_not_found(&err, &missing_name), "{err:?}");
    assert!(!admin.table_exists(missing_name.as_str()).await.unwrap());

    let t = create(conn, name, vec![cf("f")], PreSplit::None).await;
    t.put(Put::new("r").add_column("f", "q", "v"))
        .await
        .unwrap();

    // A second create of the same name, whatever its families.
    let again = TableDescriptor::new(TableName::parse(name).unwrap()).family(cf("g"));
    let err = admin.create_table(again).await.unwrap_err();
    assert!(
        matches!(&err, Error::TableExists(n) if n.contains(name)),
        "{err:?}"
    );
    assert_eq!(admin.describe_table(name).await.unwrap().families.len(), 1);

    // Unknown families, in every kind of call.
    let err = t
        .put(
            Put::new("r")
                .add_column("f", "a", "1")
                .add_column("nope", "q", "v"),
        )
        .await
        .unwrap_err();
    assert!(is_family_not_found(&err, "nope"), "{err:?}");
    let err = t.get(Get::new("r").add_family("nope")).await.unwrap_err();
    assert!(is_family_not_found(&err, "nope"), "{err:?}");
    let err = scan_error(&t, Scan::new().add_column("nope", "q")).await;
    assert!(is_family_not_found(&err, "nope"), "{err:?}");
    let err = t
        .delete(Delete::new("r").add_family("nope"))
        .await
        .unwrap_err();
    assert!(is_family_not_found(&err, "nope"), "{err:?}");
    let err = t
        .increment(Increment::new("r").add_column("nope", "c", 1))
        .await
        .unwrap_err();
    assert!(is_family_not_found(&err, "nope"), "{err:?}");
    let err = t
        .check_and_mutate(
            CheckAndMutate::new("r", "nope", "q")
                .if_absent()
                .then_put(Put::new("r").add_column("f", "q", "v")),
        )
        .await
        .unwrap_err();
    assert!(is_family_not_found(&err, "nope"), "{err:?}");

    // Empty row keys.
    let err = t
        .put(Put::new("").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
    let err = t.get(Get::new("")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
    let err = t.delete(Delete::new("")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");
    let err = t
        .append(Append::new("").add_column("f", "q", "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidRow(_)), "{err:?}");

    // Malformed reads and writes.
    let err = t.get(Get::new("r").max_versions(0)).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = scan_error(&t, Scan::new().batch(0)).await;
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = t.put(Put::new("r")).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");

    // None of the failed calls wrote anything.
    let rows = scan(&t, Scan::new()).await;
    assert_eq!(keys(&rows), vec!["r"]);
    assert_eq!(cells(&rows[0]).len(), 1);
}

/// A disabled table refuses reads and writes with `TableDisabled` (and deletion needs it
/// disabled); enabled again it serves the data it had.
async fn disabled_tables<B: Backend>(conn: &Connection<B>, name: &str) {
    let admin = conn.admin();
    let t = create(
        conn,
        name,
        vec![cf("f")],
        PreSplit::Keys(vec![b"m".to_vec()]),
    )
    .await;
    put_rows(&t, &["a", "z"]).await;
    assert!(admin.is_table_enabled(name).await.unwrap());
    // An enabled table cannot be deleted.
    let err = admin.delete_table(name).await.unwrap_err();
    assert!(matches!(err, Error::TableState { .. }), "{err:?}");

    admin.disable_table(name).await.unwrap();
    assert!(!admin.is_table_enabled(name).await.unwrap());
    assert!(admin.table_exists(name).await.unwrap());
    let disabled = |e: &Error| matches!(e, Error::TableDisabled(n) if n.contains(name));
    let err = t
        .put(Put::new("b").add_column("f", "q", "v"))
        .await
        .unwrap_err();
    assert!(disabled(&err), "{err:?}");
    let err = t.get(Get::new("a")).await.unwrap_err();
    assert!(disabled(&err), "{err:?}");
    let err = t.exists(Get::new("a")).await.unwrap_err();
    assert!(disabled(&err), "{err:?}");
    let err = scan_error(&t, Scan::new()).await;
    assert!(disabled(&err), "{err:?}");
    let err = t
        .increment(Increment::new("a").add_column("f", "n", 1))
        .await
        .unwrap_err();
    assert!(disabled(&err), "{err:?}");

    admin.enable_table(name).await.unwrap();
    assert!(admin.is_table_enabled(name).await.unwrap());
    let r = t.get(Get::new("z")).await.unwrap();
    assert_eq!(value(&r, "f", "q").as_deref(), Some("z"));
    assert_eq!(keys(&scan(&t, Scan::new()).await), vec!["a", "z"]);
    t.put(Put::new("b").add_column("f", "q", "b"))
        .await
        .unwrap();
    assert_eq!(keys(&scan(&t, Scan::new()).await), vec!["a", "b", "z"]);

    // Disabled, it can be deleted; then it is not found.
    admin.disable_table(name).await.unwrap();
    admin.delete_table(name).await.unwrap();
    assert!(!admin.table_exists(name).await.unwrap());
    let err = t.get(Get::new("a")).await.unwrap_err();
    assert!(is_table_not_found(&err, name), "{err:?}");
}

// ---------------------------------------------------------------------------------------
// 6. Admin
// ---------------------------------------------------------------------------------------

/// Tables are listed and described as created; a pre-split table's regions tile the key
/// space in key order; a family added to a live table is described and written at once.
async fn admin_tables_regions_and_families<B: Backend>(conn: &Connection<B>, name: &str) {
    let admin = conn.admin();
    let table_name = TableName::parse(name).unwrap();
    let desc = TableDescriptor::new(table_name.clone())
        .family(cf("f").max_versions(3))
        .family(cf("g"));
    let split = PreSplit::Keys(vec![
        b"d".to_vec(),
        b"k".to_vec(),
        b"p".to_vec(),
        b"t".to_vec(),
    ]);
    admin
        .create_table_with_splits(desc.clone(), split)
        .await
        .unwrap();

    assert!(admin.table_exists(name).await.unwrap());
    assert!(admin.is_table_enabled(name).await.unwrap());
    assert_eq!(admin.describe_table(name).await.unwrap(), desc);
    let listed = admin.list_tables().await.unwrap();
    let mine: Vec<_> = listed.iter().filter(|d| d.name == table_name).collect();
    assert_eq!(mine, vec![&desc]);

    // Regions: five, contiguous, in key order.
    let t = conn.table(name).unwrap();
    let regions = admin.regions(name).await.unwrap();
    let bounds: Vec<(String, String)> = regions
        .iter()
        .map(|r| (s(&r.start_key), s(&r.end_key)))
        .collect();
    let want: Vec<(String, String)> = [("", "d"), ("d", "k"), ("k", "p"), ("p", "t"), ("t", "")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(bounds, want);
    let mut ids: Vec<u64> = regions.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 5, "region ids are distinct");
    assert_eq!(t.regions().await.unwrap().len(), 5);
    assert_eq!(admin.region_report(name).await.unwrap().regions.len(), 5);
    // Each row lands in the region whose range holds it.
    for row in ["a", "e", "l", "q", "u"] {
        t.put(Put::new(row).add_column("f", "q", row))
            .await
            .unwrap();
    }
    let writes: Vec<u64> = admin
        .regions(name)
        .await
        .unwrap()
        .iter()
        .map(|r| r.write_requests)
        .collect();
    assert_eq!(writes, vec![1, 1, 1, 1, 1]);

    // A family added to the live table.
    let err = t
        .put(Put::new("a").add_column("h", "q", "v"))
        .await
        .unwrap_err();
    assert!(is_family_not_found(&err, "h"), "{err:?}");
    admin
        .add_column_family(name, cf("h").max_versions(2))
        .await
        .unwrap();
    let described = admin.describe_table(name).await.unwrap();
    let families: Vec<(String, u32)> = described
        .families
        .iter()
        .map(|f| (s(&f.name), f.max_versions))
        .collect();
    assert_eq!(
        families,
        vec![("f".into(), 3), ("g".into(), 1), ("h".into(), 2)]
    );
    put_versions(&t, "a", "h", "q", &[1, 2, 3]).await;
    let r = t.get(Get::new("a").max_versions(5)).await.unwrap();
    assert_eq!(versions(&r, "h", "q"), vec![v(3, "v3"), v(2, "v2")]);
    assert_eq!(value(&r, "f", "q").as_deref(), Some("a"));
    let rows = scan(&t, Scan::new().add_family("h")).await;
    assert_eq!(keys(&rows), vec!["a"]);

    // Dropped, it is neither listed nor described.
    admin.disable_table(name).await.unwrap();
    admin.delete_table(name).await.unwrap();
    assert!(!admin.table_exists(name).await.unwrap());
    assert!(!admin
        .list_tables()
        .await
        .unwrap()
        .iter()
        .any(|d| d.name == table_name));
}

/// A namespace is created, listed, holds tables (`ns:table`), refuses a second create, and
/// is deleted once empty.
async fn namespaces<B: Backend>(conn: &Connection<B>, name: &str) {
    let admin = conn.admin();
    let ns = format!("{name}_ns");
    assert!(!admin.list_namespaces().await.unwrap().contains(&ns));
    admin.create_namespace(&ns).await.unwrap();
    let listed = admin.list_namespaces().await.unwrap();
    assert!(listed.contains(&ns), "{listed:?}");
    assert!(listed.contains(&"default".to_string()), "{listed:?}");
    let err = admin.create_namespace(&ns).await.unwrap_err();
    assert!(matches!(err, Error::NamespaceExists(_)), "{err:?}");

    let qualified = format!("{ns}:t");
    let t = create(conn, &qualified, vec![cf("f")], PreSplit::None).await;
    t.put(Put::new("r").add_column("f", "q", "in ns"))
        .await
        .unwrap();
    assert_eq!(
        value(&t.get(Get::new("r")).await.unwrap(), "f", "q").as_deref(),
        Some("in ns")
    );
    let named = admin.describe_table(qualified.as_str()).await.unwrap().name;
    assert_eq!((named.namespace(), named.qualifier()), (ns.as_str(), "t"));
    // The same qualifier in the default namespace is another table.
    assert!(!admin.table_exists("t").await.unwrap());

    admin.disable_table(qualified.as_str()).await.unwrap();
    admin.delete_table(qualified.as_str()).await.unwrap();
    admin.delete_namespace(&ns).await.unwrap();
    assert!(!admin.list_namespaces().await.unwrap().contains(&ns));
    let err = admin
        .create_table(TableDescriptor::new(TableName::parse(&qualified).unwrap()).family(cf("f")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NamespaceNotFound(_)), "{err:?}");
}

// ---------------------------------------------------------------------------------------
// 7. Salted tables
// ---------------------------------------------------------------------------------------

/// A salted table (its salt in the descriptor) starts with one region per bucket; reads and
/// writes go by logical key; its scans merge the buckets back into logical order (forward,
/// reverse, bounded, limited, at a snapshot).
async fn salted_tables<B: Backend>(conn: &Connection<B>, name: &str) {
    let admin = conn.admin();
    let spec = SaltSpec::new(8).format(SaltFormat::Decimal);
    let desc = TableDescriptor::new(TableName::parse(name).unwrap())
        .family(cf("f"))
        .salt(spec.clone());
    admin.create_table(desc).await.unwrap();
    assert_eq!(
        admin.describe_table(name).await.unwrap().salt,
        Some(spec.clone())
    );
    let regions = admin.regions(name).await.unwrap();
    assert_eq!(regions.len(), 8);
    assert!(regions
        .iter()
        .all(|r| spec.within_one_bucket(&r.start_key, &r.end_key)));

    let t = conn.salted_table(name).unwrap();
    let logical: Vec<String> = (0..40).map(|i| format!("k{i:02}")).collect();
    for k in logical.iter().rev() {
        t.put(Put::new(k).add_column("f", "v", k)).await.unwrap();
    }
    // By logical key; the physical key carries the salt.
    let g = t.get(Get::new("k07")).await.unwrap();
    assert_eq!(s(&g.row), "k07");
    assert_eq!(value(&g, "f", "v").as_deref(), Some("k07"));
    let physical = t.physical_key(b"k07").unwrap();
    assert_ne!(physical.as_ref(), b"k07");
    assert!(physical.ends_with(b"k07"));
    let raw = t.physical().get(Get::new(&physical)).await.unwrap();
    assert_eq!(value(&raw, "f", "v").as_deref(), Some("k07"));
    assert!(t.physical().get(Get::new("k07")).await.unwrap().is_empty());
    assert!(t.exists(Get::new("k08")).await.unwrap());
    t.delete(Delete::new("k08")).await.unwrap();
    assert!(!t.exists(Get::new("k08")).await.unwrap());
    let r = t
        .increment(Increment::new("k09").add_column("f", "n", 2))
        .await
        .unwrap();
    assert_eq!(s(&r.row), "k09");
    assert_eq!(r.value("f", "n").unwrap().as_ref(), counter(2));
    // The rows are spread over several buckets.
    let mut buckets: Vec<u32> = logical
        .iter()
        .map(|k| t.bucket(k.as_bytes()).unwrap())
        .collect();
    buckets.sort_unstable();
    buckets.dedup();
    assert!(buckets.len() > 4, "{buckets:?}");

    // Salted scans: logical order.
    let live: Vec<String> = logical.iter().filter(|k| *k != "k08").cloned().collect();
    let collect = |sc: Scan| {
        let stream = t.scan(sc).unwrap();
        async move { keys(&stream.try_collect::<Vec<_>>().await.unwrap()) }
    };
    assert_eq!(collect(Scan::new()).await, live);
    let mut rev = live.clone();
    rev.reverse();
    assert_eq!(collect(Scan::new().reversed(true)).await, rev);
    assert_eq!(
        collect(Scan::new().start_row("k05").stop_row("k12")).await,
        vec!["k05", "k06", "k07", "k09", "k10", "k11"]
    );
    assert_eq!(
        collect(Scan::new().start_row("k30").limit(3)).await,
        vec!["k30", "k31", "k32"]
    );
    assert_eq!(
        collect(Scan::new().reversed(true).start_row("k10").limit(3)).await,
        vec!["k10", "k09", "k07"]
    );
    assert_eq!(
        collect(Scan::new().with_prefix("k1")).await,
        (10..20).map(|i| format!("k{i}")).collect::<Vec<_>>()
    );
    let rows: Vec<RowResult> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert!(rows
        .iter()
        .all(|r| value(r, "f", "v").as_deref() == Some(&s(&r.row))));
    let mut unordered: Vec<RowResult> = t
        .scan_unordered(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    unordered.sort_by(|a, b| a.row.cmp(&b.row));
    assert_eq!(unordered, rows);

    // At a snapshot: later writes are not seen.
    let snap = conn.snapshot().unwrap();
    t.put(Put::new("k99").add_column("f", "v", "k99"))
        .await
        .unwrap();
    t.delete(Delete::new("k00")).await.unwrap();
    let then: Vec<RowResult> = t
        .scan_at(Scan::new(), &snap)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys(&then), live);
    let now = collect(Scan::new()).await;
    assert_eq!(now.first().map(String::as_str), Some("k01"));
    assert_eq!(now.last().map(String::as_str), Some("k99"));

    // A plain table is not salted.
    let plain = format!("{name}_plain");
    create(conn, &plain, vec![cf("f")], PreSplit::None).await;
    assert!(conn.salted_table(plain.as_str()).is_err());
}

// ---------------------------------------------------------------------------------------
// 8. Table snapshots
// ---------------------------------------------------------------------------------------

/// A table snapshot holds the table as it was (MemStore included), is listed and described,
/// clones into a new table that reads the snapshot's rows and diverges from the source,
/// and once deleted is not found while the clone still reads.
async fn table_snapshots<B: Backend>(conn: &Connection<B>, name: &str) {
    let admin = conn.admin();
    let t = create(
        conn,
        name,
        vec![cf("f").max_versions(2)],
        PreSplit::Keys(vec![b"r10".to_vec()]),
    )
    .await;
    for i in 0..20 {
        t.put(Put::new(format!("r{i:02}")).add_column("f", "q", "v1"))
            .await
            .unwrap();
    }
    admin.flush(name).await.unwrap();
    // Some of it only in the MemStore.
    for i in 15..25 {
        t.put(Put::new(format!("r{i:02}")).add_column("f", "q", "v2"))
            .await
            .unwrap();
    }
    let before = scan(&t, Scan::new().max_versions(2)).await;
    assert_eq!(before.len(), 25);

    let snap_name = format!("{name}_snap");
    let snap = admin.snapshot(&snap_name, name).await.unwrap();
    assert_eq!(snap.name, snap_name);
    assert_eq!(snap.tables, vec![format!("default:{name}")]);
    assert!(snap.read_point > 0);
    let listed = admin.list_snapshots().await.unwrap();
    assert!(listed.iter().any(|d| d.name == snap_name), "{listed:?}");
    let described = admin.describe_snapshot(&snap_name).await.unwrap();
    assert_eq!(
        (described.tables, described.read_point),
        (snap.tables.clone(), snap.read_point)
    );
    let err = admin.snapshot(&snap_name, name).await.unwrap_err();
    assert!(matches!(err, Error::SnapshotExists(_)), "{err:?}");

    // The source moves on.
    t.put(Put::new("r00").add_column("f", "q", "after"))
        .await
        .unwrap();
    t.delete(Delete::new("r20")).await.unwrap();

    // The clone reads the snapshot's state, in its own table with the source's schema.
    let clone = format!("{name}_clone");
    admin
        .clone_snapshot(&snap_name, clone.as_str())
        .await
        .unwrap();
    let ct = conn.table(clone.as_str()).unwrap();
    assert_eq!(scan(&ct, Scan::new().max_versions(2)).await, before);
    assert_eq!(
        admin.describe_table(clone.as_str()).await.unwrap().families,
        admin.describe_table(name).await.unwrap().families
    );
    let r = ct.get(Get::new("r00")).await.unwrap();
    assert_eq!(value(&r, "f", "q").as_deref(), Some("v1"));
    assert!(ct.exists(Get::new("r20")).await.unwrap());
    // The clone diverges without touching the source.
    ct.put(Put::new("r00").add_column("f", "q", "clone"))
        .await
        .unwrap();
    assert_eq!(
        value(&t.get(Get::new("r00")).await.unwrap(), "f", "q").as_deref(),
        Some("after")
    );
    assert_eq!(
        value(&ct.get(Get::new("r00")).await.unwrap(), "f", "q").as_deref(),
        Some("clone")
    );
    let err = admin
        .clone_snapshot(&snap_name, clone.as_str())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableExists(_)), "{err:?}");

    // Deleted, the snapshot is gone; the clone still reads its files.
    admin.delete_snapshot(&snap_name).await.unwrap();
    assert!(!admin
        .list_snapshots()
        .await
        .unwrap()
        .iter()
        .any(|d| d.name == snap_name));
    let err = admin.describe_snapshot(&snap_name).await.unwrap_err();
    assert!(matches!(err, Error::SnapshotNotFound(_)), "{err:?}");
    let err = admin
        .clone_snapshot(&snap_name, format!("{name}_clone2").as_str())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SnapshotNotFound(_)), "{err:?}");
    let rows = scan(&ct, Scan::new().max_versions(2)).await;
    assert_eq!(keys(&rows), keys(&before));
    assert_eq!(rows[1..], before[1..]);
}

// ---------------------------------------------------------------------------------------
// 9. Read points
// ---------------------------------------------------------------------------------------

/// A pinned read point ([`Snapshot`]): scans at it, of one table or two, across regions,
/// see neither later puts nor later deletes, however many; scans without it see them.
async fn read_point_snapshots<B: Backend>(conn: &Connection<B>, name: &str) {
    let split = PreSplit::Keys(vec![b"c".to_vec(), b"f".to_vec(), b"m".to_vec()]);
    let t = create(conn, name, vec![cf("f")], split).await;
    let other_name = format!("{name}_other");
    let other = create(conn, &other_name, vec![cf("f")], PreSplit::None).await;
    put_rows(&t, &["a", "d", "g", "n"]).await;
    put_rows(&other, &["x"]).await;

    let snap: Snapshot<B> = conn.snapshot().unwrap();
    t.put(Put::new("b").add_column("f", "q", "late"))
        .await
        .unwrap();
    t.put(Put::new("d").add_column("f", "q", "changed"))
        .await
        .unwrap();
    t.delete(Delete::new("n")).await.unwrap();
    put_rows(&other, &["y"]).await;
    // A flush does not move what the snapshot sees.
    conn.admin().flush(name).await.unwrap();

    let at = |table: &Table<B>, sc: Scan| {
        let stream = table.scan_at(sc, &snap).unwrap();
        async move { stream.try_collect::<Vec<RowResult>>().await.unwrap() }
    };
    let then = at(&t, Scan::new()).await;
    assert_eq!(keys(&then), vec!["a", "d", "g", "n"]);
    assert_eq!(value(&then[1], "f", "q").as_deref(), Some("d"));
    assert_eq!(
        keys(&at(&t, Scan::new().reversed(true).limit(3)).await),
        vec!["n", "g", "d"]
    );
    assert_eq!(keys(&at(&other, Scan::new()).await), vec!["x"]);

    let now = scan(&t, Scan::new()).await;
    assert_eq!(keys(&now), vec!["a", "b", "d", "g"]);
    assert_eq!(value(&now[2], "f", "q").as_deref(), Some("changed"));
    assert_eq!(keys(&scan(&other, Scan::new()).await), vec!["x", "y"]);

    // A later snapshot sees the later writes; clones of one handle read the same point.
    let later = t.snapshot().unwrap();
    assert!(later.read_point() > snap.read_point());
    let copy = snap.clone();
    assert_eq!(copy.read_point(), snap.read_point());
    let rows: Vec<RowResult> = t
        .scan_at(Scan::new(), &later)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(rows, now);
    let rows: Vec<RowResult> = t
        .scan_at(Scan::new(), &copy)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(rows, then);
}
