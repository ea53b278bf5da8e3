//! Table snapshots, at the top of `server/`: take one (online, no data copied, at one
//! engine-wide read point across its tables), list, describe and delete them, clone one into
//! new tables that share its files, and restore tables to one.
//!
//! Taking a snapshot, under the engine's `region_ops` lock (no split or merge meanwhile):
//! 1. the tables: those asked for and, unless told otherwise, their companions (the tables
//!    their coprocessors write in the same batch: a global index's tables);
//! 2. every region's write gate, exclusively, in region-id order (the order every commit
//!    takes them in, so no deadlock): a commit holds its regions' gates from before it takes
//!    its sequence id until its cells are in the MemStore, so once every gate is held every
//!    commit into these regions has a sequence id at or below the last one handed out, `P`,
//!    and is in the MemStore, and every later one will be above `P`;
//! 3. every region flushed: the store files then hold exactly the commits at or below `P`;
//! 4. one catalog update records the tables as they stand (descriptors, regions, file lists)
//!    with `P` as a [`SnapshotEntry`]: the commit point. A crash before it leaves no snapshot
//!    (and flushed files, which the tables list); after it, the whole snapshot.
//! 5. the gates are released: writes to these tables paused for the flush only.
//!
//! Invariants: a file a snapshot lists is deleted only when no table and no snapshot lists
//! it (every such decision is taken inside a catalog update, see `crate::catalog`); a clone
//! or a restore gives its tables fresh region ids, so no WAL edit of another region is ever
//! replayed into them, and their files are the snapshot's, shared, never copied.

use crate::catalog::{
    all_snapshot_descriptions, snapshot_description, validate_snapshot_name, CatalogState,
    FileEntry, SnapshotDescription, SnapshotEntry, TableEntry,
};
use crate::cell::now_ms;
use crate::error::{Error, Result};
use crate::region::Region;
use crate::schema::{TableDescriptor, TableName};
use crate::server::hooks::lifecycle::{self, load_hooks};
use crate::server::open::regions::open_table;
use crate::server::shared::TableState;
use crate::server::Engine;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Takes snapshot `name` of `tables` (and of their companion tables when `companions`),
/// online; see the module doc.
pub(crate) async fn take_snapshot(
    engine: &Arc<Engine>,
    name: &str,
    tables: &[TableName],
    companions: bool,
) -> Result<SnapshotDescription> {
    engine.shared.check_open()?;
    validate_snapshot_name(name)?;
    if tables.is_empty() {
        return Err(Error::bad_argument("a snapshot needs at least one table"));
    }
    let _ops = engine.upkeep.region_ops.lock().await;
    snapshot_under_ops(engine, name, tables, companions).await?;
    describe_snapshot(engine, name)
}

/// Steps 1-5 of the module doc; the caller holds `region_ops`.
async fn snapshot_under_ops(
    engine: &Engine,
    name: &str,
    tables: &[TableName],
    companions: bool,
) -> Result<u64> {
    if engine
        .shared
        .catalog
        .snapshot()
        .snapshots
        .contains_key(name)
    {
        return Err(Error::SnapshotExists(name.to_string()));
    }
    let scope = snapshot_scope(engine, tables, companions)?;
    let mut regions: Vec<Arc<Region>> = scope
        .values()
        .flat_map(|t| t.regions.read().clone())
        .collect();
    regions.sort_by_key(|r| r.id);
    let mut gates = Vec::with_capacity(regions.len());
    for r in &regions {
        gates.push(r.write_gate.clone().write_owned().await);
    }
    let read_point = engine.shared.mvcc.last_assigned();
    for r in &regions {
        engine.upkeep.flush_region(r).await?;
    }
    // What the gates hold: each table's schema and regions. A schema changed meanwhile
    // (an index created: a companion table more) or regions another engine took since (a
    // shared store) would make the record differ from what the gates froze: refused.
    if snapshot_scope(engine, tables, companions)?.len() != scope.len() {
        return Err(changed());
    }
    let held: BTreeMap<String, (crate::schema::TableDescriptor, Vec<u64>)> = scope
        .iter()
        .map(|(name, t)| {
            let ids = t.regions.read().iter().map(|r| r.id).collect();
            (name.to_string(), (t.descriptor.read().clone(), ids))
        })
        .collect();
    let keys: Vec<String> = held.keys().cloned().collect();
    let created_ms = now_ms();
    engine.shared.catalog.update(|s| {
        if s.snapshots.contains_key(name) {
            return Err(Error::SnapshotExists(name.to_string()));
        }
        let mut tables = BTreeMap::new();
        for (k, (descriptor, ids)) in &held {
            let t = s
                .tables
                .get(k)
                .ok_or_else(|| Error::TableNotFound(k.clone()))?;
            let listed: Vec<u64> = t.regions.iter().map(|r| r.id).collect();
            if t.descriptor != *descriptor || listed != *ids {
                return Err(changed());
            }
            tables.insert(k.clone(), t.clone());
        }
        let entry = SnapshotEntry {
            read_point,
            created_ms,
            tables,
        };
        s.snapshots.insert(name.to_string(), entry);
        Ok(())
    })?;
    drop(gates);
    tracing::info!(snapshot = name, read_point, tables = ?keys, "snapshot taken");
    Ok(read_point)
}

