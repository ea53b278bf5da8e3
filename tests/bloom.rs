//! Bloom filters on the read path: a point get skips store files whose filter rules its row
//! out (counted in the region facts), returns the same cells as without filters, and a family
//! with no bloom filter never skips.

use basalt::client::{Get, Put};
use basalt::{BloomType, ColumnFamilyDescriptor, Connection, TableDescriptor, TableName};

/// A fresh engine with table `t` of one family `f` with `bloom` filters.
async fn table_with(bloom: BloomType) -> (tempfile::TempDir, Connection, TableName) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let name = TableName::parse("t").unwrap();
    conn.admin()
        .create_table(
            TableDescriptor::new(name.clone())
                .family(ColumnFamilyDescriptor::new("f").bloom(bloom)),
        )
        .await
        .unwrap();
    (dir, conn, name)
}

async fn two_files(bloom: BloomType) -> (tempfile::TempDir, Connection, TableName) {
    let (dir, conn, name) = table_with(bloom).await;
    let t = conn.table("t").unwrap();
    for batch in 0..2 {
        for i in 0..200 {
            let row = format!("r{batch}-{i:04}");
            t.put(Put::new(&row).add_column("f", "q", &row))
                .await
                .unwrap();
        }
        conn.admin().flush(&name).await.unwrap();
    }
    (dir, conn, name)
}

async fn skipped(conn: &Connection, name: &TableName) -> u64 {
    conn.admin()
        .regions(name)
        .await
        .unwrap()
        .iter()
        .map(|r| r.bloom_skipped_files)
        .sum()
}

#[tokio::test]
async fn point_gets_skip_files_the_row_filter_rules_out() {
    let (_dir, conn, name) = two_files(BloomType::Row).await;
    let t = conn.table("t").unwrap();
    assert_eq!(conn.admin().regions(&name).await.unwrap()[0].store_files, 2);
    for i in 0..200 {
        let row = format!("r0-{i:04}");
        let got = t.get(Get::new(&row)).await.unwrap();
        assert_eq!(
            got.value("f", "q").map(|v| v.to_vec()),
            Some(row.into_bytes())
        );
    }
    // Each get of a row in the older file may skip the newer one (1% false positives).
    assert!(skipped(&conn, &name).await >= 190);
    let before = skipped(&conn, &name).await;
    for i in 0..100 {
        assert!(t
            .get(Get::new(format!("absent-{i}")))
            .await
            .unwrap()
            .is_empty());
    }
    assert!(skipped(&conn, &name).await - before >= 190);
}

#[tokio::test]
async fn row_col_filter_needs_columns_and_no_filter_never_skips() {
    let (_dir, conn, name) = two_files(BloomType::RowCol).await;
    let t = conn.table("t").unwrap();
    let got = t
        .get(Get::new("r0-0001").add_column("f", "q"))
        .await
        .unwrap();
    assert_eq!(got.cells.len(), 1);
    let with_column = skipped(&conn, &name).await;
    assert!(with_column >= 1);
    // Without named columns a ROWCOL filter cannot answer.
    assert_eq!(t.get(Get::new("r0-0001")).await.unwrap().cells.len(), 1);
    assert_eq!(skipped(&conn, &name).await, with_column);

    let (_dir2, conn2, name2) = two_files(BloomType::None).await;
    let t2 = conn2.table("t").unwrap();
    assert_eq!(t2.get(Get::new("r1-0001")).await.unwrap().cells.len(), 1);
    assert_eq!(skipped(&conn2, &name2).await, 0);
}

/// Bytes on disk after writing the same 2,000 rows with bloom filters of `rate`.
async fn file_size_with_rate(rate: f64) -> basalt::Result<u64> {
    let dir = tempfile::tempdir()?;
    let conn =
        Connection::open_with(basalt::Config::new(dir.path()).bloom_error_rate(rate)).await?;
    let name = TableName::parse("t")?;
    conn.admin()
        .create_table(TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new("f")))
        .await?;
    let t = conn.table("t")?;
    for i in 0..2000 {
        t.put(Put::new(format!("row-{i:05}")).add_column("f", "q", "v"))
            .await?;
    }
    conn.admin().flush(&name).await?;
    let regions = conn.admin().regions(&name).await?;
    for i in (0..2000).step_by(97) {
        let row = t.get(Get::new(format!("row-{i:05}"))).await?;
        assert_eq!(row.cells.len(), 1);
    }
    conn.close().await?;
    Ok(regions.iter().map(|r| r.store_file_size).sum())
}

#[tokio::test]
async fn the_bloom_error_rate_sizes_new_filters() -> basalt::Result<()> {
    // About 9.6 bits per row at 1 %, 2.5 at 30 %: 2,000 rows differ by about 1.7 KB.
    let tight = file_size_with_rate(0.01).await?;
    let loose = file_size_with_rate(0.3).await?;
    assert!(
        tight > loose + 1000,
        "1 %: {tight} bytes, 30 %: {loose} bytes"
    );
    Ok(())
}

#[tokio::test]
async fn a_bloom_error_rate_outside_0_1_is_refused() {
    for rate in [0.0, 1.0, -0.5, f64::NAN] {
        let dir = tempfile::tempdir().unwrap();
        let r = Connection::open_with(basalt::Config::new(dir.path()).bloom_error_rate(rate)).await;
        assert!(
            matches!(r, Err(basalt::Error::BadArgument(_))),
            "rate {rate} was accepted"
        );
    }
}

/// A family delete marker masks every column of its row: a ROWCOL filter must not let a get
/// of named columns skip the file that holds only the marker (its column is the empty
/// qualifier). The same check decides which files a hook's view of a row reads.
#[tokio::test]
async fn row_col_filter_never_skips_a_family_delete() {
    use basalt::client::Delete;
    let (_dir, conn, name) = table_with(BloomType::RowCol).await;
    let t = conn.table("t").unwrap();
    for i in 0..50 {
        let row = format!("r{i:02}");
        t.put(Put::new(&row).add_column_ts("f", "q", 5, "v"))
            .await
            .unwrap();
    }
    conn.admin().flush(&name).await.unwrap();
    for i in (0..50).step_by(2) {
        t.delete(Delete::new(format!("r{i:02}")).add_family("f"))
            .await
            .unwrap();
    }
    t.delete(Delete::new("r01").add_family_version("f", 5))
        .await
        .unwrap();
    conn.admin().flush(&name).await.unwrap();
    assert_eq!(conn.admin().regions(&name).await.unwrap()[0].store_files, 2);
    for i in 0..50 {
        let row = format!("r{i:02}");
        let whole = t.get(Get::new(&row)).await.unwrap();
        let named = t.get(Get::new(&row).add_column("f", "q")).await.unwrap();
        let gone = i % 2 == 0 || i == 1;
        assert_eq!(whole.is_empty(), gone, "{row}");
        assert_eq!(named.is_empty(), gone, "{row} read by column");
    }
}
