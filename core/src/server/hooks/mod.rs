//! Every call of a coprocessor hook ([`crate::coprocessor::RegionHooks`]) is in this room:
//! the write path's (here and [`commit`]: per mutation, per batch under the row locks), the
//! one-row operations with a pre/post pair of their own ([`rows`]: get, exists, increment,
//! append, check-and-mutate), scanners ([`scan`]), the region lifecycle, WAL replay, the
//! engine observer's WAL hooks and the loading of a table's hooks ([`lifecycle`]), and the
//! engine observer's table hooks around schema changes ([`tables`]). The stages above call these functions,
//! never a hook itself.
//!
//! Order of a hooked write (`docs/ARCHITECTURE.md`): `pre_put`/`pre_delete` per mutation, outside
//! any lock -> validation -> row locks -> `pre_batch_mutate` per region under the locks ->
//! the added writes are checked against their tables' schemas -> the rows they write are
//! locked (out-of-order waits bounded, see `region::locks`) -> commit (one WAL record, one
//! MVCC sequence id across every table written) -> MemStore inserts -> `post_batch_mutate`
//! per region -> visible -> `post_batch` per region with the outcome (always, once
//! `pre_batch_mutate` ran) -> unlock -> `post_put`/`post_delete`. Increments, appends,
//! check-and-mutates and exists have their own pre-hooks before validation and post-hooks
//! after visibility.
//!
//! The write pipeline (`server::write`) calls them through [`HookCalls`]; this module keeps
//! what every hooked write shares: the relock loop ([`LockPlan`], `under_row_locks!`), the
//! checked writes hooks add, the copies of errors a batch hands to several operations.
//!
//! Invariants: a table without coprocessors calls no hook (callers check
//! `TableState::hooks` first, which allocates nothing; it shares only the relock loop); row locks are only ever held by
//! guards, so a hook's error, panic or cancellation releases them; an added write that is
//! invalid, or whose lock cannot be had, fails the batch before its sequence id is taken, so
//! nothing is written; added writes run no hooks of their table; hooks are loaded before a
//! table change is written, so a coprocessor that cannot load changes nothing.

use crate::coprocessor::{AddedOp, Flow, HookEnv, MutationHook, RegionHooks, RowOwner};
use crate::error::{Error, Result};
use crate::ops::{BatchOutcome, Mutation};
use crate::region::Region;
use crate::schema::TableName;
use crate::server::read::ReadPath;
use crate::server::shared::TableState;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A row a batch requires absent: its table (`None`: the batch's own), the row, and the
/// owner it may already have.
pub(crate) type Absent = (Option<Arc<TableState>>, Bytes, Option<RowOwner>);

mod commit;
pub(crate) mod lifecycle;
pub(crate) mod rows;
pub(crate) mod scan;
pub(crate) mod tables;

/// A write a batch hook added, checked, with its table (`None`: the batch's own table).
pub(crate) type AddedWrite = (Option<Arc<TableState>>, AddedOp);

/// The summed counter increments added to one row, with the row's table.
pub(crate) type RowIncrements<'a> = (&'a TableState, BTreeMap<(&'a Bytes, &'a Bytes), i64>);

/// What `pre_batch_mutate` left: each operation's veto and the checked added writes.
pub(crate) struct PreBatch {
    /// Each operation's veto, in order; operations past its end have none.
    pub(crate) vetoes: Vec<Option<Error>>,
    /// Each operation replaced by an added write ([`crate::coprocessor::MiniBatch::replace`]);
    /// operations past its end are not.
    pub(crate) replaced: Vec<bool>,
    /// The writes the hooks added, checked against their tables.
    pub(crate) added: Vec<AddedWrite>,
    /// Rows that must be absent (or their owner's) for the batch to commit (unique index
    /// entries).
    pub(crate) absent: Vec<Absent>,
    /// Local rows of the batch's table that must be absent (or their owner's): region-local
    /// unique index entries, [`crate::coprocessor::MiniBatch::require_local_absent`].
    pub(crate) local_absent: Vec<(Bytes, Option<RowOwner>)>,
}

/// How many times a write gives up its locks and retakes them in order (when a row a hook
/// added is held by another writer below a stripe it holds) before it falls back to a
/// bounded out-of-order wait.
pub(crate) const RELOCK_ATTEMPTS: u32 = 16;

