//! The engine's ownership of its regions in a coordination store: an engine holds a lease
//! and owns every region it serves (at open, table creation, split and merge), releases
//! them at close, table drop, split and merge, and keeps the store's region catalog equal
//! to its own list of regions; it cannot open while another live process
//! owns one of its regions; an engine whose lease ended refuses writes; a region changing
//! owner gets a new generation.

use basalt::client::{Get, Put};
use basalt::coord::{Coordination, ManualClock, MemoryCoordination, RegionKey};
use basalt::{ColumnFamilyDescriptor, Config, Connection, Error, TableDescriptor, TableName};
use std::sync::Arc;
use std::time::Duration;

fn tn(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

struct Shared {
    clock: Arc<ManualClock>,
    coord: Arc<MemoryCoordination>,
}

impl Shared {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::default());
        let coord = Arc::new(MemoryCoordination::new(clock.clone()));
        Shared { clock, coord }
    }

    fn config(&self, dir: &std::path::Path, ttl_ms: u64) -> Config {
        Config::new(dir)
            .coordination(self.coord.clone())
            .process_name("rs-a")
            .lease_ttl_ms(ttl_ms)
    }

    async fn owner(&self, table: &str, region: u64) -> Option<(String, u64)> {
        self.coord
            .owner(&RegionKey::new(tn(table), region))
            .await
            .unwrap()
            .filter(|o| o.alive)
            .map(|o| (o.process, o.generation))
    }
}

/// The store's catalog of `table` is the engine's list of its regions: ids and bounds.
async fn catalog_matches(s: &Shared, conn: &Connection, table: &str) {
    let stored: Vec<(u64, Vec<u8>, Vec<u8>)> = s
        .coord
        .regions(&tn(table))
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.key.region, r.start.to_vec(), r.end.to_vec()))
        .collect();
    let served: Vec<(u64, Vec<u8>, Vec<u8>)> = conn
        .admin()
        .regions(table)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.start_key.to_vec(), r.end_key.to_vec()))
        .collect();
    assert_eq!(stored, served, "catalog of {table}");
}

/// How many cells row `row` of `table` has.
async fn cells(conn: &Connection, table: &str, row: &str) -> usize {
    let t = conn.table(table).unwrap();
    t.get(Get::new(row)).await.unwrap().cells.len()
}

async fn region_ids(conn: &Connection, table: &str) -> Vec<u64> {
    conn.admin()
        .regions(table)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect()
}

async fn create(conn: &Connection, table: &str) {
    conn.admin()
        .create_table(TableDescriptor::new(tn(table)).family(ColumnFamilyDescriptor::new("f")))
        .await
        .unwrap();
}

/// Regions are owned from creation to drop, follow splits and merges, are released at close
/// and owned again (one generation later) at the next open.
#[tokio::test]
async fn regions_are_owned_while_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = Shared::new();
    let conn = Connection::open_with(s.config(dir.path(), 60_000))
        .await
        .unwrap();
    create(&conn, "t").await;
    create(&conn, "gone").await;
    let [r1] = region_ids(&conn, "t").await[..] else {
        panic!("one region")
    };
    assert_eq!(s.owner("t", r1).await, Some(("rs-a".into(), 1)));
    let [g1] = region_ids(&conn, "gone").await[..] else {
        panic!("one region")
    };
    catalog_matches(&s, &conn, "t").await;
    catalog_matches(&s, &conn, "gone").await;
    conn.admin().disable_table("gone").await.unwrap();
    conn.admin().delete_table("gone").await.unwrap();
    assert_eq!(s.owner("gone", g1).await, None);
    assert!(s.coord.regions(&tn("gone")).await.unwrap().is_empty());

    let t = conn.table("t").unwrap();
    for i in 0..20 {
        t.put(Put::new(format!("r{i:02}")).add_column("f", "v", "x"))
            .await
            .unwrap();
    }
    let (lo, hi) = conn
        .admin()
        .split_region("t", r1, Some(b"r10"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.owner("t", r1).await, None);
    assert_eq!(s.owner("t", lo).await, Some(("rs-a".into(), 1)));
    assert_eq!(s.owner("t", hi).await, Some(("rs-a".into(), 1)));
    catalog_matches(&s, &conn, "t").await;
    let merged = conn.admin().merge_regions("t", lo, hi).await.unwrap();
    assert_eq!(
        (s.owner("t", lo).await, s.owner("t", hi).await),
        (None, None)
    );
    assert_eq!(s.owner("t", merged).await, Some(("rs-a".into(), 1)));
    catalog_matches(&s, &conn, "t").await;

    conn.close().await.unwrap();
    assert_eq!(s.owner("t", merged).await, None);
    let conn = Connection::open_with(s.config(dir.path(), 60_000))
        .await
        .unwrap();
    assert_eq!(s.owner("t", merged).await, Some(("rs-a".into(), 2)));
    // The catalog outlives ownership: the reopened engine found it as it left it.
    catalog_matches(&s, &conn, "t").await;
    let lease = s.coord.grant_lease("rs-a", Duration::from_secs(1)).await;
    // The reopened engine's lease was the process's second; this one is the third.
    assert_eq!(lease.unwrap().node_generation, 3);
    assert_eq!(cells(&conn, "t", "r05").await, 1);
    conn.close().await.unwrap();
}

