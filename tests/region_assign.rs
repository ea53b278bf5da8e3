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
//! `refresh_catalog`; bad calls get typed errors; what a dead writer left (its WAL, its
//! store files no region lists) is collected once no region needs it, and a collection
//! cut short after any delete is finished by the next; a clone of a snapshot another engine
//! deleted since is refused (its files may be gone).

use basalt::client::{Get, Put};
use basalt::objects::{Objects, PutMode, StoreObjects};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, PreSplit, TableDescriptor, TableName,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
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
    let none = eb.collect_garbage().unwrap();
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
    let kept = eb.collect_garbage().unwrap();
    assert!(kept.removed.is_empty(), "{kept:?}");
    assert_eq!(kept.still_needed.len(), 1, "{kept:?}");
    assert!(writers(&*shared.objects)
        .iter()
        .any(|(folder, _, _)| *folder == dead[0]));

    // Every region taken over and flushed: no region names A, its segments go and its
    // fence stays (a paused A that comes back must find it).
    eb.open_region(&tn(), ids[0]).await.unwrap();
    eb.open_region(&tn(), ids[1]).await.unwrap();
    let gone = eb.collect_garbage().unwrap();
    assert_eq!(gone.removed.len(), 1, "{gone:?}");
    assert!(gone.objects >= 1, "its segments: {gone:?}");
    let left = writers(&*shared.objects);
    let a_left = left
        .iter()
        .find(|(folder, _, _)| *folder == dead[0])
        .unwrap();
    assert_eq!(a_left.1.len(), 1, "only the fence: {left:?}");
    assert!(a_left.2.is_some(), "{left:?}");
    assert_eq!(left.len(), 2, "B's own folder stays: {left:?}");
    // Idempotent, and B's live folder is never touched.
    assert_eq!(eb.collect_garbage().unwrap(), Default::default());
    for row in ["a1", "h1", "q1"] {
        assert_eq!(value(&b, row).await.unwrap().as_deref(), Some("from-a"));
    }
    put(&b, "a2", "from-b").await.unwrap();
    b.close().await.unwrap();

    // A new engine reads everything without A's WAL.
    let expected = [
        ("a1", "from-a"),
        ("h1", "from-a"),
        ("q1", "from-a"),
        ("a2", "from-b"),
    ];
    reads_all(&shared, dirs[2].path(), &expected).await;
}

/// Opens a new engine of the whole store in `dir` (it fences every other one) and checks
/// it reads each row's value as `expected`.
async fn reads_all(shared: &SharedCoordination, dir: &Path, expected: &[(&str, &str)]) {
    let c = Connection::open_with(shared.config(dir, "rs-c"))
        .await
        .unwrap();
    for (row, v) in expected {
        assert_eq!(value(&c, row).await.unwrap().as_deref(), Some(*v), "{row}");
    }
    c.close().await.unwrap();
}

/// An object store whose deletes fail once `allowed` of them went through (`-1`: never):
/// a collection cut short by a crash.
#[derive(Debug)]
struct CutDeletes {
    inner: Arc<dyn Objects>,
    allowed: AtomicI64,
}

