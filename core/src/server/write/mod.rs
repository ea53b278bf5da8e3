//! [`WritePipeline`], the engine's write stage: every write kind (put, delete, row mutations,
//! batch, increment, append, check-and-mutate) runs the one pipeline, whether its table has
//! coprocessors or not.
//!
//! The pipeline, in order (`docs/ARCHITECTURE.md`):
//! 1. locate and pre-hooks: `pre_put`/`pre_delete` per mutation (or the increment's,
//!    append's, check-and-mutate's pre-hook), outside any lock; each may change or bypass
//!    its operation;
//! 2. validation against the schema ([`prepare`]): a bad operation fails before anything is
//!    locked or written;
//! 3. row locks in ascending stripe order (the relock loop of [`super::hooks::LockPlan`]);
//! 4. the cells prepared at one timestamp (from the hooked-write clock when batch hooks
//!    run, see [`WritePipeline::hooked_now`]); `pre_batch_mutate` per region, whose vetoes fail
//!    operations and whose added writes (index rows) are checked, locked and prepared;
//! 5. commit ([`commit`]): sequence id and WAL append under the commit lock, one WAL record
//!    for the batch and its added writes, the wait for the WAL as the durability asks,
//!    MemStore inserts, `post_batch_mutate`, then publication (MVCC passes the batch);
//! 6. `post_batch` per region with the outcome, unlock, `post_put`/`post_delete`.
//!
//! A table without coprocessors takes the same steps with the hook calls skipped: its only
//! costs are `Option` checks. Invariants: every validation happens before the sequence id
//! is taken, so a bad operation writes nothing; a sequence id is always completed (a guard
//! completes it if the caller's future is dropped), so the read point never stalls; the
//! hooks are looked up again under the row locks, so batch hooks that arrived meanwhile (an
//! index being created) see every write that commits after them.

use crate::cell::now_ms;
use crate::cell::Timestamp;
use crate::coprocessor::{Flow, MutationHook, RegionHooks};
use crate::error::{Error, Result};
use crate::ops::{BatchOp, BatchOutcome, Delete, Mutation, Put, RowMutations};
use crate::region::locks::RowLocks;
use crate::region::PreparedCell;
use crate::server::flush::Maintenance;
use crate::server::hooks::{self, copy_error, set, under_row_locks, HookCalls, LockPlan, Slot};
use crate::server::read::ReadPath;
use crate::server::shared::EngineShared;
use crate::server::shared::TableState;
use crate::server::validate;
use crate::wal::Durability;
use bytes::Bytes;
use row_clock::RowClock;
use std::borrow::Cow;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

mod atomic;
mod commit;
pub(crate) mod prepare;
mod row_clock;

/// Slots of the hooked-write clock (512 KiB). A row waits for the next millisecond only
/// when its slot's newest hooked write (stamped this millisecond or, by a region's clock,
/// up to a second ahead) was its own, or two other rows' ([`row_clock`]); before slots had
/// tags, at 4,096 slots, 8 writers of indexed
/// puts (each marking a data row and an index row) collided often enough to cut indexed put
/// throughput by a third (bench `index`: 75K -> 115K puts/s with 65,536 slots).
const ROW_CLOCK_SLOTS: usize = 1 << 16;

/// The engine's write stage and the state it owns (see the module doc).
pub(crate) struct WritePipeline {
    pub(crate) shared: Arc<EngineShared>,
    pub(crate) reads: Arc<ReadPath>,
    pub(crate) upkeep: Arc<Maintenance>,
    /// Row locks of every table, striped by (table, row).
    locks: RowLocks,
    /// Commits since the engine opened (every 1,024th checks the WAL's length).
    commits: AtomicU64,
    /// For every (table, row), a bound on the last timestamp a hooked write of the row took
    /// (see [`WritePipeline::hooked_now`] and [`row_clock`]).
    row_clock: RowClock,
}

/// The strongest of several durabilities (their maximum: [`Durability`] is ordered).
pub(crate) fn strongest(ds: impl IntoIterator<Item = Durability>) -> Durability {
    ds.into_iter().max().unwrap_or(Durability::SyncWal)
}

