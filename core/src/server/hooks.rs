//! Calling a table's coprocessor hooks ([`crate::coprocessor::RegionHooks`]) on the write
//! and read paths, and changing a table's coprocessors without a restart.
//!
//! Order of a hooked write (ARCHITECTURE.md): `pre_put`/`pre_delete` per mutation, outside
//! any lock -> validation -> row locks -> `pre_batch_mutate` per region under the locks ->
//! commit (one WAL record, one MVCC transaction, mutations the hooks added included) ->
//! unlock -> `post_put`/`post_delete`. Invariants: a table without coprocessors never enters
//! this module's paths (callers check `TableState::hooks` first, which allocates nothing);
//! row locks are only ever held by guards, so a hook's error, panic or cancellation releases
//! them; hooks are loaded before a table change is written, so a coprocessor that cannot load
//! changes nothing.

use super::{Config, Engine, TableState};
use crate::client::ops::{BatchOutcome, Get, Mutation, RowResult};
use crate::coprocessor::{Flow, HookEnv, MiniBatch, RegionHooks};
use crate::error::{Error, Result};
use crate::region::Region;
use crate::schema::{CoprocessorDescriptor, TableDescriptor, TableName};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One slot of a batch's results.
type Slot = Option<Result<BatchOutcome>>;

/// The hooks for a descriptor: `None` when it lists no coprocessor, an error when it lists
/// some that the configured loader cannot load (or no loader is configured).
pub(crate) fn load_hooks(
    config: &Config,
    desc: &TableDescriptor,
) -> Result<Option<Arc<dyn RegionHooks>>> {
    let desc = super::lifecycle::effective_descriptor(config, desc);
    let desc = desc.as_ref();
    if desc.coprocessors.is_empty() {
        return Ok(None);
    }
    match &config.coprocessor_loader {
        Some(loader) => loader.load(desc).map(Some),
        None => Err(Error::Coprocessor {
            name: desc
                .coprocessors
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
            msg: format!(
                "table {} lists coprocessors but the engine has no coprocessor loader",
                desc.name
            ),
        }),
    }
}

/// A copy of an error for a second operation of a batch (errors are not `Clone`).
fn copy_error(e: &Error) -> Error {
    match e {
        Error::Coprocessor { name, msg } => Error::Coprocessor {
            name: name.clone(),
            msg: msg.clone(),
        },
        Error::BadArgument(m) => Error::BadArgument(m.clone()),
        other => Error::WritesRefused(other.to_string()),
    }
}

fn set(results: &mut [Slot], i: usize, r: Result<BatchOutcome>) {
    if let Some(slot) = results.get_mut(i) {
        *slot = Some(r);
    }
}

impl Engine {
    fn region_for(&self, t: &TableState, row: &[u8]) -> Result<Arc<Region>> {
        t.locate(row)
            .ok_or_else(|| Error::TableNotFound(t.name.to_string()))
    }

    fn env_for<'a>(self: &'a Arc<Self>, t: &'a TableState, row: &[u8]) -> Result<HookEnv<'a>> {
        Ok(HookEnv::new(self, t, self.region_for(t, row)?))
    }

    /// Replaces a table's coprocessor list (a schema change: the new chain serves the next
    /// operation, no restart). The new hooks are loaded before the catalog is written.
    pub fn set_coprocessors(
        &self,
        name: &TableName,
        coprocessors: Vec<CoprocessorDescriptor>,
    ) -> Result<()> {
        let t = self.table(name)?;
        let mut desc = t.descriptor.read().clone();
        desc.coprocessors = coprocessors;
        desc.validate()?;
        let hooks = load_hooks(&self.config, &desc)?;
        let key = t.name.to_string();
        self.catalog.update(|s| {
            let e = s.table_mut(&key)?;
            e.descriptor = desc.clone();
            Ok(())
        })?;
        *t.descriptor.write() = desc;
        t.hooks.set(hooks);
        Ok(())
    }

    /// Adds a coprocessor to a table (loaded after those already listed).
    pub fn add_coprocessor(&self, name: &TableName, cp: CoprocessorDescriptor) -> Result<()> {
        let mut list = self.table(name)?.descriptor.read().coprocessors.clone();
        if list.iter().any(|c| c.name == cp.name) {
            return Err(Error::bad_argument(format!(
                "table {name} already has coprocessor {}",
                cp.name
            )));
        }
        list.push(cp);
        self.set_coprocessors(name, list)
    }

    /// Removes a coprocessor from a table by name.
    pub fn remove_coprocessor(&self, name: &TableName, cp_name: &str) -> Result<()> {
        let mut list = self.table(name)?.descriptor.read().coprocessors.clone();
        let before = list.len();
        list.retain(|c| c.name != cp_name);
        if list.len() == before {
            return Err(Error::bad_argument(format!(
                "table {name} has no coprocessor {cp_name}"
            )));
        }
        self.set_coprocessors(name, list)
    }

