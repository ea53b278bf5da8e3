//! The versioned catalog of an object store shared by engines: version `n` is the object
//! `catalog/{n:020}`, created create-if-absent and never changed; the newest is the
//! catalog. An engine that opens claims the next version (a copy of the newest, its file
//! ids moved past any the previous owner may still hand out), so the previous owner's next
//! update finds its version taken and fails with [`Error::Fenced`]: it can neither list a
//! store file nor lose one after the takeover. Versions older than the previous one are
//! deleted once a newer one is stored.

use super::{encode, Catalog, CatalogState};
use crate::error::{Error, Result};
use crate::objects::{Objects, PutMode};
use std::io;

/// The folder of the versions.
pub(super) const FOLDER: &str = "catalog";

/// How far a claim moves the next file id: past every id the previous owner can still
/// hand out before its next catalog update fails.
const FILE_ID_SKIP: u64 = 1 << 24;

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

/// Stores version `n`; a version taken already means another engine owns the catalog now.
pub(super) fn create(objects: &dyn Objects, n: u64, bytes: &[u8]) -> Result<()> {
    match objects.put(&name(n), bytes, PutMode::Create) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Error::Fenced {
                writer: FOLDER.to_string(),
                segment: n,
            });
        }
        Err(e) => return Err(e.into()),
    }
    if let Some(old) = n.checked_sub(2) {
        if let Err(e) = objects.delete(&name(old)) {
            tracing::warn!(version = old, error = %e, "could not delete an old catalog version");
        }
    }
    Ok(())
}

impl Catalog {
    /// Takes the catalog over for this engine: raises every region's generation and, on a
    /// versioned store, stores the next version (the newest state, its next file id moved
    /// on), re-reading when another engine stored one first. A local catalog (one engine
    /// per directory, under its lock) stores nothing here.
    pub fn claim(&self) -> Result<()> {
        // The order `update` takes them in: the state, then the version.
        let mut state = self.state.lock();
        let mut version = self.version.lock();
        let Some(mut n) = *version else {
            // A directory has one engine at a time (its lock): the raised generations are
            // written with the next update (no file of this engine is listed before it).
            raise_generations(&mut state);
            return Ok(());
        };
        loop {
            let mut next: CatalogState = state.clone();
            next.next_file_id = next.next_file_id.saturating_add(FILE_ID_SKIP);
            raise_generations(&mut next);
            match create(&*self.objects, n + 1, &encode(&next)?) {
                Ok(()) => {
                    *state = next;
                    *version = Some(n + 1);
                    return Ok(());
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
}

impl Catalog {
    /// Fails with [`Error::Fenced`] when another engine stored a newer version since this
    /// one's claim or last update: it took the store over. An engine that created its WAL
    /// writer folder after its claim and then passes this check is fenced by every later
    /// claimer, which lists writer folders only after its own claim; one that fails it may
    /// have been missed, and must not acknowledge a write.
    pub fn check_claim(&self) -> Result<()> {
        let Some(n) = *self.version.lock() else {
            return Ok(());
        };
        match newest(&*self.objects)? {
            Some(m) if m > n => Err(Error::Fenced {
                writer: FOLDER.to_string(),
                segment: n + 1,
            }),
            _ => Ok(()),
        }
    }
}

/// Raises every region's generation: an engine took the store over.
fn raise_generations(state: &mut CatalogState) {
    for t in state.tables.values_mut() {
        for r in &mut t.regions {
            r.generation = r.generation.saturating_add(1);
        }
    }
}
