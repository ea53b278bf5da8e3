//! Regions opened and closed while engines run (`Engine::open_region`, `close_region`):
//! what a region server does for the master's assignments. Engines share one `InMemory`
//! object store and one coordination store on a manual clock, each with a data directory
//! of its own, and each opened serving no region (`Config::serve_regions([])`).
//!
//! Shown: a region moves between two live engines and back with every acknowledged write,
//! no WAL writer fenced (a graceful close leaves nothing to replay), the other regions of
//! both engines writable throughout; a region another live engine owns is refused; a
//! crashed engine's region opens elsewhere with its unflushed edits replayed, its writer
//! fenced, and later writes there numbered above the replayed ones (a put at the same
//! timestamp wins); a table created by one engine is found by another through
//! `refresh_catalog`; bad calls get typed errors.

use basalt::client::{Get, Put};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, TableDescriptor, TableName,
};
use std::path::Path;
use std::time::Duration;

#[path = "common/takeover.rs"]
#[allow(dead_code)] // this test reads the writer folders only
mod takeover_common;
use takeover_common::{writers, SharedCoordination};

fn tn() -> TableName {
    TableName::parse("t").unwrap()
}

/// An engine of process `process` in `dir` of `shared`, serving no region yet.
async fn engine(shared: &SharedCoordination, dir: &Path, process: &str) -> Connection {
    let config = shared.config(dir, process).serve_regions([]);
    Connection::open_with(config).await.unwrap()
}

/// Creates `t` with regions `[, g)`, `[g, p)`, `[p, )` through `conn`; returns their ids.
async fn create_table(conn: &Connection) -> Vec<u64> {
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(tn()).family(ColumnFamilyDescriptor::new("f")),
            PreSplit::Keys(vec![b"g".to_vec(), b"p".to_vec()]),
        )
        .await
        .unwrap();
    conn.admin()
        .regions(tn())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect()
}

async fn put(conn: &Connection, row: &str, value: &str) -> basalt::Result<()> {
    conn.table("t")?
        .put(Put::new(row).add_column("f", "q", value))
        .await
}

async fn value(conn: &Connection, row: &str) -> basalt::Result<Option<String>> {
    let r = conn.table("t")?.get(Get::new(row)).await?;
    Ok(r.value("f", "q")
        .map(|v| String::from_utf8(v.to_vec()).unwrap()))
}

