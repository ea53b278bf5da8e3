//! [`InverseRelation`]: the observer on table A that keeps table B's reverse links.
//!
//! A link is a cell `A[a]/fam:b = v`; its reverse is `B[b]/fam':a = v`. Under `a`'s row
//! lock, `pre_batch_mutate` reads `a`'s links, derives the links after the batch
//! ([`super::changes::plan`]) and adds to the batch, with `MiniBatch::add_mutation_to`, a
//! put of the reverse of every link put and a column delete of the reverse of every link
//! gone. Both sides commit in one WAL record and one MVCC step. Guard `fam'` on B with a
//! [`super::RelationGuard`].

use super::changes::plan;
use super::guard::RelationGuard;
use super::{required, table_arg, RowClock, INVERSE_RELATION};
use crate::observer::{ObserverContext, RegionObserver};
use crate::registry::Args;
use async_trait::async_trait;
use basalt_core::client::{Append, Delete, Increment, Mutation, Put, RowResult};
use basalt_core::coprocessor::MiniBatch;
use basalt_core::{Result, TableName};
use bytes::Bytes;

/// Mirrors the links of one family of its table into another table's family.
#[derive(Debug)]
pub struct InverseRelation {
    family: Bytes,
    target: TableName,
    target_family: Bytes,
    clock: RowClock,
}

impl InverseRelation {
    /// Links in `family` are mirrored into `target_family` of `target`.
    pub fn new(
        family: impl AsRef<[u8]>,
        target: TableName,
        target_family: impl AsRef<[u8]>,
    ) -> Self {
        InverseRelation {
            family: Bytes::copy_from_slice(family.as_ref()),
            target,
            target_family: Bytes::copy_from_slice(target_family.as_ref()),
            clock: RowClock::default(),
        }
    }

    /// From the arguments `family`, `target_table` and `target_family`.
    pub fn from_args(args: &Args) -> Result<Self> {
        Ok(Self::new(
            required(args, INVERSE_RELATION, "family")?,
            table_arg(args, INVERSE_RELATION, "target_table")?,
            required(args, INVERSE_RELATION, "target_family")?,
        ))
    }
}

#[async_trait]
impl RegionObserver for InverseRelation {
    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        let plans = plan(ctx, batch, &self.family)?;
        if plans.is_empty() {
            return Ok(());
        }
        self.clock
            .wait_past(plans.iter().map(|p| p.row.as_ref()))
            .await;
        for p in &plans {
            for (linked, value) in p.edits() {
                let m = match value {
                    Some(v) => {
                        Mutation::Put(Put::new(&linked).add_column(&self.target_family, &p.row, v))
                    }
                    None => Mutation::Delete(
                        Delete::new(&linked).add_columns(&self.target_family, &p.row),
                    ),
                };
                batch.add_mutation_to(self.target.clone(), m);
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
            std::slice::from_ref(&self.family),
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
            std::slice::from_ref(&self.family),
            append.columns().iter().map(|(f, _, _)| f),
        )
    }
}
