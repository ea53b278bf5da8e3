//! Concurrency: atomic read-modify-write loses no update, and readers never see part of a
//! write, while flushes run underneath (small flush sizes make regions flush during the
//! tests) on a multi-thread runtime.
//!
//! * 16 tasks increment the same few counters and run compare-and-set loops
//!   (`CheckAndMutate ... if_value(Equal, old).then_put(old + 1)`, retried until it passes)
//!   on the same few rows: every final value equals exactly the sum of the successful
//!   operations, every increment returned a distinct new value consistent with one serial
//!   order, and every successful compare-and-set claimed a distinct transition. The values
//!   survive a close and reopen.
//! * Writers set 10 columns of a row to one generation number in one `Put` or one
//!   `RowMutations`, and batch writers (`Table::batch`) update rows in four regions at once
//!   or insert four new rows in four regions at once, while scanners and getters run: every
//!   row any read returns has all 10 columns equal (never half a mutation), every scan sees
//!   the batch-updated rows at one generation, and sees each batch-inserted set of rows
//!   completely or not at all (a scan reads one snapshot across regions).

use basalt::client::{BatchOp, CheckAndMutate, CompareOp, Get, Increment, Put, RowMutations, Scan};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, PreSplit, Table, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FAMILY: &str = "f";
const TASKS: usize = 16;

fn config(dir: &Path, flush_size: u64) -> Config {
    Config::new(dir).memstore_flush_size(flush_size)
}

/// Flush sizes: small enough that regions flush during the tests, large enough that the
/// number of store files (no compaction yet; one descriptor each) stays in the hundreds.
const RMW_FLUSH: u64 = 64 << 10;
const ATOMIC_FLUSH: u64 = 256 << 10;

/// Creates table `name` pre-split at `splits`.
async fn create(conn: &Connection, name: &str, splits: &[&str]) -> Table {
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse(name).unwrap())
                .family(ColumnFamilyDescriptor::new(FAMILY)),
            PreSplit::Keys(splits.iter().map(|s| s.as_bytes().to_vec()).collect()),
        )
        .await
        .unwrap();
    conn.table(name).unwrap()
}

