//! [`Backend`]: what a [`Connection`](super::Connection) talks to - the embedded
//! [`Engine`](crate::Engine) today, a remote server later.
//!
//! The client ([`Connection`](super::Connection), [`Admin`](super::Admin),
//! [`Table`](super::Table), [`SaltedTable`](super::SaltedTable),
//! [`Snapshot`](super::Snapshot)) reaches the engine only through this trait, so a network
//! connection is a second implementation of it, not a fork of the client. Every handle is
//! generic over its backend with the embedded engine as the default (`Connection` is
//! `Connection<Engine>`), and the engine's implementation (`client/embedded.rs`) is the one
//! place of the client that names engine internals.
//!
//! The shape, and why:
//!
//! - **Names and values in, values out.** Every method takes a table's name
//!   ([`TableName`]), the operations of `ops` ([`Put`], [`Get`], [`Scan`], ...) and
//!   descriptors, and returns [`Result`]s of value types ([`RowResult`], [`RegionInfo`],
//!   [`IntegrityReport`], ...): all of them could be encoded into a request or a response.
//!   No engine state (tables, regions, stores) crosses it; a table is resolved by name on
//!   every call, so a table deleted meanwhile answers `TableNotFound`.
//! - **Async calls without boxing.** What could be a round trip returns
//!   `impl Future<Output = Result<T>> + Send` (static dispatch: the embedded engine's
//!   futures are returned as they are). Three calls are synchronous because the client's
//!   API is: opening a scan ([`scan`](Backend::scan)), pinning a read point
//!   ([`pin_read_point`](Backend::pin_read_point)) and reading a table's descriptor
//!   ([`describe_table`](Backend::describe_table), which a salted handle reads when it is
//!   made). A remote backend opens its scanner when the stream is first polled, and answers
//!   descriptors from a cache of the server's, as HBase's client caches its meta table.
//! - **Receivers are `self: &Arc<Self>`.** Handles share one backend, and the embedded
//!   engine's work outlives a borrow: a scan's stream and a pinned read point hold the engine.
//! - **Read points are the backend's own handles** ([`Backend::ReadPoint`]): pinning one
//!   registers it (the engine keeps every version a read at it needs) until the last clone
//!   drops. [`Snapshot`](super::Snapshot) wraps one, and a salted scan pins one for all its
//!   bucket scans. A remote backend's handle is a lease on the server's read point.
//! - **Scans are streams of rows** ([`Backend::Rows`]), owned (`'static`: a salted scan
//!   drives each bucket's stream from its own task) and `Unpin`. The engine's is
//!   [`ResultStream`](super::ResultStream); a remote backend's is its scanner's stream.
//! - **Server-side behaviour stays behind the trait.** The engine observer around schema
//!   changes (`pre_modify_table` / `post_modify_table`), the flush before a column family is
//!   dropped, coprocessor hooks and salting of the physical layout are the backend's
//!   business; the client adds only what it computes from values (salting of row keys,
//!   the salted merge, region reports).
//!
//! **Endpoint fan-out.** Code runs where the data is, and a closure cannot cross a
//! network, so the seam carries what HBase's client sends: a named service, called on a
//! range of rows at a pinned read point with an encoded request, answering one encoded
//! response per region ([`Backend::call_endpoint`]). The engine runs the services it was
//! given ([`Engine::serve_endpoints`](crate::Engine::serve_endpoints)); a remote backend
//! sends the call to the servers of the range's regions. The client plans a call with the
//! region list ([`Backend::regions`]) and one read point for all its parts
//! ([`Backend::pin_read_point`]). Running a closure of the caller's on each region stays an
//! in-process capability of the embedded engine (`Connection<Engine>::endpoint_call`).
//!
//! Not part of the seam: opening a data directory, the recovery report and recovery
//! repairs, and the engine handle itself ([`Connection::engine`](super::Connection::engine)),
//! which are the embedded engine's (`impl Connection<Engine>`).

