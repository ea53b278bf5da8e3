//! [`RelationGuard`]: refuses user writes to the derived side of a relation.
//!
//! Invariant: on a table with the guard, a derived family changes only through the writes a
//! relation observer adds to another table's batch (added writes run no observer, so they
//! pass). Refused: puts into the family, deletes of it of any kind, row deletes (they would
//! delete it), increments and appends touching it. A row of the derived table is deleted
//! family by family (`Delete::add_family` for every other family).

use super::changes::{writes_family, Refusal};
use super::required;
use crate::observer::{ObserverContext, RegionObserver};
use crate::registry::Args;
use async_trait::async_trait;
use basalt_core::client::{Append, Increment, RowResult};
use basalt_core::coprocessor::MiniBatch;
use basalt_core::Result;
use bytes::Bytes;

/// Refuses user writes to the families it guards.
#[derive(Debug, Clone)]
pub struct RelationGuard {
    families: Vec<Bytes>,
}

impl RelationGuard {
    /// A guard of `families`.
    pub fn new<I, F>(families: I) -> Self
    where
        I: IntoIterator<Item = F>,
        F: AsRef<[u8]>,
    {
        RelationGuard {
            families: families
                .into_iter()
                .map(|f| Bytes::copy_from_slice(f.as_ref()))
                .collect(),
        }
    }

    /// From the argument `families` (comma-separated).
    pub fn from_args(args: &Args) -> Result<Self> {
        let list = required(args, super::RELATION_GUARD, "families")?;
        Ok(Self::new(
            list.split(',').map(str::trim).filter(|f| !f.is_empty()),
        ))
    }

    /// Vetoes the operations of `batch` that write a guarded family.
    pub(crate) fn check_batch(families: &[Bytes], batch: &mut MiniBatch<'_>) {
        let mut refused = Vec::new();
        for (i, m) in batch.operations().enumerate() {
            if let Some(f) = families.iter().find(|f| writes_family(m, f)) {
                refused.push((i, f.clone()));
            }
        }
        for (i, f) in refused {
            batch.veto(
                i,
                Refusal::DerivedFamily {
                    family: super::changes::lossy(&f),
                }
                .into_error(),
            );
        }
    }

    /// Refuses a read-modify-write touching one of `families`.
    pub(crate) fn check_columns<'a>(
        families: &[Bytes],
        columns: impl IntoIterator<Item = &'a Bytes>,
    ) -> Result<()> {
        for f in columns {
            if families.contains(f) {
                return Err(Refusal::ReadModifyWrite {
                    family: super::changes::lossy(f),
                }
                .into_error());
            }
        }
        Ok(())
    }
}

#[async_trait]
impl RegionObserver for RelationGuard {
    async fn pre_batch_mutate(
        &self,
        _ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        Self::check_batch(&self.families, batch);
        Ok(())
    }

    async fn pre_increment(
        &self,
        _ctx: &mut ObserverContext<'_>,
        inc: &mut Increment,
        _result: &mut RowResult,
    ) -> Result<()> {
        Self::check_columns(&self.families, inc.columns().iter().map(|(f, _, _)| f))
    }

    async fn pre_append(
        &self,
        _ctx: &mut ObserverContext<'_>,
        append: &mut Append,
        _result: &mut RowResult,
    ) -> Result<()> {
        Self::check_columns(&self.families, append.columns().iter().map(|(f, _, _)| f))
    }
}
