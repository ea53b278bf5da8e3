//! Followers (seed 004's final design) with a secondary index and counters kept by
//! observers.
//!
//! Table `follows`: one row per edge, row key md5(follower) + md5(followed) (16 + 16 bytes),
//! family `f`, qualifier the followed user's name (the seed's design: "whom does A follow"
//! needs no user table), plus `f:to` (the followed user's id, the indexed column) and
//! `f:from` (the follower's name, covered by the index). An unfollow deletes the row.
//!
//! - "whom does A follow": a prefix scan on md5(A).
//! - "does A follow B": a get of md5(A) + md5(B).
//! - "who follows A": a query on the index `by_followed` (on `f:to`, covering `f:from`),
//!   answered from the index alone; the index is kept by the index maintainer in the same
//!   atomic batch as the edge.
//! - follower and following counts: an observer on `follows` adds counter increments to
//!   `user_stats` in the same batch, from the edge's state before and after the batch
//!   (`ObserverContext::get_after`), so they stay exact under concurrent follows and
//!   unfollows.
//!
//! The edges are loaded first, the index is then built online (an indicatif progress bar
//! shows rows done / total), then many tasks follow and unfollow concurrently while the
//! index is live; at the end the counters and the index are checked against the edges, and
//! each read is timed. Run with `cargo run --release --example followers -- --edges N`
//! (default 20,000 edges); a wrong count or index exits non-zero.

use async_trait::async_trait;
use basalt::client::{BatchOp, Delete, Get, Increment, Put, RowResult, Scan};
use basalt::coprocessors::{MiniBatch, ObserverContext, RegionObserver, Registry};
use basalt::index::val;
use basalt::index::{IndexAdmin, IndexDef, Query};
use basalt::keys::hash::md5;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Durability, Error, Result,
    TableDescriptor, TableName,
};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEFAULT_EDGES: u64 = 20_000;
const TASKS: u64 = 8;
const CHURN_PER_TASK: u64 = 500;
const READS: u64 = 500;

fn user(i: u64) -> String {
    format!("user{i:07}")
}

fn edge_key(follower: &str, followed: &str) -> Vec<u8> {
    let mut k = md5(follower.as_bytes()).to_vec();
    k.extend_from_slice(&md5(followed.as_bytes()));
    k
}

fn follow(follower: &str, followed: &str) -> Put {
    Put::new(edge_key(follower, followed))
        .add_column("f", followed, "1")
        .add_column("f", "to", followed)
        .add_column("f", "from", follower)
}

/// Keeps `user_stats/<user>` `f:followers` and `f:following` in step with `follows`.
struct Counter {
    stats: TableName,
}

fn edge_of(r: &RowResult) -> Option<(Bytes, Bytes)> {
    Some((r.value("f", "from")?.clone(), r.value("f", "to")?.clone()))
}

#[async_trait]
impl RegionObserver for Counter {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        let mut rows: Vec<Bytes> = batch.operations().map(|m| m.row().clone()).collect();
        rows.sort();
        rows.dedup();
        for row in rows {
            let get = Get::new(&row).add_column("f", "from").add_column("f", "to");
            let before = edge_of(&ctx.get(&get)?);
            let after = edge_of(&ctx.get_after(batch, &get)?);
            if before == after {
                continue;
            }
            for (edge, delta) in [(before, -1), (after, 1)] {
                if let Some((from, to)) = edge {
                    batch.add_increment_to(
                        self.stats.clone(),
                        Increment::new(from).add_column("f", "following", delta),
                    );
                    batch.add_increment_to(
                        self.stats.clone(),
                        Increment::new(to).add_column("f", "followers", delta),
                    );
                }
            }
        }
        Ok(())
    }
}

fn counter(r: &RowResult, q: &str) -> i64 {
    r.value("f", q)
        .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
        .map_or(0, i64::from_be_bytes)
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Follows are skewed: a tenth of the users get half of the follows.
fn pick_followed(rng: &mut Rng, users: u64) -> u64 {
    if rng.next(2) == 0 {
        rng.next((users / 10).max(1))
    } else {
        rng.next(users)
    }
}

fn parse_edges() -> std::result::Result<u64, String> {
    let mut args = std::env::args().skip(1);
    let mut edges = DEFAULT_EDGES;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--edges" => {
                let v = args.next().ok_or("--edges needs a value")?;
                edges = v
                    .replace('_', "")
                    .parse()
                    .map_err(|_| format!("--edges: not a number: {v}"))?;
            }
            other => return Err(format!("unknown argument {other} (usage: --edges N)")),
        }
    }
    Ok(edges.max(100))
}

fn per_read(d: Duration, n: u64) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6 / n.max(1) as f64)
}

