//! The storage suite's data sets and what both engines' sides share: the codec variants,
//! the lookups and scans measured per data set, the checks of what was read, and waiting
//! for background work to settle.
//!
//! Invariant: a lookup or scan that finds other rows than the data set holds fails the run.

use crate::measure::Phase;
use crate::workload::{Key, Workload, FIELDS, FIELD_LEN};
use crate::BenchResult;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Load rounds, each followed by a flush: the store files each Basalt region ends with.
pub const FLUSHES: u64 = 4;
/// Block cache of both engines in this suite (smaller than every data set).
pub const CACHE_BYTES: u64 = 16 << 20;
/// The suite's default row count.
pub const DEFAULT_ROWS: u64 = 200_000;
/// Basalt's data block size for the data sets read by key: fjall's (4 KiB), so both engines
/// read blocks of one size; seed 003 (and HBase's guide) advise small blocks for tables read
/// at random. The codec data sets (loads, scans, sizes) use `--block-size`.
pub const READ_BLOCK_SIZE: u32 = 4096;

/// The codecs this suite loads. fjall 3 has LZ4 (its default `lz4` feature) and none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Uncompressed blocks.
    None,
    /// LZ4 (both engines).
    Lz4,
    /// Zstandard (Basalt only).
    Zstd,
    /// Snappy (Basalt only).
    Snappy,
}

/// One data set: how it is stored and whether it is read.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    /// Basalt: ROW bloom filter (true) or NONE; fjall: its default filters or none at all.
    pub bloom: bool,
    /// Block compression (`None` for fjall means its default policy: LZ4 on the last level).
    pub codec: Option<Codec>,
    /// Whether absent and present keys are read.
    pub absent_reads: bool,
    /// Whether present keys are read.
    pub present_reads: bool,
    /// Basalt's data block size (fjall keeps its default).
    pub block_size: u32,
}

/// Random reads of one kind, measured.
#[derive(Debug, Clone, Copy)]
pub struct Lookups {
    /// The reads.
    pub phase: Phase,
    /// Data blocks read (from the block cache or the file) per lookup.
    pub blocks_per_lookup: f64,
    /// Store files consulted per lookup (Basalt: files of the row's region not skipped by
    /// their bloom filter; fjall: not measured, NaN).
    pub files_per_lookup: f64,
}

/// What one data set measured.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Writes of every row plus the flushes.
    pub load: Phase,
    /// One full scan (ops = rows).
    pub scan: Phase,
    /// Bytes of store files (Basalt) or tables (fjall) after the load.
    pub disk_bytes: u64,
    /// Absent-key reads, if made.
    pub absent: Option<Lookups>,
    /// Present-key reads, if made.
    pub present: Option<Lookups>,
}

/// The keys of the suite: the workload plus the absent keys.
pub struct Keys {
    /// Rows, values and the present-key read order.
    pub w: Arc<Workload>,
    /// Keys of no row, in read order.
    pub absent: Vec<Key>,
}

/// The round of lookups with the median time (see [`crate::measure::median`]).
pub fn median(mut rounds: Vec<Lookups>) -> BenchResult<Lookups> {
    rounds.sort_by_key(|l| l.phase.elapsed);
    rounds
        .get(rounds.len() / 2)
        .copied()
        .ok_or_else(|| "no lookup round".into())
}

/// Fails unless a read phase found exactly what it should.
pub fn check_lookups(engine: &str, what: &str, found: u64, expected: u64) -> BenchResult<()> {
    if found != expected {
        return Err(
            format!("{engine}: {what} reads found {found} rows, expected {expected}").into(),
        );
    }
    Ok(())
}

/// Fails unless a scan saw every row and value byte.
pub fn check_scan(engine: &str, w: &Workload, rows: u64, value_bytes: u64) -> BenchResult<()> {
    let want = w.rows * (FIELDS * FIELD_LEN) as u64;
    if rows != w.rows || value_bytes != want {
        return Err(format!(
            "{engine}: scan saw {rows} rows / {value_bytes} value bytes, expected {} / {want}",
            w.rows
        )
        .into());
    }
    Ok(())
}

/// Prints a finished phase.
pub fn progress(engine: &str, what: &str, p: &Phase) {
    println!(
        "    {engine:<6} {what:<18} {:>9} ops in {:>7.3} s = {:>10.0} ops/s",
        p.ops,
        p.elapsed.as_secs_f64(),
        p.ops_per_sec()
    );
}

/// Waits `QUIET` of idleness as measured by `busy`, at most `limit`.
pub fn settle(busy: impl Fn() -> bool, quiet: Duration, limit: Duration) -> BenchResult<()> {
    let start = Instant::now();
    let mut idle_since = Instant::now();
    loop {
        if busy() {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= quiet {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err("background work did not settle in time".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
