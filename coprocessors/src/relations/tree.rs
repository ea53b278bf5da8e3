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
//! the tree has no cycle, also under concurrent moves: a move of `c` under `p` is refused
//! when `c` can be reached from `p` along any edge that is committed or may yet commit.
//!
//! How concurrent moves are kept from closing a cycle together: the edges of moves in
//! flight (checked, not yet visible) are kept in a registry shared by the instances one
//! [`crate::Registry`] builds (so a reloaded chain shares it too), per table and parent
//! family, from `pre_batch_mutate` until `post_batch` (which runs once
//! the write is visible or has failed, row locks still held). Cycle checks run one at a time
//! under the registry's mutex and walk the union of the committed edges (read at the current
//! read point), the registered edges and the batch's own moves, so of any moves that would
//! close a cycle together, the last one checked sees all the others and is refused. An entry
//! whose `post_batch` never runs (a batch whose operations were all vetoed by a later
//! observer) is dropped by the next batch of its row (which holds that row's lock, so the
//! entry is stale); until then it can only refuse more, never less.

use super::changes::{lossy, plan, read_links, Refusal, RowPlan};
use super::guard::RelationGuard;
use super::optional;
use crate::observer::{ObserverContext, RegionObserver};
use crate::registry::Args;
use async_trait::async_trait;
use basalt_core::client::{Append, Delete, Increment, Mutation, Put, RowResult};
use basalt_core::coprocessor::MiniBatch;
use basalt_core::Result;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// Edges (row -> new parent) of moves in flight, per `<table>/<parent family>`, shared by
/// the [`TreeLinks`] instances of one engine (see the module doc).
pub(crate) type InFlight = Arc<Mutex<HashMap<String, BTreeMap<Bytes, Bytes>>>>;

/// How far a cycle check walks up before it gives up and refuses the parent.
const MAX_DEPTH: usize = 10_000;

/// Keeps the `child:` family of a tree table symmetric with its `parent:` family.
#[derive(Debug)]
pub struct TreeLinks {
    parent: Bytes,
    child: Bytes,
    in_flight: InFlight,
}

impl TreeLinks {
    /// A tree whose parent links live in `parent` and child links in `child`. The instance
    /// has its own registry of moves in flight: build instances through
    /// [`super::register_relations`] so that every instance of one engine shares one (an
    /// instance alone only sees its own moves in flight).
    pub fn new(parent: impl AsRef<[u8]>, child: impl AsRef<[u8]>) -> Self {
        TreeLinks {
            parent: Bytes::copy_from_slice(parent.as_ref()),
            child: Bytes::copy_from_slice(child.as_ref()),
            in_flight: InFlight::default(),
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

    /// Shares `in_flight` (the moves in flight) with the other instances that use it.
    pub(crate) fn sharing(mut self, in_flight: InFlight) -> Self {
        self.in_flight = in_flight;
        self
    }

    /// The registry key of this tree in `ctx`'s table.
    fn key(&self, ctx: &ObserverContext<'_>) -> String {
        format!("{}/{}", ctx.table(), lossy(&self.parent))
    }

    /// True when `row` can be reached from `parent` along committed edges, `flying` ones
    /// (other batches' moves in flight) or `planned` ones (this batch's moves): `parent` is
    /// `row` or may be one of its descendants. Gives up (true) past [`MAX_DEPTH`] rows.
    fn closes_cycle(
        &self,
        ctx: &ObserverContext<'_>,
        flying: &BTreeMap<Bytes, Bytes>,
        planned: &BTreeMap<Bytes, Bytes>,
        row: &Bytes,
        parent: &Bytes,
    ) -> Result<bool> {
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::from([parent.clone()]);
        while let Some(node) = queue.pop_front() {
            if node == *row {
                return Ok(true);
            }
            if !seen.insert(node.clone()) {
                continue;
            }
            if seen.len() > MAX_DEPTH {
                return Ok(true);
            }
            queue.extend(read_links(ctx, &node, &self.parent)?.into_keys());
            queue.extend(flying.get(&node).cloned());
            queue.extend(planned.get(&node).cloned());
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
        // This batch's moves: the row's new parent.
        let planned: BTreeMap<Bytes, Bytes> = plans
            .iter()
            .filter_map(|p| Some((p.row.clone(), p.put.iter().next()?.clone())))
            .collect();
        let mut kept = Vec::with_capacity(plans.len());
        {
            let mut registry = self.in_flight.lock();
            let flying = registry.entry(self.key(ctx)).or_default();
            // This batch holds its rows' locks: an entry of one of them is stale.
            for p in &plans {
                flying.remove(&p.row);
            }
            for p in plans {
                let cycle = match p.put.iter().next() {
                    Some(parent) if !p.before.contains_key(parent) => self
                        .closes_cycle(ctx, flying, &planned, &p.row, parent)?
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
            for p in &kept {
                if let Some(parent) = p.put.iter().next() {
                    if !p.before.contains_key(parent) {
                        flying.insert(p.row.clone(), parent.clone());
                    }
                }
            }
        }
        for (i, r) in refused {
            batch.veto(i, r.into_error());
        }
        // The old parent cell is deleted at the batch's own timestamp, as its other cells.
        let now = batch.now();
        for p in &kept {
            for old in replaced.get(&p.row).into_iter().flatten() {
                batch.add_mutation(Mutation::Delete(Delete::new(&p.row).add_columns_ts(
                    &self.parent,
                    old,
                    now,
                )));
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
        ctx: &mut ObserverContext<'_>,
        ops: &[&Mutation],
        _outcome: &Result<()>,
    ) -> Result<()> {
        // The batch's moves are visible (or failed): they leave the registry.
        let key = self.key(ctx);
        let mut registry = self.in_flight.lock();
        if let Some(flying) = registry.get_mut(&key) {
            for m in ops {
                flying.remove(m.row());
            }
            if flying.is_empty() {
                registry.remove(&key);
            }
        }
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
