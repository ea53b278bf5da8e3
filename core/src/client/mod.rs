//! The client API: [`Connection`], [`Admin`] and [`Table`], all async.
//!
//! These are thin handles over the engine: a `Table` is a name resolved on every call, so a
//! table deleted by another handle answers `TableNotFound` rather than serving stale state.
//!
//! ```
//! use basalt_core::client::{Connection, Get, Put};
//! use basalt_core::{ColumnFamilyDescriptor, TableDescriptor, TableName};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> basalt_core::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("basalt-doc-{}", std::process::id()));
//! let conn = Connection::open(&dir).await?;
//! let admin = conn.admin();
//! admin
//!     .create_table(TableDescriptor::new(TableName::parse("users")?).family(ColumnFamilyDescriptor::new("f")))
//!     .await?;
//! let users = conn.table("users")?;
//! users.put(Put::new("u1").add_column("f", "name", "Ada")).await?;
//! let row = users.get(Get::new("u1")).await?;
//! assert_eq!(row.value("f", "name").map(|v| v.as_ref()), Some(&b"Ada"[..]));
//! conn.close().await?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```

pub mod report;
pub mod salted;
pub mod snapshot;

pub use crate::ops::*;
pub use crate::server::admin::PreSplit;
pub use crate::server::read::ResultStream;
pub use crate::server::Config;
pub use report::{RegionLoad, RegionReport};
pub use salted::{BucketRange, SaltedScanStats, SaltedScanStream, SaltedTable};
pub use snapshot::Snapshot;

use crate::error::{Error, Result};
use crate::region::RegionInfo;
use crate::schema::{
    ColumnFamilyDescriptor, CoprocessorDescriptor, IntoTableName, TableDescriptor, TableName,
};
use crate::server::check::IntegrityReport;
use crate::server::{Engine, TableState};
use crate::storage::compaction::CompactionKind;
use std::path::Path;
use std::sync::Arc;

/// An open engine. Cheap to clone; every clone shares the engine.
#[derive(Debug, Clone)]
pub struct Connection {
    engine: Arc<Engine>,
}