/// The tables a snapshot of `tables` holds: each (served whole by this engine) and,
/// when `companions`, the tables its coprocessors write in its batches, transitively.
fn snapshot_scope(
    engine: &Engine,
    tables: &[TableName],
    companions: bool,
) -> Result<BTreeMap<TableName, Arc<TableState>>> {
    let mut scope = BTreeMap::new();
    let mut todo: Vec<TableName> = tables.to_vec();
    while let Some(name) = todo.pop() {
        if scope.contains_key(&name) {
            continue;
        }
        let t = engine.shared.whole_table(&name)?;
        if companions {
            if let Some(h) = t.hooks() {
                todo.extend(h.companion_tables());
            }
        }
        scope.insert(name, t);
    }
    Ok(scope)
}

/// Every snapshot, in name order.
pub(crate) fn list_snapshots(engine: &Engine) -> Vec<SnapshotDescription> {
    all_snapshot_descriptions(&engine.shared.catalog.snapshot())
}

/// Snapshot `name`'s description.
pub(crate) fn describe_snapshot(engine: &Engine, name: &str) -> Result<SnapshotDescription> {
    snapshot_description(&engine.shared.catalog.snapshot(), name)
}

/// Deletes snapshot `name`, and then the files no table and no other snapshot lists.
/// Under `region_ops`, as clones and restores are: none of them reads a snapshot another
/// deletes.
pub(crate) async fn delete_snapshot(engine: &Engine, name: &str) -> Result<()> {
    engine.shared.check_open()?;
    let _ops = engine.upkeep.region_ops.lock().await;
    let unlisted = engine.shared.catalog.update(|s| {
        let entry = s
            .snapshots
            .remove(name)
            .ok_or_else(|| Error::SnapshotNotFound(name.to_string()))?;
        Ok(unlisted_of(s, entry.files().into_values()))
    })?;
    delete_files(engine, &unlisted, "deleted snapshot");
    Ok(())
}

/// Clones snapshot `name`'s tables as new tables: each `(from, to)` pair creates table
/// `to.name` (enabled, with descriptor `to`, whose families must be `from`'s) from the
/// snapshot's table `from`, sharing its files. A table whose coprocessors write other
/// tables (an index) must be cloned with those tables and a descriptor that names the
/// clones ([`Error::BadArgument`] otherwise: the clone would write the original's).
pub(crate) async fn clone_snapshot(
    engine: &Arc<Engine>,
    name: &str,
    targets: Vec<(TableName, TableDescriptor)>,
) -> Result<()> {
    engine.shared.check_open()?;
    let _ops = engine.upkeep.region_ops.lock().await;
    let entry = snapshot_entry(engine, name)?;
    if targets.is_empty() {
        return Err(Error::bad_argument("a clone needs at least one table"));
    }
    let new_names: HashSet<TableName> = targets.iter().map(|(_, d)| d.name.clone()).collect();
    if new_names.len() != targets.len() {
        return Err(Error::bad_argument("two clones of one name"));
    }
    for (from, desc) in &targets {
        desc.validate()?;
        let source = entry
            .tables
            .get(&from.to_string())
            .ok_or_else(|| Error::TableNotFound(format!("{from} in snapshot {name}")))?;
        let families = |d: &TableDescriptor| -> Vec<bytes::Bytes> {
            d.families.iter().map(|f| f.name.clone()).collect()
        };
        if families(&source.descriptor) != families(desc) {
            return Err(Error::bad_argument(format!(
                "the clone {} of {from} must have its column families",
                desc.name
            )));
        }
        let writes_elsewhere = load_hooks(&engine.shared.config, desc)?
            .map(|h| h.companion_tables())
            .unwrap_or_default()
            .into_iter()
            .find(|t| !new_names.contains(t));
        if let Some(other) = writes_elsewhere {
            return Err(Error::bad_argument(format!(
                "the clone {} of {from} would write table {other}, which is not cloned with \
                 it: clone its index tables with it (basalt_index::IndexAdmin::clone_snapshot)",
                desc.name
            )));
        }
    }
    let writers = writers(engine);
    let entries = engine.shared.catalog.update(|s| {
        still_there(s, name, &entry)?;
        let mut out = Vec::with_capacity(targets.len());
        for (from, desc) in &targets {
            let key = desc.name.to_string();
            if !s.namespaces.contains(desc.name.namespace()) {
                return Err(Error::NamespaceNotFound(desc.name.namespace().to_string()));
            }
            if s.tables.contains_key(&key) {
                return Err(Error::TableExists(key));
            }
            let mut t = entry
                .tables
                .get(&from.to_string())
                .cloned()
                .ok_or_else(|| Error::TableNotFound(from.to_string()))?;
            t.descriptor = desc.clone();
            t.enabled = true;
            renumber(&mut t, &mut s.next_region_id, &writers);
            s.tables.insert(key, t.clone());
            out.push(t);
        }
        Ok(out)
    })?;
    for t in &entries {
        let state = install(engine, t)?;
        let ids: Vec<u64> = t.regions.iter().map(|r| r.id).collect();
        engine.shared.hand_over(&state.name, &[], &ids).await?;
        if let Some(hooks) = state.hooks() {
            let regions: Vec<_> = state.regions.read().clone();
            lifecycle::hooks_post_open(&engine.reads, &state, &hooks, &regions).await;
        }
    }
    tracing::info!(snapshot = name, tables = entries.len(), "snapshot cloned");
    Ok(())
}

