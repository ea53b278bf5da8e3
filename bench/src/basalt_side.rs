//! The core suite on Basalt: a pre-split table with one family, loaded by tokio tasks with
//! one 10-column Put per row, read back with Gets, then scanned with one scanner.

use crate::measure::{Measured, Phase, Settings};
use crate::workload::{split_keys, touch, Workload, FIELD_NAMES};
use crate::BenchResult;
use basalt_core::client::{Get, Put, Scan};
use basalt_core::{
    ColumnFamilyDescriptor, Config, Connection, Durability, PreSplit, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The table's name.
const TABLE: &str = "usertable";
/// The one column family.
const FAMILY: &str = "f";

/// The engine settings the suite uses: the defaults, with the shared block cache size.
pub fn config(dir: &Path, s: &Settings) -> Config {
    let config = Config::new(dir).block_cache_size(s.cache_bytes);
    // Profiling aid (not a setting of the published figures): a small flush size gives a
    // small run the files a full-size run has.
    match std::env::var("BASALT_BENCH_FLUSH_BYTES").map(|v| v.parse::<u64>()) {
        Ok(Ok(bytes)) => config.memstore_flush_size(bytes),
        _ => config,
    }
}

/// Runs load, flush, random reads and the full scan in `dir`.
pub fn run(w: &Arc<Workload>, dir: &Path, s: &Settings) -> BenchResult<Measured> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(w, dir, s))
}

async fn run_async(w: &Arc<Workload>, dir: &Path, s: &Settings) -> BenchResult<Measured> {
    let conn = Connection::open_with(config(dir, s)).await?;
    let admin = conn.admin();
    let name = TableName::parse(TABLE)?;
    let splits = split_keys(s.regions).iter().map(|k| k.to_vec()).collect();
    admin
        .create_table_with_splits(
            TableDescriptor::new(name.clone()).family(
                ColumnFamilyDescriptor::new(FAMILY)
                    .block_size(s.block_size)
                    .compression(s.compression)
                    .compaction_compression(s.compaction_compression),
            ),
            PreSplit::Keys(splits),
        )
        .await?;
    let table = conn.table(TABLE)?;

    // Load: each writer puts its contiguous share of insert indexes (their keys are hashed,
    // so every writer hits every region).
    let start = Instant::now();
    let mut tasks = Vec::new();
    for share in w.shares(s.writers) {
        let (w, table) = (w.clone(), table.clone());
        tasks.push(tokio::spawn(async move {
            for i in share {
                let mut put = Put::new(w.keys[i as usize]).durability(Durability::SyncWal);
                for (j, q) in FIELD_NAMES.iter().enumerate() {
                    put = put.add_column(FAMILY, q, w.field(i, j));
                }
                table.put(put).await?;
            }
            Ok::<_, basalt_core::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let load = Phase::new(w.rows, start.elapsed());
    crate::measure::progress("basalt", "load", &load);

    let start = Instant::now();
    admin.flush(&name).await?;
    admin.compact(&name).await?;
    let flush = start.elapsed();
    let regions = admin.regions(&name).await?;
    let files: usize = regions.iter().map(|r| r.store_files).sum();
    let bytes: u64 = regions.iter().map(|r| r.store_file_size).sum();
    let state = format!(
        "{} regions, {files} store files, {:.1} MiB on disk",
        regions.len(),
        bytes as f64 / (1 << 20) as f64
    );

    let mut reads = Vec::new();
    for _ in 0..s.rounds.max(1) {
        // Random reads: every reader gets its slice of the shared read order.
        let start = Instant::now();
        let mut tasks = Vec::new();
        for part in 0..s.readers {
            let (w, table, readers) = (w.clone(), table.clone(), s.readers);
            tasks.push(tokio::spawn(async move {
                let (mut misses, mut wrong) = (0u64, 0u64);
                for &i in w.read_shares(readers)[part] {
                    let row = table.get(Get::new(w.keys[i as usize])).await?;
                    if row.is_empty() {
                        misses += 1;
                    } else if !w.check_row(
                        i as u64,
                        row.cells
                            .iter()
                            .map(|c| (c.qualifier.as_ref(), c.value.as_ref())),
                    ) {
                        wrong += 1;
                    }
                }
                Ok::<_, basalt_core::Error>((misses, wrong))
            }));
        }
        let (mut misses, mut wrong) = (0, 0);
        for t in tasks {
            let (m, x) = t.await??;
            misses += m;
            wrong += x;
        }
        let read = Phase::new(w.read_order.len() as u64, start.elapsed());
        crate::measure::progress("basalt", "read", &read);
        reads.push(read);
        crate::measure::check_reads("basalt", misses, wrong)?;
    }
    let read = crate::measure::median(reads).ok_or("no read round")?;

    let mut scans = Vec::new();
    for _ in 0..s.rounds.max(1) {
        // Full scan: one scanner, every row, every value touched.
        let start = Instant::now();
        // A full scan reads past the cache: as HBase advises for full-table scans, it does not
        // fill the block cache (it still uses blocks already there).
        let scan = Scan::new().cache_blocks(false);
        let mut stream = table.scan(scan)?;
        let (mut rows, mut cells, mut value_bytes, mut acc) = (0u64, 0u64, 0u64, 0u64);
        while let Some(row) = stream.try_next().await? {
            rows += 1;
            for c in &row.cells {
                cells += 1;
                value_bytes += c.value.len() as u64;
                acc = touch(acc, &c.value);
            }
        }
        let scan = Phase::new(rows, start.elapsed());
        crate::measure::progress("basalt", "scan", &scan);
        scans.push(scan);
        crate::measure::check_scan("basalt", w.rows, rows, cells, value_bytes, acc)?;
    }
    let scan = crate::measure::median(scans).ok_or("no scan round")?;

    conn.close().await?;
    Ok(Measured {
        load,
        read,
        scan,
        flush,
        state,
    })
}