fn seed() -> u64 {
    let seed = std::env::var("BASALT_CONCURRENCY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("BASALT_CONCURRENCY_SEED={seed}");
    seed
}

// ---------------------------------------------------------------------------------------
// No lost update.
// ---------------------------------------------------------------------------------------

const COUNTERS: [&str; 4] = ["a-counter", "h-counter", "p-counter", "x-counter"];
const CAS_ROWS: [&str; 3] = ["b-cas", "m-cas", "y-cas"];
/// Filler written beside the CAS column so the MemStores fill and flush during the test.
const FILLER: [u8; 512] = [b'.'; 512];

async fn get_text(table: &Table, row: &str) -> Option<u64> {
    let r = table
        .get(Get::new(row).add_column(FAMILY, "n"))
        .await
        .unwrap();
    r.value(FAMILY, "n")
        .map(|v| std::str::from_utf8(v).unwrap().parse().unwrap())
}

async fn get_counter(table: &Table, row: &str) -> i64 {
    let r = table.get(Get::new(row)).await.unwrap();
    let v = r.value(FAMILY, "c").expect("counter exists");
    i64::from_be_bytes(v.as_ref().try_into().unwrap())
}

/// What one task did.
#[derive(Default)]
struct Tally {
    /// Per counter: (amount, new value returned).
    increments: BTreeMap<usize, Vec<(i64, i64)>>,
    /// Per CAS row: the values this task's successful CASes installed.
    cas_installed: BTreeMap<usize, Vec<u64>>,
    cas_failures: u64,
}

/// Final values equal the sum of the successful operations.
async fn check_rmw(
    table: &Table,
    increments: &BTreeMap<usize, Vec<(i64, i64)>>,
    installed: &BTreeMap<usize, Vec<u64>>,
    when: &str,
) {
    for (c, ops) in increments {
        let total: i64 = ops.iter().map(|(a, _)| a).sum();
        assert_eq!(
            get_counter(table, COUNTERS[*c]).await,
            total,
            "{when}: counter {} lost an increment",
            COUNTERS[*c]
        );
    }
    for (c, values) in installed {
        assert_eq!(
            get_text(table, CAS_ROWS[*c]).await,
            Some(values.len() as u64),
            "{when}: CAS row {} lost an update",
            CAS_ROWS[*c]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn increments_and_compare_and_set_lose_no_update() {
    let seed = seed();
    let tmp = tempfile::tempdir().unwrap();
    let conn = Connection::open_with(config(tmp.path(), RMW_FLUSH))
        .await
        .unwrap();
    let table = create(&conn, "rmw", &["c", "k", "r", "w"]).await;

    const OPS: usize = 250;
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let table = table.clone();
        handles.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ ((task as u64) << 32));
            let mut tally = Tally::default();
            for _ in 0..OPS {
                if rng.random_bool(0.5) {
                    let c = rng.random_range(0..COUNTERS.len());
                    let amount = rng.random_range(1..=5);
                    let r = table
                        .increment(Increment::new(COUNTERS[c]).add_column(FAMILY, "c", amount))
                        .await
                        .unwrap();
                    let v = r
                        .value(FAMILY, "c")
                        .expect("increment returns the new value");
                    let new = i64::from_be_bytes(v.as_ref().try_into().unwrap());
                    tally.increments.entry(c).or_default().push((amount, new));
                } else {
                    let c = rng.random_range(0..CAS_ROWS.len());
                    let row = CAS_ROWS[c];
                    loop {
                        let old = get_text(&table, row).await;
                        let new = old.map_or(1, |n| n + 1);
                        let put = Put::new(row)
                            .add_column(FAMILY, "n", new.to_string())
                            .add_column(FAMILY, "filler", FILLER);
                        let cam = match old {
                            None => CheckAndMutate::new(row, FAMILY, "n").if_absent(),
                            Some(n) => CheckAndMutate::new(row, FAMILY, "n")
                                .if_value(CompareOp::Equal, n.to_string()),
                        };
                        if table.check_and_mutate(cam.then_put(put)).await.unwrap() {
                            tally.cas_installed.entry(c).or_default().push(new);
                            break;
                        }
                        tally.cas_failures += 1;
                        tokio::task::yield_now().await;
                    }
                }
            }
            tally
        }));
    }
    let mut increments: BTreeMap<usize, Vec<(i64, i64)>> = BTreeMap::new();
    let mut installed: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut cas_failures = 0;
    for h in handles {
        let t = h.await.unwrap();
        for (c, v) in t.increments {
            increments.entry(c).or_default().extend(v);
        }
        for (c, v) in t.cas_installed {
            installed.entry(c).or_default().extend(v);
        }
        cas_failures += t.cas_failures;
    }

    check_rmw(&table, &increments, &installed, "live").await;

    // Increments are linearizable: sorted by returned value, each one added its amount to the
    // previous one's result, starting from 0.
    for (c, ops) in &mut increments {
        ops.sort_by_key(|(_, new)| *new);
        let mut prev = 0;
        for (amount, new) in ops.iter() {
            assert_eq!(
                *new,
                prev + amount,
                "counter {}: increments overlapped (two saw the same base)",
                COUNTERS[*c]
            );
            prev = *new;
        }
    }
    // Every successful CAS installed a distinct value: together exactly 1..=n.
    for (c, values) in &mut installed {
        values.sort_unstable();
        let expected: Vec<u64> = (1..=values.len() as u64).collect();
        assert_eq!(
            *values, expected,
            "CAS row {}: two compare-and-sets passed on the same old value",
            CAS_ROWS[*c]
        );
    }

    let regions = table.regions().await.unwrap();
    let files: usize = regions.iter().map(|r| r.store_files).sum();
    println!(
        "{} increments, {} CAS successes, {cas_failures} CAS retries, {files} store files",
        increments.values().map(Vec::len).sum::<usize>(),
        installed.values().map(Vec::len).sum::<usize>(),
    );
    assert!(files > 0, "the test meant to flush while writing");
    drop(table);
    conn.close().await.unwrap();

    let conn = Connection::open_with(config(tmp.path(), RMW_FLUSH))
        .await
        .unwrap();
    check_rmw(
        &conn.table("rmw").unwrap(),
        &increments,
        &installed,
        "after reopen",
    )
    .await;
    conn.close().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// No torn writes.
// ---------------------------------------------------------------------------------------

const COLUMNS: usize = 10;
/// One row per region for the batch-updated group, one prefix per region for rows.
const REGION_PREFIXES: [&str; 4] = ["a", "g", "n", "u"];
const ROWS_PER_REGION: usize = 8;
/// Pads values so the MemStores fill and flush during the test.
const PAD: usize = 200;

fn value(generation: u64) -> Vec<u8> {
    let mut v = format!("{generation:020}").into_bytes();
    v.resize(20 + PAD, b'#');
    v
}

fn generation_of(row: &str, v: &[u8]) -> u64 {
    assert_eq!(v.len(), 20 + PAD, "row {row}: value damaged");
    std::str::from_utf8(&v[..20]).unwrap().parse().unwrap()
}

