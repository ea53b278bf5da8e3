//! Torn and corrupt files, through the public API only: damage never makes the engine panic,
//! never makes it serve wrong data, and is always reported.
//!
//! * WAL (`wal/wal-{id:020}.log`): rows acknowledged with `SyncWal` are in the segment file
//!   at acknowledgement time (the engine is dropped without `close`, so nothing was flushed
//!   and the rows exist only in the WAL). The newest segment is then cut at many offsets
//!   (inside the header, inside a frame header, inside a payload, at a record boundary),
//!   has a byte flipped (in the header, a length field, a payload) or gets a zeroed tail;
//!   an older segment is damaged while newer ones exist. The default recovery mode either
//!   refuses (`WalCorruption` naming the segment, nothing changed) or cuts the newest
//!   segment's tail; in point-in-time mode reopening never fails: exactly the records
//!   before the damage are readable (a prefix, nothing after a hole), a warning naming the
//!   segment is logged, the engine takes new writes and they survive another reopen.
//! * Store files (`data/{id:016}-g{generation}.sf`): a flipped byte in a data block leaves open working
//!   and makes exactly the reads that touch that block fail with `Error::Corruption` whose
//!   `file` is that store file; reads of other blocks still succeed. A flipped trailer or
//!   index byte, a truncated file, or a missing file takes its region offline: the engine
//!   opens, and the region's reads and writes fail with `RegionOffline` naming the file.
//! * Catalog (`catalog`): a flipped payload byte, a bad magic or a truncated file makes open
//!   fail with `Corruption` naming the catalog; a leftover `catalog.tmp` (a crash during a
//!   catalog write) is ignored.
//!
//! Every case runs twice (modules `directory` and `object_store`): on the data directory, and
//! with the catalog, the store files and the WAL in an object store (`<dir>/objects`, the
//! `object_store` crate's `LocalFileSystem`), where the WAL is one segment object per group
//! commit (`wal/w{writer}/{id}`), the catalog a versioned object (`catalog/{n}`), and the
//! damage is done to the objects' files. On the object store, an open also claims the
//! catalog and fences the earlier WAL writers, so a refused open may add objects; it never
//! changes or removes one.

use basalt::client::{Get, Put, Scan};
use basalt::objects::{Objects, StoreObjects};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, TableDescriptor, TableName,
    WalRecoveryMode,
};
use futures::StreamExt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};

const FAMILY: &str = "f";
const QUALIFIER: &str = "q";

// ---------------------------------------------------------------------------------------
// Captured log output (one global subscriber; tests filter it by their own paths).
// ---------------------------------------------------------------------------------------

static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn init_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing_subscriber::fmt()
            .with_writer(|| LogWriter)
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .init();
    });
}

/// Warning lines that mention `needle`.
fn warnings_about(needle: &Path) -> Vec<String> {
    let needle = needle.display().to_string();
    let logs = LOGS.lock().unwrap();
    String::from_utf8_lossy(&logs)
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(&needle))
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Where the engine keeps its files.
// ---------------------------------------------------------------------------------------

/// Where a case's engine keeps its catalog, store files and WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// The data directory (the default).
    Directory,
    /// An object store in `<dir>/objects`.
    ObjectStore,
}

impl Backend {
    /// The engine's configuration for data directory `dir`.
    fn config(self, dir: &Path) -> Config {
        match self {
            Backend::Directory => Config::new(dir),
            Backend::ObjectStore => Config::new(dir).objects(Arc::new(self.store(dir))),
        }
    }

    fn store(self, dir: &Path) -> StoreObjects {
        let root = dir.join("objects");
        fs::create_dir_all(&root).unwrap();
        StoreObjects::local_directory(&root).unwrap()
    }

    /// The folder holding the engine's objects: `catalog`, `data/`, `wal/`.
    fn root(self, dir: &Path) -> PathBuf {
        match self {
            Backend::Directory => dir.to_path_buf(),
            Backend::ObjectStore => dir.join("objects"),
        }
    }

