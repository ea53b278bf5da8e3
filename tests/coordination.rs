//! Conformance of [`Coordination`] implementations: leases and node generations, region
//! ownership with generations (exclusive while the owner lives, taken over when it dies,
//! fenced writers refused), the catalog's compare-and-swap, the manifest pointer's
//! compare-and-swap, races between many claimants, and a property test of the ownership
//! rules against a model.
//!
//! Every check runs on both stores with the same assertions (`memory::*` and `etcd::*`).
//! Each takes a [`Harness`]: the store and a way to let time pass. The in-memory store runs
//! on a manual clock (deterministic); [`EtcdCoordination`] runs against an etcd the tests
//! start themselves ([`LocalEtcd`], on free loopback ports; the tests running at one time
//! share it, each under its own key prefix, and the last one out stops it), with real
//! three-second times to live and real sleeps. The checks sleep two thirds of a time to
//! live at a time, so a renewed lease has a second to spare and an abandoned one was past
//! its time to live for a second (etcd revokes an expired lease within about half a
//! second). The property test runs on etcd without the passing of time (a real-time model
//! would have to sleep through thousands of steps): its grants, renewals, revocations,
//! claims and releases follow the same model; expiry is the checks' part.
//!
//! etcd is Debian's `etcd-server` (`.ci/run` installs it); without it the etcd tests fail
//! and say so.

use async_trait::async_trait;
use basalt::coord::{Coordination, ManualClock, MemoryCoordination, RegionKey, RegionRecord};
use basalt::{Error, TableName};
use basalt_cluster::{EtcdConfig, EtcdCoordination, LocalEtcd};
use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// A coordination store under test and its clock.
#[async_trait]
trait Harness: Send + Sync {
    fn store(&self) -> Arc<dyn Coordination>;
    /// Lets time pass by `d` (leases not renewed within their time to live expire).
    async fn pass(&self, d: Duration);
}

struct Memory {
    clock: Arc<ManualClock>,
    store: Arc<MemoryCoordination>,
}

#[async_trait]
impl Harness for Memory {
    fn store(&self) -> Arc<dyn Coordination> {
        self.store.clone()
    }
    async fn pass(&self, d: Duration) {
        self.clock.advance(d);
    }
}

/// The etcd that the tests running now share: started by the first, stopped when the last
/// one drops it.
fn shared_etcd() -> Arc<LocalEtcd> {
    static SHARED: Mutex<Weak<LocalEtcd>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(etcd) = shared.upgrade() {
        return etcd;
    }
    let etcd = Arc::new(
        LocalEtcd::start()
            .unwrap_or_else(|e| panic!("the etcd conformance tests need a local etcd: {e}")),
    );
    *shared = Arc::downgrade(&etcd);
    etcd
}

struct Etcd {
    store: Arc<EtcdCoordination>,
    _etcd: Arc<LocalEtcd>,
}

