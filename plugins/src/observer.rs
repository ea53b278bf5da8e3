//! A plugin as a region observer: [`PluginObserver`] turns the engine's hook calls into
//! calls of the component's `observer` exports, one per batch, on a pooled instance.
//!
//! Invariants: a hook the plugin did not ask for (`configure`'s flags) runs the trait's
//! default body, so the coprocessor host learns to skip it and the write path pays
//! nothing for it; an instance that trapped (deadline, memory, stack, `unreachable`) is
//! dropped, never pooled again, and the call fails with `Error::PluginFault`; every other
//! failure of a plugin is its answer (a refusal).

use crate::bindings::observer_world::{RegionObserver as Bindings, RegionObserverPre};
use crate::bindings::wit::{self, Decision, Hooks};
use crate::convert::{from_wit, to_wit};
use crate::grants::{Grants, GRANTS_ARG};
use crate::runtime::PluginHost;
use crate::state::{HostState, Reads};
use crate::stats::{Backoff, Stats};
use async_trait::async_trait;
use basalt_coprocessors::{MiniBatch, ObserverContext, PluginRuntime, RegionObserver};
use basalt_core::client::{Delete, Increment, Mutation, Put};
use basalt_core::{CompactionOutcome, CoprocessorDescriptor, Error, PluginKind, Result, TableName};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::Arc;
use wasmtime::Store;

/// The trait's default bodies, for hooks a plugin does not implement.
struct Defaults;
impl RegionObserver for Defaults {}

/// One instance with its store.
struct Instance {
    store: Store<HostState>,
    bindings: Bindings,
    /// What its `configure` answered.
    hooks: Hooks,
}

/// An uploaded plugin attached to a table as an observer.
pub struct PluginObserver {
    name: Arc<str>,
    pre: RegionObserverPre<HostState>,
    hooks: Hooks,
    /// The attachment's arguments: every new instance is configured with them.
    args: Vec<(String, String)>,
    ticks: u64,
    memory_bytes: usize,
    idle: Mutex<Vec<Instance>>,
    max_idle: usize,
    offload: bool,
    stats: Arc<Stats>,
    backoff: Backoff,
}

impl std::fmt::Debug for PluginObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginObserver")
            .field("name", &self.name)
            .field("hooks", &self.hooks)
            .finish()
    }
}

/// What a trap or other runtime error of a call says.
fn describe(e: &wasmtime::Error, deadline_ms: u128) -> String {
    match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => format!("ran past its deadline of {deadline_ms} ms"),
        Some(wasmtime::Trap::StackOverflow) => "overflowed its wasm stack".to_string(),
        _ => format!("{e:#}"),
    }
}

impl PluginObserver {
    /// Loads the plugin for attachment `cp`: one instance, configured with its arguments.
    pub(crate) fn load(
        host: &PluginHost,
        table: &TableName,
        cp: &CoprocessorDescriptor,
        pre: RegionObserverPre<HostState>,
    ) -> Result<Self> {
        let deadline = cp
            .timeout_ms
            .map_or(host.limits.call_deadline, std::time::Duration::from_millis);
        let args: Vec<(String, String)> = cp
            .args
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut me = PluginObserver {
            name: Arc::from(cp.name.as_str()),
            pre,
            hooks: Hooks::empty(),
            args,
            ticks: PluginHost::ticks(deadline),
            memory_bytes: host.limits.memory_bytes,
            idle: Mutex::new(Vec::new()),
            max_idle: host.limits.idle_instances,
            offload: host.limits.offload,
            backoff: Backoff::new(host.limits.backoff),
            stats: host.track(&cp.name, &table.to_string(), "observer"),
        };
        // The first instance, configured: its answer is the hooks to call.
        let first = me.instance()?;
        me.hooks = first.hooks;
        me.idle.lock().push(first);
        Ok(me)
    }

