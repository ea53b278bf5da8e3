//! Helpers of the snapshot and backup tests: a one-family table `f`, rows `r0000...` with
//! one `f:q` value, and a table read back as a row -> value map.

use basalt::client::{Put, RowResult, Scan};
use basalt::{ColumnFamilyDescriptor, Connection, TableDescriptor, TableName};
use futures::TryStreamExt;
use std::collections::BTreeMap;

/// A table read back: row -> its `f:q` value.
pub type Rows = BTreeMap<String, String>;

/// Every row of `table` with its `f:q` value.
pub async fn rows(conn: &Connection, table: &str) -> Rows {
    let got: Vec<RowResult> = conn
        .table(table)
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    got.iter()
        .map(|r| {
            let v = r.value(b"f", b"q").map(|v| v.to_vec()).unwrap_or_default();
            (
                String::from_utf8_lossy(&r.row).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect()
}

/// Puts rows `r{i:04}` for `i` in `range`, each `f:q = value`.
pub async fn put_rows(conn: &Connection, table: &str, range: std::ops::Range<u32>, value: &str) {
    let t = conn.table(table).unwrap();
    for i in range {
        t.put(Put::new(format!("r{i:04}")).add_column("f", "q", value))
            .await
            .unwrap();
    }
}

/// A table descriptor of `name` with the one family `f`.
pub fn table(name: &str) -> TableDescriptor {
    TableDescriptor::new(TableName::parse(name).unwrap()).family(ColumnFamilyDescriptor::new("f"))
}
