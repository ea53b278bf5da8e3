//! Damage suite: a data directory that mixes flushed store files (tables and index tables
//! flushed at different moments, so some regions are flushed past others) with several WAL
//! segments, then every kind of damage, one copy per case: cuts and byte flips in each WAL
//! segment, flips, cuts and removal of store files, damage to the catalog.
//!
//! For every case exactly one of these must hold, in the default recovery mode:
//! - the open fails with a typed error naming the damaged file (`WalCorruption` naming the
//!   segment, `Corruption` naming the catalog); or
//! - the engine opens, and every table reads as a prefix of the acknowledged writes (one
//!   prefix for all tables) and every index verifies with zero differences; a table whose
//!   store file is damaged may instead refuse its reads with a typed error naming that file
//!   (the region is offline, or the damaged block is named).
//!
//! Where the default mode refuses WAL damage, point-in-time mode must either refuse too
//! (naming the segment) or give a prefix that verifies, and salvage mode must open, report
//! what it skipped and the index repairs it ran itself, and leave every index verifying with
//! zero differences. Where store files are damaged, the offline repair must set them aside,
//! report them, and let every region open again, the open verifying and repairing the
//! indexes by itself.
//!
//! `BASALT_DAMAGE_OFFSETS=N` (default 3) sets how many cut and flip offsets each file gets:
//! raise it for more cases.

use basalt::client::{Get, Put, Scan};
use basalt::coprocessors::Registry;
use basalt::index::{IndexAdmin, IndexDef, Runtime};
use basalt::repair::{check_dir, repair_dir};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, DamageAction, Error, PreSplit, TableDescriptor,
    TableName, WalRecoveryMode,
};
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DATA: &str = "data";
const PLAIN: &str = "plain";
const WRITES: u64 = 700;
const ROWS: u64 = 160;

/// One acknowledged write: `table`, `row`, and its number (values derive from it).
#[derive(Debug, Clone)]
struct Write {
    table: &'static str,
    row: String,
    n: u64,
}

fn config(dir: &Path, registry: &Arc<Registry>, mode: WalRecoveryMode) -> Config {
    Config::new(dir)
        .coprocessor_loader(registry.clone())
        .memstore_flush_size(64 << 20)
        .wal_segment_size(8 << 10)
        .wal_recovery(mode)
}

fn registry() -> (Arc<Registry>, Arc<Runtime>) {
    let registry = Registry::new();
    let runtime = basalt::index::register(&registry).unwrap();
    (Arc::new(registry), runtime)
}

async fn open(dir: &Path, mode: WalRecoveryMode) -> basalt::Result<(Connection, IndexAdmin)> {
    let (registry, runtime) = registry();
    let conn = Connection::open_with(config(dir, &registry, mode)).await?;
    let admin = IndexAdmin::new(&conn, runtime);
    Ok((conn, admin))
}

fn row_of(n: u64) -> String {
    // Scattered over the key space, with overwrites.
    format!("{:02x}{:03}", (n * 2_654_435_761 % 251) as u8, n * 7 % ROWS)
}

/// Builds the seed directory: returns the acknowledged writes in order.
async fn build(dir: &Path) -> Vec<Write> {
    let (conn, idx) = open(dir, WalRecoveryMode::default()).await.unwrap();
    let admin = conn.admin();
    for (name, regions) in [(DATA, 4), (PLAIN, 2)] {
        admin
            .create_table_with_splits(
                TableDescriptor::new(TableName::parse(name).unwrap())
                    .family(ColumnFamilyDescriptor::new("f")),
                PreSplit::Algorithm(basalt::SplitAlgorithm::HexString, regions),
            )
            .await
            .unwrap();
    }
    idx.create(IndexDef::new("by_v", DATA).column("f", "v").cover("f", "w"))
        .await
        .unwrap();
    idx.create(IndexDef::new("by_u", DATA).column("f", "u").unique())
        .await
        .unwrap();
    let data = conn.table(DATA).unwrap();
    let plain = conn.table(PLAIN).unwrap();
    let mut writes = Vec::new();
    for n in 1..=WRITES {
        let row = row_of(n);
        let table = if n % 3 == 0 { PLAIN } else { DATA };
        let put = Put::new(row.as_bytes())
            .add_column("f", "v", format!("v{:05}", n % 97))
            .add_column("f", "w", format!("w{n}"))
            .add_column("f", "u", format!("u{n}"))
            .add_column("f", "n", n.to_string());
        if table == DATA {
            data.put(put).await.unwrap();
        } else {
            plain.put(put).await.unwrap();
        }
        writes.push(Write { table, row, n });
        // Flushes at different moments: the data table, one index table, the other
        // table, so store files of some regions are newer than others'.
        if n % 120 == 0 {
            admin.flush(&TableName::parse(DATA).unwrap()).await.unwrap();
        }
        if n % 170 == 0 {
            admin
                .flush(&TableName::parse("data.idx.by_v").unwrap())
                .await
                .unwrap();
        }
        if n % 230 == 0 {
            admin
                .flush(&TableName::parse(PLAIN).unwrap())
                .await
                .unwrap();
        }
    }
    // Dropped, not closed: the unflushed writes stay in the WAL.
    drop(data);
    drop(plain);
    drop(idx);
    drop(conn);
    writes
}

