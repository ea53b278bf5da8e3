//! The `snapshots` suite: what table snapshots and backups cost, each against a baseline
//! measured in the same run (printed as `baseline=`).
//!
//! A table of N rows with 1,000-byte values (N = 1,000,000 by default: about 1 GiB) is
//! loaded with batched puts and flushed; then, in each of `rounds` rounds:
//!
//! 1. `snapshot_ms`: 64 MiB more are written into the MemStore and a snapshot is taken
//!    (flush included); baseline: 64 MiB more written and a plain flush of the table.
//! 2. `clone_ms`: a clone of the snapshot (a catalog update, no data copied); baseline: a
//!    copy of the table's store files into another directory (what a copying clone costs).
//! 3. `backup_full`: a full backup of every table to a fresh directory, in MB/s of store
//!    files; baseline: `cp -r` of the data directory's store files in the same run.
//! 4. `backup_incremental`: 1% of the rows rewritten and flushed, then a backup to the same
//!    target (it copies the new files only), in ms; baseline: `cp -r` of all the files again.
//! 5. `put_with_snapshot`: puts over existing keys (8 writers, N/20 puts) while a snapshot
//!    lives and pins the files compaction replaces; baseline: the same puts with no
//!    snapshot alive (each from a flushed, major-compacted table, in alternating order).
//!
//! The figure of each is the median of the rounds.

use crate::measure::Settings;
use crate::BenchResult;
use basalt_core::client::{BatchOp, Put};
use basalt_core::objects::local;
use basalt_core::{
    BackupOptions, BackupSource, ColumnFamilyDescriptor, Config, Connection, SplitPolicy,
    TableDescriptor, TableName,
};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Rows by default: about 1 GiB of 1,000-byte values.
pub const DEFAULT_ROWS: u64 = 1_000_000;
const VALUE: usize = 1000;
const WRITERS: u64 = 8;

struct Line {
    name: &'static str,
    basalt: f64,
    baseline: f64,
    unit: &'static str,
    lower_is_better: bool,
}

fn key(i: u64) -> String {
    format!("row{i:010}")
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = vec![b'a' + (i % 26) as u8; VALUE];
    v[..8].copy_from_slice(&(i ^ round).to_be_bytes());
    v
}

