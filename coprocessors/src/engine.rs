//! Engine-wide observers: [`TableObserver`] (HBase's `MasterObserver`: create, delete,
//! enable, disable and modify table) and [`WalObserver`] (before and after each WAL append,
//! after each segment roll), chained in an [`EngineObserverHost`] that the engine calls
//! through `basalt_core::coprocessor::EngineHooks` (set it with `Config::observer`).
//!
//! Invariants: observers run by priority (lower first), ties in the order added; every call
//! is isolated like a region observer's: a panic is caught and a table hook past its
//! timeout is cancelled. As for region observers, an `Err` a hook returns is a refusal: it
//! fails (vetoes) the operation under every policy and unloads nothing; a panic or a
//! timeout is a fault, handled under the observer's [`FailurePolicy`] (fail the operation,
//! or unload the observer and go on). WAL hooks are synchronous (they run on the commit
//! path under the engine's commit lock), so they have no timeout; a panicking
//! `post_wal_append` or roll hook cannot fail anything (the record is already logged), it
//! is counted and, under `Unload`, unloads its observer.

use crate::host::{panic_message, CoprocessorMetrics};
use async_trait::async_trait;
use basalt_core::coprocessor::EngineHooks;
use basalt_core::WalRecord;
use basalt_core::{Error, FailurePolicy, FaultAction, Result, TableDescriptor, TableName};
use futures::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Hooks on table operations; every method defaults to a no-op. A `pre_*` hook's error
/// vetoes the operation (nothing changes); a `post_*` hook's error reaches the caller
/// although the change is done. Either way, under every [`FailurePolicy`]: an error is the
/// hook's answer and never unloads the observer (only panics and timeouts do, under
/// `Unload`).
#[async_trait]
pub trait TableObserver: Send + Sync {
    /// Before a table is created.
    async fn pre_create_table(&self, _desc: &TableDescriptor) -> Result<()> {
        Ok(())
    }
    /// After a table was created and its regions opened.
    async fn post_create_table(&self, _desc: &TableDescriptor) -> Result<()> {
        Ok(())
    }
    /// Before a disabled table is deleted.
    async fn pre_delete_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// After a table was deleted.
    async fn post_delete_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// Before a table is enabled.
    async fn pre_enable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// After a table was enabled.
    async fn post_enable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// Before a table is disabled.
    async fn pre_disable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// After a table was disabled.
    async fn post_disable_table(&self, _name: &TableName) -> Result<()> {
        Ok(())
    }
    /// Before a table's descriptor changes (through `Admin`: families, coprocessors).
    async fn pre_modify_table(&self, _old: &TableDescriptor, _new: &TableDescriptor) -> Result<()> {
        Ok(())
    }
    /// After a table's descriptor changed; `new` is the descriptor now in force.
    async fn post_modify_table(
        &self,
        _old: &TableDescriptor,
        _new: &TableDescriptor,
    ) -> Result<()> {
        Ok(())
    }
}

/// Hooks on the WAL; every method defaults to a no-op. They run synchronously on the commit
/// path under the engine's commit lock, in sequence-id order: keep them short and never
/// write to the engine from them.
pub trait WalObserver: Send + Sync {
    /// Before a record is appended; an error fails the write (nothing is logged or
    /// applied) under every [`FailurePolicy`], and leaves the observer loaded.
    fn pre_wal_append(&self, _record: &WalRecord) -> Result<()> {
        Ok(())
    }
    /// After the WAL took a record.
    fn post_wal_append(&self, _record: &WalRecord) {}
    /// After the WAL closed segment `closed` and started segment `opened`.
    fn post_wal_roll(&self, _closed: u64, _opened: u64) {}
}

/// One observer in a chain, with its policy and counters.
struct Slot<T: ?Sized> {
    name: String,
    priority: u32,
    policy: FailurePolicy,
    timeout: Duration,
    observer: Arc<T>,
    unloaded: AtomicBool,
    calls: AtomicU64,
    errors: AtomicU64,
    refusals: AtomicU64,
    faults: AtomicU64,
    panics: AtomicU64,
    timeouts: AtomicU64,
    latency_ns: AtomicU64,
}

impl<T: ?Sized> Slot<T> {
    fn new(name: String, priority: u32, policy: FailurePolicy, observer: Arc<T>) -> Self {
        Slot {
            name,
            priority,
            policy,
            timeout: crate::DEFAULT_TIMEOUT,
            observer,
            unloaded: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            latency_ns: AtomicU64::new(0),
        }
    }

