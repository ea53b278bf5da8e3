//! The `plugins` suite: what a sandboxed plugin costs against the native coprocessor doing
//! the same job, and against no coprocessor at all. The plugins are the SDK's examples
//! (`examples/plugins/*.wasm`, committed components).
//!
//! - `batch100_plugin`: puts per second in 100-put batches into a table with the
//!   validation plugin attached (one `pre-batch` call per batch, the age rule checked on
//!   every put), against the same batches into a table with no coprocessor (baseline
//!   `none`). Goal: at least 0.8x.
//! - `batch100_native`: the same with the native validation observer (the rule in Rust,
//!   `pre_batch_mutate`): the plugin's figure over this one is the sandbox's price.
//! - `put1_plugin`: single puts (one `pre-batch` call each) with the plugin against none:
//!   the cost of a hook call when the batch is one put.
//! - `hook_call_us`: the time one plugin hook call adds, in microseconds (`better=lower`):
//!   (time per single put with the plugin - time per put with none); baseline: the same
//!   for the native observer.
//! - `batch100_beside_runaway`: 100-put batches into the table with no coprocessor while
//!   two tasks keep writing to a table whose plugin (`examples/plugins/spin`) never
//!   returns, each of their puts stopped at the 100 ms deadline or refused at once while
//!   the attachment backs off, each client pausing 10 ms after a failed put as an HBase
//!   client does between retries (`BASALT_RUNAWAY_PAUSE_MS`, 0: retry at once); baseline:
//!   the same batches with no such tasks (`alone`). `BASALT_PLUGIN_OFFLOAD=1` runs plugin calls with
//!   `block_in_place`, off the async workers (`PluginLimits::offload`, for comparison).
//! - `sum_endpoint`: the sum plugin's sum of an 8-byte column over `rows` rows in 8
//!   regions (the column read through the plugin's column scanner: pages of up to 16 Ki
//!   rows packed into one buffer, read in place on the host), against the built-in
//!   aggregation's sum (baseline `native`, which reads values in place), in rows per
//!   second, both running the 8 regions at once. Goal: within 2x (ratio at least 0.5).
//!   Both must give the same sum.
//!
//! `BASALT_BENCH_PUT_ONLY=none|native|plugin` runs that table's batched puts alone and
//! prints no figure (for a profiler).
//!
//! Puts: 8 writers, each row `v<round><i>` with `info:age` (a valid age) and a 100-byte
//! `info:p`, `SyncWal`. Each table runs 5 rounds (flushed and compacted before each, the
//! tables taking turns); the median round counts. Endpoints: median of 5 calls.

use crate::figures::Figure;
use crate::measure::Settings;
use crate::BenchResult;
use basalt_coprocessors::{
    AggregationClient, CallOptions, Column, EndpointRegistry, Endpoints, Interpreter, KeyRange,
    MiniBatch, Number, ObserverContext, RegionObserver, Registry,
};
use basalt_core::client::{BatchOp, Mutation, Put, Table};
use basalt_core::{
    plugin_coprocessor_name, ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor,
    Durability, Error, PreSplit, TableDescriptor, TableName,
};
use basalt_plugins::{PluginEndpoints, PluginHost, PluginLimits};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SUITE: &str = "plugins";
/// Rows of the endpoint table by default; puts per round are a tenth of it.
pub const DEFAULT_ROWS: u64 = 1_000_000;
const WRITERS: u64 = 8;
const ROUNDS: usize = 5;
const REGIONS: u64 = 8;
/// How long a runaway table's client waits after a failed put (see `isolation_figure`).
const RUNAWAY_PAUSE_MS: u64 = 10;

fn example(name: &str) -> BenchResult<Vec<u8>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/plugins")
        .join(format!("{name}.wasm"));
    Ok(std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?)
}

/// The native validation observer (the rule of `examples/validation_observer.rs`).
struct AgeRule;

fn age_ok(v: &[u8]) -> bool {
    !v.is_empty()
        && v.iter().all(u8::is_ascii_digit)
        && std::str::from_utf8(v)
            .ok()
            .and_then(|t| t.parse::<u32>().ok())
            .is_some_and(|n| n <= 150)
}

