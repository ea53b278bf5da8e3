//! The Thrift1 handler: each method of HBase's `Hbase` service over the engine, with the
//! reference server's semantics (`ThriftHBaseServiceHandler`): column strings, exclusive
//! read timestamps, puts before deletes in `mutateRows`, counters as 8-byte big-endian
//! values, empty rows skipped, scanners with ids and a lease. Engine calls run on the tokio
//! runtime through `Handle::block_on` from the connection's own thread (never a tokio
//! worker).
//!
//! This file is the dispatch: each method records its call (for the metrics and the log)
//! and hands its arguments to its group of the IDL: [`tables`] (table and region admin),
//! [`reads`] (`get*`), [`writes`] (mutations, deletes, counters, `append`,
//! `checkAndPut`) and [`scanners`].
//!
//! Invariant: a method answers with its result, one of its declared exceptions, or a Thrift
//! application exception (methods Basalt does not support); never a panic.

mod reads;
mod scanners;
mod tables;
mod writes;

use super::calls::{called, note_failure};
use super::convert::{engine, table_name};
use super::state::State;
use basalt_core::client::Backend;
use basalt_core::TableName;
use basalt_thrift::hbase::{
    BatchMutation, ColumnDescriptor, HbaseSyncHandler, Mutation, ScannerID, TAppend, TCell,
    TIncrement, TRegionInfo, TRowResult, TScan, Text,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use thrift::{ApplicationError, ApplicationErrorKind};

type Attrs = BTreeMap<Text, Text>;

/// One connection's handler (the state is shared).
pub(crate) struct Handler<B: Backend> {
    pub(crate) state: Arc<State<B>>,
}

fn unsupported(what: &str) -> thrift::Error {
    note_failure();
    thrift::Error::Application(ApplicationError::new(
        ApplicationErrorKind::UnknownMethod,
        format!("{what} is not supported by Basalt's Thrift server"),
    ))
}

impl<B: Backend> Handler<B> {
    /// Runs an engine call to its end on the runtime.
    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        self.state.rt.block_on(f)
    }

    /// The table named `name`.
    fn table(&self, name: &[u8]) -> thrift::Result<(TableName, basalt_core::Table<B>)> {
        let t = table_name(name)?;
        let table = self.state.data.conn.table(t.clone()).map_err(engine)?;
        Ok((t, table))
    }
}

impl<B: Backend> HbaseSyncHandler for Handler<B> {
    fn handle_enable_table(&self, table_name: Vec<u8>) -> thrift::Result<()> {
        called("enableTable");
        tables::enable(self, &table_name, true)
    }

    fn handle_disable_table(&self, table_name: Vec<u8>) -> thrift::Result<()> {
        called("disableTable");
        tables::enable(self, &table_name, false)
    }

    fn handle_is_table_enabled(&self, table_name: Vec<u8>) -> thrift::Result<bool> {
        called("isTableEnabled");
        tables::is_enabled(self, &table_name)
    }

    fn handle_compact(&self, name: Vec<u8>) -> thrift::Result<()> {
        called("compact");
        tables::compact(self, &name, false)
    }

    fn handle_major_compact(&self, name: Vec<u8>) -> thrift::Result<()> {
        called("majorCompact");
        tables::compact(self, &name, true)
    }

    fn handle_get_table_names(&self) -> thrift::Result<Vec<Text>> {
        called("getTableNames");
        tables::names(self)
    }

    fn handle_get_column_descriptors(
        &self,
        table_name: Text,
    ) -> thrift::Result<BTreeMap<Text, ColumnDescriptor>> {
        called("getColumnDescriptors");
        tables::column_descriptors(self, &table_name)
    }

    fn handle_get_table_regions(&self, table_name: Text) -> thrift::Result<Vec<TRegionInfo>> {
        called("getTableRegions");
        tables::regions(self, &table_name)
    }

    fn handle_create_table(
        &self,
        table_name: Text,
        column_families: Vec<ColumnDescriptor>,
    ) -> thrift::Result<()> {
        called("createTable");
        tables::create(self, &table_name, &column_families)
    }

    fn handle_delete_table(&self, table_name: Text) -> thrift::Result<()> {
        called("deleteTable");
        tables::delete(self, &table_name)
    }

    fn handle_get(
        &self,
        t: Text,
        row: Text,
        column: Text,
        _a: Attrs,
    ) -> thrift::Result<Vec<TCell>> {
        called("get");
        reads::versions(self, &t, &row, &column, 1, None)
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
        reads::versions(self, &t, &row, &column, num_versions, None)
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
        reads::versions(self, &t, &row, &column, num_versions, Some(timestamp))
    }

