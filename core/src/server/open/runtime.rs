//! Regions opened and closed while the engine runs: what an HBase region server does when
//! the master assigns it a region (`OpenRegionProcedure`) or takes one away
//! (`CloseRegionProcedure`), for an engine serving some regions of a shared object store
//! (`Config::serve_regions`, possibly none at open).
//!
//! Opening region `r` of table `t` ([`Engine::open_region`], [`open_region`] here): the catalog is re-read (a
//! table another engine created is then known here, every region of it unserved); the
//! engine owns `r` in the coordination store under its lease (another live owner fails it
//! with [`Error::RegionOwned`], having changed nothing); the catalog's next version raises
//! `r`'s generation and adds this engine's WAL writer to its writers (from then on the
//! engine that held `r` before can change nothing of it); the writers that may hold edits
//! of `r` above its flushed sequence id are fenced and read, and `r`'s edits replayed into
//! its MemStores; the sequence ids move past every id of `r`'s files and edits, so its
//! cells are visible and every later write here is numbered above them; then `r` serves,
//! `post_open` runs, replayed edits are flushed (only this engine's WAL holds `r`'s later
//! edits) and `r`'s manifest pointer moves to the catalog's version.
//!
//! Closing `r` ([`Engine::close_region`], [`close_region`] here): no split, merge or compaction runs meanwhile;
//! `pre_close`; writes to `r` wait at its write gate while the last of them finish; `r` is
//! flushed; the catalog records that no WAL holds an edit of `r` above its flushed sequence
//! id ([`crate::catalog::CLOSED_CLEANLY`]), so the next opener fences and replays nothing
//! (a graceful move fences no live server); `r` is replaced by an unserved placeholder
//! (writes that waited re-route to it and fail with [`Error::RegionNotServed`]);
//! `post_close`; the engine gives `r` up in the coordination store.
//!
//! Invariants: a region serves here only after this engine owns it in the coordination
//! store and holds it in the catalog at its raised generation, and after every edit an
//! earlier owner acknowledged above its flushed sequence id was replayed; a region closed
//! here takes no write after its final flush; both operations are idempotent (opening a
//! region served here, or closing one served elsewhere, does nothing) and serialized with
//! splits and merges.

use super::regions::{open_table, unserved_region};
use crate::catalog::{CatalogState, RegionEntry};
use crate::coord::RegionKey;
use crate::error::{Error, Result};
use crate::region::Region;
use crate::schema::TableName;
use crate::server::hooks::lifecycle;
use crate::server::shared::TableState;
use crate::server::Engine;
use crate::wal::{Wal, WalRecord};
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Opens region `id` of `table` while the engine runs (see the module doc): after it
/// returns the region serves here, with every write an earlier owner acknowledged.
/// Only an engine serving some regions of a shared object store opens regions so
/// ([`Error::BadArgument`] otherwise); [`Error::RegionOwned`] when another live
/// process owns the region; [`Error::RegionNotFound`] for an id the table lacks.
pub(crate) async fn open_region(engine: &Arc<Engine>, table: &TableName, id: u64) -> Result<()> {
    let shared = &engine.shared;
    shared.check_open()?;
    if shared.config.serve_regions.is_none() || shared.objects.is_local() {
        return Err(Error::bad_argument(
            "only an engine serving some regions of a shared object store opens regions \
             while it runs",
        ));
    }
    let own = shared
        .ownership
        .get()
        .cloned()
        .ok_or_else(|| Error::bad_argument("the engine holds no lease to own regions"))?;
    let _ops = engine.upkeep.region_ops.lock().await;
    let failed = refresh_tables(engine)?;
    if let Some((_, e)) = failed.into_iter().find(|(name, _)| name == table) {
        return Err(e);
    }
    let t = shared.table(table)?;
    let current = t.region(id)?;
    if !current.served_elsewhere() {
        return Ok(());
    }
    let key = RegionKey::new(table.clone(), id);
    own.claim(vec![key.clone()]).await?;
    let ids = BTreeSet::from([id]);
    let entry = match shared.catalog.adopt_regions(&ids) {
        Ok(mut adopted) => adopted.pop(),
        Err(e) => {
            own.release(std::slice::from_ref(&key)).await;
            return Err(e);
        }
    };
    let opened = match entry {
        Some(entry) => load_region(engine, &t, &entry).await,
        None => Err(Error::RegionNotFound {
            table: table.to_string(),
            id,
        }),
    };
    let (region, replayed) = match opened {
        Ok(done) => done,
        Err(e) => {
            // Nothing was written for it here: the writers it had stay its writers.
            if let Err(undo) = shared.catalog.give_up_regions(&ids, false) {
                tracing::warn!(region = %key, error = %undo, "could not take this engine off a region's writers");
            }
            own.release(std::slice::from_ref(&key)).await;
            return Err(e);
        }
    };
    {
        let mut regions = t.regions.write();
        match regions.iter().position(|r| r.id == id) {
            Some(pos) => regions[pos] = region.clone(),
            None => {
                return Err(Error::RegionNotFound {
                    table: table.to_string(),
                    id,
                })
            }
        }
    }
    if t.enabled.load(Ordering::Acquire) {
        if let Some(hooks) = t.hooks() {
            let opened = std::slice::from_ref(&region);
            lifecycle::hooks_post_open(&engine.reads, &t, &hooks, opened).await;
        }
    }
    if replayed > 0 {
        engine.upkeep.flush_region(&region).await?;
    } else {
        super::takeover::settle_writers(shared)?;
    }
    shared.point_manifests(table, &[id]).await;
    tracing::info!(region = %region.name(), cells = replayed, "opened region");
    Ok(())
}

