//! [`MemoryCoordination`]: the coordination store of the embedded engine, in memory, and
//! the clocks its leases expire by ([`SystemClock`]; [`ManualClock`] for deterministic
//! tests).
//!
//! Invariants: every call runs under one mutex, so each is atomic and they are totally
//! ordered; a lease is alive while the clock is below its deadline and it was not revoked,
//! and once dead it stays dead (a renewal cannot revive it).

use super::{Coordination, Lease, Ownership, RegionKey, RegionRecord};
use crate::error::{Error, Result};
use crate::schema::TableName;
use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A monotonic clock, in milliseconds from an arbitrary start.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in milliseconds.
    fn now_ms(&self) -> u64;
}

/// The machine's monotonic clock.
#[derive(Debug)]
pub struct SystemClock {
    start: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that moves only when told: leases expire exactly when a test says.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
struct LeaseState {
    process: String,
    ttl_ms: u64,
    deadline_ms: u64,
    revoked: bool,
}

#[derive(Debug)]
struct Owner {
    lease: u64,
    generation: u64,
}

#[derive(Debug, Default)]
struct State {
    next_lease: u64,
    next_revision: u64,
    node_generations: HashMap<String, u64>,
    leases: HashMap<u64, LeaseState>,
    /// Owners, and the generation of regions that had one (kept after a release).
    owners: HashMap<RegionKey, Owner>,
    generations: HashMap<RegionKey, u64>,
    catalog: BTreeMap<RegionKey, RegionRecord>,
    manifests: HashMap<RegionKey, Bytes>,
}

impl State {
    fn alive(&self, lease: u64, now: u64) -> bool {
        self.leases
            .get(&lease)
            .is_some_and(|l| !l.revoked && now < l.deadline_ms)
    }

    fn owned_by(&self, region: &RegionKey, lease: u64, generation: u64, now: u64) -> bool {
        self.owners
            .get(region)
            .is_some_and(|o| o.lease == lease && o.generation == generation)
            && self.alive(lease, now)
    }
}

/// The in-memory [`Coordination`]: one per embedded engine by default, or shared by
/// several engines (and tests) in one process.
#[derive(Debug)]
pub struct MemoryCoordination {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl Default for MemoryCoordination {
    fn default() -> Self {
        Self::new(Arc::new(SystemClock::default()))
    }
}

impl MemoryCoordination {
    /// A store whose leases expire by `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        MemoryCoordination {
            clock,
            state: Mutex::new(State::default()),
        }
    }
}

fn conflict(what: String) -> Error {
    Error::CoordinationConflict(what)
}

