//! The engine on an object store (`Config::objects`): the catalog (versioned), the store
//! files and the WAL live in the store (the `object_store` crate's `InMemory` here), never
//! in the data directory;
//! they survive a close and reopen; each WAL object stored counts as a WAL sync in the
//! engine's stats; a table's files are deleted from the store with it and
//! an object no region lists is removed at open; a flipped byte in a store-file object fails
//! only the reads of its block, is reported by the integrity check and is set aside by the
//! offline repair as the object `damaged/<name>`; a missing or damaged catalog refuses the
//! open and changes nothing.

use basalt::client::{Get, Put};
use basalt::objects::{Objects, PutMode, StoreObjects};
use basalt::repair::{check_dir, repair_dir};
use basalt::{ColumnFamilyDescriptor, Config, Connection, Error, TableDescriptor, TableName};
use std::path::Path;
use std::sync::Arc;

const ROWS: usize = 2000;

fn row(i: usize) -> Vec<u8> {
    format!("row{i:05}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value of row {i}, padded to fill blocks").into_bytes()
}

fn config(dir: &Path, objects: &Arc<dyn Objects>) -> Config {
    Config::new(dir).objects(Arc::clone(objects))
}

/// A table `t` of [`ROWS`] rows flushed into one store file of 1 KiB blocks; returns the
/// file's object name.
async fn fixture(dir: &Path, objects: &Arc<dyn Objects>) -> String {
    let conn = Connection::open_with(config(dir, objects)).await.unwrap();
    conn.admin()
        .create_table(
            TableDescriptor::new(TableName::parse("t").unwrap())
                .family(ColumnFamilyDescriptor::new("f").block_size(1024)),
        )
        .await
        .unwrap();
    let table = conn.table("t").unwrap();
    for i in 0..ROWS {
        table
            .put(Put::new(row(i)).add_column("f", "q", value(i)))
            .await
            .unwrap();
    }
    conn.admin()
        .flush(&TableName::parse("t").unwrap())
        .await
        .unwrap();
    drop(table);
    conn.close().await.unwrap();
    let files = objects.list("data").unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// The newest version of the catalog (`catalog/{n:020}`: versioned on a shared store).
fn newest_catalog(objects: &dyn Objects) -> String {
    objects.list("catalog").unwrap().pop().unwrap()
}

async fn get(conn: &Connection, i: usize) -> basalt::Result<Option<Vec<u8>>> {
    let r = conn.table("t")?.get(Get::new(row(i))).await?;
    Ok(r.value("f", "q").map(|v| v.to_vec()))
}

#[tokio::test]
async fn the_catalog_and_store_files_live_in_the_store_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let file = fixture(dir.path(), &objects).await;
    assert!(objects.exists(&newest_catalog(&*objects)).unwrap());
    assert!(!dir.path().join("catalog").exists());
    assert_eq!(
        std::fs::read_dir(dir.path().join("data")).unwrap().count(),
        0
    );

    // An object no region lists (a crashed flush's output, say) goes at open.
    let orphan = "data/0000000000009999.sf";
    objects.put(orphan, b"junk", PutMode::Create).unwrap();
    let conn = Connection::open_with(config(dir.path(), &objects))
        .await
        .unwrap();
    assert!(!objects.exists(orphan).unwrap());
    for i in [0, ROWS / 2, ROWS - 1] {
        assert_eq!(get(&conn, i).await.unwrap(), Some(value(i)));
    }
    assert!(conn
        .admin()
        .check_table(&TableName::parse("t").unwrap())
        .await
        .unwrap()
        .is_healthy());
    // Each write waited for alone is a WAL object of its own: a group commit, counted.
    let before = conn.engine().stats();
    let table = conn.table("t").unwrap();
    for i in 0..3 {
        table
            .put(Put::new(row(i)).add_column("f", "q", value(i)))
            .await
            .unwrap();
    }
    drop(table);
    let after = conn.engine().stats();
    assert!(
        after.wal_syncs >= before.wal_syncs + 3,
        "{before:?} {after:?}"
    );

    // Dropping the table deletes its files from the store.
    let admin = conn.admin();
    let name = TableName::parse("t").unwrap();
    admin.disable_table(&name).await.unwrap();
    admin.delete_table(&name).await.unwrap();
    assert!(!objects.exists(&file).unwrap());
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_flipped_byte_in_a_store_file_object_is_reported_and_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let file = fixture(dir.path(), &objects).await;
    let mut bytes = objects.read(&file).unwrap();
    bytes[40] ^= 0x20; // in the payload of block 0, which holds the first rows
    objects.put(&file, &bytes, PutMode::Overwrite).unwrap();

    let conn = Connection::open_with(config(dir.path(), &objects))
        .await
        .unwrap();
    match get(&conn, 0).await {
        Err(Error::Corruption { file: named, .. }) => {
            assert_eq!(named, objects.locate(&file));
        }
        other => panic!("expected Corruption, got {other:?}"),
    }
    assert_eq!(get(&conn, ROWS - 1).await.unwrap(), Some(value(ROWS - 1)));
    let report = conn
        .admin()
        .check_table(&TableName::parse("t").unwrap())
        .await
        .unwrap();
    assert!(!report.is_healthy(), "{report}");
    conn.close().await.unwrap();

    let cfg = config(dir.path(), &objects);
    assert!(!check_dir(&cfg).unwrap().is_healthy());
    let repaired = repair_dir(&cfg).unwrap();
    assert_eq!(repaired.set_aside.len(), 1, "{repaired}");
    let aside = format!("damaged/{}", file.trim_start_matches("data/"));
    assert_eq!(
        repaired.set_aside[0].moved_to.as_deref(),
        Some(objects.locate(&aside).as_path())
    );
    assert_eq!(objects.read(&aside).unwrap(), bytes, "set aside whole");
    assert!(!objects.exists(&file).unwrap());
    assert!(check_dir(&cfg).unwrap().is_healthy());

    // The region opens again, without the file's rows.
    let conn = Connection::open_with(cfg).await.unwrap();
    assert_eq!(get(&conn, 0).await.unwrap(), None);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_missing_catalog_with_store_files_refuses_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let file = fixture(dir.path(), &objects).await;
    for version in objects.list("catalog").unwrap() {
        objects.delete(&version).unwrap();
    }
    match Connection::open_with(config(dir.path(), &objects)).await {
        Err(Error::Corruption { file: named, .. }) => {
            assert_eq!(named, objects.locate("catalog"));
        }
        Err(e) => panic!("expected Corruption, got {e}"),
        Ok(_) => panic!("opened without a catalog"),
    }
    assert!(objects.exists(&file).unwrap(), "nothing deleted");
}

