//! Endpoint calls over salted tables by logical key range: the per-bucket fan-out answers
//! exactly what a client-side computation over a salted scan of the same logical rows gives
//! (aggregations, and a custom endpoint's rows merged in logical key order), for whole-key
//! and prefix hashing, ranges and prefixes (a prefix fixing the hashed part calls one
//! bucket); still exactly while regions split and merge inside their buckets during the
//! calls; every call reads one snapshot across buckets (cross-bucket transfers are never
//! seen half-applied); fail-fast and partial results.

use basalt::client::{BatchOp, Put, Scan};
use basalt::coprocessors::merge_logical;
use basalt::coprocessors::{fold, fold_partial};
use basalt::coprocessors::{
    CallOptions, Column, Endpoint, EndpointRegistry, Endpoints, ErrorMode, Interpreter, KeyRange,
    Number, SaltedAggregationClient, SaltedEndpoints,
};
use basalt::endpoint::RegionView;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, SaltSpec, SaltedTable, SplitPolicy,
    TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Each region's rows of the call's range as (logical key, value of f:v), in key order;
/// the request is the salt's width. Sleeps first, to give splits time to happen.
struct LogicalRows {
    pause: Duration,
}

impl Endpoint for LogicalRows {
    type Request = usize;
    type Response = Vec<(Vec<u8>, Option<i64>)>;
    fn call(&self, region: &RegionView<'_>, width: &usize) -> basalt::Result<Self::Response> {
        std::thread::sleep(self.pause);
        let mut out = Vec::new();
        for row in region.scan(&Scan::new())? {
            let row = row?;
            let logical = row
                .row
                .get(*width..)
                .ok_or_else(|| Error::bad_argument("row shorter than the salt"))?;
            out.push((logical.to_vec(), value_of(&row)));
        }
        Ok(out)
    }
}

/// Counts rows, failing in the bucket of logical row `bad`.
struct FailsInBucket {
    bad_bucket_start: Vec<u8>,
}

impl Endpoint for FailsInBucket {
    type Request = ();
    type Response = u64;
    fn call(&self, region: &RegionView<'_>, _: &()) -> basalt::Result<u64> {
        if region.region_start().as_ref() == self.bad_bucket_start.as_slice() {
            return Err(Error::bad_argument("refused"));
        }
        region.scan(&Scan::new())?.count_rows()
    }
}

fn value_of(row: &basalt::client::RowResult) -> Option<i64> {
    let v: [u8; 8] = row.value("f", "v")?.as_ref().try_into().ok()?;
    Some(i64::from_be_bytes(v))
}

fn desc(name: &str, spec: SaltSpec) -> TableDescriptor {
    TableDescriptor::new(TableName::parse(name).unwrap())
        .family(ColumnFamilyDescriptor::new("f").block_size(1024))
        .salt(spec)
}

fn key(user: u32, seq: u32) -> String {
    format!("u{user:02}/{seq:04}")
}

/// Writes `users` x `per_user` rows; every 7th row has no f:v (only f:w).
async fn fill(t: &SaltedTable, users: u32, per_user: u32) {
    let mut ops = Vec::new();
    for u in 0..users {
        for s in 0..per_user {
            let i = i64::from(u * per_user + s);
            let p = if i % 7 == 3 {
                Put::new(key(u, s)).add_column("f", "w", "x")
            } else {
                Put::new(key(u, s)).add_column("f", "v", ((i * 37) % 1001 - 400).to_be_bytes())
            };
            ops.push(BatchOp::Put(p));
        }
    }
    for r in t.batch(ops).await.unwrap() {
        r.unwrap();
    }
}

/// The salted scan of the same logical rows as `range`.
fn scan_of(range: &KeyRange) -> Scan {
    let (start, stop) = (range.start.clone(), range.stop.clone());
    if let (Some(a), Some(b)) = (&start, &stop) {
        if basalt::keys::prefix_successor(a).as_ref() == Some(b) {
            return Scan::new().with_prefix(a);
        }
    }
    let mut s = Scan::new();
    if let Some(a) = start {
        s = s.start_row(a);
    }
    if let Some(b) = stop {
        s = s.stop_row(b);
    }
    s
}

/// The logical rows of `range` as a client reads them with a salted scan.
async fn client_rows(t: &SaltedTable, range: &KeyRange) -> Vec<(Vec<u8>, Option<i64>)> {
    let rows: Vec<_> = t.scan(scan_of(range)).unwrap().try_collect().await.unwrap();
    rows.iter().map(|r| (r.row.to_vec(), value_of(r))).collect()
}

fn registry(table: &TableName) -> Arc<EndpointRegistry> {
    let r = Arc::new(EndpointRegistry::with_builtins());
    r.register(
        table,
        "logical_rows",
        LogicalRows {
            pause: Duration::ZERO,
        },
    )
    .unwrap();
    r
}

