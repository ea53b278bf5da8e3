//! The locked part of a hooked write: `pre_batch_mutate` per region under the row locks,
//! the writes the hooks added checked and locked, one commit of the batch and its added
//! writes (one WAL record, one sequence id across every table written), then
//! `post_batch_mutate` and `post_batch` per region with the outcome.

use super::*;
use crate::coprocessor::{AddedOp, HookEnv, MiniBatch, MutationHook, RegionHooks};
use crate::error::{Error, Result};
use crate::ops::{Get, Mutation};
use crate::server::write::{strongest, Delta, DeltaOptions, PreparedCell};
use crate::server::{Engine, TableState};
use crate::wal::Durability;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

impl Engine {
    /// Runs `pre_batch_mutate` once per region of `muts` (the caller holds their row locks).
    /// Returns the veto of each operation and the writes the hooks added, checked against
    /// their tables; an error (a hook's, or an invalid added write as
    /// [`Error::InvalidAddedMutation`]) fails the whole batch.
    pub(in crate::server) async fn pre_batch(
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
    pub(super) async fn commit_with_added(
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
            let region = target.online_region(row)?;
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
    pub(in crate::server) async fn post_apply(self: &Arc<Self>, p: &PostApply<'_>) -> Result<()> {
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
    pub(super) async fn post_batch_all(
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
    pub(in crate::server) async fn mutate_locked_hooked(
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
}

/// An empty vector for the cells of `muts`, with room for the cells of the writes their
/// hooks add too (an index row or two per row).
pub(super) fn cells_with_room<'m>(muts: impl Iterator<Item = &'m Mutation>) -> Vec<PreparedCell> {
    let hint: usize = muts.map(crate::server::write::cell_hint).sum();
    Vec::with_capacity(hint + hint / 2 + 2)
}
