//! The Thrift1 handler: each method of HBase's `Hbase` service over the engine, with the
//! reference server's semantics (`ThriftHBaseServiceHandler`): column strings, exclusive
//! read timestamps, puts before deletes in `mutateRows`, counters as 8-byte big-endian
//! values, empty rows skipped, scanners with ids and a lease. Engine calls run on the tokio
//! runtime through `Handle::block_on` from the connection's own thread (never a tokio
//! worker).
//!
//! Invariant: a method answers with its result, one of its declared exceptions, or a Thrift
//! application exception (methods Basalt does not support); never a panic.

use super::calls::called;
use super::convert::*;
use super::scanners::Scanners;
use crate::DataDir;
use basalt_core::client::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Increment, Put, RowResult, Scan,
};
use basalt_core::filter::CompareOp;
use basalt_core::{Durability, Error, Filter, TableName};
use basalt_thrift::hbase::{
    BatchMutation, ColumnDescriptor, HbaseSyncHandler, Mutation, ScannerID, TAppend, TCell,
    TIncrement, TRegionInfo, TRowResult, TScan, Text,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use thrift::{ApplicationError, ApplicationErrorKind};

type Attrs = BTreeMap<Text, Text>;

/// What every connection's handler shares: the engine, the runtime, the scanners.
pub(crate) struct State {
    pub(crate) data: DataDir,
    pub(crate) rt: tokio::runtime::Handle,
    pub(crate) scanners: Scanners,
    /// The gateway's request counters and latency histograms.
    pub(crate) metrics: Arc<super::metrics::GatewayMetrics>,
    /// The data directory served (as the status page shows it).
    pub(crate) dir: String,
    /// The host and port `getTableRegions` reports as the regions' server.
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// One connection's handler (the state is shared).
pub(crate) struct Handler {
    pub(crate) state: Arc<State>,
}

fn unsupported(what: &str) -> thrift::Error {
    super::calls::note_failure();
    thrift::Error::Application(ApplicationError::new(
        ApplicationErrorKind::UnknownMethod,
        format!("{what} is not supported by Basalt's Thrift server"),
    ))
}

fn durability(m: &Mutation) -> Durability {
    if m.write_to_w_a_l == Some(false) {
        Durability::SkipWal
    } else {
        Durability::default()
    }
}

/// A row's mutations split as HBase's `mutateRowsTs` does: one Put and one Delete.
/// `strict`: a put without a qualifier is an error (`mutateRows`), else it is skipped
/// (`mutateRow`, which only logs it).
fn split_mutations(
    row: &[u8],
    mutations: &[Mutation],
    ts: i64,
    strict: bool,
) -> thrift::Result<(Option<Put>, Option<Delete>)> {
    let ts = write_ts(ts)?;
    let mut put = Put::new(row).timestamp(ts);
    let mut del = Delete::new(row).timestamp(ts);
    let (mut any_put, mut any_del) = (false, false);
    for m in mutations {
        let col = m.column.as_deref().unwrap_or_default();
        let (fam, q) = parse_column(col);
        if m.is_delete == Some(true) {
            del = match q {
                None => del.add_family(fam),
                Some(q) => del.add_columns(fam, q),
            }
            .durability(durability(m));
            any_del = true;
        } else {
            let Some(q) = q else {
                if strict {
                    return Err(illegal("Invalid famAndQf provided."));
                }
                tracing::warn!("mutateRow: put without a qualifier skipped");
                continue;
            };
            put = put
                .add_column(fam, q, m.value.as_deref().unwrap_or_default())
                .durability(durability(m));
            any_put = true;
        }
    }
    Ok((any_put.then_some(put), any_del.then_some(del)))
}

fn check_batch(outcomes: Vec<basalt_core::Result<BatchOutcome>>) -> thrift::Result<()> {
    for o in outcomes {
        o.map_err(engine_or_illegal)?;
    }
    Ok(())
}

impl Handler {
    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        self.state.rt.block_on(f)
    }

    fn table(&self, name: &[u8]) -> thrift::Result<(TableName, basalt_core::Table)> {
        let t = table_name(name)?;
        let table = self.state.data.conn.table(t.clone()).map_err(engine)?;
        Ok((t, table))
    }

    /// `compact` / `majorCompact` of a table name, or of a region name (`table,start,id`, as
    /// `getTableRegions` names regions): that region only, as HBase's.
    fn compact_named(&self, name: &[u8], major: bool) -> thrift::Result<()> {
        let t = table_name_of(region_table(name))?;
        let admin = self.state.data.conn.admin();
        let region = name
            .iter()
            .rposition(|&c| c == b',')
            .and_then(|at| std::str::from_utf8(&name[at + 1..]).ok())
            .map(|id| {
                id.parse::<u64>()
                    .map_err(|_| io_error(format!("not a region name (no region id): {id:?}")))
            })
            .transpose()?;
        let done = match (region, major) {
            (Some(id), true) => self.run(admin.major_compact_region(t, id)),
            (Some(id), false) => self.run(admin.compact_region(t, id)),
            (None, true) => self.run(admin.major_compact(t)),
            (None, false) => self.run(admin.compact(t)),
        };
        done.map_err(engine)
    }

    /// `getRow*`: each row that has cells, restricted to `columns`, before `ts`.
    fn rows(
        &self,
        table: &[u8],
        rows: &[Vec<u8>],
        columns: &[Vec<u8>],
        ts: Option<i64>,
    ) -> thrift::Result<Vec<TRowResult>> {
        let (_, t) = self.table(table)?;
        let range = match ts {
            Some(ts) => match read_range(ts) {
                Some(r) => Some(r),
                None => return Ok(Vec::new()),
            },
            None => None,
        };
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut g = get_with_columns(row, columns);
            if let Some(r) = range {
                g = g.time_range(r);
            }
            let r = self.run(t.get(g)).map_err(engine)?;
            if !r.is_empty() {
                out.push(row_result(r, false));
            }
        }
        Ok(out)
    }

    /// `get`/`getVer*`: up to `versions` versions of one column (or family).
    fn versions(
        &self,
        table: &[u8],
        row: &[u8],
        column: &[u8],
        versions: i32,
        ts: Option<i64>,
    ) -> thrift::Result<Vec<TCell>> {
        let (_, t) = self.table(table)?;
        let versions = u32::try_from(versions).unwrap_or(0).max(1);
        let mut g = get_with_columns(row, std::slice::from_ref(&column.to_vec()));
        g = g.max_versions(versions);
        if let Some(ts) = ts {
            match read_range(ts) {
                Some(r) => g = g.time_range(r),
                None => return Ok(Vec::new()),
            }
        }
        let r = self.run(t.get(g)).map_err(engine)?;
        Ok(cells(&r))
    }

    fn mutate_row(&self, table: &[u8], row: &[u8], ms: &[Mutation], ts: i64) -> thrift::Result<()> {
        let (_, t) = self.table(table)?;
        let (put, del) = split_mutations(row, ms, ts, false)?;
        // HBase's mutateRowTs applies the delete first, then the put.
        if let Some(d) = del {
            self.run(t.delete(d)).map_err(engine_or_illegal)?;
        }
        if let Some(p) = put {
            self.run(t.put(p)).map_err(engine_or_illegal)?;
        }
        Ok(())
    }

    fn mutate_rows(&self, table: &[u8], batches: &[BatchMutation], ts: i64) -> thrift::Result<()> {
        let (_, t) = self.table(table)?;
        let (mut puts, mut dels) = (Vec::new(), Vec::new());
        for b in batches {
            let row = b.row.as_deref().unwrap_or_default();
            let ms = b.mutations.as_deref().unwrap_or_default();
            let (put, del) = split_mutations(row, ms, ts, true)?;
            puts.extend(put.map(BatchOp::Put));
            dels.extend(del.map(BatchOp::Delete));
        }
        // HBase's mutateRowsTs applies every put first, then every delete.
        if !puts.is_empty() {
            check_batch(self.run(t.batch(puts)).map_err(engine_or_illegal)?)?;
        }
        if !dels.is_empty() {
            check_batch(self.run(t.batch(dels)).map_err(engine_or_illegal)?)?;
        }
        Ok(())
    }

    fn delete(&self, table: &[u8], d: Delete) -> thrift::Result<()> {
        let (_, t) = self.table(table)?;
        self.run(t.delete(d)).map_err(engine)
    }

    fn delete_column(&self, table: &[u8], row: &[u8], col: &[u8], ts: i64) -> thrift::Result<()> {
        let d = Delete::new(row).timestamp(write_ts(ts).map_err(|_| io_error("bad timestamp"))?);
        let d = match parse_column(col) {
            (fam, None) => d.add_family(fam),
            (fam, Some(q)) => d.add_columns(fam, q),
        };
        self.delete(table, d)
    }

    fn increment(&self, table: &[u8], row: &[u8], col: &[u8], by: i64) -> thrift::Result<i64> {
        let (_, t) = self.table(table)?;
        let (fam, q) = parse_column(col);
        let q = q.unwrap_or_default();
        let r = self
            .run(t.increment(Increment::new(row).add_column(fam, q, by)))
            .map_err(engine_or_illegal)?;
        let v = r
            .value(fam, q)
            .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
            .ok_or_else(|| io_error("the increment returned no 8-byte counter"))?;
        Ok(i64::from_be_bytes(v))
    }

    fn open_scanner(&self, table: &[u8], scan: Scan, sorted: bool) -> thrift::Result<ScannerID> {
        let (name, t) = self.table(table)?;
        // A scan's stream starts on the runtime (its prefetch needs one).
        let rows = self.run(async { t.scan(scan.prefetch(false)) });
        self.state
            .scanners
            .open(rows.map_err(engine)?, sorted, display_name(&name))
    }

    fn open_simple(
        &self,
        table: &[u8],
        start: &[u8],
        stop: Option<&[u8]>,
        columns: &[Vec<u8>],
        ts: Option<i64>,
    ) -> thrift::Result<ScannerID> {
        let mut s = scan_with_columns(Scan::new(), columns);
        if !start.is_empty() {
            s = s.start_row(start);
        }
        if let Some(stop) = stop.filter(|s| !s.is_empty()) {
            s = s.stop_row(stop);
        }
        if let Some(ts) = ts {
            s = s.time_range(read_range(ts).ok_or_else(|| io_error("timestamp must be positive"))?);
        }
        self.open_scanner(table, s, false)
    }

    fn region_info(&self, r: &basalt_core::RegionInfo) -> TRegionInfo {
        TRegionInfo {
            start_key: Some(r.start_key.to_vec()),
            end_key: Some(r.end_key.to_vec()),
            id: Some(i64::try_from(r.id).unwrap_or(i64::MAX)),
            name: Some(r.name.clone().into_bytes()),
            version: Some(1),
            server_name: Some(self.state.host.clone().into_bytes()),
            port: Some(i32::from(self.state.port)),
        }
    }
}