impl Connection {
    /// Opens (or creates) an engine in `dir` with default settings, recovering from a crash.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(Config::new(dir)).await
    }

    /// Opens an engine with explicit settings.
    pub async fn open_with(config: Config) -> Result<Self> {
        let engine = tokio::task::spawn_blocking(move || Engine::open(config))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(format!("open task failed: {e}"))))??;
        engine.upkeep.start_periodic_compactions();
        let conn = Connection { engine };
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
    /// ([`RecoveryRepair`](crate::server::recovery::RecoveryRepair)) on every enabled table the
    /// recovery report names, then clears the directory's record of them (a disabled table
    /// stays recorded for a later open).
    async fn run_recovery_repairs(&self) -> Result<()> {
        let tables = self.engine.recovery_report().tables_to_verify;
        if tables.is_empty() {
            return Ok(());
        }
        let repairs = self
            .engine
            .shared
            .config
            .coprocessor_loader
            .as_ref()
            .map(|l| l.recovery_repairs())
            .unwrap_or_default();
        let mut outcomes = Vec::new();
        let mut still_pending = Vec::new();
        for table in &tables {
            let enabled = self
                .engine
                .table(table)
                .is_ok_and(|t| t.enabled.load(std::sync::atomic::Ordering::Acquire));
            if !enabled {
                tracing::warn!(%table, "disabled: its derived data stays to verify");
                still_pending.push(table.clone());
                continue;
            }
            for repair in &repairs {
                outcomes.extend(repair.repair(&self.engine, table).await?);
            }
        }
        let report: Vec<String> = outcomes
            .iter()
            .map(|o| format!("{} of {}: {}", o.what, o.table, o.differences))
            .collect();
        tracing::warn!(repaired = ?report, "recovery repairs ran");
        self.engine.finish_recovery_repairs(outcomes, still_pending)
    }

    /// A connection on an engine that is already open (a recovery repair gets one), sharing
    /// it: closing either closes the engine.
    pub fn from_engine(engine: Arc<Engine>) -> Self {
        Connection { engine }
    }

    /// The administration handle.
    pub fn admin(&self) -> Admin {
        Admin {
            engine: self.engine.clone(),
        }
    }

    /// A handle on table `name` (a [`TableName`], or `ns:name` or `name`).
    pub fn table(&self, name: impl IntoTableName) -> Result<Table> {
        Ok(Table {
            engine: self.engine.clone(),
            name: name.into_table_name()?,
        })
    }

    /// A handle on salted table `name` that reads and writes by logical row key; fails
    /// when the table does not exist or is not salted.
    pub fn salted_table(&self, name: impl IntoTableName) -> Result<SaltedTable> {
        SaltedTable::open(self.table(name)?)
    }

    /// Pins the current engine-wide read point: scans given the [`Snapshot`]
    /// ([`Table::scan_at`], [`SaltedTable::scan_at`]) read the same committed state of every
    /// table, however long they run and whatever commits meanwhile.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(Arc::new(self.engine.reads.register_scan()))
    }

    /// What the open recovered from the WAL, and any damage it found and how it dealt with
    /// it (see [`crate::wal::WalRecoveryMode`]).
    pub fn recovery_report(&self) -> crate::server::recovery::RecoveryReport {
        self.engine.recovery_report()
    }

    /// The engine behind this connection.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Pins one read point over every region of table `name` for an endpoint call (what
    /// the endpoint client fans out over).
    pub fn endpoint_call(
        &self,
        name: impl IntoTableName,
    ) -> Result<crate::server::endpoint::EndpointCall> {
        self.engine.reads.endpoint_call(&name.into_table_name()?)
    }

    /// Flushes MemStores, syncs the WAL and closes the engine.
    pub async fn close(&self) -> Result<()> {
        self.engine.close().await
    }
}

/// Schema operations.
#[derive(Debug, Clone)]
pub struct Admin {
    engine: Arc<Engine>,
}