/// A table's hooks as a write looked them up, with the slot's version then
/// ([`crate::coprocessor::HookSlot::versioned`]). Under its row locks the write needs the
/// current hooks (batch hooks that arrived meanwhile, an index being created, must see
/// it): while the version is unchanged these are they, and the write takes no lock and
/// no reference count to learn it.
pub(crate) struct SeenHooks {
    version: u64,
    hooks: Option<Arc<dyn RegionHooks>>,
}

impl SeenHooks {
    /// The hooks of `t` now.
    pub(crate) fn of(t: &TableState) -> Self {
        let (version, hooks) = t.hooks.versioned();
        SeenHooks { version, hooks }
    }

    /// The hooks of `t` that have something to run for a write of `muts`, current as of
    /// this call (see [`SeenHooks`] and [`write_hooks`]).
    fn current<'s>(
        &'s self,
        t: &TableState,
        muts: &[Mutation],
    ) -> Cow<'s, Option<Arc<dyn RegionHooks>>> {
        if t.hooks.version() == self.version {
            match write_hooks(self.hooks.as_ref(), muts) {
                Some(_) => Cow::Borrowed(&self.hooks),
                None => Cow::Owned(None),
            }
        } else {
            let fresh = t.hooks();
            Cow::Owned(write_hooks(fresh.as_ref(), muts).cloned())
        }
    }
}

/// Of `hooks`, those that have something to run for a write of `muts` (see
/// [`RegionHooks::skips_mutation_hooks`]); `None` sends the write down the pipeline with
/// every hook call skipped.
fn write_hooks<'h>(
    hooks: Option<&'h Arc<dyn RegionHooks>>,
    muts: &[Mutation],
) -> Option<&'h Arc<dyn RegionHooks>> {
    let hooks = hooks?;
    let puts = muts.iter().any(|m| matches!(m, Mutation::Put(_)));
    let deletes = muts.iter().any(|m| matches!(m, Mutation::Delete(_)));
    (!hooks.skips_mutation_hooks(puts, deletes)).then_some(hooks)
}

/// True when a write through `hooks` runs a batch hook (`pre_batch_mutate`,
/// `post_batch_mutate`), so it takes its timestamp from the hooked-write clock (see
/// [`WritePipeline::hooked_now`]): those hooks read the row as the batch leaves it. A
/// write whose hooks are only `pre_put`/`post_put` and the like is stamped as a plain one.
fn clocked(hooks: &dyn RegionHooks) -> bool {
    !hooks.skips(MutationHook::PreBatchMutate) || !hooks.skips(MutationHook::PostBatchMutate)
}

/// True when a write through `hooks` runs any batch hook (`pre_batch_mutate`,
/// `post_batch_mutate`, `post_batch`), under its row locks.
fn runs_batch_hooks(hooks: &dyn RegionHooks) -> bool {
    clocked(hooks) || !hooks.skips(MutationHook::PostBatch)
}

impl WritePipeline {
    /// The write stage over the shared state and the stages below it.
    pub(crate) fn new(
        shared: Arc<EngineShared>,
        reads: Arc<ReadPath>,
        upkeep: Arc<Maintenance>,
    ) -> Self {
        WritePipeline {
            shared,
            reads,
            upkeep,
            locks: RowLocks::new(4096),
            commits: AtomicU64::new(0),
            row_clock: RowClock::new(ROW_CLOCK_SLOTS, now_ms()),
        }
    }

    /// Puts one row.
    pub(crate) async fn put(&self, t: &TableState, p: Put) -> Result<()> {
        self.mutate_one(t, Mutation::Put(p)).await
    }

    /// Deletes from one row.
    pub(crate) async fn delete(&self, t: &TableState, d: Delete) -> Result<()> {
        self.mutate_one(t, Mutation::Delete(d)).await
    }

    /// Applies a row's mutations atomically.
    pub(crate) async fn mutate_row(&self, t: &TableState, rm: RowMutations) -> Result<()> {
        validate::check_same_row(&rm)?;
        self.mutate(t, Cow::Owned(rm.mutations), SeenHooks::of(t))
            .await
    }

