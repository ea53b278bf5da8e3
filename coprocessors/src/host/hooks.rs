//! The host's implementation of the engine's [`RegionHooks`] dispatch interface: each hook
//! runs over the chain in order, every call isolated by [`CoprocessorHost::guarded`] and its
//! failure settled under the coprocessor's policy (see the `host` module doc).
//!
//! Invariants kept: a hook learnt to be a coprocessor's no-op default is not called again; a
//! bypass ends the chain where bypass is supported and is a fault elsewhere; what a failed
//! coprocessor did to a batch, a compaction selection or a request never stays; every
//! coprocessor hears `post_batch`, even after one of them failed.

use super::{CoprocessorHost, Hook};
use crate::observer::ObserverContext;
use async_trait::async_trait;
use basalt_core::client::{
    Append, CheckAndMutate, Delete, Get, Increment, Mutation, Put, RowResult, Scan,
};
use basalt_core::coprocessor::{
    CompactionRequest, CompactionSelection, Flow, HookEnv, HookFuture, MiniBatch, MutationHook,
    RegionHooks,
};
use basalt_core::CompactionOutcome;
use basalt_core::WalEdit;
use basalt_core::{RegionInfo, Result};
use bytes::Bytes;

/// Runs a hook that cannot be bypassed over the whole chain, each call isolated and its
/// failure settled under the coprocessor's policy.
macro_rules! notify {
    ($host:ident, $env:ident, $id:expr, $hook:literal, |$cp:ident, $ctx:ident| $call:expr) => {{
        for $cp in $host.active($id) {
            #[allow(unused_mut)]
            let mut $ctx = ObserverContext::new($env, &$cp.name);
            let out = Self::guarded($cp, $call).await;
            $host.learn($cp, $id, &$ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&$ctx, $hook)) {
                $host.settle($cp, f)?;
            }
        }
        Ok(())
    }};
}

#[async_trait]
impl RegionHooks for CoprocessorHost {
    fn companion_tables(&self) -> Vec<basalt_core::TableName> {
        let mut all: Vec<basalt_core::TableName> = Vec::new();
        for cp in &self.chain {
            for t in cp.observer.companion_tables() {
                if !all.contains(&t) {
                    all.push(t);
                }
            }
        }
        all
    }

    fn skips_mutation_hooks(&self, puts: bool, deletes: bool) -> bool {
        let mut need =
            Hook::PreBatchMutate.bit() | Hook::PostBatchMutate.bit() | Hook::PostBatch.bit();
        if puts {
            need |= Hook::PrePut.bit() | Hook::PostPut.bit();
        }
        if deletes {
            need |= Hook::PreDelete.bit() | Hook::PostDelete.bit();
        }
        self.skips_all(need)
    }

    fn skips(&self, hook: MutationHook) -> bool {
        let need = match hook {
            MutationHook::PrePut => Hook::PrePut,
            MutationHook::PostPut => Hook::PostPut,
            MutationHook::PreDelete => Hook::PreDelete,
            MutationHook::PostDelete => Hook::PostDelete,
            MutationHook::PreBatchMutate => Hook::PreBatchMutate,
            MutationHook::PostBatchMutate => Hook::PostBatchMutate,
            MutationHook::PostBatch => Hook::PostBatch,
        };
        self.skips_all(need.bit())
    }

    fn pre_put<'a>(&'a self, env: &'a HookEnv<'a>, put: &'a mut Put) -> HookFuture<'a, Flow> {
        self.pre_put_chain(env, put)
    }

    fn post_put<'a>(&'a self, env: &'a HookEnv<'a>, put: &'a Put) -> HookFuture<'a, ()> {
        self.post_put_chain(env, put)
    }

