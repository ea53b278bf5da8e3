//! `Admin::check_table`: the integrity check of a table's store files, through the public API.
//!
//! A table of two regions and two families (`f`: LZ4, ROW bloom, 1 KiB blocks; `g`: no
//! compression, ROWCOL bloom), flushed twice so every store has two files, is checked while
//! the engine is open. A healthy table reports no problem and counts every file, block and
//! cell. Then one file is damaged on disk - a byte flipped in a data block, in the index, in
//! the trailer; the file truncated; the file deleted - and the report must name exactly that
//! file with the right kind of finding (and the offset of the damaged block), while every
//! other file stays healthy.

use basalt::client::Put;
use basalt::{
    BloomType, ColumnFamilyDescriptor, Compression, Config, Connection, Error, FindingKind,
    IntegrityReport, PreSplit, StoreFileReport, TableDescriptor, TableName,
};
use std::fs;
use std::path::{Path, PathBuf};

const ROWS: usize = 200;

fn name() -> TableName {
    TableName::parse("t").unwrap()
}

/// Opens an engine in `dir` with a table of two regions and two families, each store holding
/// two files.
async fn loaded(dir: &Path) -> Connection {
    let conn = Connection::open_with(Config::new(dir)).await.unwrap();
    let admin = conn.admin();
    admin
        .create_table_with_splits(
            TableDescriptor::new(name())
                .family(
                    ColumnFamilyDescriptor::new("f")
                        .compression(Compression::Lz4)
                        .block_size(1024),
                )
                .family(ColumnFamilyDescriptor::new("g").bloom(BloomType::RowCol)),
            PreSplit::Keys(vec![b"row-0100".to_vec()]),
        )
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    for round in 0..2 {
        for i in 0..ROWS {
            let v = format!("value {round} {i} ").repeat(1 + i % 7);
            t.put(
                Put::new(format!("row-{i:04}"))
                    .add_column("f", "a", v.clone())
                    .add_column("f", "b", v.clone())
                    .add_column("g", format!("c{}", i % 3), v),
            )
            .await
            .unwrap();
        }
        admin.flush(&name()).await.unwrap();
    }
    conn
}

async fn check(conn: &Connection) -> IntegrityReport {
    conn.admin().check_table(&name()).await.unwrap()
}

/// The report of the one file at `path`, after asserting that every other file is healthy.
fn only_damaged<'a>(report: &'a IntegrityReport, path: &Path) -> &'a StoreFileReport {
    for f in &report.files {
        if f.check.path != path {
            assert!(
                f.check.is_healthy(),
                "{} should be healthy: {report}",
                f.check.path.display()
            );
        }
    }
    assert_eq!(report.files_damaged, 1, "{report}");
    let f = report
        .files
        .iter()
        .find(|f| f.check.path == path)
        .unwrap_or_else(|| panic!("{} not in the report: {report}", path.display()));
    assert!(!f.check.findings.is_empty());
    for finding in &f.check.findings {
        assert_eq!(finding.file, path, "a finding names the wrong file");
    }
    f
}

fn kinds(f: &StoreFileReport) -> Vec<FindingKind> {
    f.check.findings.iter().map(|x| x.kind).collect()
}

/// A store file of family `f` (LZ4, several data blocks) and its bytes.
async fn victim(conn: &Connection) -> (PathBuf, Vec<u8>) {
    let report = check(conn).await;
    let f = report
        .files
        .iter()
        .find(|f| f.family.as_ref() == b"f" && f.check.data_blocks > 2)
        .expect("a file of family f with several blocks");
    let path = f.check.path.clone();
    let bytes = fs::read(&path).unwrap();
    (path, bytes)
}

fn trailer_field(bytes: &[u8], at: usize) -> u64 {
    let t = bytes.len() - 60;
    u64::from_be_bytes(bytes[t + at..t + at + 8].try_into().unwrap())
}