#[async_trait::async_trait]
impl RegionObserver for AgeRule {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> basalt_core::Result<()> {
        let mut refused = Vec::new();
        for (i, m) in batch.operations().enumerate() {
            let Mutation::Put(p) = m else { continue };
            for (f, q, _, v) in p.cells() {
                if f == b"info" && q == b"age" && !age_ok(v) {
                    refused.push(i);
                }
            }
        }
        for i in refused {
            let name = ctx.coprocessor_name().to_string();
            batch.veto(
                i,
                Error::Coprocessor {
                    name,
                    msg: "bad age".into(),
                },
            );
        }
        Ok(())
    }
}

fn put(round: usize, i: u64) -> Put {
    Put::new(format!("v{round}{i:012}"))
        .add_column("info", "age", ((i % 100) as u32).to_string())
        .add_column("info", "p", [b'p'; 100])
        .durability(Durability::SyncWal)
}

/// `n` puts into `t` by 8 writers in batches of `batch`; the elapsed time.
async fn round(t: &Table, round: usize, n: u64, batch: u64) -> BenchResult<Duration> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = w * batch;
            while i < n {
                if batch == 1 {
                    t.put(put(round, i)).await?;
                } else {
                    let ops = (i..(i + batch).min(n))
                        .map(|k| BatchOp::Put(put(round, k)))
                        .collect();
                    for r in t.batch(ops).await? {
                        r?;
                    }
                }
                i += WRITERS * batch;
            }
            Ok::<_, basalt_core::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(start.elapsed())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or(Duration::MAX)
}

/// The median round of each table, tables taking turns, each settled before its round.
async fn medians(
    conn: &Connection,
    tables: &[&Table],
    n: u64,
    batch: u64,
) -> BenchResult<Vec<Duration>> {
    let mut runs: Vec<Vec<Duration>> = vec![Vec::new(); tables.len()];
    for r in 0..ROUNDS {
        for k in 0..tables.len() {
            let i = (k + r) % tables.len();
            for t in conn.admin().list_tables().await? {
                conn.admin().flush(&t.name).await?;
                conn.admin().compact(&t.name).await?;
            }
            if let (Some(t), Some(out)) = (tables.get(i), runs.get_mut(i)) {
                out.push(round(t, r * 10 + batch as usize, n, batch).await?);
            }
        }
    }
    Ok(runs.into_iter().map(median).collect())
}

async fn put_figures(conn: &Connection, n: u64, plugin: &str) -> BenchResult<Vec<Figure>> {
    let family = || ColumnFamilyDescriptor::new("info");
    for (name, cp) in [
        ("none", None),
        ("native", Some(CoprocessorDescriptor::new("age-native"))),
        (
            "plugin",
            Some(CoprocessorDescriptor::new(plugin_coprocessor_name(plugin))),
        ),
    ] {
        let mut d = TableDescriptor::new(TableName::parse(name)?).family(family());
        if let Some(cp) = cp {
            d = d.coprocessor(cp);
        }
        conn.admin().create_table(d).await?;
    }
    let (none, native, plugin) = (
        conn.table("none")?,
        conn.table("native")?,
        conn.table("plugin")?,
    );
    // Profiling aid (as the coprocessors suite's): one table's batched puts, no figure.
    if let Some(only) = crate::put_rounds::put_only() {
        let t = conn.table(only.as_str())?;
        medians(conn, &[&t], n, 100).await?;
        return Ok(Vec::new());
    }
    let tables = [&none, &native, &plugin];
    let batched = medians(conn, &tables, n, 100).await?;
    let single = medians(conn, &tables, n / 4, 1).await?;
    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
    let per_put_us = |d: Duration| d.as_secs_f64() * 1e6 / (n / 4).max(1) as f64;
    let (b_none, b_native, b_plugin) = (batched[0], batched[1], batched[2]);
    let (s_none, s_native, s_plugin) = (single[0], single[1], single[2]);
    println!(
        "plugins: 100-put batches {:.0} / {:.0} / {:.0} puts/s (none / native / plugin); single puts {:.0} / {:.0} / {:.0}",
        rate(n, b_none), rate(n, b_native), rate(n, b_plugin),
        rate(n / 4, s_none), rate(n / 4, s_native), rate(n / 4, s_plugin)
    );
    Ok(vec![
        Figure {
            name: "batch100_plugin",
            baseline: "none",
            basalt: rate(n, b_plugin),
            base: rate(n, b_none),
            unit: "puts/s",
        },
        Figure {
            name: "batch100_native",
            baseline: "none",
            basalt: rate(n, b_native),
            base: rate(n, b_none),
            unit: "puts/s",
        },
        Figure {
            name: "batch100_plugin_vs_native",
            baseline: "native",
            basalt: rate(n, b_plugin),
            base: rate(n, b_native),
            unit: "puts/s",
        },
        Figure {
            name: "put1_plugin",
            baseline: "none",
            basalt: rate(n / 4, s_plugin),
            base: rate(n / 4, s_none),
            unit: "puts/s",
        },
        Figure {
            name: "hook_call_us",
            baseline: "native",
            basalt: (per_put_us(s_plugin) - per_put_us(s_none)).max(0.0),
            base: (per_put_us(s_native) - per_put_us(s_none)).max(0.0),
            unit: "us",
        },
    ])
}

