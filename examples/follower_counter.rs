//! Follower counter (seed 004, "who follows A"): table `follows` holds one row per edge,
//! keyed `<follower>|<followed>`; an observer on it keeps every user's `followers` and
//! `following` counts in another table, `user_stats`, in the same atomic batch as the edge.
//!
//! The observer runs in `pre_batch_mutate`, under the edge rows' locks: it reads each edge's
//! state before the write, and for every edge whose state changes adds counter increments to
//! `user_stats` with `MiniBatch::add_increment_to`. The engine locks those counter rows,
//! resolves the increments under the locks and commits edge and counters as one WAL record
//! with one sequence id: a reader never sees one without the other, and neither does a
//! reopened engine after a crash. The added increments run no observer of `user_stats`.
//!
//! An edge is `f:on` = `1` (following) or `0` (not following): an unfollow writes `0` rather
//! than deleting the row, because a delete marker hides every later put with a timestamp at
//! or below its own (HBase's rule), so a follow in the same millisecond as an unfollow would
//! be hidden while the counter counted it. (The observer still counts a deleted edge as not
//! followed.)
//!
//! Many tasks follow and unfollow concurrently; at the end the counters are printed and
//! checked against a recount over `follows`. Run with
//! `cargo run --release --example follower_counter`; a wrong count exits non-zero.

use async_trait::async_trait;
use basalt::client::{BatchOp, Get, Increment, Mutation, Put, RowResult, Scan};
use basalt::coprocessors::{MiniBatch, ObserverContext, RegionObserver, Registry};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, Error, Result,
    TableDescriptor, TableName,
};
use bytes::Bytes;
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

const USERS: [&str; 6] = ["ada", "bob", "cid", "dee", "eve", "fay"];
const TASKS: u64 = 8;
const OPS_PER_TASK: usize = 200;

/// Keeps `<stats table>/<user>` `f:followers` and `f:following` in step with `follows`.
pub struct FollowerCounter {
    pub stats: TableName,
}

fn is_on(v: Option<&Bytes>) -> bool {
    v.is_some_and(|v| v.as_ref() == b"1")
}

#[async_trait]
impl RegionObserver for FollowerCounter {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        // An edge's state as the batch changes it, operation after operation.
        let mut state: BTreeMap<Bytes, bool> = BTreeMap::new();
        let mut changes = Vec::new();
        for m in batch.operations() {
            let row = m.row().clone();
            let before = match state.get(&row) {
                Some(s) => *s,
                None => is_on(
                    ctx.get(&Get::new(&row).add_column("f", "on"))?
                        .value("f", "on"),
                ),
            };
            let after = match m {
                Mutation::Put(p) => p
                    .cells()
                    .find(|(f, q, _, _)| *f == b"f" && *q == b"on")
                    .map_or(before, |(_, _, _, v)| v == b"1"),
                Mutation::Delete(_) => false,
            };
            state.insert(row.clone(), after);
            if before != after {
                changes.push((row, if after { 1 } else { -1 }));
            }
        }
        for (row, delta) in changes {
            let edge = String::from_utf8_lossy(&row).into_owned();
            let Some((follower, followed)) = edge.split_once('|') else {
                return Err(Error::bad_argument(format!(
                    "edge {edge:?} is not follower|followed"
                )));
            };
            batch.add_increment_to(
                self.stats.clone(),
                Increment::new(follower).add_column("f", "following", delta),
            );
            batch.add_increment_to(
                self.stats.clone(),
                Increment::new(followed).add_column("f", "followers", delta),
            );
        }
        Ok(())
    }
}

fn counter(r: &RowResult, q: &str) -> i64 {
    r.value("f", q)
        .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
        .map_or(0, i64::from_be_bytes)
}

/// A small deterministic generator (xorshift), one per task.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
    fn edge(&mut self) -> String {
        format!(
            "{}|{}",
            USERS[self.next(USERS.len())],
            USERS[self.next(USERS.len())]
        )
    }
}

