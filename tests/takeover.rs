//! Takeover on a shared object store (the `object_store` crate's `InMemory`): engines share
//! one store, each with a data directory of its own; the WAL is objects (one per write, in a
//! writer folder per engine). An engine that opens fences every earlier writer (an empty
//! object at the writer's next segment id) and replays its WAL: every write an earlier
//! engine acknowledged is readable; an earlier engine still running acknowledges nothing
//! after the fence (its writes fail with `Error::Fenced`, and none of them shows); every
//! writer's segment ids are contiguous up to its fence.
//!
//! The seeded test runs generations of engines: each writes (puts and deletes, sometimes
//! with a writer task still running while the next engine opens), sometimes flushes, then
//! crashes (dropped without a close), is closed, or keeps running until the next one
//! fenced it. `BASALT_TAKEOVER_SEEDS` sets how many seeds (default 200),
//! `BASALT_TAKEOVER_SEED` runs one.

use basalt::client::{Delete, Get, Put};
use basalt::objects::{Objects, PutMode, StoreObjects};
use basalt::{ColumnFamilyDescriptor, Config, Connection, Error, TableDescriptor, TableName};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[path = "common/takeover.rs"]
mod takeover_common;
use takeover_common::{assert_contiguous, check, writers, Model};

fn tn() -> TableName {
    TableName::parse("t").unwrap()
}

fn config(dir: &Path, objects: &Arc<dyn Objects>) -> Config {
    Config::new(dir).objects(Arc::clone(objects))
}

async fn open(dir: &Path, objects: &Arc<dyn Objects>) -> Connection {
    Connection::open_with(config(dir, objects)).await.unwrap()
}

