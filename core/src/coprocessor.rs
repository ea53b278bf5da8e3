//! The hook points the engine calls for coprocessors: one small, object-safe dispatch
//! interface, [`RegionHooks`], with no-op defaults.
//!
//! Core never names a coprocessor. A table's descriptor lists coprocessors by name
//! ([`crate::schema::CoprocessorDescriptor`]); the engine asks the configured
//! [`crate::server::HooksLoader`] (`Config::coprocessor_loader`) to turn that list into one
//! `Arc<dyn RegionHooks>` per table, at open, at table creation and whenever the list
//! changes (no restart). The `basalt-coprocessors` crate implements both with a host that
//! chains many observers in priority order and applies their failure policies.
//!
//! Where the engine calls each hook (`server/hooks.rs` and `server/write.rs`):
//! - `pre_put` / `pre_delete`: before validation and before any row lock; may change the
//!   mutation or bypass it (the operation then succeeds without writing it).
//! - `pre_batch_mutate`: once per region of a write, under the rows' locks, before the
//!   sequence id and the WAL append; may veto single operations and add mutations to this
//!   or other tables that commit in the same atomic unit (one WAL record, one MVCC
//!   transaction): see [`MiniBatch`].
//! - `post_batch_mutate`: once per region of a write, after the MemStore insert and before
//!   the write becomes visible (the MVCC read point has not passed it; the row locks are
//!   held).
//! - `post_batch`: once per region of a write whose `pre_batch_mutate` ran, always, with the
//!   outcome (`Ok`, or the error the write failed with), after the write is visible and
//!   before the row locks are released.
//! - `post_put` / `post_delete`: after the write is visible and the row locks are released.
//! - `pre_get` / `post_get`: around a get (and a batch's gets); `pre_get` may supply the
//!   result and bypass the read, `post_get` may change the result.
//! - `pre_exists` / `post_exists`: around `exists` (which does not run the get hooks, as
//!   HBase's `preExists`/`postExists`); `pre_exists` may supply the answer and bypass the
//!   read, `post_exists` may change it.
//! - `pre_increment` / `pre_append` / `pre_check_and_mutate`: before validation and before
//!   the row lock; may change the operation, or supply the result and bypass it.
//!   `post_increment` / `post_append` / `post_check_and_mutate`: after the write is visible
//!   and the row lock released; may change the result. An increment or append, once its new
//!   values are read under the row lock, runs the batch hooks as a put of those values at
//!   their resolved timestamps (so an index sees it like any put); a check-and-mutate whose
//!   condition passes runs them for its mutations. A touch ([`crate::client::Put::touch`])
//!   writes nothing itself and only runs the batch hooks for its row.
//!
//! Mutations a batch hook adds never run hooks themselves, in any table (no pre/post hooks
//! of the target table, no recursion): they are part of the batch that added them.
//! - Lifecycle hooks (region open and close, scanners, flush, compaction, split, WAL
//!   replay): `crate::server::lifecycle` lists where each is called.
//!
//! Engine-wide hooks on table operations and the WAL are a separate interface,
//! [`EngineHooks`] (`Config::observer`); system-wide region coprocessors
//! (`Config::system_coprocessors`) join every user table's chain.
//!
//! Invariants: a table with no coprocessors has no hooks object, and the engine checks that
//! `Option` first, so its operations allocate nothing for hooks; the engine holds row locks
//! only through guards, so a hook that fails, panics or is cancelled never leaves one held.
//! Implementations must not panic through these methods if they want the failure policy
//! applied: the engine itself does not catch panics (the host in `basalt-coprocessors` does).

use crate::error::{Error, Result};
use crate::ops::{Append, CheckAndMutate, Delete, Get, Increment, Mutation, Put, RowResult, Scan};
use crate::region::{PreparedCell, Region, RegionInfo};
use crate::schema::TableName;
use crate::wal::WalEdit;
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;