/// Restores the tables of snapshot `name` (each disabled, or missing) to their state in
/// it, schema included, after taking a fail-safe snapshot of the current state of those
/// that exist (HBase's `hbase-failsafe-{name}-{ms}`), whose name is returned. The tables
/// are left disabled: enable them to serve the restored state.
pub(crate) async fn restore_snapshot(engine: &Arc<Engine>, name: &str) -> Result<Option<String>> {
    engine.shared.check_open()?;
    let _ops = engine.upkeep.region_ops.lock().await;
    let entry = snapshot_entry(engine, name)?;
    let mut existing = Vec::new();
    for key in entry.tables.keys() {
        let table = TableName::parse(key)?;
        if !engine.shared.tables.read().contains_key(&table) {
            continue;
        }
        let t = engine.shared.whole_table(&table)?;
        if t.enabled.load(Ordering::Acquire) {
            return Err(Error::TableState {
                table: key.clone(),
                expected: "disabled",
            });
        }
        existing.push(table);
    }
    let failsafe = match existing.is_empty() {
        true => None,
        false => {
            // Within the name limit: the snapshot's name is cut to 90 bytes (ASCII).
            let n = format!(
                "hbase-failsafe-{}-{}",
                name.get(..90).unwrap_or(name),
                now_ms()
            );
            snapshot_under_ops(engine, &n, &existing, false).await?;
            Some(n)
        }
    };
    let writers = writers(engine);
    let (entries, unlisted) = engine.shared.catalog.update(|s| {
        still_there(s, name, &entry)?;
        let mut out = Vec::with_capacity(entry.tables.len());
        let mut replaced = Vec::new();
        for (key, t) in &entry.tables {
            // As checked above: disabled, or missing then and now (an enable or a create
            // since would lose its writes).
            let checked = existing.iter().any(|e| e.to_string() == *key);
            match s.tables.get(key) {
                Some(now) if now.enabled => {
                    return Err(Error::TableState {
                        table: key.clone(),
                        expected: "disabled",
                    })
                }
                Some(_) if !checked => return Err(Error::TableExists(key.clone())),
                _ => {}
            }
            if !s.namespaces.contains(t.descriptor.name.namespace()) {
                return Err(Error::NamespaceNotFound(
                    t.descriptor.name.namespace().to_string(),
                ));
            }
            let mut t = t.clone();
            t.enabled = false;
            renumber(&mut t, &mut s.next_region_id, &writers);
            if let Some(old) = s.tables.insert(key.clone(), t.clone()) {
                replaced.push(old);
            }
            out.push(t);
        }
        let old_files = replaced
            .iter()
            .flat_map(|t| &t.regions)
            .flat_map(|r| r.files.values().flatten().cloned());
        Ok((out, unlisted_of(s, old_files)))
    })?;
    for t in &entries {
        let old_ids: Vec<u64> = match engine.shared.tables.read().get(&t.descriptor.name) {
            Some(old) => old.regions.read().iter().map(|r| r.id).collect(),
            None => Vec::new(),
        };
        let state = install(engine, t)?;
        let ids: Vec<u64> = t.regions.iter().map(|r| r.id).collect();
        engine.shared.hand_over(&state.name, &old_ids, &ids).await?;
    }
    delete_files(engine, &unlisted, "restored table");
    tracing::info!(snapshot = name, failsafe = ?failsafe, "snapshot restored");
    Ok(failsafe)
}

