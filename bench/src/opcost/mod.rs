//! The `opcost` suite: what one operation costs in instructions and allocations, on Basalt
//! and fjall in one run, so that every engine change is judged the same way. Run under
//! callgrind by `bench/callgrind.py`, which turns each phase's dump into instructions and
//! mallocs per operation; run alone it prints each phase's ops/s and block cache counters.
//!
//! The data is the ycsb suite's (records `user` + FNV-64 of the record number, 10 fields
//! `field0..field9` of 100 bytes cut from ycsb's [`Values`] pool), on the ycsb suite's
//! table (Basalt: `usertable`, family `f`, pre-split, block size and compression from
//! [`crate::measure::Settings`], engine config from [`crate::basalt_side::config`]; fjall: one
//! keyspace, a record as one value, journal persisted on every insert). Each engine runs
//! these phases, in order, each ended by one call of [`phase_end`] (the function callgrind
//! dumps after), which prints `OPCOST <engine> <phase> <ops>`:
//!
//! - `open`: open the engine and create the table (ops 0, not measured);
//! - `put`: `--threads` clients load every record (`SyncWal` puts), then the engine writes
//!   its memory tables to disk and its background work settles (Basalt: `Admin::flush`
//!   then `Admin::compact`, which waits for running compactions and runs what the policy
//!   picks; fjall: `rotate_memtable_and_wait`, then no flush or compaction for 1 s), so a
//!   put is charged its share of the flush and of the compactions the load caused; ops =
//!   records;
//! - `warm`: every record read once, so every data block is in the block cache (ops 0);
//! - `get_cached`: `--operations` gets of uniformly random records (seeded), each checked
//!   to hold its 10 fields; ops = operations;
//! - `scan_row`: `operations / 10` forward scans of 100 rows from random records (Basalt:
//!   no prefetch, as the ycsb suite's); ops = rows returned;
//! - `reopen`: close the engine and open it again on the same directory with a block cache
//!   of [`MISS_CACHE_BYTES`] (8 MiB; see there why not less) (ops 0);
//! - `warm2`: [`WARM2_GETS`] random gets that settle the reopened engine (ops 0);
//! - `get_missed`: the same gets as `get_cached`, now nearly all missing the block cache;
//!   ops = operations.
//!
//! Invariants: both engines get the same keys, values, get sequence and scan starts, all
//! generated before the first engine opens (key strings are built then, not in the measured
//! phases); a get or scanned row without its 10 fields, or a scan that returns no row, fails
//! the run; nothing of a later phase starts before the previous phase's [`phase_end`] (the
//! engines' background work is waited for at the end of `put`, and the close of `reopen`
//! waits for Basalt's compactions and joins fjall's threads). What a miss costs the kernel
//! (the positioned read served from the OS page cache) is not counted by callgrind. fjall
//! keeps its default worker pool (2 workers on 2 cores), whose idle worker can spin under
//! valgrind; `bench/callgrind.py` leaves that loop out (see its `SPIN_FILE`). One worker
//! would not spin but can deadlock fjall 3.1 (the worker blocks sending on its own full
//! channel).

mod fjall;

use crate::workload::FIELDS;
use crate::ycsb::fjall::FjallStore;
use crate::ycsb::generators::key_name;
use crate::ycsb::{Store, Values};
use crate::BenchResult;
use basalt_core::{Connection, Table};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::io::Write;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// Default `--records`.
pub const DEFAULT_RECORDS: u64 = 100_000;
/// Default `--operations` (gets per get phase; a tenth as many scans).
pub const DEFAULT_OPERATIONS: u64 = 50_000;
/// Rows per scan.
pub const SCAN_ROWS: usize = 100;
/// The block cache of the reopened engines (unless `BASALT_BENCH_MISS_CACHE_BYTES` says
/// otherwise): 1024 of Basalt's 8 KiB blocks (the bench's default), 2048 of fjall's 4 KiB ones, against the
/// ~110 MB of data blocks 100,000 records fill, so over 90% of the gets miss. Basalt keeps its
/// block indexes and bloom filters outside the block cache, so they behave as in a normal
/// run whatever the size. fjall pins the index of its first two levels and the filter of
/// level 0 only; the others are one block per table read through the cache, and a block
/// heavier than 80% of one of the cache's shards (8 shards on 2 cores) is never cached: at
/// 1 MiB, every fjall get would read and check its table's whole index and filter again
/// (about 650 KB at 100,000 records). 8 MiB keeps them cached, as in a normal run; the
/// suite warns when fjall's missed gets still read index or filter blocks.
pub const MISS_CACHE_BYTES: u64 = 8 << 20;
/// Gets of the `warm2` phase.
pub const WARM2_GETS: usize = 5_000;
/// Seed of the get sequence.
const GET_SEED: u64 = 0x0C05_7001;
/// Seed of the scan starts.
const SCAN_SEED: u64 = 0x0C05_7002;
/// Seed of the `warm2` gets.
const WARM2_SEED: u64 = 0x0C05_7003;
/// Seed of each load client's values (xor the client number).
const LOAD_SEED: u64 = 0x0C05_7004;

