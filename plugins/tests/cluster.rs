//! Coprocessors on a cluster's region servers (issue 48, item 6).
//!
//! A sandboxed plugin uploaded through a remote client is stored once (the shared store and
//! the catalog in etcd) and runs on whichever server serves its table: its table group is
//! moved from one server to the other and back, and every batch is counted once, before
//! and after a hot swap to a second version made through the client.
//!
//! A table with a native Rust coprocessor is writable on a server started from the
//! application's own binary (its registry has the coprocessor) and read-only on a stock
//! server (reads work, writes fail with `ReadOnlyTable` naming the coprocessor), as the
//! shell opens it; moved back, it is writable again.

use crate::common;

#[path = "../../tests/common/cluster.rs"]
mod cluster_harness;

use basalt::client::{Get, Put};
use basalt::coprocessors::{EndpointRegistry, RegionObserver, Registry};
use basalt::{
    plugin_coprocessor_name, ColumnFamilyDescriptor, Connection, CoprocessorDescriptor, Error,
    TableDescriptor, TableName,
};
use basalt_cluster::{ClusterAdmin, RemoteBackend};
use basalt_plugins::{PluginHost, PluginLimits};
use cluster_harness::{Coprocessors, TestCluster};
use common::counter;
use std::sync::Arc;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(30);

fn count(r: &basalt::client::RowResult, q: &str) -> i64 {
    r.value("f", q).map_or(0, |v| {
        i64::from_be_bytes(<[u8; 8]>::try_from(v.as_ref()).unwrap())
    })
}

/// Moves the table group of `table` to the live server that does not serve it now, and
/// waits until it is served there; returns that server.
async fn move_elsewhere(admin: &ClusterAdmin, table: &str) -> String {
    let regions = admin
        .regions(Some(&TableName::parse(table).unwrap()))
        .await
        .unwrap();
    let here = regions[0].serving.clone().unwrap();
    let to = admin
        .status()
        .await
        .unwrap()
        .servers
        .into_iter()
        .map(|s| s.name)
        .find(|s| *s != here)
        .unwrap();
    admin
        .move_region(&regions[0].key.table, regions[0].key.region, Some(&to))
        .await
        .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    let now = admin
        .regions(Some(&TableName::parse(table).unwrap()))
        .await
        .unwrap();
    assert!(now
        .iter()
        .all(|r| r.serving.as_deref() == Some(to.as_str())));
    to
}

async fn write(conn: &Connection<RemoteBackend>, table: &str, rows: std::ops::Range<u32>) {
    let t = conn.table(table).unwrap();
    for i in rows {
        t.put(Put::new(format!("r{i:03}")).add_column("f", "q", "x"))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plugin_runs_wherever_its_table_is_served_and_swaps_through_the_client() {
    let registry = Arc::new(Registry::new());
    registry.set_plugin_runtime(PluginHost::new(PluginLimits::default()).unwrap());
    let coprocessors = Coprocessors {
        loader: registry,
        endpoints: Arc::new(EndpointRegistry::new()),
    };
    let cluster = TestCluster::start_with(2, Some(coprocessors)).await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    let a = conn.admin();
    let v1 = a.upload_plugin(counter("v1").component()).await.unwrap().id;
    let v2 = a.upload_plugin(counter("v2").component()).await.unwrap().id;
    let listed: Vec<String> = a
        .list_plugins()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert!(listed.contains(&v1) && listed.contains(&v2), "{listed:?}");
    let (n1, n2) = (plugin_coprocessor_name(&v1), plugin_coprocessor_name(&v2));
    // The plugin counts into table `stats`; the written table is in its group (named
    // `stats.idx.*`), so both are served by one server and the count commits with the
    // batch.
    a.create_table(
        TableDescriptor::new(TableName::parse("stats").unwrap())
            .family(ColumnFamilyDescriptor::new("f")),
    )
    .await
    .unwrap();
    a.create_table(
        TableDescriptor::new(TableName::parse("stats.idx.w").unwrap())
            .family(ColumnFamilyDescriptor::new("f"))
            .coprocessor(CoprocessorDescriptor::new(&n1)),
    )
    .await
    .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    let stats = conn.table("stats").unwrap();

    write(&conn, "stats.idx.w", 0..5).await;
    assert_eq!(count(&stats.get(Get::new("n")).await.unwrap(), "v1"), 5);
    let first = move_elsewhere(&admin, "stats.idx.w").await;
    // The other server loaded the plugin from the shared store.
    write(&conn, "stats.idx.w", 5..12).await;
    assert_eq!(count(&stats.get(Get::new("n")).await.unwrap(), "v1"), 12);

    // A hot swap through the client, then back to the first server.
    a.swap_coprocessor("stats.idx.w", &n1, CoprocessorDescriptor::new(&n2))
        .await
        .unwrap();
    write(&conn, "stats.idx.w", 12..15).await;
    let second = move_elsewhere(&admin, "stats.idx.w").await;
    assert_ne!(first, second);
    write(&conn, "stats.idx.w", 15..17).await;
    let n = stats.get(Get::new("n")).await.unwrap();
    assert_eq!((count(&n, "v1"), count(&n, "v2")), (12, 5));
    let desc = a.describe_table("stats.idx.w").await.unwrap();
    let names: Vec<&str> = desc.coprocessors.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, [n2.as_str()]);
    conn.close().await.unwrap();
    cluster.stop().await;
}

/// An application's own observer (does nothing: what matters is who has it).
struct AmountRule;
impl RegionObserver for AmountRule {}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_native_coprocessor_is_writable_on_its_binary_and_read_only_on_a_stock_server() {
    let mut cluster = TestCluster::start_with(0, None).await;
    let application = Arc::new(Registry::new());
    application
        .register("amount-rule", |_| {
            Ok(Arc::new(AmountRule) as Arc<dyn RegionObserver>)
        })
        .unwrap();
    let stock = Arc::new(Registry::new().read_only_when_missing());
    for (i, loader) in [application, stock].into_iter().enumerate() {
        let c = Coprocessors {
            loader,
            endpoints: Arc::new(EndpointRegistry::new()),
        };
        let server = cluster.start_server_with(i, Some(c)).await;
        cluster.servers.push(Some(server));
    }
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("orders").unwrap())
                .family(ColumnFamilyDescriptor::new("f"))
                .coprocessor(CoprocessorDescriptor::new("amount-rule")),
        )
        .await
        .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    // On the application's server (rs-0) first.
    let placed = admin
        .regions(Some(&TableName::parse("orders").unwrap()))
        .await
        .unwrap();
    if placed[0].serving.as_deref() != Some("rs-0") {
        move_elsewhere(&admin, "orders").await;
    }
    write(&conn, "orders", 0..3).await;

    assert_eq!(move_elsewhere(&admin, "orders").await, "rs-1");
    let t = conn.table("orders").unwrap();
    assert!(!t.get(Get::new("r001")).await.unwrap().is_empty());
    let e = t
        .put(Put::new("r100").add_column("f", "q", "x"))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::ReadOnlyTable { missing, .. } if missing.iter().any(|m| m == "amount-rule")),
        "{e:?}"
    );

    assert_eq!(move_elsewhere(&admin, "orders").await, "rs-0");
    write(&conn, "orders", 3..5).await;
    assert!(!t.get(Get::new("r004")).await.unwrap().is_empty());
    assert!(t.get(Get::new("r100")).await.unwrap().is_empty());
    conn.close().await.unwrap();
    cluster.stop().await;
}
