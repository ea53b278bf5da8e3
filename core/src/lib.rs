//! `basalt-core`: Basalt's engine.
//!
//! Layers, bottom to top: `error`, `varint`, `cell`, `fs`, `objects`, `mvcc`, `keys`,
//! `schema`, `coord`, `wal`, `filter`, `ops`, `catalog`, `backup`, `storage`, `region`,
//! `coprocessor`, `server`, `client`.
//!
//! Each module uses only modules before it in that list (`tests/architecture.rs` reads the
//! sources and fails on any reference to a later one). The engine's own stages are declared
//! the same way in `server`'s module doc, and the stages of opening a directory in
//! `server::open`'s. At the bottom the value types: cells
//! and rows ([`cell`]), key ranges and row-key tools ([`keys`]), table schemas (`schema`),
//! filters as data ([`filter`]) and the operations a client sends (`ops`). Then the
//! durable pieces: coordination (who is alive and owns which region, [`coord`], in memory
//! for the embedded engine), the WAL (`wal`), the catalog (`catalog`), backups of its
//! files to another store (`backup`) and the stores
//! (`storage`: MemStore, store files, merge, matcher, compaction), which know nothing of
//! regions; `region` (regions, stores, row locks), which knows nothing of coprocessors;
//! the coprocessor interface ([`coprocessor`]), which names no engine type; the engine
//! (`server`); and on top the client ([`client`]: Connection, Admin, Table, salted
//! tables), which reaches the engine only through one interface, [`client::Backend`]
//! (implemented by [`Engine`]; a network connection would be a second implementation).
//! Salted tables ([`client::SaltedTable`]) build on [`keys`].
//!
//! Public modules: `cell`, `client`, `coord`, `coprocessor`, `endpoint`, `filter`, `fs`,
//! `keys`, `objects`, `repair`. Every other module is private: what users need of it is re-exported at the
//! crate root, so the compiler reports what no one uses, and `coprocessors` and `index` (as
//! any user) see only this API (`tests/architecture.rs` checks both).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

// The public modules: value types, filters, row keys, the filesystem seam and the
// coprocessor interface. Everything else is private and reached through the re-exports
// below, so the compiler reports what no one uses.
pub mod cell;
pub mod client;
pub mod coord;
pub mod coprocessor;
pub mod filter;
pub mod fs;
pub mod keys;
pub mod objects;

mod backup;
mod catalog;
mod error;
mod mvcc;
mod ops;
mod region;
mod schema;
mod server;
mod storage;
mod varint;
mod wal;

/// What an endpoint runs against: one region's rows at the call's read point
/// ([`endpoint::RegionView`]), and the fan-out of one call over a table's regions.
pub mod endpoint {
    pub use crate::server::endpoint::{
        ColumnRow, EndpointAnswers, EndpointCall, EndpointHost, LocalScanner, OwnedRegionView,
        RegionPart, RegionSpan, RegionView,
    };
}

/// Checking and repairing a closed data directory without opening an engine (see
/// `docs/recovery.md`).
pub mod repair {
    pub use crate::server::open::repair::{
        check_dir, repair_dir, DirectoryCheck, RepairReport, SetAsideFile,
    };
}

pub use backup::{
    list_backups, read_manifest, restore_backup, verify_backup, BackupCheck, BackupFile,
    BackupManifest, BackupOptions, BackupProgress, BackupSummary, ProgressFn,
};
pub use catalog::{
    validate_plugin_id, validate_snapshot_name, PluginKind, SnapshotDescription, MAX_SNAPSHOT_NAME,
};
pub use cell::{now_ms, Cell, CellType, Timestamp, LATEST_TIMESTAMP, MAX_ROW_LENGTH};
pub use client::{Admin, Backend, Config, Connection, PreSplit, RegionReport, SaltedTable, Table};
pub use coprocessor::CompactionOutcome;
pub use error::{Error, ErrorWire, Result};
pub use filter::{Comparator, Filter};
pub use region::{RegionInfo, MAX_CLOCK_LEAD_MS};
pub use schema::salt::{HashedPart, SaltFormat, SaltHash, SaltSpec};
pub use schema::split::{SplitAlgorithm, SplitPolicy};
pub use schema::{
    validate_family_name, validate_namespace, BloomType, ColumnFamilyDescriptor,
    CompactionSettings, Compression, CoprocessorDescriptor, FailurePolicy, FaultAction,
    IntoTableName, KeepDeletedCells, SplitRestriction, TableDescriptor, TableName,
    DEFAULT_NAMESPACE, SYSTEM_NAMESPACE,
};
pub use server::backup::BackupSource;
pub use server::config::{HooksLoader, PluginSource, RecoveryRepair, RecoveryRepairOutcome};
pub use server::open::check::{IntegrityReport, StoreFileReport};
pub use server::open::garbage::{GarbageCollection, GARBAGE_GRACE};
pub use server::open::recovery::{OfflineRegion, RecoveryReport};
pub use server::open::runtime::UnlistedTable;
pub use server::plugins::{
    plugin_coprocessor_name, plugin_id, plugin_id_of, PluginInfo, MAX_PLUGIN_BYTES, PLUGIN_PREFIX,
};
pub use server::{Engine, EngineStats};
pub use storage::compaction::CompactionKind;
pub use storage::storefile::{FileCheck, Finding, FindingKind};
pub use wal::{DamageAction, Durability, WalCut, WalDamage, WalEdit, WalRecord, WalRecoveryMode};
