//! Unit tests of the engine that need its internals: a catalog written by hand, in which
//! two tables list the same store files (as split daughters do within a table, and as
//! issue 46's clones of one snapshot will across tables).
#![allow(clippy::unwrap_used)]

use crate::catalog::Catalog;
use crate::client::{Connection, Get, Put};
use crate::objects::{LocalObjects, Objects};
use crate::schema::{ColumnFamilyDescriptor, TableDescriptor, TableName};
use std::sync::Arc;

/// The store files under `data/`.
fn store_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("data"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".sf"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

async fn rows(conn: &Connection, table: &str, n: u32) -> usize {
    let t = conn.table(table).unwrap();
    let mut found = 0;
    for i in 0..n {
        let r = t.get(Get::new(format!("row{i:03}"))).await.unwrap();
        found += usize::from(!r.is_empty());
    }
    found
}

#[tokio::test]
async fn a_file_two_tables_list_is_deleted_only_when_neither_does() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = Connection::open(dir.path()).await.unwrap();
        let admin = conn.admin();
        admin
            .create_table(TableDescriptor::new("a").family(ColumnFamilyDescriptor::new("f")))
            .await
            .unwrap();
        let t = conn.table("a").unwrap();
        for round in 0..2u32 {
            for i in 0..50u32 {
                t.put(Put::new(format!("row{i:03}")).add_column("f", "q", format!("v{round}")))
                    .await
                    .unwrap();
            }
            admin.flush("a").await.unwrap();
        }
        conn.close().await.unwrap();
    }
    let listed = store_files(dir.path());
    assert_eq!(listed.len(), 2, "{listed:?}");
    // Table `b` lists `a`'s files, in a region of its own.
    {
        let objects: Arc<dyn Objects> =
            Arc::new(LocalObjects::new(crate::fs::StdFs::shared(), dir.path()));
        let catalog = Catalog::open(&objects).unwrap();
        catalog
            .update(|s| {
                let mut b = s.tables.get("default:a").unwrap().clone();
                b.descriptor.name = TableName::parse("b").unwrap();
                for r in &mut b.regions {
                    r.id = s.next_region_id;
                    s.next_region_id += 1;
                }
                s.tables.insert("default:b".into(), b);
                Ok(())
            })
            .unwrap();
    }
    let conn = Connection::open(dir.path()).await.unwrap();
    let admin = conn.admin();
    assert_eq!(rows(&conn, "b", 50).await, 50);
    // A major compaction of `a` rewrites its files; `b` still lists the old ones.
    admin.major_compact("a").await.unwrap();
    assert_eq!(rows(&conn, "a", 50).await, 50);
    assert_eq!(rows(&conn, "b", 50).await, 50);
    for f in &listed {
        assert!(dir.path().join("data").join(f).exists(), "{f} deleted");
    }
    // Dropping `a` keeps what `b` lists.
    admin.disable_table("a").await.unwrap();
    admin.delete_table("a").await.unwrap();
    assert_eq!(rows(&conn, "b", 50).await, 50);
    for f in &listed {
        assert!(dir.path().join("data").join(f).exists(), "{f} deleted");
    }
    // Dropping `b` too frees every file.
    admin.disable_table("b").await.unwrap();
    admin.delete_table("b").await.unwrap();
    conn.close().await.unwrap();
    assert_eq!(store_files(dir.path()), Vec::<String>::new());
}