    fn active(&self) -> bool {
        !self.unloaded.load(Ordering::Acquire)
    }

    fn metrics(&self) -> CoprocessorMetrics {
        CoprocessorMetrics {
            name: self.name.clone(),
            priority: self.priority,
            loaded: self.active(),
            calls: self.calls.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            refusals: self.refusals.load(Ordering::Relaxed),
            faults: self.faults.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            total_latency: Duration::from_nanos(self.latency_ns.load(Ordering::Relaxed)),
        }
    }

    fn record(&self, start: Instant) {
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.latency_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// A refusal: the hook returned `e`, which fails the operation under every policy.
    fn refuse(&self, e: &Error) -> Result<()> {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.refusals.fetch_add(1, Ordering::Relaxed);
        Err(Error::Coprocessor {
            name: self.name.clone(),
            msg: e.to_string(),
        })
    }

    /// Applies the policy to a fault (a panic or a timeout) described by `msg`: the error
    /// to fail with, or `Ok` after unloading the observer.
    fn fault(&self, msg: String) -> Result<()> {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.faults.fetch_add(1, Ordering::Relaxed);
        let err = Error::Coprocessor {
            name: self.name.clone(),
            msg,
        };
        match self.policy.on_fault(self.faults.load(Ordering::Relaxed)) {
            FaultAction::Fail => Err(err),
            FaultAction::Skip => Ok(()),
            FaultAction::Unload => {
                self.unloaded.store(true, Ordering::Release);
                tracing::warn!(observer = %self.name, error = %err, "engine observer unloaded after a fault");
                Ok(())
            }
        }
    }

    /// Runs one synchronous call with panic isolation under the policy.
    fn call_sync(&self, f: impl FnOnce(&T) -> Result<()>) -> Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let out = std::panic::catch_unwind(AssertUnwindSafe(|| f(&self.observer)));
        self.record(start);
        match out {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => self.refuse(&e),
            Err(p) => {
                self.panics.fetch_add(1, Ordering::Relaxed);
                self.fault(format!("hook panicked: {}", panic_message(p.as_ref())))
            }
        }
    }

    /// Runs one async call with panic and timeout isolation under the policy.
    async fn call<F: Future<Output = Result<()>>>(&self, fut: F) -> Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let out = tokio::time::timeout(self.timeout, AssertUnwindSafe(fut).catch_unwind()).await;
        self.record(start);
        match out {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => self.refuse(&e),
            Ok(Err(p)) => {
                self.panics.fetch_add(1, Ordering::Relaxed);
                self.fault(format!("hook panicked: {}", panic_message(p.as_ref())))
            }
            Err(_) => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                self.fault(format!(
                    "hook ran past its timeout of {} ms",
                    self.timeout.as_millis()
                ))
            }
        }
    }
}

/// The engine-wide observers: set it with `Config::observer`.
///
/// ```
/// use basalt_coprocessors::{EngineObserverHost, TableObserver, FailurePolicy};
/// use std::sync::Arc;
/// struct Audit;
/// impl TableObserver for Audit {}
/// let host = EngineObserverHost::new().table_observer("audit", 10, FailurePolicy::FailOperation, Arc::new(Audit));
/// let config = basalt_core::Config::new("/tmp/basalt-doc-obs").observer(Arc::new(host));
/// assert!(config.observer.is_some());
/// ```
#[derive(Default)]
pub struct EngineObserverHost {
    tables: Vec<Slot<dyn TableObserver>>,
    wal: Vec<Slot<dyn WalObserver>>,
}

impl std::fmt::Debug for EngineObserverHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: Vec<&str>| v.join(",");
        f.debug_struct("EngineObserverHost")
            .field(
                "tables",
                &names(self.tables.iter().map(|s| s.name.as_str()).collect()),
            )
            .field(
                "wal",
                &names(self.wal.iter().map(|s| s.name.as_str()).collect()),
            )
            .finish()
    }
}

