//! The `index` suite: what secondary indexes cost on the write path, and what an index
//! lookup saves over a filtered full scan. Basalt against itself; the baseline label says
//! which side is which.
//!
//! - `put_1_index` / `put_3_indexes`: puts per second into a table with one index (on `f:a`)
//!   and with three (`f:a`; `f:b` descending covering `f:c`; `f:c` salted into 8 buckets),
//!   against the same puts into a table with none (baseline `none`). 8 concurrent writers,
//!   one new row per put with three 16-byte cells and a 100-byte payload, `SyncWal`. The
//!   rounds as [`crate::put_rounds`] runs them: 5 rounds of `rows / 10` puts (1,000 to
//!   100,000) per table, each after every table was flushed and compacted, each round
//!   starting with the next table; the best round counts. Each indexed put reads its row under the
//!   lock (twice: before and after), and commits its index rows in the same WAL record.
//! - `put_1_local_index`: the same with one region-local index on `f:a` (its rows in the
//!   data table's regions), against the same baseline.
//! - `put_1_unique_index` / `put_1_unique_local_index`: the same with one unique index on
//!   `f:a`, global, and region-local led by the row's first 2 bytes (`p<round>`) on a table
//!   whose split restriction keeps those in one region: each put also checks its value
//!   absent under a lock of its own.
//! - `lookup_100`: the 100 rows whose `f:v` is `needle` among `rows` rows (default
//!   1,000,000), fetched through an index on `f:v` (index query, then the data rows in
//!   batches), against a full scan with a SingleColumnValue filter on `f:v` (baseline
//!   `filtered_scan`). The table is loaded, indexed by an online build, flushed and
//!   major-compacted before timing; best of 3 runs; both must find the same 100 rows.
//!   Given as lookups per second (higher is better).
//! - `lookup_100_local`: the same lookup through a region-local index on `f:v` of the same
//!   table (one scan per region of the table, merged), against the same filtered scan.

use crate::figures::Figure;
use crate::measure::Settings;
use crate::put_rounds::{self, ROUNDS, WRITERS};
use crate::BenchResult;
use basalt_coprocessors::Registry;
use basalt_core::client::{BatchOp, CompareOp, Put, Scan};
use basalt_core::filter::{ColumnValueCondition, Comparator};
use basalt_core::{
    ColumnFamilyDescriptor, Config, Connection, Durability, Filter, SplitRestriction,
    TableDescriptor, TableName,
};
use basalt_index::val;
use basalt_index::{IndexAdmin, IndexDef, Query};
use futures::TryStreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The suite's name in `RESULT` lines.
const SUITE: &str = "index";

/// The suite's default row count (of the lookup table).
pub const DEFAULT_ROWS: u64 = 1_000_000;

/// Rows the lookup finds.
const NEEDLES: u64 = 100;

