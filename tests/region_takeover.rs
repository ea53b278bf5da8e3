//! Opening some regions of a shared object store (`Config::serve_regions`), as region
//! servers open the regions of a crashed one: engines share one `InMemory` store, each with
//! a data directory of its own.
//!
//! The seeded test: a first engine writes into a table of four regions, then crashes or
//! keeps running (a writer task putting until it is fenced). Two engines open disjoint sets
//! of its regions; each fences the WAL writers that hold their edits and replays only its
//! regions' records: every write the first acknowledged is readable from the engine that
//! serves its row, the first acknowledges nothing after the fence (its writes fail with
//! `Error::Fenced`, and none shows), a region served elsewhere refuses reads and writes with
//! `Error::RegionNotServed`. Both then write, flush and split side by side (their catalog
//! updates never fence each other); one of them crashes or closes and a third engine opens
//! its regions while the other keeps writing. At the end an engine opening the whole store
//! finds every acknowledged write, and every writer's segment ids are contiguous.
//! `BASALT_REGION_TAKEOVER_SEEDS` sets how many seeds (default 200),
//! `BASALT_REGION_TAKEOVER_SEED` runs one.

use basalt::client::{Delete, Get, Put};
use basalt::objects::{Objects, StoreObjects};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, TableDescriptor, TableName,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[path = "common/takeover.rs"]
mod takeover_common;
use takeover_common::{assert_contiguous, check, writers, Model, SharedCoordination};

fn tn() -> TableName {
    TableName::parse("t").unwrap()
}

/// The table's split keys: regions `[, b)`, `[b, c)`, `[c, d)`, `[d, )`.
const LETTERS: [&str; 4] = ["a", "b", "c", "d"];

async fn open(dir: &Path, objects: &Arc<dyn Objects>, only: Option<&BTreeSet<u64>>) -> Connection {
    let mut config = Config::new(dir).objects(Arc::clone(objects));
    if let Some(ids) = only {
        config = config.serve_regions(ids.iter().copied());
    }
    Connection::open_with(config).await.unwrap()
}

/// The regions of `t` as `conn` lists them: (id, start, end).
async fn regions(conn: &Connection) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    conn.admin()
        .regions(tn())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.start_key.to_vec(), r.end_key.to_vec()))
        .collect()
}

/// Creates `t` with two regions, `[, m)` and `[m, )`, through `conn`; returns their ids.
async fn create_two_regions(conn: &Connection) -> Vec<u64> {
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")),
            PreSplit::Keys(vec![b"m".to_vec()]),
        )
        .await
        .unwrap();
    regions(conn).await.iter().map(|r| r.0).collect()
}

fn holds(start: &[u8], end: &[u8], row: &str) -> bool {
    let row = row.as_bytes();
    start <= row && (end.is_empty() || row < end)
}

async fn value(conn: &Connection, row: &str) -> basalt::Result<Option<String>> {
    let r = conn.table("t")?.get(Get::new(row)).await?;
    Ok(r.value("f", "q")
        .map(|v| String::from_utf8(v.to_vec()).unwrap()))
}

/// Checks, through `conn`, every row of `model` inside the regions `served` (id, start,
/// end); rows outside them must be refused as served elsewhere.
async fn check_served(
    conn: &Connection,
    served: &[(u64, Vec<u8>, Vec<u8>)],
    model: &Model,
    context: &str,
) {
    let inside = |row: &str| served.iter().any(|(_, s, e)| holds(s, e, row));
    for (row, want) in &model.rows {
        match value(conn, row).await {
            Ok(got) if inside(row) => assert_eq!(&got, want, "{context}: row {row}"),
            Err(Error::RegionNotServed { .. }) if !inside(row) => {}
            other => panic!(
                "{context}: row {row} (served here: {}): {other:?}",
                inside(row)
            ),
        }
    }
    for row in model.never.iter().filter(|r| inside(r)) {
        assert_eq!(
            value(conn, row).await.unwrap(),
            None,
            "{context}: fenced write {row} shows"
        );
    }
}

