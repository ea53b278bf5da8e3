//! The hook points the engine calls for coprocessors: one small, object-safe dispatch
//! interface, [`RegionHooks`], with no-op defaults.
//!
//! Core never names a coprocessor. A table's descriptor lists coprocessors by name
//! ([`crate::schema::CoprocessorDescriptor`]); the engine asks the configured
//! [`crate::HooksLoader`] (`Config::coprocessor_loader`) to turn that list into one
//! `Arc<dyn RegionHooks>` per table, at open, at table creation and whenever the list
//! changes (no restart). The `basalt-coprocessors` crate implements both with a host that
//! chains many observers in priority order and applies their failure policies.
//!
//! Where the engine calls each hook (`server/hooks/` and `server/write/`):
//! - `pre_put` / `pre_delete`: before validation and before any row lock; may change the
//!   mutation or bypass it (the operation then succeeds without writing it).
//! - `pre_batch_mutate`: once per region of a write, under the rows' locks, before the
//!   sequence id and the WAL append; may veto single operations and add mutations to this
//!   or other tables that commit in the same atomic unit (one WAL record, one MVCC
//!   transaction): see [`MiniBatch`].
//! - `post_batch_mutate`: once per region of a write, after the MemStore insert and before
//!   the write becomes visible (the MVCC read point has not passed it; the row locks are
//!   held).
//! - `post_batch`: once per region of a write whose `pre_batch_mutate` ran, always, with the
//!   outcome (`Ok`, or the error the write failed with), after the write is visible and
//!   before the row locks are released.
//! - `post_put` / `post_delete`: after the write is visible and the row locks are released.
//! - `pre_get` / `post_get`: around a get (and a batch's gets); `pre_get` may supply the
//!   result and bypass the read, `post_get` may change the result.
//! - `pre_exists` / `post_exists`: around `exists` (which does not run the get hooks, as
//!   HBase's `preExists`/`postExists`); `pre_exists` may supply the answer and bypass the
//!   read, `post_exists` may change it.
//! - `pre_increment` / `pre_append` / `pre_check_and_mutate`: before validation and before
//!   the row lock; may change the operation, or supply the result and bypass it.
//!   `post_increment` / `post_append` / `post_check_and_mutate`: after the write is visible
//!   and the row lock released; may change the result. An increment or append, once its new
//!   values are read under the row lock, runs the batch hooks as a put of those values at
//!   their resolved timestamps (so an index sees it like any put); a check-and-mutate whose
//!   condition passes runs them for its mutations. A touch ([`crate::client::Put::touch`])
//!   writes nothing itself and only runs the batch hooks for its row.
//!
//! Mutations a batch hook adds never run hooks themselves, in any table (no pre/post hooks
//! of the target table, no recursion): they are part of the batch that added them.
//! - Lifecycle hooks (region open and close, scanners, flush, compaction, split, WAL
//!   replay): `crate::server::hooks::lifecycle` lists where each is called.
//!
//! Engine-wide hooks on table operations and the WAL are a separate interface,
//! [`EngineHooks`] (`Config::observer`); system-wide region coprocessors
//! (`Config::system_coprocessors`) join every user table's chain.
//!
//! Invariants: a table with no coprocessors has no hooks object, and the engine checks that
//! `Option` first, so its operations allocate nothing for hooks; the engine holds row locks
//! only through guards, so a hook that fails, panics or is cancelled never leaves one held.
//! Implementations must not panic through these methods if they want the failure policy
//! applied: the engine itself does not catch panics (the host in `basalt-coprocessors` does).

use crate::error::Result;
use crate::ops::{Append, CheckAndMutate, Delete, Get, Increment, Mutation, Put, RowResult, Scan};
use crate::region::RegionInfo;
use crate::wal::WalEdit;
use async_trait::async_trait;
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The answer of a per-mutation hook ([`RegionHooks::pre_put`] and the like): ready at
/// once, or a boxed future for hooks that wait. Awaiting it gives the answer.
pub enum HookFuture<'a, T> {
    /// The hook finished without waiting.
    Ready(Result<T>),
    /// The hook waits; poll this for its answer.
    Waiting(Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>),
    /// Already polled to its answer (polling again is a bug of the caller).
    Taken,
}