    /// Reads one row, running the table's get hooks when it has coprocessors.
    pub async fn get_hooked(self: &Arc<Self>, t: &TableState, mut g: Get) -> Result<RowResult> {
        let Some(hooks) = t.hooks() else {
            return self.get(t, &g);
        };
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &g.row)?;
        let mut result = RowResult {
            row: g.row.clone(),
            cells: Vec::new(),
        };
        if hooks.pre_get(&env, &mut g, &mut result).await? == Flow::Bypass {
            return Ok(result);
        }
        let mut result = self.get(t, &g)?;
        hooks.post_get(&env, &g, &mut result).await?;
        Ok(result)
    }

    async fn pre_mutation(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        m: &mut Mutation,
    ) -> Result<Flow> {
        let env = self.env_for(t, m.row())?;
        match m {
            Mutation::Put(p) => hooks.pre_put(&env, p).await,
            Mutation::Delete(d) => hooks.pre_delete(&env, d).await,
        }
    }

    async fn post_mutation(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        m: &Mutation,
    ) -> Result<()> {
        let env = self.env_for(t, m.row())?;
        match m {
            Mutation::Put(p) => hooks.post_put(&env, p).await,
            Mutation::Delete(d) => hooks.post_delete(&env, d).await,
        }
    }

    /// [`Engine::mutate`] for a table with coprocessors: pre-hooks, validation, locks, the
    /// locked commit (which runs `pre_batch_mutate`), unlock, post-hooks. A post-hook error is
    /// returned although the write committed (as HBase's `postPut`).
    pub(super) async fn mutate_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        muts: Vec<Mutation>,
    ) -> Result<()> {
        let mut kept = Vec::with_capacity(muts.len());
        for mut m in muts {
            if self.pre_mutation(t, hooks, &mut m).await? == Flow::Continue {
                kept.push(m);
            }
        }
        if kept.is_empty() {
            return Ok(());
        }
        for m in &kept {
            self.validate_mutation(t, m)?;
        }
        let name = t.name.to_string();
        let locks = self
            .locks
            .lock(kept.iter().map(|m| (name.as_str(), m.row().clone())))
            .await;
        self.mutate_locked(t, &kept).await?;
        drop(locks);
        let mut first_err = None;
        for m in &kept {
            if let Err(e) = self.post_mutation(t, hooks, m).await {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Runs `pre_batch_mutate` once per region of `muts` (the caller holds their row locks).
    /// Returns the veto of each operation and the validated mutations the hooks added; an
    /// error (a hook's, or an invalid added mutation) fails the whole batch.
    pub(super) async fn pre_batch(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        muts: &[&Mutation],
    ) -> Result<(Vec<Option<Error>>, Vec<Mutation>)> {
        let mut by_region: BTreeMap<u64, (Arc<Region>, Vec<usize>)> = BTreeMap::new();
        for (i, m) in muts.iter().enumerate() {
            let r = self.region_for(t, m.row())?;
            by_region
                .entry(r.id)
                .or_insert_with(|| (r.clone(), Vec::new()))
                .1
                .push(i);
        }
        let mut vetoes: Vec<Option<Error>> = muts.iter().map(|_| None).collect();
        let mut extra = Vec::new();
        for (region, idx) in by_region.into_values() {
            let ops: Vec<&Mutation> = idx.iter().filter_map(|i| muts.get(*i).copied()).collect();
            let env = HookEnv::new(self, t, region);
            let mut mb = MiniBatch::new(&ops);
            hooks.pre_batch_mutate(&env, &mut mb).await?;
            let (v, added) = mb.into_parts();
            for (j, veto) in v.into_iter().enumerate() {
                if let (Some(e), Some(slot)) = (veto, idx.get(j).and_then(|i| vetoes.get_mut(*i))) {
                    *slot = Some(e);
                }
            }
            extra.extend(added);
        }
        for m in &extra {
            self.validate_mutation(t, m).map_err(|e| {
                Error::bad_argument(format!("a mutation a coprocessor added is invalid: {e}"))
            })?;
        }
        Ok((vetoes, extra))
    }

    /// A batch's pre-hooks: returns the mutations to run; bypassed ones are answered
    /// `Done`, failed ones with their error.
    pub(super) async fn batch_pre_hooks(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        group: Vec<(usize, Mutation)>,
        results: &mut [Slot],
    ) -> Vec<(usize, Mutation)> {
        let mut kept = Vec::with_capacity(group.len());
        for (i, mut m) in group {
            match self.pre_mutation(t, hooks, &mut m).await {
                Ok(Flow::Continue) => kept.push((i, m)),
                Ok(Flow::Bypass) => set(results, i, Ok(BatchOutcome::Done)),
                Err(e) => set(results, i, Err(e)),
            }
        }
        kept
    }

    /// A batch's `pre_batch_mutate` under its row locks: vetoed operations are answered with
    /// their veto and leave `group`; returns the added mutations. On a hook error every
    /// operation is answered with it and `group` is emptied.
    pub(super) async fn batch_pre_batch(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        group: &mut Vec<(usize, Mutation)>,
        results: &mut [Slot],
    ) -> Vec<Mutation> {
        let refs: Vec<&Mutation> = group.iter().map(|(_, m)| m).collect();
        let outcome = self.pre_batch(t, hooks, &refs).await;
        drop(refs);
        match outcome {
            Ok((vetoes, extra)) => {
                let mut vetoes = vetoes.into_iter();
                group.retain(|(i, _)| match vetoes.next().flatten() {
                    Some(e) => {
                        set(results, *i, Err(e));
                        false
                    }
                    None => true,
                });
                extra
            }
            Err(e) => {
                for (i, _) in group.drain(..) {
                    set(results, i, Err(copy_error(&e)));
                }
                Vec::new()
            }
        }
    }

    /// A batch's post-hooks for the operations in `ok` (committed); a failing hook turns
    /// its operation's result into the error.
    pub(super) async fn batch_post_hooks(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        group: &[(usize, Mutation)],
        ok: &[usize],
        results: &mut [Slot],
    ) {
        for (i, m) in group {
            if ok.binary_search(i).is_ok() {
                if let Err(e) = self.post_mutation(t, hooks, m).await {
                    set(results, *i, Err(e));
                }
            }
        }
    }
}
