//! The coprocessor host of one table: the chain of loaded observers, run in order, with
//! failure isolation and per-coprocessor metrics. It implements the engine's
//! [`RegionHooks`] dispatch interface.
//!
//! Invariants: the chain is sorted once, at load, by priority (lower first) with ties in
//! load order (the order of the table descriptor's list), so every run is deterministic.
//! Every hook call runs under `catch_unwind`, and once it waits, under a timer of the
//! coprocessor's timeout (a hook that finishes in its first poll needs no timer and costs
//! no clock read). What goes wrong in a call is one of two things, as in HBase (where an
//! `IOException` from a coprocessor fails the operation and only unexpected errors count
//! against the coprocessor):
//!
//! - a *refusal*: the hook returned `Err`. That is the hook's answer: it fails the
//!   operation with [`Error::Coprocessor`] under every policy, and unloads nothing;
//! - a *fault*: the hook panicked, ran past its timeout, or bypassed where bypass is not
//!   supported (post-hooks, the batch hooks). A fault is handled under the coprocessor's
//!   policy: it fails the operation with [`Error::Coprocessor`] (`FailOperation`), or
//!   unloads the coprocessor for the rest of this host's life and lets the operation go on
//!   (`Unload`).
//!
//! Both are counted apart ([`CoprocessorMetrics::refusals`], [`CoprocessorMetrics::faults`]).
//! A failed coprocessor's changes to a batch (vetoes, added mutations) are rolled back;
//! changes it made to a put, delete or get before a fault under `Unload` stay. A bypass
//! ends the chain. `post_batch` runs every coprocessor's hook even after one failed (each
//! must hear the outcome).
//!
//! Hooks a coprocessor does not implement are learnt: the trait's default (no-op) bodies
//! mark the call, and the host does not call that hook of that coprocessor again (skipping
//! a no-op changes nothing). A wrapper observer that forwards a hook to another observer's
//! default body is learnt the same way, so a wrapper that does work of its own in a hook
//! must not end it by forwarding to a default body.

use crate::observer::{ObserverContext, RegionObserver};
use async_trait::async_trait;
use basalt_core::client::{
    Append, CheckAndMutate, Delete, Get, Increment, Mutation, Put, RowResult, Scan,
};
use basalt_core::coprocessor::{
    CompactionRequest, CompactionSelection, Flow, HookEnv, MiniBatch, MutationHook, RegionHooks,
};
use basalt_core::CompactionOutcome;
use basalt_core::WalEdit;
use basalt_core::{CoprocessorDescriptor, Error, FailurePolicy, RegionInfo, Result, TableName};
use bytes::Bytes;
use futures::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

/// One hook call in this many is timed from its start (see [`CoprocessorHost::guarded`]).
const LATENCY_SAMPLE: u64 = 64;

/// Counters of one loaded coprocessor, as [`CoprocessorHost::metrics`] reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoprocessorMetrics {
    /// The registered name.
    pub name: String,
    /// Its priority (lower runs first).
    pub priority: u32,
    /// False once unloaded by its `Unload` policy.
    pub loaded: bool,
    /// Hook calls started. A hook learnt to be the trait's no-op default is called (and
    /// counted) once, then skipped.
    pub calls: u64,
    /// Hook calls that failed, for whatever reason: `refusals + faults`.
    pub errors: u64,
    /// Of the errors, refusals: the hook returned `Err`. A refusal fails the operation
    /// under every policy and never unloads the coprocessor.
    pub refusals: u64,
    /// Of the errors, faults: the hook panicked, ran past its timeout or bypassed where
    /// bypass is not supported. A fault is handled under the coprocessor's
    /// [`FailurePolicy`] (fail the operation, or unload the coprocessor).
    pub faults: u64,
    /// Of the faults, panics.
    pub panics: u64,
    /// Of the faults, timeouts.
    pub timeouts: u64,
    /// Time spent in its hooks, in total, estimated: calls that wait are timed from their
    /// first wait; one call in 64 is timed from its start and, when it finished without
    /// waiting, counts 64 times.
    pub total_latency: Duration,
}