/// Whether the engine goes on with an operation after a pre-hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flow {
    /// Carry on with the operation.
    #[default]
    Continue,
    /// Skip the operation: a put or delete succeeds without writing, a get returns the
    /// result the hook supplied.
    Bypass,
}

/// The reads the engine offers a hook's context ([`HookEnv`]): a row of a table, and a
/// region's row as a batch will leave it. The engine implements it, so this interface names
/// no engine type.
pub(crate) trait HookReads: Send + Sync {
    /// One row of `table` at the current read point, without running hooks.
    fn get(&self, table: &TableName, g: &Get) -> Result<RowResult>;

    /// `g`'s row of `region` as committed and as it will be once `pending` commits.
    fn get_before_after(
        &self,
        region: &Region,
        g: &Get,
        pending: &[PreparedCell],
    ) -> Result<(RowResult, RowResult)>;
}

/// What a hook sees of the engine: the table, the region the operation falls in, and
/// region-local read access.
pub struct HookEnv<'a> {
    reads: &'a dyn HookReads,
    table: &'a TableName,
    region: Arc<Region>,
}

impl std::fmt::Debug for HookEnv<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookEnv")
            .field("table", &self.table)
            .field("region", &self.region.id)
            .finish()
    }
}

impl<'a> HookEnv<'a> {
    pub(crate) fn new(reads: &'a dyn HookReads, table: &'a TableName, region: Arc<Region>) -> Self {
        HookEnv {
            reads,
            table,
            region,
        }
    }

    /// The table's name.
    pub fn table_name(&self) -> &TableName {
        self.table
    }

    /// The id of the region the operation falls in.
    pub fn region_id(&self) -> u64 {
        self.region.id
    }

    /// The region's start key (inclusive, empty for the first region).
    pub fn region_start(&self) -> &Bytes {
        &self.region.start
    }

    /// The region's end key (exclusive, empty for the last region).
    pub fn region_end(&self) -> &Bytes {
        &self.region.end
    }

    /// Facts about the region (counts and sizes: not free, it walks the region's stores).
    pub fn region_info(&self) -> RegionInfo {
        self.region.info()
    }

    /// Reads one row of this table at the current read point, without running hooks. Under
    /// the row locks (in `pre_batch_mutate`) this is the row as the batch will change it.
    pub fn get(&self, g: &Get) -> Result<RowResult> {
        self.reads.get(self.table, g)
    }

    /// Reads one row of this table as it will be once `batch`'s own operations commit (in
    /// `pre_batch_mutate`, under the row locks): the committed cells and the batch's cells
    /// go through the same read rules (delete markers, versions, TTL) as any read, so the
    /// answer is exactly what a reader will see after the commit. Vetoes and the writes
    /// hooks add are not taken into account. The row must lie in this hook's region.
    pub fn get_after(&self, batch: &MiniBatch<'_>, g: &Get) -> Result<RowResult> {
        Ok(self
            .reads
            .get_before_after(&self.region, g, batch.pending)?
            .1)
    }

    /// The row as committed ([`HookEnv::get`]) and as it will be once `batch` commits
    /// ([`HookEnv::get_after`]), from one read of the stores: `(before, after)`.
    pub fn get_before_after(
        &self,
        batch: &MiniBatch<'_>,
        g: &Get,
    ) -> Result<(RowResult, RowResult)> {
        self.reads.get_before_after(&self.region, g, batch.pending)
    }
}

/// The operations of one region's share of a write, under their row locks, as
/// `pre_batch_mutate` sees them.
#[derive(Debug)]
pub struct MiniBatch<'a> {
    ops: &'a [&'a Mutation],
    vetoes: Vec<Option<Error>>,
    extra: Vec<Mutation>,
    elsewhere: Vec<(TableName, AddedOp)>,
    absent: Vec<(TableName, Bytes)>,
    now: crate::cell::Timestamp,
    pending: &'a [PreparedCell],
}