impl Admin {
    /// Creates a table with one region.
    pub async fn create_table(&self, desc: TableDescriptor) -> Result<()> {
        self.engine.create_table(desc, PreSplit::None).await
    }
    /// Creates a table pre-split into regions.
    pub async fn create_table_with_splits(
        &self,
        desc: TableDescriptor,
        split: PreSplit,
    ) -> Result<()> {
        self.engine.create_table(desc, split).await
    }
    /// Deletes a disabled table.
    pub async fn delete_table(&self, name: impl IntoTableName) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine.delete_table(name).await
    }
    /// Enables a table.
    pub async fn enable_table(&self, name: impl IntoTableName) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine.enable_table(name).await
    }
    /// Disables a table (flushing it first).
    pub async fn disable_table(&self, name: impl IntoTableName) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine.disable_table(name).await
    }
    /// True when the table is enabled.
    pub async fn is_table_enabled(&self, name: impl IntoTableName) -> Result<bool> {
        let name = &name.into_table_name()?;
        self.engine.is_enabled(name)
    }
    /// True when the table exists.
    pub async fn table_exists(&self, name: impl IntoTableName) -> Result<bool> {
        let name = &name.into_table_name()?;
        Ok(self.engine.table_exists(name))
    }
    /// Every table's descriptor.
    pub async fn list_tables(&self) -> Result<Vec<TableDescriptor>> {
        Ok(self.engine.list_tables())
    }
    /// A table's descriptor.
    pub async fn describe_table(&self, name: impl IntoTableName) -> Result<TableDescriptor> {
        let name = &name.into_table_name()?;
        self.engine.describe(name)
    }
    /// Adds a column family.
    pub async fn add_column_family(
        &self,
        name: impl IntoTableName,
        cf: ColumnFamilyDescriptor,
    ) -> Result<()> {
        let name = &name.into_table_name()?;
        let added = cf.clone();
        self.engine
            .observed_modify(
                name,
                |d| {
                    let mut d = d.clone();
                    d.families.push(added);
                    d
                },
                async { self.engine.add_family(name, cf) },
            )
            .await
    }
    /// Changes a column family's settings.
    pub async fn modify_column_family(
        &self,
        name: impl IntoTableName,
        cf: ColumnFamilyDescriptor,
    ) -> Result<()> {
        let name = &name.into_table_name()?;
        let changed = cf.clone();
        self.engine
            .observed_modify(
                name,
                |d| {
                    let mut d = d.clone();
                    for f in d.families.iter_mut().filter(|f| f.name == changed.name) {
                        *f = changed.clone();
                    }
                    d
                },
                async { self.engine.modify_family(name, cf) },
            )
            .await
    }
    /// Removes a column family and its data.
    pub async fn delete_column_family(
        &self,
        name: impl IntoTableName,
        family: impl AsRef<[u8]>,
    ) -> Result<()> {
        let name = &name.into_table_name()?;
        // Flush first, as HBase's region reopen does: the family's edits must be below every
        // region's flushed sequence id, or WAL replay after a crash would hand them to a
        // family later re-added under the same name.
        let family = family.as_ref();
        let proposed = |d: &TableDescriptor| {
            let mut d = d.clone();
            d.families.retain(|f| f.name.as_ref() != family);
            d
        };
        let change = async {
            self.engine.upkeep.flush_table(name).await?;
            self.engine.remove_family(name, family)
        };
        self.engine.observed_modify(name, proposed, change).await
    }
    /// Flushes every region of a table.
    pub async fn flush(&self, name: impl IntoTableName) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine.upkeep.flush_table(name).await
    }
    /// Runs a minor compaction of every store of every region of a table, as often as the
    /// table's compaction policy selects files, and returns when they finished. A minor
    /// compaction never changes what reads return.
    pub async fn compact(&self, name: impl IntoTableName) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine
            .upkeep
            .compact_table(name, CompactionKind::Minor)
            .await
    }
    /// Runs a major compaction of every store of a table (all its files become one, without
    /// delete markers unless the family keeps deleted cells, masked, expired and excess
    /// versions) and returns when it finished. It does not flush first, as in HBase: call
    /// [`flush`](Self::flush) before it to include the MemStores.
    pub async fn major_compact(&self, name: impl IntoTableName) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine
            .upkeep
            .compact_table(name, CompactionKind::Major)
            .await
    }
    /// [`compact`](Self::compact) for one region, by its id ([`RegionInfo::id`]).
    pub async fn compact_region(&self, name: impl IntoTableName, region_id: u64) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine
            .upkeep
            .compact_region(name, region_id, CompactionKind::Minor)
            .await
    }
    /// [`major_compact`](Self::major_compact) for one region, by its id ([`RegionInfo::id`]).
    pub async fn major_compact_region(
        &self,
        name: impl IntoTableName,
        region_id: u64,
    ) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine
            .upkeep
            .compact_region(name, region_id, CompactionKind::Major)
            .await
    }
    /// Splits one region of a table (by its id, [`RegionInfo::id`]) at `split_row`, a row
    /// strictly inside it, or at its computed split point (the first row of the middle block
    /// of its largest store file) when `None`. Returns the daughters' ids, lower first, or
    /// `None` when no split point exists. Reads and writes go on; no row moves or changes.
    pub async fn split_region(
        &self,
        name: impl IntoTableName,
        region_id: u64,
        split_row: Option<&[u8]>,
    ) -> Result<Option<(u64, u64)>> {
        let name = &name.into_table_name()?;
        self.engine
            .upkeep
            .split_region(name, region_id, split_row)
            .await
    }
    /// Merges two adjacent regions of a table into one (in either order); returns its id.
    pub async fn merge_regions(
        &self,
        name: impl IntoTableName,
        region_a: u64,
        region_b: u64,
    ) -> Result<u64> {
        let name = &name.into_table_name()?;
        self.engine
            .upkeep
            .merge_regions(name, region_a, region_b)
            .await
    }
    /// Adds a coprocessor to a table; it serves the next operation (no restart) and is
    /// persisted in the catalog, so reopening the engine reloads it.
    pub async fn add_coprocessor(
        &self,
        name: impl IntoTableName,
        cp: CoprocessorDescriptor,
    ) -> Result<()> {
        let name = &name.into_table_name()?;
        let added = cp.clone();
        self.engine
            .observed_modify(
                name,
                |d| {
                    let mut d = d.clone();
                    d.coprocessors.push(added);
                    d
                },
                async { self.engine.add_coprocessor(name, cp).await },
            )
            .await
    }
    /// Removes a table's coprocessor by name (no restart).
    pub async fn remove_coprocessor(&self, name: impl IntoTableName, cp_name: &str) -> Result<()> {
        let name = &name.into_table_name()?;
        self.engine
            .observed_modify(
                name,
                |d| {
                    let mut d = d.clone();
                    d.coprocessors.retain(|c| c.name != cp_name);
                    d
                },
                async { self.engine.remove_coprocessor(name, cp_name).await },
            )
            .await
    }
    /// Replaces a table's whole coprocessor list (no restart).
    pub async fn set_coprocessors(
        &self,
        name: impl IntoTableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> Result<()> {
        let name = &name.into_table_name()?;
        let list = coprocessors.clone();
        self.engine
            .observed_modify(
                name,
                |d| {
                    let mut d = d.clone();
                    d.coprocessors = list;
                    d
                },
                async { self.engine.set_coprocessors(name, coprocessors).await },
            )
            .await
    }
    /// Creates a namespace.
    pub async fn create_namespace(&self, ns: &str) -> Result<()> {
        self.engine.create_namespace(ns)
    }
    /// Deletes an empty namespace.
    pub async fn delete_namespace(&self, ns: &str) -> Result<()> {
        self.engine.delete_namespace(ns)
    }
    /// Every namespace.
    pub async fn list_namespaces(&self) -> Result<Vec<String>> {
        Ok(self.engine.list_namespaces())
    }
    /// Facts about every region of a table, in key order.
    pub async fn regions(&self, name: impl IntoTableName) -> Result<Vec<RegionInfo>> {
        let name = &name.into_table_name()?;
        self.engine.regions(name)
    }
    /// The region report of a table: name, start and end key, read and write requests and
    /// size of every region, printable as a table (`Display`).
    pub async fn region_report(&self, name: impl IntoTableName) -> Result<RegionReport> {
        let name = &name.into_table_name()?;
        Ok(RegionReport::from_regions(
            name.to_string(),
            &self.engine.regions(name)?,
        ))
    }
    /// Checks every store file of every region and family of a table - checksums, block
    /// framing, key order, index and file-info consistency, bloom filters - and reports what
    /// is wrong, file by file, including files the catalog lists that are missing on disk.
    /// Reads the files from disk, not through the block cache. Damage is reported in the
    /// [`IntegrityReport`]; this fails only if the table does not exist.
    pub async fn check_table(&self, name: impl IntoTableName) -> Result<IntegrityReport> {
        let name = &name.into_table_name()?;
        self.engine.shared.check_table(name).await
    }
    /// Every offline region of every table (a store file it lists is missing or cannot be
    /// opened), with the file and why; empty when all regions serve.
    pub async fn offline_regions(&self) -> Vec<crate::server::recovery::OfflineRegion> {
        self.engine.offline_regions()
    }
}

