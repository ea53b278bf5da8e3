//! Compaction through the public API: files a reader holds outlive the compaction that
//! replaced them and vanish when it drops them; files an interrupted compaction leaves are
//! cleaned at open without losing data; admin, periodic and background compactions reduce
//! file counts; writers to a store with too many files are slowed, never failed; and the
//! reference guide's examples of what flushes and major compactions remove.

use basalt::client::{Delete, Get, Put, Scan};
use basalt::{ColumnFamilyDescriptor, Config, Connection, TableDescriptor, TableName};
use futures::{StreamExt, TryStreamExt};
use std::path::Path;
use std::time::{Duration, Instant};

fn store_files_on_disk(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

async fn setup(config: Config, desc: TableDescriptor) -> (Connection, TableName) {
    let conn = Connection::open_with(config).await.unwrap();
    let name = desc.name.clone();
    conn.admin().create_table(desc).await.unwrap();
    (conn, name)
}

fn table(name: &str, max_versions: u32) -> TableDescriptor {
    TableDescriptor::new(TableName::parse(name).unwrap())
        .family(ColumnFamilyDescriptor::new("f").max_versions(max_versions))
}

async fn files(conn: &Connection, name: &TableName) -> usize {
    let regions = conn.admin().regions(name).await.unwrap();
    regions.iter().map(|r| r.store_files).sum()
}

async fn file_bytes(conn: &Connection, name: &TableName) -> u64 {
    let regions = conn.admin().regions(name).await.unwrap();
    regions.iter().map(|r| r.store_file_size).sum()
}

async fn cells(conn: &Connection, name: &TableName) -> u64 {
    let regions = conn.admin().regions(name).await.unwrap();
    regions.iter().map(|r| r.store_file_cells).sum()
}

/// Writes rows `r0000..r{n}` with value `tag`, then flushes.
///
/// Server-assigned timestamps are milliseconds, and two puts of one cell in the same
/// millisecond are one version (HBase's rule: the later overwrites the earlier). A fast
/// machine writes and flushes 50 rows inside one millisecond, so each call first lets the
/// clock move on: every call's cells are a version of their own.
async fn write_flush(conn: &Connection, name: &TableName, n: usize, tag: &str) {
    tokio::time::sleep(Duration::from_millis(2)).await;
    let t = conn.table(name.to_string()).unwrap();
    for i in 0..n {
        t.put(Put::new(format!("r{i:04}")).add_column("f", "q", tag))
            .await
            .unwrap();
    }
    conn.admin().flush(name).await.unwrap();
}

#[tokio::test]
async fn a_reader_keeps_its_files_until_it_drops_them() {
    let dir = tempfile::tempdir().unwrap();
    // min files 10: no background compaction interferes.
    let desc = table("t", 1).compaction_files(10, 10);
    let (conn, name) = setup(Config::new(dir.path()), desc).await;
    for tag in ["a", "b", "c"] {
        write_flush(&conn, &name, 600, tag).await;
    }
    assert_eq!(store_files_on_disk(dir.path()).len(), 3);
    let t = conn.table("t").unwrap();
    // The scan opens its region scanner (and so its files) on the first row, then reads on.
    let mut scan = t.scan(Scan::new()).unwrap();
    let first = scan.next().await.unwrap().unwrap();
    assert_eq!(first.value("f", "q").unwrap().as_ref(), b"c");

    // Delete every row, flush and major-compact. The open scan's read point is older than
    // the deletes, so the compaction keeps the rows it could still read whole.
    for i in 0..600 {
        t.delete(Delete::new(format!("r{i:04}"))).await.unwrap();
    }
    conn.admin().flush(&name).await.unwrap();
    conn.admin().major_compact(&name).await.unwrap();
    assert_eq!(files(&conn, &name).await, 1);
    assert!(t.get(Get::new("r0001")).await.unwrap().cells.is_empty());
    // The scan's three files are still on disk beside the new one; the markers' file, which
    // no reader held, is gone.
    assert_eq!(store_files_on_disk(dir.path()).len(), 4);
    let rest: Vec<_> = scan.try_collect().await.unwrap();
    assert_eq!(rest.len(), 599);
    assert!(rest
        .iter()
        .all(|r| r.value("f", "q").unwrap().as_ref() == b"c"));
    // Dropped at the stream's end: nobody holds them, so they are gone.
    assert_eq!(store_files_on_disk(dir.path()).len(), 1);
    // With no scan open, a major compaction drops the deleted rows and their markers.
    conn.admin().major_compact(&name).await.unwrap();
    assert_eq!(files(&conn, &name).await, 0);
    assert!(store_files_on_disk(dir.path()).is_empty());
    conn.close().await.unwrap();
}

#[tokio::test]
async fn files_of_an_interrupted_compaction_are_cleaned_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let desc = table("t", 1).compaction_files(10, 10);
    let (conn, name) = setup(Config::new(dir.path()), desc.clone()).await;
    for tag in ["a", "b", "c"] {
        write_flush(&conn, &name, 100, tag).await;
    }
    let inputs: Vec<(String, Vec<u8>)> = store_files_on_disk(dir.path())
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(dir.path().join("data").join(&f)).unwrap();
            (f, bytes)
        })
        .collect();
    conn.admin().major_compact(&name).await.unwrap();
    let output = store_files_on_disk(dir.path());
    assert_eq!(output.len(), 1);
    conn.close().await.unwrap();
    drop(conn);

    // Crash after the catalog update, before the inputs were deleted: put them back. And a
    // crash of a later compaction before its catalog update: an unlisted output (a copy of
    // an input under a new id) and a half-written temporary file.
    for (f, bytes) in &inputs {
        std::fs::write(dir.path().join("data").join(f), bytes).unwrap();
    }
    let data = dir.path().join("data");
    std::fs::write(data.join("0000000000009999.sf"), &inputs[0].1).unwrap();
    std::fs::write(data.join("0000000000010000.sf.tmp"), b"half a file").unwrap();

    let conn = Connection::open(dir.path()).await.unwrap();
    assert_eq!(store_files_on_disk(dir.path()), output);
    let t = conn.table("t").unwrap();
    let rows: Vec<_> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert_eq!(rows.len(), 100);
    assert!(rows
        .iter()
        .all(|r| r.value("f", "q").unwrap().as_ref() == b"c"));
    conn.close().await.unwrap();
}

