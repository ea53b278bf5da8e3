//! Table snapshots (issue 46): a snapshot holds its tables at its read point; its files
//! survive compactions, splits, merges and drops of the source, and go with the last table
//! or snapshot that lists them (the directory's size goes back); clones share its files and
//! diverge; restore rolls tables back after a fail-safe snapshot; an indexed table's snapshot
//! holds its index tables and restores consistent; misuse is a typed error; a crash at any
//! sync point of a snapshot, clone, restore or delete leaves a whole state.

use basalt::client::Delete;
use basalt::coprocessors::Registry;
use basalt::fs::{CrashKind, FaultFs};
use basalt::index::{IndexAdmin, IndexDef, Query};
use basalt::{ColumnFamilyDescriptor, Config, Connection, Error, TableDescriptor, TableName};
use std::path::Path;
use std::sync::Arc;

use crate::table_rows;
use table_rows::{put_rows, rows, table, Rows};

/// Bytes of the store files under `dir/data`.
fn data_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("data"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_files_survive_compaction_split_merge_and_drop_and_go_with_the_last_reference() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let admin = conn.admin();
    admin.create_table(table("t")).await.unwrap();
    put_rows(&conn, "t", 0..200, "v1").await;
    admin.flush("t").await.unwrap();
    // Some of what the snapshot holds is only in the MemStore when it is taken.
    put_rows(&conn, "t", 200..250, "v1").await;
    let expected = rows(&conn, "t").await;
    let snap = admin.snapshot("s1", "t").await.unwrap();
    assert_eq!(snap.tables, vec!["default:t".to_string()]);
    assert_eq!((snap.files >= 2, snap.own_size), (true, 0));
    assert_eq!(snap.shared_size, snap.size);

    // The source diverges: overwrites, deletes, compactions, a split and a merge.
    put_rows(&conn, "t", 0..250, "v2").await;
    let t = conn.table("t").unwrap();
    for i in (0..250).step_by(7) {
        t.delete(Delete::new(format!("r{i:04}"))).await.unwrap();
    }
    admin.flush("t").await.unwrap();
    admin.major_compact("t").await.unwrap();
    let region = admin.regions("t").await.unwrap()[0].id;
    let (lo, hi) = admin
        .split_region("t", region, Some(b"r0100"))
        .await
        .unwrap()
        .unwrap();
    admin.major_compact("t").await.unwrap();
    admin.merge_regions("t", lo, hi).await.unwrap();
    admin.major_compact("t").await.unwrap();
    let diverged = rows(&conn, "t").await;
    assert_ne!(diverged, expected);
    let d = admin.describe_snapshot("s1").await.unwrap();
    assert_eq!((d.own_size, d.shared_size), (d.size, 0), "{d:?}");

    // A clone reads the snapshot's state from the snapshot's own files.
    admin.clone_snapshot("s1", "c1").await.unwrap();
    assert_eq!(rows(&conn, "c1").await, expected);
    assert_eq!(rows(&conn, "t").await, diverged);
    // Dropping the source leaves the snapshot and the clone whole, across a reopen.
    admin.disable_table("t").await.unwrap();
    admin.delete_table("t").await.unwrap();
    conn.close().await.unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let admin = conn.admin();
    assert_eq!(rows(&conn, "c1").await, expected);
    assert!(admin.offline_regions().await.unwrap().is_empty());
    assert_eq!(admin.list_snapshots().await.unwrap().len(), 1);
    // The clone diverges without touching the snapshot.
    put_rows(&conn, "c1", 0..10, "c").await;
    admin.major_compact("c1").await.unwrap();
    admin.clone_snapshot("s1", "c2").await.unwrap();
    assert_eq!(rows(&conn, "c2").await, expected);

    // The last reference gone, the files go: the directory's store files are empty.
    admin.delete_snapshot("s1").await.unwrap();
    assert_eq!(
        rows(&conn, "c2").await,
        expected,
        "the clone still lists them"
    );
    for c in ["c1", "c2"] {
        admin.disable_table(c).await.unwrap();
        admin.delete_table(c).await.unwrap();
    }
    assert_eq!(data_bytes(dir.path()), 0);
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_rolls_tables_back_and_keeps_a_failsafe() {
    let fs = FaultFs::new();
    let conn = Connection::open_with(faulty(&fs)).await.unwrap();
    let admin = conn.admin();
    admin.create_table(table("t")).await.unwrap();
    put_rows(&conn, "t", 0..100, "v1").await;
    let v1 = rows(&conn, "t").await;
    admin.snapshot("s", "t").await.unwrap();
    put_rows(&conn, "t", 50..150, "v2").await;
    let v2 = rows(&conn, "t").await;

    let err = admin.restore_snapshot("s").await.unwrap_err();
    assert!(matches!(err, Error::TableState { .. }), "{err:?}");
    admin.disable_table("t").await.unwrap();
    let failsafe = admin.restore_snapshot("s").await.unwrap().unwrap();
    assert!(failsafe.starts_with("hbase-failsafe-s-"), "{failsafe}");
    assert!(!admin.is_table_enabled("t").await.unwrap());
    admin.enable_table("t").await.unwrap();
    assert_eq!(rows(&conn, "t").await, v1);
    // The restored table takes writes, which survive a reopen (fresh regions, no WAL edit
    // of the replaced ones replayed into them).
    put_rows(&conn, "t", 500..501, "new").await;
    drop(admin);
    drop(conn);
    let fs = fs.crash(CrashKind::Process);
    let conn = Connection::open_with(faulty(&fs)).await.unwrap();
    let admin = conn.admin();
    let mut with_new = v1.clone();
    with_new.insert("r0500".into(), "new".into());
    assert_eq!(rows(&conn, "t").await, with_new);
    // The fail-safe snapshot rolls the restore back.
    admin.disable_table("t").await.unwrap();
    admin.restore_snapshot(&failsafe).await.unwrap();
    admin.enable_table("t").await.unwrap();
    assert_eq!(rows(&conn, "t").await, v2);
    // A snapshot of a dropped table brings it back (disabled).
    admin.disable_table("t").await.unwrap();
    admin.delete_table("t").await.unwrap();
    assert_eq!(admin.restore_snapshot("s").await.unwrap(), None);
    admin.enable_table("t").await.unwrap();
    assert_eq!(rows(&conn, "t").await, v1);
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_misuse_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let admin = conn.admin();
    admin.create_table(table("t")).await.unwrap();
    admin.create_table(table("u")).await.unwrap();
    for bad in ["", ".x", "-x", "a b", "a/b", &"x".repeat(129)] {
        let err = admin.snapshot(bad, "t").await.unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)), "{bad:?}: {err:?}");
    }
    let err = admin.snapshot("s", "nope").await.unwrap_err();
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
    let none: [&str; 0] = [];
    let err = admin.snapshot_tables("s", none, true).await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    admin.snapshot_tables("s", ["t", "u"], true).await.unwrap();
    let err = admin.snapshot("s", "t").await.unwrap_err();
    assert!(matches!(err, Error::SnapshotExists(_)), "{err:?}");
    for err in [
        admin.describe_snapshot("gone").await.unwrap_err(),
        admin.delete_snapshot("gone").await.unwrap_err(),
        admin.clone_snapshot("gone", "c").await.unwrap_err(),
        admin.restore_snapshot("gone").await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::SnapshotNotFound(_)), "{err:?}");
    }
    // Two tables: each clone is named.
    let err = admin.clone_snapshot("s", "c").await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let err = admin
        .clone_snapshot_tables("s", vec![(TableName::parse("t").unwrap(), table("u"))])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TableExists(_)), "{err:?}");
    let other_families = TableDescriptor::new(TableName::parse("c").unwrap())
        .family(ColumnFamilyDescriptor::new("g"));
    let err = admin
        .clone_snapshot_tables("s", vec![(TableName::parse("t").unwrap(), other_families)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    admin
        .clone_snapshot_tables(
            "s",
            vec![
                (TableName::parse("t").unwrap(), table("ct")),
                (TableName::parse("u").unwrap(), table("cu")),
            ],
        )
        .await
        .unwrap();
    assert!(admin.table_exists("ct").await.unwrap() && admin.table_exists("cu").await.unwrap());
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_tables_snapshot_holds_its_index_tables_and_restores_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::new());
    let runtime = basalt::index::register(&registry).unwrap();
    let conn = Connection::open_with(Config::new(dir.path()).coprocessor_loader(registry))
        .await
        .unwrap();
    let admin = conn.admin();
    admin.create_table(table("users")).await.unwrap();
    let indexes = IndexAdmin::new(&conn, runtime);
    indexes
        .create(IndexDef::new("by_q", "users").column("f", "q"))
        .await
        .unwrap();
    put_rows(&conn, "users", 0..40, "paris").await;
    let snap = admin.snapshot("s", "users").await.unwrap();
    assert_eq!(
        snap.tables,
        vec![
            "default:users".to_string(),
            "default:users.idx.by_q".to_string()
        ]
    );
    // Alone, the data table is cloned only with its index tables.
    let err = admin.clone_snapshot("s", "users2").await.unwrap_err();
    assert!(matches!(err, Error::BadArgument(_)), "{err:?}");
    let mut u2 = snap.descriptors[0].clone();
    u2.name = TableName::parse("u2").unwrap();
    let err = admin
        .clone_snapshot_tables("s", vec![(TableName::parse("users").unwrap(), u2)])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::BadArgument(m) if m.contains("users.idx.by_q")),
        "{err:?}"
    );
    // Without companions, only the data table.
    let alone = admin
        .snapshot_tables("alone", ["users"], false)
        .await
        .unwrap();
    assert_eq!(alone.tables, vec!["default:users".to_string()]);

    put_rows(&conn, "users", 20..60, "rome").await;
    for t in ["users", "users.idx.by_q"] {
        admin.disable_table(t).await.unwrap();
    }
    admin.restore_snapshot("s").await.unwrap().unwrap();
    for t in ["users", "users.idx.by_q"] {
        admin.enable_table(t).await.unwrap();
    }
    let report = indexes.verify("users", "by_q").await.unwrap();
    assert!(report.is_consistent(), "{report:?}");
    let by_q = indexes.index("users", "by_q").await.unwrap();
    let paris = by_q
        .keys(&Query::eq(vec![basalt::index::val("paris")]))
        .await
        .unwrap();
    assert_eq!(paris.len(), 40);
    let rome = by_q
        .keys(&Query::eq(vec![basalt::index::val("rome")]))
        .await
        .unwrap();
    assert!(rome.is_empty(), "{rome:?}");
    conn.close().await.unwrap();
}