#[async_trait]
impl Harness for Etcd {
    fn store(&self) -> Arc<dyn Coordination> {
        self.store.clone()
    }
    async fn pass(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Etcd,
}

/// A fresh store of `kind`: its own clock, or its own prefix in the shared etcd.
async fn harness(kind: Kind) -> Box<dyn Harness> {
    match kind {
        Kind::Memory => {
            let clock = Arc::new(ManualClock::default());
            let store = Arc::new(MemoryCoordination::new(clock.clone()));
            Box::new(Memory { clock, store })
        }
        Kind::Etcd => {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let etcd = shared_etcd();
            let prefix = format!("/conformance/{}", NEXT.fetch_add(1, Ordering::SeqCst));
            let config = EtcdConfig::new([etcd.endpoint()]).prefix(prefix);
            let store = EtcdCoordination::connect(config).await.unwrap();
            Box::new(Etcd {
                store: Arc::new(store),
                _etcd: etcd,
            })
        }
    }
}

const TTL: Duration = Duration::from_secs(3);

fn key(table: &str, region: u64) -> RegionKey {
    RegionKey::new(TableName::parse(table).unwrap(), region)
}

async fn leases_and_node_generations(h: &dyn Harness) {
    let c = h.store();
    let a1 = c.grant_lease("rs-a", TTL).await.unwrap();
    let b1 = c.grant_lease("rs-b", TTL).await.unwrap();
    let a2 = c.grant_lease("rs-a", TTL).await.unwrap();
    assert_eq!(
        (a1.node_generation, b1.node_generation, a2.node_generation),
        (1, 1, 2)
    );
    assert!(a1.id != a2.id && a1.id != b1.id);
    assert_eq!(a1.ttl, TTL);
    assert!(matches!(
        c.grant_lease("rs-c", Duration::ZERO).await,
        Err(Error::BadArgument(_))
    ));
    // Renewed within its time to live, a lease lives on; not renewed, it ends for good.
    h.pass(TTL * 2 / 3).await;
    c.keep_alive(a1.id).await.unwrap();
    h.pass(TTL * 2 / 3).await;
    c.keep_alive(a1.id).await.unwrap();
    assert!(matches!(
        c.keep_alive(b1.id).await,
        Err(Error::LeaseExpired { lease }) if lease == b1.id
    ));
    c.revoke_lease(a1.id).await.unwrap();
    assert!(matches!(
        c.keep_alive(a1.id).await,
        Err(Error::LeaseExpired { .. })
    ));
    // Revoking twice, or an unknown lease, does nothing.
    c.revoke_lease(a1.id).await.unwrap();
    c.revoke_lease(u64::MAX).await.unwrap();
}

async fn ownership_is_exclusive_and_generations_grow(h: &dyn Harness) {
    let c = h.store();
    let r = key("orders", 7);
    let a = c.grant_lease("rs-a", TTL).await.unwrap();
    let b = c.grant_lease("rs-b", TTL).await.unwrap();
    assert_eq!(c.owner(&r).await.unwrap(), None);
    assert_eq!(c.claim_region(&r, a.id).await.unwrap(), 1);
    // The owner claiming again keeps its generation.
    assert_eq!(c.claim_region(&r, a.id).await.unwrap(), 1);
    let err = c.claim_region(&r, b.id).await.unwrap_err();
    assert!(
        matches!(&err, Error::RegionOwned { owner, .. } if owner == "rs-a"),
        "{err}"
    );
    let o = c.owner(&r).await.unwrap().unwrap();
    assert_eq!(
        (o.lease, o.process.as_str(), o.generation, o.alive),
        (a.id, "rs-a", 1, true)
    );
    // a stops renewing; b does: a's lease expires and b takes the region over.
    h.pass(TTL * 2 / 3).await;
    c.keep_alive(b.id).await.unwrap();
    h.pass(TTL * 2 / 3).await;
    let dead = c.owner(&r).await.unwrap().unwrap();
    assert_eq!((dead.lease, dead.generation, dead.alive), (a.id, 1, false));
    assert_eq!(c.claim_region(&r, b.id).await.unwrap(), 2);
    // The fenced owner can neither renew, claim, nor release what is b's now.
    assert!(matches!(
        c.keep_alive(a.id).await,
        Err(Error::LeaseExpired { .. })
    ));
    assert!(matches!(
        c.claim_region(&r, a.id).await,
        Err(Error::LeaseExpired { .. })
    ));
    c.release_region(&r, a.id, 1).await.unwrap();
    assert_eq!(c.owner(&r).await.unwrap().unwrap().lease, b.id);
    // A release by the owner at its generation frees the region; the generation stays and
    // the next owner's is one more.
    c.release_region(&r, b.id, 2).await.unwrap();
    assert_eq!(c.owner(&r).await.unwrap(), None);
    let a2 = c.grant_lease("rs-a", TTL).await.unwrap();
    assert_eq!(c.claim_region(&r, a2.id).await.unwrap(), 3);
    // Another region of another table is independent.
    assert_eq!(c.claim_region(&key("users", 7), b.id).await.unwrap(), 1);
}

async fn catalog_changes_are_compare_and_swap(h: &dyn Harness) {
    let c = h.store();
    let rec = |table: &str, id: u64, start: &'static str, end: &'static str| RegionRecord {
        key: key(table, id),
        start: Bytes::from_static(start.as_bytes()),
        end: Bytes::from_static(end.as_bytes()),
        revision: 0,
    };
    let r1 = c.put_region(rec("t", 1, "", "m"), None).await.unwrap();
    let r2 = c.put_region(rec("t", 2, "m", ""), None).await.unwrap();
    c.put_region(rec("u", 1, "", ""), None).await.unwrap();
    assert!(matches!(
        c.put_region(rec("t", 1, "", "m"), None).await,
        Err(Error::CoordinationConflict(_))
    ));
    // A split: region 2 becomes 3 and 4, each change checked against what was read.
    assert!(matches!(
        c.put_region(rec("t", 2, "m", "x"), Some(r2 + 100)).await,
        Err(Error::CoordinationConflict(_))
    ));
    assert!(matches!(
        c.remove_region(&key("t", 2), r1).await,
        Err(Error::CoordinationConflict(_))
    ));
    c.remove_region(&key("t", 2), r2).await.unwrap();
    c.put_region(rec("t", 4, "s", ""), None).await.unwrap();
    c.put_region(rec("t", 3, "m", "s"), None).await.unwrap();
    let got: Vec<(u64, Bytes, Bytes)> = c
        .regions(&TableName::parse("t").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.key.region, r.start, r.end))
        .collect();
    let b = |s: &'static str| Bytes::from_static(s.as_bytes());
    assert_eq!(
        got,
        [(1, b(""), b("m")), (3, b("m"), b("s")), (4, b("s"), b(""))]
    );
    // Revisions grow with every change, and a record read back carries its revision.
    let again = c.put_region(rec("t", 1, "", "m"), Some(r1)).await.unwrap();
    assert!(again > r1);
    let first = &c.regions(&TableName::parse("t").unwrap()).await.unwrap()[0];
    assert_eq!((first.key.region, first.revision), (1, again));
    assert!(matches!(
        c.put_region(rec("t", 1, "", "m"), Some(r1)).await,
        Err(Error::CoordinationConflict(_))
    ));
    // A record that does not exist cannot be replaced or removed at any revision.
    assert!(c.remove_region(&key("t", 9), 1).await.is_err());
    assert!(c.remove_region(&key("t", 9), 0).await.is_err());
    assert!(c.put_region(rec("t", 9, "", ""), Some(0)).await.is_err());
}