/// Builds region `entry` of `t` from the catalog: fences and reads the writers that
/// may hold its edits, opens its store files, moves the sequence ids past everything
/// it holds and replays its edits. Returns it (not yet serving) and the cells replayed.
async fn load_region(
    engine: &Engine,
    t: &Arc<TableState>,
    entry: &RegionEntry,
) -> Result<(Arc<Region>, usize)> {
    let shared = &engine.shared;
    let records = edits_of(engine, entry)?;
    let desc = t.descriptor.read().clone();
    let mut live = HashSet::new();
    let mut max_seq = 0u64;
    let region = super::regions::open_region(
        &shared.objects,
        &desc,
        entry,
        &shared.cache,
        &mut live,
        &mut max_seq,
    )?;
    let newest = records.iter().map(|r| r.seq).max().unwrap_or(0);
    let target = max_seq.max(newest);
    shared.mvcc.advance_to(target);
    // Visible before the region serves: a read, an increment or a uniqueness check at an
    // older read point would miss the region's newest cells.
    shared.mvcc.wait_for(target).await;
    let region = Arc::new(region);
    let replayed = lifecycle::replay_region(&engine.reads, t, &region, records).await;
    Ok((region, replayed))
}

/// The WAL records holding edits of region `entry` (its edits only), from the writers
/// its catalog entry names (every writer but this engine's when they are unknown),
/// each fenced first.
fn edits_of(engine: &Engine, entry: &RegionEntry) -> Result<Vec<WalRecord>> {
    let shared = &engine.shared;
    let me = shared.catalog.writer();
    let mut to_read: BTreeSet<u64> = match entry.writers.is_empty() {
        true => Wal::writers(&shared.objects)?,
        false => entry.writers.iter().copied().collect(),
    };
    to_read.remove(&me);
    to_read.remove(&crate::catalog::CLOSED_CLEANLY);
    if to_read.is_empty() {
        return Ok(Vec::new());
    }
    let store = Wal::writer_store(&shared.objects, me);
    let mut recovered = Wal::scan(&store, shared.config.wal_recovery, &to_read)?;
    recovered.keep_regions(&BTreeSet::from([entry.id]));
    Ok(std::mem::take(&mut recovered.records))
}

