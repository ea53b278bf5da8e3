//! The embedded engine as a [`Backend`], and what only a connection on an embedded engine
//! has: opening a data directory (with its recovery repairs), the recovery report, the
//! engine handle, and endpoint calls that run code in a region.
//!
//! This is the one file of the client that names engine internals (`TableState`,
//! `ScanPoint`, the engine's `pub(crate)` methods): everything else of the client reaches
//! the engine through [`Backend`]. Each trait method resolves its table by name, then
//! calls the engine (by path, `Engine::method(self, ..)`, so the inherent method is meant
//! even where it shares the trait method's name).

use super::backend::{Backend, ReadPointHandle};
use super::Connection;
use crate::catalog::SnapshotDescription;
use crate::endpoint::EndpointAnswers;
use crate::error::{Error, Result};
use crate::keys::RowRange;
use crate::ops::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Increment, Put, RowMutations,
    RowResult, Scan,
};
use crate::region::RegionInfo;
use crate::schema::{
    ColumnFamilyDescriptor, CoprocessorDescriptor, IntoTableName, TableDescriptor, TableName,
};
use crate::server::admin::PreSplit;
use crate::server::config::Config;
use crate::server::config::PluginSource;
use crate::server::endpoint::{self, EndpointCall};
use crate::server::hooks;
use crate::server::open::check::IntegrityReport;
use crate::server::open::recovery::{OfflineRegion, RecoveryReport};
use crate::server::plugins::{self, PluginInfo};
use crate::server::read::{ResultStream, ScanPoint};
use crate::server::snapshots;
use crate::server::Engine;
use crate::storage::compaction::CompactionKind;
use bytes::Bytes;
use std::path::Path;
use std::sync::Arc;

/// A read point pinned in an embedded [`Engine`] (its [`Backend::ReadPoint`]): registered
/// with the engine while any clone lives, so compactions keep what reads at it need.
#[derive(Clone)]
pub struct EngineReadPoint {
    scan: Arc<ScanPoint>,
}

impl ReadPointHandle for EngineReadPoint {
    fn read_point(&self) -> u64 {
        self.scan.point()
    }
}

impl std::fmt::Debug for EngineReadPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineReadPoint")
            .field("read_point", &self.scan.point())
            .finish()
    }
}

impl Backend for Engine {
    type ReadPoint = EngineReadPoint;
    type Rows = ResultStream;

    async fn put(self: &Arc<Self>, table: &TableName, put: Put) -> Result<()> {
        self.writes.put(&*self.table(table)?, put).await
    }

    async fn delete(self: &Arc<Self>, table: &TableName, delete: Delete) -> Result<()> {
        self.writes.delete(&*self.table(table)?, delete).await
    }

    async fn get(self: &Arc<Self>, table: &TableName, get: Get) -> Result<RowResult> {
        hooks::rows::get(&self.reads, &*self.table(table)?, get).await
    }

    async fn exists(self: &Arc<Self>, table: &TableName, get: Get) -> Result<bool> {
        hooks::rows::exists(&self.reads, &*self.table(table)?, get).await
    }

    async fn increment(
        self: &Arc<Self>,
        table: &TableName,
        increment: Increment,
    ) -> Result<RowResult> {
        self.writes.increment(&*self.table(table)?, increment).await
    }

    async fn append(self: &Arc<Self>, table: &TableName, append: Append) -> Result<RowResult> {
        self.writes.append(&*self.table(table)?, append).await
    }

    async fn check_and_mutate(
        self: &Arc<Self>,
        table: &TableName,
        check: CheckAndMutate,
    ) -> Result<bool> {
        self.writes
            .check_and_mutate(&*self.table(table)?, check)
            .await
    }

    async fn mutate_row(
        self: &Arc<Self>,
        table: &TableName,
        mutations: RowMutations,
    ) -> Result<()> {
        self.writes
            .mutate_row(&*self.table(table)?, mutations)
            .await
    }

    async fn batch(
        self: &Arc<Self>,
        table: &TableName,
        ops: Vec<BatchOp>,
    ) -> Result<Vec<Result<BatchOutcome>>> {
        self.writes.batch(&*self.table(table)?, ops).await
    }

    fn scan(
        self: &Arc<Self>,
        table: &TableName,
        scan: Scan,
        at: Option<&EngineReadPoint>,
    ) -> Result<ResultStream> {
        let t = self.table(table)?;
        hooks::scan::scan(&self.reads, t, scan, at.map(|p| p.scan.clone()))
    }