async fn only_the_current_owner_moves_the_manifest(h: &dyn Harness) {
    let c = h.store();
    let r = key("t", 1);
    let a = c.grant_lease("rs-a", TTL).await.unwrap();
    let b = c.grant_lease("rs-b", TTL).await.unwrap();
    let ga = c.claim_region(&r, a.id).await.unwrap();
    let m1 = Bytes::from_static(b"manifest/1/1");
    let m2 = Bytes::from_static(b"manifest/1/2");
    assert_eq!(c.manifest(&r).await.unwrap(), None);
    // Not the owner, or not at the owner's generation: refused.
    assert!(matches!(
        c.swap_manifest(&r, b.id, ga, None, m1.clone()).await,
        Err(Error::CoordinationConflict(_))
    ));
    assert!(matches!(
        c.swap_manifest(&r, a.id, ga + 1, None, m1.clone()).await,
        Err(Error::CoordinationConflict(_))
    ));
    c.swap_manifest(&r, a.id, ga, None, m1.clone())
        .await
        .unwrap();
    // From a pointer it did not see: refused.
    assert!(matches!(
        c.swap_manifest(&r, a.id, ga, None, m2.clone()).await,
        Err(Error::CoordinationConflict(_))
    ));
    assert!(matches!(
        c.swap_manifest(&r, a.id, ga, Some(b"manifest/1/0"), m2.clone())
            .await,
        Err(Error::CoordinationConflict(_))
    ));
    assert_eq!(c.manifest(&r).await.unwrap(), Some(m1.clone()));
    // a is fenced by b's takeover: its swap fails and changes nothing.
    h.pass(TTL * 2 / 3).await;
    c.keep_alive(b.id).await.unwrap();
    h.pass(TTL * 2 / 3).await;
    let gb = c.claim_region(&r, b.id).await.unwrap();
    assert!(gb > ga);
    assert!(matches!(
        c.swap_manifest(&r, a.id, ga, Some(&m1), m2.clone()).await,
        Err(Error::CoordinationConflict(_))
    ));
    assert_eq!(c.manifest(&r).await.unwrap(), Some(m1.clone()));
    c.swap_manifest(&r, b.id, gb, Some(&m1), m2.clone())
        .await
        .unwrap();
    assert_eq!(c.manifest(&r).await.unwrap(), Some(m2.clone()));
    // A released region's pointer stays, and no one moves it until the next owner.
    c.release_region(&r, b.id, gb).await.unwrap();
    assert!(matches!(
        c.swap_manifest(&r, b.id, gb, Some(&m2), m1.clone()).await,
        Err(Error::CoordinationConflict(_))
    ));
    assert_eq!(c.manifest(&r).await.unwrap(), Some(m2));
}