    fn handle_get_row(&self, t: Text, row: Text, _a: Attrs) -> thrift::Result<Vec<TRowResult>> {
        called("getRow");
        reads::rows(self, &t, &[row], &[], None)
    }

    fn handle_get_row_with_columns(
        &self,
        t: Text,
        row: Text,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowWithColumns");
        reads::rows(self, &t, &[row], &columns, None)
    }

    fn handle_get_row_ts(
        &self,
        t: Text,
        row: Text,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowTs");
        reads::rows(self, &t, &[row], &[], Some(timestamp))
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
        reads::rows(self, &t, &[row], &columns, Some(timestamp))
    }

    fn handle_get_rows(
        &self,
        t: Text,
        rows: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRows");
        reads::rows(self, &t, &rows, &[], None)
    }

    fn handle_get_rows_with_columns(
        &self,
        t: Text,
        rows: Vec<Text>,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowsWithColumns");
        reads::rows(self, &t, &rows, &columns, None)
    }

    fn handle_get_rows_ts(
        &self,
        t: Text,
        rows: Vec<Text>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<Vec<TRowResult>> {
        called("getRowsTs");
        reads::rows(self, &t, &rows, &[], Some(timestamp))
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
        reads::rows(self, &t, &rows, &columns, Some(timestamp))
    }

    fn handle_mutate_row(
        &self,
        t: Text,
        row: Text,
        mutations: Vec<Mutation>,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("mutateRow");
        writes::mutate_row(self, &t, &row, &mutations, i64::MAX)
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
        writes::mutate_row(self, &t, &row, &mutations, timestamp)
    }

    fn handle_mutate_rows(
        &self,
        t: Text,
        row_batches: Vec<BatchMutation>,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("mutateRows");
        writes::mutate_rows(self, &t, &row_batches, i64::MAX)
    }

    fn handle_mutate_rows_ts(
        &self,
        t: Text,
        row_batches: Vec<BatchMutation>,
        timestamp: i64,
        _a: Attrs,
    ) -> thrift::Result<()> {
        called("mutateRowsTs");
        writes::mutate_rows(self, &t, &row_batches, timestamp)
    }

    fn handle_atomic_increment(
        &self,
        t: Text,
        row: Text,
        column: Text,
        value: i64,
    ) -> thrift::Result<i64> {
        called("atomicIncrement");
        writes::increment(self, &t, &row, &column, value)
    }

    fn handle_delete_all(&self, t: Text, row: Text, column: Text, _a: Attrs) -> thrift::Result<()> {
        called("deleteAll");
        writes::delete_column(self, &t, &row, &column, i64::MAX)
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
        writes::delete_column(self, &t, &row, &column, timestamp)
    }

    fn handle_delete_all_row(&self, t: Text, row: Text, _a: Attrs) -> thrift::Result<()> {
        called("deleteAllRow");
        writes::delete_row(self, &t, row, None)
    }

    fn handle_increment(&self, inc: TIncrement) -> thrift::Result<()> {
        called("increment");
        writes::increment_one(self, inc).map(|_| ())
    }

    fn handle_increment_rows(&self, increments: Vec<TIncrement>) -> thrift::Result<()> {
        called("incrementRows");
        for inc in increments {
            writes::increment_one(self, inc)?;
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
        writes::delete_row(self, &t, row, Some(timestamp))
    }

    fn handle_scanner_open_with_scan(
        &self,
        t: Text,
        scan: TScan,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpenWithScan");
        scanners::open_with_scan(self, &t, scan)
    }

    fn handle_scanner_open(
        &self,
        t: Text,
        start_row: Text,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpen");
        scanners::open_range(self, &t, &start_row, None, &columns, None)
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
        scanners::open_range(self, &t, &start_row, Some(&stop_row), &columns, None)
    }

    fn handle_scanner_open_with_prefix(
        &self,
        t: Text,
        prefix: Text,
        columns: Vec<Text>,
        _a: Attrs,
    ) -> thrift::Result<ScannerID> {
        called("scannerOpenWithPrefix");
        scanners::open_prefix(self, &t, prefix, &columns)
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
        scanners::open_range(self, &t, &start_row, None, &columns, Some(timestamp))
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
        let stop = Some(stop_row.as_slice());
        scanners::open_range(self, &t, &start_row, stop, &columns, Some(timestamp))
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
        scanners::close(self, id)
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
        tables::region_of_row(self, &row)
    }

    fn handle_append(&self, append: TAppend) -> thrift::Result<Vec<TCell>> {
        called("append");
        writes::append(self, append)
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
        writes::check_and_put(self, &t, &row, &column, &value, mput)
    }
}
