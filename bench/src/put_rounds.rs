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

/// CPU time of the whole process so far (every thread: writers, WAL, flushes).
fn process_cpu() -> BenchResult<Duration> {
    use nix::time::{clock_gettime, ClockId};
    Ok(Duration::from(clock_gettime(
        ClockId::CLOCK_PROCESS_CPUTIME_ID,
    )?))
}

/// One round's cost: wall-clock time and the process's CPU time.
#[derive(Clone, Copy)]
struct Cost {
    wall: Duration,
    cpu: Duration,
}

/// `n` puts into `table` by [`WRITERS`] writers, put `i` of round `round` made by
/// `make(round, i)`; the elapsed time and CPU time.
async fn round(table: &Table, round: u64, n: u64, make: fn(u64, u64) -> Put) -> BenchResult<Cost> {
    let cpu = process_cpu()?;
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
    let wall = start.elapsed();
    Ok(Cost {
        wall,
        cpu: process_cpu()?.saturating_sub(cpu),
    })
}

/// One table's best rounds.
#[derive(Clone, Copy)]
pub struct Rate {
    /// Puts per second of the fastest round.
    pub puts_per_s: f64,
    /// The process's CPU time per put, in microseconds, of the round that used least.
    pub cpu_us: f64,
}

/// The best rounds of each of `tables` (same order), of [`ROUNDS`] rounds of `n` puts made
/// by `make`.
pub async fn best_rates(
    conn: &Connection,
    tables: &[Table],
    n: u64,
    make: fn(u64, u64) -> Put,
) -> BenchResult<Vec<Rate>> {
    let worst = Cost {
        wall: Duration::MAX,
        cpu: Duration::MAX,
    };
    let mut best = vec![worst; tables.len()];
    for r in 0..ROUNDS {
        for k in 0..tables.len() {
            let i = (k + r as usize) % tables.len();
            settle(conn).await?;
            if let (Some(t), Some(b)) = (tables.get(i), best.get_mut(i)) {
                let c = round(t, r, n, make).await?;
                b.wall = b.wall.min(c.wall);
                b.cpu = b.cpu.min(c.cpu);
            }
        }
    }
    let per_put = n.max(1) as f64;
    Ok(best
        .into_iter()
        .map(|c| Rate {
            puts_per_s: n as f64 / c.wall.as_secs_f64().max(1e-9),
            cpu_us: c.cpu.as_secs_f64() * 1e6 / per_put,
        })
        .collect())
}

/// The profiling aid `BASALT_BENCH_PUT_ONLY=NAME`: the figure (or `none`, the baseline)
/// whose table alone the put rounds run, publishing no figure, so that a profiler counts
/// one table's puts (callgrind: `--toggle-collect='basalt_bench::put_rounds::round::*'`).
pub fn put_only() -> Option<String> {
    std::env::var("BASALT_BENCH_PUT_ONLY").ok()
}

/// The figures of `measured` (a figure name and its table each) against `baseline` (label
/// `none`), in puts per second, rounds as [`best_rates`] runs them; prints one line of the
/// rates under `suite`. Under [`put_only`], runs that one table and returns no figure.
pub async fn figures(
    suite: &str,
    conn: &Connection,
    n: u64,
    make: fn(u64, u64) -> Put,
    baseline: Table,
    measured: Vec<(&'static str, Table)>,
) -> BenchResult<Vec<Figure>> {
    if let Some(only) = put_only() {
        let table = if only == "none" {
            baseline
        } else {
            measured
                .iter()
                .find(|(name, _)| *name == only)
                .map(|(_, t)| t.clone())
                .ok_or_else(|| format!("BASALT_BENCH_PUT_ONLY: {suite} has no figure {only}"))?
        };
        let rates = best_rates(conn, &[table], n, make).await?;
        for r in rates {
            println!(
                "{suite}: {only} alone: {n} puts x {ROUNDS} rounds, best {:.0}/s ({:.2} us CPU)",
                r.puts_per_s, r.cpu_us
            );
        }
        return Ok(Vec::new());
    }
    let mut tables = vec![baseline];
    tables.extend(measured.iter().map(|(_, t)| t.clone()));
    let rates = best_rates(conn, &tables, n, make).await?;
    let none = rates.first().copied().ok_or("no baseline rate")?;
    let figures: Vec<Figure> = measured
        .iter()
        .zip(rates.iter().skip(1))
        .map(|((name, _), rate)| Figure {
            name,
            baseline: "none",
            basalt: rate.puts_per_s,
            base: none.puts_per_s,
            unit: "ops/s",
        })
        .collect();
    let each: Vec<String> = figures
        .iter()
        .zip(rates.iter().skip(1))
        .map(|(f, r)| format!("{} {:.0}/s ({:.2} us CPU)", f.name, f.basalt, r.cpu_us))
        .collect();
    println!(
        "{suite}: {n} puts x {ROUNDS} rounds, best round, CPU per put of the process: \
         none {:.0}/s ({:.2} us CPU), {}",
        none.puts_per_s,
        none.cpu_us,
        each.join(", ")
    );
    Ok(figures)
}
