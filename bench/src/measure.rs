//! What every suite measures with and prints: the knobs of a run ([`Settings`]), one timed
//! phase ([`Phase`]) and an engine's figures ([`Measured`]), the median of rounds, progress
//! lines, and the checks that a run read what it wrote.
//!
//! Invariant: a check that finds a wrong answer fails the run (no figure is printed for it).

use crate::workload::{FIELDS, FIELD_LEN};
use crate::BenchResult;
use std::path::PathBuf;
use std::time::Duration;

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