/// One hook of [`RegionObserver`]: its bit in a coprocessor's set of hooks learnt to be
/// no-op defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    PrePut,
    PostPut,
    PreDelete,
    PostDelete,
    PreGet,
    PostGet,
    PreBatchMutate,
    PreExists,
    PostExists,
    PreIncrement,
    PostIncrement,
    PreAppend,
    PostAppend,
    PreCheckAndMutate,
    PostCheckAndMutate,
    PostBatchMutate,
    PostBatch,
    PostOpen,
    PreClose,
    PostClose,
    PreScannerOpen,
    PostScannerNext,
    PostScannerClose,
    PreFlush,
    PostFlush,
    PreCompactSelection,
    PostCompactSelection,
    PreCompact,
    PostCompact,
    PreSplit,
    PostSplit,
    PreWalRestore,
    PostWalRestore,
}

impl Hook {
    fn bit(self) -> u64 {
        1 << (self as u32)
    }
}

/// One coprocessor in a chain.
pub(crate) struct Loaded {
    pub(crate) name: String,
    pub(crate) priority: u32,
    pub(crate) policy: FailurePolicy,
    pub(crate) timeout: Duration,
    pub(crate) observer: Arc<dyn RegionObserver>,
    unloaded: AtomicBool,
    calls: AtomicU64,
    errors: AtomicU64,
    refusals: AtomicU64,
    faults: AtomicU64,
    panics: AtomicU64,
    timeouts: AtomicU64,
    latency_ns: AtomicU64,
    /// The hooks ([`Hook::bit`]) whose body was the trait's no-op default: not called again.
    default_hooks: AtomicU64,
}

impl Loaded {
    pub(crate) fn new(
        d: &CoprocessorDescriptor,
        default_timeout: Duration,
        observer: Arc<dyn RegionObserver>,
    ) -> Self {
        Loaded {
            name: d.name.clone(),
            priority: d.priority,
            policy: d.policy,
            timeout: d.timeout_ms.map_or(default_timeout, Duration::from_millis),
            observer,
            unloaded: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            latency_ns: AtomicU64::new(0),
            default_hooks: AtomicU64::new(0),
        }
    }

    /// False once `hook` was learnt to be this coprocessor's no-op default.
    fn runs(&self, hook: Hook) -> bool {
        self.default_hooks.load(Ordering::Relaxed) & hook.bit() == 0
    }

    /// Records that `hook` is a no-op default when the call just made through `ctx` ran
    /// the trait's default body.
    fn learn(&self, hook: Hook, ctx: &ObserverContext<'_>) {
        if ctx.was_default() {
            self.default_hooks.fetch_or(hook.bit(), Ordering::Relaxed);
        }
    }
}

/// How one hook call went wrong: a refusal (`Returned`) or a fault (the others).
enum Failure {
    /// The hook returned this error: its answer, which fails the operation.
    Returned(Error),
    /// The hook bypassed where bypass is not supported (a bug of the coprocessor).
    Misused(String),
    Panicked(String),
    TimedOut(Duration),
}

pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// The chain of one table's coprocessors.
pub struct CoprocessorHost {
    table: TableName,
    chain: Vec<Loaded>,
}

