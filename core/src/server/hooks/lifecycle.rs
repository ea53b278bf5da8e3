//! Calling the lifecycle hooks of [`crate::coprocessor::RegionHooks`] (region open and
//! close, flush, compaction, split, WAL replay; scanners are in `hooks::scan`), the
//! engine-wide [`crate::coprocessor::EngineHooks`]' WAL hooks, loading a table's hooks, and
//! building system-wide coprocessor chains.
//!
//! Where each region hook is called:
//! - `post_open`: once a region is open and readable: at engine open (after WAL replay, for
//!   regions of enabled tables), table create and enable, for split daughters and a merge's
//!   result.
//! - `pre_close` / `post_close`: around a region's close: engine close (around its final
//!   flush), table disable (around its flush), the parent of a split and both inputs of a
//!   merge (pre before the catalog change, post after the swap). A table is deleted only
//!   when disabled, so its regions are already closed then: delete calls no close hook.
//!   Split order: `pre_split`, `pre_close(parent)`, `post_close(parent)`,
//!   `post_open(lower)`, `post_open(upper)`, `post_split`. Merge order: `pre_close` of both
//!   (lower first), `post_close` of both, `post_open(merged)`.
//! - Scanner hooks are per scan, not per region: `pre_scanner_open` once, with the region the
//!   scan starts in, before the scan plans its regions (so it may change the scan);
//!   `post_scanner_next` once per batch of rows (a hooked scan never mixes regions in one
//!   batch; batches hold up to 256 rows); `post_scanner_close` exactly once for every scan
//!   whose open hook succeeded: when the stream ends, fails, or is dropped early (then on a
//!   background task of the current runtime). A hooked scan reports bad arguments as the
//!   stream's first item rather than from `scan` itself.
//! - `pre_flush` / `post_flush`: per store with cells to flush, before the snapshot is taken
//!   and after the flush committed.
//! - `pre_compact_selection` / `post_compact_selection` / `pre_compact` / `post_compact`: per
//!   store compaction, after the engine's selection; a store holding split references must
//!   compact every file, so a hook may not shrink its selection (that fails the compaction).
//! - `pre_split` / `post_split`: under the split's locks once the split row is known.
//! - `pre_wal_restore` / `post_wal_restore`: at engine open, per replayed WAL record and
//!   region, for tables with coprocessors (their hooks are loaded before replay).
//!
//! System-wide coprocessors (`Config::system_coprocessors`) join the chain of every table
//! outside the system namespace (`basalt:`, which serves the engine itself), ahead of the
//! table's own list: the chain runs by priority, ties in load order, so on equal priorities
//! system coprocessors run first. A table listing a coprocessor of the same name replaces
//! the system entry (its own priority, arguments and policy win).
//!
//! Invariants: a table without coprocessors pays one atomic load per flush, compaction,
//! split or scan and nothing per row; hooks are awaited outside every sync lock; a
//! notification hook's error is logged and never stops the engine's work.

use crate::coprocessor::{
    CellTransform, CompactionOutcome, CompactionRequest, CompactionSelection, Flow, HookEnv,
    RegionHooks, StoreFileSummary,
};
use crate::error::{Error, Result};
use crate::region::{Region, Store};
use crate::schema::{TableDescriptor, SYSTEM_NAMESPACE};
use crate::server::config::Config;
use crate::server::read::ReadPath;
use crate::server::shared::{EngineShared, TableState};
use crate::storage::compaction::CompactionKind;
use crate::storage::storefile::StoreFileReader;
use crate::wal::{Wal, WalEdit, WalRecord};
use bytes::Bytes;
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

/// The descriptor whose coprocessor list is loaded for `desc`: the system-wide
/// coprocessors first (those the table does not list itself), then the table's own.
pub(crate) fn effective_descriptor<'a>(
    config: &Config,
    desc: &'a TableDescriptor,
) -> Cow<'a, TableDescriptor> {
    if config.system_coprocessors.is_empty() || desc.name.namespace() == SYSTEM_NAMESPACE {
        return Cow::Borrowed(desc);
    }
    let mut eff = desc.clone();
    eff.coprocessors = config
        .system_coprocessors
        .iter()
        .filter(|s| !desc.coprocessors.iter().any(|c| c.name == s.name))
        .chain(desc.coprocessors.iter())
        .cloned()
        .collect();
    Cow::Owned(eff)
}