/// A write a batch hook adds to a table by name ([`MiniBatch::add_mutation_to`],
/// [`MiniBatch::add_increment_to`]).
#[derive(Debug, Clone)]
pub enum AddedOp {
    /// A put or a delete, written as given.
    Mutation(Mutation),
    /// Adds to 8-byte big-endian counters, resolved under the row's lock when the batch
    /// commits: the new value is the latest committed value plus the amount (an absent
    /// counter counts as 0). Increments of one counter added in one batch are summed.
    Increment(Increment),
    /// A put or a delete of a row that belongs to one of the batch's own rows, written as
    /// given without a lock or a clock turn of its own ([`MiniBatch::add_owned_mutation_to`]).
    Owned(Mutation),
}

impl AddedOp {
    /// The row written.
    pub fn row(&self) -> &Bytes {
        match self {
            AddedOp::Mutation(m) | AddedOp::Owned(m) => m.row(),
            AddedOp::Increment(i) => i.row(),
        }
    }
}

impl<'a> MiniBatch<'a> {
    pub(crate) fn new(
        ops: &'a [&'a Mutation],
        now: crate::cell::Timestamp,
        pending: &'a [PreparedCell],
    ) -> Self {
        MiniBatch {
            ops,
            vetoes: ops.iter().map(|_| None).collect(),
            extra: Vec::new(),
            elsewhere: Vec::new(),
            absent: Vec::new(),
            now,
            pending,
        }
    }

    /// The batch's commit time in milliseconds: what its cells written without a timestamp
    /// get, and the writes hooks add without one too. It is the wall clock, strictly above
    /// the commit time of every earlier hooked write of the same rows - the batch's own and
    /// the rows its hooks add to (the batch waits for the next millisecond, or runs again,
    /// when needed) - so a row deleted by one batch and written again by the next is never
    /// masked by the delete.
    pub fn now(&self) -> crate::cell::Timestamp {
        self.now
    }

    /// Requires `row` of `table` to be absent when the batch commits: the row is locked
    /// with the added writes' rows and read under that lock; if it has any visible cell the
    /// whole batch fails with [`Error::UniqueViolation`] and nothing is written (what a
    /// unique index checks before it writes its row). Writes of the same batch to that row
    /// do not count.
    pub fn require_absent_in(&mut self, table: TableName, row: Bytes) {
        self.absent.push((table, row));
    }

    /// The rows required absent so far ([`MiniBatch::require_absent_in`]).
    pub fn required_absent(&self) -> &[(TableName, Bytes)] {
        &self.absent
    }

    /// How many operations the batch holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Operation `i` (None past the end).
    pub fn operation(&self, i: usize) -> Option<&Mutation> {
        self.ops.get(i).copied()
    }

    /// Every operation, in order.
    pub fn operations(&self) -> impl Iterator<Item = &Mutation> + '_ {
        self.ops.iter().copied()
    }

    /// The durability operation `i` asked for (None past the end). The batch is logged as
    /// one WAL record with the strongest durability of its operations that are written and
    /// of the writes its hooks add ([`MiniBatch::add_mutation_to`]): an added write that
    /// should share its cause's fate (an index row, a derived row) takes its cause's
    /// durability, so that a `SkipWal` or `AsyncWal` write stays one, and a lost write loses
    /// what was derived from it too.
    pub fn durability(&self, i: usize) -> Option<crate::wal::Durability> {
        self.ops.get(i).map(|m| m.durability())
    }

    /// Refuses operation `i` with `why`: it is not written and its caller gets `why` (for
    /// an atomic put, delete or row mutation, the whole operation fails). An index past the
    /// end is ignored.
    pub fn veto(&mut self, i: usize, why: Error) {
        if let Some(slot) = self.vetoes.get_mut(i) {
            *slot = Some(why);
        }
    }

    /// True when operation `i` has been vetoed.
    pub fn is_vetoed(&self, i: usize) -> bool {
        self.vetoes.get(i).is_some_and(Option::is_some)
    }

    /// Adds a mutation of any row of this table that commits atomically with the batch
    /// (both visible or neither, after a crash too). The row is locked for the batch as
    /// [`MiniBatch::add_mutation_to`] says. An invalid added mutation fails the whole batch
    /// with [`Error::InvalidAddedMutation`], writing nothing.
    pub fn add_mutation(&mut self, m: Mutation) {
        self.extra.push(m);
    }

    /// The mutations added so far to this table by [`MiniBatch::add_mutation`].
    pub fn added(&self) -> &[Mutation] {
        &self.extra
    }

    /// Adds a put or delete of a row of `table` (another table, or this one) that commits
    /// atomically with the batch: one WAL record and one MVCC sequence id for everything,
    /// so after a crash either all of it is there or none. It is checked against `table`'s
    /// schema before anything is written: an unknown or disabled table, an unknown family,
    /// a bad row or a too large value fails the whole batch with
    /// [`Error::InvalidAddedMutation`]. It does not run `table`'s own coprocessors.
    ///
    /// Row locks: after every hook of the batch ran, the batch also locks the rows it adds
    /// to (it keeps the rows it holds). When such a lock would be taken out of the engine's
    /// lock order and another writer holds it, the batch writes nothing, gives up all its
    /// locks, locks its own rows and the added ones together in order and runs its hooks
    /// again (they may then add other writes); so two batches adding to each other's rows
    /// both commit, without waiting for a timeout. After 16 such retries it waits out of
    /// order for at most `Config::row_lock_wait_ms` and then fails with
    /// [`Error::RowLockTimeout`], having written nothing.
    pub fn add_mutation_to(&mut self, table: TableName, m: Mutation) {
        self.elsewhere.push((table, AddedOp::Mutation(m)));
    }

    /// [`MiniBatch::add_mutation_to`] for a row that belongs to one of this batch's own
    /// rows: the caller promises that only writes holding that row's lock ever write it, as
    /// with a non-unique index row, whose key ends with its data row's key and which only
    /// the data row's writes (maintained under the data row's lock) put or delete. The write
    /// is validated and committed atomically with the batch as an added mutation is, but it
    /// takes no row lock of its own (the owner's lock already orders every write to it) and
    /// no turn of the hooked-write clock (the owner's turn gives each of its writes a later
    /// timestamp than the one before). A row that other writers may also write must use
    /// [`MiniBatch::add_mutation_to`]: without the lock, two such writes could interleave.
    pub fn add_owned_mutation_to(&mut self, table: TableName, m: Mutation) {
        self.elsewhere.push((table, AddedOp::Owned(m)));
    }

    /// Adds counter increments of a row of `table` (another table, or this one) that commit
    /// atomically with the batch, resolved under that row's lock (see [`AddedOp::Increment`]
    /// and [`MiniBatch::add_mutation_to`] for validation and locking). A cell that is not an
    /// 8-byte counter fails the batch with [`Error::InvalidAddedMutation`].
    pub fn add_increment_to(&mut self, table: TableName, inc: Increment) {
        self.elsewhere.push((table, AddedOp::Increment(inc)));
    }

    /// The writes added so far by [`MiniBatch::add_mutation_to`] and
    /// [`MiniBatch::add_increment_to`], in order.
    pub fn added_elsewhere(&self) -> &[(TableName, AddedOp)] {
        &self.elsewhere
    }

    /// Marks the current state, so that [`MiniBatch::rollback`] can undo what one
    /// coprocessor did (the host drops a failed coprocessor's vetoes and additions).
    pub fn savepoint(&self) -> Savepoint {
        Savepoint {
            added: self.extra.len(),
            elsewhere: self.elsewhere.len(),
            absent: self.absent.len(),
            vetoed: self.vetoes.iter().map(Option::is_some).collect(),
        }
    }

    /// Undoes every veto and addition made since `sp`.
    pub fn rollback(&mut self, sp: Savepoint) {
        self.extra.truncate(sp.added);
        self.elsewhere.truncate(sp.elsewhere);
        self.absent.truncate(sp.absent);
        for (slot, was) in self.vetoes.iter_mut().zip(sp.vetoed) {
            if !was {
                *slot = None;
            }
        }
    }

    pub(crate) fn into_parts(self) -> MiniBatchParts {
        (self.vetoes, self.extra, self.elsewhere, self.absent)
    }
}