/// What a crash test runs after the state is set up.
#[derive(Debug, Clone, Copy)]
enum Step {
    Snapshot,
    Clone,
    Restore,
    Delete,
}

const DIR: &str = "/db";

fn faulty(fs: &FaultFs) -> Config {
    Config::new(DIR).filesystem(fs.as_dyn())
}

/// Sets up table `t` (v1 flushed, snapshot `s0` of it, v2 written over it, half flushed),
/// runs `step` with a crash armed `at` syncs into it (none when `None`), crashes and reopens;
/// returns how many syncs the step made and the reopened connection.
async fn crash_in(step: Step, at: Option<u64>, kind: CrashKind) -> (u64, Connection, FaultFs) {
    let fs = FaultFs::new();
    let conn = Connection::open_with(faulty(&fs)).await.unwrap();
    let admin = conn.admin();
    admin.create_table(table("t")).await.unwrap();
    put_rows(&conn, "t", 0..30, "v1").await;
    admin.snapshot("s0", "t").await.unwrap();
    put_rows(&conn, "t", 0..15, "v2").await;
    admin.flush("t").await.unwrap();
    put_rows(&conn, "t", 15..30, "v2").await;
    if matches!(step, Step::Restore) {
        admin.disable_table("t").await.unwrap();
    }
    let before = fs.syncs();
    if let Some(n) = at {
        fs.crash_at_sync(before + n);
    }
    let _ = match step {
        Step::Snapshot => admin.snapshot("s1", "t").await.map(|_| ()),
        Step::Clone => admin.clone_snapshot("s0", "c").await,
        Step::Restore => admin.restore_snapshot("s0").await.map(|_| ()),
        Step::Delete => admin.delete_snapshot("s0").await,
    };
    let made = fs.syncs() - before;
    drop(admin);
    drop(conn);
    let fs = fs.crash(kind);
    let conn = Connection::open_with(faulty(&fs))
        .await
        .unwrap_or_else(|e| panic!("{step:?} crash at {at:?} ({kind:?}): reopen failed: {e}"));
    (made, conn, fs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_sync_point_leaves_no_half_snapshot_and_no_missing_file() {
    let v1: Rows = (0..30)
        .map(|i| (format!("r{i:04}"), "v1".to_string()))
        .collect();
    let v2: Rows = (0..30)
        .map(|i| (format!("r{i:04}"), "v2".to_string()))
        .collect();
    for step in [Step::Snapshot, Step::Clone, Step::Restore, Step::Delete] {
        let (made, conn, _) = crash_in(step, None, CrashKind::Process).await;
        conn.close().await.unwrap();
        assert!(made > 0, "{step:?} made no sync");
        for at in 1..=made {
            for kind in [CrashKind::Process, CrashKind::Machine] {
                let ctx = format!("{step:?} crash at sync {at} of {made} ({kind:?})");
                let (_, conn, _) = crash_in(step, Some(at), kind).await;
                let admin = conn.admin();
                assert!(admin.offline_regions().await.unwrap().is_empty(), "{ctx}");
                // Every snapshot listed is whole: cloned, it reads its state.
                for s in admin.list_snapshots().await.unwrap() {
                    let clone = format!("check-{}", s.name);
                    admin.clone_snapshot(&s.name, clone.as_str()).await.unwrap();
                    assert!(admin.offline_regions().await.unwrap().is_empty(), "{ctx}");
                    let got = rows(&conn, &clone).await;
                    let want = if s.name == "s0" { &v1 } else { &v2 };
                    // A snapshot is recorded only after its flush: whole even after a
                    // machine crash.
                    assert_eq!(&got, want, "{ctx}: snapshot {}", s.name);
                }
                let names: Vec<String> = admin
                    .list_snapshots()
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|s| s.name)
                    .collect();
                match step {
                    Step::Snapshot | Step::Clone => assert!(names.contains(&"s0".into()), "{ctx}"),
                    Step::Restore => {
                        // Restored (with its fail-safe snapshot) or not.
                        if !admin.is_table_enabled("t").await.unwrap() {
                            admin.enable_table("t").await.unwrap();
                        }
                        let got = rows(&conn, "t").await;
                        let failsafe = names.iter().any(|n| n.starts_with("hbase-failsafe-"));
                        assert!(got == v1 && failsafe || got == v2, "{ctx}: {got:?}");
                    }
                    Step::Delete => {}
                }
                if matches!(step, Step::Clone) && admin.table_exists("c").await.unwrap() {
                    assert_eq!(rows(&conn, "c").await, v1, "{ctx}");
                }
                conn.close().await.unwrap();
            }
        }
    }
}