/// The hooks for a descriptor: `None` when it lists no coprocessor, an error when it lists
/// some that the configured loader cannot load (or no loader is configured).
pub(crate) fn load_hooks(
    config: &Config,
    desc: &TableDescriptor,
) -> Result<Option<Arc<dyn RegionHooks>>> {
    let desc = effective_descriptor(config, desc);
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

/// Runs hook futures to completion from synchronous code (engine open): on a fresh thread
/// blocking on the current runtime, or on a one-off runtime when there is none. A panic that
/// escapes the hooks becomes an error.
pub(crate) fn block_on_hooks<F, T>(fut: F) -> Result<T>
where
    F: Future<Output = Result<T>> + Send,
    T: Send,
{
    let panicked = |_| Error::Coprocessor {
        name: "(hooks)".into(),
        msg: "a hook panicked during engine open".into(),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => std::thread::scope(|s| {
            s.spawn(move || handle.block_on(fut))
                .join()
                .map_err(panicked)?
        }),
        Err(_) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(fut)
        }
    }
}

/// Logs the error of a notification hook.
pub(crate) fn logged(hook: &str, region: &Region, r: Result<()>) {
    if let Err(e) = r {
        tracing::warn!(region = %region.name(), hook, error = %e, "coprocessor hook failed");
    }
}

fn summary(f: &StoreFileReader) -> StoreFileSummary {
    let info = f.info();
    StoreFileSummary {
        id: f.file_id(),
        size: info.file_size,
        entries: info.entry_count,
        max_seq: info.max_seq,
    }
}

/// What a compaction runs after its hooks: the kind, the inputs and the cell transforms.
pub(crate) type HookedCompaction = (
    CompactionKind,
    Vec<Arc<StoreFileReader>>,
    Vec<Arc<dyn CellTransform>>,
);

/// The table of `region` and its hooks, when it has coprocessors.
pub(crate) fn region_hooks(
    shared: &EngineShared,
    region: &Region,
) -> Option<(Arc<TableState>, Arc<dyn RegionHooks>)> {
    let t = shared.tables.read().get(&region.table).cloned()?;
    let hooks = t.hooks()?;
    Some((t, hooks))
}

/// `post_open` for each region.
pub(crate) async fn hooks_post_open(
    reads: &ReadPath,
    t: &TableState,
    hooks: &Arc<dyn RegionHooks>,
    regions: &[Arc<Region>],
) {
    for r in regions {
        let env = HookEnv::new(reads, &t.name, r.clone());
        logged("post_open", r, hooks.post_open(&env).await);
    }
}

/// `pre_close` (or `post_close` when `post`) for each region.
pub(crate) async fn hooks_close(
    reads: &ReadPath,
    t: &TableState,
    hooks: &Arc<dyn RegionHooks>,
    regions: &[Arc<Region>],
    post: bool,
) {
    for r in regions {
        let env = HookEnv::new(reads, &t.name, r.clone());
        if post {
            logged("post_close", r, hooks.post_close(&env).await);
        } else {
            logged("pre_close", r, hooks.pre_close(&env).await);
        }
    }
}

/// `pre_split` of `parent` at `row`, then (unless a hook vetoed the split: false)
/// `pre_close(parent)`.
pub(crate) async fn hooks_pre_split(
    reads: &ReadPath,
    t: &TableState,
    hooks: &Arc<dyn RegionHooks>,
    parent: &Arc<Region>,
    row: &Bytes,
) -> Result<bool> {
    let env = HookEnv::new(reads, &t.name, parent.clone());
    if hooks.pre_split(&env, row).await? == Flow::Bypass {
        return Ok(false);
    }
    hooks_close(reads, t, hooks, std::slice::from_ref(parent), false).await;
    Ok(true)
}

/// After a split committed: `post_close(parent)`, `post_open` of both daughters (lower
/// first), `post_split`.
pub(crate) async fn hooks_post_split(
    reads: &ReadPath,
    t: &TableState,
    hooks: &Arc<dyn RegionHooks>,
    parent: &Arc<Region>,
    [lo, hi]: [&Arc<Region>; 2],
) {
    hooks_close(reads, t, hooks, std::slice::from_ref(parent), true).await;
    hooks_post_open(reads, t, hooks, &[lo.clone(), hi.clone()]).await;
    let env = HookEnv::new(reads, &t.name, parent.clone());
    logged(
        "post_split",
        parent,
        hooks.post_split(&env, &lo.info(), &hi.info()).await,
    );
}

/// `pre_close` of every region of every table with coprocessors (engine close).
pub(crate) async fn hooks_close_all(reads: &ReadPath, post: bool) {
    let tables: Vec<_> = reads.shared.tables.read().values().cloned().collect();
    for t in tables {
        if !t.enabled.load(std::sync::atomic::Ordering::Acquire) {
            continue; // closed at disable
        }
        if let Some(hooks) = t.hooks() {
            let regions = t.served_regions();
            hooks_close(reads, &t, &hooks, &regions, post).await;
        }
    }
}

