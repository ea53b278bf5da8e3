//! The client API: [`Connection`], [`Admin`] and [`Table`], all async.
//!
//! These are thin handles over a [`Backend`]: the embedded [`Engine`] by default
//! (`Connection` is `Connection<Engine>`), or any other implementation of the trait (a
//! remote server later); every handle reaches it only through the trait. A `Table` is a
//! name resolved on every call, so a table deleted by another handle answers
//! `TableNotFound` rather than serving stale state.
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

pub mod backend;
mod embedded;
pub mod report;
pub mod salted;
pub mod snapshot;

pub use crate::ops::*;
pub use crate::server::admin::PreSplit;
pub use crate::server::config::Config;
pub use crate::server::read::ResultStream;
pub use backend::{Backend, ReadPointHandle};
pub use embedded::EngineReadPoint;
pub use report::{RegionLoad, RegionReport};
pub use salted::{BucketRange, SaltedScanStats, SaltedScanStream, SaltedTable};
pub use snapshot::Snapshot;

use crate::catalog::SnapshotDescription;
use crate::error::{Error, Result};
use crate::region::RegionInfo;
use crate::schema::{
    ColumnFamilyDescriptor, CoprocessorDescriptor, IntoTableName, TableDescriptor, TableName,
};
use crate::server::open::check::IntegrityReport;
use crate::server::open::recovery::OfflineRegion;
use crate::server::plugins::PluginInfo;
use crate::server::Engine;
use crate::storage::compaction::CompactionKind;
use std::sync::Arc;

/// A connection to a [`Backend`]: the embedded [`Engine`] by default (opened by
/// [`Connection::open`]). Cheap to clone; every clone, and every handle made from it,
/// shares the backend.
#[derive(Debug)]
pub struct Connection<B: Backend = Engine> {
    backend: Arc<B>,
}

impl<B: Backend> Clone for Connection<B> {
    fn clone(&self) -> Self {
        Connection {
            backend: self.backend.clone(),
        }
    }
}

impl<B: Backend> Connection<B> {
    /// A connection to `backend` (for the embedded engine, [`Connection::open`] opens one
    /// and [`Connection::from_engine`] shares an open one).
    pub fn new(backend: Arc<B>) -> Self {
        Connection { backend }
    }

    /// The backend behind this connection.
    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// The administration handle.
    pub fn admin(&self) -> Admin<B> {
        Admin {
            backend: self.backend.clone(),
        }
    }

    /// A handle on table `name` (a [`TableName`], or `ns:name` or `name`).
    pub fn table(&self, name: impl IntoTableName) -> Result<Table<B>> {
        Ok(Table {
            backend: self.backend.clone(),
            name: name.into_table_name()?,
        })
    }

    /// A handle on salted table `name` that reads and writes by logical row key; fails
    /// when the table does not exist or is not salted.
    pub fn salted_table(&self, name: impl IntoTableName) -> Result<SaltedTable<B>> {
        SaltedTable::open(self.table(name)?)
    }

    /// Pins the current read point of every table: scans given the [`Snapshot`]
    /// ([`Table::scan_at`], [`SaltedTable::scan_at`]) read the same committed state of every
    /// table, however long they run and whatever commits meanwhile. Fails when the backend
    /// is closed (or, for a remote backend, unreachable).
    pub fn snapshot(&self) -> Result<Snapshot<B>> {
        Ok(Snapshot::new(self.backend.pin_read_point()?))
    }

    /// Closes the backend: the embedded engine flushes MemStores, syncs the WAL and closes.
    pub async fn close(&self) -> Result<()> {
        self.backend.close().await
    }
}

/// Schema operations.
#[derive(Debug)]
pub struct Admin<B: Backend = Engine> {
    backend: Arc<B>,
}

impl<B: Backend> Clone for Admin<B> {
    fn clone(&self) -> Self {
        Admin {
            backend: self.backend.clone(),
        }
    }
}