/// The knobs of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Records loaded.
    pub records: u64,
    /// Gets per get phase (`operations / 10` scans).
    pub operations: u64,
    /// Clients for the load, the gets and the scans.
    pub threads: usize,
    /// Basalt's table settings, the block cache size of the first open of both engines,
    /// the region count and the data directory, as the core suite has them.
    pub core: crate::measure::Settings,
    /// The engines to run (`basalt`, `fjall`), in that order.
    pub engines: Vec<String>,
}

/// Everything the phases do, generated once and shared by both engines.
struct Plan {
    /// The key of record `i`.
    keys: Vec<String>,
    /// The records of `get_cached` and `get_missed`.
    gets: Vec<usize>,
    /// The first record of each scan.
    scans: Vec<usize>,
    /// The records of `warm2`.
    warm2: Vec<usize>,
    /// Field values.
    values: Values,
}

impl Plan {
    fn new(s: &Settings) -> BenchResult<Self> {
        let records = usize::try_from(s.records)?;
        let operations = usize::try_from(s.operations)?;
        let draw = |seed: u64, n: usize| -> Vec<usize> {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..n).map(|_| rng.random_range(0..records)).collect()
        };
        Ok(Plan {
            keys: (0..s.records).map(key_name).collect(),
            gets: draw(GET_SEED, operations),
            scans: draw(SCAN_SEED, operations / 10),
            warm2: draw(WARM2_SEED, WARM2_GETS),
            values: Values::new(),
        })
    }
}

/// Ends a phase: prints `OPCOST <engine> <phase> <ops>` and flushes stdout. Never inlined:
/// `bench/callgrind.py` has callgrind dump its counters each time this returns
/// (`--dump-after='*opcost::phase_end*'`), so everything since the previous call, in every
/// thread, is the phase's. `ops` is 0 for a phase that is not measured.
#[inline(never)]
pub fn phase_end(engine: &str, phase: &str, ops: u64) -> BenchResult<()> {
    println!("OPCOST {engine} {phase} {ops}");
    std::io::stdout().flush()?;
    Ok(())
}

/// Prints a finished phase: `work` operations (measured or not) in the time since `start`.
fn progress(engine: &str, phase: &str, work: u64, start: Instant) {
    let secs = start.elapsed().as_secs_f64();
    println!(
        "  {engine:<6} {phase:<10} {work:>9} ops in {secs:>8.3} s = {:>10.0} ops/s",
        work as f64 / secs.max(1e-9)
    );
}

/// Prints the block cache reads of a phase (counters before and after it).
fn print_cache(engine: &str, what: &str, before: (u64, u64), after: (u64, u64)) {
    println!(
        "  {engine:<6} {what}: {} hits, {} misses",
        after.0.saturating_sub(before.0),
        after.1.saturating_sub(before.1)
    );
}

/// The block cache size of the reopened engines: [`MISS_CACHE_BYTES`], or the
/// `BASALT_BENCH_MISS_CACHE_BYTES` environment variable (a profiling aid).
pub fn miss_cache_bytes() -> u64 {
    match std::env::var("BASALT_BENCH_MISS_CACHE_BYTES").map(|v| v.parse::<u64>()) {
        Ok(Ok(bytes)) => bytes,
        _ => MISS_CACHE_BYTES,
    }
}

/// Warns when fewer than 80% of the `gets` missed gets missed the block cache.
fn warn_hits(engine: &str, gets: u64, misses: u64) {
    if misses * 5 < gets * 4 {
        println!(
            "WARNING: only {misses} of {engine}'s {gets} missed gets missed the block cache: \
             the figure is partly a cached get's"
        );
    }
}

/// Client `t`'s share of `0..n` when `threads` clients split it.
fn share(n: usize, threads: usize, t: usize) -> Range<usize> {
    n * t / threads..n * (t + 1) / threads
}

