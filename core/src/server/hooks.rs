//! Calling a table's coprocessor hooks ([`crate::coprocessor::RegionHooks`]) on the write
//! and read paths, and changing a table's coprocessors without a restart.
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
//! Invariants: a table without coprocessors never enters this module's paths (callers check
//! `TableState::hooks` first, which allocates nothing); row locks are only ever held by
//! guards, so a hook's error, panic or cancellation releases them; an added write that is
//! invalid, or whose lock cannot be had, fails the batch before its sequence id is taken, so
//! nothing is written; added writes run no hooks of their table; hooks are loaded before a
//! table change is written, so a coprocessor that cannot load changes nothing.

use super::write::{strongest, Delta, DeltaOptions, PreparedCell};
use super::{now_ms, Config, Engine, TableState};
use crate::coprocessor::{AddedOp, Flow, HookEnv, MiniBatch, MutationHook, RegionHooks};
use crate::error::{Error, Result};
use crate::ops::{Append, BatchOutcome, CheckAndMutate, Get, Increment, Mutation, RowResult};
use crate::region::Region;
use crate::schema::{CoprocessorDescriptor, TableDescriptor, TableName};
use crate::wal::Durability;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A write a batch hook added, checked, with its table (`None`: the batch's own table).
type AddedWrite = (Option<Arc<TableState>>, AddedOp);

/// The summed counter increments added to one row, with the row's table.
type RowIncrements<'a> = (&'a TableState, BTreeMap<(&'a Bytes, &'a Bytes), i64>);

/// What `pre_batch_mutate` left: each operation's veto and the checked added writes.
pub(super) struct PreBatch {
    vetoes: Vec<Option<Error>>,
    added: Vec<AddedWrite>,
    absent: Vec<(Option<Arc<TableState>>, Bytes)>,
}

/// How many times a write gives up its locks and retakes them in order (when a row a hook
/// added is held by another writer below a stripe it holds) before it falls back to a
/// bounded out-of-order wait.
const RELOCK_ATTEMPTS: u32 = 16;

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
    attempts: u32,
    relock: bool,
}

impl LockPlan {
    /// True (once) when the locked part gave up to relock.
    pub(crate) fn take_relock(&mut self) -> bool {
        std::mem::take(&mut self.relock)
    }
}

/// The `post_batch_mutate` call a commit makes between its MemStore inserts and visibility.
pub(crate) struct PostApply<'a> {
    hooks: &'a Arc<dyn RegionHooks>,
    table: &'a TableState,
    ops: &'a [&'a Mutation],
}

/// One slot of a batch's results.
type Slot = Option<Result<BatchOutcome>>;

/// The hooks for a descriptor: `None` when it lists no coprocessor, an error when it lists
/// some that the configured loader cannot load (or no loader is configured).
pub(crate) fn load_hooks(
    config: &Config,
    desc: &TableDescriptor,
) -> Result<Option<Arc<dyn RegionHooks>>> {
    let desc = super::lifecycle::effective_descriptor(config, desc);
    let desc = desc.as_ref();
    if desc.coprocessors.is_empty() {
        return Ok(None);
    }
    match &config.coprocessor_loader {
        Some(loader) => loader.load(desc).map(Some),
        None => Err(Error::Coprocessor {
            name: desc
                .coprocessors
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
            msg: format!(
                "table {} lists coprocessors but the engine has no coprocessor loader",
                desc.name
            ),
        }),
    }
}

/// A copy of an error for a second operation of a batch (errors are not `Clone`): the
/// errors hooks and added writes fail batches with keep their variant, others become
/// [`Error::WritesRefused`] with their message.
pub(super) fn copy_error(e: &Error) -> Error {
    match e {
        Error::Coprocessor { name, msg } => Error::Coprocessor {
            name: name.clone(),
            msg: msg.clone(),
        },
        Error::BadArgument(m) => Error::BadArgument(m.clone()),
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
        other => Error::WritesRefused(other.to_string()),
    }
}

fn invalid_added(table: &TableName, e: Error) -> Error {
    Error::InvalidAddedMutation {
        table: table.to_string(),
        reason: Box::new(e),
    }
}

fn set(results: &mut [Slot], i: usize, r: Result<BatchOutcome>) {
    if let Some(slot) = results.get_mut(i) {
        *slot = Some(r);
    }
}

