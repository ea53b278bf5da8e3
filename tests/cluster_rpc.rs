//! The cluster's client and region servers end to end: a local etcd, three region servers
//! in this process on a shared directory, and a client that finds them through etcd
//! (`basalt_cluster::connect`).
//!
//! What it shows: every kind of call crosses the RPC and comes back as the embedded engine
//! answers it (rows, counters, batches, scans over regions in both directions, typed
//! errors); a server stopped gracefully hands the store to a standby, and the client finds
//! it there with every acknowledged write.

use crate::cluster_harness as cluster;

use basalt::client::{BatchOp, BatchOutcome, Delete, Get, Increment, Put, Scan};
use basalt::{ColumnFamilyDescriptor, Error, PreSplit, TableDescriptor, TableName};
use cluster::TestCluster;
use futures::TryStreamExt;

fn orders() -> TableDescriptor {
    TableDescriptor::new(TableName::parse("orders").unwrap())
        .family(ColumnFamilyDescriptor::new("d"))
}

fn splits() -> PreSplit {
    PreSplit::Keys(vec![b"g".to_vec(), b"n".to_vec(), b"t".to_vec()])
}

async fn keys<B: basalt::Backend>(t: &basalt::client::Table<B>, scan: Scan) -> Vec<String> {
    let rows: Vec<_> = t.scan(scan).unwrap().try_collect().await.unwrap();
    rows.iter()
        .map(|r| String::from_utf8(r.row.to_vec()).unwrap())
        .collect()
}