#[tokio::test]
async fn admin_and_background_compactions_reduce_files() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, name) = setup(Config::new(dir.path()), table("t", 3)).await;
    // Two files: below the default minimum of three, nothing happens.
    write_flush(&conn, &name, 50, "a").await;
    write_flush(&conn, &name, 50, "b").await;
    conn.admin().compact(&name).await.unwrap();
    assert_eq!(files(&conn, &name).await, 2);
    // The third flush starts a background minor compaction.
    write_flush(&conn, &name, 50, "c").await;
    let start = Instant::now();
    while files(&conn, &name).await != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no background compaction"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A minor compaction drops nothing visible: three versions per cell remain.
    assert_eq!(cells(&conn, &name).await, 150);
    let t = conn.table("t").unwrap();
    let got = t.get(Get::new("r0007").max_versions(5)).await.unwrap();
    assert_eq!(got.cells.len(), 3);

    // Per region, by id; an unknown region is an error.
    let region = conn.admin().regions(&name).await.unwrap()[0].id;
    write_flush(&conn, &name, 50, "d").await;
    conn.admin()
        .major_compact_region(&name, region)
        .await
        .unwrap();
    // Max versions 3: the oldest version ("a") went.
    assert_eq!(
        (files(&conn, &name).await, cells(&conn, &name).await),
        (1, 150)
    );
    assert!(conn
        .admin()
        .compact_region(&name, region + 100)
        .await
        .is_err());
    conn.close().await.unwrap();
}

#[tokio::test]
async fn periodic_major_compaction_runs_on_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let desc = table("t", 1)
        .compaction_files(10, 10)
        .major_compaction_interval_ms(Some(300));
    let (conn, name) = setup(Config::new(dir.path()), desc).await;
    write_flush(&conn, &name, 20, "a").await;
    write_flush(&conn, &name, 20, "b").await;
    let start = Instant::now();
    while files(&conn, &name).await != 1 || cells(&conn, &name).await != 20 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no periodic compaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_store_at_the_blocking_count_compacts_below_the_minimum_file_count() {
    let dir = tempfile::tempdir().unwrap();
    // A blocking wait far longer than a compaction of a few rows takes on a loaded machine,
    // so a writer that waited it out stands apart from one that did not.
    let config = Config::new(dir.path())
        .blocking_store_files(3)
        .blocking_wait_ms(30_000);
    // Minor compactions want 5 files, but a store holding 4 (past the blocking count of 3)
    // must not stay stuck: it compacts what it has.
    let (conn, name) = setup(config, table("t", 1).compaction_files(5, 10)).await;
    for tag in ["a", "b", "c", "d"] {
        write_flush(&conn, &name, 10, tag).await;
    }
    let t = conn.table("t").unwrap();
    let start = Instant::now();
    t.put(Put::new("x").add_column("f", "q", "w"))
        .await
        .unwrap();
    while files(&conn, &name).await > 3 {
        assert!(start.elapsed() < Duration::from_secs(15), "no compaction");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the writer waited for the whole blocking wait"
    );
    let row = t.get(Get::new("r0003")).await.unwrap();
    assert_eq!(row.value("f", "q").unwrap().as_ref(), b"d");
    conn.close().await.unwrap();
}