/// The table an added write goes to: `target`, or the batch's own table `t`.
fn target_of<'a>(t: &'a TableState, target: &'a Option<Arc<TableState>>) -> &'a TableState {
    target.as_deref().unwrap_or(t)
}

impl Engine {
    fn region_for(&self, t: &TableState, row: &[u8]) -> Result<Arc<Region>> {
        let region = t
            .locate(row)
            .ok_or_else(|| Error::TableNotFound(t.name.to_string()))?;
        region.check_online()?;
        Ok(region)
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

    fn env_for<'a>(self: &'a Arc<Self>, t: &'a TableState, row: &[u8]) -> Result<HookEnv<'a>> {
        Ok(HookEnv::new(self, &t.name, self.region_for(t, row)?))
    }

    /// Replaces a table's coprocessor list (a schema change: the new chain serves the next
    /// operation, no restart). The new hooks are loaded before anything else happens, so a
    /// list that cannot load changes nothing. On an enabled table the change reopens the
    /// table's regions as far as the hooks can tell, as HBase's modify-table does: the old
    /// chain's `pre_close` for every region, the swap (catalog, then the live chain), the old
    /// chain's `post_close`, then the new chain's `post_open` for every region. The regions
    /// keep serving throughout; an operation sees either the old chain or the new one.
    pub(crate) async fn set_coprocessors(
        self: &Arc<Self>,
        name: &TableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> Result<()> {
        let t = self.table(name)?;
        let mut desc = t.descriptor.read().clone();
        desc.coprocessors = coprocessors;
        desc.validate()?;
        let hooks = load_hooks(&self.config, &desc)?;
        let open = t.enabled.load(Ordering::Acquire);
        let regions: Vec<_> = if open {
            t.regions.read().clone()
        } else {
            Vec::new()
        };
        let old = t.hooks();
        if let Some(h) = &old {
            self.hooks_close(&t, h, &regions, false).await;
        }
        let key = t.name.to_string();
        self.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            Ok(())
        })?;
        *t.descriptor.write() = desc;
        t.hooks.set(hooks);
        if let Some(h) = &old {
            self.hooks_close(&t, h, &regions, true).await;
        }
        if let Some(h) = t.hooks() {
            self.hooks_post_open(&t, &h, &regions).await;
        }
        Ok(())
    }

    /// Adds a coprocessor to a table (loaded after those already listed); see
    /// [`Engine::set_coprocessors`] for the hooks it runs.
    pub(crate) async fn add_coprocessor(
        self: &Arc<Self>,
        name: &TableName,
        cp: CoprocessorDescriptor,
    ) -> Result<()> {
        let mut list = self.table(name)?.descriptor.read().coprocessors.clone();
        if list.iter().any(|c| c.name == cp.name) {
            return Err(Error::bad_argument(format!(
                "table {name} already has coprocessor {}",
                cp.name
            )));
        }
        list.push(cp);
        self.set_coprocessors(name, list).await
    }

    /// Removes a coprocessor from a table by name; see [`Engine::set_coprocessors`] for the
    /// hooks it runs.
    pub(crate) async fn remove_coprocessor(
        self: &Arc<Self>,
        name: &TableName,
        cp_name: &str,
    ) -> Result<()> {
        let mut list = self.table(name)?.descriptor.read().coprocessors.clone();
        let before = list.len();
        list.retain(|c| c.name != cp_name);
        if list.len() == before {
            return Err(Error::bad_argument(format!(
                "table {name} has no coprocessor {cp_name}"
            )));
        }
        self.set_coprocessors(name, list).await
    }