    fn pin_read_point(self: &Arc<Self>) -> Result<EngineReadPoint> {
        self.shared.check_open()?;
        Ok(EngineReadPoint {
            scan: Arc::new(self.reads.register_scan()),
        })
    }

    async fn call_endpoint(
        self: &Arc<Self>,
        table: &TableName,
        service: &str,
        range: RowRange,
        request: Bytes,
        at: &EngineReadPoint,
    ) -> Result<EndpointAnswers> {
        let host = self
            .endpoint_host()
            .ok_or_else(|| endpoint::no_host(service))?;
        let call = self.reads.endpoint_call_at(table, at.scan.clone())?;
        let service = service.to_string();
        tokio::task::spawn_blocking(move || {
            endpoint::serve(&call, &*host, &service, &range, &request)
        })
        .await
        .map_err(|e| Error::Io(std::io::Error::other(format!("endpoint task failed: {e}"))))?
    }

    async fn create_table(self: &Arc<Self>, desc: TableDescriptor, split: PreSplit) -> Result<()> {
        Engine::create_table(self, desc, split).await
    }

    async fn delete_table(self: &Arc<Self>, table: &TableName) -> Result<()> {
        Engine::delete_table(self, table).await
    }

    async fn enable_table(self: &Arc<Self>, table: &TableName) -> Result<()> {
        Engine::enable_table(self, table).await
    }

    async fn disable_table(self: &Arc<Self>, table: &TableName) -> Result<()> {
        Engine::disable_table(self, table).await
    }

    async fn is_table_enabled(self: &Arc<Self>, table: &TableName) -> Result<bool> {
        self.is_enabled(table)
    }

    async fn table_exists(self: &Arc<Self>, table: &TableName) -> Result<bool> {
        Ok(Engine::table_exists(self, table))
    }

    async fn list_tables(self: &Arc<Self>) -> Result<Vec<TableDescriptor>> {
        Ok(Engine::list_tables(self))
    }

    fn describe_table(self: &Arc<Self>, table: &TableName) -> Result<TableDescriptor> {
        self.describe(table)
    }

