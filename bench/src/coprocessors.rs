//! The `coprocessors` suite: what observers cost on the write path, and what endpoints save
//! over reading the rows on the client. Basalt against itself; the baseline label says
//! which side is which.
//!
//! - `put_5_noop_observers`: puts per second into a table with 5 no-op observers loaded
//!   (every hook the trait's default: the host learns that at the first call of each hook
//!   and skips them from then on), against the same puts into a table with none (baseline
//!   `none`). 8 concurrent writers, one row of one 100-byte cell per put, `SyncWal` (handed
//!   to the OS, as the core suite). Rounds as [`crate::put_rounds`] runs them: 5 rounds
//!   of `rows / 10` puts (1,000 to 100,000) per table, each after every table was flushed
//!   and compacted, each round starting with the next table; the best round counts.
//! - `put_5_trivial_observers`: the same with 5 observers that implement every hook a put
//!   runs (`pre_put`, `pre_batch_mutate`, `post_batch_mutate`, `post_batch`, `post_put`),
//!   each returning at once: what the host's per-call guard costs (no target).
//! - `put_5_working_observers`: the same with 5 observers that each do a small real job:
//!   `pre_put` checks the put's `f:v` cell (present, at most 1 KiB; refused otherwise) and
//!   `post_put` counts the put in memory (a [`StripedCounter`], as HBase's metrics count
//!   with `LongAdder`). Neither hook waits, so they are written in the synchronous hook
//!   forms (`pre_put_now`, `post_put_now`). Target: at least 0.9x of none. The counters
//!   must add up to the puts made.
//! - `put_5_working_async_observers`: the same job written with the async hooks (`pre_put`,
//!   `post_put`): what the synchronous forms save (no target).
//! - `row_count`: the built-in fast row count endpoint against a client-side scan that
//!   counts rows (baseline `client_scan`), over `rows` rows (default 1,000,000). The
//!   endpoint counts in place from the store file's blocks (each region holds one file
//!   after the major compaction, with no delete marker and an empty MemStore).
//! - `sum`: the aggregation endpoint's sum of an 8-byte column against a client-side scan
//!   of that column that sums it (baseline `client_scan`); the endpoint reads the column's
//!   values in place from the blocks, as the row count does.
//!
//! The read table: rows `r<i:010>` with `f:v` = i as a big-endian i64 and `f:p` a 32-byte
//! payload, pre-split into 8 regions, flushed and major-compacted before timing. Endpoint
//! calls run all 8 regions at once (`CallOptions::concurrency(8)`). Each read
//! figure is the best of 3 runs, given as rows per second of the table (higher is better,
//! ratio = Basalt / baseline, as for the put figure); both sides must give the same answer.

use crate::figures::Figure;
use crate::measure::Settings;
use crate::put_rounds::{self, WRITERS};
use crate::BenchResult;
use basalt_coprocessors::{
    AggregationClient, CallOptions, Column, EndpointRegistry, Endpoints, Interpreter, KeyRange,
    MiniBatch, Number, ObserverContext, RegionObserver, Registry, StripedCounter,
};
use basalt_core::client::{BatchOp, Mutation, Put, Scan, Table};
use basalt_core::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Durability, PreSplit,
    TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The suite's name in `RESULT` lines.
const SUITE: &str = "coprocessors";

/// The suite's default row count (of the read table).
pub const DEFAULT_ROWS: u64 = 1_000_000;

/// Observers loaded on the observed table.
const OBSERVERS: usize = 5;
/// Regions of the read table.
const REGIONS: u64 = 8;

/// An observer whose every hook is the default no-op.
struct Noop;
impl RegionObserver for Noop {}

/// An observer that implements every hook of a put, each doing nothing: what the host's
/// guard costs per call when it cannot skip a hook.
struct Trivial;
#[async_trait::async_trait]
impl RegionObserver for Trivial {
    async fn pre_put(&self, _: &mut ObserverContext<'_>, _: &mut Put) -> basalt_core::Result<()> {
        Ok(())
    }
    async fn post_put(&self, _: &mut ObserverContext<'_>, _: &Put) -> basalt_core::Result<()> {
        Ok(())
    }
    async fn pre_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        _: &mut MiniBatch<'_>,
    ) -> basalt_core::Result<()> {
        Ok(())
    }
    async fn post_batch_mutate(
        &self,
        _: &mut ObserverContext<'_>,
        _: &[&Mutation],
    ) -> basalt_core::Result<()> {
        Ok(())
    }
    async fn post_batch(
        &self,
        _: &mut ObserverContext<'_>,
        _: &[&Mutation],
        _: &basalt_core::Result<()>,
    ) -> basalt_core::Result<()> {
        Ok(())
    }
}

/// An observer doing a small real job per put: a check of a column before it, a counter
/// in memory after it. Neither waits, so it implements the synchronous hook forms.
#[derive(Default)]
struct Working {
    puts: StripedCounter,
}

/// Largest `f:v` value [`Working`] accepts.
const WORKING_MAX_VALUE: usize = 1024;

