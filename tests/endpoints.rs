//! Endpoints: the built-in aggregations and a custom endpoint answer exactly what a
//! client-side computation over the same rows (a scan) gives, for random rows, pre-splits
//! and ranges; still exactly while another task splits and merges the regions during the
//! calls; fail-fast and partial results with an endpoint that fails on one region; a
//! panicking endpoint fails its region only; a call reads one snapshot, not the writes
//! made while it runs; the in-place row count and column fold equal the client's
//! computation over deletes, versions, TTL, several files and families, MemStore data and
//! splits, and read in place where that is exact; and a hanging region times out under the
//! call's error mode.

use basalt::client::{Delete, Put, Scan};
use basalt::coprocessors::AGGREGATE;
use basalt::coprocessors::{collect_ordered, fold, fold_partial, merge_sorted};
use basalt::coprocessors::{
    AggregationClient, CallOptions, Column, Endpoint, EndpointRegistry, Endpoints, ErrorMode,
    Interpreter, KeyRange, Number,
};
use basalt::endpoint::RegionView;
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, SplitPolicy, TableDescriptor,
    TableName,
};
use futures::{StreamExt, TryStreamExt};
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An engine without automatic splits and table `t` (family `f`) pre-split at `splits`.
async fn table_with_splits(splits: &[String]) -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open_with(Config::new(dir.path()).split_policy(SplitPolicy::Disabled))
        .await
        .unwrap();
    let desc = TableDescriptor::new(TableName::parse("t").unwrap())
        .family(ColumnFamilyDescriptor::new("f").block_size(1024));
    let split = if splits.is_empty() {
        PreSplit::None
    } else {
        PreSplit::Keys(splits.iter().map(|s| s.as_bytes().to_vec()).collect())
    };
    conn.admin()
        .create_table_with_splits(desc, split)
        .await
        .unwrap();
    (dir, conn)
}

fn key(i: usize) -> String {
    format!("k{i:04}")
}

/// The rows of `range` as a client sees them: (row key, value of f:v if any).
async fn client_rows(conn: &Connection, range: &KeyRange) -> Vec<(String, Option<Vec<u8>>)> {
    let mut scan = Scan::new();
    if let Some(s) = &range.start {
        scan = scan.start_row(s);
    }
    if let Some(s) = &range.stop {
        scan = scan.stop_row(s);
    }
    let rows: Vec<_> = conn
        .table("t")
        .unwrap()
        .scan(scan)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            (
                String::from_utf8(r.row.to_vec()).unwrap(),
                r.value("f", "v").map(|v| v.to_vec()),
            )
        })
        .collect()
}

fn endpoints(conn: &Connection) -> Endpoints {
    Endpoints::new(conn, Arc::new(EndpointRegistry::with_builtins()))
}

/// What each aggregate must be, computed on the client from scanned rows.
#[derive(Debug)]
struct Expected {
    rows: u64,
    with_column: u64,
    values: Vec<Number>,
}