async fn run(dir: &std::path::Path, edges: u64) -> Result<Vec<String>> {
    let registry = Arc::new(Registry::new());
    let runtime = basalt::index::register(&registry)?;
    registry.register("follower-counter", |args| {
        let stats = args
            .get("stats_table")
            .ok_or_else(|| Error::bad_argument("argument stats_table missing"))?;
        Ok(Arc::new(Counter {
            stats: TableName::parse(stats)?,
        }) as Arc<dyn RegionObserver>)
    })?;
    let conn = Connection::open_with(Config::new(dir).coprocessor_loader(registry)).await?;
    println!("{}", conn.recovery_report());
    let admin = conn.admin();
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("user_stats")?)
                .family(ColumnFamilyDescriptor::new("f")),
        )
        .await?;
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("follows")?)
                .family(ColumnFamilyDescriptor::new("f"))
                .coprocessor(
                    CoprocessorDescriptor::new("follower-counter").arg("stats_table", "user_stats"),
                ),
        )
        .await?;
    let follows = conn.table("follows")?;
    let stats = conn.table("user_stats")?;
    let users = (edges / 20).max(10);

    // Load.
    let started = Instant::now();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut done = 0;
    while done < edges {
        let n = (edges - done).min(1000);
        let ops = (0..n)
            .map(|_| {
                let a = rng.next(users);
                let mut b = pick_followed(&mut rng, users);
                if b == a {
                    b = (b + 1) % users;
                }
                BatchOp::Put(follow(&user(a), &user(b)).durability(Durability::SkipWal))
            })
            .collect();
        for r in follows.batch(ops).await? {
            r?;
        }
        done += n;
    }
    admin.flush(&TableName::parse("follows")?).await?;
    println!(
        "{edges} follow operations over {users} users loaded in {:.1} s (counters kept by the observer)",
        started.elapsed().as_secs_f64()
    );

    // Online index build, with a progress bar.
    let indexes = IndexAdmin::new(&conn, runtime);
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "building by_followed {bar:40} {pos}/{len} rows ({per_sec})",
        )
        .map_err(|e| Error::bad_argument(e.to_string()))?,
    );
    let started = Instant::now();
    indexes
        .create_with_progress(
            IndexDef::new("by_followed", "follows")
                .column("f", "to")
                .cover("f", "from"),
            |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            },
        )
        .await?;
    bar.finish();
    println!(
        "index built online in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Concurrent follows and unfollows, index and counters live.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let follows = follows.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng((t + 1).wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
            for _ in 0..CHURN_PER_TASK {
                let a = user(rng.next(10));
                let b = user(10 + rng.next(10));
                if rng.next(2) == 0 {
                    follows.put(follow(&a, &b)).await?;
                } else {
                    follows.delete(Delete::new(edge_key(&a, &b))).await?;
                }
            }
            Ok::<_, Error>(())
        }));
    }
    for t in tasks {
        t.await
            .map_err(|e| Error::bad_argument(format!("task failed: {e}")))??;
    }
    println!(
        "{TASKS} tasks x {CHURN_PER_TASK} follows/unfollows in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    // Checks: counters and index against the edges.
    let mut failed = Vec::new();
    let all: Vec<RowResult> = follows.scan(Scan::new())?.try_collect().await?;
    let mut recount: BTreeMap<Bytes, (i64, i64)> = BTreeMap::new();
    for e in &all {
        if let Some((from, to)) = edge_of(e) {
            recount.entry(from).or_default().1 += 1;
            recount.entry(to).or_default().0 += 1;
        }
    }
    for (u, want) in &recount {
        let r = stats.get(Get::new(u)).await?;
        let got = (counter(&r, "followers"), counter(&r, "following"));
        if got != *want {
            failed.push(format!("{u:?}: counters {got:?}, recount {want:?}"));
        }
    }
    let report = indexes.verify("follows", "by_followed").await?;
    if !report.is_consistent() {
        failed.push(format!("index differs from the edges: {report:?}"));
    }
    println!(
        "{} edges; counters of {} users and the index checked against them: {}",
        all.len(),
        recount.len(),
        if failed.is_empty() { "exact" } else { "WRONG" }
    );

    // Timed reads.
    let idx = indexes.index("follows", "by_followed").await?;
    let mut rng = Rng(42);
    let (mut t_whom, mut t_does, mut t_who, mut t_count) = Default::default();
    let (mut n_whom, mut n_who) = (0, 0);
    for _ in 0..READS {
        let a = user(pick_followed(&mut rng, users));
        let b = user(rng.next(users));
        let s = Instant::now();
        let whom: Vec<RowResult> = follows
            .scan(Scan::new().with_prefix(md5(a.as_bytes())))?
            .try_collect()
            .await?;
        t_whom += s.elapsed();
        n_whom += whom.len();
        let s = Instant::now();
        let _does = follows.exists(Get::new(edge_key(&a, &b))).await?;
        t_does += s.elapsed();
        let s = Instant::now();
        let who = idx.hits(&Query::eq(vec![val(&a)])).await?;
        t_who += s.elapsed();
        n_who += who.len();
        let s = Instant::now();
        let c = stats.get(Get::new(&a)).await?;
        t_count += s.elapsed();
        if counter(&c, "followers") != who.len() as i64 {
            failed.push(format!("{a}: followers counter and index disagree"));
        }
    }
    println!("reads ({READS} each, averaged):");
    println!(
        "  whom does A follow (prefix scan)      {}  ({:.1} rows)",
        per_read(t_whom, READS),
        n_whom as f64 / READS as f64
    );
    println!(
        "  does A follow B (get)                 {}",
        per_read(t_does, READS)
    );
    println!(
        "  who follows A (index, covered names)  {}  ({:.1} rows)",
        per_read(t_who, READS),
        n_who as f64 / READS as f64
    );
    println!(
        "  follower/following counts (get)       {}",
        per_read(t_count, READS)
    );
    conn.close().await?;
    Ok(failed)
}

#[tokio::main]
async fn main() -> ExitCode {
    let edges = match parse_edges() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("no temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(tmp.path(), edges).await {
        Ok(failed) if failed.is_empty() => ExitCode::SUCCESS,
        Ok(failed) => {
            for f in failed {
                eprintln!("check failed: {f}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
