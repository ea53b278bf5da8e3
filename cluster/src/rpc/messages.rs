//! The RPC's messages: one [`Request`] per operation of the client's `Backend` seam but
//! scans, answered by one [`Reply`]; a [`ScanRequest`] answered by a stream of
//! [`ScanPage`]s.
//!
//! Every value inside is one of `basalt_core`'s own (operations, descriptors, reports),
//! encoded by their serde forms; an engine's refusal travels as a [`Reply::Error`] (or
//! [`ScanPage::Error`]) carrying the typed error ([`ErrorWire`]), so the client raises the
//! same `basalt_core::Error` variant an embedded engine would. Failures of the transport
//! itself (a deadline, a message too large, bytes that do not decode) are gRPC statuses.
//!
//! Invariants: the enums only ever grow at their end (postcard names a variant by its
//! index), and [`PROTOCOL_VERSION`] rises with any other change.

use crate::placement::HoldTarget;
use basalt_core::client::{
    Append, BatchOp, BatchOutcome, CheckAndMutate, Delete, Get, Increment, Put, RowMutations,
    RowResult, Scan,
};
use basalt_core::endpoint::RegionSpan;
use basalt_core::keys::RowRange;
use basalt_core::{
    ColumnFamilyDescriptor, CompactionKind, CoprocessorDescriptor, ErrorWire, IntegrityReport,
    OfflineRegion, PluginInfo, PreSplit, RegionInfo, SnapshotDescription, TableDescriptor,
    TableName,
};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The protocol's version, sent by [`Request::Hello`] and checked by the server.
pub const PROTOCOL_VERSION: u32 = 1;

/// One operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// Checks the protocol version; answered by [`Reply::Hello`].
    Hello {
        /// The client's [`PROTOCOL_VERSION`].
        version: u32,
    },
    /// `Backend::put`.
    Put(TableName, Put),
    /// `Backend::delete`.
    Delete(TableName, Delete),
    /// `Backend::get`.
    Get(TableName, Get),
    /// `Backend::exists`.
    Exists(TableName, Get),
    /// `Backend::increment`.
    Increment(TableName, Increment),
    /// `Backend::append`.
    Append(TableName, Append),
    /// `Backend::check_and_mutate`.
    CheckAndMutate(TableName, CheckAndMutate),
    /// `Backend::mutate_row`.
    MutateRow(TableName, RowMutations),
    /// `Backend::batch`.
    Batch(TableName, Vec<BatchOp>),
    /// Pins a read point on the server; answered by [`Reply::ReadPoint`].
    PinReadPoint,
    /// Unpins a read point [`Request::PinReadPoint`] pinned.
    ReleaseReadPoint(u64),
    /// `Backend::create_table`.
    CreateTable(TableDescriptor, PreSplit),
    /// `Backend::delete_table`.
    DeleteTable(TableName),
    /// `Backend::enable_table`.
    EnableTable(TableName),
    /// `Backend::disable_table`.
    DisableTable(TableName),
    /// `Backend::is_table_enabled`.
    IsTableEnabled(TableName),
    /// `Backend::table_exists`.
    TableExists(TableName),
    /// `Backend::list_tables`.
    ListTables,
    /// `Backend::describe_table`.
    DescribeTable(TableName),
    /// `Backend::add_column_family`.
    AddColumnFamily(TableName, ColumnFamilyDescriptor),
    /// `Backend::modify_column_family`.
    ModifyColumnFamily(TableName, ColumnFamilyDescriptor),
    /// `Backend::delete_column_family`.
    DeleteColumnFamily(TableName, Bytes),
    /// `Backend::add_coprocessor`.
    AddCoprocessor(TableName, CoprocessorDescriptor),
    /// `Backend::remove_coprocessor`.
    RemoveCoprocessor(TableName, String),
    /// `Backend::set_coprocessors`.
    SetCoprocessors(TableName, Vec<CoprocessorDescriptor>),
    /// `Backend::create_namespace`.
    CreateNamespace(String),
    /// `Backend::delete_namespace`.
    DeleteNamespace(String),
    /// `Backend::list_namespaces`.
    ListNamespaces,
    /// `Backend::regions`.
    Regions(TableName),
    /// `Backend::flush`.
    Flush(TableName),
    /// `Backend::compact`.
    Compact(TableName, CompactionKind),
    /// `Backend::compact_region`.
    CompactRegion(TableName, u64, CompactionKind),
    /// `Backend::split_region`.
    SplitRegion(TableName, u64, Option<Bytes>),
    /// `Backend::merge_regions`.
    MergeRegions(TableName, u64, u64),
    /// `Backend::check_table`.
    CheckTable(TableName),
    /// `Backend::offline_regions`.
    OfflineRegions,
    /// `Backend::snapshot`.
    Snapshot(String, Vec<TableName>, bool),
    /// `Backend::list_snapshots`.
    ListSnapshots,
    /// `Backend::describe_snapshot`.
    DescribeSnapshot(String),
    /// `Backend::delete_snapshot`.
    DeleteSnapshot(String),
    /// `Backend::clone_snapshot`.
    CloneSnapshot(String, Vec<(TableName, TableDescriptor)>),
    /// `Backend::restore_snapshot`.
    RestoreSnapshot(String),
    /// `Backend::upload_plugin`.
    UploadPlugin(Bytes),
    /// `Backend::list_plugins`.
    ListPlugins,
    /// `Backend::describe_plugin`.
    DescribePlugin(String),
    /// `Backend::plugin_bytes`.
    PluginBytes(String),
    /// `Backend::delete_plugin`.
    DeletePlugin(String),
    /// `Backend::call_endpoint`; answered by [`Reply::Endpoint`].
    CallEndpoint(EndpointRequest),
    /// The server's RPC counters (for the master's page); answered by [`Reply::Load`].
    ServerLoad,
}

