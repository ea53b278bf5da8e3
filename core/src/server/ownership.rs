//! The engine's lease and its regions' ownership in the coordination store
//! ([`crate::coord`]): what a region server will hold in etcd, held by the embedded engine
//! too (in its own [`MemoryCoordination`] unless [`Config::coordination`] shares one; the
//! lease in the engine's own store never expires, as nothing else could take over).
//!
//! Invariants kept: the store's region catalog lists the engine's regions (ids and
//! bounds) after every open, table creation and drop, split and merge; the engine opens
//! only when it holds a lease and owns every region it serves (another live owner fails the open with [`Error::RegionOwned`], having claimed
//! nothing); a region created by a table creation, a split or a merge is claimed, and a
//! region the engine stops serving (its table dropped, a split's parent, a merge's inputs)
//! is released; closing releases every region and revokes the lease. A renewal that finds
//! the lease ended makes the WAL refuse every later write ([`Error::WritesRefused`]) until
//! the engine is reopened: another process may own the regions now. On a shared
//! (versioned) store the engine also moves each owned region's manifest pointer to the
//! catalog version of every change of the region (its claim, a flush, a compaction, a
//! split or merge), at the generation it owns the region at: a move the store refuses
//! (another process owns the region) makes the WAL refuse writes too. Ownership is the
//! liveness half of fencing; the storage half (fenced WAL segments, the catalog's refusal
//! of changes to regions another engine claimed) is the authority.
//!
//! [`MemoryCoordination`]: crate::coord::MemoryCoordination
//! [`Config::coordination`]: super::Config::coordination

use super::config::Config;
use crate::coord::{Coordination, Lease, MemoryCoordination, RegionKey, RegionRecord};
use crate::error::{Error, Result};
use crate::region::Region;
use crate::schema::TableName;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The engine's lease and the generation of each region it owns.
#[derive(Debug)]
pub(crate) struct Ownership {
    coord: Arc<dyn Coordination>,
    lease: Lease,
    held: Mutex<HashMap<RegionKey, u64>>,
    /// The catalog version each owned region's manifest pointer was last moved to here.
    pointed: Mutex<HashMap<RegionKey, u64>>,
    /// Serializes pointer moves: each swaps from the pointer the previous one left.
    pointing: tokio::sync::Mutex<()>,
    /// False for the engine's private store: nothing else can see it, so its lease never
    /// expires (a laptop's sleep must not stop an embedded engine's writes).
    renews: bool,
    /// Until when the lease surely lives: the sending time of its grant or of its last
    /// successful renewal, plus its time to live (the store starts the lease's clock when it
    /// gets the request, which is no earlier).
    valid_until: Mutex<Instant>,
}

impl Ownership {
    /// Takes a lease for the engine of `config`, claims `regions` and records them in the
    /// store's catalog; on any failure releases what it claimed, revokes the lease and
    /// fails.
    pub(crate) async fn begin(config: &Config, regions: Vec<RegionRecord>) -> Result<Arc<Self>> {
        if config.lease_ttl_ms < 3 {
            return Err(Error::bad_argument("lease_ttl_ms must be at least 3"));
        }
        let (coord, ttl, renews) = match &config.coordination {
            Some(c) => (
                Arc::clone(c),
                Duration::from_millis(config.lease_ttl_ms),
                true,
            ),
            None => {
                let own: Arc<dyn Coordination> = Arc::new(MemoryCoordination::default());
                (own, Duration::MAX, false)
            }
        };
        let process = process_name(config);
        let asked = Instant::now();
        let lease = coord.grant_lease(&process, ttl).await?;
        let valid_until = asked.checked_add(ttl).unwrap_or(asked);
        let own = Arc::new(Ownership {
            coord,
            lease,
            held: Mutex::new(HashMap::new()),
            pointed: Mutex::new(HashMap::new()),
            pointing: tokio::sync::Mutex::new(()),
            renews,
            valid_until: Mutex::new(valid_until),
        });
        let keys = regions.iter().map(|r| r.key.clone()).collect();
        let claimed = match own.claim(keys).await {
            Ok(()) => own.publish(regions).await,
            Err(e) => Err(e),
        };
        if let Err(e) = claimed {
            own.end().await;
            return Err(e);
        }
        Ok(own)
    }

