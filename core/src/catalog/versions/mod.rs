//! The versioned catalog of an object store shared by engines: version `n` is the object
//! `catalog/{n:020}`, created create-if-absent and never changed; the newest is the
//! catalog. Versions older than the previous one are deleted once a newer one is stored.
//!
//! Claims: an engine that opens the whole store claims the next version (a copy of the
//! newest, every region's generation raised, its file ids moved past any the previous owner
//! may still hand out, [`CatalogState::store_claim`] set to it); from then on every update
//! of an engine whose own claim is older fails with [`Error::Fenced`]. An engine that opens
//! some regions claims only those (their generations raised, its WAL writer added to their
//! [`RegionEntry::writers`](super::RegionEntry::writers)): engines serving disjoint regions
//! share the store. Each engine remembers the regions it holds and their generations; an
//! update that finds its version taken is applied again to the newest version, and is
//! refused with [`Error::Fenced`] when it would change or remove a region the engine does
//! not hold at the newest version's generation (another engine claimed it since). A region
//! an update creates (a new table, a split's daughters) is held by the engine that created
//! it. Every claim also takes the next WAL writer number
//! ([`CatalogState::next_writer`]), so no two engines write in one folder.

use super::{encode, Catalog, CatalogState, RegionEntry, FILE_ID_BLOCK};
use crate::error::{Error, Result};
use crate::objects::{Objects, PutMode};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::sync::Arc;

/// What an engine claimed of a versioned store.
#[derive(Debug, Default)]
pub(crate) struct Claim {
    /// The catalog version its claim was stored as (0: no claim, nothing is vetted).
    epoch: u64,
    /// Its WAL writer number (0: none).
    writer: u64,
    /// The regions it holds, with the generation it holds each at.
    held: HashMap<u64, u64>,
}

/// How many times a version listed and then deleted is looked for again.
const REREADS: usize = 64;

