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
use crate::convert::{from_wit, pack};
use crate::grants::{Grants, GRANTS_ARG};
use crate::pool::{Pool, Slot};
use crate::runtime::PluginHost;
use crate::state::{HostState, Reads};
use async_trait::async_trait;
use basalt_coprocessors::{MiniBatch, ObserverContext, PluginRuntime, RegionObserver};
use basalt_core::client::{Delete, Increment, Mutation, Put};
use basalt_core::{CompactionOutcome, CoprocessorDescriptor, Error, PluginKind, Result, TableName};
use bytes::Bytes;
use std::sync::Arc;
use wasmtime::Store;

/// Bytes to reserve per mutation when packing a batch (a row, two cells and their values
/// fit; more grows the buffer).
const PACKED_MUTATION_HINT: usize = 192;

/// The trait's default bodies, for hooks a plugin does not implement.
struct Defaults;
impl RegionObserver for Defaults {}

/// An uploaded plugin attached to a table as an observer.
pub struct PluginObserver {
    /// Its instances, each with what its `configure` answered.
    pool: Pool<(Bindings, Hooks)>,
    pre: RegionObserverPre<HostState>,
    hooks: Hooks,
    /// The attachment's arguments: every new instance is configured with them.
    args: Vec<(String, String)>,
}

impl std::fmt::Debug for PluginObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginObserver")
            .field("name", &self.pool.name)
            .field("hooks", &self.hooks)
            .finish()
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
            pool: Pool::new(host, &cp.name, &table.to_string(), "observer", deadline),
            pre,
            hooks: Hooks::empty(),
            args,
        };
        // The first instance, configured: its answer is the hooks to call.
        let first = me.make()?;
        me.hooks = first.inst.1;
        me.pool.put_back(first);
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

    /// A new instance, configured with the attachment's arguments (each instance has its
    /// own memory, so each is configured before its first hook).
    fn make(&self) -> Result<Slot<(Bindings, Hooks)>> {
        let mut store = self.pool.store();
        let bindings = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.pool.fault(&e))?;
        let configured = bindings
            .basalt_coprocessor_observer()
            .call_configure(&mut store, &self.args)
            .map_err(|e| self.pool.fault(&e))?;
        let hooks = configured.map_err(|msg| Error::Coprocessor {
            name: self.pool.name.to_string(),
            msg: format!("the plugin refused its configuration: {msg}"),
        })?;
        Ok(Slot {
            store,
            inst: (bindings, hooks),
        })
    }

    /// Runs `f` on a pooled instance with `reads` as the call's region.
    fn call<R>(
        &self,
        reads: Reads,
        f: impl FnOnce(&mut Store<HostState>, &Bindings) -> wasmtime::Result<R>,
    ) -> Result<R> {
        self.pool
            .call(reads, |_| self.make(), |store, inst| f(store, &inst.0))
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
            name: self.pool.name.to_string(),
            msg,
        }
    }

    /// `pre-mutate` over one mutation: its decision.
    fn pre_mutate(&self, ctx: &ObserverContext<'_>, m: &Mutation) -> Result<Option<Mutation>> {
        let region = Self::region(ctx);
        let mut muts = Vec::new();
        pack(std::iter::once(m), &mut muts)?;
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
        let mut muts = Vec::new();
        pack(std::iter::once(m), &mut muts)?;
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
        let mut muts = Vec::with_capacity(PACKED_MUTATION_HINT.saturating_mul(batch.len()));
        pack(batch.operations(), &mut muts)?;
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
        let mut muts = Vec::with_capacity(PACKED_MUTATION_HINT.saturating_mul(ops.len()));
        pack(ops.iter().copied(), &mut muts)?;
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
                "the component targets neither world of basalt:coprocessor@0.2.0: {observer}; {endpoint}"
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
