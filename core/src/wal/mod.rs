//! The write-ahead log: one per engine, shared by every region (as a region server's WAL).
//!
//! Every write batch becomes one [`WalRecord`] holding all its cells, across regions and
//! families, so a batch recovers atomically: it is replayed whole or not at all. The engine
//! appends records in sequence-id order while holding its commit lock, then waits on the
//! returned [`WalTicket`] as the batch's [`Durability`] asks. Appends queue their record in
//! append order (so file order equals append order); a `SyncWal` or `FsyncWal` waiter that
//! finds nobody writing writes the whole queue with one write (group commit: concurrent
//! batches share the system call), the others wait for it without blocking their threads;
//! `FsyncWal` waiters group-commit with one fsync per leader; `AsyncWal` records are written
//! by a background flusher (or by the next writer).
//!
//! On disk the WAL is a directory of segments `wal-{id:020}.log`, rolled by size. The formats
//! are specified in the `segment` (file header) and `record` (framing and payload) module
//! docs; recovery rules in the `recovery` module doc. A segment is deleted by
//! [`Wal::purge_up_to`] once every region has flushed past its last sequence id.
//!
//! Files: `handle.rs` ([`Wal`], [`WalTicket`]), `writer.rs` (writes, group commit, flusher),
//! `record.rs` (codec), `segment.rs` (segment files), `recovery.rs` (replay at open).

mod handle;
mod record;
mod recovery;
mod segment;
mod writer;

#[cfg(test)]
mod tests;

pub use handle::{Wal, WalTicket};
pub(crate) use record::{EditRef, UnsealedFrame};

use crate::cell::StoreCell;
use bytes::Bytes;
use std::path::PathBuf;

/// How durable a write must be before it is acknowledged (HBase's `Durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Durability {
    /// Not written to the WAL at all: lost if the process dies before a flush.
    SkipWal,
    /// Written to the OS in the background; the write is acknowledged without waiting.
    AsyncWal,
    /// Acknowledged once written to the OS: survives a process crash, not a power loss.
    #[default]
    SyncWal,
    /// Acknowledged once fsynced: survives a power loss.
    FsyncWal,
}

/// One cell of a batch, with the region and family it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalEdit {
    /// The region the cell belongs to.
    pub region_id: u64,
    /// The column family (store) the cell belongs to.
    pub family: Bytes,
    /// The cell; `cell.key.seq` equals the record's `seq`.
    pub cell: StoreCell,
}

/// One atomic batch: every edit of one write, under one sequence id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// The batch's sequence id.
    pub seq: u64,
    /// The batch's cells.
    pub edits: Vec<WalEdit>,
}

/// A function told of every segment roll: `(closed id, new id)`. It runs under the WAL's
/// writer lock and must not append to the WAL.
pub type RollListener = Box<dyn Fn(u64, u64) + Send + Sync>;

/// WAL settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalOptions {
    /// A segment is rolled once a write makes it at least this large (default 64 MiB).
    pub segment_size: u64,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_size: 64 << 20,
        }
    }
}

/// A live segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The segment id; ids grow with time.
    pub id: u64,
    /// The file.
    pub path: PathBuf,
    /// The largest sequence id written to it; `None` while it holds no record.
    pub max_seq: Option<u64>,
    /// The bytes written to it (header included).
    pub size: u64,
}
