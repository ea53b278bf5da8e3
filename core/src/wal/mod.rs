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
//! On disk the WAL is a directory of segments `wal-{id:020}.log`, rolled by size. On an
//! object store it is a folder per writer, one segment object per group commit, created
//! create-if-absent, so a writer another engine fenced (an empty object at its next id)
//! stops with [`crate::Error::Fenced`] having acknowledged nothing more (see `segment.rs`). The formats
//! are specified in the `segment` (file header) and `record` (framing and payload) module
//! docs; recovery rules in the `recovery` module doc. A segment is deleted by
//! [`Wal::purge_up_to`] once every region has flushed past its last sequence id.
//!
//! Files: `handle.rs` ([`Wal`], [`WalTicket`]), `writer.rs` (writes, group commit; waiting for
//! writes and fsyncs and the flusher in `writer/wait.rs`), `record.rs` (codec), `segment.rs`
//! (segment files), `recovery.rs` (replay at open; `recovery/read.rs` reads a segment's
//! frames, `recovery/apply.rs` makes the planned changes).

mod handle;
mod record;
mod recovery;
mod segment;
mod writer;

#[cfg(test)]
mod tests;

pub use handle::Wal;
#[cfg(test)]
use handle::WalTicket;
pub(crate) use record::{EditRef, UnsealedFrame};
pub(crate) use segment::SegmentStore;
pub(crate) use segment::{fence, writer_folder, writer_of_object, OBJECT_ROOT};

use crate::cell::StoreCell;
use bytes::Bytes;
use std::path::PathBuf;

/// How durable a write must be before it is acknowledged (HBase's `Durability`). Ordered
/// weakest first (`SkipWal` < `AsyncWal` < `SyncWal` < `FsyncWal`): the strongest of a
/// batch's durabilities is their maximum.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Durability {
    /// Not written to the WAL at all: lost if the process dies before a flush. A write
    /// whose coprocessor hooks add writes (index rows, counters) is logged as `AsyncWal`
    /// instead: its rows live in regions that flush independently, and only one WAL record
    /// keeps them atomic across a crash (a data row never survives without its index row).
    SkipWal,
    /// Written to the OS in the background; the write is acknowledged without waiting.
    AsyncWal,
    /// Acknowledged once written to the OS: survives a process crash, not a power loss.
    #[default]
    SyncWal,
    /// Acknowledged once fsynced: survives a power loss.
    FsyncWal,
}

/// How recovery treats damage found in the WAL when the engine opens (RocksDB's WAL
/// recovery modes). Whatever the mode, the open's [`crate::RecoveryReport`]
/// lists every piece of damage and what was done about it, and an open that fails changes
/// nothing on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// The default: a torn or bad tail of the newest segment (the write a crash
    /// interrupted) is cut; damage anywhere else, or a bad record followed by good ones,
    /// fails the open with [`crate::Error::WalCorruption`], since it would lose
    /// acknowledged writes. A cut must also leave a point in time (as `PointInTime`).
    #[default]
    TolerateCorruptedTail,
    /// Replay stops at the first damage anywhere; later segments are set aside. The open
    /// succeeds only if the result is a true point in time for every table: if any store
    /// file holds a write newer than the cut, it fails with
    /// [`crate::Error::WalCorruption`] naming the segment, the offset and the tables.
    PointInTime,
    /// The user's explicit choice when the other modes refuse: bad records are skipped and
    /// every readable record after them is replayed. The result may mix writes from either
    /// side of a hole, so what derives from every table with coprocessors (its indexes)
    /// must be verified and repaired: the directory records those tables and
    /// `Connection::open_with` runs the loader's recovery repairs on them before it
    /// returns (`basalt::index::register` registers the indexes' one); the report says
    /// what was skipped and what the repairs found.
    Salvage,
}

/// What recovery did about one piece of damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamageAction {
    /// The segment was cut here; `bytes` from here to its end were dropped.
    Cut {
        /// Bytes dropped.
        bytes: u64,
    },
    /// `bytes` of bad data were skipped; reading went on after them (salvage).
    Skipped {
        /// Bytes skipped.
        bytes: u64,
    },
    /// The whole segment was set aside (renamed `.corrupt`), unread.
    SetAside {
        /// The segment's size when it was bad itself; 0 when it only followed a cut.
        bytes: u64,
    },
    /// The segment held nothing (its header was cut short) and was removed.
    Removed,
    /// No frame is bad, but records are missing: the segment ends below the seq the next
    /// segment opens with, or store files hold writes past the WAL's end.
    Lost,
}

/// One piece of damage found in the WAL at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalDamage {
    /// The segment file.
    pub segment: PathBuf,
    /// The byte offset of the damage in it.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
    /// What recovery did.
    pub action: DamageAction,
    /// Where the original file was moved (`<name>.corrupt`), if it was.
    pub moved_to: Option<PathBuf>,
}

impl std::fmt::Display for WalDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at offset {}: {} -> {:?}",
            self.segment.display(),
            self.offset,
            self.reason,
            self.action
        )?;
        if let Some(to) = &self.moved_to {
            write!(f, " (original kept as {})", to.display())?;
        }
        Ok(())
    }
}

/// Where replay stopped before the end of the WAL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalCut {
    /// The segment cut.
    pub segment: PathBuf,
    /// The offset of the cut in it.
    pub offset: u64,
    /// The largest seq read before the cut: every write a crash may have lost at the cut
    /// has a larger one.
    pub last_seq: u64,
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
    /// How damage found at open is treated.
    pub recovery: WalRecoveryMode,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_size: 64 << 20,
            recovery: WalRecoveryMode::default(),
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