impl<B: Backend> Admin<B> {
    /// Creates a table with one region.
    pub async fn create_table(&self, desc: TableDescriptor) -> Result<()> {
        self.backend.create_table(desc, PreSplit::None).await
    }
    /// Creates a table pre-split into regions.
    pub async fn create_table_with_splits(
        &self,
        desc: TableDescriptor,
        split: PreSplit,
    ) -> Result<()> {
        self.backend.create_table(desc, split).await
    }
    /// Deletes a disabled table.
    pub async fn delete_table(&self, name: impl IntoTableName) -> Result<()> {
        self.backend.delete_table(&name.into_table_name()?).await
    }
    /// Enables a table.
    pub async fn enable_table(&self, name: impl IntoTableName) -> Result<()> {
        self.backend.enable_table(&name.into_table_name()?).await
    }
    /// Disables a table (flushing it first).
    pub async fn disable_table(&self, name: impl IntoTableName) -> Result<()> {
        self.backend.disable_table(&name.into_table_name()?).await
    }
    /// True when the table is enabled.
    pub async fn is_table_enabled(&self, name: impl IntoTableName) -> Result<bool> {
        self.backend
            .is_table_enabled(&name.into_table_name()?)
            .await
    }
    /// True when the table exists.
    pub async fn table_exists(&self, name: impl IntoTableName) -> Result<bool> {
        self.backend.table_exists(&name.into_table_name()?).await
    }
    /// Every table's descriptor.
    pub async fn list_tables(&self) -> Result<Vec<TableDescriptor>> {
        self.backend.list_tables().await
    }
    /// A table's descriptor.
    pub async fn describe_table(&self, name: impl IntoTableName) -> Result<TableDescriptor> {
        self.backend.describe_table(&name.into_table_name()?)
    }
    /// Adds a column family.
    pub async fn add_column_family(
        &self,
        name: impl IntoTableName,
        cf: ColumnFamilyDescriptor,
    ) -> Result<()> {
        self.backend
            .add_column_family(&name.into_table_name()?, cf)
            .await
    }
    /// Changes a column family's settings.
    pub async fn modify_column_family(
        &self,
        name: impl IntoTableName,
        cf: ColumnFamilyDescriptor,
    ) -> Result<()> {
        self.backend
            .modify_column_family(&name.into_table_name()?, cf)
            .await
    }
    /// Removes a column family and its data.
    pub async fn delete_column_family(
        &self,
        name: impl IntoTableName,
        family: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.backend
            .delete_column_family(&name.into_table_name()?, family.as_ref())
            .await
    }
    /// Flushes every region of a table.
    pub async fn flush(&self, name: impl IntoTableName) -> Result<()> {
        self.backend.flush(&name.into_table_name()?).await
    }
    /// Runs a minor compaction of every store of every region of a table, as often as the
    /// table's compaction policy selects files, and returns when they finished. A minor
    /// compaction never changes what reads return, raw scans aside (they show masked puts
    /// until a flush or compaction drops them, as in HBase).
    pub async fn compact(&self, name: impl IntoTableName) -> Result<()> {
        self.backend
            .compact(&name.into_table_name()?, CompactionKind::Minor)
            .await
    }
    /// Runs a major compaction of every store of a table (all its files become one, without
    /// delete markers unless the family keeps deleted cells, masked, expired and excess
    /// versions) and returns when it finished. It does not flush first, as in HBase: call
    /// [`flush`](Self::flush) before it to include the MemStores.
    pub async fn major_compact(&self, name: impl IntoTableName) -> Result<()> {
        self.backend
            .compact(&name.into_table_name()?, CompactionKind::Major)
            .await
    }
    /// [`compact`](Self::compact) for one region, by its id ([`RegionInfo::id`]).
    pub async fn compact_region(&self, name: impl IntoTableName, region_id: u64) -> Result<()> {
        self.backend
            .compact_region(&name.into_table_name()?, region_id, CompactionKind::Minor)
            .await
    }
    /// [`major_compact`](Self::major_compact) for one region, by its id ([`RegionInfo::id`]).
    pub async fn major_compact_region(
        &self,
        name: impl IntoTableName,
        region_id: u64,
    ) -> Result<()> {
        self.backend
            .compact_region(&name.into_table_name()?, region_id, CompactionKind::Major)
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
        self.backend
            .split_region(&name.into_table_name()?, region_id, split_row)
            .await
    }
    /// Merges two adjacent regions of a table into one (in either order); returns its id.
    pub async fn merge_regions(
        &self,
        name: impl IntoTableName,
        region_a: u64,
        region_b: u64,
    ) -> Result<u64> {
        self.backend
            .merge_regions(&name.into_table_name()?, region_a, region_b)
            .await
    }
    /// Adds a coprocessor to a table; it serves the next operation (no restart) and is
    /// persisted in the catalog, so reopening the engine reloads it.
    pub async fn add_coprocessor(
        &self,
        name: impl IntoTableName,
        cp: CoprocessorDescriptor,
    ) -> Result<()> {
        self.backend
            .add_coprocessor(&name.into_table_name()?, cp)
            .await
    }
    /// Removes a table's coprocessor by name (no restart).
    pub async fn remove_coprocessor(&self, name: impl IntoTableName, cp_name: &str) -> Result<()> {
        self.backend
            .remove_coprocessor(&name.into_table_name()?, cp_name)
            .await
    }
    /// Replaces a table's whole coprocessor list (no restart).
    pub async fn set_coprocessors(
        &self,
        name: impl IntoTableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> Result<()> {
        self.backend
            .set_coprocessors(&name.into_table_name()?, coprocessors)
            .await
    }
    /// Creates a namespace.
    pub async fn create_namespace(&self, ns: &str) -> Result<()> {
        self.backend.create_namespace(ns).await
    }
    /// Deletes an empty namespace.
    pub async fn delete_namespace(&self, ns: &str) -> Result<()> {
        self.backend.delete_namespace(ns).await
    }
    /// Every namespace.
    pub async fn list_namespaces(&self) -> Result<Vec<String>> {
        self.backend.list_namespaces().await
    }
    /// Facts about every region of a table, in key order.
    pub async fn regions(&self, name: impl IntoTableName) -> Result<Vec<RegionInfo>> {
        self.backend.regions(&name.into_table_name()?).await
    }
    /// The region report of a table: name, start and end key, read and write requests and
    /// size of every region, printable as a table (`Display`).
    pub async fn region_report(&self, name: impl IntoTableName) -> Result<RegionReport> {
        let name = name.into_table_name()?;
        let regions = self.backend.regions(&name).await?;
        Ok(RegionReport::from_regions(name.to_string(), &regions))
    }
    /// Checks every store file of every region and family of a table - checksums, block
    /// framing, key order, index and file-info consistency, bloom filters - and reports what
    /// is wrong, file by file, including files the catalog lists that are missing on disk.
    /// Reads the files from disk, not through the block cache. Damage is reported in the
    /// [`IntegrityReport`]; this fails only if the table does not exist.
    pub async fn check_table(&self, name: impl IntoTableName) -> Result<IntegrityReport> {
        self.backend.check_table(&name.into_table_name()?).await
    }
    /// Every offline region of every table (a store file it lists is missing or cannot be
    /// opened), with the file and why; empty when all regions serve.
    pub async fn offline_regions(&self) -> Result<Vec<OfflineRegion>> {
        self.backend.offline_regions().await
    }
    /// Takes table snapshot `name` of `table` and its companion tables (the index tables
    /// its coprocessors maintain in the same batches), online, at one read point, copying
    /// no data: the flush of what the MemStores hold is its only cost (HBase's
    /// `snapshot 'table', 'name'`).
    pub async fn snapshot(
        &self,
        name: &str,
        table: impl IntoTableName,
    ) -> Result<SnapshotDescription> {
        let tables = [table.into_table_name()?];
        self.backend.snapshot(name, &tables, true).await
    }
    /// Takes table snapshot `name` of several tables at one read point; with `companions`
    /// their companion (index) tables are included too.
    pub async fn snapshot_tables<T: IntoTableName>(
        &self,
        name: &str,
        tables: impl IntoIterator<Item = T>,
        companions: bool,
    ) -> Result<SnapshotDescription> {
        let tables = tables
            .into_iter()
            .map(IntoTableName::into_table_name)
            .collect::<Result<Vec<_>>>()?;
        self.backend.snapshot(name, &tables, companions).await
    }
    /// Every table snapshot, in name order.
    pub async fn list_snapshots(&self) -> Result<Vec<SnapshotDescription>> {
        self.backend.list_snapshots().await
    }
    /// A table snapshot's tables, read point, files and the space it alone holds.
    pub async fn describe_snapshot(&self, name: &str) -> Result<SnapshotDescription> {
        self.backend.describe_snapshot(name).await
    }
    /// Deletes a table snapshot; files no table and no other snapshot lists are deleted.
    pub async fn delete_snapshot(&self, name: &str) -> Result<()> {
        self.backend.delete_snapshot(name).await
    }
    /// Creates table `new_table` from snapshot `name`, which must hold one table: it shares
    /// the snapshot's files (no copy) and diverges from there (HBase's `clone_snapshot`).
    /// A snapshot of several tables (an indexed table's) is cloned with
    /// [`Admin::clone_snapshot_tables`].
    pub async fn clone_snapshot(&self, name: &str, new_table: impl IntoTableName) -> Result<()> {
        let new_table = new_table.into_table_name()?;
        let snap = self.backend.describe_snapshot(name).await?;
        let ([from], [desc]) = (snap.tables.as_slice(), snap.descriptors.as_slice()) else {
            return Err(crate::error::Error::bad_argument(format!(
                "snapshot {name} holds {} tables ({}): name each clone with clone_snapshot_tables",
                snap.tables.len(),
                snap.tables.join(", ")
            )));
        };
        let from = TableName::parse(from)?;
        let mut desc = desc.clone();
        desc.name = new_table;
        self.backend.clone_snapshot(name, vec![(from, desc)]).await
    }
    /// Creates tables from snapshot `name`'s: each `(from, descriptor)` makes table
    /// `descriptor.name` from the snapshot's table `from` (same column families), sharing
    /// its files. An indexed table is cloned with its index tables, whose descriptors name
    /// the clones (`basalt_index::IndexAdmin::clone_snapshot` builds them).
    pub async fn clone_snapshot_tables(
        &self,
        name: &str,
        targets: Vec<(TableName, TableDescriptor)>,
    ) -> Result<()> {
        self.backend.clone_snapshot(name, targets).await
    }
    /// Rolls snapshot `name`'s tables back to it (HBase's `restore_snapshot`): each must be
    /// disabled (or missing); a fail-safe snapshot of their current state is taken first
    /// and its name returned (`None` when none of them existed). The tables are left
    /// disabled: enable them to serve the restored state.
    pub async fn restore_snapshot(&self, name: &str) -> Result<Option<String>> {
        self.backend.restore_snapshot(name).await
    }
    /// Validates a plugin (a WebAssembly component for the engine's plugin runtime) and
    /// stores it in the catalog under its sha256; attach it to a table by adding the
    /// coprocessor [`crate::plugin_coprocessor_name`]`(id)`. Uploading the same bytes again
    /// answers the stored plugin.
    pub async fn upload_plugin(&self, bytes: impl Into<Vec<u8>>) -> Result<PluginInfo> {
        self.backend.upload_plugin(bytes.into()).await
    }
    /// Every uploaded plugin, by id, with the tables that list it.
    pub async fn list_plugins(&self) -> Result<Vec<PluginInfo>> {
        self.backend.list_plugins().await
    }
    /// One uploaded plugin.
    pub async fn describe_plugin(&self, id: &str) -> Result<PluginInfo> {
        self.backend.describe_plugin(id).await
    }
    /// An uploaded plugin's bytes.
    pub async fn plugin_bytes(&self, id: &str) -> Result<bytes::Bytes> {
        self.backend.plugin_bytes(id).await
    }
    /// Deletes an uploaded plugin; refused while a table lists it.
    pub async fn delete_plugin(&self, id: &str) -> Result<()> {
        self.backend.delete_plugin(id).await
    }
    /// Replaces table `name`'s coprocessor `old` by `new` in one schema change, in its
    /// place in the list: no operation runs without one of them, and none runs both in
    /// one batch (hot swap, and rollback by swapping back). If `new` cannot load, nothing
    /// changes and `old` keeps serving.
    pub async fn swap_coprocessor(
        &self,
        name: impl IntoTableName,
        old: &str,
        new: CoprocessorDescriptor,
    ) -> Result<()> {
        let name = name.into_table_name()?;
        let mut list = self.backend.describe_table(&name)?.coprocessors;
        let slot = list
            .iter_mut()
            .find(|c| c.name == old)
            .ok_or_else(|| Error::bad_argument(format!("table {name} has no coprocessor {old}")))?;
        *slot = new;
        self.backend.set_coprocessors(&name, list).await
    }
}

/// Data operations on one table.
#[derive(Debug)]
pub struct Table<B: Backend = Engine> {
    backend: Arc<B>,
    name: TableName,
}

impl<B: Backend> Clone for Table<B> {
    fn clone(&self) -> Self {
        Table {
            backend: self.backend.clone(),
            name: self.name.clone(),
        }
    }
}

impl<B: Backend> Table<B> {
    /// The table's name.
    pub fn name(&self) -> &TableName {
        &self.name
    }

