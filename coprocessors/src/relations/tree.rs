//! [`TreeLinks`]: a tree in one table, `parent:<p>` on a row and `child:<row>` on `p` kept
//! symmetric.
//!
//! Users write only the parent side: a put of `parent:<p> = v` on row `c` makes `p` the
//! parent of `c` (the value, e.g. a label, is copied to `child:<c>` on `p`); deleting the
//! cell (column or family delete) makes `c` a root. Under `c`'s row lock, `pre_batch_mutate`
//! reads `c`'s parent, and adds to the batch: the delete of the old `parent:` cell when a
//! new parent replaces it, the delete of `child:<c>` on the old parent and the put of
//! `child:<c>` on the new one, all in the same atomic unit.
//!
//! Invariants: a row has at most one parent (a batch naming two is refused); `child:` is
//! written only by this observer (user writes to it, row deletes included, are refused);
//! a parent that is the row itself or one of its descendants is refused, checked against
//! the committed tree and the batch's own moves. Limit: two concurrent batches, each
//! moving one of two rows under the other, each see the committed tree and can together
//! close a cycle; [`TreeLinks`] readers should bound walks up the tree (the `categories`
//! example does).

use super::changes::{lossy, plan, read_links, Refusal, RowPlan};
use super::guard::RelationGuard;
use super::{optional, RowClock};
use crate::observer::{ObserverContext, RegionObserver};
use crate::registry::Args;
use async_trait::async_trait;
use basalt_core::client::{Append, Delete, Increment, Mutation, Put, RowResult};
use basalt_core::coprocessor::MiniBatch;
use basalt_core::Result;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// How far a cycle check walks up before it gives up and refuses the parent.
const MAX_DEPTH: usize = 10_000;

/// Keeps the `child:` family of a tree table symmetric with its `parent:` family.
#[derive(Debug)]
pub struct TreeLinks {
    parent: Bytes,
    child: Bytes,
    clock: RowClock,
}

impl TreeLinks {
    /// A tree whose parent links live in `parent` and child links in `child`.
    pub fn new(parent: impl AsRef<[u8]>, child: impl AsRef<[u8]>) -> Self {
        TreeLinks {
            parent: Bytes::copy_from_slice(parent.as_ref()),
            child: Bytes::copy_from_slice(child.as_ref()),
            clock: RowClock::default(),
        }
    }

    /// From the arguments `parent_family` (default `parent`) and `child_family` (default
    /// `child`).
    pub fn from_args(args: &Args) -> Result<Self> {
        Ok(Self::new(
            optional(args, "parent_family", "parent"),
            optional(args, "child_family", "child"),
        ))
    }

    /// The parent of `row` after the batch: its plan when the batch moves it, else the
    /// committed tree.
    fn parent_of(
        &self,
        ctx: &ObserverContext<'_>,
        planned: &BTreeMap<Bytes, Option<Bytes>>,
        row: &Bytes,
    ) -> Result<Option<Bytes>> {
        if let Some(p) = planned.get(row) {
            return Ok(p.clone());
        }
        Ok(read_links(ctx, row, &self.parent)?.into_keys().next())
    }

    /// True when `parent` is `row` or one of its descendants.
    fn closes_cycle(
        &self,
        ctx: &ObserverContext<'_>,
        planned: &BTreeMap<Bytes, Option<Bytes>>,
        row: &Bytes,
        parent: &Bytes,
    ) -> Result<bool> {
        let mut seen = BTreeSet::new();
        let mut cur = Some(parent.clone());
        while let Some(c) = cur {
            if c == *row || !seen.insert(c.clone()) || seen.len() > MAX_DEPTH {
                return Ok(true);
            }
            cur = self.parent_of(ctx, planned, &c)?;
        }
        Ok(false)
    }

    /// Applies the one-parent rule to `p`: the new parent replaces the old ones, whose
    /// cells are deleted. Returns the cells to delete, or the refusal.
    fn one_parent(&self, p: &mut RowPlan) -> std::result::Result<Vec<Bytes>, Refusal> {
        if p.put.len() > 1 {
            return Err(Refusal::TwoParents { row: lossy(&p.row) });
        }
        let Some(new) = p.put.iter().next().cloned() else {
            return Ok(Vec::new());
        };
        let old: Vec<Bytes> = p.after.keys().filter(|q| **q != new).cloned().collect();
        for q in &old {
            p.forget(q);
        }
        Ok(old)
    }
}

#[async_trait]
impl RegionObserver for TreeLinks {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        RelationGuard::check_batch(std::slice::from_ref(&self.child), batch);
        let mut plans = plan(ctx, batch, &self.parent)?;
        if plans.is_empty() {
            return Ok(());
        }
        // One parent per row; then refuse parents that close a cycle.
        let mut replaced = BTreeMap::new();
        let mut refused: Vec<(usize, Refusal)> = Vec::new();
        plans.retain_mut(|p| match self.one_parent(p) {
            Ok(old) => {
                replaced.insert(p.row.clone(), old);
                true
            }
            Err(r) => {
                refused.extend(p.ops.iter().map(|i| (*i, r.clone())));
                false
            }
        });
        let planned: BTreeMap<Bytes, Option<Bytes>> = plans
            .iter()
            .map(|p| (p.row.clone(), p.after.keys().next().cloned()))
            .collect();
        let mut kept = Vec::with_capacity(plans.len());
        for p in plans {
            let cycle = match p.put.iter().next() {
                Some(parent) if !p.before.contains_key(parent) => self
                    .closes_cycle(ctx, &planned, &p.row, parent)?
                    .then(|| Refusal::Cycle {
                        row: lossy(&p.row),
                        parent: lossy(parent),
                    }),
                _ => None,
            };
            match cycle {
                Some(r) => refused.extend(p.ops.iter().map(|i| (*i, r.clone()))),
                None => kept.push(p),
            }
        }
        for (i, r) in refused {
            batch.veto(i, r.into_error());
        }
        self.clock
            .wait_past(kept.iter().map(|p| p.row.as_ref()))
            .await;
        for p in &kept {
            for old in replaced.get(&p.row).into_iter().flatten() {
                batch.add_mutation(Mutation::Delete(
                    Delete::new(&p.row).add_columns(&self.parent, old),
                ));
            }
            for (parent, value) in p.edits() {
                let m = match value {
                    Some(v) => Mutation::Put(Put::new(&parent).add_column(&self.child, &p.row, v)),
                    None => Mutation::Delete(Delete::new(&parent).add_columns(&self.child, &p.row)),
                };
                batch.add_mutation(m);
            }
        }
        Ok(())
    }

    async fn post_batch(
        &self,
        _ctx: &mut ObserverContext<'_>,
        ops: &[&Mutation],
        _outcome: &Result<()>,
    ) -> Result<()> {
        self.clock.record(ops.iter().map(|m| m.row().as_ref()));
        Ok(())
    }

    async fn pre_increment(
        &self,
        _ctx: &mut ObserverContext<'_>,
        inc: &mut Increment,
        _result: &mut RowResult,
    ) -> Result<()> {
        RelationGuard::check_columns(
            &[self.parent.clone(), self.child.clone()],
            inc.columns().iter().map(|(f, _, _)| f),
        )
    }

    async fn pre_append(
        &self,
        _ctx: &mut ObserverContext<'_>,
        append: &mut Append,
        _result: &mut RowResult,
    ) -> Result<()> {
        RelationGuard::check_columns(
            &[self.parent.clone(), self.child.clone()],
            append.columns().iter().map(|(f, _, _)| f),
        )
    }
}
