//! The first complaint: a directory whose tables list an application's own
//! coprocessors could not be opened without the application's code. The tool opens it; the
//! table with a coprocessor the tool lacks is read-only (reads work, writes are one clear
//! `ERROR:` line naming the missing coprocessor), and its built-in index still answers.

use basalt_coprocessors::{RegionObserver, Registry};
use basalt_core::client::Put;
use basalt_core::{
    ColumnFamilyDescriptor, Config, Connection, CoprocessorDescriptor, TableDescriptor, TableName,
};
use basalt_index::{IndexAdmin, IndexDef};
use std::sync::Arc;

struct AmountRule;
impl RegionObserver for AmountRule {}

#[tokio::test]
async fn a_directory_with_an_applications_coprocessor_opens_read_only() {
    let data = tempfile::tempdir().unwrap();
    {
        // The application: its own observer and Basalt's index on shop:orders.
        let registry = Arc::new(Registry::new());
        registry
            .register("amount-rule", |_| {
                Ok(Arc::new(AmountRule) as Arc<dyn RegionObserver>)
            })
            .unwrap();
        let runtime = basalt_index::register(&registry).unwrap();
        let conn = Connection::open_with(Config::new(data.path()).coprocessor_loader(registry))
            .await
            .unwrap();
        conn.admin().create_namespace("shop").await.unwrap();
        conn.admin()
            .create_table(
                TableDescriptor::new(TableName::parse("shop:orders").unwrap())
                    .family(ColumnFamilyDescriptor::new("o"))
                    .coprocessor(CoprocessorDescriptor::new("amount-rule")),
            )
            .await
            .unwrap();
        IndexAdmin::new(&conn, runtime)
            .create(IndexDef::new("by_buyer", "shop:orders").column("o", "buyer"))
            .await
            .unwrap();
        let orders = conn.table("shop:orders").unwrap();
        orders
            .put(Put::new("o1").add_column_ts("o", "buyer", 7, "ada"))
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
    let dir = basalt_cli::DataDir::open(data.path()).await.unwrap();
    let mut out = Vec::new();
    basalt_cli::run_script(
        &dir,
        "scan 'shop:orders'\n\
         put 'shop:orders', 'o2', 'o:buyer', 'bob'\n\
         scan_index 'shop:orders', 'by_buyer', 'ada'\n\
         list_coprocessors 'shop:orders'\n\
         count 'shop:orders'",
        &mut out,
    )
    .await
    .unwrap();
    dir.close().await.unwrap();
    let text: String = String::from_utf8(out)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("Took "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        text.contains(
            " o1                                column=o:buyer, timestamp=7, value=ada\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "ERROR: table shop:orders is read-only here: its coprocessors amount-rule are not loaded; write to it from the application that registers them\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(" o1                                values=[ada]\n"),
        "{text}"
    );
    assert!(text.contains("amount-rule"), "{text}");
    assert!(text.contains("MISSING"), "{text}");
    assert!(text.contains("NOT RUN"), "{text}");
    assert!(
        text.contains("Table shop:orders is read-only here: this tool lacks amount-rule\n"),
        "{text}"
    );
    assert!(text.ends_with("1 row(s)\n"), "{text}");
}
