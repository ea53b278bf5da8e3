//! The [`RegionObserver`] trait coprocessors implement, and the [`ObserverContext`] each
//! hook call receives.
//!
//! Every hook has a no-op default, so an observer implements only what it needs. Pre-hooks
//! may change the operation they are handed; those documented as bypassable may call
//! [`ObserverContext::bypass`], which skips the engine's own work for the operation and
//! the rest of the chain (HBase 2's `ObserverContext.bypass()`). An error a hook returns is
//! its answer (a refusal): it fails the operation under every failure policy and never
//! unloads the coprocessor. A panic, a timeout or a bypass where none is supported is a
//! fault, handled under the coprocessor's [`basalt_core::FailurePolicy`] (fail the
//! operation, or unload the coprocessor and go on).

use async_trait::async_trait;
use basalt_core::client::{
    Append, CheckAndMutate, Delete, Get, Increment, Mutation, Put, RowResult, Scan,
};
use basalt_core::coprocessor::{CompactionRequest, CompactionSelection, HookEnv, MiniBatch};
use basalt_core::CompactionOutcome;
use basalt_core::WalEdit;
use basalt_core::{RegionInfo, Result, TableName};
use bytes::Bytes;

/// What one hook call of one coprocessor sees: the table, the region, region-local reads,
/// and (in pre-hooks) the ability to bypass the operation.
#[derive(Debug)]
pub struct ObserverContext<'a> {
    env: &'a HookEnv<'a>,
    name: &'a str,
    bypassed: bool,
    /// Set by the trait's default (no-op) hook bodies: the host then skips that hook of
    /// this coprocessor from then on.
    default_body: bool,
    /// Set by the default bodies of the synchronous forms (`pre_put_now` and the like):
    /// the host then calls only the async form of that hook from then on.
    default_now: bool,
}

impl<'a> ObserverContext<'a> {
    pub(crate) fn new(env: &'a HookEnv<'a>, name: &'a str) -> Self {
        ObserverContext {
            env,
            name,
            bypassed: false,
            default_body: false,
            default_now: false,
        }
    }

    /// Called by every default (no-op) hook body of [`RegionObserver`]: tells the host
    /// that this coprocessor does not implement the hook.
    fn ran_default(&mut self) {
        self.default_body = true;
    }

    /// True when the hook just called was the trait's default body.
    pub(crate) fn was_default(&self) -> bool {
        self.default_body
    }

    /// Called by the default bodies of the synchronous hook forms: this coprocessor has
    /// no synchronous form of the hook.
    fn ran_default_now(&mut self) {
        self.default_now = true;
    }

    /// True when the synchronous form just called was the trait's default body.
    pub(crate) fn was_default_now(&self) -> bool {
        self.default_now
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

    /// Reads of this region that can be held past the call (a sandboxed plugin's host
    /// functions hold one while the plugin runs); see [`basalt_core::coprocessor::HookEnv::reader`].
    pub fn region_reader(&self) -> Option<basalt_core::coprocessor::RegionReader> {
        self.env.reader()
    }

    /// Reads one row of the table at the current read point, without running hooks.
    pub fn get(&self, g: &Get) -> Result<RowResult> {
        self.env.get(g)
    }

    /// Reads one row as it will be once `batch`'s own operations commit (in
    /// `pre_batch_mutate`, under the row locks); see [`HookEnv::get_after`].
    pub fn get_after(&self, batch: &MiniBatch<'_>, g: &Get) -> Result<RowResult> {
        self.env.get_after(batch, g)
    }

    /// The row as committed and as it will be once `batch` commits, from one read (see
    /// [`HookEnv::get_before_after`]).
    pub fn get_before_after(
        &self,
        batch: &MiniBatch<'_>,
        g: &Get,
    ) -> Result<(RowResult, RowResult)> {
        self.env.get_before_after(batch, g)
    }

    /// Skips the operation and the coprocessors after this one in the chain. Only hooks
    /// documented as bypassable (`pre_put`, `pre_delete`, `pre_get`, `pre_exists`,
    /// `pre_increment`, `pre_append`, `pre_check_and_mutate`, `pre_split`,
    /// `pre_wal_restore`) support it; elsewhere the call is handled as a failure of this
    /// coprocessor.
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
        _ctx.ran_default();
        Ok(())
    }

