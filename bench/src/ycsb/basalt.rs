//! The ycsb suite on Basalt, through its public Table API: table `usertable` pre-split as the
//! core suite's, family `f`, one row per record with qualifiers `field0..field9`.
//!
//! Every write is a `Put` with `Durability::SyncWal` (acknowledged once the WAL record is
//! handed to the OS, as the core suite's). The client threads are OS threads that each
//! `block_on` the async calls on a handle of one multi-thread tokio runtime (as a blocking
//! client of an async engine would), so the latency of one operation is that of its calls.
//! A read is a `Get` of the whole row; an update a `Put` of one column; a scan a `Scan` from
//! the start key with a row limit (no prefetch: a scan of at most 100 rows is one chunk, and
//! many run at once on few cores).

use super::{check_fields, Settings, Store};
use crate::workload::{split_keys, FIELDS, FIELD_NAMES};
use crate::BenchResult;
use basalt_core::client::{Get, Put, Scan};
use basalt_core::{
    ColumnFamilyDescriptor, Connection, Durability, PreSplit, Table, TableDescriptor, TableName,
};
use futures::TryStreamExt;
use std::path::Path;

/// The table's name (YCSB's default `table`).
const TABLE: &str = "usertable";
/// The one column family.
const FAMILY: &str = "f";

/// Basalt as a [`Store`].
pub struct BasaltStore {
    handle: tokio::runtime::Handle,
    table: Table,
}

impl Store for BasaltStore {
    fn insert(&self, key: &[u8], fields: &[&[u8]; FIELDS]) -> BenchResult<()> {
        let mut put = Put::new(key).durability(Durability::SyncWal);
        for (q, v) in FIELD_NAMES.iter().zip(fields) {
            put = put.add_column(FAMILY, q, v);
        }
        self.handle.block_on(self.table.put(put))?;
        Ok(())
    }

    fn read(&self, key: &[u8]) -> BenchResult<()> {
        let row = self.handle.block_on(self.table.get(Get::new(key)))?;
        check_fields("basalt", key, row.cells.iter().map(|c| c.value.len()))
    }

    fn update(&self, key: &[u8], field: usize, value: &[u8]) -> BenchResult<()> {
        let put = Put::new(key)
            .add_column(FAMILY, FIELD_NAMES[field], value)
            .durability(Durability::SyncWal);
        self.handle.block_on(self.table.put(put))?;
        Ok(())
    }

    fn scan(&self, start: &[u8], len: usize) -> BenchResult<u64> {
        self.handle.block_on(async {
            let scan = Scan::new().start_row(start).limit(len).prefetch(false);
            let mut stream = self.table.scan(scan)?;
            let mut rows = 0;
            while let Some(row) = stream.try_next().await? {
                check_fields(
                    "basalt scan",
                    &row.row,
                    row.cells.iter().map(|c| c.value.len()),
                )?;
                rows += 1;
            }
            Ok(rows)
        })
    }
}

/// Opens Basalt in `dir` and creates the table as the core suite does.
async fn open(dir: &Path, s: &Settings) -> BenchResult<(Connection, Table)> {
    let conn = Connection::open_with(crate::basalt_side::config(dir, &s.core)).await?;
    let splits = split_keys(s.core.regions)
        .iter()
        .map(|k| k.to_vec())
        .collect();
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse(TABLE)?).family(
                ColumnFamilyDescriptor::new(FAMILY)
                    .block_size(s.core.block_size)
                    .compression(s.core.compression)
                    .compaction_compression(s.core.compaction_compression),
            ),
            PreSplit::Keys(splits),
        )
        .await?;
    let table = conn.table(TABLE)?;
    Ok((conn, table))
}

/// Runs the load and every workload on Basalt in a fresh temporary directory.
pub fn run(s: &Settings) -> BenchResult<Vec<super::Measured>> {
    let tmp = super::temp_dir(s, "basalt")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (conn, table) = rt.block_on(open(tmp.path(), s))?;
    let store = BasaltStore {
        handle: rt.handle().clone(),
        table,
    };
    let out = super::run_engine("basalt", &store, s);
    drop(store);
    rt.block_on(conn.close())?;
    out
}
