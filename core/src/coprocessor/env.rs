//! What a hook sees of the engine and of a write: [`HookEnv`] (the table, the region the
//! operation falls in, and reads without hooks) and [`MiniBatch`] (a region's share of a
//! write under its row locks, as `pre_batch_mutate` sees it: vetoes, added writes, rows
//! required absent, savepoints).
//!
//! Invariants kept: the engine's reads reach a hook only through [`HookReads`], so this
//! interface names no engine type; a batch's vetoes and additions are only recorded here
//! (the engine applies them), and [`MiniBatch::rollback`] undoes exactly what was done since
//! its [`Savepoint`].

use crate::error::{Error, Result};
use crate::ops::{Get, Increment, Mutation, RowResult};
use crate::region::{PreparedCell, Region, RegionInfo};
use crate::schema::TableName;
use bytes::Bytes;
use std::sync::Arc;

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

    /// The same reads, held past the current call ([`HookEnv::reader`]); `None` from
    /// readers that cannot be held.
    fn owned(&self) -> Option<Arc<dyn HookReads>> {
        None
    }
}

/// Reads of one region's rows as committed, held past a hook call's borrow (a sandboxed
/// plugin's host functions keep one for the call): [`HookEnv::reader`].
#[derive(Clone)]
pub struct RegionReader {
    reads: Arc<dyn HookReads>,
    table: TableName,
    region: Arc<Region>,
}

impl std::fmt::Debug for RegionReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionReader")
            .field("table", &self.table)
            .field("region", &self.region.id)
            .finish()
    }
}

impl RegionReader {
    /// The region's id, start and end keys.
    pub fn region_info(&self) -> RegionInfo {
        self.region.info()
    }

    /// One row of the region at the current read point, without running hooks; a row
    /// outside the region is [`Error::BadArgument`].
    pub fn get(&self, g: &Get) -> Result<RowResult> {
        let row = g.row.as_ref();
        let inside = row >= self.region.start.as_ref()
            && (self.region.end.is_empty() || row < self.region.end.as_ref());
        if !inside {
            return Err(Error::bad_argument(format!(
                "row {:?} is outside region {}",
                String::from_utf8_lossy(row),
                self.region.id
            )));
        }
        self.reads.get(&self.table, g)
    }
}

