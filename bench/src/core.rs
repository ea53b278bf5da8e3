//! The `core` suite: YCSB-style load, random reads and a full scan, on Basalt and on fjall.
//!
//! Same logical work on both: N rows of 10 fields x 100 bytes loaded by 8 concurrent writers
//! with every acknowledged write handed to the OS (Basalt `SyncWal`, fjall journal persisted
//! with `PersistMode::Buffer` per insert); both engines then flush their memory tables to disk
//! (not timed as a figure) so reads and scans run against on-disk files through equal block
//! caches; N random reads of existing rows by 8 concurrent readers, each read checked byte for
//! byte; one scan of all rows. The engines run one after the other, each in its own temporary
//! directory, deleted before the next engine starts.

use crate::measure::{Phase, Settings};
use crate::workload::{split_keys, Workload, FIELDS, FIELD_LEN};
use crate::Figure;
use crate::{basalt_side, fjall_side, BenchResult};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

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
