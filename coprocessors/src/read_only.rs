//! The hooks of a table opened read-only: a table whose descriptor lists coprocessors the
//! registry does not have, opened by a registry built with
//! [`Registry::read_only_when_missing`](crate::Registry::read_only_when_missing) (a tool
//! looking at a data directory without the application's code).
//!
//! Invariants: every write kind (put, delete, batch, row mutations, increment, append,
//! check-and-mutate) fails with [`Error::ReadOnlyTable`] before validation or locks, so
//! nothing is written; reads, flushes, compactions and WAL replay run as for a table
//! without coprocessors (no coprocessor of the table runs at all, the loaded ones included:
//! their write hooks could not run either, and half a chain would keep derived data half in
//! sync).

use async_trait::async_trait;
use basalt_core::client::{Append, CheckAndMutate, Delete, Increment, Put, RowResult};
use basalt_core::coprocessor::{Flow, HookEnv, HookFuture, MiniBatch, RegionHooks};
use basalt_core::{Error, Result, TableName};

/// Refuses every write to one table, naming the coprocessors it lacks.
#[derive(Debug)]
pub struct ReadOnlyHooks {
    table: TableName,
    missing: Vec<String>,
}

impl ReadOnlyHooks {
    /// The hooks of `table`, whose coprocessors `missing` are not registered.
    pub fn new(table: TableName, missing: Vec<String>) -> Self {
        ReadOnlyHooks { table, missing }
    }

    /// The coprocessors the table lists that are not registered.
    pub fn missing(&self) -> &[String] {
        &self.missing
    }

    fn refuse<T>(&self) -> Result<T> {
        Err(Error::ReadOnlyTable {
            table: self.table.to_string(),
            missing: self.missing.clone(),
        })
    }
}

#[async_trait]
impl RegionHooks for ReadOnlyHooks {
    fn pre_put<'a>(&'a self, _env: &'a HookEnv<'a>, _put: &'a mut Put) -> HookFuture<'a, Flow> {
        HookFuture::Ready(self.refuse())
    }
    fn pre_delete<'a>(
        &'a self,
        _env: &'a HookEnv<'a>,
        _delete: &'a mut Delete,
    ) -> HookFuture<'a, Flow> {
        HookFuture::Ready(self.refuse())
    }
    async fn pre_batch_mutate(&self, _env: &HookEnv<'_>, _batch: &mut MiniBatch<'_>) -> Result<()> {
        self.refuse()
    }
    async fn pre_increment(
        &self,
        _env: &HookEnv<'_>,
        _inc: &mut Increment,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        self.refuse()
    }
    async fn pre_append(
        &self,
        _env: &HookEnv<'_>,
        _append: &mut Append,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        self.refuse()
    }
    async fn pre_check_and_mutate(
        &self,
        _env: &HookEnv<'_>,
        _cam: &mut CheckAndMutate,
        _passed: &mut bool,
    ) -> Result<Flow> {
        self.refuse()
    }
}