/// An endpoint call on the rows of one server's regions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndpointRequest {
    /// The table.
    pub table: TableName,
    /// The service's name.
    pub service: String,
    /// The rows to run it on (within regions this server serves).
    pub range: RowRange,
    /// The service's encoded request.
    pub request: Bytes,
    /// A read point pinned on this server ([`Reply::ReadPoint`]'s handle); `None`: one
    /// taken for this call.
    pub read_point: Option<u64>,
}

impl Request {
    /// Whether the call reads the catalog: lists, describes or checks tables, namespaces,
    /// regions or snapshots (a server re-reads what other servers changed first).
    pub fn reads_catalog(&self) -> bool {
        use Request::*;
        matches!(
            self,
            IsTableEnabled(..)
                | TableExists(..)
                | ListTables
                | DescribeTable(..)
                | ListNamespaces
                | Regions(..)
                | ListSnapshots
                | DescribeSnapshot(..)
                | CheckTable(..)
        )
    }

    /// What a schema, snapshot or merge call needs on the server it is sent to: whole
    /// tables (every region served there), or a merge's two regions; `None` for any other
    /// call. A restore names its tables in the snapshot, not in the call: its caller holds
    /// them.
    pub fn held(&self) -> Option<Vec<HoldTarget>> {
        use Request::*;
        match self {
            DeleteTable(t)
            | EnableTable(t)
            | DisableTable(t)
            | AddColumnFamily(t, _)
            | ModifyColumnFamily(t, _)
            | DeleteColumnFamily(t, _)
            | AddCoprocessor(t, _)
            | RemoveCoprocessor(t, _)
            | SetCoprocessors(t, _) => Some(vec![HoldTarget::table(t.clone())]),
            MergeRegions(t, a, b) => Some(vec![
                HoldTarget::region(t.clone(), *a),
                HoldTarget::region(t.clone(), *b),
            ]),
            Snapshot(_, tables, _) => Some(tables.iter().cloned().map(HoldTarget::table).collect()),
            _ => None,
        }
    }

