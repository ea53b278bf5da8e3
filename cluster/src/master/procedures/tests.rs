//! Procedures a master left in etcd, run by the master of a cluster of two region servers
//! in this process (etcd started by the test): one marked running whose split was never
//! sent is sent; one whose split its server finished is known by the daughters and not
//! sent again; one asked for a region that is not listed fails with `RegionNotFound`. A
//! create or delete of a table that a server may have run (marked running) and finds its
//! work done is done; one never sent that finds it done fails (`TableExists`,
//! `TableNotFound`), and one never sent runs.

use super::*;
use crate::coordination::put;
use crate::procedures::{Bounds, ProcedureRecord};
use crate::proto::TxnRequest;
use crate::regionserver::{self, RegionServerConfig, RunningServer};
use crate::{ClusterAdmin, EtcdConfig, LocalEtcd, RetryPolicy};
use basalt_core::client::{Get, Put};
use basalt_core::{ColumnFamilyDescriptor, PreSplit, TableDescriptor, TableName};

const SETTLE: Duration = Duration::from_secs(30);

fn name() -> TableName {
    TableName::parse("events").unwrap()
}

/// Writes `record` as procedure `id`, as a master that died afterwards left it.
async fn leave(coord: &EtcdCoordination, id: u64, record: &ProcedureRecord) {
    let req = TxnRequest {
        compare: Vec::new(),
        success: vec![put(coord.keys.procedure(id), record.encode().unwrap(), 0)],
        failure: Vec::new(),
    };
    coord.txn("test", req, 0).await.unwrap();
}

