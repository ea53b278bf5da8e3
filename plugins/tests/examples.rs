//! The SDK's example plugins (examples/plugins: built components committed with their
//! sha256) give the same results as their native versions: the validation observer (the
//! age rule of `examples/validation_observer.rs`), the follower counter of
//! `examples/follower_counter.rs`, and a sum endpoint against the built-in aggregation.

use basalt::client::{BatchOp, Increment, Put, RowResult, Scan};
use basalt::coprocessors::{
    AggregationClient, Column, EndpointRegistry, Endpoints, Interpreter, KeyRange, Number,
    RegionObserver, Registry,
};
use basalt::{
    plugin_coprocessor_name, plugin_id, ColumnFamilyDescriptor, Config, Connection,
    CoprocessorDescriptor, Error, PreSplit, Result, TableDescriptor, TableName,
};
use basalt_plugins::{PluginEndpoints, PluginHost};
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// An example plugin's committed component, checked against its committed sha256.
fn example(name: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins");
    let bytes = std::fs::read(dir.join(format!("{name}.wasm"))).unwrap();
    let sum = std::fs::read_to_string(dir.join(format!("{name}.wasm.sha256"))).unwrap();
    let want = sum.split_whitespace().next().unwrap();
    assert_eq!(
        plugin_id(&bytes),
        want,
        "{name}.wasm differs from its sha256: rebuild with plugin-sdk/build-examples.sh"
    );
    bytes
}

// ---- the native versions: the examples' own observers ----------------------------------

/// `examples/validation_observer.rs`, whose `AgeRule` is the native validation observer.
#[allow(dead_code)]
#[path = "../../examples/validation_observer.rs"]
mod validation_example;

/// `examples/follower_counter.rs`, whose `FollowerCounter` is the native counter.
#[allow(dead_code)]
#[path = "../../examples/follower_counter.rs"]
mod counter_example;

use counter_example::FollowerCounter;
use validation_example::AgeRule;

// ---- the comparisons --------------------------------------------------------------------

async fn open(dir: &Path) -> (Connection, Arc<PluginHost>) {
    let host = PluginHost::with_defaults().unwrap();
    let registry = Arc::new(Registry::new());
    registry.set_plugin_runtime(host.clone());
    registry
        .register("age-native", |_| {
            Ok(Arc::new(AgeRule) as Arc<dyn RegionObserver>)
        })
        .unwrap();
    registry
        .register("counter-native", |args| {
            let stats = TableName::parse(args.get("stats").map_or("", String::as_str))?;
            Ok(Arc::new(FollowerCounter { stats }) as Arc<dyn RegionObserver>)
        })
        .unwrap();
    let config = Config::new(dir).coprocessor_loader(registry);
    (Connection::open_with(config).await.unwrap(), host)
}

async fn create(conn: &Connection, name: &str, family: &str, cp: Option<CoprocessorDescriptor>) {
    let mut d = TableDescriptor::new(TableName::parse(name).unwrap())
        .family(ColumnFamilyDescriptor::new(family));
    if let Some(cp) = cp {
        d = d.coprocessor(cp);
    }
    conn.admin().create_table(d).await.unwrap();
}

/// Every row of `table`.
async fn scan_all(conn: &Connection, table: &str) -> Vec<RowResult> {
    let t = conn.table(table).unwrap();
    t.scan(Scan::new()).unwrap().try_collect().await.unwrap()
}

/// What a write did, with the coprocessor's name left out (the two differ by name only).
fn outcome(r: &Result<()>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(Error::Coprocessor { msg, .. }) => format!("refused: {msg}"),
        Err(e) => format!("error: {e}"),
    }
}

