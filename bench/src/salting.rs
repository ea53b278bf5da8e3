//! The `salting` suite: what salting buys and what it costs, Basalt salted against Basalt
//! unsalted (the baseline, printed as `unsalted=`).
//!
//! 1. N time-ordered keys (8-byte big-endian, increasing) are written one put at a time by
//!    8 concurrent writers into an unsalted table pre-split into 16 uniform regions and into
//!    a salted table with 16 buckets (automatic splits off, so the pre-split is what is
//!    measured). Each region's share of writes: salted largest/smallest must be <= 1.2, and
//!    the unsalted table puts nearly all writes on one region.
//! 2. An ordered salted scan of all rows against an unsalted scan of the same rows (both
//!    flushed; best of 5 interleaved rounds): must run at least 0.8x as fast. The unordered
//!    salted scan is shown too.
//! 3. Seed 000's layout, N/10 messages in 1,000 conversations in a salted table of 128
//!    buckets hashing the conversation id: "latest 20 messages of one conversation" must read
//!    at most 20 rows from one region; a global top 20 by logical key must read at most
//!    128 x 20 rows. Latencies are compared with the same reads on an unsalted copy.
//!
//! A failed check is printed as `CHECK ... FAILED` and makes the suite fail.

use crate::measure::Settings;
use crate::BenchResult;
use basalt_core::client::{Put, RowResult, Scan, Table};
use basalt_core::keys::{Field, KeySchema, Kind, Value};
use basalt_core::{
    ColumnFamilyDescriptor, Config, Connection, PreSplit, SaltSpec, SplitAlgorithm, SplitPolicy,
    TableDescriptor, TableName,
};
use futures::{Stream, StreamExt};
use std::time::{Duration, Instant};

/// Rows of the write and scan phases by default.
pub const DEFAULT_ROWS: u64 = 1_000_000;
const WRITERS: u64 = 8;
const CONVERSATIONS: u64 = 1_000;

struct Line {
    name: &'static str,
    salted: f64,
    unsalted: f64,
    unit: &'static str,
    lower_is_better: bool,
}

fn desc(name: &str) -> BenchResult<TableDescriptor> {
    Ok(TableDescriptor::new(TableName::parse(name)?)
        .family(ColumnFamilyDescriptor::new("f").block_size(16 * 1024)))
}

fn time_key(i: u64) -> [u8; 8] {
    (1_700_000_000_000_000u64 + i).to_be_bytes()
}

/// Writes `n` rows with 8 concurrent writers, one put each; returns the elapsed time.
async fn write<F, Fut>(n: u64, put: F) -> BenchResult<Duration>
where
    F: Fn(Put) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = basalt_core::Result<()>> + Send,
{
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let put = put.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < n {
                put(Put::new(time_key(i)).add_column("f", "v", [7u8; 16])).await?;
                i += WRITERS;
            }
            Ok::<(), basalt_core::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(start.elapsed())
}

async fn drain(
    mut s: impl Stream<Item = basalt_core::Result<RowResult>> + Unpin,
) -> BenchResult<u64> {
    let mut n = 0;
    while let Some(r) = s.next().await {
        r?;
        n += 1;
    }
    Ok(n)
}

/// Rounds of the full-scan comparison; each round scans the unsalted table, then the salted
/// one ordered, then unordered, so background work after the flush falls on all three alike.
const SCAN_ROUNDS: usize = 5;

/// Times one drained scan: the elapsed time and the rows it returned.
async fn timed<Fut>(f: Fut) -> BenchResult<(Duration, u64)>
where
    Fut: std::future::Future<Output = BenchResult<u64>>,
{
    let start = Instant::now();
    let n = f.await?;
    Ok((start.elapsed(), n))
}

fn max_min(writes: &[u64]) -> f64 {
    let max = writes.iter().copied().max().unwrap_or(0) as f64;
    let min = writes.iter().copied().min().unwrap_or(0) as f64;
    if min == 0.0 {
        f64::INFINITY
    } else {
        max / min
    }
}

async fn writes_per_region(t: &Table) -> BenchResult<Vec<u64>> {
    Ok(t.regions()
        .await?
        .iter()
        .map(|r| r.write_requests)
        .collect())
}

