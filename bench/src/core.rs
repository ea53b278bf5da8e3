//! The `core` suite: YCSB-style load, random reads and a full scan, on Basalt and on fjall.
//!
//! Same logical work on both: N rows of 10 fields x 100 bytes loaded by 8 concurrent writers
//! with every acknowledged write handed to the OS (Basalt `SyncWal`, fjall journal persisted
//! with `PersistMode::Buffer` per insert); both engines then flush their memory tables to disk
//! (not timed as a figure) so reads and scans run against on-disk files through equal block
//! caches; N random reads of existing rows by 8 concurrent readers, each read checked byte for
//! byte; one scan of all rows. The engines run one after the other, each in its own temporary
//! directory, deleted before the next engine starts.

use crate::workload::{split_keys, Workload, FIELDS, FIELD_LEN};
use crate::Figure;
use crate::{basalt_side, fjall_side, BenchResult};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The knobs of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Rows loaded (and random reads made).
    pub rows: u64,
    /// Concurrent writers.
    pub writers: usize,
    /// Concurrent readers.
    pub readers: usize,
    /// Basalt regions (pre-split).
    pub regions: u64,
    /// Block cache bytes, the same for both engines.
    pub cache_bytes: u64,
    /// Basalt's data block size for the family (HBase's BLOCKSIZE; smaller suits random reads).
    pub block_size: u32,
    /// Basalt's block compression of flushed files in the core suite (default none, as
    /// fjall's level 0).
    pub compression: basalt_core::Compression,
    /// Basalt's block compression of compacted files (HBase's COMPRESSION_COMPACT; default
    /// LZ4, as fjall compresses the levels below 0, which hold the data once compaction
    /// settles).
    pub compaction_compression: basalt_core::Compression,
    /// Rounds of the random reads and of the full scan; the median round is the figure.
    pub rounds: usize,
    /// Where the temporary data directories go.
    pub dir: PathBuf,
}

impl Settings {
    /// The suite's settings for `rows` rows under `dir`.
    pub fn new(rows: u64, dir: PathBuf) -> Self {
        Settings {
            rows,
            writers: 8,
            readers: 8,
            regions: 8,
            cache_bytes: 256 << 20,
            block_size: 8 * 1024,
            compression: basalt_core::Compression::None,
            compaction_compression: basalt_core::Compression::Lz4,
            rounds: 3,
            dir,
        }
    }
}

/// One timed phase.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    /// Operations done.
    pub ops: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl Phase {
    /// A phase of `ops` operations that took `elapsed`.
    pub fn new(ops: u64, elapsed: Duration) -> Self {
        Phase { ops, elapsed }
    }
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// What one engine measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The load.
    pub load: Phase,
    /// The random reads.
    pub read: Phase,
    /// The full scan (ops = rows).
    pub scan: Phase,
    /// Time to flush after the load (fjall: and to settle background work).
    pub flush: Duration,
    /// On-disk state after the flush, in words.
    pub state: String,
}

/// The round with the median time (the upper median of an even count); `None` if empty.
pub fn median(mut rounds: Vec<Phase>) -> Option<Phase> {
    rounds.sort_by_key(|p| p.elapsed);
    rounds.get(rounds.len() / 2).copied()
}

/// Prints a finished phase.
pub fn progress(engine: &str, phase: &str, p: &Phase) {
    println!(
        "  {engine:<6} {phase:<5} {:>10} ops in {:>8.3} s = {:>12.0} ops/s",
        p.ops,
        p.elapsed.as_secs_f64(),
        p.ops_per_sec()
    );
}

/// Fails if any read missed its row or got wrong bytes.
pub fn check_reads(engine: &str, misses: u64, wrong: u64) -> BenchResult<()> {
    if misses > 0 || wrong > 0 {
        return Err(format!(
            "{engine}: {misses} reads found no row and {wrong} returned wrong contents"
        )
        .into());
    }
    Ok(())
}

/// Fails unless the scan saw every row, every cell and every value byte.
pub fn check_scan(
    engine: &str,
    expected_rows: u64,
    rows: u64,
    cells: u64,
    value_bytes: u64,
    checksum: u64,
) -> BenchResult<()> {
    let cells_want = expected_rows * FIELDS as u64;
    let bytes_want = cells_want * FIELD_LEN as u64;
    if rows != expected_rows || cells != cells_want || value_bytes != bytes_want {
        return Err(format!(
            "{engine}: scan saw {rows} rows / {cells} fields / {value_bytes} value bytes, \
             expected {expected_rows} / {cells_want} / {bytes_want} (checksum {checksum:x})"
        )
        .into());
    }
    Ok(())
}

fn mib(b: u64) -> String {
    format!("{} MiB", b >> 20)
}

