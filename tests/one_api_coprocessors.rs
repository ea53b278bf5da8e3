//! One API, two backends, for what runs on the servers (issue 48): endpoint calls and index
//! queries do not depend on what a [`Connection`] talks to. Every check is written once,
//! generic over `B: Backend`, and run with the same assertions three times:
//!
//! - `embedded`: an engine in this process, its endpoints run from the client's registry
//!   (`Endpoints::new`) and its indexes administered with the maintainers' runtime
//!   (`IndexAdmin::new`);
//! - `embedded_served`: the same engine serving its registry (`Engine::serve_endpoints`)
//!   to `Endpoints::served`, the path a region server takes for a remote call;
//! - `cluster`: three region servers loading the index coprocessors and serving the same
//!   registry, reached through etcd by `Endpoints::served` and `IndexAdmin::served`.
//!
//! What the checks prove on each: a custom endpoint answers once per region of a table
//! pre-split in four, in key order, each answer covering exactly its region's share of the
//! range; a snapshot's calls do not see later writes; an unknown service and a failing
//! region are typed errors (fail-fast and partial modes); the built-in aggregations (row
//! count, sum, min, max, mean, median) over plain and salted tables; global index queries
//! (equality, prefix, range, reverse, limit, covered columns, data rows, a snapshot) kept in
//! sync by puts and deletes, and verified against the data; local index queries merged
//! across four regions, verified too.

use basalt::client::{Backend, Delete, Put, Scan};
use basalt::coprocessors::{
    fold_partial, try_collect_ordered, AggregationClient, CallOptions, Column, Endpoint,
    EndpointRegistry, Endpoints, ErrorMode, Interpreter, KeyRange, Number, Registry,
    SaltedAggregationClient, SaltedEndpoints,
};
use basalt::endpoint::RegionView;
use basalt::index::{val, IndexAdmin, IndexDef, Query, Runtime};
use basalt::{
    ColumnFamilyDescriptor, Connection, Error, PreSplit, SaltFormat, SaltSpec, TableDescriptor,
    TableName,
};
use futures::StreamExt;
use std::ops::Bound;
use std::sync::Arc;

use crate::cluster_harness;

/// Lists the rows of a region's share of the range (a custom endpoint).
struct RowsHere;

impl Endpoint for RowsHere {
    type Request = ();
    type Response = Vec<String>;
    fn call(&self, region: &RegionView<'_>, _req: &()) -> basalt::Result<Vec<String>> {
        let mut out = Vec::new();
        for row in region.scan(&Scan::new())? {
            out.push(String::from_utf8_lossy(&row?.row).into_owned());
        }
        Ok(out)
    }
}

/// Fails in a region holding a row that starts with the request's prefix.
struct FailsWhere;

impl Endpoint for FailsWhere {
    type Request = String;
    type Response = u64;
    fn call(&self, region: &RegionView<'_>, prefix: &String) -> basalt::Result<u64> {
        let mut n = 0;
        for row in region.scan(&Scan::new())? {
            if row?.row.starts_with(prefix.as_bytes()) {
                return Err(Error::bad_argument(format!("a row starts with {prefix}")));
            }
            n += 1;
        }
        Ok(n)
    }
}

/// The registries every instantiation uses: index coprocessors and endpoints.
fn registries() -> (Arc<Registry>, Arc<Runtime>, Arc<EndpointRegistry>) {
    let observers = Arc::new(Registry::new());
    let runtime = basalt::index::register(&observers).unwrap();
    let endpoints = Arc::new(EndpointRegistry::with_builtins());
    endpoints.register_system("rows_here", RowsHere).unwrap();
    endpoints
        .register_system("fails_where", FailsWhere)
        .unwrap();
    (observers, runtime, endpoints)
}

/// What a check is given besides its connection.
struct Kit<B: Backend> {
    endpoints: Endpoints<B>,
    indexes: IndexAdmin<B>,
}

