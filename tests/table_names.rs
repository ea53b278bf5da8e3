//! One way to name a table: the admin, `Connection::table`, salted tables, the index admin,
//! the aggregation client and `TableDescriptor::new` each take a `TableName` (owned or
//! borrowed) or a string (`ns:name` or `name`), and a malformed string is a typed error
//! wherever it is given, never a panic.

use basalt::client::{Get, Put};
use basalt::coprocessors::{AggregationClient, EndpointRegistry, Endpoints, KeyRange, Registry};
use basalt::index::{IndexAdmin, IndexDef};
use basalt::{
    ColumnFamilyDescriptor, Config, Connection, Error, IntoTableName, SaltSpec, TableDescriptor,
    TableName,
};
use std::sync::Arc;

fn bad_argument<T: std::fmt::Debug>(r: basalt::Result<T>) -> bool {
    matches!(r, Err(Error::BadArgument(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_point_takes_strings_and_table_names() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::new());
    let runtime = basalt::index::register(&registry).unwrap();
    let conn = Connection::open_with(Config::new(dir.path()).coprocessor_loader(registry))
        .await
        .unwrap();
    let admin = conn.admin();
    admin.create_namespace("shop").await.unwrap();

    // TableDescriptor::new takes a string; a malformed one fails when the table is created.
    let family = || ColumnFamilyDescriptor::new("f");
    admin
        .create_table(TableDescriptor::new("shop:orders").family(family()))
        .await
        .unwrap();
    assert!(bad_argument(
        admin
            .create_table(TableDescriptor::new("bad name").family(family()))
            .await
    ));
    assert!(admin
        .create_table(TableDescriptor::new("no_such_ns:t").family(family()))
        .await
        .is_err());

    // The admin: every form names the same table.
    let name = TableName::parse("shop:orders").unwrap();
    assert!(admin.table_exists("shop:orders").await.unwrap());
    assert!(admin
        .table_exists(String::from("shop:orders"))
        .await
        .unwrap());
    assert!(admin.table_exists(&name).await.unwrap());
    assert!(admin.table_exists(name.clone()).await.unwrap());
    assert!(!admin.table_exists("orders").await.unwrap());
    assert!(bad_argument(admin.table_exists("bad name").await));
    assert!(bad_argument(admin.flush("-orders").await));
    assert_eq!(
        admin.describe_table("shop:orders").await.unwrap().name,
        name
    );

    // Connection::table.
    conn.table("shop:orders")
        .unwrap()
        .put(Put::new("o1").add_column("f", "amount", 5i64.to_be_bytes()))
        .await
        .unwrap();
    let row = conn
        .table(&name)
        .unwrap()
        .get(Get::new("o1"))
        .await
        .unwrap();
    assert_eq!(row.cells.len(), 1);
    assert!(bad_argument(conn.table("shop:bad name")));

    // Salted tables.
    admin
        .create_table(
            TableDescriptor::new(TableName::parse("events").unwrap())
                .family(family())
                .salt(SaltSpec::new(4)),
        )
        .await
        .unwrap();
    let events = conn.salted_table("events").unwrap();
    events
        .put(Put::new("e1").add_column("f", "kind", "click"))
        .await
        .unwrap();
    let by_name = conn
        .salted_table(TableName::parse("default:events").unwrap())
        .unwrap();
    assert_eq!(by_name.get(Get::new("e1")).await.unwrap().cells.len(), 1);
    assert!(bad_argument(conn.salted_table("ev ents")));

    // The index admin.
    let indexes = IndexAdmin::new(&conn, runtime);
    indexes
        .create(IndexDef::new("by_amount", &name).column("f", "amount"))
        .await
        .unwrap();
    assert_eq!(indexes.list("shop:orders").await.unwrap().len(), 1);
    let def = indexes.describe(&name, "by_amount").await.unwrap();
    assert_eq!(def.table, "shop:orders");
    assert_eq!(IndexDef::new("by_amount", "shop:orders").table, def.table);
    assert!(bad_argument(indexes.list("bad name").await));
    assert!(bad_argument(
        IndexDef::new("by_x", "bad name")
            .column("f", "x")
            .validate()
    ));

    // The aggregation client.
    let aggregates = AggregationClient::new(Endpoints::new(
        &conn,
        Arc::new(EndpointRegistry::with_builtins()),
    ));
    assert_eq!(
        aggregates
            .fast_row_count("shop:orders", KeyRange::all())
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        aggregates
            .fast_row_count(&name, KeyRange::all())
            .await
            .unwrap(),
        1
    );
    assert!(bad_argument(
        aggregates.fast_row_count("bad name", KeyRange::all()).await
    ));

    // The conversion itself.
    assert_eq!(
        "orders".into_table_name().unwrap().to_string(),
        "default:orders"
    );
    assert!(bad_argument("a:b:c".into_table_name()));
    conn.close().await.unwrap();
}