/// Checks every aggregate and the merged rows of `range` against the salted scan.
async fn check_range(se: &SaltedEndpoints, t: &SaltedTable, range: KeyRange) {
    let want = client_rows(t, &range).await;
    let agg = SaltedAggregationClient::new(se.clone());
    let col = Column::new("f", "v", Interpreter::I64);
    let values: Vec<i64> = want.iter().filter_map(|(_, v)| *v).collect();
    let ctx = format!("{range:?}");
    assert_eq!(
        agg.fast_row_count(range.clone()).await.unwrap(),
        want.len() as u64,
        "{ctx}"
    );
    assert_eq!(
        agg.row_count(range.clone(), &col).await.unwrap(),
        values.len() as u64,
        "{ctx}"
    );
    let sum = agg.sum(range.clone(), &col).await.unwrap();
    let min = agg.min(range.clone(), &col).await.unwrap();
    let max = agg.max(range.clone(), &col).await.unwrap();
    let median = agg.median(range.clone(), &col).await.unwrap();
    let avg = agg.avg(range.clone(), &col).await.unwrap();
    let std = agg.std(range.clone(), &col).await.unwrap();
    if values.is_empty() {
        assert_eq!((sum, min, max, median), (None, None, None, None), "{ctx}");
        assert_eq!((avg, std), (None, None), "{ctx}");
    } else {
        let mut sorted = values.clone();
        sorted.sort();
        let n = values.len() as f64;
        let total: i64 = values.iter().sum();
        let mean = total as f64 / n;
        let var = values
            .iter()
            .map(|v| (*v as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        assert_eq!(sum, Some(Number::I64(total)), "{ctx}");
        assert_eq!(min, Some(Number::I64(sorted[0])), "{ctx}");
        assert_eq!(max, Some(Number::I64(*sorted.last().unwrap())), "{ctx}");
        assert_eq!(
            median,
            Some(Number::I64(sorted[(sorted.len() - 1) / 2])),
            "{ctx}"
        );
        assert!((avg.unwrap() - mean).abs() < 1e-9, "{ctx}");
        assert!((std.unwrap() - var.sqrt()).abs() < 1e-6, "{ctx}");
    }
    // A custom endpoint's per-region lists, merged in logical key order: the scan's rows.
    let snap = se.snapshot().unwrap();
    let s = snap
        .coprocessor_service::<LogicalRows>("logical_rows", range.clone(), &snap.width())
        .unwrap();
    let merged = merge_logical(s, |(k, _)| k.clone()).await.unwrap();
    assert_eq!(merged, want, "{ctx}");
}

/// Aggregations and a custom endpoint over logical ranges equal the client-side computation
/// over a salted scan, for whole-key and prefix hashing; a prefix fixing the hashed part
/// calls one bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salted_calls_equal_a_client_side_computation() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    for (name, spec) in [
        ("whole", SaltSpec::new(8)),
        ("by_user", SaltSpec::new(16).hash_prefix(3)),
    ] {
        conn.admin().create_table(desc(name, spec)).await.unwrap();
        let t = conn.salted_table(name).unwrap();
        fill(&t, 12, 40).await;
        if name == "whole" {
            // Half the rows in store files, half in MemStores.
            conn.admin().flush(t.name()).await.unwrap();
            fill(&t, 6, 20).await;
        }
        let eps = Endpoints::new(&conn, registry(t.name()));
        let se = SaltedEndpoints::new(&eps, &t);
        let ranges = [
            KeyRange::all(),
            KeyRange::new("u03/0010", "u07/0005"),
            KeyRange::from("u10"),
            KeyRange {
                start: None,
                stop: Some("u02/0007".into()),
            },
            KeyRange::prefix("u05/"),
            KeyRange::prefix("u1"),
            KeyRange::prefix("zz"),
        ];
        for range in ranges {
            check_range(&se, &t, range).await;
        }
        let snap = se.snapshot().unwrap();
        let one = snap.bucket_ranges(&KeyRange::prefix("u05/"));
        if name == "by_user" {
            assert_eq!(
                one.len(),
                1,
                "a prefix fixing the hashed part reads one bucket"
            );
            assert_eq!(one[0].bucket, t.bucket(b"u05/0000").unwrap());
        } else {
            assert_eq!(one.len(), 8);
        }
        // Ordered answers come bucket by bucket, each bucket in key order.
        let ordered = SaltedEndpoints::new(
            &eps.clone()
                .with_options(CallOptions::default().ordered(true)),
            &t,
        );
        let s = ordered
            .coprocessor_service::<LogicalRows>("logical_rows", KeyRange::all(), &snap.width())
            .unwrap();
        let answers: Vec<_> = futures::StreamExt::collect::<Vec<_>>(s).await;
        let starts: Vec<_> = answers
            .iter()
            .map(|a| a.span.region_start.clone())
            .collect();
        let mut sorted = starts.clone();
        sorted.sort();
        assert_eq!(starts, sorted);
    }
    conn.close().await.unwrap();
}

