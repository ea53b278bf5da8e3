//! The relation observers on a real engine: both sides after every write kind, the
//! refusals (nothing written) and the guard; `tree` holds the tree's moves, cycles and
//! parents. The helpers here open an engine with the relations registered, create the tables
//! and read a row's links.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use basalt_core::client::{
    Append, BatchOp, CheckAndMutate, CompareOp, Delete, Get, Increment, Put, RowMutations,
};
use basalt_core::{ColumnFamilyDescriptor, Config, Connection, Table, TableDescriptor};
use std::collections::BTreeMap;

mod tree;

async fn open(dir: &std::path::Path) -> Connection {
    let registry = Arc::new(Registry::new());
    register_relations(&registry).unwrap();
    Connection::open_with(Config::new(dir).coprocessor_loader(registry))
        .await
        .unwrap()
}

fn table(name: &str, families: &[&str]) -> TableDescriptor {
    let mut d = TableDescriptor::new(TableName::parse(name).unwrap());
    for f in families {
        d = d.family(ColumnFamilyDescriptor::new(*f));
    }
    d
}

/// `shops` (links in `item`) mirrored into `items` (reverse links in `shop`, guarded).
async fn shops_items(conn: &Connection) -> (Table, Table) {
    let admin = conn.admin();
    admin
        .create_table(table("items", &["info", "shop"]).coprocessor(relation_guard(&["shop"])))
        .await
        .unwrap();
    admin
        .create_table(
            table("shops", &["info", "item"])
                .coprocessor(inverse_relation("item", "items", "shop")),
        )
        .await
        .unwrap();
    (conn.table("shops").unwrap(), conn.table("items").unwrap())
}

/// The `cat` tree table: `name`, `parent`, `child`.
async fn tree(conn: &Connection) -> Table {
    conn.admin()
        .create_table(
            table("cat", &["name", "parent", "child"]).coprocessor(tree_links("parent", "child")),
        )
        .await
        .unwrap();
    conn.table("cat").unwrap()
}

/// The links of `row` in `family`: qualifier -> value.
async fn links(t: &Table, row: &str, family: &str) -> BTreeMap<String, String> {
    let r = t.get(Get::new(row).add_family(family)).await.unwrap();
    r.cells
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A refusal: a veto (a bad argument) or, from the hooks outside the batch (increments,
/// appends), the coprocessor's failure carrying the same text.
fn is_refusal(e: &Error, what: &str) -> bool {
    match e {
        Error::BadArgument(m) | Error::Coprocessor { msg: m, .. } => m.contains(what),
        _ => false,
    }
}

#[tokio::test]
async fn inverse_follows_puts_overwrites_and_every_delete_kind() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let (shops, items) = shops_items(&conn).await;

    shops
        .put(
            Put::new("s1")
                .add_column("info", "name", "corner shop")
                .add_column("item", "i1", "sells")
                .add_column("item", "i2", "sells"),
        )
        .await
        .unwrap();
    shops
        .put(Put::new("s2").add_column("item", "i1", "stocks"))
        .await
        .unwrap();
    assert_eq!(
        links(&items, "i1", "shop").await,
        map(&[("s1", "sells"), ("s2", "stocks")])
    );
    assert_eq!(links(&items, "i2", "shop").await, map(&[("s1", "sells")]));

    // An overwrite changes the reverse value.
    shops
        .put(Put::new("s1").add_column("item", "i1", "promo"))
        .await
        .unwrap();
    assert_eq!(
        links(&items, "i1", "shop").await,
        map(&[("s1", "promo"), ("s2", "stocks")])
    );

    // Column delete, then family delete, then row delete.
    shops
        .delete(Delete::new("s1").add_columns("item", "i2"))
        .await
        .unwrap();
    assert!(links(&items, "i2", "shop").await.is_empty());
    shops
        .delete(Delete::new("s2").add_family("item"))
        .await
        .unwrap();
    assert_eq!(links(&items, "i1", "shop").await, map(&[("s1", "promo")]));
    shops.delete(Delete::new("s1")).await.unwrap();
    assert!(links(&items, "i1", "shop").await.is_empty());
    // Deleting another family leaves the links.
    shops
        .put(
            Put::new("s3")
                .add_column("item", "i3", "x")
                .add_column("info", "name", "n"),
        )
        .await
        .unwrap();
    shops
        .delete(Delete::new("s3").add_family("info"))
        .await
        .unwrap();
    assert_eq!(links(&items, "i3", "shop").await, map(&[("s3", "x")]));
    conn.close().await.unwrap();
}

#[tokio::test]
async fn relinking_at_once_after_an_unlink_stays_visible_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let (shops, items) = shops_items(&conn).await;
    for round in 0..20 {
        let v = format!("v{round}");
        shops
            .put(Put::new("s").add_column("item", "i", &v))
            .await
            .unwrap();
        shops
            .delete(Delete::new("s").add_columns("item", "i"))
            .await
            .unwrap();
        shops
            .put(Put::new("s").add_column("item", "i", &v))
            .await
            .unwrap();
        assert_eq!(links(&shops, "s", "item").await, map(&[("i", &v)]));
        assert_eq!(links(&items, "i", "shop").await, map(&[("s", &v)]));
    }
    conn.close().await.unwrap();
}

