//! Collecting what dead WAL writers left on a shared store: HBase's log cleaner for the
//! WALs of crashed region servers, and its cleaner of the store files nothing references.
//!
//! A writer is *dead* once nothing can need it again:
//!
//! - it is fenced (its last object is the empty fence another engine wrote when it took
//!   regions of the writer over), so its engine appends nothing more there. A partial
//!   takeover fences an engine that may still hold other regions; the next check covers
//!   that;
//! - no region of the catalog's newest version names it among its writers (tables and
//!   snapshots alike): an engine's writer stays among the writers of every region it holds
//!   (a catalog update that changes a region needs the region held at the newest
//!   generation), a new owner reads a dead writer's edits while the region names it, and
//!   names only itself once those edits are flushed (`takeover::settle_writers`). So a
//!   dead writer holds no region, and can make no catalog update that lists a file for
//!   the first time;
//! - it is not this engine's own.
//!
//! What goes, in this order, so that a collection cut short anywhere is finished by the
//! next one:
//!
//! 1. the store files of a dead writer's blocks of file ids ([`CatalogState::file_blocks`])
//!    that no region and no snapshot lists, once they were found so for a grace period
//!    ([`GARBAGE_GRACE`], HBase's five-minute TTL of archived files): a file is listed for
//!    the first time only by its writer (`catalog/file_blocks.rs`), so these are a crash's
//!    leftovers (the output of a flush or a compaction of the dead writer that died before
//!    its catalog update) or files a compaction replaced, which a live engine's scans may
//!    still read for a while (its own deletes wait for its readers; this engine's cannot);
//! 2. the dead writers' blocks, from the catalog (one update), once none of their files
//!    waits; their files still listed are deleted by whoever unlists them, as any file is;
//! 3. the writer folders' segments (`wal/w{n}`), in ascending order. The fence stays for
//!    good: a paused engine that comes back must find it at its next segment id.
//!
//! A catalog with a region whose writers are unknown (format < 9) needs every writer:
//! nothing is collected. Files of blocks the catalog does not record (a catalog older than
//! format 14, a local directory) are never collected here. A region server's engine
//! fences its own WAL when it closes (`Engine::close`), so a writer that stopped cleanly
//! is dead once the regions it closed name it no more.
//!
//! Invariants: a segment or a file goes only when the checks above held on the catalog
//! read after the folder was found fenced and the store files were listed (a fence is
//! never lifted, and a dead writer lists no file for the first time, so the order is
//! safe); a file any region or snapshot lists is never deleted.

use crate::catalog::{store_file_id, CatalogState, RegionEntry, CLOSED_CLEANLY};
use crate::error::Result;
use crate::server::Engine;
use crate::wal::{writer_of_object, OBJECT_ROOT};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How long a dead writer's unlisted store file must have been found so before it is
/// deleted (HBase's `hbase.master.hfilecleaner.ttl`): a scan that began before a
/// compaction replaced the file may read it until then.
pub const GARBAGE_GRACE: Duration = Duration::from_secs(300);

/// What one collection found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GarbageCollection {
    /// Writers whose WAL segments were deleted (their fences stay), by number.
    pub removed: Vec<u64>,
    /// WAL segments deleted.
    pub objects: usize,
    /// Fenced writers kept because a region still names them.
    pub still_needed: Vec<u64>,
    /// Store files deleted: dead writers' files that no region or snapshot lists.
    pub store_files: Vec<String>,
    /// Such files found, still within their grace period: kept for now, with their
    /// writers' blocks and segments.
    pub waiting: Vec<String>,
}

/// The store files an engine's collections found deletable, each with when it was first
/// found so (forgotten once it is not any more).
#[derive(Debug, Default)]
pub(crate) struct Candidates(Mutex<BTreeMap<String, Instant>>);

/// Collects what the dead writers of `engine`'s shared store left (see the module doc),
/// deleting their unlisted store files found so at least `grace` ago; nothing on a local
/// directory.
pub(crate) fn collect(engine: &Engine, grace: Duration) -> Result<GarbageCollection> {
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
    let (needed_now, dead): (Vec<u64>, Vec<u64>) =
        fenced.into_iter().partition(|w| needed.contains(w));
    out.still_needed = needed_now;
    let mut dead: BTreeSet<u64> = dead.into_iter().collect();
    // 1. Their files that nothing lists, once found so for `grace`.
    let listed = state.listed_file_names();
    let unlisted: Vec<(String, u64)> = store_files
        .into_iter()
        .filter(|name| !listed.contains(name))
        .filter_map(|name| {
            let writer = state.block_writer(store_file_id(&name)?)?;
            dead.contains(&writer).then_some((name, writer))
        })
        .collect();
    let ripe = engine.garbage.ripe(&unlisted, grace);
    for (name, writer) in unlisted {
        if !ripe.contains(&name) {
            dead.remove(&writer);
            out.waiting.push(name);
            continue;
        }
        shared.objects.delete(&name)?;
        tracing::info!(file = %name, writer, "removed a store file a dead writer left");
        out.store_files.push(name);
    }
    // 2. Their blocks, once none of their files waits.
    if state.file_blocks.values().any(|w| dead.contains(w)) {
        shared.catalog.update(|s| {
            s.file_blocks.retain(|_, w| !dead.contains(w));
            Ok(())
        })?;
    }
    // 3. Their segments; the fence (the last object) stays.
    for writer in dead {
        let mut objects = folders.remove(&writer).unwrap_or_default();
        objects.pop();
        if objects.is_empty() {
            continue;
        }
        for (_, name) in objects {
            shared.objects.delete(&name)?;
            out.objects += 1;
        }
        tracing::info!(writer, "removed the WAL of a dead writer");
        out.removed.push(writer);
    }
    Ok(out)
}

impl Candidates {
    /// Records the store files `found` deletable now (forgetting the others) and returns
    /// the ones first found so at least `grace` ago.
    fn ripe(&self, found: &[(String, u64)], grace: Duration) -> BTreeSet<String> {
        let mut seen = self.0.lock();
        let now = Instant::now();
        let found: BTreeMap<&String, Instant> = found
            .iter()
            .map(|(name, _)| (name, seen.get(name).copied().unwrap_or(now)))
            .collect();
        *seen = found.iter().map(|(n, at)| ((*n).clone(), *at)).collect();
        seen.iter()
            .filter(|(_, at)| now.duration_since(**at) >= grace)
            .map(|(n, _)| n.clone())
            .collect()
    }
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