    /// The object name of the file at `path` (its path under the root).
    fn object_name(self, dir: &Path, path: &Path) -> String {
        path.strip_prefix(self.root(dir))
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// How the engine names the catalog or store file at `path` in its errors.
    fn file_named(self, dir: &Path, path: &Path) -> PathBuf {
        match self {
            Backend::Directory => path.to_path_buf(),
            Backend::ObjectStore => self.store(dir).locate(&self.object_name(dir, path)),
        }
    }

    /// How the engine names the WAL segment at `path` in its errors and warnings.
    fn segment_named(self, dir: &Path, path: &Path) -> PathBuf {
        match self {
            Backend::Directory => path.to_path_buf(),
            Backend::ObjectStore => PathBuf::from(self.object_name(dir, path)),
        }
    }

    /// The live WAL segments (not set aside), in order: `wal/wal-{id:020}.log` files, or
    /// `wal/w{writer:010}/{id:020}` objects.
    fn segments(self, dir: &Path) -> Vec<PathBuf> {
        let wal = self.root(dir).join("wal");
        let mut segs: Vec<PathBuf> = match self {
            Backend::Directory => fs::read_dir(&wal)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    name.starts_with("wal-") && name.ends_with(".log") && name.len() == 28
                })
                .collect(),
            Backend::ObjectStore => files_under(&wal)
                .into_iter()
                .filter(|p| {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit())
                })
                .collect(),
        };
        segs.sort();
        segs
    }

    /// The catalog: `catalog`, or the newest `catalog/{n:020}` object.
    fn catalog(self, dir: &Path) -> PathBuf {
        match self {
            Backend::Directory => dir.join("catalog"),
            Backend::ObjectStore => {
                let mut versions = files_under(&self.root(dir).join("catalog"));
                versions.sort();
                versions.pop().expect("a catalog version")
            }
        }
    }
}

/// Every file under `dir`, at any depth (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Declares each case once per backend: `directory::<case>` and `object_store::<case>`.
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod directory {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::Backend::Directory).await
            })*
        }
        mod object_store {
            $(#[tokio::test]
            async fn $case() {
                super::$case(super::Backend::ObjectStore).await
            })*
        }
    };
}

on_both_backends!(
    wal_cut_inside_a_frame_header_keeps_the_records_before,
    wal_cut_inside_a_payload_keeps_the_records_before,
    wal_cut_at_a_record_boundary_loses_nothing_before_it,
    wal_flipped_payload_byte_cuts_at_that_record,
    wal_flipped_length_or_checksum_byte_cuts_at_that_record,
    wal_zeroed_tail_is_cut_and_every_record_kept,
    wal_damaged_header_drops_that_segment,
    wal_damage_in_an_older_segment_drops_everything_after_it,
    wal_damaged_header_of_an_older_segment_drops_it_and_the_rest,
    wal_damage_moves_later_segments_aside,
    store_file_flipped_data_byte_fails_only_reads_of_that_block,
    store_file_flipped_trailer_or_index_byte_takes_its_region_offline,
    store_file_truncated_or_missing_takes_its_region_offline,
    intact_store_file_fixture_reads_back,
    corrupt_catalog_fails_open_naming_it,
    leftover_catalog_tmp_is_ignored,
);

// ---------------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------------

fn row(i: usize) -> String {
    format!("row-{i:04}")
}

/// Values of varying length, so records and blocks have varying sizes.
fn value(i: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.extend(std::iter::repeat_n(
        b'a' + (i % 26) as u8,
        20 + (i * 37) % 90,
    ));
    v
}

fn table_name() -> TableName {
    TableName::parse("t").unwrap()
}

/// A table pre-split into three regions, so one WAL holds edits of several regions.
async fn create_table(conn: &Connection, block_size: Option<u32>) {
    let mut cf = ColumnFamilyDescriptor::new(FAMILY);
    if let Some(b) = block_size {
        cf = cf.block_size(b);
    }
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(table_name()).family(cf),
            PreSplit::Keys(vec![b"row-0020".to_vec(), b"row-0040".to_vec()]),
        )
        .await
        .unwrap();
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x5A;
    fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path, len: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn append(path: &Path, extra: &[u8]) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(extra)
        .unwrap();
}

