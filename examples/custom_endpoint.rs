//! A custom endpoint written from scratch: per column family, the number of cells and the
//! bytes of their values, computed inside each region of a pre-split table and merged on
//! the client. Prints every region's answer, then the merged one, then checks it against a
//! client-side scan of the same rows.
//!
//! Run with `cargo run --release --example custom_endpoint`.

use basalt::client::{Put, Scan};
use basalt::coprocessors::{collect_ordered, fold};
use basalt::coprocessors::{CallOptions, Endpoint, EndpointRegistry, Endpoints, KeyRange};
use basalt::endpoint::RegionView;
use basalt::{
    ColumnFamilyDescriptor, Connection, PreSplit, Result, SplitAlgorithm, TableDescriptor,
    TableName,
};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the caller asks: only rows whose key starts with this (empty: every row).
#[derive(Debug, Serialize, Deserialize)]
struct SizeRequest {
    row_prefix: String,
}

/// One family's total: cells and value bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct FamilySize {
    cells: u64,
    value_bytes: u64,
}

/// The endpoint: value sizes per family of the region's rows in range.
struct ValueSizes;

impl Endpoint for ValueSizes {
    type Request = SizeRequest;
    type Response = BTreeMap<String, FamilySize>;

    fn call(&self, region: &RegionView<'_>, req: &SizeRequest) -> Result<Self::Response> {
        let mut out: BTreeMap<String, FamilySize> = BTreeMap::new();
        // A region-local scan at the call's read point: rows never leave the region.
        for row in region.scan(&Scan::new().with_prefix(&req.row_prefix))? {
            for cell in row?.cells {
                let e = out
                    .entry(String::from_utf8_lossy(&cell.family).into_owned())
                    .or_default();
                e.cells += 1;
                e.value_bytes += cell.value.len() as u64;
            }
        }
        Ok(out)
    }
}

fn merge(
    mut a: BTreeMap<String, FamilySize>,
    b: BTreeMap<String, FamilySize>,
) -> BTreeMap<String, FamilySize> {
    for (family, s) in b {
        let e = a.entry(family).or_default();
        e.cells += s.cells;
        e.value_bytes += s.value_bytes;
    }
    a
}

#[tokio::main]
async fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let conn = Connection::open(dir.path()).await?;
    println!("{}", conn.recovery_report());
    let name = TableName::parse("events")?;
    // Four regions over hex-looking keys.
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(name.clone())
                .family(ColumnFamilyDescriptor::new("meta"))
                .family(ColumnFamilyDescriptor::new("body")),
            PreSplit::Algorithm(SplitAlgorithm::HexString, 4),
        )
        .await?;
    let table = conn.table("events")?;
    for i in 0u32..2_000 {
        let row = format!("{:08x}", i.wrapping_mul(2_654_435_761));
        table
            .put(
                Put::new(&row)
                    .add_column("meta", "kind", if i % 3 == 0 { "click" } else { "view" })
                    .add_column("body", "text", "x".repeat((i % 50) as usize + 1)),
            )
            .await?;
    }

    let registry = Arc::new(EndpointRegistry::new());
    registry.register(&name, "value_sizes", ValueSizes)?;
    let endpoints =
        Endpoints::new(&conn, registry).with_options(CallOptions::default().ordered(true));
    let req = SizeRequest {
        row_prefix: String::new(),
    };

    println!("per region:");
    let stream = endpoints.coprocessor_service::<ValueSizes>(
        "events",
        "value_sizes",
        KeyRange::all(),
        &req,
    )?;
    for answer in collect_ordered(stream).await {
        let span = &answer.span;
        println!(
            "  region {} [{}, {}): {:?}",
            span.region_id,
            String::from_utf8_lossy(&span.region_start),
            String::from_utf8_lossy(&span.region_end),
            answer.result?
        );
    }

    let stream = endpoints.coprocessor_service::<ValueSizes>(
        "events",
        "value_sizes",
        KeyRange::all(),
        &req,
    )?;
    let merged = fold(stream, BTreeMap::new(), merge).await?;
    println!("merged: {merged:?}");

    // The same numbers from a client-side scan, for comparison.
    let mut client: BTreeMap<String, FamilySize> = BTreeMap::new();
    let mut rows = table.scan(Scan::new())?;
    while let Some(row) = rows.try_next().await? {
        for cell in row.cells {
            let e = client
                .entry(String::from_utf8_lossy(&cell.family).into_owned())
                .or_default();
            e.cells += 1;
            e.value_bytes += cell.value.len() as u64;
        }
    }
    assert_eq!(merged, client, "endpoint and client-side scan disagree");
    println!("client-side scan agrees");
    conn.close().await
}
