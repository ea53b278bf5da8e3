//! Hooked batches and read-modify-writes: a batch's per-operation pre- and post-hooks around
//! its locked commit, and the hooks of exists, increment, append and check-and-mutate.

use super::*;
use crate::coprocessor::{Flow, RegionHooks};
use crate::error::Result;
use crate::ops::{Append, BatchOutcome, CheckAndMutate, Get, Increment, Mutation, RowResult};
use crate::server::write::{strongest, Delta, DeltaOptions};
use crate::server::{now_ms, Engine, TableState};
use crate::wal::Durability;
use bytes::Bytes;
use std::sync::Arc;

impl Engine {
    /// The locked part of a hooked batch (the caller holds the row locks of `group` and of
    /// `plan`'s extra rows): prepare (a failed operation is answered and leaves `group`),
    /// `pre_batch_mutate` (vetoed operations are answered and leave `group`; a hook error
    /// answers every operation and empties it), commit with the added writes, `post_batch`.
    /// Returns the operations committed (their slots still empty unless a later hook failed
    /// them) and the commit's outcome. When the commit must relock ([`LockPlan`]) it returns
    /// no operation, leaving those still in `group` unanswered.
    pub(in crate::server) async fn batch_locked_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        group: &mut Vec<(usize, Mutation)>,
        results: &mut [Slot],
        plan: &mut LockPlan,
    ) -> (Vec<usize>, Result<()>) {
        let held: Vec<Bytes> = group.iter().map(|(_, m)| m.row().clone()).collect();
        let now = self.hooked_now(t, held.iter(), plan.min_ts).await;
        let mut cells = cells_with_room(group.iter().map(|(_, m)| m));
        let mut spans = Vec::with_capacity(group.len());
        for (i, m) in group.iter() {
            let mark = cells.len();
            match self.prepare(t, m, now, &mut cells) {
                Ok(()) => spans.push(Some(mark..cells.len())),
                Err(e) => {
                    cells.truncate(mark);
                    set(results, *i, Err(e));
                    spans.push(None);
                }
            }
        }
        let mut prepared = spans.iter();
        group.retain(|_| prepared.next().is_some_and(Option::is_some));
        let mut spans: Vec<std::ops::Range<usize>> = spans.into_iter().flatten().collect();
        let refs: Vec<&Mutation> = group.iter().map(|(_, m)| m).collect();
        let pre = self.pre_batch(t, hooks, &refs, now, &cells).await;
        let pre = match pre {
            Ok(pre) => {
                drop(refs);
                pre
            }
            Err(e) => {
                let outcome = Err(e);
                // A failed batch's post_batch error is dropped: the batch's error stands.
                let _ = self.post_batch_all(t, hooks, &refs, &outcome).await;
                drop(refs);
                if let Err(e) = &outcome {
                    for (i, _) in group.drain(..) {
                        set(results, i, Err(copy_error(e)));
                    }
                }
                return (Vec::new(), Ok(()));
            }
        };
        let mut vetoes = pre.vetoes.into_iter();
        let mut kept_spans = spans.drain(..);
        let mut keep = vec![false; cells.len()];
        group.retain(|(i, _)| {
            let span = kept_spans.next().unwrap_or_default();
            match vetoes.next().flatten() {
                Some(e) => {
                    set(results, *i, Err(e));
                    false
                }
                None => {
                    for k in span {
                        if let Some(slot) = keep.get_mut(k) {
                            *slot = true;
                        }
                    }
                    true
                }
            }
        });
        let mut keep = keep.into_iter();
        cells.retain(|_| keep.next().unwrap_or(false));
        let ok: Vec<usize> = group.iter().map(|(i, _)| *i).collect();
        let durability = strongest(group.iter().map(|(_, m)| m.durability()));
        let written: Vec<&Mutation> = group.iter().map(|(_, m)| m).collect();
        if written.is_empty() {
            // Nothing of the batch is written: neither are the writes its hooks added.
            return (ok, Ok(()));
        }
        let run = self
            .commit_with_added(
                t, hooks, &held, &written, cells, durability, pre.added, pre.absent, plan, now,
            )
            .await;
        if run.is_ok() && !plan.relock {
            self.record_hooked(t, written.iter().map(|m| m.row()), now);
        }
        if plan.relock {
            return (Vec::new(), Ok(()));
        }
        let (outcome, late) = match run {
            Ok(late) => (Ok(()), late),
            Err(e) => (Err(e), None),
        };
        let post = self.post_batch_all(t, hooks, &written, &outcome).await;
        if outcome.is_ok() {
            if let Some(e) = late.or(post.err()) {
                for i in &ok {
                    set(results, *i, Err(copy_error(&e)));
                }
            }
        }
        (ok, outcome)
    }

    /// Answers `exists`, running the table's exists hooks when it has coprocessors (not the
    /// get hooks).
    pub(crate) async fn exists_hooked(
        self: &Arc<Self>,
        t: &TableState,
        mut g: Get,
    ) -> Result<bool> {
        let Some(hooks) = t.hooks() else {
            return Ok(!self.get(t, &g)?.is_empty());
        };
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &g.row)?;
        let mut exists = false;
        if hooks.pre_exists(&env, &mut g, &mut exists).await? == Flow::Bypass {
            return Ok(exists);
        }
        let mut exists = !self.get(t, &g)?.is_empty();
        hooks.post_exists(&env, &g, &mut exists).await?;
        Ok(exists)
    }

    /// [`Engine::increment`] for a table with coprocessors.
    pub(in crate::server) async fn increment_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        mut inc: Increment,
    ) -> Result<RowResult> {
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &inc.row)?;
        let mut result = RowResult {
            row: inc.row.clone(),
            cells: Vec::new(),
        };
        if hooks.pre_increment(&env, &mut inc, &mut result).await? == Flow::Bypass {
            return Ok(result);
        }
        let deltas = inc
            .columns
            .iter()
            .map(|(f, q, a)| (f, q, Delta::Add(*a)))
            .collect();
        let mut result = self
            .read_modify_write_hooked(
                t,
                &inc.row,
                inc.durability,
                DeltaOptions {
                    range: inc.time_range,
                    ttl_ms: inc.ttl_ms,
                },
                deltas,
            )
            .await?;
        hooks.post_increment(&env, &inc, &mut result).await?;
        Ok(result)
    }

    /// [`Engine::append`] for a table with coprocessors.
    pub(in crate::server) async fn append_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        mut app: Append,
    ) -> Result<RowResult> {
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &app.row)?;
        let mut result = RowResult {
            row: app.row.clone(),
            cells: Vec::new(),
        };
        if hooks.pre_append(&env, &mut app, &mut result).await? == Flow::Bypass {
            return Ok(result);
        }
        let deltas = app
            .columns
            .iter()
            .map(|(f, q, v)| (f, q, Delta::Append(v.clone())))
            .collect();
        let mut result = self
            .read_modify_write_hooked(
                t,
                &app.row,
                app.durability,
                DeltaOptions {
                    range: app.time_range,
                    ttl_ms: app.ttl_ms,
                },
                deltas,
            )
            .await?;
        hooks.post_append(&env, &app, &mut result).await?;
        Ok(result)
    }

    /// [`Engine::check_and_mutate`] for a table with coprocessors.
    pub(in crate::server) async fn check_and_mutate_hooked(
        self: &Arc<Self>,
        t: &TableState,
        hooks: &Arc<dyn RegionHooks>,
        mut cam: CheckAndMutate,
    ) -> Result<bool> {
        self.check_open()?;
        t.check_enabled()?;
        let env = self.env_for(t, &cam.row)?;
        let mut passed = false;
        if hooks
            .pre_check_and_mutate(&env, &mut cam, &mut passed)
            .await?
            == Flow::Bypass
        {
            return Ok(passed);
        }
        let mut passed = self.check_and_mutate_unhooked(t, cam.clone()).await?;
        hooks.post_check_and_mutate(&env, &cam, &mut passed).await?;
        Ok(passed)
    }

    /// An increment or append of a table with hooks: under the row lock, the new values are
    /// read and written as a put of those values at their resolved timestamps through the
    /// locked write path, so the batch hooks see it (an index maintains itself on it).
    pub(in crate::server) async fn read_modify_write_hooked(
        self: &Arc<Self>,
        t: &TableState,
        row: &Bytes,
        durability: Durability,
        opts: DeltaOptions,
        deltas: Vec<(&Bytes, &Bytes, Delta)>,
    ) -> Result<RowResult> {
        self.validate_read_modify_write(t, row, &deltas)?;
        let mut plan = LockPlan::default();
        loop {
            let locks = self.lock_planned(t, std::iter::once(row), &plan).await;
            let mut cells = Vec::new();
            let result = self.resolve_deltas(t, row, deltas.clone(), opts, now_ms(), &mut cells)?;
            let mut put = crate::ops::Put::new(row).durability(durability);
            if let Some(ttl) = opts.ttl_ms {
                put = put.ttl_ms(ttl);
            }
            for c in &result {
                put = put.add_column_ts(&c.family, &c.qualifier, c.timestamp, &c.value);
            }
            let r = self
                .mutate_locked(t, &[Mutation::Put(put)], &mut plan)
                .await;
            drop(locks);
            if !plan.take_relock() {
                r?;
                return Ok(RowResult {
                    row: row.clone(),
                    cells: result,
                });
            }
        }
    }

    /// A batch's pre-hooks: returns the mutations to run; bypassed ones are answered
    /// `Done`, failed ones with their error.
    pub(in crate::server) async fn batch_pre_hooks(
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

    /// A batch's post-hooks for the operations in `ok` (committed); a failing hook turns
    /// its operation's result into the error.
    pub(in crate::server) async fn batch_post_hooks(
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