/// 100-put batches into the table with no coprocessor while two tasks keep writing to a
/// table whose plugin never returns (each of their puts runs to the 100 ms deadline and
/// fails), against the same batches with no such tasks; rounds alternate.
async fn isolation_figure(conn: &Connection, n: u64, spin: &str) -> BenchResult<Figure> {
    let d = TableDescriptor::new(TableName::parse("spun")?)
        .family(ColumnFamilyDescriptor::new("info"))
        .coprocessor(CoprocessorDescriptor::new(plugin_coprocessor_name(spin)));
    conn.admin().create_table(d).await?;
    let plain = conn.table("none")?;
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    let faults = Arc::new(AtomicU64::new(0));
    // A client pauses after a failed call before it tries again (HBase's hbase.client.pause
    // is 100 ms); `BASALT_RUNAWAY_PAUSE_MS=0` makes the runaway clients retry at once.
    let pause = Duration::from_millis(
        std::env::var("BASALT_RUNAWAY_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(RUNAWAY_PAUSE_MS),
    );
    for r in 0..ROUNDS {
        conn.admin().flush("none").await?;
        conn.admin().compact("none").await?;
        alone.push(round(&plain, 100 + r, n, 100).await?);
        let stop = Arc::new(AtomicBool::new(false));
        let mut spinners = Vec::new();
        for w in 0..2u64 {
            let (t, stop, faults) = (conn.table("spun")?, stop.clone(), faults.clone());
            spinners.push(tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Acquire) {
                    if t.put(put(w as usize, i)).await.is_err() {
                        faults.fetch_add(1, Ordering::Relaxed);
                        if !pause.is_zero() {
                            tokio::time::sleep(pause).await;
                        }
                    }
                    i += 1;
                }
            }));
        }
        beside.push(round(&plain, 200 + r, n, 100).await?);
        stop.store(true, Ordering::Release);
        for s in spinners {
            s.await?;
        }
    }
    let (a, b) = (median(alone), median(beside));
    let rate = |d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
    println!(
        "plugins: 100-put batches {:.0} puts/s alone, {:.0} beside a runaway plugin ({} runaway puts failed at their deadline)",
        rate(a),
        rate(b),
        faults.load(Ordering::Relaxed)
    );
    Ok(Figure {
        name: "batch100_beside_runaway",
        baseline: "alone",
        basalt: rate(b),
        base: rate(a),
        unit: "puts/s",
    })
}

