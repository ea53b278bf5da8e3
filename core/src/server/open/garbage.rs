//! Collecting what dead WAL writers left on a shared store: HBase's log cleaner for the
//! WALs of crashed region servers, and its cleaner of the store files a crash left
//! unreferenced.
//!
//! A writer is *dead* once nothing can need it again:
//!
//! - it is fenced (its last object is the empty fence another engine wrote when it took
//!   the writer's regions over), so its engine writes nothing more there; a live writer is
//!   never fenced, and an engine whose writes are refused by a fence opens again under a
//!   new writer number (the catalog hands out each number once);
//! - no region of the catalog's newest version names it among its writers (tables and
//!   snapshots alike): a new owner reads a dead writer's edits while the region names it,
//!   and names only itself once those edits are flushed (`takeover::settle_writers`); only
//!   a claim adds a writer to a region, and only its own. So a dead writer holds no region
//!   and can make no catalog update that lists a file;
//! - it is not this engine's own.
//!
//! What goes, in this order, so that a collection cut short anywhere is finished by the
//! next one:
//!
//! 1. the store files of a dead writer's blocks of file ids ([`CatalogState::file_blocks`])
//!    that no region and no snapshot lists: a file is listed for the first time only by
//!    its writer (`catalog/file_blocks.rs`), so these are a crash's leftovers and never
//!    needed: the output of a flush or a compaction of the dead writer that died before
//!    its catalog update, or its files that a compaction replaced and a crash kept from
//!    being deleted (such files of a live writer wait until it is dead);
//! 2. the dead writers' blocks, from the catalog (one update); their files still listed
//!    are deleted by whoever unlists them, as any file is;
//! 3. the writer folders (`wal/w{n}`): within a folder the objects go in ascending order,
//!    the fence last, so a folder cut short is still fenced.
//!
//! A catalog with a region whose writers are unknown (format < 9) needs every writer:
//! nothing is collected. Files of blocks the catalog does not record (a catalog older than
//! format 14, a local directory) are never collected here.
//!
//! Invariants: a folder or a file goes only when the checks above held on the catalog
//! read after the folder was found fenced and the store files were listed (a fence is
//! never lifted, and a dead writer lists nothing, so the order is safe); a file any region
//! or snapshot lists is never deleted.

use crate::catalog::{store_file_id, CatalogState, RegionEntry, CLOSED_CLEANLY};
use crate::error::Result;
use crate::server::Engine;
use crate::wal::{writer_of_object, OBJECT_ROOT};
use std::collections::{BTreeMap, BTreeSet};

/// What one collection found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GarbageCollection {
    /// Writer folders deleted, by writer number.
    pub removed: Vec<u64>,
    /// WAL objects deleted (segments and fences).
    pub objects: usize,
    /// Fenced writers kept because a region still names them.
    pub still_needed: Vec<u64>,
    /// Store files deleted: dead writers' files that no region or snapshot lists.
    pub store_files: Vec<String>,
}

/// Collects what the dead writers of `engine`'s shared store left (see the module doc);
/// nothing on a local directory.
pub(crate) fn collect(engine: &Engine) -> Result<GarbageCollection> {
    let shared = &engine.shared;
    let mut out = GarbageCollection::default();
    if shared.objects.is_local() {
        return Ok(out);
    }
    let own = shared.catalog.writer();
    // The store files and the folders (and whether each is fenced), before the catalog is
    // read. Within a folder: other objects first, then segments by id, the fence last.
    let store_files = shared.objects.list("data")?;
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
    let Some(needed) = named_writers(&state) else {
        return Ok(out);
    };
    let (dead, still_needed): (BTreeSet<u64>, Vec<u64>) = {
        let (needed_now, dead): (Vec<u64>, Vec<u64>) =
            fenced.into_iter().partition(|w| needed.contains(w));
        (dead.into_iter().collect(), needed_now)
    };
    out.still_needed = still_needed;
    if dead.is_empty() {
        return Ok(out);
    }
    // 1. Their files that nothing lists.
    let listed = state.listed_file_names();
    for name in store_files {
        let Some(writer) = store_file_id(&name).and_then(|id| state.block_writer(id)) else {
            continue;
        };
        if dead.contains(&writer) && !listed.contains(&name) {
            shared.objects.delete(&name)?;
            tracing::info!(file = %name, writer, "removed a store file a dead writer left");
            out.store_files.push(name);
        }
    }
    // 2. Their blocks.
    if state.file_blocks.values().any(|w| dead.contains(w)) {
        shared.catalog.update(|s| {
            s.file_blocks.retain(|_, w| !dead.contains(w));
            Ok(())
        })?;
    }
    // 3. Their folders.
    for writer in dead {
        for (_, name) in folders.remove(&writer).unwrap_or_default() {
            shared.objects.delete(&name)?;
            out.objects += 1;
        }
        tracing::info!(writer, "removed the WAL of a dead writer");
        out.removed.push(writer);
    }
    Ok(out)
}

/// The writers some region of a table or a snapshot names, or `None` when a region's
/// writers are unknown (a catalog older than format 9: every writer is needed).
fn named_writers(state: &CatalogState) -> Option<BTreeSet<u64>> {
    let regions: Vec<&RegionEntry> = state
        .tables
        .values()
        .chain(state.snapshots.values().flat_map(|s| s.tables.values()))
        .flat_map(|t| &t.regions)
        .collect();
    if regions.iter().any(|r| r.writers.is_empty()) {
        return None;
    }
    Some(
        regions
            .iter()
            .flat_map(|r| r.writers.iter().copied())
            .filter(|w| *w != CLOSED_CLEANLY)
            .collect(),
    )
}
