//! The batch hooks of a write, under its row locks: `pre_batch_mutate` per region (its
//! vetoes and its added writes, checked against their tables), `post_batch_mutate` per
//! region between the MemStore inserts and visibility, and `post_batch` per region with the
//! outcome.

use super::{by_region, invalid_added, Absent, AddedWrite, HookCalls, PostApply, PreBatch};
use crate::coprocessor::{AddedOp, HookEnv, MiniBatch, MutationHook, RowOwner};
use crate::error::{Error, Result};
use crate::ops::Mutation;
use crate::region::PreparedCell;
use crate::server::shared::TableState;
use crate::server::validate::{validate_increment, validate_mutation};
use bytes::Bytes;

impl<'a> HookCalls<'a> {
    /// Runs `pre_batch_mutate` once per region of `muts` (the caller holds their row locks).
    /// Returns the veto of each operation and the writes the hooks added, checked against
    /// their tables; an error (a hook's, or an invalid added write as
    /// [`Error::InvalidAddedMutation`]) fails the whole batch.
    pub(crate) async fn pre_batch(
        &self,
        muts: &[&Mutation],
        now: crate::cell::Timestamp,
        pending: &[PreparedCell],
    ) -> Result<PreBatch> {
        let mut added: Vec<AddedWrite> = Vec::new();
        let mut absent: Vec<Absent> = Vec::new();
        let mut local_absent: Vec<(Bytes, Option<RowOwner>)> = Vec::new();
        if self.hooks.skips(MutationHook::PreBatchMutate) {
            // No veto: an empty list (vetoes past its end are none).
            return Ok(PreBatch {
                vetoes: Vec::new(),
                replaced: Vec::new(),
                added,
                absent,
                local_absent,
            });
        }
        let mut vetoes: Vec<Option<Error>> = muts.iter().map(|_| None).collect();
        let mut replaced: Vec<bool> = muts.iter().map(|_| false).collect();
        let t = self.t;
        for (region, idx) in by_region(t, muts)? {
            let ops: Vec<&Mutation> = idx.iter().filter_map(|i| muts.get(*i).copied()).collect();
            let env = HookEnv::new(self.reads, &t.name, region);
            let mut mb = MiniBatch::new(&ops, now, pending);
            self.hooks.pre_batch_mutate(&env, &mut mb).await?;
            let (v, r, same, elsewhere, required, local) = mb.into_parts();
            for (j, was) in r.into_iter().enumerate() {
                if let (true, Some(slot)) = (was, idx.get(j).and_then(|i| replaced.get_mut(*i))) {
                    *slot = true;
                }
            }
            local_absent.extend(local);
            for (name, row, owner) in required {
                if name == t.name {
                    absent.push((None, row, owner));
                } else {
                    let target = self
                        .reads
                        .shared
                        .table(&name)
                        .map_err(|e| invalid_added(&name, e))?;
                    absent.push((Some(target), row, owner));
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
                    let target = self
                        .reads
                        .shared
                        .table(&name)
                        .map_err(|e| invalid_added(&name, e))?;
                    added.push((Some(target), op));
                }
            }
        }
        for (target, op) in &added {
            let target: &TableState = target.as_deref().unwrap_or(t);
            let checked = target.check_enabled().and_then(|()| match op {
                AddedOp::Mutation(m) | AddedOp::Owned(m) => {
                    validate_mutation(&self.reads.shared.config, target, m)
                }
                AddedOp::Increment(inc) => validate_increment(target, inc),
            });
            checked.map_err(|e| invalid_added(&target.name, e))?;
        }
        Ok(PreBatch {
            vetoes,
            replaced,
            added,
            absent,
            local_absent,
        })
    }

    /// Runs `post_batch_mutate` once per region of a commit's operations (the batch is in
    /// the MemStore, not yet visible).
    pub(crate) fn post_apply(&self, ops: &'a [&'a Mutation]) -> PostApply<'a> {
        PostApply { calls: *self, ops }
    }

    /// Runs `post_batch` once per region of `ops` with the batch's outcome; returns the
    /// first hook error.
    pub(crate) async fn post_batch_all(
        &self,
        ops: &[&Mutation],
        outcome: &Result<()>,
    ) -> Result<()> {
        if self.hooks.skips(MutationHook::PostBatch) {
            return Ok(());
        }
        let mut first = None;
        for (region, idx) in by_region(self.t, ops)? {
            let region_ops: Vec<&Mutation> =
                idx.iter().filter_map(|i| ops.get(*i).copied()).collect();
            let env = HookEnv::new(self.reads, &self.t.name, region);
            if let Err(e) = self.hooks.post_batch(&env, &region_ops, outcome).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl PostApply<'_> {
    /// Runs `post_batch_mutate` once per region of the commit's operations (the batch is in
    /// the MemStore, not yet visible).
    pub(crate) async fn run(&self) -> Result<()> {
        let calls = &self.calls;
        if calls.hooks.skips(MutationHook::PostBatchMutate) {
            return Ok(());
        }
        for (region, idx) in by_region(calls.t, self.ops)? {
            let ops: Vec<&Mutation> = idx
                .iter()
                .filter_map(|i| self.ops.get(*i).copied())
                .collect();
            let env = HookEnv::new(calls.reads, &calls.t.name, region);
            calls.hooks.post_batch_mutate(&env, &ops).await?;
        }
        Ok(())
    }
}