/// Calls stay exact while another task splits and merges regions inside their buckets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salted_calls_stay_exact_while_regions_split_and_merge() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open_with(Config::new(dir.path()).split_policy(SplitPolicy::Disabled))
        .await
        .unwrap();
    let spec = SaltSpec::new(4);
    conn.admin()
        .create_table(desc("sp", spec.clone()))
        .await
        .unwrap();
    let t = conn.salted_table("sp").unwrap();
    fill(&t, 20, 100).await;
    conn.admin().flush(t.name()).await.unwrap();
    let registry = Arc::new(EndpointRegistry::with_builtins());
    registry
        .register(
            t.name(),
            "logical_rows",
            LogicalRows {
                pause: Duration::from_millis(10),
            },
        )
        .unwrap();
    let eps = Endpoints::new(&conn, registry).with_options(CallOptions::default().concurrency(2));
    let se = SaltedEndpoints::new(&eps, &t);
    let whole = client_rows(&t, &KeyRange::all()).await;
    let part_range = KeyRange::new("u03/0050", "u15/0020");
    let part = client_rows(&t, &part_range).await;
    let part_sum: i64 = part.iter().filter_map(|(_, v)| *v).sum();
    let stop = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(AtomicUsize::new(0));
    let churn = {
        let (conn, stop, changes, spec) = (conn.clone(), stop.clone(), changes.clone(), spec);
        tokio::spawn(async move {
            let name = TableName::parse("sp").unwrap();
            let mut step = 0usize;
            while !stop.load(Ordering::Acquire) {
                let regions = conn.admin().regions(&name).await.unwrap();
                step += 1;
                let changed = if regions.len() < 12 && !step.is_multiple_of(3) {
                    let r = &regions[step % regions.len()];
                    conn.admin().split_region(&name, r.id, None).await.is_ok()
                } else {
                    match regions
                        .windows(2)
                        .skip(step % regions.len())
                        .chain(regions.windows(2))
                        .find(|w| spec.within_one_bucket(&w[0].start_key, &w[1].end_key))
                    {
                        Some(w) => conn
                            .admin()
                            .merge_regions(&name, w[0].id, w[1].id)
                            .await
                            .is_ok(),
                        None => false,
                    }
                };
                if changed {
                    changes.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };
    let agg = SaltedAggregationClient::new(se.clone());
    let col = Column::new("f", "v", Interpreter::I64);
    // At least 15 rounds, then on until the churn task has split or merged a few times: how
    // many rounds that takes depends on the machine's speed and load.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut round = 0;
    while round < 15 || changes.load(Ordering::Relaxed) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "after {round} rounds: {} splits and merges, the churn task split or merged too \
             little",
            changes.load(Ordering::Relaxed)
        );
        round += 1;
        let snap = se.snapshot().unwrap();
        let s = snap
            .coprocessor_service::<LogicalRows>("logical_rows", KeyRange::all(), &snap.width())
            .unwrap();
        let merged = merge_logical(s, |(k, _)| k.clone()).await.unwrap();
        assert_eq!(merged, whole, "round {round}");
        assert_eq!(
            agg.fast_row_count(part_range.clone()).await.unwrap(),
            part.len() as u64,
            "round {round}"
        );
        assert_eq!(
            agg.sum(part_range.clone(), &col).await.unwrap(),
            Some(Number::I64(part_sum)),
            "round {round}"
        );
    }
    stop.store(true, Ordering::Release);
    churn.await.unwrap();
    let regions = conn.admin().regions(t.name()).await.unwrap();
    let spec = t.spec().clone();
    assert!(regions
        .iter()
        .all(|r| spec.within_one_bucket(&r.start_key, &r.end_key)));
    conn.close().await.unwrap();
}

/// Every salted call reads one snapshot across buckets: a writer moves amounts between
/// accounts in different buckets, one atomic batch per transfer, and every sum over the
/// table (a call per bucket) sees the total unchanged; calls through one snapshot do not
/// see writes made after it was taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_salted_call_reads_one_snapshot_across_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    conn.admin()
        .create_table(desc("bank", SaltSpec::new(16)))
        .await
        .unwrap();
    let t = conn.salted_table("bank").unwrap();
    let accounts = 64u64;
    let start = 1_000i64;
    let account = |i: u64| format!("acct{i:03}");
    let ops = (0..accounts)
        .map(|i| BatchOp::Put(Put::new(account(i)).add_column("f", "v", start.to_be_bytes())))
        .collect();
    for r in t.batch(ops).await.unwrap() {
        r.unwrap();
    }
    let eps = Endpoints::new(&conn, Arc::new(EndpointRegistry::with_builtins()));
    let se = SaltedEndpoints::new(&eps, &t);
    let agg = SaltedAggregationClient::new(se.clone());
    let col = Column::new("f", "v", Interpreter::I64);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (t, stop) = (t.clone(), stop.clone());
        tokio::spawn(async move {
            let mut balance = vec![start; accounts as usize];
            let mut transfers = 0u64;
            let mut x = 987654321u64;
            while !stop.load(Ordering::Relaxed) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let (a, b) = ((x >> 33) % accounts, (x >> 17) % accounts);
                if t.bucket(account(a).as_bytes()).unwrap()
                    == t.bucket(account(b).as_bytes()).unwrap()
                {
                    continue;
                }
                let amount = (x % 50) as i64 + 1;
                balance[a as usize] -= amount;
                balance[b as usize] += amount;
                let ops = [a, b]
                    .iter()
                    .map(|i| {
                        BatchOp::Put(Put::new(account(*i)).add_column(
                            "f",
                            "v",
                            balance[*i as usize].to_be_bytes(),
                        ))
                    })
                    .collect();
                for r in t.batch(ops).await.unwrap() {
                    r.unwrap();
                }
                transfers += 1;
                if transfers.is_multiple_of(64) {
                    tokio::task::yield_now().await;
                }
            }
            transfers
        })
    };
    let total = Some(Number::I64(start * accounts as i64));
    for round in 0..60 {
        assert_eq!(
            agg.sum(KeyRange::all(), &col).await.unwrap(),
            total,
            "round {round}: a transfer was seen half-applied"
        );
    }
    // Two calls through one snapshot agree although a row is added in between.
    let snap = se.snapshot().unwrap();
    let count = |snap: &basalt::coprocessors::SaltedSnapshot| {
        let s = snap
            .coprocessor_service::<basalt::coprocessors::RowCount>(
                basalt::coprocessors::ROW_COUNT,
                KeyRange::all(),
                &(),
            )
            .unwrap();
        fold(s, 0u64, |a, n| a + n)
    };
    let before = count(&snap).await.unwrap();
    t.put(Put::new("zz-new").add_column("f", "v", 0i64.to_be_bytes()))
        .await
        .unwrap();
    assert_eq!(count(&snap).await.unwrap(), before);
    assert_eq!(count(&se.snapshot().unwrap()).await.unwrap(), before + 1);
    stop.store(true, Ordering::Relaxed);
    assert!(writer.await.unwrap() > 0, "the writer made no transfer");
    conn.close().await.unwrap();
}