/// The rows of `table` as `row -> write number`, or the error of the scan.
async fn read_table(conn: &Connection, table: &str) -> basalt::Result<BTreeMap<String, u64>> {
    let rows: Vec<_> = conn.table(table)?.scan(Scan::new())?.try_collect().await?;
    let mut out = BTreeMap::new();
    for r in rows {
        let n = r
            .value("f", "n")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            .expect("every row has its number");
        out.insert(String::from_utf8_lossy(&r.row).into_owned(), n);
    }
    Ok(out)
}

/// The state of `table` after the writes numbered up to `k`.
fn prefix_state(writes: &[Write], table: &str, k: u64) -> BTreeMap<String, u64> {
    let mut state = BTreeMap::new();
    for w in writes.iter().filter(|w| w.table == table && w.n <= k) {
        state.insert(w.row.clone(), w.n);
    }
    state
}

/// True when `err` is a typed error naming `file`.
fn names(err: &Error, file: &Path) -> bool {
    match err {
        Error::WalCorruption { segment, .. } => segment == file,
        Error::Corruption { file: f, .. } | Error::RegionOffline { file: f, .. } => f == file,
        _ => false,
    }
}

/// What a case came to, for the tallies.
#[derive(Debug, Default)]
struct Tally {
    refused: usize,
    opened_prefix: usize,
    opened_offline: usize,
    salvaged: usize,
    point_in_time_opened: usize,
    repaired: usize,
}

/// Checks an open engine: one prefix for every readable table, and every index verifies
/// with zero differences; a table that cannot be read must name `damaged`. Returns whether
/// some table refused its reads.
async fn check_opened(
    conn: &Connection,
    idx: &IndexAdmin,
    writes: &[Write],
    damaged: &Path,
    case: &str,
) -> bool {
    let mut states = BTreeMap::new();
    let mut unreadable = false;
    for table in [DATA, PLAIN] {
        match read_table(conn, table).await {
            Ok(s) => {
                // Point reads (bloom filters on the way) agree with the scan.
                let t = conn.table(table).unwrap();
                for (row, n) in &s {
                    match t.get(Get::new(row.as_bytes())).await {
                        Ok(r) => assert_eq!(
                            r.value("f", "n").map(|v| v.to_vec()),
                            Some(n.to_string().into_bytes()),
                            "{case}: get {table}/{row}"
                        ),
                        Err(e) => assert!(names(&e, damaged), "{case}: get: {e}"),
                    }
                }
                states.insert(table, s);
            }
            Err(e) => {
                assert!(names(&e, damaged), "{case}: {table}: {e}");
                unreadable = true;
            }
        }
    }
    // One prefix for all: the largest write number seen bounds it from below, and no
    // table may lack a write at or below it, nor hold a later one.
    let k = states
        .values()
        .flat_map(|s| s.values())
        .copied()
        .max()
        .unwrap_or(0);
    for (table, state) in &states {
        assert_eq!(
            state,
            &prefix_state(writes, table, k),
            "{case}: {table} is not the prefix of writes 1..={k}"
        );
    }
    for index in ["by_v", "by_u"] {
        match idx.verify(DATA, index).await {
            Ok(report) => assert_eq!(report.differences(), 0, "{case}: index {index}: {report:?}"),
            Err(e) => {
                assert!(names(&e, damaged), "{case}: verify {index}: {e}");
                unreadable = true;
            }
        }
    }
    unreadable
}