async fn run_async(
    s: &Settings,
    lines: &mut Vec<Line>,
    checks: &mut Vec<(String, bool)>,
) -> BenchResult<()> {
    let dir = tempfile::Builder::new()
        .prefix("basalt-salting")
        .tempdir_in(&s.dir)?;
    let config = Config::new(dir.path())
        .block_cache_size(s.cache_bytes)
        .split_policy(SplitPolicy::Disabled);
    let conn = Connection::open_with(config).await?;
    let admin = conn.admin();
    let n = s.rows;
    admin
        .create_table_with_splits(
            desc("plain")?,
            PreSplit::Algorithm(SplitAlgorithm::Uniform, 16),
        )
        .await?;
    admin
        .create_table(desc("salted")?.salt(SaltSpec::new(16)))
        .await?;
    let plain = conn.table("plain")?;
    let salted = conn.salted_table("salted")?;

    // 1. Writes and their spread.
    let p = plain.clone();
    let plain_time = write(n, move |put| {
        let p = p.clone();
        async move { p.put(put).await }
    })
    .await?;
    let st = salted.clone();
    let salted_time = write(n, move |put| {
        let st = st.clone();
        async move { st.put(put).await }
    })
    .await?;
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    lines.push(Line {
        name: "salting/write",
        salted: rate(salted_time),
        unsalted: rate(plain_time),
        unit: "rows/s",
        lower_is_better: false,
    });
    let pw = writes_per_region(&plain).await?;
    let sw = writes_per_region(salted.physical()).await?;
    let share = |w: &[u64]| {
        let total: u64 = w.iter().sum();
        w.iter().copied().max().unwrap_or(0) as f64 / total.max(1) as f64
    };
    println!("write shares per region (salted | unsalted), rows written one put each:");
    for (i, (a, b)) in sw.iter().zip(&pw).enumerate() {
        println!(
            "  region {i:>2}: {:>6.2}% | {:>6.2}%",
            *a as f64 * 100.0 / n as f64,
            *b as f64 * 100.0 / n as f64
        );
    }
    lines.push(Line {
        name: "salting/largest_write_share",
        salted: share(&sw),
        unsalted: share(&pw),
        unit: "fraction",
        lower_is_better: true,
    });
    checks.push((
        format!(
            "salted largest/smallest region writes {:.3} <= 1.2",
            max_min(&sw)
        ),
        max_min(&sw) <= 1.2,
    ));
    checks.push((
        format!(
            "unsalted: one region takes {:.1}% of writes (>= 90%)",
            share(&pw) * 100.0
        ),
        share(&pw) >= 0.9,
    ));

    // 2. Full scans.
    admin.flush(&TableName::parse("plain")?).await?;
    admin.flush(&TableName::parse("salted")?).await?;
    // Best of SCAN_ROUNDS interleaved rounds for each of the three scans.
    let (mut pt, mut pn) = (Duration::MAX, 0);
    let (mut st, mut sn) = (Duration::MAX, 0);
    let (mut ut, mut un) = (Duration::MAX, 0);
    for _ in 0..SCAN_ROUNDS {
        (pt, pn) = (pt, pn).min(timed(async { drain(plain.scan(Scan::new())?).await }).await?);
        (st, sn) = (st, sn).min(timed(async { drain(salted.scan(Scan::new())?).await }).await?);
        (ut, un) =
            (ut, un).min(timed(async { drain(salted.scan_unordered(Scan::new())?).await }).await?);
    }
    checks.push((
        format!("full scans return every row ({pn}, {sn}, {un} of {n})"),
        pn == n && sn == n && un == n,
    ));
    let scan_rate = |d: Duration| n as f64 / d.as_secs_f64();
    lines.push(Line {
        name: "salting/ordered_full_scan",
        salted: scan_rate(st),
        unsalted: scan_rate(pt),
        unit: "rows/s",
        lower_is_better: false,
    });
    lines.push(Line {
        name: "salting/unordered_full_scan",
        salted: scan_rate(ut),
        unsalted: scan_rate(pt),
        unit: "rows/s",
        lower_is_better: false,
    });
    let ratio = scan_rate(st) / scan_rate(pt);
    checks.push((
        format!("ordered salted full scan at {ratio:.2}x the unsalted scan (>= 0.8x)"),
        ratio >= 0.8,
    ));

    // 3. Seed 000's conversations.
    let schema = KeySchema::new(vec![Field::new(Kind::U64), Field::new(Kind::U64).desc()]);
    admin
        .create_table(desc("conv")?.salt(SaltSpec::new(128).hash_component(schema.clone(), 0)))
        .await?;
    admin
        .create_table_with_splits(
            desc("conv_plain")?,
            PreSplit::Algorithm(SplitAlgorithm::Uniform, 16),
        )
        .await?;
    let conv = conn.salted_table("conv")?;
    let conv_plain = conn.table("conv_plain")?;
    let messages = (n / 10).max(CONVERSATIONS * 20);
    let mut batch_s = Vec::new();
    let mut batch_p = Vec::new();
    for i in 0..messages {
        let k = schema.encode(&[Value::U64(i % CONVERSATIONS), Value::U64(i)])?;
        batch_s.push(basalt_core::client::BatchOp::Put(
            Put::new(&k).add_column("f", "v", [1u8; 16]),
        ));
        batch_p.push(basalt_core::client::BatchOp::Put(
            Put::new(&k).add_column("f", "v", [1u8; 16]),
        ));
        if batch_s.len() == 1000 || i + 1 == messages {
            for r in conv.batch(std::mem::take(&mut batch_s)).await? {
                r?;
            }
            for r in conv_plain.batch(std::mem::take(&mut batch_p)).await? {
                r?;
            }
        }
    }
    let queries = 200u64;
    let mut max_rows_read = 0;
    let mut max_regions = 0;
    let (mut st, mut pt) = (Duration::ZERO, Duration::ZERO);
    for q in 0..queries {
        let c = (q * 7) % CONVERSATIONS;
        let prefix = schema.encode_prefix(&[Value::U64(c)])?;
        let before = conv.regions().await?;
        let start = Instant::now();
        let s = conv.scan(Scan::new().with_prefix(&prefix).limit(20))?;
        let stats = s.stats();
        let got = drain(s).await?;
        st += start.elapsed();
        let after = conv.regions().await?;
        let touched = before
            .iter()
            .zip(&after)
            .filter(|(a, b)| a.read_requests != b.read_requests)
            .count();
        max_regions = max_regions.max(touched);
        max_rows_read = max_rows_read.max(stats.rows_read());
        let start = Instant::now();
        let want = drain(conv_plain.scan(Scan::new().with_prefix(&prefix).limit(20))?).await?;
        pt += start.elapsed();
        if got != 20 || want != 20 {
            return Err(format!(
                "latest 20 of conversation {c}: {got} salted, {want} unsalted rows"
            )
            .into());
        }
    }
    lines.push(Line {
        name: "salting/latest20_rows_read",
        salted: max_rows_read as f64,
        unsalted: 20.0,
        unit: "rows",
        lower_is_better: true,
    });
    lines.push(Line {
        name: "salting/latest20_latency",
        salted: st.as_secs_f64() * 1e6 / queries as f64,
        unsalted: pt.as_secs_f64() * 1e6 / queries as f64,
        unit: "us",
        lower_is_better: true,
    });
    checks.push((
        format!("latest 20 of a conversation read at most {max_rows_read} rows from {max_regions} region(s) (<= 20 rows, 1 region)"),
        max_rows_read <= 20 && max_regions == 1,
    ));
    let (mut st, mut pt) = (Duration::ZERO, Duration::ZERO);
    let mut top_read = 0;
    for _ in 0..20 {
        let start = Instant::now();
        let s = conv.scan(Scan::new().limit(20))?;
        let stats = s.stats();
        let got = drain(s).await?;
        st += start.elapsed();
        top_read = top_read.max(stats.rows_read());
        let start = Instant::now();
        let want = drain(conv_plain.scan(Scan::new().limit(20))?).await?;
        pt += start.elapsed();
        if got != 20 || want != 20 {
            return Err("global top 20 returned the wrong row count".into());
        }
    }
    lines.push(Line {
        name: "salting/top20_rows_read",
        salted: top_read as f64,
        unsalted: 20.0,
        unit: "rows",
        lower_is_better: true,
    });
    lines.push(Line {
        name: "salting/top20_latency",
        salted: st.as_secs_f64() * 1e6 / 20.0,
        unsalted: pt.as_secs_f64() * 1e6 / 20.0,
        unit: "us",
        lower_is_better: true,
    });
    checks.push((
        format!("global top 20 over 128 buckets read {top_read} rows (<= 2560)"),
        top_read <= 128 * 20,
    ));
    conn.close().await?;
    Ok(())
}