/// Data operations on one table.
#[derive(Debug, Clone)]
pub struct Table {
    engine: Arc<Engine>,
    name: TableName,
}

impl Table {
    fn state(&self) -> Result<Arc<TableState>> {
        self.engine.table(&self.name)
    }

    /// The table's name.
    pub fn name(&self) -> &TableName {
        &self.name
    }

    /// Writes one row.
    pub async fn put(&self, p: Put) -> Result<()> {
        self.engine.writes.put(&*self.state()?, p).await
    }

    /// Touches one row: under the row's lock, runs the table's batch hooks as for a write
    /// that changes nothing ([`Put::touch`]), so an index rewrites the row's entries from
    /// its current values (an online index build touches every row). Writes nothing itself;
    /// on a table without batch hooks it does nothing.
    pub async fn touch(&self, row: impl AsRef<[u8]>) -> Result<()> {
        self.engine
            .writes
            .put(&*self.state()?, Put::touch(row))
            .await
    }

    /// Reads one row (an empty result when nothing matches).
    pub async fn get(&self, g: Get) -> Result<RowResult> {
        self.engine.reads.get_hooked(&*self.state()?, g).await
    }

    /// True when the get would return at least one cell.
    pub async fn exists(&self, g: Get) -> Result<bool> {
        self.engine.reads.exists_hooked(&*self.state()?, g).await
    }