/// The reference guide's "Keeping deleted cells" example: without keep-deleted-cells a
/// flush drops the put a DeleteColumn masks (the marker stays); with it, both stay.
#[tokio::test]
async fn flush_drops_a_masked_put_unless_deleted_cells_are_kept() {
    for (keep, want) in [(false, 1), (true, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let desc = TableDescriptor::new(TableName::parse("t").unwrap()).family(
            ColumnFamilyDescriptor::new("f")
                .max_versions(3)
                .keep_deleted_cells(keep),
        );
        let (conn, name) = setup(Config::new(dir.path()), desc).await;
        let t = conn.table("t").unwrap();
        t.put(Put::new("r1").add_column_ts("f", "c1", 5, "value"))
            .await
            .unwrap();
        t.delete(Delete::new("r1").add_columns_ts("f", "c1", 10))
            .await
            .unwrap();
        conn.admin().flush(&name).await.unwrap();
        assert_eq!(cells(&conn, &name).await, want, "keep-deleted-cells {keep}");
        assert!(t.get(Get::new("r1")).await.unwrap().cells.is_empty());
        conn.close().await.unwrap();
    }
}

/// The reference guide's "Major compactions change query results": with max versions 2
/// and versions at t1..t3, deleting t3 lets t1 reappear - until a major compaction has
/// dropped t1. And "Deletes mask puts": a put below a DeleteColumn is masked, until a major
/// compaction has dropped the marker.
#[tokio::test]
async fn major_compaction_changes_later_results_as_hbase_documents() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, name) = setup(Config::new(dir.path()), table("t", 2)).await;
    let t = conn.table("t").unwrap();
    let versions = |r: basalt::client::RowResult| -> Vec<u64> {
        r.cells.iter().map(|c| c.timestamp).collect()
    };
    for row in ["before", "after"] {
        for ts in 1..=3 {
            t.put(Put::new(row).add_column_ts("f", "q", ts, format!("v{ts}")))
                .await
                .unwrap();
        }
    }
    t.delete(Delete::new("before").add_column_ts("f", "q", 3))
        .await
        .unwrap();
    let all = |row: &str| Get::new(row).max_versions(5);
    assert_eq!(versions(t.get(all("before")).await.unwrap()), vec![2, 1]);
    conn.admin().flush(&name).await.unwrap();
    conn.admin().major_compact(&name).await.unwrap();
    t.delete(Delete::new("after").add_column_ts("f", "q", 3))
        .await
        .unwrap();
    assert_eq!(versions(t.get(all("after")).await.unwrap()), vec![2]);

    t.delete(Delete::new("m").add_columns_ts("f", "q", 10))
        .await
        .unwrap();
    t.put(Put::new("m").add_column_ts("f", "q", 5, "masked"))
        .await
        .unwrap();
    assert!(t.get(Get::new("m")).await.unwrap().cells.is_empty());
    t.delete(Delete::new("n").add_columns_ts("f", "q", 10))
        .await
        .unwrap();
    conn.admin().flush(&name).await.unwrap();
    conn.admin().major_compact(&name).await.unwrap();
    t.put(Put::new("n").add_column_ts("f", "q", 5, "visible"))
        .await
        .unwrap();
    assert_eq!(versions(t.get(Get::new("n")).await.unwrap()), vec![5]);
    assert!(t.get(Get::new("m")).await.unwrap().cells.is_empty());
    conn.close().await.unwrap();
}

