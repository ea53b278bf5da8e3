//! The storage suite on Basalt: one pre-split table per data set, loaded in rounds with a
//! flush after each, scanned, then read by key (absent and present) through a small cache.
//!
//! Block counts come from the engine's block cache counters (hits + misses), file counts from
//! each region's store-file count and its `bloom_skipped_files` (both in `RegionInfo`).

use crate::measure::{Phase, Settings};
use crate::storage_dataset::{self, Codec, Dataset, Keys, Lookups, Variant, FLUSHES};
use crate::workload::{split_keys, touch, Key, FIELD_NAMES};
use crate::BenchResult;
use basalt_core::client::{Get, Put, Scan};
use basalt_core::{
    BloomType, ColumnFamilyDescriptor, Compression, Config, Connection, Durability, PreSplit,
    Table, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

const TABLE: &str = "usertable";
const FAMILY: &str = "f";

fn compression(c: Option<Codec>) -> Compression {
    match c {
        Some(Codec::Lz4) => Compression::Lz4,
        Some(Codec::Zstd) => Compression::Zstd,
        Some(Codec::Snappy) => Compression::Snappy,
        Some(Codec::None) | None => Compression::None,
    }
}

/// Loads, scans and reads one data set in `dir`.
pub fn run(k: &Keys, dir: &Path, s: &Settings, v: Variant) -> BenchResult<Dataset> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(k, dir, s, v))
}