macro_rules! on_every_backend {
    ($($check:ident),* $(,)?) => {
        /// Functions run from the client's registry, on an engine in this process.
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let dir = tempfile::tempdir().unwrap();
                    let (observers, runtime, endpoints) = super::registries();
                    let config = basalt::Config::new(dir.path()).coprocessor_loader(observers);
                    let conn = basalt::Connection::open_with(config).await.unwrap();
                    let kit = super::Kit {
                        endpoints: basalt::coprocessors::Endpoints::new(&conn, endpoints),
                        indexes: basalt::index::IndexAdmin::new(&conn, runtime),
                    };
                    super::$check(&conn, &kit, stringify!($check)).await;
                    conn.close().await.unwrap();
                }
            )*
        }

        /// The engine serving its registry, called through the backend seam.
        mod embedded_served {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let dir = tempfile::tempdir().unwrap();
                    let (observers, _runtime, endpoints) = super::registries();
                    let config = basalt::Config::new(dir.path()).coprocessor_loader(observers);
                    let conn = basalt::Connection::open_with(config).await.unwrap();
                    conn.engine().serve_endpoints(endpoints);
                    let kit = super::Kit {
                        endpoints: basalt::coprocessors::Endpoints::served(&conn),
                        indexes: basalt::index::IndexAdmin::served(&conn),
                    };
                    super::$check(&conn, &kit, stringify!($check)).await;
                    conn.close().await.unwrap();
                }
            )*
        }

        /// Three region servers loading the same registries.
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let (observers, _runtime, endpoints) = super::registries();
                    let coprocessors = super::cluster_harness::Coprocessors {
                        loader: observers,
                        endpoints,
                    };
                    let cluster =
                        super::cluster_harness::TestCluster::start_with(3, Some(coprocessors))
                            .await;
                    let conn = cluster.connect().await;
                    let kit = super::Kit {
                        endpoints: basalt::coprocessors::Endpoints::served(&conn),
                        indexes: basalt::index::IndexAdmin::served(&conn),
                    };
                    super::$check(&conn, &kit, stringify!($check)).await;
                    conn.close().await.unwrap();
                }
            )*
        }
    };
}