/// A fresh temporary directory for `engine` under the run's directory.
fn temp_dir(s: &Settings, engine: &str) -> BenchResult<tempfile::TempDir> {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("basalt-bench-opcost-{engine}-"))
        .tempdir_in(&s.core.dir)?;
    println!("{engine}: {}", tmp.path().display());
    Ok(tmp)
}

/// Runs `f(t, share)` for each of `threads` clients as tokio tasks over `0..n`; returns the
/// sum of what they return.
async fn basalt_clients<F, Fut>(threads: usize, n: usize, f: F) -> BenchResult<u64>
where
    F: Fn(usize, Range<usize>) -> Fut,
    Fut: Future<Output = BenchResult<u64>> + Send + 'static,
{
    let tasks: Vec<_> = (0..threads)
        .map(|t| tokio::spawn(f(t, share(n, threads, t))))
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok(total)
}

/// Gets `records` of `plan` on Basalt with `threads` clients, each checked.
async fn basalt_gets(
    table: &Table,
    plan: &Arc<Plan>,
    threads: usize,
    records: fn(&Plan) -> &[usize],
) -> BenchResult<u64> {
    basalt_clients(threads, records(plan).len(), |_, range| {
        let (table, plan) = (table.clone(), plan.clone());
        async move {
            for &i in &records(&plan)[range.clone()] {
                crate::ycsb::basalt::read(&table, plan.keys[i].as_bytes()).await?;
            }
            Ok(range.len() as u64)
        }
    })
    .await
}

/// Basalt's block cache (hits, misses) since the engine opened.
fn basalt_cache(conn: &Connection) -> (u64, u64) {
    let stats = conn.engine().stats();
    (stats.block_cache_hits, stats.block_cache_misses)
}

/// Runs every phase on Basalt in a fresh temporary directory.
fn run_basalt(s: &Settings, plan: &Arc<Plan>) -> BenchResult<()> {
    const E: &str = "basalt";
    let tmp = temp_dir(s, E)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let threads = s.threads;
    let records = plan.keys.len();
    rt.block_on(async {
        let (conn, table) = crate::ycsb::basalt::open(tmp.path(), &s.core).await?;
        phase_end(E, "open", 0)?;

        let start = Instant::now();
        basalt_clients(threads, records, |t, range| {
            let (table, plan) = (table.clone(), plan.clone());
            async move {
                let mut rng = StdRng::seed_from_u64(LOAD_SEED ^ t as u64);
                for i in range.clone() {
                    let fields: [&[u8]; FIELDS] = plan.values.row(&mut rng);
                    crate::ycsb::basalt::insert(&table, plan.keys[i].as_bytes(), &fields).await?;
                }
                Ok(range.len() as u64)
            }
        })
        .await?;
        let admin = conn.admin();
        admin.flush(crate::ycsb::basalt::TABLE).await?;
        admin.compact(crate::ycsb::basalt::TABLE).await?;
        progress(E, "put", s.records, start);
        phase_end(E, "put", s.records)?;

        let start = Instant::now();
        let before = basalt_cache(&conn);
        basalt_clients(threads, records, |_, range| {
            let (table, plan) = (table.clone(), plan.clone());
            async move {
                for i in range.clone() {
                    crate::ycsb::basalt::read(&table, plan.keys[i].as_bytes()).await?;
                }
                Ok(range.len() as u64)
            }
        })
        .await?;
        progress(E, "warm", s.records, start);
        print_cache(E, "warm block cache", before, basalt_cache(&conn));
        phase_end(E, "warm", 0)?;

        let start = Instant::now();
        let before = basalt_cache(&conn);
        let n = basalt_gets(&table, plan, threads, |p| p.gets.as_slice()).await?;
        progress(E, "get_cached", n, start);
        print_cache(E, "get_cached block cache", before, basalt_cache(&conn));
        phase_end(E, "get_cached", n)?;

        let start = Instant::now();
        let before = basalt_cache(&conn);
        let rows = basalt_clients(threads, plan.scans.len(), |_, range| {
            let (table, plan) = (table.clone(), plan.clone());
            async move {
                let mut rows = 0;
                for &i in &plan.scans[range] {
                    let key = plan.keys[i].as_bytes();
                    let n = crate::ycsb::basalt::scan(&table, key, SCAN_ROWS).await?;
                    if n == 0 {
                        return Err(
                            format!("basalt: scan from {} found no row", plan.keys[i]).into()
                        );
                    }
                    rows += n;
                }
                Ok(rows)
            }
        })
        .await?;
        progress(E, "scan_row", rows, start);
        print_cache(E, "scan_row block cache", before, basalt_cache(&conn));
        phase_end(E, "scan_row", rows)?;

        let start = Instant::now();
        conn.close().await?;
        drop(table);
        drop(conn);
        let mut small = s.core.clone();
        small.cache_bytes = miss_cache_bytes();
        let conn = Connection::open_with(crate::basalt_side::config(tmp.path(), &small)).await?;
        let table = conn.table(crate::ycsb::basalt::TABLE)?;
        progress(E, "reopen", 1, start);
        phase_end(E, "reopen", 0)?;

        let start = Instant::now();
        let before = basalt_cache(&conn);
        let n = basalt_gets(&table, plan, threads, |p| p.warm2.as_slice()).await?;
        progress(E, "warm2", n, start);
        print_cache(E, "warm2 block cache", before, basalt_cache(&conn));
        phase_end(E, "warm2", 0)?;

        let start = Instant::now();
        let before = basalt_cache(&conn);
        let n = basalt_gets(&table, plan, threads, |p| p.gets.as_slice()).await?;
        progress(E, "get_missed", n, start);
        let after = basalt_cache(&conn);
        print_cache(E, "get_missed block cache", before, after);
        warn_hits(E, n, after.1.saturating_sub(before.1));
        phase_end(E, "get_missed", n)?;

        conn.close().await?;
        BenchResult::Ok(())
    })
}

