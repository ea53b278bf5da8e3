//! What the lifecycle hooks of [`super::RegionHooks`] exchange with the engine (a
//! compaction's selection and request, cell transforms), and the engine-wide observer
//! interface [`EngineHooks`] (table operations and the WAL).
//!
//! Invariants: a selection can only lose files, never gain or reorder them (the engine
//! checks what a hook left); a cell transform sees every cell a compaction writes, in
//! order, and may change its value or drop it, never its key, so the output stays sorted.

use crate::cell::StoreKey;
use crate::error::Result;
use crate::schema::{TableDescriptor, TableName};
use crate::storage::compaction::CompactionKind;
use crate::wal::WalRecord;
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;

/// One store file, as a compaction's selection hooks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFileSummary {
    /// The file's id.
    pub id: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Its cells (puts and delete markers).
    pub entries: u64,
    /// The largest sequence id in it.
    pub max_seq: u64,
}

/// The input files the engine chose for a compaction of one store, newest first.
#[derive(Debug, Clone)]
pub struct CompactionSelection {
    /// The store's family.
    pub family: Bytes,
    /// Minor or major. A major selection a hook shrinks runs as a minor compaction (a major
    /// one must see every file to drop delete markers safely).
    pub kind: CompactionKind,
    /// The candidates, newest first; a hook may remove some (what is left must be a
    /// contiguous run of the original list, and may be empty: no compaction then).
    pub files: Vec<StoreFileSummary>,
}

/// Sees every cell a compaction writes (after the engine's own filtering of deleted,
/// expired and excess versions), in key order. Runs on a blocking thread; a panic fails the
/// compaction and leaves the store's files as they were.
pub trait CellTransform: Send + Sync {
    /// Returns false to drop the cell; may change its value (a delete marker's value is
    /// empty and should stay so). Dropping a delete marker in a minor compaction can bring
    /// back the cells it masked in files outside the compaction: transforms that drop
    /// markers should do so in major compactions only.
    fn transform(&self, family: &Bytes, key: &StoreKey, value: &mut Bytes) -> bool;
}

/// A compaction about to run, as `pre_compact` sees it.
pub struct CompactionRequest {
    family: Bytes,
    kind: CompactionKind,
    files: Vec<StoreFileSummary>,
    transforms: Vec<Arc<dyn CellTransform>>,
}

impl std::fmt::Debug for CompactionRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionRequest")
            .field("family", &self.family)
            .field("kind", &self.kind)
            .field("files", &self.files)
            .field("transforms", &self.transforms.len())
            .finish()
    }
}

impl CompactionRequest {
    pub(crate) fn new(selection: CompactionSelection) -> Self {
        CompactionRequest {
            family: selection.family,
            kind: selection.kind,
            files: selection.files,
            transforms: Vec::new(),
        }
    }

    /// The store's family.
    pub fn family(&self) -> &Bytes {
        &self.family
    }

    /// Minor or major.
    pub fn kind(&self) -> CompactionKind {
        self.kind
    }

    /// The input files, newest first.
    pub fn files(&self) -> &[StoreFileSummary] {
        &self.files
    }

    /// Adds a transform; transforms run in the order added (the chain's order), a cell
    /// one of them drops is not shown to the later ones.
    pub fn add_transform(&mut self, t: Arc<dyn CellTransform>) {
        self.transforms.push(t);
    }

    /// How many transforms were added (a host rolls back a failed coprocessor's with
    /// [`CompactionRequest::truncate_transforms`]).
    pub fn transform_count(&self) -> usize {
        self.transforms.len()
    }

    /// Drops the transforms added after the first `n`.
    pub fn truncate_transforms(&mut self, n: usize) {
        self.transforms.truncate(n);
    }

    pub(crate) fn into_transforms(self) -> Vec<Arc<dyn CellTransform>> {
        self.transforms
    }
}

/// Engine-wide hooks on table operations and the WAL, set with `Config::observer`; every
/// method defaults to a no-op. The `basalt-coprocessors` crate implements it with a host
/// of `TableObserver`s and `WalObserver`s and their failure policies.
///
/// Table hooks: a `pre_*` hook runs before anything is written and may veto the operation
/// with an error (nothing changes); a `post_*` hook runs once the change is done, and its
/// error is returned to the caller although the change stays (as `post_put`).
///
/// WAL hooks are synchronous: they run on the commit path under the engine's commit lock,
/// in sequence-id order, and must be quick; they must not write to the engine.
/// `pre_wal_append` may fail the write (nothing is logged or applied);
/// `post_wal_append` sees the record after the WAL queued it (it is written to the OS before
/// the write is acknowledged, unless the write is `AsyncWal`); `post_wal_roll` runs after a segment was closed and the next opened.
#[async_trait]
pub trait EngineHooks: Send + Sync + std::fmt::Debug {
    /// Before a table is created.
    async fn pre_create_table(&self, _desc: &TableDescriptor) -> Result<()> {
        Ok(())
    }
    /// After a table was created and its regions opened.
    async fn post_create_table(&self, _desc: &TableDescriptor) -> Result<()> {
        Ok(())
    }
    /// Before a (disabled) table is deleted.
    async fn pre_delete_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// After a table was deleted.
    async fn post_delete_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// Before a table is enabled.
    async fn pre_enable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// After a table was enabled.
    async fn post_enable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// Before a table is disabled (and flushed).
    async fn pre_disable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// After a table was disabled.
    async fn post_disable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// Before a table's descriptor changes (families added, changed or removed,
    /// coprocessors changed).
    async fn pre_modify_table(&self, _old: &TableDescriptor, _new: &TableDescriptor) -> Result<()> {
        Ok(())
    }
    /// After a table's descriptor changed.
    async fn post_modify_table(
        &self,
        _old: &TableDescriptor,
        _new: &TableDescriptor,
    ) -> Result<()> {
        Ok(())
    }
    /// Before a record is appended to the WAL (its sequence id is assigned).
    fn pre_wal_append(&self, _record: &WalRecord) -> Result<()> {
        Ok(())
    }
    /// After a record was appended to the WAL.
    fn post_wal_append(&self, _record: &WalRecord) {}
    /// After the WAL closed segment `closed` and started segment `opened`.
    fn post_wal_roll(&self, _closed: u64, _opened: u64) {}
    /// True when this observer has WAL hooks: the engine calls the WAL hooks only then, so
    /// observers without them cost nothing on the commit path.
    fn observes_wal(&self) -> bool {
        false
    }
}

/// What one compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionOutcome {
    /// Files rewritten.
    pub files_in: usize,
    /// Cells read.
    pub cells_in: u64,
    /// Cells dropped.
    pub cells_dropped: u64,
}