async fn age_story(conn: &Connection, table: &str) -> Vec<String> {
    let t = conn.table(table).unwrap();
    let put = |row: &str, age: &str| {
        Put::new(row)
            .add_column("info", "name", row)
            .add_column("info", "age", age)
    };
    let mut log = Vec::new();
    for (row, age) in [
        ("ada", "36"),
        ("bob", "200"),
        ("cid", "-1"),
        ("dee", "thirty"),
        ("eli", ""),
    ] {
        let r = t.put(put(row, age)).await;
        log.push(format!("{row} {age:?}: {}", outcome(&r)));
    }
    let out = t
        .batch(vec![
            BatchOp::Put(put("eve", "41")),
            BatchOp::Put(put("fay", "151")),
            BatchOp::Put(put("gus", "0")),
        ])
        .await
        .unwrap();
    for r in out {
        log.push(format!("batch: {}", outcome(&r.map(drop))));
    }
    let rows: Vec<String> = scan_all(conn, table)
        .await
        .iter()
        .map(|r| String::from_utf8_lossy(&r.row).into_owned())
        .collect();
    log.push(format!("rows {rows:?}"));
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_validation_plugin_refuses_what_the_native_observer_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _host) = open(dir.path()).await;
    let id = conn
        .admin()
        .upload_plugin(example("validation"))
        .await
        .unwrap()
        .id;
    create(
        &conn,
        "native",
        "info",
        Some(CoprocessorDescriptor::new("age-native")),
    )
    .await;
    let cp = CoprocessorDescriptor::new(plugin_coprocessor_name(&id));
    create(&conn, "plugin", "info", Some(cp)).await;
    let native = age_story(&conn, "native").await;
    let plugin = age_story(&conn, "plugin").await;
    assert_eq!(plugin, native);
    assert_eq!(
        native.iter().filter(|l| l.contains("refused")).count(),
        5,
        "{native:?}"
    );
    conn.close().await.unwrap();
}

