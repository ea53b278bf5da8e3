//! Opening some regions of a shared object store (`Config::serve_regions`): what HBase's
//! server-crash procedure does for each region of a dead region server, done by the
//! engine that opens it.
//!
//! The engine claims only its regions in the catalog (their generations raised, its WAL
//! writer added to their writers, see `crate::catalog`), fences every WAL writer that may
//! hold their edits above their flushed sequence ids (the writers the catalog lists for
//! them), replays those writers' records of its regions only, and serves them. The other
//! regions of the store stay listed in its tables, unserved: they refuse reads and writes
//! with [`Error::RegionNotServed`](crate::Error::RegionNotServed), none of their files is
//! opened, and the engine neither flushes, compacts, splits nor deletes anything of them
//! (no orphan removal, no purge of other writers' segments).
//!
//! After the replay the engine flushes the regions that replayed edits (as HBase flushes
//! a region after its recovered edits), and records itself as the only writer of those
//! left with nothing to flush ([`settle_writers`]): later openers read only its WAL.
//! Schema changes (disable, families, coprocessors) need every region of the table served
//! here ([`Error::RegionNotServed`](crate::Error::RegionNotServed) otherwise), and
//! lifecycle hooks run for served regions only.
//!
//! Invariants: every edit an earlier owner acknowledged for a region above the region's
//! flushed sequence id is in a writer the catalog lists for the region (a claim adds the
//! claimer's writer before it writes; a flush, or an open that found nothing to replay,
//! leaves only its own, every older edit being in store files), or the region's writers
//! are unknown (a catalog older than format 9) and every writer is read; so the new owner
//! replays it. The writers it reads are fenced first, so none of them acknowledges anything
//! more; their folders are only read (no cut, rewrite or purge): other regions' edits are
//! there. The writer folders are listed after the claim: an engine whose folder is not
//! there yet fails its own claim check afterwards.

use crate::catalog::{CatalogState, RegionEntry, CLOSED_CLEANLY};
use crate::error::Result;
use crate::server::shared::EngineShared;
use crate::server::Engine;
use std::collections::{BTreeSet, HashSet};

/// `full` with only the regions `served` accepts: what the engine recovers and checks.
pub(crate) fn scoped(full: &CatalogState, served: &dyn Fn(u64) -> bool) -> CatalogState {
    let mut out = full.clone();
    for t in out.tables.values_mut() {
        t.regions.retain(|r| served(r.id));
    }
    out
}

/// The WAL writers an engine with writer number `own` reads (and fences) at open on a
/// shared store: for the whole store (`some` false, or every region of it), every writer
/// listed (`listed`) or named by a region; for some regions (none: nothing), the writers their catalog entries name, or all of
/// them when one of those regions' writers are unknown (a catalog older than format 9).
/// Never its own, nor [`CLOSED_CLEANLY`] (no writer).
pub(crate) fn writers_to_read(
    full: &CatalogState,
    (some, served): (bool, &dyn Fn(u64) -> bool),
    listed: &BTreeSet<u64>,
    own: u64,
) -> BTreeSet<u64> {
    let all = || -> BTreeSet<u64> {
        let named = regions(full).flat_map(|r| r.writers.iter().copied());
        listed.iter().copied().chain(named).collect()
    };
    let mine: Vec<&RegionEntry> = regions(full).filter(|r| served(r.id)).collect();
    let every = !mine.is_empty() && mine.len() == regions(full).count();
    let mut out = match !some || every || mine.iter().any(|r| r.writers.is_empty()) {
        true => all(),
        false => mine
            .iter()
            .flat_map(|r| r.writers.iter().copied())
            .collect(),
    };
    out.remove(&own);
    out.remove(&CLOSED_CLEANLY);
    out
}

/// After the replay: the served regions left with nothing to flush hold no edit above
/// their flushed sequence id in any WAL (every writer that may hold one was read), so
/// their writers become this engine's alone; a later opener reads no other. Nothing on a
/// local directory (one WAL).
pub(crate) fn settle_writers(shared: &EngineShared) -> Result<()> {
    let me = shared.catalog.writer();
    if me == 0 {
        return Ok(());
    }
    let empty: HashSet<u64> = shared
        .all_tables()
        .iter()
        .flat_map(|t| t.served_regions())
        .filter(|r| {
            r.all_stores()
                .iter()
                .all(|s| s.state.read().active.is_empty())
        })
        .map(|r| r.id)
        .collect();
    let settled = |r: &RegionEntry| !empty.contains(&r.id) || r.writers == [me];
    if regions(&shared.catalog.snapshot()).all(settled) {
        return Ok(());
    }
    shared.catalog.update(|s| {
        for t in s.tables.values_mut() {
            for r in t.regions.iter_mut().filter(|r| empty.contains(&r.id)) {
                r.writers = vec![me];
            }
        }
        Ok(())
    })
}

/// After a partial open (HBase flushes a region after replaying its recovered edits):
/// flushes the served regions holding replayed edits, so that only this engine's WAL
/// holds their later edits and the writers they were read from are needed no more.
pub(crate) async fn flush_replayed(engine: &Engine) -> Result<()> {
    if engine.shared.config.serve_regions.is_none() {
        return Ok(());
    }
    for t in engine.shared.all_tables() {
        for r in t.served_regions() {
            if r.all_stores()
                .iter()
                .any(|s| !s.state.read().active.is_empty())
            {
                engine.upkeep.flush_region(&r).await?;
            }
        }
    }
    Ok(())
}

/// Every region of every table of `state`.
fn regions(state: &CatalogState) -> impl Iterator<Item = &RegionEntry> {
    state.tables.values().flat_map(|t| t.regions.iter())
}
