//! One attachment's pool of instances, shared by the observer and the endpoint a plugin
//! becomes: idle instances reused, a call's deadline, limits, timing and back-off, and the
//! fault a failed call becomes.
//!
//! Invariants: an instance is used by one call at a time (it leaves the pool for the call);
//! one whose call failed is dropped, never pooled again (a trapped store may not be
//! entered); at most `max_idle` wait in the pool; while the back-off holds, no call runs.

use crate::runtime::{PluginHost, TICK};
use crate::state::{HostState, Reads};
use crate::stats::{Backoff, Stats};
use basalt_core::{Error, Result};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::{Engine, Store};

/// A store with its instance's bindings (and whatever its creator keeps with them).
pub(crate) struct Slot<I> {
    pub(crate) store: Store<HostState>,
    pub(crate) inst: I,
}

/// The pool of one attachment.
pub(crate) struct Pool<I> {
    pub(crate) name: Arc<str>,
    engine: Engine,
    ticks: u64,
    memory_bytes: usize,
    max_idle: usize,
    offload: bool,
    idle: Mutex<Vec<Slot<I>>>,
    stats: Arc<Stats>,
    backoff: Backoff,
}

/// What a trap or other runtime error of a call says.
fn describe(e: &wasmtime::Error, deadline_ms: u128) -> String {
    match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => format!("ran past its deadline of {deadline_ms} ms"),
        Some(wasmtime::Trap::StackOverflow) => "overflowed its wasm stack".to_string(),
        _ => format!("{e:#}"),
    }
}

impl<I> Pool<I> {
    /// The pool of attachment `name` (of `table`, empty for an endpoint) in `host`, each
    /// call limited to `deadline`.
    pub(crate) fn new(
        host: &PluginHost,
        name: &str,
        table: &str,
        kind: &'static str,
        deadline: Duration,
    ) -> Self {
        Pool {
            name: Arc::from(name),
            engine: host.engine.clone(),
            ticks: PluginHost::ticks(deadline),
            memory_bytes: host.limits.memory_bytes,
            max_idle: host.limits.idle_instances,
            offload: host.limits.offload,
            idle: Mutex::new(Vec::new()),
            stats: host.track(name, table, kind),
            backoff: Backoff::new(host.limits.backoff),
        }
    }

    /// A fresh store under this pool's limits, for a new instance.
    pub(crate) fn store(&self) -> Store<HostState> {
        let mut store = Store::new(
            &self.engine,
            HostState::new(self.name.clone(), self.memory_bytes),
        );
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(self.ticks);
        store
    }

    /// The fault a failed call (or instantiation) is.
    pub(crate) fn fault(&self, e: &wasmtime::Error) -> Error {
        let ms = u128::from(self.ticks) * TICK.as_millis();
        Error::PluginFault {
            name: self.name.to_string(),
            msg: describe(e, ms),
        }
    }

    /// Puts `slot` in the pool, if there is room.
    pub(crate) fn put_back(&self, slot: Slot<I>) {
        let mut idle = self.idle.lock();
        if idle.len() < self.max_idle {
            idle.push(slot);
        }
    }

    /// Runs `f` on an idle instance, or on one `make` creates, with `reads` as the call's
    /// region, under the deadline; counts it, and backs off after a fault.
    pub(crate) fn call<R>(
        &self,
        reads: Reads,
        make: impl FnOnce(&Self) -> Result<Slot<I>>,
        f: impl FnOnce(&mut Store<HostState>, &I) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let start = Instant::now();
        if let Some(msg) = self.backoff.check(start) {
            self.stats.record(start.elapsed(), true, 0);
            return Err(Error::PluginFault {
                name: self.name.to_string(),
                msg,
            });
        }
        let popped = self.idle.lock().pop();
        let mut slot = match popped.map_or_else(|| make(self), Ok) {
            Ok(s) => s,
            Err(e) => {
                self.backoff.record(start, Some(&e.to_string()));
                return Err(e);
            }
        };
        slot.store.data_mut().reads = reads;
        slot.store.set_epoch_deadline(self.ticks);
        let out = PluginHost::run(self.offload, || f(&mut slot.store, &slot.inst));
        let memory = slot.store.data().limits.memory as u64;
        self.stats.record(start.elapsed(), out.is_err(), memory);
        match out {
            Ok(r) => {
                self.backoff.record(start, None);
                slot.store.data_mut().reads = Reads::None;
                self.put_back(slot);
                Ok(r)
            }
            // The instance is dropped: a trapped store is never entered again.
            Err(e) => {
                let fault = self.fault(&e);
                let msg = match &fault {
                    Error::PluginFault { msg, .. } => msg.as_str(),
                    _ => "fault",
                };
                self.backoff.record(start, Some(msg));
                Err(fault)
            }
        }
    }
}