/// One task's follows and unfollows (some two edges in one batch).
async fn churn(follows: basalt::Table, seed: u64) -> Result<usize> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut writes = 0;
    for _ in 0..OPS_PER_TASK {
        let on = if rng.next(2) == 0 { "1" } else { "0" };
        let (e1, e2) = (rng.edge(), rng.edge());
        if e1 != e2 && rng.next(5) == 0 {
            for r in follows
                .batch(vec![
                    BatchOp::Put(Put::new(&e1).add_column("f", "on", on)),
                    BatchOp::Put(Put::new(&e2).add_column("f", "on", "1")),
                ])
                .await?
            {
                r?;
            }
            writes += 2;
        } else {
            follows.put(Put::new(&e1).add_column("f", "on", on)).await?;
            writes += 1;
        }
    }
    Ok(writes)
}

/// Runs the demo; returns the checks that failed.
async fn run(dir: &std::path::Path) -> Result<Vec<String>> {
    let registry = Arc::new(Registry::new());
    registry.register("follower-counter", |args| {
        let stats = args
            .get("stats_table")
            .ok_or_else(|| Error::bad_argument("argument stats_table missing"))?;
        Ok(Arc::new(FollowerCounter {
            stats: TableName::parse(stats)?,
        }) as Arc<dyn RegionObserver>)
    })?;
    let conn = Connection::open_with(Config::new(dir).coprocessor_loader(registry.clone())).await?;
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
    println!("tables follows (observer follower-counter) and user_stats created");

    let follows = conn.table("follows")?;
    follows
        .put(Put::new("ada|bob").add_column("f", "on", "1"))
        .await?;
    let bob = conn.table("user_stats")?.get(Get::new("bob")).await?;
    println!(
        "ada follows bob: bob has {} follower(s)",
        counter(&bob, "followers")
    );
    follows
        .put(Put::new("ada|bob").add_column("f", "on", "0"))
        .await?;

    println!(
        "{TASKS} tasks x {OPS_PER_TASK} follow/unfollow operations over {} users",
        USERS.len()
    );
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for seed in 0..TASKS {
        tasks.push(tokio::spawn(churn(conn.table("follows")?, seed + 1)));
    }
    let mut writes = 0;
    for t in tasks {
        writes += t
            .await
            .map_err(|e| Error::bad_argument(format!("task failed: {e}")))??;
    }
    println!("{writes} edge writes in {:?}", started.elapsed());

    // Recount from the edges.
    let edges: Vec<RowResult> = follows.scan(Scan::new())?.try_collect().await?;
    let mut recount: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    let mut on = 0;
    for e in &edges {
        if is_on(e.value("f", "on")) {
            on += 1;
            let edge = String::from_utf8_lossy(&e.row).into_owned();
            if let Some((a, b)) = edge.split_once('|') {
                for u in USERS {
                    if u == a {
                        recount.entry(u).or_default().1 += 1;
                    }
                    if u == b {
                        recount.entry(u).or_default().0 += 1;
                    }
                }
            }
        }
    }
    println!("{} edges, {on} of them followed", edges.len());
    let mut failed = Vec::new();
    let stats = conn.table("user_stats")?;
    println!("user  followers  following  (recount)");
    for u in USERS {
        let r = stats.get(Get::new(u)).await?;
        let got = (counter(&r, "followers"), counter(&r, "following"));
        let want = recount.get(u).copied().unwrap_or_default();
        println!(
            "{u:5} {:9}  {:9}  ({}, {}){}",
            got.0,
            got.1,
            want.0,
            want.1,
            if got == want { "" } else { "  WRONG" }
        );
        if got != want {
            failed.push(format!("{u}: counters {got:?}, recount {want:?}"));
        }
    }
    conn.close().await?;
    Ok(failed)
}

#[tokio::main]
async fn main() -> ExitCode {
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("no temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(tmp.path()).await {
        Ok(failed) if failed.is_empty() => {
            println!("every counter equals the recount");
            ExitCode::SUCCESS
        }
        Ok(failed) => {
            eprintln!("wrong counters: {failed:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