/// A failing bucket ends a fail-fast call with its error; a partial call answers every
/// other region and reports the failed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_and_partial_salted_calls() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let spec = SaltSpec::new(8);
    conn.admin()
        .create_table(desc("ff", spec.clone()))
        .await
        .unwrap();
    let t = conn.salted_table("ff").unwrap();
    fill(&t, 8, 25).await;
    let bad_bucket = t.bucket(b"u03/0003").unwrap();
    let registry = Arc::new(EndpointRegistry::with_builtins());
    registry
        .register(
            t.name(),
            "fails",
            FailsInBucket {
                bad_bucket_start: if bad_bucket == 0 {
                    Vec::new()
                } else {
                    spec.salt(bad_bucket)
                },
            },
        )
        .unwrap();
    let in_bad: u64 = client_rows(&t, &KeyRange::all())
        .await
        .iter()
        .filter(|(k, _)| t.bucket(k).unwrap() == bad_bucket)
        .count() as u64;
    let eps = Endpoints::new(&conn, registry);
    let s = SaltedEndpoints::new(&eps, &t)
        .coprocessor_service::<FailsInBucket>("fails", KeyRange::all(), &())
        .unwrap();
    assert!(fold(s, 0u64, |a, n| a + n).await.is_err());
    let partial = SaltedEndpoints::new(
        &eps.with_options(CallOptions::default().mode(ErrorMode::Partial)),
        &t,
    );
    let s = partial
        .coprocessor_service::<FailsInBucket>("fails", KeyRange::all(), &())
        .unwrap();
    let p = fold_partial(s, 0u64, |a, n| a + n).await;
    assert_eq!(p.errors.len(), 1);
    assert_eq!(p.value, 8 * 25 - in_bad);
    // An unknown service fails before streaming.
    assert!(partial
        .coprocessor_service::<FailsInBucket>("nope", KeyRange::all(), &())
        .is_err());
    conn.close().await.unwrap();
}