on_every_backend!(
    custom_endpoint_per_region,
    endpoint_errors,
    aggregation_builtins,
    salted_aggregation,
    global_index_queries,
    local_index_queries,
);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Table `name` with family `f`, pre-split at `b`, `c` and `d` (four regions).
async fn four_regions<B: Backend>(conn: &Connection<B>, name: &str) {
    let desc = TableDescriptor::new(TableName::parse(name).unwrap())
        .family(ColumnFamilyDescriptor::new("f"));
    let split = PreSplit::Keys(vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
    conn.admin()
        .create_table_with_splits(desc, split)
        .await
        .unwrap();
}

async fn put_values<B: Backend>(conn: &Connection<B>, name: &str, rows: &[(&str, i64)]) {
    let t = conn.table(name).unwrap();
    for (row, n) in rows {
        t.put(Put::new(row).add_column("f", "n", n.to_be_bytes()))
            .await
            .unwrap();
    }
}

fn bound(b: &Bound<bytes::Bytes>) -> Bound<String> {
    match b {
        Bound::Included(k) => Bound::Included(String::from_utf8_lossy(k).into_owned()),
        Bound::Excluded(k) => Bound::Excluded(String::from_utf8_lossy(k).into_owned()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn inc(k: &str) -> Bound<String> {
    Bound::Included(k.to_string())
}

fn exc(k: &str) -> Bound<String> {
    Bound::Excluded(k.to_string())
}

fn strings(keys: &[bytes::Bytes]) -> Vec<String> {
    keys.iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------
// Endpoints
// ---------------------------------------------------------------------------------------

/// A custom endpoint answers once per region, in key order, each answer covering its
/// region's share of the range; a snapshot's calls do not see later writes.
async fn custom_endpoint_per_region<B: Backend>(conn: &Connection<B>, kit: &Kit<B>, name: &str) {
    four_regions(conn, name).await;
    let rows = [
        ("a1", 1),
        ("a2", 2),
        ("b1", 3),
        ("c1", 4),
        ("c2", 5),
        ("c3", 6),
        ("d1", 7),
    ];
    put_values(conn, name, &rows).await;
    let ordered = kit
        .endpoints
        .clone()
        .with_options(CallOptions::default().ordered(true));

    let all = ordered
        .coprocessor_service::<RowsHere>(name, "rows_here", KeyRange::all(), &())
        .unwrap();
    let answers = try_collect_ordered(all).await.unwrap();
    let starts: Vec<String> = answers
        .iter()
        .map(|(s, _)| String::from_utf8_lossy(&s.region_start).into_owned())
        .collect();
    assert_eq!(starts, ["", "b", "c", "d"]);
    let per_region: Vec<Vec<String>> = answers.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(
        per_region,
        vec![
            vec!["a1", "a2"],
            vec!["b1"],
            vec!["c1", "c2", "c3"],
            vec!["d1"]
        ]
    );
    let ids: Vec<u64> = answers.iter().map(|(s, _)| s.region_id).collect();
    let regions: Vec<u64> = conn
        .admin()
        .regions(name)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, regions, "each answer names its region");

    // A sub-range: only the regions it overlaps, each clipped to its share.
    let part = ordered
        .coprocessor_service::<RowsHere>(name, "rows_here", KeyRange::new("a2", "c2"), &())
        .unwrap();
    let answers = try_collect_ordered(part).await.unwrap();
    let shares: Vec<(Bound<String>, Bound<String>)> = answers
        .iter()
        .map(|(s, _)| (bound(&s.range.lo), bound(&s.range.hi)))
        .collect();
    assert_eq!(
        shares,
        [
            (inc("a2"), exc("b")),
            (inc("b"), exc("c")),
            (inc("c"), exc("c2"))
        ]
    );
    let found: Vec<String> = answers.into_iter().flat_map(|(_, r)| r).collect();
    assert_eq!(found, ["a2", "b1", "c1"]);

    // A snapshot: later writes are not seen through it, a new call sees them.
    let snap = ordered.snapshot(name).unwrap();
    put_values(conn, name, &[("e1", 8), ("a0", 9)]).await;
    let old = snap
        .coprocessor_service::<RowsHere>("rows_here", KeyRange::all(), &())
        .unwrap();
    let old: Vec<String> = try_collect_ordered(old)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|(_, r)| r)
        .collect();
    assert_eq!(old, ["a1", "a2", "b1", "c1", "c2", "c3", "d1"]);
    let now = ordered
        .coprocessor_service::<RowsHere>(name, "rows_here", KeyRange::all(), &())
        .unwrap();
    let now: Vec<String> = try_collect_ordered(now)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|(_, r)| r)
        .collect();
    assert_eq!(now, ["a0", "a1", "a2", "b1", "c1", "c2", "c3", "d1", "e1"]);
}

/// The first error of a call: refused before streaming, or its first failed answer.
async fn call_error<B: Backend>(
    endpoints: &Endpoints<B>,
    table: &str,
    service: &str,
    prefix: &str,
) -> Error {
    let stream = match endpoints.coprocessor_service::<FailsWhere>(
        table,
        service,
        KeyRange::all(),
        &prefix.to_string(),
    ) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let answers: Vec<_> = stream.collect().await;
    answers
        .into_iter()
        .find_map(|a| a.result.err())
        .expect("the call fails")
}

/// An unknown service, an unknown table and a failing region are typed errors; a partial
/// call answers every other region.
async fn endpoint_errors<B: Backend>(conn: &Connection<B>, kit: &Kit<B>, name: &str) {
    four_regions(conn, name).await;
    put_values(
        conn,
        name,
        &[("a1", 1), ("b1", 2), ("c1", 3), ("c2", 4), ("d1", 5)],
    )
    .await;

    let e = call_error(&kit.endpoints, name, "no_such_service", "x").await;
    assert!(
        matches!(&e, Error::Coprocessor { name, .. } if name == "no_such_service"),
        "{e:?}"
    );
    let e = match kit.endpoints.snapshot(format!("{name}_missing")) {
        Err(e) => e,
        Ok(_) => panic!("a snapshot of a missing table"),
    };
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");

    // Fail-fast: the region holding a `c` row fails the call with the endpoint's error.
    let e = call_error(&kit.endpoints, name, "fails_where", "c").await;
    assert!(
        matches!(&e, Error::BadArgument(m) if m.contains("a row starts with c")),
        "{e:?}"
    );

    // Partial: every other region answers.
    let partial = kit
        .endpoints
        .clone()
        .with_options(CallOptions::default().mode(ErrorMode::Partial));
    let stream = partial
        .coprocessor_service::<FailsWhere>(name, "fails_where", KeyRange::all(), &"c".to_string())
        .unwrap();
    let folded = fold_partial(stream, 0u64, |a, n| a + n).await;
    assert_eq!(folded.value, 3, "rows of the regions that answered");
    assert_eq!(folded.errors.len(), 1);
    assert_eq!(folded.errors[0].0.region_start.as_ref(), b"c");
}

/// The built-in aggregations over a table in four regions.
async fn aggregation_builtins<B: Backend>(conn: &Connection<B>, kit: &Kit<B>, name: &str) {
    four_regions(conn, name).await;
    let rows: Vec<(String, i64)> = (0..40)
        .map(|i| {
            (
                format!("{}{i:02}", ["a", "b", "c", "d"][i % 4]),
                i as i64 * 3 - 20,
            )
        })
        .collect();
    let refs: Vec<(&str, i64)> = rows.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    put_values(conn, name, &refs).await;
    let agg = AggregationClient::new(kit.endpoints.clone());
    let col = Column::new("f", "n", Interpreter::I64);
    let values: Vec<i64> = rows.iter().map(|(_, n)| *n).collect();
    let sum: i64 = values.iter().sum();
    assert_eq!(
        agg.row_count(name, KeyRange::all(), &col).await.unwrap(),
        40
    );
    assert_eq!(agg.fast_row_count(name, KeyRange::all()).await.unwrap(), 40);
    assert_eq!(
        agg.sum(name, KeyRange::all(), &col).await.unwrap(),
        Some(Number::I64(sum))
    );
    assert_eq!(
        agg.min(name, KeyRange::all(), &col).await.unwrap(),
        Some(Number::I64(-20))
    );
    assert_eq!(
        agg.max(name, KeyRange::all(), &col).await.unwrap(),
        Some(Number::I64(97))
    );
    let avg = agg.avg(name, KeyRange::all(), &col).await.unwrap().unwrap();
    assert!((avg - sum as f64 / 40.0).abs() < 1e-9, "{avg}");
    let mut sorted = values.clone();
    sorted.sort();
    assert_eq!(
        agg.median(name, KeyRange::all(), &col).await.unwrap(),
        Some(Number::I64(sorted[(sorted.len() - 1) / 2]))
    );
    // A range: the rows of regions `b` and `c` only.
    let bc: i64 = rows
        .iter()
        .filter(|(k, _)| k.starts_with('b') || k.starts_with('c'))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        agg.sum(name, KeyRange::new("b", "d"), &col).await.unwrap(),
        Some(Number::I64(bc))
    );
}

/// The built-in aggregations over a salted table's logical key ranges.
async fn salted_aggregation<B: Backend>(conn: &Connection<B>, kit: &Kit<B>, name: &str) {
    let spec = SaltSpec::new(4).format(SaltFormat::Decimal);
    let desc = TableDescriptor::new(TableName::parse(name).unwrap())
        .family(ColumnFamilyDescriptor::new("f"))
        .salt(spec);
    conn.admin().create_table(desc).await.unwrap();
    let t = conn.salted_table(name).unwrap();
    for i in 0..30i64 {
        t.put(Put::new(format!("k{i:02}")).add_column("f", "n", i.to_be_bytes()))
            .await
            .unwrap();
    }
    let salted = SaltedEndpoints::new(&kit.endpoints, &t);
    let agg = SaltedAggregationClient::new(salted);
    let col = Column::new("f", "n", Interpreter::I64);
    assert_eq!(agg.fast_row_count(KeyRange::all()).await.unwrap(), 30);
    assert_eq!(
        agg.sum(KeyRange::all(), &col).await.unwrap(),
        Some(Number::I64((0..30).sum()))
    );
    // Logical range k10..k20.
    assert_eq!(
        agg.sum(KeyRange::new("k10", "k20"), &col).await.unwrap(),
        Some(Number::I64((10..20).sum()))
    );
    assert_eq!(
        agg.row_count(KeyRange::prefix("k2"), &col).await.unwrap(),
        10
    );
}

// ---------------------------------------------------------------------------------------
// Indexes
// ---------------------------------------------------------------------------------------

/// Users with a city and an age.
const USERS: [(&str, &str, &str); 6] = [
    ("ada", "Paris", "36"),
    ("bob", "Lyon", "41"),
    ("cy", "Paris", "29"),
    ("dee", "Nice", "33"),
    ("eve", "Paris", "52"),
    ("fay", "Lyon", "25"),
];

async fn put_users<B: Backend>(conn: &Connection<B>, name: &str) {
    let t = conn.table(name).unwrap();
    for (row, city, age) in USERS {
        t.put(
            Put::new(row)
                .add_column("f", "city", city)
                .add_column("f", "age", age),
        )
        .await
        .unwrap();
    }
}

/// Global index queries, kept in sync by writes, verified against the data.
async fn global_index_queries<B: Backend>(conn: &Connection<B>, kit: &Kit<B>, name: &str) {
    four_regions(conn, name).await;
    put_users(conn, name).await;
    let def = IndexDef::new("by_city", name)
        .column("f", "city")
        .cover("f", "age");
    kit.indexes.create(def).await.unwrap();
    let listed: Vec<String> = kit
        .indexes
        .list(name)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(listed, ["by_city"]);
    let by_city = kit.indexes.index(name, "by_city").await.unwrap();

    let paris = by_city.keys(&Query::eq(vec![val("Paris")])).await.unwrap();
    assert_eq!(strings(&paris), ["ada", "cy", "eve"]);
    let hits = by_city.hits(&Query::eq(vec![val("Lyon")])).await.unwrap();
    let ages: Vec<String> = hits
        .iter()
        .map(|h| {
            let age = h
                .covered
                .get(&(bytes::Bytes::from("f"), bytes::Bytes::from("age")))
                .unwrap();
            format!(
                "{}={}",
                String::from_utf8_lossy(&h.row),
                String::from_utf8_lossy(age)
            )
        })
        .collect();
    assert_eq!(ages, ["bob=41", "fay=25"]);
    let range = by_city
        .keys(&Query::range(
            Some(vec![val("Lyon")]),
            Some(vec![val("Paris")]),
        ))
        .await
        .unwrap();
    assert_eq!(strings(&range), ["bob", "fay", "dee"]);
    let last_two = by_city
        .keys(&Query::range(None, None).reverse().limit(2))
        .await
        .unwrap();
    assert_eq!(strings(&last_two), ["eve", "cy"]);
    let rows = by_city.rows(&Query::eq(vec![val("Nice")])).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].row.as_ref(), b"dee");

    // Writes keep it in sync; a snapshot taken before them does not see them.
    let before = conn.table(name).unwrap().snapshot().unwrap();
    let t = conn.table(name).unwrap();
    t.put(Put::new("cy").add_column("f", "city", "Lyon"))
        .await
        .unwrap();
    t.delete(Delete::new("eve")).await.unwrap();
    t.put(Put::new("gus").add_column("f", "city", "Paris"))
        .await
        .unwrap();
    let paris = by_city.keys(&Query::eq(vec![val("Paris")])).await.unwrap();
    assert_eq!(strings(&paris), ["ada", "gus"]);
    let lyon = by_city.keys(&Query::eq(vec![val("Lyon")])).await.unwrap();
    assert_eq!(strings(&lyon), ["bob", "cy", "fay"]);
    let then = by_city
        .keys(&Query::eq(vec![val("Paris")]).at(&before))
        .await
        .unwrap();
    assert_eq!(strings(&then), ["ada", "cy", "eve"]);

    let report = kit.indexes.verify(name, "by_city").await.unwrap();
    assert!(report.is_consistent(), "{report:?}");
    assert_eq!(report.data_rows, 6);
    assert_eq!(report.index_rows, 6);
}

