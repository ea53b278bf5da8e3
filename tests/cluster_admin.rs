//! Cluster administration (issue 48, item 7): `status`, where regions are, `move` and the
//! balancer switch, through `basalt_cluster::ClusterAdmin` on three region servers in this
//! process. A move takes the region's whole table group to the named server when the
//! table is placed grouped and clients go on reading and writing it there; bad requests
//! are refused before anything is written; with the balancer off, tables gathered on one
//! server stay there until a balancing pass is asked for, and turned on again it spreads
//! them. A spread table's regions are balanced over the servers; schema changes, splits,
//! merges, flushes and compactions work on it, its batches over two servers are refused,
//! and it spreads again after each change. A region list in etcd that a split left behind
//! (its server dead before it listed the daughters) is brought in line with the catalog
//! by the server assigned the gone parent; one a create left empty (its server stopped
//! before it listed the new table's regions) by another server. A region grown past its
//! split size is split by a master procedure its server asks for.

use basalt::client::{Get, Put};
use basalt::{ColumnFamilyDescriptor, Error, PreSplit, TableDescriptor, TableName};
use basalt_cluster::{ClusterAdmin, Placement, RegionPlacement};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cluster_harness;

use cluster_harness::TestCluster;

const SETTLE: Duration = Duration::from_secs(30);

fn name(t: &str) -> TableName {
    TableName::parse(t).unwrap()
}

async fn create(
    conn: &basalt::Connection<basalt_cluster::RemoteBackend>,
    t: &str,
    splits: &[&str],
) {
    let desc = TableDescriptor::new(name(t)).family(ColumnFamilyDescriptor::new("f"));
    let split = PreSplit::Keys(splits.iter().map(|s| s.as_bytes().to_vec()).collect());
    conn.admin()
        .create_table_with_splits(desc, split)
        .await
        .unwrap();
}

/// The one server serving all of `regions` (they are a table group's).
fn one_server(regions: &[RegionPlacement]) -> String {
    let servers: BTreeSet<Option<String>> = regions.iter().map(|r| r.serving.clone()).collect();
    assert_eq!(servers.len(), 1, "{regions:?}");
    let server = regions[0].serving.clone().unwrap();
    assert!(regions.iter().all(|r| r.assigned.as_ref() == Some(&server)));
    server
}