impl Objects for CutDeletes {
    fn writer(&self, name: &str) -> std::io::Result<Box<dyn basalt::objects::ObjectWriter>> {
        self.inner.writer(name)
    }
    fn open(&self, name: &str) -> std::io::Result<Arc<dyn basalt::fs::ReadFile>> {
        self.inner.open(name)
    }
    fn list(&self, folder: &str) -> std::io::Result<Vec<String>> {
        self.inner.list(folder)
    }
    fn delete(&self, name: &str) -> std::io::Result<()> {
        let left = self.allowed.load(Ordering::SeqCst);
        if left == 0 {
            return Err(std::io::Error::other("cut short"));
        }
        if left > 0 {
            self.allowed.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.delete(name)
    }
    fn locate(&self, name: &str) -> std::path::PathBuf {
        self.inner.locate(name)
    }
}

/// The name of store file `id` written at the generation of `like` (`data/{id}-g{g}.sf`).
fn file_like(like: &str, id: u64) -> String {
    format!("data/{id:016}{}", &like["data/".len() + 16..])
}

fn store_file_ids(objects: &dyn Objects) -> BTreeMap<u64, String> {
    objects
        .list("data")
        .unwrap()
        .into_iter()
        .map(|n| (n["data/".len()..][..16].parse().unwrap(), n))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writers_unlisted_store_files_are_collected_even_when_cut_short() {
    let cut = Arc::new(CutDeletes {
        inner: Arc::new(StoreObjects::in_memory()),
        allowed: AtomicI64::new(-1),
    });
    let mut shared = SharedCoordination::new();
    shared.objects = cut.clone();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    let ids = create_table(&a).await;
    for row in ["a1", "h1", "q1"] {
        put(&a, row, "from-a").await.unwrap();
    }
    a.admin().flush(tn()).await.unwrap();
    put(&a, "a2", "from-a").await.unwrap();
    // A crash between a flush's file and its catalog update: a file of A's block of ids
    // that no region lists. Beside it, a file of no recorded block (a catalog older than
    // format 14 could have left it): never collected.
    let listed_by_a = store_file_ids(&*shared.objects);
    let (&a_max, a_name) = listed_by_a.last_key_value().unwrap();
    let a_orphan = file_like(a_name, a_max + 100);
    let unknown = file_like(a_name, 5);
    for name in [&a_orphan, &unknown] {
        shared
            .objects
            .put(name, b"written, never listed", PutMode::Create)
            .unwrap();
    }
    std::mem::forget(a);
    shared.clock.advance(Duration::from_secs(61));

    let b = engine(&shared, dirs[1].path(), "rs-b").await;
    let eb = b.engine().clone();
    // A is not fenced yet: it may be alive, its unlisted file may be a flush in progress.
    let early = eb.collect_garbage_after(Duration::ZERO).unwrap();
    assert_eq!(early, Default::default());
    assert!(shared.objects.exists(&a_orphan).unwrap());
    for id in &ids {
        eb.open_region(&tn(), *id).await.unwrap();
    }
    put(&b, "h2", "from-b").await.unwrap();
    b.admin().flush(tn()).await.unwrap();
    // B is alive: an unlisted file of its block stays (its flush may be in progress).
    let b_files = store_file_ids(&*shared.objects);
    let (&b_max, b_name) = b_files.last_key_value().unwrap();
    assert!(b_max > a_max + 100, "B's block comes after A's");
    let b_pending = file_like(b_name, b_max + 100);
    shared
        .objects
        .put(&b_pending, b"in progress", PutMode::Create)
        .unwrap();

    // Within the grace period (a scan may still read a file a compaction replaced), the
    // file waits, and so do A's blocks and segments.
    let waiting = eb.collect_garbage().unwrap();
    assert_eq!(waiting.waiting, vec![a_orphan.clone()], "{waiting:?}");
    assert!(waiting.store_files.is_empty() && waiting.removed.is_empty());
    assert!(shared.objects.exists(&a_orphan).unwrap());

    // Collections cut short after every single delete, each finished by the next: no file
    // but A's orphan ever goes, and A's segments go in the end (its fence stays).
    let before: BTreeSet<String> = shared.objects.list("data").unwrap().into_iter().collect();
    let expected: BTreeSet<String> = before.iter().filter(|n| **n != a_orphan).cloned().collect();
    let dead_folder: Vec<String> = writers(&*shared.objects)
        .into_iter()
        .filter(|(_, _, fence)| fence.is_some())
        .map(|(folder, _, _)| folder)
        .collect();
    assert_eq!(dead_folder.len(), 1, "A's folder, fenced by the takeover");
    let mut cuts = 0;
    let last = loop {
        cut.allowed.store(1, Ordering::SeqCst);
        let run = eb.collect_garbage_after(Duration::ZERO);
        cut.allowed.store(-1, Ordering::SeqCst);
        let now: BTreeSet<String> = shared.objects.list("data").unwrap().into_iter().collect();
        assert!(now.is_superset(&expected), "after {cuts} cuts: {now:?}");
        match run {
            Ok(done) => break done,
            Err(_) => cuts += 1,
        }
        assert!(cuts < 100, "a collection never finished");
    };
    assert!(
        cuts >= 1,
        "the orphan, then A's segments one by one: {cuts}"
    );
    assert_eq!(last.removed.len(), 1, "{last:?}");
    let now: BTreeSet<String> = shared.objects.list("data").unwrap().into_iter().collect();
    assert_eq!(now, expected);
    let left = writers(&*shared.objects);
    let a_left = left.iter().find(|(f, _, _)| *f == dead_folder[0]).unwrap();
    assert_eq!(a_left.1.len(), 1, "only the fence: {left:?}");
    // Nothing left: idempotent.
    assert_eq!(
        eb.collect_garbage_after(Duration::ZERO).unwrap(),
        Default::default()
    );
    for (row, v) in [("a1", "from-a"), ("a2", "from-a"), ("h2", "from-b")] {
        assert_eq!(value(&b, row).await.unwrap().as_deref(), Some(v), "{row}");
    }
    b.close().await.unwrap();
    // Every listed file is there: a new engine of the whole store reads everything.
    let expected = [
        ("a1", "from-a"),
        ("h1", "from-a"),
        ("q1", "from-a"),
        ("a2", "from-a"),
        ("h2", "from-b"),
    ];
    reads_all(&shared, dirs[2].path(), &expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_of_a_snapshot_another_engine_deleted_is_refused() {
    let shared = SharedCoordination::new();
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    create_table(&a).await;
    for row in ["a1", "h1", "q1"] {
        put(&a, row, "old").await.unwrap();
    }
    a.admin().flush(tn()).await.unwrap();
    a.admin().snapshot("snap", tn()).await.unwrap();
    // The table moves past the snapshot's files: only the snapshot lists them.
    for row in ["a1", "h1", "q1"] {
        put(&a, row, "new").await.unwrap();
    }
    a.admin().flush(tn()).await.unwrap();
    a.admin().major_compact(tn()).await.unwrap();
    // B reads the catalog while the snapshot is there; A deletes it (and its files).
    let b = engine(&shared, dirs[1].path(), "rs-b").await;
    a.admin().delete_snapshot("snap").await.unwrap();
    let refused = b.admin().clone_snapshot("snap", "copy").await;
    assert!(
        matches!(refused, Err(Error::SnapshotNotFound(_))),
        "{refused:?}"
    );
    assert!(
        b.admin().regions("copy").await.is_err(),
        "no table was cloned"
    );
    for row in ["a1", "h1", "q1"] {
        assert_eq!(value(&a, row).await.unwrap().as_deref(), Some("new"));
    }
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_list_is_brought_in_line_with_the_catalog() {
    use basalt::coord::{Coordination, RegionRecord};
    let shared = SharedCoordination::new();
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    let ids = create_table(&a).await;
    let b = engine(&shared, dirs[1].path(), "rs-b").await;
    let listed = |coord: Arc<basalt::coord::MemoryCoordination>| async move {
        let mut ids: Vec<u64> = coord
            .regions(&tn())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.key.region)
            .collect();
        ids.sort();
        ids
    };
    // In line already: nothing to do.
    assert_eq!(b.engine().sync_region_listing(&tn()).await.unwrap(), (0, 0));
    // A region missing from the list, another listed with other bounds, a third the
    // catalog never had: listed again, corrected, removed.
    let records = shared.coord.regions(&tn()).await.unwrap();
    shared
        .coord
        .remove_region(&records[0].key, records[0].revision)
        .await
        .unwrap();
    let mut wrong = records[1].clone();
    wrong.end = "zz".into();
    shared
        .coord
        .put_region(wrong, Some(records[1].revision))
        .await
        .unwrap();
    let stranger = RegionRecord {
        key: basalt::coord::RegionKey::new(tn(), 9_999),
        start: "x".into(),
        end: Default::default(),
        revision: 0,
    };
    shared.coord.put_region(stranger, None).await.unwrap();
    assert_eq!(b.engine().sync_region_listing(&tn()).await.unwrap(), (2, 1));
    assert_eq!(listed(shared.coord.clone()).await, ids);
    let fixed = shared.coord.regions(&tn()).await.unwrap();
    let second = fixed.iter().find(|r| r.key == records[1].key).unwrap();
    assert_eq!(second.end, records[1].end);
    // A dropped table's leftover records go.
    a.admin().disable_table(tn()).await.unwrap();
    a.admin().delete_table(tn()).await.unwrap();
    shared
        .coord
        .put_region(records[2].clone(), None)
        .await
        .unwrap();
    assert_eq!(b.engine().sync_region_listing(&tn()).await.unwrap(), (0, 1));
    assert!(listed(shared.coord.clone()).await.is_empty());
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanly_closed_engines_wal_is_collected() {
    let shared = SharedCoordination::new();
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = engine(&shared, dirs[0].path(), "rs-a").await;
    let ids = create_table(&a).await;
    for row in ["a1", "h1", "q1"] {
        put(&a, row, "from-a").await.unwrap();
    }
    // A region server drains: every region closed cleanly, then the engine.
    for id in &ids {
        a.engine().close_region(&tn(), *id).await.unwrap();
    }
    a.close().await.unwrap();
    let fenced: Vec<(String, Vec<u64>, Option<u64>)> = writers(&*shared.objects)
        .into_iter()
        .filter(|(_, _, fence)| fence.is_some())
        .collect();
    assert_eq!(fenced.len(), 1, "the closed engine fenced its own WAL");
    let b = engine(&shared, dirs[1].path(), "rs-b").await;
    let eb = b.engine().clone();
    let gone = eb.collect_garbage().unwrap();
    assert_eq!(gone.removed.len(), 1, "{gone:?}");
    let left = writers(&*shared.objects);
    let a_left = left.iter().find(|(f, _, _)| *f == fenced[0].0).unwrap();
    assert_eq!(a_left.1.len(), 1, "only the fence: {left:?}");
    for id in &ids {
        eb.open_region(&tn(), *id).await.unwrap();
    }
    for row in ["a1", "h1", "q1"] {
        assert_eq!(value(&b, row).await.unwrap().as_deref(), Some("from-a"));
    }
    b.close().await.unwrap();
}