/// The rows a hooked write locks beyond its own, learnt from its hooks' added writes.
///
/// A batch hook adds writes to rows the write did not lock up front. When one of those
/// rows' lock stripes lies below a stripe the write holds and another writer holds it, the
/// write does not wait out of order: it notes the rows, gives up every lock (nothing is
/// written), and its caller locks its own rows together with the noted ones in ascending
/// stripe order and runs the locked part again (the hooks then read the current rows and
/// may add other writes). Two writers crossing over thus never wait for each other's
/// timeout.
#[derive(Debug, Default)]
pub(crate) struct LockPlan {
    /// Rows of any table to lock with the write's own, as (table, row).
    pub(crate) extra: Vec<(String, Bytes)>,
    /// A timestamp the next attempt's must exceed (a row an added write targets was
    /// written at it, see `commit_with_added`).
    pub(crate) min_ts: crate::cell::Timestamp,
    pub(crate) attempts: u32,
    relock: bool,
}

/// The relock loop, written once: evaluates `$locked` (which may use `$plan`, the
/// [`LockPlan`]) under the row locks of `$rows` and the plan's extra rows; when it gave up to
/// relock (having written nothing), again with the rows it asked for. Yields its result.
macro_rules! under_row_locks {
    ($engine:expr, $t:expr, $rows:expr, |$plan:ident| $locked:expr) => {{
        let mut plan = LockPlan::default();
        loop {
            let locks = $engine.lock_planned($t, $rows, &plan).await;
            let $plan = &mut plan;
            let r = $locked;
            drop(locks);
            if !plan.take_relock() {
                break r;
            }
        }
    }};
}
pub(super) use under_row_locks;

impl LockPlan {
    /// True (once) when the locked part gave up to relock.
    pub(crate) fn take_relock(&mut self) -> bool {
        std::mem::take(&mut self.relock)
    }

    /// True when the locked part gave up to relock (and has not been retried yet).
    pub(crate) fn relock_pending(&self) -> bool {
        self.relock
    }

    /// Makes the caller give up its locks and run the locked part again.
    pub(crate) fn request_relock(&mut self) {
        self.relock = true;
    }
}

/// The `post_batch_mutate` call a commit makes between its MemStore inserts and visibility.
pub(crate) struct PostApply<'a> {
    calls: HookCalls<'a>,
    ops: &'a [&'a Mutation],
}

/// One slot of a batch's results.
pub(crate) type Slot = Option<Result<BatchOutcome>>;

/// A copy of an error for a second operation of a batch (errors are not `Clone`): the
/// errors hooks and added writes fail batches with keep their variant, others become
/// [`Error::WritesRefused`] with their message.
pub(crate) fn copy_error(e: &Error) -> Error {
    match e {
        Error::Coprocessor { name, msg } => Error::Coprocessor {
            name: name.clone(),
            msg: msg.clone(),
        },
        Error::BadArgument(m) => Error::BadArgument(m.clone()),
        Error::PluginFault { name, msg } => Error::PluginFault {
            name: name.clone(),
            msg: msg.clone(),
        },
        Error::InvalidAddedMutation { table, reason } => Error::InvalidAddedMutation {
            table: table.clone(),
            reason: Box::new(copy_error(reason)),
        },
        Error::RowLockTimeout {
            table,
            row,
            waited_ms,
        } => Error::RowLockTimeout {
            table: table.clone(),
            row: row.clone(),
            waited_ms: *waited_ms,
        },
        Error::FamilyNotFound { table, family } => Error::FamilyNotFound {
            table: table.clone(),
            family: family.clone(),
        },
        Error::RegionNotServed { table, region } => Error::RegionNotServed {
            table: table.clone(),
            region: *region,
        },
        Error::Closed => Error::Closed,
        Error::TableNotFound(t) => Error::TableNotFound(t.clone()),
        Error::TableDisabled(t) => Error::TableDisabled(t.clone()),
        Error::NotACounter { column, len } => Error::NotACounter {
            column: column.clone(),
            len: *len,
        },
        Error::UniqueViolation { table, row } => Error::UniqueViolation {
            table: table.clone(),
            row: row.clone(),
        },
        Error::IndexNotReady(i) => Error::IndexNotReady(i.clone()),
        Error::IndexNotFound(i) => Error::IndexNotFound(i.clone()),
        Error::IndexTableWrite(i) => Error::IndexTableWrite(i.clone()),
        Error::ReadOnlyTable { table, missing } => Error::ReadOnlyTable {
            table: table.clone(),
            missing: missing.clone(),
        },
        other => Error::WritesRefused(other.to_string()),
    }
}

