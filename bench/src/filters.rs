//! The `filters` suite: scans whose filter runs inside the region (with seek hints) against
//! the same scan without a filter whose rows the client discards (`client_filter`).
//!
//! Two tables of `rows` rows (default 1,000,000), one 16-byte cell each, 4 regions, flushed
//! and compacted before timing:
//!
//! - `prefix`: keys `<bucket:02>|<i:08>` with `bucket = i % 100`; PrefixFilter(`42|`) keeps
//!   the 1% of rows of one bucket, which lie together: the filter seeks to them and ends the
//!   scan after them.
//! - `fuzzy`: keys `<i / 100:06>|<i % 100:02>`; FuzzyRowFilter(`??????|42`) keeps 1% of rows,
//!   one in every 100, scattered over the whole table: the filter seeks over 99 rows at a
//!   time.
//!
//! Each scan runs 3 times; the best time counts. Both sides must return the same rows.

use crate::measure::Settings;
use crate::BenchResult;
use basalt_core::client::{BatchOp, Put, Scan, Table};
use basalt_core::filter::Filter;
use basalt_core::{
    ColumnFamilyDescriptor, Config, Connection, Durability, PreSplit, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::time::{Duration, Instant};

/// The suite's default row count.
pub const DEFAULT_ROWS: u64 = 1_000_000;

/// One figure: the filtered scan's time against the client-filtered scan's.
pub struct Result {
    name: &'static str,
    basalt: Duration,
    baseline: Duration,
    rows: u64,
}

fn prefix_key(i: u64) -> String {
    format!("{:02}|{:08}", i % 100, i)
}

fn fuzzy_key(i: u64) -> String {
    format!("{:06}|{:02}", i / 100, i % 100)
}

async fn load(
    conn: &Connection,
    name: &str,
    splits: Vec<Vec<u8>>,
    rows: u64,
    key: fn(u64) -> String,
) -> BenchResult<Table> {
    let tn = TableName::parse(name)?;
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(tn.clone())
                .family(ColumnFamilyDescriptor::new("f").block_size(16 * 1024)),
            PreSplit::Keys(splits),
        )
        .await?;
    let table = conn.table(name)?;
    let mut tasks = Vec::new();
    let writers = 4u64;
    for w in 0..writers {
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < rows {
                let mut ops = Vec::with_capacity(256);
                while i < rows && ops.len() < 256 {
                    ops.push(BatchOp::Put(
                        Put::new(key(i))
                            .add_column("f", "v", format!("value-{i:010}"))
                            .durability(Durability::SkipWal),
                    ));
                    i += writers;
                }
                for r in table.batch(ops).await? {
                    r?;
                }
            }
            Ok::<_, basalt_core::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    conn.admin().flush(&tn).await?;
    conn.admin().major_compact(&tn).await?;
    Ok(table)
}

/// The best of 3 runs of `scan`, and the rows it kept.
async fn best<F, Fut>(mut scan: F) -> BenchResult<(Duration, u64)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = BenchResult<u64>>,
{
    let mut best = Duration::MAX;
    let mut rows = 0;
    for _ in 0..3 {
        let start = Instant::now();
        rows = scan().await?;
        best = best.min(start.elapsed());
    }
    Ok((best, rows))
}

/// Times the filtered scan and the client-filtered one; both must keep `want` rows.
async fn compare(
    name: &'static str,
    table: &Table,
    filter: Filter,
    keep: impl Fn(&[u8]) -> bool + Copy,
    want: u64,
) -> BenchResult<Result> {
    let (basalt, got) = best(|| {
        let s = table.scan(Scan::new().filter(filter.clone()));
        async move {
            let mut s = s?;
            let mut n = 0;
            while let Some(r) = s.try_next().await? {
                n += u64::from(keep(&r.row));
            }
            Ok(n)
        }
    })
    .await?;
    let (baseline, base_rows) = best(|| {
        let s = table.scan(Scan::new());
        async move {
            let mut s = s?;
            let mut n = 0;
            while let Some(r) = s.try_next().await? {
                if keep(&r.row) {
                    n += 1;
                }
            }
            Ok(n)
        }
    })
    .await?;
    if got != want || base_rows != want {
        return Err(format!(
            "{name}: filtered scan kept {got} rows, client filter {base_rows}, expected {want}"
        )
        .into());
    }
    println!(
        "filters: {name}: filtered {:.1} ms, client filter {:.1} ms, {got} rows kept",
        basalt.as_secs_f64() * 1e3,
        baseline.as_secs_f64() * 1e3
    );
    Ok(Result {
        name,
        basalt,
        baseline,
        rows: got,
    })
}

async fn run_async(s: &Settings) -> BenchResult<Vec<Result>> {
    let dir = tempfile::Builder::new()
        .prefix("basalt-filters")
        .tempdir_in(&s.dir)?;
    let conn =
        Connection::open_with(Config::new(dir.path()).block_cache_size(s.cache_bytes)).await?;
    let n = s.rows;
    let start = Instant::now();
    let splits = |keys: [&str; 3]| keys.iter().map(|k| k.as_bytes().to_vec()).collect();
    let prefix = load(
        &conn,
        "prefix",
        splits(["25|", "50|", "75|"]),
        n,
        prefix_key,
    )
    .await?;
    let fuzzy = load(
        &conn,
        "fuzzy",
        splits(["002500", "005000", "007500"]),
        n,
        fuzzy_key,
    )
    .await?;
    println!(
        "filters: loaded 2 x {n} rows in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let want = (0..n).filter(|i| i % 100 == 42).count() as u64;
    let mut out = Vec::new();
    out.push(
        compare(
            "prefix_scan",
            &prefix,
            Filter::prefix("42|"),
            |r| r.starts_with(b"42|"),
            want,
        )
        .await?,
    );
    let fuzzy_filter = Filter::fuzzy_row([("??????|42", [1u8, 1, 1, 1, 1, 1, 0, 0, 0])]);
    out.push(
        compare(
            "fuzzy_scan",
            &fuzzy,
            fuzzy_filter,
            |r| r.len() == 9 && r.ends_with(b"|42"),
            want,
        )
        .await?,
    );
    conn.close().await?;
    Ok(out)
}

/// Runs the suite and prints its table and `RESULT` lines.
pub fn run(s: &Settings) -> BenchResult<()> {
    println!(
        "filters suite: {} rows per table, 1% kept; 4 regions, one 16-byte cell per row, \
         flushed and major-compacted; {} MiB block cache; best of 3 runs",
        s.rows,
        s.cache_bytes >> 20
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let results = rt.block_on(run_async(s))?;
    println!();
    println!(
        "{:<12} {:>10} {:>14} {:>14} {:>9}",
        "figure", "rows kept", "filtered ms", "client ms", "speedup"
    );
    for r in &results {
        println!(
            "{:<12} {:>10} {:>14.1} {:>14.1} {:>8.1}x",
            r.name,
            r.rows,
            r.basalt.as_secs_f64() * 1e3,
            r.baseline.as_secs_f64() * 1e3,
            r.baseline.as_secs_f64() / r.basalt.as_secs_f64()
        );
    }
    println!();
    for r in &results {
        let (b, c) = (r.basalt.as_secs_f64() * 1e3, r.baseline.as_secs_f64() * 1e3);
        println!(
            "RESULT filters/{} basalt={b:.1} client_filter={c:.1} ratio={:.3} unit=ms better=lower",
            r.name,
            b / c
        );
    }
    Ok(())
}