/// Runs one damage case on a fresh copy of `seed`.
async fn run_case(
    seed: &Path,
    writes: &[Write],
    case: &str,
    damage: impl Fn(&Path) -> PathBuf,
    tally: &mut Tally,
) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    copy_dir(seed, &dir);
    let damaged = damage(&dir);
    let is_wal = damaged.parent().is_some_and(|p| p.ends_with("wal"));
    let is_store = damaged.parent().is_some_and(|p| p.ends_with("data"));
    if is_store {
        // Every byte of a store file is covered: the offline check names the damage.
        let check = check_dir(&Config::new(&dir)).unwrap();
        assert!(
            check
                .tables
                .iter()
                .flat_map(|t| &t.files)
                .any(|f| f.check.path == damaged && !f.check.is_healthy()),
            "{case}: the offline check missed {}:\n{check}",
            damaged.display()
        );
    }
    let before = dir_state(&dir);
    match open(&dir, WalRecoveryMode::default()).await {
        Err(e) => {
            assert!(
                names(&e, &damaged),
                "{case}: open refused without naming the file: {e}"
            );
            assert_eq!(
                dir_state(&dir),
                before,
                "{case}: a refused open changed files"
            );
            tally.refused += 1;
            if is_wal {
                wal_fallbacks(&dir, writes, case, &damaged, tally).await;
            } else {
                // The catalog: the offline check reports it, the repair refuses.
                let cfg = Config::new(&dir);
                let check = check_dir(&cfg).unwrap();
                assert!(check.catalog_problem.is_some(), "{case}: {check}");
                assert!(repair_dir(&cfg).is_err(), "{case}");
            }
        }
        Ok((conn, idx)) => {
            let report = conn.recovery_report();
            let case = &format!("{case} [{report}]");
            let unreadable = check_opened(&conn, &idx, writes, &damaged, case).await;
            if unreadable {
                tally.opened_offline += 1;
            } else {
                tally.opened_prefix += 1;
            }
            if !report.offline_regions.is_empty() {
                assert!(
                    report.offline_regions.iter().all(|r| r.file == damaged),
                    "{case}: {report}"
                );
                assert_eq!(
                    conn.admin().offline_regions().await.unwrap(),
                    report.offline_regions
                );
            }
            drop(idx);
            conn.close().await.unwrap();
            if is_store {
                repair_case(&dir, case, &damaged, tally).await;
            }
        }
    }
}

/// After the default mode refused WAL damage: point in time refuses or gives a prefix;
/// salvage opens, reports, and its index repair leaves zero differences.
async fn wal_fallbacks(
    dir: &Path,
    writes: &[Write],
    case: &str,
    damaged: &Path,
    tally: &mut Tally,
) {
    let copy = tempfile::tempdir().unwrap();
    let pit_dir = copy.path().join("db");
    copy_dir(dir, &pit_dir);
    match open(&pit_dir, WalRecoveryMode::PointInTime).await {
        Err(e) => assert!(
            matches!(&e, Error::WalCorruption { tables, .. } if !tables.is_empty())
                && names(&e, &pit_dir.join("wal").join(damaged.file_name().unwrap())),
            "{case}: point in time: {e}"
        ),
        Ok((conn, idx)) => {
            assert!(!conn.recovery_report().is_clean(), "{case}");
            let unreadable = check_opened(&conn, &idx, writes, Path::new("/"), case).await;
            assert!(!unreadable, "{case}");
            tally.point_in_time_opened += 1;
            conn.close().await.unwrap();
        }
    }
    let (conn, idx) = open(dir, WalRecoveryMode::Salvage)
        .await
        .unwrap_or_else(|e| panic!("{case}: salvage refused: {e}"));
    let report = conn.recovery_report();
    assert!(
        report.damage.iter().any(|d| d.segment == damaged),
        "{case}: salvage report does not list the damage: {report}"
    );
    // Skipped bytes stay on disk in the original, moved aside.
    assert!(
        report
            .damage
            .iter()
            .filter(|d| matches!(d.action, DamageAction::Skipped { .. }))
            .all(|d| d.moved_to.as_ref().is_some_and(|p| p.exists())),
        "{case}: {report}"
    );
    assert_verified_by_open(&report, case);
    for index in ["by_v", "by_u"] {
        let v = idx.verify(DATA, index).await.unwrap();
        assert_eq!(v.differences(), 0, "{case}: salvage, index {index}: {v:?}");
    }
    tally.salvaged += 1;
    conn.close().await.unwrap();
    // Salvage leaves a log the strict default opens, with nothing more to report.
    let (conn, _idx) = open(dir, WalRecoveryMode::default())
        .await
        .unwrap_or_else(|e| panic!("{case}: the default mode refuses a salvaged directory: {e}"));
    let report = conn.recovery_report();
    assert!(
        report.is_clean() && report.tables_to_verify.is_empty() && report.repairs.is_empty(),
        "{case}: {report}"
    );
    conn.close().await.unwrap();
}

