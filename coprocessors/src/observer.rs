//! The [`RegionObserver`] trait coprocessors implement, and the [`ObserverContext`] each
//! hook call receives.
//!
//! Every hook has a no-op default, so an observer implements only what it needs. Pre-hooks
//! may change the operation they are handed; those documented as bypassable may call
//! [`ObserverContext::bypass`], which skips the engine's own work for the operation and
//! the rest of the chain (HBase 2's `ObserverContext.bypass()`). An error returned, a panic
//! or a timeout is handled under the coprocessor's [`basalt_core::FailurePolicy`].

use async_trait::async_trait;
use basalt_core::client::{Delete, Get, Put, RowResult};
use basalt_core::coprocessor::{HookEnv, MiniBatch};
use basalt_core::{RegionInfo, Result, TableName};
use bytes::Bytes;

/// What one hook call of one coprocessor sees: the table, the region, region-local reads,
/// and (in pre-hooks) the ability to bypass the operation.
#[derive(Debug)]
pub struct ObserverContext<'a> {
    env: &'a HookEnv<'a>,
    name: &'a str,
    bypassed: bool,
}

impl<'a> ObserverContext<'a> {
    pub(crate) fn new(env: &'a HookEnv<'a>, name: &'a str) -> Self {
        ObserverContext {
            env,
            name,
            bypassed: false,
        }
    }

    /// The table the operation is on.
    pub fn table(&self) -> &TableName {
        self.env.table_name()
    }

    /// The name the running coprocessor was registered under.
    pub fn coprocessor_name(&self) -> &str {
        self.name
    }

    /// The id of the region the operation falls in.
    pub fn region_id(&self) -> u64 {
        self.env.region_id()
    }

    /// The region's start key (inclusive; empty for the first region).
    pub fn region_start(&self) -> &Bytes {
        self.env.region_start()
    }

    /// The region's end key (exclusive; empty for the last region).
    pub fn region_end(&self) -> &Bytes {
        self.env.region_end()
    }

    /// Facts about the region (walks its stores: not free).
    pub fn region_info(&self) -> RegionInfo {
        self.env.region_info()
    }

    /// Reads one row of the table at the current read point, without running hooks.
    pub fn get(&self, g: &Get) -> Result<RowResult> {
        self.env.get(g)
    }

    /// Skips the operation and the coprocessors after this one in the chain. Only hooks
    /// documented as bypassable (`pre_put`, `pre_delete`, `pre_get`) support it; elsewhere the
    /// call is handled as a failure of this coprocessor.
    pub fn bypass(&mut self) {
        self.bypassed = true;
    }

    /// True once [`ObserverContext::bypass`] was called.
    pub fn is_bypassed(&self) -> bool {
        self.bypassed
    }
}

/// Hooks on a table's region operations. Every method defaults to a no-op.
///
/// Implementations must be cheap to call concurrently (`&self`); keep state in atomics or
/// locks. Hooks under row locks (`pre_batch_mutate`) should be short: they delay every
/// writer of those rows, and the host cancels them at the coprocessor's timeout.
#[async_trait]
pub trait RegionObserver: Send + Sync {
    /// Before a put, outside any lock. May change the put; bypassable (the put then
    /// succeeds without writing).
    async fn pre_put(&self, _ctx: &mut ObserverContext<'_>, _put: &mut Put) -> Result<()> {
        Ok(())
    }

    /// After a put is visible and its row lock released. An error fails the call although
    /// the put is written. Not bypassable.
    async fn post_put(&self, _ctx: &mut ObserverContext<'_>, _put: &Put) -> Result<()> {
        Ok(())
    }

    /// Before a delete, outside any lock. May change the delete; bypassable.
    async fn pre_delete(&self, _ctx: &mut ObserverContext<'_>, _delete: &mut Delete) -> Result<()> {
        Ok(())
    }

    /// After a delete is visible. Not bypassable.
    async fn post_delete(&self, _ctx: &mut ObserverContext<'_>, _delete: &Delete) -> Result<()> {
        Ok(())
    }

    /// Before a get (also `exists` and a batch's gets). May change the get; bypassable: the
    /// caller then gets `result` as this hook left it.
    async fn pre_get(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _get: &mut Get,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }

    /// After a get; may change the result. Not bypassable.
    async fn post_get(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _get: &Get,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }

    /// Under the row locks of one region's share of a write (puts, deletes, row mutations,
    /// batches, check-and-mutate), before the WAL append. May veto single operations and
    /// add mutations to this table that commit atomically with the batch. Not bypassable.
    /// Must not write the batch's rows through the client API: that waits for the row locks
    /// this batch holds, until the coprocessor's timeout cancels the hook.
    async fn pre_batch_mutate(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        Ok(())
    }
}
