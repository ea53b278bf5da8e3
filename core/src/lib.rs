//! `basalt-core`: Basalt's engine.
//!
//! Layers, bottom to top: `error`, `varint`, `cell`, `fs`, `mvcc`, `keys`, `schema`, `wal`,
//! `filter`, `ops`, `catalog`, `storage`, `region`, `coprocessor`, `server`, `client`.
//!
//! Each module uses only modules before it in that list (`tests/architecture.rs` reads the
//! sources and fails on any reference to a later one). At the bottom the value types: cells
//! and rows ([`cell`]), key ranges and row-key tools ([`keys`]), table schemas ([`schema`]),
//! filters as data ([`filter`]) and the operations a client sends ([`ops`]). Then the
//! durable pieces: the WAL ([`wal`]), the catalog ([`catalog`]) and the stores
//! ([`storage`]: MemStore, store files, merge, matcher, compaction), which know nothing of
//! regions; [`region`] (regions, stores, row locks), which knows nothing of coprocessors;
//! the coprocessor interface ([`coprocessor`]), which names no engine type; the engine
//! ([`server`]); and on top the client ([`client`]: Connection, Admin, Table, salted
//! tables). Salted tables ([`client::SaltedTable`]) build on [`keys`].
#![forbid(unsafe_code)]
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
pub mod ops;
pub mod region;
pub mod schema;
pub mod server;
pub mod storage;
pub mod varint;
pub mod wal;

pub use cell::{Cell, CellType, Timestamp, LATEST_TIMESTAMP, MAX_ROW_LENGTH};
pub use client::{Admin, Config, Connection, PreSplit, RegionReport, SaltedTable, Table};
pub use error::{Error, Result};
pub use filter::{Comparator, Filter};
pub use region::RegionInfo;
pub use schema::salt::{HashedPart, SaltFormat, SaltHash, SaltSpec};
pub use schema::split::SplitAlgorithm;
pub use schema::{
    BloomType, ColumnFamilyDescriptor, CompactionSettings, Compression, CoprocessorDescriptor,
    FailurePolicy, IntoTableName, KeepDeletedCells, TableDescriptor, TableName, DEFAULT_NAMESPACE,
    SYSTEM_NAMESPACE,
};
pub use server::check::{IntegrityReport, StoreFileReport};
pub use server::recovery::{RecoveryRepair, RecoveryRepairOutcome, RecoveryReport};
pub use server::split::SplitPolicy;
pub use storage::storefile::{FileCheck, Finding, FindingKind};
pub use wal::{DamageAction, Durability, WalCut, WalDamage, WalRecoveryMode};