fn not_served<T: std::fmt::Debug>(r: basalt::Result<T>) -> bool {
    matches!(r, Err(Error::RegionNotServed { .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_moves_between_live_engines_and_back_with_every_write() {
    let shared = SharedCoordination::new();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    let b = engine(&shared, dirs[1].path(), "rs-b").await;
    let ids = create_table(&a).await;
    // The creator serves every region of its new table.
    assert_eq!(a.engine().served_regions().len(), 3);
    for (i, row) in ["a", "h", "q"].iter().enumerate() {
        for n in 0..50 {
            put(&a, &format!("{row}{n:03}"), &format!("v{i}.{n}"))
                .await
                .unwrap();
        }
    }
    let (ea, eb) = (a.engine().clone(), b.engine().clone());
    // B learns of the table only by re-reading the catalog; every region is A's.
    let unknown = value(&b, "h001").await;
    assert!(
        matches!(unknown, Err(Error::TableNotFound(_))),
        "{unknown:?}"
    );
    eb.refresh_catalog().unwrap();
    assert!(not_served(value(&b, "h001").await));
    let owned = eb.open_region(&tn(), ids[1]).await;
    assert!(
        matches!(&owned, Err(Error::RegionOwned { owner, .. }) if owner == "rs-a"),
        "{owned:?}"
    );
    assert_eq!(value(&a, "h001").await.unwrap(), Some("v1.1".into()));

    // A gives the middle region up; B opens it: nothing to replay, nobody fenced.
    ea.close_region(&tn(), ids[1]).await.unwrap();
    assert!(not_served(value(&a, "h001").await));
    assert!(not_served(put(&a, "h999", "x").await));
    ea.close_region(&tn(), ids[1]).await.unwrap(); // closing it again does nothing
    eb.open_region(&tn(), ids[1]).await.unwrap();
    eb.open_region(&tn(), ids[1]).await.unwrap(); // nor opening it again
    assert_eq!(eb.served_regions(), vec![(tn(), ids[1])]);
    for n in 0..50 {
        let row = format!("h{n:03}");
        assert_eq!(value(&b, &row).await.unwrap(), Some(format!("v1.{n}")));
    }
    assert!(
        writers(&*shared.objects)
            .iter()
            .all(|(_, _, f)| f.is_none()),
        "a graceful move fences nobody: {:?}",
        writers(&*shared.objects)
    );
    // Both go on writing their own regions.
    put(&b, "h100", "b").await.unwrap();
    put(&a, "a100", "a").await.unwrap();
    put(&a, "q100", "a").await.unwrap();
    assert!(not_served(put(&b, "a101", "b").await));

    // Back to A, through a flush-less close on B's side (the edit is in B's MemStore).
    eb.close_region(&tn(), ids[1]).await.unwrap();
    ea.open_region(&tn(), ids[1]).await.unwrap();
    assert_eq!(value(&a, "h100").await.unwrap(), Some("b".into()));
    assert_eq!(value(&a, "h007").await.unwrap(), Some("v1.7".into()));
    put(&a, "h101", "a").await.unwrap();
    assert!(writers(&*shared.objects)
        .iter()
        .all(|(_, _, f)| f.is_none()));

    a.close().await.unwrap();
    b.close().await.unwrap();
    // An engine opening the whole store afterwards finds everything.
    let c = Connection::open_with(Config::new(dirs[2].path()).objects(shared.objects.clone()))
        .await
        .unwrap();
    for (row, want) in [
        ("h100", "b"),
        ("h101", "a"),
        ("a100", "a"),
        ("q049", "v2.49"),
    ] {
        assert_eq!(value(&c, row).await.unwrap(), Some(want.into()), "{row}");
    }
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_engines_region_opens_elsewhere_with_its_unflushed_edits() {
    let shared = SharedCoordination::new();
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    let ids = create_table(&a).await;
    // Many writes on A, so that its sequence ids run far ahead of B's.
    for n in 0..300 {
        put(&a, &format!("q{n:03}"), &format!("a{n}"))
            .await
            .unwrap();
    }
    let same_ts = |v: &str| Put::new("r000").add_column_ts("f", "q", 5, v.as_bytes());
    a.table("t").unwrap().put(same_ts("from-a")).await.unwrap();
    // A stops answering (its process is gone: nothing flushed, nothing released), and
    // its lease runs out.
    let ta = a.table("t").unwrap();
    std::mem::forget(a);
    shared.clock.advance(Duration::from_secs(61));
    let b = engine(&shared, dirs[1].path(), "rs-b").await;
    let eb = b.engine().clone();
    eb.open_region(&tn(), ids[2]).await.unwrap();
    for n in 1..300 {
        let row = format!("q{n:03}");
        assert_eq!(
            value(&b, &row).await.unwrap(),
            Some(format!("a{n}")),
            "{row}"
        );
    }
    // A's writer is fenced: it acknowledges nothing more, and nothing of it shows.
    let fenced = writers(&*shared.objects)
        .iter()
        .filter(|(_, _, f)| f.is_some())
        .count();
    assert_eq!(fenced, 1, "{:?}", writers(&*shared.objects));
    let late = ta.put(Put::new("q500").add_column("f", "q", "late")).await;
    assert!(late.is_err(), "{late:?}");
    assert_eq!(value(&b, "q500").await.unwrap(), None);
    // B's write at the same timestamp is numbered after the replayed one, so it wins.
    let get_at = |t: basalt::Table| async move {
        let r = t.get(Get::new("r000").max_versions(1)).await.unwrap();
        r.value("f", "q").map(|v| v.to_vec())
    };
    assert_eq!(
        get_at(b.table("t").unwrap()).await,
        Some(b"from-a".to_vec())
    );
    b.table("t").unwrap().put(same_ts("from-b")).await.unwrap();
    assert_eq!(
        get_at(b.table("t").unwrap()).await,
        Some(b"from-b".to_vec())
    );
    // The other regions open too, and B serves all three.
    eb.open_region(&tn(), ids[0]).await.unwrap();
    eb.open_region(&tn(), ids[1]).await.unwrap();
    assert_eq!(eb.served_regions().len(), 3);
    put(&b, "a1", "b").await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_get_typed_errors() {
    let shared = SharedCoordination::new();
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    let ids = create_table(&a).await;
    let ea = a.engine().clone();
    let missing = ea.open_region(&tn(), 9_999).await;
    assert!(
        matches!(missing, Err(Error::RegionNotFound { .. })),
        "{missing:?}"
    );
    let unknown = ea
        .open_region(&TableName::parse("nope").unwrap(), ids[0])
        .await;
    assert!(
        matches!(unknown, Err(Error::TableNotFound(_))),
        "{unknown:?}"
    );
    let closing = ea.close_region(&tn(), 9_999).await;
    assert!(
        matches!(closing, Err(Error::RegionNotFound { .. })),
        "{closing:?}"
    );
    // An engine of a local directory serves everything: it opens and closes nothing.
    let local = Connection::open(dirs[1].path()).await.unwrap();
    let refused = local.engine().open_region(&tn(), 1).await;
    assert!(matches!(refused, Err(Error::BadArgument(_))), "{refused:?}");
    local.close().await.unwrap();
    a.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writers_wal_is_collected_once_no_region_needs_it() {
    let shared = SharedCoordination::new();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    let ids = create_table(&a).await;
    for row in ["a1", "h1", "q1"] {
        put(&a, row, "from-a").await.unwrap();
    }
    std::mem::forget(a);
    shared.clock.advance(Duration::from_secs(61));
    let b = engine(&shared, dirs[1].path(), "rs-b").await;
    let eb = b.engine().clone();
    // Nothing is fenced yet: nothing to collect (A may be alive as far as anyone knows).
    let none = eb.collect_wal_garbage().unwrap();
    assert!(
        none.removed.is_empty() && none.still_needed.is_empty(),
        "{none:?}"
    );
    let before = writers(&*shared.objects);
    assert_eq!(before.len(), 2, "{before:?}");

    // One region taken over: A is fenced, but its other regions still name it.
    eb.open_region(&tn(), ids[2]).await.unwrap();
    let dead: Vec<String> = writers(&*shared.objects)
        .into_iter()
        .filter(|(_, _, fence)| fence.is_some())
        .map(|(folder, _, _)| folder)
        .collect();
    assert_eq!(dead.len(), 1);
    let kept = eb.collect_wal_garbage().unwrap();
    assert!(kept.removed.is_empty(), "{kept:?}");
    assert_eq!(kept.still_needed.len(), 1, "{kept:?}");
    assert!(writers(&*shared.objects)
        .iter()
        .any(|(folder, _, _)| *folder == dead[0]));

    // Every region taken over and flushed: no region names A, its folder goes.
    eb.open_region(&tn(), ids[0]).await.unwrap();
    eb.open_region(&tn(), ids[1]).await.unwrap();
    let gone = eb.collect_wal_garbage().unwrap();
    assert_eq!(gone.removed.len(), 1, "{gone:?}");
    assert!(gone.objects >= 2, "segments and the fence: {gone:?}");
    let left = writers(&*shared.objects);
    assert!(
        left.iter().all(|(folder, _, _)| *folder != dead[0]),
        "{left:?}"
    );
    assert_eq!(left.len(), 1, "B's own folder stays: {left:?}");
    // Idempotent, and B's live folder is never touched.
    assert_eq!(eb.collect_wal_garbage().unwrap(), Default::default());
    for row in ["a1", "h1", "q1"] {
        assert_eq!(value(&b, row).await.unwrap().as_deref(), Some("from-a"));
    }
    put(&b, "a2", "from-b").await.unwrap();
    b.close().await.unwrap();

    // A new engine reads everything without A's WAL.
    let c = Connection::open_with(shared.config(dirs[2].path(), "rs-c"))
        .await
        .unwrap();
    for (row, v) in [
        ("a1", "from-a"),
        ("h1", "from-a"),
        ("q1", "from-a"),
        ("a2", "from-b"),
    ] {
        assert_eq!(value(&c, row).await.unwrap().as_deref(), Some(v), "{row}");
    }
    c.close().await.unwrap();
}