impl Working {
    /// The check before a put: `f:v` present and at most [`WORKING_MAX_VALUE`] bytes.
    fn check(put: &Put) -> basalt_core::Result<()> {
        let ok = put
            .cells()
            .any(|(f, q, _, v)| f == b"f" && q == b"v" && v.len() <= WORKING_MAX_VALUE);
        if ok {
            Ok(())
        } else {
            Err(basalt_core::Error::bad_argument(
                "f:v missing or over 1 KiB",
            ))
        }
    }
}

impl RegionObserver for Working {
    fn pre_put_now(
        &self,
        _: &mut ObserverContext<'_>,
        put: &mut Put,
    ) -> Option<basalt_core::Result<()>> {
        Some(Self::check(put))
    }
    fn post_put_now(
        &self,
        _: &mut ObserverContext<'_>,
        _: &Put,
    ) -> Option<basalt_core::Result<()>> {
        self.puts.add(1);
        Some(Ok(()))
    }
}

/// [`Working`]'s job written with the async hooks (what the synchronous forms save).
struct WorkingAsync(Arc<Working>);

#[async_trait::async_trait]
impl RegionObserver for WorkingAsync {
    async fn pre_put(&self, _: &mut ObserverContext<'_>, put: &mut Put) -> basalt_core::Result<()> {
        Working::check(put)
    }
    async fn post_put(&self, _: &mut ObserverContext<'_>, _: &Put) -> basalt_core::Result<()> {
        self.0.puts.add(1);
        Ok(())
    }
}

fn key(i: u64) -> String {
    format!("r{i:010}")
}

/// Put `i` of round `round`: a new row with one 100-byte cell.
fn plain_put(round: u64, i: u64) -> Put {
    Put::new(format!("p{round}-{i:010}"))
        .add_column("f", "v", [b'x'; 100])
        .durability(Durability::SyncWal)
}

async fn put_figure(
    conn: &Connection,
    rows: u64,
    working: &[Arc<Working>],
) -> BenchResult<Vec<Figure>> {
    let family = || ColumnFamilyDescriptor::new("f");
    let plain = TableName::parse("plain")?;
    conn.admin()
        .create_table(TableDescriptor::new(plain.clone()).family(family()))
        .await?;
    for (table, prefix) in [
        ("observed", "noop"),
        ("trivial", "trivial"),
        ("working", "working"),
        ("working_async", "working_async"),
    ] {
        let mut desc = TableDescriptor::new(TableName::parse(table)?).family(family());
        for i in 0..OBSERVERS {
            desc = desc.coprocessor(CoprocessorDescriptor::new(format!("{prefix}{i}")));
        }
        conn.admin().create_table(desc).await?;
    }
    let n = (rows / 10).clamp(1_000, 100_000);
    let figures = put_rounds::figures(
        SUITE,
        conn,
        n,
        plain_put,
        conn.table("plain")?,
        vec![
            ("put_5_noop_observers", conn.table("observed")?),
            ("put_5_trivial_observers", conn.table("trivial")?),
            ("put_5_working_observers", conn.table("working")?),
            (
                "put_5_working_async_observers",
                conn.table("working_async")?,
            ),
        ],
    )
    .await?;
    // Each working observer serves both working tables.
    let tables = match put_rounds::put_only().as_deref() {
        None => 2,
        Some("put_5_working_observers" | "put_5_working_async_observers") => 1,
        Some(_) => 0,
    };
    let want = tables * n * put_rounds::ROUNDS;
    for (i, w) in working.iter().enumerate() {
        let counted = w.puts.sum();
        if counted != want {
            return Err(format!("working observer {i} counted {counted} puts of {want}").into());
        }
    }
    Ok(figures)
}

