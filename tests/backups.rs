//! Backups (issue 46): taken under load and restored to a new directory, which opens and
//! holds every write acknowledged before the backup began (and a prefix of each writer's
//! writes); incremental (a second backup copies only new files); a target that dies half
//! way leaves no backup restore would take; a flipped bit is found by verify and by restore
//! before anything is written; a table snapshot backs up as it was taken.

use basalt::client::Put;
use basalt::fs::{CrashKind, FaultFs, StdFs};
use basalt::objects;
use basalt::{
    restore_backup, verify_backup, BackupOptions, BackupSource, Config, Connection, Error,
};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::table_rows;
use table_rows::{put_rows, rows, table};

const WRITERS: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_load_restores_every_acknowledged_write_and_later_ones_are_incremental() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let target = dir.path().join("backup");
    let conn = Connection::open_with(Config::new(&data).memstore_flush_size(16 << 10))
        .await
        .unwrap();
    conn.admin().create_table(table("t")).await.unwrap();
    conn.admin().create_table(table("u")).await.unwrap();
    put_rows(&conn, "u", 0..500, "u").await;
    // Writer w puts w-0, w-1, ... in order; progress[w] counts its acknowledged puts.
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let t = conn.table("t").unwrap();
        let (progress, stop) = (progress.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut k = 0u64;
            while !stop.load(Ordering::Acquire) {
                t.put(Put::new(format!("w{w}-{k:06}")).add_column("f", "q", "x".repeat(64)))
                    .await
                    .unwrap();
                k += 1;
                progress[w as usize].store(k, Ordering::Release);
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let acked: Vec<u64> = progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
    let target_objects = objects::local(StdFs::shared(), &target);
    let first = conn
        .backup(
            target_objects.clone(),
            BackupSource::AllTables,
            BackupOptions::default(),
        )
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let second = conn
        .backup(
            target_objects.clone(),
            BackupSource::AllTables,
            BackupOptions::default(),
        )
        .await
        .unwrap();
    stop.store(true, Ordering::Release);
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!((first.id, second.id), (1, 2));
    assert_eq!(
        first.tables,
        vec!["default:t".to_string(), "default:u".to_string()]
    );
    assert!(
        first.files > 0 && first.copied_files == first.files,
        "{first:?}"
    );
    // Table u did not change: its files are not copied again.
    assert!(second.copied_files < second.files, "{second:?}");
    // The temporary snapshots are gone.
    assert!(conn.admin().list_snapshots().await.unwrap().is_empty());
    let u = rows(&conn, "u").await;
    conn.close().await.unwrap();

    for backup in [first, second] {
        let restored = dir.path().join(format!("restored-{}", backup.id));
        let done = restore_backup(
            &*target_objects,
            Some(backup.id),
            StdFs::shared(),
            &restored,
            None,
        )
        .unwrap();
        assert_eq!(done.read_point, backup.read_point);
        let conn = Connection::open(&restored).await.unwrap();
        assert_eq!(rows(&conn, "u").await, u);
        let t = rows(&conn, "t").await;
        for w in 0..WRITERS {
            let mine: Vec<&String> = t
                .keys()
                .filter(|k| k.starts_with(&format!("w{w}-")))
                .collect();
            let n = mine.len() as u64;
            // A prefix of the writer's puts, holding every one acknowledged before.
            for (k, key) in mine.iter().enumerate() {
                assert_eq!(
                    **key,
                    format!("w{w}-{k:06}"),
                    "backup {}: not a prefix",
                    backup.id
                );
            }
            assert!(
                n >= acked[w as usize],
                "backup {}: writer {w} has {n} of {} acknowledged",
                backup.id,
                acked[w as usize]
            );
        }
        conn.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_dying_half_way_leaves_no_backup_restore_would_take() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("data")).await.unwrap();
    conn.admin().create_table(table("t")).await.unwrap();
    put_rows(&conn, "t", 0..200, "v1").await;
    conn.admin().flush("t").await.unwrap();
    put_rows(&conn, "t", 100..300, "v2").await;
    let v2 = rows(&conn, "t").await;

    // How many syncs a whole backup makes on a fresh target.
    let probe = FaultFs::new();
    let probe_target = objects::local(probe.as_dyn(), "/backup");
    let before = probe.syncs();
    conn.backup(
        probe_target,
        BackupSource::AllTables,
        BackupOptions::default(),
    )
    .await
    .unwrap();
    let syncs = probe.syncs() - before;
    assert!(syncs >= 3, "{syncs}");

    for at in 1..=syncs {
        for kind in [CrashKind::Process, CrashKind::Machine] {
            let fs = FaultFs::new();
            let target = objects::local(fs.as_dyn(), "/backup");
            fs.crash_at_sync(fs.syncs() + at);
            let result = conn
                .backup(target, BackupSource::AllTables, BackupOptions::default())
                .await;
            let fs = fs.crash(kind);
            let target = objects::local(fs.as_dyn(), "/backup");
            let restored = dir.path().join(format!("r-{at}-{kind:?}"));
            match restore_backup(&*target, None, StdFs::shared(), &restored, None) {
                Ok(done) => {
                    // Only a backup whose manifest was stored: whole, and it says so.
                    assert!(
                        result.is_ok() || at == syncs,
                        "sync {at}: {result:?} yet {done:?}"
                    );
                    let c = Connection::open(&restored).await.unwrap();
                    assert_eq!(rows(&c, "t").await, v2);
                    c.close().await.unwrap();
                }
                Err(e) => {
                    assert!(
                        result.is_err(),
                        "sync {at} {kind:?}: the backup succeeded, restore failed: {e}"
                    );
                    assert!(e.to_string().contains("no complete backup"), "{e}");
                    assert!(!restored.exists(), "nothing written");
                }
            }
        }
    }
    assert!(conn.admin().list_snapshots().await.unwrap().is_empty());
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_bit_is_found_by_verify_and_by_restore_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("data")).await.unwrap();
    conn.admin().create_table(table("t")).await.unwrap();
    put_rows(&conn, "t", 0..100, "v1").await;
    let v1 = rows(&conn, "t").await;
    conn.admin().snapshot("snap", "t").await.unwrap();
    put_rows(&conn, "t", 0..100, "v2").await;
    let target_dir = dir.path().join("backup");
    let target = objects::local(StdFs::shared(), &target_dir);
    let done = conn
        .backup(
            target.clone(),
            BackupSource::Snapshot("snap".into()),
            BackupOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(done.tables, vec!["default:t".to_string()]);
    let err = conn
        .backup(
            target.clone(),
            BackupSource::Snapshot("gone".into()),
            BackupOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SnapshotNotFound(_)), "{err:?}");
    conn.close().await.unwrap();
    assert!(verify_backup(&*target, None, None).unwrap().is_whole());

    // The snapshot's state, not the table's.
    let restored = dir.path().join("restored");
    restore_backup(&*target, None, StdFs::shared(), &restored, None).unwrap();
    let c = Connection::open(&restored).await.unwrap();
    assert_eq!(rows(&c, "t").await, v1);
    c.close().await.unwrap();

    let files: Vec<_> = std::fs::read_dir(target_dir.join("files"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let victim = &files[0];
    let mut bytes = std::fs::read(victim).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x01;
    std::fs::write(victim, &bytes).unwrap();
    let check = verify_backup(&*target, None, None).unwrap();
    assert_eq!(check.damaged.len(), 1, "{check:?}");
    let again = dir.path().join("again");
    let err = restore_backup(&*target, None, StdFs::shared(), &again, None).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err:?}");
    assert!(err.to_string().contains("nothing was restored"), "{err}");
    assert!(!again.exists());
    assert!(!Path::new(&again).join("catalog").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_of_an_interrupted_backup_is_removed_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    conn.admin().create_table(table("t")).await.unwrap();
    put_rows(&conn, "t", 0..50, "v1").await;
    // What a process dying during a backup's copy leaves: its snapshot, listed.
    conn.admin()
        .snapshot("basalt-backup-1-0000abcd", "t")
        .await
        .unwrap();
    conn.admin().snapshot("keep", "t").await.unwrap();
    conn.close().await.unwrap();
    let conn = Connection::open(dir.path()).await.unwrap();
    let names: Vec<String> = conn
        .admin()
        .list_snapshots()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["keep".to_string()]);
    assert_eq!(rows(&conn, "t").await.len(), 50);
    conn.close().await.unwrap();
}
