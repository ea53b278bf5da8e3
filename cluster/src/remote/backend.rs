//! [`RemoteBackend`] as the client's `Backend`: each call sent where the module doc of
//! `remote` says, its reply unpacked (a reply of the wrong kind is an error, never a
//! panic).

use super::endpoint;
use super::route::{lock, with_retries};
use super::scan;
use super::schema;
use super::{batch_row, RemoteBackend, RemoteReadPoint};
use crate::procedures;
use crate::rpc::client::unexpected;
use crate::rpc::messages::{Reply, Request};
use basalt_core::client::{
    Append, Backend, BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Increment, Put,
    RowMutations, RowResult, Scan,
};
use basalt_core::endpoint::EndpointAnswers;
use basalt_core::keys::RowRange;
use basalt_core::{
    ColumnFamilyDescriptor, CompactionKind, CoprocessorDescriptor, Error, IntegrityReport,
    OfflineRegion, PluginInfo, PreSplit, RegionInfo, Result, SnapshotDescription, TableDescriptor,
    TableName,
};
use bytes::Bytes;
use futures::stream::BoxStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// `reply` as nothing, or the error of an unexpected reply to `call`.
fn done(call: &str, reply: Reply) -> Result<()> {
    match reply {
        Reply::Done => Ok(()),
        other => Err(unexpected(call, &other)),
    }
}

/// Picks one kind of reply out of a [`Reply`], or fails with the unexpected one.
macro_rules! expect {
    ($call:expr, $reply:expr, $variant:path) => {
        match $reply {
            $variant(v) => Ok(v),
            other => Err(unexpected($call, &other)),
        }
    };
}

impl Backend for RemoteBackend {
    type ReadPoint = RemoteReadPoint;
    type Rows = BoxStream<'static, Result<RowResult>>;

    async fn put(self: &Arc<Self>, table: &TableName, put: Put) -> Result<()> {
        let row = put.row().clone();
        done(
            "put",
            self.row_call(table, &row, Request::Put(table.clone(), put))
                .await?,
        )
    }

    async fn delete(self: &Arc<Self>, table: &TableName, delete: Delete) -> Result<()> {
        let row = delete.row().clone();
        let reply = self.row_call(table, &row, Request::Delete(table.clone(), delete));
        done("delete", reply.await?)
    }

    async fn get(self: &Arc<Self>, table: &TableName, get: Get) -> Result<RowResult> {
        let row = get.row().clone();
        let reply = self
            .row_call(table, &row, Request::Get(table.clone(), get))
            .await?;
        expect!("get", reply, Reply::Row)
    }

    async fn exists(self: &Arc<Self>, table: &TableName, get: Get) -> Result<bool> {
        let row = get.row().clone();
        let reply = self
            .row_call(table, &row, Request::Exists(table.clone(), get))
            .await?;
        expect!("exists", reply, Reply::Flag)
    }

    async fn increment(self: &Arc<Self>, table: &TableName, inc: Increment) -> Result<RowResult> {
        let row = inc.row().clone();
        let reply = self.row_call(table, &row, Request::Increment(table.clone(), inc));
        expect!("increment", reply.await?, Reply::Row)
    }

    async fn append(self: &Arc<Self>, table: &TableName, append: Append) -> Result<RowResult> {
        let row = append.row().clone();
        let reply = self.row_call(table, &row, Request::Append(table.clone(), append));
        expect!("append", reply.await?, Reply::Row)
    }

    async fn check_and_mutate(
        self: &Arc<Self>,
        table: &TableName,
        check: CheckAndMutate,
    ) -> Result<bool> {
        let row = check.row().clone();
        let request = Request::CheckAndMutate(table.clone(), check);
        expect!(
            "check_and_mutate",
            self.row_call(table, &row, request).await?,
            Reply::Flag
        )
    }

    async fn mutate_row(
        self: &Arc<Self>,
        table: &TableName,
        mutations: RowMutations,
    ) -> Result<()> {
        let row = mutations.row().clone();
        let request = Request::MutateRow(table.clone(), mutations);
        done("mutate_row", self.row_call(table, &row, request).await?)
    }