/// A copy of snapshot `name`'s catalog entry.
fn snapshot_entry(engine: &Engine, name: &str) -> Result<SnapshotEntry> {
    engine
        .shared
        .catalog
        .snapshot()
        .snapshots
        .get(name)
        .cloned()
        .ok_or_else(|| Error::SnapshotNotFound(name.to_string()))
}

/// Refuses a clone or restore of snapshot `name`, read as `entry`, when the catalog's
/// newest state `s` no longer holds it as read: another engine deleted it since (and with
/// it, maybe, its files), or took it again.
fn still_there(s: &CatalogState, name: &str, entry: &SnapshotEntry) -> Result<()> {
    match s.snapshots.get(name) {
        Some(now) if now == entry => Ok(()),
        _ => Err(Error::SnapshotNotFound(name.to_string())),
    }
}

/// The WAL writers a region this engine creates starts with (none on a directory).
fn writers(engine: &Engine) -> Vec<u64> {
    Some(engine.shared.catalog.writer())
        .filter(|w| *w > 0)
        .into_iter()
        .collect()
}

/// Opens the regions of table entry `t` and puts the table in service (replacing an
/// open table of its name).
fn install(engine: &Engine, t: &TableEntry) -> Result<Arc<TableState>> {
    let mut live = HashSet::new();
    let mut max_seq = 0;
    let state = open_table(
        &engine.shared.config,
        &engine.shared.objects,
        t,
        &engine.shared.cache,
        (&mut live, &mut max_seq),
        &|_| true,
    )?;
    engine
        .shared
        .tables
        .write()
        .insert(state.name.clone(), state.clone());
    Ok(state)
}

/// Deletes store files a catalog update unlisted (a failure leaves an orphan, removed
/// at the next open).
fn delete_files(engine: &Engine, files: &[FileEntry], why: &str) {
    for f in files {
        if let Err(e) = engine.shared.objects.delete(&f.name()) {
            tracing::warn!(file = f.id, error = %e, "could not remove a store file of a {why}");
        }
    }
}

/// The name prefix of the table snapshots backups take for the length of their copy.
pub(crate) const BACKUP_SNAPSHOT_PREFIX: &str = "basalt-backup-";

/// Deletes the snapshots backups of an earlier process left (it died during the copy), and
/// the files only they listed; at open, on a local directory opened whole (no backup of
/// this directory can be running), before anything else runs.
pub(crate) fn drop_leftover_backup_snapshots(engine: &Engine) -> Result<()> {
    if !engine.shared.objects.is_local() || engine.shared.config.serve_regions.is_some() {
        return Ok(());
    }
    let leftovers = |s: &crate::catalog::CatalogState| -> Vec<String> {
        s.snapshots
            .keys()
            .filter(|n| n.starts_with(BACKUP_SNAPSHOT_PREFIX))
            .cloned()
            .collect()
    };
    if leftovers(&engine.shared.catalog.snapshot()).is_empty() {
        return Ok(());
    }
    let unlisted = engine.shared.catalog.update(|s| {
        let mut files = Vec::new();
        for name in leftovers(s) {
            if let Some(entry) = s.snapshots.remove(&name) {
                tracing::info!(snapshot = %name, "removing the snapshot of an interrupted backup");
                files.extend(entry.files().into_values());
            }
        }
        Ok(unlisted_of(s, files.into_iter()))
    })?;
    delete_files(engine, &unlisted, "interrupted backup");
    Ok(())
}

/// The error of a snapshot whose tables changed schema or regions while it was taken.
fn changed() -> Error {
    Error::Busy(
        "a table of the snapshot changed its schema or regions while the snapshot was taken \
         (an index created or dropped, regions taken over): take it again"
            .into(),
    )
}

/// Gives every region of `t` a fresh id from `next` and this engine's `writers`.
fn renumber(t: &mut TableEntry, next: &mut u64, writers: &[u64]) {
    for r in &mut t.regions {
        r.id = *next;
        *next += 1;
        r.writers = writers.to_vec();
    }
}

/// Of `files`, those `s` lists no more (each once).
fn unlisted_of(
    s: &crate::catalog::CatalogState,
    files: impl Iterator<Item = FileEntry>,
) -> Vec<FileEntry> {
    let mut seen = HashSet::new();
    files
        .filter(|f| seen.insert(f.id) && !s.lists_file(f.id))
        .collect()
}