/// Sixteen claimants racing for one region, and sixteen creators racing for one catalog
/// record: exactly one of each wins.
async fn races_have_one_winner(h: &dyn Harness) {
    let c = h.store();
    let r = key("t", 42);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let c = c.clone();
        let r = r.clone();
        tasks.push(tokio::spawn(async move {
            let lease = c.grant_lease(&format!("rs-{i}"), TTL).await.unwrap();
            let claimed = c.claim_region(&r, lease.id).await;
            let record = RegionRecord {
                key: r.clone(),
                start: Bytes::new(),
                end: Bytes::new(),
                revision: 0,
            };
            let created = c.put_region(record, None).await;
            (claimed.is_ok(), created.is_ok())
        }));
    }
    let mut claims = 0;
    let mut creates = 0;
    for t in tasks {
        let (claimed, created) = t.await.unwrap();
        claims += usize::from(claimed);
        creates += usize::from(created);
    }
    assert_eq!((claims, creates), (1, 1));
    assert_eq!(c.owner(&r).await.unwrap().unwrap().generation, 1);
}

/// `memory::<check>` and `etcd::<check>` for each check.
macro_rules! on_both_stores {
    ($($check:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(&*super::harness(super::Kind::Memory).await).await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(&*super::harness(super::Kind::Etcd).await).await;
                }
            )*
        }
    };
}

on_both_stores!(
    leases_and_node_generations,
    ownership_is_exclusive_and_generations_grow,
    catalog_changes_are_compare_and_swap,
    only_the_current_owner_moves_the_manifest,
    races_have_one_winner,
);

/// One step of the property test: process `p` acts on region `r`, or time passes.
#[derive(Debug, Clone)]
enum Step {
    Grant(usize),
    Renew(usize),
    Revoke(usize),
    Claim(usize, u64),
    Release(usize, u64),
    Pass(u64),
}

fn step(with_time: bool) -> BoxedStrategy<Step> {
    let acts = prop_oneof![
        (0..3usize).prop_map(Step::Grant),
        (0..3usize).prop_map(Step::Renew),
        (0..3usize).prop_map(Step::Revoke),
        (0..3usize, 0..3u64).prop_map(|(p, r)| Step::Claim(p, r)),
        (0..3usize, 0..3u64).prop_map(|(p, r)| Step::Release(p, r)),
    ];
    if with_time {
        prop_oneof![5 => acts, 1 => (0..4000u64).prop_map(Step::Pass)].boxed()
    } else {
        acts.boxed()
    }
}

/// The model: every lease granted (deadline, revoked) and each process's newest one, each
/// region's owner lease and generation. Time in milliseconds.
#[derive(Default)]
struct Model {
    now: u64,
    leases: HashMap<u64, (u64, bool)>,
    current: HashMap<usize, u64>,
    owners: HashMap<u64, u64>,
    generations: HashMap<u64, u64>,
}

