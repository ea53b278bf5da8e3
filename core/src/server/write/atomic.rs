//! Read-modify-writes on the write pipeline: increments and appends (each column read at the
//! current read point inside the operation's time range, under the row lock, and written
//! no older than the version read plus one) and check-and-mutate (the condition read and
//! the mutations applied under the row's lock; a passing check writes no older than the
//! checked cell, HBASE-14054).
//!
//! Each runs its own pre-hook (which may bypass it) before and its post-hook after the
//! pipeline when its table has coprocessors. Under the row lock, a table with batch hooks
//! writes the new values as a put through the locked pipeline, so the batch hooks see it
//! (an index maintains itself on it); a table without them commits the cells directly.

use super::prepare::{self, Delta, DeltaOptions};
use super::SeenHooks;
use crate::cell::now_ms;
use crate::cell::{Cell, LATEST_TIMESTAMP};
use crate::error::{Error, Result};
use crate::ops::validate_row;
use crate::ops::{
    Append, CheckAndMutate, Condition, Get, Increment, Mutation, Put, RowMutations, RowResult,
    TimeRange,
};
use crate::server::hooks::rows::{self, Before, RowHooked};
use crate::server::hooks::{under_row_locks, LockPlan};
use crate::server::shared::TableState;
use crate::server::validate;
use crate::server::write::WritePipeline;
use crate::wal::Durability;
use bytes::Bytes;
use std::borrow::Cow;

/// An increment or an append: a one-row read-modify-write of its columns.
trait ReadModifyWrite: RowHooked<Answer = RowResult> {
    /// The families it writes (each checked not to be the local rows' family).
    fn families(&self) -> impl Iterator<Item = &Bytes>;
    /// Its columns' changes, its durability and how it reads and writes.
    fn deltas(&self) -> (Vec<(&Bytes, &Bytes, Delta)>, Durability, DeltaOptions);
}

impl ReadModifyWrite for Increment {
    fn families(&self) -> impl Iterator<Item = &Bytes> {
        self.columns.iter().map(|(f, _, _)| f)
    }
    fn deltas(&self) -> (Vec<(&Bytes, &Bytes, Delta)>, Durability, DeltaOptions) {
        let deltas = self
            .columns
            .iter()
            .map(|(f, q, a)| (f, q, Delta::Add(*a)))
            .collect();
        let opts = DeltaOptions {
            range: self.time_range,
            ttl_ms: self.ttl_ms,
        };
        (deltas, self.durability, opts)
    }
}

impl ReadModifyWrite for Append {
    fn families(&self) -> impl Iterator<Item = &Bytes> {
        self.columns.iter().map(|(f, _, _)| f)
    }
    fn deltas(&self) -> (Vec<(&Bytes, &Bytes, Delta)>, Durability, DeltaOptions) {
        let deltas = self
            .columns
            .iter()
            .map(|(f, q, v)| (f, q, Delta::Append(v.clone())))
            .collect();
        let opts = DeltaOptions {
            range: self.time_range,
            ttl_ms: self.ttl_ms,
        };
        (deltas, self.durability, opts)
    }
}

impl WritePipeline {
    /// Atomically adds to 8-byte big-endian counters; returns the new values.
    pub(crate) async fn increment(&self, t: &TableState, inc: Increment) -> Result<RowResult> {
        self.read_modify_write_hooked(t, inc).await
    }

    /// Atomically appends to cells; returns the new values.
    pub(crate) async fn append(&self, t: &TableState, app: Append) -> Result<RowResult> {
        self.read_modify_write_hooked(t, app).await
    }

    /// An increment or append between its own hooks (when its table has coprocessors).
    async fn read_modify_write_hooked<O: ReadModifyWrite>(
        &self,
        t: &TableState,
        mut op: O,
    ) -> Result<RowResult> {
        for f in op.families() {
            validate::refuse_local_family(f)?;
        }
        let after = match rows::before(&self.reads, t, &mut op).await? {
            Before::Answered(result) => return Ok(result),
            Before::Unhooked => None,
            Before::Hooked(after) => Some(after),
        };
        let (deltas, durability, opts) = op.deltas();
        let mut result = self
            .read_modify_write(t, op.row(), durability, opts, deltas)
            .await?;
        if let Some(after) = &after {
            after.run(&op, &mut result).await?;
        }
        Ok(result)
    }

    /// An increment or append under the row's lock: reads the current values, computes
    /// the new ones and writes them (see the module doc).
    async fn read_modify_write(
        &self,
        t: &TableState,
        row: &Bytes,
        durability: Durability,
        opts: DeltaOptions,
        deltas: Vec<(&Bytes, &Bytes, Delta)>,
    ) -> Result<RowResult> {
        prepare::validate_read_modify_write(&self.shared.config, t, row, &deltas)?;
        validate::validate_ttl(opts.ttl_ms)?;
        let cells = under_row_locks!(self, t, std::iter::once(row), |plan| self
            .read_modify_write_locked(t, row, durability, opts, deltas.clone(), plan)
            .await)?;
        Ok(RowResult {
            row: row.clone(),
            cells,
        })
    }