impl std::fmt::Debug for CoprocessorHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoprocessorHost")
            .field("table", &self.table)
            .field(
                "chain",
                &self
                    .chain
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl CoprocessorHost {
    /// A host running `chain` (in load order) sorted by priority, ties in load order.
    pub(crate) fn new(table: TableName, mut chain: Vec<Loaded>) -> Self {
        // A stable sort keeps load order among equal priorities.
        chain.sort_by_key(|c| c.priority);
        CoprocessorHost { table, chain }
    }

    /// The table this host serves.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// The names of the loaded (not unloaded) coprocessors, in the order they run.
    pub fn loaded(&self) -> Vec<String> {
        self.active_any().map(|c| c.name.clone()).collect()
    }

    /// Counters of every coprocessor of the chain, in run order (unloaded ones included).
    pub fn metrics(&self) -> Vec<CoprocessorMetrics> {
        self.chain
            .iter()
            .map(|c| CoprocessorMetrics {
                name: c.name.clone(),
                priority: c.priority,
                loaded: !c.unloaded.load(Ordering::Acquire),
                calls: c.calls.load(Ordering::Relaxed),
                errors: c.errors.load(Ordering::Relaxed),
                refusals: c.refusals.load(Ordering::Relaxed),
                faults: c.faults.load(Ordering::Relaxed),
                panics: c.panics.load(Ordering::Relaxed),
                timeouts: c.timeouts.load(Ordering::Relaxed),
                total_latency: Duration::from_nanos(c.latency_ns.load(Ordering::Relaxed)),
            })
            .collect()
    }

    fn active_any(&self) -> impl Iterator<Item = &Loaded> {
        self.chain
            .iter()
            .filter(|c| !c.unloaded.load(Ordering::Acquire))
    }

    /// The loaded coprocessors that implement `hook` (or are not yet known not to).
    fn active(&self, hook: Hook) -> impl Iterator<Item = &Loaded> {
        self.chain
            .iter()
            .filter(move |c| c.runs(hook) && !c.unloaded.load(Ordering::Acquire))
    }

    /// Runs one hook call with panic and timeout isolation, and counts it.
    ///
    /// The hook's future is polled once inside `catch_unwind` with no timer: a hook that
    /// finishes without waiting (the common case) costs no timer and no clock read. Only a
    /// hook that waits gets a timer, `cp.timeout` from its first wait (time spent before a
    /// hook first waits cannot be interrupted by any timer anyway). Latency: a call that
    /// waits is timed from its first wait; of the calls, one in [`LATENCY_SAMPLE`] is timed
    /// from its start, and when it finished without waiting it counts that many times.
    async fn guarded<F>(cp: &Loaded, fut: F) -> std::result::Result<(), Failure>
    where
        F: Future<Output = Result<()>>,
    {
        let n = cp.calls.fetch_add(1, Ordering::Relaxed);
        let sampled = n.is_multiple_of(LATENCY_SAMPLE).then(Instant::now);
        let mut fut = std::pin::pin!(AssertUnwindSafe(fut).catch_unwind());
        let first = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
        let out = match first {
            Poll::Ready(out) => {
                if let Some(start) = sampled {
                    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    cp.latency_ns
                        .fetch_add(ns.saturating_mul(LATENCY_SAMPLE), Ordering::Relaxed);
                }
                Ok(out)
            }
            Poll::Pending => {
                let start = sampled.unwrap_or_else(Instant::now);
                let out = tokio::time::timeout(cp.timeout, fut).await;
                let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                cp.latency_ns.fetch_add(ns, Ordering::Relaxed);
                out
            }
        };
        match out {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(Failure::Returned(e)),
            Ok(Err(p)) => Err(Failure::Panicked(panic_message(p.as_ref()))),
            Err(_) => Err(Failure::TimedOut(cp.timeout)),
        }
    }

    /// A bypass in a hook that does not support it is a failure (HBase 2's
    /// `DoesNotSupportBypassException`).
    fn no_bypass(ctx: &ObserverContext<'_>, hook: &str) -> std::result::Result<(), Failure> {
        if ctx.is_bypassed() {
            return Err(Failure::Misused(format!("{hook} does not support bypass")));
        }
        Ok(())
    }

    /// Settles a failed call of `cp`: a refusal fails the operation under every policy; a
    /// fault gives the error to fail the operation with (`FailOperation`), or `Ok` after
    /// unloading `cp` (`Unload`).
    fn settle(&self, cp: &Loaded, f: Failure) -> Result<()> {
        cp.errors.fetch_add(1, Ordering::Relaxed);
        let fault = |msg: String| {
            cp.faults.fetch_add(1, Ordering::Relaxed);
            Error::Coprocessor {
                name: cp.name.clone(),
                msg,
            }
        };
        let err = match f {
            Failure::Returned(e) => {
                cp.refusals.fetch_add(1, Ordering::Relaxed);
                return Err(match e {
                    e @ Error::Coprocessor { .. } => e,
                    e => Error::Coprocessor {
                        name: cp.name.clone(),
                        msg: e.to_string(),
                    },
                });
            }
            Failure::Misused(m) => fault(m),
            Failure::Panicked(m) => {
                cp.panics.fetch_add(1, Ordering::Relaxed);
                fault(format!("hook panicked: {m}"))
            }
            Failure::TimedOut(d) => {
                cp.timeouts.fetch_add(1, Ordering::Relaxed);
                fault(format!("hook ran past its timeout of {} ms", d.as_millis()))
            }
        };
        match cp.policy {
            FailurePolicy::FailOperation => Err(err),
            FailurePolicy::Unload => {
                cp.unloaded.store(true, Ordering::Release);
                tracing::warn!(table = %self.table, coprocessor = %cp.name, error = %err,
                    "coprocessor unloaded after a fault");
                Ok(())
            }
        }
    }
}

/// Runs a hook that cannot be bypassed over the whole chain, each call isolated and its
/// failure settled under the coprocessor's policy.
macro_rules! notify {
    ($host:ident, $env:ident, $id:expr, $hook:literal, |$cp:ident, $ctx:ident| $call:expr) => {{
        for $cp in $host.active($id) {
            #[allow(unused_mut)]
            let mut $ctx = ObserverContext::new($env, &$cp.name);
            let out = Self::guarded($cp, $call).await;
            $cp.learn($id, &$ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&$ctx, $hook)) {
                $host.settle($cp, f)?;
            }
        }
        Ok(())
    }};
}