/// What a hook sees of the engine: the table, the region the operation falls in, and
/// region-local read access.
pub struct HookEnv<'a> {
    reads: &'a dyn HookReads,
    table: &'a TableName,
    /// Borrowed when the caller holds the region already (a post-hook in the region its
    /// pre-hook ran in): no reference count taken on a line every writer shares.
    region: std::borrow::Cow<'a, Arc<Region>>,
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
            region: std::borrow::Cow::Owned(region),
        }
    }

    /// An environment in `region`, which the caller holds.
    pub(crate) fn borrowed(
        reads: &'a dyn HookReads,
        table: &'a TableName,
        region: &'a Arc<Region>,
    ) -> Self {
        HookEnv {
            reads,
            table,
            region: std::borrow::Cow::Borrowed(region),
        }
    }

    /// Reads of this region held past the call ([`RegionReader`]); `None` where the
    /// engine cannot lend them (never for a table's write hooks).
    pub fn reader(&self) -> Option<RegionReader> {
        Some(RegionReader {
            reads: self.reads.owned()?,
            table: self.table.clone(),
            region: Arc::clone(&self.region),
        })
    }

    /// The table's name.
    pub fn table_name(&self) -> &TableName {
        self.table
    }

    region_accessors!();

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
    /// Operations replaced by a mutation in `extra` ([`MiniBatch::replace`]).
    replaced: Vec<bool>,
    extra: Vec<Mutation>,
    elsewhere: Vec<(TableName, AddedOp)>,
    absent: Vec<(TableName, Bytes, Option<RowOwner>)>,
    local_absent: Vec<(Bytes, Option<RowOwner>)>,
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
            replaced: ops.iter().map(|_| false).collect(),
            extra: Vec::new(),
            elsewhere: Vec::new(),
            absent: Vec::new(),
            local_absent: Vec::new(),
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
        self.absent.push((table, row, None));
    }

    /// [`MiniBatch::require_absent_in`] that also passes when the row is `owner`'s: what
    /// a unique index checks when a data row (re)writes its index row, which must be absent
    /// or already that data row's, never another's.
    pub fn require_absent_or_owned_in(&mut self, table: TableName, row: Bytes, owner: RowOwner) {
        self.absent.push((table, row, Some(owner)));
    }

    /// The rows required absent so far ([`MiniBatch::require_absent_in`]), with the owner
    /// each may already have.
    pub fn required_absent(&self) -> &[(TableName, Bytes, Option<RowOwner>)] {
        &self.absent
    }

    /// Requires local row `row` of this table ([`crate::keys::local`], keyed with the start
    /// of the region the hook runs in) to be absent when the batch commits, as
    /// [`MiniBatch::require_absent_in`] does for a row of its own (what a region-local
    /// unique index checks). A split or merge may move the row meanwhile, so the check
    /// reads it, re-keyed, in the region that holds its owner at commit, under a lock on its
    /// key without a region start: every writer racing for it, before or after a split,
    /// takes that same lock.
    pub fn require_local_absent(&mut self, row: Bytes) {
        self.local_absent.push((row, None));
    }

    /// [`MiniBatch::require_local_absent`] that also passes when the row is `owner`'s (see
    /// [`MiniBatch::require_absent_or_owned_in`]).
    pub fn require_local_absent_or_owned(&mut self, row: Bytes, owner: RowOwner) {
        self.local_absent.push((row, Some(owner)));
    }

    /// The local rows required absent so far ([`MiniBatch::require_local_absent`]), with
    /// the owner each may already have.
    pub fn required_local_absent(&self) -> &[(Bytes, Option<RowOwner>)] {
        &self.local_absent
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
    pub fn operations(&self) -> impl ExactSizeIterator<Item = &Mutation> + '_ {
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

    /// Writes `m` instead of operation `i`: `i` succeeds for its caller, but its own cells
    /// are not written; `m`, which must be a mutation of the same row, commits with the
    /// batch in its place (in an atomic row mutation, replacing is refused with
    /// [`Error::BadArgument`] when the batch commits). Fails with [`Error::BadArgument`]
    /// for an index past the end or another row.
    pub fn replace(&mut self, i: usize, m: Mutation) -> Result<()> {
        let Some(op) = self.ops.get(i) else {
            return Err(Error::bad_argument(format!(
                "no operation {i} in a batch of {}",
                self.ops.len()
            )));
        };
        if op.row() != m.row() {
            return Err(Error::bad_argument(
                "a replacement must be a mutation of the same row",
            ));
        }
        if let Some(slot) = self.replaced.get_mut(i) {
            *slot = true;
        }
        self.extra.push(m);
        Ok(())
    }

    /// True when operation `i` has been replaced ([`MiniBatch::replace`]).
    pub fn is_replaced(&self, i: usize) -> bool {
        self.replaced.get(i).copied().unwrap_or(false)
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
            local_absent: self.local_absent.len(),
            vetoed: self.vetoes.iter().map(Option::is_some).collect(),
            replaced: self.replaced.clone(),
        }
    }

    /// Undoes every veto and addition made since `sp`.
    pub fn rollback(&mut self, sp: Savepoint) {
        self.extra.truncate(sp.added);
        self.elsewhere.truncate(sp.elsewhere);
        self.absent.truncate(sp.absent);
        self.local_absent.truncate(sp.local_absent);
        for (slot, was) in self.vetoes.iter_mut().zip(sp.vetoed) {
            if !was {
                *slot = None;
            }
        }
        self.replaced = sp.replaced;
    }

    pub(crate) fn into_parts(self) -> MiniBatchParts {
        (
            self.vetoes,
            self.replaced,
            self.extra,
            self.elsewhere,
            self.absent,
            self.local_absent,
        )
    }
}

/// What a [`MiniBatch`] ends with: vetoes, writes added to its table, writes added by name,
/// rows required absent, local rows required absent.
pub(crate) type MiniBatchParts = (
    Vec<Option<Error>>,
    Vec<bool>,
    Vec<Mutation>,
    Vec<(TableName, AddedOp)>,
    Vec<(TableName, Bytes, Option<RowOwner>)>,
    Vec<(Bytes, Option<RowOwner>)>,
);

/// Whose a row required absent may already be: the row passes the check when its visible
/// cell `family:qualifier` holds, from byte `skip` of its value on, exactly `owner` (a
/// unique index row naming the data row that writes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowOwner {
    /// The family of the cell naming the owner.
    pub family: Bytes,
    /// Its qualifier.
    pub qualifier: Bytes,
    /// Where the owner starts in its value.
    pub skip: usize,
    /// The owner.
    pub owner: Bytes,
}

impl RowOwner {
    /// True when `found`, the row as the check reads it, is the owner's.
    pub fn owns(&self, found: &crate::cell::RowResult) -> bool {
        found.cells.iter().any(|c| {
            c.family == self.family
                && c.qualifier == self.qualifier
                && c.value.get(self.skip..) == Some(self.owner.as_ref())
        })
    }
}

/// A mark in a [`MiniBatch`]'s history (see [`MiniBatch::savepoint`]).
#[derive(Debug, Clone)]
pub struct Savepoint {
    added: usize,
    elsewhere: usize,
    absent: usize,
    local_absent: usize,
    vetoed: Vec<bool>,
    replaced: Vec<bool>,
}