impl<T> std::fmt::Debug for HookFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HookFuture::Ready(_) => "HookFuture::Ready",
            HookFuture::Waiting(_) => "HookFuture::Waiting",
            HookFuture::Taken => "HookFuture::Taken",
        })
    }
}

impl<T: Unpin> Future for HookFuture<'_, T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        match this {
            HookFuture::Waiting(f) => f.as_mut().poll(cx),
            HookFuture::Ready(_) | HookFuture::Taken => {
                match std::mem::replace(this, HookFuture::Taken) {
                    HookFuture::Ready(out) => Poll::Ready(out),
                    _ => Poll::Ready(Err(crate::error::Error::bad_argument(
                        "a hook's answer was polled after it was taken",
                    ))),
                }
            }
        }
    }
}

/// Whether the engine goes on with an operation after a pre-hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flow {
    /// Carry on with the operation.
    #[default]
    Continue,
    /// Skip the operation: a put or delete succeeds without writing, a get returns the
    /// result the hook supplied.
    Bypass,
}

/// A write-path hook that [`RegionHooks::skips`] can rule out before the engine prepares
/// its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationHook {
    /// `pre_put`.
    PrePut,
    /// `post_put`.
    PostPut,
    /// `pre_delete`.
    PreDelete,
    /// `post_delete`.
    PostDelete,
    /// `pre_batch_mutate`.
    PreBatchMutate,
    /// `post_batch_mutate`.
    PostBatchMutate,
    /// `post_batch`.
    PostBatch,
}