impl HbaseSyncHandler for Handler {
    fn handle_enable_table(&self, table_name: Vec<u8>) -> thrift::Result<()> {
        called("enableTable");
        let t = table_name_of(&table_name)?;
        self.run(self.state.data.conn.admin().enable_table(t))
            .map_err(engine)
    }

    fn handle_disable_table(&self, table_name: Vec<u8>) -> thrift::Result<()> {
        called("disableTable");
        let t = table_name_of(&table_name)?;
        self.run(self.state.data.conn.admin().disable_table(t))
            .map_err(engine)
    }

    fn handle_is_table_enabled(&self, table_name: Vec<u8>) -> thrift::Result<bool> {
        called("isTableEnabled");
        let t = table_name_of(&table_name)?;
        self.run(self.state.data.conn.admin().is_table_enabled(t))
            .map_err(engine)
    }

    fn handle_compact(&self, name: Vec<u8>) -> thrift::Result<()> {
        called("compact");
        self.compact_named(&name, false)
    }

    fn handle_major_compact(&self, name: Vec<u8>) -> thrift::Result<()> {
        called("majorCompact");
        self.compact_named(&name, true)
    }

    fn handle_get_table_names(&self) -> thrift::Result<Vec<Text>> {
        called("getTableNames");
        let tables = self
            .run(self.state.data.conn.admin().list_tables())
            .map_err(engine)?;
        let mut names: Vec<Text> = tables
            .iter()
            .map(|d| display_name(&d.name).into_bytes())
            .collect();
        names.sort();
        Ok(names)
    }