/// Closes region `id` of `table` while the engine runs (see the module doc): after it
/// returns the region's writes are all in store files the catalog lists, it refuses
/// reads and writes here ([`Error::RegionNotServed`]) and the engine no longer owns
/// it. Closing a region not served here does nothing.
pub(crate) async fn close_region(engine: &Arc<Engine>, table: &TableName, id: u64) -> Result<()> {
    let shared = &engine.shared;
    shared.check_open()?;
    let _ops = engine.upkeep.region_ops.lock().await;
    let t = shared.table(table)?;
    let region = t.region(id)?;
    if region.served_elsewhere() {
        return Ok(());
    }
    let hooks = t
        .hooks()
        .filter(|_| t.enabled.load(Ordering::Acquire) && !region.is_offline());
    let closing = std::slice::from_ref(&region);
    if let Some(h) = &hooks {
        lifecycle::hooks_close(&engine.reads, &t, h, closing, false).await;
    }
    let mut compaction_locks = Vec::new();
    for s in region.all_stores() {
        compaction_locks.push(s.compaction_lock.clone().lock_owned().await);
    }
    let gate = region.write_gate.clone().write_owned().await;
    engine.upkeep.flush_region(&region).await?;
    let flushed = region.flush_lock.lock().await;
    if region.memstore_size() != 0 {
        return Err(Error::bad_argument(format!(
            "region {} took writes during its close",
            region.name()
        )));
    }
    let ids = BTreeSet::from([id]);
    shared.catalog.give_up_regions(&ids, true)?;
    let desc = t.descriptor.read().clone();
    let entry = entry_of(&shared.catalog.snapshot(), table, id);
    {
        let mut regions = t.regions.write();
        if let (Some(pos), Some(entry)) =
            (regions.iter().position(|r| Arc::ptr_eq(r, &region)), entry)
        {
            regions[pos] = Arc::new(unserved_region(&desc, &entry));
        }
    }
    region.retired.store(true, Ordering::Release);
    drop(flushed);
    drop(gate);
    drop(compaction_locks);
    if let Some(h) = &hooks {
        lifecycle::hooks_close(&engine.reads, &t, h, closing, true).await;
    }
    if let Some(own) = shared.ownership.get() {
        own.release(&[RegionKey::new(table.clone(), id)]).await;
    }
    tracing::info!(region = %region.name(), "closed region");
    Ok(())
}

/// Re-reads the catalog of a shared store and takes in what other engines changed:
/// tables they created (every region unserved here), the regions of tables none of
/// whose regions serve here (splits, merges, schema and enabled state elsewhere), the
/// regions served elsewhere of the others (when the catalog lists the regions served
/// here as they are), and tables they dropped that serve nothing here. Nothing on a
/// local directory. While a region opens or closes here (or a split or merge runs) only
/// the catalog is re-read: the tables are the opener's to change. A table that cannot be
/// opened here (a coprocessor that fails to load) is left as it was, logged.
pub(crate) fn refresh_catalog(engine: &Engine) -> Result<()> {
    match engine.upkeep.region_ops.try_lock() {
        Ok(_ops) => refresh_tables(engine).map(|_| ()),
        Err(_) => engine.shared.catalog.refresh(),
    }
}

/// [`refresh_catalog`] for a caller holding `region_ops`; returns the tables that could
/// not be opened, with why.
fn refresh_tables(engine: &Engine) -> Result<Vec<(TableName, Error)>> {
    let shared = &engine.shared;
    if shared.objects.is_local() {
        return Ok(Vec::new());
    }
    shared.catalog.refresh()?;
    let state = shared.catalog.snapshot();
    let config = &shared.config;
    let unserved = |_: u64| false;
    let mut failed = Vec::new();
    let mut tables = shared.tables.write();
    for entry in state.tables.values() {
        let name = &entry.descriptor.name;
        if let Some(t) = tables.get(name).filter(|t| !t.served_regions().is_empty()) {
            replace_unserved(t, &entry.regions);
            continue;
        }
        let same = tables.get(name).is_some_and(|t| {
            *t.descriptor.read() == entry.descriptor
                && t.enabled.load(Ordering::Acquire) == entry.enabled
                && same_bounds(&t.regions.read(), &entry.regions)
        });
        if same {
            continue;
        }
        let (mut live, mut max_seq) = (HashSet::new(), 0u64);
        let opened = open_table(
            config,
            &shared.objects,
            entry,
            &shared.cache,
            (&mut live, &mut max_seq),
            &unserved,
        );
        match opened {
            Ok(fresh) => {
                tables.insert(name.clone(), fresh);
            }
            Err(e) => {
                tracing::warn!(table = %name, error = %e, "a table another engine changed cannot be opened here");
                failed.push((name.clone(), e));
            }
        }
    }
    tables.retain(|name, t| {
        state.tables.contains_key(&name.to_string()) || !t.served_regions().is_empty()
    });
    Ok(failed)
}

/// Gives up, in the coordination store, the regions the engine still owns but no longer
/// serves (a close whose release the store refused). Only for the caller that opens and
/// closes regions (a region server's assignment follower): a region being opened is
/// owned before it serves.
pub(crate) async fn release_unserved(engine: &Engine) {
    let Some(own) = engine.shared.ownership.get() else {
        return;
    };
    let stale: Vec<RegionKey> = own
        .held()
        .into_iter()
        .filter(|k| match engine.shared.tables.read().get(&k.table) {
            Some(t) => t.region(k.region).ok().is_none_or(|r| r.served_elsewhere()),
            None => true,
        })
        .collect();
    if !stale.is_empty() {
        own.release(&stale).await;
    }
}