fn plain_row(region: usize, j: usize) -> String {
    format!("{}-row-{j:02}", REGION_PREFIXES[region])
}

fn group_row(region: usize) -> String {
    format!("{}-group", REGION_PREFIXES[region])
}

fn new_set_row(region: usize, k: u64) -> String {
    format!("{}-set-{k:08}", REGION_PREFIXES[region])
}

fn ten_columns(row: &str, generation: u64) -> Put {
    let mut p = Put::new(row);
    for c in 0..COLUMNS {
        p = p.add_column(FAMILY, format!("c{c}"), value(generation));
    }
    p
}

/// The one generation of a row's 10 columns; panics if they differ or some are missing.
fn row_generation(r: &basalt::client::RowResult, what: &str) -> u64 {
    let row = String::from_utf8_lossy(&r.row).into_owned();
    assert_eq!(
        r.cells.len(),
        COLUMNS,
        "{what}: row {row} has {} of its {COLUMNS} columns: a torn mutation",
        r.cells.len()
    );
    let gens: BTreeSet<u64> = r
        .cells
        .iter()
        .map(|c| generation_of(&row, &c.value))
        .collect();
    assert_eq!(
        gens.len(),
        1,
        "{what}: row {row} mixes generations {gens:?}: a torn mutation"
    );
    *gens.first().unwrap()
}

#[derive(Default)]
struct ScanStats {
    scans: u64,
    rows: u64,
    gets: u64,
    sets_seen: u64,
}