/// A scan opens each region's scanner when it gets there, at the read point it took when it
/// began: a major compaction of a later region meanwhile must keep what that read point sees.
#[tokio::test]
async fn a_scan_reaching_a_region_after_its_compaction_reads_its_own_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let name = TableName::parse("t").unwrap();
    conn.admin()
        .create_table_with_splits(
            table("t", 1),
            basalt::PreSplit::Keys(vec![b"r0500".to_vec()]),
        )
        .await
        .unwrap();
    write_flush(&conn, &name, 1000, "old").await;
    let t = conn.table("t").unwrap();
    let mut scan = t.scan(Scan::new()).unwrap();
    let first = scan.next().await.unwrap().unwrap();
    assert_eq!(first.row.as_ref(), b"r0000");
    // Rewrite and delete rows of the second region, then major-compact it.
    for i in 500..1000 {
        let row = format!("r{i:04}");
        if i % 2 == 0 {
            t.delete(Delete::new(&row)).await.unwrap();
        } else {
            t.put(Put::new(&row).add_column("f", "q", "new"))
                .await
                .unwrap();
        }
    }
    conn.admin().flush(&name).await.unwrap();
    conn.admin().major_compact(&name).await.unwrap();
    let rest: Vec<_> = scan.try_collect().await.unwrap();
    assert_eq!(rest.len(), 999);
    assert!(rest
        .iter()
        .all(|r| r.value("f", "q").unwrap().as_ref() == b"old"));
    // A new scan sees the new state.
    let now: Vec<_> = t.scan(Scan::new()).unwrap().try_collect().await.unwrap();
    assert_eq!(now.len(), 750);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_flush_whose_cells_all_expired_writes_no_file_but_counts() {
    let dir = tempfile::tempdir().unwrap();
    let desc = TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("f").ttl_secs(60));
    let (conn, name) = setup(Config::new(dir.path()), desc).await;
    let t = conn.table("t").unwrap();
    // Timestamp 1 ms after the epoch: long past the 60 s TTL, so the flush drops it.
    t.put(Put::new("r").add_column_ts("f", "q", 1, "old"))
        .await
        .unwrap();
    conn.admin().flush(&name).await.unwrap();
    assert_eq!(files(&conn, &name).await, 0, "no empty store file");
    assert!(store_files_on_disk(dir.path()).is_empty());
    let regions = conn.admin().regions(&name).await.unwrap();
    assert_eq!(regions[0].memstore_size, 0, "the snapshot is gone");
    assert!(t.get(Get::new("r")).await.unwrap().is_empty());
    // A live cell afterwards flushes into a file as usual, and survives a reopen.
    t.put(Put::new("r").add_column("f", "q", "new"))
        .await
        .unwrap();
    conn.admin().flush(&name).await.unwrap();
    assert_eq!(files(&conn, &name).await, 1);
    conn.close().await.unwrap();
    let conn = Connection::open_with(Config::new(dir.path()))
        .await
        .unwrap();
    let row = conn.table("t").unwrap().get(Get::new("r")).await.unwrap();
    assert_eq!(
        row.value("f", "q").map(|v| v.to_vec()),
        Some(b"new".to_vec())
    );
}

#[tokio::test]
async fn open_refuses_a_blocking_store_file_count_below_two() {
    let dir = tempfile::tempdir().unwrap();
    for files in [0, 1] {
        let config = Config::new(dir.path()).blocking_store_files(files);
        match Connection::open_with(config).await {
            Err(basalt::Error::BadArgument(m)) => assert!(m.contains("blocking"), "{m}"),
            other => panic!(
                "blocking_store_files({files}) was accepted: {:?}",
                other.err()
            ),
        }
    }
    let conn = Connection::open_with(Config::new(dir.path()).blocking_store_files(2))
        .await
        .unwrap();
    conn.close().await.unwrap();
}

/// HBase's `COMPRESSION_COMPACT`: flushes write with the family's compression (here none),
/// compactions with the compaction compression (here LZ4). Highly compressible values make
/// the difference visible in the files' sizes; the setting survives a reopen.
#[tokio::test]
async fn compactions_write_with_the_compaction_compression() {
    use basalt::Compression;
    let dir = tempfile::tempdir().unwrap();
    let desc = TableDescriptor::new(TableName::parse("z").unwrap()).family(
        ColumnFamilyDescriptor::new("f")
            .compression(Compression::None)
            .compaction_compression(Compression::Lz4),
    );
    let (conn, name) = setup(Config::new(dir.path()), desc).await;
    let t = conn.table("z").unwrap();
    for i in 0..200 {
        t.put(Put::new(format!("r{i:04}")).add_column("f", "q", vec![b'x'; 1000]))
            .await
            .unwrap();
    }
    conn.admin().flush(&name).await.unwrap();
    let flushed = file_bytes(&conn, &name).await;
    // 200 values of 1000 bytes, stored as they are.
    assert!(flushed > 200_000, "flushed {flushed} bytes");
    conn.admin().major_compact(&name).await.unwrap();
    let compacted = file_bytes(&conn, &name).await;
    assert_eq!(files(&conn, &name).await, 1);
    assert!(
        compacted * 5 < flushed,
        "compacted {compacted} bytes, flushed {flushed}"
    );
    let got = t.get(Get::new("r0150")).await.unwrap();
    assert_eq!(got.cells[0].value.as_ref(), &[b'x'; 1000][..]);
    conn.close().await.unwrap();

    let conn = Connection::open_with(Config::new(dir.path()))
        .await
        .unwrap();
    let d = conn.admin().describe_table(&name).await.unwrap();
    assert_eq!(d.families[0].compression, Compression::None);
    assert_eq!(d.families[0].compaction_compression, Some(Compression::Lz4));
    conn.close().await.unwrap();
}