/// What a [`MiniBatch`] ends with: vetoes, writes added to its table, writes added by name,
/// rows required absent.
pub(crate) type MiniBatchParts = (
    Vec<Option<Error>>,
    Vec<Mutation>,
    Vec<(TableName, AddedOp)>,
    Vec<(TableName, Bytes)>,
);

/// A mark in a [`MiniBatch`]'s history (see [`MiniBatch::savepoint`]).
#[derive(Debug, Clone)]
pub struct Savepoint {
    added: usize,
    elsewhere: usize,
    absent: usize,
    vetoed: Vec<bool>,
}

/// A write-path hook that [`RegionHooks::skips`] can rule out before the engine prepares
/// its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationHook {
    /// `pre_put`.
    PrePut,
    /// `post_put`.
    PostPut,
    /// `pre_delete`.
    PreDelete,
    /// `post_delete`.
    PostDelete,
    /// `post_batch_mutate`.
    PostBatchMutate,
    /// `post_batch`.
    PostBatch,
}

/// The hooks the engine calls on a table's operations; every method defaults to a no-op.
/// See the module doc for where each is called and what it may do. An error from a hook
/// fails the operation with that error (a post-hook's error after the write committed).
#[async_trait]
pub trait RegionHooks: Send + Sync + std::fmt::Debug {
    /// True when a write of puts (`puts`) and/or deletes (`deletes`) would run nothing in
    /// any of its hooks (`pre_put`/`post_put`, `pre_delete`/`post_delete` as asked, and
    /// `pre_batch_mutate`, `post_batch_mutate`, `post_batch`): the engine then writes as for
    /// a table without coprocessors. Must only answer true when skipping every one of those
    /// calls changes nothing. Defaults to false.
    fn skips_mutation_hooks(&self, _puts: bool, _deletes: bool) -> bool {
        false
    }
    /// True when `hook` would run nothing (every coprocessor's body for it is known to be
    /// the trait's no-op default): the engine then does not call it, nor build what the
    /// call needs (the region of the row, a batch's grouping by region). Must only answer
    /// true when skipping the call changes nothing. Defaults to false.
    fn skips(&self, _hook: MutationHook) -> bool {
        false
    }
    /// Before a put; may change it or bypass it.
    async fn pre_put(&self, _env: &HookEnv<'_>, _put: &mut Put) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a put is visible.
    async fn post_put(&self, _env: &HookEnv<'_>, _put: &Put) -> Result<()> {
        Ok(())
    }
    /// Before a delete; may change it or bypass it.
    async fn pre_delete(&self, _env: &HookEnv<'_>, _delete: &mut Delete) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a delete is visible.
    async fn post_delete(&self, _env: &HookEnv<'_>, _delete: &Delete) -> Result<()> {
        Ok(())
    }
    /// Before a get; may change it, or fill `result` and bypass the read.
    async fn pre_get(
        &self,
        _env: &HookEnv<'_>,
        _get: &mut Get,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a get; may change the result.
    async fn post_get(
        &self,
        _env: &HookEnv<'_>,
        _get: &Get,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }
    /// Under the row locks, before the WAL append; may veto operations and add mutations.
    /// An error fails every operation of the batch and writes nothing.
    async fn pre_batch_mutate(&self, _env: &HookEnv<'_>, _batch: &mut MiniBatch<'_>) -> Result<()> {
        Ok(())
    }

    // Exists, increment, append, check-and-mutate and the later batch hooks.

    /// Before `exists` (instead of the get hooks); may change the get, or set `exists` and
    /// bypass the read.
    async fn pre_exists(
        &self,
        _env: &HookEnv<'_>,
        _get: &mut Get,
        _exists: &mut bool,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After `exists`; may change the answer.
    async fn post_exists(&self, _env: &HookEnv<'_>, _get: &Get, _exists: &mut bool) -> Result<()> {
        Ok(())
    }
    /// Before an increment, outside the row lock; may change it, or fill `result` and bypass
    /// it (nothing is written; the caller gets `result`).
    async fn pre_increment(
        &self,
        _env: &HookEnv<'_>,
        _inc: &mut Increment,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After an increment is visible; may change the result.
    async fn post_increment(
        &self,
        _env: &HookEnv<'_>,
        _inc: &Increment,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }
    /// Before an append, outside the row lock; may change it, or fill `result` and bypass it.
    async fn pre_append(
        &self,
        _env: &HookEnv<'_>,
        _append: &mut Append,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After an append is visible; may change the result.
    async fn post_append(
        &self,
        _env: &HookEnv<'_>,
        _append: &Append,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }
    /// Before a check-and-mutate, outside the row lock; may change it, or set `passed` and
    /// bypass it (nothing is checked or written; the caller gets `passed`).
    async fn pre_check_and_mutate(
        &self,
        _env: &HookEnv<'_>,
        _cam: &mut CheckAndMutate,
        _passed: &mut bool,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a check-and-mutate (its write visible if the check passed); may change the
    /// answer.
    async fn post_check_and_mutate(
        &self,
        _env: &HookEnv<'_>,
        _cam: &CheckAndMutate,
        _passed: &mut bool,
    ) -> Result<()> {
        Ok(())
    }
    /// After the region's share of a write (`ops`, vetoed ones left out) is in the MemStore,
    /// before it is visible: readers, this hook's own included, do not see it yet; the row
    /// locks are held and the engine-wide read point waits for this hook, so keep it short
    /// and never write through the engine here (that write would wait for this one). An
    /// error is returned to the caller, but the write stays committed (it is in the WAL).
    async fn post_batch_mutate(&self, _env: &HookEnv<'_>, _ops: &[&Mutation]) -> Result<()> {
        Ok(())
    }
    /// Always called, once per region, after a write whose `pre_batch_mutate` ran: with
    /// `Ok` once the write is visible, or with the error it failed with (from
    /// `pre_batch_mutate`, a veto, an invalid added mutation, a lock timeout, the WAL ...).
    /// `ops` are the operations the write tried (after vetoes; a batch whose operations were
    /// all vetoed writes nothing, its added writes included, and has no call). Row locks are
    /// still held.
    /// An error from this hook fails a successful call (the write stays committed) and is
    /// dropped after a failed one.
    async fn post_batch(
        &self,
        _env: &HookEnv<'_>,
        _ops: &[&Mutation],
        _outcome: &Result<()>,
    ) -> Result<()> {
        Ok(())
    }

    // Region lifecycle, scanner, flush, compaction, split and WAL-replay hooks (the module
    // doc says where each is called). Notifications (`post_open`, the close,
    // flush and `post_*` hooks) cannot stop what they report: the engine logs their errors.
    /// After a region is open and readable (engine open, table create or enable, split
    /// daughters, merge result).
    async fn post_open(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// Before a region closes (engine close, table disable, split or merge parent).
    async fn pre_close(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// After a region closed.
    async fn post_close(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// Before a scan plans its regions; may change the scan. An error fails the scan.
    async fn pre_scanner_open(&self, _env: &HookEnv<'_>, _scan: &mut Scan) -> Result<()> {
        Ok(())
    }
    /// After a batch of rows (all of one region, `env`'s) is read and before the caller
    /// sees it; may change, drop or add rows. An error fails the scan.
    async fn post_scanner_next(
        &self,
        _env: &HookEnv<'_>,
        _rows: &mut Vec<RowResult>,
    ) -> Result<()> {
        Ok(())
    }
    /// When a scan opened with `pre_scanner_open` ends: at its end, on its error, or when
    /// the stream is dropped early (then on a background task).
    async fn post_scanner_close(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// Before a store's MemStore is flushed.
    async fn pre_flush(&self, _env: &HookEnv<'_>, _family: &Bytes) -> Result<()> {
        Ok(())
    }
    /// After a store's MemStore was flushed (its cells are in a store file).
    async fn post_flush(&self, _env: &HookEnv<'_>, _family: &Bytes) -> Result<()> {
        Ok(())
    }
    /// After the engine chose a compaction's input files; may remove files (what is left
    /// must be a contiguous run of the candidates). An error fails the compaction.
    async fn pre_compact_selection(
        &self,
        _env: &HookEnv<'_>,
        _selection: &mut CompactionSelection,
    ) -> Result<()> {
        Ok(())
    }
    /// After the selection is final.
    async fn post_compact_selection(
        &self,
        _env: &HookEnv<'_>,
        _selection: &CompactionSelection,
    ) -> Result<()> {
        Ok(())
    }
    /// Before the inputs are merged; may add cell transforms that see, change or drop every
    /// cell written. An error fails the compaction (the files stay as they were).
    async fn pre_compact(
        &self,
        _env: &HookEnv<'_>,
        _request: &mut CompactionRequest,
    ) -> Result<()> {
        Ok(())
    }
    /// After a compaction committed.
    async fn post_compact(
        &self,
        _env: &HookEnv<'_>,
        _family: &Bytes,
        _outcome: &CompactionOutcome,
    ) -> Result<()> {
        Ok(())
    }
    /// Before a region splits at `split_row` (the parent is flushed and takes no write).
    /// `Bypass` vetoes the split (the region stays whole); an error fails it.
    async fn pre_split(&self, _env: &HookEnv<'_>, _split_row: &Bytes) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a split: `env` is the retired parent, `lower` and `upper` the daughters.
    async fn post_split(
        &self,
        _env: &HookEnv<'_>,
        _lower: &RegionInfo,
        _upper: &RegionInfo,
    ) -> Result<()> {
        Ok(())
    }
    /// At recovery, before one replayed WAL record's edits of `env`'s region are applied;
    /// `Bypass` skips them.
    async fn pre_wal_restore(
        &self,
        _env: &HookEnv<'_>,
        _seq: u64,
        _edits: &[WalEdit],
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// At recovery, after one replayed WAL record's edits of `env`'s region were applied.
    async fn post_wal_restore(
        &self,
        _env: &HookEnv<'_>,
        _seq: u64,
        _edits: &[WalEdit],
    ) -> Result<()> {
        Ok(())
    }
}

/// A table's hooks, swapped whole when its coprocessor list changes. Reading it when the
/// table has none is one atomic load: no lock, no allocation, no shared-cache-line write.
#[derive(Debug, Default)]
pub struct HookSlot {
    any: std::sync::atomic::AtomicBool,
    hooks: parking_lot::RwLock<Option<Arc<dyn RegionHooks>>>,
}

impl HookSlot {
    /// A slot holding `hooks`.
    pub fn new(hooks: Option<Arc<dyn RegionHooks>>) -> Self {
        let slot = HookSlot::default();
        slot.set(hooks);
        slot
    }

    /// The current hooks, if any.
    pub fn get(&self) -> Option<Arc<dyn RegionHooks>> {
        if !self.any.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        self.hooks.read().clone()
    }

    /// Replaces the hooks; operations that already hold the old ones finish with them.
    pub fn set(&self, hooks: Option<Arc<dyn RegionHooks>>) {
        let mut slot = self.hooks.write();
        self.any
            .store(hooks.is_some(), std::sync::atomic::Ordering::Release);
        *slot = hooks;
    }
}

// Types of the lifecycle hooks: compaction selection and cell transforms, and the engine
// observer interface.
pub use lifecycle_types::*;
mod lifecycle_types;