/// The regions served here, by table: what a region server reports.
pub(crate) fn served_regions(engine: &Engine) -> Vec<(TableName, u64)> {
    let mut out = Vec::new();
    for t in engine.shared.all_tables() {
        for r in t.served_regions() {
            out.push((t.name.clone(), r.id));
        }
    }
    out
}

/// The catalog entry of region `id` of `table`.
fn entry_of(state: &CatalogState, table: &TableName, id: u64) -> Option<RegionEntry> {
    state
        .tables
        .get(&table.to_string())?
        .regions
        .iter()
        .find(|r| r.id == id)
        .cloned()
}

/// Rebuilds the regions of `t` served elsewhere from `entries` (splits and merges other
/// engines made), keeping those served here; leaves `t` alone unless `entries` lists every
/// region served here with its bounds.
fn replace_unserved(t: &TableState, entries: &[RegionEntry]) {
    let mut regions = t.regions.write();
    if same_bounds(&regions, entries) {
        return;
    }
    let served: Vec<&Arc<Region>> = regions.iter().filter(|r| !r.served_elsewhere()).collect();
    let listed = |r: &Region| {
        entries
            .iter()
            .any(|e| e.id == r.id && e.start == r.start && e.end == r.end)
    };
    if !served.iter().all(|r| listed(r)) {
        return;
    }
    let desc = t.descriptor.read().clone();
    let rebuilt: Vec<Arc<Region>> = entries
        .iter()
        .map(|e| match served.iter().find(|r| r.id == e.id) {
            Some(r) => Arc::clone(r),
            None => Arc::new(unserved_region(&desc, e)),
        })
        .collect();
    *regions = rebuilt;
}

/// Whether `regions` are the regions `entries` list (ids and bounds, in order).
fn same_bounds(regions: &[Arc<Region>], entries: &[RegionEntry]) -> bool {
    regions.len() == entries.len()
        && regions
            .iter()
            .zip(entries)
            .all(|(r, e)| r.id == e.id && r.start == e.start && r.end == e.end)
}

/// The engine's side of [`Engine::sync_region_listing`]: the catalog re-read, then the
/// coordination store's list of `table`'s regions made to match it.
pub(crate) async fn sync_listing(engine: &Engine, table: &TableName) -> Result<(usize, usize)> {
    let Some(own) = engine.shared.ownership.get() else {
        return Ok((0, 0));
    };
    // The list first: whatever it holds was listed after its catalog update.
    let listed = own.listed(table).await?;
    refresh_catalog(engine)?;
    let state = engine.shared.catalog.snapshot();
    let records = state
        .tables
        .get(&table.to_string())
        .map(|t| {
            t.regions
                .iter()
                .map(|r| crate::server::ownership::record(table, r.id, &r.start, &r.end))
                .collect()
        })
        .unwrap_or_default();
    own.sync_listing(listed, records).await
}

/// A table whose regions the coordination store does not list as the catalog has them
/// ([`Engine::unlisted_tables`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnlistedTable {
    /// The table.
    pub table: TableName,
    /// Its regions in the catalog, by id.
    pub catalog: Vec<u64>,
    /// Its regions in the coordination store's list, by id.
    pub listed: Vec<u64>,
}

/// The engine's side of [`Engine::unlisted_tables`]: the catalog re-read, then each of its
/// tables whose regions the coordination store does not list as the catalog has them.
pub(crate) async fn unlisted_tables(engine: &Engine) -> Result<Vec<UnlistedTable>> {
    let Some(own) = engine.shared.ownership.get() else {
        return Ok(Vec::new());
    };
    engine.shared.catalog.refresh()?;
    let state = engine.shared.catalog.snapshot();
    let mut out = Vec::new();
    for (name, t) in &state.tables {
        let table = TableName::parse(name)?;
        let listed = own.listed(&table).await?;
        let same = listed.len() == t.regions.len()
            && t.regions.iter().all(|r| {
                listed
                    .iter()
                    .any(|l| l.key.region == r.id && l.start == r.start && l.end == r.end)
            });
        if !same {
            let mut catalog: Vec<u64> = t.regions.iter().map(|r| r.id).collect();
            let mut listed: Vec<u64> = listed.iter().map(|l| l.key.region).collect();
            catalog.sort_unstable();
            listed.sort_unstable();
            out.push(UnlistedTable {
                table,
                catalog,
                listed,
            });
        }
    }
    Ok(out)
}
