//! Region servers' registration and the master's election on a real etcd: each test starts
//! its own [`LocalEtcd`] (stopped when the test drops it) and uses real leases of 2 or 3
//! seconds. A lease that is not renewed is gone about half a second after its time to live
//! (etcd's lessor looks every 500 ms), so the bounds below allow its time to live plus two
//! seconds. The fenced write of a deposed master is checked in `election`'s unit test (the
//! compare is crate-internal).

use basalt_cluster::{EtcdConfig, EtcdCoordination, Leadership, LocalEtcd, ServerInfo};
use basalt_core::coord::{Coordination, Lease};
use basalt_core::Error;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

const POLL: Duration = Duration::from_millis(50);

async fn start() -> (LocalEtcd, EtcdCoordination) {
    let etcd = LocalEtcd::start().unwrap_or_else(|e| panic!("these tests need etcd: {e}"));
    let coord = EtcdCoordination::connect(EtcdConfig::new([etcd.endpoint()]))
        .await
        .unwrap();
    (etcd, coord)
}

/// Renews `lease` every half second until aborted.
fn keep_alive(coord: &EtcdCoordination, lease: &Lease) -> JoinHandle<()> {
    let (coord, id) = (coord.clone(), lease.id);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let _ = coord.keep_alive(id).await;
        }
    })
}

/// `lease`'s campaign, running in a task.
fn campaign(coord: &EtcdCoordination, lease: &Lease) -> JoinHandle<Leadership> {
    let (coord, lease) = (coord.clone(), lease.clone());
    tokio::spawn(async move { coord.campaign(&lease, POLL).await.unwrap() })
}

/// Waits up to `bound` for `task`, and says how long it took.
async fn within(bound: Duration, task: JoinHandle<Leadership>) -> (Leadership, Duration) {
    let t0 = Instant::now();
    let term = tokio::time::timeout(bound, task)
        .await
        .unwrap_or_else(|_| panic!("not elected within {bound:?}"))
        .unwrap();
    (term, t0.elapsed())
}