    /// After a put is visible and its row lock released. An error fails the call although
    /// the put is written. Not bypassable.
    async fn post_put(&self, _ctx: &mut ObserverContext<'_>, _put: &Put) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// The synchronous form of [`RegionObserver::pre_put`], for an observer whose hook
    /// never waits (a check of a column, a counter in memory): `Some(answer)` is the hook's
    /// answer and the async form is not called; `None` (the default) calls the async form.
    /// The host calls it as the async form, under `catch_unwind` and with the same
    /// failure handling, but with no future to allocate and no timer: a call that does
    /// not wait cannot run past its timeout. Keep it short: it runs on the writer's
    /// thread. May change the put; bypassable.
    fn pre_put_now(&self, _ctx: &mut ObserverContext<'_>, _put: &mut Put) -> Option<Result<()>> {
        _ctx.ran_default_now();
        None
    }

    /// The synchronous form of [`RegionObserver::post_put`] (see
    /// [`RegionObserver::pre_put_now`]): `None` calls the async form. Not bypassable.
    fn post_put_now(&self, _ctx: &mut ObserverContext<'_>, _put: &Put) -> Option<Result<()>> {
        _ctx.ran_default_now();
        None
    }

    /// The synchronous form of [`RegionObserver::pre_delete`] (see
    /// [`RegionObserver::pre_put_now`]): `None` calls the async form. Bypassable.
    fn pre_delete_now(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _delete: &mut Delete,
    ) -> Option<Result<()>> {
        _ctx.ran_default_now();
        None
    }

    /// The synchronous form of [`RegionObserver::post_delete`] (see
    /// [`RegionObserver::pre_put_now`]): `None` calls the async form. Not bypassable.
    fn post_delete_now(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _delete: &Delete,
    ) -> Option<Result<()>> {
        _ctx.ran_default_now();
        None
    }

    /// Before a delete, outside any lock. May change the delete; bypassable.
    async fn pre_delete(&self, _ctx: &mut ObserverContext<'_>, _delete: &mut Delete) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After a delete is visible. Not bypassable.
    async fn post_delete(&self, _ctx: &mut ObserverContext<'_>, _delete: &Delete) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before a get (also a batch's gets; `exists` runs `pre_exists` instead). May change
    /// the get; bypassable: the caller then gets `result` as this hook left it.
    async fn pre_get(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _get: &mut Get,
        _result: &mut RowResult,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After a get; may change the result. Not bypassable.
    async fn post_get(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _get: &Get,
        _result: &mut RowResult,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Under the row locks of one region's share of a write (puts, deletes, row mutations,
    /// batches, check-and-mutate), before the WAL append. May veto single operations and
    /// add writes to this or other tables that commit atomically with the batch
    /// ([`MiniBatch::add_mutation`], [`MiniBatch::add_mutation_to`],
    /// [`MiniBatch::add_increment_to`]; they run no coprocessors of their table). Not
    /// bypassable. Must not write the batch's rows through the client API: that waits for
    /// the row locks this batch holds, until the coprocessor's timeout cancels the hook.
    async fn pre_batch_mutate(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    // Exists, increment, append, check-and-mutate and the later batch hooks.

    /// Before `exists` (which runs these hooks, not the get hooks, as HBase's `preExists`).
    /// May change the get; bypassable: the caller then gets `exists` as this hook left it.
    async fn pre_exists(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _get: &mut Get,
        _exists: &mut bool,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After `exists`; may change the answer. Not bypassable.
    async fn post_exists(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _get: &Get,
        _exists: &mut bool,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before an increment, outside the row lock. May change it; bypassable: nothing is
    /// written and the caller gets `result` as this hook left it. Increments run no batch
    /// hooks.
    async fn pre_increment(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _inc: &mut Increment,
        _result: &mut RowResult,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After an increment is visible and its row lock released; may change the result (the
    /// new values). Not bypassable.
    async fn post_increment(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _inc: &Increment,
        _result: &mut RowResult,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before an append, outside the row lock. May change it; bypassable as
    /// `pre_increment`.
    async fn pre_append(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _append: &mut Append,
        _result: &mut RowResult,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After an append is visible; may change the result. Not bypassable.
    async fn post_append(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _append: &Append,
        _result: &mut RowResult,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before a check-and-mutate, outside the row lock. May change it; bypassable: nothing
    /// is checked or written and the caller gets `passed` as this hook left it. When the
    /// check passes, its mutations run the batch hooks.
    async fn pre_check_and_mutate(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _cam: &mut CheckAndMutate,
        _passed: &mut bool,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After a check-and-mutate (its write visible if it passed); may change the answer.
    /// Not bypassable.
    async fn post_check_and_mutate(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _cam: &CheckAndMutate,
        _passed: &mut bool,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After one region's share of a write (`ops`, vetoed ones left out) is in the MemStore
    /// and before it is visible: no reader, this hook's own `ctx.get` included, sees it yet.
    /// The row locks are held and the engine-wide read point waits for this hook: keep it
    /// short and never write through the engine here (the write would wait for this one
    /// until the timeout). An error fails the call, but the write stays committed (it is in
    /// the WAL). Not bypassable.
    async fn post_batch_mutate(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _ops: &[&Mutation],
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Always called once per region after a write whose `pre_batch_mutate` ran (HBase's
    /// `postBatchMutateIndicatingFailure`), with `Ok` once it is visible or the error it
    /// failed with (a hook's, a veto, an invalid added write, a lock timeout, a WAL
    /// failure). `ops` are the operations it tried. Row locks are still held. An error fails
    /// a successful call (the write stays committed) and is dropped after a failed one. Not
    /// bypassable.
    async fn post_batch(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _ops: &[&Mutation],
        _outcome: &Result<()>,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    // Region lifecycle, scanner, flush, compaction, split and WAL-replay hooks. Where the
    // engine calls each: `core/src/server/hooks/lifecycle.rs`. Not bypassable unless said so.
    // The engine logs the errors of notifications (open, close, flush and `post_*` hooks)
    // and goes on: an error returned is counted as a refusal and unloads nothing; a panic
    // or timeout is a fault, counted and handled under the failure policy (`Unload`
    // unloads).
    /// The other tables this observer writes in the same batch as the table's rows (a
    /// global index's tables); a table snapshot includes them. Defaults to none.
    fn companion_tables(&self) -> Vec<basalt_core::TableName> {
        Vec::new()
    }

    /// After a region is open and readable (engine open, table create or enable, split
    /// daughters, merge result).
    async fn post_open(&self, _ctx: &mut ObserverContext<'_>) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before a region closes (engine close, table disable, split or merge).
    async fn pre_close(&self, _ctx: &mut ObserverContext<'_>) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After a region closed.
    async fn post_close(&self, _ctx: &mut ObserverContext<'_>) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Once per scan, before it plans its regions (`ctx` is the region it starts in); may
    /// change the scan. An error fails the scan.
    async fn pre_scanner_open(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _scan: &mut Scan,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Per batch of rows (all of `ctx`'s region), before the caller sees them; may change,
    /// drop or add rows. An error fails the scan.
    async fn post_scanner_next(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _rows: &mut Vec<RowResult>,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Exactly once per scan whose `pre_scanner_open` chain succeeded: at its end, error, or
    /// when the caller drops the stream early.
    async fn post_scanner_close(&self, _ctx: &mut ObserverContext<'_>) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before a store with cells in its MemStore is flushed.
    async fn pre_flush(&self, _ctx: &mut ObserverContext<'_>, _family: &Bytes) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After a store's flush committed.
    async fn post_flush(&self, _ctx: &mut ObserverContext<'_>, _family: &Bytes) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After the engine chose a compaction's input files; may remove some (a contiguous run
    /// must remain; none left cancels the compaction). An error fails the compaction.
    async fn pre_compact_selection(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _selection: &mut CompactionSelection,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After the selection is final.
    async fn post_compact_selection(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _selection: &CompactionSelection,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before the inputs are merged; may add a [`basalt_core::coprocessor::CellTransform`] that sees, changes or drops
    /// each cell written. An error fails the compaction.
    async fn pre_compact(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _request: &mut CompactionRequest,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After a compaction committed.
    async fn post_compact(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _family: &Bytes,
        _outcome: &CompactionOutcome,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// Before the region splits at `split_row`, under the split's locks (writes to the
    /// region wait: be quick). Bypassable: [`ObserverContext::bypass`] vetoes the split and
    /// the region stays whole. An error fails the split.
    async fn pre_split(&self, _ctx: &mut ObserverContext<'_>, _split_row: &Bytes) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// After a split; `ctx` is the retired parent.
    async fn post_split(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _lower: &RegionInfo,
        _upper: &RegionInfo,
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// At engine open, before one replayed WAL record's edits of `ctx`'s region are
    /// applied. Bypassable: the edits are skipped. An error is logged and the edits are
    /// applied (recovery never loses an acknowledged write for a hook).
    async fn pre_wal_restore(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _seq: u64,
        _edits: &[WalEdit],
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }

    /// At engine open, after one replayed WAL record's edits were applied.
    async fn post_wal_restore(
        &self,
        _ctx: &mut ObserverContext<'_>,
        _seq: u64,
        _edits: &[WalEdit],
    ) -> Result<()> {
        _ctx.ran_default();
        Ok(())
    }
}