/// One scan's checks; returns the number of rows and of complete inserted sets.
fn check_scan(rows: &[basalt::client::RowResult], what: &str) -> (u64, u64) {
    for pair in rows.windows(2) {
        assert!(
            pair[0].row < pair[1].row,
            "{what}: scan out of order: {:?} then {:?}",
            pair[0].row,
            pair[1].row
        );
    }
    let mut group = BTreeMap::new();
    let mut sets: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows {
        let g = row_generation(r, what);
        let row = String::from_utf8_lossy(&r.row).into_owned();
        if row.ends_with("-group") {
            group.insert(row, g);
        } else if let Some(pos) = row.find("-set-") {
            *sets.entry(row[pos + 5..].to_string()).or_default() += 1;
        }
    }
    assert_eq!(
        group.len(),
        REGION_PREFIXES.len(),
        "{what}: group rows missing: {group:?}"
    );
    let gens: BTreeSet<&u64> = group.values().collect();
    assert_eq!(
        gens.len(),
        1,
        "{what}: one multi-region batch seen partly: group generations {group:?}"
    );
    for (k, n) in &sets {
        assert_eq!(
            *n,
            REGION_PREFIXES.len(),
            "{what}: batch-inserted set {k} seen with {n} of its {} rows",
            REGION_PREFIXES.len()
        );
    }
    (rows.len() as u64, sets.len() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_never_see_part_of_a_write() {
    let seed = seed();
    let tmp = tempfile::tempdir().unwrap();
    let conn = Connection::open_with(config(tmp.path(), ATOMIC_FLUSH))
        .await
        .unwrap();
    let table = create(&conn, "atomic", &REGION_PREFIXES[1..]).await;

    // Every row exists at generation 0 before the readers start.
    let generation = Arc::new(AtomicU64::new(1));
    let mut init = Vec::new();
    for region in 0..REGION_PREFIXES.len() {
        init.push(BatchOp::Put(ten_columns(&group_row(region), 0)));
        for j in 0..ROWS_PER_REGION {
            init.push(BatchOp::Put(ten_columns(&plain_row(region, j), 0)));
        }
    }
    for r in table.batch(init).await.unwrap() {
        r.unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    // Writes, scans and gets so far: the run lasts at least `run_for`, and on until there
    // were enough of each to mean something (how long that takes depends on the machine).
    let (wrote, scanned, got) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let run_for = Duration::from_millis(2500);
    let mut writers = Vec::new();
    // Row writers: 10 columns of one row, in one Put or in one RowMutations of two Puts.
    for task in 0..8 {
        let (table, generation, stop, wrote) = (
            table.clone(),
            generation.clone(),
            stop.clone(),
            wrote.clone(),
        );
        writers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ 0xA11 ^ ((task as u64) << 32));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let row = plain_row(
                    rng.random_range(0..REGION_PREFIXES.len()),
                    rng.random_range(0..ROWS_PER_REGION),
                );
                let g = generation.fetch_add(1, Ordering::Relaxed);
                if rng.random_bool(0.5) {
                    table.put(ten_columns(&row, g)).await.unwrap();
                } else {
                    // Even columns in one Put, odd ones in another, applied as one.
                    let half = |parity: usize| {
                        (0..COLUMNS)
                            .filter(|c| c % 2 == parity)
                            .fold(Put::new(&row), |p, c| {
                                p.add_column(FAMILY, format!("c{c}"), value(g))
                            })
                    };
                    table
                        .mutate_row(RowMutations::new(&row).add(half(0)).add(half(1)))
                        .await
                        .unwrap();
                }
                n += 1;
                wrote.fetch_add(1, Ordering::Relaxed);
            }
            n
        }));
    }
    // Batch writers: one batch updates the group rows of all four regions to one generation,
    // or inserts a new set of four rows, one per region.
    for task in 0..2 {
        let (table, generation, stop, wrote) = (
            table.clone(),
            generation.clone(),
            stop.clone(),
            wrote.clone(),
        );
        writers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ 0xBA7 ^ ((task as u64) << 32));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let g = generation.fetch_add(1, Ordering::Relaxed);
                let ops: Vec<BatchOp> = if rng.random_bool(0.6) {
                    (0..REGION_PREFIXES.len())
                        .map(|r| BatchOp::Put(ten_columns(&group_row(r), g)))
                        .collect()
                } else {
                    (0..REGION_PREFIXES.len())
                        .map(|r| BatchOp::Put(ten_columns(&new_set_row(r, g), g)))
                        .collect()
                };
                for r in table.batch(ops).await.unwrap() {
                    r.unwrap();
                }
                n += 1;
                wrote.fetch_add(1, Ordering::Relaxed);
            }
            n
        }));
    }
    // Readers: full scans (forward and reverse), each followed by point gets.
    let mut readers = Vec::new();
    for task in 0..6 {
        let (table, stop, scanned, got) =
            (table.clone(), stop.clone(), scanned.clone(), got.clone());
        readers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ 0x5CA ^ ((task as u64) << 32));
            let mut stats = ScanStats::default();
            while !stop.load(Ordering::Relaxed) {
                let reverse = rng.random_bool(0.3);
                let mut rows: Vec<_> = table
                    .scan(Scan::new().reversed(reverse))
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
                if reverse {
                    rows.reverse();
                }
                let (n, sets) = check_scan(&rows, &format!("scan {}", stats.scans));
                stats.scans += 1;
                scanned.fetch_add(1, Ordering::Relaxed);
                stats.rows += n;
                stats.sets_seen += sets;
                for _ in 0..16 {
                    let row = if rng.random_bool(0.2) {
                        group_row(rng.random_range(0..REGION_PREFIXES.len()))
                    } else {
                        plain_row(
                            rng.random_range(0..REGION_PREFIXES.len()),
                            rng.random_range(0..ROWS_PER_REGION),
                        )
                    };
                    let r = table.get(Get::new(&row)).await.unwrap();
                    row_generation(&r, "get");
                    stats.gets += 1;
                    got.fetch_add(1, Ordering::Relaxed);
                }
                // A scan stream is always ready and a get never waits, so a reader loop
                // never returns `Pending` by itself: yield, or it keeps its worker forever
                // and starves the writers and the timer that ends the test.
                tokio::task::yield_now().await;
            }
            stats
        }));
    }

    let started = Instant::now();
    tokio::time::sleep(run_for).await;
    let deadline = started + Duration::from_secs(120);
    loop {
        let flushed = table
            .regions()
            .await
            .unwrap()
            .iter()
            .any(|r| r.store_files > 0);
        let (w, s, g) = (
            wrote.load(Ordering::Relaxed),
            scanned.load(Ordering::Relaxed),
            got.load(Ordering::Relaxed),
        );
        if w >= 100 && s >= 20 && g >= 100 && flushed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{w} writes, {s} scans, {g} gets, flushed {flushed} after {:?}: too few to mean \
             anything",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut writes = 0;
    for w in writers {
        writes += w.await.unwrap();
    }
    let mut total = ScanStats::default();
    for r in readers {
        let s = r.await.unwrap();
        total.scans += s.scans;
        total.rows += s.rows;
        total.gets += s.gets;
        total.sets_seen += s.sets_seen;
    }
    let regions = table.regions().await.unwrap();
    let files: usize = regions.iter().map(|r| r.store_files).sum();
    let file_bytes: u64 = regions.iter().map(|r| r.store_file_size).sum();
    println!(
        "{writes} writes, {} scans ({} rows, {} complete inserted sets), {} gets, {files} \
         store files of {} KiB on average, {:?}",
        total.scans,
        total.rows,
        total.sets_seen,
        total.gets,
        file_bytes / files.max(1) as u64 / 1024,
        started.elapsed()
    );

    // And once more after a close and reopen (replay and store files only).
    drop(table);
    conn.close().await.unwrap();
    let conn = Connection::open_with(config(tmp.path(), ATOMIC_FLUSH))
        .await
        .unwrap();
    let rows: Vec<_> = conn
        .table("atomic")
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    check_scan(&rows, "after reopen");
    conn.close().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// Scans at one Snapshot.
// ---------------------------------------------------------------------------------------

/// Sum of the 8-byte balances `scan` returns, and the rows it saw.
async fn balances(table: &Table, scan: Scan, snap: &basalt::client::Snapshot) -> (i64, usize) {
    let rows: Vec<basalt::client::RowResult> = table
        .scan_at(scan, snap)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let sum = rows
        .iter()
        .map(|r| {
            let v = r.value(FAMILY, "c").expect("balance");
            i64::from_be_bytes(v.as_ref().try_into().unwrap())
        })
        .sum();
    (sum, rows.len())
}

/// Transfers move amounts between a row of the first half and a row of the second half of
/// a table (two regions), one atomic batch of two puts each, while readers scan the two halves in two
/// separate scans at one `Snapshot`, some time apart: the two halves always add up to the
/// starting total, and a scan started before a later commit does not see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn separate_scans_at_one_snapshot_read_one_state() {
    const ROWS: u64 = 8;
    const START: i64 = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open_with(config(dir.path(), ATOMIC_FLUSH))
        .await
        .unwrap();
    let t = create(&conn, "snap", &["m"]).await;
    let row = |half: u64, i: u64| format!("{}{i}", if half == 0 { "a" } else { "n" });
    for half in 0..2 {
        for i in 0..ROWS {
            t.put(Put::new(row(half, i)).add_column(FAMILY, "c", START.to_be_bytes()))
                .await
                .unwrap();
        }
    }
    let total = 2 * ROWS as i64 * START;
    let stop = Arc::new(AtomicBool::new(false));
    let transfers = Arc::new(AtomicU64::new(0));
    let mut rng = StdRng::seed_from_u64(seed());
    let writer = {
        let (t, stop, transfers) = (t.clone(), stop.clone(), transfers.clone());
        let mut rng = StdRng::seed_from_u64(rng.random());
        tokio::spawn(async move {
            // The only writer: it knows every balance, and writes both new balances of a
            // transfer as two puts of one batch (one atomic commit across the regions).
            let mut bal = [[START; ROWS as usize]; 2];
            while !stop.load(Ordering::SeqCst) {
                let (i, j, amount) = (
                    rng.random_range(0..ROWS) as usize,
                    rng.random_range(0..ROWS) as usize,
                    rng.random_range(1..50i64),
                );
                bal[0][i] -= amount;
                bal[1][j] += amount;
                let put = |half: u64, k: usize, v: i64| {
                    BatchOp::Put(Put::new(row(half, k as u64)).add_column(
                        FAMILY,
                        "c",
                        v.to_be_bytes(),
                    ))
                };
                let out = t
                    .batch(vec![put(0, i, bal[0][i]), put(1, j, bal[1][j])])
                    .await
                    .unwrap();
                for o in out {
                    o.unwrap();
                }
                transfers.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let mut checks = 0;
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline || transfers.load(Ordering::SeqCst) < 100 {
        let snap = conn.snapshot().unwrap();
        let (first, n1) = balances(&t, Scan::new().stop_row("m"), &snap).await;
        // Let commits land between the two scans of the snapshot.
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..5))).await;
        let (second, n2) = balances(&t, Scan::new().start_row("m"), &snap).await;
        assert_eq!((n1, n2), (ROWS as usize, ROWS as usize));
        assert_eq!(
            first + second,
            total,
            "halves {first} + {second} at read point {}",
            snap.read_point()
        );
        checks += 1;
    }
    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    // A snapshot taken now, then a commit: scans at the snapshot do not see the commit.
    let snap = t.snapshot().unwrap();
    let before = balances(&t, Scan::new().stop_row("m"), &snap).await.0;
    t.put(Put::new(row(0, 0)).add_column(FAMILY, "c", 7i64.to_be_bytes()))
        .await
        .unwrap();
    assert_eq!(
        balances(&t, Scan::new().stop_row("m"), &snap).await.0,
        before
    );
    assert!(checks > 0 && transfers.load(Ordering::SeqCst) >= 100);
    conn.close().await.unwrap();
}