/// After store-file damage: the offline check names the file, the repair sets it aside and
/// reports it, and every region opens again.
async fn repair_case(dir: &Path, case: &str, damaged: &Path, tally: &mut Tally) {
    let cfg = Config::new(dir);
    let check = check_dir(&cfg).unwrap();
    let named = check
        .tables
        .iter()
        .flat_map(|t| &t.files)
        .any(|f| f.check.path == damaged && !f.check.is_healthy());
    if !named {
        // A compaction after the open rewrote the file's cells (the damage was in a part
        // no read needs, such as its bloom filter): nothing is left to repair.
        assert!(check.is_healthy(), "{case}: {check}");
        return;
    }
    let repaired = repair_dir(&cfg).unwrap();
    // `{id:016}-g{generation}.sf`.
    let file_id: u64 = damaged
        .file_stem()
        .and_then(|s| s.to_str()?.split("-g").next()?.parse().ok())
        .unwrap();
    let entry = repaired
        .set_aside
        .iter()
        .find(|s| s.file_id == file_id)
        .unwrap_or_else(|| panic!("{case}: {repaired}"));
    assert!(
        !entry.regions.is_empty() && entry.max_seq > 0,
        "{case}: {repaired}"
    );
    if let Some(to) = &entry.moved_to {
        assert!(to.exists() && !damaged.exists(), "{case}");
    }
    assert!(
        repaired
            .tables_to_verify
            .contains(&TableName::parse(DATA).unwrap()),
        "{case}: {repaired}"
    );
    let (conn, idx) = open(dir, WalRecoveryMode::default()).await.unwrap();
    assert!(
        conn.admin().offline_regions().await.unwrap().is_empty(),
        "{case}"
    );
    assert_verified_by_open(&conn.recovery_report(), case);
    for table in [DATA, PLAIN] {
        read_table(&conn, table)
            .await
            .unwrap_or_else(|e| panic!("{case}: after repair, {table}: {e}"));
    }
    for index in ["by_v", "by_u"] {
        assert_eq!(
            idx.verify(DATA, index).await.unwrap().differences(),
            0,
            "{case}"
        );
    }
    tally.repaired += 1;
    conn.close().await.unwrap();
}

/// The open verified and repaired both indexes of the data table (and nothing else).
fn assert_verified_by_open(report: &basalt::RecoveryReport, case: &str) {
    // The tables with coprocessors: the data table, and its index tables (their guard).
    let listed = |name: &str| {
        report
            .tables_to_verify
            .contains(&TableName::parse(name).unwrap())
    };
    assert!(listed(DATA) && !listed(PLAIN), "{case}: {report}");
    let mut repaired: Vec<(&TableName, &str)> = report
        .repairs
        .iter()
        .map(|r| (&r.table, r.what.as_str()))
        .collect();
    repaired.sort_by_key(|r| r.1);
    let data = TableName::parse(DATA).unwrap();
    assert_eq!(
        repaired,
        [(&data, "index by_u"), (&data, "index by_v")],
        "{case}: {report}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// Every file under `dir` with its bytes (the lock file's excepted).
fn dir_state(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n != "LOCK") {
                let bytes = std::fs::read(&p).unwrap();
                out.push((p, bytes));
            }
        }
    }
    out.sort();
    out
}