    /// The region a call acts on alone (a split, a region's compaction): it goes to the
    /// region's server.
    pub fn region(&self) -> Option<(&TableName, u64)> {
        match self {
            Request::CompactRegion(t, id, _) | Request::SplitRegion(t, id, _) => Some((t, *id)),
            _ => None,
        }
    }

    /// Whether the call writes rows (its acknowledgement names the server and its WAL).
    pub fn writes(&self) -> bool {
        use Request::*;
        matches!(
            self,
            Put(..)
                | Delete(..)
                | Increment(..)
                | Append(..)
                | CheckAndMutate(..)
                | MutateRow(..)
                | Batch(..)
        )
    }

    /// The operation's name, for logs, metrics and errors.
    pub fn name(&self) -> &'static str {
        use Request::*;
        match self {
            Hello { .. } => "hello",
            Put(..) => "put",
            Delete(..) => "delete",
            Get(..) => "get",
            Exists(..) => "exists",
            Increment(..) => "increment",
            Append(..) => "append",
            CheckAndMutate(..) => "check_and_mutate",
            MutateRow(..) => "mutate_row",
            Batch(..) => "batch",
            PinReadPoint => "pin_read_point",
            ReleaseReadPoint(..) => "release_read_point",
            CreateTable(..) => "create_table",
            DeleteTable(..) => "delete_table",
            EnableTable(..) => "enable_table",
            DisableTable(..) => "disable_table",
            IsTableEnabled(..) => "is_table_enabled",
            TableExists(..) => "table_exists",
            ListTables => "list_tables",
            DescribeTable(..) => "describe_table",
            AddColumnFamily(..) => "add_column_family",
            ModifyColumnFamily(..) => "modify_column_family",
            DeleteColumnFamily(..) => "delete_column_family",
            AddCoprocessor(..) => "add_coprocessor",
            RemoveCoprocessor(..) => "remove_coprocessor",
            SetCoprocessors(..) => "set_coprocessors",
            CreateNamespace(..) => "create_namespace",
            DeleteNamespace(..) => "delete_namespace",
            ListNamespaces => "list_namespaces",
            Regions(..) => "regions",
            Flush(..) => "flush",
            Compact(..) => "compact",
            CompactRegion(..) => "compact_region",
            SplitRegion(..) => "split_region",
            MergeRegions(..) => "merge_regions",
            CheckTable(..) => "check_table",
            OfflineRegions => "offline_regions",
            Snapshot(..) => "snapshot",
            ListSnapshots => "list_snapshots",
            DescribeSnapshot(..) => "describe_snapshot",
            DeleteSnapshot(..) => "delete_snapshot",
            CloneSnapshot(..) => "clone_snapshot",
            RestoreSnapshot(..) => "restore_snapshot",
            UploadPlugin(..) => "upload_plugin",
            ListPlugins => "list_plugins",
            DescribePlugin(..) => "describe_plugin",
            PluginBytes(..) => "plugin_bytes",
            DeletePlugin(..) => "delete_plugin",
            CallEndpoint(..) => "call_endpoint",
            ServerLoad => "server_load",
        }
    }
}