/// While another live process owns one of its regions, the engine does not open (and
/// leaves its directory free to open later); once that owner is gone it opens, at the next
/// generation.
#[tokio::test]
async fn another_live_owner_keeps_the_engine_closed() {
    let dir = tempfile::tempdir().unwrap();
    let s = Shared::new();
    let conn = Connection::open_with(s.config(dir.path(), 60_000))
        .await
        .unwrap();
    create(&conn, "t").await;
    let [r] = region_ids(&conn, "t").await[..] else {
        panic!("one region")
    };
    let other = s
        .coord
        .grant_lease("rs-b", Duration::from_secs(60))
        .await
        .unwrap();
    // Served here: the other process cannot take it.
    assert!(matches!(
        s.coord.claim_region(&RegionKey::new(tn("t"), r), other.id).await,
        Err(Error::RegionOwned { ref owner, .. }) if owner == "rs-a"
    ));
    conn.close().await.unwrap();
    assert_eq!(
        s.coord
            .claim_region(&RegionKey::new(tn("t"), r), other.id)
            .await
            .unwrap(),
        2
    );
    let err = Connection::open_with(s.config(dir.path(), 60_000))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::RegionOwned { owner, .. } if owner == "rs-b"),
        "{err}"
    );
    s.coord.revoke_lease(other.id).await.unwrap();
    let conn = Connection::open_with(s.config(dir.path(), 60_000))
        .await
        .unwrap();
    assert_eq!(s.owner("t", r).await, Some(("rs-a".into(), 3)));
    conn.close().await.unwrap();
}

/// An engine whose lease ended (it could not renew in time) refuses writes, and another
/// process can take its regions over at a new generation; reopening works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_whose_lease_ended_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let s = Shared::new();
    // Renewed every 100 ms of real time, by a clock that only the test moves.
    let conn = Connection::open_with(s.config(dir.path(), 300))
        .await
        .unwrap();
    create(&conn, "t").await;
    let t = conn.table("t").unwrap();
    t.put(Put::new("before").add_column("f", "v", "x"))
        .await
        .unwrap();
    let [r] = region_ids(&conn, "t").await[..] else {
        panic!("one region")
    };
    // The process stalls past its lease: no renewal happened within 300 ms of its clock.
    s.clock.advance(Duration::from_secs(10));
    let mut refused = false;
    // Up to ten seconds: a loaded machine may run the renewal late.
    for _ in 0..500 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        match t.put(Put::new("after").add_column("f", "v", "x")).await {
            Err(Error::WritesRefused(reason)) => {
                assert!(reason.contains("lease"), "{reason}");
                refused = true;
                break;
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(()) => {}
        }
    }
    assert!(
        refused,
        "writes still accepted two seconds after the lease ended"
    );
    let other = s
        .coord
        .grant_lease("rs-b", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        s.coord
            .claim_region(&RegionKey::new(tn("t"), r), other.id)
            .await
            .unwrap(),
        2
    );
    // Reads go on; a close, which would flush, fails as every write does (the engine stays
    // open), and dropping the connection frees the directory, as after a WAL failure.
    assert_eq!(t.get(Get::new("before")).await.unwrap().cells.len(), 1);
    assert!(conn.close().await.is_err());
    drop(t);
    drop(conn);
    s.coord.revoke_lease(other.id).await.unwrap();
    let conn = Connection::open_with(s.config(dir.path(), 60_000))
        .await
        .unwrap();
    let t = conn.table("t").unwrap();
    assert_eq!(t.get(Get::new("before")).await.unwrap().cells.len(), 1);
    t.put(Put::new("again").add_column("f", "v", "x"))
        .await
        .unwrap();
    conn.close().await.unwrap();
}

/// An engine with no coordination store configured owns its regions in one of its own:
/// nothing changes for an embedded user.
#[tokio::test]
async fn the_default_store_is_the_engines_own() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    create(&conn, "t").await;
    conn.table("t")
        .unwrap()
        .put(Put::new("r").add_column("f", "v", "x"))
        .await
        .unwrap();
    conn.close().await.unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    assert_eq!(cells(&conn, "t", "r").await, 1);
    conn.close().await.unwrap();
}