impl Model {
    fn alive(&self, lease: u64) -> bool {
        self.leases
            .get(&lease)
            .is_some_and(|(deadline, revoked)| !revoked && self.now < *deadline)
    }
}

/// Runs `steps` of three processes over three regions on a fresh store: every claim,
/// renewal and ownership answer is the model's, so a region has one live owner at a time,
/// changes owner only when the owner's lease ended or it released the region, and its
/// generation grows by one at each change of owner.
async fn follow_the_model(
    kind: Kind,
    ttl: Duration,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let h = harness(kind).await;
    let c = h.store();
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap();
    let mut m = Model::default();
    for s in steps {
        match s {
            Step::Grant(p) => {
                let l = c.grant_lease(&format!("p{p}"), ttl).await.unwrap();
                m.leases.insert(l.id, (m.now + ttl_ms, false));
                m.current.insert(p, l.id);
            }
            Step::Renew(p) => {
                let Some(&id) = m.current.get(&p) else {
                    continue;
                };
                let ok = c.keep_alive(id).await.is_ok();
                prop_assert_eq!(ok, m.alive(id));
                if ok {
                    m.leases.insert(id, (m.now + ttl_ms, false));
                }
            }
            Step::Revoke(p) => {
                let Some(&id) = m.current.get(&p) else {
                    continue;
                };
                c.revoke_lease(id).await.unwrap();
                if let Some(l) = m.leases.get_mut(&id) {
                    l.1 = true;
                }
            }
            Step::Claim(p, r) => {
                let Some(&id) = m.current.get(&p) else {
                    continue;
                };
                let got = c.claim_region(&key("t", r), id).await;
                let want = if !m.alive(id) {
                    None
                } else {
                    match m.owners.get(&r) {
                        Some(&owner) if owner == id => m.generations.get(&r).copied(),
                        Some(&owner) if m.alive(owner) => None,
                        _ => {
                            let g = m.generations.get(&r).copied().unwrap_or(0) + 1;
                            m.generations.insert(r, g);
                            m.owners.insert(r, id);
                            Some(g)
                        }
                    }
                };
                prop_assert_eq!(got.ok(), want);
            }
            Step::Release(p, r) => {
                let Some(&id) = m.current.get(&p) else {
                    continue;
                };
                let g = m.generations.get(&r).copied().unwrap_or(0);
                c.release_region(&key("t", r), id, g).await.unwrap();
                if m.owners.get(&r) == Some(&id) {
                    m.owners.remove(&r);
                }
            }
            Step::Pass(ms) => {
                h.pass(Duration::from_millis(ms)).await;
                m.now += ms;
            }
        }
        for r in 0..3u64 {
            let got = c.owner(&key("t", r)).await.unwrap();
            let want = m
                .owners
                .get(&r)
                .map(|&id| (id, m.generations[&r], m.alive(id)));
            prop_assert_eq!(got.map(|o| (o.lease, o.generation, o.alive)), want);
        }
    }
    Ok(())
}

/// The property test on `kind`: `cases` random runs of up to `max_steps` steps.
fn ownership_follows_the_model(kind: Kind, cases: u32, max_steps: usize, with_time: bool) {
    // On etcd nothing expires within a run: a long time to live, and no passing of time.
    let ttl = if with_time {
        TTL
    } else {
        Duration::from_secs(120)
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let strategy = prop::collection::vec(step(with_time), 1..max_steps);
    let result = TestRunner::new(config).run(&strategy, |steps| {
        rt.block_on(follow_the_model(kind, ttl, steps))
    });
    if let Err(e) = result {
        panic!("{kind:?}: {e}");
    }
}

#[test]
fn memory_ownership_follows_the_model() {
    ownership_follows_the_model(Kind::Memory, 200, 60, true);
}

#[test]
fn etcd_ownership_follows_the_model() {
    // One etcd for every run (each run has its own prefix in it).
    let _etcd = shared_etcd();
    ownership_follows_the_model(Kind::Etcd, 64, 60, false);
}