    /// The locked part of [`WritePipeline::read_modify_write`]; returns the new cells.
    async fn read_modify_write_locked(
        &self,
        t: &TableState,
        row: &Bytes,
        durability: Durability,
        opts: DeltaOptions,
        deltas: Vec<(&Bytes, &Bytes, Delta)>,
        plan: &mut LockPlan,
    ) -> Result<Vec<Cell>> {
        let mut cells = Vec::new();
        let now = now_ms();
        let result = prepare::resolve_deltas(&self.reads, t, row, deltas, opts, now, &mut cells)?;
        // Under the lock, the table's current hooks: coprocessors that arrived since the
        // caller looked (an index being created) must see this write.
        if t.hooks().is_none() {
            self.commit(&[t], cells, durability, None).await?;
            return Ok(result);
        }
        let mut put = Put::new(row).durability(durability);
        if let Some(ttl) = opts.ttl_ms {
            put = put.ttl_ms(ttl);
        }
        for c in &result {
            put = put.add_column_ts(&c.family, &c.qualifier, c.timestamp, &c.value);
        }
        self.mutate_locked(t, &[Mutation::Put(put)], plan, &SeenHooks::of(t), None)
            .await?;
        Ok(result)
    }

    /// Applies the mutations only if the condition holds; returns whether it held.
    pub(crate) async fn check_and_mutate(
        &self,
        t: &TableState,
        mut cam: CheckAndMutate,
    ) -> Result<bool> {
        let after = match rows::before(&self.reads, t, &mut cam).await? {
            Before::Answered(passed) => return Ok(passed),
            Before::Unhooked => None,
            Before::Hooked(after) => Some(after),
        };
        let mut passed = self.check_and_mutate_checked(t, &cam).await?;
        if let Some(after) = &after {
            after.run(&cam, &mut passed).await?;
        }
        Ok(passed)
    }

    /// [`WritePipeline::check_and_mutate`] between its hooks: validation, the row lock, the
    /// check and the mutations (whose batch hooks run).
    async fn check_and_mutate_checked(&self, t: &TableState, cam: &CheckAndMutate) -> Result<bool> {
        t.check_enabled()?;
        validate_row(&cam.row)?;
        let action = cam.action.as_ref().ok_or_else(|| {
            Error::bad_argument("check-and-mutate needs a put, delete or row mutations")
        })?;
        if action.row != cam.row {
            return Err(Error::bad_argument(
                "check-and-mutate must mutate the row it checks",
            ));
        }
        validate::check_same_row(action)?;
        let region = t.online_region(&cam.row)?;
        if !matches!(cam.condition, Condition::Filter(_)) {
            validate::store_of(t, &region, &cam.family)?;
        }
        for m in &action.mutations {
            validate::validate_user_mutation(&self.shared.config, t, m, None)?;
        }
        under_row_locks!(self, t, std::iter::once(&cam.row), |plan| self
            .check_and_mutate_locked(t, cam, action, plan)
            .await)
    }

    /// The locked part of a check-and-mutate: reads the condition, applies `action` if it
    /// holds.
    async fn check_and_mutate_locked(
        &self,
        t: &TableState,
        cam: &CheckAndMutate,
        action: &RowMutations,
        plan: &mut LockPlan,
    ) -> Result<bool> {
        // Located under the row lock: a split may have moved the row meanwhile.
        let region = t.online_region(&cam.row)?;
        // Whether the condition holds, and the timestamp of the cell it was judged on.
        let (pass, checked_ts) = if let Condition::Filter(f) = &cam.condition {
            let get = Get::new(&cam.row).filter(f.clone());
            let found = self
                .reads
                .read_row_in(&region, &get, self.shared.mvcc.read_point())?;
            (!found.is_empty(), found.cells.first().map(|c| c.timestamp))
        } else {
            let store = validate::store_of(t, &region, &cam.family)?;
            let current = prepare::latest_cell(
                &self.reads,
                &region,
                &store,
                &cam.row,
                &cam.qualifier,
                TimeRange::ALL,
            )?;
            (
                cam.condition
                    .holds(current.as_ref().map(|(_, v)| v.as_ref())),
                current.map(|(ts, _)| ts),
            )
        };
        if !pass {
            return Ok(false);
        }
        // As HBase (HBASE-14054): puts without a timestamp are written no older than the
        // checked cell, so a cell dated in the future cannot hide the write the check let
        // through.
        let muts = match checked_ts.filter(|ts| *ts > now_ms() && *ts != LATEST_TIMESTAMP) {
            Some(floor) => Cow::Owned(
                action
                    .mutations
                    .iter()
                    .map(|m| match m {
                        Mutation::Put(p) if p.ts == LATEST_TIMESTAMP => {
                            Mutation::Put(p.clone().timestamp(floor))
                        }
                        other => other.clone(),
                    })
                    .collect::<Vec<_>>(),
            ),
            None => Cow::Borrowed(action.mutations.as_slice()),
        };
        self.mutate_locked(t, &muts, plan, &SeenHooks::of(t), None)
            .await?;
        Ok(true)
    }
}