    async fn batch(
        self: &Arc<Self>,
        table: &TableName,
        ops: Vec<BatchOp>,
    ) -> Result<Vec<Result<BatchOutcome>>> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let rpc = self.policy.rpc_timeout;
        let ops = &ops;
        let split_since = &std::sync::Mutex::new(None);
        let reply = with_retries(
            &self.router,
            Some(table),
            self.policy,
            false,
            || async move {
                let server = self.batch_server(table, ops, split_since).await?;
                let (reply, ack) = server
                    .call_acknowledged(Request::Batch(table.clone(), ops.clone()), rpc)
                    .await?;
                if let Reply::Batch(outcomes) = &reply {
                    // Every operation refused as "not served here": nothing was applied,
                    // the server lost the regions; located again and sent again.
                    let refused = outcomes.iter().map(|r| match r {
                        Err(e) => Some(Error::from(e.clone())),
                        Ok(_) => None,
                    });
                    let refused: Vec<Option<Error>> = refused.collect();
                    let not_here =
                        |e: &Option<Error>| matches!(e, Some(Error::RegionNotServed { .. }));
                    if refused.iter().all(not_here) {
                        if let Some(Some(e)) = refused.into_iter().next() {
                            return Err(e);
                        }
                    }
                    if let Some(ack) = ack {
                        for (op, r) in ops.iter().zip(outcomes) {
                            if r.is_ok() {
                                self.acknowledged(table, batch_row(op), &ack);
                            }
                        }
                    }
                }
                Ok(reply)
            },
        )
        .await?;
        let outcomes = expect!("batch", reply, Reply::Batch)?;
        Ok(outcomes
            .into_iter()
            .map(|r| r.map_err(Error::from))
            .collect())
    }

    fn scan(
        self: &Arc<Self>,
        table: &TableName,
        scan: Scan,
        at: Option<&Self::ReadPoint>,
    ) -> Result<Self::Rows> {
        let rows = scan::rows(
            Arc::clone(&self.router),
            self.policy,
            table.clone(),
            scan,
            at.cloned(),
        );
        Ok(Box::pin(rows))
    }

    fn pin_read_point(self: &Arc<Self>) -> Result<Self::ReadPoint> {
        let ordinal = self.read_points.fetch_add(1, Ordering::Relaxed) + 1;
        let at = RemoteReadPoint::new(ordinal);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let router = Arc::clone(&self.router);
            let pinned = at.clone();
            let rpc = self.policy.rpc_timeout;
            let task = runtime.spawn(async move {
                if let Ok(live) = router.live().await {
                    let servers = live.into_iter().map(|(_, c)| c).collect();
                    pinned.pin_on(servers, rpc).await;
                }
            });
            self.router.pinning(Box::pin(async move {
                let _ = task.await;
            }))?;
        }
        Ok(at)
    }

    async fn call_endpoint(
        self: &Arc<Self>,
        table: &TableName,
        service: &str,
        range: RowRange,
        request: Bytes,
        at: &RemoteReadPoint,
    ) -> Result<EndpointAnswers> {
        endpoint::call(
            &self.router,
            self.policy,
            table,
            service,
            range,
            request,
            at,
        )
        .await
    }

    async fn create_table(self: &Arc<Self>, desc: TableDescriptor, split: PreSplit) -> Result<()> {
        let name = desc.name.clone();
        let timeout = self.policy.operation_timeout;
        crate::procedures::create_table(&self.router.coord, desc, split, timeout).await?;
        self.changed(&name).await
    }

    async fn delete_table(self: &Arc<Self>, table: &TableName) -> Result<()> {
        let timeout = self.policy.operation_timeout;
        crate::procedures::delete_table(&self.router.coord, table, timeout).await?;
        // Its placement goes with it, as a dropped HBase table's attributes do (a failure
        // leaves it for a table of the same name, which the drop need not fail for).
        let spread = crate::placement::Placement::Spread;
        if let Err(e) = crate::holds::write_placement(&self.router.coord, table, spread).await {
            tracing::warn!(%table, error = %e, "the dropped table's placement was kept");
        }
        self.changed(table).await
    }

    async fn enable_table(self: &Arc<Self>, table: &TableName) -> Result<()> {
        done(
            "enable_table",
            self.any_call(Request::EnableTable(table.clone()), false)
                .await?,
        )?;
        self.changed(table).await
    }

    async fn disable_table(self: &Arc<Self>, table: &TableName) -> Result<()> {
        let request = Request::DisableTable(table.clone());
        done("disable_table", self.any_call(request, false).await?)?;
        self.changed(table).await
    }

    async fn is_table_enabled(self: &Arc<Self>, table: &TableName) -> Result<bool> {
        let request = Request::IsTableEnabled(table.clone());
        expect!(
            "is_table_enabled",
            self.any_call(request, true).await?,
            Reply::Flag
        )
    }

    async fn table_exists(self: &Arc<Self>, table: &TableName) -> Result<bool> {
        let request = Request::TableExists(table.clone());
        expect!(
            "table_exists",
            self.any_call(request, true).await?,
            Reply::Flag
        )
    }

    async fn list_tables(self: &Arc<Self>) -> Result<Vec<TableDescriptor>> {
        self.refresh_descriptors().await
    }

    fn describe_table(self: &Arc<Self>, table: &TableName) -> Result<TableDescriptor> {
        lock(&self.descriptors)?
            .get(table)
            .cloned()
            .ok_or_else(|| Error::TableNotFound(table.to_string()))
    }

    async fn add_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: ColumnFamilyDescriptor,
    ) -> Result<()> {
        let request = Request::AddColumnFamily(table.clone(), family);
        done("add_column_family", self.any_call(request, false).await?)?;
        self.changed(table).await
    }

    async fn modify_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: ColumnFamilyDescriptor,
    ) -> Result<()> {
        let request = Request::ModifyColumnFamily(table.clone(), family);
        done("modify_column_family", self.any_call(request, false).await?)?;
        self.changed(table).await
    }

    async fn delete_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: &[u8],
    ) -> Result<()> {
        let request = Request::DeleteColumnFamily(table.clone(), Bytes::copy_from_slice(family));
        done("delete_column_family", self.any_call(request, false).await?)?;
        self.changed(table).await
    }

    async fn add_coprocessor(
        self: &Arc<Self>,
        table: &TableName,
        coprocessor: CoprocessorDescriptor,
    ) -> Result<()> {
        let request = Request::AddCoprocessor(table.clone(), coprocessor);
        done("add_coprocessor", self.any_call(request, false).await?)?;
        self.changed(table).await
    }

    async fn remove_coprocessor(self: &Arc<Self>, table: &TableName, name: &str) -> Result<()> {
        let request = Request::RemoveCoprocessor(table.clone(), name.to_string());
        done("remove_coprocessor", self.any_call(request, false).await?)?;
        self.changed(table).await
    }

    async fn set_coprocessors(
        self: &Arc<Self>,
        table: &TableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> Result<()> {
        let request = Request::SetCoprocessors(table.clone(), coprocessors);
        done("set_coprocessors", self.any_call(request, false).await?)?;
        self.changed(table).await
    }

    async fn create_namespace(self: &Arc<Self>, namespace: &str) -> Result<()> {
        let request = Request::CreateNamespace(namespace.to_string());
        done("create_namespace", self.any_call(request, false).await?)
    }

    async fn delete_namespace(self: &Arc<Self>, namespace: &str) -> Result<()> {
        let request = Request::DeleteNamespace(namespace.to_string());
        done("delete_namespace", self.any_call(request, false).await?)
    }

    async fn list_namespaces(self: &Arc<Self>) -> Result<Vec<String>> {
        expect!(
            "list_namespaces",
            self.any_call(Request::ListNamespaces, true).await?,
            Reply::Names
        )
    }

    async fn regions(self: &Arc<Self>, table: &TableName) -> Result<Vec<RegionInfo>> {
        let request = Request::Regions(table.clone());
        expect!(
            "regions",
            self.any_call(request, true).await?,
            Reply::Regions
        )
    }

    async fn flush(self: &Arc<Self>, table: &TableName) -> Result<()> {
        done(
            "flush",
            self.table_call(table, Request::Flush(table.clone()))
                .await?,
        )
    }

    async fn compact(self: &Arc<Self>, table: &TableName, kind: CompactionKind) -> Result<()> {
        done(
            "compact",
            self.table_call(table, Request::Compact(table.clone(), kind))
                .await?,
        )
    }

    async fn compact_region(
        self: &Arc<Self>,
        table: &TableName,
        region_id: u64,
        kind: CompactionKind,
    ) -> Result<()> {
        let request = Request::CompactRegion(table.clone(), region_id, kind);
        done("compact_region", self.any_call(request, true).await?)
    }

    async fn split_region(
        self: &Arc<Self>,
        table: &TableName,
        region_id: u64,
        split_row: Option<&[u8]>,
    ) -> Result<Option<(u64, u64)>> {
        let daughters = procedures::split(
            &self.router.coord,
            table,
            region_id,
            split_row,
            self.policy.operation_timeout,
        )
        .await;
        self.router.forget(table);
        daughters
    }

    async fn merge_regions(
        self: &Arc<Self>,
        table: &TableName,
        region_a: u64,
        region_b: u64,
    ) -> Result<u64> {
        let merged = procedures::merge(
            &self.router.coord,
            table,
            [region_a, region_b],
            self.policy.operation_timeout,
        )
        .await;
        self.router.forget(table);
        merged
    }

    async fn check_table(self: &Arc<Self>, table: &TableName) -> Result<IntegrityReport> {
        let request = Request::CheckTable(table.clone());
        expect!(
            "check_table",
            self.any_call(request, true).await?,
            Reply::Integrity
        )
    }

    async fn offline_regions(self: &Arc<Self>) -> Result<Vec<OfflineRegion>> {
        expect!(
            "offline_regions",
            self.any_call(Request::OfflineRegions, true).await?,
            Reply::Offline
        )
    }

    async fn snapshot(
        self: &Arc<Self>,
        name: &str,
        tables: &[TableName],
        companions: bool,
    ) -> Result<SnapshotDescription> {
        let request = Request::Snapshot(name.to_string(), tables.to_vec(), companions);
        expect!(
            "snapshot",
            self.any_call(request, false).await?,
            Reply::Snapshot
        )
    }

    async fn list_snapshots(self: &Arc<Self>) -> Result<Vec<SnapshotDescription>> {
        expect!(
            "list_snapshots",
            self.any_call(Request::ListSnapshots, true).await?,
            Reply::Snapshots
        )
    }

    async fn describe_snapshot(self: &Arc<Self>, name: &str) -> Result<SnapshotDescription> {
        let request = Request::DescribeSnapshot(name.to_string());
        expect!(
            "describe_snapshot",
            self.any_call(request, true).await?,
            Reply::Snapshot
        )
    }

    async fn delete_snapshot(self: &Arc<Self>, name: &str) -> Result<()> {
        let request = Request::DeleteSnapshot(name.to_string());
        done("delete_snapshot", self.any_call(request, false).await?)
    }

    async fn clone_snapshot(
        self: &Arc<Self>,
        name: &str,
        targets: Vec<(TableName, TableDescriptor)>,
    ) -> Result<()> {
        let names: Vec<TableName> = targets.iter().map(|(_, d)| d.name.clone()).collect();
        let request = Request::CloneSnapshot(name.to_string(), targets);
        done("clone_snapshot", self.any_call(request, false).await?)?;
        for t in &names {
            self.changed(t).await?;
        }
        Ok(())
    }

    async fn restore_snapshot(self: &Arc<Self>, name: &str) -> Result<Option<String>> {
        // The snapshot's tables that exist are replaced: held, so gathered on one server.
        let snapshot = self.describe_snapshot(name).await?;
        let tables = snapshot
            .tables
            .iter()
            .map(|t| TableName::parse(t).map(crate::placement::HoldTarget::table))
            .collect::<Result<Vec<_>>>()?;
        let request = Request::RestoreSnapshot(name.to_string());
        let reply = schema::call(&self.router, self.policy, tables, request).await?;
        self.router.forget_all();
        self.refresh_descriptors().await?;
        expect!("restore_snapshot", reply, Reply::Restored)
    }

    async fn upload_plugin(self: &Arc<Self>, bytes: Vec<u8>) -> Result<PluginInfo> {
        let request = Request::UploadPlugin(Bytes::from(bytes));
        expect!(
            "upload_plugin",
            self.any_call(request, true).await?,
            Reply::Plugin
        )
    }

    async fn list_plugins(self: &Arc<Self>) -> Result<Vec<PluginInfo>> {
        expect!(
            "list_plugins",
            self.any_call(Request::ListPlugins, true).await?,
            Reply::Plugins
        )
    }

    async fn describe_plugin(self: &Arc<Self>, id: &str) -> Result<PluginInfo> {
        let request = Request::DescribePlugin(id.to_string());
        expect!(
            "describe_plugin",
            self.any_call(request, true).await?,
            Reply::Plugin
        )
    }

    async fn plugin_bytes(self: &Arc<Self>, id: &str) -> Result<Bytes> {
        let request = Request::PluginBytes(id.to_string());
        expect!(
            "plugin_bytes",
            self.any_call(request, true).await?,
            Reply::Bytes
        )
    }

    async fn delete_plugin(self: &Arc<Self>, id: &str) -> Result<()> {
        let request = Request::DeletePlugin(id.to_string());
        done("delete_plugin", self.any_call(request, false).await?)
    }

    async fn close(self: &Arc<Self>) -> Result<()> {
        self.router.forget_all();
        Ok(())
    }
}