fn rows(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{}{:03}", (b'a' + (i % 26) as u8) as char, i))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_cross_the_rpc_with_the_engines_answers() {
    let cluster = TestCluster::start(3).await;
    let conn = cluster.connect().await;
    let admin = conn.admin();
    admin
        .create_table_with_splits(orders(), splits())
        .await
        .unwrap();
    assert_eq!(admin.regions("orders").await.unwrap().len(), 4);
    let t = conn.table("orders").unwrap();
    for r in rows(200) {
        t.put(Put::new(&r).add_column("d", "v", r.as_bytes()))
            .await
            .unwrap();
    }
    let got = t.get(Get::new("c002")).await.unwrap();
    assert_eq!(&got.cells[0].value[..], b"c002");
    assert!(t.get(Get::new("zz")).await.unwrap().is_empty());

    // Scans over the four regions, both ways, with a limit that crosses them.
    let mut want = rows(200);
    want.sort();
    let all = keys(&t, Scan::new()).await;
    assert_eq!(all, want);
    let back = keys(&t, Scan::new().reversed(true).limit(150)).await;
    let mut rev = want.clone();
    rev.reverse();
    assert_eq!(back, rev[..150].to_vec());
    let mid = keys(&t, Scan::new().start_row("f").stop_row("p")).await;
    let want_mid: Vec<String> = want
        .iter()
        .filter(|r| r.as_str() >= "f" && r.as_str() < "p")
        .cloned()
        .collect();
    assert_eq!(mid, want_mid);

    // Counters, batches and deletes.
    let inc = t
        .increment(Increment::new("k1").add_column("d", "n", 5))
        .await
        .unwrap();
    assert_eq!(inc.cells[0].value.as_ref(), 5i64.to_be_bytes());
    let out = t
        .batch(vec![
            BatchOp::Put(Put::new("k2").add_column("d", "v", "x")),
            BatchOp::Get(Get::new("k1")),
            BatchOp::Put(Put::new("k3").add_column("nope", "v", "x")),
        ])
        .await
        .unwrap();
    assert!(matches!(out[0], Ok(BatchOutcome::Done)));
    assert!(matches!(&out[1], Ok(BatchOutcome::Row(r)) if !r.is_empty()));
    assert!(
        matches!(out[2], Err(Error::FamilyNotFound { .. })),
        "{:?}",
        out[2]
    );
    t.delete(Delete::new("k2")).await.unwrap();
    assert!(t.get(Get::new("k2")).await.unwrap().is_empty());

    // Typed errors come back as the engine's.
    let missing = conn.table("missing").unwrap();
    assert!(matches!(
        missing.get(Get::new("a")).await,
        Err(Error::TableNotFound(_))
    ));
    assert!(matches!(
        t.put(Put::new("a").add_column("nope", "q", "v")).await,
        Err(Error::FamilyNotFound { .. })
    ));
    assert!(matches!(
        t.put(Put::new("").add_column("d", "q", "v")).await,
        Err(Error::InvalidRow(_))
    ));
    assert!(matches!(
        admin.create_table(orders()).await,
        Err(Error::TableExists(_))
    ));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_servers_regions_move_to_a_live_server() {
    let mut cluster = TestCluster::start(2).await;
    let conn = cluster.connect().await;
    // Placed whole: one server holds every region, and stopping it moves them all.
    basalt_cluster::ClusterAdmin::connect(cluster.etcd_config())
        .await
        .unwrap()
        .set_placement(
            &basalt::TableName::parse("orders").unwrap(),
            basalt_cluster::Placement::Grouped,
        )
        .await
        .unwrap();
    conn.admin()
        .create_table_with_splits(orders(), splits())
        .await
        .unwrap();
    let t = conn.table("orders").unwrap();
    for r in rows(100) {
        t.put(Put::new(&r).add_column("d", "v", r.as_bytes()))
            .await
            .unwrap();
    }
    let coord = basalt_cluster::EtcdCoordination::connect(cluster.etcd_config())
        .await
        .unwrap();
    assert_eq!(coord.live_servers().await.unwrap().len(), 2, "both serve");
    // The master assigns the new table's regions (a table group: one server).
    let assigned = wait_for_assignments(&coord, 4).await;
    let holders: std::collections::BTreeSet<String> = assigned.values().cloned().collect();
    assert_eq!(holders.len(), 1, "{assigned:?}");
    let holder = holders.into_iter().next().unwrap();
    let i: usize = holder.trim_start_matches("rs-").parse().unwrap();
    // Stop it: the master moves its regions to the other, which opens them and serves.
    cluster.servers[i].take().unwrap().stop().await.unwrap();
    for r in rows(100) {
        let got = t.get(Get::new(&r)).await.unwrap();
        assert_eq!(got.cells[0].value.as_ref(), r.as_bytes());
    }
    t.put(Put::new("after").add_column("d", "v", "1"))
        .await
        .unwrap();
    let now = coord.live_servers().await.unwrap();
    assert_eq!(now.len(), 1);
    assert_ne!(now[0].process, holder);
    let moved = coord.assignments().await.unwrap();
    assert!(moved.values().all(|p| *p == now[0].process), "{moved:?}");
    cluster.stop().await;
}

/// The assignments once `n` regions have one, within 10 s.
async fn wait_for_assignments(
    coord: &basalt_cluster::EtcdCoordination,
    n: usize,
) -> basalt_cluster::Assignments {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let assigned = coord.assignments().await.unwrap();
        if assigned.len() >= n || std::time::Instant::now() > deadline {
            return assigned;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_names_its_server_and_wal_segment() {
    let cluster = TestCluster::start(2).await;
    let conn = cluster.connect().await;
    conn.admin()
        .create_table_with_splits(orders(), splits())
        .await
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    conn.backend()
        .observe_acknowledgements(std::sync::Arc::new(move |t, row, ack| {
            log.lock()
                .unwrap()
                .push((t.to_string(), row.to_vec(), ack.clone()));
        }));
    let t = conn.table("orders").unwrap();
    t.put(Put::new("a1").add_column("d", "v", "1"))
        .await
        .unwrap();
    t.increment(Increment::new("c").add_column("d", "n", 1))
        .await
        .unwrap();
    t.get(Get::new("a1")).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    // Two writes acknowledged (the read is not one), each by a live server whose WAL
    // writer and segment it names, the segments in acknowledgement order.
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].1, b"a1");
    assert_eq!(seen[1].1, b"c");
    let coord = basalt_cluster::EtcdCoordination::connect(cluster.etcd_config())
        .await
        .unwrap();
    let live: Vec<String> = coord
        .live_servers()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.process)
        .collect();
    for (table, _, ack) in &seen {
        assert_eq!(table, "default:orders");
        assert!(live.contains(&ack.server), "{ack:?} not in {live:?}");
        assert!(ack.writer > 0 && ack.segment > 0, "{ack:?}");
    }
    assert!(seen[1].2.segment >= seen[0].2.segment || seen[1].2.writer != seen[0].2.writer);
    cluster.stop().await;
}