#[tokio::test]
async fn row_mutations_batches_and_check_and_mutate_keep_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let (shops, items) = shops_items(&conn).await;

    // Inside one batch a delete hides a put of the same link (one timestamp): both sides.
    shops
        .mutate_row(
            RowMutations::new("s")
                .add(
                    Put::new("s")
                        .add_column("item", "a", "1")
                        .add_column("item", "b", "1"),
                )
                .add(Delete::new("s").add_columns("item", "a")),
        )
        .await
        .unwrap();
    assert_eq!(links(&shops, "s", "item").await, map(&[("b", "1")]));
    assert!(links(&items, "a", "shop").await.is_empty());
    assert_eq!(links(&items, "b", "shop").await, map(&[("s", "1")]));

    let out = shops
        .batch(vec![
            BatchOp::Put(Put::new("t").add_column("item", "a", "2")),
            BatchOp::Delete(Delete::new("s").add_columns("item", "b")),
            BatchOp::Put(Put::new("u").add_column_ts("item", "a", 7, "3")),
        ])
        .await
        .unwrap();
    assert!(out[0].is_ok() && out[1].is_ok());
    assert!(matches!(&out[2], Err(e) if is_refusal(e, "explicit timestamps")));
    assert_eq!(links(&items, "a", "shop").await, map(&[("t", "2")]));
    assert!(links(&items, "b", "shop").await.is_empty());
    assert!(links(&shops, "u", "item").await.is_empty());

    let passed = shops
        .check_and_mutate(
            CheckAndMutate::new("t", "item", "a")
                .if_value(CompareOp::Equal, "2")
                .then_put(Put::new("t").add_column("item", "c", "4")),
        )
        .await
        .unwrap();
    assert!(passed);
    let failed = shops
        .check_and_mutate(
            CheckAndMutate::new("t", "item", "a")
                .if_value(CompareOp::Equal, "nope")
                .then_put(Put::new("t").add_column("item", "d", "5")),
        )
        .await
        .unwrap();
    assert!(!failed);
    assert_eq!(links(&items, "c", "shop").await, map(&[("t", "4")]));
    assert!(links(&items, "d", "shop").await.is_empty());
    conn.close().await.unwrap();
}

#[tokio::test]
async fn writes_that_cannot_be_mirrored_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let (shops, items) = shops_items(&conn).await;
    shops
        .put(Put::new("s").add_column("item", "i", "1"))
        .await
        .unwrap();

    let e = shops
        .put(Put::new("s").add_column_ts("item", "j", 5, "1"))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "explicit timestamps"), "{e}");
    let e = shops
        .put(Put::new("s").timestamp(5).add_column("item", "j", "1"))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "explicit timestamps"), "{e}");
    let e = shops
        .delete(Delete::new("s").add_column("item", "i"))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "single-version"), "{e}");
    let e = shops
        .delete(Delete::new("s").add_family_version("item", 5))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "single-version"), "{e}");
    let e = shops
        .put(Put::new("s").add_column("item", "", "1"))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "non-empty qualifier"), "{e}");
    let e = shops
        .increment(Increment::new("s").add_column("item", "k", 1))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "increments and appends"), "{e}");
    let e = shops
        .append(Append::new("s").add_column("item", "k", "x"))
        .await
        .unwrap_err();
    assert!(is_refusal(&e, "increments and appends"), "{e}");
    // Other families keep explicit timestamps and read-modify-writes.
    shops
        .put(Put::new("s").add_column_ts("info", "name", 5, "n"))
        .await
        .unwrap();
    shops
        .increment(Increment::new("s").add_column("info", "hits", 1))
        .await
        .unwrap();

    assert_eq!(links(&shops, "s", "item").await, map(&[("i", "1")]));
    assert_eq!(links(&items, "i", "shop").await, map(&[("s", "1")]));
    for q in ["j", "k"] {
        assert!(links(&items, q, "shop").await.is_empty());
    }
    conn.close().await.unwrap();
}