async fn value(conn: &Connection, row: &str) -> Option<Vec<u8>> {
    let r = conn.table("t").unwrap().get(Get::new(row)).await.unwrap();
    r.value("f", "q").map(|v| v.to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_engine_fences_the_first_and_serves_every_acknowledged_write() {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(dir_a.path(), &objects).await;
    a.admin()
        .create_table(TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")))
        .await
        .unwrap();
    let table_a = a.table("t").unwrap();
    for i in 0..50 {
        table_a
            .put(Put::new(format!("r{i:03}")).add_column("f", "q", format!("a{i}")))
            .await
            .unwrap();
    }
    assert!(
        !dir_a.path().join("wal").read_dir().unwrap().any(|_| true),
        "the WAL went to the data directory"
    );
    let before = writers(&*objects);
    assert_eq!(before.len(), 1);
    let (folder_a, ids_a, fence) = &before[0];
    assert_eq!(*fence, None);
    assert_eq!(
        ids_a.first(),
        Some(&1),
        "the opening segment claims the folder"
    );

    // The second engine fences the first's writer, replays its WAL, serves its rows.
    let b = open(dir_b.path(), &objects).await;
    for i in 0..50 {
        assert_eq!(
            value(&b, &format!("r{i:03}")).await,
            Some(format!("a{i}").into_bytes())
        );
    }
    let after = writers(&*objects);
    let fenced = after.iter().find(|(f, _, _)| f == folder_a).unwrap();
    assert_eq!(
        fenced.2,
        Some(ids_a.last().unwrap() + 1),
        "fence at the next id"
    );
    assert_contiguous(&*objects, "after the takeover");

    // The first, still running, acknowledges nothing more, and nothing of it shows.
    for i in 0..3 {
        let row = format!("late{i}");
        match table_a
            .put(Put::new(row.clone()).add_column("f", "q", "x"))
            .await
        {
            Err(Error::Fenced { writer, segment }) => {
                assert_eq!(&writer, folder_a);
                assert_eq!(Some(segment), fenced.2);
            }
            other => panic!("a write after the fence: {other:?}"),
        }
        assert_eq!(value(&b, &row).await, None);
    }
    // The second writes in a folder of its own.
    b.table("t")
        .unwrap()
        .put(Put::new("from-b").add_column("f", "q", "b"))
        .await
        .unwrap();
    assert_eq!(writers(&*objects).len(), 2);
    drop(table_a);
    drop(a);
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_is_kept_and_a_writer_is_fenced_once() {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = open(dirs[0].path(), &objects).await;
    a.admin()
        .create_table(TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")))
        .await
        .unwrap();
    a.table("t")
        .unwrap()
        .put(Put::new("x").add_column("f", "q", "1"))
        .await
        .unwrap();
    a.close().await.unwrap();
    let b = open(dirs[1].path(), &objects).await;
    b.close().await.unwrap();
    let c = open(dirs[2].path(), &objects).await;
    assert_eq!(value(&c, "x").await, Some(b"1".to_vec()));
    // Each earlier writer has one fence, kept (the second wrote nothing but its opening
    // segment, which recovery removed as empty).
    let w = writers(&*objects);
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].2.is_some() && w[1].2 == Some(2), "{w:?}");
    assert_eq!(w[1].1, [2], "{w:?}");
    assert_contiguous(&*objects, "three generations");
    c.close().await.unwrap();
}

/// One seed: generations of engines on one store (see the module doc).
async fn generations(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let model = Arc::new(Mutex::new(Model::default()));
    let count = rng.random_range(2..=4);
    let dirs: Vec<_> = (0..=count).map(|_| tempfile::tempdir().unwrap()).collect();
    // An engine still running from the previous generation, and its background writer.
    let mut running: Option<(Connection, tokio::task::JoinHandle<()>)> = None;
    for (generation, dir) in dirs.iter().enumerate().take(count) {
        let context = format!("seed {seed}, generation {generation}");
        let conn = open(dir.path(), &objects).await;
        println!("{context}: opened: {:?}", writers(&*objects));
        if let Some((old, writer)) = running.take() {
            // Whatever the old engine's writer did, it stops at the fence.
            writer.await.unwrap();
            let late = old
                .table("t")
                .unwrap()
                .put(Put::new("late").add_column("f", "q", "x"))
                .await;
            assert!(
                matches!(late, Err(Error::Fenced { .. })),
                "{context}: {late:?}"
            );
            model.lock().unwrap().never.insert("late".into());
            drop(old);
        }
        if generation == 0 {
            conn.admin()
                .create_table(TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")))
                .await
                .unwrap();
        }
        let acknowledged = model.lock().unwrap().clone();
        check(&conn, &acknowledged, &context).await;
        assert_contiguous(&*objects, &context);
        let table = conn.table("t").unwrap();
        for i in 0..rng.random_range(1..40) {
            let row = format!("g{generation}-{i:02}");
            let value = format!("v{seed}-{generation}-{i}");
            table
                .put(Put::new(row.clone()).add_column("f", "q", value.clone()))
                .await
                .unwrap();
            model.lock().unwrap().rows.insert(row, Some(value));
            if rng.random_bool(0.15) {
                let victim = {
                    let m = model.lock().unwrap();
                    let present: Vec<String> = m
                        .rows
                        .iter()
                        .filter(|(_, v)| v.is_some())
                        .map(|(r, _)| r.clone())
                        .collect();
                    present[rng.random_range(0..present.len())].clone()
                };
                table.delete(Delete::new(victim.clone())).await.unwrap();
                println!("{context}: deleted {victim}");
                model.lock().unwrap().rows.insert(victim, None);
            }
        }
        if rng.random_bool(0.3) {
            conn.admin().flush(&tn()).await.unwrap();
            println!("{context}: flushed");
        }
        drop(table);
        let ending = rng.random_range(0..3);
        println!(
            "{context}: ends {}",
            ["in a crash", "closed", "running"][ending]
        );
        match ending {
            0 => drop(conn), // a crash: nothing closed
            1 => conn.close().await.unwrap(),
            _ => {
                // Keeps running, a writer task putting until the next engine fences it.
                let table = conn.table("t").unwrap();
                let model = Arc::clone(&model);
                let writer = tokio::spawn(async move {
                    for i in 0.. {
                        let row = format!("g{generation}-tail-{i:04}");
                        let put = Put::new(row.clone()).add_column("f", "q", "tail");
                        match table.put(put).await {
                            Ok(()) => {
                                model.lock().unwrap().rows.insert(row, Some("tail".into()));
                            }
                            Err(Error::Fenced { .. }) => {
                                model.lock().unwrap().never.insert(row);
                                return;
                            }
                            Err(e) => panic!("tail writer: {e}"),
                        }
                        tokio::task::yield_now().await;
                    }
                });
                running = Some((conn, writer));
            }
        }
    }
    // The last engine's successor checks everything.
    let last = open(dirs[count].path(), &objects).await;
    println!("seed {seed}: the end: {:?}", writers(&*objects));
    if let Some((old, writer)) = running.take() {
        writer.await.unwrap();
        drop(old);
    }
    let acknowledged = model.lock().unwrap().clone();
    check(&last, &acknowledged, &format!("seed {seed}, the end")).await;
    assert_contiguous(&*objects, &format!("seed {seed}, the end"));
    let all = writers(&*objects);
    let (_, earlier) = all.split_last().unwrap();
    assert_eq!(
        earlier.len(),
        count,
        "seed {seed}: one writer per generation"
    );
    for (folder, _, fence) in earlier {
        assert!(fence.is_some(), "seed {seed}: {folder} was not fenced");
    }
    last.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_generations_lose_no_acknowledged_write() {
    let seeds: Vec<u64> = match std::env::var("BASALT_TAKEOVER_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => {
            let n = std::env::var("BASALT_TAKEOVER_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(200);
            (0..n).collect()
        }
    };
    for seed in seeds {
        generations(seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_finds_its_next_id_taken_fails_typed_and_acknowledges_nothing_more() {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), &objects).await;
    a.admin()
        .create_table(TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")))
        .await
        .unwrap();
    let t = a.table("t").unwrap();
    t.put(Put::new("before").add_column("f", "q", "1"))
        .await
        .unwrap();
    // A fencer that never opens an engine: the next id, taken by hand.
    let (folder, ids, _) = writers(&*objects).remove(0);
    let next = ids.last().unwrap() + 1;
    objects
        .put(&format!("{folder}/{next:020}"), b"", PutMode::Create)
        .unwrap();
    for _ in 0..2 {
        let e = t
            .put(Put::new("after").add_column("f", "q", "2"))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Fenced { segment, .. } if *segment == next),
            "{e}"
        );
    }
    drop(t);
    drop(a);
    let b = open(tempfile::tempdir().unwrap().path(), &objects).await;
    assert_eq!(value(&b, "before").await, Some(b"1".to_vec()));
    assert_eq!(value(&b, "after").await, None);
    b.close().await.unwrap();
}

/// The store files (`data/{id}-g{generation}.sf`) of each engine carry the generation its
/// open raised every region to: the first engine writes at generation 1, the one that took
/// the store over at 2, so the two never write the same name; a flush of the fenced first
/// engine lists nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_files_carry_the_generation_each_takeover_raises() {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let generations = |objects: &dyn Objects| -> BTreeSet<String> {
        objects
            .list("data")
            .unwrap()
            .iter()
            .map(|n| n.rsplit_once("-g").unwrap().1.to_string())
            .collect()
    };
    let a = open(dir_a.path(), &objects).await;
    a.admin()
        .create_table(TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")))
        .await
        .unwrap();
    let table_a = a.table("t").unwrap();
    table_a
        .put(Put::new("r1").add_column("f", "q", "a"))
        .await
        .unwrap();
    a.admin().flush(&tn()).await.unwrap();
    assert_eq!(generations(&*objects), BTreeSet::from(["1.sf".to_string()]));

    let b = open(dir_b.path(), &objects).await;
    b.table("t")
        .unwrap()
        .put(Put::new("r2").add_column("f", "q", "b"))
        .await
        .unwrap();
    b.admin().flush(&tn()).await.unwrap();
    assert_eq!(
        generations(&*objects),
        BTreeSet::from(["1.sf".to_string(), "2.sf".to_string()])
    );
    // The fenced engine acknowledges no write.
    assert!(matches!(
        table_a
            .put(Put::new("late").add_column("f", "q", "x"))
            .await,
        Err(Error::Fenced { .. })
    ));
    drop(table_a);
    drop(a);
    assert_eq!(value(&b, "r1").await, Some(b"a".to_vec()));
    b.close().await.unwrap();
    // A third open raises the generation again.
    let c = open(dir_a.path(), &objects).await;
    c.table("t")
        .unwrap()
        .put(Put::new("r3").add_column("f", "q", "c"))
        .await
        .unwrap();
    c.admin().flush(&tn()).await.unwrap();
    assert!(generations(&*objects).contains("3.sf"));
    for row in ["r1", "r2", "r3"] {
        assert!(value(&c, row).await.is_some(), "{row}");
    }
    c.close().await.unwrap();
}

/// Two engines opening one store at the same moment: whichever opens writes, and every
/// write either acknowledged is readable by an engine opened afterwards (an open that may
/// have been missed by the other's fencing fails instead of acknowledging). 40 rounds
/// (`BASALT_CONCURRENT_OPEN_ROUNDS` sets another count).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_opens_never_acknowledge_a_write_the_next_engine_misses() {
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    {
        let first = open(dirs[0].path(), &objects).await;
        first
            .admin()
            .create_table(TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")))
            .await
            .unwrap();
        first.close().await.unwrap();
    }
    let acked: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let mut failed_opens = 0;
    let rounds: usize = std::env::var("BASALT_CONCURRENT_OPEN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    for round in 0..rounds {
        let tasks: Vec<_> = (0..2)
            .map(|k| {
                let (objects, acked) = (Arc::clone(&objects), Arc::clone(&acked));
                let dir = dirs[k].path().to_path_buf();
                tokio::spawn(async move {
                    let Ok(conn) = Connection::open_with(config(&dir, &objects)).await else {
                        return false;
                    };
                    let t = conn.table("t").unwrap();
                    for i in 0..10 {
                        let row = format!("r{round}-{k}-{i}");
                        let put = Put::new(row.clone()).add_column("f", "q", "v");
                        match t.put(put).await {
                            Ok(()) => acked.lock().unwrap().push(row),
                            Err(Error::Fenced { .. }) => break,
                            Err(e) => panic!("{row}: {e}"),
                        }
                    }
                    drop(t);
                    drop(conn); // a crash: nothing flushed
                    true
                })
            })
            .collect();
        for t in tasks {
            if !t.await.unwrap() {
                failed_opens += 1;
            }
        }
        let check = open(dirs[2].path(), &objects).await;
        let rows: BTreeSet<String> = takeover_common::rows(&check).await.into_keys().collect();
        for row in acked.lock().unwrap().iter() {
            assert!(
                rows.contains(row),
                "round {round}: acknowledged {row} is lost"
            );
        }
        check.close().await.unwrap();
        assert_contiguous(&*objects, &format!("round {round}"));
    }
    // Both engines of a round may open (one fenced the other) or one may fail its open.
    assert!(failed_opens < 2 * rounds, "every open failed");
}