    /// Writes delete markers.
    pub async fn delete(&self, d: Delete) -> Result<()> {
        self.engine.writes.delete(&*self.state()?, d).await
    }

    /// Scans rows as a stream, at one snapshot of the whole table.
    pub fn scan(&self, s: Scan) -> Result<ResultStream> {
        self.engine.reads.scan(self.state()?, s)
    }

    /// Registers the current read point for scans that must read one snapshot together
    /// (a salted scan's buckets); it stays registered while any holder lives.
    pub(crate) fn pin_read_point(&self) -> Arc<crate::server::read::ScanPoint> {
        Arc::new(self.engine.reads.register_scan())
    }

    /// Pins the current engine-wide read point (as [`Connection::snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.pin_read_point())
    }

    /// [`scan`](Self::scan) at `snapshot`: the rows as they were when it was taken (see
    /// [`Snapshot`]).
    pub fn scan_at(&self, s: Scan, snapshot: &Snapshot) -> Result<ResultStream> {
        self.scan_pinned(s, snapshot.scan_point())
    }

    /// [`scan`](Self::scan) at a read point pinned by [`pin_read_point`](Self::pin_read_point).
    pub(crate) fn scan_pinned(
        &self,
        s: Scan,
        point: &Arc<crate::server::read::ScanPoint>,
    ) -> Result<ResultStream> {
        self.engine
            .reads
            .scan_at(self.state()?, s, Some(point.clone()))
    }

    /// Adds to counters atomically; returns the new values.
    pub async fn increment(&self, inc: Increment) -> Result<RowResult> {
        self.engine.writes.increment(&*self.state()?, inc).await
    }

    /// Appends to cells atomically; returns the new values.
    pub async fn append(&self, a: Append) -> Result<RowResult> {
        self.engine.writes.append(&*self.state()?, a).await
    }

    /// Applies a mutation if a condition holds; returns whether it held.
    pub async fn check_and_mutate(&self, c: CheckAndMutate) -> Result<bool> {
        self.engine
            .writes
            .check_and_mutate(&*self.state()?, c)
            .await
    }

    /// Applies a row's puts and deletes atomically.
    pub async fn mutate_row(&self, rm: RowMutations) -> Result<()> {
        self.engine.writes.mutate_row(&*self.state()?, rm).await
    }

    /// Runs many operations, one result per operation.
    pub async fn batch(&self, ops: Vec<BatchOp>) -> Result<Vec<Result<BatchOutcome>>> {
        self.engine.writes.batch(&*self.state()?, ops).await
    }

    /// Facts about every region, in key order.
    pub async fn regions(&self) -> Result<Vec<RegionInfo>> {
        self.engine.regions(&self.name)
    }

    /// The region report (reads, writes and size per region).
    pub async fn region_report(&self) -> Result<RegionReport> {
        Ok(RegionReport::from_regions(
            self.name.to_string(),
            &self.engine.regions(&self.name)?,
        ))
    }
}