async fn run_async(k: &Keys, dir: &Path, s: &Settings, v: Variant) -> BenchResult<Dataset> {
    let conn = Connection::open_with(Config::new(dir).block_cache_size(s.cache_bytes)).await?;
    let admin = conn.admin();
    let name = TableName::parse(TABLE)?;
    let splits: Vec<Key> = split_keys(s.regions);
    let bloom = if v.bloom {
        BloomType::Row
    } else {
        BloomType::None
    };
    admin
        .create_table_with_splits(
            TableDescriptor::new(name.clone())
                .family(
                    ColumnFamilyDescriptor::new(FAMILY)
                        .block_size(v.block_size)
                        .bloom(bloom)
                        .compression(compression(v.codec)),
                )
                // No minor compaction of the 4 flushed files: a point read has 4 files to
                // consult or skip, as fjall has 4 tables.
                .compaction_files(FLUSHES as u32 + 1, 10),
            PreSplit::Keys(splits.iter().map(|k| k.to_vec()).collect()),
        )
        .await?;
    let table = conn.table(TABLE)?;
    let w = &k.w;

    let start = Instant::now();
    for round in 0..FLUSHES {
        let (lo, hi) = (w.rows * round / FLUSHES, w.rows * (round + 1) / FLUSHES);
        let mut tasks = Vec::new();
        for i in 0..s.writers as u64 {
            let n = s.writers as u64;
            let share = lo + (hi - lo) * i / n..lo + (hi - lo) * (i + 1) / n;
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
        admin.flush(&name).await?;
    }
    let load = Phase::new(w.rows, start.elapsed());
    storage_dataset::progress("basalt", "load+flushes", &load);
    let regions = admin.regions(&name).await?;
    let files: Vec<usize> = regions.iter().map(|r| r.store_files).collect();
    let disk_bytes: u64 = regions.iter().map(|r| r.store_file_size).sum();
    let state = format!(
        "{} regions, {} store files, {:.1} MiB",
        regions.len(),
        files.iter().sum::<usize>(),
        disk_bytes as f64 / (1 << 20) as f64
    );
    println!("    basalt after load: {state}");

    let mut scans = Vec::new();
    for _ in 0..s.rounds.max(1) {
        let start = Instant::now();
        let mut stream = table.scan(Scan::new())?;
        let (mut rows, mut value_bytes, mut acc) = (0u64, 0u64, 0u64);
        while let Some(row) = stream.try_next().await? {
            rows += 1;
            for c in &row.cells {
                value_bytes += c.value.len() as u64;
                acc = touch(acc, &c.value);
            }
        }
        let scan = Phase::new(rows, start.elapsed());
        storage_dataset::progress("basalt", "scan", &scan);
        storage_dataset::check_scan("basalt", w, rows, value_bytes)?;
        std::hint::black_box(acc);
        scans.push(scan);
    }
    let scan = crate::measure::median(scans).ok_or("no scan round")?;

    // Files a lookup of `key` could consult: those of its region.
    let files_of = |key: &Key| files[splits.partition_point(|s| s <= key)] as u64;
    let absent = if v.absent_reads {
        let keys: Arc<Vec<Key>> = Arc::new(k.absent.clone());
        let candidates: u64 = keys.iter().map(files_of).sum();
        let mut rounds = Vec::new();
        for _ in 0..s.rounds.max(1) {
            let l = lookups(&conn, &table, &name, s.readers, &keys, candidates, None).await?;
            storage_dataset::progress("basalt", "absent reads", &l.phase);
            rounds.push(l);
        }
        Some(storage_dataset::median(rounds)?)
    } else {
        None
    };
    let present = if v.present_reads {
        let keys: Vec<Key> = w.read_order.iter().map(|&i| w.keys[i as usize]).collect();
        let candidates: u64 = keys.iter().map(files_of).sum();
        let keys = Arc::new(keys);
        let mut rounds = Vec::new();
        for _ in 0..s.rounds.max(1) {
            let l = lookups(&conn, &table, &name, s.readers, &keys, candidates, Some(k)).await?;
            storage_dataset::progress("basalt", "present reads", &l.phase);
            rounds.push(l);
        }
        Some(storage_dataset::median(rounds)?)
    } else {
        None
    };

    conn.close().await?;
    Ok(Dataset {
        load,
        scan,
        disk_bytes,
        absent,
        present,
    })
}

/// Reads `keys` with `readers` tasks. With `present`, every read must return its row's
/// exact contents (`read_order` gives the rows); without, every read must find nothing.
async fn lookups(
    conn: &Connection,
    table: &Table,
    name: &TableName,
    readers: usize,
    keys: &Arc<Vec<Key>>,
    candidate_files: u64,
    present: Option<&Keys>,
) -> BenchResult<Lookups> {
    let cache = conn.engine().block_cache().clone();
    let skipped = |regions: &[basalt_core::RegionInfo]| -> u64 {
        regions.iter().map(|r| r.bloom_skipped_files).sum()
    };
    let skipped_before = skipped(&conn.admin().regions(name).await?);
    let blocks_before = cache.hits() + cache.misses();
    let start = Instant::now();
    let mut tasks = Vec::new();
    let n = keys.len();
    for part in 0..readers {
        let (keys, table) = (keys.clone(), table.clone());
        let w = present.map(|k| k.w.clone());
        tasks.push(tokio::spawn(async move {
            let (mut found, mut wrong) = (0u64, 0u64);
            for idx in n * part / readers..n * (part + 1) / readers {
                let row = table.get(Get::new(keys[idx])).await?;
                if row.is_empty() {
                    continue;
                }
                found += 1;
                if let Some(w) = &w {
                    let i = w.read_order[idx] as u64;
                    let cells = row.cells.iter();
                    if !w.check_row(i, cells.map(|c| (c.qualifier.as_ref(), c.value.as_ref()))) {
                        wrong += 1;
                    }
                }
            }
            Ok::<_, basalt_core::Error>((found, wrong))
        }));
    }
    let (mut found, mut wrong) = (0, 0);
    for t in tasks {
        let (f, x) = t.await??;
        found += f;
        wrong += x;
    }
    let phase = Phase::new(n as u64, start.elapsed());
    let blocks = cache.hits() + cache.misses() - blocks_before;
    let skips = skipped(&conn.admin().regions(name).await?) - skipped_before;
    let (what, expected) = if present.is_some() {
        ("present", n as u64)
    } else {
        ("absent", 0)
    };
    storage_dataset::check_lookups("basalt", what, found, expected)?;
    if wrong > 0 {
        return Err(format!("basalt: {wrong} present reads returned wrong contents").into());
    }
    Ok(Lookups {
        phase,
        blocks_per_lookup: blocks as f64 / n.max(1) as f64,
        files_per_lookup: candidate_files.saturating_sub(skips) as f64 / n.max(1) as f64,
    })
}