    /// Records `regions` in the store's catalog, replacing what it holds of them.
    pub(crate) async fn publish(&self, regions: Vec<RegionRecord>) -> Result<()> {
        let mut current: HashMap<TableName, Vec<RegionRecord>> = HashMap::new();
        for r in regions {
            if !current.contains_key(&r.key.table) {
                let listed = self.coord.regions(&r.key.table).await?;
                current.insert(r.key.table.clone(), listed);
            }
            let stored = current
                .get(&r.key.table)
                .and_then(|l| l.iter().find(|x| x.key == r.key))
                .map(|x| (x.revision, x.start == r.start && x.end == r.end));
            let (key, start, end) = (r.key.clone(), r.start.clone(), r.end.clone());
            let written = match stored {
                Some((_, true)) => continue,
                Some((revision, false)) => self.coord.put_region(r, Some(revision)).await,
                None => self.coord.put_region(r, None).await,
            };
            if let Err(e @ Error::CoordinationConflict(_)) = written {
                // Another process changed the record first: fine if it now says the same
                // (two engines bringing the list in line at once).
                let now = self.coord.regions(&key.table).await?;
                if !now
                    .iter()
                    .any(|x| x.key == key && x.start == start && x.end == end)
                {
                    return Err(e);
                }
            } else {
                written?;
            }
        }
        Ok(())
    }

    /// The store's list of `table`'s regions.
    pub(crate) async fn listed(&self, table: &TableName) -> Result<Vec<RegionRecord>> {
        self.coord.regions(table).await
    }

    /// Makes the store's list of a table's regions, `listed` (read before the catalog:
    /// every record was listed after its catalog update, so the catalog read later has
    /// it), the catalog's regions `catalog` (none once the table is dropped): the ones
    /// missing, or listed with other bounds, are published first, then the listed ones the
    /// catalog lacks are removed, so no row of the table is left without a listed region.
    /// Returns how many records were written and how many removed.
    pub(crate) async fn sync_listing(
        &self,
        listed: Vec<RegionRecord>,
        catalog: Vec<RegionRecord>,
    ) -> Result<(usize, usize)> {
        let gone: Vec<RegionKey> = listed
            .iter()
            .filter(|l| !catalog.iter().any(|r| r.key == l.key))
            .map(|l| l.key.clone())
            .collect();
        let missing: Vec<RegionRecord> = catalog
            .into_iter()
            .filter(|r| {
                !listed
                    .iter()
                    .any(|l| l.key == r.key && l.start == r.start && l.end == r.end)
            })
            .collect();
        let written = missing.len();
        self.publish(missing).await?;
        self.unpublish(&gone).await?;
        Ok((written, gone.len()))
    }

    /// Removes `regions` from the store's catalog (those it lists).
    pub(crate) async fn unpublish(&self, regions: &[RegionKey]) -> Result<()> {
        let mut current: HashMap<TableName, Vec<RegionRecord>> = HashMap::new();
        for r in regions {
            if !current.contains_key(&r.table) {
                current.insert(r.table.clone(), self.coord.regions(&r.table).await?);
            }
            let revision = current
                .get(&r.table)
                .and_then(|l| l.iter().find(|x| x.key == *r))
                .map(|x| x.revision);
            let Some(rev) = revision else { continue };
            match self.coord.remove_region(r, rev).await {
                Err(e @ Error::CoordinationConflict(_)) => {
                    // Fine if another process removed it first.
                    let now = self.coord.regions(&r.table).await?;
                    if now.iter().any(|x| x.key == *r) {
                        return Err(e);
                    }
                }
                other => other?,
            }
        }
        Ok(())
    }

    /// The engine's lease.
    pub(crate) fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The generation the engine owns `region` at, if it owns it.
    pub(crate) fn generation(&self, region: &RegionKey) -> Option<u64> {
        self.held.lock().get(region).copied()
    }

    /// Claims `regions` under the engine's lease.
    pub(crate) async fn claim(&self, regions: Vec<RegionKey>) -> Result<()> {
        for r in regions {
            let generation = self.coord.claim_region(&r, self.lease.id).await?;
            self.held.lock().insert(r, generation);
        }
        Ok(())
    }

    /// Moves the manifest pointer of each of `regions` the engine owns to catalog version
    /// `version` (`catalog/{version:020}`), at the generation it owns the region at, from
    /// the pointer it last set (or the one it found, after its claim). A pointer already
    /// at `version` or later stays. Fails with [`Error::CoordinationConflict`] when the
    /// region changed owner or generation: the engine no longer owns it.
    pub(crate) async fn point_manifests(&self, regions: &[RegionKey], version: u64) -> Result<()> {
        let _serial = self.pointing.lock().await;
        for key in regions {
            let Some(generation) = self.generation(key) else {
                continue;
            };
            let last = self.pointed.lock().get(key).copied();
            if last.is_some_and(|l| l >= version) {
                continue;
            }
            let expected = match last {
                Some(l) => Some(Bytes::from(manifest_pointer(l))),
                None => self.coord.manifest(key).await?,
            };
            self.coord
                .swap_manifest(
                    key,
                    self.lease.id,
                    generation,
                    expected.as_deref(),
                    Bytes::from(manifest_pointer(version)),
                )
                .await?;
            self.pointed.lock().insert(key.clone(), version);
        }
        Ok(())
    }