/// Eight tasks follow and unfollow at random; the counters must match a recount.
async fn churn(conn: &Connection, follows: &str, stats: &str) -> BTreeMap<String, (i64, i64)> {
    const USERS: [&str; 6] = ["ada", "bob", "cid", "dee", "eve", "fay"];
    let mut tasks = Vec::new();
    for seed in 0..std::env::var("CHURN_TASKS").map_or(8u64, |v| v.parse().unwrap()) {
        let t = conn.table(follows).unwrap();
        tasks.push(tokio::spawn(async move {
            let mut x = seed * 2654435761 + 1;
            let mut next = |n: usize| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % n as u64) as usize
            };
            for _ in 0..150 {
                let ops: Vec<BatchOp> = (0..1 + next(4))
                    .map(|_| {
                        let (a, b) = (USERS[next(6)], USERS[next(6)]);
                        let on = if next(2) == 0 { "1" } else { "0" };
                        BatchOp::Put(Put::new(format!("{a}|{b}")).add_column("f", "on", on))
                    })
                    .collect();
                for r in t.batch(ops).await.unwrap() {
                    r.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let count = |r: &RowResult, q: &str| {
        r.value("f", q).map_or(0, |v| {
            i64::from_be_bytes(<[u8; 8]>::try_from(v.as_ref()).unwrap())
        })
    };
    let mut recount: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let edges = scan_all(conn, follows).await;
    for e in edges {
        if e.value("f", "on").is_some_and(|v| v.as_ref() == b"1") {
            let edge = String::from_utf8_lossy(&e.row).into_owned();
            let (a, b) = edge.split_once('|').unwrap();
            recount.entry(b.to_string()).or_default().0 += 1;
            recount.entry(a.to_string()).or_default().1 += 1;
        }
    }
    let counted = scan_all(conn, stats).await;
    let mut got: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for r in counted {
        let c = (count(&r, "followers"), count(&r, "following"));
        if c != (0, 0) {
            got.insert(String::from_utf8_lossy(&r.row).into_owned(), c);
        }
    }
    assert_eq!(got, recount, "{follows}: counters differ from a recount");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_counter_plugin_keeps_counts_as_exact_as_the_native_observer() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, _host) = open(dir.path()).await;
    let id = conn
        .admin()
        .upload_plugin(example("counter"))
        .await
        .unwrap()
        .id;
    for (follows, stats, cp) in [
        (
            "follows_native",
            "stats_native",
            "counter-native".to_string(),
        ),
        (
            "follows_plugin",
            "stats_plugin",
            plugin_coprocessor_name(&id),
        ),
    ] {
        create(&conn, stats, "f", None).await;
        let cp = CoprocessorDescriptor::new(cp).arg("stats", stats);
        create(&conn, follows, "f", Some(cp)).await;
    }
    let native = churn(&conn, "follows_native", "stats_native").await;
    let plugin = churn(&conn, "follows_plugin", "stats_plugin").await;
    // Each is exact against its own recount (the interleavings, so the final edges, differ).
    assert!(!native.is_empty() && !plugin.is_empty());
    // A missing argument refuses the attachment.
    let err = conn
        .admin()
        .add_coprocessor(
            "stats_native",
            CoprocessorDescriptor::new(plugin_coprocessor_name(&id)),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("stats"), "{err}");
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sum_plugin_sums_as_the_built_in_aggregation() {
    let dir = tempfile::tempdir().unwrap();
    let (conn, host) = open(dir.path()).await;
    let id = conn.admin().upload_plugin(example("sum")).await.unwrap().id;
    let d = TableDescriptor::new(TableName::parse("m").unwrap())
        .family(ColumnFamilyDescriptor::new("f"));
    let splits = PreSplit::Keys(vec![b"r3".to_vec(), b"r6".to_vec()]);
    conn.admin()
        .create_table_with_splits(d, splits)
        .await
        .unwrap();
    let t = conn.table("m").unwrap();
    let mut want = 0i64;
    for i in 0..90i64 {
        let v = (i * 7919) % 1000 - 300;
        want += v;
        t.put(Put::new(format!("r{}", i % 9)).add_column("f", format!("q{i}"), v.to_be_bytes()))
            .await
            .unwrap();
        t.increment(Increment::new(format!("r{}", i % 9)).add_column("f", "n", v))
            .await
            .unwrap();
    }
    // A cell of another length is skipped by both.
    t.put(Put::new("r1").add_column("f", "x", "text"))
        .await
        .unwrap();
    let endpoints = PluginEndpoints::new(host);
    let answer = endpoints
        .call(&conn, "m", &id, KeyRange::all(), b"f:n")
        .await
        .unwrap()
        .unwrap();
    let sum = i64::from_be_bytes(answer[..8].try_into().unwrap());
    let count = u64::from_be_bytes(answer[8..].try_into().unwrap());
    let agg = AggregationClient::new(Endpoints::new(
        &conn,
        Arc::new(EndpointRegistry::with_builtins()),
    ));
    let col = Column::new("f", "n", Interpreter::I64);
    assert_eq!(
        agg.sum("m", KeyRange::all(), &col).await.unwrap(),
        Some(Number::I64(sum))
    );
    assert_eq!(sum, want);
    assert_eq!(count, 9);
    // Over part of the key space: the regions overlapping it, merged.
    let part = endpoints
        .call(&conn, "m", &id, KeyRange::new("r2", "r7"), b"f:n")
        .await
        .unwrap()
        .unwrap();
    let part_sum = i64::from_be_bytes(part[..8].try_into().unwrap());
    let agg_part = agg.sum("m", KeyRange::new("r2", "r7"), &col).await.unwrap();
    assert_eq!(agg_part, Some(Number::I64(part_sum)));
    // Compacted into one file per region: the column scanner reads it in place, and the
    // answer stays the same.
    conn.admin().flush("m").await.unwrap();
    conn.admin().major_compact("m").await.unwrap();
    let compacted = endpoints
        .call(&conn, "m", &id, KeyRange::all(), b"f:n")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(compacted, answer);
    // A bad request is the plugin's answer: an error.
    let err = endpoints
        .call(&conn, "m", &id, KeyRange::all(), b"no-colon")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("family:qualifier"), "{err}");
    conn.close().await.unwrap();
}