/// Opens the newest version of `objects` again: the one listed was deleted meanwhile.
pub(super) fn open_again(objects: &Arc<dyn Objects>) -> Result<Catalog> {
    for _ in 0..REREADS {
        let Some(n) = newest(&**objects)? else {
            break;
        };
        match objects.read(&name(n)) {
            Ok(bytes) => {
                let state = super::decode(&objects.locate(&name(n)), &bytes)?;
                return Ok(Catalog {
                    objects: Arc::clone(objects),
                    state: parking_lot::Mutex::new(state),
                    version: parking_lot::Mutex::new(Some(n)),
                    claim: parking_lot::Mutex::new(Claim::default()),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Io(io::Error::new(
        io::ErrorKind::NotFound,
        "the catalog's newest version kept disappearing while being read",
    )))
}

/// The folder of the versions.
pub(super) const FOLDER: &str = "catalog";

/// How far a claim moves the next file id first: past every id a previous owner of a
/// catalog older than blocks may still hand out.
const FILE_ID_SKIP: u64 = 1 << 24;

/// What a claim gave the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// Its WAL writer number (0 on a local directory, which has one WAL).
    pub writer: u64,
    /// The store file ids it may hand out (unbounded on a local directory).
    pub file_ids: std::ops::Range<u64>,
}

/// The object name of version `n`.
pub(super) fn name(n: u64) -> String {
    format!("{FOLDER}/{n:020}")
}

/// The newest version stored, if any.
pub(super) fn newest(objects: &dyn Objects) -> Result<Option<u64>> {
    Ok(objects
        .list(FOLDER)?
        .iter()
        .filter_map(|n| n.strip_prefix(FOLDER)?.strip_prefix('/'))
        .filter(|n| n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse().ok())
        .max())
}

/// How many ancestors a version records in its lineage.
const LINEAGE: usize = 32;

/// Stores `state` as version `n` (its lineage gaining `n` with a fresh nonce), which must
/// be the newest or an ancestor of the newest afterwards. A version taken already fails
/// with [`Error::Fenced`]: the caller's state is stale. So does a newer version that does
/// not descend from this one: old versions are deleted, so an engine two or more versions
/// behind creates one again without a conflict, and its change would be stored where no
/// reader looks; its object is removed again. A newer version that descends from this one
/// (another engine stored it on top meanwhile) means the change is in: stored.
pub(super) fn create(objects: &dyn Objects, n: u64, state: &mut CatalogState) -> Result<()> {
    let nonce = fresh_nonce(n);
    state.lineage.push((n, nonce));
    let extra = state.lineage.len().saturating_sub(LINEAGE);
    state.lineage.drain(..extra);
    let taken = || Error::Fenced {
        writer: FOLDER.to_string(),
        segment: n,
    };
    // A newer version already stored: this state is stale (and `n` may be a deleted one).
    if newest(objects)?.is_some_and(|m| m >= n) {
        return Err(taken());
    }
    match objects.put(&name(n), &encode(state)?, PutMode::Create) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(taken()),
        Err(e) => return Err(e.into()),
    }
    if !descends(objects, n, nonce)? {
        if let Err(e) = objects.delete(&name(n)) {
            tracing::warn!(version = n, error = %e, "could not delete a stale catalog version");
        }
        return Err(taken());
    }
    if let Some(old) = n.checked_sub(2) {
        if let Err(e) = objects.delete(&name(old)) {
            tracing::warn!(version = old, error = %e, "could not delete an old catalog version");
        }
    }
    Ok(())
}

/// A nonce for version `n`: the standard library's randomly keyed hasher (its keys come
/// from the operating system once per thread, then change for each hasher built).
fn fresh_nonce(n: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// Whether the newest version is version `n` as stored with `nonce`, or descends from it.
fn descends(objects: &dyn Objects, n: u64, nonce: u64) -> Result<bool> {
    for _ in 0..REREADS {
        let m = match newest(objects)? {
            Some(m) if m > n => m,
            _ => return Ok(true),
        };
        let bytes = match objects.read(&name(m)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        let newer = super::decode(&objects.locate(&name(m)), &bytes)?;
        // Past the lineage's reach (more than it remembers were stored between this
        // version's write and the look, after a listing taken just before the write found
        // none newer): taken as not descending, the change is applied again to the newest.
        // Another engine would have to store 31 versions in that moment for it to be there
        // already.
        return Ok(newer.lineage.iter().any(|(v, x)| *v == n && *x == nonce));
    }
    Err(Error::Io(io::Error::other(
        "the catalog's newest version kept disappearing while being read",
    )))
}

impl Catalog {
    /// Takes the whole catalog over for this engine, whose WAL writer number is to be at
    /// least `min_writer`; returns that number (0 on a local directory, which has one WAL).
    /// Raises every region's generation and, on a versioned store, stores the next version
    /// (the newest state, its next file id moved on, the engine's writer added to every
    /// region's writers, the store claim set to it), re-reading when another engine stored
    /// one first. A local catalog (one engine per directory, under its lock) stores nothing
    /// here: the raised generations are written with the next update.
    pub fn claim(&self, min_writer: u64) -> Result<Claimed> {
        self.claim_with(min_writer, None)
    }

    /// Claims only the regions `regions` (ids of any tables) for this engine: raises their
    /// generations and adds the engine's writer to their writers, leaving every other
    /// region to the engines that serve it; returns the writer number. Only a versioned
    /// store is shared ([`Error::BadArgument`] on a local directory); an id no table has
    /// fails with [`Error::RegionNotFound`].
    pub fn claim_regions(&self, regions: &BTreeSet<u64>, min_writer: u64) -> Result<Claimed> {
        if self.version.lock().is_none() {
            return Err(Error::bad_argument(
                "only a shared object store can be opened region by region",
            ));
        }
        self.claim_with(min_writer, Some(regions))
    }

    fn claim_with(&self, min_writer: u64, only: Option<&BTreeSet<u64>>) -> Result<Claimed> {
        // The order `update` takes them in: the state, then the version.
        let mut state = self.state.lock();
        let mut version = self.version.lock();
        let Some(mut n) = *version else {
            raise_generations(&mut state, None, 0);
            return Ok(Claimed {
                writer: 0,
                file_ids: state.next_file_id..u64::MAX,
            });
        };
        loop {
            let mut next: CatalogState = state.clone();
            let start = next.next_file_id.saturating_add(FILE_ID_SKIP);
            next.next_file_id = start.saturating_add(FILE_ID_BLOCK);
            let writer = next.next_writer.max(min_writer).max(1);
            next.next_writer = writer + 1;
            next.file_blocks.insert(start, writer);
            match only {
                Some(ids) => {
                    let known: BTreeSet<u64> = regions(&next).map(|r| r.id).collect();
                    if let Some(id) = ids.iter().find(|id| !known.contains(id)) {
                        return Err(Error::RegionNotFound {
                            table: "(any table)".into(),
                            id: *id,
                        });
                    }
                }
                None => next.store_claim = n + 1,
            }
            raise_generations(&mut next, only, writer);
            match create(&*self.objects, n + 1, &mut next) {
                Ok(()) => {
                    let held = regions(&next)
                        .filter(|r| only.is_none_or(|ids| ids.contains(&r.id)))
                        .map(|r| (r.id, r.generation))
                        .collect();
                    *self.claim.lock() = Claim {
                        epoch: n + 1,
                        writer,
                        held,
                    };
                    *state = next;
                    *version = Some(n + 1);
                    return Ok(Claimed {
                        writer,
                        file_ids: start..start.saturating_add(FILE_ID_BLOCK),
                    });
                }
                Err(Error::Fenced { .. }) => {
                    let newer = Catalog::open(&self.objects)?;
                    n = newer.version.lock().unwrap_or(n + 1);
                    *state = newer.snapshot();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the newest version of the store, when another engine stored a newer one than
    /// this engine's: tables it created, dropped or split since. Changes nothing on the
    /// store; nothing on a local directory.
    pub fn refresh(&self) -> Result<()> {
        let mut state = self.state.lock();
        if self.version.lock().is_none() {
            return Ok(());
        }
        let newest = Catalog::open(&self.objects)?;
        let found = *newest.version.lock();
        let mut version = self.version.lock();
        if found > *version {
            *state = newest.snapshot();
            *version = found;
        }
        Ok(())
    }

    /// Claims regions `ids` for this engine while it runs, with the writer number it holds
    /// already (HBase's open of a region on a live region server): raises their generations
    /// and adds the engine's writer to their writers in the next version, so that from then
    /// on the engine that held them before can change none of them. Returns their entries
    /// as stored. The caller owns them in the coordination store first (no other live
    /// process does); [`Error::RegionNotFound`] for an id no table has, [`Error::Fenced`]
    /// when another engine claimed the whole store, [`Error::BadArgument`] on a local
    /// directory or for an engine holding no claim.
    pub fn adopt_regions(&self, ids: &BTreeSet<u64>) -> Result<Vec<RegionEntry>> {
        let mut state = self.state.lock();
        let mut version = self.version.lock();
        let (Some(mut n), writer, epoch) = (*version, self.writer(), self.claim.lock().epoch)
        else {
            return Err(Error::bad_argument(
                "only an engine on a shared object store opens regions at run time",
            ));
        };
        if writer == 0 || epoch == 0 {
            return Err(Error::bad_argument(
                "the engine holds no claim of the store to open regions under",
            ));
        }
        loop {
            if state.store_claim > epoch {
                return Err(fenced(state.store_claim));
            }
            let mut next: CatalogState = state.clone();
            let known: BTreeSet<u64> = regions(&next).map(|r| r.id).collect();
            if let Some(id) = ids.iter().find(|id| !known.contains(id)) {
                return Err(Error::RegionNotFound {
                    table: "(any table)".into(),
                    id: *id,
                });
            }
            raise_generations(&mut next, Some(ids), writer);
            match create(&*self.objects, n + 1, &mut next) {
                Ok(()) => {
                    let adopted: Vec<RegionEntry> = regions(&next)
                        .filter(|r| ids.contains(&r.id))
                        .cloned()
                        .collect();
                    let mut claim = self.claim.lock();
                    for r in &adopted {
                        claim.held.insert(r.id, r.generation);
                    }
                    drop(claim);
                    *state = next;
                    *version = Some(n + 1);
                    return Ok(adopted);
                }
                Err(Error::Fenced { .. }) => {
                    let newer = Catalog::open(&self.objects)?;
                    n = newer.version.lock().unwrap_or(n + 1);
                    *state = newer.snapshot();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives regions `ids` up while the engine runs (HBase's close of a region): after the
    /// caller flushed them with their writes stopped, records that no WAL holds an edit of
    /// theirs above their flushed sequence id (their writers become [`CLOSED_CLEANLY`]), so
    /// their next opener fences and replays nothing; with `clean` false (an open that
    /// failed before it wrote anything) only this engine's writer is taken off their writers.
    /// Then the engine holds them no more.
    pub fn give_up_regions(&self, ids: &BTreeSet<u64>, clean: bool) -> Result<()> {
        let me = self.writer();
        self.update(|s| {
            for t in s.tables.values_mut() {
                for r in t.regions.iter_mut().filter(|r| ids.contains(&r.id)) {
                    match clean {
                        true => r.writers = vec![CLOSED_CLEANLY],
                        false => r.writers.retain(|w| *w != me),
                    }
                }
            }
            Ok(())
        })?;
        let mut claim = self.claim.lock();
        for id in ids {
            claim.held.remove(id);
        }
        Ok(())
    }

    /// Reserves the next block of store file ids for this engine, at `at_least` or past
    /// it: on a versioned store a catalog update (refused once another engine claimed the
    /// whole store), on a local directory every id from there on.
    pub fn reserve_file_ids(&self, at_least: u64) -> Result<std::ops::Range<u64>> {
        if self.version.lock().is_none() {
            return Ok(at_least..u64::MAX);
        }
        let writer = self.writer();
        let start = self.update(|s| {
            let start = s.next_file_id.max(at_least);
            s.next_file_id = start.saturating_add(FILE_ID_BLOCK);
            s.file_blocks.insert(start, writer);
            Ok(start)
        })?;
        Ok(start..start.saturating_add(FILE_ID_BLOCK))
    }

    /// This engine's WAL writer number on a versioned store (0: none).
    pub fn writer(&self) -> u64 {
        self.claim.lock().writer
    }

    /// Refuses `next`, a change of `base`, when this engine's claim was superseded: another
    /// engine claimed the whole store since, or `next` changes or removes a region the
    /// engine does not hold at `base`'s generation, or changes the schema of a table one of
    /// whose regions it does not hold.
    pub(super) fn vet(&self, base: &CatalogState, next: &CatalogState) -> Result<()> {
        let claim = self.claim.lock();
        if claim.epoch == 0 {
            return Ok(());
        }
        if base.store_claim > claim.epoch {
            return Err(fenced(base.store_claim));
        }
        let before: HashMap<u64, &RegionEntry> = regions(base).map(|r| (r.id, r)).collect();
        let after: HashMap<u64, &RegionEntry> = regions(next).map(|r| (r.id, r)).collect();
        let holds = |r: &RegionEntry| claim.held.get(&r.id) == Some(&r.generation);
        for (id, old) in &before {
            if after.get(id) != Some(old) && !holds(old) {
                tracing::warn!(
                    region = id,
                    generation = old.generation,
                    "catalog change refused: another engine holds the region"
                );
                return Err(fenced(old.generation));
            }
        }
        // A schema change (descriptor, enabled) is the business of an engine holding every
        // region of the table: the others would go on serving the old schema.
        for (key, old) in &base.tables {
            let changed = next
                .tables
                .get(key)
                .is_some_and(|new| new.descriptor != old.descriptor || new.enabled != old.enabled);
            if let Some(r) = old.regions.iter().find(|r| changed && !holds(r)) {
                tracing::warn!(table = %key, region = r.id, "schema change refused: another engine holds a region");
                return Err(fenced(r.generation));
            }
        }
        Ok(())
    }

    /// Records, after `next` replaced `base`, the regions it created as held and those it
    /// removed as gone.
    pub(super) fn track(&self, base: &CatalogState, next: &CatalogState) {
        let mut claim = self.claim.lock();
        if claim.epoch == 0 {
            return;
        }
        let before: BTreeSet<u64> = regions(base).map(|r| r.id).collect();
        let after: HashMap<u64, u64> = regions(next).map(|r| (r.id, r.generation)).collect();
        claim.held.retain(|id, _| after.contains_key(id));
        for (id, generation) in after {
            if !before.contains(&id) {
                claim.held.insert(id, generation);
            }
        }
    }

    /// Fails with [`Error::Fenced`] when another engine claimed the whole store or one of
    /// this engine's regions since this one's claim. An engine that created its WAL writer
    /// folder after its claim and then passes this check is fenced by every later claimer:
    /// its writer number is in the catalog, and claimers fence the writers they find there.
    pub fn check_claim(&self) -> Result<()> {
        if self.version.lock().is_none() {
            return Ok(());
        }
        let newest = Catalog::open(&self.objects)?.snapshot();
        let claim = self.claim.lock();
        if newest.store_claim > claim.epoch {
            return Err(fenced(newest.store_claim));
        }
        let moved = regions(&newest)
            .find(|r| claim.held.get(&r.id).is_some_and(|g| *g != r.generation))
            .map(|r| r.generation);
        match moved {
            Some(generation) => Err(fenced(generation)),
            None => Ok(()),
        }
    }
}

/// The writers of a region closed cleanly ([`Catalog::give_up_regions`]): no WAL holds an
/// edit of it above its flushed sequence id. No engine writes as writer 0 on a shared
/// store (writer numbers start at 1), and no reader reads it.
pub const CLOSED_CLEANLY: u64 = 0;

/// The error of an engine whose claim another engine's superseded.
fn fenced(at: u64) -> Error {
    Error::Fenced {
        writer: FOLDER.to_string(),
        segment: at,
    }
}

/// Every region of every table of `state`.
fn regions(state: &CatalogState) -> impl Iterator<Item = &RegionEntry> {
    state.tables.values().flat_map(|t| t.regions.iter())
}

/// Raises the generation of every region (of those in `only`), adding `writer` (unless 0)
/// to their known writers: an engine took them over.
fn raise_generations(state: &mut CatalogState, only: Option<&BTreeSet<u64>>, writer: u64) {
    for t in state.tables.values_mut() {
        for r in &mut t.regions {
            if only.is_some_and(|ids| !ids.contains(&r.id)) {
                continue;
            }
            r.generation = r.generation.saturating_add(1);
            // Unknown writers (a catalog older than format 9) stay unknown: every writer
            // is read for the region until its next flush.
            if writer > 0 && !r.writers.is_empty() && !r.writers.contains(&writer) {
                r.writers.push(writer);
            }
        }
    }
}

#[cfg(test)]
mod tests;