fn num(v: f64) -> String {
    if v.is_infinite() {
        "inf".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Runs the suite, prints its table, checks and `RESULT` lines; fails if a check fails.
pub fn run(s: &Settings) -> BenchResult<()> {
    println!(
        "salting suite: {} time-ordered rows, 8 writers, one put per row; 16 pre-split regions \
         unsalted vs 16 buckets salted (automatic splits off); conversations: 128 buckets",
        s.rows
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut lines = Vec::new();
    let mut checks = Vec::new();
    rt.block_on(run_async(s, &mut lines, &mut checks))?;
    println!();
    println!(
        "{:<30} {:>14} {:>14} {:>9}",
        "figure", "salted", "unsalted", "ratio"
    );
    for l in &lines {
        println!(
            "{:<30} {:>14} {:>14} {:>9.3}   {}",
            l.name,
            num(l.salted),
            num(l.unsalted),
            l.salted / l.unsalted,
            l.unit
        );
    }
    println!();
    let mut failed = 0;
    for (what, ok) in &checks {
        println!("CHECK {what}: {}", if *ok { "ok" } else { "FAILED" });
        failed += usize::from(!ok);
    }
    println!();
    for l in &lines {
        println!(
            "RESULT {} basalt={} unsalted={} ratio={:.3} unit={}{}",
            l.name,
            num(l.salted),
            num(l.unsalted),
            l.salted / l.unsalted,
            l.unit,
            if l.lower_is_better {
                " better=lower"
            } else {
                ""
            }
        );
    }
    if failed > 0 {
        return Err(format!("{failed} salting check(s) failed").into());
    }
    Ok(())
}