/// Puts (and sometimes deletes) rows named `{letter}{tag}-{i}` for the letters of `letters`
/// through `conn`, recording what was acknowledged.
async fn write_some(
    conn: &Connection,
    rng: &mut StdRng,
    letters: &[&str],
    tag: &str,
    model: &Mutex<Model>,
) {
    let table = conn.table("t").unwrap();
    for i in 0..rng.random_range(5..30) {
        let letter = letters[rng.random_range(0..letters.len())];
        let row = format!("{letter}{tag}-{i:02}");
        let value = format!("{tag}-{i}");
        table
            .put(Put::new(row.clone()).add_column("f", "q", value.clone()))
            .await
            .unwrap();
        model.lock().unwrap().ack(&row, Some(&value));
        if rng.random_bool(0.15) {
            table.delete(Delete::new(row.clone())).await.unwrap();
            model.lock().unwrap().ack(&row, None);
        }
    }
}

/// A writer task putting rows `{letter}tail-{i}` through `conn` until it is fenced.
fn tail_writer(
    conn: &Connection,
    letters: Vec<&'static str>,
    model: Arc<Mutex<Model>>,
) -> tokio::task::JoinHandle<()> {
    let table = conn.table("t").unwrap();
    tokio::spawn(async move {
        for i in 0.. {
            let row = format!("{}tail-{i:04}", letters[i % letters.len()]);
            match table
                .put(Put::new(row.clone()).add_column("f", "q", "tail"))
                .await
            {
                Ok(()) => model.lock().unwrap().ack(&row, Some("tail")),
                Err(Error::Fenced { .. }) => {
                    model.lock().unwrap().never.insert(row);
                    return;
                }
                Err(e) => panic!("tail writer: {e}"),
            }
            tokio::task::yield_now().await;
        }
    })
}

/// The served regions of `all` whose ids are in `ids`.
fn pick(all: &[(u64, Vec<u8>, Vec<u8>)], ids: &BTreeSet<u64>) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    all.iter().filter(|r| ids.contains(&r.0)).cloned().collect()
}

/// The letters whose rows fall in `served`.
fn letters_of(served: &[(u64, Vec<u8>, Vec<u8>)]) -> Vec<&'static str> {
    LETTERS
        .iter()
        .copied()
        .filter(|l| served.iter().any(|(_, s, e)| holds(s, e, l)))
        .collect()
}