async fn sum_figure(
    conn: &Connection,
    rows: u64,
    host: Arc<PluginHost>,
    plugin: &str,
) -> BenchResult<Figure> {
    let key = |i: u64| format!("r{i:010}");
    let splits = (1..REGIONS)
        .map(|i| key(rows * i / REGIONS).into_bytes())
        .collect();
    let d = TableDescriptor::new(TableName::parse("reads")?)
        .family(ColumnFamilyDescriptor::new("f").block_size(16 * 1024));
    conn.admin()
        .create_table_with_splits(d, PreSplit::Keys(splits))
        .await?;
    let t = conn.table("reads")?;
    let mut i = 0;
    while i < rows {
        let ops = (i..(i + 1000).min(rows))
            .map(|k| {
                BatchOp::Put(
                    Put::new(key(k))
                        .add_column("f", "v", (k as i64).to_be_bytes())
                        .durability(Durability::SkipWal),
                )
            })
            .collect();
        for r in t.batch(ops).await? {
            r?;
        }
        i += 1000;
    }
    conn.admin().flush("reads").await?;
    conn.admin().major_compact("reads").await?;
    let want = (rows as i64) * (rows as i64 - 1) / 2;
    let options = CallOptions::default().concurrency(REGIONS as usize);
    let agg = AggregationClient::new(
        Endpoints::new(conn, Arc::new(EndpointRegistry::with_builtins()))
            .with_options(options.clone()),
    );
    let column = Column::new("f", "v", Interpreter::I64);
    // The same fan-out for both: 8 regions at once.
    let endpoints = PluginEndpoints::new(host).with_options(options);
    let (mut native, mut plugged) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let sum = agg.sum("reads", KeyRange::all(), &column).await?;
        native.push(start.elapsed());
        if sum != Some(Number::I64(want)) {
            return Err(format!("native sum {sum:?}, expected {want}").into());
        }
        let start = Instant::now();
        let answer = endpoints
            .call(conn, "reads", plugin, KeyRange::all(), b"f:v")
            .await?
            .ok_or("no answer")?;
        plugged.push(start.elapsed());
        let got = i64::from_be_bytes(answer.get(..8).ok_or("short answer")?.try_into()?);
        if got != want {
            return Err(format!("plugin sum {got}, expected {want}").into());
        }
    }
    let (n, p) = (median(native), median(plugged));
    println!(
        "plugins: sum over {rows} rows: native {:.1} ms, plugin {:.1} ms",
        n.as_secs_f64() * 1e3,
        p.as_secs_f64() * 1e3
    );
    let rate = |d: Duration| rows as f64 / d.as_secs_f64().max(1e-9);
    Ok(Figure {
        name: "sum_endpoint",
        baseline: "native",
        basalt: rate(p),
        base: rate(n),
        unit: "rows/s",
    })
}

async fn run_async(s: &Settings) -> BenchResult<Vec<Figure>> {
    let dir = tempfile::Builder::new()
        .prefix("basalt-plugins")
        .tempdir_in(&s.dir)?;
    // `BASALT_PLUGIN_OFFLOAD=1`: plugin calls run off the async worker (for A/B runs).
    let offload = std::env::var("BASALT_PLUGIN_OFFLOAD").is_ok_and(|v| v == "1");
    let host = PluginHost::new(PluginLimits {
        offload,
        ..PluginLimits::default()
    })?;
    let registry = Arc::new(Registry::new());
    registry.set_plugin_runtime(host.clone());
    registry.register("age-native", |_| {
        Ok(Arc::new(AgeRule) as Arc<dyn RegionObserver>)
    })?;
    let conn = Connection::open_with(
        Config::new(dir.path())
            .block_cache_size(s.cache_bytes)
            .coprocessor_loader(registry),
    )
    .await?;
    let validation = conn.admin().upload_plugin(example("validation")?).await?.id;
    let sum = conn.admin().upload_plugin(example("sum")?).await?.id;
    let spin = conn.admin().upload_plugin(example("spin")?).await?.id;
    let mut out = put_figures(&conn, (s.rows / 10).max(1000), &validation).await?;
    if crate::put_rounds::put_only().is_none() {
        out.push(isolation_figure(&conn, (s.rows / 10).max(1000), &spin).await?);
        out.push(sum_figure(&conn, s.rows, host, &sum).await?);
    }
    conn.close().await?;
    Ok(out)
}

/// Runs the suite and prints its table and `RESULT` lines.
pub fn run(s: &Settings) -> BenchResult<()> {
    println!(
        "plugins suite: {} puts per round ({WRITERS} writers, median of {ROUNDS} rounds), sum over {} rows in {REGIONS} regions",
        (s.rows / 10).max(1000),
        s.rows
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let figures = rt.block_on(run_async(s))?;
    crate::figures::print(SUITE, &figures, 1, 26);
    Ok(())
}
