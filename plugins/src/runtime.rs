//! The plugin runtime: one wasmtime engine with epoch interruption, a background ticker,
//! compiled components cached by id, and per-plugin instance pools.
//!
//! Invariants: the ticker advances the epoch every [`TICK`]; a call's deadline is set in
//! ticks before it starts, so no call runs more than `call_deadline + TICK` of wasm; the
//! ticker stops when the host drops.

use crate::bindings::{endpoint_world::RegionEndpointPre, observer_world::RegionObserverPre};
use crate::grants::Grants;
use crate::state::HostState;
use crate::stats::{PluginStats, Stats};
use basalt_core::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine};

/// How often the epoch advances.
pub const TICK: Duration = Duration::from_millis(5);

/// What one plugin call or instance may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLimits {
    /// The longest one call may run (default 100 ms); an attachment's `timeout_ms`
    /// overrides it.
    pub call_deadline: Duration,
    /// The most linear memory one instance may grow to (default 16 MiB).
    pub memory_bytes: usize,
    /// The deepest wasm stack a call may use (default 512 KiB).
    pub stack_bytes: usize,
    /// Idle instances kept per attachment for reuse (default 8).
    pub idle_instances: usize,
    /// Runs each call with `tokio::task::block_in_place` on a multi-threaded runtime
    /// (default off): the worker thread's other tasks move to another thread while the
    /// plugin runs, so a plugin running to its deadline holds up only its own operation.
    /// It costs about 4 us a call (`plugins` bench suite); with the back-off below, a
    /// runaway plugin holds a worker for at most one deadline per back-off period anyway.
    pub offload: bool,
    /// The first back-off after a fault (default 50 ms; zero turns back-off off): after
    /// `k` faults in a row an attachment's calls fail at once for `backoff * 2^(k-1)`, at
    /// most 10 s, and a successful call ends it.
    pub backoff: Duration,
}

impl Default for PluginLimits {
    fn default() -> Self {
        PluginLimits {
            call_deadline: Duration::from_millis(100),
            memory_bytes: 16 << 20,
            stack_bytes: 512 << 10,
            idle_instances: 8,
            offload: false,
            backoff: Duration::from_millis(50),
        }
    }
}

/// The plugin runtime ([`basalt_coprocessors::PluginRuntime`] for the coprocessor registry).
pub struct PluginHost {
    pub(crate) engine: Engine,
    pub(crate) limits: PluginLimits,
    compiled: Mutex<HashMap<String, Component>>,
    /// The counters of every attachment loaded, held weakly.
    stats: Mutex<Vec<Weak<Stats>>>,
    /// Dropping it stops the ticker.
    _ticker: mpsc::Sender<()>,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("limits", &self.limits)
            .field("compiled", &self.compiled.lock().len())
            .finish()
    }
}

pub(crate) fn engine_err(e: impl std::fmt::Display) -> Error {
    Error::bad_argument(format!("plugin runtime: {e}"))
}

impl PluginHost {
    /// A runtime with these limits.
    pub fn new(limits: PluginLimits) -> Result<Arc<Self>> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .max_wasm_stack(limits.stack_bytes);
        let engine = Engine::new(&config).map_err(engine_err)?;
        let (tx, rx) = mpsc::channel::<()>();
        let ticking = engine.clone();
        std::thread::Builder::new()
            .name("basalt-plugin-epoch".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(TICK) {
                    ticking.increment_epoch();
                }
            })?;
        Ok(Arc::new(PluginHost {
            engine,
            limits,
            compiled: Mutex::new(HashMap::new()),
            stats: Mutex::new(Vec::new()),
            _ticker: tx,
        }))
    }

    /// A runtime with the default limits.
    pub fn with_defaults() -> Result<Arc<Self>> {
        Self::new(PluginLimits::default())
    }

    /// The limits.
    pub fn limits(&self) -> PluginLimits {
        self.limits
    }

    /// What every loaded plugin has done (those still attached or registered), by table
    /// and name.
    pub fn plugin_stats(&self) -> Vec<PluginStats> {
        let mut stats = self.stats.lock();
        stats.retain(|w| w.strong_count() > 0);
        let mut out: Vec<PluginStats> = stats
            .iter()
            .filter_map(Weak::upgrade)
            .map(|s| s.snapshot())
            .collect();
        out.sort_by(|a, b| (&a.table, &a.name).cmp(&(&b.table, &b.name)));
        out
    }

    /// New counters for an attachment, listed by [`PluginHost::plugin_stats`] while held.
    pub(crate) fn track(&self, name: &str, table: &str, kind: &'static str) -> Arc<Stats> {
        let s = Arc::new(Stats::new(name.to_string(), table.to_string(), kind));
        self.stats.lock().push(Arc::downgrade(&s));
        s
    }

    /// The compiled component of `bytes` (id `id`), compiled once and cached.
    pub(crate) fn compile(&self, id: &str, bytes: &[u8]) -> Result<Component> {
        if let Some(c) = self.compiled.lock().get(id) {
            return Ok(c.clone());
        }
        let c = Component::new(&self.engine, bytes)
            .map_err(|e| Error::bad_argument(format!("not a valid component: {e:#}")))?;
        self.compiled.lock().insert(id.to_string(), c.clone());
        Ok(c)
    }

    /// A linker for `component`: the `region` interface, what `grants` allow, and a trap
    /// for every other import.
    pub(crate) fn linker(
        &self,
        component: &Component,
        grants: Grants,
    ) -> Result<Linker<HostState>> {
        let mut linker = Linker::<HostState>::new(&self.engine);
        crate::bindings::observer_world::RegionObserver::add_to_linker::<_, HasSelf<_>>(
            &mut linker,
            |s| s,
        )
        .map_err(engine_err)?;
        crate::grants::link(&mut linker, &self.engine, component, grants).map_err(engine_err)?;
        linker
            .define_unknown_imports_as_traps(component)
            .map_err(engine_err)?;
        Ok(linker)
    }

    /// The observer world's pre-instance of `component`, or why it is not one.
    pub(crate) fn observer_pre(
        &self,
        component: &Component,
        grants: Grants,
    ) -> Result<RegionObserverPre<HostState>> {
        let pre = self
            .linker(component, grants)?
            .instantiate_pre(component)
            .map_err(engine_err)?;
        RegionObserverPre::new(pre)
            .map_err(|e| Error::bad_argument(format!("not a region-observer component: {e:#}")))
    }

    /// The endpoint world's pre-instance of `component`, or why it is not one.
    pub(crate) fn endpoint_pre(
        &self,
        component: &Component,
    ) -> Result<RegionEndpointPre<HostState>> {
        let pre = self
            .linker(component, Grants::default())?
            .instantiate_pre(component)
            .map_err(engine_err)?;
        RegionEndpointPre::new(pre)
            .map_err(|e| Error::bad_argument(format!("not a region-endpoint component: {e:#}")))
    }

    /// Runs `f`, off the async worker when [`PluginLimits::offload`] says so and the
    /// runtime is multi-threaded (elsewhere `block_in_place` is not allowed).
    pub(crate) fn run<R>(offload: bool, f: impl FnOnce() -> R) -> R {
        let multi = offload
            && tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if multi {
            tokio::task::block_in_place(f)
        } else {
            f()
        }
    }

    /// The epoch ticks of a call limited to `deadline`.
    pub(crate) fn ticks(deadline: Duration) -> u64 {
        let tick = TICK.as_micros().max(1);
        (deadline.as_micros() / tick + 1) as u64
    }
}
