//! The one error type of Basalt.
//!
//! Every fallible public call returns [`Result<T>`]; callers match on [`Error`]'s variants.
//! Bad input is reported before any state changes, so an error never leaves a partial write.
//! An error crosses a network as its serializable mirror, [`ErrorWire`] (module `wire`).

use std::path::PathBuf;

mod wire;

pub use wire::ErrorWire;

#[cfg(test)]
mod tests;

/// Result alias used throughout Basalt.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Basalt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The named table does not exist.
    #[error("table not found: {0}")]
    TableNotFound(String),
    /// The table already exists.
    #[error("table already exists: {0}")]
    TableExists(String),
    /// No table snapshot of that name exists.
    #[error("snapshot not found: {0}")]
    SnapshotNotFound(String),
    /// A table snapshot of that name exists already.
    #[error("snapshot already exists: {0}")]
    SnapshotExists(String),
    /// The table is disabled; it refuses reads and writes until enabled.
    #[error("table is disabled: {0}")]
    TableDisabled(String),
    /// The table is enabled but the operation needs it disabled (or the reverse).
    #[error("table {table} is not in the expected state: {expected}")]
    TableState {
        /// The table.
        table: String,
        /// What state the operation expected.
        expected: &'static str,
    },
    /// The table has no region with this id (any more: a split or merge replaces ids).
    #[error("table {table} has no region {id}")]
    RegionNotFound {
        /// The table.
        table: String,
        /// The region id asked for.
        id: u64,
    },
    /// The region is offline: a store file it lists is missing or cannot be opened. Every
    /// other region and table serves; `Admin::offline_regions` lists it, and the offline
    /// repair (`basalt_core::repair::repair_dir`) sets the file aside so that it
    /// opens again.
    #[error("region {region} of table {table} is offline: {} {reason}", .file.display())]
    RegionOffline {
        /// The table.
        table: String,
        /// The region's id.
        region: u64,
        /// The store file at fault.
        file: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Another engine of the shared store serves the region (HBase's
    /// `NotServingRegionException`): this engine opened other regions
    /// (`Config::serve_regions`). Ask the engine that serves it.
    #[error("region {region} of table {table} is not served by this engine")]
    RegionNotServed {
        /// The table.
        table: String,
        /// The region's id.
        region: u64,
    },
    /// The namespace does not exist.
    #[error("namespace not found: {0}")]
    NamespaceNotFound(String),
    /// The namespace already exists.
    #[error("namespace already exists: {0}")]
    NamespaceExists(String),
    /// The column family is not declared in the table.
    #[error("column family {family:?} not found in table {table}")]
    FamilyNotFound {
        /// The table.
        table: String,
        /// The family, lossily decoded as UTF-8.
        family: String,
    },
    /// The row key is empty or longer than [`crate::MAX_ROW_LENGTH`] bytes.
    #[error("invalid row key: {0}")]
    InvalidRow(String),
    /// A value is larger than the engine's configured limit.
    #[error("value of {size} bytes exceeds the limit of {limit} bytes")]
    ValueTooLarge {
        /// The value's size.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// An argument is malformed (bad name, bad setting, bad range).
    #[error("bad argument: {0}")]
    BadArgument(String),
    /// An increment met a cell that is not an 8-byte big-endian counter.
    #[error("cell {column} holds {len} bytes; a counter must hold exactly 8")]
    NotACounter {
        /// The column, as `family:qualifier`.
        column: String,
        /// The cell's length.
        len: usize,
    },
    /// An I/O error from the operating system.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A file's bytes do not match their checksum or their format.
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption {
        /// The file.
        file: PathBuf,
        /// The byte offset of the bad data.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The WAL is damaged where the recovery mode does not accept it: a bad record other
    /// than the newest segment's tail, or a cut that would leave some table's store files
    /// holding writes newer than the cut (not a point in time). Nothing on disk was
    /// changed; open again with another [`crate::wal::WalRecoveryMode`], or repair.
    #[error("WAL damaged in {segment} at offset {offset}: {reason}{}", tables_note(.tables))]
    WalCorruption {
        /// The segment file.
        segment: PathBuf,
        /// The byte offset of the damage.
        offset: u64,
        /// What is wrong.
        reason: String,
        /// The tables whose store files hold writes newer than the cut (empty when the
        /// damage itself is refused).
        tables: Vec<String>,
    },
    /// The engine refuses writes after a failure it cannot recover from without reopening.
    #[error("engine refuses writes until reopened: {0}")]
    WritesRefused(String),
    /// The engine is closed.
    #[error("engine is closed")]
    Closed,
    /// Another party fenced this engine's WAL writer by creating the writer's next segment
    /// (it took over the engine's regions): the write was not acknowledged, and every
    /// later write fails the same way until the engine is reopened.
    #[error("WAL writer {writer} was fenced at segment {segment}: another engine took over")]
    Fenced {
        /// The fenced writer's folder of the object store.
        writer: String,
        /// The segment id the writer could not create.
        segment: u64,
    },
    /// A coordination lease expired or was revoked: its holder no longer owns anything and
    /// must not act for it (see `coordination`).
    #[error("lease {lease} expired or was revoked")]
    LeaseExpired {
        /// The lease's id.
        lease: u64,
    },
    /// A region is owned by another live process.
    #[error("region {region} is owned by {owner}")]
    RegionOwned {
        /// The region (`table/id`).
        region: String,
        /// The owning process's name.
        owner: String,
    },
    /// A compare-and-swap in the coordination store lost (a revision, a pointer, an owner
    /// or a generation moved): nothing was changed.
    #[error("coordination conflict: {0}")]
    CoordinationConflict(String),
    /// The engine could not take the operation in time (HBase's `RegionTooBusyException`):
    /// nothing was written, and the caller may retry later.
    #[error("engine too busy: {0}")]
    Busy(String),
    /// A coprocessor failed (returned an error, panicked or ran past its timeout) under the
    /// fail-the-operation policy, or refused an operation. The engine keeps serving.
    #[error("coprocessor {name} failed: {msg}")]
    Coprocessor {
        /// The coprocessor's registered name.
        name: String,
        /// What went wrong.
        msg: String,
    },
    /// A sandboxed plugin's call trapped, ran past its deadline or out of its memory. The
    /// coprocessor host handles it as a fault, under the attachment's failure policy; the
    /// engine keeps serving.
    #[error("plugin {name} faulted: {msg}")]
    PluginFault {
        /// The coprocessor's name (`plugin:<sha256>`).
        name: String,
        /// The trap, deadline or memory limit hit.
        msg: String,
    },
    /// No plugin with this sha256 was uploaded (`Admin::upload_plugin`).
    #[error("plugin {0} not found")]
    PluginNotFound(String),
    /// A mutation a coprocessor added to a batch (`MiniBatch::add_mutation_to` and friends)
    /// is invalid for its table (unknown or disabled table, unknown family, bad row, value
    /// too large, not a counter): the whole batch fails and nothing is written.
    #[error("a mutation a coprocessor added to table {table} is invalid: {reason}")]
    InvalidAddedMutation {
        /// The table the mutation was added to.
        table: String,
        /// Why it is invalid.
        reason: Box<Error>,
    },
    /// A batch could not take the row lock of a row a coprocessor added a mutation to within
    /// the engine's `row_lock_wait_ms` (it waited out of lock order, so it may have been a
    /// deadlock): the batch fails, nothing is written, and the caller may retry.
    #[error("row lock of {row} in table {table} not acquired within {waited_ms} ms")]
    RowLockTimeout {
        /// The table of the row.
        table: String,
        /// The row, lossily decoded as UTF-8.
        row: String,
        /// How long the batch waited.
        waited_ms: u64,
    },
    /// A write would give a unique index a second row with the same indexed values (a batch
    /// hook required an index row to be absent and found it present under its lock): the
    /// whole write fails and nothing is written.
    #[error("unique index violation: row {row} of {table} already exists")]
    UniqueViolation {
        /// The index table.
        table: String,
        /// The index row, lossily decoded as UTF-8.
        row: String,
    },
    /// The index is still being built (BUILDING) and refuses queries until it is built.
    #[error("index {0} is being built and cannot be queried yet")]
    IndexNotReady(String),
    /// A user write to an index table: only its index maintainer writes it.
    #[error("index table {0} is written only by its index maintainer")]
    IndexTableWrite(String),
    /// No index of that name exists on the table.
    #[error("index not found: {0}")]
    IndexNotFound(String),
    /// A write to a table opened read-only because coprocessors it lists are not loaded
    /// here (a tool opened the data directory without the application's coprocessors):
    /// reads work, every write fails with this error and writes nothing.
    #[error("table {table} is read-only here: its coprocessors {} are not loaded; write to it from the application that registers them", missing.join(", "))]
    ReadOnlyTable {
        /// The table.
        table: String,
        /// The coprocessors it lists that are not registered.
        missing: Vec<String>,
    },
    /// A filter string is malformed (see [`crate::filter::parse`]).
    #[error("bad filter at byte {pos}: {msg}")]
    FilterParse {
        /// Byte offset of the offending token in the filter string.
        pos: usize,
        /// What is wrong.
        msg: String,
    },
}

fn tables_note(tables: &[String]) -> String {
    if tables.is_empty() {
        String::new()
    } else {
        format!(" (tables with newer store files: {})", tables.join(", "))
    }
}

impl Error {
    /// Shorthand for [`Error::BadArgument`].
    pub fn bad_argument(msg: impl Into<String>) -> Self {
        Error::BadArgument(msg.into())
    }

    /// Shorthand for [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }
}