    /// Writes one row.
    pub async fn put(&self, p: Put) -> Result<()> {
        self.backend.put(&self.name, p).await
    }

    /// Touches one row: under the row's lock, runs the table's batch hooks as for a write
    /// that changes nothing ([`Put::touch`]), so an index rewrites the row's entries from
    /// its current values (an online index build touches every row). Writes nothing itself;
    /// on a table without batch hooks it does nothing.
    pub async fn touch(&self, row: impl AsRef<[u8]>) -> Result<()> {
        self.backend.put(&self.name, Put::touch(row)).await
    }

    /// Reads one row (an empty result when nothing matches).
    pub async fn get(&self, g: Get) -> Result<RowResult> {
        self.backend.get(&self.name, g).await
    }

    /// True when the get would return at least one cell.
    pub async fn exists(&self, g: Get) -> Result<bool> {
        self.backend.exists(&self.name, g).await
    }

    /// Writes delete markers.
    pub async fn delete(&self, d: Delete) -> Result<()> {
        self.backend.delete(&self.name, d).await
    }

    /// Scans rows as a stream, at one snapshot of the whole table.
    pub fn scan(&self, s: Scan) -> Result<B::Rows> {
        self.backend.scan(&self.name, s, None)
    }

    /// Registers the current read point for scans that must read one snapshot together
    /// (a salted scan's buckets); it stays registered while any holder lives.
    pub(crate) fn pin_read_point(&self) -> Result<B::ReadPoint> {
        self.backend.pin_read_point()
    }

