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
//!
//! [`RegionHooks`]: basalt_core::coprocessor::RegionHooks

mod hooks;
mod mutation;

use crate::counter::StripedCounter;
use crate::observer::{ObserverContext, RegionObserver};
use basalt_core::{CoprocessorDescriptor, Error, FailurePolicy, FaultAction, Result, TableName};
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
    // The synchronous forms: a bit set here means the coprocessor has none (its
    // `*_now` body is the trait's default), so only the async form is called.
    PrePutNow,
    PostPutNow,
    PreDeleteNow,
    PostDeleteNow,
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
    /// Striped: with writers on several cores, one shared counter bounced its cache line
    /// between them on every call (40% of the per-call guard's time, 8 writers on 2 cores).
    calls: StripedCounter,
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
            calls: StripedCounter::default(),
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

    /// Counts one hook call; returns its start when it is the one in [`LATENCY_SAMPLE`]
    /// timed from its start.
    fn start_call(&self) -> Option<Instant> {
        let n = self.calls.add(1);
        n.is_multiple_of(LATENCY_SAMPLE).then(Instant::now)
    }

    /// Adds a call that finished without waiting, timed from `sampled`, to the latency.
    fn finished_at_once(&self, sampled: Option<Instant>) {
        if let Some(start) = sampled {
            let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.latency_ns
                .fetch_add(ns.saturating_mul(LATENCY_SAMPLE), Ordering::Relaxed);
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
    /// The hooks ([`Hook::bit`]) no loaded coprocessor runs: what [`Loaded::default_hooks`]
    /// of every loaded one has in common. It only grows (a learnt default stays learnt,
    /// an unloaded coprocessor stays unloaded), so concurrent updates merge with `or`;
    /// it may lag a learn by a call, which costs a call the chain skips anyway.
    skipped: AtomicU64,
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
        let host = CoprocessorHost {
            table,
            chain,
            skipped: AtomicU64::new(0),
        };
        host.resum();
        host
    }

    /// Records that `hook` is `cp`'s no-op default when the call just made through `ctx`
    /// ran the trait's default body.
    fn learn(&self, cp: &Loaded, hook: Hook, ctx: &ObserverContext<'_>) {
        if ctx.was_default() {
            self.learnt(cp, hook);
        }
    }

    /// [`CoprocessorHost::learn`] for a hook with a synchronous form (`now`): a default
    /// async body is learnt only when `cp` has no synchronous form either (one that
    /// answers `None` for some calls still gets its other calls).
    fn learn_async(&self, cp: &Loaded, hook: Hook, now: Hook, ctx: &ObserverContext<'_>) {
        if !cp.runs(now) {
            self.learn(cp, hook, ctx);
        }
    }

    /// Records that `cp` does not run `hook`. Sequentially consistent with [`resum`]'s
    /// loads: of two coprocessors learning the same hook at once, the later recount sees
    /// both.
    ///
    /// [`resum`]: CoprocessorHost::resum
    fn learnt(&self, cp: &Loaded, hook: Hook) {
        let before = cp.default_hooks.fetch_or(hook.bit(), Ordering::SeqCst);
        if before & hook.bit() == 0 {
            self.resum();
        }
    }

    /// Recomputes [`CoprocessorHost::skipped`] after a coprocessor learnt a default or was
    /// unloaded.
    fn resum(&self) {
        let common = self.active_any().fold(u64::MAX, |acc, c| {
            acc & c.default_hooks.load(Ordering::SeqCst)
        });
        self.skipped.fetch_or(common, Ordering::Relaxed);
    }

    /// True when no loaded coprocessor runs any of the hooks in `bits`.
    fn skips_all(&self, bits: u64) -> bool {
        self.skipped.load(Ordering::Relaxed) & bits == bits
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
                calls: c.calls.sum(),
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
    /// finishes without waiting (the common case) costs no timer and no clock read, and its
    /// count goes to this thread's stripe of the call counter. Only a
    /// hook that waits gets a timer, `cp.timeout` from its first wait (time spent before a
    /// hook first waits cannot be interrupted by any timer anyway). Latency: a call that
    /// waits is timed from its first wait; of the calls, one in [`LATENCY_SAMPLE`] is timed
    /// from its start, and when it finished without waiting it counts that many times.
    async fn guarded<F>(cp: &Loaded, fut: F) -> std::result::Result<(), Failure>
    where
        F: Future<Output = Result<()>> + Unpin,
    {
        Self::guarded_from(cp, cp.start_call(), fut).await
    }

    /// [`CoprocessorHost::guarded`] for a call already counted by
    /// [`Loaded::start_call`] (which returned `sampled`).
    async fn guarded_from<F>(
        cp: &Loaded,
        sampled: Option<Instant>,
        mut fut: F,
    ) -> std::result::Result<(), Failure>
    where
        F: Future<Output = Result<()>> + Unpin,
    {
        // The first poll, inline: a plain call under `catch_unwind`, so a hook that does
        // not wait costs no future state beyond its own.
        let first = std::future::poll_fn(|cx| {
            Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| {
                std::pin::Pin::new(&mut fut).poll(cx)
            })))
        })
        .await;
        match first {
            Ok(Poll::Ready(out)) => {
                cp.finished_at_once(sampled);
                out.map_err(Failure::Returned)
            }
            // Boxed: the timer's state is only paid for by the calls that wait.
            Ok(Poll::Pending) => Box::pin(Self::waited(cp, fut, sampled)).await,
            Err(p) => Err(Failure::Panicked(panic_message(p.as_ref()))),
        }
    }

    /// Runs the synchronous form of a hook (`call`, e.g. `pre_put_now`) under
    /// `catch_unwind`, for a call already counted by [`Loaded::start_call`]. `None` when
    /// the coprocessor answered `None` (the caller then runs the async form); when that
    /// `None` was the trait's default body, `hook` is learnt and not tried again.
    fn guarded_now<'e>(
        &self,
        cp: &Loaded,
        hook: Hook,
        sampled: Option<Instant>,
        ctx: &mut ObserverContext<'e>,
        call: impl FnOnce(&mut ObserverContext<'e>) -> Option<Result<()>>,
    ) -> Option<std::result::Result<(), Failure>> {
        if !cp.runs(hook) {
            return None;
        }
        match std::panic::catch_unwind(AssertUnwindSafe(|| call(ctx))) {
            Ok(Some(out)) => {
                cp.finished_at_once(sampled);
                Some(out.map_err(Failure::Returned))
            }
            Ok(None) => {
                if ctx.was_default_now() {
                    self.learnt(cp, hook);
                }
                None
            }
            Err(p) => Some(Err(Failure::Panicked(panic_message(p.as_ref())))),
        }
    }

    /// The rest of a hook call whose first poll waited: under a timer of `cp.timeout`,
    /// each poll under `catch_unwind`, timed from `sampled` (or from now).
    async fn waited<F>(
        cp: &Loaded,
        fut: F,
        sampled: Option<Instant>,
    ) -> std::result::Result<(), Failure>
    where
        F: Future<Output = Result<()>> + Unpin,
    {
        let start = sampled.unwrap_or_else(Instant::now);
        let out = tokio::time::timeout(cp.timeout, AssertUnwindSafe(fut).catch_unwind()).await;
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        cp.latency_ns.fetch_add(ns, Ordering::Relaxed);
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
            Failure::Returned(Error::PluginFault { msg, .. }) => fault(msg),
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
        match cp.policy.on_fault(cp.faults.load(Ordering::Relaxed)) {
            FaultAction::Fail => Err(err),
            FaultAction::Skip => {
                tracing::debug!(table = %self.table, coprocessor = %cp.name, error = %err,
                    "hook call skipped after a fault");
                Ok(())
            }
            FaultAction::Unload => {
                cp.unloaded.store(true, Ordering::Release);
                self.resum();
                tracing::warn!(table = %self.table, coprocessor = %cp.name, error = %err,
                    "coprocessor unloaded after a fault");
                Ok(())
            }
        }
    }
}
