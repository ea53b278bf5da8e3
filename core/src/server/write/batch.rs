//! Batches on the write path: the puts and deletes of a batch that pass validation commit
//! together as one atomic batch (one WAL record, one sequence id); its other operations
//! run after it; every operation gets its own result, in order.

use super::*;
use crate::error::{Error, Result};
use crate::ops::{BatchOp, BatchOutcome, Mutation};
use crate::server::hooks::LockPlan;
use crate::server::{now_ms, Engine, TableState};
use crate::wal::Durability;
use std::sync::Arc;

impl Engine {
    /// Runs many operations; one result per operation, in order. Puts and deletes that pass
    /// validation commit together as one atomic batch; the other operations run after it.
    pub(crate) async fn batch(
        self: &Arc<Self>,
        t: &TableState,
        ops: Vec<BatchOp>,
    ) -> Result<Vec<Result<BatchOutcome>>> {
        t.check_enabled()?;
        let hooks = t.hooks();
        let mut results: Vec<Option<Result<BatchOutcome>>> = (0..ops.len()).map(|_| None).collect();
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
            group = self.batch_pre_hooks(t, h, group, &mut results).await;
        }
        group.retain(|(i, m)| match self.validate_mutation(t, m) {
            Ok(()) => true,
            Err(e) => {
                if let Some(slot) = results.get_mut(*i) {
                    *slot = Some(Err(e));
                }
                false
            }
        });
        let mut plan = LockPlan::default();
        while !group.is_empty() {
            let locks = self
                .lock_planned(t, group.iter().map(|(_, m)| m.row()), &plan)
                .await;
            // Under the locks, the table's current hooks: batch hooks that arrived since the
            // pre-hooks ran (an index being created) must see this write.
            let locked_hooks = t.hooks();
            let (ok, outcome) = match &locked_hooks {
                None => {
                    let (cells, ok, durability) = self.prepare_group(t, &group, &mut results);
                    (ok, self.commit(t, cells, durability).await)
                }
                Some(h) => {
                    self.batch_locked_hooked(t, h, &mut group, &mut results, &mut plan)
                        .await
                }
            };
            if plan.take_relock() {
                drop(locks);
                continue;
            }
            for i in &ok {
                // A slot already answered holds a later hook's error.
                if let Some(slot @ None) = results.get_mut(*i) {
                    *slot = Some(match &outcome {
                        Ok(()) => Ok(BatchOutcome::Done),
                        Err(e) => Err(crate::server::hooks::copy_error(e)),
                    });
                }
            }
            drop(locks);
            if let (Some(h), Ok(())) = (&hooks, &outcome) {
                self.batch_post_hooks(t, h, &group, &ok, &mut results).await;
            }
            break;
        }
        for (i, op) in rest {
            let r = match op {
                BatchOp::Get(g) => self.get_hooked(t, g).await.map(BatchOutcome::Row),
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
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(r);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::bad_argument("operation not run"))))
            .collect())
    }
}

impl Engine {
    /// Prepares a batch's mutations (the caller holds their row locks): the cells, the
    /// indexes of the operations prepared (a failed one is answered with its error) and the
    /// strongest durability among them.
    pub(in crate::server) fn prepare_group(
        &self,
        t: &TableState,
        group: &[(usize, Mutation)],
        results: &mut [Option<Result<BatchOutcome>>],
    ) -> (Vec<PreparedCell>, Vec<usize>, Durability) {
        let now = now_ms();
        let mut cells = Vec::new();
        let mut ok = Vec::new();
        for (i, m) in group {
            let mark = cells.len();
            match self.prepare(t, m, now, &mut cells) {
                Ok(()) => ok.push(*i),
                Err(e) => {
                    cells.truncate(mark);
                    if let Some(slot) = results.get_mut(*i) {
                        *slot = Some(Err(e));
                    }
                }
            }
        }
        let durability = strongest(
            group
                .iter()
                .filter(|(i, _)| ok.binary_search(i).is_ok())
                .map(|(_, m)| m.durability()),
        );
        (cells, ok, durability)
    }
}

/// The number of runs of consecutive cells of one region.
pub(super) fn runs_by_region(cells: &[PreparedCell]) -> usize {
    1 + cells
        .windows(2)
        .filter(|w| matches!(w, [a, b] if !Arc::ptr_eq(&a.region, &b.region)))
        .count()
}

/// About how many cells a mutation writes.
pub(in crate::server) fn cell_hint(m: &Mutation) -> usize {
    match m {
        Mutation::Put(p) => p.cells().len(),
        Mutation::Delete(d) => d.kinds.len().max(1),
    }
}