/// `pre_flush` (or `post_flush`) for the given families of `region`.
pub(crate) async fn hooks_flush(
    reads: &ReadPath,
    region: &Arc<Region>,
    families: &[Bytes],
    post: bool,
) {
    let Some((t, hooks)) = region_hooks(&reads.shared, region) else {
        return;
    };
    let env = HookEnv::new(reads, &t.name, region.clone());
    for f in families {
        if post {
            logged("post_flush", region, hooks.post_flush(&env, f).await);
        } else {
            logged("pre_flush", region, hooks.pre_flush(&env, f).await);
        }
    }
}

/// The selection and pre-compaction hooks of one store's compaction. Returns what to
/// run (`None`: a hook emptied the selection), or the error that fails it.
pub(crate) async fn hooks_pre_compact(
    reads: &ReadPath,
    t: &TableState,
    hooks: &Arc<dyn RegionHooks>,
    region: &Arc<Region>,
    store: &Store,
    kind: CompactionKind,
    inputs: Vec<Arc<StoreFileReader>>,
) -> Result<Option<HookedCompaction>> {
    let env = HookEnv::new(reads, &t.name, region.clone());
    let original: Vec<StoreFileSummary> = inputs.iter().map(|f| summary(f)).collect();
    let mut selection = CompactionSelection {
        family: store.family.clone(),
        kind,
        files: original.clone(),
    };
    hooks.pre_compact_selection(&env, &mut selection).await?;
    let kept: Vec<usize> = selection
        .files
        .iter()
        .map(|f| original.iter().position(|o| o.id == f.id))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::bad_argument("a compaction selection hook added a file"))?;
    let contiguous = kept.windows(2).all(|w| w[1] == w[0] + 1);
    if !contiguous {
        return Err(Error::bad_argument(
            "a compaction selection must stay a contiguous run of the candidates",
        ));
    }
    let references = inputs.iter().any(|f| region.is_reference(f));
    if references && kept.len() != inputs.len() {
        return Err(Error::bad_argument(
            "a store holding split references compacts all its files",
        ));
    }
    if kept.is_empty() {
        logged(
            "post_compact_selection",
            region,
            hooks.post_compact_selection(&env, &selection).await,
        );
        return Ok(None);
    }
    if kept.len() != inputs.len() {
        // A major compaction of part of the files could drop markers still needed.
        selection.kind = CompactionKind::Minor;
    }
    let inputs: Vec<_> = kept
        .iter()
        .filter_map(|i| inputs.get(*i).cloned())
        .collect();
    logged(
        "post_compact_selection",
        region,
        hooks.post_compact_selection(&env, &selection).await,
    );
    let kind = selection.kind;
    let mut request = CompactionRequest::new(selection);
    hooks.pre_compact(&env, &mut request).await?;
    Ok(Some((kind, inputs, request.into_transforms())))
}

/// `post_compact` of one store's compaction.
pub(crate) async fn hooks_post_compact(
    reads: &ReadPath,
    region: &Arc<Region>,
    family: &Bytes,
    outcome: &CompactionOutcome,
) {
    let Some((t, hooks)) = region_hooks(&reads.shared, region) else {
        return;
    };
    let env = HookEnv::new(reads, &t.name, region.clone());
    logged(
        "post_compact",
        region,
        hooks.post_compact(&env, family, outcome).await,
    );
}

/// Replays the WAL records `records` into the open regions, running the WAL-restore hooks
/// of tables with coprocessors, then `post_open` for every region of every enabled table
/// with coprocessors. Returns how many cells were replayed.
pub(crate) fn replay_wal(reads: &Arc<ReadPath>, records: Vec<WalRecord>) -> Result<usize> {
    let tables: Vec<Arc<TableState>> = reads.shared.tables.read().values().cloned().collect();
    let mut targets: ReplayTargets = HashMap::new();
    for t in &tables {
        for r in t.regions.read().iter() {
            targets.insert(r.id, (r.clone(), t.clone()));
        }
    }
    let (replayed, hooked) = replay_plain(&targets, records);
    let opened: Vec<(Arc<TableState>, Arc<dyn RegionHooks>)> = tables
        .iter()
        .filter(|t| t.enabled.load(std::sync::atomic::Ordering::Acquire))
        .filter_map(|t| t.hooks().map(|h| (t.clone(), h)))
        .collect();
    if hooked.is_empty() && opened.is_empty() {
        return Ok(replayed);
    }
    let engine = reads.clone();
    let hooked_cells = block_on_hooks(async move {
        let cells = replay_hooked(&engine, hooked).await;
        for (t, hooks) in opened {
            let regions = t.served_regions();
            hooks_post_open(&engine, &t, &hooks, &regions).await;
        }
        Ok(cells)
    })?;
    Ok(replayed + hooked_cells)
}