    /// Gives `regions` up (those the engine owns). A region the store refused to release
    /// stays held, so that a later call ([`crate::Engine::release_unserved`]) tries again:
    /// until then another engine's claim of it fails with `RegionOwned`.
    pub(crate) async fn release(&self, regions: &[RegionKey]) {
        for r in regions {
            let generation = self.held.lock().remove(r);
            self.pointed.lock().remove(r);
            if let Some(g) = generation {
                if let Err(e) = self.coord.release_region(r, self.lease.id, g).await {
                    tracing::warn!(region = %r, error = %e, "releasing a region failed; kept to try again");
                    self.held.lock().insert(r.clone(), g);
                }
            }
        }
    }

    /// The regions the engine owns.
    pub(crate) fn held(&self) -> Vec<RegionKey> {
        self.held.lock().keys().cloned().collect()
    }

    /// How often the lease is renewed (a third of its time to live), `None` when it never
    /// expires (the engine's private store).
    pub(crate) fn renewal_period(&self) -> Option<Duration> {
        self.renews.then(|| self.lease.ttl / 3)
    }

    /// Renews the lease once.
    pub(crate) async fn keep_alive(&self) -> Result<()> {
        let asked = Instant::now();
        self.coord.keep_alive(self.lease.id).await?;
        if let Some(until) = asked.checked_add(self.lease.ttl) {
            let mut valid = self.valid_until.lock();
            *valid = (*valid).max(until);
        }
        Ok(())
    }

    /// Until when the lease surely lives (`None`: it never expires, the engine's private
    /// store): past it, another process may own the engine's regions.
    pub(crate) fn valid_until(&self) -> Option<Instant> {
        self.renews.then(|| *self.valid_until.lock())
    }

    /// Releases every region and revokes the lease.
    pub(crate) async fn end(&self) {
        let all: Vec<RegionKey> = self.held.lock().keys().cloned().collect();
        self.release(&all).await;
        if let Err(e) = self.coord.revoke_lease(self.lease.id).await {
            tracing::warn!(lease = self.lease.id, error = %e, "revoking the lease failed");
        }
    }
}

/// Fails with [`Error::RegionOwned`] when a region the engine of `config` is to open (all
/// of the store's, or [`Config::serve_regions`]) is owned by another live process in a
/// shared [`Config::coordination`] store. Checked before the open claims the catalog or
/// fences a WAL writer, so that a live owner is not fenced by an open that then fails; the
/// claim after the open stays the authority (a region taken between the two fails it).
pub(crate) async fn check_unowned(config: &Config) -> Result<()> {
    let Some(coord) = &config.coordination else {
        return Ok(());
    };
    let objects = config.resolved_objects();
    if !crate::catalog::Catalog::exists(&*objects)? {
        return Ok(());
    }
    let state = crate::catalog::Catalog::open(&objects)?.snapshot();
    let me = process_name(config);
    for t in state.tables.values() {
        let wanted = t.regions.iter().filter(|r| {
            config
                .serve_regions
                .as_ref()
                .is_none_or(|ids| ids.contains(&r.id))
        });
        for r in wanted {
            let key = RegionKey::new(t.descriptor.name.clone(), r.id);
            if let Some(o) = coord.owner(&key).await? {
                if o.alive && o.process != me {
                    return Err(Error::RegionOwned {
                        region: key.to_string(),
                        owner: o.process,
                    });
                }
            }
        }
    }
    Ok(())
}

/// A region's manifest pointer naming catalog version `version`: the region's manifest
/// is as its owner last wrote it in that version or any newer one.
pub(crate) fn manifest_pointer(version: u64) -> String {
    format!("catalog/{version:020}")
}

/// The process name the engine of `config` holds its lease under.
fn process_name(config: &Config) -> String {
    config
        .process_name
        .clone()
        .unwrap_or_else(|| format!("basalt@{}", config.dir.display()))
}

/// The keys of regions `ids` of `table`.
pub(crate) fn keys(table: &TableName, ids: impl IntoIterator<Item = u64>) -> Vec<RegionKey> {
    ids.into_iter()
        .map(|id| RegionKey::new(table.clone(), id))
        .collect()
}

/// The catalog records of `regions` of `table`.
pub(crate) fn records(table: &TableName, regions: &[Arc<Region>]) -> Vec<RegionRecord> {
    regions
        .iter()
        .map(|r| record(table, r.id, &r.start, &r.end))
        .collect()
}

/// The catalog record of region `id` of `table`, `[start, end)`, not yet stored.
pub(crate) fn record(table: &TableName, id: u64, start: &Bytes, end: &Bytes) -> RegionRecord {
    RegionRecord {
        key: RegionKey::new(table.clone(), id),
        start: start.clone(),
        end: end.clone(),
        revision: 0,
    }
}
