//! A table snapshot taken while eight writers write holds exactly the commits at or below
//! its read point (issue 46), checked against a model of acknowledged writes, seed by seed
//! (`SNAPSHOT_SEEDS`, 200 by default, as in CI).
//!
//! Each writer `w` runs a fixed sequence: put `k` writes row `w{w}-{k % 5}` of the indexed
//! table `d` (`f:v = "{w}:{k}"`, so most puts replace an indexed value: an index delete and
//! an index put in the same batch), then increment `k` adds 1 to `c`'s counter `w{w}`. A
//! snapshot of `d` and `c` (and `d`'s index table) is taken at a seeded moment, while a
//! seeded maintenance task may flush or compact `d`; then the tables are restored from it.
//! The restored state must be, for every writer, the state after some prefix of its
//! sequence (the counter says how many increments, so the prefix is `2n` or `2n + 1`
//! operations), that prefix must hold every operation acknowledged before the snapshot was
//! asked for and nothing started after it returned, and the index must equal its data.

use basalt::client::{Increment, Put, RowResult, Scan};
use basalt::coprocessors::Registry;
use basalt::fs::FaultFs;
use basalt::index::{IndexAdmin, IndexDef};
use basalt::{ColumnFamilyDescriptor, Config, Connection, TableDescriptor, TableName};
use futures::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const WRITERS: u64 = 8;
const ROWS_PER_WRITER: u64 = 5;

fn seeds() -> u64 {
    std::env::var("SNAPSHOT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

/// Writer `w`'s rows after its first `puts` puts.
fn model_rows(w: u64, puts: u64) -> BTreeMap<String, String> {
    (0..puts)
        .map(|k| (format!("w{w}-{}", k % ROWS_PER_WRITER), format!("{w}:{k}")))
        .collect()
}

async fn scan(conn: &Connection, table: &str) -> Vec<RowResult> {
    conn.table(table)
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

async fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultFs::new();
    let registry = Arc::new(Registry::new());
    let runtime = basalt::index::register(&registry).unwrap();
    let config = Config::new("/db")
        .filesystem(fs.as_dyn())
        .coprocessor_loader(registry)
        .memstore_flush_size(if rng.random_bool(0.5) { 4096 } else { 1 << 20 });
    let conn = Connection::open_with(config).await.unwrap();
    let admin = conn.admin();
    for t in ["d", "c"] {
        admin
            .create_table(
                TableDescriptor::new(TableName::parse(t).unwrap())
                    .family(ColumnFamilyDescriptor::new("f")),
            )
            .await
            .unwrap();
    }
    let indexes = IndexAdmin::new(&conn, runtime);
    indexes
        .create(IndexDef::new("by_v", "d").column("f", "v"))
        .await
        .unwrap();

    // progress[w]: operations of writer w acknowledged; started[w]: operations begun.
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (d, c) = (conn.table("d").unwrap(), conn.table("c").unwrap());
        let (progress, started, stop) = (progress.clone(), started.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut op = 0u64;
            while !stop.load(Ordering::Acquire) {
                started[w as usize].store(op + 1, Ordering::Release);
                let k = op / 2;
                if op.is_multiple_of(2) {
                    let row = format!("w{w}-{}", k % ROWS_PER_WRITER);
                    d.put(Put::new(row).add_column("f", "v", format!("{w}:{k}")))
                        .await
                        .unwrap();
                } else {
                    c.increment(Increment::new(format!("w{w}")).add_column("f", "n", 1))
                        .await
                        .unwrap();
                }
                op += 1;
                progress[w as usize].store(op, Ordering::Release);
            }
        }));
    }
    // Maintenance racing the snapshot.
    let maintenance = match rng.random_range(0..3) {
        0 => None,
        kind => {
            let admin = conn.admin();
            Some(tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                match kind {
                    1 => admin.flush("d").await,
                    _ => admin.compact("d").await,
                }
            }))
        }
    };
    tokio::time::sleep(std::time::Duration::from_micros(
        rng.random_range(200..3000),
    ))
    .await;
    let acked_before: Vec<u64> = progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
    let snap = admin.snapshot_tables("s", ["d", "c"], true).await.unwrap();
    let started_by_end: Vec<u64> = started.iter().map(|p| p.load(Ordering::Acquire)).collect();
    stop.store(true, Ordering::Release);
    for w in writers {
        w.await.unwrap();
    }
    if let Some(m) = maintenance {
        m.await.unwrap().unwrap();
    }
    assert_eq!(
        snap.tables,
        vec!["default:c", "default:d", "default:d.idx.by_v"],
        "seed {seed}"
    );

    for t in ["d", "d.idx.by_v", "c"] {
        admin.disable_table(t).await.unwrap();
    }
    admin.restore_snapshot("s").await.unwrap();
    for t in ["d", "d.idx.by_v", "c"] {
        admin.enable_table(t).await.unwrap();
    }
    let data = scan(&conn, "d").await;
    let counters = scan(&conn, "c").await;
    for w in 0..WRITERS {
        let n = counters
            .iter()
            .find(|r| r.row.as_ref() == format!("w{w}").as_bytes())
            .and_then(|r| r.value("f", "n"))
            .map(|v| i64::from_be_bytes(v.as_ref().try_into().unwrap()) as u64)
            .unwrap_or(0);
        let rows: BTreeMap<String, String> = data
            .iter()
            .filter(|r| r.row.starts_with(format!("w{w}-").as_bytes()))
            .map(|r| {
                (
                    String::from_utf8_lossy(&r.row).into_owned(),
                    String::from_utf8_lossy(r.value("f", "v").unwrap()).into_owned(),
                )
            })
            .collect();
        // n increments: 2n operations (n puts) or 2n + 1 (n + 1 puts).
        let prefix = if rows == model_rows(w, n) {
            2 * n
        } else if rows == model_rows(w, n + 1) {
            2 * n + 1
        } else {
            panic!("seed {seed}: writer {w}'s rows {rows:?} follow no prefix with {n} increments")
        };
        assert!(
            acked_before[w as usize] <= prefix && prefix <= started_by_end[w as usize],
            "seed {seed}: writer {w}: the snapshot holds {prefix} operations; {} were \
             acknowledged before it was asked for, {} begun when it returned",
            acked_before[w as usize],
            started_by_end[w as usize]
        );
    }
    let report = indexes.verify("d", "by_v").await.unwrap();
    assert!(report.is_consistent(), "seed {seed}: {report:?}");
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_under_eight_writers_holds_exactly_the_commits_at_its_read_point() {
    for seed in 0..seeds() {
        run_seed(seed).await;
    }
}