/// Replays the WAL records `records` into `region` of `t`, a region opened while the
/// engine runs and not yet serving (its edits only: the caller kept those), running the
/// WAL-restore hooks when the table has coprocessors. Returns how many cells were
/// replayed. `post_open` is the caller's, once the region serves.
pub(crate) async fn replay_region(
    reads: &ReadPath,
    t: &Arc<TableState>,
    region: &Arc<Region>,
    records: Vec<WalRecord>,
) -> usize {
    let targets: ReplayTargets = [(region.id, (region.clone(), t.clone()))].into();
    let (replayed, hooked) = replay_plain(&targets, records);
    replayed + replay_hooked(reads, hooked).await
}

/// The regions replay applies edits to, by id, with their tables.
type ReplayTargets = HashMap<u64, (Arc<Region>, Arc<TableState>)>;

/// A region's edits of one WAL record, held for its table's WAL-restore hooks.
type HookedEdits = (Arc<TableState>, Arc<Region>, u64, Vec<WalEdit>);

/// Applies the edits of `records` above their region's flushed sequence id to the regions
/// of `targets` whose tables have no hooks; returns how many cells it applied and, in
/// record order, the edits of tables with hooks.
fn replay_plain(targets: &ReplayTargets, records: Vec<WalRecord>) -> (usize, Vec<HookedEdits>) {
    let mut replayed = 0usize;
    let mut hooked = Vec::new();
    for rec in records {
        let mut per_region: HashMap<u64, Vec<WalEdit>> = HashMap::new();
        for edit in rec.edits {
            let Some((region, _)) = targets.get(&edit.region_id) else {
                // The table was deleted, or a split or merge retired the region: it
                // flushed every write it took before the catalog dropped it, so the
                // edit is in the files its successors list.
                continue;
            };
            if rec.seq
                <= region
                    .flushed_seq
                    .load(std::sync::atomic::Ordering::Relaxed)
            {
                continue;
            }
            if region.store(&edit.family).is_none() {
                continue; // the family was removed
            }
            let mut edit = edit;
            edit.cell.key.seq = rec.seq;
            per_region.entry(edit.region_id).or_default().push(edit);
        }
        let mut ids: Vec<u64> = per_region.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let (Some(edits), Some((region, t))) = (per_region.remove(&id), targets.get(&id))
            else {
                continue;
            };
            if t.hooks().is_some() {
                hooked.push((t.clone(), region.clone(), rec.seq, edits));
            } else {
                replayed += edits.len();
                apply_edits(region, &edits);
            }
        }
    }
    (replayed, hooked)
}

/// Applies `hooked` edits with their tables' `pre_wal_restore` and `post_wal_restore`
/// around each (a bypass skips them); returns how many cells it applied.
async fn replay_hooked(reads: &ReadPath, hooked: Vec<HookedEdits>) -> usize {
    let mut cells = 0usize;
    for (t, region, seq, edits) in hooked {
        let Some(hooks) = t.hooks() else { continue };
        let env = HookEnv::new(reads, &t.name, region.clone());
        match hooks.pre_wal_restore(&env, seq, &edits).await {
            Ok(Flow::Bypass) => continue,
            Ok(Flow::Continue) => {}
            Err(e) => {
                // Recovery never drops an acknowledged write for a hook's error.
                logged("pre_wal_restore", &region, Err(e));
            }
        }
        cells += edits.len();
        apply_edits(&region, &edits);
        logged(
            "post_wal_restore",
            &region,
            hooks.post_wal_restore(&env, seq, &edits).await,
        );
    }
    cells
}

/// Has `wal` call the engine observer's `post_wal_roll` at each segment roll, when the
/// observer observes the WAL.
pub(crate) fn observe_wal_rolls(config: &Config, wal: &Wal) {
    if let Some(o) = config.observer.clone().filter(|o| o.observes_wal()) {
        wal.on_roll(Box::new(move |closed, opened| {
            o.post_wal_roll(closed, opened)
        }));
    }
}

/// Calls the engine observer's WAL hooks around `append` (the caller holds the commit
/// lock). Without an observer of the WAL this is `append` alone.
pub(crate) fn observed_wal_append<T>(
    config: &Config,
    record: WalRecord,
    append: impl FnOnce(WalRecord) -> Result<T>,
) -> Result<T> {
    match config.observer.as_ref().filter(|o| o.observes_wal()) {
        None => append(record),
        Some(o) => {
            o.pre_wal_append(&record)?;
            let copy = record.clone();
            let out = append(record)?;
            o.post_wal_append(&copy);
            Ok(out)
        }
    }
}

/// Inserts replayed edits into their region's MemStores.
fn apply_edits(region: &Region, edits: &[WalEdit]) {
    let cells: Vec<(Arc<Store>, crate::cell::StoreCell)> = edits
        .iter()
        .filter_map(|e| region.store(&e.family).map(|s| (s, e.cell.clone())))
        .collect();
    region.apply(&cells);
}