/// Waits until procedure `id` is finished; returns where it ended.
async fn finished(coord: &EtcdCoordination, id: u64) -> ProcedureState {
    let deadline = Instant::now() + SETTLE;
    loop {
        let record = crate::procedures::procedure(coord, id)
            .await
            .unwrap()
            .unwrap();
        if record.finished() {
            return record.state;
        }
        assert!(Instant::now() < deadline, "{record:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The table's listed regions, by start row.
async fn listed(coord: &EtcdCoordination) -> Vec<RegionRecord> {
    let mut regions = coord.regions(&name()).await.unwrap();
    regions.sort_by(|a, b| a.start.cmp(&b.start));
    regions
}

fn bounds_of(r: &RegionRecord) -> Bounds {
    Bounds {
        start: r.start.to_vec(),
        end: r.end.to_vec(),
    }
}

fn split_of(r: &RegionRecord, at: &str, state: ProcedureState) -> ProcedureRecord {
    ProcedureRecord {
        kind: ProcedureKind::Split {
            table: name(),
            region: r.key.region,
            at: Some(at.as_bytes().to_vec()),
            bounds: bounds_of(r),
        },
        state,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_runs_on_the_procedures_it_finds() {
    let etcd = LocalEtcd::start().unwrap();
    let config = EtcdConfig::new([etcd.endpoint()]).prefix("/procedures-test");
    let store = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut servers: Vec<RunningServer> = Vec::new();
    for i in 0..2 {
        let mut c = RegionServerConfig::new(
            config.clone(),
            store.path(),
            scratch.path().join(format!("rs-{i}")),
            format!("rs-{i}"),
        );
        c.lease_ttl = Duration::from_secs(3);
        servers.push(regionserver::start(c).await.unwrap());
    }
    let conn = crate::connect_with(config.clone(), RetryPolicy::default())
        .await
        .unwrap();
    let desc = TableDescriptor::new(name()).family(ColumnFamilyDescriptor::new("f"));
    conn.admin()
        .create_table_with_splits(desc, PreSplit::Keys(Vec::new()))
        .await
        .unwrap();
    let t = conn.table("events").unwrap();
    let keys: Vec<String> = (0..40).map(|i| format!("k{i:02}")).collect();
    for k in &keys {
        t.put(Put::new(k).add_column("f", "q", k)).await.unwrap();
    }
    let coord = EtcdCoordination::connect(config.clone()).await.unwrap();
    let admin = ClusterAdmin::new(coord.clone());
    admin.wait_settled(SETTLE).await.unwrap();

    // Marked running, never sent: the master sends it.
    let whole = listed(&coord).await.remove(0);
    let first = 1 << 63 | 1;
    leave(
        &coord,
        first,
        &split_of(&whole, "k20", ProcedureState::Running),
    )
    .await;
    let ProcedureState::Done(Outcome::Split(Some((lo, hi)))) = finished(&coord, first).await else {
        panic!("the split did not run");
    };
    let after: Vec<u64> = listed(&coord).await.iter().map(|r| r.key.region).collect();
    assert_eq!(after, [lo, hi]);
    admin.wait_settled(SETTLE).await.unwrap();

    // Sent and finished by its server, its outcome never written: known by the daughters,
    // not sent again.
    let lower = listed(&coord).await.remove(0);
    let server = admin
        .regions(Some(&name()))
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.key == lower.key)
        .and_then(|r| r.serving)
        .unwrap();
    let address = admin
        .status()
        .await
        .unwrap()
        .servers
        .into_iter()
        .find(|s| s.name == server)
        .unwrap()
        .rpc_address;
    let request = Request::SplitRegion(name(), lower.key.region, Some(Bytes::from("k10")));
    let reply = RpcClient::new(&address)
        .unwrap()
        .call(request, CALL_DEADLINE)
        .await
        .unwrap();
    let Reply::Split(Some(daughters)) = reply else {
        panic!("{reply:?}");
    };
    let second = 1 << 63 | 2;
    leave(
        &coord,
        second,
        &split_of(&lower, "k10", ProcedureState::Running),
    )
    .await;
    assert_eq!(
        finished(&coord, second).await,
        ProcedureState::Done(Outcome::Split(Some(daughters)))
    );
    let after: Vec<u64> = listed(&coord).await.iter().map(|r| r.key.region).collect();
    assert_eq!(after, [daughters.0, daughters.1, hi]);

    // Asked for a region the list does not hold: refused.
    let mut gone = split_of(&lower, "k05", ProcedureState::Requested);
    if let ProcedureKind::Split { region, .. } = &mut gone.kind {
        *region = 999_999;
    }
    let third = 1 << 63 | 3;
    leave(&coord, third, &gone).await;
    let ProcedureState::Failed(e) = finished(&coord, third).await else {
        panic!("a split of no region ran");
    };
    assert!(matches!(
        Error::from(e),
        Error::RegionNotFound { id: 999_999, .. }
    ));

    tables_left_behind(&coord, &conn, &admin).await;

    admin.wait_settled(SETTLE).await.unwrap();
    for k in &keys {
        let got = t.get(Get::new(k)).await.unwrap();
        assert_eq!(
            got.value("f", "q").map(|v| v.to_vec()),
            Some(k.as_bytes().to_vec())
        );
    }
    conn.close().await.unwrap();
    for s in servers {
        s.stop().await.unwrap();
    }
}

fn table_procedure(kind: ProcedureKind, state: ProcedureState) -> ProcedureRecord {
    ProcedureRecord { kind, state }
}

/// The failure procedure `id` ended with.
async fn failure(coord: &EtcdCoordination, id: u64) -> Error {
    match finished(coord, id).await {
        ProcedureState::Failed(e) => Error::from(e),
        other => panic!("procedure {id:x} did not fail: {other:?}"),
    }
}

/// Creates and deletes of tables, left as a master that died would leave them.
async fn tables_left_behind(
    coord: &EtcdCoordination,
    conn: &basalt_core::Connection<crate::RemoteBackend>,
    admin: &ClusterAdmin,
) {
    let create = |table: &str, split: PreSplit| ProcedureKind::CreateTable {
        desc: TableDescriptor::new(TableName::parse(table).unwrap())
            .family(ColumnFamilyDescriptor::new("f")),
        split,
    };
    let delete = |table: &str| ProcedureKind::DeleteTable {
        table: TableName::parse(table).unwrap(),
    };
    let done = ProcedureState::Done(Outcome::Table);
    // `events` exists: made by the create's server, or another client's.
    let existing = table_procedure(create("events", PreSplit::None), ProcedureState::Running);
    leave(coord, 1 << 63 | 4, &existing).await;
    assert_eq!(finished(coord, 1 << 63 | 4).await, done);
    let existing = table_procedure(create("events", PreSplit::None), ProcedureState::Requested);
    leave(coord, 1 << 63 | 5, &existing).await;
    let e = failure(coord, 1 << 63 | 5).await;
    assert!(matches!(e, Error::TableExists(_)), "{e:?}");

    // Never sent: the table is made, listed and served.
    let fresh = TableName::parse("fresh").unwrap();
    let made = table_procedure(
        create("fresh", PreSplit::Keys(vec![b"m".to_vec()])),
        ProcedureState::Requested,
    );
    leave(coord, 1 << 63 | 6, &made).await;
    assert_eq!(finished(coord, 1 << 63 | 6).await, done);
    admin.wait_settled(SETTLE).await.unwrap();
    assert_eq!(admin.regions(Some(&fresh)).await.unwrap().len(), 2);
    let t = conn.table("fresh").unwrap();
    t.put(Put::new("x").add_column("f", "q", "v"))
        .await
        .unwrap();

    // A delete of an enabled table is refused as the engine refuses it; disabled, it runs.
    let gone = table_procedure(delete("fresh"), ProcedureState::Requested);
    leave(coord, 1 << 63 | 7, &gone).await;
    let e = failure(coord, 1 << 63 | 7).await;
    assert!(matches!(e, Error::TableState { .. }), "{e:?}");
    conn.admin().disable_table("fresh").await.unwrap();
    leave(coord, 1 << 63 | 8, &gone).await;
    assert_eq!(finished(coord, 1 << 63 | 8).await, done);
    assert!(!conn.admin().table_exists("fresh").await.unwrap());
    assert!(coord.regions(&fresh).await.unwrap().is_empty());

    // Its table gone: one a server may have run is done, one never sent fails.
    let sent = table_procedure(delete("fresh"), ProcedureState::Running);
    leave(coord, 1 << 63 | 9, &sent).await;
    assert_eq!(finished(coord, 1 << 63 | 9).await, done);
    leave(coord, 1 << 63 | 10, &gone).await;
    let e = failure(coord, 1 << 63 | 10).await;
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
}