/// One operation's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// The server's [`PROTOCOL_VERSION`] and process name.
    Hello {
        /// The server's protocol version.
        version: u32,
        /// The server's process name.
        process: String,
    },
    /// The engine refused the operation: its typed error.
    Error(ErrorWire),
    /// Done, nothing to return.
    Done,
    /// A row.
    Row(RowResult),
    /// A yes or no.
    Flag(bool),
    /// A batch's outcomes, one per operation, in order.
    Batch(Vec<Result<BatchOutcome, ErrorWire>>),
    /// A pinned read point: its handle on the server, and the read point.
    ReadPoint {
        /// The handle [`Request::ReleaseReadPoint`] and [`ScanRequest::read_point`] name.
        handle: u64,
        /// The read point (sequence id).
        point: u64,
    },
    /// Table descriptors.
    Tables(Vec<TableDescriptor>),
    /// One table descriptor.
    Table(TableDescriptor),
    /// Names (namespaces).
    Names(Vec<String>),
    /// Facts of regions.
    Regions(Vec<RegionInfo>),
    /// A split's daughters.
    Split(Option<(u64, u64)>),
    /// A region's id (a merge's result).
    Region(u64),
    /// A table's check.
    Integrity(IntegrityReport),
    /// Offline regions.
    Offline(Vec<OfflineRegion>),
    /// One snapshot.
    Snapshot(SnapshotDescription),
    /// Snapshots.
    Snapshots(Vec<SnapshotDescription>),
    /// A restore's fail-safe snapshot.
    Restored(Option<String>),
    /// One plugin.
    Plugin(PluginInfo),
    /// Plugins.
    Plugins(Vec<PluginInfo>),
    /// Bytes (a plugin's).
    Bytes(Bytes),
    /// An endpoint call's answers: one per region, in key order, each with the part of
    /// the range it covered and the encoded response or the region's typed error.
    Endpoint(Vec<(RegionSpan, Result<Bytes, ErrorWire>)>),
    /// A server's RPC counters.
    Load(ServerLoad),
}

/// What a region server's RPC service counted since the server started (HBase's
/// server load report, as far as the master's page shows it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerLoad {
    /// Calls answered (every kind but [`Request::ServerLoad`], scans included), refusals
    /// and errors among them.
    pub requests: u64,
    /// Of those, calls answered with an error (the engine's refusal or a fault).
    pub errors: u64,
    /// Scans opened (not refused, not failed to open).
    pub scans: u64,
    /// Scans running now.
    pub open_scans: u64,
    /// Milliseconds since the counting began (the server's start).
    pub uptime_ms: u64,
}

/// A scan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanRequest {
    /// The table.
    pub table: TableName,
    /// The scan.
    pub scan: Scan,
    /// A read point pinned on this server ([`Reply::ReadPoint`]'s handle), if any.
    pub read_point: Option<u64>,
}

/// One page of a scan's stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ScanPage {
    /// Rows, in the scan's order.
    Rows(Vec<RowResult>),
    /// The scan failed: its typed error, the stream's last page.
    Error(ErrorWire),
}

/// Who acknowledged a write: the region server's process and where its WAL stood when it
/// answered (its writer folder and newest segment: the write is in that segment or an
/// older one). Sent as the reply's gRPC metadata `basalt-server` and `basalt-wal`
/// (`<writer>/<segment>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledgement {
    /// The server's process name.
    pub server: String,
    /// Its WAL writer number.
    pub writer: u64,
    /// Its newest WAL segment when it answered.
    pub segment: u64,
}

/// The metadata key of the acknowledging server.
pub const SERVER_METADATA: &str = "basalt-server";
/// The metadata key of the acknowledging server's WAL position.
pub const WAL_METADATA: &str = "basalt-wal";

impl Acknowledgement {
    /// Read from a reply's metadata (`None` when absent or malformed).
    pub fn from_metadata(m: &tonic::metadata::MetadataMap) -> Option<Self> {
        let server = m.get(SERVER_METADATA)?.to_str().ok()?.to_string();
        let (writer, segment) = m.get(WAL_METADATA)?.to_str().ok()?.split_once('/')?;
        Some(Acknowledgement {
            server,
            writer: writer.parse().ok()?,
            segment: segment.parse().ok()?,
        })
    }

    /// Written into a reply's metadata (nothing for a process name metadata cannot hold).
    pub fn to_metadata(&self, m: &mut tonic::metadata::MetadataMap) {
        let wal = format!("{}/{}", self.writer, self.segment);
        if let (Ok(server), Ok(wal)) = (self.server.parse(), wal.parse()) {
            m.insert(SERVER_METADATA, server);
            m.insert(WAL_METADATA, wal);
        }
    }
}