    /// Pins the current read point of every table (as [`Connection::snapshot`]).
    pub fn snapshot(&self) -> Result<Snapshot<B>> {
        Ok(Snapshot::new(self.pin_read_point()?))
    }

    /// [`scan`](Self::scan) at `snapshot`: the rows as they were when it was taken (see
    /// [`Snapshot`]).
    pub fn scan_at(&self, s: Scan, snapshot: &Snapshot<B>) -> Result<B::Rows> {
        self.scan_pinned(s, snapshot.point())
    }

    /// [`scan`](Self::scan) at a read point pinned by [`pin_read_point`](Self::pin_read_point).
    pub(crate) fn scan_pinned(&self, s: Scan, point: &B::ReadPoint) -> Result<B::Rows> {
        self.backend.scan(&self.name, s, Some(point))
    }

    /// Adds to counters atomically; returns the new values.
    pub async fn increment(&self, inc: Increment) -> Result<RowResult> {
        self.backend.increment(&self.name, inc).await
    }

    /// Appends to cells atomically; returns the new values.
    pub async fn append(&self, a: Append) -> Result<RowResult> {
        self.backend.append(&self.name, a).await
    }

    /// Applies a mutation if a condition holds; returns whether it held.
    pub async fn check_and_mutate(&self, c: CheckAndMutate) -> Result<bool> {
        self.backend.check_and_mutate(&self.name, c).await
    }

    /// Applies a row's puts and deletes atomically.
    pub async fn mutate_row(&self, rm: RowMutations) -> Result<()> {
        self.backend.mutate_row(&self.name, rm).await
    }

    /// Runs many operations, one result per operation.
    pub async fn batch(&self, ops: Vec<BatchOp>) -> Result<Vec<Result<BatchOutcome>>> {
        self.backend.batch(&self.name, ops).await
    }

    /// The table's descriptor.
    pub(crate) fn descriptor(&self) -> Result<TableDescriptor> {
        self.backend.describe_table(&self.name)
    }

    /// Facts about every region, in key order.
    pub async fn regions(&self) -> Result<Vec<RegionInfo>> {
        self.backend.regions(&self.name).await
    }

    /// The region report (reads, writes and size per region).
    pub async fn region_report(&self) -> Result<RegionReport> {
        let regions = self.backend.regions(&self.name).await?;
        Ok(RegionReport::from_regions(self.name.to_string(), &regions))
    }
}