impl EngineObserverHost {
    /// A host with no observer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a table observer (lower priorities run first; ties in the order added).
    pub fn table_observer(
        mut self,
        name: impl Into<String>,
        priority: u32,
        policy: FailurePolicy,
        observer: Arc<dyn TableObserver>,
    ) -> Self {
        self.tables
            .push(Slot::new(name.into(), priority, policy, observer));
        // Stable: ties keep the order added.
        self.tables.sort_by_key(|s| s.priority);
        self
    }

    /// Sets the timeout of table observer `name`'s hooks (default
    /// [`crate::DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, name: &str, timeout: Duration) -> Self {
        if let Some(s) = self.tables.iter_mut().find(|s| s.name == name) {
            s.timeout = timeout;
        }
        self
    }

    /// Adds a WAL observer (lower priorities run first; ties in the order added).
    pub fn wal_observer(
        mut self,
        name: impl Into<String>,
        priority: u32,
        policy: FailurePolicy,
        observer: Arc<dyn WalObserver>,
    ) -> Self {
        self.wal
            .push(Slot::new(name.into(), priority, policy, observer));
        self.wal.sort_by_key(|s| s.priority);
        self
    }

    /// Counters of every observer, table observers first, each chain in run order.
    pub fn metrics(&self) -> Vec<CoprocessorMetrics> {
        self.tables
            .iter()
            .map(Slot::metrics)
            .chain(self.wal.iter().map(Slot::metrics))
            .collect()
    }

    fn active_tables(&self) -> impl Iterator<Item = &Slot<dyn TableObserver>> {
        self.tables.iter().filter(|s| s.active())
    }

    fn active_wal(&self) -> impl Iterator<Item = &Slot<dyn WalObserver>> {
        self.wal.iter().filter(|s| s.active())
    }
}

/// Runs one table hook over the chain, failing at the first failure its policy does not
/// absorb.
macro_rules! table_chain {
    ($host:ident, |$o:ident| $call:expr) => {{
        for slot in $host.active_tables() {
            let $o = &slot.observer;
            slot.call($call).await?;
        }
        Ok(())
    }};
}

#[async_trait]
impl EngineHooks for EngineObserverHost {
    async fn pre_create_table(&self, desc: &TableDescriptor) -> Result<()> {
        table_chain!(self, |o| o.pre_create_table(desc))
    }
    async fn post_create_table(&self, desc: &TableDescriptor) -> Result<()> {
        table_chain!(self, |o| o.post_create_table(desc))
    }
    async fn pre_delete_table(&self, name: &TableName) -> Result<()> {
        table_chain!(self, |o| o.pre_delete_table(name))
    }
    async fn post_delete_table(&self, name: &TableName) -> Result<()> {
        table_chain!(self, |o| o.post_delete_table(name))
    }
    async fn pre_enable_table(&self, name: &TableName) -> Result<()> {
        table_chain!(self, |o| o.pre_enable_table(name))
    }
    async fn post_enable_table(&self, name: &TableName) -> Result<()> {
        table_chain!(self, |o| o.post_enable_table(name))
    }
    async fn pre_disable_table(&self, name: &TableName) -> Result<()> {
        table_chain!(self, |o| o.pre_disable_table(name))
    }
    async fn post_disable_table(&self, name: &TableName) -> Result<()> {
        table_chain!(self, |o| o.post_disable_table(name))
    }
    async fn pre_modify_table(&self, old: &TableDescriptor, new: &TableDescriptor) -> Result<()> {
        table_chain!(self, |o| o.pre_modify_table(old, new))
    }
    async fn post_modify_table(&self, old: &TableDescriptor, new: &TableDescriptor) -> Result<()> {
        table_chain!(self, |o| o.post_modify_table(old, new))
    }

    fn pre_wal_append(&self, record: &WalRecord) -> Result<()> {
        for slot in self.active_wal() {
            slot.call_sync(|o| o.pre_wal_append(record))?;
        }
        Ok(())
    }
    fn post_wal_append(&self, record: &WalRecord) {
        for slot in self.active_wal() {
            // The record is logged: a failure is counted (and may unload), never returned.
            let _ = slot.call_sync(|o| {
                o.post_wal_append(record);
                Ok(())
            });
        }
    }
    fn post_wal_roll(&self, closed: u64, opened: u64) {
        for slot in self.active_wal() {
            let _ = slot.call_sync(|o| {
                o.post_wal_roll(closed, opened);
                Ok(())
            });
        }
    }
    fn observes_wal(&self) -> bool {
        !self.wal.is_empty()
    }
}