fn files_in(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// `n` offsets spread over `[from, len)`.
fn offsets(from: u64, len: u64, n: u64) -> Vec<u64> {
    if len <= from {
        return Vec::new();
    }
    (0..n)
        .map(|i| from + (len - from) * (2 * i + 1) / (2 * n))
        .collect()
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let i = usize::try_from(at).unwrap().min(bytes.len() - 1);
    bytes[i] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

fn cut(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(len).unwrap();
}

/// One kind of damage to one file.
#[derive(Debug, Clone, Copy)]
enum Harm {
    Cut,
    Flip,
    Remove,
}

/// Runs the case of `harm` at `at` to the file at `rel` (relative to the directory).
async fn harm_case(
    seed: &Path,
    writes: &[Write],
    rel: &Path,
    harm: Harm,
    at: u64,
    tally: &mut Tally,
) {
    let case = format!("{harm:?} {} at {at}", rel.display());
    let damage = |d: &Path| {
        let p = d.join(rel);
        match harm {
            Harm::Cut => cut(&p, at),
            Harm::Flip => flip(&p, at),
            Harm::Remove => std::fs::remove_file(&p).unwrap(),
        }
        p
    };
    run_case(seed, writes, &case, damage, tally).await;
}

fn rel(seed: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(seed).unwrap().to_path_buf()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_damage_is_refused_by_name_or_recovered_consistently() {
    let per_file: u64 = std::env::var("BASALT_DAMAGE_OFFSETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let seed_dir = tempfile::tempdir().unwrap();
    let seed = seed_dir.path().join("db");
    // Built on a runtime of its own: dropping it ends the engine's background tasks, so
    // the engine is gone (not closed) before the seed is copied.
    let writes = {
        let seed = seed.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
                .block_on(build(&seed))
        })
        .join()
        .unwrap()
    };
    let segments = files_in(&seed.join("wal"), ".log");
    // The store files the catalog lists (an orphan, such as a compaction input not yet
    // deleted when the engine stopped, is removed at open and holds nothing to damage).
    let seed_check = check_dir(&Config::new(&seed)).unwrap();
    assert!(seed_check.is_healthy(), "{seed_check}");
    let mut store_files: Vec<PathBuf> = seed_check
        .tables
        .iter()
        .flat_map(|t| &t.files)
        .map(|f| f.check.path.clone())
        .collect();
    store_files.sort();
    store_files.dedup();
    assert!(segments.len() >= 3, "{} WAL segments", segments.len());
    assert!(store_files.len() >= 6, "{} store files", store_files.len());

    let mut tally = Tally::default();
    let mut cases = 0;
    for seg in &segments {
        let len = std::fs::metadata(seg).unwrap().len();
        let r = rel(&seed, seg);
        // Cuts and flips inside the header, and inside the records.
        let mut cases_here = vec![(Harm::Cut, 10), (Harm::Flip, 13)];
        for at in offsets(24, len, per_file) {
            cases_here.push((Harm::Cut, at));
            cases_here.push((Harm::Flip, at));
        }
        for (harm, at) in cases_here {
            harm_case(&seed, &writes, &r, harm, at, &mut tally).await;
            cases += 1;
        }
    }
    for sf in &store_files {
        let len = std::fs::metadata(sf).unwrap().len();
        let r = rel(&seed, sf);
        let mut cases_here: Vec<(Harm, u64)> = offsets(0, len, per_file)
            .into_iter()
            .map(|at| (Harm::Flip, at))
            .collect();
        cases_here.push((Harm::Flip, len - 3)); // the trailer
        cases_here.push((Harm::Cut, len / 2));
        cases_here.push((Harm::Remove, 0));
        for (harm, at) in cases_here {
            harm_case(&seed, &writes, &r, harm, at, &mut tally).await;
            cases += 1;
        }
    }
    let catalog_len = std::fs::metadata(seed.join("catalog")).unwrap().len();
    for (what, at) in [("magic", 2), ("length", 14), ("payload", catalog_len / 2)] {
        run_case(
            &seed,
            &writes,
            &format!("flip catalog {what}"),
            |d| {
                let p = d.join("catalog");
                flip(&p, at);
                p
            },
            &mut tally,
        )
        .await;
        cases += 1;
    }
    run_case(
        &seed,
        &writes,
        "catalog with trailing garbage",
        |d| {
            let p = d.join("catalog");
            let mut bytes = std::fs::read(&p).unwrap();
            bytes.extend_from_slice(b"\0\0garbage");
            std::fs::write(&p, bytes).unwrap();
            p
        },
        &mut tally,
    )
    .await;
    run_case(
        &seed,
        &writes,
        "catalog removed",
        |d| {
            let p = d.join("catalog");
            std::fs::remove_file(&p).unwrap();
            p
        },
        &mut tally,
    )
    .await;
    cases += 1;
    run_case(
        &seed,
        &writes,
        "catalog cut",
        |d| {
            let p = d.join("catalog");
            cut(&p, catalog_len - 4);
            p
        },
        &mut tally,
    )
    .await;
    cases += 2;
    eprintln!("{cases} damage cases: {tally:?}");
    assert!(cases >= 100, "only {cases} cases");
    // The suite exercises every outcome.
    assert!(tally.refused > 0 && tally.opened_prefix > 0 && tally.opened_offline > 0);
    assert!(tally.salvaged > 0 && tally.repaired > 0);
}

/// A deleted store file: the engine opens, the other table serves, the region's reads and
/// writes give `RegionOffline` naming the file, the offline check names it, and the
/// offline repair brings the region back with a report of what was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_store_file_takes_one_region_offline_until_the_offline_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (conn, _idx) = open(&dir, WalRecoveryMode::default()).await.unwrap();
    for name in [DATA, PLAIN] {
        conn.admin()
            .create_table_with_splits(
                TableDescriptor::new(TableName::parse(name).unwrap())
                    .family(ColumnFamilyDescriptor::new("f")),
                PreSplit::Keys(vec![b"m".to_vec()]),
            )
            .await
            .unwrap();
        let t = conn.table(name).unwrap();
        for row in ["apple", "kiwi", "mango", "peach"] {
            t.put(Put::new(row).add_column("f", "n", "1"))
                .await
                .unwrap();
        }
    }
    conn.close().await.unwrap();
    // The first region of DATA ("apple", "kiwi") loses its only store file.
    let region = |conn: &Connection| {
        let conn = conn.clone();
        async move {
            conn.admin()
                .regions(&TableName::parse(DATA).unwrap())
                .await
                .unwrap()
        }
    };
    let check = check_dir(&Config::new(&dir)).unwrap();
    assert!(check.is_healthy(), "{check}");
    let victim = check
        .tables
        .iter()
        .find(|t| t.table.to_string() == format!("default:{DATA}"))
        .and_then(|t| {
            t.files
                .iter()
                .find(|f| f.region.ends_with(&format!(",,{}", f.region_id)))
        })
        .map(|f| f.check.path.clone())
        .expect("the first region's store file");
    std::fs::remove_file(&victim).unwrap();

    let (conn, _idx) = open(&dir, WalRecoveryMode::default()).await.unwrap();
    let offline = conn.admin().offline_regions().await.unwrap();
    assert_eq!(offline.len(), 1, "{offline:?}");
    assert_eq!(offline[0].file, victim);
    assert_eq!(conn.recovery_report().offline_regions, offline);
    assert_eq!(region(&conn).await.len(), 2);
    let data = conn.table(DATA).unwrap();
    let offline_err = |e: Error| matches!(e, Error::RegionOffline { file, .. } if file == victim);
    assert!(offline_err(data.get(Get::new("apple")).await.unwrap_err()));
    assert!(offline_err(
        data.put(Put::new("banana").add_column("f", "n", "2"))
            .await
            .unwrap_err()
    ));
    // The other region of the table and the other table serve.
    let r = data.get(Get::new("peach")).await.unwrap();
    assert_eq!(r.value("f", "n").map(|v| v.as_ref()), Some(&b"1"[..]));
    data.put(Put::new("plum").add_column("f", "n", "3"))
        .await
        .unwrap();
    assert_eq!(read_table(&conn, PLAIN).await.unwrap().len(), 4);
    // A scan that reaches the offline region names the file.
    assert!(offline_err(read_table(&conn, DATA).await.unwrap_err()));
    conn.close().await.unwrap();

    // The offline check names the missing file; the repair reports what was lost.
    let check = check_dir(&Config::new(&dir)).unwrap();
    assert_eq!(check.damaged_files(), 1, "{check}");
    let repaired = repair_dir(&Config::new(&dir)).unwrap();
    assert_eq!(repaired.set_aside.len(), 1, "{repaired}");
    let lost = &repaired.set_aside[0];
    assert_eq!(lost.moved_to, None); // it was missing
    assert_eq!(lost.cells, 2);
    assert!(lost.max_seq > 0);
    assert_eq!(
        (lost.start_row.as_ref(), lost.end_row.as_ref()),
        (&b""[..], &b"m"[..])
    );
    assert!(check_dir(&Config::new(&dir)).unwrap().is_healthy());

    let (conn, _idx) = open(&dir, WalRecoveryMode::default()).await.unwrap();
    assert!(conn.admin().offline_regions().await.unwrap().is_empty());
    assert!(conn.recovery_report().is_clean());
    let rows = read_table(&conn, DATA).await.unwrap();
    // "apple" and "kiwi" were in the lost file; "plum" (written while offline) and
    // "mango", "peach" are there.
    assert_eq!(
        rows.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["mango", "peach", "plum"]
    );
    conn.table(DATA)
        .unwrap()
        .put(Put::new("apple").add_column("f", "n", "4"))
        .await
        .unwrap();
    conn.close().await.unwrap();
}

/// A recovery repair that always fails: the open must fail and keep the tables recorded.
#[derive(Debug)]
struct FailingRepair;

#[async_trait::async_trait]
impl basalt::RecoveryRepair for FailingRepair {
    async fn repair(
        &self,
        _engine: &Arc<basalt::Engine>,
        _table: &TableName,
    ) -> basalt::Result<Vec<basalt::RecoveryRepairOutcome>> {
        Err(Error::bad_argument("repair refused"))
    }
}

/// The tables to verify survive every interruption until a connection's repairs ran: an
/// open whose repair fails, an engine opened without a connection, a damaged record (which
/// names every table with coprocessors); then one open repairs the index the offline repair
/// broke, and the next open has nothing left to verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_to_verify_survive_until_a_connection_repaired_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (conn, idx) = open(&dir, WalRecoveryMode::default()).await.unwrap();
    let data_name = TableName::parse(DATA).unwrap();
    conn.admin()
        .create_table(
            TableDescriptor::new(data_name.clone()).family(ColumnFamilyDescriptor::new("f")),
        )
        .await
        .unwrap();
    idx.create(IndexDef::new("by_v", DATA).column("f", "v"))
        .await
        .unwrap();
    let data = conn.table(DATA).unwrap();
    for n in 0..20 {
        data.put(Put::new(format!("r{n:02}")).add_column("f", "v", format!("v{n}")))
            .await
            .unwrap();
    }
    conn.close().await.unwrap();
    // The index table loses its store file: the data rows keep no index rows.
    let check = check_dir(&Config::new(&dir)).unwrap();
    let index_file = check
        .tables
        .iter()
        .find(|t| t.table.to_string().contains("idx"))
        .and_then(|t| t.files.first())
        .map(|f| f.check.path.clone())
        .expect("the index table's store file");
    std::fs::remove_file(&index_file).unwrap();
    let repaired = repair_dir(&Config::new(&dir)).unwrap();
    assert!(repaired.tables_to_verify.contains(&data_name), "{repaired}");
    let record = dir.join("VERIFY-PENDING");
    assert!(record.exists());

    // A failing repair (run before the index's) fails the open and keeps the record.
    let failing = Registry::new();
    failing.register_recovery_repair(Arc::new(FailingRepair));
    basalt::index::register(&failing).unwrap();
    let err = Connection::open_with(config(&dir, &Arc::new(failing), WalRecoveryMode::default()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("repair refused"), "{err}");
    assert!(record.exists());

    // An engine opened alone reports the tables and keeps the record.
    let (registry, _) = registry();
    let engine = basalt::Engine::open(config(&dir, &registry, WalRecoveryMode::default())).unwrap();
    assert!(engine
        .recovery_report()
        .tables_to_verify
        .contains(&data_name));
    engine.close().await.unwrap();
    assert!(record.exists());

    // A damaged record names every table with coprocessors.
    std::fs::write(&record, b"basalt verify-pending 1\ngarbage").unwrap();
    let (conn, idx) = open(&dir, WalRecoveryMode::default()).await.unwrap();
    let report = conn.recovery_report();
    assert!(report.tables_to_verify.contains(&data_name), "{report}");
    assert_eq!(report.repairs.len(), 1, "{report}");
    assert_eq!(report.repairs[0].what, "index by_v");
    assert_eq!(report.repairs[0].differences, 20, "{report}");
    assert_eq!(idx.verify(DATA, "by_v").await.unwrap().differences(), 0);
    assert!(!record.exists());
    conn.close().await.unwrap();

    let (conn, _idx) = open(&dir, WalRecoveryMode::default()).await.unwrap();
    let report = conn.recovery_report();
    assert!(
        report.tables_to_verify.is_empty() && report.repairs.is_empty(),
        "{report}"
    );
    conn.close().await.unwrap();
}