    /// Reads one row, running the table's get hooks when it has coprocessors.
    pub(crate) async fn get_hooked(
        self: &Arc<Self>,
        t: &TableState,
        mut g: Get,
    ) -> Result<RowResult> {
        let Some(hooks) = t.hooks() else {
            return self.get(t, &g);
        };
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &g.row)?;
        let mut result = RowResult {
            row: g.row.clone(),
            cells: Vec::new(),
        };
        if hooks.pre_get(&env, &mut g, &mut result).await? == Flow::Bypass {
            return Ok(result);
        }
        let mut result = self.get(t, &g)?;
        hooks.post_get(&env, &g, &mut result).await?;
        Ok(result)
    }

    async fn pre_mutation(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        m: &mut Mutation,
    ) -> Result<Flow> {
        let hook = match m {
            Mutation::Put(_) => MutationHook::PrePut,
            Mutation::Delete(_) => MutationHook::PreDelete,
        };
        if hooks.skips(hook) {
            return Ok(Flow::Continue);
        }
        let env = self.env_for(t, m.row())?;
        match m {
            Mutation::Put(p) => hooks.pre_put(&env, p).await,
            Mutation::Delete(d) => hooks.pre_delete(&env, d).await,
        }
    }

    async fn post_mutation(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        m: &Mutation,
    ) -> Result<()> {
        let hook = match m {
            Mutation::Put(_) => MutationHook::PostPut,
            Mutation::Delete(_) => MutationHook::PostDelete,
        };
        if hooks.skips(hook) {
            return Ok(());
        }
        let env = self.env_for(t, m.row())?;
        match m {
            Mutation::Put(p) => hooks.post_put(&env, p).await,
            Mutation::Delete(d) => hooks.post_delete(&env, d).await,
        }
    }

    /// [`Engine::mutate`] for a table with coprocessors: pre-hooks, validation, locks, the
    /// locked commit (which runs `pre_batch_mutate`), unlock, post-hooks. A post-hook error is
    /// returned although the write committed (as HBase's `postPut`).
    pub(super) async fn mutate_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        muts: Vec<Mutation>,
    ) -> Result<()> {
        let mut kept = Vec::with_capacity(muts.len());
        for mut m in muts {
            if self.pre_mutation(t, hooks, &mut m).await? == Flow::Continue {
                kept.push(m);
            }
        }
        if kept.is_empty() {
            return Ok(());
        }
        for m in &kept {
            self.validate_mutation(t, m)?;
        }
        let mut plan = LockPlan::default();
        loop {
            let locks = self
                .lock_planned(t, kept.iter().map(|m| m.row()), &plan)
                .await;
            let r = self.mutate_locked(t, &kept, &mut plan).await;
            drop(locks);
            if !plan.take_relock() {
                r?;
                break;
            }
        }
        let mut first_err = None;
        for m in &kept {
            if let Err(e) = self.post_mutation(t, hooks, m).await {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// `muts` grouped by the region each falls in, in region-id order.
    fn by_region(
        &self,
        t: &TableState,
        muts: &[&Mutation],
    ) -> Result<Vec<(Arc<Region>, Vec<usize>)>> {
        if let [m] = muts {
            return Ok(vec![(self.region_for(t, m.row())?, vec![0])]);
        }
        let mut by_region: BTreeMap<u64, (Arc<Region>, Vec<usize>)> = BTreeMap::new();
        for (i, m) in muts.iter().enumerate() {
            let r = self.region_for(t, m.row())?;
            by_region
                .entry(r.id)
                .or_insert_with(|| (r.clone(), Vec::new()))
                .1
                .push(i);
        }
        Ok(by_region.into_values().collect())
    }

    /// Runs `pre_batch_mutate` once per region of `muts` (the caller holds their row locks).
    /// Returns the veto of each operation and the writes the hooks added, checked against
    /// their tables; an error (a hook's, or an invalid added write as
    /// [`Error::InvalidAddedMutation`]) fails the whole batch.
    pub(super) async fn pre_batch(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        muts: &[&Mutation],
        now: crate::cell::Timestamp,
        pending: &[PreparedCell],
    ) -> Result<PreBatch> {
        let mut vetoes: Vec<Option<Error>> = muts.iter().map(|_| None).collect();
        let mut added: Vec<AddedWrite> = Vec::new();
        let mut absent: Vec<(Option<Arc<TableState>>, Bytes)> = Vec::new();
        for (region, idx) in self.by_region(t, muts)? {
            let ops: Vec<&Mutation> = idx.iter().filter_map(|i| muts.get(*i).copied()).collect();
            let env = HookEnv::new(self, &t.name, region);
            let mut mb = MiniBatch::new(&ops, now, pending);
            hooks.pre_batch_mutate(&env, &mut mb).await?;
            let (v, same, elsewhere, required) = mb.into_parts();
            for (name, row) in required {
                if name == t.name {
                    absent.push((None, row));
                } else {
                    let target = self.table(&name).map_err(|e| invalid_added(&name, e))?;
                    absent.push((Some(target), row));
                }
            }
            for (j, veto) in v.into_iter().enumerate() {
                if let (Some(e), Some(slot)) = (veto, idx.get(j).and_then(|i| vetoes.get_mut(*i))) {
                    *slot = Some(e);
                }
            }
            added.extend(same.into_iter().map(|m| (None, AddedOp::Mutation(m))));
            for (name, op) in elsewhere {
                if name == t.name {
                    added.push((None, op));
                } else {
                    let target = self.table(&name).map_err(|e| invalid_added(&name, e))?;
                    added.push((Some(target), op));
                }
            }
        }
        for (target, op) in &added {
            let target: &TableState = target.as_deref().unwrap_or(t);
            let checked = target.check_enabled().and_then(|()| match op {
                AddedOp::Mutation(m) | AddedOp::Owned(m) => self.validate_mutation(target, m),
                AddedOp::Increment(inc) => self.validate_increment(target, inc),
            });
            checked.map_err(|e| invalid_added(&target.name, e))?;
        }
        Ok(PreBatch {
            vetoes,
            added,
            absent,
        })
    }

    /// Commits a batch's prepared `cells` (of the operations `written`; the caller holds the
    /// row locks of `held`, rows of `t`, and the plan's extra rows) with the writes its hooks
    /// `added`: locks the rows those write and the rows required `absent`, checks the latter,
    /// prepares the added writes (increments read their counters under the lock) and commits
    /// everything as one WAL record and one sequence id, running `post_batch_mutate` before
    /// visibility. Returns that hook's error as `Ok(Some(e))`: the batch committed. When a
    /// row to lock is held by another writer out of lock order, sets `plan` to relock and
    /// returns an error having written nothing (see [`LockPlan`]).
    #[allow(clippy::too_many_arguments)]
    async fn commit_with_added(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        held: &[Bytes],
        written: &[&Mutation],
        mut cells: Vec<PreparedCell>,
        durability: Durability,
        added: Vec<AddedWrite>,
        absent: Vec<(Option<Arc<TableState>>, Bytes)>,
        plan: &mut LockPlan,
        now: crate::cell::Timestamp,
    ) -> Result<Option<Error>> {
        let post = PostApply {
            hooks,
            table: t,
            ops: written,
        };
        if added.is_empty() && absent.is_empty() {
            return self
                .commit_tables(&[t], cells, durability, Some(post))
                .await;
        }
        let names: Vec<&str> = added
            .iter()
            .map(|(target, _)| target_of(t, target).key.as_str())
            .collect();
        // Owned rows take no lock of their own: their owner's lock is held.
        let more: Vec<(&str, &[u8])> = names
            .iter()
            .zip(&added)
            .filter(|(_, (_, op))| !matches!(op, AddedOp::Owned(_)))
            .map(|(n, (_, op))| (*n, op.row().as_ref()))
            .chain(
                absent
                    .iter()
                    .map(|(target, row)| (target_of(t, target).key.as_str(), row.as_ref())),
            )
            .collect();
        let bounded = plan.attempts >= RELOCK_ATTEMPTS;
        let wait = Duration::from_millis(self.config.row_lock_wait_ms);
        let locked = if more.is_empty() {
            // Only owned rows were added: every lock they need is held.
            Ok(None)
        } else {
            self.locks
                .lock_more(
                    held.iter()
                        .map(|r| (t.key.as_str(), r.as_ref()))
                        .chain(plan.extra.iter().map(|(n, r)| (n.as_str(), r.as_ref()))),
                    &more,
                    bounded.then_some(wait),
                )
                .await
                .map(Some)
        };
        let _extra = match locked {
            Ok(g) => g,
            Err(_) if !bounded => {
                plan.attempts += 1;
                plan.relock = true;
                for (n, r) in &more {
                    if !plan
                        .extra
                        .iter()
                        .any(|(pn, pr)| pn == n && pr.as_ref() == *r)
                    {
                        plan.extra.push((n.to_string(), Bytes::copy_from_slice(r)));
                    }
                }
                return Err(Error::Busy("relocking in lock order".into()));
            }
            Err(i) => {
                return Err(Error::RowLockTimeout {
                    table: more.get(i).map(|(n, _)| n.to_string()).unwrap_or_default(),
                    row: more
                        .get(i)
                        .map(|(_, r)| String::from_utf8_lossy(r).into_owned())
                        .unwrap_or_default(),
                    waited_ms: self.config.row_lock_wait_ms,
                })
            }
        };
        for (target, row) in &absent {
            let target: &TableState = target.as_deref().unwrap_or(t);
            let region = self.region_for(target, row)?;
            let found = self.read_row_in(&region, &Get::new(row), self.mvcc.read_point())?;
            if !found.is_empty() {
                return Err(Error::UniqueViolation {
                    table: target.name.to_string(),
                    row: String::from_utf8_lossy(row).into_owned(),
                });
            }
        }
        // One timestamp for the whole batch: the added writes take the batch's own. A row
        // an added put or delete writes must not have been written at or after it (a delete
        // marker of the same millisecond would hide a put): if it was, nothing is written
        // and the caller runs the batch again past that time.
        let added_rows: Vec<(&TableState, &Bytes)> = added
            .iter()
            .filter_map(|(target, op)| match op {
                AddedOp::Mutation(m) => Some((target.as_deref().unwrap_or(t), m.row())),
                // An owned row's writes are ordered by its owner's clock turn.
                AddedOp::Increment(_) | AddedOp::Owned(_) => None,
            })
            .collect();
        let last = added_rows
            .iter()
            .filter_map(|(target, row)| self.row_slot(target, row))
            .map(|s| s.load(std::sync::atomic::Ordering::Acquire))
            .max()
            .unwrap_or(0);
        if last >= now && plan.attempts < RELOCK_ATTEMPTS {
            plan.attempts += 1;
            plan.min_ts = plan.min_ts.max(last);
            plan.relock = true;
            return Err(Error::Busy(
                "retrying past an added row's last write".into(),
            ));
        }
        let mut durability = durability;
        // Increments of one row are resolved together, amounts of one counter summed, so
        // that two increments of a counter in one batch do not read the same old value.
        let mut incs: BTreeMap<(&str, &Bytes), RowIncrements<'_>> = BTreeMap::new();
        let mut tables: Vec<&TableState> = vec![t];
        for ((target, op), name) in added.iter().zip(&names) {
            let target: &TableState = target.as_deref().unwrap_or(t);
            if !tables.iter().any(|x| x.name == target.name) {
                tables.push(target);
            }
            match op {
                AddedOp::Mutation(m) | AddedOp::Owned(m) => {
                    durability = strongest([durability, m.durability()]);
                    self.prepare(target, m, now, &mut cells)
                        .map_err(|e| invalid_added(&target.name, e))?;
                }
                AddedOp::Increment(inc) => {
                    durability = strongest([durability, inc.durability]);
                    let slot = incs
                        .entry((*name, &inc.row))
                        .or_insert_with(|| (target, BTreeMap::new()));
                    for (f, q, amount) in &inc.columns {
                        let sum = slot.1.entry((f, q)).or_insert(0);
                        *sum = sum.wrapping_add(*amount);
                    }
                }
            }
        }
        // Added writes go to other rows, often other regions that flush apart: only a WAL
        // record keeps them atomic with the batch across a crash, so a SKIP_WAL batch with
        // added writes is logged as ASYNC_WAL (see `Durability::SkipWal`).
        if !added.is_empty() && durability == crate::wal::Durability::SkipWal {
            durability = crate::wal::Durability::AsyncWal;
        }
        for ((_, row), (target, columns)) in incs {
            let deltas = columns
                .into_iter()
                .map(|((f, q), a)| (f, q, Delta::Add(a)))
                .collect();
            self.resolve_deltas(
                target,
                row,
                deltas,
                DeltaOptions::default(),
                now,
                &mut cells,
            )
            .map_err(|e| invalid_added(&target.name, e))?;
        }
        let out = self
            .commit_tables(&tables, cells, durability, Some(post))
            .await;
        for (target, row) in added_rows.into_iter().filter(|_| out.is_ok()) {
            if let Some(s) = self.row_slot(target, row) {
                s.fetch_max(now, std::sync::atomic::Ordering::AcqRel);
            }
        }
        out
    }

    /// Runs `post_batch_mutate` once per region of a commit's operations (the batch is in
    /// the MemStore, not yet visible).
    pub(super) async fn post_apply(self: &Arc<Self>, p: &PostApply<'_>) -> Result<()> {
        if p.hooks.skips(MutationHook::PostBatchMutate) {
            return Ok(());
        }
        for (region, idx) in self.by_region(p.table, p.ops)? {
            let ops: Vec<&Mutation> = idx.iter().filter_map(|i| p.ops.get(*i).copied()).collect();
            let env = HookEnv::new(self, &p.table.name, region);
            p.hooks.post_batch_mutate(&env, &ops).await?;
        }
        Ok(())
    }

    /// Runs `post_batch` once per region of `ops` with the batch's outcome; returns the
    /// first hook error.
    async fn post_batch_all(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        ops: &[&Mutation],
        outcome: &Result<()>,
    ) -> Result<()> {
        if hooks.skips(MutationHook::PostBatch) {
            return Ok(());
        }
        let mut first = None;
        for (region, idx) in self.by_region(t, ops)? {
            let region_ops: Vec<&Mutation> =
                idx.iter().filter_map(|i| ops.get(*i).copied()).collect();
            let env = HookEnv::new(self, &t.name, region);
            if let Err(e) = hooks.post_batch(&env, &region_ops, outcome).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The locked part of a hooked atomic write (`mutate`, `mutate_row`, a passed
    /// check-and-mutate, an increment or append): the caller holds the row locks of `muts`
    /// and of `plan`'s extra rows. Any veto fails it all. When the commit must relock
    /// ([`LockPlan`]) it returns an error having written nothing and run no `post_batch`.
    pub(super) async fn mutate_locked_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        muts: &[Mutation],
        plan: &mut LockPlan,
    ) -> Result<()> {
        let refs: Vec<&Mutation> = muts.iter().collect();
        let now = self
            .hooked_now(t, refs.iter().map(|m| m.row()), plan.min_ts)
            .await;
        let run = async {
            let mut cells = cells_with_room(refs.iter().copied());
            for m in &refs {
                self.prepare(t, m, now, &mut cells)?;
            }
            let pre = self.pre_batch(t, hooks, &refs, now, &cells).await?;
            if let Some(e) = pre.vetoes.into_iter().flatten().next() {
                return Err(e);
            }
            let durability = strongest(refs.iter().map(|m| m.durability()));
            let held: Vec<Bytes> = refs.iter().map(|m| m.row().clone()).collect();
            self.commit_with_added(
                t, hooks, &held, &refs, cells, durability, pre.added, pre.absent, plan, now,
            )
            .await
        };
        let (outcome, late) = match run.await {
            Ok(late) => (Ok(()), late),
            Err(e) => (Err(e), None),
        };
        // Only a write that committed moves its rows' clock: a vetoed or failed one wrote
        // nothing that a later write of the same millisecond could be hidden by.
        if outcome.is_ok() && !plan.relock {
            self.record_hooked(t, refs.iter().map(|m| m.row()), now);
        }
        if plan.relock {
            return outcome;
        }
        let post = self.post_batch_all(t, hooks, &refs, &outcome).await;
        outcome?;
        if let Some(e) = late {
            return Err(e);
        }
        post
    }

    /// The locked part of a hooked batch (the caller holds the row locks of `group` and of
    /// `plan`'s extra rows): prepare (a failed operation is answered and leaves `group`),
    /// `pre_batch_mutate` (vetoed operations are answered and leave `group`; a hook error
    /// answers every operation and empties it), commit with the added writes, `post_batch`.
    /// Returns the operations committed (their slots still empty unless a later hook failed
    /// them) and the commit's outcome. When the commit must relock ([`LockPlan`]) it returns
    /// no operation, leaving those still in `group` unanswered.
    pub(super) async fn batch_locked_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        group: &mut Vec<(usize, Mutation)>,
        results: &mut [Slot],
        plan: &mut LockPlan,
    ) -> (Vec<usize>, Result<()>) {
        let held: Vec<Bytes> = group.iter().map(|(_, m)| m.row().clone()).collect();
        let now = self.hooked_now(t, held.iter(), plan.min_ts).await;
        let mut cells = cells_with_room(group.iter().map(|(_, m)| m));
        let mut spans = Vec::with_capacity(group.len());
        for (i, m) in group.iter() {
            let mark = cells.len();
            match self.prepare(t, m, now, &mut cells) {
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
        let mut spans: Vec<std::ops::Range<usize>> = spans.into_iter().flatten().collect();
        let refs: Vec<&Mutation> = group.iter().map(|(_, m)| m).collect();
        let pre = self.pre_batch(t, hooks, &refs, now, &cells).await;
        let pre = match pre {
            Ok(pre) => {
                drop(refs);
                pre
            }
            Err(e) => {
                let outcome = Err(e);
                // A failed batch's post_batch error is dropped: the batch's error stands.
                let _ = self.post_batch_all(t, hooks, &refs, &outcome).await;
                drop(refs);
                if let Err(e) = &outcome {
                    for (i, _) in group.drain(..) {
                        set(results, i, Err(copy_error(e)));
                    }
                }
                return (Vec::new(), Ok(()));
            }
        };
        let mut vetoes = pre.vetoes.into_iter();
        let mut kept_spans = spans.drain(..);
        let mut keep = vec![false; cells.len()];
        group.retain(|(i, _)| {
            let span = kept_spans.next().unwrap_or_default();
            match vetoes.next().flatten() {
                Some(e) => {
                    set(results, *i, Err(e));
                    false
                }
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
        let run = self
            .commit_with_added(
                t, hooks, &held, &written, cells, durability, pre.added, pre.absent, plan, now,
            )
            .await;
        if run.is_ok() && !plan.relock {
            self.record_hooked(t, written.iter().map(|m| m.row()), now);
        }
        if plan.relock {
            return (Vec::new(), Ok(()));
        }
        let (outcome, late) = match run {
            Ok(late) => (Ok(()), late),
            Err(e) => (Err(e), None),
        };
        let post = self.post_batch_all(t, hooks, &written, &outcome).await;
        if outcome.is_ok() {
            if let Some(e) = late.or(post.err()) {
                for i in &ok {
                    set(results, *i, Err(copy_error(&e)));
                }
            }
        }
        (ok, outcome)
    }

    /// Answers `exists`, running the table's exists hooks when it has coprocessors (not the
    /// get hooks).
    pub(crate) async fn exists_hooked(
        self: &Arc<Self>,
        t: &TableState,
        mut g: Get,
    ) -> Result<bool> {
        let Some(hooks) = t.hooks() else {
            return Ok(!self.get(t, &g)?.is_empty());
        };
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &g.row)?;
        let mut exists = false;
        if hooks.pre_exists(&env, &mut g, &mut exists).await? == Flow::Bypass {
            return Ok(exists);
        }
        let mut exists = !self.get(t, &g)?.is_empty();
        hooks.post_exists(&env, &g, &mut exists).await?;
        Ok(exists)
    }

    /// [`Engine::increment`] for a table with coprocessors.
    pub(super) async fn increment_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        mut inc: Increment,
    ) -> Result<RowResult> {
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &inc.row)?;
        let mut result = RowResult {
            row: inc.row.clone(),
            cells: Vec::new(),
        };
        if hooks.pre_increment(&env, &mut inc, &mut result).await? == Flow::Bypass {
            return Ok(result);
        }
        let deltas = inc
            .columns
            .iter()
            .map(|(f, q, a)| (f, q, Delta::Add(*a)))
            .collect();
        let mut result = self
            .read_modify_write_hooked(
                t,
                &inc.row,
                inc.durability,
                DeltaOptions {
                    range: inc.time_range,
                    ttl_ms: inc.ttl_ms,
                },
                deltas,
            )
            .await?;
        hooks.post_increment(&env, &inc, &mut result).await?;
        Ok(result)
    }

    /// [`Engine::append`] for a table with coprocessors.
    pub(super) async fn append_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        mut app: Append,
    ) -> Result<RowResult> {
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &app.row)?;
        let mut result = RowResult {
            row: app.row.clone(),
            cells: Vec::new(),
        };
        if hooks.pre_append(&env, &mut app, &mut result).await? == Flow::Bypass {
            return Ok(result);
        }
        let deltas = app
            .columns
            .iter()
            .map(|(f, q, v)| (f, q, Delta::Append(v.clone())))
            .collect();
        let mut result = self
            .read_modify_write_hooked(
                t,
                &app.row,
                app.durability,
                DeltaOptions {
                    range: app.time_range,
                    ttl_ms: app.ttl_ms,
                },
                deltas,
            )
            .await?;
        hooks.post_append(&env, &app, &mut result).await?;
        Ok(result)
    }

    /// [`Engine::check_and_mutate`] for a table with coprocessors.
    pub(super) async fn check_and_mutate_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        mut cam: CheckAndMutate,
    ) -> Result<bool> {
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &cam.row)?;
        let mut passed = false;
        if hooks
            .pre_check_and_mutate(&env, &mut cam, &mut passed)
            .await?
            == Flow::Bypass
        {
            return Ok(passed);
        }
        let mut passed = self.check_and_mutate_unhooked(t, cam.clone()).await?;
        hooks.post_check_and_mutate(&env, &cam, &mut passed).await?;
        Ok(passed)
    }

    /// An increment or append of a table with hooks: under the row lock, the new values are
    /// read and written as a put of those values at their resolved timestamps through the
    /// locked write path, so the batch hooks see it (an index maintains itself on it).
    pub(super) async fn read_modify_write_hooked(
        self: &Arc<Self>,
        t: &TableState,
        row: &Bytes,
        durability: Durability,
        opts: DeltaOptions,
        deltas: Vec<(&Bytes, &Bytes, Delta)>,
    ) -> Result<RowResult> {
        self.validate_read_modify_write(t, row, &deltas)?;
        let mut plan = LockPlan::default();
        loop {
            let locks = self.lock_planned(t, std::iter::once(row), &plan).await;
            let mut cells = Vec::new();
            let result = self.resolve_deltas(t, row, deltas.clone(), opts, now_ms(), &mut cells)?;
            let mut put = crate::ops::Put::new(row).durability(durability);
            if let Some(ttl) = opts.ttl_ms {
                put = put.ttl_ms(ttl);
            }
            for c in &result {
                put = put.add_column_ts(&c.family, &c.qualifier, c.timestamp, &c.value);
            }
            let r = self
                .mutate_locked(t, &[Mutation::Put(put)], &mut plan)
                .await;
            drop(locks);
            if !plan.take_relock() {
                r?;
                return Ok(RowResult {
                    row: row.clone(),
                    cells: result,
                });
            }
        }
    }

    /// A batch's pre-hooks: returns the mutations to run; bypassed ones are answered
    /// `Done`, failed ones with their error.
    pub(super) async fn batch_pre_hooks(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        group: Vec<(usize, Mutation)>,
        results: &mut [Slot],
    ) -> Vec<(usize, Mutation)> {
        let mut kept = Vec::with_capacity(group.len());
        for (i, mut m) in group {
            match self.pre_mutation(t, hooks, &mut m).await {
                Ok(Flow::Continue) => kept.push((i, m)),
                Ok(Flow::Bypass) => set(results, i, Ok(BatchOutcome::Done)),
                Err(e) => set(results, i, Err(e)),
            }
        }
        kept
    }

    /// A batch's post-hooks for the operations in `ok` (committed); a failing hook turns
    /// its operation's result into the error.
    pub(super) async fn batch_post_hooks(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        group: &[(usize, Mutation)],
        ok: &[usize],
        results: &mut [Slot],
    ) {
        for (i, m) in group {
            if ok.binary_search(i).is_ok() {
                if let Err(e) = self.post_mutation(t, hooks, m).await {
                    set(results, *i, Err(e));
                }
            }
        }
    }
}

/// An empty vector for the cells of `muts`, with room for the cells of the writes their
/// hooks add too (an index row or two per row).
fn cells_with_room<'m>(muts: impl Iterator<Item = &'m Mutation>) -> Vec<PreparedCell> {
    let hint: usize = muts.map(super::write::cell_hint).sum();
    Vec::with_capacity(hint + hint / 2 + 2)
}

impl crate::coprocessor::HookReads for Arc<Engine> {
    fn get(&self, table: &TableName, g: &Get) -> Result<RowResult> {
        let t = self.table(table)?;
        Engine::get(self, &t, g)
    }

    fn get_before_after(
        &self,
        region: &Region,
        g: &Get,
        pending: &[PreparedCell],
    ) -> Result<(RowResult, RowResult)> {
        self.read_row_before_after(region, g, pending)
    }
}