    async fn add_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: ColumnFamilyDescriptor,
    ) -> Result<()> {
        let added = family.clone();
        let proposed = |d: &TableDescriptor| {
            let mut d = d.clone();
            d.families.push(added);
            d
        };
        let change = async { self.add_family(table, family) };
        self.observed_modify(table, proposed, change).await
    }

    async fn modify_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: ColumnFamilyDescriptor,
    ) -> Result<()> {
        let changed = family.clone();
        let proposed = |d: &TableDescriptor| {
            let mut d = d.clone();
            for f in d.families.iter_mut().filter(|f| f.name == changed.name) {
                *f = changed.clone();
            }
            d
        };
        let change = async { self.modify_family(table, family) };
        self.observed_modify(table, proposed, change).await
    }

    async fn delete_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: &[u8],
    ) -> Result<()> {
        let proposed = |d: &TableDescriptor| {
            let mut d = d.clone();
            d.families.retain(|f| f.name.as_ref() != family);
            d
        };
        // Flush first, as HBase's region reopen does: the family's edits must be below every
        // region's flushed sequence id, or WAL replay after a crash would hand them to a
        // family later re-added under the same name.
        let change = async {
            self.upkeep.flush_table(table).await?;
            self.remove_family(table, family)
        };
        self.observed_modify(table, proposed, change).await
    }

    async fn add_coprocessor(
        self: &Arc<Self>,
        table: &TableName,
        coprocessor: CoprocessorDescriptor,
    ) -> Result<()> {
        let added = coprocessor.clone();
        let proposed = |d: &TableDescriptor| {
            let mut d = d.clone();
            d.coprocessors.push(added);
            d
        };
        let change = Engine::add_coprocessor(self, table, coprocessor);
        self.observed_modify(table, proposed, change).await
    }

    async fn remove_coprocessor(self: &Arc<Self>, table: &TableName, name: &str) -> Result<()> {
        let proposed = |d: &TableDescriptor| {
            let mut d = d.clone();
            d.coprocessors.retain(|c| c.name != name);
            d
        };
        let change = Engine::remove_coprocessor(self, table, name);
        self.observed_modify(table, proposed, change).await
    }

    async fn set_coprocessors(
        self: &Arc<Self>,
        table: &TableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> Result<()> {
        let list = coprocessors.clone();
        let proposed = |d: &TableDescriptor| {
            let mut d = d.clone();
            d.coprocessors = list;
            d
        };
        let change = Engine::set_coprocessors(self, table, coprocessors);
        self.observed_modify(table, proposed, change).await
    }

    async fn create_namespace(self: &Arc<Self>, namespace: &str) -> Result<()> {
        Engine::create_namespace(self, namespace)
    }

    async fn delete_namespace(self: &Arc<Self>, namespace: &str) -> Result<()> {
        Engine::delete_namespace(self, namespace)
    }

    async fn list_namespaces(self: &Arc<Self>) -> Result<Vec<String>> {
        Ok(Engine::list_namespaces(self))
    }

    async fn regions(self: &Arc<Self>, table: &TableName) -> Result<Vec<RegionInfo>> {
        Engine::regions(self, table)
    }

    async fn flush(self: &Arc<Self>, table: &TableName) -> Result<()> {
        self.upkeep.flush_table(table).await
    }

    async fn compact(self: &Arc<Self>, table: &TableName, kind: CompactionKind) -> Result<()> {
        self.upkeep.compact_table(table, kind).await
    }

    async fn compact_region(
        self: &Arc<Self>,
        table: &TableName,
        region_id: u64,
        kind: CompactionKind,
    ) -> Result<()> {
        self.upkeep.compact_region(table, region_id, kind).await
    }

    async fn split_region(
        self: &Arc<Self>,
        table: &TableName,
        region_id: u64,
        split_row: Option<&[u8]>,
    ) -> Result<Option<(u64, u64)>> {
        self.upkeep.split_region(table, region_id, split_row).await
    }

    async fn merge_regions(
        self: &Arc<Self>,
        table: &TableName,
        region_a: u64,
        region_b: u64,
    ) -> Result<u64> {
        self.upkeep.merge_regions(table, region_a, region_b).await
    }

    async fn check_table(self: &Arc<Self>, table: &TableName) -> Result<IntegrityReport> {
        self.shared.check_table(table).await
    }

    async fn offline_regions(self: &Arc<Self>) -> Result<Vec<OfflineRegion>> {
        Ok(Engine::offline_regions(self))
    }

    async fn snapshot(
        self: &Arc<Self>,
        name: &str,
        tables: &[TableName],
        companions: bool,
    ) -> Result<SnapshotDescription> {
        snapshots::take_snapshot(self, name, tables, companions).await
    }

    async fn list_snapshots(self: &Arc<Self>) -> Result<Vec<SnapshotDescription>> {
        Ok(snapshots::list_snapshots(self))
    }

    async fn describe_snapshot(self: &Arc<Self>, name: &str) -> Result<SnapshotDescription> {
        snapshots::describe_snapshot(self, name)
    }

    async fn delete_snapshot(self: &Arc<Self>, name: &str) -> Result<()> {
        snapshots::delete_snapshot(self, name).await
    }

    async fn clone_snapshot(
        self: &Arc<Self>,
        name: &str,
        targets: Vec<(TableName, TableDescriptor)>,
    ) -> Result<()> {
        snapshots::clone_snapshot(self, name, targets).await
    }

    async fn restore_snapshot(self: &Arc<Self>, name: &str) -> Result<Option<String>> {
        snapshots::restore_snapshot(self, name).await
    }

    async fn upload_plugin(self: &Arc<Self>, bytes: Vec<u8>) -> Result<PluginInfo> {
        let engine = self.clone();
        // Validation compiles the component: off the async workers.
        tokio::task::spawn_blocking(move || plugins::upload_plugin(&engine.shared, &bytes))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(format!("plugin upload task: {e}"))))?
    }

    async fn list_plugins(self: &Arc<Self>) -> Result<Vec<PluginInfo>> {
        self.shared.check_open()?;
        Ok(plugins::list_plugins(&self.shared))
    }

    async fn describe_plugin(self: &Arc<Self>, id: &str) -> Result<PluginInfo> {
        plugins::describe_plugin(&self.shared, id)
    }

    async fn plugin_bytes(self: &Arc<Self>, id: &str) -> Result<Bytes> {
        plugins::describe_plugin(&self.shared, id)?;
        plugins::ObjectPlugins {
            objects: self.shared.objects.clone(),
        }
        .plugin_bytes(id)
    }

    async fn delete_plugin(self: &Arc<Self>, id: &str) -> Result<()> {
        plugins::delete_plugin(&self.shared, id)
    }

    async fn close(self: &Arc<Self>) -> Result<()> {
        Engine::close(self).await
    }
}