fn info(port: u16) -> ServerInfo {
    ServerInfo {
        rpc_address: format!("127.0.0.1:{port}"),
        info_port: port + 10,
        started_ms: 1_700_000_000_000 + u64::from(port),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_candidate_wins_the_other_waits_until_it_resigns() {
    let (etcd, coord) = start().await;
    let ttl = Duration::from_secs(3);
    let a = coord.grant_lease("master-a", ttl).await.unwrap();
    let b = coord.grant_lease("master-b", ttl).await.unwrap();
    assert_eq!(coord.leader().await.unwrap(), None);

    let term_a = coord.campaign(&a, POLL).await.unwrap();
    assert_eq!(
        (
            term_a.process.as_str(),
            term_a.node_generation,
            term_a.lease
        ),
        ("master-a", 1, a.id)
    );
    // Campaigning again with the same lease gives the same term.
    assert_eq!(coord.try_campaign(&a).await.unwrap(), Some(term_a.clone()));
    assert_eq!(coord.try_campaign(&b).await.unwrap(), None);

    let waiting = campaign(&coord, &b);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "B was elected while A leads");
    assert_eq!(coord.leader().await.unwrap(), Some(term_a.clone()));
    assert!(coord.is_leader(&term_a).await.unwrap());

    assert!(coord.resign(&term_a).await.unwrap());
    let (term_b, took) = within(Duration::from_secs(1), waiting).await;
    assert_eq!((term_b.process.as_str(), term_b.lease), ("master-b", b.id));
    assert!(term_b.revision > term_a.revision);
    assert_eq!(coord.leader().await.unwrap(), Some(term_b.clone()));
    assert!(!coord.is_leader(&term_a).await.unwrap());
    // A's resignation of an ended term deletes nothing.
    assert!(!coord.resign(&term_a).await.unwrap());
    assert!(coord.is_leader(&term_b).await.unwrap());
    eprintln!("elected {took:?} after the resignation");
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_masters_successor_is_elected_within_a_bound() {
    let (etcd, coord) = start().await;
    let ttl = Duration::from_secs(3);
    let a = coord.grant_lease("master-a", ttl).await.unwrap();
    let b = coord.grant_lease("master-b", ttl).await.unwrap();
    let term_a = coord.campaign(&a, POLL).await.unwrap();
    let waiting = campaign(&coord, &b);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());

    coord.revoke_lease(a.id).await.unwrap();
    let (term_b, took) = within(Duration::from_secs(1), waiting).await;
    assert_eq!(term_b.lease, b.id);
    assert!(!coord.is_leader(&term_a).await.unwrap());
    assert!(matches!(
        coord.try_campaign(&a).await,
        Err(Error::LeaseExpired { .. })
    ));
    eprintln!("elected {took:?} after the revocation");
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_master_loses_the_key_and_learns_it() {
    let (etcd, coord) = start().await;
    let ttl = Duration::from_secs(2);
    let a = coord.grant_lease("master-a", ttl).await.unwrap();
    let b = coord.grant_lease("master-b", ttl).await.unwrap();
    let renew_b = keep_alive(&coord, &b);
    let term_a = coord.campaign(&a, POLL).await.unwrap();
    let granted = Instant::now();
    let waiting = campaign(&coord, &b);
    assert!(coord.is_leader(&term_a).await.unwrap());

    // A stops renewing (a paused master): etcd deletes the key with the lease.
    let (term_b, _) = within(a.ttl + Duration::from_secs(2), waiting).await;
    let took = granted.elapsed();
    assert!(
        took >= a.ttl,
        "A lost the key before its time to live: {took:?}"
    );
    assert_eq!(term_b.process, "master-b");
    assert!(!coord.is_leader(&term_a).await.unwrap());
    assert_eq!(coord.leader().await.unwrap(), Some(term_b.clone()));
    // B, renewed, stays master past its own time to live.
    tokio::time::sleep(b.ttl).await;
    assert!(coord.is_leader(&term_b).await.unwrap());
    renew_b.abort();
    eprintln!(
        "elected {took:?} after A's last renewal (time to live {:?})",
        a.ttl
    );
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_lives_with_its_lease_and_comes_back_as_a_new_generation() {
    let (etcd, coord) = start().await;
    let ttl = Duration::from_secs(2);
    let a = coord.grant_lease("rs-a", ttl).await.unwrap();
    let b = coord.grant_lease("rs-b", ttl).await.unwrap();
    let renew_b = keep_alive(&coord, &b);
    assert!(coord.live_servers().await.unwrap().is_empty());

    let reg_a = coord.register_server(&a, &info(16020)).await.unwrap();
    let reg_b = coord.register_server(&b, &info(16021)).await.unwrap();
    assert_eq!((reg_a.lease, reg_a.node_generation), (a.id, 1));
    assert_eq!(
        coord.live_servers().await.unwrap(),
        vec![reg_a.clone(), reg_b.clone()]
    );
    // Registering again under the same lease replaces the record.
    let moved = coord.register_server(&a, &info(17020)).await.unwrap();
    assert_eq!(coord.live_servers().await.unwrap()[0], moved);

    // A stops renewing: its registration goes with its lease; B's stays.
    let deadline = Instant::now() + ttl + Duration::from_secs(2);
    let gone = loop {
        let live = coord.live_servers().await.unwrap();
        if live.iter().all(|s| s.process != "rs-a") {
            break live;
        }
        assert!(Instant::now() < deadline, "rs-a still registered: {live:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(gone, vec![reg_b.clone()]);

    // The old lease cannot register again; a new lease is a new node generation.
    assert!(matches!(
        coord.register_server(&a, &info(16020)).await,
        Err(Error::LeaseExpired { .. })
    ));
    let a2 = coord.grant_lease("rs-a", ttl).await.unwrap();
    let a3 = coord.grant_lease("rs-a", ttl).await.unwrap();
    let reg_a3 = coord.register_server(&a3, &info(16022)).await.unwrap();
    assert_eq!((reg_a3.lease, reg_a3.node_generation), (a3.id, 3));
    // An earlier life (a2) does not replace a newer one's registration.
    assert!(matches!(
        coord.register_server(&a2, &info(16023)).await,
        Err(Error::CoordinationConflict(_))
    ));
    assert_eq!(
        coord.live_servers().await.unwrap(),
        vec![reg_a3.clone(), reg_b.clone()]
    );
    // A clean shutdown removes the registration; only its own lease can.
    assert!(!coord.unregister_server(&a2).await.unwrap());
    assert!(coord.unregister_server(&a3).await.unwrap());
    assert_eq!(coord.live_servers().await.unwrap(), vec![reg_b]);
    renew_b.abort();
    drop(etcd);
}