pub(crate) fn invalid_added(table: &TableName, e: Error) -> Error {
    Error::InvalidAddedMutation {
        table: table.to_string(),
        reason: Box::new(e),
    }
}

pub(crate) fn set(results: &mut [Slot], i: usize, r: Result<BatchOutcome>) {
    if let Some(slot) = results.get_mut(i) {
        *slot = Some(r);
    }
}

/// The table an added write goes to: `target`, or the batch's own table `t`.
pub(crate) fn target_of<'a>(
    t: &'a TableState,
    target: &'a Option<Arc<TableState>>,
) -> &'a TableState {
    target.as_deref().unwrap_or(t)
}

/// A table's hooks with what calling them needs: the read path (for the hooks' reads) and
/// the table.
#[derive(Clone, Copy)]
pub(crate) struct HookCalls<'a> {
    reads: &'a ReadPath,
    t: &'a TableState,
    hooks: &'a Arc<dyn RegionHooks>,
}

impl<'a> HookCalls<'a> {
    /// The calls of `hooks`, the hooks of table `t`.
    pub(crate) fn new(
        reads: &'a ReadPath,
        t: &'a TableState,
        hooks: &'a Arc<dyn RegionHooks>,
    ) -> Self {
        HookCalls { reads, t, hooks }
    }

    /// The table whose hooks these are.
    pub(crate) fn table(&self) -> &'a TableState {
        self.t
    }

    fn env_for(&self, row: &[u8]) -> Result<HookEnv<'a>> {
        Ok(HookEnv::new(
            self.reads,
            &self.t.name,
            self.t.online_region(row)?,
        ))
    }

    /// `pre_put` or `pre_delete` of one mutation (outside any lock). When the hook ran,
    /// `ran_in` is set to its region, for the mutation's post-hook
    /// ([`HookCalls::post_mutation`]).
    pub(crate) async fn pre_mutation(
        &self,
        m: &mut Mutation,
        ran_in: &mut Option<Arc<Region>>,
    ) -> Result<Flow> {
        let hook = match m {
            Mutation::Put(_) => MutationHook::PrePut,
            Mutation::Delete(_) => MutationHook::PreDelete,
        };
        if self.hooks.skips(hook) {
            return Ok(Flow::Continue);
        }
        let region = self.t.online_region(m.row())?;
        let env = HookEnv::borrowed(self.reads, &self.t.name, &region);
        let flow = match m {
            Mutation::Put(p) => self.hooks.pre_put(&env, p).await,
            Mutation::Delete(d) => self.hooks.pre_delete(&env, d).await,
        };
        drop(env);
        *ran_in = Some(region);
        flow
    }

    /// `post_put` or `post_delete` of one committed mutation (after unlock), in `hint`
    /// (the region its pre-hook ran in) while that region still serves the row: a split or
    /// merge retires a region, and a pre-hook may have changed the row.
    pub(crate) async fn post_mutation(
        &self,
        m: &Mutation,
        hint: Option<&Arc<Region>>,
    ) -> Result<()> {
        let hook = match m {
            Mutation::Put(_) => MutationHook::PostPut,
            Mutation::Delete(_) => MutationHook::PostDelete,
        };
        if self.hooks.skips(hook) {
            return Ok(());
        }
        let env = match hint.filter(|r| r.serves(m.row())) {
            Some(r) => HookEnv::borrowed(self.reads, &self.t.name, r),
            None => self.env_for(m.row())?,
        };
        match m {
            Mutation::Put(p) => self.hooks.post_put(&env, p).await,
            Mutation::Delete(d) => self.hooks.post_delete(&env, d).await,
        }
    }
}

/// `muts` grouped by the region of `t` each falls in, in region-id order.
fn by_region(t: &TableState, muts: &[&Mutation]) -> Result<Vec<(Arc<Region>, Vec<usize>)>> {
    if let [m] = muts {
        return Ok(vec![(t.online_region(m.row())?, vec![0])]);
    }
    let mut by_region: BTreeMap<u64, (Arc<Region>, Vec<usize>)> = BTreeMap::new();
    for (i, m) in muts.iter().enumerate() {
        let r = t.online_region(m.row())?;
        by_region
            .entry(r.id)
            .or_insert_with(|| (r.clone(), Vec::new()))
            .1
            .push(i);
    }
    Ok(by_region.into_values().collect())
}