fn print_settings(s: &Settings) {
    let cfg = basalt_side::config(Path::new("."), s);
    let splits = split_keys(s.regions);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("== suite core: settings ==");
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; use --release for meaningful figures");
    }
    println!(
        "workload   : {} rows x {FIELDS} fields x {FIELD_LEN} B (YCSB default record); keys \
         `user` + 19-digit FNV-64 hash of the insert index",
        s.rows
    );
    println!(
        "load       : {} concurrent writers (Basalt: tokio tasks; fjall: OS threads), one \
         write per row, acknowledged once handed to the OS",
        s.writers
    );
    println!(
        "read       : {} random gets of existing rows (same seeded sequence for both) from {} \
         concurrent readers, each checked byte for byte",
        s.rows, s.readers
    );
    println!("scan       : one full scan, every row counted and every value touched (Basalt: Scan::cache_blocks(false), as HBase advises for full scans)");
    println!(
        "rounds     : the reads, then the scan, run {} times each per engine; the figure is the \
         median round (both engines vary 20-40% from run to run on a shared VM)",
        s.rounds
    );
    println!(
        "machine    : {cores} CPUs; tokio multi-thread runtime with {cores} workers; data under {}",
        s.dir.display()
    );
    println!(
        "basalt     : Durability::SyncWal; table `usertable`, family `f` with defaults \
         (max_versions 1, bloom ROW, block cache on) but COMPRESSION {:?} and \
         COMPRESSION_COMPACT {:?} (fjall's policy: level 0 uncompressed, LZ4 below) and \
         BLOCKSIZE {} KiB (HBase's default is 64 KiB; seed \
         003: smaller blocks for random reads); \
         {} regions pre-split at {}..{}; memstore_flush_size {} (per region), \
         wal_segment_size {}, block_cache_size {}",
        s.compression,
        s.compaction_compression,
        s.block_size / 1024,
        s.regions,
        String::from_utf8_lossy(&splits[0]),
        String::from_utf8_lossy(&splits[splits.len() - 1]),
        mib(cfg.memstore_flush_size),
        mib(cfg.wal_segment_size),
        mib(cfg.block_cache_size),
    );
    println!(
        "fjall 3    : keyspace `usertable` with default options (64 MiB memtable, 4 KiB \
         blocks, bloom filters, LZ4 on the last level, leveled compaction); journal persisted \
         with PersistMode::Buffer after every insert (manual_journal_persist false); \
         cache_size {}; other database options default (512 MiB max journal, \
         min(cores, 4) worker threads); row value = 10 x (name len, name, u16 len, value)",
        mib(s.cache_bytes)
    );
    println!(
        "between    : after the load both flush their memory tables to disk and let \
         compaction settle (Basalt: Admin::flush, then Admin::compact, which waits for \
         running compactions and runs the minor compactions the policy picks; fjall: \
         rotate_memtable_and_wait, then waits until flushes and compactions stay idle for \
         1 s); not a figure. Reads and scan then run on files \
         through the block caches (the OS page cache is not dropped)."
    );
    println!("order      : Basalt first, then fjall; each in its own temp dir, deleted after");
    println!();
}

/// Runs the suite and returns its figures.
pub fn run(s: &Settings) -> BenchResult<Vec<Figure>> {
    if s.rows == 0 || s.rows > u32::MAX as u64 {
        return Err(format!("--rows must be between 1 and {}", u32::MAX).into());
    }
    print_settings(s);
    std::fs::create_dir_all(&s.dir)?;
    let start = Instant::now();
    let w = Arc::new(Workload::new(s.rows, s.rows));
    println!(
        "generated keys and read order in {:.2} s",
        start.elapsed().as_secs_f64()
    );

    let basalt = {
        let tmp = tempfile::Builder::new()
            .prefix("basalt-bench-basalt-")
            .tempdir_in(&s.dir)?;
        println!("basalt: {}", tmp.path().display());
        basalt_side::run(&w, tmp.path(), s)?
    };
    println!(
        "  basalt flush+compact {:.3} s; after: {}",
        basalt.flush.as_secs_f64(),
        basalt.state
    );
    if std::env::var_os("BASALT_BENCH_ONLY_BASALT").is_some() {
        // For profiling Basalt alone (perf, callgrind): no fjall side, so no ratios.
        println!("BASALT_BENCH_ONLY_BASALT is set: fjall skipped, no figures");
        return Ok(Vec::new());
    }
    let fjall = {
        let tmp = tempfile::Builder::new()
            .prefix("basalt-bench-fjall-")
            .tempdir_in(&s.dir)?;
        println!("fjall: {}", tmp.path().display());
        fjall_side::run(&w, tmp.path(), s)?
    };
    println!(
        "  fjall  flush+settle {:.3} s; after flush: {}",
        fjall.flush.as_secs_f64(),
        fjall.state
    );
    println!();

    let fig = |name: &'static str, b: Phase, f: Phase| Figure::ops(name, b, f);
    Ok(vec![
        fig("core/load", basalt.load, fjall.load),
        fig("core/read", basalt.read, fjall.read),
        fig("core/scan", basalt.scan, fjall.scan),
    ])
}