fn cell(x: u64) -> String {
    format!("{:016x}", x.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Put `i` of round `round`: a new row with three 16-byte cells and a 100-byte payload; its
/// `f:a` is new in every round too (the unique indexes' value).
fn indexed_put(round: u64, i: u64) -> Put {
    Put::new(format!("p{round}-{i:010}"))
        .add_column("f", "a", cell(round << 40 | i))
        .add_column("f", "b", cell(i + 1))
        .add_column("f", "c", cell(i + 2))
        .add_column("f", "p", [b'x'; 100])
        .durability(Durability::SyncWal)
}

async fn put_figures(conn: &Connection, admin: &IndexAdmin, rows: u64) -> BenchResult<Vec<Figure>> {
    for t in ["none", "one", "three", "onelocal", "unique", "uniquelocal"] {
        let mut desc =
            TableDescriptor::new(TableName::parse(t)?).family(ColumnFamilyDescriptor::new("f"));
        if t == "uniquelocal" {
            // Rows `p<round>-...`: each round's rows stay in one region.
            desc = desc.split_restriction(SplitRestriction::KeyPrefix(2));
        }
        conn.admin().create_table(desc).await?;
    }
    admin
        .create(IndexDef::new("a", "one").column("f", "a"))
        .await?;
    admin
        .create(IndexDef::new("a", "three").column("f", "a"))
        .await?;
    admin
        .create(
            IndexDef::new("b", "three")
                .column_desc("f", "b")
                .cover("f", "c"),
        )
        .await?;
    admin
        .create(IndexDef::new("c", "three").column("f", "c").salt_buckets(8))
        .await?;
    admin
        .create(IndexDef::new("a", "onelocal").column("f", "a").local())
        .await?;
    admin
        .create(IndexDef::new("a", "unique").column("f", "a").unique())
        .await?;
    admin
        .create(
            IndexDef::new("a", "uniquelocal")
                .local()
                .row_prefix(2)
                .column("f", "a")
                .unique(),
        )
        .await?;
    let n = (rows / 10).clamp(1_000, 100_000);
    put_rounds::figures(
        SUITE,
        conn,
        n,
        indexed_put,
        conn.table("none")?,
        vec![
            ("put_1_index", conn.table("one")?),
            ("put_3_indexes", conn.table("three")?),
            ("put_1_local_index", conn.table("onelocal")?),
            ("put_1_unique_index", conn.table("unique")?),
            ("put_1_unique_local_index", conn.table("uniquelocal")?),
        ],
    )
    .await
}

async fn lookup_figures(
    conn: &Connection,
    admin: &IndexAdmin,
    rows: u64,
) -> BenchResult<Vec<Figure>> {
    let name = TableName::parse("lookup")?;
    conn.admin()
        .create_table(TableDescriptor::new(name.clone()).family(ColumnFamilyDescriptor::new("f")))
        .await?;
    let t = conn.table("lookup")?;
    let every = (rows / NEEDLES).max(1);
    let load = Instant::now();
    let mut i = 0;
    while i < rows {
        let end = (i + 1000).min(rows);
        let ops = (i..end)
            .map(|k| {
                let v = if k % every == 0 && k / every < NEEDLES {
                    "needle".to_string()
                } else {
                    format!("hay{}", k % 1000)
                };
                BatchOp::Put(
                    Put::new(format!("r{k:010}"))
                        .add_column("f", "v", v)
                        .add_column("f", "p", [b'y'; 64])
                        .durability(Durability::SkipWal),
                )
            })
            .collect();
        for r in t.batch(ops).await? {
            r?;
        }
        i = end;
    }
    conn.admin().flush(&name).await?;
    let loaded = load.elapsed();
    let build = Instant::now();
    admin
        .create(IndexDef::new("v", "lookup").column("f", "v"))
        .await?;
    let built = build.elapsed();
    let build = Instant::now();
    admin
        .create(IndexDef::new("vl", "lookup").column("f", "v").local())
        .await?;
    let built_local = build.elapsed();
    conn.admin()
        .flush(&TableName::parse("lookup.idx.v")?)
        .await?;
    conn.admin().major_compact(&name).await?;
    conn.admin()
        .major_compact(&TableName::parse("lookup.idx.v")?)
        .await?;
    let regions = t.regions().await?.len();
    println!(
        "index: lookup table of {rows} rows ({regions} regions) loaded in {:.1} s, index \
         built online in {:.1} s, local index in {:.1} s",
        loaded.as_secs_f64(),
        built.as_secs_f64(),
        built_local.as_secs_f64()
    );
    let idx = admin.index("lookup", "v").await?;
    let local = admin.index("lookup", "vl").await?;
    let want = NEEDLES.min(rows);
    let (mut by_index, mut by_local, mut by_scan) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        let start = Instant::now();
        let found = idx.rows(&Query::eq(vec![val("needle")])).await?;
        by_index = by_index.min(start.elapsed());
        if found.len() as u64 != want {
            return Err(format!("index lookup found {} rows, want {want}", found.len()).into());
        }
        let start = Instant::now();
        let found = local.rows(&Query::eq(vec![val("needle")])).await?;
        by_local = by_local.min(start.elapsed());
        if found.len() as u64 != want {
            return Err(
                format!("local index lookup found {} rows, want {want}", found.len()).into(),
            );
        }
        let start = Instant::now();
        let filter = Filter::SingleColumnValue(
            ColumnValueCondition::new(
                "f",
                "v",
                CompareOp::Equal,
                Comparator::Binary("needle".into()),
            )
            .filter_if_missing(true),
        );
        let scanned: Vec<_> = t.scan(Scan::new().filter(filter))?.try_collect().await?;
        by_scan = by_scan.min(start.elapsed());
        if scanned.len() as u64 != want {
            return Err(format!("filtered scan found {} rows, want {want}", scanned.len()).into());
        }
    }
    println!(
        "index: {want} rows among {rows}: index lookup {:.2} ms, local index lookup {:.2} ms, \
         filtered full scan {:.1} ms",
        by_index.as_secs_f64() * 1e3,
        by_local.as_secs_f64() * 1e3,
        by_scan.as_secs_f64() * 1e3
    );
    let per_second = |d: Duration| 1.0 / d.as_secs_f64().max(1e-9);
    Ok(vec![
        Figure {
            name: "lookup_100",
            baseline: "filtered_scan",
            basalt: per_second(by_index),
            base: per_second(by_scan),
            unit: "lookups/s",
        },
        Figure {
            name: "lookup_100_local",
            baseline: "filtered_scan",
            basalt: per_second(by_local),
            base: per_second(by_scan),
            unit: "lookups/s",
        },
    ])
}

async fn run_async(s: &Settings) -> BenchResult<Vec<Figure>> {
    let dir = tempfile::Builder::new()
        .prefix("basalt-index")
        .tempdir_in(&s.dir)?;
    let registry = Arc::new(Registry::new());
    let runtime = basalt_index::register(&registry)?;
    let conn = Connection::open_with(
        Config::new(dir.path())
            .block_cache_size(s.cache_bytes)
            .coprocessor_loader(registry),
    )
    .await?;
    let admin = IndexAdmin::new(&conn, runtime);
    let mut out = put_figures(&conn, &admin, s.rows).await?;
    if put_rounds::put_only().is_none() {
        out.extend(lookup_figures(&conn, &admin, s.rows).await?);
    }
    conn.close().await?;
    Ok(out)
}

/// Runs the suite and prints its table and `RESULT` lines.
pub fn run(s: &Settings) -> BenchResult<()> {
    println!(
        "index suite: puts by {WRITERS} writers (best of {ROUNDS} rounds); lookup of \
         {NEEDLES} rows among {} ({} MiB block cache), best of 3",
        s.rows,
        s.cache_bytes >> 20
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let figures = rt.block_on(run_async(s))?;
    crate::figures::print(SUITE, &figures, 1, 16);
    Ok(())
}