async fn seed_run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let model = Arc::new(Mutex::new(Model::default()));
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    let ctx = |step: &str| format!("seed {seed}, {step}");

    // The first engine, serving the whole store.
    let a = open(dirs[0].path(), &objects, None).await;
    let keys = LETTERS[1..].iter().map(|l| l.as_bytes().to_vec()).collect();
    a.admin()
        .create_table_with_splits(
            TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")),
            PreSplit::Keys(keys),
        )
        .await
        .unwrap();
    write_some(&a, &mut rng, &LETTERS, "a", &model).await;
    if rng.random_bool(0.3) {
        a.admin().flush(tn()).await.unwrap();
    }
    write_some(&a, &mut rng, &LETTERS, "a2", &model).await;
    let all = regions(&a).await;
    let running_a = match rng.random_bool(0.5) {
        true => Some((tail_writer(&a, LETTERS.to_vec(), Arc::clone(&model)), a)),
        false => {
            drop(a); // a crash: nothing closed
            None
        }
    };

    // Two engines open disjoint, non-empty sets of its regions.
    let mut ids_b = BTreeSet::new();
    let mut ids_c = BTreeSet::new();
    for (i, r) in all.iter().enumerate() {
        let to_b = match i {
            0 => true,
            1 => false,
            _ => rng.random_bool(0.5),
        };
        match to_b {
            true => ids_b.insert(r.0),
            false => ids_c.insert(r.0),
        };
    }
    let b = open(dirs[1].path(), &objects, Some(&ids_b)).await;
    let c = open(dirs[2].path(), &objects, Some(&ids_c)).await;
    if let Some((tail, a)) = running_a {
        tail.await.unwrap();
        let late = a
            .table("t")
            .unwrap()
            .put(Put::new("alate").add_column("f", "q", "x"))
            .await;
        assert!(
            matches!(late, Err(Error::Fenced { .. })),
            "{}: {late:?}",
            ctx("A after the fence")
        );
        model.lock().unwrap().never.insert("alate".into());
        drop(a);
    }
    let served_b = pick(&all, &ids_b);
    let served_c = pick(&all, &ids_c);
    let acknowledged = model.lock().unwrap().clone();
    check_served(&b, &served_b, &acknowledged, &ctx("B opened")).await;
    check_served(&c, &served_c, &acknowledged, &ctx("C opened")).await;
    assert_contiguous(&*objects, &ctx("B and C opened"));
    let folders = writers(&*objects);
    assert!(
        folders[0].2.is_some(),
        "{}: the first writer was not fenced: {folders:?}",
        ctx("B and C opened")
    );

    // Both write, flush and split side by side: neither fences the other.
    let (letters_b, letters_c) = (letters_of(&served_b), letters_of(&served_c));
    let mut rng_c = StdRng::seed_from_u64(rng.random());
    let split_b = rng.random_bool(0.5);
    let flush_b = rng.random_bool(0.5);
    let flush_c = rng.random_bool(0.5);
    println!("seed {seed}: B {ids_b:?} C {ids_c:?} split_b {split_b} flush_b {flush_b} flush_c {flush_c}");
    let side_b = async {
        write_some(&b, &mut rng, &letters_b, "b", &model).await;
        if flush_b {
            b.admin().flush(tn()).await.unwrap();
        }
        if split_b {
            // Strictly inside the region: rows `{letter}b-...` sort after it.
            let (id, start, _) = served_b[0].clone();
            let mut row = match start.is_empty() {
                true => b"a".to_vec(),
                false => start,
            };
            row.extend_from_slice(b"b-1");
            b.admin().split_region(tn(), id, Some(&row)).await.unwrap();
        }
        write_some(&b, &mut rng, &letters_b, "b2", &model).await;
        rng
    };
    let side_c = async {
        write_some(&c, &mut rng_c, &letters_c, "c", &model).await;
        if flush_c {
            c.admin().flush(tn()).await.unwrap();
        }
        write_some(&c, &mut rng_c, &letters_c, "c2", &model).await;
    };
    let (returned, ()) = tokio::join!(side_b, side_c);
    let mut rng = returned;
    let acknowledged = model.lock().unwrap().clone();
    // B's regions now: its daughters replace a split parent.
    let now_b: Vec<_> = regions(&b)
        .await
        .into_iter()
        .filter(|(id, _, _)| !ids_c.contains(id))
        .collect();
    check_served(&b, &now_b, &acknowledged, &ctx("B wrote")).await;
    check_served(&c, &served_c, &acknowledged, &ctx("C wrote")).await;

    // B crashes or closes; D opens B's regions while C keeps writing.
    match rng.random_bool(0.5) {
        true => drop(b),
        false => b.close().await.unwrap(),
    }
    let ids_d: BTreeSet<u64> = now_b.iter().map(|r| r.0).collect();
    let d = open(dirs[3].path(), &objects, Some(&ids_d)).await;
    check_served(&d, &now_b, &acknowledged, &ctx("D opened")).await;
    write_some(&c, &mut rng, &letters_c, "c3", &model).await;
    write_some(&d, &mut rng, &letters_b, "d", &model).await;
    let acknowledged = model.lock().unwrap().clone();
    check_served(&c, &served_c, &acknowledged, &ctx("C after D opened")).await;
    check_served(&d, &now_b, &acknowledged, &ctx("D wrote")).await;
    let c_crash = rng.random_bool(0.5);
    println!("seed {seed}: C crashes {c_crash}");
    match c_crash {
        true => drop(c),
        false => c.close().await.unwrap(),
    }
    drop(d);

    // An engine opening the whole store finds everything.
    let e = open(dirs[4].path(), &objects, None).await;
    check(&e, &acknowledged, &ctx("the end")).await;
    assert_contiguous(&*objects, &ctx("the end"));
    e.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_region_takeovers_lose_no_acknowledged_write() {
    let seeds: Vec<u64> = match std::env::var("BASALT_REGION_TAKEOVER_SEED") {
        Ok(one) => vec![one.parse().unwrap()],
        Err(_) => {
            let n = std::env::var("BASALT_REGION_TAKEOVER_SEEDS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(200u64);
            (0..n).collect()
        }
    };
    for seed in seeds {
        seed_run(seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_served_elsewhere_refuses_reads_and_writes_typed() {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = open(dirs[0].path(), &objects, None).await;
    let ids = create_two_regions(&a).await;
    a.close().await.unwrap();
    let b = open(dirs[1].path(), &objects, Some(&BTreeSet::from([ids[0]]))).await;
    let table = b.table("t").unwrap();
    table
        .put(Put::new("a1").add_column("f", "q", "1"))
        .await
        .unwrap();
    let refused = table.put(Put::new("z1").add_column("f", "q", "1")).await;
    assert!(
        matches!(&refused, Err(Error::RegionNotServed { region, .. }) if *region == ids[1]),
        "{refused:?}"
    );
    let read = table.get(Get::new("z1")).await;
    assert!(
        matches!(read, Err(Error::RegionNotServed { .. })),
        "{read:?}"
    );
    // A served-elsewhere region is no offline region, and nothing of it is flushed.
    assert!(b.admin().offline_regions().await.unwrap().is_empty());
    b.admin().flush(tn()).await.unwrap();
    // Schema changes need every region of the table: refused before anything happens.
    let disabled = b.admin().disable_table(tn()).await;
    assert!(
        matches!(disabled, Err(Error::RegionNotServed { .. })),
        "{disabled:?}"
    );
    assert!(b.admin().is_table_enabled(tn()).await.unwrap());
    let family = b
        .admin()
        .add_column_family(tn(), ColumnFamilyDescriptor::new("g"))
        .await;
    assert!(
        matches!(family, Err(Error::RegionNotServed { .. })),
        "{family:?}"
    );
    // An id no table has, and a local directory, are refused.
    let unknown = Connection::open_with(
        Config::new(dirs[2].path())
            .objects(Arc::clone(&objects))
            .serve_regions([9_999]),
    )
    .await;
    assert!(
        matches!(unknown, Err(Error::RegionNotFound { id: 9_999, .. })),
        "{unknown:?}"
    );
    let local = Connection::open_with(Config::new(dirs[2].path()).serve_regions([1])).await;
    assert!(matches!(local, Err(Error::BadArgument(_))), "{local:?}");
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_cannot_change_a_region_claimed_from_it() {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = open(dirs[0].path(), &objects, None).await;
    let ids = create_two_regions(&a).await;
    let table = a.table("t").unwrap();
    table
        .put(Put::new("a1").add_column("f", "q", "1"))
        .await
        .unwrap();
    // B claims the first region: A's WAL writer is fenced, and A's catalog changes of it
    // (a flush lists files) are refused.
    let b = open(dirs[1].path(), &objects, Some(&BTreeSet::from([ids[0]]))).await;
    let flushed = a.admin().flush(tn()).await;
    assert!(matches!(flushed, Err(Error::Fenced { .. })), "{flushed:?}");
    assert_eq!(value(&b, "a1").await.unwrap(), Some("1".into()));
    // B's own updates go on while C serves the other region.
    let c = open(dirs[2].path(), &objects, Some(&BTreeSet::from([ids[1]]))).await;
    c.table("t")
        .unwrap()
        .put(Put::new("z1").add_column("f", "q", "2"))
        .await
        .unwrap();
    b.table("t")
        .unwrap()
        .put(Put::new("a2").add_column("f", "q", "3"))
        .await
        .unwrap();
    b.admin().flush(tn()).await.unwrap();
    c.admin().flush(tn()).await.unwrap();
    b.admin()
        .split_region(tn(), ids[0], Some(b"a15"))
        .await
        .unwrap();
    assert_eq!(value(&c, "z1").await.unwrap(), Some("2".into()));
    drop(table);
    drop(a);
    b.close().await.unwrap();
    c.close().await.unwrap();
    let e = open(dirs[3].path(), &objects, None).await;
    for (row, want) in [("a1", "1"), ("a2", "3"), ("z1", "2")] {
        assert_eq!(value(&e, row).await.unwrap(), Some(want.into()), "{row}");
    }
    assert_eq!(regions(&e).await.len(), 3);
    e.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_a_live_engine_owns_is_not_opened_and_its_owner_not_fenced() {
    let shared = SharedCoordination::new();
    let (clock, objects) = (&shared.clock, &*shared.objects);
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = |dir: &Path, process: &str| shared.config(dir, process);
    let a = Connection::open_with(config(dirs[0].path(), "rs-a"))
        .await
        .unwrap();
    let ids = create_two_regions(&a).await;
    let table = a.table("t").unwrap();
    table
        .put(Put::new("a1").add_column("f", "q", "1"))
        .await
        .unwrap();
    let refused =
        Connection::open_with(config(dirs[1].path(), "rs-b").serve_regions([ids[0]])).await;
    assert!(
        matches!(&refused, Err(Error::RegionOwned { owner, .. }) if owner == "rs-a"),
        "{refused:?}"
    );
    // Nothing was claimed or fenced: the owner goes on.
    table
        .put(Put::new("a2").add_column("f", "q", "2"))
        .await
        .unwrap();
    assert!(writers(objects).iter().all(|(_, _, fence)| fence.is_none()));
    // Once its lease expired, the region opens elsewhere with every acknowledged write.
    clock.advance(std::time::Duration::from_secs(61));
    let b = Connection::open_with(config(dirs[1].path(), "rs-b").serve_regions([ids[0]]))
        .await
        .unwrap();
    assert_eq!(value(&b, "a1").await.unwrap(), Some("1".into()));
    assert_eq!(value(&b, "a2").await.unwrap(), Some("2".into()));
    let late = table.put(Put::new("a3").add_column("f", "q", "3")).await;
    assert!(late.is_err(), "{late:?}");
    assert_eq!(value(&b, "a3").await.unwrap(), None);
    drop(table);
    drop(a);
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_pointers_follow_the_owner_at_its_generation() {
    use basalt::coord::{Coordination, RegionKey};
    let shared = SharedCoordination::new();
    let (clock, coord) = (&shared.clock, &shared.coord);
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = |dir: &Path, process: &str| shared.config(dir, process);
    // The catalog version a region's pointer names.
    let pointer = |key: RegionKey| {
        let coord = coord.clone();
        async move {
            let p = coord.manifest(&key).await.unwrap().expect("a pointer");
            let name = String::from_utf8(p.to_vec()).unwrap();
            name.strip_prefix("catalog/")
                .unwrap()
                .parse::<u64>()
                .unwrap()
        }
    };
    let a = Connection::open_with(config(dirs[0].path(), "rs-a"))
        .await
        .unwrap();
    let ids = create_two_regions(&a).await;
    let (low, high) = (RegionKey::new(tn(), ids[0]), RegionKey::new(tn(), ids[1]));
    let created = pointer(low.clone()).await;
    assert_eq!(pointer(high.clone()).await, created);
    // A flush moves the pointer of each region it changed.
    let table = a.table("t").unwrap();
    table
        .put(Put::new("a1").add_column("f", "q", "1"))
        .await
        .unwrap();
    a.admin().flush(tn()).await.unwrap();
    let flushed = pointer(low.clone()).await;
    assert!(flushed > created, "{flushed} after {created}");
    assert_eq!(
        pointer(high.clone()).await,
        created,
        "nothing flushed there"
    );
    let old = coord.owner(&low).await.unwrap().unwrap();
    // Another engine takes the region over: the pointer moves at its generation, and the
    // previous owner's lease and generation can no longer move it.
    clock.advance(std::time::Duration::from_secs(61));
    let b = Connection::open_with(config(dirs[1].path(), "rs-b").serve_regions([ids[0]]))
        .await
        .unwrap();
    let taken = pointer(low.clone()).await;
    assert!(taken > flushed, "{taken} after {flushed}");
    let new = coord.owner(&low).await.unwrap().unwrap();
    assert!(new.generation > old.generation);
    let current = coord.manifest(&low).await.unwrap();
    let stale = coord
        .swap_manifest(
            &low,
            old.lease,
            old.generation,
            current.as_deref(),
            bytes::Bytes::from_static(b"catalog/99999999999999999999"),
        )
        .await;
    assert!(
        matches!(stale, Err(Error::CoordinationConflict(_))),
        "{stale:?}"
    );
    b.table("t")
        .unwrap()
        .put(Put::new("a2").add_column("f", "q", "2"))
        .await
        .unwrap();
    b.admin().flush(tn()).await.unwrap();
    assert!(pointer(low.clone()).await > taken);
    assert_eq!(
        pointer(high).await,
        created,
        "B moves only its regions' pointers"
    );
    drop(table);
    drop(a);
    b.close().await.unwrap();
}