use crate::catalog::SnapshotDescription;
use crate::endpoint::EndpointAnswers;
use crate::error::Result;
use crate::keys::RowRange;
use crate::ops::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Increment, Put, RowMutations,
    RowResult, Scan,
};
use crate::region::RegionInfo;
use crate::schema::{ColumnFamilyDescriptor, CoprocessorDescriptor, TableDescriptor, TableName};
use crate::server::admin::PreSplit;
use crate::server::open::check::IntegrityReport;
use crate::server::open::recovery::OfflineRegion;
use crate::server::plugins::PluginInfo;
use crate::storage::compaction::CompactionKind;
use bytes::Bytes;
use futures::Stream;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

/// A pinned read point of a [`Backend`]: while any clone of it lives, the backend keeps
/// every version a read at it needs. Cheap to clone.
pub trait ReadPointHandle: Clone + Send + Sync + fmt::Debug + 'static {
    /// The read point: reads at it see the commits with sequence ids up to it.
    fn read_point(&self) -> u64;
}

/// What a [`Connection`](super::Connection) talks to: the embedded
/// [`Engine`](crate::Engine) today, a remote server later (see the module doc for the
/// shape and its reasons).
///
/// Every method names its table by [`TableName`] and passes and returns value types only.
/// Errors are the engine's ([`crate::Error`]): a remote backend maps its transport's
/// failures to [`Error::Io`](crate::Error::Io).
pub trait Backend: Send + Sync + fmt::Debug + 'static {
    /// A pinned read point (see [`pin_read_point`](Self::pin_read_point)).
    type ReadPoint: ReadPointHandle;

    /// The rows of a scan, in the scan's order; an error ends the stream.
    type Rows: Stream<Item = Result<RowResult>> + Send + Unpin + 'static;

    // ---- Data ------------------------------------------------------------------------

    /// Writes one row.
    fn put(
        self: &Arc<Self>,
        table: &TableName,
        put: Put,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Writes delete markers.
    fn delete(
        self: &Arc<Self>,
        table: &TableName,
        delete: Delete,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Reads one row (an empty result when nothing matches), running the table's get hooks.
    fn get(
        self: &Arc<Self>,
        table: &TableName,
        get: Get,
    ) -> impl Future<Output = Result<RowResult>> + Send;

    /// True when the get would return at least one cell (the table's exists hooks run).
    fn exists(
        self: &Arc<Self>,
        table: &TableName,
        get: Get,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Adds to counters atomically; returns the new values.
    fn increment(
        self: &Arc<Self>,
        table: &TableName,
        increment: Increment,
    ) -> impl Future<Output = Result<RowResult>> + Send;

    /// Appends to cells atomically; returns the new values.
    fn append(
        self: &Arc<Self>,
        table: &TableName,
        append: Append,
    ) -> impl Future<Output = Result<RowResult>> + Send;

    /// Applies a mutation if a condition holds; returns whether it held.
    fn check_and_mutate(
        self: &Arc<Self>,
        table: &TableName,
        check: CheckAndMutate,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Applies one row's puts and deletes atomically.
    fn mutate_row(
        self: &Arc<Self>,
        table: &TableName,
        mutations: RowMutations,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Runs many operations, one result per operation, in order.
    fn batch(
        self: &Arc<Self>,
        table: &TableName,
        ops: Vec<BatchOp>,
    ) -> impl Future<Output = Result<Vec<Result<BatchOutcome>>>> + Send;

    /// Opens a scan of `table`, at `at` when given (several scans reading one snapshot),
    /// else at a read point of its own taken now. Fails at once on a scan the table cannot
    /// serve (an unknown family, bad versions or batch size) or a missing or disabled table;
    /// read errors end the stream.
    fn scan(
        self: &Arc<Self>,
        table: &TableName,
        scan: Scan,
        at: Option<&Self::ReadPoint>,
    ) -> Result<Self::Rows>;

    /// Pins the current read point, for every table: scans given it read the same committed
    /// state, however long they run and whatever commits meanwhile. It stays pinned while any
    /// clone of the handle lives.
    fn pin_read_point(self: &Arc<Self>) -> Result<Self::ReadPoint>;

    /// Runs endpoint service `service` of `table` on the rows of `range`, at read point
    /// `at`: once per region overlapping the range, each answering `request`'s encoded
    /// response (or its own error) for the part of the range it holds, in key order. Fails
    /// whole when the backend serves no such endpoint host or a region of the range is
    /// not served where the call went (after a retry, for a remote backend).
    fn call_endpoint(
        self: &Arc<Self>,
        table: &TableName,
        service: &str,
        range: RowRange,
        request: Bytes,
        at: &Self::ReadPoint,
    ) -> impl Future<Output = Result<EndpointAnswers>> + Send;

    // ---- Tables and namespaces -------------------------------------------------------

    /// Creates a table, pre-split as `split` says.
    fn create_table(
        self: &Arc<Self>,
        desc: TableDescriptor,
        split: PreSplit,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes a disabled table and its data.
    fn delete_table(self: &Arc<Self>, table: &TableName)
        -> impl Future<Output = Result<()>> + Send;

    /// Enables a table.
    fn enable_table(self: &Arc<Self>, table: &TableName)
        -> impl Future<Output = Result<()>> + Send;

    /// Disables a table (flushing it first).
    fn disable_table(
        self: &Arc<Self>,
        table: &TableName,
    ) -> impl Future<Output = Result<()>> + Send;

    /// True when the table is enabled; fails when it does not exist.
    fn is_table_enabled(
        self: &Arc<Self>,
        table: &TableName,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// True when the table exists.
    fn table_exists(
        self: &Arc<Self>,
        table: &TableName,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Every table's descriptor.
    fn list_tables(self: &Arc<Self>) -> impl Future<Output = Result<Vec<TableDescriptor>>> + Send;

    /// A table's descriptor (synchronous: see the module doc).
    fn describe_table(self: &Arc<Self>, table: &TableName) -> Result<TableDescriptor>;

    /// Adds a column family.
    fn add_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: ColumnFamilyDescriptor,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Replaces a column family's settings (the family named by `family.name`).
    fn modify_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: ColumnFamilyDescriptor,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Removes a column family and its data.
    fn delete_column_family(
        self: &Arc<Self>,
        table: &TableName,
        family: &[u8],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Adds a coprocessor to a table (loaded after those already listed).
    fn add_coprocessor(
        self: &Arc<Self>,
        table: &TableName,
        coprocessor: CoprocessorDescriptor,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Removes a table's coprocessor by name.
    fn remove_coprocessor(
        self: &Arc<Self>,
        table: &TableName,
        name: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Replaces a table's whole coprocessor list.
    fn set_coprocessors(
        self: &Arc<Self>,
        table: &TableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Creates a namespace.
    fn create_namespace(
        self: &Arc<Self>,
        namespace: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes an empty namespace.
    fn delete_namespace(
        self: &Arc<Self>,
        namespace: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Every namespace.
    fn list_namespaces(self: &Arc<Self>) -> impl Future<Output = Result<Vec<String>>> + Send;

    // ---- Regions and maintenance -----------------------------------------------------

    /// Facts about every region of a table (keys, ids, load, sizes), in key order.
    fn regions(
        self: &Arc<Self>,
        table: &TableName,
    ) -> impl Future<Output = Result<Vec<RegionInfo>>> + Send;

    /// Flushes every region of a table.
    fn flush(self: &Arc<Self>, table: &TableName) -> impl Future<Output = Result<()>> + Send;

    /// Compacts every store of every region of a table (`kind` minor or major) and returns
    /// when the compactions finished.
    fn compact(
        self: &Arc<Self>,
        table: &TableName,
        kind: CompactionKind,
    ) -> impl Future<Output = Result<()>> + Send;

    /// [`compact`](Self::compact) for one region, by its id.
    fn compact_region(
        self: &Arc<Self>,
        table: &TableName,
        region_id: u64,
        kind: CompactionKind,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Splits a region at `split_row` (or its computed split point when `None`); returns
    /// the daughters' ids, lower first, or `None` when no split point exists.
    fn split_region(
        self: &Arc<Self>,
        table: &TableName,
        region_id: u64,
        split_row: Option<&[u8]>,
    ) -> impl Future<Output = Result<Option<(u64, u64)>>> + Send;

    /// Merges two adjacent regions (in either order); returns the new region's id.
    fn merge_regions(
        self: &Arc<Self>,
        table: &TableName,
        region_a: u64,
        region_b: u64,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Checks every store file of a table and reports what is wrong, file by file.
    fn check_table(
        self: &Arc<Self>,
        table: &TableName,
    ) -> impl Future<Output = Result<IntegrityReport>> + Send;

    /// Every offline region of every table, with the file and why.
    fn offline_regions(self: &Arc<Self>)
        -> impl Future<Output = Result<Vec<OfflineRegion>>> + Send;

    // ---- Table snapshots ---------------------------------------------------------------

    /// Takes table snapshot `name` of `tables` (and of their companion tables, such as
    /// index tables, when `companions`) at one read point, online, copying no data.
    fn snapshot(
        self: &Arc<Self>,
        name: &str,
        tables: &[TableName],
        companions: bool,
    ) -> impl Future<Output = Result<SnapshotDescription>> + Send;

    /// Every table snapshot, in name order.
    fn list_snapshots(
        self: &Arc<Self>,
    ) -> impl Future<Output = Result<Vec<SnapshotDescription>>> + Send;

    /// One table snapshot's description.
    fn describe_snapshot(
        self: &Arc<Self>,
        name: &str,
    ) -> impl Future<Output = Result<SnapshotDescription>> + Send;

    /// Deletes a table snapshot; files no table and no other snapshot lists go with it.
    fn delete_snapshot(self: &Arc<Self>, name: &str) -> impl Future<Output = Result<()>> + Send;

    /// Creates tables from a snapshot's: each `(from, descriptor)` pair makes table
    /// `descriptor.name` from the snapshot's table `from`, sharing its files.
    fn clone_snapshot(
        self: &Arc<Self>,
        name: &str,
        targets: Vec<(TableName, TableDescriptor)>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Rolls a snapshot's tables (disabled, or missing) back to it, leaving them disabled;
    /// returns the name of the fail-safe snapshot taken of their state first, if any.
    fn restore_snapshot(
        self: &Arc<Self>,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>>> + Send;

    // ---- Plugins -----------------------------------------------------------------------

    /// Validates and stores a plugin (a WebAssembly component) under its sha256.
    fn upload_plugin(
        self: &Arc<Self>,
        bytes: Vec<u8>,
    ) -> impl Future<Output = Result<PluginInfo>> + Send;

    /// Every uploaded plugin, by id.
    fn list_plugins(self: &Arc<Self>) -> impl Future<Output = Result<Vec<PluginInfo>>> + Send;

    /// One uploaded plugin.
    fn describe_plugin(
        self: &Arc<Self>,
        id: &str,
    ) -> impl Future<Output = Result<PluginInfo>> + Send;

    /// The bytes of an uploaded plugin (checked against their sha256).
    fn plugin_bytes(self: &Arc<Self>, id: &str) -> impl Future<Output = Result<Bytes>> + Send;

    /// Deletes an uploaded plugin no table lists.
    fn delete_plugin(self: &Arc<Self>, id: &str) -> impl Future<Output = Result<()>> + Send;

    // ---- Lifecycle -------------------------------------------------------------------

    /// Closes the backend: the embedded engine flushes its MemStores, syncs the WAL and
    /// refuses further calls; a remote backend closes its connection.
    fn close(self: &Arc<Self>) -> impl Future<Output = Result<()>> + Send;
}
