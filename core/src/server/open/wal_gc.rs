//! Collecting dead WAL writers on a shared store: HBase's log cleaner for the WALs of
//! crashed region servers. A writer folder (`wal/w{n}`, its segments and the fence at its
//! end) is deleted once nothing can need it again:
//!
//! - it is fenced (its last object is the empty fence another engine wrote when it took
//!   the writer's regions over), so its engine writes nothing more there; a live writer is
//!   never fenced, and an engine whose writes are refused by a fence opens again under a
//!   new writer number (the catalog hands out each number once);
//! - no region of the catalog's newest version names it among its writers (tables and
//!   snapshots alike): a new owner reads a dead writer's edits while the region names it,
//!   and names only itself once those edits are flushed (`takeover::settle_writers`); only
//!   a claim adds a writer to a region, and only its own;
//! - it is not this engine's own.
//!
//! A catalog with a region whose writers are unknown (format < 9) needs every writer:
//! nothing is collected. Within a folder the objects go in ascending order, the fence last,
//! so a collection cut short leaves a folder that is still fenced and is finished by the
//! next one.
//!
//! Invariant: a folder is deleted only when both checks above held on the catalog read
//! after the folder was found fenced (a fence is never lifted, so the order is safe).

use crate::catalog::{RegionEntry, CLOSED_CLEANLY};
use crate::error::Result;
use crate::server::Engine;
use crate::wal::{writer_of_object, OBJECT_ROOT};
use std::collections::{BTreeMap, BTreeSet};

/// What one collection found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalCollection {
    /// Writer folders deleted, by writer number.
    pub removed: Vec<u64>,
    /// Objects deleted (segments and fences).
    pub objects: usize,
    /// Fenced writers kept because a region still names them.
    pub still_needed: Vec<u64>,
}

/// Collects the dead writers' folders of `engine`'s shared store (see the module doc);
/// nothing on a local directory.
pub(crate) fn collect(engine: &Engine) -> Result<WalCollection> {
    let shared = &engine.shared;
    let mut out = WalCollection::default();
    if shared.objects.is_local() {
        return Ok(out);
    }
    let own = shared.catalog.writer();
    // The folders and whether each is fenced, before the catalog is read. Within a
    // folder: other objects first, then segments by id, the fence (the last) last.
    let mut folders: BTreeMap<u64, Vec<(Option<u64>, String)>> = BTreeMap::new();
    for name in shared.objects.list(OBJECT_ROOT)? {
        if let Some((writer, id)) = writer_of_object(&name) {
            folders.entry(writer).or_default().push((id, name));
        }
    }
    let mut fenced = Vec::new();
    for (writer, objects) in folders.iter_mut() {
        objects.sort();
        let Some((Some(_), last)) = objects.last() else {
            continue;
        };
        if *writer != own && shared.objects.open(last)?.size()? == 0 {
            fenced.push(*writer);
        }
    }
    if fenced.is_empty() {
        return Ok(out);
    }
    shared.catalog.refresh()?;
    let state = shared.catalog.snapshot();
    let regions: Vec<&RegionEntry> = state
        .tables
        .values()
        .flat_map(|t| &t.regions)
        .chain(
            state
                .snapshots
                .values()
                .flat_map(|s| s.tables.values())
                .flat_map(|t| &t.regions),
        )
        .collect();
    if regions.iter().any(|r| r.writers.is_empty()) {
        return Ok(out);
    }
    let needed: BTreeSet<u64> = regions
        .iter()
        .flat_map(|r| r.writers.iter().copied())
        .filter(|w| *w != CLOSED_CLEANLY)
        .collect();
    for writer in fenced {
        if needed.contains(&writer) {
            out.still_needed.push(writer);
            continue;
        }
        for (_, name) in folders.remove(&writer).unwrap_or_default() {
            shared.objects.delete(&name)?;
            out.objects += 1;
        }
        tracing::info!(writer, "removed the WAL of a dead writer");
        out.removed.push(writer);
    }
    Ok(out)
}