/// What only a connection on an embedded engine does.
impl super::Admin<Engine> {
    /// Backs `source` up to `target`: [`Connection::backup`], from an admin handle (HBase
    /// users look for backups among the admin's operations).
    pub async fn backup(
        &self,
        target: Arc<dyn crate::objects::Objects>,
        source: crate::server::backup::BackupSource,
        options: crate::backup::BackupOptions,
    ) -> Result<crate::backup::BackupSummary> {
        crate::server::backup::backup(&self.backend, target, source, options).await
    }
}

impl Connection<Engine> {
    /// Opens (or creates) an engine in `dir` with default settings, recovering from a crash.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(Config::new(dir)).await
    }

    /// Opens an engine with explicit settings.
    pub async fn open_with(config: Config) -> Result<Self> {
        crate::server::ownership::check_unowned(&config).await?;
        let engine = tokio::task::spawn_blocking(move || Engine::open(config))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(format!("open task failed: {e}"))))??;
        if let Err(e) = engine.take_ownership().await {
            if let Err(close) = engine.close().await {
                tracing::warn!(error = %close, "closing after the regions could not be owned");
            }
            return Err(e);
        }
        if let Err(e) = crate::server::open::takeover::flush_replayed(&engine).await {
            if let Err(close) = engine.close().await {
                tracing::warn!(error = %close, "closing after the replayed edits could not be flushed");
            }
            return Err(e);
        }
        engine.upkeep.start_periodic_compactions();
        let conn = Connection::new(engine);
        if let Err(e) = conn.run_recovery_repairs().await {
            // The directory still records the tables: the next open tries again.
            if let Err(close) = conn.close().await {
                tracing::warn!(error = %close, "closing after failed recovery repairs");
            }
            return Err(e);
        }
        Ok(conn)
    }

    /// Runs the loader's recovery repairs
    /// ([`RecoveryRepair`](crate::server::open::recovery::RecoveryRepair)) on every enabled table the
    /// recovery report names, then clears the directory's record of them (a disabled table
    /// stays recorded for a later open).
    async fn run_recovery_repairs(&self) -> Result<()> {
        let engine = &self.backend;
        let tables = engine.recovery_report().tables_to_verify;
        if tables.is_empty() {
            return Ok(());
        }
        let repairs = engine
            .shared
            .config
            .coprocessor_loader
            .as_ref()
            .map(|l| l.recovery_repairs())
            .unwrap_or_default();
        let mut outcomes = Vec::new();
        let mut still_pending = Vec::new();
        for table in &tables {
            let enabled = engine
                .table(table)
                .is_ok_and(|t| t.enabled.load(std::sync::atomic::Ordering::Acquire));
            if !enabled {
                tracing::warn!(%table, "disabled: its derived data stays to verify");
                still_pending.push(table.clone());
                continue;
            }
            for repair in &repairs {
                outcomes.extend(repair.repair(engine, table).await?);
            }
        }
        let report: Vec<String> = outcomes
            .iter()
            .map(|o| format!("{} of {}: {}", o.what, o.table, o.differences))
            .collect();
        tracing::warn!(repaired = ?report, "recovery repairs ran");
        engine.finish_recovery_repairs(outcomes, still_pending)
    }

    /// A connection on an engine that is already open (a recovery repair gets one), sharing
    /// it: closing either closes the engine.
    pub fn from_engine(engine: Arc<Engine>) -> Self {
        Connection::new(engine)
    }

    /// What the open recovered from the WAL, and any damage it found and how it dealt with
    /// it (see [`crate::wal::WalRecoveryMode`]).
    pub fn recovery_report(&self) -> RecoveryReport {
        self.backend.recovery_report()
    }

    /// The engine behind this connection.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.backend
    }

    /// Backs `source` (every table, at one read point taken now, or a table snapshot) up
    /// to `target`, a directory ([`crate::objects::local`]) or any object store: only the
    /// store files `target` lacks are copied, each checked against its checksum, and the
    /// backup's manifest is stored last (see `docs/backup.md`). Runs while the engine
    /// serves; [`crate::restore_backup`] rebuilds a data directory from it.
    pub async fn backup(
        &self,
        target: Arc<dyn crate::objects::Objects>,
        source: crate::server::backup::BackupSource,
        options: crate::backup::BackupOptions,
    ) -> Result<crate::backup::BackupSummary> {
        crate::server::backup::backup(&self.backend, target, source, options).await
    }

    /// Pins one read point over every region of table `name` for an endpoint call (what
    /// the endpoint client fans out over). In-process only: the call runs code in each
    /// region (see [`Backend`]'s doc, "Endpoint fan-out").
    pub fn endpoint_call(&self, name: impl IntoTableName) -> Result<EndpointCall> {
        self.backend.reads.endpoint_call(&name.into_table_name()?)
    }
}