/// Tables per serving server.
async fn groups_per_server(admin: &ClusterAdmin) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = admin
        .status()
        .await
        .unwrap()
        .servers
        .into_iter()
        .map(|s| (s.name, BTreeSet::new()))
        .collect();
    for r in admin.regions(None).await.unwrap() {
        if let Some(s) = r.serving {
            out.entry(s).or_default().insert(r.key.table.to_string());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_regions_and_moves() {
    let cluster = TestCluster::start(3).await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    // Placed whole: a move takes every region of the table.
    admin
        .set_placement(&name("orders"), Placement::Grouped)
        .await
        .unwrap();
    assert_eq!(
        admin.placement(&name("orders")).await.unwrap(),
        Placement::Grouped
    );
    create(&conn, "orders", &["h", "p"]).await;
    let t = conn.table("orders").unwrap();
    for k in ["a", "j", "x"] {
        t.put(Put::new(k).add_column("f", "q", k)).await.unwrap();
    }

    let status = admin.wait_settled(SETTLE).await.unwrap();
    assert!(status.master.is_some(), "{status:?}");
    assert_eq!(status.servers.len(), 3);
    assert_eq!(status.regions, 3);
    assert!(status.balancer_on);
    assert_eq!(
        status.servers.iter().map(|s| s.serving).sum::<usize>(),
        3,
        "{status:?}"
    );
    let regions = admin.regions(Some(&name("orders"))).await.unwrap();
    assert_eq!(regions.len(), 3);
    let starts: Vec<&[u8]> = regions.iter().map(|r| r.start.as_ref()).collect();
    assert_eq!(starts, [&b""[..], b"h", b"p"]);
    let home = one_server(&regions);

    // A move of one region takes its whole group to the named server.
    let target = status
        .servers
        .iter()
        .map(|s| s.name.clone())
        .find(|s| *s != home)
        .unwrap();
    admin
        .move_region(&name("orders"), regions[1].key.region, Some(&target))
        .await
        .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    let moved = admin.regions(Some(&name("orders"))).await.unwrap();
    assert_eq!(one_server(&moved), target);
    // Clients read what was written before and write on.
    for k in ["a", "j", "x"] {
        let row = t.get(Get::new(k)).await.unwrap();
        assert_eq!(
            row.value("f", "q").map(|v| v.to_vec()),
            Some(k.as_bytes().to_vec())
        );
    }
    t.put(Put::new("m").add_column("f", "q", "m"))
        .await
        .unwrap();

    // A move without a target goes to another server.
    admin
        .move_region(&name("orders"), moved[0].key.region, None)
        .await
        .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    let again = admin.regions(Some(&name("orders"))).await.unwrap();
    assert_ne!(one_server(&again), target);
    assert!(!t.get(Get::new("m")).await.unwrap().is_empty());

    // Bad requests are refused before anything is written.
    let here = one_server(&again);
    let e = admin
        .move_region(&name("orders"), again[0].key.region, Some(&here))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::BadArgument(m) if m.contains("already")),
        "{e:?}"
    );
    let e = admin
        .move_region(&name("orders"), 987_654, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::BadArgument(m) if m.contains("no region")),
        "{e:?}"
    );
    let e = admin
        .move_region(&name("orders"), again[0].key.region, Some("rs-99"))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::BadArgument(m) if m.contains("not a live")),
        "{e:?}"
    );
    let e = admin.regions(Some(&name("missing"))).await.unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    assert_eq!(admin.status().await.unwrap().pending_moves, 0);
    conn.close().await.unwrap();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_balancer_switch_and_a_requested_pass() {
    let cluster = TestCluster::start(3).await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    assert!(admin.balancer(false).await.unwrap(), "on by default");
    assert!(!admin.status().await.unwrap().balancer_on);
    let tables = ["t1", "t2", "t3", "t4"];
    for t in tables {
        create(&conn, t, &[]).await;
    }
    admin.wait_settled(SETTLE).await.unwrap();
    // Every group to one server by request.
    let first = admin.status().await.unwrap().servers[0].name.clone();
    for t in tables {
        let r = admin.regions(Some(&name(t))).await.unwrap();
        if r[0].assigned.as_deref() != Some(first.as_str()) {
            admin
                .move_region(&name(t), r[0].key.region, Some(&first))
                .await
                .unwrap();
        }
    }
    admin.wait_settled(SETTLE).await.unwrap();
    assert_eq!(groups_per_server(&admin).await[&first].len(), 4);
    // Off: nothing spreads them (the master reconciles every 250 ms).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(groups_per_server(&admin).await[&first].len(), 4);

    // One pass on request: one group leaves.
    admin.balance().await.unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    assert_eq!(groups_per_server(&admin).await[&first].len(), 3);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(groups_per_server(&admin).await[&first].len(), 3);

    // On again: the groups spread until servers differ by at most one.
    assert!(!admin.balancer(true).await.unwrap());
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        admin.wait_settled(SETTLE).await.unwrap();
        let counts: Vec<usize> = groups_per_server(&admin)
            .await
            .values()
            .map(|g| g.len())
            .collect();
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        if max - min <= 1 {
            assert_eq!(counts.iter().sum::<usize>(), 4);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{counts:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Data written before the moves is still there.
    for t in tables {
        let table = conn.table(t).unwrap();
        table
            .put(Put::new("r").add_column("f", "q", t))
            .await
            .unwrap();
        assert!(!table.get(Get::new("r")).await.unwrap().is_empty());
    }
    conn.close().await.unwrap();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_list_a_split_left_behind_is_brought_in_line() {
    use basalt::coord::{Coordination, RegionKey, RegionRecord};
    let cluster = TestCluster::start(2).await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    create(&conn, "events", &[]).await;
    let t = conn.table("events").unwrap();
    let keys: Vec<String> = (0..40).map(|i| format!("k{i:02}")).collect();
    for k in &keys {
        t.put(Put::new(k).add_column("f", "q", k)).await.unwrap();
    }
    admin.wait_settled(SETTLE).await.unwrap();
    let parent = admin.regions(Some(&name("events"))).await.unwrap()[0]
        .key
        .clone();
    let (lo, hi) = conn
        .admin()
        .split_region("events", parent.region, Some(b"k20"))
        .await
        .unwrap()
        .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    // The list in etcd as a server that died right after the split's catalog update left
    // it: the parent listed, the daughters not.
    let coord = basalt_cluster::EtcdCoordination::connect(cluster.etcd_config())
        .await
        .unwrap();
    for r in coord.regions(&name("events")).await.unwrap() {
        coord.remove_region(&r.key, r.revision).await.unwrap();
    }
    let whole = RegionRecord {
        key: parent.clone(),
        start: Default::default(),
        end: Default::default(),
        revision: 0,
    };
    coord.put_region(whole, None).await.unwrap();
    // A server assigned the parent finds the catalog without it and lists what the catalog
    // has; the master forgets the parent and assigns the daughters.
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let placed = admin.regions(Some(&name("events"))).await.unwrap();
        let ids: Vec<u64> = placed.iter().map(|r| r.key.region).collect();
        if ids == [lo, hi] && placed.iter().all(|r| r.serving.is_some()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{placed:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let listed: Vec<RegionKey> = coord
        .regions(&name("events"))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert!(!listed.contains(&parent), "{listed:?}");
    for k in &keys {
        let got = t.get(Get::new(k)).await.unwrap();
        assert_eq!(
            got.value("f", "q").map(|v| v.to_vec()),
            Some(k.as_bytes().to_vec())
        );
    }
    conn.close().await.unwrap();
    cluster.stop().await;
}

/// A table whose creator stopped after the catalog update and before it listed the
/// regions in etcd (the list emptied by hand, then the server stopped): nothing is
/// assigned that would show it, yet the other server finds the table out of line with
/// its list, lists its regions, and the master assigns them; every row written is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_but_never_listed_is_listed_and_served() {
    use basalt::coord::Coordination;
    let mut cluster = TestCluster::start(2).await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    admin
        .set_placement(&name("orders"), Placement::Grouped)
        .await
        .unwrap();
    create(&conn, "orders", &["h", "p"]).await;
    let t = conn.table("orders").unwrap();
    let keys: Vec<String> = (b'a'..=b'z').map(|c| format!("{}1", c as char)).collect();
    for k in &keys {
        t.put(Put::new(k).add_column("f", "q", k)).await.unwrap();
    }
    admin.wait_settled(SETTLE).await.unwrap();
    let before: Vec<_> = admin.regions(Some(&name("orders"))).await.unwrap();
    let creator = one_server(&before);
    let coord = basalt_cluster::EtcdCoordination::connect(cluster.etcd_config())
        .await
        .unwrap();
    for r in coord.regions(&name("orders")).await.unwrap() {
        coord.remove_region(&r.key, r.revision).await.unwrap();
    }
    let i: usize = creator.trim_start_matches("rs-").parse().unwrap();
    cluster.servers[i].take().unwrap().stop().await.unwrap();
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        // Listed in no region yet: the table is not found until the list is mended.
        let placed = match admin.regions(Some(&name("orders"))).await {
            Err(Error::TableNotFound(_)) => Vec::new(),
            other => other.unwrap(),
        };
        let serving: BTreeSet<Option<String>> = placed.iter().map(|r| r.serving.clone()).collect();
        if placed.len() == 3 && serving.len() == 1 && !serving.contains(&None) {
            assert!(!serving.contains(&Some(creator.clone())), "{placed:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{placed:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ids = |rs: &[RegionPlacement]| rs.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
    let after = admin.regions(Some(&name("orders"))).await.unwrap();
    assert_eq!(ids(&after), ids(&before));
    for k in &keys {
        let got = t.get(Get::new(k)).await.unwrap();
        assert_eq!(
            got.value("f", "q").map(|v| v.to_vec()),
            Some(k.as_bytes().to_vec()),
            "{k}"
        );
    }
    t.put(Put::new("z2").add_column("f", "q", "v"))
        .await
        .unwrap();
    conn.close().await.unwrap();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splits_and_merges_are_assigned_by_the_master() {
    let cluster = TestCluster::start(2).await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    admin
        .set_placement(&name("events"), Placement::Grouped)
        .await
        .unwrap();
    create(&conn, "events", &[]).await;
    let t = conn.table("events").unwrap();
    let keys: Vec<String> = (0..40).map(|i| format!("k{i:02}")).collect();
    for k in &keys {
        t.put(Put::new(k).add_column("f", "q", k)).await.unwrap();
    }
    admin.wait_settled(SETTLE).await.unwrap();
    let before = admin.regions(Some(&name("events"))).await.unwrap();
    assert_eq!(before.len(), 1);
    let home = one_server(&before);

    // A split on the table's server: the daughters replace the parent in the catalog,
    // the master assigns them where they are served and forgets the parent.
    let (lo, hi) = conn
        .admin()
        .split_region("events", before[0].key.region, Some(b"k20"))
        .await
        .unwrap()
        .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    let split = admin.regions(Some(&name("events"))).await.unwrap();
    let ids: Vec<u64> = split.iter().map(|r| r.key.region).collect();
    assert_eq!(ids, [lo, hi]);
    assert_eq!(split[1].start.as_ref(), b"k20");
    assert_eq!(one_server(&split), home);
    for k in &keys {
        assert!(!t.get(Get::new(k)).await.unwrap().is_empty(), "{k}");
    }
    t.put(Put::new("k05x").add_column("f", "q", "lo"))
        .await
        .unwrap();
    t.put(Put::new("k25x").add_column("f", "q", "hi"))
        .await
        .unwrap();

    // The daughters move together (one group) and merge on their new server.
    admin.move_region(&name("events"), lo, None).await.unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    let moved = admin.regions(Some(&name("events"))).await.unwrap();
    assert_ne!(one_server(&moved), home);
    let merged = conn.admin().merge_regions("events", lo, hi).await.unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    let after = admin.regions(Some(&name("events"))).await.unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].key.region, merged);
    assert_eq!(one_server(&after), one_server(&moved));
    for k in keys.iter().map(String::as_str).chain(["k05x", "k25x"]) {
        assert!(!t.get(Get::new(k)).await.unwrap().is_empty(), "{k}");
    }
    assert_eq!(admin.status().await.unwrap().regions, 1);
    // A dropped table's placement goes with it.
    conn.admin().disable_table("events").await.unwrap();
    conn.admin().delete_table("events").await.unwrap();
    assert_eq!(
        admin.placement(&name("events")).await.unwrap(),
        Placement::Spread
    );
    conn.close().await.unwrap();
    cluster.stop().await;
}

/// A region grown past its split size is not split by its server alone: the server asks
/// the master for a split procedure, the master sends the split back to it, and the
/// daughters are listed, assigned and served with every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_grown_past_its_split_size_is_split_by_a_master_procedure() {
    let cluster = TestCluster::start_configured(2, |cfg| {
        cfg.split_policy(basalt::SplitPolicy::ConstantSize)
            .max_region_size(100 << 10)
    })
    .await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    create(&conn, "grows", &[]).await;
    admin.wait_settled(SETTLE).await.unwrap();
    let parent = admin.regions(Some(&name("grows"))).await.unwrap()[0]
        .key
        .region;
    let t = conn.table("grows").unwrap();
    // About 150 KiB of values that do not compress: one flush makes a file past 100 KiB, of
    // three blocks (a split row is the first of the middle one), and daughters below it.
    let value = |i: u64| {
        (1..=8u64)
            .map(|j| format!("{:016x}", (i * 8 + j).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect::<String>()
    };
    for i in 0..1000u64 {
        t.put(Put::new(format!("row{i:04}")).add_column("f", "q", value(i)))
            .await
            .unwrap();
    }
    conn.admin().flush("grows").await.unwrap();
    let deadline = std::time::Instant::now() + SETTLE;
    while admin.regions(Some(&name("grows"))).await.unwrap().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the grown region was never split"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // No client waits on a server's ask: the master keeps the finished procedure a while.
    let procedures = admin.procedures().await.unwrap();
    assert!(
        procedures
            .iter()
            .any(|p| p.kind == "split_region" && p.regions == [parent] && p.state == "done"),
        "{procedures:?}"
    );
    admin.wait_settled(SETTLE).await.unwrap();
    for i in 0..1000u64 {
        let row = t.get(Get::new(format!("row{i:04}"))).await.unwrap();
        assert_eq!(
            row.value("f", "q").map(|v| v.to_vec()),
            Some(value(i).into_bytes()),
            "row{i:04}"
        );
    }
    conn.close().await.unwrap();
    cluster.stop().await;
}

/// The regions of `table` served by each server.
async fn regions_per_server(admin: &ClusterAdmin, table: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in admin.regions(Some(&name(table))).await.unwrap() {
        *out.entry(r.serving.unwrap_or_default()).or_default() += 1;
    }
    out
}

/// Waits until `table`'s regions are served by `servers` servers, as evenly as can be.
async fn wait_spread(admin: &ClusterAdmin, table: &str, servers: usize) -> BTreeMap<String, usize> {
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        admin.wait_settled(SETTLE).await.unwrap();
        let counts = regions_per_server(admin, table).await;
        let (min, max) = (counts.values().min(), counts.values().max());
        if counts.len() == servers && max.unwrap() - min.unwrap() <= 1 {
            return counts;
        }
        assert!(std::time::Instant::now() < deadline, "{counts:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spread_table_over_three_servers() {
    // Servers that load index maintainers (the local index below).
    let observers = std::sync::Arc::new(basalt::coprocessors::Registry::new());
    basalt::index::register(&observers).unwrap();
    let coprocessors = cluster_harness::Coprocessors {
        loader: observers,
        endpoints: std::sync::Arc::new(basalt::coprocessors::EndpointRegistry::with_builtins()),
    };
    let cluster = TestCluster::start_with(3, Some(coprocessors)).await;
    let conn = cluster.connect().await;
    let admin = ClusterAdmin::connect(cluster.etcd_config()).await.unwrap();
    assert_eq!(
        admin.placement(&name("events")).await.unwrap(),
        Placement::Spread
    );
    create(&conn, "events", &["d", "h", "l", "p", "t"]).await;
    let t = conn.table("events").unwrap();
    let rows: Vec<String> = (b'a'..=b'z').map(|c| format!("{}1", c as char)).collect();
    for r in &rows {
        t.put(Put::new(r).add_column("f", "q", r)).await.unwrap();
    }
    let counts = wait_spread(&admin, "events", 3).await;
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
    let read_all = |t: basalt::Table<basalt_cluster::RemoteBackend>, rows: Vec<String>| async move {
        for r in &rows {
            let got = t.get(Get::new(r)).await.unwrap();
            assert_eq!(
                got.value("f", "q").map(|v| v.to_vec()),
                Some(r.as_bytes().to_vec()),
                "{r}"
            );
        }
    };
    read_all(t.clone(), rows.clone()).await;

    // An operator's move of a spread region stands: the balancer balances the others
    // around it (the table stays 2/2/2) until a balance is requested.
    // The region with the largest key moves: without the rule it is the one balancing
    // would send back first.
    let placed = admin.regions(Some(&name("events"))).await.unwrap();
    let moved = placed.iter().max_by_key(|r| r.key.clone()).unwrap().clone();
    let to = placed
        .iter()
        .filter_map(|r| r.serving.clone())
        .find(|s| Some(s) != moved.serving.as_ref())
        .unwrap();
    admin
        .move_region(&name("events"), moved.key.region, Some(&to))
        .await
        .unwrap();
    for _ in 0..8 {
        // Several of the master's passes (every 250 ms), each one free to balance.
        admin.wait_settled(SETTLE).await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let counts = wait_spread(&admin, "events", 3).await;
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
    let now = admin.regions(Some(&name("events"))).await.unwrap();
    let there = now.iter().find(|r| r.key == moved.key).unwrap();
    assert_eq!(there.serving.as_ref(), Some(&to), "{now:?}");
    read_all(t.clone(), rows.clone()).await;

    // Flushes and compactions reach every server of the table.
    conn.admin().flush("events").await.unwrap();
    conn.admin().major_compact("events").await.unwrap();
    read_all(t.clone(), rows.clone()).await;

    // A batch over two servers is refused, and nothing of it is applied.
    let placed = admin.regions(Some(&name("events"))).await.unwrap();
    let first = &placed[0];
    let other = placed.iter().find(|r| r.serving != first.serving).unwrap();
    let (a, b) = ("a2".to_string(), format!("{}2", other.start[0] as char));
    let e = t
        .batch(vec![
            basalt::client::BatchOp::Put(Put::new(a.as_str()).add_column("f", "q", "x")),
            basalt::client::BatchOp::Put(Put::new(b.as_str()).add_column("f", "q", "x")),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::BadArgument(m) if m.contains("more than one server")),
        "{e:?}"
    );
    for r in [&a, &b] {
        assert!(t.get(Get::new(r.as_str())).await.unwrap().is_empty(), "{r}");
    }

    // A local index built on the spread table (its touches batched region by region),
    // queried over the three servers.
    let indexes = basalt::index::IndexAdmin::served(&conn);
    let def = basalt::index::IndexDef::new("by_q", "events")
        .column("f", "q")
        .local();
    indexes.create(def).await.unwrap();
    let by_q = indexes.index("events", "by_q").await.unwrap();
    let query = basalt::index::Query::eq(vec![basalt::index::val("m1")]);
    let hits = by_q.keys(&query).await.unwrap();
    assert_eq!(hits, [bytes::Bytes::from_static(b"m1")]);
    let all = by_q
        .keys(&basalt::index::Query::range(None, None))
        .await
        .unwrap();
    assert_eq!(all.len(), rows.len());
    let report = indexes.verify("events", "by_q").await.unwrap();
    assert!(report.is_consistent(), "{report:?}");
    wait_spread(&admin, "events", 3).await;

    // A schema change gathers the table on one server, then it spreads again.
    conn.admin()
        .add_column_family("events", ColumnFamilyDescriptor::new("g"))
        .await
        .unwrap();
    for r in &rows {
        t.put(Put::new(r).add_column("g", "q", r)).await.unwrap();
    }
    wait_spread(&admin, "events", 3).await;
    for r in &rows {
        let got = t.get(Get::new(r)).await.unwrap();
        assert_eq!(
            got.value("g", "q").map(|v| v.to_vec()),
            Some(r.as_bytes().to_vec()),
            "{r}"
        );
    }

    // A split on its region's server; a merge of the daughters, gathered first.
    let placed = admin.regions(Some(&name("events"))).await.unwrap();
    let (lo, hi) = conn
        .admin()
        .split_region("events", placed[0].key.region, Some(b"b"))
        .await
        .unwrap()
        .unwrap();
    admin.wait_settled(SETTLE).await.unwrap();
    assert_eq!(admin.regions(Some(&name("events"))).await.unwrap().len(), 7);
    let merged = conn.admin().merge_regions("events", lo, hi).await.unwrap();
    let counts = wait_spread(&admin, "events", 3).await;
    assert_eq!(counts.values().sum::<usize>(), 6);
    let after = admin.regions(Some(&name("events"))).await.unwrap();
    assert_eq!(after[0].key.region, merged);
    read_all(t.clone(), rows.clone()).await;

    // A snapshot, a restore and the table dropped, each gathered first.
    conn.admin()
        .snapshot("events-snap", "events")
        .await
        .unwrap();
    for r in &rows {
        t.delete(basalt::client::Delete::new(r.as_str()))
            .await
            .unwrap();
    }
    conn.admin().disable_table("events").await.unwrap();
    conn.admin().restore_snapshot("events-snap").await.unwrap();
    conn.admin().enable_table("events").await.unwrap();
    read_all(t.clone(), rows.clone()).await;
    wait_spread(&admin, "events", 3).await;
    conn.admin().disable_table("events").await.unwrap();
    conn.admin().delete_table("events").await.unwrap();
    assert!(admin.regions(Some(&name("events"))).await.is_err());
    // No hold outlives its change.
    assert!(admin.status().await.unwrap().in_transition.is_empty());
    conn.close().await.unwrap();
    cluster.stop().await;
}