fn expected(rows: &[(String, Option<Vec<u8>>)], interp: Interpreter) -> Expected {
    let values = rows
        .iter()
        .filter_map(|(_, v)| v.as_ref())
        .filter(|v| v.len() == 8)
        .map(|v| {
            let b: [u8; 8] = v.as_slice().try_into().unwrap();
            match interp {
                Interpreter::I64 => Number::I64(i64::from_be_bytes(b)),
                Interpreter::U64 => Number::U64(u64::from_be_bytes(b)),
                Interpreter::F64 => Number::F64(f64::from_be_bytes(b)),
            }
        })
        .filter(|n| !matches!(n, Number::F64(x) if x.is_nan()))
        .collect();
    Expected {
        rows: rows.len() as u64,
        with_column: rows.iter().filter(|(_, v)| v.is_some()).count() as u64,
        values,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Checks every aggregate of `range` against the client-side computation.
async fn check_aggregates(conn: &Connection, range: KeyRange, interp: Interpreter) {
    let exp = expected(&client_rows(conn, &range).await, interp);
    let agg = AggregationClient::new(endpoints(conn));
    let col = Column::new("f", "v", interp);
    assert_eq!(
        agg.fast_row_count("t", range.clone()).await.unwrap(),
        exp.rows
    );
    assert_eq!(
        agg.row_count("t", range.clone(), &col).await.unwrap(),
        exp.with_column
    );
    let mut sorted = exp.values.clone();
    sorted.sort_by(|a, b| a.as_f64().total_cmp(&b.as_f64()));
    let n = exp.values.len();
    let (sum, min, max, avg, std, median) = (
        agg.sum("t", range.clone(), &col).await.unwrap(),
        agg.min("t", range.clone(), &col).await.unwrap(),
        agg.max("t", range.clone(), &col).await.unwrap(),
        agg.avg("t", range.clone(), &col).await.unwrap(),
        agg.std("t", range.clone(), &col).await.unwrap(),
        agg.median("t", range.clone(), &col).await.unwrap(),
    );
    if n == 0 {
        assert_eq!(
            (sum, min, max, avg, std, median),
            (None, None, None, None, None, None)
        );
        return;
    }
    let fsum: f64 = exp.values.iter().map(|v| v.as_f64()).sum();
    match sum.unwrap() {
        Number::I64(s) => {
            let want: i128 = exp.values.iter().map(|v| v.as_f64() as i128).sum();
            assert_eq!(i128::from(s), want);
        }
        Number::U64(s) => {
            let want: u128 = exp.values.iter().map(|v| v.as_f64() as u128).sum();
            assert_eq!(u128::from(s), want);
        }
        Number::F64(s) => assert!(close(s, fsum), "{s} vs {fsum}"),
    }
    assert_eq!(min, sorted.first().copied());
    assert_eq!(max, sorted.last().copied());
    let mean = fsum / n as f64;
    assert!(close(avg.unwrap(), mean), "{avg:?} vs {mean}");
    let var = exp
        .values
        .iter()
        .map(|v| (v.as_f64() - mean).powi(2))
        .sum::<f64>()
        / n as f64;
    let std = std.unwrap();
    assert!(
        (std - var.sqrt()).abs() <= 1e-6 * var.sqrt().max(1.0),
        "{std} vs {}",
        var.sqrt()
    );
    assert_eq!(median, Some(sorted[(n - 1) / 2]), "median of {sorted:?}");
}

/// One generated row: its value kind, and whether it is deleted afterwards.
#[derive(Debug, Clone)]
enum Val {
    Num(i64),
    /// A cell of the wrong width (skipped by the aggregates, counted by row_count).
    Bad(usize),
    /// Only another column (no f:v).
    Other,
}

fn encode(v: i64, interp: Interpreter) -> [u8; 8] {
    match interp {
        Interpreter::I64 => v.to_be_bytes(),
        Interpreter::U64 => v.unsigned_abs().to_be_bytes(),
        Interpreter::F64 => (v as f64 / 7.0).to_be_bytes(),
    }
}

fn val_strategy() -> impl Strategy<Value = Val> {
    prop_oneof![
        6 => (-1_000_000_000_000i64..1_000_000_000_000).prop_map(Val::Num),
        2 => (-5i64..5).prop_map(Val::Num),
        1 => (0usize..12).prop_filter("not 8", |n| *n != 8).prop_map(Val::Bad),
        1 => Just(Val::Other),
    ]
}

fn interp_strategy() -> impl Strategy<Value = Interpreter> {
    prop_oneof![
        Just(Interpreter::I64),
        Just(Interpreter::U64),
        Just(Interpreter::F64)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(16),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every aggregate over random rows, split points and ranges equals the client's
    /// computation over the scanned rows (deleted rows, flushed and unflushed data, cells
    /// of the wrong width included).
    #[test]
    fn aggregates_equal_client_side(
        rows in proptest::collection::btree_map(0usize..300, (val_strategy(), proptest::bool::weighted(0.15)), 0..120),
        splits in proptest::collection::btree_set(0usize..300, 0..5),
        lo in proptest::option::of(0usize..300),
        len in proptest::option::of(0usize..300),
        flush_at in 0usize..120,
        interp in interp_strategy(),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let splits: Vec<String> = splits.iter().map(|i| key(*i)).collect();
            let (_dir, conn) = table_with_splits(&splits).await;
            let t = conn.table("t").unwrap();
            for (n, (i, (v, _))) in rows.iter().enumerate() {
                if n == flush_at {
                    conn.admin().flush(t.name()).await.unwrap();
                }
                let p = Put::new(key(*i)).add_column("f", "o", "x");
                let p = match v {
                    Val::Num(x) => p.add_column("f", "v", encode(*x, interp)),
                    Val::Bad(w) => p.add_column("f", "v", vec![1u8; *w]),
                    Val::Other => p,
                };
                t.put(p).await.unwrap();
            }
            for (i, (_, deleted)) in &rows {
                if *deleted {
                    t.delete(Delete::new(key(*i))).await.unwrap();
                }
            }
            let range = KeyRange {
                start: lo.map(|l| key(l).into()),
                stop: len.map(|n| key(lo.unwrap_or(0) + n).into()),
            };
            check_aggregates(&conn, range, interp).await;
            conn.close().await.unwrap();
        });
    }
}

/// A custom endpoint: the keys of the rows in range, and the sum of f:v as i64, slowly
/// (a pause per region widens the window for splits and merges during the call).
struct SlowKeys {
    pause: Duration,
}

impl Endpoint for SlowKeys {
    type Request = ();
    type Response = (Vec<String>, i64);
    fn call(&self, region: &RegionView<'_>, _: &()) -> basalt::Result<(Vec<String>, i64)> {
        std::thread::sleep(self.pause);
        let mut keys = Vec::new();
        let mut sum = 0;
        for row in region.scan(&Scan::new())? {
            let row = row?;
            keys.push(String::from_utf8_lossy(&row.row).into_owned());
            if let Some(v) = row.value("f", "v") {
                let b: [u8; 8] = v
                    .as_ref()
                    .try_into()
                    .map_err(|_| Error::bad_argument("width"))?;
                sum += i64::from_be_bytes(b);
            }
        }
        Ok((keys, sum))
    }
}

/// Results stay exact while another task splits and merges the table's regions during the
/// calls: no row is skipped or counted twice, and regions retired mid-call were redone on
/// their successors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_while_regions_split_and_merge() {
    let (_dir, conn) = table_with_splits(&[key(500)]).await;
    let t = conn.table("t").unwrap();
    let n = 1000;
    for i in 0..n {
        t.put(Put::new(key(i)).add_column("f", "v", (i as i64).to_be_bytes()))
            .await
            .unwrap();
    }
    conn.admin().flush(t.name()).await.unwrap();
    let registry = Arc::new(EndpointRegistry::with_builtins());
    registry
        .register(
            t.name(),
            "slow_keys",
            SlowKeys {
                pause: Duration::from_millis(15),
            },
        )
        .unwrap();
    let eps = Endpoints::new(&conn, registry).with_options(CallOptions::default().concurrency(2));
    let stop = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(AtomicUsize::new(0));
    let churn = {
        let (conn, stop, changes) = (conn.clone(), stop.clone(), changes.clone());
        tokio::spawn(async move {
            let name = TableName::parse("t").unwrap();
            let mut step = 0usize;
            while !stop.load(Ordering::Acquire) {
                let regions = conn.admin().regions(&name).await.unwrap();
                step += 1;
                // Split the widest-looking region at a row inside it, or merge two neighbours.
                if regions.len() < 6 && !step.is_multiple_of(3) {
                    let r = &regions[step % regions.len()];
                    let lo = if r.start_key.is_empty() {
                        0
                    } else {
                        std::str::from_utf8(&r.start_key[1..])
                            .unwrap()
                            .parse::<usize>()
                            .unwrap()
                    };
                    let hi = if r.end_key.is_empty() {
                        n
                    } else {
                        std::str::from_utf8(&r.end_key[1..])
                            .unwrap()
                            .parse::<usize>()
                            .unwrap()
                    };
                    if hi - lo >= 2 {
                        let at = key(lo + (hi - lo) / 2);
                        if conn
                            .admin()
                            .split_region(&name, r.id, Some(at.as_bytes()))
                            .await
                            .is_ok()
                        {
                            changes.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                } else if regions.len() >= 2 {
                    let i = step % (regions.len() - 1);
                    if conn
                        .admin()
                        .merge_regions(&name, regions[i].id, regions[i + 1].id)
                        .await
                        .is_ok()
                    {
                        changes.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };
    let want_keys: Vec<String> = (0..n).map(key).collect();
    let want_sum: i64 = (0..n as i64).sum();
    let agg = AggregationClient::new(eps.clone());
    let col = Column::new("f", "v", Interpreter::I64);
    let mut redone = 0;
    // At least 25 rounds, then on until the churn task has split or merged enough and some
    // call had a region retired under it: how many rounds that takes depends on the
    // machine's speed and load.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut round = 0;
    while round < 25 || changes.load(Ordering::Relaxed) < 5 || redone == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "after {round} rounds: {} splits and merges (the churn task split or merged too \
             little), {redone} regions redone (no region was retired during a call: the test \
             did not test redos)",
            changes.load(Ordering::Relaxed)
        );
        round += 1;
        let planned: Vec<u64> = conn
            .admin()
            .regions(t.name())
            .await
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        let max_planned = planned.iter().copied().max().unwrap();
        let s = eps
            .coprocessor_service::<SlowKeys>("t", "slow_keys", KeyRange::all(), &())
            .unwrap();
        let answers = collect_ordered(s).await;
        redone += answers
            .iter()
            .filter(|a| a.span.region_id > max_planned)
            .count();
        let mut keys = Vec::new();
        let mut sum = 0;
        for a in answers {
            let (k, s) = a.result.unwrap();
            keys.extend(k);
            sum += s;
        }
        assert_eq!(keys, want_keys, "round {round}");
        assert_eq!(sum, want_sum, "round {round}");
        // A sub-range too, through the built-ins.
        let range = KeyRange::new(key(123), key(877));
        assert_eq!(agg.fast_row_count("t", range.clone()).await.unwrap(), 754);
        assert_eq!(
            agg.sum("t", range, &col).await.unwrap(),
            Some(Number::I64((123..877).sum()))
        );
    }
    stop.store(true, Ordering::Release);
    churn.await.unwrap();
    conn.close().await.unwrap();
}

/// An endpoint that fails (or panics) in the region holding row `bad`, and otherwise
/// counts its rows.
struct FailsAt {
    bad: &'static str,
    panic: bool,
}

impl Endpoint for FailsAt {
    type Request = ();
    type Response = u64;
    fn call(&self, region: &RegionView<'_>, _: &()) -> basalt::Result<u64> {
        if region.range().contains(self.bad.as_bytes()) {
            if self.panic {
                panic!("endpoint bug");
            }
            return Err(Error::bad_argument("refused"));
        }
        region.scan(&Scan::new())?.count_rows()
    }
}

/// Four regions of 25 rows each: k0000.. k0099 split at k0025, k0050, k0075.
async fn four_regions() -> (tempfile::TempDir, Connection, Arc<EndpointRegistry>) {
    let (dir, conn) = table_with_splits(&[key(25), key(50), key(75)]).await;
    let t = conn.table("t").unwrap();
    for i in 0..100 {
        t.put(Put::new(key(i)).add_column("f", "v", (i as i64).to_be_bytes()))
            .await
            .unwrap();
    }
    let registry = Arc::new(EndpointRegistry::with_builtins());
    registry
        .register(
            t.name(),
            "fails",
            FailsAt {
                bad: "k0060",
                panic: false,
            },
        )
        .unwrap();
    registry
        .register(
            t.name(),
            "panics",
            FailsAt {
                bad: "k0030",
                panic: true,
            },
        )
        .unwrap();
    (dir, conn, registry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_and_partial_results() {
    let (_dir, conn, registry) = four_regions().await;
    // Partial: every region reports; the failing one with its error.
    let partial = Endpoints::new(&conn, registry.clone())
        .with_options(CallOptions::default().mode(ErrorMode::Partial));
    let s = partial
        .coprocessor_service::<FailsAt>("t", "fails", KeyRange::all(), &())
        .unwrap();
    let all = collect_ordered(s).await;
    assert_eq!(all.len(), 4);
    for (i, a) in all.iter().enumerate() {
        if i == 2 {
            assert!(
                matches!(a.result, Err(Error::BadArgument(_))),
                "{:?}",
                a.result
            );
            assert_eq!(a.span.region_start.as_ref(), key(50).as_bytes());
        } else {
            assert_eq!(*a.result.as_ref().unwrap(), 25);
        }
    }
    let s = partial
        .coprocessor_service::<FailsAt>("t", "fails", KeyRange::all(), &())
        .unwrap();
    let p = fold_partial(s, 0u64, |a, n| a + n).await;
    assert_eq!(p.value, 75);
    assert_eq!(p.errors.len(), 1);
    assert!(!p.is_complete());
    // A range that avoids the bad region succeeds.
    let s = partial
        .coprocessor_service::<FailsAt>("t", "fails", KeyRange::new(key(0), key(50)), &())
        .unwrap();
    assert_eq!(fold(s, 0u64, |a, n| a + n).await.unwrap(), 50);

    // Fail-fast, one region at a time in key order: two answers, the error ends the stream,
    // the last region never runs.
    let ff = Endpoints::new(&conn, registry.clone())
        .with_options(CallOptions::default().concurrency(1).ordered(true));
    let s = ff
        .coprocessor_service::<FailsAt>("t", "fails", KeyRange::all(), &())
        .unwrap();
    let got: Vec<_> = s.collect().await;
    assert_eq!(got.len(), 3);
    assert!(got[0].result.is_ok() && got[1].result.is_ok() && got[2].result.is_err());
    let s = ff
        .coprocessor_service::<FailsAt>("t", "fails", KeyRange::all(), &())
        .unwrap();
    assert!(matches!(
        fold(s, 0u64, |a, n| a + n).await,
        Err(Error::BadArgument(_))
    ));

    // Unknown services and mismatched types are errors, not panics.
    assert!(matches!(
        ff.coprocessor_service::<FailsAt>("t", "nope", KeyRange::all(), &()),
        Err(Error::Coprocessor { .. })
    ));
    let s = ff
        .coprocessor_service::<FailsAt>("t", AGGREGATE, KeyRange::all(), &())
        .unwrap();
    assert!(matches!(
        fold(s, 0u64, |a, n| a + n).await,
        Err(Error::BadArgument(_))
    ));
    assert!(ff
        .clone()
        .with_options(CallOptions::default().concurrency(0))
        .coprocessor_service::<FailsAt>("t", "fails", KeyRange::all(), &())
        .is_err());
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_endpoint_fails_its_region_only() {
    let (_dir, conn, registry) = four_regions().await;
    let eps = Endpoints::new(&conn, registry)
        .with_options(CallOptions::default().mode(ErrorMode::Partial));
    for _ in 0..2 {
        let s = eps
            .coprocessor_service::<FailsAt>("t", "panics", KeyRange::all(), &())
            .unwrap();
        let all = collect_ordered(s).await;
        assert_eq!(all.len(), 4);
        match &all[1].result {
            Err(Error::Coprocessor { name, msg }) => {
                assert_eq!(name, "panics");
                assert!(
                    msg.contains("panicked") && msg.contains("endpoint bug"),
                    "{msg}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(all
            .iter()
            .enumerate()
            .all(|(i, a)| i == 1 || a.result.is_ok()));
    }
    // The engine goes on.
    let t = conn.table("t").unwrap();
    t.put(Put::new("k0030x").add_column("f", "v", 1i64.to_be_bytes()))
        .await
        .unwrap();
    let agg = AggregationClient::new(eps);
    assert_eq!(agg.fast_row_count("t", KeyRange::all()).await.unwrap(), 101);
    conn.close().await.unwrap();
}

/// Counts rows; in the region holding `k0000` it first waits until `go` is set.
struct WaitThenCount {
    go: Arc<AtomicBool>,
    started: Arc<AtomicBool>,
}

impl Endpoint for WaitThenCount {
    type Request = ();
    type Response = u64;
    fn call(&self, region: &RegionView<'_>, _: &()) -> basalt::Result<u64> {
        if region.range().contains(b"k0000") {
            self.started.store(true, Ordering::Release);
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !self.go.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        region.scan(&Scan::new())?.count_rows()
    }
}

/// Writes acknowledged while a call runs are not seen by any of its regions, even those
/// that start after the writes; a snapshot reads the same answer twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_reads_one_snapshot() {
    let (_dir, conn, registry) = four_regions().await;
    let (go, started) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let name = TableName::parse("t").unwrap();
    registry
        .register(
            &name,
            "wait",
            WaitThenCount {
                go: go.clone(),
                started: started.clone(),
            },
        )
        .unwrap();
    let eps = Endpoints::new(&conn, registry)
        .with_options(CallOptions::default().concurrency(1).ordered(true));
    let snap = eps.snapshot("t").unwrap();
    let s = snap
        .coprocessor_service::<WaitThenCount>("wait", KeyRange::all(), &())
        .unwrap();
    let call = tokio::spawn(fold(s, 0u64, |a, n| a + n));
    while !started.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let t = conn.table("t").unwrap();
    for i in 100..140 {
        t.put(Put::new(key(i)).add_column("f", "v", 1i64.to_be_bytes()))
            .await
            .unwrap();
    }
    for i in [10, 40, 60, 90] {
        t.delete(Delete::new(key(i))).await.unwrap();
    }
    conn.admin().flush(&name).await.unwrap();
    go.store(true, Ordering::Release);
    assert_eq!(call.await.unwrap().unwrap(), 100);
    // The snapshot still reads the old rows; a new call sees the new ones.
    let again = snap
        .coprocessor_service::<WaitThenCount>("wait", KeyRange::all(), &())
        .unwrap();
    assert_eq!(fold(again, 0u64, |a, n| a + n).await.unwrap(), 100);
    let agg = AggregationClient::new(eps);
    assert_eq!(agg.fast_row_count("t", KeyRange::all()).await.unwrap(), 136);
    conn.close().await.unwrap();
}

/// Lists the rows of its range: answers merged in key order give the scan's rows.
struct Keys;
impl Endpoint for Keys {
    type Request = String;
    type Response = Vec<String>;
    fn call(&self, region: &RegionView<'_>, prefix: &String) -> basalt::Result<Vec<String>> {
        region
            .scan(&Scan::new().with_prefix(prefix))?
            .map(|r| r.map(|r| String::from_utf8_lossy(&r.row).into_owned()))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_in_key_order() {
    let (_dir, conn, registry) = four_regions().await;
    registry.register_system("keys", Keys).unwrap();
    for ordered in [false, true] {
        let eps = Endpoints::new(&conn, registry.clone())
            .with_options(CallOptions::default().ordered(ordered).concurrency(3));
        let s = eps
            .coprocessor_service::<Keys>(
                "t",
                "keys",
                KeyRange::new(key(10), key(80)),
                &"k00".to_string(),
            )
            .unwrap();
        let merged = merge_sorted(s).await.unwrap();
        assert_eq!(merged, (10..80).map(key).collect::<Vec<_>>());
        let s = eps
            .coprocessor_service::<Keys>("t", "keys", KeyRange::prefix("k0055"), &String::new())
            .unwrap();
        let answers: Vec<_> = s.collect().await;
        // The prefix lies in one region.
        assert_eq!(answers.len(), 1);
        let spans: Vec<_> = answers.iter().map(|r| r.span.clone()).collect();
        assert_eq!(answers[0].result.as_ref().unwrap(), &vec![key(55)]);
        assert_eq!(spans[0].region_start.as_ref(), key(50).as_bytes());
    }
    conn.close().await.unwrap();
}

/// Counts rows and sums f:v (as i64) through the region view's in-place capable paths
/// ([`RegionView::count_rows`], [`RegionView::fold_column`]), and says how many of the two
/// answers were read in place.
struct Probe;

impl Endpoint for Probe {
    type Request = ();
    type Response = (u64, u64, i64, u64);
    fn call(&self, region: &RegionView<'_>, _: &()) -> basalt::Result<(u64, u64, i64, u64)> {
        let before = region.in_place_reads();
        let count = region.count_rows()?;
        let (rows, sum) = region.fold_column(
            b"f",
            b"v",
            || 0i64,
            |s, v| {
                if let Ok(b) = <[u8; 8]>::try_from(v) {
                    *s += i64::from_be_bytes(b);
                }
                Ok(())
            },
        )?;
        Ok((count, rows, sum, region.in_place_reads() - before))
    }
}

/// What is done to the table before the in-place reads are checked.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Flushed and major-compacted: one file per region, no delete marker.
    Compacted,
    /// Deletes flushed into a second file, then a major compaction that keeps delete
    /// markers (KEEP_DELETED_CELLS): one file per region that holds them.
    MarkersInOneFile,
    /// Deletes left in the MemStore.
    MemStoreDeletes,
    /// Two flushed files (the second one re-writes rows with newer versions).
    TwoFiles,
    /// Compacted, then every region split: the daughters read the parent's file as a
    /// reference (through their range).
    Split,
}

fn shape_strategy() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Compacted),
        Just(Shape::MarkersInOneFile),
        Just(Shape::MemStoreDeletes),
        Just(Shape::TwoFiles),
        Just(Shape::Split),
    ]
}

/// How a generated row is deleted (if it is).
#[derive(Debug, Clone, Copy)]
enum Del {
    None,
    /// The newest version of f:v.
    Newest,
    /// Every version of f:v.
    Column,
    /// Family f.
    Family,
    /// The whole row.
    Row,
}

fn del_strategy() -> impl Strategy<Value = Del> {
    prop_oneof![
        6 => Just(Del::None),
        1 => Just(Del::Newest),
        1 => Just(Del::Column),
        1 => Just(Del::Family),
        1 => Just(Del::Row),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(12),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The in-place row count and column fold (and every aggregate built on them) equal
    /// the client's computation over scanned rows, for tables with several versions,
    /// delete markers (in the MemStore or in the one compacted file), two files, MemStore
    /// data, a TTL with expired cells, a second family with data, and split regions; and
    /// they do read in place where that is exact (one clean file per region).
    #[test]
    fn in_place_reads_equal_client_side(
        rows in proptest::collection::btree_map(0usize..300, (1usize..4, del_strategy(), proptest::bool::weighted(0.2)), 1..120),
        splits in proptest::collection::btree_set(0usize..300, 0..4),
        shape in shape_strategy(),
        ttl in proptest::bool::weighted(0.25),
        other_family in proptest::bool::weighted(0.25),
        lo in proptest::option::of(0usize..300),
        len in proptest::option::of(0usize..300),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let conn = Connection::open_with(Config::new(dir.path()).split_policy(SplitPolicy::Disabled))
                .await
                .unwrap();
            let mut f = ColumnFamilyDescriptor::new("f").block_size(1024).max_versions(3);
            if ttl {
                f = f.ttl_secs(3600);
            }
            if matches!(shape, Shape::MarkersInOneFile) {
                // A major compaction keeps the markers: one file per region that holds them.
                f = f.keep_deleted_cells(true);
            }
            let desc = TableDescriptor::new(TableName::parse("t").unwrap())
                .family(f)
                .family(ColumnFamilyDescriptor::new("g"));
            let split = if splits.is_empty() {
                PreSplit::None
            } else {
                PreSplit::Keys(splits.iter().map(|i| key(*i).into_bytes()).collect())
            };
            conn.admin().create_table_with_splits(desc, split).await.unwrap();
            let t = conn.table("t").unwrap();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            for (i, (versions, _, expired)) in &rows {
                for v in 0..*versions {
                    // With a TTL of an hour, an expired row's cells are two hours old.
                    let ts = if *expired { now - 7_200_000 + v as u64 } else { now - 1000 + v as u64 };
                    let value = (*i as i64) * 10 + v as i64;
                    let mut p = Put::new(key(*i))
                        .add_column_ts("f", "v", ts, value.to_be_bytes())
                        .add_column_ts("f", "o", ts, "x");
                    if other_family && i % 3 == 0 {
                        p = p.add_column("g", "q", "y");
                    }
                    t.put(p).await.unwrap();
                }
            }
            conn.admin().flush(t.name()).await.unwrap();
            let deletes = |t: basalt::client::Table| {
                let rows = rows.clone();
                async move {
                    for (i, (_, del, _)) in &rows {
                        let d = Delete::new(key(*i));
                        let d = match del {
                            Del::None => continue,
                            Del::Newest => d.add_column("f", "v"),
                            Del::Column => d.add_columns("f", "v"),
                            Del::Family => d.add_family("f"),
                            Del::Row => d,
                        };
                        t.delete(d).await.unwrap();
                    }
                }
            };
            match shape {
                Shape::Compacted => conn.admin().major_compact(t.name()).await.unwrap(),
                Shape::MarkersInOneFile => {
                    deletes(t.clone()).await;
                    conn.admin().flush(t.name()).await.unwrap();
                    conn.admin().major_compact(t.name()).await.unwrap();
                }
                Shape::MemStoreDeletes => deletes(t.clone()).await,
                Shape::TwoFiles => {
                    for i in rows.keys().step_by(2) {
                        t.put(Put::new(key(*i)).add_column("f", "v", (-(*i as i64)).to_be_bytes()))
                            .await
                            .unwrap();
                    }
                    conn.admin().flush(t.name()).await.unwrap();
                }
                Shape::Split => {
                    conn.admin().major_compact(t.name()).await.unwrap();
                    for r in conn.admin().regions(t.name()).await.unwrap() {
                        // The middle row of the region, or nothing to split at.
                        let _ = conn.admin().split_region(t.name(), r.id, None).await;
                    }
                }
            }
            let range = KeyRange {
                start: lo.map(|l| key(l).into()),
                stop: len.map(|n| key(lo.unwrap_or(0) + n).into()),
            };
            check_aggregates(&conn, range.clone(), Interpreter::I64).await;
            // The probe answers as the client does, and reads in place where it is exact.
            let client = client_rows(&conn, &range).await;
            let want_rows = client.len() as u64;
            let with_v: Vec<i64> = client
                .iter()
                .filter_map(|(_, v)| v.as_ref())
                .map(|v| i64::from_be_bytes(v.as_slice().try_into().unwrap()))
                .collect();
            let registry = Arc::new(EndpointRegistry::with_builtins());
            registry.register(t.name(), "probe", Probe).unwrap();
            let eps = Endpoints::new(&conn, registry);
            let s = eps.coprocessor_service::<Probe>("t", "probe", range, &()).unwrap();
            let (count, rows_v, sum, in_place) =
                fold(s, (0, 0, 0, 0), |a, r| (a.0 + r.0, a.1 + r.1, a.2 + r.2, a.3 + r.3))
                    .await
                    .unwrap();
            assert_eq!(count, want_rows);
            assert_eq!(rows_v, with_v.len() as u64);
            assert_eq!(sum, with_v.iter().sum::<i64>());
            let clean = matches!(shape, Shape::Compacted | Shape::Split) && !ttl && !other_family;
            if clean && want_rows > 0 {
                assert!(in_place > 0, "a compacted table without TTL read nothing in place");
            }
            if ttl {
                assert_eq!(in_place, 0, "a family with a TTL must not be read in place");
            }
            conn.close().await.unwrap();
        });
    }
}

/// Hangs in the table's first region until `release` is set (at most a minute, should the
/// test never set it), answers 1 at once elsewhere.
struct HangsInFirst {
    release: Arc<AtomicBool>,
}

impl Endpoint for HangsInFirst {
    type Request = ();
    type Response = u64;
    fn call(&self, region: &RegionView<'_>, _: &()) -> basalt::Result<u64> {
        if region.region_start().is_empty() {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !self.release.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Ok(1)
    }
}

/// A region that runs past the call's per-region timeout answers an error in its place,
/// handled under the call's error mode: the other regions' answers with `Partial`, the
/// call's error with `FailFast`; neither waits for the hanging region.
///
/// The hanging region is held until the end of the test (not for a fixed time), so a call
/// that waited for it could not end in time by luck; the per-region timeout is long enough
/// for the regions that answer at once to answer on a slow, loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_region_times_out_under_the_error_mode() {
    let (_dir, conn) = table_with_splits(&[key(100), key(200)]).await;
    let registry = Arc::new(EndpointRegistry::with_builtins());
    let release = Arc::new(AtomicBool::new(false));
    registry
        .register(
            &TableName::parse("t").unwrap(),
            "hangs",
            HangsInFirst {
                release: release.clone(),
            },
        )
        .unwrap();
    let limit = Duration::from_secs(1);
    // Far below the hang (until released, or a minute), far above the timeout.
    let bound = Duration::from_secs(30);
    let is_timeout = |r: &basalt::Result<u64>| matches!(r, Err(Error::Coprocessor { name, msg }) if name == "hangs" && msg.contains("timeout of 1000 ms"));
    let partial = Endpoints::new(&conn, registry.clone()).with_options(
        CallOptions::default()
            .timeout(limit)
            .mode(ErrorMode::Partial),
    );
    let started = std::time::Instant::now();
    let all = collect_ordered(
        partial
            .coprocessor_service::<HangsInFirst>("t", "hangs", KeyRange::all(), &())
            .unwrap(),
    )
    .await;
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    assert_eq!(all.len(), 3);
    assert!(is_timeout(&all[0].result), "{:?}", all[0].result);
    assert!(all[1..].iter().all(|r| matches!(r.result, Ok(1))));
    // Without the slow region, the same options answer in full.
    let rest = partial
        .coprocessor_service::<HangsInFirst>("t", "hangs", KeyRange::from(key(100)), &())
        .unwrap();
    assert_eq!(fold(rest, 0, |a, n| a + n).await.unwrap(), 2);
    let fail_fast =
        Endpoints::new(&conn, registry).with_options(CallOptions::default().timeout(limit));
    let started = std::time::Instant::now();
    let s = fail_fast
        .coprocessor_service::<HangsInFirst>("t", "hangs", KeyRange::all(), &())
        .unwrap();
    let err = fold(s, 0, |a, n| a + n).await.unwrap_err();
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    assert!(is_timeout(&Err(err)));
    release.store(true, Ordering::Release);
}