    fn pre_delete<'a>(
        &'a self,
        env: &'a HookEnv<'a>,
        delete: &'a mut Delete,
    ) -> HookFuture<'a, Flow> {
        self.pre_delete_chain(env, delete)
    }

    fn post_delete<'a>(&'a self, env: &'a HookEnv<'a>, delete: &'a Delete) -> HookFuture<'a, ()> {
        self.post_delete_chain(env, delete)
    }

    async fn pre_get(
        &self,
        env: &HookEnv<'_>,
        get: &mut Get,
        result: &mut RowResult,
    ) -> Result<Flow> {
        for cp in self.active(Hook::PreGet) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_get(&mut ctx, get, result)).await;
            self.learn(cp, Hook::PreGet, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_get(&self, env: &HookEnv<'_>, get: &Get, result: &mut RowResult) -> Result<()> {
        for cp in self.active(Hook::PostGet) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_get(&mut ctx, get, result)).await;
            self.learn(cp, Hook::PostGet, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_get")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn pre_batch_mutate(&self, env: &HookEnv<'_>, batch: &mut MiniBatch<'_>) -> Result<()> {
        for cp in self.active(Hook::PreBatchMutate) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let sp = batch.savepoint();
            let out = Self::guarded(cp, cp.observer.pre_batch_mutate(&mut ctx, batch)).await;
            self.learn(cp, Hook::PreBatchMutate, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "pre_batch_mutate")) {
                // What a failed coprocessor did to the batch never commits.
                batch.rollback(sp);
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    // Exists, increment, append, check-and-mutate and the later batch hooks.

    async fn pre_exists(
        &self,
        env: &HookEnv<'_>,
        get: &mut Get,
        exists: &mut bool,
    ) -> Result<Flow> {
        for cp in self.active(Hook::PreExists) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_exists(&mut ctx, get, exists)).await;
            self.learn(cp, Hook::PreExists, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_exists(&self, env: &HookEnv<'_>, get: &Get, exists: &mut bool) -> Result<()> {
        for cp in self.active(Hook::PostExists) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_exists(&mut ctx, get, exists)).await;
            self.learn(cp, Hook::PostExists, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_exists")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn pre_increment(
        &self,
        env: &HookEnv<'_>,
        inc: &mut Increment,
        result: &mut RowResult,
    ) -> Result<Flow> {
        for cp in self.active(Hook::PreIncrement) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_increment(&mut ctx, inc, result)).await;
            self.learn(cp, Hook::PreIncrement, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_increment(
        &self,
        env: &HookEnv<'_>,
        inc: &Increment,
        result: &mut RowResult,
    ) -> Result<()> {
        for cp in self.active(Hook::PostIncrement) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_increment(&mut ctx, inc, result)).await;
            self.learn(cp, Hook::PostIncrement, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_increment")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn pre_append(
        &self,
        env: &HookEnv<'_>,
        append: &mut Append,
        result: &mut RowResult,
    ) -> Result<Flow> {
        for cp in self.active(Hook::PreAppend) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_append(&mut ctx, append, result)).await;
            self.learn(cp, Hook::PreAppend, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_append(
        &self,
        env: &HookEnv<'_>,
        append: &Append,
        result: &mut RowResult,
    ) -> Result<()> {
        for cp in self.active(Hook::PostAppend) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_append(&mut ctx, append, result)).await;
            self.learn(cp, Hook::PostAppend, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_append")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn pre_check_and_mutate(
        &self,
        env: &HookEnv<'_>,
        cam: &mut CheckAndMutate,
        passed: &mut bool,
    ) -> Result<Flow> {
        for cp in self.active(Hook::PreCheckAndMutate) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = cp.observer.pre_check_and_mutate(&mut ctx, cam, passed);
            let out = Self::guarded(cp, out).await;
            self.learn(cp, Hook::PreCheckAndMutate, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_check_and_mutate(
        &self,
        env: &HookEnv<'_>,
        cam: &CheckAndMutate,
        passed: &mut bool,
    ) -> Result<()> {
        for cp in self.active(Hook::PostCheckAndMutate) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = cp.observer.post_check_and_mutate(&mut ctx, cam, passed);
            let out = Self::guarded(cp, out).await;
            self.learn(cp, Hook::PostCheckAndMutate, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_check_and_mutate")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn post_batch_mutate(&self, env: &HookEnv<'_>, ops: &[&Mutation]) -> Result<()> {
        for cp in self.active(Hook::PostBatchMutate) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_batch_mutate(&mut ctx, ops)).await;
            self.learn(cp, Hook::PostBatchMutate, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_batch_mutate")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn post_batch(
        &self,
        env: &HookEnv<'_>,
        ops: &[&Mutation],
        outcome: &Result<()>,
    ) -> Result<()> {
        // Every coprocessor hears the outcome, even after one of them failed here.
        let mut first = None;
        for cp in self.active(Hook::PostBatch) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_batch(&mut ctx, ops, outcome)).await;
            self.learn(cp, Hook::PostBatch, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_batch")) {
                if let Err(e) = self.settle(cp, f) {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    // Region lifecycle, scanner, flush, compaction, split and WAL-replay hooks.
    async fn post_open(&self, env: &HookEnv<'_>) -> Result<()> {
        notify!(self, env, Hook::PostOpen, "post_open", |cp, ctx| cp
            .observer
            .post_open(&mut ctx))
    }

    async fn pre_close(&self, env: &HookEnv<'_>) -> Result<()> {
        notify!(self, env, Hook::PreClose, "pre_close", |cp, ctx| cp
            .observer
            .pre_close(&mut ctx))
    }

    async fn post_close(&self, env: &HookEnv<'_>) -> Result<()> {
        notify!(self, env, Hook::PostClose, "post_close", |cp, ctx| cp
            .observer
            .post_close(&mut ctx))
    }

    async fn pre_scanner_open(&self, env: &HookEnv<'_>, scan: &mut Scan) -> Result<()> {
        notify!(
            self,
            env,
            Hook::PreScannerOpen,
            "pre_scanner_open",
            |cp, ctx| cp.observer.pre_scanner_open(&mut ctx, scan)
        )
    }

    async fn post_scanner_next(&self, env: &HookEnv<'_>, rows: &mut Vec<RowResult>) -> Result<()> {
        notify!(
            self,
            env,
            Hook::PostScannerNext,
            "post_scanner_next",
            |cp, ctx| cp.observer.post_scanner_next(&mut ctx, rows)
        )
    }

    async fn post_scanner_close(&self, env: &HookEnv<'_>) -> Result<()> {
        notify!(
            self,
            env,
            Hook::PostScannerClose,
            "post_scanner_close",
            |cp, ctx| cp.observer.post_scanner_close(&mut ctx)
        )
    }

    async fn pre_flush(&self, env: &HookEnv<'_>, family: &Bytes) -> Result<()> {
        notify!(self, env, Hook::PreFlush, "pre_flush", |cp, ctx| cp
            .observer
            .pre_flush(&mut ctx, family))
    }

    async fn post_flush(&self, env: &HookEnv<'_>, family: &Bytes) -> Result<()> {
        notify!(self, env, Hook::PostFlush, "post_flush", |cp, ctx| cp
            .observer
            .post_flush(&mut ctx, family))
    }

    async fn pre_compact_selection(
        &self,
        env: &HookEnv<'_>,
        selection: &mut CompactionSelection,
    ) -> Result<()> {
        for cp in self.active(Hook::PreCompactSelection) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let saved = selection.files.clone();
            let out =
                Self::guarded(cp, cp.observer.pre_compact_selection(&mut ctx, selection)).await;
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "pre_compact_selection")) {
                // A failed coprocessor's change to the selection does not stay.
                selection.files = saved;
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn post_compact_selection(
        &self,
        env: &HookEnv<'_>,
        selection: &CompactionSelection,
    ) -> Result<()> {
        notify!(
            self,
            env,
            Hook::PostCompactSelection,
            "post_compact_selection",
            |cp, ctx| cp.observer.post_compact_selection(&mut ctx, selection)
        )
    }

    async fn pre_compact(&self, env: &HookEnv<'_>, request: &mut CompactionRequest) -> Result<()> {
        for cp in self.active(Hook::PreCompact) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let before = request.transform_count();
            let out = Self::guarded(cp, cp.observer.pre_compact(&mut ctx, request)).await;
            self.learn(cp, Hook::PreCompact, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "pre_compact")) {
                request.truncate_transforms(before);
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn post_compact(
        &self,
        env: &HookEnv<'_>,
        family: &Bytes,
        outcome: &CompactionOutcome,
    ) -> Result<()> {
        notify!(self, env, Hook::PostCompact, "post_compact", |cp, ctx| cp
            .observer
            .post_compact(&mut ctx, family, outcome))
    }

    async fn pre_split(&self, env: &HookEnv<'_>, split_row: &Bytes) -> Result<Flow> {
        for cp in self.active(Hook::PreSplit) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_split(&mut ctx, split_row)).await;
            self.learn(cp, Hook::PreSplit, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_split(
        &self,
        env: &HookEnv<'_>,
        lower: &RegionInfo,
        upper: &RegionInfo,
    ) -> Result<()> {
        notify!(self, env, Hook::PostSplit, "post_split", |cp, ctx| cp
            .observer
            .post_split(&mut ctx, lower, upper))
    }

    async fn pre_wal_restore(
        &self,
        env: &HookEnv<'_>,
        seq: u64,
        edits: &[WalEdit],
    ) -> Result<Flow> {
        for cp in self.active(Hook::PreWalRestore) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_wal_restore(&mut ctx, seq, edits)).await;
            self.learn(cp, Hook::PreWalRestore, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_wal_restore(&self, env: &HookEnv<'_>, seq: u64, edits: &[WalEdit]) -> Result<()> {
        notify!(
            self,
            env,
            Hook::PostWalRestore,
            "post_wal_restore",
            |cp, ctx| cp.observer.post_wal_restore(&mut ctx, seq, edits)
        )
    }
}