/// The hooks the engine calls on a table's operations; every method defaults to a no-op.
/// See the module doc for where each is called and what it may do. An error from a hook
/// fails the operation with that error (a post-hook's error after the write committed).
#[async_trait]
pub trait RegionHooks: Send + Sync + std::fmt::Debug {
    /// The other tables these hooks write in the same atomic batch as the table's own
    /// rows (a global index's tables): a table snapshot of the table includes them, so the
    /// snapshot holds both sides of every batch. Defaults to none.
    fn companion_tables(&self) -> Vec<crate::schema::TableName> {
        Vec::new()
    }
    /// True when a write of puts (`puts`) and/or deletes (`deletes`) would run nothing in
    /// any of its hooks (`pre_put`/`post_put`, `pre_delete`/`post_delete` as asked, and
    /// `pre_batch_mutate`, `post_batch_mutate`, `post_batch`): the engine then writes as for
    /// a table without coprocessors. Must only answer true when skipping every one of those
    /// calls changes nothing. Defaults to false.
    fn skips_mutation_hooks(&self, _puts: bool, _deletes: bool) -> bool {
        false
    }
    /// True when `hook` would run nothing (every coprocessor's body for it is known to be
    /// the trait's no-op default): the engine then does not call it, nor build what the
    /// call needs (the region of the row, a batch's grouping by region). Must only answer
    /// true when skipping the call changes nothing. Defaults to false.
    fn skips(&self, _hook: MutationHook) -> bool {
        false
    }
    /// Before a put; may change it or bypass it. A [`HookFuture`]: an answer known at
    /// once costs no allocation (the per-put hooks run on every write).
    fn pre_put<'a>(&'a self, _env: &'a HookEnv<'a>, _put: &'a mut Put) -> HookFuture<'a, Flow> {
        HookFuture::Ready(Ok(Flow::Continue))
    }
    /// After a put is visible.
    fn post_put<'a>(&'a self, _env: &'a HookEnv<'a>, _put: &'a Put) -> HookFuture<'a, ()> {
        HookFuture::Ready(Ok(()))
    }
    /// Before a delete; may change it or bypass it.
    fn pre_delete<'a>(
        &'a self,
        _env: &'a HookEnv<'a>,
        _delete: &'a mut Delete,
    ) -> HookFuture<'a, Flow> {
        HookFuture::Ready(Ok(Flow::Continue))
    }
    /// After a delete is visible.
    fn post_delete<'a>(&'a self, _env: &'a HookEnv<'a>, _delete: &'a Delete) -> HookFuture<'a, ()> {
        HookFuture::Ready(Ok(()))
    }
    /// Before a get; may change it, or fill `result` and bypass the read.
    async fn pre_get(
        &self,
        _env: &HookEnv<'_>,
        _get: &mut Get,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a get; may change the result.
    async fn post_get(
        &self,
        _env: &HookEnv<'_>,
        _get: &Get,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }
    /// Under the row locks, before the WAL append; may veto operations and add mutations.
    /// An error fails every operation of the batch and writes nothing.
    async fn pre_batch_mutate(&self, _env: &HookEnv<'_>, _batch: &mut MiniBatch<'_>) -> Result<()> {
        Ok(())
    }

    // Exists, increment, append, check-and-mutate and the later batch hooks.

    /// Before `exists` (instead of the get hooks); may change the get, or set `exists` and
    /// bypass the read.
    async fn pre_exists(
        &self,
        _env: &HookEnv<'_>,
        _get: &mut Get,
        _exists: &mut bool,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After `exists`; may change the answer.
    async fn post_exists(&self, _env: &HookEnv<'_>, _get: &Get, _exists: &mut bool) -> Result<()> {
        Ok(())
    }
    /// Before an increment, outside the row lock; may change it, or fill `result` and bypass
    /// it (nothing is written; the caller gets `result`).
    async fn pre_increment(
        &self,
        _env: &HookEnv<'_>,
        _inc: &mut Increment,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After an increment is visible; may change the result.
    async fn post_increment(
        &self,
        _env: &HookEnv<'_>,
        _inc: &Increment,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }
    /// Before an append, outside the row lock; may change it, or fill `result` and bypass it.
    async fn pre_append(
        &self,
        _env: &HookEnv<'_>,
        _append: &mut Append,
        _result: &mut RowResult,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After an append is visible; may change the result.
    async fn post_append(
        &self,
        _env: &HookEnv<'_>,
        _append: &Append,
        _result: &mut RowResult,
    ) -> Result<()> {
        Ok(())
    }
    /// Before a check-and-mutate, outside the row lock; may change it, or set `passed` and
    /// bypass it (nothing is checked or written; the caller gets `passed`).
    async fn pre_check_and_mutate(
        &self,
        _env: &HookEnv<'_>,
        _cam: &mut CheckAndMutate,
        _passed: &mut bool,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a check-and-mutate (its write visible if the check passed); may change the
    /// answer.
    async fn post_check_and_mutate(
        &self,
        _env: &HookEnv<'_>,
        _cam: &CheckAndMutate,
        _passed: &mut bool,
    ) -> Result<()> {
        Ok(())
    }
    /// After the region's share of a write (`ops`, vetoed ones left out) is in the MemStore,
    /// before it is visible: readers, this hook's own included, do not see it yet; the row
    /// locks are held and the engine-wide read point waits for this hook, so keep it short
    /// and never write through the engine here (that write would wait for this one). An
    /// error is returned to the caller, but the write stays committed (it is in the WAL).
    async fn post_batch_mutate(&self, _env: &HookEnv<'_>, _ops: &[&Mutation]) -> Result<()> {
        Ok(())
    }
    /// Always called, once per region, after a write whose `pre_batch_mutate` ran: with
    /// `Ok` once the write is visible, or with the error it failed with (from
    /// `pre_batch_mutate`, a veto, an invalid added mutation, a lock timeout, the WAL ...).
    /// `ops` are the operations the write tried (after vetoes; a batch whose operations were
    /// all vetoed writes nothing, its added writes included, and has no call). Row locks are
    /// still held.
    /// An error from this hook fails a successful call (the write stays committed) and is
    /// dropped after a failed one.
    async fn post_batch(
        &self,
        _env: &HookEnv<'_>,
        _ops: &[&Mutation],
        _outcome: &Result<()>,
    ) -> Result<()> {
        Ok(())
    }

    // Region lifecycle, scanner, flush, compaction, split and WAL-replay hooks (the module
    // doc says where each is called). Notifications (`post_open`, the close,
    // flush and `post_*` hooks) cannot stop what they report: the engine logs their errors.
    /// After a region is open and readable (engine open, table create or enable, split
    /// daughters, merge result).
    async fn post_open(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// Before a region closes (engine close, table disable, split or merge parent).
    async fn pre_close(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// After a region closed.
    async fn post_close(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// Before a scan plans its regions; may change the scan. An error fails the scan.
    async fn pre_scanner_open(&self, _env: &HookEnv<'_>, _scan: &mut Scan) -> Result<()> {
        Ok(())
    }
    /// After a batch of rows (all of one region, `env`'s) is read and before the caller
    /// sees it; may change, drop or add rows. An error fails the scan.
    async fn post_scanner_next(
        &self,
        _env: &HookEnv<'_>,
        _rows: &mut Vec<RowResult>,
    ) -> Result<()> {
        Ok(())
    }
    /// When a scan opened with `pre_scanner_open` ends: at its end, on its error, or when
    /// the stream is dropped early (then on a background task).
    async fn post_scanner_close(&self, _env: &HookEnv<'_>) -> Result<()> {
        Ok(())
    }
    /// Before a store's MemStore is flushed.
    async fn pre_flush(&self, _env: &HookEnv<'_>, _family: &Bytes) -> Result<()> {
        Ok(())
    }
    /// After a store's MemStore was flushed (its cells are in a store file).
    async fn post_flush(&self, _env: &HookEnv<'_>, _family: &Bytes) -> Result<()> {
        Ok(())
    }
    /// After the engine chose a compaction's input files; may remove files (what is left
    /// must be a contiguous run of the candidates). An error fails the compaction.
    async fn pre_compact_selection(
        &self,
        _env: &HookEnv<'_>,
        _selection: &mut CompactionSelection,
    ) -> Result<()> {
        Ok(())
    }
    /// After the selection is final.
    async fn post_compact_selection(
        &self,
        _env: &HookEnv<'_>,
        _selection: &CompactionSelection,
    ) -> Result<()> {
        Ok(())
    }
    /// Before the inputs are merged; may add cell transforms that see, change or drop every
    /// cell written. An error fails the compaction (the files stay as they were).
    async fn pre_compact(
        &self,
        _env: &HookEnv<'_>,
        _request: &mut CompactionRequest,
    ) -> Result<()> {
        Ok(())
    }
    /// After a compaction committed.
    async fn post_compact(
        &self,
        _env: &HookEnv<'_>,
        _family: &Bytes,
        _outcome: &CompactionOutcome,
    ) -> Result<()> {
        Ok(())
    }
    /// Before a region splits at `split_row` (the parent is flushed and takes no write).
    /// `Bypass` vetoes the split (the region stays whole); an error fails it.
    async fn pre_split(&self, _env: &HookEnv<'_>, _split_row: &Bytes) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// After a split: `env` is the retired parent, `lower` and `upper` the daughters.
    async fn post_split(
        &self,
        _env: &HookEnv<'_>,
        _lower: &RegionInfo,
        _upper: &RegionInfo,
    ) -> Result<()> {
        Ok(())
    }
    /// At recovery, before one replayed WAL record's edits of `env`'s region are applied;
    /// `Bypass` skips them.
    async fn pre_wal_restore(
        &self,
        _env: &HookEnv<'_>,
        _seq: u64,
        _edits: &[WalEdit],
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// At recovery, after one replayed WAL record's edits of `env`'s region were applied.
    async fn post_wal_restore(
        &self,
        _env: &HookEnv<'_>,
        _seq: u64,
        _edits: &[WalEdit],
    ) -> Result<()> {
        Ok(())
    }
}

/// A table's hooks, swapped whole when its coprocessor list changes. Reading it when the
/// table has none is one atomic load: no lock, no allocation, no shared-cache-line write.
/// Its version counts the swaps, so a write that looked the hooks up once can tell under
/// its row locks, with one load of a line nobody writes, whether they are still current.
#[derive(Debug, Default)]
pub struct HookSlot {
    any: std::sync::atomic::AtomicBool,
    version: std::sync::atomic::AtomicU64,
    hooks: parking_lot::RwLock<Option<Arc<dyn RegionHooks>>>,
}

impl HookSlot {
    /// A slot holding `hooks`.
    pub fn new(hooks: Option<Arc<dyn RegionHooks>>) -> Self {
        let slot = HookSlot::default();
        slot.set(hooks);
        slot
    }

    /// The current hooks, if any.
    pub fn get(&self) -> Option<Arc<dyn RegionHooks>> {
        if !self.any.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        self.hooks.read().clone()
    }

    /// The slot's version (how many times its hooks were replaced).
    pub fn version(&self) -> u64 {
        self.version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The current hooks with the version read before them: while [`HookSlot::version`]
    /// still returns that version, they are the current hooks.
    pub fn versioned(&self) -> (u64, Option<Arc<dyn RegionHooks>>) {
        let version = self.version();
        (version, self.get())
    }

    /// Replaces the hooks; operations that already hold the old ones finish with them.
    pub fn set(&self, hooks: Option<Arc<dyn RegionHooks>>) {
        let mut slot = self.hooks.write();
        self.any
            .store(hooks.is_some(), std::sync::atomic::Ordering::Release);
        *slot = hooks;
        self.version
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The id, start and end key accessors of a type holding `region: Arc<Region>` (a hook's
/// environment, an endpoint's view of its region): written once for both.
macro_rules! region_accessors {
    () => {
        /// The id of the region (for a hook, the region its operation falls in).
        pub fn region_id(&self) -> u64 {
            self.region.id
        }

        /// The region's start key (inclusive, empty for the first region).
        pub fn region_start(&self) -> &bytes::Bytes {
            &self.region.start
        }

        /// The region's end key (exclusive, empty for the last region).
        pub fn region_end(&self) -> &bytes::Bytes {
            &self.region.end
        }
    };
}
pub(crate) use region_accessors;

// What a hook sees of the engine and of a write: its environment and a region's share of a
// batch.
pub(crate) use env::HookReads;
pub use env::{AddedOp, HookEnv, MiniBatch, RegionReader, RowOwner, Savepoint};
mod env;

// Types of the lifecycle hooks: compaction selection and cell transforms, and the engine
// observer interface.
pub use lifecycle_types::*;
mod lifecycle_types;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Nothing;
    impl RegionHooks for Nothing {}

    /// A write compares versions to know whether the hooks it looked up are still the
    /// slot's: every set moves the version, and reads never do.
    #[test]
    fn version_moves_with_every_set_and_only_then() {
        let slot = HookSlot::new(None);
        let (v0, h) = slot.versioned();
        assert!(h.is_none());
        assert_eq!(slot.version(), v0);
        let hooks: Arc<dyn RegionHooks> = Arc::new(Nothing);
        slot.set(Some(Arc::clone(&hooks)));
        let (v1, h) = slot.versioned();
        assert_ne!(v1, v0);
        assert!(h.is_some_and(|h| Arc::ptr_eq(&h, &hooks)));
        let _ = slot.get();
        assert_eq!(slot.version(), v1);
        // Setting the same hooks again is still a change a write must notice.
        slot.set(Some(hooks));
        assert_ne!(slot.version(), v1);
        slot.set(None);
        assert!(slot.get().is_none());
    }
}