/// Writes rows `range` (value of `round`) in batches of 500.
async fn write(conn: &Connection, range: std::ops::Range<u64>, round: u64) -> BenchResult<()> {
    let t = conn.table("t")?;
    let mut batch = Vec::with_capacity(500);
    for i in range {
        batch.push(BatchOp::Put(Put::new(key(i)).add_column(
            "f",
            "v",
            value(i, round),
        )));
        if batch.len() == 500 {
            t.batch(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        t.batch(batch).await?;
    }
    Ok(())
}

/// Bytes of the files under `dir`, recursively.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                    _ => e.metadata().map(|m| m.len()).unwrap_or(0),
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Writes every dirty page back first (`sync`), so that a timed phase does not pay for the
/// writes of the one before.
fn settle() -> BenchResult<()> {
    match Command::new("sync").status()?.success() {
        true => Ok(()),
        false => Err("sync failed".into()),
    }
}

/// `cp -r from to`, timed (from a settled page cache).
fn cp_r(from: &Path, to: &Path) -> BenchResult<Duration> {
    settle()?;
    let start = Instant::now();
    let status = Command::new("cp").arg("-r").arg(from).arg(to).status()?;
    if !status.success() {
        return Err(format!("cp -r {} failed", from.display()).into());
    }
    // As the backup, durable: flush what cp wrote.
    settle()?;
    Ok(start.elapsed())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

async fn run_async(s: &Settings, lines: &mut Vec<Line>) -> BenchResult<()> {
    let dir = tempfile::Builder::new()
        .prefix("basalt-snapshots")
        .tempdir_in(&s.dir)?;
    let data = dir.path().join("data");
    let config = Config::new(&data)
        .block_cache_size(s.cache_bytes)
        .memstore_flush_size(256 << 20)
        .split_policy(SplitPolicy::Disabled);
    let conn = Connection::open_with(config).await?;
    let admin = conn.admin();
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("t")?).family(ColumnFamilyDescriptor::new("f")),
        )
        .await?;
    let n = s.rows;
    let start = Instant::now();
    write(&conn, 0..n, 0).await?;
    admin.flush("t").await?;
    admin.major_compact("t").await?;
    println!(
        "loaded {n} rows ({} MiB of store files) in {:.1} s",
        dir_bytes(&data.join("data")) >> 20,
        start.elapsed().as_secs_f64()
    );
    let extra = (64u64 << 20) / VALUE as u64;
    let (mut snap, mut flush, mut clone, mut copy) = (vec![], vec![], vec![], vec![]);
    let (mut full, mut full_cp, mut incr, mut incr_cp) = (vec![], vec![], vec![], vec![]);
    let (mut with_snap, mut without) = (vec![], vec![]);
    for round in 1..=s.rounds as u64 {
        // 1. Snapshot (flush included) against a flush of as much, each from an empty
        //    MemStore and no compaction running.
        admin.flush("t").await?;
        admin.major_compact("t").await?;
        write(&conn, 0..extra, round).await?;
        let t = Instant::now();
        admin.snapshot(&format!("s{round}"), "t").await?;
        snap.push(t.elapsed().as_secs_f64() * 1e3);
        admin.major_compact("t").await?;
        write(&conn, extra..2 * extra, round).await?;
        let t = Instant::now();
        admin.flush("t").await?;
        flush.push(t.elapsed().as_secs_f64() * 1e3);

        // 2. Clone against copying the table's files.
        let t = Instant::now();
        admin
            .clone_snapshot(&format!("s{round}"), format!("c{round}"))
            .await?;
        clone.push(t.elapsed().as_secs_f64() * 1e3);
        let copy_to = dir.path().join(format!("copy{round}"));
        copy.push(cp_r(&data.join("data"), &copy_to)?.as_secs_f64() * 1e3);
        std::fs::remove_dir_all(&copy_to)?;
        admin.disable_table(format!("c{round}")).await?;
        admin.delete_table(format!("c{round}")).await?;

        // 3. A full backup against cp -r of the store files.
        let target = dir.path().join(format!("backup{round}"));
        settle()?;
        let t = Instant::now();
        let done = conn
            .backup(
                local(basalt_core::fs::StdFs::shared(), &target),
                BackupSource::AllTables,
                BackupOptions::default(),
            )
            .await?;
        let secs = t.elapsed().as_secs_f64();
        full.push(done.bytes as f64 / 1e6 / secs);
        let copy_to = dir.path().join(format!("cp{round}"));
        let bytes = dir_bytes(&data.join("data")) as f64;
        full_cp.push(bytes / 1e6 / cp_r(&data.join("data"), &copy_to)?.as_secs_f64());
        std::fs::remove_dir_all(&copy_to)?;

        // 4. Incremental: 1% rewritten, then a backup to the same target.
        write(&conn, 0..n / 100, round + 100).await?;
        admin.flush("t").await?;
        settle()?;
        let t = Instant::now();
        conn.backup(
            local(basalt_core::fs::StdFs::shared(), &target),
            BackupSource::AllTables,
            BackupOptions::default(),
        )
        .await?;
        incr.push(t.elapsed().as_secs_f64() * 1e3);
        incr_cp.push(cp_r(&data.join("data"), &copy_to)?.as_secs_f64() * 1e3);
        std::fs::remove_dir_all(&copy_to)?;
        std::fs::remove_dir_all(&target)?;

        // 5. Puts while a snapshot lives against none alive, in alternating order, each
        //    from a flushed, major-compacted table.
        admin.delete_snapshot(&format!("s{round}")).await?;
        let puts = n / 20;
        let order = match round % 2 {
            0 => [false, true],
            _ => [true, false],
        };
        for alive in order {
            admin.flush("t").await?;
            admin.major_compact("t").await?;
            if alive {
                admin.snapshot(&format!("w{round}"), "t").await?;
            }
            let t = Instant::now();
            put_concurrently(&conn, puts, round * 10 + u64::from(alive)).await?;
            let rate = puts as f64 / t.elapsed().as_secs_f64();
            match alive {
                true => {
                    with_snap.push(rate);
                    admin.delete_snapshot(&format!("w{round}")).await?;
                }
                false => without.push(rate),
            }
        }
    }
    let mut line = |name, basalt, baseline, unit, lower_is_better| {
        lines.push(Line {
            name,
            basalt: median(basalt),
            baseline: median(baseline),
            unit,
            lower_is_better,
        })
    };
    line("snapshots/snapshot_ms", snap, flush, "ms", true);
    line("snapshots/clone_ms", clone, copy, "ms", true);
    line("snapshots/backup_full", full, full_cp, "MB/s", false);
    line("snapshots/backup_incremental_ms", incr, incr_cp, "ms", true);
    line(
        "snapshots/put_with_snapshot",
        with_snap,
        without,
        "ops/s",
        false,
    );
    conn.close().await?;
    Ok(())
}

/// `n` puts over existing keys from 8 writers, single puts.
async fn put_concurrently(conn: &Connection, n: u64, round: u64) -> BenchResult<()> {
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let t = conn.table("t")?;
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < n {
                let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % (n * 20);
                t.put(Put::new(key(k)).add_column("f", "v", value(k, round)))
                    .await?;
                i += WRITERS;
            }
            Ok::<_, basalt_core::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Runs the suite and prints its table and `RESULT` lines.
pub fn run(s: &Settings) -> BenchResult<()> {
    println!(
        "snapshots suite: {} rows of {VALUE}-byte values, {} rounds (medians)",
        s.rows, s.rounds
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut lines = Vec::new();
    rt.block_on(run_async(s, &mut lines))?;
    println!();
    println!(
        "{:<34} {:>12} {:>12} {:>9}",
        "figure", "basalt", "baseline", "ratio"
    );
    for l in &lines {
        println!(
            "{:<34} {:>12.1} {:>12.1} {:>9.3}   {}",
            l.name,
            l.basalt,
            l.baseline,
            l.basalt / l.baseline,
            l.unit
        );
    }
    println!();
    for l in &lines {
        println!(
            "RESULT {} basalt={:.1} baseline={:.1} ratio={:.3} unit={}{}",
            l.name,
            l.basalt,
            l.baseline,
            l.basalt / l.baseline,
            l.unit,
            if l.lower_is_better {
                " better=lower"
            } else {
                ""
            }
        );
    }
    Ok(())
}