    /// The hooks the plugin asked for.
    pub fn hooks(&self) -> Vec<&'static str> {
        [
            (Hooks::PRE_MUTATE, "pre-mutate"),
            (Hooks::PRE_BATCH, "pre-batch"),
            (Hooks::POST_BATCH, "post-batch"),
            (Hooks::POST_MUTATE, "post-mutate"),
            (Hooks::FLUSH, "flush"),
            (Hooks::COMPACTION, "compaction"),
        ]
        .into_iter()
        .filter(|(h, _)| self.hooks.contains(*h))
        .map(|(_, n)| n)
        .collect()
    }

    fn instance(&self) -> Result<Instance> {
        if let Some(i) = self.idle.lock().pop() {
            return Ok(i);
        }
        let mut store = Store::new(
            self.pre.engine(),
            HostState::new(self.name.clone(), self.memory_bytes),
        );
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(self.ticks);
        let bindings = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.fault(&e))?;
        // Each instance has its own memory: each is configured before its first hook.
        let configured = bindings
            .basalt_coprocessor_observer()
            .call_configure(&mut store, &self.args)
            .map_err(|e| self.fault(&e))?;
        let hooks = configured.map_err(|msg| Error::Coprocessor {
            name: self.name.to_string(),
            msg: format!("the plugin refused its configuration: {msg}"),
        })?;
        Ok(Instance {
            store,
            bindings,
            hooks,
        })
    }

    fn fault(&self, e: &wasmtime::Error) -> Error {
        let ms = u128::from(self.ticks) * crate::runtime::TICK.as_millis();
        Error::PluginFault {
            name: self.name.to_string(),
            msg: describe(e, ms),
        }
    }

    /// Runs `f` on a pooled instance with `reads` as the call's region.
    fn call<R>(
        &self,
        reads: Reads,
        f: impl FnOnce(&mut Store<HostState>, &Bindings) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let start = std::time::Instant::now();
        if let Some(msg) = self.backoff.check(start) {
            self.stats.record(start.elapsed(), true, 0);
            return Err(Error::PluginFault {
                name: self.name.to_string(),
                msg,
            });
        }
        let mut inst = match self.instance() {
            Ok(i) => i,
            Err(e) => {
                self.backoff.record(start, Some(&e.to_string()));
                return Err(e);
            }
        };
        inst.store.data_mut().reads = reads;
        inst.store.set_epoch_deadline(self.ticks);
        let out = PluginHost::run(self.offload, || f(&mut inst.store, &inst.bindings));
        let memory = inst.store.data().limits.memory as u64;
        self.stats.record(start.elapsed(), out.is_err(), memory);
        match out {
            Ok(r) => {
                self.backoff.record(start, None);
                inst.store.data_mut().reads = Reads::None;
                let mut idle = self.idle.lock();
                if idle.len() < self.max_idle {
                    idle.push(inst);
                }
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

    fn region(ctx: &ObserverContext<'_>) -> wit::RegionInfo {
        wit::RegionInfo {
            table: ctx.table().to_string(),
            region_id: ctx.region_id(),
            start_key: ctx.region_start().to_vec(),
            end_key: ctx.region_end().to_vec(),
        }
    }

    fn reads(ctx: &ObserverContext<'_>) -> Reads {
        ctx.region_reader().map_or(Reads::None, Reads::Hook)
    }

    fn refused(&self, msg: String) -> Error {
        Error::Coprocessor {
            name: self.name.to_string(),
            msg,
        }
    }

    /// `pre-mutate` over one mutation: its decision.
    fn pre_mutate(&self, ctx: &ObserverContext<'_>, m: &Mutation) -> Result<Option<Mutation>> {
        let region = Self::region(ctx);
        let muts = [to_wit(m)];
        let decisions = self.call(Self::reads(ctx), |store, b| {
            b.basalt_coprocessor_observer()
                .call_pre_mutate(store, &region, &muts)
        })?;
        let first = decisions.into_iter().next();
        match first {
            None | Some(Decision::Keep) => Ok(None),
            Some(Decision::Veto(msg)) => Err(self.refused(msg)),
            Some(Decision::Replace(new)) => {
                let new = from_wit(new);
                if new.row() != m.row() {
                    return Err(self.refused("a replacement must keep the row".into()));
                }
                Ok(Some(new))
            }
        }
    }

    /// `post-mutate` over one mutation.
    fn post_mutate(&self, ctx: &ObserverContext<'_>, m: &Mutation) -> Result<()> {
        let region = Self::region(ctx);
        let muts = [to_wit(m)];
        self.call(Self::reads(ctx), |store, b| {
            b.basalt_coprocessor_observer()
                .call_post_mutate(store, &region, &muts)
        })
    }

    fn table(&self, name: &str) -> Result<Option<TableName>> {
        if name.is_empty() {
            return Ok(None);
        }
        TableName::parse(name)
            .map(Some)
            .map_err(|e| self.refused(format!("added write to table {name:?}: {e}")))
    }
}

#[async_trait]
impl RegionObserver for PluginObserver {
    async fn pre_put(&self, ctx: &mut ObserverContext<'_>, put: &mut Put) -> Result<()> {
        if !self.hooks.contains(Hooks::PRE_MUTATE) {
            return Defaults.pre_put(ctx, put).await;
        }
        match self.pre_mutate(ctx, &Mutation::Put(put.clone()))? {
            None => Ok(()),
            Some(Mutation::Put(p)) => {
                *put = p;
                Ok(())
            }
            Some(Mutation::Delete(_)) => {
                Err(self.refused("pre-mutate replaced a put with a delete".into()))
            }
        }
    }

    async fn pre_delete(&self, ctx: &mut ObserverContext<'_>, delete: &mut Delete) -> Result<()> {
        if !self.hooks.contains(Hooks::PRE_MUTATE) {
            return Defaults.pre_delete(ctx, delete).await;
        }
        match self.pre_mutate(ctx, &Mutation::Delete(delete.clone()))? {
            None => Ok(()),
            Some(Mutation::Delete(d)) => {
                *delete = d;
                Ok(())
            }
            Some(Mutation::Put(_)) => {
                Err(self.refused("pre-mutate replaced a delete with a put".into()))
            }
        }
    }

    async fn pre_batch_mutate(
        &self,
        ctx: &mut ObserverContext<'_>,
        batch: &mut MiniBatch<'_>,
    ) -> Result<()> {
        if !self.hooks.contains(Hooks::PRE_BATCH) {
            return Defaults.pre_batch_mutate(ctx, batch).await;
        }
        let region = Self::region(ctx);
        let muts: Vec<wit::Mutation> = batch.operations().map(to_wit).collect();
        let answer = self.call(Self::reads(ctx), |store, b| {
            b.basalt_coprocessor_observer()
                .call_pre_batch(store, &region, &muts)
        })?;
        for (i, d) in answer.decisions.into_iter().enumerate() {
            match d {
                Decision::Keep => {}
                Decision::Veto(msg) => batch.veto(i, self.refused(msg)),
                Decision::Replace(m) => batch
                    .replace(i, from_wit(m))
                    .map_err(|e| self.refused(e.to_string()))?,
            }
        }
        for w in answer.writes {
            let m = from_wit(w.mutation);
            match self.table(&w.table)? {
                None => batch.add_mutation(m),
                Some(t) => batch.add_mutation_to(t, m),
            }
        }
        for inc in answer.increments {
            let i = Increment::new(&inc.row).add_column(inc.family, inc.qualifier, inc.amount);
            let t = match self.table(&inc.table)? {
                Some(t) => t,
                None => ctx.table().clone(),
            };
            batch.add_increment_to(t, i);
        }
        Ok(())
    }

    async fn post_batch(
        &self,
        ctx: &mut ObserverContext<'_>,
        ops: &[&Mutation],
        outcome: &Result<()>,
    ) -> Result<()> {
        if !self.hooks.contains(Hooks::POST_BATCH) {
            return Defaults.post_batch(ctx, ops, outcome).await;
        }
        let region = Self::region(ctx);
        let muts: Vec<wit::Mutation> = ops.iter().map(|m| to_wit(m)).collect();
        let outcome = outcome.as_ref().map(|_| ()).map_err(|e| e.to_string());
        let outcome = outcome.as_ref().map(|_| ()).map_err(String::as_str);
        self.call(Self::reads(ctx), |store, b| {
            b.basalt_coprocessor_observer()
                .call_post_batch(store, &region, &muts, outcome)
        })
    }

    async fn post_put(&self, ctx: &mut ObserverContext<'_>, put: &Put) -> Result<()> {
        if !self.hooks.contains(Hooks::POST_MUTATE) {
            return Defaults.post_put(ctx, put).await;
        }
        self.post_mutate(ctx, &Mutation::Put(put.clone()))
    }

    async fn post_delete(&self, ctx: &mut ObserverContext<'_>, delete: &Delete) -> Result<()> {
        if !self.hooks.contains(Hooks::POST_MUTATE) {
            return Defaults.post_delete(ctx, delete).await;
        }
        self.post_mutate(ctx, &Mutation::Delete(delete.clone()))
    }

    async fn post_flush(&self, ctx: &mut ObserverContext<'_>, family: &Bytes) -> Result<()> {
        if !self.hooks.contains(Hooks::FLUSH) {
            return Defaults.post_flush(ctx, family).await;
        }
        let region = Self::region(ctx);
        self.call(Self::reads(ctx), |store, b| {
            b.basalt_coprocessor_observer()
                .call_flushed(store, &region, family)
        })
    }

    async fn post_compact(
        &self,
        ctx: &mut ObserverContext<'_>,
        family: &Bytes,
        outcome: &CompactionOutcome,
    ) -> Result<()> {
        if !self.hooks.contains(Hooks::COMPACTION) {
            return Defaults.post_compact(ctx, family, outcome).await;
        }
        let region = Self::region(ctx);
        let files = u32::try_from(outcome.files_in).unwrap_or(u32::MAX);
        let dropped = outcome.cells_dropped;
        self.call(Self::reads(ctx), |store, b| {
            b.basalt_coprocessor_observer()
                .call_compacted(store, &region, family, files, dropped)
        })
    }
}

/// The runtime the coprocessor registry calls: validation at upload, observers at attach.
impl PluginRuntime for PluginHost {
    fn validate(&self, bytes: &[u8]) -> Result<PluginKind> {
        let id = basalt_core::plugin_id(bytes);
        let component = self.compile(&id, bytes)?;
        let observer = match self.observer_pre(&component, Grants::default()) {
            Ok(_) => return Ok(PluginKind::Observer),
            Err(e) => e,
        };
        match self.endpoint_pre(&component) {
            Ok(_) => Ok(PluginKind::Endpoint),
            Err(endpoint) => Err(Error::bad_argument(format!(
                "the component targets neither world of basalt:coprocessor@0.1.0: {observer}; {endpoint}"
            ))),
        }
    }

    fn observer(
        &self,
        table: &TableName,
        id: &str,
        bytes: &Bytes,
        cp: &CoprocessorDescriptor,
    ) -> Result<Arc<dyn RegionObserver>> {
        let component = self.compile(id, bytes)?;
        let grants = Grants::parse(cp.args.get(GRANTS_ARG).map_or("", String::as_str))?;
        let pre = self.observer_pre(&component, grants)?;
        let observer = PluginObserver::load(self, table, cp, pre)?;
        Ok(Arc::new(observer))
    }
}
