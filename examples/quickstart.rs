//! Quickstart: create a pre-split table, write, read, scan, delete, close, reopen, read again.
//!
//! Run with `cargo run --release --example quickstart [DIR]` (a temporary directory by default).

use basalt::client::{Delete, Get, Put, Scan};
use basalt::{
    ColumnFamilyDescriptor, Connection, PreSplit, Result, SplitAlgorithm, TableDescriptor,
    TableName,
};
use futures::TryStreamExt;

#[tokio::main]
async fn main() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    println!("data directory: {}", dir.display());

    let conn = Connection::open(&dir).await?;
    let admin = conn.admin();
    let name = TableName::parse("demo:users")?;
    if !admin.list_namespaces().await?.contains(&"demo".to_string()) {
        admin.create_namespace("demo").await?;
    }
    if !admin.table_exists(&name).await? {
        let desc = TableDescriptor::new(name.clone())
            .family(ColumnFamilyDescriptor::new("info").max_versions(3));
        admin
            .create_table_with_splits(desc, PreSplit::Algorithm(SplitAlgorithm::HexString, 4))
            .await?;
        println!("created {name} pre-split into 4 regions (HexStringSplit)");
    }
    let users = conn.table("demo:users")?;

    // Row keys are hex hashes, as seed 002 recommends, so they spread over the 4 regions.
    let keys: Vec<String> = (0..16u32)
        .map(|i| format!("{:08x}", i.wrapping_mul(0x9E37_79B9)))
        .collect();
    for (i, k) in keys.iter().enumerate() {
        users
            .put(
                Put::new(k)
                    .add_column("info", "name", format!("user-{i}"))
                    .add_column("info", "age", format!("{}", 20 + i)),
            )
            .await?;
    }
    println!("wrote {} rows", keys.len());

    let row = users.get(Get::new(&keys[3])).await?;
    println!(
        "get {} -> name={}",
        keys[3],
        String::from_utf8_lossy(
            row.value("info", "name")
                .map(|v| v.as_ref())
                .unwrap_or(b"?")
        )
    );

    let rows: Vec<_> = users.scan(Scan::new())?.try_collect().await?;
    println!("scan: {} rows in key order:", rows.len());
    for r in &rows {
        println!(
            "  {} name={}",
            String::from_utf8_lossy(&r.row),
            String::from_utf8_lossy(r.value("info", "name").map(|v| v.as_ref()).unwrap_or(b"?"))
        );
    }
    let rev: Vec<_> = users
        .scan(Scan::new().reversed(true).limit(3))?
        .try_collect()
        .await?;
    println!(
        "reverse scan, limit 3: {:?}",
        rev.iter()
            .map(|r| String::from_utf8_lossy(&r.row).into_owned())
            .collect::<Vec<_>>()
    );

    users.delete(Delete::new(&keys[0])).await?;
    println!("deleted row {}", keys[0]);

    for r in admin.regions(&name).await? {
        println!(
            "region {:<28} start={:<10} end={:<10} reads={} writes={} memstore={}B files={}",
            r.name,
            String::from_utf8_lossy(&r.start_key),
            String::from_utf8_lossy(&r.end_key),
            r.read_requests,
            r.write_requests,
            r.memstore_size,
            r.store_files
        );
    }

    conn.close().await?;
    println!("closed; reopening");
    let conn = Connection::open(&dir).await?;
    println!("{}", conn.recovery_report());
    let users = conn.table("demo:users")?;
    let rows: Vec<_> = users.scan(Scan::new())?.try_collect().await?;
    println!("after reopen: {} rows", rows.len());
    let gone = users.get(Get::new(&keys[0])).await?;
    println!("deleted row still gone: {}", gone.is_empty());
    let row = users.get(Get::new(&keys[5])).await?;
    println!(
        "get {} -> name={}",
        keys[5],
        String::from_utf8_lossy(
            row.value("info", "name")
                .map(|v| v.as_ref())
                .unwrap_or(b"?")
        )
    );
    conn.close().await?;
    Ok(())
}
