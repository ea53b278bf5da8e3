//! Put throughput of tables measured against each other in one run (suites `index` and
//! `coprocessors`): every table gets the same puts from [`WRITERS`] concurrent writers, in
//! [`ROUNDS`] rounds, and its best round counts.
//!
//! Invariants: before every timed round each table (index tables too) is flushed and
//! compacted, so no round pays for the background work of the rounds before it; each round
//! starts with the next table, so whatever a round leaves behind lands on each table in turn.

use crate::figures::Figure;
use crate::BenchResult;
use basalt_core::client::{Put, Table};
use basalt_core::Connection;
use std::time::{Duration, Instant};

/// Concurrent writers of a round.
pub const WRITERS: u64 = 8;
/// Rounds per table (the best counts).
pub const ROUNDS: u64 = 5;

/// Flushes every table of `conn` and waits for the compactions that follow.
async fn settle(conn: &Connection) -> BenchResult<()> {
    for t in conn.admin().list_tables().await? {
        conn.admin().flush(&t.name).await?;
        conn.admin().compact(&t.name).await?;
    }
    Ok(())
}

/// `n` puts into `table` by [`WRITERS`] writers, put `i` of round `round` made by
/// `make(round, i)`; the elapsed time.
async fn round(
    table: &Table,
    round: u64,
    n: u64,
    make: fn(u64, u64) -> Put,
) -> BenchResult<Duration> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < n {
                table.put(make(round, i)).await?;
                i += WRITERS;
            }
            Ok::<_, basalt_core::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(start.elapsed())
}

/// Puts per second of each of `tables` (same order): the best of [`ROUNDS`] rounds of `n`
/// puts made by `make`.
pub async fn best_rates(
    conn: &Connection,
    tables: &[Table],
    n: u64,
    make: fn(u64, u64) -> Put,
) -> BenchResult<Vec<f64>> {
    let mut best = vec![Duration::MAX; tables.len()];
    for r in 0..ROUNDS {
        for k in 0..tables.len() {
            let i = (k + r as usize) % tables.len();
            settle(conn).await?;
            if let (Some(t), Some(b)) = (tables.get(i), best.get_mut(i)) {
                *b = (*b).min(round(t, r, n, make).await?);
            }
        }
    }
    Ok(best
        .into_iter()
        .map(|d| n as f64 / d.as_secs_f64().max(1e-9))
        .collect())
}

/// The figures of `measured` (a figure name and its table each) against `baseline` (label
/// `none`), in puts per second, rounds as [`best_rates`] runs them; prints one line of the
/// rates under `suite`.
pub async fn figures(
    suite: &str,
    conn: &Connection,
    n: u64,
    make: fn(u64, u64) -> Put,
    baseline: Table,
    measured: Vec<(&'static str, Table)>,
) -> BenchResult<Vec<Figure>> {
    let mut tables = vec![baseline];
    tables.extend(measured.iter().map(|(_, t)| t.clone()));
    let rates = best_rates(conn, &tables, n, make).await?;
    let base = rates.first().copied().unwrap_or(0.0);
    let figures: Vec<Figure> = measured
        .iter()
        .zip(rates.iter().skip(1))
        .map(|((name, _), rate)| Figure {
            name,
            baseline: "none",
            basalt: *rate,
            base,
            unit: "ops/s",
        })
        .collect();
    let each: Vec<String> = figures
        .iter()
        .map(|f| format!("{} {:.0}/s", f.name, f.basalt))
        .collect();
    println!(
        "{suite}: {n} puts x {ROUNDS} rounds: none {base:.0}/s, {}",
        each.join(", ")
    );
    Ok(figures)
}