async fn load(conn: &Connection, rows: u64) -> BenchResult<Table> {
    let tn = TableName::parse("reads")?;
    let splits = (1..REGIONS)
        .map(|i| key(rows * i / REGIONS).into_bytes())
        .collect();
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(tn.clone())
                .family(ColumnFamilyDescriptor::new("f").block_size(16 * 1024)),
            PreSplit::Keys(splits),
        )
        .await?;
    let table = conn.table("reads")?;
    let mut tasks = Vec::new();
    for w in 0..4u64 {
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < rows {
                let mut ops = Vec::with_capacity(256);
                while i < rows && ops.len() < 256 {
                    ops.push(BatchOp::Put(
                        Put::new(key(i))
                            .add_column("f", "v", (i as i64).to_be_bytes())
                            .add_column("f", "p", [b'p'; 32])
                            .durability(Durability::SkipWal),
                    ));
                    i += 4;
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

/// The best of 3 runs of `f`, and its answer (which must be the same every run).
async fn best<F, Fut, T>(mut f: F) -> BenchResult<(Duration, T)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = BenchResult<T>>,
    T: PartialEq + std::fmt::Debug,
{
    let mut best = Duration::MAX;
    let mut answer = None;
    for _ in 0..3 {
        let start = Instant::now();
        let a = f().await?;
        best = best.min(start.elapsed());
        if let Some(prev) = &answer {
            if *prev != a {
                return Err(format!("answers differ between runs: {prev:?} vs {a:?}").into());
            }
        }
        answer = Some(a);
    }
    let answer = answer.ok_or("no run")?;
    Ok((best, answer))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn read_figures(conn: &Connection, rows: u64) -> BenchResult<Vec<Figure>> {
    let start = Instant::now();
    let table = load(conn, rows).await?;
    println!(
        "coprocessors: loaded {rows} rows in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let registry = Arc::new(EndpointRegistry::with_builtins());
    // Every region at once: a region's in-place answer takes milliseconds, so on a loaded
    // machine the wait for a blocking thread to be scheduled dominates; with the default
    // bound (the core count) the 8 regions would run in 4 waves of such waits.
    let options = CallOptions::default().concurrency(REGIONS as usize);
    let agg = AggregationClient::new(Endpoints::new(conn, registry).with_options(options));
    let (ep_count, count) =
        best(|| async { Ok(agg.fast_row_count("reads", KeyRange::all()).await?) }).await?;
    let (scan_count, client_count) = best(|| async {
        let mut s = table.scan(Scan::new())?;
        let mut n = 0u64;
        while s.try_next().await?.is_some() {
            n += 1;
        }
        Ok(n)
    })
    .await?;
    if count != rows || client_count != rows {
        return Err(
            format!("row count: endpoint {count}, client {client_count}, expected {rows}").into(),
        );
    }
    let column = Column::new("f", "v", Interpreter::I64);
    let (ep_sum, sum) =
        best(|| async { Ok(agg.sum("reads", KeyRange::all(), &column).await?) }).await?;
    let (scan_sum, client_sum) = best(|| async {
        let mut s = table.scan(Scan::new().add_column("f", "v"))?;
        let mut total = 0i64;
        while let Some(r) = s.try_next().await? {
            if let Some(v) = r.value("f", "v") {
                let b: [u8; 8] = v.as_ref().try_into()?;
                total += i64::from_be_bytes(b);
            }
        }
        Ok(total)
    })
    .await?;
    let want = (rows as i64) * (rows as i64 - 1) / 2;
    if sum != Some(Number::I64(want)) || client_sum != want {
        return Err(format!("sum: endpoint {sum:?}, client {client_sum}, expected {want}").into());
    }
    println!(
        "coprocessors: row count endpoint {:.1} ms, client scan {:.1} ms; sum endpoint {:.1} ms, client scan {:.1} ms",
        ms(ep_count),
        ms(scan_count),
        ms(ep_sum),
        ms(scan_sum)
    );
    let rate = |d: Duration| rows as f64 / d.as_secs_f64().max(1e-9);
    Ok(vec![
        Figure {
            name: "row_count",
            baseline: "client_scan",
            basalt: rate(ep_count),
            base: rate(scan_count),
            unit: "rows/s",
        },
        Figure {
            name: "sum",
            baseline: "client_scan",
            basalt: rate(ep_sum),
            base: rate(scan_sum),
            unit: "rows/s",
        },
    ])
}

async fn run_async(s: &Settings) -> BenchResult<Vec<Figure>> {
    let dir = tempfile::Builder::new()
        .prefix("basalt-coprocessors")
        .tempdir_in(&s.dir)?;
    let observers = Arc::new(Registry::new());
    let working: Vec<Arc<Working>> = (0..OBSERVERS).map(|_| Arc::default()).collect();
    for (i, w) in working.iter().enumerate() {
        let sync = Arc::clone(w);
        observers.register(format!("working{i}"), move |_| {
            Ok(Arc::clone(&sync) as Arc<dyn RegionObserver>)
        })?;
        let w = Arc::clone(w);
        observers.register(format!("working_async{i}"), move |_| {
            Ok(Arc::new(WorkingAsync(Arc::clone(&w))) as Arc<dyn RegionObserver>)
        })?;
    }
    for i in 0..OBSERVERS {
        observers.register(format!("noop{i}"), |_| {
            Ok(Arc::new(Noop) as Arc<dyn RegionObserver>)
        })?;
        observers.register(format!("trivial{i}"), |_| {
            Ok(Arc::new(Trivial) as Arc<dyn RegionObserver>)
        })?;
    }
    let conn = Connection::open_with(
        Config::new(dir.path())
            .block_cache_size(s.cache_bytes)
            .coprocessor_loader(observers),
    )
    .await?;
    let mut out = put_figure(&conn, s.rows, &working).await?;
    if put_rounds::put_only().is_none() {
        out.extend(read_figures(&conn, s.rows).await?);
    }
    conn.close().await?;
    Ok(out)
}

/// Runs the suite and prints its table and `RESULT` lines.
pub fn run(s: &Settings) -> BenchResult<()> {
    println!(
        "coprocessors suite: {} rows in the read table ({REGIONS} regions, flushed and \
         major-compacted before timing: one store file per region, empty MemStores, so the \
         endpoints read in place; {} MiB block cache); puts by {WRITERS} writers; best of 3 runs",
        s.rows,
        s.cache_bytes >> 20
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let figures = rt.block_on(run_async(s))?;
    crate::figures::print(SUITE, &figures, 0, 22);
    Ok(())
}