#[tokio::test]
async fn a_damaged_catalog_object_fails_the_open_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let objects: Arc<dyn Objects> = Arc::new(StoreObjects::in_memory());
    let file = fixture(dir.path(), &objects).await;
    let catalog = newest_catalog(&*objects);
    let versions = objects.list("catalog").unwrap();
    let good = objects.read(&catalog).unwrap();
    // A flip in the header, in the payload and in the last byte; a cut; a byte appended.
    let last = good.len() - 1;
    let mut damaged: Vec<Vec<u8>> = [0, 9, 21, last]
        .iter()
        .map(|&at| {
            let mut b = good.clone();
            b[at] ^= 0x01;
            b
        })
        .collect();
    damaged.push(good[..good.len() / 2].to_vec());
    damaged.push([good.as_slice(), b"x"].concat());
    for bytes in damaged {
        objects.put(&catalog, &bytes, PutMode::Overwrite).unwrap();
        match Connection::open_with(config(dir.path(), &objects)).await {
            Err(Error::Corruption { file: named, .. }) => {
                assert_eq!(named, objects.locate(&catalog));
            }
            Err(e) => panic!("expected Corruption, got {e}"),
            Ok(_) => panic!("opened a damaged catalog"),
        }
        assert_eq!(
            objects.list("catalog").unwrap(),
            versions,
            "a catalog version was added"
        );
        assert_eq!(
            objects.read(&catalog).unwrap(),
            bytes,
            "the catalog changed"
        );
        assert!(objects.exists(&file).unwrap(), "a store file was deleted");
    }
    objects.put(&catalog, &good, PutMode::Overwrite).unwrap();
    let conn = Connection::open_with(config(dir.path(), &objects))
        .await
        .unwrap();
    assert_eq!(get(&conn, 7).await.unwrap(), Some(value(7)));
    conn.close().await.unwrap();
}