    fn handle_get_column_descriptors(
        &self,
        table_name: Text,
    ) -> thrift::Result<BTreeMap<Text, ColumnDescriptor>> {
        called("getColumnDescriptors");
        let t = table_name_of(&table_name)?;
        let desc = self
            .run(self.state.data.conn.admin().describe_table(t))
            .map_err(engine)?;
        Ok(desc
            .families
            .iter()
            // The reserved family of local index rows is no column family a client reads.
            .filter(|f| !f.is_local_rows())
            .map(|f| {
                let d = family_to_thrift(f);
                (d.name.clone().unwrap_or_default(), d)
            })
            .collect())
    }

    fn handle_get_table_regions(&self, table_name: Text) -> thrift::Result<Vec<TRegionInfo>> {
        called("getTableRegions");
        let t = table_name_of(&table_name)?;
        match self.run(self.state.data.conn.admin().regions(t)) {
            Ok(regions) => Ok(regions.iter().map(|r| self.region_info(r)).collect()),
            Err(Error::TableNotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(engine(e)),
        }
    }

    fn handle_create_table(
        &self,
        table_name: Text,
        column_families: Vec<ColumnDescriptor>,
    ) -> thrift::Result<()> {
        called("createTable");
        let t = super::convert::table_name(&table_name).map_err(|e| illegal(e.to_string()))?;
        if column_families.is_empty() {
            return Err(illegal("a table needs at least one column family"));
        }
        let mut desc = basalt_core::TableDescriptor::new(t);
        for cf in &column_families {
            desc = desc.family(family_from_thrift(cf)?);
        }
        match self.run(self.state.data.conn.admin().create_table(desc)) {
            Ok(()) => Ok(()),
            Err(Error::TableExists(_)) => Err(already_exists("table name already in use")),
            Err(e) => Err(engine_or_illegal(e)),
        }
    }

    fn handle_delete_table(&self, table_name: Text) -> thrift::Result<()> {
        called("deleteTable");
        let t = table_name_of(&table_name)?;
        match self.run(self.state.data.conn.admin().delete_table(t)) {
            Err(Error::TableNotFound(_)) => Err(io_error("table does not exist")),
            other => other.map_err(engine),
        }
    }

    fn handle_get(
        &self,
        t: Text,
        row: Text,
        column: Text,
        _a: Attrs,
    ) -> thrift::Result<Vec<TCell>> {
        called("get");
        self.versions(&t, &row, &column, 1, None)
    }

    fn handle_get_ver(
        &self,
        t: Text,
        row: Text,
        column: Text,
        num_versions: i32,
        _a: Attrs,
    ) -> thrift::Result<Vec<TCell>> {
        called("getVer");
        self.versions(&t, &row, &column, num_versions, None)
    }

    fn handle_get_ver_ts(
        &self,
        t: Text,
        row: Text,
        column: Text,
        timestamp: i64,
        num_versions: i32,
        _a: Attrs,
    ) -> thrift::Result<Vec<TCell>> {
        called("getVerTs");
        self.versions(&t, &row, &column, num_versions, Some(timestamp))
    }

    fn handle_get_row(&self, t: Text, row: Text, _a: Attrs) -> thrift::Result<Vec<TRowResult>> {
        called("getRow");
        self.rows(&t, &[row], &[], None)
    }

    fn handle_get_row_with_columns(
        &self,
        t: Text,
        row: Text,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowWithColumns");
        self.rows(&t, &[row], &columns, None)
    }

    fn handle_get_row_ts(
        &self,
        t: Text,
        row: Text,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowTs");
        self.rows(&t, &[row], &[], Some(timestamp))
    }

    fn handle_get_row_with_columns_ts(
        &self,
        t: Text,
        row: Text,
        columns: Vec<Text>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowWithColumnsTs");
        self.rows(&t, &[row], &columns, Some(timestamp))
    }

    fn handle_get_rows(
        &self,
        t: Text,
        rows: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRows");
        self.rows(&t, &rows, &[], None)
    }

    fn handle_get_rows_with_columns(
        &self,
        t: Text,
        rows: Vec<Text>,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowsWithColumns");
        self.rows(&t, &rows, &columns, None)
    }

    fn handle_get_rows_ts(
        &self,
        t: Text,
        rows: Vec<Text>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowsTs");
        self.rows(&t, &rows, &[], Some(timestamp))
    }

    fn handle_get_rows_with_columns_ts(
        &self,
        t: Text,
        rows: Vec<Text>,
        columns: Vec<Text>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowsWithColumnsTs");
        self.rows(&t, &rows, &columns, Some(timestamp))
    }

    fn handle_mutate_row(
        &self,
        t: Text,
        row: Text,
        mutations: Vec<Mutation>,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("mutateRow");
        self.mutate_row(&t, &row, &mutations, i64::MAX)
    }

    fn handle_mutate_row_ts(
        &self,
        t: Text,
        row: Text,
        mutations: Vec<Mutation>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("mutateRowTs");
        self.mutate_row(&t, &row, &mutations, timestamp)
    }

    fn handle_mutate_rows(
        &self,
        t: Text,
        row_batches: Vec<BatchMutation>,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("mutateRows");
        self.mutate_rows(&t, &row_batches, i64::MAX)
    }

    fn handle_mutate_rows_ts(
        &self,
        t: Text,
        row_batches: Vec<BatchMutation>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("mutateRowsTs");
        self.mutate_rows(&t, &row_batches, timestamp)
    }

    fn handle_atomic_increment(
        &self,
        t: Text,
        row: Text,
        column: Text,
        value: i64,
    ) -> thrift::Result<i64> {
        called("atomicIncrement");
        self.increment(&t, &row, &column, value)
    }

    fn handle_delete_all(&self, t: Text, row: Text, column: Text, _a: Attrs) -> thrift::Result<()> {
        called("deleteAll");
        self.delete_column(&t, &row, &column, i64::MAX)
    }

    fn handle_delete_all_ts(
        &self,
        t: Text,
        row: Text,
        column: Text,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("deleteAllTs");
        self.delete_column(&t, &row, &column, timestamp)
    }

    fn handle_delete_all_row(&self, t: Text, row: Text, _a: Attrs) -> thrift::Result<()> {
        called("deleteAllRow");
        self.delete(&t, Delete::new(row))
    }

    fn handle_increment(&self, inc: TIncrement) -> thrift::Result<()> {
        called("increment");
        let (t, row, col) = (
            inc.table.unwrap_or_default(),
            inc.row.unwrap_or_default(),
            inc.column.unwrap_or_default(),
        );
        self.increment(&t, &row, &col, inc.ammount.unwrap_or(0))
            .map(|_| ())
    }

    fn handle_increment_rows(&self, increments: Vec<TIncrement>) -> thrift::Result<()> {
        called("incrementRows");
        for inc in increments {
            let (t, row, col) = (
                inc.table.unwrap_or_default(),
                inc.row.unwrap_or_default(),
                inc.column.unwrap_or_default(),
            );
            self.increment(&t, &row, &col, inc.ammount.unwrap_or(0))?;
        }
        Ok(())
    }

    fn handle_delete_all_row_ts(
        &self,
        t: Text,
        row: Text,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("deleteAllRowTs");
        let ts = write_ts(timestamp).map_err(|_| io_error("bad timestamp"))?;
        self.delete(&t, Delete::new(row).timestamp(ts))
    }

    fn handle_scanner_open_with_scan(
        &self,
        t: Text,
        scan: TScan,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpenWithScan");
        let mut s = scan_with_columns(Scan::new(), scan.columns.as_deref().unwrap_or_default());
        if let Some(start) = scan.start_row.filter(|r| !r.is_empty()) {
            s = s.start_row(start);
        }
        if let Some(stop) = scan.stop_row.filter(|r| !r.is_empty()) {
            s = s.stop_row(stop);
        }
        if let Some(ts) = scan.timestamp {
            s = s.time_range(read_range(ts).ok_or_else(|| io_error("timestamp must be positive"))?);
        }
        if let Some(f) = scan.filter_string.filter(|f| !f.is_empty()) {
            let text = String::from_utf8(f).map_err(|_| io_error("filter string is not UTF-8"))?;
            s = s.filter(Filter::parse(&text).map_err(engine)?);
        }
        if let Some(batch) = scan
            .batch_size
            .and_then(|b| usize::try_from(b).ok())
            .filter(|&b| b > 0)
        {
            s = s.batch(batch);
        }
        if scan.reversed == Some(true) {
            s = s.reversed(true);
        }
        self.open_scanner(&t, s, scan.sort_columns == Some(true))
    }

    fn handle_scanner_open(
        &self,
        t: Text,
        start_row: Text,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpen");
        self.open_simple(&t, &start_row, None, &columns, None)
    }

    fn handle_scanner_open_with_stop(
        &self,
        t: Text,
        start_row: Text,
        stop_row: Text,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpenWithStop");
        self.open_simple(&t, &start_row, Some(&stop_row), &columns, None)
    }

    fn handle_scanner_open_with_prefix(
        &self,
        t: Text,
        prefix: Text,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpenWithPrefix");
        let s = scan_with_columns(Scan::new().with_prefix(prefix), &columns);
        self.open_scanner(&t, s, false)
    }

    fn handle_scanner_open_ts(
        &self,
        t: Text,
        start_row: Text,
        columns: Vec<Text>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpenTs");
        self.open_simple(&t, &start_row, None, &columns, Some(timestamp))
    }

    fn handle_scanner_open_with_stop_ts(
        &self,
        t: Text,
        start_row: Text,
        stop_row: Text,
        columns: Vec<Text>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpenWithStopTs");
        self.open_simple(&t, &start_row, Some(&stop_row), &columns, Some(timestamp))
    }

    fn handle_scanner_get(&self, id: ScannerID) -> thrift::Result<Vec<TRowResult>> {
        called("scannerGet");
        self.state.scanners.next_rows(id, 1, &self.state.rt)
    }

    fn handle_scanner_get_list(
        &self,
        id: ScannerID,
        nb_rows: i32,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("scannerGetList");
        self.state.scanners.next_rows(id, nb_rows, &self.state.rt)
    }

    fn handle_scanner_close(&self, id: ScannerID) -> thrift::Result<()> {
        called("scannerClose");
        if self.state.scanners.close(id) {
            Ok(())
        } else {
            Err(illegal("scanner ID is invalid"))
        }
    }

    fn handle_get_row_or_before(
        &self,
        _t: Text,
        _row: Text,
        _family: Text,
    ) -> thrift::Result<Vec<TCell>> {
        called("getRowOrBefore");
        Err(unsupported("getRowOrBefore (removed from HBase)"))
    }

    fn handle_get_region_info(&self, row: Text) -> thrift::Result<TRegionInfo> {
        called("getRegionInfo");
        // A meta row key: `table,row[,id]`.
        let at = row
            .iter()
            .position(|&c| c == b',')
            .ok_or_else(|| io_error("expected a region key `table,row[,id]`"))?;
        let t = table_name_of(&row[..at])?;
        let mut key = &row[at + 1..];
        if let Some(comma) = key.iter().rposition(|&c| c == b',') {
            if key[comma + 1..].iter().all(u8::is_ascii_digit) {
                key = &key[..comma];
            }
        }
        let regions = self
            .run(self.state.data.conn.admin().regions(t))
            .map_err(engine)?;
        regions
            .iter()
            .find(|r| {
                r.start_key.as_ref() <= key && (r.end_key.is_empty() || key < r.end_key.as_ref())
            })
            .map(|r| self.region_info(r))
            .ok_or_else(|| io_error("no region holds that row"))
    }

    fn handle_append(&self, append: TAppend) -> thrift::Result<Vec<TCell>> {
        called("append");
        let (tn, row) = (
            append.table.unwrap_or_default(),
            append.row.unwrap_or_default(),
        );
        let (columns, values) = (
            append.columns.unwrap_or_default(),
            append.values.unwrap_or_default(),
        );
        if columns.len() != values.len() {
            return Err(io_error("append: as many values as columns are needed"));
        }
        let mut a = Append::new(&row);
        for (c, v) in columns.iter().zip(&values) {
            let (fam, q) = parse_column(c);
            a = a.add_column(fam, q.unwrap_or_default(), v);
        }
        let (_, t) = self.table(&tn)?;
        let r: RowResult = self.run(t.append(a)).map_err(engine)?;
        Ok(cells(&r))
    }

    fn handle_check_and_put(
        &self,
        t: Text,
        row: Text,
        column: Text,
        value: Text,
        mput: Mutation,
        _a: Attrs,
    ) -> thrift::Result<bool> {
        called("checkAndPut");
        let (fam, q) = parse_column(&column);
        let check = CheckAndMutate::new(&row, fam, q.unwrap_or_default())
            .if_value(CompareOp::Equal, &value);
        let (put, _) = split_mutations(&row, std::slice::from_ref(&mput), i64::MAX, true)?;
        let Some(put) = put.filter(|_| mput.is_delete != Some(true)) else {
            return Err(illegal("checkAndPut needs a put mutation"));
        };
        let (_, table) = self.table(&t)?;
        self.run(table.check_and_mutate(check.then_put(put)))
            .map_err(engine_or_illegal)
    }
}

/// A table name as an `IOError` on failure.
fn table_name_of(name: &[u8]) -> thrift::Result<TableName> {
    table_name(name)
}

/// The table part of a region name (`table,start,id`), or the whole name.
fn region_table(name: &[u8]) -> &[u8] {
    match name.iter().position(|&c| c == b',') {
        Some(at) => &name[..at],
        None => name,
    }
}