#[tokio::test]
async fn a_healthy_table_reports_no_problem() {
    let dir = tempfile::tempdir().unwrap();
    let conn = loaded(dir.path()).await;
    let report = check(&conn).await;
    assert!(report.is_healthy(), "{report}");
    assert_eq!(report.regions, 2);
    assert_eq!(
        report.files_checked, 8,
        "2 regions x 2 families x 2 flushes: {report}"
    );
    assert_eq!(
        (report.files_missing, report.files_damaged, report.problems),
        (0, 0, 0)
    );
    assert_eq!(
        report.cells,
        2 * ROWS as u64 * 3,
        "every cell of both flushes"
    );
    assert!(report.data_blocks >= 8);
    assert!(report.findings().next().is_none());
    let sizes: u64 = report.files.iter().map(|f| f.check.file_size).sum();
    let on_disk: u64 = conn
        .admin()
        .regions(&name())
        .await
        .unwrap()
        .iter()
        .map(|r| r.store_file_size)
        .sum();
    assert_eq!(sizes, on_disk);
    assert!(matches!(
        conn.admin()
            .check_table(&TableName::parse("nope").unwrap())
            .await,
        Err(Error::TableNotFound(_))
    ));
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_flipped_data_block_byte_is_a_checksum_finding_at_that_block() {
    let dir = tempfile::tempdir().unwrap();
    let conn = loaded(dir.path()).await;
    let (path, mut bytes) = victim(&conn).await;
    let first_len = 9 + u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
    bytes[first_len + 12] ^= 0x20; // inside the second data block
    fs::write(&path, &bytes).unwrap();
    let report = check(&conn).await;
    let f = only_damaged(&report, &path);
    assert_eq!(kinds(f), [FindingKind::Checksum], "{report}");
    assert_eq!(f.check.findings[0].offset, first_len as u64);
    assert_eq!(report.problems, 1);
}

#[tokio::test]
async fn a_flipped_index_byte_is_a_finding_at_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let conn = loaded(dir.path()).await;
    let (path, mut bytes) = victim(&conn).await;
    let index_at = trailer_field(&bytes, 12);
    bytes[index_at as usize + 7] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let report = check(&conn).await;
    let f = only_damaged(&report, &path);
    assert_eq!(kinds(f), [FindingKind::Checksum], "{report}");
    assert_eq!(f.check.findings[0].offset, index_at);
    assert!(f.check.findings[0].reason.contains("index"), "{report}");
}

#[tokio::test]
async fn a_flipped_trailer_byte_is_a_trailer_finding() {
    let dir = tempfile::tempdir().unwrap();
    let conn = loaded(dir.path()).await;
    let (path, mut bytes) = victim(&conn).await;
    let n = bytes.len();
    bytes[n - 30] ^= 0x04; // inside the file-info block's offset
    fs::write(&path, &bytes).unwrap();
    let report = check(&conn).await;
    let f = only_damaged(&report, &path);
    assert_eq!(kinds(f), [FindingKind::Trailer], "{report}");
    assert_eq!(f.check.findings[0].offset, (n - 60) as u64);
}

#[tokio::test]
async fn a_truncated_file_is_reported_with_its_catalog_size() {
    let dir = tempfile::tempdir().unwrap();
    let conn = loaded(dir.path()).await;
    let (path, bytes) = victim(&conn).await;
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(bytes.len() as u64 / 2)
        .unwrap();
    let report = check(&conn).await;
    let f = only_damaged(&report, &path);
    assert_eq!(
        kinds(f),
        [FindingKind::Trailer, FindingKind::Catalog],
        "{report}"
    );
    assert!(f.check.findings[1]
        .reason
        .contains(&bytes.len().to_string()));
}

#[tokio::test]
async fn a_deleted_file_is_reported_missing() {
    let dir = tempfile::tempdir().unwrap();
    let conn = loaded(dir.path()).await;
    let (path, _) = victim(&conn).await;
    fs::remove_file(&path).unwrap();
    let report = check(&conn).await;
    let f = only_damaged(&report, &path);
    assert_eq!(kinds(f), [FindingKind::Missing], "{report}");
    assert!(f.is_missing());
    assert_eq!((report.files_checked, report.files_missing), (8, 1));
    assert!(report.to_string().contains(&path.display().to_string()));
}