/// Copies a closed engine directory (files only, one level of subdirectories).
fn copy_dir(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else if entry.file_name() != "LOCK" {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Checks that rows `0..n` are present with their values when `i < survivors` and absent
/// otherwise, by get and by scan; and that nothing else is in the table.
async fn check_prefix(conn: &Connection, n: usize, survivors: usize, extra: &[&str], what: &str) {
    let table = conn.table("t").unwrap();
    for i in 0..n {
        let r = table
            .get(Get::new(row(i)))
            .await
            .unwrap_or_else(|e| panic!("{what}: get {} failed: {e}", row(i)));
        if i < survivors {
            assert_eq!(
                r.value(FAMILY, QUALIFIER).map(|v| v.to_vec()),
                Some(value(i)),
                "{what}: {} was written before the damage and must be readable",
                row(i)
            );
        } else {
            assert!(
                r.is_empty(),
                "{what}: {} was written after the damage and must not be replayed (after a \
                 hole), found {r:?}",
                row(i)
            );
        }
    }
    let rows: Vec<String> = table
        .scan(Scan::new())
        .unwrap()
        .map(|r| String::from_utf8(r.unwrap().row.to_vec()).unwrap())
        .collect()
        .await;
    let mut expected: Vec<String> = (0..survivors).map(row).collect();
    expected.extend(extra.iter().map(|s| s.to_string()));
    expected.sort();
    assert_eq!(rows, expected, "{what}: scan after recovery");
}

// ---------------------------------------------------------------------------------------
// (a) WAL segments.
// ---------------------------------------------------------------------------------------

/// Where one acknowledged row's WAL record ended: its segment and end offset.
#[derive(Debug, Clone)]
struct RecordEnd {
    segment: PathBuf,
    end: u64,
}

/// The live segment holding records, the last in order.
fn newest_segment_with_records(b: Backend, dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> = b
        .segments(dir)
        .into_iter()
        // Past the 24-byte header and the opening marker (under 20 bytes): a record.
        .filter(|p| fs::metadata(p).unwrap().len() > 24 + 20)
        .collect();
    segs.pop().expect("a WAL segment with records")
}

/// Writes rows `0..n` (each acknowledged with the default `SyncWal`), records where each
/// one's WAL record ends, and drops the engine without closing it: the rows are only in
/// the WAL.
async fn write_wal_only(b: Backend, dir: &Path, n: usize, segment_size: u64) -> Vec<RecordEnd> {
    let conn = Connection::open_with(b.config(dir).wal_segment_size(segment_size))
        .await
        .unwrap();
    create_table(&conn, None).await;
    let table = conn.table("t").unwrap();
    let mut ends = Vec::with_capacity(n);
    for i in 0..n {
        table
            .put(Put::new(row(i)).add_column(FAMILY, QUALIFIER, value(i)))
            .await
            .unwrap();
        // SyncWal: the record is in the file (written to the OS) once the put returns.
        let segment = newest_segment_with_records(b, dir);
        let end = fs::metadata(&segment).unwrap().len();
        ends.push(RecordEnd { segment, end });
    }
    drop(table);
    drop(conn); // no close: nothing is flushed
    assert_eq!(
        files_under(&b.root(dir).join("data")).len(),
        0,
        "dropping without close must not flush"
    );
    ends
}

/// Every file under the WAL's folder with its bytes.
fn dir_bytes(b: Backend, dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = files_under(&b.root(dir).join("wal"))
        .into_iter()
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    v.sort();
    v
}

/// The start offset of record `i`.
fn record_start(ends: &[RecordEnd], i: usize) -> u64 {
    match i.checked_sub(1).map(|p| &ends[p]) {
        Some(prev) if prev.segment == ends[i].segment => prev.end,
        _ => 24,
    }
}

/// The first record damaged by damage at `offset` of `segment` (`ends.len()` if none).
fn first_damaged(ends: &[RecordEnd], segment: &Path, offset: u64) -> usize {
    ends.iter()
        .position(|e| e.segment == segment && e.end > offset)
        .unwrap_or(ends.len())
}

#[derive(Debug, Clone, Copy)]
enum WalDamage {
    /// Cut the segment to this length.
    Cut(u64),
    /// Flip the byte at this offset.
    Flip(u64),
    /// Append zero bytes (a preallocated or zero-filled tail).
    ZeroTail(usize),
}

/// Writes `n` rows, damages `segment_of(ends)` as told, reopens, and checks the outcome.
async fn wal_case(
    b: Backend,
    n: usize,
    segment_size: u64,
    pick: impl Fn(&[RecordEnd]) -> (PathBuf, WalDamage, usize),
    expect_warning: bool,
) {
    init_logs();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ends = write_wal_only(b, dir, n, segment_size).await;
    let (segment, damage, survivors) = pick(&ends);
    let what = format!(
        "{b:?}: {damage:?} of {} (segments {}..{})",
        segment.file_name().unwrap().to_string_lossy(),
        ends[0].segment.file_name().unwrap().to_string_lossy(),
        ends[n - 1].segment.file_name().unwrap().to_string_lossy()
    );
    match damage {
        WalDamage::Cut(len) => truncate(&segment, len),
        WalDamage::Flip(at) => flip(&segment, at),
        WalDamage::ZeroTail(k) => append(&segment, &vec![0u8; k]),
    }

    // The default mode either refuses, naming the segment and changing nothing, or gives
    // the same prefix point in time gives.
    let before = dir_bytes(b, dir);
    // What each open reported: its warning must say the same.
    let mut reports = Vec::new();
    match Connection::open_with(b.config(dir)).await {
        Err(Error::WalCorruption { segment: s, .. }) => {
            assert_eq!(
                s,
                b.segment_named(dir, &segment),
                "{what}: the refusal names another segment"
            );
            let after = dir_bytes(b, dir);
            match b {
                Backend::Directory => {
                    assert!(after == before, "{what}: a refused open changed files")
                }
                // A fence may be added; nothing is changed or removed.
                Backend::ObjectStore => assert!(
                    before.iter().all(|f| after.contains(f)),
                    "{what}: a refused open changed objects"
                ),
            }
        }
        Err(e) => panic!("{what}: open after WAL damage failed: {e}"),
        Ok(conn) => {
            check_prefix(&conn, n, survivors, &[], &what).await;
            reports.push(conn.recovery_report());
            conn.close().await.unwrap();
        }
    }
    let conn = Connection::open_with(b.config(dir).wal_recovery(WalRecoveryMode::PointInTime))
        .await
        .unwrap_or_else(|e| panic!("{what}: point-in-time open after WAL damage failed: {e}"));
    check_prefix(&conn, n, survivors, &[], &what).await;
    reports.push(conn.recovery_report());
    // The first open that succeeded replayed the damaged WAL, which alone held the rows:
    // every survivor was replayed (it flushed them at close, so the next replays none).
    let first = &reports[0];
    assert!(
        first.cells_replayed >= survivors,
        "{what}: the report says {} cells replayed for {survivors} surviving rows",
        first.cells_replayed
    );
    let named = b.segment_named(dir, &segment);
    let warnings = warnings_about(&named);
    if expect_warning {
        assert!(
            !warnings.is_empty(),
            "{what}: no warning names {}",
            named.display()
        );
    }
    // The summary is written after the replay, with the figures of the report of its open:
    // an open that found damage says exactly what its report says.
    for r in reports.iter().filter(|r| !r.damage.is_empty()) {
        let summary = format!("WAL recovery found damage: {r}");
        assert!(
            warnings.iter().any(|w| w.contains(&summary)),
            "{what}: no warning says {summary:?}; the warnings: {warnings:?}"
        );
    }
    // Segments after a damaged one were moved aside, never deleted or replayed.
    let later: Vec<&PathBuf> = ends
        .iter()
        .map(|e| &e.segment)
        .filter(|s| **s > segment)
        .collect();
    for s in later {
        assert!(
            !s.exists(),
            "{what}: {} follows the damage yet is still live",
            s.display()
        );
    }

    // The engine takes new writes after recovery, and they survive a clean reopen.
    let table = conn.table("t").unwrap();
    table
        .put(Put::new("zz-after").add_column(FAMILY, QUALIFIER, "new"))
        .await
        .unwrap_or_else(|e| panic!("{what}: write after recovery failed: {e}"));
    drop(table);
    conn.close().await.unwrap();
    for round in 0..2 {
        let conn = Connection::open_with(b.config(dir))
            .await
            .unwrap_or_else(|e| panic!("{what}: reopen {round} failed: {e}"));
        check_prefix(
            &conn,
            n,
            survivors,
            &["zz-after"],
            &format!("{what}, reopen {round}"),
        )
        .await;
        conn.close().await.unwrap();
    }
}

const N: usize = 40;
const BIG: u64 = 64 << 20;

async fn wal_cut_inside_a_frame_header_keeps_the_records_before(b: Backend) {
    for k in [0, 17, N - 1] {
        wal_case(
            b,
            N,
            BIG,
            |ends| {
                let at = record_start(ends, k) + 3;
                (ends[k].segment.clone(), WalDamage::Cut(at), k)
            },
            true,
        )
        .await;
    }
}

async fn wal_cut_inside_a_payload_keeps_the_records_before(b: Backend) {
    for k in [0, 9, 23, N - 1] {
        for back in [1, 5] {
            wal_case(
                b,
                N,
                BIG,
                |ends| {
                    (
                        ends[k].segment.clone(),
                        WalDamage::Cut(ends[k].end - back),
                        k,
                    )
                },
                true,
            )
            .await;
        }
    }
}

async fn wal_cut_at_a_record_boundary_loses_nothing_before_it(b: Backend) {
    for k in [0, 20, N - 1] {
        // Cut right after record k: the records before the cut survive, and the segment is
        // clean (in one file, records 0..=k; on the object store, where record k is a whole
        // segment object, all of them).
        wal_case(
            b,
            N,
            BIG,
            |ends| {
                let seg = ends[k].segment.clone();
                let survivors = first_damaged(ends, &seg, ends[k].end);
                assert_eq!(survivors, if b == Backend::Directory { k + 1 } else { N });
                (seg, WalDamage::Cut(ends[k].end), survivors)
            },
            false,
        )
        .await;
    }
}

async fn wal_flipped_payload_byte_cuts_at_that_record(b: Backend) {
    for k in [0, 13, 31, N - 1] {
        wal_case(
            b,
            N,
            BIG,
            |ends| {
                let start = record_start(ends, k);
                let at = start + 8 + (ends[k].end - start - 8) / 2;
                (ends[k].segment.clone(), WalDamage::Flip(at), k)
            },
            true,
        )
        .await;
    }
}

async fn wal_flipped_length_or_checksum_byte_cuts_at_that_record(b: Backend) {
    for k in [0, 25, N - 1] {
        // Byte 0 is the length's top byte (absurd length), byte 3 its low byte (checksum
        // then covers the wrong bytes, or the frame looks torn), byte 6 is in the CRC.
        for field in [0, 3, 6] {
            wal_case(
                b,
                N,
                BIG,
                |ends| {
                    let at = record_start(ends, k) + field;
                    (ends[k].segment.clone(), WalDamage::Flip(at), k)
                },
                true,
            )
            .await;
        }
    }
}

async fn wal_zeroed_tail_is_cut_and_every_record_kept(b: Backend) {
    for k in [1, 8, 64] {
        wal_case(
            b,
            N,
            BIG,
            |ends| {
                let at = ends[N - 1].end;
                (
                    ends[N - 1].segment.clone(),
                    WalDamage::ZeroTail(k),
                    first_damaged(ends, &ends[N - 1].segment, at),
                )
            },
            true,
        )
        .await;
    }
}

async fn wal_damaged_header_drops_that_segment(b: Backend) {
    // Torn header (cut inside it), empty file, flipped magic / id / header checksum.
    for damage in [
        WalDamage::Cut(10),
        WalDamage::Cut(0),
        WalDamage::Flip(2),
        WalDamage::Flip(15),
        WalDamage::Flip(22),
    ] {
        wal_case(b, N, BIG, |ends| (ends[0].segment.clone(), damage, 0), true).await;
    }
}

async fn wal_damage_in_an_older_segment_drops_everything_after_it(b: Backend) {
    // 1 KiB segments: the rows spread over several segments.
    let n = 80;
    for (which, damage_at) in [(0.3, "payload"), (0.6, "cut"), (0.95, "payload")] {
        wal_case(
            b,
            n,
            1024,
            |ends| {
                let segs: Vec<&PathBuf> = {
                    let mut s: Vec<&PathBuf> = ends.iter().map(|e| &e.segment).collect();
                    s.dedup();
                    s
                };
                assert!(segs.len() >= 4, "expected several segments, got {segs:?}");
                let k = ((n as f64) * which) as usize;
                let seg = ends[k].segment.clone();
                let start = record_start(ends, k);
                let damage = if damage_at == "cut" {
                    WalDamage::Cut(start + 5)
                } else {
                    WalDamage::Flip(start + 12)
                };
                (seg, damage, k)
            },
            true,
        )
        .await;
    }
}

async fn wal_damaged_header_of_an_older_segment_drops_it_and_the_rest(b: Backend) {
    let n = 80;
    wal_case(
        b,
        n,
        1024,
        |ends| {
            let k = ends
                .iter()
                .position(|e| e.segment != ends[0].segment)
                .expect("a second segment");
            (ends[k].segment.clone(), WalDamage::Flip(5), k)
        },
        true,
    )
    .await;
}

async fn wal_damage_moves_later_segments_aside(b: Backend) {
    init_logs();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ends = write_wal_only(b, dir, 80, 1024).await;
    let first = ends[0].segment.clone();
    let later: Vec<PathBuf> = {
        let mut s: Vec<PathBuf> = ends
            .iter()
            .map(|e| e.segment.clone())
            .filter(|s| *s != first)
            .collect();
        s.dedup();
        s
    };
    assert!(!later.is_empty());
    flip(&first, 30);
    let err = Connection::open_with(b.config(dir)).await.unwrap_err();
    assert!(
        matches!(&err, Error::WalCorruption { segment, .. } if *segment == b.segment_named(dir, &first)),
        "{err}"
    );
    let conn = Connection::open_with(b.config(dir).wal_recovery(WalRecoveryMode::PointInTime))
        .await
        .unwrap();
    for s in &later {
        let mut aside = s.as_os_str().to_owned();
        aside.push(".corrupt");
        assert!(
            Path::new(&aside).exists(),
            "{} must be moved aside as {}",
            s.display(),
            Path::new(&aside).display()
        );
        assert!(
            !warnings_about(&b.segment_named(dir, s)).is_empty(),
            "moving {} aside must be logged",
            s.display()
        );
    }
    conn.close().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// (b) Store files.
// ---------------------------------------------------------------------------------------

const SF_ROWS: usize = 400;

/// A closed engine whose table (one region) holds `SF_ROWS` rows in one store file of many
/// 1 KiB blocks, and nothing in the WAL.
async fn store_file_fixture(b: Backend, dir: &Path) -> PathBuf {
    let conn = Connection::open_with(b.config(dir)).await.unwrap();
    conn.admin()
        .create_table(
            TableDescriptor::new(table_name())
                .family(ColumnFamilyDescriptor::new(FAMILY).block_size(1024)),
        )
        .await
        .unwrap();
    let table = conn.table("t").unwrap();
    for i in 0..SF_ROWS {
        table
            .put(Put::new(row(i)).add_column(FAMILY, QUALIFIER, value(i)))
            .await
            .unwrap();
    }
    conn.admin().flush(&table_name()).await.unwrap();
    drop(table);
    conn.close().await.unwrap();
    let files: Vec<PathBuf> = files_under(&b.root(dir).join("data"));
    assert_eq!(files.len(), 1, "one store file expected, found {files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.len() == 22 && name.ends_with("-g1.sf"),
        "store file name {name}"
    );
    files[0].clone()
}

/// A fresh copy of the fixture: (tempdir, the store file's path in it).
fn fixture_copy(b: Backend, golden: &Path, sf: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(golden, tmp.path());
    let path = b
        .root(tmp.path())
        .join("data")
        .join(sf.file_name().unwrap());
    (tmp, path)
}

/// The offset of the `Corruption` error `err`, which must name `file` (as the engine names
/// it: see [`Backend::file_named`]).
fn assert_corruption_of(err: Error, file: &Path, what: &str) -> u64 {
    match err {
        Error::Corruption {
            file: f, offset, ..
        } => {
            assert_eq!(f, file, "{what}: corruption names the wrong file");
            offset
        }
        other => panic!(
            "{what}: expected Corruption naming {}, got {other:?}",
            file.display()
        ),
    }
}

fn trailer_field(sf: &Path, at: usize) -> u64 {
    let bytes = fs::read(sf).unwrap();
    let t = &bytes[bytes.len() - 48..];
    u64::from_be_bytes(t[at..at + 8].try_into().unwrap())
}

async fn store_file_flipped_data_byte_fails_only_reads_of_that_block(b: Backend) {
    let golden = tempfile::tempdir().unwrap();
    let sf = store_file_fixture(b, golden.path()).await;
    // Block 0 starts at offset 0: byte 0 is its compression code, 1..5 its length, then its
    // payload (the first rows). Flip a byte in each of these places.
    for at in [0u64, 2, 40, 300] {
        let (tmp, path) = fixture_copy(b, golden.path(), &sf);
        flip(&path, at);
        let what = format!("{b:?}: data byte {at} flipped");
        let named = b.file_named(tmp.path(), &path);
        let conn = Connection::open_with(b.config(tmp.path()))
            .await
            .unwrap_or_else(|e| panic!("{what}: open checks no data block, yet failed: {e}"));
        let table = conn.table("t").unwrap();

        // The first row is in block 0: the get fails, twice (the error is not cached).
        for _ in 0..2 {
            let err = table.get(Get::new(row(0))).await.unwrap_err();
            let offset = assert_corruption_of(err, &named, &what);
            assert!(offset <= at, "{what}: offset {offset} is past the damage");
        }
        // The last rows are in other blocks and read fine.
        for i in [SF_ROWS - 1, SF_ROWS / 2] {
            let r = table
                .get(Get::new(row(i)))
                .await
                .unwrap_or_else(|e| panic!("{what}: get of an intact block failed: {e}"));
            assert_eq!(
                r.value(FAMILY, QUALIFIER).map(|v| v.to_vec()),
                Some(value(i))
            );
        }
        // A full scan reports the corruption (first) and then ends; no panic, no bad row.
        let items: Vec<_> = table.scan(Scan::new()).unwrap().collect().await;
        let first_err = items
            .iter()
            .position(|r| r.is_err())
            .unwrap_or_else(|| panic!("{what}: the scan hit block 0 without an error"));
        for r in &items[..first_err] {
            let r = r.as_ref().unwrap();
            let i: usize = std::str::from_utf8(&r.row).unwrap()[4..].parse().unwrap();
            assert_eq!(
                r.value(FAMILY, QUALIFIER).map(|v| v.to_vec()),
                Some(value(i))
            );
        }
        let err = items.into_iter().nth(first_err).unwrap().unwrap_err();
        assert_corruption_of(err, &named, &format!("{what}, scan"));
        // A scan that starts past block 0 never touches it.
        let tail: Vec<_> = table
            .scan(Scan::new().start_row(row(SF_ROWS / 2)))
            .unwrap()
            .collect()
            .await;
        assert_eq!(tail.len(), SF_ROWS - SF_ROWS / 2, "{what}: tail scan");
        assert!(tail.iter().all(|r| r.is_ok()), "{what}: tail scan failed");
        // Writes still work (they go to the MemStore and the WAL).
        table
            .put(Put::new("zz").add_column(FAMILY, QUALIFIER, "x"))
            .await
            .unwrap();
        drop(table);
        drop(conn);
    }
}

async fn store_file_flipped_trailer_or_index_byte_takes_its_region_offline(b: Backend) {
    let golden = tempfile::tempdir().unwrap();
    let sf = store_file_fixture(b, golden.path()).await;
    let len = fs::metadata(&sf).unwrap().len();
    let index_offset = trailer_field(&sf, 12);
    let info_offset = trailer_field(&sf, 24);
    assert!(index_offset > 0 && info_offset > index_offset && info_offset < len - 48);
    let cases = [
        ("trailer magic", len - 48 + 1),
        ("trailer index offset", len - 48 + 19),
        ("trailer entry count", len - 48 + 40),
        ("trailer checksum", len - 1),
        ("index block", index_offset + 20),
        ("file-info block", info_offset + 7),
    ];
    for (what, at) in cases {
        let (tmp, path) = fixture_copy(b, golden.path(), &sf);
        flip(&path, at);
        assert_region_offline(b, tmp.path(), &path, what).await;
    }
}

/// The engine opens with the region of damaged store file `file` offline: its reads and
/// writes fail with `RegionOffline` naming the file, and `Admin::offline_regions` lists it.
async fn assert_region_offline(b: Backend, dir: &Path, file: &Path, what: &str) {
    let file = &b.file_named(dir, file);
    let what = &format!("{b:?}: {what}");
    let conn = Connection::open_with(b.config(dir))
        .await
        .unwrap_or_else(|e| panic!("{what}: one bad store file must not stop the engine: {e}"));
    let offline = conn.admin().offline_regions().await.unwrap();
    assert_eq!(offline.len(), 1, "{what}: {offline:?}");
    assert_eq!(&offline[0].file, file, "{what}");
    let names_it = |e: &Error| matches!(e, Error::RegionOffline { file: f, .. } if f == file);
    let table = conn.table("t").unwrap();
    assert!(
        names_it(&table.get(Get::new(row(0))).await.unwrap_err()),
        "{what}: get"
    );
    let put = Put::new(row(1)).add_column(FAMILY, QUALIFIER, "x");
    assert!(names_it(&table.put(put).await.unwrap_err()), "{what}: put");
    // The scan refuses when it is built or at its first row.
    match table.scan(Scan::new()) {
        Err(e) => assert!(names_it(&e), "{what}: scan: {e}"),
        Ok(mut stream) => {
            let first = stream.next().await;
            assert!(
                matches!(&first, Some(Err(e)) if names_it(e)),
                "{what}: scan"
            );
        }
    }
    drop(table);
    conn.close().await.unwrap();
}

async fn store_file_truncated_or_missing_takes_its_region_offline(b: Backend) {
    let golden = tempfile::tempdir().unwrap();
    let sf = store_file_fixture(b, golden.path()).await;
    let len = fs::metadata(&sf).unwrap().len();
    for cut in [0, 20, len / 2, len - 1] {
        let (tmp, path) = fixture_copy(b, golden.path(), &sf);
        truncate(&path, cut);
        assert_region_offline(
            b,
            tmp.path(),
            &path,
            &format!("store file cut to {cut} bytes"),
        )
        .await;
    }
    let (tmp, path) = fixture_copy(b, golden.path(), &sf);
    fs::remove_file(&path).unwrap();
    assert_region_offline(b, tmp.path(), &path, "missing store file").await;
}

async fn intact_store_file_fixture_reads_back(b: Backend) {
    // The control for the store-file cases: the undamaged copy opens and reads fine.
    let golden = tempfile::tempdir().unwrap();
    let sf = store_file_fixture(b, golden.path()).await;
    let (tmp, _) = fixture_copy(b, golden.path(), &sf);
    let conn = Connection::open_with(b.config(tmp.path())).await.unwrap();
    check_prefix(&conn, SF_ROWS, SF_ROWS, &[], "intact copy").await;
    conn.close().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// (c) The catalog.
// ---------------------------------------------------------------------------------------

async fn corrupt_catalog_fails_open_naming_it(b: Backend) {
    let golden = tempfile::tempdir().unwrap();
    let sf = store_file_fixture(b, golden.path()).await;
    let catalog_len = fs::metadata(b.catalog(golden.path())).unwrap().len();
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, Box<dyn Fn(&Path)>)> = vec![
        ("flipped magic", Box::new(|p: &Path| flip(p, 1))),
        ("flipped version", Box::new(|p: &Path| flip(p, 11))),
        ("flipped length", Box::new(|p: &Path| flip(p, 13))),
        ("flipped checksum", Box::new(|p: &Path| flip(p, 18))),
        ("flipped payload", Box::new(|p: &Path| flip(p, 20 + 5))),
        (
            "flipped last byte",
            Box::new(move |p: &Path| flip(p, catalog_len - 1)),
        ),
        ("truncated header", Box::new(|p: &Path| truncate(p, 12))),
        (
            "truncated payload",
            Box::new(move |p: &Path| truncate(p, catalog_len - 3)),
        ),
        ("empty", Box::new(|p: &Path| truncate(p, 0))),
    ];
    for (what, damage) in cases {
        let (tmp, _) = fixture_copy(b, golden.path(), &sf);
        let catalog = b.catalog(tmp.path());
        damage(&catalog);
        let err = Connection::open_with(b.config(tmp.path()))
            .await
            .unwrap_err();
        let what = format!("{b:?}: {what}");
        assert_corruption_of(err, &b.file_named(tmp.path(), &catalog), &what);
        // Nothing was deleted by the failed open: the data is still there for repair.
        assert!(
            b.root(tmp.path())
                .join("data")
                .join(sf.file_name().unwrap())
                .exists(),
            "{what}: a failed open must not remove store files"
        );
    }
}

async fn leftover_catalog_tmp_is_ignored(b: Backend) {
    // A crash during a catalog write leaves `catalog.tmp` (on the object store, the store's
    // staging file of the next version); the committed catalog wins.
    let golden = tempfile::tempdir().unwrap();
    let sf = store_file_fixture(b, golden.path()).await;
    let (tmp, _) = fixture_copy(b, golden.path(), &sf);
    let leftover = match b {
        Backend::Directory => tmp.path().join("catalog.tmp"),
        Backend::ObjectStore => {
            let newest = b.catalog(tmp.path());
            let n: u64 = newest
                .file_name()
                .unwrap()
                .to_string_lossy()
                .parse()
                .unwrap();
            newest.with_file_name(format!("{:020}#1", n + 1))
        }
    };
    fs::write(&leftover, b"BSLTCAT1 half-written garbage").unwrap();
    let conn = Connection::open_with(b.config(tmp.path())).await.unwrap();
    check_prefix(&conn, SF_ROWS, SF_ROWS, &[], "leftover catalog.tmp").await;
    conn.close().await.unwrap();
    if b == Backend::Directory {
        assert!(!leftover.exists());
    }
    let conn = Connection::open_with(b.config(tmp.path())).await.unwrap();
    check_prefix(&conn, SF_ROWS, SF_ROWS, &[], "reopen after a leftover").await;
    conn.close().await.unwrap();
}