#[async_trait]
impl RegionHooks for CoprocessorHost {
    fn skips_mutation_hooks(&self, puts: bool, deletes: bool) -> bool {
        let mut need =
            Hook::PreBatchMutate.bit() | Hook::PostBatchMutate.bit() | Hook::PostBatch.bit();
        if puts {
            need |= Hook::PrePut.bit() | Hook::PostPut.bit();
        }
        if deletes {
            need |= Hook::PreDelete.bit() | Hook::PostDelete.bit();
        }
        self.active_any()
            .all(|c| c.default_hooks.load(Ordering::Relaxed) & need == need)
    }

    fn skips(&self, hook: MutationHook) -> bool {
        let need = match hook {
            MutationHook::PrePut => Hook::PrePut,
            MutationHook::PostPut => Hook::PostPut,
            MutationHook::PreDelete => Hook::PreDelete,
            MutationHook::PostDelete => Hook::PostDelete,
            MutationHook::PostBatchMutate => Hook::PostBatchMutate,
            MutationHook::PostBatch => Hook::PostBatch,
        };
        self.active_any().all(|c| !c.runs(need))
    }

    async fn pre_put(&self, env: &HookEnv<'_>, put: &mut Put) -> Result<Flow> {
        for cp in self.active(Hook::PrePut) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_put(&mut ctx, put)).await;
            cp.learn(Hook::PrePut, &ctx);
            cp.learn(Hook::PrePut, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_put(&self, env: &HookEnv<'_>, put: &Put) -> Result<()> {
        for cp in self.active(Hook::PostPut) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_put(&mut ctx, put)).await;
            cp.learn(Hook::PostPut, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_put")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
    }

    async fn pre_delete(&self, env: &HookEnv<'_>, delete: &mut Delete) -> Result<Flow> {
        for cp in self.active(Hook::PreDelete) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.pre_delete(&mut ctx, delete)).await;
            cp.learn(Hook::PreDelete, &ctx);
            cp.learn(Hook::PreDelete, &ctx);
            match out {
                Ok(()) if ctx.is_bypassed() => return Ok(Flow::Bypass),
                Ok(()) => {}
                Err(f) => self.settle(cp, f)?,
            }
        }
        Ok(Flow::Continue)
    }

    async fn post_delete(&self, env: &HookEnv<'_>, delete: &Delete) -> Result<()> {
        for cp in self.active(Hook::PostDelete) {
            let mut ctx = ObserverContext::new(env, &cp.name);
            let out = Self::guarded(cp, cp.observer.post_delete(&mut ctx, delete)).await;
            cp.learn(Hook::PostDelete, &ctx);
            if let Err(f) = out.and_then(|()| Self::no_bypass(&ctx, "post_delete")) {
                self.settle(cp, f)?;
            }
        }
        Ok(())
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
            cp.learn(Hook::PreGet, &ctx);
            cp.learn(Hook::PreGet, &ctx);
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
            cp.learn(Hook::PostGet, &ctx);
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
            cp.learn(Hook::PreBatchMutate, &ctx);
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
            cp.learn(Hook::PreExists, &ctx);
            cp.learn(Hook::PreExists, &ctx);
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
            cp.learn(Hook::PostExists, &ctx);
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
            cp.learn(Hook::PreIncrement, &ctx);
            cp.learn(Hook::PreIncrement, &ctx);
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
            cp.learn(Hook::PostIncrement, &ctx);
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
            cp.learn(Hook::PreAppend, &ctx);
            cp.learn(Hook::PreAppend, &ctx);
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
            cp.learn(Hook::PostAppend, &ctx);
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
            cp.learn(Hook::PreCheckAndMutate, &ctx);
            cp.learn(Hook::PreCheckAndMutate, &ctx);
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
            cp.learn(Hook::PostCheckAndMutate, &ctx);
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
            cp.learn(Hook::PostBatchMutate, &ctx);
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
            cp.learn(Hook::PostBatch, &ctx);
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
            cp.learn(Hook::PreCompact, &ctx);
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
            cp.learn(Hook::PreSplit, &ctx);
            cp.learn(Hook::PreSplit, &ctx);
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
            cp.learn(Hook::PreWalRestore, &ctx);
            cp.learn(Hook::PreWalRestore, &ctx);
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