#[async_trait]
impl Coordination for MemoryCoordination {
    async fn grant_lease(&self, process: &str, ttl: Duration) -> Result<Lease> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ttl_ms == 0 {
            return Err(Error::bad_argument(
                "a lease needs a time to live of 1 ms or more",
            ));
        }
        let now = self.clock.now_ms();
        let mut s = self.state.lock();
        s.next_lease += 1;
        let id = s.next_lease;
        let node_generation = {
            let g = s.node_generations.entry(process.to_string()).or_insert(0);
            *g += 1;
            *g
        };
        s.leases.insert(
            id,
            LeaseState {
                process: process.to_string(),
                ttl_ms,
                deadline_ms: now.saturating_add(ttl_ms),
                revoked: false,
            },
        );
        Ok(Lease {
            id,
            process: process.to_string(),
            node_generation,
            ttl,
        })
    }

    async fn keep_alive(&self, lease: u64) -> Result<()> {
        let now = self.clock.now_ms();
        let mut s = self.state.lock();
        if !s.alive(lease, now) {
            return Err(Error::LeaseExpired { lease });
        }
        if let Some(l) = s.leases.get_mut(&lease) {
            l.deadline_ms = now.saturating_add(l.ttl_ms);
        }
        Ok(())
    }

    async fn revoke_lease(&self, lease: u64) -> Result<()> {
        if let Some(l) = self.state.lock().leases.get_mut(&lease) {
            l.revoked = true;
        }
        Ok(())
    }

    async fn claim_region(&self, region: &RegionKey, lease: u64) -> Result<u64> {
        let now = self.clock.now_ms();
        let mut s = self.state.lock();
        if !s.alive(lease, now) {
            return Err(Error::LeaseExpired { lease });
        }
        if let Some(o) = s.owners.get(region) {
            if o.lease == lease {
                return Ok(o.generation);
            }
            if s.alive(o.lease, now) {
                let owner = s
                    .leases
                    .get(&o.lease)
                    .map(|l| l.process.clone())
                    .unwrap_or_default();
                return Err(Error::RegionOwned {
                    region: region.to_string(),
                    owner,
                });
            }
        }
        let generation = s.generations.get(region).copied().unwrap_or(0) + 1;
        s.generations.insert(region.clone(), generation);
        s.owners.insert(region.clone(), Owner { lease, generation });
        Ok(generation)
    }

    async fn release_region(&self, region: &RegionKey, lease: u64, generation: u64) -> Result<()> {
        let mut s = self.state.lock();
        if s.owners
            .get(region)
            .is_some_and(|o| o.lease == lease && o.generation == generation)
        {
            s.owners.remove(region);
        }
        Ok(())
    }

    async fn owner(&self, region: &RegionKey) -> Result<Option<Ownership>> {
        let now = self.clock.now_ms();
        let s = self.state.lock();
        Ok(s.owners.get(region).map(|o| Ownership {
            lease: o.lease,
            process: s
                .leases
                .get(&o.lease)
                .map(|l| l.process.clone())
                .unwrap_or_default(),
            generation: o.generation,
            alive: s.alive(o.lease, now),
        }))
    }

    async fn put_region(&self, mut record: RegionRecord, expected: Option<u64>) -> Result<u64> {
        let mut s = self.state.lock();
        let current = s.catalog.get(&record.key).map(|r| r.revision);
        if current != expected {
            return Err(conflict(format!(
                "region {} is at revision {current:?}, not {expected:?}",
                record.key
            )));
        }
        s.next_revision += 1;
        record.revision = s.next_revision;
        let revision = record.revision;
        s.catalog.insert(record.key.clone(), record);
        Ok(revision)
    }

    async fn remove_region(&self, region: &RegionKey, expected: u64) -> Result<()> {
        let mut s = self.state.lock();
        let current = s.catalog.get(region).map(|r| r.revision);
        if current != Some(expected) {
            return Err(conflict(format!(
                "region {region} is at revision {current:?}, not {expected}"
            )));
        }
        s.catalog.remove(region);
        Ok(())
    }

    async fn regions(&self, table: &TableName) -> Result<Vec<RegionRecord>> {
        let s = self.state.lock();
        let mut out: Vec<RegionRecord> = s
            .catalog
            .values()
            .filter(|r| r.key.table == *table)
            .cloned()
            .collect();
        out.sort_by(|a, b| a.start.cmp(&b.start));
        Ok(out)
    }

    async fn swap_manifest(
        &self,
        region: &RegionKey,
        lease: u64,
        generation: u64,
        expected: Option<&[u8]>,
        new: Bytes,
    ) -> Result<()> {
        let now = self.clock.now_ms();
        let mut s = self.state.lock();
        if !s.owned_by(region, lease, generation, now) {
            return Err(conflict(format!(
                "region {region} is not owned by lease {lease} at generation {generation}"
            )));
        }
        if s.manifests.get(region).map(|m| m.as_ref()) != expected {
            return Err(conflict(format!("the manifest pointer of {region} moved")));
        }
        s.manifests.insert(region.clone(), new);
        Ok(())
    }

    async fn manifest(&self, region: &RegionKey) -> Result<Option<Bytes>> {
        Ok(self.state.lock().manifests.get(region).cloned())
    }
}