/// Prints what the run does.
fn print_settings(s: &Settings) {
    println!("== suite opcost: settings ==");
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; use --release for meaningful figures");
    }
    println!(
        "records    : {} (ycsb records: 10 fields x 100 B, keys `user` + FNV-64); {} clients",
        s.records, s.threads
    );
    println!(
        "phases     : open, put (load + flush + settle), warm (every record read), get_cached \
         ({} gets), scan_row ({} scans of {SCAN_ROWS} rows), reopen (block cache {} KiB), \
         warm2 ({WARM2_GETS} gets), get_missed (the get_cached gets again)",
        s.operations,
        s.operations / 10,
        miss_cache_bytes() >> 10
    );
    println!(
        "engines    : {}; first open with a {} MiB block cache each; Basalt block size {} KiB",
        s.engines.join(","),
        s.core.cache_bytes >> 20,
        s.core.block_size >> 10
    );
    println!(
        "measure    : python3 bench/callgrind.py [--out DIR] <these arguments>: instructions \
         and mallocs per operation from one callgrind dump per phase"
    );
    // A record takes about 1.2 KB in a data block.
    if s.records * 1200 > s.core.cache_bytes {
        println!(
            "WARNING: {} records may not fit the {} MiB block cache: get_cached would miss",
            s.records,
            s.core.cache_bytes >> 20
        );
    }
    println!();
}

/// Runs the suite.
pub fn run(s: &Settings) -> BenchResult<()> {
    if s.records < 2 || s.threads == 0 || s.operations < 10 {
        return Err(
            "opcost: --records must be at least 2, --operations at least 10, --threads at least 1"
                .into(),
        );
    }
    print_settings(s);
    std::fs::create_dir_all(&s.core.dir)?;
    let plan = Arc::new(Plan::new(s)?);
    let wanted = |e: &str| s.engines.iter().any(|w| w == e);
    if wanted("basalt") {
        run_basalt(s, &plan)?;
    }
    if wanted("fjall") {
        fjall::run_fjall(s, &plan)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_item_once() {
        for (n, threads) in [(0, 1), (7, 3), (100, 2), (5, 8)] {
            let mut next = 0;
            for t in 0..threads {
                let r = share(n, threads, t);
                assert_eq!(r.start, next, "{n} {threads} {t}");
                next = r.end;
            }
            assert_eq!(next, n);
        }
    }

    #[test]
    fn every_phase_runs_on_both_engines() {
        let dir = tempfile::tempdir().unwrap();
        let s = Settings {
            records: 300,
            operations: 100,
            threads: 2,
            core: crate::measure::Settings::new(300, dir.path().to_path_buf()),
            engines: vec!["basalt".into(), "fjall".into()],
        };
        run(&s).unwrap();
        let plan = Plan::new(&s).unwrap();
        assert_eq!(plan.keys.len(), 300);
        assert_eq!(plan.gets.len(), 100);
        assert_eq!(plan.scans.len(), 10);
        assert!(plan.gets.iter().chain(&plan.scans).all(|&i| i < 300));
    }
}