#[tokio::test]
async fn the_guard_refuses_user_writes_to_the_derived_family() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let (shops, items) = shops_items(&conn).await;
    shops
        .put(Put::new("s").add_column("item", "i", "1"))
        .await
        .unwrap();
    let refused = [
        items
            .put(Put::new("i").add_column("shop", "x", "1"))
            .await
            .unwrap_err(),
        items
            .delete(Delete::new("i").add_columns("shop", "s"))
            .await
            .unwrap_err(),
        items.delete(Delete::new("i")).await.unwrap_err(),
        items
            .append(Append::new("i").add_column("shop", "s", "x"))
            .await
            .unwrap_err(),
    ];
    for e in &refused {
        assert!(is_refusal(e, "shop"), "{e}");
    }
    assert_eq!(links(&items, "i", "shop").await, map(&[("s", "1")]));
    // The item's own columns stay writable, and a family delete of them passes.
    items
        .put(Put::new("i").add_column("info", "name", "tea"))
        .await
        .unwrap();
    items
        .delete(Delete::new("i").add_family("info"))
        .await
        .unwrap();
    assert_eq!(links(&items, "i", "shop").await, map(&[("s", "1")]));
    conn.close().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_are_clear_errors() {
    let args = Args::from([("family".to_owned(), "item".to_owned())]);
    let e = InverseRelation::from_args(&args).unwrap_err();
    assert!(
        matches!(&e, Error::BadArgument(m) if m.contains("target_table")),
        "{e}"
    );
    let e = RelationGuard::from_args(&Args::new()).unwrap_err();
    assert!(
        matches!(&e, Error::BadArgument(m) if m.contains("families")),
        "{e}"
    );
    let t = TreeLinks::from_args(&Args::new()).unwrap();
    assert!(format!("{t:?}").contains("parent"));
}

#[tokio::test]
async fn an_invalid_operation_of_a_batch_writes_neither_side() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let (shops, items) = shops_items(&conn).await;
    let out = shops
        .batch(vec![
            BatchOp::Put(
                Put::new("s1")
                    .add_column("item", "i1", "1")
                    .add_column("nosuch", "x", "1"),
            ),
            BatchOp::Put(Put::new("s2").add_column("item", "i2", "1")),
        ])
        .await
        .unwrap();
    assert!(matches!(out[0], Err(Error::FamilyNotFound { .. })));
    assert!(out[1].is_ok());
    assert!(links(&shops, "s1", "item").await.is_empty());
    assert!(links(&items, "i1", "shop").await.is_empty());
    assert_eq!(links(&items, "i2", "shop").await, map(&[("s2", "1")]));
    conn.close().await.unwrap();
}

#[tokio::test]
async fn an_unlink_then_a_relink_in_one_millisecond_stay_symmetric() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(dir.path()).await;
    let (shops, items) = shops_items(&conn).await;
    for round in 0..30 {
        let v = format!("v{round}");
        shops
            .put(Put::new("s").add_column("item", "i", &v))
            .await
            .unwrap();
        // Let the row's last write age: the unlink then needs no wait of its own.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        shops
            .delete(Delete::new("s").add_columns("item", "i"))
            .await
            .unwrap();
        shops
            .put(Put::new("s").add_column("item", "i", &v))
            .await
            .unwrap();
        assert_eq!(
            links(&shops, "s", "item").await,
            map(&[("i", &v)]),
            "round {round}"
        );
        assert_eq!(
            links(&items, "i", "shop").await,
            map(&[("s", &v)]),
            "round {round}"
        );
    }
    conn.close().await.unwrap();
}
