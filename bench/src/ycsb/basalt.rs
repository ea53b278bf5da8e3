//! The ycsb suite on Basalt, through its public Table API: table `usertable` pre-split as the
//! core suite's, family `f`, one row per record with qualifiers `field0..field9`.
//!
//! Every write is a `Put` with `Durability::SyncWal` (acknowledged once the WAL record is
//! handed to the OS, as the core suite's). Basalt is async, so the clients are tokio tasks
//! on one multi-thread runtime (as in the core suite), one per `--threads`, each timing its
//! own operations. A read is a `Get` of the whole row; an update a `Put` of one column; a
//! scan a `Scan` from the start key with a row limit (no prefetch: a scan of at most 100
//! rows is one chunk, and many run at once on few cores).
//!
//! The driver is generic over the client's backend (`basalt_core::Backend`): the same
//! operations run on an embedded table ([`run`]) and on a cluster's `Table<RemoteBackend>`
//! (the `cluster` suite, `crate::cluster`).
//!
//! Invariant: a read or scanned row without its 10 fields fails the run, as on the other
//! engines ([`check_fields`]).

use super::client::{merge, PhasePlan, Planned, ThreadStats};
use super::{check_fields, Measured, Settings};
use crate::workload::{split_keys, FIELDS, FIELD_NAMES};
use crate::BenchResult;
use basalt_core::client::{Get, Put, Scan};
use basalt_core::{
    Backend, ColumnFamilyDescriptor, Connection, Durability, PreSplit, Table, TableDescriptor,
    TableName,
};
use futures::TryStreamExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The table's name (YCSB's default `table`).
pub(crate) const TABLE: &str = "usertable";
/// The one column family.
const FAMILY: &str = "f";

/// Reads every field of `key`; an error unless the row has its 10 fields.
pub(crate) async fn read<B: Backend>(table: &Table<B>, key: &[u8]) -> BenchResult<()> {
    let row = table.get(Get::new(key)).await?;
    check_fields("basalt", key, row.cells.iter().map(|c| c.value.len()))
}

/// Runs `p` on `table`; returns the rows a scan read (0 for the other operations).
async fn execute<B: Backend>(table: &Table<B>, p: &Planned<'_>) -> BenchResult<u64> {
    match p {
        Planned::Insert { key, fields, .. } => {
            insert(table, key.as_bytes(), fields).await.map(|()| 0)
        }
        Planned::Read { key } => read(table, key.as_bytes()).await.map(|()| 0),
        Planned::Update {
            key,
            field,
            value,
            read_first,
        } => {
            if *read_first {
                read(table, key.as_bytes()).await?;
            }
            let put = Put::new(key)
                .add_column(FAMILY, FIELD_NAMES[*field], value)
                .durability(Durability::SyncWal);
            table.put(put).await?;
            Ok(0)
        }
        Planned::Scan { key, len } => scan(table, key.as_bytes(), *len).await,
    }
}

/// Inserts a row with every field, `SyncWal`.
pub(crate) async fn insert<B: Backend>(
    table: &Table<B>,
    key: &[u8],
    fields: &[&[u8]; FIELDS],
) -> BenchResult<()> {
    let mut put = Put::new(key).durability(Durability::SyncWal);
    for (q, v) in FIELD_NAMES.iter().zip(fields) {
        put = put.add_column(FAMILY, q, v);
    }
    table.put(put).await?;
    Ok(())
}

/// Reads up to `len` rows from `start` on (no prefetch); returns how many, each checked to
/// have its 10 fields.
pub(crate) async fn scan<B: Backend>(
    table: &Table<B>,
    start: &[u8],
    len: usize,
) -> BenchResult<u64> {
    let scan = Scan::new().start_row(start).limit(len).prefetch(false);
    let mut stream = table.scan(scan)?;
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
}

/// Runs `phase` on `table`, one tokio task per client.
pub(crate) async fn drive<B: Backend>(
    table: Table<B>,
    phase: Arc<PhasePlan>,
) -> BenchResult<Measured> {
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(phase.clients);
    for t in 0..phase.clients {
        let (table, phase) = (table.clone(), phase.clone());
        tasks.push(tokio::spawn(async move {
            let mut stats = ThreadStats::new()?;
            let mut client = phase.client(t);
            while let Some(p) = client.plan(&phase) {
                let start = Instant::now();
                let rows = execute(&table, &p).await;
                let took = start.elapsed();
                phase.done(&p);
                stats.record(&p, took, rows?)?;
            }
            BenchResult::Ok(stats)
        }));
    }
    let mut clients = Vec::with_capacity(tasks.len());
    for t in tasks {
        clients.push(t.await??);
    }
    merge(phase.name, start.elapsed(), clients)
}

/// Opens Basalt in `dir` and creates the table as the core suite does (settings `core`).
pub(crate) async fn open(
    dir: &Path,
    core: &crate::measure::Settings,
) -> BenchResult<(Connection, Table)> {
    let conn = Connection::open_with(crate::basalt_side::config(dir, core)).await?;
    let table = create_table(&conn, core).await?;
    Ok((conn, table))
}

/// Creates the table on `conn`'s backend as the core suite does (settings `core`: its
/// pre-split regions, block size and codecs) and returns a handle on it.
pub(crate) async fn create_table<B: Backend>(
    conn: &Connection<B>,
    core: &crate::measure::Settings,
) -> BenchResult<Table<B>> {
    let splits = split_keys(core.regions)
        .iter()
        .map(|k| k.to_vec())
        .collect();
    conn.admin()
        .create_table_with_splits(
            TableDescriptor::new(TableName::parse(TABLE)?).family(
                ColumnFamilyDescriptor::new(FAMILY)
                    .block_size(core.block_size)
                    .compression(core.compression)
                    .compaction_compression(core.compaction_compression),
            ),
            PreSplit::Keys(splits),
        )
        .await?;
    Ok(conn.table(TABLE)?)
}

/// Runs the load and every workload on Basalt in a fresh temporary directory.
pub fn run(s: &Settings) -> BenchResult<Vec<Measured>> {
    run_as("basalt", s)
}

/// [`run`], with `engine` naming the run in its directory's name and its progress lines.
pub fn run_as(engine: &str, s: &Settings) -> BenchResult<Vec<Measured>> {
    let tmp = super::temp_dir(s, engine)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (conn, table) = rt.block_on(open(tmp.path(), &s.core))?;
    let out = super::run_phases(engine, s, |phase| rt.block_on(drive(table.clone(), phase)));
    rt.block_on(conn.close())?;
    out
}
