//! `basalt-core`: Basalt's engine.
//!
//! Layers read top-down: [`client`] (Connection, Admin, Table) -> [`region`] (Region, Store,
//! row locks) -> [`storage`] (MemStore, StoreFile, merge, matcher) and [`wal`]; [`mvcc`]
//! orders writes engine-wide and [`catalog`] persists schema and region boundaries.
//! [`keys`] is the row-key toolkit; salted tables ([`client::SaltedTable`]) build on it.
//! Storage knows nothing of regions; regions know nothing of clients.
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod catalog;
pub mod cell;
pub mod client;
pub mod coprocessor;
pub mod error;
pub mod filter;
pub mod fs;
pub mod keys;
pub mod mvcc;
pub mod region;
pub mod schema;
pub mod server;
pub mod storage;
pub mod varint;
pub mod wal;

pub use cell::{Cell, CellType, Timestamp, LATEST_TIMESTAMP, MAX_ROW_LENGTH};
pub use client::{
    Admin, Config, Connection, PreSplit, RecoveryRepair, RegionReport, SaltedTable, Table,
};
pub use error::{Error, Result};
pub use filter::{Comparator, Filter};
pub use region::RegionInfo;
pub use schema::salt::{HashedPart, SaltFormat, SaltHash, SaltSpec};
pub use schema::split::SplitAlgorithm;
pub use schema::{
    BloomType, ColumnFamilyDescriptor, CompactionSettings, Compression, CoprocessorDescriptor,
    FailurePolicy, KeepDeletedCells, TableDescriptor, TableName, DEFAULT_NAMESPACE,
    SYSTEM_NAMESPACE,
};
pub use server::check::{IntegrityReport, StoreFileReport};
pub use server::recovery::{RecoveryRepairOutcome, RecoveryReport};
pub use server::split::SplitPolicy;
pub use storage::storefile::{FileCheck, Finding, FindingKind};
pub use wal::{DamageAction, Durability, WalCut, WalDamage, WalRecoveryMode};