    /// [`WritePipeline::mutate`] of one mutation the caller gives away: a hooked table's
    /// pre-hooks get it without a copy, a plain table's write needs no vector.
    async fn mutate_one(&self, t: &TableState, m: Mutation) -> Result<()> {
        let seen = SeenHooks::of(t);
        if write_hooks(seen.hooks.as_ref(), std::slice::from_ref(&m)).is_some() {
            self.mutate(t, Cow::Owned(vec![m]), seen).await
        } else {
            self.mutate(t, Cow::Borrowed(std::slice::from_ref(&m)), seen)
                .await
        }
    }

    /// Applies mutations of any rows atomically (one WAL record, one sequence id): steps
    /// 1 to 6 of the pipeline, with the table's hooks as `seen` (looked up again under
    /// the row locks only if they changed since). A post-hook error is returned although
    /// the write committed (as HBase's `postPut`).
    pub(crate) async fn mutate(
        &self,
        t: &TableState,
        muts: Cow<'_, [Mutation]>,
        seen: SeenHooks,
    ) -> Result<()> {
        t.check_enabled()?;
        let hooks = write_hooks(seen.hooks.as_ref(), &muts);
        // The region the pre-hook of a single mutation ran in: its post-hook runs there too
        // while it still serves the row (no second region lookup).
        let mut ran_in = None;
        let single = muts.len() == 1;
        let muts = match hooks {
            None => muts,
            Some(h) => {
                let calls = HookCalls::new(&self.reads, t, h);
                let mut kept = muts.into_owned();
                let mut i = 0;
                while let Some(m) = kept.get_mut(i) {
                    if calls.pre_mutation(m, &mut ran_in).await? == Flow::Continue {
                        i += 1;
                    } else {
                        kept.remove(i);
                    }
                }
                if kept.is_empty() {
                    return Ok(());
                }
                if !single {
                    ran_in = None;
                }
                Cow::Owned(kept)
            }
        };
        for m in muts.iter() {
            validate::validate_user_mutation(&self.shared.config, t, m, ran_in.as_ref())?;
        }
        under_row_locks!(self, t, muts.iter().map(|m| m.row()), |plan| self
            .mutate_locked(t, &muts, plan, &seen, ran_in.as_ref())
            .await)?;
        let Some(h) = hooks else {
            return Ok(());
        };
        let calls = HookCalls::new(&self.reads, t, h);
        let mut first_err = None;
        for m in muts.iter() {
            if let Err(e) = calls.post_mutation(m, ran_in.as_ref()).await {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Steps 4 to 6 of the pipeline for `muts`, atomically: the caller holds their row locks
    /// and those of `plan`'s extra rows. Any veto fails it all. When the commit must relock
    /// ([`LockPlan`]) it returns an error having written nothing and run no `post_batch`.
    /// `ran_in` is the region a single mutation's pre-hook ran in, reused while it serves
    /// the row ([`prepare::prepare_in`]).
    pub(super) async fn mutate_locked(
        &self,
        t: &TableState,
        muts: &[Mutation],
        plan: &mut LockPlan,
        seen: &SeenHooks,
        ran_in: Option<&Arc<crate::region::Region>>,
    ) -> Result<()> {
        let hooks = seen.current(t, muts);
        let clock = hooks.as_deref().is_some_and(clocked);
        let now = if clock {
            self.hooked_now(t, muts.iter().map(|m| m.row()), plan.min_ts)
                .await
        } else {
            now_ms()
        };
        let hint: usize = muts.iter().map(prepare::cell_hint).sum();
        // Room for the writes hooks add too (an index row or two per row).
        let room = if hooks.is_some() { hint / 2 + 2 } else { 0 };
        let mut cells = Vec::with_capacity(hint + room);
        for m in muts {
            prepare::prepare_in(&self.reads, t, m, now, &mut cells, ran_in)?;
        }
        let durability = strongest(muts.iter().map(Mutation::durability));
        // Hooks that run no batch hook (only `pre_put`/`post_put` and the like, which run
        // outside the locks) commit as a plain write: every batch call would be skipped.
        let Some(hooks) = hooks
            .as_ref()
            .as_ref()
            .filter(|h| runs_batch_hooks(h.as_ref()))
        else {
            return self.commit(&[t], cells, durability, None).await.map(drop);
        };
        let calls = HookCalls::new(&self.reads, t, hooks);
        let refs: Vec<&Mutation> = muts.iter().collect();
        let stamped = stamped_at(now, clock, &cells);
        let run = async {
            let mut pre = calls.pre_batch(&refs, now, &cells).await?;
            if let Some(e) = std::mem::take(&mut pre.vetoes).into_iter().flatten().next() {
                return Err(e);
            }
            if pre.replaced.iter().any(|r| *r) {
                return Err(Error::bad_argument(
                    "an atomic mutation's operations cannot be replaced in pre_batch_mutate",
                ));
            }
            let held: Vec<Bytes> = refs.iter().map(|m| m.row().clone()).collect();
            self.commit_with_added(&calls, &held, &refs, cells, durability, pre, plan, now)
                .await
        };
        let (outcome, late) = match run.await {
            Ok(late) => (Ok(()), late),
            Err(e) => (Err(e), None),
        };
        // Only a write that committed moves its rows' clock: a vetoed or failed one wrote
        // nothing that a later write of the same millisecond could be hidden by.
        if clock && outcome.is_ok() && !plan.relock_pending() {
            self.record_hooked(t, refs.iter().map(|m| m.row()), stamped);
        }
        if plan.relock_pending() {
            return outcome;
        }
        let post = calls.post_batch_all(&refs, &outcome).await;
        outcome?;
        if let Some(e) = late {
            return Err(e);
        }
        post
    }

    /// Runs many operations; one result per operation, in order. Puts and deletes that pass
    /// their pre-hooks and validation run the pipeline together as one atomic batch; the
    /// other operations run after it, each through its own path.
    pub(crate) async fn batch(
        &self,
        t: &TableState,
        ops: Vec<BatchOp>,
    ) -> Result<Vec<Result<BatchOutcome>>> {
        t.check_enabled()?;
        let seen = SeenHooks::of(t);
        let hooks = &seen.hooks;
        let mut results: Vec<Slot> = (0..ops.len()).map(|_| None).collect();
        let mut group: Vec<(usize, Mutation)> = Vec::new();
        let mut rest = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                BatchOp::Put(p) => group.push((i, Mutation::Put(p))),
                BatchOp::Delete(d) => group.push((i, Mutation::Delete(d))),
                other => rest.push((i, other)),
            }
        }
        if let Some(h) = &hooks {
            let calls = HookCalls::new(&self.reads, t, h);
            let mut kept = Vec::with_capacity(group.len());
            for (i, mut m) in group {
                match calls.pre_mutation(&mut m, &mut None).await {
                    Ok(Flow::Continue) => kept.push((i, m)),
                    Ok(Flow::Bypass) => set(&mut results, i, Ok(BatchOutcome::Done)),
                    Err(e) => set(&mut results, i, Err(e)),
                }
            }
            group = kept;
        }
        group.retain(|(i, m)| {
            match validate::validate_user_mutation(&self.shared.config, t, m, None) {
                Ok(()) => true,
                Err(e) => {
                    set(&mut results, *i, Err(e));
                    false
                }
            }
        });
        let mut plan = LockPlan::default();
        while !group.is_empty() {
            let locks = self
                .lock_planned(t, group.iter().map(|(_, m)| m.row()), &plan)
                .await;
            let (ok, outcome) = self
                .batch_locked(t, &mut group, &mut results, &mut plan, &seen)
                .await;
            if plan.take_relock() {
                drop(locks);
                continue;
            }
            for i in &ok {
                // A slot already answered holds a later hook's error.
                if let Some(slot @ None) = results.get_mut(*i) {
                    *slot = Some(match &outcome {
                        Ok(()) => Ok(BatchOutcome::Done),
                        Err(e) => Err(copy_error(e)),
                    });
                }
            }
            drop(locks);
            if let (Some(h), Ok(())) = (hooks, &outcome) {
                let calls = HookCalls::new(&self.reads, t, h);
                for (i, m) in &group {
                    if ok.binary_search(i).is_ok() {
                        if let Err(e) = calls.post_mutation(m, None).await {
                            set(&mut results, *i, Err(e));
                        }
                    }
                }
            }
            break;
        }
        for (i, op) in rest {
            let r = match op {
                BatchOp::Get(g) => hooks::rows::get(&self.reads, t, g)
                    .await
                    .map(BatchOutcome::Row),
                BatchOp::Increment(inc) => self.increment(t, inc).await.map(BatchOutcome::Row),
                BatchOp::Append(a) => self.append(t, a).await.map(BatchOutcome::Row),
                BatchOp::RowMutations(rm) => {
                    self.mutate_row(t, rm).await.map(|_| BatchOutcome::Done)
                }
                BatchOp::CheckAndMutate(c) => {
                    self.check_and_mutate(t, c).await.map(BatchOutcome::Checked)
                }
                BatchOp::Put(_) | BatchOp::Delete(_) => Ok(BatchOutcome::Done),
            };
            set(&mut results, i, r);
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::bad_argument("operation not run"))))
            .collect())
    }

    /// Steps 4 to 6 for a batch's puts and deletes (the caller holds the row locks of
    /// `group` and of `plan`'s extra rows): prepare (a failed operation is answered and
    /// leaves `group`), `pre_batch_mutate` (vetoed operations are answered and leave
    /// `group`; a hook error answers every operation and empties it), commit with the added
    /// writes, `post_batch`. Returns the operations committed (their slots still empty
    /// unless a later hook failed them) and the commit's outcome. When the commit must
    /// relock ([`LockPlan`]) it returns no operation, leaving those in `group` unanswered.
    async fn batch_locked(
        &self,
        t: &TableState,
        group: &mut Vec<(usize, Mutation)>,
        results: &mut [Slot],
        plan: &mut LockPlan,
        seen: &SeenHooks,
    ) -> (Vec<usize>, Result<()>) {
        // Under the locks, the table's current hooks: batch hooks that arrived since the
        // pre-hooks ran (an index being created) must see this write.
        let hooks: Cow<'_, Option<Arc<dyn RegionHooks>>> = if t.hooks.version() == seen.version {
            Cow::Borrowed(&seen.hooks)
        } else {
            Cow::Owned(t.hooks())
        };
        let clock = hooks.as_deref().is_some_and(clocked);
        let (held, now, mut cells) = match hooks.as_ref() {
            None => (Vec::new(), now_ms(), Vec::new()),
            Some(_) => {
                let held: Vec<Bytes> = group.iter().map(|(_, m)| m.row().clone()).collect();
                let now = if clock {
                    self.hooked_now(t, held.iter(), plan.min_ts).await
                } else {
                    now_ms()
                };
                // Room for the writes hooks add too (an index row or two per row).
                let hint: usize = group.iter().map(|(_, m)| prepare::cell_hint(m)).sum();
                (held, now, Vec::with_capacity(hint + hint / 2 + 2))
            }
        };
        let mut spans = Vec::with_capacity(group.len());
        for (i, m) in group.iter() {
            let mark = cells.len();
            match prepare::prepare(&self.reads, t, m, now, &mut cells) {
                Ok(()) => spans.push(Some(mark..cells.len())),
                Err(e) => {
                    cells.truncate(mark);
                    set(results, *i, Err(e));
                    spans.push(None);
                }
            }
        }
        let mut prepared = spans.iter();
        group.retain(|_| prepared.next().is_some_and(Option::is_some));
        let Some(hooks) = hooks.as_ref() else {
            let ok: Vec<usize> = group.iter().map(|(i, _)| *i).collect();
            let durability = strongest(group.iter().map(|(_, m)| m.durability()));
            return (
                ok,
                self.commit(&[t], cells, durability, None).await.map(drop),
            );
        };
        let calls = HookCalls::new(&self.reads, t, hooks);
        let mut spans: Vec<std::ops::Range<usize>> = spans.into_iter().flatten().collect();
        let refs: Vec<&Mutation> = group.iter().map(|(_, m)| m).collect();
        let pre = match calls.pre_batch(&refs, now, &cells).await {
            Ok(pre) => pre,
            Err(e) => {
                let outcome = Err(e);
                // A failed batch's post_batch error is dropped: the batch's error stands.
                let _ = calls.post_batch_all(&refs, &outcome).await;
                drop(refs);
                if let Err(e) = &outcome {
                    for (i, _) in group.drain(..) {
                        set(results, i, Err(copy_error(e)));
                    }
                }
                return (Vec::new(), Ok(()));
            }
        };
        drop(refs);
        let mut pre = pre;
        let mut vetoes = std::mem::take(&mut pre.vetoes).into_iter();
        let mut replaced = std::mem::take(&mut pre.replaced).into_iter();
        let mut kept_spans = spans.drain(..);
        let mut keep = vec![false; cells.len()];
        group.retain(|(i, _)| {
            let span = kept_spans.next().unwrap_or_default();
            let replaced = replaced.next().unwrap_or(false);
            match vetoes.next().flatten() {
                Some(e) => {
                    set(results, *i, Err(e));
                    false
                }
                // Its replacement, an added write, carries it: none of its own cells.
                None if replaced => true,
                None => {
                    for k in span {
                        if let Some(slot) = keep.get_mut(k) {
                            *slot = true;
                        }
                    }
                    true
                }
            }
        });
        let mut keep = keep.into_iter();
        cells.retain(|_| keep.next().unwrap_or(false));
        let ok: Vec<usize> = group.iter().map(|(i, _)| *i).collect();
        let durability = strongest(group.iter().map(|(_, m)| m.durability()));
        let written: Vec<&Mutation> = group.iter().map(|(_, m)| m).collect();
        if written.is_empty() {
            // Nothing of the batch is written: neither are the writes its hooks added.
            return (ok, Ok(()));
        }
        let stamped = stamped_at(now, clock, &cells);
        let run = self
            .commit_with_added(&calls, &held, &written, cells, durability, pre, plan, now)
            .await;
        if clock && run.is_ok() && !plan.relock_pending() {
            self.record_hooked(t, written.iter().map(|m| m.row()), stamped);
        }
        if plan.relock_pending() {
            return (Vec::new(), Ok(()));
        }
        let (outcome, late) = match run {
            Ok(late) => (Ok(()), late),
            Err(e) => (Err(e), None),
        };
        let post = calls.post_batch_all(&written, &outcome).await;
        if outcome.is_ok() {
            if let Some(e) = late.or(post.err()) {
                for i in &ok {
                    set(results, *i, Err(copy_error(&e)));
                }
            }
        }
        (ok, outcome)
    }

    /// Locks `rows` of `t` and the plan's extra rows, in ascending stripe order.
    pub(super) async fn lock_planned<'a, 'r>(
        &'a self,
        t: &TableState,
        rows: impl Iterator<Item = &'r Bytes>,
        plan: &LockPlan,
    ) -> crate::region::locks::RowLockGuard<'a> {
        let name = t.key.as_str();
        self.locks
            .lock(
                rows.map(|r| (name, r.as_ref()))
                    .chain(plan.extra.iter().map(|(n, r)| (n.as_str(), r.as_ref()))),
            )
            .await
    }
}

/// The timestamp a clocked hooked write stamped at `now` took: its regions may have stamped
/// its cells later than `now` ([`crate::region::Region::stamp`]), and the rows' clocks must
/// record that, or the rows' next hooked write could take the same timestamp. The cells'
/// own timestamps count, within [`crate::region::MAX_CLOCK_LEAD_MS`] of `now` (one a
/// client dated further ahead is its own, not the server's).
fn stamped_at(now: Timestamp, clock: bool, cells: &[PreparedCell]) -> Timestamp {
    if !clock {
        return now;
    }
    let lead = now.saturating_add(crate::region::MAX_CLOCK_LEAD_MS);
    cells
        .iter()
        .map(|c| c.cell.key.ts)
        .filter(|ts| *ts <= lead)
        .fold(now, Timestamp::max)
}