/// A local index on a table in four regions: one query merges every region's rows in
/// index order.
async fn local_index_queries<B: Backend>(conn: &Connection<B>, kit: &Kit<B>, name: &str) {
    four_regions(conn, name).await;
    put_users(conn, name).await;
    let def = IndexDef::new("by_city", name).column("f", "city").local();
    kit.indexes.create(def).await.unwrap();
    let by_city = kit.indexes.index(name, "by_city").await.unwrap();

    let paris = by_city.keys(&Query::eq(vec![val("Paris")])).await.unwrap();
    assert_eq!(strings(&paris), ["ada", "cy", "eve"]);
    let all = by_city.keys(&Query::range(None, None)).await.unwrap();
    assert_eq!(strings(&all), ["bob", "fay", "dee", "ada", "cy", "eve"]);
    let last = by_city
        .keys(&Query::range(None, None).reverse().limit(3))
        .await
        .unwrap();
    assert_eq!(strings(&last), ["eve", "cy", "ada"]);

    let t = conn.table(name).unwrap();
    t.put(Put::new("dee").add_column("f", "city", "Paris"))
        .await
        .unwrap();
    t.delete(Delete::new("ada")).await.unwrap();
    let paris = by_city.keys(&Query::eq(vec![val("Paris")])).await.unwrap();
    assert_eq!(strings(&paris), ["cy", "dee", "eve"]);

    let report = kit.indexes.verify(name, "by_city").await.unwrap();
    assert!(report.is_consistent(), "{report:?}");
    assert_eq!(report.index_rows, 5);
}
